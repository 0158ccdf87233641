//! Calls of `#[differentiable]` functions from `#[autodiff_reverse]` bodies:
//! helpers over scalars and slices, a helper writing a slice, buffers passed by
//! reference, recursion and mutual recursion. Each derivative against central
//! finite differences of the native function, and the native functions against
//! values worked out by hand.

#![allow(clippy::needless_range_loop)]

use gradlift::{autodiff_reverse, differentiable};

mod common;
use common::{check_close, fd};

#[differentiable]
fn sq(x: f64) -> f64 {
    x * x
}

#[differentiable]
fn dot(a: &[f64], b: &[f64]) -> f64 {
    let mut s = 0.0;
    for i in 0..a.len() {
        s += a[i] * b[i];
    }
    s
}

#[differentiable]
fn fill_sin(out: &mut [f64], x: &[f64], a: f64) {
    for i in 0..out.len() {
        out[i] = (x[i] * a).sin();
    }
}

#[autodiff_reverse(d_model, Duplicated, Active, Active)]
fn model(x: &[f64], a: f64) -> f64 {
    let mut buf = vec![0.0; x.len()];
    fill_sin(&mut buf, x, a);
    dot(&buf, x) + sq(a) * dot(x, x)
}

#[test]
fn helpers() {
    assert_eq!(sq(3.0), 9.0);
    assert_eq!(dot(&[1.0, 2.0], &[3.0, 4.0]), 11.0);
    assert_eq!(model(&[0.0, 1.0], 2.0), 2f64.sin() + 4.0);
    for (x, a) in [
        (vec![0.0, 1.0], 2.0),
        (vec![0.5, -1.5, 2.0], 0.3),
        (vec![1.0], -1.0),
    ] {
        let mut dx = vec![0.0; x.len()];
        let (v, da) = d_model(&x, &mut dx, a, 1.0);
        assert_eq!(v, model(&x, a));
        let n = x.len();
        let mut p = x.clone();
        p.push(a);
        dx.push(da);
        check_close(&dx, &fd(|p| model(&p[..n], p[n]), &p));
    }
}

// Recursion: `x^n` by halving, with a helper calling a helper.

#[differentiable]
fn power(x: f64, n: i64) -> f64 {
    if n == 0 {
        1.0
    } else if n % 2 == 0 {
        sq(power(x, n / 2))
    } else {
        x * power(x, n - 1)
    }
}

// Mutual recursion.

#[differentiable]
fn ping(x: f64, n: i64) -> f64 {
    if n <= 0 {
        x
    } else {
        pong(x.sin() + 0.5, n - 1)
    }
}

#[differentiable]
fn pong(x: f64, n: i64) -> f64 {
    if n <= 0 { x * 2.0 } else { ping(x * x, n - 1) }
}

#[autodiff_reverse(d_recursive, Active, Const, Active)]
fn recursive(x: f64, n: i64) -> f64 {
    power(x, n) + ping(x, n)
}

#[test]
fn recursion() {
    assert_eq!(power(2.0, 10), 1024.0);
    assert_eq!(power(1.5, 0), 1.0);
    // ping(x, 1) = pong(sin x + 0.5, 0) = 2 (sin x + 0.5).
    assert_eq!(ping(0.0, 1), 1.0);
    for (x, n) in [(1.1, 0), (1.1, 1), (0.7, 5), (-1.3, 6), (0.9, 13)] {
        let (v, dx) = d_recursive(x, n, 1.0);
        assert_eq!(v, recursive(x, n));
        check_close(&[dx], &fd(|p| recursive(p[0], n), &[x]));
    }
}

// f32 helpers.

#[differentiable]
fn softplus(z: f32) -> f32 {
    if z > 20.0 { z } else { (1.0 + z.exp()).ln() }
}

#[autodiff_reverse(d_loss32, Duplicated, Active)]
fn loss32(w: &[f32]) -> f32 {
    let mut s = 0.0;
    for v in w.iter() {
        s += softplus(*v * 2.0);
    }
    s
}

#[test]
fn f32_helper() {
    for w in [[0.5f32, -1.0, 30.0], [0.0, 2.0, -3.0]] {
        let mut dw = [0.0f32; 3];
        let v = d_loss32(&w, &mut dw, 1.0);
        assert!((v - loss32(&w)).abs() <= 1e-6 * (1.0 + v.abs()));
        for i in 0..3 {
            let z = 2.0 * f64::from(w[i]);
            let want = if z > 20.0 {
                2.0
            } else {
                2.0 / (1.0 + (-z).exp())
            };
            assert!((f64::from(dw[i]) - want).abs() < 1e-5, "{dw:?}");
        }
    }
}

// A marked function that no derivative calls: no warning for its twin (the test
// crate denies warnings in clippy).

#[differentiable]
fn unused_helper(x: f64) -> f64 {
    x + 1.0
}

#[test]
fn unused_helper_is_plain() {
    assert_eq!(unused_helper(1.0), 2.0);
}

// A recursive function with the attribute itself: marked `#[differentiable]` too,
// in either order.

#[autodiff_reverse(d_pw, Active, Const, Active)]
#[differentiable]
fn pw(x: f64, n: i64) -> f64 {
    if n == 0 { 1.0 } else { x * pw(x, n - 1) }
}

#[differentiable]
#[autodiff_reverse(d_fact_pow, Active, Const, Active)]
fn fact_pow(x: f64, n: i64) -> f64 {
    if n <= 1 {
        x
    } else {
        n as f64 * x * fact_pow(x, n - 1)
    }
}

#[test]
fn an_attributed_function_may_call_itself() {
    // x^n and its derivative n x^(n-1).
    for (x, n) in [(2.0, 3), (-1.5, 4), (0.5, 0)] {
        let (v, dx) = d_pw(x, n, 1.0);
        assert_eq!(v, pw(x, n));
        let want = if n == 0 {
            0.0
        } else {
            n as f64 * x.powi(n as i32 - 1)
        };
        assert!(
            (dx - want).abs() < 1e-12 * (1.0 + want.abs()),
            "{dx} {want}"
        );
    }
    // n! x^n, whose derivative is n! n x^(n-1).
    let (v, dx) = d_fact_pow(1.5, 4, 1.0);
    assert_eq!(v, fact_pow(1.5, 4));
    check_close(&[dx], &fd(|p| fact_pow(p[0], 4), &[1.5]));
}
