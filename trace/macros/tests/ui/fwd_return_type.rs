use gradlift_macros::autodiff_forward;

#[autodiff_forward(df, Dual, Dual)]
fn f(x: f64) -> (f64, f64) {
    (x, x * x)
}

fn main() {}
