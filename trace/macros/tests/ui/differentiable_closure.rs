use gradlift_macros::differentiable;

// A helper's body is translated for both attributes: its errors name its own.
#[differentiable]
fn twice(x: f64) -> f64 {
    let g = |v: f64| v * 2.0;
    g(x)
}

fn main() {}
