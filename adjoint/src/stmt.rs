//! One function per statement kind, each returning what the statement needs from the
//! forward pass and what its reverse does (Mooncake's `make_ad_stmts!` and its
//! `ADStmtInfo`). The [plan](crate::plan) collects them per block; the forward-pass
//! and pullback assembly ([`forward`](crate::forward), [`pullback`](crate::pullback))
//! place them.
//!
//! - [`inst_stmt`]: an instruction other than a call. Sub-cases: its result is not
//!   active (nothing to save, no reverse: integer and bool ops, values that reach no
//!   active result or depend on no active input, zero-derivative ops); its result is
//!   active (save what the rule reads for the active operands; the reverse adds each
//!   active operand's contribution, then resets the result's cotangent); a `load`
//!   with an active result (save the index and, for a local buffer, its shadow's
//!   handle; the reverse adds the result's cotangent into the shadow: `ds[i] +=
//!   ct[y]`); a `store` into a slice with a shadow (save the same; the reverse moves
//!   the shadow element into the stored value's cotangent: `ct[v] += ds[i]; ds[i] =
//!   0`, since what was overwritten has no influence on the outputs).
//! - Calls are planned by the [plan](crate::plan), which derives callee rules; their
//!   reverse is a [`RevStmt::Call`].
//! - [`phi_stmt`]: a phi. Not active: nothing. Active: nothing to save; the reverse
//!   takes its cotangent (then resets it) and adds it, on the edge from each
//!   predecessor, into the incoming value of that edge if that one is active.
//! - [`ret_stmt`]: a `ret`. The reverse seeds the cotangent of each active returned
//!   value with the pullback's parameter for that float result (an active return
//!   only).
//!
//! `jump` and `br` have no reverse of their own: the block stack (see
//! [`plan`](crate::plan)) routes control back.

use gradlift_ir::{Block, FuncId, Function, Inst, Opcode, Value, ValueDef};
use smallvec::SmallVec;

use crate::activity::ActivityInfo;
use crate::config::{Activity, RuleConfig};
use crate::rules::{FloatRule, OpRule, op_rule};

/// Something the forward pass saves for the pullback: a scalar value of the
/// primal, or the handle of a local buffer kept on the tape.
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug)]
pub(crate) enum SaveItem {
    /// A scalar value of the primal.
    Value(Value),
    /// The handle of the tape buffer that replaces this `alloc`'s buffer (the
    /// pullback needs the primal buffer, to pass it to a callee's pullback).
    Buf(Value),
    /// The handle of this `alloc`'s shadow buffer.
    Shadow(Value),
}

/// The reverse of a statement, in the order the pullback needs them.
#[derive(Clone, Debug)]
pub(crate) enum RevStmt {
    /// An instruction with an active float result and a rule.
    Float(RevInst),
    /// `%y = load %s[%i]` with an active result: `ds[i] += ct[y]`.
    Load {
        /// The instruction.
        inst: Inst,
    },
    /// `store %s[%i], %v` into a slice with a shadow: `ct[v] += ds[i]; ds[i] = 0`.
    Store {
        /// The instruction.
        inst: Inst,
        /// Whether `%v` is active (else its cotangent is dropped).
        value_active: bool,
    },
    /// A call whose derivative is taken.
    Call {
        /// The instruction.
        inst: Inst,
        /// How.
        call: CallRule,
    },
}

/// How a differentiated call is reversed.
#[derive(Clone, PartialEq, Eq, Debug)]
pub(crate) enum CallRule {
    /// Through the callee's derived rule (or, for `overlay @g = @h`, `@h`'s): the
    /// forward pass calls `fwd`, the pullback `rvs`.
    Derived {
        /// The forward pass of the callee's rule.
        fwd: FuncId,
        /// Its pullback.
        rvs: FuncId,
        /// The activities the rule was derived for.
        config: RuleConfig,
        /// `overlay`: the forward pass calls the callee itself for the primal value
        /// and `fwd` for the tape, whose results it drops.
        overlay: bool,
        /// The arguments (by index) whose current cotangents `rvs` takes after the
        /// seeds and returns with its terms added, in place of a fresh cotangent:
        /// a checkpointed loop's floats from outside ([`revolve`](crate::revolve)).
        inout: Vec<usize>,
    },
    /// `vjp @g = @r`: the forward pass calls `@g`, the pullback `@r` with the saved
    /// arguments and the results' cotangents.
    Vjp {
        /// `@r`.
        rule: FuncId,
    },
}

impl RevStmt {
    /// The instruction reversed.
    pub(crate) fn inst(&self) -> Inst {
        match self {
            RevStmt::Float(r) => r.inst,
            RevStmt::Load { inst } | RevStmt::Store { inst, .. } | RevStmt::Call { inst, .. } => {
                *inst
            }
        }
    }

    /// The values whose cotangents the reverse reads and resets (the results).
    pub(crate) fn taken(&self, func: &Function, act: &ActivityInfo) -> SmallVec<[Value; 2]> {
        let d = &func.insts[self.inst()];
        match self {
            RevStmt::Float(_) | RevStmt::Load { .. } => d.results.iter().copied().collect(),
            RevStmt::Store { .. } => SmallVec::new(),
            RevStmt::Call { .. } => d
                .results
                .iter()
                .copied()
                .filter(|&r| act.is_active(r, func))
                .collect(),
        }
    }

    /// The values whose cotangents the reverse adds to (the active operands).
    pub(crate) fn added(&self, func: &Function, act: &ActivityInfo) -> SmallVec<[Value; 3]> {
        let d = &func.insts[self.inst()];
        match self {
            RevStmt::Float(r) => r.operands.iter().map(|&k| d.args[k]).collect(),
            RevStmt::Load { .. } => SmallVec::new(),
            RevStmt::Store { value_active, .. } => {
                if *value_active {
                    SmallVec::from_slice(&[d.args[2]])
                } else {
                    SmallVec::new()
                }
            }
            RevStmt::Call { call, .. } => match call {
                CallRule::Derived { config, .. } => d
                    .args
                    .iter()
                    .zip(&config.params)
                    .filter(|&(_, &a)| a == Activity::Active)
                    .map(|(&v, _)| v)
                    .collect(),
                CallRule::Vjp { .. } => d
                    .args
                    .iter()
                    .copied()
                    .filter(|&v| act.is_active(v, func))
                    .collect(),
            },
        }
    }
}

/// The reverse of an instruction with an active result.
#[derive(Clone, Debug)]
pub(crate) struct RevInst {
    /// The instruction.
    pub(crate) inst: Inst,
    /// Its rule.
    pub(crate) rule: FloatRule,
    /// The operands, by index, whose cotangents get a contribution (the active ones).
    pub(crate) operands: SmallVec<[usize; 3]>,
}

/// What an instruction needs from the forward pass, and its reverse.
#[derive(Clone, Debug, Default)]
pub(crate) struct InstInfo {
    /// What its reverse reads: saved at the end of its block (no constants).
    pub(crate) saves: SmallVec<[SaveItem; 3]>,
    /// Its reverse, if it has one.
    pub(crate) reverse: Option<RevStmt>,
}

/// Saves `v` unless it is a constant (the pullback writes constants itself).
fn save_value(func: &Function, saves: &mut SmallVec<[SaveItem; 3]>, v: Value) {
    let item = SaveItem::Value(v);
    if !matches!(func.value_def(v), ValueDef::Const(_)) && !saves.contains(&item) {
        saves.push(item);
    }
}

/// Saves the handle of `s`'s shadow, if `s` is a local buffer (a parameter's shadow
/// is a parameter of the pullback).
fn save_shadow(func: &Function, saves: &mut SmallVec<[SaveItem; 3]>, s: Value) {
    if matches!(func.value_def(s), ValueDef::Result(..)) {
        saves.push(SaveItem::Shadow(s));
    }
}

/// An instruction other than a call. See the [module docs](self).
pub(crate) fn inst_stmt(func: &Function, act: &ActivityInfo, inst: Inst) -> InstInfo {
    let d = &func.insts[inst];
    match d.opcode {
        Opcode::Load => {
            let mut info = InstInfo::default();
            if act.is_active(d.results[0], func) && act.has_shadow(d.args[0], func) {
                save_value(func, &mut info.saves, d.args[1]);
                save_shadow(func, &mut info.saves, d.args[0]);
                info.reverse = Some(RevStmt::Load { inst });
            }
            return info;
        }
        Opcode::Store => {
            let mut info = InstInfo::default();
            if act.has_shadow(d.args[0], func) {
                save_value(func, &mut info.saves, d.args[1]);
                save_shadow(func, &mut info.saves, d.args[0]);
                info.reverse = Some(RevStmt::Store {
                    inst,
                    value_active: act.is_active(d.args[2], func),
                });
            }
            return info;
        }
        _ => {}
    }
    let Some(&result) = d.results.first() else {
        return InstInfo::default();
    };
    if !act.is_active(result, func) {
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
        if !act.is_active(a, func) {
            continue;
        }
        operands.push(k);
        let read = reads.args.iter().map(|&i| d.args[i]);
        for v in read.chain(reads.result.then_some(result)) {
            save_value(func, &mut info.saves, v);
        }
    }
    info.reverse = Some(RevStmt::Float(RevInst {
        inst,
        rule,
        operands,
    }));
    info
}

/// The reverse of a phi, if it is active: its value, and per predecessor (in the
/// order of the plan's predecessor list) the incoming value to add its cotangent
/// into, if that one is active.
#[derive(Clone, Debug)]
pub(crate) struct RevPhi {
    /// The phi's value.
    pub(crate) phi: Value,
    /// For each predecessor, the active incoming value of that edge, if any.
    pub(crate) edges: SmallVec<[Option<Value>; 2]>,
}

/// A phi. See the [module docs](self). `preds` are the block's predecessors, as the
/// plan numbers them.
pub(crate) fn phi_stmt(
    func: &Function,
    act: &ActivityInfo,
    block: Block,
    phi: Value,
    preds: &[Block],
) -> Option<RevPhi> {
    if !act.is_active(phi, func) {
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
                .filter(|&v| act.is_active(v, func))
        })
        .collect();
    Some(RevPhi { phi, edges })
}

/// A `ret`. See the [module docs](self). `seeded[j]` is the pullback parameter that
/// carries the cotangent of result `j`, if it is seeded. Returns the seeds:
/// (returned value, pullback parameter index).
pub(crate) fn ret_stmt(
    func: &Function,
    act: &ActivityInfo,
    vals: &[Value],
    seeded: &[Option<usize>],
) -> Vec<(Value, usize)> {
    vals.iter()
        .zip(seeded)
        .filter_map(|(&v, &s)| Some((v, s?)))
        .filter(|&(v, _)| act.is_active(v, func))
        .collect()
}
