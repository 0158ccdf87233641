//! Losses and reductions over slices (`Duplicated`, with `Const` data and `Active`
//! scalars): logsumexp, mean squared error, label-smoothed cross-entropy, a Huber
//! regression, Chebyshev series, moving averages, compensated sums, quadrature,
//! pooling, table sampling, and integer bookkeeping.

use gradlift::autodiff_reverse;
use gradlift::trace::{Int, Real, Var, cond, for_range, while_loop};
use gradlift::{Active, Const, Duplicated, autodiff};

use super::common::{check_close, fd};
use super::{cat, check_generic};

// logsumexp with a temperature: two passes over `x.iter()` (`&v`), the maximum
// first (`f64::NEG_INFINITY`, `max`).

#[autodiff_reverse(d_logsumexp_temp, Duplicated, Active, Active)]
fn logsumexp_temp(x: &[f64], tau: f64) -> f64 {
    let mut m = f64::NEG_INFINITY;
    for &v in x.iter() {
        m = m.max(v);
    }
    let mut s = 0.0;
    for &v in x.iter() {
        s += ((v - m) / tau).exp();
    }
    m + tau * s.ln()
}

fn logsumexp_temp_g<T: Real>(x: T::Slice<'_>, tau: T) -> T {
    use gradlift::trace::SliceRead;
    let n = x.len();
    let m = for_range(0, n, T::lit(f64::NEG_INFINITY), |i, m| m.max(x.at(i)));
    let s = for_range(0, n, T::lit(0.0), |i, s| s + ((x.at(i) - m) / tau).exp());
    m + tau * s.ln()
}

#[test]
fn logsumexp_with_temperature() {
    let mut g = autodiff("logsumexp_temp", logsumexp_temp_g::<Var>).unwrap();
    assert_eq!(logsumexp_temp(&[0.0, 0.0], 1.0), 2f64.ln());
    for (x, tau) in [
        (vec![0.1, 0.2, 0.3], 1.0),
        (vec![3.0, -1.0, 8.0, 7.5], 0.5),
        (vec![-4.0, 2.0], 2.0),
        (vec![1.5], 0.7),
    ] {
        let y = logsumexp_temp(&x, tau);
        assert_eq!(logsumexp_temp_g::<f64>(&x, tau), y);
        let mut dx = vec![0.0; x.len()];
        let (v, dtau) = d_logsumexp_temp(&x, &mut dx, tau, 1.0);
        assert_eq!(v, y);
        let n = x.len();
        let want = fd(|p| logsumexp_temp(&p[..n], p[n]), &cat(&[&x, &[tau]]));
        check_close(&cat(&[&dx, &[dtau]]), &want);
        let mut gdx = vec![0.0; n];
        let (gv, ((), gtau)) = g
            .gradient((Duplicated(&x[..], &mut gdx[..]), Active(tau)))
            .unwrap();
        assert_eq!(gv, y);
        check_generic(&cat(&[&dx, &[dtau]]), &cat(&[&gdx, &[gtau]]));
    }
}

// Mean squared error against a `Const` target: `iter().enumerate()` with `*p`,
// `/=`, `as f64`.

#[autodiff_reverse(d_mse, Duplicated, Const, Active)]
fn mse(pred: &[f64], target: &[f64]) -> f64 {
    let mut s = 0.0;
    for (i, p) in pred.iter().enumerate() {
        let r = *p - target[i];
        s += r * r;
    }
    s /= pred.len() as f64;
    s
}

fn mse_g<T: Real>(pred: T::Slice<'_>, target: T::Slice<'_>) -> T {
    use gradlift::trace::SliceRead;
    let s = for_range(0, pred.len(), T::lit(0.0), |i, s| {
        let r = pred.at(i) - target.at(i);
        s + r * r
    });
    s / T::from_int(pred.len())
}

#[test]
fn mean_squared_error() {
    let mut g = autodiff("mse", mse_g::<Var>).unwrap();
    let target = [1.0, -2.0, 0.5];
    assert_eq!(mse(&[1.0, -2.0, 0.5], &target), 0.0);
    for pred in [[0.0, 0.0, 0.0], [1.5, -2.5, 3.0], [-1.0, 4.0, 0.25]] {
        let y = mse(&pred, &target);
        assert_eq!(mse_g::<f64>(&pred, &target), y);
        let mut dp = [0.0; 3];
        let v = d_mse(&pred, &mut dp, &target, 1.0);
        assert_eq!(v, y);
        check_close(&dp, &fd(|p| mse(p, &target), &pred));
        let mut gdp = [0.0; 3];
        let (gv, ((), ())) = g
            .gradient((Duplicated(&pred[..], &mut gdp[..]), Const(&target[..])))
            .unwrap();
        assert_eq!(gv, y);
        check_generic(&dp, &gdp);
    }
}

// Softmax cross-entropy of logits with label smoothing: the maximum by an `if`
// statement, `i == label` on `usize`, `-=`.

#[autodiff_reverse(d_xent_smooth, Duplicated, Const, Active, Active)]
fn xent_smooth(logits: &[f64], label: usize, eps: f64) -> f64 {
    let n = logits.len();
    let mut m = logits[0];
    for i in 1..n {
        if logits[i] > m {
            m = logits[i];
        }
    }
    let mut z = 0.0;
    for i in 0..n {
        z += (logits[i] - m).exp();
    }
    let lse = m + z.ln();
    let mut loss = 0.0;
    for i in 0..n {
        let target = if i == label {
            1.0 - eps + eps / n as f64
        } else {
            eps / n as f64
        };
        loss -= target * (logits[i] - lse);
    }
    loss
}

fn xent_smooth_g<T: Real>(logits: T::Slice<'_>, label: T::Int, eps: T) -> T {
    use gradlift::trace::SliceRead;
    let n = logits.len();
    let m = for_range(1, n, logits.at(0), |i, m| {
        cond(logits.at(i).gt(m), || logits.at(i), || m)
    });
    let z = for_range(0, n, T::lit(0.0), |i, z| z + (logits.at(i) - m).exp());
    let lse = m + z.ln();
    for_range(0, n, T::lit(0.0), |i, loss| {
        let target = cond(
            i.eq(label),
            || T::lit(1.0) - eps + eps / T::from_int(n),
            || eps / T::from_int(n),
        );
        loss - target * (logits.at(i) - lse)
    })
}

#[test]
fn label_smoothed_cross_entropy() {
    let mut g = autodiff("xent_smooth", xent_smooth_g::<Var>).unwrap();
    for (x, label, eps) in [
        (vec![2.0, 0.5, -1.0], 0usize, 0.1),
        (vec![-1.0, 3.0, 0.2, 2.5], 2, 0.0),
        (vec![0.3, -0.7, 1.9, 4.0], 3, 0.25),
    ] {
        let y = xent_smooth(&x, label, eps);
        assert_eq!(xent_smooth_g::<f64>(&x, label as i64, eps), y);
        let mut dx = vec![0.0; x.len()];
        let (v, deps) = d_xent_smooth(&x, &mut dx, label, eps, 1.0);
        assert_eq!(v, y);
        let n = x.len();
        let want = fd(|p| xent_smooth(&p[..n], label, p[n]), &cat(&[&x, &[eps]]));
        check_close(&cat(&[&dx, &[deps]]), &want);
        // The gradient of the logits is softmax - target, which sums to 0.
        assert!(dx.iter().sum::<f64>().abs() < 1e-12);
        let mut gdx = vec![0.0; n];
        let args = (
            Duplicated(&x[..], &mut gdx[..]),
            Const(label as i64),
            Active(eps),
        );
        let (gv, ((), (), geps)) = g.gradient(args).unwrap();
        assert_eq!(gv, y);
        check_generic(&cat(&[&dx, &[deps]]), &cat(&[&gdx, &[geps]]));
    }
}

// A linear model's Huber loss over a `Const` data set (rows of `xs`) with a `Const`
// threshold: nested loops, an `if` expression in a compound assignment.

#[autodiff_reverse(d_huber_regression, Duplicated, Const, Const, Const, Active)]
fn huber_regression(w: &[f64], xs: &[f64], ys: &[f64], delta: f64) -> f64 {
    let d = w.len();
    let mut loss = 0.0;
    for r in 0..ys.len() {
        let mut pred = 0.0;
        for j in 0..d {
            pred += xs[r * d + j] * w[j];
        }
        let res = pred - ys[r];
        let a = res.abs();
        loss += if a <= delta {
            0.5 * res * res
        } else {
            delta * (a - 0.5 * delta)
        };
    }
    loss / ys.len() as f64
}

fn huber_regression_g<T: Real>(w: T::Slice<'_>, xs: T::Slice<'_>, ys: T::Slice<'_>, delta: T) -> T {
    use gradlift::trace::SliceRead;
    let d = w.len();
    let loss = for_range(0, ys.len(), T::lit(0.0), |r, loss| {
        let pred = for_range(0, d, T::lit(0.0), |j, p| p + xs.at(r * d + j) * w.at(j));
        let res = pred - ys.at(r);
        let a = res.abs();
        loss + cond(
            a.le(delta),
            || res * 0.5 * res,
            || delta * (a - delta * 0.5),
        )
    });
    loss / T::from_int(ys.len())
}

#[test]
fn huber_regression_loss() {
    let mut g = autodiff("huber_regression", huber_regression_g::<Var>).unwrap();
    let xs = [1.0, 0.5, -1.0, 2.0, 0.3, 0.3, 2.0, -1.5];
    let ys = [1.1, -0.4, 0.2, 3.0];
    for (w, delta) in [
        ([0.5, 0.5], 1.0),
        ([2.0, -1.0], 0.5),
        ([0.0, 0.0], 5.0),
        ([-1.0, 1.5], 0.3),
    ] {
        let y = huber_regression(&w, &xs, &ys, delta);
        assert_eq!(huber_regression_g::<f64>(&w, &xs, &ys, delta), y);
        let mut dw = [0.0; 2];
        let v = d_huber_regression(&w, &mut dw, &xs, &ys, delta, 1.0);
        assert_eq!(v, y);
        check_close(&dw, &fd(|w| huber_regression(w, &xs, &ys, delta), &w));
        let mut gdw = [0.0; 2];
        let args = (
            Duplicated(&w[..], &mut gdw[..]),
            Const(&xs[..]),
            Const(&ys[..]),
            Const(delta),
        );
        let (gv, _) = g.gradient(args).unwrap();
        assert_eq!(gv, y);
        check_generic(&dw, &gdw);
    }
}

// A Chebyshev series by Clenshaw's recurrence, from the last coefficient down
// (`(1..n).rev()`), `x` clamped to [-1, 1]; an empty series returns early.

#[autodiff_reverse(d_clenshaw, Duplicated, Active, Active)]
fn clenshaw(c: &[f64], x: f64) -> f64 {
    let n = c.len();
    if n == 0 {
        return 0.0;
    }
    let t = x.max(-1.0).min(1.0);
    let mut b1 = 0.0;
    let mut b2 = 0.0;
    for k in (1..n).rev() {
        let b0 = 2.0 * t * b1 - b2 + c[k];
        b2 = b1;
        b1 = b0;
    }
    t * b1 - b2 + c[0]
}

fn clenshaw_g<T: Real>(c: T::Slice<'_>, x: T) -> T {
    use gradlift::trace::SliceRead;
    let n = c.len();
    cond(
        n.eq(0),
        || T::lit(0.0),
        || {
            let t = x.max(T::lit(-1.0)).min(T::lit(1.0));
            // k = n - j runs from n - 1 down to 1.
            let (b1, b2) = for_range(1, n, (T::lit(0.0), T::lit(0.0)), |j, (b1, b2)| {
                (t * 2.0 * b1 - b2 + c.at(n - j), b1)
            });
            t * b1 - b2 + c.at(0)
        },
    )
}

#[test]
fn chebyshev_series() {
    let mut g = autodiff("clenshaw", clenshaw_g::<Var>).unwrap();
    // T0 + T1 + T2 at 0.5: 1 + 0.5 + (2 * 0.25 - 1).
    assert_eq!(clenshaw(&[1.0, 1.0, 1.0], 0.5), 1.0);
    let c = vec![1.0, 0.5, -0.25, 0.125, 0.3];
    for (c, x) in [
        (c.clone(), 0.3),
        (c.clone(), -0.8),
        (c.clone(), 1.5),
        (c.clone(), -2.0),
        (vec![], 0.3),
        (vec![2.0, -1.0], 0.9),
    ] {
        let y = clenshaw(&c, x);
        assert_eq!(clenshaw_g::<f64>(&c, x), y);
        let mut dc = vec![0.0; c.len()];
        let (v, dx) = d_clenshaw(&c, &mut dc, x, 1.0);
        assert_eq!(v, y);
        let n = c.len();
        let want = fd(|p| clenshaw(&p[..n], p[n]), &cat(&[&c, &[x]]));
        check_close(&cat(&[&dc, &[dx]]), &want);
        let mut gdc = vec![0.0; n];
        let (gv, ((), gx)) = g
            .gradient((Duplicated(&c[..], &mut gdc[..]), Active(x)))
            .unwrap();
        assert_eq!(gv, y);
        check_generic(&cat(&[&dc, &[dx]]), &cat(&[&gdc, &[gx]]));
    }
}

// The squared residuals of an exponential moving average: `iter().enumerate()`,
// an `if` / `else` statement on the index.

#[autodiff_reverse(d_ema_residual, Duplicated, Active, Active)]
fn ema_residual(x: &[f64], alpha: f64) -> f64 {
    let mut m = 0.0;
    let mut acc = 0.0;
    for (i, &v) in x.iter().enumerate() {
        if i == 0 {
            m = v;
        } else {
            m = alpha * v + (1.0 - alpha) * m;
        }
        acc += (v - m).powi(2);
    }
    acc
}

fn ema_residual_g<T: Real>(x: T::Slice<'_>, alpha: T) -> T {
    use gradlift::trace::SliceRead;
    let (_, acc) = for_range(0, x.len(), (T::lit(0.0), T::lit(0.0)), |i, (m, acc)| {
        let v = x.at(i);
        let m = cond(i.eq(0), || v, || alpha * v + (T::lit(1.0) - alpha) * m);
        (m, acc + (v - m).powi(2))
    });
    acc
}

#[test]
fn moving_average_residual() {
    let mut g = autodiff("ema_residual", ema_residual_g::<Var>).unwrap();
    assert_eq!(ema_residual(&[3.0], 0.5), 0.0);
    for (x, a) in [
        (vec![1.0, 2.0, 0.5, 3.0], 0.3),
        (vec![-1.0, 4.0, 2.0], 0.9),
        (vec![0.2, 0.1], 0.05),
    ] {
        let y = ema_residual(&x, a);
        assert_eq!(ema_residual_g::<f64>(&x, a), y);
        let mut dx = vec![0.0; x.len()];
        let (v, da) = d_ema_residual(&x, &mut dx, a, 1.0);
        assert_eq!(v, y);
        let n = x.len();
        let want = fd(|p| ema_residual(&p[..n], p[n]), &cat(&[&x, &[a]]));
        check_close(&cat(&[&dx, &[da]]), &want);
        let mut gdx = vec![0.0; n];
        let (gv, ((), ga)) = g
            .gradient((Duplicated(&x[..], &mut gdx[..]), Active(a)))
            .unwrap();
        assert_eq!(gv, y);
        check_generic(&cat(&[&dx, &[da]]), &cat(&[&gdx, &[ga]]));
    }
}

// Kahan's compensated dot product: two `Duplicated` slices, the compensation
// carried through the loop (its derivative cancels, up to rounding).

#[autodiff_reverse(d_kahan_dot, Duplicated, Duplicated, Active)]
fn kahan_dot(x: &[f64], y: &[f64]) -> f64 {
    let mut s = 0.0;
    let mut c = 0.0;
    for i in 0..x.len() {
        let p = x[i] * y[i] - c;
        let t = s + p;
        c = (t - s) - p;
        s = t;
    }
    s
}

fn kahan_dot_g<T: Real>(x: T::Slice<'_>, y: T::Slice<'_>) -> T {
    use gradlift::trace::SliceRead;
    let (s, _) = for_range(0, x.len(), (T::lit(0.0), T::lit(0.0)), |i, (s, c)| {
        let p = x.at(i) * y.at(i) - c;
        let t = s + p;
        (t, (t - s) - p)
    });
    s
}

#[test]
fn compensated_dot() {
    let mut g = autodiff("kahan_dot", kahan_dot_g::<Var>).unwrap();
    // The compensation recovers what plain summation loses.
    assert_eq!(
        kahan_dot(&[1.0, 1e-16, 1e-16], &[1.0, 1.0, 1.0]),
        1.0 + 2e-16
    );
    for (x, y) in [
        (vec![1.0, 2.0, 3.0], vec![0.5, -1.0, 2.0]),
        (vec![1e8, 1.0, -1e8, 0.25], vec![1.0, 3.0, 1.0, -2.0]),
        (vec![-0.3], vec![0.7]),
    ] {
        let v0 = kahan_dot(&x, &y);
        assert_eq!(kahan_dot_g::<f64>(&x, &y), v0);
        let n = x.len();
        let (mut dx, mut dy) = (vec![0.0; n], vec![0.0; n]);
        let v = d_kahan_dot(&x, &mut dx, &y, &mut dy, 1.0);
        assert_eq!(v, v0);
        // The differences of a sum of 1e8 terms are too coarse for 1e-5: the
        // closed form (dx = y, dy = x) is the oracle there.
        if x[0] < 1e3 {
            let want = fd(|p| kahan_dot(&p[..n], &p[n..]), &cat(&[&x, &y]));
            check_close(&cat(&[&dx, &dy]), &want);
        }
        check_close(&cat(&[&dx, &dy]), &cat(&[&y, &x]));
        let (mut gdx, mut gdy) = (vec![0.0; n], vec![0.0; n]);
        let args = (
            Duplicated(&x[..], &mut gdx[..]),
            Duplicated(&y[..], &mut gdy[..]),
        );
        let (gv, _) = g.gradient(args).unwrap();
        assert_eq!(gv, v0);
        check_generic(&cat(&[&dx, &dy]), &cat(&[&gdx, &gdy]));
    }
}

// The trapezoidal rule for the integral of e^-x sin(w x) over [a, b] with `n`
// (`Const`) intervals: `0..=n`, `||` on `usize`, `usize as f64`.

#[autodiff_reverse(d_trapezoid, Active, Active, Active, Const, Active)]
fn trapezoid(a: f64, b: f64, omega: f64, n: usize) -> f64 {
    let h = (b - a) / n as f64;
    let mut s = 0.0;
    for i in 0..=n {
        let x = a + i as f64 * h;
        let w = if i == 0 || i == n { 0.5 } else { 1.0 };
        s += w * (-x).exp() * (omega * x).sin();
    }
    s * h
}

fn trapezoid_g<T: Real>(a: T, b: T, omega: T, n: T::Int) -> T {
    let h = (b - a) / T::from_int(n);
    let s = for_range(0, n + 1, T::lit(0.0), |i, s| {
        let x = a + T::from_int(i) * h;
        let w = cond(i.eq(0) | i.eq(n), || T::lit(0.5), || T::lit(1.0));
        s + w * (-x).exp() * (omega * x).sin()
    });
    s * h
}

#[test]
fn trapezoidal_rule() {
    let mut g = autodiff("trapezoid", trapezoid_g::<Var>).unwrap();
    for (a, b, w, n) in [
        (0.0, 2.0, 1.0, 8),
        (-1.0, 1.5, 3.0, 20),
        (0.5, 0.7, -2.0, 1),
    ] {
        let y = trapezoid(a, b, w, n);
        assert_eq!(trapezoid_g(a, b, w, n as i64), y);
        let (v, da, db, dw) = d_trapezoid(a, b, w, n, 1.0);
        assert_eq!(v, y);
        check_close(
            &[da, db, dw],
            &fd(|p| trapezoid(p[0], p[1], p[2], n), &[a, b, w]),
        );
        let args = (Active(a), Active(b), Active(w), Const(n as i64));
        let (gv, (ga, gb, gw, ())) = g.gradient(args).unwrap();
        assert_eq!(gv, y);
        check_generic(&[da, db, dw], &[ga, gb, gw]);
    }
    // Many intervals: the exact integral's derivative in b is the integrand at b.
    let (_, _, db, _) = d_trapezoid(0.0, 2.0, 1.0, 2000, 1.0);
    assert!((db - (-2f64).exp() * 2f64.sin()).abs() < 1e-3);
}

// Max pooling over windows of `width`, then the energy; a leftover element when
// the length is not a multiple (`/`, `%` on `usize`).

#[autodiff_reverse(d_max_pool_energy, Duplicated, Const, Active)]
fn max_pool_energy(x: &[f64], width: usize) -> f64 {
    let windows = x.len() / width;
    let mut e = 0.0;
    for w in 0..windows {
        let mut best = x[w * width];
        for j in w * width + 1..(w + 1) * width {
            best = best.max(x[j]);
        }
        e += best * best;
    }
    let rest = x.len() % width;
    if rest > 0 {
        e += x[x.len() - 1].abs();
    }
    e
}

fn max_pool_energy_g<T: Real>(x: T::Slice<'_>, width: T::Int) -> T {
    use gradlift::trace::SliceRead;
    let windows = x.len() / width;
    let e = for_range(0, windows, T::lit(0.0), |w, e| {
        let best = for_range(w * width + 1, (w + 1) * width, x.at(w * width), |j, b| {
            b.max(x.at(j))
        });
        e + best * best
    });
    let rest = x.len() % width;
    cond(rest.gt(0), || e + x.at(x.len() - 1).abs(), || e)
}

#[test]
fn max_pooling() {
    let mut g = autodiff("max_pool_energy", max_pool_energy_g::<Var>).unwrap();
    assert_eq!(
        max_pool_energy(&[1.0, 3.0, -2.0, 0.5, -4.0], 2),
        9.0 + 0.25 + 4.0
    );
    for (x, width) in [
        (vec![1.0, 3.0, -2.0, 0.5, -4.0], 2usize),
        (vec![0.2, -0.7, 1.1, 0.4, 2.0, -3.0], 3),
        (vec![0.2, -0.7, 1.1, 0.4, 2.0, -3.0, 0.6], 3),
        (vec![-1.0, -2.0, -0.5], 1),
    ] {
        let y = max_pool_energy(&x, width);
        assert_eq!(max_pool_energy_g::<f64>(&x, width as i64), y);
        let mut dx = vec![0.0; x.len()];
        let v = d_max_pool_energy(&x, &mut dx, width, 1.0);
        assert_eq!(v, y);
        check_close(&dx, &fd(|x| max_pool_energy(x, width), &x));
        let mut gdx = vec![0.0; x.len()];
        let args = (Duplicated(&x[..], &mut gdx[..]), Const(width as i64));
        let (gv, _) = g.gradient(args).unwrap();
        assert_eq!(gv, y);
        check_generic(&dx, &gdx);
    }
}

// Sampling a 1-D texture with linear filtering, clamped to its last cell and
// extrapolating below 0: `f64 as usize` (which saturates at 0), a `usize` `if`.

#[autodiff_reverse(d_grid_sample, Duplicated, Active, Active)]
fn grid_sample(grid: &[f64], pos: f64) -> f64 {
    let n = grid.len();
    let mut i = pos as usize;
    if i > n - 2 {
        i = n - 2;
    }
    let t = pos - i as f64;
    grid[i] * (1.0 - t) + grid[i + 1] * t
}

fn grid_sample_g<T: Real>(grid: T::Slice<'_>, pos: T) -> T {
    use gradlift::trace::SliceRead;
    let n = grid.len();
    let i0 = pos.max(T::lit(0.0)).to_int();
    let i = cond(i0.gt(n - 2), || n - 2, || i0);
    let t = pos - T::from_int(i);
    grid.at(i) * (T::lit(1.0) - t) + grid.at(i + 1) * t
}

#[test]
fn texture_sampling() {
    let mut g = autodiff("grid_sample", grid_sample_g::<Var>).unwrap();
    let grid = [1.0, 3.0, -2.0, 0.5];
    assert_eq!(grid_sample(&grid, 1.5), 0.5);
    for pos in [-0.6, 1.3, 2.7, 5.5] {
        let y = grid_sample(&grid, pos);
        assert_eq!(grid_sample_g::<f64>(&grid, pos), y);
        let mut dg = [0.0; 4];
        let (v, dpos) = d_grid_sample(&grid, &mut dg, pos, 1.0);
        assert_eq!(v, y);
        let want = fd(|p| grid_sample(&p[..4], p[4]), &cat(&[&grid, &[pos]]));
        check_close(&cat(&[&dg, &[dpos]]), &want);
        let mut gdg = [0.0; 4];
        let (gv, ((), gpos)) = g
            .gradient((Duplicated(&grid[..], &mut gdg[..]), Active(pos)))
            .unwrap();
        assert_eq!(gv, y);
        check_generic(&cat(&[&dg, &[dpos]]), &cat(&[&gdg, &[gpos]]));
    }
}

// The energy of the samples in a band (lo, hi), a penalty outside it, halved once
// a sample has saturated: `&&`, `||`, `!`, `bool` locals and a `let mut` bool.

#[autodiff_reverse(d_band_energy, Duplicated, Active, Active, Active)]
fn band_energy(x: &[f64], lo: f64, hi: f64) -> f64 {
    let mut e = 0.0;
    let mut saturated = false;
    for &v in x.iter() {
        let inside = v > lo && v < hi;
        if inside {
            e += v * v;
        }
        if !inside || saturated {
            e += 0.1 * (v - lo).abs();
        }
        if v > 2.0 * hi {
            saturated = true;
        }
    }
    if saturated {
        e *= 0.5;
    }
    e
}

fn band_energy_g<T: Real>(x: T::Slice<'_>, lo: T, hi: T) -> T {
    use gradlift::trace::SliceRead;
    let init = (T::lit(0.0), T::Bool::from(false));
    let (e, saturated) = for_range(0, x.len(), init, |i, (e, saturated)| {
        let v = x.at(i);
        let inside = v.gt(lo) & v.lt(hi);
        let e = cond(inside, || e + v * v, || e);
        let e = cond(!inside | saturated, || e + (v - lo).abs() * 0.1, || e);
        (e, saturated | v.gt(hi * 2.0))
    });
    cond(saturated, || e * 0.5, || e)
}

#[test]
fn band_energy_with_flags() {
    let mut g = autodiff("band_energy", band_energy_g::<Var>).unwrap();
    let x = [0.5, 1.5, -0.3, 2.6, 0.9];
    for (lo, hi) in [(0.0, 1.0), (-1.0, 3.0), (0.6, 0.95), (-0.5, 1.7)] {
        let y = band_energy(&x, lo, hi);
        assert_eq!(band_energy_g::<f64>(&x, lo, hi), y);
        let mut dx = [0.0; 5];
        let (v, dlo, dhi) = d_band_energy(&x, &mut dx, lo, hi, 1.0);
        assert_eq!(v, y);
        let want = fd(|p| band_energy(&p[..5], p[5], p[6]), &cat(&[&x, &[lo, hi]]));
        check_close(&cat(&[&dx, &[dlo, dhi]]), &want);
        let mut gdx = [0.0; 5];
        let args = (Duplicated(&x[..], &mut gdx[..]), Active(lo), Active(hi));
        let (gv, ((), glo, ghi)) = g.gradient(args).unwrap();
        assert_eq!(gv, y);
        check_generic(&cat(&[&dx, &[dlo, dhi]]), &cat(&[&gdx, &[glo, ghi]]));
    }
}

// An alternating, decaying sum of every `stride`-th sample from `phase`: `i64`
// arithmetic (`%`, `/`, unary `-`, `-=`), `usize as i64`, `i64 as usize`, `&&` in
// a `while` test, a `bool` flipped with `!`.

#[autodiff_reverse(d_strided_decay, Duplicated, Const, Const, Active)]
fn strided_decay(x: &[f64], stride: i64, phase: i64) -> f64 {
    let n = x.len() as i64;
    let mut j: i64 = phase % stride;
    let mut count: i64 = 0;
    let mut s = 0.0;
    let mut negative = false;
    while j < n && count < 100 {
        let w = 1.0 / (1 + count) as f64;
        let v = x[j as usize];
        if negative {
            s -= w * v;
        } else {
            s += w * v;
        }
        negative = !negative;
        j += stride;
        count += 1;
    }
    let mut skipped: i64 = n;
    skipped -= count;
    s * s + (-skipped * 2 / stride) as f64 * 0.01
}

fn strided_decay_g<T: Real>(x: T::Slice<'_>, stride: T::Int, phase: T::Int) -> T {
    use gradlift::trace::SliceRead;
    let n = x.len();
    let init = (
        phase % stride,
        T::Int::from(0),
        T::lit(0.0),
        T::Bool::from(false),
    );
    let (_, count, s, _) = while_loop(
        init,
        |&(j, count, _, _)| j.lt(n) & count.lt(100),
        |(j, count, s, negative)| {
            let w = T::lit(1.0) / T::from_int(count + 1);
            let v = x.at(j);
            let s = cond(negative, || s - w * v, || s + w * v);
            (j + stride, count + 1, s, !negative)
        },
    );
    let skipped = n - count;
    s * s + T::from_int(-skipped * 2 / stride) * 0.01
}

#[test]
fn strided_integer_arithmetic() {
    let mut g = autodiff("strided_decay", strided_decay_g::<Var>).unwrap();
    let x = [1.0, -2.0, 0.5, 3.0, -1.5, 2.5, 0.25];
    // stride 3 from 1: x[1] - x[4] / 2 = -1.25; 5 skipped, -10 / 3 = -3.
    assert!((strided_decay(&x, 3, 1) - (1.5625 - 0.03)).abs() < 1e-15);
    for (stride, phase) in [(3, 1), (2, 5), (1, 0), (4, 3)] {
        let y = strided_decay(&x, stride, phase);
        assert_eq!(strided_decay_g::<f64>(&x, stride, phase), y);
        let mut dx = [0.0; 7];
        let v = d_strided_decay(&x, &mut dx, stride, phase, 1.0);
        assert_eq!(v, y);
        check_close(&dx, &fd(|x| strided_decay(x, stride, phase), &x));
        let mut gdx = [0.0; 7];
        let args = (
            Duplicated(&x[..], &mut gdx[..]),
            Const(stride),
            Const(phase),
        );
        let (gv, _) = g.gradient(args).unwrap();
        assert_eq!(gv, y);
        check_generic(&dx, &gdx);
    }
}
