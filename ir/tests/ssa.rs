//! Tests of SSA construction: variables (`declare_var`/`def_var`/`use_var`) in the
//! `FunctionBuilder`, with the phis the builder places.
//!
//! Every function built here is checked the same way ([`build`]): it passes the
//! verifier, it prints, parses back and prints identically, and no phi the builder
//! left is trivial. Shapes are pinned by counting phis per block (or by the exact
//! print, for small cases); meaning is checked on the interpreter against plain Rust
//! loops, and, in the proptest, against a direct evaluator of random structured
//! programs.

use std::time::{Duration, Instant};

use gradlift_ir::interp::{Interpreter, Limits, Val};
use gradlift_ir::{
    Block, CmpPred, Elem, FuncId, Function, FunctionBuilder, Module, Signature, Type, Value,
    Variable, parse, verify,
};
use proptest::prelude::*;

const F64: Type = Type::F64;
const I64: Type = Type::I64;
const BOOL: Type = Type::Bool;
const SF64: Type = Type::slice(Elem::F64);
const MF64: Type = Type::slice_mut(Elem::F64);

fn sig(params: impl Into<Vec<Type>>, results: impl Into<Vec<Type>>) -> Signature {
    Signature::new(params, results)
}

/// Builds `@f` with `body`, then checks it: it finishes without error, verifies,
/// round-trips through the text format, and has no trivial phi.
#[track_caller]
fn build(s: Signature, body: impl FnOnce(&mut FunctionBuilder<'_>)) -> (Module, FuncId) {
    let mut m = Module::new();
    let id = m.declare("f", s).unwrap();
    let mut b = FunctionBuilder::new(&m, id);
    body(&mut b);
    let func = match b.finish() {
        Ok(f) => f,
        Err(e) => panic!("{e}"),
    };
    no_trivial_phis(&func);
    m.define(id, func).unwrap();
    check_module(&m);
    (m, id)
}

/// The module verifies, and printing, parsing and printing again gives the same text.
#[track_caller]
fn check_module(m: &Module) {
    if let Err(e) = verify(m) {
        panic!("verifier:\n{e}\n--- module:\n{m}");
    }
    let once = m.to_string();
    let parsed = match parse(&once) {
        Ok(p) => p,
        Err(e) => panic!("parse failed:\n{e}\n--- text:\n{once}"),
    };
    assert_eq!(parsed.to_string(), once, "print(parse(print)) differs");
}

/// Every phi merges at least two distinct values other than itself.
#[track_caller]
fn no_trivial_phis(func: &Function) {
    for &b in &func.layout {
        for phi in &func.blocks[b].phis {
            let mut distinct: Vec<Value> = phi
                .incoming
                .iter()
                .map(|&(_, v)| v)
                .filter(|&v| v != phi.value)
                .collect();
            distinct.sort();
            distinct.dedup();
            assert!(distinct.len() >= 2, "trivial phi {} in {b}", phi.value);
        }
    }
}

/// The number of phis in each block of `@f`, by block name, in layout order.
fn phis_per_block(m: &Module, id: FuncId) -> Vec<(String, usize)> {
    let f = m.function(id).unwrap();
    f.layout
        .iter()
        .map(|&b| {
            let d = &f.blocks[b];
            (d.name.as_deref().unwrap_or("?").to_string(), d.phis.len())
        })
        .collect()
}

/// `phis_per_block` as `name:count` pairs, blocks without phis left out.
#[track_caller]
fn check_phis(m: &Module, id: FuncId, expected: &str) {
    let got: Vec<String> = phis_per_block(m, id)
        .into_iter()
        .filter(|&(_, n)| n > 0)
        .map(|(b, n)| format!("{b}:{n}"))
        .collect();
    assert_eq!(got.join(" "), expected, "\n{m}");
}

/// The module prints as `expected` (after its first newline).
#[track_caller]
fn check_print(m: &Module, expected: &str) {
    let expected = expected.strip_prefix('\n').unwrap_or(expected);
    assert_eq!(m.to_string(), expected, "\nprinted:\n{m}");
}

/// Runs `@f` on the interpreter, with fuel enough for every test here, so that a
/// wrong translation that loops forever fails instead of hanging.
fn run(m: &Module, id: FuncId, args: &[Val]) -> Vec<Val> {
    let limits = Limits {
        fuel: Some(10_000_000),
        ..Limits::default()
    };
    match Interpreter::new(m)
        .with_limits(limits)
        .call(id, &mut args.to_vec())
    {
        Ok(out) => out,
        Err(e) => panic!("{e}\n{m}"),
    }
}

/// The message `finish` fails with.
#[track_caller]
fn build_err(s: Signature, body: impl FnOnce(&mut FunctionBuilder<'_>)) -> String {
    let mut m = Module::new();
    let id = m.declare("f", s).unwrap();
    let mut b = FunctionBuilder::new(&m, id);
    body(&mut b);
    match b.finish() {
        Ok(f) => panic!("finish succeeded:\n{f:?}"),
        Err(e) => e.message,
    }
}

// Shapes.

#[test]
fn diamond_places_one_phi_at_the_join() {
    // x = a; if c { x = a * 2 } else { x = b + 1 }; return x + a
    let (m, id) = build(sig([BOOL, F64, F64], [F64]), |b| {
        let (c, pa, pb) = (b.param(0), b.param(1), b.param(2));
        let x = b.declare_named_var("x", F64);
        b.def_var(x, pa);
        let then = b.create_block("then");
        let els = b.create_block("else");
        let join = b.create_block("join");
        b.br(c, then, els);
        b.seal_block(then);
        b.seal_block(els);
        b.switch_to(then);
        let two = b.fconst(2.0);
        let v = b.fmul(pa, two);
        b.def_var(x, v);
        b.jump(join);
        b.switch_to(els);
        let one = b.fconst(1.0);
        let v = b.fadd(pb, one);
        b.def_var(x, v);
        b.jump(join);
        b.seal_block(join);
        b.switch_to(join);
        let xv = b.use_var(x);
        let r = b.fadd(xv, pa);
        b.ret(&[r]);
    });
    check_print(
        &m,
        "
func @f(%0: bool, %1: f64, %2: f64) -> f64 {
entry:
    br %0, then, else
then:
    %3 = fmul %1, 2.0
    jump join
else:
    %4 = fadd %2, 1.0
    jump join
join:
    %x = phi f64 [then: %3, else: %4]
    %5 = fadd %x, %1
    ret %5
}
",
    );
    let f = |c, a, b| run(&m, id, &[Val::Bool(c), Val::F64(a), Val::F64(b)]);
    assert_eq!(f(true, 3.0, 10.0), [Val::F64(9.0)]);
    assert_eq!(f(false, 3.0, 10.0), [Val::F64(14.0)]);
}

#[test]
fn diamond_with_one_arm_unchanged_and_late_sealing() {
    // x = a; if c { x = 2 } ; return x.  Nothing sealed: finish seals.
    let (m, id) = build(sig([BOOL, F64], [F64]), |b| {
        let (c, pa) = (b.param(0), b.param(1));
        let x = b.declare_var(F64);
        b.def_var(x, pa);
        let then = b.create_block("then");
        let join = b.create_block("join");
        b.br(c, then, join);
        b.switch_to(then);
        let two = b.fconst(2.0);
        b.def_var(x, two);
        b.jump(join);
        b.switch_to(join);
        let xv = b.use_var(x);
        b.ret(&[xv]);
    });
    check_print(
        &m,
        "
func @f(%0: bool, %1: f64) -> f64 {
entry:
    br %0, then, join
then:
    jump join
join:
    %2 = phi f64 [entry: %1, then: 2.0]
    ret %2
}
",
    );
    assert_eq!(
        run(&m, id, &[Val::Bool(true), Val::F64(5.0)]),
        [Val::F64(2.0)]
    );
    assert_eq!(
        run(&m, id, &[Val::Bool(false), Val::F64(5.0)]),
        [Val::F64(5.0)]
    );
}

/// Appends `while i < n { body; i += 1 }` with `i` a variable, in blocks named
/// `{tag}head`, `{tag}body`, `{tag}exit`; `seal` says whether to seal on the way.
fn while_lt(
    b: &mut FunctionBuilder<'_>,
    tag: &str,
    i: Variable,
    n: Value,
    seal: bool,
    body: impl FnOnce(&mut FunctionBuilder<'_>),
) {
    let head = b.create_block(&format!("{tag}head"));
    let body_block = b.create_block(&format!("{tag}body"));
    let exit = b.create_block(&format!("{tag}exit"));
    b.jump(head);
    b.switch_to(head);
    let iv = b.use_var(i);
    let more = b.icmp(CmpPred::Lt, iv, n);
    b.br(more, body_block, exit);
    if seal {
        b.seal_block(body_block);
        b.seal_block(exit);
    }
    b.switch_to(body_block);
    body(b);
    let iv = b.use_var(i);
    let one = b.iconst(1);
    let next = b.iadd(iv, one);
    b.def_var(i, next);
    b.jump(head);
    if seal {
        b.seal_block(head);
    }
    b.switch_to(exit);
}

/// sum_{i<n} i*i as f64, with a counter and an accumulator.
fn sum_of_squares(b: &mut FunctionBuilder<'_>, seal: bool) {
    let n = b.param(0);
    let i = b.declare_named_var("i", I64);
    let acc = b.declare_named_var("acc", F64);
    let (zero, fzero) = (b.iconst(0), b.fconst(0.0));
    b.def_var(i, zero);
    b.def_var(acc, fzero);
    while_lt(b, "", i, n, seal, |b| {
        let iv = b.use_var(i);
        let sq = b.imul(iv, iv);
        let sqf = b.cast(F64, sq);
        let a = b.use_var(acc);
        let a = b.fadd(a, sqf);
        b.def_var(acc, a);
    });
    let a = b.use_var(acc);
    b.ret(&[a]);
}

#[test]
fn loop_with_counter_and_accumulator_has_phis_at_the_head_only() {
    for seal in [true, false] {
        let (m, id) = build(sig([I64], [F64]), |b| sum_of_squares(b, seal));
        check_phis(&m, id, "head:2");
        for n in [0i64, 1, 2, 7, 30] {
            let expected: f64 = (0..n).map(|i| (i * i) as f64).sum();
            assert_eq!(run(&m, id, &[Val::I64(n)]), [Val::F64(expected)], "n = {n}");
        }
    }
    let (m, _) = build(sig([I64], [F64]), |b| sum_of_squares(b, true));
    check_print(
        &m,
        "
func @f(%0: i64) -> f64 {
entry:
    jump head
head:
    %i = phi i64 [entry: 0, body: %5]
    %acc = phi f64 [entry: 0.0, body: %4]
    %1 = icmp lt %i, %0
    br %1, body, exit
body:
    %2 = imul %i, %i
    %3 = cast f64 %2
    %4 = fadd %acc, %3
    %5 = iadd %i, 1
    jump head
exit:
    ret %acc
}
",
    );
}

#[test]
fn nested_loops_place_phis_at_both_heads_and_none_for_unchanged_variables() {
    // acc = 0; for i < n { for j < i { acc += i * j } }; return acc
    for seal in [true, false] {
        let (m, id) = build(sig([I64], [I64]), |b| {
            let n = b.param(0);
            let i = b.declare_named_var("i", I64);
            let j = b.declare_named_var("j", I64);
            let acc = b.declare_named_var("acc", I64);
            let zero = b.iconst(0);
            b.def_var(i, zero);
            b.def_var(acc, zero);
            while_lt(b, "outer_", i, n, seal, |b| {
                let zero = b.iconst(0);
                b.def_var(j, zero);
                let iv = b.use_var(i);
                while_lt(b, "inner_", j, iv, seal, |b| {
                    let iv = b.use_var(i);
                    let jv = b.use_var(j);
                    let p = b.imul(iv, jv);
                    let a = b.use_var(acc);
                    let a = b.iadd(a, p);
                    b.def_var(acc, a);
                });
            });
            let a = b.use_var(acc);
            b.ret(&[a]);
        });
        // Outer head: i, acc (j is dead there but defined on one edge only, and never
        // read there). Inner head: j, acc; i is unchanged in the inner loop.
        check_phis(&m, id, "outer_head:2 inner_head:2");
        for n in [0i64, 1, 2, 5, 9] {
            let mut expected = 0i64;
            for i in 0..n {
                for j in 0..i {
                    expected += i * j;
                }
            }
            assert_eq!(run(&m, id, &[Val::I64(n)]), [Val::I64(expected)]);
        }
    }
}

#[test]
fn a_variable_unchanged_around_a_loop_gets_no_phi() {
    // y = a * a; for i < n { s += y }; return s + y
    for seal in [true, false] {
        let (m, id) = build(sig([I64, F64], [F64]), |b| {
            let (n, a) = (b.param(0), b.param(1));
            let i = b.declare_named_var("i", I64);
            let y = b.declare_named_var("y", F64);
            let s = b.declare_named_var("s", F64);
            let zero = b.iconst(0);
            b.def_var(i, zero);
            let sq = b.fmul(a, a);
            b.def_var(y, sq);
            let fzero = b.fconst(0.0);
            b.def_var(s, fzero);
            while_lt(b, "", i, n, seal, |b| {
                let yv = b.use_var(y);
                let sv = b.use_var(s);
                let sv = b.fadd(sv, yv);
                b.def_var(s, sv);
                // Redefining y with its own value changes nothing either.
                b.def_var(y, yv);
            });
            let (sv, yv) = (b.use_var(s), b.use_var(y));
            let r = b.fadd(sv, yv);
            b.ret(&[r]);
        });
        check_phis(&m, id, "head:2");
        let text = m.to_string();
        assert!(!text.contains("%y = phi"), "{text}");
        assert_eq!(run(&m, id, &[Val::I64(3), Val::F64(2.0)]), [Val::F64(16.0)]);
    }
}

#[test]
fn a_variable_only_read_inside_a_loop_gets_no_phi() {
    // Read before any definition in the loop: the unsealed head gets an incomplete
    // phi, which sealing finds trivial.
    let (m, id) = build(sig([I64, F64], [F64]), |b| {
        let (n, a) = (b.param(0), b.param(1));
        let i = b.declare_var(I64);
        let y = b.declare_named_var("y", F64);
        let zero = b.iconst(0);
        b.def_var(i, zero);
        b.def_var(y, a);
        let s = b.declare_var(F64);
        let fzero = b.fconst(0.0);
        b.def_var(s, fzero);
        while_lt(b, "", i, n, false, |b| {
            let yv = b.use_var(y);
            let sv = b.use_var(s);
            let sv = b.fadd(sv, yv);
            b.def_var(s, sv);
        });
        let sv = b.use_var(s);
        b.ret(&[sv]);
    });
    check_phis(&m, id, "head:2");
    assert_eq!(run(&m, id, &[Val::I64(4), Val::F64(1.5)]), [Val::F64(6.0)]);
}

#[test]
fn chains_of_trivial_phis_collapse() {
    // Twenty diamonds in a row, x defined before them and never again; nothing is
    // sealed until the end, so every join first gets an incomplete phi for x, and the
    // phis are all trivial: they must all go, whichever order sealing takes.
    for order in ["finish", "forward", "backward"] {
        let (m, id) = build(sig([BOOL, F64], [F64]), |b| {
            let (c, a) = (b.param(0), b.param(1));
            let x = b.declare_named_var("x", F64);
            let y = b.declare_named_var("y", F64);
            b.def_var(x, a);
            b.def_var(y, a);
            let mut blocks = Vec::new();
            for k in 0..20 {
                let then = b.create_block(&format!("then{k}"));
                let join = b.create_block(&format!("join{k}"));
                blocks.extend([then, join]);
                b.br(c, then, join);
                b.switch_to(then);
                let xv = b.use_var(x);
                let yv = b.fmul(xv, xv);
                b.def_var(y, yv);
                b.jump(join);
                b.switch_to(join);
                let _ = b.use_var(x);
            }
            let xv = b.use_var(x);
            let yv = b.use_var(y);
            let r = b.fadd(xv, yv);
            b.ret(&[r]);
            match order {
                "forward" => blocks.iter().for_each(|&blk| b.seal_block(blk)),
                "backward" => blocks.iter().rev().for_each(|&blk| b.seal_block(blk)),
                _ => {}
            }
        });
        // Only y's phis stay, one per join.
        let text = m.to_string();
        assert!(!text.contains("%x"), "{order}: {text}");
        assert_eq!(text.matches(" = phi").count(), 20, "{order}: {text}");
        assert_eq!(
            run(&m, id, &[Val::Bool(true), Val::F64(3.0)]),
            [Val::F64(12.0)]
        );
        assert_eq!(
            run(&m, id, &[Val::Bool(false), Val::F64(3.0)]),
            [Val::F64(6.0)]
        );
    }
}

#[test]
fn trivial_loop_phis_in_nested_unsealed_loops_collapse() {
    // x is read in the innermost of three nested loops and defined only before them;
    // each head gets an incomplete phi, each one's back edge brings the one inside.
    let (m, id) = build(sig([I64, F64], [F64]), |b| {
        let (n, a) = (b.param(0), b.param(1));
        let x = b.declare_named_var("x", F64);
        let s = b.declare_named_var("s", F64);
        b.def_var(x, a);
        let fzero = b.fconst(0.0);
        b.def_var(s, fzero);
        let vars: Vec<Variable> = (0..3).map(|_| b.declare_var(I64)).collect();
        fn nest(
            b: &mut FunctionBuilder<'_>,
            vars: &[Variable],
            n: Value,
            x: Variable,
            s: Variable,
        ) {
            match vars.split_first() {
                None => {
                    let (xv, sv) = (b.use_var(x), b.use_var(s));
                    let sv = b.fadd(sv, xv);
                    b.def_var(s, sv);
                }
                Some((&i, rest)) => {
                    let zero = b.iconst(0);
                    b.def_var(i, zero);
                    let tag = format!("l{}_", rest.len());
                    while_lt(b, &tag, i, n, false, |b| nest(b, rest, n, x, s));
                }
            }
        }
        nest(b, &vars, n, x, s);
        let sv = b.use_var(s);
        b.ret(&[sv]);
    });
    check_phis(&m, id, "l2_head:2 l1_head:2 l0_head:2");
    assert_eq!(run(&m, id, &[Val::I64(3), Val::F64(0.5)]), [Val::F64(13.5)]);
}

#[test]
fn a_branch_to_one_block_twice_is_one_edge() {
    // entry: br c, j, j — j has one predecessor, so no phi and no duplicate edge.
    let (m, id) = build(sig([BOOL, F64], [F64]), |b| {
        let (c, a) = (b.param(0), b.param(1));
        let x = b.declare_var(F64);
        b.def_var(x, a);
        let j = b.create_block("j");
        b.br(c, j, j);
        assert_eq!(b.preds(j).len(), 1);
        b.seal_block(j);
        b.switch_to(j);
        let xv = b.use_var(x);
        b.ret(&[xv]);
    });
    check_phis(&m, id, "");
    assert_eq!(
        run(&m, id, &[Val::Bool(true), Val::F64(4.0)]),
        [Val::F64(4.0)]
    );

    // With a second predecessor carrying another value: one phi with two edges.
    let (m, id) = build(sig([BOOL, BOOL, F64], [F64]), |b| {
        let (c, d, a) = (b.param(0), b.param(1), b.param(2));
        let x = b.declare_named_var("x", F64);
        b.def_var(x, a);
        let k = b.create_block("k");
        let j = b.create_block("j");
        b.br(c, k, j);
        b.switch_to(k);
        let two = b.fconst(2.0);
        b.def_var(x, two);
        b.br(d, j, j);
        b.switch_to(j);
        let xv = b.use_var(x);
        b.ret(&[xv]);
    });
    check_print(
        &m,
        "
func @f(%0: bool, %1: bool, %2: f64) -> f64 {
entry:
    br %0, k, j
k:
    br %1, j, j
j:
    %x = phi f64 [entry: %2, k: 2.0]
    ret %x
}
",
    );
    assert_eq!(
        run(&m, id, &[Val::Bool(true), Val::Bool(false), Val::F64(4.0)]),
        [Val::F64(2.0)]
    );
    assert_eq!(
        run(&m, id, &[Val::Bool(false), Val::Bool(false), Val::F64(4.0)]),
        [Val::F64(4.0)]
    );
}

#[test]
fn a_self_loop_block() {
    // entry -> l; l: x = x * 2; br x < lim, l, exit
    let (m, id) = build(sig([F64, F64], [F64]), |b| {
        let (a, lim) = (b.param(0), b.param(1));
        let x = b.declare_named_var("x", F64);
        b.def_var(x, a);
        let l = b.create_block("l");
        let exit = b.create_block("exit");
        b.jump(l);
        b.switch_to(l);
        let xv = b.use_var(x);
        let two = b.fconst(2.0);
        let xv = b.fmul(xv, two);
        b.def_var(x, xv);
        let more = b.fcmp(CmpPred::Lt, xv, lim);
        b.br(more, l, exit);
        b.seal_block(l);
        b.seal_block(exit);
        b.switch_to(exit);
        let xv = b.use_var(x);
        b.ret(&[xv]);
    });
    check_phis(&m, id, "l:1");
    assert_eq!(
        run(&m, id, &[Val::F64(1.0), Val::F64(100.0)]),
        [Val::F64(128.0)]
    );
}

#[test]
fn slices_in_variables() {
    // Ping-pong: n times swap (src, dst) and copy src into dst doubled; return dst[0]
    // and the sum of the read-only variable's elements.
    let (m, id) = build(sig([MF64, MF64, SF64, I64], [F64, F64]), |b| {
        let (p, q, r, n) = (b.param(0), b.param(1), b.param(2), b.param(3));
        let src = b.declare_named_var("src", MF64);
        let dst = b.declare_named_var("dst", MF64);
        let ro = b.declare_named_var("ro", SF64);
        let i = b.declare_var(I64);
        b.def_var(src, p);
        b.def_var(dst, q);
        b.def_var(ro, r);
        let zero = b.iconst(0);
        b.def_var(i, zero);
        while_lt(b, "", i, n, true, |b| {
            let (s, d) = (b.use_var(src), b.use_var(dst));
            let zero = b.iconst(0);
            let v = b.load(s, zero);
            let two = b.fconst(2.0);
            let v = b.fmul(v, two);
            b.store(d, zero, v);
            b.def_var(src, d);
            b.def_var(dst, s);
        });
        let s = b.use_var(src);
        let zero = b.iconst(0);
        let out = b.load(s, zero);
        let ro_v = b.use_var(ro);
        let one = b.iconst(1);
        let r0 = b.load(ro_v, zero);
        let r1 = b.load(ro_v, one);
        let rs = b.fadd(r0, r1);
        b.ret(&[out, rs]);
    });
    check_phis(&m, id, "head:3");
    let text = m.to_string();
    assert!(text.contains("%src = phi mut [f64]"), "{text}");
    assert!(!text.contains("%ro = phi"), "{text}");
    let out = run(
        &m,
        id,
        &[
            Val::F64s(vec![1.5]),
            Val::F64s(vec![0.0]),
            Val::F64s(vec![1.0, 2.0]),
            Val::I64(5),
        ],
    );
    assert_eq!(out, [Val::F64(48.0), Val::F64(3.0)]);
}

#[test]
fn variables_mix_with_counted_loop_and_explicit_phis() {
    // for i in 0..n (counted_loop, carrying p) { s += x[i] (variable) }; return s * p
    let (m, id) = build(sig([SF64], [F64]), |b| {
        let x = b.param(0);
        let n = b.len(x);
        let s = b.declare_named_var("s", F64);
        let fzero = b.fconst(0.0);
        b.def_var(s, fzero);
        let zero = b.iconst(0);
        let one = b.fconst(1.0);
        let p = b.counted_loop(zero, n, &[one], |b, i, carried| {
            let xi = b.load(x, i);
            let sv = b.use_var(s);
            let sv = b.fadd(sv, xi);
            b.def_var(s, sv);
            vec![b.fmul(carried[0], xi)]
        });
        let sv = b.use_var(s);
        let r = b.fmul(sv, p[0]);
        b.ret(&[r]);
    });
    check_phis(&m, id, "head:3");
    let out = run(&m, id, &[Val::F64s(vec![1.0, 2.0, 3.0])]);
    assert_eq!(out, [Val::F64(36.0)]);
}

// Meaning, against plain Rust.

/// Iterative Fibonacci with two variables: (a, b) = (b, a + b), n times.
#[test]
fn fibonacci() {
    let (m, id) = build(sig([I64], [I64]), |b| {
        let n = b.param(0);
        let (fa, fb, i) = (
            b.declare_named_var("a", I64),
            b.declare_named_var("b", I64),
            b.declare_named_var("i", I64),
        );
        let (zero, one) = (b.iconst(0), b.iconst(1));
        b.def_var(fa, zero);
        b.def_var(fb, one);
        b.def_var(i, zero);
        while_lt(b, "", i, n, true, |b| {
            let (av, bv) = (b.use_var(fa), b.use_var(fb));
            let sum = b.iadd(av, bv);
            b.def_var(fa, bv);
            b.def_var(fb, sum);
        });
        let av = b.use_var(fa);
        b.ret(&[av]);
    });
    check_phis(&m, id, "head:3");
    for n in 0..40i64 {
        let (mut a, mut b) = (0i64, 1i64);
        for _ in 0..n {
            (a, b) = (b, a + b);
        }
        assert_eq!(run(&m, id, &[Val::I64(n)]), [Val::I64(a)], "fib({n})");
    }
}

/// The number of Collatz steps from `x` to 1: a while loop whose exit depends on
/// the data, with an if/else inside.
#[test]
fn collatz_steps() {
    for seal in [true, false] {
        let (m, id) = build(sig([I64], [I64]), |b| {
            let x0 = b.param(0);
            let x = b.declare_named_var("x", I64);
            let steps = b.declare_named_var("steps", I64);
            b.def_var(x, x0);
            let zero = b.iconst(0);
            b.def_var(steps, zero);
            let head = b.create_block("head");
            let body = b.create_block("body");
            let odd = b.create_block("odd");
            let even = b.create_block("even");
            let next = b.create_block("next");
            let exit = b.create_block("exit");
            b.jump(head);
            b.switch_to(head);
            let xv = b.use_var(x);
            let one = b.iconst(1);
            let more = b.icmp(CmpPred::Gt, xv, one);
            b.br(more, body, exit);
            b.switch_to(body);
            let xv = b.use_var(x);
            let two = b.iconst(2);
            let r = b.irem(xv, two);
            let is_odd = b.icmp(CmpPred::Eq, r, one);
            b.br(is_odd, odd, even);
            if seal {
                for blk in [body, exit, odd, even] {
                    b.seal_block(blk);
                }
            }
            b.switch_to(odd);
            let xv = b.use_var(x);
            let three = b.iconst(3);
            let t = b.imul(xv, three);
            let t = b.iadd(t, one);
            b.def_var(x, t);
            b.jump(next);
            b.switch_to(even);
            let xv = b.use_var(x);
            let h = b.idiv(xv, two);
            b.def_var(x, h);
            b.jump(next);
            if seal {
                b.seal_block(next);
            }
            b.switch_to(next);
            let s = b.use_var(steps);
            let s = b.iadd(s, one);
            b.def_var(steps, s);
            b.jump(head);
            if seal {
                b.seal_block(head);
            }
            b.switch_to(exit);
            let s = b.use_var(steps);
            b.ret(&[s]);
        });
        check_phis(&m, id, "head:2 next:1");
        for x0 in 1..60i64 {
            let (mut x, mut steps) = (x0, 0i64);
            while x > 1 {
                x = if x % 2 == 1 { 3 * x + 1 } else { x / 2 };
                steps += 1;
            }
            assert_eq!(run(&m, id, &[Val::I64(x0)]), [Val::I64(steps)], "x0 = {x0}");
        }
    }
}

// Errors: never a panic, always a message at `finish`.

#[test]
fn using_an_undefined_variable_fails_at_finish_naming_it() {
    let msg = build_err(sig([], [F64]), |b| {
        let x = b.declare_named_var("x", F64);
        let v = b.use_var(x);
        b.ret(&[v]);
    });
    assert!(
        msg.contains("var0 (`x`)") && msg.contains("undefined"),
        "{msg}"
    );

    // Defined on one arm only.
    let msg = build_err(sig([BOOL], [F64]), |b| {
        let c = b.param(0);
        let _unused = b.declare_var(I64);
        let x = b.declare_var(F64);
        let then = b.create_block("then");
        let join = b.create_block("join");
        b.br(c, then, join);
        b.switch_to(then);
        let one = b.fconst(1.0);
        b.def_var(x, one);
        b.jump(join);
        b.switch_to(join);
        let v = b.use_var(x);
        b.ret(&[v]);
    });
    assert!(msg.contains("var1") && msg.contains("undefined"), "{msg}");

    // Read only inside a loop that never defines it, with nothing sealed.
    let msg = build_err(sig([I64], [F64]), |b| {
        let n = b.param(0);
        let i = b.declare_var(I64);
        let x = b.declare_named_var("x", F64);
        let zero = b.iconst(0);
        b.def_var(i, zero);
        while_lt(b, "", i, n, false, |b| {
            let v = b.use_var(x);
            let v = b.fadd(v, v);
            b.def_var(x, v);
        });
        let v = b.use_var(x);
        b.ret(&[v]);
    });
    assert!(msg.contains("`x`") && msg.contains("undefined"), "{msg}");
}

#[test]
fn unreachable_code_must_define_what_it_reads_too() {
    // A block without predecessors reads x, which is defined in the entry: that
    // definition does not reach it.
    let msg = build_err(sig([F64], [F64]), |b| {
        let a = b.param(0);
        let x = b.declare_named_var("x", F64);
        b.def_var(x, a);
        b.ret(&[a]);
        let dead = b.create_block("dead");
        b.switch_to(dead);
        let v = b.use_var(x);
        b.ret(&[v]);
    });
    assert!(
        msg.contains("(`x`)") && msg.contains("(`dead`), which has no predecessors"),
        "{msg}"
    );
    // A self-loop that no edge enters and that never defines x.
    let msg = build_err(sig([F64, BOOL], [F64]), |b| {
        let (a, c) = (b.param(0), b.param(1));
        let x = b.declare_named_var("x", F64);
        b.def_var(x, a);
        b.ret(&[a]);
        let spin = b.create_block("spin");
        let out = b.create_block("out");
        b.switch_to(spin);
        b.br(c, spin, out);
        b.switch_to(out);
        let v = b.use_var(x);
        b.ret(&[v]);
    });
    assert!(
        msg.contains("(`x`)") && msg.contains("(`spin`), from a cycle that no definition enters"),
        "{msg}"
    );
}

#[test]
fn an_unreachable_cycle_that_defines_a_variable_reads_its_own_definition() {
    // As in Cranelift: the phi at the head of a cycle that no edge enters has one
    // edge, from the definition inside the cycle, so it is trivial, and the
    // definition ends up using itself. That code never runs, and it verifies.
    let (m, _) = build(sig([F64], [F64]), |b| {
        let a = b.param(0);
        let x = b.declare_named_var("x", F64);
        b.def_var(x, a);
        b.ret(&[a]);
        let spin = b.create_block("spin");
        b.switch_to(spin);
        let v = b.use_var(x);
        let v = b.fadd(v, a);
        b.def_var(x, v);
        b.jump(spin);
    });
    check_print(
        &m,
        "
func @f(%0: f64) -> f64 {
entry:
    ret %0
spin:
    %1 = fadd %1, %0
    jump spin
}
",
    );
}

#[test]
fn misuse_records_an_error_and_never_panics() {
    let foreign = Variable::from_u32(7);
    type Body = Box<dyn Fn(&mut FunctionBuilder<'_>)>;
    let cases: Vec<(&str, Body)> = vec![
        (
            "not a declared variable",
            Box::new(move |b| {
                let v = b.use_var(foreign);
                b.ret(&[v]);
            }),
        ),
        (
            "not a declared variable",
            Box::new(move |b| {
                let one = b.fconst(1.0);
                b.def_var(foreign, one);
                b.ret(&[one]);
            }),
        ),
        (
            "has type f64, but is defined with",
            Box::new(|b| {
                let x = b.declare_var(F64);
                let one = b.iconst(1);
                b.def_var(x, one);
                let v = b.use_var(x);
                b.ret(&[v]);
            }),
        ),
        (
            "after its terminator",
            Box::new(|b| {
                let x = b.declare_var(F64);
                let one = b.fconst(1.0);
                b.ret(&[one]);
                b.def_var(x, one);
            }),
        ),
        (
            "(`l`) is sealed twice",
            Box::new(|b| {
                // Sealing the entry is fine (it is sealed from the start); twice
                // another block is not.
                let entry = b.current_block();
                b.seal_block(entry);
                b.seal_block(entry);
                let l = b.create_block("l");
                b.jump(l);
                b.seal_block(l);
                b.seal_block(l);
                b.switch_to(l);
                let one = b.fconst(1.0);
                b.ret(&[one]);
            }),
        ),
        (
            "which is sealed",
            Box::new(|b| {
                let l = b.create_block("l");
                b.seal_block(l);
                b.jump(l);
                b.switch_to(l);
                let one = b.fconst(1.0);
                b.ret(&[one]);
            }),
        ),
        (
            "not a block of this function",
            Box::new(|b| {
                b.seal_block(Block::from_u32(1000));
                b.switch_to(Block::from_u32(1000));
                b.jump(Block::from_u32(u32::MAX - 1));
                let one = b.fconst(1.0);
                b.ret(&[one]);
            }),
        ),
        (
            "not a value of this function",
            Box::new(|b| {
                let x = b.declare_var(F64);
                b.def_var(x, Value::from_u32(12345));
                let one = b.fconst(1.0);
                b.ret(&[one]);
            }),
        ),
    ];
    for (fragment, body) in cases {
        let msg = build_err(sig([], [F64]), |b| body(b));
        assert!(msg.contains(fragment), "expected {fragment:?} in {msg:?}");
    }
}

// The main oracle: random structured programs against a direct evaluator.

/// Variables of the random programs: `NF` of type f64, `NI` of type i64, `NB` of
/// type bool.
const NF: usize = 3;
const NI: usize = 3;
const NB: usize = 2;

#[derive(Clone, Debug)]
enum FOp {
    Add,
    Sub,
    Mul,
}

#[derive(Clone, Debug)]
enum IOp {
    Add,
    Sub,
    Mul,
}

#[derive(Clone, Debug)]
enum Stmt {
    /// `f[d] = f[a] op f[b]`
    F(usize, FOp, usize, usize),
    /// `i[d] = i[a] op i[b]`
    I(usize, IOp, usize, usize),
    /// `f[d] = i[a] as f64`
    Cast(usize, usize),
    /// `b[d] = i[a] < i[b]`
    Less(usize, usize, usize),
    /// `if b[k] { .. } else { .. }`: the variable is the branch condition itself.
    IfB(usize, Vec<Stmt>, Vec<Stmt>),
    /// `if i[a] < i[b] { .. } else { .. }`
    IfI(usize, usize, Vec<Stmt>, Vec<Stmt>),
    /// `if f[a] < f[b] { .. } else { .. }`
    IfF(usize, usize, Vec<Stmt>, Vec<Stmt>),
    /// `for _ in 0..trips { .. }` with `trips` a constant, or `i[k] & 3` read on entry.
    Loop(Trips, Vec<Stmt>),
}

#[derive(Clone, Debug)]
enum Trips {
    Const(i64),
    Var(usize),
}

fn stmt() -> impl Strategy<Value = Stmt> {
    let f = 0..NF;
    let i = 0..NI;
    let fop = prop_oneof![Just(FOp::Add), Just(FOp::Sub), Just(FOp::Mul)];
    let iop = prop_oneof![Just(IOp::Add), Just(IOp::Sub), Just(IOp::Mul)];
    let leaf = prop_oneof![
        3 => (f.clone(), fop, f.clone(), f.clone()).prop_map(|(d, o, a, b)| Stmt::F(d, o, a, b)),
        3 => (i.clone(), iop, i.clone(), i.clone()).prop_map(|(d, o, a, b)| Stmt::I(d, o, a, b)),
        1 => (f.clone(), i.clone()).prop_map(|(d, a)| Stmt::Cast(d, a)),
        1 => (0..NB, i.clone(), i.clone()).prop_map(|(d, a, b)| Stmt::Less(d, a, b)),
    ];
    leaf.prop_recursive(3, 24, 4, move |inner| {
        let block = prop::collection::vec(inner, 0..4);
        prop_oneof![
            (0..NI, 0..NI, block.clone(), block.clone())
                .prop_map(|(a, b, t, e)| Stmt::IfI(a, b, t, e)),
            (0..NF, 0..NF, block.clone(), block.clone())
                .prop_map(|(a, b, t, e)| Stmt::IfF(a, b, t, e)),
            (0..NB, block.clone(), block.clone()).prop_map(|(k, t, e)| Stmt::IfB(k, t, e)),
            (
                prop_oneof![
                    (0i64..4).prop_map(Trips::Const),
                    (0..NI).prop_map(Trips::Var)
                ],
                block
            )
                .prop_map(|(n, body)| Stmt::Loop(n, body)),
        ]
    })
}

/// The direct evaluator.
#[derive(Clone, Debug)]
struct State {
    f: [f64; NF],
    i: [i64; NI],
    b: [bool; NB],
}

fn eval(stmts: &[Stmt], s: &mut State) {
    for st in stmts {
        match st {
            Stmt::F(d, op, a, b) => {
                let (x, y) = (s.f[*a], s.f[*b]);
                s.f[*d] = match op {
                    FOp::Add => x + y,
                    FOp::Sub => x - y,
                    FOp::Mul => x * y,
                };
            }
            Stmt::I(d, op, a, b) => {
                let (x, y) = (s.i[*a], s.i[*b]);
                s.i[*d] = match op {
                    IOp::Add => x.wrapping_add(y),
                    IOp::Sub => x.wrapping_sub(y),
                    IOp::Mul => x.wrapping_mul(y),
                };
            }
            Stmt::Cast(d, a) => s.f[*d] = s.i[*a] as f64,
            Stmt::Less(d, a, b) => s.b[*d] = s.i[*a] < s.i[*b],
            Stmt::IfB(k, t, e) => eval(if s.b[*k] { t } else { e }, s),
            Stmt::IfI(a, b, t, e) => eval(if s.i[*a] < s.i[*b] { t } else { e }, s),
            Stmt::IfF(a, b, t, e) => eval(if s.f[*a] < s.f[*b] { t } else { e }, s),
            Stmt::Loop(trips, body) => {
                let n = match trips {
                    Trips::Const(n) => *n,
                    Trips::Var(k) => s.i[*k] & 3,
                };
                for _ in 0..n {
                    eval(body, s);
                }
            }
        }
    }
}

/// How the translation seals blocks.
#[derive(Copy, Clone, Debug)]
enum Sealing {
    /// As soon as each block's predecessors are known.
    Eager,
    /// Never: `finish` does it.
    AtFinish,
    /// Every block at once by `seal_all_blocks`, before the final `ret`.
    AllAtEnd,
}

struct Lower {
    f: [Variable; NF],
    i: [Variable; NI],
    b: [Variable; NB],
    sealing: Sealing,
}

impl Lower {
    fn seal(&self, b: &mut FunctionBuilder<'_>, block: Block) {
        if let Sealing::Eager = self.sealing {
            b.seal_block(block);
        }
    }

    fn stmts(&self, b: &mut FunctionBuilder<'_>, stmts: &[Stmt]) {
        for st in stmts {
            self.stmt(b, st);
        }
    }

    fn stmt(&self, b: &mut FunctionBuilder<'_>, st: &Stmt) {
        match st {
            Stmt::F(d, op, x, y) => {
                let (x, y) = (b.use_var(self.f[*x]), b.use_var(self.f[*y]));
                let r = match op {
                    FOp::Add => b.fadd(x, y),
                    FOp::Sub => b.fsub(x, y),
                    FOp::Mul => b.fmul(x, y),
                };
                b.def_var(self.f[*d], r);
            }
            Stmt::I(d, op, x, y) => {
                let (x, y) = (b.use_var(self.i[*x]), b.use_var(self.i[*y]));
                let r = match op {
                    IOp::Add => b.iadd(x, y),
                    IOp::Sub => b.isub(x, y),
                    IOp::Mul => b.imul(x, y),
                };
                b.def_var(self.i[*d], r);
            }
            Stmt::Cast(d, x) => {
                let x = b.use_var(self.i[*x]);
                let r = b.cast(F64, x);
                b.def_var(self.f[*d], r);
            }
            Stmt::Less(d, x, y) => {
                let (x, y) = (b.use_var(self.i[*x]), b.use_var(self.i[*y]));
                let r = b.icmp(CmpPred::Lt, x, y);
                b.def_var(self.b[*d], r);
            }
            Stmt::IfI(_, _, t, e) | Stmt::IfF(_, _, t, e) | Stmt::IfB(_, t, e) => {
                let c = match *st {
                    Stmt::IfI(x, y, ..) => {
                        let (x, y) = (b.use_var(self.i[x]), b.use_var(self.i[y]));
                        b.icmp(CmpPred::Lt, x, y)
                    }
                    Stmt::IfF(x, y, ..) => {
                        let (x, y) = (b.use_var(self.f[x]), b.use_var(self.f[y]));
                        b.fcmp(CmpPred::Lt, x, y)
                    }
                    _ => {
                        let Stmt::IfB(k, ..) = *st else {
                            unreachable!()
                        };
                        b.use_var(self.b[k])
                    }
                };
                let then = b.create_block("then");
                let els = b.create_block("else");
                let join = b.create_block("join");
                b.br(c, then, els);
                self.seal(b, then);
                self.seal(b, els);
                b.switch_to(then);
                self.stmts(b, t);
                b.jump(join);
                b.switch_to(els);
                self.stmts(b, e);
                b.jump(join);
                self.seal(b, join);
                b.switch_to(join);
            }
            Stmt::Loop(trips, body) => {
                let n = match trips {
                    Trips::Const(n) => b.iconst(*n),
                    Trips::Var(k) => {
                        let v = b.use_var(self.i[*k]);
                        let three = b.iconst(3);
                        b.iand(v, three)
                    }
                };
                let k = b.declare_named_var("k", I64);
                let zero = b.iconst(0);
                b.def_var(k, zero);
                let head = b.create_block("head");
                let body_block = b.create_block("body");
                let exit = b.create_block("exit");
                b.jump(head);
                b.switch_to(head);
                let kv = b.use_var(k);
                let more = b.icmp(CmpPred::Lt, kv, n);
                b.br(more, body_block, exit);
                self.seal(b, body_block);
                self.seal(b, exit);
                b.switch_to(body_block);
                self.stmts(b, body);
                let kv = b.use_var(k);
                let one = b.iconst(1);
                let kv = b.iadd(kv, one);
                b.def_var(k, kv);
                b.jump(head);
                self.seal(b, head);
                b.switch_to(exit);
            }
        }
    }
}

/// Builds `prog` as `@f(f64 x NF, i64 x NI, bool x NB) -> (f64 x NF, i64 x NI, bool x NB)`.
fn lower(prog: &[Stmt], sealing: Sealing) -> (Module, FuncId) {
    let params: Vec<Type> = [F64; NF]
        .into_iter()
        .chain([I64; NI])
        .chain([BOOL; NB])
        .collect();
    build(sig(params.clone(), params), |b| {
        let lw = Lower {
            f: core::array::from_fn(|k| b.declare_named_var(&format!("f{k}"), F64)),
            i: core::array::from_fn(|k| b.declare_named_var(&format!("i{k}"), I64)),
            b: core::array::from_fn(|k| b.declare_named_var(&format!("b{k}"), BOOL)),
            sealing,
        };
        for k in 0..NF {
            let p = b.param(k);
            b.def_var(lw.f[k], p);
        }
        for k in 0..NI {
            let p = b.param(NF + k);
            b.def_var(lw.i[k], p);
        }
        for k in 0..NB {
            let p = b.param(NF + NI + k);
            b.def_var(lw.b[k], p);
        }
        lw.stmts(b, prog);
        if let Sealing::AllAtEnd = sealing {
            b.seal_all_blocks();
        }
        let out: Vec<Value> =
            lw.f.iter()
                .chain(&lw.i)
                .chain(&lw.b)
                .map(|&v| b.use_var(v))
                .collect();
        b.ret(&out);
    })
}

fn same(a: &Val, b: &Val) -> bool {
    match (a, b) {
        (Val::F64(x), Val::F64(y)) => x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan()),
        _ => a == b,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn random_structured_programs_agree_with_a_direct_evaluator(
        prog in prop::collection::vec(stmt(), 1..6),
        f in prop::array::uniform3(-4.0f64..4.0),
        i in prop::array::uniform3(-5i64..6),
        bools in prop::array::uniform2(any::<bool>()),
        sealing in prop_oneof![Just(Sealing::Eager), Just(Sealing::AtFinish), Just(Sealing::AllAtEnd)],
    ) {
        let (m, id) = lower(&prog, sealing);
        let mut expected = State { f, i, b: bools };
        eval(&prog, &mut expected);
        let args: Vec<Val> = f.iter().map(|&x| Val::F64(x))
            .chain(i.iter().map(|&x| Val::I64(x)))
            .chain(bools.iter().map(|&x| Val::Bool(x)))
            .collect();
        let got = run(&m, id, &args);
        let want: Vec<Val> = expected.f.iter().map(|&x| Val::F64(x))
            .chain(expected.i.iter().map(|&x| Val::I64(x)))
            .chain(expected.b.iter().map(|&x| Val::Bool(x)))
            .collect();
        prop_assert_eq!(got.len(), want.len());
        for (g, w) in got.iter().zip(&want) {
            prop_assert!(same(g, w), "got {:?}, want {:?}\n{}", got, want, m);
        }
    }
}

// Large functions: no recursion over the function, no quadratic work.

const N: usize = 10_000;

/// A chain of `N` blocks, each jumping to the next; `redefine` makes every block
/// define x anew from its previous value. Returns the finished module and how long
/// building took.
fn chain(redefine: bool, seal: bool) -> (Module, FuncId, Duration) {
    let start = Instant::now();
    let mut m = Module::new();
    let id = m.declare("f", sig([F64], [F64])).unwrap();
    let mut b = FunctionBuilder::new(&m, id);
    let x = b.declare_named_var("x", F64);
    let a = b.param(0);
    b.def_var(x, a);
    for k in 0..N {
        let next = b.create_block("b");
        if redefine {
            let v = b.use_var(x);
            let one = b.fconst(1.0);
            let v = b.fadd(v, one);
            b.def_var(x, v);
        }
        let _ = k;
        b.jump(next);
        if seal {
            b.seal_block(next);
        }
        b.switch_to(next);
    }
    let v = b.use_var(x);
    b.ret(&[v]);
    let func = b.finish().unwrap();
    let took = start.elapsed();
    assert!(func.blocks.values().all(|d| d.phis.is_empty()));
    m.define(id, func).unwrap();
    (m, id, took)
}

#[test]
fn ten_thousand_blocks_each_redefining_a_variable() {
    for seal in [true, false] {
        let (m, id, took) = chain(true, seal);
        assert!(took < Duration::from_secs(2), "took {took:?}");
        verify(&m).unwrap();
        assert_eq!(run(&m, id, &[Val::F64(0.5)]), [Val::F64(N as f64 + 0.5)]);
    }
}

#[test]
fn ten_thousand_blocks_read_only_at_the_end() {
    for seal in [true, false] {
        let (m, id, took) = chain(false, seal);
        assert!(took < Duration::from_secs(2), "took {took:?}");
        verify(&m).unwrap();
        assert_eq!(run(&m, id, &[Val::F64(0.5)]), [Val::F64(0.5)]);
    }
}

#[test]
fn ten_thousand_nested_diamonds_of_trivial_phis() {
    // N diamonds in a row, nothing sealed before `finish`, x read at every join: a
    // long chain of incomplete phis that sealing must collapse without recursion.
    let mut m = Module::new();
    let id = m.declare("f", sig([BOOL, F64], [F64])).unwrap();
    let mut b = FunctionBuilder::new(&m, id);
    let (c, a) = (b.param(0), b.param(1));
    let x = b.declare_var(F64);
    b.def_var(x, a);
    let start = Instant::now();
    let mut joins = Vec::new();
    for _ in 0..N {
        let then = b.create_block("then");
        let join = b.create_block("join");
        b.br(c, then, join);
        b.switch_to(then);
        b.jump(join);
        b.switch_to(join);
        let _ = b.use_var(x);
        joins.push(join);
    }
    let v = b.use_var(x);
    b.ret(&[v]);
    // Seal from the last block back, the worst order for the chain of phis.
    for &j in joins.iter().rev() {
        b.seal_block(j);
    }
    let func = b.finish().unwrap();
    assert!(
        start.elapsed() < Duration::from_secs(2),
        "took {:?}",
        start.elapsed()
    );
    assert!(func.blocks.values().all(|d| d.phis.is_empty()));
    m.define(id, func).unwrap();
    verify(&m).unwrap();
    assert_eq!(
        run(&m, id, &[Val::Bool(true), Val::F64(2.5)]),
        [Val::F64(2.5)]
    );
}

// A second oracle: random control-flow graphs (irreducible ones included), filled in
// a random order, against a direct evaluator of the graph.

/// Variables of the random graphs, all i64.
const NV: usize = 3;
/// A step counter (a variable too) ends every run after this many blocks.
const STEPS: i64 = 24;

#[derive(Clone, Debug)]
enum Assign {
    /// `v[d] = v[a] + v[b]`
    Add(usize, usize, usize),
    /// `v[d] = v[a] * v[b]`
    Mul(usize, usize, usize),
    /// `v[d] = v[a]`
    Copy(usize, usize),
    /// `v[d] = c`
    Set(usize, i64),
}

#[derive(Clone, Debug)]
enum Goto {
    Jump(usize),
    /// `br v[a] < v[b], t, e`
    Br(usize, usize, usize, usize),
    Ret,
}

#[derive(Clone, Debug)]
struct RBlock {
    assigns: Vec<Assign>,
    goto: Goto,
}

/// `n` blocks; block `k < n - 1` always has `k + 1` among its successors, so every
/// block is reachable from block 0.
fn graph() -> impl Strategy<Value = Vec<RBlock>> {
    (1usize..7).prop_flat_map(|n| {
        let v = 0..NV;
        let assign = prop_oneof![
            (v.clone(), v.clone(), v.clone()).prop_map(|(d, a, b)| Assign::Add(d, a, b)),
            (v.clone(), v.clone(), v.clone()).prop_map(|(d, a, b)| Assign::Mul(d, a, b)),
            (v.clone(), v.clone()).prop_map(|(d, a)| Assign::Copy(d, a)),
            (v.clone(), -2i64..3).prop_map(|(d, c)| Assign::Set(d, c)),
        ];
        let blocks: Vec<_> = (0..n)
            .map(|k| {
                let goto = if k + 1 < n {
                    prop_oneof![
                        Just(Goto::Jump(k + 1)),
                        (0..NV, 0..NV, 0..n, any::<bool>()).prop_map(move |(a, b, t, first)| {
                            if first {
                                Goto::Br(a, b, k + 1, t)
                            } else {
                                Goto::Br(a, b, t, k + 1)
                            }
                        }),
                    ]
                    .boxed()
                } else {
                    prop_oneof![
                        Just(Goto::Ret),
                        (0..n).prop_map(Goto::Jump),
                        (0..NV, 0..NV, 0..n, 0..n).prop_map(|(a, b, t, e)| Goto::Br(a, b, t, e)),
                    ]
                    .boxed()
                };
                (prop::collection::vec(assign.clone(), 0..4), goto)
                    .prop_map(|(assigns, goto)| RBlock { assigns, goto })
            })
            .collect();
        blocks
    })
}

/// Runs the graph from block 0; returns the variables and the step count.
fn eval_graph(g: &[RBlock], init: [i64; NV]) -> Vec<i64> {
    let mut v = init;
    let mut steps = 0;
    let mut cur = 0;
    loop {
        for a in &g[cur].assigns {
            match *a {
                Assign::Add(d, x, y) => v[d] = v[x].wrapping_add(v[y]),
                Assign::Mul(d, x, y) => v[d] = v[x].wrapping_mul(v[y]),
                Assign::Copy(d, x) => v[d] = v[x],
                Assign::Set(d, c) => v[d] = c,
            }
        }
        steps += 1;
        if steps >= STEPS {
            break;
        }
        cur = match g[cur].goto {
            Goto::Jump(t) => t,
            Goto::Br(a, b, t, e) => {
                if v[a] < v[b] {
                    t
                } else {
                    e
                }
            }
            Goto::Ret => break,
        };
    }
    v.iter().copied().chain([steps]).collect()
}

/// Lowers the graph: the entry sets the variables from the parameters and jumps to
/// block 0; block `k` is `main_k` (assignments, `steps += 1`, `br steps < STEPS,
/// cont_k, exit`) and `cont_k` (its own terminator; `ret` jumps to `exit`); `exit`
/// returns the variables and `steps`. Blocks are filled in `order` (entry is `n`),
/// then `exit`.
fn lower_graph(g: &[RBlock], order: &[usize], sealing: Sealing) -> (Module, FuncId) {
    let n = g.len();
    build(sig([I64; NV], [I64; NV + 1]), |b| {
        let entry = b.current_block();
        let vars: Vec<Variable> = (0..NV)
            .map(|k| b.declare_named_var(&format!("v{k}"), I64))
            .collect();
        let steps = b.declare_named_var("steps", I64);
        let mains: Vec<Block> = (0..n)
            .map(|k| b.create_block(&format!("main{k}")))
            .collect();
        let conts: Vec<Block> = (0..n)
            .map(|k| b.create_block(&format!("cont{k}")))
            .collect();
        let exit = b.create_block("exit");

        // Every block's predecessors, to seal each as soon as they are all filled.
        let mut preds: Vec<(Block, Vec<Block>)> = Vec::new();
        let mut add = |to: Block, from: Block| match preds.iter_mut().find(|(t, _)| *t == to) {
            Some((_, fs)) => {
                if !fs.contains(&from) {
                    fs.push(from)
                }
            }
            None => preds.push((to, vec![from])),
        };
        add(mains[0], entry);
        for k in 0..n {
            add(conts[k], mains[k]);
            add(exit, mains[k]);
            match g[k].goto {
                Goto::Jump(t) => add(mains[t], conts[k]),
                Goto::Br(_, _, t, e) => {
                    add(mains[t], conts[k]);
                    add(mains[e], conts[k]);
                }
                Goto::Ret => add(exit, conts[k]),
            }
        }
        let mut filled: Vec<Block> = Vec::new();
        let seal_ready = |b: &mut FunctionBuilder<'_>, filled: &[Block]| {
            if let Sealing::Eager = sealing {
                for (to, from) in &preds {
                    if !b.is_sealed(*to) && from.iter().all(|f| filled.contains(f)) {
                        b.seal_block(*to);
                    }
                }
            }
        };

        for &k in order {
            if k == n {
                b.switch_to(entry);
                for (i, &var) in vars.iter().enumerate() {
                    let p = b.param(i);
                    b.def_var(var, p);
                }
                let zero = b.iconst(0);
                b.def_var(steps, zero);
                b.jump(mains[0]);
                filled.push(entry);
                seal_ready(b, &filled);
                continue;
            }
            b.switch_to(mains[k]);
            for a in &g[k].assigns {
                let (d, r) = match *a {
                    Assign::Add(d, x, y) => {
                        let (x, y) = (b.use_var(vars[x]), b.use_var(vars[y]));
                        (d, b.iadd(x, y))
                    }
                    Assign::Mul(d, x, y) => {
                        let (x, y) = (b.use_var(vars[x]), b.use_var(vars[y]));
                        (d, b.imul(x, y))
                    }
                    Assign::Copy(d, x) => (d, b.use_var(vars[x])),
                    Assign::Set(d, c) => (d, b.iconst(c)),
                };
                b.def_var(vars[d], r);
            }
            let s = b.use_var(steps);
            let one = b.iconst(1);
            let s = b.iadd(s, one);
            b.def_var(steps, s);
            let limit = b.iconst(STEPS);
            let more = b.icmp(CmpPred::Lt, s, limit);
            b.br(more, conts[k], exit);
            filled.push(mains[k]);
            seal_ready(b, &filled);
            b.switch_to(conts[k]);
            match g[k].goto {
                Goto::Jump(t) => b.jump(mains[t]),
                Goto::Br(x, y, t, e) => {
                    let (x, y) = (b.use_var(vars[x]), b.use_var(vars[y]));
                    let c = b.icmp(CmpPred::Lt, x, y);
                    b.br(c, mains[t], mains[e]);
                }
                Goto::Ret => b.jump(exit),
            }
            filled.push(conts[k]);
            seal_ready(b, &filled);
        }
        if let Sealing::AllAtEnd = sealing {
            b.seal_all_blocks();
        }
        b.switch_to(exit);
        let out: Vec<Value> = vars.iter().chain([&steps]).map(|&v| b.use_var(v)).collect();
        b.ret(&out);
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn random_graphs_filled_in_random_order_agree_with_a_direct_evaluator(
        (g, order) in graph().prop_flat_map(|g| {
            let order: Vec<usize> = (0..=g.len()).collect();
            (Just(g), Just(order).prop_shuffle())
        }),
        init in prop::array::uniform3(-3i64..4),
        sealing in prop_oneof![Just(Sealing::Eager), Just(Sealing::AtFinish), Just(Sealing::AllAtEnd)],
    ) {
        let (m, id) = lower_graph(&g, &order, sealing);
        let want: Vec<Val> = eval_graph(&g, init).into_iter().map(Val::I64).collect();
        let got = run(&m, id, &init.map(Val::I64));
        prop_assert_eq!(got, want, "\n{}", m);
    }
}
