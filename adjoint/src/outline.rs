//! Checkpointed loops, first step: each loop marked `checkpoint_loop %s` becomes a
//! call (`docs/checkpointing.md`).
//!
//! Before a rule is derived, every marked loop of the module is *outlined*: its
//! body becomes a function `@f.stepK(%i, carried..., live...) -> (carried...,
//! live floats...)` (one iteration: the counter, the values the loop carries, the
//! values from outside it; it returns the carried values of the next iteration,
//! then each float from outside unchanged), the loop itself a function
//! `@f.loopK(%start, %n, %snaps, init..., live...) -> (%i, carried...)` that
//! calls the step `n - start` times, and the loop in `@f` a call of `@f.loopK`. The
//! derivation then gives that call the binomial rule ([`revolve`](crate::revolve)).
//! Inner marked loops are outlined first, so a marked loop inside a marked loop is
//! a call inside a step.
//!
//! The floats from outside come back out of the step so that the step's pullback
//! takes their cotangents as seeds and adds each iteration's terms into them in
//! order, as the loop's own reverse would: the checkpointed gradient then adds the
//! same terms in the same order as the unchecked one, bit for bit.
//!
//! What can be outlined: a counted loop `for i in start..n` (the header tests `icmp
//! lt %i, %n` and holds nothing else but the marker; `%i` steps by 1 from one
//! entry; one latch), left only through its test, carrying scalars, writing no
//! slice from outside it (its pullback runs its steps again, which must find
//! what they found the first time). Anything else is an error that names the
//! marker and what is wrong.

use cranelift_entity::SecondaryMap;
use gradlift_ir::dominators::DominatorTree;
use gradlift_ir::flowgraph::ControlFlowGraph;
use gradlift_ir::loops::LoopForest;
use gradlift_ir::{
    Block, CmpPred, FuncId, Function, FunctionBuilder, Imm, Inst, Module, Opcode, Pos, Signature,
    Terminator, Type, Value, ValueDef,
};
use hashbrown::HashMap;
use smallvec::SmallVec;

/// An outlined loop: what the derivation needs to give a call of its loop
/// function the binomial rule.
#[derive(Clone, Debug)]
pub(crate) struct LoopFn {
    /// The step.
    pub(crate) step: FuncId,
    /// The types of the carried values (the loop function's parameters from 3,
    /// its results from 1, the step's parameters from 1 and its first results).
    pub(crate) carried: Vec<Type>,
    /// The types of the values from outside the loop (the loop function's last
    /// parameters, the step's last).
    pub(crate) live: Vec<Type>,
    /// Which of `live` are floats, which the step returns after the carried values.
    pub(crate) passthrough: Vec<usize>,
    /// Per result of the loop function, the parameters of the loop function it
    /// depends on, as the activity analysis propagates derivatives (through float
    /// ops, loads, calls; not through integers): what the analysis of the caller
    /// needs to find the activity the loop written out would have.
    pub(crate) deps: Vec<Vec<usize>>,
    /// Per result of the step, the step's parameters it depends on (the same
    /// rules).
    pub(crate) step_deps: Vec<Vec<usize>>,
}

/// The parameters (by index) each result of `f` depends on, by the rules of the
/// activity analysis's varied values.
fn result_deps(module: &Module, f: &Function) -> Vec<Vec<usize>> {
    use cranelift_entity::SecondaryMap;
    let carries = |v: Value| {
        f.value_type(v).is_differentiable() && !matches!(f.value_def(v), ValueDef::Const(_))
    };
    let mut deps: SecondaryMap<Value, Vec<usize>> = SecondaryMap::new();
    for (i, &p) in f.params.iter().enumerate() {
        if carries(p) {
            deps[p] = vec![i];
        }
    }
    let union = |deps: &mut SecondaryMap<Value, Vec<usize>>, to: Value, from: &[usize]| {
        let mut changed = false;
        for &k in from {
            if !deps[to].contains(&k) {
                deps[to].push(k);
                changed = true;
            }
        }
        changed
    };
    loop {
        let mut changed = false;
        for &b in &f.layout {
            let data = &f.blocks[b];
            for phi in &data.phis {
                for &(_, v) in &phi.incoming {
                    if carries(phi.value) {
                        let from = deps[v].clone();
                        changed |= union(&mut deps, phi.value, &from);
                    }
                }
            }
            for &inst in &data.insts {
                let d = &f.insts[inst];
                let mut from: Vec<usize> = Vec::new();
                let mut into: SmallVec<[Value; 2]> = SmallVec::new();
                match d.opcode {
                    Opcode::Load => {
                        from.extend(&deps[d.args[0]]);
                        into.extend(d.results.iter().copied());
                    }
                    Opcode::Store => {
                        from.extend(&deps[d.args[2]]);
                        into.push(d.args[0]);
                    }
                    Opcode::Call => {
                        // As the activity analysis: a `nodiff` callee's results
                        // vary with nothing; a `vjp` one writes no slice.
                        let Imm::Func(g) = d.imm else { continue };
                        let callee = crate::callee::Callee::of(module, g);
                        if callee == crate::callee::Callee::Nodiff {
                            continue;
                        }
                        for &a in &d.args {
                            from.extend(&deps[a]);
                        }
                        into.extend(d.results.iter().copied());
                        if !matches!(callee, crate::callee::Callee::Vjp(_))
                            && let Some(sig) = module.funcs.get(g).map(|x| &x.sig)
                        {
                            for (k, &a) in d.args.iter().enumerate() {
                                if sig.params.get(k).is_some_and(|t| t.is_mut_slice()) {
                                    into.push(a);
                                }
                            }
                        }
                    }
                    op => {
                        if let crate::rules::OpRule::Float(rule) = crate::rules::op_rule(op) {
                            for (k, &a) in d.args.iter().enumerate() {
                                if rule.operands.get(k).is_some_and(|o| o.is_some()) {
                                    from.extend(&deps[a]);
                                }
                            }
                            into.extend(d.results.first().copied());
                        }
                    }
                }
                for v in into {
                    if carries(v) {
                        changed |= union(&mut deps, v, &from);
                    }
                }
            }
        }
        if !changed {
            break;
        }
    }
    let mut out = Vec::new();
    for &b in &f.layout {
        if let Some(Terminator::Ret(vals)) = &f.blocks[b].term {
            out.resize(vals.len(), Vec::new());
            for (r, &v) in vals.iter().enumerate() {
                if !matches!(f.value_def(v), ValueDef::Const(_)) {
                    for &k in &deps[v] {
                        if !out[r].contains(&k) {
                            out[r].push(k);
                        }
                    }
                }
            }
        }
    }
    out
}

/// The loop function's [`LoopFn::deps`] from its step's: carried value `j`
/// depends on its initial value and, through the steps, on what the step's
/// next value `j` depends on (carried values' dependencies, values from
/// outside), to a fixed point.
fn loop_deps(step_deps: &[Vec<usize>], nc: usize) -> Vec<Vec<usize>> {
    let mut d: Vec<Vec<usize>> = (0..nc).map(|j| vec![3 + j]).collect();
    loop {
        let mut changed = false;
        for j in 0..nc {
            for &k in step_deps.get(j).map_or(&[][..], |v| &v[..]) {
                let add: Vec<usize> = if (1..=nc).contains(&k) {
                    d[k - 1].clone()
                } else if k > nc {
                    vec![3 + k - 1]
                } else {
                    Vec::new()
                };
                for x in add {
                    if !d[j].contains(&x) {
                        d[j].push(x);
                        changed = true;
                    }
                }
            }
        }
        if !changed {
            break;
        }
    }
    core::iter::once(Vec::new()).chain(d).collect()
}

/// A module with its marked loops outlined.
#[derive(Clone, Debug, Default)]
pub(crate) struct Outlined {
    /// The module, with the new functions.
    pub(crate) module: Module,
    /// The loop functions made.
    pub(crate) loops: HashMap<FuncId, LoopFn>,
    /// The functions whose marked loops could not be outlined, and why (an error
    /// only if the derivation reaches them).
    pub(crate) errors: HashMap<FuncId, String>,
}

/// Outlines every marked loop of the functions of `module` that `root` calls,
/// itself included, directly or not; `None` when they have none.
pub(crate) fn outline(module: &Module, root: FuncId) -> Option<Outlined> {
    let mut reached = vec![root];
    let mut k = 0;
    while let Some(&f) = reached.get(k) {
        k += 1;
        let Some(body) = module.function(f) else {
            continue;
        };
        for (_, i) in body.placed_insts() {
            if let Imm::Func(g) = body.insts[i].imm
                && body.insts[i].opcode == Opcode::Call
                && !reached.contains(&g)
            {
                reached.push(g);
            }
        }
        // A declaration's rule or overlay is derived too.
        for (d, _) in module.decls.iter() {
            if d.func() == f {
                for g in d.rules() {
                    if !reached.contains(&g) {
                        reached.push(g);
                    }
                }
            }
        }
    }
    let marked: Vec<FuncId> = reached
        .into_iter()
        .filter(|&id| {
            module.function(id).is_some_and(|f| {
                f.placed_insts()
                    .any(|(_, i)| f.insts[i].opcode == Opcode::CheckpointLoop)
            })
        })
        .collect();
    if marked.is_empty() {
        return None;
    }
    let mut out = Outlined {
        module: module.clone(),
        ..Outlined::default()
    };
    for id in marked {
        let fname = module.name(id).to_string();
        let Some(mut func) = module.function(id).cloned() else {
            continue;
        };
        let mut k = 0;
        let result = loop {
            match next_marker(&func) {
                Ok(None) => break Ok(()),
                Ok(Some((h, marker))) => {
                    k += 1;
                    match outline_one(&mut out, &fname, &mut func, h, marker, k) {
                        Ok(()) => {}
                        Err(e) => break Err(e),
                    }
                }
                Err(e) => break Err(e),
            }
        };
        match result {
            Ok(()) => {
                if let Some(f) = out.module.function_mut(id) {
                    *f = func;
                }
            }
            Err(e) => {
                out.errors.insert(id, e);
            }
        }
    }
    Some(out)
}

/// `` `checkpoint_loop %s` at 3:5 ``.
fn describe(func: &Function, inst: Inst) -> String {
    let pos = func.srcmap.insts.get(inst).copied().unwrap_or(Pos::NONE);
    if pos.is_known() {
        format!("the `checkpoint_loop` at {pos}")
    } else {
        "a `checkpoint_loop`".to_string()
    }
}

/// The innermost marked loop left: its header and marker. A marker outside a loop
/// header is an error.
fn next_marker(func: &Function) -> Result<Option<(Block, Inst)>, String> {
    let cfg = ControlFlowGraph::new(func);
    let dom = DominatorTree::new(&cfg);
    let forest = LoopForest::new(&cfg, &dom);
    let mut markers: Vec<(Block, Inst)> = Vec::new();
    for &b in cfg.reverse_postorder() {
        for &inst in &func.blocks[b].insts {
            if func.insts[inst].opcode == Opcode::CheckpointLoop {
                if forest.header_loop(b).is_none() {
                    return Err(format!(
                        "{} is not in the header of a loop (it marks the loop whose header holds it)",
                        describe(func, inst)
                    ));
                }
                markers.push((b, inst));
            }
        }
    }
    for l in forest.innermost_first() {
        let h = forest.header(l);
        if let Some(&m) = markers.iter().find(|&&(b, _)| b == h) {
            return Ok(Some(m));
        }
    }
    Ok(None)
}

/// Outlines the loop with header `h` marked by `marker` in `func` (named `fname`),
/// the `k`th of the function; declares and defines its step and loop functions
/// in `out`.
fn outline_one(
    out: &mut Outlined,
    fname: &str,
    func: &mut Function,
    h: Block,
    marker: Inst,
    k: usize,
) -> Result<(), String> {
    let what = describe(func, marker);
    let fail = |why: &str| format!("{what} marks a loop that cannot be checkpointed: {why}");
    let cfg = ControlFlowGraph::new(func);
    let dom = DominatorTree::new(&cfg);
    let forest = LoopForest::new(&cfg, &dom);
    let l = forest
        .header_loop(h)
        .ok_or_else(|| fail("it is in no loop"))?;
    let in_loop = |b: Block| forest.contains(l, b);
    let loop_blocks: Vec<Block> = func
        .layout
        .iter()
        .copied()
        .filter(|&b| in_loop(b) && b != h)
        .collect();
    // Left only through the test.
    for &b in &loop_blocks {
        if cfg.succs(b).iter().any(|&s| !in_loop(s)) {
            let name = func.blocks[b].name.as_deref().unwrap_or("?").to_string();
            return Err(fail(&format!(
                "it is left from block `{name}` (a `break` or an early `return`), not only through its test"
            )));
        }
    }
    let (latches, entries): (Vec<Block>, Vec<Block>) =
        cfg.preds(h).iter().partition(|&&p| in_loop(p));
    let ([pre], [latch]) = (entries.as_slice(), latches.as_slice()) else {
        return Err(fail(
            "its header must have one entry from outside and one back edge",
        ));
    };
    let (pre, latch) = (*pre, *latch);
    if latch == h || func.blocks[latch].term != Some(Terminator::Jump(h)) {
        return Err(fail(
            "its back edge must be a `jump` from a block of its body",
        ));
    }
    let Some(Terminator::Br {
        cond,
        then_dest,
        else_dest,
    }) = func.blocks[h].term.clone()
    else {
        return Err(fail("its header must end in `br` on its test"));
    };
    let (body, exit) = match (in_loop(then_dest), in_loop(else_dest)) {
        (true, false) if then_dest != h => (then_dest, else_dest),
        _ => {
            return Err(fail(
                "its header must branch into the body while `%i < %n`, out otherwise",
            ));
        }
    };
    // The test: `%more = icmp lt %i, %n`, the only other instruction of the header.
    let test = match func.value_def(cond) {
        ValueDef::Result(i, 0) if func.blocks[h].insts.contains(&i) => i,
        _ => return Err(fail("its header must compute its test itself")),
    };
    let td = &func.insts[test];
    if td.opcode != Opcode::Icmp || td.imm != Imm::Cmp(CmpPred::Lt) {
        return Err(fail("its test must be `icmp lt %i, %n`"));
    }
    let (counter, n) = (td.args[0], td.args[1]);
    for &inst in &func.blocks[h].insts {
        if inst != test && func.insts[inst].opcode != Opcode::CheckpointLoop {
            return Err(fail(
                "its header may hold only the test (compute everything else in the body)",
            ));
        }
    }
    let defined_in_loop = |f: &Function, v: Value| match f.value_def(v) {
        ValueDef::Result(i, _) => f
            .layout
            .iter()
            .any(|&b| in_loop(b) && f.blocks[b].insts.contains(&i)),
        ValueDef::Phi(b) => in_loop(b),
        _ => false,
    };
    if defined_in_loop(func, n) {
        return Err(fail("its bound `%n` must be computed before the loop"));
    }
    let phis = func.blocks[h].phis.clone();
    let incoming = |phi: &gradlift_ir::Phi, from: Block| {
        phi.incoming
            .iter()
            .find(|&&(b, _)| b == from)
            .map(|&(_, v)| v)
    };
    let Some(cphi) = phis.iter().find(|p| p.value == counter) else {
        return Err(fail("its counter must be a phi of its header"));
    };
    let start = incoming(cphi, pre).ok_or_else(|| fail("its counter has no start"))?;
    let next = incoming(cphi, latch).ok_or_else(|| fail("its counter has no step"))?;
    let steps_by_one = match func.value_def(next) {
        ValueDef::Result(i, 0) => {
            let d = &func.insts[i];
            let one = |v: Value| matches!(func.value_def(v), ValueDef::Const(c) if c == gradlift_ir::Scalar::I64(1));
            d.opcode == Opcode::Iadd
                && ((d.args[0] == counter && one(d.args[1]))
                    || (d.args[1] == counter && one(d.args[0])))
        }
        _ => false,
    };
    if !steps_by_one {
        return Err(fail("its counter must step by `iadd %i, 1`"));
    }
    let snaps = func.insts[marker].args[0];
    if defined_in_loop(func, snaps) {
        return Err(fail(
            "its number of snapshots must be computed before the loop",
        ));
    }
    let carried: Vec<gradlift_ir::Phi> = phis
        .iter()
        .filter(|p| p.value != counter)
        .cloned()
        .collect();
    for p in &carried {
        if !func.value_type(p.value).is_scalar() {
            return Err(fail("it carries a slice from one iteration to the next"));
        }
    }
    // Values from outside, in order of first use; writes into slices from outside.
    let mut live: Vec<Value> = Vec::new();
    let add_live = |f: &Function, v: Value, live: &mut Vec<Value>| {
        let outside = match f.value_def(v) {
            ValueDef::Const(_) => false,
            ValueDef::Param(_) => true,
            _ => !defined_in_loop(f, v),
        };
        if outside && !live.contains(&v) {
            live.push(v);
        }
    };
    let is_local_alloc = |f: &Function, v: Value| match f.value_def(v) {
        ValueDef::Result(i, 0) => f.insts[i].opcode == Opcode::Alloc && defined_in_loop(f, v),
        _ => false,
    };
    for &b in &loop_blocks {
        for phi in &func.blocks[b].phis {
            for &(_, v) in &phi.incoming {
                add_live(func, v, &mut live);
            }
        }
        for &inst in &func.blocks[b].insts {
            let d = &func.insts[inst];
            for &a in &d.args {
                add_live(func, a, &mut live);
            }
            let writes_outside = match (d.opcode, d.imm) {
                (Opcode::Store, _) => !is_local_alloc(func, d.args[0]),
                (Opcode::Call, Imm::Func(g)) => out.module.funcs.get(g).is_some_and(|decl| {
                    d.args
                        .iter()
                        .zip(&decl.sig.params)
                        .any(|(&a, t)| t.is_mut_slice() && !is_local_alloc(func, a))
                }),
                _ => false,
            };
            if writes_outside {
                let line = crate::plan::describe_inst(&out.module, func, inst);
                return Err(fail(&format!(
                    "{line} writes into a slice from outside the loop (its pullback runs the loop's steps again, which must find what they found the first time)"
                )));
            }
        }
        match &func.blocks[b].term {
            Some(Terminator::Br { cond, .. }) => add_live(func, *cond, &mut live),
            Some(Terminator::Ret(_)) => return Err(fail("it returns from inside")),
            _ => {}
        }
    }
    for p in &carried {
        if let Some(v) = incoming(p, latch) {
            add_live(func, v, &mut live);
        }
    }
    // Nothing defined in the loop but the header's phis is used after it.
    for &b in func.layout.iter().filter(|&&b| !in_loop(b)) {
        let data = &func.blocks[b];
        let mut used: SmallVec<[Value; 8]> = SmallVec::new();
        for phi in &data.phis {
            used.extend(phi.incoming.iter().map(|&(_, v)| v));
        }
        for &inst in &data.insts {
            used.extend(func.insts[inst].args.iter().copied());
        }
        match &data.term {
            Some(Terminator::Br { cond, .. }) => used.push(*cond),
            Some(Terminator::Ret(vals)) => used.extend(vals.iter().copied()),
            _ => {}
        }
        for v in used {
            if defined_in_loop(func, v) && !phis.iter().any(|p| p.value == v) {
                return Err(fail("a value computed in its body is used after it"));
            }
        }
    }

    // Slices from outside are read-only parameters of the step and the loop
    // function (the loop writes none of them): a call that passes one writes
    // nothing, as the loop did not.
    let live_types: Vec<Type> = live
        .iter()
        .map(|&v| {
            let t = func.value_type(v);
            match t.elem() {
                Some(e) if t.is_slice() => Type::slice(e),
                _ => t,
            }
        })
        .collect();
    let carried_types: Vec<Type> = carried.iter().map(|p| func.value_type(p.value)).collect();
    let passthrough: Vec<usize> = (0..live.len())
        .filter(|&j| live_types[j].is_float())
        .collect();

    // The step.
    let step_sig = Signature::new(
        core::iter::once(Type::I64)
            .chain(carried_types.iter().copied())
            .chain(live_types.iter().copied())
            .collect::<Vec<_>>(),
        carried_types
            .iter()
            .copied()
            .chain(passthrough.iter().map(|&j| live_types[j]))
            .collect::<Vec<_>>(),
    );
    let mut step = Function::new(&step_sig);
    step.srcmap.func = func.srcmap.func;
    let mut vmap: SecondaryMap<Value, Option<Value>> = SecondaryMap::new();
    let name_of = |f: &Function, v: Value| f.values[v].name.clone();
    vmap[counter] = Some(step.params[0]);
    step.values[step.params[0]].name = name_of(func, counter);
    for (j, p) in carried.iter().enumerate() {
        let q = step.params[1 + j];
        vmap[p.value] = Some(q);
        step.values[q].name = name_of(func, p.value);
    }
    for (j, &v) in live.iter().enumerate() {
        let q = step.params[1 + carried.len() + j];
        vmap[v] = Some(q);
        step.values[q].name = name_of(func, v);
    }
    // The header's test, used in the body: true there (found by the fuzz campaign,
    // seed 23, malformed text 117).
    vmap[cond] = Some(step.make_const(gradlift_ir::Scalar::Bool(true)));
    let entry = step.make_block(Some("entry"));
    step.append_block(entry);
    let mut bmap: SecondaryMap<Block, Option<Block>> = SecondaryMap::new();
    bmap[h] = Some(entry);
    for &b in &loop_blocks {
        let nb = step.make_block(func.blocks[b].name.as_deref());
        step.append_block(nb);
        step.srcmap.blocks[nb] = func.srcmap.blocks[b];
        bmap[b] = Some(nb);
    }
    let mut imap: Vec<(Inst, Inst)> = Vec::new();
    for &b in &loop_blocks {
        let nb = bmap[b].expect("mapped");
        for phi in &func.blocks[b].phis {
            let v = step.append_phi(nb, func.value_type(phi.value), &[]);
            step.values[v].name = name_of(func, phi.value);
            step.srcmap.values[v] = func.srcmap.values[phi.value];
            vmap[phi.value] = Some(v);
        }
        for &inst in &func.blocks[b].insts {
            let d = &func.insts[inst];
            let imm = match d.imm {
                Imm::Msg(m) => Imm::Msg(step.make_msg(func.message(m).unwrap_or_default())),
                imm => imm,
            };
            let tys: SmallVec<[Type; 2]> = d.results.iter().map(|&r| func.value_type(r)).collect();
            let ni = step.make_inst(d.opcode, imm, &[], &tys);
            step.insts[ni].checkpoint = d.checkpoint;
            step.srcmap.insts[ni] = func.srcmap.insts[inst];
            for (j, &r) in d.results.iter().enumerate() {
                let nr = step.insts[ni].results[j];
                step.values[nr].name = name_of(func, r);
                vmap[r] = Some(nr);
            }
            step.append_inst(nb, ni);
            imap.push((inst, ni));
        }
    }
    let map = |step: &mut Function, v: Value| -> Result<Value, String> {
        match func.value_def(v) {
            ValueDef::Const(c) => Ok(step.make_const(c)),
            _ => vmap[v].ok_or_else(|| format!("{what}: internal error: {v} is not mapped")),
        }
    };
    for &(inst, ni) in &imap {
        let args: SmallVec<[Value; 3]> = func.insts[inst]
            .args
            .iter()
            .map(|&a| map(&mut step, a))
            .collect::<Result<_, _>>()?;
        step.insts[ni].args = args;
    }
    for &b in &loop_blocks {
        let nb = bmap[b].expect("mapped");
        for phi in &func.blocks[b].phis {
            let np = vmap[phi.value].expect("mapped");
            for &(p, v) in &phi.incoming {
                let (Some(np_pred), true) = (bmap[p], in_loop(p)) else {
                    continue;
                };
                let nv = map(&mut step, v)?;
                step.add_phi_incoming(np, np_pred, nv);
            }
        }
        let term = match func.blocks[b].term.clone() {
            Some(Terminator::Jump(t)) if t == h => {
                let mut vals: Vec<Value> = Vec::new();
                for p in &carried {
                    let v = incoming(p, latch)
                        .ok_or_else(|| fail("a carried value has no next value"))?;
                    vals.push(map(&mut step, v)?);
                }
                for &j in &passthrough {
                    vals.push(step.params[1 + carried.len() + j]);
                }
                Terminator::Ret(vals.into())
            }
            Some(Terminator::Jump(t)) => Terminator::Jump(bmap[t].expect("in the loop")),
            Some(Terminator::Br {
                cond,
                then_dest,
                else_dest,
            }) => Terminator::Br {
                cond: map(&mut step, cond)?,
                then_dest: bmap[then_dest].expect("in the loop"),
                else_dest: bmap[else_dest].expect("in the loop"),
            },
            _ => return Err(fail("a block of its body has no terminator")),
        };
        step.set_terminator(nb, term);
        step.srcmap.terms[nb] = func.srcmap.terms[b];
    }
    step.set_terminator(entry, Terminator::Jump(bmap[body].expect("mapped")));
    let module = &mut out.module;
    let unique = |module: &Module, stem: String| {
        let mut name = stem.clone();
        let mut n = 2;
        while module.func_by_name(&name).is_some() {
            name = format!("{stem}.{n}");
            n += 1;
        }
        name
    };
    let step_name = unique(module, format!("{fname}.step{k}"));
    let step_id = module
        .declare(&step_name, step_sig.clone())
        .map_err(|e| e.to_string())?;
    let step_deps = result_deps(module, &step);
    let deps = loop_deps(&step_deps, carried.len());
    module.define(step_id, step).map_err(|e| e.to_string())?;

    // The loop function.
    let loop_sig = Signature::new(
        [Type::I64, Type::I64, Type::I64]
            .into_iter()
            .chain(carried_types.iter().copied())
            .chain(live_types.iter().copied())
            .collect::<Vec<_>>(),
        core::iter::once(Type::I64)
            .chain(carried_types.iter().copied())
            .collect::<Vec<_>>(),
    );
    let loop_name = unique(module, format!("{fname}.loop{k}"));
    let loop_id = module
        .declare(&loop_name, loop_sig)
        .map_err(|e| e.to_string())?;
    let loop_body = {
        let mut b = FunctionBuilder::new(module, loop_id);
        let p: Vec<Value> = (0..3 + carried.len() + live.len())
            .map(|j| b.param(j))
            .collect();
        for (j, name) in ["start", "n", "snapshots"].iter().enumerate() {
            b.named(name, p[j]);
        }
        let first = b.current_block();
        let head = b.create_block("head");
        let bodyb = b.create_block("body");
        let exitb = b.create_block("exit");
        b.jump(head);
        b.switch_to(head);
        let i = b.phi(Type::I64, &[(first, p[0])]);
        let i = b.named("i", i);
        let cs: Vec<Value> = carried_types
            .iter()
            .enumerate()
            .map(|(j, &t)| b.phi(t, &[(first, p[3 + j])]))
            .collect();
        let more = b.icmp(CmpPred::Lt, i, p[1]);
        b.br(more, bodyb, exitb);
        b.switch_to(bodyb);
        let args: Vec<Value> = core::iter::once(i)
            .chain(cs.iter().copied())
            .chain(p[3 + carried.len()..].iter().copied())
            .collect();
        let outs = b.call(step_id, &args);
        let one = b.iconst(1);
        let i1 = b.iadd(i, one);
        b.add_incoming(i, bodyb, i1);
        for (j, &c) in cs.iter().enumerate() {
            b.add_incoming(c, bodyb, outs[j]);
        }
        b.jump(head);
        b.switch_to(exitb);
        let mut rets = vec![i];
        rets.extend(cs.iter().copied());
        b.ret(&rets);
        b.finish().map_err(|e| e.to_string())?
    };
    module
        .define(loop_id, loop_body)
        .map_err(|e| e.to_string())?;

    // The loop in `func` becomes the call.
    let inits: Vec<Value> = carried
        .iter()
        .map(|p| incoming(p, pre).ok_or_else(|| fail("a carried value has no initial value")))
        .collect::<Result<_, _>>()?;
    let args: Vec<Value> = [start, n, snaps]
        .into_iter()
        .chain(inits)
        .chain(live.iter().copied())
        .collect();
    let tys: Vec<Type> = core::iter::once(Type::I64)
        .chain(carried_types.iter().copied())
        .collect();
    let call = func.make_inst(Opcode::Call, Imm::Func(loop_id), &args, &tys);
    func.srcmap.insts[call] = func.srcmap.insts[marker];
    let results: Vec<Value> = func.insts[call].results.to_vec();
    let mut subst: HashMap<Value, Value> = HashMap::new();
    subst.insert(counter, results[0]);
    for (j, p) in carried.iter().enumerate() {
        subst.insert(p.value, results[1 + j]);
        func.values[results[1 + j]].name = name_of(func, p.value);
    }
    func.values[results[0]].name = name_of(func, counter);
    let keep: Vec<Block> = func
        .layout
        .iter()
        .copied()
        .filter(|&b| b == h || !in_loop(b))
        .collect();
    func.layout = keep;
    func.blocks[h].insts.clear();
    func.blocks[h].phis.clear();
    func.append_inst(h, call);
    func.set_terminator(h, Terminator::Jump(exit));
    let sub = |v: &mut Value| {
        if let Some(&w) = subst.get(v) {
            *v = w;
        }
    };
    for &b in &func.layout.clone() {
        let data = &mut func.blocks[b];
        for phi in &mut data.phis {
            for (_, v) in phi.incoming.iter_mut() {
                sub(v);
            }
        }
        for &inst in &data.insts {
            if inst != call {
                for a in func.insts[inst].args.iter_mut() {
                    sub(a);
                }
            }
        }
        match &mut data.term {
            Some(Terminator::Br { cond, .. }) => sub(cond),
            Some(Terminator::Ret(vals)) => vals.iter_mut().for_each(sub),
            _ => {}
        }
    }
    out.loops.insert(
        loop_id,
        LoopFn {
            step: step_id,
            carried: carried_types,
            live: live_types,
            passthrough,
            deps,
            step_deps,
        },
    );
    Ok(())
}
