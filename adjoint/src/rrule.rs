//! [`build_rrule`]: the pipeline from a function and a [`RuleConfig`] to a [`Rule`].
//!
//! It reads as the steps: find the function and check that it verifies; check the
//! configuration against the signature and refuse what this version does not derive
//! yet (`check_request`); plan the rule ([`Plan`]: live blocks, activity, block
//! stack, saved values, the reverse of each statement); name and declare the derived
//! functions; assemble the forward pass ([`forward_ir`]) and the pullback
//! ([`pullback_ir`]); verify both (a failure there is a bug in gradlift).

use std::collections::VecDeque;

use gradlift_ir::verify::{verify_decls, verify_function};
use gradlift_ir::write::Names;
use gradlift_ir::{
    FuncId, Function, FunctionBuilder, Imm, Inst, Module, Opcode, Pos, Scalar, Signature,
    Terminator, Type, Value, VerifierErrors,
};
use hashbrown::HashMap;
use smallvec::SmallVec;

use crate::checkpoint;
use crate::config::{Activity, RetActivity, RuleConfig, TapePolicy, freezable};
use crate::custom;
use crate::error::{AdError, InternalError};
use crate::forward::forward_ir;
use crate::fuse;
use crate::outline;
use crate::plan::{Plan, Want, describe_inst};
use crate::pullback::{DebugChecks, ParamSets, pullback_ir};
use crate::revolve;
use crate::rules::{OpRule, op_rule};
use crate::tape::split_loop_exits;
use crate::widen::{LaneFunc, ParamLanes, widen_rules};

/// A derived rule: the input module with the forward pass and the pullback added.
///
/// The caller runs [`Rule::forward`] with the primal arguments, then
/// [`Rule::pullback`] with the result cotangents, on one engine (they share its
/// tape). After the pullback returns, the tape's scalar stack is back to where it was
/// before the forward pass.
#[derive(Clone, Debug)]
pub struct Rule {
    /// The input module plus the derived functions; it verifies, prints and parses
    /// back like any other.
    pub module: Module,
    /// `@f.fwd(params...) -> results`: the primal results (none when the primal is
    /// not needed); saves what the pullback needs on the tape.
    pub forward: FuncId,
    /// `@f.rvs(dy...) -> (dx...)`: one cotangent per float result (when the return is
    /// active) to one cotangent per active parameter.
    pub pullback: FuncId,
    /// `@f.vg(params..., shadows..., dy...) -> (results..., dx...)`: the forward
    /// pass and the pullback in one function, whose reduction loop runs its reverse
    /// inside itself (one sweep, no tape), when the function has the shape that
    /// allows it and [`RuleConfig::fuse`] is on (width 1, no debug mode, an active
    /// return). Its parameters are the primal's, one shadow per
    /// [`RuleLayout::shadow_params`] and one seed per float result; its results the
    /// primal's, then one cotangent per [`RuleLayout::active_params`].
    /// [`run_rule`](crate::run_rule()) calls it instead of the two passes when it
    /// exists. See `docs/reverse-mode.md`, "Fused sweeps".
    pub fused: Option<FuncId>,
    /// How the derived functions' parameters and results relate to the primal's.
    pub layout: RuleLayout,
}

impl Rule {
    /// The functions [`run_rule`](crate::run_rule()) calls, so the ones an engine
    /// must compile: the fused function when there is one, else the forward pass
    /// and the pullback.
    pub fn entries(&self) -> Vec<FuncId> {
        match self.fused {
            Some(f) => vec![f],
            None => vec![self.forward, self.pullback],
        }
    }
}

/// How a rule's functions line up with the primal.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct RuleLayout {
    /// The primal function.
    pub primal: FuncId,
    /// The configuration the rule was derived for.
    pub config: RuleConfig,
    /// Result `i` of the pullback is the cotangent of primal parameter
    /// `active_params[i]` (the `active` ones, in order).
    pub active_params: Vec<usize>,
    /// The pullback's first parameters are the primal's slices `slice_params` (as the
    /// forward pass left them): the `dup` and `dupnoneed` ones and the frozen `const`
    /// ones ([`RuleConfig::frozen`]), in parameter order...
    pub slice_params: Vec<usize>,
    /// ... then one shadow (`mut [T]`) per parameter of `shadow_params` (the `dup`
    /// and `dupnoneed` ones, in order) ...
    pub shadow_params: Vec<usize>,
    /// ... then the cotangents of the primal results `seeded_results` (the float
    /// results, when the return is active).
    pub seeded_results: Vec<usize>,
    /// Cotangents carried per value: 1 for [`build_rrule`], N for
    /// [`build_rrule_width`]. At width N the pullback takes N seeds per seeded
    /// result (lane 0 first) and returns N cotangents per active parameter, and
    /// each shadow is N times as long as its slice (lane `j` of element `i` at
    /// `i * N + j`).
    pub width: u32,
}

/// The most cotangents a reverse rule carries per value ([`build_rrule_width`]).
pub const MAX_REVERSE_WIDTH: u32 = 64;

/// Derives the forward pass and the pullback of `func` under `config`.
///
/// Supported: defined functions of scalars (`f64`, `f32`, `i64`, `bool`) and slices,
/// with any control flow (branches, loops, early returns, unreachable blocks), every
/// op, loads and stores, local buffers, and calls (to defined functions, whose rules
/// are derived too and added to the rule's module; recursion and mutual recursion
/// included; and to functions declared `vjp`, `nodiff` or `overlay`). A function
/// with such a declaration, or an `extern` with one, gets the rule the declaration
/// says. Refused with an [`AdError`]: activities that do not fit, functions that do
/// not verify, slice results, float slices chosen by a phi or `select`, tape ops in
/// the input, calls to functions without a derivative. With `config.debug`, the
/// derived functions check their invariants at run time: the forward pass pushes a
/// marker first, which the pullback pops and compares last, so a tape out of step
/// traps (see `docs/reverse-mode.md`, "Debug mode").
pub fn build_rrule(module: &Module, func: FuncId, config: &RuleConfig) -> Result<Rule, AdError> {
    build_rrule_width(module, func, config, 1)
}

/// [`build_rrule`] of width `width` (reverse mode's vector mode, `Reverse(N)`):
/// one forward pass, then a pullback that takes `width` seeds per seeded result
/// and `width`-lane shadows and returns `width` cotangents per active parameter,
/// each lane bit for bit what a width-1 pullback gives from that lane's seeds and
/// shadows. See [`RuleLayout::width`] for the layout, and `docs/reverse-mode.md`,
/// "Width". From 1 to [`MAX_REVERSE_WIDTH`].
///
/// ```
/// use gradlift_adjoint::{RuleConfig, build_rrule_width, run_rule};
/// use gradlift_ir::engine::Arg;
/// use gradlift_ir::interp::Interpreter;
///
/// // f(x, y) = (x y, x + y): both rows of the Jacobian from one pullback of width 2.
/// let module = gradlift_ir::parse("
///     func @f(%x: f64, %y: f64) -> (f64, f64) {
///     entry:
///         %p = fmul %x, %y
///         %s = fadd %x, %y
///         ret %p, %s
///     }
/// ")?;
/// let f = module.func_by_name("f").unwrap();
/// let rule = build_rrule_width(&module, f, &RuleConfig::default_for(module.sig(f)), 2)?;
/// let mut engine = Interpreter::new(&rule.module);
/// let (mut value, mut grads) = (Vec::new(), Vec::new());
/// // Seeds by result, lane 0 first: lane 0 seeds the product, lane 1 the sum.
/// let seeds = [1.0, 0.0, 0.0, 1.0];
/// run_rule(&mut engine, &rule, &mut [Arg::F64(3.0), Arg::F64(5.0)], &mut [], &seeds, &mut value, &mut grads)?;
/// // By parameter, lane 0 first: d(xy)/dx, d(x+y)/dx, d(xy)/dy, d(x+y)/dy.
/// use gradlift_ir::interp::Val;
/// assert_eq!(grads, [Val::F64(5.0), Val::F64(1.0), Val::F64(3.0), Val::F64(1.0)]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn build_rrule_width(
    module: &Module,
    func: FuncId,
    config: &RuleConfig,
    width: u32,
) -> Result<Rule, AdError> {
    let decl = module
        .funcs
        .get(func)
        .ok_or_else(|| AdError::NoSuchFunction(func.to_string()))?;
    let fname = decl.name.clone();
    let errors = verify_decls(module);
    if !errors.is_empty() {
        return Err(AdError::Invalid {
            func: fname,
            errors: VerifierErrors(errors),
        });
    }
    if width == 0 || width > MAX_REVERSE_WIDTH {
        return Err(AdError::Unsupported {
            func: fname,
            what: format!(
                "a width of {width} (reverse mode carries 1 to {MAX_REVERSE_WIDTH} cotangents per value)"
            ),
        });
    }
    tape_ops_reached(module, func)?;
    // Checkpointed loops become calls of loop functions (width 1 only: a rule of
    // width N keeps its loops).
    let outlined = if width == 1 {
        outline::outline(module, func)
    } else {
        None
    };
    let module = outlined.as_ref().map_or(module, |o| &o.module);
    let no_loops = HashMap::new();
    let no_errors = HashMap::new();
    let mut deriver = Deriver {
        input: module,
        out: module.clone(),
        cache: HashMap::new(),
        queue: VecDeque::new(),
        derived: Vec::new(),
        width,
        pullbacks: Vec::new(),
        forwards: Vec::new(),
        loops: outlined.as_ref().map_or(&no_loops, |o| &o.loops),
        outline_errors: outlined.as_ref().map_or(&no_errors, |o| &o.errors),
        split: None,
        revolve_ids: Vec::new(),
        summaries: outlined
            .as_ref()
            .map(|o| {
                o.loops
                    .iter()
                    .map(|(&g, lf)| (g, lf.deps.clone()))
                    .collect::<crate::activity::Summaries>()
            })
            .unwrap_or_default()
            .into(),
    };
    // The forward pass and the pullback are the same whether or not a fused
    // function is made too; their configuration says not (as callees' do), so
    // that a recursive call finds the rule being derived.
    let (forward, pullback) = deriver.request(func, config.clone().with_fuse(false), false)?;
    while let Some(job) = deriver.queue.pop_front() {
        // A callee's rule that cannot be derived fails when it runs instead (lazy
        // derivation); the rule asked for fails now.
        if let Err(e) = deriver.derive(&job) {
            let root = (job.fwd, job.rvs) == (forward, pullback);
            if root
                || !e.is_deferred()
                || !deriver.define_failing(
                    job.func,
                    &job.config,
                    job.fwd,
                    job.rvs,
                    &e.to_string(),
                )?
            {
                return Err(e);
            }
        }
    }
    let mut out = deriver.out;
    // A checkpointed loop's rule calls the step's primal, forward pass and
    // pullback once per step: inlined (where small enough and loop-free), a step
    // run again costs what a step of the unchecked loop costs. The optimiser
    // changes no bit of what the functions compute, nor their tape.
    if !deriver.revolve_ids.is_empty() {
        let config = gradlift_ir::opt::OptConfig {
            inline_max_insts: 4000,
            ..gradlift_ir::opt::OptConfig::default()
        };
        gradlift_ir::opt::optimize_functions(&mut out, &deriver.revolve_ids, &config).map_err(
            |e| AdError::Internal {
                func: fname.clone(),
                error: InternalError::Optimize(e.to_string()),
            },
        )?;
    }
    let mut derived = deriver.derived;
    let fused = match decl.function() {
        Some(primal) if width == 1 && !has_decl(module, func) => {
            // `@f.fwd.PATTERN` gives `@f.vg.PATTERN`.
            let fwd_name = out.name(forward);
            let stem = match fwd_name.rfind(".fwd") {
                Some(at) => format!("{}.vg{}", &fwd_name[..at], &fwd_name[at + 4..]),
                None => format!("{fwd_name}.vg"),
            };
            let mut name = stem.clone();
            let mut k = 1;
            while out.func_by_name(&name).is_some() {
                name = format!("{stem}.{k}");
                k += 1;
            }
            let fused = fuse::fused_rule(module, func, primal, config, &mut out, &name).map_err(
                |error| AdError::Internal {
                    func: fname.clone(),
                    error,
                },
            )?;
            derived.extend(fused);
            fused
        }
        _ => None,
    };
    widen_rules(
        &mut out,
        &deriver.pullbacks,
        &deriver.forwards,
        width as usize,
    )
    .map_err(|error| AdError::Internal {
        func: fname.clone(),
        error,
    })?;
    for &id in &derived {
        let errors = verify_function(&out, id);
        if !errors.is_empty() {
            return Err(AdError::Internal {
                func: fname,
                error: InternalError::Unverified {
                    func: out.name(id).to_string(),
                    errors: VerifierErrors(errors),
                },
            });
        }
    }
    let sig = &decl.sig;
    let layout = RuleLayout {
        primal: func,
        config: config.clone(),
        active_params: (0..sig.params.len())
            .filter(|&i| config.params[i] == Activity::Active)
            .collect(),
        slice_params: slice_params(sig, config),
        shadow_params: dup_params(config),
        seeded_results: seeded_results(sig, config),
        width,
    };
    Ok(Rule {
        module: out,
        forward,
        pullback,
        fused,
        layout,
    })
}

/// The slice parameters the pullback takes: the `dup` and `dupnoneed` ones, and the
/// frozen `const` ones (which it may load from again), in order.
pub(crate) fn slice_params(sig: &Signature, config: &RuleConfig) -> Vec<usize> {
    (0..config.params.len())
        .filter(|&i| match config.params[i] {
            Activity::Dup | Activity::DupNoNeed => true,
            Activity::Const => {
                config.is_frozen(i) && sig.params.get(i).is_some_and(|&t| freezable(t))
            }
            Activity::Active => false,
        })
        .collect()
}

/// The `dup` and `dupnoneed` parameters.
fn dup_params(config: &RuleConfig) -> Vec<usize> {
    (0..config.params.len())
        .filter(|&i| matches!(config.params[i], Activity::Dup | Activity::DupNoNeed))
        .collect()
}

/// The results whose cotangents the pullback takes: the float ones, when the return
/// is active.
fn seeded_results(sig: &Signature, config: &RuleConfig) -> Vec<usize> {
    (0..sig.results.len())
        .filter(|&j| sig.results[j].is_float() && config.is_seeded(j))
        .collect()
}

/// A rule to derive: its names are declared, its bodies not yet written.
struct Job {
    func: FuncId,
    config: RuleConfig,
    fwd: FuncId,
    rvs: FuncId,
    kind: JobKind,
}

/// What kind of rule a [`Job`] writes.
enum JobKind {
    /// The rule derived from the function's body.
    Derived,
    /// The rule of a checkpointed call ([`checkpoint`](crate::checkpoint)): the
    /// ordinary rule it runs in its pullback.
    Checkpoint(FuncId, FuncId),
    /// The binomial rule of an outlined loop ([`revolve`](crate::revolve)): the
    /// step's rule and its configuration.
    Revolve {
        step_fwd: FuncId,
        step_rvs: FuncId,
        step_config: RuleConfig,
    },
    /// The rule written around a user's `vjp` over slices or rule pair
    /// ([`custom`](crate::custom)).
    Custom(gradlift_ir::VjpRule),
}

/// Derives rules, and the rules of the functions they call, into one module
/// (Mooncake's lazily derived rules, done eagerly over the call graph): a cache from
/// (function, activities) to the derived pair, and a queue of pairs declared but not
/// yet written. A pair is declared before any body is written, so recursion finds
/// its own name.
struct Deriver<'m> {
    input: &'m Module,
    out: Module,
    cache: HashMap<(FuncId, RuleConfig, bool), (FuncId, FuncId)>,
    queue: VecDeque<Job>,
    derived: Vec<FuncId>,
    /// The width the rules are widened to once all are derived.
    width: u32,
    /// What widening needs of each pullback ...
    pullbacks: Vec<LaneFunc>,
    /// ... and of each forward pass: its `tape_alloc`s of shadow buffers.
    forwards: Vec<(FuncId, Vec<Inst>)>,
    /// The outlined checkpointed loops ([`outline`]), by loop function ...
    loops: &'m HashMap<FuncId, outline::LoopFn>,
    /// ... and the functions whose marked loops could not be outlined.
    outline_errors: &'m HashMap<FuncId, String>,
    /// `@revolve.split`, once declared.
    split: Option<FuncId>,
    /// The forward passes and pullbacks of checkpointed loops, whose calls of the
    /// step's functions are inlined once everything is derived.
    revolve_ids: Vec<FuncId>,
    /// What the activity analysis knows of the loop functions' calls.
    summaries: std::rc::Rc<crate::activity::Summaries>,
}

impl Deriver<'_> {
    /// [`request`](Self::request), with the arguments whose cotangents the
    /// pullback takes and returns (a checkpointed loop's).
    fn request_call(
        &mut self,
        func: FuncId,
        config: RuleConfig,
        want: Want,
    ) -> Result<(FuncId, FuncId, Vec<usize>), AdError> {
        let inout = self
            .loops
            .get(&func)
            .map_or_else(Vec::new, |lf| revolve::inout_args(lf, &config));
        let (fwd, rvs) = match want {
            Want::Rule { checkpoint } => self.request(func, config, checkpoint)?,
            Want::Failing(error) => match self.fail_pair(func, &config, &inout, &error)? {
                Some(pair) => pair,
                None => return Err(error),
            },
        };
        Ok((fwd, rvs, inout))
    }

    /// `@revolve.split`: declared and written on first use.
    fn split_fn(&mut self) -> Result<FuncId, AdError> {
        if let Some(id) = self.split {
            return Ok(id);
        }
        let internal = |error: InternalError| AdError::Internal {
            func: "revolve.split".to_string(),
            error,
        };
        let mut name = "revolve.split".to_string();
        let mut k = 2;
        while self.out.func_by_name(&name).is_some() {
            name = format!("revolve.split.{k}");
            k += 1;
        }
        let id = self
            .out
            .declare(&name, Signature::new([Type::I64, Type::I64], [Type::I64]))
            .map_err(|e| internal(InternalError::Module(e)))?;
        let body = revolve::split_fn(&self.out, id).map_err(internal)?;
        self.out
            .define(id, body)
            .map_err(|e| internal(InternalError::Module(e)))?;
        self.derived.push(id);
        self.split = Some(id);
        Ok(id)
    }

    /// The forward pass and pullback of `func` under `config` (of a checkpointed
    /// call to it when `checkpoint`): from the cache, or declared now and queued.
    /// A rule of width N > 1 does not checkpoint: its calls get ordinary rules.
    fn request(
        &mut self,
        func: FuncId,
        config: RuleConfig,
        checkpoint: bool,
    ) -> Result<(FuncId, FuncId), AdError> {
        let checkpoint = checkpoint && self.width == 1;
        if let Some(&pair) = self.cache.get(&(func, config.clone(), checkpoint)) {
            return Ok(pair);
        }
        if let Some(why) = self.outline_errors.get(&func) {
            return Err(AdError::Unsupported {
                func: self.input.name(func).to_string(),
                what: why.clone(),
            });
        }
        let lf = self.loops.get(&func);
        let mut kind = JobKind::Derived;
        if let Some(lf) = lf {
            let step_config = revolve::step_config(lf, &config);
            let (step_fwd, step_rvs) = self.request(lf.step, step_config.clone(), false)?;
            self.split_fn()?;
            kind = JobKind::Revolve {
                step_fwd,
                step_rvs,
                step_config,
            };
        } else if checkpoint {
            let (f, r) = self.request(func, config.clone(), false)?;
            kind = JobKind::Checkpoint(f, r);
        } else if let crate::callee::Callee::Custom(rule) =
            crate::callee::Callee::of(self.input, func)
        {
            if self.width > 1 {
                return Err(AdError::Unsupported {
                    func: self.input.name(func).to_string(),
                    what: format!(
                        "its `vjp` rule takes slices or is a pair, which a rule of width {} cannot call yet (one lane at a time would need its shadows apart)",
                        self.width
                    ),
                });
            }
            kind = JobKind::Custom(rule);
        }
        let module = self.input;
        let decl = module
            .funcs
            .get(func)
            .ok_or_else(|| AdError::NoSuchFunction(func.to_string()))?;
        let fname = decl.name.clone();
        if let Some(primal) = decl.function() {
            let errors = verify_function(module, func);
            if !errors.is_empty() {
                return Err(AdError::Invalid {
                    func: fname,
                    errors: VerifierErrors(errors),
                });
            }
            check_request(module, func, primal, config.clone(), false)?;
        } else if has_decl(module, func) {
            let primal = wrapper(module, func);
            check_request(module, func, &primal, config.clone(), false)?;
        } else {
            return Err(AdError::NotDefined { func: fname });
        }
        let stem = if checkpoint {
            format!("{fname}.ckpt")
        } else {
            fname.clone()
        };
        let inout = lf.map_or_else(Vec::new, |lf| revolve::inout_args(lf, &config));
        let (fwd, rvs) = self.declare_pair(func, &config, &stem, &inout)?;
        self.cache
            .insert((func, config.clone(), checkpoint), (fwd, rvs));
        self.derived.extend([fwd, rvs]);
        self.queue.push_back(Job {
            func,
            config,
            fwd,
            rvs,
            kind,
        });
        Ok((fwd, rvs))
    }

    /// Declares the forward pass and pullback of `func` under `config`, named
    /// after `stem` (`@stem.fwd.K`, `@stem.rvs.K`), with the calling convention of
    /// derived rules: the pullback takes the primal slices, the shadows, the seeds
    /// and the in-out cotangents `inout`, and returns the active scalars'
    /// cotangents.
    fn declare_pair(
        &mut self,
        func: FuncId,
        config: &RuleConfig,
        stem: &str,
        inout: &[usize],
    ) -> Result<(FuncId, FuncId), AdError> {
        let sig = self.input.sig(func).clone();
        let fwd_sig = Signature::new(
            sig.params.clone(),
            if config.needs_primal {
                sig.results.clone()
            } else {
                Vec::new()
            },
        );
        let dups = dup_params(config);
        let rvs_params: Vec<Type> = slice_params(&sig, config)
            .iter()
            .map(|&i| sig.params[i])
            .chain(
                dups.iter()
                    .filter_map(|&i| sig.params[i].elem().map(Type::slice_mut)),
            )
            .chain(seeded_results(&sig, config).iter().map(|&j| sig.results[j]))
            .chain(inout.iter().map(|&k| sig.params[k]))
            .collect();
        let active: Vec<Type> = (0..sig.params.len())
            .filter(|&i| config.params[i] == Activity::Active)
            .map(|i| sig.params[i])
            .collect();
        let rvs_sig = Signature::new(rvs_params, active);
        let internal = |error: InternalError| AdError::Internal {
            func: self.input.name(func).to_string(),
            error,
        };
        let (fwd_name, rvs_name) = derived_names(&self.out, stem, &sig, config, self.width);
        let fwd = self
            .out
            .declare(&fwd_name, fwd_sig)
            .map_err(|e| internal(InternalError::Module(e)))?;
        let rvs = self
            .out
            .declare(&rvs_name, rvs_sig)
            .map_err(|e| internal(InternalError::Module(e)))?;
        Ok((fwd, rvs))
    }

    /// Lazy derivation: a pair for a call of `func` under `config` that cannot be
    /// derived (`error` says why), whose forward pass fails at run time with
    /// `error`'s message (`trap_if`) and whose pullback is never reached. `None`
    /// when `error` is not one to defer (a bug, or bad input to the derivation)
    /// or the pair cannot be written (a slice result has nothing to return).
    fn fail_pair(
        &mut self,
        func: FuncId,
        config: &RuleConfig,
        inout: &[usize],
        error: &AdError,
    ) -> Result<Option<(FuncId, FuncId)>, AdError> {
        if !error.is_deferred() {
            return Ok(None);
        }
        let stem = format!("{}.fail", self.input.name(func));
        let (fwd, rvs) = self.declare_pair(func, config, &stem, inout)?;
        if !self.define_failing(func, config, fwd, rvs, &error.to_string())? {
            return Ok(None);
        }
        Ok(Some((fwd, rvs)))
    }

    /// Defines the declared `fwd` and `rvs` (of `func`'s rule) as functions that
    /// fail with `message`; false when they cannot be written.
    fn define_failing(
        &mut self,
        func: FuncId,
        config: &RuleConfig,
        fwd: FuncId,
        rvs: FuncId,
        message: &str,
    ) -> Result<bool, AdError> {
        let internal = |error: InternalError| AdError::Internal {
            func: self.input.name(func).to_string(),
            error,
        };
        let mut bodies = Vec::new();
        for id in [fwd, rvs] {
            match failing_function(&self.out, id, message).map_err(internal)? {
                Some(body) => bodies.push(body),
                None => return Ok(false),
            }
        }
        let mut bodies = bodies.into_iter();
        for id in [fwd, rvs] {
            if let Some(body) = bodies.next() {
                self.out
                    .define(id, body)
                    .map_err(|e| internal(InternalError::Module(e)))?;
            }
        }
        self.derived.extend([fwd, rvs]);
        // Widened as a derived pullback is, so a caller of width N calls it so.
        let sig = self.input.sig(func);
        let (n_slices, n_dups) = (slice_params(sig, config).len(), dup_params(config).len());
        let rvs_sig = self.out.sig(rvs);
        self.pullbacks.push(LaneFunc {
            func: rvs,
            params: (0..rvs_sig.params.len())
                .map(|k| match k {
                    k if k < n_slices => ParamLanes::Shared,
                    k if k < n_slices + n_dups => ParamLanes::Slice,
                    _ => ParamLanes::Scalar,
                })
                .collect(),
            results: vec![true; rvs_sig.results.len()],
            lane_views: Vec::new(),
            lane_allocs: Vec::new(),
        });
        self.forwards.push((fwd, Vec::new()));
        Ok(true)
    }

    /// Defines the bodies `fwd` and `rvs` of the pair `job` declared.
    fn define_pair(&mut self, job: &Job, fwd: Function, rvs: Function) -> Result<(), AdError> {
        let internal = |e| AdError::Internal {
            func: self.input.name(job.func).to_string(),
            error: InternalError::Module(e),
        };
        self.out.define(job.fwd, fwd).map_err(internal)?;
        self.out.define(job.rvs, rvs).map_err(internal)
    }

    /// Writes the bodies of a queued pair.
    fn derive(&mut self, job: &Job) -> Result<(), AdError> {
        let module = self.input;
        let decl = &module.funcs[job.func];
        let fname = decl.name.clone();
        if let JobKind::Revolve {
            step_fwd,
            step_rvs,
            step_config,
        } = &job.kind
        {
            let internal = |error: InternalError| AdError::Internal {
                func: fname.clone(),
                error,
            };
            let lf = &self.loops[&job.func];
            let split = self.split_fn()?;
            let r = revolve::Revolve {
                lf,
                config: &job.config,
                step_config,
                step_fwd: *step_fwd,
                step_rvs: *step_rvs,
                split,
            };
            let fwd = r.forward(&self.out, job.fwd).map_err(internal)?;
            let rvs = r
                .pullback(&self.out, job.rvs, &decl.sig)
                .map_err(internal)?;
            self.revolve_ids.extend([job.fwd, job.rvs]);
            return self.define_pair(job, fwd, rvs);
        }
        if let JobKind::Custom(rule) = job.kind {
            let internal = |error: InternalError| AdError::Internal {
                func: fname.clone(),
                error,
            };
            let fwd = custom::forward(&self.out, job.fwd, job.func, rule, &job.config)
                .map_err(internal)?;
            let rvs = custom::pullback(&self.out, job.rvs, job.func, rule, &job.config)
                .map_err(internal)?;
            return self.define_pair(job, fwd, rvs);
        }
        if let JobKind::Checkpoint(inner_fwd, inner_rvs) = job.kind {
            let internal = |error: InternalError| AdError::Internal {
                func: fname.clone(),
                error,
            };
            let fwd =
                checkpoint::forward(&self.out, job.fwd, job.func, &job.config).map_err(internal)?;
            let rvs = checkpoint::pullback(
                &self.out,
                job.rvs,
                job.func,
                &job.config,
                inner_fwd,
                inner_rvs,
            )
            .map_err(internal)?;
            return self.define_pair(job, fwd, rvs);
        }
        let (wrapped, split);
        let mut primal = match decl.function() {
            Some(f) if !has_decl(module, job.func) => f,
            _ => {
                wrapped = wrapper(module, job.func);
                &wrapped
            }
        };
        if job.config.tape == TapePolicy::Minimal
            && let Some(f) = split_loop_exits(primal)
        {
            split = f;
            primal = &split;
        }
        let internal = |error: InternalError| AdError::Internal {
            func: fname.clone(),
            error,
        };
        let names = Names::new(primal);
        let plan = Plan::new(
            module,
            &fname,
            primal,
            &decl.sig.results,
            &job.config,
            &slice_params(&decl.sig, &job.config),
            &std::rc::Rc::clone(&self.summaries),
            &mut |g, k, c| self.request_call(g, k, c),
        )?;

        let fwd_sig = self.out.sig(job.fwd).clone();
        let marker = job.config.debug.then(|| debug_marker(job.func));
        let (fwd, shadow_allocs) =
            forward_ir(primal, &fwd_sig, &plan, job.config.needs_primal, marker)
                .map_err(internal)?;
        let active: Vec<usize> = (0..decl.sig.params.len())
            .filter(|&i| job.config.params[i] == Activity::Active)
            .collect();
        let (rvs, shadow_views) = pullback_ir(
            &self.out,
            job.rvs,
            primal,
            &names,
            &plan,
            &ParamSets {
                active: &active,
                slices: &slice_params(&decl.sig, &job.config),
                dup: &dup_params(&job.config),
            },
            &DebugChecks {
                marker,
                check_nan: job.config.debug && job.config.check_nan,
                func: &fname,
            },
        )
        .map_err(internal)?;
        self.out
            .define(job.fwd, fwd)
            .map_err(|e| internal(InternalError::Module(e)))?;
        self.out
            .define(job.rvs, rvs)
            .map_err(|e| internal(InternalError::Module(e)))?;
        // The pullback's parameters: primal slices, shadows, seeds.
        let (n_slices, n_dups) = (
            slice_params(&decl.sig, &job.config).len(),
            dup_params(&job.config).len(),
        );
        let n_params = self.out.sig(job.rvs).params.len();
        let params = (0..n_params)
            .map(|k| match k {
                k if k < n_slices => ParamLanes::Shared,
                k if k < n_slices + n_dups => ParamLanes::Slice,
                _ => ParamLanes::Scalar,
            })
            .collect();
        let n_results = self.out.sig(job.rvs).results.len();
        self.pullbacks.push(LaneFunc {
            func: job.rvs,
            params,
            results: vec![true; n_results],
            lane_views: shadow_views,
            lane_allocs: Vec::new(),
        });
        self.forwards.push((job.fwd, shadow_allocs));
        Ok(())
    }
}

/// The body of the declared function `id` of `out` as lazy derivation writes it
/// for a rule that cannot be derived: `trap_if true, message`, then zeros of the
/// result types (never reached). `None` when a result is a slice no parameter
/// can stand in for.
pub(crate) fn failing_function(
    out: &Module,
    id: FuncId,
    message: &str,
) -> Result<Option<Function>, InternalError> {
    let sig = out.sig(id).clone();
    let mut b = FunctionBuilder::new(out, id);
    let yes = b.bconst(true);
    b.trap_if(yes, message);
    let mut vals = Vec::new();
    for &t in &sig.results {
        let v = match Scalar::zero(t) {
            Some(z) => b.const_inst(z),
            None => match (0..sig.params.len()).find(|&i| sig.params[i] == t) {
                Some(i) => b.param(i),
                None => return Ok(None),
            },
        };
        vals.push(v);
    }
    b.ret(&vals);
    b.finish().map(Some).map_err(InternalError::Build)
}

/// The marker a forward pass in debug mode pushes first and its pullback pops and
/// compares last: `0x6772_6164` ("grad") in the high half, the primal's index in the
/// low half, so a pullback that finds another function's marker, or a saved value,
/// says the tape is out of step.
pub(crate) fn debug_marker(func: FuncId) -> i64 {
    (0x6772_6164_i64 << 32) | i64::from(func.as_u32())
}

/// Refuses a tape op (`push`, `pop`, `tape_alloc`, `tape_view`) in `func` or in any
/// function the derivation would differentiate through a call (callees with a
/// declaration are differentiated as it says, not through their bodies). A value
/// popped off the tape would be a constant to the derivation, so differentiating
/// derived code would give a silently wrong gradient; the error names the op, its
/// function and position, and the call in `func` that reaches it.
pub(crate) fn tape_ops_reached(module: &Module, func: FuncId) -> Result<(), AdError> {
    let fname = module.name(func).to_string();
    let at = |pos: Pos| {
        if pos.is_known() {
            format!(" at {pos}")
        } else {
            String::new()
        }
    };
    let mut seen: hashbrown::HashSet<FuncId> = [func].into_iter().collect();
    // Each function to scan, with the call of `func` that leads to it.
    let mut queue: VecDeque<(FuncId, Option<(FuncId, Pos)>)> = VecDeque::from([(func, None)]);
    while let Some((f, via)) = queue.pop_front() {
        let Some(body) = module.funcs.get(f).and_then(|d| d.function()) else {
            continue;
        };
        for (_, inst) in body.placed_insts() {
            let d = &body.insts[inst];
            let pos = body.srcmap.insts.get(inst).copied().unwrap_or(Pos::NONE);
            match d.opcode {
                Opcode::Push | Opcode::Pop | Opcode::TapeAlloc | Opcode::TapeView => {
                    // `push %x` at 3:14
                    let op = describe_inst(module, body, inst);
                    let place = match via {
                        None => op,
                        Some((callee, call)) => format!(
                            "{op} in @{}, reached through the call of @{}{}",
                            module.name(f),
                            module.name(callee),
                            at(call)
                        ),
                    };
                    return Err(AdError::Unsupported {
                        func: fname,
                        what: format!(
                            "{place}: tape ops appear only in derived code, and differentiating derived code is not supported (its popped values would count as constants)"
                        ),
                    });
                }
                Opcode::Call => {
                    if let Imm::Func(g) = d.imm
                        && !has_decl(module, g)
                        && seen.insert(g)
                    {
                        queue.push_back((g, via.or(Some((g, pos)))));
                    }
                }
                _ => {}
            }
        }
    }
    Ok(())
}

/// Whether the module declares a custom derivative (`vjp`, `nodiff`, `overlay`)
/// for `func`.
pub(crate) fn has_decl(module: &Module, func: FuncId) -> bool {
    module.decls.iter().any(|(d, _)| d.func() == func)
}

/// `entry: %r = call @func(%params); ret %r`: the function whose rule is the rule of
/// a function with a declaration (or of an `extern`), derived like any other (the
/// call is differentiated as the declaration says).
pub(crate) fn wrapper(module: &Module, func: FuncId) -> Function {
    let sig = module.sig(func);
    let mut f = Function::new(sig);
    let entry = f.make_block(Some("entry"));
    f.append_block(entry);
    let params = f.params.clone();
    if let Some(primal) = module.function(func) {
        for (&p, &q) in primal.params.iter().zip(&params) {
            f.values[q].name = primal.values[p].name.clone();
        }
    }
    let inst = f.make_inst(Opcode::Call, Imm::Func(func), &params, &sig.results);
    f.append_inst(entry, inst);
    let results: SmallVec<[Value; 2]> = f.insts[inst].results.iter().copied().collect();
    f.set_terminator(entry, Terminator::Ret(results));
    f
}

/// Checks `config` against `func`'s signature, and refuses what the derivation does
/// not handle: slice results, float slices chosen by a phi or `select`, tape and
/// debug ops in the input (unless `tape_ops`: forward mode differentiates derived
/// code).
pub(crate) fn check_request(
    module: &Module,
    func: FuncId,
    primal: &Function,
    config: RuleConfig,
    tape_ops: bool,
) -> Result<(), AdError> {
    let fname = module.name(func).to_string();
    let sig = module.sig(func);
    let names = Names::new(primal);
    if config.params.len() != sig.params.len() {
        return Err(AdError::ActivityCount {
            func: fname,
            expected: sig.params.len(),
            found: config.params.len(),
        });
    }
    let unsupported = |what: String| AdError::Unsupported {
        func: fname.clone(),
        what,
    };
    for (i, (&ty, &activity)) in sig.params.iter().zip(&config.params).enumerate() {
        let fits = match activity {
            Activity::Active => ty.is_float(),
            Activity::Dup | Activity::DupNoNeed => ty.is_slice() && ty.is_differentiable(),
            Activity::Const => true,
        };
        if !fits {
            let name = primal
                .params
                .get(i)
                .map(|&p| names.value(p).to_string())
                .unwrap_or_default();
            return Err(AdError::BadActivity {
                func: fname,
                param: i,
                name,
                ty,
                activity,
            });
        }
    }
    if let Some(ty) = sig.results.iter().find(|t| t.is_slice()) {
        return Err(unsupported(format!(
            "it returns a slice ({ty}); a rule's results are scalars (write into a `mut` slice parameter instead)"
        )));
    }
    for &b in &primal.layout {
        let data = &primal.blocks[b];
        for phi in &data.phis {
            let ty = primal.value_type(phi.value);
            if ty.is_slice() && ty.is_differentiable() {
                return Err(unsupported(format!(
                    "the phi %{}: {ty} chooses between float slices (pass the slice to a function on each branch instead)",
                    names.value(phi.value)
                )));
            }
        }
        for &inst in &data.insts {
            let d = &primal.insts[inst];
            let slice_select = d.opcode == Opcode::Select
                && d.results.first().is_some_and(|&r| {
                    primal.value_type(r).is_slice() && primal.value_type(r).is_differentiable()
                });
            if slice_select {
                return Err(unsupported(format!(
                    "{} chooses between float slices",
                    describe_inst(module, primal, inst)
                )));
            }
            if let OpRule::Unsupported(what) = op_rule(d.opcode)
                && !tape_ops
            {
                return Err(unsupported(format!(
                    "{what}, in {}",
                    describe_inst(module, primal, inst)
                )));
            }
        }
    }
    Ok(())
}

/// The names of the derived functions: `f.fwd` and `f.rvs` for the default
/// configuration, `f.fwd.PATTERN` and `f.rvs.PATTERN` otherwise (one letter per
/// parameter, `_`, the return's letter), with `.noprimal` when the forward pass does
/// not return the primal. A name the module already has gets `.2`, `.3`, ... ; a
/// primal named by digits only gets a `_` in front (`_7.fwd`).
fn derived_names(
    module: &Module,
    fname: &str,
    sig: &Signature,
    config: &RuleConfig,
    width: u32,
) -> (String, String) {
    let default = RuleConfig::default_for(sig);
    let frozen_default = (0..sig.params.len())
        .all(|i| !freezable(sig.params[i]) || config.is_frozen(i) == default.is_frozen(i));
    let mut suffix =
        if config.params == default.params && config.ret == RetActivity::Active && frozen_default {
            String::new()
        } else {
            format!(".{}", config.pattern_for(Some(sig)))
        };
    if !config.needs_primal {
        suffix.push_str(".noprimal");
    }
    if width > 1 {
        suffix.push_str(&format!(".w{width}"));
    }
    // A name of digits only (`@7`) takes no `.suffix`; `_7.fwd` is a name.
    let stem = if fname.starts_with(|c: char| c.is_ascii_digit()) {
        format!("_{fname}")
    } else {
        fname.to_string()
    };
    let base = (format!("{stem}.fwd{suffix}"), format!("{stem}.rvs{suffix}"));
    let free = |(f, r): &(String, String)| {
        module.func_by_name(f).is_none() && module.func_by_name(r).is_none()
    };
    if free(&base) {
        return base;
    }
    (2..)
        .map(|n| (format!("{}.{n}", base.0), format!("{}.{n}", base.1)))
        .find(free)
        .unwrap_or(base)
}
