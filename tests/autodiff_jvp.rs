//! Forward mode through `autodiff`: `Autodiff::jvp`, `jvp_only`, `jvp_const` and
//! `share_jvp` with `Dual` and `Const` arguments, against independent oracles:
//!
//! - closed forms of the derivatives, and central finite differences of the same
//!   generic code run natively on `f64`;
//! - reverse mode (`Autodiff::gradient`) on the same traced function, through the
//!   dot-product identity `<w, J v> = <J^T w, v>`: a forward tangent along `v`
//!   against a gradient with the seed `w` (a function's tangent against its
//!   gradient dotted with `v`, a writable slice's tangent dotted with `w` against
//!   the shadow it leaves);
//! - and errors: wrong tangent lengths, a `SharedJvp` called with another pattern
//!   or return, a forward rule that cannot be derived; none panics, and the
//!   function stays usable.

use gradlift::trace::prelude::*;
use gradlift::{Active, CallState, Const, Dual, DualReturn, Duplicated, Error, autodiff};

fn close(a: f64, b: f64, rel: f64) -> bool {
    (a - b).abs() <= rel * a.abs().max(b.abs()).max(1.0)
}

/// Central finite difference of `g` at 0 (a directional derivative, `g(t) = f(x + t v)`).
fn fd(g: impl Fn(f64) -> f64) -> f64 {
    let h = 1e-6;
    (g(h) - g(-h)) / (2.0 * h)
}

/// `x sin y + exp(x x)`.
fn g<T: Real>(x: T, y: T) -> T {
    x * y.sin() + (x * x).exp()
}

/// `sum_i (w_i x_i - t)^2`, a loop over the slices.
fn loss<T: Real>(x: T::Slice<'_>, w: T::Slice<'_>, t: T) -> T {
    for_range(0, x.len(), T::lit(0.0), |i, acc| {
        let r = w.at(i) * x.at(i) - t;
        acc + r * r
    })
}

/// `x_i <- x_i^2 k` in place (a branch on the sign of `x_i`: `|x_i|^3 k` for
/// negative ones), returning the sum of the new values.
fn square_in_place<T: Real>(mut x: T::SliceMut<'_>, k: T) -> T {
    for_range(0, x.len(), T::lit(0.0), |i, acc| {
        let xi = x.at(i);
        let v = cond(xi.lt(0.0), || -(xi * xi * xi) * k, || xi * xi * k);
        x.set(i, v);
        acc + v
    })
}

#[test]
fn scalars_against_the_closed_form_and_finite_differences() {
    let mut f = autodiff("g", g::<Var>).unwrap();
    for (x, y) in [(0.5, 2.0), (-1.25, 0.3), (0.0, -3.0)] {
        let (dgdx, dgdy) = (y.sin() + 2.0 * x * (x * x).exp(), x * y.cos());
        for (vx, vy) in [(1.0, 0.0), (0.0, 1.0), (0.5, -2.0)] {
            let (value, tangent) = f.jvp((Dual(x, vx), Dual(y, vy))).unwrap();
            assert_eq!(value, g(x, y));
            let want = dgdx * vx + dgdy * vy;
            assert!(close(tangent, want, 1e-14), "{tangent} != {want}");
            let by_fd = fd(|t| g(x + t * vx, y + t * vy));
            assert!(close(tangent, by_fd, 1e-7), "{tangent} != fd {by_fd}");
            // The tangent alone: the same number.
            assert_eq!(f.jvp_only((Dual(x, vx), Dual(y, vy))).unwrap(), tangent);
        }
        // A constant y: no tangent for it.
        let (value, tangent) = f.jvp((Dual(x, 1.0), Const(y))).unwrap();
        assert_eq!((value, tangent), (g(x, y), dgdx));
        let (_, tangent) = f.jvp((Const(x), Dual(y, 1.0))).unwrap();
        assert_eq!(tangent, dgdy);
        // Nothing dual: a zero tangent.
        assert_eq!(f.jvp((Const(x), Const(y))).unwrap(), (g(x, y), 0.0));
        // A constant return: the value alone.
        assert_eq!(f.jvp_const((Dual(x, 1.0), Dual(y, 1.0))).unwrap(), g(x, y));
    }
    // One compiled rule per pattern, kept.
    assert_eq!(
        f.jvp_patterns(),
        ["DD_D", "DD_O", "DC_D", "CD_D", "CC_D", "DD_C"]
    );
    assert!(f.patterns().is_empty(), "no gradient was compiled");
}

#[test]
fn slices_with_a_loop_against_the_gradient() {
    let mut f = autodiff("loss", loss::<Var>).unwrap();
    let x = [1.0, -2.0, 0.5, 3.0];
    let w = [0.25, 1.5, -1.0, 0.75];
    let t = 0.4;
    let (dw, dt) = ([1.0, -0.5, 2.0, 0.25], -1.5);
    let native = |s: f64| {
        let w: Vec<f64> = w.iter().zip(&dw).map(|(w, d)| w + s * d).collect();
        loss::<f64>(&x, &w, t + s * dt)
    };
    // Read-only slice tangents: `&dw` (a `&mut` one is accepted too).
    let (value, tangent) = f
        .jvp((Const(&x[..]), Dual(&w[..], &dw[..]), Dual(t, dt)))
        .unwrap();
    assert_eq!(value, native(0.0));
    // The closed form: sum_i 2 r_i (x_i dw_i - dt).
    let want: f64 = (0..4)
        .map(|i| 2.0 * (w[i] * x[i] - t) * (x[i] * dw[i] - dt))
        .sum();
    assert!(close(tangent, want, 1e-14), "{tangent} != {want}");
    assert!(close(tangent, fd(native), 1e-7));
    let mut dw_mut = dw;
    let again = f
        .jvp((Const(&x[..]), Dual(&w[..], &mut dw_mut[..]), Dual(t, dt)))
        .unwrap();
    assert_eq!(again, (value, tangent));
    assert_eq!(dw_mut, dw, "a read-only slice's tangent is only read");

    // The dot-product identity with reverse mode: J v = grad . v.
    let mut gw = [0.0; 4];
    let (rv, ((), (), gt)) = f
        .gradient((Const(&x[..]), Duplicated(&w[..], &mut gw[..]), Active(t)))
        .unwrap();
    assert_eq!(rv, value);
    let dot: f64 = gw.iter().zip(&dw).map(|(g, d)| g * d).sum::<f64>() + gt * dt;
    assert!(close(tangent, dot, 1e-13), "{tangent} != {dot}");
}

#[test]
fn a_writable_slice_and_a_branch_against_the_gradient() {
    let mut f = autodiff("square_in_place", square_in_place::<Var>).unwrap();
    let x0 = [1.5, -2.0, 0.25, -0.5];
    let k = 0.75;
    let (v, dk) = ([0.5, 1.0, -2.0, 0.125], 0.25);
    let (mut x, mut dx) = (x0, v);
    let (value, tangent) = f.jvp((Dual(&mut x[..], &mut dx[..]), Dual(k, dk))).unwrap();
    // The slice is updated as the function updates it, and its tangent is
    // overwritten with that of the new contents.
    let mut native = x0;
    assert_eq!(value, square_in_place::<f64>(&mut native, k));
    assert_eq!(x, native);
    for i in 0..4 {
        let xi = x0[i];
        let want = if xi < 0.0 {
            -3.0 * xi * xi * v[i] * k - xi * xi * xi * dk
        } else {
            2.0 * xi * v[i] * k + xi * xi * dk
        };
        assert!(close(dx[i], want, 1e-14), "dx[{i}] {} != {want}", dx[i]);
    }
    assert!(close(tangent, dx.iter().sum(), 1e-14));

    // <w, J v> = <J^T w, v> over (x, k) -> (new x, sum): the reverse shadow of x
    // starts as w (the seed of the new contents) and ends as J^T w's x part.
    let w = [0.3, -1.0, 2.0, 0.5];
    let seed = 0.7;
    let (mut xr, mut shadow) = (x0, w);
    let (_, ((), gk)) = f
        .pullback(
            &[seed],
            (Duplicated(&mut xr[..], &mut shadow[..]), Active(k)),
        )
        .unwrap();
    assert_eq!(xr, native);
    let lhs: f64 = w.iter().zip(&dx).map(|(a, b)| a * b).sum::<f64>() + seed * tangent;
    let rhs: f64 = shadow.iter().zip(&v).map(|(a, b)| a * b).sum::<f64>() + gk * dk;
    assert!(close(lhs, rhs, 1e-13), "{lhs} != {rhs}");

    // A constant return: the value, and the slice's tangent still.
    let (mut x, mut dx2) = (x0, v);
    let value2 = f
        .jvp_const((Dual(&mut x[..], &mut dx2[..]), Dual(k, dk)))
        .unwrap();
    assert_eq!((value2, x, dx2), (value, native, dx));
    // The slice constant while k is dual: it would hold values that vary, and
    // they are read back, so the derivation refuses (as reverse mode does) rather
    // than lose their tangents.
    let mut x = x0;
    let e = f.jvp((Const(&mut x[..]), Dual(k, 1.0))).unwrap_err();
    assert!(
        matches!(
            &e,
            Error::Derive(gradlift::adjoint::AdError::ConstWriteForward { .. })
        ),
        "{e:?}"
    );
    let e = f.gradient((Const(&mut x[..]), Active(k))).unwrap_err();
    assert!(
        matches!(
            &e,
            Error::Derive(gradlift::adjoint::AdError::ConstWrite { .. })
        ),
        "{e:?}"
    );
    // Both constant: the value, a zero tangent, the slice updated.
    let (value3, tangent3) = f.jvp((Const(&mut x[..]), Const(k))).unwrap();
    assert_eq!((value3, tangent3, x), (value, 0.0, native));
}

#[test]
fn several_results_f32_and_integers() {
    // Two float results: a tangent each.
    let mut two = autodiff("two", |x: Var, y: Var| (x * y, x.sin())).unwrap();
    let ((a, b), (da, db)) = two.jvp((Dual(2.0, 1.0), Dual(3.0, 0.5))).unwrap();
    assert_eq!((a, b), (6.0, 2f64.sin()));
    assert_eq!((da, db), (3.0 + 2.0 * 0.5, 2f64.cos()));
    assert_eq!(
        two.jvp_only((Dual(2.0, 1.0), Const(3.0))).unwrap(),
        (3.0, 2f64.cos())
    );
    // An integer result has no tangent: `()` in its place.
    let mut mixed = autodiff("mixed", |x: Var, n: Var<i64>| (x * Var::from_int(n), n + 1)).unwrap();
    let ((v, m), (dv, ())) = mixed.jvp((Dual(1.5, 2.0), Const(4))).unwrap();
    assert_eq!((v, m, dv), (6.0, 5, 8.0));
    // f32.
    let mut cube = autodiff("cube32", |x: Var<f32>| x * x * x).unwrap();
    assert_eq!(cube.jvp((Dual(2.0f32, 0.5f32),)).unwrap(), (8.0f32, 6.0f32));
    let x = [1.0f32, 2.0];
    let mut sum = autodiff("sum32", |x: Slice<f32>| x.at(0) * x.at(1)).unwrap();
    assert_eq!(
        sum.jvp((Dual(&x[..], &[1.0f32, 1.0][..]),)).unwrap(),
        (2.0f32, 3.0f32)
    );
    // A function of nothing but constants, returning `()`.
    let mut set = autodiff("set", |mut out: SliceMut<f64>, x: Var| out.set(0, x * x)).unwrap();
    let (mut out, mut dout) = ([0.0], [9.0]);
    let ((), ()) = set
        .jvp((Dual(&mut out[..], &mut dout[..]), Dual(3.0, 1.0)))
        .unwrap();
    assert_eq!((out, dout), ([9.0], [6.0]));
    assert_eq!(set.jvp_patterns(), ["DD_D"]);
}

#[test]
fn shared_forward_rules_on_threads() {
    let mut f = autodiff("loss", loss::<Var>).unwrap();
    let d = f
        .share_jvp::<(Const<&[f64]>, Dual<&[f64], &[f64]>, Dual)>(DualReturn::Dual)
        .unwrap();
    // `Autodiff::jvp` then finds the same pattern compiled.
    assert_eq!(f.jvp_patterns(), ["CDD_D"]);
    assert_eq!(d.ret(), DualReturn::Dual);
    assert!(format!("{d:?}").contains("CDD_D"));
    std::thread::scope(|s| {
        for k in 0..4 {
            let d = d.clone();
            s.spawn(move || {
                let mut state = CallState::new();
                for n in 1..20 {
                    let x: Vec<f64> = (0..n).map(|i| (i + k) as f64 * 0.1).collect();
                    let w = vec![0.5; n];
                    let dw = vec![0.0; n];
                    let (value, dt) = d
                        .jvp(
                            &mut state,
                            (Const(&x[..]), Dual(&w[..], &dw[..]), Dual(1.0, 1.0)),
                        )
                        .unwrap();
                    let want: f64 = x.iter().map(|xi| -2.0 * (0.5 * xi - 1.0)).sum();
                    assert_eq!(value, loss::<f64>(&x, &w, 1.0));
                    assert!(close(dt, want, 1e-13));
                }
            });
        }
    });
    // Another pattern or return is an error, not a wrong answer.
    let mut state = CallState::new();
    let (x, w) = ([1.0], [1.0]);
    let e = d
        .jvp(&mut state, (Const(&x[..]), Const(&w[..]), Dual(1.0, 1.0)))
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "the call is CCD_D, but this forward rule was compiled for CDD_D"
    );
    let e = d
        .jvp_only(
            &mut state,
            (Const(&x[..]), Dual(&w[..], &w[..]), Dual(1.0, 1.0)),
        )
        .unwrap_err();
    assert!(matches!(e, Error::BadArguments(_)), "{e}");
    assert_eq!(
        e.to_string(),
        "the call is CDD_O, but this forward rule was compiled for CDD_D"
    );
}

#[test]
fn errors_leave_the_function_usable() {
    let mut f = autodiff("loss", loss::<Var>).unwrap();
    let (x, w) = ([1.0, 2.0], [0.5, 0.5]);
    let e = f
        .jvp((Const(&x[..]), Dual(&w[..], &[1.0][..]), Const(0.0)))
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "argument 2: the tangent has length 1, but the slice has length 2"
    );
    // A run-time error of the compiled rule: the loop runs over x's indices, so a
    // shorter w is read out of bounds.
    let e = f
        .jvp((Const(&x[..]), Dual(&w[..1], &[1.0][..]), Const(0.0)))
        .unwrap_err();
    let Error::Run(r) = &e else {
        panic!("expected a run-time error, got {e}")
    };
    assert!(
        r.to_string().contains("index 1 out of bounds for length 1"),
        "{r}"
    );
    // And the next call is right.
    let (v, d) = f
        .jvp((Const(&x[..]), Dual(&w[..], &[1.0, 0.0][..]), Const(0.0)))
        .unwrap();
    assert_eq!((v, d), (loss::<f64>(&x, &w, 0.0), 2.0 * 0.5 * 1.0));

    // A call of a function with a reverse-mode custom derivative only: forward mode
    // cannot use it, and says which declaration it needs.
    let mut tracer = gradlift::trace::Tracer::new();
    tracer
        .function("h", |x: Var| {
            func("sq", |x: Var| x * x)
                .vjp_native("sq_vjp", |x, dy, dx| dx[0] = 2.0 * x[0] * dy[0])
                .call((x,))
        })
        .unwrap();
    let mut h =
        gradlift::Autodiff::<(Var,), Var>::from_traced(tracer.finish().unwrap(), "h").unwrap();
    // Derived lazily: the call fails when it runs, naming the declaration.
    let e = h.jvp((Dual(3.0, 1.0),)).unwrap_err();
    assert!(matches!(e, Error::Run(_)), "{e}");
    assert!(e.to_string().contains("declare `jvp @sq = @RULE`"), "{e}");
    // Reverse mode still works on it.
    assert_eq!(h.gradient((Active(3.0),)).unwrap(), (9.0, (6.0,)));
}
