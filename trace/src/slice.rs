//! Traced slices: [`Slice<P>`](Slice) (read-only) and [`SliceMut<P>`](SliceMut)
//! (writable), for `P` one of `f64`, `f32`, `i64`.
//!
//! They are handles (`Copy`) to a slice parameter of the traced function or to a
//! local buffer ([`Float::alloc`](crate::Float::alloc)); `len`, `at` and `set` record
//! the IR's `len`, `load` and `store`, with traced indices. A `Slice` has no `set`: a
//! store into a read-only slice does not compile.
//!
//! ```compile_fail
//! use gradlift_trace::{Slice, SliceRead, SliceWrite, Var};
//! fn zero_first(x: Slice<f64>) -> Var {
//!     let mut x = x;
//!     x.set(0, 0.0); // error: `Slice<f64>` is read-only (no `SliceWrite`)
//!     x.at(0)
//! }
//! ```

use core::fmt;
use core::marker::PhantomData;

use gradlift_ir::{Elem, Imm, Opcode, Type, Value};

use crate::ctx::{self, Tag, caller};
use crate::num::{SliceRead, SliceWrite};
use crate::var::{Prim, Var, op};

/// The element types of slices: `f64`, `f32`, `i64`.
pub trait ElemPrim: Prim {
    /// The IR element type.
    const ELEM: Elem;
}
impl ElemPrim for f64 {
    const ELEM: Elem = Elem::F64;
}
impl ElemPrim for f32 {
    const ELEM: Elem = Elem::F32;
}
impl ElemPrim for i64 {
    const ELEM: Elem = Elem::I64;
}

/// A traced read-only slice of `P`. See the [module docs](self).
pub struct Slice<P: ElemPrim = f64> {
    pub(crate) tag: Tag,
    pub(crate) value: Value,
    _p: PhantomData<P>,
}

/// A traced writable slice of `P`. See the [module docs](self).
pub struct SliceMut<P: ElemPrim = f64> {
    pub(crate) tag: Tag,
    pub(crate) value: Value,
    _p: PhantomData<P>,
}

macro_rules! handle {
    ($s:ident) => {
        impl<P: ElemPrim> Clone for $s<P> {
            fn clone(&self) -> Self {
                *self
            }
        }
        impl<P: ElemPrim> Copy for $s<P> {}
        impl<P: ElemPrim> fmt::Debug for $s<P> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}<{}>({})", stringify!($s), P::TY, self.value)
            }
        }
        impl<P: ElemPrim> $s<P> {
            pub(crate) fn from_parts((tag, value): (Tag, Value)) -> Self {
                $s {
                    tag,
                    value,
                    _p: PhantomData,
                }
            }
            /// The IR value this stands for.
            pub fn ir_value(self) -> Value {
                self.value
            }
            /// Gives the slice a name in the IR (`%name`), which the run-time errors
            /// of its `load`s and `store`s say: `load of %x at src/lib.rs:12:9`.
            /// Name the parameters with the names they have in your code.
            pub fn named(self, name: &str) -> Self {
                ctx::name_value(self.tag, self.value, name);
                self
            }
        }
        impl<P: ElemPrim> SliceRead for $s<P> {
            type Elem = Var<P>;
            type Int = Var<i64>;
            #[track_caller]
            fn len(&self) -> Var<i64> {
                op("len", Opcode::Len, Imm::None, &[(self.tag, self.value)])
            }
            #[track_caller]
            fn at(&self, i: impl Into<Var<i64>>) -> Var<P> {
                let i = i.into();
                op(
                    "at",
                    Opcode::Load,
                    Imm::None,
                    &[(self.tag, self.value), i.operand()],
                )
            }
        }
    };
}
handle!(Slice);
handle!(SliceMut);

impl<P: ElemPrim> SliceMut<P> {
    /// The same slice, read-only (to pass where a [`Slice`] is expected).
    pub fn read_only(self) -> Slice<P> {
        Slice::from_parts((self.tag, self.value))
    }
}

impl<P: ElemPrim> SliceWrite for SliceMut<P> {
    #[track_caller]
    fn set(&mut self, i: impl Into<Var<i64>>, v: impl Into<Var<P>>) {
        let at = caller();
        let (i, v) = (i.into(), v.into());
        ctx::emit0(
            "set",
            at,
            &[(self.tag, self.value), i.operand(), v.operand()],
            |b, vals| b.store(vals[0], vals[1], vals[2]),
        );
    }
}

/// `alloc P, n`: a zero-filled local buffer.
#[track_caller]
pub(crate) fn alloc<P: ElemPrim>(n: Var<i64>) -> SliceMut<P> {
    let at = caller();
    SliceMut::from_parts(ctx::emit(
        "alloc",
        at,
        &[n.operand()],
        Type::slice_mut(P::ELEM),
        |b, vals| b.alloc(P::ELEM, vals[0]),
    ))
}
