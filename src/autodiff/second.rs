//! Second order and dense Jacobians for [`Autodiff`]: [`Autodiff::hvp`],
//! [`Autodiff::hessian`], [`Autodiff::jacobian`].
//!
//! They take the activities of [`Autodiff::gradient`] ([`Active`](super::Active),
//! [`Duplicated`](super::Duplicated), [`DuplicatedNoNeed`](super::DuplicatedNoNeed),
//! [`Const`](super::Const)): the `Active` scalars and the elements of the
//! `Duplicated` slices are the coordinates differentiated, in the order of the
//! arguments. Each pattern of activities is derived and compiled on its first call
//! through the one [`Pipeline`] ([`Pipeline::compile_hvp`] for `hvp` and
//! `hessian`, which share it at width 1, and for `hessian_width`;
//! [`Pipeline::compile_jacobian`] for `jacobian` and `jacobian_width`) and kept
//! with its own [`CallState`], as the gradients' patterns are (one per pattern
//! and width). The calls go through [`CompiledHvp::hvp_args`],
//! [`CompiledHvp::hessian_into`]'s code and [`CompiledJacobian::jacobian_into`]'s:
//! no calling convention of their own.

use gradlift_adjoint::{Activity, RetActivity, RuleConfig};
use gradlift_ir::interp::Val;
use gradlift_jit::Arg;
use gradlift_trace::Args;

use super::{Activities, ArgVec, Autodiff, CallState, Elem, Native};
use crate::api::Error;
use crate::forward::{CompiledHvp, CompiledJacobian, Matrix, set_zeros};
use crate::pipeline::Pipeline;

/// A compiled second-order rule of one pattern, with its buffers.
pub(super) struct HvpPattern {
    params: Vec<Activity>,
    width: u32,
    hvp: CompiledHvp,
    state: CallState,
}

/// A compiled Jacobian (forward and reverse rules) of one pattern, with its
/// buffers.
pub(super) struct JacobianPattern {
    params: Vec<Activity>,
    width: u32,
    jacobian: CompiledJacobian,
    state: CallState,
}

/// The number of coordinates differentiated: each `Active` scalar, each element
/// of a `Duplicated` slice.
fn n_coords(pattern: &[Activity], args: &[Arg<'_>]) -> usize {
    pattern
        .iter()
        .zip(args)
        .filter(|(a, _)| **a != Activity::Const)
        .map(|(_, b)| b.slice_len().unwrap_or(1))
        .sum()
}

/// Whether the argument holds `f32`s.
fn is_f32(a: &Arg<'_>) -> bool {
    matches!(a, Arg::F32(_) | Arg::F32s(_) | Arg::F32sMut(_))
}

/// `dst` = the direction `v` of a parameter like `a`: a scalar for a scalar (`v`
/// of length 1), a slice of `v`'s length for a slice; reusing `dst`'s buffer.
fn set_direction(dst: &mut Val, a: &Arg<'_>, v: &[f64]) {
    match (a.slice_len(), is_f32(a)) {
        (None, false) => *dst = Val::F64(v[0]),
        (None, true) => *dst = Val::F32(v[0] as f32),
        (Some(_), false) => {
            let b = <f64 as Elem>::buf(dst);
            b.clear();
            b.extend_from_slice(v);
        }
        (Some(_), true) => {
            let b = <f32 as Elem>::buf(dst);
            b.clear();
            b.extend(v.iter().map(|&x| x as f32));
        }
    }
}

/// The floats of a float scalar or slice, as `f64`s, in order.
fn floats(v: &Val) -> impl Iterator<Item = f64> + '_ {
    let (s64, s32): (&[f64], &[f32]) = match v {
        Val::F64s(x) => (x, &[]),
        Val::F32s(x) => (&[], x),
        _ => (&[], &[]),
    };
    s64.iter().copied().chain(s32.iter().map(|&x| f64::from(x)))
}

impl<A: Args, R: Native> Autodiff<A, R> {
    /// The value, the gradient and a Hessian-vector product at `args` (forward
    /// over reverse mode): the activities of [`Autodiff::gradient`], an active
    /// return seeded with 1 (so with several float results, the Hessian of their
    /// sum). `v` is the direction and `hv` receives `H v`, both with one entry
    /// per coordinate differentiated (each [`Active`](super::Active) scalar, each
    /// element of each [`Duplicated`](super::Duplicated) slice, in the order of
    /// the arguments: the columns of [`Autodiff::hessian`]). The gradient is as
    /// [`Autodiff::gradient`] gives it: returned for `Active` arguments, added
    /// into the shadows of `Duplicated` ones. The first call of an activity
    /// pattern derives and compiles its second-order rule.
    ///
    /// ```
    /// use gradlift::trace::prelude::*;
    /// use gradlift::{Active, Const, autodiff};
    ///
    /// let mut f = autodiff("f", |x: Var, y: Var| x * x * y)?;
    /// // f = x² y: the gradient (2xy, x²), the Hessian [[2y, 2x], [2x, 0]].
    /// let mut hv = [0.0; 2];
    /// let (value, grad) = f.hvp((Active(3.0), Active(2.0)), &[1.0, 0.0], &mut hv)?;
    /// assert_eq!((value, grad, hv), (18.0, (12.0, 9.0), [4.0, 6.0]));
    /// // y constant: one coordinate.
    /// let mut hv = [0.0];
    /// f.hvp((Active(3.0), Const(2.0)), &[1.0], &mut hv)?;
    /// assert_eq!(hv, [4.0]);
    /// # Ok::<(), gradlift::Error>(())
    /// ```
    pub fn hvp<X: Activities<A>>(
        &mut self,
        args: X,
        v: &[f64],
        hv: &mut [f64],
    ) -> Result<(R::Value, X::Grad), Error> {
        let k = self.hvp_pattern(X::PATTERN, 1)?;
        let n_params = self.n_params;
        let p = &mut self.hvps[k];
        let grad = run_hvp(&p.hvp, n_params, &mut p.state, args, v, hv)?;
        Ok((R::native(&mut p.state.value.iter()), grad))
    }

    /// The dense Hessian at `args` over the coordinates differentiated (each
    /// [`Active`](super::Active) scalar, each element of each
    /// [`Duplicated`](super::Duplicated) slice, in the order of the arguments),
    /// with an active return seeded with 1 (with several float results, the
    /// Hessian of their sum). Row `j` is `H e_j`, one HVP per coordinate
    /// ([`CompiledHvp::hessian`]). The arguments, and the shadows of `Duplicated`
    /// ones, stay as they are. Same compiled pattern as [`Autodiff::hvp`].
    ///
    /// ```
    /// use gradlift::trace::prelude::*;
    /// use gradlift::{Active, Duplicated, autodiff};
    ///
    /// // f(x, y) = x0² x1 y: H over (x0, x1, y).
    /// let mut f = autodiff("f", |x: Slice<f64>, y: Var| x.at(0) * x.at(0) * x.at(1) * y)?;
    /// let (x, mut dx) = ([1.0, 2.0], [0.0; 2]);
    /// let h = f.hessian((Duplicated(&x[..], &mut dx[..]), Active(3.0)))?;
    /// assert_eq!((h.rows, h.cols), (3, 3));
    /// let (x0, x1, y) = (1.0, 2.0, 3.0);
    /// assert_eq!(h.data, [
    ///     2.0 * x1 * y, 2.0 * x0 * y, 2.0 * x0 * x1,
    ///     2.0 * x0 * y, 0.0, x0 * x0,
    ///     2.0 * x0 * x1, x0 * x0, 0.0,
    /// ]);
    /// assert_eq!(h.col_coords, [(0, Some(0)), (0, Some(1)), (1, None)]);
    /// # Ok::<(), gradlift::Error>(())
    /// ```
    pub fn hessian<X: Activities<A>>(&mut self, args: X) -> Result<Matrix, Error> {
        self.hessian_width(args, 1)
    }

    /// [`Autodiff::hessian`] by Hessian-vector products of width `width`: `width`
    /// rows per forward-over-reverse sweep ([`CompiledHvp::hessian`]), from 1 to
    /// [`MAX_WIDTH`](crate::adjoint::MAX_WIDTH). The rows are bit for bit those
    /// of width 1; the sweeps are fewer. Each width is a pattern of its own,
    /// compiled on its first call.
    ///
    /// ```
    /// use gradlift::trace::prelude::*;
    /// use gradlift::{Duplicated, autodiff};
    ///
    /// let mut f = autodiff("f", |x: Slice<f64>| {
    ///     let mut s = Var::from(0.0);
    ///     for i in 0..3 {
    ///         s = s + x.at(i) * x.at(i) * x.at(i);
    ///     }
    ///     s
    /// })?;
    /// let (x, mut dx) = ([1.0, 2.0, 3.0], [0.0; 3]);
    /// let h1 = f.hessian((Duplicated(&x[..], &mut dx[..]),))?;
    /// let h4 = f.hessian_width((Duplicated(&x[..], &mut dx[..]),), 4)?;
    /// assert_eq!(h4.data, h1.data);
    /// assert_eq!(h4.data, [6.0, 0.0, 0.0, 0.0, 12.0, 0.0, 0.0, 0.0, 18.0]);
    /// # Ok::<(), gradlift::Error>(())
    /// ```
    pub fn hessian_width<X: Activities<A>>(
        &mut self,
        args: X,
        width: u32,
    ) -> Result<Matrix, Error> {
        let k = self.hvp_pattern(X::PATTERN, width)?;
        let n_params = self.n_params;
        let p = &mut self.hvps[k];
        with_args(&mut p.state, n_params, args, |ws, args| {
            p.hvp.hessian_matrix(ws, args)
        })
    }

    /// The dense Jacobian at `args`: the columns are the coordinates
    /// differentiated (each [`Active`](super::Active) scalar, each element of each
    /// [`Duplicated`](super::Duplicated) slice, in the order of the arguments),
    /// the rows the float results, then the elements of the `Duplicated` writable
    /// slices' final contents ([`Matrix::row_coords`] says which). Built by forward
    /// or reverse sweeps, whichever are fewer ([`CompiledJacobian`], width 1). The
    /// arguments, and the shadows of `Duplicated` ones, stay as they are. The
    /// first call of an activity pattern derives and compiles its rules.
    ///
    /// ```
    /// use gradlift::trace::prelude::*;
    /// use gradlift::{Active, Const, autodiff};
    ///
    /// // polar(r, t) = (r cos t, r sin t)
    /// let mut polar = autodiff("polar", |r: Var, t: Var| (r * t.cos(), r * t.sin()))?;
    /// let (r, t) = (2.0_f64, 0.5_f64);
    /// let j = polar.jacobian((Active(r), Active(t)))?;
    /// assert_eq!(j.data, [t.cos(), -r * t.sin(), t.sin(), r * t.cos()]);
    /// // r constant: the column of t alone.
    /// let j = polar.jacobian((Const(r), Active(t)))?;
    /// assert_eq!((j.rows, j.cols), (2, 1));
    /// # Ok::<(), gradlift::Error>(())
    /// ```
    pub fn jacobian<X: Activities<A>>(&mut self, args: X) -> Result<Matrix, Error> {
        self.jacobian_width(args, 1)
    }

    /// [`Autodiff::jacobian`] with `width` columns per forward sweep or rows per
    /// reverse sweep ([`CompiledJacobian`]; from 1 to
    /// [`MAX_WIDTH`](crate::adjoint::MAX_WIDTH)), the sweeps chosen as at width
    /// 1: forward when `ceil(cols / width) <= ceil(rows / width)`. The entries
    /// are bit for bit those of width 1. Each width is a pattern of its own,
    /// compiled on its first call.
    ///
    /// ```
    /// use gradlift::trace::prelude::*;
    /// use gradlift::{Active, autodiff};
    ///
    /// let mut polar = autodiff("polar", |r: Var, t: Var| (r * t.cos(), r * t.sin()))?;
    /// let j1 = polar.jacobian((Active(2.0), Active(0.5)))?;
    /// let j2 = polar.jacobian_width((Active(2.0), Active(0.5)), 2)?;
    /// assert_eq!(j2.data, j1.data);
    /// # Ok::<(), gradlift::Error>(())
    /// ```
    pub fn jacobian_width<X: Activities<A>>(
        &mut self,
        args: X,
        width: u32,
    ) -> Result<Matrix, Error> {
        let k = self.jacobian_pattern(X::PATTERN, width)?;
        let n_params = self.n_params;
        let p = &mut self.jacobians[k];
        with_args(&mut p.state, n_params, args, |ws, args| {
            p.jacobian.jacobian_matrix(ws, args)
        })
    }

    /// [`Autodiff::hessian_width`] into `out` (row by row, `m * m` entries for
    /// `m` coordinates, in the order of [`Autodiff::hessian`]'s columns): the
    /// allocation-free form. The pattern's buffers stay in it, so once warm a
    /// call allocates nothing ([`CompiledHvp::hessian_into`]). A wrong length of
    /// `out` is an error that says the length expected.
    ///
    /// ```
    /// use gradlift::trace::prelude::*;
    /// use gradlift::{Active, autodiff};
    ///
    /// let mut f = autodiff("f", |x: Var, y: Var| x * x * y)?;
    /// let mut h = [0.0; 4];
    /// f.hessian_into((Active(3.0), Active(2.0)), 2, &mut h)?;
    /// assert_eq!(h, [4.0, 6.0, 6.0, 0.0]);
    /// # Ok::<(), gradlift::Error>(())
    /// ```
    pub fn hessian_into<X: Activities<A>>(
        &mut self,
        args: X,
        width: u32,
        out: &mut [f64],
    ) -> Result<(), Error> {
        let k = self.hvp_pattern(X::PATTERN, width)?;
        let n_params = self.n_params;
        let p = &mut self.hvps[k];
        with_args(&mut p.state, n_params, args, |ws, args| {
            p.hvp.hessian_args(ws, args, out)
        })
    }

    /// [`Autodiff::jacobian_width`] into `out` (row by row, rows times columns
    /// in the order of [`Autodiff::jacobian`]): the allocation-free form
    /// ([`CompiledJacobian::jacobian_into`]). A wrong length of `out` is an error
    /// that says the length expected.
    ///
    /// ```
    /// use gradlift::trace::prelude::*;
    /// use gradlift::{Active, autodiff};
    ///
    /// let mut polar = autodiff("polar", |r: Var, t: Var| (r * t.cos(), r * t.sin()))?;
    /// let (r, t) = (2.0_f64, 0.5_f64);
    /// let mut j = [0.0; 4];
    /// polar.jacobian_into((Active(r), Active(t)), 1, &mut j)?;
    /// assert_eq!(j, [t.cos(), -r * t.sin(), t.sin(), r * t.cos()]);
    /// # Ok::<(), gradlift::Error>(())
    /// ```
    pub fn jacobian_into<X: Activities<A>>(
        &mut self,
        args: X,
        width: u32,
        out: &mut [f64],
    ) -> Result<(), Error> {
        let k = self.jacobian_pattern(X::PATTERN, width)?;
        let n_params = self.n_params;
        let p = &mut self.jacobians[k];
        with_args(&mut p.state, n_params, args, |ws, args| {
            p.jacobian.jacobian_args(ws, args, out)
        })
    }

    /// The configuration of a pattern: the activities, an active return.
    fn second_config(&self, params: &[Activity]) -> Result<RuleConfig, Error> {
        let func = self
            .module
            .func_by_name(&self.name)
            .ok_or_else(|| Error::NoSuchFunction(self.name.clone()))?;
        Ok(RuleConfig::default_for(self.module.sig(func))
            .with_params(params)
            .with_ret(RetActivity::Active)
            .with_checkpoint_bytes(self.checkpoint_bytes))
    }

    /// The index of the compiled second-order pattern, compiling it first if
    /// needed.
    fn hvp_pattern(&mut self, params: &[Activity], width: u32) -> Result<usize, Error> {
        if let Some(k) = self
            .hvps
            .iter()
            .position(|p| p.params == params && p.width == width)
        {
            return Ok(k);
        }
        let config = self.second_config(params)?;
        let hvp = Pipeline::new().with_hosts(self.hosts.clone()).compile_hvp(
            &self.module,
            &self.name,
            Some(&config),
            width,
        )?;
        self.compile_time += hvp.compile_time();
        self.hvps.push(HvpPattern {
            params: params.to_vec(),
            width,
            hvp,
            state: CallState::new(),
        });
        Ok(self.hvps.len() - 1)
    }

    /// The index of the compiled Jacobian pattern, compiling it first if needed.
    fn jacobian_pattern(&mut self, params: &[Activity], width: u32) -> Result<usize, Error> {
        if let Some(k) = self
            .jacobians
            .iter()
            .position(|p| p.params == params && p.width == width)
        {
            return Ok(k);
        }
        let config = self.second_config(params)?;
        let jacobian = Pipeline::new()
            .with_hosts(self.hosts.clone())
            .compile_jacobian(&self.module, &self.name, Some(&config), width)?;
        self.compile_time += jacobian.compile_time();
        self.jacobians.push(JacobianPattern {
            params: params.to_vec(),
            width,
            jacobian,
            state: CallState::new(),
        });
        Ok(self.jacobians.len() - 1)
    }
}

impl<A, R> Autodiff<A, R> {
    /// The second-order patterns compiled so far ([`Autodiff::hvp`],
    /// [`Autodiff::hessian`]), as [`Autodiff::patterns`] spells them.
    pub fn hvp_patterns(&self) -> Vec<String> {
        self.hvps
            .iter()
            .map(|p| p.hvp.rule().layout.config.pattern())
            .collect()
    }
}

/// Calls `f` with the workspace of `state` and `args` borrowed (their shadows
/// unused).
fn with_args<A, X: Activities<A>, T>(
    state: &mut CallState,
    n_params: usize,
    mut args: X,
    f: impl FnOnce(&mut gradlift_jit::Workspace, &[Arg<'_>]) -> Result<T, Error>,
) -> Result<T, Error> {
    if state.scratch.len() != n_params {
        state.scratch.resize(n_params, Val::Bool(false));
    }
    let CallState { ws, scratch, .. } = state;
    let (mut borrowed, mut shadows) = (ArgVec::new(), ArgVec::new());
    args.args(scratch, &mut borrowed, &mut shadows)?;
    f(ws, &borrowed)
}

/// An HVP of the compiled pattern `hvp` with the buffers of `state` (the value
/// left in `state.value`): the one code path of [`Autodiff::hvp`].
fn run_hvp<A, X: Activities<A>>(
    hvp: &CompiledHvp,
    n_params: usize,
    state: &mut CallState,
    mut args: X,
    v: &[f64],
    hv: &mut [f64],
) -> Result<X::Grad, Error> {
    if state.scratch.len() != n_params {
        state.scratch.resize(n_params, Val::Bool(false));
    }
    let CallState {
        ws,
        scratch,
        value,
        cts,
        dirs,
        grads,
        hvps,
        ..
    } = state;
    let (mut borrowed, mut shadows) = (ArgVec::new(), ArgVec::new());
    args.args(scratch, &mut borrowed, &mut shadows)?;
    let m = n_coords(X::PATTERN, &borrowed);
    if v.len() != m || hv.len() != m {
        return Err(Error::BadArguments(format!(
            "the arguments have {m} coordinates differentiated: the direction and the product need {m} entries each, given {} and {}",
            v.len(),
            hv.len()
        )));
    }
    // The direction of each differentiated parameter, and zeroed outputs.
    let n_diff = X::PATTERN.iter().filter(|&&a| a != Activity::Const).count();
    dirs.resize(n_diff, Val::Bool(false));
    grads.resize(n_diff, Val::Bool(false));
    hvps.resize(n_diff, Val::Bool(false));
    let (mut k, mut c) = (0, 0);
    for (a, b) in X::PATTERN.iter().zip(&borrowed) {
        if *a == Activity::Const {
            continue;
        }
        let len = b.slice_len().unwrap_or(1);
        set_direction(&mut dirs[k], b, &v[c..c + len]);
        set_zeros(&mut grads[k], is_f32(b), Some(len));
        set_zeros(&mut hvps[k], is_f32(b), Some(len));
        k += 1;
        c += len;
    }
    {
        let mut dv: ArgVec<'_> = dirs.iter_mut().map(Val::as_arg).collect();
        let mut gv: ArgVec<'_> = grads.iter_mut().map(Val::as_arg).collect();
        let mut hvv: ArgVec<'_> = hvps.iter_mut().map(Val::as_arg).collect();
        hvp.hvp_args(ws, &mut borrowed, &mut dv, value, &mut gv, &mut hvv)?;
    }
    // The gradient: the active scalars' returned, the slices' added into their
    // shadows, as `gradient` gives them.
    cts.clear();
    let mut shadows = shadows.iter_mut();
    for (a, g) in X::PATTERN
        .iter()
        .filter(|&&a| a != Activity::Const)
        .zip(grads.iter())
    {
        match (a, g) {
            (Activity::Active, Val::F64s(g)) => cts.push(Val::F64(g[0])),
            (Activity::Active, Val::F32s(g)) => cts.push(Val::F32(g[0])),
            (_, g) => match shadows.next() {
                Some(Arg::F64sMut(d)) => d.iter_mut().zip(floats(g)).for_each(|(d, g)| *d += g),
                Some(Arg::F32sMut(d)) => d
                    .iter_mut()
                    .zip(floats(g))
                    .for_each(|(d, g)| *d += g as f32),
                _ => {}
            },
        }
    }
    for (o, x) in hv.iter_mut().zip(hvps.iter().flat_map(floats)) {
        *o = x;
    }
    Ok(X::grads(cts))
}
