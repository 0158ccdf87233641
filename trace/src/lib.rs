//! gradlift-trace: write a numeric function once, as generic Rust, and get gradlift
//! IR from it.
//!
//! A function generic over [`Real`] (or [`Float`]) runs natively on `f64`; called
//! with [`Var`], the tracer's value type, it records every operation into an IR
//! function instead. Branches and loops are written with [`cond`], [`for_range`] and
//! [`while_loop`], which are Rust's `if` and loops natively and real blocks and phis
//! when traced, so the IR does not grow with the data. Slices are [`SliceRead`] and
//! [`SliceWrite`] handles indexed by the traced integer type, calls between traced
//! functions are IR `call`s ([`func()`]), and a function can carry a custom derivative
//! ([`Func::nodiff`], [`Func::overlay`], [`Func::vjp`], [`Func::vjp_native`]).
//!
//! ```
//! use gradlift_trace::{Float, Real, SliceRead, Var, cond, for_range, trace};
//!
//! // sum_i (if x_i > 0 { sin(x_i) * x_i } else { x_i^3 - 2 x_i })
//! fn branchy<T: Real>(x: T::Slice<'_>) -> T {
//!     for_range(0, x.len(), T::lit(0.0), |i, acc| {
//!         let xi = x.at(i);
//!         acc + cond(xi.gt(0.0), || xi.sin() * xi, || xi.powi(3) - xi * 2.0)
//!     })
//! }
//!
//! // Natively, on f64:
//! let x = [0.5, -1.0, 2.0];
//! let native = branchy::<f64>(&x);
//! assert_eq!(native, 0.5f64.sin() * 0.5 + 1.0 + 2.0f64.sin() * 2.0);
//!
//! // Traced: one loop, one branch, whatever the length of x.
//! let traced = trace("branchy", branchy::<Var>).unwrap();
//! let text = traced.module.to_string();
//! assert!(text.contains("func @branchy(%0: [f64]) -> f64"), "{text}");
//! assert_eq!(text.matches("load").count(), 1, "{text}");
//! ```
//!
//! Mistakes made while tracing (a value used in a trace it does not belong to, arms
//! that return different shapes, a value leaked out of a loop body, ...) are reported
//! as a [`TraceError`] naming the function and the Rust source line, never as a panic
//! or invalid IR. Mistakes the type system can catch (a store into a read-only
//! [`Slice`], arms of different Rust types) do not compile.
//!
//! The modules' docs are the guide to each part: [`num`] (the traits, literals, the
//! native and traced worlds), [`flow`] (control flow, and which loops unroll),
//! [`slice`](mod@slice), [`func`](mod@func) (calls, recursion, custom derivatives), [`error`].
//!
//! The root crate `gradlift` turns a traced function into a compiled gradient in one
//! call, with Enzyme's activities.

// The README's examples run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

mod ctx;
pub mod error;
pub mod flow;
pub mod func;
pub mod num;
pub mod slice;
pub mod var;

pub use ctx::{Slot, Tag};
pub use error::{Loc, TraceError};
pub use flow::{Carry, cond, for_range, for_range_checkpointed, while_loop};
pub use func::{
    Args, Callable, Deriv, Func, Nodiff, Overlay, Param, Plain, Ret, Traced, Tracer, Vjp, VjpHost,
    VjpNative, func, trace,
};
pub use num::{Float, Int, Logic, Real, SliceRead, SliceWrite};
pub use slice::{ElemPrim, Slice, SliceMut};
pub use var::{Prim, Var};

/// Everything a generic numeric function needs in scope: the traits, the traced
/// types and the control flow.
pub mod prelude {
    pub use crate::{
        Float, Int, Logic, Real, Slice, SliceMut, SliceRead, SliceWrite, Var, cond, for_range,
        for_range_checkpointed, func, while_loop,
    };
}
