//! One function per statement kind, each returning what the statement needs from the
//! forward pass and what its reverse does (Mooncake's `make_ad_stmts!` and its
//! `ADStmtInfo`). The [plan](crate::plan) collects them per block; the forward-pass
//! and pullback assembly ([`forward`](crate::forward), [`pullback`](crate::pullback))
//! place them.
//!
//! - [`inst_stmt`]: an instruction. Sub-cases: its result is not active (nothing to
//!   save, no reverse: integer and bool ops, values that reach no active result or
//!   depend on no active input, zero-derivative ops); its result is active (save
//!   what the rule reads for the active operands; the reverse adds each active
//!   operand's contribution, then resets the result's cotangent).
//! - [`phi_stmt`]: a phi. Not active: nothing. Active: nothing to save; the reverse
//!   takes its cotangent (then resets it) and adds it, on the edge from each
//!   predecessor, into the incoming value of that edge if that one is active.
//! - [`ret_stmt`]: a `ret`. The reverse seeds the cotangent of each active returned
//!   value with the pullback's parameter for that float result (an active return
//!   only).
//!
//! `jump` and `br` have no reverse of their own: the block stack (see
//! [`plan`](crate::plan)) routes control back.

use gradlift_ir::{Block, Function, Inst, Value, ValueDef};
use smallvec::SmallVec;

use crate::activity::ActivityInfo;
use crate::rules::{FloatRule, OpRule, op_rule};

/// The reverse of an instruction with an active result.
#[derive(Clone, Debug)]
pub struct RevInst {
    /// The instruction.
    pub inst: Inst,
    /// Its rule.
    pub rule: FloatRule,
    /// The operands, by index, whose cotangents get a contribution (the active ones).
    pub operands: SmallVec<[usize; 3]>,
}

/// What an instruction needs from the forward pass, and its reverse.
#[derive(Clone, Debug, Default)]
pub struct InstInfo {
    /// Values its reverse reads: saved at the end of its block (no constants).
    pub saves: SmallVec<[Value; 3]>,
    /// Its reverse, if its result is active.
    pub reverse: Option<RevInst>,
}

/// An instruction. See the [module docs](self).
pub fn inst_stmt(func: &Function, act: &ActivityInfo, inst: Inst) -> InstInfo {
    let d = &func.insts[inst];
    let Some(&result) = d.results.first() else {
        return InstInfo::default();
    };
    if !act.is_active(result) {
        return InstInfo::default();
    }
    let OpRule::Float(rule) = op_rule(d.opcode) else {
        return InstInfo::default();
    };
    let mut info = InstInfo::default();
    let mut operands = SmallVec::new();
    for (k, &a) in d.args.iter().enumerate() {
        let Some(Some(reads)) = rule.operands.get(k) else {
            continue;
        };
        if !act.is_active(a) {
            continue;
        }
        operands.push(k);
        let read = reads.args.iter().map(|&i| d.args[i]);
        let read = read.chain(reads.result.then_some(result));
        for v in read {
            if !matches!(func.value_def(v), ValueDef::Const(_)) && !info.saves.contains(&v) {
                info.saves.push(v);
            }
        }
    }
    info.reverse = Some(RevInst {
        inst,
        rule,
        operands,
    });
    info
}

/// The reverse of a phi, if it is active: its value, and per predecessor (in the
/// order of the plan's predecessor list) the incoming value to add its cotangent
/// into, if that one is active.
#[derive(Clone, Debug)]
pub struct RevPhi {
    /// The phi's value.
    pub phi: Value,
    /// For each predecessor, the active incoming value of that edge, if any.
    pub edges: SmallVec<[Option<Value>; 2]>,
}

/// A phi. See the [module docs](self). `preds` are the block's predecessors, as the
/// plan numbers them.
pub fn phi_stmt(
    func: &Function,
    act: &ActivityInfo,
    block: Block,
    phi: Value,
    preds: &[Block],
) -> Option<RevPhi> {
    if !act.is_active(phi) {
        return None;
    }
    let data = func.blocks[block].phis.iter().find(|p| p.value == phi)?;
    let edges = preds
        .iter()
        .map(|&p| {
            data.incoming
                .iter()
                .find(|&&(b, _)| b == p)
                .map(|&(_, v)| v)
                .filter(|&v| act.is_active(v))
        })
        .collect();
    Some(RevPhi { phi, edges })
}

/// A `ret`. See the [module docs](self). `seeded[j]` is the pullback parameter that
/// carries the cotangent of result `j`, if it is seeded. Returns the seeds:
/// (returned value, pullback parameter index).
pub fn ret_stmt(
    act: &ActivityInfo,
    vals: &[Value],
    seeded: &[Option<usize>],
) -> Vec<(Value, usize)> {
    vals.iter()
        .zip(seeded)
        .filter_map(|(&v, &s)| Some((v, s?)))
        .filter(|&(v, _)| act.is_active(v))
        .collect()
}
