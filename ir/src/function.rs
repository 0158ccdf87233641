//! The body of a function: blocks of phis, instructions and a terminator, over SSA values.
//!
//! What a thing *is* lives in arenas: [`Function::values`], [`Function::insts`],
//! [`Function::blocks`] and [`Function::messages`], indexed by the typed IDs of
//! [`entities`](crate::entities).
//! Where a thing *sits* is kept apart: [`Function::layout`] orders the blocks (the
//! first is the entry), and each [`BlockData`] lists its phis and instructions in
//! order. Inserting or removing a statement edits one list and renumbers nothing;
//! an instruction taken out of its block's list stays in the arena, dead and
//! unprinted, so IDs held elsewhere never dangle into another entity.
//!
//! The shape is Mooncake's BBCode: phis only at the head of a block, each incoming
//! edge named by its predecessor block, and a closed set of [`Terminator`]s.
//!
//! A value is a parameter, a phi, an instruction result or a constant
//! ([`ValueDef`]). Constants are values with no place in any block: a literal operand
//! such as the `1.0` of `fsub 1.0, %a` is a constant value, printed inline, and it
//! dominates every use. [`Function::make_const`] returns one value per distinct
//! constant, and [`Function::make_msg`] one message per distinct text (the strings
//! `trap_if` fails with).
//!
//! The fields are public so that passes can read and edit them directly; the
//! `make_*`, `append_*` and `insert_*` methods keep the cross-references (a result's
//! [`ValueDef`], a phi's block) consistent and are the easy way to build. Nothing here
//! checks well-formedness: that is the [verifier](crate::verify())'s job.

use core::fmt;

use cranelift_entity::{PrimaryMap, SecondaryMap};
use hashbrown::HashMap;
use smallvec::SmallVec;

use crate::entities::{Block, Inst, Msg, Value};
use crate::module::Signature;
use crate::ops::{Imm, Opcode};
use crate::types::{Scalar, Type};

/// A source position: 1-based line and column, in IR text or, for traced code, in
/// a Rust file. [`Pos::NONE`] (0:0) means unknown, for entities made by the builder
/// or a pass rather than parsed or traced.
///
/// A parsed function's positions have no file (the caller knows which text it
/// parsed); a traced one's name the Rust file of the code that recorded each
/// instruction (`Location::file`), so they print as `src/lib.rs:12:9`.
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug, Default, PartialOrd, Ord)]
#[non_exhaustive]
pub struct Pos {
    /// The line, from 1.
    pub line: u32,
    /// The column, from 1, counted in characters.
    pub col: u32,
    /// The Rust file, for traced code; `None` for IR text.
    pub file: Option<&'static str>,
}

impl Pos {
    /// The unknown position.
    pub const NONE: Pos = Pos {
        line: 0,
        col: 0,
        file: None,
    };

    /// A known position in IR text.
    pub fn new(line: u32, col: u32) -> Pos {
        Pos {
            line,
            col,
            file: None,
        }
    }

    /// A known position in a Rust file (as `std::panic::Location` gives it).
    pub fn in_file(file: &'static str, line: u32, col: u32) -> Pos {
        Pos {
            line,
            col,
            file: Some(file),
        }
    }

    /// Whether the position is known.
    pub fn is_known(self) -> bool {
        self.line != 0
    }
}

/// `line:col`, or `file:line:col` with a file.
impl fmt::Display for Pos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(file) = self.file {
            write!(f, "{file}:")?;
        }
        write!(f, "{}:{}", self.line, self.col)
    }
}

/// Where a value comes from.
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug)]
pub enum ValueDef {
    /// The function's parameter of this index.
    Param(u32),
    /// A phi at the head of this block.
    Phi(Block),
    /// Result number `.1` of the instruction `.0`.
    Result(Inst, u32),
    /// A constant, usable anywhere in the function.
    Const(Scalar),
}

/// What a value is: its type, its definition, and the name it prints with.
#[derive(Clone, Debug)]
pub struct ValueData {
    /// The value's type.
    pub ty: Type,
    /// Where it comes from.
    pub def: ValueDef,
    /// The name it had in the source text or was given by the builder (without `%`).
    /// Unnamed values print with a generated name.
    pub name: Option<Box<str>>,
}

/// An instruction: an op, its immediate, its operands and the values it defines.
#[derive(Clone, Debug)]
pub struct InstData {
    /// The operation.
    pub opcode: Opcode,
    /// The immediate (predicate, type, constant, callee or message), as the op requires.
    pub imm: Imm,
    /// The operands, in text order (`load s[i]` has `[s, i]`, `store s[i], v` has `[s, i, v]`).
    pub args: SmallVec<[Value; 3]>,
    /// The values this instruction defines, each with `ValueDef::Result(this, k)`.
    pub results: SmallVec<[Value; 1]>,
    /// A `call` only, written `call @g(..) checkpoint`: reverse mode keeps none of
    /// the callee's tape; its forward pass saves the call's inputs, and the pullback
    /// runs the callee's forward pass again just before its reverse. No effect on
    /// what the call computes.
    pub checkpoint: bool,
}

/// A phi at the head of a block: one incoming value per predecessor.
#[derive(Clone, Debug)]
pub struct Phi {
    /// The value the phi defines (its `ValueDef` is `Phi(block)`, its type the phi's type).
    pub value: Value,
    /// `(predecessor, value)` pairs, in text order.
    pub incoming: SmallVec<[(Block, Value); 2]>,
}

/// How a block ends.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum Terminator {
    /// `jump dest`.
    Jump(Block),
    /// `br cond, then_dest, else_dest`.
    Br {
        /// A `bool`.
        cond: Value,
        /// Where control goes when `cond` is true.
        then_dest: Block,
        /// Where control goes when `cond` is false.
        else_dest: Block,
    },
    /// `ret values...`: as many values as the function has results.
    Ret(SmallVec<[Value; 2]>),
}

impl Terminator {
    /// The blocks control may go to next, in text order (a `br` to one block twice
    /// lists it twice).
    pub fn successors(&self) -> SmallVec<[Block; 2]> {
        match self {
            Terminator::Jump(b) => smallvec::smallvec![*b],
            Terminator::Br {
                then_dest,
                else_dest,
                ..
            } => smallvec::smallvec![*then_dest, *else_dest],
            Terminator::Ret(_) => SmallVec::new(),
        }
    }

    /// The values the terminator uses.
    pub fn args(&self) -> &[Value] {
        match self {
            Terminator::Jump(_) => &[],
            Terminator::Br { cond, .. } => core::slice::from_ref(cond),
            Terminator::Ret(vals) => vals,
        }
    }
}

/// A block: its name, its phis, its instructions in order, and its terminator.
#[derive(Clone, Debug, Default)]
pub struct BlockData {
    /// The label it had in the source text or was given by the builder.
    /// Unnamed blocks print with a generated label.
    pub name: Option<Box<str>>,
    /// The phis at the head, in order.
    pub phis: Vec<Phi>,
    /// The instructions, in order.
    pub insts: Vec<Inst>,
    /// The terminator; `None` only while a block is being built (the verifier rejects it).
    pub term: Option<Terminator>,
}

/// Source positions of a parsed function's entities, for error messages.
///
/// Entities made by the builder or a pass have none ([`Pos::NONE`]).
#[derive(Clone, Debug, Default)]
pub struct SourceMap {
    /// Where the `func` keyword stands.
    pub func: Pos,
    /// Where each parameter's or phi's name stands at its definition.
    pub values: SecondaryMap<Value, Pos>,
    /// Where each instruction starts (its first result name, or its op).
    pub insts: SecondaryMap<Inst, Pos>,
    /// Where each block's label stands.
    pub blocks: SecondaryMap<Block, Pos>,
    /// Where each block's terminator starts.
    pub terms: SecondaryMap<Block, Pos>,
}

/// A function body. Its name and [`Signature`] live in the module's
/// [`FuncDecl`](crate::FuncDecl), so a `Function` is meaningful only inside its module.
#[derive(Clone, Debug, Default)]
pub struct Function {
    /// The parameter values, in order (each with `ValueDef::Param(i)`).
    pub params: Vec<Value>,
    /// Every value ever made in this function.
    pub values: PrimaryMap<Value, ValueData>,
    /// Every instruction ever made, placed in a block or not.
    pub insts: PrimaryMap<Inst, InstData>,
    /// Every block ever made, placed in the layout or not.
    pub blocks: PrimaryMap<Block, BlockData>,
    /// The messages of the function's `trap_if`s (see [`Function::make_msg`]).
    pub messages: PrimaryMap<Msg, String>,
    /// The blocks in order; the first is the entry.
    pub layout: Vec<Block>,
    /// Source positions, for parsed functions.
    pub srcmap: SourceMap,
    /// Groups of values that are the lanes of one value of a rule of width N
    /// (lane `j` at index `j`), as the widening pass made them; not part of the
    /// text form. A hint only: the JIT pairs lanes `2m` and `2m + 1` into one
    /// vector operation after checking that they compute the same operation on
    /// paired or shared operands, so no meaning depends on it.
    pub lane_groups: Vec<Vec<Value>>,
    consts: HashMap<Scalar, Value>,
    /// The message made for each text by [`Function::make_msg`].
    msgs: HashMap<String, Msg>,
}

impl Function {
    /// An empty function with one parameter value per parameter of `sig` and no blocks.
    pub fn new(sig: &Signature) -> Function {
        let mut func = Function::default();
        for (i, &ty) in sig.params.iter().enumerate() {
            let v = func.values.push(ValueData {
                ty,
                def: ValueDef::Param(i as u32),
                name: None,
            });
            func.params.push(v);
        }
        func
    }

    /// The entry block, if the function has any block.
    pub fn entry(&self) -> Option<Block> {
        self.layout.first().copied()
    }

    /// The type of `v`.
    pub fn value_type(&self, v: Value) -> Type {
        self.values[v].ty
    }

    /// Where `v` comes from.
    pub fn value_def(&self, v: Value) -> ValueDef {
        self.values[v].def
    }

    /// The value of the constant `c`: the same value every time for the same constant.
    pub fn make_const(&mut self, c: Scalar) -> Value {
        if let Some(&v) = self.consts.get(&c) {
            return v;
        }
        let v = self.values.push(ValueData {
            ty: c.ty(),
            def: ValueDef::Const(c),
            name: None,
        });
        self.consts.insert(c, v);
        v
    }

    /// The message with the text `text`: the one made before for the same text, if
    /// it is still in [`Function::messages`] with that text, else a new one.
    pub fn make_msg(&mut self, text: &str) -> Msg {
        if let Some(&m) = self.msgs.get(text)
            && self.messages.get(m).is_some_and(|t| t == text)
        {
            return m;
        }
        let m = self.messages.push(text.to_string());
        self.msgs.insert(text.to_string(), m);
        m
    }

    /// The text of the message `m`, if it is one of the function's.
    pub fn message(&self, m: Msg) -> Option<&str> {
        self.messages.get(m).map(String::as_str)
    }

    /// A new block, not yet in the layout.
    pub fn make_block(&mut self, name: Option<&str>) -> Block {
        self.blocks.push(BlockData {
            name: name.map(Into::into),
            ..BlockData::default()
        })
    }

    /// Appends `block` to the layout.
    pub fn append_block(&mut self, block: Block) {
        self.layout.push(block);
    }

    /// A new instruction with one fresh result value per type in `results`; not yet
    /// in any block.
    pub fn make_inst(
        &mut self,
        opcode: Opcode,
        imm: Imm,
        args: &[Value],
        results: &[Type],
    ) -> Inst {
        let inst = self.insts.push(InstData {
            opcode,
            imm,
            args: args.iter().copied().collect(),
            results: SmallVec::new(),
            checkpoint: false,
        });
        for (k, &ty) in results.iter().enumerate() {
            let v = self.values.push(ValueData {
                ty,
                def: ValueDef::Result(inst, k as u32),
                name: None,
            });
            self.insts[inst].results.push(v);
        }
        inst
    }

    /// Appends `inst` at the end of `block`'s instructions.
    pub fn append_inst(&mut self, block: Block, inst: Inst) {
        self.blocks[block].insts.push(inst);
    }

    /// Inserts `inst` into `block` at `index` (0 is the first instruction after the phis).
    pub fn insert_inst(&mut self, block: Block, index: usize, inst: Inst) {
        self.blocks[block].insts.insert(index, inst);
    }

    /// Takes `inst` out of `block`'s instructions; it stays in the arena, dead.
    /// Returns whether it was there.
    pub fn remove_inst(&mut self, block: Block, inst: Inst) -> bool {
        let insts = &mut self.blocks[block].insts;
        match insts.iter().position(|&i| i == inst) {
            Some(idx) => {
                insts.remove(idx);
                true
            }
            None => false,
        }
    }

    /// Appends a new phi of type `ty` with the given incoming edges to `block`.
    pub fn append_phi(&mut self, block: Block, ty: Type, incoming: &[(Block, Value)]) -> Value {
        let value = self.values.push(ValueData {
            ty,
            def: ValueDef::Phi(block),
            name: None,
        });
        self.blocks[block].phis.push(Phi {
            value,
            incoming: incoming.iter().copied().collect(),
        });
        value
    }

    /// Adds the edge `(pred, value)` to the phi defining `phi`.
    /// Returns false, changing nothing, if `phi` is not a phi placed in its block.
    pub fn add_phi_incoming(&mut self, phi: Value, pred: Block, value: Value) -> bool {
        let ValueDef::Phi(block) = self.values[phi].def else {
            return false;
        };
        match self.blocks[block].phis.iter_mut().find(|p| p.value == phi) {
            Some(p) => {
                p.incoming.push((pred, value));
                true
            }
            None => false,
        }
    }

    /// Sets `block`'s terminator, replacing any it had.
    pub fn set_terminator(&mut self, block: Block, term: Terminator) {
        self.blocks[block].term = Some(term);
    }

    /// The successors of `block` (none while it has no terminator).
    pub fn successors(&self, block: Block) -> SmallVec<[Block; 2]> {
        self.blocks[block]
            .term
            .as_ref()
            .map(Terminator::successors)
            .unwrap_or_default()
    }

    /// Gives `v` the name it prints with (without `%`).
    pub fn set_value_name(&mut self, v: Value, name: &str) {
        self.values[v].name = Some(name.into());
    }

    /// The statements of the blocks in the layout: phis, instructions and
    /// terminators, what the parser's and the JIT's size limits count.
    pub fn statement_count(&self) -> usize {
        self.layout
            .iter()
            .map(|&b| {
                let d = &self.blocks[b];
                d.phis.len() + d.insts.len() + usize::from(d.term.is_some())
            })
            .sum()
    }

    /// The instructions of all blocks in layout order, with their blocks.
    pub fn placed_insts(&self) -> impl Iterator<Item = (Block, Inst)> + '_ {
        self.layout
            .iter()
            .flat_map(move |&b| self.blocks[b].insts.iter().map(move |&i| (b, i)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn make_msg_reuses_an_identical_message() {
        let mut f = Function::default();
        let a = f.make_msg("shadow too short");
        let b = f.make_msg("other");
        assert_ne!(a, b);
        assert_eq!(f.make_msg("shadow too short"), a);
        assert_eq!(f.messages.len(), 2);
        assert_eq!(
            (f.message(a), f.message(b)),
            (Some("shadow too short"), Some("other"))
        );
        assert_eq!(format!("{a:?} {b}"), "msg0 msg1");
        // Texts are compared exactly, and a message edited in the arena is not reused
        // for its old text.
        assert_ne!(f.make_msg("Other"), b);
        f.messages[b] = "changed".to_string();
        let c = f.make_msg("other");
        assert_ne!(c, b);
        assert_eq!(f.message(c), Some("other"));
        assert_eq!(f.message(Msg::from_u32(99)), None);
    }
}
