//! Forward-pass assembly (Mooncake's `forwards_pass_ir`): the primal body, block for
//! block, plus the tape ops the [plan](crate::plan) asks for.
//!
//! For `func @f(params) -> results`, `@f.fwd(params) -> results` (no results when
//! the primal is not needed) is a copy of `f`'s reachable blocks, in layout order,
//! with the same names, and:
//!
//! - in a live block with several predecessors, after its phis,
//!   `%from = phi i64 [P1: 1, P2: 2, ...]` and `push %from` (the
//!   [`BlockStack`](crate::plan::BlockStack));
//! - at the end of each live block, before its terminator, a `push` of every value
//!   the block's reverse reads ([`SavedValues`](crate::plan::SavedValues));
//! - when several live blocks end in `ret`, `push N` of the returning block's number
//!   before its `ret`;
//! - an `alloc` with a shadow is followed by `%dh = tape_alloc T, %n`, the shadow's
//!   handle; an `alloc` whose buffer the pullback needs (to pass it to a callee's
//!   pullback) becomes `%h = tape_alloc T, %n` and `%a = tape_view T, %h`;
//! - a differentiated call `call @g(args)` becomes `call @g.fwd.K(args)` (same
//!   arguments and results: the callee's forward pass leaves its own tape entries);
//!   for an `overlay @g = @h`, `call @g(args)` stays, for the value, followed by
//!   `call @h.fwd.K(args)` for the tape, whose results are dropped. Calls to `vjp`
//!   and `nodiff` functions, and calls nothing varies through, stay as they are.
//!
//! It writes the [`Function`] directly rather than through the builder: it is a copy
//! with additions, and needs no variables.

use cranelift_entity::SecondaryMap;
use gradlift_ir::flowgraph::ControlFlowGraph;
use gradlift_ir::{
    Block, FuncId, Function, Imm, Inst, Opcode, Scalar, Signature, Terminator, Type, Value,
    ValueDef,
};
use smallvec::SmallVec;

use crate::error::InternalError;
use crate::plan::Plan;
use crate::stmt::{CallRule, SaveItem};

/// Maps the primal's values to the forward pass's.
struct ValueMap {
    map: SecondaryMap<Value, Option<Value>>,
}

impl ValueMap {
    /// The forward pass's value for the primal `v` (constants are made on demand).
    fn get(&self, primal: &Function, fwd: &mut Function, v: Value) -> Value {
        match primal.value_def(v) {
            ValueDef::Const(c) => fwd.make_const(c),
            // Every use is dominated by its definition, and blocks are copied in
            // reverse postorder, so the definition was copied first. A miss would
            // be a bug; the verifier of the derived function reports it.
            _ => self.map[v].unwrap_or_else(|| fwd.make_const(Scalar::F64(0.0))),
        }
    }
}

/// Builds the forward pass of `primal` with signature `sig` (the primal's
/// parameters; its results, or none when `needs_primal` is false).
///
/// An error is a bug in the plan (it saves a buffer handle that was never made).
///
/// In debug mode (`marker`), the entry first pushes the marker, which the pullback
/// pops and compares last.
///
/// The steps, in the order they write (each numbers the values it makes, so the
/// order is part of the output): the blocks; their phis and block-stack entries;
/// the debug marker; every block's instructions, in reverse postorder; every
/// block's saves, terminator and phi edges, in reverse postorder.
pub(crate) fn forward_ir(
    primal: &Function,
    sig: &Signature,
    plan: &Plan,
    needs_primal: bool,
    marker: Option<i64>,
) -> Result<(Function, Vec<Inst>), InternalError> {
    let mut pass = ForwardPass::new(primal, sig, plan, needs_primal);
    pass.lay_out_blocks();
    pass.copy_phis_and_record_preds();
    let cfg = ControlFlowGraph::new(primal);
    if let Some(m) = marker {
        pass.push_marker(m);
    }
    for &b in cfg.reverse_postorder() {
        pass.copy_insts(b);
    }
    for &b in cfg.reverse_postorder() {
        pass.end_block(b)?;
    }
    Ok((pass.fwd, pass.shadow_allocs))
}

/// The forward pass being written, and how the primal maps into it.
///
/// Invariant: every reachable primal block has its copy in `bmap` once
/// [`lay_out_blocks`](Self::lay_out_blocks) ran, and a primal value is in `vmap`
/// once its definition was copied.
struct ForwardPass<'a> {
    primal: &'a Function,
    plan: &'a Plan,
    needs_primal: bool,
    /// Whether the rule has a tape at all (the plan is not trivial).
    tape: bool,
    fwd: Function,
    vmap: ValueMap,
    bmap: SecondaryMap<Block, Option<Block>>,
    /// The handles of local buffers kept on the tape.
    buf_handle: SecondaryMap<Value, Option<Value>>,
    /// The handles of shadow buffers.
    shadow_handle: SecondaryMap<Value, Option<Value>>,
    /// The `tape_alloc`s of shadow buffers, which a rule of width N makes N times
    /// as long ([`widen`](crate::widen)).
    shadow_allocs: Vec<Inst>,
}

impl<'a> ForwardPass<'a> {
    /// An empty forward pass with `sig`, its parameters mapped to the primal's and
    /// named alike.
    fn new(primal: &'a Function, sig: &Signature, plan: &'a Plan, needs_primal: bool) -> Self {
        let mut fwd = Function::new(sig);
        // Positions are the primal's, so that a run-time error of the forward pass
        // (an index out of bounds, say) points at the statement the user wrote.
        fwd.srcmap.func = primal.srcmap.func;
        let mut vmap = ValueMap {
            map: SecondaryMap::new(),
        };
        for (&p, &q) in primal.params.iter().zip(&fwd.params) {
            vmap.map[p] = Some(q);
            fwd.values[q].name = primal.values[p].name.clone();
        }
        ForwardPass {
            primal,
            plan,
            needs_primal,
            tape: !plan.trivial,
            fwd,
            vmap,
            bmap: SecondaryMap::new(),
            buf_handle: SecondaryMap::new(),
            shadow_handle: SecondaryMap::new(),
            shadow_allocs: Vec::new(),
        }
    }

    /// The copy of the reachable primal block `b`.
    fn block(&self, b: Block) -> Block {
        self.bmap[b].expect("reachable blocks are mapped")
    }

    /// The reachable blocks of the primal, in layout order.
    fn reachable_blocks(&self) -> impl Iterator<Item = Block> + use<'a> {
        let plan = self.plan;
        self.primal
            .layout
            .iter()
            .copied()
            .filter(move |&b| plan.reachable.contains(b))
    }

    /// Makes a block for each reachable primal block, in layout order, with the same
    /// name.
    fn lay_out_blocks(&mut self) {
        for b in self.reachable_blocks() {
            let nb = self.fwd.make_block(self.primal.blocks[b].name.as_deref());
            self.fwd.append_block(nb);
            self.fwd.srcmap.blocks[nb] = self.primal.srcmap.blocks[b];
            self.bmap[b] = Some(nb);
        }
    }

    /// Copies each block's phis (without edges: they come last, once every value
    /// exists), and in a live block whose predecessor the pullback pops, adds
    /// `%from = phi i64 [P1: 1, P2: 2, ...]` and `push %from` (the block stack,
    /// Mooncake's `__push_blk_stack!`).
    fn copy_phis_and_record_preds(&mut self) {
        let (primal, plan) = (self.primal, self.plan);
        for b in self.reachable_blocks() {
            let nb = self.block(b);
            for phi in &primal.blocks[b].phis {
                let v = self.fwd.append_phi(nb, primal.value_type(phi.value), &[]);
                self.fwd.values[v].name = primal.values[phi.value].name.clone();
                self.fwd.srcmap.values[v] = primal.srcmap.values[phi.value];
                self.vmap.map[phi.value] = Some(v);
            }
            if self.tape
                && plan.live.contains(b)
                && plan.stack.records_pred(b)
                && !plan.tape.replays(b)
            {
                let (fwd, bmap) = (&mut self.fwd, &self.bmap);
                let incoming: SmallVec<[(Block, Value); 2]> = plan
                    .stack
                    .preds(b)
                    .iter()
                    .enumerate()
                    .map(|(i, &p)| {
                        let number = fwd.make_const(Scalar::I64(i as i64 + 1));
                        (bmap[p].expect("reachable blocks are mapped"), number)
                    })
                    .collect();
                let from = self.fwd.append_phi(nb, Type::I64, &incoming);
                self.fwd.set_value_name(from, "from");
                push(&mut self.fwd, nb, from);
            }
        }
    }

    /// Pushes the debug marker first thing in the entry.
    fn push_marker(&mut self, marker: i64) {
        if let Some(&entry) = self.primal.layout.first() {
            let m = self.fwd.make_const(Scalar::I64(marker));
            let nb = self.block(entry);
            push(&mut self.fwd, nb, m);
        }
    }

    /// Copies the instructions of the primal block `b`; an `alloc` gets its tape
    /// buffers ([`copy_alloc`](Self::copy_alloc)) and a differentiated call calls
    /// the callee's forward pass ([`call_target`](Self::call_target)). Blocks are
    /// copied in reverse postorder, so operands exist before their uses.
    fn copy_insts(&mut self, b: Block) {
        let primal = self.primal;
        let nb = self.block(b);
        for &inst in &primal.blocks[b].insts {
            let before = self.fwd.blocks[nb].insts.len();
            self.copy_inst(nb, inst);
            // Everything the copy made stands where the primal's statement stood.
            let pos = primal.srcmap.insts[inst];
            let fwd = &mut self.fwd;
            for &ni in &fwd.blocks[nb].insts[before..] {
                fwd.srcmap.insts[ni] = pos;
            }
        }
    }

    /// Copies the primal's `inst` to the end of `nb`: the same op on the copies of
    /// its operands, an `alloc` perhaps on the tape, a call perhaps to a derived
    /// forward pass.
    fn copy_inst(&mut self, nb: Block, inst: Inst) {
        let primal = self.primal;
        let d = &primal.insts[inst];
        let args: SmallVec<[Value; 3]> = d
            .args
            .iter()
            .map(|&a| self.vmap.get(primal, &mut self.fwd, a))
            .collect();
        let types: SmallVec<[Type; 1]> = d.results.iter().map(|&r| primal.value_type(r)).collect();
        if d.opcode == Opcode::Alloc && self.tape {
            self.copy_alloc(nb, inst, &args, types[0]);
            return;
        }
        let (imm, overlay) = self.call_target(inst);
        let fwd = &mut self.fwd;
        let ni = fwd.make_inst(d.opcode, imm, &args, &types);
        for (&r, &nr) in d.results.iter().zip(&fwd.insts[ni].results.clone()) {
            fwd.values[nr].name = primal.values[r].name.clone();
            self.vmap.map[r] = Some(nr);
        }
        fwd.append_inst(nb, ni);
        if let Some(f) = overlay {
            let ni = fwd.make_inst(Opcode::Call, Imm::Func(f), &args, &types);
            fwd.append_inst(nb, ni);
        }
    }

    /// Copies `%a = alloc T, %n` into `nb` (with a tape): as `%a.buf = tape_alloc`
    /// and `%a = tape_view` when the pullback needs the buffer, followed by
    /// `%da.buf = tape_alloc` when it has a shadow.
    fn copy_alloc(&mut self, nb: Block, inst: Inst, args: &[Value], ty: Type) {
        let d = &self.primal.insts[inst];
        let a = d.results[0];
        let name = self.primal.values[a].name.clone();
        let fwd = &mut self.fwd;
        if self.plan.tape_bufs.contains(a) {
            let h = append(fwd, nb, Opcode::TapeAlloc, d.imm, args, Type::I64);
            let view = append(fwd, nb, Opcode::TapeView, d.imm, &[h], ty);
            fwd.values[view].name = name.clone();
            fwd.values[h].name = name.as_ref().map(|n| format!("{n}.buf").into());
            self.vmap.map[a] = Some(view);
            self.buf_handle[a] = Some(h);
        } else {
            let v = append(fwd, nb, d.opcode, d.imm, args, ty);
            fwd.values[v].name = name.clone();
            self.vmap.map[a] = Some(v);
        }
        if self.plan.shadow_bufs.contains(a) {
            let h = append(fwd, nb, Opcode::TapeAlloc, d.imm, args, Type::I64);
            fwd.values[h].name = name.map(|n| format!("d{n}.buf").into());
            self.shadow_handle[a] = Some(h);
            if let ValueDef::Result(i, _) = fwd.values[h].def {
                self.shadow_allocs.push(i);
            }
        }
    }

    /// What `inst` calls in the forward pass: the callee's forward pass for a
    /// differentiated call (with a tape); for an overlaid one, the callee itself and
    /// the overlay's forward pass to call after it. Anything else is unchanged.
    fn call_target(&self, inst: Inst) -> (Imm, Option<FuncId>) {
        let imm = self.primal.insts[inst].imm;
        match self.plan.calls.get(&inst) {
            Some(CallRule::Derived {
                fwd: f, overlay, ..
            }) if self.tape => {
                if *overlay {
                    (imm, Some(*f))
                } else {
                    (Imm::Func(*f), None)
                }
            }
            _ => (imm, None),
        }
    }

    /// Ends the copy of block `b`: in a live block, the pushes of what its reverse
    /// reads (and, before a `ret`, what is saved once: Mooncake's
    /// `create_comms_insts!`), then the terminator, then the edges of its phis.
    fn end_block(&mut self, b: Block) -> Result<(), InternalError> {
        let (primal, plan) = (self.primal, self.plan);
        let data = &primal.blocks[b];
        let live = self.tape && plan.live.contains(b);
        if live {
            self.push_saves(b, plan.tape.pushed(b))?;
        }
        if live && matches!(data.term, Some(Terminator::Ret(_))) {
            self.push_saves(b, plan.tape.once())?;
        }
        let term = self.terminator(b);
        let nb = self.block(b);
        self.fwd.set_terminator(nb, term);
        self.fwd.srcmap.terms[nb] = primal.srcmap.terms[b];
        for phi in &data.phis {
            let nphi = self.vmap.map[phi.value].expect("phis are mapped");
            for &(p, v) in &phi.incoming {
                if plan.reachable.contains(p) {
                    let nv = self.vmap.get(primal, &mut self.fwd, v);
                    self.fwd.add_phi_incoming(nphi, self.block(p), nv);
                }
            }
        }
        Ok(())
    }

    /// Pushes `items` at the end of the copy of `b`, in order.
    fn push_saves(&mut self, b: Block, items: &[SaveItem]) -> Result<(), InternalError> {
        let nb = self.block(b);
        for &item in items {
            let nv = match item {
                SaveItem::Value(v) => Some(self.vmap.get(self.primal, &mut self.fwd, v)),
                SaveItem::Buf(a) => self.buf_handle[a],
                SaveItem::Shadow(a) => self.shadow_handle[a],
            };
            let nv = nv.ok_or_else(|| InternalError::NeverMade {
                item: format!("{item:?}"),
            })?;
            push(&mut self.fwd, nb, nv);
        }
        Ok(())
    }

    /// The terminator of the copy of `b`; before a `ret`, the push of the returning
    /// block's number when the pullback pops it (and no results when the primal is
    /// not needed).
    fn terminator(&mut self, b: Block) -> Terminator {
        let (primal, plan) = (self.primal, self.plan);
        let nb = self.block(b);
        match primal.blocks[b]
            .term
            .as_ref()
            .expect("verified blocks have terminators")
        {
            Terminator::Jump(d) => Terminator::Jump(self.block(*d)),
            Terminator::Br {
                cond,
                then_dest,
                else_dest,
            } => Terminator::Br {
                cond: self.vmap.get(primal, &mut self.fwd, *cond),
                then_dest: self.block(*then_dest),
                else_dest: self.block(*else_dest),
            },
            Terminator::Ret(vals) => {
                if self.tape && plan.stack.records_ret() {
                    let n = plan.stack.ret_number(b).unwrap_or(0);
                    let n = self.fwd.make_const(Scalar::I64(n));
                    push(&mut self.fwd, nb, n);
                }
                let vals = if self.needs_primal {
                    vals.iter()
                        .map(|&v| self.vmap.get(primal, &mut self.fwd, v))
                        .collect()
                } else {
                    SmallVec::new()
                };
                Terminator::Ret(vals)
            }
        }
    }
}

/// Appends an instruction with one result to `block`; returns the result.
fn append(
    fwd: &mut Function,
    block: Block,
    op: Opcode,
    imm: Imm,
    args: &[Value],
    ty: Type,
) -> Value {
    let inst = fwd.make_inst(op, imm, args, &[ty]);
    fwd.append_inst(block, inst);
    fwd.insts[inst].results[0]
}

/// Appends `push v` to `block`.
fn push(fwd: &mut Function, block: Block, v: Value) {
    let inst = fwd.make_inst(Opcode::Push, Imm::None, &[v], &[]);
    fwd.append_inst(block, inst);
}
