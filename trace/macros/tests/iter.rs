//! Iteration forms through `#[autodiff_reverse]`: `(a..b).rev()`, `x.iter()`,
//! `x.iter().enumerate()`, also with early exits. Each derivative against central
//! finite differences of the native function, and the native function against
//! values worked out by hand.

// `(_, v)` checks that an unused index is translated too.
#![allow(clippy::unused_enumerate_index)]

use gradlift::autodiff_reverse;

mod common;
use common::check_slice as check;

// Horner's rule from the last coefficient down: `(0..n).rev()`.

#[autodiff_reverse(d_horner, Duplicated, Active)]
fn horner(c: &[f64]) -> f64 {
    let t = 0.7;
    let mut acc = 0.0;
    for i in (0..c.len()).rev() {
        acc = acc * t + c[i];
    }
    acc
}

// `..=` reversed, with a `break`.

#[autodiff_reverse(d_tail_sum, Duplicated, Active)]
fn tail_sum(x: &[f64]) -> f64 {
    let mut s = 0.0;
    for i in (1..=x.len() - 1).rev() {
        if x[i] < 0.0 {
            break;
        }
        s += x[i] * (i as f64);
    }
    s
}

#[test]
fn reversed_ranges() {
    assert_eq!(horner(&[1.0, 2.0, 3.0]), 1.0 + 0.7 * (2.0 + 0.7 * 3.0));
    assert_eq!(tail_sum(&[9.0, 1.0, -1.0, 2.0]), 6.0);
    assert_eq!(tail_sum(&[9.0, 1.0, 1.0, 2.0]), 6.0 + 2.0 + 1.0);
    for x in [vec![1.0, 2.0, 3.0], vec![-0.5, 0.25, 4.0, 1.5], vec![2.0]] {
        check(horner, d_horner, &x);
    }
    for x in [
        vec![9.0, 1.0, -1.0, 2.0],
        vec![9.0, 1.0, 1.0, 2.0],
        vec![0.0, 3.0, -2.0],
    ] {
        check(tail_sum, d_tail_sum, &x);
    }
}

// `x.iter()` with `v`, `&v` and `*v`, and `.copied()`.

#[autodiff_reverse(d_norms, Duplicated, Active)]
fn norms(x: &[f64]) -> f64 {
    let mut s = 0.0;
    for v in x.iter() {
        s += *v * v.abs();
    }
    let mut m: f64 = 0.0;
    for &v in x.iter() {
        m = m.max(v.sin());
    }
    for v in x.iter().copied() {
        if v > 2.0 {
            continue;
        }
        s += v.exp();
    }
    s + m
}

#[test]
fn slice_iter() {
    let x = [1.0, -2.0, 3.0];
    let want = 1.0 - 4.0 + 9.0 + 1f64.exp() + (-2f64).exp() + 1f64.sin();
    assert_eq!(norms(&x), want);
    for x in [vec![1.0, -2.0, 3.0], vec![0.5], vec![-1.0, 2.5, 0.3, 1.9]] {
        check(norms, d_norms, &x);
    }
}

// `x.iter().enumerate()`, with a `return` from inside.

#[autodiff_reverse(d_weighted, Duplicated, Active)]
fn weighted(x: &[f64]) -> f64 {
    let mut s = 0.0;
    for (i, &v) in x.iter().enumerate() {
        if v > 10.0 {
            return s * v;
        }
        s += (i as f64 + 1.0) * v * v;
    }
    for (_, v) in x.iter().enumerate() {
        s += *v;
    }
    s
}

#[test]
fn enumerate() {
    assert_eq!(weighted(&[1.0, 2.0]), 1.0 + 8.0 + 3.0);
    assert_eq!(weighted(&[1.0, 20.0, 2.0]), 20.0);
    for x in [
        vec![1.0, 2.0],
        vec![1.0, 20.0, 2.0],
        vec![0.5, -1.5, 3.0, 11.0],
    ] {
        check(weighted, d_weighted, &x);
    }
}
