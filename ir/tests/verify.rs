//! Tests of the verifier: well-formed functions verify, every invariant of the module
//! docs of `gradlift_ir::verify` is checked by at least one malformed function, and
//! no `Module`, however broken, makes the verifier panic.
//!
//! Functions are built with the [`FunctionBuilder`] and, for what the builder would
//! refuse, edited directly afterwards. Assertions look at `message`, `func` and
//! `pos`, never at `location` or `context` (those come from the printer).

use cranelift_entity::EntityRef;
use gradlift_ir::verify::verify_function;
use gradlift_ir::*;
use proptest::prelude::*;
use smallvec::smallvec;

const F64: Type = Type::F64;
const F32: Type = Type::F32;
const I64: Type = Type::I64;
const BOOL: Type = Type::Bool;
const SF64: Type = Type::slice(Elem::F64);
const MF64: Type = Type::slice_mut(Elem::F64);

fn sig(params: &[Type], results: &[Type]) -> Signature {
    Signature::new(params, results)
}

/// Builds the body of the declared function `id` with `body` and defines it; the
/// function is kept as built even when the builder recorded a type error, so that
/// ill-typed functions reach the verifier.
fn define(m: &mut Module, id: FuncId, body: impl FnOnce(&mut FunctionBuilder)) {
    let func = {
        let mut b = FunctionBuilder::new(m, id);
        body(&mut b);
        b.func().clone()
    };
    m.define(id, func).unwrap();
}

/// A module with one function `@f` of signature `s`, built by `body`.
fn one(s: Signature, body: impl FnOnce(&mut FunctionBuilder)) -> Module {
    let mut m = Module::new();
    let id = m.declare("f", s).unwrap();
    define(&mut m, id, body);
    m
}

/// Like [`one`], then `edit` changes the function directly.
fn edited(
    s: Signature,
    body: impl FnOnce(&mut FunctionBuilder),
    edit: impl FnOnce(&mut Function),
) -> Module {
    let mut m = one(s, body);
    let id = m.func_by_name("f").unwrap();
    edit(m.function_mut(id).unwrap());
    m
}

fn errors(m: &Module) -> Vec<VerifierError> {
    match verify(m) {
        Ok(()) => Vec::new(),
        Err(e) => {
            assert!(!e.0.is_empty(), "Err with no errors");
            e.0
        }
    }
}

/// Checks that `m` verifies.
#[track_caller]
fn check_ok(m: &Module) {
    let errs = errors(m);
    assert!(
        errs.is_empty(),
        "expected no errors, got:\n{}",
        VerifierErrors(errs)
    );
}

/// Checks that some error's message contains `fragment`; returns all errors.
#[track_caller]
fn check_err(m: &Module, fragment: &str) -> Vec<VerifierError> {
    let errs = errors(m);
    assert!(
        errs.iter().any(|e| e.message.contains(fragment)),
        "expected an error containing `{fragment}`, got:\n{}",
        VerifierErrors(errs.clone())
    );
    errs
}

/// The block labelled `name`.
fn block(func: &Function, name: &str) -> Block {
    func.blocks
        .iter()
        .find(|(_, d)| d.name.as_deref() == Some(name))
        .map(|(b, _)| b)
        .unwrap()
}

/// `br %c, l, r; l: ...; r: ...; j:` with `left` and `right` filling the arms and
/// returning their value for the join's phi; leaves the builder in `j`.
fn diamond(
    b: &mut FunctionBuilder,
    c: Value,
    left: impl FnOnce(&mut FunctionBuilder) -> Value,
    right: impl FnOnce(&mut FunctionBuilder) -> Value,
    ty: Type,
) -> Value {
    let l = b.create_block("l");
    let r = b.create_block("r");
    let j = b.create_block("j");
    b.br(c, l, r);
    b.switch_to(l);
    let lv = left(b);
    let l_end = b.current_block();
    b.jump(j);
    b.switch_to(r);
    let rv = right(b);
    let r_end = b.current_block();
    b.jump(j);
    b.switch_to(j);
    let p = b.phi(ty, &[(l_end, lv), (r_end, rv)]);
    b.named("p", p)
}

// Well-formed functions.

#[test]
fn a_loop_with_phis_verifies() {
    check_ok(&one(sig(&[SF64], &[F64]), |b| {
        let x = b.param(0);
        let n = b.len(x);
        let zero = b.iconst(0);
        let acc0 = b.fconst(0.0);
        let acc = b.counted_loop(zero, n, &[acc0], |b, i, acc| {
            let xi = b.load(x, i);
            let sq = b.fmul(xi, xi);
            vec![b.fadd(acc[0], sq)]
        });
        b.ret(&[acc[0]]);
    }));
}

#[test]
fn nested_loops_verify() {
    // sum_{i<n} sum_{j<n} x[i*n + j], with the inner sum carried through both loops.
    check_ok(&one(sig(&[SF64, I64], &[F64]), |b| {
        let x = b.param(0);
        let n = b.param(1);
        let zero = b.iconst(0);
        let acc0 = b.fconst(0.0);
        let acc = b.counted_loop(zero, n, &[acc0], |b, i, acc| {
            let row = b.imul(i, n);
            b.counted_loop(zero, n, &[acc[0]], |b, j, acc| {
                let k = b.iadd(row, j);
                let xk = b.load(x, k);
                vec![b.fadd(acc[0], xk)]
            })
        });
        b.ret(&[acc[0]]);
    }));
}

#[test]
fn a_diamond_with_a_phi_verifies() {
    check_ok(&one(sig(&[F64], &[F64]), |b| {
        let x = b.param(0);
        let zero = b.fconst(0.0);
        let c = b.fcmp(CmpPred::Lt, x, zero);
        let p = diamond(b, c, |b| b.fneg(x), |_| x, F64);
        b.ret(&[p]);
    }));
}

#[test]
fn a_phi_may_swap_with_another_phi() {
    // (a, b) = (b, a) n times: each phi's back edge reads the other phi.
    check_ok(&one(sig(&[F64, F64, I64], &[F64]), |b| {
        let (x, y, n) = (b.param(0), b.param(1), b.param(2));
        let zero = b.iconst(0);
        let out = b.counted_loop(zero, n, &[x, y], |_, _, ab| vec![ab[1], ab[0]]);
        b.ret(&[out[0]]);
    }));
}

#[test]
fn recursion_verifies() {
    let mut m = Module::new();
    let fact = m.declare("fact", sig(&[I64], &[I64])).unwrap();
    define(&mut m, fact, |b| {
        let n = b.param(0);
        let one_ = b.iconst(1);
        let small = b.icmp(CmpPred::Le, n, one_);
        let base = b.create_block("base");
        let rec = b.create_block("rec");
        b.br(small, base, rec);
        b.switch_to(base);
        b.ret(&[one_]);
        b.switch_to(rec);
        let n1 = b.isub(n, one_);
        let r = b.call(fact, &[n1]);
        let p = b.imul(n, r[0]);
        b.ret(&[p]);
    });
    check_ok(&m);
}

#[test]
fn mutual_recursion_with_a_forward_reference_verifies() {
    let mut m = Module::new();
    let even = m.declare("even", sig(&[I64], &[BOOL])).unwrap();
    let odd = m.declare("odd", sig(&[I64], &[BOOL])).unwrap();
    for (f, other, at_zero) in [(even, odd, true), (odd, even, false)] {
        define(&mut m, f, |b| {
            let n = b.param(0);
            let zero = b.iconst(0);
            let is_zero = b.icmp(CmpPred::Eq, n, zero);
            let done = b.create_block("done");
            let rec = b.create_block("rec");
            b.br(is_zero, done, rec);
            b.switch_to(done);
            let v = b.bconst(at_zero);
            b.ret(&[v]);
            b.switch_to(rec);
            let one_ = b.iconst(1);
            let n1 = b.isub(n, one_);
            let r = b.call(other, &[n1]);
            b.ret(&[r[0]]);
        });
    }
    check_ok(&m);
}

#[test]
fn calls_with_several_results_verify() {
    let mut m = Module::new();
    let divmod = m.declare("divmod", sig(&[I64, I64], &[I64, I64])).unwrap();
    let f = m.declare("f", sig(&[I64], &[I64])).unwrap();
    define(&mut m, divmod, |b| {
        let (x, y) = (b.param(0), b.param(1));
        let q = b.idiv(x, y);
        let r = b.irem(x, y);
        b.ret(&[q, r]);
    });
    define(&mut m, f, |b| {
        let x = b.param(0);
        let seven = b.iconst(7);
        let qr = b.call(divmod, &[x, seven]);
        let s = b.iadd(qr[0], qr[1]);
        b.ret(&[s]);
    });
    check_ok(&m);
}

#[test]
fn an_alloc_buffer_may_be_passed_to_calls() {
    let mut m = Module::new();
    let fill = m.declare("fill", sig(&[MF64, F64], &[])).unwrap();
    let sum = m.declare("sum", sig(&[SF64], &[F64])).unwrap();
    let f = m.declare("f", sig(&[I64, F64], &[F64])).unwrap();
    define(&mut m, fill, |b| {
        let (s, v) = (b.param(0), b.param(1));
        let n = b.len(s);
        let zero = b.iconst(0);
        b.counted_loop(zero, n, &[], |b, i, _| {
            b.store(s, i, v);
            vec![]
        });
        b.ret(&[]);
    });
    define(&mut m, sum, |b| {
        let s = b.param(0);
        let zero = b.iconst(0);
        let a = b.load(s, zero);
        b.ret(&[a]);
    });
    define(&mut m, f, |b| {
        let (n, v) = (b.param(0), b.param(1));
        let buf = b.alloc(Elem::F64, n);
        b.call(fill, &[buf, v]);
        let zero = b.iconst(0);
        b.store(buf, zero, v);
        let r = b.call(sum, &[buf]);
        b.ret(&[r[0]]);
    });
    check_ok(&m);
}

#[test]
fn a_mut_slice_may_be_returned_as_a_read_only_one() {
    check_ok(&one(sig(&[MF64], &[SF64]), |b| {
        let s = b.param(0);
        b.ret(&[s]);
    }));
}

#[test]
fn a_branch_to_one_block_twice_needs_one_phi_edge() {
    let build = |twice: bool| {
        one(sig(&[BOOL, F64], &[F64]), |b| {
            let (c, x) = (b.param(0), b.param(1));
            let entry = b.current_block();
            let j = b.create_block("j");
            b.br(c, j, j);
            b.switch_to(j);
            let edges = if twice {
                vec![(entry, x); 2]
            } else {
                vec![(entry, x)]
            };
            let p = b.phi(F64, &edges);
            b.ret(&[p]);
        })
    };
    check_ok(&build(false));
    check_err(&build(true), "more than one incoming value for block entry");
}

#[test]
fn literals_of_their_context_type_verify() {
    check_ok(&one(sig(&[F32, I64], &[F32]), |b| {
        let (x, n) = (b.param(0), b.param(1));
        let half = b.f32const(0.5);
        let y = b.fmul(half, x);
        let c = b.const_inst(Scalar::F32(1.5));
        let z = b.fadd(y, c);
        let two = b.iconst(2);
        let w = b.powi(z, two);
        let k = b.cast(F32, n);
        let seven = b.iconst(7);
        let m7 = b.cast(F64, seven);
        let m7 = b.cast(F32, m7);
        let r = b.fadd(w, k);
        let r = b.fadd(r, m7);
        b.ret(&[r]);
    }));
}

#[test]
fn declarations_and_externs_verify() {
    let mut m = Module::new();
    let f = m.declare("f", sig(&[F64, I64], &[F64, BOOL])).unwrap();
    let g = m.declare("g", sig(&[F64, I64], &[F64, BOOL])).unwrap();
    let rule = m.declare("f_vjp", sig(&[F64, I64, F64], &[F64])).unwrap();
    let h = m.declare_extern("h", sig(&[F64], &[F64])).unwrap();
    for id in [f, g] {
        define(&mut m, id, |b| {
            let x = b.param(0);
            let t = b.bconst(true);
            let y = b.call(h, &[x]);
            b.ret(&[y[0], t]);
        });
    }
    define(&mut m, rule, |b| {
        let d = b.param(2);
        b.ret(&[d]);
    });
    m.add_decl(Decl::Vjp { func: f, rule }, Pos::NONE);
    m.add_decl(Decl::Overlay { func: g, with: f }, Pos::NONE);
    m.add_decl(Decl::Nodiff { func: h }, Pos::NONE);
    m.add_decl(Decl::Nodiff { func: f }, Pos::NONE);
    check_ok(&m);
}

#[test]
fn unreachable_code_is_not_checked_for_dominance() {
    // `dead` uses a value of `l`, which does not dominate it, but nothing reaches it.
    check_ok(&one(sig(&[BOOL, F64], &[F64]), |b| {
        let (c, x) = (b.param(0), b.param(1));
        let l = b.create_block("l");
        let r = b.create_block("r");
        let dead = b.create_block("dead");
        b.br(c, l, r);
        b.switch_to(l);
        let y = b.fneg(x);
        b.ret(&[y]);
        b.switch_to(r);
        b.ret(&[x]);
        b.switch_to(dead);
        let z = b.fadd(y, y);
        b.jump(r);
        let _ = z;
    }));
}

// Module-level errors.

#[test]
fn a_declared_function_must_be_defined() {
    let mut m = Module::new();
    m.declare("later", sig(&[], &[])).unwrap();
    let errs = check_err(&m, "function @later is declared but never defined");
    assert_eq!(errs[0].func.as_deref(), Some("later"));
}

#[test]
fn an_overlay_needs_the_same_signature() {
    let mut m = Module::new();
    let f = m.declare_extern("f", sig(&[F64], &[F64])).unwrap();
    let g = m.declare_extern("g", sig(&[F32], &[F32])).unwrap();
    m.add_decl(Decl::Overlay { func: f, with: g }, Pos::new(3, 1));
    let errs = check_err(
        &m,
        "overlay @f = @g needs one signature, but @f is (f64) -> f64 and @g is (f32) -> f32",
    );
    assert_eq!(errs[0].pos, Pos::new(3, 1));
    assert_eq!(errs[0].func, None);
}

#[test]
fn a_vjp_over_slices_takes_the_slices_their_shadows_and_the_cotangents() {
    // f(f64, [f64], mut [f64], i64) -> f64 needs a rule
    // (f64, [f64], [f64], i64, mut [f64], mut [f64], f64) -> f64: the `mut` slice
    // read-only (its contents at the call), a shadow per float slice.
    let build = |rule_sig: Signature| {
        let mut m = Module::new();
        let f = m
            .declare_extern("f", sig(&[F64, SF64, MF64, I64], &[F64]))
            .unwrap();
        let r = m.declare_extern("r", rule_sig).unwrap();
        m.add_decl(Decl::Vjp { func: f, rule: r }, Pos::NONE);
        m
    };
    check_ok(&build(sig(
        &[F64, SF64, SF64, I64, MF64, MF64, F64],
        &[F64],
    )));
    // The old form, without the shadows, is refused with the signature it needs.
    check_err(
        &build(sig(&[F64, SF64, SF64, I64, F64], &[F64])),
        "vjp rule @r for @f must have the signature (f64, [f64], [f64], i64, mut [f64], mut [f64], f64) -> f64, found (f64, [f64], [f64], i64, f64) -> f64",
    );
    // A read-only shadow cannot be added into.
    check_err(
        &build(sig(&[F64, SF64, SF64, I64, SF64, MF64, F64], &[F64])),
        "vjp rule @r for @f must have the signature",
    );
}

#[test]
fn a_vjp_pair_has_a_forward_rule_of_the_signature_and_a_pullback_without_slices() {
    let build = |fwd_sig: Signature, rvs_sig: Signature| {
        let mut m = Module::new();
        let f = m
            .declare_extern("f", sig(&[F64, SF64, MF64, I64], &[F64]))
            .unwrap();
        let fwd = m.declare_extern("f_fwd", fwd_sig).unwrap();
        let rvs = m.declare_extern("f_rvs", rvs_sig).unwrap();
        m.add_decl(
            Decl::VjpPair {
                func: f,
                forward: fwd,
                pullback: rvs,
            },
            Pos::new(4, 1),
        );
        m
    };
    let good_fwd = sig(&[F64, SF64, MF64, I64], &[F64]);
    let good_rvs = sig(&[F64, I64, MF64, MF64, F64], &[F64]);
    check_ok(&build(good_fwd.clone(), good_rvs.clone()));
    let errs = check_err(
        &build(sig(&[F64, SF64, SF64, I64], &[F64]), good_rvs),
        "vjp forward rule @f_fwd for @f must have @f's signature (f64, [f64], mut [f64], i64) -> f64, found (f64, [f64], [f64], i64) -> f64",
    );
    assert_eq!(errs[0].pos, Pos::new(4, 1));
    check_err(
        &build(good_fwd, sig(&[F64, SF64, MF64, MF64, F64], &[F64])),
        "vjp pullback rule @f_rvs for @f must have the signature (f64, i64, mut [f64], mut [f64], f64) -> f64",
    );
}

#[test]
fn a_vjp_rule_needs_the_cotangent_signature() {
    // f(f64, i64, f32) -> (f32, i64, f64) needs a rule
    // (f64, i64, f32, f32, f64) -> (f64, f32).
    let build = |rule_sig: Signature| {
        let mut m = Module::new();
        let f = m
            .declare_extern("f", sig(&[F64, I64, F32], &[F32, I64, F64]))
            .unwrap();
        let r = m.declare_extern("r", rule_sig).unwrap();
        m.add_decl(Decl::Vjp { func: f, rule: r }, Pos::new(7, 1));
        m
    };
    check_ok(&build(sig(&[F64, I64, F32, F32, F64], &[F64, F32])));
    let bad = [
        sig(&[F64, I64, F32], &[F64, F32]),
        sig(&[F64, I64, F32, F64, F32], &[F64, F32]),
        sig(&[F64, I64, F32, F32, F64], &[F64, I64, F32]),
        sig(&[F64, I64, F32, F32, F64], &[F32, F64]),
    ];
    for s in bad {
        let errs = check_err(
            &build(s),
            "vjp rule @r for @f must have the signature (f64, i64, f32, f32, f64) -> (f64, f32)",
        );
        assert_eq!(errs.len(), 1);
        assert_eq!(errs[0].pos, Pos::new(7, 1));
    }
}

/// `@g(f64, i64, f32) -> (f64, i64)` and an extern rule `@r` of signature `rule_sig`,
/// with `jvp @g = @r` at 7:1.
fn jvp_module(rule_sig: Signature) -> (Module, FuncId, FuncId) {
    let mut m = Module::new();
    let g = m
        .declare_extern("g", sig(&[F64, I64, F32], &[F64, I64]))
        .unwrap();
    let r = m.declare_extern("r", rule_sig).unwrap();
    m.add_decl(Decl::Jvp { func: g, rule: r }, Pos::new(7, 1));
    (m, g, r)
}

#[test]
fn a_jvp_rule_with_the_tangent_signature_verifies() {
    // g(f64, i64, f32) -> (f64, i64) takes the rule (f64, i64, f32, f64, f32) -> f64:
    // tangents of the float parameters in, of the float results out.
    let (mut m, g, r) = jvp_module(sig(&[F64, I64, F32, F64, F32], &[F64]));
    check_ok(&m);
    assert_eq!(m.jvp_of(g), Some(r));
    assert_eq!(m.vjp_of(g), None);
    assert_eq!(m.jvp_of(r), None);
    // A vjp beside it is fine (reverse mode uses one, forward mode the other), and
    // so is a nodiff (which wins over both).
    let v = m
        .declare_extern("v", sig(&[F64, I64, F32, F64], &[F64, F32]))
        .unwrap();
    m.add_decl(Decl::Vjp { func: g, rule: v }, Pos::new(8, 1));
    check_ok(&m);
    assert_eq!(m.jvp_of(g), Some(r));
    assert_eq!(m.vjp_of(g), Some(v));
    m.add_decl(Decl::Nodiff { func: g }, Pos::new(9, 1));
    check_ok(&m);
}

#[test]
fn a_jvp_rule_needs_the_tangent_signature() {
    let bad = [
        // The vjp's signature is not the jvp's.
        sig(&[F64, I64, F32, F64], &[F64, F32]),
        // No tangents.
        sig(&[F64, I64, F32], &[F64]),
        // Tangents in the wrong order.
        sig(&[F64, I64, F32, F32, F64], &[F64]),
        // A tangent for the integer parameter.
        sig(&[F64, I64, F32, F64, I64, F32], &[F64]),
        // A tangent for the integer result.
        sig(&[F64, I64, F32, F64, F32], &[F64, I64]),
        // A tangent of the wrong type.
        sig(&[F64, I64, F32, F64, F64], &[F64]),
    ];
    for s in bad {
        let found = s.to_string();
        let (m, _, _) = jvp_module(s);
        let errs = errors(&m);
        assert_eq!(errs.len(), 1, "{}", VerifierErrors(errs.clone()));
        assert_eq!(
            errs[0].message,
            format!(
                "jvp rule @r for @g must have the signature (f64, i64, f32, f64, f32) -> f64, found {found}"
            )
        );
        assert_eq!(errs[0].pos, Pos::new(7, 1));
        assert_eq!(errs[0].func, None);
    }
}

#[test]
fn a_jvp_over_slices_takes_a_tangent_slice_per_float_slice() {
    // f(f64, [f64], mut [f64]) -> f64 needs (f64, [f64], [f64], f64, [f64], mut [f64]) -> f64:
    // the `mut` slice read-only, its tangent `mut`.
    let build = |rule_sig: Signature| {
        let mut m = Module::new();
        let f = m
            .declare_extern("f", sig(&[F64, SF64, MF64], &[F64]))
            .unwrap();
        let r = m.declare_extern("r", rule_sig).unwrap();
        m.add_decl(Decl::Jvp { func: f, rule: r }, Pos::new(4, 1));
        m
    };
    check_ok(&build(sig(&[F64, SF64, SF64, F64, SF64, MF64], &[F64])));
    let errs = errors(&build(sig(&[F64, SF64, F64], &[F64])));
    assert_eq!(errs.len(), 1, "{}", VerifierErrors(errs.clone()));
    assert_eq!(
        errs[0].message,
        "jvp rule @r for @f must have the signature (f64, [f64], [f64], f64, [f64], mut [f64]) -> f64, found (f64, [f64], f64) -> f64"
    );
    assert_eq!(errs[0].pos, Pos::new(4, 1));
}

#[test]
fn a_function_has_at_most_one_jvp() {
    let mut m = Module::new();
    let f = m.declare_extern("f", sig(&[F64], &[F64])).unwrap();
    let r = m.declare_extern("r", sig(&[F64, F64], &[F64])).unwrap();
    m.add_decl(Decl::Jvp { func: f, rule: r }, Pos::new(2, 1));
    check_ok(&m);
    m.add_decl(Decl::Jvp { func: f, rule: r }, Pos::new(3, 1));
    let errs = errors(&m);
    assert_eq!(errs.len(), 1, "{}", VerifierErrors(errs.clone()));
    assert_eq!(errs[0].message, "@f already has a jvp declaration at 2:1");
    assert_eq!(errs[0].pos, Pos::new(3, 1));
}

#[test]
fn a_function_cannot_have_both_an_overlay_and_a_jvp() {
    let mut m = Module::new();
    let f = m.declare_extern("f", sig(&[F64], &[F64])).unwrap();
    let g = m.declare_extern("g", sig(&[F64], &[F64])).unwrap();
    let r = m.declare_extern("r", sig(&[F64, F64], &[F64])).unwrap();
    // The jvp first: the overlay is reported.
    m.add_decl(Decl::Jvp { func: f, rule: r }, Pos::new(5, 1));
    m.add_decl(Decl::Overlay { func: f, with: g }, Pos::new(6, 1));
    let errs = errors(&m);
    assert_eq!(errs.len(), 1, "{}", VerifierErrors(errs.clone()));
    assert_eq!(
        errs[0].message,
        "@f cannot have both an overlay and a jvp declaration (its jvp is at 5:1)"
    );
    assert_eq!(errs[0].pos, Pos::new(6, 1));
    // The overlay first: the jvp is reported.
    let mut m = Module::new();
    let f = m.declare_extern("f", sig(&[F64], &[F64])).unwrap();
    let g = m.declare_extern("g", sig(&[F64], &[F64])).unwrap();
    let r = m.declare_extern("r", sig(&[F64, F64], &[F64])).unwrap();
    m.add_decl(Decl::Overlay { func: f, with: g }, Pos::new(2, 1));
    m.add_decl(Decl::Jvp { func: f, rule: r }, Pos::new(3, 1));
    let errs = errors(&m);
    assert_eq!(errs.len(), 1, "{}", VerifierErrors(errs.clone()));
    assert_eq!(
        errs[0].message,
        "@f cannot have both an overlay and a jvp declaration (its overlay is at 2:1)"
    );
    assert_eq!(errs[0].pos, Pos::new(3, 1));
}

#[test]
fn an_overlay_after_a_vjp_and_a_jvp_conflicts_with_both() {
    let mut m = Module::new();
    let f = m.declare_extern("f", sig(&[F64], &[F64])).unwrap();
    let g = m.declare_extern("g", sig(&[F64], &[F64])).unwrap();
    let r = m.declare_extern("r", sig(&[F64, F64], &[F64])).unwrap();
    m.add_decl(Decl::Vjp { func: f, rule: r }, Pos::new(1, 1));
    m.add_decl(Decl::Jvp { func: f, rule: r }, Pos::new(2, 1));
    check_ok(&m);
    m.add_decl(Decl::Overlay { func: f, with: g }, Pos::NONE);
    let errs = errors(&m);
    let got: Vec<&str> = errs.iter().map(|e| e.message.as_str()).collect();
    assert_eq!(
        got,
        [
            "@f cannot have both an overlay and a vjp declaration (its vjp is at 1:1)",
            "@f cannot have both an overlay and a jvp declaration (its jvp is at 2:1)",
        ]
    );
}

#[test]
fn a_function_has_one_declaration_of_each_kind() {
    let mut m = Module::new();
    let f = m.declare_extern("f", sig(&[F64], &[F64])).unwrap();
    let g = m.declare_extern("g", sig(&[F64], &[F64])).unwrap();
    m.add_decl(Decl::Nodiff { func: f }, Pos::new(1, 1));
    m.add_decl(Decl::Nodiff { func: f }, Pos::new(2, 1));
    m.add_decl(Decl::Overlay { func: f, with: g }, Pos::new(3, 1));
    m.add_decl(Decl::Overlay { func: f, with: g }, Pos::new(4, 1));
    let errs = check_err(&m, "@f already has a nodiff declaration at 1:1");
    assert_eq!(errs[0].pos, Pos::new(2, 1));
    let errs = check_err(&m, "@f already has an overlay declaration at 3:1");
    assert_eq!(errs.len(), 2);
    assert_eq!(errs[1].pos, Pos::new(4, 1));
}

#[test]
fn a_function_cannot_have_both_an_overlay_and_a_vjp() {
    let mut m = Module::new();
    let f = m.declare_extern("f", sig(&[F64], &[F64])).unwrap();
    let g = m.declare_extern("g", sig(&[F64], &[F64])).unwrap();
    let r = m.declare_extern("r", sig(&[F64, F64], &[F64])).unwrap();
    m.add_decl(Decl::Vjp { func: f, rule: r }, Pos::new(5, 1));
    m.add_decl(Decl::Overlay { func: f, with: g }, Pos::new(6, 1));
    let errs = check_err(
        &m,
        "@f cannot have both an overlay and a vjp declaration (its vjp is at 5:1)",
    );
    assert_eq!(errs.len(), 1);
    assert_eq!(errs[0].pos, Pos::new(6, 1));
    // A repeated overlay is reported as a repeat, not as a second conflict.
    m.add_decl(Decl::Overlay { func: f, with: g }, Pos::new(8, 1));
    let errs = check_err(&m, "@f already has an overlay declaration at 6:1");
    assert_eq!(errs.len(), 2);
}

#[test]
fn a_declaration_names_functions_of_the_module() {
    let mut m = Module::new();
    let f = m.declare_extern("f", sig(&[F64], &[F64])).unwrap();
    m.add_decl(
        Decl::Vjp {
            func: f,
            rule: FuncId::new(9),
        },
        Pos::NONE,
    );
    m.add_decl(
        Decl::Nodiff {
            func: FuncId::new(4),
        },
        Pos::NONE,
    );
    let errs = check_err(&m, "vjp names fn9, which is not a function of the module");
    assert!(errs[1].message.contains("nodiff names fn4"));
}

// Structure of a function.

#[test]
fn a_function_has_blocks() {
    let mut m = Module::new();
    let f = m.declare("f", sig(&[], &[])).unwrap();
    m.define(f, Function::new(&sig(&[], &[]))).unwrap();
    check_err(&m, "the function has no blocks");
}

#[test]
fn parameters_match_the_signature() {
    let s = sig(&[F64, I64], &[]);
    let mut m = Module::new();
    m.add(
        "f",
        s,
        Body::Defined(Function::new(&sig(&[F64], &[]))),
        Pos::NONE,
    )
    .unwrap();
    let id = m.func_by_name("f").unwrap();
    let func = m.function_mut(id).unwrap();
    let entry = func.make_block(Some("entry"));
    func.append_block(entry);
    func.set_terminator(entry, Terminator::Ret(smallvec![]));
    check_err(
        &m,
        "the function has 1 parameter value, but its signature has 2 parameters",
    );

    let m = edited(
        sig(&[F64], &[]),
        |b| b.ret(&[]),
        |f| {
            let p = f.params[0];
            f.values[p].ty = F32;
        },
    );
    check_err(&m, "has type f32, but the signature says f64");

    let m = edited(
        sig(&[F64, F64], &[]),
        |b| b.ret(&[]),
        |f| {
            let p = f.params[1];
            f.values[p].def = ValueDef::Param(0);
        },
    );
    check_err(
        &m,
        "is parameter 2 of the function, but its definition says parameter 1",
    );

    let m = edited(
        sig(&[F64, F64], &[]),
        |b| b.ret(&[]),
        |f| f.params[1] = f.params[0],
    );
    check_err(&m, "is defined more than once");
}

#[test]
fn the_entry_block_has_no_phis() {
    let m = edited(
        sig(&[F64], &[F64]),
        |b| {
            let x = b.param(0);
            b.ret(&[x]);
        },
        |f| {
            let entry = f.layout[0];
            let x = f.params[0];
            f.append_phi(entry, F64, &[(entry, x)]);
        },
    );
    check_err(&m, "the entry block entry cannot have phis");
}

#[test]
fn the_entry_block_has_no_predecessors() {
    let m = one(sig(&[BOOL], &[]), |b| {
        let c = b.param(0);
        let entry = b.current_block();
        let body = b.create_block("body");
        let exit = b.create_block("exit");
        b.jump(body);
        b.switch_to(body);
        b.br(c, entry, exit);
        b.switch_to(exit);
        b.ret(&[]);
    });
    check_err(
        &m,
        "the entry block entry cannot have predecessors, but block body jumps to it",
    );
}

#[test]
fn the_layout_lists_each_block_once() {
    let m = edited(
        sig(&[], &[]),
        |b| {
            let next = b.create_block("next");
            b.jump(next);
            b.switch_to(next);
            b.ret(&[]);
        },
        |f| f.layout.push(f.layout[1]),
    );
    check_err(&m, "block next appears twice in the layout");

    let m = edited(
        sig(&[], &[]),
        |b| b.ret(&[]),
        |f| f.layout.push(Block::new(40)),
    );
    check_err(
        &m,
        "the layout lists block40, which is not a block of the function",
    );
}

#[test]
fn every_block_has_a_terminator() {
    let m = edited(
        sig(&[], &[]),
        |b| b.ret(&[]),
        |f| {
            let e = f.layout[0];
            f.blocks[e].term = None;
        },
    );
    let errs = check_err(&m, "block entry has no terminator");
    assert_eq!(errs.len(), 1);
}

#[test]
fn branch_targets_are_blocks_in_the_layout() {
    let m = edited(
        sig(&[], &[]),
        |b| b.ret(&[]),
        |f| {
            let e = f.layout[0];
            let away = f.make_block(Some("away"));
            f.set_terminator(away, Terminator::Ret(smallvec![]));
            f.set_terminator(e, Terminator::Jump(away));
        },
    );
    check_err(
        &m,
        "jump to block <unplaced away>, which is not in the layout",
    );

    let m = edited(
        sig(&[BOOL], &[]),
        |b| b.ret(&[]),
        |f| {
            let e = f.layout[0];
            let c = f.params[0];
            f.set_terminator(
                e,
                Terminator::Br {
                    cond: c,
                    then_dest: e,
                    else_dest: Block::new(1000),
                },
            );
        },
    );
    check_err(&m, "br to block1000, which is not a block of the function");
}

#[test]
fn references_out_of_range_are_reported() {
    let m = edited(
        sig(&[F64], &[F64]),
        |b| {
            let x = b.param(0);
            let y = b.fneg(x);
            b.ret(&[y]);
        },
        |f| {
            let e = f.layout[0];
            let i = f.blocks[e].insts[0];
            f.insts[i].args[0] = Value::new(500);
            f.blocks[e].insts.push(Inst::new(77));
            f.set_terminator(e, Terminator::Ret(smallvec![Value::new(501)]));
        },
    );
    check_err(&m, "v500 is not a value of the function");
    check_err(
        &m,
        "block entry lists inst77, which is not an instruction of the function",
    );
    check_err(&m, "v501 is not a value of the function");

    let mut m = Module::new();
    let id = m.declare("f", sig(&[F64], &[F64])).unwrap();
    define(&mut m, id, |b| {
        let x = b.param(0);
        let r = b.call(id, &[x]);
        b.ret(&[r[0]]);
    });
    let f = m.function_mut(id).unwrap();
    let i = f.blocks[f.layout[0]].insts[0];
    f.insts[i].imm = Imm::Func(FuncId::new(31));
    check_err(&m, "call to fn31, which is not a function of the module");

    let m = edited(
        sig(&[F64], &[F64]),
        |b| {
            let x = b.param(0);
            let y = b.fneg(x);
            b.ret(&[y]);
        },
        |f| {
            let i = f.blocks[f.layout[0]].insts[0];
            f.insts[i].results[0] = Value::new(90);
            f.params[0] = Value::new(91);
        },
    );
    check_err(&m, "result 1 is v90, which is not a value of the function");
    check_err(
        &m,
        "parameter 1 is v91, which is not a value of the function",
    );
}

#[test]
fn an_instruction_is_placed_once() {
    let m = edited(
        sig(&[F64, BOOL], &[F64]),
        |b| {
            let (x, c) = (b.param(0), b.param(1));
            let l = b.create_block("l");
            let r = b.create_block("r");
            b.br(c, l, r);
            b.switch_to(l);
            let y = b.fneg(x);
            b.ret(&[y]);
            b.switch_to(r);
            b.ret(&[x]);
        },
        |f| {
            let (l, r) = (block(f, "l"), block(f, "r"));
            let i = f.blocks[l].insts[0];
            f.blocks[r].insts.push(i);
            f.blocks[l].insts.push(i);
        },
    );
    let errs = check_err(&m, "is placed more than once (also in block l)");
    check_err(&m, "is placed more than once (earlier in the same block)");
    assert_eq!(errs.len(), 2, "{}", VerifierErrors(errs.clone()));
}

#[test]
fn definitions_point_back() {
    let body = |b: &mut FunctionBuilder| {
        let x = b.param(0);
        let y = b.fneg(x);
        let y = b.named("y", y);
        let z = b.fabs(y);
        b.ret(&[z]);
    };
    let m = edited(sig(&[F64], &[F64]), body, |f| {
        let i = f.blocks[f.layout[0]].insts[0];
        let y = f.insts[i].results[0];
        f.values[y].def = ValueDef::Result(i, 1);
    });
    check_err(
        &m,
        "%y is result 1 of this instruction, but its definition says result 2 of inst0",
    );

    // Two instructions define one value.
    let m = edited(sig(&[F64], &[F64]), body, |f| {
        let [i, j] = f.blocks[f.layout[0]].insts[..] else {
            panic!()
        };
        f.insts[j].results[0] = f.insts[i].results[0];
    });
    check_err(&m, "%y is defined more than once");

    // A phi whose value claims to be something else.
    let m = edited(
        sig(&[F64], &[F64]),
        |b| {
            let x = b.param(0);
            let entry = b.current_block();
            let j = b.create_block("j");
            b.jump(j);
            b.switch_to(j);
            let p = b.phi(F64, &[(entry, x)]);
            let p = b.named("p", p);
            b.ret(&[p]);
        },
        |f| {
            let p = f.blocks[block(f, "j")].phis[0].value;
            f.values[p].def = ValueDef::Param(0);
        },
    );
    check_err(
        &m,
        "%p is a phi of block j, but its definition says parameter 1",
    );
}

#[test]
fn a_used_value_must_be_defined_in_the_function() {
    // `%y`'s instruction is taken out of its block but `%y` is still used.
    let m = edited(
        sig(&[F64], &[F64]),
        |b| {
            let x = b.param(0);
            let y = b.fneg(x);
            let y = b.named("y", y);
            b.ret(&[y]);
        },
        |f| {
            let e = f.layout[0];
            let i = f.blocks[e].insts[0];
            assert!(f.remove_inst(e, i));
        },
    );
    let errs = check_err(&m, "%<unplaced y> is used but not defined in the function");
    assert_eq!(errs.len(), 1);
}

#[test]
fn constants_have_their_literal_type() {
    let m = edited(
        sig(&[F64], &[F64]),
        |b| {
            let x = b.param(0);
            let one_ = b.fconst(1.0);
            let y = b.fadd(x, one_);
            b.ret(&[y]);
        },
        |f| {
            let i = f.blocks[f.layout[0]].insts[0];
            let c = f.insts[i].args[1];
            f.values[c].ty = F32;
        },
    );
    check_err(
        &m,
        "the constant 1.0 is recorded with type f32, but its value is of type f64",
    );
}

// Types.

#[test]
fn the_immediate_matches_the_op() {
    let m = edited(
        sig(&[F64], &[F64]),
        |b| {
            let x = b.param(0);
            let y = b.fneg(x);
            b.ret(&[y]);
        },
        |f| {
            let i = f.blocks[f.layout[0]].insts[0];
            f.insts[i].imm = Imm::Cmp(CmpPred::Eq);
        },
    );
    check_err(&m, "fneg has a malformed immediate");
}

#[test]
fn operand_types_follow_the_op_table() {
    let m = one(sig(&[F64, I64], &[F64]), |b| {
        let (x, n) = (b.param(0), b.param(1));
        let y = b.fadd(x, n);
        b.ret(&[y]);
    });
    check_err(&m, "operand 2 of fadd must be f64, found i64");

    let m = one(sig(&[I64], &[I64]), |b| {
        let n = b.param(0);
        let y = b.fadd(n, n);
        b.ret(&[y]);
    });
    check_err(&m, "fadd takes floats, found i64");

    let m = one(sig(&[F64, F32], &[F64]), |b| {
        let (x, y) = (b.param(0), b.param(1));
        let z = b.fmul(x, y);
        b.ret(&[z]);
    });
    check_err(&m, "operand 2 of fmul must be f64, found f32");

    let m = one(sig(&[SF64, F64], &[F64]), |b| {
        let (s, x) = (b.param(0), b.param(1));
        let z = b.load(s, x);
        b.ret(&[z]);
    });
    check_err(&m, "operand 2 of load must be i64, found f64");

    let m = edited(
        sig(&[F64], &[F64]),
        |b| {
            let x = b.param(0);
            let y = b.fneg(x);
            b.ret(&[y]);
        },
        |f| {
            let i = f.blocks[f.layout[0]].insts[0];
            f.insts[i].args.push(f.params[0]);
        },
    );
    check_err(&m, "fneg takes 1 operand, found 2");
}

#[test]
fn result_types_follow_the_op_table() {
    let m = edited(
        sig(&[F64], &[F64]),
        |b| {
            let x = b.param(0);
            let y = b.fneg(x);
            let y = b.named("y", y);
            b.ret(&[x]);
            let _ = y;
        },
        |f| {
            let i = f.blocks[f.layout[0]].insts[0];
            let y = f.insts[i].results[0];
            f.values[y].ty = F32;
        },
    );
    check_err(&m, "result %y has type f32, but fneg gives f64");

    let m = edited(
        sig(&[F64], &[F64]),
        |b| {
            let x = b.param(0);
            b.fneg(x);
            b.ret(&[x]);
        },
        |f| {
            let i = f.blocks[f.layout[0]].insts[0];
            f.insts[i].results.clear();
        },
    );
    check_err(&m, "fneg gives 1 result, but the instruction defines 0");
}

#[test]
fn calls_match_the_callee() {
    let build = |args: &[Type], results: &[Type]| {
        let mut m = Module::new();
        let g = m.declare_extern("g", sig(&[F64], &[F64])).unwrap();
        let f = m.declare("f", sig(args, &[])).unwrap();
        define(&mut m, f, |b| {
            let args: Vec<Value> = (0..b.sig().params.len()).map(|i| b.param(i)).collect();
            b.call(g, &args);
            b.ret(&[]);
        });
        let func = m.function_mut(f).unwrap();
        let i = func.blocks[func.layout[0]].insts[0];
        let n = func.insts[i].results.len();
        assert_eq!(n, 1);
        if results.is_empty() {
            func.insts[i].results.clear();
        }
        m
    };
    check_ok(&build(&[F64], &[F64]));
    check_err(
        &build(&[F64, F64], &[F64]),
        "call passes 2 arguments to a function of 1 parameter",
    );
    check_err(
        &build(&[I64], &[F64]),
        "operand 1 of call must be f64, found i64",
    );
    check_err(
        &build(&[F64], &[]),
        "call gives 1 result, but the instruction defines 0",
    );
}

#[test]
fn store_needs_a_mut_slice() {
    let m = one(sig(&[SF64], &[]), |b| {
        let s = b.param(0);
        let zero = b.iconst(0);
        let one_ = b.fconst(1.0);
        b.store(s, zero, one_);
        b.ret(&[]);
    });
    check_err(&m, "store needs a `mut` slice, found the read-only [f64]");
}

#[test]
fn ret_matches_the_signature() {
    let m = one(sig(&[F64], &[F64, F64]), |b| {
        let x = b.param(0);
        b.ret(&[x]);
    });
    check_err(&m, "ret returns 1 value, but @f has 2 results");

    let m = one(sig(&[I64], &[F64]), |b| {
        let n = b.param(0);
        b.ret(&[n]);
    });
    check_err(&m, "has type i64, but @f returns f64 there");

    let m = one(sig(&[SF64], &[MF64]), |b| {
        let s = b.param(0);
        b.ret(&[s]);
    });
    check_err(&m, "has type [f64], but @f returns mut [f64] there");
}

#[test]
fn br_needs_a_bool() {
    let m = one(sig(&[F64], &[]), |b| {
        let x = b.param(0);
        let l = b.create_block("l");
        b.br(x, l, l);
        b.switch_to(l);
        b.ret(&[]);
    });
    check_err(&m, "has type f64, not bool");
}

// Phis.

/// `entry: br %c, l, j; l: jump j; j: %p = phi f64 [edges]; ret %p`.
fn phi_module(edges: impl FnOnce(Block, Block, Block, Value) -> Vec<(Block, Value)>) -> Module {
    one(sig(&[BOOL, F64], &[F64]), |b| {
        let (c, x) = (b.param(0), b.param(1));
        let entry = b.current_block();
        let l = b.create_block("l");
        let j = b.create_block("j");
        let other = b.create_block("other");
        b.br(c, l, j);
        b.switch_to(l);
        b.jump(j);
        b.switch_to(other);
        b.ret(&[x]);
        b.switch_to(j);
        let edges = edges(entry, l, other, x);
        let p = b.phi(F64, &edges);
        let p = b.named("p", p);
        b.ret(&[p]);
    })
}

#[test]
fn a_phi_has_one_edge_per_predecessor() {
    check_ok(&phi_module(|e, l, _, x| vec![(l, x), (e, x)]));
    let errs = check_err(
        &phi_module(|_, l, _, x| vec![(l, x)]),
        "phi %p has no incoming value for predecessor block entry",
    );
    assert_eq!(errs.len(), 1);
    check_err(
        &phi_module(|e, l, _, x| vec![(e, x), (l, x), (e, x)]),
        "phi %p has more than one incoming value for block entry",
    );
    check_err(
        &phi_module(|e, l, o, x| vec![(e, x), (l, x), (o, x)]),
        "phi %p has an incoming value for block other, which is not a predecessor of block j",
    );
    check_err(
        &phi_module(|e, l, _, x| vec![(e, x), (l, x), (Block::new(50), x)]),
        "phi %p has an incoming value for block50, which is not a block of the function",
    );
}

#[test]
fn a_phi_edge_names_a_block_in_the_layout() {
    let m = {
        let mut m = phi_module(|e, l, _, x| vec![(e, x), (l, x)]);
        let id = m.func_by_name("f").unwrap();
        let f = m.function_mut(id).unwrap();
        let away = f.make_block(Some("away"));
        let j = block(f, "j");
        let x = f.params[1];
        f.blocks[j].phis[0].incoming.push((away, x));
        m
    };
    check_err(&m, "for block <unplaced away>, which is not in the layout");
}

#[test]
fn incoming_values_fit_the_phi_type() {
    let m = one(sig(&[F64, I64], &[F64]), |b| {
        let (x, n) = (b.param(0), b.param(1));
        let entry = b.current_block();
        let j = b.create_block("j");
        b.jump(j);
        b.switch_to(j);
        let p = b.phi(F64, &[(entry, n)]);
        b.named("p", p);
        b.ret(&[x]);
    });
    check_err(&m, "from block entry has type i64, but phi %p is f64");
}

// Dominance.

#[test]
fn a_value_of_one_arm_is_not_available_in_the_other() {
    let m = one(sig(&[F64, BOOL], &[F64]), |b| {
        let (x, c) = (b.param(0), b.param(1));
        let l = b.create_block("l");
        let r = b.create_block("r");
        let j = b.create_block("j");
        b.br(c, l, r);
        b.switch_to(l);
        let y = b.fneg(x);
        let y = b.named("y", y);
        b.jump(j);
        b.switch_to(r);
        b.fadd(y, x);
        b.jump(j);
        b.switch_to(j);
        b.ret(&[y]);
    });
    let errs = check_err(
        &m,
        "use of %y is not dominated by its definition in block l",
    );
    // One use in `r`, one in the join's `ret`.
    assert_eq!(errs.len(), 2, "{}", VerifierErrors(errs.clone()));
}

#[test]
fn a_value_is_used_after_its_definition_in_its_block() {
    let m = edited(
        sig(&[F64], &[F64]),
        |b| {
            let x = b.param(0);
            let a = b.fneg(x);
            let bb = b.fabs(a);
            let bb = b.named("b", bb);
            b.ret(&[bb]);
        },
        |f| {
            // Swap them: `%b = fabs %a` now comes before `%a = fneg %x`.
            let e = f.layout[0];
            f.blocks[e].insts.swap(0, 1);
            let a = f.insts[f.blocks[e].insts[1]].results[0];
            f.set_value_name(a, "a");
        },
    );
    let errs = check_err(
        &m,
        "use of %a is not dominated by its definition: it is defined later in block entry",
    );
    assert_eq!(errs.len(), 1);

    let m = edited(
        sig(&[F64], &[F64]),
        |b| {
            let x = b.param(0);
            let a = b.fneg(x);
            b.named("a", a);
            b.ret(&[a]);
        },
        |f| {
            let i = f.blocks[f.layout[0]].insts[0];
            f.insts[i].args[0] = f.insts[i].results[0];
        },
    );
    check_err(
        &m,
        "use of %a is not dominated by its definition: the instruction uses its own result",
    );
}

#[test]
fn a_phi_value_must_be_available_at_the_end_of_its_predecessor() {
    // The join's phi takes `%y` (defined in `r`) on the edge from `l`.
    let m = one(sig(&[F64, BOOL], &[F64]), |b| {
        let (x, c) = (b.param(0), b.param(1));
        let l = b.create_block("l");
        let r = b.create_block("r");
        let j = b.create_block("j");
        b.br(c, l, r);
        b.switch_to(r);
        let y = b.fneg(x);
        let y = b.named("y", y);
        b.jump(j);
        b.switch_to(l);
        b.jump(j);
        b.switch_to(j);
        let p = b.phi(F64, &[(l, y), (r, y)]);
        b.ret(&[p]);
    });
    let errs = check_err(
        &m,
        "use of %y is not dominated by its definition in block r (incoming edge from block l)",
    );
    assert_eq!(errs.len(), 1);
}

#[test]
fn a_phi_may_take_a_value_of_its_own_block_around_a_loop() {
    // head: %i = phi [entry: 0, head: %i1]; %i1 = iadd %i, 1; br ..., head, exit
    check_ok(&one(sig(&[I64], &[I64]), |b| {
        let n = b.param(0);
        let entry = b.current_block();
        let head = b.create_block("head");
        let exit = b.create_block("exit");
        let zero = b.iconst(0);
        let one_ = b.iconst(1);
        b.jump(head);
        b.switch_to(head);
        let i = b.phi(I64, &[(entry, zero)]);
        let i1 = b.iadd(i, one_);
        b.add_incoming(i, head, i1);
        let more = b.icmp(CmpPred::Lt, i1, n);
        b.br(more, head, exit);
        b.switch_to(exit);
        b.ret(&[i1]);
    }));
}

#[test]
fn a_value_of_an_unreachable_block_is_not_available_elsewhere() {
    let m = one(sig(&[F64], &[F64]), |b| {
        let x = b.param(0);
        let exit = b.create_block("exit");
        let dead = b.create_block("dead");
        b.jump(exit);
        b.switch_to(dead);
        let y = b.fneg(x);
        let y = b.named("y", y);
        b.jump(exit);
        b.switch_to(exit);
        let z = b.fadd(x, y);
        b.ret(&[z]);
    });
    check_err(
        &m,
        "use of %y is not dominated by its definition in block dead",
    );
}

#[test]
fn unreachable_code_is_still_type_checked() {
    let m = one(sig(&[F64, I64], &[F64]), |b| {
        let (x, n) = (b.param(0), b.param(1));
        let dead = b.create_block("dead");
        b.ret(&[x]);
        b.switch_to(dead);
        let y = b.fadd(x, n);
        b.ret(&[y]);
    });
    check_err(&m, "operand 2 of fadd must be f64, found i64");
}

// Alloc buffers.

#[test]
fn an_alloc_buffer_cannot_be_returned() {
    let m = one(sig(&[I64], &[MF64]), |b| {
        let n = b.param(0);
        let a = b.alloc(Elem::F64, n);
        b.named("a", a);
        b.ret(&[a]);
    });
    check_err(
        &m,
        "cannot return %a: an alloc buffer dies when the function returns",
    );
}

#[test]
fn an_alloc_buffer_cannot_be_returned_through_a_phi_or_select() {
    let m = one(sig(&[MF64, BOOL], &[SF64]), |b| {
        let (s, c) = (b.param(0), b.param(1));
        let three = b.iconst(3);
        let a = b.alloc(Elem::F64, three);
        b.named("a", a);
        let p = diamond(b, c, |_| a, |_| s, MF64);
        b.ret(&[p]);
    });
    check_err(&m, "cannot return %p: it may be the alloc buffer %a");

    let m = one(sig(&[MF64, BOOL], &[SF64]), |b| {
        let (s, c) = (b.param(0), b.param(1));
        let three = b.iconst(3);
        let a = b.alloc(Elem::F64, three);
        b.named("a", a);
        let t = b.select(c, s, a);
        b.named("t", t);
        b.ret(&[t]);
    });
    check_err(&m, "cannot return %t: it may be the alloc buffer %a");

    // Not through the condition of a select, nor through a load.
    check_ok(&one(sig(&[MF64, SF64, BOOL], &[SF64, F64]), |b| {
        let (s, r, c) = (b.param(0), b.param(1), b.param(2));
        let three = b.iconst(3);
        let a = b.alloc(Elem::F64, three);
        let zero = b.iconst(0);
        let x = b.load(a, zero);
        let t = b.select(c, s, r);
        b.ret(&[t, x]);
    }));
}

#[test]
fn an_alloc_buffer_cannot_be_returned_through_a_call() {
    let mut m = Module::new();
    let id = m
        .declare_extern("id", sig(&[SF64, F64], &[SF64, F64]))
        .unwrap();
    let f = m.declare("f", sig(&[], &[SF64])).unwrap();
    define(&mut m, f, |b| {
        let three = b.iconst(3);
        let a = b.alloc(Elem::F64, three);
        b.named("a", a);
        let one_ = b.fconst(1.0);
        let r = b.call(id, &[a, one_]);
        let r0 = b.named("r", r[0]);
        b.ret(&[r0]);
    });
    check_err(&m, "cannot return %r: it may be the alloc buffer %a");
}

// The tape.

/// `op T` with no operands (`pop`), or `tape_alloc T, n`, or `tape_view T, h`.
fn tape_op(b: &mut FunctionBuilder, op: Opcode, ty: Type, args: &[Value]) -> Value {
    let inst = b.ins(op, Imm::Type(ty), args);
    b.results(inst)[0]
}

#[test]
fn tape_views_may_be_used_and_passed_but_not_returned() {
    // Handles are i64s: pushed, returned; views are used and passed to calls.
    let mut m = Module::new();
    let id = m
        .declare_extern("id", sig(&[SF64, F64], &[SF64, F64]))
        .unwrap();
    let f = m.declare("f", sig(&[], &[F64, I64])).unwrap();
    define(&mut m, f, |b| {
        let three = b.iconst(3);
        let h = tape_op(b, Opcode::TapeAlloc, F64, &[three]);
        let v = tape_op(b, Opcode::TapeView, F64, &[h]);
        let w = tape_op(b, Opcode::TapeView, F64, &[h]);
        let zero = b.iconst(0);
        let x = b.load(v, zero);
        b.store(w, zero, x);
        let r = b.call(id, &[v, x]);
        b.ins(Opcode::Push, Imm::None, &[h]);
        b.ret(&[r[1], h]);
    });
    check_ok(&m);

    let m = one(sig(&[I64], &[MF64]), |b| {
        let h = b.param(0);
        let a = tape_op(b, Opcode::TapeView, F64, &[h]);
        b.named("a", a);
        b.ret(&[a]);
    });
    check_err(
        &m,
        "cannot return %a: a tape_view slice views a tape buffer and is valid only during the gradient call",
    );

    let mut m = Module::new();
    let id = m
        .declare_extern("id", sig(&[SF64, F64], &[SF64, F64]))
        .unwrap();
    let f = m.declare("f", sig(&[BOOL], &[SF64])).unwrap();
    define(&mut m, f, |b| {
        let c = b.param(0);
        let two = b.iconst(2);
        let h = tape_op(b, Opcode::TapeAlloc, F64, &[two]);
        let a = tape_op(b, Opcode::TapeView, F64, &[h]);
        b.named("a", a);
        let one_ = b.fconst(1.0);
        let r = b.call(id, &[a, one_]);
        let p = diamond(b, c, |_| r[0], |_| a, SF64);
        b.ret(&[p]);
    });
    check_err(
        &m,
        "cannot return %p: it may be the tape_view slice %a, which views a tape buffer and is valid only during the gradient call",
    );
}

#[test]
fn tape_ops_are_typed_by_the_op_table() {
    let m = one(sig(&[F32, BOOL], &[F32]), |b| {
        let (x, c) = (b.param(0), b.param(1));
        b.ins(Opcode::Push, Imm::None, &[x]);
        b.ins(Opcode::Push, Imm::None, &[c]);
        let _ = tape_op(b, Opcode::Pop, BOOL, &[]);
        let y = tape_op(b, Opcode::Pop, F32, &[]);
        b.ret(&[y]);
    });
    check_ok(&m);

    // A pop whose result is used at the wrong type.
    let m = one(sig(&[], &[F64]), |b| {
        let y = tape_op(b, Opcode::Pop, F32, &[]);
        b.named("y", y);
        b.ret(&[y]);
    });
    check_err(
        &m,
        "ret value 1 (%y) has type f32, but @f returns f64 there",
    );

    // A handle is an i64, not a slice.
    let m = one(sig(&[], &[F64]), |b| {
        let three = b.iconst(3);
        let h = tape_op(b, Opcode::TapeAlloc, F64, &[three]);
        let zero = b.iconst(0);
        let x = b.ins(Opcode::Load, Imm::None, &[h, zero]);
        let x = b.results(x)[0];
        b.ret(&[x]);
    });
    check_err(&m, "load reads from a slice, found i64");

    // A view of one element type is no slice of another.
    let m = one(sig(&[I64], &[F64]), |b| {
        let h = b.param(0);
        let v = tape_op(b, Opcode::TapeView, F32, &[h]);
        let zero = b.iconst(0);
        let x = b.load(v, zero);
        b.ret(&[x]);
    });
    check_err(&m, "has type f32, but @f returns f64 there");
}

// Debug checks.

#[test]
fn trap_if_takes_a_bool_and_a_message_of_the_function() {
    // Anywhere an instruction may stand: the entry, a loop body, after a store, with
    // a literal condition, the same message twice.
    let m = one(sig(&[MF64, BOOL], &[]), |b| {
        let (s, c) = (b.param(0), b.param(1));
        b.trap_if(c, "first");
        let n = b.len(s);
        let zero = b.iconst(0);
        b.counted_loop(zero, n, &[], |b, i, _| {
            let x = b.load(s, i);
            let neg = b.fcmp(CmpPred::Lt, x, x);
            b.trap_if(neg, "first");
            b.store(s, i, x);
            let f = b.bconst(false);
            b.trap_if(f, "never\n");
            vec![]
        });
        b.ret(&[]);
    });
    check_ok(&m);
    let f = m.function(m.func_by_name("f").unwrap()).unwrap();
    assert_eq!(
        f.messages.values().collect::<Vec<_>>(),
        ["first", "never\n"]
    );

    // A condition that is not a bool.
    let m = one(sig(&[I64], &[]), |b| {
        let n = b.param(0);
        b.trap_if(n, "n");
        b.ret(&[]);
    });
    let errs = check_err(&m, "operand 1 of trap_if must be bool, found i64");
    assert_eq!(errs.len(), 1, "{}", VerifierErrors(errs.clone()));

    // A message that is not in the function's arena: an error, never a panic.
    let m = edited(
        sig(&[BOOL], &[]),
        |b| {
            let c = b.param(0);
            b.trap_if(c, "kept");
            b.ret(&[]);
        },
        |f| {
            let (_, inst) = f.placed_insts().next().unwrap();
            f.insts[inst].imm = Imm::Msg(Msg::new(5));
        },
    );
    let errs = check_err(
        &m,
        "trap_if names msg5, which is not a message of the function",
    );
    assert_eq!(errs.len(), 1, "{}", VerifierErrors(errs.clone()));
    assert_eq!(errs[0].context, "trap_if %0, <invalid msg5>");
    assert_eq!(errs[0].func.as_deref(), Some("f"));

    // The wrong kind of immediate, and a result where there is none.
    let m = edited(
        sig(&[BOOL], &[]),
        |b| {
            let c = b.param(0);
            b.trap_if(c, "m");
            b.ret(&[]);
        },
        |f| {
            let (_, inst) = f.placed_insts().next().unwrap();
            f.insts[inst].imm = Imm::Type(BOOL);
        },
    );
    check_err(&m, "trap_if has a malformed immediate Type(Bool)");
    let m = edited(
        sig(&[BOOL], &[]),
        |b| {
            let c = b.param(0);
            b.trap_if(c, "m");
            b.ret(&[]);
        },
        |f| {
            let (_, inst) = f.placed_insts().next().unwrap();
            let r = f.make_inst(Opcode::Fneg, Imm::None, &[], &[BOOL]);
            let v = f.insts[r].results[0];
            f.values[v].def = ValueDef::Result(inst, 0);
            f.insts[inst].results.push(v);
        },
    );
    check_err(&m, "trap_if gives 0 results, but the instruction defines 1");
}

// Literal typing.

#[test]
fn a_constant_operand_has_the_type_a_literal_gets_there() {
    let m = one(sig(&[], &[F32]), |b| {
        let x = b.f32const(1.5);
        let y = b.f32const(2.5);
        let z = b.fadd(x, y);
        b.ret(&[z]);
    });
    let errs = check_err(
        &m,
        "constant 1.5 of type f32 cannot be written as a literal here (it would read as f64); use `const f32 1.5`",
    );
    assert_eq!(errs.len(), 2, "{}", VerifierErrors(errs.clone()));

    let m = one(sig(&[], &[F64]), |b| {
        let x = b.f32const(0.5);
        let y = b.cast(F64, x);
        b.ret(&[y]);
    });
    check_err(
        &m,
        "constant 0.5 of type f32 cannot be written as a literal here (it would read as f64)",
    );

    let m = one(sig(&[BOOL], &[F32]), |b| {
        let c = b.param(0);
        let x = b.f32const(0.5);
        let y = b.f32const(1.0);
        let z = b.select(c, x, y);
        b.ret(&[z]);
    });
    check_err(
        &m,
        "constant 1.0 of type f32 cannot be written as a literal here",
    );

    let m = one(sig(&[], &[F32]), |b| {
        let x = b.f32const(0.5);
        let two = b.iconst(2);
        let z = b.powi(x, two);
        b.ret(&[z]);
    });
    check_err(
        &m,
        "constant 0.5 of type f32 cannot be written as a literal here",
    );
}

#[test]
fn a_float_constant_where_an_integer_is_expected_is_a_type_error() {
    let m = one(sig(&[I64], &[I64]), |b| {
        let n = b.param(0);
        let h = b.fconst(1.5);
        b.iadd(n, h);
        b.ret(&[n]);
    });
    let errs = check_err(&m, "operand 2 of iadd must be i64, found f64");
    assert_eq!(errs.len(), 1);
}

// Reporting.

#[test]
fn errors_carry_the_source_position_of_their_entity() {
    let mut m = one(sig(&[F64, I64, BOOL], &[F64]), |b| {
        let (x, n, _) = (b.param(0), b.param(1), b.param(2));
        let entry = b.current_block();
        let j = b.create_block("j");
        let y = b.fadd(x, n);
        b.jump(j);
        b.switch_to(j);
        let p = b.phi(F64, &[(entry, n)]);
        b.ret(&[y, p]);
        let other = b.create_block("nt");
        let _ = other;
    });
    let id = m.func_by_name("f").unwrap();
    let f = m.function_mut(id).unwrap();
    let (entry, j, nt) = (f.layout[0], block(f, "j"), block(f, "nt"));
    let i = f.blocks[entry].insts[0];
    let p = f.blocks[j].phis[0].value;
    f.srcmap.func = Pos::new(1, 1);
    f.srcmap.insts[i] = Pos::new(3, 5);
    f.srcmap.values[p] = Pos::new(6, 5);
    f.srcmap.terms[j] = Pos::new(7, 5);
    f.srcmap.blocks[nt] = Pos::new(8, 1);
    let p2 = f.params[2];
    f.values[p2].ty = I64;
    f.srcmap.values[p2] = Pos::new(1, 30);
    let errs = errors(&m);
    let got: Vec<(Pos, &str)> = errs.iter().map(|e| (e.pos, e.message.as_str())).collect();
    let expect = [
        (Pos::new(1, 30), "has type i64, but the signature says bool"),
        (Pos::new(3, 5), "operand 2 of fadd must be f64, found i64"),
        (Pos::new(6, 5), "has type i64, but phi"),
        (Pos::new(7, 5), "ret returns 2 values, but @f has 1 result"),
        (Pos::new(8, 1), "block nt has no terminator"),
    ];
    assert_eq!(got.len(), expect.len(), "{got:#?}");
    for ((pos, msg), (epos, efrag)) in got.iter().zip(expect) {
        assert_eq!(*pos, epos, "{msg}");
        assert!(msg.contains(efrag), "`{msg}` lacks `{efrag}`");
    }
    assert!(errs.iter().all(|e| e.func.as_deref() == Some("f")));

    // Without a source map, positions are unknown and the function's errors use its
    // declaration's position.
    let mut m = Module::new();
    m.add(
        "g",
        sig(&[], &[]),
        Body::Defined(Function::new(&sig(&[], &[]))),
        Pos::new(4, 1),
    )
    .unwrap();
    let errs = check_err(&m, "no blocks");
    assert_eq!(errs[0].pos, Pos::new(4, 1));
}

#[test]
fn errors_come_in_module_then_layout_order() {
    let mut m = Module::new();
    let g = m.declare("g", sig(&[I64], &[F64])).unwrap();
    let undefined = m.declare("undefined", sig(&[], &[])).unwrap();
    let f = m.declare("f", sig(&[I64], &[F64])).unwrap();
    for id in [g, f] {
        define(&mut m, id, |b| {
            let n = b.param(0);
            let next = b.create_block("next");
            let bad = b.fneg(n);
            b.jump(next);
            b.switch_to(next);
            let worse = b.not(n);
            let _ = worse;
            b.ret(&[bad]);
        });
    }
    m.add_decl(Decl::Nodiff { func: undefined }, Pos::NONE);
    m.add_decl(Decl::Nodiff { func: undefined }, Pos::NONE);
    let errs = errors(&m);
    let got: Vec<(Option<&str>, &str)> = errs
        .iter()
        .map(|e| (e.func.as_deref(), e.message.as_str()))
        .collect();
    let expect = [
        (Some("g"), "fneg takes a float, found i64"),
        (Some("g"), "operand 1 of not must be bool, found i64"),
        (Some("undefined"), "declared but never defined"),
        (Some("f"), "fneg takes a float, found i64"),
        (Some("f"), "operand 1 of not must be bool, found i64"),
        (None, "already has a nodiff declaration"),
    ];
    assert_eq!(got.len(), expect.len(), "{got:#?}");
    for ((func, msg), (efunc, efrag)) in got.iter().zip(expect) {
        assert_eq!(*func, efunc, "{msg}");
        assert!(msg.contains(efrag), "`{msg}` lacks `{efrag}`");
    }
    // Deterministic: the same module gives the same errors.
    assert_eq!(errors(&m), errs);
    // One function at a time.
    assert_eq!(verify_function(&m, f).len(), 2);
    assert!(
        verify_function(&m, FuncId::new(99))[0]
            .message
            .contains("fn99")
    );
}

#[test]
fn display_names_the_function_and_the_message() {
    let mut m = Module::new();
    m.declare("later", sig(&[], &[])).unwrap();
    let text = verify(&m).unwrap_err().to_string();
    assert!(text.starts_with("in @later, "), "{text}");
    assert!(
        text.contains("function @later is declared but never defined"),
        "{text}"
    );
}

// Size.

#[test]
fn long_functions_verify_without_deep_recursion() {
    // A chain of 20,000 blocks, each using the previous block's value, and a loop
    // nest 300 deep.
    let n = 20_000;
    check_ok(&one(sig(&[F64], &[F64]), |b| {
        let mut v = b.param(0);
        for i in 0..n {
            let next = b.create_block(&format!("b{i}"));
            v = b.fneg(v);
            b.jump(next);
            b.switch_to(next);
        }
        b.ret(&[v]);
    }));
    let m = one(sig(&[F64, I64], &[F64]), |b| {
        let (x, n) = (b.param(0), b.param(1));
        let zero = b.iconst(0);
        fn nest(b: &mut FunctionBuilder, depth: usize, zero: Value, n: Value, acc: Value) -> Value {
            if depth == 0 {
                return b.fadd(acc, acc);
            }
            b.counted_loop(zero, n, &[acc], |b, _, acc| {
                vec![nest(b, depth - 1, zero, n, acc[0])]
            })[0]
        }
        let r = nest(b, 300, zero, n, x);
        b.ret(&[r]);
    });
    check_ok(&m);
}

// Garbage in, errors out, never a panic.

/// A raw ID: usually near the arena's size, sometimes far beyond it.
fn raw_id(n: usize) -> impl Strategy<Value = u32> {
    prop_oneof![
        8 => 0..(n as u32 + 2),
        1 => 1_000u32..u32::MAX - 1,
    ]
}

fn any_type() -> impl Strategy<Value = Type> {
    prop_oneof![
        Just(F64),
        Just(F32),
        Just(I64),
        Just(BOOL),
        Just(SF64),
        Just(MF64),
        Just(Type::slice(Elem::I64)),
        Just(Type::slice_mut(Elem::F32)),
    ]
}

fn any_scalar() -> impl Strategy<Value = Scalar> {
    prop_oneof![
        any::<f64>().prop_map(Scalar::F64),
        any::<f32>().prop_map(Scalar::F32),
        any::<i64>().prop_map(Scalar::I64),
        any::<bool>().prop_map(Scalar::Bool),
    ]
}

fn any_imm(nf: usize) -> impl Strategy<Value = Imm> {
    prop_oneof![
        Just(Imm::None),
        (0..6usize).prop_map(|i| Imm::Cmp(CmpPred::ALL[i])),
        any_type().prop_map(Imm::Type),
        any_scalar().prop_map(Imm::Const),
        raw_id(nf).prop_map(|f| Imm::Func(FuncId::from_u32(f))),
        raw_id(NM).prop_map(|m| Imm::Msg(Msg::from_u32(m))),
    ]
}

/// The arena sizes of a garbage function.
const NV: usize = 10;
const NI: usize = 8;
const NB: usize = 5;
const NF: usize = 3;
const NM: usize = 2;

fn any_def() -> impl Strategy<Value = ValueDef> {
    prop_oneof![
        raw_id(3).prop_map(ValueDef::Param),
        raw_id(NB).prop_map(|b| ValueDef::Phi(Block::from_u32(b))),
        (raw_id(NI), 0..3u32).prop_map(|(i, k)| ValueDef::Result(Inst::from_u32(i), k)),
        any_scalar().prop_map(ValueDef::Const),
    ]
}

fn value() -> impl Strategy<Value = Value> {
    raw_id(NV).prop_map(Value::from_u32)
}

fn blk() -> impl Strategy<Value = Block> {
    raw_id(NB).prop_map(Block::from_u32)
}

fn any_term() -> impl Strategy<Value = Option<Terminator>> {
    prop_oneof![
        1 => Just(None),
        3 => blk().prop_map(|b| Some(Terminator::Jump(b))),
        3 => (value(), blk(), blk()).prop_map(|(cond, t, e)| Some(Terminator::Br {
            cond,
            then_dest: t,
            else_dest: e
        })),
        3 => proptest::collection::vec(value(), 0..3)
            .prop_map(|vs| Some(Terminator::Ret(vs.into_iter().collect()))),
    ]
}

prop_compose! {
    fn garbage_function()(
        values in proptest::collection::vec(
            (any_type(), any_def(), proptest::option::of("[a-c]")), 0..NV),
        insts in proptest::collection::vec(
            (0..Opcode::ALL.len(), any_imm(NF),
             proptest::collection::vec(value(), 0..4),
             proptest::collection::vec(value(), 0..3)), 0..NI),
        blocks in proptest::collection::vec(
            (proptest::collection::vec(
                (value(), proptest::collection::vec((blk(), value()), 0..4)), 0..3),
             proptest::collection::vec(raw_id(NI).prop_map(Inst::from_u32), 0..5),
             any_term()), 0..NB),
        layout in proptest::collection::vec(blk(), 0..NB + 2),
        params in proptest::collection::vec(value(), 0..3),
        positions in proptest::collection::vec((value(), 1..50u32), 0..4),
        messages in proptest::collection::vec(
            proptest::sample::select(&["", "x \"y\"\n", "\u{0}é"][..]), 0..NM + 1),
    ) -> Function {
        let mut f = Function::default();
        for text in messages {
            f.messages.push(text.to_string());
        }
        for (ty, def, name) in values {
            f.values.push(ValueData { ty, def, name: name.map(Into::into) });
        }
        for (op, imm, args, results) in insts {
            f.insts.push(InstData {
                opcode: Opcode::ALL[op],
                imm,
                args: args.into_iter().collect(),
                results: results.into_iter().collect(),
                checkpoint: false,
            });
        }
        for (i, (phis, insts, term)) in blocks.into_iter().enumerate() {
            let name = format!("b{i}");
            f.blocks.push(BlockData {
                name: (i % 2 == 0).then(|| name.into()),
                phis: phis
                    .into_iter()
                    .map(|(value, incoming)| Phi { value, incoming: incoming.into_iter().collect() })
                    .collect(),
                insts,
                term,
            });
        }
        f.layout = layout;
        f.params = params;
        for (v, line) in positions {
            if f.values.is_valid(v) {
                f.srcmap.values[v] = Pos::new(line, 1);
            }
        }
        f
    }
}

fn any_sig() -> impl Strategy<Value = Signature> {
    (
        proptest::collection::vec(any_type(), 0..3),
        proptest::collection::vec(any_type(), 0..3),
    )
        .prop_map(|(p, r)| Signature::new(p, r))
}

fn any_decl() -> impl Strategy<Value = Decl> {
    let id = || raw_id(NF).prop_map(FuncId::from_u32);
    prop_oneof![
        (id(), id()).prop_map(|(func, with)| Decl::Overlay { func, with }),
        (id(), id()).prop_map(|(func, rule)| Decl::Vjp { func, rule }),
        (id(), id()).prop_map(|(func, rule)| Decl::Jvp { func, rule }),
        id().prop_map(|func| Decl::Nodiff { func }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn garbage_never_panics(
        funcs in proptest::collection::vec(
            (any_sig(), prop_oneof![
                3 => garbage_function().prop_map(Body::Defined),
                1 => Just(Body::Extern),
                1 => Just(Body::Declared),
            ]), 1..NF + 1),
        decls in proptest::collection::vec(any_decl(), 0..3),
    ) {
        let mut m = Module::new();
        for (i, (sig, body)) in funcs.into_iter().enumerate() {
            m.add(&format!("f{i}"), sig, body, Pos::NONE).unwrap();
        }
        for d in decls {
            m.add_decl(d, Pos::NONE);
        }
        if let Err(errs) = verify(&m) {
            prop_assert!(!errs.0.is_empty());
            for e in &errs.0 {
                prop_assert!(!e.message.is_empty());
                prop_assert!(!e.message.ends_with('.'));
            }
            let _ = errs.to_string();
        }
    }
}

// Dominance against an independent oracle.

/// Dominator sets by the data-flow equations, over `succs`; `None` for unreachable.
fn naive_dominators(succs: &[Vec<usize>]) -> Vec<Option<Vec<bool>>> {
    let n = succs.len();
    let mut reach = vec![false; n];
    let mut stack = vec![0];
    reach[0] = true;
    while let Some(b) = stack.pop() {
        for &s in &succs[b] {
            if !reach[s] {
                reach[s] = true;
                stack.push(s);
            }
        }
    }
    let mut preds = vec![Vec::new(); n];
    for (b, ss) in succs.iter().enumerate() {
        for &s in ss {
            if !preds[s].contains(&b) {
                preds[s].push(b);
            }
        }
    }
    let mut dom: Vec<Vec<bool>> = vec![vec![true; n]; n];
    dom[0] = (0..n).map(|i| i == 0).collect();
    let mut changed = true;
    while changed {
        changed = false;
        for b in 1..n {
            if !reach[b] {
                continue;
            }
            let mut new = vec![true; n];
            for &p in preds[b].iter().filter(|&&p| reach[p]) {
                for i in 0..n {
                    new[i] &= dom[p][i];
                }
            }
            new[b] = true;
            if new != dom[b] {
                dom[b] = new;
                changed = true;
            }
        }
    }
    (0..n).map(|b| reach[b].then(|| dom[b].clone())).collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// In a random control-flow graph where block `i` defines `%v{i}` first thing,
    /// a use of `%v{d}` at the end of block `u` verifies exactly when `d`
    /// dominates `u` (or `u` is unreachable).
    #[test]
    fn a_use_verifies_exactly_when_dominated(
        n in 1usize..9,
        raw in proptest::collection::vec(proptest::collection::vec(0usize..9, 0..3), 9),
        d in 0usize..9,
        u in 0usize..9,
    ) {
        let (d, u) = (d % n, u % n);
        let succs: Vec<Vec<usize>> = raw[..n]
            .iter()
            .map(|ss| ss.iter().map(|s| s % n).filter(|&s| s != 0).collect())
            .collect();
        let m = one(sig(&[F64, BOOL], &[]), |b| {
            let (x, c) = (b.param(0), b.param(1));
            let mut blocks = vec![b.current_block()];
            for i in 1..n {
                blocks.push(b.create_block(&format!("b{i}")));
            }
            let mut defs = Vec::new();
            for &blk in &blocks {
                b.switch_to(blk);
                defs.push(b.fneg(x));
            }
            for (i, &blk) in blocks.iter().enumerate() {
                b.switch_to(blk);
                if i == u {
                    b.fadd(defs[d], x);
                }
                match succs[i][..] {
                    [] => b.ret(&[]),
                    [s] => b.jump(blocks[s]),
                    [t, e, ..] => b.br(c, blocks[t], blocks[e]),
                }
            }
        });
        let dom = naive_dominators(&succs);
        let expected_ok = match &dom[u] {
            None => true,
            Some(set) => set[d],
        };
        let errs = errors(&m);
        prop_assert_eq!(errs.is_empty(), expected_ok, "{:?}", errs);
        if !expected_ok {
            prop_assert_eq!(errs.len(), 1);
            prop_assert!(errs[0].message.contains("is not dominated by its definition"));
        }
    }
}

// Well-formed functions, broken a little: deeper checks than pure garbage reaches.

/// A module whose `@f` has loops, a diamond, phis, calls, an alloc and stores.
fn rich_module() -> Module {
    let mut m = Module::new();
    let g = m.declare("g", sig(&[MF64, F64], &[SF64, F64])).unwrap();
    let f = m.declare("f", sig(&[SF64, I64, BOOL], &[F64])).unwrap();
    define(&mut m, g, |b| {
        let (s, x) = (b.param(0), b.param(1));
        b.ret(&[s, x]);
    });
    define(&mut m, f, |b| {
        let (x, n, c) = (b.param(0), b.param(1), b.param(2));
        let zero = b.iconst(0);
        let negative = b.icmp(CmpPred::Lt, n, zero);
        b.trap_if(negative, "n < 0");
        let buf = b.alloc(Elem::F64, n);
        let acc0 = b.fconst(0.0);
        let acc = b.counted_loop(zero, n, &[acc0], |b, i, acc| {
            let xi = b.load(x, i);
            b.store(buf, i, xi);
            let inner = b.counted_loop(zero, i, &[acc[0]], |b, j, acc| {
                let xj = b.load(x, j);
                vec![b.fadd(acc[0], xj)]
            });
            vec![inner[0]]
        });
        let p = diamond(
            b,
            c,
            |b| {
                let r = b.call(g, &[buf, acc[0]]);
                r[1]
            },
            |b| b.fneg(acc[0]),
            F64,
        );
        let two = b.iconst(2);
        let q = b.powi(p, two);
        b.ret(&[q]);
    });
    m
}

fn mutate(func: &mut Function, (kind, a, b, c): (u8, u32, u32, u32)) {
    let nv = func.values.len() as u32 + 2;
    let nb = func.blocks.len() as u32 + 1;
    let ni = func.insts.len() as u32 + 1;
    let value = |x: u32| Value::from_u32(x % nv);
    let blk = |x: u32| Block::from_u32(x % nb);
    let types = [F64, F32, I64, BOOL, SF64, MF64];
    let inst = Inst::from_u32(a % ni);
    match kind % 13 {
        0 => {
            if let Some(d) = func.insts.get_mut(inst)
                && !d.args.is_empty()
            {
                let k = b as usize % d.args.len();
                d.args[k] = value(c);
            }
        }
        1 => {
            if let Some(d) = func.insts.get_mut(inst)
                && !d.results.is_empty()
            {
                let k = b as usize % d.results.len();
                d.results[k] = value(c);
            }
        }
        2 => {
            if let Some(d) = func.insts.get_mut(inst) {
                d.opcode = Opcode::ALL[b as usize % Opcode::ALL.len()];
            }
        }
        3 => {
            if let Some(d) = func.insts.get_mut(inst) {
                d.imm = match b % 6 {
                    0 => Imm::None,
                    1 => Imm::Cmp(CmpPred::ALL[c as usize % 6]),
                    2 => Imm::Type(types[c as usize % types.len()]),
                    3 => Imm::Const(Scalar::F32(c as f32)),
                    4 => Imm::Msg(Msg::from_u32(c % 3)),
                    _ => Imm::Func(FuncId::from_u32(c % 3)),
                };
            }
        }
        4 => {
            // Move an instruction to another block (or the same one), anywhere.
            let (from, to) = (blk(a), blk(b));
            let taken = func.blocks.get_mut(from).and_then(|d| {
                (!d.insts.is_empty()).then(|| d.insts.remove(c as usize % d.insts.len()))
            });
            if let (Some(i), Some(d)) = (taken, func.blocks.get_mut(to)) {
                let at = c as usize % (d.insts.len() + 1);
                d.insts.insert(at, i);
            }
        }
        5 => {
            if let Some(d) = func.blocks.get_mut(blk(a)) {
                d.term = None;
            }
        }
        6 => {
            if let Some(d) = func.blocks.get_mut(blk(a)) {
                d.term = Some(match c % 3 {
                    0 => Terminator::Jump(blk(b)),
                    1 => Terminator::Br {
                        cond: value(c),
                        then_dest: blk(b),
                        else_dest: blk(c),
                    },
                    _ => Terminator::Ret(smallvec![value(b)]),
                });
            }
        }
        7 => {
            if let Some(d) = func.blocks.get_mut(blk(a))
                && let Some(phi) = d.phis.first_mut()
            {
                match c % 3 {
                    0 => phi.incoming.push((blk(b), value(c))),
                    1 if !phi.incoming.is_empty() => {
                        phi.incoming.remove(b as usize % phi.incoming.len());
                    }
                    _ if !phi.incoming.is_empty() => {
                        let k = b as usize % phi.incoming.len();
                        phi.incoming[k].1 = value(c);
                    }
                    _ => {}
                }
            }
        }
        8 => {
            if let Some(d) = func.values.get_mut(value(a)) {
                d.ty = types[b as usize % types.len()];
            }
        }
        9 => {
            if let Some(d) = func.values.get_mut(value(a)) {
                d.def = match b % 4 {
                    0 => ValueDef::Param(c % 4),
                    1 => ValueDef::Phi(blk(c)),
                    2 => ValueDef::Result(Inst::from_u32(c % ni), c % 2),
                    _ => ValueDef::Const(Scalar::I64(c as i64)),
                };
            }
        }
        10 => {
            let n = func.layout.len();
            match b % 3 {
                0 if n > 1 => func.layout.swap(a as usize % n, c as usize % n),
                1 if n > 0 => {
                    func.layout.remove(a as usize % n);
                }
                _ => func.layout.push(blk(c)),
            }
        }
        11 => {
            let t = types[b as usize % types.len()];
            let v = func.values.push(ValueData {
                ty: t,
                def: ValueDef::Phi(blk(a)),
                name: None,
            });
            if let Some(d) = func.blocks.get_mut(blk(a)) {
                d.phis.push(Phi {
                    value: v,
                    incoming: smallvec![(blk(c), value(c))],
                });
            }
        }
        _ => {
            let n = func.params.len();
            if n > 0 {
                func.params[a as usize % n] = value(b);
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn broken_functions_never_panic(
        mutations in proptest::collection::vec(
            (any::<u8>(), any::<u32>(), any::<u32>(), any::<u32>()), 1..4),
    ) {
        let mut m = rich_module();
        check_ok(&m);
        let id = m.func_by_name("f").unwrap();
        let func = m.function_mut(id).unwrap();
        for mutation in mutations {
            mutate(func, mutation);
        }
        if let Err(errs) = verify(&m) {
            for e in &errs.0 {
                prop_assert!(!e.message.is_empty() && !e.message.ends_with('.'));
                prop_assert_eq!(e.func.as_deref(), Some("f"));
            }
        }
    }
}

/// The verifier's literal rule is the parser's: whatever parses from literals
/// verifies, including `select` of two integer literals (typed `i64` by the parser,
/// although `ops::resolve` alone would default the arms to `f64`).
#[test]
fn literals_typed_by_the_parser_verify() {
    let text = "func @f(%c: bool, %x: f32) -> (i64, f32, f64) {\nentry:\n    %a = select %c, 1, 2\n    %b = fmul %x, 2\n    %d = cast f64 3\n    ret %a, %b, %d\n}\n";
    let module = gradlift_ir::parse(text).unwrap();
    gradlift_ir::verify(&module).unwrap();
}

/// A phi with no edges (in a block nothing jumps to) cannot be written in the text
/// format, so it does not verify: whatever verifies must print and parse back.
#[test]
fn a_phi_without_edges_is_rejected() {
    let mut module = Module::new();
    let id = module
        .declare("f", Signature::new([Type::F64], [Type::F64]))
        .unwrap();
    let mut b = FunctionBuilder::new(&module, id);
    let x = b.param(0);
    b.ret(&[x]);
    let dead = b.create_block("dead");
    b.switch_to(dead);
    let p = b.phi(Type::F64, &[]);
    b.ret(&[p]);
    let func = b.finish().unwrap();
    module.define(id, func).unwrap();
    let errs = verify(&module).unwrap_err().0;
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert!(
        errs[0].message.contains("has no incoming values"),
        "{}",
        errs[0]
    );
    // And the text it would print indeed does not parse.
    assert!(gradlift_ir::parse(&module.to_string()).is_err());
}
