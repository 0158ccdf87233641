//! Mutable variables to SSA while a function is being built: the phi placement behind
//! [`FunctionBuilder`](crate::FunctionBuilder)'s
//! [`declare_var`](crate::FunctionBuilder::declare_var),
//! [`def_var`](crate::FunctionBuilder::def_var) and
//! [`use_var`](crate::FunctionBuilder::use_var).
//!
//! A frontend (the tracer, the derivation pass) writes code as if the IR had mutable
//! [`Variable`]s: it *defines* a variable in the current block and *uses* it later,
//! anywhere. The builder turns each use into the SSA value that reaches it, placing
//! phis where definitions meet, so that no frontend needs dominance or a CFG analysis.
//! The algorithm is Braun M., Buchwald S., Hack S., Leißa R., Mallon C., Zwinkau A.,
//! "Simple and Efficient Construction of Static Single Assignment Form", Compiler
//! Construction (CC) 2013, LNCS 7791, as in Cranelift's
//! `cranelift-frontend/src/ssa.rs`, written for gradlift's phis (entries of
//! [`BlockData::phis`](crate::BlockData::phis) with one edge named by each predecessor
//! block) rather than block parameters. This module holds [`Variable`] and the
//! builder's private `SsaBuilder`; the API is on
//! [`FunctionBuilder`](crate::FunctionBuilder).
//!
//! # Filled and sealed blocks
//!
//! A block is *filled* once it has its terminator: only then does it become a
//! predecessor of the blocks it jumps to (so `br %c, b, b` adds one predecessor, as in
//! the [verifier](mod@crate::verify)). A block is *sealed*
//! ([`seal_block`](crate::FunctionBuilder::seal_block)) when the frontend says that all
//! its predecessors are known. Reading a variable in a sealed block with one
//! predecessor asks that predecessor; in a sealed block with several, it places a phi
//! and asks every predecessor; in a block not yet sealed, it places an *incomplete*
//! phi, whose edges are filled in when the block is sealed. Jumping to a sealed block
//! is an error. The entry block is sealed from the start (the verifier forbids edges
//! into it), and [`finish`](crate::FunctionBuilder::finish) seals every block still
//! open, which is always correct because no edge can be added after it: sealing early
//! only saves work and phis that would be removed again. (Cranelift instead requires
//! every block to be sealed by hand.)
//!
//! # Trivial phis
//!
//! A phi whose edges all carry one value `v` (or the phi itself) is *trivial* (Braun's
//! `tryRemoveTrivialPhi`): it is replaced by `v` and the phis that used it are examined
//! again, since they may have become trivial in turn. Replacement is by *alias*: the
//! phi is recorded as standing for `v` (a union-find forest with path compression),
//! every lookup and every value handed out resolves aliases, and `finish` rewrites the
//! whole function once (instruction operands, phi edges, terminators) and takes the
//! replaced phis out of their blocks. A replaced phi's value stays in the arena, unused
//! and unnamed; nothing is renumbered. Until `finish`,
//! [`FunctionBuilder::func`](crate::FunctionBuilder::func) may still show replaced phis
//! and uses of them (for example in instructions built from a value that `use_var`
//! returned before the phi was found trivial); the finished function never does. Only
//! phis placed for variables are ever removed: phis made with the explicit phi API are
//! the frontend's own.
//!
//! # Undefined variables
//!
//! A use is an error, naming the variable, when a path with no definition on it
//! reaches it from a block without predecessors: from the entry (the variable is read
//! before it is defined), or from a block that nothing jumps to (unreachable code is
//! checked like the rest). So is a use reached from a cycle that no edge enters and
//! that never defines the variable. The phi placed for it stays as a placeholder and
//! `finish` fails. A cycle that no edge enters but that *does* define the variable
//! reads that definition around the cycle, which then uses itself (`%1 = fadd %1,
//! %0`), as in Cranelift: such code never runs, and it verifies, since the verifier
//! checks no dominance in unreachable code.
//!
//! # Cost
//!
//! Nothing recurses: the paper's "read the variable in every predecessor" step is a
//! state machine over an explicit call stack, and chains of single-predecessor blocks
//! are walked by a loop. Each lookup caches its answer in every block it walked
//! through, so each (variable, block) pair is searched at most once, and a use after a
//! chain of `n` blocks costs `O(n)` once and `O(1)` after. A phi's removal costs its
//! number of edges plus one re-examination per phi that used it (users are tracked per
//! placed phi, and move to the replacement), as in the paper. The final rewrite in
//! `finish` is linear in the size of the function (times the inverse Ackermann factor
//! of path compression), and skipped when no phi was removed. `seal_all_blocks` looks
//! at every block, so it belongs at the end, not in a loop. Definitions are kept in a
//! hash map keyed by (variable, block), so memory grows with the definitions made and
//! cached, not with variables × blocks.

use cranelift_entity::packed_option::PackedOption;
use cranelift_entity::{EntityRef, PrimaryMap, SecondaryMap, entity_impl};
use hashbrown::HashMap;
use smallvec::SmallVec;

use crate::entities::{Block, Value};
use crate::function::{Function, Phi, Terminator};
use crate::types::Type;

/// A mutable variable of the frontend, turned into SSA values by the builder.
///
/// Made by [`FunctionBuilder::declare_var`](crate::FunctionBuilder::declare_var); it
/// prints as `var0`, `var1`, ... in error messages and is meaningful only to the
/// builder that made it.
#[derive(Copy, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Variable(u32);
entity_impl!(Variable, "var");

/// A declared variable: its type, and the name its phis get.
#[derive(Clone, Debug)]
struct VarData {
    ty: Type,
    name: Option<Box<str>>,
}

/// What the SSA construction knows about a block.
#[derive(Clone, Debug, Default)]
struct SsaBlock {
    /// The predecessors declared so far, each once, in the order their edges were made.
    preds: SmallVec<[Block; 2]>,
    /// Whether all predecessors are known.
    sealed: bool,
    /// Phis placed while the block was not sealed, waiting for their edges.
    incomplete: Vec<(Variable, Value)>,
    /// The walk that last visited this block (see [`SsaBuilder::find_var`]).
    visited: u32,
}

/// A phi placed by the SSA construction.
#[derive(Clone, Debug)]
struct VarPhi {
    /// The variable it merges.
    var: Variable,
    /// Its block.
    block: Block,
    /// Its index in the block's phis (the builder only ever appends phis, and removes
    /// none before [`SsaBuilder::finish`], so the index does not change).
    slot: u32,
    /// Phis placed here that have this one among their incoming values (possibly with
    /// repeats, and phis since replaced): the ones to examine again if it is replaced.
    users: SmallVec<[Value; 2]>,
}

/// A step of the lookup state machine (the paper's recursion, made iterative).
#[derive(Copy, Clone, Debug)]
enum Call {
    /// Find the variable's value at the end of this block; push it on `results`.
    UseVar(Block),
    /// The values at the ends of every predecessor of `.1` are the last entries of
    /// `results`: give them to the phi `.0` as its edges, try to remove it, and push
    /// the value that stands for it.
    FinishPhi(Value, Block),
}

/// The state of SSA construction for one function. See the module docs.
///
/// It edits the function it is handed and reports mistakes through an error slot
/// (the builder's first-error-wins rule): every method takes both. It never panics on
/// a block or value of the function; variables are checked by the builder.
#[derive(Clone, Debug, Default)]
pub(crate) struct SsaBuilder {
    vars: PrimaryMap<Variable, VarData>,
    /// The current definition of a variable at the end of a block (possibly a phi that
    /// has since been replaced: read through [`SsaBuilder::resolve`]).
    defs: HashMap<(Variable, Block), Value>,
    blocks: SecondaryMap<Block, SsaBlock>,
    phis: HashMap<Value, VarPhi>,
    /// Replaced phis: what each stands for (possibly another replaced phi).
    alias: SecondaryMap<Value, PackedOption<Value>>,
    /// How many phis were replaced.
    removed: usize,
    /// The state machine's call stack.
    calls: Vec<Call>,
    /// The state machine's result stack.
    results: Vec<Value>,
    /// Phis to examine for triviality.
    retry: Vec<Value>,
    /// The number of the current single-predecessor walk.
    epoch: u32,
}

/// Records `message` unless an earlier mistake was recorded.
fn record(error: &mut Option<String>, message: impl FnOnce() -> String) {
    if error.is_none() {
        *error = Some(message());
    }
}

/// `block3` as in the builder's other messages, followed by the block's name if any.
pub(crate) fn describe_block(func: &Function, block: Block) -> String {
    match func.blocks.get(block).and_then(|d| d.name.as_deref()) {
        Some(name) => format!("{block} (`{name}`)"),
        None => block.to_string(),
    }
}

impl SsaBuilder {
    /// The state for a function whose entry block is `entry` (sealed from the start).
    pub(crate) fn new(entry: Block) -> SsaBuilder {
        let mut ssa = SsaBuilder::default();
        ssa.blocks[entry].sealed = true;
        ssa
    }

    /// A new variable of type `ty`; its phis are named `name`.
    pub(crate) fn declare_var(&mut self, ty: Type, name: Option<&str>) -> Variable {
        self.vars.push(VarData {
            ty,
            name: name.map(Into::into),
        })
    }

    /// The type of `var`, if it was declared.
    pub(crate) fn var_type(&self, var: Variable) -> Option<Type> {
        self.vars.get(var).map(|d| d.ty)
    }

    /// `var0`, or `var0 (`x`)` for a named variable.
    pub(crate) fn describe_var(&self, var: Variable) -> String {
        match self.vars.get(var).and_then(|d| d.name.as_deref()) {
            Some(name) => format!("{var} (`{name}`)"),
            None => var.to_string(),
        }
    }

    /// Whether `block` has been sealed.
    pub(crate) fn is_sealed(&self, block: Block) -> bool {
        self.blocks.get(block).is_some_and(|b| b.sealed)
    }

    /// The predecessors of `block` declared so far.
    pub(crate) fn preds(&self, block: Block) -> &[Block] {
        self.blocks.get(block).map_or(&[], |b| &b.preds)
    }

    /// Records that `var` holds `value` at the end of `block` so far. The caller
    /// checks the variable, the value's type, and that `block` is not yet filled.
    pub(crate) fn def_var(&mut self, var: Variable, block: Block, value: Value) {
        self.defs.insert((var, block), value);
    }

    /// Declares the edge `from -> to`; each edge once (the builder drops the repeat
    /// in `br %c, b, b`). An edge into a sealed block is an error, and not added.
    pub(crate) fn declare_edge(
        &mut self,
        func: &Function,
        from: Block,
        to: Block,
        error: &mut Option<String>,
    ) {
        if self.blocks[to].sealed {
            record(error, || {
                format!(
                    "{} jumps to {}, which is sealed (all its predecessors were declared)",
                    describe_block(func, from),
                    describe_block(func, to)
                )
            });
            return;
        }
        self.blocks[to].preds.push(from);
    }

    /// What `v` stands for: itself, or the value a chain of replaced phis leads to.
    pub(crate) fn resolve(&mut self, v: Value) -> Value {
        let mut root = v;
        while let Some(next) = self.alias[root].expand() {
            root = next;
        }
        let mut cur = v;
        while let Some(next) = self.alias[cur].expand() {
            if next != root {
                self.alias[cur] = root.into();
            }
            cur = next;
        }
        root
    }

    /// The value of the declared variable `var` at the current end of `block`, placing
    /// phis as needed.
    pub(crate) fn use_var(
        &mut self,
        func: &mut Function,
        var: Variable,
        block: Block,
        error: &mut Option<String>,
    ) -> Value {
        if let Some(&v) = self.defs.get(&(var, block)) {
            return self.resolve(v);
        }
        debug_assert!(self.calls.is_empty() && self.results.is_empty());
        self.use_var_nonlocal(func, var, block);
        let v = self.run(func, var, error);
        self.resolve(v)
    }

    /// Starts looking `var` up at the end of `block`: pushes the answer on `results`,
    /// or schedules the calls that will.
    fn use_var_nonlocal(&mut self, func: &mut Function, var: Variable, block: Block) {
        if let Some(&v) = self.defs.get(&(var, block)) {
            self.results.push(v);
            return;
        }
        let (val, from) = self.find_var(func, var, block);
        // Every block from `block` back to `from` has one predecessor and no
        // definition (and, being filled, will get none), so `val` is its definition.
        let mut b = block;
        while b != from {
            self.defs.insert((var, b), val);
            match self.single_pred(b) {
                Some(p) => b = p,
                None => break,
            }
        }
    }

    /// The predecessor of `block` if it is sealed with exactly one.
    fn single_pred(&self, block: Block) -> Option<Block> {
        let b = self.blocks.get(block)?;
        match b.preds.as_slice() {
            [p] if b.sealed => Some(*p),
            _ => None,
        }
    }

    /// Follows single predecessors from `block` to the nearest definition of `var`,
    /// or places a phi where the chain ends (a block with several predecessors, or not
    /// sealed, or where the chain closes into a cycle). Returns the value and the block
    /// it is defined in; pushes the value on `results` or schedules the calls that will
    /// complete the phi.
    fn find_var(&mut self, func: &mut Function, var: Variable, mut block: Block) -> (Value, Block) {
        self.epoch = self.epoch.wrapping_add(1);
        if self.epoch == 0 {
            for b in self.blocks.values_mut() {
                b.visited = 0;
            }
            self.epoch = 1;
        }
        while let Some(pred) = self.single_pred(block) {
            if self.blocks[block].visited == self.epoch {
                break;
            }
            self.blocks[block].visited = self.epoch;
            block = pred;
            if let Some(&v) = self.defs.get(&(var, block)) {
                self.results.push(v);
                return (v, block);
            }
        }
        let phi = self.make_phi(func, var, block);
        self.defs.insert((var, block), phi);
        if self.blocks[block].sealed {
            self.begin_phi(phi, block);
        } else {
            self.blocks[block].incomplete.push((var, phi));
            self.results.push(phi);
        }
        (phi, block)
    }

    /// Appends a phi for `var` to `block`, with no edges yet.
    fn make_phi(&mut self, func: &mut Function, var: Variable, block: Block) -> Value {
        let data = &self.vars[var];
        let slot = func.blocks[block].phis.len() as u32;
        let phi = func.append_phi(block, data.ty, &[]);
        if let Some(name) = &data.name {
            func.set_value_name(phi, name);
        }
        self.phis.insert(
            phi,
            VarPhi {
                var,
                block,
                slot,
                users: SmallVec::new(),
            },
        );
        phi
    }

    /// Schedules the lookups that give `phi` (in the sealed `block`) its edges.
    fn begin_phi(&mut self, phi: Value, block: Block) {
        self.calls.push(Call::FinishPhi(phi, block));
        let preds = &self.blocks[block].preds;
        self.calls
            .extend(preds.iter().rev().map(|&p| Call::UseVar(p)));
    }

    /// Runs the state machine until the calls scheduled for one lookup of `var` are
    /// done; returns its answer.
    fn run(&mut self, func: &mut Function, var: Variable, error: &mut Option<String>) -> Value {
        while let Some(call) = self.calls.pop() {
            match call {
                Call::UseVar(block) => self.use_var_nonlocal(func, var, block),
                Call::FinishPhi(phi, block) => {
                    let v = self.finish_phi(func, phi, block, error);
                    self.results.push(v);
                }
            }
        }
        debug_assert_eq!(self.results.len(), 1);
        let v = self.results.pop();
        self.results.clear();
        match v {
            Some(v) => v,
            None => {
                // Unreachable: every lookup leaves exactly one answer. Keep going with
                // the variable's phi-to-be so that nothing panics.
                record(error, || "internal error: SSA lookup gave no value".into());
                func.make_const(crate::types::Scalar::F64(0.0))
            }
        }
    }

    /// Gives `phi` the values on top of `results` as its edges (one per predecessor of
    /// `block`, in order), then removes it if it is trivial. Returns what stands for it.
    fn finish_phi(
        &mut self,
        func: &mut Function,
        phi: Value,
        block: Block,
        error: &mut Option<String>,
    ) -> Value {
        let n = self.blocks[block].preds.len();
        let start = self.results.len().saturating_sub(n);
        let mut incoming: SmallVec<[(Block, Value); 2]> = SmallVec::with_capacity(n);
        for i in 0..n {
            let pred = self.blocks[block].preds[i];
            let v = self.results.get(start + i).copied().unwrap_or(phi);
            incoming.push((pred, self.resolve(v)));
        }
        self.results.truncate(start);
        for &(_, v) in &incoming {
            if v != phi
                && let Some(used) = self.phis.get_mut(&v)
                && used.users.last() != Some(&phi)
            {
                used.users.push(phi);
            }
        }
        if let Some(p) = self.phi_mut(func, phi) {
            p.incoming = incoming;
        }
        self.try_remove_trivial(func, phi, error)
    }

    /// The phi placed here that defines `phi`, in its block.
    fn phi_mut<'f>(&self, func: &'f mut Function, phi: Value) -> Option<&'f mut Phi> {
        let info = self.phis.get(&phi)?;
        let p = func
            .blocks
            .get_mut(info.block)?
            .phis
            .get_mut(info.slot as usize)?;
        (p.value == phi).then_some(p)
    }

    /// Braun's `tryRemoveTrivialPhi`, with a work list instead of recursion: replaces
    /// `phi` if trivial, then examines again the phis that used it. Returns what
    /// stands for `phi` afterwards.
    fn try_remove_trivial(
        &mut self,
        func: &mut Function,
        phi: Value,
        error: &mut Option<String>,
    ) -> Value {
        self.retry.push(phi);
        while let Some(p) = self.retry.pop() {
            if self.alias[p].is_some() {
                continue;
            }
            let Some(info) = self.phis.get(&p) else {
                continue;
            };
            let (var, block, slot) = (info.var, info.block, info.slot as usize);
            let Some(data) = func.blocks[block].phis.get(slot).filter(|d| d.value == p) else {
                continue;
            };
            // The one value other than `p` itself that the edges carry, if there is one.
            let mut same = None;
            let mut trivial = true;
            for &(_, v) in &data.incoming {
                let v = self.resolve(v);
                if v == p || Some(v) == same {
                    continue;
                }
                if same.is_some() {
                    trivial = false;
                    break;
                }
                same = Some(v);
            }
            if !trivial {
                continue;
            }
            let Some(same) = same else {
                let why = if data.incoming.is_empty() {
                    "which has no predecessors"
                } else {
                    "from a cycle that no definition enters"
                };
                let var = self.describe_var(var);
                let block = describe_block(func, block);
                record(error, || {
                    format!(
                        "{var} is used where it may be undefined: no definition of it \
                         reaches {block}, {why}"
                    )
                });
                continue;
            };
            self.alias[p] = same.into();
            self.removed += 1;
            let users = match self.phis.get_mut(&p) {
                Some(info) => core::mem::take(&mut info.users),
                None => SmallVec::new(),
            };
            self.retry.extend(users.iter().copied().filter(|&u| u != p));
            if let Some(target) = self.phis.get_mut(&same) {
                target.users.extend(users);
            }
        }
        self.resolve(phi)
    }

    /// Seals `block`: its predecessors are all known, so its incomplete phis get their
    /// edges. Does nothing if it is sealed already.
    pub(crate) fn seal_block(
        &mut self,
        func: &mut Function,
        block: Block,
        error: &mut Option<String>,
    ) {
        if self.blocks[block].sealed {
            return;
        }
        self.blocks[block].sealed = true;
        let incomplete = core::mem::take(&mut self.blocks[block].incomplete);
        for (var, phi) in incomplete {
            debug_assert!(self.calls.is_empty() && self.results.is_empty());
            self.begin_phi(phi, block);
            self.run(func, var, error);
        }
    }

    /// Seals every block of `func`.
    pub(crate) fn seal_all_blocks(&mut self, func: &mut Function, error: &mut Option<String>) {
        for i in 0..func.blocks.len() {
            self.seal_block(func, Block::new(i), error);
        }
    }

    /// Seals every block, then replaces every use of a replaced phi by what it stands
    /// for and takes the replaced phis out of their blocks.
    pub(crate) fn finish(&mut self, func: &mut Function, error: &mut Option<String>) {
        self.seal_all_blocks(func, error);
        if self.removed == 0 {
            return;
        }
        let Function {
            values,
            insts,
            blocks,
            ..
        } = func;
        for data in blocks.values_mut() {
            data.phis.retain(|p| {
                let replaced = self.alias[p.value].is_some();
                if replaced {
                    values[p.value].name = None;
                }
                !replaced
            });
            for p in &mut data.phis {
                for (_, v) in &mut p.incoming {
                    *v = self.resolve(*v);
                }
            }
            for &inst in &data.insts {
                if let Some(d) = insts.get_mut(inst) {
                    for a in &mut d.args {
                        *a = self.resolve(*a);
                    }
                }
            }
            match &mut data.term {
                Some(Terminator::Br { cond, .. }) => *cond = self.resolve(*cond),
                Some(Terminator::Ret(vals)) => {
                    for v in vals {
                        *v = self.resolve(*v);
                    }
                }
                Some(Terminator::Jump(_)) | None => {}
            }
        }
    }
}
