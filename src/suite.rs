//! The seven benchmark programs of the suite (described in `BENCHMARKS.md`), written once as generic
//! Rust against [`gradlift_trace`], and their deterministic inputs.
//!
//! Each program is a `pub fn name<T: Real>(..) -> T`: on `f64` it runs natively
//! (the suite's plain-Rust primal), on [`Var`] it traces into
//! gradlift IR. Loops and branches are [`for_range`] and [`cond`], so the traced IR
//! has real loops (blocks and phis) and does not grow with the size of the input.
//!
//! | program | signature | differentiate w.r.t. |
//! |---|---|---|
//! | [`sumsq`] | `(x)` | `x` |
//! | [`rosenbrock`] | `(x)` | `x` |
//! | [`logsumexp`] | `(x)` | `x` |
//! | [`normalize`] | `(x, w)`, the norm recomputed inside the loop (naive) | `x` (`w` const) |
//! | [`mlp`] | `(x, w1, b1, w2, b2)`, `x` is `B x 32` row-major | `w1, b1, w2, b2` (`x` const) |
//! | [`ode`] | `(p, steps)`, `p = [a, b, c, d, u0, v0]` | `p` |
//! | [`branchy`] | `(x)` | `x` |
//!
//! The inputs are the closed forms of `BENCHMARKS.md` ([`s`], [`sumsq_input`], ...), with
//! `i` from 0 and `s(a, b, i) = sin(a i + b)`.
//!
//! ```
//! use gradlift::ir::interp::Val;
//! use gradlift::suite;
//! use gradlift::{CompiledGradient, Workspace};
//! use gradlift_trace::{Var, trace};
//!
//! let x = suite::sumsq_input(5);
//!
//! // Natively, on f64.
//! let native = suite::sumsq::<f64>(&x);
//! assert_eq!(native, x.iter().map(|v| v * v).sum::<f64>());
//!
//! // Traced to IR, differentiated and compiled.
//! let traced = trace("sumsq", suite::sumsq::<Var>)?;
//! let grad = CompiledGradient::new(&traced.module, "sumsq")?;
//! let g = grad.value_and_gradient(&mut Workspace::new(), &[Val::F64s(x.clone())])?;
//! assert_eq!(g.value, Some(vec![Val::F64(native)]));
//! let twice: Vec<f64> = x.iter().map(|v| 2.0 * v).collect();
//! assert_eq!(g.gradient, [Some(Val::F64s(twice))]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use gradlift_trace::prelude::*;

/// The suite's size for `sumsq`, `rosenbrock`, `logsumexp` and `branchy`.
pub const N: usize = 100_000;
/// The suite's size for `normalize` (also reported at twice this).
pub const NORMALIZE_N: usize = 10_000;
/// The suite's batch size for `mlp`.
pub const MLP_BATCH: usize = 64;
/// The inputs per row of `mlp`.
pub const MLP_IN: usize = 32;
/// The hidden units of `mlp`.
pub const MLP_HIDDEN: usize = 64;
/// The logits (classes) of `mlp`.
pub const MLP_OUT: usize = 10;
/// The suite's number of steps of `ode`.
pub const ODE_STEPS: i64 = 100_000;
/// The time step of `ode`'s forward Euler.
pub const ODE_DT: f64 = 1e-4;

/// `f(x) = sum_i x_i^2`.
pub fn sumsq<T: Real>(x: T::Slice<'_>) -> T {
    for_range(0, x.len(), T::lit(0.0), |i, acc| {
        let xi = x.at(i);
        acc + xi * xi
    })
}

/// `f(x) = sum_{i < n-1} 100 (x_{i+1} - x_i^2)^2 + (1 - x_i)^2`.
pub fn rosenbrock<T: Real>(x: T::Slice<'_>) -> T {
    for_range(0, x.len() - 1, T::lit(0.0), |i, acc| {
        let xi = x.at(i);
        let xn = x.at(i + 1);
        let a = xn - xi * xi;
        let b = T::lit(1.0) - xi;
        acc + (a * a * 100.0 + b * b)
    })
}

/// `m = max_i x_i; f(x) = m + ln(sum_i exp(x_i - m))`: two loops, the maximum
/// first, so `exp` never overflows.
pub fn logsumexp<T: Real>(x: T::Slice<'_>) -> T {
    let n = x.len();
    let m = for_range(0, n, T::lit(f64::NEG_INFINITY), |i, m| m.max(x.at(i)));
    let s = for_range(0, n, T::lit(0.0), |i, s| s + (x.at(i) - m).exp());
    m + s.ln()
}

/// `norm(x) = sqrt(sum_j x_j^2)`, the callee of [`normalize`] (the IR function
/// `@norm` when traced).
pub fn norm<T: Real>(x: T::Slice<'_>) -> T {
    sumsq::<T>(x).sqrt()
}

/// `f(x, w) = sum_i w_i x_i / sqrt(sum_j x_j^2)`, written naively: the norm is
/// computed (a call of [`norm`], `@norm` when traced) inside the loop over `i`, so
/// the primal costs O(n^2) until something hoists it.
pub fn normalize<T: Real>(x: T::Slice<'_>, w: T::Slice<'_>) -> T {
    for_range(0, x.len(), T::lit(0.0), |i, acc| {
        let nrm = func("norm", norm::<T>).call((x,));
        acc + w.at(i) * x.at(i) / nrm
    })
}

/// A two-layer perceptron's mean softmax cross-entropy over a batch:
/// `h_b = tanh(X_b W1 + b1)` (32 inputs, 64 hidden units), `z_b = h_b W2 + b2`
/// (10 logits), `f = (1/B) sum_b [logsumexp(z_b) - z_b[y_b]]` with labels
/// `y_b = b mod 10`.
///
/// `x` is `B x 32` row-major (`B = len(x) / 32`), `w1` is `32 x 64`, `b1` has 64
/// elements, `w2` is `64 x 10`, `b2` has 10. The hidden activations and the logits
/// live in two local buffers, allocated once and reused for every row.
pub fn mlp<T: Real>(
    x: T::Slice<'_>,
    w1: T::Slice<'_>,
    b1: T::Slice<'_>,
    w2: T::Slice<'_>,
    b2: T::Slice<'_>,
) -> T {
    let (nin, nhid, nout) = (MLP_IN as i64, MLP_HIDDEN as i64, MLP_OUT as i64);
    // The loop bounds as traced integers (constants in the IR).
    let (hid_n, out_n, in_n) = (T::Int::from(nhid), T::Int::from(nout), T::Int::from(nin));
    let batch = x.len() / nin;
    let mut h = T::alloc(hid_n);
    let mut z = T::alloc(out_n);
    let loss = for_range(0, batch, T::lit(0.0), |b, loss| {
        let row = b * nin;
        // h[j] = tanh(b1[j] + sum_k X[b][k] W1[k][j])
        for_range(0, hid_n, (), |j, ()| {
            let a = for_range(0, in_n, b1.at(j), |k, s| {
                s + x.at(row + k) * w1.at(k * nhid + j)
            });
            h.set(j, a.tanh());
        });
        // z[c] = b2[c] + sum_j h[j] W2[j][c]
        for_range(0, out_n, (), |c, ()| {
            let s = for_range(0, hid_n, b2.at(c), |j, s| s + h.at(j) * w2.at(j * nout + c));
            z.set(c, s);
        });
        // logsumexp(z) - z[y_b], the maximum subtracted first.
        let m = for_range(0, out_n, T::lit(f64::NEG_INFINITY), |c, m| m.max(z.at(c)));
        let e = for_range(0, out_n, T::lit(0.0), |c, e| e + (z.at(c) - m).exp());
        loss + (m + e.ln()) - z.at(b % nout)
    });
    loss / T::from_int(batch)
}

/// Lotka-Volterra by forward Euler: `u' = a u - b u v`, `v' = -c v + d u v`, with
/// `dt =` [`ODE_DT`], `steps` steps from `(u0, v0)`; `f = u_T^2 + v_T^2`.
///
/// `p = [a, b, c, d, u0, v0]`; `steps` is an integer parameter, so the steps are a
/// real loop.
pub fn ode<T: Real>(p: T::Slice<'_>, steps: T::Int) -> T {
    let (a, b, c, d) = (p.at(0), p.at(1), p.at(2), p.at(3));
    let (u, v) = for_range(0, steps, (p.at(4), p.at(5)), |_, (u, v)| {
        let du = a * u - b * u * v;
        let dv = d * u * v - c * v;
        (u + du * ODE_DT, v + dv * ODE_DT)
    });
    u * u + v * v
}

/// `f(x) = sum_i (if x_i > 0 { sin(x_i) x_i } else { x_i^3 - 2 x_i })`: a branch
/// inside the loop.
pub fn branchy<T: Real>(x: T::Slice<'_>) -> T {
    for_range(0, x.len(), T::lit(0.0), |i, acc| {
        let xi = x.at(i);
        acc + cond(xi.gt(0.0), || xi.sin() * xi, || xi * xi * xi - xi * 2.0)
    })
}

/// `s(a, b, i) = sin(a i + b)`, the suite's input generator.
pub fn s(a: f64, b: f64, i: usize) -> f64 {
    (a * i as f64 + b).sin()
}

/// The input of [`sumsq`]: `x_i = 0.5 s(0.37, 0.1, i)`.
pub fn sumsq_input(n: usize) -> Vec<f64> {
    (0..n).map(|i| 0.5 * s(0.37, 0.1, i)).collect()
}

/// The input of [`rosenbrock`]: `x_i = 0.5 s(0.37, 0.1, i)`.
pub fn rosenbrock_input(n: usize) -> Vec<f64> {
    sumsq_input(n)
}

/// The input of [`logsumexp`]: `x_i = 3 s(0.37, 0.1, i)`.
pub fn logsumexp_input(n: usize) -> Vec<f64> {
    (0..n).map(|i| 3.0 * s(0.37, 0.1, i)).collect()
}

/// The inputs `(x, w)` of [`normalize`]: `x_i = 0.5 s(0.37, 0.1, i) + 1`,
/// `w_i = s(0.11, 0.3, i)`.
pub fn normalize_input(n: usize) -> (Vec<f64>, Vec<f64>) {
    let x = (0..n).map(|i| 0.5 * s(0.37, 0.1, i) + 1.0).collect();
    let w = (0..n).map(|i| s(0.11, 0.3, i)).collect();
    (x, w)
}

/// The inputs of [`mlp`], row-major.
#[derive(Clone, Debug, PartialEq)]
pub struct MlpInput {
    /// `X[b][k] = sin(0.1 b + 0.7 k)`, `B x 32`.
    pub x: Vec<f64>,
    /// `W1[k][j] = 0.1 cos(0.3 k + 0.11 j)`, `32 x 64`.
    pub w1: Vec<f64>,
    /// `b1[j] = 0.01 j`, 64.
    pub b1: Vec<f64>,
    /// `W2[j][c] = 0.1 sin(0.17 j + 0.5 c)`, `64 x 10`.
    pub w2: Vec<f64>,
    /// `b2[c] = 0`, 10.
    pub b2: Vec<f64>,
}

/// The inputs of [`mlp`] for a batch of `batch` rows.
pub fn mlp_input(batch: usize) -> MlpInput {
    let grid = |rows: usize, cols: usize, f: &dyn Fn(f64, f64) -> f64| -> Vec<f64> {
        (0..rows * cols)
            .map(|e| f((e / cols) as f64, (e % cols) as f64))
            .collect()
    };
    MlpInput {
        x: grid(batch, MLP_IN, &|b, k| (0.1 * b + 0.7 * k).sin()),
        w1: grid(MLP_IN, MLP_HIDDEN, &|k, j| 0.1 * (0.3 * k + 0.11 * j).cos()),
        b1: (0..MLP_HIDDEN).map(|j| 0.01 * j as f64).collect(),
        w2: grid(MLP_HIDDEN, MLP_OUT, &|j, c| {
            0.1 * (0.17 * j + 0.5 * c).sin()
        }),
        b2: vec![0.0; MLP_OUT],
    }
}

/// The parameters of [`ode`]: `[a, b, c, d, u0, v0] = [1.5, 1, 3, 1, 1, 1]`.
pub fn ode_input() -> Vec<f64> {
    vec![1.5, 1.0, 3.0, 1.0, 1.0, 1.0]
}

/// The input of [`branchy`]: `x_i = s(0.37, 0.1, i)`.
pub fn branchy_input(n: usize) -> Vec<f64> {
    (0..n).map(|i| s(0.37, 0.1, i)).collect()
}
