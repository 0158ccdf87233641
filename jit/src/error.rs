//! The JIT's errors: [`CompileError`] when a module cannot be compiled, [`JitError`]
//! when a compiled call fails at run time.
//!
//! A [`JitError`] mirrors the interpreter's
//! [`InterpError`](gradlift_ir::interp::InterpError): the function, the op, its source
//! position and a [`JitErrorKind`]. Where the two engines can fail the same way, the
//! kinds have the same names and payloads, and [`JitErrorKind::to_interp`] gives the
//! interpreter's kind, so tests compare the two engines' errors directly.

use core::fmt;

use gradlift_ir::interp::ErrorKind;
use gradlift_ir::{Elem, Pos, VerifierErrors};

/// What went wrong at run time in compiled code, or with the arguments of a call.
#[derive(Clone, PartialEq, Debug)]
pub enum JitErrorKind {
    /// A `load` or `store` index outside `0..len`.
    OutOfBounds {
        /// The index used.
        index: i64,
        /// The slice's length.
        len: usize,
    },
    /// `idiv` or `irem` by zero.
    DivisionByZero,
    /// `alloc` of a negative length.
    NegativeAlloc(i64),
    /// `alloc` of more memory than can be had.
    AllocFailed(i64),
    /// Calls nested deeper than the workspace's depth limit
    /// ([`Workspace::max_depth`](crate::Workspace::max_depth)), reported at the `call`.
    RecursionLimit(usize),
    /// The native stack of the calling thread has too little room left for one more
    /// call (the interpreter has no such limit: its frames live on the heap). The
    /// payload is the call depth reached. Run deep recursions on a thread with a
    /// bigger stack, or lower the depth limit.
    StackExhausted(usize),
    /// A `trap_if` whose condition was true. Holds the instruction's message.
    Trap(String),
    /// `pop` with no scalar on the tape.
    TapeUnderflow,
    /// `push` could not grow the tape: the memory cannot be had. The payload is the
    /// number of scalars on the tape.
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
    /// A host function failed (returned an error, panicked, or broke its
    /// signature).
    ExternFailed {
        /// The extern function (without `@`).
        name: String,
        /// What the host said, or what it did wrong.
        message: String,
    },
    /// The arguments do not fit the function's parameters.
    BadArguments(String),
    /// The function was not compiled into this [`Compiled`](crate::Compiled).
    NotCompiled(String),
    /// The compiled code or the runtime broke one of its own invariants: a bug in
    /// gradlift, not in the program.
    Internal(String),
}

impl JitErrorKind {
    /// The interpreter's [`ErrorKind`] for the same failure, where the interpreter
    /// can fail the same way (`None` for [`JitErrorKind::StackExhausted`],
    /// [`JitErrorKind::TapeFull`], [`JitErrorKind::NotCompiled`] and
    /// [`JitErrorKind::Internal`]).
    pub fn to_interp(&self) -> Option<ErrorKind> {
        Some(match self {
            JitErrorKind::OutOfBounds { index, len } => ErrorKind::OutOfBounds {
                index: *index,
                len: *len,
            },
            JitErrorKind::DivisionByZero => ErrorKind::DivisionByZero,
            JitErrorKind::NegativeAlloc(n) => ErrorKind::NegativeAlloc(*n),
            JitErrorKind::AllocFailed(n) => ErrorKind::AllocFailed(*n),
            JitErrorKind::RecursionLimit(d) => ErrorKind::RecursionLimit(*d),
            JitErrorKind::Trap(m) => ErrorKind::Trap(m.clone()),
            JitErrorKind::TapeUnderflow => ErrorKind::TapeUnderflow,
            JitErrorKind::NoTapeBuffer { elem, handle } => ErrorKind::NoTapeBuffer {
                elem: *elem,
                handle: *handle,
            },
            JitErrorKind::TapeBufferMismatch {
                handle,
                expected,
                found,
            } => ErrorKind::TapeBufferMismatch {
                handle: *handle,
                expected: *expected,
                found: *found,
            },
            JitErrorKind::ExternFailed { name, message } => ErrorKind::ExternFailed {
                name: name.clone(),
                message: message.clone(),
            },
            JitErrorKind::BadArguments(m) => ErrorKind::BadArguments(m.clone()),
            JitErrorKind::StackExhausted(_)
            | JitErrorKind::TapeFull(_)
            | JitErrorKind::NotCompiled(_)
            | JitErrorKind::Internal(_) => return None,
        })
    }
}

impl fmt::Display for JitErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JitErrorKind::StackExhausted(d) => {
                write!(f, "native stack exhausted at call depth {d}")
            }
            JitErrorKind::NotCompiled(name) => write!(f, "@{name} was not compiled"),
            JitErrorKind::TapeFull(n) => {
                write!(f, "the tape cannot grow beyond {n} scalars: out of memory")
            }
            JitErrorKind::Internal(m) => write!(f, "JIT bug: {m}"),
            kind => match kind.to_interp() {
                Some(k) => k.fmt(f),
                None => f.write_str("unknown error"),
            },
        }
    }
}

/// A run-time error: which function, which op, where, and what.
#[derive(Clone, PartialEq, Debug)]
pub struct JitError {
    /// The function executing (without `@`).
    pub func: String,
    /// The op that failed (`load`, `idiv`, `call`, ...), empty when the call itself
    /// is refused.
    pub op: String,
    /// The op's source position, when the function was parsed.
    pub pos: Pos,
    /// What went wrong.
    pub kind: JitErrorKind,
}

/// A sentence, as the interpreter writes one: `in @f, load at 7:10: index 5 out of
/// bounds for length 3`.
impl fmt::Display for JitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "in @{}", self.func)?;
        if !self.op.is_empty() {
            write!(f, ", {}", self.op)?;
            if self.pos.is_known() {
                write!(f, " at {}", self.pos)?;
            }
        }
        write!(f, ": {}", self.kind)
    }
}

impl std::error::Error for JitError {}

/// Why a module (or some of its functions) could not be compiled.
#[derive(Clone, Debug)]
pub enum CompileError {
    /// The module does not verify: the JIT compiles verified IR only.
    Verify(VerifierErrors),
    /// A function uses something the JIT does not compile (yet): an op, or a call to
    /// an `extern` function.
    Unsupported {
        /// The function (without `@`).
        func: String,
        /// The op (`push`, `call`, ...).
        op: String,
        /// Its source position, when the function was parsed.
        pos: Pos,
        /// What is not supported.
        what: String,
    },
    /// A compiled function calls an `extern` function that has no host function
    /// ([`Hosts`](crate::Hosts)).
    UnboundExtern {
        /// The extern function (without `@`).
        name: String,
        /// A function that calls it.
        caller: String,
    },
    /// A function asked for is not defined in the module (extern, declared only, or
    /// no such function).
    NotDefined(String),
    /// Cranelift refused the generated code, or the code memory could not be had: a
    /// bug in gradlift, or the machine is out of memory.
    Codegen {
        /// The function being compiled, if the failure concerns one.
        func: Option<String>,
        /// Cranelift's message.
        message: String,
    },
}

impl fmt::Display for CompileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CompileError::Verify(e) => write!(f, "the module does not verify:\n{e}"),
            CompileError::Unsupported {
                func,
                op,
                pos,
                what,
            } => {
                write!(f, "in @{func}, {op}")?;
                if pos.is_known() {
                    write!(f, " at {pos}")?;
                }
                write!(f, ": {what}")
            }
            CompileError::UnboundExtern { name, caller } => write!(
                f,
                "@{caller} calls the extern function @{name}, which has no host function (bind one with Hosts::bind)"
            ),
            CompileError::NotDefined(name) => {
                write!(f, "@{name} has no IR body to compile")
            }
            CompileError::Codegen { func, message } => {
                f.write_str("code generation failed")?;
                if let Some(func) = func {
                    write!(f, " for @{func}")?;
                }
                write!(f, ": {message}")
            }
        }
    }
}

impl std::error::Error for CompileError {}
