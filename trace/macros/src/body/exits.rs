//! Early exits — `break`, `continue`, `return` before the end, `loop` — rewritten
//! into the subset without them, before the translation proper.
//!
//! The tracing API has no jump out of a loop or a branch, so an exit becomes a flag:
//! `break` sets the loop's `__gradlift_brk{d}`, `continue` its `__gradlift_cont{d}`
//! (reset at the top of every iteration), `return e` stores `e` in `__gradlift_rv`
//! and sets `__gradlift_ret`. Every statement after one that may set a flag runs
//! under `if !flag { .. }`; a loop that can be left early becomes a `while` whose
//! test starts with `!__gradlift_ret && !__gradlift_brk{d}` (a `for` over a range
//! becomes a `while` over its index), and the function's result is `__gradlift_rv`
//! if it returned early. What is skipped is never executed, so values and
//! derivatives are those of the Rust function.
//!
//! Exits are rewritten where they are statements: in the function body, loop
//! bodies, the arms of an `if` statement and plain blocks. An exit anywhere else
//! (inside a `let` value, an operand, a labeled or valued `break`) is left as it
//! is, and the translation reports it.

use proc_macro2::Span;
use syn::{Block, Expr, Ident, Stmt, parse_quote};

/// The flags an expression or statement may set, relative to the innermost loop
/// around it.
#[derive(Copy, Clone, Default, Debug)]
pub struct Exits {
    ret: bool,
    brk: bool,
    cont: bool,
    /// Any exit at all, also of an inner loop.
    seen: bool,
}

impl Exits {
    fn any(self) -> bool {
        self.ret || self.brk || self.cont
    }
}

fn exits_stmts(stmts: &[Stmt], inner: bool, x: &mut Exits) {
    for s in stmts {
        match s {
            Stmt::Local(l) => {
                if let Some(init) = &l.init {
                    walk_expr(&init.expr, inner, x);
                    if let Some((_, d)) = &init.diverge {
                        walk_expr(d, inner, x);
                    }
                }
            }
            Stmt::Expr(e, _) => walk_expr(e, inner, x),
            _ => {}
        }
    }
}

fn exits_stmt(s: &Stmt) -> Exits {
    let mut x = Exits::default();
    exits_stmts(std::slice::from_ref(s), false, &mut x);
    x
}

/// `inner`: inside a loop of the expression being searched.
fn walk_expr(e: &Expr, inner: bool, x: &mut Exits) {
    let w = |e: &Expr, x: &mut Exits| walk_expr(e, inner, x);
    match e {
        Expr::Return(r) => {
            x.ret = true;
            x.seen = true;
            if let Some(v) = &r.expr {
                w(v, x);
            }
        }
        Expr::Break(b) => {
            x.seen = true;
            if !inner && b.label.is_none() {
                x.brk = true;
            }
            if let Some(v) = &b.expr {
                w(v, x);
            }
        }
        Expr::Continue(c) => {
            x.seen = true;
            if !inner && c.label.is_none() {
                x.cont = true;
            }
        }
        Expr::ForLoop(f) => {
            w(&f.expr, x);
            exits_stmts(&f.body.stmts, true, x);
        }
        Expr::While(l) => {
            walk_expr(&l.cond, true, x);
            exits_stmts(&l.body.stmts, true, x);
        }
        Expr::Loop(l) => exits_stmts(&l.body.stmts, true, x),
        Expr::Block(b) => exits_stmts(&b.block.stmts, inner, x),
        Expr::If(i) => {
            w(&i.cond, x);
            exits_stmts(&i.then_branch.stmts, inner, x);
            if let Some((_, e)) = &i.else_branch {
                w(e, x);
            }
        }
        Expr::Assign(a) => {
            w(&a.left, x);
            w(&a.right, x);
        }
        Expr::Binary(b) => {
            w(&b.left, x);
            w(&b.right, x);
        }
        Expr::Unary(u) => w(&u.expr, x),
        Expr::Paren(p) => w(&p.expr, x),
        Expr::Group(g) => w(&g.expr, x),
        Expr::Index(i) => {
            w(&i.expr, x);
            w(&i.index, x);
        }
        Expr::MethodCall(m) => {
            w(&m.receiver, x);
            m.args.iter().for_each(|a| w(a, x));
        }
        Expr::Call(c) => {
            w(&c.func, x);
            c.args.iter().for_each(|a| w(a, x));
        }
        Expr::Cast(c) => w(&c.expr, x),
        Expr::Range(r) => {
            if let Some(s) = &r.start {
                w(s, x);
            }
            if let Some(s) = &r.end {
                w(s, x);
            }
        }
        Expr::Tuple(t) => t.elems.iter().for_each(|a| w(a, x)),
        Expr::Match(m) => {
            w(&m.expr, x);
            m.arms.iter().for_each(|a| w(&a.body, x));
        }
        _ => {}
    }
}

/// The rewriter: the flags of the loops around the current point, innermost last.
pub struct Rewriter {
    /// The function returns a value (`__gradlift_rv` exists).
    has_value: bool,
    /// The function has an early `return` (`__gradlift_ret` exists).
    has_ret: bool,
    loops: Vec<LoopFlags>,
    depth: usize,
}

#[derive(Clone)]
struct LoopFlags {
    brk: Option<Ident>,
    cont: Option<Ident>,
}

fn ident(s: &str) -> Ident {
    Ident::new(s, Span::call_site())
}

const RET: &str = "__gradlift_ret";
const RV: &str = "__gradlift_rv";

/// The function body with its early exits rewritten; `None` if it has none (the
/// body is then translated as written). `has_value`: the function returns `f64`.
pub fn rewrite_body(block: &Block, has_value: bool, zero: Expr) -> Option<Block> {
    let (stmts, tail) = match block.stmts.split_last() {
        Some((Stmt::Expr(Expr::Return(r), _), rest)) => (rest, r.expr.as_deref().cloned()),
        Some((Stmt::Expr(e, None), rest)) => (rest, Some(e.clone())),
        _ => (&block.stmts[..], None),
    };
    let mut x = Exits::default();
    exits_stmts(stmts, false, &mut x);
    if let Some(t) = &tail {
        walk_expr(t, false, &mut x);
    }
    if !x.seen {
        return None;
    }
    let mut r = Rewriter {
        has_value,
        has_ret: x.ret,
        loops: Vec::new(),
        depth: 0,
    };
    let mut out: Vec<Stmt> = Vec::new();
    if x.ret {
        let ret = ident(RET);
        out.push(parse_quote!(let mut #ret = false;));
        if has_value {
            let rv = ident(RV);
            out.push(parse_quote!(let mut #rv = #zero;));
        }
    }
    out.extend(r.stmts_with_tail(stmts, tail));
    Some(Block {
        brace_token: block.brace_token,
        stmts: out,
    })
}

impl Rewriter {
    /// `!__gradlift_ret && !brk && !cont` for the flags `x` may set (`true` if none).
    fn guard(&self, x: Exits) -> Expr {
        let mut parts: Vec<Expr> = Vec::new();
        if x.ret && self.has_ret {
            let f = ident(RET);
            parts.push(parse_quote!(!#f));
        }
        if let Some(l) = self.loops.last() {
            if x.brk
                && let Some(f) = &l.brk
            {
                parts.push(parse_quote!(!#f));
            }
            if x.cont
                && let Some(f) = &l.cont
            {
                parts.push(parse_quote!(!#f));
            }
        }
        let mut it = parts.into_iter();
        let first = it.next().unwrap_or_else(|| parse_quote!(true));
        it.fold(first, |a, b| parse_quote!(#a && #b))
    }

    /// The top-level statements and the result: after a statement that may return,
    /// the rest (result included) runs only if it did not, else the result is
    /// `__gradlift_rv`.
    fn stmts_with_tail(&mut self, stmts: &[Stmt], tail: Option<Expr>) -> Vec<Stmt> {
        let mut out = Vec::new();
        for (k, s) in stmts.iter().enumerate() {
            let x = exits_stmt(s);
            out.push(self.stmt(s));
            if x.ret {
                let rest = self.stmts_with_tail(&stmts[k + 1..], tail);
                let g = self.guard(x);
                let rv = ident(RV);
                if self.has_value {
                    out.push(Stmt::Expr(
                        parse_quote!(if #g { #(#rest)* } else { #rv }),
                        None,
                    ));
                } else {
                    out.push(Stmt::Expr(parse_quote!(if #g { #(#rest)* }), None));
                }
                return out;
            }
        }
        // A value's exits are reported by the translation; a `()` function's last
        // statement is a statement like the others. A result that always returns
        // (`if c { return a; } else { return b; }`) is a statement too.
        match tail {
            Some(t) if self.has_value && !diverges(&t) => out.push(Stmt::Expr(t, None)),
            Some(t) => {
                let t = self.expr(&t);
                out.push(Stmt::Expr(t, Some(Default::default())));
                if self.has_value {
                    let rv = ident(RV);
                    out.push(Stmt::Expr(parse_quote!(#rv), None));
                }
            }
            // No result: the statements before end in a `loop` left only by
            // `return` (or in a `return`), so what they returned is the result.
            None if self.has_value && self.has_ret => {
                let rv = ident(RV);
                out.push(Stmt::Expr(parse_quote!(#rv), None));
            }
            None => {}
        }
        out
    }

    /// A block without a value: after a statement that may exit, the rest runs
    /// under the guard.
    fn stmts(&mut self, stmts: &[Stmt]) -> Vec<Stmt> {
        let mut out = Vec::new();
        for (k, s) in stmts.iter().enumerate() {
            let x = exits_stmt(s);
            out.push(self.stmt(s));
            if x.any() && k + 1 < stmts.len() {
                let rest = self.stmts(&stmts[k + 1..]);
                let g = self.guard(x);
                out.push(Stmt::Expr(parse_quote!(if #g { #(#rest)* }), None));
                return out;
            }
        }
        out
    }

    fn block(&mut self, b: &Block) -> Block {
        Block {
            brace_token: b.brace_token,
            stmts: self.stmts(&b.stmts),
        }
    }

    fn stmt(&mut self, s: &Stmt) -> Stmt {
        match s {
            Stmt::Expr(e, semi) => Stmt::Expr(self.expr(e), *semi),
            s => s.clone(),
        }
    }

    /// An expression in statement position.
    fn expr(&mut self, e: &Expr) -> Expr {
        match e {
            Expr::Break(b) if b.label.is_none() && b.expr.is_none() => {
                match self.loops.last().and_then(|l| l.brk.clone()) {
                    Some(f) => parse_quote!(#f = true),
                    None => e.clone(),
                }
            }
            Expr::Continue(c) if c.label.is_none() => {
                match self.loops.last().and_then(|l| l.cont.clone()) {
                    Some(f) => parse_quote!(#f = true),
                    None => e.clone(),
                }
            }
            Expr::Return(r) if self.has_ret => {
                let ret = ident(RET);
                match (&r.expr, self.has_value) {
                    (Some(v), true) => {
                        let rv = ident(RV);
                        parse_quote!({ #rv = #v; #ret = true; })
                    }
                    (None, false) => parse_quote!(#ret = true),
                    _ => e.clone(),
                }
            }
            Expr::If(i) => {
                let mut i = i.clone();
                i.then_branch = self.block(&i.then_branch);
                if let Some((_, els)) = &mut i.else_branch {
                    **els = self.expr(els);
                }
                Expr::If(i)
            }
            Expr::Block(b) if b.label.is_none() => {
                let mut b = b.clone();
                b.block = self.block(&b.block);
                Expr::Block(b)
            }
            Expr::ForLoop(f) if f.label.is_none() => self.for_loop(f),
            Expr::While(w) if w.label.is_none() => {
                let x = body_exits(&w.body);
                if !x.any() && !nested_exits(&w.body) {
                    return e.clone();
                }
                let (flags, body) = self.loop_body(&w.body, x);
                let g = self.guard(Exits {
                    ret: x.ret,
                    brk: x.brk,
                    cont: false,
                    seen: false,
                });
                let c = &w.cond;
                let test: Expr = if matches!(&g, Expr::Lit(_)) {
                    (**c).clone()
                } else {
                    parse_quote!(#g && (#c))
                };
                self.loops.pop();
                let decl = flags
                    .brk
                    .as_ref()
                    .map(|f| -> Stmt { parse_quote!(let mut #f = false;) });
                parse_quote!({ #decl while #test #body })
            }
            Expr::Loop(l) if l.label.is_none() => {
                let x = body_exits(&l.body);
                let (flags, body) = self.loop_body(&l.body, x);
                let test = self.guard(Exits {
                    ret: x.ret,
                    brk: x.brk,
                    cont: false,
                    seen: false,
                });
                self.loops.pop();
                let decl = flags
                    .brk
                    .as_ref()
                    .map(|f| -> Stmt { parse_quote!(let mut #f = false;) });
                parse_quote!({ #decl while #test #body })
            }
            e => e.clone(),
        }
    }

    /// Pushes the loop's flags and rewrites its body (the caller pops them); the
    /// body starts by resetting the `continue` flag.
    fn loop_body(&mut self, body: &Block, x: Exits) -> (LoopFlags, Block) {
        self.depth += 1;
        let d = self.depth;
        let flags = LoopFlags {
            brk: x.brk.then(|| ident(&format!("__gradlift_brk{d}"))),
            cont: x.cont.then(|| ident(&format!("__gradlift_cont{d}"))),
        };
        self.loops.push(flags.clone());
        let mut stmts: Vec<Stmt> = Vec::new();
        if let Some(c) = &flags.cont {
            stmts.push(parse_quote!(let mut #c = false;));
        }
        stmts.extend(self.stmts(&body.stmts));
        (
            flags,
            Block {
                brace_token: body.brace_token,
                stmts,
            },
        )
    }

    /// `for i in a..b`: kept as a `for` if its body can only `continue`, else a
    /// `while` over the index.
    fn for_loop(&mut self, f: &syn::ExprForLoop) -> Expr {
        let x = body_exits(&f.body);
        if !x.any() && !nested_exits(&f.body) {
            return Expr::ForLoop(f.clone());
        }
        let d = self.depth + 1;
        let (flags, body) = self.loop_body(&f.body, x);
        let g = self.guard(Exits {
            ret: x.ret,
            brk: x.brk,
            cont: false,
            seen: false,
        });
        self.loops.pop();
        if !x.brk && !x.ret {
            let mut f = f.clone();
            f.body = body;
            return Expr::ForLoop(f);
        }
        // Only ranges become index loops; anything else is reported by the
        // translation of the `for` as written.
        let Expr::Range(range) = &*f.expr else {
            return Expr::ForLoop(f.clone());
        };
        let (Some(start), Some(end)) = (&range.start, &range.end) else {
            return Expr::ForLoop(f.clone());
        };
        let k = ident(&format!("__gradlift_k{d}"));
        let n = ident(&format!("__gradlift_n{d}"));
        let end: Expr = match range.limits {
            syn::RangeLimits::HalfOpen(_) => (**end).clone(),
            syn::RangeLimits::Closed(_) => parse_quote!((#end) + 1),
        };
        let bind: Option<Stmt> = match &*f.pat {
            syn::Pat::Wild(_) => None,
            p => Some(parse_quote!(let #p = #k;)),
        };
        let decl = flags
            .brk
            .as_ref()
            .map(|f| -> Stmt { parse_quote!(let mut #f = false;) });
        let stmts = &body.stmts;
        parse_quote!({
            let mut #k = #start;
            let #n = #end;
            #decl
            while #g && #k < #n {
                #bind
                #k += 1;
                #(#stmts)*
            }
        })
    }
}

/// The exits of a loop body that concern the loop: its own `break` and
/// `continue`, and any `return`.
fn body_exits(b: &Block) -> Exits {
    let mut x = Exits::default();
    exits_stmts(&b.stmts, false, &mut x);
    x
}

/// Whether the block has any exit to rewrite, also of a loop inside it.
fn nested_exits(b: &Block) -> bool {
    body_exits(b).seen
}

/// Whether `e` always returns: a `return`, an `if` whose arms all do, a block ending
/// in one, a `loop` with no `break` of its own.
fn diverges(e: &Expr) -> bool {
    let block = |b: &Block| match b.stmts.last() {
        Some(Stmt::Expr(e, _)) => diverges(e),
        _ => false,
    };
    match e {
        Expr::Return(_) => true,
        Expr::If(i) => {
            block(&i.then_branch) && i.else_branch.as_ref().is_some_and(|(_, e)| diverges(e))
        }
        Expr::Block(b) => block(&b.block),
        Expr::Paren(p) => diverges(&p.expr),
        Expr::Loop(l) => {
            let mut x = Exits::default();
            exits_stmts(&l.body.stmts, false, &mut x);
            !x.brk && x.ret
        }
        _ => false,
    }
}
