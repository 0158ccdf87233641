//! Dead code elimination: unreachable blocks, and phis and instructions whose results
//! nothing uses.
//!
//! Liveness is computed by marking from the roots (terminators, and every
//! instruction that has an effect or may fail) backward through operands, so phis
//! that only feed each other around a loop are dead too. Only instructions that
//! cannot fail and have no effect are removed: never
//! a load (it may be out of bounds), an `idiv`/`irem` by anything but a nonzero
//! constant, a call, a store, an `alloc` (a negative length fails), a tape op or a
//! `trap_if`.

use cranelift_entity::EntitySet;

use crate::entities::{Inst, Value};
use crate::function::{Function, ValueDef};

use super::util::{self, is_speculatable};

/// What DCE removed.
#[derive(Default)]
pub(crate) struct DceStats {
    /// Instructions.
    pub(crate) insts: usize,
    /// Phis.
    pub(crate) phis: usize,
    /// Unreachable blocks.
    pub(crate) blocks: usize,
}

/// Removes dead code from `func`.
pub(crate) fn run(func: &mut Function) -> DceStats {
    let mut stats = DceStats {
        blocks: util::remove_unreachable(func),
        ..DceStats::default()
    };

    let mut live_insts = EntitySet::<Inst>::new();
    let mut live_values = EntitySet::<Value>::new();
    let mut work: Vec<Value> = Vec::new();
    let mark = |v: Value, live_values: &mut EntitySet<Value>, work: &mut Vec<Value>| {
        if live_values.insert(v) {
            work.push(v);
        }
    };
    for &b in &func.layout {
        let data = &func.blocks[b];
        for &inst in &data.insts {
            if !is_speculatable(func, inst) {
                live_insts.insert(inst);
                for &a in &func.insts[inst].args {
                    mark(a, &mut live_values, &mut work);
                }
            }
        }
        if let Some(term) = &data.term {
            for &a in term.args() {
                mark(a, &mut live_values, &mut work);
            }
        }
    }
    while let Some(v) = work.pop() {
        match func.values[v].def {
            ValueDef::Result(inst, _) => {
                if live_insts.insert(inst) {
                    for &a in &func.insts[inst].args {
                        mark(a, &mut live_values, &mut work);
                    }
                }
            }
            ValueDef::Phi(b) => {
                if let Some(phi) = func.blocks[b].phis.iter().find(|p| p.value == v) {
                    for &(_, a) in &phi.incoming {
                        mark(a, &mut live_values, &mut work);
                    }
                }
            }
            ValueDef::Param(_) | ValueDef::Const(_) => {}
        }
    }

    let layout = func.layout.clone();
    for b in layout {
        let data = &mut func.blocks[b];
        let before = data.insts.len();
        data.insts.retain(|i| live_insts.contains(*i));
        stats.insts += before - data.insts.len();
        let before = data.phis.len();
        data.phis.retain(|p| live_values.contains(p.value));
        stats.phis += before - data.phis.len();
    }
    stats
}
