//! Inlining of calls to small functions.
//!
//! A call is inlined when its callee is a defined function of at most
//! [`OptConfig::inline_max_insts`](super::OptConfig::inline_max_insts) instructions
//! that
//! - is not recursive, directly or through others (no cycle of the call graph);
//! - has no loop (an acyclic control-flow graph);
//! - makes no `alloc` (a buffer dies when its function returns: inlined into a loop,
//!   the buffers would pile up until the caller returns);
//! - has no declaration (`overlay`, `vjp`, `jvp`, `nodiff`): the user's derivative
//!   rule keeps applying to the call;
//! - does not `select` between slices of parameters given slices of another
//!   mutability than declared (the `select`'s type would change).
//!
//! The caller's block is split at the call: the callee's blocks are copied between
//! the two halves, every `ret` becomes a `jump` to the continuation block, whose phis
//! (the call's result values, renamed in place) take the returned values. Copies get
//! the call's source position (errors inside the inlined code point at the call);
//! blocks are named after the callee's (`callee.label`).

use cranelift_entity::SecondaryMap;
use hashbrown::HashMap;
use smallvec::SmallVec;

use crate::entities::{Block, FuncId, Inst, Value};
use crate::function::{Function, Phi, Terminator, ValueDef};
use crate::module::Module;
use crate::ops::{Imm, Opcode};

use super::ModuleFacts;
use super::util;

/// The size past which a function gets nothing more inlined: a bound on code
/// growth (each inlined call adds at most `inline_max_insts` instructions).
const MAX_CALLER_INSTS: usize = 50_000;

/// Whether a call from `caller` to `callee` may be inlined.
fn inlinable(
    module: &Module,
    facts: &ModuleFacts,
    caller: FuncId,
    callee: FuncId,
    max_insts: usize,
) -> bool {
    if callee == caller || facts.recursive[callee] || facts.declared[callee] {
        return false;
    }
    let Some(g) = module.function(callee) else {
        return false;
    };
    if util::inst_count(g) > max_insts {
        return false;
    }
    let has_alloc = g
        .placed_insts()
        .any(|(_, i)| g.insts[i].opcode == Opcode::Alloc);
    !has_alloc && !util::has_cycle(g)
}

/// Whether the call's slice arguments would change the type of a `select` of the
/// callee's parameters.
fn select_type_changes(g: &Function, call_args: &[Value], caller: &Function) -> bool {
    let changed: SmallVec<[Value; 4]> = g
        .params
        .iter()
        .zip(call_args)
        .filter(|&(&p, &a)| g.values[p].ty != caller.values[a].ty)
        .map(|(&p, _)| p)
        .collect();
    !changed.is_empty()
        && g.placed_insts().any(|(_, i)| {
            let d = &g.insts[i];
            d.opcode == Opcode::Select && d.args.iter().any(|a| changed.contains(a))
        })
}

/// Inlines the calls of `func` (the body of `caller`, taken out of `module`) to
/// small functions. Returns how many calls were inlined.
pub(crate) fn run(
    module: &Module,
    facts: &ModuleFacts,
    caller: FuncId,
    func: &mut Function,
    max_insts: usize,
) -> usize {
    let mut inlined = 0;
    let mut size = util::inst_count(func);
    // Whether each callee met so far may be inlined (it does not change meanwhile).
    let mut verdicts: HashMap<FuncId, bool> = HashMap::new();
    let mut i = 0;
    while i < func.layout.len() {
        if size > MAX_CALLER_INSTS {
            break;
        }
        let b = func.layout[i];
        let site = func.blocks[b].insts.iter().position(|&inst| {
            let d = &func.insts[inst];
            match d.imm {
                // A checkpointed call stays a call: inlining would drop the
                // checkpoint.
                Imm::Func(g) if d.opcode == Opcode::Call && !d.checkpoint => {
                    *verdicts
                        .entry(g)
                        .or_insert_with(|| inlinable(module, facts, caller, g, max_insts))
                        && module
                            .function(g)
                            .is_some_and(|gf| !select_type_changes(gf, &d.args, func))
                }
                _ => false,
            }
        });
        match site {
            Some(idx) => {
                let call = func.blocks[b].insts[idx];
                let Imm::Func(g) = func.insts[call].imm else {
                    unreachable!("the site is a call")
                };
                if let Some(gf) = module.function(g) {
                    inline_call(module, func, b, idx, gf);
                    inlined += 1;
                    size += util::inst_count(gf);
                }
                // The rest of `b` moved to a new block after the copies: scan on.
                i += 1;
            }
            None => i += 1,
        }
    }
    inlined
}

/// Inlines the call at `idx` of `b` in `func`, whose callee's body is `g`.
fn inline_call(module: &Module, func: &mut Function, b: Block, idx: usize, g: &Function) {
    let call = func.blocks[b].insts[idx];
    let pos = func.srcmap.insts[call];
    let args: SmallVec<[Value; 4]> = func.insts[call].args.clone().into_iter().collect();
    let results: SmallVec<[Value; 2]> = func.insts[call].results.clone().into_iter().collect();
    let callee_name = match func.insts[call].imm {
        Imm::Func(id) => module.name(id).to_string(),
        _ => String::new(),
    };

    // Split `b`: the continuation gets the instructions after the call and the
    // terminator.
    let cont_name = util::derived_name(func, b, "cont");
    let cont = func.make_block(cont_name.as_deref());
    let rest = func.blocks[b].insts.split_off(idx + 1);
    func.blocks[b].insts.pop();
    func.blocks[cont].insts = rest;
    func.blocks[cont].term = func.blocks[b].term.take();
    func.srcmap.terms[cont] = func.srcmap.terms[b];
    func.srcmap.blocks[cont] = pos;
    for s in util::distinct_succs(func, cont) {
        util::rename_phi_pred(func, s, b, cont);
    }
    // The dead call keeps no claim on its results, which become the continuation's
    // phis.
    func.insts[call].results.clear();

    // Copy the callee: blocks, phi values and instruction results first (uses may
    // come before definitions in the layout), then operands.
    let mut bmap: SecondaryMap<Block, Option<Block>> = SecondaryMap::new();
    let mut vmap: HashMap<Value, Value> = HashMap::new();
    for (&p, &a) in g.params.iter().zip(&args) {
        vmap.insert(p, a);
    }
    let mut new_blocks = Vec::with_capacity(g.layout.len());
    for &gb in &g.layout {
        let name = g.blocks[gb]
            .name
            .as_deref()
            .map(|n| format!("{callee_name}.{n}"));
        let nb = func.make_block(name.as_deref());
        func.srcmap.blocks[nb] = pos;
        bmap[gb] = Some(nb);
        new_blocks.push(nb);
    }
    let mut imap: Vec<(Inst, Inst, Block)> = Vec::new();
    for &gb in &g.layout {
        let nb = bmap[gb].expect("mapped above");
        for phi in &g.blocks[gb].phis {
            let v = func.append_phi(nb, g.values[phi.value].ty, &[]);
            func.values[v].name = g.values[phi.value].name.clone();
            func.srcmap.values[v] = pos;
            vmap.insert(phi.value, v);
        }
        for &gi in &g.blocks[gb].insts {
            let d = &g.insts[gi];
            let imm = match d.imm {
                Imm::Msg(m) => Imm::Msg(func.make_msg(g.message(m).unwrap_or_default())),
                imm => imm,
            };
            let tys: SmallVec<[_; 2]> = d.results.iter().map(|&r| g.values[r].ty).collect();
            let ni = func.make_inst(d.opcode, imm, &[], &tys);
            func.insts[ni].checkpoint = d.checkpoint;
            for (k, &r) in d.results.iter().enumerate() {
                let nr = func.insts[ni].results[k];
                func.values[nr].name = g.values[r].name.clone();
                vmap.insert(r, nr);
            }
            // Traced code keeps the callee's own Rust position (its file says
            // where); IR text takes the call's.
            let own = g.srcmap.insts[gi];
            func.srcmap.insts[ni] = if own.file.is_some() { own } else { pos };
            func.append_inst(nb, ni);
            imap.push((gi, ni, nb));
        }
    }
    let map = |func: &mut Function, v: Value| -> Value {
        match g.values[v].def {
            ValueDef::Const(c) => func.make_const(c),
            _ => vmap.get(&v).copied().unwrap_or(v),
        }
    };
    for &(gi, ni, _) in &imap {
        let args: SmallVec<[Value; 3]> = g.insts[gi].args.iter().map(|&a| map(func, a)).collect();
        func.insts[ni].args = args;
    }
    let mut returns: Vec<(Block, SmallVec<[Value; 2]>)> = Vec::new();
    for &gb in &g.layout {
        let nb = bmap[gb].expect("mapped above");
        for (k, phi) in g.blocks[gb].phis.iter().enumerate() {
            let incoming: SmallVec<[(Block, Value); 2]> = phi
                .incoming
                .iter()
                .map(|&(p, v)| (bmap[p].unwrap_or(p), map(func, v)))
                .collect();
            func.blocks[nb].phis[k].incoming = incoming;
        }
        let term = match &g.blocks[gb].term {
            Some(Terminator::Jump(d)) => Terminator::Jump(bmap[*d].unwrap_or(*d)),
            Some(Terminator::Br {
                cond,
                then_dest,
                else_dest,
            }) => Terminator::Br {
                cond: map(func, *cond),
                then_dest: bmap[*then_dest].unwrap_or(*then_dest),
                else_dest: bmap[*else_dest].unwrap_or(*else_dest),
            },
            Some(Terminator::Ret(vals)) => {
                let vals = vals.iter().map(|&v| map(func, v)).collect();
                returns.push((nb, vals));
                Terminator::Jump(cont)
            }
            None => Terminator::Ret(SmallVec::new()),
        };
        func.blocks[nb].term = Some(term);
        func.srcmap.terms[nb] = pos;
    }

    // The call's results become the continuation's phis.
    for (k, &r) in results.iter().enumerate() {
        func.values[r].def = ValueDef::Phi(cont);
        func.srcmap.values[r] = pos;
        let incoming = returns
            .iter()
            .filter_map(|(rb, vals)| vals.get(k).map(|&v| (*rb, v)))
            .collect();
        func.blocks[cont].phis.push(Phi { value: r, incoming });
    }

    // Layout: `b`, the copies, the continuation.
    let at = func
        .layout
        .iter()
        .position(|&x| x == b)
        .map_or(func.layout.len(), |i| i + 1);
    let mut tail = func.layout.split_off(at);
    func.layout.extend(new_blocks.iter().copied());
    func.layout.push(cont);
    func.layout.append(&mut tail);
    if let Some(&entry) = new_blocks.first() {
        func.blocks[b].term = Some(Terminator::Jump(entry));
    }

    // Parameters given constants may leave literals the text cannot write.
    for &(_, ni, nb) in &imap {
        util::legalize_literals(module, func, nb, ni);
    }
}
