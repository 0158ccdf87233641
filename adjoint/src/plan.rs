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
use gradlift_ir::{Block, Function, Terminator, Type, Value};
use hashbrown::HashSet;
use smallvec::SmallVec;

use crate::activity::ActivityInfo;
use crate::config::{Activity, RetActivity, RuleConfig};
use crate::liveness::{CotangentLiveness, Inputs};
use crate::stmt::{RevInst, RevPhi, inst_stmt, phi_stmt, ret_stmt};

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
pub struct BlockStack {
    preds: SecondaryMap<Block, SmallVec<[Block; 2]>>,
    rets: Vec<Block>,
}

impl BlockStack {
    /// The predecessors of a live block that are reachable, in the order of the
    /// control-flow graph (`br %c, b, b` counts once).
    pub fn preds(&self, b: Block) -> &[Block] {
        &self.preds[b]
    }

    /// Whether the forward pass records which predecessor it came to `b` from.
    pub fn records_pred(&self, b: Block) -> bool {
        self.preds[b].len() > 1
    }

    /// The live blocks ending in `ret`, in layout order.
    pub fn rets(&self) -> &[Block] {
        &self.rets
    }

    /// Whether the forward pass records which `ret` it left by.
    pub fn records_ret(&self) -> bool {
        self.rets.len() > 1
    }

    /// The number `b` is pushed as when it returns (from 1).
    pub fn ret_number(&self, b: Block) -> Option<i64> {
        self.rets.iter().position(|&r| r == b).map(|i| i as i64 + 1)
    }
}

/// The values each block saves for its reverse (Mooncake's per-block communication
/// channels, `create_comms_insts!`).
///
/// At the end of a live block `C`, before its terminator, the forward pass pushes
/// every value that the reverse of `C`'s instructions reads, wherever it is defined,
/// each once, in this order; the reverse block pops them first, last first.
/// Constants are never saved: the pullback writes them itself. Everything the
/// reverse reads is saved; nothing is recomputed (for now).
#[derive(Clone, Debug, Default)]
pub struct SavedValues {
    per_block: SecondaryMap<Block, Vec<Value>>,
}

impl SavedValues {
    /// The values `b` saves, in push order.
    pub fn of(&self, b: Block) -> &[Value] {
        &self.per_block[b]
    }
}

/// Everything decided about a rule before code is written.
#[derive(Clone, Debug)]
pub struct Plan {
    /// Blocks reachable from the entry.
    pub reachable: EntitySet<Block>,
    /// Reachable blocks that can reach a `ret`: the ones with reverse code.
    pub live: EntitySet<Block>,
    /// The block stack.
    pub stack: BlockStack,
    /// What each block saves.
    pub saved: SavedValues,
    /// Which values are active.
    pub activity: ActivityInfo,
    /// Per block, the reverse of each instruction with an active result, in block
    /// order.
    pub insts: SecondaryMap<Block, Vec<RevInst>>,
    /// Per block, the reverse of each active phi.
    pub phis: SecondaryMap<Block, Vec<RevPhi>>,
    /// Per `ret` block, the seeds: (returned value, pullback parameter).
    pub seeds: SecondaryMap<Block, Vec<(Value, usize)>>,
    /// For each result of the primal, the pullback parameter carrying its cotangent
    /// (float results of an active return).
    pub seeded: Vec<Option<usize>>,
    /// No value is active: the forward pass saves nothing and the pullback returns
    /// zeros.
    pub trivial: bool,
    /// Where each block's reverse may reset cotangents to zero on entry.
    pub liveness: CotangentLiveness,
}

impl Plan {
    /// Plans the rule of `func` under `config` (already checked against the
    /// signature, whose result types are `results`).
    pub fn new(func: &Function, results: &[Type], config: &RuleConfig) -> Plan {
        let cfg = ControlFlowGraph::new(func);
        let mut reachable = EntitySet::new();
        for &b in cfg.reverse_postorder() {
            reachable.insert(b);
        }
        let live = co_reachable(func, &cfg, &reachable);
        let activity = ActivityInfo::analyse(func, &reachable, config);
        let trivial = activity.is_empty(func);

        let mut seeded = Vec::with_capacity(results.len());
        let mut n = 0;
        for &t in results {
            if config.ret == RetActivity::Active && t.is_float() {
                seeded.push(Some(n));
                n += 1;
            } else {
                seeded.push(None);
            }
        }

        let mut stack = BlockStack::default();
        let mut saved = SavedValues::default();
        let mut insts: SecondaryMap<Block, Vec<RevInst>> = SecondaryMap::new();
        let mut phis: SecondaryMap<Block, Vec<RevPhi>> = SecondaryMap::new();
        let mut seeds: SecondaryMap<Block, Vec<(Value, usize)>> = SecondaryMap::new();
        for &b in func.layout.iter().filter(|&&b| live.contains(b)) {
            let preds: SmallVec<[Block; 2]> = cfg
                .preds(b)
                .iter()
                .copied()
                .filter(|&p| reachable.contains(p))
                .collect();
            let data = &func.blocks[b];
            for phi in &data.phis {
                if let Some(rev) = phi_stmt(func, &activity, b, phi.value, &preds) {
                    phis[b].push(rev);
                }
            }
            stack.preds[b] = preds;
            let mut block_saves = Vec::new();
            let mut seen = HashSet::new();
            for &inst in &data.insts {
                let info = inst_stmt(func, &activity, inst);
                for v in info.saves {
                    if seen.insert(v) {
                        block_saves.push(v);
                    }
                }
                insts[b].extend(info.reverse);
            }
            saved.per_block[b] = block_saves;
            if let Some(Terminator::Ret(vals)) = &data.term {
                stack.rets.push(b);
                seeds[b] = ret_stmt(&activity, vals, &seeded);
            }
        }
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
            .filter(|&(&p, &a)| a == Activity::Active && activity.is_active(p))
            .map(|(&p, _)| p)
            .collect();
        let liveness = CotangentLiveness::new(&Inputs {
            func,
            live: &live_order,
            stack: &stack,
            insts: &insts,
            phis: &phis,
            seeds: &seeds,
            params: &params,
        });
        Plan {
            reachable,
            live,
            stack,
            saved,
            activity,
            insts,
            phis,
            seeds,
            seeded,
            trivial,
            liveness,
        }
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
