//! A long simulation differentiated under a memory budget.
//!
//! Lotka-Volterra (`u' = a u - b u v`, `v' = d u v - c v`) integrated by RK4 for T
//! steps, written once as generic Rust; the loss is `u_T^2 + v_T^2`, and its
//! gradient is taken with respect to the four rates and the initial state. The
//! loop is `for_range_checkpointed`: reverse mode keeps at most as many snapshots
//! of `(u, v)` as the budget holds (`Autodiff::with_checkpoint_bytes`), and runs
//! steps again as the optimal binomial schedule says, instead of keeping every
//! step's tape. The gradient is the unchecked one, bit for bit (checked here when
//! the unchecked one fits in memory).
//!
//! ```sh
//! cargo run --release --example long_simulation                       # T = 1e6, 64 KiB
//! cargo run --release --example long_simulation -- --steps 100000000 --budget 32768
//! cargo run --release --example long_simulation -- --table           # the snapshot table
//! ```

use std::time::{Duration, Instant};

use gradlift::trace::prelude::*;
use gradlift::{Autodiff, Const, Duplicated, autodiff};

/// One RK4 step of Lotka-Volterra with rates `(a, b, c, d)` and step `h`.
fn rk4<T: Real>(a: T, b: T, c: T, d: T, h: f64, (u, v): (T, T)) -> (T, T) {
    let f = |u: T, v: T| (a * u - b * u * v, d * u * v - c * v);
    let (k1u, k1v) = f(u, v);
    let (k2u, k2v) = f(u + k1u * (h / 2.0), v + k1v * (h / 2.0));
    let (k3u, k3v) = f(u + k2u * (h / 2.0), v + k2v * (h / 2.0));
    let (k4u, k4v) = f(u + k3u * h, v + k3v * h);
    (
        u + (k1u + k2u * 2.0 + k3u * 2.0 + k4u) * (h / 6.0),
        v + (k1v + k2v * 2.0 + k3v * 2.0 + k4v) * (h / 6.0),
    )
}

/// The step.
const H: f64 = 1e-5;

/// `p = [a, b, c, d, u0, v0]`; `steps` RK4 steps keeping at most `snapshots`
/// snapshots (0: as many as the budget holds).
fn simulate<T: Real>(p: T::Slice<'_>, steps: T::Int, snapshots: T::Int) -> T {
    let (a, b, c, d) = (p.at(0), p.at(1), p.at(2), p.at(3));
    let (u, v) = for_range_checkpointed(0, steps, snapshots, (p.at(4), p.at(5)), |_, s| {
        rk4(a, b, c, d, H, s)
    });
    u * u + v * v
}

/// The same without the checkpoint: every step's tape is kept.
fn simulate_unchecked<T: Real>(p: T::Slice<'_>, steps: T::Int, snapshots: T::Int) -> T {
    let _ = snapshots;
    let (a, b, c, d) = (p.at(0), p.at(1), p.at(2), p.at(3));
    let (u, v) = for_range(0, steps, (p.at(4), p.at(5)), |_, s| rk4(a, b, c, d, H, s));
    u * u + v * v
}

type Sim = Autodiff<(Slice, Var<i64>, Var<i64>), Var>;

const P: [f64; 6] = [1.5, 1.0, 3.0, 1.0, 1.0, 1.0];

/// One gradient: the value, the gradient, the time, the peak tape bytes and the
/// steps run again.
fn gradient(f: &mut Sim, steps: i64, snapshots: i64) -> (f64, [f64; 6], Duration, usize, u64) {
    let mut dp = [0.0; 6];
    let start = Instant::now();
    let (value, _) = f
        .gradient((
            Duplicated(&P[..], &mut dp[..]),
            Const(steps),
            Const(snapshots),
        ))
        .unwrap_or_else(|e| panic!("the gradient: {e}"));
    let time = start.elapsed();
    let tape = f.last_tape();
    (value, dp, time, tape.peak_bytes, tape.recomputed_steps)
}

fn mb(bytes: usize) -> String {
    format!("{:.3} MB", bytes as f64 / 1e6)
}

fn ms(t: Duration) -> String {
    format!("{:.1} ms", t.as_secs_f64() * 1e3)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let value_of = |flag: &str| {
        args.iter()
            .position(|a| a == flag)
            .and_then(|k| args.get(k + 1))
            .map(|v| {
                v.parse::<f64>()
                    .unwrap_or_else(|_| panic!("{flag} takes a number")) as u64
            })
    };
    if args.iter().any(|a| a == "--table") {
        table();
        return;
    }
    let steps = value_of("--steps").unwrap_or(1_000_000) as i64;
    let budget = value_of("--budget").unwrap_or(64 * 1024);

    let mut f: Sim = autodiff("simulate", simulate::<Var>)
        .unwrap_or_else(|e| panic!("{e}"))
        .with_checkpoint_bytes(budget);
    // The first gradient derives and compiles: not timed.
    gradient(&mut f, 2, 0);
    let (value, dp, time, peak, recomputed) = gradient(&mut f, steps, 0);
    // A snapshot holds u, v, the step number and the snapshots left: 32 bytes.
    let snapshots = (budget / 32).clamp(1, steps.max(1) as u64);
    println!(
        "Lotka-Volterra by RK4, T = {steps} steps of h = {H}: loss u_T^2 + v_T^2 = {value:.12}"
    );
    println!("budget {budget} bytes: {snapshots} snapshots of (u, v)");
    println!(
        "checkpointed gradient: {} (peak tape {}, {recomputed} steps run again)",
        ms(time),
        mb(peak)
    );
    println!("  d/d(a, b, c, d, u0, v0) = {dp:.9?}");
    if peak as u64 > budget + 4096 {
        eprintln!("error: the tape's peak ({peak} bytes) is beyond the budget");
        std::process::exit(1);
    }
    // The unchecked gradient keeps every step's tape: compare where it fits.
    if steps <= 2_000_000 {
        let mut g: Sim =
            autodiff("simulate", simulate_unchecked::<Var>).unwrap_or_else(|e| panic!("{e}"));
        // Warmed up at full size, so that the tape's growth is not timed.
        gradient(&mut g, steps, 0);
        let (v2, dp2, t2, peak2, _) = gradient(&mut g, steps, 0);
        println!(
            "unchecked gradient:    {} (peak tape {})",
            ms(t2),
            mb(peak2)
        );
        let same = v2.to_bits() == value.to_bits()
            && dp.iter().zip(&dp2).all(|(x, y)| x.to_bits() == y.to_bits());
        println!(
            "the same gradient, bit for bit: {same}; memory / {:.0}, time x {:.2}",
            peak2 as f64 / peak as f64,
            time.as_secs_f64() / t2.as_secs_f64()
        );
        if !same {
            eprintln!("error: the checkpointed gradient differs: {dp2:?}");
            std::process::exit(1);
        }
    }
}

/// The table of the closing note: for s = 1, 4, 16, 64, 1000 snapshots, the peak
/// tape, the steps run again and the time against the unchecked gradient, at T =
/// 1e5 and 1e6; then T = 1e8 with 1000 snapshots.
fn table() {
    let mut f: Sim = autodiff("simulate", simulate::<Var>).unwrap_or_else(|e| panic!("{e}"));
    let mut g: Sim =
        autodiff("simulate", simulate_unchecked::<Var>).unwrap_or_else(|e| panic!("{e}"));
    for steps in [100_000i64, 1_000_000] {
        // The unchecked gradient: the best of 5.
        let runs: Vec<_> = (0..5).map(|_| gradient(&mut g, steps, 0)).collect();
        let base = runs.iter().map(|r| r.2).min().unwrap_or_default();
        let (_, want, _, base_peak, _) = runs[0];
        println!("T = {steps}: unchecked {} peak {}", ms(base), mb(base_peak));
        println!("| s | peak tape (bytes) | recomputed steps | time | time / unchecked |");
        println!("|---|---|---|---|---|");
        for s in [1i64, 4, 16, 64, 1000] {
            if s == 1 && steps > 100_000 {
                println!(
                    "| 1 | (not run: (T-1)(T-2)/2 = {:.1e} steps again) | | | |",
                    ((steps - 1) * (steps - 2) / 2) as f64
                );
                continue;
            }
            let reps = if s <= 4 { 1 } else { 3 };
            let runs: Vec<_> = (0..reps).map(|_| gradient(&mut f, steps, s)).collect();
            let best = runs.iter().map(|r| r.2).min().unwrap_or_default();
            let (_, dp, _, peak, recomputed) = runs[0];
            assert!(
                dp.iter()
                    .zip(&want)
                    .all(|(x, y)| x.to_bits() == y.to_bits()),
                "s = {s}: not the unchecked gradient"
            );
            println!(
                "| {s} | {peak} | {recomputed} | {} | {:.2} |",
                ms(best),
                best.as_secs_f64() / base.as_secs_f64()
            );
        }
    }
    let steps = 100_000_000;
    let (value, dp, time, peak, recomputed) = gradient(&mut f, steps, 1000);
    println!(
        "T = {steps}, s = 1000: loss {value:.12}, gradient {dp:.6?}, {} , peak tape {} ({peak} bytes), {recomputed} steps again",
        ms(time),
        mb(peak)
    );
}
