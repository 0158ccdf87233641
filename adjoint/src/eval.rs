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
use gradlift_ir::{Elem, FuncId, Type};

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

/// Why [`value_and_gradient`] (or [`run_rule`] on any [`Engine`]) failed. `E` is the
/// engine's run-time error: the interpreter's by default.
#[derive(Clone, Debug)]
pub enum EvalError<E = InterpError> {
    /// The arguments, seeds or shadows do not fit the function.
    BadArguments(String),
    /// The forward pass or the pullback failed at run time.
    Run {
        /// Which function.
        what: String,
        /// The engine's error.
        error: Box<E>,
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

impl<E: fmt::Display> fmt::Display for EvalError<E> {
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

impl<E: fmt::Debug + fmt::Display> std::error::Error for EvalError<E> {}

/// What runs a rule's functions: the interpreter here, the JIT in the `gradlift`
/// crate. The tape persists across calls (see the IR's tape rules).
pub trait Engine {
    /// A run-time error of a call.
    type Error;
    /// Calls `func` with `args` (`mut` slices updated in place), writing its results
    /// into `out` (cleared first).
    fn call_into(
        &mut self,
        func: FuncId,
        args: &mut [Val],
        out: &mut Vec<Val>,
    ) -> Result<(), Self::Error>;
    /// The scalars on the tape now.
    fn tape_scalars(&self) -> usize;
    /// The most bytes the tape held since its last reset.
    fn tape_peak_bytes(&self) -> usize;
    /// Empties the tape (keeping memory for later calls, where the engine can).
    fn reset_tape(&mut self);
}

impl Engine for Interpreter<'_> {
    type Error = InterpError;

    fn call_into(
        &mut self,
        func: FuncId,
        args: &mut [Val],
        out: &mut Vec<Val>,
    ) -> Result<(), InterpError> {
        let r = self.call(func, args)?;
        out.clear();
        out.extend(r);
        Ok(())
    }

    fn tape_scalars(&self) -> usize {
        self.tape().scalars
    }

    fn tape_peak_bytes(&self) -> usize {
        self.tape().peak_bytes
    }

    fn reset_tape(&mut self) {
        Interpreter::reset_tape(self);
    }
}

/// The buffers of [`run_rule`], reused from call to call: once they have the sizes
/// of the arguments, a call (on an engine that allocates nothing itself) allocates
/// nothing.
#[derive(Clone, Debug, Default)]
pub struct EvalBuffers {
    /// The arguments after the forward pass (`mut` slices as the function left
    /// them).
    pub args: Vec<Val>,
    /// The primal results; empty when the rule does not return them (the primal was
    /// not needed).
    pub value: Vec<Val>,
    /// Per parameter: the cotangent for `active`, the final shadow for `dup` and
    /// `dupnoneed`, `None` for `const`.
    pub gradient: Vec<Option<Val>>,
    /// The most bytes the tape held during the call (since its last reset).
    pub tape_peak_bytes: usize,
    /// The pullback's arguments.
    rvs_args: Vec<Val>,
    /// The pullback's results.
    cts: Vec<Val>,
}

/// Runs `rule`'s forward pass at `args` and its pullback from `seeds` on `engine`
/// (which must run `rule.module`), with the results in `bufs`. See the
/// [module docs](self); [`value_and_gradient`] is this on the interpreter with
/// fresh buffers.
///
/// Checks the arguments, seeds and shadows against the primal's signature first, and
/// that the tape comes back to its height before the forward pass. When the tape
/// held nothing before, it is reset afterwards.
pub fn run_rule<E: Engine>(
    engine: &mut E,
    rule: &Rule,
    args: &[Val],
    seeds: &Seeds,
    bufs: &mut EvalBuffers,
) -> Result<(), EvalError<E::Error>> {
    let module = &rule.module;
    let layout = &rule.layout;
    let sig = module.sig(layout.primal);
    let fname = module.name(layout.primal);
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
    if let Some(s) = &seeds.results
        && s.len() != n_float_results
    {
        return Err(bad(format!(
            "@{fname} has {n_float_results} float results, given {} seeds",
            s.len()
        )));
    }
    if seeds.shadows.len() > sig.params.len() {
        return Err(bad(format!(
            "@{fname} takes {} parameters, given {} shadows",
            sig.params.len(),
            seeds.shadows.len()
        )));
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
    for &i in &layout.shadow_params {
        if let Some(Some(s)) = seeds.shadows.get(i)
            && (!s.fits(sig.params[i]) || s.slice_len() != args[i].slice_len())
        {
            return Err(bad(format!(
                "the shadow of parameter {} of @{fname} must be a {} of length {}, given {}",
                i + 1,
                sig.params[i],
                args[i].slice_len().unwrap_or(0),
                describe(s)
            )));
        }
    }

    let before = engine.tape_scalars();
    assign_all(&mut bufs.args, args);
    engine
        .call_into(rule.forward, &mut bufs.args, &mut bufs.value)
        .map_err(|error| EvalError::Run {
            what: format!("@{}", module.name(rule.forward)),
            error: Box::new(error),
        })?;

    // The pullback's arguments: slices, shadows, result cotangents. The shadows'
    // buffers are the previous call's gradient, swapped back in.
    let n_slices = layout.slice_params.len();
    let n_shadows = layout.shadow_params.len();
    let n = n_slices + n_shadows + layout.seeded_results.len();
    bufs.gradient.resize(sig.params.len(), None);
    bufs.rvs_args.truncate(n);
    while bufs.rvs_args.len() < n {
        bufs.rvs_args.push(Val::Bool(false));
    }
    for (k, &i) in layout.slice_params.iter().enumerate() {
        assign(&mut bufs.rvs_args[k], &bufs.args[i]);
    }
    for (k, &i) in layout.shadow_params.iter().enumerate() {
        let slot = &mut bufs.rvs_args[n_slices + k];
        if let Some(Some(g)) = bufs.gradient.get_mut(i) {
            core::mem::swap(slot, g);
        }
        match seeds.shadows.get(i).and_then(|s| s.as_ref()) {
            Some(s) => assign(slot, s),
            None => zero_like(slot, &args[i]),
        }
    }
    let mut k_float = 0;
    let mut k_seed = n_slices + n_shadows;
    for (j, &t) in sig.results.iter().enumerate() {
        if !t.is_float() {
            continue;
        }
        if layout.seeded_results.contains(&j) {
            let s = seeds
                .results
                .as_ref()
                .and_then(|s| s.get(k_float).copied())
                .unwrap_or(1.0);
            bufs.rvs_args[k_seed] = match t {
                Type::F32 => Val::F32(s as f32),
                _ => Val::F64(s),
            };
            k_seed += 1;
        }
        k_float += 1;
    }
    engine
        .call_into(rule.pullback, &mut bufs.rvs_args, &mut bufs.cts)
        .map_err(|error| EvalError::Run {
            what: format!("@{}", module.name(rule.pullback)),
            error: Box::new(error),
        })?;
    let after = engine.tape_scalars();
    bufs.tape_peak_bytes = engine.tape_peak_bytes();
    if after != before {
        return Err(EvalError::Tape { before, after });
    }
    if before == 0 {
        engine.reset_tape();
    }

    for (&i, ct) in layout.active_params.iter().zip(&bufs.cts) {
        bufs.gradient[i] = Some(ct.clone());
    }
    for (k, &i) in layout.shadow_params.iter().enumerate() {
        let g = bufs.gradient[i].get_or_insert(Val::Bool(false));
        core::mem::swap(g, &mut bufs.rvs_args[n_slices + k]);
    }
    // A parameter neither active nor shadowed has no gradient.
    for (i, g) in bufs.gradient.iter_mut().enumerate() {
        if !layout.active_params.contains(&i) && !layout.shadow_params.contains(&i) {
            *g = None;
        }
    }
    if !layout.config.needs_primal {
        bufs.value.clear();
    }
    Ok(())
}

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
    let mut bufs = EvalBuffers::default();
    run_rule(engine, rule, args, seeds, &mut bufs)?;
    Ok(Gradient {
        value: rule.layout.config.needs_primal.then_some(bufs.value),
        gradient: bufs.gradient,
        args: bufs.args,
        tape_peak_bytes: bufs.tape_peak_bytes,
    })
}

/// `dst = src`, reusing `dst`'s buffer when both are slices of one type and length.
pub fn assign(dst: &mut Val, src: &Val) {
    match (dst, src) {
        (Val::F64s(d), Val::F64s(s)) if d.len() == s.len() => d.copy_from_slice(s),
        (Val::F32s(d), Val::F32s(s)) if d.len() == s.len() => d.copy_from_slice(s),
        (Val::I64s(d), Val::I64s(s)) if d.len() == s.len() => d.copy_from_slice(s),
        (d, s) => *d = s.clone(),
    }
}

/// `dst = src` element by element ([`assign`]), `dst` resized to `src`'s length.
pub fn assign_all(dst: &mut Vec<Val>, src: &[Val]) {
    dst.truncate(src.len());
    for (d, s) in dst.iter_mut().zip(src) {
        assign(d, s);
    }
    let have = dst.len();
    dst.extend(src[have..].iter().cloned());
}

/// `dst` = zeros shaped like `like`, reusing `dst`'s buffer when it can.
fn zero_like(dst: &mut Val, like: &Val) {
    match (dst, like) {
        (Val::F64s(d), Val::F64s(s)) if d.len() == s.len() => d.fill(0.0),
        (Val::F32s(d), Val::F32s(s)) if d.len() == s.len() => d.fill(0.0),
        (Val::I64s(d), Val::I64s(s)) if d.len() == s.len() => d.fill(0),
        (d, s) => *d = s.zeros_like(),
    }
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
