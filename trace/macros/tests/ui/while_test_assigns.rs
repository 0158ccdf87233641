use gradlift_macros::autodiff_reverse;

#[autodiff_reverse(df, Active, Active)]
fn f(x: f64) -> f64 {
    let mut y = x;
    while {
        y = y / 2.0;
        y > 1.0
    } {}
    y
}

fn main() {}
