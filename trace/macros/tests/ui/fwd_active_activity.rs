use gradlift_macros::autodiff_forward;

#[autodiff_forward(df, Active, Dual)]
fn f(x: f64) -> f64 {
    x * x
}

fn main() {}
