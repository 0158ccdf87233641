//! Parameter estimation of an ODE: the Lotka-Volterra predator-prey equations
//!
//!     u' = a u - b u v,    v' = -c v + d u v,
//!
//! integrated with the classical Runge-Kutta method (RK4), written as ordinary
//! generic Rust. Noisy observations of (u, v) are made from known parameters; the
//! six unknowns (a, b, c, d and the initial state u0, v0) are then fitted to them
//! by least squares with argmin's L-BFGS on gradlift's compiled gradient
//! (`gradlift::argmin::Problem`).
//!
//! It prints the true and the recovered parameters and the loss per iteration,
//! and writes `docs/img/ode_fit.svg`: the observations, the fitted trajectories
//! and the loss curve.
//!
//! `cargo run --release --features argmin --example ode_fit [-- --quick] [-- --svg PATH]`
//! (`--quick`: no plot; what CI runs, on the debug build).

use std::sync::{Arc, Mutex};

use argmin::core::observers::{Observe, ObserverMode};
use argmin::core::{Executor, KV, State};
use argmin::solver::linesearch::BacktrackingLineSearch;
use argmin::solver::linesearch::condition::ArmijoCondition;
use argmin::solver::quasinewton::LBFGS;
use gradlift::argmin::Problem;
use gradlift::trace::prelude::*;
use gradlift::{CallState, Const, Duplicated, Return, autodiff};
use plotters::prelude::*;
use rng::Rng;

#[path = "fuzz/rng.rs"]
#[allow(dead_code)] // The fuzzer's generator; this example uses a part of it.
mod rng;
#[path = "common/support.rs"]
mod support;

/// The RK4 step.
const H: f64 = 0.01;
/// RK4 steps between observations.
const EVERY: i64 = 10;
/// The parameters that make the data: (a, b, c, d, u0, v0).
const TRUTH: [f64; 6] = [1.5, 1.0, 3.0, 1.0, 1.0, 1.0];
/// Where the fit starts.
const GUESS: [f64; 6] = [1.2, 0.8, 2.5, 0.8, 1.2, 0.8];

/// One RK4 step of the Lotka-Volterra equations.
fn rk4<T: Real>(p: (T, T, T, T), u: T, v: T) -> (T, T) {
    let (a, b, c, d) = p;
    let f = |u: T, v: T| (a * u - b * u * v, d * u * v - c * v);
    let (k1u, k1v) = f(u, v);
    let (k2u, k2v) = f(u + k1u * (H / 2.0), v + k1v * (H / 2.0));
    let (k3u, k3v) = f(u + k2u * (H / 2.0), v + k2v * (H / 2.0));
    let (k4u, k4v) = f(u + k3u * H, v + k3v * H);
    (
        u + (k1u + k2u * 2.0 + k3u * 2.0 + k4u) * (H / 6.0),
        v + (k1v + k2v * 2.0 + k3v * 2.0 + k4v) * (H / 6.0),
    )
}

/// The sum of squared differences between the trajectory of `theta` = (a, b, c,
/// d, u0, v0) and `n` observations `obs` = (u_1, v_1, u_2, v_2, ...), one every
/// [`EVERY`] steps.
fn misfit<T: Real>(theta: T::Slice<'_>, obs: T::Slice<'_>, n: T::Int) -> T {
    let p = (theta.at(0), theta.at(1), theta.at(2), theta.at(3));
    let start = (theta.at(4), theta.at(5), T::lit(0.0));
    let (_, _, loss) = for_range(0, n, start, |k, (u, v, acc)| {
        let (u, v) = for_range(0, EVERY, (u, v), |_, (u, v)| rk4(p, u, v));
        let du = u - obs.at(k * 2);
        let dv = v - obs.at(k * 2 + 1);
        (u, v, acc + du * du + dv * dv)
    });
    loss
}

/// The trajectory at every observation time, natively.
fn trajectory(theta: &[f64], n: usize) -> Vec<(f64, f64)> {
    let p = (theta[0], theta[1], theta[2], theta[3]);
    let (mut u, mut v) = (theta[4], theta[5]);
    let mut out = vec![(u, v)];
    for _ in 0..n {
        for _ in 0..EVERY {
            (u, v) = rk4(p, u, v);
        }
        out.push((u, v));
    }
    out
}

/// argmin observer: the loss at every iteration.
struct LossCurve(Arc<Mutex<Vec<f64>>>);

impl<I: State<Float = f64>> Observe<I> for LossCurve {
    fn observe_iter(&mut self, state: &I, _: &KV) -> Result<(), argmin::core::Error> {
        self.0
            .lock()
            .map_err(|_| argmin::core::Error::msg("poisoned"))?
            .push(state.get_cost());
        Ok(())
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (_, svg) = support::options("docs/img/ode_fit.svg")?;
    let n = 50;
    let sigma = 0.05;

    // The observations: the true trajectory (after the initial state) plus noise.
    let mut noise = Rng(7);
    let clean = trajectory(&TRUTH, n);
    let obs: Vec<f64> = clean[1..]
        .iter()
        .flat_map(|&(u, v)| [u, v])
        .map(|x| x + sigma * support::gaussian(&mut noise))
        .collect();

    type Args<'a> = (
        Duplicated<&'a [f64], &'a mut [f64]>,
        Const<&'a [f64]>,
        Const<i64>,
    );
    let g = autodiff("misfit", misfit::<Var>)?.share::<Args<'static>>(Return::Active)?;
    let data = obs.clone();
    let problem = Problem::new(
        move |state: &mut CallState, theta: &[f64], dtheta: &mut [f64]| {
            let args = (Duplicated(theta, dtheta), Const(&data[..]), Const(n as i64));
            Ok(g.gradient(state, args)?.0)
        },
    );

    let curve = Arc::new(Mutex::new(Vec::new()));
    // A backtracking line search (Armijo's condition, halving the step): far
    // from the data's parameters the trajectory grows without bound, and the
    // first step of L-BFGS follows the raw gradient (of norm about 2,500 here),
    // so trial points can overflow; backtracking rejects them and halves the step,
    // where More-Thuente stops at the first infinite cost.
    let linesearch = BacktrackingLineSearch::new(ArmijoCondition::new(1e-4)?).rho(0.5)?;
    let solver = LBFGS::new(linesearch, 7)
        .with_tolerance_grad(1e-10)?
        .with_tolerance_cost(1e-14)?;
    let result = Executor::new(problem, solver)
        .configure(|s| s.param(GUESS.to_vec()).max_iters(300))
        .add_observer(LossCurve(Arc::clone(&curve)), ObserverMode::Always)
        .run()?;
    let state = result.state();
    let fit = state.get_best_param().ok_or("no parameter")?.clone();
    let curve = curve.lock().map_err(|_| "poisoned")?.clone();

    println!(
        "Lotka-Volterra, RK4 (h = {H}), {n} noisy observations of (u, v) (sigma = {sigma}), 6 unknowns"
    );
    println!("L-BFGS from {GUESS:?}:");
    for (k, loss) in curve.iter().enumerate() {
        if k < 10 || k % 10 == 0 || k + 1 == curve.len() {
            println!("  iteration {k:3}: loss {loss:.6e}");
        }
    }
    println!(
        "  {:?} after {} iterations",
        state.get_termination_status(),
        state.get_iter()
    );
    println!("\nparameter    true   recovered");
    for (k, name) in ["a", "b", "c", "d", "u0", "v0"].iter().enumerate() {
        println!("  {name:<6} {:8.4} {:11.4}", TRUTH[k], fit[k]);
    }
    let truth_loss = misfit::<f64>(&TRUTH, &obs, n as i64);
    let fit_loss = state.get_best_cost();
    println!("\nloss at the true parameters {truth_loss:.6e}, at the fit {fit_loss:.6e}");
    // The fit explains the data at least as well as the truth does (it is the
    // least-squares optimum), and recovers every parameter to within 5%.
    let worst = (0..6)
        .map(|k| ((fit[k] - TRUTH[k]) / TRUTH[k]).abs())
        .fold(0.0, f64::max);
    println!(
        "largest relative error of a parameter: {:.2}%",
        worst * 100.0
    );
    if fit_loss > truth_loss || worst > 0.05 {
        return Err("the fit did not recover the parameters".into());
    }

    if let Some(path) = svg {
        plot(&path, &obs, &trajectory(&fit, n), &curve)?;
        println!("wrote {path}");
    }
    Ok(())
}

/// The observations and the fitted trajectories against time, and the loss per
/// iteration (log scale).
fn plot(
    path: &str,
    obs: &[f64],
    fitted: &[(f64, f64)],
    curve: &[f64],
) -> Result<(), Box<dyn std::error::Error>> {
    let root = SVGBackend::new(path, (900, 360)).into_drawing_area();
    root.fill(&WHITE)?;
    let (left, right) = root.split_horizontally(560);
    let t_obs = |k: usize| (k + 1) as f64 * EVERY as f64 * H;
    let t_end = fitted.len() as f64 * EVERY as f64 * H;
    let top = obs.iter().cloned().fold(0.0, f64::max) * 1.1;
    let mut chart = ChartBuilder::on(&left)
        .caption("Lotka-Volterra: observations and fit", ("sans-serif", 16))
        .margin(10)
        .x_label_area_size(30)
        .y_label_area_size(40)
        .build_cartesian_2d(0.0..t_end, 0.0..top)?;
    chart.configure_mesh().x_desc("t").draw()?;
    let t = |k: usize| k as f64 * EVERY as f64 * H;
    chart
        .draw_series(LineSeries::new(
            fitted.iter().enumerate().map(|(k, p)| (t(k), p.0)),
            BLUE.stroke_width(2),
        ))?
        .label("u (prey), fitted")
        .legend(|(x, y)| PathElement::new([(x, y), (x + 16, y)], BLUE));
    chart
        .draw_series(LineSeries::new(
            fitted.iter().enumerate().map(|(k, p)| (t(k), p.1)),
            RED.stroke_width(2),
        ))?
        .label("v (predator), fitted")
        .legend(|(x, y)| PathElement::new([(x, y), (x + 16, y)], RED));
    chart.draw_series(
        obs.chunks(2)
            .enumerate()
            .map(|(k, uv)| Circle::new((t_obs(k), uv[0]), 3, BLUE.filled())),
    )?;
    chart.draw_series(
        obs.chunks(2)
            .enumerate()
            .map(|(k, uv)| Circle::new((t_obs(k), uv[1]), 3, RED.filled())),
    )?;
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()?;

    let lo = curve
        .iter()
        .cloned()
        .fold(f64::INFINITY, f64::min)
        .max(1e-300);
    let hi = curve.iter().cloned().fold(0.0, f64::max).max(lo * 10.0);
    let mut chart = ChartBuilder::on(&right)
        .caption("loss per L-BFGS iteration", ("sans-serif", 16))
        .margin(10)
        .x_label_area_size(30)
        .y_label_area_size(60)
        .build_cartesian_2d(
            0.0..curve.len().max(1) as f64,
            (lo * 0.5..hi * 2.0).log_scale(),
        )?;
    chart.configure_mesh().x_desc("iteration").draw()?;
    chart.draw_series(LineSeries::new(
        curve.iter().enumerate().map(|(k, &l)| (k as f64, l)),
        BLACK.stroke_width(2),
    ))?;
    root.present()?;
    Ok(())
}
