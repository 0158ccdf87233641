//! Functions that write: `&mut f64` outputs (`Duplicated` and `Const`), a `Const`
//! return with a `Duplicated` output, slices updated in place (`()` results, and
//! with an `Active` result), local `vec!` buffers: statistics, normalisation,
//! proximal and gradient steps, integrators, a small network.
//!
//! The shadow of a written parameter is, on entry, the seed of what the function
//! leaves in it; so the finite differences are those of `seed * result + sum_i
//! w_i out_i` for the shadows `w` given.

use gradlift::autodiff_reverse;
use gradlift::trace::{Int, Real, Var, cond, for_range};
use gradlift::{Active, Const, Duplicated, Return, autodiff};

use super::common::{check_close, fd};
use super::{cat, check_generic};

/// `sum_i w_i x_i`.
fn dot(w: &[f64], x: &[f64]) -> f64 {
    w.iter().zip(x).map(|(a, b)| a * b).sum()
}

// The mean excess over a threshold, and (a `Const` `&mut f64`) how many samples
// exceed it: an early `return` when none does.

#[autodiff_reverse(d_count_above, Duplicated, Active, Const, Active)]
fn count_above(x: &[f64], t: f64, count: &mut f64) -> f64 {
    let mut k: usize = 0;
    let mut s = 0.0;
    for i in 0..x.len() {
        if x[i] > t {
            k += 1;
            s += x[i] - t;
        }
    }
    *count = k as f64;
    if k == 0 {
        return 0.0;
    }
    s / k as f64
}

fn count_above_g<T: Real>(x: T::Slice<'_>, t: T, mut count: T::SliceMut<'_>) -> T {
    use gradlift::trace::{SliceRead, SliceWrite};
    let (k, s) = for_range(0, x.len(), (T::Int::from(0), T::lit(0.0)), |i, (k, s)| {
        cond(x.at(i).gt(t), || (k + 1, s + (x.at(i) - t)), || (k, s))
    });
    count.set(0, T::from_int(k));
    cond(k.eq(0), || T::lit(0.0), || s / T::from_int(k))
}

#[test]
fn mean_excess_and_count() {
    let mut g = autodiff("count_above", count_above_g::<Var>).unwrap();
    let x = [0.5, 2.0, -1.0, 3.5];
    for (t, n) in [(1.0, 2.0), (5.0, 0.0), (-2.0, 4.0), (0.0, 3.0)] {
        let mut c = -1.0;
        let y = count_above(&x, t, &mut c);
        assert_eq!(c, n);
        let mut gc = [-1.0];
        assert_eq!(count_above_g::<f64>(&x, t, &mut gc), y);
        assert_eq!(gc[0], n);
        let mut dx = [0.0; 4];
        let mut c = -1.0;
        let (v, dt) = d_count_above(&x, &mut dx, t, &mut c, 1.0);
        assert_eq!((v, c), (y, n));
        let want = fd(|p| count_above(&p[..4], p[4], &mut 0.0), &cat(&[&x, &[t]]));
        check_close(&cat(&[&dx, &[dt]]), &want);
        let mut gdx = [0.0; 4];
        let mut gc = [-1.0];
        let args = (
            Duplicated(&x[..], &mut gdx[..]),
            Active(t),
            Const(&mut gc[..]),
        );
        let (gv, ((), gt, ())) = g.gradient(args).unwrap();
        assert_eq!((gv, gc[0]), (y, n));
        check_generic(&cat(&[&dx, &[dt]]), &cat(&[&gdx, &[gt]]));
    }
}

// Welford's running mean and variance into two `Duplicated` `&mut f64` (reading
// and writing `*mean` as it goes); `()` result.

#[autodiff_reverse(d_welford, Duplicated, Duplicated, Duplicated)]
fn welford(x: &[f64], mean: &mut f64, var: &mut f64) {
    *mean = 0.0;
    let mut m2 = 0.0;
    for (i, &v) in x.iter().enumerate() {
        let delta = v - *mean;
        *mean += delta / (i + 1) as f64;
        m2 += delta * (v - *mean);
    }
    *var = m2 / (x.len() - 1) as f64;
}

fn welford_g<T: Real>(x: T::Slice<'_>, mut mean: T::SliceMut<'_>, mut var: T::SliceMut<'_>) {
    use gradlift::trace::{SliceRead, SliceWrite};
    let (m, m2) = for_range(0, x.len(), (T::lit(0.0), T::lit(0.0)), |i, (m, m2)| {
        let v = x.at(i);
        let delta = v - m;
        let m = m + delta / T::from_int(i + 1);
        (m, m2 + delta * (v - m))
    });
    mean.set(0, m);
    var.set(0, m2 / T::from_int(x.len() - 1));
}

#[test]
fn running_mean_and_variance() {
    let mut g = autodiff("welford", welford_g::<Var>).unwrap();
    let (mut m, mut v) = (7.0, 7.0);
    welford(&[1.0, 2.0, 3.0, 6.0], &mut m, &mut v);
    assert_eq!((m, v), (3.0, 14.0 / 3.0));
    for (x, wm, wv) in [
        (vec![1.0, 2.0, 3.0, 6.0], 1.0, 0.0),
        (vec![0.5, -1.5, 2.25], 0.3, 1.0),
        (vec![10.0, 10.5], -2.0, 0.5),
    ] {
        let (mut m, mut v) = (0.0, 0.0);
        welford(&x, &mut m, &mut v);
        let (mut gm, mut gv) = ([0.0], [0.0]);
        welford_g::<f64>(&x, &mut gm, &mut gv);
        assert_eq!((gm[0], gv[0]), (m, v));
        let n = x.len();
        let mut dx = vec![0.0; n];
        let (mut am, mut av, mut dm, mut dv) = (5.0, 5.0, wm, wv);
        d_welford(&x, &mut dx, &mut am, &mut dm, &mut av, &mut dv);
        assert_eq!((am, av), (m, v));
        // The entry values are overwritten: their derivatives are zero.
        assert_eq!((dm, dv), (0.0, 0.0));
        let want = fd(
            |x| {
                let (mut m, mut v) = (0.0, 0.0);
                welford(x, &mut m, &mut v);
                wm * m + wv * v
            },
            &x,
        );
        check_close(&dx, &want);
        let mut gdx = vec![0.0; n];
        let (mut gm, mut gv, mut gdm, mut gdv) = ([5.0], [5.0], [wm], [wv]);
        let args = (
            Duplicated(&x[..], &mut gdx[..]),
            Duplicated(&mut gm[..], &mut gdm[..]),
            Duplicated(&mut gv[..], &mut gdv[..]),
        );
        g.gradient_with(Return::Const, args).unwrap();
        assert_eq!((gm[0], gv[0]), (m, v));
        check_generic(&dx, &gdx);
    }
}

// Clipping a gradient by its norm into `out`: the norm is returned but `Const`,
// so only the shadow of `out` seeds the derivatives (of `x` and `max_norm`).

#[autodiff_reverse(d_clip_by_norm, Duplicated, Active, Duplicated, Const)]
fn clip_by_norm(x: &[f64], max_norm: f64, out: &mut [f64]) -> f64 {
    let mut ss = 0.0;
    for i in 0..x.len() {
        ss += x[i] * x[i];
    }
    let norm = ss.sqrt();
    let scale = if norm > max_norm {
        max_norm / norm
    } else {
        1.0
    };
    for i in 0..x.len() {
        out[i] = x[i] * scale;
    }
    norm
}

fn clip_by_norm_g<T: Real>(x: T::Slice<'_>, max_norm: T, mut out: T::SliceMut<'_>) -> T {
    use gradlift::trace::{SliceRead, SliceWrite};
    let n = x.len();
    let ss = for_range(0, n, T::lit(0.0), |i, ss| ss + x.at(i) * x.at(i));
    let norm = ss.sqrt();
    let scale = cond(norm.gt(max_norm), || max_norm / norm, || T::lit(1.0));
    for_range(0, n, (), |i, ()| out.set(i, x.at(i) * scale));
    norm
}

#[test]
fn clip_gradient_by_norm() {
    let mut g = autodiff("clip_by_norm", clip_by_norm_g::<Var>).unwrap();
    let mut out = [0.0; 2];
    assert_eq!(clip_by_norm(&[3.0, 4.0], 2.5, &mut out), 5.0);
    assert_eq!(out, [1.5, 2.0]);
    for (x, mx, w) in [
        (vec![3.0, 4.0], 2.5, vec![1.0, -0.5]),
        (vec![3.0, 4.0], 10.0, vec![0.2, 0.7]),
        (vec![0.5, -1.0, 2.0], 1.0, vec![1.0, 2.0, -1.0]),
    ] {
        let n = x.len();
        let mut out = vec![0.0; n];
        let norm = clip_by_norm(&x, mx, &mut out);
        let mut gout = vec![0.0; n];
        assert_eq!(clip_by_norm_g::<f64>(&x, mx, &mut gout), norm);
        assert_eq!(gout, out);
        let (mut dx, mut aout, mut dout) = (vec![0.0; n], vec![0.0; n], w.clone());
        let (v, dmx) = d_clip_by_norm(&x, &mut dx, mx, &mut aout, &mut dout);
        assert_eq!((v, &aout), (norm, &out));
        let want = fd(
            |p| {
                let mut o = vec![0.0; n];
                clip_by_norm(&p[..n], p[n], &mut o);
                dot(&w, &o)
            },
            &cat(&[&x, &[mx]]),
        );
        check_close(&cat(&[&dx, &[dmx]]), &want);
        let (mut gdx, mut gout, mut gdout) = (vec![0.0; n], vec![0.0; n], w.clone());
        let args = (
            Duplicated(&x[..], &mut gdx[..]),
            Active(mx),
            Duplicated(&mut gout[..], &mut gdout[..]),
        );
        let (gv, ((), gmx, ())) = g.gradient_with(Return::Const, args).unwrap();
        assert_eq!((gv, &gout), (norm, &out));
        check_generic(&cat(&[&dx, &[dmx]]), &cat(&[&gdx, &[gmx]]));
    }
}

// Layer normalisation in place with a gain and a bias (`Active`): `x[i] -= ..`,
// `/=`, `*=`, `+=` on the slice; `()` result.

#[autodiff_reverse(d_layer_norm, Duplicated, Active, Active)]
fn layer_norm(x: &mut [f64], gain: f64, bias: f64) {
    let n = x.len() as f64;
    let mut mean = 0.0;
    for i in 0..x.len() {
        mean += x[i];
    }
    mean /= n;
    let mut var = 0.0;
    for i in 0..x.len() {
        x[i] -= mean;
        var += x[i] * x[i];
    }
    let sd = (var / n + 1e-5).sqrt();
    for i in 0..x.len() {
        x[i] /= sd;
        x[i] *= gain;
        x[i] += bias;
    }
}

fn layer_norm_g<T: Real>(mut x: T::SliceMut<'_>, gain: T, bias: T) {
    use gradlift::trace::{SliceRead, SliceWrite};
    let len = x.len();
    let n = T::from_int(len);
    let mean = for_range(0, len, T::lit(0.0), |i, m| m + x.at(i)) / n;
    let var = for_range(0, len, T::lit(0.0), |i, var| {
        let c = x.at(i) - mean;
        x.set(i, c);
        var + c * c
    });
    let sd = (var / n + 1e-5).sqrt();
    for_range(0, len, (), |i, ()| {
        let y = x.at(i) / sd * gain + bias;
        x.set(i, y);
    });
}

#[test]
fn layer_normalisation() {
    let mut g = autodiff("layer_norm", layer_norm_g::<Var>).unwrap();
    for (x0, gain, bias, w) in [
        (vec![1.0, 2.0, 4.0], 1.0, 0.0, vec![1.0, 0.0, 0.0]),
        (
            vec![0.5, -1.5, 3.0, 0.1],
            2.0,
            -0.5,
            vec![0.3, -1.0, 2.0, 0.5],
        ),
        (vec![-2.0, 1.0], 0.7, 1.5, vec![1.0, 1.0]),
    ] {
        let n = x0.len();
        let mut native = x0.clone();
        layer_norm(&mut native, gain, bias);
        let mut gx = x0.clone();
        layer_norm_g::<f64>(&mut gx, gain, bias);
        assert_eq!(gx, native);
        let (mut x, mut dx) = (x0.clone(), w.clone());
        let (dgain, dbias) = d_layer_norm(&mut x, &mut dx, gain, bias);
        assert_eq!(x, native);
        let want = fd(
            |p| {
                let mut x = p[..n].to_vec();
                layer_norm(&mut x, p[n], p[n + 1]);
                dot(&w, &x)
            },
            &cat(&[&x0, &[gain, bias]]),
        );
        check_close(&cat(&[&dx, &[dgain, dbias]]), &want);
        let (mut gx, mut gdx) = (x0.clone(), w.clone());
        let args = (
            Duplicated(&mut gx[..], &mut gdx[..]),
            Active(gain),
            Active(bias),
        );
        let ((), ((), gg, gb)) = g.gradient_with(Return::Const, args).unwrap();
        assert_eq!(gx, native);
        check_generic(&cat(&[&dx, &[dgain, dbias]]), &cat(&[&gdx, &[gg, gb]]));
    }
}

// The proximal operator of lambda |x|_1 (soft thresholding) in place, returning the
// new L1 norm: an `else if` chain of statements writing the slice, an `Active`
// result with a seed other than 1 and a `Duplicated` writable slice at once.

#[autodiff_reverse(d_soft_threshold, Duplicated, Active, Active)]
fn soft_threshold(x: &mut [f64], lambda: f64) -> f64 {
    let mut l1 = 0.0;
    for i in 0..x.len() {
        if x[i] > lambda {
            x[i] -= lambda;
        } else if x[i] < -lambda {
            x[i] += lambda;
        } else {
            x[i] = 0.0;
        }
        l1 += x[i].abs();
    }
    l1
}

fn soft_threshold_g<T: Real>(mut x: T::SliceMut<'_>, lambda: T) -> T {
    use gradlift::trace::{SliceRead, SliceWrite};
    for_range(0, x.len(), T::lit(0.0), |i, l1| {
        let v = x.at(i);
        let y = cond(
            v.gt(lambda),
            || v - lambda,
            || cond(v.lt(-lambda), || v + lambda, || T::lit(0.0)),
        );
        x.set(i, y);
        l1 + y.abs()
    })
}

#[test]
fn soft_thresholding() {
    let mut g = autodiff("soft_threshold", soft_threshold_g::<Var>).unwrap();
    let x0 = [1.5, -0.2, -2.0, 0.05, 0.7];
    let w = [0.5, 1.0, -1.0, 2.0, 0.25];
    let seed = 1.5;
    for lambda in [0.5, 0.1, 3.0] {
        let mut native = x0;
        let l1 = soft_threshold(&mut native, lambda);
        let mut gx = x0;
        assert_eq!(soft_threshold_g::<f64>(&mut gx, lambda), l1);
        assert_eq!(gx, native);
        let (mut x, mut dx) = (x0, w);
        let (v, dl) = d_soft_threshold(&mut x, &mut dx, lambda, seed);
        assert_eq!((v, x), (l1, native));
        let want = fd(
            |p| {
                let mut x = p[..5].to_vec();
                let l1 = soft_threshold(&mut x, p[5]);
                seed * l1 + dot(&w, &x)
            },
            &cat(&[&x0, &[lambda]]),
        );
        check_close(&cat(&[&dx, &[dl]]), &want);
        let (mut gx, mut gdx) = (x0, w);
        let args = (Duplicated(&mut gx[..], &mut gdx[..]), Active(lambda));
        let (gv, ((), gl)) = g.pullback(&[seed], args).unwrap();
        assert_eq!((gv, gx), (l1, native));
        check_generic(&cat(&[&dx, &[dl]]), &cat(&[&gdx, &[gl]]));
    }
}

// A few steps of gradient descent on a least-squares fit, in place on the weights
// (a `vec!` buffer for the gradient, nested loops, `w[j] -= ..`), returning the
// last loss: derivatives with respect to the initial weights and the learning rate.

#[autodiff_reverse(d_gd_steps, Duplicated, Const, Const, Active, Const, Active)]
fn gd_steps(w: &mut [f64], xs: &[f64], ys: &[f64], lr: f64, steps: usize) -> f64 {
    let d = w.len();
    let n = ys.len();
    let mut grad = vec![0.0; d];
    let mut loss = 0.0;
    for _ in 0..steps {
        for j in 0..d {
            grad[j] = 0.0;
        }
        loss = 0.0;
        for r in 0..n {
            let mut pred = 0.0;
            for j in 0..d {
                pred += xs[r * d + j] * w[j];
            }
            let res = pred - ys[r];
            loss += res * res / n as f64;
            for j in 0..d {
                grad[j] += 2.0 * res * xs[r * d + j] / n as f64;
            }
        }
        for j in 0..d {
            w[j] -= lr * grad[j];
        }
    }
    loss
}

fn gd_steps_g<T: Real>(
    mut w: T::SliceMut<'_>,
    xs: T::Slice<'_>,
    ys: T::Slice<'_>,
    lr: T,
    steps: T::Int,
) -> T {
    use gradlift::trace::{SliceRead, SliceWrite};
    let d = w.len();
    let n = ys.len();
    let mut grad = T::alloc(d);
    for_range(0, steps, T::lit(0.0), |_, _| {
        for_range(0, d, (), |j, ()| grad.set(j, T::lit(0.0)));
        let loss = for_range(0, n, T::lit(0.0), |r, loss| {
            let pred = for_range(0, d, T::lit(0.0), |j, p| p + xs.at(r * d + j) * w.at(j));
            let res = pred - ys.at(r);
            for_range(0, d, (), |j, ()| {
                let gj = grad.at(j) + T::lit(2.0) * res * xs.at(r * d + j) / T::from_int(n);
                grad.set(j, gj);
            });
            loss + res * res / T::from_int(n)
        });
        for_range(0, d, (), |j, ()| {
            let wj = w.at(j) - lr * grad.at(j);
            w.set(j, wj);
        });
        loss
    })
}

#[test]
fn gradient_descent_unrolled() {
    let mut g = autodiff("gd_steps", gd_steps_g::<Var>).unwrap();
    let xs = [1.0, 0.5, -1.0, 2.0, 0.3, -0.7];
    let ys = [1.0, 2.5, -0.4];
    let ws = [0.4, -0.3];
    for (w0, lr, steps) in [
        ([0.0, 0.0], 0.1, 3usize),
        ([1.0, -2.0], 0.3, 5),
        ([0.5, 0.5], 0.05, 1),
        ([0.2, 0.1], 0.2, 0),
    ] {
        let mut native = w0;
        let loss = gd_steps(&mut native, &xs, &ys, lr, steps);
        let mut gw = w0;
        assert_eq!(gd_steps_g::<f64>(&mut gw, &xs, &ys, lr, steps as i64), loss);
        assert_eq!(gw, native);
        let (mut w, mut dw) = (w0, ws);
        let (v, dlr) = d_gd_steps(&mut w, &mut dw, &xs, &ys, lr, steps, 1.0);
        assert_eq!((v, w), (loss, native));
        let want = fd(
            |p| {
                let mut w = [p[0], p[1]];
                let loss = gd_steps(&mut w, &xs, &ys, p[2], steps);
                loss + dot(&ws, &w)
            },
            &cat(&[&w0, &[lr]]),
        );
        check_close(&cat(&[&dw, &[dlr]]), &want);
        let (mut gw, mut gdw) = (w0, ws);
        let args = (
            Duplicated(&mut gw[..], &mut gdw[..]),
            Const(&xs[..]),
            Const(&ys[..]),
            Active(lr),
            Const(steps as i64),
        );
        let (gv, ((), (), (), glr, ())) = g.gradient(args).unwrap();
        assert_eq!((gv, gw), (loss, native));
        check_generic(&cat(&[&dw, &[dlr]]), &cat(&[&gdw, &[glr]]));
    }
}

// A chain of masses between two walls, linked by springs with a cubic stiffening,
// integrated by semi-implicit Euler: positions and velocities updated in place
// (two `Duplicated` writable slices), the forces in a `vec!` buffer, the neighbours
// by `if` expressions on the index.

#[autodiff_reverse(d_spring_chain, Duplicated, Duplicated, Active, Active, Const)]
fn spring_chain(pos: &mut [f64], vel: &mut [f64], k: f64, dt: f64, steps: usize) {
    let n = pos.len();
    let mut force = vec![0.0; n];
    for _ in 0..steps {
        for i in 0..n {
            let left = if i == 0 { 0.0 } else { pos[i - 1] };
            let right = if i + 1 == n { 0.0 } else { pos[i + 1] };
            force[i] = k * (left + right - 2.0 * pos[i]) - 0.1 * pos[i].powi(3);
        }
        for i in 0..n {
            vel[i] += dt * force[i];
            pos[i] += dt * vel[i];
        }
    }
}

fn spring_chain_g<T: Real>(
    mut pos: T::SliceMut<'_>,
    mut vel: T::SliceMut<'_>,
    k: T,
    dt: T,
    steps: T::Int,
) {
    use gradlift::trace::{SliceRead, SliceWrite};
    let n = pos.len();
    let mut force = T::alloc(n);
    for_range(0, steps, (), |_, ()| {
        for_range(0, n, (), |i, ()| {
            let left = cond(i.eq(0), || T::lit(0.0), || pos.at(i - 1));
            let right = cond((i + 1).eq(n), || T::lit(0.0), || pos.at(i + 1));
            let p = pos.at(i);
            force.set(
                i,
                k * (left + right - T::lit(2.0) * p) - T::lit(0.1) * p.powi(3),
            );
        });
        for_range(0, n, (), |i, ()| {
            let v = vel.at(i) + dt * force.at(i);
            vel.set(i, v);
            let p = pos.at(i) + dt * v;
            pos.set(i, p);
        });
    });
}

#[test]
fn spring_chain_in_place() {
    let mut g = autodiff("spring_chain", spring_chain_g::<Var>).unwrap();
    for (p0, v0, k, dt, steps, wp, wv) in [
        (
            [0.1, -0.2, 0.3],
            [0.0, 0.1, -0.1],
            2.0,
            0.05,
            20,
            [1.0, 0.0, -1.0],
            [0.5, 0.5, 0.0],
        ),
        (
            [1.0, 0.5, -0.8],
            [0.3, 0.0, 0.2],
            0.5,
            0.1,
            7,
            [0.2, 1.0, 0.3],
            [0.0, -1.0, 2.0],
        ),
    ] {
        let (mut np, mut nv) = (p0, v0);
        spring_chain(&mut np, &mut nv, k, dt, steps);
        let (mut gp, mut gv) = (p0, v0);
        spring_chain_g::<f64>(&mut gp, &mut gv, k, dt, steps as i64);
        assert_eq!((gp, gv), (np, nv));
        let (mut p, mut dp, mut v, mut dv) = (p0, wp, v0, wv);
        let (dk, ddt) = d_spring_chain(&mut p, &mut dp, &mut v, &mut dv, k, dt, steps);
        assert_eq!((p, v), (np, nv));
        let want = fd(
            |q| {
                let (mut p, mut v) = ([q[0], q[1], q[2]], [q[3], q[4], q[5]]);
                spring_chain(&mut p, &mut v, q[6], q[7], steps);
                dot(&wp, &p) + dot(&wv, &v)
            },
            &cat(&[&p0, &v0, &[k, dt]]),
        );
        check_close(&cat(&[&dp, &dv, &[dk, ddt]]), &want);
        let (mut gp, mut gdp, mut gv, mut gdv) = (p0, wp, v0, wv);
        let args = (
            Duplicated(&mut gp[..], &mut gdp[..]),
            Duplicated(&mut gv[..], &mut gdv[..]),
            Active(k),
            Active(dt),
            Const(steps as i64),
        );
        let ((), ((), (), gk, gdt, ())) = g.gradient_with(Return::Const, args).unwrap();
        assert_eq!((gp, gv), (np, nv));
        check_generic(
            &cat(&[&dp, &dv, &[dk, ddt]]),
            &cat(&[&gdp, &gdv, &[gk, gdt]]),
        );
    }
}

// Runge-Kutta 4 for a damped Duffing oscillator, the state in place: the stage
// slopes in `vec![0.0; 4]` buffers, the weights in `vec![1.0, 2.0, 2.0, 1.0]`; the
// final energy returned.

#[autodiff_reverse(d_rk4_duffing, Duplicated, Active, Active, Active, Const, Active)]
fn rk4_duffing(state: &mut [f64], k: f64, c: f64, dt: f64, steps: usize) -> f64 {
    let weights = vec![1.0, 2.0, 2.0, 1.0];
    let mut xs = vec![0.0; 4];
    let mut vs = vec![0.0; 4];
    for _ in 0..steps {
        let x = state[0];
        let v = state[1];
        xs[0] = v;
        vs[0] = -c * v - k * x - x.powi(3);
        for s in 1..4 {
            let h = if s == 3 { dt } else { 0.5 * dt };
            let xi = x + h * xs[s - 1];
            let vi = v + h * vs[s - 1];
            xs[s] = vi;
            vs[s] = -c * vi - k * xi - xi.powi(3);
        }
        let mut dx = 0.0;
        let mut dv = 0.0;
        for s in 0..4 {
            dx += weights[s] * xs[s];
            dv += weights[s] * vs[s];
        }
        state[0] = x + dt / 6.0 * dx;
        state[1] = v + dt / 6.0 * dv;
    }
    0.5 * state[1] * state[1] + 0.5 * k * state[0] * state[0] + 0.25 * state[0].powi(4)
}

fn rk4_duffing_g<T: Real>(mut state: T::SliceMut<'_>, k: T, c: T, dt: T, steps: T::Int) -> T {
    use gradlift::trace::{SliceRead, SliceWrite};
    let mut weights = T::alloc(T::Int::from(4));
    for (s, w) in [1.0, 2.0, 2.0, 1.0].into_iter().enumerate() {
        weights.set(s as i64, T::lit(w));
    }
    let mut xs = T::alloc(T::Int::from(4));
    let mut vs = T::alloc(T::Int::from(4));
    for_range(0, steps, (), |_, ()| {
        let x = state.at(0);
        let v = state.at(1);
        xs.set(0, v);
        vs.set(0, -c * v - k * x - x.powi(3));
        for_range(1, T::Int::from(4), (), |s, ()| {
            let h = cond(s.eq(3), || dt, || dt * 0.5);
            let xi = x + h * xs.at(s - 1);
            let vi = v + h * vs.at(s - 1);
            xs.set(s, vi);
            vs.set(s, -c * vi - k * xi - xi.powi(3));
        });
        let init = (T::lit(0.0), T::lit(0.0));
        let (dx, dv) = for_range(0, T::Int::from(4), init, |s, (dx, dv)| {
            (dx + weights.at(s) * xs.at(s), dv + weights.at(s) * vs.at(s))
        });
        state.set(0, x + dt / 6.0 * dx);
        state.set(1, v + dt / 6.0 * dv);
    });
    let (x, v) = (state.at(0), state.at(1));
    T::lit(0.5) * v * v + T::lit(0.5) * k * x * x + T::lit(0.25) * x.powi(4)
}

#[test]
fn runge_kutta_duffing() {
    let mut g = autodiff("rk4_duffing", rk4_duffing_g::<Var>).unwrap();
    for (s0, k, c, dt, steps, ws) in [
        ([1.0, 0.0], 1.0, 0.1, 0.05, 40usize, [0.0, 0.0]),
        ([-0.5, 0.8], 2.0, 0.3, 0.1, 25, [1.0, -0.5]),
    ] {
        let mut native = s0;
        let e = rk4_duffing(&mut native, k, c, dt, steps);
        let mut gs = s0;
        assert_eq!(rk4_duffing_g::<f64>(&mut gs, k, c, dt, steps as i64), e);
        assert_eq!(gs, native);
        let (mut s, mut ds) = (s0, ws);
        let (v, dk, dc, ddt) = d_rk4_duffing(&mut s, &mut ds, k, c, dt, steps, 1.0);
        assert_eq!((v, s), (e, native));
        let want = fd(
            |p| {
                let mut s = [p[0], p[1]];
                let e = rk4_duffing(&mut s, p[2], p[3], p[4], steps);
                e + dot(&ws, &s)
            },
            &cat(&[&s0, &[k, c, dt]]),
        );
        check_close(&cat(&[&ds, &[dk, dc, ddt]]), &want);
        let (mut gs, mut gds) = (s0, ws);
        let args = (
            Duplicated(&mut gs[..], &mut gds[..]),
            Active(k),
            Active(c),
            Active(dt),
            Const(steps as i64),
        );
        let (gv, ((), gk, gc, gdt, ())) = g.gradient(args).unwrap();
        assert_eq!((gv, gs), (e, native));
        check_generic(&cat(&[&ds, &[dk, dc, ddt]]), &cat(&[&gds, &[gk, gc, gdt]]));
    }
}

// A one-hidden-layer network (tanh, the activations in a `vec!` buffer) and its
// binary cross-entropy with logits, written stably for either sign of the logit;
// three `Duplicated` weight slices, a `Const` input and a `Const` label.

#[autodiff_reverse(d_tiny_mlp, Duplicated, Duplicated, Duplicated, Const, Const, Active)]
fn tiny_mlp(w1: &[f64], b1: &[f64], w2: &[f64], x: &[f64], label: f64) -> f64 {
    let hidden = b1.len();
    let d = x.len();
    let mut h = vec![0.0; hidden];
    for j in 0..hidden {
        let mut a = b1[j];
        for k in 0..d {
            a += w1[j * d + k] * x[k];
        }
        h[j] = a.tanh();
    }
    // The output bias is the last weight.
    let mut z = w2[hidden];
    for j in 0..hidden {
        z += w2[j] * h[j];
    }
    if z > 0.0 {
        z - label * z + (1.0 + (-z).exp()).ln()
    } else {
        -label * z + (1.0 + z.exp()).ln()
    }
}

fn tiny_mlp_g<T: Real>(
    w1: T::Slice<'_>,
    b1: T::Slice<'_>,
    w2: T::Slice<'_>,
    x: T::Slice<'_>,
    label: T,
) -> T {
    use gradlift::trace::{SliceRead, SliceWrite};
    let hidden = b1.len();
    let d = x.len();
    let mut h = T::alloc(hidden);
    for_range(0, hidden, (), |j, ()| {
        let a = for_range(0, d, b1.at(j), |k, a| a + w1.at(j * d + k) * x.at(k));
        h.set(j, a.tanh());
    });
    let z = for_range(0, hidden, w2.at(hidden), |j, z| z + w2.at(j) * h.at(j));
    cond(
        z.gt(0.0),
        || z - label * z + ((-z).exp() + 1.0).ln(),
        || -label * z + (z.exp() + 1.0).ln(),
    )
}

#[test]
fn small_network() {
    let mut g = autodiff("tiny_mlp", tiny_mlp_g::<Var>).unwrap();
    let w1 = [0.5, -0.3, 0.8, 0.1, -0.6, 0.4];
    let b1 = [0.1, -0.2, 0.05];
    let w2 = [1.2, -0.7, 0.4, 0.2];
    for (x, label) in [
        ([1.0, 2.0], 1.0),
        ([-1.5, 0.5], 0.0),
        ([0.3, -2.0], 1.0),
        ([2.0, -1.0], 0.0),
    ] {
        let y = tiny_mlp(&w1, &b1, &w2, &x, label);
        assert_eq!(tiny_mlp_g::<f64>(&w1, &b1, &w2, &x, label), y);
        let (mut d1, mut db, mut d2) = ([0.0; 6], [0.0; 3], [0.0; 4]);
        let v = d_tiny_mlp(&w1, &mut d1, &b1, &mut db, &w2, &mut d2, &x, label, 1.0);
        super::common::check_value_own_math(v, y);
        let want = fd(
            |p| tiny_mlp(&p[..6], &p[6..9], &p[9..], &x, label),
            &cat(&[&w1, &b1, &w2]),
        );
        check_close(&cat(&[&d1, &db, &d2]), &want);
        let (mut g1, mut gb, mut g2) = ([0.0; 6], [0.0; 3], [0.0; 4]);
        let args = (
            Duplicated(&w1[..], &mut g1[..]),
            Duplicated(&b1[..], &mut gb[..]),
            Duplicated(&w2[..], &mut g2[..]),
            Const(&x[..]),
            Const(label),
        );
        let (gv, _) = g.gradient(args).unwrap();
        assert_eq!(gv, v);
        check_generic(&cat(&[&d1, &db, &d2]), &cat(&[&g1, &gb, &g2]));
    }
}

// A forward moving average over `k + 1` samples into `out`, skipping outliers: an
// inclusive range `i..=i + k` left by `break` past the end, `continue` over an
// outlier, an `if` expression on the count.

#[autodiff_reverse(d_moving_average_into, Duplicated, Duplicated, Const)]
fn moving_average_into(x: &[f64], out: &mut [f64], k: usize) {
    let n = x.len();
    for i in 0..n {
        let mut s = 0.0;
        let mut cnt: usize = 0;
        for j in i..=i + k {
            if j >= n {
                break;
            }
            if x[j].abs() > 10.0 {
                continue;
            }
            s += x[j];
            cnt += 1;
        }
        out[i] = if cnt == 0 { 0.0 } else { s / cnt as f64 };
    }
}

/// The `break` past the end as the loop's end, `min(i + k + 1, n)`.
fn moving_average_into_g<T: Real>(x: T::Slice<'_>, mut out: T::SliceMut<'_>, k: T::Int) {
    use gradlift::trace::{SliceRead, SliceWrite};
    let n = x.len();
    for_range(0, n, (), |i, ()| {
        let end = cond((i + k + 1).gt(n), || n, || i + k + 1);
        let init = (T::lit(0.0), T::Int::from(0));
        let (s, cnt) = for_range(i, end, init, |j, (s, cnt)| {
            cond(
                x.at(j).abs().gt(10.0),
                || (s, cnt),
                || (s + x.at(j), cnt + 1),
            )
        });
        let v = cond(cnt.eq(0), || T::lit(0.0), || s / T::from_int(cnt));
        out.set(i, v);
    });
}

#[test]
fn robust_moving_average() {
    let mut g = autodiff("moving_average_into", moving_average_into_g::<Var>).unwrap();
    let x = [1.0, 12.0, 2.0, -3.0, -15.0, 0.5];
    let w = [1.0, -1.0, 0.5, 2.0, 0.3, -0.2];
    let mut out = [0.0; 6];
    moving_average_into(&x, &mut out, 1);
    assert_eq!(out, [1.0, 2.0, -0.5, -3.0, 0.5, 0.5]);
    for k in [0usize, 1, 2, 7] {
        let mut native = [0.0; 6];
        moving_average_into(&x, &mut native, k);
        let mut gout = [0.0; 6];
        moving_average_into_g::<f64>(&x, &mut gout, k as i64);
        assert_eq!(gout, native);
        let (mut dx, mut aout, mut dout) = ([0.0; 6], [0.0; 6], w);
        d_moving_average_into(&x, &mut dx, &mut aout, &mut dout, k);
        assert_eq!(aout, native);
        let want = fd(
            |x| {
                let mut o = [0.0; 6];
                moving_average_into(x, &mut o, k);
                dot(&w, &o)
            },
            &x,
        );
        check_close(&dx, &want);
        let (mut gdx, mut gout, mut gdout) = ([0.0; 6], [0.0; 6], w);
        let args = (
            Duplicated(&x[..], &mut gdx[..]),
            Duplicated(&mut gout[..], &mut gdout[..]),
            Const(k as i64),
        );
        g.gradient_with(Return::Const, args).unwrap();
        assert_eq!(gout, native);
        check_generic(&dx, &gdx);
    }
}
