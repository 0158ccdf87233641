//! `#[autodiff_reverse]`: the gradient of an ordinary Rust function, on stable Rust,
//! with the signature rules of nightly Rust's
//! [`std::autodiff::autodiff_reverse`](https://doc.rust-lang.org/std/autodiff/attr.autodiff_reverse.html)
//! (Enzyme's), computed by gradlift; and `#[autodiff_forward]`, its directional
//! derivative, with those of
//! [`std::autodiff::autodiff_forward`](https://doc.rust-lang.org/std/autodiff/attr.autodiff_forward.html)
//! (see [Forward mode](#forward-mode-autodiff_forward)).
//!
//! ```
//! use gradlift_macros::autodiff_reverse;
//!
//! #[autodiff_reverse(d_softplus_sum, Duplicated, Active, Active)]
//! fn softplus_sum(x: &[f64], t: f64) -> f64 {
//!     let mut s = 0.0;
//!     for i in 0..x.len() {
//!         let z = x[i] * t;
//!         if z > 20.0 {
//!             s += z; // ln(1 + e^z) rounds to z
//!         } else {
//!             s += (1.0 + z.exp()).ln();
//!         }
//!     }
//!     s
//! }
//!
//! let x = [1.0, -2.0, 30.0];
//! // The function is still an ordinary function.
//! let y = softplus_sum(&x, 1.0);
//! // The derivative: the value, then the gradient of `t`; `x`'s is added into `dx`.
//! let mut dx = [0.0; 3];
//! let (value, dt) = d_softplus_sum(&x, &mut dx, 1.0, 1.0);
//! assert_eq!(value, y);
//! let sigmoid = |z: f64| 1.0 / (1.0 + (-z).exp());
//! assert!((dx[0] - sigmoid(1.0)).abs() < 1e-12 && dx[2] == 1.0);
//! assert!((dt - (sigmoid(1.0) - 2.0 * sigmoid(-2.0) + 30.0)).abs() < 1e-12);
//! ```
//!
//! # The signature
//!
//! `#[autodiff_reverse(NAME, ACTIVITY..., RETURN_ACTIVITY)]` keeps the function as
//! written and adds `fn NAME`, with one activity per parameter and one for the
//! return (none if the function returns `()`):
//!
//! | activity | parameter | `NAME` takes | `NAME` gives |
//! |---|---|---|---|
//! | `Active` | `f64` | the `f64` | its derivative, appended to the result |
//! | `Const` | `f64`, `usize`, `i64`, `i32`, `&[f64]`, `&mut [f64]`, `&mut f64` | the same | nothing |
//! | `Duplicated` | `&[f64]`, `&mut [f64]`, `&mut f64` | it, then a shadow `&mut [f64]` (`&mut f64`) | its gradient, added (`+=`) into the shadow |
//! | `Active` (return) | `-> f64` | a seed `f64`, after all the parameters | the derivatives scaled by the seed |
//! | `ActiveOnly` (return) | `-> f64` | a seed `f64`, after all the parameters | the derivatives scaled by the seed, without the value |
//! | `Const` (return) | `-> f64` | nothing more | derivatives through shadows only |
//!
//! The other names of `std::autodiff` and of the RFC draft are accepted with the
//! same meaning: `Constant` is `Const`; `ActiveOnly` on a parameter is `Active`;
//! `DuplicatedNoNeed` and `DuplicatedOnly` (whose primal may be left with any
//! contents) are derived as `Duplicated`, which leaves the right ones. The forward
//! mode's `Dual` and its kin are a compile error saying to use `#[autodiff_forward]`.
//!
//! `NAME` returns the function's value (unless it is `()`, or the return is
//! `ActiveOnly`), then the derivatives of
//! the `Active` parameters in order: a tuple if that is two or more numbers, the
//! number alone if it is one, `()` if none. As in Enzyme, a shadow accumulates,
//! and the shadow of a writable slice is on entry the seed of what the function
//! leaves in it: for an output `out: &mut f64` marked `Duplicated`, pass a shadow of
//! `1.0` to get the derivatives of `*out` (the shadow is consumed: it comes back
//! `0.0`).
//!
//! # The generated functions
//!
//! Besides `NAME`, the attribute adds two functions:
//!
//! - `NAME_try`: `NAME`'s parameters, and `Result<R, gradlift::Error>` for `NAME`'s
//!   result `R`: an error instead of a panic, for applications that must not
//!   panic.
//! - `NAME_grad`: the function's own parameters (no shadows, no seed), and fresh
//!   gradients: the value (unless it is `()`, or the return is `ActiveOnly`), then, in parameter order, a new
//!   `Vec<f64>` for each `Duplicated` slice (an `f64` for a `Duplicated` `&mut
//!   f64`) and the derivative of each `Active` parameter; a tuple if that is two or
//!   more, the item alone if it is one. It is `NAME` with zeroed shadows and a seed
//!   of 1 (so the derivatives through a writable `Duplicated` parameter's final
//!   contents, whose seed is its shadow, are zero), and it panics as `NAME` does.
//!   For example:
//!
//! ```
//! # use gradlift_macros::autodiff_reverse;
//! #[autodiff_reverse(d_f, Duplicated, Active, Active)]
//! fn f(x: &[f64], t: f64) -> f64 {
//!     x[0] * x[1] * t
//! }
//! // fn d_f(x: &[f64], dx: &mut [f64], t: f64, seed: f64) -> (f64, f64)
//! // fn d_f_try(x: &[f64], dx: &mut [f64], t: f64, seed: f64) -> Result<(f64, f64), gradlift::Error>
//! // fn d_f_grad(x: &[f64], t: f64) -> (f64, Vec<f64>, f64)
//! let (value, dx, dt) = d_f_grad(&[2.0, 3.0], 0.5);
//! assert_eq!((value, dx, dt), (3.0, vec![1.5, 1.0], 6.0));
//! let mut dx = [0.0; 1];
//! assert!(d_f_try(&[2.0, 3.0], &mut dx, 0.5, 1.0).is_err()); // the shadow is too short
//! ```
//!
//! # Threads and costs
//!
//! The first call of `NAME` (or `NAME_try`, `NAME_grad`) in the process traces the
//! function, optimises, derives and compiles its derivative through
//! `gradlift::autodiff` (gradlift's one pipeline), and keeps the compiled
//! derivative, a `gradlift::SharedGradient`, for the rest of the process; calls
//! racing the first one wait for it. Each thread calls it with a workspace and
//! buffers of its own (a `gradlift::CallState` in a `thread_local!`), so calls from
//! many threads run at once, taking no lock. After a thread's first call, a call
//! with slices of the same lengths allocates nothing (`NAME_grad` allocates its
//! fresh vectors); slices and shadows are lent to the compiled code, not copied.
//!
//! # Errors and panics
//!
//! `NAME` panics where `NAME_try` returns an error: an index out of bounds, a
//! shadow whose length is not its slice's, or a failure to trace, derive or
//! compile (`gradlift::Error::Trace`, `Derive`, ...: the first call's failure is
//! kept, and every later call returns it again). The message reads as Rust's own;
//! for an error of the compiled code it then names the slice and the statement
//! (the Rust `file:line:col` of the read, write, division or call that failed,
//! also inside a `#[differentiable]` helper), and last the function and the line
//! where it is written. The panic's location is `NAME`'s caller:
//!
//! ```text
//! index out of bounds: the len is 5 but the index is 5, reading `x` at src/lib.rs:14:24 (in `nll` at src/lib.rs:10, differentiated by `d_nll`)
//! attempt to divide by zero, at src/lib.rs:22:13 (in `per` at src/lib.rs:21, differentiated by `d_per`)
//! the shadow of `x` has length 2 but `x` has length 3 (in `at` at src/lib.rs:12, differentiated by `d_at`)
//! the derivative of `lost` failed: deriving the rule: ... (in `lost` at src/lib.rs:20, differentiated by `d_lost`)
//! ```
//!
//! `NAME_try`'s `gradlift::Error::Run` carries the same facts as data: the
//! `RunError`'s `pos` (`file`, `line`, `col`) and `operand` (`%x`: the parameters
//! keep their Rust names in the IR).
//!
//! # Dumping the IR
//!
//! With the environment variable `GRADLIFT_DUMP` set to a directory when the first
//! call of `NAME` happens (or a directory given to
//! `gradlift::autodiff::set_dump_dir`, which takes precedence), that call writes
//! the function's IR at each stage into it (creating it if need be), as files that
//! `gradlift::ir::parse` reads back:
//!
//! | file | holds |
//! |---|---|
//! | `NAME.traced.ir` | the traced module, as the body's translation made it |
//! | `NAME.optimized.ir` | the module after gradlift's optimiser |
//! | `NAME.fwd.ir` | the derived forward pass `@f.fwd`, and the functions it calls |
//! | `NAME.rvs.ir` | the derived pullback `@f.rvs`, and the functions it calls |
//!
//! A file that cannot be written is an error of that call (and of every later
//! one), `gradlift::Error::Dump`. A `#[autodiff_forward]` derivative writes
//! `NAME.traced.ir`, `NAME.optimized.ir` and `NAME.jvp.ir` (the forward rule
//! `@f.jvp`, and the functions it calls).
//!
//! # The supported subset
//!
//! The body is translated into gradlift's tracing API (see `docs/tracing.md`):
//!
//! - parameters `f64`, `&[f64]`, `&mut [f64]`, `&mut f64` and (`Const` only) `usize`,
//!   `i64` and `i32`; a result `f64` or `()`;
//! - the same with `f32` instead of `f64` (`Var<f32>` when traced), one float type
//!   per function: `&[f32]` images and weights, an `f32` loss; `NAME`'s shadows,
//!   seed and derivatives are then `f32` too. Literals and `f32::consts` are `f32`;
//! - `let` and `let mut` of one variable (`f64`, integers, `bool`, or another name
//!   for a slice), `=`, `+=`, `-=`, `*=`, `/=`;
//! - `+ - * /` on `f64`, and also `%` on integers; `< <= > >= == !=` (`==` and
//!   `!=` on bools too); `&&`, `||` (short-circuiting, as in Rust), `!`; unary `-`;
//! - `if` / `else if` / `else`, as statements and as expressions, on any condition:
//!   each becomes a real branch (`cond`), carrying the outer variables it assigns;
//! - `for i in a..b` and `a..=b`: a real loop (`for_range`), carrying the outer
//!   variables its body assigns, whatever the trip count; also `(a..b).rev()`,
//!   `for v in x.iter()` (or `&v`, `x.iter().copied()`; `*v` reads it) and
//!   `for (i, v) in x.iter().enumerate()` over a slice `x`, as loops over the index;
//! - `while test { .. }`: a real loop (`while_loop`), the same way;
//! - early exits as statements: `break;` and `continue;` in `for`, `while` and
//!   `loop { .. }`, and `return v;` anywhere (inside loops and branches). They
//!   become flags carried through the loops and branches: the statements after an
//!   exit run under an `if` on the flags, a loop that can be left early tests them
//!   (a `for` over a range becomes a `while_loop` over its index), so what Rust
//!   skips is skipped, and values and derivatives are exact. A `loop` left only by
//!   `return` may end the function, and so may an `if` that returns in every arm;
//! - `x[i]`, `x.len()`, `x[i] = v`, `x[i] += v` (and `-= *= /=`) on slices, `*r`
//!   and `*r = v` on a `&mut f64`;
//! - local buffers `let mut b = vec![v; n];` and `vec![a, b, c]` of f64 (a traced
//!   `alloc`), read and written like slices, with `b.len()`;
//! - `as` between `f64` (or `f32`), `i64`, `i32` and `usize` (`f64 as usize`
//!   saturates at 0, as in Rust);
//! - the float methods `sin cos tan asin acos atan sinh cosh tanh exp exp2 ln log10
//!   log2 sqrt abs floor ceil`, `powi` with an integer literal, `powf max min atan2
//!   hypot` and `mul_add` (fused, as in Rust); float, integer and bool literals;
//!   `f64::consts::PI` and other `f64::` constants;
//! - calls of functions marked `#[differentiable]` (this crate's companion
//!   attribute; their bodies are in the same subset), by name or path: `sq(x)`,
//!   `dot(&a, &b)`, `scale(&mut buf, a)`. Numbers are passed by value, slices
//!   and `vec!` buffers by name or as `&x` / `&mut x`. Each becomes an IR `call`
//!   (gradlift's `func(..).call(..)`), so helpers, recursion and mutual recursion
//!   are differentiated as calls, not inlined. A marked function stays as written
//!   and gains a hidden twin `__gradlift_differentiable_NAME`, which must be in
//!   scope where it is called (calling by path, or importing it with the function).
//!   A function with `#[autodiff_reverse]` that calls itself is marked
//!   `#[differentiable]` too (in either order);
//! - the program's `const`s (and `static`s), read with their type: `let n: usize =
//!   N;`, `N as f64` (a constant of the derivative);
//! - the result as the final expression or a final `return`.
//!
//! ```
//! use gradlift_macros::{autodiff_reverse, differentiable};
//!
//! #[differentiable]
//! fn power(x: f64, n: i64) -> f64 {
//!     if n == 0 { 1.0 } else { x * power(x, n - 1) }
//! }
//!
//! #[autodiff_reverse(d_f, Active, Active)]
//! fn f(x: f64) -> f64 {
//!     power(x, 3) + 1.0
//! }
//!
//! assert_eq!(d_f(2.0, 1.0), (9.0, 12.0));
//! ```
//!
//! # Checkpointing
//!
//! `#[differentiable(checkpoint)]` checkpoints every call to the function: the
//! derivative's forward pass keeps only the call's inputs, not what the
//! function's own reverse needs, and runs the function's forward pass again
//! just before its reverse. The derivative is the same, bit for bit; the memory
//! it holds is smaller when the function saves more than its inputs (a step of a
//! simulation with a loop inside), at the price of running it twice.
//!
//! ```
//! use gradlift_macros::{autodiff_reverse, differentiable};
//!
//! #[differentiable(checkpoint)]
//! fn step(u: f64, dt: f64) -> f64 {
//!     let mut x = u;
//!     for _ in 0..10 {
//!         x += dt * (x - x * x);
//!     }
//!     x
//! }
//!
//! #[autodiff_reverse(d_simulate, Active, Const, Active)]
//! fn simulate(u0: f64, steps: usize) -> f64 {
//!     let mut u = u0;
//!     for _ in 0..steps {
//!         u = step(u, 0.01);
//!     }
//!     u
//! }
//!
//! let (u, du0) = d_simulate(0.5, 100, 1.0);
//! assert_eq!(u, simulate(0.5, 100));
//! // Against a central difference.
//! let h = 1e-6;
//! let fd = (simulate(0.5 + h, 100) - simulate(0.5 - h, 100)) / (2.0 * h);
//! assert!((du0 - fd).abs() < 1e-7 * fd.abs());
//! ```
//!
//! A `for` loop is checkpointed by `checkpoint!(SNAPSHOTS);` right before it: the
//! derivative keeps at most `SNAPSHOTS` snapshots of the values the loop carries
//! instead of every iteration's tape, and runs iterations again as the optimal
//! binomial schedule (revolve) says (`checkpoint!();`: the rule's budget decides,
//! else `ceil(sqrt(n))` snapshots for `n` iterations). Such a loop may not `break`
//! or `return` early, nor write into a slice from outside it (a compile error or
//! an error of `NAME_try` says so). The derivative is the same, bit for bit.
//!
//! ```
//! use gradlift_macros::{autodiff_reverse, checkpoint};
//!
//! #[autodiff_reverse(d_decay, Active, Const, Active)]
//! fn decay(x0: f64, steps: usize) -> f64 {
//!     let mut x = x0;
//!     checkpoint!(8);
//!     for _ in 0..steps {
//!         x -= 0.001 * x * x * x;
//!     }
//!     x
//! }
//!
//! let (x, dx0) = d_decay(1.0, 10_000, 1.0);
//! assert_eq!(x, decay(1.0, 10_000));
//! let h = 1e-6;
//! let fd = (decay(1.0 + h, 10_000) - decay(1.0 - h, 10_000)) / (2.0 * h);
//! assert!((dx0 - fd).abs() < 1e-7);
//! ```
//!
//! # Limits of this version
//!
//! Anything else is a compile error at the offending code, saying what to write
//! instead; in particular other iterators (`for v in x` without `.iter()`,
//! adapters like `map`, `zip`, `step_by`), loop labels, `break` with a value, an
//! exit inside an expression (`let y = if c { x } else { return 0.0 };`, a `loop`
//! whose value is used), other uses of a `Vec` (`push`, `to_vec`, growing), calls
//! of functions not marked `#[differentiable]` (rustc's error: it cannot find
//! `__gradlift_differentiable_NAME`, the twin the attribute would have made), calls
//! of `#[differentiable]` functions returning an integer, methods, `match`, closures, tuples, macros other than `vec!`, both
//! `f32` and `f64` in one function (`as` between them included), and other
//! parameter types. Integers are traced as `i64`: a `usize` subtraction that
//! would underflow (a panic in a debug build) is a negative number in the
//! derivative, `i32` arithmetic does not wrap at 32 bits, and a float cast to
//! `usize` or `i32` saturates at the ends of `i64` (`1e19 as usize` is
//! `i64::MAX`), not of the Rust type.
//! A `Const` writable parameter must not hold a value that depends on an `Active`
//! or `Duplicated` input if the function reads it: gradlift refuses to lose that
//! derivative, and `NAME` panics saying to make it `dup` (the IR's `Duplicated`).
//! A `#[differentiable]` function is an IR function named as the Rust one: two of
//! the same name (from different modules) in one derivative are a tracing error,
//! and `NAME` panics naming the clash; a `()` one is called as a statement.
//!
//! Both attributes translate the same subset, with the same messages (naming the
//! attribute; in a `#[differentiable]` helper, `#[differentiable]`). Two of them
//! (`tests/ui/` has one per message, checked against the compiler's output):
//!
//! ```compile_fail
//! use gradlift_macros::autodiff_reverse;
//! #[autodiff_reverse(df, Active, Active)]
//! fn f(x: f64) -> f64 {
//!     match x > 0.0 { // error: `match` is not supported yet
//!         true => x,
//!         false => -x,
//!     }
//! }
//! ```
//!
//! ```compile_fail
//! use gradlift_macros::autodiff_reverse;
//! #[autodiff_reverse(df, Dual, Dual)] // error: `Dual` is forward mode
//! fn f(x: f64) -> f64 {
//!     x
//! }
//! ```
//!
//! # Forward mode: `#[autodiff_forward]`
//!
//! `#[autodiff_forward(NAME, ACTIVITY..., RETURN_ACTIVITY)]` keeps the function as
//! written and adds `fn NAME`, its forward-mode derivative: the value and the
//! directional derivative along the tangents given with the arguments (a
//! Jacobian-vector product), in one sweep, with the signature rules of
//! `std::autodiff::autodiff_forward`. One activity per parameter, then one for the
//! return (none if the function returns `()`):
//!
//! | activity | parameter | `NAME` takes | `NAME` gives |
//! |---|---|---|---|
//! | `Dual` | `f64`, `&[f64]`, `&mut [f64]`, `&mut f64` | it, then its tangent, of the same type, directly after it | for `&mut`, the tangent of what the function leaves in it, **overwriting** the one given |
//! | `Const` | `f64`, `usize`, `i64`, `i32`, `&[f64]`, `&mut [f64]`, `&mut f64` | the same | nothing |
//! | `Dual` (return) | `-> f64` | nothing more | `(value, tangent)` |
//! | `DualOnly` (return) | `-> f64` | nothing more | the tangent alone |
//! | `Const` (return) | `-> f64` | nothing more | the value alone (tangents through `Dual` `&mut` parameters only) |
//!
//! `Constant` is `Const`, and `DualOnly` on a parameter is `Dual`. The tangent of a
//! `&[f64]` is read only; a slice's tangent has the slice's length. Every `f64`
//! may be `f32`, one float type per function. The reverse mode's activities are a
//! compile error saying to use `#[autodiff_reverse]`, and so is `Dualv` (vector
//! forward mode, several tangents per call): not supported yet.
//!
//! The example of `std::autodiff::autodiff_forward`'s documentation, with only the
//! `use` line changed:
//!
//! ```
//! use gradlift_macros::autodiff_forward;
//!
//! #[autodiff_forward(rb_fwd1, Dual, Const, Dual)]
//! #[autodiff_forward(rb_fwd2, Const, Dual, Dual)]
//! #[autodiff_forward(rb_fwd3, Dual, Dual, Dual)]
//! fn rosenbrock(x: f64, y: f64) -> f64 {
//!     (1.0 - x).powi(2) + 100.0 * (y - x.powi(2)).powi(2)
//! }
//! #[autodiff_forward(rb_inp_fwd, Dual, Dual, Dual)]
//! fn rosenbrock_inp(x: f64, y: f64, out: &mut f64) {
//!     *out = (1.0 - x).powi(2) + 100.0 * (y - x.powi(2)).powi(2);
//! }
//!
//! // fn rb_fwd1(x: f64, dx: f64, y: f64) -> (f64, f64)
//! assert_eq!(rb_fwd1(1.0, 1.0, 3.0), (400.0, -800.0)); // df/dx at (1, 3)
//! assert_eq!(rb_fwd2(1.0, 3.0, 1.0), (400.0, 400.0)); // df/dy
//! // Both seeded: the tangent is the sum, -800 + 400.
//! assert_eq!(rb_fwd3(1.0, 1.0, 3.0, 1.0), (400.0, -400.0));
//! // fn rb_inp_fwd(x: f64, dx: f64, y: f64, dy: f64, out: &mut f64, dout: &mut f64)
//! let (mut out, mut dout) = (0.0, 0.0);
//! rb_inp_fwd(1.0, 1.0, 3.0, 1.0, &mut out, &mut dout);
//! assert_eq!((out, dout), (400.0, -400.0));
//! ```
//!
//! The body is translated as for `#[autodiff_reverse]` (the same subset, the same
//! `#[differentiable]` helpers), and the attributes stack: a function may have
//! several of each, forward and reverse. `NAME_try` takes `NAME`'s arguments and
//! returns `Result<R, gradlift::Error>` (a tangent whose length is not its
//! slice's, a run-time error, a failure to trace, derive or compile), and `NAME`
//! panics with it, worded as above. There is no `NAME_grad`: a forward derivative
//! has no shadows to allocate. The derivative is derived and compiled once per
//! process on its first call (through `gradlift::autodiff`, as a
//! `gradlift::SharedJvp`), each thread calls it with its own state, and after a
//! thread's first calls a call with slices of the same lengths allocates nothing
//! (one whose body allocates a `vec!` buffer may allocate once more on its second
//! call, when the workspace gathers the first call's memory into one block).
//!
//! ```
//! use gradlift_macros::{autodiff_forward, autodiff_reverse};
//!
//! #[autodiff_forward(f_scale, Dual, Dual, Dual)]
//! #[autodiff_reverse(r_scale, Duplicated, Duplicated, Active)]
//! fn scale(x: &[f64], out: &mut [f64], a: f64) {
//!     for i in 0..x.len() {
//!         out[i] = a * x[i];
//!     }
//! }
//!
//! // fn f_scale(x: &[f64], dx: &[f64], out: &mut [f64], dout: &mut [f64], a: f64, da: f64)
//! let (mut out, mut dout) = ([0.0; 2], [0.0; 2]);
//! f_scale(&[1.0, 2.0], &[1.0, 0.0], &mut out, &mut dout, 3.0, 0.5);
//! assert_eq!(out, [3.0, 6.0]);
//! assert_eq!(dout, [3.0 * 1.0 + 0.5 * 1.0, 3.0 * 0.0 + 0.5 * 2.0]); // a dx + x da
//! let e = f_scale_try(&[1.0, 2.0], &[1.0], &mut out, &mut dout, 3.0, 0.5).unwrap_err();
//! assert_eq!(e.to_string(), "the tangent of `x` has length 1 but `x` has length 2");
//! ```
//!
//! Not here yet: vector forward mode (`Dualv`, several tangents per call; at the
//! lower level, `gradlift::CompiledJvp` takes a width), and Jacobians, Hessians and
//! Hessian-vector products (forward over reverse).

// The README's examples run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

mod body;
mod differentiable;
mod sig;

use proc_macro::TokenStream;

/// Adds `NAME`, the reverse-mode derivative of the function (see the
/// [crate docs](crate)).
#[proc_macro_attribute]
pub fn autodiff_reverse(attr: TokenStream, item: TokenStream) -> TokenStream {
    match sig::expand(attr.into(), item.into(), sig::Mode::Reverse) {
        Ok(t) => t.into(),
        Err(e) => e.to_compile_error().into(),
    }
}

/// Adds `NAME`, the forward-mode derivative of the function: its value and
/// directional derivative (see the [crate docs](crate#forward-mode-autodiff_forward)).
#[proc_macro_attribute]
pub fn autodiff_forward(attr: TokenStream, item: TokenStream) -> TokenStream {
    match sig::expand(attr.into(), item.into(), sig::Mode::Forward) {
        Ok(t) => t.into(),
        Err(e) => e.to_compile_error().into(),
    }
}

/// `checkpoint!(SNAPSHOTS);` right before a `for` loop of an
/// `#[autodiff_reverse]` function checkpoints the loop's derivative: it keeps at
/// most `SNAPSHOTS` snapshots of the values the loop carries (`checkpoint!();`:
/// as many as the rule's budget allows, else `ceil(sqrt(n))` for `n` iterations)
/// and runs iterations again as the optimal binomial schedule says. The
/// derivative is the same, bit for bit. Natively the statement does nothing (it
/// only reads `SNAPSHOTS`). See the [crate docs](crate#checkpointing).
#[proc_macro]
pub fn checkpoint(input: TokenStream) -> TokenStream {
    let input = proc_macro2::TokenStream::from(input);
    if input.is_empty() {
        quote::quote!({}).into()
    } else {
        quote::quote!({
            let _ = &(#input);
        })
        .into()
    }
}

/// Makes the function callable from `#[autodiff_reverse]` and `#[autodiff_forward]`
/// bodies (and other `#[differentiable]` ones), as a call in gradlift's IR (see the
/// [crate docs](crate)). The function stays as written.
#[proc_macro_attribute]
pub fn differentiable(attr: TokenStream, item: TokenStream) -> TokenStream {
    match differentiable::expand(attr.into(), item.into()) {
        Ok(t) => t.into(),
        Err(e) => e.to_compile_error().into(),
    }
}
