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
    Block, Function, Imm, Opcode, Scalar, Signature, Terminator, Type, Value, ValueDef,
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
pub(crate) fn forward_ir(
    primal: &Function,
    sig: &Signature,
    plan: &Plan,
    needs_primal: bool,
    marker: Option<i64>,
) -> Result<Function, InternalError> {
    let mut fwd = Function::new(sig);
    let mut vmap = ValueMap {
        map: SecondaryMap::new(),
    };
    for (&p, &q) in primal.params.iter().zip(&fwd.params) {
        vmap.map[p] = Some(q);
        fwd.values[q].name = primal.values[p].name.clone();
    }
    let tape = !plan.trivial;

    // Blocks in layout order, with their phis (edges come last, once every value
    // exists).
    let mut bmap: SecondaryMap<Block, Option<Block>> = SecondaryMap::new();
    for &b in primal
        .layout
        .iter()
        .filter(|&&b| plan.reachable.contains(b))
    {
        let nb = fwd.make_block(primal.blocks[b].name.as_deref());
        fwd.append_block(nb);
        bmap[b] = Some(nb);
    }
    let block = |b: Block| bmap[b].expect("reachable blocks are mapped");
    for &b in primal
        .layout
        .iter()
        .filter(|&&b| plan.reachable.contains(b))
    {
        let nb = block(b);
        for phi in &primal.blocks[b].phis {
            let v = fwd.append_phi(nb, primal.value_type(phi.value), &[]);
            fwd.values[v].name = primal.values[phi.value].name.clone();
            vmap.map[phi.value] = Some(v);
        }
        if tape && plan.live.contains(b) && plan.stack.records_pred(b) && !plan.tape.replays(b) {
            let incoming: SmallVec<[(Block, Value); 2]> = plan
                .stack
                .preds(b)
                .iter()
                .enumerate()
                .map(|(i, &p)| (block(p), fwd.make_const(Scalar::I64(i as i64 + 1))))
                .collect();
            let from = fwd.append_phi(nb, Type::I64, &incoming);
            fwd.set_value_name(from, "from");
            push(&mut fwd, nb, from);
        }
    }

    // Instructions in reverse postorder, so that operands exist before their uses.
    // The handles of local buffers kept on the tape, and of shadow buffers.
    let mut buf_handle: SecondaryMap<Value, Option<Value>> = SecondaryMap::new();
    let mut shadow_handle: SecondaryMap<Value, Option<Value>> = SecondaryMap::new();
    let cfg = ControlFlowGraph::new(primal);
    if let (Some(m), Some(&entry)) = (marker, primal.layout.first()) {
        let m = fwd.make_const(Scalar::I64(m));
        push(&mut fwd, block(entry), m);
    }
    for &b in cfg.reverse_postorder() {
        let nb = block(b);
        let data = &primal.blocks[b];
        for &inst in &data.insts {
            let d = &primal.insts[inst];
            let args: SmallVec<[Value; 3]> = d
                .args
                .iter()
                .map(|&a| vmap.get(primal, &mut fwd, a))
                .collect();
            let types: SmallVec<[Type; 1]> =
                d.results.iter().map(|&r| primal.value_type(r)).collect();
            let name = |v: Value| primal.values[v].name.clone();
            if d.opcode == Opcode::Alloc && tape {
                let a = d.results[0];
                if plan.tape_bufs.contains(a) {
                    let h = append(&mut fwd, nb, Opcode::TapeAlloc, d.imm, &args, Type::I64);
                    let view = append(&mut fwd, nb, Opcode::TapeView, d.imm, &[h], types[0]);
                    fwd.values[view].name = name(a);
                    fwd.values[h].name = name(a).map(|n| format!("{n}.buf").into());
                    vmap.map[a] = Some(view);
                    buf_handle[a] = Some(h);
                } else {
                    let v = append(&mut fwd, nb, d.opcode, d.imm, &args, types[0]);
                    fwd.values[v].name = name(a);
                    vmap.map[a] = Some(v);
                }
                if plan.shadow_bufs.contains(a) {
                    let h = append(&mut fwd, nb, Opcode::TapeAlloc, d.imm, &args, Type::I64);
                    fwd.values[h].name = name(a).map(|n| format!("d{n}.buf").into());
                    shadow_handle[a] = Some(h);
                }
                continue;
            }
            let (imm, overlay) = match plan.calls.get(&inst) {
                Some(CallRule::Derived {
                    fwd: f, overlay, ..
                }) if tape => {
                    if *overlay {
                        (d.imm, Some(*f))
                    } else {
                        (Imm::Func(*f), None)
                    }
                }
                _ => (d.imm, None),
            };
            let ni = fwd.make_inst(d.opcode, imm, &args, &types);
            for (&r, &nr) in d.results.iter().zip(&fwd.insts[ni].results.clone()) {
                fwd.values[nr].name = name(r);
                vmap.map[r] = Some(nr);
            }
            fwd.append_inst(nb, ni);
            if let Some(f) = overlay {
                let ni = fwd.make_inst(Opcode::Call, Imm::Func(f), &args, &types);
                fwd.append_inst(nb, ni);
            }
        }
    }

    // Saved values, the `ret` number, terminators, phi edges.
    for &b in cfg.reverse_postorder() {
        let nb = block(b);
        let data = &primal.blocks[b];
        let saves = |fwd: &mut Function, items: &[SaveItem]| -> Result<(), InternalError> {
            for &item in items {
                let nv = match item {
                    SaveItem::Value(v) => Some(vmap.get(primal, fwd, v)),
                    SaveItem::Buf(a) => buf_handle[a],
                    SaveItem::Shadow(a) => shadow_handle[a],
                };
                let nv = nv.ok_or_else(|| InternalError::NeverMade {
                    item: format!("{item:?}"),
                })?;
                push(fwd, nb, nv);
            }
            Ok(())
        };
        let live = tape && plan.live.contains(b);
        if live {
            saves(&mut fwd, plan.tape.pushed(b))?;
        }
        if live && matches!(data.term, Some(Terminator::Ret(_))) {
            saves(&mut fwd, plan.tape.once())?;
        }
        let term = match data
            .term
            .as_ref()
            .expect("verified blocks have terminators")
        {
            Terminator::Jump(d) => Terminator::Jump(block(*d)),
            Terminator::Br {
                cond,
                then_dest,
                else_dest,
            } => Terminator::Br {
                cond: vmap.get(primal, &mut fwd, *cond),
                then_dest: block(*then_dest),
                else_dest: block(*else_dest),
            },
            Terminator::Ret(vals) => {
                if tape && plan.stack.records_ret() {
                    let n = plan.stack.ret_number(b).unwrap_or(0);
                    let n = fwd.make_const(Scalar::I64(n));
                    push(&mut fwd, nb, n);
                }
                let vals = if needs_primal {
                    vals.iter()
                        .map(|&v| vmap.get(primal, &mut fwd, v))
                        .collect()
                } else {
                    SmallVec::new()
                };
                Terminator::Ret(vals)
            }
        };
        fwd.set_terminator(nb, term);
        for phi in &data.phis {
            let nphi = vmap.map[phi.value].expect("phis are mapped");
            for &(p, v) in &phi.incoming {
                if plan.reachable.contains(p) {
                    let nv = vmap.get(primal, &mut fwd, v);
                    fwd.add_phi_incoming(nphi, block(p), nv);
                }
            }
        }
    }
    Ok(fwd)
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
