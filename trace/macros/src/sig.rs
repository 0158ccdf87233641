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

fn activity(id: &Ident) -> syn::Result<Activity> {
    match id.to_string().as_str() {
        "Active" => Ok(Activity::Active),
        "Const" => Ok(Activity::Const),
        "Duplicated" => Ok(Activity::Duplicated),
        other => Err(syn::Error::new_spanned(
            id,
            format!(
                "`{other}` is not supported yet by #[autodiff_reverse]; use `Active`, `Const` or `Duplicated`"
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
            (Type::Slice(s), m) if scalar(&s.elem).as_deref() == Some("f64") => {
                Some(if m { Kind::SliceMut } else { Kind::Slice })
            }
            (e, true) if scalar(e).as_deref() == Some("f64") => Some(Kind::RefMut),
            _ => None,
        },
        t => match scalar(t).as_deref() {
            Some("f64") => Some(Kind::F),
            Some("usize" | "i64") => Some(Kind::I),
            _ => None,
        },
    };
    kind.ok_or_else(|| {
        syn::Error::new_spanned(
            t,
            "this parameter type is not supported yet by #[autodiff_reverse]; use f64, &[f64], &mut [f64], &mut f64, usize or i64",
        )
    })
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
        let FnArg::Typed(pt) = input else {
            return Err(syn::Error::new_spanned(
                input,
                "a method is not supported yet by #[autodiff_reverse]; write a free function",
            ));
        };
        let Pat::Ident(p) = &*pt.pat else {
            return Err(syn::Error::new_spanned(
                &pt.pat,
                "this parameter pattern is not supported yet by #[autodiff_reverse]; name the parameter",
            ));
        };
        let kind = param_kind(&pt.ty)?;
        let act = activity(act_id)?;
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
            ty: (*pt.ty).clone(),
            kind,
            mutable: p.mutability.is_some(),
            act,
        });
    }
    let ret_act = match acts.get(n_params) {
        Some(id) => {
            let a = activity(id)?;
            if a == Activity::Duplicated {
                return Err(syn::Error::new_spanned(
                    id,
                    "`Duplicated` does not fit an f64 return; use `Active` or `Const`",
                ));
            }
            Some(a)
        }
        None => None,
    };

    // The traced function.
    let mut tr = Translator::new(
        &params
            .iter()
            .map(|p| (p.name.clone(), p.kind, p.mutable))
            .collect::<Vec<_>>(),
    );
    let body = tr.body(&func.block, ret)?;
    let traced_ty = |k: Kind| match k {
        Kind::F => quote!(::gradlift::trace::Var<f64>),
        Kind::I => quote!(::gradlift::trace::Var<i64>),
        Kind::B => quote!(::gradlift::trace::Var<bool>),
        Kind::Slice => quote!(::gradlift::trace::Slice<f64>),
        Kind::SliceMut | Kind::RefMut => quote!(::gradlift::trace::SliceMut<f64>),
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
    if ret == Kind::F {
        results.push(quote!(__gradlift_value));
        grad_results.push(quote!(__gradlift_value));
        grad_tys.push(quote!(f64));
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
                act_tys.push(quote!(::gradlift::Active<f64>));
                grads.push(quote!(#g));
                results.push(quote!(#g));
                grad_results.push(quote!(#g));
                grad_tys.push(quote!(f64));
            }
            Activity::Const => {
                acts_out.push(quote!(::gradlift::Const(#arg)));
                act_tys.push(match p.kind {
                    Kind::I => quote!(::gradlift::Const<i64>),
                    Kind::Slice => quote!(::gradlift::Const<&'static [f64]>),
                    Kind::SliceMut | Kind::RefMut => {
                        quote!(::gradlift::Const<&'static mut [f64]>)
                    }
                    _ => quote!(::gradlift::Const<f64>),
                });
                grads.push(quote!(()));
            }
            Activity::Duplicated => {
                let d = format_ident!("__gradlift_shadow_{}", n);
                let (dt, darg) = if p.kind == Kind::RefMut {
                    fresh.push(quote!(let mut #d = 0.0f64;));
                    grad_tys.push(quote!(f64));
                    (quote!(&mut f64), quote!(::core::slice::from_mut(#d)))
                } else {
                    fresh.push(quote!(let mut #d = ::std::vec![0.0f64; #n.len()];));
                    grad_tys.push(quote!(::std::vec::Vec<f64>));
                    let msg =
                        format!("the shadow of `{n}` has length {{}} but `{n}` has length {{}}");
                    checks.push(quote! {
                        if #d.len() != #n.len() {
                            return ::core::result::Result::Err(::gradlift::Error::BadArguments(
                                ::std::format!(#msg, #d.len(), #n.len()),
                            ));
                        }
                    });
                    (quote!(&mut [f64]), quote!(#d))
                };
                outer.push(quote!(#d: #dt));
                outer_names.push(quote!(#d));
                grad_args.push(quote!(&mut #d));
                grad_results.push(quote!(#d));
                acts_out.push(quote!(::gradlift::Duplicated(#arg, #darg)));
                act_tys.push(if p.kind == Kind::Slice {
                    quote!(::gradlift::Duplicated<&'static [f64], &'static mut [f64]>)
                } else {
                    quote!(::gradlift::Duplicated<&'static mut [f64], &'static mut [f64]>)
                });
                grads.push(quote!(()));
            }
        }
    }
    let (call, ret_tokens) = match ret_act {
        Some(Activity::Active) => {
            outer.push(quote!(__gradlift_seed: f64));
            outer_names.push(quote!(__gradlift_seed));
            grad_args.push(quote!(1.0));
            (
                quote!(__gradlift_g.pullback(__gradlift_state, &[__gradlift_seed], (#(#acts_out,)*))),
                quote!(::gradlift::Return::Active),
            )
        }
        _ => (
            quote!(__gradlift_g.gradient(__gradlift_state, (#(#acts_out,)*))),
            quote!(::gradlift::Return::Const),
        ),
    };
    let value_pat = if ret == Kind::F {
        quote!(__gradlift_value)
    } else {
        quote!(())
    };
    // A tuple of two or more, the value alone for one, `()` for none.
    let shape = |items: &[TokenStream], tys: &[TokenStream]| match items.len() {
        0 => (quote!(()), quote!(())),
        1 => (tys[0].clone(), items[0].clone()),
        _ => (quote!((#(#tys,)*)), quote!((#(#items,)*))),
    };
    let f64s: Vec<_> = results.iter().map(|_| quote!(f64)).collect();
    let (result_ty, result) = shape(&results, &f64s);
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
                    #fname,
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
