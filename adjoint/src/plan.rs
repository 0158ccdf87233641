//! The shape of a rule, decided before any code is written: which blocks get reverse
//! code, how the pullback finds its way back ([`BlockStack`]), what each block saves
//! ([`SavedValues`]), and the reverse of every statement ([`Plan`]).
//!
//! A block gets reverse code when it is *live*: reachable from the entry, and able to
//! reach a `ret`. Unreachable blocks are left out of both derived functions (their
//! phi edges too); a block from which no `ret` is reachable is in the forward pass,
//! without tape ops (a run through it never returns, so no pullback follows it). The
//! predecessors of a live block are live, so the reverse only ever moves between
//! live blocks.

use cranelift_entity::{EntitySet, SecondaryMap};
use gradlift_ir::flowgraph::ControlFlowGraph;
use gradlift_ir::function::Pos;
use gradlift_ir::write::{self, Names};
use gradlift_ir::{
    Block, FuncId, Function, Imm, Inst, Module, Opcode, Terminator, Type, Value, ValueDef,
};
use hashbrown::{HashMap, HashSet};
use smallvec::SmallVec;

use crate::activity::ActivityInfo;
use crate::callee::Callee;
use crate::config::{Activity, RetActivity, RuleConfig, freezable};
use crate::error::AdError;
use crate::liveness::{CotangentLiveness, Inputs};
use crate::stmt::{CallRule, InstInfo, RevPhi, RevStmt, SaveItem, inst_stmt, phi_stmt, ret_stmt};
use crate::tape::{TapeInputs, TapePlan};

/// Where control came from, recorded by the forward pass and replayed backwards by
/// the pullback (Mooncake's block stack, `__push_blk_stack!` and
/// `make_switch_stmts`).
///
/// A live block with several predecessors starts, after its phis, with
/// `%from = phi i64 [P1: 1, P2: 2, ...]` (numbered in the order of
/// [`BlockStack::preds`]) and `push %from`; its reverse pops the number and branches
/// to the reverse of that predecessor. A block with one predecessor records nothing
/// (Mooncake's unique-predecessor shortcut): its reverse jumps straight back. When
/// several live blocks end in `ret`, each pushes its number (its position in
/// [`BlockStack::rets`], from 1) just before the `ret`, and the pullback's entry pops
/// it to find where to start.
#[derive(Clone, Debug, Default)]
pub(crate) struct BlockStack {
    preds: SecondaryMap<Block, SmallVec<[Block; 2]>>,
    rets: Vec<Block>,
}

impl BlockStack {
    /// The predecessors of a live block that are reachable, in the order of the
    /// control-flow graph (`br %c, b, b` counts once).
    pub(crate) fn preds(&self, b: Block) -> &[Block] {
        &self.preds[b]
    }

    /// Whether the forward pass records which predecessor it came to `b` from.
    pub(crate) fn records_pred(&self, b: Block) -> bool {
        self.preds[b].len() > 1
    }

    /// The live blocks ending in `ret`, in layout order.
    pub(crate) fn rets(&self) -> &[Block] {
        &self.rets
    }

    /// Whether the forward pass records which `ret` it left by.
    pub(crate) fn records_ret(&self) -> bool {
        self.rets.len() > 1
    }

    /// The number `b` is pushed as when it returns (from 1).
    pub(crate) fn ret_number(&self, b: Block) -> Option<i64> {
        self.rets.iter().position(|&r| r == b).map(|i| i as i64 + 1)
    }
}

/// The values each block saves for its reverse (Mooncake's per-block communication
/// channels, `create_comms_insts!`).
///
/// At the end of a live block `C`, before its terminator, the forward pass pushes
/// everything the reverse of `C`'s statements reads ([`SaveItem`]s: scalar values,
/// wherever they are defined, and the handles of local buffers kept on the tape),
/// each once, in this order; the reverse block pops them first, last first.
/// Constants are never saved: the pullback writes them itself. This lists
/// everything the reverse reads; under [`TapePolicy::Minimal`](crate::TapePolicy)
/// the [tape plan](crate::tape) pushes only what the pullback cannot have otherwise.
#[derive(Clone, Debug, Default)]
pub(crate) struct SavedValues {
    per_block: SecondaryMap<Block, Vec<SaveItem>>,
}

impl SavedValues {
    /// What `b` saves, in push order.
    pub(crate) fn of(&self, b: Block) -> &[SaveItem] {
        &self.per_block[b]
    }
}

/// Derives (or finds) the rule of a callee for an activity pattern, checkpointed
/// or not: the forward pass and the pullback, declared in the output module.
/// Besides the pair, the arguments whose cotangents the pullback takes and
/// returns ([`CallRule::Derived::inout`]).
pub(crate) type Requester<'r> =
    dyn FnMut(FuncId, RuleConfig, Want) -> Result<(FuncId, FuncId, Vec<usize>), AdError> + 'r;

/// What a [`Requester`] is asked for.
#[derive(Clone, Debug)]
pub(crate) enum Want {
    /// The callee's rule (of a checkpointed call when `checkpoint`).
    Rule {
        /// `call ... checkpoint`.
        checkpoint: bool,
    },
    /// A rule that fails with this message when it runs: the callee cannot be
    /// derived, and the call fails only if it is reached (lazy derivation).
    Failing(AdError),
}

/// Everything decided about a rule before code is written.
#[derive(Clone, Debug)]
pub(crate) struct Plan {
    /// Blocks reachable from the entry.
    pub(crate) reachable: EntitySet<Block>,
    /// Reachable blocks that can reach a `ret`: the ones with reverse code.
    pub(crate) live: EntitySet<Block>,
    /// The block stack.
    pub(crate) stack: BlockStack,
    /// Which values are active.
    pub(crate) activity: ActivityInfo,
    /// Per block, the reverse of each statement that has one, in block order.
    pub(crate) insts: SecondaryMap<Block, Vec<RevStmt>>,
    /// Per block, the reverse of each active phi.
    pub(crate) phis: SecondaryMap<Block, Vec<RevPhi>>,
    /// Per `ret` block, the seeds: (returned value, pullback parameter).
    pub(crate) seeds: SecondaryMap<Block, Vec<(Value, usize)>>,
    /// The calls whose derivative is taken, and how.
    pub(crate) calls: HashMap<Inst, CallRule>,
    /// `alloc`s whose buffer the forward pass keeps on the tape (`tape_alloc` and
    /// `tape_view`), because the pullback needs it.
    pub(crate) tape_bufs: EntitySet<Value>,
    /// `alloc`s with a shadow buffer (a `tape_alloc` of the same length).
    pub(crate) shadow_bufs: EntitySet<Value>,
    /// No derivative flows: the forward pass saves nothing and the pullback returns
    /// zeros.
    pub(crate) trivial: bool,
    /// Where each block's reverse may reset cotangents to zero on entry.
    pub(crate) liveness: CotangentLiveness,
    /// What is pushed, and how the pullback has the rest (the tape policy).
    pub(crate) tape: TapePlan,
}

impl Plan {
    /// Plans the rule of `func` (named `fname` in `module`) under `config`, already
    /// checked against the signature, whose result types are `results`; the
    /// pullback takes the parameters `slice_params` as slices. Callees' rules come
    /// from `request`.
    ///
    /// The steps: which blocks are reachable and live; which values are active (and
    /// the refusal of `const` slices written with active values); which pullback
    /// parameter seeds each result ([`seeded_results`]); each block's block-stack
    /// entry, saves and statement reverses ([`BlockPlans`], Mooncake's
    /// `create_comms_insts!` and `make_ad_stmts!`); where cotangents are known zero
    /// ([`CotangentLiveness`]); and the tape policy ([`TapePlan`]).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        module: &Module,
        fname: &str,
        func: &Function,
        results: &[Type],
        config: &RuleConfig,
        slice_params: &[usize],
        summaries: &crate::activity::Summaries,
        request: &mut Requester<'_>,
    ) -> Result<Plan, AdError> {
        let cfg = ControlFlowGraph::new(func);
        let mut reachable = EntitySet::new();
        for &b in cfg.reverse_postorder() {
            reachable.insert(b);
        }
        let live = co_reachable(func, &cfg, &reachable);
        let activity = ActivityInfo::analyse_with(module, func, &reachable, config, summaries);
        check_const_writes(module, fname, func, &reachable, &activity)?;
        let seeded = seeded_results(results, config);
        let mut blocks = BlockPlans {
            shadow_bufs: shadow_bufs(func, &reachable, &activity),
            ..BlockPlans::default()
        };
        let mut cx = BlockCx {
            module,
            fname,
            func,
            activity: &activity,
            config,
            seeded: &seeded,
            summaries,
            request,
        };
        for &b in func.layout.iter().filter(|&&b| reachable.contains(b)) {
            let preds: SmallVec<[Block; 2]> = cfg
                .preds(b)
                .iter()
                .copied()
                .filter(|&p| reachable.contains(p))
                .collect();
            blocks.plan_block(&mut cx, b, preds, live.contains(b))?;
        }
        let (liveness, trivial) = blocks.liveness(func, &activity, &live, config);
        let stack = &blocks.stack;
        let tape = TapePlan::new(&TapeInputs {
            func,
            cfg: &cfg,
            reachable: &reachable,
            live: &live,
            preds: &|b| stack.preds(b),
            saved: &|b| blocks.saved.of(b),
            config,
            slice_params,
        });
        Ok(Plan {
            reachable,
            live,
            stack: blocks.stack,
            activity,
            insts: blocks.insts,
            phis: blocks.phis,
            seeds: blocks.seeds,
            calls: blocks.calls,
            tape_bufs: blocks.tape_bufs,
            shadow_bufs: blocks.shadow_bufs,
            trivial,
            liveness,
            tape,
        })
    }
}

/// For each result of a function with result types `results`, the pullback
/// parameter carrying its cotangent: the float results of an active return, in
/// order.
fn seeded_results(results: &[Type], config: &RuleConfig) -> Vec<Option<usize>> {
    let mut seeded = Vec::with_capacity(results.len());
    let mut n = 0;
    for (j, &t) in results.iter().enumerate() {
        if t.is_float() && config.is_seeded(j) {
            seeded.push(Some(n));
            n += 1;
        } else {
            seeded.push(None);
        }
    }
    seeded
}

/// The reachable `alloc`s whose buffers have a shadow.
fn shadow_bufs(
    func: &Function,
    reachable: &EntitySet<Block>,
    activity: &ActivityInfo,
) -> EntitySet<Value> {
    let mut shadow_bufs = EntitySet::new();
    for &b in func.layout.iter().filter(|&&b| reachable.contains(b)) {
        for &inst in &func.blocks[b].insts {
            let d = &func.insts[inst];
            if d.opcode == Opcode::Alloc && activity.has_shadow(d.results[0], func) {
                shadow_bufs.insert(d.results[0]);
            }
        }
    }
    shadow_bufs
}

/// What planning a block reads: the function, its activity, the request and the
/// way to callees' rules.
struct BlockCx<'a, 'r> {
    module: &'a Module,
    fname: &'a str,
    func: &'a Function,
    activity: &'a ActivityInfo,
    config: &'a RuleConfig,
    seeded: &'a [Option<usize>],
    summaries: &'a crate::activity::Summaries,
    request: &'a mut Requester<'r>,
}

/// The per-block parts of a [`Plan`], filled block by block in layout order.
///
/// Invariant: after [`plan_block`](Self::plan_block) ran for a reachable block,
/// its predecessors are in the block stack and its saves are final; a block that
/// is not live has no statement reverses, phi reverses or seeds.
#[derive(Default)]
struct BlockPlans {
    stack: BlockStack,
    saved: SavedValues,
    insts: SecondaryMap<Block, Vec<RevStmt>>,
    phis: SecondaryMap<Block, Vec<RevPhi>>,
    seeds: SecondaryMap<Block, Vec<(Value, usize)>>,
    calls: HashMap<Inst, CallRule>,
    tape_bufs: EntitySet<Value>,
    shadow_bufs: EntitySet<Value>,
}

impl BlockPlans {
    /// Plans the reachable block `b`, whose reachable predecessors are `preds`
    /// (`live`: whether it can reach a `ret`): the reverse of its active phis, its
    /// predecessors in the block stack, the reverse and the saves of each
    /// statement (requesting callees' rules), and its seeds when it returns.
    fn plan_block(
        &mut self,
        cx: &mut BlockCx<'_, '_>,
        b: Block,
        preds: SmallVec<[Block; 2]>,
        live: bool,
    ) -> Result<(), AdError> {
        let (func, activity) = (cx.func, cx.activity);
        let data = &func.blocks[b];
        if live {
            for phi in &data.phis {
                if let Some(rev) = phi_stmt(func, activity, b, phi.value, &preds) {
                    self.phis[b].push(rev);
                }
            }
        }
        self.stack.preds[b] = preds;
        let mut block_saves = Vec::new();
        let mut seen = HashSet::new();
        for &inst in &data.insts {
            let info = if !live {
                // A block that never returns is followed by no pullback: its
                // calls stay plain calls.
                continue;
            } else if func.insts[inst].opcode == Opcode::Call {
                let (info, rule) = call_stmt(
                    cx.module,
                    cx.fname,
                    func,
                    activity,
                    inst,
                    cx.config,
                    cx.summaries,
                    cx.request,
                )?;
                if let Some(rule) = rule {
                    self.calls.insert(inst, rule);
                }
                info
            } else {
                inst_stmt(func, activity, inst)
            };
            for item in info.saves {
                if let SaveItem::Buf(a) = item {
                    self.tape_bufs.insert(a);
                }
                if seen.insert(item) {
                    block_saves.push(item);
                }
            }
            self.insts[b].extend(info.reverse);
        }
        self.saved.per_block[b] = block_saves;
        if live && let Some(Terminator::Ret(vals)) = &data.term {
            self.stack.rets.push(b);
            self.seeds[b] = ret_stmt(func, activity, vals, cx.seeded);
        }
        Ok(())
    }

    /// Where the reverse blocks may reset cotangents to zero, and whether the rule
    /// is trivial (no live block has anything to reverse or seed).
    fn liveness(
        &self,
        func: &Function,
        activity: &ActivityInfo,
        live: &EntitySet<Block>,
        config: &RuleConfig,
    ) -> (CotangentLiveness, bool) {
        let live_order: Vec<Block> = func
            .layout
            .iter()
            .copied()
            .filter(|&b| live.contains(b))
            .collect();
        let params: Vec<Value> = func
            .params
            .iter()
            .zip(&config.params)
            .filter(|&(&p, &a)| a == Activity::Active && activity.is_active(p, func))
            .map(|(&p, _)| p)
            .collect();
        let trivial = live_order.iter().all(|&b| {
            self.insts[b].is_empty() && self.phis[b].is_empty() && self.seeds[b].is_empty()
        });
        let liveness = CotangentLiveness::new(&Inputs {
            func,
            activity,
            live: &live_order,
            stack: &self.stack,
            insts: &self.insts,
            phis: &self.phis,
            seeds: &self.seeds,
            params: &params,
        });
        (liveness, trivial)
    }
}

/// `` `%y = call @g(%x)` (3:5) ``: an instruction as an error message shows it.
pub(crate) fn describe_inst(module: &Module, func: &Function, inst: Inst) -> String {
    let names = Names::new(func);
    let line = write::inst_line(module, func, &names, inst);
    let pos = func.srcmap.insts.get(inst).copied().unwrap_or(Pos::NONE);
    if pos.is_known() {
        format!("`{}` at {pos}", line.trim())
    } else {
        format!("`{}`", line.trim())
    }
}

/// Refuses a `const` slice parameter into which varied values are written and that
/// is read back (a `load` from it, or a call it is passed to): the derivative
/// through it would be silently lost.
pub(crate) fn check_const_writes(
    module: &Module,
    fname: &str,
    func: &Function,
    reachable: &EntitySet<Block>,
    activity: &ActivityInfo,
) -> Result<(), AdError> {
    for &(s, inst) in activity.const_writes() {
        let read_back = func
            .layout
            .iter()
            .filter(|&&b| reachable.contains(b))
            .flat_map(|&b| func.blocks[b].insts.iter())
            .any(|&i| {
                let d = &func.insts[i];
                match d.opcode {
                    Opcode::Load => d.args[0] == s,
                    Opcode::Call => i != inst && d.args.contains(&s),
                    _ => false,
                }
            });
        if read_back {
            let names = Names::new(func);
            return Err(AdError::ConstWrite {
                func: fname.to_string(),
                slice: names.value(s).to_string(),
                at: describe_inst(module, func, inst),
            });
        }
    }
    Ok(())
}

/// A call: whether its derivative is taken and how, what it saves, its reverse.
#[allow(clippy::too_many_arguments)]
fn call_stmt(
    module: &Module,
    fname: &str,
    func: &Function,
    act: &ActivityInfo,
    inst: Inst,
    config: &RuleConfig,
    summaries: &crate::activity::Summaries,
    request: &mut Requester<'_>,
) -> Result<(InstInfo, Option<CallRule>), AdError> {
    let d = &func.insts[inst];
    let Imm::Func(g) = d.imm else {
        return Ok((InstInfo::default(), None));
    };
    let (params, ret) = call_activities(func, act, inst);
    let any_active = params.contains(&Activity::Active);
    let any_dup = params.contains(&Activity::Dup);
    if !(any_dup || (any_active && ret == RetActivity::Active)) {
        return Ok((InstInfo::default(), None));
    }
    let callee = Callee::of(module, g);
    let mut info = InstInfo::default();
    let rule = match callee {
        Callee::Nodiff => return Ok((InstInfo::default(), None)),
        Callee::Vjp(rule) => {
            if ret == RetActivity::Const {
                return Ok((InstInfo::default(), None));
            }
            for &a in &d.args {
                if !matches!(func.value_def(a), ValueDef::Const(_)) {
                    let item = SaveItem::Value(a);
                    if !info.saves.contains(&item) {
                        info.saves.push(item);
                    }
                }
            }
            CallRule::Vjp { rule }
        }
        Callee::Body(_) | Callee::Overlay(_) | Callee::Custom(_) => {
            let target = match callee {
                Callee::Overlay(h) => h,
                _ => g,
            };
            let overlay = matches!(callee, Callee::Overlay(_));
            if overlay && module.sig(g).params.iter().any(|t| t.is_mut_slice()) {
                let error = AdError::Unsupported {
                    func: fname.to_string(),
                    what: format!(
                        "{}: the derivative of @{} is overlaid, and it writes into a slice, so it cannot be called twice (once for the value, once for the derivative)",
                        describe_inst(module, func, inst),
                        module.name(g)
                    ),
                };
                let rule = failing_call(module, func, act, inst, g, config, error, request)?;
                if let CallRule::Derived { config, .. } = &rule {
                    save_buffers(func, inst, config, &mut info);
                }
                info.reverse = Some(RevStmt::Call {
                    inst,
                    call: rule.clone(),
                });
                return Ok((info, Some(rule)));
            }
            let mut callee_config = callee_config(module, func, inst, g, params, ret, config);
            // A checkpointed loop's rule seeds only the results the caller uses
            // (the carried values the loop written out would give cotangents).
            if summaries.contains_key(&target) {
                callee_config.seeded =
                    Some(d.results.iter().map(|&r| act.is_active(r, func)).collect());
            }
            let want = Want::Rule {
                checkpoint: d.checkpoint,
            };
            let (fwd, rvs, inout) = match request(target, callee_config.clone(), want) {
                Ok(pair) => pair,
                Err(e) if e.is_deferred() => {
                    request(target, callee_config.clone(), Want::Failing(e))?
                }
                Err(e) => return Err(e),
            };
            save_buffers(func, inst, &callee_config, &mut info);
            CallRule::Derived {
                fwd,
                rvs,
                config: callee_config,
                overlay,
                inout,
            }
        }
        Callee::Extern => {
            let error = AdError::NoDerivative {
                func: fname.to_string(),
                callee: module.name(g).to_string(),
                at: describe_inst(module, func, inst),
            };
            let rule = failing_call(module, func, act, inst, g, config, error, request)?;
            if let CallRule::Derived { config, .. } = &rule {
                save_buffers(func, inst, config, &mut info);
            }
            rule
        }
    };
    info.reverse = Some(RevStmt::Call {
        inst,
        call: rule.clone(),
    });
    Ok((info, Some(rule)))
}

/// What the pullback of the call `inst`, whose callee's rule is derived for
/// `config`, needs of the local buffers it passes with a shadow: the buffer and
/// its shadow's handles.
fn save_buffers(func: &Function, inst: Inst, config: &RuleConfig, info: &mut InstInfo) {
    let d = &func.insts[inst];
    for (&a, &p) in d.args.iter().zip(&config.params) {
        if p == Activity::Dup && matches!(func.value_def(a), ValueDef::Result(..)) {
            info.saves.push(SaveItem::Buf(a));
            info.saves.push(SaveItem::Shadow(a));
        }
    }
}

/// The rule of a call that cannot be derived (`error` says why): a rule of the
/// callee's calling convention that fails with `error`'s message when the call is
/// reached, so the caller is still derived (lazy derivation); `error` itself when
/// it is not one to defer (the requester decides, `Deriver::fail_pair`).
#[allow(clippy::too_many_arguments)]
fn failing_call(
    module: &Module,
    func: &Function,
    act: &ActivityInfo,
    inst: Inst,
    g: FuncId,
    config: &RuleConfig,
    error: AdError,
    request: &mut Requester<'_>,
) -> Result<CallRule, AdError> {
    let (params, ret) = call_activities(func, act, inst);
    let callee_config = callee_config(module, func, inst, g, params, ret, config);
    let (fwd, rvs, inout) = request(g, callee_config.clone(), Want::Failing(error))?;
    Ok(CallRule::Derived {
        fwd,
        rvs,
        config: callee_config,
        overlay: false,
        inout,
    })
}

/// The activities of the call `inst` as its callee sees them: `active` for an
/// active argument, `dup` for a slice with a shadow, `const` otherwise; an active
/// return when any result is active.
fn call_activities(
    func: &Function,
    act: &ActivityInfo,
    inst: Inst,
) -> (Vec<Activity>, RetActivity) {
    let d = &func.insts[inst];
    let params: Vec<Activity> = d
        .args
        .iter()
        .map(|&a| {
            if act.is_active(a, func) {
                Activity::Active
            } else if act.has_shadow(a, func) {
                Activity::Dup
            } else {
                Activity::Const
            }
        })
        .collect();
    let ret = if d.results.iter().any(|&r| act.is_active(r, func)) {
        RetActivity::Active
    } else {
        RetActivity::Const
    };
    (params, ret)
}

/// The configuration of the rule of `g` for the call `inst` with activities
/// `params` and `ret`: the caller's debug and tape settings, the primal needed, and
/// a read-only slice argument frozen when it is a frozen parameter of the caller
/// (nothing writes into it before the pullback runs; any other buffer may be
/// written after the call).
fn callee_config(
    module: &Module,
    func: &Function,
    inst: Inst,
    g: FuncId,
    params: Vec<Activity>,
    ret: RetActivity,
    config: &RuleConfig,
) -> RuleConfig {
    let d = &func.insts[inst];
    let gsig = module.sig(g);
    let frozen = d
        .args
        .iter()
        .zip(&gsig.params)
        .map(|(&a, t)| {
            freezable(*t)
                && matches!(func.value_def(a), ValueDef::Param(i) if config.is_frozen(i as usize))
        })
        .collect();
    RuleConfig {
        params,
        ret,
        needs_primal: true,
        debug: config.debug,
        check_nan: config.check_nan,
        tape: config.tape,
        frozen,
        fuse: false,
        checkpoint_bytes: config.checkpoint_bytes,
        seeded: None,
    }
}

/// The reachable blocks from which a `ret` is reachable.
fn co_reachable(
    func: &Function,
    cfg: &ControlFlowGraph,
    reachable: &EntitySet<Block>,
) -> EntitySet<Block> {
    let mut live = EntitySet::new();
    let mut work: Vec<Block> = func
        .layout
        .iter()
        .copied()
        .filter(|&b| {
            reachable.contains(b) && matches!(func.blocks[b].term, Some(Terminator::Ret(_)))
        })
        .collect();
    for &b in &work {
        live.insert(b);
    }
    while let Some(b) = work.pop() {
        for &p in cfg.preds(b) {
            if reachable.contains(p) && live.insert(p) {
                work.push(p);
            }
        }
    }
    live
}
