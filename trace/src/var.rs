//! Traced scalars: [`Var<P>`](Var) for `P` one of `f64`, `f32`, `i64`, `bool`, with
//! the operators of its Rust counterpart, also mixed with plain numbers (`3.0 * y`).
//!
//! A `Var` is a handle (`Copy`, 12 bytes): the IR value it stands for and the
//! [`Tag`] that says which trace and region made it. Every operator
//! is `#[track_caller]`, so a mistake points at the user's line.

use core::fmt;
use core::marker::PhantomData;
use core::ops::{
    Add, AddAssign, BitAnd, BitOr, BitXor, Div, DivAssign, Mul, MulAssign, Neg, Not, Rem,
    RemAssign, Shl, Shr, Sub, SubAssign,
};

use gradlift_ir::{Imm, Opcode, Scalar, Type, Value};

use crate::ctx::{self, Tag, caller};

mod sealed {
    pub trait Sealed {}
    impl Sealed for f64 {}
    impl Sealed for f32 {}
    impl Sealed for i64 {}
    impl Sealed for bool {}
}

/// The Rust scalars a [`Var`] can stand for: `f64`, `f32`, `i64`, `bool`.
pub trait Prim: sealed::Sealed + Copy + fmt::Debug + 'static {
    /// The IR type.
    const TY: Type;
    /// The IR constant.
    fn scalar(self) -> Scalar;
}

impl Prim for f64 {
    const TY: Type = Type::F64;
    fn scalar(self) -> Scalar {
        Scalar::F64(self)
    }
}
impl Prim for f32 {
    const TY: Type = Type::F32;
    fn scalar(self) -> Scalar {
        Scalar::F32(self)
    }
}
impl Prim for i64 {
    const TY: Type = Type::I64;
    fn scalar(self) -> Scalar {
        Scalar::I64(self)
    }
}
impl Prim for bool {
    const TY: Type = Type::Bool;
    fn scalar(self) -> Scalar {
        Scalar::Bool(self)
    }
}

/// A traced scalar of Rust type `P` (`f64` by default): what a generic function sees
/// where it would see a `P` when it runs natively.
///
/// Arithmetic on `Var`s records IR instead of computing. A `Var` belongs to the trace
/// that made it; using it in another one is an error the trace reports
/// ([`TraceError::ForeignValue`](crate::TraceError::ForeignValue)).
pub struct Var<P: Prim = f64> {
    pub(crate) tag: Tag,
    pub(crate) value: Value,
    _p: PhantomData<P>,
}

impl<P: Prim> Clone for Var<P> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<P: Prim> Copy for Var<P> {}

impl<P: Prim> fmt::Debug for Var<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Var<{}>({})", P::TY, self.value)
    }
}

impl<P: Prim> Var<P> {
    pub(crate) fn from_parts((tag, value): (Tag, Value)) -> Var<P> {
        Var {
            tag,
            value,
            _p: PhantomData,
        }
    }

    pub(crate) fn operand(self) -> (Tag, Value) {
        (self.tag, self.value)
    }

    /// The constant `x` in the running trace.
    pub fn constant(x: P) -> Var<P> {
        Var::from_parts(ctx::constant(x.scalar()))
    }

    /// The IR value this stands for.
    pub fn ir_value(self) -> Value {
        self.value
    }

    /// Gives the value a name in the IR (`%name`), as the dumps print it.
    pub fn named(self, name: &str) -> Self {
        ctx::name_value(self.tag, self.value, name);
        self
    }
}

impl<P: Prim> From<P> for Var<P> {
    fn from(x: P) -> Var<P> {
        Var::constant(x)
    }
}

/// Emits `op` with immediate `imm` on `args`, one result of type `Q`.
#[track_caller]
pub(crate) fn op<Q: Prim>(
    name: &'static str,
    op: Opcode,
    imm: Imm,
    args: &[(Tag, Value)],
) -> Var<Q> {
    let at = caller();
    Var::from_parts(ctx::emit(name, at, args, Q::TY, |b, vals| {
        let inst = b.ins(op, imm, vals);
        b.results(inst).first().copied().unwrap_or(vals[0])
    }))
}

macro_rules! binops {
    ($p:ty: $($tr:ident $m:ident $atr:ident $am:ident = $op:ident $name:literal;)*) => {$(
        impl $tr for Var<$p> {
            type Output = Var<$p>;
            #[track_caller]
            fn $m(self, rhs: Var<$p>) -> Var<$p> {
                op($name, Opcode::$op, Imm::None, &[self.operand(), rhs.operand()])
            }
        }
        impl $tr<$p> for Var<$p> {
            type Output = Var<$p>;
            #[track_caller]
            fn $m(self, rhs: $p) -> Var<$p> {
                op($name, Opcode::$op, Imm::None, &[self.operand(), Var::constant(rhs).operand()])
            }
        }
        impl $tr<Var<$p>> for $p {
            type Output = Var<$p>;
            #[track_caller]
            fn $m(self, rhs: Var<$p>) -> Var<$p> {
                op($name, Opcode::$op, Imm::None, &[Var::constant(self).operand(), rhs.operand()])
            }
        }
        impl $atr for Var<$p> {
            #[track_caller]
            fn $am(&mut self, rhs: Var<$p>) {
                *self = op($name, Opcode::$op, Imm::None, &[self.operand(), rhs.operand()]);
            }
        }
        impl $atr<$p> for Var<$p> {
            #[track_caller]
            fn $am(&mut self, rhs: $p) {
                *self = op($name, Opcode::$op, Imm::None, &[self.operand(), Var::constant(rhs).operand()]);
            }
        }
    )*};
}

binops! { f64:
    Add add AddAssign add_assign = Fadd "+";
    Sub sub SubAssign sub_assign = Fsub "-";
    Mul mul MulAssign mul_assign = Fmul "*";
    Div div DivAssign div_assign = Fdiv "/";
}
binops! { f32:
    Add add AddAssign add_assign = Fadd "+";
    Sub sub SubAssign sub_assign = Fsub "-";
    Mul mul MulAssign mul_assign = Fmul "*";
    Div div DivAssign div_assign = Fdiv "/";
}
binops! { i64:
    Add add AddAssign add_assign = Iadd "+";
    Sub sub SubAssign sub_assign = Isub "-";
    Mul mul MulAssign mul_assign = Imul "*";
    Div div DivAssign div_assign = Idiv "/";
    Rem rem RemAssign rem_assign = Irem "%";
}

macro_rules! plain_binops {
    ($p:ty: $($tr:ident $m:ident = $op:ident $name:literal;)*) => {$(
        impl $tr for Var<$p> {
            type Output = Var<$p>;
            #[track_caller]
            fn $m(self, rhs: Var<$p>) -> Var<$p> {
                op($name, Opcode::$op, Imm::None, &[self.operand(), rhs.operand()])
            }
        }
        impl $tr<$p> for Var<$p> {
            type Output = Var<$p>;
            #[track_caller]
            fn $m(self, rhs: $p) -> Var<$p> {
                op($name, Opcode::$op, Imm::None, &[self.operand(), Var::constant(rhs).operand()])
            }
        }
    )*};
}

plain_binops! { i64:
    Shl shl = Ishl "<<";
    Shr shr = Ishr ">>";
    BitAnd bitand = Iand "&";
    BitOr bitor = Ior "|";
    BitXor bitxor = Ixor "^";
}
plain_binops! { bool:
    BitAnd bitand = And "&";
    BitOr bitor = Or "|";
    BitXor bitxor = Xor "^";
}

impl Neg for Var<f64> {
    type Output = Var<f64>;
    #[track_caller]
    fn neg(self) -> Var<f64> {
        op("-", Opcode::Fneg, Imm::None, &[self.operand()])
    }
}
impl Neg for Var<f32> {
    type Output = Var<f32>;
    #[track_caller]
    fn neg(self) -> Var<f32> {
        op("-", Opcode::Fneg, Imm::None, &[self.operand()])
    }
}
impl Neg for Var<i64> {
    type Output = Var<i64>;
    #[track_caller]
    fn neg(self) -> Var<i64> {
        op("-", Opcode::Ineg, Imm::None, &[self.operand()])
    }
}
impl Not for Var<bool> {
    type Output = Var<bool>;
    #[track_caller]
    fn not(self) -> Var<bool> {
        op("!", Opcode::Not, Imm::None, &[self.operand()])
    }
}
