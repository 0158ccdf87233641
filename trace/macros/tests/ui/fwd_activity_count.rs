use gradlift_macros::autodiff_forward;

// `()` returns take no return activity: two parameters, two activities.
#[autodiff_forward(df, Dual, Dual, Dual)]
fn f(x: f64, out: &mut f64) {
    *out = x * x;
}

fn main() {}
