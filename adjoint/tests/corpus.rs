//! The scalar corpus (`tests/corpus/scalars.ir`) against independent oracles.
//!
//! Every function's rule passes `check_rule` (finite differences at several steps,
//! the dot-product test, the primal, a balanced tape, unchanged arguments) at two or
//! three inputs, under the default activities and under variants (a `const`
//! parameter, no primal, a `const` return). Some also get closed-form gradients
//! written here, or a forward-mode derivative computed here with dual numbers. Every
//! derived module verifies, prints, parses back and prints identically, and the
//! parsed rule computes what the derived one does.

use gradlift_adjoint::{
    Activity, CheckOptions, RetActivity, Rule, RuleConfig, build_rrule, check_derived,
};
use gradlift_ir::interp::{Interpreter, Val};
use gradlift_ir::{FuncId, Module, Opcode, Type, parse, verify};

#[path = "corpus/inputs.rs"]
mod inputs;
mod support;

use inputs::{f, i, s};

const CORPUS: &str = include_str!("corpus/scalars.ir");

fn corpus() -> Module {
    let m = parse(CORPUS).unwrap_or_else(|e| panic!("{e}"));
    verify(&m).unwrap_or_else(|e| panic!("{e}"));
    m
}

/// Functions checked by closed forms only: their derivative convention is not the
/// finite-difference derivative.
const CLOSED_FORM_ONLY: &[&str] = &["bitcast_zero"];

/// Derives the rule of `@name` under `config` once and checks it at every point.
fn check(m: &Module, name: &str, config: &RuleConfig, points: &[Vec<Val>]) {
    let id = m.func_by_name(name).unwrap();
    let opts = CheckOptions::for_sig(m.sig(id));
    let rule = build_rrule(m, id, config).unwrap_or_else(|e| panic!("@{name}: {e}"));
    for args in points {
        if let Err(e) = check_derived(m, &rule, args, &opts) {
            panic!("@{name} with {config:?} at {args:?}: {e}\n{}", rule.module);
        }
    }
}

#[test]
fn every_function_of_the_corpus_passes_check_rule() {
    let m = corpus();
    let cases = inputs::scalar_inputs();
    for (id, decl) in m.funcs.iter() {
        let listed = cases.iter().any(|(n, _)| *n == decl.name);
        assert!(
            listed || CLOSED_FORM_ONLY.contains(&decl.name.as_str()),
            "@{} has no inputs",
            decl.name
        );
        let _ = id;
    }
    assert!(cases.len() >= 30);
    for (name, points) in &cases {
        let id = m.func_by_name(name).unwrap_or_else(|| panic!("no @{name}"));
        let default = RuleConfig::default_for(m.sig(id));
        check(&m, name, &default, points);
        // Variants: the last active parameter `const` and no primal; a `const` return.
        let mut partial = default.clone().with_primal(false);
        if let Some(last) = partial.params.iter().rposition(|&a| a == Activity::Active) {
            partial.params[last] = Activity::Const;
        }
        check(&m, name, &partial, &points[..1]);
        let inert = default.with_ret(RetActivity::Const);
        check(&m, name, &inert, &points[..1]);
    }
}

fn rule_of(m: &Module, name: &str, config: Option<RuleConfig>) -> Rule {
    let id = m.func_by_name(name).unwrap();
    let config = config.unwrap_or_else(|| RuleConfig::default_for(m.sig(id)));
    build_rrule(m, id, &config).unwrap_or_else(|e| panic!("{e}"))
}

/// Runs forward then pullback on one interpreter; returns (primal, cotangents) and
/// checks the tape comes back empty.
fn run(rule: &Rule, args: &[Val], seeds: &[Val]) -> (Vec<Val>, Vec<Val>) {
    let mut engine = Interpreter::new(&rule.module);
    let y = engine.call(rule.forward, &mut args.to_vec()).unwrap();
    let dx = engine.call(rule.pullback, &mut seeds.to_vec()).unwrap();
    assert_eq!(engine.tape().scalars, 0);
    (y, dx)
}

fn grad(m: &Module, name: &str, config: Option<RuleConfig>, args: &[Val]) -> Vec<f64> {
    let rule = rule_of(m, name, config);
    let seeds: Vec<Val> = rule.layout.seeded_results.iter().map(|_| f(1.0)).collect();
    let (_, dx) = run(&rule, args, &seeds);
    dx.iter()
        .map(|v| match v {
            Val::F64(x) => *x,
            Val::F32(x) => f64::from(*x),
            _ => panic!("{v:?}"),
        })
        .collect()
}

#[track_caller]
fn close(a: &[f64], b: &[f64]) {
    assert_eq!(a.len(), b.len(), "{a:?} vs {b:?}");
    for (x, y) in a.iter().zip(b) {
        assert!(
            (x - y).abs() <= 1e-12 * (1.0 + x.abs().max(y.abs())),
            "{a:?} vs {b:?}"
        );
    }
}

#[test]
fn poly_has_gradient_2x_3() {
    let m = corpus();
    for (x, y) in [(2.0, 1.0), (-1.5, 0.3), (0.0, 7.0)] {
        close(&grad(&m, "poly", None, &[f(x), f(y)]), &[2.0 * x, 3.0]);
        let config = RuleConfig::default_for(m.sig(m.func_by_name("poly").unwrap()))
            .with_params([Activity::Active, Activity::Const]);
        close(&grad(&m, "poly", Some(config), &[f(x), f(y)]), &[2.0 * x]);
        let config = RuleConfig::default_for(m.sig(m.func_by_name("poly").unwrap()))
            .with_params([Activity::Const, Activity::Active]);
        close(&grad(&m, "poly", Some(config), &[f(x), f(y)]), &[3.0]);
    }
}

#[test]
fn self_loop_has_gradient_n_x_to_the_n_minus_1() {
    // n >= 1 iterations of v = v x from 1: x^n.
    let m = corpus();
    for (x, n) in [(1.3f64, 4i64), (-0.9, 1), (0.5, 7)] {
        close(
            &grad(&m, "self_loop", None, &[f(x), i(n)]),
            &[n as f64 * x.powi(n as i32 - 1)],
        );
    }
}

#[test]
fn pown_has_gradient_n_x_to_the_n_minus_1() {
    let m = corpus();
    for (x, n) in [(1.3f64, 5i64), (-0.7, 3), (2.0, 1), (2.0, 0), (0.5, 12)] {
        let want = if n == 0 {
            0.0
        } else {
            n as f64 * x.powi(n as i32 - 1)
        };
        close(&grad(&m, "pown", None, &[f(x), i(n)]), &[want]);
    }
}

#[test]
fn halve_has_gradient_2x_over_4_to_the_k() {
    let m = corpus();
    for x in [5.3, 0.7, 100.0, 1.0, 3.0] {
        let mut k = 0;
        let mut v = x;
        while v >= 1.0 {
            v *= 0.5;
            k += 1;
        }
        let want = 2.0 * x / 4f64.powi(k);
        close(&grad(&m, "halve", None, &[f(x)]), &[want]);
    }
}

#[test]
fn nested_loops_match_their_closed_form() {
    // acc_N = y (1 + x + ... + x^(N-1)) after N = n m steps of acc = acc x + y.
    let m = corpus();
    for (x, y, n, k) in [
        (0.9f64, 0.3f64, 3i64, 2i64),
        (1.1, -0.2, 2, 3),
        (0.5, 2.0, 0, 4),
        (1.5, 1.0, 1, 1),
    ] {
        let steps = n * k;
        let dy: f64 = (0..steps).map(|e| x.powi(e as i32)).sum();
        let dx: f64 = (1..steps)
            .map(|e| e as f64 * x.powi(e as i32 - 1))
            .sum::<f64>()
            * y;
        close(
            &grad(&m, "nested", None, &[f(x), f(y), i(n), i(k)]),
            &[dx, dy],
        );
    }
}

/// A dual number: value and derivative, for forward-mode oracles written here.
#[derive(Copy, Clone)]
struct Dual(f64, f64);

impl Dual {
    fn add(self, o: Dual) -> Dual {
        Dual(self.0 + o.0, self.1 + o.1)
    }
    fn mul(self, o: Dual) -> Dual {
        Dual(self.0 * o.0, self.1 * o.0 + self.0 * o.1)
    }
    fn scale(self, c: f64) -> Dual {
        Dual(self.0 * c, self.1 * c)
    }
}

#[test]
fn two_carried_matches_forward_mode() {
    let m = corpus();
    for (x0, n) in [(0.5, 4), (1.2, 0), (-0.7, 6)] {
        let x = Dual(x0, 1.0);
        let (mut a, mut b) = (Dual(1.0, 0.0), x);
        for _ in 0..n {
            (a, b) = (b, a.add(x.mul(b)));
        }
        let r = a.mul(b);
        close(&grad(&m, "two_carried", None, &[f(x0), i(n)]), &[r.1]);
    }
}

#[test]
fn swap_matches_forward_mode() {
    let m = corpus();
    for (x0, y0, n) in [(1.2, 0.7, 3), (0.5, 2.0, 4), (0.3, -0.4, 0)] {
        let run = |x: Dual, y: Dual| {
            let (mut a, mut b) = (x, y);
            for _ in 0..n {
                (a, b) = (b.scale(1.5), a);
            }
            a.mul(a).add(b).1
        };
        let want = [
            run(Dual(x0, 1.0), Dual(y0, 0.0)),
            run(Dual(x0, 0.0), Dual(y0, 1.0)),
        ];
        close(&grad(&m, "swap", None, &[f(x0), f(y0), i(n)]), &want);
    }
}

#[test]
fn early_return_takes_the_branch_that_returned() {
    let m = corpus();
    // x < 0: x y; x > 10: y; else x^2 e^y.
    close(
        &grad(&m, "early_return", None, &[f(-1.0), f(2.0)]),
        &[2.0, -1.0],
    );
    close(
        &grad(&m, "early_return", None, &[f(20.0), f(1.5)]),
        &[0.0, 1.0],
    );
    let (x, y) = (2.0f64, 0.5f64);
    close(
        &grad(&m, "early_return", None, &[f(x), f(y)]),
        &[2.0 * x * y.exp(), x * x * y.exp()],
    );
}

#[test]
fn bitcast_and_floor_have_zero_derivative_by_convention() {
    let m = corpus();
    // (bitcast (bitcast x)) x: only the direct x carries a derivative.
    close(&grad(&m, "bitcast_zero", None, &[f(1.7)]), &[1.7]);
    // (floor x + ceil x) x at 1.3: floor + ceil = 3.
    close(&grad(&m, "op_floor_ceil", None, &[f(1.3)]), &[3.0]);
}

#[test]
fn conventions_at_kinks() {
    let m = corpus();
    // fabs'(0) = 0.
    close(&grad(&m, "op_fabs", None, &[f(0.0)]), &[0.0]);
    // Ties go to the first operand.
    close(&grad(&m, "op_fmin", None, &[f(1.0), f(1.0)]), &[1.0, 0.0]);
    close(&grad(&m, "op_fmax", None, &[f(1.0), f(1.0)]), &[1.0, 0.0]);
    // pow at x = 0: d/dx = y x^(y-1) = 0 for y = 2, d/dy = 0.
    close(&grad(&m, "op_pow", None, &[f(0.0), f(2.0)]), &[0.0, 0.0]);
    // powi x, 0 and pow x, 0.0 are constant: zero even at x = 0.
    close(&grad(&m, "op_powi", None, &[f(0.0), i(0)]), &[0.0]);
    // pow_const at x: 2.5 x^1.5 + 2^x ln 2 + 0.
    let x = 1.3f64;
    close(
        &grad(&m, "op_pow_const", None, &[f(x)]),
        &[2.5 * x.powf(1.5) + 2f64.powf(x) * 2f64.ln()],
    );
}

/// The new math ops against their closed forms: atan2 in all four quadrants (and on
/// the negative x axis, where the value jumps but the derivative does not), hypot
/// and atan2 far beyond where x² + y² overflows or underflows, and the conventions
/// at the origin.
#[test]
fn math_ops_match_closed_forms_in_every_quadrant_and_at_any_scale() {
    let m = corpus();
    // d atan2(y, x) = (x dy - y dx) / (x² + y²).
    for (y, x) in [
        (0.7, 1.3),
        (0.7, -1.3),
        (-0.7, -1.3),
        (-0.7, 1.3),
        (0.0, -2.0),
        (-0.0, -2.0),
        (2.0, 0.0),
    ] {
        let r2: f64 = x * x + y * y;
        close(
            &grad(&m, "op_atan2", None, &[f(y), f(x)]),
            &[x / r2, -y / r2],
        );
    }
    // hypot and atan2 at 1e300 and 1e-300: x² + y² would be inf or 0, the rules
    // scale by h instead. (3, 4, 5) scaled: d hypot = (x, y) / h = (0.6, 0.8).
    for s in [1e300, 1e-300, 1.0] {
        let (x, y) = (3.0 * s, -4.0 * s);
        close(&grad(&m, "op_hypot", None, &[f(x), f(y)]), &[0.6, -0.8]);
        // d atan2(y, x) = (-y, x) / h², written with h = 5s.
        let h = 5.0 * s;
        let want = [x / h / h, -y / h / h];
        let got = grad(&m, "op_atan2", None, &[f(y), f(x)]);
        for (g, w) in got.iter().zip(want) {
            assert!(
                (g - w).abs() <= 1e-12 * w.abs(),
                "atan2 at scale {s}: {got:?}, want {want:?}"
            );
        }
    }
    // The origin: hypot as |x| at 0 (zero), atan2 zero where it has no derivative.
    close(&grad(&m, "op_hypot", None, &[f(0.0), f(0.0)]), &[0.0, 0.0]);
    close(&grad(&m, "op_atan2", None, &[f(0.0), f(0.0)]), &[0.0, 0.0]);
    // hypot along an axis is |x|: sign(x).
    close(
        &grad(&m, "op_hypot", None, &[f(-2.0), f(0.0)]),
        &[-1.0, 0.0],
    );
    // The unary ones.
    let x = 0.6f64;
    let sq = (1.0 - x * x).sqrt();
    close(&grad(&m, "op_sinh", None, &[f(x)]), &[x.cosh()]);
    close(&grad(&m, "op_cosh", None, &[f(x)]), &[x.sinh()]);
    close(&grad(&m, "op_asin", None, &[f(x)]), &[1.0 / sq]);
    close(&grad(&m, "op_acos", None, &[f(x)]), &[-1.0 / sq]);
    close(&grad(&m, "op_atan", None, &[f(x)]), &[1.0 / (1.0 + x * x)]);
    close(&grad(&m, "op_atan", None, &[f(1e200)]), &[0.0]);
    close(
        &grad(&m, "op_log10", None, &[f(x)]),
        &[1.0 / (x * 10f64.ln())],
    );
    close(
        &grad(&m, "op_log2", None, &[f(x)]),
        &[1.0 / (x * 2f64.ln())],
    );
    close(
        &grad(&m, "op_exp2", None, &[f(x)]),
        &[2f64.powf(x) * 2f64.ln()],
    );
    // asin near 1: (1 - x)(1 + x) keeps the digits 1 - x·x loses.
    let x: f64 = 1.0 - 1e-12;
    let want = 1.0 / ((1.0 - x) * (1.0 + x)).sqrt();
    let got = grad(&m, "op_asin", None, &[f(x)])[0];
    assert!((got - want).abs() <= 1e-9 * want, "{got} vs {want}");
    // fma: (b, a, 1).
    close(
        &grad(&m, "op_fma", None, &[f(1.5), f(-0.7), f(0.25)]),
        &[-0.7, 1.5, 1.0],
    );
}

#[test]
fn a_const_return_gives_zeros_and_needs_no_tape() {
    let m = corpus();
    let id = m.func_by_name("logsumexp2").unwrap();
    let config = RuleConfig::default_for(m.sig(id)).with_ret(RetActivity::Const);
    let rule = build_rrule(&m, id, &config).unwrap();
    assert!(rule.module.function(rule.pullback).unwrap().blocks.len() == 1);
    assert!(!rule.module.to_string().contains("push"));
    let (_, dx) = run(&rule, &[f(0.3), f(1.2)], &[]);
    assert_eq!(dx, [f(0.0), f(0.0)]);
}

#[test]
fn multiple_results_seed_each_float_result() {
    let m = corpus();
    let rule = rule_of(&m, "multiple_results", None);
    assert_eq!(rule.layout.seeded_results, [0, 2]);
    let (x, y) = (0.7f64, 2.5f64);
    let (out, dx) = run(&rule, &[f(x), f(y)], &[f(2.0), f(-3.0)]);
    assert_eq!(out, [f(x * y), i(2), f(x.sin())]);
    let want = [2.0 * y - 3.0 * x.cos(), 2.0 * x];
    match dx.as_slice() {
        [Val::F64(a), Val::F64(b)] => close(&[*a, *b], &want),
        other => panic!("{other:?}"),
    }
}

#[test]
fn every_derived_module_round_trips_through_text() {
    let m = corpus();
    for (id, decl) in m.funcs.iter() {
        let default = RuleConfig::default_for(&decl.sig);
        let no_primal = default.clone().with_primal(false);
        for config in [default, no_primal] {
            let rule = build_rrule(&m, id, &config).unwrap_or_else(|e| panic!("{e}"));
            let text = rule.module.to_string();
            let back = parse(&text).unwrap_or_else(|e| panic!("@{}: {e}\n{text}", decl.name));
            verify(&back).unwrap_or_else(|e| panic!("@{}: {e}\n{text}", decl.name));
            assert_eq!(back.to_string(), text, "@{}", decl.name);
            same_behaviour(&rule, &back, id);
        }
    }
}

/// The parsed rule computes what the derived one does.
fn same_behaviour(rule: &Rule, back: &Module, primal: FuncId) {
    let sig = rule.module.sig(primal);
    let args: Vec<Val> = sig
        .params
        .iter()
        .map(|t| match t {
            gradlift_ir::Type::F64 => f(0.75),
            gradlift_ir::Type::F32 => s(0.75),
            gradlift_ir::Type::I64 => i(2),
            _ => Val::Bool(true),
        })
        .collect();
    let seeds: Vec<Val> = rule
        .layout
        .seeded_results
        .iter()
        .map(|&j| match sig.results[j] {
            gradlift_ir::Type::F32 => s(1.0),
            _ => f(1.0),
        })
        .collect();
    let a = run(rule, &args, &seeds);
    let fwd = back.func_by_name(rule.module.name(rule.forward)).unwrap();
    let rvs = back.func_by_name(rule.module.name(rule.pullback)).unwrap();
    let mut engine = Interpreter::new(back);
    let y = engine.call(fwd, &mut args.clone()).unwrap();
    let dx = engine.call(rvs, &mut seeds.clone()).unwrap();
    assert_eq!((y, dx), a);
}

/// Signatures at the edges: no parameters, no results, integer parameters only,
/// integer and bool results only, an active parameter that reaches no result.
#[test]
fn edge_signatures_derive_and_round_trip() {
    let m = parse(
        "func @nothing() {
         entry:
             ret
         }
         func @constant() -> f64 {
         entry:
             ret 2.5
         }
         func @ints(%n: i64, %b: bool) -> (i64, bool) {
         entry:
             %m = imul %n, 2
             %c = not %b
             ret %m, %c
         }
         func @ignores_x(%x: f64, %y: f64) -> f64 {
         entry:
             %z = fmul %y, %y
             ret %z
         }
         func @counts(%x: f64) -> i64 {
         entry:
             %n = cast i64 %x
             ret %n
         }
         func @7(%x: f64) -> f64 {
         entry:
             %y = fmul %x, 3.0
             ret %y
         }",
    )
    .unwrap();
    verify(&m).unwrap();
    // (function, arguments, seeds, expected cotangents)
    type Case = (&'static str, Vec<Val>, Vec<Val>, Vec<Val>);
    let cases: [Case; 6] = [
        ("nothing", vec![], vec![], vec![]),
        ("constant", vec![], vec![f(1.0)], vec![]),
        ("ints", vec![i(3), Val::Bool(true)], vec![], vec![]),
        (
            "ignores_x",
            vec![f(1.5), f(2.0)],
            vec![f(1.0)],
            vec![f(0.0), f(4.0)],
        ),
        ("counts", vec![f(2.7)], vec![], vec![f(0.0)]),
        ("7", vec![f(2.0)], vec![f(1.0)], vec![f(3.0)]),
    ];
    for (name, args, seeds, want) in cases {
        let rule = rule_of(&m, name, None);
        let text = rule.module.to_string();
        assert_eq!(parse(&text).unwrap().to_string(), text, "@{name}");
        assert!(!text.contains("<invalid"), "{text}");
        let (_, dx) = run(&rule, &args, &seeds);
        assert_eq!(dx, want, "@{name}");
    }
}

/// The pullback against forward mode (`support::jvp`, dual numbers) on every `f64`
/// function of the corpus, at its inputs: for each active parameter `i`,
/// `(Jᵀ 1)_i = Σ_j (J e_i)_j` over the float results.
#[test]
fn f64_functions_of_the_corpus_match_forward_mode() {
    let m = corpus();
    let mut compared = 0;
    for (name, points) in inputs::scalar_inputs() {
        let id = m.func_by_name(name).unwrap();
        let sig = m.sig(id);
        let body = m.function(id).unwrap();
        let plain = sig
            .params
            .iter()
            .chain(&sig.results)
            .all(|&t| t != Type::F32)
            && body
                .placed_insts()
                .all(|(_, i)| body.insts[i].opcode != Opcode::Bitcast);
        if !plain {
            continue;
        }
        let rule = rule_of(&m, name, None);
        for args in &points {
            let seeds: Vec<Val> = rule.layout.seeded_results.iter().map(|_| f(1.0)).collect();
            let (_, dx) = run(&rule, args, &seeds);
            for (slot, &p) in rule.layout.active_params.iter().enumerate() {
                let tangents: Vec<support::Tan> = args
                    .iter()
                    .enumerate()
                    .map(|(j, a)| support::Tan {
                        val: a.scalar().unwrap(),
                        dot: if j == p { 1.0 } else { 0.0 },
                    })
                    .collect();
                let out = support::jvp(&m, id, &tangents);
                let fwd: f64 = rule.layout.seeded_results.iter().map(|&j| out[j].dot).sum();
                let Val::F64(rev) = dx[slot] else { panic!() };
                assert!(
                    (rev - fwd).abs() <= 1e-12 * (1.0 + rev.abs().max(fwd.abs())),
                    "@{name} at {args:?}: d/d{p} is {rev} by the pullback, {fwd} by forward mode"
                );
                compared += 1;
            }
        }
    }
    assert!(compared > 80, "{compared}");
}
