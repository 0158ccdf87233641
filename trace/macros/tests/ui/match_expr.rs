use gradlift_macros::autodiff_reverse;

#[autodiff_reverse(df, Active, Active)]
fn f(x: f64) -> f64 {
    match x > 0.0 {
        true => x,
        false => -x,
    }
}

fn main() {}
