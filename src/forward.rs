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
};
use gradlift_ir::Module;
use gradlift_ir::engine::{Arg, Val};
use gradlift_jit::{Compiled, Hosts, JitEngine, Workspace};

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
}

/// The coordinates of the `dual` parameters at `args`: each float scalar, each
/// element of a float slice.
fn input_coords(args: &[Val], dual: &[bool]) -> Vec<(usize, Option<usize>)> {
    let mut out = Vec::new();
    for (i, a) in args.iter().enumerate() {
        if !dual[i] {
            continue;
        }
        match a.slice_len() {
            Some(n) => out.extend((0..n).map(|e| (i, Some(e)))),
            None => out.push((i, None)),
        }
    }
    out
}

/// Tangents (or directions) at width `n` for the columns `cols[start..start+n]`
/// of the identity (lanes past the end are zero): one entry per parameter,
/// `None` where `dual` is false.
fn unit_lanes(
    args: &[Val],
    dual: &[bool],
    coords: &[(usize, Option<usize>)],
    start: usize,
    n: usize,
) -> Vec<Option<Val>> {
    let mut out: Vec<Option<Val>> = args
        .iter()
        .enumerate()
        .map(|(i, a)| {
            if !dual[i] {
                return None;
            }
            let len = a.slice_len().map_or(n, |l| l * n);
            let scalar = a.slice_len().is_none() && n == 1;
            Some(match a.ty().elem().map(|e| e.ty()).unwrap_or(a.ty()) {
                gradlift_ir::Type::F32 if scalar => Val::F32(0.0),
                gradlift_ir::Type::F32 => Val::F32s(vec![0.0; len]),
                _ if scalar => Val::F64(0.0),
                _ => Val::F64s(vec![0.0; len]),
            })
        })
        .collect();
    for (j, &(i, e)) in coords.iter().skip(start).take(n).enumerate() {
        let k = e.map_or(j, |e| e * n + j);
        match out[i].as_mut() {
            Some(Val::F64(x)) => *x = 1.0,
            Some(Val::F32(x)) => *x = 1.0,
            Some(Val::F64s(x)) => x[k] = 1.0,
            Some(Val::F32s(x)) => x[k] = 1.0,
            _ => {}
        }
    }
    out
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
        let layout = &self.frule.layout;
        let n = layout.config.width as usize;
        let dual: Vec<bool> = layout
            .config
            .params
            .iter()
            .map(|&a| a == gradlift_adjoint::DualActivity::Dual)
            .collect();
        let cols = input_coords(args, &dual);
        let sig = self.frule.module.sig(layout.primal);
        let mut rows: Vec<(usize, Option<usize>)> =
            layout.tangent_results.iter().map(|&r| (r, None)).collect();
        for (i, a) in args.iter().enumerate() {
            if dual[i] && sig.params[i].is_mut_slice() {
                rows.extend((0..a.slice_len().unwrap_or(0)).map(|e| (i, Some(e))));
            }
        }
        let mut data = vec![0.0; rows.len() * cols.len()];
        let mut start = 0;
        while start < cols.len() {
            let t = unit_lanes(args, &dual, &cols, start, n);
            let out = self.jvp(ws, args, &t)?;
            for j in 0..n.min(cols.len() - start) {
                for (r, &(p, e)) in rows.iter().enumerate() {
                    let x = match e {
                        None => {
                            let k = layout.tangent_results.iter().position(|&q| q == p);
                            k.map_or(0.0, |k| lane(&out.tangents[k], None, j, n))
                        }
                        Some(_) => out.slices[p].as_ref().map_or(0.0, |s| lane(s, e, j, n)),
                    };
                    data[r * cols.len() + start + j] = x;
                }
            }
            start += n;
        }
        Ok(Matrix {
            rows: rows.len(),
            cols: cols.len(),
            data,
            col_coords: cols,
            row_coords: rows,
        })
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
    /// rest). See [`Hvp`].
    pub fn hvp(&self, ws: &mut Workspace, args: &[Val], v: &[Option<Val>]) -> Result<Hvp, Error> {
        let mut engine = self.compiled.engine(ws);
        Ok(hvp_vals(&mut engine, &self.rule, args, v)?)
    }

    /// The dense Hessian at `args` over every coordinate of the `active` and
    /// `dup` parameters (each scalar, each slice element, in order), one call per
    /// `width` columns.
    pub fn hessian(&self, ws: &mut Workspace, args: &[Val]) -> Result<Matrix, Error> {
        let n = self.rule.width() as usize;
        let dual: Vec<bool> = self
            .rule
            .layout
            .config
            .params
            .iter()
            .map(|&a| a != Activity::Const)
            .collect();
        let coords = input_coords(args, &dual);
        let m = coords.len();
        let mut data = vec![0.0; m * m];
        let mut start = 0;
        while start < m {
            let v = unit_lanes(args, &dual, &coords, start, n);
            let out = self.hvp(ws, args, &v)?;
            for j in 0..n.min(m - start) {
                for (r, &(p, e)) in coords.iter().enumerate() {
                    let x = out.hvp[p].as_ref().map_or(0.0, |h| lane(h, e, j, n));
                    data[r * m + start + j] = x;
                }
            }
            start += n;
        }
        Ok(Matrix {
            rows: m,
            cols: m,
            data,
            col_coords: coords.clone(),
            row_coords: coords,
        })
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
        let config = &self.grad.rule().layout.config;
        let sig = self.grad.rule().module.sig(self.grad.rule().layout.primal);
        let mut cols = 0;
        let mut rows = self.grad.rule().layout.seeded_results.len();
        for (i, a) in args.iter().enumerate() {
            if config.params.get(i).is_some_and(|&p| p != Activity::Const) {
                let n = a.slice_len().unwrap_or(1);
                cols += n;
                if sig.params[i].is_mut_slice() {
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
        let (rows, cols) = self.shape(args);
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
        if self.uses_forward(args) {
            self.forward(ws, args)
        } else {
            self.reverse(ws, args)
        }
    }

    /// The dense Jacobian by forward sweeps ([`CompiledJvp::jacobian`]).
    pub fn forward(&self, ws: &mut Workspace, args: &[Val]) -> Result<Matrix, Error> {
        self.jvp.jacobian(ws, args)
    }

    /// The dense Jacobian by reverse sweeps: one pullback of width `width` per
    /// `width` rows, lane `j` seeded with row `j` of the identity (on a result, or on
    /// an element of a `mut` slice's final contents through its shadow).
    pub fn reverse(&self, ws: &mut Workspace, args: &[Val]) -> Result<Matrix, Error> {
        let rule = self.grad.rule();
        let layout = &rule.layout;
        let n = layout.width.max(1) as usize;
        let sig = rule.module.sig(layout.primal);
        let dual: Vec<bool> = layout
            .config
            .params
            .iter()
            .map(|&a| a != Activity::Const)
            .collect();
        let cols = input_coords(args, &dual);
        let mut rows: Vec<(usize, Option<usize>)> =
            layout.seeded_results.iter().map(|&r| (r, None)).collect();
        for (i, a) in args.iter().enumerate() {
            if dual[i] && sig.params[i].is_mut_slice() {
                rows.extend((0..a.slice_len().unwrap_or(0)).map(|e| (i, Some(e))));
            }
        }
        let mut data = vec![0.0; rows.len() * cols.len()];
        for start in (0..rows.len()).step_by(n) {
            let mut seeds = vec![0.0; layout.seeded_results.len() * n];
            let mut shadows: Vec<Option<Val>> = vec![None; args.len()];
            for (j, &(p, e)) in rows[start..rows.len().min(start + n)].iter().enumerate() {
                match e {
                    None => {
                        if let Some(k) = layout.seeded_results.iter().position(|&q| q == p) {
                            seeds[k * n + j] = 1.0;
                        }
                    }
                    Some(e) => {
                        let len = args[p].slice_len().unwrap_or(0) * n;
                        let s = shadows[p].get_or_insert_with(|| match args[p] {
                            Val::F32s(_) => Val::F32s(vec![0.0; len]),
                            _ => Val::F64s(vec![0.0; len]),
                        });
                        match s {
                            Val::F64s(x) => x[e * n + j] = 1.0,
                            Val::F32s(x) => x[e * n + j] = 1.0,
                            _ => {}
                        }
                    }
                }
            }
            let seeds = crate::Seeds::results(seeds).with_shadows(shadows);
            let g = self.grad.value_and_pullback(ws, args, &seeds)?;
            for j in 0..n.min(rows.len() - start) {
                let row = &mut data[(start + j) * cols.len()..(start + j + 1) * cols.len()];
                for (x, &(p, e)) in row.iter_mut().zip(&cols) {
                    *x = g.gradient[p].as_ref().map_or(0.0, |v| lane(v, e, j, n));
                }
            }
        }
        Ok(Matrix {
            rows: rows.len(),
            cols: cols.len(),
            data,
            col_coords: cols,
            row_coords: rows,
        })
    }
}
