//! gradlift: reverse-mode automatic differentiation for Rust, by program transformation.
//!
//! Programs are built, parsed or traced into gradlift's SSA IR ([`ir`]);
//! [`adjoint`] derives forward passes and pullbacks from that IR
//! (scalars and slices, any control flow, calls, custom rules); [`jit`]
//! compiles them with Cranelift to native code. Every entry point runs one
//! [`Pipeline`]: verify, optimise, derive, compile. The compiled API puts the stages
//! together:
//!
//! - [`CompiledGradient`]: a function's rule, derived and compiled once, `Send +
//!   Sync`; [`CompiledGradient::value_and_gradient`] and
//!   [`CompiledGradient::value_and_pullback`] with a per-thread [`Workspace`].
//! - [`GradientCache`] ([`CompiledGradient::prepare`]): the form for loops, which
//!   allocates nothing per call.
//! - [`CompiledFunction`]: the primal alone.
//! - [`Hosts`]: Rust functions for a module's `extern` functions (and, through `vjp`
//!   rules that are externs too, their derivatives).
//!
//! [`autodiff()`] goes from a generic Rust function or closure, traced once
//! ([`trace`]), to gradients with Enzyme's activities ([`Active`], [`Const`],
//! [`Duplicated`]), and to directional derivatives in forward mode
//! ([`Autodiff::jvp`] with [`Dual`]), compiled per activity pattern on first use.
//!
//! The `gradlift` binary (`check`, `run`, `grad`, `dump`; the `gradlift-cli` package
//! of this workspace) is the command-line face; it runs the same pipeline.
//!
//! ```
//! use gradlift::{CompiledGradient, Workspace, ir::{parse, interp::Val}};
//!
//! let module = parse("
//!     func @cube(%x: f64) -> f64 {
//!     entry:
//!         %x2 = fmul %x, %x
//!         %x3 = fmul %x2, %x
//!         ret %x3
//!     }
//! ")?;
//! let cube = CompiledGradient::new(&module, "cube")?;
//! let g = cube.value_and_gradient(&mut Workspace::new(), &[Val::F64(2.0)])?;
//! assert_eq!(g.value, Some(vec![Val::F64(8.0)]));
//! assert_eq!(g.gradient, [Some(Val::F64(12.0))]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! The IR on its own, with the reference interpreter:
//!
//! ```
//! use gradlift::ir::{parse, verify, interp::{Interpreter, Val}};
//!
//! // sum_i x[i]^2, as IR text.
//! let module = parse("
//!     func @sumsq(%x: [f64]) -> f64 {
//!     entry:
//!         %n = len %x
//!         jump head
//!     head:
//!         %i = phi i64 [entry: 0, body: %i1]
//!         %acc = phi f64 [entry: 0.0, body: %acc1]
//!         %more = icmp lt %i, %n
//!         br %more, body, exit
//!     body:
//!         %xi = load %x[%i]
//!         %sq = fmul %xi, %xi
//!         %acc1 = fadd %acc, %sq
//!         %i1 = iadd %i, 1
//!         jump head
//!     exit:
//!         ret %acc
//!     }
//! ")?;
//! verify(&module)?;
//! let sumsq = module.func_by_name("sumsq").unwrap();
//! let value = Interpreter::new(&module).call(sumsq, &mut [Val::F64s(vec![1.0, 2.0, 3.0])])?;
//! assert_eq!(value, [Val::F64(14.0)]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

/// Runs `$body` as the pipeline stage `$name` of the function `$func`: with the
/// feature `tracing`, inside an `INFO` span named `$name` (target `gradlift`,
/// field `func`), closed by a `DEBUG` event with the stage's duration
/// (`elapsed_us`). Without the feature, `$body` alone.
macro_rules! stage {
    ($name:literal, $func:expr, $body:expr) => {{
        #[cfg(feature = "tracing")]
        let _span = ::tracing::info_span!(target: "gradlift", $name, func = %$func).entered();
        #[cfg(feature = "tracing")]
        let _start = ::std::time::Instant::now();
        let out = $body;
        #[cfg(feature = "tracing")]
        ::tracing::debug!(
            target: "gradlift",
            elapsed_us = _start.elapsed().as_micros() as u64,
            concat!($name, " done")
        );
        out
    }};
}

mod api;
#[cfg(feature = "argmin")]
pub mod argmin;
pub mod autodiff;
mod forward;
pub mod pipeline;
pub mod slices;
pub mod suite;

pub use api::{CompiledFunction, CompiledGradient, Error, GradientCache, GradientRef};
pub use autodiff::{
    Active, Autodiff, CallState, Const, Dual, DualReturn, Duplicated, DuplicatedNoNeed, Return,
    SharedGradient, SharedJvp, autodiff,
};
pub use forward::{CompiledHvp, CompiledJacobian, CompiledJvp, Matrix};
pub use gradlift_adjoint as adjoint;
pub use gradlift_adjoint::{Gradient, Seeds};
pub use gradlift_adjoint::{Hvp, Jvp};
pub use gradlift_ir as ir;
pub use gradlift_ir::engine::{Arg, Engine, Hosts, RunError, TapeStats, Val};
pub use gradlift_jit as jit;
pub use gradlift_jit::Workspace;
/// `#[autodiff_reverse]`: the gradient of an ordinary Rust function, and
/// `#[autodiff_forward]`: its directional derivative, with the signature rules of
/// `std::autodiff` (see [the attributes' docs](macro@autodiff_reverse)).
/// `#[differentiable]` marks the functions they may call. In the default feature
/// `macros`.
#[cfg(feature = "macros")]
pub use gradlift_macros::{autodiff_forward, autodiff_reverse, checkpoint, differentiable};
pub use gradlift_trace as trace;
pub use pipeline::{Pipeline, Prepared};
pub use slices::{AsSlice, AsSliceMut, NotContiguous, SliceArg, SliceArgMut};

/// The tracing guide's Rust examples, compiled and run as doctests.
#[doc = include_str!("../docs/tracing.md")]
#[cfg(doctest)]
pub struct TracingGuideDoctests;

/// The forward-mode guide's Rust examples, compiled and run as doctests.
#[doc = include_str!("../docs/forward-mode.md")]
#[cfg(doctest)]
pub struct ForwardModeGuideDoctests;

/// The checkpointing guide's Rust examples, compiled and run as doctests.
#[doc = include_str!("../docs/checkpointing.md")]
#[cfg(doctest)]
pub struct CheckpointingGuideDoctests;

/// The guide to `#[autodiff_reverse]`'s Rust examples, compiled and run as
/// doctests.
#[doc = include_str!("../docs/attribute.md")]
#[cfg(all(doctest, feature = "macros"))]
pub struct AttributeGuideDoctests;

/// The README's Rust examples, compiled and run as doctests so they stay true
/// (its first one is `#[autodiff_reverse]`'s, in the feature `macros`).
#[doc = include_str!("../README.md")]
#[cfg(all(doctest, feature = "macros"))]
pub struct ReadmeDoctests;
