//! The tape ops and host functions in compiled code, against the interpreter: the
//! same calls in the same order on one interpreter and one workspace give the same
//! results, the same errors, and the same tape heights.

mod support;

use gradlift_ir::interp::{ErrorKind, Interpreter, Val};
use gradlift_ir::{Elem, Module, Type};
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

/// Pops of the wrong type. `@mixed` pushes an i64, an f32 and a bool and pops them
/// back as `mode` says: 0 in their own types; 1 the bool as an f64; 2 the bool and
/// the f32 rightly, then the i64 as an f64; 3 the bool rightly, then the f32 as an
/// i64; 4 all three rightly, then one more (an empty tape). `@pop_as_f64` pops an
/// f64 off whatever an earlier call left.
const TYPES: &str = "
func @mixed(%k: i64, %y: f32, %mode: i64) -> f64 {
entry:
    push %k
    push %y
    %b = icmp gt %k, 0
    push %b
    %b2 = pop bool
    %m1 = icmp eq %mode, 1
    br %m1, bool_as_f64, rest
bool_as_f64:
    push %b2
    %z1 = pop f64
    ret %z1
rest:
    %m3 = icmp eq %mode, 3
    br %m3, f32_as_i64, f32_ok
f32_as_i64:
    %j = pop i64
    %jf = cast f64 %j
    ret %jf
f32_ok:
    %y2 = pop f32
    %m2 = icmp eq %mode, 2
    br %m2, i64_as_f64, i64_ok
i64_as_f64:
    %z2 = pop f64
    ret %z2
i64_ok:
    %k2 = pop i64
    %m4 = icmp eq %mode, 4
    br %m4, one_more, sum
one_more:
    %z4 = pop f64
    ret %z4
sum:
    %yf = cast f64 %y2
    %kf = cast f64 %k2
    %bf = cast f64 %b2
    %s = fadd %yf, %kf
    %r = fadd %s, %bf
    ret %r
}

func @push_i64(%k: i64) {
entry:
    push %k
    ret
}

func @push_f32(%y: f32) {
entry:
    push %y
    ret
}

func @push_bool(%b: bool) {
entry:
    push %b
    ret
}

func @push_f64(%x: f64) {
entry:
    push %x
    ret
}

func @pop_as_f64() -> f64 {
entry:
    %v = pop f64
    ret %v
}
";

/// `@mixed`'s value in mode 0: y + k + (k > 0).
fn mixed_sum(k: i64, y: f32) -> f64 {
    f64::from(y) + k as f64 + if k > 0 { 1.0 } else { 0.0 }
}

#[test]
fn a_pop_of_the_wrong_type_fails_as_on_the_interpreter() {
    let m = module(TYPES);
    let c = compile(&m).unwrap();
    let mixed = |mode: i64| ("mixed", vec![Val::I64(7), Val::F32(2.5), Val::I64(mode)]);
    // Same errors (kind, function, op, position, message) and same tape heights:
    // the failed pop leaves the tape as it was, on both engines.
    same_sequence(
        &m,
        &c,
        &[
            mixed(0),
            mixed(1),
            mixed(2),
            mixed(3),
            mixed(4),
            mixed(0),
            ("push_i64", vec![Val::I64(7)]),
            ("pop_as_f64", vec![]),
            ("push_f32", vec![Val::F32(1.5)]),
            ("pop_as_f64", vec![]),
            ("push_bool", vec![Val::Bool(true)]),
            ("pop_as_f64", vec![]),
            ("push_f64", vec![Val::F64(0.25)]),
            ("pop_as_f64", vec![]),
        ],
        true,
    );
}

#[test]
fn a_pushed_i64_popped_as_f64_is_an_error_not_its_bits() {
    let m = module(TYPES);
    let c = compile(&m).unwrap();
    let mut ws = Workspace::new();
    let mut interp = Interpreter::new(&m);
    let push = m.func_by_name("push_i64").unwrap();
    let pop = m.func_by_name("pop_as_f64").unwrap();
    let (bool_, f32_) = (
        m.func_by_name("push_bool").unwrap(),
        m.func_by_name("push_f32").unwrap(),
    );
    for (pushed, arg, ty) in [
        (push, Val::I64(7), Type::I64),
        (f32_, Val::F32(1.5), Type::F32),
        (bool_, Val::Bool(true), Type::Bool),
    ] {
        ws.reset_tape();
        interp.reset_tape();
        c.call(&mut ws, pushed, &mut [arg.clone()]).unwrap();
        interp.call(pushed, &mut [arg]).unwrap();
        // Before, the JIT returned the slot's bits: f64::from_bits(7), a subnormal.
        let je = c.call(&mut ws, pop, &mut []).unwrap_err();
        let ie = interp.call(pop, &mut []).unwrap_err();
        let kind = ErrorKind::TapeMismatch {
            expected: Type::F64,
            found: ty,
        };
        assert_eq!(je.kind, kind, "{je}");
        assert_eq!(ie.kind, kind, "{ie}");
        assert_eq!(
            (je.func.as_str(), je.op.as_str(), je.pos),
            (ie.func.as_str(), ie.op.as_str(), ie.pos)
        );
        assert_eq!(je.to_string(), ie.to_string());
        let article = if ty == Type::Bool { "a" } else { "an" };
        assert_eq!(
            je.to_string(),
            format!("in @pop_as_f64, pop at 71:5: pop f64 found {article} {ty} on the tape")
        );
        // The failed pop took nothing off the tape.
        assert_eq!(ws.tape().scalars, 1);
        assert_eq!(interp.tape().scalars, 1);
    }
}

#[test]
fn after_a_wrong_pop_the_workspace_computes_the_next_call_right() {
    let m = module(TYPES);
    let c = compile(&m).unwrap();
    let mixed = m.func_by_name("mixed").unwrap();
    let mut ws = Workspace::new();
    for round in 0..100i64 {
        let mode = 1 + round % 4;
        ws.reset_tape();
        let e = c
            .call(
                &mut ws,
                mixed,
                &mut [Val::I64(round), Val::F32(0.5), Val::I64(mode)],
            )
            .unwrap_err();
        let want = if mode == 4 {
            ErrorKind::TapeUnderflow
        } else {
            let found = [Type::Bool, Type::I64, Type::F32][mode as usize - 1];
            let expected = if mode == 3 { Type::I64 } else { Type::F64 };
            ErrorKind::TapeMismatch { expected, found }
        };
        assert_eq!(e.kind, want, "round {round}: {e}");
        // The failed call left what it had not popped (as on the interpreter); the
        // next call works on top of it.
        let left = ws.tape().scalars;
        assert_eq!(left, [3, 1, 2, 0][mode as usize - 1], "round {round}");
        let (k, y) = (round - 50, 0.25 * round as f32);
        let out = c
            .call(&mut ws, mixed, &mut [Val::I64(k), Val::F32(y), Val::I64(0)])
            .unwrap();
        assert_eq!(out, [Val::F64(mixed_sum(k, y))], "round {round}");
        assert_eq!(ws.tape().scalars, left);
    }
}

/// Many pushes in one block: the JIT keeps the block's tags in registers and
/// writes them back together (and its height once), so these check that they are
/// written back wherever something reads them: across a growth of the tape in
/// the middle of the block, on the way to an error after the pushes, and before a
/// pop in the same block.
const MANY: &str = "
func @push_lots(%n: i64) {
entry:
    jump head
head:
    %i = phi i64 [entry: 0, body: %i1]
    %more = icmp lt %i, %n
    br %more, body, exit
body:
    %f = cast f64 %i
    push %f
    %i1 = iadd %i, 1
    jump head
exit:
    ret
}

func @pop_lots(%n: i64) -> f64 {
entry:
    jump head
head:
    %i = phi i64 [entry: 0, body: %i1]
    %acc = phi f64 [entry: 0.0, body: %acc1]
    %more = icmp lt %i, %n
    br %more, body, exit
body:
    %f = pop f64
    %acc1 = fadd %acc, %f
    %i1 = iadd %i, 1
    jump head
exit:
    ret %acc
}

; eleven pushes of all four types, a load that fails for i out of bounds, and a
; twelfth push
func @many(%x: [f64], %i: i64, %k: i64) {
entry:
    %f = cast f64 %k
    %g = cast f32 %k
    %b = icmp gt %k, 0
    push %k
    push %f
    push %g
    push %b
    push %f
    push %k
    push %b
    push %g
    push %k
    push %f
    push %b
    %v = load %x[%i]
    push %v
    ret
}

; the eleven, last first: 4 f + 3 k + 2 g + 3 b
func @unmany11() -> f64 {
entry:
    %b1 = pop bool
    %f1 = pop f64
    %k1 = pop i64
    %g1 = pop f32
    %b2 = pop bool
    %k2 = pop i64
    %f2 = pop f64
    %b3 = pop bool
    %g3 = pop f32
    %f3 = pop f64
    %k3 = pop i64
    %s1 = fadd %f1, %f2
    %s2 = fadd %s1, %f3
    %kk1 = iadd %k1, %k2
    %kk = iadd %kk1, %k3
    %kf = cast f64 %kk
    %s3 = fadd %s2, %kf
    %gg = fadd %g1, %g3
    %gf = cast f64 %gg
    %s4 = fadd %s3, %gf
    %bb1 = cast f64 %b1
    %bb2 = cast f64 %b2
    %bb3 = cast f64 %b3
    %s5 = fadd %s4, %bb1
    %s6 = fadd %s5, %bb2
    %s7 = fadd %s6, %bb3
    ret %s7
}

; all twelve
func @unmany() -> f64 {
entry:
    %v = pop f64
    %s = call @unmany11()
    %r = fadd %s, %v
    ret %r
}

; pushes an i64 and pops it back as an f64 in the same block
func @same_block(%k: i64) -> f64 {
entry:
    push %k
    push %k
    %a = pop i64
    %z = pop f64
    ret %z
}
";

/// `@unmany11`'s value: 3 f + 3 k + 2 g + 3 [k > 0], with f = g = k.
fn unmany11(k: i64) -> f64 {
    let k = k as f64;
    3.0 * k + 3.0 * k + 2.0 * k + if k > 0.0 { 3.0 } else { 0.0 }
}

#[test]
fn the_tags_of_many_pushes_in_a_block_are_written_where_they_are_read() {
    let m = module(MANY);
    let c = compile(&m).unwrap();
    let x = || Val::F64s(vec![0.5]);
    let lots = |n| Val::I64(n);
    // 1,020 scalars first: @many's fifth push grows the tape (1,024 slots), in the
    // middle of the block.
    let calls = [
        ("push_lots", vec![lots(1020)]),
        ("many", vec![x(), Val::I64(0), Val::I64(3)]),
        ("unmany", vec![]),
        ("many", vec![x(), Val::I64(5), Val::I64(-2)]),
        ("unmany11", vec![]),
        ("pop_lots", vec![lots(1020)]),
        ("many", vec![x(), Val::I64(-1), Val::I64(7)]),
        ("pop_lots", vec![lots(1)]),
        ("unmany11", vec![]),
        ("same_block", vec![Val::I64(7)]),
        ("unmany11", vec![]),
    ];
    same_sequence(&m, &c, &calls, true);
    // And the values are the closed forms.
    let mut ws = Workspace::new();
    let call = |ws: &mut Workspace, name: &str, mut args: Vec<Val>| {
        c.call(ws, m.func_by_name(name).unwrap(), &mut args)
    };
    call(&mut ws, "push_lots", vec![lots(1020)]).unwrap();
    call(&mut ws, "many", vec![x(), Val::I64(0), Val::I64(3)]).unwrap();
    assert_eq!(ws.tape().scalars, 1032);
    assert_eq!(
        call(&mut ws, "unmany", vec![]).unwrap(),
        [Val::F64(unmany11(3) + 0.5)]
    );
    let e = call(&mut ws, "many", vec![x(), Val::I64(5), Val::I64(-2)]).unwrap_err();
    assert!(
        matches!(e.kind, ErrorKind::OutOfBounds { index: 5, len: 1 }),
        "{e}"
    );
    assert_eq!(ws.tape().scalars, 1031);
    assert_eq!(
        call(&mut ws, "unmany11", vec![]).unwrap(),
        [Val::F64(unmany11(-2))]
    );
    let sum: f64 = (0..1020).map(f64::from).sum();
    assert_eq!(
        call(&mut ws, "pop_lots", vec![lots(1020)]).unwrap(),
        [Val::F64(sum)]
    );
    assert_eq!(ws.tape().scalars, 0);
    let e = call(&mut ws, "same_block", vec![Val::I64(7)]).unwrap_err();
    assert_eq!(
        e.kind,
        ErrorKind::TapeMismatch {
            expected: Type::F64,
            found: Type::I64
        }
    );
    assert_eq!(ws.tape().scalars, 1);
}

#[test]
fn without_tape_checks_a_wrong_pop_reads_the_bits_and_the_rest_is_the_same() {
    use gradlift_jit::{CompileOptions, compile_with_options};
    let m = module(TYPES);
    let roots: Vec<_> = m.defined().map(|(f, _)| f).collect();
    let off = CompileOptions::new().with_tape_checks(false);
    let c = compile_with_options(&m, &roots, &Hosts::new(), &off).unwrap();
    // Matched pushes and pops, and an empty tape, are as on the interpreter.
    same_sequence(
        &m,
        &c,
        &[
            ("mixed", vec![Val::I64(7), Val::F32(2.5), Val::I64(0)]),
            ("mixed", vec![Val::I64(-3), Val::F32(0.5), Val::I64(4)]),
            ("push_f64", vec![Val::F64(0.25)]),
            ("pop_as_f64", vec![]),
            ("pop_as_f64", vec![]),
        ],
        true,
    );
    // A pop of another type reads the slot's bits.
    let mut ws = Workspace::new();
    let push = m.func_by_name("push_i64").unwrap();
    let pop = m.func_by_name("pop_as_f64").unwrap();
    c.call(&mut ws, push, &mut [Val::I64(7)]).unwrap();
    let out = c.call(&mut ws, pop, &mut []).unwrap();
    assert_eq!(out, [Val::F64(f64::from_bits(7))]);
    assert_eq!(ws.tape().scalars, 0);
    // The MANY program too, without tags.
    let m = module(MANY);
    let roots: Vec<_> = m.defined().map(|(f, _)| f).collect();
    let c = compile_with_options(&m, &roots, &Hosts::new(), &off).unwrap();
    let x = || Val::F64s(vec![0.5]);
    same_sequence(
        &m,
        &c,
        &[
            ("push_lots", vec![Val::I64(1020)]),
            ("many", vec![x(), Val::I64(0), Val::I64(3)]),
            ("unmany", vec![]),
            ("many", vec![x(), Val::I64(5), Val::I64(-2)]),
            ("unmany11", vec![]),
            ("pop_lots", vec![Val::I64(1020)]),
            ("pop_lots", vec![Val::I64(1)]),
        ],
        true,
    );
}
