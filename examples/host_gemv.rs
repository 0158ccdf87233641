//! A host function with a hand-written rule inside a differentiated function:
//! the suite's mlp loss (`examples/ir/mlp.ir`) with its two matrix-vector
//! products done by a Rust `gemv` (`examples/host/gemv.rs`), whose derivative is
//! a Rust closure too (`vjp @gemv = @gemv_vjp`, both `extern`). gradlift
//! differentiates the rest (tanh, the cross-entropy, the batch loop) and calls
//! the rule in the pullback.
//!
//! It checks the gradient three ways: against the mlp derived entirely by
//! gradlift (`examples/ir/mlp.ir`, same function), against finite differences
//! and the dot-product test (`check_rule_with_hosts`), and the JIT against the
//! interpreter. Then it times the primal and the gradient of both versions
//! (best of N, in turns), the host functions both borrowing the engine's buffers
//! (`Hosts::bind_args`, the default here) and copying them (`Hosts::bind`). Exits with an error if a check fails.
//!
//! `cargo run --release --example host_gemv` (`--quick` checks without timing).

#[path = "host/gemv.rs"]
mod gemv;

use std::time::Instant;

use gradlift::adjoint::{
    Activity, CheckOptions, RuleConfig, Seeds, check_rule_with_hosts, value_and_gradient,
};
use gradlift::ir::interp::{Interpreter, Val};
use gradlift::ir::parse;
use gradlift::suite::{MLP_BATCH, mlp_input};
use gradlift::{Pipeline, Workspace};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let quick = std::env::args().any(|a| a == "--quick");
    let hosts = gemv::hosts();
    let with_host = parse(gemv::MLP_GEMV_IR)?;
    let derived_text =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/examples/ir/mlp.ir"))?;
    let derived = parse(&derived_text)?;

    let p = mlp_input(MLP_BATCH);
    let labels: Vec<i64> = (0..MLP_BATCH as i64).map(|b| b % 10).collect();
    let args: Vec<Val> = [&p.x, &p.w1, &p.b1, &p.w2, &p.b2]
        .iter()
        .map(|v| Val::F64s(v.to_vec()))
        .chain([Val::I64s(labels)])
        .collect();
    use Activity::{Const, Dup};
    let params = [Const, Dup, Dup, Dup, Dup, Const];
    let config = |m: &gradlift::ir::Module| {
        let id = m.func_by_name("mlp").expect("@mlp");
        RuleConfig::default_for(m.sig(id)).with_params(params)
    };

    let pipeline = Pipeline::new().with_hosts(hosts.clone());
    let host_grad = pipeline.compile_gradient(&with_host, "mlp", Some(&config(&with_host)))?;
    // The same host functions with the copying protocol, for comparison.
    let copying = Pipeline::new().with_hosts(gemv::copying_hosts());
    let copy_grad = copying.compile_gradient(&with_host, "mlp", Some(&config(&with_host)))?;
    let plain = Pipeline::new();
    let derived_grad = plain.compile_gradient(&derived, "mlp", Some(&config(&derived)))?;
    let mut ws = Workspace::new();
    let g = host_grad.value_and_gradient(&mut ws, &args)?;
    let d = derived_grad.value_and_gradient(&mut ws, &args)?;
    let c = copy_grad.value_and_gradient(&mut ws, &args)?;
    if c.gradient != g.gradient || c.value != g.value {
        return Err("the borrowing and the copying host functions disagree".into());
    }

    // 1. The same loss and gradient as the mlp gradlift derives by itself.
    let value = |v: &Option<Vec<Val>>| match v.as_deref() {
        Some([Val::F64(x)]) => *x,
        other => panic!("a value: {other:?}"),
    };
    let (gv, dv) = (value(&g.value), value(&d.value));
    println!("loss: host gemv {gv:.15}, derived {dv:.15}");
    let mut worst: f64 = ((gv - dv) / dv).abs();
    for (k, (a, b)) in g.gradient.iter().zip(&d.gradient).enumerate() {
        if let (Some(Val::F64s(a)), Some(Val::F64s(b))) = (a, b) {
            for (x, y) in a.iter().zip(b) {
                worst = worst.max((x - y).abs() / y.abs().max(1e-12));
            }
            println!(
                "d{}: {} entries, e.g. {:.6e} (derived {:.6e})",
                ["X", "W1", "b1", "W2", "b2", "y"][k],
                a.len(),
                a[1],
                b[1]
            );
        }
    }
    println!("largest relative difference from the derived gradient: {worst:.2e}");
    if worst > 1e-10 {
        return Err(
            format!("the host rule's gradient differs from the derived one by {worst:e}").into(),
        );
    }

    // 2. Finite differences and the dot-product test, on the interpreter.
    let id = with_host.func_by_name("mlp").expect("@mlp");
    let report = check_rule_with_hosts(
        &with_host,
        id,
        &config(&with_host),
        &args,
        &CheckOptions::f64(),
        &hosts,
    )?;
    println!(
        "check_rule: {} coordinates against finite differences, {} dot-product trials: ok",
        report.coords.len(),
        report.dot.len()
    );

    // 3. The JIT against the interpreter, on the same rule.
    let mut interp = Interpreter::new(&host_grad.rule().module).with_hosts(&hosts);
    let i = value_and_gradient(&mut interp, host_grad.rule(), &args, &Seeds::default())?;
    if i.gradient != g.gradient || i.value != g.value {
        return Err("the JIT and the interpreter disagree".into());
    }
    println!("JIT = interpreter, bit for bit");
    if quick {
        return Ok(());
    }

    // Timing: best of 7 rounds of 200 calls, the six in turns.
    let host_fn = pipeline.compile_function(&with_host, "mlp")?;
    let copy_fn = copying.compile_function(&with_host, "mlp")?;
    let derived_fn = plain.compile_function(&derived, "mlp")?;
    let mut primal_args = args.clone();
    let rounds = 7;
    let calls = 200;
    let mut best = [f64::INFINITY; 6];
    for _ in 0..rounds {
        for (k, best) in best.iter_mut().enumerate() {
            let t = Instant::now();
            for _ in 0..calls {
                match k {
                    0 => drop(host_fn.call(&mut ws, &mut primal_args)?),
                    1 => drop(host_grad.value_and_gradient(&mut ws, &args)?),
                    2 => drop(copy_fn.call(&mut ws, &mut primal_args)?),
                    3 => drop(copy_grad.value_and_gradient(&mut ws, &args)?),
                    4 => drop(derived_fn.call(&mut ws, &mut primal_args)?),
                    _ => drop(derived_grad.value_and_gradient(&mut ws, &args)?),
                }
            }
            *best = best.min(t.elapsed().as_secs_f64() * 1e3 / calls as f64);
        }
    }
    println!(
        "\n| mlp, B = {MLP_BATCH} (best of {rounds} x {calls} calls) | primal ms | gradient ms | gradient / primal |"
    );
    println!("|---|---:|---:|---:|");
    for (label, k) in [
        ("host gemv + host rule, borrowing (`Hosts::bind_args`)", 0),
        ("host gemv + host rule, copying (`Hosts::bind`)", 2),
        ("derived by gradlift (examples/ir/mlp.ir)", 4),
    ] {
        println!(
            "| {label} | {:.4} | {:.4} | {:.2} |",
            best[k],
            best[k + 1],
            best[k + 1] / best[k]
        );
    }
    Ok(())
}
