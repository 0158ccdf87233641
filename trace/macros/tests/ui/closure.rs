use gradlift_macros::autodiff_reverse;

#[autodiff_reverse(df, Active, Active)]
fn f(x: f64) -> f64 {
    let sq = |t: f64| t * t;
    sq(x) + 1.0
}

fn main() {}
