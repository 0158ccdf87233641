use gradlift_macros::autodiff_reverse;

#[autodiff_reverse(df, Active, Active)]
fn f(n: usize) -> f64 {
    n as f64
}

fn main() {}
