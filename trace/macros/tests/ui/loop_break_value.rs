use gradlift_macros::autodiff_reverse;

#[autodiff_reverse(df, Active, Active)]
fn f(x: f64) -> f64 {
    let mut y = x;
    let z = loop {
        y = y / 2.0;
        if y < 1.0 {
            break y;
        }
    };
    z
}

fn main() {}
