//! Reverse mode of width N (`build_rrule_width`): one forward pass and one pullback
//! carrying N cotangents give, lane by lane and bit for bit, what N width-1
//! gradients give from the same seeds and shadows, on every function of both
//! corpora, under the default activities and their variants (`dupnoneed` without
//! the primal, a `const` return), and in debug mode.

use gradlift_adjoint::{
    AdError, Gradient, RuleConfig, Seeds, build_rrule, build_rrule_width, value_and_gradient,
};
use gradlift_ir::interp::{Interpreter, Val};
use gradlift_ir::{Module, parse, verify};

#[path = "corpus/inputs.rs"]
mod inputs;
mod support;

use support::Rng;

const SCALARS: &str = include_str!("corpus/scalars.ir");
const MEMORY: &str = include_str!("corpus/memory.ir");

fn module(text: &str) -> Module {
    let m = parse(text).unwrap_or_else(|e| panic!("{e}"));
    verify(&m).unwrap_or_else(|e| panic!("{e}"));
    m
}

/// A value shaped like `like` (a slice of `n` lanes per element, or `n` lanes of
/// a scalar), random.
fn random_lanes(rng: &mut Rng, like: &Val, n: usize) -> Val {
    let len = like.slice_len().unwrap_or(1) * n;
    match like {
        Val::F32s(_) | Val::F32(_) => {
            Val::F32s((0..len).map(|_| (rng.unit() * 2.0 - 1.0) as f32).collect())
        }
        _ => Val::F64s((0..len).map(|_| rng.unit() * 2.0 - 1.0).collect()),
    }
}

/// Lane `j` of `v` (`n` lanes per element), shaped as at width 1: a scalar when
/// `scalar`, else a slice.
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

fn bits(v: &Val) -> Vec<u64> {
    match v {
        Val::F64(x) => vec![x.to_bits()],
        Val::F32(x) => vec![u64::from(x.to_bits())],
        Val::F64s(x) => x.iter().map(|x| x.to_bits()).collect(),
        Val::F32s(x) => x.iter().map(|x| u64::from(x.to_bits())).collect(),
        Val::I64(x) => vec![*x as u64],
        Val::Bool(x) => vec![u64::from(*x)],
        Val::I64s(x) => x.iter().map(|&x| x as u64).collect(),
    }
}

/// Checks width `n` against `n` width-1 gradients of `@name` under `config` at
/// `args`, from random seeds and shadows. Returns whether the rule derived.
fn check(m: &Module, name: &str, config: &RuleConfig, args: &[Val], n: u32, rng: &mut Rng) -> bool {
    let f = m.func_by_name(name).unwrap();
    // Width 1 as two passes (a fused rule may add terms into one place in
    // another order).
    let Ok(one) = build_rrule(m, f, &config.clone().with_fuse(false)) else {
        return false;
    };
    let wide = build_rrule_width(m, f, config, n)
        .unwrap_or_else(|e| panic!("@{name} {} width {n}: {e}", config.pattern()));
    assert_eq!(wide.layout.width, n);
    let n = n as usize;
    let n_seeds = wide.layout.seeded_results.len();
    let n_float = m.sig(f).results.iter().filter(|t| t.is_float()).count();
    let seeds: Vec<f64> = (0..n_float * n).map(|_| rng.unit() * 2.0 - 1.0).collect();
    let shadows: Vec<Option<Val>> = (0..args.len())
        .map(|i| {
            wide.layout
                .shadow_params
                .contains(&i)
                .then(|| random_lanes(rng, &args[i], n))
        })
        .collect();
    let wide_seeds = Seeds {
        results: (n_seeds > 0).then(|| seeds.clone()),
        shadows: shadows.clone(),
    };
    let got = value_and_gradient(
        &mut Interpreter::new(&wide.module),
        &wide,
        args,
        &wide_seeds,
    );
    for j in 0..n {
        let lane_seeds = Seeds {
            results: (n_seeds > 0).then(|| (0..n_float).map(|k| seeds[k * n + j]).collect()),
            shadows: shadows
                .iter()
                .map(|s| s.as_ref().map(|s| lane(s, n, j, false)))
                .collect(),
        };
        let want = value_and_gradient(&mut Interpreter::new(&one.module), &one, args, &lane_seeds);
        let what = format!("@{name} {} width {n} lane {j}", config.pattern());
        match (&want, &got) {
            (Err(a), Err(b)) => {
                assert_eq!(a.to_string(), b.to_string(), "{what}: the errors differ");
                continue;
            }
            (Ok(_), Err(e)) => panic!("{what}: width N failed where width 1 did not: {e}"),
            (Err(e), Ok(_)) => panic!("{what}: width 1 failed where width N did not: {e}"),
            (Ok(_), Ok(_)) => {}
        }
        let (want, got): (&Gradient, &Gradient) = (want.as_ref().unwrap(), got.as_ref().unwrap());
        assert_eq!(want.value, got.value, "{what}: values");
        assert_eq!(want.args, got.args, "{what}: arguments after the call");
        for (i, (w, g)) in want.gradient.iter().zip(&got.gradient).enumerate() {
            match (w, g) {
                (None, None) => {}
                (Some(w), Some(g)) => {
                    let scalar = args[i].slice_len().is_none();
                    assert_eq!(
                        bits(w),
                        bits(&lane(g, n, j, scalar)),
                        "{what}: parameter {i}: {w:?} against lane {j} of {g:?}"
                    );
                }
                _ => panic!("{what}: parameter {i}: {w:?} against {g:?}"),
            }
        }
    }
    true
}

fn corpus_test(text: &str, cases: Vec<(&'static str, Vec<Vec<Val>>)>, widths: &[u32]) -> usize {
    let m = module(text);
    let mut rng = Rng(7);
    let mut checked = 0;
    for (name, points) in cases {
        let Some(f) = m.func_by_name(name) else {
            continue;
        };
        let default = RuleConfig::default_for(m.sig(f));
        let (_, variants) = inputs::config_variants(&default);
        for &n in widths {
            for (k, args) in points.iter().enumerate() {
                if check(&m, name, &default, args, n, &mut rng) {
                    checked += 1;
                }
                // The variants and debug mode at one width of several lanes.
                if k == 0 && n == 4 {
                    for c in &variants {
                        check(&m, name, c, args, n, &mut rng);
                    }
                    check(
                        &m,
                        name,
                        &default.clone().with_debug(true, true),
                        args,
                        n,
                        &mut rng,
                    );
                }
            }
        }
    }
    checked
}

const WIDTHS: [u32; 5] = [1, 2, 4, 8, 13];

#[test]
fn width_n_is_bit_identical_to_n_width_one_gradients_on_the_scalar_corpus() {
    let checked = corpus_test(SCALARS, inputs::scalar_inputs(), &WIDTHS);
    assert!(checked >= 55 * WIDTHS.len(), "only {checked} checked");
}

#[test]
fn width_n_is_bit_identical_to_n_width_one_gradients_on_the_memory_corpus() {
    let checked = corpus_test(MEMORY, inputs::memory_inputs(), &WIDTHS);
    assert!(checked >= 40 * WIDTHS.len(), "only {checked} checked");
}

#[test]
fn a_width_out_of_range_is_refused() {
    let m = module(
        "func @f(%x: f64) -> f64 {
        entry:
            ret %x
        }",
    );
    let f = m.func_by_name("f").unwrap();
    let c = RuleConfig::default_for(m.sig(f));
    for n in [0, 65] {
        let e = build_rrule_width(&m, f, &c, n).unwrap_err();
        assert!(matches!(e, AdError::Unsupported { .. }), "{e:?}");
        assert!(e.to_string().contains(&format!("a width of {n}")), "{e}");
    }
}

#[test]
fn shadows_and_seeds_of_the_wrong_size_are_refused_with_what_is_expected() {
    let m = module(
        "func @dot(%x: [f64], %y: [f64]) -> f64 {
        entry:
            %a = load %x[0]
            %b = load %y[0]
            %r = fmul %a, %b
            ret %r
        }",
    );
    let f = m.func_by_name("dot").unwrap();
    let rule = build_rrule_width(&m, f, &RuleConfig::default_for(m.sig(f)), 3).unwrap();
    let args = [Val::F64s(vec![2.0]), Val::F64s(vec![5.0])];
    let mut engine = Interpreter::new(&rule.module);
    let e = value_and_gradient(&mut engine, &rule, &args, &Seeds::results([1.0])).unwrap_err();
    assert!(e.to_string().contains("3 per float result"), "{e}");
    let bad_shadow = Seeds::default().with_shadows([Some(Val::F64s(vec![0.0; 2])), None]);
    let e = value_and_gradient(&mut engine, &rule, &args, &bad_shadow).unwrap_err();
    assert!(e.to_string().contains("must be a [f64] of length 3"), "{e}");
    // The three lanes of the gradient of x0 y0 seeded 1, 2, 3: y0 times each seed.
    let out =
        value_and_gradient(&mut engine, &rule, &args, &Seeds::results([1.0, 2.0, 3.0])).unwrap();
    assert_eq!(out.gradient[0], Some(Val::F64s(vec![5.0, 10.0, 15.0])));
    assert_eq!(out.gradient[1], Some(Val::F64s(vec![2.0, 4.0, 6.0])));
}
