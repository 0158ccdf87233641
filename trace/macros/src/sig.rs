//! The signature side of `#[autodiff_reverse]`: the activities checked against the
//! parameters, the traced function's signature, and the generated functions:
//! `NAME_try`, which traces and compiles once per process (a
//! `gradlift::SharedGradient` in a `OnceLock`), calls with a per-thread
//! `gradlift::CallState`, and maps its arguments to gradlift's activities; `NAME`,
//! which panics with its error; `NAME_grad`, fresh gradients.

use proc_macro2::TokenStream;
use quote::{format_ident, quote, quote_spanned};
use syn::parse::Parser;
use syn::punctuated::Punctuated;
use syn::{FnArg, Ident, ItemFn, Pat, ReturnType, Token, Type};

use crate::body::{Kind, Translator};

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
                "`{id}` is forward mode (`std::autodiff::autodiff_forward`), which #[autodiff_reverse] does not do; use `Active`, `Const` or `Duplicated`"
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

/// The kind of a parameter type, or an error naming what is supported.
fn param_kind(t: &Type) -> syn::Result<Kind> {
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
            "this parameter type is not supported yet by #[autodiff_reverse]; use f64, &[f64], &mut [f64], &mut f64 (or the same with f32), usize, i64 or i32; pass the fields of a struct as parameters of these types",
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

/// One parameter: its name, kind, `mut`, and activity.
struct Param {
    name: Ident,
    ty: Type,
    kind: Kind,
    mutable: bool,
    act: Activity,
}

/// The expansion: the function as written, then `NAME`.
pub fn expand(attr: TokenStream, item: TokenStream) -> syn::Result<TokenStream> {
    let func: ItemFn = syn::parse2(item.clone())?;
    match expand_fn(attr, &func) {
        Ok(t) => Ok(t),
        // The function stays, so that the error is the only one.
        Err(e) => {
            let e = e.to_compile_error();
            Ok(quote!(#func #e))
        }
    }
}

fn expand_fn(attr: TokenStream, func: &ItemFn) -> syn::Result<TokenStream> {
    let args = Punctuated::<Ident, Token![,]>::parse_terminated.parse2(attr)?;
    let mut args = args.into_iter();
    let Some(name) = args.next() else {
        return Err(syn::Error::new(
            proc_macro2::Span::call_site(),
            "#[autodiff_reverse(NAME, ACTIVITIES..., RETURN_ACTIVITY)] needs the name of the derivative",
        ));
    };
    let acts: Vec<Ident> = args.collect();
    let sig = &func.sig;
    if let Some(g) = sig.generics.params.first() {
        return Err(syn::Error::new_spanned(
            g,
            "a generic function is not supported yet by #[autodiff_reverse]; write it for f64",
        ));
    }
    if let Some(x) = &sig.asyncness {
        return Err(syn::Error::new_spanned(
            x,
            "#[autodiff_reverse] needs a plain fn",
        ));
    }
    let ret = match &sig.output {
        ReturnType::Default => Kind::Unit,
        ReturnType::Type(_, t) => match &**t {
            Type::Tuple(t) if t.elems.is_empty() => Kind::Unit,
            t if param_kind(t).ok() == Some(Kind::F) => Kind::F,
            t => {
                return Err(syn::Error::new_spanned(
                    t,
                    "this return type is not supported yet by #[autodiff_reverse]; return f64 or ()",
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
                "#[autodiff_reverse] needs {want} activities after the name: one per parameter{}, but has {}",
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
        let (p, ty) = named_param(input, "autodiff_reverse")?;
        let kind = param_kind(ty)?;
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
        params.push(Param {
            name: p.ident.clone(),
            ty: ty.clone(),
            kind,
            mutable: p.mutability.is_some(),
            act,
        });
    }
    // `ActiveOnly` on the return: the result leaves the value out.
    let (ret_act, no_value) = match acts.get(n_params) {
        Some(id) => {
            let (a, only) = activity(id)?;
            if a == Activity::Duplicated {
                return Err(syn::Error::new_spanned(
                    id,
                    "`Duplicated` does not fit an f64 return; use `Active`, `ActiveOnly` or `Const`",
                ));
            }
            (Some(a), only)
        }
        None => (None, false),
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
    if let Some((other, at)) = fls.iter().find(|f| f.0 != fl) {
        return Err(syn::Error::new(
            *at,
            format!(
                "mixing {fl} and {other} is not supported yet by #[autodiff_reverse]; write the function over one float type"
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
    let fname = sig.ident.to_string();

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
    if ret == Kind::F && !no_value {
        results.push(quote!(__gradlift_value));
        grad_results.push(quote!(__gradlift_value));
        grad_tys.push(flt.clone());
    }
    for p in &params {
        let (n, t) = (&p.name, &p.ty);
        outer.push(quote!(#n: #t));
        outer_names.push(quote!(#n));
        plain.push(quote!(#n: #t));
        grad_args.push(quote!(#n));
        let arg = match p.kind {
            Kind::I => quote!((#n as i64)),
            Kind::RefMut => quote!(::core::slice::from_mut(#n)),
            _ => quote!(#n),
        };
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
                act_tys.push(match p.kind {
                    Kind::I => quote!(::gradlift::Const<i64>),
                    Kind::Slice => quote!(::gradlift::Const<&'static [#flt]>),
                    Kind::SliceMut | Kind::RefMut => {
                        quote!(::gradlift::Const<&'static mut [#flt]>)
                    }
                    _ => quote!(::gradlift::Const<#flt>),
                });
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
                    let msg =
                        format!("the shadow of `{n}` has length {{}} but `{n}` has length {{}}");
                    checks.push(quote! {
                        // `<[T]>::len`, not `.len()`: a trait in the caller's scope
                        // (gradlift's `SliceRead`) may have a `len` method too.
                        if <[#flt]>::len(#d) != <[#flt]>::len(#n) {
                            return ::core::result::Result::Err(::gradlift::Error::BadArguments(
                                ::std::format!(#msg, <[#flt]>::len(#d), <[#flt]>::len(#n)),
                            ));
                        }
                    });
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
    // A tuple of two or more, the value alone for one, `()` for none.
    let shape = |items: &[TokenStream], tys: &[TokenStream]| match items.len() {
        0 => (quote!(()), quote!(())),
        1 => (tys[0].clone(), items[0].clone()),
        _ => (quote!((#(#tys,)*)), quote!((#(#items,)*))),
    };
    let flts: Vec<_> = results.iter().map(|_| flt.clone()).collect();
    let (result_ty, result) = shape(&results, &flts);
    let (grad_ty, grad_result) = shape(&grad_results, &grad_tys);
    let vis = &func.vis;
    let dname = name.to_string();
    let try_name = format_ident!("{}_try", name);
    let grad_name = format_ident!("{}_grad", name);
    let doc = format!(
        "The reverse-mode derivative of [`{fname}`], made by `#[autodiff_reverse]`; panics \
         where [`{try_name}`] returns an error."
    );
    let try_doc = format!(
        "[`{dname}`], returning gradlift's error instead of panicking, made by \
         `#[autodiff_reverse]`."
    );
    let grad_doc = format!(
        "The value and fresh gradients of [`{fname}`] (through [`{dname}`] with zeroed \
         shadows and a seed of 1), made by `#[autodiff_reverse]`."
    );
    // `file!()` and `line!()` spanned by the function's name: they give the line of
    // the function as written.
    let span = sig.ident.span();
    let here_file = quote_spanned!(span=> ::core::file!());
    let here_line = quote_spanned!(span=> ::core::line!());
    let panic_mac = quote_spanned!(span=> ::core::panic!);
    let sig_tuple = quote!((#(#sig_types,)*));
    Ok(quote! {
        #func

        #[doc = #try_doc]
        #[allow(clippy::too_many_arguments)]
        #vis fn #try_name(#(#outer),*) -> ::core::result::Result<#result_ty, ::gradlift::Error> {
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
            // Traced, derived and compiled once per process, then shared by threads.
            static __GRADLIFT_SHARED: ::std::sync::OnceLock<
                ::core::result::Result<
                    ::gradlift::SharedGradient<#sig_tuple, #traced_ret>,
                    ::gradlift::Error,
                >,
            > = ::std::sync::OnceLock::new();
            // Each thread's workspace and buffers.
            ::std::thread_local! {
                static __GRADLIFT_STATE: ::core::cell::RefCell<::gradlift::CallState> =
                    ::core::cell::RefCell::new(::gradlift::CallState::new());
            }
            #(#checks)*
            let __gradlift_g = match __GRADLIFT_SHARED.get_or_init(|| {
                ::gradlift::autodiff::macro_support::share::<#sig_tuple, _, (#(#act_tys,)*)>(
                    #ir_name,
                    #dname,
                    #traced_name,
                    #ret_tokens,
                )
            }) {
                ::core::result::Result::Ok(g) => g,
                ::core::result::Result::Err(e) => return ::core::result::Result::Err(e.clone()),
            };
            let (#value_pat, (#(#grads,)*)) = ::gradlift::autodiff::macro_support::with_state(
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

        #[doc = #grad_doc]
        #[allow(clippy::too_many_arguments)]
        #vis fn #grad_name(#(#plain),*) -> #grad_ty {
            #(#fresh)*
            let #result = #name(#(#grad_args),*);
            #grad_result
        }
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
