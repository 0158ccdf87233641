//! Forward mode and second order on the benchmark suite (`BENCHMARKS.md`, "Forward
//! mode and second order") under criterion, against num-dual (the forward-mode
//! peer: the same programs as generic Rust on its dual numbers,
//! `benches/forward_programs.rs`).
//!
//! ```sh
//! cargo bench --bench forward                      # everything (about 4 minutes on two cores)
//! GRADLIFT_BENCH_SLOW=1 cargo bench --bench forward -- hessian/rosenbrock-1000  # and num-dual at n = 1,000
//! cargo bench --bench forward -- 'jvp/width8'      # one kind, every program
//! cargo bench --bench forward -- rosenbrock        # one program (a regex on the ids)
//! cargo bench --bench forward -- --test            # each benchmark run once: the checks
//! ```
//!
//! The ids are `<kind>/<program>/<what>`, the programs and their sizes those of
//! the suite ([`gradlift::suite`]: `N`, `NORMALIZE_N`, `MLP_BATCH`, `ODE_STEPS`)
//! with the suite's activities (`mlp`'s `X`, `normalize`'s `w` and `ode`'s steps
//! constant):
//!
//! | id | what one iteration is |
//! |---|---|
//! | `jvp/width1/<program>/primal` | the compiled primal ([`CompiledFunction::call_into`](gradlift::CompiledFunction::call_into)) |
//! | `jvp/width1/<program>/gradlift` | one width-1 JVP along one direction ([`CompiledJvp::jvp_args`](gradlift::CompiledJvp::jvp_args): borrowed arguments and tangents, nothing copied) |
//! | `jvp/width1/<program>/gradlift-x8` | eight width-1 JVPs, one along each of eight directions |
//! | `jvp/width1/<program>/num-dual` | the program on num-dual's `Dual64` along the direction (its inputs made before the loop) |
//! | `jvp/width8/<program>/gradlift` | one width-8 JVP along the eight directions |
//! | `jvp/width8/<program>/num-dual` | the program on num-dual's `DualSVec64<8>` along the eight directions |
//! | `hvp/<program>/primal` | the primal again, beside the HVP |
//! | `hvp/<program>/gradlift` | one width-1 Hessian-vector product, zero-copy (the two compiled functions of [`CompiledHvp`](gradlift::CompiledHvp) called on buffers made once: `HvpCall` in `benches/forward_programs.rs`) |
//! | `hvp/<program>/gradlift-api` | the same through [`CompiledHvp::hvp`](gradlift::CompiledHvp::hvp), which copies the arguments and allocates its shadows and results |
//! | `hessian/<what>/gradlift-w1`, `gradlift-w8` | a dense Hessian by [`CompiledHvp::hessian`](gradlift::CompiledHvp::hessian), width 1 and 8 |
//! | `hessian/<what>/num-dual` | a dense Hessian by `num_dual::hessian` (`Dual2Vec<f64, Dyn>`), its inputs and closure made before the loop |
//!
//! The Hessians: `rosenbrock` at n = 100 and n = 1,000, and the `mlp` loss at a
//! reduced size ([`forward_programs::HESSIAN_MLP`]: 8 hidden units, batch 4, 354
//! parameters; num-dual's dense Hessian of the suite's network, 2,762 parameters,
//! would take hours: `BENCHMARKS.md` says what was measured and why), and
//! gradlift's alone of the suite's network at batch 1. num-dual's Hessian of
//! rosenbrock at n = 1,000 takes about a minute per call, ten minutes for
//! criterion's ten samples: it runs only with `GRADLIFT_BENCH_SLOW=1` in the
//! environment. Where num-dual's dense Hessian is not computed, gradlift's is
//! checked by `uᵀHv` on four pairs of directions against num-dual's
//! `HyperDual64` sweeps.
//!
//! Before anything of a program is timed, `forward_programs::check` checks it:
//! gradlift's primal against num-dual's `f64` evaluation of the same code, every
//! JVP (width 1, each lane of width 8, num-dual's) against the reverse-mode
//! gradient's dot product with its direction (to 1e-12 of the size of the dot
//! product's terms, `forward_programs::close_dot`: logsumexp's cancels to 1/3000
//! of them), the HVP's gradient against reverse mode's and its `vᵀHv` against
//! num-dual's `HyperDual64` (1e-10), and the zero-copy HVP against
//! `CompiledHvp::hvp` (bit for bit); every Hessian is checked against num-dual's
//! (relative 1e-10, entry by entry) before either is timed.
//!
//! Samples are few and short (10 samples, 0.5 s warm-up, 2 s of measurement; the
//! Hessians of num-dual, seconds each, flat sampling): see [`config`].

use std::hint::black_box;
use std::time::Duration;

use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, Criterion, SamplingMode, criterion_group, criterion_main};
use gradlift::Workspace;
use gradlift::suite::{MLP_BATCH, MLP_HIDDEN, N, NORMALIZE_N, ODE_STEPS};

mod forward_programs;
use forward_programs::{
    Callers, Directions, HESSIAN_MLP, NdInputs, Program, check, check_hessian,
    check_hessian_projected, nd_hessian,
};

/// The criterion settings of every group: few, short samples.
fn config() -> Criterion {
    Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
}

type Group<'a> = BenchmarkGroup<'a, WallTime>;

/// The suite's programs at their sizes.
fn programs() -> Vec<Program> {
    vec![
        Program::new("sumsq", N),
        Program::new("rosenbrock", N),
        Program::new("logsumexp", N),
        Program::new("normalize", NORMALIZE_N),
        Program::new("mlp", MLP_BATCH),
        Program::new("ode", ODE_STEPS as usize),
        Program::new("branchy", N),
    ]
}

fn bench(group: &mut Group<'_>, id: &str, call: &mut dyn FnMut()) {
    group.bench_function(id, |b| b.iter(&mut *call));
}

/// `jvp/width1`, `jvp/width8` and `hvp`, every program.
fn forward(c: &mut Criterion) {
    for p in programs() {
        let compiled = p.compile();
        let dirs = Directions::new(&p.dual_lens());
        let nd_in = NdInputs::new(&p.flat(), &dirs);
        check(&p, &compiled, &dirs, &nd_in);
        let mut calls = Callers::new(&p, &compiled, &dirs, &nd_in);
        let name = p.name;

        let mut g = c.benchmark_group(format!("jvp/width1/{name}"));
        bench(&mut g, "primal", &mut calls.primal);
        bench(&mut g, "gradlift", &mut calls.jvp1);
        bench(&mut g, "gradlift-x8", &mut calls.jvp1x8);
        bench(&mut g, "num-dual", &mut calls.nd_jvp1);
        g.finish();

        let mut g = c.benchmark_group(format!("jvp/width8/{name}"));
        bench(&mut g, "gradlift", &mut calls.jvp8);
        bench(&mut g, "num-dual", &mut calls.nd_jvp8);
        g.finish();

        let mut g = c.benchmark_group(format!("hvp/{name}"));
        bench(&mut g, "primal", &mut calls.primal);
        bench(&mut g, "gradlift", &mut calls.hvp1);
        let (mut ws, v) = (Workspace::new(), dirs.vals(0, &p.dual));
        let mut api = || {
            black_box(
                compiled
                    .hvp1
                    .hvp(&mut ws, black_box(&p.args), &v)
                    .expect("ran"),
            );
        };
        bench(&mut g, "gradlift-api", &mut api);
        g.finish();
    }
}

/// `hessian`: rosenbrock at 100 and 1,000, the reduced mlp ([`HESSIAN_MLP`]),
/// and gradlift alone on the suite's mlp at batch 1.
fn hessian(c: &mut Criterion) {
    let slow = std::env::var_os("GRADLIFT_BENCH_SLOW").is_some_and(|v| v == "1");
    let (batch, hidden) = HESSIAN_MLP;
    let cases = [
        (
            "rosenbrock-100".to_string(),
            Program::new("rosenbrock", 100),
            true,
        ),
        (
            "rosenbrock-1000".to_string(),
            Program::new("rosenbrock", 1000),
            slow,
        ),
        (
            format!("mlp-hidden{hidden}-batch{batch}"),
            Program::mlp(batch, hidden),
            true,
        ),
        (
            format!("mlp-hidden{MLP_HIDDEN}-batch1"),
            Program::new("mlp", 1),
            false,
        ),
    ];
    for (what, p, nd) in cases {
        let (h1, h8) = (p.compile_hvp(1), p.compile_hvp(8));
        let flat = p.flat();
        let mut ws = Workspace::new();
        let want = nd.then(|| nd_hessian(&p.nd, &flat).1);
        for (width, h) in [(1, &h1), (8, &h8)] {
            let got = h.hessian(&mut ws, &p.args).expect("the Hessian runs");
            let what = format!("{what}, width {width}");
            match &want {
                Some(want) => check_hessian(&what, &got.data, want),
                None => {
                    check_hessian_projected(&what, &p, &got.data, &Directions::new(&p.dual_lens()))
                }
            };
        }
        let mut g = c.benchmark_group(format!("hessian/{what}"));
        let mut w1 = || {
            black_box(h1.hessian(&mut ws, black_box(&p.args)).expect("ran"));
        };
        bench(&mut g, "gradlift-w1", &mut w1);
        let mut ws = Workspace::new();
        let mut w8 = || {
            black_box(h8.hessian(&mut ws, black_box(&p.args)).expect("ran"));
        };
        bench(&mut g, "gradlift-w8", &mut w8);
        if nd {
            // Tens of milliseconds to a minute per call: flat sampling.
            g.sampling_mode(SamplingMode::Flat);
            let mut nd = || {
                black_box(nd_hessian(&p.nd, black_box(&flat)));
            };
            bench(&mut g, "num-dual", &mut nd);
        }
        g.finish();
    }
}

criterion_group! {
    name = benches;
    config = config();
    targets = forward, hessian
}
criterion_main!(benches);
