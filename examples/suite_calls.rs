//! One of the suite's calls, repeated: for counting what a call costs with `perf
//! stat` (instructions and cycles are counted, not timed, so the shared machine's
//! load moves them far less than it moves times).
//!
//! ```sh
//! cargo build --release --example suite_calls
//! # PROGRAM: sumsq rosenbrock logsumexp normalize mlp ode branchy
//! # CALL: jp (gradlift's primal), jg (its gradient), hp, hg (the hand-written ones),
//! #       hw (rustc on the program as written: `hand::normalize_as_written`,
//! #       `hand::mlp_as_written`; the hand-written primal for the others)
//! perf stat -e instructions:u,cycles:u target/release/examples/suite_calls PROGRAM CALL 201
//! perf stat -e instructions:u,cycles:u target/release/examples/suite_calls PROGRAM CALL 1
//! ```
//!
//! The difference of the two counts over 200 is the cost of one call, setup
//! (tracing, compiling, the inputs) taken out. The programs are the autodiff
//! forms with the suite's sizes, inputs and activities (`BENCHMARKS.md`).
use gradlift::adjoint::{Activity, RuleConfig};
use gradlift::ir::interp::Val;
use gradlift::jit::Arg;
use gradlift::suite::{self, MLP_BATCH, N, NORMALIZE_N, ODE_STEPS};
use gradlift::trace::Var;
use gradlift::{CompiledFunction, CompiledGradient, Workspace, autodiff};
use std::hint::black_box;
#[path = "../benches/hand.rs"]
#[allow(dead_code)]
mod hand;
/// Runs the call the arguments name, CALLS times.
fn main() {
    let usage = "usage: suite_calls PROGRAM jp|jg|hp|hg|hw CALLS";
    let prog = std::env::args().nth(1).expect(usage);
    let var = std::env::args().nth(2).expect(usage);
    let reps: usize = std::env::args()
        .nth(3)
        .and_then(|n| n.parse().ok())
        .expect(usage);
    macro_rules! parts {
        ($ad:expr) => {{
            let ad = $ad;
            (ad.module().clone(), ad.name().to_string())
        }};
    }
    const PROGRAMS: [&str; 7] = [
        "sumsq",
        "rosenbrock",
        "logsumexp",
        "normalize",
        "mlp",
        "ode",
        "branchy",
    ];
    assert!(
        PROGRAMS.contains(&prog.as_str()) && ["jp", "jg", "hp", "hg", "hw"].contains(&var.as_str()),
        "{usage}: PROGRAM one of {PROGRAMS:?}"
    );
    let p = suite::mlp_input(MLP_BATCH);
    let (nx, w) = suite::normalize_input(NORMALIZE_N);
    let x = match prog.as_str() {
        "sumsq" => suite::sumsq_input(N),
        "rosenbrock" => suite::rosenbrock_input(N),
        "logsumexp" => suite::logsumexp_input(N),
        "branchy" => suite::branchy_input(N),
        "normalize" => nx.clone(),
        _ => suite::ode_input(),
    };
    let ((module, name), args, params): ((gradlift::ir::Module, String), Vec<Val>, Vec<Activity>) =
        match prog.as_str() {
            "sumsq" => (
                parts!(autodiff("sumsq", suite::sumsq::<Var>).unwrap()),
                vec![Val::F64s(x.clone())],
                vec![Activity::Dup],
            ),
            "rosenbrock" => (
                parts!(autodiff("r", suite::rosenbrock::<Var>).unwrap()),
                vec![Val::F64s(x.clone())],
                vec![Activity::Dup],
            ),
            "logsumexp" => (
                parts!(autodiff("l", suite::logsumexp::<Var>).unwrap()),
                vec![Val::F64s(x.clone())],
                vec![Activity::Dup],
            ),
            "branchy" => (
                parts!(autodiff("b", suite::branchy::<Var>).unwrap()),
                vec![Val::F64s(x.clone())],
                vec![Activity::Dup],
            ),
            "normalize" => (
                parts!(autodiff("normalize", suite::normalize::<Var>).unwrap()),
                vec![Val::F64s(nx.clone()), Val::F64s(w.clone())],
                vec![Activity::Dup, Activity::Const],
            ),
            "mlp" => (
                parts!(autodiff("mlp", suite::mlp::<Var>).unwrap()),
                [&p.x, &p.w1, &p.b1, &p.w2, &p.b2]
                    .map(|v| Val::F64s(v.clone()))
                    .to_vec(),
                vec![
                    Activity::Const,
                    Activity::Dup,
                    Activity::Dup,
                    Activity::Dup,
                    Activity::Dup,
                ],
            ),
            _ => (
                parts!(autodiff("ode", suite::ode::<Var>).unwrap()),
                vec![Val::F64s(x.clone()), Val::I64(ODE_STEPS)],
                vec![Activity::Dup, Activity::Const],
            ),
        };
    let hosts = gradlift::Hosts::new();
    match var.as_str() {
        "jp" => {
            let f = CompiledFunction::with_hosts(&module, &name, &hosts).unwrap();
            let (mut ws, mut a, mut out) = (Workspace::new(), args.clone(), Vec::new());
            for _ in 0..reps {
                f.call_into(&mut ws, black_box(&mut a), &mut out).unwrap();
            }
        }
        "jg" => {
            let id = module.func_by_name(&name).unwrap();
            let cfg = RuleConfig::default_for(module.sig(id)).with_params(params.clone());
            let g = CompiledGradient::with_config(&module, &name, &cfg, &hosts).unwrap();
            let mut shadows: Vec<Vec<f64>> = args
                .iter()
                .zip(&params)
                .filter(|(_, p)| matches!(p, Activity::Dup))
                .map(|(a, _)| vec![0.0; a.slice_len().unwrap()])
                .collect();
            let mut b: Vec<Arg<'_>> = args.iter().map(Arg::from).collect();
            let mut s: Vec<Arg<'_>> = shadows.iter_mut().map(|s| Arg::F64sMut(s)).collect();
            let (mut v, mut gr, mut ws) = (Vec::new(), Vec::new(), Workspace::new());
            for _ in 0..reps {
                g.gradient_args(&mut ws, black_box(&mut b), &mut s, &[], &mut v, &mut gr)
                    .unwrap();
            }
        }
        "hp" | "hw" => {
            let written = var == "hw";
            for _ in 0..reps {
                black_box(match prog.as_str() {
                    "normalize" if written => hand::normalize_as_written(black_box(&nx), &w),
                    "mlp" if written => {
                        hand::mlp_as_written(black_box(&p.x), &p.w1, &p.b1, &p.w2, &p.b2)
                    }
                    "sumsq" => hand::sumsq(black_box(&x)),
                    "rosenbrock" => hand::rosenbrock(black_box(&x)),
                    "logsumexp" => hand::logsumexp(black_box(&x)),
                    "branchy" => hand::branchy(black_box(&x)),
                    "normalize" => hand::normalize(black_box(&nx), &w),
                    "mlp" => hand::mlp(black_box(&p.x), &p.w1, &p.b1, &p.w2, &p.b2),
                    _ => hand::ode(black_box(&x), ODE_STEPS as usize),
                });
            }
        }
        _ => {
            let mut d = vec![0.0; x.len()];
            let mut g4 = [
                vec![0.0; p.w1.len()],
                vec![0.0; p.b1.len()],
                vec![0.0; p.w2.len()],
                vec![0.0; p.b2.len()],
            ];
            let mut scratch = vec![0.0; hand::ode_scratch_len(ODE_STEPS as usize)];
            for _ in 0..reps {
                black_box(match prog.as_str() {
                    "sumsq" => hand::sumsq_gradient(black_box(&x), &mut d),
                    "rosenbrock" => hand::rosenbrock_gradient(black_box(&x), &mut d),
                    "logsumexp" => hand::logsumexp_gradient(black_box(&x), &mut d),
                    "branchy" => hand::branchy_gradient(black_box(&x), &mut d),
                    "normalize" => hand::normalize_gradient(black_box(&nx), &w, &mut d),
                    "mlp" => {
                        let [a, b, c, e] = &mut g4;
                        hand::mlp_gradient(
                            black_box(&p.x),
                            &p.w1,
                            &p.b1,
                            &p.w2,
                            &p.b2,
                            hand::MlpGradient {
                                w1: a,
                                b1: b,
                                w2: c,
                                b2: e,
                            },
                        )
                    }
                    _ => {
                        hand::ode_gradient(black_box(&x), ODE_STEPS as usize, &mut d, &mut scratch)
                    }
                });
            }
        }
    }
}
