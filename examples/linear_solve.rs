//! A linear solve inside a differentiated function, with the adjoint-solve
//! rule: `x = A⁻¹ b` by nalgebra's LU decomposition (a registry crate, called as
//! the host function of `extern @solve`), and its reverse-mode rule, also on the
//! host (`vjp @solve = @solve_vjp`):
//!
//! ```text
//! λ = A⁻ᵀ x̄,   b̄ += λ,   Ā -= λ xᵀ,   x̄ = 0   (x's old contents do not matter)
//! ```
//!
//! gradlift differentiates the rest of `@fit(A, b, w) = Σ w_i x_i²` and calls
//! the rule in the pullback. The gradient is checked against finite differences
//! and the dot-product test (`check_rule_with_hosts`), the JIT against the
//! interpreter, and `∂f/∂b` against its closed form `A⁻ᵀ (2 w ∘ x)`. A singular
//! matrix is a run-time error from the host function, not a wrong number.
//! Exits with an error if a check fails.
//!
//! `cargo run --example linear_solve`

use gradlift::adjoint::{
    CheckOptions, RuleConfig, Seeds, check_rule_with_hosts, value_and_gradient,
};
use gradlift::ir::interp::{Interpreter, Val};
use gradlift::ir::parse;
use gradlift::{CompiledGradient, Hosts, Workspace};
use nalgebra::{DMatrix, DVector};

const FIT: &str = "
; x = A^-1 b for a row-major n x n matrix A (n = len b): nalgebra's LU.
extern @solve([f64], [f64], mut [f64])
; A, b and x as they were at the call; the shadows of A, b and x.
extern @solve_vjp([f64], [f64], [f64], mut [f64], mut [f64], mut [f64])
vjp @solve = @solve_vjp

; f(A, b, w) = sum_i w_i x_i^2 where A x = b
func @fit(%A: [f64], %b: [f64], %w: [f64]) -> f64 {
entry:
    %n = len %b
    %x = alloc f64, %n
    call @solve(%A, %b, %x)
    jump head
head:
    %i = phi i64 [entry: 0, body: %i1]
    %acc = phi f64 [entry: 0.0, body: %acc1]
    %more = icmp lt %i, %n
    br %more, body, done
body:
    %xi = load %x[%i]
    %wi = load %w[%i]
    %sq = fmul %xi, %xi
    %t = fmul %wi, %sq
    %acc1 = fadd %acc, %t
    %i1 = iadd %i, 1
    jump head
done:
    ret %acc
}
";

/// `A⁻¹ b` (or `A⁻ᵀ b`), or why not.
fn solve(a: &[f64], b: &[f64], transpose: bool) -> Result<DVector<f64>, String> {
    let n = b.len();
    if a.len() != n * n {
        return Err(format!("A has {} elements for n = {n}", a.len()));
    }
    let m = DMatrix::from_row_slice(n, n, a);
    let m = if transpose { m.transpose() } else { m };
    m.lu()
        .solve(&DVector::from_column_slice(b))
        .ok_or_else(|| "the matrix is singular".to_string())
}

fn hosts() -> Hosts {
    Hosts::new()
        .bind("solve", |v: &mut [Val]| match v {
            [Val::F64s(a), Val::F64s(b), Val::F64s(x)] => {
                x.copy_from_slice(solve(a, b, false)?.as_slice());
                Ok(vec![])
            }
            _ => Err("solve takes ([f64], [f64], mut [f64])".into()),
        })
        .bind("solve_vjp", |v: &mut [Val]| match v {
            [
                Val::F64s(a),
                Val::F64s(b),
                _x,
                Val::F64s(da),
                Val::F64s(db),
                Val::F64s(dx),
            ] => {
                let n = b.len();
                let x = solve(a, b, false)?;
                let lambda = solve(a, dx, true)?;
                for i in 0..n {
                    db[i] += lambda[i];
                    for j in 0..n {
                        da[i * n + j] -= lambda[i] * x[j];
                    }
                }
                dx.fill(0.0);
                Ok(vec![])
            }
            _ => Err("solve_vjp takes A, b, x and their shadows".into()),
        })
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let module = parse(FIT)?;
    let hosts = hosts();
    let n = 6;
    // A diagonally dominant (well conditioned), b and w smooth.
    let a: Vec<f64> = (0..n * n)
        .map(|k| {
            let (i, j) = (k / n, k % n);
            if i == j {
                4.0 + i as f64
            } else {
                (0.7 * i as f64 - 0.3 * j as f64).sin()
            }
        })
        .collect();
    let b: Vec<f64> = (0..n).map(|i| (0.5 * i as f64).cos()).collect();
    let w: Vec<f64> = (0..n).map(|i| 1.0 + 0.25 * i as f64).collect();
    let args = [
        Val::F64s(a.clone()),
        Val::F64s(b.clone()),
        Val::F64s(w.clone()),
    ];

    let fit = module.func_by_name("fit").ok_or("no @fit")?;
    let config = RuleConfig::default_for(module.sig(fit));
    let grad = CompiledGradient::with_config(&module, "fit", &config, &hosts)?;
    let g = grad.value_and_gradient(&mut Workspace::new(), &args)?;
    let Some([Val::F64(value)]) = g.value.as_deref() else {
        return Err("no value".into());
    };
    println!("f(A, b, w) = {value:.12}");

    // Finite differences and the dot-product test, every coordinate of A, b, w.
    let opts = CheckOptions {
        max_coords: 64,
        ..CheckOptions::f64()
    };
    let report = check_rule_with_hosts(&module, fit, &config, &args, &opts, &hosts)?;
    println!(
        "check_rule: {} coordinates against finite differences, {} dot-product trials: ok",
        report.coords.len(),
        report.dot.len()
    );
    let worst = report
        .gradient
        .iter()
        .zip(&report.finite_differences)
        .map(|(g, f)| (g - f).abs())
        .fold(0.0, f64::max);
    println!("largest difference from finite differences: {worst:.1e}");

    // The JIT against the interpreter, on the same rule.
    let mut interp = Interpreter::new(&grad.rule().module).with_hosts(&hosts);
    let i = value_and_gradient(&mut interp, grad.rule(), &args, &Seeds::default())?;
    if i.gradient != g.gradient {
        return Err("the JIT and the interpreter disagree".into());
    }
    println!("JIT = interpreter, bit for bit");

    // ∂f/∂b = A⁻ᵀ (2 w ∘ x), in closed form.
    let x = solve(&a, &b, false)?;
    let g_x: Vec<f64> = (0..n).map(|i| 2.0 * w[i] * x[i]).collect();
    let want = solve(&a, &g_x, true)?;
    let Some(Val::F64s(db)) = &g.gradient[1] else {
        return Err("no gradient for b".into());
    };
    let err = db
        .iter()
        .zip(want.iter())
        .map(|(p, q)| (p - q).abs() / q.abs().max(1e-12))
        .fold(0.0, f64::max);
    println!("df/db = {db:.6?}\n  closed form A^-T (2 w x): largest relative difference {err:.1e}");
    if err > 1e-12 {
        return Err(format!("df/db is off by {err:e}").into());
    }

    // A singular matrix: the host function's error, with where it happened.
    let singular = [Val::F64s(vec![1.0; n * n]), Val::F64s(b), Val::F64s(w)];
    match grad.value_and_gradient(&mut Workspace::new(), &singular) {
        Err(e) => println!("a singular A: {e}"),
        Ok(_) => return Err("a singular matrix gave a gradient".into()),
    }
    Ok(())
}
