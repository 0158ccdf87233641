//! The float methods `sinh cosh asin acos atan atan2 hypot log10 log2 exp2 mul_add`
//! through `#[autodiff_reverse]`: the derivative's value is the native function's
//! bit for bit, its gradient the central finite differences of the native function
//! (and, where a scale makes differences meaningless, the closed form); atan2 in
//! the four quadrants, hypot far beyond where x² + y² overflows or underflows; in
//! `f64` and `f32`.

use gradlift::autodiff_reverse;

mod common;
use common::{check_close, check_close_f32, fd};

#[autodiff_reverse(d_math, Active, Active, Active)]
fn math(x: f64, y: f64) -> f64 {
    let h = x.hypot(y);
    let u = x / h;
    let a = y.atan2(x) + 2.0 * u.asin() - u.acos() + u.atan() + 0.1 * x.sinh() + 0.1 * y.cosh();
    a + h.log10() + h.log2() + u.exp2() + u.mul_add(y, x)
}

#[test]
fn every_new_float_method_against_finite_differences() {
    for (x, y) in [
        (0.8, 1.3),
        (-0.8, 1.3),
        (-0.8, -1.3),
        (0.8, -1.3),
        (2.5, 0.1),
        (-2.5, 0.1),
    ] {
        let (v, dx, dy) = d_math(x, y, 1.0);
        assert_eq!(v.to_bits(), math(x, y).to_bits(), "({x}, {y})");
        check_close(&[dx, dy], &fd(|p| math(p[0], p[1]), &[x, y]));
    }
}

#[autodiff_reverse(d_far, Active, Active, Active)]
fn far(x: f64, y: f64) -> f64 {
    x.hypot(y) + y.atan2(x)
}

#[test]
fn hypot_and_atan2_at_any_scale() {
    // (3, -4, 5) scaled: d hypot = (x, y) / h; d atan2(y, x) = (-y, x) / h².
    for s in [1.0, 1e200, 1e-200, 1e300] {
        let (x, y) = (3.0 * s, -4.0 * s);
        let (v, dx, dy) = d_far(x, y, 1.0);
        assert_eq!(v, far(x, y));
        let h = 5.0 * s;
        let (ax, ay) = (-(y / h) / h, (x / h) / h);
        for (got, want) in [(dx, 0.6 + ax), (dy, -0.8 + ay)] {
            assert!(
                (got - want).abs() <= 1e-12 * want.abs(),
                "scale {s}: {got} vs {want}"
            );
        }
        // (The shared step, 1e-6 (1 + |x|), is far too long below scale 1.)
        if s >= 1.0 {
            check_close(&[dx, dy], &fd(|p| far(p[0], p[1]), &[x, y]));
        }
    }
}

#[autodiff_reverse(d_fused, Active, Active, Active, Active)]
fn fused(a: f64, b: f64, c: f64) -> f64 {
    a.mul_add(b, c)
}

#[test]
fn mul_add_rounds_once_and_has_the_gradient_of_a_b_plus_c() {
    // (1 + 2^-30)^2 - 1: the fused value keeps 2^-60, as Rust's mul_add does.
    let a = 1.0 + 2f64.powi(-30);
    let (v, da, db, dc) = d_fused(a, a, -1.0, 1.0);
    assert_eq!(v, 2f64.powi(-29) + 2f64.powi(-60));
    assert_eq!(v, fused(a, a, -1.0));
    assert_eq!((da, db, dc), (a, a, 1.0));
}

#[autodiff_reverse(d_math32, Active, Active, Active)]
fn math32(x: f32, y: f32) -> f32 {
    let h = x.hypot(y);
    let u = x / h;
    let a = y.atan2(x) + 2.0 * u.asin() - u.acos() + u.atan() + 0.1 * x.sinh() + 0.1 * y.cosh();
    a + h.log10() + h.log2() + u.exp2() + u.mul_add(y, x)
}

#[test]
fn every_new_float_method_in_f32() {
    for (x, y) in [(0.8f32, 1.3f32), (-0.8, 1.3), (-0.8, -1.3), (0.8, -1.3)] {
        let (v, dx, dy) = d_math32(x, y, 1.0);
        assert_eq!(v.to_bits(), math32(x, y).to_bits(), "({x}, {y})");
        // Finite differences of the same function over f64.
        let want = fd(|p| math(p[0], p[1]), &[f64::from(x), f64::from(y)]);
        check_close_f32(&[dx, dy], &want);
    }
}
