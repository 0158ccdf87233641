use gradlift_macros::autodiff_reverse;

#[autodiff_reverse(df, Duplicated, Active, Active)]
fn f(x: &[f32], t: f64) -> f64 {
    x[0] as f64 * t
}

fn main() {}
