//! The README's main job: parse `f(x, y) = x*x + 3*y` and the suite's Rosenbrock
//! function, derive their rules (forward pass and pullback), compile them to native
//! code with the JIT, and print values, gradients (with closed forms computed here
//! in plain Rust to compare), the time of a compiled gradient, and the IR.
//!
//! Run with `cargo run --example quickstart`.

use std::time::Instant;

use gradlift::ir::interp::Val;
use gradlift::ir::{parse, verify};
use gradlift::{CompiledFunction, CompiledGradient, Workspace};

const SOURCE: &str = "
; f(x, y) = x*x + 3*y
func @f(%x: f64, %y: f64) -> f64 {
entry:
    %xx = fmul %x, %x
    %y3 = fmul 3.0, %y
    %r = fadd %xx, %y3
    ret %r
}
";

/// The suite's Rosenbrock program, as the tests check it against a closed form.
const ROSENBROCK: &str = include_str!("ir/rosenbrock.ir");

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let module = parse(&format!("{SOURCE}\n{ROSENBROCK}"))?;
    verify(&module)?;
    // One workspace per thread: the tape and buffers of compiled calls.
    let mut ws = Workspace::new();

    // f: derive, compile, run.
    let f = CompiledGradient::new(&module, "f")?;
    let g = f.value_and_gradient(&mut ws, &[Val::F64(2.0), Val::F64(1.0)])?;
    println!(
        "f(2, 1) = {:?}, gradient {:?}\n   (expected 2*2 + 3*1 = 7, (2x, 3) = (4, 3))",
        g.value, g.gradient
    );

    // Rosenbrock: `x` is a `dup` slice, whose shadow receives the gradient.
    let x: Vec<f64> = (0..5)
        .map(|i| 0.5 * (0.37 * i as f64 + 0.1).sin())
        .collect();
    let rosenbrock = CompiledGradient::new(&module, "rosenbrock")?;
    let out = rosenbrock.value_and_gradient(&mut ws, &[Val::F64s(x.clone())])?;
    let n = x.len();
    let value: f64 = x
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
        "rosenbrock({x:.4?})\n   value {:?}, gradient {:?}\n   (closed form in Rust: {value}, {closed_form:.6?})",
        out.value, out.gradient[0]
    );

    // Native speed: a prepared gradient at n = 100,000, against the primal.
    let big: Vec<f64> = (0..100_000)
        .map(|i| 0.5 * (0.37 * i as f64 + 0.1).sin())
        .collect();
    let args = [Val::F64s(big)];
    let primal = CompiledFunction::new(&module, "rosenbrock")?;
    let mut primal_args = args.clone();
    let mut results = Vec::new();
    let mut cache = rosenbrock.prepare(&args)?;
    let time = |f: &mut dyn FnMut()| {
        let start = Instant::now();
        for _ in 0..20 {
            f();
        }
        start.elapsed().as_secs_f64() / 20.0 * 1e3
    };
    let primal_ms = time(&mut || {
        primal
            .call_into(&mut ws, &mut primal_args, &mut results)
            .expect("the primal runs");
    });
    let mut tape_bytes = 0;
    let gradient_ms = time(&mut || {
        let g = cache.value_and_gradient(&args).expect("the gradient runs");
        tape_bytes = g.tape_peak_bytes;
    });
    println!(
        "rosenbrock at n = 100,000: primal {primal_ms:.3} ms, gradient {gradient_ms:.3} ms \
         (compiled in {:.1} ms; tape {} bytes)",
        rosenbrock.compile_time().as_secs_f64() * 1e3,
        tape_bytes
    );

    println!("\nthe IR of f, as gradlift prints it (primal, forward pass, pullback):");
    let rule = f.rule();
    for func in [rule.layout.primal, rule.forward, rule.pullback] {
        let mut text = String::new();
        gradlift::ir::write::write_function(&mut text, &rule.module, func)?;
        print!("\n{text}");
    }
    Ok(())
}
