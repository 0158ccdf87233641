//! Common subexpression elimination: dominator-based value numbering.
//!
//! Two instructions are the same computation when they have the same op, immediate,
//! operands (sorted, for commutative ops) and result types. An instruction is
//! replaced by an earlier identical one whose block dominates its block (or that
//! comes before it in the same block). Candidates are the ops that compute from
//! their operands alone (those that cannot fail and have no effect) and
//! `idiv`/`irem` (the earlier one ran without failing, so the later one would too).
//! Loads are merged only when memory cannot have changed between them: anywhere in
//! a function without stores and calls, else only within a block with no store or
//! call in between. Calls, stores, `alloc`s (each is a new buffer), tape ops and
//! `trap_if` are never merged.

use hashbrown::HashMap;
use smallvec::SmallVec;

use crate::dominators::DominatorTree;
use crate::entities::{Block, Value};
use crate::flowgraph::ControlFlowGraph;
use crate::function::Function;
use crate::module::Module;
use crate::ops::{CmpPred, Imm, Opcode};
use crate::types::Type;

use super::util::{Subst, is_speculatable};

#[derive(Clone, PartialEq, Eq, Hash)]
struct Key {
    op: Opcode,
    imm: Imm,
    args: SmallVec<[Value; 3]>,
    ty: Type,
    /// For loads in a function that writes memory: the block and the number of
    /// stores and calls before the load in it.
    mem: Option<(Block, u32)>,
}

fn commutative(op: Opcode, imm: Imm) -> bool {
    match op {
        Opcode::Fadd
        | Opcode::Fmul
        | Opcode::Fmin
        | Opcode::Fmax
        | Opcode::Iadd
        | Opcode::Imul
        | Opcode::Iand
        | Opcode::Ior
        | Opcode::Ixor
        | Opcode::And
        | Opcode::Or
        | Opcode::Xor => true,
        Opcode::Fcmp | Opcode::Icmp => matches!(imm, Imm::Cmp(CmpPred::Eq | CmpPred::Ne)),
        _ => false,
    }
}

/// Merges redundant computations in `func`. Returns how many instructions were
/// removed.
pub(crate) fn run(module: &Module, func: &mut Function) -> usize {
    let cfg = ControlFlowGraph::new(func);
    let domtree = DominatorTree::new(&cfg);
    let writes = func.layout.iter().any(|&b| {
        func.blocks[b]
            .insts
            .iter()
            .any(|&i| matches!(func.insts[i].opcode, Opcode::Store | Opcode::Call))
    });
    // A scoped table over a walk of the dominator tree: while a block is visited,
    // the table holds the computations of the blocks that dominate it, and each
    // block's entries are undone when its subtree is done.
    let mut table: HashMap<Key, Value> = HashMap::new();
    let mut undo: Vec<Key> = Vec::new();
    let mut subst = Subst::default();
    let mut merged = 0;
    enum Visit {
        Enter(Block),
        Leave(usize),
    }
    let mut walk: Vec<Visit> = cfg.entry().map(Visit::Enter).into_iter().collect();
    while let Some(visit) = walk.pop() {
        let b = match visit {
            Visit::Enter(b) => b,
            Visit::Leave(mark) => {
                for key in undo.drain(mark..) {
                    table.remove(&key);
                }
                continue;
            }
        };
        walk.push(Visit::Leave(undo.len()));
        walk.extend(domtree.children(b).iter().rev().map(|&c| Visit::Enter(c)));
        let insts = func.blocks[b].insts.clone();
        let mut keep = Vec::with_capacity(insts.len());
        let mut epoch = 0u32;
        for inst in insts {
            let d = &func.insts[inst];
            let op = d.opcode;
            if matches!(op, Opcode::Store | Opcode::Call) {
                epoch += 1;
            }
            let candidate = d.results.len() == 1
                && (matches!(op, Opcode::Idiv | Opcode::Irem | Opcode::Load)
                    || is_speculatable(func, inst));
            if !candidate {
                keep.push(inst);
                continue;
            }
            let mut args: SmallVec<[Value; 3]> = d.args.iter().map(|&a| subst.resolve(a)).collect();
            if commutative(op, d.imm) && args.len() == 2 && args[1] < args[0] {
                args.swap(0, 1);
            }
            let r = d.results[0];
            let key = Key {
                op,
                imm: d.imm,
                args,
                ty: func.values[r].ty,
                mem: (op == Opcode::Load && writes).then_some((b, epoch)),
            };
            match table.get(&key) {
                Some(&earlier) => {
                    subst.insert(r, earlier);
                    merged += 1;
                }
                None => {
                    table.insert(key.clone(), r);
                    undo.push(key);
                    keep.push(inst);
                }
            }
        }
        func.blocks[b].insts = keep;
    }
    subst.apply(module, func);
    merged
}
