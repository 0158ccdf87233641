use gradlift_macros::autodiff_reverse;

#[autodiff_reverse(df, Duplicated, Active)]
fn f(x: &[f64]) -> f64 {
    let mut s = 0.0;
    'outer: for i in 0..x.len() {
        for j in 0..x.len() {
            if x[i] * x[j] < 0.0 {
                break 'outer;
            }
            s += x[i] * x[j];
        }
    }
    s
}

fn main() {}
