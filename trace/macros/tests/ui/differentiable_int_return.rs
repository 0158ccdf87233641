use gradlift_macros::differentiable;

#[differentiable]
fn half(n: usize) -> usize {
    n / 2
}

fn main() {}
