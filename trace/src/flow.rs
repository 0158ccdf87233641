//! Control flow that runs natively and traces into blocks and phis.
//!
//! Rust's `if` and loops cannot look at a traced condition: they need a `bool` now,
//! and a traced comparison only knows its value when the compiled function runs. So a
//! generic function branches and loops with [`cond`], [`for_range`] and
//! [`while_loop`]. Natively they are an `if`, a `for` and a `while`; traced, each
//! emits real blocks (one copy of the body, whatever the trip count) with one phi per
//! value that flows out of it:
//!
//! | call | IR |
//! |---|---|
//! | `cond(c, \|\| a, \|\| b)` | `br c, then, else`; both arms jump to a join block with one phi per result |
//! | `for_range(start, end, init, \|i, c\| ..)` | `head` (phis for `i` and the carried values, `br i < end`), `body`, `exit` |
//! | `while_loop(init, \|c\| test, \|c\| ..)` | `head` (phis, the test, `br`), `body`, `exit` |
//!
//! Values go in and out through [`Carry`]: a traced scalar, a plain number, `()`,
//! tuples, arrays and `Vec`s of them, nested freely. An arm or a body may use any
//! value from around it (Rust closures capture them); values it makes stay inside
//! unless returned. Using one after the arm or body has ended (leaked through a
//! captured `let mut`) is reported as [`TraceError::OutOfScope`].
//!
//! A plain Rust loop (`for i in 0..3`) over traced values still works: it runs while
//! tracing and records its body once per iteration, unrolled. That is right for a few
//! iterations known when the code is written; for anything that depends on the data
//! or grows with it, use [`for_range`], whose IR has the same size for every `n`.

use gradlift_ir::{Block, CmpPred, Imm, Opcode, Scalar, Type, Value};

use crate::ctx::{self, Slot, Tag, caller, with_frame};
use crate::error::{Loc, TraceError};
use crate::num::{Int, Logic};
use crate::var::{Prim, Var};

/// Values that flow into and out of arms and loops: traced scalars ([`Var`]), plain
/// numbers (`f64`, `f32`, `i64`, `bool`), `()`, tuples (up to 8), arrays and `Vec`s
/// of carried values.
///
/// A plain number is carried as it is: it may not differ between the arms of a
/// [`cond`] or change in a traced loop (it is not part of the IR; lift it with
/// [`Float::lit`](crate::Float::lit) or `Var::from` to make it traced).
pub trait Carry: Sized {
    /// Appends the values of `self`, in order.
    #[doc(hidden)]
    fn flatten(&self, out: &mut Vec<Slot>);
    /// Takes `Self` back from values made by [`Carry::flatten`] (or by control flow
    /// from them).
    #[doc(hidden)]
    fn rebuild(slots: &mut core::slice::Iter<'_, Slot>) -> Self;
}

impl<P: Prim> Carry for Var<P> {
    fn flatten(&self, out: &mut Vec<Slot>) {
        out.push(Slot::Var {
            tag: self.tag,
            value: self.value,
            ty: P::TY,
        });
    }
    fn rebuild(slots: &mut core::slice::Iter<'_, Slot>) -> Self {
        match slots.next() {
            Some(&Slot::Var { tag, value, .. }) => Var::from_parts((tag, value)),
            _ => Var::from_parts((ctx::STALE, Value::from_u32(0))),
        }
    }
}

macro_rules! native_carry {
    ($($t:ident $v:ident $zero:expr;)*) => {$(
        impl Carry for $t {
            fn flatten(&self, out: &mut Vec<Slot>) {
                out.push(Slot::Native(Scalar::$v(*self)));
            }
            fn rebuild(slots: &mut core::slice::Iter<'_, Slot>) -> Self {
                match slots.next() {
                    Some(&Slot::Native(Scalar::$v(x))) => x,
                    _ => $zero,
                }
            }
        }
    )*};
}
native_carry! {
    f64 F64 f64::NAN;
    f32 F32 f32::NAN;
    i64 I64 0;
    bool Bool false;
}

impl Carry for () {
    fn flatten(&self, _: &mut Vec<Slot>) {}
    fn rebuild(_: &mut core::slice::Iter<'_, Slot>) -> Self {}
}

macro_rules! tuple_carry {
    ($($n:tt $t:ident),*) => {
        impl<$($t: Carry),*> Carry for ($($t,)*) {
            fn flatten(&self, out: &mut Vec<Slot>) {
                $(self.$n.flatten(out);)*
            }
            fn rebuild(slots: &mut core::slice::Iter<'_, Slot>) -> Self {
                ($($t::rebuild(slots),)*)
            }
        }
    };
}
tuple_carry!(0 A);
tuple_carry!(0 A, 1 B);
tuple_carry!(0 A, 1 B, 2 C);
tuple_carry!(0 A, 1 B, 2 C, 3 D);
tuple_carry!(0 A, 1 B, 2 C, 3 D, 4 E);
tuple_carry!(0 A, 1 B, 2 C, 3 D, 4 E, 5 F);
tuple_carry!(0 A, 1 B, 2 C, 3 D, 4 E, 5 F, 6 G);
tuple_carry!(0 A, 1 B, 2 C, 3 D, 4 E, 5 F, 6 G, 7 H);

impl<C: Carry, const N: usize> Carry for [C; N] {
    fn flatten(&self, out: &mut Vec<Slot>) {
        for c in self {
            c.flatten(out);
        }
    }
    fn rebuild(slots: &mut core::slice::Iter<'_, Slot>) -> Self {
        core::array::from_fn(|_| C::rebuild(slots))
    }
}

impl<C: Carry> Carry for Vec<C> {
    fn flatten(&self, out: &mut Vec<Slot>) {
        out.push(Slot::Len(self.len()));
        for c in self {
            c.flatten(out);
        }
    }
    fn rebuild(slots: &mut core::slice::Iter<'_, Slot>) -> Self {
        match slots.next() {
            Some(&Slot::Len(n)) => (0..n).map(|_| C::rebuild(slots)).collect(),
            _ => Vec::new(),
        }
    }
}

/// `then()` where `c` holds, `els()` elsewhere; returns what the arm taken returns.
///
/// Natively an `if`. Traced, both arms are traced once, into their own blocks, and
/// each value returned becomes a phi where they join (a value both arms return
/// unchanged stays as it is). The arms must return the same shape: the same number of
/// values in each `Vec`, the same plain numbers.
///
/// ```
/// use gradlift_trace::{Float, Real, cond};
///
/// // |x| as a branch: x where x >= 0, -x elsewhere.
/// fn my_abs<T: Real>(x: T) -> T {
///     cond(x.ge(0.0), || x, || -x)
/// }
/// assert_eq!(my_abs(-2.5), 2.5);
///
/// let traced = gradlift_trace::trace("my_abs", my_abs::<gradlift_trace::Var>).unwrap();
/// let text = traced.module.to_string();
/// assert!(text.contains("br "), "{text}");
/// assert!(text.contains("phi f64"), "{text}");
/// ```
///
/// Arms of different Rust types do not compile (a traced mistake of the same kind,
/// vectors of different lengths, is a [`TraceError::ArmMismatch`]):
///
/// ```compile_fail
/// use gradlift_trace::{Float, Var, cond};
/// fn f(x: Var) -> Var {
///     let n: Var<i64> = Var::from(1);
///     cond(x.gt(0.0), || x, || n) // error: expected `Var<f64>`, found `Var<i64>`
/// }
/// ```
#[track_caller]
pub fn cond<B: Logic, R: Carry>(c: B, then: impl FnOnce() -> R, els: impl FnOnce() -> R) -> R {
    c.cond_impl(then, els)
}

/// A counted loop: `for i in start..end`, threading `init` through the iterations
/// (`body(i, carried)` returns the next carried values); returns the carried values
/// after the last iteration.
///
/// Natively a Rust loop. Traced (the index type is [`Var<i64>`]), a real loop: its
/// IR is one copy of the body whatever `start` and `end` are, with a phi for `i` and
/// one per carried value.
///
/// The index type decides, not whether a trace is running: with plain integer
/// bounds the index is an `i64`, and `for_range(0, 3, ..)` is a Rust loop even
/// while tracing, whose body is recorded once per iteration (unrolled). It is a
/// real loop when the index type is `Var<i64>`: in generic code over
/// [`Real`](crate::Real) (`T::Int`), or when a bound is traced (`x.len()`,
/// `Var::from(3)`). A trace that unrolls too far fails with
/// [`TraceError::TooLarge`] (see [`Tracer::with_max_insts`](crate::Tracer::with_max_insts)).
///
/// ```
/// use gradlift_trace::{Float, Real, SliceRead, for_range};
///
/// fn sumsq<T: Real>(x: T::Slice<'_>) -> T {
///     for_range(0, x.len(), T::lit(0.0), |i, acc| {
///         let xi = x.at(i);
///         acc + xi * xi
///     })
/// }
/// assert_eq!(sumsq::<f64>(&[1.0, 2.0, 3.0]), 14.0);
/// ```
#[track_caller]
pub fn for_range<I: Int, C: Carry>(
    start: impl Into<I>,
    end: I,
    init: C,
    body: impl FnMut(I, C) -> C,
) -> C {
    I::range_loop(start.into(), end, init, body)
}

/// [`for_range`] whose reverse mode is checkpointed: the derivative keeps at
/// most `snapshots` copies of the carried values (at least 1) instead of every
/// iteration's tape, and runs iterations again as Griewank and Walther's optimal
/// binomial schedule (revolve) says; `snapshots` of 0 or less lets the rule choose
/// (its `checkpoint_bytes` budget, else `ceil(sqrt(n))` for `n` iterations). The
/// gradient is bit for bit the gradient of [`for_range`]; see
/// `docs/checkpointing.md` for what such a loop may do (carry scalars, write no
/// slice from outside it, leave only at its end).
///
/// Natively a Rust loop, as [`for_range`]. Traced, the loop's header holds
/// `checkpoint_loop %snapshots`.
///
/// ```
/// use gradlift_trace::{Float, Real, for_range_checkpointed};
///
/// // x_{k+1} = x_k + h sin(x_k), T steps, keeping 8 snapshots at most.
/// fn flow<T: Real>(x0: T, steps: T::Int) -> T {
///     for_range_checkpointed(0, steps, 8, x0, |_, x| x + (x.sin() * 0.01))
/// }
/// let mut x = 1.0_f64;
/// for _ in 0..3 {
///     x = x + x.sin() * 0.01;
/// }
/// assert_eq!(flow(1.0, 3), x);
///
/// let traced = gradlift_trace::trace("flow", flow::<gradlift_trace::Var>).unwrap();
/// assert!(traced.module.to_string().contains("checkpoint_loop 8"));
/// ```
#[track_caller]
pub fn for_range_checkpointed<I: Int, C: Carry>(
    start: impl Into<I>,
    end: I,
    snapshots: impl Into<I>,
    init: C,
    body: impl FnMut(I, C) -> C,
) -> C {
    I::range_loop_checkpointed(start.into(), end, snapshots.into(), init, body)
}

/// A loop with a data-dependent exit: while `cond(&carried)` holds, `carried =
/// body(carried)`; returns the carried values after the last iteration.
///
/// Natively a Rust `while`. Traced (the condition is a [`Var<bool>`]), a real loop:
/// the test in a `head` block with one phi per carried value, then the body.
///
/// ```
/// use gradlift_trace::{Float, Real, while_loop};
///
/// // Halve x until it is below 1; count the steps.
/// fn halvings<T: Real>(x: T) -> (T, T::Int) {
///     while_loop((x, 0.into()), |&(x, _)| x.ge(1.0), |(x, k)| (x * 0.5, k + 1))
/// }
/// assert_eq!(halvings(10.0), (0.625, 4));
/// ```
#[track_caller]
pub fn while_loop<B: Logic, C: Carry>(
    init: C,
    cond: impl FnMut(&C) -> B,
    body: impl FnMut(C) -> C,
) -> C {
    B::while_impl(init, cond, body)
}

/// Checks that every traced value in `slots` may be used here (`op` names the use).
fn check_slots(f: &mut ctx::Frame, slots: &[Slot], op: &'static str, at: Loc) -> bool {
    let mut ok = true;
    for s in slots {
        if let Slot::Var { tag, .. } = *s {
            ok &= f.check(tag, op, at);
        }
    }
    ok
}

/// Why two flattened values cannot be joined, if they cannot.
fn shape_mismatch(a: &[Slot], b: &[Slot]) -> Option<String> {
    for (k, (x, y)) in a.iter().zip(b).enumerate() {
        match (x, y) {
            (Slot::Len(n), Slot::Len(m)) if n != m => {
                return Some(format!(
                    "a vector of {n} values against one of {m} (value {k})"
                ));
            }
            (Slot::Var { ty: t, .. }, Slot::Var { ty: u, .. }) if t != u => {
                return Some(format!("value {k} is {t} against {u}"));
            }
            (Slot::Native(p), Slot::Native(q)) if p.ty() != q.ty() || !same_scalar(*p, *q) => {
                return Some(format!(
                    "value {k} is a plain Rust number, {p} against {q}; plain numbers cannot \
                     depend on traced control flow (make it a traced value)"
                ));
            }
            (Slot::Len(_), Slot::Len(_))
            | (Slot::Var { .. }, Slot::Var { .. })
            | (Slot::Native(_), Slot::Native(_)) => {}
            _ => return Some(format!("value {k} has a different kind")),
        }
    }
    if a.len() != b.len() {
        return Some(format!("{} values against {}", a.len(), b.len()));
    }
    None
}

fn same_scalar(a: Scalar, b: Scalar) -> bool {
    match (a, b) {
        (Scalar::F64(x), Scalar::F64(y)) => x.to_bits() == y.to_bits(),
        (Scalar::F32(x), Scalar::F32(y)) => x.to_bits() == y.to_bits(),
        _ => a == b,
    }
}

/// Joins two flattened values of one shape: each pair of different traced values
/// becomes `make(builder, type, a, b)` (a phi, a select), tagged here; the rest is
/// taken from `a`.
fn join_slots(
    f: &mut ctx::Frame,
    a: &[Slot],
    b: &[Slot],
    mut make: impl FnMut(&mut gradlift_ir::FunctionBuilder<'static>, Type, Value, Value) -> Value,
) -> Vec<Slot> {
    let here = f.here();
    a.iter()
        .zip(b)
        .map(|(x, y)| match (*x, *y) {
            (Slot::Var { value: u, ty, .. }, Slot::Var { value: v, .. }) if u != v => Slot::Var {
                tag: here,
                value: make(&mut f.b, ty, u, v),
                ty,
            },
            _ => *x,
        })
        .collect()
}

/// The traced `cond`.
#[track_caller]
pub(crate) fn traced_cond<R: Carry>(
    c: Var<bool>,
    then: impl FnOnce() -> R,
    els: impl FnOnce() -> R,
) -> R {
    let at = caller();
    let blocks = with_frame(|f| {
        if !f.check(c.tag, "cond", at) || f.error.is_some() {
            return None;
        }
        let t = f.b.create_block("then");
        let e = f.b.create_block("else");
        let j = f.b.create_block("join");
        f.b.br(c.value, t, e);
        f.b.switch_to(t);
        f.open_region();
        Some((e, j))
    })
    .flatten();
    let Some((else_b, join)) = blocks else {
        // No trace, or a mistake already: the result is a placeholder anyway.
        return then();
    };

    let a = then();
    let mut sa = Vec::new();
    a.flatten(&mut sa);
    let then_end = end_arm(&sa, else_b, join, at);

    let b = els();
    let mut sb = Vec::new();
    b.flatten(&mut sb);
    let else_end = end_arm(&sb, join, join, at);

    let merged = with_frame(|f| {
        f.b.move_to_end(join);
        f.b.switch_to(join);
        if let Some(detail) = shape_mismatch(&sa, &sb) {
            let func = f.name.clone();
            f.fail(TraceError::ArmMismatch { func, detail, at });
            return None;
        }
        Some(join_slots(f, &sa, &sb, |b, ty, u, v| {
            b.phi(ty, &[(then_end, u), (else_end, v)])
        }))
    })
    .flatten();
    match merged {
        Some(slots) => R::rebuild(&mut slots.iter()),
        None => a,
    }
}

/// Ends the arm being traced, whose values are `slots`: checks them, closes its
/// region, jumps to `join` and switches to `next`. Returns the block the arm ended in.
fn end_arm(slots: &[Slot], next: Block, join: Block, at: Loc) -> Block {
    with_frame(|f| {
        check_slots(f, slots, "cond", at);
        f.close_region();
        let end = f.b.current_block();
        f.b.jump(join);
        f.b.switch_to(next);
        if next != join {
            f.open_region();
        }
        end
    })
    .unwrap_or(join)
}

/// The traced `select`.
#[track_caller]
pub(crate) fn traced_select<V: Carry>(c: Var<bool>, a: V, b: V) -> V {
    let at = caller();
    let (mut sa, mut sb) = (Vec::new(), Vec::new());
    a.flatten(&mut sa);
    b.flatten(&mut sb);
    let merged = with_frame(|f| {
        if !f.check(c.tag, "select", at)
            || !check_slots(f, &sa, "select", at)
            || !check_slots(f, &sb, "select", at)
        {
            return None;
        }
        if let Some(detail) = shape_mismatch(&sa, &sb) {
            let func = f.name.clone();
            f.fail(TraceError::ArmMismatch { func, detail, at });
            return None;
        }
        Some(join_slots(f, &sa, &sb, |b, _, u, v| {
            b.select(c.value, u, v)
        }))
    })
    .flatten();
    match merged {
        Some(slots) => V::rebuild(&mut slots.iter()),
        None => a,
    }
}

/// A loop being traced: its blocks and the phis of its carried values.
struct Loop {
    head: Block,
    exit: Block,
    /// The carried values as the body and the code after the loop see them: phis for
    /// the traced ones.
    phis: Vec<Slot>,
}

/// Starts a loop in the current block: checks `init`, jumps to a new `head` with one
/// phi per traced value of `init` (plus `extra`, typed, first), and leaves the builder
/// in `head`. Returns the loop and the extra phis.
fn open_loop(
    init: &[Slot],
    extra: &[(Type, Tag, Value)],
    at: Loc,
    op: &'static str,
) -> Option<(Loop, Vec<Value>)> {
    with_frame(|f| {
        let mut ok = check_slots(f, init, op, at);
        for &(_, tag, _) in extra {
            ok &= f.check(tag, op, at);
        }
        if !ok || f.error.is_some() {
            return None;
        }
        let pre = f.b.current_block();
        let head = f.b.create_block("head");
        let exit_placeholder = head;
        f.b.jump(head);
        f.b.switch_to(head);
        let here = f.here();
        let extra = extra
            .iter()
            .map(|&(ty, _, v)| f.b.phi(ty, &[(pre, v)]))
            .collect();
        let phis = init
            .iter()
            .map(|s| match *s {
                Slot::Var { value, ty, .. } => Slot::Var {
                    tag: here,
                    value: f.b.phi(ty, &[(pre, value)]),
                    ty,
                },
                other => other,
            })
            .collect();
        Some((
            Loop {
                head,
                exit: exit_placeholder,
                phis,
            },
            extra,
        ))
    })
    .flatten()
}

/// Ends the body of a loop: checks `next` against the loop's carried values, adds the
/// back edges (`extra_next` for the extra phis first), jumps to `head`, closes the
/// body's region and switches to the exit block.
fn close_loop(lp: &Loop, extra: &[(Value, Value)], next: &[Slot], at: Loc, op: &'static str) {
    with_frame(|f| {
        let ok = check_slots(f, next, op, at);
        if let Some(detail) = shape_mismatch(&lp.phis, next) {
            let func = f.name.clone();
            f.fail(TraceError::CarryMismatch { func, detail, at });
        } else if ok {
            let latch = f.b.current_block();
            for &(phi, v) in extra {
                f.b.add_incoming(phi, latch, v);
            }
            for (p, n) in lp.phis.iter().zip(next) {
                if let (Slot::Var { value: phi, .. }, Slot::Var { value: v, .. }) = (*p, *n) {
                    f.b.add_incoming(phi, latch, v);
                }
            }
        }
        f.b.jump(lp.head);
        f.close_region();
        f.b.move_to_end(lp.exit);
        f.b.switch_to(lp.exit);
    });
}

/// The traced `for_range`.
#[track_caller]
pub(crate) fn traced_for<C: Carry>(
    start: Var<i64>,
    end: Var<i64>,
    snapshots: Option<Var<i64>>,
    init: C,
    mut body: impl FnMut(Var<i64>, C) -> C,
) -> C {
    let at = caller();
    let mut si = Vec::new();
    init.flatten(&mut si);
    let extra = [(Type::I64, start.tag, start.value)];
    let Some((mut lp, ivals)) = open_loop(&si, &extra, at, "for_range") else {
        return body(start, init);
    };
    let i = ivals[0];
    with_frame(|f| {
        if !f.check(end.tag, "for_range", at) {
            return;
        }
        if let Some(s) = snapshots {
            if !f.check(s.tag, "for_range_checkpointed", at) {
                return;
            }
            f.b.ins(Opcode::CheckpointLoop, Imm::None, &[s.value]);
        }
        let more = f.b.icmp(CmpPred::Lt, i, end.value);
        let body_b = f.b.create_block("body");
        lp.exit = f.b.create_block("exit");
        f.b.br(more, body_b, lp.exit);
        f.b.switch_to(body_b);
        f.open_region();
    });
    let iv = Var::from_parts((with_frame(|f| outer_tag(f)).unwrap_or(ctx::STALE), i));
    let carried = C::rebuild(&mut lp.phis.iter());
    let next = body(iv, carried);
    let mut sn = Vec::new();
    next.flatten(&mut sn);
    let i1 = with_frame(|f| {
        let one = f.b.iconst(1);
        f.b.iadd(i, one)
    });
    let extra: Vec<(Value, Value)> = i1.map(|v| (i, v)).into_iter().collect();
    close_loop(&lp, &extra, &sn, at, "for_range");
    C::rebuild(&mut lp.phis.iter())
}

/// The tag of the region around the innermost one: where a loop's phis live.
fn outer_tag(f: &ctx::Frame) -> Tag {
    let n = f.regions.len();
    Tag {
        trace: f.id,
        region: if n >= 2 { f.regions[n - 2] } else { 0 },
    }
}

/// The traced `while_loop`.
#[track_caller]
pub(crate) fn traced_while<C: Carry>(
    init: C,
    mut cond: impl FnMut(&C) -> Var<bool>,
    mut body: impl FnMut(C) -> C,
) -> C {
    let at = caller();
    let mut si = Vec::new();
    init.flatten(&mut si);
    let Some((mut lp, _)) = open_loop(&si, &[], at, "while_loop") else {
        // No trace, or a mistake already: go through the motions once.
        let _ = cond(&init);
        return body(init);
    };
    with_frame(|f| f.open_region());
    let carried = C::rebuild(&mut lp.phis.iter());
    let c = cond(&carried);
    with_frame(|f| {
        let ok = f.check(c.tag, "while_loop", at);
        f.close_region();
        let body_b = f.b.create_block("body");
        lp.exit = f.b.create_block("exit");
        if ok {
            f.b.br(c.value, body_b, lp.exit);
        } else {
            f.b.jump(lp.exit);
        }
        f.b.switch_to(body_b);
        f.open_region();
    });
    let next = body(carried);
    let mut sn = Vec::new();
    next.flatten(&mut sn);
    close_loop(&lp, &[], &sn, at, "while_loop");
    C::rebuild(&mut lp.phis.iter())
}
