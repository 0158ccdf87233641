//! `f32` functions: GELU, a logistic-regression SGD step in place, a quantisation
//! loss (casts between `f32` and `usize`), a softmax entropy.
//!
//! Oracles: central differences of the native `f32` function taken in `f64` with
//! a larger step (`fd_f32`, to 2e-3: `f32` rounding is 6e-8 of the value), central
//! differences of the generic version run on `f64` (to 1e-4), and the generic path
//! over `Var<f32>` (to 1e-6 relative). The generic versions are over `Float`,
//! with `f32` literals as `lit32(..)` so that they round as Rust's `f32` literals.

use gradlift::autodiff_reverse;
use gradlift::trace::{Float, Int, Var, cond, for_range, while_loop};
use gradlift::{Active, Const, Duplicated, Return, autodiff};

use super::check_generic_f32;
use super::common::{check_close_f32, fd};

/// The `f32` literal `x` in a generic function.
fn lit32<T: Float>(x: f32) -> T {
    T::lit(f64::from(x))
}

/// Central differences of an `f32` function at `x`, in `f64` from the `f32`
/// values, with a step of 1e-2 relative (so that rounding stays small).
fn fd_f32(f: impl Fn(&[f32]) -> f32, x: &[f32]) -> Vec<f64> {
    (0..x.len())
        .map(|i| {
            let h = 1e-2 * (1.0 + x[i].abs());
            let (mut xp, mut xm) = (x.to_vec(), x.to_vec());
            xp[i] += h;
            xm[i] -= h;
            let step = f64::from(xp[i]) - f64::from(xm[i]);
            (f64::from(f(&xp)) - f64::from(f(&xm))) / step
        })
        .collect()
}

/// `got` agrees with [`fd_f32`]'s differences to 2e-3.
#[track_caller]
fn check_fd_f32(got: &[f32], want: &[f64]) {
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(want) {
        assert!(
            (f64::from(*g) - w).abs() <= 2e-3 * (1.0 + w.abs()),
            "gradient {got:?}, f32 finite differences {want:?}"
        );
    }
}

fn widen(x: &[f32]) -> Vec<f64> {
    x.iter().map(|&v| f64::from(v)).collect()
}

// GELU (its tanh form) of a scaled input, zero far below: `f32::consts`, `tanh`,
// `powi`, an early `return`.

#[autodiff_reverse(d_gelu_f32, Active, Active, Active)]
fn gelu_f32(x: f32, a: f32) -> f32 {
    let u = a * x;
    if u < -10.0 {
        return 0.0;
    }
    let c = std::f32::consts::FRAC_2_SQRT_PI * std::f32::consts::FRAC_1_SQRT_2;
    let inner = c * (u + 0.044715 * u.powi(3));
    0.5 * u * (1.0 + inner.tanh())
}

fn gelu_g<T: Float>(x: T, a: T) -> T {
    let u = a * x;
    cond(
        u.lt(lit32::<T>(-10.0)),
        || lit32::<T>(0.0),
        || {
            let c = lit32::<T>(std::f32::consts::FRAC_2_SQRT_PI)
                * lit32::<T>(std::f32::consts::FRAC_1_SQRT_2);
            let inner = c * (u + lit32::<T>(0.044715) * u.powi(3));
            lit32::<T>(0.5) * u * (inner.tanh() + lit32::<T>(1.0))
        },
    )
}

#[test]
fn gelu() {
    let mut g = autodiff("gelu_f32", gelu_g::<Var<f32>>).unwrap();
    assert_eq!(gelu_f32(0.0, 1.0), 0.0);
    for (x, a) in [
        (0.5f32, 1.0f32),
        (-2.0, 1.5),
        (-20.0, 1.0),
        (3.0, 0.7),
        (-0.8, -2.0),
    ] {
        let y = gelu_f32(x, a);
        assert_eq!(gelu_g(x, a), y);
        let (v, dx, da) = d_gelu_f32(x, a, 1.0);
        assert_eq!(v, y);
        check_fd_f32(&[dx, da], &fd_f32(|p| gelu_f32(p[0], p[1]), &[x, a]));
        let want = fd(|p| gelu_g(p[0], p[1]), &widen(&[x, a]));
        check_close_f32(&[dx, da], &want);
        let (gv, (gx, ga)) = g.gradient((Active(x), Active(a))).unwrap();
        assert_eq!(gv, y);
        check_generic_f32(&[dx, da], &[gx, ga]);
    }
}

// One SGD step of logistic regression on one sample, in place on `f32` weights
// (`w[j] -= ..`); the derivative of the new weights in the old ones and the rate.

#[autodiff_reverse(d_sgd_step_f32, Duplicated, Const, Const, Active)]
fn sgd_step_f32(w: &mut [f32], x: &[f32], y: f32, lr: f32) {
    let mut z = 0.0;
    for j in 0..w.len() {
        z += w[j] * x[j];
    }
    let p = if z >= 0.0 {
        1.0 / (1.0 + (-z).exp())
    } else {
        let e = z.exp();
        e / (1.0 + e)
    };
    let g = p - y;
    for j in 0..w.len() {
        w[j] -= lr * g * x[j];
    }
}

fn sgd_step_g<T: Float>(mut w: T::SliceMut<'_>, x: T::Slice<'_>, y: T, lr: T) {
    use gradlift::trace::{SliceRead, SliceWrite};
    let n = w.len();
    let z = for_range(0, n, lit32::<T>(0.0), |j, z| z + w.at(j) * x.at(j));
    let p = cond(
        z.ge(lit32::<T>(0.0)),
        || lit32::<T>(1.0) / ((-z).exp() + lit32::<T>(1.0)),
        || {
            let e = z.exp();
            e / (e + lit32::<T>(1.0))
        },
    );
    let g = p - y;
    for_range(0, n, (), |j, ()| {
        let wj = w.at(j) - lr * g * x.at(j);
        w.set(j, wj);
    });
}

#[test]
fn sgd_step_in_place() {
    let mut g = autodiff("sgd_step_f32", sgd_step_g::<Var<f32>>).unwrap();
    let x = [1.0f32, -0.5, 2.0];
    let ws = [1.0f32, 0.5, -0.25];
    for (w0, y, lr) in [
        ([0.2f32, -0.1, 0.4], 1.0f32, 0.5f32),
        ([-0.6, 0.3, -0.5], 0.0, 0.1),
        ([1.0, 1.0, -1.0], 1.0, 2.0),
    ] {
        let mut native = w0;
        sgd_step_f32(&mut native, &x, y, lr);
        let mut gw = w0;
        sgd_step_g::<f32>(&mut gw, &x, y, lr);
        assert_eq!(gw, native);
        let (mut w, mut dw) = (w0, ws);
        let dlr = d_sgd_step_f32(&mut w, &mut dw, &x, y, lr);
        assert_eq!(w, native);
        let got = [dw[0], dw[1], dw[2], dlr];
        let loss32 = |p: &[f32]| {
            let mut w = [p[0], p[1], p[2]];
            sgd_step_f32(&mut w, &x, y, p[3]);
            w.iter().zip(&ws).map(|(a, b)| a * b).sum::<f32>()
        };
        check_fd_f32(&got, &fd_f32(loss32, &[w0[0], w0[1], w0[2], lr]));
        let (x64, ws64) = (widen(&x), widen(&ws));
        let loss64 = |p: &[f64]| {
            let mut w = [p[0], p[1], p[2]];
            sgd_step_g::<f64>(&mut w, &x64, f64::from(y), p[3]);
            w.iter().zip(&ws64).map(|(a, b)| a * b).sum::<f64>()
        };
        check_close_f32(&got, &fd(loss64, &widen(&[w0[0], w0[1], w0[2], lr])));
        let (mut gw, mut gdw) = (w0, ws);
        let args = (
            Duplicated(&mut gw[..], &mut gdw[..]),
            Const(&x[..]),
            Const(y),
            Active(lr),
        );
        let ((), ((), (), (), glr)) = g.gradient_with(Return::Const, args).unwrap();
        assert_eq!(gw, native);
        check_generic_f32(&got, &[gdw[0], gdw[1], gdw[2], glr]);
    }
}

// The squared error of a mid-rise quantiser with `levels` levels on [0, 1), times
// the bits it needs: `f32 as usize` (saturating below 0), `usize as f32`, an integer
// `while` doubling a capacity (`*=`), `(0..n).rev()`.

#[autodiff_reverse(d_quantize_loss_f32, Duplicated, Const, Active)]
fn quantize_loss_f32(x: &[f32], levels: usize) -> f32 {
    let scale = levels as f32;
    let mut bits: usize = 0;
    let mut cap: usize = 1;
    while cap < levels {
        cap *= 2;
        bits += 1;
    }
    let mut loss = 0.0;
    for i in (0..x.len()).rev() {
        let mut b = (x[i] * scale) as usize;
        if b >= levels {
            b = levels - 1;
        }
        let q = (b as f32 + 0.5) / scale;
        let r = x[i] - q;
        loss += r * r;
    }
    loss * bits as f32
}

fn quantize_loss_g<T: Float>(x: T::Slice<'_>, levels: T::Int) -> T {
    use gradlift::trace::SliceRead;
    let scale = T::from_int(levels);
    let init = (T::Int::from(0), T::Int::from(1));
    let (bits, _) = while_loop(
        init,
        |&(_, cap)| cap.lt(levels),
        |(bits, cap)| (bits + 1, cap * 2),
    );
    let n = x.len();
    let loss = for_range(0, n, lit32::<T>(0.0), |k, loss| {
        let i = n - 1 - k;
        let b0 = (x.at(i) * scale).max(lit32::<T>(0.0)).to_int();
        let b = cond(b0.ge(levels), || levels - 1, || b0);
        let q = (T::from_int(b) + lit32::<T>(0.5)) / scale;
        let r = x.at(i) - q;
        loss + r * r
    });
    loss * T::from_int(bits)
}

#[test]
fn quantisation_loss() {
    let mut g = autodiff("quantize_loss_f32", quantize_loss_g::<Var<f32>>).unwrap();
    // Two levels, one bit: 0.3 -> 0.25, 0.6 -> 0.75.
    assert!((quantize_loss_f32(&[0.3, 0.6], 2) - (0.05 * 0.05 + 0.15 * 0.15)).abs() < 1e-7);
    let x = [0.1f32, 0.33, 0.7, -0.2, 1.3];
    for levels in [4usize, 5, 1] {
        let y = quantize_loss_f32(&x, levels);
        assert_eq!(quantize_loss_g::<f32>(&x, levels as i64), y);
        let mut dx = [0.0f32; 5];
        let v = d_quantize_loss_f32(&x, &mut dx, levels, 1.0);
        assert_eq!(v, y);
        check_fd_f32(&dx, &fd_f32(|x| quantize_loss_f32(x, levels), &x));
        let want = fd(|x| quantize_loss_g::<f64>(x, levels as i64), &widen(&x));
        check_close_f32(&dx, &want);
        let mut gdx = [0.0f32; 5];
        let args = (Duplicated(&x[..], &mut gdx[..]), Const(levels as i64));
        let (gv, _) = g.gradient(args).unwrap();
        assert_eq!(gv, y);
        check_generic_f32(&dx, &gdx);
    }
}

// The entropy of softmax(x): the maximum first, `x.iter()` with `*v`, and the
// terms of negligible probability skipped.

#[autodiff_reverse(d_entropy_f32, Duplicated, Active)]
fn entropy_f32(x: &[f32]) -> f32 {
    let mut m = x[0];
    for v in x.iter() {
        m = m.max(*v);
    }
    let mut z = 0.0;
    for v in x.iter() {
        z += (*v - m).exp();
    }
    let mut h = 0.0;
    for v in x.iter() {
        let p = (*v - m).exp() / z;
        if p > 1e-12 {
            h -= p * p.ln();
        }
    }
    h
}

fn entropy_g<T: Float>(x: T::Slice<'_>) -> T {
    use gradlift::trace::SliceRead;
    let n = x.len();
    let m = for_range(0, n, x.at(0), |i, m| m.max(x.at(i)));
    let z = for_range(0, n, lit32::<T>(0.0), |i, z| z + (x.at(i) - m).exp());
    for_range(0, n, lit32::<T>(0.0), |i, h| {
        let p = (x.at(i) - m).exp() / z;
        cond(p.gt(lit32::<T>(1e-12)), || h - p * p.ln(), || h)
    })
}

#[test]
fn softmax_entropy() {
    let mut g = autodiff("entropy_f32", entropy_g::<Var<f32>>).unwrap();
    assert!((entropy_f32(&[0.0, 0.0]) - 2f32.ln()).abs() < 1e-6);
    for x in [
        vec![0.0f32, -40.0, 1.0],
        vec![0.5, 0.2, -0.3, 1.1],
        vec![2.0, -1.0],
    ] {
        let y = entropy_f32(&x);
        assert_eq!(entropy_g::<f32>(&x), y);
        let n = x.len();
        let mut dx = vec![0.0f32; n];
        let v = d_entropy_f32(&x, &mut dx, 1.0);
        assert_eq!(v, y);
        check_fd_f32(&dx, &fd_f32(entropy_f32, &x));
        check_close_f32(&dx, &fd(|x| entropy_g::<f64>(x), &widen(&x)));
        let mut gdx = vec![0.0f32; n];
        let (gv, ((),)) = g.gradient((Duplicated(&x[..], &mut gdx[..]),)).unwrap();
        assert_eq!(gv, y);
        check_generic_f32(&dx, &gdx);
    }
}
