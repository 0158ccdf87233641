//! The two tape policies give the same gradients: every function of both
//! reverse-mode corpora and of `examples/ir`, under the default activities and the
//! corpus variants, derived with `TapePolicy::SaveAll` and `TapePolicy::Minimal`,
//! run on the interpreter at the corpus inputs: the same values and gradients, bit
//! for bit (the minimal tape recomputes with the same ops on the same operands and
//! reloads the same elements), and never a tape more than a few scalars bigger. And
//! the minimal tape is O(1) in n where the suite needs it to be: sumsq, rosenbrock,
//! and normalize once optimised.

use gradlift_adjoint::{Gradient, RuleConfig, TapePolicy, build_rrule};
use gradlift_adjoint::{Seeds, value_and_gradient};
use gradlift_ir::interp::{Interpreter, Val};
use gradlift_ir::{Module, parse, verify};

#[path = "corpus/inputs.rs"]
mod inputs;

const SCALARS: &str = include_str!("corpus/scalars.ir");
const MEMORY: &str = include_str!("corpus/memory.ir");

fn module(text: &str) -> Module {
    let m = parse(text).unwrap_or_else(|e| panic!("{e}"));
    verify(&m).unwrap_or_else(|e| panic!("{e}"));
    m
}

fn example(file: &str) -> Module {
    let path = format!("{}/../examples/ir/{file}", env!("CARGO_MANIFEST_DIR"));
    module(&std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}")))
}

/// The gradient of `@name` under `config` at `args`, or the error as text.
fn run(m: &Module, name: &str, config: &RuleConfig, args: &[Val]) -> Result<Gradient, String> {
    let id = m.func_by_name(name).unwrap();
    let rule = build_rrule(m, id, config).map_err(|e| e.to_string())?;
    let mut engine = Interpreter::new(&rule.module);
    value_and_gradient(&mut engine, &rule, args, &Seeds::default()).map_err(|e| e.to_string())
}

/// Bit patterns, with every NaN alike.
fn bits(v: &Val) -> Vec<u64> {
    let f = |x: f64| if x.is_nan() { u64::MAX } else { x.to_bits() };
    match v {
        Val::F64(x) => vec![f(*x)],
        Val::F32(x) => vec![f(f64::from(*x))],
        Val::I64(x) => vec![*x as u64],
        Val::Bool(x) => vec![u64::from(*x)],
        Val::F64s(v) => v.iter().map(|&x| f(x)).collect(),
        Val::F32s(v) => v.iter().map(|&x| f(f64::from(x))).collect(),
        Val::I64s(v) => v.iter().map(|&x| x as u64).collect(),
    }
}

fn same(a: &[Option<Val>], b: &[Option<Val>]) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|(x, y)| x.as_ref().map(bits) == y.as_ref().map(bits))
}

/// Both policies on `@name` at every point, under `config`; returns how many
/// gradients were compared.
fn compare(m: &Module, name: &str, config: &RuleConfig, points: &[Vec<Val>]) -> usize {
    let mut n = 0;
    for args in points {
        let all = run(
            m,
            name,
            &config.clone().with_tape(TapePolicy::SaveAll),
            args,
        );
        let min = run(
            m,
            name,
            &config.clone().with_tape(TapePolicy::Minimal),
            args,
        );
        match (all, min) {
            (Ok(a), Ok(b)) => {
                let va: Vec<Option<Val>> = a.value.iter().flatten().cloned().map(Some).collect();
                let vb: Vec<Option<Val>> = b.value.iter().flatten().cloned().map(Some).collect();
                assert!(
                    same(&va, &vb),
                    "@{name} {config:?}: values {va:?} vs {vb:?}"
                );
                assert!(
                    same(&a.gradient, &b.gradient),
                    "@{name} {config:?} at {args:?}: save-all {:?}, minimal {:?}",
                    a.gradient,
                    b.gradient
                );
                // Minimal may push a few scalars that saving everything does not
                // (a loop's last index, values pushed once whatever path runs),
                // which a loop of zero or one trips does not win back.
                assert!(
                    b.tape_peak_bytes <= a.tape_peak_bytes + 64,
                    "@{name} {config:?}: minimal tape {} > save-all {}",
                    b.tape_peak_bytes,
                    a.tape_peak_bytes
                );
                n += 1;
            }
            // A refused request or a runtime error is the same under both.
            (Err(a), Err(b)) => assert_eq!(a, b, "@{name} {config:?}"),
            (a, b) => panic!("@{name} {config:?}: save-all {a:?}, minimal {b:?}"),
        }
    }
    n
}

/// The default activities and the corpus variants.
fn configs(m: &Module, name: &str) -> Vec<RuleConfig> {
    let id = m.func_by_name(name).unwrap();
    // The two passes, whose tape the policies shape (a fused rule keeps none).
    let default = RuleConfig::default_for(m.sig(id)).with_fuse(false);
    let (consts, always) = inputs::config_variants(&default);
    let mut all = vec![default];
    all.extend(consts);
    all.extend(always);
    all
}

#[test]
fn both_corpora_give_the_same_gradients_under_both_policies() {
    let mut compared = 0;
    for (text, cases) in [
        (SCALARS, inputs::scalar_inputs()),
        (MEMORY, inputs::memory_inputs()),
    ] {
        let m = module(text);
        for (name, points) in &cases {
            for config in configs(&m, name) {
                compared += compare(&m, name, &config, points);
            }
        }
    }
    assert!(compared > 300, "{compared}");
}

#[test]
fn a_loop_that_exits_into_the_next_loops_header_is_still_counted() {
    // logsumexp.ir's maximum loop goes from its header straight on to the sum
    // loop's header. The derivation gives that edge a block of its own, so the
    // maximum loop is counted (no block-stack entry per iteration): the tape holds
    // the running maximum (8 bytes) and the exponential (8 bytes) per element, and
    // nothing more. Without the split, each iteration of the first loop also
    // pushed its block-stack entry.
    use inputs::wave;
    let m = example("logsumexp.ir");
    let config = &configs(&m, "logsumexp")[0];
    let (small, large) = (vec![wave(50, 0.2)], vec![wave(200, 0.2)]);
    compare(&m, "logsumexp", config, &[small.clone(), large.clone()]);
    let tape = |args: &[Val]| run(&m, "logsumexp", config, args).unwrap().tape_peak_bytes;
    assert_eq!(tape(&large) - tape(&small), 16 * 150);
}

#[test]
fn the_suite_programs_give_the_same_gradients_and_minimal_tapes_are_constant() {
    use inputs::wave;
    // (file, function, arguments at n and at 4n, the minimal tape is O(1))
    let cases = [
        (
            "sumsq.ir",
            "sumsq",
            vec![wave(50, 0.1)],
            vec![wave(200, 0.1)],
            true,
        ),
        (
            "rosenbrock.ir",
            "rosenbrock",
            vec![wave(50, 0.4)],
            vec![wave(200, 0.4)],
            true,
        ),
        (
            "normalize.ir",
            "normalize",
            vec![wave(20, 0.3), wave(20, 1.9)],
            vec![wave(80, 0.3), wave(80, 1.9)],
            true,
        ),
        (
            "logsumexp.ir",
            "logsumexp",
            vec![wave(50, 0.2)],
            vec![wave(200, 0.2)],
            false,
        ),
        (
            "branchy.ir",
            "branchy",
            vec![wave(50, 0.5)],
            vec![wave(200, 0.5)],
            false,
        ),
    ];
    for (file, name, small, large, constant) in cases {
        // The optimiser first, as the compiled API runs it: it hoists normalize's
        // norm out of the loop.
        let mut m = example(file);
        gradlift_ir::opt::optimize(&mut m, &gradlift_ir::opt::OptConfig::default()).unwrap();
        let config = &configs(&m, name)[0];
        compare(&m, name, config, &[small.clone(), large.clone()]);
        let tape = |args: &[Val]| run(&m, name, config, args).unwrap().tape_peak_bytes;
        let (a, b) = (tape(&small), tape(&large));
        if constant {
            assert_eq!(a, b, "@{name}: the minimal tape grows with n");
        } else {
            assert!(b > a, "@{name}: {a} {b}");
        }
    }
}
