//! The syntax tree: what the text says, before any name is resolved.
//!
//! Parsing is split in two phases so that functions may be used before they are
//! defined: `parse` reads every item into this tree first, then `lower` declares every
//! function and resolves names. The tree keeps names as text and the position of
//! everything an error may point at. Types, op names and predicates are already
//! checked by the parser, so they are stored resolved; literals stay as text, because
//! their type comes from context.
//!
//! A statement the parser could not read becomes [`InstKind::Broken`], keeping the
//! names it defines, so that lowering does not report their uses as unknown values.

use crate::function::Pos;
use crate::ops::{CmpPred, Opcode};
use crate::types::Type;

/// A name as written (without its sigil) and where it stands.
#[derive(Copy, Clone, Debug)]
pub(crate) struct Name<'a> {
    /// The name.
    pub text: &'a str,
    /// Where it stands.
    pub pos: Pos,
}

/// One top-level item.
#[derive(Debug)]
pub(crate) enum Item<'a> {
    /// `func @f(...) -> ... { ... }`.
    Func(FuncItem<'a>),
    /// `extern @f(types) -> ...`.
    Extern {
        /// The `extern` keyword's position.
        pos: Pos,
        /// The function's name.
        name: Name<'a>,
        /// Parameter types.
        params: Vec<Type>,
        /// Result types.
        results: Vec<Type>,
    },
    /// `overlay @func = @with`.
    Overlay {
        /// The keyword's position.
        pos: Pos,
        /// The function whose derivative is overlaid.
        func: Name<'a>,
        /// The function differentiated instead.
        with: Name<'a>,
    },
    /// `vjp @func = @rule`.
    Vjp {
        /// The keyword's position.
        pos: Pos,
        /// The function with a custom derivative.
        func: Name<'a>,
        /// Its derivative (the pullback rule, when `forward` is given).
        rule: Name<'a>,
        /// `vjp @func = @forward, @rule`: the forward rule of a pair.
        forward: Option<Name<'a>>,
    },
    /// `jvp @func = @rule`.
    Jvp {
        /// The keyword's position.
        pos: Pos,
        /// The function with a custom forward-mode derivative.
        func: Name<'a>,
        /// Its derivative.
        rule: Name<'a>,
    },
    /// `nodiff @func`.
    Nodiff {
        /// The keyword's position.
        pos: Pos,
        /// The function.
        func: Name<'a>,
    },
    /// A `func` or `extern` whose name was read but whose header could not be. The
    /// name is still declared, so calls to it are not reported as calls to an unknown
    /// function.
    Broken {
        /// The keyword's position.
        pos: Pos,
        /// The function's name.
        name: Name<'a>,
    },
}

/// A function definition.
#[derive(Debug)]
pub(crate) struct FuncItem<'a> {
    /// The `func` keyword's position.
    pub pos: Pos,
    /// The function's name.
    pub name: Name<'a>,
    /// Parameter names and types.
    pub params: Vec<(Name<'a>, Type)>,
    /// Result types.
    pub results: Vec<Type>,
    /// The blocks in text order; the first is the entry.
    pub blocks: Vec<BlockAst<'a>>,
}

/// A block. Statements the parser found before the first label go into a block with
/// no label (the error was reported).
#[derive(Debug)]
pub(crate) struct BlockAst<'a> {
    /// The label, or `None` for statements before the first label.
    pub label: Option<Name<'a>>,
    /// The phis, in order.
    pub phis: Vec<PhiAst<'a>>,
    /// The instructions, in order.
    pub insts: Vec<InstAst<'a>>,
    /// The terminator; `None` when it is missing (the error was reported).
    pub term: Option<TermAst<'a>>,
}

/// `%v = phi T [label: operand, ...]`.
#[derive(Debug)]
pub(crate) struct PhiAst<'a> {
    /// The value defined.
    pub name: Name<'a>,
    /// Where the `phi` keyword stands.
    pub pos: Pos,
    /// The phi's type.
    pub ty: Type,
    /// The incoming edges: predecessor label and value.
    pub incoming: Vec<(Name<'a>, Operand<'a>)>,
}

/// An instruction: `[names =] op ...`.
#[derive(Debug)]
pub(crate) struct InstAst<'a> {
    /// Where the instruction starts (its first name, or its op).
    pub pos: Pos,
    /// The values defined, possibly none.
    pub names: Vec<Name<'a>>,
    /// What the instruction is.
    pub kind: InstKind<'a>,
}

/// The part of an instruction after `=`.
#[derive(Debug)]
pub(crate) enum InstKind<'a> {
    /// A well-formed op.
    Op {
        /// The op.
        op: Opcode,
        /// The immediate, as written.
        imm: ImmAst<'a>,
        /// The operands, in text order (as in [`InstData::args`](crate::InstData)).
        args: Vec<Operand<'a>>,
    },
    /// A statement that could not be read (the error was reported).
    Broken,
}

/// An immediate as written.
#[derive(Debug)]
pub(crate) enum ImmAst<'a> {
    /// None.
    None,
    /// The predicate of `fcmp`/`icmp`.
    Cmp(CmpPred),
    /// The type of `cast`, `bitcast`, `alloc`, `pop`, `tape_alloc` or `tape_view`.
    Type(Type),
    /// `const T lit`.
    Const(Type, Lit<'a>),
    /// The callee of `call`, and whether `checkpoint` follows the arguments.
    Func(Name<'a>, bool),
    /// The message of `trap_if`: the text between the quotes, escapes as written
    /// (the lexer checked them).
    Msg(&'a str),
}

/// An operand: a value name or a literal.
#[derive(Copy, Clone, Debug)]
pub(crate) enum Operand<'a> {
    /// `%name`.
    Value(Name<'a>),
    /// A literal, typed from context when lowered.
    Lit(Lit<'a>),
}

/// A literal as written.
#[derive(Copy, Clone, Debug)]
pub(crate) struct Lit<'a> {
    /// What kind of literal it is.
    pub kind: LitKind,
    /// Its text (`-2.5e-3`, `0x10`, `true`).
    pub text: &'a str,
    /// Where it stands.
    pub pos: Pos,
}

/// The kinds of literals. The syntax decides the kind; the context decides the type.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub(crate) enum LitKind {
    /// A decimal integer.
    Int,
    /// A hex integer: a 64-bit pattern.
    Hex(u64),
    /// A float: has a `.` or an exponent, or is `inf`, `-inf`, `nan`.
    Float,
    /// `true` or `false`.
    Bool(bool),
}

/// A terminator and where it starts.
#[derive(Debug)]
pub(crate) struct TermAst<'a> {
    /// The keyword's position.
    pub pos: Pos,
    /// Which terminator.
    pub kind: TermKind<'a>,
}

/// The terminators as written.
#[derive(Debug)]
pub(crate) enum TermKind<'a> {
    /// `jump label`.
    Jump(Name<'a>),
    /// `br cond, then, else`.
    Br(Operand<'a>, Name<'a>, Name<'a>),
    /// `ret operands`.
    Ret(Vec<Operand<'a>>),
}
