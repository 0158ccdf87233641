//! The signature side of `#[autodiff_reverse]`: the activities checked against the
//! parameters, the traced function's signature, and `NAME`, which traces once,
//! keeps the compiled derivative, and maps its arguments to gradlift's
//! activities.

use proc_macro2::TokenStream;
use quote::{format_ident, quote};
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
            (Type::Slice(s), m) if matches!(scalar(&s.elem).as_deref(), Some("f64" | "f32")) => {
                Some(if m { Kind::SliceMut } else { Kind::Slice })
            }
            (e, true) if matches!(scalar(e).as_deref(), Some("f64" | "f32")) => Some(Kind::RefMut),
            _ => None,
        },
        t => match scalar(t).as_deref() {
            Some("f64" | "f32") => Some(Kind::F),
            Some("usize" | "i64") => Some(Kind::I),
            _ => None,
        },
    };
    kind.ok_or_else(|| {
        syn::Error::new_spanned(
            t,
            "this parameter type is not supported yet by #[autodiff_reverse]; use f64, &[f64], &mut [f64], &mut f64 (or the same with f32), usize or i64",
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
    let mut acts_out = Vec::new();
    let mut grads = Vec::new();
    let mut results = Vec::new();
    if ret == Kind::F {
        results.push(quote!(__gradlift_value));
    }
    for p in &params {
        let (n, t) = (&p.name, &p.ty);
        outer.push(quote!(#n: #t));
        let arg = match p.kind {
            Kind::I => quote!((#n as i64)),
            Kind::RefMut => quote!(::core::slice::from_mut(#n)),
            _ => quote!(#n),
        };
        match p.act {
            Activity::Active => {
                let g = format_ident!("__gradlift_d_{}", n);
                acts_out.push(quote!(::gradlift::Active(#arg)));
                grads.push(quote!(#g));
                results.push(quote!(#g));
            }
            Activity::Const => {
                acts_out.push(quote!(::gradlift::Const(#arg)));
                grads.push(quote!(()));
            }
            Activity::Duplicated => {
                let d = format_ident!("__gradlift_shadow_{}", n);
                let (dt, darg) = if p.kind == Kind::RefMut {
                    (quote!(&mut #flt), quote!(::core::slice::from_mut(#d)))
                } else {
                    (quote!(&mut [#flt]), quote!(#d))
                };
                outer.push(quote!(#d: #dt));
                acts_out.push(quote!(::gradlift::Duplicated(#arg, #darg)));
                grads.push(quote!(()));
            }
        }
    }
    let call = match ret_act {
        Some(Activity::Active) => {
            outer.push(quote!(__gradlift_seed: #flt));
            quote!(__gradlift_f.pullback(&[f64::from(__gradlift_seed)], (#(#acts_out,)*)))
        }
        _ => quote!(__gradlift_f.gradient_with(::gradlift::Return::Const, (#(#acts_out,)*))),
    };
    let value_pat = if ret == Kind::F {
        quote!(__gradlift_value)
    } else {
        quote!(())
    };
    let (result_ty, result) = match results.len() {
        0 => (quote!(()), TokenStream::new()),
        1 => (quote!(#flt), results[0].clone()),
        n => {
            let f = std::iter::repeat_n(flt.clone(), n);
            (quote!((#(#f,)*)), quote!((#(#results,)*)))
        }
    };
    let vis = &func.vis;
    let doc = format!("The reverse-mode derivative of [`{fname}`], made by `#[autodiff_reverse]`.");
    let ad_ty = quote!(::gradlift::Autodiff<(#(#sig_types,)*), #traced_ret>);
    Ok(quote! {
        #func

        #[doc = #doc]
        #[allow(clippy::too_many_arguments)]
        #vis fn #name(#(#outer),*) -> #result_ty {
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
            static __GRADLIFT_CACHE: ::std::sync::OnceLock<::std::sync::Mutex<#ad_ty>> =
                ::std::sync::OnceLock::new();
            let __gradlift_cell = __GRADLIFT_CACHE.get_or_init(|| {
                match ::gradlift::autodiff(#fname, #traced_name) {
                    Ok(f) => ::std::sync::Mutex::new(f),
                    Err(e) => panic!("#[autodiff_reverse] could not trace `{}`: {}", #fname, e),
                }
            });
            let mut __gradlift_f = __gradlift_cell
                .lock()
                .unwrap_or_else(::std::sync::PoisonError::into_inner);
            let (#value_pat, (#(#grads,)*)) = match #call {
                Ok(r) => r,
                Err(e) => panic!("the derivative of `{}` failed: {}", #fname, e),
            };
            #result
        }
    })
}
