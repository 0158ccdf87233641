//! Tracing mistakes, reported when the trace ends.
//!
//! Operators cannot return `Result`, so a mistake made while tracing is recorded in
//! the trace (the first one only: later ones are usually its consequences), the
//! trace goes on with placeholder values, and [`Tracer::function`](crate::Tracer::function)
//! returns the mistake instead of a function. Every error names the traced function
//! and, where the mistake is an operation in user code, the Rust source line of that
//! operation (operators and methods are `#[track_caller]`).

use core::fmt;
use std::panic::Location;

use gradlift_ir::{BuildError, ModuleError, VerifierErrors};

/// A Rust source position: where in user code a mistake was made.
pub type Loc = &'static Location<'static>;

/// Why a trace failed.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum TraceError {
    /// A traced value was used in a trace it does not belong to: one kept from an
    /// earlier trace, or one of a caller's values captured by a traced callee (pass it
    /// as an argument instead).
    ForeignValue {
        /// The function being traced when the value was used.
        func: String,
        /// The operation that used it.
        op: &'static str,
        /// Where.
        at: Loc,
    },
    /// A traced function recorded more instructions than the tracer allows
    /// ([`Tracer::with_max_insts`](crate::Tracer::with_max_insts), 100,000 by
    /// default): most likely a plain Rust loop over traced values, which records its
    /// body once per iteration.
    TooLarge {
        /// The function being traced.
        func: String,
        /// The limit.
        limit: usize,
        /// The operation that crossed it.
        op: &'static str,
        /// Where.
        at: Loc,
    },
    /// A value defined inside a conditional arm or a loop body was used after it (the
    /// Rust closure leaked it, for example through a captured variable). Return it
    /// from the arm or the body instead, as a carried value.
    OutOfScope {
        /// The function being traced.
        func: String,
        /// The operation that used it.
        op: &'static str,
        /// Where.
        at: Loc,
    },
    /// The two arms of a [`cond`](crate::cond) returned values of different shapes:
    /// another number of values (vectors of different lengths), other IR types, or
    /// different plain Rust numbers where one value must come out.
    ArmMismatch {
        /// The function being traced.
        func: String,
        /// What differs.
        detail: String,
        /// Where the `cond` is.
        at: Loc,
    },
    /// A loop body returned carried values of another shape than the loop started
    /// with (see [`ArmMismatch`](Self::ArmMismatch)), or a plain Rust number that
    /// changed from one iteration to the next.
    CarryMismatch {
        /// The function being traced.
        func: String,
        /// What differs.
        detail: String,
        /// Where the loop is.
        at: Loc,
    },
    /// A traced function has a parameter or result that is a plain Rust value (an
    /// `f64`, `&[f64]`, ...) where a traced one is needed: in a traced function every
    /// parameter and result is traced (`Var<f64>`, `Slice<f64>`, ...).
    NotTraced {
        /// The function.
        func: String,
        /// Which parameter or result, and its Rust type.
        what: String,
    },
    /// Two different Rust functions were traced under one IR name, or one name was
    /// used with two signatures.
    NameClash {
        /// The IR name.
        name: String,
        /// What differs.
        detail: String,
    },
    /// A custom derivative does not fit the function it is for.
    CustomRule {
        /// The function with the custom derivative.
        func: String,
        /// What is wrong.
        detail: String,
    },
    /// A trace was started while another was running on this thread (a `Tracer`
    /// used from inside a traced function).
    Nested,
    /// The module refused a function (its name is taken by one that was not traced,
    /// for example).
    Module(ModuleError),
    /// The IR builder refused what the tracer emitted: an operation with operands of
    /// types it does not take (an integer `powi` of an `f32` loaded from an `i64`
    /// slice, ...). The message names the function and the mistake.
    Build(BuildError),
    /// The traced module does not verify. This is a bug in gradlift: the tracer checks
    /// everything that could make invalid IR before emitting it.
    Invalid(VerifierErrors),
}

impl fmt::Display for TraceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TraceError::ForeignValue { func, op, at } => write!(
                f,
                "tracing @{func}, at {at}: `{op}` uses a value that belongs to another trace \
                 (kept from an earlier trace, or captured from a caller: pass it as an argument)"
            ),
            TraceError::TooLarge {
                func,
                limit,
                op,
                at,
            } => write!(
                f,
                "tracing @{func}, at {at}: `{op}` is past the {limit} instructions a traced \
                 function may have; a plain Rust loop over traced values records its body once \
                 per iteration: write it with `for_range` or `while_loop`, which record it once \
                 (or raise the limit with `Tracer::with_max_insts`)"
            ),
            TraceError::OutOfScope { func, op, at } => write!(
                f,
                "tracing @{func}, at {at}: `{op}` uses a value defined inside a conditional arm \
                 or loop body that has ended; return it from the arm or body instead"
            ),
            TraceError::ArmMismatch { func, detail, at } => {
                write!(
                    f,
                    "tracing @{func}, at {at}: the arms of `cond` differ: {detail}"
                )
            }
            TraceError::CarryMismatch { func, detail, at } => write!(
                f,
                "tracing @{func}, at {at}: the loop body's carried values differ from the \
                 loop's initial ones: {detail}"
            ),
            TraceError::NotTraced { func, what } => write!(
                f,
                "tracing @{func}: {what} is a plain Rust value; a traced function's parameters \
                 and results must be traced values (Var<f64>, Var<i64>, Slice<f64>, ...)"
            ),
            TraceError::NameClash { name, detail } => {
                write!(f, "two functions traced as @{name}: {detail}")
            }
            TraceError::CustomRule { func, detail } => {
                write!(f, "the custom derivative of @{func}: {detail}")
            }
            TraceError::Nested => f.write_str(
                "a trace was started while another is running on this thread \
                 (a Tracer used inside a traced function)",
            ),
            TraceError::Module(e) => write!(f, "{e}"),
            TraceError::Build(e) => write!(f, "{e}"),
            TraceError::Invalid(e) => {
                write!(f, "gradlift bug: the traced module does not verify: {e}")
            }
        }
    }
}

impl std::error::Error for TraceError {}

impl From<ModuleError> for TraceError {
    fn from(e: ModuleError) -> TraceError {
        TraceError::Module(e)
    }
}
