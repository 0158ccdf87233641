//! The README's main job: write `f(x, y) = x*x + 3y` and the suite's Rosenbrock
//! function once as generic Rust, run them natively, trace them into gradlift IR,
//! derive their rules (forward pass and pullback), compile them to native code with
//! the JIT, and print values, gradients (next to closed forms computed here in plain
//! Rust), the time of a compiled gradient, and the IR.
//!
//! Run with `cargo run --example quickstart`.

use std::time::Instant;

use gradlift::trace::prelude::*;
use gradlift::{Active, CompiledGradient, Const, Duplicated, autodiff, suite};

/// `f(x, y) = x*x + 3y`, for any `Real`: `f64` natively, `Var` traced.
fn f<T: Real>(x: T, y: T) -> T {
    x * x + y * 3.0
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // f: natively, then traced, derived and compiled with Enzyme's activities.
    println!("f(2, 1) natively = {}", f::<f64>(2.0, 1.0));
    let mut df = autodiff("f", f::<Var>)?;
    let (value, (dx, dy)) = df.gradient((Active(2.0), Active(1.0)))?;
    println!("f(2, 1) compiled = {value}, gradient ({dx}, {dy})   (expected 7, (2x, 3) = (4, 3))");
    let (_, (dx, ())) = df.gradient((Active(2.0), Const(1.0)))?;
    println!("  with y constant: df/dx = {dx}");

    // Rosenbrock (gradlift::suite): x is Duplicated, its shadow receives the gradient.
    let x = suite::rosenbrock_input(5);
    let mut rosenbrock = autodiff("rosenbrock", suite::rosenbrock::<Var>)?;
    let mut grad = vec![0.0; x.len()];
    let (value, _) = rosenbrock.gradient((Duplicated(&x[..], &mut grad[..]),))?;
    let n = x.len();
    let expected: f64 = x
        .windows(2)
        .map(|w| 100.0 * (w[1] - w[0] * w[0]).powi(2) + (1.0 - w[0]).powi(2))
        .sum();
    let closed_form: Vec<f64> = (0..n)
        .map(|i| {
            let mut g = 0.0;
            if i + 1 < n {
                g += -400.0 * x[i] * (x[i + 1] - x[i] * x[i]) - 2.0 * (1.0 - x[i]);
            }
            if i > 0 {
                g += 200.0 * (x[i] - x[i - 1] * x[i - 1]);
            }
            g
        })
        .collect();
    println!(
        "rosenbrock({x:.4?})\n   value {value}, gradient {grad:.6?}\n   (closed form in Rust: {expected}, {closed_form:.6?})"
    );

    // Native speed: the compiled gradient at n = 100,000, against the compiled primal.
    let big = suite::rosenbrock_input(100_000);
    let mut shadow = vec![0.0; big.len()];
    let time = |f: &mut dyn FnMut()| {
        f(); // the first call compiles and sizes the buffers
        let start = Instant::now();
        for _ in 0..20 {
            f();
        }
        start.elapsed().as_secs_f64() / 20.0 * 1e3
    };
    let primal_ms = time(&mut || {
        rosenbrock.call((&big[..],)).expect("the primal runs");
    });
    let gradient_ms = time(&mut || {
        rosenbrock
            .gradient((Duplicated(&big[..], &mut shadow[..]),))
            .expect("the gradient runs");
    });
    println!(
        "rosenbrock at n = 100,000: primal {primal_ms:.3} ms, gradient {gradient_ms:.3} ms \
         (traced, derived and compiled in {:.1} ms)",
        rosenbrock.compile_time().as_secs_f64() * 1e3
    );

    println!("\nthe IR of f, as traced and derived (primal, forward pass, pullback):");
    let rule = CompiledGradient::new(df.module(), "f")?;
    let rule = rule.rule();
    for func in [rule.layout.primal, rule.forward, rule.pullback] {
        let mut text = String::new();
        gradlift::ir::write::write_function(&mut text, &rule.module, func)?;
        print!("\n{text}");
    }
    Ok(())
}
