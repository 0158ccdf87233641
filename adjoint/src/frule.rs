//! Forward mode: [`build_frule`] derives from `@f` one function, `@f.jvp`, that
//! computes `f` and its directional derivatives (Jacobian-vector products) in one
//! sweep.
//!
//! The derived function is a copy of `f`'s reachable blocks in which every statement
//! that carries a derivative is followed by its tangent statements: for a float op,
//! `ẏ = Σ ∂y/∂aₖ · ȧₖ` over its operands, written by the same [rule
//! table](crate::rules) as the reverse mode's `ct[aₖ] += ∂y/∂aₖ · ct[y]` (every
//! entry of the table is linear in the cotangent it is given, so giving it the
//! operand's tangent instead gives that operand's term of the tangent); a phi gets
//! tangent phis; a `load` from a slice with a tangent loads the tangent too, a
//! `store` stores it (a zero when the stored value carries none), an `alloc` whose
//! contents vary gets a tangent buffer; a call calls the callee's own forward rule,
//! derived into the same module once per activity pattern (recursion included), or
//! the callee's `jvp` rule. Nothing is saved and nothing runs backwards: there is
//! no tape.
//!
//! **Width.** With width N the derived function carries N tangents (lanes) per
//! value: N tangent parameters per float scalar, N tangent results per float result,
//! N phis, N lanes of every tangent computation, one after the other. A tangent slice
//! holds the N lanes of each element together: lane `j` of element `i` is at
//! `i * N + j`, so it is N times as long as its slice. Lane `j` is computed by exactly
//! the statements a width-1 function computes, so it is bit for bit the width-1
//! result for the `j`-th tangents.
//!
//! **Which values carry tangents** is the reverse mode's activity analysis under
//! the corresponding request (`dual` scalars as `active`, `dual` slices as `dup`):
//! a value gets tangents when it depends on a `dual` input and reaches a result or
//! the final contents of a `dual` slice. Every other tangent is a symbolic zero. A
//! `const` slice into which values that vary are stored, and which is read back, is
//! refused, as in reverse mode.
//!
//! **Calls.** A `nodiff` callee's results have zero tangents and it leaves tangent
//! slices as they are (as in reverse mode, where it leaves shadows as they are). A
//! callee with a `jvp` declaration is called for the value and its rule once per
//! lane for the tangents. A callee with only a `vjp` declaration cannot be
//! differentiated in forward mode: the derivation says so and names the `jvp`
//! declaration it needs. An `overlay @g = @h` callee is called for the value and
//! `@h`'s forward rule, without its primal results, for the tangents.

use core::fmt;
use std::collections::VecDeque;

use cranelift_entity::{EntitySet, SecondaryMap};
use gradlift_ir::flowgraph::ControlFlowGraph;
use gradlift_ir::verify::{verify_decls, verify_function};
use gradlift_ir::{
    Block, Body, FuncId, Function, FunctionBuilder, Imm, Inst, Module, Opcode, Pos, Signature,
    Terminator, Type, Value, ValueDef, VerifierErrors,
};
use hashbrown::{HashMap, HashSet};
use smallvec::SmallVec;

use crate::activity::ActivityInfo;
use crate::config::{Activity, RetActivity, RuleConfig};
use crate::error::{AdError, InternalError};
use crate::plan::{check_const_writes, describe_inst};
use crate::pullback::{drop_unused_negs, negated};
use crate::rrule::{check_request, has_decl, wrapper};
use crate::rules::{ArgVal, OpRule, RevCtx, op_rule};
use crate::widen::{LaneFunc, ParamLanes, widen_funcs};

/// The largest width [`build_frule`] derives.
pub const MAX_WIDTH: u32 = 64;

/// How a parameter takes part in forward mode (`std::autodiff`'s names).
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug)]
pub enum DualActivity {
    /// A float scalar with N tangents after it, or a float slice with a tangent
    /// slice after it: on entry the input's tangents, and for a `mut` slice, on
    /// return the tangents of its final contents (overwritten, not added to).
    Dual,
    /// No tangent: the parameter is a constant to differentiation.
    Const,
}

impl DualActivity {
    /// The name on the command line and in messages.
    pub fn name(self) -> &'static str {
        match self {
            DualActivity::Dual => "dual",
            DualActivity::Const => "const",
        }
    }

    /// The letter in a derived function's name (`@f.jvp.DC_D`).
    pub fn letter(self) -> char {
        match self {
            DualActivity::Dual => 'D',
            DualActivity::Const => 'C',
        }
    }

    /// `dual` for float scalars and float slices, `const` for the rest.
    pub fn default_for(ty: Type) -> DualActivity {
        if ty.is_differentiable() {
            DualActivity::Dual
        } else {
            DualActivity::Const
        }
    }
}

impl fmt::Display for DualActivity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How the results take part in forward mode.
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug)]
pub enum DualRet {
    /// The primal results, then N tangents per float result.
    Dual,
    /// The tangents only: the primal results are not returned.
    DualOnly,
    /// The primal results only (tangents still reach `dual` `mut` slices).
    Const,
}

impl DualRet {
    /// The name on the command line and in messages.
    pub fn name(self) -> &'static str {
        match self {
            DualRet::Dual => "dual",
            DualRet::DualOnly => "dualonly",
            DualRet::Const => "const",
        }
    }

    /// The letter in a derived function's name.
    pub fn letter(self) -> char {
        match self {
            DualRet::Dual => 'D',
            DualRet::DualOnly => 'O',
            DualRet::Const => 'C',
        }
    }
}

impl fmt::Display for DualRet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What a forward rule is asked for: one [`DualActivity`] per parameter, the
/// return's [`DualRet`], and the width (tangents per sweep).
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct FruleConfig {
    /// One activity per parameter, in order.
    pub params: Vec<DualActivity>,
    /// The return's activity.
    pub ret: DualRet,
    /// Tangents carried per value, from 1 to [`MAX_WIDTH`].
    pub width: u32,
}

impl FruleConfig {
    /// `dual` for every float scalar and float slice, a `dual` return, width 1.
    pub fn default_for(sig: &Signature) -> FruleConfig {
        FruleConfig {
            params: sig
                .params
                .iter()
                .map(|&t| DualActivity::default_for(t))
                .collect(),
            ret: DualRet::Dual,
            width: 1,
        }
    }

    /// The forward-mode request matching the reverse-mode `config`: `active` and
    /// `dup` parameters `dual`, the rest `const`; an `active` return `dual`
    /// (`dualonly` when the primal is not needed), a `const` one `const`.
    pub fn matching(config: &RuleConfig, width: u32) -> FruleConfig {
        FruleConfig {
            params: config
                .params
                .iter()
                .map(|&a| match a {
                    Activity::Const => DualActivity::Const,
                    _ => DualActivity::Dual,
                })
                .collect(),
            ret: match (config.ret, config.needs_primal) {
                (RetActivity::Const, _) => DualRet::Const,
                (RetActivity::Active, true) => DualRet::Dual,
                (RetActivity::Active, false) => DualRet::DualOnly,
            },
            width,
        }
    }

    /// The same configuration with `width` tangents per value.
    pub fn with_width(mut self, width: u32) -> FruleConfig {
        self.width = width;
        self
    }

    /// The same configuration with the return's activity `ret`.
    pub fn with_ret(mut self, ret: DualRet) -> FruleConfig {
        self.ret = ret;
        self
    }

    /// The pattern in a derived function's name: one letter per parameter, `_`,
    /// the return's letter (`DC_D`).
    pub fn pattern(&self) -> String {
        let mut s: String = self.params.iter().map(|a| a.letter()).collect();
        s.push('_');
        s.push(self.ret.letter());
        s
    }

    /// The reverse-mode request whose activity analysis says which values carry
    /// tangents: `dual` scalars `active`, `dual` slices `dup`.
    fn rule_config(&self, sig: &Signature) -> RuleConfig {
        let mut c = RuleConfig::default_for(sig);
        c.params = self
            .params
            .iter()
            .zip(&sig.params)
            .map(|(&a, &t)| match a {
                DualActivity::Dual if t.is_slice() => Activity::Dup,
                DualActivity::Dual => Activity::Active,
                DualActivity::Const => Activity::Const,
            })
            .collect();
        c.ret = match self.ret {
            DualRet::Dual | DualRet::DualOnly => RetActivity::Active,
            DualRet::Const => RetActivity::Const,
        };
        c
    }
}

/// A derived forward rule: the input module with `@f.jvp` (and the forward rules
/// of the functions it calls) added.
#[derive(Clone, Debug)]
pub struct Frule {
    /// The input module plus the derived functions; it verifies, prints and parses
    /// back like any other.
    pub module: Module,
    /// The derived function.
    pub func: FuncId,
    /// How its parameters and results relate to the primal's.
    pub layout: FruleLayout,
}

/// How a forward rule's parameters and results line up with the primal's.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct FruleLayout {
    /// The primal function.
    pub primal: FuncId,
    /// The configuration the rule was derived for.
    pub config: FruleConfig,
    /// Per parameter of the derived function: the primal parameter it belongs to,
    /// and `None` for the primal value itself or `Some(j)` for its tangent lane `j`
    /// (a tangent slice, which holds every lane, is `Some(0)`).
    pub params: Vec<(usize, Option<u32>)>,
    /// Whether the derived function returns the primal results first (all of
    /// them), which it does unless the return is `dualonly`.
    pub primal_results: bool,
    /// The float results whose tangents follow, N per result (lane 0 first), in
    /// order; empty when the return is `const`.
    pub tangent_results: Vec<usize>,
}

/// Derives the forward rule of `func` under `config`.
///
/// Supported: what [`build_rrule`](crate::build_rrule()) supports (scalars and
/// slices, any control flow, local buffers, mutation, calls and recursion), with
/// `jvp` declarations where reverse mode uses `vjp` ones. Refused with an
/// [`AdError`]: activities that do not fit (`dual` on an integer), a width of 0 or
/// above [`MAX_WIDTH`], functions that do not verify, slice results, float slices
/// chosen by a phi or `select`, tape ops, calls to functions without a forward
/// derivative (an `extern` without `jvp` or `nodiff`, a function with a `vjp`
/// declaration but no `jvp`), `const` slices written with varying values and read
/// back.
pub fn build_frule(module: &Module, func: FuncId, config: &FruleConfig) -> Result<Frule, AdError> {
    let (out, ids) = build_frules(module, &[(func, config.clone())])?;
    let sig = module.sig(func);
    Ok(Frule {
        module: out,
        func: ids[0],
        layout: frule_layout(func, sig, config),
    })
}

/// How the forward rule of `func` (signature `sig`) under `config` lines up with
/// it.
pub(crate) fn frule_layout(func: FuncId, sig: &Signature, config: &FruleConfig) -> FruleLayout {
    FruleLayout {
        primal: func,
        config: config.clone(),
        params: param_layout(sig, config),
        primal_results: config.ret != DualRet::DualOnly,
        tangent_results: tangent_results(sig, config),
    }
}

/// Derives the forward rules of several functions into one module (sharing the
/// rules of the functions they call): the module and each rule's ID, in order.
pub(crate) fn build_frules(
    module: &Module,
    requests: &[(FuncId, FruleConfig)],
) -> Result<(Module, Vec<FuncId>), AdError> {
    let tape_funcs = tape_funcs(module);
    // Without tape ops (user code, not derived code), a width above 1 is derived
    // at width 1 and widened by lanes (`widen`): what does not depend on the
    // tangents is computed once. Derived code keeps the lanes of its tape ops in
    // step through the width-N derivation below.
    let width = requests.first().map_or(1, |(_, c)| c.width);
    let widen = width > 1
        && width <= MAX_WIDTH
        && tape_funcs.is_empty()
        && requests.iter().all(|(_, c)| c.width == width);
    let mut deriver = Deriver {
        input: module,
        out: module.clone(),
        cache: HashMap::new(),
        queue: VecDeque::new(),
        derived: Vec::new(),
        tape_funcs,
        name_width: if widen { width } else { 1 },
        lane_funcs: Vec::new(),
    };
    let mut ids = Vec::new();
    for (func, config) in requests {
        let func = *func;
        let config = &if widen {
            config.clone().with_width(1)
        } else {
            config.clone()
        };
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
        if config.width == 0 || config.width > MAX_WIDTH {
            return Err(AdError::Unsupported {
                func: fname,
                what: format!(
                    "a width of {} (forward mode carries 1 to {MAX_WIDTH} tangents per value)",
                    config.width
                ),
            });
        }
        ids.push(deriver.request(func, config.clone())?);
    }
    while let Some(job) = deriver.queue.pop_front() {
        // A callee's rule that cannot be derived fails when it runs instead (lazy
        // derivation); the rules asked for fail now.
        if let Err(e) = deriver.derive(&job)
            && (ids.contains(&job.id)
                || !e.is_deferred()
                || !deriver.define_failing(job.func, &job.config, job.id, &e.to_string())?)
        {
            return Err(e);
        }
    }
    let mut out = deriver.out;
    if widen {
        widen_funcs(&mut out, &deriver.lane_funcs, width as usize).map_err(|error| {
            AdError::Internal {
                func: module.name(requests[0].0).to_string(),
                error,
            }
        })?;
    }
    for &d in &deriver.derived {
        let errors = verify_function(&out, d);
        if !errors.is_empty() {
            return Err(AdError::Internal {
                func: module.name(requests[0].0).to_string(),
                error: InternalError::Unverified {
                    func: out.name(d).to_string(),
                    errors: VerifierErrors(errors),
                },
            });
        }
    }
    Ok((out, ids))
}

/// Per parameter of the derived function: its primal parameter and lane.
fn param_layout(sig: &Signature, config: &FruleConfig) -> Vec<(usize, Option<u32>)> {
    let mut out = Vec::new();
    for (i, &t) in sig.params.iter().enumerate() {
        out.push((i, None));
        if config.params[i] == DualActivity::Dual {
            if t.is_slice() {
                out.push((i, Some(0)));
            } else {
                out.extend((0..config.width).map(|j| (i, Some(j))));
            }
        }
    }
    out
}

/// How the width-1 rule `id` of a function of signature `sig` under `config` is
/// widened: its tangent parameters by lane, its tangent results by lane.
fn lane_func(
    id: FuncId,
    sig: &Signature,
    config: &FruleConfig,
    lane_allocs: Vec<Inst>,
) -> LaneFunc {
    let params = param_layout(sig, config)
        .into_iter()
        .map(|(i, lane)| match lane {
            None => ParamLanes::Shared,
            Some(_) if sig.params[i].is_slice() => ParamLanes::Slice,
            Some(_) => ParamLanes::Scalar,
        })
        .collect();
    let n_primal = if config.ret == DualRet::DualOnly {
        0
    } else {
        sig.results.len()
    };
    let mut results = vec![false; n_primal];
    results.extend(tangent_results(sig, config).iter().map(|_| true));
    LaneFunc {
        func: id,
        params,
        results,
        lane_views: Vec::new(),
        lane_allocs,
    }
}

/// The float results with tangents.
fn tangent_results(sig: &Signature, config: &FruleConfig) -> Vec<usize> {
    if config.ret == DualRet::Const {
        return Vec::new();
    }
    (0..sig.results.len())
        .filter(|&j| sig.results[j].is_float())
        .collect()
}

/// The derived function's signature.
fn frule_sig(sig: &Signature, config: &FruleConfig) -> Signature {
    let params: Vec<Type> = param_layout(sig, config)
        .into_iter()
        .map(|(i, _)| sig.params[i])
        .collect();
    let mut results: Vec<Type> = if config.ret == DualRet::DualOnly {
        Vec::new()
    } else {
        sig.results.clone()
    };
    for j in tangent_results(sig, config) {
        results.extend((0..config.width).map(|_| sig.results[j]));
    }
    Signature::new(params, results)
}

/// A rule to derive: declared, its body not yet written.
struct Job {
    func: FuncId,
    config: FruleConfig,
    id: FuncId,
}

/// Derives forward rules, and those of the functions they call, into one module: a
/// cache from (function, configuration) to the derived function, and a queue of
/// functions declared but not yet written (declared first, so recursion finds its
/// own name).
struct Deriver<'m> {
    input: &'m Module,
    out: Module,
    cache: HashMap<(FuncId, FruleConfig), FuncId>,
    queue: VecDeque<Job>,
    derived: Vec<FuncId>,
    /// The functions of the input that push or pop, themselves or through calls.
    tape_funcs: HashSet<FuncId>,
    /// The width the rules are named for and widened to once derived (at width 1);
    /// 1 when they are derived at their own width.
    name_width: u32,
    /// What widening needs of each derived rule.
    lane_funcs: Vec<LaneFunc>,
}

/// How forward mode differentiates a call, from what the module says about the
/// callee. `nodiff` wins over `jvp`, which wins over `vjp` and `overlay`.
enum FwdCallee {
    Nodiff,
    Jvp(FuncId),
    /// A `vjp` declaration without a `jvp`: no forward derivative.
    VjpOnly,
    Overlay(FuncId),
    Body,
    Extern,
}

fn fwd_callee(module: &Module, g: FuncId) -> FwdCallee {
    if module.is_nodiff(g) {
        FwdCallee::Nodiff
    } else if let Some(r) = module.jvp_of(g) {
        FwdCallee::Jvp(r)
    } else if module.vjp_rule(g).is_some() {
        FwdCallee::VjpOnly
    } else if let Some(h) = module.overlay_of(g) {
        FwdCallee::Overlay(h)
    } else if module
        .funcs
        .get(g)
        .is_some_and(|d| matches!(d.body, Body::Defined(_)))
    {
        FwdCallee::Body
    } else {
        FwdCallee::Extern
    }
}

/// What the derived function does for a call.
#[derive(Clone, Debug)]
enum CallPlan {
    /// The call stays; its results carry no tangents.
    Plain,
    /// The call stays, and the `jvp` rule is called once per lane.
    Jvp { rule: FuncId },
    /// A call of a derived forward rule with the arguments' tangents. For an
    /// overlay, the call stays for the value and the rule (`dualonly`) gives the
    /// tangents.
    Derived {
        rule: FuncId,
        params: Vec<DualActivity>,
        ret: DualRet,
        overlay: bool,
    },
}

impl Deriver<'_> {
    /// The forward rule of `func` under `config`: from the cache, or declared now
    /// and queued.
    fn request(&mut self, func: FuncId, config: FruleConfig) -> Result<FuncId, AdError> {
        if let Some(&id) = self.cache.get(&(func, config.clone())) {
            return Ok(id);
        }
        let module = self.input;
        let decl = module
            .funcs
            .get(func)
            .ok_or_else(|| AdError::NoSuchFunction(func.to_string()))?;
        let fname = decl.name.clone();
        let sig = &decl.sig;
        if config.params.len() != sig.params.len() {
            return Err(AdError::ActivityCount {
                func: fname,
                expected: sig.params.len(),
                found: config.params.len(),
            });
        }
        let wrapped;
        let primal = if let Some(primal) = decl.function().filter(|_| !has_decl(module, func)) {
            let errors = verify_function(module, func);
            if !errors.is_empty() {
                return Err(AdError::Invalid {
                    func: fname,
                    errors: VerifierErrors(errors),
                });
            }
            primal
        } else if has_decl(module, func) {
            wrapped = wrapper(module, func);
            &wrapped
        } else {
            return Err(AdError::NotDefined { func: fname });
        };
        for (i, (&ty, &a)) in sig.params.iter().zip(&config.params).enumerate() {
            if a == DualActivity::Dual && !ty.is_differentiable() {
                let name = primal
                    .params
                    .get(i)
                    .and_then(|&p| primal.values[p].name.as_deref().map(str::to_string))
                    .unwrap_or_else(|| i.to_string());
                return Err(AdError::BadDualActivity {
                    func: fname,
                    param: i,
                    name,
                    ty,
                    activity: a,
                });
            }
        }
        check_request(module, func, primal, config.rule_config(sig), true)?;
        let named = if self.name_width > 1 {
            config.clone().with_width(self.name_width)
        } else {
            config.clone()
        };
        let name = derived_name(&self.out, &fname, sig, &named);
        let id = self
            .out
            .declare(&name, frule_sig(sig, &config))
            .map_err(|e| AdError::Internal {
                func: fname.clone(),
                error: InternalError::Module(e),
            })?;
        self.cache.insert((func, config.clone()), id);
        self.derived.push(id);
        self.queue.push_back(Job { func, config, id });
        Ok(id)
    }

    /// Writes the body of a queued rule.
    fn derive(&mut self, job: &Job) -> Result<(), AdError> {
        let module = self.input;
        let decl = &module.funcs[job.func];
        let fname = decl.name.clone();
        let wrapped;
        let primal = match decl.function() {
            Some(f) if !has_decl(module, job.func) => f,
            _ => {
                wrapped = wrapper(module, job.func);
                &wrapped
            }
        };
        let internal = |error: InternalError| AdError::Internal {
            func: fname.clone(),
            error,
        };
        let cfg = ControlFlowGraph::new(primal);
        let mut reachable = EntitySet::new();
        for &b in cfg.reverse_postorder() {
            reachable.insert(b);
        }
        let rc = job.config.rule_config(&decl.sig);
        let act = ActivityInfo::analyse_derived(module, primal, &reachable, &rc, &self.tape_funcs);
        check_const_writes(module, &fname, primal, &reachable, &act).map_err(|e| match e {
            AdError::ConstWrite { func, slice, at } => {
                AdError::ConstWriteForward { func, slice, at }
            }
            e => e,
        })?;
        let calls = self.plan_calls(&fname, primal, &reachable, &act, job.config.width)?;
        let body = {
            let mut pass = Pass {
                primal,
                act: &act,
                calls: &calls,
                width: job.config.width as usize,
                b: FunctionBuilder::new(&self.out, job.id),
                vmap: SecondaryMap::new(),
                bmap: SecondaryMap::new(),
                tan: SecondaryMap::new(),
                tslice: SecondaryMap::new(),
                handles: float_handles(primal, &reachable),
                thandle: SecondaryMap::new(),
                missing: None,
                lane_allocs: Vec::new(),
            };
            pass.params(&job.config);
            pass.lay_out_blocks(&reachable);
            for &b in cfg.reverse_postorder() {
                pass.block(b, job.config.ret);
            }
            pass.phi_edges(&reachable);
            if let Some(what) = pass.missing {
                return Err(internal(InternalError::NeverMade { item: what }));
            }
            if self.name_width > 1 {
                self.lane_funcs.push(lane_func(
                    job.id,
                    &decl.sig,
                    &job.config,
                    core::mem::take(&mut pass.lane_allocs),
                ));
            }
            let (bmap, vmap) = (pass.bmap, pass.vmap);
            let mut body = pass
                .b
                .finish()
                .map_err(|e| internal(InternalError::Build(e)))?;
            drop_unused_negs(&mut body);
            // Positions are the primal's, so that a run-time error of the derived
            // function points at the statement the user wrote.
            let src = &primal.srcmap;
            body.srcmap.func = src.func;
            for &b in primal.layout.iter().filter(|&&b| reachable.contains(b)) {
                let Some(nb) = bmap[b] else { continue };
                body.srcmap.blocks[nb] = src.blocks.get(b).copied().unwrap_or(Pos::NONE);
                body.srcmap.terms[nb] = src.terms.get(b).copied().unwrap_or(Pos::NONE);
                for phi in &primal.blocks[b].phis {
                    if let Some(nv) = vmap[phi.value] {
                        body.srcmap.values[nv] =
                            src.values.get(phi.value).copied().unwrap_or(Pos::NONE);
                    }
                }
            }
            body
        };
        self.out
            .define(job.id, body)
            .map_err(|e| internal(InternalError::Module(e)))?;
        Ok(())
    }

    /// Decides, for each reachable call, what the derived function does, requesting
    /// the callees' forward rules it needs.
    fn plan_calls(
        &mut self,
        fname: &str,
        primal: &Function,
        reachable: &EntitySet<Block>,
        act: &ActivityInfo,
        width: u32,
    ) -> Result<HashMap<Inst, CallPlan>, AdError> {
        let mut plans = HashMap::new();
        for &b in primal.layout.iter().filter(|&&b| reachable.contains(b)) {
            for &inst in &primal.blocks[b].insts {
                let d = &primal.insts[inst];
                let (Opcode::Call, Imm::Func(g)) = (d.opcode, d.imm) else {
                    continue;
                };
                let params: Vec<DualActivity> = d
                    .args
                    .iter()
                    .map(|&a| {
                        if act.is_active(a, primal) || act.has_shadow(a, primal) {
                            DualActivity::Dual
                        } else {
                            DualActivity::Const
                        }
                    })
                    .collect();
                let ret = if d.results.iter().any(|&r| act.is_active(r, primal)) {
                    DualRet::Dual
                } else {
                    DualRet::Const
                };
                let plan = if self.tape_funcs.contains(&g) {
                    // Derived code: the callee pushes or pops, so its forward rule
                    // runs whatever varies, to keep the tape's lanes in step.
                    let config = FruleConfig {
                        params: params.clone(),
                        ret,
                        width,
                    };
                    let rule = self.request(g, config)?;
                    CallPlan::Derived {
                        rule,
                        params,
                        ret,
                        overlay: false,
                    }
                } else if !params.contains(&DualActivity::Dual) {
                    CallPlan::Plain
                } else {
                    match self.plan_call(fname, primal, inst, g, params.clone(), ret, width) {
                        Ok(plan) => plan,
                        Err(e) if e.is_deferred() => {
                            let config = FruleConfig {
                                params: params.clone(),
                                ret,
                                width,
                            };
                            match self.failing(g, config, &e)? {
                                Some(rule) => CallPlan::Derived {
                                    rule,
                                    params,
                                    ret,
                                    overlay: false,
                                },
                                None => return Err(e),
                            }
                        }
                        Err(e) => return Err(e),
                    }
                };
                plans.insert(inst, plan);
            }
        }
        Ok(plans)
    }

    /// What the derived function does for the call `inst` of `g` (varied
    /// arguments `params`, results `ret`), requesting the callee's forward rule:
    /// an error when `g` has no forward derivative or its rule cannot be derived.
    #[allow(clippy::too_many_arguments)]
    fn plan_call(
        &mut self,
        fname: &str,
        primal: &Function,
        inst: Inst,
        g: FuncId,
        params: Vec<DualActivity>,
        ret: DualRet,
        width: u32,
    ) -> Result<CallPlan, AdError> {
        let module = self.input;
        Ok(match fwd_callee(module, g) {
            FwdCallee::Nodiff => CallPlan::Plain,
            FwdCallee::Jvp(rule) => {
                let gsig = module.sig(g);
                let over_slices = gsig.params.iter().any(|t| t.is_slice());
                if over_slices && (width > 1 || self.name_width > 1) {
                    return Err(AdError::Unsupported {
                        func: fname.to_string(),
                        what: format!(
                            "{}: the `jvp` rule of @{} takes slices, which a rule of width {} cannot call yet (one lane at a time would need its tangents apart)",
                            describe_inst(module, primal, inst),
                            module.name(g),
                            width.max(self.name_width)
                        ),
                    });
                }
                // A `mut` slice with a tangent needs the rule even when no result
                // does.
                let dual_mut = params
                    .iter()
                    .zip(&gsig.params)
                    .any(|(&p, t)| p == DualActivity::Dual && t.is_mut_slice());
                if ret == DualRet::Dual || dual_mut {
                    CallPlan::Jvp { rule }
                } else {
                    CallPlan::Plain
                }
            }
            FwdCallee::VjpOnly => {
                return Err(AdError::Unsupported {
                    func: fname.to_string(),
                    what: format!(
                        "{} needs the forward derivative of @{g}, which has a `vjp` rule but no `jvp` rule: declare `jvp @{g} = @RULE` (see the IR docs, \"jvp\")",
                        describe_inst(module, primal, inst),
                        g = module.name(g)
                    ),
                });
            }
            FwdCallee::Overlay(h) => {
                let writes = module.sig(h).params.iter().any(|t| t.is_mut_slice());
                if writes {
                    return Err(AdError::Unsupported {
                        func: fname.to_string(),
                        what: format!(
                            "{}: @{} is overlaid and has a `mut` slice parameter; forward mode would call both and write twice",
                            describe_inst(module, primal, inst),
                            module.name(g)
                        ),
                    });
                }
                if ret == DualRet::Const {
                    CallPlan::Plain
                } else {
                    let config = FruleConfig {
                        params: params.clone(),
                        ret: DualRet::DualOnly,
                        width,
                    };
                    let rule = self.request(h, config)?;
                    CallPlan::Derived {
                        rule,
                        params,
                        ret: DualRet::DualOnly,
                        overlay: true,
                    }
                }
            }
            FwdCallee::Body => {
                let config = FruleConfig {
                    params: params.clone(),
                    ret,
                    width,
                };
                let rule = self.request(g, config)?;
                CallPlan::Derived {
                    rule,
                    params,
                    ret,
                    overlay: false,
                }
            }
            FwdCallee::Extern => {
                return Err(AdError::NoForwardDerivative {
                    func: fname.to_string(),
                    callee: module.name(g).to_string(),
                    at: describe_inst(module, primal, inst),
                });
            }
        })
    }

    /// Lazy derivation: the rule of a call of `g` under `config` that cannot be
    /// derived (`error` says why), which fails with `error`'s message when it
    /// runs (`trap_if`); `None` when it cannot be written (a slice result with
    /// nothing to return).
    fn failing(
        &mut self,
        g: FuncId,
        config: FruleConfig,
        error: &AdError,
    ) -> Result<Option<FuncId>, AdError> {
        let sig = self.input.sig(g).clone();
        let named = if self.name_width > 1 {
            config.clone().with_width(self.name_width)
        } else {
            config.clone()
        };
        let name = derived_name(
            &self.out,
            &format!("{}.fail", self.input.name(g)),
            &sig,
            &named,
        );
        let id = self
            .out
            .declare(&name, frule_sig(&sig, &config))
            .map_err(|e| AdError::Internal {
                func: self.input.name(g).to_string(),
                error: InternalError::Module(e),
            })?;
        if !self.define_failing(g, &config, id, &error.to_string())? {
            return Ok(None);
        }
        Ok(Some(id))
    }

    /// Defines the declared rule `id` (of `g` under `config`) as a function that
    /// fails with `message`; false when it cannot be written.
    fn define_failing(
        &mut self,
        g: FuncId,
        config: &FruleConfig,
        id: FuncId,
        message: &str,
    ) -> Result<bool, AdError> {
        let internal = |error: InternalError| AdError::Internal {
            func: self.input.name(g).to_string(),
            error,
        };
        let Some(body) =
            crate::rrule::failing_function(&self.out, id, message).map_err(internal)?
        else {
            return Ok(false);
        };
        self.out
            .define(id, body)
            .map_err(|e| internal(InternalError::Module(e)))?;
        self.derived.push(id);
        if self.name_width > 1 {
            let gsig = self.input.sig(g).clone();
            self.lane_funcs
                .push(lane_func(id, &gsig, config, Vec::new()));
        }
        Ok(true)
    }
}

/// The derived function being written.
///
/// Invariant: a primal value is in `vmap` once its definition was copied; a float
/// value that carries tangents has its `width` lanes in `tan` from then on, and a
/// slice with a tangent slice has it in `tslice`.
struct Pass<'a, 'm> {
    primal: &'a Function,
    act: &'a ActivityInfo,
    calls: &'a HashMap<Inst, CallPlan>,
    width: usize,
    b: FunctionBuilder<'m>,
    vmap: SecondaryMap<Value, Option<Value>>,
    bmap: SecondaryMap<Block, Option<Block>>,
    tan: SecondaryMap<Value, Option<SmallVec<[Value; 4]>>>,
    tslice: SecondaryMap<Value, Option<Value>>,
    /// The `i64` values that are handles of float tape buffers (derived code), and
    /// the handles of their tangent buffers.
    handles: EntitySet<Value>,
    thandle: SecondaryMap<Value, Option<Value>>,
    /// Set when a step needs a value no step made (a bug in gradlift).
    missing: Option<String>,
    /// The `alloc`s of tangent buffers (which widening makes N times as long).
    lane_allocs: Vec<Inst>,
}

impl Pass<'_, '_> {
    /// Maps the primal's parameters (and their tangents) to the derived function's.
    fn params(&mut self, config: &FruleConfig) {
        let primal = self.primal;
        let mut k = 0;
        for (i, &p) in primal.params.iter().enumerate() {
            let v = self.b.param(k);
            k += 1;
            self.vmap[p] = Some(v);
            let name = primal.values[p].name.as_deref().map(str::to_string);
            if let Some(n) = &name {
                self.b.named(n, v);
            }
            if config.params[i] != DualActivity::Dual {
                continue;
            }
            if primal.value_type(p).is_slice() {
                let t = self.b.param(k);
                k += 1;
                if let Some(n) = &name {
                    self.b.named(&format!("d{n}"), t);
                }
                self.tslice[p] = Some(t);
            } else {
                let lanes: SmallVec<[Value; 4]> = (0..self.width)
                    .map(|j| {
                        let t = self.b.param(k + j);
                        if let Some(n) = &name {
                            self.b.named(&lane_name(n, j, self.width), t);
                        }
                        t
                    })
                    .collect();
                k += self.width;
                self.tan[p] = Some(lanes);
            }
        }
    }

    /// Makes a block for each reachable primal block, in layout order (the entry is
    /// the builder's own), with the same names.
    fn lay_out_blocks(&mut self, reachable: &EntitySet<Block>) {
        let primal = self.primal;
        let entry = self.b.current_block();
        for (n, &b) in primal
            .layout
            .iter()
            .filter(|&&b| reachable.contains(b))
            .enumerate()
        {
            let nb = if n == 0 {
                entry
            } else {
                let name = primal.blocks[b].name.as_deref().unwrap_or("b").to_string();
                self.b.create_block(&name)
            };
            self.bmap[b] = Some(nb);
        }
    }

    fn block_of(&self, b: Block) -> Block {
        self.bmap[b].expect("reachable blocks are mapped")
    }

    /// The derived function's value for the primal `v`.
    fn get(&mut self, v: Value) -> Value {
        match self.primal.value_def(v) {
            ValueDef::Const(c) => self.b.constant(c),
            _ => match self.vmap[v] {
                Some(nv) => nv,
                None => {
                    self.missing
                        .get_or_insert_with(|| format!("the copy of {v}"));
                    self.b.fconst(0.0)
                }
            },
        }
    }

    /// Lane `j` of the tangent of `v`, if it carries one.
    fn tangent(&self, v: Value, j: usize) -> Option<Value> {
        self.tan[v].as_ref().map(|l| l[j])
    }

    /// Lane `j` of the tangent of `v`, or a zero of type `ty`.
    fn tangent_or_zero(&mut self, v: Value, j: usize, ty: Type) -> Value {
        match self.tangent(v, j) {
            Some(t) => t,
            None => self.zero(ty),
        }
    }

    fn zero(&mut self, ty: Type) -> Value {
        match ty {
            Type::F32 => self.b.f32const(0.0),
            _ => self.b.fconst(0.0),
        }
    }

    /// Where lane `j` of element `i` is in a tangent slice: `i * N + j`.
    fn lane_index(&mut self, i: Value, j: usize) -> Value {
        if self.width == 1 {
            return i;
        }
        let n = self.b.iconst(self.width as i64);
        let base = self.b.imul(i, n);
        if j == 0 {
            base
        } else {
            let j = self.b.iconst(j as i64);
            self.b.iadd(base, j)
        }
    }

    /// Records the tangent lanes of the primal value `v`, naming them after it.
    fn set_tangent(&mut self, v: Value, lanes: SmallVec<[Value; 4]>) {
        if let Some(n) = self.primal.values[v].name.as_deref() {
            for (j, &t) in lanes.iter().enumerate() {
                if !matches!(
                    self.b.func().value_def(t),
                    ValueDef::Const(_) | ValueDef::Param(_)
                ) && self.b.func().values[t].name.is_none()
                {
                    self.b.named(&lane_name(n, j, self.width), t);
                }
            }
        }
        self.tan[v] = Some(lanes);
    }

    /// Writes the copy of block `b`: its phis and their tangent phis, its
    /// statements each followed by its tangent statements, its terminator.
    fn block(&mut self, b: Block, ret: DualRet) {
        let primal = self.primal;
        let nb = self.block_of(b);
        self.b.switch_to(nb);
        for phi in &primal.blocks[b].phis {
            let ty = primal.value_type(phi.value);
            let v = self.b.phi(ty, &[]);
            if let Some(n) = primal.values[phi.value].name.as_deref() {
                self.b.named(n, v);
            }
            self.vmap[phi.value] = Some(v);
            if self.handles.contains(phi.value) {
                let t = self.b.phi(Type::I64, &[]);
                self.thandle[phi.value] = Some(t);
            }
            if ty.is_float() && self.act.is_active(phi.value, primal) {
                let lanes = (0..self.width).map(|_| self.b.phi(ty, &[])).collect();
                self.set_tangent(phi.value, lanes);
            }
        }
        for &inst in &primal.blocks[b].insts {
            let pos = primal.srcmap.insts.get(inst).copied().unwrap_or(Pos::NONE);
            self.b.set_pos(pos);
            self.inst(inst);
        }
        let pos = primal.srcmap.terms.get(b).copied().unwrap_or(Pos::NONE);
        self.b.set_pos(pos);
        match primal.blocks[b]
            .term
            .as_ref()
            .expect("verified blocks have terminators")
        {
            Terminator::Jump(d) => {
                let d = self.block_of(*d);
                self.b.jump(d);
            }
            Terminator::Br {
                cond,
                then_dest,
                else_dest,
            } => {
                let c = self.get(*cond);
                let (t, e) = (self.block_of(*then_dest), self.block_of(*else_dest));
                self.b.br(c, t, e);
            }
            Terminator::Ret(vals) => {
                let mut out: SmallVec<[Value; 4]> = SmallVec::new();
                if ret != DualRet::DualOnly {
                    for &v in vals {
                        let nv = self.get(v);
                        out.push(nv);
                    }
                }
                if ret != DualRet::Const {
                    for &v in vals {
                        let ty = primal.value_type(v);
                        if ty.is_float() {
                            for j in 0..self.width {
                                let t = self.tangent_or_zero(v, j, ty);
                                out.push(t);
                            }
                        }
                    }
                }
                self.b.ret(&out);
            }
        }
    }

    /// Adds the edges of every phi and tangent phi, once every value exists.
    fn phi_edges(&mut self, reachable: &EntitySet<Block>) {
        let primal = self.primal;
        for &b in primal.layout.iter().filter(|&&b| reachable.contains(b)) {
            for phi in &primal.blocks[b].phis {
                let nphi = self.vmap[phi.value].expect("phis are mapped");
                let ty = primal.value_type(phi.value);
                for &(p, v) in &phi.incoming {
                    if !reachable.contains(p) {
                        continue;
                    }
                    let np = self.block_of(p);
                    let nv = self.get(v);
                    self.b.add_incoming(nphi, np, nv);
                    if let Some(tphi) = self.thandle[phi.value] {
                        let t = self.tangent_handle(v);
                        self.b.add_incoming(tphi, np, t);
                    }
                    if let Some(lanes) = self.tan[phi.value].clone() {
                        for (j, &tphi) in lanes.iter().enumerate() {
                            let t = self.tangent_or_zero(v, j, ty);
                            self.b.add_incoming(tphi, np, t);
                        }
                    }
                }
            }
        }
    }

    /// Copies `inst` and writes its tangent statements after it.
    fn inst(&mut self, inst: Inst) {
        let primal = self.primal;
        let d = &primal.insts[inst];
        if d.opcode == Opcode::Call {
            self.call(inst);
            return;
        }
        if d.opcode == Opcode::Pop {
            self.pop(inst);
            return;
        }
        let args: SmallVec<[Value; 3]> = d.args.iter().map(|&a| self.get(a)).collect();
        if let (Opcode::TrapIf, Imm::Msg(m)) = (d.opcode, d.imm) {
            // The message is the primal function's: made again in the derived one.
            self.b.trap_if(args[0], primal.message(m).unwrap_or(""));
            return;
        }
        let ni = self.b.ins(d.opcode, d.imm, &args);
        let results: SmallVec<[Value; 2]> = self.b.results(ni).iter().copied().collect();
        for (&r, &nr) in d.results.iter().zip(&results) {
            self.vmap[r] = Some(nr);
            if let Some(n) = primal.values[r].name.as_deref() {
                self.b.named(n, nr);
            }
        }
        let act = self.act;
        let active = |r: Option<&Value>| r.is_some_and(|&r| act.is_active(r, primal));
        match d.opcode {
            Opcode::Load => {
                if !active(d.results.first()) {
                    return;
                }
                let (s, y) = (d.args[0], d.results[0]);
                let Some(ts) = self.tslice[s] else {
                    self.missing
                        .get_or_insert_with(|| format!("the tangent slice of {s}"));
                    return;
                };
                let lanes = (0..self.width)
                    .map(|j| {
                        let k = self.lane_index(args[1], j);
                        self.b.load(ts, k)
                    })
                    .collect();
                self.set_tangent(y, lanes);
            }
            Opcode::Store => {
                let (s, v) = (d.args[0], d.args[2]);
                let Some(ts) = self.tslice[s] else { return };
                let ty = primal.value_type(v);
                for j in 0..self.width {
                    let k = self.lane_index(args[1], j);
                    let t = self.tangent_or_zero(v, j, ty);
                    self.b.store(ts, k, t);
                }
            }
            Opcode::Alloc => {
                let a = d.results[0];
                if !self.act.has_shadow(a, primal) {
                    return;
                }
                let n = if self.width == 1 {
                    args[0]
                } else {
                    let w = self.b.iconst(self.width as i64);
                    self.b.imul(args[0], w)
                };
                let ti = self.b.ins(Opcode::Alloc, d.imm, &[n]);
                self.lane_allocs.push(ti);
                let t = self.b.results(ti)[0];
                if let Some(name) = primal.values[a].name.as_deref() {
                    self.b.named(&format!("d{name}"), t);
                }
                self.tslice[a] = Some(t);
            }
            Opcode::Push => {
                let v = d.args[0];
                let ty = primal.value_type(v);
                if ty.is_float() {
                    for j in 0..self.width {
                        let t = self.tangent_or_zero(v, j, ty);
                        self.b.push(t);
                    }
                } else if self.handles.contains(v) {
                    let t = self.tangent_handle(v);
                    self.b.push(t);
                }
            }
            Opcode::TapeAlloc => {
                let h = d.results[0];
                if !self.handles.contains(h) {
                    return;
                }
                let n = if self.width == 1 {
                    args[0]
                } else {
                    let w = self.b.iconst(self.width as i64);
                    self.b.imul(args[0], w)
                };
                let ti = self.b.ins(Opcode::TapeAlloc, d.imm, &[n]);
                let t = self.b.results(ti)[0];
                if let Some(name) = primal.values[h].name.as_deref() {
                    self.b.named(&format!("d{name}"), t);
                }
                self.thandle[h] = Some(t);
            }
            Opcode::TapeView => {
                let (h, s) = (d.args[0], d.results[0]);
                if !self.handles.contains(h) {
                    return;
                }
                let th = self.tangent_handle(h);
                let ti = self.b.ins(Opcode::TapeView, d.imm, &[th]);
                let t = self.b.results(ti)[0];
                if let Some(name) = primal.values[s].name.as_deref() {
                    self.b.named(&format!("d{name}"), t);
                }
                self.tslice[s] = Some(t);
            }
            Opcode::Cast => {
                if !active(d.results.first()) {
                    return;
                }
                let (x, y) = (d.args[0], d.results[0]);
                let (from, to) = (primal.value_type(x), primal.value_type(y));
                let lanes = (0..self.width)
                    .map(|j| {
                        let t = self.tangent_or_zero(x, j, from);
                        if from == to { t } else { self.b.cast(to, t) }
                    })
                    .collect();
                self.set_tangent(y, lanes);
            }
            op => {
                let OpRule::Float(rule) = op_rule(op) else {
                    return;
                };
                if !active(d.results.first()) {
                    return;
                }
                let y = d.results[0];
                let ny = results[0];
                let ty = primal.value_type(y);
                let argvals: SmallVec<[ArgVal; 3]> = d
                    .args
                    .iter()
                    .zip(&args)
                    .map(|(&a, &na)| match primal.value_def(a) {
                        ValueDef::Const(c) => ArgVal::Const(c),
                        _ => ArgVal::Saved(na),
                    })
                    .collect();
                let arg_types: SmallVec<[Type; 3]> =
                    d.args.iter().map(|&a| primal.value_type(a)).collect();
                let mut lanes: SmallVec<[Value; 4]> = SmallVec::new();
                for j in 0..self.width {
                    let mut acc: Option<Value> = None;
                    let mut first: Option<(Value, Value)> = None;
                    for (k, &a) in d.args.iter().enumerate() {
                        if rule.operands.get(k).is_none_or(|o| o.is_none()) {
                            continue;
                        }
                        let Some(t) = self.tangent(a, j) else {
                            continue;
                        };
                        // A tangent known to be zero contributes nothing (every rule
                        // is linear in it; reverse mode's symbolic zeros alike), and
                        // two `f32` zero literals in one op would not verify.
                        if is_zero_literal(self.b.func(), t) {
                            continue;
                        }
                        // `fmul %x, %x` and `fadd %x, %x`: both operands contribute
                        // the same value (`dx·x`, `dx`), written once.
                        let c = match first {
                            Some((a0, c0))
                                if a0 == a && matches!(op, Opcode::Fmul | Opcode::Fadd) =>
                            {
                                Some(c0)
                            }
                            _ => {
                                let mut cx =
                                    RevCtx::new(&mut self.b, &argvals, &arg_types, Some(ny), ty, t);
                                let c = rule.emit(&mut cx, k);
                                if let Some(m) = cx.missing.take() {
                                    self.missing.get_or_insert(m);
                                }
                                c
                            }
                        };
                        if let (0, Some(c)) = (k, c) {
                            first = Some((a, c));
                        }
                        if let Some(c) = c {
                            acc = Some(match acc {
                                None => c,
                                // `s + -g` is `s - g` exactly, as in the pullback.
                                Some(s) => match negated(self.b.func(), c) {
                                    Some(g) => self.b.fsub(s, g),
                                    None => self.b.fadd(s, c),
                                },
                            });
                        }
                    }
                    let t = match acc {
                        Some(t) => t,
                        None => self.zero(ty),
                    };
                    lanes.push(t);
                }
                self.set_tangent(y, lanes);
            }
        }
    }

    /// The handle of the tangent buffer of the float tape buffer handle `h`.
    fn tangent_handle(&mut self, h: Value) -> Value {
        match self.thandle[h] {
            Some(t) => t,
            None => {
                self.missing
                    .get_or_insert_with(|| format!("the tangent handle of {h}"));
                self.b.iconst(0)
            }
        }
    }

    /// `pop`: what the forward rule of the pass that pushed put on the tape, last
    /// first. A float was pushed with its N lanes after it, so the lanes come off
    /// first (lane N-1 first), then the value; a float buffer's handle was pushed
    /// with its tangent buffer's handle after it.
    fn pop(&mut self, inst: Inst) {
        let primal = self.primal;
        let d = &primal.insts[inst];
        let r = d.results[0];
        let ty = primal.value_type(r);
        let mut lanes: SmallVec<[Value; 4]> = SmallVec::new();
        let mut th = None;
        if ty.is_float() {
            for _ in 0..self.width {
                lanes.push(self.b.pop(ty));
            }
            lanes.reverse();
        } else if self.handles.contains(r) {
            th = Some(self.b.pop(ty));
        }
        let v = self.b.pop(ty);
        if let Some(n) = primal.values[r].name.as_deref() {
            self.b.named(n, v);
            if let Some(t) = th {
                self.b.named(&format!("d{n}"), t);
            }
        }
        self.vmap[r] = Some(v);
        self.thandle[r] = th;
        if ty.is_float() && self.act.is_active(r, primal) {
            self.set_tangent(r, lanes);
        }
    }

    /// Writes a call as its [`CallPlan`] says.
    fn call(&mut self, inst: Inst) {
        let primal = self.primal;
        let d = &primal.insts[inst];
        let Imm::Func(g) = d.imm else { return };
        let args: SmallVec<[Value; 4]> = d.args.iter().map(|&a| self.get(a)).collect();
        let plan = self.calls.get(&inst).cloned().unwrap_or(CallPlan::Plain);
        let copy = |pass: &mut Self| {
            let results = pass.b.call(g, &args);
            for (&r, &nr) in d.results.iter().zip(&results) {
                pass.vmap[r] = Some(nr);
                if let Some(n) = primal.values[r].name.as_deref() {
                    pass.b.named(n, nr);
                }
            }
        };
        match plan {
            CallPlan::Plain => copy(self),
            CallPlan::Jvp { rule } if d.args.iter().any(|&a| primal.value_type(a).is_slice()) => {
                // Over slices (width 1): the rule runs first, on the contents the
                // call is given, with a tangent slice per float slice (a zero
                // scratch one where the argument has none) that it updates for a
                // `mut` one; then the call.
                let mut rargs: SmallVec<[Value; 8]> = args.iter().copied().collect();
                for (k, &a) in d.args.iter().enumerate() {
                    let ty = primal.value_type(a);
                    if !ty.is_differentiable() {
                        continue;
                    }
                    let t = match (ty.elem(), self.tslice[a]) {
                        (None, _) => self.tangent_or_zero(a, 0, ty),
                        (Some(_), Some(t)) => t,
                        (Some(elem), None) => {
                            let n = self.b.len(args[k]);
                            self.b.alloc(elem, n)
                        }
                    };
                    rargs.push(t);
                }
                let ts = self.b.call(rule, &rargs);
                copy(self);
                let floats = d
                    .results
                    .iter()
                    .filter(|&&r| primal.value_type(r).is_float());
                for (&r, &t) in floats.zip(&ts) {
                    if self.act.is_active(r, primal) {
                        self.set_tangent(r, smallvec::smallvec![t]);
                    }
                }
            }
            CallPlan::Jvp { rule } => {
                copy(self);
                let floats: SmallVec<[usize; 2]> = (0..d.results.len())
                    .filter(|&k| primal.value_type(d.results[k]).is_float())
                    .collect();
                let mut per_result: Vec<SmallVec<[Value; 4]>> = vec![SmallVec::new(); floats.len()];
                for j in 0..self.width {
                    let mut rargs: SmallVec<[Value; 8]> = args.iter().copied().collect();
                    for &a in &d.args {
                        let ty = primal.value_type(a);
                        if ty.is_float() {
                            let t = self.tangent_or_zero(a, j, ty);
                            rargs.push(t);
                        }
                    }
                    let ts = self.b.call(rule, &rargs);
                    for (slot, &t) in per_result.iter_mut().zip(&ts) {
                        slot.push(t);
                    }
                }
                for (&k, lanes) in floats.iter().zip(per_result) {
                    let r = d.results[k];
                    if self.act.is_active(r, primal) {
                        self.set_tangent(r, lanes);
                    }
                }
            }
            CallPlan::Derived {
                rule,
                params,
                ret,
                overlay,
            } => {
                if overlay {
                    copy(self);
                }
                let mut rargs: SmallVec<[Value; 8]> = SmallVec::new();
                for (k, &a) in d.args.iter().enumerate() {
                    rargs.push(args[k]);
                    if params[k] != DualActivity::Dual {
                        continue;
                    }
                    let ty = primal.value_type(a);
                    if ty.is_slice() {
                        match self.tslice[a] {
                            Some(t) => rargs.push(t),
                            None => {
                                self.missing
                                    .get_or_insert_with(|| format!("the tangent slice of {a}"));
                            }
                        }
                    } else {
                        for j in 0..self.width {
                            let t = self.tangent_or_zero(a, j, ty);
                            rargs.push(t);
                        }
                    }
                }
                let results = self.b.call(rule, &rargs);
                let mut at = 0;
                if ret != DualRet::DualOnly {
                    for (&r, &nr) in d.results.iter().zip(&results) {
                        self.vmap[r] = Some(nr);
                        if let Some(n) = primal.values[r].name.as_deref() {
                            self.b.named(n, nr);
                        }
                    }
                    at = d.results.len();
                }
                if ret == DualRet::Const {
                    return;
                }
                for &r in &d.results {
                    if !primal.value_type(r).is_float() {
                        continue;
                    }
                    let lanes: SmallVec<[Value; 4]> =
                        results[at..at + self.width].iter().copied().collect();
                    at += self.width;
                    if self.act.is_active(r, primal) {
                        self.set_tangent(r, lanes);
                    }
                }
            }
        }
    }
}

/// The name of lane `j` of the tangent of `%name`: `dname`, or `dname.j` when
/// there are several lanes.
fn lane_name(name: &str, j: usize, width: usize) -> String {
    if width == 1 {
        format!("d{name}")
    } else {
        format!("d{name}.{j}")
    }
}

/// The name of the derived function: `f.jvp` for the default configuration,
/// `f.jvp.PATTERN` otherwise, with `.wN` for a width N above 1; a name the module
/// already has gets `.2`, `.3`, ...; a primal named by digits only gets a `_` in
/// front.
fn derived_name(module: &Module, fname: &str, sig: &Signature, config: &FruleConfig) -> String {
    let default = FruleConfig::default_for(sig);
    let mut suffix = if config.params == default.params && config.ret == DualRet::Dual {
        String::new()
    } else {
        format!(".{}", config.pattern())
    };
    if config.width > 1 {
        suffix.push_str(&format!(".w{}", config.width));
    }
    let stem = if fname.starts_with(|c: char| c.is_ascii_digit()) {
        format!("_{fname}")
    } else {
        fname.to_string()
    };
    let base = format!("{stem}.jvp{suffix}");
    if module.func_by_name(&base).is_none() {
        return base;
    }
    (2..)
        .map(|n| format!("{base}.{n}"))
        .find(|n| module.func_by_name(n).is_none())
        .unwrap_or(base)
}

/// The `i64` values of `func` that are handles of float tape buffers: the results
/// of a float `tape_alloc`, the operands of a float `tape_view`, and the phis that
/// carry either (both ways). In derived code a handle goes onto the tape right
/// after its buffer is made and comes off right before its buffer is viewed, so
/// the forward rule of the pass that pushes and the one of the pass that pops agree
/// on which pushed `i64`s are handles.
fn float_handles(func: &Function, reachable: &EntitySet<Block>) -> EntitySet<Value> {
    let float_imm = |imm: Imm| matches!(imm, Imm::Type(t) if t.is_float());
    let mut set = EntitySet::new();
    let mut work = Vec::new();
    for (b, inst) in func.placed_insts() {
        if !reachable.contains(b) {
            continue;
        }
        let d = &func.insts[inst];
        match d.opcode {
            Opcode::TapeAlloc if float_imm(d.imm) => work.push(d.results[0]),
            Opcode::TapeView if float_imm(d.imm) => work.push(d.args[0]),
            _ => {}
        }
    }
    // Phi edges, both ways.
    let mut edges: HashMap<Value, SmallVec<[Value; 2]>> = HashMap::new();
    for &b in func.layout.iter().filter(|&&b| reachable.contains(b)) {
        for phi in &func.blocks[b].phis {
            if func.value_type(phi.value) == Type::I64 {
                for &(_, v) in &phi.incoming {
                    edges.entry(phi.value).or_default().push(v);
                    edges.entry(v).or_default().push(phi.value);
                }
            }
        }
    }
    while let Some(v) = work.pop() {
        if matches!(func.value_def(v), ValueDef::Const(_)) || !set.insert(v) {
            continue;
        }
        if let Some(next) = edges.get(&v) {
            work.extend(next.iter().copied());
        }
    }
    set
}

/// The functions of `module` that push or pop (derived code), themselves or through
/// the functions they call.
fn tape_funcs(module: &Module) -> HashSet<FuncId> {
    let mut set = HashSet::new();
    let mut callers: HashMap<FuncId, Vec<FuncId>> = HashMap::new();
    let mut work = Vec::new();
    for (id, f) in module.defined() {
        for (_, inst) in f.placed_insts() {
            let d = &f.insts[inst];
            match d.opcode {
                Opcode::Push | Opcode::Pop | Opcode::TapeAlloc | Opcode::TapeView => work.push(id),
                Opcode::Call => {
                    if let Imm::Func(g) = d.imm {
                        callers.entry(g).or_default().push(id);
                    }
                }
                _ => {}
            }
        }
    }
    while let Some(f) = work.pop() {
        if set.insert(f)
            && let Some(cs) = callers.get(&f)
        {
            work.extend(cs.iter().copied());
        }
    }
    set
}

/// Whether `v` is the literal `+0.0` (`f64` or `f32`): a tangent known to be zero.
fn is_zero_literal(func: &Function, v: Value) -> bool {
    match func.value_def(v) {
        ValueDef::Const(gradlift_ir::Scalar::F64(x)) => x.to_bits() == 0,
        ValueDef::Const(gradlift_ir::Scalar::F32(x)) => x.to_bits() == 0,
        _ => false,
    }
}
