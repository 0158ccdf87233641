//! The inputs each corpus function is checked at (`scalars.ir`, `memory.ir`), shared
//! by the adjoint corpus tests (`#[path = "corpus/inputs.rs"]`) and the JIT's
//! differential tests, which add points of their own (out of bounds, huge exponents).
//! Points stay away from kinks (ties of `fmin`/`fmax`, branch boundaries), where
//! finite differences mean nothing.

#![allow(dead_code)]

use gradlift_adjoint::{Activity, RetActivity, RuleConfig};
use gradlift_ir::interp::Val;

/// The activity variants of `default` that the corpus tests check besides it:
/// first each `dup` parameter made `const` in turn (which a function writing into
/// that slice refuses, `AdError::ConstWrite`), then two that always derive: every
/// `dup` made `dupnoneed` without the primal, and a `const` return.
pub fn config_variants(default: &RuleConfig) -> (Vec<RuleConfig>, [RuleConfig; 2]) {
    let mut consts = Vec::new();
    for k in 0..default.params.len() {
        if default.params[k] == Activity::Dup {
            let mut c = default.clone();
            c.params[k] = Activity::Const;
            consts.push(c);
        }
    }
    let mut noneed = default.clone().with_primal(false);
    for a in &mut noneed.params {
        if *a == Activity::Dup {
            *a = Activity::DupNoNeed;
        }
    }
    (
        consts,
        [noneed, default.clone().with_ret(RetActivity::Const)],
    )
}

pub fn f(x: f64) -> Val {
    Val::F64(x)
}

pub fn s(x: f32) -> Val {
    Val::F32(x)
}

pub fn i(x: i64) -> Val {
    Val::I64(x)
}

pub fn xs(v: &[f64]) -> Val {
    Val::F64s(v.to_vec())
}

/// A slice of `n` distinct values in (-1.2, 1.3), away from ties.
pub fn wave(n: usize, phase: f64) -> Val {
    Val::F64s(
        (0..n)
            .map(|k| 1.25 * (0.9 * k as f64 + phase).sin() + 0.03 * k as f64)
            .collect(),
    )
}

/// The inputs each function is checked at. Points stay away from kinks (ties of
/// `fmin`/`fmax`, branch boundaries), where finite differences mean nothing.
pub fn scalar_inputs() -> Vec<(&'static str, Vec<Vec<Val>>)> {
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
        ("op_sinh", one(&[0.3, -2.5])),
        ("op_cosh", one(&[0.3, -2.5])),
        ("op_asin", one(&[0.3, -0.9])),
        ("op_acos", one(&[0.3, -0.9])),
        ("op_atan", one(&[0.3, -4.0])),
        ("op_log10", one(&[0.3, 250.0])),
        ("op_log2", one(&[0.3, 250.0])),
        ("op_exp2", one(&[-1.3, 3.7])),
        (
            "op_atan2",
            // (y, x) in the four quadrants, and near the negative x axis.
            vec![
                vec![f(0.7), f(1.3)],
                vec![f(0.7), f(-1.3)],
                vec![f(-0.7), f(-1.3)],
                vec![f(-0.7), f(1.3)],
                vec![f(1e-3), f(-2.0)],
            ],
        ),
        (
            "op_hypot",
            vec![
                vec![f(3.0), f(-4.0)],
                vec![f(-0.2), f(1e-3)],
                vec![f(-5.0), f(12.0)],
            ],
        ),
        (
            "op_fma",
            vec![
                vec![f(1.5), f(-0.7), f(0.25)],
                vec![f(-2.0), f(3.25), f(-1.0)],
            ],
        ),
        ("op_math_const", one(&[0.8, -1.7])),
        (
            "f32_math",
            vec![vec![s(0.7), s(-1.3)], vec![s(-0.4), s(0.9)]],
        ),
        ("op_floor_ceil", one(&[1.3, -2.6])),
        (
            "op_powi",
            vec![
                vec![f(1.3), i(3)],
                vec![f(-0.8), i(4)],
                vec![f(2.0), i(0)],
                vec![f(1.5), i(-2)],
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
    ]
}

/// The inputs each function of `memory.ir` is checked at.
pub fn memory_inputs() -> Vec<(&'static str, Vec<Vec<Val>>)> {
    let a = || xs(&[0.5, 1.2, -0.3, 0.8]);
    let b = || xs(&[-0.7, 0.4, 1.1, 0.25]);
    vec![
        (
            "slice_sum_sin",
            vec![vec![a()], vec![wave(7, 0.3)], vec![xs(&[])]],
        ),
        (
            "dot",
            vec![vec![a(), b()], vec![wave(5, 0.1), wave(5, 1.7)]],
        ),
        (
            "scale_inplace",
            vec![vec![f(1.5), a()], vec![f(-0.4), wave(6, 0.2)]],
        ),
        ("square_twice", vec![vec![a()], vec![wave(5, 0.9)]]),
        ("square_twice_sum", vec![vec![a()]]),
        ("axpy", vec![vec![f(0.7), a(), b()]]),
        ("overwrite", vec![vec![a(), f(0.7)], vec![b(), f(-1.3)]]),
        ("prefix_sums", vec![vec![a()], vec![wave(9, 0.4)]]),
        ("alloc_in_loop", vec![vec![a()], vec![wave(4, 2.0)]]),
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
                vec![wave(5, 0.6), Val::I64s(vec![4, 1])],
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
                vec![wave(6, 0.5), f(0.3)],
            ],
        ),
        (
            "hashed_pick",
            vec![vec![wave(6, 0.3), i(5)], vec![wave(9, 1.3), i(-77)]],
        ),
        ("g_scalar", vec![vec![f(0.8)], vec![f(-2.1)]]),
        ("call_scalar", vec![vec![f(0.8)], vec![f(-1.3)]]),
        ("h2", vec![vec![f(0.8), f(0.3)]]),
        ("two_patterns", vec![vec![f(0.8)], vec![f(-0.6)]]),
        ("sumsq", vec![vec![a()]]),
        (
            "slices_to_calls",
            vec![vec![a(), b()], vec![wave(3, 0.0), wave(2, 1.0)]],
        ),
        ("square_into", vec![vec![a(), b()]]),
        ("buffer_through_calls", vec![vec![a()], vec![wave(6, 1.1)]]),
        ("output_through_call", vec![vec![a(), b(), f(1.7)]]),
        ("minmax", vec![vec![a()], vec![wave(6, 0.7)]]),
        ("range_times_min", vec![vec![a()], vec![wave(6, 0.7)]]),
        ("stats", vec![vec![f(0.4)]]),
        ("use_first", vec![vec![f(0.4)], vec![f(-1.1)]]),
        ("call_in_loop", vec![vec![a()], vec![wave(5, 0.2)]]),
        (
            "count_down",
            vec![vec![f(2.5)], vec![f(-0.5)], vec![f(7.25)]],
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
            vec![vec![a(), i(0)], vec![a(), i(2)], vec![wave(5, 0.3), i(0)]],
        ),
        ("cube", vec![vec![f(0.6)]]),
        ("cube_vjp", vec![vec![f(0.6), f(1.5)]]),
        ("cube_jvp", vec![vec![f(0.6), f(1.5)]]),
        ("uses_vjp", vec![vec![f(0.6)], vec![f(-1.2)]]),
        ("round_down", vec![vec![f(2.5)]]),
        ("uses_nodiff", vec![vec![f(2.5)], vec![f(-0.7)]]),
        ("softplus", vec![vec![f(0.6)]]),
        ("softplus_stable", vec![vec![f(0.6)], vec![f(-2.0)]]),
        ("uses_overlay", vec![vec![f(0.6)], vec![f(-2.0)]]),
        (
            "checkpointed",
            vec![
                vec![xs(&[0.5, -1.0, 2.0]), f(0.7), i(11)],
                vec![xs(&[1.5]), f(-0.3), i(1)],
                vec![xs(&[0.2, 0.4]), f(0.9), i(0)],
            ],
        ),
    ]
}
