//! gradlift's reverse mode: derives, from an IR function, a forward pass and a
//! pullback, both ordinary IR functions (Mooncake.jl's design, Enzyme's activities).
//!
//! [`build_rrule`] takes a module, a function `@f` and a [`RuleConfig`] (one
//! [`Activity`] per parameter, the return's [`RetActivity`]) and returns a [`Rule`]: the
//! module with `@f.fwd` and `@f.rvs` added. Run the forward pass with the primal
//! arguments, then the pullback with the result cotangents, on one
//! [`Interpreter`](gradlift_ir::interp::Interpreter): the forward pass leaves on the
//! tape what the pullback needs (which predecessor each merge point was entered from,
//! and the values each block's reverse reads), and the pullback takes it back.
//!
//! ```
//! use gradlift_adjoint::{RuleConfig, build_rrule};
//! use gradlift_ir::interp::{Interpreter, Val};
//! use gradlift_ir::parse;
//!
//! let module = parse("
//!     func @f(%x: f64, %y: f64) -> f64 {
//!     entry:
//!         %xx = fmul %x, %x
//!         %y3 = fmul 3.0, %y
//!         %r = fadd %xx, %y3
//!         ret %r
//!     }
//! ")?;
//! let f = module.func_by_name("f").unwrap();
//! let rule = build_rrule(&module, f, &RuleConfig::default_for(module.sig(f)))?;
//!
//! let mut engine = Interpreter::new(&rule.module);
//! let y = engine.call(rule.forward, &mut [Val::F64(2.0), Val::F64(1.0)])?;
//! assert_eq!(y, [Val::F64(7.0)]);
//! let grad = engine.call(rule.pullback, &mut [Val::F64(1.0)])?;
//! assert_eq!(grad, [Val::F64(4.0), Val::F64(3.0)]); // (2x, 3)
//! assert_eq!(engine.tape().scalars, 0);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! The derived functions print, parse back and verify like any others; the design,
//! with the signatures and the tape protocol, is in `docs/reverse-mode.md` and in
//! the module docs of the crate's sources. [`check_rule`] tests a rule against
//! finite differences and the dot-product test.
//!
//! It derives functions of scalars and slices with any control flow, local buffers
//! (`alloc`), mutation, and calls: a callee's rule is derived too, once per activity
//! pattern, into the same module (recursion and mutual recursion included), unless a
//! declaration says otherwise (`vjp`, `nodiff`, `overlay`; an `extern` has a
//! derivative only through one). [`value_and_gradient`] runs a rule with the
//! calling convention (shadows, seeds); what cannot be derived is an [`AdError`]
//! that says what and where.
//!
//! The crate reads and writes IR and never runs user code, except [`check_rule`]
//! and [`check_derived`], which run the interpreter, and [`run_rule`] and its
//! wrappers, which run a rule on the engine they are given (any
//! [`Engine`](gradlift_ir::Engine): the interpreter, or the JIT): the rule's calling
//! convention, written once.
//!
//! The public API is the items re-exported here; the mechanisms are
//! private modules, in pipeline order: `config` (the request), `callee` (how calls
//! are differentiated), `activity` (which values get derivatives), `rules` (the rule
//! table), `stmt` (each statement's forward and reverse pieces), `plan` (block
//! stack, saved values, calls), `tape` (what is pushed and what is had otherwise),
//! `liveness` (where cotangents are known zero), `forward` and `pullback`
//! (assembly), `rrule` (the pipeline and the cache of callee rules), `eval`
//! (running a rule), `check`.

#![warn(unreachable_pub)]

// The README's examples run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

mod activity;
mod callee;
mod check;
mod checkpoint;
mod config;
mod custom;
mod error;
mod eval;
mod forward;
mod frule;
mod fuse;
mod fwd_eval;
mod hvp;
mod liveness;
mod outline;
mod plan;
mod pullback;
mod revolve;
mod rrule;
mod rules;
mod stmt;
mod tape;
mod widen;

pub use check::Coord;
pub use check::{
    CheckError, CheckOptions, CheckReport, check_derived, check_derived_with_hosts, check_rule,
    check_rule_with_hosts,
};
pub use config::{Activity, RetActivity, RuleConfig, TapePolicy};
pub use error::{AdError, InternalError};
pub use eval::{
    EvalBuffers, EvalError, Gradient, Seeds, run_rule, run_rule_vals, value_and_gradient,
};
pub use frule::{DualActivity, DualRet, Frule, FruleConfig, FruleLayout, MAX_WIDTH, build_frule};
pub use fwd_eval::{Jvp, jvp_vals, run_frule};
pub use hvp::{Hvp, HvpRule, build_hvp, hvp_vals, run_hvp};
pub use rrule::{MAX_REVERSE_WIDTH, Rule, RuleLayout, build_rrule, build_rrule_width};
