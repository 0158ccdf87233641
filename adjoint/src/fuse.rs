//! Fused sweeps: the value and the gradient in one pass over a reduction loop
//! (`@f.vg`), for the functions whose loop needs no second sweep.
//!
//! A rule runs the forward pass, then the pullback, which walks the loop again
//! backwards. For a loop that only sums into accumulators which the function then
//! returns (`sumsq`, `rosenbrock`, a dot product, a loss summed over samples), the
//! cotangent of every accumulator is the same in every iteration: the seed of the
//! result it becomes. Given the seeds up front, each iteration's reverse can run
//! right after the iteration itself, while its values are still in registers, and
//! the pullback's second sweep (and the tape that feeds it) is not needed.
//!
//! [`fused_rule`] writes that function when the primal has the shape below, and
//! returns `None` otherwise (the rule is then run as a forward pass and a pullback,
//! as always).
//!
//! **The shape.** One loop `L`, with:
//!
//! - before it, a straight line of blocks (`jump` only) from the entry to the
//!   loop's header `H`; after it, one block `X` reached only from `H`, with no
//!   instruction, that returns;
//! - a header with no active instruction, which leaves the loop (to `X`) and is
//!   entered from the line and from one latch; a body (the rest of `L`) that
//!   branches and merges freely but never leaves the loop nor returns;
//! - in the whole function, only ops with a rule in the [table](crate::rules) and
//!   `load`s of parameters: no `store`, `alloc` or `call`;
//! - every active phi of `H` is an *accumulator*: `%a = phi [pre: init, latch: %a1]`
//!   where `%a1 = fadd %a, %t`, `fadd %t, %a` or `fsub %a, %t` is `%a`'s only use in
//!   the function besides `X`'s `ret`, and `%a1`'s only use is that phi.
//!
//! **Why it is the gradient.** Let `c` be the cotangent of `%a` when the loop exits:
//! the sum of the seeds of the results `ret` gives `%a` to (nothing after the loop
//! uses it otherwise). In the pullback, the cotangent of `%a1` in iteration `k` is
//! the cotangent of `%a` in iteration `k + 1`, which (since `%a`'s only use in
//! the loop is the addition) is that of `%a1` in iteration `k + 1`, ..., which is
//! `c`; and the initial value gets `c` once. So every iteration's reverse reads
//! `c` and that iteration's own values only: nothing it computes feeds another
//! iteration's reverse. Its effects are additions: into shadows (`dx[i] += ...`,
//! the reverse of each load) and into the cotangents of values defined before the
//! loop. Nothing reads a shadow or those cotangents until after the loop (the loop
//! stores nothing, and no primal op reads a shadow), so running the iterations'
//! reverses in forward order instead of backwards adds the same terms, in another
//! order. The rest of the pullback (the seeds of what is returned directly, the
//! reverse of the line before the loop) runs after the loop, as before.
//!
//! **Rounding.** The terms added are bit for bit the pullback's (same rules, same
//! operands). Only the order in which several terms are added into one place
//! changes: a shadow element that gets terms from two iterations, or the cotangent
//! of a value defined before the loop (`normalize`'s norm). A shadow element that
//! gets at most two terms, into a shadow that was zero, is bit for bit the
//! unfused result (`(0 + a) + b = b + a`); more terms, or a nonzero shadow, may
//! round differently (floating-point addition is not associative), by a few units
//! in the last place of the sum. The interpreter and the JIT run the same fused
//! function, so they still agree bit for bit. [`RuleConfig::fuse`] turns fusion
//! off.

use cranelift_entity::{EntitySet, SecondaryMap};
use gradlift_ir::dominators::DominatorTree;
use gradlift_ir::flowgraph::ControlFlowGraph;
use gradlift_ir::loops::LoopForest;
use gradlift_ir::write::Names;
use gradlift_ir::{
    Block, CmpPred, FuncId, Function, FunctionBuilder, Inst, Module, Opcode, Signature, Terminator,
    Type, Value, ValueDef,
};
use hashbrown::{HashMap, HashSet};
use smallvec::SmallVec;

use crate::activity::ActivityInfo;
use crate::config::{Activity, RetActivity, RuleConfig, TapePolicy};
use crate::error::InternalError;
use crate::pullback::{Cotangents, add_contributions, drop_unused_negs, drop_zero_adds};
use crate::rules::{ArgVal, OpRule, op_rule};

/// The most paths through the loop's body a fused function writes out (each path
/// is a copy of its blocks followed by its own reverse).
pub(crate) const MAX_PATHS: usize = 16;

/// The parts of a function of the fusable shape ([module docs](self)).
struct Shape {
    /// The line of blocks before the loop, from the entry.
    line: Vec<Block>,
    header: Block,
    /// The body's blocks in a topological order (the first is entered from the
    /// header; the last is the latch).
    body: Vec<Block>,
    latch: Block,
    exit: Block,
    /// The header's accumulators: `(phi, update)`.
    accs: Vec<(Value, Value)>,
    /// The shadows whose neighbouring element's term is carried to the next
    /// iteration in a register ([`Carry`]).
    carries: Vec<Carry>,
}

/// A shadow updated at `i` and `i + 1` in every iteration of a loop counting `i`
/// up by one: iteration `i`'s term for element `i + 1` is element `i + 1`'s last,
/// so it is carried to the next iteration in a register and added after that
/// iteration's own term, in one update of element `i` instead of two
/// read-modify-writes (`rosenbrock`). The order of the additions is the
/// pullback's, so the result is too, bit for bit. It starts as `-0.0` (`x +
/// -0.0` is `x` for every `x`), and what the last iteration carries is added
/// after the loop (if it ran).
#[derive(Clone, Copy)]
struct Carry {
    /// The slice parameter.
    slice: Value,
    /// `load %s[%i]` and `load %s[%i + 1]`.
    at_i: Inst,
    at_next: Inst,
    /// The header's phi `%i`.
    counter: Value,
}

/// The signature of `@f.vg` for a function of signature `sig` under `config`: the
/// primal's parameters, one shadow per `dup`/`dupnoneed` parameter, one seed per
/// float result; the primal's results, then one cotangent per `active` parameter.
pub(crate) fn fused_sig(sig: &Signature, config: &RuleConfig) -> Signature {
    let params = sig
        .params
        .iter()
        .copied()
        .chain(
            (0..sig.params.len())
                .filter(|&i| matches!(config.params[i], Activity::Dup | Activity::DupNoNeed))
                .filter_map(|i| sig.params[i].elem().map(Type::slice_mut)),
        )
        .chain(sig.results.iter().copied().filter(|t| t.is_float()))
        .collect::<Vec<_>>();
    let results = sig
        .results
        .iter()
        .copied()
        .chain(
            (0..sig.params.len())
                .filter(|&i| config.params[i] == Activity::Active)
                .map(|i| sig.params[i]),
        )
        .collect::<Vec<_>>();
    Signature::new(params, results)
}

/// Whether `config` asks for a rule that may be fused: fusion on, the minimal tape
/// policy (`save-all` asks for the two passes with everything saved), no debug
/// mode, an active return with at least one float result.
pub(crate) fn wanted(sig: &Signature, config: &RuleConfig) -> bool {
    config.fuse
        && config.tape == TapePolicy::Minimal
        && !config.debug
        && config.ret == RetActivity::Active
        && sig.results.iter().any(|t| t.is_float())
}

/// The fused value-and-gradient function of `primal` (the body of `func` in
/// `input`) under `config`, declared as `name` in `out`, or `None` when the
/// function does not have the shape of the [module docs](self).
pub(crate) fn fused_rule(
    input: &Module,
    func: FuncId,
    primal: &Function,
    config: &RuleConfig,
    out: &mut Module,
    name: &str,
) -> Result<Option<FuncId>, InternalError> {
    let sig = input.sig(func).clone();
    if !wanted(&sig, config) {
        return Ok(None);
    }
    let cfg = ControlFlowGraph::new(primal);
    let mut reachable = EntitySet::new();
    for &b in cfg.reverse_postorder() {
        reachable.insert(b);
    }
    let info = ActivityInfo::analyse(input, primal, &reachable, config);
    let Some(shape) = shape(primal, &cfg, &info) else {
        return Ok(None);
    };
    let id = out
        .declare(name, fused_sig(&sig, config))
        .map_err(InternalError::Module)?;
    let f = Fuser::new(out, id, primal, &sig, config, &info, &shape).build()?;
    out.define(id, f).map_err(InternalError::Module)?;
    Ok(Some(id))
}

/// The function's [`Shape`], if it has it.
fn shape(primal: &Function, cfg: &ControlFlowGraph, info: &ActivityInfo) -> Option<Shape> {
    let dom = DominatorTree::new(cfg);
    let loops = LoopForest::new(cfg, &dom);
    if loops.len() != 1 {
        return None;
    }
    let header = loops.header(0);
    let in_loop: HashSet<Block> = loops.blocks(0).iter().copied().collect();
    // The line: from the entry, `jump`s to the header.
    let mut line = Vec::new();
    let mut b = primal.entry()?;
    while b != header {
        if in_loop.contains(&b) || line.contains(&b) || !primal.blocks[b].phis.is_empty() {
            return None;
        }
        line.push(b);
        match primal.blocks[b].term {
            Some(Terminator::Jump(next)) => b = next,
            _ => return None,
        }
    }
    let pre = *line.last()?;
    let Some(Terminator::Br {
        then_dest,
        else_dest,
        ..
    }) = primal.blocks[header].term
    else {
        return None;
    };
    let (first, exit) = match (in_loop.contains(&then_dest), in_loop.contains(&else_dest)) {
        (true, false) => (then_dest, else_dest),
        (false, true) => (else_dest, then_dest),
        _ => return None,
    };
    let hpreds = cfg.preds(header);
    let latch = match hpreds {
        [a, b] if *a == pre && in_loop.contains(b) => *b,
        [a, b] if *b == pre && in_loop.contains(a) => *a,
        _ => return None,
    };
    if latch == header
        || primal.blocks[latch].term != Some(Terminator::Jump(header))
        || cfg.preds(first) != [header]
    {
        return None;
    }
    // The exit: reached from the header only, empty, returning.
    let xd = &primal.blocks[exit];
    if cfg.preds(exit) != [header]
        || !xd.phis.is_empty()
        || !xd.insts.is_empty()
        || !matches!(xd.term, Some(Terminator::Ret(_)))
    {
        return None;
    }
    // Every reachable block is on the line, in the loop or the exit.
    let all = cfg.reverse_postorder();
    if all.len() != line.len() + in_loop.len() + 1 {
        return None;
    }
    // The body never leaves the loop, and only its first block follows the header.
    let body: Vec<Block> = all
        .iter()
        .copied()
        .filter(|b| *b != header && in_loop.contains(b))
        .collect();
    for &b in &body {
        let succs = primal.blocks[b].term.as_ref()?.successors();
        if succs.iter().any(|s| !in_loop.contains(s)) {
            return None;
        }
        if b != first && cfg.preds(b).contains(&header) {
            return None;
        }
    }
    if body.first() != Some(&first) || body.last() != Some(&latch) {
        return None;
    }
    // The body is written once per path through it: not too many.
    let mut paths: HashMap<Block, usize> = HashMap::new();
    for &b in body.iter().rev() {
        let n = if b == latch {
            1
        } else {
            primal.blocks[b]
                .term
                .as_ref()?
                .successors()
                .iter()
                .map(|s| paths.get(s).copied().unwrap_or(0))
                .fold(0usize, usize::saturating_add)
        };
        paths.insert(b, n);
    }
    if paths[&first] > MAX_PATHS {
        return None;
    }
    // Only ops with a rule and loads of parameters.
    for &b in line.iter().chain([header].iter()).chain(&body) {
        for &inst in &primal.blocks[b].insts {
            let d = &primal.insts[inst];
            match (op_rule(d.opcode), d.opcode) {
                (OpRule::Zero(_) | OpRule::Float(_), _) => {}
                (OpRule::Memory, Opcode::Load) => {
                    if !matches!(primal.value_def(d.args[0]), ValueDef::Param(_)) {
                        return None;
                    }
                }
                _ => return None,
            }
            if b == header && d.results.iter().any(|&r| info.is_active(r, primal)) {
                return None;
            }
        }
    }
    // The uses of every value.
    let mut uses: HashMap<Value, usize> = HashMap::new();
    for &b in all {
        let d = &primal.blocks[b];
        for p in &d.phis {
            for &(_, v) in &p.incoming {
                *uses.entry(v).or_default() += 1;
            }
        }
        for &inst in &d.insts {
            for &a in &primal.insts[inst].args {
                *uses.entry(a).or_default() += 1;
            }
        }
        if b != exit
            && let Some(Terminator::Br { cond, .. }) = d.term
        {
            *uses.entry(cond).or_default() += 1;
        }
    }
    let mut accs = Vec::new();
    for p in &primal.blocks[header].phis {
        if !info.is_active(p.value, primal) {
            continue;
        }
        let upd = p.incoming.iter().find(|(b, _)| *b == latch)?.1;
        let ValueDef::Result(inst, 0) = primal.value_def(upd) else {
            return None;
        };
        let d = &primal.insts[inst];
        let a = p.value;
        let ok = match d.opcode {
            Opcode::Fadd => (d.args[0] == a) != (d.args[1] == a),
            Opcode::Fsub => d.args[0] == a && d.args[1] != a,
            _ => false,
        };
        if !ok || uses.get(&a) != Some(&1) || uses.get(&upd) != Some(&1) {
            return None;
        }
        accs.push((a, upd));
    }
    let carries = find_carries(primal, info, &dom, header, &body, latch);
    Some(Shape {
        line,
        header,
        body,
        latch,
        exit,
        accs,
        carries,
    })
}

/// The [`Carry`]s of a loop: each slice parameter loaded in the body exactly
/// twice, at the counter `%i` (a header phi stepped by `iadd %i, 1`) and at
/// `iadd %i, 1`, both in blocks every iteration runs and both active.
fn find_carries(
    primal: &Function,
    info: &ActivityInfo,
    dom: &DominatorTree,
    header: Block,
    body: &[Block],
    latch: Block,
) -> Vec<Carry> {
    let one = |v: Value| {
        matches!(
            primal.value_def(v),
            ValueDef::Const(gradlift_ir::Scalar::I64(1))
        )
    };
    // `%v = iadd %p, 1` (either order): `%p`.
    let plus_one = |v: Value| -> Option<Value> {
        let ValueDef::Result(i, 0) = primal.value_def(v) else {
            return None;
        };
        let d = &primal.insts[i];
        if d.opcode != Opcode::Iadd {
            return None;
        }
        match (one(d.args[0]), one(d.args[1])) {
            (false, true) => Some(d.args[0]),
            (true, false) => Some(d.args[1]),
            _ => None,
        }
    };
    let counters: Vec<Value> = primal.blocks[header]
        .phis
        .iter()
        .filter(|p| {
            primal.value_type(p.value) == Type::I64
                && p.incoming
                    .iter()
                    .any(|&(b, v)| b == latch && plus_one(v) == Some(p.value))
        })
        .map(|p| p.value)
        .collect();
    let mut loads: HashMap<Value, Vec<(Block, Inst)>> = HashMap::new();
    for &b in body {
        for &inst in &primal.blocks[b].insts {
            let d = &primal.insts[inst];
            if d.opcode == Opcode::Load {
                loads.entry(d.args[0]).or_default().push((b, inst));
            }
        }
    }
    let mut carries = Vec::new();
    for (slice, ls) in loads {
        let [(b0, l0), (b1, l1)] = ls[..] else {
            continue;
        };
        if !(dom.dominates(b0, latch) && dom.dominates(b1, latch)) {
            continue;
        }
        let active = |l: Inst| info.is_active(primal.insts[l].results[0], primal);
        if !(info.has_shadow(slice, primal) && active(l0) && active(l1)) {
            continue;
        }
        let index = |l: Inst| primal.insts[l].args[1];
        for (at_i, at_next) in [(l0, l1), (l1, l0)] {
            let i = index(at_i);
            if counters.contains(&i) && plus_one(index(at_next)) == Some(i) {
                carries.push(Carry {
                    slice,
                    at_i,
                    at_next,
                    counter: i,
                });
            }
        }
    }
    carries.sort_by_key(|c| c.slice);
    carries
}

/// Writes `@f.vg` for a function of the fusable [`Shape`].
struct Fuser<'a, 'm> {
    b: FunctionBuilder<'m>,
    primal: &'a Function,
    sig: &'a Signature,
    config: &'a RuleConfig,
    info: &'a ActivityInfo,
    shape: &'a Shape,
    names: Names,
    /// Each primal value as the fused function has it: on the path being
    /// written, for the body's values.
    map: SecondaryMap<Value, Option<Value>>,
    /// The header's phis in the fused function, by the primal's.
    header_phis: Vec<(Value, Value)>,
    /// The cotangent of each accumulator when the loop exits.
    acc_ct: HashMap<Value, Value>,
    header: Block,
    /// The shadows, by primal slice parameter.
    shadow: HashMap<Value, Value>,
    /// Per [`Carry`] (in order): the variable carrying the term, and this
    /// iteration's new term once its reverse has made it.
    carry: Vec<(Carry, gradlift_ir::Variable, Option<Value>)>,
    cts: Cotangents,
}

impl<'a, 'm> Fuser<'a, 'm> {
    #[allow(clippy::too_many_arguments)]
    fn new(
        out: &'m Module,
        id: FuncId,
        primal: &'a Function,
        sig: &'a Signature,
        config: &'a RuleConfig,
        info: &'a ActivityInfo,
        shape: &'a Shape,
    ) -> Self {
        let mut b = FunctionBuilder::new(out, id);
        let cts = Cotangents::new(&mut b, primal);
        let header = b.current_block();
        Fuser {
            b,
            primal,
            sig,
            config,
            info,
            shape,
            names: Names::new(primal),
            map: SecondaryMap::new(),
            header_phis: Vec::new(),
            acc_ct: HashMap::new(),
            header,
            shadow: HashMap::new(),
            carry: Vec::new(),
            cts,
        }
    }

    fn active(&self, v: Value) -> bool {
        self.info.is_active(v, self.primal)
    }

    /// `nv`, named as the primal's `v` when that has a name (a value without one
    /// stays so: an error names an unnamed parameter by its position).
    fn name_like(&mut self, v: Value, nv: Value) -> Value {
        match &self.primal.values[v].name {
            Some(_) => self.b.named(self.names.value(v), nv),
            None => nv,
        }
    }

    /// `v` here.
    fn get(&mut self, v: Value) -> Value {
        match self.primal.value_def(v) {
            ValueDef::Const(c) => self.b.constant(c),
            _ => self.map[v].expect("defined before its use"),
        }
    }

    /// The incoming value of phi `phi` of the header from `pred`.
    fn header_incoming(&self, phi: Value, from_latch: bool) -> Value {
        let latch = self.shape.latch;
        self.primal.blocks[self.shape.header]
            .phis
            .iter()
            .find(|q| q.value == phi)
            .and_then(|q| q.incoming.iter().find(|(b, _)| (*b == latch) == from_latch))
            .map(|&(_, v)| v)
            .expect("the header has an incoming value from the line and the latch")
    }

    fn build(mut self) -> Result<Function, InternalError> {
        let (primal, shape) = (self.primal, self.shape);
        let np = self.sig.params.len();
        for (i, &p) in primal.params.iter().enumerate() {
            let v = self.b.param(i);
            let v = self.name_like(p, v);
            self.map[p] = Some(v);
        }
        let dups: Vec<usize> = (0..np)
            .filter(|&i| matches!(self.config.params[i], Activity::Dup | Activity::DupNoNeed))
            .collect();
        for (k, &i) in dups.iter().enumerate() {
            let p = primal.params[i];
            let ds = self.b.param(np + k);
            let ds = match &primal.values[p].name {
                Some(_) => self.b.named(&format!("d{}", self.names.value(p)), ds),
                None => ds,
            };
            self.shadow.insert(p, ds);
        }
        // The shadows are as long as their slices (the calling convention checks
        // it); saying so here lets the JIT drop the bounds checks of the shadows'
        // accesses where it drops the slices' (`trap_if` tells it).
        for &i in &dups {
            let p = primal.params[i];
            let (x, dx) = (self.map[p].expect("a parameter"), self.shadow[&p]);
            let (n, dn) = (self.b.len(x), self.b.len(dx));
            let bad = self.b.icmp(CmpPred::Ne, n, dn);
            let name = self.names.value(p).to_string();
            self.b.trap_if(
                bad,
                &format!("the shadow of %{name} has another length than %{name}"),
            );
        }
        let seed_base = np + dups.len();
        let float_results: Vec<usize> = (0..self.sig.results.len())
            .filter(|&j| self.sig.results[j].is_float())
            .collect();
        let seeds: Vec<(usize, Value)> = float_results
            .iter()
            .enumerate()
            .map(|(k, &j)| {
                let s = self.b.param(seed_base + k);
                let name = if float_results.len() == 1 {
                    "dy".to_string()
                } else {
                    format!("dy{j}")
                };
                (j, self.b.named(&name, s))
            })
            .collect();
        let info = self.info;
        let accs: HashSet<Value> = shape.accs.iter().map(|&(a, _)| a).collect();
        // Every active value's cotangent, zero here. An accumulator's own is
        // known (the exit's, in every iteration): it gets no variable, and what
        // its update's reverse would add into it is dropped.
        self.cts.declare(&mut self.b, primal, &self.names, &|v| {
            info.is_active(v, primal) && !accs.contains(&v)
        });
        let Some(Terminator::Ret(rets)) = primal.blocks[shape.exit].term.clone() else {
            return Err(InternalError::Fuse {
                what: "the exit does not return",
            });
        };
        // The cotangent of each accumulator when the loop exits: the sum of the
        // seeds of the results it becomes.
        for &(a, _) in &shape.accs {
            let mut c: Option<Value> = None;
            for &(j, s) in &seeds {
                if rets[j] == a {
                    c = Some(match c {
                        Some(c) => self.b.fadd(c, s),
                        None => s,
                    });
                }
            }
            let c = c.unwrap_or_else(|| self.cts.zero(primal.value_type(a)));
            self.acc_ct.insert(a, c);
        }

        // The line before the loop.
        for (k, &blk) in shape.line.iter().enumerate() {
            if k > 0 {
                let nb = self.b.create_block(self.names.block(blk));
                self.b.jump(nb);
                self.b.seal_block(nb);
                self.b.switch_to(nb);
            }
            self.copy_insts(blk);
        }
        for &c in &shape.carries {
            let ty = primal.value_type(primal.insts[c.at_i].results[0]);
            let var = self
                .b
                .declare_named_var(&format!("d{}.carry", self.names.value(c.slice)), ty);
            let z = self.minus_zero(ty);
            self.b.def_var(var, z);
            self.carry.push((c, var, None));
        }
        let pre_end = self.b.current_block();
        let header = self.b.create_block(self.names.block(shape.header));
        self.header = header;
        let exit = self.b.create_block(self.names.block(shape.exit));
        self.b.jump(header);

        // The header: its phis, entered from the line and from the end of each
        // path's reverse.
        self.b.switch_to(header);
        for p in &primal.blocks[shape.header].phis {
            let init = self.header_incoming(p.value, false);
            let init = self.get(init);
            let phi = self.b.phi(primal.value_type(p.value), &[(pre_end, init)]);
            let phi = self.name_like(p.value, phi);
            self.map[p.value] = Some(phi);
            self.header_phis.push((p.value, phi));
        }
        self.copy_insts(shape.header);
        let Some(Terminator::Br {
            cond, then_dest, ..
        }) = primal.blocks[shape.header].term.clone()
        else {
            return Err(InternalError::Fuse {
                what: "the header does not branch",
            });
        };
        let cond = self.get(cond);
        let first = self.b.create_block(self.names.block(shape.body[0]));
        let (t, e) = if then_dest == shape.exit {
            (exit, first)
        } else {
            (first, exit)
        };
        self.b.br(cond, t, e);

        // The body, one copy per path from its first block to the latch, each
        // ending in the reverse of the iteration along that path.
        let mut path = Vec::new();
        self.copy_path(shape.body[0], shape.header, first, &mut path)?;
        self.b.seal_block(header);

        // After the loop: what the loop's first iteration gives the accumulators'
        // initial values, the seeds of what is returned directly, the reverse of
        // the line, and the results.
        self.b.switch_to(exit);
        self.b.seal_block(exit);
        self.flush_carries();
        for &(a, _) in &shape.accs {
            let init = self.header_incoming(a, false);
            let c = self.acc_ct[&a];
            self.cts.add(&mut self.b, primal, init, c);
        }
        for &(j, s) in &seeds {
            if !accs.contains(&rets[j]) {
                self.cts.add(&mut self.b, primal, rets[j], s);
            }
        }
        for &blk in shape.line.iter().rev() {
            for &inst in primal.blocks[blk].insts.iter().rev() {
                self.reverse_inst(inst)?;
            }
        }
        let mut results: Vec<Value> = rets.iter().map(|&v| self.get(v)).collect();
        let active: Vec<usize> = (0..np)
            .filter(|&i| self.config.params[i] == Activity::Active)
            .collect();
        results.extend(self.cts.of_params(&mut self.b, primal, &active));
        self.b.ret(&results);
        let zeros: SmallVec<[Value; 2]> = self
            .cts
            .zero_f32
            .into_iter()
            .chain([self.cts.zero_f64])
            .collect();
        let mut func = self.b.finish().map_err(InternalError::Build)?;
        drop_zero_adds(&mut func, &zeros);
        drop_unused_negs(&mut func);
        Ok(func)
    }

    /// `-0.0` of type `ty`, the identity of addition.
    fn minus_zero(&mut self, ty: Type) -> Value {
        match ty {
            Type::F32 => self.b.const_inst(gradlift_ir::Scalar::F32(-0.0)),
            _ => self.b.fconst(-0.0),
        }
    }

    /// After the loop: adds what the last iteration carries into element
    /// `%i` (the counter's final value), when the loop ran at all.
    fn flush_carries(&mut self) {
        for k in 0..self.carry.len() {
            let (c, var, _) = self.carry[k];
            let i = self.get(c.counter);
            let init = self.header_incoming(c.counter, false);
            let init = self.get(init);
            let ran = self.b.icmp(CmpPred::Ne, i, init);
            let flush = self
                .b
                .create_block(&format!("flush_d{}", self.names.value(c.slice)));
            let after = self.b.create_block("flushed");
            self.b.br(ran, flush, after);
            self.b.seal_block(flush);
            self.b.switch_to(flush);
            let ds = self.shadow[&c.slice];
            let carried = self.b.use_var(var);
            let old = self.b.load(ds, i);
            let new = self.b.fadd(old, carried);
            self.b.store(ds, i, new);
            self.b.jump(after);
            self.b.seal_block(after);
            self.b.switch_to(after);
        }
    }

    /// Copies the instructions of `blk` into the current block.
    fn copy_insts(&mut self, blk: Block) {
        let primal = self.primal;
        for &inst in &primal.blocks[blk].insts {
            let d = &primal.insts[inst];
            let args: SmallVec<[Value; 3]> = d.args.iter().map(|&a| self.get(a)).collect();
            self.b.set_pos(primal.srcmap.insts[inst]);
            let ni = self.b.ins(d.opcode, d.imm, &args);
            let rs: SmallVec<[Value; 1]> = self.b.results(ni).iter().copied().collect();
            for (&r, &nr) in d.results.iter().zip(&rs) {
                let nr = self.name_like(r, nr);
                self.map[r] = Some(nr);
            }
        }
        self.b.set_pos(gradlift_ir::Pos::NONE);
    }

    /// Writes the copy `nb` of body block `blk`, entered from (the copy of)
    /// `pred` on the path `path` (the body blocks before it), then what follows
    /// it on every path: its successors' copies, or, at the latch, the reverse of
    /// the iteration along the path and the jump back to the header. A copy has
    /// one predecessor, so a phi is the value coming in from `pred`, and every
    /// value of the path is at hand in its reverse.
    fn copy_path(
        &mut self,
        blk: Block,
        pred: Block,
        nb: Block,
        path: &mut Vec<Block>,
    ) -> Result<(), InternalError> {
        let (primal, shape) = (self.primal, self.shape);
        self.b.switch_to(nb);
        self.b.seal_block(nb);
        for p in &primal.blocks[blk].phis {
            let v = p
                .incoming
                .iter()
                .find(|(b, _)| *b == pred)
                .map(|&(_, v)| v)
                .ok_or(InternalError::Fuse {
                    what: "a phi has no value from a predecessor",
                })?;
            let v = self.get(v);
            self.map[p.value] = Some(v);
        }
        self.copy_insts(blk);
        path.push(blk);
        let term = primal.blocks[blk].term.clone().ok_or(InternalError::Fuse {
            what: "a body block has no terminator",
        })?;
        match term {
            Terminator::Jump(t) if t == shape.header => {
                self.reverse_path(path)?;
                let end = self.b.current_block();
                for k in 0..self.header_phis.len() {
                    let (p, phi) = self.header_phis[k];
                    let v = self.header_incoming(p, true);
                    let v = self.get(v);
                    self.b.add_incoming(phi, end, v);
                }
                self.b.jump(self.header);
            }
            Terminator::Jump(t) => {
                let nt = self.b.create_block(self.names.block(t));
                self.b.jump(nt);
                self.copy_path(t, blk, nt, path)?;
            }
            Terminator::Br {
                cond,
                then_dest,
                else_dest,
            } => {
                let c = self.get(cond);
                let nt = self.b.create_block(self.names.block(then_dest));
                let ne = self.b.create_block(self.names.block(else_dest));
                self.b.br(c, nt, ne);
                self.copy_path(then_dest, blk, nt, path)?;
                self.copy_path(else_dest, blk, ne, path)?;
            }
            Terminator::Ret(_) => {
                return Err(InternalError::Fuse {
                    what: "a body block returns",
                });
            }
        }
        path.pop();
        Ok(())
    }

    /// The reverse of the iteration that took `path` (the body's blocks, first to
    /// latch), written where its copy ends: each block's instructions last first,
    /// then its phis' cotangents into the values that came in along the path.
    fn reverse_path(&mut self, path: &[Block]) -> Result<(), InternalError> {
        let (primal, shape) = (self.primal, self.shape);
        // Each iteration's body values start with no cotangent, but the
        // accumulators' updates, whose cotangent is the exit's.
        for &blk in path {
            let d = &primal.blocks[blk];
            let vals: SmallVec<[Value; 16]> = d
                .phis
                .iter()
                .map(|p| p.value)
                .chain(
                    d.insts
                        .iter()
                        .flat_map(|&i| primal.insts[i].results.iter().copied()),
                )
                .collect();
            for v in vals {
                if let Some(var) = self.cts.vars[v] {
                    let z = self.cts.zero(primal.value_type(v));
                    self.b.def_var(var, z);
                }
            }
        }
        for &(a, upd) in &shape.accs {
            if let Some(var) = self.cts.vars[upd] {
                self.b.def_var(var, self.acc_ct[&a]);
            }
        }
        for (k, &blk) in path.iter().enumerate().rev() {
            for &inst in primal.blocks[blk].insts.iter().rev() {
                self.reverse_inst(inst)?;
            }
            let pred = if k == 0 { shape.header } else { path[k - 1] };
            for p in &primal.blocks[blk].phis {
                let Some(g) = self.cts.take(&mut self.b, primal, p.value) else {
                    continue;
                };
                if let Some(&(_, v)) = p.incoming.iter().find(|(b, _)| *b == pred) {
                    self.cts.add(&mut self.b, primal, v, g);
                }
            }
        }
        // This iteration's terms for element `i + 1`, carried to the next.
        for k in 0..self.carry.len() {
            let (c, var, new) = self.carry[k];
            let ty = primal.value_type(primal.insts[c.at_next].results[0]);
            let new = match new {
                Some(v) => v,
                None => self.minus_zero(ty),
            };
            self.b.def_var(var, new);
            self.carry[k].2 = None;
        }
        Ok(())
    }

    /// The reverse of a load of a [`Carry`]: at `i + 1`, its term becomes the
    /// iteration's new carry; at `i`, element `i` gets its term, then the carry
    /// of the iteration before (in the pullback's order).
    fn reverse_carried_load(&mut self, k: usize, inst: Inst) -> Result<(), InternalError> {
        let primal = self.primal;
        let (c, var, _) = self.carry[k];
        let y = primal.insts[inst].results[0];
        let ty = primal.value_type(y);
        let g = self
            .cts
            .take(&mut self.b, primal, y)
            .filter(|&g| g != self.cts.zero(ty));
        if inst == c.at_next {
            self.carry[k].2 = g;
            return Ok(());
        }
        let ds = self.shadow[&c.slice];
        let i = self.get(primal.insts[inst].args[1]);
        let carried = self.b.use_var(var);
        let old = self.b.load(ds, i);
        let new = match g {
            Some(g) => self.b.fadd(old, g),
            None => old,
        };
        let new = self.b.fadd(new, carried);
        self.b.store(ds, i, new);
        Ok(())
    }

    /// The reverse of `inst`: its contributions to its operands' cotangents, or to
    /// a shadow for a load.
    fn reverse_inst(&mut self, inst: Inst) -> Result<(), InternalError> {
        let primal = self.primal;
        let d = &primal.insts[inst];
        if let Some(k) = self
            .carry
            .iter()
            .position(|(c, _, _)| c.at_i == inst || c.at_next == inst)
        {
            return self.reverse_carried_load(k, inst);
        }
        let Some(&y) = d.results.first() else {
            return Ok(());
        };
        if !self.active(y) {
            return Ok(());
        }
        let ty = primal.value_type(y);
        let Some(g) = self.cts.take(&mut self.b, primal, y) else {
            return Ok(());
        };
        if g == self.cts.zero(ty) {
            return Ok(());
        }
        match op_rule(d.opcode) {
            OpRule::Float(rule) => {
                let args: SmallVec<[ArgVal; 3]> = d
                    .args
                    .iter()
                    .map(|&a| match primal.value_def(a) {
                        ValueDef::Const(k) => ArgVal::Const(k),
                        _ => ArgVal::Saved(self.get(a)),
                    })
                    .collect();
                let result = self.get(y);
                let operands: SmallVec<[usize; 3]> = (0..d.args.len())
                    .filter(|&k| {
                        rule.operands.get(k).copied().flatten().is_some() && self.active(d.args[k])
                    })
                    .collect();
                add_contributions(
                    &mut self.b,
                    &self.cts,
                    primal,
                    inst,
                    &rule,
                    &operands,
                    &args,
                    Some(result),
                    g,
                    &mut |_, _, _| {},
                )?;
            }
            OpRule::Memory => {
                // A load: `ds[i] += ct`.
                let Some(&ds) = self.shadow.get(&d.args[0]) else {
                    return Ok(());
                };
                let i = self.get(d.args[1]);
                let old = self.b.load(ds, i);
                let new = self.b.fadd(old, g);
                self.b.store(ds, i, new);
            }
            _ => {}
        }
        Ok(())
    }
}
