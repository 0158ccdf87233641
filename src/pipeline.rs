//! The pipeline every entry point runs: a module and a function go through
//! **verify → optimise → derive → compile**, in that order, in one place.
//!
//! [`CompiledFunction`], [`CompiledGradient`], [`autodiff`](crate::autodiff()), the
//! `gradlift` command line (on both engines: the interpreter runs the optimised
//! primal and the rule derived from it, the JIT compiles the same), the benchmarks
//! and the examples all go through a [`Pipeline`], so what one of them computes the
//! others compute too, and a property shown on one (say, that the naive
//! `normalize` is O(n) once its loop-invariant call is hoisted) holds on all.
//!
//! Each stage is a method that runs the stages before it:
//!
//! | method | stages | gives |
//! |---|---|---|
//! | [`Pipeline::prepare`] | verify, optimise | [`Prepared`]: the module the engines run, the function's ID |
//! | [`Pipeline::derive`] | verify, optimise, derive | a [`Rule`]: forward pass and pullback |
//! | [`Pipeline::compile_function`] | verify, optimise, compile | a [`CompiledFunction`] |
//! | [`Pipeline::compile_gradient`] | verify, optimise, derive, compile | a [`CompiledGradient`] |
//! | [`Pipeline::derive_jvp`] | verify, optimise, derive (forward mode) | a [`Frule`] |
//! | [`Pipeline::compile_jvp`] | verify, optimise, derive (forward mode), compile | a [`CompiledJvp`] |
//! | [`Pipeline::derive_hvp`] | verify, optimise, derive (forward over reverse) | an [`HvpRule`] |
//! | [`Pipeline::compile_hvp`] | verify, optimise, derive (forward over reverse), compile | a [`CompiledHvp`] |
//!
//! The optimiser runs by default ([`OptConfig::default`]); [`OptConfig::none`]
//! (`--opt none` on the command line) skips it, so the rule is derived from the
//! module as written.
//!
//! ```
//! use gradlift::ir::{interp::Interpreter, parse};
//! use gradlift::adjoint::{RuleConfig, value_and_gradient};
//! use gradlift::{Pipeline, Seeds, Val};
//!
//! let module = parse("
//!     func @f(%x: f64) -> f64 {
//!     entry:
//!         %y = fmul %x, %x
//!         ret %y
//!     }
//! ")?;
//! let pipeline = Pipeline::new();
//! // The rule, on the interpreter...
//! let rule = pipeline.derive(&module, "f", None)?;
//! let g = value_and_gradient(&mut Interpreter::new(&rule.module), &rule, &[Val::F64(3.0)], &Seeds::default())?;
//! assert_eq!(g.gradient, [Some(Val::F64(6.0))]);
//! // ... and the same rule compiled.
//! let compiled = pipeline.compile_gradient(&module, "f", None)?;
//! let g = compiled.value_and_gradient(&mut gradlift::Workspace::new(), &[Val::F64(3.0)])?;
//! assert_eq!(g.gradient, [Some(Val::F64(6.0))]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Observing the pipeline
//!
//! With the feature `tracing`, each stage runs inside a `tracing` span of target
//! `gradlift` and level `INFO`, named after the stage: `trace` ([`autodiff`](crate::autodiff()),
//! and so the attributes), `verify`, `optimize`, `derive` (reverse mode),
//! `derive_jvp`, `derive_hvp`, and `compile` (Cranelift). Each has a field `func`,
//! the function's name, and is closed by a `DEBUG` event `"<stage> done"` with a
//! field `elapsed_us`, the stage's duration in microseconds. A subscriber that
//! times spans (`tracing-subscriber`'s `fmt` layer with span events on close, a
//! flame-graph layer, ...) shows them too. Without the feature, nothing is
//! emitted and nothing is linked. `tests/tracing.rs` records the spans of
//! [`Pipeline::compile_gradient`], [`Pipeline::compile_jvp`],
//! [`Pipeline::compile_hvp`] and of `autodiff`'s first gradient.

use std::time::Instant;

use gradlift_adjoint::{
    Frule, FruleConfig, HvpRule, Rule, RuleConfig, build_frule, build_hvp, build_rrule_width,
};
use gradlift_ir::opt::{OptConfig, optimize};
use gradlift_ir::{FuncId, Hosts, Module, verify};
use gradlift_jit::{CompileOptions, compile_with_options};

use crate::api::{CompiledFunction, CompiledGradient, Error};
use crate::forward::{CompiledHvp, CompiledJacobian, CompiledJvp};

/// How modules go through the pipeline: which optimiser passes run, the host
/// functions for the `extern`s the code calls, and how the JIT compiles. The
/// default runs the optimiser's default passes, binds no host function, and
/// compiles with the JIT's default options (tape checks on).
#[derive(Clone, Debug, Default)]
pub struct Pipeline {
    opt: OptConfig,
    hosts: Hosts,
    compile: CompileOptions,
}

/// A module after verification and optimisation, ready for an engine.
#[derive(Clone, Debug)]
pub struct Prepared {
    /// The optimised module (as given when no pass is selected).
    pub module: Module,
    /// The function asked for.
    pub func: FuncId,
}

impl Pipeline {
    /// The default pipeline: the optimiser's default passes, no host functions.
    pub fn new() -> Pipeline {
        Pipeline::default()
    }

    /// The same pipeline with the optimiser passes `opt` ([`OptConfig::none`]
    /// runs none).
    pub fn with_opt(mut self, opt: OptConfig) -> Pipeline {
        self.opt = opt;
        self
    }

    /// The same pipeline with host functions for the `extern`s the code calls (and
    /// for the `vjp` rules of externs).
    pub fn with_hosts(mut self, hosts: Hosts) -> Pipeline {
        self.hosts = hosts;
        self
    }

    /// The same pipeline with the JIT's [`CompileOptions`]: when it compiles a
    /// function with Cranelift's quick settings, and the largest function it
    /// compiles.
    pub fn with_compile(mut self, options: CompileOptions) -> Pipeline {
        self.compile = options;
        self
    }

    /// The same pipeline with the JIT's tape checks on (the default) or off
    /// ([`CompileOptions::tape_checks`]): with them, compiled code reports a `pop`
    /// of another type than was pushed as the interpreter does
    /// ([`ErrorKind::TapeMismatch`](crate::ir::engine::ErrorKind::TapeMismatch)); without, such
    /// a `pop` reads the bits pushed, and gradients whose loops push a scalar or
    /// two per iteration run up to about 10% faster (`BENCHMARKS.md`). Derived code
    /// always pops the types it pushed, so for gradients the check only ever
    /// catches a bug of gradlift's. The interpreter always checks.
    ///
    /// ```
    /// let fast = gradlift::Pipeline::new().with_tape_checks(false);
    /// assert!(!fast.compile_options().tape_checks);
    /// assert!(gradlift::Pipeline::new().compile_options().tape_checks);
    /// ```
    pub fn with_tape_checks(mut self, on: bool) -> Pipeline {
        self.compile = self.compile.with_tape_checks(on);
        self
    }

    /// How the JIT compiles in this pipeline.
    pub fn compile_options(&self) -> &CompileOptions {
        &self.compile
    }

    /// The optimiser passes this pipeline runs.
    pub fn opt(&self) -> &OptConfig {
        &self.opt
    }

    /// The host functions this pipeline binds.
    pub fn hosts(&self) -> &Hosts {
        &self.hosts
    }

    /// Verify, then optimise: the module every engine runs, and `@name`'s ID.
    pub fn prepare(&self, module: &Module, name: &str) -> Result<Prepared, Error> {
        let func = module
            .func_by_name(name.strip_prefix('@').unwrap_or(name))
            .ok_or_else(|| Error::NoSuchFunction(name.to_string()))?;
        stage!("verify", name, verify(module)).map_err(Error::Verify)?;
        let mut module = module.clone();
        if self.opt != OptConfig::none() {
            stage!("optimize", name, optimize(&mut module, &self.opt)).map_err(Error::Optimize)?;
        }
        Ok(Prepared { module, func })
    }

    /// Verify, optimise, then derive the rule of `@name` under `config` (`None`:
    /// the defaults of [`RuleConfig::default_for`]: float scalars `active`, float
    /// slices `dup`, an `active` return).
    pub fn derive(
        &self,
        module: &Module,
        name: &str,
        config: Option<&RuleConfig>,
    ) -> Result<Rule, Error> {
        self.derive_width(module, name, config, 1)
    }

    /// [`Pipeline::derive`] of width `width` (reverse mode's vector mode,
    /// [`build_rrule_width`]): one forward pass, then a pullback carrying `width`
    /// cotangents per value, from `width` seeds per result into shadows `width`
    /// times as long as their slices (lane `j` of element `i` at `i * width + j`).
    /// The compiled rule ([`Pipeline::compile_rule`]) takes them through the same
    /// calls as width 1 ([`CompiledGradient::gradient_args`](crate::CompiledGradient::gradient_args),
    /// [`CompiledGradient::value_and_pullback`](crate::CompiledGradient::value_and_pullback)).
    ///
    /// ```
    /// use gradlift::{Pipeline, Seeds, Workspace, ir::{parse, interp::Val}};
    ///
    /// // Both rows of the Jacobian of (x y, x + y) from one pullback of width 2.
    /// let module = parse("
    ///     func @f(%x: f64, %y: f64) -> (f64, f64) {
    ///     entry:
    ///         %p = fmul %x, %y
    ///         %s = fadd %x, %y
    ///         ret %p, %s
    ///     }
    /// ")?;
    /// let p = Pipeline::new();
    /// let g = p.compile_rule(p.derive_width(&module, "f", None, 2)?)?;
    /// // Seeds by result, lane 0 first: lane 0 seeds x y, lane 1 seeds x + y.
    /// let out = g.value_and_pullback(&mut Workspace::new(), &[Val::F64(3.0), Val::F64(5.0)],
    ///     &Seeds::results([1.0, 0.0, 0.0, 1.0]))?;
    /// // Per parameter, its lanes: (d(xy)/dx, d(x+y)/dx) and (d(xy)/dy, d(x+y)/dy).
    /// assert_eq!(out.gradient[0], Some(Val::F64s(vec![5.0, 1.0])));
    /// assert_eq!(out.gradient[1], Some(Val::F64s(vec![3.0, 1.0])));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn derive_width(
        &self,
        module: &Module,
        name: &str,
        config: Option<&RuleConfig>,
        width: u32,
    ) -> Result<Rule, Error> {
        let Prepared { module, func } = self.prepare(module, name)?;
        let default;
        let config = match config {
            Some(c) => c,
            None => {
                default = RuleConfig::default_for(module.sig(func));
                &default
            }
        };
        stage!(
            "derive",
            module.name(func),
            build_rrule_width(&module, func, config, width)
        )
        .map_err(Error::Derive)
    }

    /// Verify, optimise, then compile `@name` (and what it calls) to native code.
    pub fn compile_function(&self, module: &Module, name: &str) -> Result<CompiledFunction, Error> {
        let start = Instant::now();
        let Prepared { module, func } = self.prepare(module, name)?;
        let compiled = stage!(
            "compile",
            module.name(func),
            compile_with_options(&module, &[func], &self.hosts, &self.compile)
        )
        .map_err(Error::Compile)?;
        Ok(CompiledFunction::new_compiled(
            compiled,
            func,
            start.elapsed(),
        ))
    }

    /// Verify, optimise, derive, then compile the rule of `@name` under `config`
    /// (`None`: the defaults, as [`Pipeline::derive`]).
    pub fn compile_gradient(
        &self,
        module: &Module,
        name: &str,
        config: Option<&RuleConfig>,
    ) -> Result<CompiledGradient, Error> {
        let start = Instant::now();
        let rule = self.derive(module, name, config)?;
        let mut grad = self.compile_rule(rule)?;
        grad.set_compile_time(start.elapsed());
        Ok(grad)
    }

    /// Verify, optimise, then derive the forward rule of `@name` under `config`
    /// (`None`: the defaults of [`FruleConfig::default_for`]: float scalars and
    /// float slices `dual`, a `dual` return, width 1).
    pub fn derive_jvp(
        &self,
        module: &Module,
        name: &str,
        config: Option<&FruleConfig>,
    ) -> Result<Frule, Error> {
        let Prepared { module, func } = self.prepare(module, name)?;
        let config = config
            .cloned()
            .unwrap_or_else(|| FruleConfig::default_for(module.sig(func)));
        stage!(
            "derive_jvp",
            module.name(func),
            build_frule(&module, func, &config)
        )
        .map_err(Error::Derive)
    }

    /// Verify, optimise, derive, then compile the forward rule of `@name` under
    /// `config` (`None`: the defaults, as [`Pipeline::derive_jvp`]).
    pub fn compile_jvp(
        &self,
        module: &Module,
        name: &str,
        config: Option<&FruleConfig>,
    ) -> Result<CompiledJvp, Error> {
        let start = Instant::now();
        let frule = self.derive_jvp(module, name, config)?;
        let mut jvp = self.compile_frule(frule)?;
        jvp.set_compile_time(start.elapsed());
        Ok(jvp)
    }

    /// Compiles a forward rule derived already (by [`Pipeline::derive_jvp`], or by
    /// hand with [`build_frule`]); the last stage alone.
    pub fn compile_frule(&self, frule: Frule) -> Result<CompiledJvp, Error> {
        let start = Instant::now();
        let compiled = stage!(
            "compile",
            frule.module.name(frule.func),
            compile_with_options(&frule.module, &[frule.func], &self.hosts, &self.compile)
        )
        .map_err(Error::Compile)?;
        Ok(CompiledJvp::new_compiled(frule, compiled, start.elapsed()))
    }

    /// Verify, optimise, then derive the second-order rule of `@name` (forward mode
    /// over reverse mode) under `config` (`None`: the defaults of
    /// [`RuleConfig::default_for`]), `width` directions per call.
    pub fn derive_hvp(
        &self,
        module: &Module,
        name: &str,
        config: Option<&RuleConfig>,
        width: u32,
    ) -> Result<HvpRule, Error> {
        let Prepared { module, func } = self.prepare(module, name)?;
        let config = config
            .cloned()
            .unwrap_or_else(|| RuleConfig::default_for(module.sig(func)));
        stage!(
            "derive_hvp",
            module.name(func),
            build_hvp(&module, func, &config, width)
        )
        .map_err(Error::Derive)
    }

    /// Verify, optimise, derive, then compile the second-order rule of `@name`.
    pub fn compile_hvp(
        &self,
        module: &Module,
        name: &str,
        config: Option<&RuleConfig>,
        width: u32,
    ) -> Result<CompiledHvp, Error> {
        let start = Instant::now();
        let rule = self.derive_hvp(module, name, config, width)?;
        let roots = [rule.forward, rule.pullback];
        let compiled = stage!(
            "compile",
            rule.module.name(rule.forward),
            compile_with_options(&rule.module, &roots, &self.hosts, &self.compile)
        )
        .map_err(Error::Compile)?;
        let mut h = CompiledHvp::new_compiled(rule, compiled, start.elapsed());
        h.set_compile_time(start.elapsed());
        Ok(h)
    }

    /// Verify, optimise, derive and compile the forward rule (width `width`) and
    /// the reverse rule of `@name` under `config` (`None`: the defaults of
    /// [`RuleConfig::default_for`]; `active` and `dup` parameters are the
    /// Jacobian's columns): a [`CompiledJacobian`], which builds dense Jacobians
    /// by whichever sweeps are fewer.
    pub fn compile_jacobian(
        &self,
        module: &Module,
        name: &str,
        config: Option<&RuleConfig>,
        width: u32,
    ) -> Result<CompiledJacobian, Error> {
        let Prepared { module: m, func } = self.prepare(module, name)?;
        let rconfig = match config {
            Some(c) => c.clone(),
            None => RuleConfig::default_for(m.sig(func)),
        };
        let fconfig = FruleConfig::matching(&rconfig, width);
        let jvp = self.compile_jvp(module, name, Some(&fconfig))?;
        // The pullback itself at every width (never the fused function), so a
        // Jacobian's entries are bit for bit the same whatever the width.
        let rconfig = rconfig.with_fuse(false);
        let grad = self.compile_rule(self.derive_width(module, name, Some(&rconfig), width)?)?;
        Ok(CompiledJacobian::new_compiled(jvp, grad))
    }

    /// Compiles a rule derived already (by [`Pipeline::derive`], or by hand with
    /// [`build_rrule`](crate::adjoint::build_rrule)); the last stage alone.
    pub fn compile_rule(&self, rule: Rule) -> Result<CompiledGradient, Error> {
        let start = Instant::now();
        let roots = rule.entries();
        let compiled = stage!(
            "compile",
            rule.module.name(rule.layout.primal),
            compile_with_options(&rule.module, &roots, &self.hosts, &self.compile)
        )
        .map_err(Error::Compile)?;
        Ok(CompiledGradient::new_compiled(
            rule,
            compiled,
            start.elapsed(),
        ))
    }
}
