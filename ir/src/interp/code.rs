//! Pre-resolution: each defined function turned once into a flat [`Code`] that the run
//! loop reads without lookups.
//!
//! A value's register is its arena index, so a frame is a dense run of [`Slot`]s
//! as long as the function's value arena, and constants are written into a
//! [`Code::template`] that every new frame starts from. Instructions are laid out
//! block by block in one vector, each block a range of it; every edge carries the
//! parallel copy its target's phis make for it. Call arguments, call results and
//! returned values live in one shared list ([`Span`]s into [`Code::lists`]).
//!
//! Nothing here fails: whatever is malformed (an ID out of range, a missing
//! terminator, a phi without a value for an edge, an operand count that does not
//! fit the op) compiles to a `Bad` step holding the message, which becomes
//! [`ErrorKind::Malformed`](super::ErrorKind::Malformed) if and when it runs. Once
//! compiled, every slot index is below the frame size and every block index names a
//! compiled block, so the run loop may index without checks.

use core::ops::Range;

use cranelift_entity::EntityRef;

use crate::entities::{Block, FuncId, Inst, Value};
use crate::function::{Function, Terminator, ValueDef};
use crate::interp::step::Slot;
use crate::module::{FuncDecl, Module};
use crate::ops::{Imm, Opcode};
use crate::types::Type;

/// A run of [`Code::lists`] or [`Code::moves`].
#[derive(Copy, Clone, Debug)]
pub(super) struct Span {
    pub start: u32,
    pub len: u32,
}

impl Span {
    pub(super) fn range(self) -> Range<usize> {
        self.start as usize..self.start as usize + self.len as usize
    }
}

/// One copy of a phi's incoming value into the phi's slot.
#[derive(Copy, Clone, Debug)]
pub(super) struct Move {
    pub dst: u32,
    pub src: u32,
}

/// What an instruction does, with its operands resolved to slots.
#[derive(Copy, Clone, Debug)]
pub(super) enum Step {
    /// Any op but `call`: operand slots (unused ones are 0) and the result slot.
    Op {
        op: Opcode,
        imm: Imm,
        args: [u32; 3],
        dst: u32,
    },
    /// `call`: argument and result slots in [`Code::lists`].
    Call {
        callee: FuncId,
        args: Span,
        results: Span,
    },
    /// `trap_if`: the condition's slot and message number `msg` of
    /// [`Code::messages`].
    Trap { cond: u32, msg: u32 },
    /// A malformed instruction: message number `.0` of [`Code::msgs`].
    Bad(u32),
}

/// An instruction of [`Code`]: what it does and which instruction it came from.
#[derive(Copy, Clone, Debug)]
pub(super) struct CInst {
    pub step: Step,
    pub inst: Inst,
}

/// A control-flow edge, with the parallel copy of the target's phis.
#[derive(Copy, Clone, Debug)]
pub(super) enum Edge {
    To { block: u32, moves: Span },
    Bad(u32),
}

/// A terminator with its operands resolved.
#[derive(Copy, Clone, Debug)]
pub(super) enum Term {
    Jump(Edge),
    Br { cond: u32, then: Edge, els: Edge },
    Ret(Span),
    Bad { op: &'static str, msg: u32 },
}

impl Term {
    /// The terminator's name, for errors.
    pub(super) fn name(&self) -> &'static str {
        match self {
            Term::Jump(_) => "jump",
            Term::Br { .. } => "br",
            Term::Ret(_) => "ret",
            Term::Bad { op, .. } => op,
        }
    }
}

/// A block of [`Code`]: its instructions `start..end` of [`Code::insts`], then its
/// terminator.
#[derive(Copy, Clone, Debug)]
pub(super) struct CBlock {
    pub start: u32,
    pub end: u32,
    pub term: Term,
}

/// A defined function, pre-resolved. See the [module docs](self).
#[derive(Debug)]
pub(super) struct Code {
    /// A fresh frame: constants in place, every other slot undefined.
    pub template: Vec<Slot>,
    /// The slot of each parameter.
    pub params: Vec<u32>,
    /// The declared parameter types.
    pub param_tys: Vec<Type>,
    /// The declared result types.
    pub result_tys: Vec<Type>,
    /// All instructions, block after block.
    pub insts: Vec<CInst>,
    /// One per block of the arena, indexed by the block's index.
    pub blocks: Vec<CBlock>,
    /// Slots of call arguments, call results and returned values.
    pub lists: Vec<u32>,
    /// Phi copies of every edge.
    pub moves: Vec<Move>,
    /// Messages of malformed statements.
    pub msgs: Vec<String>,
    /// The function's messages (of `trap_if`), by [`Msg`](crate::Msg) index.
    pub messages: Vec<String>,
    /// The entry block, or why the function cannot start.
    pub entry: Result<u32, String>,
}

/// A value as messages name it: `%name`, or its ID.
fn vname(func: &Function, v: Value) -> String {
    match func.values.get(v).and_then(|d| d.name.as_deref()) {
        Some(name) => format!("%{name}"),
        None => format!("%{v}"),
    }
}

/// A block as messages name it: its label, or its ID.
fn bname(func: &Function, b: Block) -> String {
    match func.blocks.get(b).and_then(|d| d.name.as_deref()) {
        Some(name) => name.to_string(),
        None => b.to_string(),
    }
}

fn slot(v: Value) -> u32 {
    v.index() as u32
}

struct Compiler<'a> {
    module: &'a Module,
    func: &'a Function,
    code: Code,
}

impl Compiler<'_> {
    fn msg(&mut self, message: String) -> u32 {
        self.code.msgs.push(message);
        (self.code.msgs.len() - 1) as u32
    }

    fn list(&mut self, values: &[Value]) -> Span {
        let start = self.code.lists.len() as u32;
        self.code.lists.extend(values.iter().map(|&v| slot(v)));
        Span {
            start,
            len: values.len() as u32,
        }
    }

    /// The first of `values` that is not in the arena.
    fn missing(&self, values: &[Value]) -> Option<Value> {
        values
            .iter()
            .copied()
            .find(|&v| self.func.values.get(v).is_none())
    }

    fn inst(&mut self, inst: Inst) -> Step {
        let Some(data) = self.func.insts.get(inst) else {
            return Step::Bad(self.msg(format!("instruction {inst} does not exist")));
        };
        let op = data.opcode;
        if let Some(v) = self.missing(&data.args) {
            return Step::Bad(self.msg(format!("{op} uses {v}, which does not exist")));
        }
        if let Some(v) = self.missing(&data.results) {
            return Step::Bad(self.msg(format!("{op} defines {v}, which does not exist")));
        }
        if data.imm.kind() != op.imm_kind() {
            let imm = data.imm;
            return Step::Bad(self.msg(format!("{op} has the wrong immediate {imm:?}")));
        }
        if op == Opcode::Call {
            let Imm::Func(callee) = data.imm else {
                return Step::Bad(self.msg("call names no function".into()));
            };
            let Some(decl) = self.module.funcs.get(callee) else {
                return Step::Bad(self.msg(format!("call to {callee}, which does not exist")));
            };
            let (np, nr) = (decl.sig.params.len(), decl.sig.results.len());
            if data.args.len() != np || data.results.len() != nr {
                return Step::Bad(self.msg(format!(
                    "call passes {} arguments and takes {} results, but @{} has {np} \
                     parameters and {nr} results",
                    data.args.len(),
                    data.results.len(),
                    decl.name
                )));
            }
            let args = self.list(&data.args);
            let results = self.list(&data.results);
            return Step::Call {
                callee,
                args,
                results,
            };
        }
        let arity = op.arity().unwrap_or(0);
        let nres = op.result_count().unwrap_or(0);
        if data.args.len() != arity || data.results.len() != nres {
            return Step::Bad(self.msg(format!(
                "{op} takes {arity} operands and defines {nres} values, found {} and {}",
                data.args.len(),
                data.results.len()
            )));
        }
        if op == Opcode::TrapIf {
            let Imm::Msg(m) = data.imm else {
                return Step::Bad(self.msg("trap_if has no message".into()));
            };
            if self.func.messages.get(m).is_none() {
                return Step::Bad(self.msg(format!("trap_if names {m}, which does not exist")));
            }
            return Step::Trap {
                cond: slot(data.args[0]),
                msg: m.index() as u32,
            };
        }
        let mut args = [0; 3];
        for (a, &v) in args.iter_mut().zip(&data.args) {
            *a = slot(v);
        }
        Step::Op {
            op,
            imm: data.imm,
            args,
            dst: data.results.first().map_or(0, |&v| slot(v)),
        }
    }

    fn edge(&mut self, from: Block, to: Block) -> Edge {
        let func = self.func;
        let Some(target) = func.blocks.get(to) else {
            return Edge::Bad(self.msg(format!("jump to {to}, which does not exist")));
        };
        let start = self.code.moves.len() as u32;
        for phi in &target.phis {
            let Some((_, src)) = phi.incoming.iter().find(|(p, _)| *p == from) else {
                return Edge::Bad(self.msg(format!(
                    "phi {} of block {} has no value for the edge from {}",
                    vname(func, phi.value),
                    bname(func, to),
                    bname(func, from)
                )));
            };
            if let Some(v) = self.missing(&[phi.value, *src]) {
                return Edge::Bad(self.msg(format!(
                    "a phi of block {} names {v}, which does not exist",
                    bname(func, to)
                )));
            }
            self.code.moves.push(Move {
                dst: slot(phi.value),
                src: slot(*src),
            });
        }
        let len = self.code.moves.len() as u32 - start;
        Edge::To {
            block: to.index() as u32,
            moves: Span { start, len },
        }
    }

    fn term(&mut self, block: Block, term: Option<&Terminator>) -> Term {
        let func = self.func;
        match term {
            None => Term::Bad {
                op: "terminator",
                msg: self.msg(format!("block {} has no terminator", bname(func, block))),
            },
            Some(Terminator::Jump(to)) => Term::Jump(self.edge(block, *to)),
            Some(Terminator::Br {
                cond,
                then_dest,
                else_dest,
            }) => {
                if self.missing(&[*cond]).is_some() {
                    let msg = self.msg(format!("br tests {cond}, which does not exist"));
                    return Term::Bad { op: "br", msg };
                }
                Term::Br {
                    cond: slot(*cond),
                    then: self.edge(block, *then_dest),
                    els: self.edge(block, *else_dest),
                }
            }
            Some(Terminator::Ret(vals)) => {
                if let Some(v) = self.missing(vals) {
                    let msg = self.msg(format!("ret returns {v}, which does not exist"));
                    return Term::Bad { op: "ret", msg };
                }
                let want = self.code.result_tys.len();
                if vals.len() != want {
                    let msg = self.msg(format!(
                        "ret returns {} values, but the function has {want} results",
                        vals.len()
                    ));
                    return Term::Bad { op: "ret", msg };
                }
                Term::Ret(self.list(vals))
            }
        }
    }
}

/// Pre-resolves `func`, the body of `decl`.
pub(super) fn compile(module: &Module, decl: &FuncDecl, func: &Function) -> Code {
    let mut template = vec![Slot::Undef; func.values.len()];
    for (v, data) in func.values.iter() {
        if let ValueDef::Const(c) = data.def {
            template[v.index()] = Slot::from(c);
        }
    }
    let mut c = Compiler {
        module,
        func,
        code: Code {
            template,
            params: func.params.iter().map(|&v| slot(v)).collect(),
            param_tys: decl.sig.params.clone(),
            result_tys: decl.sig.results.clone(),
            insts: Vec::new(),
            blocks: Vec::with_capacity(func.blocks.len()),
            lists: Vec::new(),
            moves: Vec::new(),
            msgs: Vec::new(),
            messages: func.messages.values().cloned().collect(),
            entry: Err(String::new()),
        },
    };
    for (block, data) in func.blocks.iter() {
        let start = c.code.insts.len() as u32;
        for &inst in &data.insts {
            let step = c.inst(inst);
            c.code.insts.push(CInst { step, inst });
        }
        let end = c.code.insts.len() as u32;
        let term = c.term(block, data.term.as_ref());
        c.code.blocks.push(CBlock { start, end, term });
    }
    c.code.entry = if let Some(v) = c.missing(&func.params) {
        Err(format!("parameter {v} does not exist"))
    } else if func.params.len() != decl.sig.params.len() {
        Err(format!(
            "the body has {} parameters, the signature {}",
            func.params.len(),
            decl.sig.params.len()
        ))
    } else {
        match func.entry() {
            None => Err("the function has no blocks".into()),
            Some(b) if func.blocks.get(b).is_none() => {
                Err(format!("the entry block {b} does not exist"))
            }
            Some(b) => Ok(b.index() as u32),
        }
    };
    c.code
}
