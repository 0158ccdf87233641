//! std::autodiff's doc example for `autodiff_reverse`, with only the `use` line
//! changed (and `main` run as a test, with the values its comments state checked).

use gradlift::autodiff_reverse;

#[autodiff_reverse(rb_rev, Active, Active, Active)]
fn rosenbrock(x: f64, y: f64) -> f64 {
    (1.0 - x).powi(2) + 100.0 * (y - x.powi(2)).powi(2)
}
#[autodiff_reverse(rb_inp_rev, Active, Active, Duplicated)]
fn rosenbrock_inp(x: f64, y: f64, out: &mut f64) {
    *out = (1.0 - x).powi(2) + 100.0 * (y - x.powi(2)).powi(2);
}

#[test]
fn main() {
    let (output1, dx1, dy1) = rb_rev(1.0, 3.0, 1.0);
    dbg!(output1, dx1, dy1); // (400.0, -800.0, 400.0)
    let mut output2 = 0.0;
    let mut seed = 1.0;
    let (dx2, dy2) = rb_inp_rev(1.0, 3.0, &mut output2, &mut seed);
    // (dx2, dy2, output2, seed) == (-800.0, 400.0, 400.0, 0.0)
    assert_eq!((output1, dx1, dy1), (400.0, -800.0, 400.0));
    assert_eq!((dx2, dy2, output2, seed), (-800.0, 400.0, 400.0, 0.0));
    // The functions are still there.
    assert_eq!(rosenbrock(1.0, 3.0), 400.0);
    let mut out = 0.0;
    rosenbrock_inp(1.0, 3.0, &mut out);
    assert_eq!(out, 400.0);
}
