//! Traced functions: the [`Tracer`] that records Rust functions into a module, calls
//! between traced functions ([`func`] and [`Func::call`]), and custom derivatives.
//!
//! A function is traced once per IR name: the first call of [`Func::call`] (or
//! [`Tracer::function`]) declares it with the signature its Rust types give, traces
//! its body with fresh parameters, and defines it; every call emits an IR `call`.
//! Because the declaration comes first, a function that calls itself traces: the
//! inner call finds it declared and emits a `call`, so recursion is a real recursive
//! call in the IR, however deep it runs.
//!
//! Natively (no traced argument or result), [`Func::call`] just calls the function.
//!
//! A function is traced once per name, so what a closure captures is baked in at its
//! first trace: a closure that captures a plain number and is called under one name
//! with different numbers computes with the first. Two different closures (or
//! functions) under one name are an error ([`TraceError::NameClash`]).

use core::marker::PhantomData;
use std::sync::Arc;

use gradlift_ir::{Decl, FuncId, FunctionBuilder, Module, Pos, Signature, Type, Value, verify};
use gradlift_ir::{Hosts, Val};

use crate::ctx::{self, Entry, Frame, Session, Slot, Tag, caller, with_frame, with_session};
use crate::error::{Loc, TraceError};
use crate::slice::{ElemPrim, Slice, SliceMut};
use crate::var::{Prim, Var};

/// A parameter of a traced function: a traced scalar or slice. Plain Rust values
/// (`f64`, `&[f64]`, ...) are parameters too, of the same function running natively;
/// traced, they are an error ([`TraceError::NotTraced`]).
pub trait Param: Sized {
    /// Whether this is a traced type.
    #[doc(hidden)]
    const TRACED: bool;
    /// The IR type, or `None` for a plain Rust value.
    #[doc(hidden)]
    fn ir_type() -> Option<Type>;
    /// The value as an argument (traced values only).
    #[doc(hidden)]
    fn arg(&self) -> Option<(Tag, Value)>;
    /// A parameter value of a function being traced.
    #[doc(hidden)]
    fn from_ir(tag: Tag, value: Value) -> Self;
}

/// What a traced function returns: a traced scalar, `()`, or a tuple of traced
/// scalars (up to 4). Plain Rust numbers are results of the function running natively.
pub trait Ret: Sized {
    /// Whether any result is of a traced type.
    #[doc(hidden)]
    const TRACED: bool;
    /// Appends the IR types of the results (`None` for a plain Rust value).
    #[doc(hidden)]
    fn ir_types(out: &mut Vec<Option<Type>>);
    /// Appends the results as values.
    #[doc(hidden)]
    fn slots(&self, out: &mut Vec<Slot>);
    /// The results of a call, from its values.
    #[doc(hidden)]
    fn from_ir(tag: Tag, values: &mut dyn Iterator<Item = Value>) -> Self;
}

impl<P: Prim> Param for Var<P> {
    const TRACED: bool = true;
    fn ir_type() -> Option<Type> {
        Some(P::TY)
    }
    fn arg(&self) -> Option<(Tag, Value)> {
        Some(self.operand())
    }
    fn from_ir(tag: Tag, value: Value) -> Self {
        Var::from_parts((tag, value))
    }
}

impl<P: ElemPrim> Param for Slice<P> {
    const TRACED: bool = true;
    fn ir_type() -> Option<Type> {
        Some(Type::slice(P::ELEM))
    }
    fn arg(&self) -> Option<(Tag, Value)> {
        Some((self.tag, self.value))
    }
    fn from_ir(tag: Tag, value: Value) -> Self {
        Slice::from_parts((tag, value))
    }
}

impl<P: ElemPrim> Param for SliceMut<P> {
    const TRACED: bool = true;
    fn ir_type() -> Option<Type> {
        Some(Type::slice_mut(P::ELEM))
    }
    fn arg(&self) -> Option<(Tag, Value)> {
        Some((self.tag, self.value))
    }
    fn from_ir(tag: Tag, value: Value) -> Self {
        SliceMut::from_parts((tag, value))
    }
}

macro_rules! native_param {
    ($($t:ty => $placeholder:expr;)*) => {$(
        impl Param for $t {
            const TRACED: bool = false;
            fn ir_type() -> Option<Type> {
                None
            }
            fn arg(&self) -> Option<(Tag, Value)> {
                None
            }
            fn from_ir(_: Tag, _: Value) -> Self {
                $placeholder
            }
        }
    )*};
}
native_param! {
    f64 => f64::NAN;
    f32 => f32::NAN;
    i64 => 0;
    bool => false;
    &[f64] => &[];
    &[f32] => &[];
    &[i64] => &[];
    &mut [f64] => &mut [];
    &mut [f32] => &mut [];
    &mut [i64] => &mut [];
}

impl<P: Prim> Ret for Var<P> {
    const TRACED: bool = true;
    fn ir_types(out: &mut Vec<Option<Type>>) {
        out.push(Some(P::TY));
    }
    fn slots(&self, out: &mut Vec<Slot>) {
        out.push(Slot::Var {
            tag: self.tag,
            value: self.value,
            ty: P::TY,
        });
    }
    fn from_ir(tag: Tag, values: &mut dyn Iterator<Item = Value>) -> Self {
        Var::from_parts((tag, values.next().unwrap_or(Value::from_u32(0))))
    }
}

macro_rules! native_ret {
    ($($t:ty => $placeholder:expr;)*) => {$(
        impl Ret for $t {
            const TRACED: bool = false;
            fn ir_types(out: &mut Vec<Option<Type>>) {
                out.push(None);
            }
            fn slots(&self, _: &mut Vec<Slot>) {}
            fn from_ir(_: Tag, values: &mut dyn Iterator<Item = Value>) -> Self {
                values.next();
                $placeholder
            }
        }
    )*};
}
native_ret! {
    f64 => f64::NAN;
    f32 => f32::NAN;
    i64 => 0;
    bool => false;
}

impl Ret for () {
    const TRACED: bool = false;
    fn ir_types(_: &mut Vec<Option<Type>>) {}
    fn slots(&self, _: &mut Vec<Slot>) {}
    fn from_ir(_: Tag, _: &mut dyn Iterator<Item = Value>) -> Self {}
}

macro_rules! tuple_ret {
    ($($n:tt $t:ident),*) => {
        impl<$($t: Ret),*> Ret for ($($t,)*) {
            const TRACED: bool = false $(|| $t::TRACED)*;
            fn ir_types(out: &mut Vec<Option<Type>>) {
                $($t::ir_types(out);)*
            }
            fn slots(&self, out: &mut Vec<Slot>) {
                $(self.$n.slots(out);)*
            }
            fn from_ir(tag: Tag, values: &mut dyn Iterator<Item = Value>) -> Self {
                ($($t::from_ir(tag, values),)*)
            }
        }
    };
}
tuple_ret!(0 A, 1 B);
tuple_ret!(0 A, 1 B, 2 C);
tuple_ret!(0 A, 1 B, 2 C, 3 D);

/// The arguments of a traced function, as a tuple of [`Param`]s.
pub trait Args: Sized {
    /// Whether any argument is of a traced type.
    #[doc(hidden)]
    const TRACED: bool;
    /// The IR types (`None` for plain Rust values).
    #[doc(hidden)]
    fn ir_types() -> Vec<Option<Type>>;
    /// The traced arguments, in order.
    #[doc(hidden)]
    fn args(&self) -> Vec<Option<(Tag, Value)>>;
    /// Parameter values of a function being traced.
    #[doc(hidden)]
    fn from_ir(tag: Tag, values: &[Value]) -> Self;
}

/// A Rust function or closure of [`Args`] `A` that can be traced: any
/// `Fn(A1, ..., An) -> R` (up to 8 parameters) of [`Param`]s returning a [`Ret`].
pub trait Callable<A: Args> {
    /// What it returns.
    type Output: Ret;
    /// Calls it.
    fn invoke(&self, args: A) -> Self::Output;
}

macro_rules! arity {
    ($($n:tt $t:ident),*) => {
        impl<$($t: Param),*> Args for ($($t,)*) {
            const TRACED: bool = false $(|| $t::TRACED)*;
            fn ir_types() -> Vec<Option<Type>> {
                vec![$($t::ir_type()),*]
            }
            #[allow(clippy::vec_init_then_push)]
            fn args(&self) -> Vec<Option<(Tag, Value)>> {
                vec![$(self.$n.arg()),*]
            }
            #[allow(unused_variables, clippy::unused_unit)]
            fn from_ir(tag: Tag, values: &[Value]) -> Self {
                ($($t::from_ir(tag, values.get($n).copied().unwrap_or(Value::from_u32(0))),)*)
            }
        }
        impl<Fun, Out: Ret, $($t: Param),*> Callable<($($t,)*)> for Fun
        where
            Fun: Fn($($t),*) -> Out,
        {
            type Output = Out;
            #[allow(non_snake_case)]
            fn invoke(&self, ($($t,)*): ($($t,)*)) -> Out {
                self($($t),*)
            }
        }
    };
}
arity!();
arity!(0 A);
arity!(0 A, 1 B);
arity!(0 A, 1 B, 2 C);
arity!(0 A, 1 B, 2 C, 3 D);
arity!(0 A, 1 B, 2 C, 3 D, 4 E);
arity!(0 A, 1 B, 2 C, 3 D, 4 E, 5 F);
arity!(0 A, 1 B, 2 C, 3 D, 4 E, 5 F, 6 G);
arity!(0 A, 1 B, 2 C, 3 D, 4 E, 5 F, 6 G, 7 H);

/// The signature of a traced function of Rust type `F`, or the first parameter or
/// result that is not traced.
fn signature<A: Args, F: Callable<A>>(name: &str) -> Result<Signature, TraceError> {
    let not_traced = |what: String| TraceError::NotTraced {
        func: name.to_string(),
        what,
    };
    let params = A::ir_types();
    let mut results = Vec::new();
    F::Output::ir_types(&mut results);
    let rust_params = param_names::<A>();
    let mut sig = Signature::new([], []);
    for (k, t) in params.into_iter().enumerate() {
        match t {
            Some(t) => sig.params.push(t),
            None => {
                let ty = rust_params.get(k).copied().unwrap_or("?");
                return Err(not_traced(format!("parameter {} ({ty})", k + 1)));
            }
        }
    }
    for (k, t) in results.into_iter().enumerate() {
        match t {
            Some(t) => sig.results.push(t),
            None => {
                let ty = core::any::type_name::<F::Output>();
                return Err(not_traced(format!("result {} (of {ty})", k + 1)));
            }
        }
    }
    Ok(sig)
}

fn param_names<A>() -> Vec<&'static str> {
    // `(f64, gradlift_trace::var::Var)`: good enough to name a parameter's type.
    let t = core::any::type_name::<A>();
    let inner = t
        .strip_prefix('(')
        .and_then(|t| t.strip_suffix(')'))
        .unwrap_or(t);
    inner.split(", ").collect()
}

/// What a [`Func`] declares for differentiation, besides the function itself.
pub trait Deriv {
    /// What it is, to tell two declarations of one function apart: `""` for none,
    /// `"nodiff"`, or the name of the overlay or vjp function.
    #[doc(hidden)]
    fn describe(&self) -> &'static str;
    /// Declares it for the function `id` (named `name`, signature `sig`), just traced.
    #[doc(hidden)]
    fn declare(&self, name: &str, id: FuncId, sig: &Signature);
}

/// No custom derivative: derivatives go through the body.
pub struct Plain;

impl Deriv for Plain {
    fn describe(&self) -> &'static str {
        ""
    }
    fn declare(&self, _: &str, _: FuncId, _: &Signature) {}
}

/// `nodiff`: the results are constants to differentiation ([`Func::nodiff`]).
pub struct Nodiff;

impl Deriv for Nodiff {
    fn describe(&self) -> &'static str {
        "nodiff"
    }
    fn declare(&self, _: &str, id: FuncId, _: &Signature) {
        with_session(|s| s.module.add_decl(Decl::Nodiff { func: id }, Pos::NONE));
    }
}

/// `overlay`: derivatives through another function's body ([`Func::overlay`]).
pub struct Overlay<G, A> {
    name: &'static str,
    g: G,
    _a: PhantomData<fn(A)>,
}

impl<G: Callable<A>, A: Args> Deriv for Overlay<G, A> {
    fn describe(&self) -> &'static str {
        self.name
    }
    fn declare(&self, name: &str, id: FuncId, sig: &Signature) {
        let Some((with, gsig)) = define::<A, G, _>(self.name, &self.g, &Plain) else {
            return;
        };
        with_session(|s| {
            if gsig != *sig {
                s.fail(TraceError::CustomRule {
                    func: name.to_string(),
                    detail: format!(
                        "the overlay @{} has signature {}, not the function's {}",
                        self.name, gsig, sig
                    ),
                });
            } else {
                s.module
                    .add_decl(Decl::Overlay { func: id, with }, Pos::NONE);
            }
        });
    }
}

/// `vjp`: a custom derivative, traced from a Rust function ([`Func::vjp`]).
pub struct Vjp<G, A> {
    name: &'static str,
    g: G,
    _a: PhantomData<fn(A)>,
}

/// The signature a vjp of `sig` must have ([`verify::vjp_signature`]): the
/// parameters (a `mut` slice read-only), one shadow `mut` slice per float slice,
/// one cotangent per float result; returning one cotangent per float scalar.
fn vjp_signature(sig: &Signature) -> Signature {
    verify::vjp_signature(sig)
}

/// Scalar parameters only, for the native rules of [`Func::vjp_native`].
fn scalar_vjp_signature(sig: &Signature) -> Result<Signature, String> {
    if let Some(t) = sig.params.iter().find(|t| !t.is_scalar()) {
        return Err(format!(
            "a native vjp of f64 numbers needs scalar parameters only, and this function \
             takes {t} (use `vjp_host` for a rule over slices)"
        ));
    }
    Ok(vjp_signature(sig))
}

impl<G: Callable<A>, A: Args> Deriv for Vjp<G, A> {
    fn describe(&self) -> &'static str {
        self.name
    }
    fn declare(&self, name: &str, id: FuncId, sig: &Signature) {
        let want = vjp_signature(sig);
        let Some((rule, gsig)) = define::<A, G, _>(self.name, &self.g, &Plain) else {
            return;
        };
        with_session(|s| {
            if gsig != want {
                s.fail(TraceError::CustomRule {
                    func: name.to_string(),
                    detail: format!(
                        "the vjp @{} has signature {}, but must have {} (the parameters, a \
                         `mut` slice read-only; one shadow `mut` slice per float slice; one \
                         cotangent per float result; returning one cotangent per float scalar)",
                        self.name, gsig, want
                    ),
                });
            } else {
                s.module.add_decl(Decl::Vjp { func: id, rule }, Pos::NONE);
            }
        });
    }
}

/// `vjp` by a native Rust function, bound as a host function ([`Func::vjp_native`]).
pub struct VjpNative<H> {
    name: &'static str,
    h: Arc<H>,
}

impl<H> Deriv for VjpNative<H>
where
    H: Fn(&[f64], &[f64], &mut [f64]) + Send + Sync + 'static,
{
    fn describe(&self) -> &'static str {
        self.name
    }
    fn declare(&self, name: &str, id: FuncId, sig: &Signature) {
        let want = scalar_vjp_signature(sig).and_then(|w| {
            if w.params.iter().all(|&t| t == Type::F64) {
                Ok(w)
            } else {
                Err("a native vjp takes f64 parameters and results only".to_string())
            }
        });
        let want = match want {
            Ok(w) => w,
            Err(detail) => {
                with_session(|s| {
                    s.fail(TraceError::CustomRule {
                        func: name.to_string(),
                        detail,
                    })
                });
                return;
            }
        };
        let nparams = sig.params.len();
        let nout = want.results.len();
        let h = Arc::clone(&self.h);
        let host = move |args: &mut [Val]| {
            let mut xs = Vec::with_capacity(args.len());
            for a in args.iter() {
                match a {
                    Val::F64(x) => xs.push(*x),
                    other => return Err(format!("expected f64 arguments, got {other:?}")),
                }
            }
            let (x, dy) = xs.split_at(nparams.min(xs.len()));
            let mut out = vec![0.0; nout];
            h(x, dy, &mut out);
            Ok(out.into_iter().map(Val::F64).collect())
        };
        with_session(|s| match s.module.declare_extern(self.name, want) {
            Ok(rule) => {
                s.module.add_decl(Decl::Vjp { func: id, rule }, Pos::NONE);
                s.hosts.insert(self.name, host);
            }
            Err(e) => s.fail(e.into()),
        });
    }
}

/// `vjp` by a host function over [`Val`]s, slices included ([`Func::vjp_host`]).
pub struct VjpHost<H> {
    name: &'static str,
    h: Arc<H>,
}

impl<H> Deriv for VjpHost<H>
where
    H: Fn(&mut [Val]) -> Result<Vec<Val>, String> + Send + Sync + 'static,
{
    fn describe(&self) -> &'static str {
        self.name
    }
    fn declare(&self, _name: &str, id: FuncId, sig: &Signature) {
        let want = vjp_signature(sig);
        let h = Arc::clone(&self.h);
        with_session(|s| match s.module.declare_extern(self.name, want) {
            Ok(rule) => {
                s.module.add_decl(Decl::Vjp { func: id, rule }, Pos::NONE);
                s.hosts.insert(self.name, move |a: &mut [Val]| h(a));
            }
            Err(e) => s.fail(e.into()),
        });
    }
}

/// A Rust function to be called as an IR function named `name`, with optional custom
/// derivatives. Make one with [`func`]; call it with [`Func::call`].
pub struct Func<F, D = Plain> {
    name: &'static str,
    f: F,
    deriv: D,
    checkpoint: bool,
}

/// The Rust function `f`, called as the IR function `@name` when traced (natively,
/// just `f`). In generic code, name the instance: `func("sq", sq::<T>)`.
///
/// ```
/// use gradlift_trace::{Real, func};
///
/// fn sq<T: Real>(x: T) -> T {
///     x * x
/// }
/// fn f<T: Real>(x: T, y: T) -> T {
///     func("sq", sq::<T>).call((x,)) + func("sq", sq::<T>).call((y,))
/// }
/// assert_eq!(f(3.0, 4.0), 25.0);
///
/// let traced = gradlift_trace::trace("f", f::<gradlift_trace::Var>).unwrap();
/// let text = traced.module.to_string();
/// assert!(text.contains("func @sq(%0: f64) -> f64"), "{text}");
/// assert_eq!(text.matches("call @sq").count(), 2, "{text}");
/// ```
pub fn func<F>(name: &'static str, f: F) -> Func<F> {
    Func {
        name,
        f,
        deriv: Plain,
        checkpoint: false,
    }
}

impl<F> Func<F, Plain> {
    /// Declares the function `nodiff`: its results are constants to differentiation.
    pub fn nodiff(self) -> Func<F, Nodiff> {
        Func {
            name: self.name,
            f: self.f,
            deriv: Nodiff,
            checkpoint: self.checkpoint,
        }
    }

    /// Differentiates calls through `g` (traced as `@name`, same signature) instead of
    /// through the function's own body; the value still comes from the function.
    pub fn overlay<G: Callable<A>, A: Args>(
        self,
        name: &'static str,
        g: G,
    ) -> Func<F, Overlay<G, A>> {
        Func {
            name: self.name,
            f: self.f,
            deriv: Overlay {
                name,
                g,
                _a: PhantomData,
            },
            checkpoint: self.checkpoint,
        }
    }

    /// A custom derivative traced from `g` (as `@name`): `g` takes the function's
    /// parameters (scalars only), then one cotangent per float result, and returns one
    /// cotangent per float parameter.
    pub fn vjp<G: Callable<A>, A: Args>(self, name: &'static str, g: G) -> Func<F, Vjp<G, A>> {
        Func {
            name: self.name,
            f: self.f,
            deriv: Vjp {
                name,
                g,
                _a: PhantomData,
            },
            checkpoint: self.checkpoint,
        }
    }

    /// A custom derivative computed by a host function (the protocol of
    /// [`Hosts::bind`](gradlift_ir::Hosts::bind)), for functions of any
    /// parameters, slices included: `h` gets the arguments as they were at the
    /// call (slices as `Val::F64s`, ...), then one shadow per float slice
    /// parameter, then the cotangents of the float results; it adds the slices'
    /// cotangents into the shadows (for a `mut` slice: replaces the cotangent of
    /// its contents after the call by that of its contents before) and returns
    /// the cotangents of the float scalar parameters. It becomes an
    /// `extern @name` of the traced module ([`Traced::hosts`] binds it), with the
    /// signature of a `vjp` rule (`docs/ir-text.md`, "vjp").
    ///
    /// ```
    /// use gradlift_ir::Val;
    /// use gradlift_trace::prelude::*;
    /// use gradlift_trace::trace;
    ///
    /// // dot(a, b) = sum a_i b_i ...
    /// fn dot<T: Real>(a: T::Slice<'_>, b: T::Slice<'_>) -> T {
    ///     for_range(0, a.len(), T::lit(0.0), |i, acc| acc + a.at(i) * b.at(i))
    /// }
    /// // ... and its rule: da += dy b, db += dy a (no float scalar parameter).
    /// fn dot_vjp(v: &mut [Val]) -> Result<Vec<Val>, String> {
    ///     match v {
    ///         [Val::F64s(a), Val::F64s(b), Val::F64s(da), Val::F64s(db), Val::F64(dy)] => {
    ///             for i in 0..a.len() {
    ///                 da[i] += *dy * b[i];
    ///                 db[i] += *dy * a[i];
    ///             }
    ///             Ok(vec![])
    ///         }
    ///         _ => Err("dot_vjp takes two slices, two shadows and a cotangent".into()),
    ///     }
    /// }
    /// let traced = trace("f", |a: Slice<f64>, b: Slice<f64>| {
    ///     func("dot", dot::<Var>).vjp_host("dot_vjp", dot_vjp).call((a, b))
    /// })?;
    /// let text = traced.module.to_string();
    /// assert!(text.contains("extern @dot_vjp([f64], [f64], mut [f64], mut [f64], f64)"), "{text}");
    /// assert!(text.contains("vjp @dot = @dot_vjp"), "{text}");
    /// assert!(traced.hosts.get("dot_vjp").is_some());
    /// # Ok::<(), gradlift_trace::TraceError>(())
    /// ```
    pub fn vjp_host<H>(self, name: &'static str, h: H) -> Func<F, VjpHost<H>>
    where
        H: Fn(&mut [Val]) -> Result<Vec<Val>, String> + Send + Sync + 'static,
    {
        Func {
            name: self.name,
            f: self.f,
            deriv: VjpHost {
                name,
                h: Arc::new(h),
            },
            checkpoint: self.checkpoint,
        }
    }

    /// A custom derivative computed by native Rust: `h(x, dy, dx)` gets the
    /// parameters `x` (`f64` scalars only) and the cotangents `dy` of the float
    /// results, and writes the cotangents `dx` of the float parameters. It becomes an
    /// `extern @name` of the traced module, whose host function
    /// ([`Traced::hosts`]) calls `h`.
    pub fn vjp_native<H>(self, name: &'static str, h: H) -> Func<F, VjpNative<H>>
    where
        H: Fn(&[f64], &[f64], &mut [f64]) + Send + Sync + 'static,
    {
        Func {
            name: self.name,
            f: self.f,
            deriv: VjpNative {
                name,
                h: Arc::new(h),
            },
            checkpoint: self.checkpoint,
        }
    }
}

impl<F, D: Deriv> Func<F, D> {
    /// Checkpoints every call made through this `Func` (`call @name(..)
    /// checkpoint` in the IR): reverse mode keeps the call's inputs instead of the
    /// callee's tape, and runs the callee's forward pass again, just before its
    /// reverse. The gradient is the same, bit for bit; the tape between the call
    /// and its reverse is smaller when the callee saves more than its inputs (a
    /// step of a simulation with a loop inside, say), at the price of running the
    /// callee twice. Natively, nothing changes.
    ///
    /// ```
    /// use gradlift_trace::{Real, func};
    ///
    /// fn step<T: Real>(x: T) -> T {
    ///     (x * x).sin() + x
    /// }
    /// fn f<T: Real>(x: T) -> T {
    ///     let step = func("step", step::<T>).checkpoint();
    ///     step.call((step.call((x,)),))
    /// }
    /// let traced = gradlift_trace::trace("f", f::<gradlift_trace::Var>).unwrap();
    /// let text = traced.module.to_string();
    /// assert_eq!(text.matches(") checkpoint").count(), 2, "{text}");
    /// ```
    pub fn checkpoint(mut self) -> Self {
        self.checkpoint = true;
        self
    }

    /// Calls the function: natively `f(args)`; traced, an IR `call` of `@name`, traced
    /// on first use (with its custom derivative).
    #[track_caller]
    pub fn call<A: Args>(&self, args: A) -> F::Output
    where
        F: Callable<A>,
    {
        if !A::TRACED && !F::Output::TRACED {
            return self.f.invoke(args);
        }
        let at = caller();
        let placeholder = || F::Output::from_ir(ctx::STALE, &mut core::iter::empty());
        let Some((id, sig)) = define::<A, F, _>(self.name, &self.f, &self.deriv) else {
            return placeholder();
        };
        emit_call::<F::Output>(id, &sig, &args.args(), at, self.checkpoint)
            .unwrap_or_else(placeholder)
    }
}

/// Emits `call @id(args)` in the innermost frame.
fn emit_call<R: Ret>(
    id: FuncId,
    sig: &Signature,
    args: &[Option<(Tag, Value)>],
    at: Loc,
    checkpoint: bool,
) -> Option<R> {
    with_frame(|f| {
        let mut vals = Vec::with_capacity(args.len());
        let mut ok = true;
        for a in args {
            match *a {
                Some((tag, v)) => {
                    ok &= f.check(tag, "call", at);
                    vals.push(v);
                }
                None => ok = false,
            }
        }
        if !ok || f.error.is_some() {
            return None;
        }
        f.b.declare_callee(id, sig.clone());
        f.b.set_pos(ctx::pos(at));
        let results = if checkpoint {
            f.b.call_checkpointed(id, &vals)
        } else {
            f.b.call(id, &vals)
        };
        f.b.set_pos(gradlift_ir::Pos::NONE);
        let here = f.here();
        Some(R::from_ir(here, &mut results.into_iter()))
    })
    .flatten()
}

/// Declares `@name` for `f` and traces its body, unless that was done already.
/// Returns its id and signature; `None` after a mistake (recorded in the session).
#[track_caller]
fn define<A: Args, F: Callable<A>, D: Deriv>(
    name: &str,
    f: &F,
    deriv: &D,
) -> Option<(FuncId, Signature)> {
    let rust = core::any::type_name::<F>();
    let ty = typeid::of::<F>();
    let dty = typeid::of::<D>();
    let dname = deriv.describe();
    let sig = match signature::<A, F>(name) {
        Ok(s) => s,
        Err(e) => {
            with_session(|s| s.fail(e));
            return None;
        }
    };
    // Known already (traced, or being traced: a recursive call)?
    let known = with_session(|s| -> Result<Option<FuncId>, TraceError> {
        if let Some(e) = s.entries.get(name) {
            if e.ty != ty {
                let detail = if e.rust == rust {
                    format!("two different closures or functions of type {rust}")
                } else {
                    format!("first {}, then {rust}", e.rust)
                };
                return Err(TraceError::NameClash {
                    name: name.to_string(),
                    detail,
                });
            }
            if e.deriv != dty || e.deriv_name != dname {
                let show = |d: &str| match d {
                    "" => "no custom derivative".to_string(),
                    "nodiff" => "nodiff".to_string(),
                    d => format!("the custom derivative @{d}"),
                };
                return Err(TraceError::NameClash {
                    name: name.to_string(),
                    detail: format!(
                        "called with {} and with {}; declare it one way everywhere",
                        show(e.deriv_name),
                        show(dname)
                    ),
                });
            }
            return Ok(Some(e.id));
        }
        let id = s.module.declare(name, sig.clone())?;
        s.entries.insert(
            name.to_string(),
            Entry {
                id,
                ty,
                rust,
                deriv: dty,
                deriv_name: dname,
            },
        );
        let b = FunctionBuilder::detached(name, sig.clone());
        s.frames.push(Frame::new(name, b, s.max_insts));
        Ok(None)
    })?;
    match known {
        Ok(Some(id)) => return Some((id, sig)),
        Ok(None) => {}
        Err(e) => {
            with_session(|s| s.fail(e));
            return None;
        }
    }

    // Trace the body in the new frame.
    let params = with_frame(|fr| {
        let tag = fr.here();
        let n = fr.b.sig().params.len();
        let vals: Vec<Value> = (0..n).map(|i| fr.b.param(i)).collect();
        (tag, vals)
    })?;
    let out = f.invoke(A::from_ir(params.0, &params.1));
    let mut slots = Vec::new();
    out.slots(&mut slots);
    let at = caller();
    let id = with_session(|s| {
        let mut frame = s.frames.pop()?;
        let mut vals = Vec::with_capacity(slots.len());
        for slot in &slots {
            if let Slot::Var { tag, value, .. } = *slot {
                frame.check(tag, "return", at);
                vals.push(value);
            }
        }
        frame.b.ret(&vals);
        let id = s.entries.get(name).map(|e| e.id)?;
        if let Some(e) = frame.error.take() {
            s.fail(e);
            return None;
        }
        match frame.b.finish() {
            Ok(func) => {
                if let Err(e) = s.module.define(id, func) {
                    s.fail(e.into());
                    return None;
                }
            }
            Err(e) => {
                s.fail(TraceError::Build(e));
                return None;
            }
        }
        Some(id)
    })
    .flatten()?;
    deriv.declare(name, id, &sig);
    Some((id, sig))
}

/// A traced module: the IR of every function traced, and the host functions its
/// `extern`s need (native custom derivatives).
pub struct Traced {
    /// The module; it verifies.
    pub module: Module,
    /// The host function of each `extern` of the module, for either engine
    /// (`Interpreter::with_hosts`, the JIT's `compile_with`).
    pub hosts: Hosts,
}

impl core::fmt::Debug for Traced {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Traced")
            .field("module", &self.module.to_string())
            .field("hosts", &self.hosts)
            .finish()
    }
}

/// Records Rust functions into one IR module.
///
/// ```
/// use gradlift_trace::{Tracer, Var};
///
/// let mut tracer = Tracer::new();
/// tracer.function("f", |x: Var, y: Var| x * x + 3.0 * y).unwrap();
/// let traced = tracer.finish().unwrap();
/// assert!(traced.module.to_string().contains("func @f(%0: f64, %1: f64) -> f64"));
/// ```
pub struct Tracer {
    session: Option<Session>,
}

impl Default for Tracer {
    fn default() -> Self {
        Tracer::new()
    }
}

impl Tracer {
    /// A tracer with an empty module.
    pub fn new() -> Tracer {
        Tracer::with_module(Module::new())
    }

    /// The most instructions one traced function may record (100,000 by default):
    /// past it, tracing fails with [`TraceError::TooLarge`] at the Rust line that
    /// crossed it. A plain Rust loop over traced values records its body once per
    /// iteration, so a trace that grows with the data would otherwise take the
    /// compiler's time and memory without end; [`for_range`](crate::for_range) and
    /// [`while_loop`](crate::while_loop) record it once.
    pub fn with_max_insts(mut self, limit: usize) -> Tracer {
        if let Some(s) = &mut self.session {
            s.max_insts = limit;
        }
        self
    }

    /// A tracer that adds to `module` (its functions can be called by name from
    /// traced code only through [`func`]s traced here; this is for mixing traced
    /// functions with parsed ones in one module).
    pub fn with_module(module: Module) -> Tracer {
        Tracer {
            session: Some(Session::new(module)),
        }
    }

    /// Traces `f` as the IR function `@name` (with every function it calls through
    /// [`func`]), and returns its id. A tracing mistake is returned here; the tracer is
    /// then spent, and [`finish`](Tracer::finish) returns the same mistake.
    #[track_caller]
    pub fn function<A: Args, F: Callable<A>>(
        &mut self,
        name: &'static str,
        f: F,
    ) -> Result<FuncId, TraceError> {
        self.function_with(func(name, f))
    }

    /// [`Tracer::function`] for a [`Func`], with its custom derivative.
    #[track_caller]
    pub fn function_with<A: Args, F: Callable<A>, D: Deriv>(
        &mut self,
        f: Func<F, D>,
    ) -> Result<FuncId, TraceError> {
        let session = self.session.take().ok_or(TraceError::Nested)?;
        if let Some(e) = &session.error {
            let e = e.clone();
            self.session = Some(session);
            return Err(e);
        }
        if let Err(session) = ctx::install(session) {
            self.session = Some(*session);
            return Err(TraceError::Nested);
        }
        // If user code panics while tracing, the guard takes the session off the
        // thread, so later traces start clean (this tracer is then spent).
        let guard = ctx::InstallGuard;
        let id = define::<A, F, _>(f.name, &f.f, &f.deriv);
        let Some(session) = ctx::uninstall() else {
            return Err(TraceError::Nested);
        };
        drop(guard);
        let err = session.error.clone();
        self.session = Some(session);
        match (err, id) {
            (Some(e), _) => Err(e),
            (None, Some((id, _))) => Ok(id),
            (None, None) => Err(TraceError::Nested),
        }
    }

    /// The module so far.
    pub fn module(&self) -> Option<&Module> {
        self.session.as_ref().map(|s| &s.module)
    }

    /// The traced module, verified.
    pub fn finish(self) -> Result<Traced, TraceError> {
        let mut session = self.session.ok_or(TraceError::Nested)?;
        if let Some(e) = session.error {
            return Err(e);
        }
        // A constant is an operand wherever Rust code used a number; where the text
        // would read its literal as another type (`2.0f32 * 3.0f32`: f64), it gets a
        // `const` instruction, so the module prints back as itself.
        gradlift_ir::opt::legalize_literals(&mut session.module);
        verify(&session.module).map_err(TraceError::Invalid)?;
        Ok(Traced {
            module: session.module,
            hosts: session.hosts,
        })
    }
}

/// Traces `f` as `@name` into a new module: [`Tracer::function`] then
/// [`Tracer::finish`].
#[track_caller]
pub fn trace<A: Args, F: Callable<A>>(name: &'static str, f: F) -> Result<Traced, TraceError> {
    let mut t = Tracer::new();
    t.function(name, f)?;
    t.finish()
}
