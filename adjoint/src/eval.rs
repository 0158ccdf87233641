//! Running a rule on any engine (the interpreter, or the JIT): the rule's calling
//! convention, written once ([`run_rule`] on borrowed arguments, [`run_rule_vals`]
//! and [`value_and_gradient`] on owned values).
//!
//! [`run_rule`]'s docs state the convention; the example runs it on the
//! interpreter.
//!
//! ```
//! use gradlift_adjoint::{RuleConfig, Seeds, build_rrule, value_and_gradient};
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

use gradlift_ir::engine::{Arg, Engine, RunError, TapeStats, Val, check_args};
use gradlift_ir::{FuncId, Type};
use smallvec::SmallVec;

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
    /// The most bytes the engine's tape held during the call (since its last
    /// reset: the whole gradient, when the tape was empty before).
    pub tape_peak_bytes: usize,
    /// The steps checkpointed loops ran again during the call
    /// ([`TapeStats::recomputed_steps`]).
    pub recomputed_steps: u64,
}

/// Why running a rule failed.
#[derive(Clone, PartialEq, Debug)]
#[non_exhaustive]
pub enum EvalError {
    /// The arguments, shadows or seeds do not fit the function.
    BadArguments(String),
    /// The forward pass or the pullback failed at run time.
    Run {
        /// Which function (`@f.fwd` or `@f.rvs`).
        what: String,
        /// The engine's error.
        error: Box<RunError>,
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

/// The run-time error is part of the message, so there is no `source`.
impl std::error::Error for EvalError {}

/// The buffers of [`run_rule_vals`], reused from call to call: once they have the
/// sizes of the arguments, a call (on an engine that allocates nothing itself)
/// allocates nothing.
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
    /// The steps checkpointed loops ran again during the call
    /// ([`TapeStats::recomputed_steps`]).
    pub recomputed_steps: u64,
    /// The shadows lent to the pullback.
    shadows: Vec<Val>,
    /// The pullback's results: the active parameters' cotangents.
    cts: Vec<Val>,
}

/// Runs `rule`'s forward pass and its pullback on `engine` (which must run
/// `rule.module`) with borrowed arguments: the rule's calling convention, the one
/// implementation of it.
///
/// For `func @f(params) -> results` and its [`Rule`]:
///
/// 1. `@f.fwd(params...) -> results` runs with the primal arguments (`mut` slices are
///    updated in place, as the primal would update them) and leaves what the
///    pullback needs on the engine's tape;
/// 2. `@f.rvs(slices..., shadows..., dy...) -> (dx...)` runs with every slice
///    argument (as the forward pass left it), one shadow per `dup`/`dupnoneed`
///    parameter, and one cotangent per float result when the return is `active`. It
///    returns one cotangent per `active` parameter and adds (`+=`) the slices'
///    cotangents into the shadows.
///
/// A shadow starts as the caller's (zeros by default). A `mut` slice's shadow is how a
/// caller seeds the derivative of what the function writes into it: the shadow's
/// initial contents are the cotangent of the slice's final contents, and it ends
/// holding the cotangent of its initial contents.
///
/// `args` are the primal's arguments (`mut` slices are written in place, as the
/// primal writes them). `shadows` holds one writable slice per `dup`/`dupnoneed`
/// parameter, in order, of its parameter's element type and length: the gradients
/// are added into them (`+=`). `seeds` has one cotangent per float result of an
/// `active` return, or is empty for all ones. The primal's results go into `value`
/// (empty when the rule does not return them), the cotangents of the `active`
/// parameters into `grads`, in order. Returns what the engine's tape held
/// ([`TapeStats`]: the most bytes, the steps checkpointed loops ran again), taken
/// before the tape is reset.
///
/// At width N ([`build_rrule_width`](crate::build_rrule_width())), each shadow is N
/// times as long as its slice (lane `j` of element `i` at `i * N + j`), `seeds` has
/// N cotangents per float result (lane 0 first) or is empty for all ones, and
/// `grads` gets N cotangents per `active` parameter (lane 0 first).
///
/// Checks the arguments, shadows and seeds against the primal's signature first,
/// and that the tape comes back to its height before the forward pass. When the
/// tape held nothing before, it is reset afterwards, whether the call succeeded or
/// failed (a forward pass that fails halfway leaves nothing behind, so a workspace
/// serves any number of failed calls).
#[allow(clippy::too_many_arguments)]
pub fn run_rule<E: Engine>(
    engine: &mut E,
    rule: &Rule,
    args: &mut [Arg<'_>],
    shadows: &mut [Arg<'_>],
    seeds: &[f64],
    value: &mut Vec<Val>,
    grads: &mut Vec<Val>,
) -> Result<TapeStats, EvalError> {
    let (module, layout) = (&rule.module, &rule.layout);
    let sig = module.sig(layout.primal);
    let fname = module.name(layout.primal);
    check_args(fname, sig, args).map_err(|k| EvalError::BadArguments(k.to_string()))?;
    let bad = |m: String| Err(EvalError::BadArguments(m));
    if shadows.len() != layout.shadow_params.len() {
        return bad(format!(
            "the rule of @{fname} takes {} shadows, given {}",
            layout.shadow_params.len(),
            shadows.len()
        ));
    }
    let width = layout.width.max(1) as usize;
    for (s, &i) in shadows.iter().zip(&layout.shadow_params) {
        let want = sig.params[i].elem().map(Type::slice_mut);
        let len = args.get(i).and_then(Arg::slice_len);
        if want != Some(s.ty()) || len.map(|n| n * width) != s.slice_len() {
            let times = if width == 1 {
                "as long as the parameter".to_string()
            } else {
                format!("{width} times as long as the parameter")
            };
            return bad(format!(
                "the shadow of parameter {} of @{fname} must be a {} {times} ({}), given a {} of length {}",
                i + 1,
                want.unwrap_or(sig.params[i]),
                len.unwrap_or(0) * width,
                s.ty(),
                s.slice_len().unwrap_or(0)
            ));
        }
    }
    let seeded = &layout.seeded_results;
    if !seeds.is_empty() && seeds.len() != seeded.len() * width {
        return bad(format!(
            "the rule of @{fname} takes {} seeds, given {}",
            seeded.len() * width,
            seeds.len()
        ));
    }

    let before = engine.tape().scalars;
    // A call that fails leaves the tape as it found it (empty, when it was): what
    // its forward pass pushed would otherwise stay in the engine, call after call.
    let fail = |engine: &mut E, e: EvalError| {
        if before == 0 {
            engine.reset_tape();
        }
        Err(e)
    };
    let called = match rule.fused {
        Some(fused) => call_fused(engine, rule, fused, args, shadows, seeds, value, grads),
        None => call_passes(engine, rule, args, shadows, seeds, value, grads),
    };
    if let Err(e) = called {
        return fail(engine, e);
    }
    // What the forward pass (or a fused function's callees) pushed, the
    // pullback popped.
    let tape = engine.tape();
    if tape.scalars != before {
        let e = EvalError::Tape {
            before,
            after: tape.scalars,
        };
        return fail(engine, e);
    }
    if before == 0 {
        engine.reset_tape();
    }
    if !layout.config.needs_primal {
        value.clear();
    }
    Ok(tape)
}

/// The fused function in one call: the arguments, the shadows, one seed per
/// float result; its results, then the cotangents, split into `value` and
/// `grads`.
#[allow(clippy::too_many_arguments)]
fn call_fused<E: Engine>(
    engine: &mut E,
    rule: &Rule,
    fused: FuncId,
    args: &mut [Arg<'_>],
    shadows: &mut [Arg<'_>],
    seeds: &[f64],
    value: &mut Vec<Val>,
    grads: &mut Vec<Val>,
) -> Result<(), EvalError> {
    let mut all: SmallVec<[Arg<'_>; 8]> = SmallVec::new();
    all.extend(args.iter_mut().map(|a| a.reborrow()));
    all.extend(shadows.iter_mut().map(Arg::reborrow));
    push_seeds(&mut all, rule, seeds);
    call(engine, rule, fused, &mut all, value)?;
    let n_results = rule.module.sig(rule.layout.primal).results.len();
    grads.clear();
    grads.extend(value.drain(n_results..));
    Ok(())
}

/// The forward pass, then the pullback with the slices as the forward pass left
/// them, the shadows and one cotangent per seeded result.
fn call_passes<E: Engine>(
    engine: &mut E,
    rule: &Rule,
    args: &mut [Arg<'_>],
    shadows: &mut [Arg<'_>],
    seeds: &[f64],
    value: &mut Vec<Val>,
    grads: &mut Vec<Val>,
) -> Result<(), EvalError> {
    call(engine, rule, rule.forward, args, value)?;
    let layout = &rule.layout;
    let mut rvs: SmallVec<[Arg<'_>; 8]> = SmallVec::new();
    rvs.extend(
        args.iter_mut()
            .enumerate()
            .filter(|(i, _)| layout.slice_params.contains(i))
            .map(|(_, a)| a.reborrow()),
    );
    rvs.extend(shadows.iter_mut().map(Arg::reborrow));
    push_seeds(&mut rvs, rule, seeds);
    call(engine, rule, rule.pullback, &mut rvs, grads)
}

/// One argument per seeded result and lane (`width` per result, lane 0 first):
/// the seed given, or 1.
fn push_seeds(out: &mut SmallVec<[Arg<'_>; 8]>, rule: &Rule, seeds: &[f64]) {
    let layout = &rule.layout;
    let sig = rule.module.sig(layout.primal);
    let width = layout.width.max(1) as usize;
    for (k, &j) in layout.seeded_results.iter().enumerate() {
        for lane in 0..width {
            let s = seeds.get(k * width + lane).copied().unwrap_or(1.0);
            out.push(match sig.results[j] {
                Type::F32 => Arg::F32(s as f32),
                _ => Arg::F64(s),
            });
        }
    }
}

/// One call of a rule's function, its error named after it.
fn call<E: Engine>(
    engine: &mut E,
    rule: &Rule,
    func: FuncId,
    args: &mut [Arg<'_>],
    out: &mut Vec<Val>,
) -> Result<(), EvalError> {
    engine
        .call_args(func, args, out)
        .map_err(|error| EvalError::Run {
            what: format!("@{}", rule.module.name(func)),
            error: Box::new(error),
        })
}

/// [`run_rule`] on owned values, with the results in `bufs`: `args` are copied
/// into [`EvalBuffers::args`] (so the caller's stay as they are), the shadows start
/// from [`Seeds::shadows`] (zeros where none is given) and end in
/// [`EvalBuffers::gradient`] with the active parameters' cotangents.
pub fn run_rule_vals<E: Engine>(
    engine: &mut E,
    rule: &Rule,
    args: &[Val],
    seeds: &Seeds,
    bufs: &mut EvalBuffers,
) -> Result<(), EvalError> {
    let (module, layout) = (&rule.module, &rule.layout);
    let sig = module.sig(layout.primal);
    let fname = module.name(layout.primal);
    check_args(fname, sig, args).map_err(|k| EvalError::BadArguments(k.to_string()))?;
    check_seeds(rule, args, seeds)?;
    let width = layout.width.max(1) as usize;

    bufs.args.truncate(args.len());
    for (d, s) in bufs.args.iter_mut().zip(args) {
        d.assign(s);
    }
    let have = bufs.args.len();
    bufs.args.extend(args[have..].iter().cloned());
    // The shadows' buffers are the previous call's gradient, swapped back in.
    bufs.gradient.resize(sig.params.len(), None);
    bufs.shadows
        .resize(layout.shadow_params.len(), Val::Bool(false));
    for (slot, &i) in bufs.shadows.iter_mut().zip(&layout.shadow_params) {
        if let Some(Some(g)) = bufs.gradient.get_mut(i) {
            core::mem::swap(slot, g);
        }
        match seeds.shadows.get(i).and_then(Option::as_ref) {
            Some(s) => slot.assign(s),
            None => assign_zero_lanes(slot, &args[i], width),
        }
    }
    let result_seeds = match (&seeds.results, layout.seeded_results.is_empty()) {
        (Some(s), false) => s.as_slice(),
        _ => &[],
    };
    let mut arg_views: SmallVec<[Arg<'_>; 8]> = bufs.args.iter_mut().map(Val::as_arg).collect();
    let mut shadow_views: SmallVec<[Arg<'_>; 8]> =
        bufs.shadows.iter_mut().map(Val::as_arg).collect();
    let tape = run_rule(
        engine,
        rule,
        &mut arg_views,
        &mut shadow_views,
        result_seeds,
        &mut bufs.value,
        &mut bufs.cts,
    )?;
    drop((arg_views, shadow_views));
    bufs.tape_peak_bytes = tape.peak_bytes;
    bufs.recomputed_steps = tape.recomputed_steps;

    for (i, g) in bufs.gradient.iter_mut().enumerate() {
        if !layout.active_params.contains(&i) && !layout.shadow_params.contains(&i) {
            *g = None;
        }
    }
    if width == 1 {
        for (&i, ct) in layout.active_params.iter().zip(&bufs.cts) {
            bufs.gradient[i] = Some(ct.clone());
        }
    } else {
        // An active parameter's N cotangents, as a slice of its lanes.
        for (&i, cts) in layout.active_params.iter().zip(bufs.cts.chunks(width)) {
            bufs.gradient[i] = Some(match cts.first() {
                Some(Val::F32(_)) => Val::F32s(
                    cts.iter()
                        .filter_map(|c| if let Val::F32(x) = c { Some(*x) } else { None })
                        .collect(),
                ),
                _ => Val::F64s(
                    cts.iter()
                        .filter_map(|c| if let Val::F64(x) = c { Some(*x) } else { None })
                        .collect(),
                ),
            });
        }
    }
    for (slot, &i) in bufs.shadows.iter_mut().zip(&layout.shadow_params) {
        let g = bufs.gradient[i].get_or_insert(Val::Bool(false));
        core::mem::swap(g, slot);
    }
    Ok(())
}

/// Checks [`Seeds`] against the rule of a function called with `args` (which fit
/// its signature): one seed per float result, shadows only for `dup`/`dupnoneed`
/// parameters, each a slice of its parameter's type and length.
fn check_seeds(rule: &Rule, args: &[Val], seeds: &Seeds) -> Result<(), EvalError> {
    let (module, layout) = (&rule.module, &rule.layout);
    let sig = module.sig(layout.primal);
    let fname = module.name(layout.primal);
    let bad = |m: String| Err(EvalError::BadArguments(m));
    let width = layout.width.max(1) as usize;
    let n_float_results = sig.results.iter().filter(|t| t.is_float()).count();
    if let Some(s) = &seeds.results
        && s.len() != n_float_results * width
    {
        let per = if width == 1 {
            String::new()
        } else {
            format!(" ({width} per float result at width {width})")
        };
        return bad(format!(
            "@{fname} has {n_float_results} float results, given {} seeds{per}",
            s.len()
        ));
    }
    if seeds.shadows.len() > sig.params.len() {
        return bad(format!(
            "@{fname} takes {} parameters, given {} shadows",
            sig.params.len(),
            seeds.shadows.len()
        ));
    }
    for (i, s) in seeds.shadows.iter().enumerate() {
        if s.is_some() && !layout.shadow_params.contains(&i) {
            return bad(format!(
                "parameter {} of @{fname} is {}, so it has no shadow",
                i + 1,
                layout.config.params[i]
            ));
        }
    }
    for &i in &layout.shadow_params {
        if let Some(Some(s)) = seeds.shadows.get(i)
            && (!s.fits(sig.params[i]) || s.slice_len() != args[i].slice_len().map(|n| n * width))
        {
            return bad(format!(
                "the shadow of parameter {} of @{fname} must be a {} of length {}, given {}",
                i + 1,
                sig.params[i],
                args[i].slice_len().unwrap_or(0) * width,
                describe(s)
            ));
        }
    }
    Ok(())
}

/// Runs `rule`'s forward pass at `args` and its pullback from `seeds` on `engine`
/// (the interpreter, or the JIT, running `rule.module`), with fresh buffers. See
/// [`run_rule_vals`] and [`run_rule`].
pub fn value_and_gradient<E: Engine>(
    engine: &mut E,
    rule: &Rule,
    args: &[Val],
    seeds: &Seeds,
) -> Result<Gradient, EvalError> {
    let mut bufs = EvalBuffers::default();
    run_rule_vals(engine, rule, args, seeds, &mut bufs)?;
    Ok(Gradient {
        value: rule.layout.config.needs_primal.then_some(bufs.value),
        gradient: bufs.gradient,
        args: bufs.args,
        tape_peak_bytes: bufs.tape_peak_bytes,
        recomputed_steps: bufs.recomputed_steps,
    })
}

/// `slot` = zeros shaped like `like` with `width` lanes per element, reusing
/// `slot`'s buffer when it can.
fn assign_zero_lanes(slot: &mut Val, like: &Val, width: usize) {
    if width == 1 {
        return slot.assign_zeros_like(like);
    }
    let n = like.slice_len().unwrap_or(0) * width;
    match (slot, like) {
        (Val::F64s(d), Val::F64s(_)) => {
            d.clear();
            d.resize(n, 0.0);
        }
        (Val::F32s(d), Val::F32s(_)) => {
            d.clear();
            d.resize(n, 0.0);
        }
        (d, Val::F32s(_)) => *d = Val::F32s(vec![0.0; n]),
        (d, _) => *d = Val::F64s(vec![0.0; n]),
    }
}

/// `a [f64] of length 3`, `an f64 F64(1.0)`, ... for messages.
fn describe(v: &Val) -> String {
    match (v.ty(), v.slice_len()) {
        (ty, Some(n)) => format!("a {ty} of length {n}"),
        (ty, None) => format!("{ty} {v:?}"),
    }
}
