//! Loop versioning: one test before a counted loop instead of bounds checks in it.
//!
//! An innermost loop counted by `%i` reads `x[a*i + b]` with `b` invariant. The
//! index runs through a straight line, so if both of its ends over the loop's
//! counter range are inside the slice, every access in between is too. The
//! lowering then makes two copies of the loop ([`Lower`](crate::lower)): the
//! original, with every check, and a copy in which the accesses proved this way
//! have none. A *dispatch* block on the loop's entry edge computes the ends (in
//! 128-bit arithmetic, so nothing wraps) and enters the copy when every access
//! is in bounds over the whole range, the original otherwise. Where any access
//! could fail, the original runs, so an error is raised at the same access, in
//! the same iteration, with the same message as the interpreter's; the copy
//! runs only where no covered check could have failed.
//!
//! The counter ranges (valid in the *guarded* blocks: those dominated by the
//! header's in-loop successor, whose only predecessor is the header):
//!
//! - **up**: `%i = phi [outside: init, latches: iadd %i, 1]`, the header branching
//!   into the loop on `icmp lt %i, %n` (or an equivalent form) with `%n`
//!   invariant: in the guarded blocks `init <= i <= n - 1` (`i` only grows by 1
//!   while below `n`, so it never wraps).
//! - **down** (the pullback's reversed loops): `%r = phi [outside: init, latches:
//!   %d]`, `%d = iadd %r, -1` in the header, which leaves the loop on
//!   `icmp eq %r, 0`: with `init >= 0` (tested by the dispatch), `0 <= d <= init - 1`
//!   in the guarded blocks.
//!
//! An index is affine in the counter when it is made of `iadd`, `isub` and `imul`
//! by a literal from the counter, literals and values defined outside the loop
//! ([`Affine`]). Every value the loop defines becomes a Cranelift variable, so the
//! two copies' definitions meet where the loop is left.
//!
//! Only loops that gain are versioned: innermost, at most [`MAX_INSTS`]
//! instructions, one entry edge, every value one Cranelift value (no slice or
//! lane pair is defined in the loop), and at least one access whose check
//! [`Ranges`] cannot already drop.

use std::collections::{HashMap, HashSet};

use gradlift_ir::dominators::DominatorTree;
use gradlift_ir::flowgraph::ControlFlowGraph;
use gradlift_ir::loops::LoopForest;
use gradlift_ir::{
    Block, CmpPred, Function, Imm, Opcode, Scalar, Terminator, Type, Value, ValueDef,
};

use crate::lanes::LanePlan;
use crate::lower::clif_types;
use crate::ranges::Ranges;

/// The most instructions a versioned loop may have (it is lowered twice).
pub(crate) const MAX_INSTS: usize = 256;

/// The most invariant terms in one index.
const MAX_TERMS: usize = 4;

/// The largest magnitude of a literal factor in an index.
pub(crate) const MAX_FACTOR: i64 = 1 << 20;

/// The largest magnitude of a literal term in an index.
pub(crate) const MAX_LITERAL: i64 = 1 << 40;

/// The largest magnitude of a value the dispatch computes with (the counter's
/// ends and the invariant terms); it tests this before trusting its sums: with
/// at most [`MAX_TERMS`] terms, factors of at most [`MAX_FACTOR`] and a literal of
/// at most [`MAX_LITERAL`], every sum and product stays below 2^54.
pub(crate) const MAX_VALUE: i64 = 1 << 31;

/// How a loop counts ([module docs](self)).
#[derive(Clone, Copy, Debug)]
pub(crate) enum Counter {
    /// `init <= i <= bound - 1`.
    Up { init: Value, bound: Value },
    /// `0 <= d <= init - 1`, and the dispatch tests `init >= 0`.
    Down { init: Value },
}

/// `a * counter + c + sum of coefficient * value` (values invariant).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Affine {
    pub(crate) a: i64,
    pub(crate) c: i64,
    pub(crate) terms: Vec<(Value, i64)>,
}

impl Affine {
    fn konst(c: i64) -> Affine {
        Affine {
            a: 0,
            c,
            terms: Vec::new(),
        }
    }

    fn add(mut self, other: Affine, sign: i64) -> Option<Affine> {
        self.a = self.a.checked_add(other.a.checked_mul(sign)?)?;
        self.c = self.c.checked_add(other.c.checked_mul(sign)?)?;
        for (v, k) in other.terms {
            let k = k.checked_mul(sign)?;
            match self.terms.iter_mut().find(|(w, _)| *w == v) {
                Some((_, j)) => *j = j.checked_add(k)?,
                None => self.terms.push((v, k)),
            }
        }
        self.terms.retain(|&(_, k)| k != 0);
        self.bounded()
    }

    fn scale(mut self, k: i64) -> Option<Affine> {
        self.a = self.a.checked_mul(k)?;
        self.c = self.c.checked_mul(k)?;
        for (_, j) in &mut self.terms {
            *j = j.checked_mul(k)?;
        }
        self.terms.retain(|&(_, k)| k != 0);
        self.bounded()
    }

    fn bounded(self) -> Option<Affine> {
        let ok = |k: i64| k.unsigned_abs() <= MAX_FACTOR as u64;
        (ok(self.a)
            && self.c.unsigned_abs() <= MAX_LITERAL as u64
            && self.terms.len() <= MAX_TERMS
            && self.terms.iter().all(|&(_, k)| ok(k)))
        .then_some(self)
    }
}

/// One covered access: `slice[index]` in a guarded block, the index affine.
#[derive(Clone, Debug)]
pub(crate) struct Access {
    pub(crate) slice: Value,
    pub(crate) index: Affine,
}

/// A loop to lower twice ([module docs](self)).
#[derive(Clone, Debug)]
pub(crate) struct Versioned {
    pub(crate) header: Block,
    /// The one predecessor from outside the loop.
    pub(crate) entry: Block,
    /// The loop's blocks in reverse postorder, the header first.
    pub(crate) blocks: Vec<Block>,
    pub(crate) counter: Counter,
    /// The distinct accesses the dispatch tests.
    pub(crate) accesses: Vec<Access>,
    /// By guarded block, the `(slice, index)` pairs that need no check in the copy.
    pub(crate) unchecked: HashMap<Block, HashSet<(Value, Value)>>,
    /// The slices the loop reads or writes whose address the lowering keeps in a
    /// stack slot and reloads in the dispatch: parameters and the results of
    /// `alloc` and `tape_view` (one definition, so the slot always holds the
    /// value the loop sees). In the order they are first accessed.
    pub(crate) reloaded: Vec<Value>,
}

/// The loops to version, by header.
pub(crate) fn plan(
    func: &Function,
    cfg: &ControlFlowGraph,
    dom: &DominatorTree,
    forest: &LoopForest,
    lanes: &LanePlan,
    ranges: &Ranges,
) -> HashMap<Block, Versioned> {
    let mut has_child = vec![false; forest.len()];
    for l in forest.loops() {
        if let Some(p) = l.parent() {
            has_child[p] = true;
        }
    }
    let mut out = HashMap::new();
    for (n, l) in forest.loops().iter().enumerate() {
        if has_child[n] {
            continue;
        }
        if let Some(v) = one(func, cfg, dom, lanes, ranges, l.header(), l.blocks()) {
            out.insert(v.header, v);
        }
    }
    out
}

fn one(
    func: &Function,
    cfg: &ControlFlowGraph,
    dom: &DominatorTree,
    lanes: &LanePlan,
    ranges: &Ranges,
    h: Block,
    blocks: &[Block],
) -> Option<Versioned> {
    let in_loop: HashSet<Block> = blocks.iter().copied().collect();
    let entries: Vec<Block> = cfg
        .preds(h)
        .iter()
        .copied()
        .filter(|p| !in_loop.contains(p))
        .collect();
    let [entry] = entries[..] else { return None };
    // The entry edge is redirected to the dispatch: one edge only.
    match &func.blocks[entry].term {
        Some(Terminator::Jump(t)) if *t == h => {}
        Some(Terminator::Br {
            then_dest,
            else_dest,
            ..
        }) if (*then_dest == h) != (*else_dest == h) => {}
        _ => return None,
    }
    let latches: Vec<Block> = cfg
        .preds(h)
        .iter()
        .copied()
        .filter(|p| in_loop.contains(p))
        .collect();
    if latches.is_empty() {
        return None;
    }
    // Every value defined in the loop: one Cranelift value, no lane pair.
    let mut defined: HashSet<Value> = HashSet::new();
    let mut insts = 0;
    for &b in blocks {
        let d = &func.blocks[b];
        defined.extend(d.phis.iter().map(|p| p.value));
        insts += d.insts.len();
        for &i in &d.insts {
            defined.extend(func.insts[i].results.iter().copied());
        }
    }
    if insts > MAX_INSTS
        || defined
            .iter()
            .any(|&v| clif_types(func.value_type(v)).len() != 1 || lanes.pair(v).is_some())
    {
        return None;
    }
    let (counter, up_phi, inside) = counter(func, h, entry, &latches, &in_loop, &defined)?;
    if cfg.preds(inside) != [h] {
        return None;
    }
    let invariant = |v: Value| !defined.contains(&v);
    let parse = |v: Value| affine(func, v, up_phi, counter, &invariant, 8);
    let mut accesses: Vec<Access> = Vec::new();
    let mut unchecked: HashMap<Block, HashSet<(Value, Value)>> = HashMap::new();
    let mut gains = false;
    for &b in blocks {
        if b == h || !dom.dominates(inside, b) {
            continue;
        }
        for &i in &func.blocks[b].insts {
            let d = &func.insts[i];
            if !matches!(d.opcode, Opcode::Load | Opcode::Store) {
                continue;
            }
            let (slice, index) = (d.args[0], d.args[1]);
            if !invariant(slice) {
                continue;
            }
            let Some(aff) = parse(index) else { continue };
            gains |= !ranges.in_bounds(func, b, slice, index);
            unchecked.entry(b).or_default().insert((slice, index));
            if !accesses.iter().any(|a| a.slice == slice && a.index == aff) {
                accesses.push(Access { slice, index: aff });
            }
        }
    }
    let mut reloaded: Vec<Value> = Vec::new();
    for &b in blocks {
        for &i in &func.blocks[b].insts {
            let d = &func.insts[i];
            if !matches!(d.opcode, Opcode::Load | Opcode::Store) || reloaded.contains(&d.args[0]) {
                continue;
            }
            let one_definition = match func.value_def(d.args[0]) {
                ValueDef::Param(_) => true,
                ValueDef::Result(i, 0) => {
                    matches!(func.insts[i].opcode, Opcode::Alloc | Opcode::TapeView)
                }
                _ => false,
            };
            if one_definition {
                reloaded.push(d.args[0]);
            }
        }
    }
    gains.then(|| Versioned {
        header: h,
        entry,
        blocks: blocks.to_vec(),
        counter,
        accesses,
        unchecked,
        reloaded,
    })
}

fn lit(func: &Function, v: Value) -> Option<i64> {
    match func.value_def(v) {
        ValueDef::Const(Scalar::I64(c)) => Some(c),
        _ => None,
    }
}

/// The instruction defining `v`, when it is `op`: its arguments.
fn defined_by(func: &Function, v: Value, op: Opcode) -> Option<&[Value]> {
    let ValueDef::Result(i, 0) = func.value_def(v) else {
        return None;
    };
    let d = &func.insts[i];
    (d.opcode == op).then_some(&d.args[..])
}

/// `v` is `iadd x, k` (either order) or `isub x, -k`: `x`.
fn plus(func: &Function, v: Value, k: i64) -> Option<Value> {
    if let Some(&[x, y]) = defined_by(func, v, Opcode::Iadd) {
        if lit(func, y) == Some(k) {
            return Some(x);
        }
        if lit(func, x) == Some(k) {
            return Some(y);
        }
    }
    if let Some(&[x, y]) = defined_by(func, v, Opcode::Isub)
        && lit(func, y) == k.checked_neg()
    {
        return Some(x);
    }
    None
}

/// The header's counter, the phi an index is measured from (for `down`, the
/// phi's value is the counter plus one), and the header's successor in the loop.
fn counter(
    func: &Function,
    h: Block,
    entry: Block,
    latches: &[Block],
    in_loop: &HashSet<Block>,
    defined: &HashSet<Value>,
) -> Option<(Counter, Value, Block)> {
    let Some(Terminator::Br {
        cond,
        then_dest,
        else_dest,
    }) = &func.blocks[h].term
    else {
        return None;
    };
    let (then_in, else_in) = (in_loop.contains(then_dest), in_loop.contains(else_dest));
    if then_in == else_in {
        return None;
    }
    let inside = if then_in { *then_dest } else { *else_dest };
    let ValueDef::Result(ci, 0) = func.value_def(*cond) else {
        return None;
    };
    let cd = &func.insts[ci];
    let (Opcode::Icmp, Imm::Cmp(p)) = (cd.opcode, cd.imm) else {
        return None;
    };
    let (x, y) = (cd.args[0], cd.args[1]);
    // The condition under which the loop goes on, as `u < v` or `r != 0`.
    let stays = |pred: CmpPred| match (pred, then_in) {
        (CmpPred::Lt, true) | (CmpPred::Ge, false) => Some((x, y)),
        (CmpPred::Gt, true) | (CmpPred::Le, false) => Some((y, x)),
        _ => None,
    };
    for phi in &func.blocks[h].phis {
        if func.value_type(phi.value) != Type::I64 {
            continue;
        }
        let Some(&(_, init)) = phi.incoming.iter().find(|(b, _)| *b == entry) else {
            continue;
        };
        let from_latches: Vec<Value> = phi
            .incoming
            .iter()
            .filter(|(b, _)| latches.contains(b))
            .map(|&(_, v)| v)
            .collect();
        if from_latches.len() != latches.len() || phi.incoming.len() != latches.len() + 1 {
            continue;
        }
        let r = phi.value;
        // Up: every latch passes `iadd r, 1`; the test is `r < n`, `n` invariant.
        if from_latches.iter().all(|&v| plus(func, v, 1) == Some(r))
            && let Some((u, n)) = stays(p)
            && u == r
            && !defined.contains(&n)
        {
            return Some((Counter::Up { init, bound: n }, r, inside));
        }
        // Down: every latch passes `d = iadd r, -1` of the header; out on `r == 0`.
        let leaves_on_zero = match (p, then_in) {
            (CmpPred::Eq, false) | (CmpPred::Ne, true) => {
                (x == r && lit(func, y) == Some(0)) || (y == r && lit(func, x) == Some(0))
            }
            _ => false,
        };
        if leaves_on_zero
            && let Some(&d) = from_latches.first()
            && from_latches.iter().all(|&v| v == d)
            && plus(func, d, -1) == Some(r)
            && func.blocks[h]
                .insts
                .iter()
                .any(|&i| func.insts[i].results.first() == Some(&d))
        {
            return Some((Counter::Down { init }, r, inside));
        }
    }
    None
}

/// `v` as an [`Affine`] of the counter. `phi` is the header's phi: for `up` the
/// counter itself, for `down` the counter plus one.
fn affine(
    func: &Function,
    v: Value,
    phi: Value,
    counter: Counter,
    invariant: &dyn Fn(Value) -> bool,
    depth: u32,
) -> Option<Affine> {
    if v == phi {
        let c = match counter {
            Counter::Up { .. } => 0,
            Counter::Down { .. } => 1,
        };
        return Some(Affine {
            a: 1,
            c,
            terms: Vec::new(),
        });
    }
    if let Some(c) = lit(func, v) {
        return Some(Affine::konst(c));
    }
    if func.value_type(v) != Type::I64 {
        return None;
    }
    if invariant(v) {
        return Some(Affine {
            a: 0,
            c: 0,
            terms: vec![(v, 1)],
        });
    }
    if depth == 0 {
        return None;
    }
    let rec = |w: Value| affine(func, w, phi, counter, invariant, depth - 1);
    if let Some(&[x, y]) = defined_by(func, v, Opcode::Iadd) {
        return rec(x)?.add(rec(y)?, 1);
    }
    if let Some(&[x, y]) = defined_by(func, v, Opcode::Isub) {
        return rec(x)?.add(rec(y)?, -1);
    }
    if let Some(&[x, y]) = defined_by(func, v, Opcode::Imul) {
        if let Some(k) = lit(func, y) {
            return rec(x)?.scale(k);
        }
        if let Some(k) = lit(func, x) {
            return rec(y)?.scale(k);
        }
    }
    None
}
