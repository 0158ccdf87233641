//! A failed gradient call leaves the workspace as it found it: whatever makes the
//! forward pass fail halfway (an index out of bounds, a division by zero, the
//! tape's cap, the recursion limit, the end of the native stack, a host function
//! that panics, the interpreter's fuel), nothing it pushed stays on the tape, and
//! the next valid call is right, on the JIT (`Workspace`, `GradientCache`) and on
//! the interpreter. Before, each failed call left its tape entries behind: 2,000
//! of them filled a 1 MB tape, and valid calls failed from then on.

use gradlift::adjoint::{Seeds, value_and_gradient};
use gradlift::ir::interp::Interpreter;
use gradlift::ir::{Module, parse, verify};
use gradlift::{CompiledGradient, Error, Pipeline, Val, Workspace};

/// `prod(x) * x[i] / (n / d)`: the loop saves its running product on the tape
/// (one scalar per element), then the load `x[i]` and the integer division
/// `n / d` may fail, after the pushes.
const RISKY: &str = "
func @risky(%x: [f64], %i: i64, %d: i64) -> f64 {
entry:
    %n = len %x
    jump head
head:
    %k = phi i64 [entry: 0, body: %k1]
    %acc = phi f64 [entry: 1.0, body: %acc1]
    %more = icmp lt %k, %n
    br %more, body, exit
body:
    %xk = load %x[%k]
    %acc1 = fmul %acc, %xk
    %k1 = iadd %k, 1
    jump head
exit:
    %xi = load %x[%i]
    %r = fmul %acc, %xi
    %q = idiv %n, %d
    %qf = cast f64 %q
    %out = fdiv %r, %qf
    ret %out
}
";

fn module() -> Module {
    let m = parse(RISKY).unwrap();
    verify(&m).unwrap();
    m
}

fn x(n: usize) -> Vec<f64> {
    (0..n).map(|k| 1.0 + 1e-4 * k as f64).collect()
}

fn args(x: &[f64], i: i64, d: i64) -> Vec<Val> {
    vec![Val::F64s(x.to_vec()), Val::I64(i), Val::I64(d)]
}

/// The value and the gradient with respect to `x`, in closed form.
fn closed_form(x: &[f64], i: usize, d: i64) -> (f64, Vec<f64>) {
    let p: f64 = x.iter().product();
    let q = (x.len() as i64 / d) as f64;
    let value = p * x[i] / q;
    let grad = (0..x.len())
        .map(|k| {
            let others: f64 = (0..x.len()).filter(|&j| j != k).map(|j| x[j]).product();
            (others * x[i] + if k == i { p } else { 0.0 }) / q
        })
        .collect();
    (value, grad)
}

#[track_caller]
fn check(value: f64, grad: &[f64], want: &(f64, Vec<f64>)) {
    assert!(
        (value - want.0).abs() <= 1e-12 * want.0.abs(),
        "{value} {}",
        want.0
    );
    for (g, w) in grad.iter().zip(&want.1) {
        assert!((g - w).abs() <= 1e-12 * w.abs(), "{grad:?} {:?}", want.1);
    }
}

fn gradient_of(g: &[Option<Val>]) -> Vec<f64> {
    match &g[0] {
        Some(Val::F64s(v)) => v.clone(),
        other => panic!("expected the gradient of x, got {other:?}"),
    }
}

fn scalar(v: &[Val]) -> f64 {
    match v {
        [Val::F64(y)] => *y,
        other => panic!("expected one f64, got {other:?}"),
    }
}

#[test]
fn failed_calls_leave_no_tape_in_the_workspace() {
    let grad = CompiledGradient::new(&module(), "risky").unwrap();
    let x = x(100);
    // 1 MB of tape: 2,000 failed calls of 100 pushes each would need 1.6 MB.
    let mut ws = Workspace::new().with_max_tape_bytes(1 << 20);
    for round in 0..2_000 {
        let bad = if round % 2 == 0 {
            args(&x, 100, 1) // x[100]: out of bounds
        } else {
            args(&x, 3, 0) // n / 0
        };
        let e = grad.value_and_gradient(&mut ws, &bad).unwrap_err();
        assert!(matches!(e, Error::Run(_)), "{e}");
        assert_eq!(ws.tape().scalars, 0, "round {round}: {e}");
    }
    let g = grad.value_and_gradient(&mut ws, &args(&x, 3, 4)).unwrap();
    check(
        scalar(g.value.as_deref().unwrap()),
        &gradient_of(&g.gradient),
        &closed_form(&x, 3, 4),
    );
}

#[test]
fn a_prepared_cache_survives_failed_calls() {
    let grad = CompiledGradient::new(&module(), "risky").unwrap();
    let x = x(50);
    let mut cache = grad.prepare(&args(&x, 0, 1)).unwrap();
    for _ in 0..1_000 {
        assert!(cache.value_and_gradient(&args(&x, -1, 1)).is_err());
        assert_eq!(cache.workspace().tape().scalars, 0);
    }
    let g = cache.value_and_gradient(&args(&x, 7, 5)).unwrap();
    let (value, gradient) = (scalar(g.value), gradient_of(g.gradient));
    check(value, &gradient, &closed_form(&x, 7, 5));
}

#[test]
fn the_tape_cap_fails_one_call_not_the_next() {
    let grad = CompiledGradient::new(&module(), "risky").unwrap();
    // 4 KB: 512 scalars. 1,000 elements do not fit, 100 do.
    let mut ws = Workspace::new().with_max_tape_bytes(4096);
    let (big, small) = (x(1_000), x(100));
    for _ in 0..100 {
        let e = grad
            .value_and_gradient(&mut ws, &args(&big, 0, 1))
            .unwrap_err();
        assert!(e.to_string().contains("tape"), "{e}");
        assert_eq!(ws.tape().scalars, 0);
        let g = grad
            .value_and_gradient(&mut ws, &args(&small, 9, 3))
            .unwrap();
        check(
            scalar(g.value.as_deref().unwrap()),
            &gradient_of(&g.gradient),
            &closed_form(&small, 9, 3),
        );
    }
}

/// `depth(n)` recurses n times; past the recursion limit, the call fails.
const DEEP: &str = "
func @deep(%x: f64, %n: i64) -> f64 {
entry:
    %done = icmp le %n, 0
    br %done, base, step
base:
    ret %x
step:
    %m = isub %n, 1
    %y = call @deep(%x, %m)
    %z = fmul %y, %x
    ret %z
}
";

#[test]
fn the_recursion_limit_fails_one_call_not_the_next() {
    let m = parse(DEEP).unwrap();
    let grad = CompiledGradient::new(&m, "deep").unwrap();
    let mut ws = Workspace::new();
    for _ in 0..20 {
        assert!(
            grad.value_and_gradient(&mut ws, &[Val::F64(1.0), Val::I64(1 << 40)])
                .is_err()
        );
        assert_eq!(ws.tape().scalars, 0);
        // x^(n+1), whose derivative is (n+1) x^n.
        let g = grad
            .value_and_gradient(&mut ws, &[Val::F64(1.5), Val::I64(4)])
            .unwrap();
        assert_eq!(g.value, Some(vec![Val::F64(1.5f64.powi(5))]));
        let Some(Val::F64(d)) = g.gradient[0] else {
            panic!("{:?}", g.gradient)
        };
        assert!((d - 5.0 * 1.5f64.powi(4)).abs() < 1e-12);
    }
}

#[test]
fn the_interpreter_too() {
    let rule = Pipeline::new().derive(&module(), "risky", None).unwrap();
    let mut interp = Interpreter::new(&rule.module);
    let x = x(20);
    for _ in 0..200 {
        let e = value_and_gradient(&mut interp, &rule, &args(&x, 20, 1), &Seeds::default());
        assert!(e.is_err());
        assert_eq!(interp.tape().scalars, 0);
        let g = value_and_gradient(&mut interp, &rule, &args(&x, 2, 2), &Seeds::default()).unwrap();
        check(
            scalar(g.value.as_deref().unwrap()),
            &gradient_of(&g.gradient),
            &closed_form(&x, 2, 2),
        );
    }
}

#[test]
fn failing_and_valid_calls_alternate_a_hundred_thousand_times() {
    let grad = CompiledGradient::new(&module(), "risky").unwrap();
    let x = x(8);
    let want = closed_form(&x, 5, 2);
    let mut ws = Workspace::new();
    let (good, bad) = (args(&x, 5, 2), args(&x, 8, 2));
    let mut peak = 0;
    for k in 0..100_000 {
        assert!(grad.value_and_gradient(&mut ws, &bad).is_err());
        let g = grad.value_and_gradient(&mut ws, &good).unwrap();
        peak = peak.max(g.tape_peak_bytes);
        if k % 10_000 == 0 {
            check(
                scalar(g.value.as_deref().unwrap()),
                &gradient_of(&g.gradient),
                &want,
            );
        }
    }
    // The tape stays bounded: at most a valid call's own (8 scalars and a few).
    assert!(peak <= 8 * 16, "{peak}");
    assert_eq!(ws.tape().scalars, 0);
}

/// `prod(x) * check(x[0])`, where the host function `check` panics on a negative
/// number (and is constant to the derivative: `nodiff`).
const HOSTED: &str = "
extern @check(f64) -> f64
nodiff @check

func @hosted(%x: [f64]) -> f64 {
entry:
    %n = len %x
    jump head
head:
    %k = phi i64 [entry: 0, body: %k1]
    %acc = phi f64 [entry: 1.0, body: %acc1]
    %more = icmp lt %k, %n
    br %more, body, exit
body:
    %xk = load %x[%k]
    %acc1 = fmul %acc, %xk
    %k1 = iadd %k, 1
    jump head
exit:
    %x0 = load %x[0]
    %c = call @check(%x0)
    %r = fmul %acc, %c
    ret %r
}
";

#[test]
fn a_host_function_that_panics_fails_one_call_not_the_next() {
    let m = parse(HOSTED).unwrap();
    verify(&m).unwrap();
    let hosts = gradlift::Hosts::new().bind("check", |args: &mut [Val]| match args {
        [Val::F64(v)] if *v < 0.0 => panic!("check: {v} is negative"),
        [Val::F64(_)] => Ok(vec![Val::F64(2.0)]),
        other => Err(format!("check takes one f64, given {other:?}")),
    });
    let id = m.func_by_name("hosted").unwrap();
    let config = gradlift::adjoint::RuleConfig::default_for(m.sig(id));
    let grad = CompiledGradient::with_options(
        &m,
        "hosted",
        &config,
        &hosts,
        &gradlift::ir::opt::OptConfig::default(),
    )
    .unwrap();
    let mut ws = Workspace::new();
    let (bad, good) = (vec![-1.0, 2.0, 3.0], vec![1.5, 2.0, 3.0]);
    for _ in 0..100 {
        let e = grad
            .value_and_gradient(&mut ws, &[Val::F64s(bad.clone())])
            .unwrap_err();
        assert!(e.to_string().contains("is negative"), "{e}");
        assert_eq!(ws.tape().scalars, 0);
        // 2 prod(x), whose gradient is 2 prod(x) / x_k.
        let g = grad
            .value_and_gradient(&mut ws, &[Val::F64s(good.clone())])
            .unwrap();
        assert_eq!(g.value, Some(vec![Val::F64(18.0)]));
        assert_eq!(g.gradient, [Some(Val::F64s(vec![12.0, 9.0, 6.0]))]);
    }
}

/// `@deep`'s value and derivative in closed form: x^(n+1) and (n+1) x^n.
fn deep_closed_form(x: f64, n: i32) -> (f64, f64) {
    (x.powi(n + 1), f64::from(n + 1) * x.powi(n))
}

/// The gradient of `@deep` at (x, n): its value and its derivative in x.
fn deep_gradient(grad: &CompiledGradient, ws: &mut Workspace, x: f64, n: i64) -> (f64, f64) {
    let g = grad
        .value_and_gradient(ws, &[Val::F64(x), Val::I64(n)])
        .unwrap();
    let Some(Val::F64(d)) = g.gradient[0] else {
        panic!("{:?}", g.gradient)
    };
    (scalar(g.value.as_deref().unwrap()), d)
}

#[track_caller]
fn close(got: (f64, f64), want: (f64, f64)) {
    for (g, w) in [(got.0, want.0), (got.1, want.1)] {
        assert!((g - w).abs() <= 1e-12 * w.abs(), "{got:?} {want:?}");
    }
}

/// With no depth limit to speak of, the forward pass of `@deep` recurses until the
/// native stack runs out: compiled code checks the stack pointer at each call and
/// fails with `StackExhausted` instead of overflowing. The workspace then computes
/// the next gradient right, on the same thread, as often as this happens.
#[test]
fn running_out_of_native_stack_fails_one_gradient_not_the_next() {
    let deepest = std::thread::Builder::new()
        .stack_size(2 << 20)
        .spawn(|| {
            let grad = CompiledGradient::new(&parse(DEEP).unwrap(), "deep").unwrap();
            let mut ws = Workspace::new().with_max_depth(usize::MAX);
            let mut deepest = 0;
            for round in 0..20 {
                let e = grad
                    .value_and_gradient(&mut ws, &[Val::F64(1.0), Val::I64(1 << 40)])
                    .unwrap_err();
                let Error::Run(run) = &e else {
                    panic!("round {round}: {e}")
                };
                let gradlift::jit::ErrorKind::StackExhausted(depth) = run.kind else {
                    panic!("round {round}: not the native stack: {e}")
                };
                assert!(depth > 100, "{depth}");
                assert_eq!((run.op.as_str(), run.func.as_str()), ("call", "deep.fwd"));
                deepest = depth;
                // Nothing of the failed forward pass stays on the tape.
                assert_eq!(ws.tape().scalars, 0, "round {round}");
                let n = 3 + round;
                let got = deep_gradient(&grad, &mut ws, 1.25, i64::from(n));
                close(got, deep_closed_form(1.25, n));
                // A deep recursion that fits the stack is right too.
                let got = deep_gradient(&grad, &mut ws, 1.0001, 80);
                close(got, deep_closed_form(1.0001, 80));
            }
            deepest
        })
        .unwrap()
        .join()
        .unwrap();
    eprintln!("a 2 MiB stack held {deepest} nested calls of @deep.fwd");
}

/// `sum_{k < n} x^2`, a loop whose forward pass and pullback run about 10 n
/// statements each: with fuel for some n, the interpreter runs out for larger n.
const LOOP: &str = "
func @loop(%x: f64, %n: i64) -> f64 {
entry:
    jump head
head:
    %k = phi i64 [entry: 0, body: %k1]
    %acc = phi f64 [entry: 0.0, body: %acc1]
    %more = icmp lt %k, %n
    br %more, body, exit
body:
    %xx = fmul %x, %x
    %acc1 = fadd %acc, %xx
    %k1 = iadd %k, 1
    jump head
exit:
    ret %acc
}
";

/// The interpreter with a fuel limit: a gradient that runs out of fuel, in its
/// forward pass or in its pullback, fails with `OutOfFuel` and leaves the tape
/// empty; the next gradient on the same interpreter is right.
#[test]
fn running_out_of_fuel_fails_one_gradient_not_the_next() {
    use gradlift::adjoint::EvalError;
    use gradlift::ir::interp::{ErrorKind, Limits};

    let m = parse(LOOP).unwrap();
    // The two passes (a sum's fused rule is one function, no pullback to starve).
    let config = gradlift::adjoint::RuleConfig::default_for(m.sig(m.func_by_name("loop").unwrap()))
        .with_fuse(false);
    let rule = Pipeline::new().derive(&m, "loop", Some(&config)).unwrap();
    // How many statements each function runs at n = 1,000, without a limit.
    let mut free = Interpreter::new(&rule.module);
    free.call(rule.forward, &mut [Val::F64(0.5), Val::I64(1000)])
        .unwrap();
    let forward = free.steps();
    let args = |x: f64, n: i64| [Val::F64(x), Val::I64(n)];
    free.reset_tape();
    value_and_gradient(&mut free, &rule, &args(0.5, 1000), &Seeds::default()).unwrap();
    let pullback = free.steps();
    assert!(forward > 1000 && pullback > 1000, "{forward} {pullback}");

    let check = |interp: &mut Interpreter<'_>, x: f64, n: i64| {
        let g = value_and_gradient(interp, &rule, &args(x, n), &Seeds::default()).unwrap();
        let Some(Val::F64(d)) = g.gradient[0] else {
            panic!("{:?}", g.gradient)
        };
        // n x^2 and its derivative 2 n x.
        let nf = n as f64;
        close(
            (scalar(g.value.as_deref().unwrap()), d),
            (nf * x * x, 2.0 * nf * x),
        );
        assert_eq!(interp.tape().scalars, 0);
    };
    let out_of_fuel = |interp: &mut Interpreter<'_>, n: i64, which: &str, fuel: u64| {
        let e = value_and_gradient(interp, &rule, &args(0.5, n), &Seeds::default()).unwrap_err();
        let EvalError::Run { what, error } = &e else {
            panic!("{e}")
        };
        assert_eq!(
            (what.as_str(), &error.kind),
            (which, &ErrorKind::OutOfFuel(fuel))
        );
        assert_eq!(interp.steps(), fuel);
        assert_eq!(interp.tape().scalars, 0, "{e}");
    };

    // Fuel for the forward pass at n = 1,000 but not for its pullback (whose
    // statements are more), then fuel for neither at n = 100,000.
    let fuel = pullback - 1;
    assert!(forward <= fuel, "{forward} {pullback}");
    let mut interp = Interpreter::new(&rule.module).with_limits(Limits {
        fuel: Some(fuel),
        ..Limits::default()
    });
    for round in 0..10 {
        out_of_fuel(&mut interp, 1000, "@loop.rvs", fuel);
        check(&mut interp, 0.25 + f64::from(round), 10 + i64::from(round));
        out_of_fuel(&mut interp, 100_000, "@loop.fwd", fuel);
        check(&mut interp, -1.5, 999);
    }
}
