//! Forward rules on the JIT against the interpreter: for every function of the
//! reverse-mode corpora and of `examples/ir`, the forward rule derived once (widths
//! 1 and 3) and run by both engines at the same points with the same random
//! tangents: values, tangents, tangent slices and arguments bit for bit (NaN
//! payloads aside), errors of the same kind at the same op. The interpreter's
//! forward rules are checked against reverse mode by the dot-product test in
//! `adjoint/tests/forward.rs`; the suite programs get that test here, on the JIT.

#[path = "../adjoint/tests/corpus/inputs.rs"]
mod inputs;
#[path = "../jit/tests/support/mod.rs"]
#[allow(unused_imports)]
mod support;

use gradlift::adjoint::{DualActivity, EvalError, FruleConfig, build_frule, jvp_vals};
use gradlift::ir::interp::{ErrorKind, Interpreter, Limits, Val};
use gradlift::ir::{Module, parse, verify};
use gradlift::{Error, Pipeline, Workspace};

fn load(path: &str) -> Module {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let m = parse(&text).unwrap_or_else(|e| panic!("{path}: {e}"));
    verify(&m).unwrap_or_else(|e| panic!("{path}: {e}"));
    m
}

const LIMITS: Limits = Limits {
    max_depth: 10_000,
    fuel: Some(5_000_000),
};

/// SplitMix64.
struct Rng(u64);

impl Rng {
    fn unit(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
    }
}

/// Random tangents for `args` at width `n`: a scalar (width 1) or `n` lanes per
/// `dual` scalar, `n` lanes per element of a `dual` slice.
fn tangents(rng: &mut Rng, args: &[Val], config: &FruleConfig) -> Vec<Option<Val>> {
    let n = config.width as usize;
    args.iter()
        .zip(&config.params)
        .map(|(a, &d)| {
            if d != DualActivity::Dual {
                return None;
            }
            Some(match a {
                Val::F64(_) if n == 1 => Val::F64(rng.unit()),
                Val::F32(_) if n == 1 => Val::F32(rng.unit() as f32),
                Val::F64(_) => Val::F64s((0..n).map(|_| rng.unit()).collect()),
                Val::F32(_) => Val::F32s((0..n).map(|_| rng.unit() as f32).collect()),
                Val::F64s(x) => Val::F64s((0..x.len() * n).map(|_| rng.unit()).collect()),
                Val::F32s(x) => Val::F32s((0..x.len() * n).map(|_| rng.unit() as f32).collect()),
                other => panic!("a dual {other:?}"),
            })
        })
        .collect()
}

#[derive(Default, Debug)]
struct Tally {
    jvps: usize,
    errors: usize,
    skipped: usize,
}

/// Derives the forward rule of `@name` at width `width` and runs it on both
/// engines at every point; `false` when forward mode refuses the function.
fn compare(
    m: &Module,
    name: &str,
    width: u32,
    points: &[Vec<Val>],
    rng: &mut Rng,
    tally: &mut Tally,
) -> bool {
    let id = m.func_by_name(name).unwrap();
    let config = FruleConfig::default_for(m.sig(id)).with_width(width);
    let Ok(frule) = build_frule(m, id, &config) else {
        return false;
    };
    let compiled = Pipeline::new()
        .compile_frule(frule.clone())
        .unwrap_or_else(|e| panic!("@{name}: {e}"));
    let mut ws = Workspace::new();
    for args in points {
        let ts = tangents(rng, args, &config);
        let mut interp = Interpreter::new(&frule.module).with_limits(LIMITS);
        let want = jvp_vals(&mut interp, &frule, args, &ts);
        if let Err(EvalError::Run { error, .. }) = &want
            && matches!(error.kind, ErrorKind::OutOfFuel(_))
        {
            tally.skipped += 1;
            continue;
        }
        let got = compiled.jvp(&mut ws, args, &ts);
        let at = support::show(args);
        match (want, got) {
            (Ok(w), Ok(g)) => {
                let same_opt = |a: &Option<Vec<Val>>, b: &Option<Vec<Val>>| match (a, b) {
                    (Some(a), Some(b)) => support::same_all(a, b),
                    (a, b) => a == b,
                };
                assert!(same_opt(&w.value, &g.value), "@{name} at {at}: values");
                assert!(
                    support::same_all(&w.tangents, &g.tangents),
                    "@{name} width {width} at {at}: tangents {:?} vs {:?}",
                    w.tangents,
                    g.tangents
                );
                assert!(support::same_all(&w.args, &g.args), "@{name} at {at}: args");
                for (a, b) in w.slices.iter().zip(&g.slices) {
                    match (a, b) {
                        (Some(a), Some(b)) => assert!(
                            support::same(a, b),
                            "@{name} width {width} at {at}: tangent slices {a:?} vs {b:?}"
                        ),
                        (a, b) => assert_eq!(a, b),
                    }
                }
                tally.jvps += 1;
            }
            (Err(EvalError::Run { error: ie, .. }), Err(Error::Run(je))) => {
                assert_eq!(
                    core::mem::discriminant(&je.kind),
                    core::mem::discriminant(&ie.kind),
                    "@{name} at {at}: interpreter `{ie}`, JIT `{je}`"
                );
                assert_eq!(
                    (je.func.as_str(), je.op.as_str()),
                    (ie.func.as_str(), ie.op.as_str())
                );
                tally.errors += 1;
            }
            (w, g) => panic!("@{name} at {at}: interpreter {w:?}, JIT {g:?}"),
        }
    }
    true
}

fn corpus(file: &str) -> Module {
    load(&format!(
        "{}/adjoint/tests/corpus/{file}",
        env!("CARGO_MANIFEST_DIR")
    ))
}

#[test]
fn every_function_of_both_corpora_at_widths_one_and_three() {
    let tally = support::big_stack(|| {
        let mut tally = Tally::default();
        let mut rng = Rng(7);
        for (file, table) in [
            ("scalars.ir", inputs::scalar_inputs()),
            ("memory.ir", inputs::memory_inputs()),
        ] {
            let m = corpus(file);
            for (name, points) in &table {
                for width in [1, 3] {
                    assert!(
                        compare(&m, name, width, points, &mut rng, &mut tally),
                        "@{name}: forward mode refuses it"
                    );
                }
            }
            // Points from the signature too: lengths 0 and 1, NaN, infinities,
            // huge and negative integers (out of bounds, division by zero, ...).
            for (id, _) in m.defined() {
                let points = support::generic_points(m.sig(id), 6);
                compare(&m, m.name(id), 1, &points, &mut rng, &mut tally);
            }
        }
        tally
    });
    eprintln!("{tally:?}");
    assert!(tally.jvps >= 500 && tally.errors >= 5, "{tally:?}");
}

#[test]
fn every_example_function() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/ir");
    let mut files: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".ir"))
        .collect();
    files.sort();
    let mut tally = Tally::default();
    let mut rng = Rng(11);
    let mut refused = Vec::new();
    for file in &files {
        let m = load(&format!("{dir}/{file}"));
        for (id, _) in m.defined() {
            let points = support::generic_points(m.sig(id), 4);
            if !compare(&m, m.name(id), 1, &points, &mut rng, &mut tally) {
                refused.push(format!("{file}:@{}", m.name(id)));
            }
        }
    }
    eprintln!("{tally:?}; refused: {refused:?}");
    assert!(tally.jvps >= 20, "{tally:?}");
}

/// The seven suite programs (small sizes), on the JIT: `<J v, w>` from the
/// compiled forward rule against `<v, Jᵀ w>` from the compiled gradient (`w` = 1
/// on the result), with the suite's activities (`w` of normalize, `x` of mlp and
/// the step count of ode constant).
#[test]
fn the_dot_product_test_holds_on_the_seven_suite_programs_on_the_jit() {
    use gradlift::CompiledGradient;
    use gradlift::adjoint::{Activity, RuleConfig};
    use gradlift::suite;
    use gradlift_trace::{Var, trace};
    let n = 50;
    let (nx, nw) = suite::normalize_input(n);
    let mi = suite::mlp_input(3);
    let cases: Vec<(&str, Module, Vec<Val>, Vec<usize>)> = vec![
        (
            "sumsq",
            trace("sumsq", suite::sumsq::<Var>).unwrap().module,
            vec![Val::F64s(suite::sumsq_input(n))],
            vec![],
        ),
        (
            "rosenbrock",
            trace("rosenbrock", suite::rosenbrock::<Var>)
                .unwrap()
                .module,
            vec![Val::F64s(suite::rosenbrock_input(n))],
            vec![],
        ),
        (
            "logsumexp",
            trace("logsumexp", suite::logsumexp::<Var>).unwrap().module,
            vec![Val::F64s(suite::logsumexp_input(n))],
            vec![],
        ),
        (
            "normalize",
            trace("normalize", suite::normalize::<Var>).unwrap().module,
            vec![Val::F64s(nx), Val::F64s(nw)],
            vec![1],
        ),
        (
            "mlp",
            trace("mlp", suite::mlp::<Var>).unwrap().module,
            vec![
                Val::F64s(mi.x),
                Val::F64s(mi.w1),
                Val::F64s(mi.b1),
                Val::F64s(mi.w2),
                Val::F64s(mi.b2),
            ],
            vec![0],
        ),
        (
            "ode",
            trace("ode", suite::ode::<Var>).unwrap().module,
            vec![Val::F64s(suite::ode_input()), Val::I64(200)],
            vec![1],
        ),
        (
            "branchy",
            trace("branchy", suite::branchy::<Var>).unwrap().module,
            vec![Val::F64s(suite::branchy_input(n))],
            vec![],
        ),
    ];
    let mut rng = Rng(3);
    for (name, m, args, consts) in cases {
        let f = m.func_by_name(name).unwrap();
        let mut fconfig = FruleConfig::default_for(m.sig(f));
        let mut rconfig = RuleConfig::default_for(m.sig(f));
        for &k in &consts {
            fconfig.params[k] = DualActivity::Const;
            rconfig.params[k] = Activity::Const;
        }
        let jvp = Pipeline::new()
            .compile_jvp(&m, name, Some(&fconfig))
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let grad = Pipeline::new()
            .compile_gradient(&m, name, Some(&rconfig))
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let _: &CompiledGradient = &grad;
        let mut ws = Workspace::new();
        let v = tangents(&mut rng, &args, &fconfig);
        let out = jvp.jvp(&mut ws, &args, &v).unwrap();
        let Val::F64(jv) = out.tangents[0] else {
            panic!("{name}: {:?}", out.tangents)
        };
        let g = grad.value_and_gradient(&mut ws, &args).unwrap();
        let (mut vg, mut scale) = (0.0, 0.0);
        for (vi, gi) in v.iter().zip(&g.gradient) {
            if let (Some(Val::F64s(a)), Some(Val::F64s(b))) = (vi, gi) {
                for (x, y) in a.iter().zip(b) {
                    vg += x * y;
                    scale += (x * y).abs();
                }
            }
        }
        assert!(scale > 0.0, "{name}: nothing compared");
        assert!(
            (jv - vg).abs() <= 1e-12 * scale,
            "{name}: <J v, 1> = {jv}, <v, Jᵀ 1> = {vg}"
        );
        assert_eq!(out.value, g.value, "{name}: values");
    }
}
