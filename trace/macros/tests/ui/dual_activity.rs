use gradlift_macros::autodiff_reverse;

#[autodiff_reverse(df, Dual, Dual)]
fn f(x: f64) -> f64 {
    x
}

fn main() {}
