//! The baseline measurement of the benchmark suite (`BENCHMARKS.md`): for each program at
//! its suite size (and `normalize` also at twice its size), gradlift's JIT primal
//! and gradient against the hand-written Rust of `benches/hand.rs`, the time to a
//! callable gradient and the tape's peak, as a markdown table.
//!
//! Before anything is timed, gradlift's first gradient is checked against the hand
//! gradient (value and every entry to 1e-8 relative), so the table never reports a
//! wrong program.
//!
//! Run with `cargo run --release --example suite` (an argument keeps only the
//! programs whose name contains it). `cargo bench --bench suite` measures the same
//! programs with criterion's statistics (`benches/suite.rs`).

use std::hint::black_box;
use std::time::{Duration, Instant};

use gradlift::adjoint::{Activity, RuleConfig};
use gradlift::ir::interp::Val;
use gradlift::jit::Arg;
use gradlift::suite::{self, MLP_BATCH, N, NORMALIZE_N, ODE_STEPS};
use gradlift::trace::{Callable, Slice, Var};
use gradlift::{
    Autodiff, CompiledFunction, CompiledGradient, Const, Duplicated, Error, Workspace, autodiff,
};

/// The hand-written primals and gradients (`benches/hand.rs`), shared with the
/// criterion benchmarks.
#[path = "../benches/hand.rs"]
mod hand;
use hand::check;

/// Time per measurement: a call is repeated until about this much has run.
const BUDGET: f64 = 0.3;
/// Calls per measurement, at least (fewer for calls slower than [`SLOW`]).
const MIN_RUNS: usize = 10;
/// A call slower than this (in seconds) is measured [`SLOW_RUNS`] times only.
const SLOW: f64 = 0.03;
/// Calls per measurement of a slow call, its first call included.
const SLOW_RUNS: usize = 3;

/// The median time of one call of `f`, in milliseconds: one call to warm up (kept
/// as a sample when the call is slow), then enough calls for about [`BUDGET`]
/// seconds, at least [`MIN_RUNS`].
fn measure(mut f: impl FnMut()) -> f64 {
    let start = Instant::now();
    f();
    let first = start.elapsed().as_secs_f64();
    let mut samples = Vec::new();
    let runs = if first > SLOW {
        samples.push(first);
        SLOW_RUNS - 1
    } else {
        ((BUDGET / first.max(1e-9)).ceil() as usize).clamp(MIN_RUNS, 1_000_000)
    };
    for _ in 0..runs {
        let start = Instant::now();
        f();
        samples.push(start.elapsed().as_secs_f64());
    }
    samples.sort_by(f64::total_cmp);
    samples[samples.len() / 2] * 1e3
}

/// One row of the table.
struct Row {
    program: &'static str,
    n: usize,
    primal: f64,
    /// gradlift's gradient, `None` when it was not run (see [`TAPE_CAP`]).
    gradient: Option<Gradlift>,
    hand_primal: f64,
    hand_gradient: f64,
}

/// gradlift's gradient in a [`Row`].
struct Gradlift {
    /// Median ms.
    time: f64,
    /// `autodiff(..)` and the first gradient.
    compile: Duration,
    tape_bytes: usize,
}

/// The most tape a gradient may be predicted to need before it is not run: the
/// naive `normalize`'s tape is O(n^2), gigabytes at the suite's sizes, and twice
/// that while the tape grows (as a vector).
const TAPE_CAP: usize = 4 << 30;

/// The one `f64` of a result.
fn scalar(out: &[Val]) -> f64 {
    match out {
        [Val::F64(v)] => *v,
        _ => panic!("expected one f64 result, got {out:?}"),
    }
}

/// gradlift's timings of a traced function, with the activities `params`, at
/// `args`.
struct Jit {
    primal: f64,
    primal_value: f64,
    /// The median ms of the gradient, its value and tape, when it ran.
    gradient: Option<(f64, f64, usize)>,
}

/// Compiles the primal ([`CompiledFunction`]) and the gradient with the activities
/// `params` ([`CompiledGradient`], called with borrowed arguments:
/// [`CompiledGradient::gradient_args`]) of the function of `ad`, and times them at `args` with every buffer allocated before
/// the timed calls.
/// With `params` `None`, the primal only.
fn jit<A, R>(
    ad: &Autodiff<A, R>,
    params: Option<&[Activity]>,
    args: Vec<Val>,
) -> Result<Jit, Error> {
    let (module, name) = (ad.module(), ad.name());
    let func = CompiledFunction::with_hosts(module, name, ad.hosts())?;
    let (mut ws, mut primal_args, mut out) = (Workspace::new(), args.clone(), Vec::new());
    func.call_into(&mut ws, &mut primal_args, &mut out)?;
    let primal_value = scalar(&out);
    let primal = measure(|| {
        func.call_into(&mut ws, black_box(&mut primal_args), &mut out)
            .expect("the primal ran once");
        black_box(&out);
    });

    let Some(params) = params else {
        return Ok(Jit {
            primal,
            primal_value,
            gradient: None,
        });
    };
    let id = module
        .func_by_name(name)
        .ok_or_else(|| Error::NoSuchFunction(name.to_string()))?;
    let config = RuleConfig::default_for(module.sig(id)).with_params(params);
    let grad = CompiledGradient::with_config(module, name, &config, ad.hosts())?;
    // Borrowed arguments and shadows, made once: `gradient_args` copies nothing.
    let mut shadows: Vec<Vec<f64>> = args
        .iter()
        .zip(params)
        .filter(|&(_, &p)| matches!(p, Activity::Dup | Activity::DupNoNeed))
        .map(|(a, _)| vec![0.0; a.slice_len().unwrap_or(0)])
        .collect();
    let mut borrowed: Vec<Arg<'_>> = args.iter().map(Arg::from).collect();
    let mut shadow_args: Vec<Arg<'_>> = shadows.iter_mut().map(|s| Arg::F64sMut(s)).collect();
    let (mut value, mut grads) = (Vec::new(), Vec::new());
    let mut ws = Workspace::new();
    let (mut gradient_value, mut tape_bytes) = (f64::NAN, 0);
    let gradient = measure(|| {
        tape_bytes = grad
            .gradient_args(
                &mut ws,
                black_box(&mut borrowed),
                &mut shadow_args,
                &[],
                &mut value,
                &mut grads,
            )
            .expect("the gradient ran once");
        gradient_value = scalar(&value);
        black_box(&grads);
    });
    Ok(Jit {
        primal,
        primal_value,
        gradient: Some((gradient, gradient_value, tape_bytes)),
    })
}

/// Checks the compiled primal's and the timed gradient's values against `hand_value`
/// and makes the row (`compile` `None` when the gradient was not run).
#[allow(clippy::too_many_arguments)]
fn row(
    program: &'static str,
    n: usize,
    jit: Jit,
    hand_value: f64,
    hand_primal: f64,
    hand_gradient: f64,
    compile: Option<Duration>,
) -> Row {
    check(program, jit.primal_value, hand_value, &[]);
    let gradient = jit
        .gradient
        .zip(compile)
        .map(|((time, value, tape_bytes), compile)| {
            check(program, value, hand_value, &[]);
            Gradlift {
                time,
                compile,
                tape_bytes,
            }
        });
    Row {
        program,
        n,
        primal: jit.primal,
        gradient,
        hand_primal,
        hand_gradient,
    }
}

/// A program of one slice `x`, differentiated with respect to `x`.
fn of_x<F: Callable<(Slice<f64>,), Output = Var>>(
    program: &'static str,
    traced: F,
    x: Vec<f64>,
    hand_primal: fn(&[f64]) -> f64,
    hand_gradient: fn(&[f64], &mut [f64]) -> f64,
) -> Result<Row, Error> {
    let n = x.len();
    let mut dx = vec![0.0; n];
    let start = Instant::now();
    let mut ad = autodiff(program, traced)?;
    let (value, _) = ad.gradient((Duplicated(&x[..], &mut dx[..]),))?;
    let compile = start.elapsed();

    let mut hand_dx = vec![0.0; n];
    let hand_value = hand_gradient(&x, &mut hand_dx);
    check(program, value, hand_value, &[(&dx, &hand_dx)]);

    let jit = jit(&ad, Some(&[Activity::Dup]), vec![Val::F64s(x.clone())])?;
    let hp = measure(|| {
        black_box(hand_primal(black_box(&x)));
    });
    let hg = measure(|| {
        black_box(hand_gradient(black_box(&x), &mut hand_dx));
    });
    Ok(row(program, n, jit, hand_value, hp, hg, Some(compile)))
}

/// `normalize` at size `n`: `x` duplicated, `w` constant. gradlift's gradient is
/// not run when its tape is predicted (`tape`) to exceed [`TAPE_CAP`].
fn normalize(n: usize, tape: Option<usize>) -> Result<Row, Error> {
    let (x, w) = suite::normalize_input(n);
    let mut hand_dx = vec![0.0; n];
    let hand_value = hand::normalize_gradient(&x, &w, &mut hand_dx);
    let run_gradient = tape.is_none_or(|t| t <= TAPE_CAP);
    let mut compile = None;
    if run_gradient {
        let mut dx = vec![0.0; n];
        let start = Instant::now();
        let mut ad = autodiff("normalize", suite::normalize::<Var>)?;
        let (value, _) = ad.gradient((Duplicated(&x[..], &mut dx[..]), Const(&w[..])))?;
        compile = Some(start.elapsed());
        check("normalize", value, hand_value, &[(&dx, &hand_dx)]);
        // The tape is O(n^2) here (gigabytes): this first gradient's workspace is
        // freed before the timed one grows its own.
    }
    let ad = autodiff("normalize", suite::normalize::<Var>)?;
    let args = vec![Val::F64s(x.clone()), Val::F64s(w.clone())];
    let params = [Activity::Dup, Activity::Const];
    let jit = jit(&ad, run_gradient.then_some(&params[..]), args)?;
    let hp = measure(|| {
        black_box(hand::normalize(black_box(&x), black_box(&w)));
    });
    let hg = measure(|| {
        black_box(hand::normalize_gradient(
            black_box(&x),
            black_box(&w),
            &mut hand_dx,
        ));
    });
    Ok(row("normalize", n, jit, hand_value, hp, hg, compile))
}

/// `mlp` at the suite's batch: `x` constant, the four parameters duplicated.
fn mlp() -> Result<Row, Error> {
    let p = suite::mlp_input(MLP_BATCH);
    let mut d = [
        vec![0.0; p.w1.len()],
        vec![0.0; p.b1.len()],
        vec![0.0; p.w2.len()],
        vec![0.0; p.b2.len()],
    ];
    let start = Instant::now();
    let mut ad = autodiff("mlp", suite::mlp::<Var>)?;
    let [dw1, db1, dw2, db2] = &mut d;
    let (value, _) = ad.gradient((
        Const(&p.x[..]),
        Duplicated(&p.w1[..], &mut dw1[..]),
        Duplicated(&p.b1[..], &mut db1[..]),
        Duplicated(&p.w2[..], &mut dw2[..]),
        Duplicated(&p.b2[..], &mut db2[..]),
    ))?;
    let compile = start.elapsed();

    let mut h = d.clone();
    let hand_gradient = |h: &mut [Vec<f64>; 4]| {
        let [w1, b1, w2, b2] = h;
        let g = hand::MlpGradient { w1, b1, w2, b2 };
        hand::mlp_gradient(black_box(&p.x), &p.w1, &p.b1, &p.w2, &p.b2, g)
    };
    let hand_value = hand_gradient(&mut h);
    let pairs: Vec<(&[f64], &[f64])> = d.iter().zip(&h).map(|(g, w)| (&g[..], &w[..])).collect();
    check("mlp", value, hand_value, &pairs);

    let args = [&p.x, &p.w1, &p.b1, &p.w2, &p.b2]
        .map(|v| Val::F64s(v.clone()))
        .to_vec();
    let params = [
        Activity::Const,
        Activity::Dup,
        Activity::Dup,
        Activity::Dup,
        Activity::Dup,
    ];
    let jit = jit(&ad, Some(&params), args)?;
    let hp = measure(|| {
        black_box(hand::mlp(black_box(&p.x), &p.w1, &p.b1, &p.w2, &p.b2));
    });
    let hg = measure(|| {
        black_box(hand_gradient(&mut h));
    });
    Ok(row(
        "mlp",
        MLP_BATCH,
        jit,
        hand_value,
        hp,
        hg,
        Some(compile),
    ))
}

/// `ode` at the suite's steps: the six parameters duplicated, the steps constant.
fn ode() -> Result<Row, Error> {
    let p = suite::ode_input();
    let steps = ODE_STEPS as usize;
    let mut dp = vec![0.0; p.len()];
    let start = Instant::now();
    let mut ad = autodiff("ode", suite::ode::<Var>)?;
    let (value, _) = ad.gradient((Duplicated(&p[..], &mut dp[..]), Const(ODE_STEPS)))?;
    let compile = start.elapsed();

    let mut hand_dp = vec![0.0; p.len()];
    let mut scratch = vec![0.0; hand::ode_scratch_len(steps)];
    let hand_value = hand::ode_gradient(&p, steps, &mut hand_dp, &mut scratch);
    check("ode", value, hand_value, &[(&dp, &hand_dp)]);

    let args = vec![Val::F64s(p.clone()), Val::I64(ODE_STEPS)];
    let jit = jit(&ad, Some(&[Activity::Dup, Activity::Const]), args)?;
    let hp = measure(|| {
        black_box(hand::ode(black_box(&p), black_box(steps)));
    });
    let hg = measure(|| {
        black_box(hand::ode_gradient(
            black_box(&p),
            steps,
            &mut hand_dp,
            &mut scratch,
        ));
    });
    Ok(row("ode", steps, jit, hand_value, hp, hg, Some(compile)))
}

fn main() -> Result<(), Error> {
    // An argument keeps only the programs whose name contains it.
    let only = std::env::args().nth(1).unwrap_or_default();
    let start = Instant::now();
    // Each program sees the rows so far (normalize at 20_000 predicts its tape from
    // the one at 10_000).
    type Program = fn(&[Row]) -> Result<Row, Error>;
    let programs: [(&str, Program); 8] = [
        ("sumsq", |_| {
            of_x(
                "sumsq",
                suite::sumsq::<Var>,
                suite::sumsq_input(N),
                hand::sumsq,
                hand::sumsq_gradient,
            )
        }),
        ("rosenbrock", |_| {
            of_x(
                "rosenbrock",
                suite::rosenbrock::<Var>,
                suite::rosenbrock_input(N),
                hand::rosenbrock,
                hand::rosenbrock_gradient,
            )
        }),
        ("logsumexp", |_| {
            of_x(
                "logsumexp",
                suite::logsumexp::<Var>,
                suite::logsumexp_input(N),
                hand::logsumexp,
                hand::logsumexp_gradient,
            )
        }),
        ("normalize/10k", |_| normalize(NORMALIZE_N, None)),
        ("normalize/20k", |rows| {
            // O(n^2): four times the tape at 10_000.
            let at_10k = rows
                .iter()
                .find(|r| r.program == "normalize" && r.n == NORMALIZE_N);
            let tape = at_10k
                .and_then(|r| r.gradient.as_ref())
                .map(|g| 4 * g.tape_bytes);
            normalize(2 * NORMALIZE_N, tape)
        }),
        ("mlp", |_| mlp()),
        ("ode", |_| ode()),
        ("branchy", |_| {
            of_x(
                "branchy",
                suite::branchy::<Var>,
                suite::branchy_input(N),
                hand::branchy,
                hand::branchy_gradient,
            )
        }),
    ];
    let mut rows = Vec::new();
    for (name, run) in programs {
        if name.contains(&only) {
            eprintln!("{name}...");
            let row = run(&rows)?;
            rows.push(row);
        }
    }
    println!(
        "| program | n | primal ms | gradient ms | ratio | hand primal ms | hand gradient ms | vs hand | compile ms | tape bytes |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    let mut skipped = false;
    for r in &rows {
        let (gradient, ratio, vs_hand, compile, tape) = match &r.gradient {
            Some(g) => (
                format!("{:.4}", g.time),
                format!("{:.2}", g.time / r.primal),
                format!("{:.2}", g.time / r.hand_gradient),
                format!("{:.1}", g.compile.as_secs_f64() * 1e3),
                g.tape_bytes.to_string(),
            ),
            None => {
                skipped = true;
                let s = || "-".to_string();
                (s(), s(), s(), s(), s())
            }
        };
        println!(
            "| {} | {} | {:.4} | {gradient} | {ratio} | {:.4} | {:.4} | {vs_hand} | {compile} | {tape} |",
            r.program, r.n, r.primal, r.hand_primal, r.hand_gradient,
        );
    }
    if skipped {
        println!(
            "\n`-`: gradlift's gradient not run, its tape predicted over {} GiB.",
            TAPE_CAP >> 30
        );
    }
    println!(
        "\nEvery gradient run checked against the hand gradient to 1e-8 relative; {:.1} s in all.",
        start.elapsed().as_secs_f64()
    );
    Ok(())
}
