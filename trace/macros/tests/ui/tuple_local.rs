use gradlift_macros::autodiff_reverse;

#[autodiff_reverse(df, Active, Active)]
fn f(x: f64) -> f64 {
    let (a, b) = (x * 2.0, x + 1.0);
    a * b
}

fn main() {}
