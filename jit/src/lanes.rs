//! Pairs of lanes lowered as one `f64x2` operation.
//!
//! A rule of width N computes N lanes of each value that carries a tangent or a
//! cotangent, and writes each statement that makes one N times in a row, lane
//! `j` reading lane `j` of its operands. The widening pass records which values
//! are the lanes of one value ([`Function::lane_groups`]); this module pairs lanes
//! `2m` and `2m + 1` of a group, and the lowering computes a pair with one
//! Cranelift operation on `f64x2` (SSE2 on x86-64, NEON on aarch64), half the
//! instructions, and half the registers for the lanes a loop carries.
//!
//! The groups are only a hint. A pair `(a, b)` is lowered as a vector only if
//! [`LanePlan::new`] proves that it computes exactly what the two scalar
//! statements compute, lane by lane (IEEE arithmetic on `f64x2` rounds each lane
//! as the scalar operation does):
//!
//! - `a` and `b` are results of the same float operation (`fadd`, `fsub`, `fmul`,
//!   `fdiv`, `fneg`, `fabs`, `sqrt`) in one block, `a` first, and no statement
//!   between them reads `a` (its scalar is made where `b` is); each pair of
//!   operands is a valid pair itself, one value shared by both (a splat), or two
//!   parameters or constants (built once);
//! - or loads of `x[k + c]` and `x[k + c + 1]` (one slice, one base) in one block
//!   with nothing between that writes memory or could fail other than loads
//!   (each keeps its own bounds check, in its place; the vector is loaded where
//!   `b` was);
//! - or phis of one block whose incoming values are such operand pairs on every
//!   edge (one `f64x2` block parameter).
//!
//! The pairs are the greatest set closed under these rules (a fixpoint that
//! starts from every candidate and drops what fails). Pairs of stores
//! (`x[k + c]`, `x[k + c + 1]`, one after the other, of a valid pair) become one
//! vector store when the lowering knows both elements in bounds.

use std::collections::{HashMap, HashSet};

use gradlift_ir::ops::Shape;
use gradlift_ir::{Block, Function, Inst, Opcode, Scalar, Type, Value, ValueDef};

/// The operations a pair may be lowered as.
fn vector_op(op: Opcode) -> bool {
    matches!(
        op,
        Opcode::Fadd
            | Opcode::Fsub
            | Opcode::Fmul
            | Opcode::Fdiv
            | Opcode::Fneg
            | Opcode::Fabs
            | Opcode::Sqrt
    )
}

/// Whether `op` neither fails nor touches memory: the scalar ops but integer
/// division (by zero, an error), and `len`.
pub(crate) fn quiet(op: Opcode) -> bool {
    (op.shape().is_scalar() || op.shape() == Shape::Len)
        && !matches!(op, Opcode::Idiv | Opcode::Irem)
}

/// The largest offset of an index from its base that the lowering follows (lane
/// offsets of a rule of width N, small literal offsets of loops): small enough
/// that no addition of it to an index inside a slice can wrap.
pub(crate) const MAX_INDEX_OFFSET: i64 = 1 << 20;

/// The index `v` as a base and a constant offset: `(x, c)` for `iadd x, c` with
/// a literal `c` in `0..=MAX_INDEX_OFFSET`, else `(v, 0)`.
pub(crate) fn split_index(func: &Function, v: Value) -> (Value, i64) {
    if let ValueDef::Result(inst, 0) = func.value_def(v) {
        let d = &func.insts[inst];
        if d.opcode == Opcode::Iadd {
            for (x, y) in [(d.args[0], d.args[1]), (d.args[1], d.args[0])] {
                if let ValueDef::Const(Scalar::I64(c)) = func.value_def(y)
                    && (0..=MAX_INDEX_OFFSET).contains(&c)
                    && !matches!(func.value_def(x), ValueDef::Const(_))
                {
                    return (x, c);
                }
            }
        }
    }
    (v, 0)
}

/// The pairs of a function ([module docs](self)).
#[derive(Default)]
pub(crate) struct LanePlan {
    /// Each value of a valid pair: `(first, second)`.
    pairs: HashMap<Value, (Value, Value)>,
    /// Stores `a` followed by store `b` of the next element and a valid pair.
    store_pairs: HashMap<Inst, Inst>,
    /// The second store of each store pair.
    second_stores: HashSet<Inst>,
}

impl LanePlan {
    /// The plan of `func`: empty without lane groups.
    pub(crate) fn new(func: &Function) -> LanePlan {
        if func.lane_groups.is_empty() {
            return LanePlan::default();
        }
        // The block and index of each placed instruction.
        let mut pos: HashMap<Inst, (Block, usize)> = HashMap::new();
        for &b in &func.layout {
            for (i, &inst) in func.blocks[b].insts.iter().enumerate() {
                pos.insert(inst, (b, i));
            }
        }
        let mut cands: HashSet<(Value, Value)> = HashSet::new();
        for g in &func.lane_groups {
            for w in g.chunks_exact(2) {
                let (a, b) = (w[0], w[1]);
                let ok = |v: Value| func.values.get(v).is_some_and(|d| d.ty == Type::F64);
                if a != b && ok(a) && ok(b) {
                    cands.insert((a, b));
                }
            }
        }
        // A value in two candidates (never, from the widening) is in none.
        let mut seen: HashMap<Value, usize> = HashMap::new();
        for &(a, b) in &cands {
            *seen.entry(a).or_default() += 1;
            *seen.entry(b).or_default() += 1;
        }
        cands.retain(|(a, b)| seen[a] == 1 && seen[b] == 1);
        // The greatest fixpoint.
        loop {
            let bad: Vec<(Value, Value)> = cands
                .iter()
                .copied()
                .filter(|&(a, b)| !valid(func, &pos, &cands, a, b))
                .collect();
            if bad.is_empty() {
                break;
            }
            for p in bad {
                cands.remove(&p);
            }
        }
        let mut plan = LanePlan::default();
        for &(a, b) in &cands {
            plan.pairs.insert(a, (a, b));
            plan.pairs.insert(b, (a, b));
        }
        // Store pairs: `store x[k + c], a` then, with only quiet statements
        // between, `store x[k + c + 1], b`, with (a, b) a pair.
        for &blk in &func.layout {
            let insts = &func.blocks[blk].insts;
            for (i, &sa) in insts.iter().enumerate() {
                let d = &func.insts[sa];
                if d.opcode != Opcode::Store {
                    continue;
                }
                let Some(&sb) = insts[i + 1..]
                    .iter()
                    .find(|&&x| !quiet(func.insts[x].opcode))
                else {
                    continue;
                };
                let e = &func.insts[sb];
                if e.opcode != Opcode::Store || e.args[0] != d.args[0] {
                    continue;
                }
                let (ba, ca) = split_index(func, d.args[1]);
                let (bb, cb) = split_index(func, e.args[1]);
                if ba == bb
                    && cb == ca + 1
                    && cands.contains(&(d.args[2], e.args[2]))
                    && !plan.second_stores.contains(&sa)
                {
                    plan.store_pairs.insert(sa, sb);
                    plan.second_stores.insert(sb);
                }
            }
        }
        plan
    }

    /// The pair `v` is in, as `(first, second)`.
    pub(crate) fn pair(&self, v: Value) -> Option<(Value, Value)> {
        self.pairs.get(&v).copied()
    }

    /// The store that follows the store `a` as the second of a store pair.
    pub(crate) fn store_pair(&self, a: Inst) -> Option<Inst> {
        self.store_pairs.get(&a).copied()
    }

    /// Whether `(x, y)` can be a vector operand: a valid pair, one value, or
    /// two parameters or constants.
    pub(crate) fn operand(
        func: &Function,
        pairs: &HashSet<(Value, Value)>,
        x: Value,
        y: Value,
    ) -> bool {
        if x == y || pairs.contains(&(x, y)) {
            return true;
        }
        let leaf = |v: Value| matches!(func.value_def(v), ValueDef::Param(_) | ValueDef::Const(_));
        leaf(x) && leaf(y)
    }
}

/// Whether the candidate `(a, b)` computes what its two statements compute,
/// given the candidates `cands` ([module docs](self)).
fn valid(
    func: &Function,
    pos: &HashMap<Inst, (Block, usize)>,
    cands: &HashSet<(Value, Value)>,
    a: Value,
    b: Value,
) -> bool {
    match (func.value_def(a), func.value_def(b)) {
        (ValueDef::Phi(ba), ValueDef::Phi(bb)) if ba == bb => {
            let phis = &func.blocks[ba].phis;
            let (Some(pa), Some(pb)) = (
                phis.iter().find(|p| p.value == a),
                phis.iter().find(|p| p.value == b),
            ) else {
                return false;
            };
            pa.incoming.len() == pb.incoming.len()
                && pa.incoming.iter().all(|&(pred, x)| {
                    pb.incoming
                        .iter()
                        .find(|&&(q, _)| q == pred)
                        .is_some_and(|&(_, y)| LanePlan::operand(func, cands, x, y))
                })
        }
        (ValueDef::Result(ia, 0), ValueDef::Result(ib, 0)) => {
            let (Some(&(blk, i)), Some(&(blk2, j))) = (pos.get(&ia), pos.get(&ib)) else {
                return false;
            };
            let (da, db) = (&func.insts[ia], &func.insts[ib]);
            if blk != blk2 || i >= j || da.opcode != db.opcode || da.imm != db.imm {
                return false;
            }
            let between = &func.blocks[blk].insts[i + 1..j];
            // `a`'s scalar is made where `b` is: nothing between may read it.
            if between.iter().any(|&x| func.insts[x].args.contains(&a)) {
                return false;
            }
            match da.opcode {
                Opcode::Load => {
                    let (sa, sb) = (da.args[0], db.args[0]);
                    let (ka, ca) = split_index(func, da.args[1]);
                    let (kb, cb) = split_index(func, db.args[1]);
                    sa == sb
                        && ka == kb
                        && cb == ca + 1
                        && between.iter().all(|&x| {
                            let op = func.insts[x].opcode;
                            quiet(op) || op == Opcode::Load
                        })
                }
                op if vector_op(op) => {
                    da.args.len() == db.args.len()
                        && da
                            .args
                            .iter()
                            .zip(&db.args)
                            .all(|(&x, &y)| LanePlan::operand(func, cands, x, y))
                }
                _ => false,
            }
        }
        _ => false,
    }
}
