use gradlift_macros::autodiff_reverse;

#[autodiff_reverse(df, Active, Active)]
fn f(x: f64) -> f64 {
    let mut b = vec![x; 2];
    b.push(1.0);
    b[0] + b[2]
}

fn main() {}
