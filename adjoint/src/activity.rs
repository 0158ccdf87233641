//! Activity analysis: which values of a function get derivative code.
//!
//! Two passes over the data flow, before any code is emitted (Enzyme's activity
//! analysis, for scalars):
//!
//! - *varied*: the value depends on an `active` parameter. Forward from those
//!   parameters, through every operand a derivative flows to (the [rule
//!   table](crate::rules) says which: not the condition of `select`, not through
//!   `floor` or a comparison) and through phis.
//! - *useful*: the value reaches an active float result. Backward from the values the
//!   `ret`s return (when the return is `active`), through the same operands and phis.
//!
//! A value is *active* when it is both, and a float: only active values get a
//! cotangent variable and reverse code. Every other cotangent is statically zero and
//! never materialised (JAX's symbolic zero). `const` parameters, integers and bools are
//! never active. Only blocks reachable from the entry are looked at; both passes are
//! worklists, linear in the size of the function, with no recursion.

use cranelift_entity::{EntitySet, SecondaryMap};
use gradlift_ir::{Block, Function, Terminator, Value, ValueDef};
use smallvec::SmallVec;

use crate::config::{Activity, RetActivity, RuleConfig};
use crate::rules::{OpRule, op_rule};

/// A place where a value is used, for the forward pass of the analysis.
#[derive(Copy, Clone, Debug)]
enum Use {
    /// As an incoming value of the phi defining this value.
    Phi(Value),
    /// As operand `.1` of the instruction whose first result is `.0`.
    Operand(Value, usize),
}

/// The result of the analysis: the varied and the useful values of one function
/// under one [`RuleConfig`].
#[derive(Clone, Debug, Default)]
pub struct ActivityInfo {
    varied: EntitySet<Value>,
    useful: EntitySet<Value>,
}

impl ActivityInfo {
    /// Analyses `func` under `config`, looking only at the blocks `reachable` holds.
    /// The configuration must have been checked against the signature (`active` only
    /// on float scalars).
    pub fn analyse(
        func: &Function,
        reachable: &EntitySet<Block>,
        config: &RuleConfig,
    ) -> ActivityInfo {
        let mut info = ActivityInfo::default();
        info.find_varied(func, reachable, config);
        info.find_useful(func, reachable, config);
        info
    }

    /// Whether `v` depends on an active parameter.
    pub fn is_varied(&self, v: Value) -> bool {
        self.varied.contains(v)
    }

    /// Whether `v` reaches an active result.
    pub fn is_useful(&self, v: Value) -> bool {
        self.useful.contains(v)
    }

    /// Whether `v` gets a cotangent: varied, useful, and a float.
    pub fn is_active(&self, v: Value) -> bool {
        self.varied.contains(v) && self.useful.contains(v)
    }

    /// Whether no value at all is active: the pullback returns zeros.
    pub fn is_empty(&self, func: &Function) -> bool {
        func.values.keys().all(|v| !self.is_active(v))
    }

    fn find_varied(&mut self, func: &Function, reachable: &EntitySet<Block>, config: &RuleConfig) {
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
                let d = &func.insts[inst];
                if let Some(&r) = d.results.first() {
                    for (k, &a) in d.args.iter().enumerate() {
                        users[a].push(Use::Operand(r, k));
                    }
                }
            }
        }
        let mut work: Vec<Value> = Vec::new();
        for (&p, &a) in func.params.iter().zip(&config.params) {
            if a == Activity::Active && func.value_type(p).is_float() && self.varied.insert(p) {
                work.push(p);
            }
        }
        while let Some(v) = work.pop() {
            for &u in users[v].iter() {
                let r = match u {
                    Use::Phi(p) => p,
                    Use::Operand(r, k) => {
                        let ValueDef::Result(inst, _) = func.value_def(r) else {
                            continue;
                        };
                        match op_rule(func.insts[inst].opcode) {
                            OpRule::Float(rule)
                                if rule.operands.get(k).is_some_and(|o| o.is_some()) =>
                            {
                                r
                            }
                            _ => continue,
                        }
                    }
                };
                if func.value_type(r).is_float() && self.varied.insert(r) {
                    work.push(r);
                }
            }
        }
    }

    fn find_useful(&mut self, func: &Function, reachable: &EntitySet<Block>, config: &RuleConfig) {
        if config.ret != RetActivity::Active {
            return;
        }
        let mut work: Vec<Value> = Vec::new();
        let mark = |useful: &mut EntitySet<Value>, work: &mut Vec<Value>, v: Value| {
            let d = &func.values[v];
            if d.ty.is_float() && !matches!(d.def, ValueDef::Const(_)) && useful.insert(v) {
                work.push(v);
            }
        };
        for &b in func.layout.iter().filter(|&&b| reachable.contains(b)) {
            if let Some(Terminator::Ret(vals)) = &func.blocks[b].term {
                for &v in vals {
                    mark(&mut self.useful, &mut work, v);
                }
            }
        }
        while let Some(v) = work.pop() {
            match func.value_def(v) {
                ValueDef::Phi(b) => {
                    let Some(phi) = func.blocks[b].phis.iter().find(|p| p.value == v) else {
                        continue;
                    };
                    for &(pred, a) in &phi.incoming {
                        if reachable.contains(pred) {
                            mark(&mut self.useful, &mut work, a);
                        }
                    }
                }
                ValueDef::Result(inst, _) => {
                    let d = &func.insts[inst];
                    if let OpRule::Float(rule) = op_rule(d.opcode) {
                        for (k, &a) in d.args.iter().enumerate() {
                            if rule.operands.get(k).is_some_and(|o| o.is_some()) {
                                mark(&mut self.useful, &mut work, a);
                            }
                        }
                    }
                }
                ValueDef::Param(_) | ValueDef::Const(_) => {}
            }
        }
    }
}
