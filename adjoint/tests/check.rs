//! `check_rule` catches broken rules: a wrong cotangent, a tape left unbalanced, a
//! primal that differs, arguments that do not fit.

use gradlift_adjoint::{
    CheckError, CheckOptions, Coord, RuleConfig, build_rrule, check_derived, check_rule,
};
use gradlift_ir::interp::Val;
use gradlift_ir::{FunctionBuilder, Imm, Module, Opcode, Terminator, parse};

fn poly() -> Module {
    parse(
        "func @f(%x: f64, %y: f64) -> f64 {
         entry:
             %xx = fmul %x, %x
             %y3 = fmul 3.0, %y
             %r = fadd %xx, %y3
             ret %r
         }",
    )
    .unwrap()
}

#[test]
fn a_correct_rule_passes_and_reports_its_gradient() {
    let m = poly();
    let f = m.func_by_name("f").unwrap();
    let args = [Val::F64(2.0), Val::F64(1.0)];
    let report = check_rule(
        &m,
        f,
        &RuleConfig::default_for(m.sig(f)),
        &args,
        &CheckOptions::default(),
    )
    .unwrap();
    assert_eq!(report.primal, [Val::F64(7.0)]);
    let scalar = |param| Coord { param, index: None };
    assert_eq!(report.coords, [scalar(0), scalar(1)]);
    assert_eq!(report.gradient, [4.0, 3.0]);
    assert!((report.finite_differences[0] - 4.0).abs() < 1e-6);
    assert_eq!(report.dot.len(), 2);
}

/// Replaces the pullback's body of `rule` by one returning `values` (constants).
fn rigged(m: &Module, values: [f64; 2]) -> gradlift_adjoint::Rule {
    let f = m.func_by_name("f").unwrap();
    let mut rule = build_rrule(m, f, &RuleConfig::default_for(m.sig(f))).unwrap();
    // Pop what the forward pass pushed (x), so only the values are wrong.
    let fwd = rule.module.function(rule.forward).unwrap();
    let pushes = fwd
        .placed_insts()
        .filter(|&(_, i)| fwd.insts[i].opcode == Opcode::Push)
        .count();
    assert_eq!(pushes, 1);
    let mut b = FunctionBuilder::new(&rule.module, rule.pullback);
    b.pop(gradlift_ir::Type::F64);
    let vals = values.map(|x| b.fconst(x));
    b.ret(&vals);
    let body = b.finish().unwrap();
    *rule.module.function_mut(rule.pullback).unwrap() = body;
    rule
}

#[test]
fn a_wrong_cotangent_is_caught() {
    let m = poly();
    let rule = rigged(&m, [4.0, 2.0]);
    let err = check_derived(
        &m,
        &rule,
        &[Val::F64(2.0), Val::F64(1.0)],
        &CheckOptions::default(),
    )
    .unwrap_err();
    assert!(
        matches!(err, CheckError::Gradient { param: 1, .. }),
        "{err}"
    );
    assert!(err.to_string().contains("parameter 2"), "{err}");
}

#[test]
fn an_unbalanced_tape_is_caught() {
    let m = poly();
    let f = m.func_by_name("f").unwrap();
    let mut rule = build_rrule(&m, f, &RuleConfig::default_for(m.sig(f))).unwrap();
    // The forward pass pushes one scalar more than the pullback pops.
    let fwd = rule.module.function_mut(rule.forward).unwrap();
    let entry = fwd.layout[0];
    let one = fwd.make_const(gradlift_ir::Scalar::I64(1));
    let push = fwd.make_inst(Opcode::Push, Imm::None, &[one], &[]);
    fwd.insert_inst(entry, 0, push);
    let err = check_derived(
        &m,
        &rule,
        &[Val::F64(2.0), Val::F64(1.0)],
        &CheckOptions::default(),
    )
    .unwrap_err();
    assert!(
        matches!(
            err,
            CheckError::Tape {
                before: 0,
                after: 1
            }
        ),
        "{err}"
    );
}

#[test]
fn a_wrong_primal_is_caught() {
    let m = poly();
    let f = m.func_by_name("f").unwrap();
    let mut rule = build_rrule(&m, f, &RuleConfig::default_for(m.sig(f))).unwrap();
    let fwd = rule.module.function_mut(rule.forward).unwrap();
    let entry = fwd.layout[0];
    let zero = fwd.make_const(gradlift_ir::Scalar::F64(0.0));
    fwd.set_terminator(entry, Terminator::Ret([zero].into_iter().collect()));
    let err = check_derived(
        &m,
        &rule,
        &[Val::F64(2.0), Val::F64(1.0)],
        &CheckOptions::default(),
    )
    .unwrap_err();
    assert!(matches!(err, CheckError::Primal { .. }), "{err}");
}

#[test]
fn arguments_must_fit() {
    let m = poly();
    let f = m.func_by_name("f").unwrap();
    let config = RuleConfig::default_for(m.sig(f));
    for args in [vec![Val::F64(1.0)], vec![Val::F64(1.0), Val::I64(2)]] {
        let err = check_rule(&m, f, &config, &args, &CheckOptions::default()).unwrap_err();
        assert!(matches!(err, CheckError::BadArguments(_)), "{err}");
    }
    let err = check_rule(
        &m,
        f,
        &RuleConfig::default_for(m.sig(f)).with_params([]),
        &[],
        &CheckOptions::default(),
    )
    .unwrap_err();
    assert!(matches!(err, CheckError::Build(_)), "{err}");
}
