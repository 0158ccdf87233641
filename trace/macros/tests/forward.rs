//! `#[autodiff_forward]` on ordinary functions, against independent oracles: the
//! closed form of each derivative, central finite differences of the native
//! function along the tangent, and `#[autodiff_reverse]` on the same function
//! (both attributes on it) through the dot-product identity `<w, J v> = <J^T w,
//! v>`. Then `DualOnly` and `Const` returns, `f32`, `#[differentiable]` helpers and
//! recursion, early exits, `NAME_try`'s errors and `NAME`'s panics, and calls from
//! many threads.

// Index loops are what the translated subset has.
#![allow(
    clippy::needless_range_loop,
    clippy::needless_return,
    clippy::manual_memcpy
)]

use gradlift::Error;
use gradlift::ir::engine::ErrorKind;
use gradlift::{autodiff_forward, autodiff_reverse, differentiable};

fn close(a: f64, b: f64, rel: f64) -> bool {
    (a - b).abs() <= rel * (1.0 + a.abs().max(b.abs()))
}

/// Central finite difference of `g` at 0: the derivative of `f(x + t v)` in `t`.
fn fd(g: impl Fn(f64) -> f64) -> f64 {
    let h = 1e-6;
    (g(h) - g(-h)) / (2.0 * h)
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(a, b)| a * b).sum()
}

/// `x + t v` for the finite differences.
fn moved(x: &[f64], v: &[f64], t: f64) -> Vec<f64> {
    x.iter().zip(v).map(|(x, v)| x + t * v).collect()
}

// 1. A read-only slice, a loop and a branch; forward and reverse on one function.

const SOFTPLUS_LINE: u32 = line!() + 3;
#[autodiff_forward(f_softplus_sum, Dual, Dual, Dual)]
#[autodiff_reverse(r_softplus_sum, Duplicated, Active, Active)]
fn softplus_sum(x: &[f64], t: f64) -> f64 {
    let mut s = 0.0;
    for i in 0..x.len() {
        let z = x[i] * t;
        if z > 20.0 {
            s += z; // ln(1 + e^z) rounds to z
        } else {
            s += (1.0 + z.exp()).ln();
        }
    }
    s
}

#[test]
fn a_slice_loop_and_branch_against_closed_form_differences_and_reverse() {
    let sigmoid = |z: f64| 1.0 / (1.0 + (-z).exp());
    let x = [1.0, -2.0, 30.0, 0.25];
    for (t, dx, dt) in [
        (1.0, [1.0, 0.0, 0.0, 0.0], 0.0),
        (1.0, [0.0, 0.0, 0.0, 0.0], 1.0),
        (0.5, [0.5, -1.0, 2.0, 0.125], -0.75),
        (-1.5, [1.0, 1.0, 1.0, 1.0], 1.0),
    ] {
        let (value, tangent) = f_softplus_sum(&x, &dx, t, dt);
        assert_eq!(value, softplus_sum(&x, t));
        // The closed form: sum_i s(x_i t) (dx_i t + x_i dt), with s = 1 past 20.
        let want: f64 = (0..4)
            .map(|i| {
                let z = x[i] * t;
                let s = if z > 20.0 { 1.0 } else { sigmoid(z) };
                s * (dx[i] * t + x[i] * dt)
            })
            .sum();
        assert!(close(tangent, want, 1e-14), "{tangent} != {want}");
        let by_fd = fd(|h| softplus_sum(&moved(&x, &dx, h), t + h * dt));
        assert!(close(tangent, by_fd, 1e-7), "{tangent} != fd {by_fd}");
        // Reverse mode: the gradient dotted with the direction.
        let mut gx = [0.0; 4];
        let (rv, gt) = r_softplus_sum(&x, &mut gx, t, 1.0);
        assert_eq!(rv, value);
        let by_reverse = dot(&gx, &dx) + gt * dt;
        assert!(
            close(tangent, by_reverse, 1e-13),
            "{tangent} != {by_reverse}"
        );
    }
}

// 2. A writable slice, read and written: its tangent in and out.

#[autodiff_forward(f_blend_into, Dual, Dual, Dual)]
#[autodiff_reverse(r_blend_into, Duplicated, Duplicated, Active)]
fn blend_into(x: &[f64], out: &mut [f64], a: f64) {
    for i in 0..x.len() {
        out[i] = a * x[i].sin() + out[i] * out[i] * 0.5;
    }
}

#[test]
fn a_writable_slice_against_closed_form_and_reverse() {
    let x = [0.5, -1.0, 2.0];
    let out0 = [1.0, 0.25, -2.0];
    let a = 1.5;
    let (dx, dout0, da) = ([1.0, 0.5, -0.25], [0.0, 1.0, 2.0], 0.5);
    let (mut out, mut dout) = (out0, dout0);
    f_blend_into(&x, &dx, &mut out, &mut dout, a, da);
    let mut native = out0;
    blend_into(&x, &mut native, a);
    assert_eq!(out, native);
    // The tangent of what is left in `out`, overwriting the one given.
    for i in 0..3 {
        let want = da * x[i].sin() + a * x[i].cos() * dx[i] + out0[i] * dout0[i];
        assert!(
            close(dout[i], want, 1e-14),
            "dout[{i}] {} != {want}",
            dout[i]
        );
    }
    // <w, J v> = <J^T w, v>: reverse mode seeds `out`'s final contents with w
    // through its shadow, which ends as the cotangent of its initial contents.
    let w = [0.3, -1.0, 2.0];
    let (mut gx, mut out_r, mut gout) = ([0.0; 3], out0, w);
    let ga = r_blend_into(&x, &mut gx, &mut out_r, &mut gout, a);
    assert_eq!(out_r, native);
    let lhs = dot(&w, &dout);
    let rhs = dot(&gx, &dx) + dot(&gout, &dout0) + ga * da;
    assert!(close(lhs, rhs, 1e-13), "{lhs} != {rhs}");
}

// 3. `#[differentiable]` helpers, a local buffer, recursion.

#[differentiable]
fn dot_h(a: &[f64], b: &[f64]) -> f64 {
    let mut s = 0.0;
    for i in 0..a.len() {
        s += a[i] * b[i];
    }
    s
}

#[differentiable]
fn scale_h(out: &mut [f64], a: f64) {
    for i in 0..out.len() {
        out[i] *= a;
    }
}

#[autodiff_forward(f_model, Dual, Dual, Dual)]
fn model(x: &[f64], a: f64) -> f64 {
    let mut y = vec![0.0; x.len()];
    for i in 0..x.len() {
        y[i] = x[i];
    }
    scale_h(&mut y, a);
    dot_h(&y, x)
}

// x^n, recursively: the attributed function calls itself.
#[autodiff_forward(f_power, Dual, Const, Dual)]
#[autodiff_reverse(r_power, Active, Const, Active)]
#[differentiable]
fn power(x: f64, n: i64) -> f64 {
    if n == 0 { 1.0 } else { x * power(x, n - 1) }
}

#[test]
fn differentiable_helpers_and_recursion() {
    // model = a |x|^2: the tangent is 2 a x.dx + |x|^2 da.
    let x = [1.0, 2.0];
    let (value, tangent) = f_model(&x, &[0.5, -1.0], 3.0, 0.25);
    assert_eq!(value, model(&x, 3.0));
    assert_eq!(tangent, 2.0 * 3.0 * (0.5 - 2.0) + 5.0 * 0.25);
    assert_eq!(f_power(2.0, 1.0, 3), (8.0, 12.0));
    assert_eq!(
        f_power(-1.5, 2.0, 4),
        (power(-1.5, 4), 2.0 * 4.0 * (-1.5f64).powi(3))
    );
    assert_eq!(f_power(2.0, 1.0, 3).1, r_power(2.0, 3, 1.0).1);
}

// 4. Return activities: `DualOnly` (the tangent alone), `Const` (the value alone,
//    tangents through writable slices only); `DualOnly` on a parameter is `Dual`,
//    `Constant` is `Const`.

#[autodiff_forward(f_cube_only, Dual, DualOnly)]
#[autodiff_forward(f_cube_const, Dual, Const)]
#[autodiff_forward(f_cube_aliases, DualOnly, Dual)]
fn cube(x: f64) -> f64 {
    x * x * x
}

#[autodiff_forward(f_stash, Dual, Dual, Constant)]
fn stash(x: f64, out: &mut f64) -> f64 {
    *out = x.exp();
    x * 2.0
}

#[test]
fn dual_only_and_const_returns() {
    let d: f64 = f_cube_only(2.0, 1.0);
    assert_eq!(d, 12.0);
    assert_eq!(f_cube_only(2.0, 0.5), 6.0);
    let v: f64 = f_cube_const(2.0, 1.0);
    assert_eq!(v, cube(2.0));
    assert_eq!(f_cube_aliases(2.0, 1.0), (8.0, 12.0));
    let (mut out, mut dout) = (0.0, 123.0);
    assert_eq!(f_stash(1.0, 0.5, &mut out, &mut dout), 2.0);
    // The IR's `exp` of an `f64` is gradlift's own, within 1 ulp of the
    // platform's (`gradlift::ir::math::exp`).
    let e = gradlift::ir::math::exp(1.0);
    assert_eq!((out, dout), (e, 0.5 * e));
    let mut native = 0.0;
    assert_eq!(stash(1.0, &mut native), 2.0);
    assert!(
        (native - out).abs() <= f64::EPSILON * native,
        "{native} {out}"
    );
}

// 5. f32, and an early exit.

#[autodiff_forward(f_norm2_f32, Dual, Dual)]
fn norm2_f32(x: &[f32]) -> f32 {
    let mut s = 0.0;
    for v in x.iter() {
        s += *v * *v;
    }
    s.sqrt()
}

#[autodiff_forward(f_first_above, Dual, Dual, Dual)]
fn first_above(x: &[f64], t: f64) -> f64 {
    for i in 0..x.len() {
        if x[i] > t {
            return x[i] * t;
        }
    }
    return t * t;
}

#[test]
fn f32_and_an_early_exit() {
    let (v, d) = f_norm2_f32(&[3.0, 4.0], &[1.0, 2.0]);
    assert_eq!(v, norm2_f32(&[3.0, 4.0]));
    assert_eq!(v, 5.0f32);
    assert!((d - (3.0 + 8.0) / 5.0).abs() < 1e-6);
    let x = [0.5, 2.0, 3.0];
    // The second element is the first above 1: d(x_1 t) = dx_1 t + x_1 dt.
    assert_eq!(
        f_first_above(&x, &[1.0, 1.0, 1.0], 1.0, 0.5),
        (2.0, 1.0 + 1.0)
    );
    // None above 5: t^2.
    assert_eq!(f_first_above(&x, &[1.0, 1.0, 1.0], 5.0, 1.0), (25.0, 10.0));
    assert_eq!((first_above(&x, 1.0), first_above(&x, 5.0)), (2.0, 25.0));
}

// 6. Errors: `NAME_try` returns them, `NAME` panics with them.

const AT_LINE: u32 = line!() + 2;
#[autodiff_forward(f_at, Dual, Const, Dual)]
fn at(x: &[f64], k: usize) -> f64 {
    x[k] * x[k]
}

#[test]
fn try_returns_errors_and_the_function_stays_usable() {
    let x = [1.0, 2.0, 3.0];
    assert_eq!(f_at_try(&x, &[0.0, 1.0, 0.0], 1).unwrap(), (4.0, 4.0));
    match f_at_try(&x, &[1.0, 1.0], 1) {
        Err(Error::BadArguments(m)) => {
            assert_eq!(m, "the tangent of `x` has length 2 but `x` has length 3")
        }
        r => panic!("expected a bad-arguments error, got {r:?}"),
    }
    match f_at_try(&x, &[1.0; 3], 5) {
        Err(Error::Run(e)) => {
            assert_eq!(e.kind, ErrorKind::OutOfBounds { index: 5, len: 3 });
            // The read `x[k]`, where it is written, and the slice by its name.
            assert_eq!((e.op.as_str(), e.operand.as_deref()), ("load", Some("%x")));
            assert_eq!(
                (e.pos.file, e.pos.line, e.pos.col),
                (Some(file!()), AT_LINE + 1, 5)
            );
        }
        r => panic!("expected an out-of-bounds error, got {r:?}"),
    }
    assert_eq!(f_at(&x, &[0.0, 0.0, 1.0], 2), (9.0, 6.0));
}

#[test]
fn name_panics_as_rust_would_naming_the_function() {
    let x = [1.0, 2.0, 3.0];
    let p = std::panic::catch_unwind(|| f_at(&x, &[1.0; 3], 3)).unwrap_err();
    assert_eq!(
        *p.downcast_ref::<String>().unwrap(),
        format!(
            "index out of bounds: the len is 3 but the index is 3, reading `x` at {}:{}:5 \
             (in `at` at {}:{AT_LINE}, differentiated by `f_at`)",
            file!(),
            AT_LINE + 1,
            file!()
        )
    );
    // The function's own panic, for comparison.
    let own = std::panic::catch_unwind(|| at(&x, 3)).unwrap_err();
    assert_eq!(
        own.downcast_ref::<String>().unwrap(),
        "index out of bounds: the len is 3 but the index is 3"
    );
    let p = std::panic::catch_unwind(|| f_softplus_sum(&x, &[1.0], 1.0, 0.0)).unwrap_err();
    assert_eq!(
        *p.downcast_ref::<String>().unwrap(),
        format!(
            "the tangent of `x` has length 1 but `x` has length 3 (in `softplus_sum` at {}:{SOFTPLUS_LINE}, differentiated by `f_softplus_sum`)",
            file!()
        )
    );
}

// 7. Threads: each with its own workspace, the rule compiled once.

#[test]
fn many_threads_at_once() {
    std::thread::scope(|s| {
        for k in 0..8 {
            s.spawn(move || {
                for round in 0..20 {
                    let n = 1 + (k + round) % 5;
                    let x: Vec<f64> = (0..n).map(|i| 0.3 * (i + k) as f64 - 1.0).collect();
                    let dx = vec![1.0; n];
                    let t = 0.5 + 0.1 * k as f64;
                    let (v, d) = f_softplus_sum(&x, &dx, t, 0.0);
                    assert_eq!(v, softplus_sum(&x, t));
                    let by_fd = fd(|h| softplus_sum(&moved(&x, &dx, h), t));
                    assert!(close(d, by_fd, 1e-7));
                }
            });
        }
    });
}
