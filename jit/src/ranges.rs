//! Indices proved inside their slice, whose `load` or `store` needs no bounds check.
//!
//! A counted loop reads `x[i]` in a block reached only when `icmp lt %i, %n`
//! held, with `%n = len %x` (or `%n = isub (len %x), k`), and `%i` starts at 0 and
//! only grows: then `0 <= i + c < len x` for `0 <= c <= k`, and the check of
//! `x[i + c]` cannot fail. [`Ranges`] proves exactly that:
//!
//! - **Upper bounds** come from branches. If a block `B` is reached only through
//!   the edge `A -> T` of `br %c, T, F` (`T` has `A` as its one predecessor and
//!   dominates `B`), `%c` held when `B` runs, for the very SSA values it compared
//!   (a value compared at `A` cannot be redefined between `A` and `B` without
//!   another path to `B` that avoids `A`). From `icmp` (signed) and its negation on
//!   the other edge, a fact `u < len(s) - k` is kept when the bound is `len s`,
//!   `isub (len s), k` or `iadd (len s), -k` with a literal `k`.
//! - **Non-negative values** are the greatest set closed under: literals `>= 0`,
//!   `len`, phis whose incoming values all are, and `iadd x, c` with a literal
//!   `0 <= c <= MAX_INDEX_OFFSET` (2^20) where `x` is and is bounded above by a slice's length in the
//!   block of the addition (so the addition cannot wrap: lengths are below 2^61).
//!
//! - **Equal lengths** come from the entry block: after `trap_if %c` there, with
//!   `%c = icmp ne (len a), (len b)`, every other block runs only if `a` and `b`
//!   have one length (derived code says so of a slice and its shadow), so a fact
//!   about one is a fact about the other.
//!
//! An access `s[b + c]` (`b` non-negative, `0 <= c <= k`) in a block with the fact
//! `b < len(s) - k` is in bounds. Anything else keeps its check, so an index out
//! of bounds is still the error the interpreter raises.

use std::collections::{HashMap, HashSet};

use gradlift_ir::dominators::DominatorTree;
use gradlift_ir::flowgraph::ControlFlowGraph;
use gradlift_ir::{
    Block, CmpPred, Function, Imm, Opcode, Scalar, Terminator, Type, Value, ValueDef,
};

use crate::lanes::split_index;

/// Functions with more values are not analysed (the fixpoint is quadratic at
/// worst); their accesses keep their checks.
const MAX_VALUES: usize = 20_000;

/// How many dominators up a block's facts are looked for.
const MAX_DEPTH: usize = 64;

/// The facts of a function ([module docs](self)).
#[derive(Default)]
pub(crate) struct Ranges {
    /// Per block: `(u, s, k)` for `u < len(s) - k`, `s` as [`Ranges::same_len`]
    /// names it.
    upper: HashMap<Block, Vec<(Value, Value, i64)>>,
    nonneg: HashSet<Value>,
    /// Per slice known to have the length of another, that other (one name per
    /// group), outside the entry block.
    same_len: HashMap<Value, Value>,
    entry: Option<Block>,
}

impl Ranges {
    pub(crate) fn new(func: &Function, cfg: &ControlFlowGraph, dom: &DominatorTree) -> Ranges {
        if func.values.len() > MAX_VALUES {
            return Ranges::default();
        }
        let entry = func.entry();
        let same_len = equal_lengths(func);
        let name = |s: Value| same_len.get(&s).copied().unwrap_or(s);
        let mut upper: HashMap<Block, Vec<(Value, Value, i64)>> = HashMap::new();
        for &b in cfg.reverse_postorder() {
            let mut facts = Vec::new();
            let mut a = b;
            for _ in 0..MAX_DEPTH {
                let Some(up) = dom.idom(a) else { break };
                if let Some(Terminator::Br {
                    cond,
                    then_dest,
                    else_dest,
                }) = &func.blocks[up].term
                    && then_dest != else_dest
                {
                    for (dest, holds) in [(*then_dest, true), (*else_dest, false)] {
                        if cfg.preds(dest) == [up] && dom.dominates(dest, b) {
                            facts.extend(fact(func, *cond, holds).map(|(u, s, k)| (u, name(s), k)));
                        }
                    }
                }
                a = up;
            }
            if !facts.is_empty() {
                upper.insert(b, facts);
            }
        }
        let mut r = Ranges {
            upper,
            nonneg: HashSet::new(),
            same_len,
            entry,
        };
        r.nonneg = r.nonneg_values(func, cfg);
        r
    }

    /// Whether `x < len(s) - k` for some `k >= c` holds in `b`.
    fn below(&self, b: Block, x: Value, s: Value, c: i64) -> bool {
        let s = match self.same_len.get(&s) {
            Some(&t) if Some(b) != self.entry => t,
            _ => s,
        };
        self.upper
            .get(&b)
            .is_some_and(|f| f.iter().any(|&(u, t, k)| u == x && t == s && c <= k))
    }

    /// Whether `x` is bounded above by some slice's length in `b`.
    fn bounded(&self, b: Block, x: Value) -> bool {
        self.upper
            .get(&b)
            .is_some_and(|f| f.iter().any(|&(u, _, k)| u == x && k >= 0))
    }

    /// The greatest set of non-negative values ([module docs](self)).
    fn nonneg_values(&self, func: &Function, cfg: &ControlFlowGraph) -> HashSet<Value> {
        // The block of each instruction's result.
        let mut block_of: HashMap<Value, Block> = HashMap::new();
        for &b in cfg.reverse_postorder() {
            for &inst in &func.blocks[b].insts {
                for &r in &func.insts[inst].results {
                    block_of.insert(r, b);
                }
            }
        }
        let mut set: HashSet<Value> = func
            .values
            .iter()
            .filter(|(_, d)| d.ty == Type::I64)
            .map(|(v, _)| v)
            .collect();
        loop {
            let drop: Vec<Value> = set
                .iter()
                .copied()
                .filter(|&v| !self.nonneg_given(func, &block_of, &set, v))
                .collect();
            if drop.is_empty() {
                return set;
            }
            for v in drop {
                set.remove(&v);
            }
        }
    }

    fn nonneg_given(
        &self,
        func: &Function,
        block_of: &HashMap<Value, Block>,
        set: &HashSet<Value>,
        v: Value,
    ) -> bool {
        match func.value_def(v) {
            ValueDef::Const(Scalar::I64(c)) => c >= 0,
            ValueDef::Phi(b) => func.blocks[b]
                .phis
                .iter()
                .find(|p| p.value == v)
                .is_some_and(|p| {
                    !p.incoming.is_empty() && p.incoming.iter().all(|&(_, x)| set.contains(&x))
                }),
            ValueDef::Result(inst, 0) => {
                let d = &func.insts[inst];
                match d.opcode {
                    Opcode::Len => true,
                    Opcode::Iadd => {
                        let (x, c) = split_index(func, v);
                        x != v
                            && c >= 0
                            && set.contains(&x)
                            && block_of.get(&v).is_some_and(|&b| self.bounded(b, x))
                    }
                    _ => false,
                }
            }
            _ => false,
        }
    }

    /// Whether `s[index]` in block `b` is proved in bounds.
    pub(crate) fn in_bounds(&self, func: &Function, b: Block, s: Value, index: Value) -> bool {
        let (base, c) = split_index(func, index);
        (self.nonneg.contains(&base) && self.below(b, base, s, c))
            || (base != index && self.nonneg.contains(&index) && self.below(b, index, s, 0))
    }
}

/// The slices of equal length by the `trap_if`s of the entry block
/// ([module docs](self)): each slice of a group to one of them.
fn equal_lengths(func: &Function) -> HashMap<Value, Value> {
    let mut name: HashMap<Value, Value> = HashMap::new();
    let Some(entry) = func.entry() else {
        return name;
    };
    let len_of = |v: Value| match func.value_def(v) {
        ValueDef::Result(i, 0) if func.insts[i].opcode == Opcode::Len => {
            Some(func.insts[i].args[0])
        }
        _ => None,
    };
    for &inst in &func.blocks[entry].insts {
        let d = &func.insts[inst];
        if d.opcode != Opcode::TrapIf {
            continue;
        }
        let ValueDef::Result(c, 0) = func.value_def(d.args[0]) else {
            continue;
        };
        let cd = &func.insts[c];
        if cd.opcode != Opcode::Icmp || cd.imm != Imm::Cmp(CmpPred::Ne) {
            continue;
        }
        let (Some(a), Some(b)) = (len_of(cd.args[0]), len_of(cd.args[1])) else {
            continue;
        };
        let find = |name: &HashMap<Value, Value>, s: Value| name.get(&s).copied().unwrap_or(s);
        let (ra, rb) = (find(&name, a), find(&name, b));
        if ra != rb {
            for v in name.values_mut() {
                if *v == rb {
                    *v = ra;
                }
            }
            name.insert(rb, ra);
            name.insert(ra, ra);
        }
    }
    name
}

/// The fact `u < len(s) - k` that `cond` being `holds` gives, if any.
fn fact(func: &Function, cond: Value, holds: bool) -> Option<(Value, Value, i64)> {
    let ValueDef::Result(inst, 0) = func.value_def(cond) else {
        return None;
    };
    let d = &func.insts[inst];
    let (Opcode::Icmp, Imm::Cmp(p)) = (d.opcode, d.imm) else {
        return None;
    };
    let (x, y) = (d.args[0], d.args[1]);
    // As `u < v` (strict) or `u <= v`.
    let (u, v, strict) = match (p, holds) {
        (CmpPred::Lt, true) | (CmpPred::Ge, false) => (x, y, true),
        (CmpPred::Le, true) | (CmpPred::Gt, false) => (x, y, false),
        (CmpPred::Gt, true) | (CmpPred::Le, false) => (y, x, true),
        (CmpPred::Ge, true) | (CmpPred::Lt, false) => (y, x, false),
        _ => return None,
    };
    let (s, k) = length_minus(func, v)?;
    // `u <= len - k` is `u < len - (k - 1)`.
    Some((u, s, if strict { k } else { k.checked_sub(1)? }))
}

/// `v` as `len(s) - k`: `len s`, `isub (len s), k` or `iadd (len s), -k`.
fn length_minus(func: &Function, v: Value) -> Option<(Value, i64)> {
    let ValueDef::Result(inst, 0) = func.value_def(v) else {
        return None;
    };
    let d = &func.insts[inst];
    let lit = |w: Value| match func.value_def(w) {
        ValueDef::Const(Scalar::I64(c)) => Some(c),
        _ => None,
    };
    let of_len = |w: Value| -> Option<Value> {
        let ValueDef::Result(i, 0) = func.value_def(w) else {
            return None;
        };
        (func.insts[i].opcode == Opcode::Len).then(|| func.insts[i].args[0])
    };
    match d.opcode {
        Opcode::Len => Some((d.args[0], 0)),
        Opcode::Isub => {
            let k = lit(d.args[1])?;
            Some((of_len(d.args[0])?, k))
        }
        Opcode::Iadd => {
            let (l, c) = match (lit(d.args[0]), lit(d.args[1])) {
                (None, Some(c)) => (d.args[0], c),
                (Some(c), None) => (d.args[1], c),
                _ => return None,
            };
            Some((of_len(l)?, c.checked_neg()?))
        }
        _ => None,
    }
}
