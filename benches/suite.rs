//! The benchmark suite (`BENCHMARKS.md`) under criterion: for each of the seven programs
//! at its suite size, gradlift's JIT primal and gradient, the hand-written Rust
//! primal and gradient of `benches/hand.rs` (the reference), and the time from the
//! generic Rust program to a callable gradient.
//!
//! ```sh
//! cargo bench --bench suite                    # everything: a few minutes on two cores
//! cargo bench --bench suite -- sumsq           # one program (a regex on the ids)
//! cargo bench --bench suite -- 'gradient/jit'  # one kind, every program
//! ```
//!
//! The ids are `<program>/<what>`, the programs `sumsq`, `rosenbrock`, `logsumexp`,
//! `normalize`, `mlp`, `ode`, `branchy` (one criterion group each), at the sizes of
//! [`gradlift::suite`] (`N`, `NORMALIZE_N`, `MLP_BATCH`, `ODE_STEPS`):
//!
//! | id | what one iteration is |
//! |---|---|
//! | `<program>/primal/jit` | one call of the compiled primal ([`CompiledFunction::call_into`]; workspace, arguments and result buffer made before the loop) |
//! | `<program>/gradient/jit` | the value and gradient in one call, on borrowed arguments and shadows made before the loop ([`CompiledGradient::gradient_args`], which copies nothing), with the suite's activities (`BENCHMARKS.md`); checked first through [`CompiledGradient::prepare`] |
//! | `<program>/primal/hand` | the hand-written primal |
//! | `<program>/gradient/attr` | the value and gradient of the program written as plain Rust under `#[autodiff_reverse]` (`benches/attr.rs`): one call of its `d_NAME`, on shadows made before the loop (they accumulate, as `gradient/jit`'s do) |
//! | `<program>/gradient/hand` | the hand-written value and gradient, into buffers made before the loop |
//! | `<program>/primal/ir`, `<program>/gradient/ir` | the same program from `examples/ir/<program>.ir` through [`Pipeline`], as `gradlift grad` runs it (parse, verify, optimise, derive, compile), timed as `primal/jit` and `gradient/jit`; `mlp.ir` takes the labels as a slice, `ode.ir` its six numbers as scalars |
//! | `<program>/compile` | `autodiff(name, suite::program::<Var>)` and its first `gradient(..)` call: trace, derivation, JIT compilation and one gradient, from nothing each time |
//! | `normalize/gradient/jit/20000` | `normalize`'s gradient at twice its suite size: its ratio to `normalize/gradient/jit` shows the order (4 for O(n^2), 2 for O(n)) |
//! | `normalize/gradient/attr/20000` | the same for the attribute form |
//!
//! The suite's `ratio` is `gradient/jit` over `primal/jit`; `vs hand` is
//! `gradient/jit` over `gradient/hand`; the attribute's cost is `gradient/attr` over
//! `gradient/jit`. The activities: every slice argument
//! differentiated, except `normalize`'s `w` and `mlp`'s `X` (constant), and `ode`'s
//! step count (an integer, constant).
//!
//! Before anything of a program is timed, gradlift's compiled primal and prepared
//! gradient (the very cache that is timed) are checked against the hand-written ones
//! (value and every gradient entry to 1e-8 relative, [`hand::check`]): a wrong
//! program panics instead of being timed; so is the attribute form's first gradient,
//! from zeroed shadows. Every program is compiled and checked
//! even when a filter leaves none of its benchmarks to run.
//!
//! `normalize`'s gradient is guarded: while its tape grows as O(n^2) (the norm is
//! recomputed inside the loop and nothing hoists it yet), the tape at n = 10_000 is
//! gigabytes. The gradient is first run at n = 1_000; if its tape's peak exceeds
//! [`NORMALIZE_TAPE_CAP`], a line says so and `normalize/gradient/jit`,
//! `normalize/gradient/attr` (at both sizes), `normalize/gradient/jit/20000` and
//! `normalize/compile` are skipped (the rest of
//! `normalize`, the hand-written gradient included, still runs).
//!
//! Criterion prints, for each id, `time: [low estimate high]` (a 95% confidence
//! interval of the time per iteration) and the change since the last run; the
//! medians and the rest of its statistics are in
//! `target/criterion/<program>/<what>/new/estimates.json`. Samples are few and
//! short (10 samples, 0.5 s warm-up, 2 s of measurement: see [`config`]); criterion's
//! options override them (`-- --sample-size 50 --measurement-time 10`).

use std::hint::black_box;
use std::time::Duration;

use criterion::measurement::WallTime;
use criterion::{
    BatchSize, BenchmarkGroup, Criterion, SamplingMode, criterion_group, criterion_main,
};
use gradlift::adjoint::{Activity, RuleConfig};
use gradlift::ir::interp::Val;
use gradlift::jit::Arg;
use gradlift::suite::{self, MLP_BATCH, N, NORMALIZE_N, ODE_STEPS};
use gradlift::trace::{Callable, Slice, Var};
use gradlift::{
    Autodiff, CompiledFunction, CompiledGradient, Const, Duplicated, Pipeline, Workspace, autodiff,
};

/// The hand-written primals and gradients (`benches/hand.rs`), shared with
/// `examples/suite.rs`.
mod hand;

/// The programs as plain Rust under `#[autodiff_reverse]` (`benches/attr.rs`),
/// shared with `examples/suite.rs` and `tests/suite_attr.rs`.
mod attr;

/// The criterion settings of every group: few, short samples, so that the whole
/// suite runs in a few minutes on two cores.
/// A zero shadow for each argument of `args` that `grad`'s rule has a shadow of
/// (its layout's `shadow_params`, in their order).
fn zero_shadows(grad: &CompiledGradient, args: &[Val]) -> Vec<Vec<f64>> {
    grad.rule()
        .layout
        .shadow_params
        .iter()
        .map(|&i| vec![0.0; args[i].slice_len().unwrap_or(0)])
        .collect()
}

fn config() -> Criterion {
    Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
}

/// The most tape `normalize`'s gradient may take at n = 1_000 for its gradient
/// benchmarks to run: 24 MB while the tape is O(n^2), tens of kB once the norm is
/// hoisted out of the loop.
const NORMALIZE_TAPE_CAP: usize = 1 << 20;

type Group<'a> = BenchmarkGroup<'a, WallTime>;

/// The one `f64` of a result.
fn scalar(out: &[Val]) -> f64 {
    match out {
        [Val::F64(v)] => *v,
        _ => panic!("expected one f64 result, got {out:?}"),
    }
}

/// gradlift's compiled primal of `ad`'s function.
fn compile_primal<A, R>(ad: &Autodiff<A, R>) -> CompiledFunction {
    CompiledFunction::with_hosts(ad.module(), ad.name(), ad.hosts())
        .unwrap_or_else(|e| panic!("{}: the primal does not compile: {e}", ad.name()))
}

/// gradlift's compiled gradient of `ad`'s function, with the activities `params`.
fn compile_gradient<A, R>(ad: &Autodiff<A, R>, params: &[Activity]) -> CompiledGradient {
    let (module, name) = (ad.module(), ad.name());
    let id = module.func_by_name(name).expect("the traced function");
    let config = RuleConfig::default_for(module.sig(id)).with_params(params);
    CompiledGradient::with_config(module, name, &config, ad.hosts())
        .unwrap_or_else(|e| panic!("{name}: the gradient does not compile: {e}"))
}

/// A call of a hand-written gradient: returns the value and writes the gradient of
/// each differentiated argument into its buffer (in argument order).
trait HandFn: FnMut(&mut [Vec<f64>]) -> f64 {}

impl<G: FnMut(&mut [Vec<f64>]) -> f64> HandFn for G {}

/// A hand-written gradient and its buffers: `run` returns the value and writes the
/// gradient of each differentiated argument into its buffer in `grads`.
struct HandGradient<G> {
    run: G,
    grads: Vec<Vec<f64>>,
}

impl<G: HandFn> HandGradient<G> {
    /// One call: the value (the gradient is in `self.grads`).
    fn call(&mut self) -> f64 {
        (self.run)(&mut self.grads)
    }
}

/// Checks the compiled primal against `hand_primal` at `args`, then times both
/// (`primal/jit`, `primal/hand`).
fn bench_primals(
    group: &mut Group<'_>,
    program: &str,
    func: &CompiledFunction,
    args: &[Val],
    mut hand_primal: impl FnMut() -> f64,
) {
    let (mut ws, mut args, mut out) = (Workspace::new(), args.to_vec(), Vec::new());
    func.call_into(&mut ws, &mut args, &mut out)
        .unwrap_or_else(|e| panic!("{program}: the primal fails: {e}"));
    hand::check(program, scalar(&out), hand_primal(), &[]);
    group.bench_function("primal/jit", |b| {
        b.iter(|| {
            func.call_into(&mut ws, black_box(&mut args), &mut out)
                .expect("the primal ran once");
            black_box(&out);
        })
    });
    group.bench_function("primal/hand", |b| b.iter(|| black_box(hand_primal())));
}

/// Checks `written` (rustc's primal of the program as written, where the
/// hand-written primal computes differently) against the compiled primal
/// (relative 1e-8), then times it (`primal/rustc_as_written`).
fn bench_written(
    group: &mut Group<'_>,
    program: &str,
    func: &CompiledFunction,
    args: &[Val],
    mut written: impl FnMut() -> f64,
) {
    let (mut ws, mut args, mut out) = (Workspace::new(), args.to_vec(), Vec::new());
    func.call_into(&mut ws, &mut args, &mut out)
        .unwrap_or_else(|e| panic!("{program}: the primal fails: {e}"));
    hand::check(program, scalar(&out), written(), &[]);
    group.bench_function("primal/rustc_as_written", |b| {
        b.iter(|| black_box(written()))
    });
}

/// Prepares `grad` at `args`, checks its value and gradient against `hand`'s, then
/// times it as `id`.
fn bench_gradient(
    group: &mut Group<'_>,
    id: &str,
    program: &str,
    grad: &CompiledGradient,
    args: &[Val],
    hand: &mut HandGradient<impl HandFn>,
) {
    let hand_value = hand.call();
    let mut cache = grad
        .prepare(args)
        .unwrap_or_else(|e| panic!("{program}: the gradient fails: {e}"));
    let g = cache
        .value_and_gradient(args)
        .unwrap_or_else(|e| panic!("{program}: the gradient fails: {e}"));
    // The shadows of the differentiated slices, in argument order (`None` for the
    // constant arguments).
    let got: Vec<&[f64]> = g
        .gradient
        .iter()
        .flatten()
        .map(|d| match d {
            Val::F64s(v) => &v[..],
            other => panic!("{program}: expected slice gradients only, got {other:?}"),
        })
        .collect();
    assert_eq!(
        got.len(),
        hand.grads.len(),
        "{program}: gradlift gives {} gradients, the hand-written gradient {}",
        got.len(),
        hand.grads.len()
    );
    let pairs: Vec<(&[f64], &[f64])> = got
        .into_iter()
        .zip(hand.grads.iter().map(|v| &v[..]))
        .collect();
    hand::check(program, scalar(g.value), hand_value, &pairs);
    // Timed: the zero-copy form, on borrowed arguments and shadows made before the
    // loop (the shadows accumulate, which costs the same as overwriting).
    let mut shadows = zero_shadows(grad, args);
    let mut borrowed: Vec<Arg<'_>> = args.iter().map(Arg::from).collect();
    let mut shadow_args: Vec<Arg<'_>> = shadows.iter_mut().map(|s| Arg::F64sMut(s)).collect();
    let (mut value, mut grads, mut ws) = (Vec::new(), Vec::new(), Workspace::new());
    group.bench_function(id, |b| {
        b.iter(|| {
            grad.gradient_args(
                &mut ws,
                black_box(&mut borrowed),
                &mut shadow_args,
                &[],
                &mut value,
                &mut grads,
            )
            .expect("the gradient ran once");
            black_box(&value);
        })
    });
}

/// Checks the attribute form's derivative `run` (`d_NAME` of `benches/attr.rs`: it
/// returns the value and adds the gradient of each differentiated argument into its
/// shadow, in argument order) from zeroed shadows against `hand`'s, then times it
/// as `id`.
fn bench_attr(
    group: &mut Group<'_>,
    id: &str,
    program: &str,
    hand: &mut HandGradient<impl HandFn>,
    mut run: impl FnMut(&mut [Vec<f64>]) -> f64,
) {
    let hand_value = hand.call();
    let mut shadows: Vec<Vec<f64>> = hand.grads.iter().map(|g| vec![0.0; g.len()]).collect();
    let value = run(&mut shadows);
    let pairs: Vec<(&[f64], &[f64])> = shadows
        .iter()
        .zip(&hand.grads)
        .map(|(g, w)| (&g[..], &w[..]))
        .collect();
    hand::check(&format!("{program} (attribute)"), value, hand_value, &pairs);
    group.bench_function(id, |b| b.iter(|| black_box(run(&mut shadows))));
}

/// The program `@name` of `examples/ir/FILE` through [`Pipeline`], as `gradlift
/// grad` runs it (parse, verify, optimise, derive, compile) with the activities
/// `params`: its value (and, when it has as many slice gradients as `hand`, each of
/// them) checked against `hand`'s, then `primal/ir` and `gradient/ir` timed as
/// `primal/jit` and `gradient/jit` are.
fn bench_ir(
    group: &mut Group<'_>,
    file: &str,
    name: &str,
    args: &[Val],
    params: &[Activity],
    hand: &mut HandGradient<impl HandFn>,
) {
    let path = format!("{}/examples/ir/{file}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let module = gradlift::ir::parse(&text).unwrap_or_else(|e| panic!("{path}: {e}"));
    let id = module.func_by_name(name).expect("the function exists");
    let config = RuleConfig::default_for(module.sig(id)).with_params(params);
    let pipeline = Pipeline::new();
    let func = pipeline
        .compile_function(&module, name)
        .unwrap_or_else(|e| panic!("{file}: {e}"));
    let grad = pipeline
        .compile_gradient(&module, name, Some(&config))
        .unwrap_or_else(|e| panic!("{file}: {e}"));
    let hand_value = hand.call();
    let g = grad
        .value_and_gradient(&mut Workspace::new(), args)
        .unwrap_or_else(|e| panic!("{file}: the gradient fails: {e}"));
    let slices: Vec<&[f64]> = g
        .gradient
        .iter()
        .flatten()
        .filter_map(|d| match d {
            Val::F64s(v) => Some(&v[..]),
            _ => None,
        })
        .collect();
    let pairs: Vec<(&[f64], &[f64])> = if slices.len() == hand.grads.len() {
        slices
            .into_iter()
            .zip(hand.grads.iter().map(|v| &v[..]))
            .collect()
    } else {
        Vec::new()
    };
    let value = g.value.as_deref().map_or(f64::NAN, scalar);
    hand::check(file, value, hand_value, &pairs);
    let (mut ws, mut primal_args, mut out) = (Workspace::new(), args.to_vec(), Vec::new());
    group.bench_function("primal/ir", |b| {
        b.iter(|| {
            func.call_into(&mut ws, black_box(&mut primal_args), &mut out)
                .expect("the primal runs");
            black_box(&out);
        })
    });
    let mut shadows = zero_shadows(&grad, args);
    let mut borrowed: Vec<Arg<'_>> = args.iter().map(Arg::from).collect();
    let mut shadow_args: Vec<Arg<'_>> = shadows.iter_mut().map(|s| Arg::F64sMut(s)).collect();
    let (mut value, mut grads, mut ws) = (Vec::new(), Vec::new(), Workspace::new());
    group.bench_function("gradient/ir", |b| {
        b.iter(|| {
            grad.gradient_args(
                &mut ws,
                black_box(&mut borrowed),
                &mut shadow_args,
                &[],
                &mut value,
                &mut grads,
            )
            .expect("the gradient runs");
            black_box(&value);
        })
    });
}

/// Times `hand` (`gradient/hand`).
fn bench_hand_gradient(group: &mut Group<'_>, hand: &mut HandGradient<impl HandFn>) {
    group.bench_function("gradient/hand", |b| b.iter(|| black_box(hand.call())));
}

/// Times `to_gradient` (`compile`): from the generic program to a callable gradient
/// and its first call. It returns what it made (the `Autodiff`, the shadows), which
/// is dropped outside the timing. Call it last: it switches the group to flat
/// sampling (every sample the same number of iterations, which suits iterations of
/// tens of milliseconds).
fn bench_compile<T>(group: &mut Group<'_>, mut to_gradient: impl FnMut() -> T) {
    group.sampling_mode(SamplingMode::Flat);
    group.bench_function("compile", |b| {
        b.iter_batched(|| (), |()| to_gradient(), BatchSize::PerIteration)
    });
}

/// A program of one slice `x`, differentiated with respect to `x`: `sumsq`,
/// `rosenbrock`, `logsumexp`, `branchy`; `derivative` is its attribute form's
/// `d_NAME`.
fn of_x<F: Callable<(Slice<f64>,), Output = Var> + Copy>(
    c: &mut Criterion,
    program: &'static str,
    traced: F,
    derivative: fn(&[f64], &mut [f64], f64) -> f64,
    x: Vec<f64>,
    hand_primal: impl Fn(&[f64]) -> f64,
    hand_gradient: impl Fn(&[f64], &mut [f64]) -> f64,
) {
    let ir_file = format!("{program}.ir");
    let n = x.len();
    let ad = autodiff(program, traced).expect("the program traces");
    let func = compile_primal(&ad);
    let grad = compile_gradient(&ad, &[Activity::Dup]);
    let args = [Val::F64s(x.clone())];
    let mut hand = HandGradient {
        run: |d: &mut [Vec<f64>]| hand_gradient(black_box(&x), &mut d[0]),
        grads: vec![vec![0.0; n]],
    };

    let mut group = c.benchmark_group(program);
    bench_primals(&mut group, program, &func, &args, || {
        hand_primal(black_box(&x))
    });
    bench_gradient(&mut group, "gradient/jit", program, &grad, &args, &mut hand);
    bench_attr(&mut group, "gradient/attr", program, &mut hand, |d| {
        derivative(black_box(&x), &mut d[0], 1.0)
    });
    bench_hand_gradient(&mut group, &mut hand);
    bench_ir(
        &mut group,
        &ir_file,
        program,
        &args,
        &[Activity::Dup],
        &mut hand,
    );
    bench_compile(&mut group, || {
        let mut dx = vec![0.0; n];
        let mut ad = autodiff(program, traced).expect("the program traces");
        let (value, _) = ad
            .gradient((Duplicated(&x[..], &mut dx[..]),))
            .expect("the gradient runs");
        black_box(value);
        (ad, dx)
    });
    group.finish();
}

fn sumsq(c: &mut Criterion) {
    let x = suite::sumsq_input(N);
    of_x(
        c,
        "sumsq",
        suite::sumsq::<Var>,
        attr::d_sumsq,
        x,
        hand::sumsq,
        hand::sumsq_gradient,
    );
}

fn rosenbrock(c: &mut Criterion) {
    of_x(
        c,
        "rosenbrock",
        suite::rosenbrock::<Var>,
        attr::d_rosenbrock,
        suite::rosenbrock_input(N),
        hand::rosenbrock,
        hand::rosenbrock_gradient,
    );
}

fn logsumexp(c: &mut Criterion) {
    of_x(
        c,
        "logsumexp",
        suite::logsumexp::<Var>,
        attr::d_logsumexp,
        suite::logsumexp_input(N),
        hand::logsumexp,
        hand::logsumexp_gradient,
    );
}

fn branchy(c: &mut Criterion) {
    of_x(
        c,
        "branchy",
        suite::branchy::<Var>,
        attr::d_branchy,
        suite::branchy_input(N),
        hand::branchy,
        hand::branchy_gradient,
    );
}

/// `normalize`'s arguments and hand-written gradient at size `n`.
fn normalize_at(n: usize) -> (Vec<Val>, HandGradient<impl HandFn>) {
    let (x, w) = suite::normalize_input(n);
    let args = vec![Val::F64s(x.clone()), Val::F64s(w.clone())];
    let hand = HandGradient {
        run: move |d: &mut [Vec<f64>]| hand::normalize_gradient(black_box(&x), &w, &mut d[0]),
        grads: vec![vec![0.0; n]],
    };
    (args, hand)
}

/// Checks and times `normalize`'s attribute form at size `n` as `id`.
fn bench_normalize_attr(group: &mut Group<'_>, id: &str, n: usize) {
    let (x, w) = suite::normalize_input(n);
    let (_, mut hand) = normalize_at(n);
    bench_attr(group, id, "normalize", &mut hand, |d| {
        attr::d_normalize(black_box(&x), &mut d[0], &w, 1.0)
    });
}

/// `normalize`: `x` differentiated, `w` constant; the gradient also at twice the
/// suite's size, and guarded by its tape at n = 1_000 ([`NORMALIZE_TAPE_CAP`]).
fn normalize(c: &mut Criterion) {
    const PARAMS: [Activity; 2] = [Activity::Dup, Activity::Const];
    let ad = autodiff("normalize", suite::normalize::<Var>).expect("the program traces");
    let func = compile_primal(&ad);
    let grad = compile_gradient(&ad, &PARAMS);
    let (args, mut hand) = normalize_at(NORMALIZE_N);

    let tape = {
        let (probe, _) = normalize_at(1_000);
        let mut cache = grad.prepare(&probe).expect("the gradient runs at n = 1000");
        let g = cache
            .value_and_gradient(&probe)
            .expect("the gradient runs at n = 1000");
        g.tape_peak_bytes
    };
    let run_gradient = tape <= NORMALIZE_TAPE_CAP;
    if !run_gradient {
        println!(
            "normalize: gradient skipped: its tape is O(n^2) (the optimiser did not hoist the \
             norm out of the loop): {tape} bytes at n = 1000, over {NORMALIZE_TAPE_CAP}; \
             normalize/gradient/jit, normalize/gradient/jit/20000 and normalize/compile not run"
        );
    }

    let mut group = c.benchmark_group("normalize");
    let (x, w) = suite::normalize_input(NORMALIZE_N);
    bench_primals(&mut group, "normalize", &func, &args, || {
        hand::normalize(black_box(&x), &w)
    });
    bench_written(&mut group, "normalize", &func, &args, || {
        hand::normalize_as_written(black_box(&x), &w)
    });
    if run_gradient {
        bench_gradient(
            &mut group,
            "gradient/jit",
            "normalize",
            &grad,
            &args,
            &mut hand,
        );
        let (args_2n, mut hand_2n) = normalize_at(2 * NORMALIZE_N);
        bench_gradient(
            &mut group,
            &format!("gradient/jit/{}", 2 * NORMALIZE_N),
            "normalize at 2n",
            &grad,
            &args_2n,
            &mut hand_2n,
        );
        bench_normalize_attr(&mut group, "gradient/attr", NORMALIZE_N);
        bench_normalize_attr(
            &mut group,
            &format!("gradient/attr/{}", 2 * NORMALIZE_N),
            2 * NORMALIZE_N,
        );
    }
    bench_hand_gradient(&mut group, &mut hand);
    bench_ir(
        &mut group,
        "normalize.ir",
        "normalize",
        &args,
        &[Activity::Dup, Activity::Const],
        &mut hand,
    );
    if run_gradient {
        bench_compile(&mut group, || {
            let mut dx = vec![0.0; x.len()];
            let mut ad = autodiff("normalize", suite::normalize::<Var>).expect("traces");
            let (value, _) = ad
                .gradient((Duplicated(&x[..], &mut dx[..]), Const(&w[..])))
                .expect("the gradient runs");
            black_box(value);
            (ad, dx)
        });
    }
    group.finish();
}

/// `mlp` at the suite's batch: `X` constant, `W1, b1, W2, b2` differentiated.
fn mlp(c: &mut Criterion) {
    let p = suite::mlp_input(MLP_BATCH);
    let ad = autodiff("mlp", suite::mlp::<Var>).expect("the program traces");
    let func = compile_primal(&ad);
    let params = [
        Activity::Const,
        Activity::Dup,
        Activity::Dup,
        Activity::Dup,
        Activity::Dup,
    ];
    let grad = compile_gradient(&ad, &params);
    let args = [&p.x, &p.w1, &p.b1, &p.w2, &p.b2].map(|v| Val::F64s(v.clone()));
    let zeros = || [&p.w1, &p.b1, &p.w2, &p.b2].map(|v| vec![0.0; v.len()]);
    let mut hand = HandGradient {
        run: |d: &mut [Vec<f64>]| {
            let [w1, b1, w2, b2] = d else {
                unreachable!("four gradients")
            };
            let g = hand::MlpGradient { w1, b1, w2, b2 };
            hand::mlp_gradient(black_box(&p.x), &p.w1, &p.b1, &p.w2, &p.b2, g)
        },
        grads: zeros().to_vec(),
    };

    let mut group = c.benchmark_group("mlp");
    bench_primals(&mut group, "mlp", &func, &args, || {
        hand::mlp(black_box(&p.x), &p.w1, &p.b1, &p.w2, &p.b2)
    });
    bench_written(&mut group, "mlp", &func, &args, || {
        hand::mlp_as_written(black_box(&p.x), &p.w1, &p.b1, &p.w2, &p.b2)
    });
    bench_gradient(&mut group, "gradient/jit", "mlp", &grad, &args, &mut hand);
    bench_attr(&mut group, "gradient/attr", "mlp", &mut hand, |d| {
        let [dw1, db1, dw2, db2] = d else {
            unreachable!("four gradients")
        };
        attr::d_mlp(
            black_box(&p.x),
            &p.w1,
            dw1,
            &p.b1,
            db1,
            &p.w2,
            dw2,
            &p.b2,
            db2,
            1.0,
        )
    });
    bench_hand_gradient(&mut group, &mut hand);
    // The IR version takes the labels (`b mod 10`) as a slice of its own.
    let mut ir_args = args.to_vec();
    ir_args.push(Val::I64s((0..MLP_BATCH as i64).map(|b| b % 10).collect()));
    let mut ir_params = vec![Activity::Const];
    ir_params.extend([Activity::Dup; 4]);
    ir_params.push(Activity::Const);
    bench_ir(&mut group, "mlp.ir", "mlp", &ir_args, &ir_params, &mut hand);
    bench_compile(&mut group, || {
        let mut d = zeros();
        let mut ad = autodiff("mlp", suite::mlp::<Var>).expect("the program traces");
        let [dw1, db1, dw2, db2] = &mut d;
        let (value, _) = ad
            .gradient((
                Const(&p.x[..]),
                Duplicated(&p.w1[..], &mut dw1[..]),
                Duplicated(&p.b1[..], &mut db1[..]),
                Duplicated(&p.w2[..], &mut dw2[..]),
                Duplicated(&p.b2[..], &mut db2[..]),
            ))
            .expect("the gradient runs");
        black_box(value);
        (ad, d)
    });
    group.finish();
}

/// `ode` at the suite's steps: the six parameters differentiated, the step count
/// constant.
fn ode(c: &mut Criterion) {
    let p = suite::ode_input();
    let steps = ODE_STEPS as usize;
    let ad = autodiff("ode", suite::ode::<Var>).expect("the program traces");
    let func = compile_primal(&ad);
    let grad = compile_gradient(&ad, &[Activity::Dup, Activity::Const]);
    let args = [Val::F64s(p.clone()), Val::I64(ODE_STEPS)];
    let mut scratch = vec![0.0; hand::ode_scratch_len(steps)];
    let mut hand = HandGradient {
        run: |d: &mut [Vec<f64>]| hand::ode_gradient(black_box(&p), steps, &mut d[0], &mut scratch),
        grads: vec![vec![0.0; p.len()]],
    };

    let mut group = c.benchmark_group("ode");
    bench_primals(&mut group, "ode", &func, &args, || {
        hand::ode(black_box(&p), black_box(steps))
    });
    bench_gradient(&mut group, "gradient/jit", "ode", &grad, &args, &mut hand);
    bench_attr(&mut group, "gradient/attr", "ode", &mut hand, |d| {
        attr::d_ode(black_box(&p), &mut d[0], steps, 1.0)
    });
    bench_hand_gradient(&mut group, &mut hand);
    // The IR version takes the six numbers as scalars (all active) and T; its
    // gradient is six scalars, so only its value is checked.
    let mut ir_args: Vec<Val> = p.iter().map(|&v| Val::F64(v)).collect();
    ir_args.push(Val::I64(ODE_STEPS));
    let mut ir_params = vec![Activity::Active; p.len()];
    ir_params.push(Activity::Const);
    bench_ir(&mut group, "ode.ir", "ode", &ir_args, &ir_params, &mut hand);
    bench_compile(&mut group, || {
        let mut dp = vec![0.0; p.len()];
        let mut ad = autodiff("ode", suite::ode::<Var>).expect("the program traces");
        let (value, _) = ad
            .gradient((Duplicated(&p[..], &mut dp[..]), Const(ODE_STEPS)))
            .expect("the gradient runs");
        black_box(value);
        (ad, dp)
    });
    group.finish();
}

criterion_group! {
    name = suite;
    config = config();
    targets = sumsq, rosenbrock, logsumexp, normalize, mlp, ode, branchy
}
criterion_main!(suite);
