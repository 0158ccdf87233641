//! Activity analysis: which values of a function get derivative code.
//!
//! Two passes over the data flow, before any code is emitted (Enzyme's activity
//! analysis, with memory and calls):
//!
//! - *varied*: the value depends on an active input. The inputs are the `active`
//!   float parameters and the contents of `dup`/`dupnoneed` slices. Forward through
//!   every operand a derivative flows to (the [rule table](crate::rules) says which:
//!   not the condition of `select`, not through `floor` or a comparison), through
//!   phis, from a slice to what is loaded from it, from a stored value to the buffer
//!   it is stored into, and through calls: a call with a varied argument has varied
//!   float results and may write varied values into its `mut` float slice arguments
//!   (a `nodiff` callee varies nothing; a `vjp` callee's results vary with its float
//!   arguments).
//! - *useful*: the value reaches an active output: a float result (when the return
//!   is `active`) or the final contents of a `dup` slice. Backward from those,
//!   through the same operands and phis, from a load to its slice, from a useful
//!   slice to the values stored into it, and through calls: a call with a useful
//!   float result or a useful slice argument makes all its float arguments useful.
//!
//! A float scalar is *active* when it is both: only active values get a cotangent
//! variable and reverse code. A float slice that is both has a *shadow*: `dup`
//! parameters always, an `alloc` buffer when varied values are stored into it and
//! what is loaded from it is useful. Every other cotangent is statically zero and
//! never materialised (JAX's symbolic zero). `const` parameters, integers and bools
//! are never active.
//!
//! A `const` slice parameter into which varied values may be stored is recorded
//! ([`ActivityInfo::const_writes`]): the derivative of what is stored there is lost,
//! and the derivation refuses the request if the slice is read back.
//!
//! Only blocks reachable from the entry are looked at. Both passes are worklists over
//! use lists, linear in the size of the function, with no recursion. The analysis
//! assumes float slices come only from parameters and `alloc` (the derivation
//! refuses float slices chosen by a phi or a `select`).

use cranelift_entity::{EntitySet, SecondaryMap};
use gradlift_ir::{Block, FuncId, Function, Inst, Module, Opcode, Terminator, Value, ValueDef};
use hashbrown::HashSet;
use smallvec::SmallVec;

use crate::callee::Callee;
use crate::config::{Activity, RetActivity, RuleConfig};
use crate::rules::{OpRule, op_rule};

/// A place where a value is used.
#[derive(Copy, Clone, Debug)]
enum Use {
    /// As an incoming value of the phi defining this value.
    Phi(Value),
    /// As operand `.1` of this instruction.
    Operand(Inst, usize),
}

/// The result of the analysis: the varied and the useful values of one function
/// under one [`RuleConfig`].
#[derive(Clone, Debug, Default)]
pub(crate) struct ActivityInfo {
    varied: EntitySet<Value>,
    useful: EntitySet<Value>,
    const_writes: Vec<(Value, Inst)>,
}

impl ActivityInfo {
    /// Analyses `func` of `module` under `config`, looking only at the blocks
    /// `reachable` holds. The configuration must have been checked against the
    /// signature (`active` only on float scalars, `dup` only on float slices).
    pub(crate) fn analyse(
        module: &Module,
        func: &Function,
        reachable: &EntitySet<Block>,
        config: &RuleConfig,
    ) -> ActivityInfo {
        ActivityInfo::analyse_derived(module, func, reachable, config, &HashSet::new())
    }

    /// [`ActivityInfo::analyse`] where the calls of the functions of `summaries`
    /// (the loop functions of checkpointed loops) are known in detail: result `r`
    /// depends on the arguments `summaries[g][r]` only, and the callee writes no
    /// slice. So a value from outside a checkpointed loop is active exactly when
    /// it is in the loop written out.
    pub(crate) fn analyse_with(
        module: &Module,
        func: &Function,
        reachable: &EntitySet<Block>,
        config: &RuleConfig,
        summaries: &Summaries,
    ) -> ActivityInfo {
        ActivityInfo::run(module, func, reachable, config, &HashSet::new(), summaries)
    }

    /// [`ActivityInfo::analyse`] for derived code, which only forward mode
    /// differentiates: a call of one of `tape_funcs` (the functions that push or
    /// pop, themselves or through their callees) talks to another pass through the
    /// tape, so its arguments are useful and its results and `mut` slices vary,
    /// whatever the rest of the function does with them.
    pub(crate) fn analyse_derived(
        module: &Module,
        func: &Function,
        reachable: &EntitySet<Block>,
        config: &RuleConfig,
        tape_funcs: &HashSet<FuncId>,
    ) -> ActivityInfo {
        ActivityInfo::run(
            module,
            func,
            reachable,
            config,
            tape_funcs,
            &Summaries::new(),
        )
    }

    fn run(
        module: &Module,
        func: &Function,
        reachable: &EntitySet<Block>,
        config: &RuleConfig,
        tape_funcs: &HashSet<FuncId>,
        summaries: &Summaries,
    ) -> ActivityInfo {
        let mut users: SecondaryMap<Value, SmallVec<[Use; 2]>> = SecondaryMap::new();
        for &b in func.layout.iter().filter(|&&b| reachable.contains(b)) {
            let data = &func.blocks[b];
            for phi in &data.phis {
                for &(pred, v) in &phi.incoming {
                    if reachable.contains(pred) {
                        users[v].push(Use::Phi(phi.value));
                    }
                }
            }
            for &inst in &data.insts {
                for (k, &a) in func.insts[inst].args.iter().enumerate() {
                    users[a].push(Use::Operand(inst, k));
                }
            }
        }
        let mut info = ActivityInfo::default();
        let mut a = Analysis {
            module,
            func,
            config,
            tape_funcs,
            summaries,
            users: &users,
            info: &mut info,
            work: Vec::new(),
        };
        a.find_varied(reachable);
        a.find_useful(reachable);
        info
    }

    /// Whether `v` is a float scalar that gets a cotangent: varied and useful.
    pub(crate) fn is_active(&self, v: Value, func: &Function) -> bool {
        func.value_type(v).is_float() && self.varied.contains(v) && self.useful.contains(v)
    }

    /// Whether `s` is a float slice with a shadow: varied and useful.
    pub(crate) fn has_shadow(&self, s: Value, func: &Function) -> bool {
        let ty = func.value_type(s);
        ty.is_slice()
            && ty.is_differentiable()
            && self.varied.contains(s)
            && self.useful.contains(s)
    }

    /// The `const` slice parameters into which varied values may be stored, with
    /// each instruction that may store them (a `store` or a `call`): one pair per
    /// instruction, since whether the slice is read back afterwards is judged per
    /// writing instruction (a call that writes does not read back its own write).
    pub(crate) fn const_writes(&self) -> &[(Value, Inst)] {
        &self.const_writes
    }
}

/// Per function, per result, the arguments (by index) the result depends on
/// (see [`ActivityInfo::analyse_with`]).
pub(crate) type Summaries = hashbrown::HashMap<FuncId, Vec<Vec<usize>>>;

/// The state of one analysis.
struct Analysis<'a> {
    module: &'a Module,
    func: &'a Function,
    config: &'a RuleConfig,
    tape_funcs: &'a HashSet<FuncId>,
    summaries: &'a Summaries,
    users: &'a SecondaryMap<Value, SmallVec<[Use; 2]>>,
    info: &'a mut ActivityInfo,
    work: Vec<Value>,
}

impl Analysis<'_> {
    /// Whether `v` can carry a derivative: a float scalar or float slice, not a
    /// constant.
    fn carries(&self, v: Value) -> bool {
        let d = &self.func.values[v];
        d.ty.is_differentiable() && !matches!(d.def, ValueDef::Const(_))
    }

    /// Whether `s` is a `const` slice parameter.
    fn is_const_param(&self, s: Value) -> bool {
        match self.func.value_def(s) {
            ValueDef::Param(i) => self.config.params.get(i as usize) == Some(&Activity::Const),
            _ => false,
        }
    }

    fn vary(&mut self, v: Value) {
        if self.carries(v) && self.info.varied.insert(v) {
            self.work.push(v);
        }
    }

    /// Varied values may be written into the slice `s` by `inst`.
    fn vary_memory(&mut self, s: Value, inst: Inst) {
        if !self.carries(s) {
            return;
        }
        if self.is_const_param(s) {
            // Every writing instruction, not only the first met: a store followed by
            // a call that reads the slice and may write it too is refused for the
            // store even when the call is met first.
            if !self.info.const_writes.contains(&(s, inst)) {
                self.info.const_writes.push((s, inst));
            }
            return;
        }
        self.vary(s);
    }

    fn find_varied(&mut self, reachable: &EntitySet<Block>) {
        let func = self.func;
        for (&p, &a) in func.params.iter().zip(&self.config.params) {
            match a {
                Activity::Active | Activity::Dup | Activity::DupNoNeed => self.vary(p),
                Activity::Const => {}
            }
        }
        // In derived code (which only forward mode differentiates), what comes off
        // the tape may depend on the inputs of the pass that put it there: a popped
        // float and a tape buffer's view vary.
        for (b, inst) in func.placed_insts() {
            let d = &func.insts[inst];
            if !reachable.contains(b) {
                continue;
            }
            if matches!(d.opcode, Opcode::Pop | Opcode::TapeView) {
                for &r in &d.results {
                    self.vary(r);
                }
            }
            if let gradlift_ir::Imm::Func(g) = d.imm
                && d.opcode == Opcode::Call
                && self.tape_funcs.contains(&g)
            {
                for &r in &d.results {
                    self.vary(r);
                }
                for &a in &d.args {
                    if func.value_type(a).is_mut_slice() {
                        self.vary_memory(a, inst);
                    }
                }
            }
        }
        while let Some(v) = self.work.pop() {
            for &u in self.users[v].iter() {
                match u {
                    Use::Phi(p) => self.vary(p),
                    Use::Operand(inst, k) => self.vary_use(inst, k),
                }
            }
        }
    }

    /// Operand `k` of `inst` became varied.
    fn vary_use(&mut self, inst: Inst, k: usize) {
        let d = &self.func.insts[inst];
        match d.opcode {
            Opcode::Load if k == 0 => self.vary(d.results[0]),
            Opcode::Store if k == 2 => self.vary_memory(d.args[0], inst),
            Opcode::Call => {
                let gradlift_ir::Imm::Func(g) = d.imm else {
                    return;
                };
                if let Some(deps) = self.summaries.get(&g) {
                    for (r, on) in deps.iter().enumerate() {
                        if on.contains(&k)
                            && let Some(&v) = d.results.get(r)
                        {
                            self.vary(v);
                        }
                    }
                    return;
                }
                match Callee::of(self.module, g) {
                    Callee::Nodiff => {}
                    Callee::Vjp(_) => {
                        for &r in &d.results {
                            self.vary(r);
                        }
                    }
                    Callee::Body(_) | Callee::Custom(_) | Callee::Overlay(..) | Callee::Extern => {
                        for &r in &d.results {
                            self.vary(r);
                        }
                        // The callee writes only through its `mut` parameters (a
                        // `mut` slice passed for a read-only one is only read).
                        let params = &self.module.sig(g).params;
                        for (k, &a) in d.args.iter().enumerate() {
                            if self.func.value_type(a).is_mut_slice()
                                && params.get(k).is_none_or(|t| t.is_mut_slice())
                            {
                                self.vary_memory(a, inst);
                            }
                        }
                    }
                }
            }
            op => {
                if let OpRule::Float(rule) = op_rule(op)
                    && rule.operands.get(k).is_some_and(|o| o.is_some())
                    && let Some(&r) = d.results.first()
                {
                    self.vary(r);
                }
            }
        }
    }

    fn use_(&mut self, v: Value) {
        if self.carries(v) && self.info.useful.insert(v) {
            self.work.push(v);
        }
    }

    fn find_useful(&mut self, reachable: &EntitySet<Block>) {
        let func = self.func;
        for (&p, &a) in func.params.iter().zip(&self.config.params) {
            if matches!(a, Activity::Dup | Activity::DupNoNeed) {
                self.use_(p);
            }
        }
        // In derived code, what goes onto the tape, and what a tape buffer holds,
        // may be read by another pass: useful.
        for (b, inst) in func.placed_insts() {
            let d = &func.insts[inst];
            if !reachable.contains(b) {
                continue;
            }
            match d.opcode {
                Opcode::Push => self.use_(d.args[0]),
                Opcode::TapeView => self.use_(d.results[0]),
                Opcode::Call => {
                    if let gradlift_ir::Imm::Func(g) = d.imm
                        && self.tape_funcs.contains(&g)
                    {
                        for &a in &d.args {
                            self.use_(a);
                        }
                    }
                }
                _ => {}
            }
        }
        if self.config.ret == RetActivity::Active {
            for &b in func.layout.iter().filter(|&&b| reachable.contains(b)) {
                if let Some(Terminator::Ret(vals)) = &func.blocks[b].term {
                    for (j, &v) in vals.iter().enumerate() {
                        if func.value_type(v).is_float() && self.config.is_seeded(j) {
                            self.use_(v);
                        }
                    }
                }
            }
        }
        while let Some(v) = self.work.pop() {
            match func.value_def(v) {
                ValueDef::Phi(b) => {
                    if let Some(phi) = func.blocks[b].phis.iter().find(|p| p.value == v) {
                        for &(pred, a) in &phi.incoming {
                            if reachable.contains(pred) {
                                self.use_(a);
                            }
                        }
                    }
                }
                ValueDef::Result(inst, k) => self.use_def(inst, k as usize),
                ValueDef::Param(_) | ValueDef::Const(_) => {}
            }
            if func.value_type(v).is_slice() {
                // What is read from the slice is useful: so is what is written into it.
                for &u in self.users[v].iter() {
                    let Use::Operand(inst, k) = u else { continue };
                    let d = &func.insts[inst];
                    match d.opcode {
                        Opcode::Store if k == 0 => self.use_(d.args[2]),
                        Opcode::Call if !self.summarised(inst) => self.use_call_args(inst),
                        _ => {}
                    }
                }
            }
        }
    }

    /// Whether `inst` calls a function of the summaries.
    fn summarised(&self, inst: Inst) -> bool {
        matches!(self.func.insts[inst].imm, gradlift_ir::Imm::Func(g) if self.summaries.contains_key(&g))
    }

    /// Result `r` of `inst` became useful.
    fn use_def(&mut self, inst: Inst, r: usize) {
        let d = &self.func.insts[inst];
        match d.opcode {
            Opcode::Load => self.use_(d.args[0]),
            Opcode::Call => {
                if let gradlift_ir::Imm::Func(g) = d.imm
                    && let Some(deps) = self.summaries.get(&g)
                {
                    for &k in deps.get(r).map_or(&[][..], |v| &v[..]) {
                        if let Some(&a) = d.args.get(k) {
                            self.use_(a);
                        }
                    }
                } else {
                    self.use_call_args(inst);
                }
            }
            op => {
                if let OpRule::Float(rule) = op_rule(op) {
                    for (k, &a) in d.args.iter().enumerate() {
                        if rule.operands.get(k).is_some_and(|o| o.is_some()) {
                            self.use_(a);
                        }
                    }
                }
            }
        }
    }

    /// A call's output (a result or a slice argument) became useful: its float
    /// arguments are.
    fn use_call_args(&mut self, inst: Inst) {
        let d = &self.func.insts[inst];
        let gradlift_ir::Imm::Func(g) = d.imm else {
            return;
        };
        if matches!(Callee::of(self.module, g), Callee::Nodiff) {
            return;
        }
        for &a in &d.args {
            self.use_(a);
        }
    }
}
