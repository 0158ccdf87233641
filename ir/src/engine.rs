//! The engine contract: what every engine that runs IR (the reference
//! [interpreter](crate::interp), the JIT in `gradlift-jit`) takes, returns and reports,
//! written once.
//!
//! - **Values.** [`Val`] is an owned run-time value (a scalar, or a slice as a
//!   `Vec`); [`Arg`] is an argument borrowed from the caller (a scalar, or a slice
//!   lent without a copy, read-only or writable). [`Argument`] is what the two have in
//!   common, and [`check_args`] is the one check of arguments against a signature.
//! - **Errors.** A call that fails returns a [`RunError`]: the function, the op, its
//!   source position and an [`ErrorKind`]. Both engines use the same kinds, so a
//!   test compares their errors directly. A few kinds only one engine can report
//!   (the JIT's native stack, its tape's memory); each kind says which.
//! - **The tape.** It belongs to the engine, not to a call, and persists across
//!   calls until it is reset ([`Engine::reset_tape`]); [`TapeStats`] says what it
//!   holds.
//! - **Host functions.** An `extern` function runs a Rust closure bound by name in
//!   [`Hosts`]: a [`HostFn`], which gets its arguments as `Val`s, or a
//!   [`HostArgsFn`], which borrows them as [`Arg`]s (slices without a copy).
//!   [`call_host`] and [`call_host_args`] are the protocols both engines follow:
//!   panics caught, `mut` slices checked and copied back (or written in place),
//!   results checked against the signature.
//! - **[`Engine`]** is the trait: call a function on borrowed arguments, read and
//!   reset the tape. The rule calling convention of `gradlift-adjoint` (`run_rule`)
//!   is written once, over this trait.
//!
//! ```
//! use gradlift_ir::engine::{Arg, Engine, Val};
//! use gradlift_ir::interp::Interpreter;
//!
//! let module = gradlift_ir::parse("
//!     func @scale(%x: mut [f64], %a: f64) -> f64 {
//!     entry:
//!         %x0 = load %x[0]
//!         %y = fmul %a, %x0
//!         store %x[0], %y
//!         ret %y
//!     }
//! ")?;
//! let f = module.func_by_name("scale").unwrap();
//! let mut engine = Interpreter::new(&module);
//! let mut x = [3.0];
//! let mut out = Vec::new();
//! engine.call_args(f, &mut [Arg::F64sMut(&mut x), Arg::F64(2.0)], &mut out)?;
//! assert_eq!((out, x), (vec![Val::F64(6.0)], [6.0]));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use core::fmt;
use std::collections::HashMap;
use std::sync::Arc;

use crate::entities::{FuncId, Inst, Value};
use crate::function::{Function, Pos, ValueDef};
use crate::module::Signature;
use crate::ops::Opcode;
use crate::types::{Elem, Scalar, Type};

/// A run-time value passed to or returned from an engine: a scalar, or a slice as an
/// owned vector.
#[derive(Clone, PartialEq, Debug)]
pub enum Val {
    /// An `f64`.
    F64(f64),
    /// An `f32`.
    F32(f32),
    /// An `i64`.
    I64(i64),
    /// A `bool`.
    Bool(bool),
    /// A `[f64]` or `mut [f64]`.
    F64s(Vec<f64>),
    /// A `[f32]` or `mut [f32]`.
    F32s(Vec<f32>),
    /// A `[i64]` or `mut [i64]`.
    I64s(Vec<i64>),
}

impl Val {
    /// The value's type; slices are read-only (`[f64]`), since a `Val` does not know
    /// how it will be viewed.
    pub fn ty(&self) -> Type {
        match self {
            Val::F64(_) => Type::F64,
            Val::F32(_) => Type::F32,
            Val::I64(_) => Type::I64,
            Val::Bool(_) => Type::Bool,
            Val::F64s(_) => Type::slice(Elem::F64),
            Val::F32s(_) => Type::slice(Elem::F32),
            Val::I64s(_) => Type::slice(Elem::I64),
        }
    }

    /// Whether the value may be passed for a parameter of type `ty` (a slice for
    /// `[T]` or `mut [T]` alike: the caller owns it).
    pub fn fits(&self, ty: Type) -> bool {
        match (self.ty(), ty) {
            (Type::Slice { elem: a, .. }, Type::Slice { elem: b, .. }) => a == b,
            (t, ty) => t == ty,
        }
    }

    /// The value as a scalar, if it is one.
    pub fn scalar(&self) -> Option<Scalar> {
        Some(match *self {
            Val::F64(x) => Scalar::F64(x),
            Val::F32(x) => Scalar::F32(x),
            Val::I64(x) => Scalar::I64(x),
            Val::Bool(x) => Scalar::Bool(x),
            _ => None?,
        })
    }

    /// The number of elements, if the value is a slice.
    pub fn slice_len(&self) -> Option<usize> {
        match self {
            Val::F64s(x) => Some(x.len()),
            Val::F32s(x) => Some(x.len()),
            Val::I64s(x) => Some(x.len()),
            _ => None,
        }
    }

    /// A slice of zeros as long as this one and of its element type; a scalar is
    /// returned as it is.
    pub fn zeros_like(&self) -> Val {
        match self {
            Val::F64s(x) => Val::F64s(vec![0.0; x.len()]),
            Val::F32s(x) => Val::F32s(vec![0.0; x.len()]),
            Val::I64s(x) => Val::I64s(vec![0; x.len()]),
            other => other.clone(),
        }
    }

    /// `self = src`, reusing `self`'s buffer when both are slices of one type and
    /// length (so a loop of assignments allocates nothing once sized).
    pub fn assign(&mut self, src: &Val) {
        match (self, src) {
            (Val::F64s(d), Val::F64s(s)) if d.len() == s.len() => d.copy_from_slice(s),
            (Val::F32s(d), Val::F32s(s)) if d.len() == s.len() => d.copy_from_slice(s),
            (Val::I64s(d), Val::I64s(s)) if d.len() == s.len() => d.copy_from_slice(s),
            (d, s) => *d = s.clone(),
        }
    }

    /// `self` = zeros shaped like `like` ([`Val::zeros_like`]), reusing `self`'s
    /// buffer when it can.
    pub fn assign_zeros_like(&mut self, like: &Val) {
        match (self, like) {
            (Val::F64s(d), Val::F64s(s)) if d.len() == s.len() => d.fill(0.0),
            (Val::F32s(d), Val::F32s(s)) if d.len() == s.len() => d.fill(0.0),
            (Val::I64s(d), Val::I64s(s)) if d.len() == s.len() => d.fill(0),
            (d, s) => *d = s.zeros_like(),
        }
    }

    /// The value lent as an [`Arg`]: a slice writable (the `Val` owns it).
    pub fn as_arg(&mut self) -> Arg<'_> {
        match self {
            Val::F64(x) => Arg::F64(*x),
            Val::F32(x) => Arg::F32(*x),
            Val::I64(x) => Arg::I64(*x),
            Val::Bool(x) => Arg::Bool(*x),
            Val::F64s(x) => Arg::F64sMut(x),
            Val::F32s(x) => Arg::F32sMut(x),
            Val::I64s(x) => Arg::I64sMut(x),
        }
    }
}

impl From<Scalar> for Val {
    fn from(c: Scalar) -> Val {
        match c {
            Scalar::F64(x) => Val::F64(x),
            Scalar::F32(x) => Val::F32(x),
            Scalar::I64(x) => Val::I64(x),
            Scalar::Bool(x) => Val::Bool(x),
        }
    }
}

macro_rules! val_from {
    ($($t:ty => $v:ident),*) => {$(
        impl From<$t> for Val {
            fn from(x: $t) -> Val {
                Val::$v(x)
            }
        }
    )*};
}

val_from!(f64 => F64, f32 => F32, i64 => I64, bool => Bool,
    Vec<f64> => F64s, Vec<f32> => F32s, Vec<i64> => I64s);

/// An argument borrowed from the caller: a scalar, or a slice passed without a copy
/// (read-only, or `mut` for a parameter the function may write into).
#[derive(Debug)]
pub enum Arg<'a> {
    /// An `f64`.
    F64(f64),
    /// An `f32`.
    F32(f32),
    /// An `i64`.
    I64(i64),
    /// A `bool`.
    Bool(bool),
    /// A read-only `[f64]`.
    F64s(&'a [f64]),
    /// A read-only `[f32]`.
    F32s(&'a [f32]),
    /// A read-only `[i64]`.
    I64s(&'a [i64]),
    /// A `mut [f64]` (also fits `[f64]`).
    F64sMut(&'a mut [f64]),
    /// A `mut [f32]` (also fits `[f32]`).
    F32sMut(&'a mut [f32]),
    /// A `mut [i64]` (also fits `[i64]`).
    I64sMut(&'a mut [i64]),
}

impl Arg<'_> {
    /// The same argument borrowed again, a `mut` slice read-only: what a function
    /// called after another one sees of it.
    pub fn shared(&self) -> Arg<'_> {
        match self {
            Arg::F64(x) => Arg::F64(*x),
            Arg::F32(x) => Arg::F32(*x),
            Arg::I64(x) => Arg::I64(*x),
            Arg::Bool(x) => Arg::Bool(*x),
            Arg::F64s(v) => Arg::F64s(v),
            Arg::F32s(v) => Arg::F32s(v),
            Arg::I64s(v) => Arg::I64s(v),
            Arg::F64sMut(v) => Arg::F64s(v),
            Arg::F32sMut(v) => Arg::F32s(v),
            Arg::I64sMut(v) => Arg::I64s(v),
        }
    }

    /// The same argument borrowed again, writable if it is.
    pub fn reborrow(&mut self) -> Arg<'_> {
        match self {
            Arg::F64sMut(v) => Arg::F64sMut(v),
            Arg::F32sMut(v) => Arg::F32sMut(v),
            Arg::I64sMut(v) => Arg::I64sMut(v),
            other => other.shared(),
        }
    }

    /// The length of a slice argument.
    pub fn slice_len(&self) -> Option<usize> {
        match self {
            Arg::F64s(v) => Some(v.len()),
            Arg::F32s(v) => Some(v.len()),
            Arg::I64s(v) => Some(v.len()),
            Arg::F64sMut(v) => Some(v.len()),
            Arg::F32sMut(v) => Some(v.len()),
            Arg::I64sMut(v) => Some(v.len()),
            _ => None,
        }
    }

    /// Whether the argument may be passed for a parameter of type `ty`: a scalar of
    /// that type, a slice of its element type (writable for a `mut [T]`).
    pub fn fits(&self, ty: Type) -> bool {
        match (self.ty(), ty) {
            (
                Type::Slice {
                    elem: a,
                    mutable: m,
                },
                Type::Slice {
                    elem: b,
                    mutable: n,
                },
            ) => a == b && (m || !n),
            (t, ty) => t == ty,
        }
    }

    /// The IR type the argument is: a `mut` slice type for the `*Mut` variants.
    pub fn ty(&self) -> Type {
        match self {
            Arg::F64(_) => Type::F64,
            Arg::F32(_) => Type::F32,
            Arg::I64(_) => Type::I64,
            Arg::Bool(_) => Type::Bool,
            Arg::F64s(_) => Type::slice(Elem::F64),
            Arg::F32s(_) => Type::slice(Elem::F32),
            Arg::I64s(_) => Type::slice(Elem::I64),
            Arg::F64sMut(_) => Type::slice_mut(Elem::F64),
            Arg::F32sMut(_) => Type::slice_mut(Elem::F32),
            Arg::I64sMut(_) => Type::slice_mut(Elem::I64),
        }
    }

    /// A copy of the argument as an owned [`Val`].
    pub fn to_val(&self) -> Val {
        match self {
            Arg::F64(x) => Val::F64(*x),
            Arg::F32(x) => Val::F32(*x),
            Arg::I64(x) => Val::I64(*x),
            Arg::Bool(x) => Val::Bool(*x),
            Arg::F64s(v) => Val::F64s(v.to_vec()),
            Arg::F32s(v) => Val::F32s(v.to_vec()),
            Arg::I64s(v) => Val::I64s(v.to_vec()),
            Arg::F64sMut(v) => Val::F64s(v.to_vec()),
            Arg::F32sMut(v) => Val::F32s(v.to_vec()),
            Arg::I64sMut(v) => Val::I64s(v.to_vec()),
        }
    }

    /// Copies `src` into a writable slice argument of the same element type and
    /// length; returns whether it did (a read-only slice, a scalar or a mismatch
    /// copies nothing).
    pub fn copy_from(&mut self, src: &Val) -> bool {
        match (self, src) {
            (Arg::F64sMut(d), Val::F64s(s)) if d.len() == s.len() => d.copy_from_slice(s),
            (Arg::F32sMut(d), Val::F32s(s)) if d.len() == s.len() => d.copy_from_slice(s),
            (Arg::I64sMut(d), Val::I64s(s)) if d.len() == s.len() => d.copy_from_slice(s),
            _ => return false,
        }
        true
    }
}

/// A `Val` lent as an argument: its slices read-only.
impl<'a> From<&'a Val> for Arg<'a> {
    fn from(v: &'a Val) -> Arg<'a> {
        match v {
            Val::F64(x) => Arg::F64(*x),
            Val::F32(x) => Arg::F32(*x),
            Val::I64(x) => Arg::I64(*x),
            Val::Bool(x) => Arg::Bool(*x),
            Val::F64s(x) => Arg::F64s(x),
            Val::F32s(x) => Arg::F32s(x),
            Val::I64s(x) => Arg::I64s(x),
        }
    }
}

/// What an engine needs to know of an argument before a call: whether it fits a
/// parameter type, and its type for the message when it does not. [`Val`] and
/// [`Arg`] are arguments.
pub trait Argument {
    /// Whether it may be passed for a parameter of type `ty`.
    fn fits(&self, ty: Type) -> bool;
    /// Its type, as an error message names it.
    fn ty(&self) -> Type;
}

impl Argument for Val {
    fn fits(&self, ty: Type) -> bool {
        Val::fits(self, ty)
    }

    fn ty(&self) -> Type {
        Val::ty(self)
    }
}

impl Argument for Arg<'_> {
    fn fits(&self, ty: Type) -> bool {
        Arg::fits(self, ty)
    }

    fn ty(&self) -> Type {
        Arg::ty(self)
    }
}

/// Checks `args` against the parameters of `sig`, the signature of `@name`: one
/// argument per parameter, each fitting its type. The one argument check of every
/// engine; the error is [`ErrorKind::BadArguments`] with a sentence that names the
/// function and the argument.
pub fn check_args<A: Argument>(name: &str, sig: &Signature, args: &[A]) -> Result<(), ErrorKind> {
    if args.len() != sig.params.len() {
        return Err(ErrorKind::BadArguments(format!(
            "@{name} takes {} argument{}, found {}",
            sig.params.len(),
            if sig.params.len() == 1 { "" } else { "s" },
            args.len()
        )));
    }
    for (k, (arg, &ty)) in args.iter().zip(&sig.params).enumerate() {
        if !arg.fits(ty) {
            return Err(ErrorKind::BadArguments(format!(
                "argument {} of @{name} must be {ty}, found {}",
                k + 1,
                arg.ty()
            )));
        }
    }
    Ok(())
}

/// What went wrong at run time, on either engine.
#[derive(Clone, PartialEq, Debug)]
#[non_exhaustive]
pub enum ErrorKind {
    /// A `load` or `store` index outside `0..len`.
    OutOfBounds {
        /// The index used.
        index: i64,
        /// The slice's length.
        len: usize,
    },
    /// `idiv` or `irem` by zero.
    DivisionByZero,
    /// `alloc` or `tape_alloc` of a negative length.
    NegativeAlloc(i64),
    /// `alloc` or `tape_alloc` of more memory than can be had (or than the engine's
    /// tape limit allows).
    AllocFailed(i64),
    /// Calls nested deeper than the engine's depth limit, reported at the `call`.
    RecursionLimit(usize),
    /// The JIT only: the native stack of the calling thread has too little room left
    /// for one more call (the interpreter's frames live on the heap). The payload is
    /// the call depth reached. Run deep recursions on a thread with a bigger stack,
    /// or lower the depth limit.
    StackExhausted(usize),
    /// `pop` with no scalar on the tape.
    TapeUnderflow,
    /// `pop` found a scalar of another type on top of the tape (the tape is left as
    /// it was). The JIT reports it as the interpreter does, unless its code was
    /// compiled without tape checks (`gradlift_jit::CompileOptions::tape_checks`),
    /// where such a `pop` reads the slot's bits instead.
    TapeMismatch {
        /// The type `pop` takes off the tape.
        expected: Type,
        /// The type on top of the tape.
        found: Type,
    },
    /// `push` could not grow the tape (out of memory, or, on the JIT, beyond the
    /// workspace's tape limit). The payload is the number of scalars on the tape.
    TapeFull(usize),
    /// `tape_view` of a handle that names no tape buffer: not made by `tape_alloc`,
    /// or made before the tape was last reset.
    NoTapeBuffer {
        /// The element type of the view.
        elem: Elem,
        /// The handle.
        handle: i64,
    },
    /// `tape_view` of a tape buffer of another element type.
    TapeBufferMismatch {
        /// The handle.
        handle: i64,
        /// The element type of the view.
        expected: Elem,
        /// The element type of the buffer.
        found: Elem,
    },
    /// A `trap_if` whose condition was true: a debug check of derived code failed.
    /// Holds the instruction's message.
    Trap(String),
    /// The interpreter only: more statements than its fuel allows.
    OutOfFuel(u64),
    /// The arguments do not fit the function's parameters, or there is no such
    /// function.
    BadArguments(String),
    /// A call to an extern function with no host function.
    UnboundExtern(String),
    /// A host function failed (returned an error, panicked, or broke its
    /// signature).
    ExternFailed {
        /// The extern function (without `@`).
        name: String,
        /// What the host said, or what it did wrong.
        message: String,
    },
    /// The JIT only: the function was not compiled (it is not among the roots
    /// compiled, or what they call).
    NotCompiled(String),
    /// The interpreter only: the function is not well-formed (it would not verify;
    /// the JIT refuses such modules when compiling).
    Malformed(String),
    /// The engine broke one of its own invariants: a bug in gradlift, not in the
    /// program.
    Internal(String),
}

impl ErrorKind {
    /// Whether the error is a bug in the engine rather than in the program or its
    /// inputs.
    pub fn is_internal(&self) -> bool {
        matches!(self, ErrorKind::Internal(_))
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ErrorKind::OutOfBounds { index, len } => {
                write!(f, "index {index} out of bounds for length {len}")
            }
            ErrorKind::DivisionByZero => f.write_str("integer division by zero"),
            ErrorKind::NegativeAlloc(n) => write!(f, "allocation of negative length {n}"),
            ErrorKind::AllocFailed(n) => write!(f, "cannot allocate {n} elements"),
            ErrorKind::RecursionLimit(d) => write!(f, "calls nested deeper than {d}"),
            ErrorKind::StackExhausted(d) => {
                write!(f, "native stack exhausted at call depth {d}")
            }
            ErrorKind::TapeUnderflow => f.write_str("tape underflow"),
            ErrorKind::TapeMismatch { expected, found } => {
                let article = if *found == Type::Bool { "a" } else { "an" };
                write!(f, "pop {expected} found {article} {found} on the tape")
            }
            ErrorKind::TapeFull(n) => {
                write!(f, "the tape cannot grow beyond {n} scalars: out of memory")
            }
            ErrorKind::NoTapeBuffer { elem, handle } => {
                write!(f, "tape_view {elem}: no tape buffer with handle {handle}")
            }
            ErrorKind::TapeBufferMismatch {
                handle,
                expected,
                found,
            } => write!(
                f,
                "tape_view {expected}: tape buffer {handle} holds {found}, not {expected}"
            ),
            ErrorKind::Trap(message) => write!(f, "trap: {message}"),
            ErrorKind::OutOfFuel(n) => write!(f, "out of fuel after {n} statements"),
            ErrorKind::BadArguments(m) => f.write_str(m),
            ErrorKind::UnboundExtern(name) => {
                write!(f, "extern function @{name} has no host binding")
            }
            ErrorKind::ExternFailed { name, message } => {
                write!(f, "extern function @{name} failed: {message}")
            }
            ErrorKind::NotCompiled(name) => write!(f, "@{name} was not compiled"),
            ErrorKind::Malformed(m) => write!(f, "malformed IR: {m}"),
            ErrorKind::Internal(m) => write!(f, "engine bug: {m}"),
        }
    }
}

/// A run-time error: which function, which op, where, and what.
#[derive(Clone, PartialEq, Debug)]
pub struct RunError {
    /// The function executing (without `@`).
    pub func: String,
    /// The op that failed (`load`, `idiv`, `call`, ...), empty when the call itself
    /// is refused.
    pub op: String,
    /// The op's source position: `line:col` in IR text when the function was
    /// parsed, `file:line:col` in Rust when it was traced (by `gradlift-trace` or
    /// `#[autodiff_reverse]`); unknown for code a pass made.
    pub pos: Pos,
    /// The slice a failing `load` or `store` accessed, when it can be named: its
    /// name in the IR (`%x`; a traced parameter is named as the Rust one), or
    /// `parameter 2` for an unnamed parameter.
    pub operand: Option<String>,
    /// What went wrong.
    pub kind: ErrorKind,
}

impl RunError {
    /// An error of the call itself, before any op ran (bad arguments, no such
    /// function).
    pub fn refused(func: &str, kind: ErrorKind) -> RunError {
        RunError {
            func: func.to_string(),
            op: String::new(),
            pos: Pos::NONE,
            operand: None,
            kind,
        }
    }

    /// An error of instruction `inst` of `func` (named `name`): its op, its position
    /// from the function's source map and, for a `load` or `store`, the slice it
    /// accessed ([`RunError::operand`]). Both engines build their errors with it.
    pub fn at_inst(name: &str, func: Option<&Function>, inst: Inst, kind: ErrorKind) -> RunError {
        let data = func.and_then(|f| f.insts.get(inst));
        RunError {
            func: name.to_string(),
            op: data.map_or("", |d| d.opcode.name()).to_string(),
            pos: func
                .and_then(|f| f.srcmap.insts.get(inst).copied())
                .unwrap_or(Pos::NONE),
            operand: func.zip(data).and_then(|(f, d)| match d.opcode {
                Opcode::Load | Opcode::Store => describe_slice(f, *d.args.first()?),
                _ => None,
            }),
            kind,
        }
    }
}

/// `%x` for a named value, `parameter 2` for an unnamed parameter.
fn describe_slice(func: &Function, v: Value) -> Option<String> {
    let data = func.values.get(v)?;
    match (&data.name, data.def) {
        (Some(name), _) => Some(format!("%{name}")),
        (None, ValueDef::Param(i)) => Some(format!("parameter {}", i + 1)),
        _ => None,
    }
}

/// A sentence: `in @f, load of %x at 7:10: index 5 out of bounds for length 3`
/// (`at src/lib.rs:12:9` for traced code).
impl fmt::Display for RunError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "in @{}", self.func)?;
        if !self.op.is_empty() {
            write!(f, ", {}", self.op)?;
            if let Some(operand) = &self.operand {
                write!(f, " of {operand}")?;
            }
            if self.pos.is_known() {
                write!(f, " at {}", self.pos)?;
            }
        }
        write!(f, ": {}", self.kind)
    }
}

impl std::error::Error for RunError {}

/// What an engine's tape holds ([`Engine::tape`]).
#[derive(Copy, Clone, PartialEq, Eq, Debug, Default)]
pub struct TapeStats {
    /// The scalars on the tape.
    pub scalars: usize,
    /// The buffers made by `tape_alloc` since the last reset.
    pub buffers: usize,
    /// The bytes the tape holds now: 8 per scalar, and the buffers' elements.
    pub bytes: usize,
    /// The most bytes it held since the last reset. Engines measure it where they
    /// can: the interpreter after every `push` and `tape_alloc`, the JIT at the end
    /// of each call (for a gradient, that is after the forward pass, the peak) and
    /// at every `recompute` (where a checkpointed loop's pullback holds the most).
    pub peak_bytes: usize,
    /// The memory the engine keeps for the tape, used or not (0 where the engine
    /// does not say).
    pub capacity_bytes: usize,
    /// The steps of checkpointed loops that pullbacks ran again since the last
    /// reset (the `recompute` op's counts): the price of the memory a checkpoint
    /// saved. 0 for a gradient without checkpointed loops.
    pub recomputed_steps: u64,
}

/// A host function: takes the arguments (slices as copies of their contents) and
/// returns the results, or a message saying why it failed. What it writes into a
/// `mut` slice argument is copied back into the caller's buffer (it must keep the
/// length); writes into a read-only slice are dropped.
pub type HostFn = dyn Fn(&mut [Val]) -> Result<Vec<Val>, String> + Send + Sync;

/// A host function that borrows its arguments instead of copying them: bound with
/// [`Hosts::bind_args`], called by both engines through [`call_host_args`].
///
/// A scalar parameter arrives by value (`Arg::F64`, ...), a read-only slice
/// parameter `[T]` as `Arg::F64s`/`F32s`/`I64s` and a `mut [T]` parameter as
/// `Arg::F64sMut`/`F32sMut`/`I64sMut`, each borrowing the engine's buffer itself
/// (an argument, an `alloc`, a tape buffer): no copy, no allocation, and what the
/// function writes into a `mut` slice is in the buffer at once. Writes stay when the
/// function then fails (an `Err`, a panic, results that do not fit). It returns the
/// results (scalars; `Vec::new()`, which does not allocate, for none), checked
/// against the signature as [`call_host`] checks them. An engine passes the argument
/// array without allocating for up to eight parameters.
///
/// **Aliasing.** One buffer may be passed twice (`call @g(%s, %s)`), and Rust allows
/// no `&mut` next to another reference to the same memory. So an engine borrows
/// directly every slice argument except those that share memory with an *earlier*
/// slice argument of the same call (the same buffer in the interpreter, overlapping
/// address ranges in the JIT) where one of the two is `mut`. Each of those gets a
/// copy instead: a new vector holding the buffer's contents as they were before the
/// call (so it does not see what the function writes through the earlier argument).
/// After the function returns (whatever it returned, a panic included), the copies
/// of `mut` parameters are written back into their buffers in argument order, so
/// the last `mut` copy of a buffer wins over the earlier ones and over what was
/// written directly through the first argument; copies of read-only parameters are
/// dropped. Such a call allocates; every other call does not.
pub type HostArgsFn = dyn Fn(&mut [Arg<'_>]) -> Result<Vec<Val>, String> + Send + Sync;

/// A binding of [`Hosts`]: one of the two kinds of host function.
#[derive(Clone)]
pub(crate) enum Host {
    /// Arguments as copies ([`Hosts::bind`]).
    Copied(Arc<HostFn>),
    /// Arguments borrowed ([`Hosts::bind_args`]).
    Borrowed(Arc<HostArgsFn>),
}

/// Rust functions for the `extern` functions of a module, by name (without `@`).
/// Both engines take them: `Interpreter::with_hosts` and the JIT's `compile_with`.
///
/// A function is one of two kinds: a [`HostFn`] ([`Hosts::bind`]) gets its
/// arguments as owned [`Val`]s, slices copied in and `mut` ones copied back; a
/// [`HostArgsFn`] ([`Hosts::bind_args`]) borrows the engine's buffers, without a
/// copy. A name has one binding: binding it again, of either kind, replaces it.
///
/// ```
/// use gradlift_ir::engine::{Hosts, Val};
/// use gradlift_ir::interp::Interpreter;
///
/// let module = gradlift_ir::parse("
///     extern @hypot(f64, f64) -> f64
///     func @f(%x: f64) -> f64 {
///     entry:
///         %h = call @hypot(%x, 4.0)
///         ret %h
///     }
/// ")?;
/// let hosts = Hosts::new().bind("hypot", |a: &mut [Val]| match a {
///     [Val::F64(x), Val::F64(y)] => Ok(vec![Val::F64(x.hypot(*y))]),
///     _ => Err("hypot takes two f64".to_string()),
/// });
/// let f = module.func_by_name("f").unwrap();
/// let out = Interpreter::new(&module).with_hosts(&hosts).call(f, &mut [Val::F64(3.0)])?;
/// assert_eq!(out, [Val::F64(5.0)]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Default)]
pub struct Hosts {
    fns: HashMap<String, Host>,
}

impl fmt::Debug for Hosts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut names: Vec<&str> = self.fns.keys().map(String::as_str).collect();
        names.sort_unstable();
        f.debug_struct("Hosts").field("bound", &names).finish()
    }
}

impl Hosts {
    /// No host functions.
    pub fn new() -> Hosts {
        Hosts::default()
    }

    /// Binds the extern function `name` (without `@`) to `f`, replacing an earlier
    /// binding of that name (of either kind).
    pub fn bind(
        mut self,
        name: &str,
        f: impl Fn(&mut [Val]) -> Result<Vec<Val>, String> + Send + Sync + 'static,
    ) -> Hosts {
        self.insert(name, f);
        self
    }

    /// [`Hosts::bind`] in place.
    pub fn insert(
        &mut self,
        name: &str,
        f: impl Fn(&mut [Val]) -> Result<Vec<Val>, String> + Send + Sync + 'static,
    ) {
        self.fns.insert(name.to_string(), Host::Copied(Arc::new(f)));
    }

    /// Binds the extern function `name` (without `@`) to `f`, a host function that
    /// borrows its arguments ([`HostArgsFn`]: slices without a copy, `mut` ones
    /// written in place), replacing an earlier binding of that name (of either
    /// kind).
    ///
    /// ```
    /// use gradlift_ir::engine::{Arg, Hosts, Val};
    /// use gradlift_ir::interp::Interpreter;
    ///
    /// let module = gradlift_ir::parse("
    ///     extern @axpy(f64, [f64], mut [f64])
    ///     func @f(%a: f64, %x: [f64], %y: mut [f64]) -> f64 {
    ///     entry:
    ///         call @axpy(%a, %x, %y)
    ///         %y1 = load %y[1]
    ///         ret %y1
    ///     }
    /// ")?;
    /// // y += a x, into the caller's buffer.
    /// let hosts = Hosts::new().bind_args("axpy", |args: &mut [Arg<'_>]| match args {
    ///     [Arg::F64(a), Arg::F64s(x), Arg::F64sMut(y)] => {
    ///         y.iter_mut().zip(x.iter()).for_each(|(y, x)| *y += *a * x);
    ///         Ok(Vec::new())
    ///     }
    ///     _ => Err("axpy takes f64, [f64], mut [f64]".to_string()),
    /// });
    /// assert!(hosts.get_args("axpy").is_some() && hosts.get("axpy").is_none());
    /// let f = module.func_by_name("f").unwrap();
    /// let mut args = [Val::F64(2.0), Val::F64s(vec![1.0, 2.0]), Val::F64s(vec![10.0, 20.0])];
    /// let out = Interpreter::new(&module).with_hosts(&hosts).call(f, &mut args)?;
    /// assert_eq!(out, [Val::F64(24.0)]);
    /// assert_eq!(args[2], Val::F64s(vec![12.0, 24.0]));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn bind_args(
        mut self,
        name: &str,
        f: impl Fn(&mut [Arg<'_>]) -> Result<Vec<Val>, String> + Send + Sync + 'static,
    ) -> Hosts {
        self.insert_args(name, f);
        self
    }

    /// [`Hosts::bind_args`] in place.
    pub fn insert_args(
        &mut self,
        name: &str,
        f: impl Fn(&mut [Arg<'_>]) -> Result<Vec<Val>, String> + Send + Sync + 'static,
    ) {
        self.fns
            .insert(name.to_string(), Host::Borrowed(Arc::new(f)));
    }

    /// The function bound to `name` by [`Hosts::bind`] (arguments copied); `None`
    /// if `name` is unbound or bound by [`Hosts::bind_args`] (see
    /// [`Hosts::get_args`]).
    pub fn get(&self, name: &str) -> Option<&Arc<HostFn>> {
        match self.fns.get(name)? {
            Host::Copied(f) => Some(f),
            Host::Borrowed(_) => None,
        }
    }

    /// The function bound to `name` by [`Hosts::bind_args`] (arguments borrowed);
    /// `None` if `name` is unbound or bound by [`Hosts::bind`] (see
    /// [`Hosts::get`]).
    pub fn get_args(&self, name: &str) -> Option<&Arc<HostArgsFn>> {
        match self.fns.get(name)? {
            Host::Borrowed(f) => Some(f),
            Host::Copied(_) => None,
        }
    }

    /// Whether no function is bound (of either kind).
    pub fn is_empty(&self) -> bool {
        self.fns.is_empty()
    }

    /// How many functions are bound, of both kinds.
    pub fn len(&self) -> usize {
        self.fns.len()
    }

    /// Every binding made by [`Hosts::bind`], in no particular order; those made by
    /// [`Hosts::bind_args`] are left out (see [`Hosts::iter_args`]).
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Arc<HostFn>)> {
        self.fns.iter().filter_map(|(k, f)| match f {
            Host::Copied(f) => Some((k.as_str(), f)),
            Host::Borrowed(_) => None,
        })
    }

    /// Every binding made by [`Hosts::bind_args`], in no particular order.
    pub fn iter_args(&self) -> impl Iterator<Item = (&str, &Arc<HostArgsFn>)> {
        self.fns.iter().filter_map(|(k, f)| match f {
            Host::Borrowed(f) => Some((k.as_str(), f)),
            Host::Copied(_) => None,
        })
    }

    /// Every binding, of both kinds.
    pub(crate) fn all(&self) -> impl Iterator<Item = (&str, &Host)> {
        self.fns.iter().map(|(k, f)| (k.as_str(), f))
    }
}

/// [`ErrorKind::ExternFailed`] for `@name`.
fn extern_failed(name: &str, message: String) -> ErrorKind {
    ErrorKind::ExternFailed {
        name: name.to_string(),
        message,
    }
}

/// Runs a host function of `@name`: an `Err` and a panic (caught) become
/// [`ErrorKind::ExternFailed`]. Both kinds of host function run through it.
fn run_host(
    name: &str,
    call: impl FnOnce() -> Result<Vec<Val>, String>,
) -> Result<Vec<Val>, ErrorKind> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(call)) {
        Ok(Ok(out)) => Ok(out),
        Ok(Err(m)) => Err(extern_failed(name, m)),
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic".to_string());
            Err(extern_failed(name, format!("it panicked: {what}")))
        }
    }
}

/// Checks the results of a host function of `@name` against its signature `sig`.
fn check_results(name: &str, sig: &Signature, out: &[Val]) -> Result<(), ErrorKind> {
    if out.len() != sig.results.len() {
        return Err(extern_failed(
            name,
            format!(
                "it returned {} values for {} results",
                out.len(),
                sig.results.len()
            ),
        ));
    }
    for (k, (v, &ty)) in out.iter().zip(&sig.results).enumerate() {
        if !v.fits(ty) {
            return Err(extern_failed(
                name,
                format!("result {} must be {ty}, found {}", k + 1, v.ty()),
            ));
        }
    }
    Ok(())
}

/// Calls the host function `f` of the extern `@name` with signature `sig` on
/// `args`, as both engines do. A panic is caught and becomes an error. Afterwards
/// every `mut` slice argument must still have its type and length, and is handed to
/// `write_back` with its index, which copies it into the caller's buffer (and says
/// whether it could); then the results must fit the signature. Every failure is
/// [`ErrorKind::ExternFailed`].
pub fn call_host(
    f: &HostFn,
    name: &str,
    sig: &Signature,
    args: &mut [Val],
    mut write_back: impl FnMut(usize, &Val) -> bool,
) -> Result<Vec<Val>, ErrorKind> {
    // The lengths before the call, to check that `mut` slices kept theirs. A host
    // function has few parameters; this allocates only beyond eight.
    let lens: smallvec::SmallVec<[Option<usize>; 8]> = args.iter().map(Val::slice_len).collect();
    let out = run_host(name, || f(args))?;
    for (k, ((v, &ty), &len)) in args.iter().zip(&sig.params).zip(&lens).enumerate() {
        if ty.is_mut_slice() && !(v.fits(ty) && v.slice_len() == len && write_back(k, v)) {
            return Err(extern_failed(
                name,
                format!("it changed the length or type of argument {}", k + 1),
            ));
        }
    }
    check_results(name, sig, &out)?;
    Ok(out)
}

/// Calls the borrowing host function `f` ([`HostArgsFn`]) of the extern `@name`
/// with signature `sig` on `args`, as both engines do: the arguments must fit the
/// parameters ([`check_args`]; else [`ErrorKind::BadArguments`] and `f` does not
/// run), a panic is caught, and the results must fit the signature, exactly as in
/// [`call_host`]; those failures are [`ErrorKind::ExternFailed`]. What `f` writes
/// into a `mut` slice argument is in it, also when the call fails. Nothing is
/// copied, and nothing allocated but what `f` returns.
///
/// The caller lends the slices: it must not pass one buffer twice where either
/// is `mut` (Rust's borrows already forbid it); engines give such arguments
/// copies (see [`HostArgsFn`]).
pub fn call_host_args(
    f: &HostArgsFn,
    name: &str,
    sig: &Signature,
    args: &mut [Arg<'_>],
) -> Result<Vec<Val>, ErrorKind> {
    check_args(name, sig, args)?;
    let out = run_host(name, || f(args))?;
    check_results(name, sig, &out)?;
    Ok(out)
}

/// An engine: runs the functions of one module, with a tape that persists across
/// calls. The interpreter (`gradlift_ir::interp::Interpreter`) and the JIT
/// (`gradlift_jit::JitEngine`, a compiled module with a workspace) implement it;
/// what one computes the other computes too (the JIT's differential tests hold it
/// to that, bit for bit).
pub trait Engine {
    /// Calls `func` with borrowed arguments (checked with [`check_args`]; `mut`
    /// slices are written in place, also when the call fails), writing its results
    /// into `out` (cleared first).
    fn call_args(
        &mut self,
        func: FuncId,
        args: &mut [Arg<'_>],
        out: &mut Vec<Val>,
    ) -> Result<(), RunError>;
    /// What the tape holds now.
    fn tape(&self) -> TapeStats;
    /// Empties the tape (keeping its memory for later calls, where the engine can).
    fn reset_tape(&mut self);
}
