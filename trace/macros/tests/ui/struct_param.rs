use gradlift_macros::autodiff_reverse;

struct Point {
    x: f64,
    y: f64,
}

#[autodiff_reverse(df, Duplicated, Active)]
fn norm2(p: &Point) -> f64 {
    p.x * p.x + p.y * p.y
}

fn main() {}
