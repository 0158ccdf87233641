use gradlift_macros::autodiff_reverse;

trait Shape {
    fn area(&self) -> f64;
}

#[autodiff_reverse(df, Active, Active)]
fn f<T: Shape>(x: f64) -> f64 {
    x * x
}

fn main() {}
