//! Ordinary functions through `#[autodiff_reverse]`: each derivative against
//! central finite differences of the native function at several inputs (chosen on
//! both sides of every branch), and the native function against values worked out
//! by hand.

// The functions are written in the subset the macro supports: loops over index
// ranges (iterators are not supported yet), a final `return`, `!(a < b)`, `%`.
#![allow(
    clippy::needless_range_loop,
    clippy::needless_return,
    clippy::nonminimal_bool,
    clippy::manual_is_multiple_of
)]

use gradlift::autodiff_reverse;

mod common;
use common::{check_close, fd};

// 1. An `if` expression on floats, whose branch flips with the inputs.

#[autodiff_reverse(d_branchy, Active, Active, Active)]
fn branchy(x: f64, y: f64) -> f64 {
    let a = if x > y { x * y } else { x + y.sin() };
    a * a + 1.0
}

#[test]
fn if_expression_on_floats() {
    assert_eq!(branchy(3.0, 2.0), 37.0);
    assert_eq!(branchy(1.0, 0.0), 1.0);
    assert_eq!(branchy(0.0, 1.0), (1f64.sin()).powi(2) + 1.0);
    for (x, y) in [(3.0, 2.0), (0.5, 2.0), (-1.0, -3.0), (-2.0, 0.7)] {
        let (v, dx, dy) = d_branchy(x, y, 1.0);
        assert_eq!(v, branchy(x, y));
        check_close(&[dx, dy], &fd(|p| branchy(p[0], p[1]), &[x, y]));
        // The seed scales the derivatives.
        let (_, dx2, dy2) = d_branchy(x, y, 2.0);
        assert_eq!((dx2, dy2), (2.0 * dx, 2.0 * dy));
    }
}

// 2. An `else if` chain, statements assigning an outer variable, a final `return`.

#[autodiff_reverse(d_piecewise, Active, Active)]
fn piecewise(x: f64) -> f64 {
    let mut y = 0.0;
    if x < -1.0 {
        y = -x * x;
    } else if x < 1.0 {
        y = x.powi(3) - 2.0;
    } else {
        let t = x.ln();
        y += t * t.exp();
    }
    return y * std::f64::consts::PI;
}

#[test]
fn else_if_chain() {
    let pi = std::f64::consts::PI;
    assert_eq!(piecewise(-2.0), -4.0 * pi);
    assert_eq!(piecewise(0.5), (0.125 - 2.0) * pi);
    assert_eq!(piecewise(1.0), 0.0);
    for x in [-2.5, -1.2, -0.3, 0.8, 1.5, 4.0] {
        let (v, dx) = d_piecewise(x, 1.0);
        assert_eq!(v, piecewise(x));
        check_close(&[dx], &fd(|p| piecewise(p[0]), &[x]));
    }
}

// 3. A loop with an accumulator over a slice; `Duplicated` accumulates.

#[autodiff_reverse(d_sum_sq, Duplicated, Active)]
fn sum_sq(x: &[f64]) -> f64 {
    let mut s = 0.0;
    for i in 0..x.len() {
        s += x[i] * x[i];
    }
    s
}

#[test]
fn loop_accumulator() {
    assert_eq!(sum_sq(&[1.0, 2.0, 3.0]), 14.0);
    assert_eq!(sum_sq(&[]), 0.0);
    for x in [
        vec![1.0, 2.0, 3.0],
        vec![-0.5],
        vec![0.1, -7.0, 2.0, 3.5, 1e-3],
    ] {
        let mut dx = vec![0.0; x.len()];
        let v = d_sum_sq(&x, &mut dx, 1.0);
        assert_eq!(v, sum_sq(&x));
        check_close(&dx, &fd(sum_sq, &x));
        // A second call adds the gradient again.
        d_sum_sq(&x, &mut dx, 1.0);
        let twice: Vec<f64> = x.iter().map(|xi| 4.0 * xi).collect();
        check_close(&dx, &twice);
    }
    // An empty slice: a loop of no trips.
    assert_eq!(d_sum_sq(&[], &mut [], 1.0), 0.0);
}

// 4. Rosenbrock over a slice, with `x.len() - 1` and `x[i + 1]`.

#[autodiff_reverse(d_rosen, Duplicated, Active)]
fn rosen(x: &[f64]) -> f64 {
    let mut acc = 0.0;
    for i in 0..x.len() - 1 {
        let a = x[i];
        let b = x[i + 1];
        acc += 100.0 * (b - a * a).powi(2) + (1.0 - a).powi(2);
    }
    acc
}

#[test]
fn rosenbrock_slice() {
    assert_eq!(rosen(&[1.0, 1.0, 1.0]), 0.0);
    assert_eq!(rosen(&[0.0, 1.0]), 101.0);
    for x in [
        vec![0.5, 1.0, -0.25],
        vec![1.2, 1.1, 0.9, -0.3],
        vec![0.0, 2.0],
    ] {
        let mut dx = vec![0.0; x.len()];
        let v = d_rosen(&x, &mut dx, 1.0);
        assert_eq!(v, rosen(&x));
        check_close(&dx, &fd(rosen, &x));
    }
}

// 5. A slice scaled in place (`()` result): the shadow of `x` is the seed of what
// the function leaves in it, and comes back as the gradient of the entry values.

#[autodiff_reverse(d_scale, Duplicated, Active)]
fn scale(x: &mut [f64], a: f64) {
    for i in 0..x.len() {
        x[i] *= a;
        if x[i] < 0.0 {
            x[i] = x[i] * x[i];
        }
    }
}

/// The loss `sum(w * f(x, a))` of a function writing into `x`, natively.
fn weighted(f: impl Fn(&mut [f64], f64), w: &[f64], p: &[f64]) -> f64 {
    let (a, x) = (p[0], p[1..].to_vec());
    let mut y = x.clone();
    f(&mut y, a);
    y.iter().zip(w).map(|(y, w)| y * w).sum()
}

#[test]
fn slice_written_in_place() {
    let mut x = [1.0, -2.0, 3.0];
    scale(&mut x, 2.0);
    assert_eq!(x, [2.0, 16.0, 6.0]);
    for (x0, a, w) in [
        (vec![1.0, -2.0, 3.0], 2.0, vec![1.0, 0.5, -1.0]),
        (vec![0.3, 0.7], -1.5, vec![2.0, 1.0]),
    ] {
        let mut x = x0.clone();
        let mut dx = w.clone();
        let da = d_scale(&mut x, &mut dx, a);
        let mut native = x0.clone();
        scale(&mut native, a);
        assert_eq!(x, native);
        let mut p = vec![a];
        p.extend(&x0);
        let want = fd(|p| weighted(scale, &w, p), &p);
        let mut got = vec![da];
        got.extend(&dx);
        check_close(&got, &want);
    }
}

// 6. Nested loops with a `usize` bound and `as f64`.

#[autodiff_reverse(d_nested, Duplicated, Const, Active)]
fn nested(x: &[f64], n: usize) -> f64 {
    let mut s = 0.0;
    for k in 0..n {
        let mut inner = 0.0;
        for j in 0..x.len() {
            inner += x[j] * (k as f64 + 1.0) + (x[j] * j as f64).sin();
        }
        s += inner * inner;
    }
    s / n as f64
}

#[test]
fn nested_loops() {
    assert_eq!(nested(&[1.0, 0.0], 2), (1.0 + 4.0) / 2.0);
    for (x, n) in [
        (vec![0.2, -0.4, 1.1], 3),
        (vec![1.5], 1),
        (vec![0.3, 0.9], 5),
    ] {
        let mut dx = vec![0.0; x.len()];
        let v = d_nested(&x, &mut dx, n, 1.0);
        assert_eq!(v, nested(&x, n));
        check_close(&dx, &fd(|x| nested(x, n), &x));
    }
}

// 7. Branches inside a loop carrying a float and an integer; `else if` on
// `Const` bounds; an `f64` result of an integer count.

#[autodiff_reverse(d_clamp_sum, Duplicated, Active, Const, Active)]
fn clamp_sum(x: &[f64], lo: f64, hi: f64) -> f64 {
    let mut s = 0.0;
    let mut clipped = 0;
    for i in 0..x.len() {
        let v = x[i];
        if v > hi {
            s += hi;
            clipped += 1;
        } else if v < lo {
            s += lo * v.abs();
            clipped += 1;
        } else {
            s += v * v;
        }
    }
    s + clipped as f64 * 0.5
}

#[test]
fn branches_in_loops() {
    assert_eq!(
        clamp_sum(&[0.5, 3.0, -2.0], -1.0, 1.0),
        0.25 + 1.0 - 2.0 + 1.0
    );
    let x = vec![0.5, 3.0, -2.0, 0.9, -0.2];
    for (lo, hi) in [(-1.0, 1.0), (-3.0, 0.0), (0.6, 4.0)] {
        let mut dx = vec![0.0; x.len()];
        let (v, dlo) = d_clamp_sum(&x, &mut dx, lo, hi, 1.0);
        assert_eq!(v, clamp_sum(&x, lo, hi));
        let mut p = vec![lo];
        p.extend(&x);
        let want = fd(|p| clamp_sum(&p[1..], p[0], hi), &p);
        let mut got = vec![dlo];
        got.extend(&dx);
        check_close(&got, &want);
    }
}

// 8. Prefix sums in place, reading what the loop wrote before.

#[autodiff_reverse(d_prefix, Duplicated)]
fn prefix(x: &mut [f64]) {
    for i in 1..x.len() {
        x[i] += x[i - 1] * 0.5;
    }
}

#[test]
fn prefix_in_place() {
    let mut x = [1.0, 2.0, 4.0];
    prefix(&mut x);
    assert_eq!(x, [1.0, 2.5, 5.25]);
    let x0 = vec![1.0, -2.0, 4.0, 0.5];
    let w = vec![0.3, -1.0, 2.0, 1.0];
    let mut x = x0.clone();
    let mut dx = w.clone();
    d_prefix(&mut x, &mut dx);
    let mut native = x0.clone();
    prefix(&mut native);
    assert_eq!(x, native);
    let want = fd(
        |p| weighted(|x, _| prefix(x), &w, p),
        &[[0.0].as_slice(), &x0].concat(),
    );
    check_close(&dx, &want[1..]);
}

// 9. logsumexp with `max`, `exp`, `ln`, two slices.

#[autodiff_reverse(d_lse_dot, Duplicated, Const, Active)]
fn lse_dot(x: &[f64], w: &[f64]) -> f64 {
    let mut m = f64::NEG_INFINITY;
    for i in 0..x.len() {
        m = m.max(x[i] * w[i]);
    }
    let mut s = 0.0;
    for i in 0..x.len() {
        s += (x[i] * w[i] - m).exp();
    }
    m + s.ln()
}

#[test]
fn logsumexp() {
    assert_eq!(lse_dot(&[0.0, 0.0], &[1.0, 1.0]), 2f64.ln());
    let w = vec![1.0, -2.0, 0.5];
    for x in [
        vec![0.1, 0.2, 0.3],
        vec![3.0, -1.0, 8.0],
        vec![-4.0, 0.0, 0.0],
    ] {
        let mut dx = vec![0.0; 3];
        let v = d_lse_dot(&x, &mut dx, &w, 1.0);
        assert_eq!(v, lse_dot(&x, &w));
        check_close(&dx, &fd(|x| lse_dot(x, &w), &x));
    }
}

// 10. Newton's square root: a fixed number of steps (`..=`, `_`), a `Const` return
// and `Const` scalar parameter.

#[autodiff_reverse(d_newton, Active, Const, Active)]
fn newton(a: f64, start: f64) -> f64 {
    let mut y = start;
    for _ in 1..=30 {
        y = 0.5 * (y + a / y);
    }
    y
}

// A `Const` return: only the shadow of `out` seeds the derivative.
#[autodiff_reverse(d_side, Active, Duplicated, Const)]
fn side(a: f64, out: &mut f64) -> f64 {
    *out = *out * a + a.tanh();
    a * 10.0
}

#[test]
fn newton_sqrt() {
    assert_eq!(newton(4.0, 1.0), 2.0);
    for a in [2.0, 9.0, 0.25] {
        let (v, da) = d_newton(a, 1.0, 1.0);
        assert_eq!(v, newton(a, 1.0));
        check_close(&[da], &[0.5 / a.sqrt()]);
        check_close(&[da], &fd(|p| newton(p[0], 1.0), &[a]));
    }
}

#[test]
fn const_return() {
    let mut o = 2.0;
    assert_eq!(side(0.0, &mut o), 0.0);
    assert_eq!(o, 0.0);
    for (a, o0) in [(0.5, 2.0), (-1.0, 3.0)] {
        let mut o = o0;
        let mut seed = 1.0;
        let (v, da) = d_side(a, &mut o, &mut seed);
        assert_eq!(v, 10.0 * a);
        assert_eq!(o, o0 * a + a.tanh());
        // d out / d a, and d out / d (out on entry) in the shadow.
        check_close(&[da, seed], &[o0 + 1.0 - a.tanh().powi(2), a]);
        let want = fd(
            |p| {
                let mut o = p[1];
                side(p[0], &mut o);
                o
            },
            &[a, o0],
        );
        check_close(&[da, seed], &want);
    }
}

// 11. `&&`, `||` and `!`, short-circuiting as in Rust: `i < x.len() && x[i] > 0.0`
// never reads past the end, though the loop runs beyond it.

#[autodiff_reverse(d_guarded, Duplicated, Const, Active, Active)]
fn guarded(x: &[f64], extra: usize, t: f64) -> f64 {
    let mut s = 0.0;
    for i in 0..x.len() + extra {
        if i < x.len() && x[i] > 0.0 {
            s += x[i] * t;
        }
        if !(i < x.len()) || x[i] < -1.0 {
            s += t * t;
        }
    }
    s
}

#[test]
fn short_circuit() {
    assert_eq!(guarded(&[1.0, -2.0, 0.5], 2, 2.0), 3.0 + 4.0 + 8.0);
    for (x, t) in [(vec![1.0, -2.0, 0.5], 2.0), (vec![-0.5, 3.0], -1.5)] {
        let mut dx = vec![0.0; x.len()];
        let (v, dt) = d_guarded(&x, &mut dx, 2, t, 1.0);
        assert_eq!(v, guarded(&x, 2, t));
        let mut p = vec![t];
        p.extend(&x);
        let want = fd(|p| guarded(&p[1..], 2, p[0]), &p);
        let mut got = vec![dt];
        got.extend(&dx);
        check_close(&got, &want);
    }
}

// 12. Casts and rounding: `as usize`, `floor`, integer `%` and `/`, `i64`.

#[autodiff_reverse(d_bins, Duplicated, Const, Active)]
fn bins(x: &[f64], k: i64) -> f64 {
    let mut s = 0.0;
    for i in 0..x.len() {
        let b = (x[i] * 2.0) as usize;
        let frac = x[i] * 2.0 - (x[i] * 2.0).floor();
        if b % 2 == 0 && (b as i64) / 2 < k {
            s += frac * x[i];
        } else {
            s -= frac.powf(1.5);
        }
    }
    s
}

#[test]
fn casts_and_rounding() {
    assert_eq!(bins(&[0.25, 0.75, -1.0], 3), 0.125 - 0.5f64.powf(1.5) + 0.0);
    let x = vec![0.3, 0.8, 1.1, 2.7, -0.4];
    for k in [0, 1, 2] {
        let mut dx = vec![0.0; x.len()];
        let v = d_bins(&x, &mut dx, k, 1.0);
        assert_eq!(v, bins(&x, k));
        check_close(&dx, &fd(|x| bins(x, k), &x));
    }
}

// 13. `while` loops with a data-dependent trip count: halving with a counter, and
// Newton's iteration to a tolerance.

#[autodiff_reverse(d_halve, Active, Active, Active)]
fn halve(x: f64, r: f64) -> f64 {
    let mut y = x;
    let mut k = 0;
    while y >= 1.0 {
        y *= r;
        k += 1;
    }
    y + k as f64
}

#[autodiff_reverse(d_cbrt, Active, Active)]
fn cbrt(a: f64) -> f64 {
    let mut y: f64 = 1.0;
    let mut step: f64 = 1.0;
    while step.abs() > 1e-14 * y.abs() {
        step = (y * y * y - a) / (3.0 * y * y);
        y -= step;
    }
    y
}

#[test]
fn while_loops() {
    assert_eq!(halve(10.0, 0.5), 0.625 + 4.0);
    assert_eq!(halve(0.5, 0.5), 0.5);
    for (x, r) in [(10.0, 0.5), (3.3, 0.3), (0.7, 0.9), (100.0, 0.77)] {
        let (v, dx, dr) = d_halve(x, r, 1.0);
        assert_eq!(v, halve(x, r));
        check_close(&[dx, dr], &fd(|p| halve(p[0], p[1]), &[x, r]));
    }
    assert!((cbrt(27.0) - 3.0).abs() < 1e-12);
    for a in [27.0, 0.5, 1000.0] {
        let (v, da) = d_cbrt(a, 1.0);
        assert_eq!(v, cbrt(a));
        check_close(&[da], &[1.0 / (3.0 * v * v)]);
    }
}

// 14. Several derivatives of one function, with different activities.

#[autodiff_reverse(d_mix_x, Active, Const, Active)]
#[autodiff_reverse(d_mix_y, Const, Active, Active)]
#[autodiff_reverse(d_mix_none, Const, Const, Const)]
/// A public function: its derivatives are public too, and documented.
pub fn mix(x: f64, y: f64) -> f64 {
    (x * y).sin() + x / y
}

#[test]
fn several_attributes() {
    let (x, y) = (0.7, -1.3);
    let want = fd(|p| mix(p[0], p[1]), &[x, y]);
    let (v, dx) = d_mix_x(x, y, 1.0);
    let (v2, dy) = d_mix_y(x, y, 1.0);
    assert_eq!((v, v2, d_mix_none(x, y)), (mix(x, y), mix(x, y), mix(x, y)));
    check_close(&[dx, dy], &want);
}

// 15. `Const` writable parameters: updated as the native function updates them,
// with no derivative. Storing an active value into a `Const` slice and reading it
// back would lose its derivative: gradlift refuses, and `NAME` panics with why.

#[autodiff_reverse(d_log_into, Active, Const, Const, Active)]
fn log_into(a: f64, buf: &mut [f64], last: &mut f64) -> f64 {
    let mut s = 0.0;
    for i in 0..buf.len() {
        buf[i] = i as f64 + 1.0;
        s += a * buf[i] * buf[i];
    }
    *last = s;
    s.sqrt()
}

#[test]
fn const_writable() {
    let (mut b1, mut b2) = ([0.0; 3], [0.0; 3]);
    let (mut l1, mut l2) = (1.0, 1.0);
    let v = log_into(2.0, &mut b1, &mut l1);
    assert_eq!((v, b1, l1), (28f64.sqrt(), [1.0, 2.0, 3.0], 28.0));
    let (v2, da) = d_log_into(2.0, &mut b2, &mut l2, 1.0);
    assert_eq!((v2, b2, l2), (v, b1, l1));
    check_close(&[da], &[14.0 / (2.0 * 28f64.sqrt())]);
}

#[autodiff_reverse(d_lost, Active, Const, Active)]
fn lost(a: f64, buf: &mut [f64]) -> f64 {
    buf[0] = a * a;
    buf[0] + 1.0
}

#[test]
#[should_panic(expected = "the derivative of `lost` failed: deriving the rule")]
fn const_slice_carrying_a_derivative() {
    let mut b = [0.0];
    assert_eq!(lost(3.0, &mut b), 10.0);
    d_lost(3.0, &mut b, 1.0);
}
