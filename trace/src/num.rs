//! The numeric traits a generic function is written against, and their native
//! implementations.
//!
//! - [`Float`]: a float scalar: `f64`, `f32`, [`Var<f64>`], [`Var<f32>`]. Arithmetic
//!   with itself, the math functions of the IR, comparisons into [`Float::Bool`], and
//!   the associated integer, boolean and slice types of its world.
//! - [`Real`]: a `Float` that also mixes with plain `f64` numbers (`y * 3.0`,
//!   `x.gt(0.0)`) and converts to and from bits: `f64` and [`Var<f64>`]. Rust's orphan
//!   rule forbids `f32 * 3.0_f64`, so `f32` is a `Float` only; generic code for both
//!   writes `T::lit(3.0)`.
//! - [`Int`] (`i64`, [`Var<i64>`]) and [`Logic`] (`bool`, [`Var<bool>`]): the index and
//!   condition types. Control flow dispatches on them: [`cond`](crate::cond) and
//!   [`while_loop`](crate::while_loop) on the condition's type, [`for_range`](crate::for_range)
//!   on the index type, so the same generic code runs Rust's `if` and loops natively
//!   and records blocks and phis when traced.
//! - [`SliceRead`] and [`SliceWrite`]: slices, indexed by the `Int` type: `&[f64]`,
//!   `&mut [f64]` and `Vec<f64>` natively, [`Slice`], [`SliceMut`] traced.
//!
//! A plain number on the left (`3.0 * y`) works on concrete types (`f64`, `Var<f64>`)
//! and, in generic code, with the bound `f64: Mul<T, Output = T>`: Rust does not let
//! a trait imply bounds on another type. `y * 3.0` needs nothing extra.
//!
//! Natively everything is what Rust does: a slice index out of bounds panics as
//! `x[i]` does. Traced, it is the IR's: a run-time error of the compiled function.

use core::fmt::Debug;
use core::ops::{
    Add, AddAssign, BitAnd, BitOr, BitXor, Div, DivAssign, Mul, MulAssign, Neg, Not, Rem, Shl, Shr,
    Sub, SubAssign,
};

use crate::flow::Carry;
use crate::func::{Param, Ret};
use crate::slice::{Slice, SliceMut};
use crate::var::Var;

/// A float scalar that a generic function computes with: natively `f64` or `f32`,
/// traced [`Var<f64>`] or [`Var<f32>`]. See the [module docs](self).
///
/// The math functions have the names of Rust's float methods (`ln`, `abs`, `powi`,
/// `powf`); comparisons return [`Float::Bool`] (a `bool` natively, a traced
/// [`Var<bool>`] when tracing) and are methods (`x.gt(y)`), since Rust's `<` must
/// return a `bool`.
pub trait Float:
    Copy
    + Debug
    + 'static
    + Add<Output = Self>
    + Sub<Output = Self>
    + Mul<Output = Self>
    + Div<Output = Self>
    + Neg<Output = Self>
    + AddAssign
    + SubAssign
    + MulAssign
    + DivAssign
    + Carry
    + Param
    + Ret
{
    /// The integer type: `i64` natively, [`Var<i64>`] traced.
    type Int: Int<Bool = Self::Bool>;
    /// The boolean type: `bool` natively, [`Var<bool>`] traced.
    type Bool: Logic;
    /// A read-only slice of `Self`: `&[f64]` natively, [`Slice<f64>`] traced.
    type Slice<'a>: SliceRead<Elem = Self, Int = Self::Int> + Param + Copy;
    /// A writable slice of `Self`: `&mut [f64]` natively, [`SliceMut<f64>`] traced.
    type SliceMut<'a>: SliceWrite<Elem = Self, Int = Self::Int> + Param;
    /// A local buffer ([`Float::alloc`]): `Vec<f64>` natively, [`SliceMut<f64>`]
    /// traced.
    type Buf: SliceWrite<Elem = Self, Int = Self::Int>;

    /// The number `x` (rounded to `f32` for `f32` types).
    fn lit(x: f64) -> Self;
    /// `i` converted to a float (`i as f64`).
    fn from_int(i: Self::Int) -> Self;
    /// Truncated toward zero to an integer, saturating (`x as i64`).
    fn to_int(self) -> Self::Int;

    /// Square root.
    fn sqrt(self) -> Self;
    /// `e^x`.
    fn exp(self) -> Self;
    /// Natural logarithm.
    fn ln(self) -> Self;
    /// Sine.
    fn sin(self) -> Self;
    /// Cosine.
    fn cos(self) -> Self;
    /// Tangent.
    fn tan(self) -> Self;
    /// Hyperbolic tangent.
    fn tanh(self) -> Self;
    /// Hyperbolic sine.
    fn sinh(self) -> Self;
    /// Hyperbolic cosine.
    fn cosh(self) -> Self;
    /// Arcsine, in `[-pi/2, pi/2]` (NaN outside `[-1, 1]`).
    fn asin(self) -> Self;
    /// Arccosine, in `[0, pi]` (NaN outside `[-1, 1]`).
    fn acos(self) -> Self;
    /// Arctangent, in `[-pi/2, pi/2]`.
    fn atan(self) -> Self;
    /// The four-quadrant arctangent of `self / other`: `y.atan2(x)` is the angle of
    /// the point `(x, y)`, in `[-pi, pi]`.
    fn atan2(self, other: Self) -> Self;
    /// `sqrt(self² + other²)`, without undue overflow or underflow.
    fn hypot(self, other: Self) -> Self;
    /// Base-10 logarithm.
    fn log10(self) -> Self;
    /// Base-2 logarithm.
    fn log2(self) -> Self;
    /// `2^x`.
    fn exp2(self) -> Self;
    /// `self * a + b` with one rounding (fused multiply-add), as Rust's `mul_add`.
    fn mul_add(self, a: Self, b: Self) -> Self;
    /// Absolute value.
    fn abs(self) -> Self;
    /// Largest integer not above.
    fn floor(self) -> Self;
    /// Smallest integer not below.
    fn ceil(self) -> Self;
    /// `x^n` for an integer `n`.
    fn powi(self, n: i32) -> Self;
    /// `x^e`.
    fn powf(self, e: Self) -> Self;
    /// The smaller of the two.
    fn min(self, other: Self) -> Self;
    /// The larger of the two.
    fn max(self, other: Self) -> Self;

    /// `self < other`
    fn lt(self, other: impl Into<Self>) -> Self::Bool;
    /// `self <= other`
    fn le(self, other: impl Into<Self>) -> Self::Bool;
    /// `self > other`
    fn gt(self, other: impl Into<Self>) -> Self::Bool;
    /// `self >= other`
    fn ge(self, other: impl Into<Self>) -> Self::Bool;
    /// `self == other`
    fn eq(self, other: impl Into<Self>) -> Self::Bool;
    /// `self != other`
    fn ne(self, other: impl Into<Self>) -> Self::Bool;

    /// A zero-filled local buffer of `n` elements (the IR's `alloc`), alive until the
    /// function returns.
    fn alloc(n: Self::Int) -> Self::Buf;
}

/// A [`Float`] that mixes with plain `f64` numbers: `f64` and [`Var<f64>`]. See the
/// [module docs](self).
pub trait Real:
    Float
    + From<f64>
    + Add<f64, Output = Self>
    + Sub<f64, Output = Self>
    + Mul<f64, Output = Self>
    + Div<f64, Output = Self>
    + AddAssign<f64>
    + SubAssign<f64>
    + MulAssign<f64>
    + DivAssign<f64>
{
    /// The bits of `self` as an integer (`f64::to_bits`, as an `i64`).
    fn to_bits(self) -> Self::Int;
    /// The float with the bits of `i` (`f64::from_bits`).
    fn from_bits(i: Self::Int) -> Self;
}

/// An integer: `i64` natively, [`Var<i64>`] traced, with `+ - * / %`, shifts and
/// bitwise operators (also with plain `i64`s). Also the index type of slices and of
/// [`for_range`](crate::for_range).
pub trait Int:
    Copy
    + Debug
    + 'static
    + From<i64>
    + Add<Output = Self>
    + Add<i64, Output = Self>
    + Sub<Output = Self>
    + Sub<i64, Output = Self>
    + Mul<Output = Self>
    + Mul<i64, Output = Self>
    + Div<Output = Self>
    + Div<i64, Output = Self>
    + Rem<Output = Self>
    + Rem<i64, Output = Self>
    + Neg<Output = Self>
    + Shl<i64, Output = Self>
    + Shr<i64, Output = Self>
    + BitAnd<Output = Self>
    + BitAnd<i64, Output = Self>
    + BitOr<Output = Self>
    + BitOr<i64, Output = Self>
    + BitXor<Output = Self>
    + BitXor<i64, Output = Self>
    + AddAssign
    + AddAssign<i64>
    + SubAssign
    + SubAssign<i64>
    + Carry
    + Param
    + Ret
{
    /// The boolean type of comparisons.
    type Bool: Logic;

    /// `self < other`
    fn lt(self, other: impl Into<Self>) -> Self::Bool;
    /// `self <= other`
    fn le(self, other: impl Into<Self>) -> Self::Bool;
    /// `self > other`
    fn gt(self, other: impl Into<Self>) -> Self::Bool;
    /// `self >= other`
    fn ge(self, other: impl Into<Self>) -> Self::Bool;
    /// `self == other`
    fn eq(self, other: impl Into<Self>) -> Self::Bool;
    /// `self != other`
    fn ne(self, other: impl Into<Self>) -> Self::Bool;

    /// The loop of [`for_range`](crate::for_range) for this index type.
    #[doc(hidden)]
    fn range_loop<C: Carry>(start: Self, end: Self, init: C, body: impl FnMut(Self, C) -> C) -> C;

    /// The loop of [`for_range_checkpointed`](crate::for_range_checkpointed):
    /// natively [`range_loop`](Self::range_loop).
    #[doc(hidden)]
    fn range_loop_checkpointed<C: Carry>(
        start: Self,
        end: Self,
        snapshots: Self,
        init: C,
        body: impl FnMut(Self, C) -> C,
    ) -> C {
        let _ = snapshots;
        Self::range_loop(start, end, init, body)
    }
}

/// A boolean: `bool` natively, [`Var<bool>`] traced, with `&`, `|`, `^` and `!`.
pub trait Logic:
    Copy
    + Debug
    + 'static
    + From<bool>
    + BitAnd<Output = Self>
    + BitOr<Output = Self>
    + BitXor<Output = Self>
    + Not<Output = Self>
    + Carry
    + Param
    + Ret
{
    /// `a` where `self` holds, `b` elsewhere, for any carried values (both are
    /// computed; for work on one side only, see [`cond`](crate::cond)).
    fn select<V: Carry>(self, a: V, b: V) -> V;

    /// The conditional of [`cond`](crate::cond) for this condition type.
    #[doc(hidden)]
    fn cond_impl<R: Carry>(self, then: impl FnOnce() -> R, els: impl FnOnce() -> R) -> R;

    /// The loop of [`while_loop`](crate::while_loop) for this condition type.
    #[doc(hidden)]
    fn while_impl<C: Carry>(init: C, cond: impl FnMut(&C) -> Self, body: impl FnMut(C) -> C) -> C;
}

/// A slice that can be read: `len` and `at`, indexed by the [`Int`] type.
#[allow(clippy::len_without_is_empty)]
pub trait SliceRead {
    /// The element type.
    type Elem;
    /// The index type.
    type Int;
    /// The number of elements.
    fn len(&self) -> Self::Int;
    /// Element `i` (natively, out of bounds panics as `x[i]` does; traced, it is a
    /// run-time error of the compiled function).
    fn at(&self, i: impl Into<Self::Int>) -> Self::Elem;
}

/// A slice that can also be written.
pub trait SliceWrite: SliceRead {
    /// Sets element `i` to `v`.
    fn set(&mut self, i: impl Into<Self::Int>, v: impl Into<Self::Elem>);
}

fn index(i: i64) -> usize {
    // A negative index becomes one far out of bounds, so indexing panics as Rust does.
    usize::try_from(i).unwrap_or(usize::MAX)
}

macro_rules! native_slices {
    ($($t:ty),*) => {$(
        impl SliceRead for &[$t] {
            type Elem = $t;
            type Int = i64;
            fn len(&self) -> i64 {
                <[$t]>::len(self) as i64
            }
            #[track_caller]
            fn at(&self, i: impl Into<i64>) -> $t {
                self[index(i.into())]
            }
        }
        impl SliceRead for &mut [$t] {
            type Elem = $t;
            type Int = i64;
            fn len(&self) -> i64 {
                <[$t]>::len(self) as i64
            }
            #[track_caller]
            fn at(&self, i: impl Into<i64>) -> $t {
                self[index(i.into())]
            }
        }
        impl SliceWrite for &mut [$t] {
            #[track_caller]
            fn set(&mut self, i: impl Into<i64>, v: impl Into<$t>) {
                self[index(i.into())] = v.into();
            }
        }
        impl SliceRead for Vec<$t> {
            type Elem = $t;
            type Int = i64;
            fn len(&self) -> i64 {
                Vec::len(self) as i64
            }
            #[track_caller]
            fn at(&self, i: impl Into<i64>) -> $t {
                self[index(i.into())]
            }
        }
        impl SliceWrite for Vec<$t> {
            #[track_caller]
            fn set(&mut self, i: impl Into<i64>, v: impl Into<$t>) {
                self[index(i.into())] = v.into();
            }
        }
    )*};
}
native_slices!(f64, f32, i64);

macro_rules! native_float {
    ($t:ty, $zero:expr) => {
        impl Float for $t {
            type Int = i64;
            type Bool = bool;
            type Slice<'a> = &'a [$t];
            type SliceMut<'a> = &'a mut [$t];
            type Buf = Vec<$t>;

            fn lit(x: f64) -> $t {
                x as $t
            }
            fn from_int(i: i64) -> $t {
                i as $t
            }
            fn to_int(self) -> i64 {
                self as i64
            }
            fn sqrt(self) -> $t {
                <$t>::sqrt(self)
            }
            fn exp(self) -> $t {
                <$t>::exp(self)
            }
            fn ln(self) -> $t {
                <$t>::ln(self)
            }
            fn sin(self) -> $t {
                <$t>::sin(self)
            }
            fn cos(self) -> $t {
                <$t>::cos(self)
            }
            fn tan(self) -> $t {
                <$t>::tan(self)
            }
            fn tanh(self) -> $t {
                <$t>::tanh(self)
            }
            fn sinh(self) -> $t {
                <$t>::sinh(self)
            }
            fn cosh(self) -> $t {
                <$t>::cosh(self)
            }
            fn asin(self) -> $t {
                <$t>::asin(self)
            }
            fn acos(self) -> $t {
                <$t>::acos(self)
            }
            fn atan(self) -> $t {
                <$t>::atan(self)
            }
            fn atan2(self, other: $t) -> $t {
                <$t>::atan2(self, other)
            }
            fn hypot(self, other: $t) -> $t {
                <$t>::hypot(self, other)
            }
            fn log10(self) -> $t {
                <$t>::log10(self)
            }
            fn log2(self) -> $t {
                <$t>::log2(self)
            }
            fn exp2(self) -> $t {
                <$t>::exp2(self)
            }
            fn mul_add(self, a: $t, b: $t) -> $t {
                <$t>::mul_add(self, a, b)
            }
            fn abs(self) -> $t {
                <$t>::abs(self)
            }
            fn floor(self) -> $t {
                <$t>::floor(self)
            }
            fn ceil(self) -> $t {
                <$t>::ceil(self)
            }
            fn powi(self, n: i32) -> $t {
                <$t>::powi(self, n)
            }
            fn powf(self, e: $t) -> $t {
                <$t>::powf(self, e)
            }
            fn min(self, other: $t) -> $t {
                <$t>::min(self, other)
            }
            fn max(self, other: $t) -> $t {
                <$t>::max(self, other)
            }
            fn lt(self, other: impl Into<$t>) -> bool {
                self < other.into()
            }
            fn le(self, other: impl Into<$t>) -> bool {
                self <= other.into()
            }
            fn gt(self, other: impl Into<$t>) -> bool {
                self > other.into()
            }
            fn ge(self, other: impl Into<$t>) -> bool {
                self >= other.into()
            }
            fn eq(self, other: impl Into<$t>) -> bool {
                self == other.into()
            }
            fn ne(self, other: impl Into<$t>) -> bool {
                self != other.into()
            }
            #[track_caller]
            fn alloc(n: i64) -> Vec<$t> {
                let n = usize::try_from(n).expect("alloc of a negative length");
                vec![$zero; n]
            }
        }
    };
}
native_float!(f64, 0.0);
native_float!(f32, 0.0);

impl Real for f64 {
    fn to_bits(self) -> i64 {
        f64::to_bits(self) as i64
    }
    fn from_bits(i: i64) -> f64 {
        f64::from_bits(i as u64)
    }
}

impl Int for i64 {
    type Bool = bool;
    fn lt(self, other: impl Into<i64>) -> bool {
        self < other.into()
    }
    fn le(self, other: impl Into<i64>) -> bool {
        self <= other.into()
    }
    fn gt(self, other: impl Into<i64>) -> bool {
        self > other.into()
    }
    fn ge(self, other: impl Into<i64>) -> bool {
        self >= other.into()
    }
    fn eq(self, other: impl Into<i64>) -> bool {
        self == other.into()
    }
    fn ne(self, other: impl Into<i64>) -> bool {
        self != other.into()
    }
    fn range_loop<C: Carry>(start: i64, end: i64, init: C, mut body: impl FnMut(i64, C) -> C) -> C {
        let mut c = init;
        let mut i = start;
        while i < end {
            c = body(i, c);
            i += 1;
        }
        c
    }
}

impl Logic for bool {
    fn select<V: Carry>(self, a: V, b: V) -> V {
        if self { a } else { b }
    }
    fn cond_impl<R: Carry>(self, then: impl FnOnce() -> R, els: impl FnOnce() -> R) -> R {
        if self { then() } else { els() }
    }
    fn while_impl<C: Carry>(
        init: C,
        mut cond: impl FnMut(&C) -> bool,
        mut body: impl FnMut(C) -> C,
    ) -> C {
        let mut c = init;
        while cond(&c) {
            c = body(c);
        }
        c
    }
}

// The traced implementations.

use gradlift_ir::{CmpPred, Imm, Opcode, Type};

use crate::var::op;

/// The six comparisons, each one `fcmp` or `icmp`.
macro_rules! traced_compare {
    ($cmp:ident) => {
        traced_compare!($cmp: lt Lt, le Le, gt Gt, ge Ge, eq Eq, ne Ne);
    };
    ($cmp:ident: $($m:ident $p:ident),*) => {$(
        #[track_caller]
        fn $m(self, other: impl Into<Self>) -> Var<bool> {
            $cmp(stringify!($m), CmpPred::$p, self, other.into())
        }
    )*};
}

/// Float methods of one operand, each one op.
macro_rules! traced_unary {
    ($($m:ident $op:ident),* $(,)?) => {$(
        #[track_caller]
        fn $m(self) -> Self {
            op(stringify!($m), Opcode::$op, Imm::None, &[self.operand()])
        }
    )*};
}

/// Float methods of two operands (`self` first), each one op.
macro_rules! traced_binary {
    ($($m:ident $op:ident),* $(,)?) => {$(
        #[track_caller]
        fn $m(self, other: Self) -> Self {
            op(stringify!($m), Opcode::$op, Imm::None, &[self.operand(), other.operand()])
        }
    )*};
}

macro_rules! traced_float {
    ($p:ty, $lit:expr) => {
        impl Float for Var<$p> {
            type Int = Var<i64>;
            type Bool = Var<bool>;
            type Slice<'a> = Slice<$p>;
            type SliceMut<'a> = SliceMut<$p>;
            type Buf = SliceMut<$p>;

            #[track_caller]
            fn lit(x: f64) -> Self {
                Var::constant($lit(x))
            }
            #[track_caller]
            fn from_int(i: Var<i64>) -> Self {
                op(
                    "cast",
                    Opcode::Cast,
                    Imm::Type(<$p as crate::var::Prim>::TY),
                    &[i.operand()],
                )
            }
            #[track_caller]
            fn to_int(self) -> Var<i64> {
                op(
                    "cast",
                    Opcode::Cast,
                    Imm::Type(Type::I64),
                    &[self.operand()],
                )
            }
            traced_unary! {
                sqrt Sqrt, exp Exp, ln Log, sin Sin, cos Cos, tan Tan, tanh Tanh, abs Fabs,
                floor Floor, ceil Ceil, sinh Sinh, cosh Cosh, asin Asin, acos Acos,
                atan Atan, log10 Log10, log2 Log2, exp2 Exp2,
            }
            traced_binary! {
                atan2 Atan2, hypot Hypot,
            }
            #[track_caller]
            fn mul_add(self, a: Self, b: Self) -> Self {
                op(
                    "mul_add",
                    Opcode::Fma,
                    Imm::None,
                    &[self.operand(), a.operand(), b.operand()],
                )
            }
            #[track_caller]
            fn powi(self, n: i32) -> Self {
                let n = Var::constant(i64::from(n));
                op(
                    "powi",
                    Opcode::Powi,
                    Imm::None,
                    &[self.operand(), n.operand()],
                )
            }
            #[track_caller]
            fn powf(self, e: Self) -> Self {
                op(
                    "powf",
                    Opcode::Pow,
                    Imm::None,
                    &[self.operand(), e.operand()],
                )
            }
            #[track_caller]
            fn min(self, other: Self) -> Self {
                op(
                    "min",
                    Opcode::Fmin,
                    Imm::None,
                    &[self.operand(), other.operand()],
                )
            }
            #[track_caller]
            fn max(self, other: Self) -> Self {
                op(
                    "max",
                    Opcode::Fmax,
                    Imm::None,
                    &[self.operand(), other.operand()],
                )
            }
            traced_compare!(fcmp);
            #[track_caller]
            fn alloc(n: Var<i64>) -> SliceMut<$p> {
                crate::slice::alloc(n)
            }
        }
    };
}
traced_float!(f64, |x: f64| x);
traced_float!(f32, |x: f64| x as f32);

#[track_caller]
fn fcmp<P: crate::var::Prim>(name: &'static str, p: CmpPred, a: Var<P>, b: Var<P>) -> Var<bool> {
    op(name, Opcode::Fcmp, Imm::Cmp(p), &[a.operand(), b.operand()])
}

#[track_caller]
fn icmp(name: &'static str, p: CmpPred, a: Var<i64>, b: Var<i64>) -> Var<bool> {
    op(name, Opcode::Icmp, Imm::Cmp(p), &[a.operand(), b.operand()])
}

impl Real for Var<f64> {
    #[track_caller]
    fn to_bits(self) -> Var<i64> {
        op(
            "to_bits",
            Opcode::Bitcast,
            Imm::Type(Type::I64),
            &[self.operand()],
        )
    }
    #[track_caller]
    fn from_bits(i: Var<i64>) -> Var<f64> {
        op(
            "from_bits",
            Opcode::Bitcast,
            Imm::Type(Type::F64),
            &[i.operand()],
        )
    }
}

impl Int for Var<i64> {
    type Bool = Var<bool>;
    traced_compare!(icmp);
    #[track_caller]
    fn range_loop<C: Carry>(start: Self, end: Self, init: C, body: impl FnMut(Self, C) -> C) -> C {
        crate::flow::traced_for(start, end, None, init, body)
    }
    #[track_caller]
    fn range_loop_checkpointed<C: Carry>(
        start: Self,
        end: Self,
        snapshots: Self,
        init: C,
        body: impl FnMut(Self, C) -> C,
    ) -> C {
        crate::flow::traced_for(start, end, Some(snapshots), init, body)
    }
}

impl Logic for Var<bool> {
    #[track_caller]
    fn select<V: Carry>(self, a: V, b: V) -> V {
        crate::flow::traced_select(self, a, b)
    }
    #[track_caller]
    fn cond_impl<R: Carry>(self, then: impl FnOnce() -> R, els: impl FnOnce() -> R) -> R {
        crate::flow::traced_cond(self, then, els)
    }
    #[track_caller]
    fn while_impl<C: Carry>(init: C, cond: impl FnMut(&C) -> Self, body: impl FnMut(C) -> C) -> C {
        crate::flow::traced_while(init, cond, body)
    }
}
