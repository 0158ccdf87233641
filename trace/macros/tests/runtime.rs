//! The generated functions' run time: `NAME` called from many threads at once,
//! `NAME_try`'s errors and `NAME`'s panics (worded as Rust's, naming the function
//! and its line), and `NAME_grad`'s fresh gradients.

// Index loops are what the translated subset has.
#![allow(clippy::needless_range_loop)]

use gradlift::Error;
use gradlift::autodiff_reverse;
use gradlift::ir::engine::ErrorKind;

/// sum_i sin(x_i t): d/dx_i = t cos(x_i t), d/dt = sum_i x_i cos(x_i t).
#[autodiff_reverse(d_sin_sum, Duplicated, Active, Active)]
fn sin_sum(x: &[f64], t: f64) -> f64 {
    let mut s = 0.0;
    for i in 0..x.len() {
        s += (x[i] * t).sin();
    }
    s
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-12 * (1.0 + b.abs())
}

/// Checks `d_sin_sum` at `(x, t)` with the seed `seed` against the closed form.
fn check_sin_sum(x: &[f64], t: f64, seed: f64) {
    let mut dx = vec![0.0; x.len()];
    let (v, dt) = d_sin_sum(x, &mut dx, t, seed);
    let want_v: f64 = x.iter().map(|&xi| (xi * t).sin()).sum();
    let want_dt: f64 = x.iter().map(|&xi| xi * (xi * t).cos()).sum::<f64>() * seed;
    assert!(close(v, want_v), "value {v} != {want_v}");
    // The IR's `sin` is gradlift's own (`gradlift::ir::math::sin`, within 1 ulp
    // of the platform's): the native function's value to the last bits.
    let native = sin_sum(x, t);
    assert!(
        v == native || (v - native).abs() <= 1e-14 * (1.0 + native.abs()),
        "value {v:e}, native {native:e}"
    );
    assert!(close(dt, want_dt), "dt {dt} != {want_dt}");
    for (i, &xi) in x.iter().enumerate() {
        let want = seed * t * (xi * t).cos();
        assert!(close(dx[i], want), "dx[{i}] {} != {want}", dx[i]);
    }
}

#[test]
fn eight_threads_at_once() {
    // The first calls race too: one traces and compiles, the others wait for it.
    std::thread::scope(|s| {
        for k in 0..8 {
            s.spawn(move || {
                for round in 0..50 {
                    let n = 1 + (k + round) % 7;
                    let x: Vec<f64> = (0..n).map(|i| 0.1 * (i + k) as f64 - 0.3).collect();
                    let t = 0.5 + 0.25 * k as f64 + 0.01 * round as f64;
                    check_sin_sum(&x, t, 1.0 + k as f64);
                }
            });
        }
    });
}

#[test]
fn shadows_accumulate_across_threads_independently() {
    let x = [0.3, -1.2, 2.0];
    std::thread::scope(|s| {
        for k in 0..8 {
            let x = &x;
            s.spawn(move || {
                let t = k as f64 * 0.5;
                let mut dx = [0.0; 3];
                for _ in 0..3 {
                    d_sin_sum(x, &mut dx, t, 1.0);
                }
                for i in 0..3 {
                    assert!(close(dx[i], 3.0 * t * (x[i] * t).cos()));
                }
            });
        }
    });
}

const AT_LINE: u32 = line!() + 2;
#[autodiff_reverse(d_at, Duplicated, Const, Active)]
fn at(x: &[f64], k: usize) -> f64 {
    x[k] * x[k]
}

#[test]
fn try_returns_the_value_and_gradient() {
    let x = [1.0, 2.0, 3.0];
    let mut dx = [0.0; 3];
    assert_eq!(d_at_try(&x, &mut dx, 1, 1.0).unwrap(), 4.0);
    assert_eq!(dx, [0.0, 4.0, 0.0]);
}

#[test]
fn try_returns_an_index_out_of_bounds() {
    let x = [1.0, 2.0, 3.0];
    let mut dx = [0.0; 3];
    match d_at_try(&x, &mut dx, 5, 1.0) {
        Err(Error::Run(e)) => {
            assert_eq!(e.kind, ErrorKind::OutOfBounds { index: 5, len: 3 });
            // The read `x[k]`, where it is written, and the slice by its name.
            assert_eq!(e.op, "load");
            assert_eq!(e.operand.as_deref(), Some("%x"));
            assert_eq!(
                (e.pos.file, e.pos.line, e.pos.col),
                (Some(file!()), AT_LINE + 1, 5)
            );
        }
        r => panic!("expected an out-of-bounds error, got {r:?}"),
    }
    // The function's own panic, for comparison.
    let own = std::panic::catch_unwind(|| at(&x, 5)).unwrap_err();
    assert_eq!(
        own.downcast_ref::<String>().unwrap(),
        "index out of bounds: the len is 3 but the index is 5"
    );
}

#[test]
fn try_returns_a_shadow_of_the_wrong_length() {
    let x = [1.0, 2.0, 3.0];
    let mut dx = [0.0; 2];
    match d_at_try(&x, &mut dx, 1, 1.0) {
        Err(Error::BadArguments(m)) => {
            assert_eq!(m, "the shadow of `x` has length 2 but `x` has length 3")
        }
        r => panic!("expected a bad-arguments error, got {r:?}"),
    }
}

#[test]
#[should_panic(
    expected = "index out of bounds: the len is 3 but the index is 5, reading `x` at trace/macros/tests/runtime.rs:"
)]
fn panics_on_an_index_out_of_bounds() {
    let x = [1.0, 2.0, 3.0];
    let mut dx = [0.0; 3];
    d_at(&x, &mut dx, 5, 1.0);
}

#[test]
#[should_panic(
    expected = "the shadow of `x` has length 2 but `x` has length 3 (in `at` at trace/macros/tests/runtime.rs:"
)]
fn panics_on_a_shadow_of_the_wrong_length() {
    let x = [1.0, 2.0, 3.0];
    let mut dx = [0.0; 2];
    d_at(&x, &mut dx, 1, 1.0);
}

#[test]
fn the_panic_names_the_statement_the_slice_and_the_function() {
    let x = [1.0, 2.0, 3.0];
    let mut dx = [0.0; 3];
    let p = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| d_at(&x, &mut dx, 5, 1.0)))
        .unwrap_err();
    let m = p.downcast_ref::<String>().unwrap();
    assert_eq!(
        *m,
        format!(
            "index out of bounds: the len is 3 but the index is 5, reading `x` at {}:{}:5 (in `at` at {}:{AT_LINE}, differentiated by `d_at`)",
            file!(),
            AT_LINE + 1,
            file!()
        )
    );
}

/// The derivative through a `Const` writable slice would be lost: deriving fails.
#[autodiff_reverse(d_lost, Active, Const, Active)]
fn lost(a: f64, buf: &mut [f64]) -> f64 {
    buf[0] = a * a;
    buf[0] + 1.0
}

#[test]
fn try_returns_a_derivation_error_on_every_call() {
    let mut b = [0.0];
    assert_eq!(lost(3.0, &mut b), 10.0);
    for _ in 0..2 {
        match d_lost_try(3.0, &mut b, 1.0) {
            Err(Error::Derive(_)) => {}
            r => panic!("expected a derivation error, got {r:?}"),
        }
    }
}

#[test]
fn grad_is_name_with_zeroed_shadows() {
    let x = [0.3, -1.2, 2.0];
    let t = 0.7;
    let (v, dx, dt): (f64, Vec<f64>, f64) = d_sin_sum_grad(&x, t);
    let mut dx2 = [0.0; 3];
    let (v2, dt2) = d_sin_sum(&x, &mut dx2, t, 1.0);
    assert_eq!((v, dx.as_slice(), dt), (v2, &dx2[..], dt2));
}

/// y <- y + a x[0] b; a and b active, x and y duplicated, no result.
#[autodiff_reverse(d_mixed, Active, Duplicated, Const, Duplicated, Active)]
fn mixed(a: f64, x: &[f64], n: usize, y: &mut f64, b: f64) {
    *y += a * x[0] * b * (n as f64);
}

#[test]
fn grad_of_every_kind_of_parameter() {
    let x = [2.0, 5.0];
    let mut y = 1.0;
    // Fresh shadows are zero, so the derivatives through `y` (its shadow is the seed
    // of what the function leaves in it) are zero, as `d_mixed` with zeroed shadows.
    let (da, dx, dy, db): (f64, Vec<f64>, f64, f64) = d_mixed_grad(3.0, &x, 1, &mut y, 4.0);
    assert_eq!(
        (da, dx.as_slice(), dy, db),
        (0.0, &[0.0, 0.0][..], 0.0, 0.0)
    );
    assert_eq!(y, 1.0 + 24.0);
    let (mut dx2, mut dy2, mut y2) = ([0.0; 2], 0.0, 1.0);
    assert_eq!(
        d_mixed(3.0, &x, &mut dx2, 1, &mut y2, &mut dy2, 4.0),
        (0.0, 0.0)
    );
    assert_eq!(y2, y);
    let mut y3 = 1.0;
    mixed(3.0, &x, 1, &mut y3, 4.0);
    assert_eq!(y3, y);
}

/// Two active parameters: `NAME_grad` returns the value and both derivatives.
#[autodiff_reverse(d_prod, Active, Active, Active)]
fn prod(a: f64, b: f64) -> f64 {
    a * b * b
}

#[test]
fn grad_of_active_scalars() {
    assert_eq!(prod(3.0, 2.0), 12.0);
    assert_eq!(d_prod_grad(3.0, 2.0), (12.0, 4.0, 12.0));
    assert_eq!(d_prod_grad(3.0, 2.0), d_prod(3.0, 2.0, 1.0));
}

// Errors deep in loops, in writes, in helpers and in integer arithmetic name the
// statement that failed, as the native function's panic would.

const NLL_LINE: u32 = line!() + 2;
#[autodiff_reverse(d_nll, Duplicated, Duplicated, Active)]
fn nll(x: &[f64], w: &[f64]) -> f64 {
    let mut s = 0.0;
    for i in 0..w.len() {
        let z = w[i] * x[i];
        s += (1.0 + z.exp()).ln();
    }
    s
}

#[test]
fn a_slice_shorter_than_the_loop_names_the_slice_and_the_line() {
    // The case: `x` is shorter than the loop over `w`.
    let (x, w) = ([1.0; 5], [0.5; 6]);
    let (mut dx, mut dw) = ([0.0; 5], [0.0; 6]);
    let e = match d_nll_try(&x, &mut dx, &w, &mut dw, 1.0) {
        Err(Error::Run(e)) => e,
        r => panic!("expected an out-of-bounds error, got {r:?}"),
    };
    assert_eq!(e.kind, ErrorKind::OutOfBounds { index: 5, len: 5 });
    assert_eq!(e.operand.as_deref(), Some("%x"));
    assert_eq!((e.pos.file, e.pos.line), (Some(file!()), NLL_LINE + 3));
    // `x[i]` stands at column 24 of `        let z = w[i] * x[i];`.
    assert_eq!(e.pos.col, 24);
    let p = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        d_nll(&x, &mut dx, &w, &mut dw, 1.0)
    }))
    .unwrap_err();
    let m = p.downcast_ref::<String>().unwrap();
    assert!(
        m.starts_with(&format!(
            "index out of bounds: the len is 5 but the index is 5, reading `x` at {}:{}:24 (in `nll`",
            file!(),
            NLL_LINE + 3
        )),
        "{m}"
    );
    // The native function panics on the same read.
    assert!(std::panic::catch_unwind(|| nll(&x, &w)).is_err());
}

const SCATTER_LINE: u32 = line!() + 2;
#[autodiff_reverse(d_scatter, Duplicated, Duplicated, Const)]
fn scatter(x: &[f64], out: &mut [f64], k: usize) {
    for i in 0..x.len() {
        out[i + k] += x[i] * x[i];
    }
}

#[test]
fn a_write_out_of_bounds_names_the_written_slice() {
    let x = [1.0, 2.0];
    let (mut dx, mut out, mut dout) = ([0.0; 2], [0.0; 2], [1.0; 2]);
    let e = match d_scatter_try(&x, &mut dx, &mut out, &mut dout, 1) {
        Err(Error::Run(e)) => e,
        r => panic!("expected an out-of-bounds error, got {r:?}"),
    };
    assert_eq!(e.kind, ErrorKind::OutOfBounds { index: 2, len: 2 });
    // `out[i + k] += ..` reads `out` first, at the target's position.
    assert_eq!(e.operand.as_deref(), Some("%out"));
    assert_eq!(
        (e.pos.file, e.pos.line, e.pos.col),
        (Some(file!()), SCATTER_LINE + 2, 9)
    );
    // The native function panics on the same write.
    assert!(std::panic::catch_unwind(|| scatter(&x, &mut [0.0; 2], 1)).is_err());
}

const HELPER_LINE: u32 = line!() + 2;
#[gradlift::differentiable]
fn third(v: &[f64]) -> f64 {
    v[2] * 2.0
}

#[autodiff_reverse(d_uses_helper, Duplicated, Active)]
fn uses_helper(x: &[f64]) -> f64 {
    third(x) + x[0]
}

#[test]
fn an_error_in_a_helper_names_the_helpers_line() {
    let x = [1.0, 2.0];
    let mut dx = [0.0; 2];
    let e = match d_uses_helper_try(&x, &mut dx, 1.0) {
        Err(Error::Run(e)) => e,
        r => panic!("expected an out-of-bounds error, got {r:?}"),
    };
    assert_eq!(e.kind, ErrorKind::OutOfBounds { index: 2, len: 2 });
    assert_eq!((e.pos.file, e.pos.line), (Some(file!()), HELPER_LINE + 1));
    assert!(std::panic::catch_unwind(|| uses_helper(&x)).is_err());
    assert_eq!(uses_helper(&[1.0, 2.0, 3.0]), 7.0);
}

const DIV_LINE: u32 = line!() + 2;
#[autodiff_reverse(d_per, Active, Const, Active)]
fn per(a: f64, n: usize) -> f64 {
    let k = 12 / n;
    a * k as f64
}

#[test]
fn an_integer_division_by_zero_names_its_line() {
    assert_eq!(d_per(2.0, 4, 1.0), (6.0, 3.0));
    assert_eq!(per(2.0, 4), 6.0);
    assert!(std::panic::catch_unwind(|| per(2.0, 0)).is_err());
    let p = std::panic::catch_unwind(|| d_per(2.0, 0, 1.0)).unwrap_err();
    let m = p.downcast_ref::<String>().unwrap();
    assert!(
        m.starts_with(&format!(
            "attempt to divide by zero, at {}:{}:",
            file!(),
            DIV_LINE + 1
        )),
        "{m}"
    );
}
