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

; f(x) = sum_{i<n-1} 100 (x[i+1] - x[i]^2)^2 + (1 - x[i])^2
func @rosenbrock(%x: [f64]) -> f64 {
entry:
    %n = len %x
    %m = isub %n, 1
    jump head
head:
    %i = phi i64 [entry: 0, body: %i1]
    %acc = phi f64 [entry: 0.0, body: %acc1]
    %more = icmp lt %i, %m
    br %more, body, exit
body:
    %a = load %x[%i]
    %i1 = iadd %i, 1
    %b = load %x[%i1]
    %a2 = fmul %a, %a
    %d = fsub %b, %a2
    %d2 = fmul %d, %d
    %t1 = fmul 100.0, %d2
    %e = fsub 1.0, %a
    %t2 = fmul %e, %e
    %t = fadd %t1, %t2
    %acc1 = fadd %acc, %t
    jump head
exit:
    ret %acc
}
";

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let module = parse(SOURCE)?;
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
    println!("rosenbrock({x:.4?}) = {value:?}");

    println!("gradients: not yet (reverse mode is the next step of the roadmap)");
    println!("\nthe IR, as gradlift prints it:\n");
    print!("{module}");
    Ok(())
}
