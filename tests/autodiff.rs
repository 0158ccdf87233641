//! The `autodiff` entry points against independent oracles: closed forms and
//! central finite differences of the same generic code run natively on `f64`.
//!
//! - `f(x, y) = x*x + 3y` with every activity combination (and the return active or
//!   constant), a closure, `f32`, integer and boolean constants, several results,
//!   writable slices;
//! - the training loss with `Duplicated` weights: five calls into one shadow leave
//!   five gradients (against five times one gradient from a zero shadow, and against
//!   finite differences);
//! - the fast inverse square root with custom derivatives (traced and native) against
//!   `-x^-1.5 / 2`, and the derivative through its bits against its own closed form;
//! - errors: wrong shadow lengths, wrong seeds, run-time failures, tracing mistakes,
//!   signatures that do not fit; none panics, and the function stays usable;
//! - the three examples run (their `main`s check themselves too).

use gradlift::trace::{Tracer, prelude::*};
use gradlift::{Active, Autodiff, Const, Duplicated, DuplicatedNoNeed, Error, Return, autodiff};

#[path = "../examples/activities.rs"]
mod activities;
#[path = "../examples/fast_inv_sqrt.rs"]
mod fast_inv_sqrt;
#[path = "../examples/training.rs"]
mod training;

use activities::f;

/// Central finite difference of `g` at `x`.
fn fd(g: impl Fn(f64) -> f64, x: f64) -> f64 {
    let h = 1e-6 * x.abs().max(1.0);
    (g(x + h) - g(x - h)) / (2.0 * h)
}

fn close(a: f64, b: f64, rel: f64) -> bool {
    (a - b).abs() <= rel * a.abs().max(b.abs()).max(1e-300)
}

#[test]
fn every_activity_combination_of_f() {
    let mut grad = autodiff("f", f::<Var>).unwrap();
    for (x, y) in [(2.0, 5.0), (-1.5, 0.25), (0.0, -3.0), (1e3, 1e-3)] {
        let value = x * x + 3.0 * y;
        // Oracles: the closed form, and finite differences of the native code.
        let (dfdx, dfdy) = (2.0 * x, 3.0);
        // (Loose: at (1000, 0.001) the difference quotient cancels x*x = 1e6.)
        assert!((fd(|x| f(x, y), x) - dfdx).abs() <= 1e-4 * dfdx.abs().max(1.0));
        assert!((fd(|y| f(x, y), y) - dfdy).abs() <= 1e-4 * (1.0 + x * x));

        assert_eq!(
            grad.gradient((Active(x), Active(y))).unwrap(),
            (value, (dfdx, dfdy))
        );
        assert_eq!(
            grad.gradient((Active(x), Const(y))).unwrap(),
            (value, (dfdx, ()))
        );
        assert_eq!(
            grad.gradient((Const(x), Active(y))).unwrap(),
            (value, ((), dfdy))
        );
        assert_eq!(
            grad.gradient((Const(x), Const(y))).unwrap(),
            (value, ((), ()))
        );
        // A constant return: nothing seeded, active parameters get zero.
        let r = Return::Const;
        assert_eq!(
            grad.gradient_with(r, (Const(x), Const(y))).unwrap(),
            (value, ((), ()))
        );
        assert_eq!(
            grad.gradient_with(r, (Active(x), Active(y))).unwrap(),
            (value, (0.0, 0.0))
        );
        assert_eq!(
            grad.gradient_with(r, (Active(x), Const(y))).unwrap(),
            (value, (0.0, ()))
        );
        assert_eq!(
            grad.gradient_with(Return::Active, (Const(x), Active(y)))
                .unwrap(),
            (value, ((), dfdy))
        );
        // Other seeds: a vector-Jacobian product.
        assert_eq!(
            grad.pullback(&[-2.0], (Active(x), Active(y))).unwrap(),
            (value, (-2.0 * dfdx, -2.0 * dfdy))
        );
        assert_eq!(grad.call((x, y)).unwrap(), value);
    }
    // Each pattern was compiled once, on first use, and reused at later points.
    let mut patterns = grad.patterns();
    patterns.sort();
    assert_eq!(
        patterns,
        ["AA_A", "AA_C", "AC_A", "AC_C", "CA_A", "CC_A", "CC_C"]
    );
    let spent = grad.compile_time();
    assert!(spent > std::time::Duration::ZERO);
    grad.gradient((Active(1.0), Const(1.0))).unwrap();
    assert_eq!(
        grad.compile_time(),
        spent,
        "a compiled pattern is not compiled again"
    );
    assert!(
        grad.module()
            .to_string()
            .contains("func @f(%0: f64, %1: f64) -> f64")
    );
    assert_eq!(grad.name(), "f");
}

#[test]
fn closures_f32_integers_booleans_and_tuples() {
    // A closure.
    let mut g = autodiff("g", |x: Var, y: Var| x * x + 3.0 * y).unwrap();
    assert_eq!(
        g.gradient((Active(2.0), Active(5.0))).unwrap(),
        (19.0, (4.0, 3.0))
    );

    // f32.
    let mut h = autodiff("h", |x: Var<f32>, y: Var<f32>| x * x * y).unwrap();
    assert_eq!(
        h.gradient((Active(2.0f32), Active(3.0f32))).unwrap(),
        (12.0, (12.0, 4.0))
    );
    assert_eq!(
        h.gradient((Const(2.0f32), Active(3.0f32))).unwrap(),
        (12.0, ((), 4.0))
    );
    assert_eq!(h.call((2.0f32, 3.0f32)).unwrap(), 12.0);

    // Integer and boolean constants: x * n where flag, x elsewhere.
    let mut k = autodiff("k", |x: Var, n: Var<i64>, flag: Var<bool>| {
        cond(flag, || x * Var::from_int(n), || x)
    })
    .unwrap();
    assert_eq!(
        k.gradient((Active(2.0), Const(3), Const(true))).unwrap(),
        (6.0, (3.0, (), ()))
    );
    assert_eq!(
        k.gradient((Active(2.0), Const(3), Const(false))).unwrap(),
        (2.0, (1.0, (), ()))
    );
    assert_eq!(k.call((2.0, 3, true)).unwrap(), 6.0);

    // Several results, of several types; each float result seeded with 1.
    let mut m = autodiff("m", |x: Var, y: Var| (x * y, x + y, x.to_int())).unwrap();
    let ((p, s, i), (dx, dy)) = m.gradient((Active(2.0), Active(5.0))).unwrap();
    assert_eq!((p, s, i, dx, dy), (10.0, 7.0, 2, 5.0 + 1.0, 2.0 + 1.0));
    // Seeds per float result: d(2 xy + 0.5 (x + y)).
    let (_, (dx, dy)) = m.pullback(&[2.0, 0.5], (Active(2.0), Active(5.0))).unwrap();
    assert_eq!((dx, dy), (2.0 * 5.0 + 0.5, 2.0 * 2.0 + 0.5));

    // No result at all: a function that only writes.
    let mut w = autodiff("w", |mut out: SliceMut<f64>, x: Var| out.set(0, x * x)).unwrap();
    let mut out = [0.0; 2];
    w.call((&mut out[..], 3.0)).unwrap();
    assert_eq!(out, [9.0, 0.0]);
    // The shadow of `out` seeds the cotangent of what the function writes there.
    let mut dout = [2.0, 0.0];
    let ((), ((), dx)) = w
        .gradient((Duplicated(&mut out[..], &mut dout[..]), Active(3.0)))
        .unwrap();
    assert_eq!(dx, 2.0 * 2.0 * 3.0);
    // A store overwrites: the old contents of out[0] get no cotangent.
    assert_eq!(dout, [0.0, 0.0]);
}

/// `x_i <- x_i^2` in place; returns the sum of the new contents.
fn square_in_place<T: Real>(mut x: T::SliceMut<'_>) -> T {
    for_range(0, x.len(), T::lit(0.0), |i, acc| {
        let xi = x.at(i);
        x.set(i, xi * xi);
        acc + xi * xi
    })
}

#[test]
fn writable_slices_const_duplicated_and_no_need() {
    let mut sq = autodiff("square_in_place", square_in_place::<Var>).unwrap();
    let x0 = [1.0, -2.0, 3.0];

    // Const: the contents are updated, no derivative.
    let mut x = x0;
    assert_eq!(sq.gradient((Const(&mut x[..]),)).unwrap(), (14.0, ((),)));
    assert_eq!(x, [1.0, 4.0, 9.0]);
    let mut x = x0;
    assert_eq!(sq.call((&mut x[..],)).unwrap(), 14.0);
    assert_eq!(x, [1.0, 4.0, 9.0]);

    // Duplicated: the shadow on entry, s, is the cotangent of the final contents
    // x0_i^2; the shadow at the end is the cotangent of the initial contents: the
    // result's 2 x0_i plus the contents' s_i 2 x0_i.
    let mut x = x0;
    let s = [0.0, 1.0, -0.5];
    let mut dx = s;
    sq.gradient((Duplicated(&mut x[..], &mut dx[..]),)).unwrap();
    assert_eq!(x, [1.0, 4.0, 9.0]);
    for i in 0..3 {
        assert_eq!(dx[i], 2.0 * x0[i] * (1.0 + s[i]), "{i}");
    }

    // DuplicatedNoNeed: the same derivative; the primal is not updated.
    let mut x = x0;
    let mut dx = s;
    sq.gradient((DuplicatedNoNeed(&mut x[..], &mut dx[..]),))
        .unwrap();
    assert_eq!(x, x0);
    for i in 0..3 {
        assert_eq!(dx[i], 2.0 * x0[i] * (1.0 + s[i]), "{i}");
    }
    let mut dx = [0.0; 3];
    sq.gradient((DuplicatedNoNeed(&x0[..], &mut dx[..]),))
        .unwrap();
    assert_eq!(dx, [2.0, -4.0, 6.0]);

    let mut patterns = sq.patterns();
    patterns.sort();
    assert_eq!(patterns, ["C_A", "D_A", "N_A"]);
}

#[test]
fn read_only_slices_duplicated_no_need_and_containers() {
    // sum x_i y_i, through Vec and array references too.
    let mut dot = autodiff("dot", |x: Slice<f64>, y: Slice<f64>| {
        for_range(0, x.len(), Var::from(0.0), |i, acc| acc + x.at(i) * y.at(i))
    })
    .unwrap();
    let x = vec![1.0, 2.0, 3.0];
    let y = [4.0, 5.0, 6.0];
    let mut dx = vec![0.0; 3];
    let mut dy = [0.0; 3];
    let (v, ((), ())) = dot
        .gradient((Duplicated(&x, &mut dx), DuplicatedNoNeed(&y, &mut dy)))
        .unwrap();
    assert_eq!(v, 32.0);
    assert_eq!(dx, y);
    assert_eq!(dy, [1.0, 2.0, 3.0]);
    assert_eq!(dot.call((&x, &y)).unwrap(), 32.0);
    // Integer slices are constants.
    let mut pick = autodiff("pick", |x: Slice<f64>, idx: Slice<i64>| {
        x.at(idx.at(0)) * 2.0
    })
    .unwrap();
    let mut dx = [0.0; 3];
    pick.gradient((Duplicated(&x[..], &mut dx[..]), Const(&[2i64][..])))
        .unwrap();
    assert_eq!(dx, [0.0, 0.0, 2.0]);
}

#[test]
fn shadows_accumulate_five_gradients() {
    let images = training::images();
    let weights = training::initial_weights();
    let mut loss = autodiff("training_loss", training::training_loss::<Var>).unwrap();

    let mut once = vec![0.0; weights.len()];
    let (value, _) = loss
        .gradient((Const(&images[..]), Duplicated(&weights[..], &mut once[..])))
        .unwrap();
    assert!(close(
        value,
        training::training_loss::<f64>(&images, &weights),
        1e-12
    ));

    let mut dw = vec![0.0; weights.len()];
    for _ in 0..5 {
        loss.gradient((Const(&images[..]), Duplicated(&weights[..], &mut dw[..])))
            .unwrap();
    }
    // Against five times one gradient from a zero shadow...
    for (j, (five, one)) in dw.iter().zip(&once).enumerate() {
        assert!(
            close(*five, 5.0 * one, 1e-12),
            "weight {j}: {five} vs 5 x {one}"
        );
    }
    // ... and against finite differences of the native loss.
    for j in 0..weights.len() {
        let numeric = fd(
            |wj| {
                let mut w = weights.clone();
                w[j] = wj;
                training::training_loss::<f64>(&images, &w)
            },
            weights[j],
        );
        assert!(
            close(once[j], numeric, 1e-6),
            "weight {j}: {} vs {numeric}",
            once[j]
        );
        assert!(close(dw[j], 5.0 * numeric, 1e-6), "weight {j}");
    }
    // A nonzero starting shadow is where the gradient is added.
    let mut start = vec![1.0; weights.len()];
    loss.gradient((Const(&images[..]), Duplicated(&weights[..], &mut start[..])))
        .unwrap();
    for j in 0..weights.len() {
        assert!(close(start[j], 1.0 + once[j], 1e-12));
    }
    assert_eq!(loss.patterns(), ["CD_A"]);
}

#[test]
fn fast_inv_sqrt_with_custom_derivatives() {
    use fast_inv_sqrt::{MAGIC, XS, fisr, fisr_native_vjp, sum_fisr, sum_fisr_naive};
    let mut custom = autodiff("sum_fisr", sum_fisr::<Var>).unwrap();
    let mut naive = autodiff("sum_fisr_naive", sum_fisr_naive::<Var>).unwrap();
    let mut native = fisr_native_vjp().unwrap();
    let text = custom.module().to_string();
    assert!(text.contains("vjp @fisr = @fisr_vjp"), "{text}");
    assert!(
        native
            .module()
            .to_string()
            .contains("vjp @fisr = @fisr_vjp_native")
    );

    let mut d_custom = [0.0; XS.len()];
    let mut d_naive = [0.0; XS.len()];
    let (v, _) = custom
        .gradient((Duplicated(&XS[..], &mut d_custom[..]),))
        .unwrap();
    assert_eq!(v, sum_fisr::<f64>(&XS));
    naive
        .gradient((Duplicated(&XS[..], &mut d_naive[..]),))
        .unwrap();
    for (k, &x) in XS.iter().enumerate() {
        let exact = -0.5 * x.powf(-1.5);
        // The custom derivatives: -y^3/2 with y = fisr(x), within 1% of exact.
        let y = fisr(x);
        assert!(close(d_custom[k], -0.5 * y * y * y, 1e-14), "at {x}");
        assert!(close(d_custom[k], exact, 1e-2), "at {x}");
        let (value, (d,)) = native.gradient((Active(x),)).unwrap();
        assert_eq!(value, y);
        assert_eq!(d, d_custom[k], "at {x}");
        // Through the bits: the guess y0 is a constant, so the derivative is that
        // of the Newton step alone, -y0^3/2.
        let y0 = f64::from_bits((MAGIC - ((x.to_bits() as i64) >> 1)) as u64);
        assert!(close(d_naive[k], -0.5 * y0 * y0 * y0, 1e-14), "at {x}");
    }
    // At 1, the guess is 3.4% high, the derivative through the bits 9.8% off, the
    // custom one 0.5%.
    let k = XS.iter().position(|&x| x == 1.0).unwrap();
    assert!(!close(d_naive[k], -0.5, 0.05), "{}", d_naive[k]);
    assert!(close(d_custom[k], -0.5, 0.01), "{}", d_custom[k]);
}

#[test]
fn wrong_lengths_are_errors_not_panics() {
    let dot_line = line!() + 2;
    let mut dot = autodiff("dot", |x: Slice<f64>, y: Slice<f64>| {
        for_range(0, x.len(), Var::from(0.0), |i, acc| acc + x.at(i) * y.at(i))
    })
    .unwrap();
    let x = [1.0, 2.0];
    let mut short = [0.0; 1];
    let e = dot
        .gradient((Const(&x[..]), Duplicated(&x[..], &mut short[..])))
        .unwrap_err();
    assert!(matches!(e, Error::BadArguments(_)), "{e:?}");
    assert_eq!(
        e.to_string(),
        "argument 2: the shadow has length 1, but the slice has length 2"
    );
    let mut long = [7.0; 3];
    let e = dot
        .gradient((DuplicatedNoNeed(&x[..], &mut long[..]), Const(&x[..])))
        .unwrap_err();
    assert!(
        e.to_string()
            .starts_with("argument 1: the shadow has length 3"),
        "{e}"
    );
    assert_eq!(long, [7.0; 3], "a refused call writes nothing");

    // y shorter than x: out of bounds in the compiled code, a run-time error.
    let mut dx = [0.0; 2];
    let e = dot
        .gradient((Duplicated(&x[..], &mut dx[..]), Const(&short[..])))
        .unwrap_err();
    let Error::Run(r) = &e else {
        panic!("expected a run-time error, got {e:?}")
    };
    // The read `y.at(i)` of the traced code: its Rust position, and the slice.
    assert_eq!(r.operand.as_deref(), Some("parameter 2"));
    assert_eq!((r.pos.file, r.pos.line), (Some(file!()), dot_line));
    let at = format!("load of parameter 2 at {}:{dot_line}:", file!());
    assert!(e.to_string().contains(&at), "{e}");
    let e = dot.call((&x[..], &short[..])).unwrap_err();
    assert!(e.to_string().contains(&at), "{e}");

    // Wrong seeds.
    let e = dot
        .pullback(&[1.0, 2.0], (Const(&x[..]), Const(&x[..])))
        .unwrap_err();
    assert!(matches!(e, Error::BadArguments(_)), "{e:?}");

    // Still usable, with the same patterns.
    let mut dx = [0.0; 2];
    let (v, _) = dot
        .gradient((Duplicated(&x[..], &mut dx[..]), Const(&x[..])))
        .unwrap();
    assert_eq!((v, dx), (5.0, [1.0, 2.0]));
    // Lengths may change from call to call.
    let x3 = [1.0, 2.0, 3.0];
    let mut dx3 = [0.0; 3];
    let (v, _) = dot
        .gradient((Duplicated(&x3[..], &mut dx3[..]), Const(&x3[..])))
        .unwrap();
    assert_eq!((v, dx3), (14.0, x3));
}

fn sq<T: Real>(x: T) -> T {
    x * x
}
fn cube<T: Real>(x: T) -> T {
    x * x * x
}

#[test]
fn tracing_mistakes_and_signatures_that_do_not_fit() {
    // Two Rust functions under one IR name.
    let e = autodiff("clash", |x: Var| {
        func("p", sq::<Var>).call((x,)) + func("p", cube::<Var>).call((x,))
    })
    .unwrap_err();
    assert!(matches!(e, Error::Trace(_)), "{e:?}");
    assert!(e.to_string().starts_with("tracing: "), "{e}");

    // A module traced with a Tracer: several functions, one of them asked for.
    let mut tracer = Tracer::new();
    tracer.function("sq", sq::<Var>).unwrap();
    tracer
        .function("f", |x: Var, y: Var| {
            func("sq", sq::<Var>).call((x,)) + y * 3.0
        })
        .unwrap();
    let traced = tracer.finish().unwrap();
    let mut f = Autodiff::<(Var, Var), Var>::from_traced(traced, "f").unwrap();
    assert_eq!(
        f.gradient((Active(2.0), Active(5.0))).unwrap(),
        (19.0, (4.0, 3.0))
    );

    // The wrong name, the wrong signature.
    let traced = gradlift::trace::trace("sq", sq::<Var>).unwrap();
    let e = Autodiff::<(Var,), Var>::from_traced(traced, "nope").unwrap_err();
    assert!(matches!(e, Error::NoSuchFunction(_)), "{e:?}");
    let traced = gradlift::trace::trace("sq", sq::<Var>).unwrap();
    let e = Autodiff::<(Var, Var), Var>::from_traced(traced, "sq").unwrap_err();
    assert!(matches!(e, Error::BadArguments(_)), "{e:?}");
    assert!(
        e.to_string()
            .starts_with("@sq has signature (f64) -> f64, but "),
        "{e}"
    );
    let traced = gradlift::trace::trace("sq", sq::<Var>).unwrap();
    let e = Autodiff::<(Slice<f64>,), Var>::from_traced(traced, "sq").unwrap_err();
    assert!(e.to_string().ends_with("expects ([f64]) -> f64"), "{e}");
}

#[test]
fn the_examples_run() {
    activities::main().unwrap();
    training::main().unwrap();
    fast_inv_sqrt::main().unwrap();
}

#[test]
fn autodiff_can_move_to_another_thread() {
    fn send<T: Send>(_: &T) {}
    let mut f = autodiff("f", f::<Var>).unwrap();
    send(&f);
    let (x, y) = std::thread::spawn(move || f.gradient((Active(2.0), Active(5.0))).unwrap())
        .join()
        .unwrap();
    assert_eq!((x, y), (19.0, (4.0, 3.0)));
}

/// A generic function of the float methods `sinh cosh asin acos atan atan2 hypot
/// log10 log2 exp2 mul_add`, traced, derived and compiled by `autodiff`: its value
/// is the native function's bit for bit, its gradient the closed form and the
/// central differences of the native function; atan2 in the four quadrants, hypot
/// and atan2 at 1e±200 (where x² + y² overflows or underflows), in f64 and f32.
#[test]
fn the_float_methods_of_the_math_ops_differentiate() {
    /// The sum of atan2(y, x), h, sinh(u), cosh(u), asin(u), acos(u), atan(u),
    /// log10(h), log2(h), exp2(u) and mul_add(u, y, x), with h = hypot(x, y) and
    /// u = x / h in [-1, 1].
    fn math<T: Float>(x: T, y: T) -> T {
        let h = x.hypot(y);
        let u = x / h;
        let a = y.atan2(x) + h + u.sinh() + u.cosh() + u.asin() + u.acos() + u.atan();
        a + h.log10() + h.log2() + u.exp2() + u.mul_add(y, x)
    }
    /// Its gradient, term by term.
    fn closed(x: f64, y: f64) -> (f64, f64) {
        let h = x.hypot(y);
        let u = x / h;
        // du/dx = y² / h³, du/dy = -x y / h³; dh = (x, y) / h.
        let (ux, uy) = (y / h * (y / h) / h, -(x / h) * (y / h) / h);
        let (hx, hy) = (x / h, y / h);
        let r = (1.0 - u) * (1.0 + u);
        let du = u.cosh() + u.sinh() + 1.0 / r.sqrt() - 1.0 / r.sqrt()
            + 1.0 / (1.0 + u * u)
            + u.exp2() * 2f64.ln()
            + y;
        let dh = 1.0 + 1.0 / (h * 10f64.ln()) + 1.0 / (h * 2f64.ln());
        // d atan2(y, x) = (-y, x) / h².
        let (ax, ay) = (-(y / h) / h, (x / h) / h);
        // mul_add(u, y, x) = u y + x: + (0 via u) y-direct u and x-direct 1.
        (ax + dh * hx + du * ux + 1.0, ay + dh * hy + du * uy + u)
    }
    let mut g = autodiff("math", math::<Var>).unwrap();
    let fd = |f: &dyn Fn(f64) -> f64, x: f64| {
        let h = 1e-6 * x.abs();
        (f(x + h) - f(x - h)) / (2.0 * h)
    };
    for (x, y) in [
        (0.8, 1.3),
        (-0.8, 1.3),
        (-0.8, -1.3),
        (0.8, -1.3),
        (3e200, -4e200),
        (-3e-200, 4e-200),
    ] {
        let (v, (dx, dy)) = g.gradient((Active(x), Active(y))).unwrap();
        assert_eq!(
            v.to_bits(),
            math::<f64>(x, y).to_bits(),
            "value at ({x}, {y})"
        );
        let (cx, cy) = closed(x, y);
        assert!(
            close(dx, cx, 1e-12) && close(dy, cy, 1e-12),
            "({x}, {y}): {dx} {dy} vs {cx} {cy}"
        );
        // Central differences of the native function (relative steps: any scale).
        let (fx, fy) = (fd(&|x| math(x, y), x), fd(&|y| math(x, y), y));
        assert!(
            close(dx, fx, 1e-6) && close(dy, fy, 1e-6),
            "({x}, {y}): {dx} {dy} vs FD {fx} {fy}"
        );
    }
    // In f32: the value bit for bit, the gradient against the f64 closed form.
    let mut g32 = autodiff("math32", math::<Var<f32>>).unwrap();
    for (x, y) in [(0.8f32, 1.3f32), (-0.8, -1.3), (0.8, -1.3), (3e30, -4e30)] {
        let (v, (dx, dy)) = g32.gradient((Active(x), Active(y))).unwrap();
        assert_eq!(
            v.to_bits(),
            math::<f32>(x, y).to_bits(),
            "value at ({x}, {y})"
        );
        let (cx, cy) = closed(f64::from(x), f64::from(y));
        assert!(
            close(f64::from(dx), cx, 1e-4) && close(f64::from(dy), cy, 1e-4),
            "f32 ({x}, {y}): {dx} {dy} vs {cx} {cy}"
        );
    }
}
