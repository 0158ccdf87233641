//! The signature side of `#[autodiff_reverse]` and `#[autodiff_forward]`: the
//! activities checked against the parameters, the traced function's signature,
//! and the generated functions: `NAME_try`, which traces and compiles once per
//! process (a `gradlift::SharedGradient`, or a `gradlift::SharedJvp` in forward
//! mode, in a `OnceLock`), calls with a per-thread `gradlift::CallState`, and maps
//! its arguments to gradlift's activities; `NAME`, which panics with its error;
//! `NAME_grad` (reverse mode), fresh gradients.
//!
//! What both modes share ([`front`]: the checks of the signature, the float type,
//! the body's translation, recursion, the traced function; [`generate`]: `NAME_try`
//! and `NAME` around a mode's call) is written once; a mode adds its activities and
//! the arguments and results they give.

use proc_macro2::TokenStream;
use quote::{format_ident, quote, quote_spanned};
use syn::parse::Parser;
use syn::punctuated::Punctuated;
use syn::{FnArg, Ident, ItemFn, Pat, ReturnType, Token, Type};

use crate::body::{Kind, Translator};

/// Which attribute: reverse mode or forward mode.
#[derive(Copy, Clone, PartialEq, Eq)]
pub enum Mode {
    /// `#[autodiff_reverse]`.
    Reverse,
    /// `#[autodiff_forward]`.
    Forward,
}

impl Mode {
    /// The attribute's name, as the messages name it.
    fn attr(self) -> &'static str {
        match self {
            Mode::Reverse => "autodiff_reverse",
            Mode::Forward => "autodiff_forward",
        }
    }
}

#[derive(Copy, Clone, PartialEq, Eq)]
enum Activity {
    Active,
    Const,
    Duplicated,
}

/// An activity by its name: `std::autodiff`'s, or the RFC draft's for the same
/// meaning (`Constant` is `Const`; `DuplicatedNoNeed`, whose primal may be left
/// with any contents, is derived as `Duplicated`, which leaves the right ones).
/// The "primal not needed" forms: `DuplicatedOnly` is `DuplicatedNoNeed`;
/// `ActiveOnly` is `Active` on a parameter and, on the return, `Active` without
/// the value in the result (`true` here).
fn activity(id: &Ident) -> syn::Result<(Activity, bool)> {
    match id.to_string().as_str() {
        "Active" => Ok((Activity::Active, false)),
        "ActiveOnly" => Ok((Activity::Active, true)),
        "Const" | "Constant" => Ok((Activity::Const, false)),
        "Duplicated" | "DuplicatedNoNeed" | "DuplicatedOnly" => Ok((Activity::Duplicated, false)),
        "Dual" | "DualOnly" | "Dualv" | "DualvOnly" => Err(syn::Error::new_spanned(
            id,
            format!(
                "`{id}` is forward mode, which #[autodiff_reverse] does not do; use #[autodiff_forward] for it, or `Active`, `Const` or `Duplicated` here"
            ),
        )),
        other => Err(syn::Error::new_spanned(
            id,
            format!(
                "`{other}` is not an activity of #[autodiff_reverse]; use `Active` (or `ActiveOnly`), `Const` (or `Constant`) or `Duplicated` (or `DuplicatedNoNeed`, `DuplicatedOnly`)"
            ),
        )),
    }
}

/// A forward-mode activity: `Dual` (a value and its tangent) or `Const`.
#[derive(Copy, Clone, PartialEq, Eq)]
enum FwdActivity {
    Dual,
    Const,
}

/// A forward-mode activity by its name, `std::autodiff`'s (`Constant` is `Const`):
/// `DualOnly` is `Dual` on a parameter and, on the return, the tangent without the
/// value in the result (`true` here). Vector forward mode (`Dualv`) and the
/// reverse mode's names are refused, saying so.
fn fwd_activity(id: &Ident) -> syn::Result<(FwdActivity, bool)> {
    match id.to_string().as_str() {
        "Dual" => Ok((FwdActivity::Dual, false)),
        "DualOnly" => Ok((FwdActivity::Dual, true)),
        "Const" | "Constant" => Ok((FwdActivity::Const, false)),
        "Dualv" | "DualvOnly" => Err(syn::Error::new_spanned(
            id,
            format!(
                "`{id}` is vector forward mode (several tangents per call), which #[autodiff_forward] does not do yet; use `Dual`, one tangent per call"
            ),
        )),
        "Active" | "ActiveOnly" | "Duplicated" | "DuplicatedNoNeed" | "DuplicatedOnly" => {
            Err(syn::Error::new_spanned(
                id,
                format!(
                    "`{id}` is reverse mode, which #[autodiff_forward] does not do; use #[autodiff_reverse] for it, or `Dual` or `Const` here"
                ),
            ))
        }
        other => Err(syn::Error::new_spanned(
            id,
            format!(
                "`{other}` is not an activity of #[autodiff_forward]; use `Dual` (or `DualOnly`) or `Const` (or `Constant`)"
            ),
        )),
    }
}

/// The kind of a parameter type, or an error naming what is supported.
fn param_kind(t: &Type, mode: Mode) -> syn::Result<Kind> {
    let scalar = |t: &Type| match t {
        Type::Path(p) if p.qself.is_none() => p.path.get_ident().map(Ident::to_string),
        _ => None,
    };
    let kind = match t {
        Type::Reference(r) => match (&*r.elem, r.mutability.is_some()) {
            (Type::Slice(s), m) if matches!(scalar(&s.elem).as_deref(), Some("f64" | "f32")) => {
                Some(if m { Kind::SliceMut } else { Kind::Slice })
            }
            (e, true) if matches!(scalar(e).as_deref(), Some("f64" | "f32")) => Some(Kind::RefMut),
            _ => None,
        },
        t => match scalar(t).as_deref() {
            Some("f64" | "f32") => Some(Kind::F),
            Some("usize" | "i64" | "i32") => Some(Kind::I),
            _ => None,
        },
    };
    kind.ok_or_else(|| {
        syn::Error::new_spanned(
            t,
            format!(
                "this parameter type is not supported yet by #[{}]; use f64, &[f64], &mut [f64], &mut f64 (or the same with f32), usize, i64 or i32; pass the fields of a struct as parameters of these types",
                mode.attr()
            ),
        )
    })
}

/// The float types a type names (`f64`, `f32`).
fn floats(t: &Type, out: &mut Vec<(&'static str, proc_macro2::Span)>) {
    fn walk(ts: TokenStream, out: &mut Vec<(&'static str, proc_macro2::Span)>) {
        for tt in ts {
            match tt {
                proc_macro2::TokenTree::Ident(i) if i == "f64" => out.push(("f64", i.span())),
                proc_macro2::TokenTree::Ident(i) if i == "f32" => out.push(("f32", i.span())),
                proc_macro2::TokenTree::Group(g) => walk(g.stream(), out),
                _ => {}
            }
        }
    }
    walk(quote!(#t), out);
}

/// One parameter: its name, type, kind, `mut`, and activity (of the mode: `A`).
struct Param<A> {
    name: Ident,
    ty: Type,
    kind: Kind,
    mutable: bool,
    act: A,
}

/// The expansion of `#[autodiff_reverse]` (`mode` reverse) or
/// `#[autodiff_forward]`: the function as written, then `NAME` and its kin.
pub fn expand(attr: TokenStream, item: TokenStream, mode: Mode) -> syn::Result<TokenStream> {
    let func: ItemFn = syn::parse2(item.clone())?;
    let expanded = match mode {
        Mode::Reverse => expand_reverse(attr, &func),
        Mode::Forward => expand_forward(attr, &func),
    };
    match expanded {
        Ok(t) => Ok(t),
        // The function stays, so that the error is the only one.
        Err(e) => {
            let e = e.to_compile_error();
            Ok(quote!(#func #e))
        }
    }
}

/// What both modes make of the attribute and the function: the checked signature
/// and the traced function.
struct Front<A, R> {
    /// The derivative's name, `NAME`.
    name: Ident,
    params: Vec<Param<A>>,
    /// The function's result: `Kind::F` or `Kind::Unit`.
    ret: Kind,
    /// The return's activity (none for a `()` function).
    ret_act: Option<R>,
    /// The float type, `f64` or `f32`.
    flt: TokenStream,
    /// `fn __gradlift_traced_NAME(..) -> .. { .. }`: the body translated.
    traced_fn: TokenStream,
    traced_name: Ident,
    /// The traced result type (`Var<f64>`, `()`).
    traced_ret: TokenStream,
    /// The traced parameter types as a tuple: `(Var<f64>, Slice<f64>,)`.
    sig_tuple: TokenStream,
    /// The IR function's name: the function's, or the derivative's for a function
    /// that calls itself (whose `#[differentiable]` twin traces `@NAME`).
    ir_name: String,
}

/// Parses the attribute's arguments and checks the function's signature against
/// them (`act` maps a parameter's activity, given its kind; `ret_act` the
/// return's), then translates the body: everything `mode` shares with the other.
fn front<A, R>(
    attr: TokenStream,
    func: &ItemFn,
    mode: Mode,
    act: impl Fn(&Ident, Kind) -> syn::Result<A>,
    ret_act: impl Fn(&Ident) -> syn::Result<R>,
) -> syn::Result<Front<A, R>> {
    let at = mode.attr();
    let args = Punctuated::<Ident, Token![,]>::parse_terminated.parse2(attr)?;
    let mut args = args.into_iter();
    let Some(name) = args.next() else {
        return Err(syn::Error::new(
            proc_macro2::Span::call_site(),
            format!(
                "#[{at}(NAME, ACTIVITIES..., RETURN_ACTIVITY)] needs the name of the derivative"
            ),
        ));
    };
    let acts: Vec<Ident> = args.collect();
    let sig = &func.sig;
    if let Some(g) = sig.generics.params.first() {
        return Err(syn::Error::new_spanned(
            g,
            format!("a generic function is not supported yet by #[{at}]; write it for f64"),
        ));
    }
    if let Some(x) = &sig.asyncness {
        return Err(syn::Error::new_spanned(
            x,
            format!("#[{at}] needs a plain fn"),
        ));
    }
    let ret = match &sig.output {
        ReturnType::Default => Kind::Unit,
        ReturnType::Type(_, t) => match &**t {
            Type::Tuple(t) if t.elems.is_empty() => Kind::Unit,
            t if param_kind(t, mode).ok() == Some(Kind::F) => Kind::F,
            t => {
                return Err(syn::Error::new_spanned(
                    t,
                    format!("this return type is not supported yet by #[{at}]; return f64 or ()"),
                ));
            }
        },
    };
    let n_params = sig.inputs.len();
    let want = n_params + usize::from(ret != Kind::Unit);
    if acts.len() != want {
        return Err(syn::Error::new_spanned(
            &sig.ident,
            format!(
                "#[{at}] needs {want} activities after the name: one per parameter{}, but has {}",
                if ret == Kind::Unit {
                    " (none for a `()` return)"
                } else {
                    ", then one for the return"
                },
                acts.len()
            ),
        ));
    }
    let mut params = Vec::new();
    for (input, act_id) in sig.inputs.iter().zip(&acts) {
        let (p, ty) = named_param(input, at)?;
        let kind = param_kind(ty, mode)?;
        params.push(Param {
            name: p.ident.clone(),
            ty: ty.clone(),
            kind,
            mutable: p.mutability.is_some(),
            act: act(act_id, kind)?,
        });
    }
    let ret_act = match acts.get(n_params) {
        Some(id) => Some(ret_act(id)?),
        None => None,
    };

    // The float type: `f64` or `f32`, one per function.
    let mut fls = Vec::new();
    for p in &params {
        floats(&p.ty, &mut fls);
    }
    if let ReturnType::Type(_, t) = &sig.output {
        floats(t, &mut fls);
    }
    let fl = fls.first().map_or("f64", |f| f.0);
    if let Some((other, at_span)) = fls.iter().find(|f| f.0 != fl) {
        return Err(syn::Error::new(
            *at_span,
            format!(
                "mixing {fl} and {other} is not supported yet by #[{at}]; write the function over one float type"
            ),
        ));
    }
    let flt: TokenStream = fl.parse().expect("a type");

    // The traced function.
    let mut tr = Translator::new(
        &params
            .iter()
            .map(|p| (p.name.clone(), p.kind, p.mutable))
            .collect::<Vec<_>>(),
        fl,
        at,
    );
    let body = tr.body(&func.block, ret)?;
    // A function that calls itself is marked `#[differentiable]` too (its twin
    // traces it as `@NAME`, recursion included): the traced function is then a call
    // of the twin, traced under the derivative's name, so that `@NAME` is traced
    // once.
    let recursive = calls_itself(&func.block, &sig.ident);
    let ir_name = if recursive {
        name.to_string()
    } else {
        sig.ident.to_string()
    };
    let body = if recursive {
        let twin = crate::differentiable::twin(&sig.ident);
        let args = params.iter().map(|p| &p.name);
        quote!(#twin(#(#args),*))
    } else {
        body
    };
    let traced_ty = |k: Kind| match k {
        Kind::F => quote!(::gradlift::trace::Var<#flt>),
        Kind::I => quote!(::gradlift::trace::Var<i64>),
        Kind::B => quote!(::gradlift::trace::Var<bool>),
        Kind::Slice => quote!(::gradlift::trace::Slice<#flt>),
        Kind::SliceMut | Kind::RefMut => quote!(::gradlift::trace::SliceMut<#flt>),
        Kind::Unit => quote!(()),
    };
    let traced_params = params.iter().map(|p| {
        let (n, t) = (&p.name, traced_ty(p.kind));
        let m = (p.mutable || matches!(p.kind, Kind::SliceMut | Kind::RefMut)).then(|| quote!(mut));
        quote!(#m #n: #t)
    });
    let traced_ret = traced_ty(ret);
    let sig_types: Vec<_> = params.iter().map(|p| traced_ty(p.kind)).collect();
    let traced_name = format_ident!("__gradlift_traced_{}", name);
    let traced_fn = quote! {
        #[allow(
            unused_mut,
            unused_variables,
            unused_assignments,
            unused_braces,
            unused_parens,
            non_snake_case,
            clippy::all
        )]
        fn #traced_name(#(#traced_params),*) -> #traced_ret {
            #body
        }
    };
    Ok(Front {
        name,
        params,
        ret,
        ret_act,
        flt,
        traced_fn,
        traced_name,
        traced_ret,
        sig_tuple: quote!((#(#sig_types,)*)),
        ir_name,
    })
}

/// What a mode puts into `NAME_try` and `NAME`.
struct Generated {
    /// `NAME`'s parameters (`x: f64`, `__gradlift_shadow_x: &mut [f64]`) and their
    /// names, for `NAME` to pass them on.
    outer: Vec<TokenStream>,
    outer_names: Vec<TokenStream>,
    /// The checks of the arguments before the call (a shadow's length).
    checks: Vec<TokenStream>,
    /// The type of the compiled derivative shared by the threads.
    shared_ty: TokenStream,
    /// The expression that traces, derives and compiles it (a `Result`).
    share: TokenStream,
    /// The call of `__gradlift_g` with `__gradlift_state`, a `Result`; and the
    /// pattern its success is bound to.
    call: TokenStream,
    bind: TokenStream,
    /// `NAME`'s result: its type and the expression that makes it from `bind`.
    result_ty: TokenStream,
    result: TokenStream,
    /// The docs of `NAME` and `NAME_try`.
    doc: String,
    try_doc: String,
}

/// `NAME_try` (the traced function, the derivative compiled once per process, the
/// per-thread state, the call) and `NAME` (`NAME_try`, panicking with its error).
fn generate(func: &ItemFn, front: &Front<impl Sized, impl Sized>, g: Generated) -> TokenStream {
    let sig = &func.sig;
    let Generated {
        outer,
        outer_names,
        checks,
        shared_ty,
        share,
        call,
        bind,
        result_ty,
        result,
        doc,
        try_doc,
    } = g;
    let name = &front.name;
    let traced_fn = &front.traced_fn;
    let vis = &func.vis;
    let fname = sig.ident.to_string();
    let dname = name.to_string();
    let try_name = format_ident!("{}_try", name);
    // `file!()` and `line!()` spanned by the function's name: they give the line of
    // the function as written.
    let span = sig.ident.span();
    let here_file = quote_spanned!(span=> ::core::file!());
    let here_line = quote_spanned!(span=> ::core::line!());
    let panic_mac = quote_spanned!(span=> ::core::panic!);
    quote! {
        #[doc = #try_doc]
        #[allow(clippy::too_many_arguments)]
        #vis fn #try_name(#(#outer),*) -> ::core::result::Result<#result_ty, ::gradlift::Error> {
            #traced_fn
            // Traced, derived and compiled once per process, then shared by threads.
            static __GRADLIFT_SHARED: ::std::sync::OnceLock<
                ::core::result::Result<#shared_ty, ::gradlift::Error>,
            > = ::std::sync::OnceLock::new();
            // Each thread's workspace and buffers.
            ::std::thread_local! {
                static __GRADLIFT_STATE: ::core::cell::RefCell<::gradlift::CallState> =
                    ::core::cell::RefCell::new(::gradlift::CallState::new());
            }
            #(#checks)*
            let __gradlift_g = match __GRADLIFT_SHARED.get_or_init(|| #share) {
                ::core::result::Result::Ok(g) => g,
                ::core::result::Result::Err(e) => return ::core::result::Result::Err(e.clone()),
            };
            let #bind = ::gradlift::autodiff::macro_support::with_state(
                &__GRADLIFT_STATE,
                |__gradlift_state| #call,
            )?;
            ::core::result::Result::Ok(#result)
        }

        #[doc = #doc]
        #[allow(clippy::too_many_arguments)]
        #[track_caller]
        #vis fn #name(#(#outer),*) -> #result_ty {
            match #try_name(#(#outer_names),*) {
                ::core::result::Result::Ok(r) => r,
                ::core::result::Result::Err(e) => #panic_mac(
                    "{}",
                    ::gradlift::autodiff::macro_support::panic_message(
                        &e, #fname, #dname, #here_file, #here_line,
                    )
                ),
            }
        }
    }
}

/// The check that the slice `n`'s companion `d` (its `what`: shadow, tangent) has
/// its length, returning `NAME_try`'s error if not.
fn length_check(n: &Ident, d: &Ident, flt: &TokenStream, what: &str) -> TokenStream {
    let msg = format!("the {what} of `{n}` has length {{}} but `{n}` has length {{}}");
    quote! {
        // `<[T]>::len`, not `.len()`: a trait in the caller's scope
        // (gradlift's `SliceRead`) may have a `len` method too.
        if <[#flt]>::len(#d) != <[#flt]>::len(#n) {
            return ::core::result::Result::Err(::gradlift::Error::BadArguments(
                ::std::format!(#msg, <[#flt]>::len(#d), <[#flt]>::len(#n)),
            ));
        }
    }
}

/// A tuple of two or more, the value alone for one, `()` for none: `(type, value)`.
fn shape(items: &[TokenStream], tys: &[TokenStream]) -> (TokenStream, TokenStream) {
    match items.len() {
        0 => (quote!(()), quote!(())),
        1 => (tys[0].clone(), items[0].clone()),
        _ => (quote!((#(#tys,)*)), quote!((#(#items,)*))),
    }
}

/// A parameter's argument as gradlift takes it: an integer as `i64`, a `&mut f64`
/// as a slice of one.
fn gradlift_arg(n: &Ident, kind: Kind) -> TokenStream {
    match kind {
        Kind::I => quote!((#n as i64)),
        Kind::RefMut => quote!(::core::slice::from_mut(#n)),
        _ => quote!(#n),
    }
}

/// The type of `Const(x)` for a parameter of kind `kind`, for `share`'s type
/// arguments.
fn const_ty(kind: Kind, flt: &TokenStream) -> TokenStream {
    match kind {
        Kind::I => quote!(::gradlift::Const<i64>),
        Kind::Slice => quote!(::gradlift::Const<&'static [#flt]>),
        Kind::SliceMut | Kind::RefMut => quote!(::gradlift::Const<&'static mut [#flt]>),
        _ => quote!(::gradlift::Const<#flt>),
    }
}

/// `#[autodiff_reverse]`: `NAME`, `NAME_try`, `NAME_grad`.
fn expand_reverse(attr: TokenStream, func: &ItemFn) -> syn::Result<TokenStream> {
    let front = front(
        attr,
        func,
        Mode::Reverse,
        |act_id, kind| {
            let act = activity(act_id)?.0;
            let fits = match act {
                Activity::Const => true,
                Activity::Active => kind == Kind::F,
                Activity::Duplicated => {
                    matches!(kind, Kind::Slice | Kind::SliceMut | Kind::RefMut)
                }
            };
            if !fits {
                let msg = match act {
                    Activity::Active => {
                        "`Active` needs an f64 parameter; use `Duplicated` for a slice or `&mut f64`, `Const` for an integer"
                    }
                    _ => {
                        "`Duplicated` needs a `&[f64]`, `&mut [f64]` or `&mut f64` parameter; use `Active` for an f64, `Const` for an integer"
                    }
                };
                return Err(syn::Error::new_spanned(act_id, msg));
            }
            Ok(act)
        },
        // `ActiveOnly` on the return: the result leaves the value out.
        |id| {
            let (a, only) = activity(id)?;
            if a == Activity::Duplicated {
                return Err(syn::Error::new_spanned(
                    id,
                    "`Duplicated` does not fit an f64 return; use `Active`, `ActiveOnly` or `Const`",
                ));
            }
            Ok((a, only))
        },
    )?;
    let Front {
        name,
        params,
        ret,
        ret_act,
        flt,
        traced_name,
        traced_ret,
        sig_tuple,
        ir_name,
        ..
    } = &front;
    let (ret_act, no_value) = match ret_act {
        Some((a, only)) => (Some(*a), *only),
        None => (None, false),
    };

    // `NAME`'s parameters and the activities they become.
    let mut outer = Vec::new();
    let mut outer_names = Vec::new();
    let mut acts_out = Vec::new();
    let mut act_tys = Vec::new();
    let mut grads = Vec::new();
    let mut results = Vec::new();
    let mut checks = Vec::new();
    // `NAME_grad`: its parameters, the fresh shadows, `NAME`'s arguments, results.
    let mut plain = Vec::new();
    let mut fresh = Vec::new();
    let mut grad_args = Vec::new();
    let mut grad_results = Vec::new();
    let mut grad_tys = Vec::new();
    if *ret == Kind::F && !no_value {
        results.push(quote!(__gradlift_value));
        grad_results.push(quote!(__gradlift_value));
        grad_tys.push(flt.clone());
    }
    for p in params {
        let (n, t) = (&p.name, &p.ty);
        outer.push(quote!(#n: #t));
        outer_names.push(quote!(#n));
        plain.push(quote!(#n: #t));
        grad_args.push(quote!(#n));
        let arg = gradlift_arg(n, p.kind);
        match p.act {
            Activity::Active => {
                let g = format_ident!("__gradlift_d_{}", n);
                acts_out.push(quote!(::gradlift::Active(#arg)));
                act_tys.push(quote!(::gradlift::Active<#flt>));
                grads.push(quote!(#g));
                results.push(quote!(#g));
                grad_results.push(quote!(#g));
                grad_tys.push(flt.clone());
            }
            Activity::Const => {
                acts_out.push(quote!(::gradlift::Const(#arg)));
                act_tys.push(const_ty(p.kind, flt));
                grads.push(quote!(()));
            }
            Activity::Duplicated => {
                let d = format_ident!("__gradlift_shadow_{}", n);
                let (dt, darg) = if p.kind == Kind::RefMut {
                    fresh.push(quote!(let mut #d: #flt = 0.0;));
                    grad_tys.push(quote!(#flt));
                    (quote!(&mut #flt), quote!(::core::slice::from_mut(#d)))
                } else {
                    fresh.push(
                        quote!(let mut #d: ::std::vec::Vec<#flt> = ::std::vec![0.0; <[#flt]>::len(#n)];),
                    );
                    grad_tys.push(quote!(::std::vec::Vec<#flt>));
                    checks.push(length_check(n, &d, flt, "shadow"));
                    (quote!(&mut [#flt]), quote!(#d))
                };
                outer.push(quote!(#d: #dt));
                outer_names.push(quote!(#d));
                grad_args.push(quote!(&mut #d));
                grad_results.push(quote!(#d));
                acts_out.push(quote!(::gradlift::Duplicated(#arg, #darg)));
                act_tys.push(if p.kind == Kind::Slice {
                    quote!(::gradlift::Duplicated<&'static [#flt], &'static mut [#flt]>)
                } else {
                    quote!(::gradlift::Duplicated<&'static mut [#flt], &'static mut [#flt]>)
                });
                grads.push(quote!(()));
            }
        }
    }
    let (call, ret_tokens) = match ret_act {
        Some(Activity::Active) => {
            outer.push(quote!(__gradlift_seed: #flt));
            outer_names.push(quote!(__gradlift_seed));
            grad_args.push(quote!(1.0));
            (
                quote!(__gradlift_g.pullback(__gradlift_state, &[f64::from(__gradlift_seed)], (#(#acts_out,)*))),
                quote!(::gradlift::Return::Active),
            )
        }
        _ => (
            quote!(__gradlift_g.gradient(__gradlift_state, (#(#acts_out,)*))),
            quote!(::gradlift::Return::Const),
        ),
    };
    let value_pat = match (ret, no_value) {
        (Kind::F, false) => quote!(__gradlift_value),
        (Kind::F, true) => quote!(_),
        _ => quote!(()),
    };
    let flts: Vec<_> = results.iter().map(|_| flt.clone()).collect();
    let (result_ty, result) = shape(&results, &flts);
    // `NAME_grad` binds `NAME`'s result to the same names.
    let result_pat = result.clone();
    let (grad_ty, grad_result) = shape(&grad_results, &grad_tys);
    let vis = &func.vis;
    let fname = func.sig.ident.to_string();
    let dname = name.to_string();
    let try_name = format_ident!("{}_try", name);
    let grad_name = format_ident!("{}_grad", name);
    let grad_doc = format!(
        "The value and fresh gradients of [`{fname}`] (through [`{dname}`] with zeroed \
         shadows and a seed of 1), made by `#[autodiff_reverse]`."
    );
    let generated = generate(
        func,
        &front,
        Generated {
            outer,
            outer_names,
            checks,
            shared_ty: quote!(::gradlift::SharedGradient<#sig_tuple, #traced_ret>),
            share: quote! {
                ::gradlift::autodiff::macro_support::share::<#sig_tuple, _, (#(#act_tys,)*)>(
                    #ir_name,
                    #dname,
                    #traced_name,
                    #ret_tokens,
                )
            },
            call,
            bind: quote!((#value_pat, (#(#grads,)*))),
            result_ty,
            result,
            doc: format!(
                "The reverse-mode derivative of [`{fname}`], made by `#[autodiff_reverse]`; panics \
                 where [`{try_name}`] returns an error."
            ),
            try_doc: format!(
                "[`{dname}`], returning gradlift's error instead of panicking, made by \
                 `#[autodiff_reverse]`."
            ),
        },
    );
    Ok(quote! {
        #func

        #generated

        #[doc = #grad_doc]
        #[allow(clippy::too_many_arguments)]
        #vis fn #grad_name(#(#plain),*) -> #grad_ty {
            #(#fresh)*
            let #result_pat = #name(#(#grad_args),*);
            #grad_result
        }
    })
}

/// `#[autodiff_forward]`: `NAME`, `NAME_try`.
fn expand_forward(attr: TokenStream, func: &ItemFn) -> syn::Result<TokenStream> {
    let front = front(
        attr,
        func,
        Mode::Forward,
        |act_id, kind| {
            let act = fwd_activity(act_id)?.0;
            if act == FwdActivity::Dual
                && !matches!(kind, Kind::F | Kind::Slice | Kind::SliceMut | Kind::RefMut)
            {
                return Err(syn::Error::new_spanned(
                    act_id,
                    "`Dual` needs an f64, `&[f64]`, `&mut [f64]` or `&mut f64` parameter; use `Const` for an integer",
                ));
            }
            Ok(act)
        },
        // `DualOnly` on the return: the result is the tangent alone.
        fwd_activity,
    )?;
    let Front {
        name,
        params,
        ret,
        ret_act,
        flt,
        traced_name,
        traced_ret,
        sig_tuple,
        ir_name,
        ..
    } = &front;

    // `NAME`'s parameters (each `Dual` one followed by its tangent, of the same
    // type) and the activities they become.
    let mut outer = Vec::new();
    let mut outer_names = Vec::new();
    let mut acts_out = Vec::new();
    let mut act_tys = Vec::new();
    let mut checks = Vec::new();
    for p in params {
        let (n, t) = (&p.name, &p.ty);
        outer.push(quote!(#n: #t));
        outer_names.push(quote!(#n));
        let arg = gradlift_arg(n, p.kind);
        match p.act {
            FwdActivity::Const => {
                acts_out.push(quote!(::gradlift::Const(#arg)));
                act_tys.push(const_ty(p.kind, flt));
            }
            FwdActivity::Dual => {
                let d = format_ident!("__gradlift_tangent_{}", n);
                let (dt, darg, act_ty) = match p.kind {
                    Kind::F => (
                        quote!(#flt),
                        quote!(#d),
                        quote!(::gradlift::Dual<#flt, #flt>),
                    ),
                    Kind::Slice => (
                        quote!(&[#flt]),
                        quote!(#d),
                        quote!(::gradlift::Dual<&'static [#flt], &'static [#flt]>),
                    ),
                    Kind::SliceMut => (
                        quote!(&mut [#flt]),
                        quote!(#d),
                        quote!(::gradlift::Dual<&'static mut [#flt], &'static mut [#flt]>),
                    ),
                    _ => (
                        quote!(&mut #flt),
                        quote!(::core::slice::from_mut(#d)),
                        quote!(::gradlift::Dual<&'static mut [#flt], &'static mut [#flt]>),
                    ),
                };
                if matches!(p.kind, Kind::Slice | Kind::SliceMut) {
                    checks.push(length_check(n, &d, flt, "tangent"));
                }
                outer.push(quote!(#d: #dt));
                outer_names.push(quote!(#d));
                acts_out.push(quote!(::gradlift::Dual(#arg, #darg)));
                act_tys.push(act_ty);
            }
        }
    }
    // The return: the value and its tangent (`Dual`), the tangent (`DualOnly`), the
    // value (`Const`, and a `()` function, whose result has no tangent).
    let acts_tuple = quote!((#(#acts_out,)*));
    let (ret_tokens, call, result_ty) = match (ret, ret_act) {
        (Kind::F, Some((FwdActivity::Dual, false))) => (
            quote!(::gradlift::DualReturn::Dual),
            quote!(__gradlift_g.jvp(__gradlift_state, #acts_tuple)),
            quote!((#flt, #flt)),
        ),
        (Kind::F, Some((FwdActivity::Dual, true))) => (
            quote!(::gradlift::DualReturn::DualOnly),
            quote!(__gradlift_g.jvp_only(__gradlift_state, #acts_tuple)),
            quote!(#flt),
        ),
        (Kind::F, _) => (
            quote!(::gradlift::DualReturn::Const),
            quote!(__gradlift_g.jvp_const(__gradlift_state, #acts_tuple)),
            quote!(#flt),
        ),
        _ => (
            quote!(::gradlift::DualReturn::Const),
            quote!(__gradlift_g.jvp_const(__gradlift_state, #acts_tuple)),
            quote!(()),
        ),
    };
    let fname = func.sig.ident.to_string();
    let dname = name.to_string();
    let try_name = format_ident!("{}_try", name);
    let generated = generate(
        func,
        &front,
        Generated {
            outer,
            outer_names,
            checks,
            shared_ty: quote!(::gradlift::SharedJvp<#sig_tuple, #traced_ret>),
            share: quote! {
                ::gradlift::autodiff::macro_support::share_jvp::<#sig_tuple, _, (#(#act_tys,)*)>(
                    #ir_name,
                    #dname,
                    #traced_name,
                    #ret_tokens,
                )
            },
            call,
            bind: quote!(__gradlift_result),
            result_ty,
            result: quote!(__gradlift_result),
            doc: format!(
                "The forward-mode derivative of [`{fname}`], made by `#[autodiff_forward]`; panics \
                 where [`{try_name}`] returns an error."
            ),
            try_doc: format!(
                "[`{dname}`], returning gradlift's error instead of panicking, made by \
                 `#[autodiff_forward]`."
            ),
        },
    );
    Ok(quote! {
        #func

        #generated
    })
}

/// Whether `block` calls the function `name` (by a path ending in it).
fn calls_itself(block: &syn::Block, name: &Ident) -> bool {
    struct Find<'a>(&'a Ident, bool);
    impl<'ast> syn::visit::Visit<'ast> for Find<'_> {
        fn visit_expr_call(&mut self, c: &'ast syn::ExprCall) {
            if let syn::Expr::Path(p) = &*c.func
                && p.path.segments.last().is_some_and(|s| s.ident == *self.0)
            {
                self.1 = true;
            }
            syn::visit::visit_expr_call(self, c);
        }
    }
    let mut f = Find(name, false);
    syn::visit::Visit::visit_block(&mut f, block);
    f.1
}

/// A parameter of a function under `#[attr]`: its name pattern and its type, or the
/// error for a `self` parameter or a pattern that is not a plain name.
pub fn named_param<'a>(input: &'a FnArg, attr: &str) -> syn::Result<(&'a syn::PatIdent, &'a Type)> {
    let FnArg::Typed(pt) = input else {
        return Err(syn::Error::new_spanned(
            input,
            format!("a method is not supported yet by #[{attr}]; write a free function"),
        ));
    };
    let Pat::Ident(p) = &*pt.pat else {
        return Err(syn::Error::new_spanned(
            &pt.pat,
            format!("this parameter pattern is not supported yet by #[{attr}]; name the parameter"),
        ));
    };
    Ok((p, &pt.ty))
}
