use gradlift_macros::autodiff_forward;

#[autodiff_forward(df, Dual, Dual, Dual)]
fn f(x: f64, n: usize) -> f64 {
    x * n as f64
}

fn main() {}
