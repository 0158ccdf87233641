use gradlift_macros::autodiff_reverse;

#[autodiff_reverse(df, Active, Active)]
fn f(x: f64) -> f64 {
    let y = if x > 0.0 { x } else { return 0.0 };
    y * 2.0
}

fn main() {}
