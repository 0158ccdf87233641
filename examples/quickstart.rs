//! The README's main job: parse two functions, verify them, derive their rules
//! (forward pass and pullback) for `f(x, y) = x*x + 3*y` and the suite's Rosenbrock
//! function, run them on the reference interpreter, and print values, gradients (with
//! closed forms to compare) and the IR.
//!
//! Run with `cargo run --example quickstart`. Native code joins when the JIT lands.

use gradlift::adjoint::eval::{Seeds, value_and_gradient};
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

    // Rosenbrock's rule: `x` is a `dup` slice, whose shadow receives the gradient.
    let rule_r = build_rrule(
        &module,
        rosenbrock,
        &RuleConfig::default_for(module.sig(rosenbrock)),
    )?;
    let mut engine = Interpreter::new(&rule_r.module);
    let out = value_and_gradient(
        &mut engine,
        &rule_r,
        &[Val::F64s(x.clone())],
        &Seeds::default(),
    )?;
    let n = x.len();
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
        "rosenbrock value {:?}, gradient {:?}\n   (closed form in Rust: {closed_form:.6?})",
        out.value, out.gradient[0]
    );

    println!("\nthe IR, as gradlift prints it (primal, forward pass, pullback):\n");
    print!("{}", rule.module);
    let derived = |name: &str| name.contains(".fwd") || name.contains(".rvs");
    for (id, decl) in rule_r.module.funcs.iter() {
        if derived(&decl.name) && rule.module.func_by_name(&decl.name).is_none() {
            let mut text = String::new();
            gradlift::ir::write::write_function(&mut text, &rule_r.module, id)?;
            println!("\n{text}");
        }
    }
    Ok(())
}
