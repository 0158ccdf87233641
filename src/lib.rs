//! gradlift: reverse-mode automatic differentiation for Rust, by program transformation.
//!
//! Programs are built, traced or parsed into gradlift's SSA IR ([`ir`]); [`adjoint`]
//! derives forward passes and pullbacks from that IR (today for functions of scalars,
//! with any control flow); later stages compile them with Cranelift. The IR, its text
//! format, verifier and reference interpreter are in place; the `gradlift` binary
//! (`check`, `run`) is their command-line face.
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

mod api;

pub use api::{CompiledFunction, CompiledGradient, Error, GradientCache, GradientRef};
pub use gradlift_adjoint as adjoint;
pub use gradlift_adjoint::{Gradient, Seeds};
pub use gradlift_ir as ir;
pub use gradlift_jit as jit;
pub use gradlift_jit::{Hosts, TapeStats, Workspace};

/// The README's Rust examples, compiled and run as doctests so they stay true.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
