//! Reverse rules of width N on the JIT: for every function of both corpora, the
//! rule of width N compiled and run from random seeds and shadows gives bit for bit
//! what the interpreter gives running the same rule, and lane by lane what the
//! compiled width-1 rule gives from that lane's seeds and shadows (errors alike).
//! The interpreter's rules of width N are checked against width 1 under more
//! activities and in debug mode in `adjoint/tests/reverse_width.rs`.

#[path = "../adjoint/tests/corpus/inputs.rs"]
mod inputs;
#[path = "../jit/tests/support/mod.rs"]
#[allow(unused_imports)]
mod support;

use gradlift::adjoint::{EvalError, RuleConfig, value_and_gradient};
use gradlift::ir::interp::{ErrorKind, Interpreter, Limits, Val};
use gradlift::ir::{Module, parse, verify};
use gradlift::{CompiledGradient, Error, Pipeline, Seeds, Workspace};

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

fn corpus(file: &str) -> Module {
    let path = format!("{}/adjoint/tests/corpus/{file}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap();
    let m = parse(&text).unwrap_or_else(|e| panic!("{path}: {e}"));
    verify(&m).unwrap_or_else(|e| panic!("{path}: {e}"));
    m
}

/// Lane `j` of `v` (`n` lanes per element) as width 1 has it.
fn lane(v: &Val, n: usize, j: usize, scalar: bool) -> Val {
    match (v, scalar) {
        (Val::F64(_) | Val::F32(_), true) if n == 1 => v.clone(),
        (Val::F64s(x), true) => Val::F64(x[j]),
        (Val::F32s(x), true) => Val::F32(x[j]),
        (Val::F64s(x), false) => Val::F64s(x.iter().skip(j).step_by(n).copied().collect()),
        (Val::F32s(x), false) => Val::F32s(x.iter().skip(j).step_by(n).copied().collect()),
        other => panic!("lanes of {other:?}"),
    }
}

#[derive(Default, Debug)]
struct Tally {
    gradients: usize,
    errors: usize,
    skipped: usize,
}

fn compare(
    m: &Module,
    name: &str,
    one: &CompiledGradient,
    n: u32,
    points: &[Vec<Val>],
    rng: &mut Rng,
    tally: &mut Tally,
) {
    let p = Pipeline::new();
    // Width 1 compiled (`one`), so width N must derive too.
    let wide = p
        .derive_width(m, name, None, n)
        .unwrap_or_else(|e| panic!("@{name}: width 1 derives, width {n} does not: {e}"));
    let wide_rule = wide.clone();
    let wide = p.compile_rule(wide).unwrap();
    let n = n as usize;
    let layout = &wide_rule.layout;
    let mut ws = Workspace::new();
    for args in points {
        let n_float = m
            .sig(layout.primal)
            .results
            .iter()
            .filter(|t| t.is_float())
            .count();
        let seeds: Vec<f64> = (0..n_float * n).map(|_| rng.unit()).collect();
        let shadows: Vec<Option<Val>> = (0..args.len())
            .map(|i| {
                layout.shadow_params.contains(&i).then(|| {
                    let len = args[i].slice_len().unwrap_or(0) * n;
                    match &args[i] {
                        Val::F32s(_) => Val::F32s((0..len).map(|_| rng.unit() as f32).collect()),
                        _ => Val::F64s((0..len).map(|_| rng.unit()).collect()),
                    }
                })
            })
            .collect();
        let seeded = !layout.seeded_results.is_empty();
        let wide_seeds = Seeds {
            results: seeded.then(|| seeds.clone()),
            shadows: shadows.clone(),
        };
        let mut interp = Interpreter::new(&wide_rule.module).with_limits(LIMITS);
        let want = value_and_gradient(&mut interp, &wide_rule, args, &wide_seeds);
        if let Err(EvalError::Run { error, .. }) = &want
            && matches!(error.kind, ErrorKind::OutOfFuel(_))
        {
            tally.skipped += 1;
            continue;
        }
        let got = wide.value_and_pullback(&mut ws, args, &wide_seeds);
        let at = support::show(args);
        let got = match (want, got) {
            (Ok(w), Ok(g)) => {
                assert_eq!(w.value.is_some(), g.value.is_some());
                if let (Some(a), Some(b)) = (&w.value, &g.value) {
                    assert!(support::same_all(a, b), "@{name} at {at}: values");
                }
                for (a, b) in w.gradient.iter().zip(&g.gradient) {
                    match (a, b) {
                        (Some(a), Some(b)) => assert!(
                            support::same(a, b),
                            "@{name} width {n} at {at}: interpreter {a:?}, JIT {b:?}"
                        ),
                        (a, b) => assert_eq!(a, b),
                    }
                }
                g
            }
            (Err(EvalError::Run { error: ie, .. }), Err(Error::Run(je))) => {
                assert_eq!(
                    core::mem::discriminant(&je.kind),
                    core::mem::discriminant(&ie.kind),
                    "@{name} at {at}: interpreter `{ie}`, JIT `{je}`"
                );
                tally.errors += 1;
                continue;
            }
            (w, g) => panic!("@{name} at {at}: interpreter {w:?}, JIT {g:?}"),
        };
        for j in 0..n {
            let lane_seeds = Seeds {
                results: seeded.then(|| (0..n_float).map(|k| seeds[k * n + j]).collect()),
                shadows: shadows
                    .iter()
                    .map(|s| s.as_ref().map(|s| lane(s, n, j, false)))
                    .collect(),
            };
            let single = one
                .value_and_pullback(&mut ws, args, &lane_seeds)
                .unwrap_or_else(|e| panic!("@{name} at {at} lane {j}: width 1 failed: {e}"));
            for (i, (a, b)) in single.gradient.iter().zip(&got.gradient).enumerate() {
                if let (Some(a), Some(b)) = (a, b) {
                    let b = lane(b, n, j, args[i].slice_len().is_none());
                    assert!(
                        support::same(a, &b),
                        "@{name} width {n} lane {j} at {at}: parameter {i}: width 1 {a:?}, lane {b:?}"
                    );
                }
            }
        }
        tally.gradients += 1;
    }
}

/// Every function of `file` (its table's points and generic ones) at width 13.
fn corpus_at_width_thirteen(
    file: &'static str,
    table: Vec<(&'static str, Vec<Vec<Val>>)>,
) -> Tally {
    support::big_stack(move || {
        let mut tally = Tally::default();
        let mut rng = Rng(5);
        let m = corpus(file);
        for (id, _) in m.defined() {
            let name = m.name(id);
            // Width 1 as two passes: lanes of width N are the pullback's bit for
            // bit (a fused rule may add terms into one place in another order).
            let config = RuleConfig::default_for(m.sig(id)).with_fuse(false);
            let Ok(one) = Pipeline::new().compile_gradient(&m, name, Some(&config)) else {
                continue;
            };
            let mut points = support::generic_points(m.sig(id), 4);
            if let Some((_, ps)) = table.iter().find(|(n, _)| *n == name) {
                points.extend(ps.iter().cloned());
            }
            compare(&m, name, &one, 13, &points, &mut rng, &mut tally);
        }
        tally
    })
}

#[test]
fn every_function_of_the_scalar_corpus_at_width_thirteen() {
    let tally = corpus_at_width_thirteen("scalars.ir", inputs::scalar_inputs());
    eprintln!("{tally:?}");
    assert!(tally.gradients >= 250, "{tally:?}");
}

#[test]
fn every_function_of_the_memory_corpus_at_width_thirteen() {
    let tally = corpus_at_width_thirteen("memory.ir", inputs::memory_inputs());
    eprintln!("{tally:?}");
    assert!(tally.gradients >= 150 && tally.errors >= 5, "{tally:?}");
}

/// The CLIF and the machine code of the functions `ids` of `m`, joined.
fn clif_of(m: &Module, ids: &[gradlift::ir::FuncId]) -> String {
    gradlift::jit::listing(m, ids)
        .unwrap()
        .into_iter()
        .map(|l| l.clif + &l.asm)
        .collect()
}

/// The host's packed `f64` multiply and add.
const PACKED: [&str; 2] = if cfg!(target_arch = "aarch64") {
    ["fmul v", "fadd v"]
} else {
    ["mulpd", "addpd"]
};

#[test]
fn rules_of_width_n_compute_pairs_of_lanes_as_f64x2() {
    // The suite's sumsq and rosenbrock: reverse width 4 and forward width 8 read,
    // multiply and add their lanes two at a time (`jit/src/lanes.rs`); width 1
    // has no vector. Their values are checked lane by lane against width 1 above
    // and in `examples/forward_suite.rs`.
    let p = Pipeline::new();
    for file in ["sumsq.ir", "rosenbrock.ir"] {
        let path = format!("{}/examples/ir/{file}", env!("CARGO_MANIFEST_DIR"));
        let m = parse(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let name = file.trim_end_matches(".ir");
        let one = p.derive(&m, name, None).unwrap();
        let code = clif_of(&one.module, &[one.pullback]);
        assert!(!code.contains("f64x2"), "{file} width 1:\n{code}");
        let wide = p.derive_width(&m, name, None, 4).unwrap();
        let code = clif_of(&wide.module, &[wide.pullback]);
        for what in ["load.f64x2", PACKED[0], PACKED[1]] {
            assert!(
                code.contains(what),
                "{file} reverse width 4, {what}:\n{code}"
            );
        }
        let config =
            gradlift::adjoint::FruleConfig::default_for(m.sig(m.func_by_name(name).unwrap()))
                .with_width(8);
        let fwd = p.derive_jvp(&m, name, Some(&config)).unwrap();
        let code = clif_of(&fwd.module, &[fwd.func]);
        let vectors = code.matches("load.f64x2").count();
        assert_eq!(
            vectors % 4,
            0,
            "{file} forward width 8: the 8 lanes are 4 pairs\n{code}"
        );
        assert!(
            vectors >= 4 && code.contains(PACKED[1]),
            "{file} forward width 8:\n{code}"
        );
    }
}
