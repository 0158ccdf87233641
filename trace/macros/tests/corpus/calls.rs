//! Calls of `#[differentiable]` functions: helpers over scalars and slices, a
//! helper calling a helper, recursion (de Casteljau's Bézier evaluation, adaptive
//! Simpson quadrature) and mutual recursion (sine and cosine by angle halving).
//! The generic versions call their helpers through `func(..).call(..)`, so both
//! paths differentiate IR calls.

use gradlift::trace::{Int, Real, Var, cond, for_range, func};
use gradlift::{Active, Const, Duplicated, autodiff};
use gradlift::{autodiff_forward, autodiff_reverse, differentiable};

use super::common::{check_close, fd};
use super::{cat, check_generic, check_tangent, direction};

// Logistic regression's negative log-likelihood with an L2 penalty: a scalar helper
// with a branch (the logistic function, stable for either sign) and a slice helper
// (a row of the data times the weights, with a `usize` row).

#[differentiable]
fn sigmoid(z: f64) -> f64 {
    if z >= 0.0 {
        1.0 / (1.0 + (-z).exp())
    } else {
        let e = z.exp();
        e / (1.0 + e)
    }
}

#[differentiable]
fn row_dot(xs: &[f64], w: &[f64], row: usize) -> f64 {
    let d = w.len();
    let mut s = 0.0;
    for j in 0..d {
        s += xs[row * d + j] * w[j];
    }
    s
}

#[autodiff_reverse(d_logistic_nll, Duplicated, Const, Const, Active, Active)]
#[autodiff_forward(f_logistic_nll, Dual, Const, Const, Dual, Dual)]
fn logistic_nll(w: &[f64], xs: &[f64], ys: &[f64], l2: f64) -> f64 {
    let mut loss = 0.0;
    for r in 0..ys.len() {
        let p = sigmoid(row_dot(xs, w, r));
        loss -= ys[r] * p.ln() + (1.0 - ys[r]) * (1.0 - p).ln();
    }
    let mut reg = 0.0;
    for j in 0..w.len() {
        reg += w[j] * w[j];
    }
    loss / ys.len() as f64 + l2 * reg
}

fn sigmoid_g<T: Real>(z: T) -> T {
    cond(
        z.ge(0.0),
        || T::lit(1.0) / ((-z).exp() + 1.0),
        || {
            let e = z.exp();
            e / (e + 1.0)
        },
    )
}

fn row_dot_g<T: Real>(xs: T::Slice<'_>, w: T::Slice<'_>, row: T::Int) -> T {
    use gradlift::trace::SliceRead;
    let d = w.len();
    for_range(0, d, T::lit(0.0), |j, s| s + xs.at(row * d + j) * w.at(j))
}

fn logistic_nll_g<T: Real>(w: T::Slice<'_>, xs: T::Slice<'_>, ys: T::Slice<'_>, l2: T) -> T {
    use gradlift::trace::SliceRead;
    let loss = for_range(0, ys.len(), T::lit(0.0), |r, loss| {
        let z = func("row_dot", row_dot_g::<T>).call((xs, w, r));
        let p = func("sigmoid", sigmoid_g::<T>).call((z,));
        let y = ys.at(r);
        loss - (y * p.ln() + (T::lit(1.0) - y) * (T::lit(1.0) - p).ln())
    });
    let reg = for_range(0, w.len(), T::lit(0.0), |j, reg| reg + w.at(j) * w.at(j));
    loss / T::from_int(ys.len()) + l2 * reg
}

#[test]
fn logistic_regression_with_helpers() {
    let mut g = autodiff("logistic_nll", logistic_nll_g::<Var>).unwrap();
    let xs = [1.0, 0.5, -1.0, 2.0, 0.3, -0.7, -2.0, -1.0];
    let ys = [1.0, 0.0, 0.3, 1.0];
    assert_eq!(sigmoid(0.0), 0.5);
    for (w, l2) in [([0.5, -0.25], 0.1), ([-1.0, 2.0], 0.0), ([2.0, 1.5], 0.01)] {
        let y = logistic_nll(&w, &xs, &ys, l2);
        assert_eq!(logistic_nll_g::<f64>(&w, &xs, &ys, l2), y);
        let mut dw = [0.0; 2];
        let (v, dl2) = d_logistic_nll(&w, &mut dw, &xs, &ys, l2, 1.0);
        super::common::check_value_own_math(v, y);
        let want = fd(
            |p| logistic_nll(&p[..2], &xs, &ys, p[2]),
            &cat(&[&w, &[l2]]),
        );
        check_close(&cat(&[&dw, &[dl2]]), &want);
        let v3 = direction(3);
        let (fv, t) = f_logistic_nll(&w, &v3[..2], &xs, &ys, l2, v3[2]);
        assert_eq!(fv, v);
        check_tangent(t, &cat(&[&dw, &[dl2]]), &v3);
        let mut gdw = [0.0; 2];
        let args = (
            Duplicated(&w[..], &mut gdw[..]),
            Const(&xs[..]),
            Const(&ys[..]),
            Active(l2),
        );
        let (gv, ((), (), (), gl2)) = g.gradient(args).unwrap();
        assert_eq!(gv, v);
        check_generic(&cat(&[&dw, &[dl2]]), &cat(&[&gdw, &[gl2]]));
    }
}

// A Huber penalty on RMS-normalised values: `rms` calls `mean_sq`, a helper
// calling a helper.

#[differentiable]
fn mean_sq(x: &[f64]) -> f64 {
    let mut s = 0.0;
    for i in 0..x.len() {
        s += x[i] * x[i];
    }
    s / x.len() as f64
}

#[differentiable]
fn rms(x: &[f64], eps: f64) -> f64 {
    (mean_sq(x) + eps).sqrt()
}

#[autodiff_reverse(d_rms_huber, Duplicated, Active, Active)]
#[autodiff_forward(f_rms_huber, Dual, Dual, Dual)]
fn rms_huber(x: &[f64], gain: f64) -> f64 {
    let r = rms(x, 1e-6);
    let mut s = 0.0;
    for i in 0..x.len() {
        let y = gain * x[i] / r;
        s += if y > 1.0 {
            y - 0.5
        } else if y < -1.0 {
            -y - 0.5
        } else {
            0.5 * y * y
        };
    }
    s
}

fn mean_sq_g<T: Real>(x: T::Slice<'_>) -> T {
    use gradlift::trace::SliceRead;
    for_range(0, x.len(), T::lit(0.0), |i, s| s + x.at(i) * x.at(i)) / T::from_int(x.len())
}

fn rms_g<T: Real>(x: T::Slice<'_>, eps: T) -> T {
    (func("mean_sq", mean_sq_g::<T>).call((x,)) + eps).sqrt()
}

fn rms_huber_g<T: Real>(x: T::Slice<'_>, gain: T) -> T {
    use gradlift::trace::SliceRead;
    let r = func("rms", rms_g::<T>).call((x, T::lit(1e-6)));
    for_range(0, x.len(), T::lit(0.0), |i, s| {
        let y = gain * x.at(i) / r;
        s + cond(
            y.gt(1.0),
            || y - 0.5,
            || cond(y.lt(-1.0), || -y - 0.5, || T::lit(0.5) * y * y),
        )
    })
}

#[test]
fn helper_calling_a_helper() {
    let mut g = autodiff("rms_huber", rms_huber_g::<Var>).unwrap();
    assert_eq!(rms(&[3.0, 4.0], 0.0), 12.5f64.sqrt());
    for (x, gain) in [
        (vec![1.0, -2.0, 0.5], 1.0),
        (vec![1.0, -2.0, 0.5], 0.5),
        (vec![1.0, -2.0, 0.5], 2.0),
        (vec![0.3, 0.2, -0.1, 2.0], -2.0),
    ] {
        let y = rms_huber(&x, gain);
        assert_eq!(rms_huber_g::<f64>(&x, gain), y);
        let n = x.len();
        let mut dx = vec![0.0; n];
        let (v, dg) = d_rms_huber(&x, &mut dx, gain, 1.0);
        assert_eq!(v, y);
        let want = fd(|p| rms_huber(&p[..n], p[n]), &cat(&[&x, &[gain]]));
        check_close(&cat(&[&dx, &[dg]]), &want);
        let vd = direction(n + 1);
        let (fv, t) = f_rms_huber(&x, &vd[..n], gain, vd[n]);
        assert_eq!(fv, y);
        check_tangent(t, &cat(&[&dx, &[dg]]), &vd);
        let mut gdx = vec![0.0; n];
        let (gv, ((), gg)) = g
            .gradient((Duplicated(&x[..], &mut gdx[..]), Active(gain)))
            .unwrap();
        assert_eq!(gv, y);
        check_generic(&cat(&[&dx, &[dg]]), &cat(&[&gdx, &[gg]]));
    }
}

// A Bézier curve by de Casteljau's recursion on the control points: recursive
// calls with `i64` arguments, `i64 as usize` indexing.

#[differentiable]
fn casteljau(c: &[f64], i: i64, k: i64, t: f64) -> f64 {
    if k == 0 {
        c[i as usize]
    } else {
        (1.0 - t) * casteljau(c, i, k - 1, t) + t * casteljau(c, i + 1, k - 1, t)
    }
}

#[autodiff_reverse(d_bezier, Duplicated, Active, Active)]
#[autodiff_forward(f_bezier, Dual, Dual, Dual)]
fn bezier(c: &[f64], t: f64) -> f64 {
    casteljau(c, 0, c.len() as i64 - 1, t)
}

fn casteljau_g<T: Real>(c: T::Slice<'_>, i: T::Int, k: T::Int, t: T) -> T {
    use gradlift::trace::SliceRead;
    cond(
        k.eq(0),
        || c.at(i),
        || {
            let f = func("casteljau", casteljau_g::<T>);
            (T::lit(1.0) - t) * f.call((c, i, k - 1, t)) + t * f.call((c, i + 1, k - 1, t))
        },
    )
}

fn bezier_g<T: Real>(c: T::Slice<'_>, t: T) -> T {
    use gradlift::trace::SliceRead;
    func("casteljau", casteljau_g::<T>).call((c, T::Int::from(0), c.len() - 1, t))
}

#[test]
fn bezier_by_recursion() {
    let mut g = autodiff("bezier", bezier_g::<Var>).unwrap();
    // A quadratic: (1-t)^2 c0 + 2 t (1-t) c1 + t^2 c2.
    assert_eq!(bezier(&[1.0, 3.0, 2.0], 0.5), 0.25 + 1.5 + 0.5);
    for (c, t) in [
        (vec![1.0, 3.0, 2.0], 0.5),
        (vec![0.0, 2.0, -1.0, 4.0, 1.0], 0.3),
        (vec![0.0, 2.0, -1.0, 4.0, 1.0], 0.85),
        (vec![2.5], 0.4),
    ] {
        let y = bezier(&c, t);
        assert_eq!(bezier_g::<f64>(&c, t), y);
        let n = c.len();
        let mut dc = vec![0.0; n];
        let (v, dt) = d_bezier(&c, &mut dc, t, 1.0);
        assert_eq!(v, y);
        let want = fd(|p| bezier(&p[..n], p[n]), &cat(&[&c, &[t]]));
        check_close(&cat(&[&dc, &[dt]]), &want);
        let vd = direction(n + 1);
        let (fv, tangent) = f_bezier(&c, &vd[..n], t, vd[n]);
        assert_eq!(fv, y);
        check_tangent(tangent, &cat(&[&dc, &[dt]]), &vd);
        // The derivative in the control points is the Bernstein basis: sums to 1.
        assert!((dc.iter().sum::<f64>() - 1.0).abs() < 1e-14);
        let mut gdc = vec![0.0; n];
        let (gv, ((), gt)) = g
            .gradient((Duplicated(&c[..], &mut gdc[..]), Active(t)))
            .unwrap();
        assert_eq!(gv, y);
        check_generic(&cat(&[&dc, &[dt]]), &cat(&[&gdc, &[gt]]));
    }
}

// Adaptive Simpson quadrature of a damped wave: a recursive helper that stops
// (an early `return`) at a depth or once the two halves agree with the whole.

#[differentiable]
fn damped_wave(x: f64, omega: f64) -> f64 {
    (omega * x).sin() * (-0.5 * x).exp()
}

#[differentiable]
fn simpson_rec(a: f64, b: f64, omega: f64, whole: f64, depth: i64) -> f64 {
    let m = 0.5 * (a + b);
    let fa = damped_wave(a, omega);
    let fm = damped_wave(m, omega);
    let fb = damped_wave(b, omega);
    let lm = damped_wave(0.5 * (a + m), omega);
    let rm = damped_wave(0.5 * (m + b), omega);
    let left = (m - a) / 6.0 * (fa + 4.0 * lm + fm);
    let right = (b - m) / 6.0 * (fm + 4.0 * rm + fb);
    let delta = left + right - whole;
    if depth <= 0 || delta.abs() < 1e-6 {
        return left + right + delta / 15.0;
    }
    simpson_rec(a, m, omega, left, depth - 1) + simpson_rec(m, b, omega, right, depth - 1)
}

#[autodiff_reverse(d_adaptive_simpson, Active, Active, Active, Active)]
#[autodiff_forward(f_adaptive_simpson, Dual, Dual, Dual, Dual)]
fn adaptive_simpson(a: f64, b: f64, omega: f64) -> f64 {
    let fa = damped_wave(a, omega);
    let fm = damped_wave(0.5 * (a + b), omega);
    let fb = damped_wave(b, omega);
    let whole = (b - a) / 6.0 * (fa + 4.0 * fm + fb);
    simpson_rec(a, b, omega, whole, 8)
}

fn damped_wave_g<T: Real>(x: T, omega: T) -> T {
    (omega * x).sin() * (x * -0.5).exp()
}

fn simpson_rec_g<T: Real>(a: T, b: T, omega: T, whole: T, depth: T::Int) -> T {
    let w = func("damped_wave", damped_wave_g::<T>);
    let m = (a + b) * 0.5;
    let fa = w.call((a, omega));
    let fm = w.call((m, omega));
    let fb = w.call((b, omega));
    let lm = w.call(((a + m) * 0.5, omega));
    let rm = w.call(((m + b) * 0.5, omega));
    let left = (m - a) / 6.0 * (fa + T::lit(4.0) * lm + fm);
    let right = (b - m) / 6.0 * (fm + T::lit(4.0) * rm + fb);
    let delta = left + right - whole;
    cond(
        depth.le(0) | delta.abs().lt(1e-6),
        || left + right + delta / 15.0,
        || {
            let f = func("simpson_rec", simpson_rec_g::<T>);
            f.call((a, m, omega, left, depth - 1)) + f.call((m, b, omega, right, depth - 1))
        },
    )
}

fn adaptive_simpson_g<T: Real>(a: T, b: T, omega: T) -> T {
    let w = func("damped_wave", damped_wave_g::<T>);
    let fa = w.call((a, omega));
    let fm = w.call(((a + b) * 0.5, omega));
    let fb = w.call((b, omega));
    let whole = (b - a) / 6.0 * (fa + T::lit(4.0) * fm + fb);
    func("simpson_rec", simpson_rec_g::<T>).call((a, b, omega, whole, T::Int::from(8)))
}

#[test]
fn adaptive_quadrature_by_recursion() {
    let mut g = autodiff("adaptive_simpson", adaptive_simpson_g::<Var>).unwrap();
    for (a, b, w) in [(0.0, 3.0, 2.0), (-1.0, 1.0, 0.5), (0.5, 6.0, 5.0)] {
        let y = adaptive_simpson(a, b, w);
        assert_eq!(adaptive_simpson_g(a, b, w), y);
        let (v, da, db, dw) = d_adaptive_simpson(a, b, w, 1.0);
        assert_eq!(v, y);
        let want = fd(|p| adaptive_simpson(p[0], p[1], p[2]), &[a, b, w]);
        check_close(&[da, db, dw], &want);
        let vd = direction(3);
        let (fv, t) = f_adaptive_simpson(a, vd[0], b, vd[1], w, vd[2]);
        assert_eq!(fv, y);
        check_tangent(t, &[da, db, dw], &vd);
        // The integral's derivative in b is the integrand at b (to the rule's error).
        assert!((db - damped_wave(b, w)).abs() < 1e-4);
        let (gv, (ga, gb, gw)) = g.gradient((Active(a), Active(b), Active(w))).unwrap();
        assert_eq!(gv, y);
        check_generic(&[da, db, dw], &[ga, gb, gw]);
    }
}

// Rotating a point by an angle whose sine and cosine come from their Taylor
// polynomials at angle / 2^depth, doubled back up: `half_sin` and `half_cos` call
// each other.

#[differentiable]
fn half_sin(x: f64, d: i64) -> f64 {
    if d == 0 {
        x - x * x * x / 6.0 + x.powi(5) / 120.0
    } else {
        2.0 * half_sin(0.5 * x, d - 1) * half_cos(0.5 * x, d - 1)
    }
}

#[differentiable]
fn half_cos(x: f64, d: i64) -> f64 {
    if d == 0 {
        1.0 - x * x / 2.0 + x.powi(4) / 24.0
    } else {
        let s = half_sin(0.5 * x, d - 1);
        1.0 - 2.0 * s * s
    }
}

#[autodiff_reverse(d_rotate_residual, Active, Active, Active, Const, Active)]
#[autodiff_forward(f_rotate_residual, Dual, Dual, Dual, Const, Dual)]
fn rotate_residual(px: f64, py: f64, angle: f64, depth: i64) -> f64 {
    let c = half_cos(angle, depth);
    let s = half_sin(angle, depth);
    let rx = c * px - s * py;
    let ry = s * px + c * py;
    (rx - 1.0).powi(2) + ry * ry
}

fn half_sin_g<T: Real>(x: T, d: T::Int) -> T {
    cond(
        d.eq(0),
        || x - x * x * x / 6.0 + x.powi(5) / 120.0,
        || {
            let s = func("half_sin", half_sin_g::<T>).call((x * 0.5, d - 1));
            let c = func("half_cos", half_cos_g::<T>).call((x * 0.5, d - 1));
            T::lit(2.0) * s * c
        },
    )
}

fn half_cos_g<T: Real>(x: T, d: T::Int) -> T {
    cond(
        d.eq(0),
        || T::lit(1.0) - x * x / 2.0 + x.powi(4) / 24.0,
        || {
            let s = func("half_sin", half_sin_g::<T>).call((x * 0.5, d - 1));
            T::lit(1.0) - T::lit(2.0) * s * s
        },
    )
}

fn rotate_residual_g<T: Real>(px: T, py: T, angle: T, depth: T::Int) -> T {
    let c = func("half_cos", half_cos_g::<T>).call((angle, depth));
    let s = func("half_sin", half_sin_g::<T>).call((angle, depth));
    let rx = c * px - s * py;
    let ry = s * px + c * py;
    (rx - 1.0).powi(2) + ry * ry
}

#[test]
fn mutual_recursion() {
    let mut g = autodiff("rotate_residual", rotate_residual_g::<Var>).unwrap();
    assert!((half_sin(1.0, 8) - 1f64.sin()).abs() < 1e-12);
    assert!((half_cos(2.0, 8) - 2f64.cos()).abs() < 1e-12);
    for (px, py, angle, depth) in [(1.0, 0.5, 0.7, 0), (0.3, -1.2, 2.0, 3), (2.0, 1.0, -1.1, 6)] {
        let y = rotate_residual(px, py, angle, depth);
        assert_eq!(rotate_residual_g(px, py, angle, depth), y);
        let (v, dx, dy, da) = d_rotate_residual(px, py, angle, depth, 1.0);
        assert_eq!(v, y);
        let want = fd(
            |p| rotate_residual(p[0], p[1], p[2], depth),
            &[px, py, angle],
        );
        check_close(&[dx, dy, da], &want);
        let vd = direction(3);
        let (fv, t) = f_rotate_residual(px, vd[0], py, vd[1], angle, vd[2], depth);
        assert_eq!(fv, y);
        check_tangent(t, &[dx, dy, da], &vd);
        let args = (Active(px), Active(py), Active(angle), Const(depth));
        let (gv, (gx, gy, ga, ())) = g.gradient(args).unwrap();
        assert_eq!(gv, y);
        check_generic(&[dx, dy, da], &[gx, gy, ga]);
    }
}
