use gradlift_macros::autodiff_reverse;

#[autodiff_reverse(df, Active, Active)]
fn f(x: f64) -> f64 {
    let mut n = 0.0;
    if x > 0.0 && {
        n += 1.0;
        n > 0.5
    } {
        n = x;
    }
    n
}

fn main() {}
