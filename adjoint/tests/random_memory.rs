//! Random programs with slices, local buffers, mutation and calls, against
//! `check_derived` (finite differences and the dot-product test over the active
//! scalars and the `dup` slices' contents, in and out).
//!
//! A seeded generator writes modules whose entry point is
//! `@f(%x: [f64], %y: mut [f64], %a: f64, %n: i64) -> f64`, with helpers it calls:
//!
//! - scalar helpers `@h0`, `@h1` `(f64, f64) -> f64` (the second may call the first;
//!   either may use local buffers of its own);
//! - optionally a recursive helper `@r(%v: f64, %k: i64) -> f64` that calls itself
//!   with `k - 1` while `k > 0`;
//! - slice helpers `@s0`, `@s1` `(%v: [f64], %w: mut [f64], %c: f64) -> f64` that read
//!   `v`, read and write `w`, and return something (`@s1` may call `@s0`);
//! - optionally a recursive slice helper `@q(%v: [f64], %w: mut [f64], %c: f64, %k:
//!   i64) -> f64` that, while `k > 0`, calls itself with slices chosen among `v`, `w`
//!   and a local buffer it allocates, and at `k = 0` stores into `w`.
//!
//! Every helper is called by `@f` at least once. The bodies mix smooth float
//! expressions (`sin`, `cos`, `tanh`, `exp` of a bounded value, products,
//! differences, division by `1 + q^2`, `select`), scaled so that every value stays in
//! [-1, 1] and no step expands differences (see `Gen::combine`), kept in builder
//! variables; loads at indices that are always in bounds (the constant 0, a loop
//! counter over the slice's own length, or `irem` of a non-negative integer
//! expression by the slice's `len`: every slice is at least one element long);
//! stores into `y`, `w` and local buffers (values computed from the slice's own
//! elements, and two stores to one index, the second reading the first back);
//! `alloc f64, K` and `alloc f64, len s` buffers, filled in loops, read, written and
//! passed to calls, at the top level and inside loops and branches; loops counted by
//! a slice's length, `n` or a constant, carrying the float variables; `if`/`else` on
//! float comparisons; early returns (also from inside loops); and calls passing `x`,
//! `y`, local buffers and scalars (never one slice as two arguments).
//!
//! Every module verifies. Each is derived and checked with `CheckOptions::f64()` at
//! random points (slices of length 1..6 with elements in [-1, 1], `a` in [-1, 1],
//! `n` in 0..4): under the default activities (`x`, `y` `dup`, `a` active); the same
//! in debug mode (with NaN checks); `y` `const` (skipped when refused with
//! `AdError::ConstWrite`, a legitimate refusal, and the usual outcome: `y` is
//! written with varied values and read back); and, in turn, one of the variants `x`
//! `const`, `y` `dupnoneed` without the primal, a `const` return, `a` `const`. Every
//! derived module prints, parses back and prints identically. The ignored fuzzing
//! test checks every variant on each module, one of them and `y` `const` in debug
//! mode too, and the defaults at three points.
//!
//! Nothing is excluded from the generator as a known bug: every feature above
//! passes (15,000 modules were run while writing it).
//!
//! Run one seed (printing its module) with `RANDOM_MEMORY_SEED=123 cargo test -p
//! gradlift-adjoint --test random_memory -- --nocapture`, or a range with
//! `RANDOM_MEMORY_SEED=5000..9000`; the fuzzing run (3000 modules, about a minute)
//! is `cargo test --release -p gradlift-adjoint --test random_memory -- --ignored`.

mod support;

use gradlift_adjoint::{
    Activity, AdError, CheckOptions, RetActivity, Rule, RuleConfig, build_rrule, check_derived,
};
use gradlift_ir::interp::Val;
use gradlift_ir::{
    CmpPred, Elem, FuncId, FunctionBuilder, Module, Signature, Type, Value, Variable, parse, verify,
};
use support::Rng;

/// A float slice in scope: its value, its length (computed where it is defined, so
/// it dominates every use), and whether it may be stored into. Every slice the
/// generator makes or receives has at least one element.
#[derive(Copy, Clone)]
struct Slice {
    val: Value,
    len: Value,
    mutable: bool,
}

/// The functions a body may call.
#[derive(Clone, Default)]
struct Callees {
    scalar: Vec<FuncId>,
    slice: Vec<FuncId>,
    rec: Option<FuncId>,
    rec_slice: Option<FuncId>,
}

/// The generator of one function body.
struct Gen<'r> {
    rng: &'r mut Rng,
    /// The float variables, all defined in the entry block.
    vars: Vec<Variable>,
    /// Float parameters, usable as operands anywhere.
    scalars: Vec<Value>,
    /// The slices in scope (a stack: nested code pushes, and pops on leaving).
    slices: Vec<Slice>,
    /// Non-negative integers in scope (`n`, loop counters).
    ints: Vec<Value>,
    /// Loop counters `i` in scope with `0 <= i < len s`: `(i, s)`.
    counters: Vec<(Value, Value)>,
    callees: Callees,
    /// Statements with control flow, allocations and calls still allowed.
    budget: i32,
    /// The deepest nesting of loops and branches.
    max_depth: u32,
    /// The functions called so far.
    called: std::collections::HashSet<FuncId>,
}

/// What a nested scope restores on exit.
struct Scope(usize, usize, usize);

impl Gen<'_> {
    fn enter(&self) -> Scope {
        Scope(self.slices.len(), self.ints.len(), self.counters.len())
    }

    fn leave(&mut self, s: Scope) {
        self.slices.truncate(s.0);
        self.ints.truncate(s.1);
        self.counters.truncate(s.2);
    }

    fn var(&mut self) -> Variable {
        let vars = std::mem::take(&mut self.vars);
        let v = self.rng.pick(&vars);
        self.vars = vars;
        v
    }

    fn slice(&mut self) -> Option<Slice> {
        (!self.slices.is_empty())
            .then(|| self.slices[self.rng.below(self.slices.len() as u64) as usize])
    }

    fn mutable_slice(&mut self) -> Option<Slice> {
        let m: Vec<Slice> = self.slices.iter().copied().filter(|s| s.mutable).collect();
        (!m.is_empty()).then(|| self.rng.pick(&m))
    }

    /// A non-negative `i64`: a constant, `n`, a loop counter, or a sum or product of
    /// them with small constants.
    fn nonneg(&mut self, b: &mut FunctionBuilder<'_>) -> Value {
        let base = if self.ints.is_empty() || self.rng.chance(1, 4) {
            b.iconst(self.rng.below(7) as i64)
        } else {
            let ints = std::mem::take(&mut self.ints);
            let v = self.rng.pick(&ints);
            self.ints = ints;
            v
        };
        match self.rng.below(5) {
            0 => {
                let k = b.iconst(1 + self.rng.below(3) as i64);
                b.iadd(base, k)
            }
            1 => {
                let k = b.iconst(2 + self.rng.below(2) as i64);
                b.imul(base, k)
            }
            2 if !self.ints.is_empty() => {
                let other = self.ints[self.rng.below(self.ints.len() as u64) as usize];
                b.iadd(base, other)
            }
            _ => base,
        }
    }

    /// An index in bounds of `s`: 0, a counter of a loop over `s`, or
    /// `irem e, len s` with `e >= 0`.
    fn index(&mut self, b: &mut FunctionBuilder<'_>, s: Slice) -> Value {
        let own: Vec<Value> = self
            .counters
            .iter()
            .filter(|&&(_, t)| t == s.val)
            .map(|&(i, _)| i)
            .collect();
        match self.rng.below(4) {
            0 => b.iconst(0),
            1 | 2 if !own.is_empty() => self.rng.pick(&own),
            _ => {
                let e = self.nonneg(b);
                b.irem(e, s.len)
            }
        }
    }

    fn load(&mut self, b: &mut FunctionBuilder<'_>, s: Slice) -> Value {
        let i = self.index(b, s);
        b.load(s.val, i)
    }

    /// A float operand: a variable, a load, or a float parameter.
    fn operand(&mut self, b: &mut FunctionBuilder<'_>) -> Value {
        let k = self.rng.below(10);
        if k < 3
            && let Some(s) = self.slice()
        {
            return self.load(b, s);
        }
        if k == 3 && !self.scalars.is_empty() {
            let scalars = std::mem::take(&mut self.scalars);
            let v = self.rng.pick(&scalars);
            self.scalars = scalars;
            return v;
        }
        let v = self.var();
        b.use_var(v)
    }

    /// A smooth expression of `p` and `q` (or, for `select`, a piecewise smooth
    /// one) that maps [-1, 1]² into [-1, 1] with `|∂/∂p| + |∂/∂q| <= 1` there.
    ///
    /// Every float the programs compute is such a combination of earlier ones (the
    /// inputs are in [-1, 1], buffers start at 0), so every value stays in [-1, 1]
    /// and is a non-expanding function of the inputs (in the max norm), however long
    /// the loops and the recursion run: gradients stay bounded and curvature grows
    /// slowly, so central differences stay accurate. (Without the scaling, 24
    /// iterations of a helper through nested loops made functions with gradients of
    /// 100 and curvature that no step size suited.) Most combinations add a
    /// constant, so that values do not all shrink towards 0, where gradients vanish
    /// and every comparison becomes a near tie (`c >= tanh c` at `c = -1e-10` is
    /// decided by rounding, and flips under any perturbation).
    fn combine(&mut self, b: &mut FunctionBuilder<'_>, p: Value, q: Value) -> Value {
        match self.rng.below(11) {
            0 => {
                // 0.5 tanh(p q + 0.5)
                let m = b.fmul(p, q);
                let c = b.fconst(0.5);
                let m = b.fadd(m, c);
                let t = b.tanh(m);
                b.fmul(t, c)
            }
            1 => {
                let (k6, k4) = (b.fconst(0.6), b.fconst(0.4));
                let p6 = b.fmul(p, k6);
                let s = b.sin(q);
                let s4 = b.fmul(s, k4);
                b.fadd(p6, s4)
            }
            2 => {
                let s = b.fadd(p, q);
                let half = b.fconst(0.5);
                let s = b.fmul(s, half);
                b.sin(s)
            }
            3 => {
                // 0.65 p / (1 + q²) + 0.3: 1/(1+q²) + 2|q|/(1+q²)² <= 1.46.
                let qq = b.fmul(q, q);
                let one = b.fconst(1.0);
                let d = b.fadd(one, qq);
                let r = b.fdiv(p, d);
                let k = b.fconst(0.65);
                let r = b.fmul(r, k);
                let c = b.fconst(0.3);
                b.fadd(r, c)
            }
            4 => {
                // 0.6 exp(tanh(p) / 2) - 0.4 cos q, in [0, 0.66].
                let t = b.tanh(p);
                let half = b.fconst(0.5);
                let t = b.fmul(t, half);
                let e = b.exp(t);
                let k6 = b.fconst(0.6);
                let e = b.fmul(e, k6);
                let c = b.cos(q);
                let k4 = b.fconst(0.4);
                let c = b.fmul(c, k4);
                b.fsub(e, c)
            }
            5 => {
                // 0.6 cos(p) q - 0.2
                let c = b.cos(p);
                let k = b.fconst(0.6);
                let q6 = b.fmul(q, k);
                let r = b.fmul(c, q6);
                let off = b.fconst(0.2);
                b.fsub(r, off)
            }
            6 => {
                // 0.4 (p - q) + 0.2
                let d = b.fsub(p, q);
                let k = b.fconst(0.4);
                let d = b.fmul(d, k);
                let off = b.fconst(0.2);
                b.fadd(d, off)
            }
            7 => {
                // 0.4 tanh(p) tanh(q) + 0.4 p + 0.15
                let (tp, tq) = (b.tanh(p), b.tanh(q));
                let t = b.fmul(tp, tq);
                let k = b.fconst(0.4);
                let t = b.fmul(t, k);
                let p4 = b.fmul(p, k);
                let r = b.fadd(t, p4);
                let off = b.fconst(0.15);
                b.fadd(r, off)
            }
            8 => {
                // select(p < q + off, tanh p, sin q)
                let lt = self.compare(b, CmpPred::Lt, p, q);
                let (tp, sq) = (b.tanh(p), b.sin(q));
                b.select(lt, tp, sq)
            }
            9 => {
                // 0.5 sin(p) q + 0.3
                let s = b.sin(p);
                let k = b.fconst(0.5);
                let q5 = b.fmul(q, k);
                let r = b.fmul(s, q5);
                let off = b.fconst(0.3);
                b.fadd(r, off)
            }
            _ => {
                let k = b.fconst(-0.7);
                let p7 = b.fmul(p, k);
                let c = b.cos(q);
                let k3 = b.fconst(0.3);
                let c3 = b.fmul(c, k3);
                b.fadd(p7, c3)
            }
        }
    }

    /// `fcmp pred p, q + off` with a random `off` of magnitude 0.2 or 0.4: two
    /// values that converge to one another (or are equal up to rounding) are never
    /// near a tie.
    fn compare(&mut self, b: &mut FunctionBuilder<'_>, pred: CmpPred, p: Value, q: Value) -> Value {
        let off = b.fconst(self.rng.pick(&[-0.4, -0.2, 0.2, 0.4]));
        let q = b.fadd(q, off);
        b.fcmp(pred, p, q)
    }

    fn expr(&mut self, b: &mut FunctionBuilder<'_>) -> Value {
        let (p, q) = (self.operand(b), self.operand(b));
        self.combine(b, p, q)
    }

    fn assign(&mut self, b: &mut FunctionBuilder<'_>, v: Value) {
        let t = self.var();
        b.def_var(t, v);
    }

    /// `1 + rng(3)` statements at nesting `depth`.
    fn block(&mut self, b: &mut FunctionBuilder<'_>, depth: u32) {
        for _ in 0..1 + self.rng.below(3) {
            self.stmt(b, depth);
        }
    }

    fn stmt(&mut self, b: &mut FunctionBuilder<'_>, depth: u32) {
        let nested = depth < self.max_depth && self.budget > 0;
        match self.rng.below(18) {
            0..=2 => {
                let e = self.expr(b);
                self.assign(b, e);
            }
            3 | 4 if self.mutable_slice().is_some() => {
                let s = self.mutable_slice().unwrap();
                let i = self.index(b, s);
                let e = self.expr(b);
                b.store(s.val, i, e);
            }
            5 if self.mutable_slice().is_some() => self.store_from_itself(b),
            6 if self.mutable_slice().is_some() => self.store_twice(b),
            7 | 8 if nested => {
                self.budget -= 3;
                self.if_else(b, depth);
            }
            9 | 10 if nested => {
                self.budget -= 3;
                self.counted_loop(b, depth);
            }
            11 if self.budget > 0 => {
                self.budget -= 2;
                self.alloc(b, depth);
            }
            12 | 13 if !self.callees.scalar.is_empty() && self.budget > 0 => {
                self.budget -= 1;
                let h = self.rng.pick(&self.callees.scalar.clone());
                self.call_scalar(b, h);
            }
            14 | 15 if !self.callees.slice.is_empty() && self.budget > 0 => {
                self.budget -= 1;
                let s = self.rng.pick(&self.callees.slice.clone());
                self.call_slice(b, s);
            }
            16 if self.callees.rec.is_some() && self.budget > 0 => {
                self.budget -= 1;
                let r = self.callees.rec.unwrap();
                self.call_rec(b, r);
            }
            17 if self.callees.rec_slice.is_some() && self.budget > 0 => {
                self.budget -= 1;
                let q = self.callees.rec_slice.unwrap();
                self.call_rec_slice(b, q);
            }
            _ => {
                let e = self.expr(b);
                self.assign(b, e);
            }
        }
    }

    /// `var = h(p, q)`.
    fn call_scalar(&mut self, b: &mut FunctionBuilder<'_>, h: FuncId) {
        let (p, q) = (self.operand(b), self.expr(b));
        let r = b.call(h, &[p, q])[0];
        self.assign(b, r);
        self.called.insert(h);
    }

    /// `var = g(s(v, w, c), e)`, with `w` a mutable slice in scope and `v` another
    /// slice (never the same one: arguments do not alias).
    fn call_slice(&mut self, b: &mut FunctionBuilder<'_>, s: FuncId) {
        let Some((v, w)) = self.slice_args() else {
            return;
        };
        let c = self.expr(b);
        let r = b.call(s, &[v.val, w.val, c])[0];
        let e = self.operand(b);
        let r = self.combine(b, r, e);
        self.assign(b, r);
        self.called.insert(s);
    }

    /// A slice `v` and a mutable slice `w` in scope, not the same one.
    fn slice_args(&mut self) -> Option<(Slice, Slice)> {
        let w = self.mutable_slice()?;
        let others: Vec<Slice> = self
            .slices
            .iter()
            .copied()
            .filter(|s| s.val != w.val)
            .collect();
        (!others.is_empty()).then(|| (self.rng.pick(&others), w))
    }

    /// A recursion depth: `0 <= k < 4`.
    fn depth_arg(&mut self, b: &mut FunctionBuilder<'_>) -> Value {
        match self.rng.below(3) {
            0 => b.iconst(self.rng.below(4) as i64),
            _ => {
                let e = self.nonneg(b);
                let four = b.iconst(4);
                b.irem(e, four)
            }
        }
    }

    /// `var = r(e, k)` with `0 <= k < 4`.
    fn call_rec(&mut self, b: &mut FunctionBuilder<'_>, r: FuncId) {
        let k = self.depth_arg(b);
        let e = self.expr(b);
        let res = b.call(r, &[e, k])[0];
        self.assign(b, res);
        self.called.insert(r);
    }

    /// `var = q(v, w, e, k)` with `0 <= k < 4`.
    fn call_rec_slice(&mut self, b: &mut FunctionBuilder<'_>, q: FuncId) {
        let Some((v, w)) = self.slice_args() else {
            return;
        };
        let k = self.depth_arg(b);
        let e = self.expr(b);
        let res = b.call(q, &[v.val, w.val, e, k])[0];
        self.assign(b, res);
        self.called.insert(q);
    }

    /// `s[i] = g(s[i], s[j])`: a value computed from the slice's own elements.
    fn store_from_itself(&mut self, b: &mut FunctionBuilder<'_>) {
        let s = self.mutable_slice().unwrap();
        let i = self.index(b, s);
        let j = self.index(b, s);
        let (si, sj) = (b.load(s.val, i), b.load(s.val, j));
        let mut e = self.combine(b, si, sj);
        if self.rng.chance(1, 2) {
            let o = self.operand(b);
            e = self.combine(b, e, o);
        }
        b.store(s.val, i, e);
    }

    /// Two stores to one index, the second maybe reading the first back.
    fn store_twice(&mut self, b: &mut FunctionBuilder<'_>) {
        let s = self.mutable_slice().unwrap();
        let i = self.index(b, s);
        let e = self.expr(b);
        b.store(s.val, i, e);
        if self.rng.chance(1, 2) {
            let back = b.load(s.val, i);
            let o = self.operand(b);
            let v = self.combine(b, back, o);
            self.assign(b, v);
        }
        let e2 = if self.rng.chance(2, 3) {
            let back = b.load(s.val, i);
            let o = self.operand(b);
            self.combine(b, back, o)
        } else {
            self.expr(b)
        };
        b.store(s.val, i, e2);
    }

    /// `if p < q` (or against a constant), each arm a block; the `then` arm may
    /// return early.
    fn if_else(&mut self, b: &mut FunctionBuilder<'_>, depth: u32) {
        let p = self.operand(b);
        let pred = self
            .rng
            .pick(&[CmpPred::Lt, CmpPred::Gt, CmpPred::Le, CmpPred::Ge]);
        let cond = if self.rng.chance(1, 3) {
            let k = b.fconst(self.rng.pick(&[-0.6, -0.25, 0.1, 0.35, 0.8]));
            b.fcmp(pred, p, k)
        } else {
            let q = self.operand(b);
            self.compare(b, pred, p, q)
        };
        let then_b = b.create_block("then");
        let else_b = b.create_block("else");
        let join = b.create_block("join");
        b.br(cond, then_b, else_b);
        b.seal_block(then_b);
        b.seal_block(else_b);
        for arm in [then_b, else_b] {
            b.switch_to(arm);
            let scope = self.enter();
            self.block(b, depth + 1);
            self.leave(scope);
            // Only the `then` arm may return, so `join` stays reachable.
            if arm == then_b && self.rng.chance(1, 6) {
                let v = self.expr(b);
                b.ret(&[v]);
            } else {
                b.jump(join);
            }
        }
        b.seal_block(join);
        b.switch_to(join);
    }

    /// `for i in 0..end` with `end` the length of a slice in scope, `n`, or a small
    /// constant; the variables are carried through.
    fn counted_loop(&mut self, b: &mut FunctionBuilder<'_>, depth: u32) {
        let (end, over) = match self.rng.below(5) {
            0..=2 if !self.slices.is_empty() => {
                let s = self.slice().unwrap();
                (s.len, Some(s.val))
            }
            3 if !self.ints.is_empty() => (self.ints[0], None),
            _ => (b.iconst(1 + self.rng.below(3) as i64), None),
        };
        self.loop_over(b, end, over, |g, b| g.block(b, depth + 1));
    }

    /// A loop `for i in 0..end` whose body `body` sees `i` as a counter (bounded by
    /// `over`'s length if given).
    fn loop_over(
        &mut self,
        b: &mut FunctionBuilder<'_>,
        end: Value,
        over: Option<Value>,
        body: impl FnOnce(&mut Self, &mut FunctionBuilder<'_>),
    ) {
        let i = b.declare_named_var("i", Type::I64);
        let zero = b.iconst(0);
        b.def_var(i, zero);
        let head = b.create_block("head");
        let body_b = b.create_block("body");
        let exit = b.create_block("exit");
        b.jump(head);
        b.switch_to(head);
        let iv = b.use_var(i);
        let more = b.icmp(CmpPred::Lt, iv, end);
        b.br(more, body_b, exit);
        b.seal_block(body_b);
        b.switch_to(body_b);
        let iv = b.use_var(i);
        let scope = self.enter();
        self.ints.push(iv);
        if let Some(s) = over {
            self.counters.push((iv, s));
        }
        body(self, b);
        self.leave(scope);
        let one = b.iconst(1);
        let i1 = b.iadd(iv, one);
        b.def_var(i, i1);
        b.jump(head);
        b.seal_block(head);
        b.seal_block(exit);
        b.switch_to(exit);
    }

    /// `alloc f64, K` or `alloc f64, len s`, maybe filled by a loop over it; in scope
    /// for the rest of the current block of statements.
    fn alloc(&mut self, b: &mut FunctionBuilder<'_>, depth: u32) {
        let n = match self.slice() {
            Some(s) if self.rng.chance(1, 3) => s.len,
            _ => b.iconst(1 + self.rng.below(4) as i64),
        };
        let buf = b.alloc(Elem::F64, n);
        let len = b.len(buf);
        let s = Slice {
            val: buf,
            len,
            mutable: true,
        };
        if self.rng.chance(2, 3) {
            // buf[i] = expr(i), reading other slices.
            self.loop_over(b, len, Some(buf), |g, b| {
                let i = *g.ints.last().unwrap();
                let e = g.expr(b);
                let e = if depth < g.max_depth && g.rng.chance(1, 4) {
                    // (e + sin(0.3 i)) / 2
                    let fi = b.cast(Type::F64, i);
                    let k = b.fconst(0.3);
                    let fi = b.fmul(fi, k);
                    let s = b.sin(fi);
                    let sum = b.fadd(e, s);
                    let half = b.fconst(0.5);
                    b.fmul(sum, half)
                } else {
                    e
                };
                b.store(buf, i, e);
            });
        } else {
            let i = self.index(b, s);
            let e = self.expr(b);
            b.store(buf, i, e);
        }
        self.slices.push(s);
    }

    /// The first float variables: `names[k] = inits[k]`.
    fn start_vars(&mut self, b: &mut FunctionBuilder<'_>, inits: &[(&str, Value)]) {
        for &(name, init) in inits {
            let v = b.declare_named_var(name, Type::F64);
            b.def_var(v, init);
            self.vars.push(v);
        }
    }

    /// The returned value: a combination of variables and loads (in [-1, 1] and
    /// non-expanding, as every value is, so helpers called in loops stay tame; `@f`
    /// adds a second term).
    fn result(&mut self, b: &mut FunctionBuilder<'_>, sum: bool) -> Value {
        let e = self.expr(b);
        let o = self.operand(b);
        let r = self.combine(b, e, o);
        if sum {
            let o = self.operand(b);
            b.fadd(r, o)
        } else {
            r
        }
    }
}

fn new_gen<'r>(rng: &'r mut Rng, callees: Callees, budget: i32, max_depth: u32) -> Gen<'r> {
    Gen {
        rng,
        vars: Vec::new(),
        scalars: Vec::new(),
        slices: Vec::new(),
        ints: Vec::new(),
        counters: Vec::new(),
        callees,
        budget,
        max_depth,
        called: Default::default(),
    }
}

fn name_params(b: &mut FunctionBuilder<'_>, names: &[&str]) -> Vec<Value> {
    names
        .iter()
        .enumerate()
        .map(|(k, name)| {
            let p = b.param(k);
            b.named(name, p)
        })
        .collect()
}

fn slice_param(b: &mut FunctionBuilder<'_>, val: Value, mutable: bool) -> Slice {
    let len = b.len(val);
    Slice { val, len, mutable }
}

/// `@h(%p: f64, %q: f64) -> f64`: straight-line code, branches, local buffers,
/// calls to earlier scalar helpers.
fn scalar_helper(m: &Module, id: FuncId, rng: &mut Rng, callees: Callees) -> gradlift_ir::Function {
    let mut b = FunctionBuilder::new(m, id);
    let ps = name_params(&mut b, &["p", "q"]);
    let mut g = new_gen(rng, callees, 4, 1);
    g.scalars = ps.clone();
    let pq = g.combine(&mut b, ps[0], ps[1]);
    g.start_vars(&mut b, &[("u", ps[0]), ("t", pq)]);
    g.block(&mut b, 0);
    let r = g.result(&mut b, false);
    b.ret(&[r]);
    b.finish().unwrap()
}

/// `@r(%v: f64, %k: i64) -> f64`: some code, then `r(e, k - 1)` while `k > 0`.
fn rec_helper(m: &Module, id: FuncId, rng: &mut Rng, callees: Callees) -> gradlift_ir::Function {
    let mut b = FunctionBuilder::new(m, id);
    let ps = name_params(&mut b, &["v", "k"]);
    let mut g = new_gen(rng, callees, 3, 1);
    g.scalars = vec![ps[0]];
    let s = b.sin(ps[0]);
    g.start_vars(&mut b, &[("u", ps[0]), ("t", s)]);
    if g.rng.chance(1, 2) {
        g.block(&mut b, 0);
    }
    let zero = b.iconst(0);
    let pos = b.icmp(CmpPred::Gt, ps[1], zero);
    let rec = b.create_block("rec");
    let base = b.create_block("base");
    b.br(pos, rec, base);
    b.seal_block(rec);
    b.seal_block(base);
    b.switch_to(rec);
    let scope = g.enter();
    let e = g.expr(&mut b);
    let one = b.iconst(1);
    let k1 = b.isub(ps[1], one);
    let r = b.call(id, &[e, k1])[0];
    g.assign(&mut b, r);
    if g.rng.chance(1, 2) {
        g.block(&mut b, 1);
    }
    let o = g.operand(&mut b);
    let res = g.combine(&mut b, r, o);
    b.ret(&[res]);
    g.leave(scope);
    b.switch_to(base);
    let res = g.result(&mut b, false);
    b.ret(&[res]);
    b.finish().unwrap()
}

/// `@q(%v: [f64], %w: mut [f64], %c: f64, %k: i64) -> f64`: some code, then, while
/// `k > 0`, maybe a local buffer, and `q(v', w', e, k - 1)` with `v'`, `w'` chosen
/// among `v`, `w` and the buffers; at `k = 0` a store into `w`.
fn rec_slice_helper(
    m: &Module,
    id: FuncId,
    rng: &mut Rng,
    callees: Callees,
) -> gradlift_ir::Function {
    let mut b = FunctionBuilder::new(m, id);
    let ps = name_params(&mut b, &["v", "w", "c", "k"]);
    let mut g = new_gen(rng, callees, 5, 1);
    let v = slice_param(&mut b, ps[0], false);
    let w = slice_param(&mut b, ps[1], true);
    g.slices = vec![v, w];
    g.scalars = vec![ps[2]];
    let v0 = g.load(&mut b, v);
    g.start_vars(&mut b, &[("u", ps[2]), ("t", v0)]);
    if g.rng.chance(1, 2) {
        g.block(&mut b, 0);
    }
    let zero = b.iconst(0);
    let pos = b.icmp(CmpPred::Gt, ps[3], zero);
    let rec = b.create_block("rec");
    let base = b.create_block("base");
    b.br(pos, rec, base);
    b.seal_block(rec);
    b.seal_block(base);
    b.switch_to(rec);
    let scope = g.enter();
    if g.rng.chance(1, 2) {
        g.alloc(&mut b, 1);
    }
    let (v1, w1) = g.slice_args().unwrap();
    let e = g.expr(&mut b);
    let one = b.iconst(1);
    let k1 = b.isub(ps[3], one);
    let r = b.call(id, &[v1.val, w1.val, e, k1])[0];
    g.assign(&mut b, r);
    if g.rng.chance(1, 2) {
        g.block(&mut b, 1);
    }
    let o = g.operand(&mut b);
    let res = g.combine(&mut b, r, o);
    b.ret(&[res]);
    g.leave(scope);
    b.switch_to(base);
    let i = g.index(&mut b, w);
    let e = g.expr(&mut b);
    b.store(w.val, i, e);
    let res = g.result(&mut b, false);
    b.ret(&[res]);
    b.finish().unwrap()
}

/// `@s(%v: [f64], %w: mut [f64], %c: f64) -> f64`.
fn slice_helper(m: &Module, id: FuncId, rng: &mut Rng, callees: Callees) -> gradlift_ir::Function {
    let mut b = FunctionBuilder::new(m, id);
    let ps = name_params(&mut b, &["v", "w", "c"]);
    let mut g = new_gen(rng, callees, 8, 2);
    let v = slice_param(&mut b, ps[0], false);
    let w = slice_param(&mut b, ps[1], true);
    g.slices = vec![v, w];
    g.scalars = vec![ps[2]];
    let v0 = g.load(&mut b, v);
    let w0 = g.load(&mut b, w);
    let cw = g.combine(&mut b, ps[2], w0);
    g.start_vars(&mut b, &[("u", ps[2]), ("t", v0), ("z", cw)]);
    g.block(&mut b, 0);
    if g.rng.chance(1, 2) {
        g.block(&mut b, 0);
    }
    // Something is written into `w`.
    let i = g.index(&mut b, w);
    let e = g.expr(&mut b);
    b.store(w.val, i, e);
    let r = g.result(&mut b, false);
    b.ret(&[r]);
    b.finish().unwrap()
}

/// `@f(%x: [f64], %y: mut [f64], %a: f64, %n: i64) -> f64`.
fn main_fn(m: &Module, id: FuncId, rng: &mut Rng, callees: Callees) -> gradlift_ir::Function {
    let mut b = FunctionBuilder::new(m, id);
    let ps = name_params(&mut b, &["x", "y", "a", "n"]);
    let mut g = new_gen(rng, callees, 16, 2);
    let x = slice_param(&mut b, ps[0], false);
    let y = slice_param(&mut b, ps[1], true);
    g.slices = vec![x, y];
    g.scalars = vec![ps[2]];
    g.ints = vec![ps[3]];
    let x0 = g.load(&mut b, x);
    let y0 = g.load(&mut b, y);
    let ay = g.combine(&mut b, ps[2], y0);
    g.start_vars(&mut b, &[("u", ps[2]), ("t", x0), ("z", ay)]);
    for _ in 0..3 + g.rng.below(4) {
        g.stmt(&mut b, 0);
    }
    // Every helper is called at least once (here, if not before).
    let callees = g.callees.clone();
    for &h in &callees.scalar {
        if !g.called.contains(&h) {
            g.call_scalar(&mut b, h);
        }
    }
    if let Some(r) = callees.rec.filter(|r| !g.called.contains(r)) {
        g.call_rec(&mut b, r);
    }
    for &s in &callees.slice {
        if !g.called.contains(&s) {
            g.call_slice(&mut b, s);
        }
    }
    if let Some(q) = callees.rec_slice.filter(|q| !g.called.contains(q)) {
        g.call_rec_slice(&mut b, q);
    }
    let r = g.result(&mut b, true);
    b.ret(&[r]);
    b.finish().unwrap()
}

/// The module of `seed`.
fn module(seed: u64) -> Module {
    let mut rng = Rng(seed.wrapping_mul(0x2545_f491_4f6c_dd1d) ^ 0x6a09_e667);
    let mut m = Module::new();
    let f64s = Type::slice(Elem::F64);
    let f64s_mut = Type::slice_mut(Elem::F64);
    let n_scalar = rng.below(3) as usize;
    let n_slice = rng.below(3) as usize;
    let with_rec = rng.chance(1, 2);
    let with_rec_slice = rng.chance(1, 3);
    let scalar_sig = Signature::new([Type::F64, Type::F64], [Type::F64]);
    let hs: Vec<FuncId> = (0..n_scalar)
        .map(|k| m.declare(&format!("h{k}"), scalar_sig.clone()).unwrap())
        .collect();
    let rec = with_rec.then(|| {
        m.declare("r", Signature::new([Type::F64, Type::I64], [Type::F64]))
            .unwrap()
    });
    let slice_sig = Signature::new([f64s, f64s_mut, Type::F64], [Type::F64]);
    let ss: Vec<FuncId> = (0..n_slice)
        .map(|k| m.declare(&format!("s{k}"), slice_sig.clone()).unwrap())
        .collect();
    let rec_slice = with_rec_slice.then(|| {
        let sig = Signature::new([f64s, f64s_mut, Type::F64, Type::I64], [Type::F64]);
        m.declare("q", sig).unwrap()
    });
    let f = m
        .declare(
            "f",
            Signature::new([f64s, f64s_mut, Type::F64, Type::I64], [Type::F64]),
        )
        .unwrap();
    for (k, &h) in hs.iter().enumerate() {
        let callees = Callees {
            scalar: hs[..k].to_vec(),
            ..Callees::default()
        };
        let body = scalar_helper(&m, h, &mut rng, callees);
        m.define(h, body).unwrap();
    }
    if let Some(r) = rec {
        let callees = Callees {
            scalar: hs.clone(),
            ..Callees::default()
        };
        let body = rec_helper(&m, r, &mut rng, callees);
        m.define(r, body).unwrap();
    }
    for (k, &s) in ss.iter().enumerate() {
        let callees = Callees {
            scalar: hs.clone(),
            slice: ss[..k].to_vec(),
            rec,
            rec_slice: None,
        };
        let body = slice_helper(&m, s, &mut rng, callees);
        m.define(s, body).unwrap();
    }
    let mut callees = Callees {
        scalar: hs.clone(),
        slice: ss.clone(),
        rec,
        rec_slice: None,
    };
    if let Some(q) = rec_slice {
        let body = rec_slice_helper(&m, q, &mut rng, callees.clone());
        m.define(q, body).unwrap();
    }
    callees.rec_slice = rec_slice;
    let body = main_fn(&m, f, &mut rng, callees);
    m.define(f, body).unwrap();
    m
}

/// A random point: `x`, `y` of lengths 1..6 with elements in [-1, 1], `a` in
/// [-1, 1], `n` in 0..4.
fn point(rng: &mut Rng) -> Vec<Val> {
    let slice = |rng: &mut Rng| {
        let len = 1 + rng.below(6) as usize;
        Val::F64s((0..len).map(|_| rng.unit() * 2.0 - 1.0).collect())
    };
    let x = slice(rng);
    let y = slice(rng);
    vec![
        x,
        y,
        Val::F64(rng.unit() * 2.0 - 1.0),
        Val::I64(rng.below(4) as i64),
    ]
}

#[derive(Default, Debug)]
struct Stats {
    modules: usize,
    rules: usize,
    checks: usize,
    const_write_skips: usize,
    const_y_derived: usize,
    nonzero_gradients: usize,
}

/// The derived module prints, parses back and prints identically.
fn round_trips(seed: u64, rule: &Rule, config: &RuleConfig) {
    let text = rule.module.to_string();
    let back = parse(&text).unwrap_or_else(|e| panic!("seed {seed}, {config:?}: {e}\n{text}"));
    assert_eq!(back.to_string(), text, "seed {seed}, {config:?}");
}

/// Derives `@f` of module `seed` under the default activities, debug mode and the
/// variants, and checks each at random points.
fn check_seed(seed: u64, all_variants: bool, stats: &mut Stats) {
    let m = module(seed);
    verify(&m)
        .unwrap_or_else(|e| panic!("seed {seed}: the generated module does not verify: {e}\n{m}"));
    let id = m.func_by_name("f").unwrap();
    let mut points = Rng(seed ^ 0x51ed_2701_f00d);
    let opts = CheckOptions::f64();
    let default = RuleConfig::default_for(m.sig(id));
    use Activity::*;
    let mut noneed = default.clone().with_primal(false);
    noneed.params[1] = DupNoNeed;
    let variants = [
        default.clone().with_params([Const, Dup, Active, Const]),
        noneed,
        default.clone().with_ret(RetActivity::Const),
        default.clone().with_params([Dup, Dup, Const, Const]),
    ];
    // Mostly refused with `ConstWrite`, which costs little, so tried on every
    // module.
    let y_const = default.clone().with_params([Dup, Const, Active, Const]);
    let mut configs = vec![
        (default.clone(), if all_variants { 3 } else { 1 }),
        (default.clone().with_debug(true, true), 1),
        (y_const.clone(), 1),
    ];
    let k = (seed % 4) as usize;
    if all_variants {
        configs.extend(variants.iter().map(|c| (c.clone(), 1)));
        configs.push((y_const.with_debug(true, false), 1));
    } else {
        // One variant in turn (most of the time goes into printing and parsing the
        // derived modules, over a thousand lines each).
        configs.push((variants[k].clone(), 1));
    }
    // And, when fuzzing, one in debug mode, in turn.
    if all_variants {
        configs.push((variants[(k + 1) % 4].clone().with_debug(true, false), 1));
    }
    stats.modules += 1;
    for (config, npoints) in configs {
        let rule = match build_rrule(&m, id, &config) {
            Ok(rule) => rule,
            Err(AdError::ConstWrite { .. }) if config.params[1] == Const => {
                stats.const_write_skips += 1;
                continue;
            }
            Err(e) => panic!("seed {seed}, {config:?}: {e}\n{m}"),
        };
        stats.rules += 1;
        if config.params[1] == Const {
            stats.const_y_derived += 1;
        }
        round_trips(seed, &rule, &config);
        for _ in 0..npoints {
            let args = point(&mut points);
            stats.checks += 1;
            match check_derived(&m, &rule, &args, &opts) {
                Ok(report) => {
                    // A check the rule could pass by returning zeros (or tiny
                    // numbers, within the absolute tolerance) is weak: count the
                    // gradients with a coordinate of magnitude 0.01 at least.
                    if report.gradient.iter().any(|&g| g.abs() >= 0.01) {
                        stats.nonzero_gradients += 1;
                    }
                }
                Err(e) => {
                    let mut msg = e.to_string();
                    msg.truncate(3000);
                    panic!(
                        "seed {seed}, activities {} (debug {}), at {args:?}: {msg}\n{m}",
                        config.pattern(),
                        config.debug
                    );
                }
            }
        }
    }
}

fn run(seeds: std::ops::Range<u64>, all_variants: bool) -> Stats {
    // `RANDOM_MEMORY_SEED=N` runs seed N alone and prints its module;
    // `RANDOM_MEMORY_SEED=A..B` runs seeds A to B - 1.
    let seeds = match std::env::var("RANDOM_MEMORY_SEED") {
        Ok(s) => match s.split_once("..") {
            Some((a, b)) => {
                let a: u64 = a.parse().expect("RANDOM_MEMORY_SEED is N or A..B");
                let b: u64 = b.parse().expect("RANDOM_MEMORY_SEED is N or A..B");
                a..b
            }
            None => {
                let s: u64 = s.parse().expect("RANDOM_MEMORY_SEED is N or A..B");
                eprintln!("{}", module(s));
                s..s + 1
            }
        },
        Err(_) => seeds,
    };
    let mut stats = Stats::default();
    let mut slowest = (std::time::Duration::ZERO, 0);
    for seed in seeds {
        let start = std::time::Instant::now();
        check_seed(seed, all_variants, &mut stats);
        slowest = slowest.max((start.elapsed(), seed));
    }
    eprintln!("{stats:?}; slowest: seed {} in {:?}", slowest.1, slowest.0);
    stats
}

/// Seeds 0 to 74 and 75 to 149 are two tests, so that the two halves run side by
/// side.
fn check_seeds(seeds: core::ops::Range<u64>) {
    let n = (seeds.end - seeds.start) as usize;
    let stats = run(seeds, false);
    if std::env::var("RANDOM_MEMORY_SEED").is_err() {
        assert_eq!(stats.modules, n);
        // The variant with `y` const is often refused (`y` is written with varied
        // values and read back), not always.
        assert!(stats.const_y_derived >= 2, "{stats:?}");
        // Most checks compare nonzero gradients (the `const` return's are zero).
        assert!(
            stats.nonzero_gradients * 10 >= stats.checks * 7,
            "{stats:?}"
        );
    }
}

#[test]
fn random_memory_programs_pass_check_derived() {
    check_seeds(0..75);
}

#[test]
fn random_memory_programs_pass_check_derived_second_half() {
    check_seeds(75..150);
}

/// The generator makes what it promises: calls of every kind, buffers, stores,
/// loops and branches, over the default run's modules.
#[test]
fn the_generator_covers_slices_buffers_calls_and_recursion() {
    let mut seen = std::collections::BTreeMap::<&str, usize>::new();
    for seed in 0..150 {
        let text = module(seed).to_string();
        for (what, pat) in [
            ("alloc", "= alloc f64"),
            ("store", "store %"),
            ("irem", "= irem"),
            ("len", "= len"),
            ("call @h", "call @h"),
            ("call @s", "call @s"),
            ("call @r", "call @r("),
            ("call @q", "call @q("),
            ("fcmp", "= fcmp"),
            ("select", "= select"),
            ("loop", "head"),
            ("if", "then"),
        ] {
            if text.contains(pat) {
                *seen.entry(what).or_default() += 1;
            }
        }
    }
    eprintln!("{seen:?}");
    for (what, &count) in &seen {
        assert!(count >= 15, "only {count} modules with {what}: {seen:?}");
    }
    assert_eq!(seen.len(), 12, "{seen:?}");
}

/// Thousands of modules, for fuzzing in release mode:
/// `cargo test --release -p gradlift-adjoint --test random_memory -- --ignored`.
#[test]
#[ignore]
fn many_random_memory_programs_pass_check_derived() {
    let stats = run(1000..4000, true);
    if std::env::var("RANDOM_MEMORY_SEED").is_err() {
        assert_eq!(stats.modules, 3000);
    }
}
