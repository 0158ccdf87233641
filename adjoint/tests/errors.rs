//! Requests `build_rrule` refuses, each with a message that names the function, the
//! parameter or the op, and never a panic.

use gradlift_adjoint::{Activity, AdError, RuleConfig, Seeds, build_rrule, value_and_gradient};
use gradlift_ir::interp::{Interpreter, Val};
use gradlift_ir::{FuncId, Module, parse};

fn module(text: &str) -> (Module, FuncId) {
    let m = parse(text).unwrap_or_else(|e| panic!("{e}"));
    let id = m.func_by_name("f").unwrap();
    (m, id)
}

#[track_caller]
fn refused(text: &str, config: Option<Vec<Activity>>, expected: &[&str]) -> AdError {
    let (m, id) = module(text);
    let mut c = RuleConfig::default_for(m.sig(id));
    if let Some(p) = config {
        c.params = p;
    }
    let e = build_rrule(&m, id, &c).expect_err("should be refused");
    let msg = e.to_string();
    for s in expected {
        assert!(msg.contains(s), "{msg:?} should contain {s:?}");
    }
    e
}

const MIXED: &str = "
func @f(%x: f64, %n: i64) -> f64 {
entry:
    %nf = cast f64 %n
    %r = fmul %x, %nf
    ret %r
}";

#[test]
fn active_on_an_integer() {
    let e = refused(
        MIXED,
        Some(vec![Activity::Active, Activity::Active]),
        &["parameter 2", "%n: i64", "@f", "`active`"],
    );
    assert!(matches!(e, AdError::BadActivity { param: 1, .. }));
}

#[test]
fn dup_on_scalars() {
    let e = refused(
        MIXED,
        Some(vec![Activity::Dup, Activity::Const]),
        &["parameter 1", "%x: f64", "`dup`", "float slices"],
    );
    assert!(matches!(e, AdError::BadActivity { param: 0, .. }));
    refused(
        MIXED,
        Some(vec![Activity::Const, Activity::DupNoNeed]),
        &["parameter 2", "%n: i64", "`dupnoneed`"],
    );
}

#[test]
fn active_on_a_slice() {
    refused(
        "func @f(%x: [f64]) -> f64 {
         entry:
             %a = load %x[0]
             ret %a
         }",
        Some(vec![Activity::Active]),
        &["parameter 1", "%x: [f64]", "`active`", "`dup`"],
    );
}

#[test]
fn wrong_number_of_activities() {
    let e = refused(
        MIXED,
        Some(vec![Activity::Active]),
        &["@f has 2 parameters", "1 activity was given"],
    );
    assert!(matches!(
        e,
        AdError::ActivityCount {
            expected: 2,
            found: 1,
            ..
        }
    ));
    refused(MIXED, Some(vec![]), &["0 activities were given"]);
}

#[test]
fn dup_on_an_integer_slice() {
    refused(
        "func @f(%x: f64, %s: [i64]) -> f64 {
         entry:
             ret %x
         }",
        Some(vec![Activity::Active, Activity::Dup]),
        &["parameter 2", "%s: [i64]", "`dup`", "const"],
    );
}

#[test]
fn slice_results_and_slices_chosen_by_phis() {
    let e = refused(
        "func @f(%x: [f64]) -> [f64] {
         entry:
             ret %x
         }",
        None,
        &["@f", "returns a slice", "[f64]"],
    );
    assert!(matches!(e, AdError::Unsupported { .. }));
    refused(
        "func @f(%c: bool, %x: [f64], %y: [f64]) -> f64 {
         entry:
             br %c, a, b
         a:
             jump m
         b:
             jump m
         m:
             %s = phi [f64] [a: %x, b: %y]
             %v = load %s[0]
             ret %v
         }",
        None,
        &["@f", "%s: [f64]", "float slices"],
    );
    refused(
        "func @f(%c: bool, %x: [f64], %y: [f64]) -> f64 {
         entry:
             %s = select %c, %x, %y
             %v = load %s[0]
             ret %v
         }",
        None,
        &["@f", "select %c, %x, %y", "3:", "float slices"],
    );
}

#[test]
fn active_values_stored_into_a_const_slice_and_read_back() {
    let text = "func @f(%x: f64, %buf: mut [f64]) -> f64 {
         entry:
             %y = fmul %x, %x
             store %buf[0], %y
             %z = load %buf[0]
             ret %z
         }";
    let e = refused(
        text,
        Some(vec![Activity::Active, Activity::Const]),
        &["@f", "store %buf[0], %y", "4:", "%buf", "`const`", "`dup`"],
    );
    assert!(matches!(e, AdError::ConstWrite { .. }), "{e:?}");
    // Written and never read back: the derivative loses nothing, so it is derived.
    let (m, id) = module(
        "func @f(%x: f64, %buf: mut [f64]) -> f64 {
         entry:
             %y = fmul %x, %x
             store %buf[0], %y
             ret %y
         }",
    );
    let c = RuleConfig::default_for(m.sig(id)).with_params([Activity::Active, Activity::Const]);
    build_rrule(&m, id, &c).unwrap();
}

/// A store of an active value into a `const` slice, then a call that reads the slice
/// and also has an active argument (so the call may write into it too). Found by
/// `examples/fuzz.rs`: the analysis kept one writing instruction per slice, the
/// call (met first), and the only read-back, that same call, did not count, so the
/// store was forgotten and the gradient came out silently wrong (1 for 7 here).
#[test]
fn a_store_into_a_const_slice_read_back_by_a_call_that_may_write_it() {
    let text = "func @g(%s: [f64], %x: f64) -> f64 {
         entry:
             %v = load %s[0]
             %r = fadd %v, %x
             ret %r
         }
         func @f(%s: mut [f64], %x: f64) -> f64 {
         entry:
             %y = fmul %x, %x
             store %s[0], %y
             %r = call @g(%s, %x)
             ret %r
         }";
    let e = refused(
        text,
        Some(vec![Activity::Const, Activity::Active]),
        &["@f", "store %s[0], %y", "10:", "%s", "`const`", "`dup`"],
    );
    assert!(matches!(e, AdError::ConstWrite { .. }), "{e:?}");
    // With the slice `dup`, it is derived (d/dx (x*x + x) = 2x + 1).
    let (m, id) = module(text);
    let c = RuleConfig::default_for(m.sig(id)).with_params([Activity::Dup, Activity::Active]);
    build_rrule(&m, id, &c).unwrap();
}

/// Lazy derivation: a call to a function without a derivative is derived into a
/// rule that fails when the call runs, with the message derivation gave before.
#[test]
fn calls_to_functions_without_a_derivative() {
    let (m, id) = module(
        "extern @host(f64) -> f64
         func @f(%x: f64) -> f64 {
         entry:
             %y = call @host(%x)
             ret %y
         }",
    );
    let rule = build_rrule(&m, id, &RuleConfig::default_for(m.sig(id))).unwrap();
    let hosts = gradlift_ir::Hosts::new().bind("host", |a: &mut [Val]| match a {
        [Val::F64(x)] => Ok(vec![Val::F64(x.sin())]),
        _ => Err("one f64".to_string()),
    });
    let e = value_and_gradient(
        &mut Interpreter::new(&rule.module).with_hosts(&hosts),
        &rule,
        &[Val::F64(0.5)],
        &Seeds::default(),
    )
    .expect_err("the call has no derivative");
    let msg = e.to_string();
    for s in [
        "@f",
        "call @host(%x)",
        "4:",
        "@host",
        "vjp @host",
        "nodiff @host",
    ] {
        assert!(msg.contains(s), "{msg:?} should contain {s:?}");
    }
    // The same call with nothing varying through it needs no derivative.
    let (m, id) = module(
        "extern @host(f64) -> f64
         func @f(%x: f64) -> f64 {
         entry:
             %y = call @host(2.0)
             %z = fmul %x, %y
             ret %z
         }",
    );
    build_rrule(&m, id, &RuleConfig::default_for(m.sig(id))).unwrap();
    // And a callee's refusal names the callee.
    refused(
        "func @f(%x: f64) -> f64 {
         entry:
             %y = call @g(%x)
             ret %y
         }
         func @g(%x: f64) -> f64 {
         entry:
             push %x
             %y = pop f64
             ret %y
         }",
        None,
        &["@g", "tape ops", "push %x"],
    );
}

#[test]
fn a_vjp_whose_signature_does_not_match() {
    let e = refused(
        "func @f(%x: f64) -> f64 {
         entry:
             ret %x
         }
         func @r(%x: f64) -> f64 {
         entry:
             ret %x
         }
         vjp @f = @r",
        None,
        &["vjp @f = @r", "@r"],
    );
    assert!(matches!(e, AdError::Invalid { .. }), "{e:?}");
}

#[test]
fn tape_ops_in_the_input() {
    refused(
        "func @f(%x: f64) -> f64 {
         entry:
             push %x
             %y = pop f64
             ret %y
         }",
        None,
        &["tape ops", "push %x"],
    );
}

#[test]
fn functions_without_a_body_or_that_do_not_verify() {
    let mut m = parse(
        "extern @e(f64) -> f64
         func @f(%x: f64) -> f64 {
         entry:
             ret %x
         }",
    )
    .unwrap();
    let e = m.func_by_name("e").unwrap();
    let err = build_rrule(&m, e, &RuleConfig::default_for(m.sig(e))).unwrap_err();
    assert!(matches!(err, AdError::NotDefined { .. }), "{err}");
    assert!(err.to_string().contains("@e"), "{err}");

    // Break @f by hand: a function without blocks does not verify.
    let f = m.func_by_name("f").unwrap();
    m.function_mut(f).unwrap().layout.clear();
    let err = build_rrule(&m, f, &RuleConfig::default_for(m.sig(f))).unwrap_err();
    assert!(matches!(err, AdError::Invalid { .. }), "{err}");
    assert!(err.to_string().contains("@f does not verify"), "{err}");

    let bogus = FuncId::from_u32(99);
    let err = build_rrule(&m, bogus, &RuleConfig::default_for(m.sig(f))).unwrap_err();
    assert!(matches!(err, AdError::NoSuchFunction(_)), "{err}");
}
