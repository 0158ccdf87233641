//! The IDs that name things in the IR.
//!
//! Every entity of a function (a [`Block`], a [`Value`], an [`Inst`], a [`Msg`]) and
//! every function of a module ([`FuncId`]) is a typed `u32` index into an arena owned
//! by its container (`cranelift_entity::PrimaryMap`). IDs are stable: inserting or
//! removing a statement never renumbers anything, which is the property Mooncake's
//! BBCode exists for. Where a statement *sits* is kept apart, in each block's ordered
//! lists.
//!
//! IDs are only meaningful together with the function (or module) that created them;
//! mixing IDs of two functions is a logic error that the verifier reports as an
//! out-of-range or ill-typed reference, never as a panic.
//!
//! An ID's `Display` is its default printed name (`v3`, `block2`, `inst7`, `msg0`,
//! `fn1`). The text printer prefers the names a function carries for its values and
//! blocks and falls back to these; a message prints as its string literal.

use cranelift_entity::entity_impl;

/// A basic block: phis at its head, instructions, then one terminator.
#[derive(Copy, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Block(u32);
entity_impl!(Block, "block");

/// An SSA value: a parameter, a phi, an instruction result or a constant.
#[derive(Copy, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Value(u32);
entity_impl!(Value, "v");

/// An instruction (a statement that is neither a phi nor a terminator).
#[derive(Copy, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Inst(u32);
entity_impl!(Inst, "inst");

/// A message of a function: the text a `trap_if` fails with, kept in
/// [`Function::messages`](crate::Function::messages).
#[derive(Copy, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Msg(u32);
entity_impl!(Msg, "msg");

/// A function of a [`Module`](crate::Module): defined, extern, or declared and not yet defined.
#[derive(Copy, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FuncId(u32);
entity_impl!(FuncId, "fn");
