//! What the passes share: which instructions may be removed, merged or moved; value
//! substitution that keeps literal operands printable; removal of unreachable blocks.
//! The analyses they share (loops, strongly connected components, the call graph)
//! are modules of the crate: [`crate::loops`], [`crate::scc`], [`crate::callgraph`].

use cranelift_entity::SecondaryMap;
use hashbrown::HashMap;
use smallvec::SmallVec;

use crate::entities::{Block, Inst, Value};
use crate::flowgraph::ControlFlowGraph;
use crate::function::{Function, Terminator, ValueDef};
use crate::module::Module;
use crate::ops::{Imm, Opcode, Shape};
use crate::scc::Sccs;
use crate::types::Scalar;

/// The constant `v` is, if it is one (a constant value, not a `const` instruction).
pub(crate) fn const_of(func: &Function, v: Value) -> Option<Scalar> {
    match func.values.get(v)?.def {
        ValueDef::Const(c) => Some(c),
        _ => None,
    }
}

/// Whether `v` is a constant value.
pub(crate) fn is_const(func: &Function, v: Value) -> bool {
    const_of(func, v).is_some()
}

/// Whether `inst` computes a value from its operands alone, with no effect, and can
/// never fail: it may be removed when unused, computed where it was not (hoisted out
/// of a loop), and merged with an identical one. Float, integer (but `idiv`/`irem`
/// only by a constant other than zero), comparison, boolean, `select`, `cast`,
/// `bitcast`, `const` and `len`. Never a load, a store, an `alloc`, a call, a tape op
/// or `trap_if`.
pub(crate) fn is_speculatable(func: &Function, inst: Inst) -> bool {
    let d = &func.insts[inst];
    match d.opcode {
        Opcode::Idiv | Opcode::Irem => d
            .args
            .get(1)
            .and_then(|&v| const_of(func, v))
            .is_some_and(|c| !matches!(c, Scalar::I64(0))),
        op => op.shape().is_scalar() || op.shape() == Shape::Len,
    }
}

/// Where each placed instruction sits: its block and index.
pub(crate) fn inst_positions(func: &Function) -> SecondaryMap<Inst, Option<(Block, u32)>> {
    let mut pos = SecondaryMap::new();
    for &b in &func.layout {
        for (i, &inst) in func.blocks[b].insts.iter().enumerate() {
            pos[inst] = Some((b, i as u32));
        }
    }
    pos
}

/// The block defining `v` (a phi's block or an instruction's), if it has one;
/// parameters and constants have none. `pos` is from [`inst_positions`].
pub(crate) fn def_block(
    func: &Function,
    pos: &SecondaryMap<Inst, Option<(Block, u32)>>,
    v: Value,
) -> Option<Block> {
    match func.values[v].def {
        ValueDef::Phi(b) => Some(b),
        ValueDef::Result(inst, _) => pos[inst].map(|(b, _)| b),
        ValueDef::Param(_) | ValueDef::Const(_) => None,
    }
}

/// A substitution of values, applied to every use in the function at once.
#[derive(Default)]
pub(crate) struct Subst {
    map: HashMap<Value, Value>,
}

impl Subst {
    /// Replace `from` by `to` (which is resolved through earlier entries).
    pub(crate) fn insert(&mut self, from: Value, to: Value) {
        let to = self.resolve(to);
        if to != from {
            self.map.insert(from, to);
        }
    }

    /// What `v` is replaced by, following chains.
    pub(crate) fn resolve(&self, mut v: Value) -> Value {
        // Chains are short and acyclic (each entry maps to a value resolved when it
        // was made); the bound only guards against a bug looping forever.
        for _ in 0..64 {
            match self.map.get(&v) {
                Some(&w) if w != v => v = w,
                _ => break,
            }
        }
        v
    }

    /// Rewrites every use in `func`'s layout. A constant put where the text cannot
    /// write it as a literal (an `f32` constant as both operands of an `fadd`) is
    /// given a `const` instruction just before its user instead.
    pub(crate) fn apply(&self, module: &Module, func: &mut Function) {
        if self.map.is_empty() {
            return;
        }
        let layout = func.layout.clone();
        for &b in &layout {
            let data = &mut func.blocks[b];
            for phi in &mut data.phis {
                for (_, v) in &mut phi.incoming {
                    *v = self.resolve(*v);
                }
            }
            match &mut data.term {
                Some(Terminator::Br { cond, .. }) => *cond = self.resolve(*cond),
                Some(Terminator::Ret(vals)) => {
                    for v in vals.iter_mut() {
                        *v = self.resolve(*v);
                    }
                }
                _ => {}
            }
            let insts = data.insts.clone();
            for inst in insts {
                let mut const_in = false;
                for k in 0..func.insts[inst].args.len() {
                    let v = func.insts[inst].args[k];
                    let w = self.resolve(v);
                    if w != v {
                        func.insts[inst].args[k] = w;
                        const_in |= is_const(func, w);
                    }
                }
                if const_in {
                    legalize_literals(module, func, b, inst);
                }
            }
        }
    }
}

/// Makes every constant operand of `inst` (in block `b`) one the text can write as a
/// literal there: a constant of another type than the literal would read as gets a
/// `const` instruction just before `inst`. Returns how many were made.
pub(crate) fn legalize_literals(
    module: &Module,
    func: &mut Function,
    b: Block,
    inst: Inst,
) -> usize {
    let mut made = 0;
    // Each round fixes one operand; a fixed operand stays fixed.
    for _ in 0..=func.insts[inst].args.len() {
        let expected = crate::parser::literal_types(module, func, inst);
        let bad = func.insts[inst]
            .args
            .iter()
            .zip(&expected)
            .position(|(&a, t)| match (const_of(func, a), t) {
                (Some(c), Some(t)) => c.ty() != *t,
                _ => false,
            });
        let Some(k) = bad else { break };
        let a = func.insts[inst].args[k];
        let Some(c) = const_of(func, a) else { break };
        let k_inst = func.make_inst(Opcode::Const, Imm::Const(c), &[], &[c.ty()]);
        func.srcmap.insts[k_inst] = func.srcmap.insts[inst];
        let r = func.insts[k_inst].results[0];
        let idx = func.blocks[b]
            .insts
            .iter()
            .position(|&i| i == inst)
            .unwrap_or(0);
        func.insert_inst(b, idx, k_inst);
        func.insts[inst].args[k] = r;
        made += 1;
    }
    made
}

/// Takes the blocks that cannot be reached from the entry out of the layout, and
/// drops the phi edges of the remaining blocks from blocks that are no longer their
/// predecessors. Returns how many blocks were removed.
pub(crate) fn remove_unreachable(func: &mut Function) -> usize {
    let cfg = ControlFlowGraph::new(func);
    let before = func.layout.len();
    func.layout.retain(|&b| cfg.is_reachable(b));
    let removed = before - func.layout.len();
    prune_phi_edges(func, &cfg);
    removed
}

/// Drops phi edges from blocks that are not (reachable) predecessors per `cfg`.
pub(crate) fn prune_phi_edges(func: &mut Function, cfg: &ControlFlowGraph) {
    for &b in &func.layout {
        let preds = cfg.preds(b);
        for phi in &mut func.blocks[b].phis {
            phi.incoming
                .retain(|(p, _)| preds.contains(p) && cfg.is_reachable(*p));
        }
    }
}

/// Renames the phi edges from `old` to `new` in `block`'s phis.
pub(crate) fn rename_phi_pred(func: &mut Function, block: Block, old: Block, new: Block) {
    for phi in &mut func.blocks[block].phis {
        for (p, _) in &mut phi.incoming {
            if *p == old {
                *p = new;
            }
        }
    }
}

/// Replaces every edge to `old` in `block`'s terminator by an edge to `new`.
pub(crate) fn retarget(func: &mut Function, block: Block, old: Block, new: Block) {
    match &mut func.blocks[block].term {
        Some(Terminator::Jump(d)) if *d == old => *d = new,
        Some(Terminator::Br {
            then_dest,
            else_dest,
            ..
        }) => {
            if *then_dest == old {
                *then_dest = new;
            }
            if *else_dest == old {
                *else_dest = new;
            }
        }
        _ => {}
    }
}

/// The distinct successors of `block`.
pub(crate) fn distinct_succs(func: &Function, block: Block) -> SmallVec<[Block; 2]> {
    let mut s = func.successors(block);
    s.dedup();
    s
}

/// A name derived from `base`'s (for blocks a pass makes), if `base` has one.
pub(crate) fn derived_name(func: &Function, base: Block, suffix: &str) -> Option<String> {
    func.blocks[base]
        .name
        .as_deref()
        .map(|n| format!("{n}.{suffix}"))
}

/// The number of instructions placed in `func`.
pub(crate) fn inst_count(func: &Function) -> usize {
    func.layout
        .iter()
        .map(|&b| func.blocks[b].insts.len())
        .sum()
}

/// Whether the control-flow graph of `func` (all blocks of the layout, reachable or
/// not) has a cycle.
pub(crate) fn has_cycle(func: &Function) -> bool {
    let cfg = ControlFlowGraph::new(func);
    let nodes = func.layout.iter().copied().filter(|&b| cfg.is_node(b));
    let sccs = Sccs::new(nodes, |b| cfg.succs(b).iter().copied());
    (0..sccs.len()).any(|k| sccs.is_cyclic(k))
}
