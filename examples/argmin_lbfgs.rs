//! argmin's L-BFGS on gradlift's compiled gradients (feature `argmin`):
//!
//! 1. Rosenbrock's function in 100 dimensions, from (-1.2, 1, -1.2, 1, ...):
//!    `gradlift::argmin::Problem::trace` on the generic Rust function of
//!    `gradlift::suite`;
//! 2. an L2-regularised logistic regression on synthetic data (400 samples, 6
//!    features, made here from a fixed seed), through `Problem::new` and a
//!    `SharedGradient` over the parameters and the data. The same solver is run
//!    again on gradients from central finite differences of the plain Rust loss, an
//!    independent reference: both must reach the same loss.
//!
//! `cargo run --release --example argmin_lbfgs --features argmin`
//! (`-- 20` for Rosenbrock in 20 dimensions).

use argmin::core::{CostFunction, Executor, Gradient, State};
use argmin::solver::linesearch::MoreThuenteLineSearch;
use argmin::solver::quasinewton::LBFGS;
use gradlift::argmin::Problem;
use gradlift::trace::prelude::*;
use gradlift::{CallState, Const, Duplicated, Return, autodiff};
use rng::Rng;

#[path = "fuzz/rng.rs"]
#[allow(dead_code)] // The fuzzer's generator; this example uses a part of it.
mod rng;

/// The logistic loss with an L2 penalty: `scale * sum_i log(1 + exp(-y_i w.x_i)) +
/// lambda |w|^2`, for rows `x_i` of `x` (row-major, `w.len()` columns) and labels
/// `y_i` in {-1, 1}.
fn logistic<T: Real>(w: T::Slice<'_>, x: T::Slice<'_>, y: T::Slice<'_>, scale: T, lambda: T) -> T {
    let d = w.len();
    let data = for_range(0, y.len(), T::lit(0.0), |i, acc| {
        let z = for_range(0, d, T::lit(0.0), |k, s| s + w.at(k) * x.at(i * d + k));
        let m = -(y.at(i) * z);
        acc + (T::lit(1.0) + m.exp()).ln()
    });
    let penalty = for_range(0, d, T::lit(0.0), |k, s| s + w.at(k) * w.at(k));
    data * scale + penalty * lambda
}

/// The samples (row-major), the labels, and the weights that made them.
fn synthetic(n: usize, d: usize) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let mut rng = Rng(20261127);
    let truth: Vec<f64> = (0..d).map(|k| (k as f64 - 2.5) * 0.8).collect();
    let mut x = Vec::with_capacity(n * d);
    let mut y = Vec::with_capacity(n);
    for _ in 0..n {
        let row: Vec<f64> = (0..d).map(|_| rng.uniform(-1.0, 1.0)).collect();
        let z: f64 = row.iter().zip(&truth).map(|(a, b)| a * b).sum();
        // Label noise: the true class with the logistic probability.
        let p = 1.0 / (1.0 + (-z).exp());
        y.push(if rng.unit() < p { 1.0 } else { -1.0 });
        x.extend(row);
    }
    (x, y, truth)
}

/// The loss of [`logistic`] in plain Rust, and its gradient by central finite
/// differences: the reference.
struct FiniteDifferences {
    x: Vec<f64>,
    y: Vec<f64>,
    scale: f64,
    lambda: f64,
}

impl FiniteDifferences {
    fn loss(&self, w: &[f64]) -> f64 {
        logistic::<f64>(w, &self.x, &self.y, self.scale, self.lambda)
    }
}

impl CostFunction for FiniteDifferences {
    type Param = Vec<f64>;
    type Output = f64;
    fn cost(&self, w: &Vec<f64>) -> Result<f64, argmin::core::Error> {
        Ok(self.loss(w))
    }
}

impl Gradient for FiniteDifferences {
    type Param = Vec<f64>;
    type Gradient = Vec<f64>;
    fn gradient(&self, w: &Vec<f64>) -> Result<Vec<f64>, argmin::core::Error> {
        let mut v = w.clone();
        Ok((0..w.len())
            .map(|k| {
                let h = 1e-6 * (1.0 + w[k].abs());
                v[k] = w[k] + h;
                let up = self.loss(&v);
                v[k] = w[k] - h;
                let down = self.loss(&v);
                v[k] = w[k];
                (up - down) / (2.0 * h)
            })
            .collect())
    }
}

type Solver = LBFGS<MoreThuenteLineSearch<Vec<f64>, Vec<f64>, f64>, Vec<f64>, Vec<f64>, f64>;

fn lbfgs(tol: f64) -> Result<Solver, argmin::core::Error> {
    LBFGS::new(MoreThuenteLineSearch::new(), 7)
        .with_tolerance_grad(tol)?
        .with_tolerance_cost(0.0)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let n: usize = match std::env::args().nth(1) {
        Some(a) => a.parse().map_err(|_| format!("not a dimension: {a}"))?,
        None => 100,
    };

    // 1. Rosenbrock.
    let problem = Problem::trace("rosenbrock", gradlift::suite::rosenbrock::<Var>)?;
    let x0: Vec<f64> = (0..n)
        .map(|i| if i % 2 == 0 { -1.2 } else { 1.0 })
        .collect();
    let start = std::time::Instant::now();
    let result = Executor::new(problem, lbfgs(1e-12)?)
        .configure(|s| s.param(x0).max_iters(2000))
        .run()?;
    let secs = start.elapsed().as_secs_f64();
    let state = result.state();
    let best = state.get_best_param().ok_or("no parameter")?;
    let off = best.iter().map(|x| (x - 1.0).abs()).fold(0.0, f64::max);
    let p = &result.problem;
    println!("Rosenbrock, n = {n}, L-BFGS (memory 7, More-Thuente line search)");
    println!(
        "  iterations {}, cost {:.3e}, max |x_i - 1| = {off:.2e}, {:?}",
        state.get_iter(),
        state.get_best_cost(),
        state.get_termination_status()
    );
    if let Some(prob) = p.problem.as_ref() {
        println!(
            "  {} costs and gradients asked for, {} compiled gradients run, {:.1} ms in all",
            prob.calls(),
            prob.evaluations(),
            secs * 1e3
        );
    }
    if off > 1e-6 {
        return Err(format!("Rosenbrock's optimum missed: max |x_i - 1| = {off:e}").into());
    }

    // 2. Logistic regression, against finite differences.
    let (samples, d) = (400, 6);
    let (x, y, truth) = synthetic(samples, d);
    let (scale, lambda) = (1.0 / samples as f64, 1e-3);
    type Args<'a> = (
        Duplicated<&'a [f64], &'a mut [f64]>,
        Const<&'a [f64]>,
        Const<&'a [f64]>,
        Const<f64>,
        Const<f64>,
    );
    let shared = autodiff("logistic", logistic::<Var>)?.share::<Args<'static>>(Return::Active)?;
    let (xs, ys) = (x.clone(), y.clone());
    let problem = Problem::new(move |state: &mut CallState, w: &[f64], dw: &mut [f64]| {
        let args = (
            Duplicated(w, dw),
            Const(&xs[..]),
            Const(&ys[..]),
            Const(scale),
            Const(lambda),
        );
        Ok(shared.gradient(state, args)?.0)
    });
    let reference = FiniteDifferences {
        x,
        y,
        scale,
        lambda,
    };
    let w0 = vec![0.0; d];
    let ad = Executor::new(problem, lbfgs(1e-10)?)
        .configure(|s| s.param(w0.clone()).max_iters(500))
        .run()?;
    let fd = Executor::new(reference, lbfgs(1e-7)?)
        .configure(|s| s.param(w0).max_iters(500))
        .run()?;
    let (loss_ad, loss_fd) = (ad.state().get_best_cost(), fd.state().get_best_cost());
    let w = ad.state().get_best_param().ok_or("no parameter")?;
    println!("\nLogistic regression, {samples} samples, {d} features, lambda = {lambda}");
    println!(
        "  gradlift gradients:           {} iterations, loss {loss_ad:.12}",
        ad.state().get_iter()
    );
    println!(
        "  finite-difference gradients:  {} iterations, loss {loss_fd:.12}",
        fd.state().get_iter()
    );
    let fmt = |v: &[f64]| {
        v.iter()
            .map(|a| format!("{a:6.3}"))
            .collect::<Vec<_>>()
            .join(" ")
    };
    println!("  weights found: {}", fmt(w));
    println!("  weights that made the data: {}", fmt(&truth));
    let rel = (loss_ad - loss_fd).abs() / loss_fd.abs();
    println!("  relative difference of the losses: {rel:.1e}");
    if rel > 1e-8 {
        return Err(format!("the losses differ by {rel:e}").into());
    }
    Ok(())
}
