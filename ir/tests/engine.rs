//! The engine contract (`gradlift_ir::engine`) on its own and on the interpreter:
//! the one argument check, borrowed arguments (read-only slices are never written,
//! `mut` ones are, also when a call fails), and the host protocol (a host's error,
//! panic, changed length or ill-typed result each fail the call with a message).
//! The JIT's side of the contract is held to the interpreter's in `jit/tests`.

use gradlift_ir::engine::{Arg, Engine, ErrorKind, Hosts, Val, call_host, check_args};
use gradlift_ir::interp::Interpreter;
use gradlift_ir::{Elem, Signature, Type, parse};

#[test]
fn check_args_counts_and_types_with_mutability() {
    let sig = Signature::new([Type::slice_mut(Elem::F64), Type::F64], []);
    let x = [1.0];
    let mut y = [1.0];
    // A read-only slice does not fit a `mut` parameter; a writable one does.
    let e = check_args("f", &sig, &[Arg::F64s(&x), Arg::F64(1.0)]).unwrap_err();
    assert_eq!(
        e,
        ErrorKind::BadArguments("argument 1 of @f must be mut [f64], found [f64]".into())
    );
    check_args("f", &sig, &[Arg::F64sMut(&mut y), Arg::F64(1.0)]).unwrap();
    // An owned `Val` fits either kind of slice.
    check_args("f", &sig, &[Val::F64s(vec![]), Val::F64(0.0)]).unwrap();
    let e = check_args("f", &sig, &[Val::F64(0.0)]).unwrap_err();
    assert_eq!(e.to_string(), "@f takes 2 arguments, found 1");
    let e = check_args("f", &sig, &[Val::I64s(vec![1]), Val::F64(0.0)]).unwrap_err();
    assert_eq!(
        e.to_string(),
        "argument 1 of @f must be mut [f64], found [i64]"
    );
}

const SCALE: &str = "
    func @scale(%x: [f64], %y: mut [f64], %a: f64) -> f64 {
    entry:
        %x0 = load %x[0]
        %y0 = fmul %a, %x0
        store %y[0], %y0
        %bad = load %x[5]
        ret %bad
    }
    func @first(%x: mut [f64], %a: f64) -> f64 {
    entry:
        %x0 = load %x[0]
        %y = fmul %a, %x0
        store %x[0], %y
        ret %y
    }
";

#[test]
fn the_interpreter_as_an_engine_writes_mut_slices_back_even_after_an_error() {
    let m = parse(SCALE).unwrap();
    let mut engine = Interpreter::new(&m);
    let (scale, first) = (
        m.func_by_name("scale").unwrap(),
        m.func_by_name("first").unwrap(),
    );
    let x = [3.0, 4.0];
    let mut y = [0.0];
    let mut out = vec![Val::Bool(true)];
    let e = engine
        .call_args(
            scale,
            &mut [Arg::F64s(&x), Arg::F64sMut(&mut y), Arg::F64(2.0)],
            &mut out,
        )
        .unwrap_err();
    assert_eq!(e.kind, ErrorKind::OutOfBounds { index: 5, len: 2 });
    // The store before the failing load stays, as on every engine.
    assert_eq!(y, [6.0]);
    assert_eq!(x, [3.0, 4.0]);
    assert!(out.is_empty(), "out is cleared: {out:?}");

    let mut x = [5.0];
    engine
        .call_args(first, &mut [Arg::F64sMut(&mut x), Arg::F64(3.0)], &mut out)
        .unwrap();
    assert_eq!((out.as_slice(), x), (&[Val::F64(15.0)][..], [15.0]));
    // The same call on owned values computes the same.
    let mut vals = [Val::F64s(vec![5.0]), Val::F64(3.0)];
    assert_eq!(engine.call(first, &mut vals).unwrap(), [Val::F64(15.0)]);
    assert_eq!(vals[0], Val::F64s(vec![15.0]));
    // A read-only slice for the `mut` parameter is refused before anything runs.
    let ro = [5.0];
    let e = engine
        .call_args(first, &mut [Arg::F64s(&ro), Arg::F64(3.0)], &mut out)
        .unwrap_err();
    assert!(matches!(e.kind, ErrorKind::BadArguments(_)), "{e}");
    assert_eq!(e.op, "");
}

#[test]
fn the_host_protocol_catches_every_way_a_host_fails() {
    let sig = Signature::new([Type::slice_mut(Elem::F64), Type::F64], [Type::F64]);
    let hosts = Hosts::new()
        .bind("ok", |a: &mut [Val]| {
            if let [Val::F64s(v), Val::F64(s)] = a {
                v.iter_mut().for_each(|x| *x *= *s);
                return Ok(vec![Val::F64(v.iter().sum())]);
            }
            Err("bad".into())
        })
        .bind("says_no", |_: &mut [Val]| Err("no".into()))
        .bind("panics", |_: &mut [Val]| panic!("boom"))
        .bind("grows", |a: &mut [Val]| {
            a[0] = Val::F64s(vec![0.0; 9]);
            Ok(vec![Val::F64(0.0)])
        })
        .bind("ill_typed", |_: &mut [Val]| Ok(vec![Val::I64(1)]));
    assert_eq!(hosts.len(), 5);
    let run = |name: &str| {
        let mut args = [Val::F64s(vec![1.0, 2.0]), Val::F64(3.0)];
        let mut written = Vec::new();
        let f = hosts.get(name).unwrap();
        let r = call_host(&**f, name, &sig, &mut args, |k, v| {
            written.push((k, v.clone()));
            true
        });
        (r, written)
    };
    let (r, written) = run("ok");
    assert_eq!(r.unwrap(), [Val::F64(9.0)]);
    assert_eq!(written, [(0, Val::F64s(vec![3.0, 6.0]))]);
    let failed = |name: &str, message: &str| {
        let (r, _) = run(name);
        assert_eq!(
            r.unwrap_err(),
            ErrorKind::ExternFailed {
                name: name.into(),
                message: message.into()
            }
        );
    };
    failed("says_no", "no");
    failed("panics", "it panicked: boom");
    failed("grows", "it changed the length or type of argument 1");
    failed("ill_typed", "result 1 must be f64, found i64");
}

#[test]
fn arg_conversions_keep_contents_and_mutability() {
    let mut v = Val::F64s(vec![1.0, 2.0]);
    assert_eq!(v.as_arg().ty(), Type::slice_mut(Elem::F64));
    assert_eq!(Arg::from(&v).ty(), Type::slice(Elem::F64));
    assert_eq!(Arg::from(&v).to_val(), v);
    let mut buf = [0.0; 2];
    let mut a = Arg::F64sMut(&mut buf);
    assert!(a.copy_from(&v));
    assert!(
        !a.copy_from(&Val::F64s(vec![1.0])),
        "a length mismatch copies nothing"
    );
    assert_eq!(buf, [1.0, 2.0]);
    let ro = [0.0; 2];
    assert!(
        !Arg::F64s(&ro).copy_from(&v),
        "a read-only slice is never written"
    );
    let mut z = Val::F64s(vec![7.0; 3]);
    z.assign_zeros_like(&v);
    assert_eq!(z, Val::F64s(vec![0.0; 2]));
    z.assign(&Val::F64(1.5));
    assert_eq!(z, Val::F64(1.5));
    v.assign(&Val::F64s(vec![4.0, 5.0]));
    assert_eq!(v, Val::F64s(vec![4.0, 5.0]));
}
