//! The reference interpreter. (Stub: being written.)

use core::fmt;

use crate::entities::FuncId;
use crate::function::Pos;
use crate::module::Module;

/// A run-time value passed to or returned from the interpreter.
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

/// Bounds on one interpreter call.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub struct Limits {
    /// The deepest call nesting allowed (the outermost call is depth 1).
    pub max_depth: usize,
    /// The most statements (instructions, phis and terminators) one call may execute;
    /// `None` for no bound.
    pub fuel: Option<u64>,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_depth: 10_000,
            fuel: None,
        }
    }
}

/// What went wrong at run time.
#[derive(Clone, PartialEq, Debug)]
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
    /// `alloc` of a negative length.
    NegativeAlloc(i64),
    /// Calls nested deeper than [`Limits::max_depth`].
    RecursionLimit(usize),
    /// More statements than [`Limits::fuel`].
    OutOfFuel(u64),
    /// The arguments do not fit the function's parameters.
    BadArguments(String),
    /// A call to an extern function with no host binding.
    UnboundExtern(String),
    /// The function is not well-formed (it would not verify).
    Malformed(String),
}

/// A run-time error: which function, which op, where, and what.
#[derive(Clone, PartialEq, Debug)]
pub struct InterpError {
    /// The function executing (without `@`).
    pub func: String,
    /// The op that failed (`load`, `idiv`, `call`, ...), empty when the call itself is refused.
    pub op: String,
    /// The op's source position, when the function was parsed.
    pub pos: Pos,
    /// What went wrong.
    pub kind: ErrorKind,
}

impl fmt::Display for InterpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "in @{}: {:?}", self.func, self.kind)
    }
}

impl std::error::Error for InterpError {}

/// Runs functions of one module.
pub struct Interpreter<'m> {
    module: &'m Module,
    limits: Limits,
}

impl<'m> Interpreter<'m> {
    /// An interpreter for `module` with default [`Limits`].
    pub fn new(module: &'m Module) -> Interpreter<'m> {
        Interpreter {
            module,
            limits: Limits::default(),
        }
    }

    /// Sets the limits.
    pub fn with_limits(mut self, limits: Limits) -> Interpreter<'m> {
        self.limits = limits;
        self
    }

    /// Calls `func` with `args`; `mut` slice arguments are updated in place.
    pub fn call(&mut self, func: FuncId, _args: &mut [Val]) -> Result<Vec<Val>, InterpError> {
        let _ = self.limits;
        Err(InterpError {
            func: self.module.name(func).to_string(),
            op: String::new(),
            pos: Pos::NONE,
            kind: ErrorKind::Malformed("not written yet".into()),
        })
    }
}
