//! Compiled gradients as an [argmin](https://argmin-rs.org) problem (feature
//! `argmin`): [`Problem`] implements argmin's `CostFunction` and `Gradient` (and,
//! when traced from a Rust function, `Hessian`) over `Vec<f64>` parameters, so
//! argmin's solvers (L-BFGS, BFGS, conjugate gradients, Newton, ...) run on
//! gradlift's compiled code.
//!
//! argmin calls these through `&self`, possibly from several threads at once (its
//! `bulk_*` methods with its `rayon` feature). A [`Problem`] keeps a pool of
//! per-call states ([`CallState`]: a workspace and buffers): each call takes one,
//! so calls on different threads never share a workspace, and a warm pool
//! allocates nothing but what argmin's API asks for (the `Vec` a gradient is
//! returned in).
//!
//! argmin asks for the cost and the gradient at a point in two calls. Each state
//! remembers its last point (compared bit for bit) with its value and gradient,
//! so the second call at the same point costs a copy, not a second evaluation:
//! [`Problem::evaluations`] and [`Problem::calls`] tell how often that happened.
//!
//! ```
//! use argmin::core::{CostFunction, Executor, State};
//! use argmin::solver::linesearch::MoreThuenteLineSearch;
//! use argmin::solver::quasinewton::LBFGS;
//! use gradlift::argmin::Problem;
//!
//! // Rosenbrock's function in 10 dimensions (`gradlift::suite::rosenbrock`,
//! // generic Rust), traced once and compiled.
//! let problem = Problem::trace("rosenbrock", gradlift::suite::rosenbrock::<gradlift::trace::Var>)?;
//! let x0: Vec<f64> = (0..10).map(|i| if i % 2 == 0 { -1.2 } else { 1.0 }).collect();
//! let solver = LBFGS::new(MoreThuenteLineSearch::new(), 7).with_tolerance_grad(1e-12)?;
//! let result = Executor::new(problem, solver)
//!     .configure(|state| state.param(x0).max_iters(500))
//!     .run()?;
//! let best = result.state().get_best_param().unwrap();
//! assert!(best.iter().all(|x| (x - 1.0).abs() < 1e-6), "{best:?}");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! A function of the parameters and of data goes through [`Problem::new`] with a
//! closure, which lends the parameters and the gradient's buffer to a
//! [`SharedGradient`] (or to anything else that computes a value and adds its
//! gradient into the buffer):
//!
//! ```
//! use gradlift::trace::prelude::*;
//! use gradlift::{CallState, Const, Duplicated, Return, autodiff};
//! use gradlift::argmin::Problem;
//! use argmin::core::{CostFunction, Gradient};
//!
//! // sum_i (x . a_i - b_i)^2 over rows a_i of a 2-column matrix.
//! fn residuals<T: Real>(x: T::Slice<'_>, a: T::Slice<'_>, b: T::Slice<'_>) -> T {
//!     for_range(0, b.len(), T::lit(0.0), |i, acc| {
//!         let r = x.at(0) * a.at(i * 2) + x.at(1) * a.at(i * 2 + 1) - b.at(i);
//!         acc + r * r
//!     })
//! }
//! type Args<'a> = (
//!     Duplicated<&'a [f64], &'a mut [f64]>,
//!     Const<&'a [f64]>,
//!     Const<&'a [f64]>,
//! );
//! let g = autodiff("residuals", residuals::<Var>)?.share::<Args<'static>>(Return::Active)?;
//! let (a, b) = (vec![1.0, 0.0, 0.0, 1.0, 1.0, 1.0], vec![1.0, 2.0, 3.0]);
//! let problem = Problem::new(move |state: &mut CallState, x: &[f64], dx: &mut [f64]| {
//!     Ok(g.gradient(state, (Duplicated(x, dx), Const(&a[..]), Const(&b[..])))?.0)
//! });
//! assert_eq!(problem.cost(&vec![1.0, 2.0])?, 0.0);
//! assert_eq!(problem.gradient(&vec![0.0, 0.0])?, [-8.0, -10.0]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use ::argmin::core::{CostFunction, Error as ArgminError, Gradient, Hessian};
use gradlift_trace::{Callable, Slice, Var};

use crate::api::Error;
use crate::autodiff::{Autodiff, CallState, Duplicated, Return, SharedGradient, autodiff};

/// What a [`Problem`] evaluates: the value at `x`, with its gradient added into
/// `dx` (which the problem zeroes first, and which has `x`'s length), using
/// `state`'s buffers.
pub trait Objective: Send + Sync {
    /// The value at `x`; the gradient added into `dx`.
    fn value_and_gradient(
        &self,
        state: &mut CallState,
        x: &[f64],
        dx: &mut [f64],
    ) -> Result<f64, Error>;
}

impl<F> Objective for F
where
    F: Fn(&mut CallState, &[f64], &mut [f64]) -> Result<f64, Error> + Send + Sync,
{
    fn value_and_gradient(
        &self,
        state: &mut CallState,
        x: &[f64],
        dx: &mut [f64],
    ) -> Result<f64, Error> {
        self(state, x, dx)
    }
}

/// The compiled gradient of a function of one slice, `f(x: &[f64]) -> f64`
/// ([`Problem::trace`]).
pub type Traced = SharedGradient<(Slice<f64>,), Var>;

impl Objective for Traced {
    fn value_and_gradient(
        &self,
        state: &mut CallState,
        x: &[f64],
        dx: &mut [f64],
    ) -> Result<f64, Error> {
        Ok(self.gradient(state, (Duplicated(x, dx),))?.0)
    }
}

/// The last evaluation of one state: the point, its value and its gradient.
#[derive(Default)]
struct Slot {
    state: CallState,
    x: Vec<f64>,
    value: f64,
    grad: Vec<f64>,
    valid: bool,
}

/// A compiled objective as an argmin problem (see the [module docs](self)).
pub struct Problem<O> {
    objective: O,
    /// The traced function, for Hessians ([`Problem::trace`] only). A Hessian is
    /// compiled on its first call and computed under this lock.
    hessian: Option<Mutex<Autodiff<(Slice<f64>,), Var>>>,
    slots: Mutex<Vec<Slot>>,
    calls: AtomicUsize,
    evaluations: AtomicUsize,
}

impl<O> std::fmt::Debug for Problem<O> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Problem")
            .field("calls", &self.calls())
            .field("evaluations", &self.evaluations())
            .finish_non_exhaustive()
    }
}

impl<O> Problem<O> {
    /// How many costs and gradients argmin asked for.
    pub fn calls(&self) -> usize {
        self.calls.load(Ordering::Relaxed)
    }

    /// How many of those ran the compiled code; the others found their point's
    /// value and gradient kept from the call before.
    pub fn evaluations(&self) -> usize {
        self.evaluations.load(Ordering::Relaxed)
    }

    /// The pool of states.
    fn pool(&self) -> std::sync::MutexGuard<'_, Vec<Slot>> {
        self.slots.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl<O: Objective> Problem<O> {
    /// A problem that evaluates `objective` (for example a closure over a
    /// [`SharedGradient`] and the data it needs; see the [module docs](self)). It
    /// has no Hessian.
    pub fn new(objective: O) -> Problem<O> {
        Problem {
            objective,
            hessian: None,
            slots: Mutex::new(Vec::new()),
            calls: AtomicUsize::new(0),
            evaluations: AtomicUsize::new(0),
        }
    }

    /// Runs `f` on the value and gradient at `x`, evaluated unless a free state
    /// kept them from its last call.
    fn at<T>(&self, x: &[f64], f: impl FnOnce(f64, &[f64]) -> T) -> Result<T, Error> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        let mut slots = self.pool();
        // A state that kept this very point, if one is free; any state otherwise.
        let same = |s: &Slot| {
            s.valid
                && s.x.len() == x.len()
                && s.x.iter().zip(x).all(|(a, b)| a.to_bits() == b.to_bits())
        };
        let mut slot = match slots.iter().rposition(same) {
            Some(k) => slots.swap_remove(k),
            None => slots.pop().unwrap_or_default(),
        };
        drop(slots);
        if !same(&slot) {
            self.evaluations.fetch_add(1, Ordering::Relaxed);
            slot.valid = false;
            slot.grad.clear();
            slot.grad.resize(x.len(), 0.0);
            match self
                .objective
                .value_and_gradient(&mut slot.state, x, &mut slot.grad)
            {
                Ok(v) => {
                    slot.value = v;
                    slot.x.clear();
                    slot.x.extend_from_slice(x);
                    slot.valid = true;
                }
                Err(e) => {
                    self.pool().push(slot);
                    return Err(e);
                }
            }
        }
        let out = f(slot.value, &slot.grad);
        self.pool().push(slot);
        Ok(out)
    }
}

impl Problem<Traced> {
    /// A problem from a Rust function of one slice, generic over
    /// [`Real`](crate::trace::Real) and called with [`Var`]: traced once, its
    /// gradient derived and compiled now, its Hessian (argmin's `Hessian`, for
    /// Newton's method) on first use.
    pub fn trace<F: Callable<(Slice<f64>,), Output = Var>>(
        name: &'static str,
        f: F,
    ) -> Result<Problem<Traced>, Error> {
        let mut ad = autodiff(name, f)?;
        let shared =
            ad.share::<(Duplicated<&'static [f64], &'static mut [f64]>,)>(Return::Active)?;
        let mut p = Problem::new(shared);
        p.hessian = Some(Mutex::new(ad));
        Ok(p)
    }
}

impl<O: Objective> CostFunction for Problem<O> {
    type Param = Vec<f64>;
    type Output = f64;

    fn cost(&self, x: &Vec<f64>) -> Result<f64, ArgminError> {
        Ok(self.at(x, |v, _| v)?)
    }
}

impl<O: Objective> Gradient for Problem<O> {
    type Param = Vec<f64>;
    type Gradient = Vec<f64>;

    fn gradient(&self, x: &Vec<f64>) -> Result<Vec<f64>, ArgminError> {
        Ok(self.at(x, |_, g| g.to_vec())?)
    }
}

impl Hessian for Problem<Traced> {
    type Param = Vec<f64>;
    type Hessian = Vec<Vec<f64>>;

    /// The dense Hessian, row by row ([`Autodiff::hessian`]).
    fn hessian(&self, x: &Vec<f64>) -> Result<Vec<Vec<f64>>, ArgminError> {
        let Some(ad) = &self.hessian else {
            return Err(ArgminError::msg(
                "this problem has no Hessian: make it with Problem::trace, which keeps the traced function",
            ));
        };
        let mut ad = ad.lock().unwrap_or_else(|p| p.into_inner());
        let mut dx = vec![0.0; x.len()];
        let m = ad.hessian((Duplicated(&x[..], &mut dx[..]),))?;
        Ok(m.data.chunks(m.cols.max(1)).map(<[f64]>::to_vec).collect())
    }
}
