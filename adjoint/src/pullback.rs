//! Pullback assembly (Mooncake's `pullback_ir`): the reverse of every live block, in
//! reverse layout order, behind an entry that dispatches on the returning block.
//!
//! `@f.rvs(dy...) -> (dx...)` takes one cotangent per float result (an active return)
//! and returns one per `active` parameter. It is written with the builder, and its
//! cotangents are builder variables (the private `Cotangents`), so the builder places the phis
//! where reverse control flow merges.
//!
//! - The entry defines every cotangent as 0, then goes to the reverse of the block
//!   that returned: popping its number when there are several (a chain of
//!   `icmp eq` and `br`).
//! - The reverse `C'` of a block `C`: the seeds, if `C` ends in `ret` (the cotangent
//!   of each active returned value gets the pullback's parameter for that result);
//!   the pops of `C`'s saved values, last pushed first; the reverse of `C`'s
//!   instructions, last first, from the [rule table](crate::rules), each resetting
//!   the result's cotangent to 0 after adding its contributions; the cotangents of
//!   `C`'s active phis, read together and reset. Then, with one predecessor, it adds
//!   each phi's cotangent into the incoming value of that edge and jumps to the
//!   predecessor's reverse; with several, it pops the `%from` number and branches to
//!   an edge block per predecessor that does the same; with none (the entry), it
//!   returns the cotangents of the active parameters.
//!
//! A cotangent known to be zero is never used (symbolic zeros): an instruction
//! whose result's cotangent is the zero constant emits nothing, and adding into a
//! zero cotangent is a definition, not an `fadd`.

use cranelift_entity::SecondaryMap;
use gradlift_ir::write::{self, Names};
use gradlift_ir::{
    Block, CmpPred, Elem, FuncId, Function, FunctionBuilder, Imm, Inst, Module, Opcode, Scalar,
    Signature, Terminator, Type, Value, ValueDef, Variable,
};
use hashbrown::HashMap;
use smallvec::SmallVec;

use crate::config::{Activity, RetActivity, RuleConfig};
use crate::error::InternalError;
use crate::plan::Plan;
use crate::rules::{ArgVal, FloatRule, RevCtx};
use crate::stmt::{CallRule, RevInst, RevStmt, SaveItem};
use crate::tape::{How, MAX_DEPTH, TapePlan};

/// The cotangent of every active value, as a builder variable.
///
/// Each variable is defined as 0 in the pullback's entry. The reverse of a value's
/// definition adds the value's cotangent into its operands' and then defines the
/// value's variable as 0 again, so that in a loop each iteration's instance of the
/// value starts from zero: instances never mix their cotangents.
pub(crate) struct Cotangents {
    pub(crate) vars: SecondaryMap<Value, Option<Variable>>,
    pub(crate) zero_f64: Value,
    pub(crate) zero_f32: Option<Value>,
}

impl Cotangents {
    /// The zeros, made first thing in the pullback's entry: the literal `0.0`, and
    /// when the primal has any `f32`, `%zero = const f32 0.0`. No variables yet.
    pub(crate) fn new(b: &mut FunctionBuilder<'_>, primal: &Function) -> Cotangents {
        let needs_f32 = primal
            .values
            .values()
            .any(|d| d.ty.elem() == Some(Elem::F32) || d.ty == Type::F32);
        let mut cts = Cotangents {
            vars: SecondaryMap::new(),
            zero_f64: b.fconst(0.0),
            zero_f32: None,
        };
        if needs_f32 {
            let z = b.const_inst(Scalar::F32(0.0));
            cts.zero_f32 = Some(b.named("zero", z));
        }
        cts
    }

    /// Declares the variable `%dNAME` of every value of the primal that is
    /// `active`, defined as its zero here (in the entry).
    pub(crate) fn declare(
        &mut self,
        b: &mut FunctionBuilder<'_>,
        primal: &Function,
        names: &Names,
        active: &dyn Fn(Value) -> bool,
    ) {
        for (v, d) in primal.values.iter() {
            if active(v) {
                let var = b.declare_named_var(&format!("d{}", names.value(v)), d.ty);
                b.def_var(var, self.zero(d.ty));
                self.vars[v] = Some(var);
            }
        }
    }

    /// The cotangents of the primal parameters `active` (by index) here: their
    /// variables, or the zero for a parameter nothing flows into.
    pub(crate) fn of_params(
        &self,
        b: &mut FunctionBuilder<'_>,
        primal: &Function,
        active: &[usize],
    ) -> Vec<Value> {
        active
            .iter()
            .map(|&i| {
                let p = primal.params[i];
                match self.vars[p] {
                    Some(var) => b.use_var(var),
                    None => self.zero(primal.value_type(p)),
                }
            })
            .collect()
    }

    /// The zero of a float type, as the pullback writes it: the literal `0.0` for
    /// `f64`; for `f32`, a `const f32 0.0` instruction in the entry (an `f32`
    /// literal next to another literal would parse back as `f64`).
    pub(crate) fn zero(&self, ty: Type) -> Value {
        match ty {
            Type::F32 => self.zero_f32.unwrap_or(self.zero_f64),
            _ => self.zero_f64,
        }
    }

    /// `ct[v] += c`, or `ct[v] = c` while `ct[v]` is the zero.
    pub(crate) fn add(&self, b: &mut FunctionBuilder<'_>, primal: &Function, v: Value, c: Value) {
        let Some(var) = self.vars[v] else {
            return;
        };
        let cur = b.use_var(var);
        let zero = self.zero(primal.value_type(v));
        let sum = if cur == zero {
            c
        } else if let Some(g) = negated(b.func(), c) {
            // `cur + -g` is `cur - g` exactly (IEEE defines subtraction so): one
            // instruction instead of a sign flip and an addition (the `fneg`, if
            // now unused, goes in `finish`: `drop_unused_negs`).
            b.fsub(cur, g)
        } else {
            b.fadd(cur, c)
        };
        b.def_var(var, sum);
    }

    /// The cotangent of `v` here, and resets it to zero.
    pub(crate) fn take(
        &self,
        b: &mut FunctionBuilder<'_>,
        primal: &Function,
        v: Value,
    ) -> Option<Value> {
        let var = self.vars[v]?;
        let g = b.use_var(var);
        let zero = self.zero(primal.value_type(v));
        b.def_var(var, zero);
        Some(g)
    }
}

/// The reverse of the float op `inst` (of `primal`), whose result's cotangent is
/// `g`: each operand `k` of `operands` gets `rule`'s contribution added into its
/// cotangent, after `check` has seen it. `args` are the operands as the reverse
/// has them (saved, recomputed or constants), `result` the result.
#[allow(clippy::too_many_arguments)]
pub(crate) fn add_contributions(
    b: &mut FunctionBuilder<'_>,
    cts: &Cotangents,
    primal: &Function,
    inst: Inst,
    rule: &FloatRule,
    operands: &[usize],
    args: &[ArgVal],
    result: Option<Value>,
    g: Value,
    check: &mut dyn FnMut(&mut FunctionBuilder<'_>, Value, usize),
) -> Result<(), InternalError> {
    let d = &primal.insts[inst];
    let ty = primal.value_type(d.results[0]);
    let arg_types: SmallVec<[Type; 3]> = d.args.iter().map(|&a| primal.value_type(a)).collect();
    for &k in operands {
        let mut ctx = RevCtx::new(b, args, &arg_types, result, ty, g);
        let contribution = rule.emit(&mut ctx, k);
        if let Some(m) = ctx.missing {
            return Err(InternalError::RuleReadUnsaved {
                opcode: d.opcode.to_string(),
                what: m,
            });
        }
        if let Some(c) = contribution {
            check(b, c, k);
            cts.add(b, primal, d.args[k], c);
        }
    }
    Ok(())
}

/// `g` when `c` is `fneg g`.
pub(crate) fn negated(func: &Function, c: Value) -> Option<Value> {
    match func.value_def(c) {
        ValueDef::Result(inst, 0) if func.insts[inst].opcode == Opcode::Fneg => {
            Some(func.insts[inst].args[0])
        }
        _ => None,
    }
}

/// Seals each block of the pullback as soon as every jump to it is written, so that
/// reading a cotangent there finds its value at once instead of placing a phi to be
/// removed later (and so that a zero cotangent is seen to be zero).
///
/// The predecessors of a reverse block `C'` are known before any code is written:
/// one block for each live successor of `C` (its reverse, an edge block, or a
/// dispatch block of it), plus the entry's dispatch if `C` ends in `ret`. Edge and
/// dispatch blocks have one predecessor.
struct Sealer {
    expected: SecondaryMap<Block, usize>,
}

impl Sealer {
    /// Seals each of `targets` whose predecessors are all filled.
    fn check(&self, b: &mut FunctionBuilder<'_>, targets: &[Block]) {
        for &t in targets {
            if !b.is_sealed(t) && b.preds(t).len() == self.expected[t] {
                b.seal_block(t);
            }
        }
    }
}

/// Which primal parameters the pullback deals with, by index, in order.
pub(crate) struct ParamSets<'a> {
    /// The `active` ones (the pullback returns their cotangents).
    pub(crate) active: &'a [usize],
    /// The slices it takes: the `dup` and `dupnoneed` ones, and the frozen `const`
    /// ones.
    pub(crate) slices: &'a [usize],
    /// The `dup` and `dupnoneed` ones (it takes their shadows).
    pub(crate) dup: &'a [usize],
}

/// Debug mode's checks in the pullback (see `docs/reverse-mode.md`, "Debug mode").
pub(crate) struct DebugChecks<'a> {
    /// The marker the forward pass pushed first, popped and compared last (`None`:
    /// not in debug mode).
    pub(crate) marker: Option<i64>,
    /// Check that no reverse statement creates a NaN.
    pub(crate) check_nan: bool,
    /// The primal's name, for messages.
    pub(crate) func: &'a str,
}

impl DebugChecks<'_> {
    /// Pops the marker and traps unless it is the one the forward pass pushed.
    fn check_marker(&self, b: &mut FunctionBuilder<'_>) {
        if let Some(m) = self.marker {
            let popped = b.pop(Type::I64);
            let expected = b.iconst(m);
            let bad = b.icmp(CmpPred::Ne, popped, expected);
            b.trap_if(
                bad,
                &format!(
                    "the tape is out of step at the end of the pullback of @{}: it did not pop exactly what the forward pass pushed",
                    self.func
                ),
            );
        }
    }

    /// Traps if `c` is NaN while `g` is not: a reverse statement created a NaN.
    fn check_nan(
        &self,
        b: &mut FunctionBuilder<'_>,
        c: Value,
        g: Value,
        what: &dyn Fn() -> String,
    ) {
        if !self.check_nan {
            return;
        }
        let c_nan = b.fcmp(CmpPred::Ne, c, c);
        let g_num = b.fcmp(CmpPred::Eq, g, g);
        let bad = b.and(c_nan, g_num);
        b.trap_if(
            bad,
            &format!(
                "NaN created by {} in the pullback of @{}",
                what(),
                self.func
            ),
        );
    }
}

/// The pullback's parameters for the primal's `dup` slices: the slice and its
/// shadow, by primal parameter value.
struct SliceParams {
    slice: HashMap<Value, Value>,
    shadow: HashMap<Value, Value>,
}

/// Builds the pullback of `primal` as the body of `id`, declared in `module` with
/// its signature. `names` are the primal's print names (the pullback's values are
/// named after them); `params_of` says which parameters are active and which have
/// shadows.
///
/// The steps, against Mooncake's `pullback_ir`: the parameters
/// ([`bind_params`]) and the cotangent variables ([`Cotangents`]); the blocks
/// ([`RevBlocks`]); the entry, which pops what every block needs and dispatches on
/// the returning block ([`build_entry`]); the reverse of each live block, last
/// first ([`reverse_block`]), each ending in the dispatch back to its predecessors
/// ([`leave_block`], Mooncake's `make_switch_stmts`); then the clean-up and the
/// layout ([`finish`]). Every step writes through one builder, in this order, so
/// the order is part of the output.
pub(crate) fn pullback_ir(
    module: &Module,
    id: FuncId,
    primal: &Function,
    names: &Names,
    plan: &Plan,
    params_of: &ParamSets<'_>,
    debug: &DebugChecks<'_>,
) -> Result<(Function, Vec<Inst>), InternalError> {
    let mut b = FunctionBuilder::new(module, id);
    let (params, seed_base) = bind_params(&mut b, module, id, primal, names, params_of, debug);
    let mut cts = Cotangents::new(&mut b, primal);
    if plan.trivial || plan.stack.rets().is_empty() {
        let vals = cts.of_params(&mut b, primal, params_of.active);
        debug.check_marker(&mut b);
        b.ret(&vals);
        return Ok((b.finish().map_err(InternalError::Build)?, Vec::new()));
    }
    cts.declare(&mut b, primal, names, &|v| {
        plan.activity.is_active(v, primal)
    });
    let pb = Pullback {
        module,
        primal,
        names,
        plan,
        debug,
        active: params_of.active,
        params,
        seed_base,
        cts,
    };
    let mut blocks = RevBlocks::new(&mut b, primal, names, plan);
    let entry = build_entry(&mut b, &pb, &mut blocks)?;
    let live = blocks.live.clone();
    // The views of shadow buffers, which a rule of width N reads and writes by
    // lane ([`widen`](crate::widen)): those the entry makes, then the blocks'.
    let mut shadow_views: Vec<Inst> = entry
        .views
        .iter()
        .filter_map(|(item, &v)| match (item, b.func().value_def(v)) {
            (SaveItem::Shadow(_), ValueDef::Result(i, _)) => Some(i),
            _ => None,
        })
        .collect();
    shadow_views.sort();
    for (idx, &c) in live.iter().rev().enumerate() {
        reverse_block(&mut b, &pb, &entry, &mut blocks, idx, c, &mut shadow_views)?;
    }
    Ok((finish(b, &pb.cts, blocks)?, shadow_views))
}

/// What every step of the pullback reads: the primal, its plan, and the pullback's
/// parameters and cotangent variables (declared before any reverse block is
/// written).
struct Pullback<'a> {
    module: &'a Module,
    primal: &'a Function,
    names: &'a Names,
    plan: &'a Plan,
    debug: &'a DebugChecks<'a>,
    /// The `active` parameters, by index.
    active: &'a [usize],
    params: SliceParams,
    /// The position of the first seed (result cotangent) among the parameters.
    seed_base: usize,
    cts: Cotangents,
}

/// Names the pullback's parameters after the primal's: the slices it takes, their
/// shadows (`%dx`) and the seeds (`%dy`, or `%dy0`, `%dy1`, ...). In debug mode,
/// traps when a shadow's length differs from its slice's. Returns the slice
/// parameters and the position of the first seed.
fn bind_params(
    b: &mut FunctionBuilder<'_>,
    module: &Module,
    id: FuncId,
    primal: &Function,
    names: &Names,
    params_of: &ParamSets<'_>,
    debug: &DebugChecks<'_>,
) -> (SliceParams, usize) {
    let (slices, dup) = (params_of.slices, params_of.dup);
    let mut params = SliceParams {
        slice: HashMap::new(),
        shadow: HashMap::new(),
    };
    for (k, &i) in slices.iter().enumerate() {
        let p = primal.params[i];
        let s = b.param(k);
        let s = b.named(names.value(p), s);
        params.slice.insert(p, s);
    }
    for (k, &i) in dup.iter().enumerate() {
        let p = primal.params[i];
        let ds = b.param(slices.len() + k);
        let ds = b.named(&format!("d{}", names.value(p)), ds);
        params.shadow.insert(p, ds);
    }
    if debug.marker.is_some() {
        for (k, &i) in dup.iter().enumerate() {
            let p = primal.params[i];
            let (x, dx) = (params.slice[&p], params.shadow[&p]);
            let n = b.len(x);
            let dn = b.len(dx);
            let bad = b.icmp(CmpPred::Ne, n, dn);
            let name = names.value(p);
            b.trap_if(
                bad,
                &format!(
                    "the shadow of %{name} (parameter {} of @{}) has another length than %{name}",
                    k + 1,
                    debug.func
                ),
            );
        }
    }
    let seed_base = slices.len() + dup.len();
    let n_seeds = module.sig(id).params.len() - seed_base;
    for j in 0..n_seeds {
        let p = b.param(seed_base + j);
        let name = if n_seeds == 1 {
            "dy".to_string()
        } else {
            format!("dy{j}")
        };
        b.named(&name, p);
    }
    (params, seed_base)
}

/// The pullback's blocks: the reverse of each live block, the auxiliary blocks each
/// owns (its dispatch chain and edge blocks), and the entry's.
///
/// Invariant: every live block has its reverse, made before any code is written,
/// in reverse layout order; the sealer expects, for each, one jump per live
/// successor of the primal block, plus one from the entry's dispatch for a block
/// ending in `ret`.
struct RevBlocks {
    /// The live blocks, in layout order.
    live: Vec<Block>,
    rev: SecondaryMap<Block, Option<Block>>,
    /// Each reverse block, in reverse layout order, with the blocks it owns.
    owned: Vec<(Block, Vec<Block>)>,
    entry: Block,
    /// The entry's dispatch chain.
    entry_aux: Vec<Block>,
    sealer: Sealer,
}

impl RevBlocks {
    /// Makes the reverse block `rev_NAME` of each live block of `primal`, last first,
    /// and counts the jumps each will get.
    fn new(b: &mut FunctionBuilder<'_>, primal: &Function, names: &Names, plan: &Plan) -> Self {
        let live: Vec<Block> = primal
            .layout
            .iter()
            .copied()
            .filter(|&blk| plan.live.contains(blk))
            .collect();
        let mut rev: SecondaryMap<Block, Option<Block>> = SecondaryMap::new();
        let mut owned: Vec<(Block, Vec<Block>)> = Vec::new();
        let mut sealer = Sealer {
            expected: SecondaryMap::new(),
        };
        for &c in live.iter().rev() {
            let rb = b.create_block(&format!("rev_{}", names.block(c)));
            rev[c] = Some(rb);
            owned.push((rb, Vec::new()));
        }
        for &s in &live {
            for &p in plan.stack.preds(s) {
                if let Some(rp) = rev[p] {
                    sealer.expected[rp] += 1;
                }
            }
        }
        for &r in plan.stack.rets() {
            if let Some(rr) = rev[r] {
                sealer.expected[rr] += 1;
            }
        }
        RevBlocks {
            live,
            rev,
            owned,
            entry: b.current_block(),
            entry_aux: Vec::new(),
            sealer,
        }
    }

    /// The reverse of the live block `c`.
    fn of(&self, c: Block) -> Block {
        self.rev[c].expect("live blocks have a reverse")
    }
}

/// What the entry pops or makes for every reverse block.
struct EntryValues {
    /// The values saved once (pushed before `ret`).
    once: HashMap<SaveItem, Value>,
    /// The views of the tape buffers whose handles were saved once, made in the
    /// entry: a buffer stays where it is until the tape is emptied, which no
    /// pullback does, so one view serves every block (and loops need not remake
    /// it in every iteration).
    views: HashMap<SaveItem, Value>,
    /// Per counted loop, the variables of its counter and initial value.
    counters: Vec<(Variable, Variable)>,
}

/// Writes the entry: pops the returning block's number (when several blocks
/// return) and the values saved once (pushed after the returning block's own,
/// before its number), defines the counters of counted loops, then dispatches to
/// the reverse of the returning block.
fn build_entry(
    b: &mut FunctionBuilder<'_>,
    pb: &Pullback<'_>,
    blocks: &mut RevBlocks,
) -> Result<EntryValues, InternalError> {
    let (plan, names) = (pb.plan, pb.names);
    let ret_n = plan.stack.records_ret().then(|| {
        let n = b.pop(Type::I64);
        b.named("ret_block", n)
    });
    let mut once: HashMap<SaveItem, Value> = HashMap::new();
    let mut views: HashMap<SaveItem, Value> = HashMap::new();
    for &item in plan.tape.once().iter().rev() {
        let p = pop_item(b, pb.primal, names, item);
        once.insert(item, p);
    }
    // In the order the handles were pushed, so the text is stable.
    for &item in plan.tape.once() {
        if let SaveItem::Buf(a) | SaveItem::Shadow(a) = item {
            let v = make_view(b, pb.primal, names, item, a, once[&item])?;
            views.insert(item, v);
        }
    }
    let counters: Vec<(Variable, Variable)> = plan
        .tape
        .loops
        .iter()
        .map(|l| {
            let name = names.value(l.iv);
            let zero = b.iconst(0);
            let i = b.declare_named_var(&format!("{name}.rev"), Type::I64);
            b.def_var(i, zero);
            let init = b.declare_named_var(&format!("{name}.init"), Type::I64);
            b.def_var(init, zero);
            (i, init)
        })
        .collect();
    let targets: Vec<Block> = plan.stack.rets().iter().map(|&r| blocks.of(r)).collect();
    if let Some(n) = ret_n {
        let (sealer, aux) = (&mut blocks.sealer, &mut blocks.entry_aux);
        dispatch(b, sealer, n, &targets, "rev_ret", aux);
    } else {
        b.jump(targets[0]);
        blocks.sealer.check(b, &targets);
    }
    Ok(EntryValues {
        once,
        views,
        counters,
    })
}

/// Writes `rev_C`, the reverse of the live block `c` (the `idx`-th reversed): the
/// cotangents known zero on entry, the seeds when `c` returns, the pops of what
/// `c` saved, what the tape plan has otherwise ([`RevBlock::recover`]), the
/// reverse of `c`'s statements, last first, and the cotangents of its phis; then
/// the way back to its predecessors ([`leave_block`]).
fn reverse_block(
    b: &mut FunctionBuilder<'_>,
    pb: &Pullback<'_>,
    entry: &EntryValues,
    blocks: &mut RevBlocks,
    idx: usize,
    c: Block,
    shadow_views: &mut Vec<Inst>,
) -> Result<(), InternalError> {
    let (plan, primal, cts) = (pb.plan, pb.primal, &pb.cts);
    b.switch_to(blocks.of(c));
    // Cotangents dead at the end of `c` are zero here (see `liveness`): saying so
    // keeps every lookup within its value's live range.
    for &v in plan.liveness.zero_on_entry(c) {
        if let Some(var) = cts.vars[v] {
            b.def_var(var, cts.zero(primal.value_type(v)));
        }
    }
    for &(v, s) in &plan.seeds[c] {
        let dy = b.param(pb.seed_base + s);
        cts.add(b, primal, v, dy);
    }
    let mut saved: HashMap<SaveItem, Value> = HashMap::new();
    for &item in plan.tape.pushed(c).iter().rev() {
        let p = pop_item(b, primal, pb.names, item);
        saved.insert(item, p);
    }
    let mut rev = RevBlock {
        module: pb.module,
        primal,
        names: pb.names,
        debug: pb.debug,
        cts,
        params: &pb.params,
        saved,
        views: HashMap::new(),
        entry_views: &entry.views,
        tape: &plan.tape,
        once: &entry.once,
        counters: &entry.counters,
        block: c,
    };
    rev.recover(b)?;
    for r in plan.insts[c].iter().rev() {
        match r {
            RevStmt::Float(r) => rev.float(b, r)?,
            RevStmt::Load { inst } => rev.load(b, *inst)?,
            RevStmt::Store { inst, value_active } => rev.store(b, *inst, *value_active)?,
            RevStmt::Call { inst, call } => rev.call(b, *inst, call)?,
        }
    }
    let phis: Vec<(usize, Value)> = plan.phis[c]
        .iter()
        .enumerate()
        .filter_map(|(i, p)| Some((i, cts.take(b, primal, p.phi)?)))
        .collect();
    let phis: Vec<(usize, Value)> = phis
        .into_iter()
        .filter(|&(i, g)| g != cts.zero(primal.value_type(plan.phis[c][i].phi)))
        .collect();
    let left = leave_block(b, pb, &mut rev, blocks, idx, &phis);
    // The views of shadow buffers, which a rule of width N reads and writes by lane
    // ([`widen`](crate::widen)).
    for (item, &v) in &rev.views {
        if let (SaveItem::Shadow(_), ValueDef::Result(i, _)) = (item, b.func().value_def(v)) {
            shadow_views.push(i);
        }
    }
    left
}

/// Ends `rev_C` (for the block `rev.block`, whose phis' nonzero cotangents are
/// `phis`): in the entry, returns the cotangents of the active parameters; with one
/// predecessor, adds each phi's cotangent into the incoming value of that edge and
/// jumps to the predecessor's reverse; with several, goes back by
/// [`switch_back`], through an edge block per predecessor that has additions.
fn leave_block(
    b: &mut FunctionBuilder<'_>,
    pb: &Pullback<'_>,
    rev: &mut RevBlock<'_>,
    blocks: &mut RevBlocks,
    idx: usize,
    phis: &[(usize, Value)],
) -> Result<(), InternalError> {
    let c = rev.block;
    let preds = pb.plan.stack.preds(c);
    match preds {
        [] => {
            let vals = pb.cts.of_params(b, pb.primal, pb.active);
            pb.debug.check_marker(b);
            b.ret(&vals);
        }
        [p] => {
            add_edge_cts(b, pb, c, phis, 0);
            b.jump(blocks.of(*p));
            blocks.sealer.check(b, &[blocks.of(*p)]);
        }
        _ => {
            let name = format!("rev_{}", pb.names.block(c));
            let mut targets = Vec::with_capacity(preds.len());
            let mut edges = Vec::new();
            for (e, &p) in preds.iter().enumerate() {
                let has_adds = phis
                    .iter()
                    .any(|&(i, _)| pb.plan.phis[c][i].edges[e].is_some());
                if has_adds {
                    let eb = b.create_block(&format!("{name}.from_{}", pb.names.block(p)));
                    blocks.sealer.expected[eb] = 1;
                    blocks.owned[idx].1.push(eb);
                    edges.push((e, eb, p));
                    targets.push(eb);
                } else {
                    targets.push(blocks.of(p));
                }
            }
            switch_back(b, pb, rev, blocks, idx, &targets)?;
            for (e, eb, p) in edges {
                b.switch_to(eb);
                add_edge_cts(b, pb, c, phis, e);
                b.jump(blocks.of(p));
                blocks.sealer.check(b, &[blocks.of(p)]);
            }
        }
    }
    Ok(())
}

/// Adds the cotangent of each phi of `c` (`phis`) into its incoming value along
/// edge `e` (the `e`-th predecessor).
fn add_edge_cts(
    b: &mut FunctionBuilder<'_>,
    pb: &Pullback<'_>,
    c: Block,
    phis: &[(usize, Value)],
    e: usize,
) {
    for &(i, g) in phis {
        if let Some(v) = pb.plan.phis[c][i].edges[e] {
            pb.cts.add(b, pb.primal, v, g);
        }
    }
}

/// Branches from the reverse of a block with several predecessors to `targets`
/// (one per predecessor, in the block stack's order; Mooncake's
/// `make_switch_stmts`): for a counted loop's header, to the preheader when the
/// counter is at its initial value and else one iteration back; for a replayed
/// branch, on its condition; otherwise on the popped `%from` number.
fn switch_back(
    b: &mut FunctionBuilder<'_>,
    pb: &Pullback<'_>,
    rev: &mut RevBlock<'_>,
    blocks: &mut RevBlocks,
    idx: usize,
    targets: &[Block],
) -> Result<(), InternalError> {
    let (plan, c) = (pb.plan, rev.block);
    if let Some(k) = plan.tape.header_loop_index(c) {
        let l = &plan.tape.loops[k];
        let counters = rev.counters;
        let (iv, init) = (b.use_var(counters[k].0), b.use_var(counters[k].1));
        let first = b.icmp(CmpPred::Eq, iv, init);
        let back = b.iconst(-l.step);
        let prev = b.ins(Opcode::Iadd, Imm::None, &[iv, back]);
        let prev = b.results(prev)[0];
        b.def_var(counters[k].0, prev);
        let (t, e) = (targets[l.pre_index], targets[l.latch_index]);
        b.br(first, t, e);
        blocks.sealer.check(b, &[t, e]);
    } else if let Some((cond, true_index)) = plan.tape.cond_merge(c) {
        let cv = rev.materialize(b, cond, MAX_DEPTH)?;
        let (t, e) = (targets[true_index], targets[1 - true_index]);
        b.br(cv, t, e);
        blocks.sealer.check(b, &[t, e]);
    } else {
        let from = b.pop(Type::I64);
        let from = b.named("from", from);
        let name = format!("rev_{}", pb.names.block(c));
        let aux = &mut blocks.owned[idx].1;
        dispatch(b, &mut blocks.sealer, from, targets, &name, aux);
    }
    Ok(())
}

/// Finishes the pullback: drops the additions of zero that late sealing left,
/// and lays the blocks out as the entry and its dispatch chain, then each reverse
/// block followed by the blocks it owns.
fn finish(
    b: FunctionBuilder<'_>,
    cts: &Cotangents,
    blocks: RevBlocks,
) -> Result<Function, InternalError> {
    let mut func = b.finish().map_err(InternalError::Build)?;
    let zeros: SmallVec<[Value; 2]> = cts.zero_f32.into_iter().chain([cts.zero_f64]).collect();
    drop_zero_adds(&mut func, &zeros);
    drop_unused_negs(&mut func);
    let mut layout = vec![blocks.entry];
    layout.extend(blocks.entry_aux);
    for (rb, aux) in blocks.owned {
        layout.push(rb);
        layout.extend(aux);
    }
    if layout.len() == func.layout.len() {
        func.layout = layout;
    }
    Ok(func)
}

/// What the reverse of one block works with: the values it popped, and the views of
/// tape buffers it made from their handles.
struct RevBlock<'a> {
    module: &'a Module,
    primal: &'a Function,
    names: &'a Names,
    debug: &'a DebugChecks<'a>,
    cts: &'a Cotangents,
    params: &'a SliceParams,
    saved: HashMap<SaveItem, Value>,
    views: HashMap<SaveItem, Value>,
    /// The views the entry made ([`EntryValues::views`]).
    entry_views: &'a HashMap<SaveItem, Value>,
    /// The tape plan: how values not pushed are had.
    tape: &'a TapePlan,
    /// The values saved once, popped in the entry.
    once: &'a HashMap<SaveItem, Value>,
    /// Per counted loop, the variables of its counter and initial value.
    counters: &'a [(Variable, Variable)],
    /// The primal block reversed.
    block: Block,
}

impl RevBlock<'_> {
    /// Has what the tape plan does not push for this block (values made once, the
    /// counter, recomputed or reloaded; buffer handles saved once); and, where the
    /// block is an exit of a counted loop (leaving it backwards), starts the loop's
    /// counter at the induction variable's last value.
    fn recover(&mut self, b: &mut FunctionBuilder<'_>) -> Result<(), InternalError> {
        let (tape, c) = (self.tape, self.block);
        for &item in tape.needed(c) {
            if self.saved.contains_key(&item) {
                continue;
            }
            match item {
                SaveItem::Value(v) => {
                    self.materialize(b, v, MAX_DEPTH)?;
                }
                SaveItem::Buf(_) | SaveItem::Shadow(_) => {
                    let h = *self
                        .once
                        .get(&item)
                        .ok_or_else(|| InternalError::HandleNotSaved {
                            item: format!("{item:?}"),
                            once: true,
                        })?;
                    self.saved.insert(item, h);
                }
            }
        }
        for &k in tape.exit_loops(c) {
            let l = &tape.loops[k];
            let iv = self.materialize(b, l.iv, MAX_DEPTH)?;
            let init = self.materialize(b, l.init, MAX_DEPTH)?;
            b.def_var(self.counters[k].0, iv);
            b.def_var(self.counters[k].1, init);
        }
        Ok(())
    }

    /// The latest instance of the primal `v` as the tape plan has it (popped,
    /// saved once, the counter, recomputed or reloaded), made once per block.
    fn materialize(
        &mut self,
        b: &mut FunctionBuilder<'_>,
        v: Value,
        depth: u32,
    ) -> Result<Value, InternalError> {
        if let Some(&x) = self.saved.get(&SaveItem::Value(v)) {
            return Ok(x);
        }
        let primal = self.primal;
        let missing = || InternalError::NotSaved {
            value: self.names.value(v).to_string(),
        };
        let how = self
            .tape
            .how(primal, v, self.block, depth)
            .ok_or_else(missing)?;
        let x = match how {
            How::Const(k) => return Ok(constant(b, k)),
            How::Once => *self.once.get(&SaveItem::Value(v)).ok_or_else(missing)?,
            How::Counter(k) => b.use_var(self.counters[k].0),
            How::Recompute(inst) => {
                let d = &primal.insts[inst];
                let x = if d.opcode == Opcode::Len {
                    let s = *self.params.slice.get(&d.args[0]).ok_or_else(missing)?;
                    b.len(s)
                } else {
                    let mut args: SmallVec<[Value; 3]> = SmallVec::new();
                    for &a in &d.args {
                        args.push(self.materialize(b, a, depth - 1)?);
                    }
                    let ni = b.ins(d.opcode, d.imm, &args);
                    b.results(ni).first().copied().ok_or_else(missing)?
                };
                b.named(self.names.value(v), x)
            }
            How::Reload(inst) => {
                let d = &primal.insts[inst];
                let s = *self.params.slice.get(&d.args[0]).ok_or_else(missing)?;
                let i = self.materialize(b, d.args[1], depth - 1)?;
                let x = b.load(s, i);
                b.named(self.names.value(v), x)
            }
        };
        self.saved.insert(SaveItem::Value(v), x);
        Ok(x)
    }

    /// The primal `v` as the pullback has it: a constant, or a saved value.
    fn scalar(&self, b: &mut FunctionBuilder<'_>, v: Value) -> Result<Value, InternalError> {
        match self.primal.value_def(v) {
            ValueDef::Const(k) => Ok(constant(b, k)),
            _ => self.saved.get(&SaveItem::Value(v)).copied().ok_or_else(|| {
                InternalError::NotSaved {
                    value: self.names.value(v).to_string(),
                }
            }),
        }
    }

    /// The view of the tape buffer whose handle `item` was saved (made once per
    /// block).
    fn view(
        &mut self,
        b: &mut FunctionBuilder<'_>,
        item: SaveItem,
        a: Value,
    ) -> Result<Value, InternalError> {
        if let Some(&v) = self
            .views
            .get(&item)
            .or_else(|| self.entry_views.get(&item))
        {
            return Ok(v);
        }
        let h = *self
            .saved
            .get(&item)
            .ok_or_else(|| InternalError::HandleNotSaved {
                item: format!("{item:?}"),
                once: false,
            })?;
        let v = make_view(b, self.primal, self.names, item, a, h)?;
        self.views.insert(item, v);
        Ok(v)
    }

    /// The shadow of the float slice `s` (a `dup` parameter or a local buffer).
    fn shadow(&mut self, b: &mut FunctionBuilder<'_>, s: Value) -> Result<Value, InternalError> {
        match self.params.shadow.get(&s) {
            Some(&v) => Ok(v),
            None => self.view(b, SaveItem::Shadow(s), s),
        }
    }

    /// The primal slice `s` (a `dup` parameter or a local buffer kept on the tape).
    fn slice(&mut self, b: &mut FunctionBuilder<'_>, s: Value) -> Result<Value, InternalError> {
        match self.params.slice.get(&s) {
            Some(&v) => Ok(v),
            None => self.view(b, SaveItem::Buf(s), s),
        }
    }

    /// The zero of `ty`'s float type (the element type, for a slice).
    fn zero(&self, ty: Type) -> Value {
        match ty.elem() {
            Some(Elem::F32) => self.cts.zero(Type::F32),
            Some(_) => self.cts.zero(Type::F64),
            None => self.cts.zero(ty),
        }
    }

    /// The reverse of a float op.
    fn float(&mut self, b: &mut FunctionBuilder<'_>, r: &RevInst) -> Result<(), InternalError> {
        let primal = self.primal;
        let d = &primal.insts[r.inst];
        let y = d.results[0];
        let ty = primal.value_type(y);
        let Some(g) = self.cts.take(b, primal, y) else {
            return Ok(());
        };
        if g == self.cts.zero(ty) {
            return Ok(());
        }
        let saved = |v: Value| self.saved.get(&SaveItem::Value(v)).copied();
        let args: SmallVec<[ArgVal; 3]> = d
            .args
            .iter()
            .map(|&a| match primal.value_def(a) {
                ValueDef::Const(k) => ArgVal::Const(k),
                _ => saved(a).map_or(ArgVal::Missing, ArgVal::Saved),
            })
            .collect();
        let (module, names, debug) = (self.module, self.names, self.debug);
        add_contributions(
            b,
            self.cts,
            primal,
            r.inst,
            &r.rule,
            &r.operands,
            &args,
            saved(y),
            g,
            &mut |b, c, k| {
                let what = || {
                    let line = write::inst_line(module, primal, names, r.inst);
                    format!("the reverse of `{}` (operand {})", line.trim(), k + 1)
                };
                debug.check_nan(b, c, g, &what);
            },
        )
    }

    /// `%y = load %s[%i]`: `ds[i] += ct[y]`.
    fn load(&mut self, b: &mut FunctionBuilder<'_>, inst: Inst) -> Result<(), InternalError> {
        let primal = self.primal;
        let d = &primal.insts[inst];
        let y = d.results[0];
        let Some(g) = self.cts.take(b, primal, y) else {
            return Ok(());
        };
        if g == self.cts.zero(primal.value_type(y)) {
            return Ok(());
        }
        let ds = self.shadow(b, d.args[0])?;
        let i = self.scalar(b, d.args[1])?;
        let old = b.load(ds, i);
        let new = b.fadd(old, g);
        b.store(ds, i, new);
        Ok(())
    }

    /// `store %s[%i], %v`: `ct[v] += ds[i]; ds[i] = 0`.
    fn store(
        &mut self,
        b: &mut FunctionBuilder<'_>,
        inst: Inst,
        value_active: bool,
    ) -> Result<(), InternalError> {
        let primal = self.primal;
        let d = &primal.insts[inst];
        let ds = self.shadow(b, d.args[0])?;
        let i = self.scalar(b, d.args[1])?;
        if value_active {
            let g = b.load(ds, i);
            self.cts.add(b, primal, d.args[2], g);
        }
        let zero = self.zero(primal.value_type(d.args[0]));
        b.store(ds, i, zero);
        Ok(())
    }

    /// A call: the callee's pullback (or the `vjp` rule), its cotangents added into
    /// the arguments'.
    fn call(
        &mut self,
        b: &mut FunctionBuilder<'_>,
        inst: Inst,
        call: &CallRule,
    ) -> Result<(), InternalError> {
        let primal = self.primal;
        let d = &primal.insts[inst];
        let Imm::Func(g) = d.imm else {
            return Err(InternalError::NoCallee);
        };
        let gsig = self.module.sig(g).clone();
        // The cotangent of each float result (zero where it is not active).
        let mut seeds: SmallVec<[Value; 2]> = SmallVec::new();
        for &r in &d.results {
            let ty = primal.value_type(r);
            if ty.is_float() {
                let ct = self.cts.take(b, primal, r).unwrap_or(self.cts.zero(ty));
                seeds.push(ct);
            }
        }
        match call {
            CallRule::Derived {
                rvs, config, inout, ..
            } => self.derived_call(b, inst, &gsig, *rvs, config, seeds, inout),
            CallRule::Vjp { rule } => self.vjp_call(b, inst, &gsig, *rule, &seeds),
        }
    }

    /// A call with a derived rule: calls the callee's pullback `rvs` (derived for
    /// `config`) with the slices, shadows and `seeds` it takes, and adds its results
    /// into the cotangents of the active arguments.
    #[allow(clippy::too_many_arguments)]
    fn derived_call(
        &mut self,
        b: &mut FunctionBuilder<'_>,
        inst: Inst,
        gsig: &Signature,
        rvs: FuncId,
        config: &RuleConfig,
        seeds: SmallVec<[Value; 2]>,
        inout: &[usize],
    ) -> Result<(), InternalError> {
        let primal = self.primal;
        let d = &primal.insts[inst];
        let mut args: SmallVec<[Value; 6]> = SmallVec::new();
        let dups: SmallVec<[Value; 2]> = d
            .args
            .iter()
            .zip(&config.params)
            .filter(|&(_, &a)| matches!(a, Activity::Dup | Activity::DupNoNeed))
            .map(|(&v, _)| v)
            .collect();
        for i in crate::rrule::slice_params(gsig, config) {
            args.push(self.slice(b, d.args[i])?);
        }
        for &s in &dups {
            args.push(self.shadow(b, s)?);
        }
        if config.ret == RetActivity::Active {
            // One seed per float result, of the ones the rule seeds.
            let floats = d
                .results
                .iter()
                .enumerate()
                .filter(|&(_, &r)| primal.value_type(r).is_float())
                .map(|(j, _)| j);
            args.extend(
                floats
                    .zip(seeds)
                    .filter(|&(j, _)| config.is_seeded(j))
                    .map(|(_, v)| v),
            );
        }
        // The cotangents the callee continues (and returns whole): taken here, so
        // the addition of its result below sets them.
        for &k in inout {
            let v = d.args[k];
            let ct = self
                .cts
                .take(b, primal, v)
                .unwrap_or(self.cts.zero(primal.value_type(v)));
            args.push(ct);
        }
        let outs = b.call(rvs, &args);
        let active = d
            .args
            .iter()
            .zip(&config.params)
            .filter(|&(_, &a)| a == Activity::Active)
            .map(|(&v, _)| v);
        for (v, ct) in active.zip(outs) {
            self.cts.add(b, primal, v, ct);
        }
        Ok(())
    }

    /// A call to a function with a `vjp` declaration: calls `rule` with the
    /// arguments and `seeds`, and adds its results into the cotangents of the float
    /// arguments (in debug mode, after checking that it made no NaN).
    fn vjp_call(
        &mut self,
        b: &mut FunctionBuilder<'_>,
        inst: Inst,
        gsig: &Signature,
        rule: FuncId,
        seeds: &[Value],
    ) -> Result<(), InternalError> {
        let primal = self.primal;
        let d = &primal.insts[inst];
        let mut args: SmallVec<[Value; 6]> = SmallVec::new();
        for &a in &d.args {
            args.push(self.scalar(b, a)?);
        }
        args.extend(seeds.iter().copied());
        let outs = b.call(rule, &args);
        if self.debug.check_nan {
            // The rule's outputs against its cotangents: NaN out, none in.
            let line = write::inst_line(self.module, primal, self.names, inst);
            let what = || {
                format!(
                    "the vjp rule @{} of `{}`",
                    self.module.name(rule),
                    line.trim()
                )
            };
            let any_seed = seeds.iter().copied().reduce(|a, c| b.fadd(a, c));
            if let Some(sum) = any_seed {
                for &o in &outs {
                    self.debug.check_nan(b, o, sum, &what);
                }
            }
        }
        let floats = d
            .args
            .iter()
            .zip(&gsig.params)
            .filter(|&(_, t)| t.is_float())
            .map(|(&v, _)| v);
        for (v, ct) in floats.zip(outs) {
            if self.cts.vars[v].is_some() {
                self.cts.add(b, primal, v, ct);
            }
        }
        Ok(())
    }
}

/// Pops a saved item, named after what it saves.
/// `tape_view` of the handle `h` of `item`, the buffer of the primal slice `a`.
fn make_view(
    b: &mut FunctionBuilder<'_>,
    primal: &Function,
    names: &Names,
    item: SaveItem,
    a: Value,
    h: Value,
) -> Result<Value, InternalError> {
    let elem = primal
        .value_type(a)
        .elem()
        .ok_or_else(|| InternalError::NotASlice {
            value: names.value(a).to_string(),
        })?;
    let inst = b.ins(Opcode::TapeView, Imm::Type(elem.ty()), &[h]);
    let v = b
        .results(inst)
        .first()
        .copied()
        .ok_or_else(|| InternalError::NoResult {
            opcode: Opcode::TapeView.to_string(),
        })?;
    let name = match item {
        SaveItem::Shadow(_) => format!("d{}", names.value(a)),
        _ => names.value(a).to_string(),
    };
    Ok(b.named(&name, v))
}

fn pop_item(
    b: &mut FunctionBuilder<'_>,
    primal: &Function,
    names: &Names,
    item: SaveItem,
) -> Value {
    let (ty, name) = match item {
        SaveItem::Value(v) => (primal.value_type(v), names.value(v).to_string()),
        SaveItem::Buf(a) => (Type::I64, format!("{}.buf", names.value(a))),
        SaveItem::Shadow(a) => (Type::I64, format!("d{}.buf", names.value(a))),
    };
    let p = b.pop(ty);
    b.named(&name, p)
}

/// A constant as the pullback writes it: a literal for `f64` and `i64`, a `const`
/// instruction otherwise (an `f32` or `bool` literal would not always read back as
/// itself).
fn constant(b: &mut FunctionBuilder<'_>, k: Scalar) -> Value {
    match k {
        Scalar::F64(x) => b.fconst(x),
        Scalar::I64(x) => b.iconst(x),
        other => b.const_inst(other),
    }
}

/// Branches on `n` (1, 2, ...) to `targets[n - 1]`: a chain of `icmp eq` and `br`,
/// the last target taken without a test. New chain blocks are named after `name`
/// and recorded in `aux`; blocks whose jumps are all written are sealed.
fn dispatch(
    b: &mut FunctionBuilder<'_>,
    sealer: &mut Sealer,
    n: Value,
    targets: &[Block],
    name: &str,
    aux: &mut Vec<Block>,
) {
    let Some(last) = targets.len().checked_sub(1) else {
        return;
    };
    if last == 0 {
        b.jump(targets[0]);
        sealer.check(b, targets);
        return;
    }
    for (i, &t) in targets[..last].iter().enumerate() {
        let k = b.iconst(i as i64 + 1);
        let is = b.icmp(CmpPred::Eq, n, k);
        if i + 1 == last {
            b.br(is, t, targets[last]);
            sealer.check(b, &[t, targets[last]]);
        } else {
            let next = b.create_block(&format!("{name}.not{}", i + 1));
            aux.push(next);
            sealer.expected[next] = 1;
            b.br(is, t, next);
            sealer.check(b, &[t, next]);
            b.switch_to(next);
        }
    }
}

/// Removes the `fneg`s that no instruction reads: a negated contribution added
/// into a cotangent became an `fsub` ([`Cotangents::add`]).
pub(crate) fn drop_unused_negs(func: &mut Function) {
    let mut used: hashbrown::HashSet<Value> = hashbrown::HashSet::new();
    for &blk in &func.layout {
        let data = &func.blocks[blk];
        for phi in &data.phis {
            used.extend(phi.incoming.iter().map(|&(_, v)| v));
        }
        for &inst in &data.insts {
            used.extend(func.insts[inst].args.iter().copied());
        }
        match &data.term {
            Some(Terminator::Br { cond, .. }) => {
                used.insert(*cond);
            }
            Some(Terminator::Ret(vals)) => used.extend(vals.iter().copied()),
            _ => {}
        }
    }
    let dead: Vec<(Block, Inst)> = func
        .placed_insts()
        .filter(|&(_, inst)| {
            let d = &func.insts[inst];
            d.opcode == Opcode::Fneg && !used.contains(&d.results[0])
        })
        .collect();
    for (blk, inst) in dead {
        func.remove_inst(blk, inst);
    }
}

/// Removes `fadd 0, x` and `fadd x, 0`, using `x` instead.
///
/// A cotangent read in a block that was not sealed yet is a phi that the builder may
/// later find trivial and replace by the zero; the addition into it is then an
/// addition of zero. (`0.0 + -0.0` is `0.0`, so the sign of a zero cotangent may
/// differ; nothing else does.)
pub(crate) fn drop_zero_adds(func: &mut Function, zeros: &[Value]) {
    let mut alias: HashMap<Value, Value> = HashMap::new();
    let resolve = |alias: &HashMap<Value, Value>, mut v: Value| {
        while let Some(&w) = alias.get(&v) {
            v = w;
        }
        v
    };
    let mut dead = Vec::new();
    for (blk, inst) in func.placed_insts().collect::<Vec<_>>() {
        let d = &func.insts[inst];
        if d.opcode != gradlift_ir::Opcode::Fadd {
            continue;
        }
        let (a, c) = (resolve(&alias, d.args[0]), resolve(&alias, d.args[1]));
        let keep = if zeros.contains(&a) {
            c
        } else if zeros.contains(&c) {
            a
        } else {
            continue;
        };
        alias.insert(d.results[0], keep);
        dead.push((blk, inst));
    }
    if alias.is_empty() {
        return;
    }
    for (blk, inst) in dead {
        func.remove_inst(blk, inst);
    }
    for &blk in &func.layout.clone() {
        let data = &mut func.blocks[blk];
        for phi in &mut data.phis {
            for (_, v) in phi.incoming.iter_mut() {
                *v = resolve(&alias, *v);
            }
        }
        for &inst in &data.insts {
            for a in func.insts[inst].args.iter_mut() {
                *a = resolve(&alias, *a);
            }
        }
        match &mut data.term {
            Some(Terminator::Br { cond, .. }) => *cond = resolve(&alias, *cond),
            Some(Terminator::Ret(vals)) => {
                for v in vals.iter_mut() {
                    *v = resolve(&alias, *v);
                }
            }
            _ => {}
        }
    }
}
