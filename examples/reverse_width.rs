//! Reverse mode of width 8 on the benchmark suite: one forward pass and one
//! pullback carrying eight cotangents (seeds 1, 2, ..., 8 on the result), against
//! eight width-1 gradients with those seeds, through the zero-copy
//! [`CompiledGradient::gradient_args`]; the table of `BENCHMARKS.md`, "Reverse mode
//! of width N".
//!
//! Each call zeroes its shadows first (a fresh gradient). The calls take turns
//! ([`timing::samples_each`]: one call of each per round, medians). Before timing,
//! lane `j` of the width-8 gradient is checked to equal the width-1 gradient with
//! seed `j + 1`, bit for bit.
//!
//! ```sh
//! cargo run --release --example reverse_width
//! cargo run --release --example reverse_width -- mlp   # programs whose name contains `mlp`
//! ```

use gradlift::adjoint::Activity;
use gradlift::suite::{MLP_BATCH, N, NORMALIZE_N, ODE_STEPS};
use gradlift::{Arg, CompiledGradient, Pipeline, Val, Workspace};

#[path = "../benches/timing.rs"]
mod timing;
use timing::{fastest_tenth, median, samples_each};

#[path = "../benches/forward_programs.rs"]
mod forward_programs;
use forward_programs::Program;

const WIDTH: usize = 8;

/// One gradient of `g` (width `n`) at `p`'s arguments with `seeds`, into `shadows`
/// (zeroed first) and `grads`.
fn gradient(
    g: &CompiledGradient,
    ws: &mut Workspace,
    p: &Program,
    shadows: &mut [Vec<f64>],
    seeds: &[f64],
    value: &mut Vec<Val>,
    grads: &mut Vec<Val>,
) {
    let mut args: Vec<Arg<'_>> = p
        .args
        .iter()
        .map(|a| match a {
            Val::F64s(x) => Arg::F64s(x),
            Val::I64(k) => Arg::I64(*k),
            Val::F64(x) => Arg::F64(*x),
            other => panic!("{}: argument {other:?}", p.name),
        })
        .collect();
    for s in shadows.iter_mut() {
        s.fill(0.0);
    }
    let mut sh: Vec<Arg<'_>> = shadows.iter_mut().map(|s| Arg::F64sMut(s)).collect();
    g.gradient_args(ws, &mut args, &mut sh, seeds, value, grads)
        .unwrap_or_else(|e| panic!("{}: {e}", p.name));
}

fn main() {
    let filter = std::env::args().nth(1).unwrap_or_default();
    let programs = [
        ("sumsq", N),
        ("rosenbrock", N),
        ("logsumexp", N),
        ("normalize", NORMALIZE_N),
        ("mlp", MLP_BATCH),
        ("ode", ODE_STEPS as usize),
        ("branchy", N),
    ];
    let mut rows = Vec::new();
    for (name, n) in programs {
        if !name.contains(filter.as_str()) {
            continue;
        }
        eprintln!("{name} {n}...");
        let p = Program::new(name, n);
        let pipeline = Pipeline::new().with_hosts(p.hosts.clone());
        let config = p.rule_config();
        let compile = |w: u32| {
            pipeline
                .compile_rule(
                    pipeline
                        .derive_width(&p.module, name, Some(&config), w)
                        .unwrap_or_else(|e| panic!("{name}: {e}")),
                )
                .unwrap_or_else(|e| panic!("{name}: {e}"))
        };
        let (one, wide) = (compile(1), compile(WIDTH as u32));
        let dup_lens: Vec<usize> = p
            .args
            .iter()
            .zip(p.activities())
            .filter(|&(_, a)| a == Activity::Dup)
            .map(|(a, _)| a.slice_len().unwrap())
            .collect();
        let mut ws1 = Workspace::new();
        let mut ws8 = Workspace::new();
        let mut sh1: Vec<Vec<f64>> = dup_lens.iter().map(|&l| vec![0.0; l]).collect();
        let mut sh8: Vec<Vec<f64>> = dup_lens.iter().map(|&l| vec![0.0; l * WIDTH]).collect();
        let seeds8: Vec<f64> = (1..=WIDTH).map(|k| k as f64).collect();
        let (mut v1, mut g1, mut v8, mut g8) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        // Lane j of width 8 against width 1 with seed j + 1, bit for bit.
        gradient(&wide, &mut ws8, &p, &mut sh8, &seeds8, &mut v8, &mut g8);
        for j in 0..WIDTH {
            gradient(&one, &mut ws1, &p, &mut sh1, &[seeds8[j]], &mut v1, &mut g1);
            for (s1, s8) in sh1.iter().zip(&sh8) {
                for (e, x) in s1.iter().enumerate() {
                    assert_eq!(
                        x.to_bits(),
                        s8[e * WIDTH + j].to_bits(),
                        "{name}: lane {j} element {e}"
                    );
                }
            }
            assert_eq!(v1, v8, "{name}: values");
        }
        let (mut ws0, mut sh0, mut v0, mut g0) =
            (Workspace::new(), sh1.clone(), Vec::new(), Vec::new());
        let samples = samples_each(&mut [
            &mut || gradient(&one, &mut ws0, &p, &mut sh0, &[1.0], &mut v0, &mut g0),
            &mut || {
                for s in &seeds8 {
                    gradient(&one, &mut ws1, &p, &mut sh1, &[*s], &mut v1, &mut g1);
                }
            },
            &mut || gradient(&wide, &mut ws8, &p, &mut sh8, &seeds8, &mut v8, &mut g8),
        ]);
        let med: Vec<f64> = samples.iter().map(|s| median(s.clone()) * 1e3).collect();
        let fast: Vec<f64> = samples.iter().map(|s| fastest_tenth(s) * 1e3).collect();
        rows.push((name, n, med, fast));
    }
    println!(
        "| program | n | gradient w1 ms | 8×gradient w1 ms | gradient w8 ms | ratio | ratio (fastest tenth) |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|");
    for (name, n, med, fast) in rows {
        println!(
            "| {name} | {n} | {:.4} | {:.4} | {:.4} | {:.2} | {:.2} |",
            med[0],
            med[1],
            med[2],
            med[2] / med[1],
            fast[2] / fast[1]
        );
    }
    println!(
        "\n`ratio`: gradient w8 / 8×gradient w1 (one forward pass and a pullback of eight lanes against eight whole gradients); lanes checked bit for bit against width 1 first."
    );
}
