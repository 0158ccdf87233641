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
//! - **Host functions.** An `extern` function runs a Rust closure ([`HostFn`]),
//!   bound by name in [`Hosts`]. [`call_host`] is the protocol both engines follow:
//!   arguments as `Val`s, panics caught, `mut` slices checked and copied back,
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

/// Rust functions for the `extern` functions of a module, by name (without `@`).
/// Both engines take them: `Interpreter::with_hosts` and the JIT's `compile_with`.
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
    fns: HashMap<String, Arc<HostFn>>,
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
    /// binding of that name.
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
        self.fns.insert(name.to_string(), Arc::new(f));
    }

    /// The function bound to `name`.
    pub fn get(&self, name: &str) -> Option<&Arc<HostFn>> {
        self.fns.get(name)
    }

    /// Whether no function is bound.
    pub fn is_empty(&self) -> bool {
        self.fns.is_empty()
    }

    /// How many functions are bound.
    pub fn len(&self) -> usize {
        self.fns.len()
    }

    /// Every binding, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Arc<HostFn>)> {
        self.fns.iter().map(|(k, f)| (k.as_str(), f))
    }
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
    let fail = |message| ErrorKind::ExternFailed {
        name: name.to_string(),
        message,
    };
    // The lengths before the call, to check that `mut` slices kept theirs. A host
    // function has few parameters; this allocates only beyond eight.
    let lens: smallvec::SmallVec<[Option<usize>; 8]> = args.iter().map(Val::slice_len).collect();
    let out = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(args))) {
        Ok(Ok(out)) => out,
        Ok(Err(m)) => return Err(fail(m)),
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic".to_string());
            return Err(fail(format!("it panicked: {what}")));
        }
    };
    for (k, ((v, &ty), &len)) in args.iter().zip(&sig.params).zip(&lens).enumerate() {
        if ty.is_mut_slice() && !(v.fits(ty) && v.slice_len() == len && write_back(k, v)) {
            return Err(fail(format!(
                "it changed the length or type of argument {}",
                k + 1
            )));
        }
    }
    if out.len() != sig.results.len() {
        return Err(fail(format!(
            "it returned {} values for {} results",
            out.len(),
            sig.results.len()
        )));
    }
    for (k, (v, &ty)) in out.iter().zip(&sig.results).enumerate() {
        if !v.fits(ty) {
            return Err(fail(format!(
                "result {} must be {ty}, found {}",
                k + 1,
                v.ty()
            )));
        }
    }
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
