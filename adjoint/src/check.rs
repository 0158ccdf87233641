//! Checking a rule against independent oracles: [`check_rule`].
//!
//! It derives the rule, runs its forward pass and pullback on the reference
//! interpreter, and compares with the plain function (JAX's `check_vjp`, Mooncake's
//! `test_rule_correctness`):
//!
//! 1. the forward pass's primal results equal the plain function's, bit for bit;
//! 2. the gradient (the pullback seeded with 1 for every float result) agrees with
//!    central finite differences of the plain function, at one of several step sizes
//!    (each is tried; one agreeing is enough, since no single step suits every
//!    function);
//! 3. the dot-product test `⟨J v, w⟩ = ⟨v, Jᵀ w⟩` holds for seeded random directions
//!    `v` (over the active parameters) and `w` (over the float results), with `J v`
//!    by central differences and `Jᵀ w` from the pullback;
//! 4. the tape's scalar stack is back to its height before the forward pass once the
//!    pullback returns, and the arguments come back unchanged.
//!
//! With a `const` return, every cotangent must be exactly zero. `const` parameters
//! are held fixed. For `f32`, a step is measured after rounding (the denominator is
//! the difference of the rounded arguments), so coarse steps stay exact.
//!
//! This is the one part of the crate that runs code: the interpreter, on the user's
//! function and its derived rule. Its random numbers come from a seeded SplitMix64,
//! so every run is the same.

use core::fmt;

use gradlift_ir::interp::{InterpError, Interpreter, Val};
use gradlift_ir::{FuncId, Module, Signature, Type};

use crate::config::RuleConfig;
use crate::error::AdError;
use crate::rrule::{Rule, build_rrule};

/// Step sizes and tolerances for [`check_rule`].
#[derive(Clone, PartialEq, Debug)]
pub struct CheckOptions {
    /// Finite-difference steps, tried in order; a comparison passes if any agrees.
    pub steps: Vec<f64>,
    /// Relative tolerance: `|a - b| <= atol + rtol · max(|a|, |b|)`.
    pub rtol: f64,
    /// Absolute tolerance.
    pub atol: f64,
    /// Seed of the random directions of the dot-product test.
    pub seed: u64,
    /// How many random `(v, w)` pairs the dot-product test tries (each must pass).
    pub trials: usize,
}

impl CheckOptions {
    /// Options for `f64` functions: steps from 1e-3 to 1e-7, relative tolerance 1e-5.
    pub fn f64() -> CheckOptions {
        CheckOptions {
            steps: vec![1e-3, 1e-4, 1e-5, 1e-6, 1e-7],
            rtol: 1e-5,
            atol: 1e-7,
            seed: 0x5eed,
            trials: 2,
        }
    }

    /// Options for functions with `f32` parameters or results: steps from 3e-2 to
    /// 1e-3, relative tolerance 1e-2.
    pub fn f32() -> CheckOptions {
        CheckOptions {
            steps: vec![3e-2, 1e-2, 3e-3, 1e-3],
            rtol: 1e-2,
            atol: 1e-3,
            ..CheckOptions::f64()
        }
    }

    /// [`CheckOptions::f32`] if `sig` has an `f32` parameter or result, else
    /// [`CheckOptions::f64`].
    pub fn for_sig(sig: &Signature) -> CheckOptions {
        if sig
            .params
            .iter()
            .chain(&sig.results)
            .any(|&t| t == Type::F32)
        {
            CheckOptions::f32()
        } else {
            CheckOptions::f64()
        }
    }

    fn agree(&self, a: f64, b: f64) -> bool {
        if a.is_nan() || b.is_nan() || a.is_infinite() || b.is_infinite() {
            return a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan());
        }
        (a - b).abs() <= self.atol + self.rtol * a.abs().max(b.abs())
    }
}

impl Default for CheckOptions {
    fn default() -> CheckOptions {
        CheckOptions::f64()
    }
}

/// What [`check_rule`] measured, when everything agreed.
#[derive(Clone, PartialEq, Debug)]
pub struct CheckReport {
    /// The plain function's results.
    pub primal: Vec<Val>,
    /// The pullback's cotangents of the active parameters, seeded with 1 for every
    /// float result, as `f64`.
    pub gradient: Vec<f64>,
    /// For each active parameter, the finite-difference estimate that agreed.
    pub finite_differences: Vec<f64>,
    /// For each dot-product trial, `⟨J v, w⟩` (finite differences, at the step that
    /// agreed) and `⟨v, Jᵀ w⟩` (the pullback).
    pub dot: Vec<(f64, f64)>,
}

/// Why [`check_rule`] failed.
#[derive(Clone, Debug)]
pub enum CheckError {
    /// The rule could not be derived.
    Build(AdError),
    /// The arguments do not fit the function.
    BadArguments(String),
    /// A call failed: the plain function, the forward pass or the pullback.
    Run {
        /// Which call.
        what: String,
        /// The interpreter's error.
        error: Box<InterpError>,
    },
    /// The forward pass returned other primal results than the plain function.
    Primal {
        /// The plain function's results.
        expected: Vec<Val>,
        /// The forward pass's.
        found: Vec<Val>,
    },
    /// A cotangent disagrees with every finite-difference estimate.
    Gradient {
        /// The parameter, from 0.
        param: usize,
        /// The pullback's value.
        rule: f64,
        /// `(step, estimate)` for each step tried (an estimate is NaN where the plain
        /// function failed).
        estimates: Vec<(f64, f64)>,
    },
    /// `⟨J v, w⟩` disagrees with `⟨v, Jᵀ w⟩` at every step.
    DotProduct {
        /// The trial, from 0.
        trial: usize,
        /// `(step, ⟨J v, w⟩, ⟨v, Jᵀ w⟩)` for each step tried.
        estimates: Vec<(f64, f64, f64)>,
    },
    /// The tape's scalar stack did not come back to its height before the forward
    /// pass.
    Tape {
        /// Scalars before the forward pass.
        before: usize,
        /// Scalars after the pullback.
        after: usize,
    },
    /// A call changed its arguments.
    ArgumentsChanged {
        /// Which call.
        what: String,
    },
}

impl fmt::Display for CheckError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CheckError::Build(e) => write!(f, "{e}"),
            CheckError::BadArguments(m) => write!(f, "bad arguments: {m}"),
            CheckError::Run { what, error } => write!(f, "running {what}: {error}"),
            CheckError::Primal { expected, found } => write!(
                f,
                "the forward pass returned {found:?}, the function {expected:?}"
            ),
            CheckError::Gradient {
                param,
                rule,
                estimates,
            } => write!(
                f,
                "the cotangent of parameter {} is {rule}, but finite differences give {estimates:?} (step, estimate)",
                param + 1
            ),
            CheckError::DotProduct { trial, estimates } => write!(
                f,
                "dot-product test {trial} fails: (step, <J v, w>, <v, J^T w>) = {estimates:?}"
            ),
            CheckError::Tape { before, after } => write!(
                f,
                "the tape held {before} scalars before the forward pass and {after} after the pullback"
            ),
            CheckError::ArgumentsChanged { what } => write!(f, "{what} changed its arguments"),
        }
    }
}

impl std::error::Error for CheckError {}

/// Derives the rule of `func` under `config` and checks it at `args` (see the
/// [module docs](self)). Returns the rule's measurements when all agree.
pub fn check_rule(
    module: &Module,
    func: FuncId,
    config: &RuleConfig,
    args: &[Val],
    opts: &CheckOptions,
) -> Result<CheckReport, CheckError> {
    let rule = build_rrule(module, func, config).map_err(CheckError::Build)?;
    check_derived(module, &rule, args, opts)
}

/// Checks `rule`, derived from a function of `module`, at `args`, as [`check_rule`]
/// does; for checking one rule at several points without deriving it each time.
pub fn check_derived(
    module: &Module,
    rule: &Rule,
    args: &[Val],
    opts: &CheckOptions,
) -> Result<CheckReport, CheckError> {
    let func = rule.layout.primal;
    let config = &rule.layout.config;
    let sig = module.sig(func).clone();
    if args.len() != sig.params.len() || args.iter().zip(&sig.params).any(|(a, &t)| !a.fits(t)) {
        return Err(CheckError::BadArguments(format!(
            "@{} takes {sig}, given {args:?}",
            module.name(func)
        )));
    }
    let mut plain = Interpreter::new(module);
    let mut run_plain = |args: &[Val]| -> Result<Vec<Val>, InterpError> {
        let mut a = args.to_vec();
        plain.call(func, &mut a)
    };
    let primal = run_plain(args).map_err(|error| CheckError::Run {
        what: format!("@{}", module.name(func)),
        error: Box::new(error),
    })?;

    let mut engine = Interpreter::new(&rule.module);
    let active = &rule.layout.active_params;
    let seeded = &rule.layout.seeded_results;

    // 1 and 4: the primal, the tape, the arguments.
    let ones: Vec<f64> = seeded.iter().map(|_| 1.0).collect();
    let (found, gradient) = run_rule(rule, &mut engine, args, &ones, &sig)?;
    if config.needs_primal && !same_vals(&found, &primal) {
        return Err(CheckError::Primal {
            expected: primal,
            found,
        });
    }

    // 2: the gradient against central differences of the seeded sum.
    let mut finite_differences = Vec::with_capacity(active.len());
    for (slot, &i) in active.iter().enumerate() {
        let g = gradient[slot];
        if seeded.is_empty() {
            if g != 0.0 {
                return Err(CheckError::Gradient {
                    param: i,
                    rule: g,
                    estimates: Vec::new(),
                });
            }
            finite_differences.push(0.0);
            continue;
        }
        let mut estimates = Vec::new();
        let mut agreed = None;
        for &h in &opts.steps {
            let mut dir = vec![0.0; active.len()];
            dir[slot] = 1.0;
            // Divided by the step actually taken, in units of `h`.
            let est = directional(&mut run_plain, args, active, &dir, h, seeded, &ones, &sig)
                .map(|(d, veff)| d / veff[slot])
                .unwrap_or(f64::NAN);
            estimates.push((h, est));
            if opts.agree(g, est) {
                agreed = Some(est);
                break;
            }
        }
        match agreed {
            Some(est) => finite_differences.push(est),
            None => {
                return Err(CheckError::Gradient {
                    param: i,
                    rule: g,
                    estimates,
                });
            }
        }
    }

    // 3: the dot-product test.
    let mut rng = SplitMix64(opts.seed);
    let mut dot = Vec::new();
    for trial in 0..opts.trials {
        let v: Vec<f64> = active.iter().map(|_| rng.uniform()).collect();
        let w: Vec<f64> = seeded.iter().map(|_| rng.uniform()).collect();
        let (_, jtw) = run_rule(rule, &mut engine, args, &w, &sig)?;
        if seeded.is_empty() || active.is_empty() {
            dot.push((0.0, 0.0));
            continue;
        }
        let mut estimates = Vec::new();
        let mut agreed = None;
        for &h in &opts.steps {
            let (lhs, veff) = directional(&mut run_plain, args, active, &v, h, seeded, &w, &sig)
                .unwrap_or((f64::NAN, v.clone()));
            let rhs: f64 = veff.iter().zip(&jtw).map(|(a, b)| a * b).sum();
            estimates.push((h, lhs, rhs));
            if opts.agree(lhs, rhs) {
                agreed = Some((lhs, rhs));
                break;
            }
        }
        match agreed {
            Some(pair) => dot.push(pair),
            None => return Err(CheckError::DotProduct { trial, estimates }),
        }
    }

    Ok(CheckReport {
        primal,
        gradient,
        finite_differences,
        dot,
    })
}

/// Runs the forward pass at `args` and the pullback seeded with `seeds`, checking
/// that the arguments and the tape come back; returns the forward pass's results and
/// the cotangents as `f64`.
fn run_rule(
    rule: &Rule,
    engine: &mut Interpreter<'_>,
    args: &[Val],
    seeds: &[f64],
    sig: &Signature,
) -> Result<(Vec<Val>, Vec<f64>), CheckError> {
    let module = &rule.module;
    let before = engine.tape().scalars;
    let mut fwd_args = args.to_vec();
    let out = engine
        .call(rule.forward, &mut fwd_args)
        .map_err(|error| CheckError::Run {
            what: format!("@{}", module.name(rule.forward)),
            error: Box::new(error),
        })?;
    if !same_vals(&fwd_args, args) {
        return Err(CheckError::ArgumentsChanged {
            what: format!("@{}", module.name(rule.forward)),
        });
    }
    let mut cts: Vec<Val> = rule
        .layout
        .seeded_results
        .iter()
        .zip(seeds)
        .map(|(&j, &s)| float_val(sig.results[j], s))
        .collect();
    let seeds_given = cts.clone();
    let grad = engine
        .call(rule.pullback, &mut cts)
        .map_err(|error| CheckError::Run {
            what: format!("@{}", module.name(rule.pullback)),
            error: Box::new(error),
        })?;
    if !same_vals(&cts, &seeds_given) {
        return Err(CheckError::ArgumentsChanged {
            what: format!("@{}", module.name(rule.pullback)),
        });
    }
    let after = engine.tape().scalars;
    if after != before {
        return Err(CheckError::Tape { before, after });
    }
    let grad = grad.iter().map(|v| as_f64(v).unwrap_or(f64::NAN)).collect();
    Ok((out, grad))
}

/// `⟨w, (f(x + h v) - f(x - h v)) / 2h⟩` over the seeded results, moving only the
/// active parameters, and the direction actually taken (after rounding to the
/// parameters' types). `None` if the function fails at either point.
#[allow(clippy::too_many_arguments)]
fn directional(
    run: &mut impl FnMut(&[Val]) -> Result<Vec<Val>, InterpError>,
    args: &[Val],
    active: &[usize],
    v: &[f64],
    h: f64,
    seeded: &[usize],
    w: &[f64],
    sig: &Signature,
) -> Option<(f64, Vec<f64>)> {
    let mut plus = args.to_vec();
    let mut minus = args.to_vec();
    let mut veff = Vec::with_capacity(active.len());
    for (&i, &vi) in active.iter().zip(v) {
        let x = as_f64(&args[i])?;
        plus[i] = float_val(sig.params[i], x + h * vi);
        minus[i] = float_val(sig.params[i], x - h * vi);
        veff.push((as_f64(&plus[i])? - as_f64(&minus[i])?) / (2.0 * h));
    }
    let fp = run(&plus).ok()?;
    let fm = run(&minus).ok()?;
    let mut d = 0.0;
    for (&j, &wj) in seeded.iter().zip(w) {
        d += wj * (as_f64(&fp[j])? - as_f64(&fm[j])?) / (2.0 * h);
    }
    Some((d, veff))
}

/// A float value of type `ty` (`f32` rounds).
fn float_val(ty: Type, x: f64) -> Val {
    match ty {
        Type::F32 => Val::F32(x as f32),
        _ => Val::F64(x),
    }
}

fn as_f64(v: &Val) -> Option<f64> {
    match *v {
        Val::F64(x) => Some(x),
        Val::F32(x) => Some(f64::from(x)),
        _ => None,
    }
}

/// Equality with floats compared by bit pattern (so NaN equals NaN).
fn same_vals(a: &[Val], b: &[Val]) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|(x, y)| match (x, y) {
            (Val::F64(p), Val::F64(q)) => p.to_bits() == q.to_bits(),
            (Val::F32(p), Val::F32(q)) => p.to_bits() == q.to_bits(),
            _ => x == y,
        })
}

/// SplitMix64 (Steele, Lea, Flood 2014): a tiny seeded generator, enough for test
/// directions.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in [-1, 1), kept away from 0 so no direction vanishes: |u| >= 0.25.
    fn uniform(&mut self) -> f64 {
        let u = (self.next() >> 11) as f64 / (1u64 << 53) as f64; // [0, 1)
        let m = 0.25 + 0.75 * u;
        if self.next() & 1 == 0 { m } else { -m }
    }
}
