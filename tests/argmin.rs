//! `gradlift::argmin::Problem` (feature `argmin`): argmin's L-BFGS reaches
//! Rosenbrock's optimum in 100 dimensions and Newton's method (with the traced
//! Hessian) in 2; cost, gradient and Hessian equal `autodiff`'s bit for bit; a
//! point's second call is served from its state; threads share one problem; a
//! run-time error reaches argmin and leaves the problem usable.
#![cfg(feature = "argmin")]

use argmin::core::{CostFunction, Executor, Gradient, Hessian, State};
use argmin::solver::linesearch::MoreThuenteLineSearch;
use argmin::solver::newton::NewtonCG;
use argmin::solver::quasinewton::LBFGS;
use gradlift::argmin::Problem;
use gradlift::suite::rosenbrock;
use gradlift::trace::prelude::*;
use gradlift::{CallState, Const, Duplicated, Error, Return, autodiff};

fn start(n: usize) -> Vec<f64> {
    (0..n)
        .map(|i| if i % 2 == 0 { -1.2 } else { 1.0 })
        .collect()
}

#[test]
fn lbfgs_reaches_rosenbrocks_optimum_in_100_dimensions() -> Result<(), Box<dyn std::error::Error>> {
    let problem = Problem::trace("rosenbrock", rosenbrock::<Var>)?;
    let solver = LBFGS::new(MoreThuenteLineSearch::new(), 7)
        .with_tolerance_grad(1e-12)?
        .with_tolerance_cost(0.0)?;
    let result = Executor::new(problem, solver)
        .configure(|s| s.param(start(100)).max_iters(2000))
        .run()?;
    let best = result.state().get_best_param().unwrap();
    for (i, x) in best.iter().enumerate() {
        assert!((x - 1.0).abs() < 1e-6, "x_{i} = {x}");
    }
    // The line search asks for the cost and the gradient of each trial point in
    // two calls; the second is served from the state that kept it.
    let p = result.problem.problem.as_ref().unwrap();
    assert!(p.evaluations() < p.calls(), "{p:?}");
    Ok(())
}

#[test]
fn newton_with_the_traced_hessian() -> Result<(), Box<dyn std::error::Error>> {
    // Newton-CG: argmin's `Vec` arithmetic has products with a `Vec<Vec<f64>>`
    // Hessian but no inverse (plain `Newton` needs the ndarray or nalgebra backend).
    let problem = Problem::trace("rosenbrock", rosenbrock::<Var>)?;
    // The closed form at (x, y) = (-1.2, 1): [[1200 x^2 - 400 y + 2, -400 x],
    // [-400 x, 200]].
    let h = problem.hessian(&vec![-1.2, 1.0])?;
    let want = [[1200.0 * 1.44 - 400.0 + 2.0, 480.0], [480.0, 200.0]];
    for r in 0..2 {
        for c in 0..2 {
            assert!((h[r][c] - want[r][c]).abs() < 1e-9, "{h:?}");
        }
    }
    // On a strictly convex function, sum_i exp(x_i - 0.5) - x_i (its minimum at
    // x_i = 0.5), Newton's steps converge in a few iterations. (On Rosenbrock's
    // valley argmin's Newton-CG, whose inner solve stops early, crawls: 200
    // iterations reach 0.995 from (-1.2, 1).)
    let convex = Problem::trace("convex", |x: Slice<f64>| {
        for_range(0, x.len(), Var::from(0.0), |i, acc| {
            acc + (x.at(i) - 0.5).exp() - x.at(i)
        })
    })?;
    let solver = NewtonCG::new(MoreThuenteLineSearch::new());
    let result = Executor::new(convex, solver)
        .configure(|s| s.param(vec![3.0, -2.0, 0.0, 1.5]).max_iters(30))
        .run()?;
    let best = result.state().get_best_param().unwrap();
    assert!(
        best.iter().all(|x| (x - 0.5).abs() < 1e-10),
        "{best:?} {:?} {}",
        result.state().get_termination_status(),
        result.state().get_iter()
    );
    Ok(())
}

#[test]
fn cost_gradient_and_hessian_are_autodiffs() -> Result<(), Box<dyn std::error::Error>> {
    let mut f = autodiff("rosenbrock", rosenbrock::<Var>)?;
    let problem = Problem::trace("rosenbrock", rosenbrock::<Var>)?;
    for n in [2, 5, 17] {
        let x: Vec<f64> = (0..n).map(|i| (0.7 * i as f64).sin()).collect();
        let mut dx = vec![0.0; n];
        let (value, _) = f.gradient((Duplicated(&x[..], &mut dx[..]),))?;
        let calls = (problem.calls(), problem.evaluations());
        assert_eq!(problem.cost(&x)?.to_bits(), value.to_bits());
        let g = problem.gradient(&x)?;
        assert_eq!(
            g.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            dx.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
        );
        // Two calls, one evaluation.
        assert_eq!(
            (problem.calls(), problem.evaluations()),
            (calls.0 + 2, calls.1 + 1)
        );
        let h = problem.hessian(&x)?;
        let mut dx = vec![0.0; n];
        let m = f.hessian((Duplicated(&x[..], &mut dx[..]),))?;
        assert_eq!(h.len(), n);
        for (r, row) in h.iter().enumerate() {
            assert_eq!(row.len(), n);
            for (c, v) in row.iter().enumerate() {
                assert_eq!(v.to_bits(), m.get(r, c).to_bits(), "({r}, {c})");
            }
        }
    }
    // A point that differs in one bit is evaluated again.
    let x = vec![0.5, 0.25];
    problem.cost(&x)?;
    let before = problem.evaluations();
    problem.cost(&vec![0.5, f64::from_bits(0.25f64.to_bits() + 1)])?;
    assert_eq!(problem.evaluations(), before + 1);
    Ok(())
}

/// sum_i (x_0 a_i + x_1 - b_i)^2: a line fit, with data.
fn line_fit<T: Real>(x: T::Slice<'_>, a: T::Slice<'_>, b: T::Slice<'_>) -> T {
    for_range(0, b.len(), T::lit(0.0), |i, acc| {
        let r = x.at(0) * a.at(i) + x.at(1) - b.at(i);
        acc + r * r
    })
}

type FitArgs<'a> = (
    Duplicated<&'a [f64], &'a mut [f64]>,
    Const<&'a [f64]>,
    Const<&'a [f64]>,
);

#[test]
fn threads_share_a_problem_with_data() -> Result<(), Box<dyn std::error::Error>> {
    let g = autodiff("line_fit", line_fit::<Var>)?.share::<FitArgs<'static>>(Return::Active)?;
    let a: Vec<f64> = (0..50).map(|i| i as f64 * 0.1).collect();
    let b: Vec<f64> = a
        .iter()
        .map(|t| 3.0 * t - 1.0 + 0.01 * (7.0 * t).sin())
        .collect();
    let (a2, b2) = (a.clone(), b.clone());
    let g2 = g.clone();
    let problem = Problem::new(move |state: &mut CallState, x: &[f64], dx: &mut [f64]| {
        Ok(g2
            .gradient(state, (Duplicated(x, dx), Const(&a2[..]), Const(&b2[..])))?
            .0)
    });
    let points: Vec<Vec<f64>> = (0..16).map(|k| vec![k as f64 * 0.3, -(k as f64)]).collect();
    let serial: Vec<(f64, Vec<f64>)> = points
        .iter()
        .map(|x| {
            let mut dx = vec![0.0; 2];
            let (v, _) = g
                .gradient(
                    &mut CallState::new(),
                    (
                        Duplicated(&x[..], &mut dx[..]),
                        Const(&a[..]),
                        Const(&b[..]),
                    ),
                )
                .unwrap();
            (v, dx)
        })
        .collect();
    std::thread::scope(|s| {
        for t in 0..4 {
            let (problem, points, serial) = (&problem, &points, &serial);
            s.spawn(move || {
                for round in 0..20 {
                    let k = (t * 5 + round) % points.len();
                    let x = &points[k];
                    assert_eq!(problem.cost(x).unwrap(), serial[k].0);
                    assert_eq!(problem.gradient(x).unwrap(), serial[k].1);
                }
            });
        }
    });
    assert_eq!(problem.calls(), 4 * 20 * 2);
    // And L-BFGS fits the line.
    let solver = LBFGS::new(MoreThuenteLineSearch::new(), 5).with_tolerance_grad(1e-12)?;
    let result = Executor::new(problem, solver)
        .configure(|s| s.param(vec![0.0, 0.0]).max_iters(200))
        .run()?;
    let best = result.state().get_best_param().unwrap();
    assert!(
        (best[0] - 3.0).abs() < 1e-2 && (best[1] + 1.0).abs() < 1e-2,
        "{best:?}"
    );
    Ok(())
}

#[test]
fn a_run_time_error_reaches_argmin_and_the_problem_stays_usable() -> Result<(), Error> {
    // Reads x[2]: a point of two coordinates is out of bounds.
    let problem = Problem::trace("third", |x: Slice<f64>| x.at(2) * x.at(0))?;
    let e = problem.cost(&vec![1.0, 2.0]).unwrap_err();
    assert!(
        e.to_string().contains("index 2 out of bounds for length 2"),
        "{e}"
    );
    assert_eq!(
        problem.gradient(&vec![2.0, 0.0, 3.0]).unwrap(),
        [3.0, 0.0, 2.0]
    );
    // A problem made with `new` has no Hessian to give.
    let g = autodiff("sq", |x: Slice<f64>| x.at(0) * x.at(0))?
        .share::<(Duplicated<&'static [f64], &'static mut [f64]>,)>(Return::Active)?;
    let p = Problem::new(g);
    let e = p.hessian(&vec![1.0]).unwrap_err();
    assert!(e.to_string().contains("no Hessian"), "{e}");
    Ok(())
}
