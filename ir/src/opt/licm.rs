//! Loop-invariant code motion.
//!
//! Loops are natural loops: a back edge's target (the header) dominates its source.
//! Each loop gets a dedicated preheader (the header's one predecessor from outside
//! the loop, jumping only to the header; a new block when there is none), made only
//! when something is to be hoisted.
//!
//! - **Pure instructions** whose operands are defined outside the loop (or by other
//!   hoisted instructions) move to the end of the preheader. Only instructions that
//!   cannot fail and have no effect move, since they
//!   now run even when the loop body would not: never a load, an `idiv`/`irem` by
//!   anything but a nonzero constant, a call, or any instruction with an effect.
//! - **Calls** to functions that write no memory (no `store` but into their own
//!   `alloc`s, no `mut` slice parameter, no tape op that changes the tape, no call to
//!   an extern or to a function that writes), with loop-invariant arguments and scalar
//!   results, in a loop that writes no memory (no `store`, no call to a function that
//!   writes). A call may fail or not terminate, so it is not speculated: it moves
//!   only when it is the first thing with an effect in the block the header's `br`
//!   enters the loop by (before it, only instructions that cannot fail), and the
//!   header is only phis and instructions that cannot fail, so the call runs exactly
//!   when the first iteration would have run it, on the same arguments and the same
//!   memory. The preheader evaluates the header's exit test on the loop's initial
//!   values (the header's instructions cloned, its phis replaced by their preheader
//!   values) and branches on it to a block making the calls, then to a join block
//!   whose phis carry their results (a zero of the type when the loop does not run;
//!   the zero is never used then) into the loop:
//!
//!   ```text
//!   preheader: ...cloned test...     br %guard, hoisted, join
//!   hoisted:   %r = call @g(...)     jump join
//!   join:      %r' = phi [preheader: 0.0, hoisted: %r]     jump header
//!   ```
//!
//! Nothing else moves: loads, stores, `alloc`s, tape ops and `trap_if` stay where
//! they are, in their order.

use cranelift_entity::SecondaryMap;
use hashbrown::{HashMap, HashSet};
use smallvec::SmallVec;

use crate::dominators::DominatorTree;
use crate::entities::{Block, Inst, Value};
use crate::flowgraph::ControlFlowGraph;
use crate::function::{Function, Terminator};
use crate::loops::LoopForest;
use crate::module::Module;
use crate::ops::{Imm, Opcode};
use crate::types::Scalar;

use super::ModuleFacts;
use super::util::{self, is_speculatable};

/// What LICM did.
#[derive(Default)]
pub(crate) struct LicmStats {
    /// Pure instructions hoisted.
    pub(crate) hoisted: usize,
    /// Calls hoisted (under a guard).
    pub(crate) calls: usize,
}

/// Hoists loop-invariant code out of `func`'s loops.
pub(crate) fn run(module: &Module, facts: &ModuleFacts, func: &mut Function) -> LicmStats {
    let mut stats = LicmStats::default();
    // Every change moves something out of a loop for good: the bound only guards
    // against a bug.
    let limit = 16 + 4 * func.layout.len();
    for _ in 0..limit {
        if !hoist_pure(func, &mut stats) {
            break;
        }
    }
    for _ in 0..limit {
        if !hoist_calls(module, facts, func, &mut stats) {
            break;
        }
        // What depends on the calls' results may now be invariant too.
        for _ in 0..limit {
            if !hoist_pure(func, &mut stats) {
                break;
            }
        }
    }
    stats
}

type Positions = SecondaryMap<Inst, Option<(Block, u32)>>;

/// What one analysis' worth of changes leaves for the end: where new blocks go in
/// the layout, and the call results to replace by their join phis. Done once, so
/// that many loops cost one pass over the function.
#[derive(Default)]
struct Edits {
    /// Blocks to place just before a block of the layout.
    before: HashMap<Block, Vec<Block>>,
    /// Blocks to place just after a block (of the layout, or placed by these edits).
    after: HashMap<Block, Vec<Block>>,
    /// A hoisted call's result, the phi of the join block that replaces it, and the
    /// two blocks where it stays (the call's block, the join).
    repl: HashMap<Value, (Value, Block, Block)>,
}

impl Edits {
    fn apply(mut self, func: &mut Function) {
        if self.before.is_empty() && self.after.is_empty() && self.repl.is_empty() {
            return;
        }
        let old = core::mem::take(&mut func.layout);
        let mut layout = Vec::with_capacity(old.len() + self.after.len() * 2);
        let mut stack = Vec::new();
        for b in old {
            let mut first: Vec<Block> = self.before.remove(&b).unwrap_or_default();
            first.push(b);
            stack.extend(first.into_iter().rev());
            while let Some(x) = stack.pop() {
                layout.push(x);
                if let Some(next) = self.after.remove(&x) {
                    stack.extend(next.into_iter().rev());
                }
            }
        }
        func.layout = layout;
        if self.repl.is_empty() {
            return;
        }
        let repl = &self.repl;
        let get = |v: Value, b: Block| match repl.get(&v) {
            Some(&(p, hb, join)) if b != hb && b != join => Some(p),
            _ => None,
        };
        for &b in &func.layout {
            let data = &mut func.blocks[b];
            for phi in &mut data.phis {
                for (_, v) in &mut phi.incoming {
                    if let Some(p) = get(*v, b) {
                        *v = p;
                    }
                }
            }
            match &mut data.term {
                Some(Terminator::Br { cond, .. }) => {
                    if let Some(p) = get(*cond, b) {
                        *cond = p;
                    }
                }
                Some(Terminator::Ret(vals)) => {
                    for v in vals.iter_mut() {
                        if let Some(p) = get(*v, b) {
                            *v = p;
                        }
                    }
                }
                _ => {}
            }
            for &inst in &data.insts {
                for a in func.insts[inst].args.iter_mut() {
                    if let Some(p) = get(*a, b) {
                        *a = p;
                    }
                }
            }
        }
    }
}

/// Whether `v` is defined inside loop `l` (a phi or instruction of one of its
/// blocks).
fn defined_in(func: &Function, pos: &Positions, forest: &LoopForest, l: usize, v: Value) -> bool {
    util::def_block(func, pos, v).is_some_and(|d| forest.contains(l, d))
}

/// Hoists the pure invariant instructions of every loop, innermost first, over one
/// analysis. A loop that gets a new preheader changes the blocks of the loops
/// around it, which wait for the next call. Returns whether anything moved.
fn hoist_pure(func: &mut Function, stats: &mut LicmStats) -> bool {
    let cfg = ControlFlowGraph::new(func);
    let domtree = DominatorTree::new(&cfg);
    let forest = LoopForest::new(&cfg, &domtree);
    let mut pos = util::inst_positions(func);
    let mut stale = vec![false; forest.len()];
    let mut edits = Edits::default();
    let mut changed = false;
    for l in forest.innermost_first() {
        if stale[l] {
            continue;
        }
        let mut hoisted_values: HashSet<Value> = HashSet::new();
        let mut moves: Vec<(Block, Inst)> = Vec::new();
        for &b in forest.blocks(l) {
            for &inst in &func.blocks[b].insts {
                if !is_speculatable(func, inst) {
                    continue;
                }
                let invariant = func.insts[inst]
                    .args
                    .iter()
                    .all(|a| !defined_in(func, &pos, &forest, l, *a) || hoisted_values.contains(a));
                if invariant {
                    moves.push((b, inst));
                    hoisted_values.extend(func.insts[inst].results.iter().copied());
                }
            }
        }
        if moves.is_empty() {
            continue;
        }
        let (ph, created) = ensure_preheader(func, &cfg, &forest, l, &mut edits);
        for &(b, inst) in &moves {
            func.remove_inst(b, inst);
            func.append_inst(ph, inst);
            pos[inst] = Some((ph, 0));
        }
        if created {
            for a in forest.ancestors(l) {
                stale[a] = true;
            }
        }
        stats.hoisted += moves.len();
        changed = true;
    }
    edits.apply(func);
    changed
}

/// The dedicated preheader of loop `l`: the header's one outside predecessor if it
/// jumps only to the header, else a new block between the outside predecessors and
/// the header (taking over the header's phi edges from them). Says whether the block
/// is new.
fn ensure_preheader(
    func: &mut Function,
    cfg: &ControlFlowGraph,
    forest: &LoopForest,
    l: usize,
    edits: &mut Edits,
) -> (Block, bool) {
    let h = forest.header(l);
    let outside: SmallVec<[Block; 2]> = cfg
        .preds(h)
        .iter()
        .copied()
        .filter(|&p| !forest.contains(l, p))
        .collect();
    if let [p] = *outside
        && util::distinct_succs(func, p)[..] == [h]
    {
        return (p, false);
    }
    let name = util::derived_name(func, h, "pre");
    let ph = func.make_block(name.as_deref());
    for &p in &outside {
        util::retarget(func, p, h, ph);
    }
    let nphis = func.blocks[h].phis.len();
    for k in 0..nphis {
        let phi = &func.blocks[h].phis[k];
        let ty = func.values[phi.value].ty;
        let from_outside: SmallVec<[(Block, Value); 2]> = phi
            .incoming
            .iter()
            .copied()
            .filter(|(p, _)| outside.contains(p))
            .collect();
        let v = match from_outside.first() {
            Some(&(_, v)) if from_outside.iter().all(|&(_, w)| w == v) => v,
            _ => {
                let nv = func.append_phi(ph, ty, &from_outside);
                func.values[nv].name = func.values[func.blocks[h].phis[k].value].name.clone();
                nv
            }
        };
        let phi = &mut func.blocks[h].phis[k];
        phi.incoming.retain(|(p, _)| !outside.contains(p));
        phi.incoming.insert(0, (ph, v));
    }
    func.blocks[ph].term = Some(Terminator::Jump(h));
    edits.before.entry(h).or_default().push(ph);
    (ph, true)
}

/// Hoists the eligible calls of every loop under a guard, innermost first, over one
/// analysis; the loops around one that changed wait for the next call. Returns
/// whether anything moved.
fn hoist_calls(
    module: &Module,
    facts: &ModuleFacts,
    func: &mut Function,
    stats: &mut LicmStats,
) -> bool {
    let cfg = ControlFlowGraph::new(func);
    let domtree = DominatorTree::new(&cfg);
    let forest = LoopForest::new(&cfg, &domtree);
    let pos = util::inst_positions(func);
    let mut stale = vec![false; forest.len()];
    let mut edits = Edits::default();
    let mut changed = false;
    for l in forest.innermost_first() {
        if stale[l] {
            continue;
        }
        let h = forest.header(l);
        let Some(Terminator::Br {
            cond,
            then_dest,
            else_dest,
        }) = func.blocks[h].term
        else {
            continue;
        };
        let (first, first_is_then) =
            match (forest.contains(l, then_dest), forest.contains(l, else_dest)) {
                (true, false) => (then_dest, true),
                (false, true) => (else_dest, false),
                _ => continue,
            };
        if first == h || cfg.preds(first) != [h] {
            continue;
        }
        if !func.blocks[h]
            .insts
            .iter()
            .all(|&i| is_speculatable(func, i))
        {
            continue;
        }
        // The loop writes no memory.
        let writes = forest.blocks(l).iter().any(|&b| {
            func.blocks[b].insts.iter().any(|&i| {
                let d = &func.insts[i];
                match (d.opcode, d.imm) {
                    (Opcode::Store, _) => true,
                    (Opcode::Call, Imm::Func(g)) => facts.writes.get(g).copied().unwrap_or(true),
                    _ => false,
                }
            })
        });
        if writes {
            continue;
        }
        // The calls at the head of the loop's first block.
        let mut batch: SmallVec<[Inst; 2]> = SmallVec::new();
        let mut batch_results: SmallVec<[Value; 2]> = SmallVec::new();
        for &inst in &func.blocks[first].insts {
            let d = &func.insts[inst];
            let eligible = match (d.opcode, d.imm) {
                (Opcode::Call, Imm::Func(g)) => {
                    module.function(g).is_some()
                        && !facts.writes.get(g).copied().unwrap_or(true)
                        && d.results.iter().all(|&r| func.values[r].ty.is_scalar())
                        && d.args.iter().all(|&a| {
                            !defined_in(func, &pos, &forest, l, a) || batch_results.contains(&a)
                        })
                }
                _ => false,
            };
            if eligible {
                batch.push(inst);
                batch_results.extend(d.results.iter().copied());
            } else if !is_speculatable(func, inst) {
                break;
            }
        }
        if batch.is_empty() {
            continue;
        }
        let lp = Site {
            forest: &forest,
            l,
            cond,
            first,
            first_is_then,
        };
        hoist_batch(module, func, &cfg, &lp, &batch, &mut edits);
        for a in forest.ancestors(l) {
            stale[a] = true;
        }
        stats.calls += batch.len();
        changed = true;
    }
    edits.apply(func);
    changed
}

/// Where the calls of a loop are hoisted from.
struct Site<'a> {
    forest: &'a LoopForest,
    /// The loop.
    l: usize,
    /// The header's `br` condition.
    cond: Value,
    /// The block the header enters the loop by.
    first: Block,
    /// Whether `first` is the `br`'s then target.
    first_is_then: bool,
}

/// Moves the calls `batch` of `first` (the block the header enters the loop by) to
/// a guarded block before the loop.
fn hoist_batch(
    module: &Module,
    func: &mut Function,
    cfg: &ControlFlowGraph,
    site: &Site<'_>,
    batch: &[Inst],
    edits: &mut Edits,
) {
    let Site {
        forest,
        l,
        cond,
        first,
        first_is_then,
    } = *site;
    let h = forest.header(l);
    let (ph, _) = ensure_preheader(func, cfg, forest, l, edits);

    // The header's test on the initial values, in the preheader.
    let mut cmap: HashMap<Value, Value> = HashMap::new();
    for phi in &func.blocks[h].phis {
        if let Some(&(_, v)) = phi.incoming.iter().find(|&&(p, _)| p == ph) {
            cmap.insert(phi.value, v);
        }
    }
    let header_insts = func.blocks[h].insts.clone();
    let mut clones = Vec::with_capacity(header_insts.len());
    for inst in header_insts {
        let d = func.insts[inst].clone();
        let args: SmallVec<[Value; 3]> = d
            .args
            .iter()
            .map(|a| cmap.get(a).copied().unwrap_or(*a))
            .collect();
        let tys: SmallVec<[_; 1]> = d.results.iter().map(|&r| func.values[r].ty).collect();
        let ni = func.make_inst(d.opcode, d.imm, &args, &tys);
        func.insts[ni].checkpoint = d.checkpoint;
        func.srcmap.insts[ni] = func.srcmap.insts[inst];
        for (k, &r) in d.results.iter().enumerate() {
            let nr = func.insts[ni].results[k];
            func.values[nr].name = func.values[r]
                .name
                .as_deref()
                .map(|n| format!("{n}.init").into());
            cmap.insert(r, nr);
        }
        func.append_inst(ph, ni);
        clones.push(ni);
    }
    for ni in clones {
        util::legalize_literals(module, func, ph, ni);
    }
    let guard = cmap.get(&cond).copied().unwrap_or(cond);

    let hb_name = util::derived_name(func, h, "hoisted");
    let hb = func.make_block(hb_name.as_deref());
    let join_name = util::derived_name(func, h, "join");
    let join = func.make_block(join_name.as_deref());
    for &call in batch {
        func.remove_inst(first, call);
        func.append_inst(hb, call);
    }
    func.blocks[hb].term = Some(Terminator::Jump(join));
    func.blocks[join].term = Some(Terminator::Jump(h));
    func.blocks[ph].term = Some(if first_is_then {
        Terminator::Br {
            cond: guard,
            then_dest: hb,
            else_dest: join,
        }
    } else {
        Terminator::Br {
            cond: guard,
            then_dest: join,
            else_dest: hb,
        }
    });
    util::rename_phi_pred(func, h, ph, join);

    // The results reach the loop through phis of the join block.
    for &call in batch {
        let results = func.insts[call].results.clone();
        for r in results {
            let ty = func.values[r].ty;
            let Some(zero) = Scalar::zero(ty) else {
                continue;
            };
            let zero = func.make_const(zero);
            let p = func.append_phi(join, ty, &[(ph, zero), (hb, r)]);
            // The loop reads the phi under the call's old name.
            let name = func.values[r].name.take();
            func.values[r].name = name.as_deref().map(|n| format!("{n}.call").into());
            func.values[p].name = name;
            edits.repl.insert(r, (p, hb, join));
        }
    }
    edits.after.entry(ph).or_default().extend([hb, join]);
}
