//! A large straight-line function runs in the stack it needs: the JIT bounds each
//! function's native frame by the frame Cranelift laid out, not by 32 bytes per
//! value. Before, a function of 10,000 values was refused on a 256 KiB stack
//! ("native stack exhausted at call depth 0", its bound being 321 KB) although its
//! frame is a few bytes; and 300,000 straight-line instructions were refused on
//! any ordinary stack.

use gradlift::ir::parse;
use gradlift::{CompiledFunction, CompiledGradient, Val, Workspace};

/// `x + x + ... + x` (`n + 1` terms, one value each) times `x`.
fn chain(n: usize) -> String {
    let mut t = String::from("func @chain(%x: f64) -> f64 {\nentry:\n    %v0 = fadd %x, 0.0\n");
    for k in 1..=n {
        t.push_str(&format!("    %v{k} = fadd %v{}, %x\n", k - 1));
    }
    t.push_str(&format!("    %r = fmul %v{n}, %x\n    ret %r\n}}\n"));
    t
}

#[test]
fn ten_thousand_values_on_a_small_stack() {
    let n = 10_000;
    let m = parse(&chain(n)).unwrap();
    let f = CompiledFunction::new(&m, "chain").unwrap();
    let grad = CompiledGradient::new(&m, "chain").unwrap();
    // ((n + 1) x) x, whose derivative is 2 (n + 1) x.
    let run = move || {
        let mut ws = Workspace::new();
        let y = f.call(&mut ws, &mut [Val::F64(0.5)]).unwrap();
        let g = grad.value_and_gradient(&mut ws, &[Val::F64(0.5)]).unwrap();
        (y, g.gradient)
    };
    let (y, g) = std::thread::Builder::new()
        .stack_size(256 * 1024)
        .spawn(run)
        .unwrap()
        .join()
        .unwrap();
    let k = (n + 1) as f64;
    assert_eq!(y, [Val::F64(k * 0.25)]);
    assert_eq!(g, [Some(Val::F64(2.0 * k * 0.5))]);
}
