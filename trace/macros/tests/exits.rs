//! Early exits through `#[autodiff_reverse]`: `break`, `continue`, `loop`, and
//! `return` from inside loops and branches. Each derivative against central finite
//! differences of the native function, at inputs where the exit happens at
//! different iterations (or not at all), and the native function against values
//! worked out by hand.

#![allow(clippy::needless_range_loop, clippy::needless_return)]

use gradlift::autodiff_reverse;

mod common;
use common::{check_close, check_slice, check_slice_own_math, fd};

// `break` in a `for`: the sum of squares up to the first negative element.

#[autodiff_reverse(d_until_negative, Duplicated, Active)]
fn until_negative(x: &[f64]) -> f64 {
    let mut s = 0.0;
    for i in 0..x.len() {
        if x[i] < 0.0 {
            break;
        }
        s += x[i] * x[i];
    }
    s
}

#[test]
fn break_in_for() {
    assert_eq!(until_negative(&[1.0, 2.0, -1.0, 5.0]), 5.0);
    assert_eq!(until_negative(&[-1.0, 2.0]), 0.0);
    assert_eq!(until_negative(&[1.0, 2.0]), 5.0);
    for x in [
        vec![1.0, 2.0, -1.0, 5.0],
        vec![-0.5, 2.0, 3.0],
        vec![0.3, 1.7, 2.2, 0.9],
        vec![0.3, 1.7, 2.2, -0.9],
        vec![],
    ] {
        check_slice(until_negative, d_until_negative, &x);
    }
}

// `continue`: the negative elements are skipped.

#[autodiff_reverse(d_skip_negative, Duplicated, Active)]
fn skip_negative(x: &[f64]) -> f64 {
    let mut s = 0.0;
    for i in 0..x.len() {
        if x[i] < 0.0 {
            continue;
        }
        let y = x[i].sin();
        s += y * x[i];
    }
    s
}

#[test]
fn continue_in_for() {
    assert_eq!(skip_negative(&[-1.0, 0.0, -3.0]), 0.0);
    assert_eq!(skip_negative(&[2.0, -1.0]), 2.0 * 2f64.sin());
    for x in [
        vec![1.0, -2.0, 3.0, -0.5],
        vec![-1.0, -2.0],
        vec![0.5, 1.5, 2.5],
    ] {
        check_slice_own_math(skip_negative, d_skip_negative, &x);
    }
}

// `return` from inside a loop, and a value at the end.

#[autodiff_reverse(d_first_over, Duplicated, Active, Active)]
fn first_over(x: &[f64], t: f64) -> f64 {
    let mut s = 0.0;
    for i in 0..x.len() {
        s += x[i];
        if s > t {
            return s * t + x[i];
        }
    }
    -s
}

#[test]
fn return_from_loop() {
    assert_eq!(first_over(&[1.0, 2.0, 3.0], 2.5), 3.0 * 2.5 + 2.0);
    assert_eq!(first_over(&[1.0, 2.0, 3.0], 10.0), -6.0);
    assert_eq!(first_over(&[5.0, 2.0], 2.5), 5.0 * 2.5 + 5.0);
    for (x, t) in [
        (vec![1.0, 2.0, 3.0], 2.5),
        (vec![1.0, 2.0, 3.0], 0.5),
        (vec![1.0, 2.0, 3.0], 5.5),
        (vec![1.0, 2.0, 3.0], 10.0),
    ] {
        let mut dx = vec![0.0; x.len()];
        let (v, dt) = d_first_over(&x, &mut dx, t, 1.0);
        assert_eq!(v, first_over(&x, t));
        let mut p = x.clone();
        p.push(t);
        let n = x.len();
        let want = fd(|p| first_over(&p[..n], p[n]), &p);
        dx.push(dt);
        check_close(&dx, &want);
    }
}

// `loop` with `break`, and a `return` from a branch before it.

#[autodiff_reverse(d_fixed_point, Active, Active, Active)]
fn fixed_point(a: f64, x0: f64) -> f64 {
    if a < 0.0 {
        return a * x0;
    }
    let mut x = x0;
    let mut k = 0;
    loop {
        let next = (x + a / x) * 0.5;
        k += 1;
        if (next - x).abs() < 1e-13 || k >= 60 {
            x = next;
            break;
        }
        x = next;
    }
    x * 2.0
}

#[test]
fn loop_with_break() {
    assert_eq!(fixed_point(-2.0, 3.0), -6.0);
    assert_eq!(fixed_point(4.0, 2.0), 4.0);
    for (a, x0) in [(-2.0, 3.0), (2.0, 1.0), (9.0, 0.5), (0.25, 4.0)] {
        let (v, da, dx0) = d_fixed_point(a, x0, 1.0);
        assert_eq!(v, fixed_point(a, x0));
        check_close(&[da, dx0], &fd(|p| fixed_point(p[0], p[1]), &[a, x0]));
    }
    // sqrt: the derivative of the converged iteration is 1 / sqrt(a).
    let (_, da, _) = d_fixed_point(2.0, 1.0, 1.0);
    assert!((da - 1.0 / 2f64.sqrt()).abs() < 1e-9);
}

// Nested loops: the inner `break` leaves the inner loop only, `continue` skips
// to the outer loop's next row, `return` leaves everything.

#[autodiff_reverse(d_rows, Duplicated, Const, Active, Active)]
fn rows(x: &[f64], n: usize, limit: f64) -> f64 {
    let mut s = 0.0;
    for i in 0..x.len() / n {
        if x[i * n] < 0.0 {
            continue;
        }
        let mut row = 0.0;
        for j in 0..n {
            let v = x[i * n + j];
            if v < 0.0 {
                break;
            }
            row += v * v;
            if row > limit {
                return s + row * limit;
            }
        }
        s += row.sqrt();
    }
    s
}

#[test]
fn nested_exits() {
    // Row 0: 1, 2 (then -1 breaks): sqrt(5); row 1 is skipped; row 2: 3, 0.5, 4.
    let x = [1.0, 2.0, -1.0, -5.0, 9.0, 9.0, 3.0, 0.5, 4.0];
    assert_eq!(rows(&x, 3, 100.0), 5f64.sqrt() + 25.25f64.sqrt());
    assert_eq!(rows(&x, 3, 20.0), 5f64.sqrt() + 25.25 * 20.0);
    assert_eq!(rows(&x, 3, 4.5), 5.0 * 4.5);
    for limit in [100.0, 4.5, 20.0, 0.5] {
        let mut p = x.to_vec();
        p.push(limit);
        let want = fd(|p| rows(&p[..9], 3, p[9]), &p);
        let mut dx = vec![0.0; 9];
        let (v, dl) = d_rows(&x, &mut dx, 3, limit, 1.0);
        assert_eq!(v, rows(&x, 3, limit));
        dx.push(dl);
        check_close(&dx, &want);
    }
}

// `while` with `break`, `..=` with `break`, and a `()` function returning early.

#[autodiff_reverse(d_halvings, Active, Active)]
fn halvings(x: f64) -> f64 {
    let mut y = x;
    let mut steps = 0;
    while y > 1.0 {
        y = y / 2.0 + 0.1 * y.sin();
        steps += 1;
        if steps == 3 {
            break;
        }
    }
    for k in 1..=4 {
        if y * (k as f64) > 3.0 {
            break;
        }
        y *= 1.5;
    }
    y
}

#[autodiff_reverse(d_clip_tail, Duplicated, Active)]
fn clip_tail(x: &mut [f64], t: f64) {
    for i in 0..x.len() {
        if x[i] > t {
            x[i] *= t;
            return;
        }
        x[i] = x[i] * x[i];
    }
    x[0] += 1.0;
}

#[test]
fn while_break_and_unit_return() {
    assert_eq!(halvings(0.5), 0.5 * 1.5 * 1.5);
    for x in [0.5, 1.7, 3.0, 10.0, 100.0] {
        let (v, dx) = d_halvings(x, 1.0);
        assert_eq!(v, halvings(x));
        check_close(&[dx], &fd(|p| halvings(p[0]), &[x]));
    }
    let mut a = [1.0, 2.0, 0.5];
    clip_tail(&mut a, 1.5);
    assert_eq!(a, [1.0, 3.0, 0.5]);
    let mut a = [1.0, 0.4];
    clip_tail(&mut a, 1.5);
    assert_eq!(a, [2.0, 0.4 * 0.4]);
    // The derivative of the sum of the outputs.
    let total = |p: &[f64]| {
        let mut x = p[..3].to_vec();
        clip_tail(&mut x, p[3]);
        x.iter().sum()
    };
    for (x, t) in [
        ([1.0, 2.0, 0.5], 1.5),
        ([1.0, 0.4, 0.3], 1.5),
        ([3.0, 0.4, 0.3], 1.5),
    ] {
        let mut p = x.to_vec();
        p.push(t);
        let want = fd(total, &p);
        let mut xs = x;
        let mut dx = [1.0; 3];
        let dt = d_clip_tail(&mut xs, &mut dx, t);
        let mut native = x;
        clip_tail(&mut native, t);
        assert_eq!(xs, native);
        let mut got = dx.to_vec();
        got.push(dt);
        check_close(&got, &want);
    }
}

// A `while` inside a `for`, assigning a variable of the function: the `for`
// carries it (the translation used to lose it).

#[autodiff_reverse(d_while_in_for, Duplicated, Active)]
fn while_in_for(x: &[f64]) -> f64 {
    let mut s = 0.0;
    for i in 0..x.len() {
        let mut y = x[i];
        while y > 1.0 {
            y *= 0.5;
            s += y;
        }
        s += y;
    }
    s
}

#[test]
fn while_inside_for() {
    assert_eq!(while_in_for(&[3.0]), 1.5 + 0.75 + 0.75);
    assert_eq!(while_in_for(&[0.5, 3.0]), 0.5 + 3.0);
    for x in [vec![3.0, 0.2], vec![7.0, 1.5, 0.9]] {
        check_slice(while_in_for, d_while_in_for, &x);
    }
}

// A `loop` left only by `return`, as the last statement (with or without `;`),
// and a result that returns in every arm.

#[autodiff_reverse(d_newton_sqrt, Active, Active)]
fn newton_sqrt(a: f64) -> f64 {
    let mut y = a.max(1.0);
    loop {
        let next = 0.5 * (y + a / y);
        if (next - y).abs() < 1e-12 {
            return next;
        }
        y = next;
    }
}

#[autodiff_reverse(d_newton_cbrt, Active, Active)]
fn newton_cbrt(a: f64) -> f64 {
    let mut y = a.max(1.0);
    let mut k = 0;
    loop {
        let next = (2.0 * y + a / (y * y)) / 3.0;
        k += 1;
        if (next - y).abs() < 1e-12 || k == 100 {
            return next;
        }
        y = next;
    }
}

#[autodiff_reverse(d_sign_sq, Active, Active)]
fn sign_sq(x: f64) -> f64 {
    let big = x.abs() > 2.0;
    if big == (x > 0.0) {
        return x * x;
    } else {
        return -x * x;
    }
}

#[test]
fn loops_left_only_by_return_and_results_that_always_return() {
    for a in [0.5, 2.0, 9.0] {
        let (v, da) = d_newton_sqrt(a, 1.0);
        assert_eq!(v, newton_sqrt(a));
        assert!((v - a.sqrt()).abs() < 1e-12);
        // The derivative of the iteration's fixed point: 1 / (2 sqrt a).
        check_close(&[da], &[0.5 / a.sqrt()]);
        let (v, da) = d_newton_cbrt(a, 1.0);
        assert_eq!(v, newton_cbrt(a));
        check_close(&[da], &[1.0 / (3.0 * a.cbrt().powi(2))]);
    }
    // `==` on bools decides the sign: + for x > 2, - for 0 < x <= 2, + for
    // -2 <= x <= 0 (false == false), - for x < -2.
    for x in [3.0, 1.0, -1.0, -3.0] {
        let (v, dx) = d_sign_sq(x, 1.0);
        assert_eq!(v, sign_sq(x));
        check_close(&[dx], &fd(|p| sign_sq(p[0]), &[x]));
    }
    assert_eq!(sign_sq(1.0), -1.0);
    assert_eq!(sign_sq(-1.0), 1.0);
}
