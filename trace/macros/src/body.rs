//! The body translation: an ordinary Rust function body over `f64`, integers and
//! float slices, rewritten against gradlift's tracing API with every number a
//! traced `Var` (literals become `Var` constants).
//!
//! Rust's `if` and `for` need a plain `bool` and a plain range, so a branch
//! becomes `cond` and a loop `for_range`. What flows through them is found
//! syntactically: the outer mutable scalars assigned inside the branch or body,
//! carried as a cons list `(a, (b, ()))` (any length, since `Carry` tuples stop at
//! eight). Closures are `move`: every traced value is `Copy`, and the carried
//! variables are rebound inside them, so what a closure changes reaches the
//! outside only through the carry.
//!
//! Anything outside the subset is a `syn::Error` at its span, never a guess.

mod exits;
mod iter;

use std::collections::HashMap;

use proc_macro2::{Literal, Span, TokenStream};
use quote::{format_ident, quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{
    BinOp, Block, Expr, ExprForLoop, ExprIf, Ident, Lit, Pat, RangeLimits, Result, Stmt, Type, UnOp,
};

/// What a local variable or an expression is, in the traced code.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub enum Kind {
    /// `f64`, traced as `Var<f64>`.
    F,
    /// `usize` or `i64`, traced as `Var<i64>`.
    I,
    /// `bool`, traced as `Var<bool>`.
    B,
    /// `&[f64]`, traced as `Slice<f64>`.
    Slice,
    /// `&mut [f64]`, traced as `SliceMut<f64>`.
    SliceMut,
    /// `&mut f64`, traced as a `SliceMut<f64>` of length 1.
    RefMut,
    /// `()`.
    Unit,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::F => "f64",
            Kind::I => "an integer",
            Kind::B => "bool",
            Kind::Slice => "&[f64]",
            Kind::SliceMut => "&mut [f64]",
            Kind::RefMut => "&mut f64",
            Kind::Unit => "()",
        }
    }

    fn scalar(self) -> bool {
        matches!(self, Kind::F | Kind::I | Kind::B)
    }
}

#[derive(Copy, Clone)]
struct Local {
    kind: Kind,
    mutable: bool,
}

/// The translator: the variables in scope, innermost scope last.
pub struct Translator {
    scopes: Vec<HashMap<String, Local>>,
    /// The function's float type, `f64` or `f32`: what `Kind::F` is.
    fl: &'static str,
    /// The parameters, in order.
    params: Vec<Ident>,
    /// The attribute whose body this is, as the messages name it
    /// (`autodiff_reverse`, `autodiff_forward`, `differentiable`).
    attr: &'static str,
}

fn err<T>(tokens: impl quote::ToTokens, msg: impl std::fmt::Display) -> Result<T> {
    Err(syn::Error::new_spanned(tokens, msg))
}

const INT: &str = "::gradlift::trace::Var<i64>";

fn ty(s: &str) -> TokenStream {
    s.parse().expect("a type path")
}

/// The unary float methods of the tracing API, with Rust's names.
const UNARY: &[&str] = &[
    "sin", "cos", "tan", "exp", "ln", "sqrt", "abs", "tanh", "floor", "ceil", "sinh", "cosh",
    "asin", "acos", "atan", "log10", "log2", "exp2",
];

/// The float methods named in the unsupported-method messages.
const METHODS: &str = "sin cos tan asin acos atan atan2 sinh cosh tanh exp exp2 ln log10 log2 sqrt hypot powi powf mul_add abs max min floor ceil";

impl Translator {
    /// A translator with the function's parameters in scope, for the attribute
    /// `attr` (which the error messages name).
    pub fn new(params: &[(Ident, Kind, bool)], fl: &'static str, attr: &'static str) -> Translator {
        let mut top = HashMap::new();
        for (name, kind, mutable) in params {
            top.insert(
                name.to_string(),
                Local {
                    kind: *kind,
                    mutable: *mutable,
                },
            );
        }
        Translator {
            scopes: vec![top],
            fl,
            params: params.iter().map(|p| p.0.clone()).collect(),
            attr,
        }
    }

    /// The unsupported-construct message, with what to write instead.
    fn unsupported<T>(&self, tokens: impl quote::ToTokens, what: &str, instead: &str) -> Result<T> {
        err(
            tokens,
            format!("{what} is not supported yet by #[{}]; {instead}", self.attr),
        )
    }

    fn check_local_type(&self, t: &Type) -> Result<()> {
        let fl = self.fl;
        if let Type::Path(p) = t
            && let Some(id) = p.path.get_ident()
            && (matches!(id.to_string().as_str(), "i64" | "usize" | "i32" | "bool") || *id == fl)
        {
            return Ok(());
        }
        self.unsupported(
            t,
            "a local of this type",
            &format!("use {fl}, i64, i32, usize or bool"),
        )
    }

    /// The traced float type, `Var<f64>` or `Var<f32>`.
    fn float(&self) -> TokenStream {
        ty(&format!("::gradlift::trace::Var<{}>", self.fl))
    }

    /// The traced constant of the native float `v` (an `f32` one is legalised by
    /// the tracer into a typed constant where the IR needs one).
    fn constant(&self, v: TokenStream) -> TokenStream {
        let f = self.float();
        quote!(<#f>::from(#v))
    }

    /// The literal written `digits`, rounded once to the function's float type, as
    /// Rust rounds it (not through f64 for f32).
    fn float_digits(&self, digits: &str, at: impl quote::ToTokens) -> Result<Literal> {
        let bad = |_| syn::Error::new_spanned(&at, "not a float literal");
        Ok(if self.fl == "f32" {
            Literal::f32_suffixed(digits.parse::<f32>().map_err(bad)?)
        } else {
            Literal::f64_suffixed(digits.parse::<f64>().map_err(bad)?)
        })
    }

    /// The literal `x` of the function's float type.
    fn float_lit(&self, x: f64) -> Literal {
        if self.fl == "f32" {
            Literal::f32_suffixed(x as f32)
        } else {
            Literal::f64_suffixed(x)
        }
    }

    fn lookup(&self, name: &str) -> Option<Local> {
        self.scopes.iter().rev().find_map(|s| s.get(name).copied())
    }

    fn declare(&mut self, name: &Ident, kind: Kind, mutable: bool) {
        self.scopes
            .last_mut()
            .expect("a scope")
            .insert(name.to_string(), Local { kind, mutable });
    }

    /// The function body: statements, then the result (a tail expression or a
    /// final `return`), whose kind must be `want`.
    pub fn body(&mut self, block: &Block, want: Kind) -> Result<TokenStream> {
        let mut block = block.clone();
        iter::rewrite(&mut block);
        let rewritten = exits::rewrite_body(&block, want == Kind::F, syn::parse_quote!(0.0));
        let block = rewritten.as_ref().unwrap_or(&block);
        let (stmts, tail) = match block.stmts.split_last() {
            Some((Stmt::Expr(Expr::Return(r), _), rest)) => (rest, r.expr.as_deref()),
            Some((Stmt::Expr(e, None), rest)) => (rest, Some(e)),
            _ => (&block.stmts[..], None),
        };
        // The parameters get their Rust names in the IR: a run-time error of a slice
        // access names the slice (`load of %x`), and the dumps read as the code.
        let mut out = TokenStream::new();
        for p in &self.params {
            let name = p.to_string();
            let name = name.strip_prefix("r#").unwrap_or(&name);
            out.extend(quote!(let _ = #p.named(#name);));
        }
        let mut marked: Option<(&Stmt, TokenStream)> = None;
        for s in stmts {
            if let Some((m, snapshots)) = marked.take() {
                out.extend(self.marked_for(m, snapshots, s)?);
                continue;
            }
            if let Some(snapshots) = self.checkpoint_mark(s)? {
                marked = Some((s, snapshots));
                continue;
            }
            out.extend(self.stmt(s)?);
        }
        let (value, kind) = match (tail, marked) {
            (Some(Expr::ForLoop(f)), Some((_, snapshots))) => {
                self.for_loop_marked(f, Some(snapshots))?
            }
            (_, Some((m, _))) => {
                return err(
                    m,
                    "`checkpoint!(..)` marks the `for` loop right after it; none follows",
                );
            }
            (Some(e), None) => self.expr(e)?,
            (None, None) => (quote!(()), Kind::Unit),
        };
        if kind != want {
            return err(
                block,
                format!(
                    "the body's result is {}, but the function returns {}",
                    kind.name(),
                    want.name()
                ),
            );
        }
        Ok(quote!(#out #value))
    }

    /// A block in its own scope, as statements and a value of the returned kind.
    fn block(&mut self, block: &Block) -> Result<(TokenStream, Kind)> {
        self.scopes.push(HashMap::new());
        let r = self.block_inner(block);
        self.scopes.pop();
        r
    }

    fn block_inner(&mut self, block: &Block) -> Result<(TokenStream, Kind)> {
        let mut out = TokenStream::new();
        let mut kind = Kind::Unit;
        let mut marked: Option<(&Stmt, TokenStream)> = None;
        for (k, s) in block.stmts.iter().enumerate() {
            if let Some((m, snapshots)) = marked.take() {
                out.extend(self.marked_for(m, snapshots, s)?);
                continue;
            }
            if let Some(snapshots) = self.checkpoint_mark(s)? {
                marked = Some((s, snapshots));
                continue;
            }
            match s {
                Stmt::Expr(e, None) if k + 1 == block.stmts.len() => {
                    let (e, ek) = self.expr(e)?;
                    out.extend(e);
                    kind = ek;
                }
                _ => out.extend(self.stmt(s)?),
            }
        }
        if let Some((m, _)) = marked {
            return err(
                m,
                "`checkpoint!(..)` marks the `for` loop right after it; none follows",
            );
        }
        Ok((out, kind))
    }

    /// The snapshots of `checkpoint!(S);` (`checkpoint!();`: 0, the rule's
    /// choice), if `s` is that statement.
    fn checkpoint_mark(&mut self, s: &Stmt) -> Result<Option<TokenStream>> {
        let mac = match s {
            Stmt::Macro(m) => &m.mac,
            Stmt::Expr(Expr::Macro(m), _) => &m.mac,
            _ => return Ok(None),
        };
        if mac
            .path
            .segments
            .last()
            .is_none_or(|p| p.ident != "checkpoint")
        {
            return Ok(None);
        }
        if mac.tokens.is_empty() {
            let int = ty(INT);
            return Ok(Some(quote!(<#int>::from(0i64))));
        }
        let e: Expr = syn::parse2(mac.tokens.clone())?;
        let (t, kind) = self.expr(&e)?;
        if kind != Kind::I {
            return err(
                &e,
                "the number of snapshots of `checkpoint!(..)` must be an integer",
            );
        }
        Ok(Some(t))
    }

    /// The statement `s` after `checkpoint!(..)` (the statement `m`): a `for`
    /// loop, checkpointed.
    fn marked_for(&mut self, m: &Stmt, snapshots: TokenStream, s: &Stmt) -> Result<TokenStream> {
        let Stmt::Expr(Expr::ForLoop(f), semi) = s else {
            return err(
                m,
                "`checkpoint!(..)` marks the `for` loop right after it, and a `for` loop that can `break` or `return` early cannot be checkpointed (its derivative runs iterations again from snapshots)",
            );
        };
        let (mut t, _) = self.for_loop_marked(f, Some(snapshots))?;
        if semi.is_some() {
            t.extend(quote!(;));
        }
        Ok(t)
    }

    fn stmt(&mut self, s: &Stmt) -> Result<TokenStream> {
        match s {
            Stmt::Local(l) => {
                let declared = match &l.pat {
                    Pat::Type(t) => Some(&*t.ty),
                    _ => None,
                };
                let (name, mutable) = match &l.pat {
                    Pat::Ident(p) if p.by_ref.is_none() && p.subpat.is_none() => {
                        (p.ident.clone(), p.mutability.is_some())
                    }
                    Pat::Type(t) => match &*t.pat {
                        Pat::Ident(p) if p.by_ref.is_none() && p.subpat.is_none() => {
                            self.check_local_type(&t.ty)?;
                            (p.ident.clone(), p.mutability.is_some())
                        }
                        _ => {
                            return self.unsupported(
                                &l.pat,
                                "this pattern",
                                "bind one variable per `let`",
                            );
                        }
                    },
                    _ => {
                        return self.unsupported(
                            &l.pat,
                            "this pattern",
                            "bind one variable per `let`",
                        );
                    }
                };
                let Some(init) = &l.init else {
                    return self.unsupported(
                        l,
                        "`let` without a value",
                        "give the variable its first value where it is declared",
                    );
                };
                if let Some((_, d)) = &init.diverge {
                    return self.unsupported(d, "`let ... else`", "use `if`");
                }
                if let Expr::Macro(m) = &*init.expr
                    && m.mac.path.is_ident("vec")
                {
                    let value = self.vec_macro(&m.mac)?;
                    self.declare(&name, Kind::SliceMut, mutable);
                    return Ok(quote!(let #name = #value;));
                }
                // `let n: usize = N;` of a `const` (or `static`): its type is
                // the declared one.
                let native = declared.and_then(|t| self.native_const(&init.expr, t));
                let (value, kind) = match native {
                    Some(v) => v,
                    None => self.expr(&init.expr)?,
                };
                if !(kind.scalar() || matches!(kind, Kind::Slice)) {
                    return self.unsupported(
                        &init.expr,
                        &format!("a local of type {}", kind.name()),
                        "use the parameter itself",
                    );
                }
                if mutable && !kind.scalar() {
                    return self.unsupported(
                        l,
                        "a mutable slice variable",
                        "use the parameter itself",
                    );
                }
                self.declare(&name, kind, mutable);
                let m = mutable.then(|| quote!(mut));
                Ok(quote!(let #m #name = #value;))
            }
            Stmt::Expr(e, semi) => {
                let (value, kind) = self.expr(e)?;
                if semi.is_none() && kind != Kind::Unit {
                    return err(e, "a value in the middle of a block");
                }
                Ok(quote!(#value;))
            }
            Stmt::Item(i) => {
                self.unsupported(i, "an item inside the function", "define it outside")
            }
            Stmt::Macro(m) => self.unsupported(
                m,
                "a macro call",
                "write the computation with the supported expressions",
            ),
        }
    }

    /// `vec![v; n]` or `vec![a, b, ..]` of f64: a local buffer (`alloc`), filled.
    fn vec_macro(&mut self, mac: &syn::Macro) -> Result<TokenStream> {
        use syn::parse::Parser;
        use syn::punctuated::Punctuated;
        let f = self.float();
        let float = quote!(<#f as ::gradlift::trace::prelude::Float>);
        let set = quote!(::gradlift::trace::prelude::SliceWrite::set);
        let b = format_ident!("__gradlift_buf");
        let repeat = |input: syn::parse::ParseStream| -> Result<(Expr, Expr)> {
            let v: Expr = input.parse()?;
            input.parse::<syn::Token![;]>()?;
            let n: Expr = input.parse()?;
            Ok((v, n))
        };
        if let Ok((v, n)) = repeat.parse2(mac.tokens.clone()) {
            // `alloc` makes a buffer of zeros: `vec![0.0; n]` needs no fill.
            let zero = matches!(&v, Expr::Lit(l)
                if matches!(&l.lit, Lit::Float(f) if f.base10_parse::<f64>().ok() == Some(0.0)));
            let (v, vk) = self.expr(&v)?;
            let (n, nk) = self.expr(&n)?;
            if vk != Kind::F || nk != Kind::I {
                return self.unsupported(
                    mac,
                    "this `vec!`",
                    "write `vec![v; n]` with an f64 `v` and an integer `n`",
                );
            }
            let i64t = ty(INT);
            let alloc = quote_spanned!(mac.span()=> #float::alloc);
            if zero {
                return Ok(quote!({
                    let __gradlift_n = #n;
                    #alloc(__gradlift_n)
                }));
            }
            return Ok(quote!({
                let __gradlift_n = #n;
                let __gradlift_v = #v;
                let mut #b = #alloc(__gradlift_n);
                ::gradlift::trace::for_range(0i64, __gradlift_n, (), move |__gradlift_i: #i64t, ()| {
                    let mut #b = #b;
                    #set(&mut #b, __gradlift_i, __gradlift_v);
                });
                #b
            }));
        }
        let items =
            Punctuated::<Expr, syn::Token![,]>::parse_terminated.parse2(mac.tokens.clone())?;
        let mut sets = TokenStream::new();
        for (k, e) in items.iter().enumerate() {
            let (v, vk) = self.expr(e)?;
            if vk != Kind::F {
                return err(e, "a `vec!` buffer holds f64 values");
            }
            let k = Literal::i64_suffixed(k as i64);
            sets.extend(quote!(#set(&mut #b, #k, #v);));
        }
        let n = Literal::i64_suffixed(items.len() as i64);
        Ok(quote!({
            let mut #b = #float::alloc(::gradlift::trace::Var::<i64>::from(#n));
            #sets
            #b
        }))
    }

    /// A literal: floats of the function's float type, integers, bools.
    fn lit(&self, l: &Lit) -> Result<(TokenStream, Kind)> {
        let i = ty(INT);
        let fl = self.fl;
        match l {
            Lit::Float(x) => {
                if !(x.suffix().is_empty() || x.suffix() == fl) {
                    return self.unsupported(
                        x,
                        "this float type",
                        &format!("use {fl}, as the function does"),
                    );
                }
                let v = self.float_digits(x.base10_digits(), x)?;
                Ok((self.constant(quote!(#v)), Kind::F))
            }
            Lit::Int(x) => match x.suffix() {
                s if s == fl => {
                    let v = self.float_digits(x.base10_digits(), x)?;
                    Ok((self.constant(quote!(#v)), Kind::F))
                }
                "" | "i64" | "usize" | "i32" => {
                    let v = Literal::i64_suffixed(x.base10_parse::<i64>()?);
                    Ok((quote!(<#i>::from(#v)), Kind::I))
                }
                _ => self.unsupported(x, "this integer type", "use usize or i64"),
            },
            Lit::Bool(b) => Ok((quote!(::gradlift::trace::Var::<bool>::from(#b)), Kind::B)),
            _ => self.unsupported(l, "this literal", "use float, integer or bool literals"),
        }
    }

    /// An expression, translated, with its kind.
    pub fn expr(&mut self, e: &Expr) -> Result<(TokenStream, Kind)> {
        match e {
            Expr::Lit(l) => self.lit(&l.lit),
            Expr::Paren(p) => {
                let (v, k) = self.expr(&p.expr)?;
                Ok((quote!((#v)), k))
            }
            Expr::Group(g) => self.expr(&g.expr),
            Expr::Path(p) => self.path(p),
            Expr::Unary(u) => self.unary(u),
            Expr::Binary(b) => self.binary(b),
            Expr::Assign(a) => {
                let (v, k) = self.expr(&a.right)?;
                self.store(&a.left, None, v, k)
            }
            Expr::Index(i) => {
                let x = self.slice_of(&i.expr, false)?;
                let (idx, ik) = self.expr(&i.index)?;
                if ik != Kind::I {
                    return err(&i.index, "an index must be an integer");
                }
                // Spanned by the expression: a run-time error of the read names
                // its Rust line (`#[track_caller]` records it in the IR).
                Ok((
                    quote_spanned!(i.span()=> ::gradlift::trace::prelude::SliceRead::at(&#x, #idx)),
                    Kind::F,
                ))
            }
            Expr::MethodCall(m) => self.method(m),
            Expr::Cast(c) => self.cast(c),
            Expr::If(i) => self.if_expr(i),
            Expr::Block(b) if b.label.is_none() => {
                let (v, k) = self.block(&b.block)?;
                Ok((quote!({ #v }), k))
            }
            Expr::ForLoop(f) => self.for_loop(f),
            Expr::While(w) => self.while_loop(w),
            // Early exits in statements are rewritten before (see `exits`); these are
            // the ones left.
            Expr::Loop(l) => match &l.label {
                Some(label) => self.unsupported(
                    label,
                    "a loop label",
                    "remove it, and leave nested loops with flags",
                ),
                None => self.unsupported(
                    l,
                    "`loop` inside an expression",
                    "write the loop as a statement, leave it with `break;`, and keep its value in a variable",
                ),
            },
            Expr::Break(b) => self.unsupported(
                b,
                "`break` with a label or a value, or inside an expression,",
                "write `break;` as a statement of the loop's body, and compute a value in a variable",
            ),
            Expr::Continue(c) => self.unsupported(
                c,
                "`continue` with a label, or inside an expression,",
                "write `continue;` as a statement of the loop's body",
            ),
            Expr::Return(r) => self.unsupported(
                r,
                "`return` inside an expression",
                "write `return v;` as a statement, or compute the result in a variable",
            ),
            Expr::Call(c) => self.call(c),
            Expr::Match(m) => self.unsupported(m, "`match`", "use `if` / `else if`"),
            Expr::Closure(c) => self.unsupported(c, "a closure", "inline its body"),
            Expr::Macro(m) => self.unsupported(
                m,
                "a macro call",
                "write the computation with the supported expressions",
            ),
            Expr::Tuple(t) => self.unsupported(t, "a tuple", "use separate variables"),
            Expr::Reference(r) => self.unsupported(r, "taking a reference", "use the parameter itself"),
            Expr::Range(r) => {
                self.unsupported(r, "a range outside a `for` loop", "write `for i in a..b`")
            }
            _ => self.unsupported(
                e,
                "this expression",
                "see the supported subset in the gradlift_macros docs",
            ),
        }
    }

    /// A call of a `#[differentiable]` function: a call of its traced twin, which
    /// emits an IR call. The result is the function's float (or `()`, in a
    /// statement): the callee's signature is not visible here.
    fn call(&mut self, c: &syn::ExprCall) -> Result<(TokenStream, Kind)> {
        let Expr::Path(p) = &*c.func else {
            return self.unsupported(
                &c.func,
                "calling this",
                "call a function marked #[differentiable] by its name",
            );
        };
        let first = p.path.segments.first().map(|s| s.ident.to_string());
        if matches!(first.as_deref(), Some("f64" | "f32")) {
            return self.unsupported(
                c,
                "calling a float function by path",
                "use the method: `x.sqrt()`, `a.max(b)`",
            );
        }
        if p.qself.is_some() || p.path.segments.iter().any(|s| !s.arguments.is_none()) {
            return self.unsupported(p, "this path", "call the function by its plain name");
        }
        let mut path = p.path.clone();
        let last = path.segments.last_mut().expect("a path has a segment");
        last.ident = crate::differentiable::twin(&last.ident);
        let mut args = Vec::new();
        for a in &c.args {
            args.push(self.call_arg(a)?);
        }
        // Spanned: the call records the caller's line (the twin is `#[track_caller]`).
        Ok((quote_spanned!(c.span()=> #path(#(#args),*)), Kind::F))
    }

    /// An argument of a `#[differentiable]` call: a number by value, a slice by
    /// name or as `&x` / `&mut x`.
    fn call_arg(&mut self, a: &Expr) -> Result<TokenStream> {
        if let Expr::Reference(r) = a {
            let bad = || {
                self.unsupported(
                    a,
                    "this reference",
                    "pass a slice or buffer as `&x` or `&mut x`, and numbers by value",
                )
            };
            let Expr::Path(p) = &*r.expr else {
                return bad();
            };
            let Some(id) = p.path.get_ident() else {
                return bad();
            };
            return match (self.lookup(&id.to_string()).map(|l| l.kind), r.mutability) {
                (Some(Kind::Slice), None) => Ok(quote!(#id)),
                (Some(Kind::SliceMut | Kind::RefMut), Some(_)) => Ok(quote!(#id)),
                (Some(Kind::SliceMut), None) => Ok(quote!(#id.read_only())),
                _ => bad(),
            };
        }
        let (v, k) = self.expr(a)?;
        if k == Kind::Unit {
            return err(a, "an argument must have a value");
        }
        Ok(v)
    }

    /// `e` as a native constant of type `t` (the function's float type or an
    /// integer), when `e` names something that is not a local variable (a `const`
    /// or `static` of the program): Rust converts it, natively, when tracing.
    fn native_const(&self, e: &Expr, t: &Type) -> Option<(TokenStream, Kind)> {
        let Expr::Path(p) = e else { return None };
        if p.qself.is_some() || p.path.segments.iter().any(|s| !s.arguments.is_none()) {
            return None;
        }
        if let Some(id) = p.path.get_ident()
            && self.lookup(&id.to_string()).is_some()
        {
            return None;
        }
        let Type::Path(tp) = t else { return None };
        let to = tp.path.get_ident()?.to_string();
        let sp = e.span();
        if to == self.fl {
            let fl: TokenStream = self.fl.parse().expect("a type");
            Some((self.constant(quote_spanned!(sp=> ((#p) as #fl))), Kind::F))
        } else if matches!(to.as_str(), "i64" | "usize" | "i32") {
            let to: TokenStream = to.parse().expect("a type");
            let i = ty(INT);
            Some((
                quote_spanned!(sp=> <#i>::from(((#p) as #to) as i64)),
                Kind::I,
            ))
        } else {
            None
        }
    }

    fn path(&mut self, p: &syn::ExprPath) -> Result<(TokenStream, Kind)> {
        if let Some(id) = p.path.get_ident() {
            let Some(local) = self.lookup(&id.to_string()) else {
                return err(
                    id,
                    format!(
                        "#[{}] can read only the function's parameters and its local variables here; read a `const` with its type: `let n: usize = N;` or `N as f64`",
                        self.attr
                    ),
                );
            };
            return Ok((quote!(#id), local.kind));
        }
        // `f64::consts::PI`, `std::f64::consts::E`, `f64::EPSILON`: a float constant.
        let segs: Vec<String> = p
            .path
            .segments
            .iter()
            .map(|s| s.ident.to_string())
            .collect();
        let fl = self.fl;
        let is_f64_const = matches!(
            segs.iter().map(String::as_str).collect::<Vec<_>>()[..],
            [t, _] | [t, "consts", _] | ["std" | "core", t, "consts", _] if t == fl
        );
        if p.qself.is_none() && is_f64_const {
            return Ok((self.constant(quote!(#p)), Kind::F));
        }
        self.unsupported(
            p,
            "this path",
            "use a float literal or an `f64::consts` constant",
        )
    }

    fn unary(&mut self, u: &syn::ExprUnary) -> Result<(TokenStream, Kind)> {
        match u.op {
            UnOp::Deref(_) => {
                // `*v` for an element `v` of `x.iter()` (a `&f64` in Rust).
                if let Expr::Path(p) = &*u.expr
                    && let Some(id) = p.path.get_ident()
                    && self.lookup(&id.to_string()).map(|l| l.kind) == Some(Kind::F)
                {
                    return Ok((quote!(#id), Kind::F));
                }
                let x = self.slice_of(&u.expr, true)?;
                Ok((
                    quote!(::gradlift::trace::prelude::SliceRead::at(&#x, 0i64)),
                    Kind::F,
                ))
            }
            UnOp::Not(_) => {
                let (v, k) = self.expr(&u.expr)?;
                if k != Kind::B {
                    return self.unsupported(u, "`!` on integers", "use a comparison");
                }
                Ok((quote!((!#v)), Kind::B))
            }
            UnOp::Neg(_) => {
                let (v, k) = self.expr(&u.expr)?;
                if !matches!(k, Kind::F | Kind::I) {
                    return err(u, "`-` needs a number");
                }
                Ok((quote!((-#v)), k))
            }
            _ => self.unsupported(u, "this operator", "see the supported subset"),
        }
    }

    fn binary(&mut self, b: &syn::ExprBinary) -> Result<(TokenStream, Kind)> {
        // Assignments with an operator: `x op= v`, as `x = Op::op(x, v)`, spanned by
        // the expression (see the arithmetic below).
        let sp = b.span();
        let compound = match b.op {
            BinOp::AddAssign(_) => Some(quote_spanned!(sp=> Add::add)),
            BinOp::SubAssign(_) => Some(quote_spanned!(sp=> Sub::sub)),
            BinOp::MulAssign(_) => Some(quote_spanned!(sp=> Mul::mul)),
            BinOp::DivAssign(_) => Some(quote_spanned!(sp=> Div::div)),
            BinOp::RemAssign(_)
            | BinOp::BitAndAssign(_)
            | BinOp::BitOrAssign(_)
            | BinOp::BitXorAssign(_)
            | BinOp::ShlAssign(_)
            | BinOp::ShrAssign(_) => {
                return self.unsupported(b, "this compound assignment", "write `x = x op y`");
            }
            _ => None,
        };
        if let Some(op) = compound {
            let (v, k) = self.expr(&b.right)?;
            return self.store(&b.left, Some(op), v, k);
        }
        if let BinOp::And(_) | BinOp::Or(_) = b.op {
            // Short-circuiting, as in Rust: the right side is traced in a branch, so
            // `i < n && x[i] > 0.0` never reads out of bounds.
            // The right side runs in a closure, which would lose its assignments.
            let mut assigned = Vec::new();
            assigned_in_expr(&b.right, &mut vec![Vec::new()], &mut assigned);
            if let Some(a) = assigned.first() {
                return self.unsupported(
                    a,
                    "assigning inside the right side of `&&` or `||`",
                    "assign before the condition",
                );
            }
            let (l, lk) = self.expr(&b.left)?;
            let (r, rk) = self.expr(&b.right)?;
            if lk != Kind::B || rk != Kind::B {
                return err(b, "`&&` and `||` need two comparisons or bools");
            }
            let bt = quote!(::gradlift::trace::Var::<bool>::from(true));
            let bf = quote!(::gradlift::trace::Var::<bool>::from(false));
            let v = match b.op {
                BinOp::And(_) => quote!(::gradlift::trace::cond(#l, move || #r, move || #bf)),
                _ => quote!(::gradlift::trace::cond(#l, move || #bt, move || #r)),
            };
            return Ok((v, Kind::B));
        }
        let (l, lk) = self.expr(&b.left)?;
        let (r, rk) = self.expr(&b.right)?;
        // `==` and `!=` on bools: exclusive or, negated for `==`.
        if (lk, rk) == (Kind::B, Kind::B) {
            let sp = b.span();
            let xor = quote_spanned!(sp=> ::core::ops::BitXor::bitxor(#l, #r));
            match b.op {
                BinOp::Ne(_) => return Ok((xor, Kind::B)),
                BinOp::Eq(_) => return Ok((quote_spanned!(sp=> (!#xor)), Kind::B)),
                _ => {}
            }
        }
        if lk != rk || !matches!(lk, Kind::F | Kind::I) {
            return err(
                b,
                format!(
                    "#[{}] supports this operator on two f64 or two integers, not {} and {}",
                    self.attr,
                    lk.name(),
                    rk.name()
                ),
            );
        }
        // Every token of the call is spanned by the expression (the callee's path
        // included): the position an integer division by zero names.
        let arith = match b.op {
            BinOp::Add(_) => Some(quote_spanned!(sp=> Add::add)),
            BinOp::Sub(_) => Some(quote_spanned!(sp=> Sub::sub)),
            BinOp::Mul(_) => Some(quote_spanned!(sp=> Mul::mul)),
            BinOp::Div(_) => Some(quote_spanned!(sp=> Div::div)),
            BinOp::Rem(_) if lk == Kind::I => Some(quote_spanned!(sp=> Rem::rem)),
            BinOp::Rem(_) => {
                return self.unsupported(
                    b,
                    "`%` on f64",
                    "write `x - (x / y).floor() * y` (floored, not truncated, so check the sign)",
                );
            }
            _ => None,
        };
        if let Some(op) = arith {
            return Ok((quote_spanned!(sp=> ::core::ops::#op(#l, #r)), lk));
        }
        let cmp = match b.op {
            BinOp::Lt(_) => "lt",
            BinOp::Le(_) => "le",
            BinOp::Gt(_) => "gt",
            BinOp::Ge(_) => "ge",
            BinOp::Eq(_) => "eq",
            BinOp::Ne(_) => "ne",
            _ => {
                return self.unsupported(
                    b,
                    "this operator",
                    "use `+ - * /`, comparisons, `&&`, `||` or `!`",
                );
            }
        };
        let m = format_ident!("{}", cmp);
        let v = if lk == Kind::F {
            let f = self.float();
            quote!(<#f as ::gradlift::trace::prelude::Float>::#m(#l, #r))
        } else {
            let i = ty(INT);
            quote!(<#i as ::gradlift::trace::prelude::Int>::#m(#l, #r))
        };
        Ok((v, Kind::B))
    }

    /// `target = v` or `target op= v` (`op` a path `Div::div` in `core::ops`).
    fn store(
        &mut self,
        target: &Expr,
        op: Option<TokenStream>,
        v: TokenStream,
        vk: Kind,
    ) -> Result<(TokenStream, Kind)> {
        match target {
            Expr::Path(p) => {
                let Some(id) = p.path.get_ident() else {
                    return self.unsupported(p, "assigning to this", "assign to a local variable");
                };
                let Some(local) = self.lookup(&id.to_string()) else {
                    return err(id, "not a local variable");
                };
                if !local.kind.scalar() {
                    return self.unsupported(id, "reassigning a slice", "write into its elements");
                }
                if local.kind != vk {
                    return err(
                        target,
                        format!("assigning {} to {}", vk.name(), local.kind.name()),
                    );
                }
                let v = match op {
                    Some(op) => quote_spanned!(target.span()=> ::core::ops::#op(#id, #v)),
                    None => v,
                };
                Ok((quote!(#id = #v), Kind::Unit))
            }
            Expr::Index(i) => {
                let x = self.slice_of(&i.expr, true)?;
                let (idx, ik) = self.expr(&i.index)?;
                if ik != Kind::I {
                    return err(&i.index, "an index must be an integer");
                }
                if vk != Kind::F {
                    return err(target, "only f64 values can be stored into a slice");
                }
                Ok((store_at(target.span(), &x, idx, op, v), Kind::Unit))
            }
            Expr::Unary(u) if matches!(u.op, UnOp::Deref(_)) => {
                let x = self.slice_of(&u.expr, true)?;
                if vk != Kind::F {
                    return err(target, "only f64 values can be stored through a `&mut f64`");
                }
                Ok((store_at(target.span(), &x, quote!(0i64), op, v), Kind::Unit))
            }
            Expr::Paren(p) => self.store(&p.expr, op, v, vk),
            _ => self.unsupported(
                target,
                "assigning to this",
                "assign to a local variable or to `x[i]`",
            ),
        }
    }

    /// The slice variable `e` names (writable if `write`; `*r` for `r: &mut f64`
    /// when `write` is for a dereference).
    fn slice_of(&mut self, e: &Expr, write: bool) -> Result<Ident> {
        let Expr::Path(p) = e else {
            return self.unsupported(e, "indexing this", "index a slice parameter by name");
        };
        let Some(id) = p.path.get_ident() else {
            return self.unsupported(e, "indexing this", "index a slice parameter by name");
        };
        match self.lookup(&id.to_string()).map(|l| l.kind) {
            Some(Kind::SliceMut | Kind::RefMut) => Ok(id.clone()),
            Some(Kind::Slice) if !write => Ok(id.clone()),
            Some(Kind::Slice) => err(id, "this slice is read-only (`&[f64]`)"),
            _ => err(id, "not a slice parameter"),
        }
    }

    fn method(&mut self, m: &syn::ExprMethodCall) -> Result<(TokenStream, Kind)> {
        let name = m.method.to_string();
        if m.turbofish.is_some() {
            return self.unsupported(m, "a turbofish", "remove it");
        }
        if name == "len" && m.args.is_empty() {
            let x = self.slice_of(&m.receiver, false)?;
            return Ok((
                quote!(::gradlift::trace::prelude::SliceRead::len(&#x)),
                Kind::I,
            ));
        }
        let (r, rk) = self.expr(&m.receiver)?;
        if matches!(rk, Kind::Slice | Kind::SliceMut) {
            return self.unsupported(
                m,
                &format!("the method `{name}` on a slice or a `vec!` buffer"),
                "slices and buffers have `len()` and indexing; a buffer keeps its length, so allocate it at its final length (`vec![0.0; n]`) and write `b[i] = v`",
            );
        }
        if rk != Kind::F {
            return self.unsupported(
                m,
                &format!("the method `{name}` on {}", rk.name()),
                &format!("use the float methods `{METHODS}` on f64, and `len` on slices"),
            );
        }
        let f = self.float();
        let method = &m.method;
        let float = quote!(<#f as ::gradlift::trace::prelude::Float>);
        if UNARY.contains(&name.as_str()) && m.args.is_empty() {
            return Ok((quote!(#float::#method(#r)), Kind::F));
        }
        match (name.as_str(), m.args.len()) {
            ("powi", 1) => {
                let n = &m.args[0];
                let lit = match n {
                    Expr::Lit(l) => Some(l),
                    Expr::Unary(u) if matches!(u.op, UnOp::Neg(_)) => match &*u.expr {
                        Expr::Lit(l) => Some(l),
                        _ => None,
                    },
                    _ => None,
                };
                match lit {
                    Some(syn::ExprLit {
                        lit: Lit::Int(_), ..
                    }) => Ok((quote!(#float::powi(#r, #n)), Kind::F)),
                    _ => self.unsupported(
                        n,
                        "`powi` with an exponent that is not an integer literal",
                        "write `x.powf(n as f64)` (for x > 0) or a loop",
                    ),
                }
            }
            ("powf" | "max" | "min" | "atan2" | "hypot", 1) | ("mul_add", 2) => {
                let mut args = Vec::new();
                for e in &m.args {
                    let (a, ak) = self.expr(e)?;
                    if ak != Kind::F {
                        return err(e, format!("`{name}` needs an f64 argument"));
                    }
                    args.push(a);
                }
                Ok((quote!(#float::#method(#r, #(#args),*)), Kind::F))
            }
            _ => self.unsupported(
                m,
                &format!("the method `{name}`"),
                &format!("use the float methods `{METHODS}`"),
            ),
        }
    }

    fn cast(&mut self, c: &syn::ExprCast) -> Result<(TokenStream, Kind)> {
        // `N as usize` of a `const`: Rust's cast, natively.
        if let Some(v) = self.native_const(&c.expr, &c.ty) {
            return Ok(v);
        }
        let (v, k) = self.expr(&c.expr)?;
        let to = match &*c.ty {
            Type::Path(p) if p.qself.is_none() => p.path.get_ident().map(Ident::to_string),
            _ => None,
        };
        let f = self.float();
        let float = quote!(<#f as ::gradlift::trace::prelude::Float>);
        match (k, to.as_deref()) {
            (Kind::F, Some(t)) if t == self.fl => Ok((v, k)),
            // Integers are all traced as i64.
            (Kind::I, Some("i64" | "usize" | "i32")) => Ok((v, k)),
            (Kind::I, Some(t)) if t == self.fl => Ok((quote!(#float::from_int(#v)), Kind::F)),
            (Kind::F, Some("i64" | "i32")) => Ok((quote!(#float::to_int(#v)), Kind::I)),
            // `as usize` saturates at 0 (and NaN becomes 0).
            (Kind::F, Some("usize")) => Ok((
                {
                    let zero = self.float_lit(0.0);
                    {
                        let zero = self.constant(quote!(#zero));
                        quote!(#float::to_int(#float::max(#v, #zero)))
                    }
                },
                Kind::I,
            )),
            _ => self.unsupported(
                c,
                "this cast",
                "cast between f64, i64, i32 and usize (booleans and other integer types are not supported)",
            ),
        }
    }

    /// `if c { .. } else { .. }` as `cond`, carrying the outer mutable scalars the
    /// arms assign.
    fn if_expr(&mut self, i: &ExprIf) -> Result<(TokenStream, Kind)> {
        let (c, ck) = self.expr(&i.cond)?;
        if ck != Kind::B {
            return err(&i.cond, "an `if` condition must be a comparison or a bool");
        }
        let mut carried = Vec::new();
        assigned_in_block(&i.then_branch, &mut Vec::new(), &mut carried);
        if let Some((_, e)) = &i.else_branch {
            assigned_in_expr(e, &mut vec![Vec::new()], &mut carried);
        }
        let carried = self.check_carried(&carried);
        let (then, tk) = self.block(&i.then_branch)?;
        let (els, ek) = match &i.else_branch {
            Some((_, e)) => {
                let (v, k) = self.expr(e)?;
                (quote!(#v), k)
            }
            None => (quote!(()), Kind::Unit),
        };
        if tk != ek {
            return err(
                i,
                format!(
                    "the branches of this `if` have different types ({} and {})",
                    tk.name(),
                    ek.name()
                ),
            );
        }
        let CarryParts {
            value: cons,
            fresh,
            rebind,
            assign,
            ..
        } = carry_parts(&carried);
        let v = format_ident!("__gradlift_v");
        let out = format_ident!("__gradlift_carry");
        let tokens = quote_spanned! {Span::call_site()=>
            {
                let (#v, #out) = ::gradlift::trace::cond(
                    #c,
                    move || { #rebind let #v = { #then }; (#v, #cons) },
                    move || { #rebind let #v = { #els }; (#v, #cons) },
                );
                let #fresh = #out;
                #assign
                #v
            }
        };
        Ok((tokens, tk))
    }

    /// `for i in a..b { .. }` as `for_range`, carrying the outer mutable scalars the
    /// body assigns.
    fn for_loop(&mut self, f: &ExprForLoop) -> Result<(TokenStream, Kind)> {
        self.for_loop_marked(f, None)
    }

    /// A `for` loop; with `snapshots`, checkpointed (`checkpoint!(S);` stood right
    /// before it): `for_range_checkpointed`.
    fn for_loop_marked(
        &mut self,
        f: &ExprForLoop,
        snapshots: Option<TokenStream>,
    ) -> Result<(TokenStream, Kind)> {
        if let Some(l) = &f.label {
            return self.unsupported(l, "a loop label", "remove it");
        }
        let var = match &*f.pat {
            Pat::Ident(p) if p.mutability.is_none() && p.by_ref.is_none() && p.subpat.is_none() => {
                p.ident.clone()
            }
            Pat::Wild(_) => format_ident!("__gradlift_i"),
            p => return self.unsupported(p, "this loop pattern", "write `for i in a..b`"),
        };
        let Expr::Range(range) = &*f.expr else {
            return self.unsupported(
                &f.expr,
                "a `for` loop over this",
                "loop over `a..b`, `(a..b).rev()`, `x.iter()` or `x.iter().enumerate()` of a slice `x`, and index with `x[i]`",
            );
        };
        let (Some(start), Some(end)) = (&range.start, &range.end) else {
            return self.unsupported(range, "an open range", "give both bounds: `a..b`");
        };
        let (s, sk) = self.expr(start)?;
        let (e, ek) = self.expr(end)?;
        if sk != Kind::I || ek != Kind::I {
            return err(range, "the bounds of a `for` range must be integers");
        }
        let i64t = ty(INT);
        let e = match range.limits {
            RangeLimits::HalfOpen(_) => e,
            RangeLimits::Closed(_) => quote!((#e + <#i64t>::from(1i64))),
        };
        let mut carried = Vec::new();
        let mut scopes = vec![vec![var.to_string()]];
        assigned_in_stmts(&f.body.stmts, &mut scopes, &mut carried);
        let carried = self.check_carried(&carried);
        self.scopes.push(HashMap::new());
        self.declare(&var, Kind::I, false);
        let body = self.block(&f.body);
        self.scopes.pop();
        let (body, bk) = body?;
        if bk != Kind::Unit {
            return err(&f.body, "a loop body must not have a value");
        }
        let CarryParts {
            param,
            value: cons,
            fresh,
            assign,
            ..
        } = carry_parts(&carried);
        let out = format_ident!("__gradlift_carry");
        let call = match snapshots {
            Some(n) => quote_spanned! {Span::call_site()=>
                ::gradlift::trace::for_range_checkpointed(
                    #s,
                    #e,
                    #n,
                    #cons,
                    move |#var: #i64t, #param| { { #body }; #cons },
                )
            },
            None => quote_spanned! {Span::call_site()=>
                ::gradlift::trace::for_range(
                    #s,
                    #e,
                    #cons,
                    move |#var: #i64t, #param| { { #body }; #cons },
                )
            },
        };
        let tokens = quote_spanned! {Span::call_site()=>
            {
                let #out = #call;
                let #fresh = #out;
                #assign
            }
        };
        Ok((tokens, Kind::Unit))
    }

    /// `while c { .. }` as `while_loop`, carrying the outer mutable scalars the body
    /// assigns; the test reads them from the carry.
    fn while_loop(&mut self, w: &syn::ExprWhile) -> Result<(TokenStream, Kind)> {
        if let Some(l) = &w.label {
            return self.unsupported(l, "a loop label", "remove it");
        }
        let mut in_test = Vec::new();
        assigned_in_expr(&w.cond, &mut vec![Vec::new()], &mut in_test);
        if let Some(a) = in_test.first() {
            return self.unsupported(
                a,
                "assigning inside a `while` test",
                "assign in the loop body",
            );
        }
        let mut carried = Vec::new();
        assigned_in_block(&w.body, &mut Vec::new(), &mut carried);
        let carried = self.check_carried(&carried);
        let (c, ck) = self.expr(&w.cond)?;
        if ck != Kind::B {
            return err(&w.cond, "a `while` test must be a comparison or a bool");
        }
        let (body, bk) = self.block(&w.body)?;
        if bk != Kind::Unit {
            return err(&w.body, "a loop body must not have a value");
        }
        let CarryParts {
            param,
            value: cons,
            fresh,
            assign,
            ..
        } = carry_parts(&carried);
        let out = format_ident!("__gradlift_carry");
        let state = format_ident!("__gradlift_state");
        let tokens = quote_spanned! {Span::call_site()=>
            {
                let #out = ::gradlift::trace::while_loop(
                    #cons,
                    move |#state| { let #param = *#state; #c },
                    move |#param| { { #body }; #cons },
                );
                let #fresh = #out;
                #assign
            }
        };
        Ok((tokens, Kind::Unit))
    }

    /// The carried variables: outer, mutable scalars (deduplicated, in order).
    fn check_carried(&self, names: &[Ident]) -> Vec<Ident> {
        let mut out: Vec<Ident> = Vec::new();
        for n in names {
            if out.iter().any(|o| o == n) {
                continue;
            }
            match self.lookup(&n.to_string()) {
                Some(l) if l.kind.scalar() && l.mutable => out.push(n.clone()),
                // Not a mutable local: the assignment itself reports it.
                _ => {}
            }
        }
        out
    }
}

/// `x[idx] = v` or `x[idx] op= v` on a traced writable slice.
/// `x[idx] = v` (or `x[idx] op= v`), spanned at `span`, the target's position, which
/// a run-time error names.
fn store_at(
    span: Span,
    x: &Ident,
    idx: TokenStream,
    op: Option<TokenStream>,
    v: TokenStream,
) -> TokenStream {
    let i = format_ident!("__gradlift_i");
    let w = format_ident!("__gradlift_w");
    let new = match op {
        Some(op) => quote_spanned!(span=>
            ::core::ops::#op(::gradlift::trace::prelude::SliceRead::at(&#x, #i), #w)
        ),
        None => quote!(#w),
    };
    let n = format_ident!("__gradlift_new");
    let set = quote_spanned!(span=> ::gradlift::trace::prelude::SliceWrite::set(&mut #x, #i, #n));
    quote! {{
        let #w = #v;
        let #i = #idx;
        let #n = #new;
        let mut #x = #x;
        #set
    }}
}

/// The pieces of a carry of the variables `a, b`.
struct CarryParts {
    /// The closure's parameter: `(mut a, (mut b, ()))`.
    param: TokenStream,
    /// The value: `(a, (b, ()))`.
    value: TokenStream,
    /// The result bound outside under fresh names: `(c0, (c1, ()))`.
    fresh: TokenStream,
    /// The rebinding inside an arm: `let mut a = a; let mut b = b;`.
    rebind: TokenStream,
    /// The fresh names assigned back to the outer variables: `a = c0; b = c1;`.
    assign: TokenStream,
}

fn carry_parts(carried: &[Ident]) -> CarryParts {
    let mut p = CarryParts {
        param: quote!(()),
        value: quote!(()),
        fresh: quote!(()),
        rebind: TokenStream::new(),
        assign: TokenStream::new(),
    };
    for (k, n) in carried.iter().enumerate().rev() {
        let fresh = format_ident!("__gradlift_c{}", k);
        let (param, value, fresh_p) = (&p.param, &p.value, &p.fresh);
        p.param = quote!((mut #n, #param));
        p.value = quote!((#n, #value));
        p.fresh = quote!((#fresh, #fresh_p));
    }
    for (k, n) in carried.iter().enumerate() {
        let fresh = format_ident!("__gradlift_c{}", k);
        p.rebind.extend(quote!(let mut #n = #n;));
        p.assign.extend(quote!(#n = #fresh;));
    }
    p
}

// The syntactic search for assigned variables. `scopes` holds the names declared
// inside the region so far (innermost last); an assignment to a name not among
// them is to an outer variable.

fn declared(scopes: &[Vec<String>], name: &str) -> bool {
    scopes.iter().any(|s| s.iter().any(|n| n == name))
}

fn assigned_in_block(b: &Block, scopes: &mut Vec<Vec<String>>, out: &mut Vec<Ident>) {
    scopes.push(Vec::new());
    assigned_in_stmts_inner(&b.stmts, scopes, out);
    scopes.pop();
}

fn assigned_in_stmts(stmts: &[Stmt], scopes: &mut Vec<Vec<String>>, out: &mut Vec<Ident>) {
    scopes.push(Vec::new());
    assigned_in_stmts_inner(stmts, scopes, out);
    scopes.pop();
}

fn assigned_in_stmts_inner(stmts: &[Stmt], scopes: &mut Vec<Vec<String>>, out: &mut Vec<Ident>) {
    for s in stmts {
        match s {
            Stmt::Local(l) => {
                if let Some(init) = &l.init {
                    assigned_in_expr(&init.expr, scopes, out);
                }
                let name = match &l.pat {
                    Pat::Ident(p) => Some(p.ident.to_string()),
                    Pat::Type(t) => match &*t.pat {
                        Pat::Ident(p) => Some(p.ident.to_string()),
                        _ => None,
                    },
                    _ => None,
                };
                if let Some(n) = name {
                    scopes.last_mut().expect("a scope").push(n);
                }
            }
            Stmt::Expr(e, _) => assigned_in_expr(e, scopes, out),
            _ => {}
        }
    }
}

/// An assignment's target: a name not declared inside the region is an outer one.
fn assigned_target(t: &Expr, scopes: &[Vec<String>], out: &mut Vec<Ident>) {
    if let Expr::Path(p) = t
        && let Some(id) = p.path.get_ident()
        && !declared(scopes, &id.to_string())
    {
        out.push(id.clone());
    }
}

fn assigned_in_expr(e: &Expr, scopes: &mut Vec<Vec<String>>, out: &mut Vec<Ident>) {
    match e {
        Expr::Assign(a) => {
            assigned_target(&a.left, scopes, out);
            assigned_in_expr(&a.right, scopes, out);
        }
        Expr::Binary(b) => {
            if matches!(
                b.op,
                BinOp::AddAssign(_)
                    | BinOp::SubAssign(_)
                    | BinOp::MulAssign(_)
                    | BinOp::DivAssign(_)
            ) {
                assigned_target(&b.left, scopes, out);
            } else {
                assigned_in_expr(&b.left, scopes, out);
            }
            assigned_in_expr(&b.right, scopes, out);
        }
        Expr::Block(b) => assigned_in_block(&b.block, scopes, out),
        Expr::If(i) => {
            assigned_in_expr(&i.cond, scopes, out);
            assigned_in_block(&i.then_branch, scopes, out);
            if let Some((_, e)) = &i.else_branch {
                assigned_in_expr(e, scopes, out);
            }
        }
        Expr::ForLoop(f) => {
            assigned_in_expr(&f.expr, scopes, out);
            let var = match &*f.pat {
                Pat::Ident(p) => vec![p.ident.to_string()],
                _ => Vec::new(),
            };
            scopes.push(var);
            assigned_in_block(&f.body, scopes, out);
            scopes.pop();
        }
        // A `while` assigns in its body (the test may not assign).
        Expr::While(w) => {
            assigned_in_expr(&w.cond, scopes, out);
            assigned_in_block(&w.body, scopes, out);
        }
        Expr::Paren(p) => assigned_in_expr(&p.expr, scopes, out),
        Expr::Group(g) => assigned_in_expr(&g.expr, scopes, out),
        Expr::Unary(u) => assigned_in_expr(&u.expr, scopes, out),
        Expr::Index(i) => {
            assigned_in_expr(&i.expr, scopes, out);
            assigned_in_expr(&i.index, scopes, out);
        }
        Expr::MethodCall(m) => {
            assigned_in_expr(&m.receiver, scopes, out);
            for a in &m.args {
                assigned_in_expr(a, scopes, out);
            }
        }
        Expr::Cast(c) => assigned_in_expr(&c.expr, scopes, out),
        Expr::Range(r) => {
            if let Some(s) = &r.start {
                assigned_in_expr(s, scopes, out);
            }
            if let Some(s) = &r.end {
                assigned_in_expr(s, scopes, out);
            }
        }
        // Everything else is either a leaf or rejected by the translation.
        _ => {}
    }
}
