//! Rules of width N (reverse mode's vector mode, the `Reverse(N)` of Rust's autodiff
//! RFC draft): one forward pass, then one pullback that carries N cotangents per
//! value, from N seeds into N shadows.
//!
//! A rule is derived at width 1 ([`build_rrule`](crate::build_rrule())), then every
//! derived function is widened in place:
//!
//! - a forward pass changes only in its shadow buffers: each `tape_alloc` of a
//!   local buffer's shadow allocates `N` times the length (`%n` becomes
//!   `imul %n, N`), since lane `j` of element `i` lives at `i * N + j`;
//! - a pullback is rewritten by lanes. A value is *by lane* when it depends on a
//!   seed, on a load from a shadow, or on a callee's pullback; everything else (the
//!   primal values it pops or recomputes, indices, control flow) is computed once
//!   and shared by the lanes. Each statement that makes a value by lane is written
//!   `N` times, lane `j` reading lane `j` of its operands, so lane `j` computes
//!   exactly what the width-1 pullback computes from seed `j`: the results are bit
//!   for bit those of `N` width-1 pullbacks, and what does not depend on the seed
//!   (a `cos x`, a division by a saved value) is computed once.
//!
//! In a widened pullback:
//! - each seed parameter becomes `N` consecutive parameters (lane 0 first), and
//!   each result `N` consecutive results;
//! - a shadow (a parameter, or a view of a shadow buffer) is one slice `N` times
//!   as long, lane `j` of element `i` at `i * N + j`; `load`/`store` at `%i` become
//!   `N` loads/stores at `%i * N + j`; `len` of a shadow is its element count (its
//!   length divided by `N`, or `-1` when `N` does not divide it, which no slice's
//!   length equals, so debug mode's length checks still fail on a bad shadow);
//! - a call of another derived pullback passes its seeds by lane and its shadows
//!   as they are, and gets its results by lane; a call of anything else (a `vjp`
//!   rule, a host function) that reads a value by lane is made once per lane;
//! - a `trap_if` whose condition is by lane is checked per lane.
//!
//! Control never depends on a lane in derived code (a pullback branches on what it
//! pops and on primal values): a branch on a value by lane, or a push, pop or
//! buffer op of one, is a bug in the derivation and fails with
//! [`InternalError::Widen`].

use cranelift_entity::SecondaryMap;
use gradlift_ir::flowgraph::ControlFlowGraph;
use gradlift_ir::{
    Block, CmpPred, FuncId, Function, Imm, Inst, Module, Opcode, Scalar, Signature, Terminator,
    Type, Value, ValueDef,
};
use hashbrown::{HashMap, HashSet};
use smallvec::SmallVec;

use crate::error::InternalError;

/// How a parameter of a width-1 pullback takes part in its widening.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub(crate) enum ParamLanes {
    /// The same at every width (a primal slice).
    Shared,
    /// A seed: `N` parameters.
    Scalar,
    /// A shadow: one slice `N` times as long.
    Slice,
}

/// What the widening needs to know about one derived function.
#[derive(Clone, Debug)]
pub(crate) struct LaneFunc {
    /// The function (a pullback, or a forward rule).
    pub(crate) func: FuncId,
    /// Per parameter of its width-1 form.
    pub(crate) params: Vec<ParamLanes>,
    /// Per result of its width-1 form: whether it is by lane (`N` results).
    pub(crate) results: Vec<bool>,
    /// Its `tape_view`s of shadow buffers (lane slices).
    pub(crate) lane_views: Vec<Inst>,
    /// Its `alloc`s of tangent buffers (lane slices, made `N` times as long).
    pub(crate) lane_allocs: Vec<Inst>,
}

/// Widens every function of `funcs` in `module` (derived at width 1) to width `n`;
/// they call each other with the widened conventions.
pub(crate) fn widen_funcs(
    module: &mut Module,
    funcs: &[LaneFunc],
    n: usize,
) -> Result<(), InternalError> {
    if n == 1 {
        return Ok(());
    }
    let callees: HashMap<FuncId, &LaneFunc> = funcs.iter().map(|f| (f.func, f)).collect();
    let mut widened = Vec::with_capacity(funcs.len());
    for lf in funcs {
        let name = module.name(lf.func).to_string();
        let func = module
            .function(lf.func)
            .ok_or_else(|| widen_error(&name, "it has no body".into()))?;
        let sig = module.sig(lf.func);
        let w = Widen::new(module, func, sig, lf, &callees, n, &name)?;
        widened.push((lf.func, w.run()?));
    }
    for (id, (func, sig)) in widened {
        let decl = &mut module.funcs[id];
        decl.sig = sig;
        decl.body = gradlift_ir::Body::Defined(func);
    }
    Ok(())
}

/// Widens the derived pairs of a reverse rule: each pullback by lanes
/// ([`widen_funcs`]), each forward pass's shadow buffers made `n` times as long.
pub(crate) fn widen_rules(
    module: &mut Module,
    pullbacks: &[LaneFunc],
    forwards: &[(FuncId, Vec<Inst>)],
    n: usize,
) -> Result<(), InternalError> {
    if n == 1 {
        return Ok(());
    }
    widen_funcs(module, pullbacks, n)?;
    for (fwd, allocs) in forwards {
        let name = module.name(*fwd).to_string();
        let f = module
            .function_mut(*fwd)
            .ok_or_else(|| widen_error(&name, "the forward pass has no body".into()))?;
        widen_allocs(f, allocs, n);
    }
    Ok(())
}

fn widen_error(func: &str, what: String) -> InternalError {
    InternalError::Widen {
        func: func.to_string(),
        what,
    }
}

/// Makes each `tape_alloc T, %n` (or `alloc`) of `allocs` allocate `%n * width`
/// elements.
fn widen_allocs(fwd: &mut Function, allocs: &[Inst], width: usize) {
    let allocs: HashSet<Inst> = allocs.iter().copied().collect();
    let k = fwd.make_const(Scalar::I64(width as i64));
    for b in fwd.layout.clone() {
        let mut idx = 0;
        while idx < fwd.blocks[b].insts.len() {
            let inst = fwd.blocks[b].insts[idx];
            if allocs.contains(&inst) {
                let len = fwd.insts[inst].args[0];
                let mul = fwd.make_inst(Opcode::Imul, Imm::None, &[len, k], &[Type::I64]);
                fwd.srcmap.insts[mul] = fwd.srcmap.insts[inst];
                fwd.insert_inst(b, idx, mul);
                fwd.insts[inst].args[0] = fwd.insts[mul].results[0];
                idx += 1;
            }
            idx += 1;
        }
    }
}

/// How a value of the width-1 pullback is had in the widened one.
#[derive(Copy, Clone, PartialEq, Eq, Debug, Default)]
enum Kind {
    /// One value shared by the lanes.
    #[default]
    Shared,
    /// One value per lane.
    Lanes,
    /// A shadow: one slice, lane `j` of element `i` at `i * N + j`.
    LaneSlice,
}

/// One pullback being widened.
struct Widen<'a> {
    module: &'a Module,
    old: &'a Function,
    name: &'a str,
    n: usize,
    new: Function,
    new_sig: Signature,
    kind: SecondaryMap<Value, Kind>,
    shared: SecondaryMap<Value, Option<Value>>,
    lanes: HashMap<Value, SmallVec<[Value; 8]>>,
    bmap: SecondaryMap<Block, Option<Block>>,
    shadow_views: HashSet<Inst>,
    callees: &'a HashMap<FuncId, &'a LaneFunc>,
    lane_allocs: HashSet<Inst>,
    results: &'a [bool],
    /// `i * N` per index `i` (old value), made once per block where first needed.
    scaled: HashMap<(Block, Value), Value>,
}

impl<'a> Widen<'a> {
    fn new(
        module: &'a Module,
        old: &'a Function,
        sig: &Signature,
        pair: &'a LaneFunc,
        callees: &'a HashMap<FuncId, &'a LaneFunc>,
        n: usize,
        name: &'a str,
    ) -> Result<Widen<'a>, InternalError> {
        if pair.results.len() != sig.results.len() {
            return Err(widen_error(
                name,
                format!(
                    "{} result roles for {} results",
                    pair.results.len(),
                    sig.results.len()
                ),
            ));
        }
        if pair.params.len() != sig.params.len() {
            return Err(widen_error(
                name,
                format!(
                    "{} parameter roles for {} parameters",
                    pair.params.len(),
                    sig.params.len()
                ),
            ));
        }
        let mut params = Vec::new();
        for (&t, &role) in sig.params.iter().zip(&pair.params) {
            let copies = if role == ParamLanes::Scalar { n } else { 1 };
            params.extend(core::iter::repeat_n(t, copies));
        }
        let results: Vec<Type> = sig
            .results
            .iter()
            .zip(&pair.results)
            .flat_map(|(&t, &lanes)| core::iter::repeat_n(t, if lanes { n } else { 1 }))
            .collect();
        let new_sig = Signature::new(params, results);
        let mut new = Function::new(&new_sig);
        new.srcmap.func = old.srcmap.func;
        let mut w = Widen {
            module,
            old,
            name,
            n,
            new,
            new_sig,
            kind: SecondaryMap::new(),
            shared: SecondaryMap::new(),
            lanes: HashMap::new(),
            bmap: SecondaryMap::new(),
            shadow_views: pair.lane_views.iter().copied().collect(),
            lane_allocs: pair.lane_allocs.iter().copied().collect(),
            results: &pair.results,
            callees,
            scaled: HashMap::new(),
        };
        let mut k = 0;
        for (i, &role) in pair.params.iter().enumerate() {
            let p = old.params[i];
            let pname = old.values[p].name.clone();
            match role {
                ParamLanes::Scalar => {
                    w.kind[p] = Kind::Lanes;
                    let vs: SmallVec<[Value; 8]> = (0..n).map(|j| w.new.params[k + j]).collect();
                    if let Some(pn) = &pname {
                        for (j, &v) in vs.iter().enumerate() {
                            w.new.values[v].name = Some(format!("{pn}.{j}").into());
                        }
                    }
                    w.lanes.insert(p, vs);
                    k += n;
                }
                ParamLanes::Slice | ParamLanes::Shared => {
                    if role == ParamLanes::Slice {
                        w.kind[p] = Kind::LaneSlice;
                    }
                    let v = w.new.params[k];
                    w.new.values[v].name = pname;
                    w.shared[p] = Some(v);
                    k += 1;
                }
            }
        }
        Ok(w)
    }

    fn fail(&self, what: String) -> InternalError {
        widen_error(self.name, what)
    }

    /// Which values are by lane (a fixpoint over phis, for loops).
    fn analyse(&mut self) {
        let old = self.old;
        loop {
            let mut changed = false;
            for &b in &old.layout {
                for phi in &old.blocks[b].phis {
                    let k = if phi
                        .incoming
                        .iter()
                        .any(|&(_, v)| self.kind[v] == Kind::Lanes)
                    {
                        Kind::Lanes
                    } else {
                        Kind::Shared
                    };
                    if k != self.kind[phi.value] && self.kind[phi.value] == Kind::Shared {
                        self.kind[phi.value] = k;
                        changed = true;
                    }
                }
                for &inst in &old.blocks[b].insts {
                    let d = &old.insts[inst];
                    let any_lane = d.args.iter().any(|&a| self.kind[a] == Kind::Lanes);
                    let k = match d.opcode {
                        Opcode::TapeView if self.shadow_views.contains(&inst) => Kind::LaneSlice,
                        Opcode::Alloc if self.lane_allocs.contains(&inst) => Kind::LaneSlice,
                        Opcode::Load if self.kind[d.args[0]] == Kind::LaneSlice => Kind::Lanes,
                        Opcode::Len | Opcode::Pop | Opcode::TapeAlloc | Opcode::TapeView => {
                            Kind::Shared
                        }
                        Opcode::Call => match d.imm {
                            Imm::Func(g) if self.callees.contains_key(&g) => {
                                // By the callee's result roles.
                                let roles = &self.callees[&g].results;
                                for (&r, &lanes) in d.results.iter().zip(roles) {
                                    let k = if lanes { Kind::Lanes } else { Kind::Shared };
                                    if self.kind[r] != k {
                                        self.kind[r] = k;
                                        changed = true;
                                    }
                                }
                                continue;
                            }
                            _ if any_lane => Kind::Lanes,
                            _ => Kind::Shared,
                        },
                        _ if any_lane => Kind::Lanes,
                        _ => Kind::Shared,
                    };
                    for &r in &d.results {
                        if self.kind[r] != k {
                            self.kind[r] = k;
                            changed = true;
                        }
                    }
                }
            }
            if !changed {
                break;
            }
        }
    }

    /// Lane `j` of the old value `v` (the shared value for every lane when it is
    /// not by lane).
    fn lane(&mut self, v: Value, j: usize) -> Result<Value, InternalError> {
        if let ValueDef::Const(c) = self.old.value_def(v) {
            return Ok(self.new.make_const(c));
        }
        match self.kind[v] {
            Kind::Lanes => self.lanes.get(&v).and_then(|l| l.get(j).copied()),
            _ => self.shared[v],
        }
        .ok_or_else(|| {
            self.fail(format!(
                "{v} ({:?}, {:?}) is used before it is made",
                self.old.value_def(v),
                self.kind[v]
            ))
        })
    }

    /// The one value standing for `v`, which must not be by lane.
    fn one(&mut self, v: Value, what: &str) -> Result<Value, InternalError> {
        if self.kind[v] == Kind::Lanes {
            return Err(self.fail(format!("{what} reads {v}, which is by lane")));
        }
        self.lane(v, 0)
    }

    /// Appends a copy of `inst` with `args` to `nb`, its results typed `types`.
    fn emit(
        &mut self,
        nb: Block,
        inst: Inst,
        opcode: Opcode,
        args: &[Value],
        types: &[Type],
    ) -> Inst {
        let d = &self.old.insts[inst];
        let imm = match d.imm {
            Imm::Msg(m) => {
                let text = self.old.message(m).unwrap_or_default().to_string();
                Imm::Msg(self.new.make_msg(&text))
            }
            imm => imm,
        };
        let ni = self.new.make_inst(opcode, imm, args, types);
        self.new.srcmap.insts[ni] = self.old.srcmap.insts[inst];
        self.new.append_inst(nb, ni);
        ni
    }

    /// A new integer op in `nb`.
    fn int_op(&mut self, nb: Block, op: Opcode, imm: Imm, args: &[Value], ty: Type) -> Value {
        let ni = self.new.make_inst(op, imm, args, &[ty]);
        self.new.append_inst(nb, ni);
        self.new.insts[ni].results[0]
    }

    /// The index of lane `j` of element `i` (old value) of a shadow: `i * N + j`.
    fn lane_index(
        &mut self,
        ob: Block,
        nb: Block,
        i: Value,
        j: usize,
    ) -> Result<Value, InternalError> {
        let base = match self.scaled.get(&(ob, i)) {
            Some(&b) => b,
            None => {
                let ni = self.one(i, "an index into a shadow")?;
                let k = self.new.make_const(Scalar::I64(self.n as i64));
                let b = self.int_op(nb, Opcode::Imul, Imm::None, &[ni, k], Type::I64);
                self.scaled.insert((ob, i), b);
                b
            }
        };
        if j == 0 {
            return Ok(base);
        }
        let k = self.new.make_const(Scalar::I64(j as i64));
        Ok(self.int_op(nb, Opcode::Iadd, Imm::None, &[base, k], Type::I64))
    }

    /// Names the lanes of `r` after it.
    fn name_lanes(&mut self, r: Value, vs: &[Value]) {
        if let Some(n) = self.old.values[r].name.clone() {
            for (j, &v) in vs.iter().enumerate() {
                self.new.values[v].name = Some(format!("{n}.{j}").into());
            }
        }
    }

    fn run(mut self) -> Result<(Function, Signature), InternalError> {
        self.analyse();
        let old = self.old;
        let cfg = ControlFlowGraph::new(old);
        let rpo: Vec<Block> = cfg.reverse_postorder().to_vec();
        let reachable: HashSet<Block> = rpo.iter().copied().collect();
        for &b in &old.layout {
            if reachable.contains(&b) {
                let nb = self.new.make_block(old.blocks[b].name.as_deref());
                self.new.append_block(nb);
                self.new.srcmap.blocks[nb] = old.srcmap.blocks[b];
                self.new.srcmap.terms[nb] = old.srcmap.terms[b];
                self.bmap[b] = Some(nb);
            }
        }
        // Phis first (their incoming values are filled at the end).
        for &b in &rpo {
            let nb = self.bmap[b].expect("reachable");
            for phi in &old.blocks[b].phis {
                let ty = old.value_type(phi.value);
                if ty.is_slice()
                    && phi
                        .incoming
                        .iter()
                        .any(|&(_, v)| self.kind[v] == Kind::LaneSlice)
                {
                    return Err(self.fail(format!("the phi {} chooses a shadow", phi.value)));
                }
                if self.kind[phi.value] == Kind::Lanes {
                    let vs: SmallVec<[Value; 8]> = (0..self.n)
                        .map(|_| self.new.append_phi(nb, ty, &[]))
                        .collect();
                    self.name_lanes(phi.value, &vs);
                    self.lanes.insert(phi.value, vs);
                } else {
                    let v = self.new.append_phi(nb, ty, &[]);
                    self.new.values[v].name = old.values[phi.value].name.clone();
                    self.shared[phi.value] = Some(v);
                }
            }
        }
        for &b in &rpo {
            let nb = self.bmap[b].expect("reachable");
            for &inst in &old.blocks[b].insts {
                self.inst(b, nb, inst)?;
            }
        }
        for &b in &rpo {
            let nb = self.bmap[b].expect("reachable");
            let term = match old.blocks[b].term.clone() {
                Some(Terminator::Jump(t)) => Terminator::Jump(self.block(t)?),
                Some(Terminator::Br {
                    cond,
                    then_dest,
                    else_dest,
                }) => Terminator::Br {
                    cond: self.one(cond, "a branch")?,
                    then_dest: self.block(then_dest)?,
                    else_dest: self.block(else_dest)?,
                },
                Some(Terminator::Ret(vals)) => {
                    let mut out = SmallVec::new();
                    for (&v, &lanes) in vals.iter().zip(self.results) {
                        if lanes {
                            for j in 0..self.n {
                                out.push(self.lane(v, j)?);
                            }
                        } else {
                            out.push(self.one(v, "a shared result")?);
                        }
                    }
                    Terminator::Ret(out)
                }
                None => return Err(self.fail(format!("the block {b} has no terminator"))),
            };
            self.new.set_terminator(nb, term);
            for phi in &old.blocks[b].phis {
                for &(pred, v) in &phi.incoming {
                    let Some(np) = self.bmap[pred] else { continue };
                    if self.kind[phi.value] == Kind::Lanes {
                        for j in 0..self.n {
                            let target = self.lanes[&phi.value][j];
                            let x = self.lane(v, j)?;
                            self.new.add_phi_incoming(target, np, x);
                        }
                    } else {
                        let target = self.shared[phi.value].expect("made above");
                        let x = self.one(v, "a shared phi")?;
                        self.new.add_phi_incoming(target, np, x);
                    }
                }
            }
        }
        // The lanes of each value, for the JIT to pair (`Function::lane_groups`).
        let mut groups: Vec<Vec<Value>> = self
            .lanes
            .values()
            .filter(|vs| vs.len() >= 2)
            .map(|vs| vs.to_vec())
            .collect();
        groups.sort();
        self.new.lane_groups = groups;
        Ok((self.new, self.new_sig))
    }

    fn block(&self, b: Block) -> Result<Block, InternalError> {
        self.bmap[b].ok_or_else(|| self.fail(format!("a jump to the unreachable block {b}")))
    }

    /// Writes the widened `inst` (of the old block `ob`) into `nb`.
    fn inst(&mut self, ob: Block, nb: Block, inst: Inst) -> Result<(), InternalError> {
        let old = self.old;
        let d = &old.insts[inst];
        let types: SmallVec<[Type; 2]> = d.results.iter().map(|&r| old.value_type(r)).collect();
        let n = self.n;
        let is_lane_slice = |w: &Self, v: Value| w.kind[v] == Kind::LaneSlice;
        match d.opcode {
            Opcode::Len if is_lane_slice(self, d.args[0]) => {
                // The element count: len / N when N divides len, else -1.
                let s = self.one(d.args[0], "len")?;
                let k = self.new.make_const(Scalar::I64(n as i64));
                let zero = self.new.make_const(Scalar::I64(0));
                let minus = self.new.make_const(Scalar::I64(-1));
                let l = self.int_op(nb, Opcode::Len, Imm::None, &[s], Type::I64);
                let r = self.int_op(nb, Opcode::Irem, Imm::None, &[l, k], Type::I64);
                let q = self.int_op(nb, Opcode::Idiv, Imm::None, &[l, k], Type::I64);
                let ok = self.int_op(
                    nb,
                    Opcode::Icmp,
                    Imm::Cmp(CmpPred::Eq),
                    &[r, zero],
                    Type::Bool,
                );
                let c = self.int_op(nb, Opcode::Select, Imm::None, &[ok, q, minus], Type::I64);
                self.shared[d.results[0]] = Some(c);
            }
            Opcode::Load if is_lane_slice(self, d.args[0]) => {
                let s = self.one(d.args[0], "load")?;
                let mut vs = SmallVec::new();
                for j in 0..n {
                    let i = self.lane_index(ob, nb, d.args[1], j)?;
                    let ni = self.emit(nb, inst, Opcode::Load, &[s, i], &types);
                    vs.push(self.new.insts[ni].results[0]);
                }
                self.name_lanes(d.results[0], &vs);
                self.lanes.insert(d.results[0], vs);
            }
            Opcode::Store if is_lane_slice(self, d.args[0]) => {
                let s = self.one(d.args[0], "store")?;
                for j in 0..n {
                    let i = self.lane_index(ob, nb, d.args[1], j)?;
                    let x = self.lane(d.args[2], j)?;
                    self.emit(nb, inst, Opcode::Store, &[s, i, x], &[]);
                }
            }
            Opcode::Alloc if self.lane_allocs.contains(&inst) => {
                let len = self.one(d.args[0], "alloc")?;
                let k = self.new.make_const(Scalar::I64(n as i64));
                let len = self.int_op(nb, Opcode::Imul, Imm::None, &[len, k], Type::I64);
                let ni = self.emit(nb, inst, Opcode::Alloc, &[len], &types);
                let r = self.new.insts[ni].results[0];
                self.new.values[r].name = old.values[d.results[0]].name.clone();
                self.shared[d.results[0]] = Some(r);
            }
            Opcode::Call if matches!(d.imm, Imm::Func(g) if self.callees.contains_key(&g)) => {
                let Imm::Func(g) = d.imm else { unreachable!() };
                let callee = self.callees[&g];
                let roles = &callee.params;
                if roles.len() != d.args.len() {
                    return Err(self.fail(format!(
                        "a call of @{} with {} arguments for {} parameters",
                        self.module.name(g),
                        d.args.len(),
                        roles.len()
                    )));
                }
                let mut args: SmallVec<[Value; 8]> = SmallVec::new();
                for (&a, &role) in d.args.iter().zip(roles) {
                    match role {
                        ParamLanes::Scalar => {
                            for j in 0..n {
                                args.push(self.lane(a, j)?);
                            }
                        }
                        ParamLanes::Slice if is_lane_slice(self, a) => {
                            args.push(self.one(a, "call")?)
                        }
                        ParamLanes::Slice => {
                            return Err(self.fail(format!(
                                "a call of @{} passes {a}, not a shadow, for a shadow",
                                self.module.name(g)
                            )));
                        }
                        ParamLanes::Shared if is_lane_slice(self, a) => {
                            return Err(self.fail(format!(
                                "a call of @{} passes the shadow {a} for a primal slice",
                                self.module.name(g)
                            )));
                        }
                        ParamLanes::Shared => args.push(self.one(a, "call")?),
                    }
                }
                let rtypes: SmallVec<[Type; 4]> = types
                    .iter()
                    .zip(&callee.results)
                    .flat_map(|(&t, &lanes)| core::iter::repeat_n(t, if lanes { n } else { 1 }))
                    .collect();
                let ni = self.emit(nb, inst, Opcode::Call, &args, &rtypes);
                let outs = self.new.insts[ni].results.clone();
                let mut at = 0;
                for (&r, &lanes) in d.results.iter().zip(&callee.results) {
                    if lanes {
                        let vs: SmallVec<[Value; 8]> = outs[at..at + n].iter().copied().collect();
                        self.name_lanes(r, &vs);
                        self.lanes.insert(r, vs);
                        at += n;
                    } else {
                        self.new.values[outs[at]].name = old.values[r].name.clone();
                        self.shared[r] = Some(outs[at]);
                        at += 1;
                    }
                }
            }
            op => {
                let any_lane = d.args.iter().any(|&a| self.kind[a] == Kind::Lanes);
                if let Some(&a) = d.args.iter().find(|&&a| is_lane_slice(self, a)) {
                    return Err(self.fail(format!(
                        "`{op}` reads the shadow {a}, which only loads, stores, len and derived pullbacks may"
                    )));
                }
                if any_lane {
                    if matches!(
                        op,
                        Opcode::Push
                            | Opcode::Pop
                            | Opcode::TapeAlloc
                            | Opcode::TapeView
                            | Opcode::Alloc
                            | Opcode::Store
                            | Opcode::Load
                    ) {
                        return Err(self.fail(format!("`{op}` reads a value by lane")));
                    }
                    let mut per_result: SmallVec<[SmallVec<[Value; 8]>; 2]> =
                        d.results.iter().map(|_| SmallVec::new()).collect();
                    for j in 0..n {
                        let mut args: SmallVec<[Value; 4]> = SmallVec::new();
                        for &a in &d.args {
                            args.push(self.lane(a, j)?);
                        }
                        let ni = self.emit(nb, inst, op, &args, &types);
                        for (k, &r) in self.new.insts[ni].results.iter().enumerate() {
                            per_result[k].push(r);
                        }
                    }
                    for (&r, vs) in d.results.iter().zip(per_result) {
                        self.name_lanes(r, &vs);
                        self.lanes.insert(r, vs);
                    }
                } else {
                    let mut args: SmallVec<[Value; 4]> = SmallVec::new();
                    for &a in &d.args {
                        args.push(self.one(a, "a shared statement")?);
                    }
                    let ni = self.emit(nb, inst, op, &args, &types);
                    for (k, &r) in d.results.iter().enumerate() {
                        let nr = self.new.insts[ni].results[k];
                        self.new.values[nr].name = old.values[r].name.clone();
                        self.shared[r] = Some(nr);
                    }
                }
            }
        }
        Ok(())
    }
}
