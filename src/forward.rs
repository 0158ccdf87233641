//! Forward mode, compiled: [`CompiledJvp`], a function's forward rule
//! ([`build_frule`](gradlift_adjoint::build_frule): the value and directional
//! derivatives in one sweep) compiled to native code.
//!
//! ```
//! use gradlift::{CompiledJvp, Workspace, ir::{parse, interp::Val}};
//!
//! let module = parse("
//!     func @f(%x: f64, %y: f64) -> f64 {
//!     entry:
//!         %xy = fmul %x, %y
//!         %s = sin %xy
//!         ret %s
//!     }
//! ")?;
//! let f = CompiledJvp::new(&module, "f")?;
//! let mut ws = Workspace::new();
//! // d/dt sin((1 + t) * 2) at t = 0: 2 cos 2.
//! let out = f.jvp(&mut ws, &[Val::F64(1.0), Val::F64(2.0)], &[Some(Val::F64(1.0)), Some(Val::F64(0.0))])?;
//! assert_eq!(out.value, Some(vec![Val::F64(2.0f64.sin())]));
//! assert_eq!(out.tangents, [Val::F64(2.0 * 2.0f64.cos())]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::time::Duration;

use gradlift_adjoint::{
    Activity, Frule, FruleConfig, Hvp, HvpRule, Jvp, RuleConfig, hvp_vals, jvp_vals, run_frule,
    run_hvp,
};
use gradlift_ir::engine::{Arg, Val, check_args};
use gradlift_ir::{Module, Type};
use gradlift_jit::{Compiled, Hosts, JitEngine, Workspace};
use smallvec::SmallVec;

use crate::api::Error;
use crate::pipeline::Pipeline;

/// The forward rule of a function compiled to native code: its value and its
/// derivatives along N directions (the width) in one sweep.
///
/// Compiled once, it is `Send + Sync`: share it and give each thread its own
/// [`Workspace`].
#[derive(Debug)]
pub struct CompiledJvp {
    frule: Frule,
    compiled: Compiled,
    compile_time: Duration,
}

impl CompiledJvp {
    /// Derives the forward rule of `@name` with the default activities
    /// ([`FruleConfig::default_for`]: float scalars and float slices `dual`, a
    /// `dual` return, width 1) and compiles it, through the default [`Pipeline`].
    pub fn new(module: &Module, name: &str) -> Result<CompiledJvp, Error> {
        Pipeline::new().compile_jvp(module, name, None)
    }

    /// Derives the forward rule of `@name` under `config` (activities, width) and
    /// compiles it, with host functions for the `extern`s it calls (and their
    /// `jvp` rules).
    ///
    /// ```
    /// use gradlift::{CompiledJvp, Hosts, Workspace, adjoint::FruleConfig};
    /// use gradlift::ir::{parse, interp::Val};
    ///
    /// let module = parse("
    ///     func @norm2(%x: [f64]) -> f64 {
    ///     entry:
    ///         %a = load %x[0]
    ///         %b = load %x[1]
    ///         %aa = fmul %a, %a
    ///         %bb = fmul %b, %b
    ///         %r = fadd %aa, %bb
    ///         ret %r
    ///     }
    /// ")?;
    /// let f = module.func_by_name("norm2").unwrap();
    /// // Two directions per sweep: the whole gradient (2a, 2b) at once.
    /// let config = FruleConfig::default_for(module.sig(f)).with_width(2);
    /// let jvp = CompiledJvp::with_config(&module, "norm2", &config, &Hosts::new())?;
    /// let x = Val::F64s(vec![3.0, 4.0]);
    /// // Lane j of element i at i * 2 + j: the identity, lane by lane.
    /// let dx = Val::F64s(vec![1.0, 0.0, 0.0, 1.0]);
    /// let out = jvp.jvp(&mut Workspace::new(), &[x], &[Some(dx)])?;
    /// assert_eq!(out.tangents, [Val::F64s(vec![6.0, 8.0])]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn with_config(
        module: &Module,
        name: &str,
        config: &FruleConfig,
        hosts: &Hosts,
    ) -> Result<CompiledJvp, Error> {
        Pipeline::new()
            .with_hosts(hosts.clone())
            .compile_jvp(module, name, Some(config))
    }

    pub(crate) fn new_compiled(
        frule: Frule,
        compiled: Compiled,
        compile_time: Duration,
    ) -> CompiledJvp {
        CompiledJvp {
            frule,
            compiled,
            compile_time,
        }
    }

    pub(crate) fn set_compile_time(&mut self, time: Duration) {
        self.compile_time = time;
    }

    /// The value at `args` and the derivatives along `tangents`: one entry per
    /// parameter, `Some` for the `dual` ones (a float scalar's tangent is a scalar
    /// at width 1 and a slice of its N lanes at width N; a float slice's tangent is
    /// N times its length, lane `j` of element `i` at `i * N + j`), `None` for the
    /// rest. See [`Jvp`] for what comes back; `mut` slices and their tangents are
    /// returned as the function left them, the caller's stay as they are.
    pub fn jvp(
        &self,
        ws: &mut Workspace,
        args: &[Val],
        tangents: &[Option<Val>],
    ) -> Result<Jvp, Error> {
        let mut engine = self.compiled.engine(ws);
        Ok(jvp_vals(&mut engine, &self.frule, args, tangents)?)
    }

    /// The forward rule with borrowed arguments and tangents: nothing is copied,
    /// and once `out` and the workspace have grown a call allocates nothing. The
    /// fastest form. `tangents` has one entry per `dual` parameter (shaped as
    /// [`CompiledJvp::jvp`] says; a `mut` slice's tangent writable, it ends holding
    /// the tangent of the slice's final contents); `out` gets the primal results
    /// (unless the return is `dualonly`), then N tangents per float result.
    ///
    /// ```
    /// use gradlift::{CompiledJvp, Workspace, ir::{parse, interp::Val}, jit::Arg};
    ///
    /// let module = parse("
    ///     func @scale(%x: mut [f64], %k: f64) {
    ///     entry:
    ///         %a = load %x[0]
    ///         %b = fmul %a, %k
    ///         store %x[0], %b
    ///         ret
    ///     }
    /// ")?;
    /// let f = CompiledJvp::new(&module, "scale")?;
    /// let (mut x, mut dx) = ([3.0], [1.0]);
    /// let mut out = Vec::new();
    /// f.jvp_args(
    ///     &mut Workspace::new(),
    ///     &mut [Arg::F64sMut(&mut x), Arg::F64(2.0)],
    ///     &mut [Arg::F64sMut(&mut dx), Arg::F64(0.5)],
    ///     &mut out,
    /// )?;
    /// assert_eq!(x, [6.0]);
    /// assert_eq!(dx, [1.0 * 2.0 + 3.0 * 0.5]); // k dx + x dk
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn jvp_args(
        &self,
        ws: &mut Workspace,
        args: &mut [Arg<'_>],
        tangents: &mut [Arg<'_>],
        out: &mut Vec<Val>,
    ) -> Result<(), Error> {
        let mut engine = self.compiled.engine(ws);
        Ok(run_frule(&mut engine, &self.frule, args, tangents, out)?)
    }

    /// The compiled rule as an engine calling with `ws`, for code written once over
    /// both engines, such as [`run_frule`].
    pub fn engine<'a>(&'a self, ws: &'a mut Workspace) -> JitEngine<'a> {
        self.compiled.engine(ws)
    }

    /// The derived forward rule: the module with `@f.jvp` and how its parameters
    /// line up with the primal's.
    pub fn frule(&self) -> &Frule {
        &self.frule
    }

    /// How long deriving and compiling took.
    pub fn compile_time(&self) -> Duration {
        self.compile_time
    }
}

/// A dense Jacobian or Hessian, with how its rows and columns map to the
/// function's parameters and results.
#[derive(Clone, Debug, PartialEq)]
pub struct Matrix {
    /// Rows.
    pub rows: usize,
    /// Columns.
    pub cols: usize,
    /// The entries, row by row (`data[r * cols + c]`).
    pub data: Vec<f64>,
    /// What each column is: `(parameter, None)` for a float scalar parameter,
    /// `(parameter, Some(i))` for element `i` of a float slice.
    pub col_coords: Vec<(usize, Option<usize>)>,
    /// What each row is: for a Jacobian `(result, None)` for a float result and
    /// `(parameter, Some(i))` for element `i` of a `mut` slice's final contents
    /// (after the results); for a Hessian the same as the columns.
    pub row_coords: Vec<(usize, Option<usize>)>,
}

impl Matrix {
    /// The entry at row `r`, column `c`.
    pub fn get(&self, r: usize, c: usize) -> f64 {
        self.data[r * self.cols + c]
    }

    /// That `data` holds `rows * cols` entries (the fields are public, so a matrix
    /// built by hand may not).
    #[cfg(any(feature = "ndarray", feature = "nalgebra"))]
    fn check_shape(&self) -> Result<(), Error> {
        if self.rows.checked_mul(self.cols) == Some(self.data.len()) {
            Ok(())
        } else {
            Err(Error::BadArguments(format!(
                "a {} x {} matrix holds {} entries, not {}",
                self.rows,
                self.cols,
                self.rows.saturating_mul(self.cols),
                self.data.len()
            )))
        }
    }
}

/// The matrix as an `ndarray` array of its shape (feature `ndarray`), moving its
/// entries; an error if `data` does not hold `rows * cols` entries.
///
/// ```
/// # #[cfg(feature = "ndarray")] {
/// use gradlift::trace::prelude::*;
/// use gradlift::{Active, autodiff};
///
/// let mut f = autodiff("f", |x: Var, y: Var| x * x * y)?;
/// let h = ndarray::Array2::try_from(f.hessian((Active(3.0), Active(4.0)))?)?;
/// assert_eq!(h, ndarray::array![[8.0, 6.0], [6.0, 0.0]]);
/// # }
/// # Ok::<(), gradlift::Error>(())
/// ```
#[cfg(feature = "ndarray")]
impl TryFrom<Matrix> for ::ndarray::Array2<f64> {
    type Error = Error;
    fn try_from(m: Matrix) -> Result<Self, Error> {
        m.check_shape()?;
        ::ndarray::Array2::from_shape_vec((m.rows, m.cols), m.data)
            .map_err(|e| Error::BadArguments(e.to_string()))
    }
}

/// The matrix as a `nalgebra` matrix of its shape (feature `nalgebra`); an error if
/// `data` does not hold `rows * cols` entries.
///
/// ```
/// # #[cfg(feature = "nalgebra")] {
/// use gradlift::trace::prelude::*;
/// use gradlift::{Active, autodiff};
///
/// let mut f = autodiff("f", |x: Var, y: Var| x * x * y)?;
/// let h = nalgebra::DMatrix::try_from(f.hessian((Active(3.0), Active(4.0)))?)?;
/// assert_eq!(h, nalgebra::dmatrix![8.0, 6.0; 6.0, 0.0]);
/// # }
/// # Ok::<(), gradlift::Error>(())
/// ```
#[cfg(feature = "nalgebra")]
impl TryFrom<Matrix> for ::nalgebra::DMatrix<f64> {
    type Error = Error;
    fn try_from(m: Matrix) -> Result<Self, Error> {
        m.check_shape()?;
        Ok(::nalgebra::DMatrix::from_row_slice(m.rows, m.cols, &m.data))
    }
}

/// The arguments lent read-only, for the prepared forms' `&[Val]` wrappers.
fn views(args: &[Val]) -> SmallVec<[Arg<'_>; 8]> {
    args.iter().map(Arg::from).collect()
}

/// The coordinates of the `dual` parameters at `args`: each float scalar, each
/// element of a float slice.
fn input_coords(args: &[Arg<'_>], dual: impl Fn(usize) -> bool) -> Vec<(usize, Option<usize>)> {
    let mut out = Vec::new();
    for (i, a) in args.iter().enumerate() {
        if !dual(i) {
            continue;
        }
        match a.slice_len() {
            Some(n) => out.extend((0..n).map(|e| (i, Some(e)))),
            None => out.push((i, None)),
        }
    }
    out
}

/// The number of coordinates of the `dual` parameters at `args`.
fn n_coords(args: &[Arg<'_>], dual: impl Fn(usize) -> bool) -> usize {
    (0..args.len())
        .filter(|&i| dual(i))
        .map(|i| args[i].slice_len().unwrap_or(1))
        .sum()
}

/// Lane `j` of element `e` (or of a scalar's lanes) of a tangent or HVP output.
fn lane(v: &Val, e: Option<usize>, j: usize, n: usize) -> f64 {
    let k = e.map_or(j, |e| e * n + j);
    match v {
        Val::F64(x) => *x,
        Val::F32(x) => f64::from(*x),
        Val::F64s(x) => x[k],
        Val::F32s(x) => f64::from(x[k]),
        _ => 0.0,
    }
}

/// The buffers of the prepared forms ([`CompiledHvp::hvp_args`],
/// [`CompiledHvp::hessian_into`], the `jacobian_into`s), kept in the workspace
/// between calls ([`Workspace::take_scratch`]) so that once they have grown a call
/// allocates nothing.
#[derive(Default)]
struct Scratch {
    /// A rule's results: the pullback's (second order), a forward rule's
    /// (Jacobians), the cotangents of the active parameters (reverse Jacobians).
    out: Vec<Val>,
    /// The primal results.
    value: Vec<Val>,
    /// Copies of the arguments, one per parameter (each sweep starts from the
    /// caller's, whatever the last one wrote into `mut` slices).
    args: Vec<Val>,
    /// Directions or tangents, one per differentiated parameter.
    dirs: Vec<Val>,
    /// Gradient buffers (or shadows), one per differentiated parameter.
    grads: Vec<Val>,
    /// H v buffers, one per differentiated parameter.
    hvps: Vec<Val>,
    /// The seeds of a reverse sweep.
    seeds: Vec<f64>,
}

/// `dst` = a copy of `src`, reusing `dst`'s buffer.
fn assign_arg(dst: &mut Val, src: &Arg<'_>) {
    match (dst, src.shared()) {
        (Val::F64s(d), Arg::F64s(s)) => {
            d.clear();
            d.extend_from_slice(s);
        }
        (Val::F32s(d), Arg::F32s(s)) => {
            d.clear();
            d.extend_from_slice(s);
        }
        (Val::I64s(d), Arg::I64s(s)) => {
            d.clear();
            d.extend_from_slice(s);
        }
        (d, s) => *d = s.to_val(),
    }
}

/// `dst` = float zeros: a scalar (`len` `None`) or a slice of `len`, of `f32`s or
/// `f64`s, reusing `dst`'s buffer.
pub(crate) fn set_zeros(dst: &mut Val, f32: bool, len: Option<usize>) {
    match (len, f32, dst) {
        (None, false, d) => *d = Val::F64(0.0),
        (None, true, d) => *d = Val::F32(0.0),
        (Some(n), false, Val::F64s(v)) => {
            v.clear();
            v.resize(n, 0.0);
        }
        (Some(n), true, Val::F32s(v)) => {
            v.clear();
            v.resize(n, 0.0);
        }
        (Some(n), false, d) => *d = Val::F64s(vec![0.0; n]),
        (Some(n), true, d) => *d = Val::F32s(vec![0.0; n]),
    }
}

/// Sets index `k` of a float slice (or a float scalar) to 1.
fn set_one(v: &mut Val, k: usize) {
    match v {
        Val::F64(x) => *x = 1.0,
        Val::F32(x) => *x = 1.0,
        Val::F64s(x) => x[k] = 1.0,
        Val::F32s(x) => x[k] = 1.0,
        _ => {}
    }
}

/// Whether a parameter of type `ty` holds `f32`s.
fn is_f32(ty: Type) -> bool {
    ty.elem().map_or(ty, |e| e.ty()) == Type::F32
}

/// Unit directions (or tangents) at width `n` for the coordinates
/// `start..start + n` (lanes past the end zero) into `dirs`, one per parameter
/// that `dual` selects: a scalar at width 1, a slice of its `n` lanes at width
/// `n`, a slice `n` times as long for a slice.
fn unit_lanes(
    dirs: &mut [Val],
    args: &[Arg<'_>],
    sig: &gradlift_ir::Signature,
    dual: impl Fn(usize) -> bool,
    start: usize,
    n: usize,
) {
    let (mut k, mut c) = (0, 0);
    for (i, a) in args.iter().enumerate() {
        if !dual(i) {
            continue;
        }
        let d = &mut dirs[k];
        let len = a.slice_len();
        let shape = match len {
            Some(l) => Some(l * n),
            None if n == 1 => None,
            None => Some(n),
        };
        set_zeros(d, is_f32(sig.params[i]), shape);
        let l = len.unwrap_or(1);
        for j in 0..n {
            let col = start + j;
            if (c..c + l).contains(&col) {
                set_one(d, (col - c) * n + j);
            }
        }
        c += l;
        k += 1;
    }
}

/// Checks arguments that each sweep copies (so a read-only slice serves for a
/// `mut` parameter) against the signature.
fn check_copied(fname: &str, sig: &gradlift_ir::Signature, args: &[Arg<'_>]) -> Result<(), Error> {
    let bad = |m: String| Err(Error::BadArguments(m));
    if args.len() != sig.params.len() {
        return match check_args(fname, sig, args) {
            Err(k) => bad(k.to_string()),
            Ok(()) => bad(format!(
                "@{fname} takes {} arguments, given {}",
                sig.params.len(),
                args.len()
            )),
        };
    }
    for (i, (a, &ty)) in args.iter().zip(&sig.params).enumerate() {
        let want = if ty.is_mut_slice() {
            ty.elem().map_or(ty, Type::slice)
        } else {
            ty
        };
        if !a.fits(want) {
            return bad(format!(
                "argument {} of @{fname} must be {want}, found {}",
                i + 1,
                a.ty()
            ));
        }
    }
    Ok(())
}

/// `Error::BadArguments` for an output buffer of the wrong length.
fn bad_out(what: &str, rows: usize, cols: usize, given: usize) -> Error {
    Error::BadArguments(format!(
        "the {what} at these arguments is {rows} x {cols}: the output must have length {}, given {given}",
        rows * cols
    ))
}

impl CompiledJvp {
    /// The dense Jacobian at `args` by forward mode: one sweep per `width`
    /// columns (the inputs: every element of the `dual` parameters), each with the
    /// identity's columns as tangents. Rows are the float results, then the
    /// elements of the `dual` `mut` slices' final contents (with a `const`
    /// return, only the slices' rows).
    ///
    /// ```
    /// use gradlift::{CompiledJvp, Workspace, ir::{parse, interp::Val}};
    ///
    /// let module = parse("
    ///     func @f(%x: f64, %y: f64) -> (f64, f64) {
    ///     entry:
    ///         %p = fmul %x, %y
    ///         %s = fadd %x, %y
    ///         ret %p, %s
    ///     }
    /// ")?;
    /// let j = CompiledJvp::new(&module, "f")?.jacobian(&mut Workspace::new(), &[Val::F64(2.0), Val::F64(5.0)])?;
    /// assert_eq!((j.rows, j.cols), (2, 2));
    /// assert_eq!(j.data, [5.0, 2.0, 1.0, 1.0]); // [[y, x], [1, 1]]
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn jacobian(&self, ws: &mut Workspace, args: &[Val]) -> Result<Matrix, Error> {
        let args = views(args);
        let (rows, cols) = self.jacobian_coords(&args);
        let mut data = vec![0.0; rows.len() * cols.len()];
        self.jacobian_args(ws, &args, &mut data)?;
        Ok(Matrix {
            rows: rows.len(),
            cols: cols.len(),
            data,
            col_coords: cols,
            row_coords: rows,
        })
    }

    /// [`CompiledJvp::jacobian`] into `out` (row by row: `out[r * cols + c]`, the
    /// rows and columns as [`CompiledJvp::jacobian`] orders them; its length must
    /// be rows times columns). The sweeps' arguments and tangents are kept in the
    /// workspace, so once it has grown a call allocates nothing. `args` stay as
    /// they are (each sweep runs on a copy).
    ///
    /// ```
    /// use gradlift::{CompiledJvp, Workspace, ir::{parse, interp::Val}};
    ///
    /// let module = parse("
    ///     func @f(%x: f64, %y: f64) -> (f64, f64) {
    ///     entry:
    ///         %p = fmul %x, %y
    ///         %s = fadd %x, %y
    ///         ret %p, %s
    ///     }
    /// ")?;
    /// let f = CompiledJvp::new(&module, "f")?;
    /// let (mut ws, mut out) = (Workspace::new(), [0.0; 4]);
    /// for x in [1.0, 2.0, 3.0] {
    ///     f.jacobian_into(&mut ws, &[Val::F64(x), Val::F64(5.0)], &mut out)?;
    ///     assert_eq!(out, [5.0, x, 1.0, 1.0]); // [[y, x], [1, 1]]
    /// }
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn jacobian_into(
        &self,
        ws: &mut Workspace,
        args: &[Val],
        out: &mut [f64],
    ) -> Result<(), Error> {
        self.jacobian_args(ws, &views(args), out)
    }

    /// Whether parameter `i` takes a tangent.
    fn dual(&self, i: usize) -> bool {
        self.frule.layout.config.params.get(i) == Some(&gradlift_adjoint::DualActivity::Dual)
    }

    /// The rows and the columns of the Jacobian at `args`.
    #[allow(clippy::type_complexity)]
    fn jacobian_coords(
        &self,
        args: &[Arg<'_>],
    ) -> (Vec<(usize, Option<usize>)>, Vec<(usize, Option<usize>)>) {
        let layout = &self.frule.layout;
        let sig = self.frule.module.sig(layout.primal);
        let cols = input_coords(args, |i| self.dual(i));
        let mut rows: Vec<(usize, Option<usize>)> =
            layout.tangent_results.iter().map(|&r| (r, None)).collect();
        for (i, a) in args.iter().enumerate() {
            if self.dual(i) && sig.params.get(i).is_some_and(|t| t.is_mut_slice()) {
                rows.extend((0..a.slice_len().unwrap_or(0)).map(|e| (i, Some(e))));
            }
        }
        (rows, cols)
    }

    /// [`CompiledJvp::jacobian_into`] on borrowed arguments (read only: each sweep
    /// copies them).
    pub(crate) fn jacobian_args(
        &self,
        ws: &mut Workspace,
        args: &[Arg<'_>],
        out: &mut [f64],
    ) -> Result<(), Error> {
        let layout = &self.frule.layout;
        let sig = self.frule.module.sig(layout.primal);
        let fname = self.frule.module.name(layout.primal);
        check_copied(fname, sig, args)?;
        let dual = |i: usize| self.dual(i);
        let cols = n_coords(args, dual);
        let mut_rows: usize = (0..args.len())
            .filter(|&i| dual(i) && sig.params[i].is_mut_slice())
            .map(|i| args[i].slice_len().unwrap_or(0))
            .sum();
        let n_results = layout.tangent_results.len();
        let rows = n_results + mut_rows;
        if out.len() != rows * cols {
            return Err(bad_out("Jacobian", rows, cols, out.len()));
        }
        let n = layout.config.width as usize;
        let n_primal = if layout.primal_results {
            sig.results.len()
        } else {
            0
        };
        let n_dual = (0..args.len()).filter(|&i| dual(i)).count();
        let mut s = ws.take_scratch::<Scratch>();
        let result = (|| -> Result<(), Error> {
            let Scratch {
                out: results,
                args: a,
                dirs,
                ..
            } = &mut *s;
            a.resize(args.len(), Val::Bool(false));
            dirs.resize(n_dual, Val::Bool(false));
            let mut start = 0;
            while start < cols {
                for (d, src) in a.iter_mut().zip(args) {
                    assign_arg(d, src);
                }
                unit_lanes(dirs, args, sig, dual, start, n);
                {
                    let mut av: SmallVec<[Arg<'_>; 8]> = a.iter_mut().map(Val::as_arg).collect();
                    let mut tv: SmallVec<[Arg<'_>; 8]> = dirs.iter_mut().map(Val::as_arg).collect();
                    let mut engine = self.compiled.engine(ws);
                    run_frule(&mut engine, &self.frule, &mut av, &mut tv, results)?;
                }
                for j in 0..n.min(cols - start) {
                    let c = start + j;
                    for k in 0..n_results {
                        out[k * cols + c] = lane(&results[n_primal + k * n + j], None, 0, 1);
                    }
                    let mut r = n_results;
                    for (k, i) in (0..args.len()).filter(|&i| dual(i)).enumerate() {
                        if !sig.params[i].is_mut_slice() {
                            continue;
                        }
                        for e in 0..args[i].slice_len().unwrap_or(0) {
                            out[r * cols + c] = lane(&dirs[k], Some(e), j, n);
                            r += 1;
                        }
                    }
                }
                start += n;
            }
            Ok(())
        })();
        ws.keep_scratch(s);
        result
    }
}

/// The second-order rule of a function compiled to native code
/// ([`build_hvp`](gradlift_adjoint::build_hvp): forward mode over reverse mode):
/// Hessian-vector products, N directions per call, and dense Hessians.
///
/// ```
/// use gradlift::{CompiledHvp, Workspace, ir::{parse, interp::Val}};
///
/// let module = parse("
///     func @f(%x: f64, %y: f64) -> f64 {
///     entry:
///         %xx = fmul %x, %x
///         %xxy = fmul %xx, %y
///         ret %xxy
///     }
/// ")?;
/// let h = CompiledHvp::new(&module, "f")?;
/// let mut ws = Workspace::new();
/// let args = [Val::F64(3.0), Val::F64(2.0)];
/// // f = x² y: H = [[2y, 2x], [2x, 0]].
/// let out = h.hvp(&mut ws, &args, &[Some(Val::F64(1.0)), Some(Val::F64(0.0))])?;
/// assert_eq!(out.hvp, [Some(Val::F64(4.0)), Some(Val::F64(6.0))]);
/// let m = h.hessian(&mut ws, &args)?;
/// assert_eq!(m.data, [4.0, 6.0, 6.0, 0.0]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct CompiledHvp {
    rule: HvpRule,
    compiled: Compiled,
    compile_time: Duration,
}

impl CompiledHvp {
    /// The second-order rule of `@name` with the default activities
    /// ([`RuleConfig::default_for`]), one direction per call, through the default
    /// [`Pipeline`].
    pub fn new(module: &Module, name: &str) -> Result<CompiledHvp, Error> {
        Pipeline::new().compile_hvp(module, name, None, 1)
    }

    /// The second-order rule of `@name` under `config` (which parameters are
    /// differentiated), `width` directions per call, with host functions.
    pub fn with_config(
        module: &Module,
        name: &str,
        config: &RuleConfig,
        width: u32,
        hosts: &Hosts,
    ) -> Result<CompiledHvp, Error> {
        Pipeline::new()
            .with_hosts(hosts.clone())
            .compile_hvp(module, name, Some(config), width)
    }

    pub(crate) fn new_compiled(rule: HvpRule, compiled: Compiled, compile_time: Duration) -> Self {
        CompiledHvp {
            rule,
            compiled,
            compile_time,
        }
    }

    pub(crate) fn set_compile_time(&mut self, time: Duration) {
        self.compile_time = time;
    }

    /// The value, the gradient and the Hessian's product with the directions `v`
    /// at `args` (one entry per parameter: `Some` for the `active` and `dup` ones,
    /// shaped as [`CompiledJvp::jvp`]'s tangents at this width, `None` for the
    /// rest). See [`Hvp`]. It runs [`hvp_vals`], which copies the arguments and
    /// calls what [`CompiledHvp::hvp_args`] calls.
    pub fn hvp(&self, ws: &mut Workspace, args: &[Val], v: &[Option<Val>]) -> Result<Hvp, Error> {
        let mut engine = self.compiled.engine(ws);
        Ok(hvp_vals(&mut engine, &self.rule, args, v)?)
    }

    /// [`CompiledHvp::hvp`] with borrowed arguments, directions and outputs
    /// ([`run_hvp`]): nothing is copied, and once `value` and the workspace have
    /// grown a call allocates nothing. The numbers are bit for bit those of
    /// [`CompiledHvp::hvp`].
    ///
    /// - `args`: the primal's arguments (`mut` slices are written as the primal
    ///   writes them);
    /// - `directions`: one per `active` and `dup` parameter, in order, shaped as
    ///   for [`CompiledHvp::hvp`] at this width N (a scalar's: a scalar at width
    ///   1, a slice of its N lanes at width N; a slice's: N times its length, lane
    ///   `j` of element `i` at `i * N + j`; writable for a `mut` slice, which ends
    ///   holding the tangent of the slice's final contents);
    /// - `value`: the primal results (empty when the rule does not return them);
    /// - `gradient`: one writable slice per `active` and `dup` parameter, of its
    ///   element type, of length 1 for a scalar and of the slice's length for a
    ///   slice, **overwritten** with the gradient (unit seeds, zero shadows);
    /// - `hvp`: one writable slice per `active` and `dup` parameter, N times the
    ///   length of its `gradient` slice (lane `j` of element `i` at `i * N + j`),
    ///   **overwritten** with the Hessian's products with the directions.
    ///
    /// ```
    /// use gradlift::{CompiledHvp, Workspace, ir::parse, jit::Arg};
    ///
    /// // f(x, y) = x² y with x a slice of one element: H = [[2y, 2x], [2x, 0]].
    /// let module = parse("
    ///     func @f(%x: [f64], %y: f64) -> f64 {
    ///     entry:
    ///         %a = load %x[0]
    ///         %aa = fmul %a, %a
    ///         %r = fmul %aa, %y
    ///         ret %r
    ///     }
    /// ")?;
    /// let h = CompiledHvp::new(&module, "f")?;
    /// let mut ws = Workspace::new();
    /// let (x, y) = ([3.0], 2.0);
    /// let (mut value, mut gx, mut gy, mut hx, mut hy) = (Vec::new(), [0.0], [0.0], [0.0], [0.0]);
    /// // Along (1, 0): the first column of H.
    /// h.hvp_args(
    ///     &mut ws,
    ///     &mut [Arg::F64s(&x), Arg::F64(y)],
    ///     &mut [Arg::F64s(&[1.0]), Arg::F64(0.0)],
    ///     &mut value,
    ///     &mut [Arg::F64sMut(&mut gx), Arg::F64sMut(&mut gy)],
    ///     &mut [Arg::F64sMut(&mut hx), Arg::F64sMut(&mut hy)],
    /// )?;
    /// assert_eq!(value, [gradlift::Val::F64(18.0)]);
    /// assert_eq!((gx, gy), ([12.0], [9.0])); // (2xy, x²)
    /// assert_eq!((hx, hy), ([4.0], [6.0])); // (2y, 2x)
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn hvp_args(
        &self,
        ws: &mut Workspace,
        args: &mut [Arg<'_>],
        directions: &mut [Arg<'_>],
        value: &mut Vec<Val>,
        gradient: &mut [Arg<'_>],
        hvp: &mut [Arg<'_>],
    ) -> Result<(), Error> {
        let mut s = ws.take_scratch::<Scratch>();
        let result = {
            let mut engine = self.compiled.engine(ws);
            run_hvp(
                &mut engine,
                &self.rule,
                args,
                directions,
                value,
                gradient,
                hvp,
                &mut s.out,
            )
        };
        ws.keep_scratch(s);
        Ok(result?)
    }

    /// The dense Hessian at `args` over every coordinate of the `active` and
    /// `dup` parameters (each scalar, each slice element, in order), one call per
    /// `width` coordinates. Row `j` is computed as `H e_j` (the HVP along the
    /// `j`-th unit vector): the Hessian is symmetric, so that is also its column
    /// `j`, up to rounding. See [`CompiledHvp::hessian_into`].
    pub fn hessian(&self, ws: &mut Workspace, args: &[Val]) -> Result<Matrix, Error> {
        self.hessian_matrix(ws, &views(args))
    }

    /// [`CompiledHvp::hessian`] on borrowed arguments (read only).
    pub(crate) fn hessian_matrix(
        &self,
        ws: &mut Workspace,
        args: &[Arg<'_>],
    ) -> Result<Matrix, Error> {
        let coords = input_coords(args, |i| self.differentiated(i));
        let m = coords.len();
        let mut data = vec![0.0; m * m];
        self.hessian_args(ws, args, &mut data)?;
        Ok(Matrix {
            rows: m,
            cols: m,
            data,
            col_coords: coords.clone(),
            row_coords: coords,
        })
    }

    /// [`CompiledHvp::hessian`] into `out` (length `m * m` for `m` coordinates,
    /// row by row): each call of the rule gives `width` rows, `H e_j` for
    /// `width` unit vectors `e_j`, written into `out` as contiguous rows. The
    /// arguments, directions and outputs of those calls are kept in the
    /// workspace, so once it has grown a call allocates nothing. `args` stay as
    /// they are (each call runs on a copy).
    ///
    /// ```
    /// use gradlift::{CompiledHvp, Workspace, ir::{parse, interp::Val}};
    ///
    /// let module = parse("
    ///     func @f(%x: f64, %y: f64) -> f64 {
    ///     entry:
    ///         %xx = fmul %x, %x
    ///         %xxy = fmul %xx, %y
    ///         ret %xxy
    ///     }
    /// ")?;
    /// let h = CompiledHvp::new(&module, "f")?;
    /// let (mut ws, mut out) = (Workspace::new(), [0.0; 4]);
    /// for (x, y) in [(3.0, 2.0), (1.0, 5.0)] {
    ///     h.hessian_into(&mut ws, &[Val::F64(x), Val::F64(y)], &mut out)?;
    ///     assert_eq!(out, [2.0 * y, 2.0 * x, 2.0 * x, 0.0]);
    /// }
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn hessian_into(
        &self,
        ws: &mut Workspace,
        args: &[Val],
        out: &mut [f64],
    ) -> Result<(), Error> {
        self.hessian_args(ws, &views(args), out)
    }

    /// Whether parameter `i` is `active` or `dup`.
    fn differentiated(&self, i: usize) -> bool {
        self.rule
            .layout
            .config
            .params
            .get(i)
            .is_some_and(|&a| a != Activity::Const)
    }

    /// [`CompiledHvp::hessian_into`] on borrowed arguments (read only: each call
    /// copies them).
    pub(crate) fn hessian_args(
        &self,
        ws: &mut Workspace,
        args: &[Arg<'_>],
        out: &mut [f64],
    ) -> Result<(), Error> {
        let layout = &self.rule.layout;
        let sig = self.rule.module.sig(layout.primal);
        let fname = self.rule.module.name(layout.primal);
        check_copied(fname, sig, args)?;
        let dual = |i: usize| self.differentiated(i);
        let m = n_coords(args, dual);
        if out.len() != m * m {
            return Err(bad_out("Hessian", m, m, out.len()));
        }
        let n = self.rule.width() as usize;
        let mut s = ws.take_scratch::<Scratch>();
        let result = (|| -> Result<(), Error> {
            let Scratch {
                out: results,
                value,
                args: a,
                dirs,
                grads,
                hvps,
                ..
            } = &mut *s;
            let n_dual = (0..args.len()).filter(|&i| dual(i)).count();
            a.resize(args.len(), Val::Bool(false));
            dirs.resize(n_dual, Val::Bool(false));
            grads.resize(n_dual, Val::Bool(false));
            hvps.resize(n_dual, Val::Bool(false));
            for (k, i) in (0..args.len()).filter(|&i| dual(i)).enumerate() {
                let (f32, len) = (is_f32(sig.params[i]), args[i].slice_len().unwrap_or(1));
                set_zeros(&mut grads[k], f32, Some(len));
                set_zeros(&mut hvps[k], f32, Some(len * n));
            }
            let mut start = 0;
            while start < m {
                for (d, src) in a.iter_mut().zip(args) {
                    assign_arg(d, src);
                }
                unit_lanes(dirs, args, sig, dual, start, n);
                {
                    let mut av: SmallVec<[Arg<'_>; 8]> = a.iter_mut().map(Val::as_arg).collect();
                    let mut dv: SmallVec<[Arg<'_>; 8]> = dirs.iter_mut().map(Val::as_arg).collect();
                    let mut gv: SmallVec<[Arg<'_>; 8]> =
                        grads.iter_mut().map(Val::as_arg).collect();
                    let mut hv: SmallVec<[Arg<'_>; 8]> = hvps.iter_mut().map(Val::as_arg).collect();
                    let mut engine = self.compiled.engine(ws);
                    run_hvp(
                        &mut engine,
                        &self.rule,
                        &mut av,
                        &mut dv,
                        value,
                        &mut gv,
                        &mut hv,
                        results,
                    )?;
                }
                // Lane j is H e_(start + j): row start + j, written in order.
                for j in 0..n.min(m - start) {
                    let row = &mut out[(start + j) * m..(start + j + 1) * m];
                    let mut r = 0;
                    for h in hvps.iter() {
                        let len = h.slice_len().unwrap_or(0) / n;
                        for e in 0..len {
                            row[r] = lane(h, Some(e), j, n);
                            r += 1;
                        }
                    }
                }
                start += n;
            }
            Ok(())
        })();
        ws.keep_scratch(s);
        result
    }

    /// The compiled rule as an engine calling with `ws`.
    pub fn engine<'a>(&'a self, ws: &'a mut Workspace) -> JitEngine<'a> {
        self.compiled.engine(ws)
    }

    /// The derived second-order rule.
    pub fn rule(&self) -> &HvpRule {
        &self.rule
    }

    /// How long deriving and compiling took.
    pub fn compile_time(&self) -> Duration {
        self.compile_time
    }
}

/// A function's forward rule and its reverse rule compiled side by side, for dense
/// Jacobians built whichever way is cheaper: forward sweeps (a column per lane,
/// `width` columns a sweep) when there are no more columns than rows times the
/// width, reverse sweeps (a row per pullback) otherwise.
///
/// Columns are the coordinates of the `active` and `dup` parameters (each scalar,
/// each slice element, in order); rows the float results (when the return is
/// `active`), then the elements of the `dup` `mut` slices' final contents.
///
/// ```
/// use gradlift::{Pipeline, Workspace, ir::{parse, interp::Val}};
///
/// // Three inputs, one result: reverse mode gives the row in one pullback.
/// let module = parse("
///     func @f(%x: f64, %y: f64, %z: f64) -> f64 {
///     entry:
///         %xy = fmul %x, %y
///         %r = fmul %xy, %z
///         ret %r
///     }
/// ")?;
/// let j = Pipeline::new().compile_jacobian(&module, "f", None, 1)?;
/// let args = [Val::F64(2.0), Val::F64(3.0), Val::F64(5.0)];
/// let mut ws = Workspace::new();
/// let m = j.jacobian(&mut ws, &args)?;
/// assert_eq!(m.data, [15.0, 10.0, 6.0]);
/// assert!(!j.uses_forward(&args));
/// assert_eq!(j.forward(&mut ws, &args)?.data, m.data);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct CompiledJacobian {
    jvp: CompiledJvp,
    grad: crate::CompiledGradient,
}

impl CompiledJacobian {
    pub(crate) fn new_compiled(jvp: CompiledJvp, grad: crate::CompiledGradient) -> Self {
        CompiledJacobian { jvp, grad }
    }

    /// The number of (rows, columns) of the Jacobian at `args`.
    pub fn shape(&self, args: &[Val]) -> (usize, usize) {
        self.shape_args(&views(args))
    }

    fn shape_args(&self, args: &[Arg<'_>]) -> (usize, usize) {
        let config = &self.grad.rule().layout.config;
        let sig = self.grad.rule().module.sig(self.grad.rule().layout.primal);
        let mut cols = 0;
        let mut rows = self.grad.rule().layout.seeded_results.len();
        for (i, a) in args.iter().enumerate() {
            if config.params.get(i).is_some_and(|&p| p != Activity::Const) {
                let n = a.slice_len().unwrap_or(1);
                cols += n;
                if sig.params.get(i).is_some_and(|t| t.is_mut_slice()) {
                    rows += n;
                }
            }
        }
        (rows, cols)
    }

    /// Whether [`CompiledJacobian::jacobian`] takes forward sweeps at `args`: when
    /// `ceil(columns / width)` forward sweeps are no more than the
    /// `ceil(rows / width)` pullbacks of width `width`.
    pub fn uses_forward(&self, args: &[Val]) -> bool {
        self.uses_forward_args(&views(args))
    }

    fn uses_forward_args(&self, args: &[Arg<'_>]) -> bool {
        let (rows, cols) = self.shape_args(args);
        let n = self.width();
        cols.div_ceil(n) <= rows.div_ceil(n)
    }

    /// Columns per forward sweep and rows per pullback.
    pub fn width(&self) -> usize {
        self.jvp.frule().layout.config.width as usize
    }

    /// The dense Jacobian at `args`, by forward or reverse sweeps
    /// ([`CompiledJacobian::uses_forward`]).
    pub fn jacobian(&self, ws: &mut Workspace, args: &[Val]) -> Result<Matrix, Error> {
        self.jacobian_matrix(ws, &views(args))
    }

    /// [`CompiledJacobian::jacobian`] on borrowed arguments (read only).
    pub(crate) fn jacobian_matrix(
        &self,
        ws: &mut Workspace,
        args: &[Arg<'_>],
    ) -> Result<Matrix, Error> {
        let (rows, cols) = self.coords(args);
        let mut data = vec![0.0; rows.len() * cols.len()];
        self.jacobian_args(ws, args, &mut data)?;
        Ok(Matrix {
            rows: rows.len(),
            cols: cols.len(),
            data,
            col_coords: cols,
            row_coords: rows,
        })
    }

    /// How long deriving and compiling both rules took.
    pub fn compile_time(&self) -> Duration {
        self.jvp.compile_time() + self.grad.compile_time()
    }

    /// [`CompiledJacobian::jacobian`] into `out` (row by row, its length rows
    /// times columns, [`CompiledJacobian::shape`]), by forward or reverse sweeps as
    /// [`CompiledJacobian::jacobian`] chooses; the sweeps' buffers are kept in the
    /// workspace, so once it has grown a call allocates nothing. `args` stay as
    /// they are.
    ///
    /// ```
    /// use gradlift::{Pipeline, Workspace, ir::{parse, interp::Val}};
    ///
    /// let module = parse("
    ///     func @f(%x: f64, %y: f64, %z: f64) -> f64 {
    ///     entry:
    ///         %xy = fmul %x, %y
    ///         %r = fmul %xy, %z
    ///         ret %r
    ///     }
    /// ")?;
    /// let j = Pipeline::new().compile_jacobian(&module, "f", None, 1)?;
    /// let (mut ws, mut out) = (Workspace::new(), [0.0; 3]);
    /// j.jacobian_into(&mut ws, &[Val::F64(2.0), Val::F64(3.0), Val::F64(5.0)], &mut out)?;
    /// assert_eq!(out, [15.0, 10.0, 6.0]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn jacobian_into(
        &self,
        ws: &mut Workspace,
        args: &[Val],
        out: &mut [f64],
    ) -> Result<(), Error> {
        self.jacobian_args(ws, &views(args), out)
    }

    /// [`CompiledJacobian::jacobian_into`] on borrowed arguments (read only).
    pub(crate) fn jacobian_args(
        &self,
        ws: &mut Workspace,
        args: &[Arg<'_>],
        out: &mut [f64],
    ) -> Result<(), Error> {
        if self.uses_forward_args(args) {
            self.jvp.jacobian_args(ws, args, out)
        } else {
            self.reverse_args(ws, args, out)
        }
    }

    /// The rows and columns of the Jacobian at `args`, as [`Matrix`] names them.
    #[allow(clippy::type_complexity)]
    fn coords(
        &self,
        args: &[Arg<'_>],
    ) -> (Vec<(usize, Option<usize>)>, Vec<(usize, Option<usize>)>) {
        let rule = self.grad.rule();
        let layout = &rule.layout;
        let sig = rule.module.sig(layout.primal);
        let dual = |i: usize| {
            layout
                .config
                .params
                .get(i)
                .is_some_and(|&a| a != Activity::Const)
        };
        let cols = input_coords(args, dual);
        let mut rows: Vec<(usize, Option<usize>)> =
            layout.seeded_results.iter().map(|&r| (r, None)).collect();
        for (i, a) in args.iter().enumerate() {
            if dual(i) && sig.params.get(i).is_some_and(|t| t.is_mut_slice()) {
                rows.extend((0..a.slice_len().unwrap_or(0)).map(|e| (i, Some(e))));
            }
        }
        (rows, cols)
    }

    /// The dense Jacobian by forward sweeps ([`CompiledJvp::jacobian`]).
    pub fn forward(&self, ws: &mut Workspace, args: &[Val]) -> Result<Matrix, Error> {
        self.jvp.jacobian(ws, args)
    }

    /// The dense Jacobian by reverse sweeps: one pullback of width `width` per
    /// `width` rows, lane `j` seeded with row `j` of the identity (on a result, or on
    /// an element of a `mut` slice's final contents through its shadow).
    pub fn reverse(&self, ws: &mut Workspace, args: &[Val]) -> Result<Matrix, Error> {
        let args = views(args);
        let (rows, cols) = self.coords(&args);
        let mut data = vec![0.0; rows.len() * cols.len()];
        self.reverse_args(ws, &args, &mut data)?;
        Ok(Matrix {
            rows: rows.len(),
            cols: cols.len(),
            data,
            col_coords: cols,
            row_coords: rows,
        })
    }

    /// [`CompiledJacobian::reverse`] into `out`, with the workspace's buffers.
    fn reverse_args(
        &self,
        ws: &mut Workspace,
        args: &[Arg<'_>],
        out: &mut [f64],
    ) -> Result<(), Error> {
        let rule = self.grad.rule();
        let layout = &rule.layout;
        let sig = rule.module.sig(layout.primal);
        let fname = rule.module.name(layout.primal);
        check_copied(fname, sig, args)?;
        let (rows, cols) = self.shape_args(args);
        if out.len() != rows * cols {
            return Err(bad_out("Jacobian", rows, cols, out.len()));
        }
        let n_results = layout.seeded_results.len();
        let n = layout.width.max(1) as usize;
        let mut s = ws.take_scratch::<Scratch>();
        let result = (|| -> Result<(), Error> {
            let Scratch {
                out: cts,
                value,
                args: a,
                grads: shadows,
                seeds,
                ..
            } = &mut *s;
            a.resize(args.len(), Val::Bool(false));
            shadows.resize(layout.shadow_params.len(), Val::Bool(false));
            seeds.resize(n_results * n, 0.0);
            // The rows: each seeded result, then each element of each `dup` `mut`
            // slice (in the order of the shadows); `n` rows per pullback, row
            // `start + j` seeded on lane `j`.
            let mut_slices = layout
                .shadow_params
                .iter()
                .enumerate()
                .filter(|&(_, &i)| sig.params[i].is_mut_slice());
            let slice_rows = mut_slices.flat_map(|(k, &i)| {
                (0..args[i].slice_len().unwrap_or(0)).map(move |e| (Some(k), e))
            });
            let mut all_rows = (0..n_results).map(|r| (None, r)).chain(slice_rows);
            let mut start = 0;
            loop {
                let mut chunk: SmallVec<[(Option<usize>, usize); 16]> = SmallVec::new();
                chunk.extend(all_rows.by_ref().take(n));
                if chunk.is_empty() {
                    break;
                }
                for (d, src) in a.iter_mut().zip(args) {
                    assign_arg(d, src);
                }
                for (sh, &i) in shadows.iter_mut().zip(&layout.shadow_params) {
                    let len = args[i].slice_len().map(|l| l * n);
                    set_zeros(sh, is_f32(sig.params[i]), len);
                }
                seeds.fill(0.0);
                for (j, &(shadow, e)) in chunk.iter().enumerate() {
                    match shadow {
                        None => seeds[e * n + j] = 1.0,
                        Some(k) => set_one(&mut shadows[k], e * n + j),
                    }
                }
                {
                    let mut av: SmallVec<[Arg<'_>; 8]> = a.iter_mut().map(Val::as_arg).collect();
                    let mut sv: SmallVec<[Arg<'_>; 8]> =
                        shadows.iter_mut().map(Val::as_arg).collect();
                    self.grad
                        .gradient_args(ws, &mut av, &mut sv, seeds, value, cts)?;
                }
                // The columns: each active scalar's cotangent, each element of each
                // shadow, in the parameters' order; lane `j` for row `start + j`.
                for j in 0..chunk.len() {
                    let r = start + j;
                    let row = &mut out[r * cols..(r + 1) * cols];
                    let (mut c, mut ka, mut ks) = (0, 0, 0);
                    for (arg, act) in args.iter().zip(&layout.config.params) {
                        match act {
                            Activity::Const => {}
                            Activity::Active => {
                                row[c] = lane(&cts[ka * n + j], None, 0, 1);
                                ka += 1;
                                c += 1;
                            }
                            Activity::Dup | Activity::DupNoNeed => {
                                let sh = &shadows[ks];
                                for e in 0..arg.slice_len().unwrap_or(0) {
                                    row[c] = lane(sh, Some(e), j, n);
                                    c += 1;
                                }
                                ks += 1;
                            }
                        }
                    }
                }
                start += chunk.len();
            }
            Ok(())
        })();
        ws.keep_scratch(s);
        result
    }
}
