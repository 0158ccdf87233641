//! Hand-written plain-Rust primals and reverse-mode gradients of the seven suite
//! programs (`BENCHMARKS.md`, [`gradlift::suite`]): the reference the benchmarks measure
//! gradlift against (`vs hand` divides by their gradients' times), and [`check`],
//! which compares a gradient with theirs.
//!
//! They use nothing of gradlift but the suite's size constants: each is what a
//! careful person would write by hand for `rustc --release`. A gradient returns the
//! value and writes (`=`, not `+=`)
//! the gradient into a caller-provided buffer of the input's length, in one pass
//! where the algorithm allows it, and allocates nothing; [`ode_gradient`] needs the
//! trajectory and takes it in a caller-provided scratch buffer.
//!
//! The primals evaluate the same expressions in the same order as the generic
//! programs of [`gradlift::suite`] on `f64`, except [`normalize`], which computes the
//! norm once (the hoisting a person does by hand; the suite's program recomputes
//! it for every `i`).
//!
//! This file is a module of the benchmarks, not of the library: `benches/suite.rs`
//! (criterion) and `examples/suite.rs` (the markdown table) include it with
//! `#[path = "../benches/hand.rs"] mod hand;`.

use gradlift::suite::{MLP_HIDDEN as H, MLP_IN as K, MLP_OUT as C, ODE_DT};

/// `f(x) = sum_i x_i^2`.
pub fn sumsq(x: &[f64]) -> f64 {
    x.iter().fold(0.0, |acc, &xi| acc + xi * xi)
}

/// [`sumsq`] and its gradient `2 x` (written into `dx`, of `x`'s length).
pub fn sumsq_gradient(x: &[f64], dx: &mut [f64]) -> f64 {
    assert_eq!(x.len(), dx.len(), "sumsq_gradient: dx must have x's length");
    let mut acc = 0.0;
    for (&xi, d) in x.iter().zip(dx.iter_mut()) {
        acc += xi * xi;
        *d = 2.0 * xi;
    }
    acc
}

/// `f(x) = sum_{i < n-1} 100 (x_{i+1} - x_i^2)^2 + (1 - x_i)^2`.
pub fn rosenbrock(x: &[f64]) -> f64 {
    x.windows(2).fold(0.0, |acc, w| {
        let a = w[1] - w[0] * w[0];
        let b = 1.0 - w[0];
        acc + (a * a * 100.0 + b * b)
    })
}

/// [`rosenbrock`] and its gradient (written into `dx`, of `x`'s length), in one
/// pass: term `i` gives `x_i` `-400 a x_i - 2 b` and `x_{i+1}` `200 a`, with
/// `a = x_{i+1} - x_i^2`, `b = 1 - x_i`; the second part is carried to the next
/// iteration.
pub fn rosenbrock_gradient(x: &[f64], dx: &mut [f64]) -> f64 {
    let n = x.len();
    assert_eq!(n, dx.len(), "rosenbrock_gradient: dx must have x's length");
    if n == 0 {
        return 0.0;
    }
    let mut acc = 0.0;
    let mut carry = 0.0;
    for i in 0..n - 1 {
        let xi = x[i];
        let a = x[i + 1] - xi * xi;
        let b = 1.0 - xi;
        acc += a * a * 100.0 + b * b;
        dx[i] = carry - 400.0 * a * xi - 2.0 * b;
        carry = 200.0 * a;
    }
    dx[n - 1] = carry;
    acc
}

/// `m = max_i x_i; f(x) = m + ln(sum_i exp(x_i - m))`.
pub fn logsumexp(x: &[f64]) -> f64 {
    let m = x.iter().fold(f64::NEG_INFINITY, |m, &xi| m.max(xi));
    let s = x.iter().fold(0.0, |s, &xi| s + (xi - m).exp());
    m + s.ln()
}

/// [`logsumexp`] and its gradient, the softmax `exp(x_i - m) / s` (written into
/// `dx`, of `x`'s length): the maximum, then the exponentials (kept in `dx`) and
/// their sum, then one scaling.
pub fn logsumexp_gradient(x: &[f64], dx: &mut [f64]) -> f64 {
    assert_eq!(
        x.len(),
        dx.len(),
        "logsumexp_gradient: dx must have x's length"
    );
    let m = x.iter().fold(f64::NEG_INFINITY, |m, &xi| m.max(xi));
    let mut s = 0.0;
    for (&xi, d) in x.iter().zip(dx.iter_mut()) {
        let e = (xi - m).exp();
        *d = e;
        s += e;
    }
    let inv = 1.0 / s;
    for d in dx.iter_mut() {
        *d *= inv;
    }
    m + s.ln()
}

/// `f(x, w) = sum_i w_i x_i / sqrt(sum_j x_j^2)`, with the norm computed once:
/// `S / r`, `S = sum_i w_i x_i`, `r = |x|`. O(n).
pub fn normalize(x: &[f64], w: &[f64]) -> f64 {
    assert_eq!(x.len(), w.len(), "normalize: x and w must have one length");
    let (mut s, mut q) = (0.0, 0.0);
    for (&xi, &wi) in x.iter().zip(w) {
        s += wi * xi;
        q += xi * xi;
    }
    s / q.sqrt()
}

/// [`normalize`] with the operations of the suite's program after gradlift's
/// optimiser: the norm computed once (hoisted) and every term divided by it,
/// `sum_i (w_i x_i) / |x|` in the program's order. What rustc makes of the program
/// as written, without the reassociation of [`normalize`] (one division instead of
/// n), which changes the result's rounding and which neither rustc nor gradlift
/// does on its own.
pub fn normalize_as_written(x: &[f64], w: &[f64]) -> f64 {
    assert_eq!(x.len(), w.len(), "normalize: x and w must have one length");
    let r = x.iter().fold(0.0, |q, &xi| q + xi * xi).sqrt();
    x.iter()
        .zip(w)
        .fold(0.0, |acc, (&xi, &wi)| acc + wi * xi / r)
}

/// [`normalize`] and its gradient with respect to `x` (`w` constant), written into
/// `dx` (of `x`'s length): `df/dx_k = w_k / r - S x_k / r^3`. Two passes, O(n).
pub fn normalize_gradient(x: &[f64], w: &[f64], dx: &mut [f64]) -> f64 {
    assert_eq!(
        x.len(),
        w.len(),
        "normalize_gradient: x and w must have one length"
    );
    assert_eq!(
        x.len(),
        dx.len(),
        "normalize_gradient: dx must have x's length"
    );
    let (mut s, mut q) = (0.0, 0.0);
    for (&xi, &wi) in x.iter().zip(w) {
        s += wi * xi;
        q += xi * xi;
    }
    let r = q.sqrt();
    let inv_r = 1.0 / r;
    let c = s * inv_r * inv_r * inv_r;
    for ((d, &xi), &wi) in dx.iter_mut().zip(x).zip(w) {
        *d = wi * inv_r - c * xi;
    }
    s * inv_r
}

/// The hidden activations `h = tanh(X_b W1 + b1)` and the logits `z = h W2 + b2` of
/// one row `xb` of [`mlp`], into `h` and `z`.
fn mlp_row(
    xb: &[f64],
    w1: &[f64],
    b1: &[f64],
    w2: &[f64],
    b2: &[f64],
    h: &mut [f64; H],
    z: &mut [f64; C],
) {
    h.copy_from_slice(b1);
    for (k, &xk) in xb.iter().enumerate() {
        for (hj, &w) in h.iter_mut().zip(&w1[k * H..(k + 1) * H]) {
            *hj += xk * w;
        }
    }
    for hj in h.iter_mut() {
        *hj = hj.tanh();
    }
    z.copy_from_slice(b2);
    for (j, &hj) in h.iter().enumerate() {
        for (zc, &w) in z.iter_mut().zip(&w2[j * C..(j + 1) * C]) {
            *zc += hj * w;
        }
    }
}

/// [`mlp`] with the loops in the suite program's order: each hidden unit and each
/// logit a dot product (`j` outside `k`, `c` outside `j`), the operations and
/// their order (and so the result, bit for bit) those of [`mlp`], whose
/// interchanged loops rustc vectorises. What rustc makes of the program as
/// written.
pub fn mlp_as_written(x: &[f64], w1: &[f64], b1: &[f64], w2: &[f64], b2: &[f64]) -> f64 {
    let batch = check_mlp(x, w1, b1, w2, b2);
    let (mut h, mut z) = ([0.0; H], [0.0; C]);
    let mut loss = 0.0;
    for (b, xb) in x.chunks_exact(K).enumerate() {
        for (j, hj) in h.iter_mut().enumerate() {
            let s = (0..K).fold(b1[j], |s, k| s + xb[k] * w1[k * H + j]);
            *hj = s.tanh();
        }
        for (c, zc) in z.iter_mut().enumerate() {
            *zc = (0..H).fold(b2[c], |s, j| s + h[j] * w2[j * C + c]);
        }
        let (m, e) = max_and_sum_exp(&z);
        loss = loss + (m + e.ln()) - z[b % C];
    }
    loss / batch as f64
}

/// The maximum of `z` and `sum_c exp(z_c - max)`.
fn max_and_sum_exp(z: &[f64; C]) -> (f64, f64) {
    let m = z.iter().fold(f64::NEG_INFINITY, |m, &zc| m.max(zc));
    let e = z.iter().fold(0.0, |e, &zc| e + (zc - m).exp());
    (m, e)
}

fn check_mlp(x: &[f64], w1: &[f64], b1: &[f64], w2: &[f64], b2: &[f64]) -> usize {
    assert_eq!(x.len() % K, 0, "mlp: x must be B x {K}");
    assert_eq!(w1.len(), K * H, "mlp: w1 must be {K} x {H}");
    assert_eq!(b1.len(), H, "mlp: b1 must have {H} elements");
    assert_eq!(w2.len(), H * C, "mlp: w2 must be {H} x {C}");
    assert_eq!(b2.len(), C, "mlp: b2 must have {C} elements");
    x.len() / K
}

/// The two-layer perceptron's mean softmax cross-entropy (as [`gradlift::suite::mlp`]):
/// `x` is `B x 32` row-major, `w1` `32 x 64`, `b1` 64, `w2` `64 x 10`, `b2` 10,
/// labels `y_b = b mod 10`.
pub fn mlp(x: &[f64], w1: &[f64], b1: &[f64], w2: &[f64], b2: &[f64]) -> f64 {
    let batch = check_mlp(x, w1, b1, w2, b2);
    let (mut h, mut z) = ([0.0; H], [0.0; C]);
    let mut loss = 0.0;
    for (b, xb) in x.chunks_exact(K).enumerate() {
        mlp_row(xb, w1, b1, w2, b2, &mut h, &mut z);
        let (m, e) = max_and_sum_exp(&z);
        loss = loss + (m + e.ln()) - z[b % C];
    }
    loss / batch as f64
}

/// The gradients of [`mlp`] with respect to its parameters (`x` constant), written
/// into `dw1`, `db1`, `dw2`, `db2` (of their parameters' lengths).
#[derive(Debug)]
pub struct MlpGradient<'a> {
    /// `df/dW1`, `32 x 64`.
    pub w1: &'a mut [f64],
    /// `df/db1`, 64.
    pub b1: &'a mut [f64],
    /// `df/dW2`, `64 x 10`.
    pub w2: &'a mut [f64],
    /// `df/db2`, 10.
    pub b2: &'a mut [f64],
}

/// [`mlp`] and its gradient with respect to `w1, b1, w2, b2` (written into `d`),
/// row by row: each row's forward pass, then at once its backward pass (the
/// parameters are shared, so nothing of a row is kept past it): `dz = (softmax(z) -
/// onehot(y_b)) / B`, `db2 += dz`, `dW2 += h dz^T`, `da = (W2 dz) (1 - h^2)`,
/// `db1 += da`, `dW1 += X_b da^T`. Stack scratch only.
pub fn mlp_gradient(
    x: &[f64],
    w1: &[f64],
    b1: &[f64],
    w2: &[f64],
    b2: &[f64],
    d: MlpGradient<'_>,
) -> f64 {
    let batch = check_mlp(x, w1, b1, w2, b2);
    assert_eq!(
        d.w1.len(),
        w1.len(),
        "mlp_gradient: dw1 must have w1's length"
    );
    assert_eq!(
        d.b1.len(),
        b1.len(),
        "mlp_gradient: db1 must have b1's length"
    );
    assert_eq!(
        d.w2.len(),
        w2.len(),
        "mlp_gradient: dw2 must have w2's length"
    );
    assert_eq!(
        d.b2.len(),
        b2.len(),
        "mlp_gradient: db2 must have b2's length"
    );
    for g in [&mut *d.w1, &mut *d.b1, &mut *d.w2, &mut *d.b2] {
        g.fill(0.0);
    }
    let inv_b = 1.0 / batch as f64;
    let (mut h, mut z, mut dz, mut da) = ([0.0; H], [0.0; C], [0.0; C], [0.0; H]);
    let mut loss = 0.0;
    for (b, xb) in x.chunks_exact(K).enumerate() {
        mlp_row(xb, w1, b1, w2, b2, &mut h, &mut z);
        let (m, e) = max_and_sum_exp(&z);
        let y = b % C;
        loss = loss + (m + e.ln()) - z[y];
        // dz = (softmax(z) - onehot(y)) / B
        let scale = inv_b / e;
        for (dzc, &zc) in dz.iter_mut().zip(&z) {
            *dzc = (zc - m).exp() * scale;
        }
        dz[y] -= inv_b;
        for (g, &dzc) in d.b2.iter_mut().zip(&dz) {
            *g += dzc;
        }
        // dW2[j] += h_j dz; da_j = (W2[j] . dz) (1 - h_j^2)
        for j in 0..H {
            let hj = h[j];
            let row = j * C..(j + 1) * C;
            let mut dh = 0.0;
            for ((g, &w), &dzc) in d.w2[row.clone()].iter_mut().zip(&w2[row]).zip(&dz) {
                *g += hj * dzc;
                dh += w * dzc;
            }
            da[j] = dh * (1.0 - hj * hj);
        }
        for (g, &daj) in d.b1.iter_mut().zip(&da) {
            *g += daj;
        }
        // dW1[k] += X_b[k] da
        for (k, &xk) in xb.iter().enumerate() {
            for (g, &daj) in d.w1[k * H..(k + 1) * H].iter_mut().zip(&da) {
                *g += xk * daj;
            }
        }
    }
    loss * inv_b
}

/// Lotka-Volterra by forward Euler (as [`gradlift::suite::ode`]): `p = [a, b, c, d,
/// u0, v0]`, `steps` steps of `dt =` [`ODE_DT`]; `f = u_T^2 + v_T^2`.
pub fn ode(p: &[f64], steps: usize) -> f64 {
    let [a, b, c, d, mut u, mut v] = ode_params(p);
    for _ in 0..steps {
        let du = a * u - b * u * v;
        let dv = d * u * v - c * v;
        (u, v) = (u + du * ODE_DT, v + dv * ODE_DT);
    }
    u * u + v * v
}

fn ode_params(p: &[f64]) -> [f64; 6] {
    p.try_into().unwrap_or_else(|_| {
        panic!(
            "ode: p must be [a, b, c, d, u0, v0], got {} values",
            p.len()
        )
    })
}

/// The scratch [`ode_gradient`] needs for `steps` steps: the trajectory, two
/// values per step.
pub fn ode_scratch_len(steps: usize) -> usize {
    2 * steps
}

/// [`ode`] and its gradient with respect to all six parameters (written into `dp`,
/// six values). The forward pass keeps `(u_t, v_t)` for every step in `scratch`
/// (at least [`ode_scratch_len`]`(steps)` long); the backward pass runs the steps
/// in reverse with the adjoints `(du, dv)` of the state, from `(2 u_T, 2 v_T)`.
pub fn ode_gradient(p: &[f64], steps: usize, dp: &mut [f64], scratch: &mut [f64]) -> f64 {
    let [a, b, c, d, mut u, mut v] = ode_params(p);
    assert_eq!(dp.len(), 6, "ode_gradient: dp must have six values");
    let traj = &mut scratch[..ode_scratch_len(steps)];
    for uv in traj.chunks_exact_mut(2) {
        uv[0] = u;
        uv[1] = v;
        let du = a * u - b * u * v;
        let dv = d * u * v - c * v;
        (u, v) = (u + du * ODE_DT, v + dv * ODE_DT);
    }
    let value = u * u + v * v;
    let (mut bu, mut bv) = (2.0 * u, 2.0 * v);
    let (mut ba, mut bb, mut bc, mut bd) = (0.0, 0.0, 0.0, 0.0);
    for uv in traj.chunks_exact(2).rev() {
        let (u, v) = (uv[0], uv[1]);
        // The step's partials, with du' = bu dt and dv' = bv dt the adjoints of
        // du and dv.
        let (gu, gv) = (bu * ODE_DT, bv * ODE_DT);
        let uv = u * v;
        ba += gu * u;
        bb -= gu * uv;
        bc -= gv * v;
        bd += gv * uv;
        (bu, bv) = (
            bu + gu * (a - b * v) + gv * d * v,
            bv - gu * b * u + gv * (d * u - c),
        );
    }
    dp.copy_from_slice(&[ba, bb, bc, bd, bu, bv]);
    value
}

/// `f(x) = sum_i (if x_i > 0 { sin(x_i) x_i } else { x_i^3 - 2 x_i })`.
pub fn branchy(x: &[f64]) -> f64 {
    x.iter().fold(0.0, |acc, &xi| {
        acc + if xi > 0.0 {
            xi.sin() * xi
        } else {
            xi * xi * xi - xi * 2.0
        }
    })
}

/// [`branchy`] and its gradient (written into `dx`, of `x`'s length): `cos(x_i) x_i
/// + sin(x_i)` where `x_i > 0`, `3 x_i^2 - 2` elsewhere. One pass.
pub fn branchy_gradient(x: &[f64], dx: &mut [f64]) -> f64 {
    assert_eq!(
        x.len(),
        dx.len(),
        "branchy_gradient: dx must have x's length"
    );
    let mut acc = 0.0;
    for (&xi, d) in x.iter().zip(dx.iter_mut()) {
        if xi > 0.0 {
            let (s, c) = xi.sin_cos();
            acc += s * xi;
            *d = c * xi + s;
        } else {
            acc += xi * xi * xi - xi * 2.0;
            *d = 3.0 * xi * xi - 2.0;
        }
    }
    acc
}

/// The tolerance of [`check`]: relative `1e-8`.
const REL: f64 = 1e-8;

/// `a` and `b` agree to relative `rel`; an entry of a vector whose largest entry is
/// `scale` may also be off by `rel * 1e-3 * scale` (cancellation makes a tiny
/// entry's relative error meaningless).
fn close(a: f64, b: f64, rel: f64, scale: f64) -> bool {
    a == b || (a - b).abs() <= rel * a.abs().max(b.abs()).max(1e-3 * scale)
}

/// Panics, naming `program` and the first entry that differs, unless gradlift's
/// `value` agrees with the hand-written `hand_value` and each pair `(gradlift's,
/// by hand)` of `grads` entry by entry, to [`REL`] relative. Benchmarks call it
/// before timing anything, so they never time a wrong program.
#[track_caller]
pub fn check(program: &str, value: f64, hand_value: f64, grads: &[(&[f64], &[f64])]) {
    assert!(
        close(value, hand_value, REL, 0.0),
        "{program}: gradlift's value {value:e}, by hand {hand_value:e}"
    );
    for (k, &(got, want)) in grads.iter().enumerate() {
        assert_eq!(got.len(), want.len(), "{program}: gradient {k}: lengths");
        let scale = want.iter().fold(0.0f64, |m, v| m.max(v.abs()));
        for (i, (g, w)) in got.iter().zip(want).enumerate() {
            assert!(
                close(*g, *w, REL, scale),
                "{program}: gradient {k}[{i}]: gradlift {g:e}, by hand {w:e}"
            );
        }
    }
}
