//! The JIT against the interpreter, the oracle: every function of the reverse-mode
//! corpora (`adjoint/tests/corpus/scalars.ir`, `memory.ir`) and of `examples/ir`,
//! at the corpora's own inputs and at generic ones (zeros of both signs, NaN,
//! infinities, empty and longer slices, slices holding special floats), gives the
//! same results bit for bit, leaves the same contents in its arguments, or fails
//! with the same error (function, op, position, kind). The seven suite programs
//! are compared at moderate sizes too.

mod support;

use gradlift_ir::interp::Val;
use gradlift_ir::{FuncId, Module};
use gradlift_jit::{CompileError, Workspace, compile, compile_funcs};
use support::{Compared, big_stack, compare, example, generic_points, module, wave};

const SCALARS: &str = include_str!("../../adjoint/tests/corpus/scalars.ir");
const MEMORY: &str = include_str!("../../adjoint/tests/corpus/memory.ir");

fn f(x: f64) -> Val {
    Val::F64(x)
}

fn s(x: f32) -> Val {
    Val::F32(x)
}

fn i(x: i64) -> Val {
    Val::I64(x)
}

fn xs(v: &[f64]) -> Val {
    Val::F64s(v.to_vec())
}

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

/// The inputs of `adjoint/tests/corpus.rs`, with `bitcast_zero`'s.
fn scalar_inputs() -> Vec<(&'static str, Vec<Vec<Val>>)> {
    let two = |a: [f64; 2], b: [f64; 2]| vec![vec![f(a[0]), f(a[1])], vec![f(b[0]), f(b[1])]];
    let one = |xs: &[f64]| xs.iter().map(|&x| vec![f(x)]).collect::<Vec<_>>();
    vec![
        ("op_fadd", two([1.5, -0.7], [-2.0, 3.25])),
        ("op_fsub", two([1.5, -0.7], [-2.0, 3.25])),
        ("op_fmul", two([1.5, -0.7], [-2.0, 3.25])),
        ("op_fdiv", two([1.5, -0.7], [-2.0, 3.25])),
        ("op_fmin", two([1.5, -0.7], [-2.0, 3.25])),
        ("op_fmax", two([1.5, -0.7], [-2.0, 3.25])),
        ("op_pow", two([1.7, 2.3], [0.5, -1.2])),
        ("op_fneg", one(&[1.5, -0.25])),
        ("op_fabs", one(&[-1.3, 2.0])),
        ("op_sqrt", one(&[0.3, 4.0])),
        ("op_exp", one(&[-1.0, 0.7])),
        ("op_log", one(&[0.3, 5.0])),
        ("op_sin", one(&[0.4, -2.0])),
        ("op_cos", one(&[0.4, -2.0])),
        ("op_tan", one(&[0.3, -1.0])),
        ("op_tanh", one(&[0.3, -1.5])),
        ("op_floor_ceil", one(&[1.3, -2.6])),
        (
            "op_powi",
            vec![
                vec![f(1.3), i(3)],
                vec![f(-0.8), i(4)],
                vec![f(2.0), i(0)],
                vec![f(1.5), i(-2)],
                vec![f(1.0000001), i(1 << 40)],
                vec![f(-1.0), i((1 << 40) + 1)],
            ],
        ),
        ("op_powi_const", one(&[1.3, -0.7])),
        ("op_pow_const", one(&[1.3, 0.6])),
        ("op_select", two([2.0, 1.0], [0.5, 1.0])),
        ("op_const_inst", one(&[1.0, -3.0])),
        ("poly", two([2.0, 1.0], [-1.5, 0.3])),
        ("logsumexp2", two([0.3, 1.2], [-2.0, -1.9])),
        ("sigmoid", one(&[0.3, -2.0])),
        (
            "clamp",
            vec![
                vec![f(0.5), f(0.0), f(1.0)],
                vec![f(2.0), f(0.0), f(1.0)],
                vec![f(-1.0), f(0.0), f(1.0)],
            ],
        ),
        ("reuse_and_unused", two([1.2, -0.5], [0.3, 2.0])),
        ("constant_return", one(&[2.0, -1.0])),
        (
            "mixed",
            vec![
                vec![f(1.5), i(3), Val::Bool(true)],
                vec![f(-0.5), i(-2), Val::Bool(false)],
            ],
        ),
        (
            "f32_poly",
            vec![vec![s(0.7), s(1.3)], vec![s(-0.4), s(0.9)]],
        ),
        ("f32_ops", vec![vec![s(0.7), s(1.3)], vec![s(1.6), s(0.4)]]),
        ("casts", vec![vec![s(0.7), f(2.3)], vec![s(-1.5), f(-0.6)]]),
        ("multiple_results", two([0.7, 2.5], [-1.0, 0.3])),
        ("diamond", two([1.5, 0.5], [-1.5, 0.5])),
        (
            "phi_of_phis",
            vec![
                vec![f(1.0), f(0.5)],
                vec![f(1.0), f(-0.5)],
                vec![f(-1.0), f(2.0)],
                vec![f(-1.0), f(0.5)],
            ],
        ),
        (
            "early_return",
            vec![
                vec![f(-1.0), f(2.0)],
                vec![f(20.0), f(1.5)],
                vec![f(2.0), f(0.5)],
            ],
        ),
        (
            "pown",
            vec![vec![f(1.3), i(5)], vec![f(-0.7), i(3)], vec![f(2.0), i(0)]],
        ),
        ("halve", one(&[5.3, 0.7, 100.0])),
        (
            "nested",
            vec![
                vec![f(0.9), f(0.3), i(3), i(2)],
                vec![f(1.1), f(-0.2), i(2), i(3)],
            ],
        ),
        ("two_carried", vec![vec![f(0.5), i(4)], vec![f(1.2), i(0)]]),
        (
            "swap",
            vec![vec![f(1.2), f(0.7), i(3)], vec![f(0.5), f(2.0), i(4)]],
        ),
        ("loop_break", vec![vec![f(1.5), i(5)], vec![f(1.01), i(3)]]),
        ("never_returns_branch", one(&[2.0, -0.5])),
        ("unreachable_block", one(&[1.5, -0.5])),
        (
            "loop_diamond",
            vec![vec![f(0.8), i(5)], vec![f(-0.3), i(2)]],
        ),
        (
            "same_target",
            vec![
                vec![f(1.5), Val::Bool(true)],
                vec![f(1.5), Val::Bool(false)],
            ],
        ),
        ("identity2", two([0.3, 0.4], [-1.0, 2.0])),
        (
            "irreducible",
            vec![vec![f(0.8), i(5)], vec![f(-0.6), i(4)], vec![f(0.3), i(1)]],
        ),
        ("self_loop", vec![vec![f(1.3), i(4)], vec![f(-0.9), i(1)]]),
        ("bitcast_zero", one(&[1.7, -0.0, f64::NAN])),
    ]
}

/// The inputs of `adjoint/tests/corpus_memory.rs`, with a few out of bounds.
fn memory_inputs() -> Vec<(&'static str, Vec<Vec<Val>>)> {
    let a = || xs(&[0.5, 1.2, -0.3, 0.8]);
    let b = || xs(&[-0.7, 0.4, 1.1, 0.25]);
    let w = |n, p| Val::F64s(wave(n, p));
    vec![
        (
            "slice_sum_sin",
            vec![vec![a()], vec![w(7, 0.3)], vec![xs(&[])]],
        ),
        (
            "dot",
            vec![
                vec![a(), b()],
                vec![w(5, 0.1), w(5, 1.7)],
                vec![w(5, 0.1), w(3, 1.7)],
            ],
        ),
        (
            "scale_inplace",
            vec![vec![f(1.5), a()], vec![f(-0.4), w(6, 0.2)]],
        ),
        ("square_twice", vec![vec![a()], vec![w(5, 0.9)]]),
        ("square_twice_sum", vec![vec![a()]]),
        (
            "axpy",
            vec![vec![f(0.7), a(), b()], vec![f(0.7), w(6, 0.1), b()]],
        ),
        (
            "overwrite",
            vec![vec![a(), f(0.7)], vec![b(), f(-1.3)], vec![xs(&[]), f(1.0)]],
        ),
        ("prefix_sums", vec![vec![a()], vec![w(9, 0.4)]]),
        (
            "alloc_in_loop",
            vec![vec![a()], vec![w(4, 2.0)], vec![w(300, 0.5)]],
        ),
        (
            "f32_norm",
            vec![
                vec![Val::F32s(vec![0.5, 1.25, -0.75])],
                vec![Val::F32s(vec![2.0, -1.5])],
            ],
        ),
        (
            "gather",
            vec![
                vec![a(), Val::I64s(vec![0, 2, 2, 3, 0, 0])],
                vec![w(5, 0.6), Val::I64s(vec![4, 1])],
                vec![w(5, 0.6), Val::I64s(vec![4, 5])],
                vec![w(5, 0.6), Val::I64s(vec![-1])],
            ],
        ),
        (
            "running_max",
            vec![vec![xs(&[0.5, 1.2, -0.3, 2.0, 1.7])], vec![a()]],
        ),
        (
            "until_threshold",
            vec![
                vec![a(), f(1.0)],
                vec![a(), f(100.0)],
                vec![w(6, 0.5), f(0.3)],
            ],
        ),
        (
            "hashed_pick",
            vec![vec![w(6, 0.3), i(5)], vec![w(9, 1.3), i(-77)]],
        ),
        ("g_scalar", vec![vec![f(0.8)], vec![f(-2.1)]]),
        ("call_scalar", vec![vec![f(0.8)], vec![f(-1.3)]]),
        ("h2", vec![vec![f(0.8), f(0.3)]]),
        ("two_patterns", vec![vec![f(0.8)], vec![f(-0.6)]]),
        ("sumsq", vec![vec![a()]]),
        (
            "slices_to_calls",
            vec![vec![a(), b()], vec![w(3, 0.0), w(2, 1.0)]],
        ),
        (
            "square_into",
            vec![vec![a(), b()], vec![a(), xs(&[0.0; 2])]],
        ),
        ("buffer_through_calls", vec![vec![a()], vec![w(6, 1.1)]]),
        ("output_through_call", vec![vec![a(), b(), f(1.7)]]),
        ("minmax", vec![vec![a()], vec![w(6, 0.7)]]),
        ("range_times_min", vec![vec![a()], vec![w(6, 0.7)]]),
        ("stats", vec![vec![f(0.4)]]),
        ("use_first", vec![vec![f(0.4)], vec![f(-1.1)]]),
        ("call_in_loop", vec![vec![a()], vec![w(5, 0.2)]]),
        (
            "count_down",
            vec![
                vec![f(2.5)],
                vec![f(-0.5)],
                vec![f(7.25)],
                vec![f(9_998.5)],
                vec![f(20_000.0)],
            ],
        ),
        (
            "rec_pow",
            vec![vec![f(1.3), i(4)], vec![f(-0.8), i(0)], vec![f(0.9), i(7)]],
        ),
        (
            "ping",
            vec![vec![f(0.3), i(5)], vec![f(0.7), i(0)], vec![f(-0.2), i(4)]],
        ),
        ("pong", vec![vec![f(0.3), i(3)]]),
        (
            "rec_sum",
            vec![vec![a(), i(0)], vec![a(), i(2)], vec![w(5, 0.3), i(0)]],
        ),
        ("cube", vec![vec![f(0.6)]]),
        ("cube_vjp", vec![vec![f(0.6), f(1.5)]]),
        ("uses_vjp", vec![vec![f(0.6)], vec![f(-1.2)]]),
        ("round_down", vec![vec![f(2.5)]]),
        ("uses_nodiff", vec![vec![f(2.5)], vec![f(-0.7)]]),
        ("softplus", vec![vec![f(0.6)]]),
        ("softplus_stable", vec![vec![f(0.6)], vec![f(-2.0)]]),
        ("uses_overlay", vec![vec![f(0.6)], vec![f(-2.0)]]),
    ]
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

/// Every function of every `examples/ir/*.ir`, except those calling an `extern`
/// (refused at compile time, with a message saying so).
#[test]
fn every_example_function_matches_the_interpreter() {
    let (tally, refused) = big_stack(|| {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/ir");
        let mut files: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|p| p.ends_with(".ir"))
            .collect();
        files.sort();
        assert!(files.len() >= 15, "{files:?}");
        let mut tally = Tally::default();
        let mut refused = Vec::new();
        for file in files {
            let m = example(&file);
            let funcs: Vec<FuncId> = m.defined().map(|(id, _)| id).collect();
            for id in funcs {
                let compiled = match compile_funcs(&m, &[id]) {
                    Ok(c) => c,
                    Err(CompileError::Unsupported { func, op, what, .. }) => {
                        assert_eq!(op, "call", "{what}");
                        assert!(what.contains("extern"), "{what}");
                        refused.push(func);
                        continue;
                    }
                    Err(e) => panic!("{file}: {e}"),
                };
                let mut ws = Workspace::new();
                for args in generic_points(m.sig(id), 14) {
                    tally.add(compare(&m, &compiled, &mut ws, id, &args));
                }
            }
        }
        (tally, refused)
    });
    eprintln!("examples: {tally:?}, refused {refused:?}");
    assert_eq!(refused, ["wave"]);
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
