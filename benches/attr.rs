//! The seven suite programs (`BENCHMARKS.md`) once more, as plain Rust on `f64` and
//! slices, differentiated by `#[gradlift::autodiff_reverse]`: the "attribute form",
//! next to the generic "autodiff form" of [`gradlift::suite`] and the hand-written
//! gradients of `benches/hand.rs`.
//!
//! Each is written the way a user would write it (`for` loops over ranges and
//! `.iter()`, `if` as an expression, a `vec!` buffer), and computes the same
//! expressions in the same order as the program of [`gradlift::suite`], so their
//! values agree. Each adds, through the attribute, `d_NAME` (the reverse-mode
//! derivative: a shadow `&mut [f64]` after each `Duplicated` slice, accumulating
//! `+=`, and the seed of the `Active` return last), `d_NAME_try` and `d_NAME_grad`.
//!
//! | program | `d_NAME`'s parameters |
//! |---|---|
//! | [`sumsq`], [`rosenbrock`], [`logsumexp`], [`branchy`] | `(x, dx, seed)` |
//! | [`normalize`] | `(x, dx, w, seed)`, `w` constant |
//! | [`mlp`] | `(x, w1, dw1, b1, db1, w2, dw2, b2, db2, seed)`, `x` constant |
//! | [`ode`] | `(p, dp, steps, seed)`, `steps` constant |
//!
//! This file is a module of the benchmarks, not of the library (the attribute's
//! code names `::gradlift::...`, so it cannot live inside the `gradlift` crate):
//! `benches/suite.rs` includes it with `mod attr;`, `examples/suite.rs` and
//! `tests/suite_attr.rs` with `#[path = "../benches/attr.rs"] mod attr;`.

// Each includer uses some of the generated `d_NAME_try` and `d_NAME_grad` only.
#![allow(dead_code)]

use gradlift::{autodiff_reverse, differentiable};

/// `f(x) = sum_i x_i^2`.
#[autodiff_reverse(d_sumsq, Duplicated, Active)]
pub fn sumsq(x: &[f64]) -> f64 {
    let mut acc = 0.0;
    for &xi in x.iter() {
        acc += xi * xi;
    }
    acc
}

/// `f(x) = sum_{i < n-1} 100 (x_{i+1} - x_i^2)^2 + (1 - x_i)^2`.
#[autodiff_reverse(d_rosenbrock, Duplicated, Active)]
pub fn rosenbrock(x: &[f64]) -> f64 {
    let mut acc = 0.0;
    for i in 0..x.len() - 1 {
        let xi = x[i];
        let a = x[i + 1] - xi * xi;
        let b = 1.0 - xi;
        acc += a * a * 100.0 + b * b;
    }
    acc
}

/// `m = max_i x_i; f(x) = m + ln(sum_i exp(x_i - m))`.
#[autodiff_reverse(d_logsumexp, Duplicated, Active)]
pub fn logsumexp(x: &[f64]) -> f64 {
    let mut m = f64::NEG_INFINITY;
    for &xi in x.iter() {
        m = m.max(xi);
    }
    let mut s = 0.0;
    for &xi in x.iter() {
        s += (xi - m).exp();
    }
    m + s.ln()
}

/// `|x| = sqrt(sum_j x_j^2)`, the helper of [`normalize`] (the IR function `@norm`).
#[differentiable]
pub fn norm(x: &[f64]) -> f64 {
    let mut s = 0.0;
    for &xi in x.iter() {
        s += xi * xi;
    }
    s.sqrt()
}

/// `f(x, w) = sum_i w_i x_i / |x|`, written naively: the norm is computed inside
/// the loop (O(n^2) as written; gradlift's optimiser hoists it).
///
/// The call comes first in the loop's body, as in [`gradlift::suite::normalize`]:
/// gradlift's loop-invariant code motion moves a call out of a loop only when
/// nothing that may fail runs before it in the body, and `x[i]`, `w[i]` are
/// bounds-checked loads. Written `acc += w[i] * x[i] / norm(x)`, the call stays in
/// the loop and the gradient costs O(n^2).
#[autodiff_reverse(d_normalize, Duplicated, Const, Active)]
pub fn normalize(x: &[f64], w: &[f64]) -> f64 {
    let mut acc = 0.0;
    for i in 0..x.len() {
        let nrm = norm(x);
        acc += w[i] * x[i] / nrm;
    }
    acc
}

/// The two-layer perceptron's mean softmax cross-entropy: `x` is `B x 32`
/// row-major, `w1` `32 x 64`, `b1` 64, `w2` `64 x 10`, `b2` 10, labels
/// `y_b = b mod 10`. The sizes are literals: the body cannot read `const` items.
#[autodiff_reverse(d_mlp, Const, Duplicated, Duplicated, Duplicated, Duplicated, Active)]
pub fn mlp(x: &[f64], w1: &[f64], b1: &[f64], w2: &[f64], b2: &[f64]) -> f64 {
    let n_in = 32;
    let n_hid = 64;
    let n_out = 10;
    let batch = x.len() / n_in;
    let mut h = vec![0.0; n_hid];
    let mut z = vec![0.0; n_out];
    let mut loss = 0.0;
    for b in 0..batch {
        let row = b * n_in;
        // h = tanh(X_b W1 + b1)
        for j in 0..n_hid {
            let mut a = b1[j];
            for k in 0..n_in {
                a += x[row + k] * w1[k * n_hid + j];
            }
            h[j] = a.tanh();
        }
        // z = h W2 + b2
        for c in 0..n_out {
            let mut s = b2[c];
            for j in 0..n_hid {
                s += h[j] * w2[j * n_out + c];
            }
            z[c] = s;
        }
        // logsumexp(z) - z[y_b], the maximum subtracted first.
        let mut m = f64::NEG_INFINITY;
        for &zc in z.iter() {
            m = m.max(zc);
        }
        let mut e = 0.0;
        for &zc in z.iter() {
            e += (zc - m).exp();
        }
        loss = loss + (m + e.ln()) - z[b % n_out];
    }
    loss / batch as f64
}

/// Lotka-Volterra by forward Euler (`dt = 1e-4`), `steps` steps from `(u0, v0)`:
/// `p = [a, b, c, d, u0, v0]`, `f = u_T^2 + v_T^2`.
#[autodiff_reverse(d_ode, Duplicated, Const, Active)]
pub fn ode(p: &[f64], steps: usize) -> f64 {
    let dt = 1e-4;
    let a = p[0];
    let b = p[1];
    let c = p[2];
    let d = p[3];
    let mut u = p[4];
    let mut v = p[5];
    for _ in 0..steps {
        let du = a * u - b * u * v;
        let dv = d * u * v - c * v;
        u += du * dt;
        v += dv * dt;
    }
    u * u + v * v
}

/// `f(x) = sum_i (if x_i > 0 { sin(x_i) x_i } else { x_i^3 - 2 x_i })`.
#[autodiff_reverse(d_branchy, Duplicated, Active)]
pub fn branchy(x: &[f64]) -> f64 {
    let mut acc = 0.0;
    for &xi in x.iter() {
        acc += if xi > 0.0 {
            xi.sin() * xi
        } else {
            xi * xi * xi - xi * 2.0
        };
    }
    acc
}
