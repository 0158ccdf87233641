//! The baseline measurement of the benchmark suite (`BENCHMARKS.md`): for each program at
//! its suite size (and `normalize` also at twice its size), gradlift's JIT primal
//! and gradient against the hand-written Rust of `benches/hand.rs`, the time to a
//! callable gradient and the tape's peak, as a markdown table. Under each program's
//! row, a row `(attribute)` for the same program written as plain Rust under
//! `#[autodiff_reverse]` (`benches/attr.rs`): the gradient time of its `d_NAME`, the
//! time of its first call, and its cost next to the autodiff form's gradient (the
//! two timed in turns; the ratio of their fastest calls).
//!
//! A second table has the same programs from `examples/ir`, through the command
//! line's pipeline ([`Pipeline`]: parse, verify, optimise, derive, compile, as
//! `gradlift grad` runs them).
//!
//! Every call of a row (gradlift's primal and gradient, the attribute form's
//! gradient, the hand-written primal and gradient) is timed in turns with the
//! others ([`samples_each`]), so all the columns of a row see the same load of
//! this shared machine; the table gives the medians.
//!
//! Before anything is timed, gradlift's first gradient (and the attribute's and
//! the IR version's) is checked against the hand gradient (the value and every
//! entry to 1e-8 relative; for `mlp.ir` and `ode.ir`, whose parameters differ,
//! the value), so the table never reports a wrong program.
//!
//! Run without an argument, it also times the gradients of `normalize` and `ode` at
//! four sizes each and writes two plots ([`write_plots`]): `docs/img/suite_ratios.svg`
//! and `docs/img/suite_scaling.svg`.
//!
//! Run with `cargo run --release --example suite` (an argument keeps only the
//! programs whose name contains it, and writes no plot). `cargo bench --bench
//! suite` measures the same programs with criterion's statistics
//! (`benches/suite.rs`).

use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use gradlift::adjoint::{Activity, RuleConfig};
use gradlift::ir::interp::Val;
use gradlift::jit::Arg;
use gradlift::suite::{self, MLP_BATCH, N, NORMALIZE_N, ODE_STEPS};
use gradlift::trace::{Callable, Slice, Var};
use gradlift::{
    Autodiff, CompiledFunction, CompiledGradient, Const, Duplicated, Error, Hosts, Pipeline,
    Workspace, autodiff,
};
use plotters::element::DashedPathElement;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

/// The hand-written primals and gradients (`benches/hand.rs`), shared with the
/// criterion benchmarks.
#[path = "../benches/hand.rs"]
mod hand;
use hand::check;

/// The suite's programs as plain Rust under `#[autodiff_reverse]`
/// (`benches/attr.rs`), shared with the criterion benchmarks and the tests.
#[path = "../benches/attr.rs"]
mod attr;

/// The timing helpers ([`timing::measure`], [`timing::samples_each`]), shared with
/// `examples/forward_suite.rs`.
#[path = "../benches/timing.rs"]
mod timing;
use timing::{median, samples_each};

/// One row of the table.
struct Row {
    program: &'static str,
    n: usize,
    primal: f64,
    /// gradlift's gradient, `None` when it was not run (see [`TAPE_CAP`]).
    gradient: Option<Gradlift>,
    hand_primal: f64,
    hand_gradient: f64,
    /// rustc's primal of the program as written, where it differs from the
    /// hand-written primal.
    written_primal: Option<f64>,
    /// The attribute form's gradient, `None` when it was not run (as `gradient`).
    attr: Option<Attr>,
    /// The same program from `examples/ir`, through the command line's pipeline.
    ir: Option<IrRow>,
    /// The same again with host functions and host rules (mlp: a host gemv).
    ir_host: Option<IrRow>,
}

/// A program of `examples/ir` through [`Pipeline`] (what `gradlift grad` runs:
/// parse, verify, optimise, derive, compile), timed with the hand-written
/// primal and gradient in turns.
struct IrRow {
    file: &'static str,
    primal: f64,
    gradient: f64,
    hand_primal: f64,
    hand_gradient: f64,
    /// Parse to the first gradient.
    compile: Duration,
    tape_bytes: usize,
}

/// The [`IrRow`] of `@name` in `examples/ir/FILE` at `args` with the activities
/// `params`: its value checked against `hand_value` and, when given, the
/// gradient of its first `dup` parameter against `hand_dx`.
#[allow(clippy::too_many_arguments)]
fn ir_row(
    file: &'static str,
    name: &str,
    args: Vec<Val>,
    params: &[Activity],
    hand: Hand<'_>,
    hand_value: f64,
    hand_dx: Option<&[f64]>,
) -> Result<IrRow, Error> {
    let start = Instant::now();
    let path = format!("{}/examples/ir/{file}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).expect("the examples/ir file reads");
    ir_row_of(
        file,
        &text,
        Hosts::new(),
        start,
        name,
        args,
        params,
        hand,
        hand_value,
        hand_dx,
    )
}

/// [`ir_row`] for the module `text` (labelled `file`) with host functions
/// `hosts`, its compile time counted from `start`.
#[allow(clippy::too_many_arguments)]
fn ir_row_of(
    file: &'static str,
    text: &str,
    hosts: Hosts,
    start: Instant,
    name: &str,
    args: Vec<Val>,
    params: &[Activity],
    hand: Hand<'_>,
    hand_value: f64,
    hand_dx: Option<&[f64]>,
) -> Result<IrRow, Error> {
    let module = gradlift::ir::parse(text).expect("the module parses");
    let pipeline = Pipeline::new().with_hosts(hosts);
    let id = module.func_by_name(name).expect("the function exists");
    let config = RuleConfig::default_for(module.sig(id)).with_params(params);
    let grad = pipeline.compile_gradient(&module, name, Some(&config))?;
    let mut shadows = zero_shadows(&grad, &args);
    let mut borrowed: Vec<Arg<'_>> = args.iter().map(Arg::from).collect();
    let (mut value, mut grads) = (Vec::new(), Vec::new());
    let mut ws = Workspace::new();
    {
        let mut shadow_args: Vec<Arg<'_>> = shadows.iter_mut().map(|s| Arg::F64sMut(s)).collect();
        grad.gradient_args(
            &mut ws,
            &mut borrowed,
            &mut shadow_args,
            &[],
            &mut value,
            &mut grads,
        )?;
    }
    let compile = start.elapsed();
    check(name, scalar(&value), hand_value, &[]);
    if let (Some(h), Some(dx)) = (hand_dx, shadows.first()) {
        check(name, scalar(&value), hand_value, &[(dx, h)]);
    }
    let func = pipeline.compile_function(&module, name)?;
    let (mut pws, mut primal_args, mut out) = (Workspace::new(), args.clone(), Vec::new());
    let mut primal = || {
        func.call_into(&mut pws, black_box(&mut primal_args), &mut out)
            .expect("the primal runs");
        black_box(&out);
    };
    let mut shadow_args: Vec<Arg<'_>> = shadows.iter_mut().map(|s| Arg::F64sMut(s)).collect();
    let mut tape_bytes = 0;
    let mut gradient = || {
        tape_bytes = grad
            .gradient_args(
                &mut ws,
                black_box(&mut borrowed),
                &mut shadow_args,
                &[],
                &mut value,
                &mut grads,
            )
            .expect("the gradient runs")
            .peak_bytes;
        black_box(&grads);
    };
    let t = medians(&mut [&mut primal, hand.primal, &mut gradient, hand.gradient]);
    Ok(IrRow {
        file,
        primal: t[0],
        gradient: t[2],
        hand_primal: t[1],
        hand_gradient: t[3],
        compile,
        tape_bytes,
    })
}

/// The host gemv of the mlp row, and its rule (the borrowing kind; the copying
/// one is `examples/host_gemv.rs`'s comparison).
#[path = "host/gemv.rs"]
#[allow(dead_code)]
mod gemv;

/// The attribute form's gradient in a [`Row`]: `d_NAME` of `benches/attr.rs`.
struct Attr {
    /// Median ms of a call of `d_NAME` (its shadows made before the timed calls).
    time: f64,
    /// Its fastest call over the fastest of the autodiff form's gradient, the two
    /// timed in turns.
    vs_autodiff: f64,
    /// The first call of `d_NAME` in the process (trace, optimiser, derivation,
    /// Cranelift, the first gradient); `None` when an earlier row made it.
    compile: Option<Duration>,
}

/// The first call of `call` (the attribute form's `d_NAME`) and its duration, or
/// `None` for the duration if `called` says an earlier row made it.
fn first_call<T>(called: &AtomicBool, call: impl FnOnce() -> T) -> (T, Option<Duration>) {
    let start = Instant::now();
    let t = call();
    let elapsed = start.elapsed();
    (
        t,
        (!called.swap(true, Ordering::Relaxed)).then_some(elapsed),
    )
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
/// `args`, and the hand-written primal's and gradient's, all taken in turns.
struct Jit {
    primal: f64,
    primal_value: f64,
    /// The median ms of the gradient, its value and tape, when it ran.
    gradient: Option<(f64, f64, usize)>,
    /// The median ms of the attribute form's gradient and its fastest call over
    /// the gradient's fastest, when it ran.
    attr: Option<(f64, f64)>,
    /// The median ms of the hand-written primal and gradient.
    hand_primal: f64,
    hand_gradient: f64,
    /// The median ms of rustc's primal of the program as written, when timed.
    written_primal: Option<f64>,
}

/// The hand-written primal and gradient of a program, as calls to time, and
/// where the hand-written primal computes differently from the program (see
/// `hand::normalize_as_written`), rustc's primal of the program as written.
struct Hand<'a> {
    primal: &'a mut dyn FnMut(),
    gradient: &'a mut dyn FnMut(),
    written: Option<&'a mut dyn FnMut()>,
}

/// The medians (ms) of `samples_each(fs)`.
fn medians(fs: &mut [&mut dyn FnMut()]) -> Vec<f64> {
    samples_each(fs)
        .into_iter()
        .map(|s| median(s) * 1e3)
        .collect()
}

/// Compiles the primal ([`CompiledFunction`]) and the gradient with the activities
/// `params` ([`CompiledGradient`], called with borrowed arguments:
/// [`CompiledGradient::gradient_args`]) of the function of `ad`, and times them at
/// `args` with every buffer allocated before the timed calls, together with the
/// hand-written primal and gradient (`hand`): the calls take turns
/// ([`samples_each`]), so that every column of a row is measured under the same
/// load of this shared machine (timed one after the other, the same call's
/// median moved by up to 3x between them). With `params` `None`, the primal
/// only. `attr`, a call of the attribute form's derivative, takes its turn too;
/// its cost next to the gradient's is the ratio of their fastest calls (those no
/// other work interrupted, which move by 1-2% between runs).
fn jit<A, R>(
    ad: &Autodiff<A, R>,
    params: Option<&[Activity]>,
    args: Vec<Val>,
    attr: Option<&mut dyn FnMut()>,
    hand: Hand<'_>,
) -> Result<Jit, Error> {
    let (module, name) = (ad.module(), ad.name());
    let func = CompiledFunction::with_hosts(module, name, ad.hosts())?;
    let (mut pws, mut primal_args, mut out) = (Workspace::new(), args.clone(), Vec::new());
    func.call_into(&mut pws, &mut primal_args, &mut out)?;
    let primal_value = scalar(&out);
    let mut primal = || {
        func.call_into(&mut pws, black_box(&mut primal_args), &mut out)
            .expect("the primal ran once");
        black_box(&out);
    };

    let Some(params) = params else {
        let mut calls: Vec<&mut dyn FnMut()> = vec![&mut primal, hand.primal, hand.gradient];
        let has_written = hand.written.is_some();
        if let Some(w) = hand.written {
            calls.push(w);
        }
        let t = medians(&mut calls);
        return Ok(Jit {
            primal: t[0],
            primal_value,
            gradient: None,
            attr: None,
            hand_primal: t[1],
            hand_gradient: t[2],
            written_primal: has_written.then(|| t[3]),
        });
    };
    let grad = compiled_gradient(ad, params)?;
    // Borrowed arguments and shadows, made once: `gradient_args` copies nothing.
    let mut shadows = zero_shadows(&grad, &args);
    let mut borrowed: Vec<Arg<'_>> = args.iter().map(Arg::from).collect();
    let mut shadow_args: Vec<Arg<'_>> = shadows.iter_mut().map(|s| Arg::F64sMut(s)).collect();
    let (mut value, mut grads) = (Vec::new(), Vec::new());
    let mut ws = Workspace::new();
    let (mut gradient_value, mut tape_bytes) = (f64::NAN, 0);
    let mut gradient = || {
        tape_bytes = grad
            .gradient_args(
                &mut ws,
                black_box(&mut borrowed),
                &mut shadow_args,
                &[],
                &mut value,
                &mut grads,
            )
            .expect("the gradient ran once")
            .peak_bytes;
        gradient_value = scalar(&value);
        black_box(&grads);
    };
    let mut calls: Vec<&mut dyn FnMut()> =
        vec![&mut primal, hand.primal, &mut gradient, hand.gradient];
    let has_attr = attr.is_some();
    if let Some(a) = attr {
        calls.push(a);
    }
    let has_written = hand.written.is_some();
    if let Some(w) = hand.written {
        calls.push(w);
    }
    let s = samples_each(&mut calls);
    drop(calls);
    let fastest = |s: &[f64]| s.iter().copied().fold(f64::INFINITY, f64::min);
    let attr_ratio = has_attr.then(|| fastest(&s[4]) / fastest(&s[2]));
    let t: Vec<f64> = s.into_iter().map(|s| median(s) * 1e3).collect();
    let attr = attr_ratio.map(|ratio| (t[4], ratio));
    Ok(Jit {
        primal: t[0],
        primal_value,
        gradient: Some((t[2], gradient_value, tape_bytes)),
        attr,
        hand_primal: t[1],
        hand_gradient: t[3],
        written_primal: has_written.then(|| t[t.len() - 1]),
    })
}

/// Checks the compiled primal's and the timed gradient's values against `hand_value`
/// and makes the row (`compile` `None` when the gradient was not run).
fn row(
    program: &'static str,
    n: usize,
    jit: Jit,
    hand_value: f64,
    compile: Option<Duration>,
    attr_compile: Option<Duration>,
) -> Row {
    check(program, jit.primal_value, hand_value, &[]);
    let attr = jit.attr.map(|(time, vs_autodiff)| Attr {
        time,
        vs_autodiff,
        compile: attr_compile,
    });
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
        hand_primal: jit.hand_primal,
        hand_gradient: jit.hand_gradient,
        written_primal: jit.written_primal,
        attr,
        ir: None,
        ir_host: None,
    }
}

/// A program of one slice `x`, differentiated with respect to `x`; `derivative` is
/// its attribute form's `d_NAME`.
fn of_x<F: Callable<(Slice<f64>,), Output = Var>>(
    program: &'static str,
    ir_file: &'static str,
    traced: F,
    derivative: fn(&[f64], &mut [f64], f64) -> f64,
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

    // The attribute form: its first call, checked, then timed (the shadow
    // accumulates, as the autodiff form's does).
    let mut attr_dx = vec![0.0; n];
    let start = Instant::now();
    let attr_value = derivative(&x, &mut attr_dx, 1.0);
    let attr_compile = start.elapsed();
    check(program, attr_value, hand_value, &[(&attr_dx, &hand_dx)]);

    let mut attr = || {
        black_box(derivative(black_box(&x), &mut attr_dx, 1.0));
    };
    let args = vec![Val::F64s(x.clone())];
    let mut hand_dx2 = hand_dx.clone();
    let mut hp = || {
        black_box(hand_primal(black_box(&x)));
    };
    let mut hg = || {
        black_box(hand_gradient(black_box(&x), &mut hand_dx2));
    };
    let hand = Hand {
        primal: &mut hp,
        gradient: &mut hg,
        written: None,
    };
    let jit = jit(
        &ad,
        Some(&[Activity::Dup]),
        args.clone(),
        Some(&mut attr),
        hand,
    )?;
    let hand = Hand {
        primal: &mut hp,
        gradient: &mut hg,
        written: None,
    };
    let ir = ir_row(
        ir_file,
        program,
        args,
        &[Activity::Dup],
        hand,
        hand_value,
        Some(&hand_dx),
    )?;
    let mut row = row(
        program,
        n,
        jit,
        hand_value,
        Some(compile),
        Some(attr_compile),
    );
    row.ir = Some(ir);
    Ok(row)
}

/// `normalize` at size `n`: `x` duplicated, `w` constant. gradlift's gradient is
/// not run when its tape is predicted (`tape`) to exceed [`TAPE_CAP`].
fn normalize(n: usize, tape: Option<usize>) -> Result<Row, Error> {
    let (x, w) = suite::normalize_input(n);
    let mut hand_dx = vec![0.0; n];
    let hand_value = hand::normalize_gradient(&x, &w, &mut hand_dx);
    let run_gradient = tape.is_none_or(|t| t <= TAPE_CAP);
    let mut compile = None;
    let (mut attr_dx, mut attr_compile) = (vec![0.0; n], None);
    if run_gradient {
        let mut dx = vec![0.0; n];
        let start = Instant::now();
        let mut ad = autodiff("normalize", suite::normalize::<Var>)?;
        let (value, _) = ad.gradient((Duplicated(&x[..], &mut dx[..]), Const(&w[..])))?;
        compile = Some(start.elapsed());
        check("normalize", value, hand_value, &[(&dx, &hand_dx)]);
        // The tape is O(n^2) here (gigabytes): this first gradient's workspace is
        // freed before the timed one grows its own.
        static CALLED: AtomicBool = AtomicBool::new(false);
        let (value, first) = first_call(&CALLED, || attr::d_normalize(&x, &mut attr_dx, &w, 1.0));
        check("normalize", value, hand_value, &[(&attr_dx, &hand_dx)]);
        attr_compile = first;
    }
    let ad = autodiff("normalize", suite::normalize::<Var>)?;
    let args = vec![Val::F64s(x.clone()), Val::F64s(w.clone())];
    let params = [Activity::Dup, Activity::Const];
    let mut attr = || {
        black_box(attr::d_normalize(black_box(&x), &mut attr_dx, &w, 1.0));
    };
    let mut hand_dx2 = hand_dx.clone();
    let mut hp = || {
        black_box(hand::normalize(black_box(&x), black_box(&w)));
    };
    let mut hw = || {
        black_box(hand::normalize_as_written(black_box(&x), black_box(&w)));
    };
    let mut hg = || {
        black_box(hand::normalize_gradient(
            black_box(&x),
            black_box(&w),
            &mut hand_dx2,
        ));
    };
    let hand = Hand {
        primal: &mut hp,
        gradient: &mut hg,
        written: Some(&mut hw),
    };
    let jit = jit(
        &ad,
        run_gradient.then_some(&params[..]),
        args.clone(),
        Some(&mut attr),
        hand,
    )?;
    let hand = Hand {
        primal: &mut hp,
        gradient: &mut hg,
        written: None,
    };
    let ir = ir_row(
        "normalize.ir",
        "normalize",
        args,
        &params,
        hand,
        hand_value,
        Some(&hand_dx),
    )?;
    let mut row = row("normalize", n, jit, hand_value, compile, attr_compile);
    row.ir = Some(ir);
    Ok(row)
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

    // The attribute form: its first call, checked.
    let mut attr_d = [
        vec![0.0; p.w1.len()],
        vec![0.0; p.b1.len()],
        vec![0.0; p.w2.len()],
        vec![0.0; p.b2.len()],
    ];
    let attr_gradient = |d: &mut [Vec<f64>; 4]| {
        let [dw1, db1, dw2, db2] = d;
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
    };
    let start = Instant::now();
    let attr_value = attr_gradient(&mut attr_d);
    let attr_compile = start.elapsed();
    let pairs: Vec<(&[f64], &[f64])> = attr_d
        .iter()
        .zip(&h)
        .map(|(g, w)| (&g[..], &w[..]))
        .collect();
    check("mlp", attr_value, hand_value, &pairs);

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
    let mut attr = || {
        black_box(attr_gradient(&mut attr_d));
    };
    let mut hp = || {
        black_box(hand::mlp(black_box(&p.x), &p.w1, &p.b1, &p.w2, &p.b2));
    };
    let mut hw = || {
        black_box(hand::mlp_as_written(
            black_box(&p.x),
            &p.w1,
            &p.b1,
            &p.w2,
            &p.b2,
        ));
    };
    let mut hg = || {
        black_box(hand_gradient(&mut h));
    };
    let hand = Hand {
        primal: &mut hp,
        gradient: &mut hg,
        written: Some(&mut hw),
    };
    let jit = jit(&ad, Some(&params), args.clone(), Some(&mut attr), hand)?;
    // The IR version takes the labels (`b mod 10`) as a slice of its own.
    let mut ir_args = args;
    ir_args.push(Val::I64s((0..MLP_BATCH as i64).map(|b| b % 10).collect()));
    let mut ir_params = params.to_vec();
    ir_params.push(Activity::Const);
    let hand = Hand {
        primal: &mut hp,
        gradient: &mut hg,
        written: None,
    };
    let ir = ir_row(
        "mlp.ir",
        "mlp",
        ir_args.clone(),
        &ir_params,
        hand,
        hand_value,
        None,
    )?;
    // The same with both matrix-vector products a host gemv with a host rule
    // (`examples/host/mlp_gemv.ir`, `examples/host_gemv.rs`).
    let hand = Hand {
        primal: &mut hp,
        gradient: &mut hg,
        written: None,
    };
    let host = ir_row_of(
        "host/mlp_gemv.ir (host gemv)",
        gemv::MLP_GEMV_IR,
        gemv::hosts(),
        Instant::now(),
        "mlp",
        ir_args,
        &ir_params,
        hand,
        hand_value,
        None,
    )?;
    let mut row = row(
        "mlp",
        MLP_BATCH,
        jit,
        hand_value,
        Some(compile),
        Some(attr_compile),
    );
    row.ir = Some(ir);
    row.ir_host = Some(host);
    Ok(row)
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

    // The attribute form: its first call, checked.
    let mut attr_dp = vec![0.0; p.len()];
    let start = Instant::now();
    let attr_value = attr::d_ode(&p, &mut attr_dp, steps, 1.0);
    let attr_compile = start.elapsed();
    check("ode", attr_value, hand_value, &[(&attr_dp, &hand_dp)]);

    let args = vec![Val::F64s(p.clone()), Val::I64(ODE_STEPS)];
    let mut attr = || {
        black_box(attr::d_ode(black_box(&p), &mut attr_dp, steps, 1.0));
    };
    let params = [Activity::Dup, Activity::Const];
    let mut hp = || {
        black_box(hand::ode(black_box(&p), black_box(steps)));
    };
    let mut hg = || {
        black_box(hand::ode_gradient(
            black_box(&p),
            steps,
            &mut hand_dp,
            &mut scratch,
        ));
    };
    let hand = Hand {
        primal: &mut hp,
        gradient: &mut hg,
        written: None,
    };
    let jit = jit(&ad, Some(&params), args, Some(&mut attr), hand)?;
    // The IR version takes the six numbers as scalars (all active) and T.
    let mut ir_args: Vec<Val> = p.iter().map(|&v| Val::F64(v)).collect();
    ir_args.push(Val::I64(ODE_STEPS));
    let mut ir_params = vec![Activity::Active; p.len()];
    ir_params.push(Activity::Const);
    let hand = Hand {
        primal: &mut hp,
        gradient: &mut hg,
        written: None,
    };
    let ir = ir_row("ode.ir", "ode", ir_args, &ir_params, hand, hand_value, None)?;
    let mut row = row(
        "ode",
        steps,
        jit,
        hand_value,
        Some(compile),
        Some(attr_compile),
    );
    row.ir = Some(ir);
    Ok(row)
}

/// Enzyme's gradient / primal ratios (issue 17), the reference marks of the
/// ratios plot (`None`: no measurement).
const ENZYME: [(&str, Option<f64>); 7] = [
    ("sumsq", Some(1.64)),
    ("rosenbrock", Some(2.34)),
    ("logsumexp", Some(1.83)),
    ("normalize", None),
    ("mlp", Some(3.67)),
    ("ode", Some(2.45)),
    ("branchy", Some(2.94)),
];

/// The gradient times (size, median ms) of the scaling plot: `normalize` at n and
/// `ode` at T steps, each at a quarter, a half, one and two times its suite size.
struct Sweep {
    normalize: Vec<(f64, f64)>,
    ode: Vec<(f64, f64)>,
}

/// The compiled gradient of `ad`'s function with the activities `params`.
fn compiled_gradient<A, R>(
    ad: &Autodiff<A, R>,
    params: &[Activity],
) -> Result<CompiledGradient, Error> {
    let (module, name) = (ad.module(), ad.name());
    let id = module
        .func_by_name(name)
        .ok_or_else(|| Error::NoSuchFunction(name.to_string()))?;
    let config = RuleConfig::default_for(module.sig(id)).with_params(params);
    CompiledGradient::with_config(module, name, &config, ad.hosts())
}

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

/// The median ms ([`timing::measure`]) of the gradient of `ad`'s function with
/// the activities `params` at `args`, on borrowed arguments and shadows made
/// before the timed calls (as in [`jit`]), its value checked against `hand_value`.
fn gradient_ms<A, R>(
    ad: &Autodiff<A, R>,
    params: &[Activity],
    args: &[Val],
    hand_value: f64,
) -> Result<f64, Error> {
    let grad = compiled_gradient(ad, params)?;
    let mut shadows = zero_shadows(&grad, args);
    let mut borrowed: Vec<Arg<'_>> = args.iter().map(Arg::from).collect();
    let mut shadow_args: Vec<Arg<'_>> = shadows.iter_mut().map(|s| Arg::F64sMut(s)).collect();
    let (mut value, mut grads, mut ws) = (Vec::new(), Vec::new(), Workspace::new());
    let mut gradient = |value: &mut Vec<Val>| {
        grad.gradient_args(
            &mut ws,
            black_box(&mut borrowed),
            &mut shadow_args,
            &[],
            value,
            &mut grads,
        )
    };
    gradient(&mut value)?;
    check(ad.name(), scalar(&value), hand_value, &[]);
    Ok(timing::measure(|| {
        gradient(&mut value).expect("the gradient ran once");
        black_box(&value);
    }))
}

/// The [`Sweep`]: `normalize` (`x` duplicated, `w` constant) and `ode` (the six
/// parameters duplicated), each traced once and timed at four sizes.
fn sweep() -> Result<Sweep, Error> {
    let sizes = |n: usize| [n / 4, n / 2, n, 2 * n];
    let ad = autodiff("normalize", suite::normalize::<Var>)?;
    let mut normalize = Vec::new();
    for n in sizes(NORMALIZE_N) {
        let (x, w) = suite::normalize_input(n);
        let hand_value = hand::normalize(&x, &w);
        let args = [Val::F64s(x), Val::F64s(w)];
        let ms = gradient_ms(&ad, &[Activity::Dup, Activity::Const], &args, hand_value)?;
        normalize.push((n as f64, ms));
    }
    let ad = autodiff("ode", suite::ode::<Var>)?;
    let p = suite::ode_input();
    let mut ode = Vec::new();
    for steps in sizes(ODE_STEPS as usize) {
        let args = [Val::F64s(p.clone()), Val::I64(steps as i64)];
        let hand_value = hand::ode(&p, steps);
        let ms = gradient_ms(&ad, &[Activity::Dup, Activity::Const], &args, hand_value)?;
        ode.push((steps as f64, ms));
    }
    Ok(Sweep { normalize, ode })
}

/// Writes `docs/img/suite_ratios.svg` (per program, gradient / hand gradient and
/// gradient / primal as bars, Enzyme's gradient / primal as marks) from `rows`,
/// and `docs/img/suite_scaling.svg` (the [`Sweep`]), and returns their paths.
fn write_plots(rows: &[Row], sweep: &Sweep) -> Result<[PathBuf; 2], Box<dyn std::error::Error>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/img");
    std::fs::create_dir_all(&dir)?;
    let paths = [dir.join("suite_ratios.svg"), dir.join("suite_scaling.svg")];
    let with_path = |p: &Path, e: Box<dyn std::error::Error>| format!("{}: {e}", p.display());
    plot_ratios(rows, &paths[0]).map_err(|e| with_path(&paths[0], e))?;
    plot_scaling(sweep, &paths[1]).map_err(|e| with_path(&paths[1], e))?;
    Ok(paths)
}

/// The ratios plot (see [`write_plots`]): each program's first row (`normalize` at
/// its suite size).
fn plot_ratios(rows: &[Row], path: &Path) -> Result<(), Box<dyn std::error::Error>> {
    // (program, gradient / hand gradient, gradient / primal, Enzyme's).
    let bars: Vec<(&str, f64, f64, Option<f64>)> = ENZYME
        .iter()
        .filter_map(|&(program, enzyme)| {
            let r = rows.iter().find(|r| r.program == program)?;
            let g = r.gradient.as_ref()?;
            Some((program, g.time / r.hand_gradient, g.time / r.primal, enzyme))
        })
        .collect();
    let top = bars
        .iter()
        .map(|b| b.1.max(b.2).max(b.3.unwrap_or(0.0)))
        .fold(1.0, f64::max)
        * 1.15;
    let (hand_color, primal_color) = (RGBColor(70, 130, 180), RGBColor(230, 145, 56));

    let root = SVGBackend::new(path, (900, 480)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "gradlift's gradient cost on the suite (lower is better)",
            ("sans-serif", 20),
        )
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(50)
        .build_cartesian_2d(-0.5..bars.len() as f64 - 0.5, 0.0..top)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(bars.len())
        .x_label_formatter(&|x| {
            let i = x.round();
            let name = bars.get(i as usize).map(|b| b.0);
            name.filter(|_| (x - i).abs() < 1e-6)
                .unwrap_or("")
                .to_string()
        })
        .x_desc("program")
        .y_desc("time ratio")
        .draw()?;

    // Each bar's value inside its foot, clear of Enzyme's marks (all above 1.6).
    let label = ("sans-serif", 11)
        .into_font()
        .color(&WHITE)
        .pos(Pos::new(HPos::Center, VPos::Bottom));
    for (offset, color, name) in [
        (-0.2, hand_color, "gradient / hand-written gradient"),
        (0.2, primal_color, "gradient / primal"),
    ] {
        let value = |b: &(&str, f64, f64, Option<f64>)| if offset < 0.0 { b.1 } else { b.2 };
        let bar = |i: usize, v: f64| {
            let x = i as f64 + offset;
            Rectangle::new([(x - 0.18, 0.0), (x + 0.18, v)], color.filled())
        };
        chart
            .draw_series(bars.iter().enumerate().map(|(i, b)| bar(i, value(b))))?
            .label(name)
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 14, y + 5)], color.filled()));
        chart.draw_series(bars.iter().enumerate().map(|(i, b)| {
            let v = value(b);
            EmptyElement::at((i as f64 + offset, 0.0))
                + Text::new(format!("{v:.2}"), (0, -5), label.clone())
        }))?;
    }
    chart
        .draw_series(bars.iter().enumerate().filter_map(|(i, b)| {
            let x = i as f64 + 0.2;
            let e = b.3?;
            Some(PathElement::new(
                vec![(x - 0.25, e), (x + 0.25, e)],
                BLACK.stroke_width(3),
            ))
        }))?
        .label("Enzyme's gradient / primal")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 14, y)], BLACK.stroke_width(3)));
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK)
        .draw()?;
    root.present()?;
    Ok(())
}

/// The scaling plot (see [`write_plots`]): one panel per program, the times and
/// the line `c n` fitted to them (least squares through the origin).
fn plot_scaling(sweep: &Sweep, path: &Path) -> Result<(), Box<dyn std::error::Error>> {
    let root = SVGBackend::new(path, (900, 420)).into_drawing_area();
    root.fill(&WHITE)?;
    let root = root.titled(
        "gradlift's gradient time against the size: linear (O(n))",
        ("sans-serif", 20),
    )?;
    let panels = root.split_evenly((1, 2));
    let series = [
        ("normalize", "n", &sweep.normalize, RGBColor(70, 130, 180)),
        ("ode", "steps T", &sweep.ode, RGBColor(230, 145, 56)),
    ];
    for (area, (program, x_desc, points, color)) in panels.iter().zip(series) {
        let x_max = points.iter().fold(0.0, |m, p| p.0.max(m));
        let y_max = points.iter().fold(0.0, |m, p| p.1.max(m));
        let c = points.iter().map(|p| p.0 * p.1).sum::<f64>()
            / points.iter().map(|p| p.0 * p.0).sum::<f64>();
        let mut chart = ChartBuilder::on(area)
            .caption(program, ("sans-serif", 16))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(55)
            .build_cartesian_2d(0.0..x_max * 1.08, 0.0..y_max.max(c * x_max) * 1.15)?;
        chart
            .configure_mesh()
            .x_labels(6)
            .x_label_formatter(&|&x| match x {
                0.0 => "0".to_string(),
                _ => format!("{}k", x / 1e3),
            })
            .x_desc(x_desc)
            .y_desc("gradient ms (median)")
            .draw()?;
        chart
            .draw_series(LineSeries::new(
                points.iter().copied(),
                color.stroke_width(2),
            ))?
            .label("measured")
            .legend(move |(x, y)| Circle::new((x + 7, y), 4, color.filled()));
        chart.draw_series(points.iter().map(|&p| Circle::new(p, 4, color.filled())))?;
        // Dashed, over the measured line.
        let fit = [(0.0, 0.0), (x_max, c * x_max)];
        chart
            .draw_series(DashedLineSeries::new(fit, 6, 4, BLACK.into()))?
            .label("c n (least squares through 0)")
            .legend(|(x, y)| DashedPathElement::new([(x, y), (x + 14, y)], 4, 3, BLACK));
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.9))
            .border_style(BLACK)
            .draw()?;
    }
    root.present()?;
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
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
                "sumsq.ir",
                suite::sumsq::<Var>,
                attr::d_sumsq,
                suite::sumsq_input(N),
                hand::sumsq,
                hand::sumsq_gradient,
            )
        }),
        ("rosenbrock", |_| {
            of_x(
                "rosenbrock",
                "rosenbrock.ir",
                suite::rosenbrock::<Var>,
                attr::d_rosenbrock,
                suite::rosenbrock_input(N),
                hand::rosenbrock,
                hand::rosenbrock_gradient,
            )
        }),
        ("logsumexp", |_| {
            of_x(
                "logsumexp",
                "logsumexp.ir",
                suite::logsumexp::<Var>,
                attr::d_logsumexp,
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
                "branchy.ir",
                suite::branchy::<Var>,
                attr::d_branchy,
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
    // The plots take every program: not made when an argument keeps some only.
    let sweep = if only.is_empty() {
        eprintln!("scaling (normalize, ode)...");
        Some(sweep()?)
    } else {
        None
    };
    println!(
        "| program | n | primal ms | gradient ms | ratio | hand primal ms | hand gradient ms | primal vs hand | vs hand | compile ms | tape bytes | vs autodiff |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
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
            "| {} | {} | {:.4} | {gradient} | {ratio} | {:.4} | {:.4} | {:.2} | {vs_hand} | {compile} | {tape} | |",
            r.program,
            r.n,
            r.primal,
            r.hand_primal,
            r.hand_gradient,
            r.primal / r.hand_primal,
        );
        // The attribute form: its gradient, its first call, and that gradient over
        // the autodiff form's; its primal is the plain Rust function, its tape is
        // not reported by `d_NAME`.
        let dash = || "-".to_string();
        let (gradient, vs_hand, compile, vs_autodiff) = match &r.attr {
            Some(a) => (
                format!("{:.4}", a.time),
                format!("{:.2}", a.time / r.hand_gradient),
                a.compile
                    .map_or_else(dash, |c| format!("{:.1}", c.as_secs_f64() * 1e3)),
                format!("{:.2}", a.vs_autodiff),
            ),
            None => (dash(), dash(), dash(), dash()),
        };
        println!(
            "| {} (attribute) | {} | - | {gradient} | - | {:.4} | {:.4} | - | {vs_hand} | {compile} | - | {vs_autodiff} |",
            r.program, r.n, r.hand_primal, r.hand_gradient,
        );
    }
    println!(
        "\nThrough the command line's pipeline (`examples/ir`, parsed, verified, optimised, derived, compiled: what `gradlift grad` runs), timed in turns with the hand-written code:\n"
    );
    println!(
        "| program | file | primal ms | gradient ms | ratio | hand primal ms | hand gradient ms | primal vs hand | vs hand | compile ms | tape bytes |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for r in &rows {
        for ir in r.ir.iter().chain(&r.ir_host) {
            println!(
                "| {} | {} | {:.4} | {:.4} | {:.2} | {:.4} | {:.4} | {:.2} | {:.2} | {:.1} | {} |",
                r.program,
                ir.file,
                ir.primal,
                ir.gradient,
                ir.gradient / ir.primal,
                ir.hand_primal,
                ir.hand_gradient,
                ir.primal / ir.hand_primal,
                ir.gradient / ir.hand_gradient,
                ir.compile.as_secs_f64() * 1e3,
                ir.tape_bytes,
            );
        }
    }
    if rows.iter().any(|r| r.written_primal.is_some()) {
        println!(
            "\nThe primal against rustc's primal of the program as written (`hand::normalize_as_written`, `hand::mlp_as_written`: the suite program's operations in its order), timed in the same turns as the row above:\n"
        );
        println!(
            "| program | n | primal ms | rustc as written ms | primal vs as written | hand primal ms | as written vs hand |"
        );
        println!("|---|---:|---:|---:|---:|---:|---:|");
        for r in &rows {
            if let Some(w) = r.written_primal {
                println!(
                    "| {} | {} | {:.4} | {w:.4} | {:.2} | {:.4} | {:.2} |",
                    r.program,
                    r.n,
                    r.primal,
                    r.primal / w,
                    r.hand_primal,
                    w / r.hand_primal,
                );
            }
        }
    }
    if skipped {
        println!(
            "\n`-`: gradlift's gradients (autodiff and attribute) not run, the tape predicted over {} GiB.",
            TAPE_CAP >> 30
        );
    }
    println!(
        "\n`(attribute)`: the program as plain Rust under `#[autodiff_reverse]` (`benches/attr.rs`); \
         `gradient ms` is its `d_NAME`, `compile ms` its first call (`-`: made by an earlier row), \
         `vs autodiff` its fastest call over the row above's fastest gradient, \
         the two timed in turns.\n\
         Every gradient run checked against the hand gradient to 1e-8 relative (`mlp.ir` and `ode.ir`: the value); \
         every column of a row timed in turns with the others (medians); {:.1} s in all.",
        start.elapsed().as_secs_f64()
    );
    match sweep {
        Some(sweep) => {
            for path in write_plots(&rows, &sweep)? {
                println!("Wrote {}", path.display());
            }
        }
        None => println!("The plots (docs/img/suite_*.svg) are written by a run of every program."),
    }
    Ok(())
}
