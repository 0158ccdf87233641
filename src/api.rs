//! The compiled API: a function or a rule compiled once to native code with the
//! JIT, then called from any number of threads, each with its own [`Workspace`].
//!
//! - [`CompiledFunction`]: the primal alone.
//! - [`CompiledGradient`]: the rule of a function (its forward pass and pullback,
//!   derived by [`adjoint`](crate::adjoint)), with [`CompiledGradient::value_and_gradient`]
//!   and [`CompiledGradient::value_and_pullback`].
//! - [`GradientCache`]: the prepared form for calls in a loop (Mooncake's
//!   `prepare_gradient_cache`): it owns a workspace and every buffer, so once
//!   prepared, a gradient allocates nothing.
//!
//! Arguments are [`Val`]s, one per parameter, checked against the signature (count,
//! kinds, element types) before any code runs; slices of shadows must have their
//! primal's length. Every failure is an [`Error`]; nothing here needs `unsafe`.

use core::fmt;
use std::time::Duration;

use gradlift_adjoint::{
    AdError, EvalBuffers, EvalError, Gradient, Rule, RuleConfig, Seeds, run_rule, run_rule_vals,
};
use gradlift_ir::engine::{Arg, ErrorKind, RunError, Val};
use gradlift_ir::opt::{OptConfig, OptError};
use gradlift_ir::{FuncId, Module, VerifierErrors};
use gradlift_jit::{CompileError, Compiled, Hosts, JitEngine, Workspace};
use gradlift_trace::TraceError;

use crate::pipeline::Pipeline;

/// Why compiling or calling failed.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum Error {
    /// The module has no function of that name (without `@`).
    NoSuchFunction(String),
    /// The module does not verify.
    Verify(VerifierErrors),
    /// The optimiser refused the module (it runs only on verified modules).
    Optimize(OptError),
    /// The rule could not be derived.
    Derive(AdError),
    /// The JIT could not compile the code (it calls an unbound `extern`, ...).
    Compile(CompileError),
    /// The arguments, seeds or shadows do not fit the function.
    BadArguments(String),
    /// Compiled code failed at run time (out of bounds, division by zero, a host
    /// function's error, ...). The workspace stays usable.
    Run(RunError),
    /// Tracing a Rust function failed ([`autodiff`](crate::autodiff())).
    Trace(TraceError),
    /// The pullback did not take off the tape what the forward pass put on it (a
    /// wrong hand-written rule, or a bug).
    Tape {
        /// Scalars on the tape before the forward pass.
        before: usize,
        /// Scalars after the pullback.
        after: usize,
    },
    /// Writing the IR of an `#[autodiff_reverse]` function into the dump directory
    /// (`GRADLIFT_DUMP`, [`set_dump_dir`](crate::autodiff::set_dump_dir)) failed.
    Dump {
        /// The file or directory.
        path: std::path::PathBuf,
        /// What the system said.
        message: String,
    },
}

/// The stage that failed, then the inner error's own message; `source` is the
/// inner error's source, so a chain printer shows nothing twice.
impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::NoSuchFunction(name) => write!(f, "the module has no function @{name}"),
            Error::Verify(e) => write!(f, "the module does not verify:\n{e}"),
            Error::Optimize(e) => write!(f, "optimising: {e}"),
            Error::Derive(e) => write!(f, "deriving the rule: {e}"),
            Error::Compile(e) => write!(f, "compiling: {e}"),
            Error::BadArguments(m) => f.write_str(m),
            Error::Run(e) => e.fmt(f),
            Error::Trace(e) => write!(f, "tracing: {e}"),
            Error::Tape { before, after } => write!(
                f,
                "the tape held {before} scalars before the forward pass and {after} after the pullback"
            ),
            Error::Dump { path, message } => {
                write!(
                    f,
                    "dumping the IR: cannot write {}: {message}",
                    path.display()
                )
            }
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Verify(e) => e.source(),
            Error::Optimize(e) => e.source(),
            Error::Derive(e) => e.source(),
            Error::Compile(e) => e.source(),
            Error::Run(e) => e.source(),
            Error::Trace(e) => e.source(),
            _ => None,
        }
    }
}

impl From<TraceError> for Error {
    fn from(e: TraceError) -> Error {
        Error::Trace(e)
    }
}

/// A refused call's arguments are [`Error::BadArguments`], the rest [`Error::Run`].
impl From<RunError> for Error {
    fn from(e: RunError) -> Error {
        match e.kind {
            ErrorKind::BadArguments(m) => Error::BadArguments(m),
            _ => Error::Run(e),
        }
    }
}

impl From<EvalError> for Error {
    fn from(e: EvalError) -> Error {
        match e {
            EvalError::BadArguments(m) => Error::BadArguments(m),
            EvalError::Run { error, .. } => Error::from(*error),
            EvalError::Tape { before, after } => Error::Tape { before, after },
            e => Error::BadArguments(e.to_string()),
        }
    }
}

/// A function compiled to native code (the primal, no derivative).
///
/// ```
/// use gradlift::{CompiledFunction, Workspace, ir::{parse, interp::Val}};
///
/// let module = parse("
///     func @f(%x: f64, %y: f64) -> f64 {
///     entry:
///         %xx = fmul %x, %x
///         %y3 = fmul 3.0, %y
///         %r = fadd %xx, %y3
///         ret %r
///     }
/// ")?;
/// let f = CompiledFunction::new(&module, "f")?;
/// let mut ws = Workspace::new();
/// assert_eq!(f.call(&mut ws, &mut [Val::F64(2.0), Val::F64(1.0)])?, [Val::F64(7.0)]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct CompiledFunction {
    compiled: Compiled,
    func: FuncId,
    compile_time: Duration,
}

impl CompiledFunction {
    /// Compiles `@name` of `module` and what it calls, through the default
    /// [`Pipeline`] (verify, optimise, compile).
    pub fn new(module: &Module, name: &str) -> Result<CompiledFunction, Error> {
        Pipeline::new().compile_function(module, name)
    }

    /// Compiles `@name`, with host functions for the `extern`s it calls.
    pub fn with_hosts(
        module: &Module,
        name: &str,
        hosts: &Hosts,
    ) -> Result<CompiledFunction, Error> {
        CompiledFunction::with_options(module, name, hosts, &OptConfig::default())
    }

    /// Compiles `@name` after the optimiser passes `opt` select
    /// ([`OptConfig::none`] compiles the module as it is).
    pub fn with_options(
        module: &Module,
        name: &str,
        hosts: &Hosts,
        opt: &OptConfig,
    ) -> Result<CompiledFunction, Error> {
        Pipeline::new()
            .with_opt(opt.clone())
            .with_hosts(hosts.clone())
            .compile_function(module, name)
    }

    pub(crate) fn new_compiled(
        compiled: Compiled,
        func: FuncId,
        compile_time: Duration,
    ) -> CompiledFunction {
        CompiledFunction {
            compiled,
            func,
            compile_time,
        }
    }

    /// Calls the function: `mut` slices are updated in place.
    pub fn call(&self, ws: &mut Workspace, args: &mut [Val]) -> Result<Vec<Val>, Error> {
        let mut out = Vec::new();
        self.call_into(ws, args, &mut out)?;
        Ok(out)
    }

    /// [`CompiledFunction::call`] with the results written into `out` (cleared
    /// first): allocates nothing once `out` and the workspace have grown.
    pub fn call_into(
        &self,
        ws: &mut Workspace,
        args: &mut [Val],
        out: &mut Vec<Val>,
    ) -> Result<(), Error> {
        Ok(self.compiled.call_into(ws, self.func, args, out)?)
    }

    /// [`CompiledFunction::call_into`] with borrowed arguments ([`Arg`]): slices
    /// are passed as they are, never copied (`mut` ones written in place).
    pub fn call_args(
        &self,
        ws: &mut Workspace,
        args: &mut [Arg<'_>],
        out: &mut Vec<Val>,
    ) -> Result<(), Error> {
        Ok(self.compiled.call_args(ws, self.func, args, out)?)
    }

    /// How long compiling took.
    pub fn compile_time(&self) -> Duration {
        self.compile_time
    }

    /// The module compiled from.
    pub fn module(&self) -> &Module {
        self.compiled.module()
    }
}

/// The rule of a function (forward pass and pullback) compiled to native code.
///
/// Compiled once, it is `Send + Sync`: share it (by reference or `Arc`) and give
/// each thread its own [`Workspace`] or [`GradientCache`].
///
/// ```
/// use gradlift::{CompiledGradient, Workspace, ir::{parse, interp::Val}};
///
/// let module = parse("
///     func @f(%x: f64, %y: f64) -> f64 {
///     entry:
///         %xx = fmul %x, %x
///         %y3 = fmul 3.0, %y
///         %r = fadd %xx, %y3
///         ret %r
///     }
/// ")?;
/// let f = CompiledGradient::new(&module, "f")?;
/// let mut ws = Workspace::new();
/// let g = f.value_and_gradient(&mut ws, &[Val::F64(2.0), Val::F64(1.0)])?;
/// assert_eq!(g.value, Some(vec![Val::F64(7.0)]));
/// // df/dx = 2x, df/dy = 3.
/// assert_eq!(g.gradient, [Some(Val::F64(4.0)), Some(Val::F64(3.0))]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct CompiledGradient {
    rule: Rule,
    compiled: Compiled,
    compile_time: Duration,
}

impl CompiledGradient {
    /// Derives the rule of `@name` with the default activities
    /// ([`RuleConfig::default_for`]: float scalars `active`, float slices `dup`, an
    /// `active` return) and compiles it.
    pub fn new(module: &Module, name: &str) -> Result<CompiledGradient, Error> {
        Pipeline::new().compile_gradient(module, name, None)
    }

    /// Derives the rule of `@name` under `config` and compiles it, with host
    /// functions for the `extern`s it calls (a host function's derivative is an
    /// extern `vjp` rule, bound here too).
    ///
    /// ```
    /// use gradlift::{CompiledGradient, Hosts, Workspace, adjoint::RuleConfig};
    /// use gradlift::ir::{parse, interp::Val};
    ///
    /// // sin from the host, with its derivative from the host too.
    /// let module = parse("
    ///     extern @host_sin(f64) -> f64
    ///     extern @host_sin_vjp(f64, f64) -> f64
    ///     vjp @host_sin = @host_sin_vjp
    ///     func @f(%x: f64) -> f64 {
    ///     entry:
    ///         %s = call @host_sin(%x)
    ///         %y = fmul %s, %x
    ///         ret %y
    ///     }
    /// ")?;
    /// let hosts = Hosts::new()
    ///     .bind("host_sin", |a: &mut [Val]| match a {
    ///         [Val::F64(x)] => Ok(vec![Val::F64(x.sin())]),
    ///         _ => Err("host_sin takes an f64".into()),
    ///     })
    ///     .bind("host_sin_vjp", |a: &mut [Val]| match a {
    ///         [Val::F64(x), Val::F64(dy)] => Ok(vec![Val::F64(x.cos() * *dy)]),
    ///         _ => Err("host_sin_vjp takes two f64".into()),
    ///     });
    /// let f = module.func_by_name("f").unwrap();
    /// let config = RuleConfig::default_for(module.sig(f));
    /// let grad = CompiledGradient::with_config(&module, "f", &config, &hosts)?;
    /// let g = grad.value_and_gradient(&mut Workspace::new(), &[Val::F64(0.5)])?;
    /// // d/dx x sin x = sin x + x cos x
    /// assert_eq!(g.gradient, [Some(Val::F64(0.5f64.sin() + 0.5 * 0.5f64.cos()))]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn with_config(
        module: &Module,
        name: &str,
        config: &RuleConfig,
        hosts: &Hosts,
    ) -> Result<CompiledGradient, Error> {
        CompiledGradient::with_options(module, name, config, hosts, &OptConfig::default())
    }

    /// [`CompiledGradient::with_config`], with the optimiser passes `opt` run
    /// before the derivation instead of the default ones ([`OptConfig::none`]
    /// derives the module as it is). The optimiser is what makes the naive
    /// `normalize` O(n): it hoists the loop-invariant call out of the loop.
    pub fn with_options(
        module: &Module,
        name: &str,
        config: &RuleConfig,
        hosts: &Hosts,
        opt: &OptConfig,
    ) -> Result<CompiledGradient, Error> {
        Pipeline::new()
            .with_opt(opt.clone())
            .with_hosts(hosts.clone())
            .compile_gradient(module, name, Some(config))
    }

    /// Compiles a rule derived already ([`Pipeline::derive`], or
    /// [`build_rrule`](gradlift_adjoint::build_rrule)), with host functions for the
    /// `extern`s it calls. [`CompiledGradient::compile_time`] is then the
    /// compilation alone.
    pub fn from_rule(rule: Rule, hosts: &Hosts) -> Result<CompiledGradient, Error> {
        Pipeline::new().with_hosts(hosts.clone()).compile_rule(rule)
    }

    pub(crate) fn new_compiled(
        rule: Rule,
        compiled: Compiled,
        compile_time: Duration,
    ) -> CompiledGradient {
        CompiledGradient {
            rule,
            compiled,
            compile_time,
        }
    }

    pub(crate) fn set_compile_time(&mut self, time: Duration) {
        self.compile_time = time;
    }

    /// The value and the gradient at `args`: the float results seeded with 1,
    /// shadows starting at zero. See [`CompiledGradient::value_and_pullback`].
    pub fn value_and_gradient(&self, ws: &mut Workspace, args: &[Val]) -> Result<Gradient, Error> {
        self.value_and_pullback(ws, args, &Seeds::default())
    }

    /// The value at `args` and the pullback of `seeds`: the result cotangents
    /// ([`Seeds::results`], one per float result) and the shadows' initial contents
    /// ([`Seeds::shadows`], per `dup` parameter: the cotangent of what a `mut` slice
    /// holds at the end, and where a gradient accumulates: the final shadow is the
    /// initial one plus this call's contribution).
    ///
    /// [`Gradient::gradient`] holds, per parameter, the cotangent of an `active`
    /// one, the final shadow of a `dup` one, `None` for `const`;
    /// [`Gradient::args`] the arguments after the forward pass.
    ///
    /// ```
    /// use gradlift::{CompiledGradient, Seeds, Workspace, ir::{parse, interp::Val}};
    ///
    /// let module = parse("
    ///     func @sumsq(%x: [f64]) -> f64 {
    ///     entry:
    ///         %n = len %x
    ///         jump head
    ///     head:
    ///         %i = phi i64 [entry: 0, body: %i1]
    ///         %acc = phi f64 [entry: 0.0, body: %acc1]
    ///         %more = icmp lt %i, %n
    ///         br %more, body, exit
    ///     body:
    ///         %xi = load %x[%i]
    ///         %sq = fmul %xi, %xi
    ///         %acc1 = fadd %acc, %sq
    ///         %i1 = iadd %i, 1
    ///         jump head
    ///     exit:
    ///         ret %acc
    ///     }
    /// ")?;
    /// let f = CompiledGradient::new(&module, "sumsq")?;
    /// let mut ws = Workspace::new();
    /// let x = Val::F64s(vec![1.0, 2.0]);
    /// // Seed 0.5, and a shadow that already holds a gradient: it accumulates.
    /// let seeds = Seeds::results([0.5]).with_shadows([Some(Val::F64s(vec![10.0, 10.0]))]);
    /// let g = f.value_and_pullback(&mut ws, &[x], &seeds)?;
    /// assert_eq!(g.gradient, [Some(Val::F64s(vec![11.0, 12.0]))]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn value_and_pullback(
        &self,
        ws: &mut Workspace,
        args: &[Val],
        seeds: &Seeds,
    ) -> Result<Gradient, Error> {
        let mut bufs = EvalBuffers::default();
        self.run(ws, args, seeds, &mut bufs)?;
        Ok(Gradient {
            value: self.rule.layout.config.needs_primal.then_some(bufs.value),
            gradient: bufs.gradient,
            args: bufs.args,
            tape_peak_bytes: bufs.tape_peak_bytes,
            recomputed_steps: bufs.recomputed_steps,
        })
    }

    /// [`CompiledGradient::value_and_pullback`] into buffers the caller keeps: once
    /// `bufs` and `ws` have the sizes of the arguments, a call allocates nothing.
    /// The results are in [`EvalBuffers::value`] (empty when the primal is not
    /// needed), [`EvalBuffers::gradient`] and [`EvalBuffers::args`]. This is what
    /// [`GradientCache`] does, for callers that own the [`CompiledGradient`] and its
    /// buffers side by side.
    pub fn value_and_pullback_into(
        &self,
        ws: &mut Workspace,
        args: &[Val],
        seeds: &Seeds,
        bufs: &mut EvalBuffers,
    ) -> Result<(), Error> {
        self.run(ws, args, seeds, bufs)
    }

    /// The value and the gradient with borrowed arguments: nothing is copied, so a
    /// call costs what the forward pass and the pullback cost. The fastest form.
    ///
    /// `args` are the primal's arguments ([`Arg`]; `mut` slices are written in
    /// place, as the primal writes them). `shadows` holds one writable slice
    /// (`Arg::F64sMut`, or `F32sMut`) per `dup`/`dupnoneed` parameter, in order, of
    /// its parameter's length: the gradients are added into them (`+=`, as
    /// Enzyme's shadows; zero them for a fresh gradient). `seeds` has one cotangent
    /// per float result of an active return, or is empty for all ones. The primal's
    /// results go into `value` (empty when the rule does not return them), the
    /// cotangents of the `active` parameters into `grads`, in order. Once `value`,
    /// `grads` and the workspace's tape have grown, a call allocates nothing.
    /// Returns what the tape held ([`TapeStats`](crate::ir::TapeStats): its peak
    /// bytes during the call, the steps checkpointed loops ran again).
    ///
    /// ```
    /// use gradlift::{CompiledGradient, Workspace, ir::{parse, interp::Val}, jit::Arg};
    ///
    /// let module = parse("
    ///     func @f(%x: [f64], %a: f64) -> f64 {
    ///     entry:
    ///         %x0 = load %x[0]
    ///         %x1 = load %x[1]
    ///         %p = fmul %x0, %x1
    ///         %y = fmul %a, %p
    ///         ret %y
    ///     }
    /// ")?;
    /// let f = CompiledGradient::new(&module, "f")?;
    /// let (x, mut dx) = ([2.0, 3.0], [0.0; 2]);
    /// let (mut value, mut grads) = (Vec::new(), Vec::new());
    /// f.gradient_args(
    ///     &mut Workspace::new(),
    ///     &mut [Arg::F64s(&x), Arg::F64(0.5)],
    ///     &mut [Arg::F64sMut(&mut dx)],
    ///     &[],
    ///     &mut value,
    ///     &mut grads,
    /// )?;
    /// assert_eq!(value, [Val::F64(3.0)]);
    /// assert_eq!(dx, [1.5, 1.0]); // a x1, a x0
    /// assert_eq!(grads, [Val::F64(6.0)]); // x0 x1
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn gradient_args(
        &self,
        ws: &mut Workspace,
        args: &mut [Arg<'_>],
        shadows: &mut [Arg<'_>],
        seeds: &[f64],
        value: &mut Vec<Val>,
        grads: &mut Vec<Val>,
    ) -> Result<gradlift_ir::TapeStats, Error> {
        let mut engine = self.compiled.engine(ws);
        Ok(run_rule(
            &mut engine,
            &self.rule,
            args,
            shadows,
            seeds,
            value,
            grads,
        )?)
    }

    /// The prepared form for repeated calls: a [`GradientCache`] with its own
    /// workspace and buffers, sized by one gradient at `args` (whose result it
    /// holds). Later calls with arguments of the same sizes allocate nothing.
    ///
    /// ```
    /// use gradlift::{CompiledGradient, ir::{parse, interp::Val}};
    ///
    /// let module = parse("
    ///     func @f(%x: f64) -> f64 {
    ///     entry:
    ///         %y = fmul %x, %x
    ///         ret %y
    ///     }
    /// ")?;
    /// let f = CompiledGradient::new(&module, "f")?;
    /// let mut cache = f.prepare(&[Val::F64(0.0)])?;
    /// for k in 1..4 {
    ///     let x = k as f64;
    ///     let g = cache.value_and_gradient(&[Val::F64(x)])?;
    ///     assert_eq!(g.value, [Val::F64(x * x)]);
    ///     assert_eq!(g.gradient, [Some(Val::F64(2.0 * x))]);
    /// }
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn prepare(&self, args: &[Val]) -> Result<GradientCache<'_>, Error> {
        self.prepare_with(args, &Seeds::default())
    }

    /// [`CompiledGradient::prepare`], sized by a pullback of `seeds` (whose shadows
    /// give the cache its shadow buffers).
    pub fn prepare_with(&self, args: &[Val], seeds: &Seeds) -> Result<GradientCache<'_>, Error> {
        let mut cache = GradientCache {
            grad: self,
            ws: Workspace::new(),
            bufs: EvalBuffers::default(),
        };
        cache.value_and_pullback(args, seeds)?;
        Ok(cache)
    }

    /// The compiled rule as an engine calling with `ws`, for code written once over
    /// both engines (the interpreter and this), such as
    /// [`run_rule`](gradlift_adjoint::run_rule).
    pub fn engine<'a>(&'a self, ws: &'a mut Workspace) -> JitEngine<'a> {
        self.compiled.engine(ws)
    }

    /// The derived rule: the module with the forward pass and pullback, and how
    /// their parameters line up with the primal's.
    pub fn rule(&self) -> &Rule {
        &self.rule
    }

    /// How long deriving and compiling took.
    pub fn compile_time(&self) -> Duration {
        self.compile_time
    }

    fn run(
        &self,
        ws: &mut Workspace,
        args: &[Val],
        seeds: &Seeds,
        bufs: &mut EvalBuffers,
    ) -> Result<(), Error> {
        let mut engine = self.compiled.engine(ws);
        Ok(run_rule_vals(&mut engine, &self.rule, args, seeds, bufs)?)
    }
}

/// A [`CompiledGradient`] prepared for repeated calls
/// ([`CompiledGradient::prepare`]): its own workspace and buffers, so that calls
/// with arguments of the sizes it was prepared for allocate nothing. One per thread.
#[derive(Debug)]
pub struct GradientCache<'g> {
    grad: &'g CompiledGradient,
    ws: Workspace,
    bufs: EvalBuffers,
}

/// The result of a [`GradientCache`] call, borrowed from the cache until its next
/// call.
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct GradientRef<'a> {
    /// The primal results (empty when the rule does not return them).
    pub value: &'a [Val],
    /// Per parameter: the cotangent for `active`, the final shadow for `dup` and
    /// `dupnoneed`, `None` for `const`.
    pub gradient: &'a [Option<Val>],
    /// The arguments after the forward pass (`mut` slices as the function left
    /// them).
    pub args: &'a [Val],
    /// The most bytes the tape held during the call.
    pub tape_peak_bytes: usize,
    /// The steps checkpointed loops ran again during the call.
    pub recomputed_steps: u64,
}

impl GradientCache<'_> {
    /// The value and gradient at `args` (seeds 1, shadows from zero), as
    /// [`CompiledGradient::value_and_gradient`].
    pub fn value_and_gradient(&mut self, args: &[Val]) -> Result<GradientRef<'_>, Error> {
        self.value_and_pullback(args, &Seeds::default())
    }

    /// The value at `args` and the pullback of `seeds`, as
    /// [`CompiledGradient::value_and_pullback`].
    pub fn value_and_pullback(
        &mut self,
        args: &[Val],
        seeds: &Seeds,
    ) -> Result<GradientRef<'_>, Error> {
        self.grad.run(&mut self.ws, args, seeds, &mut self.bufs)?;
        Ok(GradientRef {
            value: &self.bufs.value,
            gradient: &self.bufs.gradient,
            args: &self.bufs.args,
            tape_peak_bytes: self.bufs.tape_peak_bytes,
            recomputed_steps: self.bufs.recomputed_steps,
        })
    }

    /// The workspace the cache calls with (its tape's statistics, say).
    pub fn workspace(&self) -> &Workspace {
        &self.ws
    }
}
