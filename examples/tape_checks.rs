//! What the JIT's tape checks cost (`BENCHMARKS.md`): each of the seven suite
//! programs' gradient (the autodiff form, at the suite's sizes and inputs),
//! compiled with tape checks (the default) and without
//! (`Pipeline::with_tape_checks(false)`), the two timed in turns in one process,
//! one call of each per round. Prints, per program, the fastest call and the
//! median of each, and the ratios checked / unchecked: on a machine shared with
//! other work the fastest calls (those nothing interrupted) are the ones to
//! compare. Both gradients are checked to be the same bits first.
//!
//! Run with `cargo run --release --example tape_checks` (an argument keeps only
//! the programs whose name contains it; a second one sets the rounds, 300 by
//! default).

use std::hint::black_box;
use std::time::Instant;

use gradlift::adjoint::{Activity, RuleConfig};
use gradlift::ir::Module;
use gradlift::ir::interp::Val;
use gradlift::jit::Arg;
use gradlift::suite::{self, MLP_BATCH, N, NORMALIZE_N, ODE_STEPS};
use gradlift::trace::{Var, trace};
use gradlift::{CompiledGradient, Error, Pipeline, Workspace};

/// One program: its traced module, its arguments and the activities of the suite.
struct Program {
    name: &'static str,
    module: Module,
    args: Vec<Val>,
    params: Vec<Activity>,
}

/// A gradient with its workspace, shadows and result buffers, made before timing.
struct Timed {
    grad: CompiledGradient,
    ws: Workspace,
    shadows: Vec<Vec<f64>>,
    value: Vec<Val>,
    grads: Vec<Val>,
}

impl Timed {
    fn new(p: &Program, pipeline: &Pipeline) -> Result<Timed, Error> {
        let id = p
            .module
            .func_by_name(p.name)
            .ok_or_else(|| Error::NoSuchFunction(p.name.to_string()))?;
        let config = RuleConfig::default_for(p.module.sig(id)).with_params(p.params.clone());
        let grad = pipeline.compile_gradient(&p.module, p.name, Some(&config))?;
        let shadows = p
            .args
            .iter()
            .zip(&p.params)
            .filter(|&(_, &a)| matches!(a, Activity::Dup))
            .map(|(a, _)| vec![0.0; a.slice_len().unwrap_or(0)])
            .collect();
        Ok(Timed {
            grad,
            ws: Workspace::new(),
            shadows,
            value: Vec::new(),
            grads: Vec::new(),
        })
    }

    /// One gradient on borrowed arguments (the shadows accumulate); its time in ms.
    fn call(&mut self, args: &[Val]) -> f64 {
        let mut borrowed: Vec<Arg<'_>> = args.iter().map(Arg::from).collect();
        let mut shadows: Vec<Arg<'_>> = self.shadows.iter_mut().map(|s| Arg::F64sMut(s)).collect();
        let start = Instant::now();
        self.grad
            .gradient_args(
                &mut self.ws,
                black_box(&mut borrowed),
                &mut shadows,
                &[],
                &mut self.value,
                &mut self.grads,
            )
            .expect("the gradient runs");
        start.elapsed().as_secs_f64() * 1e3
    }
}

fn programs() -> Result<Vec<Program>, Error> {
    let of_x = |name, module: Module, x: Vec<f64>| Program {
        name,
        module,
        args: vec![Val::F64s(x)],
        params: vec![Activity::Dup],
    };
    let (nx, nw) = suite::normalize_input(NORMALIZE_N);
    let mi = suite::mlp_input(MLP_BATCH);
    Ok(vec![
        of_x(
            "sumsq",
            trace("sumsq", suite::sumsq::<Var>)?.module,
            suite::sumsq_input(N),
        ),
        of_x(
            "rosenbrock",
            trace("rosenbrock", suite::rosenbrock::<Var>)?.module,
            suite::rosenbrock_input(N),
        ),
        of_x(
            "logsumexp",
            trace("logsumexp", suite::logsumexp::<Var>)?.module,
            suite::logsumexp_input(N),
        ),
        Program {
            name: "normalize",
            module: trace("normalize", suite::normalize::<Var>)?.module,
            args: vec![Val::F64s(nx), Val::F64s(nw)],
            params: vec![Activity::Dup, Activity::Const],
        },
        Program {
            name: "mlp",
            module: trace("mlp", suite::mlp::<Var>)?.module,
            args: [mi.x, mi.w1, mi.b1, mi.w2, mi.b2]
                .into_iter()
                .map(Val::F64s)
                .collect(),
            params: vec![
                Activity::Const,
                Activity::Dup,
                Activity::Dup,
                Activity::Dup,
                Activity::Dup,
            ],
        },
        Program {
            name: "ode",
            module: trace("ode", suite::ode::<Var>)?.module,
            args: vec![Val::F64s(suite::ode_input()), Val::I64(ODE_STEPS)],
            params: vec![Activity::Dup, Activity::Const],
        },
        of_x(
            "branchy",
            trace("branchy", suite::branchy::<Var>)?.module,
            suite::branchy_input(N),
        ),
    ])
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() -> Result<(), Error> {
    let only = std::env::args().nth(1).unwrap_or_default();
    let rounds: usize = std::env::args()
        .nth(2)
        .and_then(|r| r.parse().ok())
        .unwrap_or(300);
    println!(
        "| program | checked fastest ms | unchecked fastest ms | ratio | checked median ms | unchecked median ms | ratio |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|");
    for p in programs()? {
        if !p.name.contains(&only) {
            continue;
        }
        let mut timed = [
            Timed::new(&p, &Pipeline::new())?,
            Timed::new(&p, &Pipeline::new().with_tape_checks(false))?,
        ];
        // The same gradient, bit for bit, from fresh shadows.
        for t in &mut timed {
            t.call(&p.args);
        }
        let bits = |t: &Timed| {
            let shadows: Vec<u64> = t.shadows.iter().flatten().map(|x| x.to_bits()).collect();
            (format!("{:?}", t.value), shadows)
        };
        assert_eq!(bits(&timed[0]), bits(&timed[1]), "{}", p.name);
        let mut times = [Vec::new(), Vec::new()];
        for round in 0..rounds {
            // Each round starts with the other one.
            for k in [round % 2, 1 - round % 2] {
                times[k].push(timed[k].call(&p.args));
            }
        }
        let fastest = |v: &[f64]| v.iter().copied().fold(f64::INFINITY, f64::min);
        let (f0, f1) = (fastest(&times[0]), fastest(&times[1]));
        let [t0, t1] = times;
        let (m0, m1) = (median(t0), median(t1));
        println!(
            "| {} | {f0:.4} | {f1:.4} | {:.3} | {m0:.4} | {m1:.4} | {:.3} |",
            p.name,
            f0 / f1,
            m0 / m1
        );
    }
    Ok(())
}
