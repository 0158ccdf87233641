//! The tape ops and host functions in compiled code, against the interpreter: the
//! same calls in the same order on one interpreter and one workspace give the same
//! results, the same errors, and the same tape heights.

mod support;

use gradlift_ir::interp::{ErrorKind, Interpreter, Val};
use gradlift_ir::{Elem, Module};
use gradlift_jit::{Compiled, Hosts, Workspace, compile, compile_with};
use support::{module, same_all, show};

const TAPE: &str = "
; fwd saves x[0]^2 in a tape buffer and pushes k and its handle; rvs takes them back
func @fwd(%x: [f64], %k: f64) -> f64 {
entry:
    %h = tape_alloc f64, 1
    %s = tape_view f64, %h
    %a = load %x[0]
    %a2 = fmul %a, %a
    store %s[0], %a2
    push %k
    push %h
    %y = fmul %k, %a2
    ret %y
}

func @rvs(%dy: f64) -> f64 {
entry:
    %h = pop i64
    %k = pop f64
    %s = tape_view f64, %h
    %a2 = load %s[0]
    %dk = fmul %a2, %dy
    ret %dk
}

; every scalar type through the tape, in a loop of n pushes and n pops
func @roundtrip(%n: i64, %x: f64, %y: f32) -> f64 {
entry:
    jump head
head:
    %i = phi i64 [entry: 0, body: %i1]
    %more = icmp lt %i, %n
    br %more, body, back
body:
    %fi = cast f64 %i
    %v = fadd %x, %fi
    push %v
    push %y
    push %i
    %odd = iand %i, 1
    %b = icmp eq %odd, 1
    push %b
    %i1 = iadd %i, 1
    jump head
back:
    %j = phi i64 [head: %n, more_back: %j1]
    %acc = phi f64 [head: 0.0, more_back: %acc1]
    %go = icmp gt %j, 0
    br %go, more_back, done
more_back:
    %b2 = pop bool
    %i2 = pop i64
    %y2 = pop f32
    %v2 = pop f64
    %yf = cast f64 %y2
    %if = cast f64 %i2
    %bf = cast f64 %b2
    %t1 = fadd %v2, %yf
    %t2 = fmul %if, %bf
    %t3 = fadd %t1, %t2
    %acc1 = fadd %acc, %t3
    %j1 = isub %j, 1
    jump back
done:
    ret %acc
}

func @pop_one() -> f64 {
entry:
    %v = pop f64
    ret %v
}

func @push_one(%x: f64) {
entry:
    push %x
    ret
}

func @view(%h: i64) -> f64 {
entry:
    %s = tape_view f64, %h
    %n = len %s
    %z = cast f64 %n
    ret %z
}

func @view_i64(%h: i64) -> i64 {
entry:
    %s = tape_view i64, %h
    %n = len %s
    ret %n
}

func @make(%n: i64) -> i64 {
entry:
    %h = tape_alloc f64, %n
    ret %h
}

; a tape buffer passed to a callee that writes it
func @fill(%s: mut [f64], %v: f64) {
entry:
    %n = len %s
    jump head
head:
    %i = phi i64 [entry: 0, body: %i1]
    %more = icmp lt %i, %n
    br %more, body, exit
body:
    store %s[%i], %v
    %i1 = iadd %i, 1
    jump head
exit:
    ret
}

func @filled(%n: i64, %v: f64) -> f64 {
entry:
    %h = tape_alloc f64, %n
    %s = tape_view f64, %h
    call @fill(%s, %v)
    %t = tape_view f64, %h
    %last = isub %n, 1
    %y = load %t[%last]
    ret %y
}
";

/// Runs `calls` in order on one interpreter and one workspace, asserting the same
/// outcome of each (results bit for bit, or errors of the same kind with `exact`
/// messages), and the same tape height after each.
fn same_sequence(m: &Module, c: &Compiled, calls: &[(&str, Vec<Val>)], exact: bool) {
    let mut interp = Interpreter::new(m);
    let mut ws = Workspace::new();
    for (name, args) in calls {
        let id = m.func_by_name(name).unwrap();
        let ir = interp.call(id, &mut args.clone());
        let jr = c.call(&mut ws, id, &mut args.clone());
        match (&ir, &jr) {
            (Ok(a), Ok(b)) => assert!(
                same_all(a, b),
                "@{name}{}: interpreter {}, JIT {}",
                show(args),
                show(a),
                show(b)
            ),
            (Err(ie), Err(je)) => {
                let jk = je.kind.clone();
                assert_eq!(
                    core::mem::discriminant(&jk),
                    core::mem::discriminant(&ie.kind),
                    "@{name}: interpreter `{ie}`, JIT `{je}`"
                );
                assert_eq!(
                    (je.func.as_str(), je.op.as_str(), je.pos),
                    (ie.func.as_str(), ie.op.as_str(), ie.pos)
                );
                if exact {
                    assert_eq!(je.to_string(), ie.to_string());
                }
            }
            _ => panic!("@{name}{}: interpreter {ir:?}, JIT {jr:?}", show(args)),
        }
        assert_eq!(
            interp.tape().scalars,
            ws.tape().scalars,
            "tape heights after @{name}"
        );
        assert_eq!(
            interp.tape().bytes,
            ws.tape().bytes,
            "tape bytes after @{name}"
        );
    }
}

#[test]
fn a_forward_pass_and_its_pullback_share_the_tape_across_calls() {
    let m = module(TAPE);
    let c = compile(&m).unwrap();
    let x = Val::F64s(vec![3.0]);
    same_sequence(
        &m,
        &c,
        &[
            ("fwd", vec![x.clone(), Val::F64(2.0)]),
            ("fwd", vec![Val::F64s(vec![-1.5]), Val::F64(0.5)]),
            ("rvs", vec![Val::F64(1.0)]),
            ("rvs", vec![Val::F64(10.0)]),
        ],
        true,
    );
    // And the values are the closed forms: k x0^2 and d/dk = x0^2 dy.
    let mut ws = Workspace::new();
    let fwd = m.func_by_name("fwd").unwrap();
    let rvs = m.func_by_name("rvs").unwrap();
    assert_eq!(
        c.call(&mut ws, fwd, &mut [x, Val::F64(2.0)]).unwrap(),
        [Val::F64(18.0)]
    );
    assert_eq!(ws.tape().scalars, 2);
    assert_eq!(ws.tape().buffers, 1);
    assert_eq!(
        c.call(&mut ws, rvs, &mut [Val::F64(2.0)]).unwrap(),
        [Val::F64(18.0)]
    );
    assert_eq!(ws.tape().scalars, 0);
    assert_eq!(ws.tape().peak_bytes, 16 + 8);
    ws.reset_tape();
    assert_eq!(ws.tape().buffers, 0);
}

#[test]
fn every_scalar_type_round_trips_and_the_tape_grows() {
    let m = module(TAPE);
    let c = compile(&m).unwrap();
    let calls: Vec<(&str, Vec<Val>)> = [0i64, 1, 7, 300, 5000]
        .iter()
        .map(|&n| {
            (
                "roundtrip",
                vec![Val::I64(n), Val::F64(0.25), Val::F32(-1.5)],
            )
        })
        .collect();
    same_sequence(&m, &c, &calls, true);
    // 4 slots per iteration: 20,000 scalars, past several doublings.
    let mut ws = Workspace::new();
    let id = m.func_by_name("roundtrip").unwrap();
    let out = c
        .call(
            &mut ws,
            id,
            &mut [Val::I64(5000), Val::F64(0.0), Val::F32(0.0)],
        )
        .unwrap();
    // sum over i of (i + i*(i odd)) = sum i + sum of odd i.
    let want: i64 = (0..5000).sum::<i64>() + (0..5000).filter(|i| i % 2 == 1).sum::<i64>();
    assert_eq!(out, [Val::F64(want as f64)]);
    // Pushed and popped within the call: the tape kept the memory it took.
    assert!(ws.tape().capacity_bytes >= 5000 * 4 * 8);
    assert_eq!(ws.tape().scalars, 0);
}

#[test]
fn tape_errors_match_the_interpreter_and_leave_the_workspace_usable() {
    let m = module(TAPE);
    let c = compile(&m).unwrap();
    same_sequence(
        &m,
        &c,
        &[
            ("pop_one", vec![]),
            ("push_one", vec![Val::F64(4.0)]),
            ("pop_one", vec![]),
            ("pop_one", vec![]),
            ("make", vec![Val::I64(-3)]),
            ("filled", vec![Val::I64(4), Val::F64(2.5)]),
            ("filled", vec![Val::I64(0), Val::F64(2.5)]),
        ],
        true,
    );
    // Forged and stale handles name no buffer; a buffer viewed as another type is
    // refused. Handles differ between engines, so compare the kinds.
    let mut ws = Workspace::new();
    let view = m.func_by_name("view").unwrap();
    let make = m.func_by_name("make").unwrap();
    let view_i64 = m.func_by_name("view_i64").unwrap();
    for forged in [0, 12345, -1, i64::MAX] {
        let e = c.call(&mut ws, view, &mut [Val::I64(forged)]).unwrap_err();
        assert_eq!(
            e.kind,
            ErrorKind::NoTapeBuffer {
                elem: Elem::F64,
                handle: forged
            }
        );
        assert_eq!(
            e.to_string(),
            format!(
                "in @view, tape_view at 82:5: tape_view f64: no tape buffer with handle {forged}"
            )
        );
    }
    let h = c.call(&mut ws, make, &mut [Val::I64(3)]).unwrap();
    assert_eq!(
        c.call(&mut ws, view, &mut h.clone()).unwrap(),
        [Val::F64(3.0)]
    );
    let e = c.call(&mut ws, view_i64, &mut h.clone()).unwrap_err();
    let Val::I64(handle) = h[0] else { panic!() };
    assert_eq!(
        e.kind,
        ErrorKind::TapeBufferMismatch {
            handle,
            expected: Elem::I64,
            found: Elem::F64
        }
    );
    let mut interp = Interpreter::new(&m);
    let ih = interp.call(make, &mut [Val::I64(3)]).unwrap();
    let ie = interp.call(view_i64, &mut ih.clone()).unwrap_err();
    assert!(matches!(ie.kind, ErrorKind::TapeBufferMismatch { .. }));
    ws.reset_tape();
    interp.reset_tape();
    let e = c.call(&mut ws, view, &mut h.clone()).unwrap_err();
    assert!(matches!(e.kind, ErrorKind::NoTapeBuffer { .. }), "{e}");
    let ie = interp.call(view, &mut ih.clone()).unwrap_err();
    assert!(matches!(ie.kind, ErrorKind::NoTapeBuffer { .. }), "{ie}");
}

const HOSTED: &str = "
extern @scale(f64, mut [f64]) -> f64
extern @flag(bool, i64, f32) -> bool
func @f(%x: f64, %v: mut [f64]) -> f64 {
entry:
    %s = call @scale(%x, %v)
    %a = load %v[0]
    %y = fadd %s, %a
    ret %y
}
func @g(%b: bool, %n: i64, %x: f32) -> bool {
entry:
    %r = call @flag(%b, %n, %x)
    ret %r
}
";

/// Host functions: `scale` multiplies the slice by x and returns its sum; it fails
/// for x = 13, panics for x = 666, and changes the length for x = -1. `flag` checks
/// that every argument arrived and answers `b xor (n > x)`.
fn hosts() -> Hosts {
    Hosts::new()
        .bind("scale", |a: &mut [Val]| {
            let [Val::F64(x), Val::F64s(v)] = a else {
                return Err("bad arguments".into());
            };
            if *x == 13.0 {
                return Err("unlucky".into());
            }
            if *x == 666.0 {
                panic!("the host gave up");
            }
            if *x == -1.0 {
                v.push(0.0);
            }
            for e in v.iter_mut() {
                *e *= *x;
            }
            Ok(vec![Val::F64(v.iter().sum())])
        })
        .bind("flag", |a: &mut [Val]| match a {
            [Val::Bool(b), Val::I64(n), Val::F32(x)] => {
                Ok(vec![Val::Bool(*b ^ ((*n as f32) > *x))])
            }
            _ => Err("bad arguments".into()),
        })
}

#[test]
fn host_functions_run_as_on_the_interpreter() {
    let m = module(HOSTED);
    let h = hosts();
    let c = compile_with(&m, &m.defined().map(|(id, _)| id).collect::<Vec<_>>(), &h).unwrap();
    let mut ws = Workspace::new();
    let f = m.func_by_name("f").unwrap();
    let g = m.func_by_name("g").unwrap();
    let mut interp = Interpreter::new(&m).with_hosts(&h);
    let cases: Vec<(gradlift_ir::FuncId, Vec<Val>)> = vec![
        (f, vec![Val::F64(2.0), Val::F64s(vec![1.0, 2.0, 3.0])]),
        (f, vec![Val::F64(13.0), Val::F64s(vec![1.0])]),
        (f, vec![Val::F64(666.0), Val::F64s(vec![1.0])]),
        (f, vec![Val::F64(-1.0), Val::F64s(vec![1.0])]),
        (f, vec![Val::F64(0.5), Val::F64s(vec![])]),
        (g, vec![Val::Bool(true), Val::I64(3), Val::F32(2.5)]),
        (g, vec![Val::Bool(false), Val::I64(-3), Val::F32(2.5)]),
    ];
    let mut failures = 0;
    let mut panicked = 0;
    for (id, args) in cases {
        let mut ia = args.clone();
        let mut ja = args.clone();
        let ir =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| interp.call(id, &mut ia)));
        let jr = c.call(&mut ws, id, &mut ja);
        match (ir, jr) {
            (Ok(Ok(a)), Ok(b)) => {
                assert!(same_all(&a, &b), "{a:?} {b:?}");
                assert!(same_all(&ia, &ja), "{ia:?} {ja:?}");
            }
            // Both engines follow one host protocol (`engine::call_host`): a
            // host's panic is caught and becomes the same error on both.
            (Ok(Err(ie)), Err(je)) => {
                failures += 1;
                assert_eq!(je.to_string(), ie.to_string());
                assert!(same_all(&ia, &ja), "{ia:?} {ja:?}");
                if je.to_string().contains("it panicked") {
                    panicked += 1;
                    assert_eq!(
                        je.to_string(),
                        "in @f, call at 6:5: extern function @scale failed: it panicked: the host gave up"
                    );
                }
            }
            (ir, jr) => panic!(
                "interpreter {:?}, JIT {jr:?}",
                ir.map(|r| r.map_err(|e| e.to_string()))
            ),
        }
    }
    assert_eq!(failures, 4, "unlucky, panic, length, out of bounds");
    assert_eq!(panicked, 1, "the panicking host is among the cases");
    // The workspace serves the next call after a failing host.
    let out = c
        .call(&mut ws, f, &mut [Val::F64(3.0), Val::F64s(vec![1.0])])
        .unwrap();
    assert_eq!(out, [Val::F64(6.0)]);
}

#[test]
fn a_tape_limit_stops_a_runaway_forward_pass() {
    let m = module(TAPE);
    let c = compile(&m).unwrap();
    let id = m.func_by_name("roundtrip").unwrap();
    let make = m.func_by_name("make").unwrap();
    let mut ws = Workspace::new().with_max_tape_bytes(64 * 1024);
    // 4 slots per iteration: 2,048 iterations fill 64 KiB.
    let e = c
        .call(
            &mut ws,
            id,
            &mut [Val::I64(1 << 40), Val::F64(0.0), Val::F32(0.0)],
        )
        .unwrap_err();
    assert!(matches!(e.kind, ErrorKind::TapeFull(n) if n == 8192), "{e}");
    assert_eq!(e.op, "push");
    let e = c.call(&mut ws, make, &mut [Val::I64(1 << 20)]).unwrap_err();
    assert_eq!(e.kind, ErrorKind::AllocFailed(1 << 20));
    // After a reset the workspace serves calls within the limit.
    ws.reset_tape();
    let out = c
        .call(
            &mut ws,
            id,
            &mut [Val::I64(100), Val::F64(0.0), Val::F32(0.0)],
        )
        .unwrap();
    assert_eq!(out.len(), 1);
}
