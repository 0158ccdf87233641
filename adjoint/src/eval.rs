//! Running a rule on the interpreter: the value and the gradient in one call
//! ([`value_and_gradient`]), following the rule's calling convention.
//!
//! For `func @f(params) -> results` and its [`Rule`]:
//!
//! 1. `@f.fwd(params...) -> results` runs with the primal arguments (`mut` slices are
//!    updated in place, as the primal would update them) and leaves what the
//!    pullback needs on the interpreter's tape;
//! 2. `@f.rvs(slices..., shadows..., dy...) -> (dx...)` runs with every slice
//!    argument (as the forward pass left it), one shadow per `dup`/`dupnoneed`
//!    parameter, and one cotangent per float result when the return is `active`. It
//!    returns one cotangent per `active` parameter and adds (`+=`) the slices'
//!    cotangents into the shadows.
//!
//! A shadow starts as the caller's (zeros by default). A `mut` slice's shadow is how a
//! caller seeds the derivative of what the function writes into it: the shadow's
//! initial contents are the cotangent of the slice's final contents, and it ends
//! holding the cotangent of its initial contents.
//!
//! ```
//! use gradlift_adjoint::eval::{Seeds, value_and_gradient};
//! use gradlift_adjoint::{RuleConfig, build_rrule};
//! use gradlift_ir::interp::{Interpreter, Val};
//!
//! let module = gradlift_ir::parse("
//!     func @f(%x: f64, %y: f64) -> f64 {
//!     entry:
//!         %xx = fmul %x, %x
//!         %y3 = fmul 3.0, %y
//!         %r = fadd %xx, %y3
//!         ret %r
//!     }
//! ")?;
//! let f = module.func_by_name("f").unwrap();
//! let rule = build_rrule(&module, f, &RuleConfig::default_for(module.sig(f)))?;
//! let mut engine = Interpreter::new(&rule.module);
//! let out = value_and_gradient(&mut engine, &rule, &[Val::F64(2.0), Val::F64(1.0)], &Seeds::default())?;
//! assert_eq!(out.value, Some(vec![Val::F64(7.0)]));
//! assert_eq!(out.gradient, [Some(Val::F64(4.0)), Some(Val::F64(3.0))]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use core::fmt;

use gradlift_ir::interp::{InterpError, Interpreter, Val};
use gradlift_ir::{Elem, Type};

use crate::rrule::Rule;

/// The cotangents a gradient starts from.
#[derive(Clone, PartialEq, Debug, Default)]
pub struct Seeds {
    /// One cotangent per float result of the primal, in order; `None` seeds each
    /// with 1. Ignored when the return is `const`.
    pub results: Option<Vec<f64>>,
    /// Per parameter, the initial contents of its shadow (`dup`/`dupnoneed` slices
    /// only); `None`, or a missing entry, for zeros. Empty: all zeros.
    pub shadows: Vec<Option<Val>>,
}

impl Seeds {
    /// Seeds the float results with `seeds` (one per float result).
    pub fn results(seeds: impl Into<Vec<f64>>) -> Seeds {
        Seeds {
            results: Some(seeds.into()),
            shadows: Vec::new(),
        }
    }

    /// The same seeds, with these initial shadows (one entry per parameter).
    pub fn with_shadows(mut self, shadows: impl Into<Vec<Option<Val>>>) -> Seeds {
        self.shadows = shadows.into();
        self
    }
}

/// What [`value_and_gradient`] returns.
#[derive(Clone, PartialEq, Debug)]
pub struct Gradient {
    /// The primal results, or `None` when the rule does not return them (the primal
    /// was not needed).
    pub value: Option<Vec<Val>>,
    /// Per parameter: the cotangent for `active`, the final shadow for `dup` and
    /// `dupnoneed`, `None` for `const`.
    pub gradient: Vec<Option<Val>>,
    /// The arguments after the forward pass (`mut` slices as the function left
    /// them).
    pub args: Vec<Val>,
    /// The most bytes the interpreter's tape held during the call (since its last
    /// reset: the whole gradient, when the tape was empty before).
    pub tape_peak_bytes: usize,
}

/// Why [`value_and_gradient`] failed.
#[derive(Clone, Debug)]
pub enum EvalError {
    /// The arguments, seeds or shadows do not fit the function.
    BadArguments(String),
    /// The forward pass or the pullback failed at run time.
    Run {
        /// Which function.
        what: String,
        /// The interpreter's error.
        error: Box<InterpError>,
    },
    /// The pullback did not take off the tape exactly what the forward pass put on
    /// it (a bug in the derivation, or a hand-written rule that is wrong).
    Tape {
        /// Scalars on the tape before the forward pass.
        before: usize,
        /// Scalars after the pullback.
        after: usize,
    },
}

impl fmt::Display for EvalError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EvalError::BadArguments(m) => f.write_str(m),
            EvalError::Run { what, error } => write!(f, "running {what}: {error}"),
            EvalError::Tape { before, after } => write!(
                f,
                "the tape held {before} scalars before the forward pass and {after} after the pullback"
            ),
        }
    }
}

impl std::error::Error for EvalError {}

/// Runs `rule`'s forward pass at `args` and its pullback from `seeds` on `engine`
/// (which must be an interpreter of `rule.module`). See the [module docs](self).
///
/// Checks the arguments, seeds and shadows against the primal's signature first, and
/// that the tape comes back to its height before the forward pass. When the tape
/// held nothing before, it is reset afterwards (its buffers freed).
pub fn value_and_gradient(
    engine: &mut Interpreter<'_>,
    rule: &Rule,
    args: &[Val],
    seeds: &Seeds,
) -> Result<Gradient, EvalError> {
    let module = &rule.module;
    let layout = &rule.layout;
    let primal = layout.primal;
    let sig = module.sig(primal).clone();
    let fname = module.name(primal);
    let bad = |m: String| EvalError::BadArguments(m);
    if args.len() != sig.params.len() {
        return Err(bad(format!(
            "@{fname} takes {} arguments, given {}",
            sig.params.len(),
            args.len()
        )));
    }
    for (i, (a, &t)) in args.iter().zip(&sig.params).enumerate() {
        if !a.fits(t) {
            return Err(bad(format!(
                "argument {} of @{fname} must be {t}, given {}",
                i + 1,
                describe(a)
            )));
        }
    }
    let n_float_results = sig.results.iter().filter(|t| t.is_float()).count();
    let result_seeds: Vec<f64> = match &seeds.results {
        Some(s) if s.len() != n_float_results => {
            return Err(bad(format!(
                "@{fname} has {n_float_results} float results, given {} seeds",
                s.len()
            )));
        }
        Some(s) => s.clone(),
        None => vec![1.0; n_float_results],
    };
    if seeds.shadows.len() > sig.params.len() {
        return Err(bad(format!(
            "@{fname} takes {} parameters, given {} shadows",
            sig.params.len(),
            seeds.shadows.len()
        )));
    }

    let before = engine.tape().scalars;
    let mut fwd_args = args.to_vec();
    let out = engine
        .call(rule.forward, &mut fwd_args)
        .map_err(|error| EvalError::Run {
            what: format!("@{}", module.name(rule.forward)),
            error: Box::new(error),
        })?;

    // The pullback's arguments: slices, shadows, result cotangents.
    let mut rvs_args: Vec<Val> = Vec::new();
    for &i in &layout.slice_params {
        rvs_args.push(fwd_args[i].clone());
    }
    for &i in &layout.shadow_params {
        let given = seeds.shadows.get(i).and_then(|s| s.as_ref());
        let shadow = match given {
            Some(s) => {
                if !s.fits(sig.params[i]) || s.slice_len() != args[i].slice_len() {
                    return Err(bad(format!(
                        "the shadow of parameter {} of @{fname} must be a {} of length {}, given {}",
                        i + 1,
                        sig.params[i],
                        args[i].slice_len().unwrap_or(0),
                        describe(s)
                    )));
                }
                s.clone()
            }
            None => args[i].zeros_like(),
        };
        rvs_args.push(shadow);
    }
    for (i, s) in seeds.shadows.iter().enumerate() {
        if s.is_some() && !layout.shadow_params.contains(&i) {
            return Err(bad(format!(
                "parameter {} of @{fname} is {}, so it has no shadow",
                i + 1,
                layout.config.params[i]
            )));
        }
    }
    let float_results: Vec<usize> = (0..sig.results.len())
        .filter(|&j| sig.results[j].is_float())
        .collect();
    for &j in &layout.seeded_results {
        let k = float_results.iter().position(|&f| f == j).unwrap_or(0);
        let s = result_seeds.get(k).copied().unwrap_or(1.0);
        rvs_args.push(match sig.results[j] {
            Type::F32 => Val::F32(s as f32),
            _ => Val::F64(s),
        });
    }
    let cts = engine
        .call(rule.pullback, &mut rvs_args)
        .map_err(|error| EvalError::Run {
            what: format!("@{}", module.name(rule.pullback)),
            error: Box::new(error),
        })?;
    let stats = engine.tape();
    let (after, tape_peak_bytes) = (stats.scalars, stats.peak_bytes);
    if after != before {
        return Err(EvalError::Tape { before, after });
    }
    if before == 0 {
        engine.reset_tape();
    }

    let mut gradient: Vec<Option<Val>> = vec![None; sig.params.len()];
    for (&i, ct) in layout.active_params.iter().zip(cts) {
        gradient[i] = Some(ct);
    }
    let n_slices = layout.slice_params.len();
    for (k, &i) in layout.shadow_params.iter().enumerate() {
        gradient[i] = Some(core::mem::replace(
            &mut rvs_args[n_slices + k],
            Val::Bool(false),
        ));
    }
    Ok(Gradient {
        value: layout.config.needs_primal.then_some(out),
        gradient,
        args: fwd_args,
        tape_peak_bytes,
    })
}

/// `a [f64] of length 3`, `an f64`, ... for messages.
fn describe(v: &Val) -> String {
    match v.slice_len() {
        Some(n) => {
            let elem = match v {
                Val::F32s(_) => Elem::F32,
                Val::I64s(_) => Elem::I64,
                _ => Elem::F64,
            };
            format!("a [{elem}] of length {n}")
        }
        None => format!("{} {v:?}", v.ty()),
    }
}
