//! The op table: every instruction of the IR, declared once.
//!
//! [`Opcode::ALL`] lists the ops; [`Opcode::info`] gives each one's text name, its
//! [`Shape`] (which operands and immediates it takes, and how its types relate) and a
//! doc line. The printer, the parser, the verifier, the builder and the interpreter
//! all read this table; the typing rule of every shape lives in one function,
//! [`resolve`], so the builder's result types, the parser's literal typing and the
//! verifier's type errors can never disagree.
//!
//! # The tape
//!
//! Four ops exist for derived code: the forward pass saves what the pullback needs on
//! a *tape*, and the pullback takes it back. The tape is an implicit context shared by
//! every call made on one engine (an [`Interpreter`](crate::interp::Interpreter);
//! later the JIT's workspace): it persists across top-level calls, so a forward pass
//! called first and a pullback called next see the same tape. It holds one LIFO stack
//! of scalars and a table of buffers named by handles:
//!
//! - `push %v` pushes a scalar (`f64`, `f32`, `i64` or `bool`). A slice can never be
//!   pushed: the view could outlive its buffer.
//! - `%v = pop T` pops the most recent scalar, which must be a `T`; popping an empty
//!   tape, or a scalar of another type, is a runtime error.
//! - `%h = tape_alloc T, %n` makes a zero-filled buffer of `n` elements of `T` (`f64`,
//!   `f32` or `i64`) owned by the tape, and returns an `i64` *handle* naming it. The
//!   buffer lives until the engine resets the tape (between gradient calls, never
//!   during one); nothing in the IR frees it. `n < 0` is a runtime error, and so is a
//!   buffer too large to be had.
//! - `%s = tape_view T, %h` is the `mut [T]` view of the buffer with handle `%h`. Any
//!   number of views of one buffer may exist, in any calls; they alias, like any two
//!   slices of one buffer. A handle that names no live buffer (not made by
//!   `tape_alloc`, or made before the tape was last reset), or a buffer of another
//!   element type, is a runtime error. A view may not be returned (the verifier's
//!   `ret` rule): it is valid only during the gradient call.
//!
//! A handle is an ordinary `i64`: it may be pushed, popped, passed and stored like any
//! other. Its encoding is unspecified; programs get handles only from `tape_alloc`.
//!
//! Well-formed derived code pops exactly what it pushed, in reverse order. A compiled
//! engine may keep one stack per scalar type (a LIFO-matched sequence stays matched
//! per type), so a program must not rely on the type-mismatch error. All four ops have
//! effects: passes never remove, merge or move them.
//!
//! # Debug checks
//!
//! Derived code built in debug mode checks its own invariants at run time (a shadow
//! as long as its primal, say) with one more op:
//!
//! - `trap_if %c, "message"` takes a `bool` and has no result. When `%c` is true, the
//!   call fails with a runtime error carrying the message (the interpreter's
//!   [`ErrorKind::Trap`](crate::interp::ErrorKind::Trap)); when it is false, nothing
//!   happens. The message is an immediate, [`Imm::Msg`], naming a string of the
//!   function's [`messages`](crate::Function::messages) arena.
//!
//! In the text the message is a string literal between double quotes. Inside it, `\"`
//! is a quote, `\\` a backslash, `\n` a newline, `\t` a tab, and `\u{HEX}` (one to six
//! hex digits) the character with that code; no other escape exists, and no control
//! character may stand in it raw. The printer writes `\"`, `\\`, `\n` and `\t`, and
//! `\u{..}` (lowercase hex) for every other control character, and every other
//! character as itself, so a message prints and parses back to itself. Like the tape
//! ops, `trap_if` has effects: passes never remove, merge or move it.

use core::fmt;

use smallvec::{SmallVec, smallvec};

use crate::entities::{FuncId, Msg};
use crate::module::Signature;
use crate::types::{Elem, Scalar, Type};

/// A comparison predicate of `fcmp` and `icmp`.
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug)]
pub enum CmpPred {
    /// Equal. For floats, false if either is NaN.
    Eq,
    /// Not equal. For floats, true if either is NaN.
    Ne,
    /// Less than.
    Lt,
    /// Less than or equal.
    Le,
    /// Greater than.
    Gt,
    /// Greater than or equal.
    Ge,
}

impl CmpPred {
    /// All predicates, in text-format order.
    pub const ALL: [CmpPred; 6] = [
        CmpPred::Eq,
        CmpPred::Ne,
        CmpPred::Lt,
        CmpPred::Le,
        CmpPred::Gt,
        CmpPred::Ge,
    ];

    /// The predicate's name in the text format.
    pub fn name(self) -> &'static str {
        match self {
            CmpPred::Eq => "eq",
            CmpPred::Ne => "ne",
            CmpPred::Lt => "lt",
            CmpPred::Le => "le",
            CmpPred::Gt => "gt",
            CmpPred::Ge => "ge",
        }
    }

    /// The predicate named `name` in the text format.
    pub fn from_name(name: &str) -> Option<CmpPred> {
        CmpPred::ALL.into_iter().find(|p| p.name() == name)
    }

    /// Applies the predicate to two ordered values (floats: IEEE semantics, so every
    /// predicate but `ne` is false when either side is NaN).
    pub fn apply<T: PartialOrd>(self, a: T, b: T) -> bool {
        match self {
            CmpPred::Eq => a == b,
            CmpPred::Ne => a != b,
            CmpPred::Lt => a < b,
            CmpPred::Le => a <= b,
            CmpPred::Gt => a > b,
            CmpPred::Ge => a >= b,
        }
    }
}

impl fmt::Display for CmpPred {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How an op's operands, immediate and results relate: the typing rule it follows and
/// the way it is written in the text format.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub enum Shape {
    /// `op a, b`: two floats of one type; that float.
    FloatBinary,
    /// `op a`: one float; that float.
    FloatUnary,
    /// `op a, b, c`: three floats of one type; that float.
    FloatTernary,
    /// `powi x, n`: a float and an `i64`; the float.
    Powi,
    /// `op a, b`: two `i64`; `i64`.
    IntBinary,
    /// `op a`: one `i64`; `i64`.
    IntUnary,
    /// `fcmp P a, b`: two floats of one type; `bool`.
    FloatCmp,
    /// `icmp P a, b`: two `i64`; `bool`.
    IntCmp,
    /// `op a, b`: two `bool`; `bool`.
    BoolBinary,
    /// `not a`: one `bool`; `bool`.
    BoolUnary,
    /// `select c, a, b`: a `bool` and two values of one type; that type.
    Select,
    /// `cast T x`: one scalar; `T` (`f64`, `f32` or `i64`).
    Cast,
    /// `bitcast T x`: `f64` to `i64` or `i64` to `f64`.
    Bitcast,
    /// `const T lit`: no operands; `T`.
    Const,
    /// `len s`: a slice; `i64`.
    Len,
    /// `load s[i]`: a slice and an `i64`; the element.
    Load,
    /// `store s[i], v`: a `mut` slice, an `i64` and an element; no result.
    Store,
    /// `alloc T, n`: an `i64`; `mut [T]` (`T` is `f64`, `f32` or `i64`).
    Alloc,
    /// `push v`: one scalar; no result.
    Push,
    /// `pop T`: no operands; `T` (a scalar type).
    Pop,
    /// `tape_alloc T, n`: an `i64` length; an `i64` handle (`T` is `f64`, `f32` or
    /// `i64`).
    TapeAlloc,
    /// `tape_view T, h`: an `i64` handle; `mut [T]` (`T` is `f64`, `f32` or `i64`).
    TapeView,
    /// `call @f(args)`: the callee's parameters; the callee's results.
    Call,
    /// `trap_if c, "message"`: a `bool` and a message; no result.
    TrapIf,
    /// `op n`: one `i64`; no result (`checkpoint_loop`, `recompute`).
    Note,
}

/// One row of the op table.
#[derive(Copy, Clone, Debug)]
pub struct OpInfo {
    /// The op's name in the text format.
    pub name: &'static str,
    /// Its typing rule and syntax.
    pub shape: Shape,
    /// One line saying what it computes.
    pub doc: &'static str,
}

macro_rules! ops {
    ($($(#[$attr:meta])* $variant:ident = $name:literal, $shape:ident, $doc:literal;)*) => {
        /// An instruction's operation. See the [module docs](self) and [`Opcode::info`].
        #[derive(Copy, Clone, PartialEq, Eq, Hash, Debug)]
        pub enum Opcode {
            $(#[doc = $doc] $variant,)*
        }

        impl Opcode {
            /// Every op, in table order.
            pub const ALL: &'static [Opcode] = &[$(Opcode::$variant,)*];

            /// This op's row of the table.
            pub fn info(self) -> &'static OpInfo {
                match self {
                    $(Opcode::$variant => &OpInfo {
                        name: $name,
                        shape: Shape::$shape,
                        doc: $doc,
                    },)*
                }
            }
        }
    };
}

ops! {
    Fadd = "fadd", FloatBinary, "Float addition.";
    Fsub = "fsub", FloatBinary, "Float subtraction.";
    Fmul = "fmul", FloatBinary, "Float multiplication.";
    Fdiv = "fdiv", FloatBinary, "Float division (IEEE: x / 0 is inf or nan).";
    Fmin = "fmin", FloatBinary, "The smaller of two floats; nan if either is nan; -0.0 is less than 0.0.";
    Fmax = "fmax", FloatBinary, "The larger of two floats; nan if either is nan; 0.0 is greater than -0.0.";
    Pow = "pow", FloatBinary, "x raised to the float power y (C `pow`).";
    Atan2 = "atan2", FloatBinary, "`atan2 y, x`: the angle of the point (x, y) in radians, in [-pi, pi] (C `atan2`).";
    Hypot = "hypot", FloatBinary, "sqrt(x² + y²) without undue overflow or underflow (C `hypot`).";
    Fneg = "fneg", FloatUnary, "Float negation.";
    Fabs = "fabs", FloatUnary, "Absolute value.";
    Sqrt = "sqrt", FloatUnary, "Square root (nan below zero).";
    Exp = "exp", FloatUnary, "Natural exponential.";
    Log = "log", FloatUnary, "Natural logarithm (-inf at 0, nan below zero).";
    Sin = "sin", FloatUnary, "Sine.";
    Cos = "cos", FloatUnary, "Cosine.";
    Tan = "tan", FloatUnary, "Tangent.";
    Tanh = "tanh", FloatUnary, "Hyperbolic tangent.";
    Sinh = "sinh", FloatUnary, "Hyperbolic sine.";
    Cosh = "cosh", FloatUnary, "Hyperbolic cosine.";
    Asin = "asin", FloatUnary, "Arcsine, in [-pi/2, pi/2] (nan outside [-1, 1]).";
    Acos = "acos", FloatUnary, "Arccosine, in [0, pi] (nan outside [-1, 1]).";
    Atan = "atan", FloatUnary, "Arctangent, in [-pi/2, pi/2].";
    Log10 = "log10", FloatUnary, "Base-10 logarithm (-inf at 0, nan below zero).";
    Log2 = "log2", FloatUnary, "Base-2 logarithm (-inf at 0, nan below zero).";
    Exp2 = "exp2", FloatUnary, "2 raised to the power x.";
    Floor = "floor", FloatUnary, "Largest integer value not above x.";
    Ceil = "ceil", FloatUnary, "Smallest integer value not below x.";
    Powi = "powi", Powi, "x raised to an integer power.";
    Fma = "fma", FloatTernary, "`fma a, b, c`: a * b + c rounded once (fused multiply-add, Rust's `mul_add`).";
    Iadd = "iadd", IntBinary, "Integer addition, wrapping.";
    Isub = "isub", IntBinary, "Integer subtraction, wrapping.";
    Imul = "imul", IntBinary, "Integer multiplication, wrapping.";
    Idiv = "idiv", IntBinary, "Integer division toward zero; by 0 a runtime error; i64::MIN / -1 wraps.";
    Irem = "irem", IntBinary, "Remainder of `idiv` (sign of the dividend); by 0 a runtime error.";
    Ishl = "ishl", IntBinary, "Shift left by the amount modulo 64.";
    Ishr = "ishr", IntBinary, "Arithmetic shift right by the amount modulo 64.";
    Iand = "iand", IntBinary, "Bitwise and.";
    Ior = "ior", IntBinary, "Bitwise or.";
    Ixor = "ixor", IntBinary, "Bitwise exclusive or.";
    Ineg = "ineg", IntUnary, "Integer negation, wrapping.";
    Fcmp = "fcmp", FloatCmp, "Float comparison (IEEE: ordered predicates are false on nan).";
    Icmp = "icmp", IntCmp, "Signed integer comparison.";
    And = "and", BoolBinary, "Boolean and.";
    Or = "or", BoolBinary, "Boolean or.";
    Xor = "xor", BoolBinary, "Boolean exclusive or.";
    Not = "not", BoolUnary, "Boolean negation.";
    Select = "select", Select, "`select c, a, b` is a if c else b.";
    Cast = "cast", Cast, "Numeric conversion: int to float rounds to nearest, float to int truncates toward zero and saturates (nan gives 0), bool to number is 0 or 1.";
    Bitcast = "bitcast", Bitcast, "Reinterprets the bits of an f64 as an i64 or back.";
    Const = "const", Const, "A constant.";
    Len = "len", Len, "The length of a slice.";
    Load = "load", Load, "Reads element i of a slice; out of bounds is a runtime error.";
    Store = "store", Store, "Writes element i of a mut slice; out of bounds is a runtime error.";
    Alloc = "alloc", Alloc, "A zero-filled local buffer of n elements, alive until the function returns; n < 0 is a runtime error.";
    Call = "call", Call, "Calls a function of the module.";
    Push = "push", Push, "Pushes a scalar onto the tape.";
    Pop = "pop", Pop, "Pops the most recent scalar off the tape; an empty tape or a scalar of another type is a runtime error.";
    TapeAlloc = "tape_alloc", TapeAlloc, "A zero-filled buffer of n elements owned by the tape, alive until the engine resets the tape; returns an i64 handle naming it. n < 0 is a runtime error.";
    TapeView = "tape_view", TapeView, "The mut slice view of the tape buffer a handle names; a handle of no live buffer, or of a buffer of another element type, is a runtime error.";
    TrapIf = "trap_if", TrapIf, "A debug check: a runtime error carrying the message when the bool operand is true; nothing when it is false.";
    CheckpointLoop = "checkpoint_loop", Note, "Marks the loop whose header holds it for binomial checkpointing in reverse mode, keeping at most n snapshots (n <= 0: chosen by the rule's budget); computes nothing.";
    Recompute = "recompute", Note, "Derived code: counts n steps run again by a checkpointed loop's pullback (the engine's TapeStats::recomputed_steps), and lets the engine note the tape's size.";
}

impl Shape {
    /// Whether ops of this shape compute a scalar from scalars alone, touching no
    /// memory and no tape: arithmetic, comparisons, logic, `select`, casts,
    /// constants.
    pub fn is_scalar(self) -> bool {
        matches!(
            self,
            Shape::FloatBinary
                | Shape::FloatUnary
                | Shape::FloatTernary
                | Shape::Powi
                | Shape::IntBinary
                | Shape::IntUnary
                | Shape::FloatCmp
                | Shape::IntCmp
                | Shape::BoolBinary
                | Shape::BoolUnary
                | Shape::Select
                | Shape::Cast
                | Shape::Bitcast
                | Shape::Const
        )
    }
}

impl Opcode {
    /// The op's name in the text format.
    pub fn name(self) -> &'static str {
        self.info().name
    }

    /// The op's shape (typing rule and syntax).
    pub fn shape(self) -> Shape {
        self.info().shape
    }

    /// The op named `name` in the text format.
    pub fn from_name(name: &str) -> Option<Opcode> {
        Opcode::ALL.iter().copied().find(|op| op.name() == name)
    }

    /// The immediate this op carries, as an [`ImmKind`].
    pub fn imm_kind(self) -> ImmKind {
        match self.shape() {
            Shape::FloatCmp | Shape::IntCmp => ImmKind::Cmp,
            Shape::Cast
            | Shape::Bitcast
            | Shape::Alloc
            | Shape::Pop
            | Shape::TapeAlloc
            | Shape::TapeView => ImmKind::Type,
            Shape::Const => ImmKind::Const,
            Shape::Call => ImmKind::Func,
            Shape::TrapIf => ImmKind::Msg,
            _ => ImmKind::None,
        }
    }

    /// The fixed number of operands, or `None` for `call` (the callee decides).
    pub fn arity(self) -> Option<usize> {
        Some(match self.shape() {
            Shape::Const | Shape::Pop => 0,
            Shape::FloatUnary
            | Shape::IntUnary
            | Shape::BoolUnary
            | Shape::Cast
            | Shape::Bitcast
            | Shape::Len
            | Shape::Alloc
            | Shape::Push
            | Shape::TapeAlloc
            | Shape::TapeView
            | Shape::TrapIf
            | Shape::Note => 1,
            Shape::FloatBinary
            | Shape::Powi
            | Shape::IntBinary
            | Shape::FloatCmp
            | Shape::IntCmp
            | Shape::BoolBinary
            | Shape::Load => 2,
            Shape::FloatTernary | Shape::Select | Shape::Store => 3,
            Shape::Call => return None,
        })
    }

    /// The fixed number of results, or `None` for `call` (the callee decides).
    pub fn result_count(self) -> Option<usize> {
        match self.shape() {
            Shape::Store | Shape::Push | Shape::TrapIf | Shape::Note => Some(0),
            Shape::Call => None,
            _ => Some(1),
        }
    }

    /// Whether the op writes memory, allocates, calls, touches the tape, or can fail
    /// at run time (`load`, `idiv`, `irem`, `trap_if`): such instructions are not pure
    /// functions of their operands, and passes may not drop, merge or move them freely.
    pub fn has_effects(self) -> bool {
        matches!(
            self,
            Opcode::Store
                | Opcode::Alloc
                | Opcode::Call
                | Opcode::Load
                | Opcode::Idiv
                | Opcode::Irem
                | Opcode::Push
                | Opcode::Pop
                | Opcode::TapeAlloc
                | Opcode::TapeView
                | Opcode::TrapIf
                | Opcode::CheckpointLoop
                | Opcode::Recompute
        )
    }
}

impl fmt::Display for Opcode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What kind of immediate an op carries (see [`Imm`]).
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub enum ImmKind {
    /// None.
    None,
    /// A comparison predicate.
    Cmp,
    /// A type: the target of `cast`/`bitcast`, the element type of `alloc`,
    /// `tape_alloc` and `tape_view`, the type `pop` takes off the tape.
    Type,
    /// A constant.
    Const,
    /// A callee.
    Func,
    /// A message of the function (`trap_if`).
    Msg,
}

/// The immediate of an instruction: the part written in the text that is not an operand.
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug)]
pub enum Imm {
    /// No immediate.
    None,
    /// The predicate of `fcmp`/`icmp`.
    Cmp(CmpPred),
    /// The target type of `cast`/`bitcast`, the element type of `alloc`, `tape_alloc`
    /// or `tape_view`, or the type of `pop` (a scalar type).
    Type(Type),
    /// The constant of `const`.
    Const(Scalar),
    /// The callee of `call`.
    Func(FuncId),
    /// The message of `trap_if`: a string of the function's
    /// [`messages`](crate::Function::messages).
    Msg(Msg),
}

impl Imm {
    /// The kind of this immediate.
    pub fn kind(&self) -> ImmKind {
        match self {
            Imm::None => ImmKind::None,
            Imm::Cmp(_) => ImmKind::Cmp,
            Imm::Type(_) => ImmKind::Type,
            Imm::Const(_) => ImmKind::Const,
            Imm::Func(_) => ImmKind::Func,
            Imm::Msg(_) => ImmKind::Msg,
        }
    }
}

/// The concrete types of one instruction, as [`resolve`] derives them.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct OpTypes {
    /// The type each operand must fit (see [`Type::fits`]); `None` where any scalar
    /// will do (the operand of `cast`), so a literal there keeps its own type.
    pub params: SmallVec<[Option<Type>; 3]>,
    /// The result types.
    pub results: SmallVec<[Type; 1]>,
}

/// Derives an instruction's concrete operand and result types.
///
/// `args` holds the operand types where known; `None` marks an operand whose type
/// comes from context (a literal whose type is not yet fixed). `callee` is the
/// callee's signature, for `call`. On success, every known operand type fits its
/// parameter type: the caller needs no further check. The error is a sentence about
/// the instruction as written (`"fadd takes floats, found i64"`); callers add where.
pub fn resolve(
    op: Opcode,
    imm: &Imm,
    args: &[Option<Type>],
    callee: Option<&Signature>,
) -> Result<OpTypes, String> {
    if imm.kind() != op.imm_kind() {
        return Err(format!("{op} has a malformed immediate {imm:?}"));
    }
    if let Some(n) = op.arity()
        && args.len() != n
    {
        return Err(format!(
            "{op} takes {n} operand{}, found {}",
            plural(n),
            args.len()
        ));
    }
    let name = op.name();
    // The first known operand type among `idx`, else `default`.
    let unify = |idx: &[usize], default: Type| -> Type {
        idx.iter().find_map(|&i| args[i]).unwrap_or(default)
    };
    let check = |params: SmallVec<[Option<Type>; 3]>,
                 results: SmallVec<[Type; 1]>|
     -> Result<OpTypes, String> {
        for (i, (arg, param)) in args.iter().zip(&params).enumerate() {
            if let (Some(arg), Some(param)) = (arg, param)
                && !arg.fits(*param)
            {
                return Err(format!(
                    "operand {} of {name} must be {param}, found {arg}",
                    i + 1
                ));
            }
        }
        Ok(OpTypes { params, results })
    };
    match op.shape() {
        Shape::FloatBinary | Shape::FloatCmp => {
            let t = unify(&[0, 1], Type::F64);
            if !t.is_float() {
                return Err(format!("{name} takes floats, found {t}"));
            }
            let r = if op.shape() == Shape::FloatCmp {
                Type::Bool
            } else {
                t
            };
            check(smallvec![Some(t), Some(t)], smallvec![r])
        }
        Shape::FloatTernary => {
            let t = unify(&[0, 1, 2], Type::F64);
            if !t.is_float() {
                return Err(format!("{name} takes floats, found {t}"));
            }
            check(smallvec![Some(t), Some(t), Some(t)], smallvec![t])
        }
        Shape::FloatUnary | Shape::Powi => {
            let t = unify(&[0], Type::F64);
            if !t.is_float() {
                return Err(format!("{name} takes a float, found {t}"));
            }
            if op.shape() == Shape::Powi {
                check(smallvec![Some(t), Some(Type::I64)], smallvec![t])
            } else {
                check(smallvec![Some(t)], smallvec![t])
            }
        }
        Shape::IntBinary => check(
            smallvec![Some(Type::I64), Some(Type::I64)],
            smallvec![Type::I64],
        ),
        Shape::IntUnary => check(smallvec![Some(Type::I64)], smallvec![Type::I64]),
        Shape::IntCmp => check(
            smallvec![Some(Type::I64), Some(Type::I64)],
            smallvec![Type::Bool],
        ),
        Shape::BoolBinary => check(
            smallvec![Some(Type::Bool), Some(Type::Bool)],
            smallvec![Type::Bool],
        ),
        Shape::BoolUnary => check(smallvec![Some(Type::Bool)], smallvec![Type::Bool]),
        Shape::Select => {
            // A `mut [T]` and a `[T]` arm give a `[T]`.
            let t = match (args[1], args[2]) {
                (Some(a), Some(b)) if a != b && b.fits(a) => a,
                (Some(a), Some(b)) if a != b && a.fits(b) => b,
                (a, b) => a.or(b).unwrap_or(Type::F64),
            };
            check(smallvec![Some(Type::Bool), Some(t), Some(t)], smallvec![t])
        }
        Shape::Cast => {
            let Imm::Type(to) = *imm else { unreachable!() };
            if !matches!(to, Type::F64 | Type::F32 | Type::I64) {
                return Err(format!("cast can only produce f64, f32 or i64, not {to}"));
            }
            if let Some(from) = args[0]
                && !from.is_scalar()
            {
                return Err(format!("cast takes a scalar, found {from}"));
            }
            check(smallvec![None], smallvec![to])
        }
        Shape::Bitcast => {
            let Imm::Type(to) = *imm else { unreachable!() };
            let from = match to {
                Type::I64 => Type::F64,
                Type::F64 => Type::I64,
                _ => return Err(format!("bitcast goes between f64 and i64, not to {to}")),
            };
            check(smallvec![Some(from)], smallvec![to])
        }
        Shape::Const => {
            let Imm::Const(c) = *imm else { unreachable!() };
            check(smallvec![], smallvec![c.ty()])
        }
        Shape::Len => match args[0] {
            Some(t) if t.is_slice() => check(smallvec![Some(t)], smallvec![Type::I64]),
            Some(t) => Err(format!("len takes a slice, found {t}")),
            None => Err("len takes a slice, found a literal".to_string()),
        },
        Shape::Load => match args[0] {
            Some(t @ Type::Slice { elem, .. }) => {
                check(smallvec![Some(t), Some(Type::I64)], smallvec![elem.ty()])
            }
            Some(t) => Err(format!("load reads from a slice, found {t}")),
            None => Err("load reads from a slice, found a literal".to_string()),
        },
        Shape::Store => match args[0] {
            Some(
                t @ Type::Slice {
                    elem,
                    mutable: true,
                },
            ) => check(
                smallvec![Some(t), Some(Type::I64), Some(elem.ty())],
                smallvec![],
            ),
            Some(t @ Type::Slice { .. }) => Err(format!(
                "store needs a `mut` slice, found the read-only {t}"
            )),
            Some(t) => Err(format!("store writes into a slice, found {t}")),
            None => Err("store writes into a slice, found a literal".to_string()),
        },
        Shape::Alloc => {
            let Imm::Type(t) = *imm else { unreachable!() };
            let Some(elem) = Elem::of(t) else {
                return Err(format!("{name} makes buffers of f64, f32 or i64, not {t}"));
            };
            check(smallvec![Some(Type::I64)], smallvec![Type::slice_mut(elem)])
        }
        Shape::Push => {
            if let Some(t) = args[0]
                && !t.is_scalar()
            {
                return Err(format!("push takes a scalar, found {t}"));
            }
            // A literal keeps its own type, as for `cast`.
            check(smallvec![None], smallvec![])
        }
        Shape::Pop => {
            let Imm::Type(t) = *imm else { unreachable!() };
            if !t.is_scalar() {
                return Err(format!("pop takes a scalar type, not {t}"));
            }
            check(smallvec![], smallvec![t])
        }
        Shape::TapeAlloc => {
            let Imm::Type(t) = *imm else { unreachable!() };
            if Elem::of(t).is_none() {
                return Err(format!(
                    "tape_alloc makes buffers of f64, f32 or i64, not {t}"
                ));
            }
            check(smallvec![Some(Type::I64)], smallvec![Type::I64])
        }
        Shape::TapeView => {
            let Imm::Type(t) = *imm else { unreachable!() };
            let Some(elem) = Elem::of(t) else {
                return Err(format!(
                    "tape_view views buffers of f64, f32 or i64, not {t}"
                ));
            };
            check(smallvec![Some(Type::I64)], smallvec![Type::slice_mut(elem)])
        }
        // The message is checked against the function's arena by the verifier:
        // `resolve` sees only the instruction.
        Shape::TrapIf => check(smallvec![Some(Type::Bool)], smallvec![]),
        Shape::Note => check(smallvec![Some(Type::I64)], smallvec![]),
        Shape::Call => {
            let Some(sig) = callee else {
                return Err("call to an unknown function".to_string());
            };
            if args.len() != sig.params.len() {
                return Err(format!(
                    "call passes {} argument{} to a function of {} parameter{}",
                    args.len(),
                    plural(args.len()),
                    sig.params.len(),
                    plural(sig.params.len())
                ));
            }
            check(
                sig.params.iter().map(|&t| Some(t)).collect(),
                sig.results.iter().copied().collect(),
            )
        }
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_op_round_trips_its_name() {
        for &op in Opcode::ALL {
            assert_eq!(Opcode::from_name(op.name()), Some(op));
        }
        assert_eq!(Opcode::ALL.len(), 63);
        assert_eq!(Opcode::from_name("phi"), None);
        // `call @g(..) checkpoint` relies on no op being named `checkpoint`.
        assert_eq!(Opcode::from_name("checkpoint"), None);
    }

    #[test]
    fn literal_operands_take_the_type_of_their_partner() {
        let t = resolve(Opcode::Fmul, &Imm::None, &[None, Some(Type::F32)], None).unwrap();
        assert_eq!(t.params[0], Some(Type::F32));
        assert_eq!(t.results[0], Type::F32);
        let t = resolve(Opcode::Fadd, &Imm::None, &[None, None], None).unwrap();
        assert_eq!(t.results[0], Type::F64);
        let s = Type::slice_mut(Elem::F32);
        let t = resolve(Opcode::Store, &Imm::None, &[Some(s), None, None], None).unwrap();
        assert_eq!(t.params[1..], [Some(Type::I64), Some(Type::F32)]);
    }

    #[test]
    fn fma_takes_three_floats_of_one_type() {
        let op = Opcode::Fma;
        assert_eq!((op.arity(), op.result_count()), (Some(3), Some(1)));
        assert!(op.shape().is_scalar() && !op.has_effects());
        // Literals take the type of the one value among the operands.
        let t = resolve(op, &Imm::None, &[None, None, Some(Type::F32)], None).unwrap();
        assert_eq!(t.params[..], [Some(Type::F32); 3]);
        assert_eq!(t.results[..], [Type::F32]);
        let t = resolve(op, &Imm::None, &[None, None, None], None).unwrap();
        assert_eq!(t.results[..], [Type::F64]);
        let e = resolve(
            op,
            &Imm::None,
            &[Some(Type::F64), None, Some(Type::F32)],
            None,
        )
        .unwrap_err();
        assert_eq!(e, "operand 3 of fma must be f64, found f32");
        let e = resolve(op, &Imm::None, &[Some(Type::I64), None, None], None).unwrap_err();
        assert_eq!(e, "fma takes floats, found i64");
        let e = resolve(op, &Imm::None, &[None, None], None).unwrap_err();
        assert_eq!(e, "fma takes 3 operands, found 2");
        for op in [Opcode::Atan2, Opcode::Hypot] {
            assert_eq!(op.shape(), Shape::FloatBinary);
        }
    }

    #[test]
    fn ill_typed_instructions_say_why() {
        let e = resolve(Opcode::Fadd, &Imm::None, &[Some(Type::I64), None], None).unwrap_err();
        assert_eq!(e, "fadd takes floats, found i64");
        let e = resolve(
            Opcode::Fadd,
            &Imm::None,
            &[Some(Type::F64), Some(Type::F32)],
            None,
        )
        .unwrap_err();
        assert_eq!(e, "operand 2 of fadd must be f64, found f32");
        let ro = Type::slice(Elem::F64);
        let e = resolve(Opcode::Store, &Imm::None, &[Some(ro), None, None], None).unwrap_err();
        assert!(e.contains("read-only"), "{e}");
        let e = resolve(Opcode::Fneg, &Imm::None, &[], None).unwrap_err();
        assert_eq!(e, "fneg takes 1 operand, found 0");
    }

    #[test]
    fn tape_ops_take_scalars_and_name_buffers_by_handles() {
        let sf = Type::slice(Elem::F64);
        let t = resolve(Opcode::Push, &Imm::None, &[None], None).unwrap();
        assert_eq!((t.params.to_vec(), t.results.len()), (vec![None], 0));
        let t = resolve(Opcode::Push, &Imm::None, &[Some(Type::Bool)], None).unwrap();
        assert!(t.results.is_empty());
        let e = resolve(Opcode::Push, &Imm::None, &[Some(sf)], None).unwrap_err();
        assert_eq!(e, "push takes a scalar, found [f64]");
        let t = resolve(Opcode::Pop, &Imm::Type(Type::F32), &[], None).unwrap();
        assert_eq!(t.results[..], [Type::F32]);
        let e = resolve(Opcode::Pop, &Imm::Type(sf), &[], None).unwrap_err();
        assert_eq!(e, "pop takes a scalar type, not [f64]");
        let t = resolve(Opcode::TapeAlloc, &Imm::Type(Type::I64), &[None], None).unwrap();
        assert_eq!(t.params[..], [Some(Type::I64)]);
        assert_eq!(t.results[..], [Type::I64]);
        let e = resolve(Opcode::TapeAlloc, &Imm::Type(Type::Bool), &[None], None).unwrap_err();
        assert_eq!(e, "tape_alloc makes buffers of f64, f32 or i64, not bool");
        let e = resolve(
            Opcode::TapeAlloc,
            &Imm::Type(Type::F64),
            &[Some(Type::F64)],
            None,
        )
        .unwrap_err();
        assert_eq!(e, "operand 1 of tape_alloc must be i64, found f64");
        let t = resolve(Opcode::TapeView, &Imm::Type(Type::F32), &[None], None).unwrap();
        assert_eq!(t.params[..], [Some(Type::I64)]);
        assert_eq!(t.results[..], [Type::slice_mut(Elem::F32)]);
        let e = resolve(Opcode::TapeView, &Imm::Type(sf), &[None], None).unwrap_err();
        assert_eq!(e, "tape_view views buffers of f64, f32 or i64, not [f64]");
        let e = resolve(Opcode::TapeView, &Imm::Type(Type::F64), &[Some(sf)], None).unwrap_err();
        assert_eq!(e, "operand 1 of tape_view must be i64, found [f64]");
        for op in [
            Opcode::Push,
            Opcode::Pop,
            Opcode::TapeAlloc,
            Opcode::TapeView,
        ] {
            assert!(op.has_effects(), "{op}");
            assert_eq!(
                op.imm_kind(),
                if op == Opcode::Push {
                    ImmKind::None
                } else {
                    ImmKind::Type
                }
            );
        }
        assert_eq!(Opcode::Push.result_count(), Some(0));
        assert_eq!(
            (Opcode::TapeAlloc.arity(), Opcode::TapeAlloc.result_count()),
            (Some(1), Some(1))
        );
        assert_eq!(
            (Opcode::TapeView.arity(), Opcode::TapeView.result_count()),
            (Some(1), Some(1))
        );
        assert_eq!(Opcode::Call.result_count(), None);
    }

    #[test]
    fn trap_if_takes_a_bool_and_a_message_and_has_no_result() {
        let op = Opcode::TrapIf;
        assert_eq!(Opcode::from_name("trap_if"), Some(op));
        assert_eq!(
            (
                op.imm_kind(),
                op.arity(),
                op.result_count(),
                op.has_effects()
            ),
            (ImmKind::Msg, Some(1), Some(0), true)
        );
        let msg = Imm::Msg(Msg::from_u32(0));
        assert_eq!(msg.kind(), ImmKind::Msg);
        let t = resolve(op, &msg, &[Some(Type::Bool)], None).unwrap();
        assert_eq!(t.params[..], [Some(Type::Bool)]);
        assert!(t.results.is_empty());
        // A literal condition is typed `bool` from context.
        let t = resolve(op, &msg, &[None], None).unwrap();
        assert_eq!(t.params[..], [Some(Type::Bool)]);
        let e = resolve(op, &msg, &[Some(Type::I64)], None).unwrap_err();
        assert_eq!(e, "operand 1 of trap_if must be bool, found i64");
        let e = resolve(op, &Imm::None, &[Some(Type::Bool)], None).unwrap_err();
        assert_eq!(e, "trap_if has a malformed immediate None");
        let e = resolve(op, &msg, &[], None).unwrap_err();
        assert_eq!(e, "trap_if takes 1 operand, found 0");
        // Messages never make an immediate bigger than it was.
        assert!(core::mem::size_of::<Imm>() <= 16);
    }
}
