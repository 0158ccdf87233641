//! The JIT's gradients against the interpreter's: for every function of the
//! reverse-mode corpora (`adjoint/tests/corpus/*.ir`) and of `examples/ir`, the
//! rule derived once, run by both engines at the same points: values equal to
//! relative 1e-12, gradients (and the arguments after the forward pass) to relative
//! 1e-10, errors of the same kind. The interpreter's gradients are themselves
//! checked against finite differences and the dot-product test by the adjoint
//! crate's tests, so this carries that oracle over to native code.

#[path = "../adjoint/tests/corpus/inputs.rs"]
mod inputs;
#[path = "../jit/tests/support/mod.rs"]
#[allow(unused_imports)]
mod support;

use gradlift::adjoint::value_and_gradient;
use gradlift::adjoint::{AdError, RuleConfig, Seeds};
use gradlift::ir::interp::{ErrorKind, Interpreter, Limits, Val};
use gradlift::ir::{FuncId, Module, parse, verify};
use gradlift::{CompiledGradient, Error, Hosts, Workspace};

fn load(path: &str) -> Module {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let m = parse(&text).unwrap_or_else(|e| panic!("{path}: {e}"));
    verify(&m).unwrap_or_else(|e| panic!("{path}: {e}"));
    m
}

/// `a` and `b` agree to relative `rel` (NaNs agree with NaNs, infinities with
/// themselves).
fn close(a: f64, b: f64, rel: f64) -> bool {
    a.to_bits() == b.to_bits()
        || (a.is_nan() && b.is_nan())
        || (a - b).abs() <= rel * a.abs().max(b.abs())
}

fn val_close(a: &Val, b: &Val, rel: f64) -> bool {
    match (a, b) {
        (Val::F64(x), Val::F64(y)) => close(*x, *y, rel),
        (Val::F32(x), Val::F32(y)) => close(f64::from(*x), f64::from(*y), rel),
        (Val::F64s(x), Val::F64s(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| close(*p, *q, rel))
        }
        (Val::F32s(x), Val::F32s(y)) => {
            x.len() == y.len()
                && x.iter()
                    .zip(y)
                    .all(|(p, q)| close(f64::from(*p), f64::from(*q), rel))
        }
        (x, y) => x == y,
    }
}

fn all_close(a: &[Val], b: &[Val], rel: f64) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| val_close(x, y, rel))
}

#[derive(Default, Debug)]
struct Tally {
    gradients: usize,
    errors: usize,
    skipped: usize,
}

const LIMITS: Limits = Limits {
    max_depth: 10_000,
    fuel: Some(5_000_000),
};

/// Derives `@name` under `config` (an error if it cannot be derived) and compares
/// both engines at every point.
fn compare(
    m: &Module,
    id: FuncId,
    config: &RuleConfig,
    hosts: &Hosts,
    points: &[Vec<Val>],
    tally: &mut Tally,
) -> Result<(), AdError> {
    let name = m.name(id);
    let grad = match CompiledGradient::with_config(m, name, config, hosts) {
        Ok(g) => g,
        Err(Error::Derive(e)) => return Err(e),
        Err(e) => panic!("@{name}: {e}"),
    };
    let rule = grad.rule();
    let mut ws = Workspace::new();
    for args in points {
        let mut interp = Interpreter::new(&rule.module)
            .with_limits(LIMITS)
            .with_hosts(hosts);
        let want = value_and_gradient(&mut interp, rule, args, &Seeds::default());
        if let Err(gradlift::adjoint::EvalError::Run { error, .. }) = &want
            && matches!(error.kind, ErrorKind::OutOfFuel(_))
        {
            // Too long to compare (or endless): not run on the JIT.
            tally.skipped += 1;
            continue;
        }
        let got = grad.value_and_gradient(&mut ws, args);
        let at = support::show(args);
        match (want, got) {
            (Ok(w), Ok(g)) => {
                let value_ok = match (&w.value, &g.value) {
                    (Some(a), Some(b)) => all_close(a, b, 1e-12),
                    (a, b) => a == b,
                };
                assert!(
                    value_ok,
                    "@{name} {config:?} at {at}: values {:?} vs {:?}",
                    w.value, g.value
                );
                assert_eq!(w.gradient.len(), g.gradient.len());
                for (k, (a, b)) in w.gradient.iter().zip(&g.gradient).enumerate() {
                    let ok = match (a, b) {
                        (Some(a), Some(b)) => val_close(a, b, 1e-10),
                        (a, b) => a == b,
                    };
                    assert!(
                        ok,
                        "@{name} {config:?} at {at}: gradient {k}: interpreter {a:?}, JIT {b:?}"
                    );
                }
                assert!(
                    all_close(&w.args, &g.args, 1e-12),
                    "@{name} at {at}: final arguments"
                );
                tally.gradients += 1;
            }
            (Err(gradlift::adjoint::EvalError::Run { error: ie, .. }), Err(Error::Run(je))) => {
                assert_eq!(
                    Some(core::mem::discriminant(&je.kind)),
                    Some(core::mem::discriminant(&ie.kind)),
                    "@{name} at {at}: interpreter `{ie}`, JIT `{je}`"
                );
                assert_eq!(
                    (je.func.as_str(), je.op.as_str()),
                    (ie.func.as_str(), ie.op.as_str())
                );
                tally.errors += 1;
            }
            (w, g) => panic!("@{name} {config:?} at {at}: interpreter {w:?}, JIT {g:?}"),
        }
    }
    Ok(())
}

/// The default activities, and for the first point the variants the adjoint
/// corpus tests check: each `dup` slice `const` (where allowed), `dupnoneed`
/// everywhere with the primal not needed, a `const` return.
fn compare_variants(m: &Module, name: &str, points: &[Vec<Val>], hosts: &Hosts, tally: &mut Tally) {
    let id = m.func_by_name(name).unwrap_or_else(|| panic!("no @{name}"));
    let default = RuleConfig::default_for(m.sig(id));
    compare(m, id, &default, hosts, points, tally).unwrap_or_else(|e| panic!("@{name}: {e}"));
    let first = &points[..1];
    let (consts, always) = inputs::config_variants(&default);
    for c in consts {
        match compare(m, id, &c, hosts, first, tally) {
            Ok(()) | Err(AdError::ConstWrite { .. }) => {}
            Err(e) => panic!("@{name} {c:?}: {e}"),
        }
    }
    for c in always {
        compare(m, id, &c, hosts, first, tally).unwrap_or_else(|e| panic!("@{name} {c:?}: {e}"));
    }
}

fn corpus(file: &str) -> Module {
    load(&format!(
        "{}/adjoint/tests/corpus/{file}",
        env!("CARGO_MANIFEST_DIR")
    ))
}

#[test]
fn every_function_of_the_scalar_corpus() {
    let m = corpus("scalars.ir");
    let mut tally = Tally::default();
    let table = inputs::scalar_inputs();
    for (name, points) in &table {
        compare_variants(&m, name, points, &Hosts::new(), &mut tally);
    }
    // Every function but `bitcast_zero` (no derivative to speak of) has inputs.
    assert!(table.len() + 1 >= m.defined().count(), "{}", table.len());
    eprintln!("scalars.ir: {tally:?}");
    assert!(tally.gradients >= 150, "{tally:?}");
}

#[test]
fn every_function_of_the_memory_corpus() {
    let (tally, defined) = support::big_stack(|| {
        let m = corpus("memory.ir");
        let mut tally = Tally::default();
        let table = inputs::memory_inputs();
        for (name, points) in &table {
            compare_variants(&m, name, points, &Hosts::new(), &mut tally);
        }
        // Points from the signature too: lengths 0 and 1, NaN, infinities, huge
        // and negative integers (out of bounds, division by zero, ...).
        for (id, _) in m.defined() {
            let config = RuleConfig::default_for(m.sig(id));
            let points = support::generic_points(m.sig(id), 6);
            let _ = compare(&m, id, &config, &Hosts::new(), &points, &mut tally);
        }
        (tally, m.defined().count())
    });
    eprintln!("memory.ir ({defined} functions): {tally:?}");
    assert!(tally.gradients >= 200 && tally.errors >= 5, "{tally:?}");
}

#[test]
fn every_example_function() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/ir");
    let mut files: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|p| p.ends_with(".ir"))
        .collect();
    files.sort();
    let hosts = Hosts::new().bind("host_sin", |a: &mut [Val]| match a {
        [Val::F64(x)] => Ok(vec![Val::F64(x.sin())]),
        _ => Err("host_sin takes one f64".into()),
    });
    let mut tally = Tally::default();
    let mut refused = Vec::new();
    for file in &files {
        let m = load(&format!("{dir}/{file}"));
        for (id, _) in m.defined() {
            let config = RuleConfig::default_for(m.sig(id));
            let points = support::generic_points(m.sig(id), 8);
            if let Err(e) = compare(&m, id, &config, &hosts, &points, &mut tally) {
                refused.push(format!("{}: {e}", m.name(id)));
            }
        }
    }
    eprintln!("examples: {tally:?}; not derived: {refused:#?}");
    // Every other function derives: @wave, which calls a host function without a
    // derivative, lazily (its gradient fails on both engines alike, counted in
    // `errors`; tests/lazy.rs checks the message).
    // Refused: the two rules of examples/ir/custom_rules.ir's pair, whose tape
    // ops are never differentiated.
    assert_eq!(refused.len(), 2, "{refused:#?}");
    assert!(
        refused
            .iter()
            .all(|r| r.starts_with("lse_") && r.contains("tape ops appear only in derived code")),
        "{refused:#?}"
    );
    assert!(tally.errors >= 8, "{tally:?}");
    assert!(tally.gradients >= 100, "{tally:?}");
}
