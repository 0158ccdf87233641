//! Random scalar programs, structured and unstructured, against forward mode.
//!
//! A seeded generator writes functions `@f(%x0: f64, %x1: f64, %n: i64, %flag: bool)
//! -> f64` with the builder's variables: assignments from a menu of smooth, bounded
//! expressions, `if`/`else` on float comparisons or on `%flag`, loops counted by a
//! constant or by `%n`, data-dependent `while` loops (halving until small, with a
//! bound), and early returns; and unstructured functions whose blocks jump and branch
//! to one another at random (irreducible loops, many-predecessor merges), ended by a
//! step counter. Every function verifies; its pullback agrees with a
//! forward-mode evaluator written in `support` (an oracle independent of the rule
//! table) at random points, with a balanced tape; some also pass `check_rule`; and
//! every derived module prints, parses back and prints identically.
//!
//! Forward mode, not finite differences, is the main oracle here: random programs
//! are sometimes ill-conditioned (a `sin` of a huge argument with a huge slope),
//! where central differences measure a coarse slope that no step size fixes, while
//! forward and reverse mode agree to rounding.

mod support;

use gradlift_adjoint::{CheckOptions, RuleConfig, build_rrule, check_derived};
use gradlift_ir::interp::{Interpreter, Val};
use gradlift_ir::{
    CmpPred, FunctionBuilder, Module, Signature, Type, Value, Variable, parse, verify,
};
use support::{Rng, Tan, jvp_finite};

struct Gen<'a> {
    rng: Rng,
    vars: Vec<Variable>,
    n: Value,
    flag: Value,
    /// Blocks still allowed, so programs stay small.
    budget: i32,
    _m: core::marker::PhantomData<&'a ()>,
}

impl Gen<'_> {
    /// A generator over the parameters `(x0, x1, n, flag)`, with the three `f64`
    /// variables every program starts from: `a = x0`, `b = x1`, `c = x0 * x1`.
    fn start(b: &mut FunctionBuilder, seed: u64, budget: i32, params: [Value; 4]) -> Self {
        let [x0, x1, n, flag] = params;
        let mut g = Gen {
            rng: Rng(seed),
            vars: Vec::new(),
            n,
            flag,
            budget,
            _m: core::marker::PhantomData,
        };
        let xy = b.fmul(x0, x1);
        for (name, init) in [("a", x0), ("b", x1), ("c", xy)] {
            let v = b.declare_named_var(name, Type::F64);
            b.def_var(v, init);
            g.vars.push(v);
        }
        g
    }

    fn var(&mut self) -> Variable {
        self.vars[self.rng.below(self.vars.len() as u64) as usize]
    }

    /// One smooth expression of two variables, bounded for bounded inputs.
    fn expr(&mut self, b: &mut FunctionBuilder<'_>) -> Value {
        let (p, q) = (self.var(), self.var());
        let (a, c) = (b.use_var(p), b.use_var(q));
        match self.rng.below(19) {
            0 => {
                let m = b.fmul(a, c);
                b.tanh(m)
            }
            1 => {
                let s = b.sin(c);
                b.fadd(a, s)
            }
            2 => {
                let (k9, k2) = (b.fconst(0.9), b.fconst(0.2));
                let a9 = b.fmul(a, k9);
                let c2 = b.fmul(c, k2);
                b.fadd(a9, c2)
            }
            3 => b.fmin(a, c),
            4 => b.fmax(a, c),
            5 => {
                let aa = b.fmul(a, a);
                let one = b.fconst(1.0);
                let s = b.fadd(aa, one);
                b.sqrt(s)
            }
            6 => {
                let t = b.tanh(a);
                b.exp(t)
            }
            7 => {
                let lt = b.fcmp(CmpPred::Lt, a, c);
                let ac = b.fmul(a, c);
                let ac = b.tanh(ac);
                b.select(lt, ac, c)
            }
            8 => {
                let aa = b.fmul(a, a);
                let one = b.fconst(1.0);
                let s = b.fadd(aa, one);
                b.log(s)
            }
            9 => {
                let cc = b.fmul(c, c);
                let one = b.fconst(1.0);
                let d = b.fadd(cc, one);
                b.fdiv(a, d)
            }
            10 => {
                let t = b.tanh(a);
                let three = b.iconst(3);
                b.powi(t, three)
            }
            11 => {
                let aa = b.fmul(a, a);
                let one = b.fconst(1.0);
                let base = b.fadd(aa, one);
                let e = b.tanh(c);
                b.pow(base, e)
            }
            12 => {
                let s = b.fsub(a, c);
                let cs = b.cos(s);
                b.fmul(cs, a)
            }
            13 => {
                // atan2 a, (1.5 + tanh c): x > 0, away from the jump.
                let t = b.tanh(c);
                let k = b.fconst(1.5);
                let x = b.fadd(t, k);
                b.atan2(a, x)
            }
            14 => {
                // 0.5 hypot(a, 1.5 + tanh c): away from the origin.
                let t = b.tanh(c);
                let k = b.fconst(1.5);
                let y = b.fadd(t, k);
                let h = b.hypot(a, y);
                let half = b.fconst(0.5);
                b.fmul(h, half)
            }
            15 => {
                let t = b.tanh(c);
                let k = b.fconst(0.1);
                b.fma(a, t, k)
            }
            16 => {
                // sinh(tanh a) + atan c - asin(tanh(a) / 2) + acos(tanh(c) / 2)
                let (ta, tc) = (b.tanh(a), b.tanh(c));
                let (s, at) = (b.sinh(ta), b.atan(c));
                let half = b.fconst(0.5);
                let (ha, hc) = (b.fmul(ta, half), b.fmul(tc, half));
                let (asn, acs) = (b.asin(ha), b.acos(hc));
                let s1 = b.fadd(s, at);
                let s2 = b.fsub(s1, asn);
                b.fadd(s2, acs)
            }
            17 => {
                // log2(exp2(tanh a) + c²) - log10(cosh(tanh c))
                let (ta, tc) = (b.tanh(a), b.tanh(c));
                let e = b.exp2(ta);
                let cc = b.fmul(c, c);
                let s = b.fadd(e, cc);
                let l2 = b.log2(s);
                let ch = b.cosh(tc);
                let l10 = b.log10(ch);
                b.fsub(l2, l10)
            }
            _ => {
                let nf = b.cast(Type::F64, self.n);
                let t = b.tanh(nf);
                let na = b.fneg(a);
                b.fmul(t, na)
            }
        }
    }

    /// A sequence of statements; `may_return` allows an early return.
    fn block(&mut self, b: &mut FunctionBuilder<'_>, depth: u32, may_return: bool) {
        let count = 1 + self.rng.below(4);
        for _ in 0..count {
            let kind = self.rng.below(10);
            if kind < 5 || depth >= 3 || self.budget <= 0 {
                let v = self.expr(b);
                let target = self.var();
                b.def_var(target, v);
            } else if kind < 7 {
                self.budget -= 3;
                self.if_else(b, depth, may_return);
            } else if kind < 9 {
                self.budget -= 3;
                self.counted_loop(b, depth);
            } else {
                self.budget -= 3;
                self.while_loop(b);
            }
        }
    }

    fn if_else(&mut self, b: &mut FunctionBuilder<'_>, depth: u32, may_return: bool) {
        let cond = if self.rng.below(3) == 0 {
            self.flag
        } else {
            let (p, q) = (self.var(), self.var());
            let (a, c) = (b.use_var(p), b.use_var(q));
            b.fcmp(CmpPred::Lt, a, c)
        };
        let then_b = b.create_block("then");
        let else_b = b.create_block("else");
        let join = b.create_block("join");
        b.br(cond, then_b, else_b);
        b.seal_block(then_b);
        b.seal_block(else_b);
        for arm in [then_b, else_b] {
            b.switch_to(arm);
            // Only the `then` arm may return, so `join` stays reachable.
            if may_return && arm == then_b && self.rng.below(4) == 0 {
                let v = self.expr(b);
                b.ret(&[v]);
            } else {
                self.block(b, depth + 1, may_return);
                b.jump(join);
            }
        }
        b.seal_block(join);
        b.switch_to(join);
    }

    fn counted_loop(&mut self, b: &mut FunctionBuilder<'_>, depth: u32) {
        let i = b.declare_var(Type::I64);
        let zero = b.iconst(0);
        b.def_var(i, zero);
        let end = if self.rng.below(2) == 0 {
            b.iconst(self.rng.below(4) as i64)
        } else {
            self.n
        };
        let head = b.create_block("head");
        let body = b.create_block("body");
        let exit = b.create_block("exit");
        b.jump(head);
        b.switch_to(head);
        let iv = b.use_var(i);
        let more = b.icmp(CmpPred::Lt, iv, end);
        b.br(more, body, exit);
        b.seal_block(body);
        b.switch_to(body);
        self.block(b, depth + 1, false);
        let iv = b.use_var(i);
        let one = b.iconst(1);
        let i1 = b.iadd(iv, one);
        b.def_var(i, i1);
        b.jump(head);
        b.seal_block(head);
        b.seal_block(exit);
        b.switch_to(exit);
    }

    /// `while |v| > 1 and k < 8: v = v * 0.5 + 0.1 tanh(w); k += 1`.
    fn while_loop(&mut self, b: &mut FunctionBuilder<'_>) {
        let (v, w) = (self.var(), self.var());
        let k = b.declare_var(Type::I64);
        let zero = b.iconst(0);
        b.def_var(k, zero);
        let head = b.create_block("while");
        let body = b.create_block("wbody");
        let exit = b.create_block("wexit");
        b.jump(head);
        b.switch_to(head);
        let vv = b.use_var(v);
        let av = b.fabs(vv);
        let one = b.fconst(1.0);
        let big = b.fcmp(CmpPred::Gt, av, one);
        let kv = b.use_var(k);
        let eight = b.iconst(8);
        let few = b.icmp(CmpPred::Lt, kv, eight);
        let go = b.and(big, few);
        b.br(go, body, exit);
        b.seal_block(body);
        b.switch_to(body);
        let (vv, wv) = (b.use_var(v), b.use_var(w));
        let half = b.fconst(0.5);
        let h = b.fmul(vv, half);
        let t = b.tanh(wv);
        let tenth = b.fconst(0.1);
        let t = b.fmul(t, tenth);
        let nv = b.fadd(h, t);
        b.def_var(v, nv);
        let kv = b.use_var(k);
        let one = b.iconst(1);
        let k1 = b.iadd(kv, one);
        b.def_var(k, k1);
        b.jump(head);
        b.seal_block(head);
        b.seal_block(exit);
        b.switch_to(exit);
    }
}

fn program(seed: u64) -> Module {
    let mut m = Module::new();
    let sig = Signature::new([Type::F64, Type::F64, Type::I64, Type::Bool], [Type::F64]);
    let id = m.declare("f", sig).unwrap();
    let mut b = FunctionBuilder::new(&m, id);
    let (x0, x1, n, flag) = (b.param(0), b.param(1), b.param(2), b.param(3));
    for (k, name) in ["x0", "x1", "n", "flag"].iter().enumerate() {
        let p = b.param(k);
        b.named(name, p);
    }
    let mut g = Gen::start(&mut b, seed, 24, [x0, x1, n, flag]);
    g.block(&mut b, 0, true);
    let e = g.expr(&mut b);
    b.ret(&[e]);
    m.define(id, b.finish().unwrap()).unwrap();
    m
}

/// A random unstructured function: `blocks` blocks that jump and branch to one
/// another at random, backward and forward (so loops may be irreducible, and blocks
/// have many predecessors), some branching to blocks that return. A step counter
/// `k` sends every block to `exit` once it runs out, so every run ends. Every block
/// is reachable: block `i` always has block `i + 1` among its targets.
fn unstructured(seed: u64, blocks: usize) -> Module {
    let mut m = Module::new();
    let sig = Signature::new([Type::F64, Type::F64, Type::I64, Type::Bool], [Type::F64]);
    let id = m.declare("f", sig).unwrap();
    let mut b = FunctionBuilder::new(&m, id);
    let (x0, x1, n, flag) = (b.param(0), b.param(1), b.param(2), b.param(3));
    let mut g = Gen::start(&mut b, seed, 0, [x0, x1, n, flag]);
    let k = b.declare_named_var("k", Type::I64);
    let fuel = b.iconst(6 + g.rng.below(10) as i64);
    let k0 = b.iadd(fuel, n);
    b.def_var(k, k0);
    let bs: Vec<_> = (0..blocks)
        .map(|i| b.create_block(&format!("b{i}")))
        .collect();
    let exit = b.create_block("exit");
    b.jump(bs[0]);
    for i in 0..blocks {
        b.switch_to(bs[i]);
        for _ in 0..1 + g.rng.below(2) {
            let v = g.expr(&mut b);
            let t = g.var();
            b.def_var(t, v);
        }
        let kv = b.use_var(k);
        let one = b.iconst(1);
        let k1 = b.isub(kv, one);
        b.def_var(k, k1);
        let zero = b.iconst(0);
        let out = b.icmp(CmpPred::Le, k1, zero);
        let go = b.create_block(&format!("go{i}"));
        b.br(out, exit, go);
        b.switch_to(go);
        let next = bs[(i + 1) % blocks];
        let other = bs[g.rng.below(blocks as u64) as usize];
        let cond = if g.rng.below(3) == 0 {
            g.flag
        } else {
            let (p, q) = (g.var(), g.var());
            let (pa, qa) = (b.use_var(p), b.use_var(q));
            b.fcmp(CmpPred::Lt, pa, qa)
        };
        match g.rng.below(4) {
            0 => b.jump(next),
            1 => b.br(cond, next, other),
            2 => b.br(cond, other, next),
            _ => {
                let ret = b.create_block(&format!("ret{i}"));
                b.br(cond, next, ret);
                b.switch_to(ret);
                let v = g.expr(&mut b);
                b.ret(&[v]);
            }
        }
    }
    b.switch_to(exit);
    let v = g.expr(&mut b);
    b.ret(&[v]);
    m.define(id, b.finish().unwrap()).unwrap();
    m
}

/// A random point: `x0`, `x1` in [-2, 2), `n` in 0..4, a random flag.
fn point(rng: &mut Rng) -> [Val; 4] {
    [
        Val::F64(rng.unit() * 4.0 - 2.0),
        Val::F64(rng.unit() * 4.0 - 2.0),
        Val::I64(rng.below(4) as i64),
        Val::Bool(rng.below(2) == 0),
    ]
}

/// The pullback against forward mode: for each active parameter `i`,
/// `(Jᵀ 1)_i = J e_i`. Forward mode is exact up to rounding, so the tolerance is
/// tight, whatever the conditioning of the program.
#[test]
fn random_programs_match_forward_mode_and_round_trip() {
    for_random_programs(150, program);
}

/// The same for random unstructured control flow.
#[test]
fn random_unstructured_programs_match_forward_mode_and_round_trip() {
    for_random_programs(100, |seed| unstructured(seed, 2 + (seed % 7) as usize));
}

fn for_random_programs(count: u64, program: impl Fn(u64) -> Module) {
    let mut points = Rng(7);
    let (mut compared, mut skipped) = (0, 0);
    for seed in 0..count {
        let m = program(seed);
        verify(&m).unwrap_or_else(|e| panic!("seed {seed}: {e}\n{m}"));
        let id = m.func_by_name("f").unwrap();
        let config = RuleConfig::default_for(m.sig(id));
        let rule = build_rrule(&m, id, &config).unwrap_or_else(|e| panic!("seed {seed}: {e}\n{m}"));
        let text = rule.module.to_string();
        let back = parse(&text).unwrap_or_else(|e| panic!("seed {seed}: {e}\n{text}"));
        assert_eq!(back.to_string(), text, "seed {seed}");
        let mut engine = Interpreter::new(&rule.module);
        for _ in 0..3 {
            let args = point(&mut points);
            let y = engine.call(rule.forward, &mut args.clone()).unwrap();
            let dx = engine.call(rule.pullback, &mut [Val::F64(1.0)]).unwrap();
            assert_eq!(engine.tape().scalars, 0, "seed {seed}");
            for (k, d) in dx.iter().enumerate() {
                let tangents: Vec<Tan> = args
                    .iter()
                    .enumerate()
                    .map(|(j, a)| Tan {
                        val: a.scalar().unwrap(),
                        dot: if j == k { 1.0 } else { 0.0 },
                    })
                    .collect();
                let (out, finite) = jvp_finite(&m, id, &tangents);
                if !finite {
                    // An overflow on the way: forward and reverse mode meet inf in
                    // different places (inf / inf in one, 0 in the other).
                    skipped += 1;
                    continue;
                }
                compared += 1;
                let (Val::F64(fy), Some(oy)) = (&y[0], out[0].val.as_f64()) else {
                    panic!("{y:?}")
                };
                assert!(
                    fy.to_bits() == oy.to_bits() || fy.is_nan() && oy.is_nan(),
                    "seed {seed}"
                );
                let (Val::F64(rev), fwd) = (d, out[0].dot) else {
                    panic!("{d:?}")
                };
                let same = rev.to_bits() == fwd.to_bits()
                    || (rev.is_nan() && fwd.is_nan())
                    || (rev - fwd).abs() <= 1e-9 * rev.abs().max(fwd.abs()) + 1e-12;
                assert!(
                    same,
                    "seed {seed} at {args:?}: d/dx{k} is {rev} by the pullback, {fwd} by forward mode\n{text}"
                );
            }
        }
    }
    assert!(
        skipped * 10 < compared,
        "{skipped} skipped, {compared} compared"
    );
}

/// `check_rule` end to end (finite differences, the dot-product test, the tape) on
/// some of the same programs.
#[test]
fn random_programs_pass_check_rule() {
    let mut points = Rng(9);
    for seed in 0..40u64 {
        let m = program(seed);
        let id = m.func_by_name("f").unwrap();
        let config = RuleConfig::default_for(m.sig(id));
        let rule = build_rrule(&m, id, &config).unwrap();
        let args = point(&mut points);
        if let Err(e) = check_derived(&m, &rule, &args, &CheckOptions::f64()) {
            panic!("seed {seed} at {args:?}: {e}\n{}", rule.module);
        }
    }
}
