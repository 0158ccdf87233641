use gradlift_macros::autodiff_reverse;

#[autodiff_reverse(df, Active)]
fn f(x: f64) -> f64 {
    x
}

fn main() {}
