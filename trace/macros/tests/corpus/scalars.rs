//! Functions of `Active` scalars (and a few `Const` ones): smooth losses, piecewise
//! models, physics, a learning-rate schedule, Newton's iteration to a tolerance.

use std::f64::consts::{LN_2, PI};

use gradlift::autodiff_reverse;
use gradlift::trace::prelude::*;
use gradlift::{Active, Const, autodiff};

use super::check_generic;
use super::common::{check_close, fd};

// Softplus with a temperature, linear and exponential far out: `else if` chain as
// an expression.

#[autodiff_reverse(d_softplus_beta, Active, Active, Active)]
fn softplus_beta(x: f64, beta: f64) -> f64 {
    let z = beta * x;
    if z > 30.0 {
        x
    } else if z < -30.0 {
        z.exp() / beta
    } else {
        (1.0 + z.exp()).ln() / beta
    }
}

fn softplus_beta_g<T: Real>(x: T, beta: T) -> T {
    let z = beta * x;
    cond(
        z.gt(30.0),
        || x,
        || {
            cond(
                z.lt(-30.0),
                || z.exp() / beta,
                || (z.exp() + 1.0).ln() / beta,
            )
        },
    )
}

#[test]
fn softplus_with_temperature() {
    let mut g = autodiff("softplus_beta", softplus_beta_g::<Var>).unwrap();
    for (x, beta) in [
        (40.0, 1.0),
        (-20.0, 2.0),
        (0.5, 2.0),
        (-1.0, 0.5),
        (3.0, -0.7),
    ] {
        let y = softplus_beta(x, beta);
        assert_eq!(softplus_beta_g(x, beta), y);
        let (v, dx, db) = d_softplus_beta(x, beta, 1.0);
        assert_eq!(v, y);
        check_close(&[dx, db], &fd(|p| softplus_beta(p[0], p[1]), &[x, beta]));
        let (gv, (gx, gb)) = g.gradient((Active(x), Active(beta))).unwrap();
        assert_eq!(gv, y);
        check_generic(&[dx, db], &[gx, gb]);
    }
}

// log cosh of a residual, in its stable form, with an early `return` far out.

#[autodiff_reverse(d_log_cosh, Active, Active, Active)]
fn log_cosh(pred: f64, target: f64) -> f64 {
    let d = pred - target;
    let a = d.abs();
    if a > 15.0 {
        return a - std::f64::consts::LN_2;
    }
    let e = (-2.0 * a).exp();
    a + (1.0 + e).ln() - std::f64::consts::LN_2
}

fn log_cosh_g<T: Real>(pred: T, target: T) -> T {
    let a = (pred - target).abs();
    cond(
        a.gt(15.0),
        || a - LN_2,
        || {
            let e = (a * -2.0).exp();
            a + (e + 1.0).ln() - LN_2
        },
    )
}

#[test]
fn log_cosh_loss() {
    let mut g = autodiff("log_cosh", log_cosh_g::<Var>).unwrap();
    assert!((log_cosh(1.0, 0.0) - 1f64.cosh().ln()).abs() < 1e-15);
    for (p, t) in [(20.0, 1.0), (-18.0, 0.5), (0.3, 1.2), (2.0, 0.5)] {
        let y = log_cosh(p, t);
        assert_eq!(log_cosh_g(p, t), y);
        let (v, dp, dt) = d_log_cosh(p, t, 1.0);
        assert_eq!(v, y);
        check_close(&[dp, dt], &fd(|q| log_cosh(q[0], q[1]), &[p, t]));
        // d/dp log cosh(p - t) = tanh(p - t).
        check_close(&[dp], &[(p - t).tanh()]);
        let (gv, (gp, gt)) = g.gradient((Active(p), Active(t))).unwrap();
        assert_eq!(gv, y);
        check_generic(&[dp, dt], &[gp, gt]);
    }
}

// The range of a projectile launched from a height (`Const`), `0` when it cannot
// get there: degrees to radians with `PI`, an early `return`.

#[autodiff_reverse(d_projectile_range, Active, Active, Const, Active)]
fn projectile_range(speed: f64, angle_deg: f64, height: f64) -> f64 {
    let g = 9.81;
    let theta = angle_deg * std::f64::consts::PI / 180.0;
    let vx = speed * theta.cos();
    let vy = speed * theta.sin();
    let disc = vy * vy + 2.0 * g * height;
    if disc < 0.0 {
        return 0.0;
    }
    vx * (vy + disc.sqrt()) / g
}

fn projectile_range_g<T: Real>(speed: T, angle_deg: T, height: T) -> T {
    let g = 9.81;
    let theta = angle_deg * PI / 180.0;
    let vx = speed * theta.cos();
    let vy = speed * theta.sin();
    let disc = vy * vy + height * (2.0 * g);
    cond(disc.lt(0.0), || T::lit(0.0), || vx * (vy + disc.sqrt()) / g)
}

#[test]
fn projectile() {
    let mut g = autodiff("projectile_range", projectile_range_g::<Var>).unwrap();
    // From the ground at 45 degrees: v^2 / g.
    assert!((projectile_range(20.0, 45.0, 0.0) - 400.0 / 9.81).abs() < 1e-12);
    for (s, a, h) in [
        (20.0, 45.0, 0.0),
        (3.0, 30.0, -5.0),
        (15.0, 60.0, 10.0),
        (25.0, 10.0, 2.0),
    ] {
        let y = projectile_range(s, a, h);
        assert_eq!(projectile_range_g(s, a, h), y);
        let (v, ds, da) = d_projectile_range(s, a, h, 1.0);
        assert_eq!(v, y);
        check_close(&[ds, da], &fd(|p| projectile_range(p[0], p[1], h), &[s, a]));
        let (gv, (gs, ga, ())) = g.gradient((Active(s), Active(a), Const(h))).unwrap();
        assert_eq!(gv, y);
        check_generic(&[ds, da], &[gs, ga]);
    }
}

// A block on an incline with friction: it slides when tan(theta) > mu, and stays
// (no acceleration) otherwise. An `if` statement assigning an outer variable, `*=`.

#[autodiff_reverse(d_incline_slide, Active, Active, Active, Active)]
fn incline_slide(theta: f64, mu: f64, t: f64) -> f64 {
    let g = 9.81;
    let mut a = 0.0;
    if theta.tan() > mu {
        a = g * (theta.sin() - mu * theta.cos());
    }
    a *= t * t;
    a * 0.5
}

fn incline_slide_g<T: Real>(theta: T, mu: T, t: T) -> T {
    let a = cond(
        theta.tan().gt(mu),
        || (theta.sin() - mu * theta.cos()) * 9.81,
        || T::lit(0.0),
    );
    a * (t * t) * 0.5
}

#[test]
fn incline() {
    let mut g = autodiff("incline_slide", incline_slide_g::<Var>).unwrap();
    for (th, mu, t) in [
        (0.5, 0.2, 2.0),
        (0.3, 0.5, 1.0),
        (1.0, 1.2, 3.0),
        (0.8, 1.5, 0.7),
    ] {
        let y = incline_slide(th, mu, t);
        assert_eq!(incline_slide_g(th, mu, t), y);
        let (v, dth, dmu, dt) = d_incline_slide(th, mu, t, 1.0);
        assert_eq!(v, y);
        let want = fd(|p| incline_slide(p[0], p[1], p[2]), &[th, mu, t]);
        check_close(&[dth, dmu, dt], &want);
        let (gv, (gth, gmu, gt)) = g.gradient((Active(th), Active(mu), Active(t))).unwrap();
        assert_eq!(gv, y);
        check_generic(&[dth, dmu, dt], &[gth, gmu, gt]);
    }
}

// sRGB encoding of an exposed linear value: clamped with `max`/`min`, linear near
// black, a `powf` above.

#[autodiff_reverse(d_srgb_encode, Active, Active, Active)]
fn srgb_encode(c: f64, exposure: f64) -> f64 {
    let lin = (c * exposure).max(0.0).min(1.0);
    if lin <= 0.0031308 {
        12.92 * lin
    } else {
        1.055 * lin.powf(1.0 / 2.4) - 0.055
    }
}

fn srgb_encode_g<T: Real>(c: T, exposure: T) -> T {
    let lin = (c * exposure).max(T::lit(0.0)).min(T::lit(1.0));
    cond(
        lin.le(0.0031308),
        || lin * 12.92,
        || lin.powf(T::lit(1.0 / 2.4)) * 1.055 - 0.055,
    )
}

#[test]
fn srgb() {
    let mut g = autodiff("srgb_encode", srgb_encode_g::<Var>).unwrap();
    assert_eq!(srgb_encode(2.0, 1.0), 1.055 - 0.055);
    for (c, e) in [
        (-0.5, 1.0),
        (0.001, 2.0),
        (0.4, 1.5),
        (0.9, 2.0),
        (0.05, 0.3),
    ] {
        let y = srgb_encode(c, e);
        assert_eq!(srgb_encode_g(c, e), y);
        let (v, dc, de) = d_srgb_encode(c, e, 1.0);
        assert_eq!(v, y);
        check_close(&[dc, de], &fd(|p| srgb_encode(p[0], p[1]), &[c, e]));
        let (gv, (gc, ge)) = g.gradient((Active(c), Active(e))).unwrap();
        assert_eq!(gv, y);
        check_generic(&[dc, de], &[gc, ge]);
    }
}

// Linear interpolation in a table of sin(k f) at the integers around `x`: `floor`,
// `ceil`, and `f64 -> i64 -> f64` casts.

#[autodiff_reverse(d_table_lerp, Active, Active, Active)]
fn table_lerp(x: f64, freq: f64) -> f64 {
    let lo = x.floor();
    let k = lo as i64;
    let y0 = (k as f64 * freq).sin();
    let y1 = (x.ceil() * freq).sin();
    y0 + (x - lo) * (y1 - y0)
}

fn table_lerp_g<T: Real>(x: T, freq: T) -> T {
    let lo = x.floor();
    let k = lo.to_int();
    let y0 = (T::from_int(k) * freq).sin();
    let y1 = (x.ceil() * freq).sin();
    y0 + (x - lo) * (y1 - y0)
}

#[test]
fn table_interpolation() {
    let mut g = autodiff("table_lerp", table_lerp_g::<Var>).unwrap();
    assert_eq!(table_lerp(2.0, 0.5), 1f64.sin());
    for (x, f) in [(2.3, 0.7), (-1.7, 1.3), (0.45, 2.0), (5.9, -0.4)] {
        let y = table_lerp(x, f);
        assert_eq!(table_lerp_g(x, f), y);
        let (v, dx, df) = d_table_lerp(x, f, 1.0);
        assert_eq!(v, y);
        check_close(&[dx, df], &fd(|p| table_lerp(p[0], p[1]), &[x, f]));
        let (gv, (gx, gf)) = g.gradient((Active(x), Active(f))).unwrap();
        assert_eq!(gv, y);
        check_generic(&[dx, df], &[gx, gf]);
    }
}

// Kepler's equation E - e sin E = M by Newton's method, from pi for eccentric
// orbits: a `while` left with `break` at a tolerance. The result is the orbital
// radius 1 - e cos E.

#[autodiff_reverse(d_kepler, Active, Active, Active)]
fn kepler(mean: f64, ecc: f64) -> f64 {
    let mut e = if ecc > 0.8 {
        std::f64::consts::PI
    } else {
        mean
    };
    let mut k: usize = 0;
    while k < 50 {
        let step = (e - ecc * e.sin() - mean) / (1.0 - ecc * e.cos());
        e -= step;
        k += 1;
        if step.abs() < 1e-12 {
            break;
        }
    }
    1.0 - ecc * e.cos()
}

fn kepler_g<T: Real>(mean: T, ecc: T) -> T {
    let e0 = cond(ecc.gt(0.8), || T::lit(PI), || mean);
    let (e, _, _) = while_loop(
        (e0, T::Int::from(0), T::Bool::from(false)),
        |&(_, k, done)| k.lt(50) & !done,
        |(e, k, _)| {
            let step = (e - ecc * e.sin() - mean) / (T::lit(1.0) - ecc * e.cos());
            (e - step, k + 1, step.abs().lt(1e-12))
        },
    );
    T::lit(1.0) - ecc * e.cos()
}

#[test]
fn kepler_equation() {
    let mut g = autodiff("kepler", kepler_g::<Var>).unwrap();
    for (m, e) in [(1.0, 0.1), (2.5, 0.5), (0.3, 0.9), (4.0, 0.85)] {
        let y = kepler(m, e);
        assert_eq!(kepler_g(m, e), y);
        let (v, dm, de) = d_kepler(m, e, 1.0);
        assert_eq!(v, y);
        check_close(&[dm, de], &fd(|p| kepler(p[0], p[1]), &[m, e]));
        let (gv, (gm, ge)) = g.gradient((Active(m), Active(e))).unwrap();
        assert_eq!(gv, y);
        check_generic(&[dm, de], &[gm, ge]);
    }
}

// A cosine learning-rate schedule with linear warm-up: `usize` arithmetic and
// comparisons on `Const` parameters, casts to f64, `min`, `PI`.

#[autodiff_reverse(d_cosine_lr, Const, Const, Const, Active, Active, Active)]
fn cosine_lr(step: usize, warmup: usize, total: usize, base: f64, floor: f64) -> f64 {
    if step < warmup {
        return base * (step + 1) as f64 / warmup as f64;
    }
    let progress = (step - warmup) as f64 / (total - warmup) as f64;
    let p = progress.min(1.0);
    floor + 0.5 * (base - floor) * (1.0 + (std::f64::consts::PI * p).cos())
}

fn cosine_lr_g<T: Real>(step: T::Int, warmup: T::Int, total: T::Int, base: T, floor: T) -> T {
    cond(
        step.lt(warmup),
        || base * T::from_int(step + 1) / T::from_int(warmup),
        || {
            let progress = T::from_int(step - warmup) / T::from_int(total - warmup);
            let p = progress.min(T::lit(1.0));
            floor + (base - floor) * 0.5 * ((p * PI).cos() + 1.0)
        },
    )
}

#[test]
fn learning_rate_schedule() {
    let mut g = autodiff("cosine_lr", cosine_lr_g::<Var>).unwrap();
    assert_eq!(cosine_lr(4, 5, 100, 0.1, 0.0), 0.1);
    assert_eq!(cosine_lr(5, 5, 100, 0.1, 0.001), 0.1);
    for step in [2usize, 7, 60, 150] {
        let (base, floor) = (0.3, 0.01);
        let y = cosine_lr(step, 5, 100, base, floor);
        let s = step as i64;
        assert_eq!(cosine_lr_g::<f64>(s, 5, 100, base, floor), y);
        let (v, db, df) = d_cosine_lr(step, 5, 100, base, floor, 1.0);
        assert_eq!(v, y);
        let want = fd(|p| cosine_lr(step, 5, 100, p[0], p[1]), &[base, floor]);
        check_close(&[db, df], &want);
        let args = (Const(s), Const(5), Const(100), Active(base), Active(floor));
        let (gv, ((), (), (), gb, gf)) = g.gradient(args).unwrap();
        assert_eq!(gv, y);
        check_generic(&[db, df], &[gb, gf]);
    }
}

// A cubic Hermite segment, its parameter clamped to [0, 1] by an `else if`
// expression; `powi`; five `Active` parameters.

#[autodiff_reverse(d_hermite, Active, Active, Active, Active, Active, Active)]
fn hermite(p0: f64, p1: f64, m0: f64, m1: f64, t: f64) -> f64 {
    let s = if t < 0.0 {
        0.0
    } else if t > 1.0 {
        1.0
    } else {
        t
    };
    let s2 = s.powi(2);
    let s3 = s.powi(3);
    (2.0 * s3 - 3.0 * s2 + 1.0) * p0
        + (s3 - 2.0 * s2 + s) * m0
        + (-2.0 * s3 + 3.0 * s2) * p1
        + (s3 - s2) * m1
}

fn hermite_g<T: Real>(p0: T, p1: T, m0: T, m1: T, t: T) -> T {
    let s = cond(
        t.lt(0.0),
        || T::lit(0.0),
        || cond(t.gt(1.0), || T::lit(1.0), || t),
    );
    let s2 = s.powi(2);
    let s3 = s.powi(3);
    (s3 * 2.0 - s2 * 3.0 + 1.0) * p0
        + (s3 - s2 * 2.0 + s) * m0
        + (s3 * -2.0 + s2 * 3.0) * p1
        + (s3 - s2) * m1
}

#[test]
fn hermite_segment() {
    let mut g = autodiff("hermite", hermite_g::<Var>).unwrap();
    let (p0, p1, m0, m1) = (1.0, -0.5, 2.0, 0.3);
    assert_eq!(hermite(p0, p1, m0, m1, 0.0), p0);
    assert_eq!(hermite(p0, p1, m0, m1, 1.0), p1);
    for t in [-0.3, 0.25, 0.8, 1.4] {
        let y = hermite(p0, p1, m0, m1, t);
        assert_eq!(hermite_g(p0, p1, m0, m1, t), y);
        let (v, a, b, c, d, e) = d_hermite(p0, p1, m0, m1, t, 1.0);
        assert_eq!(v, y);
        let want = fd(
            |p| hermite(p[0], p[1], p[2], p[3], p[4]),
            &[p0, p1, m0, m1, t],
        );
        check_close(&[a, b, c, d, e], &want);
        let args = (Active(p0), Active(p1), Active(m0), Active(m1), Active(t));
        let (gv, (ga, gb, gc, gd, ge)) = g.gradient(args).unwrap();
        assert_eq!(gv, y);
        check_generic(&[a, b, c, d, e], &[ga, gb, gc, gd, ge]);
    }
}

// A damped oscillator's position from rest at 1: underdamped, overdamped (cosh
// and sinh from `exp`) and critically damped, by an `else if` expression.

#[autodiff_reverse(d_oscillator, Active, Active, Active, Active)]
fn oscillator(zeta: f64, omega: f64, t: f64) -> f64 {
    let decay = (-zeta * omega * t).exp();
    if zeta < 1.0 {
        let wd = omega * (1.0 - zeta * zeta).sqrt();
        decay * ((wd * t).cos() + zeta * omega / wd * (wd * t).sin())
    } else if zeta > 1.0 {
        let s = omega * (zeta * zeta - 1.0).sqrt();
        let ep = (s * t).exp();
        let em = (-s * t).exp();
        decay * (0.5 * (ep + em) + zeta * omega / s * 0.5 * (ep - em))
    } else {
        decay * (1.0 + omega * t)
    }
}

fn oscillator_g<T: Real>(zeta: T, omega: T, t: T) -> T {
    let decay = (-zeta * omega * t).exp();
    cond(
        zeta.lt(1.0),
        || {
            let wd = omega * (T::lit(1.0) - zeta * zeta).sqrt();
            decay * ((wd * t).cos() + zeta * omega / wd * (wd * t).sin())
        },
        || {
            cond(
                zeta.gt(1.0),
                || {
                    let s = omega * (zeta * zeta - 1.0).sqrt();
                    let ep = (s * t).exp();
                    let em = (-s * t).exp();
                    decay * ((ep + em) * 0.5 + zeta * omega / s * 0.5 * (ep - em))
                },
                || decay * (omega * t + 1.0),
            )
        },
    )
}

#[test]
fn damped_oscillator() {
    let mut g = autodiff("oscillator", oscillator_g::<Var>).unwrap();
    for (z, w, t) in [
        (0.2, 3.0, 1.5),
        (2.5, 1.0, 0.8),
        (1.0, 2.0, 0.6),
        (0.7, 0.5, 4.0),
    ] {
        let y = oscillator(z, w, t);
        assert_eq!(oscillator_g(z, w, t), y);
        let (v, dz, dw, dt) = d_oscillator(z, w, t, 1.0);
        super::common::check_value_own_math(v, y);
        if z == 1.0 {
            // Exactly critical: zeta's finite differences step into the other
            // branches (the function is smooth there, but this branch's formula
            // holds only at zeta = 1, so its zeta-derivative is not the function's).
            check_close(&[dw, dt], &fd(|p| oscillator(z, p[0], p[1]), &[w, t]));
        } else {
            check_close(
                &[dz, dw, dt],
                &fd(|p| oscillator(p[0], p[1], p[2]), &[z, w, t]),
            );
        }
        let (gv, (gz, gw, gt)) = g.gradient((Active(z), Active(w), Active(t))).unwrap();
        assert_eq!(gv, v);
        check_generic(&[dz, dw, dt], &[gz, gw, gt]);
    }
}

// A ball dropped on the floor, semi-implicit Euler, bouncing with a restitution
// coefficient: a branch in a loop carrying two floats; `for _ in`, `-=`, `+=`.

#[autodiff_reverse(d_bounce, Active, Active, Active, Const, Active)]
fn bounce(h0: f64, v0: f64, restitution: f64, steps: usize) -> f64 {
    let dt = 0.01;
    let g = 9.81;
    let mut y = h0;
    let mut v = v0;
    for _ in 0..steps {
        v -= g * dt;
        y += v * dt;
        if y < 0.0 {
            y = -y * restitution;
            v = -v * restitution;
        }
    }
    y
}

fn bounce_g<T: Real>(h0: T, v0: T, restitution: T, steps: T::Int) -> T {
    let (dt, g) = (0.01, 9.81);
    let (y, _) = for_range(0, steps, (h0, v0), |_, (y, v)| {
        let v = v - g * dt;
        let y = y + v * dt;
        cond(
            y.lt(0.0),
            || (-y * restitution, -v * restitution),
            || (y, v),
        )
    });
    y
}

#[test]
fn bouncing_ball() {
    let mut g = autodiff("bounce", bounce_g::<Var>).unwrap();
    for (h, v0, r, n) in [
        (1.0, 0.0, 0.8, 100),
        (0.5, 2.0, 0.6, 30),
        (2.0, -3.0, 0.9, 150),
        (0.3, 1.0, 0.5, 80),
    ] {
        let y = bounce(h, v0, r, n);
        assert_eq!(bounce_g(h, v0, r, n as i64), y);
        let (v, dh, dv, dr) = d_bounce(h, v0, r, n, 1.0);
        assert_eq!(v, y);
        let want = fd(|p| bounce(p[0], p[1], p[2], n), &[h, v0, r]);
        check_close(&[dh, dv, dr], &want);
        let args = (Active(h), Active(v0), Active(r), Const(n as i64));
        let (gv, (gh, gv0, gr, ())) = g.gradient(args).unwrap();
        assert_eq!(gv, y);
        check_generic(&[dh, dv, dr], &[gh, gv0, gr]);
    }
}
