//! Fused sweeps (`Rule::fused`, `adjoint/src/fuse.rs`): the value and the gradient
//! of a reduction loop in one pass.
//!
//! The oracle is the rule unfused (`RuleConfig::with_fuse(false)`: the forward pass
//! and the pullback), itself checked against finite differences and the
//! dot-product test by the adjoint crate's corpus tests (which now run the fused
//! rules too, through `check_rule`). On both reverse-mode corpora and
//! `examples/ir`, every fused function gives the unfused values bit for bit, and
//! gradients bit for bit except where the fusion adds several terms into one place
//! in another order (then to relative 1e-12); errors are the same. The JIT runs
//! the fused functions bit for bit as the interpreter does.

#[path = "../adjoint/tests/corpus/inputs.rs"]
mod inputs;
#[path = "../jit/tests/support/mod.rs"]
#[allow(unused_imports)]
mod support;

use gradlift::adjoint::{
    CheckOptions, EvalError, Gradient, Rule, RuleConfig, Seeds, build_rrule, check_rule,
    value_and_gradient,
};
use gradlift::ir::interp::{Interpreter, Limits, Val};
use gradlift::ir::{FuncId, Module, parse, verify};
use gradlift::trace::Var;
use gradlift::{CompiledGradient, Error, Hosts, Workspace, autodiff, suite};

const LIMITS: Limits = Limits {
    max_depth: 10_000,
    fuel: Some(5_000_000),
};

fn load(path: &str) -> Module {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let m = parse(&text).unwrap_or_else(|e| panic!("{path}: {e}"));
    verify(&m).unwrap_or_else(|e| panic!("{path}: {e}"));
    m
}

/// Every module with the points its functions are checked at: both corpora with
/// their tables, and every example, with generic points (lengths 0, 1 and more,
/// special floats) for every function.
/// A module's name, the module, and its functions' points by name.
type Corpus = (String, Module, Vec<(String, Vec<Vec<Val>>)>);

fn modules() -> Vec<Corpus> {
    let corpus = |f: &str| {
        load(&format!(
            "{}/adjoint/tests/corpus/{f}",
            env!("CARGO_MANIFEST_DIR")
        ))
    };
    let table = |t: Vec<(&str, Vec<Vec<Val>>)>| {
        t.into_iter()
            .map(|(n, p)| (n.to_string(), p))
            .collect::<Vec<_>>()
    };
    let generic = |m: &Module| {
        m.defined()
            .map(|(id, _)| {
                (
                    m.name(id).to_string(),
                    support::generic_points(m.sig(id), 6),
                )
            })
            .collect::<Vec<_>>()
    };
    let mut out = Vec::new();
    for (file, t) in [
        ("scalars.ir", inputs::scalar_inputs()),
        ("memory.ir", inputs::memory_inputs()),
    ] {
        let m = corpus(file);
        let mut points = table(t);
        points.extend(generic(&m));
        out.push((file.to_string(), m, points));
    }
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/ir");
    let mut files: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|p| p.ends_with(".ir"))
        .collect();
    files.sort();
    for file in files {
        let m = load(&format!("{dir}/{file}"));
        let points = generic(&m);
        out.push((file, m, points));
    }
    out
}

/// The rule of `id` under its default configuration, fused (when the shape
/// allows) and not.
fn both_rules(m: &Module, id: FuncId) -> Option<(Rule, Rule)> {
    let config = RuleConfig::default_for(m.sig(id));
    let fused = build_rrule(m, id, &config).ok()?;
    let plain = build_rrule(m, id, &config.clone().with_fuse(false)).ok()?;
    assert!(plain.fused.is_none());
    Some((fused, plain))
}

fn same_bits(a: f64, b: f64) -> bool {
    a.to_bits() == b.to_bits()
}

/// How two results compare: `Some(true)` bit for bit, `Some(false)` to relative
/// 1e-12 only, `None` not even that.
fn compare_vals(a: &Val, b: &Val) -> Option<bool> {
    let close = |x: f64, y: f64| {
        same_bits(x, y)
            || (x.is_nan() && y.is_nan())
            || (x - y).abs() <= 1e-12 * x.abs().max(y.abs())
    };
    let each = |xs: &[f64], ys: &[f64]| -> Option<bool> {
        if xs.len() != ys.len() || !xs.iter().zip(ys).all(|(x, y)| close(*x, *y)) {
            return None;
        }
        // A NaN's payload is the platform's (as in the differential tests).
        Some(
            xs.iter()
                .zip(ys)
                .all(|(x, y)| same_bits(*x, *y) || (x.is_nan() && y.is_nan())),
        )
    };
    match (a, b) {
        (Val::F64(x), Val::F64(y)) => each(&[*x], &[*y]),
        (Val::F32(x), Val::F32(y)) => each(&[f64::from(*x)], &[f64::from(*y)]),
        (Val::F64s(x), Val::F64s(y)) => each(x, y),
        (Val::F32s(x), Val::F32s(y)) => {
            let w = |v: &[f32]| v.iter().map(|&t| f64::from(t)).collect::<Vec<_>>();
            each(&w(x), &w(y))
        }
        (x, y) => (x == y).then_some(true),
    }
}

#[derive(Default, Debug)]
struct Tally {
    fused_functions: usize,
    not_fused: usize,
    points: usize,
    exact: usize,
    reordered: usize,
    errors: usize,
}

/// Compares one gradient of the fused rule with the unfused one's; returns
/// whether every entry was bit for bit.
fn compare_gradients(what: &str, f: &Gradient, p: &Gradient) -> bool {
    let values = match (&f.value, &p.value) {
        (Some(a), Some(b)) => a
            .iter()
            .zip(b)
            .all(|(x, y)| compare_vals(x, y) == Some(true)),
        (a, b) => a == b,
    };
    assert!(values, "{what}: values {:?} vs {:?}", f.value, p.value);
    assert_eq!(f.gradient.len(), p.gradient.len(), "{what}");
    let mut exact = true;
    for (k, (a, b)) in f.gradient.iter().zip(&p.gradient).enumerate() {
        let c = match (a, b) {
            (Some(a), Some(b)) => compare_vals(a, b),
            (a, b) => (a == b).then_some(true),
        };
        match c {
            Some(e) => exact &= e,
            None => panic!("{what}: gradient {k}: fused {a:?}, unfused {b:?}"),
        }
    }
    exact
}

#[test]
fn fused_rules_give_the_unfused_values_and_gradients_on_both_corpora_and_the_examples() {
    let tally = support::big_stack(|| {
        let mut tally = Tally::default();
        for (file, m, table) in modules() {
            for (name, points) in &table {
                let id = m.func_by_name(name).unwrap();
                let Some((fused, plain)) = both_rules(&m, id) else {
                    continue;
                };
                if fused.fused.is_none() {
                    tally.not_fused += 1;
                    continue;
                }
                tally.fused_functions += 1;
                for args in points {
                    let run = |rule: &Rule, seeds: &Seeds| {
                        let mut engine = Interpreter::new(&rule.module).with_limits(LIMITS);
                        value_and_gradient(&mut engine, rule, args, seeds)
                    };
                    let what = format!("{file} @{name} at {}", support::show(args));
                    let seeds = Seeds::default();
                    match (run(&fused, &seeds), run(&plain, &seeds)) {
                        (Ok(f), Ok(p)) => {
                            tally.points += 1;
                            if compare_gradients(&what, &f, &p) {
                                tally.exact += 1;
                            } else {
                                tally.reordered += 1;
                            }
                            // Shadows that already hold something, and a seed
                            // other than 1: the same to 1e-12.
                            let n_results = f.value.as_ref().map_or(0, Vec::len);
                            let shadows: Vec<Option<Val>> = f
                                .gradient
                                .iter()
                                .filter_map(|g| match g {
                                    Some(Val::F64s(v)) => {
                                        Some(Some(Val::F64s(vec![0.25; v.len()])))
                                    }
                                    Some(Val::F32s(v)) => {
                                        Some(Some(Val::F32s(vec![0.25; v.len()])))
                                    }
                                    _ => None,
                                })
                                .collect();
                            let seeds = Seeds::results(vec![0.5; n_results]).with_shadows(shadows);
                            if let (Ok(f), Ok(p)) = (run(&fused, &seeds), run(&plain, &seeds)) {
                                compare_gradients(&format!("{what}, seeded"), &f, &p);
                            }
                        }
                        (
                            Err(EvalError::Run { error: fe, .. }),
                            Err(EvalError::Run { error: pe, .. }),
                        ) => {
                            assert_eq!(
                                core::mem::discriminant(&fe.kind),
                                core::mem::discriminant(&pe.kind),
                                "{what}: fused `{fe}`, unfused `{pe}`"
                            );
                            assert_eq!(fe.op, pe.op, "{what}");
                            tally.errors += 1;
                        }
                        (f, p) => panic!("{what}: fused {f:?}, unfused {p:?}"),
                    }
                }
            }
        }
        tally
    });
    eprintln!("{tally:?}");
    assert!(tally.fused_functions >= 10, "{tally:?}");
    assert!(tally.exact >= 3 * tally.reordered, "{tally:?}");
    assert!(tally.errors >= 5, "{tally:?}");
}

#[test]
fn the_jit_runs_fused_rules_bit_for_bit_as_the_interpreter() {
    let tally = support::big_stack(|| {
        let mut tally = Tally::default();
        let mut ws = Workspace::new();
        for (file, m, table) in modules() {
            for (name, points) in &table {
                let id = m.func_by_name(name).unwrap();
                let config = RuleConfig::default_for(m.sig(id));
                let grad = match CompiledGradient::with_config(&m, name, &config, &Hosts::new()) {
                    Ok(g) => g,
                    Err(Error::Derive(_)) => continue,
                    Err(e) => panic!("{file} @{name}: {e}"),
                };
                let rule = grad.rule();
                if rule.fused.is_none() {
                    continue;
                }
                tally.fused_functions += 1;
                for args in points {
                    let what = format!("{file} @{name} at {}", support::show(args));
                    let mut engine = Interpreter::new(&rule.module).with_limits(LIMITS);
                    let want = value_and_gradient(&mut engine, rule, args, &Seeds::default());
                    if let Err(EvalError::Run { error, .. }) = &want
                        && matches!(error.kind, gradlift::ir::interp::ErrorKind::OutOfFuel(_))
                    {
                        continue;
                    }
                    match (want, grad.value_and_gradient(&mut ws, args)) {
                        (Ok(w), Ok(g)) => {
                            let same = |a: &[Option<Val>], b: &[Option<Val>]| {
                                a.len() == b.len()
                                    && a.iter().zip(b).all(|(x, y)| match (x, y) {
                                        (Some(x), Some(y)) => compare_vals(x, y) == Some(true),
                                        (x, y) => x == y,
                                    })
                            };
                            let wv: Vec<Option<Val>> =
                                w.value.iter().flatten().cloned().map(Some).collect();
                            let gv: Vec<Option<Val>> =
                                g.value.iter().flatten().cloned().map(Some).collect();
                            assert!(same(&wv, &gv), "{what}: values {wv:?} vs {gv:?}");
                            assert!(
                                same(&w.gradient, &g.gradient),
                                "{what}: interpreter {:?}, JIT {:?}",
                                w.gradient,
                                g.gradient
                            );
                            tally.exact += 1;
                        }
                        (Err(EvalError::Run { error: ie, .. }), Err(Error::Run(je))) => {
                            assert_eq!(
                                core::mem::discriminant(&ie.kind),
                                core::mem::discriminant(&je.kind),
                                "{what}: interpreter `{ie}`, JIT `{je}`"
                            );
                            assert_eq!((ie.func, ie.op), (je.func, je.op), "{what}");
                            tally.errors += 1;
                        }
                        (w, g) => panic!("{what}: interpreter {w:?}, JIT {g:?}"),
                    }
                }
            }
        }
        tally
    });
    eprintln!("{tally:?}");
    assert!(
        tally.fused_functions >= 10 && tally.exact >= 50,
        "{tally:?}"
    );
    assert!(tally.errors >= 5, "{tally:?}");
}

/// The suite's reduction loops fuse, and their gradients are the unfused ones
/// bit for bit from any shadow (each element gets one term, or for `rosenbrock`
/// two, the second carried to the next iteration); they match finite
/// differences.
#[test]
fn the_suite_reductions_fuse_and_equal_the_unfused_bit_for_bit() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/ir");
    for (file, name) in [
        ("sumsq.ir", "sumsq"),
        ("rosenbrock.ir", "rosenbrock"),
        ("branchy.ir", "branchy"),
    ] {
        let m = load(&format!("{dir}/{file}"));
        let id = m.func_by_name(name).unwrap();
        let (fused, plain) = both_rules(&m, id).unwrap();
        assert!(fused.fused.is_some(), "@{name} is not fused");
        let x = suite::branchy_input(1000);
        let args = [Val::F64s(x.clone())];
        let run = |rule: &Rule| {
            value_and_gradient(
                &mut Interpreter::new(&rule.module),
                rule,
                &args,
                &Seeds::default(),
            )
            .unwrap()
        };
        let (f, p) = (run(&fused), run(&plain));
        assert!(
            compare_gradients(&format!("@{name}"), &f, &p),
            "@{name}: not bit for bit"
        );
        // Shadows holding something already, and a seed other than 1: still bit
        // for bit (one term per element, or `rosenbrock`'s second term carried to
        // the next iteration and added in the pullback's order).
        let seeded = Seeds::results([0.75])
            .with_shadows([Some(Val::F64s(x.iter().map(|v| v * 3.0 + 0.1).collect()))]);
        let run = |rule: &Rule| {
            value_and_gradient(&mut Interpreter::new(&rule.module), rule, &args, &seeded).unwrap()
        };
        let (f, p) = (run(&fused), run(&plain));
        assert!(
            compare_gradients(&format!("@{name}, seeded"), &f, &p),
            "@{name}: not bit for bit from nonzero shadows"
        );
        let small = [Val::F64s(x[..40].to_vec())];
        let report = check_rule(
            &m,
            id,
            &RuleConfig::default_for(m.sig(id)),
            &small,
            &CheckOptions::default(),
        )
        .unwrap_or_else(|e| panic!("@{name}: {e}"));
        assert!(!report.finite_differences.is_empty());
    }
    // The traced forms (what `autodiff` and the attribute give) fuse too.
    let traced = [
        autodiff("sumsq", suite::sumsq::<Var>).unwrap(),
        autodiff("rosenbrock", suite::rosenbrock::<Var>).unwrap(),
        autodiff("branchy", suite::branchy::<Var>).unwrap(),
    ];
    for ad in &traced {
        let (module, name) = (ad.module(), ad.name());
        let id = module.func_by_name(name).unwrap();
        let g = CompiledGradient::with_config(
            module,
            name,
            &RuleConfig::default_for(module.sig(id)),
            &Hosts::new(),
        )
        .unwrap();
        assert!(g.rule().fused.is_some(), "traced @{name} is not fused");
    }
}

/// What the shape refuses stays unfused: two loops (`logsumexp`), nested loops
/// (`mlp`), a loop that carries more than sums (`ode`), a call (`normalize`),
/// a width above 1, debug mode, and `fuse` off.
#[test]
fn functions_of_other_shapes_are_not_fused() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/ir");
    for (file, name) in [
        ("logsumexp.ir", "logsumexp"),
        ("mlp.ir", "mlp"),
        ("ode.ir", "ode"),
        ("normalize.ir", "normalize"),
    ] {
        let m = load(&format!("{dir}/{file}"));
        let id = m.func_by_name(name).unwrap();
        let rule = build_rrule(&m, id, &RuleConfig::default_for(m.sig(id))).unwrap();
        assert!(rule.fused.is_none(), "@{name} was fused");
    }
    let m = load(&format!("{dir}/sumsq.ir"));
    let id = m.func_by_name("sumsq").unwrap();
    let config = RuleConfig::default_for(m.sig(id));
    let wide = gradlift::adjoint::build_rrule_width(&m, id, &config, 2).unwrap();
    assert!(wide.fused.is_none());
    let debug = build_rrule(&m, id, &config.clone().with_debug(true, false)).unwrap();
    assert!(debug.fused.is_none());
    let off = build_rrule(&m, id, &config.clone().with_fuse(false)).unwrap();
    assert!(off.fused.is_none());
    // Named as the forward pass is, `.vg` for `.fwd`: `@sumsq.vg`, and with other
    // activities `@sumsq.vg.N_A` next to `@sumsq.fwd.N_A`.
    let named = |rule: &Rule| rule.fused.map(|f| rule.module.name(f).to_string());
    let plain = build_rrule(&m, id, &config).unwrap();
    assert_eq!(named(&plain).as_deref(), Some("sumsq.vg"));
    let noneed = config.with_params([gradlift::adjoint::Activity::DupNoNeed]);
    let rule = build_rrule(&m, id, &noneed).unwrap();
    assert_eq!(rule.module.name(rule.forward), "sumsq.fwd.N_A");
    assert_eq!(named(&rule).as_deref(), Some("sumsq.vg.N_A"));
}
