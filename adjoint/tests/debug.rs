//! Debug mode (`RuleConfig::debug`): derived code that checks its invariants at run
//! time and fails with a message naming the function and the op; and that changes
//! nothing when the invariants hold.

use gradlift_adjoint::{CheckOptions, RuleConfig, build_rrule, check_derived};
use gradlift_adjoint::{Seeds, value_and_gradient};
use gradlift_ir::interp::{ErrorKind, Interpreter, RunError, Val};
use gradlift_ir::{Module, parse, verify};

fn debug_config(m: &Module, name: &str, check_nan: bool) -> RuleConfig {
    let id = m.func_by_name(name).unwrap();
    RuleConfig::default_for(m.sig(id)).with_debug(true, check_nan)
}

#[track_caller]
fn trap(e: &RunError) -> &str {
    match &e.kind {
        ErrorKind::Trap(m) => m,
        other => panic!("not a trap: {other:?} ({e})"),
    }
}

/// With debug mode on, every function of the memory corpus still passes
/// `check_rule`, and its rule verifies; the checks are in the text.
#[test]
fn debug_rules_pass_check_rule_on_the_memory_corpus() {
    let m = parse(include_str!("corpus/memory.ir")).unwrap();
    let args: &[(&str, Vec<Val>)] = &[
        ("prefix_sums", vec![Val::F64s(vec![0.5, 1.2, -0.3])]),
        (
            "buffer_through_calls",
            vec![Val::F64s(vec![0.5, 1.2, -0.3])],
        ),
        (
            "output_through_call",
            vec![
                Val::F64s(vec![0.5, 1.2]),
                Val::F64s(vec![0.0, 0.0]),
                Val::F64(1.7),
            ],
        ),
        (
            "rec_sum",
            vec![Val::F64s(vec![0.5, 1.2, -0.3]), Val::I64(0)],
        ),
        ("ping", vec![Val::F64(0.3), Val::I64(5)]),
        ("uses_vjp", vec![Val::F64(0.6)]),
        ("uses_overlay", vec![Val::F64(0.6)]),
        ("square_twice_sum", vec![Val::F64s(vec![0.5, 1.2, -0.3])]),
    ];
    for (name, a) in args {
        let id = m.func_by_name(name).unwrap();
        let rule = build_rrule(&m, id, &debug_config(&m, name, true)).unwrap();
        verify(&rule.module).unwrap();
        let text = rule.module.to_string();
        assert!(text.contains("trap_if"), "@{name}: no checks\n{text}");
        assert_eq!(parse(&text).unwrap().to_string(), text, "@{name}");
        check_derived(&m, &rule, a, &CheckOptions::f64())
            .unwrap_or_else(|e| panic!("@{name}: {e}"));
    }
}

/// A shadow shorter than its slice: the pullback's entry traps, naming the slice.
#[test]
fn a_shadow_of_another_length_traps() {
    let m = parse(include_str!("corpus/memory.ir")).unwrap();
    let rule = build_rrule(
        &m,
        m.func_by_name("sumsq").unwrap(),
        &debug_config(&m, "sumsq", false),
    )
    .unwrap();
    let mut engine = Interpreter::new(&rule.module);
    let x = Val::F64s(vec![1.0, 2.0, 3.0]);
    engine.call(rule.forward, &mut [x.clone()]).unwrap();
    let e = engine
        .call(
            rule.pullback,
            &mut [x, Val::F64s(vec![0.0, 0.0]), Val::F64(1.0)],
        )
        .unwrap_err();
    let msg = trap(&e);
    assert!(msg.contains("shadow of %x"), "{msg}");
    assert!(msg.contains("@sumsq"), "{msg}");
    assert_eq!(e.func, "sumsq.rvs");
    assert_eq!(e.op, "trap_if");
}

/// A custom rule that leaves something on the tape puts the caller's pullback out
/// of step: the marker check at its end names the function.
#[test]
fn a_pullback_out_of_step_with_its_forward_pass_traps() {
    let m = parse(
        "func @g(%x: f64) -> f64 {
         entry:
             %r = fmul %x, %x
             ret %r
         }
         ; A wrong rule: it pushes on the tape.
         func @g_vjp(%x: f64, %dy: f64) -> f64 {
         entry:
             push 1
             %t = fmul 2.0, %x
             %r = fmul %t, %dy
             ret %r
         }
         vjp @g = @g_vjp
         func @f(%x: f64) -> f64 {
         entry:
             %y = call @g(%x)
             %z = sin %y
             ret %z
         }",
    )
    .unwrap();
    let f = m.func_by_name("f").unwrap();
    let rule = build_rrule(&m, f, &debug_config(&m, "f", false)).unwrap();
    let mut engine = Interpreter::new(&rule.module);
    let e =
        value_and_gradient(&mut engine, &rule, &[Val::F64(0.5)], &Seeds::default()).unwrap_err();
    let gradlift_adjoint::EvalError::Run { error, .. } = e else {
        panic!("{e}")
    };
    let msg = trap(&error);
    assert!(msg.contains("out of step") && msg.contains("@f"), "{msg}");
    // Without debug mode the same rule runs to the end, and only the engine's
    // balance check notices.
    let plain = build_rrule(&m, f, &RuleConfig::default_for(m.sig(f))).unwrap();
    let mut engine = Interpreter::new(&plain.module);
    let e =
        value_and_gradient(&mut engine, &plain, &[Val::F64(0.5)], &Seeds::default()).unwrap_err();
    assert!(matches!(e, gradlift_adjoint::EvalError::Tape { .. }), "{e}");
}

/// `sqrt(x) * 0` at x = 0: the primal is 0, but the reverse of `sqrt` divides the
/// zero cotangent by zero. With `check_nan` that is a trap naming the statement;
/// without, the gradient is NaN.
#[test]
fn a_nan_created_in_the_pullback_traps_with_check_nan() {
    let m = parse(
        "func @f(%x: f64) -> f64 {
         entry:
             %s = sqrt %x
             %r = fmul %s, 0.0
             ret %r
         }",
    )
    .unwrap();
    let f = m.func_by_name("f").unwrap();
    let run = |config: &RuleConfig| {
        let rule = build_rrule(&m, f, config).unwrap();
        let mut engine = Interpreter::new(&rule.module);
        value_and_gradient(&mut engine, &rule, &[Val::F64(0.0)], &Seeds::default())
    };
    let out = run(&RuleConfig::default_for(m.sig(f))).unwrap();
    assert!(matches!(out.gradient[0], Some(Val::F64(g)) if g.is_nan()));
    let out = run(&debug_config(&m, "f", false)).unwrap();
    assert!(matches!(out.gradient[0], Some(Val::F64(g)) if g.is_nan()));
    let Err(gradlift_adjoint::EvalError::Run { error, .. }) = run(&debug_config(&m, "f", true))
    else {
        panic!("should trap")
    };
    let msg = trap(&error);
    assert!(
        msg.contains("NaN created by the reverse of `%s = sqrt %x`"),
        "{msg}"
    );
    assert!(msg.contains("@f"), "{msg}");
    // Away from 0 nothing traps.
    let rule = build_rrule(&m, f, &debug_config(&m, "f", true)).unwrap();
    let mut engine = Interpreter::new(&rule.module);
    let out = value_and_gradient(&mut engine, &rule, &[Val::F64(4.0)], &Seeds::default()).unwrap();
    assert_eq!(out.gradient, [Some(Val::F64(0.0))]);
}
