//! std::autodiff's doc example for `autodiff_forward`, with only the `use` line
//! changed (and `main` run as a test, with the values its comments state checked).
//!
//! The values, from the closed form: f(x, y) = (1 - x)^2 + 100 (y - x^2)^2 has
//! df/dx = -2 (1 - x) - 400 x (y - x^2) and df/dy = 200 (y - x^2); at (1, 3),
//! f = 0 + 100 * 4 = 400, df/dx = 0 - 400 * 2 = -800, df/dy = 200 * 2 = 400, and
//! along (1, 1) the tangent is -800 + 400 = -400.

use gradlift::autodiff_forward;

#[autodiff_forward(rb_fwd1, Dual, Const, Dual)]
#[autodiff_forward(rb_fwd2, Const, Dual, Dual)]
#[autodiff_forward(rb_fwd3, Dual, Dual, Dual)]
fn rosenbrock(x: f64, y: f64) -> f64 {
    (1.0 - x).powi(2) + 100.0 * (y - x.powi(2)).powi(2)
}
#[autodiff_forward(rb_inp_fwd, Dual, Dual, Dual)]
fn rosenbrock_inp(x: f64, y: f64, out: &mut f64) {
    *out = (1.0 - x).powi(2) + 100.0 * (y - x.powi(2)).powi(2);
}

#[test]
fn main() {
    let x0 = rosenbrock(1.0, 3.0); // 400.0
    let (x1, dx1) = rb_fwd1(1.0, 1.0, 3.0); // (400.0, -800.0)
    let (x2, dy1) = rb_fwd2(1.0, 3.0, 1.0); // (400.0, 400.0)
    // When seeding both arguments at once the tangent return is the sum of both.
    let (x3, dxy) = rb_fwd3(1.0, 1.0, 3.0, 1.0); // (400.0, -400.0)

    let mut out = 0.0;
    let mut dout = 0.0;
    rb_inp_fwd(1.0, 1.0, 3.0, 1.0, &mut out, &mut dout);
    // (out, dout) == (400.0, -400.0)
    assert_eq!(x0, 400.0);
    assert_eq!((x1, dx1), (400.0, -800.0));
    assert_eq!((x2, dy1), (400.0, 400.0));
    assert_eq!((x3, dxy), (400.0, -400.0));
    assert_eq!((out, dout), (400.0, -400.0));
    // The functions are still there.
    let mut out = 0.0;
    rosenbrock_inp(1.0, 3.0, &mut out);
    assert_eq!(out, 400.0);
}
