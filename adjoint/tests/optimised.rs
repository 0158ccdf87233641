//! The optimiser (`gradlift_ir::opt`) and reverse mode together, on both corpora
//! (`tests/corpus/*.ir`, at their inputs) and the `examples/ir` functions:
//!
//! - derived code (forward passes and pullbacks: tape ops, and `trap_if` in debug
//!   mode) optimised computes exactly what it computed before: value, gradient,
//!   arguments after the call, or the same error;
//! - a module optimised before differentiation derives wherever the original did,
//!   and its gradient agrees with the original's (to rounding: inlined code
//!   accumulates cotangents in another order).

use gradlift_adjoint::{EvalError, Gradient, Seeds, value_and_gradient};
use gradlift_adjoint::{Rule, RuleConfig, build_rrule};
use gradlift_ir::interp::{Interpreter, Val};
use gradlift_ir::opt::{OptConfig, optimize, optimize_functions};
use gradlift_ir::verify::verify_function;
use gradlift_ir::{Elem, FuncId, Module, Type, parse, verify};

#[path = "corpus/inputs.rs"]
mod inputs;

/// A function's name and the argument lists it is run at.
type Points = Vec<(String, Vec<Vec<Val>>)>;

/// Each module with its functions' points: the corpora's own inputs, generic ones
/// for the examples.
fn cases() -> Vec<(String, Module, Points)> {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/corpus");
    let mut out = Vec::new();
    for (file, inputs) in [
        ("scalars.ir", inputs::scalar_inputs()),
        ("memory.ir", inputs::memory_inputs()),
    ] {
        let m = parse(&std::fs::read_to_string(format!("{dir}/{file}")).unwrap()).unwrap();
        let points = inputs
            .into_iter()
            .map(|(n, p)| (n.to_string(), p))
            .collect();
        out.push((file.to_string(), m, points));
    }
    let examples = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/ir");
    let mut files: Vec<_> = std::fs::read_dir(examples)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "ir"))
        .collect();
    files.sort();
    for path in files {
        let m = parse(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let points = m
            .funcs
            .iter()
            .filter(|(_, d)| d.function().is_some())
            .map(|(_, d)| (d.name.clone(), vec![generic_args(&d.sig.params)]))
            .collect();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        out.push((name, m, points));
    }
    for (name, m, _) in &out {
        verify(m).unwrap_or_else(|e| panic!("{name}: {e}"));
    }
    out
}

/// Distinct floats in (0, 1), 2 for integers, slices of 4.
fn generic_args(params: &[Type]) -> Vec<Val> {
    const F: [f64; 4] = [0.37, 0.11, 0.83, 0.59];
    params
        .iter()
        .enumerate()
        .map(|(k, t)| match *t {
            Type::F64 => Val::F64(F[k % 4]),
            Type::F32 => Val::F32(F[k % 4] as f32),
            Type::I64 => Val::I64(2),
            Type::Bool => Val::Bool(false),
            Type::Slice { elem, .. } => match elem {
                Elem::F64 => Val::F64s((0..4).map(|j| F[(j + k) % 4]).collect()),
                Elem::F32 => Val::F32s((0..4).map(|j| F[(j + k) % 4] as f32).collect()),
                Elem::I64 => Val::I64s(vec![0, 1, 2, 1]),
            },
        })
        .collect()
}

/// `m` optimised: every function, or those of `only`.
fn optimised(m: &Module, only: Option<&[FuncId]>, what: &str) -> Module {
    let mut o = m.clone();
    let config = OptConfig::default();
    let report = match only {
        None => optimize(&mut o, &config),
        Some(ids) => optimize_functions(&mut o, ids, &config),
    }
    .unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(report.restored.is_empty(), "{what}: {report}");
    match only {
        None => verify(&o).unwrap_or_else(|e| panic!("{what}: {e}\n{o}")),
        Some(ids) => {
            for &id in ids {
                let errors = verify_function(&o, id);
                assert!(errors.is_empty(), "{what}: {errors:?}\n{o}");
            }
        }
    }
    o
}

/// Checks that `m` prints and parses back to the same print.
fn round_trips(m: &Module, what: &str) {
    let text = m.to_string();
    assert_eq!(parse(&text).unwrap().to_string(), text, "{what}");
}

fn gradient(rule: &Rule, args: &[Val]) -> Result<Gradient, String> {
    let mut engine = Interpreter::new(&rule.module);
    value_and_gradient(&mut engine, rule, args, &Seeds::default()).map_err(|e| match e {
        EvalError::Run { error, .. } => format!("{:?}", error.kind),
        e => e.to_string(),
    })
}

fn floats(v: &Val) -> Vec<f64> {
    match v {
        Val::F64(x) => vec![*x],
        Val::F32(x) => vec![f64::from(*x)],
        Val::I64(x) => vec![*x as f64],
        Val::Bool(x) => vec![f64::from(u8::from(*x))],
        Val::F64s(x) => x.clone(),
        Val::F32s(x) => x.iter().map(|&x| f64::from(x)).collect(),
        Val::I64s(x) => x.iter().map(|&x| x as f64).collect(),
    }
}

/// Everything a gradient call observably gives, flattened.
fn observed(g: &Gradient) -> Vec<&Val> {
    g.value
        .iter()
        .flatten()
        .chain(g.gradient.iter().flatten())
        .chain(&g.args)
        .collect()
}

fn same_bits(a: &Gradient, b: &Gradient) -> bool {
    let (a, b) = (observed(a), observed(b));
    a.len() == b.len()
        && a.iter().zip(&b).all(|(x, y)| {
            let (x, y) = (floats(x), floats(y));
            let nan = x.iter().zip(&y).all(|(p, q)| p.is_nan() && q.is_nan());
            x.len() == y.len() && (nan || x.iter().zip(&y).all(|(p, q)| p.to_bits() == q.to_bits()))
        })
}

fn close(a: &Gradient, b: &Gradient) -> bool {
    let (a, b) = (observed(a), observed(b));
    a.len() == b.len()
        && a.iter().zip(&b).all(|(x, y)| {
            let (x, y) = (floats(x), floats(y));
            x.len() == y.len()
                && x.iter().zip(&y).all(|(p, q)| {
                    (p.is_nan() && q.is_nan())
                        || (p - q).abs() <= 1e-9 * (1.0 + p.abs().max(q.abs()))
                })
        })
}

#[test]
fn optimised_derived_code_computes_what_it_computed() {
    let mut compared = 0;
    for (file, m, points) in cases() {
        for (name, pts) in &points {
            let id = m
                .func_by_name(name)
                .unwrap_or_else(|| panic!("{file}: @{name}"));
            for debug in [false, true] {
                let config = RuleConfig::default_for(m.sig(id)).with_debug(debug, false);
                let Ok(rule) = build_rrule(&m, id, &config) else {
                    continue;
                };
                let what = format!("{file} @{name} (debug {debug})");
                // The derived functions (the input module's are tested elsewhere).
                let derived: Vec<FuncId> = rule
                    .module
                    .funcs
                    .keys()
                    .filter(|&g| m.funcs.get(g).is_none())
                    .collect();
                let mut opt = rule.clone();
                opt.module = optimised(&rule.module, Some(&derived), &what);
                if debug {
                    // Messages and tape ops print and parse back.
                    round_trips(&opt.module, &what);
                }
                for args in pts {
                    let (a, b) = (gradient(&rule, args), gradient(&opt, args));
                    let same = match (&a, &b) {
                        (Ok(a), Ok(b)) => same_bits(a, b),
                        (Err(a), Err(b)) => a == b,
                        _ => false,
                    };
                    assert!(same, "{what} at {args:?}:\n{a:?}\n{b:?}\n{}", opt.module);
                    compared += 1;
                }
            }
        }
    }
    assert!(compared > 100, "{compared}");
}

#[test]
fn optimised_primals_derive_to_the_same_gradients() {
    let mut compared = 0;
    for (file, m, points) in cases() {
        let o = optimised(&m, None, &file);
        round_trips(&o, &file);
        for (name, pts) in &points {
            let id = m.func_by_name(name).unwrap();
            let config = RuleConfig::default_for(m.sig(id));
            let Ok(rule) = build_rrule(&m, id, &config) else {
                continue;
            };
            let what = format!("{file} @{name}, optimised first");
            let orule = build_rrule(&o, id, &config).unwrap_or_else(|e| panic!("{what}: {e}\n{o}"));
            for args in pts {
                let (a, b) = (gradient(&rule, args), gradient(&orule, args));
                let same = match (&a, &b) {
                    (Ok(a), Ok(b)) => close(a, b),
                    (Err(a), Err(b)) => a == b,
                    _ => false,
                };
                assert!(same, "{what} at {args:?}:\n{a:?}\n{b:?}\n{o}");
                compared += 1;
            }
        }
    }
    assert!(compared > 50, "{compared}");
}
