//! Local buffers (`vec![v; n]`, `vec![a, b]`) through `#[autodiff_reverse]`: each
//! derivative against central finite differences of the native function, and the
//! native function against values worked out by hand.

// `vec![1.0, -2.0, a]` checks the list form (an array literal is not translated).
#![allow(clippy::needless_range_loop, clippy::useless_vec)]

use gradlift::autodiff_reverse;

mod common;
use common::{check_close, fd};

// A prefix sum into a zeroed buffer, then a weighted read-back; `buf.len()`.

#[autodiff_reverse(d_prefix_energy, Duplicated, Active)]
fn prefix_energy(x: &[f64]) -> f64 {
    let n = x.len();
    let mut buf = vec![0.0; n];
    let mut acc = 0.0;
    for i in 0..n {
        acc += x[i];
        buf[i] = acc * acc;
    }
    let mut s = 0.0;
    for i in 0..buf.len() {
        s += buf[i] * (i as f64 + 1.0);
    }
    s
}

// A buffer filled with a value of the input, updated in place (`+=`, `*=`), and a
// literal `vec![a, b, c]`.

#[autodiff_reverse(d_smooth, Duplicated, Active, Active)]
fn smooth(x: &[f64], a: f64) -> f64 {
    let mut b = vec![a * 0.5; x.len() + 2];
    for i in 0..x.len() {
        b[i + 1] += x[i];
        b[i] *= 0.5 + x[i].tanh();
    }
    let w = vec![1.0, -2.0, a];
    let mut s = 0.0;
    for i in 0..b.len() {
        s += b[i] * w[i % 3];
    }
    s
}

#[test]
fn local_buffers() {
    // acc: 1, 3, 6; buf: 1, 9, 36; s = 1 + 18 + 108.
    assert_eq!(prefix_energy(&[1.0, 2.0, 3.0]), 127.0);
    for x in [
        vec![1.0, 2.0, 3.0],
        vec![-0.5, 0.7],
        vec![],
        vec![2.0, -1.0, 0.3, 0.9],
    ] {
        let mut dx = vec![0.0; x.len()];
        let v = d_prefix_energy(&x, &mut dx, 1.0);
        assert_eq!(v, prefix_energy(&x));
        check_close(&dx, &fd(prefix_energy, &x));
    }
    // x = [0]: b = [a/2, a/2] then b[1] += 0, b[0] *= 0.5: s = a/4 - a.
    assert_eq!(smooth(&[0.0], 2.0), 0.5 - 2.0 + 2.0 * 1.0);
    for (x, a) in [
        (vec![0.0], 2.0),
        (vec![1.0, -0.5, 0.25], 0.7),
        (vec![0.3, 2.0], -1.5),
    ] {
        let mut dx = vec![0.0; x.len()];
        let (v, da) = d_smooth(&x, &mut dx, a, 1.0);
        assert_eq!(v, smooth(&x, a));
        let n = x.len();
        let mut p = x.clone();
        p.push(a);
        dx.push(da);
        check_close(&dx, &fd(|p| smooth(&p[..n], p[n]), &p));
    }
}
