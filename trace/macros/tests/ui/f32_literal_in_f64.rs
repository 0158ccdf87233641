use gradlift_macros::autodiff_reverse;

#[autodiff_reverse(df, Active, Active)]
fn f(x: f64) -> f64 {
    let h = 0.5f32;
    x * h as f64
}

fn main() {}
