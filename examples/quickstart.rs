//! The README's main job: parse two functions, verify them, run them on the reference
//! interpreter, and print their values and IR.
//!
//! Run with `cargo run --example quickstart`. Gradients join this demo when reverse
//! mode lands (the `adjoint` crate), and native code when the JIT does.

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

    println!("gradients: not yet (reverse mode is the next step of the roadmap)");
    println!("\nthe IR, as gradlift prints it:\n");
    print!("{module}");
    Ok(())
}
