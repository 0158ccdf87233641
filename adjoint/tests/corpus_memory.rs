//! The reverse-mode corpus, part 2 (`tests/corpus/memory.ir`: slices, local
//! buffers, mutation, calls, recursion, declarations) and the seven suite programs
//! of `examples/ir`, against independent oracles.
//!
//! Every function passes `check_rule` (finite differences and the dot-product test
//! over the active scalars and the `dup` slices' contents, in and out) at its inputs,
//! under the default activities and variants (`const` slices, `dupnoneed`, no
//! primal, a `const` return). Some also get closed forms written here. Every derived
//! module verifies, prints, parses back and prints identically, and the parsed rule
//! computes what the derived one does.

use gradlift_adjoint::{CheckOptions, Rule, RuleConfig, build_rrule, check_derived};
use gradlift_adjoint::{Seeds, value_and_gradient};
use gradlift_ir::interp::{Interpreter, Val};
use gradlift_ir::{FuncId, Module, parse, verify};

#[path = "corpus/inputs.rs"]
mod inputs;

use inputs::{f, i, wave, xs};

const MEMORY: &str = include_str!("corpus/memory.ir");

fn memory() -> Module {
    let m = parse(MEMORY).unwrap_or_else(|e| panic!("{e}"));
    verify(&m).unwrap_or_else(|e| panic!("{e}"));
    m
}

/// Derives the rule of `@name` under `config` once and checks it at every point.
fn check(m: &Module, name: &str, config: &RuleConfig, points: &[Vec<Val>]) -> Rule {
    let id = m.func_by_name(name).unwrap_or_else(|| panic!("no @{name}"));
    let opts = CheckOptions::for_sig(m.sig(id));
    let rule = build_rrule(m, id, config).unwrap_or_else(|e| panic!("@{name}: {e}"));
    for args in points {
        if let Err(e) = check_derived(m, &rule, args, &opts) {
            let mut at = format!("{args:?}");
            at.truncate(300);
            let mut msg = e.to_string();
            msg.truncate(2000);
            panic!("@{name} with {config:?} at {at}: {msg}");
        }
    }
    rule
}

/// The default activities, then variants: every `dup` slice `const` in turn (where
/// that is not refused), `dupnoneed` for every `dup`, the primal not needed, a
/// `const` return.
fn check_variants(m: &Module, name: &str, points: &[Vec<Val>]) {
    let id = m.func_by_name(name).unwrap();
    let default = RuleConfig::default_for(m.sig(id));
    check(m, name, &default, points);
    let first = &points[..1];
    let (consts, always) = inputs::config_variants(&default);
    for c in consts {
        match build_rrule(m, id, &c) {
            Ok(_) => {
                check(m, name, &c, first);
            }
            Err(gradlift_adjoint::AdError::ConstWrite { .. }) => {}
            Err(e) => panic!("@{name} with {c:?}: {e}"),
        }
    }
    for c in always {
        check(m, name, &c, first);
    }
}

#[test]
fn every_function_of_the_memory_corpus_passes_check_rule() {
    let m = memory();
    let cases = inputs::memory_inputs();
    for (_, decl) in m.funcs.iter() {
        assert!(
            cases.iter().any(|(n, _)| *n == decl.name),
            "@{} has no inputs",
            decl.name
        );
    }
    assert!(cases.len() >= 35, "{}", cases.len());
    for (name, points) in &cases {
        check_variants(&m, name, points);
    }
}

/// Arguments for the suite programs at small sizes (the suite's shapes, `BENCHMARKS.md`).
fn suite_inputs() -> Vec<(&'static str, &'static str, Vec<Val>)> {
    let mlp_b = 2;
    let x: Vec<f64> = (0..mlp_b * 32)
        .map(|k| ((0.1 * (k / 32) as f64) + 0.7 * (k % 32) as f64).sin())
        .collect();
    let w1: Vec<f64> = (0..32 * 64)
        .map(|k| 0.1 * (0.3 * (k / 64) as f64 + 0.11 * (k % 64) as f64).cos())
        .collect();
    let b1: Vec<f64> = (0..64).map(|j| 0.01 * j as f64).collect();
    let w2: Vec<f64> = (0..64 * 10)
        .map(|k| 0.1 * (0.17 * (k / 10) as f64 + 0.5 * (k % 10) as f64).sin())
        .collect();
    let b2 = vec![0.0; 10];
    let y: Vec<i64> = (0..mlp_b as i64).map(|b| b % 10).collect();
    vec![
        ("sumsq.ir", "sumsq", vec![wave(6, 0.1)]),
        ("rosenbrock.ir", "rosenbrock", vec![wave(5, 0.4)]),
        ("logsumexp.ir", "logsumexp", vec![wave(7, 0.2)]),
        (
            "normalize.ir",
            "normalize",
            vec![wave(5, 0.3), wave(5, 1.9)],
        ),
        (
            "mlp.ir",
            "mlp",
            vec![xs(&x), xs(&w1), xs(&b1), xs(&w2), xs(&b2), Val::I64s(y)],
        ),
        (
            "ode.ir",
            "ode",
            vec![f(1.1), f(0.4), f(0.1), f(0.4), f(10.0), f(5.0), i(50)],
        ),
        ("branchy.ir", "branchy", vec![wave(8, 0.5)]),
    ]
}

fn example(file: &str) -> Module {
    let path = format!("{}/../examples/ir/{file}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    parse(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

#[test]
fn the_seven_suite_programs_pass_check_rule() {
    for (file, name, args) in suite_inputs() {
        let m = example(file);
        let id = m.func_by_name(name).unwrap();
        let rule = check(
            &m,
            name,
            &RuleConfig::default_for(m.sig(id)),
            std::slice::from_ref(&args),
        );
        round_trips(&rule, &m, id, &args);
    }
}

/// `x[i] = x[i] * x[i]` twice: with the shadow seeded with 1s, it ends holding
/// `4 x^3` (a test of overwriting stores).
#[test]
fn square_twice_routes_cotangents_through_overwrites() {
    let m = memory();
    let id = m.func_by_name("square_twice").unwrap();
    let rule = build_rrule(&m, id, &RuleConfig::default_for(m.sig(id))).unwrap();
    let x = [0.5, 1.2, -0.3, 2.0];
    let mut engine = Interpreter::new(&rule.module);
    let seeds = Seeds::default().with_shadows(vec![Some(xs(&[1.0; 4]))]);
    let out = value_and_gradient(&mut engine, &rule, &[xs(&x)], &seeds).unwrap();
    assert_eq!(out.args[0], xs(&x.map(|v: f64| v.powi(4))));
    let Some(Val::F64s(dx)) = &out.gradient[0] else {
        panic!()
    };
    for (d, v) in dx.iter().zip(x) {
        assert!((d - 4.0 * v * v * v).abs() <= 1e-14 * (4.0 * v * v * v).abs());
    }
}

/// `f(x) = if x > 0 { f(x - 1) } else { x }`: gradient 1 at every x, through
/// recursion of any depth; and the rule is one pair, the callee's own.
#[test]
fn count_down_recursion_has_gradient_one() {
    let m = memory();
    let id = m.func_by_name("count_down").unwrap();
    let rule = build_rrule(&m, id, &RuleConfig::default_for(m.sig(id))).unwrap();
    assert_eq!(rule.module.funcs.len(), m.funcs.len() + 2);
    let mut engine = Interpreter::new(&rule.module);
    for x in [-3.0, 0.0, 0.5, 2.5, 40.25] {
        let out = value_and_gradient(&mut engine, &rule, &[f(x)], &Seeds::default()).unwrap();
        let want = if x > 0.0 { x - x.ceil() } else { x };
        assert_eq!(out.value, Some(vec![f(want)]), "x = {x}");
        assert_eq!(out.gradient, [Some(f(1.0))], "x = {x}");
    }
}

/// One callee under two activity patterns gets two rules, named after them.
#[test]
fn a_callee_gets_one_rule_per_activity_pattern() {
    let m = memory();
    let id = m.func_by_name("two_patterns").unwrap();
    let rule = build_rrule(&m, id, &RuleConfig::default_for(m.sig(id))).unwrap();
    for name in ["h2.fwd.AC_A", "h2.rvs.AC_A", "h2.fwd.CA_A", "h2.rvs.CA_A"] {
        assert!(rule.module.func_by_name(name).is_some(), "no @{name}");
    }
    // And a function calling the same callee twice with one pattern derives it once.
    let id = m.func_by_name("call_scalar").unwrap();
    let rule = build_rrule(&m, id, &RuleConfig::default_for(m.sig(id))).unwrap();
    let derived: Vec<&str> = rule
        .module
        .funcs
        .values()
        .map(|d| d.name.as_str())
        .filter(|n| n.starts_with("g_scalar."))
        .collect();
    assert_eq!(derived, ["g_scalar.fwd", "g_scalar.rvs"]);
}

/// `nodiff`, `vjp` and `overlay` at call sites, against closed forms.
#[test]
fn declarations_at_call_sites_match_closed_forms() {
    let m = memory();
    let grad = |name: &str, x: f64| -> f64 {
        let id = m.func_by_name(name).unwrap();
        let rule = build_rrule(&m, id, &RuleConfig::default_for(m.sig(id))).unwrap();
        let mut engine = Interpreter::new(&rule.module);
        let out = value_and_gradient(&mut engine, &rule, &[f(x)], &Seeds::default()).unwrap();
        match out.gradient[0] {
            Some(Val::F64(g)) => g,
            _ => panic!(),
        }
    };
    for x in [2.5, -0.7, 0.3] {
        // x floor(x), floor a constant: floor(x).
        assert_eq!(grad("uses_nodiff", x), x.floor());
        // cube(sin x): 3 sin^2 x cos x, from the vjp.
        let want = 3.0 * x.sin().powi(2) * x.cos();
        assert!((grad("uses_vjp", x) - want).abs() < 1e-14);
        // softplus(x) x: sigmoid(x) x + softplus(x), through the stable overlay.
        let sp = (1.0 + x.exp()).ln();
        let want = x / (1.0 + (-x).exp()) + sp;
        assert!((grad("uses_overlay", x) - want).abs() < 1e-14);
    }
    // The vjp's rule is called, not derived: no @cube.fwd in the module.
    let id = m.func_by_name("uses_vjp").unwrap();
    let rule = build_rrule(&m, id, &RuleConfig::default_for(m.sig(id))).unwrap();
    assert!(rule.module.func_by_name("cube.fwd").is_none());
    assert!(rule.module.to_string().contains("call @cube_vjp("));
}

/// Every rule of the memory corpus (default activities and without the primal):
/// the derived module verifies, prints, parses back, prints identically, and the
/// parsed rule computes what the derived one does.
#[test]
fn every_derived_module_round_trips_through_text() {
    let m = memory();
    let cases = inputs::memory_inputs();
    for (name, points) in &cases {
        let id = m.func_by_name(name).unwrap();
        let default = RuleConfig::default_for(m.sig(id));
        for config in [default.clone(), default.with_primal(false)] {
            let rule = build_rrule(&m, id, &config).unwrap_or_else(|e| panic!("@{name}: {e}"));
            round_trips(&rule, &m, id, &points[0]);
        }
    }
}

/// The rule's module verifies and round-trips, and the parsed copy gives the same
/// value and gradient at `args`.
fn round_trips(rule: &Rule, primal: &Module, id: FuncId, args: &[Val]) {
    let name = primal.name(id);
    let text = rule.module.to_string();
    verify(&rule.module).unwrap_or_else(|e| panic!("@{name}: {e}\n{text}"));
    let back = parse(&text).unwrap_or_else(|e| panic!("@{name}: {e}\n{text}"));
    verify(&back).unwrap_or_else(|e| panic!("@{name}: {e}\n{text}"));
    assert_eq!(back.to_string(), text, "@{name}");
    let parsed = Rule {
        module: back.clone(),
        forward: back.func_by_name(rule.module.name(rule.forward)).unwrap(),
        pullback: back.func_by_name(rule.module.name(rule.pullback)).unwrap(),
        fused: rule
            .fused
            .map(|f| back.func_by_name(rule.module.name(f)).unwrap()),
        layout: rule.layout.clone(),
    };
    let a = value_and_gradient(
        &mut Interpreter::new(&rule.module),
        rule,
        args,
        &Seeds::default(),
    )
    .unwrap_or_else(|e| panic!("@{name}: {e}"));
    let b = value_and_gradient(
        &mut Interpreter::new(&back),
        &parsed,
        args,
        &Seeds::default(),
    )
    .unwrap_or_else(|e| panic!("@{name}: {e}"));
    assert_eq!((a.value, a.gradient), (b.value, b.gradient), "@{name}");
}

/// A corpus of at least 50 functions, and every op of the spec in it.
#[test]
fn the_corpus_covers_every_op_and_has_fifty_functions() {
    let scalars = parse(include_str!("corpus/scalars.ir")).unwrap();
    let memory = memory();
    let n = scalars.funcs.len() + memory.funcs.len() + suite_inputs().len();
    assert!(n >= 50, "{n} functions");
    let mut seen = std::collections::HashSet::new();
    for m in [&scalars, &memory] {
        for (_, f) in m.defined() {
            for (_, inst) in f.placed_insts() {
                seen.insert(f.insts[inst].opcode);
            }
        }
    }
    let missing: Vec<&str> = gradlift_ir::Opcode::ALL
        .iter()
        .filter(|op| !seen.contains(op))
        .map(|op| op.name())
        .filter(|n| {
            !matches!(
                *n,
                "push" | "pop" | "tape_alloc" | "tape_view" | "trap_if" | "recompute"
            )
        })
        .collect();
    assert!(missing.is_empty(), "not in the corpus: {missing:?}");
}
