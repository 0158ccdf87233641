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

use gradlift_adjoint::{Frule, FruleConfig, Jvp, jvp_vals, run_frule};
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
