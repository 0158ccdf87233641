//! Host functions that borrow their arguments (`Hosts::bind_args`, `HostArgsFn`) on
//! their own and on the interpreter: the protocol (`call_host_args`), the bindings
//! of both kinds in one `Hosts`, buffers lent in place (and put back whatever the
//! host did), and the copies overlapping arguments get. The JIT is held to the same
//! in `jit/tests/host_args.rs`.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use gradlift_ir::engine::{Arg, ErrorKind, Hosts, Val, call_host_args};
use gradlift_ir::interp::Interpreter;
use gradlift_ir::{Elem, Signature, Type, parse};

#[test]
fn the_borrowed_protocol_checks_arguments_results_and_catches_panics() {
    let sig = Signature::new([Type::slice_mut(Elem::F64), Type::F64], [Type::F64]);
    let calls = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&calls);
    let hosts = Hosts::new()
        .bind_args("ok", move |a: &mut [Arg<'_>]| {
            counter.fetch_add(1, Ordering::SeqCst);
            let [Arg::F64sMut(v), Arg::F64(s)] = a else {
                return Err("bad".into());
            };
            v.iter_mut().for_each(|x| *x *= *s);
            Ok(vec![Val::F64(v.iter().sum())])
        })
        .bind_args("says_no", |a: &mut [Arg<'_>]| {
            if let [Arg::F64sMut(v), ..] = a {
                v[0] = -1.0;
            }
            Err("no".into())
        })
        .bind_args("panics", |_: &mut [Arg<'_>]| panic!("boom"))
        .bind_args("panics_oddly", |_: &mut [Arg<'_>]| std::panic::panic_any(7))
        .bind_args("ill_typed", |_: &mut [Arg<'_>]| Ok(vec![Val::I64(1)]))
        .bind_args("too_many", |_: &mut [Arg<'_>]| {
            Ok(vec![Val::F64(1.0), Val::F64(2.0)])
        });
    let run = |name: &str, buf: &mut [f64]| {
        let f = hosts.get_args(name).unwrap();
        call_host_args(&**f, name, &sig, &mut [Arg::F64sMut(buf), Arg::F64(3.0)])
    };
    let mut buf = [1.0, 2.0];
    assert_eq!(run("ok", &mut buf).unwrap(), [Val::F64(9.0)]);
    assert_eq!(buf, [3.0, 6.0], "written in place");
    let failed = |name: &str, message: &str| {
        let mut buf = [1.0, 2.0];
        assert_eq!(
            run(name, &mut buf).unwrap_err(),
            ErrorKind::ExternFailed {
                name: name.into(),
                message: message.into()
            }
        );
        buf
    };
    assert_eq!(
        failed("says_no", "no"),
        [-1.0, 2.0],
        "writes stay on failure"
    );
    failed("panics", "it panicked: boom");
    failed("panics_oddly", "it panicked: a panic");
    failed("ill_typed", "result 1 must be f64, found i64");
    failed("too_many", "it returned 2 values for 1 results");
    // Arguments that do not fit are refused before the function runs.
    let f = hosts.get_args("ok").unwrap();
    let ro = [1.0];
    let e = call_host_args(&**f, "ok", &sig, &mut [Arg::F64s(&ro), Arg::F64(3.0)]).unwrap_err();
    assert!(matches!(e, ErrorKind::BadArguments(_)), "{e}");
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}

#[test]
fn hosts_hold_both_kinds_under_one_name_each() {
    let mut hosts = Hosts::new()
        .bind("a", |_: &mut [Val]| Ok(vec![]))
        .bind_args("b", |_: &mut [Arg<'_>]| Ok(vec![]));
    assert_eq!((hosts.len(), hosts.is_empty()), (2, false));
    assert_eq!(format!("{hosts:?}"), r#"Hosts { bound: ["a", "b"] }"#);
    assert!(hosts.get("a").is_some() && hosts.get_args("a").is_none());
    assert!(hosts.get("b").is_none() && hosts.get_args("b").is_some());
    assert_eq!(hosts.iter().map(|(n, _)| n).collect::<Vec<_>>(), ["a"]);
    assert_eq!(hosts.iter_args().map(|(n, _)| n).collect::<Vec<_>>(), ["b"]);
    // Rebinding replaces, whatever the kind.
    hosts.insert_args("a", |_: &mut [Arg<'_>]| Ok(vec![]));
    hosts.insert("b", |_: &mut [Val]| Ok(vec![]));
    assert_eq!(hosts.len(), 2);
    assert!(hosts.get("a").is_none() && hosts.get_args("a").is_some());
    assert!(hosts.get("b").is_some() && hosts.get_args("b").is_none());
    assert!(
        Hosts::new()
            .bind_args("x", |_: &mut [Arg<'_>]| Ok(vec![]))
            .len()
            == 1
    );
}

const PROGRAM: &str = "
extern @scale(mut [f64], [f64], f64) -> f64

; y = c x; returns the sum and y[1].
func @f(%y: mut [f64], %x: [f64], %c: f64) -> f64 {
entry:
    %s = call @scale(%y, %x, %c)
    %y1 = load %y[1]
    %r = fadd %s, %y1
    ret %r
}

; The same buffer twice.
func @twice(%y: mut [f64], %c: f64) -> f64 {
entry:
    %s = call @scale(%y, %y, %c)
    ret %s
}

; Through a callee: the same buffer under two names of another frame.
func @nested(%y: mut [f64], %c: f64) -> f64 {
entry:
    %s = call @pass(%y, %y, %c)
    ret %s
}

func @pass(%a: mut [f64], %b: mut [f64], %c: f64) -> f64 {
entry:
    %s = call @scale(%b, %a, %c)
    ret %s
}

; A tape buffer, kept across calls.
func @make() -> i64 {
entry:
    %h = tape_alloc f64, 2
    %v = tape_view f64, %h
    store %v[0], 1.0
    store %v[1], 2.0
    ret %h
}

func @on_tape(%h: i64, %c: f64) -> f64 {
entry:
    %v = tape_view f64, %h
    %w = tape_view f64, %h
    %s = call @scale(%v, %w, %c)
    ret %s
}

func @read(%h: i64) -> f64 {
entry:
    %v = tape_view f64, %h
    %a = load %v[0]
    %b = load %v[1]
    %r = fadd %a, %b
    ret %r
}
";

/// `scale`: y[i] = c x[i] for every i, then the sum of y; 13 says no after
/// writing y[0], 666 panics after writing it.
fn scale_hosts(seen: &Arc<AtomicUsize>) -> Hosts {
    let seen = Arc::clone(seen);
    Hosts::new().bind_args("scale", move |a: &mut [Arg<'_>]| {
        let [Arg::F64sMut(y), Arg::F64s(x), Arg::F64(c)] = a else {
            return Err("bad arguments".into());
        };
        seen.store(y.as_ptr() as usize, Ordering::SeqCst);
        for (yi, xi) in y.iter_mut().zip(x.iter()) {
            *yi = *c * xi;
            if *c == 13.0 {
                return Err("unlucky".into());
            }
            if *c == 666.0 {
                panic!("the host gave up");
            }
        }
        Ok(vec![Val::F64(y.iter().sum())])
    })
}

#[test]
fn the_interpreter_lends_its_buffers_in_place() {
    let m = parse(PROGRAM).unwrap();
    let seen = Arc::new(AtomicUsize::new(0));
    let mut interp = Interpreter::new(&m).with_hosts(&scale_hosts(&seen));
    let y = vec![0.0; 2];
    let p = y.as_ptr() as usize;
    let mut args = [Val::F64s(y), Val::F64s(vec![1.0, 2.0]), Val::F64(3.0)];
    let out = interp.call_by_name("f", &mut args).unwrap();
    assert_eq!(out, [Val::F64(9.0 + 6.0)]);
    assert_eq!(args[0], Val::F64s(vec![3.0, 6.0]));
    assert_eq!(seen.load(Ordering::SeqCst), p, "the argument's own memory");
    // Calling the extern directly lends the caller's values.
    let y = vec![0.0; 2];
    let p = y.as_ptr() as usize;
    let mut args = [Val::F64s(y), Val::F64s(vec![1.0, 2.0]), Val::F64(0.5)];
    let out = interp.call_by_name("scale", &mut args).unwrap();
    assert_eq!(
        (out, &args[0]),
        (vec![Val::F64(1.5)], &Val::F64s(vec![0.5, 1.0]))
    );
    assert_eq!(seen.load(Ordering::SeqCst), p);
}

#[test]
fn failures_keep_positions_and_give_the_buffers_back() {
    let m = parse(PROGRAM).unwrap();
    let seen = Arc::new(AtomicUsize::new(0));
    let mut interp = Interpreter::new(&m).with_hosts(&scale_hosts(&seen));
    for (c, message) in [(13.0, "unlucky"), (666.0, "it panicked: the host gave up")] {
        let mut args = [
            Val::F64s(vec![0.0; 2]),
            Val::F64s(vec![1.0, 2.0]),
            Val::F64(c),
        ];
        let e = interp.call_by_name("f", &mut args).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!("in @f, call at 7:5: extern function @scale failed: {message}")
        );
        assert_eq!(e.op, "call");
        // The buffer came back to the caller, with the write made before failing.
        assert_eq!(args[0], Val::F64s(vec![c, 0.0]));
        assert_eq!(args[1], Val::F64s(vec![1.0, 2.0]));
    }
    // A tape buffer lent to a host that panicked is back on the tape.
    let h = interp.call_by_name("make", &mut []).unwrap();
    let e = interp.call_by_name("on_tape", &mut [h[0].clone(), Val::F64(666.0)]);
    assert!(e.unwrap_err().to_string().contains("panicked"));
    // The first view is the buffer itself: the write made before the panic stays
    // (the second, read-only view was a copy): [666 * 1, 2].
    let r = interp.call_by_name("read", &mut [h[0].clone()]).unwrap();
    assert_eq!(r, [Val::F64(666.0 + 2.0)]);
}

#[test]
fn one_buffer_twice_gets_a_copy_for_the_later_argument() {
    let m = parse(PROGRAM).unwrap();
    let seen = Arc::new(AtomicUsize::new(0));
    let mut interp = Interpreter::new(&m).with_hosts(&scale_hosts(&seen));
    // @twice: y is lent as the `mut` first argument, the read-only second is a
    // copy from before the call, so y = c y elementwise (not c^2 y[0] ...).
    for name in ["twice", "nested"] {
        let y = vec![1.0, 2.0, 4.0];
        let p = y.as_ptr() as usize;
        let mut args = [Val::F64s(y), Val::F64(3.0)];
        let out = interp.call_by_name(name, &mut args).unwrap();
        assert_eq!(out, [Val::F64(21.0)], "@{name}");
        assert_eq!(args[0], Val::F64s(vec![3.0, 6.0, 12.0]), "@{name}");
        assert_eq!(seen.load(Ordering::SeqCst), p, "@{name}: the first is lent");
    }
    // Two views of one tape buffer: the same.
    let h = interp.call_by_name("make", &mut []).unwrap();
    let out = interp
        .call_by_name("on_tape", &mut [h[0].clone(), Val::F64(2.0)])
        .unwrap();
    assert_eq!(out, [Val::F64(6.0)]);
    let r = interp.call_by_name("read", &mut [h[0].clone()]).unwrap();
    assert_eq!(r, [Val::F64(6.0)]);
}
