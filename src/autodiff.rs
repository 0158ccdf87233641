//! Gradients of Rust functions: trace a generic function (or a closure) once with
//! [`gradlift_trace`], then ask for gradients with Enzyme's activities, each pattern
//! of activities derived and compiled on first use.
//!
//! ```
//! use gradlift::trace::prelude::*;
//! use gradlift::{Active, Const, Return, autodiff};
//!
//! fn f<T: Real>(x: T, y: T) -> T
//! where
//!     f64: std::ops::Mul<T, Output = T>,
//! {
//!     x * x + 3.0 * y
//! }
//!
//! let mut f = autodiff("f", f::<Var>)?;
//! // Both active: the value and (df/dx, df/dy) = (2x, 3).
//! assert_eq!(f.gradient((Active(2.0), Active(5.0)))?, (19.0, (4.0, 3.0)));
//! // y constant: no derivative for it.
//! assert_eq!(f.gradient((Active(2.0), Const(5.0)))?, (19.0, (4.0, ())));
//! // A constant return: nothing is seeded, every derivative is zero.
//! assert_eq!(f.gradient_with(Return::Const, (Active(2.0), Const(5.0)))?, (19.0, (0.0, ())));
//! // The compiled primal alone.
//! assert_eq!(f.call((2.0, 5.0))?, 19.0);
//! # Ok::<(), gradlift::Error>(())
//! ```
//!
//! # Activities
//!
//! Each argument is wrapped in its activity, and whether the activity fits the
//! parameter is checked when the program compiles ([`ArgActivity`]):
//!
//! | argument | parameter | derivative |
//! |---|---|---|
//! | [`Active(x)`](Active) | [`Var<f64>`], [`Var<f32>`] | returned (`f64`, `f32`) |
//! | [`Const(x)`](Const) | any: `Var<f64>`, `Var<f32>`, `Var<i64>`, `Var<bool>` for `x` a number; [`Slice<E>`] for `&[E]` (or `&Vec<E>`, `&[E; N]`, and the other containers of [`slices`](crate::slices): `ndarray` and `nalgebra` vectors with their features); [`SliceMut<E>`] for `&mut [E]`, whose contents the call updates | `()` |
//! | [`Duplicated(x, dx)`](Duplicated) | `Slice<E>` for `(&[E], &mut [E])`, `SliceMut<E>` for `(&mut [E], &mut [E])`; `E` = `f64`, `f32` | added into `dx` |
//! | [`DuplicatedNoNeed(x, dx)`](DuplicatedNoNeed) | as `Duplicated`, `x` `&` or `&mut` | added into `dx`; `x` not updated |
//!
//! As in Enzyme, a shadow `dx` accumulates: its contents on entry are the initial
//! shadow, and the call adds the gradient to them, so five calls with the same
//! shadow add five gradients. For a writable slice, the shadow on entry is also the
//! cotangent of what the function leaves in it (see
//! [`CompiledGradient::value_and_pullback`]).
//!
//! The return is [`Return::Active`] for [`Autodiff::gradient`] (each float result
//! seeded with 1), any [`Return`] with [`Autodiff::gradient_with`], and active with
//! given seeds with [`Autodiff::pullback`].
//!
//! # Forward mode
//!
//! [`Autodiff::jvp`] gives the value and its directional derivative (a
//! Jacobian-vector product) along tangents given with the arguments, in one sweep,
//! with the activities of `std::autodiff::autodiff_forward`:
//!
//! | argument | parameter | tangent |
//! |---|---|---|
//! | [`Dual(x, dx)`](Dual) | `Var<f64>`, `Var<f32>` | `dx`, a number |
//! | [`Dual(&x, &dx)`](Dual) | `Slice<E>` (`E` = `f64`, `f32`) | `dx`, read only, of `x`'s length |
//! | [`Dual(&mut x, &mut dx)`](Dual) | `SliceMut<E>` | `dx` on entry; on return that of what the function leaves in `x`, **overwritten** |
//! | [`Const(x)`](Const) | any, as for gradients | none |
//!
//! The return is `Dual` for [`Autodiff::jvp`] (the value and the tangent of each
//! float result, [`Native::Tangent`]), `DualOnly` for [`Autodiff::jvp_only`] (the
//! tangent alone) and `Const` for [`Autodiff::jvp_const`] (the value alone; tangents
//! reach the writable `Dual` slices only). [`Autodiff::share_jvp`] gives a pattern
//! as a [`SharedJvp`], as [`Autodiff::share`] does for gradients. One tangent per
//! call (width 1); several directions in one sweep are
//! [`CompiledJvp`](crate::CompiledJvp)'s, with a width, at the lower level.
//!
//! ```
//! use gradlift::trace::prelude::*;
//! use gradlift::{Active, Dual, autodiff};
//!
//! let mut f = autodiff("f", |x: Var, y: Var| x * x * y)?;
//! // Along (1, 2) at (3, 4): 2xy + 2 x^2 = 24 + 18.
//! assert_eq!(f.jvp((Dual(3.0, 1.0), Dual(4.0, 2.0)))?, (36.0, 42.0));
//! // The same number from the gradient: (2xy, x^2) . (1, 2).
//! let (_, (dx, dy)) = f.gradient((Active(3.0), Active(4.0)))?;
//! assert_eq!(dx * 1.0 + dy * 2.0, 42.0);
//! # Ok::<(), gradlift::Error>(())
//! ```
//!
//! # Second order and Jacobians
//!
//! [`Autodiff::hvp`] (a Hessian-vector product, with the value and the gradient),
//! [`Autodiff::hessian`] and [`Autodiff::jacobian`] (dense, a
//! [`Matrix`](crate::Matrix)) take the activities of [`Autodiff::gradient`]: the
//! [`Active`] scalars and the elements of the [`Duplicated`] slices are the
//! coordinates differentiated. Each pattern is compiled on its first call through
//! the [`Pipeline`](crate::Pipeline) ([`Pipeline::compile_hvp`](crate::Pipeline::compile_hvp),
//! [`Pipeline::compile_jacobian`](crate::Pipeline::compile_jacobian)) and kept
//! with its own buffers. `docs/forward-mode.md` ("Second order and Jacobians
//! through `autodiff`") says more.
//!
//! # Costs
//!
//! Tracing happens once, in [`autodiff`]. Each pattern (the activities of the
//! parameters and of the return) is derived and compiled on its first call and kept
//! with its own workspace and buffers; so is each forward-mode pattern (the
//! activities and the return), through the same [`Pipeline`](crate::Pipeline)
//! ([`Pipeline::compile_jvp`](crate::Pipeline::compile_jvp)). Later calls lend the
//! caller's slices, shadows and tangents to the compiled code as they are, copying
//! nothing (but for the primal of a writable `DuplicatedNoNeed` slice, which goes to
//! a scratch copy so that the caller's contents stay), and allocate nothing when the
//! slices keep their lengths (the workspace gathers the memory a call spread over
//! several blocks into one before that call returns, so the next finds room).

use core::fmt;
use core::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

use gradlift_adjoint::{Activity, RetActivity, RuleConfig};
use gradlift_ir::interp::Val;
use gradlift_ir::{Module, TapeStats, Type};
use gradlift_jit::{Arg, Hosts, Workspace};
use gradlift_trace::{Args, Callable, Ret, Slice, SliceMut, Traced, Var};
use smallvec::SmallVec;

use crate::api::{CompiledFunction, CompiledGradient, Error};
use crate::slices::{SliceArg, SliceArgMut};

mod jvp;
mod second;
pub use jvp::{Dual, DualReturn, FwdActivities, FwdActivity, SharedJvp};

/// An active float scalar: its derivative is returned, in the argument's place of
/// the gradient. For parameters [`Var<f64>`] (`Active(2.0)`) and [`Var<f32>`]
/// (`Active(2.0f32)`).
#[derive(Copy, Clone, PartialEq, Debug)]
pub struct Active<T = f64>(pub T);

/// A constant to differentiation: a number, a slice, or a writable slice (whose
/// contents the call updates, as the function leaves them). Its place in the
/// gradient is `()`.
#[derive(Copy, Clone, PartialEq, Debug)]
pub struct Const<T>(pub T);

/// A float slice and its shadow (Enzyme's `Duplicated`, the IR's `dup`): the
/// gradient is added (`+=`) into the shadow, which must have the slice's length.
/// `Duplicated(&x, &mut dx)` for a [`Slice`] parameter, `Duplicated(&mut x, &mut dx)`
/// for a [`SliceMut`] (whose contents the call updates). Its place in the gradient
/// is `()`.
#[derive(PartialEq, Debug)]
pub struct Duplicated<P, S>(pub P, pub S);

/// Like [`Duplicated`], but the primal's contents after the call are not needed
/// (Enzyme's `DuplicatedNoNeed`, the IR's `dupnoneed`): the derived code may use the
/// slice as scratch space, and a writable slice is not updated. The primal may be
/// `&` or `&mut`.
#[derive(PartialEq, Debug)]
pub struct DuplicatedNoNeed<P, S>(pub P, pub S);

/// How the results take part in differentiation.
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug, Default)]
pub enum Return {
    /// Each float result is seeded with 1 (or the seeds of [`Autodiff::pullback`]).
    #[default]
    Active,
    /// The results are constants: nothing is seeded, so only shadows' initial
    /// contents (the cotangents of `mut` slices' final contents) propagate.
    Const,
}

impl From<Return> for RetActivity {
    fn from(r: Return) -> RetActivity {
        match r {
            Return::Active => RetActivity::Active,
            Return::Const => RetActivity::Const,
        }
    }
}

// Scalars and slice elements as `Val`s (into a `Val`: `Val::from`).

trait Scalar: Copy {
    fn of(v: &Val) -> Option<Self>;
}

macro_rules! scalar {
    ($($t:ty => $v:ident),*) => {$(
        impl Scalar for $t {
            fn of(v: &Val) -> Option<$t> {
                match *v {
                    Val::$v(x) => Some(x),
                    _ => None,
                }
            }
        }
    )*};
}
scalar!(f64 => F64, f32 => F32, i64 => I64, bool => Bool);

trait Elem: Copy {
    /// The vector of `v`, which becomes an empty one of this type if it is not one.
    fn buf(v: &mut Val) -> &mut Vec<Self>;
}

macro_rules! elem {
    ($($t:ty => $v:ident),*) => {$(
        impl Elem for $t {
            fn buf(v: &mut Val) -> &mut Vec<$t> {
                if !matches!(v, Val::$v(_)) {
                    *v = Val::$v(Vec::new());
                }
                match v {
                    Val::$v(b) => b,
                    _ => unreachable!("made a {} just above", stringify!($v)),
                }
            }
        }
    )*};
}
elem!(f64 => F64s, f32 => F32s);

/// A copy of `src` in `scratch`'s buffer (no allocation when it has the capacity):
/// a read-only primal passed for a writable parameter ([`DuplicatedNoNeed`]).
fn scratch_copy<'s, E: Elem>(scratch: &'s mut Val, src: &[E]) -> &'s mut [E] {
    let b = E::buf(scratch);
    b.clear();
    b.extend_from_slice(src);
    b
}

/// Checks that the shadow is as long as its slice.
fn check_shadow(x: usize, dx: usize) -> Result<(), String> {
    if x == dx {
        Ok(())
    } else {
        Err(format!(
            "the shadow has length {dx}, but the slice has length {x}"
        ))
    }
}

/// A read-only primal and its shadow, lent, of one length.
fn lend<'s, E, X: SliceArg<E>, D: SliceArgMut<E>>(
    x: &'s mut X,
    dx: &'s mut D,
) -> Result<(&'s [E], &'s mut [E]), String> {
    let x = x.slice_arg().map_err(|e| format!("the slice: {e}"))?;
    let dx = dx.slice_arg_mut().map_err(|e| format!("the shadow: {e}"))?;
    check_shadow(x.len(), dx.len())?;
    Ok((x, dx))
}

/// A writable primal and its shadow, lent, of one length.
fn lend_mut<'s, E, X: SliceArgMut<E>, D: SliceArgMut<E>>(
    x: &'s mut X,
    dx: &'s mut D,
) -> Result<(&'s mut [E], &'s mut [E]), String> {
    let x = x.slice_arg_mut().map_err(|e| format!("the slice: {e}"))?;
    let dx = dx.slice_arg_mut().map_err(|e| format!("the shadow: {e}"))?;
    check_shadow(x.len(), dx.len())?;
    Ok((x, dx))
}

/// A plain Rust value that can be the argument of a traced parameter `P`: a number
/// for a [`Var`], `&c` for a [`Slice<E>`] and `&mut c` for a [`SliceMut<E>`], `c` a
/// container of `E` ([`AsSlice`](crate::AsSlice), [`AsSliceMut`](crate::AsSliceMut): a slice, a `Vec`, an array, and
/// with their features `ndarray` and `nalgebra` vectors), or a view by value
/// ([`SliceArg`], [`SliceArgMut`]). The arguments of [`Autodiff::call`], and what
/// [`Const`] wraps. Slices are passed to the compiled code as they are, never
/// copied.
pub trait Input<P> {
    /// The value as a borrowed argument, or why it cannot be one (a container that
    /// is not contiguous).
    #[doc(hidden)]
    fn arg(&mut self) -> Result<Arg<'_>, String>;
}

macro_rules! scalar_input {
    ($($t:ty => $v:ident),*) => {$(
        impl Input<Var<$t>> for $t {
            fn arg(&mut self) -> Result<Arg<'_>, String> {
                Ok(Arg::$v(*self))
            }
        }
    )*};
}
scalar_input!(f64 => F64, f32 => F32, i64 => I64, bool => Bool);

macro_rules! slice_input {
    ($($t:ty => $v:ident $m:ident),*) => {$(
        impl<S: SliceArg<$t>> Input<Slice<$t>> for S {
            fn arg(&mut self) -> Result<Arg<'_>, String> {
                Ok(Arg::$v(self.slice_arg().map_err(|e| e.to_string())?))
            }
        }
        impl<S: SliceArgMut<$t>> Input<SliceMut<$t>> for S {
            fn arg(&mut self) -> Result<Arg<'_>, String> {
                Ok(Arg::$m(self.slice_arg_mut().map_err(|e| e.to_string())?))
            }
        }
    )*};
}
slice_input!(f64 => F64s F64sMut, f32 => F32s F32sMut, i64 => I64s I64sMut);

/// An activity that fits a traced parameter `P` (see the [module docs](self)), with
/// what it contributes to the gradient.
///
/// An activity that does not fit its parameter does not compile:
///
/// ```compile_fail
/// use gradlift::{Active, autodiff, trace::prelude::*};
///
/// let mut f = autodiff("n", |n: Var<i64>| Var::<f64>::from_int(n)).unwrap();
/// f.gradient((Active(3),)); // error: an i64 cannot be active
/// ```
///
/// ```compile_fail
/// use gradlift::{Duplicated, autodiff, trace::prelude::*};
///
/// let mut f = autodiff("f", |mut x: SliceMut<f64>| x.set(0, 1.0)).unwrap();
/// let (x, mut dx) = ([2.0], [0.0]);
/// f.gradient((Duplicated(&x[..], &mut dx[..]),)); // error: a writable slice needs `&mut x`
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not an activity for a parameter of type `{P}`",
    label = "this argument does not fit its parameter's traced type",
    note = "`Active(x)` fits `Var<f64>` and `Var<f32>`; `Const(x)` fits any parameter (a number for a `Var`, `&[E]` for a `Slice<E>`, `&mut [E]` for a `SliceMut<E>`); `Duplicated(&x, &mut dx)` fits `Slice<f64>`, `Duplicated(&mut x, &mut dx)` fits `SliceMut<f64>` (and `f32`)"
)]
pub trait ArgActivity<P> {
    /// The argument's place in the gradient: the derivative for [`Active`], `()`
    /// otherwise.
    type Grad;
    /// The activity of the parameter in the derived rule.
    #[doc(hidden)]
    const ACTIVITY: Activity;
    /// The primal and the shadow (if any) as borrowed arguments, or why they do
    /// not fit. `scratch` holds a copy of a read-only primal passed for a writable
    /// parameter.
    #[doc(hidden)]
    fn args<'s>(&'s mut self, scratch: &'s mut Val) -> Result<(Arg<'s>, Option<Arg<'s>>), String>;
    /// The derivative, from the pullback's cotangent for an [`Active`] parameter.
    #[doc(hidden)]
    fn grad(ct: Option<&Val>) -> Self::Grad;
}

macro_rules! active {
    ($($t:ty => $v:ident),*) => {$(
        impl ArgActivity<Var<$t>> for Active<$t> {
            type Grad = $t;
            const ACTIVITY: Activity = Activity::Active;
            fn args<'s>(&'s mut self, _: &'s mut Val)
                -> Result<(Arg<'s>, Option<Arg<'s>>), String>
            {
                Ok((Arg::$v(self.0), None))
            }
            fn grad(ct: Option<&Val>) -> $t {
                ct.and_then(<$t>::of).unwrap_or(0.0)
            }
        }
    )*};
}
active!(f64 => F64, f32 => F32);

impl<P, T: Input<P>> ArgActivity<P> for Const<T> {
    type Grad = ();
    const ACTIVITY: Activity = Activity::Const;
    fn args<'s>(&'s mut self, _: &'s mut Val) -> Result<(Arg<'s>, Option<Arg<'s>>), String> {
        Ok((self.0.arg()?, None))
    }
    fn grad(_: Option<&Val>) {}
}

/// The ways a [`Duplicated`] or [`DuplicatedNoNeed`] primal meets its parameter:
/// read-only for `Slice`, writable for `SliceMut`, or (`DuplicatedNoNeed`) a
/// read-only primal copied into the scratch buffer for a writable parameter. The
/// shadow is always writable.
macro_rules! duplicated {
    ($($t:ty => $v:ident $m:ident),*) => {$(
        impl<X: SliceArg<$t>, D: SliceArgMut<$t>> ArgActivity<Slice<$t>> for Duplicated<X, D> {
            type Grad = ();
            const ACTIVITY: Activity = Activity::Dup;
            fn args<'s>(&'s mut self, _: &'s mut Val)
                -> Result<(Arg<'s>, Option<Arg<'s>>), String>
            {
                let (x, dx) = lend(&mut self.0, &mut self.1)?;
                Ok((Arg::$v(x), Some(Arg::$m(dx))))
            }
            fn grad(_: Option<&Val>) {}
        }
        impl<X: SliceArgMut<$t>, D: SliceArgMut<$t>> ArgActivity<SliceMut<$t>>
            for Duplicated<X, D>
        {
            type Grad = ();
            const ACTIVITY: Activity = Activity::Dup;
            fn args<'s>(&'s mut self, _: &'s mut Val)
                -> Result<(Arg<'s>, Option<Arg<'s>>), String>
            {
                let (x, dx) = lend_mut(&mut self.0, &mut self.1)?;
                Ok((Arg::$m(x), Some(Arg::$m(dx))))
            }
            fn grad(_: Option<&Val>) {}
        }
        impl<X: SliceArg<$t>, D: SliceArgMut<$t>> ArgActivity<Slice<$t>>
            for DuplicatedNoNeed<X, D>
        {
            type Grad = ();
            const ACTIVITY: Activity = Activity::DupNoNeed;
            fn args<'s>(&'s mut self, _: &'s mut Val)
                -> Result<(Arg<'s>, Option<Arg<'s>>), String>
            {
                let (x, dx) = lend(&mut self.0, &mut self.1)?;
                Ok((Arg::$v(x), Some(Arg::$m(dx))))
            }
            fn grad(_: Option<&Val>) {}
        }
        impl<X: SliceArg<$t>, D: SliceArgMut<$t>> ArgActivity<SliceMut<$t>>
            for DuplicatedNoNeed<X, D>
        {
            type Grad = ();
            const ACTIVITY: Activity = Activity::DupNoNeed;
            fn args<'s>(&'s mut self, scratch: &'s mut Val)
                -> Result<(Arg<'s>, Option<Arg<'s>>), String>
            {
                // The function writes into its parameter, and the caller's primal
                // need not be updated (it may even be read-only): a copy takes the
                // writes.
                let (x, dx) = lend(&mut self.0, &mut self.1)?;
                Ok((Arg::$m(scratch_copy(scratch, x)), Some(Arg::$m(dx))))
            }
            fn grad(_: Option<&Val>) {}
        }
    )*};
}
duplicated!(f64 => F64s F64sMut, f32 => F32s F32sMut);

/// Borrowed arguments, at most this many without a heap allocation.
type ArgVec<'s> = SmallVec<[Arg<'s>; 8]>;

/// A tuple of activities, one per parameter of the traced argument tuple `A`
/// (implemented for tuples of up to 8 [`ArgActivity`]s).
pub trait Activities<A> {
    /// The gradient: a tuple with one entry per argument ([`ArgActivity::Grad`]).
    type Grad;
    /// The activities, in order.
    #[doc(hidden)]
    const PATTERN: &'static [Activity];
    /// The arguments and shadows, borrowed (`scratch`: one buffer per parameter).
    #[doc(hidden)]
    fn args<'s>(
        &'s mut self,
        scratch: &'s mut [Val],
        args: &mut ArgVec<'s>,
        shadows: &mut ArgVec<'s>,
    ) -> Result<(), Error>;
    /// The gradient from the cotangents of the [`Active`] parameters, in order.
    #[doc(hidden)]
    fn grads(cts: &[Val]) -> Self::Grad;
}

/// A tuple of plain arguments ([`Input`]s), one per parameter of the traced argument
/// tuple `A` (up to 8): the arguments of [`Autodiff::call`].
pub trait Inputs<A> {
    /// The arguments, borrowed, or the first that cannot be lent.
    #[doc(hidden)]
    fn args<'s>(&'s mut self, args: &mut ArgVec<'s>) -> Result<(), Error>;
}

fn bad_argument(k: usize, m: String) -> Error {
    Error::BadArguments(format!("argument {}: {m}", k + 1))
}

macro_rules! tuples {
    ($($n:tt $p:ident $x:ident),*) => {
        impl<$($p, $x: ArgActivity<$p>),*> Activities<($($p,)*)> for ($($x,)*) {
            type Grad = ($($x::Grad,)*);
            const PATTERN: &'static [Activity] = &[$($x::ACTIVITY),*];
            #[allow(unused_variables, unused_mut)]
            fn args<'s>(
                &'s mut self,
                scratch: &'s mut [Val],
                args: &mut ArgVec<'s>,
                shadows: &mut ArgVec<'s>,
            ) -> Result<(), Error> {
                let mut scratch = scratch.iter_mut();
                $(
                    let Some(buf) = scratch.next() else {
                        return Err(bad_argument($n, "no such parameter".to_string()));
                    };
                    let (a, s) = self.$n.args(buf).map_err(|m| bad_argument($n, m))?;
                    args.push(a);
                    shadows.extend(s);
                )*
                Ok(())
            }
            #[allow(unused_variables, unused_mut, clippy::unused_unit)]
            fn grads(cts: &[Val]) -> Self::Grad {
                let mut cts = cts.iter();
                ($($x::grad(if $x::ACTIVITY == Activity::Active { cts.next() } else { None }),)*)
            }
        }
        impl<$($p, $x: Input<$p>),*> Inputs<($($p,)*)> for ($($x,)*) {
            #[allow(unused_variables)]
            fn args<'s>(&'s mut self, args: &mut ArgVec<'s>) -> Result<(), Error> {
                $(args.push(self.$n.arg().map_err(|m| bad_argument($n, m))?);)*
                Ok(())
            }
        }
    };
}
tuples!();
tuples!(0 P0 X0);
tuples!(0 P0 X0, 1 P1 X1);
tuples!(0 P0 X0, 1 P1 X1, 2 P2 X2);
tuples!(0 P0 X0, 1 P1 X1, 2 P2 X2, 3 P3 X3);
tuples!(0 P0 X0, 1 P1 X1, 2 P2 X2, 3 P3 X3, 4 P4 X4);
tuples!(0 P0 X0, 1 P1 X1, 2 P2 X2, 3 P3 X3, 4 P4 X4, 5 P5 X5);
tuples!(0 P0 X0, 1 P1 X1, 2 P2 X2, 3 P3 X3, 4 P4 X4, 5 P5 X5, 6 P6 X6);
tuples!(0 P0 X0, 1 P1 X1, 2 P2 X2, 3 P3 X3, 4 P4 X4, 5 P5 X5, 6 P6 X6, 7 P7 X7);

/// The results of a traced function as plain Rust values: [`Var<f64>`] is `f64`
/// (and so on for `f32`, `i64`, `bool`), `()` is `()`, tuples (up to 4) are tuples.
pub trait Native: Ret {
    /// The plain Rust value.
    type Value;
    /// Its tangent in forward mode ([`Autodiff::jvp`]): the float's type for a
    /// float result, `()` for an integer or boolean one (which has none), a tuple
    /// for a tuple.
    type Tangent;
    /// The value from the results, in order.
    #[doc(hidden)]
    fn native(results: &mut core::slice::Iter<'_, Val>) -> Self::Value;
    /// The tangent from the tangent results (one per float result), in order.
    #[doc(hidden)]
    fn tangent(tangents: &mut core::slice::Iter<'_, Val>) -> Self::Tangent;
}

macro_rules! native_float {
    ($($t:ty),*) => {$(
        impl Native for Var<$t> {
            type Value = $t;
            type Tangent = $t;
            fn native(results: &mut core::slice::Iter<'_, Val>) -> $t {
                results.next().and_then(<$t>::of).unwrap_or(<$t>::NAN)
            }
            fn tangent(tangents: &mut core::slice::Iter<'_, Val>) -> $t {
                tangents.next().and_then(<$t>::of).unwrap_or(<$t>::NAN)
            }
        }
    )*};
}
native_float!(f64, f32);

macro_rules! native_scalar {
    ($($t:ty => $fallback:expr),*) => {$(
        impl Native for Var<$t> {
            type Value = $t;
            type Tangent = ();
            fn native(results: &mut core::slice::Iter<'_, Val>) -> $t {
                results.next().and_then(<$t>::of).unwrap_or($fallback)
            }
            fn tangent(_: &mut core::slice::Iter<'_, Val>) {}
        }
    )*};
}
native_scalar!(i64 => 0, bool => false);

impl Native for () {
    type Value = ();
    type Tangent = ();
    fn native(_: &mut core::slice::Iter<'_, Val>) {}
    fn tangent(_: &mut core::slice::Iter<'_, Val>) {}
}

macro_rules! native_tuple {
    ($($t:ident),*) => {
        impl<$($t: Native),*> Native for ($($t,)*) {
            type Value = ($($t::Value,)*);
            type Tangent = ($($t::Tangent,)*);
            fn native(results: &mut core::slice::Iter<'_, Val>) -> Self::Value {
                ($($t::native(results),)*)
            }
            fn tangent(tangents: &mut core::slice::Iter<'_, Val>) -> Self::Tangent {
                ($($t::tangent(tangents),)*)
            }
        }
    };
}
native_tuple!(A, B);
native_tuple!(A, B, C);
native_tuple!(A, B, C, D);

/// A traced function with its compiled gradients, one per activity pattern used so
/// far. Make one with [`autodiff`] (a Rust function or closure) or
/// [`Autodiff::from_traced`] (a module traced with a
/// [`Tracer`](gradlift_trace::Tracer)).
///
/// `A` is the traced argument tuple (`(Var, Var)`, `(Slice<f64>, Slice<f64>)`, ...),
/// `R` the traced result (`Var`, `(Var, Var)`, `()`, ...). See the
/// [module docs](self).
pub struct Autodiff<A, R> {
    name: String,
    module: Module,
    hosts: Hosts,
    n_params: usize,
    patterns: Vec<Pattern>,
    /// The forward-mode patterns ([`Autodiff::jvp`]).
    jvps: Vec<jvp::JvpPattern>,
    /// The second-order patterns ([`Autodiff::hvp`], [`Autodiff::hessian`]).
    hvps: Vec<second::HvpPattern>,
    /// The Jacobian patterns ([`Autodiff::jacobian`]).
    jacobians: Vec<second::JacobianPattern>,
    primal: Option<Primal>,
    compile_time: Duration,
    /// [`Autodiff::with_checkpoint_bytes`].
    checkpoint_bytes: Option<u64>,
    /// The pattern of the last gradient.
    last: Option<usize>,
    _sig: PhantomData<fn(A) -> R>,
}

/// A compiled gradient of one activity pattern, with its buffers.
struct Pattern {
    config: RuleConfig,
    grad: Arc<CompiledGradient>,
    state: CallState,
}

/// The per-thread state of calls of a [`SharedGradient`] or a [`SharedJvp`]: a
/// [`Workspace`] and the buffers a gradient or a forward rule fills. Once it has
/// grown to the sizes of the arguments, a call allocates nothing. One per thread (a
/// `thread_local!`, say); it fits any [`SharedGradient`] and any [`SharedJvp`].
#[derive(Debug, Default)]
pub struct CallState {
    ws: Workspace,
    /// One scratch buffer per parameter (see [`ArgActivity::args`]).
    scratch: Vec<Val>,
    /// The primal results of the last call (for a forward rule, the results and
    /// the tangents).
    value: Vec<Val>,
    /// The cotangents of the active parameters of the last call.
    cts: Vec<Val>,
    /// The directions of an HVP, one per differentiated parameter.
    dirs: Vec<Val>,
    /// The gradient of an HVP, one buffer per differentiated parameter.
    grads: Vec<Val>,
    /// The H v of an HVP, one buffer per differentiated parameter.
    hvps: Vec<Val>,
    /// What the tape held during the last gradient.
    tape: TapeStats,
}

impl CallState {
    /// An empty state: a new workspace, no buffers.
    pub fn new() -> CallState {
        CallState::default()
    }

    /// What the tape held during the last gradient made with this state: its
    /// peak bytes, and the steps checkpointed loops ran again.
    pub fn last_tape(&self) -> TapeStats {
        self.tape
    }
}

/// One activity pattern of an [`Autodiff`], derived and compiled
/// ([`Autodiff::share`]): immutable and `Send + Sync`, so that any number of
/// threads call it at once, each with its own [`CallState`]. It is the same
/// compiled code as [`Autodiff::gradient`] runs for that pattern, called the same
/// way.
///
/// ```
/// use gradlift::trace::prelude::*;
/// use gradlift::{Active, CallState, Const, Return, autodiff};
///
/// let mut f = autodiff("f", |x: Var, y: Var| x * x * y)?;
/// let g = f.share::<(Active, Const<f64>)>(Return::Active)?;
/// std::thread::scope(|s| {
///     for k in 0..4 {
///         let g = &g;
///         s.spawn(move || {
///             let mut state = CallState::new();
///             let x = k as f64;
///             assert_eq!(g.gradient(&mut state, (Active(x), Const(3.0))).unwrap(), (3.0 * x * x, (6.0 * x, ())));
///         });
///     }
/// });
/// # Ok::<(), gradlift::Error>(())
/// ```
///
/// # Parallel batches with rayon
///
/// Gradients of one function over many inputs: one `SharedGradient`, and one
/// [`CallState`] per rayon worker with `map_init`, which makes a state per split
/// of the work and reuses it for every input of that split (a warm state
/// allocates nothing per call). The results are the serial ones, bit for bit:
/// each call computes alone, whatever thread runs it. `examples/rayon_batch.rs`
/// times it against a serial loop.
///
/// ```
/// use gradlift::trace::prelude::*;
/// use gradlift::{CallState, Duplicated, Return, autodiff};
/// use rayon::prelude::*;
///
/// type Dup = Duplicated<&'static [f64], &'static mut [f64]>;
/// let g = autodiff("sumsq", gradlift::suite::sumsq::<Var>)?.share::<(Dup,)>(Return::Active)?;
/// let inputs: Vec<Vec<f64>> = (0..100).map(|k| vec![k as f64, 1.0, -2.0]).collect();
/// let grads: Vec<Vec<f64>> = inputs
///     .par_iter()
///     .map_init(CallState::new, |state, x| {
///         let mut dx = vec![0.0; x.len()];
///         g.gradient(state, (Duplicated(&x[..], &mut dx[..]),)).unwrap();
///         dx
///     })
///     .collect();
/// assert_eq!(grads[7], [14.0, 2.0, -4.0]);
/// # Ok::<(), gradlift::Error>(())
/// ```
pub struct SharedGradient<A, R> {
    grad: Arc<CompiledGradient>,
    params: Vec<Activity>,
    ret: Return,
    n_params: usize,
    _sig: PhantomData<fn(A) -> R>,
}

impl<A, R> fmt::Debug for SharedGradient<A, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SharedGradient")
            .field("pattern", &self.grad.rule().layout.config.pattern())
            .finish_non_exhaustive()
    }
}

impl<A, R> Clone for SharedGradient<A, R> {
    fn clone(&self) -> Self {
        SharedGradient {
            grad: Arc::clone(&self.grad),
            params: self.params.clone(),
            ret: self.ret,
            n_params: self.n_params,
            _sig: PhantomData,
        }
    }
}

impl<A: Args, R: Native> SharedGradient<A, R> {
    /// [`Autodiff::gradient`] (or [`Autodiff::gradient_with`] the return activity
    /// this was compiled for) with the buffers of `state`. The activities of `args`
    /// must be the pattern compiled, or this is [`Error::BadArguments`].
    pub fn gradient<X: Activities<A>>(
        &self,
        state: &mut CallState,
        args: X,
    ) -> Result<(R::Value, X::Grad), Error> {
        self.pullback(state, &[], args)
    }

    /// [`Autodiff::pullback`] with the buffers of `state`: an active return seeded
    /// with `seeds` (empty: all ones).
    pub fn pullback<X: Activities<A>>(
        &self,
        state: &mut CallState,
        seeds: &[f64],
        args: X,
    ) -> Result<(R::Value, X::Grad), Error> {
        if X::PATTERN != self.params.as_slice() {
            return Err(Error::BadArguments(format!(
                "the arguments' activities are {}, but this gradient was compiled for {}",
                show_pattern(X::PATTERN),
                self.grad.rule().layout.config.pattern()
            )));
        }
        run_compiled::<A, R, X>(&self.grad, self.n_params, state, seeds, args)
    }

    /// The return's activity compiled for.
    pub fn ret(&self) -> Return {
        self.ret
    }

    /// The compiled rule (its module holds the forward pass and the pullback).
    pub fn rule(&self) -> &gradlift_adjoint::Rule {
        self.grad.rule()
    }

    /// The compiled gradient, for the lower-level calls of [`CompiledGradient`].
    pub fn compiled(&self) -> &CompiledGradient {
        &self.grad
    }
}

/// The activities as a pattern's letters (`"AC"`).
fn show_pattern(params: &[Activity]) -> String {
    params
        .iter()
        .map(|a| match a {
            Activity::Active => 'A',
            Activity::Dup => 'D',
            Activity::DupNoNeed => 'N',
            Activity::Const => 'C',
        })
        .collect()
}

/// A gradient of the compiled pattern `grad` with the buffers of `state`: the one
/// code path of [`Autodiff`] and [`SharedGradient`] calls.
fn run_compiled<A, R: Native, X: Activities<A>>(
    grad: &CompiledGradient,
    n_params: usize,
    state: &mut CallState,
    seeds: &[f64],
    mut args: X,
) -> Result<(R::Value, X::Grad), Error> {
    if state.scratch.len() != n_params {
        state.scratch.resize(n_params, Val::Bool(false));
    }
    let CallState {
        ws,
        scratch,
        value,
        cts,
        tape,
        ..
    } = state;
    let (mut borrowed, mut shadows) = (ArgVec::new(), ArgVec::new());
    args.args(scratch, &mut borrowed, &mut shadows)?;
    *tape = grad.gradient_args(ws, &mut borrowed, &mut shadows, seeds, value, cts)?;
    let v = R::native(&mut value.iter());
    Ok((v, X::grads(cts)))
}

/// The compiled primal, with its buffers.
struct Primal {
    func: CompiledFunction,
    ws: Workspace,
    out: Vec<Val>,
}

impl<A, R> fmt::Debug for Autodiff<A, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Autodiff")
            .field("name", &self.name)
            .field("patterns", &self.patterns())
            .field("jvp_patterns", &self.jvp_patterns())
            .field("hvp_patterns", &self.hvp_patterns())
            .field("primal_compiled", &self.primal.is_some())
            .field("hosts", &self.hosts)
            .finish_non_exhaustive()
    }
}

/// Traces `f` as the IR function `@name` and returns it ready for gradients
/// (compiled lazily, per activity pattern, on first use). `f` is a generic function
/// instantiated at the traced types (`f::<Var>`) or a closure of traced types.
///
/// ```
/// use gradlift::trace::prelude::*;
/// use gradlift::{Const, Duplicated, autodiff};
///
/// // loss(w) = sum_i (w_i x_i - 1)^2, x constant.
/// fn loss<T: Real>(x: T::Slice<'_>, w: T::Slice<'_>) -> T {
///     for_range(0, x.len(), T::lit(0.0), |i, acc| {
///         let r = w.at(i) * x.at(i) - 1.0;
///         acc + r * r
///     })
/// }
/// let mut loss = autodiff("loss", loss::<Var>)?;
/// let x = [1.0, 2.0];
/// let w = [0.5, 1.0];
/// let mut dw = [0.0; 2];
/// let (value, ((), ())) = loss.gradient((Const(&x[..]), Duplicated(&w[..], &mut dw[..])))?;
/// assert_eq!(value, 0.25 + 1.0);
/// // d/dw_i = 2 (w_i x_i - 1) x_i, added into dw.
/// assert_eq!(dw, [-1.0, 4.0]);
/// loss.gradient((Const(&x[..]), Duplicated(&w[..], &mut dw[..])))?;
/// assert_eq!(dw, [-2.0, 8.0]);
/// # Ok::<(), gradlift::Error>(())
/// ```
#[track_caller]
pub fn autodiff<A: Args, F: Callable<A>>(
    name: &'static str,
    f: F,
) -> Result<Autodiff<A, F::Output>, Error>
where
    F::Output: Native,
{
    let traced = stage!("trace", name, gradlift_trace::trace(name, f))?;
    Autodiff::from_traced(traced, name)
}

impl<A: Args, R: Native> Autodiff<A, R> {
    /// The function `@name` of a traced module (traced with a
    /// [`Tracer`](gradlift_trace::Tracer): several functions, custom derivatives),
    /// with the module's host functions bound. Its signature must be the one `A`
    /// and `R` give, or this is [`Error::BadArguments`].
    ///
    /// ```
    /// use gradlift::trace::{Tracer, prelude::*};
    /// use gradlift::{Active, Autodiff};
    ///
    /// // sq with a native custom derivative (twice the true one, to show it is used).
    /// fn sq<T: Real>(x: T) -> T {
    ///     x * x
    /// }
    /// let mut tracer = Tracer::new();
    /// tracer.function("f", |x: Var| {
    ///     func("sq", sq::<Var>).vjp_native("sq_vjp", |x, dy, dx| dx[0] = 4.0 * x[0] * dy[0]).call((x,))
    /// })?;
    /// let mut f = Autodiff::<(Var,), Var>::from_traced(tracer.finish()?, "f")?;
    /// assert_eq!(f.gradient((Active(3.0),))?, (9.0, (12.0,)));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn from_traced(traced: Traced, name: &str) -> Result<Autodiff<A, R>, Error> {
        let Traced { module, hosts } = traced;
        let func = module
            .func_by_name(name)
            .ok_or_else(|| Error::NoSuchFunction(name.to_string()))?;
        let sig = module.sig(func);
        let want_params = A::ir_types();
        let mut want_results = Vec::new();
        R::ir_types(&mut want_results);
        let fits = |have: &[Type], want: &[Option<Type>]| {
            have.len() == want.len() && have.iter().zip(want).all(|(&h, &w)| w == Some(h))
        };
        if !fits(&sig.params, &want_params) || !fits(&sig.results, &want_results) {
            return Err(Error::BadArguments(format!(
                "@{name} has signature {}, but Autodiff<{}, {}> expects {}",
                sig,
                core::any::type_name::<A>(),
                core::any::type_name::<R>(),
                show_types(&want_params, &want_results),
            )));
        }
        Ok(Autodiff {
            name: name.to_string(),
            module,
            hosts,
            n_params: want_params.len(),
            patterns: Vec::new(),
            jvps: Vec::new(),
            hvps: Vec::new(),
            jacobians: Vec::new(),
            primal: None,
            compile_time: Duration::ZERO,
            checkpoint_bytes: None,
            last: None,
            _sig: PhantomData,
        })
    }

    /// The memory budget of each checkpointed loop
    /// ([`for_range_checkpointed`](gradlift_trace::for_range_checkpointed)) whose
    /// number of snapshots is left open (0 or less): as many snapshots of its
    /// carried values as `bytes` holds, at least one
    /// ([`RuleConfig::checkpoint_bytes`](gradlift_adjoint::RuleConfig::checkpoint_bytes)).
    /// Patterns compiled before are compiled again on their next call.
    ///
    /// ```
    /// use gradlift::trace::prelude::*;
    /// use gradlift::{Active, Const, autodiff};
    ///
    /// // T Euler steps of x' = -x^3, the snapshots left to the budget (0).
    /// fn decay<T: Real>(x0: T, steps: T::Int) -> T {
    ///     for_range_checkpointed(0, steps, 0, x0, |_, x| x - x * x * x * 0.001)
    /// }
    /// let mut f = autodiff("decay", decay::<Var>)?.with_checkpoint_bytes(4 * 24);
    /// let (x, (dx0, ())) = f.gradient((Active(1.0), Const(1000)))?;
    /// assert_eq!(x, decay(1.0, 1000));
    /// // 4 snapshots of (x, step, level) at most, not 1000 steps' tapes.
    /// assert!(f.last_tape().peak_bytes < 400, "{:?}", f.last_tape());
    /// assert!(f.last_tape().recomputed_steps > 0);
    /// let h = 1e-6;
    /// let fd = (decay(1.0 + h, 1000) - decay(1.0 - h, 1000)) / (2.0 * h);
    /// assert!((dx0 - fd).abs() < 1e-8);
    /// # Ok::<(), gradlift::Error>(())
    /// ```
    pub fn with_checkpoint_bytes(mut self, bytes: u64) -> Self {
        self.checkpoint_bytes = Some(bytes);
        self.patterns.clear();
        self.hvps.clear();
        self.jacobians.clear();
        self.last = None;
        self
    }

    /// What the tape held during the last gradient ([`Autodiff::gradient`] and
    /// its kin): its peak bytes, and the steps checkpointed loops ran again. All
    /// zero before the first.
    pub fn last_tape(&self) -> TapeStats {
        self.last
            .and_then(|k| self.patterns.get(k))
            .map_or_else(TapeStats::default, |p| p.state.tape)
    }

    /// The value and the gradient at `args` (one [`ArgActivity`] per parameter),
    /// with an active return seeded with 1: the gradient has one entry per argument,
    /// the derivative for [`Active`] and `()` for the others, whose shadows receive
    /// theirs. The first call of an activity pattern derives and compiles it.
    pub fn gradient<X: Activities<A>>(&mut self, args: X) -> Result<(R::Value, X::Grad), Error> {
        self.run(Return::Active, None, args)
    }

    /// [`Autodiff::gradient`] with the return's activity `ret`.
    pub fn gradient_with<X: Activities<A>>(
        &mut self,
        ret: Return,
        args: X,
    ) -> Result<(R::Value, X::Grad), Error> {
        self.run(ret, None, args)
    }

    /// [`Autodiff::gradient`] with an active return seeded with `seeds`, one
    /// cotangent per float result (a vector-Jacobian product).
    pub fn pullback<X: Activities<A>>(
        &mut self,
        seeds: &[f64],
        args: X,
    ) -> Result<(R::Value, X::Grad), Error> {
        self.run(Return::Active, Some(seeds), args)
    }

    /// The compiled primal at `args` (plain values: numbers, `&[E]`, `&mut [E]`,
    /// whose contents the call updates), compiled on first use.
    pub fn call<I: Inputs<A>>(&mut self, mut args: I) -> Result<R::Value, Error> {
        if self.primal.is_none() {
            let func = CompiledFunction::with_hosts(&self.module, &self.name, &self.hosts)?;
            self.compile_time += func.compile_time();
            self.primal = Some(Primal {
                func,
                ws: Workspace::new(),
                out: Vec::new(),
            });
        }
        let Some(p) = self.primal.as_mut() else {
            unreachable!("compiled just above")
        };
        let mut borrowed = ArgVec::new();
        args.args(&mut borrowed)?;
        p.func.call_args(&mut p.ws, &mut borrowed, &mut p.out)?;
        Ok(R::native(&mut p.out.iter()))
    }

    fn run<X: Activities<A>>(
        &mut self,
        ret: Return,
        seeds: Option<&[f64]>,
        args: X,
    ) -> Result<(R::Value, X::Grad), Error> {
        let k = self.pattern(X::PATTERN, ret)?;
        self.last = Some(k);
        let p = &mut self.patterns[k];
        run_compiled::<A, R, X>(
            &p.grad,
            self.n_params,
            &mut p.state,
            seeds.unwrap_or(&[]),
            args,
        )
    }

    /// The pattern of the activities `X` and the return `ret`, derived and compiled
    /// (or taken from those compiled already) as a [`SharedGradient`]: `Send +
    /// Sync`, for calls from many threads at once, each with its own
    /// [`CallState`]. Name the activities' types: `share::<(Active, Const<f64>,
    /// Duplicated<&[f64], &mut [f64]>)>(Return::Active)`.
    pub fn share<X: Activities<A>>(&mut self, ret: Return) -> Result<SharedGradient<A, R>, Error> {
        let k = self.pattern(X::PATTERN, ret)?;
        Ok(SharedGradient {
            grad: Arc::clone(&self.patterns[k].grad),
            params: X::PATTERN.to_vec(),
            ret,
            n_params: self.n_params,
            _sig: PhantomData,
        })
    }

    /// The index of the compiled pattern, compiling it first if needed.
    fn pattern(&mut self, params: &[Activity], ret: Return) -> Result<usize, Error> {
        let ret = RetActivity::from(ret);
        if let Some(k) = self
            .patterns
            .iter()
            .position(|p| p.config.params == params && p.config.ret == ret)
        {
            return Ok(k);
        }
        let func = self
            .module
            .func_by_name(&self.name)
            .ok_or_else(|| Error::NoSuchFunction(self.name.clone()))?;
        let config = RuleConfig::default_for(self.module.sig(func))
            .with_params(params)
            .with_ret(ret)
            .with_checkpoint_bytes(self.checkpoint_bytes);
        let grad = CompiledGradient::with_config(&self.module, &self.name, &config, &self.hosts)?;
        self.compile_time += grad.compile_time();
        self.patterns.push(Pattern {
            config,
            grad: Arc::new(grad),
            state: CallState::new(),
        });
        Ok(self.patterns.len() - 1)
    }
}

impl<A, R> Autodiff<A, R> {
    /// The traced module (the function, what it calls, custom derivatives).
    pub fn module(&self) -> &Module {
        &self.module
    }

    /// The name of the function in the module (without `@`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The host functions bound to the module's `extern`s.
    pub fn hosts(&self) -> &Hosts {
        &self.hosts
    }

    /// Binds (or rebinds) the `extern` function `name` of the module to `f` (for
    /// modules traced with [`Tracer::with_module`](gradlift_trace::Tracer::with_module)
    /// that call externs of their own). Drops what was compiled so far.
    pub fn bind(
        mut self,
        name: &str,
        f: impl Fn(&mut [Val]) -> Result<Vec<Val>, String> + Send + Sync + 'static,
    ) -> Self {
        self.hosts.insert(name, f);
        self.patterns.clear();
        self.jvps.clear();
        self.hvps.clear();
        self.jacobians.clear();
        self.primal = None;
        self
    }

    /// The activity patterns compiled so far, as derived functions' names spell
    /// them: one letter per parameter (`A`ctive, `D`uplicated, `N`: duplicated no
    /// need, `C`onst), `_`, the return's letter (`"AC_A"`).
    pub fn patterns(&self) -> Vec<String> {
        self.patterns.iter().map(|p| p.config.pattern()).collect()
    }

    /// How long deriving and compiling took, over every pattern (gradients and
    /// forward rules) and the primal compiled so far.
    pub fn compile_time(&self) -> Duration {
        self.compile_time
    }
}

/// The types as a signature prints (`(f64, [f64]) -> f64`), a plain Rust value shown
/// as `(not traced)`.
fn show_types(params: &[Option<Type>], results: &[Option<Type>]) -> String {
    let show = |t: &Option<Type>| t.map_or("(not traced)".to_string(), |t| t.to_string());
    let ps: Vec<String> = params.iter().map(show).collect();
    let rs: Vec<String> = results.iter().map(show).collect();
    match rs.as_slice() {
        [] => format!("({})", ps.join(", ")),
        [r] => format!("({}) -> {r}", ps.join(", ")),
        rs => format!("({}) -> ({})", ps.join(", "), rs.join(", ")),
    }
}

/// The directory set by [`set_dump_dir`], if any.
static DUMP_DIR: std::sync::Mutex<Option<std::path::PathBuf>> = std::sync::Mutex::new(None);

/// Makes every `#[autodiff_reverse]` and `#[autodiff_forward]` derivative write its
/// IR into `dir` when it is first called (traced, derived and compiled):
/// `NAME.traced.ir` (the function as the attribute traced it), `NAME.optimized.ir`
/// (after gradlift's optimiser), then for a reverse-mode derivative `NAME.fwd.ir`
/// (the derived forward pass and the functions it calls) and `NAME.rvs.ir` (the
/// pullback), for a forward-mode one `NAME.jvp.ir` (the forward rule `@f.jvp` and
/// the functions it calls), as text that [`ir::parse`](crate::ir::parse) reads
/// back. The directory is created if need be; `None` stops the dumps.
///
/// It takes precedence over the environment variable `GRADLIFT_DUMP`, which does
/// the same without a change to the program. A file that cannot be written is
/// an [`Error::Dump`] of that call (and of every later one: the first call's
/// result is kept).
///
/// ```
/// use gradlift::autodiff_reverse;
///
/// #[autodiff_reverse(d_square, Active, Active)]
/// fn square(x: f64) -> f64 {
///     x * x
/// }
///
/// let dir = std::env::temp_dir().join(format!("gradlift-dump-{}", std::process::id()));
/// gradlift::autodiff::set_dump_dir(Some(&dir));
/// assert_eq!(d_square(3.0, 1.0), (9.0, 6.0));
/// gradlift::autodiff::set_dump_dir(None);
/// let fwd = std::fs::read_to_string(dir.join("d_square.fwd.ir")).unwrap();
/// assert!(fwd.contains("func @square.fwd(%x: f64) -> f64"));
/// # std::fs::remove_dir_all(&dir).unwrap();
/// ```
pub fn set_dump_dir(dir: Option<&std::path::Path>) {
    let mut d = DUMP_DIR
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    *d = dir.map(std::path::Path::to_path_buf);
}

/// The directory the IR is dumped into: [`set_dump_dir`]'s, else `GRADLIFT_DUMP`'s
/// (when not empty).
fn dump_dir() -> Option<std::path::PathBuf> {
    let set = DUMP_DIR
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone();
    set.or_else(|| {
        std::env::var_os("GRADLIFT_DUMP")
            .filter(|d| !d.is_empty())
            .map(Into::into)
    })
}

/// What `#[autodiff_reverse]` and `#[autodiff_forward]` (the `gradlift-macros`
/// crate) expand to: not an API of its own, and it may change with the macros.
#[doc(hidden)]
pub mod macro_support {
    use std::cell::RefCell;
    use std::fmt::Write as _;
    use std::path::Path;
    use std::thread::LocalKey;

    use gradlift_ir::callgraph::CallGraph;
    use gradlift_ir::engine::ErrorKind;
    use gradlift_ir::write::write_function;
    use gradlift_ir::{FuncId, Module};
    use gradlift_trace::{Args, Callable};

    use super::{
        Activities, Autodiff, CallState, DualReturn, FwdActivities, Native, Return, SharedGradient,
        SharedJvp, autodiff,
    };
    use crate::api::Error;
    use crate::pipeline::Pipeline;

    /// Traces `f` as `@func`, then derives and compiles the pattern of `X` with the
    /// return `ret` through [`autodiff`]. With a dump directory (see
    /// [`set_dump_dir`](super::set_dump_dir)), writes the IR of each stage into it as
    /// `deriv.traced.ir`, `deriv.optimized.ir`, `deriv.fwd.ir` and `deriv.rvs.ir`.
    pub fn share<A: Args, F: Callable<A>, X: Activities<A>>(
        func: &'static str,
        deriv: &str,
        f: F,
        ret: Return,
    ) -> Result<SharedGradient<A, F::Output>, Error>
    where
        F::Output: Native,
    {
        let mut ad = autodiff(func, f)?;
        let shared = ad.share::<X>(ret)?;
        let rule = shared.rule();
        dump(&ad, func, deriv, || {
            [
                ("fwd", with_callees(&rule.module, rule.forward)),
                ("rvs", with_callees(&rule.module, rule.pullback)),
            ]
        })?;
        Ok(shared)
    }

    /// Forward mode's [`share`]: traces `f` as `@func`, then derives and compiles
    /// the forward rule of the pattern of `X` with the return `ret` through
    /// [`autodiff`]. With a dump directory, writes `deriv.traced.ir`,
    /// `deriv.optimized.ir` and `deriv.jvp.ir` (the forward rule `@func.jvp` and
    /// the functions it calls).
    pub fn share_jvp<A: Args, F: Callable<A>, X: FwdActivities<A>>(
        func: &'static str,
        deriv: &str,
        f: F,
        ret: DualReturn,
    ) -> Result<SharedJvp<A, F::Output>, Error>
    where
        F::Output: Native,
    {
        let mut ad = autodiff(func, f)?;
        let shared = ad.share_jvp::<X>(ret)?;
        let frule = shared.compiled().frule();
        dump(&ad, func, deriv, || {
            [("jvp", with_callees(&frule.module, frule.func))]
        })?;
        Ok(shared)
    }

    /// With a dump directory (see [`set_dump_dir`](super::set_dump_dir)), writes
    /// `deriv.traced.ir`, `deriv.optimized.ir`, then `deriv.STAGE.ir` for each of
    /// the `derived` texts.
    fn dump<A, R, const N: usize>(
        ad: &Autodiff<A, R>,
        func: &str,
        deriv: &str,
        derived: impl FnOnce() -> [(&'static str, String); N],
    ) -> Result<(), Error> {
        let Some(dir) = super::dump_dir() else {
            return Ok(());
        };
        let optimized = Pipeline::new()
            .with_hosts(ad.hosts().clone())
            .prepare(ad.module(), func)?;
        let files = [
            ("traced", ad.module().to_string()),
            ("optimized", optimized.module.to_string()),
        ]
        .into_iter()
        .chain(derived());
        let io = |path: &Path, e: std::io::Error| Error::Dump {
            path: path.to_path_buf(),
            message: e.to_string(),
        };
        std::fs::create_dir_all(&dir).map_err(|e| io(&dir, e))?;
        for (stage, text) in files {
            let path = dir.join(format!("{deriv}.{stage}.ir"));
            std::fs::write(&path, text).map_err(|e| io(&path, e))?;
        }
        Ok(())
    }

    /// The text of `func` and of every function it calls, directly or not (so that
    /// the text parses on its own).
    fn with_callees(module: &Module, func: FuncId) -> String {
        let graph = CallGraph::new(module);
        let (mut seen, mut todo, mut text) = (vec![func], vec![func], String::new());
        while let Some(f) = todo.pop() {
            let _ = write_function(&mut text, module, f);
            for &c in graph.callees(f) {
                if !seen.contains(&c) {
                    seen.push(c);
                    todo.push(c);
                }
            }
            text.push('\n');
        }
        text
    }

    /// Runs `call` with this thread's state in `key` (or a fresh one, should the
    /// thread's be in use already, or gone).
    pub fn with_state<T>(
        key: &'static LocalKey<RefCell<CallState>>,
        call: impl FnOnce(&mut CallState) -> T,
    ) -> T {
        let mut call = Some(call);
        let done = key.try_with(|cell| {
            call.take().map(|call| match cell.try_borrow_mut() {
                Ok(mut state) => call(&mut state),
                Err(_) => call(&mut CallState::new()),
            })
        });
        match (done, call) {
            (Ok(Some(t)), _) => t,
            // The thread's locals are gone (a call from a thread-local destructor).
            (_, Some(call)) => call(&mut CallState::new()),
            (_, None) => unreachable!("the call ran, and returned its result"),
        }
    }

    /// The panic message of `NAME` for the error `e`: a run-time error worded as Rust
    /// words the same panic (`index out of bounds: the len is 3 but the index is
    /// 5`), a failure to trace, derive or compile as `the derivative of `func`
    /// failed: ...`; then where: for a run-time error of traced code, the slice it
    /// accessed and the Rust `file:line:col` of the statement; then the function
    /// `func` at `file:line`, differentiated as `deriv`.
    pub fn panic_message(e: &Error, func: &str, deriv: &str, file: &str, line: u32) -> String {
        let mut m = match e {
            Error::Run(r) => match &r.kind {
                ErrorKind::OutOfBounds { index, len } => {
                    format!("index out of bounds: the len is {len} but the index is {index}")
                }
                ErrorKind::DivisionByZero if r.op.contains("rem") => {
                    "attempt to calculate the remainder with a divisor of zero".to_string()
                }
                ErrorKind::DivisionByZero => "attempt to divide by zero".to_string(),
                _ => e.to_string(),
            },
            Error::BadArguments(m) => m.clone(),
            // Tracing, deriving or compiling: not a panic Rust would have.
            e => format!("the derivative of `{func}` failed: {e}"),
        };
        if let Error::Run(r) = e
            && r.pos.file.is_some()
        {
            let access = match (r.op.as_str(), &r.operand) {
                ("load", Some(o)) => format!("reading {}", rust_name(o)),
                ("store", Some(o)) => format!("writing {}", rust_name(o)),
                _ => String::new(),
            };
            let sep = if access.is_empty() { "" } else { " " };
            let _ = write!(m, ", {access}{sep}at {}", r.pos);
        }
        let _ = write!(
            m,
            " (in `{func}` at {file}:{line}, differentiated by `{deriv}`)"
        );
        m
    }

    /// `` `x` `` for the IR's `%x`, the rest as it is (`parameter 2`).
    fn rust_name(operand: &str) -> String {
        match operand.strip_prefix('%') {
            Some(name) => format!("`{name}`"),
            None => operand.to_string(),
        }
    }
}
