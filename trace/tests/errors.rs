//! Every tracing mistake is an error at trace time that names the function and, for a
//! mistake in an operation, the Rust line: never a panic, never invalid IR. Mistakes the
//! type system catches (a store into a read-only slice, arms of different Rust types)
//! are `compile_fail` doctests in `slice.rs` and `flow.rs`.

use std::cell::Cell;

use gradlift_trace::prelude::*;
use gradlift_trace::{TraceError, Tracer, trace};

/// Asserts that `err` is the variant `pat`, and that its message names `func` and,
/// when `line` is given, this file at that line.
#[track_caller]
fn check_message(err: &TraceError, func: &str, line: Option<u32>) {
    let msg = err.to_string();
    assert!(msg.contains(&format!("@{func}")), "{msg}");
    if let Some(line) = line {
        assert!(msg.contains(&format!("errors.rs:{line}:")), "{msg}");
    }
}

#[test]
fn a_value_kept_from_an_earlier_trace() {
    let kept: Cell<Option<Var>> = Cell::new(None);
    trace("first", |x: Var| {
        kept.set(Some(x));
        x
    })
    .unwrap();
    let stale = kept.get().unwrap();
    let line = line!() + 1;
    let err = trace("second", move |y: Var| y + stale).unwrap_err();
    assert!(
        matches!(err, TraceError::ForeignValue { op: "+", .. }),
        "{err:?}"
    );
    check_message(&err, "second", Some(line));
}

#[test]
fn a_caller_value_captured_by_a_callee() {
    let f = |x: Var, y: Var| {
        // The callee closes over the caller's `x` instead of taking it as an argument.
        let g = move |z: Var| z * x;
        func("g", g).call((y,))
    };
    let err = trace("f", f).unwrap_err();
    assert!(matches!(err, TraceError::ForeignValue { .. }), "{err:?}");
    check_message(&err, "g", None);
    assert!(err.to_string().contains("pass it as an argument"), "{err}");
}

#[test]
fn a_value_leaked_out_of_a_cond_arm() {
    let err = trace("leak", |x: Var| {
        let mut inner = x;
        let y = cond(
            x.gt(0.0),
            || {
                inner = x.sin(); // made in the arm, kept in a captured variable
                x
            },
            || -x,
        );
        y + inner
    })
    .unwrap_err();
    assert!(
        matches!(err, TraceError::OutOfScope { op: "+", .. }),
        "{err:?}"
    );
    check_message(&err, "leak", None);
}

#[test]
fn a_value_leaked_out_of_a_counted_loop() {
    fn leak<T: Real>(x: T::Slice<'_>) -> T {
        let mut last = T::lit(0.0);
        let s = for_range(0, x.len(), T::lit(0.0), |i, acc| {
            last = x.at(i);
            acc + last
        });
        s * last
    }
    let err = trace("leak", leak::<Var>).unwrap_err();
    assert!(
        matches!(err, TraceError::OutOfScope { op: "*", .. }),
        "{err:?}"
    );
    // Natively the same code is fine.
    assert_eq!(leak::<f64>(&[1.0, 2.0]), 6.0);
}

#[test]
fn a_value_leaked_out_of_a_while_loop() {
    let err = trace("leak", |x: Var| {
        let mut seen = x;
        let y = while_loop(
            x,
            |&v| v.lt(10.0),
            |v| {
                seen = v * 3.0;
                v * 2.0
            },
        );
        y - seen
    })
    .unwrap_err();
    assert!(matches!(err, TraceError::OutOfScope { .. }), "{err:?}");
}

#[test]
fn a_value_from_the_while_test_used_in_the_body() {
    let err = trace("leak", |x: Var| {
        let probe = Cell::new(None);
        while_loop(
            x,
            |&v| {
                let t = v * 0.5;
                probe.set(Some(t));
                t.lt(1.0)
            },
            |v| v + probe.get().unwrap(),
        )
    })
    .unwrap_err();
    assert!(matches!(err, TraceError::OutOfScope { .. }), "{err:?}");
}

#[test]
fn arms_of_different_shapes() {
    // Vectors of different lengths.
    let err = trace("arms", |x: Var| {
        let v = cond(x.gt(0.0), || vec![x, x], || vec![x]);
        v[0]
    })
    .unwrap_err();
    assert!(matches!(err, TraceError::ArmMismatch { .. }), "{err:?}");
    assert!(
        err.to_string().contains("2 values against one of 1"),
        "{err}"
    );

    // A plain number that depends on the traced condition.
    let line = line!() + 2;
    let err = trace("arms", |x: Var| {
        let (y, k) = cond(x.gt(0.0), || (x, 1.0), || (-x, 2.0));
        y * k
    })
    .unwrap_err();
    assert!(matches!(err, TraceError::ArmMismatch { .. }), "{err:?}");
    check_message(&err, "arms", Some(line));
    assert!(err.to_string().contains("plain Rust number"), "{err}");
}

#[test]
fn select_of_different_shapes() {
    let err = trace("sel", |x: Var| {
        let v = x.gt(0.0).select(vec![x], vec![x, x]);
        v[0]
    })
    .unwrap_err();
    assert!(matches!(err, TraceError::ArmMismatch { .. }), "{err:?}");
}

#[test]
fn loop_bodies_that_change_the_shape_of_what_they_carry() {
    // A vector that grows.
    let err = trace("grow", |x: Slice<f64>| {
        let v = for_range(0, x.len(), vec![Var::from(0.0)], |i, mut v| {
            v.push(x.at(i));
            v
        });
        v[0]
    })
    .unwrap_err();
    assert!(matches!(err, TraceError::CarryMismatch { .. }), "{err:?}");

    // A plain number changed by the body.
    let err = trace("count", |x: Slice<f64>| {
        let (s, k) = for_range(0, x.len(), (Var::from(0.0), 0.0), |i, (s, k)| {
            (s + x.at(i), k + 1.0)
        });
        s * k
    })
    .unwrap_err();
    assert!(matches!(err, TraceError::CarryMismatch { .. }), "{err:?}");
    assert!(err.to_string().contains("plain Rust number"), "{err}");
}

#[test]
fn plain_rust_parameters_and_results() {
    let err = trace("p", |x: Var, k: f64| x * k).unwrap_err();
    assert!(matches!(err, TraceError::NotTraced { .. }), "{err:?}");
    assert!(err.to_string().contains("parameter 2 (f64)"), "{err}");

    let err = trace("r", |x: Var| {
        let _ = x;
        1.0
    })
    .unwrap_err();
    assert!(matches!(err, TraceError::NotTraced { .. }), "{err:?}");
    assert!(err.to_string().contains("result 1"), "{err}");
}

#[test]
fn two_functions_under_one_name() {
    let err = trace("f", |x: Var| {
        func("g", |y: Var| y * 2.0).call((x,)) + func("g", |y: Var| y * 3.0).call((x,))
    })
    .unwrap_err();
    assert!(matches!(err, TraceError::NameClash { .. }), "{err:?}");
    assert!(err.to_string().contains("@g"), "{err}");

    // A name taken by the function being traced itself.
    let err = trace("f", |x: Var| func("f", |y: Var| y).call((x,))).unwrap_err();
    assert!(matches!(err, TraceError::NameClash { .. }), "{err:?}");
}

#[test]
fn custom_derivatives_that_do_not_fit() {
    fn sum<T: Real>(x: T::Slice<'_>) -> T {
        for_range(0, x.len(), T::lit(0.0), |i, acc| acc + x.at(i))
    }
    fn sum_vjp<T: Real>(dy: T) -> T {
        dy
    }
    // A vjp over a slice takes the slice and its shadow too.
    let err = trace("f", |x: Slice<f64>| {
        func("sum", sum::<Var>)
            .vjp("sum_vjp", sum_vjp::<Var>)
            .call((x,))
    })
    .unwrap_err();
    assert!(matches!(err, TraceError::CustomRule { .. }), "{err:?}");
    assert!(
        err.to_string()
            .contains("must have ([f64], mut [f64], f64) (the parameters"),
        "{err}"
    );
    // A native vjp of f64 numbers is for scalars only.
    let err = trace("f", |x: Slice<f64>| {
        func("sum", sum::<Var>)
            .vjp_native("sum_vjp", |_, _, _| {})
            .call((x,))
    })
    .unwrap_err();
    assert!(err.to_string().contains("vjp_host"), "{err}");

    // A vjp of the wrong signature: it must take x and dy.
    fn sq<T: Real>(x: T) -> T {
        x * x
    }
    let err = trace("f", |x: Var| {
        func("sq", sq::<Var>)
            .vjp("sq_vjp", sum_vjp::<Var>)
            .call((x,))
    })
    .unwrap_err();
    assert!(matches!(err, TraceError::CustomRule { .. }), "{err:?}");
    assert!(
        err.to_string().contains("must have (f64, f64) -> f64"),
        "{err}"
    );

    // An overlay of another signature.
    let err = trace("f", |x: Var| {
        func("sq", sq::<Var>)
            .overlay("sq2", |a: Var, b: Var| a * b)
            .call((x,))
    })
    .unwrap_err();
    assert!(matches!(err, TraceError::CustomRule { .. }), "{err:?}");

    // A native vjp of an f32 function.
    let err = trace("f", |x: Var<f32>| {
        func("h", |y: Var<f32>| y * y)
            .vjp_native("h_vjp", |_, _, _| {})
            .call((x,))
    })
    .unwrap_err();
    assert!(matches!(err, TraceError::CustomRule { .. }), "{err:?}");
}

#[test]
fn a_trace_inside_a_trace() {
    let inner = Cell::new(None);
    let outer = trace("outer", |x: Var| {
        inner.set(Some(trace("inner", |y: Var| y * 2.0).map(|_| ())));
        x
    });
    assert!(matches!(inner.take(), Some(Err(TraceError::Nested))));
    // The outer trace itself is fine.
    assert!(outer.is_ok());
}

#[test]
fn a_failed_tracer_keeps_its_error() {
    let mut t = Tracer::new();
    let e1 = t.function("p", |x: Var, k: f64| x * k).unwrap_err();
    let e2 = t.function("q", |x: Var| x).unwrap_err();
    assert_eq!(e1.to_string(), e2.to_string());
    let e3 = t.finish().unwrap_err();
    assert_eq!(e1.to_string(), e3.to_string());
}

#[test]
fn values_outside_any_trace_do_not_panic() {
    // A traced value used with no trace running computes nothing and is reported when
    // it reaches a trace.
    let kept: Cell<Option<Var>> = Cell::new(None);
    trace("first", |x: Var| {
        kept.set(Some(x));
        x
    })
    .unwrap();
    let stale = kept.get().unwrap();
    let derived = (stale * 2.0 + 1.0).sin();
    let err = trace("second", move |y: Var| y + derived).unwrap_err();
    assert!(matches!(err, TraceError::ForeignValue { .. }), "{err:?}");
}

#[test]
fn one_function_with_two_custom_derivatives() {
    fn sq<T: Real>(x: T) -> T {
        x * x
    }
    fn sq_vjp<T: Real>(x: T, dy: T) -> T {
        dy * x * 2.0
    }
    // Plain first, then with a vjp: the vjp would be silently dropped.
    let err = trace("f", |x: Var| {
        func("sq", sq::<Var>).call((x,))
            + func("sq", sq::<Var>)
                .vjp("sq_vjp", sq_vjp::<Var>)
                .call((x,))
    })
    .unwrap_err();
    assert!(matches!(err, TraceError::NameClash { .. }), "{err:?}");
    assert!(
        err.to_string()
            .contains("no custom derivative and with the custom derivative @sq_vjp"),
        "{err}"
    );
    // And the other way round.
    let err = trace("f", |x: Var| {
        func("sq", sq::<Var>).nodiff().call((x,)) + func("sq", sq::<Var>).call((x,))
    })
    .unwrap_err();
    assert!(matches!(err, TraceError::NameClash { .. }), "{err:?}");
}

#[test]
fn a_panic_in_traced_code_leaves_the_thread_clean() {
    let caught = std::panic::catch_unwind(|| {
        let _ = trace("boom", |x: Var| -> Var {
            panic!("user code failed at {x:?}")
        });
    });
    assert!(caught.is_err());
    // The next trace on this thread works.
    let traced = trace("after", |x: Var| x * 2.0).unwrap();
    assert!(traced.module.to_string().contains("func @after"));
}

// A trace that grows with the data is refused at the line that crossed the limit:
// a plain Rust loop of 40,000 rows used to trace without a word, then take the
// compiler's memory until it was killed.

fn rows_unrolled(x: Slice<f64>) -> Var {
    let mut acc = Var::from(0.0);
    for i in 0..40_000i64 {
        let xi = x.at(i % 7); // the lines the error may name: this one
        acc += xi * xi; // and this one
    }
    acc
}

#[test]
fn a_trace_past_the_limit_is_refused_at_its_line() {
    let line = line!() - 8;
    let Err(e) = trace("rows", rows_unrolled) else {
        panic!("a trace of 120,000 instructions was accepted")
    };
    let TraceError::TooLarge {
        func, limit, at, ..
    } = &e
    else {
        panic!("expected TooLarge, got {e:?}")
    };
    assert_eq!((func.as_str(), *limit), ("rows", 100_000));
    // The loop body's two lines: the load, or the arithmetic after it.
    assert_eq!(at.file(), file!());
    assert!([line, line + 1].contains(&at.line()), "{e}");
    assert!(e.to_string().contains("for_range"), "{e}");
    // A higher limit lets it through; the same loop as a `for_range` needs none.
    let mut t = Tracer::new().with_max_insts(1_000_000);
    assert!(t.function("rows", rows_unrolled).is_ok());
    let looped = trace("rows", |x: Slice<f64>| {
        // A traced bound: a real loop (with plain integer bounds, `for_range` runs
        // natively and unrolls too).
        for_range(Var::from(0), Var::from(40_000), Var::from(0.0), |i, acc| {
            let xi = x.at(i % 7);
            acc + xi * xi
        })
    })
    .unwrap();
    assert!(looped.module.to_string().lines().count() < 40);
}
