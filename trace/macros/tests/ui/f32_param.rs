use gradlift_macros::autodiff_reverse;

#[autodiff_reverse(df, Active, Active)]
fn f(x: f32) -> f32 {
    x
}

fn main() {}
