//! The suite programs of `gradlift::suite`, written once as generic Rust, checked
//! three ways at small sizes:
//!
//! - natively on `f64`, against a straightforward Rust primal written here;
//! - traced to IR and run on the interpreter, against the native run;
//! - traced, differentiated and JIT-compiled ([`CompiledGradient`]), against
//!   gradients derived by hand and written here (and, for some, against central
//!   finite differences of the native program).
//!
//! And the traced IR of the loops does not grow with the size: the same block and
//! instruction counts at two sizes fixed at trace time, with a real loop (a back
//! edge into a block with phis).

use gradlift::adjoint::{Activity, RuleConfig};
use gradlift::ir::dominators::DominatorTree;
use gradlift::ir::flowgraph::ControlFlowGraph;
use gradlift::ir::interp::{Interpreter, Val};
use gradlift::ir::{Function, Module};
use gradlift::suite::{self, MLP_HIDDEN as H, MLP_IN as K, MLP_OUT as C, ODE_DT};
use gradlift::{CompiledGradient, Hosts, Workspace};
use gradlift_trace::{Float, Slice, SliceRead, SliceWrite, Var, for_range, trace};

// ---------------------------------------------------------------------------------
// Comparison and running helpers.

/// `a` and `b` agree to relative `rel`, or to `rel * scale` absolutely (for entries
/// of a vector whose largest entry is `scale`, where cancellation makes a small
/// entry's relative error meaningless).
fn close(a: f64, b: f64, rel: f64, scale: f64) -> bool {
    a == b || (a - b).abs() <= rel * a.abs().max(b.abs()).max(1e-3 * scale)
}

#[track_caller]
fn assert_close(what: &str, got: f64, want: f64, rel: f64) {
    assert!(
        close(got, want, rel, 0.0),
        "{what}: got {got:e}, expected {want:e} (rel {rel:e})"
    );
}

#[track_caller]
fn assert_all_close(what: &str, got: &[f64], want: &[f64], rel: f64) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    let scale = want.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    for (k, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            close(*g, *w, rel, scale),
            "{what}[{k}]: got {g:e}, expected {w:e} (rel {rel:e})\n got  {got:?}\n want {want:?}"
        );
    }
}

/// Runs `@name` of `module` on the interpreter; its one `f64` result.
fn interpret(module: &Module, name: &str, mut args: Vec<Val>) -> f64 {
    let id = module.func_by_name(name).expect("traced function");
    match Interpreter::new(module).call(id, &mut args) {
        Ok(r) => match r[..] {
            [Val::F64(v)] => v,
            _ => panic!("@{name}: results {r:?}"),
        },
        Err(e) => panic!("@{name}: {e}\n{module}"),
    }
}

/// Derives and compiles `@name` (default activities, or `params` when given) and
/// returns the value and, per parameter, its gradient (`None` for const).
fn jit_gradient(
    module: &Module,
    name: &str,
    params: Option<&[Activity]>,
    args: &[Val],
) -> (f64, Vec<Option<Vec<f64>>>) {
    let grad = match params {
        None => CompiledGradient::new(module, name),
        Some(p) => {
            let id = module.func_by_name(name).expect("traced function");
            let config = RuleConfig::default_for(module.sig(id)).with_params(p);
            CompiledGradient::with_config(module, name, &config, &Hosts::new())
        }
    }
    .unwrap_or_else(|e| panic!("@{name}: {e}\n{module}"));
    let g = grad
        .value_and_gradient(&mut Workspace::new(), args)
        .unwrap_or_else(|e| panic!("@{name}: {e}"));
    let value = match g.value.as_deref() {
        Some([Val::F64(v)]) => *v,
        other => panic!("@{name}: value {other:?}"),
    };
    let grads = g
        .gradient
        .into_iter()
        .map(|d| match d {
            None => None,
            Some(Val::F64s(v)) => Some(v),
            Some(Val::F64(v)) => Some(vec![v]),
            Some(other) => panic!("@{name}: gradient {other:?}"),
        })
        .collect();
    (value, grads)
}

/// The checks shared by every program: the traced module run on the interpreter and
/// the compiled gradient's value both agree with the native value; returns the
/// gradients.
fn traced_checks(
    module: &Module,
    name: &str,
    params: Option<&[Activity]>,
    args: Vec<Val>,
    native: f64,
) -> Vec<Option<Vec<f64>>> {
    let interp = interpret(module, name, args.clone());
    assert_close(
        &format!("@{name} interpreter vs native"),
        interp,
        native,
        1e-12,
    );
    let (value, grads) = jit_gradient(module, name, params, &args);
    assert_close(
        &format!("@{name} JIT value vs native"),
        value,
        native,
        1e-12,
    );
    grads
}

/// Central finite differences of `f` at `x`, for the coordinates `coords`.
fn central_diff(f: impl Fn(&[f64]) -> f64, x: &[f64], coords: &[usize]) -> Vec<f64> {
    let mut xp = x.to_vec();
    coords
        .iter()
        .map(|&k| {
            let h = 1e-6 * x[k].abs().max(1.0);
            xp[k] = x[k] + h;
            let up = f(&xp);
            xp[k] = x[k] - h;
            let down = f(&xp);
            xp[k] = x[k];
            (up - down) / (2.0 * h)
        })
        .collect()
}

const SIZES: [usize; 2] = [7, 50];

// ---------------------------------------------------------------------------------
// sumsq

fn sumsq_primal(x: &[f64]) -> f64 {
    x.iter().map(|v| v * v).sum()
}

fn sumsq_grad(x: &[f64]) -> Vec<f64> {
    x.iter().map(|v| 2.0 * v).collect()
}

#[test]
fn sumsq_native_traced_and_gradient() {
    let traced = trace("sumsq", suite::sumsq::<Var>).unwrap();
    for n in SIZES {
        let x = suite::sumsq_input(n);
        let native = suite::sumsq::<f64>(&x);
        assert_close("sumsq native", native, sumsq_primal(&x), 1e-12);
        let g = traced_checks(
            &traced.module,
            "sumsq",
            None,
            vec![Val::F64s(x.clone())],
            native,
        );
        assert_all_close("d sumsq", g[0].as_ref().unwrap(), &sumsq_grad(&x), 1e-9);
    }
}

// ---------------------------------------------------------------------------------
// rosenbrock

fn rosenbrock_primal(x: &[f64]) -> f64 {
    x.windows(2)
        .map(|w| 100.0 * (w[1] - w[0] * w[0]).powi(2) + (1.0 - w[0]).powi(2))
        .sum()
}

/// d/dx_i: -400 x_i (x_{i+1} - x_i^2) - 2 (1 - x_i) from term i (i < n-1), plus
/// 200 (x_i - x_{i-1}^2) from term i-1 (i > 0).
fn rosenbrock_grad(x: &[f64]) -> Vec<f64> {
    let n = x.len();
    let mut g = vec![0.0; n];
    for i in 0..n.saturating_sub(1) {
        let a = x[i + 1] - x[i] * x[i];
        g[i] += -400.0 * x[i] * a - 2.0 * (1.0 - x[i]);
        g[i + 1] += 200.0 * a;
    }
    g
}

#[test]
fn rosenbrock_native_traced_and_gradient() {
    let traced = trace("rosenbrock", suite::rosenbrock::<Var>).unwrap();
    for n in SIZES {
        let x = suite::rosenbrock_input(n);
        let native = suite::rosenbrock::<f64>(&x);
        assert_close("rosenbrock native", native, rosenbrock_primal(&x), 1e-12);
        let g = traced_checks(
            &traced.module,
            "rosenbrock",
            None,
            vec![Val::F64s(x.clone())],
            native,
        );
        assert_all_close(
            "d rosenbrock",
            g[0].as_ref().unwrap(),
            &rosenbrock_grad(&x),
            1e-9,
        );
    }
}

// ---------------------------------------------------------------------------------
// logsumexp

fn logsumexp_primal(x: &[f64]) -> f64 {
    let m = x.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    m + x.iter().map(|v| (v - m).exp()).sum::<f64>().ln()
}

/// The softmax.
fn logsumexp_grad(x: &[f64]) -> Vec<f64> {
    let m = x.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let s: f64 = x.iter().map(|v| (v - m).exp()).sum();
    x.iter().map(|v| (v - m).exp() / s).collect()
}

#[test]
fn logsumexp_native_traced_and_gradient() {
    let traced = trace("logsumexp", suite::logsumexp::<Var>).unwrap();
    for n in SIZES {
        let x = suite::logsumexp_input(n);
        let native = suite::logsumexp::<f64>(&x);
        assert_close("logsumexp native", native, logsumexp_primal(&x), 1e-12);
        let g = traced_checks(
            &traced.module,
            "logsumexp",
            None,
            vec![Val::F64s(x.clone())],
            native,
        );
        assert_all_close(
            "d logsumexp",
            g[0].as_ref().unwrap(),
            &logsumexp_grad(&x),
            1e-9,
        );
    }
}

// ---------------------------------------------------------------------------------
// normalize

fn normalize_primal(x: &[f64], w: &[f64]) -> f64 {
    let dot: f64 = x.iter().zip(w).map(|(a, b)| a * b).sum();
    dot / sumsq_primal(x).sqrt()
}

/// f = (w.x) / r with r = |x|: df/dx = w / r - (w.x) x / r^3.
fn normalize_grad(x: &[f64], w: &[f64]) -> Vec<f64> {
    let r = sumsq_primal(x).sqrt();
    let dot: f64 = x.iter().zip(w).map(|(a, b)| a * b).sum();
    x.iter()
        .zip(w)
        .map(|(xi, wi)| wi / r - dot * xi / (r * r * r))
        .collect()
}

#[test]
fn normalize_native_traced_and_gradient() {
    let traced = trace("normalize", suite::normalize::<Var>).unwrap();
    let text = traced.module.to_string();
    // Naive: @norm is called inside the loop, not hoisted.
    assert!(text.contains("func @norm("), "{text}");
    assert_eq!(text.matches("call @norm").count(), 1, "{text}");
    for n in SIZES {
        let (x, w) = suite::normalize_input(n);
        let native = suite::normalize::<f64>(&x, &w);
        assert_close("normalize native", native, normalize_primal(&x, &w), 1e-12);
        let g = traced_checks(
            &traced.module,
            "normalize",
            Some(&[Activity::Dup, Activity::Const]),
            vec![Val::F64s(x.clone()), Val::F64s(w.clone())],
            native,
        );
        assert!(g[1].is_none(), "w is const");
        assert_all_close(
            "d normalize",
            g[0].as_ref().unwrap(),
            &normalize_grad(&x, &w),
            1e-9,
        );
    }
}

/// The optimiser hoists the traced `@norm` call out of the loop over `i` (under the
/// loop's test): the primal becomes O(n), computes the same value bit for bit, and
/// differentiates (and compiles) to the same gradient.
#[test]
fn normalize_optimised_calls_norm_once() {
    let traced = trace("normalize", suite::normalize::<Var>).unwrap();
    let mut module = traced.module.clone();
    let report = gradlift::ir::opt::optimize(&mut module, &Default::default()).unwrap();
    assert_eq!(report.calls_hoisted, 1, "{report}\n{module}");
    assert!(report.restored.is_empty(), "{report}");
    let f = module
        .function(module.func_by_name("normalize").unwrap())
        .unwrap();
    let cfg = ControlFlowGraph::new(f);
    let dom = DominatorTree::new(&cfg);
    let (call_block, _) = f
        .placed_insts()
        .find(|&(_, i)| f.insts[i].opcode == gradlift::ir::Opcode::Call)
        .unwrap();
    // The call's block is in no loop: no loop head (the target of a back edge)
    // dominates it.
    for &b in &f.layout {
        for h in f.successors(b) {
            if dom.dominates(h, b) {
                assert!(
                    !dom.dominates(h, call_block),
                    "the call is in a loop\n{module}"
                );
            }
        }
    }
    let steps = |m: &Module, args: &[Val]| {
        let mut engine = Interpreter::new(m);
        let out = engine
            .call_by_name("normalize", &mut args.to_vec())
            .unwrap();
        (out, engine.steps())
    };
    for n in [0, 1, 7, 200] {
        let (x, w) = suite::normalize_input(n);
        let args = [Val::F64s(x.clone()), Val::F64s(w.clone())];
        let (before, steps_before) = steps(&traced.module, &args);
        let (after, steps_after) = steps(&module, &args);
        assert_eq!(before, after, "n = {n}");
        if n == 200 {
            assert!(steps_before > 5 * 200 * 200, "{steps_before}");
            assert!(steps_after < 30 * 200, "{steps_after}");
        }
        // (At n = 1 the gradient is zero up to rounding, of either sign.)
        if n > 1 {
            let native = suite::normalize::<f64>(&x, &w);
            let g = traced_checks(
                &module,
                "normalize",
                Some(&[Activity::Dup, Activity::Const]),
                args.to_vec(),
                native,
            );
            assert_all_close(
                "d normalize, optimised",
                g[0].as_ref().unwrap(),
                &normalize_grad(&x, &w),
                1e-9,
            );
        }
    }
}

// ---------------------------------------------------------------------------------
// mlp

/// The forward pass of the mlp, kept for backprop: per row, the hidden activations
/// and the softmax probabilities; and the loss.
struct MlpForward {
    h: Vec<[f64; H]>,
    p: Vec<[f64; C]>,
    loss: f64,
}

fn mlp_forward(inp: &suite::MlpInput) -> MlpForward {
    let batch = inp.x.len() / K;
    let mut out = MlpForward {
        h: Vec::new(),
        p: Vec::new(),
        loss: 0.0,
    };
    for b in 0..batch {
        let xb = &inp.x[b * K..(b + 1) * K];
        let mut h = [0.0; H];
        for (j, hj) in h.iter_mut().enumerate() {
            let a: f64 = inp.b1[j] + (0..K).map(|k| xb[k] * inp.w1[k * H + j]).sum::<f64>();
            *hj = a.tanh();
        }
        let mut z = [0.0; C];
        for (c, zc) in z.iter_mut().enumerate() {
            *zc = inp.b2[c] + (0..H).map(|j| h[j] * inp.w2[j * C + c]).sum::<f64>();
        }
        let m = z.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let s: f64 = z.iter().map(|v| (v - m).exp()).sum();
        out.loss += m + s.ln() - z[b % C];
        out.p.push(z.map(|v| (v - m).exp() / s));
        out.h.push(h);
    }
    out.loss /= batch as f64;
    out
}

/// Backprop by hand: dz = (p - onehot(y_b)) / B; dW2 += h dz^T, db2 += dz;
/// dh = W2 dz; da = dh (1 - h^2); dW1 += x_b da^T, db1 += da.
/// Returns (dW1, db1, dW2, db2).
fn mlp_grad(inp: &suite::MlpInput) -> [Vec<f64>; 4] {
    let fw = mlp_forward(inp);
    let batch = fw.h.len();
    let (mut dw1, mut db1) = (vec![0.0; K * H], vec![0.0; H]);
    let (mut dw2, mut db2) = (vec![0.0; H * C], vec![0.0; C]);
    for b in 0..batch {
        let (h, p) = (&fw.h[b], &fw.p[b]);
        let mut dz = [0.0; C];
        for (c, d) in dz.iter_mut().enumerate() {
            let y = if c == b % C { 1.0 } else { 0.0 };
            *d = (p[c] - y) / batch as f64;
        }
        for j in 0..H {
            for c in 0..C {
                dw2[j * C + c] += h[j] * dz[c];
            }
        }
        for c in 0..C {
            db2[c] += dz[c];
        }
        for j in 0..H {
            let dh: f64 = (0..C).map(|c| inp.w2[j * C + c] * dz[c]).sum();
            let da = dh * (1.0 - h[j] * h[j]);
            db1[j] += da;
            for k in 0..K {
                dw1[k * H + j] += inp.x[b * K + k] * da;
            }
        }
    }
    [dw1, db1, dw2, db2]
}

fn mlp_args(inp: &suite::MlpInput) -> Vec<Val> {
    [&inp.x, &inp.w1, &inp.b1, &inp.w2, &inp.b2]
        .into_iter()
        .map(|v| Val::F64s(v.clone()))
        .collect()
}

#[test]
fn mlp_native_traced_and_gradient() {
    let traced = trace("mlp", suite::mlp::<Var>).unwrap();
    let x_const = [
        Activity::Const,
        Activity::Dup,
        Activity::Dup,
        Activity::Dup,
        Activity::Dup,
    ];
    for batch in [1, 3] {
        let inp = suite::mlp_input(batch);
        let native = suite::mlp::<f64>(&inp.x, &inp.w1, &inp.b1, &inp.w2, &inp.b2);
        assert_close("mlp native", native, mlp_forward(&inp).loss, 1e-12);
        let g = traced_checks(
            &traced.module,
            "mlp",
            Some(&x_const),
            mlp_args(&inp),
            native,
        );
        assert!(g[0].is_none(), "x is const");
        let want = mlp_grad(&inp);
        for (k, name) in ["dW1", "db1", "dW2", "db2"].into_iter().enumerate() {
            assert_all_close(name, g[k + 1].as_ref().unwrap(), &want[k], 1e-9);
        }
    }
}

// ---------------------------------------------------------------------------------
// ode

/// The trajectory (u_t, v_t), t = 0..=steps, by forward Euler.
fn ode_trajectory(p: &[f64], steps: usize) -> Vec<(f64, f64)> {
    let (a, b, c, d) = (p[0], p[1], p[2], p[3]);
    let mut traj = vec![(p[4], p[5])];
    for _ in 0..steps {
        let (u, v) = traj[traj.len() - 1];
        traj.push((
            u + ODE_DT * (a * u - b * u * v),
            v + ODE_DT * (d * u * v - c * v),
        ));
    }
    traj
}

fn ode_primal(p: &[f64], steps: usize) -> f64 {
    let (u, v) = ode_trajectory(p, steps)[steps];
    u * u + v * v
}

/// The adjoint by hand: lambda = (2 u_T, 2 v_T), swept backward through the stored
/// trajectory. One step is u' = u + dt (a u - b u v), v' = v + dt (d u v - c v):
/// the parameters gather lambda . d(u', v')/d(a, b, c, d), and lambda becomes
/// lambda J with J = d(u', v')/d(u, v). lambda at t = 0 is d/d(u0, v0).
fn ode_grad(p: &[f64], steps: usize) -> Vec<f64> {
    let (a, b, c, d) = (p[0], p[1], p[2], p[3]);
    let traj = ode_trajectory(p, steps);
    let (ut, vt) = traj[steps];
    let (mut lu, mut lv) = (2.0 * ut, 2.0 * vt);
    let mut g = [0.0; 6];
    for &(u, v) in traj[..steps].iter().rev() {
        g[0] += lu * ODE_DT * u;
        g[1] -= lu * ODE_DT * u * v;
        g[2] -= lv * ODE_DT * v;
        g[3] += lv * ODE_DT * u * v;
        let nu = lu * (1.0 + ODE_DT * (a - b * v)) + lv * ODE_DT * d * v;
        let nv = lu * (-ODE_DT * b * u) + lv * (1.0 + ODE_DT * (d * u - c));
        (lu, lv) = (nu, nv);
    }
    g[4] = lu;
    g[5] = lv;
    g.to_vec()
}

#[test]
fn ode_native_traced_and_gradient() {
    let traced = trace("ode", suite::ode::<Var>).unwrap();
    let p = suite::ode_input();
    for steps in [0, 20, 5000] {
        let native = suite::ode::<f64>(&p, steps);
        assert_close("ode native", native, ode_primal(&p, steps as usize), 1e-12);
        let args = vec![Val::F64s(p.clone()), Val::I64(steps)];
        let g = traced_checks(&traced.module, "ode", None, args, native);
        assert!(g[1].is_none(), "the step count is const");
        let want = ode_grad(&p, steps as usize);
        assert_all_close("d ode", g[0].as_ref().unwrap(), &want, 1e-9);
    }
}

// ---------------------------------------------------------------------------------
// branchy

fn branchy_primal(x: &[f64]) -> f64 {
    x.iter()
        .map(|&v| {
            if v > 0.0 {
                v.sin() * v
            } else {
                v.powi(3) - 2.0 * v
            }
        })
        .sum()
}

/// Piecewise: sin x + x cos x where x > 0, 3 x^2 - 2 elsewhere.
fn branchy_grad(x: &[f64]) -> Vec<f64> {
    x.iter()
        .map(|&v| {
            if v > 0.0 {
                v.sin() + v * v.cos()
            } else {
                3.0 * v * v - 2.0
            }
        })
        .collect()
}

#[test]
fn branchy_native_traced_and_gradient() {
    let traced = trace("branchy", suite::branchy::<Var>).unwrap();
    for n in SIZES {
        let x = suite::branchy_input(n);
        let native = suite::branchy::<f64>(&x);
        assert_close("branchy native", native, branchy_primal(&x), 1e-12);
        let g = traced_checks(
            &traced.module,
            "branchy",
            None,
            vec![Val::F64s(x.clone())],
            native,
        );
        assert_all_close("d branchy", g[0].as_ref().unwrap(), &branchy_grad(&x), 1e-9);
    }
    // Both arms, and x = 0 takes the else arm (derivative -2).
    let x = [0.0, -0.5, 0.5, -2.0, 2.0];
    let g = traced_checks(
        &traced.module,
        "branchy",
        None,
        vec![Val::F64s(x.to_vec())],
        branchy_primal(&x),
    );
    assert_all_close("d branchy", g[0].as_ref().unwrap(), &branchy_grad(&x), 1e-9);
    assert_eq!(g[0].as_ref().unwrap()[0], -2.0);
}

// ---------------------------------------------------------------------------------
// Finite differences: the compiled gradients against central differences of the
// native programs (an oracle independent of the hand-written gradients).

#[test]
fn gradients_agree_with_central_differences() {
    // rosenbrock, every coordinate.
    let x = suite::rosenbrock_input(7);
    let traced = trace("rosenbrock", suite::rosenbrock::<Var>).unwrap();
    let (_, g) = jit_gradient(&traced.module, "rosenbrock", None, &[Val::F64s(x.clone())]);
    let all: Vec<usize> = (0..x.len()).collect();
    let fd = central_diff(|x| suite::rosenbrock::<f64>(x), &x, &all);
    assert_all_close("rosenbrock vs fd", g[0].as_ref().unwrap(), &fd, 1e-6);

    // ode, every parameter, over enough steps for the rates to matter.
    let p = suite::ode_input();
    let traced = trace("ode", suite::ode::<Var>).unwrap();
    let args = [Val::F64s(p.clone()), Val::I64(2000)];
    let (_, g) = jit_gradient(&traced.module, "ode", None, &args);
    let fd = central_diff(|p| suite::ode::<f64>(p, 2000), &p, &[0, 1, 2, 3, 4, 5]);
    assert_all_close("ode vs fd", g[0].as_ref().unwrap(), &fd, 1e-6);

    // mlp, a few entries of W1 (x const).
    let inp = suite::mlp_input(3);
    let traced = trace("mlp", suite::mlp::<Var>).unwrap();
    let acts = [
        Activity::Const,
        Activity::Dup,
        Activity::Dup,
        Activity::Dup,
        Activity::Dup,
    ];
    let (_, g) = jit_gradient(&traced.module, "mlp", Some(&acts), &mlp_args(&inp));
    let coords = [0, 1, 63, 64, 500, K * H - 1];
    let fd = central_diff(
        |w1| suite::mlp::<f64>(&inp.x, w1, &inp.b1, &inp.w2, &inp.b2),
        &inp.w1,
        &coords,
    );
    let got: Vec<f64> = coords.iter().map(|&k| g[1].as_ref().unwrap()[k]).collect();
    assert_all_close("mlp dW1 vs fd", &got, &fd, 1e-6);
}

// ---------------------------------------------------------------------------------
// IR size: real loops, not unrolled.

/// What the size test compares: blocks, instructions and phis over every function
/// of the module, and whether there is a back edge (an edge into a block that
/// dominates its source) into a block with phis.
#[derive(Debug, PartialEq, Eq)]
struct Shape {
    blocks: usize,
    insts: usize,
    phis: usize,
    loops: usize,
}

fn loops_of(f: &Function) -> usize {
    let cfg = ControlFlowGraph::new(f);
    let dom = DominatorTree::new(&cfg);
    let mut n = 0;
    for &b in &f.layout {
        for s in f.successors(b) {
            if dom.dominates(s, b) {
                assert!(!f.blocks[s].phis.is_empty(), "a loop head without phis");
                n += 1;
            }
        }
    }
    n
}

fn shape(module: &Module) -> Shape {
    let mut sh = Shape {
        blocks: 0,
        insts: 0,
        phis: 0,
        loops: 0,
    };
    for (_, f) in module.defined() {
        sh.blocks += f.layout.len();
        for &b in &f.layout {
            sh.insts += f.blocks[b].insts.len();
            sh.phis += f.blocks[b].phis.len();
        }
        sh.loops += loops_of(f);
    }
    sh
}

/// `prog` on a local buffer of the constant length `n` (copied from `x`, cyclically):
/// the program's loops run to a bound fixed when tracing.
fn on_fixed_len(n: i64, prog: fn(Slice<f64>) -> Var) -> impl Fn(Slice<f64>) -> Var {
    move |x: Slice<f64>| {
        let len = Var::from(n);
        let mut buf = <Var as Float>::alloc(len);
        for_range(0, len, (), |i, ()| buf.set(i, x.at(i % x.len())));
        prog(buf.read_only())
    }
}

#[test]
fn traced_loops_do_not_grow_with_the_size() {
    let (small, large) = (100, 100_000);

    // branchy and logsumexp, on buffers of a constant length.
    for (name, prog, input) in [
        (
            "branchy",
            suite::branchy::<Var> as fn(Slice<f64>) -> Var,
            suite::branchy_input as fn(usize) -> Vec<f64>,
        ),
        ("logsumexp", suite::logsumexp::<Var>, suite::logsumexp_input),
    ] {
        let a = trace(name, on_fixed_len(small, prog)).unwrap();
        let b = trace(name, on_fixed_len(large, prog)).unwrap();
        let (sa, sb) = (shape(&a.module), shape(&b.module));
        assert_eq!(sa, sb, "@{name}: {}\nvs\n{}", a.module, b.module);
        // The copy loop, and the program's own loops: branchy 1, logsumexp 2.
        let own = if name == "branchy" { 1 } else { 2 };
        assert_eq!(sa.loops, 1 + own, "@{name}: {}", a.module);
        // And it computes the program on the first `small` elements.
        let x = input(small as usize);
        let native = if name == "branchy" {
            suite::branchy::<f64>(&x)
        } else {
            suite::logsumexp::<f64>(&x)
        };
        let got = interpret(&a.module, name, vec![Val::F64s(x)]);
        assert_close(name, got, native, 1e-12);

        // The program itself, traced as it is: loops over len(x).
        let plain = trace(name, prog).unwrap();
        assert_eq!(shape(&plain.module).loops, own, "@{name}: {}", plain.module);
    }

    // ode, with the step count a constant of the trace.
    let fixed = |steps: i64| move |p: Slice<f64>| suite::ode::<Var>(p, Var::from(steps));
    let a = trace("ode", fixed(small)).unwrap();
    let b = trace("ode", fixed(large)).unwrap();
    let (sa, sb) = (shape(&a.module), shape(&b.module));
    assert_eq!(sa, sb, "@ode: {}\nvs\n{}", a.module, b.module);
    assert_eq!(sa.loops, 1, "@ode: {}", a.module);
    assert!(sa.phis >= 3, "phis for t, u, v: {}", a.module);
    let p = suite::ode_input();
    let got = interpret(&a.module, "ode", vec![Val::F64s(p.clone())]);
    assert_close("ode", got, suite::ode::<f64>(&p, small), 1e-12);

    // The counts do see unrolling: a Rust loop over a constant length grows.
    let unrolled = |n: i64| {
        move |x: Slice<f64>| {
            (0..n).fold(<Var as Float>::lit(0.0), |acc, i| {
                let xi = x.at(Var::from(i));
                acc + xi * xi
            })
        }
    };
    let a = shape(&trace("unrolled", unrolled(3)).unwrap().module);
    let b = shape(&trace("unrolled", unrolled(6)).unwrap().module);
    assert_eq!(a.loops, 0);
    assert!(b.insts > a.insts, "{a:?} vs {b:?}");
}
