//! Runtime errors of compiled code, argument checking and compile-time refusals.
//!
//! Each runtime error (out of bounds on `load` and `store` at -1 and at the length,
//! division by zero, negative and impossible `alloc`, the depth limit, `trap_if`, an
//! error deep in a callee) is an `Err` naming the function, the op and its position,
//! the same as the interpreter's; the process goes on, and the next call on the same
//! workspace succeeds.

mod support;

use gradlift_ir::interp::{ErrorKind, Interpreter, Limits, Val};
use gradlift_ir::{Module, Pos, parse};
use gradlift_jit::{CompileError, Hosts, Workspace, compile, compile_funcs, compile_with};
use support::{Compared, big_stack, compare, module};

const PROGRAM: &str = r#"
func @at(%x: [f64], %i: i64) -> f64 {
entry:
    %v = load %x[%i]
    ret %v
}

func @put(%x: mut [f64], %i: i64, %v: f64) {
entry:
    store %x[0], %v
    store %x[%i], %v
    ret
}

func @quot(%a: i64, %b: i64) -> i64 {
entry:
    %q = idiv %a, %b
    ret %q
}

func @rem(%a: i64, %b: i64) -> i64 {
entry:
    %r = irem %a, %b
    ret %r
}

func @buffer(%n: i64) -> f64 {
entry:
    %b = alloc f64, %n
    %k = len %b
    %f = cast f64 %k
    ret %f
}

func @down(%n: i64) -> i64 {
entry:
    %stop = icmp le %n, 0
    br %stop, done, more
more:
    %m = isub %n, 1
    %r = call @down(%m)
    %r1 = iadd %r, 1
    ret %r1
done:
    ret 0
}

func @check(%x: f64) -> f64 {
entry:
    %neg = fcmp lt %x, 0.0
    trap_if %neg, "x must not be negative: \"%x\""
    %big = fcmp gt %x, 100.0
    trap_if %big, "x too big"
    %r = sqrt %x
    ret %r
}

; An error three calls deep, after the outer function stored into its argument.
func @outer(%x: mut [f64], %i: i64) -> f64 {
entry:
    store %x[0], 7.0
    %r = call @middle(%x, %i)
    store %x[1], 8.0
    ret %r
}

func @middle(%x: [f64], %i: i64) -> f64 {
entry:
    %j = iadd %i, 1
    %r = call @at(%x, %j)
    ret %r
}
"#;

fn f(x: f64) -> Val {
    Val::F64(x)
}

fn i(x: i64) -> Val {
    Val::I64(x)
}

fn xs(v: &[f64]) -> Val {
    Val::F64s(v.to_vec())
}

/// Compares `name` at `bad` (which must fail on both engines with `kind`), then at
/// `good` on the same workspace (which must succeed).
#[track_caller]
fn fails_then_works(m: &Module, name: &str, bad: Vec<Val>, kind: ErrorKind, good: Vec<Val>) {
    let c = compile(m).unwrap();
    let mut ws = Workspace::new();
    let id = m.func_by_name(name).unwrap();
    assert_eq!(compare(m, &c, &mut ws, id, &bad), Compared::Errors);
    let e = c.call(&mut ws, id, &mut bad.clone()).unwrap_err();
    assert_eq!(e.kind, kind, "{e}");
    assert!(e.pos.is_known(), "{e}");
    assert_eq!(compare(m, &c, &mut ws, id, &good), Compared::Values);
}

#[test]
fn out_of_bounds_loads_and_stores_fail_and_the_workspace_goes_on() {
    let m = module(PROGRAM);
    let x = || xs(&[1.0, 2.0, 3.0]);
    for bad in [-1, 3, i64::MIN, i64::MAX] {
        fails_then_works(
            &m,
            "at",
            vec![x(), i(bad)],
            ErrorKind::OutOfBounds { index: bad, len: 3 },
            vec![x(), i(2)],
        );
        fails_then_works(
            &m,
            "put",
            vec![x(), i(bad), f(9.0)],
            ErrorKind::OutOfBounds { index: bad, len: 3 },
            vec![x(), i(1), f(9.0)],
        );
    }
    // The message, and the store made before the failing one stays.
    let c = compile(&m).unwrap();
    let mut ws = Workspace::new();
    let mut args = [x(), i(-1), f(9.0)];
    let e = c.call_by_name(&mut ws, "put", &mut args).unwrap_err();
    assert_eq!(
        e.to_string(),
        "in @put, store of %x at 11:5: index -1 out of bounds for length 3"
    );
    assert_eq!((e.func.as_str(), e.op.as_str()), ("put", "store"));
    assert_eq!(e.pos, Pos::new(11, 5));
    assert_eq!(args[0], xs(&[9.0, 2.0, 3.0]));
    let e = c
        .call_by_name(&mut ws, "at", &mut [xs(&[]), i(0)])
        .unwrap_err();
    assert_eq!(e.kind, ErrorKind::OutOfBounds { index: 0, len: 0 });
}

#[test]
fn division_by_zero_fails() {
    let m = module(PROGRAM);
    for name in ["quot", "rem"] {
        fails_then_works(
            &m,
            name,
            vec![i(7), i(0)],
            ErrorKind::DivisionByZero,
            vec![i(i64::MIN), i(-1)],
        );
    }
}

#[test]
fn negative_and_impossible_allocs_fail() {
    let m = module(PROGRAM);
    fails_then_works(
        &m,
        "buffer",
        vec![i(-3)],
        ErrorKind::NegativeAlloc(-3),
        vec![i(5)],
    );
    // More than the address space: both engines give up without aborting.
    for n in [i64::MAX, 1 << 61, 1 << 50] {
        fails_then_works(
            &m,
            "buffer",
            vec![i(n)],
            ErrorKind::AllocFailed(n),
            vec![i(0)],
        );
    }
}

#[test]
fn trap_if_fails_with_its_message() {
    let m = module(PROGRAM);
    fails_then_works(
        &m,
        "check",
        vec![f(-1.0)],
        ErrorKind::Trap("x must not be negative: \"%x\"".into()),
        vec![f(4.0)],
    );
    fails_then_works(
        &m,
        "check",
        vec![f(1000.0)],
        ErrorKind::Trap("x too big".into()),
        vec![f(100.0)],
    );
    let c = compile(&m).unwrap();
    let e = c
        .call_by_name(&mut Workspace::new(), "check", &mut [f(200.0)])
        .unwrap_err();
    assert_eq!(e.to_string(), "in @check, trap_if at 53:5: trap: x too big");
}

#[test]
fn an_error_deep_in_callees_names_the_callee_and_keeps_earlier_stores() {
    let m = module(PROGRAM);
    let c = compile(&m).unwrap();
    let mut ws = Workspace::new();
    let id = m.func_by_name("outer").unwrap();
    assert_eq!(
        compare(&m, &c, &mut ws, id, &[xs(&[0.0, 0.0, 5.0]), i(5)]),
        Compared::Errors
    );
    let mut args = [xs(&[0.0, 0.0, 5.0]), i(5)];
    let e = c.call(&mut ws, id, &mut args).unwrap_err();
    assert_eq!((e.func.as_str(), e.op.as_str()), ("at", "load"));
    assert_eq!(e.kind, ErrorKind::OutOfBounds { index: 6, len: 3 });
    assert_eq!(args[0], xs(&[7.0, 0.0, 5.0]));
    let mut args = [xs(&[0.0, 0.0, 5.0]), i(1)];
    assert_eq!(c.call(&mut ws, id, &mut args).unwrap(), [f(5.0)]);
    assert_eq!(args[0], xs(&[7.0, 8.0, 5.0]));
}

#[test]
fn the_depth_limit_is_the_interpreters() {
    big_stack(|| {
        let m = module(PROGRAM);
        let c = compile(&m).unwrap();
        let id = m.func_by_name("down").unwrap();
        let mut ws = Workspace::new();
        // 9,999 nested calls under the outermost: the deepest the limit allows.
        assert_eq!(c.call(&mut ws, id, &mut [i(9_999)]).unwrap(), [i(9_999)]);
        for n in [10_000, 20_000, 1 << 40] {
            assert_eq!(compare(&m, &c, &mut ws, id, &[i(n)]), Compared::Errors);
            let e = c.call(&mut ws, id, &mut [i(n)]).unwrap_err();
            assert_eq!(e.kind, ErrorKind::RecursionLimit(10_000));
            assert_eq!((e.func.as_str(), e.op.as_str()), ("down", "call"));
            assert_eq!(
                e.to_string(),
                "in @down, call at 41:5: calls nested deeper than 10000"
            );
            assert_eq!(c.call(&mut ws, id, &mut [i(3)]).unwrap(), [i(3)]);
        }
        // Other limits, as the interpreter's.
        for limit in [1, 2, 50] {
            let mut ws = Workspace::new().with_max_depth(limit);
            let mut interp = Interpreter::new(&m).with_limits(Limits {
                max_depth: limit,
                fuel: None,
            });
            for n in 0..60 {
                let a = interp.call(id, &mut [i(n)]);
                let b = c.call(&mut ws, id, &mut [i(n)]);
                match (a, b) {
                    (Ok(a), Ok(b)) => assert_eq!(a, b),
                    (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string()),
                    (a, b) => panic!("depth {limit}, n {n}: {a:?} {b:?}"),
                }
            }
        }
        let mut ws = Workspace::new().with_max_depth(0);
        let e = c.call(&mut ws, id, &mut [i(1)]).unwrap_err();
        assert_eq!(e.kind, ErrorKind::RecursionLimit(0));
    });
}

/// With no depth limit to speak of, recursion runs into the end of the native
/// stack: an error, not a crash, and the workspace works afterwards.
#[test]
fn running_out_of_native_stack_is_an_error() {
    let out = std::thread::Builder::new()
        .stack_size(2 << 20)
        .spawn(|| {
            let m = module(PROGRAM);
            let c = compile(&m).unwrap();
            let id = m.func_by_name("down").unwrap();
            let mut ws = Workspace::new().with_max_depth(usize::MAX);
            let e = c.call(&mut ws, id, &mut [i(100_000_000)]).unwrap_err();
            let ErrorKind::StackExhausted(depth) = e.kind else {
                panic!("{e}")
            };
            assert!(depth > 100, "{depth}");
            assert_eq!((e.func.as_str(), e.op.as_str()), ("down", "call"));
            assert!(e.to_string().contains("native stack exhausted"), "{e}");
            assert_eq!(c.call(&mut ws, id, &mut [i(50)]).unwrap(), [i(50)]);
            depth
        })
        .unwrap()
        .join()
        .unwrap();
    eprintln!("a 2 MiB stack held {out} nested calls of @down");
}

#[test]
fn arguments_are_checked_like_the_interpreters() {
    let m = module(PROGRAM);
    let c = compile(&m).unwrap();
    let mut ws = Workspace::new();
    let cases: Vec<(&str, Vec<Val>)> = vec![
        ("at", vec![xs(&[1.0])]),
        ("at", vec![xs(&[1.0]), i(0), i(0)]),
        ("at", vec![f(1.0), i(0)]),
        ("at", vec![xs(&[1.0]), f(0.0)]),
        ("at", vec![Val::F32s(vec![1.0]), i(0)]),
        ("at", vec![Val::I64s(vec![1]), i(0)]),
        ("put", vec![xs(&[1.0]), i(0), Val::F32(1.0)]),
        ("check", vec![Val::Bool(true)]),
        ("check", vec![]),
        ("buffer", vec![xs(&[])]),
    ];
    for (name, args) in cases {
        let id = m.func_by_name(name).unwrap();
        let want = Interpreter::new(&m)
            .call(id, &mut args.clone())
            .unwrap_err();
        assert!(matches!(want.kind, ErrorKind::BadArguments(_)), "{want}");
        let got = c.call(&mut ws, id, &mut args.clone()).unwrap_err();
        assert_eq!(got.kind, want.kind, "{got}");
        assert_eq!(got.to_string(), want.to_string());
        assert_eq!(got.op, "");
    }
    let e = c.call_by_name(&mut ws, "nope", &mut []).unwrap_err();
    assert_eq!(e.to_string(), "in @nope: the module has no function @nope");
    // A function not compiled into this `Compiled`.
    let only = compile_funcs(&m, &[m.func_by_name("quot").unwrap()]).unwrap();
    let e = only
        .call_by_name(&mut ws, "at", &mut [xs(&[1.0]), i(0)])
        .unwrap_err();
    assert_eq!(e.kind, ErrorKind::NotCompiled("at".into()));
    assert_eq!(
        only.call_by_name(&mut ws, "quot", &mut [i(7), i(2)])
            .unwrap(),
        [i(3)]
    );
}

#[test]
fn what_cannot_be_compiled_is_an_error() {
    // An extern without a host function: an error naming it and its caller; the
    // rest of the module compiles.
    let m = module(
        "extern @host(f64) -> f64
         func @uses(%x: f64) -> f64 {
         entry:
             %y = call @host(%x)
             ret %y
         }
         func @plain(%x: f64) -> f64 {
         entry:
             %y = fadd %x, 1.0
             ret %y
         }",
    );
    let e = compile(&m).unwrap_err();
    assert_eq!(
        e.to_string(),
        "in @uses, call at 4:14: @host is an extern function without a host function (bind one with Hosts::bind)"
    );
    let plain = m.func_by_name("plain").unwrap();
    let c = compile_funcs(&m, &[plain]).unwrap();
    assert_eq!(
        c.call(&mut Workspace::new(), plain, &mut [f(1.0)]).unwrap(),
        [f(2.0)]
    );
    let host = m.func_by_name("host").unwrap();
    assert!(matches!(
        compile_funcs(&m, &[host]),
        Err(CompileError::NotDefined(n)) if n == "host"
    ));
    // An extern returning a slice: not compiled (the interpreter runs it).
    let m = module(
        "extern @make(i64) -> [f64]
         func @uses(%n: i64) -> f64 {
         entry:
             %s = call @make(%n)
             %y = load %s[0]
             ret %y
         }",
    );
    let hosts = Hosts::new().bind("make", |_: &mut [Val]| Ok(vec![Val::F64s(vec![1.0])]));
    let uses = m.func_by_name("uses").unwrap();
    let e = compile_with(&m, &[uses], &hosts).unwrap_err();
    assert_eq!(
        e.to_string(),
        "in @uses, call at 4:14: @make returns a slice: the JIT calls host functions that return scalars only"
    );
    // A module that does not verify.
    let m = parse(
        "func @bad(%x: f64) -> f64 {
         entry:
             %y = fadd %x, %z
             ret %y
         }",
    );
    if let Ok(m) = m {
        assert!(matches!(compile(&m), Err(CompileError::Verify(_))));
    }
    let m = parse(
        "func @ro(%x: [f64]) {
         entry:
             store %x[0], 1.0
             ret
         }",
    )
    .unwrap();
    let e = compile(&m).unwrap_err();
    assert!(matches!(e, CompileError::Verify(_)), "{e}");
    assert!(e.to_string().contains("does not verify"), "{e}");
}

const ALLOCS: &str = r#"
; Buffers in a loop and in callees: each lives until its function returns.
func @fill(%n: i64, %k: i64) -> f64 {
entry:
    jump head
head:
    %i = phi i64 [entry: 0, body: %i1]
    %acc = phi f64 [entry: 0.0, body: %acc1]
    %more = icmp lt %i, %k
    br %more, body, exit
body:
    %buf = alloc f64, %n
    %s = call @ramp(%buf, %i)
    %tmp = alloc f32, %i
    %t = len %tmp
    %tf = cast f64 %t
    %acc0 = fadd %acc, %s
    %acc1 = fadd %acc0, %tf
    %i1 = iadd %i, 1
    jump head
exit:
    ret %acc
}

func @repeat(%x: mut [f64], %k: i64) -> f64 {
entry:
    jump head
head:
    %i = phi i64 [entry: 0, body: %i1]
    %acc = phi f64 [entry: 0.0, body: %acc1]
    %more = icmp lt %i, %k
    br %more, body, exit
body:
    %s = call @ramp(%x, %i)
    %acc1 = fadd %acc, %s
    %i1 = iadd %i, 1
    jump head
exit:
    ret %acc
}

func @ramp(%x: mut [f64], %c: i64) -> f64 {
entry:
    %n = len %x
    %scratch = alloc i64, %n
    %cf = cast f64 %c
    jump head
head:
    %i = phi i64 [entry: 0, body: %i1]
    %acc = phi f64 [entry: 0.0, body: %acc1]
    %more = icmp lt %i, %n
    br %more, body, exit
body:
    %old = load %x[%i]
    %si = load %scratch[%i]
    %sf = cast f64 %si
    %fi = cast f64 %i
    %v0 = fmul %fi, %cf
    %v1 = fadd %v0, %old
    %v = fadd %v1, %sf
    store %x[%i], %v
    store %scratch[%i], %i
    %acc1 = fadd %acc, %v
    %i1 = iadd %i, 1
    jump head
exit:
    ret %acc
}
"#;

#[test]
fn allocs_are_zeroed_scoped_and_reuse_the_arena() {
    let m = module(ALLOCS);
    let c = compile(&m).unwrap();
    let mut ws = Workspace::new();
    let id = m.func_by_name("fill").unwrap();
    for (n, k) in [
        (0, 3),
        (5, 4),
        (3000, 20),
        (100_000, 3),
        (7, 200),
        (3000, 20),
    ] {
        assert_eq!(
            compare(&m, &c, &mut ws, id, &[i(n), i(k)]),
            Compared::Values,
            "n {n} k {k}"
        );
    }
    // Steady state: the same call again does not grow the arena.
    let before = ws.arena_bytes();
    for _ in 0..3 {
        c.call(&mut ws, id, &mut [i(3000), i(20)]).unwrap();
        c.call(&mut ws, id, &mut [i(100_000), i(3)]).unwrap();
    }
    assert_eq!(ws.arena_bytes(), before);
    // Scoped: @ramp's scratch buffer dies when @ramp returns, so 500 calls of
    // @ramp on 1000 elements need 8 KB of arena, not 4 MB.
    let repeat = m.func_by_name("repeat").unwrap();
    let x = Val::F64s(support::wave(1000, 0.3));
    assert_eq!(
        compare(&m, &c, &mut ws, repeat, &[x.clone(), i(500)]),
        Compared::Values
    );
    let mut small = Workspace::new();
    c.call(&mut small, repeat, &mut [x, i(500)]).unwrap();
    assert!(small.arena_bytes() <= 64 * 1024, "{}", small.arena_bytes());
}

/// Four lanes of a shadow read, an unrelated read between, the lanes updated:
/// the lowering checks each range's two ends once before the first load
/// (`Checked` in `lower.rs`), and the stores into the same elements not at all.
const LANES: &str = r#"
func @lanes(%x: mut [f64], %y: [f64], %k: i64, %j: i64) -> f64 {
entry:
    %k4 = imul %k, 4
    %a0 = load %x[%k4]
    %k1 = iadd %k4, 1
    %a1 = load %x[%k1]
    %b = load %y[%j]
    %k2 = iadd %k4, 2
    %a2 = load %x[%k2]
    %s = fmul %a2, %b
    %k3 = iadd 3, %k4
    %a3 = load %x[%k3]
    %c0 = fadd %a0, %b
    %c1 = fadd %a1, %b
    %c2 = fadd %a2, %s
    %c3 = fadd %a3, %b
    store %x[%k4], %c0
    store %x[%k1], %c1
    store %x[%k2], %c2
    store %x[%k3], %c3
    %r = fadd %c0, %c3
    ret %r
}
"#;

#[test]
fn a_run_of_loads_checked_at_once_fails_at_the_first_failing_load() {
    let m = module(LANES);
    let c = compile(&m).unwrap();
    let mut ws = Workspace::new();
    let id = m.func_by_name("lanes").unwrap();
    let (mut errors, mut values) = (0, 0);
    // Every lane, the read of %y between, in bounds and out at either end, and
    // indices whose `imul` or `iadd` wraps.
    for n in [0, 3, 4, 5, 8, 11] {
        for k in [
            -2,
            -1,
            0,
            1,
            2,
            3,
            i64::MAX / 4,
            i64::MIN / 4,
            i64::MAX,
            i64::MIN,
        ] {
            for j in [-1, 0, 1, 2] {
                let x: Vec<f64> = (0..n).map(|i| i as f64 + 0.5).collect();
                let args = [xs(&x), xs(&[2.0, 3.0]), i(k), i(j)];
                match compare(&m, &c, &mut ws, id, &args) {
                    Compared::Errors => errors += 1,
                    Compared::Values => values += 1,
                    Compared::Skipped => panic!("no fuel is needed"),
                }
            }
        }
    }
    assert!(errors > 0 && values > 0, "{errors} errors, {values} values");
    // The first failing load is the one reported, lane by lane.
    let x: Vec<f64> = (0..6).map(|i| i as f64).collect();
    for (k, j, line, index) in [(1, 0, 10, 6), (2, 0, 5, 8), (1, 5, 8, 5), (0, 9, 8, 9)] {
        let mut args = [xs(&x), xs(&[2.0, 3.0]), i(k), i(j)];
        let e = c.call(&mut ws, id, &mut args).unwrap_err();
        assert_eq!(e.pos.line, line, "k {k}, j {j}: {e}");
        assert_eq!(
            e.kind,
            ErrorKind::OutOfBounds {
                index,
                len: if line == 8 { 2 } else { 6 }
            }
        );
    }
    // Two compares for the four lanes of %x, one for %y, none for the stores.
    let clif = support::clif(&m, "lanes");
    let checks = support::hot_bounds_checks(&clif);
    assert_eq!(checks, 3, "{clif}");
}
