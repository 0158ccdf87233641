use gradlift_macros::autodiff_reverse;

fn sq(x: f64) -> f64 {
    x * x
}

#[autodiff_reverse(df, Active, Active)]
fn f(x: f64) -> f64 {
    sq(x) + 1.0
}

fn main() {}
