//! Timing of the seven suite programs' primals (`BENCHMARKS.md`, at the
//! suite's sizes and inputs): the JIT against the interpreter, median of several
//! runs, plus the compile time. Ignored by default; run it in release mode:
//!
//! ```text
//! cargo test --release -p gradlift-jit --test bench -- --ignored --nocapture
//! ```

mod support;

use std::time::{Duration, Instant};

use gradlift_ir::interp::{Interpreter, Val};
use gradlift_jit::{Workspace, compile};
use support::{example, same_all};

fn s(a: f64, b: f64, i: usize) -> f64 {
    (a * i as f64 + b).sin()
}

/// The suite's programs and inputs, at its sizes (`normalize` also at 20,000).
fn suite() -> Vec<(&'static str, &'static str, Vec<Val>)> {
    let n = 100_000;
    let xs = |scale: f64, shift: f64, a: f64, b: f64, n: usize| {
        Val::F64s((0..n).map(|i| scale * s(a, b, i) + shift).collect())
    };
    let batch = 64;
    let x: Vec<f64> = (0..batch * 32)
        .map(|k| (0.1 * (k / 32) as f64 + 0.7 * (k % 32) as f64).sin())
        .collect();
    let w1: Vec<f64> = (0..32 * 64)
        .map(|k| 0.1 * (0.3 * (k / 64) as f64 + 0.11 * (k % 64) as f64).cos())
        .collect();
    let b1: Vec<f64> = (0..64).map(|j| 0.01 * j as f64).collect();
    let w2: Vec<f64> = (0..64 * 10)
        .map(|k| 0.1 * (0.17 * (k / 10) as f64 + 0.5 * (k % 10) as f64).sin())
        .collect();
    let y: Vec<i64> = (0..batch as i64).map(|b| b % 10).collect();
    vec![
        ("sumsq.ir", "sumsq", vec![xs(0.5, 0.0, 0.37, 0.1, n)]),
        (
            "rosenbrock.ir",
            "rosenbrock",
            vec![xs(0.5, 0.0, 0.37, 0.1, n)],
        ),
        (
            "logsumexp.ir",
            "logsumexp",
            vec![xs(3.0, 0.0, 0.37, 0.1, n)],
        ),
        (
            "normalize.ir",
            "normalize",
            vec![
                xs(0.5, 1.0, 0.37, 0.1, 10_000),
                xs(1.0, 0.0, 0.11, 0.3, 10_000),
            ],
        ),
        (
            "normalize.ir",
            "normalize",
            vec![
                xs(0.5, 1.0, 0.37, 0.1, 20_000),
                xs(1.0, 0.0, 0.11, 0.3, 20_000),
            ],
        ),
        (
            "mlp.ir",
            "mlp",
            vec![
                Val::F64s(x),
                Val::F64s(w1),
                Val::F64s(b1),
                Val::F64s(w2),
                Val::F64s(vec![0.0; 10]),
                Val::I64s(y),
            ],
        ),
        (
            "ode.ir",
            "ode",
            [1.5, 1.0, 3.0, 1.0, 1.0, 1.0]
                .into_iter()
                .map(Val::F64)
                .chain([Val::I64(100_000)])
                .collect(),
        ),
        ("branchy.ir", "branchy", vec![xs(1.0, 0.0, 0.37, 0.1, n)]),
    ]
}

/// The median of `runs` timings of `f`, after one warm-up call.
fn median(runs: usize, mut f: impl FnMut()) -> Duration {
    f();
    let mut t: Vec<Duration> = (0..runs)
        .map(|_| {
            let start = Instant::now();
            f();
            start.elapsed()
        })
        .collect();
    t.sort();
    t[runs / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

#[test]
#[ignore = "timing: run in release with --ignored --nocapture"]
fn suite_primals_jit_against_interpreter() {
    println!("| program | n | interpreter ms | JIT ms | speed-up | compile ms |");
    println!("|---|---|---|---|---|---|");
    for (file, name, args) in suite() {
        let m = example(file);
        let id = m.func_by_name(name).unwrap();
        let start = Instant::now();
        let c = compile(&m).unwrap();
        let mut ws = Workspace::new();
        c.call(&mut ws, id, &mut args.clone()).unwrap();
        let compile_ms = ms(start.elapsed());
        let mut interp = Interpreter::new(&m);
        let want = interp.call(id, &mut args.clone()).unwrap();
        let got = c.call(&mut ws, id, &mut args.clone()).unwrap();
        assert!(same_all(&got, &want), "@{name}: {got:?} vs {want:?}");
        let slow = name == "normalize";
        // The suite's programs write none of their arguments: one copy serves.
        let mut a = args.clone();
        let ti = median(if slow { 3 } else { 11 }, || {
            interp.call(id, &mut a).unwrap();
        });
        let tj = median(if slow { 5 } else { 51 }, || {
            c.call(&mut ws, id, &mut a).unwrap();
        });
        let size = match &args[0] {
            Val::F64s(v) if name != "mlp" => v.len().to_string(),
            _ if name == "mlp" => "B = 64".to_string(),
            _ => "T = 100000".to_string(),
        };
        println!(
            "| {name} | {size} | {:.3} | {:.3} | {:.0}x | {compile_ms:.1} |",
            ms(ti),
            ms(tj),
            ti.as_secs_f64() / tj.as_secs_f64()
        );
    }
}
