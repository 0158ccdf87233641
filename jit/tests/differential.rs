//! The JIT against the interpreter, the oracle: every function of the reverse-mode
//! corpora (`adjoint/tests/corpus/scalars.ir`, `memory.ir`) and of `examples/ir`,
//! at the corpora's own inputs and at generic ones (zeros of both signs, NaN,
//! infinities, empty and longer slices, slices holding special floats), gives the
//! same results bit for bit, leaves the same contents in its arguments, or fails
//! with the same error (function, op, position, kind). The seven suite programs
//! are compared at moderate sizes too.

#[path = "../../adjoint/tests/corpus/inputs.rs"]
mod inputs;
mod support;

use gradlift_ir::interp::Val;
use gradlift_ir::{FuncId, Module};
use gradlift_jit::{CompileError, Hosts, Workspace, compile, compile_funcs, compile_with};
use inputs::{f, i, xs};
use support::{
    Compared, big_stack, compare, compare_hosted, example, generic_points, module, wave,
};

const SCALARS: &str = include_str!("../../adjoint/tests/corpus/scalars.ir");
const MEMORY: &str = include_str!("../../adjoint/tests/corpus/memory.ir");

/// How many calls of each outcome.
#[derive(Default, Debug)]
struct Tally {
    values: usize,
    errors: usize,
    skipped: usize,
}

impl Tally {
    fn add(&mut self, c: Compared) {
        match c {
            Compared::Values => self.values += 1,
            Compared::Errors => self.errors += 1,
            Compared::Skipped => self.skipped += 1,
        }
    }
}

/// Compares every function of `m` listed in `table` at its inputs, and every
/// defined function at `generic` generic points; every defined function must be
/// compiled (the whole module at once).
fn compare_module(m: &Module, table: &[(&str, Vec<Vec<Val>>)], generic: usize) -> Tally {
    let compiled = compile(m).unwrap_or_else(|e| panic!("{e}"));
    let mut ws = Workspace::new();
    let mut tally = Tally::default();
    for (name, points) in table {
        let id = m.func_by_name(name).unwrap_or_else(|| panic!("no @{name}"));
        for args in points {
            tally.add(compare(m, &compiled, &mut ws, id, args));
        }
    }
    for (id, _) in m.defined() {
        for args in generic_points(m.sig(id), generic) {
            tally.add(compare(m, &compiled, &mut ws, id, &args));
        }
    }
    tally
}

type Table = Vec<(&'static str, Vec<Vec<Val>>)>;

/// Adds `points` to `name`'s entry of `table` (or a new entry).
fn extend(table: &mut Table, name: &'static str, points: Vec<Vec<Val>>) {
    match table.iter_mut().find(|(n, _)| *n == name) {
        Some((_, p)) => p.extend(points),
        None => table.push((name, points)),
    }
}

/// The scalar corpus's inputs (as the adjoint tests check it), plus points
/// finite differences cannot use: `powi` with exponents beyond `i32`, and
/// `bitcast_zero` at -0 and NaN.
fn scalar_inputs() -> Table {
    let mut t = inputs::scalar_inputs();
    extend(
        &mut t,
        "op_powi",
        vec![
            vec![f(1.0000001), i(1 << 40)],
            vec![f(-1.0), i((1 << 40) + 1)],
        ],
    );
    extend(
        &mut t,
        "bitcast_zero",
        vec![vec![f(1.7)], vec![f(-0.0)], vec![f(f64::NAN)]],
    );
    t
}

/// The memory corpus's inputs, plus points that fail (out of bounds, slices of
/// different lengths), empty slices, a large buffer and deep recursion.
fn memory_inputs() -> Table {
    let a = || xs(&[0.5, 1.2, -0.3, 0.8]);
    let b = || xs(&[-0.7, 0.4, 1.1, 0.25]);
    let w = |n, p| Val::F64s(wave(n, p));
    let mut t = inputs::memory_inputs();
    extend(&mut t, "dot", vec![vec![w(5, 0.1), w(3, 1.7)]]);
    extend(&mut t, "axpy", vec![vec![f(0.7), w(6, 0.1), b()]]);
    extend(&mut t, "overwrite", vec![vec![xs(&[]), f(1.0)]]);
    extend(&mut t, "alloc_in_loop", vec![vec![w(300, 0.5)]]);
    extend(
        &mut t,
        "gather",
        vec![
            vec![w(5, 0.6), Val::I64s(vec![4, 5])],
            vec![w(5, 0.6), Val::I64s(vec![-1])],
        ],
    );
    extend(&mut t, "square_into", vec![vec![a(), xs(&[0.0; 2])]]);
    extend(
        &mut t,
        "count_down",
        vec![vec![f(9_998.5)], vec![f(20_000.0)]],
    );
    t
}

#[test]
fn every_function_of_the_scalar_corpus_matches_the_interpreter() {
    let tally = big_stack(|| {
        let m = module(SCALARS);
        let table = scalar_inputs();
        for (_, decl) in m.funcs.iter() {
            assert!(
                table.iter().any(|(n, _)| *n == decl.name),
                "@{} has no inputs",
                decl.name
            );
        }
        compare_module(&m, &table, 12)
    });
    eprintln!("scalars.ir: {tally:?}");
    assert!(tally.values >= 600, "{tally:?}");
}

#[test]
fn every_function_of_the_memory_corpus_matches_the_interpreter() {
    let tally = big_stack(|| {
        let m = module(MEMORY);
        let table = memory_inputs();
        for (_, decl) in m.funcs.iter() {
            assert!(
                table.iter().any(|(n, _)| *n == decl.name),
                "@{} has no inputs",
                decl.name
            );
        }
        compare_module(&m, &table, 12)
    });
    eprintln!("memory.ir: {tally:?}");
    // The corpus's slices come in matching lengths; generic ones often do not, and
    // `count_down` on huge inputs reaches the depth limit: errors are compared too.
    assert!(tally.values >= 300 && tally.errors >= 20, "{tally:?}");
}

/// Every function of every `examples/ir/*.ir`, the `extern @host_sin` of
/// `decls.ir` bound to `f64::sin` on both engines.
#[test]
fn every_example_function_matches_the_interpreter() {
    let (tally, hosted) = big_stack(|| {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/ir");
        let mut files: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|p| p.ends_with(".ir"))
            .collect();
        files.sort();
        assert!(files.len() >= 15, "{files:?}");
        let mut tally = Tally::default();
        let mut hosted = Vec::new();
        let hosts = Hosts::new().bind("host_sin", |a: &mut [Val]| match a {
            [Val::F64(x)] => Ok(vec![Val::F64(x.sin())]),
            _ => Err("host_sin takes one f64".into()),
        });
        for file in files {
            let m = example(&file);
            let funcs: Vec<FuncId> = m.defined().map(|(id, _)| id).collect();
            for id in funcs {
                if let Err(CompileError::UnboundExtern { name, caller, .. }) =
                    compile_funcs(&m, &[id])
                {
                    assert_eq!(name, "host_sin");
                    hosted.push(caller);
                }
                let compiled =
                    compile_with(&m, &[id], &hosts).unwrap_or_else(|e| panic!("{file}: {e}"));
                let mut ws = Workspace::new();
                for args in generic_points(m.sig(id), 14) {
                    tally.add(compare_hosted(&m, &compiled, &mut ws, id, &args, &hosts));
                }
            }
        }
        (tally, hosted)
    });
    eprintln!("examples: {tally:?}, calling a host function {hosted:?}");
    assert_eq!(hosted, ["wave"]);
    assert!(tally.values >= 300, "{tally:?}");
}

/// `s(a, b, i) = sin(a * i + b)`, the suite's input generator.
fn sgen(a: f64, b: f64, n: usize, scale: f64) -> Vec<f64> {
    (0..n).map(|i| scale * (a * i as f64 + b).sin()).collect()
}

/// The seven suite programs at moderate sizes.
pub fn suite_inputs(n: usize) -> Vec<(&'static str, &'static str, Vec<Val>)> {
    let mlp_b = 8;
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
    let y: Vec<i64> = (0..mlp_b as i64).map(|b| (3 * b) % 10).collect();
    vec![
        (
            "sumsq.ir",
            "sumsq",
            vec![Val::F64s(sgen(0.37, 0.1, n, 0.5))],
        ),
        (
            "rosenbrock.ir",
            "rosenbrock",
            vec![Val::F64s(sgen(0.37, 0.1, n, 0.5))],
        ),
        (
            "logsumexp.ir",
            "logsumexp",
            vec![Val::F64s(sgen(0.37, 0.1, n, 3.0))],
        ),
        (
            "normalize.ir",
            "normalize",
            vec![
                Val::F64s(sgen(0.37, 0.1, n / 10, 1.0)),
                Val::F64s(sgen(0.11, 0.7, n / 10, 1.0)),
            ],
        ),
        (
            "mlp.ir",
            "mlp",
            vec![
                Val::F64s(x),
                Val::F64s(w1),
                Val::F64s(b1),
                Val::F64s(w2),
                Val::F64s(b2),
                Val::I64s(y),
            ],
        ),
        (
            "ode.ir",
            "ode",
            vec![f(1.1), f(0.4), f(0.1), f(0.4), f(10.0), f(5.0), i(n as i64)],
        ),
        (
            "branchy.ir",
            "branchy",
            vec![Val::F64s(sgen(0.37, 0.1, n, 1.0))],
        ),
    ]
}

#[test]
fn the_seven_suite_programs_match_the_interpreter() {
    for (file, name, args) in suite_inputs(2_000) {
        let m = example(file);
        let id = m.func_by_name(name).unwrap();
        let compiled = compile(&m).unwrap();
        let mut ws = Workspace::new();
        let mut ja = args.clone();
        let got = compiled.call(&mut ws, id, &mut ja).unwrap();
        let want = gradlift_ir::interp::Interpreter::new(&m)
            .call(id, &mut args.clone())
            .unwrap();
        let (Val::F64(a), Val::F64(b)) = (&got[0], &want[0]) else {
            panic!("@{name}: {got:?} {want:?}")
        };
        assert!(
            (a - b).abs() <= 1e-12 * a.abs().max(b.abs()),
            "@{name}: JIT {a}, interpreter {b}"
        );
        // And in fact bit for bit.
        assert_eq!(
            a.to_bits(),
            b.to_bits(),
            "@{name}: JIT {a}, interpreter {b}"
        );
        assert_eq!(compare(&m, &compiled, &mut ws, id, &args), Compared::Values);
    }
}

/// The gradients of every corpus function that uses one of the math ops `sinh cosh
/// asin acos atan atan2 hypot log10 log2 exp2 fma`: the rule derived once, its
/// forward pass and pullback run by both engines (`value_and_gradient`), values and
/// cotangents equal bit for bit (NaN payloads included), at the corpus inputs, at
/// generic points, and at points of their own (atan2 in the four quadrants and on
/// signed zeros, hypot beyond where x² + y² overflows or underflows).
#[test]
fn gradients_through_the_math_ops_are_the_interpreters_bit_for_bit() {
    use gradlift_adjoint::{RuleConfig, Seeds, build_rrule, value_and_gradient};
    use gradlift_ir::Opcode;
    use gradlift_ir::interp::Interpreter;

    let math = [
        Opcode::Sinh,
        Opcode::Cosh,
        Opcode::Asin,
        Opcode::Acos,
        Opcode::Atan,
        Opcode::Atan2,
        Opcode::Hypot,
        Opcode::Log10,
        Opcode::Log2,
        Opcode::Exp2,
        Opcode::Fma,
    ];
    let m = module(SCALARS);
    let inputs = inputs::scalar_inputs();
    let mut seen = Vec::new();
    let mut compared = 0;
    for (id, body) in m.defined() {
        let name = m.name(id).to_string();
        let ops: Vec<Opcode> = body
            .placed_insts()
            .map(|(_, i)| body.insts[i].opcode)
            .filter(|op| math.contains(op))
            .collect();
        if ops.is_empty() {
            continue;
        }
        seen.extend(ops);
        let rule = build_rrule(&m, id, &RuleConfig::default_for(m.sig(id)))
            .unwrap_or_else(|e| panic!("@{name}: {e}"));
        let c = compile(&rule.module).unwrap_or_else(|e| panic!("@{name}: {e}"));
        let mut points: Vec<Vec<Val>> = inputs
            .iter()
            .filter(|(n, _)| *n == name)
            .flat_map(|(_, p)| p.clone())
            .collect();
        points.extend(generic_points(m.sig(id), 12));
        if m.sig(id).params.len() == 2 && m.sig(id).params[0] == gradlift_ir::Type::F64 {
            for (a, b) in [
                (0.7, 1.3),
                (0.7, -1.3),
                (-0.7, -1.3),
                (-0.7, 1.3),
                (0.0, -1.0),
                (-0.0, -1.0),
                (0.0, 0.0),
                (-0.0, -0.0),
                (3e300, -4e300),
                (3e-300, 4e-300),
            ] {
                points.push(vec![f(a), f(b)]);
            }
        }
        let mut ws = Workspace::new();
        for args in &points {
            let want = value_and_gradient(
                &mut Interpreter::new(&rule.module),
                &rule,
                args,
                &Seeds::default(),
            );
            let got = value_and_gradient(&mut c.engine(&mut ws), &rule, args, &Seeds::default());
            ws.reset_tape();
            let (Ok(want), Ok(got)) = (want, got) else {
                panic!("@{name} at {}: a gradient failed", support::show(args));
            };
            let (wv, gv) = (want.value.unwrap(), got.value.unwrap());
            assert!(
                support::same_all(&wv, &gv),
                "@{name} at {}: value {} vs {}",
                support::show(args),
                support::show(&wv),
                support::show(&gv)
            );
            for (w, g) in want.gradient.iter().zip(&got.gradient) {
                let (w, g) = (w.clone().unwrap(), g.clone().unwrap());
                assert!(
                    support::same(&w, &g),
                    "@{name} at {}: gradient {} on the interpreter, {} on the JIT",
                    support::show(args),
                    support::show(std::slice::from_ref(&w)),
                    support::show(std::slice::from_ref(&g))
                );
            }
            compared += 1;
        }
    }
    for op in math {
        assert!(seen.contains(&op), "no corpus function uses {op}");
    }
    assert!(compared >= 150, "{compared}");
}
