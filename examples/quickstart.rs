//! The README's main job: two ordinary Rust functions, `f(x, y) = x*x + 3y` and the
//! Rosenbrock function over a slice, marked `#[autodiff_reverse]` (the signature
//! rules of nightly Rust's `std::autodiff`, on stable Rust). Their derivatives'
//! first calls trace them into gradlift IR, derive the rules (forward pass and
//! pullback) and compile them to native code with Cranelift. It prints values,
//! gradients (next to closed forms computed here in plain Rust), the time of a
//! compiled gradient call, and the IR the first calls wrote; last, the same `f` at
//! the lower level, generic over `Real` through `gradlift::autodiff`.
//!
//! Run with `cargo run --example quickstart`.

use std::time::Instant;

use gradlift::autodiff_reverse;

/// `f(x, y) = x*x + 3y`. The attribute adds `d_f(x, y, seed) -> (f, df/dx, df/dy)`,
/// and `d_f_grad(x, y)`, the same with a seed of 1.
#[autodiff_reverse(d_f, Active, Active, Active)]
fn f(x: f64, y: f64) -> f64 {
    x * x + 3.0 * y
}

/// Rosenbrock's function, plain Rust. `x` is `Duplicated`: `d_rosenbrock(x, dx,
/// seed)` adds the gradient into the shadow `dx`; `d_rosenbrock_grad(x)` returns
/// the value and a fresh gradient.
#[autodiff_reverse(d_rosenbrock, Duplicated, Active)]
fn rosenbrock(x: &[f64]) -> f64 {
    let mut s = 0.0;
    for i in 1..x.len() {
        let a = x[i - 1];
        let d = x[i] - a * a;
        s += 100.0 * d * d + (1.0 - a) * (1.0 - a);
    }
    s
}

/// Rosenbrock's gradient, worked out by hand.
fn rosenbrock_closed_form(x: &[f64]) -> Vec<f64> {
    let n = x.len();
    (0..n)
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
        .collect()
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // The first call of each derivative writes its IR here (GRADLIFT_DUMP=dir does
    // the same without changing the program).
    let dump = std::env::temp_dir().join(format!("gradlift-quickstart-{}", std::process::id()));
    gradlift::autodiff::set_dump_dir(Some(&dump));

    // f: the function itself, then its derivative (the first call traces, derives
    // and compiles it; later calls run the compiled code).
    let (value, dx, dy) = d_f(2.0, 1.0, 1.0);
    println!(
        "f(2, 1) = {} natively, {value} compiled; gradient ({dx}, {dy}), closed form (2x, 3) = ({}, 3)",
        f(2.0, 1.0),
        2.0 * 2.0
    );
    assert_eq!((value, dx, dy), (7.0, 4.0, 3.0));
    assert_eq!(d_f_grad(-1.0, 5.0), (16.0, -2.0, 3.0));

    // Rosenbrock: the first call, timed, includes tracing, deriving and compiling.
    let x = [-1.2, 1.0, 0.5, 0.8, 1.5];
    let start = Instant::now();
    let (value, grad) = d_rosenbrock_grad(&x);
    let first_ms = start.elapsed().as_secs_f64() * 1e3;
    gradlift::autodiff::set_dump_dir(None);
    let closed_form = rosenbrock_closed_form(&x);
    println!("rosenbrock({x:?})");
    println!("  value    {value:.6} (natively {:.6})", rosenbrock(&x));
    println!("  gradient {grad:.6?}");
    println!("  by hand  {closed_form:.6?}");
    assert_eq!(value, rosenbrock(&x));
    for (g, c) in grad.iter().zip(&closed_form) {
        assert!((g - c).abs() <= 1e-12 * (1.0 + c.abs()), "{g} != {c}");
    }
    // With a shadow, as in Enzyme: the gradient is added into it.
    let mut shadow = vec![0.0; x.len()];
    d_rosenbrock(&x, &mut shadow, 1.0);
    d_rosenbrock(&x, &mut shadow, 1.0);
    for (s, g) in shadow.iter().zip(&grad) {
        assert!(
            (s - 2.0 * g).abs() <= 1e-12 * (1.0 + g.abs()),
            "{s} != 2 * {g}"
        );
    }
    println!("  two calls into one shadow leave twice the gradient in it");

    // Native speed: a compiled gradient call at n = 100,000.
    let big: Vec<f64> = (0..100_000).map(|i| (i as f64 * 0.37).sin()).collect();
    let mut shadow = vec![0.0; big.len()];
    d_rosenbrock(&big, &mut shadow, 1.0); // sizes this thread's buffers
    let runs = 20;
    let start = Instant::now();
    for _ in 0..runs {
        d_rosenbrock(&big, &mut shadow, 1.0);
    }
    let gradient_ms = start.elapsed().as_secs_f64() / f64::from(runs) * 1e3;
    shadow.fill(0.0);
    d_rosenbrock(&big, &mut shadow, 1.0);
    let expected = rosenbrock_closed_form(&big);
    let worst = shadow
        .iter()
        .zip(&expected)
        .map(|(g, c)| (g - c).abs() / (1.0 + c.abs()))
        .fold(0.0, f64::max);
    assert!(worst <= 1e-12, "gradient off by {worst}");
    println!(
        "gradient of rosenbrock at n = 100,000: {gradient_ms:.3} ms a call \
         (the first call, which traced, derived and compiled it and wrote its IR: {first_ms:.1} ms)"
    );

    // The IR the first calls wrote: f's forward pass and pullback.
    let mut written: Vec<String> = std::fs::read_dir(&dump)?
        .map(|e| Ok(e?.file_name().to_string_lossy().into_owned()))
        .collect::<std::io::Result<_>>()?;
    written.sort();
    println!("\nwritten into {}: {}", dump.display(), written.join(" "));
    for stage in ["fwd", "rvs"] {
        let text = std::fs::read_to_string(dump.join(format!("d_f.{stage}.ir")))?;
        assert!(text.contains(&format!("func @f.{stage}(")));
        print!("\nd_f.{stage}.ir:\n{text}");
    }
    std::fs::remove_dir_all(&dump)?;

    // The lower level: the same f, generic over `Real` (f64 natively, Var traced),
    // through `gradlift::autodiff`, with the activities chosen at each call.
    lower_level()
}

fn lower_level() -> Result<(), Box<dyn std::error::Error>> {
    use gradlift::trace::prelude::*;
    use gradlift::{Active, Const, autodiff};

    fn f<T: Real>(x: T, y: T) -> T {
        x * x + y * 3.0
    }
    let mut df = autodiff("f", f::<Var>)?;
    let both = df.gradient((Active(2.0), Active(1.0)))?;
    let x_only = df.gradient((Active(2.0), Const(1.0)))?;
    println!(
        "\nlower level: gradlift::autodiff on f<T: Real>: {both:?}; with y constant: {x_only:?}"
    );
    assert_eq!((both, x_only), ((7.0, (4.0, 3.0)), (7.0, (4.0, ()))));
    Ok(())
}
