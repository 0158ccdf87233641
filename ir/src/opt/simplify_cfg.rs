//! Control-flow simplification.
//!
//! - `br %c, b, b` becomes `jump b`.
//! - A phi whose incoming values are all one value (besides the phi itself) is
//!   replaced by that value.
//! - A block whose only predecessor jumps to it (and to nothing else) is merged into
//!   that predecessor.
//! - An empty forwarding block (no phis, no instructions, a `jump`) is skipped: its
//!   predecessors branch to its successor directly, whose phis take the forwarded
//!   values from each of them. Skipped only when no predecessor already branches to
//!   the successor too (its phis would need two values from one block), and when
//!   that makes no critical edge (a branch to a block with other predecessors).
//! - Unreachable blocks are removed.
//!
//! The entry block is never merged into anything nor skipped, and no block gains the
//! entry as a successor.

use cranelift_entity::EntitySet;

use crate::entities::Block;
use crate::flowgraph::ControlFlowGraph;
use crate::function::{Function, Terminator};
use crate::module::Module;

use super::util::{self, Subst};

/// What CFG simplification did.
#[derive(Default)]
pub(crate) struct CfgStats {
    /// Blocks merged into their predecessor or skipped.
    pub(crate) blocks_merged: usize,
    /// Unreachable blocks removed.
    pub(crate) blocks_removed: usize,
    /// Phis removed.
    pub(crate) phis: usize,
    /// `br`s to one block twice turned into `jump`s.
    pub(crate) branches: usize,
}

impl CfgStats {
    fn changed(&self) -> bool {
        self.blocks_merged + self.blocks_removed + self.phis + self.branches > 0
    }
}

/// Simplifies `func`'s control flow.
pub(crate) fn run(module: &Module, func: &mut Function) -> CfgStats {
    let mut total = CfgStats::default();
    // Each sweep makes progress or stops; the bound guards against a bug.
    let limit = 4 * func.layout.len() + 8;
    for _ in 0..limit {
        let mut stats = CfgStats {
            blocks_removed: util::remove_unreachable(func),
            ..CfgStats::default()
        };
        stats.branches = same_target_branches(func);
        stats.phis = trivial_phis(module, func);
        stats.blocks_merged = merge_and_skip(func);
        let changed = stats.changed();
        total.blocks_merged += stats.blocks_merged;
        total.blocks_removed += stats.blocks_removed;
        total.phis += stats.phis;
        total.branches += stats.branches;
        if !changed {
            break;
        }
    }
    total
}

/// `br %c, b, b` to `jump b`.
fn same_target_branches(func: &mut Function) -> usize {
    let mut n = 0;
    for &b in &func.layout {
        if let Some(Terminator::Br {
            then_dest,
            else_dest,
            ..
        }) = func.blocks[b].term
            && then_dest == else_dest
        {
            func.blocks[b].term = Some(Terminator::Jump(then_dest));
            n += 1;
        }
    }
    n
}

/// Removes phis whose incoming values, other than the phi itself, are all one value
/// of the phi's type. All blocks are reachable (unreachable ones were removed).
fn trivial_phis(module: &Module, func: &mut Function) -> usize {
    let mut subst = Subst::default();
    let mut removed = 0;
    // Replacing one phi can make another trivial: repeat until none is.
    loop {
        let mut found = false;
        for &b in &func.layout {
            let mut k = 0;
            while k < func.blocks[b].phis.len() {
                let phi = &func.blocks[b].phis[k];
                let me = phi.value;
                let mut unique = None;
                let mut trivial = true;
                for &(_, v) in &phi.incoming {
                    let v = subst.resolve(v);
                    if v == me || Some(v) == unique {
                        continue;
                    }
                    if unique.is_some() {
                        trivial = false;
                        break;
                    }
                    unique = Some(v);
                }
                match unique {
                    Some(v) if trivial && func.values[v].ty == func.values[me].ty => {
                        subst.insert(me, v);
                        func.blocks[b].phis.remove(k);
                        removed += 1;
                        found = true;
                    }
                    _ => k += 1,
                }
            }
        }
        if !found {
            break;
        }
    }
    subst.apply(module, func);
    removed
}

/// Merges blocks into their single predecessor and skips empty forwarding blocks.
/// One sweep over one control-flow graph: a block touched by one change is left
/// alone by the others until the next sweep.
fn merge_and_skip(func: &mut Function) -> usize {
    let cfg = ControlFlowGraph::new(func);
    let Some(entry) = func.entry() else {
        return 0;
    };
    let mut dirty = EntitySet::<Block>::new();
    let mut gone = EntitySet::<Block>::new();
    let mut n = 0;
    let layout = func.layout.clone();
    for &b in &layout {
        if b == entry || dirty.contains(b) {
            continue;
        }
        let preds = cfg.preds(b);
        // Merge `b` into its single predecessor `a` when `a` jumps to `b` only.
        if let [a] = *preds
            && a != b
            && !dirty.contains(a)
            && func.blocks[a].term == Some(Terminator::Jump(b))
        {
            let succs = cfg.succs(b).to_vec();
            if succs.iter().any(|&s| dirty.contains(s)) {
                continue;
            }
            // Phis of a block with one predecessor were removed as trivial, unless
            // their value's type differs from theirs (`mut [T]` into `[T]`): such a
            // block stays.
            if !func.blocks[b].phis.is_empty() {
                continue;
            }
            let insts = core::mem::take(&mut func.blocks[b].insts);
            func.blocks[a].insts.extend(insts);
            func.blocks[a].term = func.blocks[b].term.take();
            func.srcmap.terms[a] = func.srcmap.terms[b];
            for &s in &succs {
                util::rename_phi_pred(func, s, b, a);
            }
            gone.insert(b);
            dirty.insert(a);
            dirty.insert(b);
            for &s in &succs {
                dirty.insert(s);
            }
            n += 1;
            continue;
        }
        // Skip `b` when it is empty and jumps on.
        let data = &func.blocks[b];
        let Some(Terminator::Jump(t)) = data.term else {
            continue;
        };
        if t == b || t == entry || !data.phis.is_empty() || !data.insts.is_empty() {
            continue;
        }
        if preds.is_empty() || dirty.contains(t) || preds.iter().any(|&p| dirty.contains(p)) {
            continue;
        }
        let t_preds = cfg.preds(t);
        if !func.blocks[t].phis.is_empty() && preds.iter().any(|p| t_preds.contains(p)) {
            continue;
        }
        // No critical edge is made: a predecessor with several successors keeps
        // its forwarding block when `t` has other predecessors. (A loop's exit
        // block then keeps the header as its only predecessor, which the
        // derivation's counted loops need; Cranelift splits such edges anyway.)
        let critical =
            t_preds.len() + preds.len() > 2 && preds.iter().any(|&p| cfg.succs(p).len() > 1);
        if critical {
            continue;
        }
        for &p in preds {
            util::retarget(func, p, b, t);
        }
        for phi in &mut func.blocks[t].phis {
            if let Some(i) = phi.incoming.iter().position(|&(p, _)| p == b) {
                let (_, v) = phi.incoming.remove(i);
                for (j, &p) in preds.iter().enumerate() {
                    phi.incoming.insert(i + j, (p, v));
                }
            }
        }
        gone.insert(b);
        dirty.insert(b);
        dirty.insert(t);
        for &p in preds {
            dirty.insert(p);
        }
        n += 1;
    }
    func.layout.retain(|&b| !gone.contains(b));
    n
}
