use gradlift_macros::autodiff_reverse;

// A float method the IR has no op for: the message lists those it has.
#[autodiff_reverse(df, Active, Active)]
fn f(x: f64) -> f64 {
    x.asinh() + x.atan2(2.0)
}

fn main() {}
