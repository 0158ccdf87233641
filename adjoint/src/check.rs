//! Checking a rule against independent oracles: [`check_rule`] and [`check_derived`].
//!
//! What is checked, and how, is documented on [`check_rule`] (the crate's public
//! API; this module is private). This is the one part of the crate that runs code.

use core::fmt;

use gradlift_ir::interp::{Interpreter, RunError, Val};
use gradlift_ir::{Elem, FuncId, Hosts, Module, Signature, Type};

use crate::config::{Activity, RetActivity, RuleConfig};
use crate::error::AdError;
use crate::eval::{EvalError, Gradient, Seeds, value_and_gradient};
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
    /// How many input coordinates the gradient check compares with finite
    /// differences, at most: every scalar and the first and last element of every
    /// slice are always checked (even beyond this number), the rest are chosen
    /// evenly spread. The dot-product test covers every coordinate regardless.
    pub max_coords: usize,
}

impl CheckOptions {
    /// Options for `f64` functions: steps from 1e-3 to 1e-7, relative tolerance 1e-5,
    /// at most 32 coordinates checked one by one.
    pub fn f64() -> CheckOptions {
        CheckOptions {
            steps: vec![1e-3, 1e-4, 1e-5, 1e-6, 1e-7],
            rtol: 1e-5,
            atol: 1e-7,
            seed: 0x5eed,
            trials: 2,
            max_coords: 32,
        }
    }

    /// Options for functions with `f32` parameters or results (scalars or slices):
    /// steps from 3e-2 to 1e-3, relative tolerance 1e-2.
    pub fn f32() -> CheckOptions {
        CheckOptions {
            steps: vec![3e-2, 1e-2, 3e-3, 1e-3],
            rtol: 1e-2,
            atol: 1e-3,
            ..CheckOptions::f64()
        }
    }

    /// [`CheckOptions::f32`] if `sig` has an `f32` parameter or result, or a slice of
    /// `f32`, else [`CheckOptions::f64`].
    pub fn for_sig(sig: &Signature) -> CheckOptions {
        if sig
            .params
            .iter()
            .chain(&sig.results)
            .any(|&t| t == Type::F32 || t.elem() == Some(Elem::F32))
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

/// One input coordinate of a function: an `active` scalar parameter, or one element
/// of a `dup`/`dupnoneed` slice parameter (its initial contents).
#[derive(Copy, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub struct Coord {
    /// The parameter, from 0.
    pub param: usize,
    /// The element, from 0, for a slice; `None` for a scalar.
    pub index: Option<usize>,
}

impl fmt::Display for Coord {
    /// `parameter 2` (a scalar), `element 3 of parameter 2` (a slice); parameters
    /// are counted from 1, elements from 0, as in the other messages.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.index {
            None => write!(f, "parameter {}", self.param + 1),
            Some(k) => write!(f, "element {k} of parameter {}", self.param + 1),
        }
    }
}

/// What [`check_rule`] measured, when everything agreed.
#[derive(Clone, PartialEq, Debug)]
pub struct CheckReport {
    /// The plain function's results.
    pub primal: Vec<Val>,
    /// The coordinates the gradient check compared with finite differences, in
    /// parameter and element order; `gradient` and `finite_differences` are
    /// parallel to it. With only scalars (and few slice elements), every input.
    pub coords: Vec<Coord>,
    /// For each coordinate of `coords`, the rule's value with the pullback seeded
    /// with 1 for every float result and the shadows starting at zero (the
    /// cotangent of an active scalar, or the final shadow's element), as `f64`.
    pub gradient: Vec<f64>,
    /// For each coordinate of `coords`, the finite-difference estimate that agreed
    /// (0 when there is no float result to seed).
    pub finite_differences: Vec<f64>,
    /// For each dot-product trial, `⟨J v, w⟩` (finite differences, at the step that
    /// agreed) and `⟨v, Jᵀ w⟩` (the rule); `(0, 0)` when the function has no input or
    /// no output coordinate.
    pub dot: Vec<(f64, f64)>,
}

/// Why [`check_rule`] failed.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum CheckError {
    /// The rule could not be derived.
    Build(AdError),
    /// The arguments do not fit the function (or the module has no such function).
    BadArguments(String),
    /// The rule does not fit the function it claims to be derived from: its layout or
    /// configuration disagrees with the primal's signature, a derived function is
    /// missing, or the pullback returned cotangents of the wrong number or type.
    BadRule(String),
    /// A call failed: the plain function, the forward pass or the pullback.
    Run {
        /// Which call.
        what: String,
        /// The interpreter's error.
        error: Box<RunError>,
    },
    /// The forward pass returned other primal results than the plain function.
    Primal {
        /// The plain function's results.
        expected: Vec<Val>,
        /// The forward pass's (empty if it returned none).
        found: Vec<Val>,
    },
    /// The forward pass left other contents in a `mut` slice parameter than the
    /// plain function does (not checked for `dupnoneed` parameters).
    Contents {
        /// The parameter, from 0.
        param: usize,
        /// What the plain function leaves in it.
        expected: Val,
        /// What the forward pass leaves in it.
        found: Val,
    },
    /// A cotangent disagrees with every finite-difference estimate.
    Gradient {
        /// The parameter, from 0.
        param: usize,
        /// The element, from 0, for a slice parameter; `None` for a scalar.
        index: Option<usize>,
        /// The rule's value.
        rule: f64,
        /// `(step, estimate)` for each step tried (an estimate is NaN where the plain
        /// function failed); empty when the value had to be exactly zero.
        estimates: Vec<(f64, f64)>,
    },
    /// `⟨J v, w⟩` disagrees with `⟨v, Jᵀ w⟩` at every step.
    DotProduct {
        /// The trial, from 0.
        trial: usize,
        /// `(step, ⟨J v, w⟩, ⟨v, Jᵀ w⟩)` for each step tried.
        estimates: Vec<(f64, f64, f64)>,
        /// The first entry of `Jᵀ` found wrong once the test failed (one output
        /// coordinate seeded at a time, up to 64, against central differences),
        /// naming the input and the output coordinate; `None` if none was found
        /// among those compared.
        culprit: Option<String>,
    },
    /// The tape's scalar stack did not come back to its height before the forward
    /// pass.
    Tape {
        /// Scalars before the forward pass.
        before: usize,
        /// Scalars after the pullback.
        after: usize,
    },
    /// A call changed its read-only arguments.
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
            CheckError::BadRule(m) => write!(f, "bad rule: {m}"),
            CheckError::Run { what, error } => write!(f, "running {what}: {error}"),
            CheckError::Primal { expected, found } => write!(
                f,
                "the forward pass returned {found:?}, the function {expected:?}"
            ),
            CheckError::Contents {
                param,
                expected,
                found,
            } => write!(
                f,
                "the forward pass leaves {found:?} in parameter {}, the function {expected:?}",
                param + 1
            ),
            CheckError::Gradient {
                param,
                index,
                rule,
                estimates,
            } => {
                let coord = Coord {
                    param: *param,
                    index: *index,
                };
                if estimates.is_empty() {
                    write!(
                        f,
                        "the cotangent of {coord} is {rule}, but nothing is seeded, so it must be 0"
                    )
                } else {
                    write!(
                        f,
                        "the cotangent of {coord} is {rule}, but finite differences give {estimates:?} (step, estimate)"
                    )
                }
            }
            CheckError::DotProduct {
                trial,
                estimates,
                culprit,
            } => {
                write!(
                    f,
                    "dot-product test {trial} fails: (step, <J v, w>, <v, J^T w>) = {estimates:?}"
                )?;
                match culprit {
                    Some(c) => write!(f, "; {c}"),
                    None => Ok(()),
                }
            }
            CheckError::Tape { before, after } => write!(
                f,
                "the tape held {before} scalars before the forward pass and {after} after the pullback"
            ),
            CheckError::ArgumentsChanged { what } => write!(f, "{what} changed its arguments"),
        }
    }
}

impl std::error::Error for CheckError {}

impl From<EvalError> for CheckError {
    fn from(e: EvalError) -> CheckError {
        match e {
            EvalError::BadArguments(m) => CheckError::BadArguments(m),
            EvalError::Run { what, error } => CheckError::Run { what, error },
            EvalError::Tape { before, after } => CheckError::Tape { before, after },
        }
    }
}

/// Derives the rule of `func` under `config` and checks it at `args`. Returns the
/// rule's measurements when all agree.
///
/// For checking, a function `@f(scalars, slices) -> results` is a map `F: x ↦ y`
/// between float vectors:
///
/// - its inputs `x` are the `active` float scalars and the initial contents of every
///   `dup`/`dupnoneed` slice, one coordinate ([`Coord`]) per scalar and per element,
///   in parameter order;
/// - its outputs `y` are the float results when the return is `active`, then the
///   final contents of every `dup`/`dupnoneed` slice.
///
/// `const` parameters (integers, bools, `[i64]` slices, and whatever else is
/// `const`) are held fixed and passed through unchanged; a `const` slice is neither
/// an input nor an output.
///
/// One evaluation of the rule ([`value_and_gradient`]) gives `Jᵀ w` for a cotangent
/// `w = (w_results, w_slices)` of the outputs: the pullback is seeded with
/// `w_results`, each `dup` parameter's shadow starts holding its part of `w_slices`,
/// and the returned cotangents of the active scalars, with the final shadows, are
/// `Jᵀ w` over the inputs. (A slice the function does not write is an output equal to
/// an input, an identity block of `J`: its shadow starts at `w` and ends at `w` plus
/// what the function's reads contribute.)
///
/// The checks run the rule and the plain function on the reference interpreter (JAX's
/// `check_vjp`, Mooncake's `test_rule_correctness`):
///
/// 1. the forward pass's primal results equal the plain function's, bit for bit
///    (when the rule returns them); every `mut` slice holds, after the forward pass,
///    what the plain function leaves in it, bit for bit (except `dupnoneed` slices,
///    whose primal contents may be garbage); read-only arguments come back unchanged;
///    and the tape's scalar stack is back at its height before the forward pass once
///    the pullback returns;
/// 2. the gradient of the sum of the float results (`w_results` all 1, shadows
///    starting at zero) agrees, coordinate by coordinate, with central finite
///    differences of the plain function at one of several step sizes (each is
///    tried; one agreeing is enough, since no single step suits every function).
///    Each finite difference costs two calls, so at most
///    [`CheckOptions::max_coords`] coordinates are checked: always every scalar and
///    the first and last element of every slice, then others spread evenly over the
///    rest ([`CheckReport::coords`] lists them). With no float result to seed (a
///    `const` return, or no float results), every cotangent checked must be exactly
///    zero;
/// 3. the dot-product test `⟨J v, w⟩ = ⟨v, Jᵀ w⟩` holds for seeded random directions
///    `v` over all the inputs and `w` over all the outputs, with `J v` by central
///    differences of the plain function (the active scalars and the `dup` slices'
///    initial contents moved along `v`; the float results and the slices' final
///    contents read) and `Jᵀ w` from one evaluation of the rule. This covers every
///    coordinate, including those step 2 skipped.
///
/// For `f32`, a step is measured after rounding: per coordinate, the direction
/// actually taken is the difference of the rounded arguments over `2h`, so coarse
/// steps stay exact; the random `w` is rounded to the outputs' types, as the seeds
/// and shadows that carry it are.
///
/// Checking is the one part of the crate that runs code: the interpreter, on the user's
/// function and its rule. Its random numbers come from a seeded SplitMix64, so every
/// run is the same.
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

/// [`check_rule`] for a module that calls `extern` functions (a host function,
/// or a host `vjp` rule): both the plain function and the rule run with `hosts`.
pub fn check_rule_with_hosts(
    module: &Module,
    func: FuncId,
    config: &RuleConfig,
    args: &[Val],
    opts: &CheckOptions,
    hosts: &Hosts,
) -> Result<CheckReport, CheckError> {
    let rule = build_rrule(module, func, config).map_err(CheckError::Build)?;
    check_derived_with_hosts(module, &rule, args, opts, hosts)
}

/// Checks `rule`, derived from a function of `module`, at `args`, as [`check_rule`]
/// does; for checking one rule at several points without deriving it each time, or
/// a rule built by hand (its [`RuleLayout`](crate::RuleLayout) must then be the one
/// [`build_rrule`] would give for its configuration).
pub fn check_derived(
    module: &Module,
    rule: &Rule,
    args: &[Val],
    opts: &CheckOptions,
) -> Result<CheckReport, CheckError> {
    check_derived_with_hosts(module, rule, args, opts, &Hosts::new())
}

/// [`check_derived`] with host functions for the module's `extern`s (see
/// [`check_rule_with_hosts`]).
pub fn check_derived_with_hosts(
    module: &Module,
    rule: &Rule,
    args: &[Val],
    opts: &CheckOptions,
    hosts: &Hosts,
) -> Result<CheckReport, CheckError> {
    let func = rule.layout.primal;
    let Some(decl) = module.funcs.get(func) else {
        return Err(CheckError::BadArguments(format!(
            "the module has no function {func} (the rule's primal)"
        )));
    };
    let fname = decl.name.as_str();
    let sig = &decl.sig;
    if args.len() != sig.params.len() || args.iter().zip(&sig.params).any(|(a, &t)| !a.fits(t)) {
        return Err(CheckError::BadArguments(format!(
            "@{fname} takes {sig}, given {args:?}"
        )));
    }
    check_layout(rule, fname, sig)?;
    let config = &rule.layout.config;
    let io = Io::new(rule, sig, args);

    // The plain function at `args`.
    let mut plain = Interpreter::new(module).with_hosts(hosts);
    let mut run_plain = |args: &[Val]| -> Result<(Vec<Val>, Vec<Val>), RunError> {
        let mut a = args.to_vec();
        let results = plain.call(func, &mut a)?;
        Ok((results, a))
    };
    let (primal, plain_after) = run_plain(args).map_err(|error| CheckError::Run {
        what: format!("@{fname}"),
        error: Box::new(error),
    })?;
    for (i, &t) in sig.params.iter().enumerate() {
        if !t.is_mut_slice() && !same_val(&plain_after[i], &args[i]) {
            return Err(CheckError::ArgumentsChanged {
                what: format!("@{fname}"),
            });
        }
    }

    // 1: the primal, the slices the forward pass leaves, the arguments, the tape
    // (which value_and_gradient checks).
    let mut engine = Interpreter::new(&rule.module).with_hosts(hosts);
    let out = value_and_gradient(&mut engine, rule, args, &Seeds::default())?;
    if config.needs_primal && !out.value.as_ref().is_some_and(|v| same_vals(v, &primal)) {
        return Err(CheckError::Primal {
            expected: primal,
            found: out.value.unwrap_or_default(),
        });
    }
    let fwd_name = format!("@{}", rule.module.name(rule.forward));
    for (i, &t) in sig.params.iter().enumerate() {
        let found = out.args.get(i);
        if t.is_mut_slice() {
            if config.params[i] == Activity::DupNoNeed {
                continue;
            }
            if !found.is_some_and(|v| same_val(v, &plain_after[i])) {
                return Err(CheckError::Contents {
                    param: i,
                    expected: plain_after[i].clone(),
                    found: found.cloned().unwrap_or(Val::Bool(false)),
                });
            }
        } else if !found.is_some_and(|v| same_val(v, &args[i])) {
            return Err(CheckError::ArgumentsChanged { what: fwd_name });
        }
    }
    let gradient = io.cotangents(&out)?;

    // 2: the gradient against central differences of the sum of the float results.
    let coords = io.pick(opts.max_coords);
    let mut ones = vec![0.0; io.n_outputs()];
    ones[..io.seeded.len()].fill(1.0);
    let mut report_gradient = Vec::with_capacity(coords.len());
    let mut finite_differences = Vec::with_capacity(coords.len());
    for &c in &coords {
        let g = gradient[c];
        let Coord { param, index } = io.inputs[c];
        report_gradient.push(g);
        if io.seeded.is_empty() {
            // `Jᵀ 0` is 0, exactly.
            if g != 0.0 {
                return Err(CheckError::Gradient {
                    param,
                    index,
                    rule: g,
                    estimates: Vec::new(),
                });
            }
            finite_differences.push(0.0);
            continue;
        }
        let mut dir = vec![0.0; io.inputs.len()];
        dir[c] = 1.0;
        let mut estimates = Vec::new();
        let mut agreed = None;
        for &h in &opts.steps {
            // Divided by the step actually taken, in units of `h`.
            let est = io
                .directional(&mut run_plain, args, &dir, h, &ones)
                .map(|(d, veff)| d / veff[c])
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
                    param,
                    index,
                    rule: g,
                    estimates,
                });
            }
        }
    }

    // 3: the dot-product test over every coordinate.
    let mut rng = SplitMix64(opts.seed);
    let mut dot = Vec::new();
    for trial in 0..opts.trials {
        let v: Vec<f64> = io.inputs.iter().map(|_| rng.uniform()).collect();
        let w: Vec<f64> = io
            .output_f32
            .iter()
            .map(|&f32| round(f32, rng.uniform()))
            .collect();
        let out = value_and_gradient(&mut engine, rule, args, &io.seeds(&w))?;
        let jtw = io.cotangents(&out)?;
        if v.is_empty() || w.is_empty() {
            dot.push((0.0, 0.0));
            continue;
        }
        let mut estimates = Vec::new();
        let mut agreed = None;
        for &h in &opts.steps {
            let (lhs, veff) = io
                .directional(&mut run_plain, args, &v, h, &w)
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
            None => {
                let culprit = io.localize(&mut engine, rule, args, &mut run_plain, opts);
                return Err(CheckError::DotProduct {
                    trial,
                    estimates,
                    culprit,
                });
            }
        }
    }

    Ok(CheckReport {
        primal,
        coords: coords.iter().map(|&c| io.inputs[c]).collect(),
        gradient: report_gradient,
        finite_differences,
        dot,
    })
}

/// Checks that `rule` fits the primal `@fname` of signature `sig`: its functions
/// exist, the primal has that signature, and the layout is the one its
/// configuration gives (so value_and_gradient and the checks agree on what the
/// pullback's parameters and results are).
fn check_layout(rule: &Rule, fname: &str, sig: &Signature) -> Result<(), CheckError> {
    let bad = |m: String| Err(CheckError::BadRule(m));
    let layout = &rule.layout;
    let config = &layout.config;
    for (what, id) in [
        ("primal", layout.primal),
        ("forward pass", rule.forward),
        ("pullback", rule.pullback),
    ] {
        if rule.module.funcs.get(id).is_none() {
            return bad(format!("the rule's module has no {what} ({id})"));
        }
    }
    let theirs = rule.module.sig(layout.primal);
    if theirs != sig {
        return bad(format!(
            "the rule's primal @{} has signature {theirs}, the function @{fname} {sig}",
            rule.module.name(layout.primal)
        ));
    }
    if config.params.len() != sig.params.len() {
        return bad(format!(
            "the rule's configuration has {} activities, @{fname} {} parameters",
            config.params.len(),
            sig.params.len()
        ));
    }
    for (i, (&t, &a)) in sig.params.iter().zip(&config.params).enumerate() {
        let fits = match a {
            Activity::Active => t.is_float(),
            Activity::Dup | Activity::DupNoNeed => t.is_slice() && t.is_differentiable(),
            Activity::Const => true,
        };
        if !fits {
            return bad(format!(
                "parameter {} of @{fname} is a {t} and cannot be {a}",
                i + 1
            ));
        }
    }
    let n = sig.params.len();
    let expected = [
        (
            "active_params",
            &layout.active_params,
            (0..n)
                .filter(|&i| config.params[i] == Activity::Active)
                .collect::<Vec<usize>>(),
        ),
        (
            "slice_params",
            &layout.slice_params,
            crate::rrule::slice_params(sig, config),
        ),
        (
            "shadow_params",
            &layout.shadow_params,
            (0..n)
                .filter(|&i| matches!(config.params[i], Activity::Dup | Activity::DupNoNeed))
                .collect(),
        ),
        (
            "seeded_results",
            &layout.seeded_results,
            (0..sig.results.len())
                .filter(|&j| config.ret == RetActivity::Active && sig.results[j].is_float())
                .collect(),
        ),
    ];
    for (name, found, want) in expected {
        if *found != want {
            return bad(format!(
                "the rule's layout has {name} = {found:?}, its configuration gives {want:?}"
            ));
        }
    }
    Ok(())
}

/// The function as a map between float vectors: its input coordinates (active
/// scalars, `dup` slices' elements) and output coordinates (seeded float results,
/// then `dup` slices' elements).
struct Io<'a> {
    sig: &'a Signature,
    /// The input coordinates, in parameter order.
    inputs: Vec<Coord>,
    /// The length of each parameter's slice (0 for scalars).
    lens: Vec<usize>,
    /// The results that are outputs (the float ones, when the return is active).
    seeded: &'a [usize],
    /// The slice parameters whose contents are inputs and outputs.
    shadows: &'a [usize],
    /// Per output coordinate, whether it is `f32`.
    output_f32: Vec<bool>,
}

impl<'a> Io<'a> {
    fn new(rule: &'a Rule, sig: &'a Signature, args: &[Val]) -> Io<'a> {
        let layout = &rule.layout;
        let lens: Vec<usize> = args.iter().map(|a| a.slice_len().unwrap_or(0)).collect();
        let mut inputs = Vec::new();
        for (i, &len) in lens.iter().enumerate() {
            if layout.active_params.contains(&i) {
                inputs.push(Coord {
                    param: i,
                    index: None,
                });
            } else if layout.shadow_params.contains(&i) {
                inputs.extend((0..len).map(|k| Coord {
                    param: i,
                    index: Some(k),
                }));
            }
        }
        let mut output_f32: Vec<bool> = layout
            .seeded_results
            .iter()
            .map(|&j| sig.results[j] == Type::F32)
            .collect();
        for &i in &layout.shadow_params {
            let f32 = sig.params[i].elem() == Some(Elem::F32);
            output_f32.extend((0..lens[i]).map(|_| f32));
        }
        Io {
            sig,
            inputs,
            lens,
            seeded: &layout.seeded_results,
            shadows: &layout.shadow_params,
            output_f32,
        }
    }

    fn n_outputs(&self) -> usize {
        self.output_f32.len()
    }

    /// Output coordinate `j` as a message names it: `result 1`, or `element 3 of
    /// parameter 2 (its contents after the call)`.
    fn output_name(&self, j: usize) -> String {
        if let Some(&r) = self.seeded.get(j) {
            return format!("result {}", r + 1);
        }
        let mut k = j - self.seeded.len();
        for &i in self.shadows {
            if k < self.lens[i] {
                return format!(
                    "element {k} of parameter {} (its contents after the call)",
                    i + 1
                );
            }
            k -= self.lens[i];
        }
        format!("output {j}")
    }

    /// After a failed dot-product test: the first (output, input) pair whose
    /// entry of `Jᵀ` the rule gets wrong, seeding one output coordinate at a time
    /// (up to 64) and comparing each input coordinate the gradient check picks
    /// with central differences, as a sentence; `None` if every pair agrees.
    fn localize(
        &self,
        engine: &mut Interpreter<'_>,
        rule: &Rule,
        args: &[Val],
        run_plain: &mut impl FnMut(&[Val]) -> Result<(Vec<Val>, Vec<Val>), RunError>,
        opts: &CheckOptions,
    ) -> Option<String> {
        let coords = self.pick(opts.max_coords);
        for j in 0..self.n_outputs().min(64) {
            let mut w = vec![0.0; self.n_outputs()];
            w[j] = 1.0;
            let out = value_and_gradient(engine, rule, args, &self.seeds(&w)).ok()?;
            let jtw = self.cotangents(&out).ok()?;
            for &c in &coords {
                let mut dir = vec![0.0; self.inputs.len()];
                dir[c] = 1.0;
                let mut estimates = Vec::new();
                let agrees = opts.steps.iter().any(|&h| {
                    let est = self
                        .directional(run_plain, args, &dir, h, &w)
                        .map(|(d, veff)| d / veff[c])
                        .unwrap_or(f64::NAN);
                    estimates.push((h, est));
                    opts.agree(jtw[c], est)
                });
                if !agrees {
                    return Some(format!(
                        "the cotangent of {} from {} is {}, but finite differences give {estimates:?} (step, estimate)",
                        self.inputs[c],
                        self.output_name(j),
                        jtw[c]
                    ));
                }
            }
        }
        None
    }

    /// The indices (into `inputs`) of the coordinates the gradient check compares:
    /// every scalar and the first and last element of every slice, then up to
    /// `max` in all, the others spread evenly; in input order.
    fn pick(&self, max: usize) -> Vec<usize> {
        let (mut picked, rest): (Vec<usize>, Vec<usize>) = (0..self.inputs.len()).partition(|&n| {
            let c = self.inputs[n];
            match c.index {
                None => true,
                Some(k) => k == 0 || k + 1 == self.lens[c.param],
            }
        });
        let budget = max.saturating_sub(picked.len());
        if rest.len() <= budget {
            picked.extend(rest);
        } else {
            // The middles of `budget` equal parts of `rest`: distinct, since each
            // part holds more than one coordinate.
            let (n, b) = (rest.len() as u128, budget as u128);
            picked.extend((0..b).map(|k| rest[((2 * k + 1) * n / (2 * b)) as usize]));
        }
        picked.sort_unstable();
        picked
    }

    /// The seeds that carry the output cotangent `w`: the results' part to the
    /// pullback, each slice's part as its shadow's initial contents.
    fn seeds(&self, w: &[f64]) -> Seeds {
        let (results, mut rest) = w.split_at(self.seeded.len().min(w.len()));
        let mut shadows: Vec<Option<Val>> = vec![None; self.sig.params.len()];
        for &i in self.shadows {
            let (part, tail) = rest.split_at(self.lens[i].min(rest.len()));
            rest = tail;
            shadows[i] = Some(match self.sig.params[i].elem() {
                Some(Elem::F32) => Val::F32s(part.iter().map(|&x| x as f32).collect()),
                _ => Val::F64s(part.to_vec()),
            });
        }
        Seeds {
            // `seeded` is every float result (the return is active) or none.
            results: (!self.seeded.is_empty()).then(|| results.to_vec()),
            shadows,
        }
    }

    /// `Jᵀ w` over the inputs, from an evaluation of the rule: the active scalars'
    /// cotangents and the final shadows, as `f64`.
    fn cotangents(&self, out: &Gradient) -> Result<Vec<f64>, CheckError> {
        self.inputs
            .iter()
            .map(|&c| {
                out.gradient
                    .get(c.param)
                    .and_then(|g| g.as_ref())
                    .and_then(|g| get(g, c.index))
                    .ok_or_else(|| {
                        CheckError::BadRule(format!(
                            "the rule gives no float cotangent for {c}: {:?}",
                            out.gradient.get(c.param)
                        ))
                    })
            })
            .collect()
    }

    /// The output coordinates of a call of the plain function that returned
    /// `results` and left `args`.
    fn outputs(&self, results: &[Val], args: &[Val]) -> Option<Vec<f64>> {
        let mut y = Vec::with_capacity(self.n_outputs());
        for &j in self.seeded {
            y.push(get(results.get(j)?, None)?);
        }
        for &i in self.shadows {
            let a = args.get(i)?;
            for k in 0..self.lens[i] {
                y.push(get(a, Some(k))?);
            }
        }
        Some(y)
    }

    /// `⟨w, (F(x + h v) - F(x - h v)) / 2h⟩`, moving only the input coordinates, and
    /// the direction actually taken (after rounding to the inputs' types). `None` if
    /// the function fails at either point.
    fn directional(
        &self,
        run: &mut impl FnMut(&[Val]) -> Result<(Vec<Val>, Vec<Val>), RunError>,
        args: &[Val],
        v: &[f64],
        h: f64,
        w: &[f64],
    ) -> Option<(f64, Vec<f64>)> {
        let mut plus = args.to_vec();
        let mut minus = args.to_vec();
        let mut veff = Vec::with_capacity(v.len());
        for (c, &vi) in self.inputs.iter().zip(v) {
            let x = get(&args[c.param], c.index)?;
            let p = set(&mut plus[c.param], c.index, x + h * vi)?;
            let m = set(&mut minus[c.param], c.index, x - h * vi)?;
            veff.push((p - m) / (2.0 * h));
        }
        let (rp, ap) = run(&plus).ok()?;
        let (rm, am) = run(&minus).ok()?;
        let yp = self.outputs(&rp, &ap)?;
        let ym = self.outputs(&rm, &am)?;
        let d = yp
            .iter()
            .zip(&ym)
            .zip(w)
            .filter(|&(_, &wk)| wk != 0.0)
            .map(|((p, m), wk)| wk * (p - m) / (2.0 * h))
            .sum();
        Some((d, veff))
    }
}

/// A float scalar (`index` `None`) or an element of a float slice, as `f64`.
fn get(v: &Val, index: Option<usize>) -> Option<f64> {
    match (v, index) {
        (Val::F64(x), None) => Some(*x),
        (Val::F32(x), None) => Some(f64::from(*x)),
        (Val::F64s(xs), Some(k)) => xs.get(k).copied(),
        (Val::F32s(xs), Some(k)) => xs.get(k).map(|&x| f64::from(x)),
        _ => None,
    }
}

/// Sets a float scalar or slice element to `x` (`f32` rounds); returns the value
/// stored, as `f64`.
fn set(v: &mut Val, index: Option<usize>, x: f64) -> Option<f64> {
    match (&mut *v, index) {
        (Val::F64(y), None) => *y = x,
        (Val::F32(y), None) => *y = x as f32,
        (Val::F64s(ys), Some(k)) => *ys.get_mut(k)? = x,
        (Val::F32s(ys), Some(k)) => *ys.get_mut(k)? = x as f32,
        _ => return None,
    }
    get(v, index)
}

/// `x` rounded to `f32` if `f32`.
fn round(f32: bool, x: f64) -> f64 {
    if f32 { f64::from(x as f32) } else { x }
}

/// Equality with floats compared by bit pattern (so NaN equals NaN), slices element
/// by element.
fn same_val(x: &Val, y: &Val) -> bool {
    fn bits64(a: &[f64], b: &[f64]) -> bool {
        a.len() == b.len() && a.iter().zip(b).all(|(p, q)| p.to_bits() == q.to_bits())
    }
    fn bits32(a: &[f32], b: &[f32]) -> bool {
        a.len() == b.len() && a.iter().zip(b).all(|(p, q)| p.to_bits() == q.to_bits())
    }
    match (x, y) {
        (Val::F64(p), Val::F64(q)) => p.to_bits() == q.to_bits(),
        (Val::F32(p), Val::F32(q)) => p.to_bits() == q.to_bits(),
        (Val::F64s(p), Val::F64s(q)) => bits64(p, q),
        (Val::F32s(p), Val::F32s(q)) => bits32(p, q),
        _ => x == y,
    }
}

fn same_vals(a: &[Val], b: &[Val]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| same_val(x, y))
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
