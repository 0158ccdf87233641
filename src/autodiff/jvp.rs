//! Forward mode for [`Autodiff`]: [`Dual`] arguments, [`Autodiff::jvp`] (and
//! [`Autodiff::jvp_only`], [`Autodiff::jvp_const`]), [`SharedJvp`].
//!
//! The forward rule of each pattern of activities and return is derived and
//! compiled on its first call through the one [`Pipeline`](crate::Pipeline)
//! ([`CompiledJvp::with_config`], that is [`Pipeline::compile_jvp`](crate::Pipeline::compile_jvp)),
//! and kept with its own [`CallState`], exactly as the gradients' patterns are.
//! Width 1: one tangent per value.

use core::fmt;
use core::marker::PhantomData;
use std::sync::Arc;

use gradlift_adjoint::{DualActivity, DualRet, FruleConfig};
use gradlift_ir::interp::Val;
use gradlift_jit::Arg;
use gradlift_trace::{Args, Slice, SliceMut, Var};

use super::{ArgVec, Autodiff, CallState, Const, Input, Native, bad_argument};
use crate::api::Error;
use crate::forward::CompiledJvp;
use crate::slices::{SliceArg, SliceArgMut};

/// A value and its tangent, for forward mode (`std::autodiff`'s `Dual`): the
/// direction in which [`Autodiff::jvp`] differentiates.
///
/// - `Dual(x, dx)` for a [`Var<f64>`] parameter (`f64`s) or a [`Var<f32>`] one
///   (`f32`s);
/// - `Dual(&x, &dx)` (or `Dual(&x, &mut dx)`) for a [`Slice<E>`]: the tangent of
///   each element, read only;
/// - `Dual(&mut x, &mut dx)` for a [`SliceMut<E>`]: on entry the tangent of the
///   slice's contents, on return that of what the function leaves in it,
///   **overwritten** (not added to, unlike a reverse-mode shadow), while `x` is
///   updated as the function updates it.
///
/// `E` is `f64` or `f32`; a tangent slice has its slice's length.
#[derive(Copy, Clone, PartialEq, Debug)]
pub struct Dual<P = f64, T = P>(pub P, pub T);

/// How the results take part in forward mode (`std::autodiff`'s return
/// activities), for [`Autodiff::share_jvp`]; [`Autodiff::jvp`],
/// [`Autodiff::jvp_only`] and [`Autodiff::jvp_const`] are the three.
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug, Default)]
pub enum DualReturn {
    /// The value and the tangent of each float result ([`Autodiff::jvp`]).
    #[default]
    Dual,
    /// The tangents alone ([`Autodiff::jvp_only`]).
    DualOnly,
    /// The value alone: tangents reach only the writable [`Dual`] slices
    /// ([`Autodiff::jvp_const`]).
    Const,
}

impl From<DualReturn> for DualRet {
    fn from(r: DualReturn) -> DualRet {
        match r {
            DualReturn::Dual => DualRet::Dual,
            DualReturn::DualOnly => DualRet::DualOnly,
            DualReturn::Const => DualRet::Const,
        }
    }
}

/// Checks that the tangent is as long as its slice.
fn check_tangent(x: usize, dx: usize) -> Result<(), String> {
    if x == dx {
        Ok(())
    } else {
        Err(format!(
            "the tangent has length {dx}, but the slice has length {x}"
        ))
    }
}

/// An activity of forward mode that fits a traced parameter `P`: [`Dual`] (see its
/// docs for the parameters each form fits) or [`Const`] (as for gradients: a
/// number, `&[E]` or `&mut [E]`).
///
/// An activity that does not fit its parameter does not compile:
///
/// ```compile_fail
/// use gradlift::{Dual, autodiff, trace::prelude::*};
///
/// let mut f = autodiff("n", |n: Var<i64>| Var::<f64>::from_int(n)).unwrap();
/// f.jvp((Dual(3, 1),)); // error: an i64 has no tangent
/// ```
///
/// ```compile_fail
/// use gradlift::{Dual, autodiff, trace::prelude::*};
///
/// let mut f = autodiff("f", |mut x: SliceMut<f64>| x.set(0, 1.0)).unwrap();
/// let (x, mut dx) = ([2.0], [0.0]);
/// f.jvp((Dual(&x[..], &mut dx[..]),)); // error: a writable slice needs `&mut x`
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a forward-mode activity for a parameter of type `{P}`",
    label = "this argument does not fit its parameter's traced type",
    note = "`Dual(x, dx)` fits `Var<f64>` and `Var<f32>`; `Dual(&x, &dx)` fits `Slice<f64>`, `Dual(&mut x, &mut dx)` fits `SliceMut<f64>` (and `f32`); `Const(x)` fits any parameter (a number for a `Var`, `&[E]` for a `Slice<E>`, `&mut [E]` for a `SliceMut<E>`)"
)]
pub trait FwdActivity<P> {
    /// The activity of the parameter in the derived forward rule.
    #[doc(hidden)]
    const ACTIVITY: DualActivity;
    /// The primal and the tangent (if any) as borrowed arguments, or why they do
    /// not fit.
    #[doc(hidden)]
    fn args(&mut self) -> Result<(Arg<'_>, Option<Arg<'_>>), String>;
}

macro_rules! dual_scalar {
    ($($t:ty => $v:ident),*) => {$(
        impl FwdActivity<Var<$t>> for Dual<$t, $t> {
            const ACTIVITY: DualActivity = DualActivity::Dual;
            fn args(&mut self) -> Result<(Arg<'_>, Option<Arg<'_>>), String> {
                Ok((Arg::$v(self.0), Some(Arg::$v(self.1))))
            }
        }
    )*};
}
dual_scalar!(f64 => F64, f32 => F32);

/// The three ways a [`Dual`] slice meets its parameter: read-only with a
/// read-only tangent (or a writable one, only read), or writable with a writable
/// tangent.
macro_rules! dual_slice {
    ($($t:ty => $v:ident $m:ident),*) => {$(
        impl<X: SliceArg<$t>, D: SliceArg<$t>> FwdActivity<Slice<$t>> for Dual<X, D> {
            const ACTIVITY: DualActivity = DualActivity::Dual;
            fn args(&mut self) -> Result<(Arg<'_>, Option<Arg<'_>>), String> {
                let x = self.0.slice_arg().map_err(|e| format!("the slice: {e}"))?;
                let dx = self.1.slice_arg().map_err(|e| format!("the tangent: {e}"))?;
                check_tangent(x.len(), dx.len())?;
                Ok((Arg::$v(x), Some(Arg::$v(dx))))
            }
        }
        impl<X: SliceArgMut<$t>, D: SliceArgMut<$t>> FwdActivity<SliceMut<$t>> for Dual<X, D> {
            const ACTIVITY: DualActivity = DualActivity::Dual;
            fn args(&mut self) -> Result<(Arg<'_>, Option<Arg<'_>>), String> {
                let x = self.0.slice_arg_mut().map_err(|e| format!("the slice: {e}"))?;
                let dx = self.1.slice_arg_mut().map_err(|e| format!("the tangent: {e}"))?;
                check_tangent(x.len(), dx.len())?;
                Ok((Arg::$m(x), Some(Arg::$m(dx))))
            }
        }
    )*};
}
dual_slice!(f64 => F64s F64sMut, f32 => F32s F32sMut);

impl<P, T: Input<P>> FwdActivity<P> for Const<T> {
    const ACTIVITY: DualActivity = DualActivity::Const;
    fn args(&mut self) -> Result<(Arg<'_>, Option<Arg<'_>>), String> {
        Ok((self.0.arg()?, None))
    }
}

/// A tuple of forward-mode activities, one per parameter of the traced argument
/// tuple `A` (implemented for tuples of up to 8 [`FwdActivity`]s).
pub trait FwdActivities<A> {
    /// The activities, in order.
    #[doc(hidden)]
    const PATTERN: &'static [DualActivity];
    /// The arguments and the tangents of the [`Dual`] ones, borrowed.
    #[doc(hidden)]
    fn args<'s>(
        &'s mut self,
        args: &mut ArgVec<'s>,
        tangents: &mut ArgVec<'s>,
    ) -> Result<(), Error>;
}

macro_rules! tuples {
    ($($n:tt $p:ident $x:ident),*) => {
        impl<$($p, $x: FwdActivity<$p>),*> FwdActivities<($($p,)*)> for ($($x,)*) {
            const PATTERN: &'static [DualActivity] = &[$($x::ACTIVITY),*];
            #[allow(unused_variables)]
            fn args<'s>(
                &'s mut self,
                args: &mut ArgVec<'s>,
                tangents: &mut ArgVec<'s>,
            ) -> Result<(), Error> {
                $(
                    let (a, t) = self.$n.args().map_err(|m| bad_argument($n, m))?;
                    args.push(a);
                    tangents.extend(t);
                )*
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

/// A compiled forward rule of one pattern, with its buffers.
pub(super) struct JvpPattern {
    config: FruleConfig,
    jvp: Arc<CompiledJvp>,
    state: CallState,
}

/// One forward-mode pattern of an [`Autodiff`] (the activities and the
/// [`DualReturn`]), derived and compiled ([`Autodiff::share_jvp`]): immutable and
/// `Send + Sync`, called from any number of threads at once, each with its own
/// [`CallState`]. It runs the same compiled code as [`Autodiff::jvp`] for that
/// pattern, the same way.
///
/// ```
/// use gradlift::trace::prelude::*;
/// use gradlift::{CallState, Const, Dual, DualReturn, autodiff};
///
/// let mut f = autodiff("f", |x: Var, y: Var| x * x * y)?;
/// let d = f.share_jvp::<(Dual, Const<f64>)>(DualReturn::Dual)?;
/// std::thread::scope(|s| {
///     for k in 0..4 {
///         let d = &d;
///         s.spawn(move || {
///             let mut state = CallState::new();
///             let x = k as f64;
///             // d/dt f(x + t, 3) = 6x.
///             assert_eq!(d.jvp(&mut state, (Dual(x, 1.0), Const(3.0))).unwrap(), (3.0 * x * x, 6.0 * x));
///         });
///     }
/// });
/// # Ok::<(), gradlift::Error>(())
/// ```
pub struct SharedJvp<A, R> {
    jvp: Arc<CompiledJvp>,
    params: Vec<DualActivity>,
    ret: DualReturn,
    _sig: PhantomData<fn(A) -> R>,
}

impl<A, R> fmt::Debug for SharedJvp<A, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SharedJvp")
            .field("pattern", &self.jvp.frule().layout.config.pattern())
            .finish_non_exhaustive()
    }
}

impl<A, R> Clone for SharedJvp<A, R> {
    fn clone(&self) -> Self {
        SharedJvp {
            jvp: Arc::clone(&self.jvp),
            params: self.params.clone(),
            ret: self.ret,
            _sig: PhantomData,
        }
    }
}

impl<A: Args, R: Native> SharedJvp<A, R> {
    /// [`Autodiff::jvp`] with the buffers of `state`. The activities of `args` must
    /// be the pattern compiled, and the return [`DualReturn::Dual`], or this is
    /// [`Error::BadArguments`].
    pub fn jvp<X: FwdActivities<A>>(
        &self,
        state: &mut CallState,
        args: X,
    ) -> Result<(R::Value, R::Tangent), Error> {
        self.check::<X>(DualReturn::Dual)?;
        run_jvp(&self.jvp, state, args)?;
        let mut out = state.value.iter();
        let value = R::native(&mut out);
        Ok((value, R::tangent(&mut out)))
    }

    /// [`Autodiff::jvp_only`] with the buffers of `state` (compiled for
    /// [`DualReturn::DualOnly`]).
    pub fn jvp_only<X: FwdActivities<A>>(
        &self,
        state: &mut CallState,
        args: X,
    ) -> Result<R::Tangent, Error> {
        self.check::<X>(DualReturn::DualOnly)?;
        run_jvp(&self.jvp, state, args)?;
        Ok(R::tangent(&mut state.value.iter()))
    }

    /// [`Autodiff::jvp_const`] with the buffers of `state` (compiled for
    /// [`DualReturn::Const`]).
    pub fn jvp_const<X: FwdActivities<A>>(
        &self,
        state: &mut CallState,
        args: X,
    ) -> Result<R::Value, Error> {
        self.check::<X>(DualReturn::Const)?;
        run_jvp(&self.jvp, state, args)?;
        Ok(R::native(&mut state.value.iter()))
    }

    fn check<X: FwdActivities<A>>(&self, ret: DualReturn) -> Result<(), Error> {
        if X::PATTERN != self.params.as_slice() || ret != self.ret {
            return Err(Error::BadArguments(format!(
                "the call is {}_{}, but this forward rule was compiled for {}",
                show_pattern(X::PATTERN),
                DualRet::from(ret).letter(),
                self.jvp.frule().layout.config.pattern()
            )));
        }
        Ok(())
    }

    /// The return's activity compiled for.
    pub fn ret(&self) -> DualReturn {
        self.ret
    }

    /// The compiled forward rule, for the lower-level calls of [`CompiledJvp`]
    /// ([`CompiledJvp::frule`] is the derived module).
    pub fn compiled(&self) -> &CompiledJvp {
        &self.jvp
    }
}

/// The activities as a pattern's letters (`"DC"`).
fn show_pattern(params: &[DualActivity]) -> String {
    params.iter().map(|a| a.letter()).collect()
}

/// A forward rule of the compiled pattern `jvp` with the buffers of `state`,
/// leaving what it returns in `state.value`: the one code path of [`Autodiff`]'s
/// and [`SharedJvp`]'s calls.
fn run_jvp<A, X: FwdActivities<A>>(
    jvp: &CompiledJvp,
    state: &mut CallState,
    mut args: X,
) -> Result<(), Error> {
    let CallState { ws, value, .. } = state;
    let (mut borrowed, mut tangents) = (ArgVec::new(), ArgVec::new());
    args.args(&mut borrowed, &mut tangents)?;
    jvp.jvp_args(ws, &mut borrowed, &mut tangents, value)
}

impl<A: Args, R: Native> Autodiff<A, R> {
    /// The value and its directional derivative (forward mode, a Jacobian-vector
    /// product) at `args`: one [`Dual`] (a value and its tangent) or [`Const`] per
    /// parameter. The tangent has one entry per result ([`Native::Tangent`]: an
    /// `f64` for an `f64` result, `()` for an integer one); a writable `Dual`
    /// slice's tangent is overwritten with the tangent of what the function leaves
    /// in it. The first call of an activity pattern derives and compiles its
    /// forward rule.
    ///
    /// ```
    /// use gradlift::trace::prelude::*;
    /// use gradlift::{Const, Dual, autodiff};
    ///
    /// let mut f = autodiff("f", |x: Var, y: Var| x * x + y.sin())?;
    /// // Along (1, 0): df/dx = 2x; along (0, 1): df/dy = cos y; along (1, 2) both.
    /// assert_eq!(f.jvp((Dual(3.0, 1.0), Dual(0.0, 0.0)))?, (9.0, 6.0));
    /// assert_eq!(f.jvp((Const(3.0), Dual(0.0, 1.0)))?, (9.0, 1.0));
    /// assert_eq!(f.jvp((Dual(3.0, 1.0), Dual(0.0, 2.0)))?, (9.0, 8.0));
    /// # Ok::<(), gradlift::Error>(())
    /// ```
    pub fn jvp<X: FwdActivities<A>>(&mut self, args: X) -> Result<(R::Value, R::Tangent), Error> {
        let out = self.run_jvp(DualReturn::Dual, args)?;
        let mut out = out.iter();
        let value = R::native(&mut out);
        Ok((value, R::tangent(&mut out)))
    }

    /// [`Autodiff::jvp`] without the value: the tangent alone (`std::autodiff`'s
    /// `DualOnly` return), from a forward rule that does not return the value.
    pub fn jvp_only<X: FwdActivities<A>>(&mut self, args: X) -> Result<R::Tangent, Error> {
        let out = self.run_jvp(DualReturn::DualOnly, args)?;
        Ok(R::tangent(&mut out.iter()))
    }

    /// [`Autodiff::jvp`] with a constant return (`std::autodiff`'s `Const`
    /// return): the value alone; tangents reach only the writable [`Dual`]
    /// slices, as the tangents of what the function leaves in them.
    ///
    /// ```
    /// use gradlift::trace::prelude::*;
    /// use gradlift::{Const, Dual, autodiff};
    ///
    /// // x <- k x in place, returning the old x[0].
    /// let mut f = autodiff("scale", |mut x: SliceMut<f64>, k: Var| {
    ///     let x0 = x.at(0);
    ///     for_range(0, x.len(), (), |i, ()| {
    ///         let xi = x.at(i);
    ///         x.set(i, xi * k);
    ///     });
    ///     x0
    /// })?;
    /// let (mut x, mut dx) = ([1.0, 2.0], [1.0, 0.0]);
    /// assert_eq!(f.jvp_const((Dual(&mut x[..], &mut dx[..]), Dual(3.0, 0.5)))?, 1.0);
    /// assert_eq!(x, [3.0, 6.0]);
    /// // The tangent of k x: k dx + x dk, overwriting dx.
    /// assert_eq!(dx, [3.0 * 1.0 + 1.0 * 0.5, 3.0 * 0.0 + 2.0 * 0.5]);
    /// # Ok::<(), gradlift::Error>(())
    /// ```
    pub fn jvp_const<X: FwdActivities<A>>(&mut self, args: X) -> Result<R::Value, Error> {
        let out = self.run_jvp(DualReturn::Const, args)?;
        Ok(R::native(&mut out.iter()))
    }

    /// The forward pattern of the activities `X` and the return `ret`, derived and
    /// compiled (or taken from those compiled already) as a [`SharedJvp`]: `Send +
    /// Sync`, for calls from many threads at once, each with its own
    /// [`CallState`]. Name the activities' types: `share_jvp::<(Dual, Const<f64>,
    /// Dual<&[f64], &[f64]>)>(DualReturn::Dual)`.
    pub fn share_jvp<X: FwdActivities<A>>(
        &mut self,
        ret: DualReturn,
    ) -> Result<SharedJvp<A, R>, Error> {
        let k = self.jvp_pattern(X::PATTERN, ret)?;
        Ok(SharedJvp {
            jvp: Arc::clone(&self.jvps[k].jvp),
            params: X::PATTERN.to_vec(),
            ret,
            _sig: PhantomData,
        })
    }

    /// Runs the pattern of `X` and `ret` (compiled first if need be) and returns
    /// what the rule returned.
    fn run_jvp<X: FwdActivities<A>>(&mut self, ret: DualReturn, args: X) -> Result<&[Val], Error> {
        let k = self.jvp_pattern(X::PATTERN, ret)?;
        let p = &mut self.jvps[k];
        run_jvp(&p.jvp, &mut p.state, args)?;
        Ok(&p.state.value)
    }

    /// The index of the compiled forward pattern, compiling it first if needed.
    fn jvp_pattern(&mut self, params: &[DualActivity], ret: DualReturn) -> Result<usize, Error> {
        let ret = DualRet::from(ret);
        if let Some(k) = self
            .jvps
            .iter()
            .position(|p| p.config.params == params && p.config.ret == ret)
        {
            return Ok(k);
        }
        let config = FruleConfig {
            params: params.to_vec(),
            ret,
            width: 1,
        };
        let jvp = CompiledJvp::with_config(&self.module, &self.name, &config, &self.hosts)?;
        self.compile_time += jvp.compile_time();
        self.jvps.push(JvpPattern {
            config,
            jvp: Arc::new(jvp),
            state: CallState::new(),
        });
        Ok(self.jvps.len() - 1)
    }
}

impl<A, R> Autodiff<A, R> {
    /// The forward-mode patterns compiled so far, as derived functions' names
    /// spell them: one letter per parameter (`D`ual, `C`onst), `_`, the return's
    /// letter (`D`ual, `O`: dual only, `C`onst): `"DC_D"`.
    pub fn jvp_patterns(&self) -> Vec<String> {
        self.jvps.iter().map(|p| p.config.pattern()).collect()
    }
}
