//! The tape policy: for each value a reverse block reads, how the pullback gets it
//! ([`TapePlan`]). Under [`TapePolicy::SaveAll`] every such value is pushed at the
//! end of its block (the [plan](crate::plan)'s `SavedValues`); under
//! [`TapePolicy::Minimal`] only what the pullback cannot have otherwise is:
//!
//! - **Constants** are written by the pullback.
//! - **Once**: a value defined in a block that runs at most once per call (in no
//!   cycle of the control-flow graph) and that dominates every returning block, and
//!   read by the reverse of a block in a loop, is pushed once, just before `ret`,
//!   and popped in the pullback's entry, where it is available to every reverse
//!   block. Parameters, and values computed before the
//!   first loop or between loops (the hoisted norm of `normalize`), are such values;
//!   so are the handles of local buffers allocated outside loops.
//! - **Counted loops** ([`CountedLoop`]): a loop whose header has one entry edge and
//!   one back edge and an `i64` phi `%i = phi [pre: %init, latch: %i + c]` (a
//!   constant step `c`), left only from the header to blocks with the header as
//!   their only predecessor. Its forward pass pushes no block-stack entry per
//!   iteration: each exit block pushes `%i` once (and `%init` unless the pullback
//!   can have it otherwise). The pullback keeps `%i` in a variable (the *counter*):
//!   the exit's reverse sets it; the header's reverse goes back to the preheader
//!   when it equals `%init`, and otherwise subtracts `c` and goes to the latch's
//!   reverse. Inside the loop, `%i` is the counter. The derivation first gives a
//!   block of its own to each edge from a header to a block with other
//!   predecessors ([`split_loop_exits`]), so such exits do not keep a loop from
//!   being counted.
//! - **Recomputed**: a cheap pure op (float and integer arithmetic but no
//!   transcendental function, comparisons, casts, `select`, `len` of a slice the
//!   pullback has) whose operands the pullback can have is computed again.
//! - **Reloaded**: a `load` from a frozen slice (a read-only slice parameter whose
//!   contents the pullback sees unchanged, [`RuleConfig::frozen`]) at an index the
//!   pullback can have is loaded again.
//! - **Replayed branches**: a block with two predecessors, one on each side of a
//!   two-way branch of its immediate dominator (an if/else diamond or a triangle),
//!   pushes no block-stack entry when the pullback can have the branch's condition:
//!   its reverse branches on the condition.
//! - Everything else is **saved**, as under `SaveAll`.
//!
//! Why this is sound: a reverse block `C'` needs, for each value `v` it reads, the
//! latest instance of `v` before the instance of `C` it reverses. When `v`'s
//! definition dominates `C` and `w`'s dominates `v`'s, no new instance of `w` is
//! made between the latest `v` and `C` (otherwise a path to `C` would avoid `v`'s
//! definition), so recomputing `v` from the latest instances of its operands gives
//! the latest `v`. The leaves are constants, values made once per call, the counter
//! (the current iteration's `%i` inside the loop) and frozen slices (unchanged).
//! Recomputation is limited to [`MAX_DEPTH`] levels of operands.

use cranelift_entity::{EntitySet, SecondaryMap};
use gradlift_ir::dominators::DominatorTree;
use gradlift_ir::flowgraph::ControlFlowGraph;
use gradlift_ir::loops::LoopForest;
use gradlift_ir::scc::Sccs;
use gradlift_ir::{Block, Function, Imm, Inst, Opcode, Scalar, Terminator, Type, Value, ValueDef};
use hashbrown::HashSet;
use smallvec::SmallVec;

use crate::config::{RuleConfig, TapePolicy, freezable};
use crate::stmt::SaveItem;

/// How many levels of operands a recomputation may go through.
pub(crate) const MAX_DEPTH: u32 = 3;

/// How the pullback gets a primal value (see the [module docs](self)).
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub(crate) enum How {
    /// A constant.
    Const(Scalar),
    /// Pushed once before `ret`, popped in the pullback's entry.
    Once,
    /// The induction variable of the counted loop of this index, inside the loop.
    Counter(usize),
    /// A cheap pure instruction, computed again from its operands.
    Recompute(Inst),
    /// A `load` from a frozen slice, loaded again.
    Reload(Inst),
}

/// A loop reversed by its induction variable. See the [module docs](self).
#[derive(Clone, Debug)]
pub(crate) struct CountedLoop {
    /// The position of the preheader among the header's predecessors
    /// ([`BlockStack::preds`](crate::plan::BlockStack::preds)).
    pub(crate) pre_index: usize,
    /// The position of the latch among them.
    pub(crate) latch_index: usize,
    /// The induction variable: a phi of the header.
    pub(crate) iv: Value,
    /// Its value on entry (the preheader's incoming value).
    pub(crate) init: Value,
    /// What each iteration adds to it.
    pub(crate) step: i64,
    /// The blocks of the loop, the header included.
    pub(crate) blocks: EntitySet<Block>,
    /// The live blocks the loop exits to (each has the header as its only
    /// predecessor).
    pub(crate) exits: SmallVec<[Block; 1]>,
}

/// For each reverse block, what is pushed for it and how the rest is had. See the
/// [module docs](self).
#[derive(Clone, Debug, Default)]
pub(crate) struct TapePlan {
    minimal: bool,
    /// The counted loops.
    pub(crate) loops: Vec<CountedLoop>,
    header_loop: SecondaryMap<Block, Option<usize>>,
    exit_loops: SecondaryMap<Block, SmallVec<[usize; 1]>>,
    /// Blocks whose values may be pushed once.
    once_ok: EntitySet<Block>,
    /// Blocks on a cycle: only their reverses read values pushed once (elsewhere,
    /// pushing a value in the block that needs it costs no more, and only on the
    /// paths that run it).
    in_cycle: EntitySet<Block>,
    /// The block of each placed instruction.
    inst_block: SecondaryMap<Inst, Option<Block>>,
    /// Parameters (as primal values) the pullback takes as slices.
    slices: HashSet<Value>,
    /// Those of them that are frozen.
    frozen: HashSet<Value>,
    /// Blocks replayed from a condition: the condition and the position (among the
    /// block's predecessors) of the one reached when it is true.
    cond_merge: SecondaryMap<Block, Option<(Value, usize)>>,
    /// What each block needs (the plan's saved values, and a counted loop's
    /// induction variable and initial value in its exit blocks).
    needed: SecondaryMap<Block, Vec<SaveItem>>,
    /// What each block pushes, in push order.
    pushed: SecondaryMap<Block, Vec<SaveItem>>,
    /// What is pushed once before every `ret`, in push order.
    once: Vec<SaveItem>,
}

/// The inputs of the tape plan: the primal and what the plan decided.
pub(crate) struct TapeInputs<'a> {
    /// The primal.
    pub(crate) func: &'a Function,
    /// Its control-flow graph.
    pub(crate) cfg: &'a ControlFlowGraph,
    /// Blocks reachable from the entry.
    pub(crate) reachable: &'a EntitySet<Block>,
    /// Reachable blocks that reach a `ret`.
    pub(crate) live: &'a EntitySet<Block>,
    /// Each reachable block's reachable predecessors, in the block stack's order.
    pub(crate) preds: &'a dyn Fn(Block) -> &'a [Block],
    /// What each block's reverse reads.
    pub(crate) saved: &'a dyn Fn(Block) -> &'a [SaveItem],
    /// The configuration.
    pub(crate) config: &'a RuleConfig,
    /// The parameters the pullback takes as slices, by index.
    pub(crate) slice_params: &'a [usize],
}

impl TapePlan {
    /// Plans the tape of `inp.func` under `inp.config.tape`.
    pub(crate) fn new(inp: &TapeInputs<'_>) -> TapePlan {
        let func = inp.func;
        let mut plan = TapePlan {
            minimal: inp.config.tape == TapePolicy::Minimal,
            ..TapePlan::default()
        };
        let blocks: Vec<Block> = func
            .layout
            .iter()
            .copied()
            .filter(|&b| inp.reachable.contains(b))
            .collect();
        for &b in &blocks {
            plan.needed[b] = (inp.saved)(b).to_vec();
        }
        if !plan.minimal || blocks.is_empty() {
            for &b in &blocks {
                plan.pushed[b] = plan.needed[b].clone();
            }
            return plan;
        }
        for &b in &blocks {
            for &inst in &func.blocks[b].insts {
                plan.inst_block[inst] = Some(b);
            }
        }
        for &i in inp.slice_params {
            let p = func.params[i];
            plan.slices.insert(p);
            if inp.config.is_frozen(i) && freezable(func.value_type(p)) {
                plan.frozen.insert(p);
            }
        }
        let dom = DominatorTree::new(inp.cfg);
        plan.find_once_blocks(inp, &blocks, &dom);
        let forest = LoopForest::new(inp.cfg, &dom);
        plan.find_counted_loops(inp, &blocks, &dom, &forest);
        plan.add_exit_needs(func, &blocks);
        plan.find_cond_merges(inp, &blocks, &dom);
        plan.classify(func, &blocks);
        plan
    }

    /// Records the exits of each counted loop, and adds to each exit's needs the
    /// loop's induction variable and initial value (unless constant): the counter
    /// starts from them.
    fn add_exit_needs(&mut self, func: &Function, blocks: &[Block]) {
        for (k, l) in self.loops.iter().enumerate() {
            for &e in &l.exits {
                self.exit_loops[e].push(k);
            }
        }
        for &e in blocks {
            let loops = self.exit_loops[e].clone();
            for k in loops {
                let (iv, init) = (self.loops[k].iv, self.loops[k].init);
                for v in [iv, init] {
                    let item = SaveItem::Value(v);
                    if !matches!(func.value_def(v), ValueDef::Const(_))
                        && !self.needed[e].contains(&item)
                    {
                        self.needed[e].push(item);
                    }
                }
            }
        }
    }

    /// Decides, for each block, what its end pushes and what is pushed once before
    /// `ret` (values by definition order, then handles), the rest being had
    /// another way.
    fn classify(&mut self, func: &Function, blocks: &[Block]) {
        let mut once = HashSet::new();
        for &b in blocks {
            let mut pushed = Vec::new();
            for &item in &self.needed[b] {
                match item {
                    SaveItem::Value(v) => {
                        // The exit's copy of a counted loop's induction variable is
                        // what the counter starts from: always pushed.
                        if self.how(func, v, b, MAX_DEPTH).is_some() {
                            self.collect_once(func, v, b, MAX_DEPTH, &mut once);
                        } else {
                            pushed.push(item);
                        }
                    }
                    SaveItem::Buf(a) | SaveItem::Shadow(a) => {
                        if self
                            .def_block(func, a)
                            .is_some_and(|d| self.once_ok.contains(d))
                        {
                            once.insert(item);
                        } else {
                            pushed.push(item);
                        }
                    }
                }
            }
            self.pushed[b] = pushed;
        }
        for (b, &(c, _)) in self
            .cond_merge
            .iter()
            .filter_map(|(b, m)| Some((b, m.as_ref()?)))
        {
            self.collect_once(func, c, b, MAX_DEPTH, &mut once);
        }
        // Push order: values by definition order (deterministic), then handles.
        let mut once: Vec<SaveItem> = once.into_iter().collect();
        once.sort_by_key(|item| match *item {
            SaveItem::Value(v) => (0, v.as_u32()),
            SaveItem::Buf(a) => (1, a.as_u32()),
            SaveItem::Shadow(a) => (2, a.as_u32()),
        });
        self.once = once;
    }

    /// What block `b` pushes at its end, in push order.
    pub(crate) fn pushed(&self, b: Block) -> &[SaveItem] {
        &self.pushed[b]
    }

    /// What the reverse of `b` reads (pushed or not).
    pub(crate) fn needed(&self, b: Block) -> &[SaveItem] {
        &self.needed[b]
    }

    /// What is pushed once, before every `ret`, in push order.
    pub(crate) fn once(&self) -> &[SaveItem] {
        &self.once
    }

    /// Whether block `b` needs no block-stack entry: a counted loop's header or a
    /// replayed branch.
    pub(crate) fn replays(&self, b: Block) -> bool {
        self.header_loop[b].is_some() || self.cond_merge[b].is_some()
    }

    /// The index of the counted loop whose header `b` is.
    pub(crate) fn header_loop_index(&self, b: Block) -> Option<usize> {
        self.header_loop[b]
    }

    /// The counted loops `b` is an exit of, by index.
    pub(crate) fn exit_loops(&self, b: Block) -> &[usize] {
        &self.exit_loops[b]
    }

    /// For a replayed branch `b`: its condition, and the position of the
    /// predecessor reached when it is true.
    pub(crate) fn cond_merge(&self, b: Block) -> Option<(Value, usize)> {
        self.cond_merge[b]
    }

    /// The block defining `v` (the entry for parameters), if it is placed.
    fn def_block(&self, func: &Function, v: Value) -> Option<Block> {
        match func.value_def(v) {
            ValueDef::Param(_) => func.layout.first().copied(),
            ValueDef::Phi(b) => Some(b),
            ValueDef::Result(inst, _) => self.inst_block[inst],
            ValueDef::Const(_) => None,
        }
    }

    /// How the reverse of block `c` gets the latest instance of `v` without its
    /// being pushed for `c`, looking through at most `depth` levels of operands;
    /// `None` if it must be pushed.
    pub(crate) fn how(&self, func: &Function, v: Value, c: Block, depth: u32) -> Option<How> {
        if !self.minimal {
            return None;
        }
        let def = func.value_def(v);
        if let ValueDef::Const(k) = def {
            return Some(How::Const(k));
        }
        if let ValueDef::Phi(h) = def
            && let Some(k) = self.header_loop[h]
            && self.loops[k].iv == v
            && self.loops[k].blocks.contains(c)
        {
            return Some(How::Counter(k));
        }
        if func.value_type(v).is_slice() {
            return None;
        }
        if self.in_cycle.contains(c)
            && self
                .def_block(func, v)
                .is_some_and(|d| self.once_ok.contains(d))
        {
            return Some(How::Once);
        }
        let ValueDef::Result(inst, 0) = def else {
            return None;
        };
        if depth == 0 {
            return None;
        }
        let d = &func.insts[inst];
        if d.results.len() != 1 {
            return None;
        }
        match d.opcode {
            Opcode::Load => {
                let ok = self.frozen.contains(&d.args[0])
                    && self.how(func, d.args[1], c, depth - 1).is_some();
                ok.then_some(How::Reload(inst))
            }
            Opcode::Len => self
                .slices
                .contains(&d.args[0])
                .then_some(How::Recompute(inst)),
            op if recomputable(op) => d
                .args
                .iter()
                .all(|&a| self.how(func, a, c, depth - 1).is_some())
                .then_some(How::Recompute(inst)),
            _ => None,
        }
    }

    /// Adds to `once` every value [`How::Once`] in the way `v` is had in `c`.
    fn collect_once(
        &self,
        func: &Function,
        v: Value,
        c: Block,
        depth: u32,
        once: &mut HashSet<SaveItem>,
    ) {
        match self.how(func, v, c, depth) {
            Some(How::Once) => {
                once.insert(SaveItem::Value(v));
            }
            Some(How::Recompute(inst)) if func.insts[inst].opcode != Opcode::Len => {
                for &a in &func.insts[inst].args {
                    self.collect_once(func, a, c, depth - 1, once);
                }
            }
            Some(How::Reload(inst)) => {
                self.collect_once(func, func.insts[inst].args[1], c, depth - 1, once);
            }
            _ => {}
        }
    }

    /// The blocks in no cycle that dominate every live returning block.
    fn find_once_blocks(&mut self, inp: &TapeInputs<'_>, blocks: &[Block], dom: &DominatorTree) {
        let func = inp.func;
        let rets: Vec<Block> = blocks
            .iter()
            .copied()
            .filter(|&b| {
                inp.live.contains(b) && matches!(func.blocks[b].term, Some(Terminator::Ret(_)))
            })
            .collect();
        let sccs = Sccs::new(blocks.iter().copied(), |b| inp.cfg.succs(b).iter().copied());
        for &b in blocks {
            if sccs.on_cycle(b) {
                self.in_cycle.insert(b);
            }
        }
        for &b in blocks {
            if !self.in_cycle.contains(b) && rets.iter().all(|&r| dom.dominates(b, r)) {
                self.once_ok.insert(b);
            }
        }
    }

    /// The counted loops (see [`CountedLoop`]).
    fn find_counted_loops(
        &mut self,
        inp: &TapeInputs<'_>,
        blocks: &[Block],
        dom: &DominatorTree,
        forest: &LoopForest,
    ) {
        let func = inp.func;
        let entry = func.layout.first().copied();
        for &h in blocks {
            let preds = (inp.preds)(h);
            if !inp.live.contains(h) || preds.len() != 2 || Some(h) == entry {
                continue;
            }
            let (latch_index, pre_index) =
                match (dom.dominates(h, preds[0]), dom.dominates(h, preds[1])) {
                    (true, false) => (0, 1),
                    (false, true) => (1, 0),
                    _ => continue,
                };
            let (latch, pre) = (preds[latch_index], preds[pre_index]);
            let Some((iv, init, step)) = induction_variable(func, h, pre, latch) else {
                continue;
            };
            // `latch -> h` is the only back edge to `h` (its other predecessor is not
            // dominated by it), so the natural loop of `h` is the loop of that edge.
            let Some(l) = forest.header_loop(h) else {
                continue;
            };
            let mut body = EntitySet::new();
            for &b in forest.blocks(l) {
                body.insert(b);
            }
            let mut exits: SmallVec<[Block; 1]> = SmallVec::new();
            let mut ok = true;
            for x in body.iter() {
                for &s in inp.cfg.succs(x) {
                    if body.contains(s) || !inp.live.contains(s) {
                        continue;
                    }
                    if x != h || (inp.preds)(s) != [h] {
                        ok = false;
                    } else if !exits.contains(&s) {
                        exits.push(s);
                    }
                }
            }
            if !ok {
                continue;
            }
            self.header_loop[h] = Some(self.loops.len());
            self.loops.push(CountedLoop {
                pre_index,
                latch_index,
                iv,
                init,
                step,
                blocks: body,
                exits,
            });
        }
    }

    /// The blocks replayed from a branch condition (see the [module docs](self)).
    fn find_cond_merges(&mut self, inp: &TapeInputs<'_>, blocks: &[Block], dom: &DominatorTree) {
        let func = inp.func;
        for &m in blocks {
            let preds = (inp.preds)(m);
            if !inp.live.contains(m) || preds.len() != 2 || self.header_loop[m].is_some() {
                continue;
            }
            let Some(d) = dom.idom(m) else { continue };
            let Some(Terminator::Br {
                cond,
                then_dest,
                else_dest,
            }) = func.blocks[d].term
            else {
                continue;
            };
            if then_dest == else_dest {
                continue;
            }
            // Which side of the branch a predecessor is on: `Some(true)` for the
            // `then` side.
            let side = |p: Block| -> Option<bool> {
                if p == d {
                    return if then_dest == m {
                        Some(true)
                    } else if else_dest == m {
                        Some(false)
                    } else {
                        None
                    };
                }
                let only_from_d = (inp.preds)(p) == [d];
                if p == then_dest && only_from_d {
                    Some(true)
                } else if p == else_dest && only_from_d {
                    Some(false)
                } else {
                    None
                }
            };
            let (Some(s0), Some(s1)) = (side(preds[0]), side(preds[1])) else {
                continue;
            };
            if s0 == s1 || self.how(func, cond, m, MAX_DEPTH).is_none() {
                continue;
            }
            self.cond_merge[m] = Some((cond, if s0 { 0 } else { 1 }));
        }
    }
}

/// Cheap pure ops worth computing again rather than saving: arithmetic (`fma`
/// included; no transcendental function, which costs more than a push and a pop,
/// and no `hypot`), comparisons,
/// casts, `select`. Integer division cannot fail here: the forward pass computed the
/// same division on the same operands.
fn recomputable(op: Opcode) -> bool {
    use Opcode::*;
    matches!(
        op,
        Fadd | Fsub
            | Fmul
            | Fdiv
            | Fma
            | Fmin
            | Fmax
            | Fneg
            | Fabs
            | Sqrt
            | Floor
            | Ceil
            | Iadd
            | Isub
            | Imul
            | Idiv
            | Irem
            | Ishl
            | Ishr
            | Iand
            | Ior
            | Ixor
            | Ineg
            | Fcmp
            | Icmp
            | And
            | Or
            | Xor
            | Not
            | Select
            | Cast
            | Bitcast
            | Const
    )
}

/// The induction variable of a loop with header `h`, entered from `pre`, with back
/// edge from `latch`: an `i64` phi `[pre: init, latch: %i + c]`, with `c` a
/// constant for which `init, init + c, init + 2c, ...` stay distinct for at least
/// 2^48 iterations (an odd `c`, or `|c| <= 2^16`).
fn induction_variable(
    func: &Function,
    h: Block,
    pre: Block,
    latch: Block,
) -> Option<(Value, Value, i64)> {
    let incoming = |phi: &gradlift_ir::Phi, from: Block| {
        phi.incoming
            .iter()
            .find(|&&(b, _)| b == from)
            .map(|&(_, v)| v)
    };
    for phi in &func.blocks[h].phis {
        let iv = phi.value;
        if func.value_type(iv) != Type::I64 {
            continue;
        }
        let (Some(init), Some(next)) = (incoming(phi, pre), incoming(phi, latch)) else {
            continue;
        };
        let ValueDef::Result(inst, 0) = func.value_def(next) else {
            continue;
        };
        let d = &func.insts[inst];
        let constant = |v: Value| match func.value_def(v) {
            ValueDef::Const(Scalar::I64(c)) => Some(c),
            _ => None,
        };
        let step = match (d.opcode, d.args.as_slice()) {
            (Opcode::Iadd, &[a, b]) if a == iv => constant(b),
            (Opcode::Iadd, &[a, b]) if b == iv => constant(a),
            (Opcode::Isub, &[a, b]) if a == iv => constant(b).and_then(i64::checked_neg),
            _ => None,
        };
        let Some(step) = step else { continue };
        if step != 0 && (step % 2 != 0 || step.unsigned_abs() <= 1 << 16) && d.imm == Imm::None {
            return Some((iv, init, step));
        }
    }
    None
}

/// `func` with a block of its own on every edge from a loop's header to a block
/// outside the loop that has other predecessors, or `None` when it has no such edge.
///
/// A counted loop must be left from its header to blocks with the header as their
/// only predecessor ([`CountedLoop`]): the exit's reverse sets the counter. A loop
/// whose header goes straight on to the next loop's header (`br %more, body,
/// next_head`, as written in text, or left so by the optimiser, which removes empty
/// forwarding blocks) is not counted, and its forward pass pushes a block-stack entry
/// per iteration. The new block only jumps on: it computes nothing, so the function
/// computes what it did, and the next loop's phis take their values from it instead
/// of from the header.
pub(crate) fn split_loop_exits(func: &Function) -> Option<Function> {
    let cfg = ControlFlowGraph::new(func);
    let dom = DominatorTree::new(&cfg);
    let forest = LoopForest::new(&cfg, &dom);
    let mut edges: Vec<(Block, Block)> = Vec::new();
    for &h in &func.layout {
        let Some(l) = forest.header_loop(h) else {
            continue;
        };
        let Some(Terminator::Br {
            then_dest,
            else_dest,
            ..
        }) = func.blocks[h].term
        else {
            continue;
        };
        if then_dest == else_dest {
            continue;
        }
        for s in [then_dest, else_dest] {
            if !forest.contains(l, s) && cfg.preds(s).len() > 1 {
                edges.push((h, s));
            }
        }
    }
    if edges.is_empty() {
        return None;
    }
    let mut out = func.clone();
    for (h, s) in edges {
        let name = func.blocks[h].name.as_ref().map(|n| format!("{n}.exit"));
        let e = out.make_block(name.as_deref());
        out.set_terminator(e, Terminator::Jump(s));
        if let Some(Terminator::Br {
            then_dest,
            else_dest,
            ..
        }) = &mut out.blocks[h].term
        {
            for d in [then_dest, else_dest] {
                if *d == s {
                    *d = e;
                }
            }
        }
        for phi in &mut out.blocks[s].phis {
            for (pred, _) in &mut phi.incoming {
                if *pred == h {
                    *pred = e;
                }
            }
        }
        let at = out
            .layout
            .iter()
            .position(|&b| b == s)
            .unwrap_or(out.layout.len());
        out.layout.insert(at, e);
    }
    Some(out)
}
