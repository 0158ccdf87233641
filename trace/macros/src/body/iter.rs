//! The iteration forms, rewritten into `for` over a range before the translation:
//!
//! - `for i in (a..b).rev()` (and `a..=b`): `for k in a..b`, with `i = a + b - 1 - k`;
//! - `for v in x.iter()` (also `.copied()`, and `&v`): `for k in 0..x.len()`, with
//!   `v = x[k]`;
//! - `for (i, v) in x.iter().enumerate()`: `for i in 0..x.len()`, with `v = x[i]`.
//!
//! The bounds and the slice are evaluated once, as in Rust. `v` is the element's
//! value: where Rust has `&f64`, `*v` reads it the same way.

use proc_macro2::Span;
use syn::visit_mut::{self, VisitMut};
use syn::{Block, Expr, ExprForLoop, Ident, Pat, RangeLimits, parse_quote};

/// Rewrites the iteration forms everywhere in `block`.
pub fn rewrite(block: &mut Block) {
    Iter { n: 0 }.visit_block_mut(block);
}

struct Iter {
    n: usize,
}

impl VisitMut for Iter {
    fn visit_expr_mut(&mut self, e: &mut Expr) {
        if let Expr::ForLoop(f) = e
            && let Some(new) = self.for_loop(f)
        {
            *e = new;
        }
        visit_mut::visit_expr_mut(self, e);
    }
}

/// `e` without parentheses and invisible groups.
fn bare(e: &Expr) -> &Expr {
    match e {
        Expr::Paren(p) => bare(&p.expr),
        Expr::Group(g) => bare(&g.expr),
        e => e,
    }
}

/// `x` of `x.iter()` or `x.iter().copied()`, if `x` is a name.
fn iter_of(e: &Expr) -> Option<&Ident> {
    let Expr::MethodCall(m) = bare(e) else {
        return None;
    };
    if !m.args.is_empty() || m.turbofish.is_some() {
        return None;
    }
    match m.method.to_string().as_str() {
        "copied" | "cloned" => iter_of(&m.receiver),
        "iter" => match bare(&m.receiver) {
            Expr::Path(p) if p.qself.is_none() => p.path.get_ident(),
            _ => None,
        },
        _ => None,
    }
}

/// The element binding `let v = x[k];` for the pattern `v`, `mut v`, `&v` or `_`.
fn bind(pat: &Pat, x: &Ident, k: &Ident) -> Option<Option<syn::Stmt>> {
    match pat {
        Pat::Wild(_) => Some(None),
        Pat::Reference(r) if r.mutability.is_none() => bind(&r.pat, x, k),
        Pat::Ident(p) if p.by_ref.is_none() && p.subpat.is_none() => {
            Some(Some(parse_quote!(let #p = #x[#k];)))
        }
        _ => None,
    }
}

impl Iter {
    fn fresh(&mut self, what: &str) -> Ident {
        self.n += 1;
        Ident::new(&format!("__gradlift_{what}{}", self.n), Span::call_site())
    }

    fn for_loop(&mut self, f: &ExprForLoop) -> Option<Expr> {
        let Expr::MethodCall(m) = bare(&f.expr) else {
            return None;
        };
        let (label, pat, body) = (&f.label, &f.pat, &f.body);
        let stmts = &body.stmts;
        match m.method.to_string().as_str() {
            // `(a..b).rev()`
            "rev" if m.args.is_empty() => {
                let Expr::Range(r) = bare(&m.receiver) else {
                    return None;
                };
                let (Some(a), Some(b)) = (&r.start, &r.end) else {
                    return None;
                };
                let (s, e, k) = (self.fresh("rs"), self.fresh("re"), self.fresh("rk"));
                let (range, index): (Expr, Expr) = match r.limits {
                    RangeLimits::HalfOpen(_) => {
                        (parse_quote!(#s..#e), parse_quote!(#s + #e - 1 - #k))
                    }
                    RangeLimits::Closed(_) => (parse_quote!(#s..=#e), parse_quote!(#s + #e - #k)),
                };
                let bind: Option<syn::Stmt> = match &**pat {
                    Pat::Wild(_) => None,
                    p => Some(parse_quote!(let #p = #index;)),
                };
                Some(parse_quote!({
                    let #s = #a;
                    let #e = #b;
                    #label for #k in #range {
                        #bind
                        #(#stmts)*
                    }
                }))
            }
            // `x.iter().enumerate()`
            "enumerate" if m.args.is_empty() => {
                let x = iter_of(&m.receiver)?;
                let Pat::Tuple(t) = &**pat else {
                    return None;
                };
                if t.elems.len() != 2 {
                    return None;
                }
                let k = self.fresh("ik");
                let i = &t.elems[0];
                let v = bind(&t.elems[1], x, &k)?;
                let bind_i: Option<syn::Stmt> = match i {
                    Pat::Wild(_) => None,
                    i => Some(parse_quote!(let #i = #k;)),
                };
                Some(parse_quote!({
                    #label for #k in 0..#x.len() {
                        #bind_i
                        #v
                        #(#stmts)*
                    }
                }))
            }
            // `x.iter()`, `x.iter().copied()`
            _ => {
                let x = iter_of(&f.expr)?;
                let k = self.fresh("ik");
                let v = bind(pat, x, &k)?;
                Some(parse_quote!({
                    #label for #k in 0..#x.len() {
                        #v
                        #(#stmts)*
                    }
                }))
            }
        }
    }
}
