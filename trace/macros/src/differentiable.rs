//! `#[differentiable]`: a function that `#[autodiff_reverse]` and
//! `#[autodiff_forward]` bodies (and other `#[differentiable]` bodies) may call. It stays as written, and gets a hidden
//! traced twin `__gradlift_differentiable_NAME`, which emits an IR `call @NAME`
//! through gradlift's `func(..).call(..)`, tracing the translated body into `@NAME`
//! on first use; so helpers, recursion and mutual recursion are IR calls.
//! `#[differentiable(checkpoint)]` checkpoints every call to the function (`call
//! @NAME(..) checkpoint`: reverse mode saves the call's inputs, not its tape).

use proc_macro2::TokenStream;
use quote::{format_ident, quote};
use syn::{Ident, ItemFn, ReturnType, Type};

use crate::body::{Kind, Translator};

/// The twin's name for the function `name`.
pub fn twin(name: &Ident) -> Ident {
    format_ident!("__gradlift_differentiable_{}", name, span = name.span())
}

/// The kind and float type of a parameter or result type.
fn kind_of(t: &Type) -> Option<(Kind, Option<&'static str>)> {
    let scalar = |t: &Type| match t {
        Type::Path(p) if p.qself.is_none() => p.path.get_ident().map(Ident::to_string),
        _ => None,
    };
    let fl = |s: &str| match s {
        "f64" => Some("f64"),
        "f32" => Some("f32"),
        _ => None,
    };
    match t {
        Type::Reference(r) => match (&*r.elem, r.mutability.is_some()) {
            (Type::Slice(s), m) => {
                let f = fl(&scalar(&s.elem)?)?;
                Some((if m { Kind::SliceMut } else { Kind::Slice }, Some(f)))
            }
            (e, true) => Some((Kind::RefMut, Some(fl(&scalar(e)?)?))),
            _ => None,
        },
        Type::Tuple(t) if t.elems.is_empty() => Some((Kind::Unit, None)),
        t => match scalar(t)?.as_str() {
            "usize" | "i64" | "i32" => Some((Kind::I, None)),
            s => Some((Kind::F, Some(fl(s)?))),
        },
    }
}

pub fn expand(attr: TokenStream, item: TokenStream) -> syn::Result<TokenStream> {
    let func: ItemFn = syn::parse2(item)?;
    let checkpoint = match syn::parse2::<Option<Ident>>(attr.clone()) {
        Ok(None) => false,
        Ok(Some(word)) if word == "checkpoint" => true,
        _ => {
            return Err(syn::Error::new_spanned(
                attr,
                "#[differentiable] takes no argument but `checkpoint` (#[differentiable(checkpoint)]: every call to the function is checkpointed)",
            ));
        }
    };
    match expand_fn(&func, checkpoint) {
        Ok(t) => Ok(t),
        Err(e) => {
            let e = e.to_compile_error();
            Ok(quote!(#func #e))
        }
    }
}

fn expand_fn(func: &ItemFn, checkpoint: bool) -> syn::Result<TokenStream> {
    let sig = &func.sig;
    if let Some(g) = sig.generics.params.first() {
        return Err(syn::Error::new_spanned(
            g,
            "a generic function is not supported yet by #[differentiable]; write it for f64 or f32",
        ));
    }
    let bad_type = |t: &dyn quote::ToTokens| {
        syn::Error::new_spanned(
            t,
            "this type is not supported yet by #[differentiable]; use f64, &[f64], &mut [f64], &mut f64 (or the same with f32), usize, i64 or i32, and return a float or ()",
        )
    };
    let mut fls = Vec::new();
    let mut params = Vec::new();
    for input in &sig.inputs {
        let (p, ty) = crate::sig::named_param(input, "differentiable")?;
        let (kind, fl) = kind_of(ty).ok_or_else(|| bad_type(ty))?;
        if kind == Kind::Unit {
            return Err(bad_type(ty));
        }
        fls.extend(fl.map(|f| (f, ty.clone())));
        params.push((p.ident.clone(), kind, p.mutability.is_some()));
    }
    let ret = match &sig.output {
        ReturnType::Default => Kind::Unit,
        ReturnType::Type(_, t) => {
            let (kind, fl) = kind_of(t).ok_or_else(|| bad_type(t))?;
            if !matches!(kind, Kind::F | Kind::Unit) {
                return Err(bad_type(t));
            }
            fls.extend(fl.map(|f| (f, (**t).clone())));
            kind
        }
    };
    let fl = fls.first().map_or("f64", |f| f.0);
    if let Some((other, t)) = fls.iter().find(|f| f.0 != fl) {
        return Err(syn::Error::new_spanned(
            t,
            format!(
                "mixing {fl} and {other} is not supported yet by #[differentiable]; write the function over one float type"
            ),
        ));
    }
    let body = Translator::new(&params, fl, "differentiable").body(&func.block, ret)?;
    let flt: TokenStream = fl.parse().expect("a type");
    let traced_ty = |k: Kind| match k {
        Kind::F => quote!(::gradlift::trace::Var<#flt>),
        Kind::I => quote!(::gradlift::trace::Var<i64>),
        Kind::B => quote!(::gradlift::trace::Var<bool>),
        Kind::Slice => quote!(::gradlift::trace::Slice<#flt>),
        Kind::SliceMut | Kind::RefMut => quote!(::gradlift::trace::SliceMut<#flt>),
        Kind::Unit => quote!(()),
    };
    let inner_params = params.iter().map(|(n, k, m)| {
        let t = traced_ty(*k);
        let m = (*m || matches!(k, Kind::SliceMut | Kind::RefMut)).then(|| quote!(mut));
        quote!(#m #n: #t)
    });
    let outer_params = params.iter().map(|(n, k, _)| {
        let t = traced_ty(*k);
        quote!(#n: #t)
    });
    let names = params.iter().map(|(n, _, _)| n);
    let ret_ty = traced_ty(ret);
    let vis = &func.vis;
    let name = &sig.ident;
    let twin = twin(name);
    let ir_name = name.to_string();
    let checkpoint = checkpoint.then(|| quote!(.checkpoint()));
    Ok(quote! {
        #func

        #[doc(hidden)]
        #[allow(clippy::too_many_arguments, non_snake_case, dead_code)]
        #[track_caller]
        #vis fn #twin(#(#outer_params),*) -> #ret_ty {
            #[allow(
                unused_mut,
                unused_variables,
                unused_assignments,
                unused_braces,
                unused_parens,
                non_snake_case,
                clippy::all
            )]
            fn body(#(#inner_params),*) -> #ret_ty {
                #body
            }
            ::gradlift::trace::func(#ir_name, body)#checkpoint.call((#(#names,)*))
        }
    })
}
