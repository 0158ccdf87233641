//! The "primal not needed" activities of `std::autodiff`: `ActiveOnly` on the
//! return leaves the value out of the result, `ActiveOnly` on a parameter is
//! `Active`, `DuplicatedOnly` on a slice is `DuplicatedNoNeed` (derived as
//! `Duplicated`). Each derivative is checked against its closed form.

use gradlift::autodiff_reverse;

#[autodiff_reverse(d_cube, Active, ActiveOnly)]
fn cube(x: f64) -> f64 {
    x * x * x
}

#[autodiff_reverse(d_prod, Active, ActiveOnly, ActiveOnly)]
fn prod(x: f64, y: f64) -> f64 {
    x * y.sin()
}

#[autodiff_reverse(d_sumsq, DuplicatedOnly, ActiveOnly)]
fn sumsq(x: &[f64]) -> f64 {
    let mut s = 0.0;
    for v in x.iter() {
        s += *v * *v;
    }
    s
}

#[autodiff_reverse(d_scale, DuplicatedOnly, Active, Active)]
fn scale(x: &[f64], a: f64) -> f64 {
    a * x[0] - x[1]
}

#[test]
fn active_only_return_leaves_the_value_out() {
    // `d_cube(x, seed) -> f64`: the derivative alone, scaled by the seed.
    let d: f64 = d_cube(2.0, 1.0);
    assert_eq!(d, 12.0);
    assert_eq!(d_cube(2.0, 0.5), 6.0);
    assert_eq!(cube(2.0), 8.0);
    // `NAME_grad` returns what `NAME` does, with a seed of 1.
    assert_eq!(d_cube_grad(-1.0), 3.0);
}

#[test]
fn active_only_parameters_are_active() {
    let (dx, dy): (f64, f64) = d_prod(3.0, 0.5, 1.0);
    assert_eq!(dx, 0.5f64.sin());
    assert!((dy - 3.0 * 0.5f64.cos()).abs() < 1e-15);
    assert_eq!(prod(3.0, 0.5), 3.0 * 0.5f64.sin());
}

#[test]
fn duplicated_only_accumulates_into_the_shadow() {
    let x = [1.0, -2.0, 0.5];
    let mut dx = [10.0, 0.0, 0.0];
    // No value in the result: `()`.
    let () = d_sumsq(&x, &mut dx, 1.0);
    assert_eq!(dx, [12.0, -4.0, 1.0]);
    assert_eq!(d_sumsq_grad(&x), vec![2.0, -4.0, 1.0]);
    assert_eq!(sumsq(&x), 5.25);
    // With an `Active` return, the value comes first, as with `Duplicated`.
    let mut dx = [0.0; 2];
    let (v, da) = d_scale(&[2.0, 1.0], &mut dx, 3.0, 1.0);
    assert_eq!((v, da, dx), (5.0, 2.0, [3.0, -1.0]));
    assert_eq!(scale(&[2.0, 1.0], 3.0), 5.0);
}

// `i32`, like `usize` and `i64`, is traced as an i64: parameters, locals, casts.

#[autodiff_reverse(d_poly, Active, Const, Active)]
fn poly(x: f64, n: i32) -> f64 {
    let mut s = 0.0;
    let mut k: i32 = 0;
    while k < n {
        s += x.powi(2) * k as f64;
        k += 1;
    }
    let half = (n / 2) as f64;
    s + half * x + (x * 10.0) as i32 as f64
}

#[test]
fn i32_parameters_locals_and_casts() {
    // s = x² (0 + 1 + .. + n-1), plus (n/2) x, plus a piecewise-constant term.
    let (x, n) = (1.25, 5);
    let (v, dx) = d_poly(x, n, 1.0);
    assert_eq!(v, poly(x, n));
    assert_eq!(v, x * x * 10.0 + 2.0 * x + 12.0);
    assert_eq!(dx, 2.0 * x * 10.0 + 2.0);
}
