//! Forward mode and second order on the benchmark suite, against num-dual: the
//! tables of `BENCHMARKS.md`, "Forward mode and second order".
//!
//! The first table: for each program of the suite at its size, with the suite's
//! activities, the compiled primal, one width-1 JVP ([`gradlift::CompiledJvp::jvp_args`]),
//! eight width-1 JVPs along eight directions, one width-8 JVP along the same
//! eight, and one width-1 Hessian-vector product (zero-copy: `HvpCall` in
//! `benches/forward_programs.rs`), all timed in turns ([`timing::samples_each`]:
//! one call of each per round, medians), and num-dual's forward sweeps of the
//! same program (`Dual64`, `DualSVec64<8>`) in the same rounds.
//!
//! The second table: dense Hessians ([`CompiledHvp::hessian`], width 1 and 8)
//! against num-dual's (`num_dual::hessian` on `Dual2Vec<f64, Dyn>`; at n = 100 also
//! its statically sized `Dual2SVec64<100>`, and its `Gradients` trait on `Dyn`,
//! n^2 sweeps of `HyperDual64`), for rosenbrock at n = 100 and 1,000 and for the
//! mlp loss at a reduced size ([`forward_programs::HESSIAN_MLP`]: 8 hidden units,
//! batch 4, 354 parameters; `suite::mlp`'s code with the hidden size a parameter),
//! where num-dual's dense Hessian of the suite's network would take hours; and
//! gradlift's alone of the suite's network (2,762 parameters) at batch 1.
//!
//! Every program is checked before it is timed (`forward_programs::check`: values
//! against num-dual's, JVPs against the gradient's dot product with the direction
//! to 1e-12 of the size of its terms, the HVP against reverse mode and num-dual); every Hessian
//! against num-dual's to 1e-10 relative (entry by entry where num-dual's dense
//! Hessian is computed, by `uᵀHv` on four pairs of directions where it is not).
//!
//! ```sh
//! cargo run --release --example forward_suite             # both tables (about 15 s)
//! cargo run --release --example forward_suite -- --slow   # and the slow Hessians (about 70 s)
//! cargo run --release --example forward_suite -- mlp      # the programs whose name contains `mlp`
//! ```
//!
//! `--slow` adds num-dual's Hessians of rosenbrock at n = 1,000 (about a minute
//! each) and of an mlp of 16 hidden units (698 parameters), and gradlift's of the
//! suite's mlp at its batch of 64; without it they are `-` or left out, and the
//! Hessians num-dual does not compute are checked by `uᵀHv`. A call that takes
//! more than a second is timed once.

use std::time::Instant;

use gradlift::suite::{MLP_BATCH, MLP_HIDDEN, N, NORMALIZE_N, ODE_STEPS};
use gradlift::{CompiledHvp, Workspace};

/// The timing helpers of `examples/suite.rs`.
#[path = "../benches/timing.rs"]
mod timing;
use timing::{fastest_tenth, measure, median, samples_each};

/// The programs in forward mode and on num-dual, their checks and timed calls
/// (shared with `benches/forward.rs`).
#[path = "../benches/forward_programs.rs"]
mod forward_programs;
use forward_programs::{
    Callers, Checked, Directions, HESSIAN_MLP, NdInputs, Program, STACK, WIDTH, check,
    check_hessian, check_hessian_projected, nd_hessian, nd_hessian_static, nd_hessian_sweeps,
};

/// The times of a row of the first table (ms).
#[derive(Clone, Copy)]
struct Times {
    primal: f64,
    jvp1: f64,
    jvp1x8: f64,
    jvp8: f64,
    hvp: f64,
    nd_jvp1: f64,
    nd_jvp8: f64,
}

impl Times {
    fn new(t: [f64; 7]) -> Times {
        let [primal, jvp1, jvp1x8, jvp8, hvp, nd_jvp1, nd_jvp8] = t;
        Times {
            primal,
            jvp1,
            jvp1x8,
            jvp8,
            hvp,
            nd_jvp1,
            nd_jvp8,
        }
    }
}

/// A row of the first table.
struct Row {
    name: &'static str,
    n: usize,
    /// Medians.
    median: Times,
    /// Means of the fastest tenth.
    fastest: Times,
    checked: Checked,
}

/// Checks `p` and times its calls in turns.
fn row(p: &Program) -> Row {
    let compiled = p.compile();
    let dirs = Directions::new(&p.dual_lens());
    let nd_in = NdInputs::new(&p.flat(), &dirs);
    let checked = check(p, &compiled, &dirs, &nd_in);
    let mut c = Callers::new(p, &compiled, &dirs, &nd_in);
    let samples = samples_each(&mut [
        &mut c.primal,
        &mut c.jvp1,
        &mut c.jvp1x8,
        &mut c.jvp8,
        &mut c.hvp1,
        &mut c.nd_jvp1,
        &mut c.nd_jvp8,
    ]);
    let times = |f: fn(&[f64]) -> f64| {
        let t: Vec<f64> = samples.iter().map(|s| f(s) * 1e3).collect();
        Times::new(t.try_into().expect("seven calls timed"))
    };
    Row {
        name: p.name,
        n: p.n,
        median: times(|s| median(s.to_vec())),
        fastest: times(fastest_tenth),
        checked,
    }
}

/// The time of `f` in ms: one call if it takes more than a second, else
/// [`measure`]'s median. Returns the first call's result too.
fn time_slow<T>(mut f: impl FnMut() -> T) -> (f64, T) {
    let start = Instant::now();
    let first = f();
    let t = start.elapsed().as_secs_f64();
    if t > 1.0 {
        (t * 1e3, first)
    } else {
        (
            measure(|| {
                std::hint::black_box(f());
            }),
            first,
        )
    }
}

/// A row of the Hessian table (times in ms; `None`: not run).
struct HessianRow {
    what: String,
    coords: usize,
    w1: f64,
    w8: f64,
    nd: Option<f64>,
    nd_static: Option<f64>,
    nd_sweeps: Option<f64>,
    /// How the Hessians were checked and the largest relative error.
    checked: String,
}

/// The dense Hessians of `p`: gradlift's at width 1 and 8, num-dual's in the
/// forms asked for (each `true`), checked.
fn hessians(what: &str, p: &Program, nd: bool, nd_static: bool, nd_sweeps: bool) -> HessianRow {
    let (h1, h8): (CompiledHvp, CompiledHvp) = (p.compile_hvp(1), p.compile_hvp(WIDTH as u32));
    let mut ws = Workspace::new();
    let flat = p.flat();
    let (w1, g1) = time_slow(|| h1.hessian(&mut ws, &p.args).expect("the Hessian runs"));
    let (w8, g8) = time_slow(|| h8.hessian(&mut ws, &p.args).expect("the Hessian runs"));
    assert!(
        g1.data
            .iter()
            .zip(&g8.data)
            .all(|(a, b)| a.to_bits() == b.to_bits()),
        "{what}: the width-8 Hessian differs from the width-1 one"
    );
    let mut worst = 0.0f64;
    let mut how = Vec::new();
    let mut nd_time = None;
    if nd {
        let (t, (_, want)) = time_slow(|| nd_hessian(&p.nd, &flat));
        worst = worst.max(check_hessian(what, &g1.data, &want));
        how.push("entries vs num-dual");
        nd_time = Some(t);
    }
    let mut static_time = None;
    if nd_static {
        assert_eq!(flat.len(), 100, "the static form is compiled for n = 100");
        let (nd_p, x) = (p.nd.clone(), flat.clone());
        let (t, (_, want)) = std::thread::Builder::new()
            .stack_size(STACK)
            .spawn(move || time_slow(|| nd_hessian_static::<100>(&nd_p, &x)))
            .expect("a thread")
            .join()
            .expect("num-dual's static Hessian runs");
        worst = worst.max(check_hessian(what, &g1.data, &want));
        static_time = Some(t);
    }
    let mut sweeps_time = None;
    if nd_sweeps {
        let (t, (_, want)) = time_slow(|| nd_hessian_sweeps(&p.nd, &flat));
        worst = worst.max(check_hessian(what, &g1.data, &want));
        sweeps_time = Some(t);
    }
    if how.is_empty() && !nd_static && !nd_sweeps {
        let dirs = Directions::new(&p.dual_lens());
        worst = worst.max(check_hessian_projected(what, p, &g1.data, &dirs));
        how.push("uᵀHv vs num-dual");
    } else if how.is_empty() {
        how.push("entries vs num-dual");
    }
    HessianRow {
        what: what.to_string(),
        coords: flat.len(),
        w1,
        w8,
        nd: nd_time,
        nd_static: static_time,
        nd_sweeps: sweeps_time,
        checked: format!("{} ({worst:.1e})", how.join(", ")),
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let slow = args.iter().any(|a| a == "--slow");
    let only = args
        .iter()
        .find(|a| !a.starts_with("--"))
        .cloned()
        .unwrap_or_default();
    let start = Instant::now();

    let programs: [(&'static str, usize); 8] = [
        ("sumsq", N),
        ("rosenbrock", N),
        ("logsumexp", N),
        ("normalize", NORMALIZE_N),
        ("normalize", 2 * NORMALIZE_N),
        ("mlp", MLP_BATCH),
        ("ode", ODE_STEPS as usize),
        ("branchy", N),
    ];
    let mut rows = Vec::new();
    for (name, n) in programs {
        if name.contains(&only) {
            eprintln!("{name} {n}... ({:.1} s)", start.elapsed().as_secs_f64());
            rows.push(row(&Program::new(name, n)));
        }
    }
    println!(
        "| program | n | primal ms | JVP w1 ms | JVP/primal | 8×JVP w1 ms | JVP w8 ms | ratio | HVP ms | HVP/primal | num-dual w1 ms | num-dual w8 ms |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for r in &rows {
        let t = &r.median;
        println!(
            "| {} | {} | {:.4} | {:.4} | {:.2} | {:.4} | {:.4} | {:.2} | {:.4} | {:.2} | {:.4} | {:.4} |",
            r.name,
            r.n,
            t.primal,
            t.jvp1,
            t.jvp1 / t.primal,
            t.jvp1x8,
            t.jvp8,
            t.jvp8 / t.jvp1x8,
            t.hvp,
            t.hvp / t.primal,
            t.nd_jvp1,
            t.nd_jvp8,
        );
    }
    println!(
        "\nThe same ratios from the fastest tenth of each call's samples (the calls the machine's \
         other work interrupted least):\n"
    );
    println!(
        "| program | n | JVP/primal | JVP w8 / 8 / primal | ratio | HVP/primal | num-dual w1 / gradlift w1 | num-dual w8 / gradlift w8 |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|");
    for r in &rows {
        let t = &r.fastest;
        println!(
            "| {} | {} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} |",
            r.name,
            r.n,
            t.jvp1 / t.primal,
            t.jvp8 / 8.0 / t.primal,
            t.jvp8 / t.jvp1x8,
            t.hvp / t.primal,
            t.nd_jvp1 / t.jvp1,
            t.nd_jvp8 / t.jvp8,
        );
    }
    if !rows.is_empty() {
        let worst = |f: fn(&Checked) -> f64| rows.iter().map(|r| f(&r.checked)).fold(0.0, f64::max);
        println!(
            "\n`ratio` is JVP w8 / 8×JVP w1 (8×JVP w1: eight width-1 calls along the eight directions, \
             timed as one). Checked first (largest errors): values against num-dual {:.1e} relative; \
             JVPs against the gradient's dot product with the direction {:.1e} of the size of its \
             terms ({:.1e} plain relative), num-dual's {:.1e}; the width-8 lanes equal to the width-1 \
             JVPs bit for bit: {}; vᵀHv against num-dual {:.1e} of its terms ({:.1e} plain).",
            worst(|c| c.value),
            worst(|c| c.jvp),
            worst(|c| c.jvp_plain),
            worst(|c| c.nd_jvp),
            if rows.iter().all(|r| r.checked.lanes_exact) {
                "yes"
            } else {
                "no"
            },
            worst(|c| c.vhv),
            worst(|c| c.vhv_plain),
        );
        // Where the plain relative error of a JVP is above 1e-12: where the dot
        // product cancels.
        let above: Vec<String> = rows
            .iter()
            .filter(|r| r.checked.jvp_plain > 1e-12)
            .map(|r| format!("{} {} ({:.1e})", r.name, r.n, r.checked.jvp_plain))
            .collect();
        if !above.is_empty() {
            println!(
                "JVPs whose plain relative error is above 1e-12 (their dot product cancels): {}.",
                above.join(", ")
            );
        }
    }

    // The dense Hessians.
    let mut hrows = Vec::new();
    if "rosenbrock".contains(&only) {
        eprintln!("hessian: rosenbrock 100...");
        hrows.push(hessians(
            "rosenbrock",
            &Program::new("rosenbrock", 100),
            true,
            true,
            true,
        ));
        eprintln!("hessian: rosenbrock 1000...");
        hrows.push(hessians(
            "rosenbrock",
            &Program::new("rosenbrock", 1000),
            slow,
            false,
            slow,
        ));
    }
    if "mlp".contains(&only) {
        let mut mlp = |what: String, p: Program, nd: bool| {
            eprintln!("hessian: {what}...");
            hrows.push(hessians(&what, &p, nd, false, false));
        };
        let (batch, hidden) = HESSIAN_MLP;
        mlp(
            format!("mlp, {hidden} hidden, batch {batch}"),
            Program::mlp(batch, hidden),
            true,
        );
        if slow {
            mlp(
                format!("mlp, {} hidden, batch {batch}", 2 * hidden),
                Program::mlp(batch, 2 * hidden),
                true,
            );
        }
        mlp(
            format!("mlp, {MLP_HIDDEN} hidden, batch 1"),
            Program::new("mlp", 1),
            false,
        );
        if slow {
            mlp(
                format!("mlp, {MLP_HIDDEN} hidden, batch {MLP_BATCH}"),
                Program::new("mlp", MLP_BATCH),
                false,
            );
        }
    }
    if !hrows.is_empty() {
        println!(
            "\n| Hessian of | coordinates | gradlift w1 ms | gradlift w8 ms | num-dual `hessian` ms | num-dual static ms | num-dual sweeps ms | num-dual / gradlift w8 | checked (largest relative error) |"
        );
        println!("|---|---:|---:|---:|---:|---:|---:|---:|---|");
        let cell = |t: Option<f64>| t.map_or_else(|| "-".to_string(), |t| format!("{t:.3}"));
        for h in &hrows {
            let best = [h.nd, h.nd_static, h.nd_sweeps]
                .into_iter()
                .flatten()
                .fold(None, |m: Option<f64>, t| Some(m.map_or(t, |m| m.min(t))));
            println!(
                "| {} | {} | {:.3} | {:.3} | {} | {} | {} | {} | {} |",
                h.what,
                h.coords,
                h.w1,
                h.w8,
                cell(h.nd),
                cell(h.nd_static),
                cell(h.nd_sweeps),
                best.map_or_else(|| "-".to_string(), |b| format!("{:.0}", b / h.w8)),
                h.checked,
            );
        }
        println!(
            "\nnum-dual `hessian`: `num_dual::hessian` on `Dual2Vec<f64, Dyn>`; static: the same on \
             `Dual2SVec64<100>`; sweeps: `Gradients::hessian` on `Dyn` (n^2 sweeps of `HyperDual64`). \
             `num-dual / gradlift w8`: num-dual's fastest form over gradlift's width 8. `-`: not run{}.",
            if slow {
                ""
            } else {
                " (`--slow` also runs num-dual at n = 1,000, an mlp of 16 hidden units, and \
                 gradlift on the suite's mlp at its batch)"
            }
        );
    }
    println!("\n{:.1} s in all.", start.elapsed().as_secs_f64());
}
