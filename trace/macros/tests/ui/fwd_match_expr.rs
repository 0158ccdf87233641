use gradlift_macros::autodiff_forward;

#[autodiff_forward(df, Dual, Dual)]
fn f(x: f64) -> f64 {
    match x > 0.0 {
        true => x,
        false => -x,
    }
}

fn main() {}
