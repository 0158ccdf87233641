//! The README's main job: parse two functions, verify them, run them on the reference
//! interpreter, derive the rule (forward pass and pullback) of `f(x, y) = x*x + 3*y`,
//! and print values, gradient and IR.
//!
//! Run with `cargo run --example quickstart`. Rosenbrock's gradient joins when reverse
//! mode handles slices, and native code when the JIT lands.

use gradlift::adjoint::{RuleConfig, build_rrule};
use gradlift::ir::interp::{Interpreter, Val};
use gradlift::ir::{parse, verify};

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
    let mut interp = Interpreter::new(&module);

    let f = module.func_by_name("f").ok_or("no @f")?;
    let value = interp.call(f, &mut [Val::F64(2.0), Val::F64(1.0)])?;
    println!("f(2, 1) = {value:?}   (expected 2*2 + 3*1 = 7)");

    let rosenbrock = module.func_by_name("rosenbrock").ok_or("no @rosenbrock")?;
    let x: Vec<f64> = (0..5)
        .map(|i| 0.5 * (0.37 * i as f64 + 0.1).sin())
        .collect();
    let value = interp.call(rosenbrock, &mut [Val::F64s(x.clone())])?;
    let closed_form: f64 = x
        .windows(2)
        .map(|w| 100.0 * (w[1] - w[0] * w[0]).powi(2) + (1.0 - w[0]).powi(2))
        .sum();
    println!("rosenbrock({x:.4?}) = {value:?}   (closed form in Rust: {closed_form})");

    // The rule of f: a forward pass that saves what the pullback needs on the tape,
    // and a pullback from the result's cotangent to the parameters' cotangents.
    let rule = build_rrule(&module, f, &RuleConfig::default_for(module.sig(f)))?;
    let mut engine = Interpreter::new(&rule.module);
    let value = engine.call(rule.forward, &mut [Val::F64(2.0), Val::F64(1.0)])?;
    let gradient = engine.call(rule.pullback, &mut [Val::F64(1.0)])?;
    println!("f(2, 1) = {value:?}, gradient {gradient:?}   (expected (2x, 3) = (4, 3))");

    println!("\nthe IR, as gradlift prints it (primal, forward pass, pullback):\n");
    print!("{}", rule.module);
    Ok(())
}
