//! The attribute form of the suite (`benches/attr.rs`: the seven programs as plain
//! Rust under `#[autodiff_reverse]`) against the hand-written gradients of
//! `benches/hand.rs`, at small sizes: each derivative's value and gradient to the
//! hand-written ones (relative 1e-8, [`hand::check`]), and its value to the
//! function called as plain Rust.

#[path = "../benches/attr.rs"]
mod attr;
// The test uses the gradients and `check`, not every primal.
#[allow(dead_code)]
#[path = "../benches/hand.rs"]
mod hand;

use gradlift::suite;
use hand::check;

/// The sizes of the one-slice programs: the smallest, odd ones, one past a
/// hundred.
const SIZES: [usize; 5] = [2, 3, 7, 64, 101];

/// A program of one slice `x`: `d_NAME(x, dx, 1.0)` from a zeroed `dx` against the
/// hand gradient and against `NAME(x)` as plain Rust; then a second call, which adds
/// the gradient into `dx` again (the shadow accumulates).
fn of_x(
    program: &str,
    native: fn(&[f64]) -> f64,
    derivative: fn(&[f64], &mut [f64], f64) -> f64,
    hand_gradient: fn(&[f64], &mut [f64]) -> f64,
    x: &[f64],
) {
    let mut dx = vec![0.0; x.len()];
    let value = derivative(x, &mut dx, 1.0);
    let mut hand_dx = vec![0.0; x.len()];
    let hand_value = hand_gradient(x, &mut hand_dx);
    check(program, value, hand_value, &[(&dx, &hand_dx)]);
    check(program, value, native(x), &[]);
    derivative(x, &mut dx, 1.0);
    let twice: Vec<f64> = hand_dx.iter().map(|d| 2.0 * d).collect();
    check(program, value, hand_value, &[(&dx, &twice)]);
}

#[test]
fn sumsq() {
    for n in SIZES {
        let x = suite::sumsq_input(n);
        of_x(
            "sumsq",
            attr::sumsq,
            attr::d_sumsq,
            hand::sumsq_gradient,
            &x,
        );
    }
}

#[test]
fn rosenbrock() {
    for n in SIZES {
        let x = suite::rosenbrock_input(n);
        of_x(
            "rosenbrock",
            attr::rosenbrock,
            attr::d_rosenbrock,
            hand::rosenbrock_gradient,
            &x,
        );
    }
}

#[test]
fn logsumexp() {
    for n in SIZES {
        let x = suite::logsumexp_input(n);
        of_x(
            "logsumexp",
            attr::logsumexp,
            attr::d_logsumexp,
            hand::logsumexp_gradient,
            &x,
        );
    }
}

#[test]
fn branchy() {
    for n in SIZES {
        // Both branches: x_i = sin(0.37 i + 0.1) changes sign from i = 9 on.
        let x = suite::branchy_input(n);
        of_x(
            "branchy",
            attr::branchy,
            attr::d_branchy,
            hand::branchy_gradient,
            &x,
        );
    }
    let mixed = suite::branchy_input(20);
    assert!(mixed.iter().any(|&v| v > 0.0) && mixed.iter().any(|&v| v < 0.0));
}

#[test]
fn normalize() {
    for n in SIZES {
        let (x, w) = suite::normalize_input(n);
        let mut dx = vec![0.0; n];
        let value = attr::d_normalize(&x, &mut dx, &w, 1.0);
        let mut hand_dx = vec![0.0; n];
        let hand_value = hand::normalize_gradient(&x, &w, &mut hand_dx);
        check("normalize", value, hand_value, &[(&dx, &hand_dx)]);
        check("normalize", value, attr::normalize(&x, &w), &[]);
    }
}

#[test]
fn mlp() {
    for batch in [1, 3, 12] {
        let p = suite::mlp_input(batch);
        let zeros = || [&p.w1, &p.b1, &p.w2, &p.b2].map(|v| vec![0.0; v.len()]);
        let [mut dw1, mut db1, mut dw2, mut db2] = zeros();
        let value = attr::d_mlp(
            &p.x, &p.w1, &mut dw1, &p.b1, &mut db1, &p.w2, &mut dw2, &p.b2, &mut db2, 1.0,
        );
        let mut h = zeros();
        let [w1, b1, w2, b2] = &mut h;
        let g = hand::MlpGradient { w1, b1, w2, b2 };
        let hand_value = hand::mlp_gradient(&p.x, &p.w1, &p.b1, &p.w2, &p.b2, g);
        let got = [&dw1, &db1, &dw2, &db2];
        let pairs: Vec<(&[f64], &[f64])> =
            got.iter().zip(&h).map(|(g, w)| (&g[..], &w[..])).collect();
        check("mlp", value, hand_value, &pairs);
        check(
            "mlp",
            value,
            attr::mlp(&p.x, &p.w1, &p.b1, &p.w2, &p.b2),
            &[],
        );
        // Every parameter has a gradient that is not zero.
        assert!(got.iter().all(|g| g.iter().any(|&d| d != 0.0)));
    }
}

#[test]
fn ode() {
    let inputs = [suite::ode_input(), vec![1.1, 0.7, 2.5, 1.3, 0.8, 1.2]];
    for p in &inputs {
        for steps in [0, 1, 50, 1000] {
            let mut dp = vec![0.0; 6];
            let value = attr::d_ode(p, &mut dp, steps, 1.0);
            let mut hand_dp = vec![0.0; 6];
            let mut scratch = vec![0.0; hand::ode_scratch_len(steps)];
            let hand_value = hand::ode_gradient(p, steps, &mut hand_dp, &mut scratch);
            check("ode", value, hand_value, &[(&dp, &hand_dp)]);
            check("ode", value, attr::ode(p, steps), &[]);
        }
    }
}

/// The seed scales the derivatives, and `d_NAME_grad` is `d_NAME` with zeroed
/// shadows and a seed of 1.
#[test]
fn seed_and_grad() {
    let x = suite::rosenbrock_input(9);
    let mut dx = vec![0.0; x.len()];
    let value = attr::d_rosenbrock(&x, &mut dx, -2.5);
    let (grad_value, grad) = attr::d_rosenbrock_grad(&x);
    assert_eq!(value, grad_value);
    let scaled: Vec<f64> = grad.iter().map(|d| -2.5 * d).collect();
    check("rosenbrock", value, grad_value, &[(&dx, &scaled)]);
}

/// The "as written" primals of `benches/hand.rs` (rustc's primal of the suite
/// program's operations, a column of the suite's table) compute what the
/// programs compute, bit for bit: `normalize_as_written` the plain Rust program
/// (the norm recomputed for every term) and gradlift's compiled value,
/// `mlp_as_written` the hand-written primal with its loops interchanged.
#[test]
fn as_written_primals() {
    for n in SIZES {
        let (x, w) = suite::normalize_input(n);
        let written = hand::normalize_as_written(&x, &w);
        assert_eq!(
            written.to_bits(),
            attr::normalize(&x, &w).to_bits(),
            "n = {n}"
        );
        let mut dx = vec![0.0; n];
        let value = attr::d_normalize(&x, &mut dx, &w, 1.0);
        assert_eq!(written.to_bits(), value.to_bits(), "n = {n}");
    }
    for batch in [1, 3, 12] {
        let p = suite::mlp_input(batch);
        let written = hand::mlp_as_written(&p.x, &p.w1, &p.b1, &p.w2, &p.b2);
        let hand = hand::mlp(&p.x, &p.w1, &p.b1, &p.w2, &p.b2);
        assert_eq!(written.to_bits(), hand.to_bits(), "batch {batch}");
        let native = attr::mlp(&p.x, &p.w1, &p.b1, &p.w2, &p.b2);
        assert_eq!(written.to_bits(), native.to_bits(), "batch {batch}");
    }
}
