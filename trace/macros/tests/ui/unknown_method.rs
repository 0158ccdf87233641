use gradlift_macros::autodiff_reverse;

trait Squared {
    fn squared(self) -> Self;
}
impl Squared for f64 {
    fn squared(self) -> f64 {
        self * self
    }
}

#[autodiff_reverse(df, Active, Active)]
fn f(x: f64) -> f64 {
    x.squared() + 1.0
}

fn main() {}
