//! The example programs compute what they claim, on the interpreter and through the CLI.
//!
//! The seven benchmark programs of the suite (`BENCHMARKS.md`) run at small sizes on the suite's
//! closed-form inputs; each result is compared (relative 1e-12) with a plain-Rust
//! implementation of the formula written here, independently of the IR. The feature
//! examples are checked against values computed by hand. Every case runs twice: through
//! the library (`Interpreter::call` on the parsed example) and through the `gradlift`
//! binary (`run --engine interp --args-file`), whose JSON output is checked too.

mod common;

use std::ffi::OsStr;
use std::sync::atomic::{AtomicUsize, Ordering};

use common::{gradlift, interpret, json_close, load_example, temp_file, to_json, val_close};
use gradlift::ir::interp::Val;
use serde_json::Value;

/// `s(a, b, i) = sin(a * i + b)`, the suite's input generator.
fn s(a: f64, b: f64, i: usize) -> f64 {
    (a * i as f64 + b).sin()
}

/// Runs `@func` of `examples/ir/FILE` on `args`, through the library and the CLI, and
/// checks the results and the final contents of the `mut` slice parameters listed in
/// `mutated` (by parameter index; every other parameter must print as null).
#[track_caller]
fn check(file: &str, func: &str, args: Vec<Val>, results: &[Val], mutated: &[(usize, Val)]) {
    // The library.
    let module = load_example(file);
    let (got, final_args) = interpret(&module, func, args.clone());
    assert_eq!(got.len(), results.len(), "@{func}: {got:?}");
    for (g, r) in got.iter().zip(results) {
        assert!(val_close(g, r), "@{func}: got {g:?}, expected {r:?}");
    }
    for (k, expected) in mutated {
        assert!(
            val_close(&final_args[*k], expected),
            "@{func} argument {k}: got {:?}, expected {expected:?}",
            final_args[*k]
        );
    }

    // The command line.
    static COUNTER: AtomicUsize = AtomicUsize::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let json: Value = args.iter().map(to_json).collect();
    let args_file = temp_file(&format!("suite-{func}-{n}.json"), &json.to_string());
    let path = common::example(file);
    let run = gradlift(&[
        OsStr::new("run"),
        path.as_os_str(),
        OsStr::new("--func"),
        OsStr::new(func),
        OsStr::new("--args-file"),
        args_file.as_os_str(),
        OsStr::new("--engine"),
        OsStr::new("interp"),
    ]);
    assert_eq!(run.code, 0, "@{func}: {run:?}");
    assert_eq!(run.stderr, "", "@{func}");
    let out: Value = serde_json::from_str(&run.stdout).expect("one line of JSON");
    let value = match results {
        [] => Value::Null,
        [one] => to_json(one),
        several => several.iter().map(to_json).collect(),
    };
    assert!(
        json_close(&out["value"], &value),
        "@{func}: CLI value {}, expected {value}",
        out["value"]
    );
    let expected_args: Value = (0..args.len())
        .map(|k| match mutated.iter().find(|(i, _)| *i == k) {
            Some((_, v)) => to_json(v),
            None => Value::Null,
        })
        .collect();
    assert!(
        json_close(&out["args"], &expected_args),
        "@{func}: CLI args {}, expected {expected_args}",
        out["args"]
    );
}

/// Checks a function of one float result.
#[track_caller]
fn check_f64(file: &str, func: &str, args: Vec<Val>, expected: f64) {
    check(file, func, args, &[Val::F64(expected)], &[]);
}

// The benchmark suite, at small sizes.

#[test]
fn sumsq() {
    for n in [5, 17, 50] {
        let x: Vec<f64> = (0..n).map(|i| 0.5 * s(0.37, 0.1, i)).collect();
        let expected: f64 = x.iter().map(|x| x * x).sum();
        check_f64("sumsq.ir", "sumsq", vec![Val::F64s(x)], expected);
    }
}

#[test]
fn rosenbrock() {
    for n in [2, 5, 50] {
        let x: Vec<f64> = (0..n).map(|i| 0.5 * s(0.37, 0.1, i)).collect();
        let expected: f64 = x
            .windows(2)
            .map(|w| 100.0 * (w[1] - w[0] * w[0]).powi(2) + (1.0 - w[0]).powi(2))
            .sum();
        check_f64("rosenbrock.ir", "rosenbrock", vec![Val::F64s(x)], expected);
    }
}

#[test]
fn logsumexp() {
    for n in [1, 5, 50] {
        let x: Vec<f64> = (0..n).map(|i| 3.0 * s(0.37, 0.1, i)).collect();
        let m = x.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let expected = m + x.iter().map(|x| (x - m).exp()).sum::<f64>().ln();
        check_f64("logsumexp.ir", "logsumexp", vec![Val::F64s(x)], expected);
    }
}

#[test]
fn normalize() {
    for n in [5, 20] {
        let x: Vec<f64> = (0..n).map(|i| 0.5 * s(0.37, 0.1, i) + 1.0).collect();
        let w: Vec<f64> = (0..n).map(|i| s(0.11, 0.3, i)).collect();
        let norm = x.iter().map(|x| x * x).sum::<f64>().sqrt();
        let expected: f64 = x.iter().zip(&w).map(|(x, w)| w * x / norm).sum();
        check_f64("normalize.ir", "norm", vec![Val::F64s(x.clone())], norm);
        check_f64(
            "normalize.ir",
            "normalize",
            vec![Val::F64s(x), Val::F64s(w)],
            expected,
        );
    }
}

#[test]
fn mlp() {
    let (inputs, hidden, classes) = (32, 64, 10);
    let w1: Vec<f64> = (0..inputs * hidden)
        .map(|e| {
            let (k, j) = (e / hidden, e % hidden);
            0.1 * (0.3 * k as f64 + 0.11 * j as f64).cos()
        })
        .collect();
    let b1: Vec<f64> = (0..hidden).map(|j| 0.01 * j as f64).collect();
    let w2: Vec<f64> = (0..hidden * classes)
        .map(|e| {
            let (j, c) = (e / classes, e % classes);
            0.1 * (0.17 * j as f64 + 0.5 * c as f64).sin()
        })
        .collect();
    let b2 = vec![0.0; classes];
    for batch in [3, 12] {
        let x: Vec<Vec<f64>> = (0..batch)
            .map(|b| {
                (0..inputs)
                    .map(|k| (0.1 * b as f64 + 0.7 * k as f64).sin())
                    .collect()
            })
            .collect();
        let y: Vec<i64> = (0..batch as i64).map(|b| b % 10).collect();

        // Forward pass, textbook style: one row at a time.
        let mut loss = 0.0;
        for (row, &label) in x.iter().zip(&y) {
            let h: Vec<f64> = (0..hidden)
                .map(|j| {
                    let pre: f64 = (0..inputs).map(|k| row[k] * w1[k * hidden + j]).sum();
                    (pre + b1[j]).tanh()
                })
                .collect();
            let z: Vec<f64> = (0..classes)
                .map(|c| b2[c] + (0..hidden).map(|j| h[j] * w2[j * classes + c]).sum::<f64>())
                .collect();
            let m = z.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let lse = m + z.iter().map(|z| (z - m).exp()).sum::<f64>().ln();
            loss += lse - z[label as usize];
        }
        let expected = loss / batch as f64;

        check_f64(
            "mlp.ir",
            "mlp",
            vec![
                Val::F64s(x.concat()),
                Val::F64s(w1.clone()),
                Val::F64s(b1.clone()),
                Val::F64s(w2.clone()),
                Val::F64s(b2.clone()),
                Val::I64s(y),
            ],
            expected,
        );
    }
}

#[test]
fn ode() {
    let (a, b, c, d) = (1.5, 1.0, 3.0, 1.0);
    for steps in [0, 10, 100] {
        let (mut u, mut v) = (1.0_f64, 1.0_f64);
        for _ in 0..steps {
            let du = u * (a - b * v);
            let dv = v * (d * u - c);
            u += 1e-4 * du;
            v += 1e-4 * dv;
        }
        let expected = u * u + v * v;
        let args = [a, b, c, d, 1.0, 1.0].map(Val::F64).into_iter();
        check_f64(
            "ode.ir",
            "ode",
            args.chain([Val::I64(steps)]).collect(),
            expected,
        );
    }
}

#[test]
fn branchy() {
    for n in [5, 50] {
        let x: Vec<f64> = (0..n).map(|i| s(0.37, 0.1, i)).collect();
        if n == 50 {
            // The suite's inputs take both branches (the first five are all positive).
            assert!(x.iter().any(|&x| x > 0.0) && x.iter().any(|&x| x <= 0.0));
        }
        let expected: f64 = x
            .iter()
            .map(|&x| {
                if x > 0.0 {
                    x.sin() * x
                } else {
                    x.powi(3) - 2.0 * x
                }
            })
            .sum();
        check_f64("branchy.ir", "branchy", vec![Val::F64s(x)], expected);
    }
}

// The feature examples, with values worked out by hand.

#[test]
fn branches() {
    check_f64("branches.ir", "piecewise", vec![Val::F64(-2.0)], 2.0);
    check_f64("branches.ir", "piecewise", vec![Val::F64(3.0)], 9.0);
    check_f64("branches.ir", "piecewise", vec![Val::F64(0.0)], 0.0);
    for (x, sign) in [(-3.5, -1), (0.0, 0), (2.0, 1), (f64::NAN, 0)] {
        check(
            "branches.ir",
            "sign",
            vec![Val::F64(x)],
            &[Val::I64(sign)],
            &[],
        );
    }
    for (x, clamped) in [(5.0, 1.0), (-1.0, 0.0), (0.25, 0.25)] {
        let args = vec![Val::F64(x), Val::F64(0.0), Val::F64(1.0)];
        check_f64("branches.ir", "clamp", args, clamped);
    }
}

#[test]
fn nested_loops() {
    for (n, pairs) in [(0, 0), (1, 0), (5, 10), (10, 45)] {
        check(
            "nested_loops.ir",
            "triangle",
            vec![Val::I64(n)],
            &[Val::I64(pairs)],
            &[],
        );
    }
    // [1 2 3; 4 5 6] [1 0 -1]' = [-2 -2]'
    check(
        "nested_loops.ir",
        "matvec",
        vec![
            Val::F64s(vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]),
            Val::F64s(vec![1.0, 0.0, -1.0]),
            Val::F64s(vec![7.0, 7.0]),
        ],
        &[],
        &[(2, Val::F64s(vec![-2.0, -2.0]))],
    );
}

#[test]
fn recursion() {
    // 3.5 -> 2.5 -> 1.5 -> 0.5 -> -0.5; 2.0 -> 1.0 -> 0.0; -1.25 at once.
    check_f64("recursion.ir", "f", vec![Val::F64(3.5)], -0.5);
    check_f64("recursion.ir", "f", vec![Val::F64(2.0)], 0.0);
    check_f64("recursion.ir", "f", vec![Val::F64(-1.25)], -1.25);
    for (n, fact) in [(0, 1), (1, 1), (5, 120), (20, 2_432_902_008_176_640_000)] {
        check(
            "recursion.ir",
            "fact",
            vec![Val::I64(n)],
            &[Val::I64(fact)],
            &[],
        );
    }
    for (n, even) in [(0, true), (7, false), (10, true)] {
        check(
            "recursion.ir",
            "is_even",
            vec![Val::I64(n)],
            &[Val::Bool(even)],
            &[],
        );
        check(
            "recursion.ir",
            "is_odd",
            vec![Val::I64(n)],
            &[Val::Bool(!even)],
            &[],
        );
    }
    for (n, fib) in [(0, 0), (1, 1), (2, 1), (10, 55)] {
        check(
            "recursion.ir",
            "fib",
            vec![Val::I64(n)],
            &[Val::I64(fib)],
            &[],
        );
    }
}

#[test]
fn mutation() {
    check(
        "mutation.ir",
        "scale",
        vec![Val::F64s(vec![1.0, 2.0, 3.0]), Val::F64(2.0)],
        &[],
        &[(0, Val::F64s(vec![2.0, 4.0, 6.0]))],
    );
    check(
        "mutation.ir",
        "square",
        vec![Val::F64s(vec![1.5, -2.0])],
        &[],
        &[(0, Val::F64s(vec![2.25, 4.0]))],
    );
    check(
        "mutation.ir",
        "scale_sum",
        vec![Val::F64s(vec![1.0, 2.0, 3.0]), Val::F64(0.5)],
        &[Val::F64(3.0)],
        &[(0, Val::F64s(vec![0.5, 1.0, 1.5]))],
    );
}

#[test]
fn alloc() {
    check_f64(
        "alloc.ir",
        "sumsq_buffered",
        vec![Val::F64s(vec![1.0, 2.0, 3.0])],
        14.0,
    );
    check_f64("alloc.ir", "sumsq_buffered", vec![Val::F64s(vec![])], 0.0);
    for (n, sum) in [(0, 0), (1, 0), (10, 45)] {
        check(
            "alloc.ir",
            "iota_sum",
            vec![Val::I64(n)],
            &[Val::I64(sum)],
            &[],
        );
    }
}

#[test]
fn multiple_results() {
    check(
        "multiple_results.ir",
        "max_argmax",
        vec![Val::F64s(vec![1.0, 5.0, 3.0, 5.0])],
        &[Val::F64(5.0), Val::I64(1)],
        &[],
    );
    check(
        "multiple_results.ir",
        "max_argmax",
        vec![Val::F64s(vec![])],
        &[Val::F64(f64::NEG_INFINITY), Val::I64(-1)],
        &[],
    );
    check_f64(
        "multiple_results.ir",
        "max_plus_index",
        vec![Val::F64s(vec![1.0, 5.0, 3.0])],
        6.0,
    );
    for (a, b, q, r) in [(7, 2, 3, 1), (-7, 2, -3, -1), (7, -2, -3, 1)] {
        check(
            "multiple_results.ir",
            "divmod",
            vec![Val::I64(a), Val::I64(b)],
            &[Val::I64(q), Val::I64(r)],
            &[],
        );
    }
}

#[test]
fn fast_inv_sqrt() {
    for x in [0.01_f64, 0.5, 1.0, 2.0, 100.0, 12345.678] {
        // The same trick, written in Rust.
        let y = f64::from_bits(0x5FE6_EB50_C7B5_37A9 - (x.to_bits() >> 1));
        let expected = y * (1.5 - 0.5 * x * y * y);
        let exact = 1.0 / x.sqrt();
        assert!(((expected - exact) / exact).abs() < 2e-3, "{x}");
        check_f64(
            "fast_inv_sqrt.ir",
            "fast_inv_sqrt",
            vec![Val::F64(x)],
            expected,
        );
    }
}

#[test]
fn decls() {
    check_f64("decls.ir", "softplus", vec![Val::F64(0.0)], 2f64.ln());
    check_f64(
        "decls.ir",
        "softplus_stable",
        vec![Val::F64(0.0)],
        2f64.ln(),
    );
    check_f64(
        "decls.ir",
        "softplus_stable",
        vec![Val::F64(50.0)],
        50.0 + (-50f64).exp().ln_1p(),
    );
    check_f64("decls.ir", "square", vec![Val::F64(3.0)], 9.0);
    check_f64(
        "decls.ir",
        "square_vjp",
        vec![Val::F64(3.0), Val::F64(2.0)],
        12.0,
    );
    check_f64(
        "decls.ir",
        "square_jvp",
        vec![Val::F64(3.0), Val::F64(0.5)],
        3.0,
    );
    check_f64("decls.ir", "round_down", vec![Val::F64(-1.5)], -2.0);
}
