//! Forward mode (`build_frule`) against independent oracles: closed forms, the
//! dot-product test against reverse mode (`<J v, w> = <v, Jᵀ w>`) on every function
//! of both reverse-mode corpora, and width N against N width-1 sweeps, bit for bit.

use gradlift_adjoint::{
    AdError, DualActivity, DualRet, Frule, FruleConfig, RuleConfig, Seeds, build_frule,
    build_rrule, value_and_gradient,
};
use gradlift_ir::interp::{Interpreter, Val};
use gradlift_ir::{Module, parse, verify};

#[path = "corpus/inputs.rs"]
mod inputs;
mod support;

use support::Rng;

const SCALARS: &str = include_str!("corpus/scalars.ir");
const MEMORY: &str = include_str!("corpus/memory.ir");

fn module(text: &str) -> Module {
    let m = parse(text).unwrap_or_else(|e| panic!("{e}"));
    verify(&m).unwrap_or_else(|e| panic!("{e}"));
    m
}

/// The outputs of a forward rule: primal results, tangent results (N per float
/// result, lane 0 first), and per parameter the tangent slice after the call.
struct Jvp {
    value: Vec<Val>,
    tangents: Vec<Val>,
    slices: Vec<Option<Val>>,
}

/// Runs `rule` on the interpreter at `args`, with `tangents[i]` the tangent of
/// parameter i (for a `dual` scalar: a slice of N lanes as `F64s`/`F32s`; for a
/// `dual` slice: the interleaved tangent slice).
fn run(rule: &Frule, args: &[Val], tangents: &[Option<Val>]) -> Jvp {
    let mut call_args = Vec::new();
    let mut slot_of = Vec::new();
    for &(i, lane) in &rule.layout.params {
        match lane {
            None => call_args.push(args[i].clone()),
            Some(j) => {
                let t = tangents[i]
                    .as_ref()
                    .expect("a tangent for a dual parameter");
                if args[i].slice_len().is_some() {
                    slot_of.push((i, call_args.len()));
                    call_args.push(t.clone());
                } else {
                    call_args.push(match t {
                        Val::F64s(v) => Val::F64(v[j as usize]),
                        Val::F32s(v) => Val::F32(v[j as usize]),
                        other => panic!("lanes of a scalar tangent: {other:?}"),
                    });
                }
            }
        }
    }
    let mut it = Interpreter::new(&rule.module);
    let out = it
        .call(rule.func, &mut call_args)
        .unwrap_or_else(|e| panic!("{e}"));
    let n_primal = if rule.layout.primal_results {
        rule.module.sig(rule.layout.primal).results.len()
    } else {
        0
    };
    let mut slices = vec![None; args.len()];
    for (i, k) in slot_of {
        slices[i] = Some(call_args[k].clone());
    }
    Jvp {
        value: out[..n_primal].to_vec(),
        tangents: out[n_primal..].to_vec(),
        slices,
    }
}

fn num(v: &Val) -> f64 {
    match v {
        Val::F64(x) => *x,
        Val::F32(x) => f64::from(*x),
        other => panic!("not a float: {other:?}"),
    }
}

fn elems(v: &Val) -> Vec<f64> {
    match v {
        Val::F64s(x) => x.clone(),
        Val::F32s(x) => x.iter().map(|&y| f64::from(y)).collect(),
        other => panic!("not a float slice: {other:?}"),
    }
}

/// A random value shaped like `v` (float scalars and float slices; `n` lanes per
/// element), of `v`'s float type.
fn random_like(rng: &mut Rng, v: &Val, n: usize) -> Val {
    let mut r = || 2.0 * rng.unit() - 1.0;
    match v {
        Val::F64(_) => Val::F64s((0..n).map(|_| r()).collect()),
        Val::F32(_) => Val::F32s((0..n).map(|_| r() as f32).collect()),
        Val::F64s(x) => Val::F64s((0..x.len() * n).map(|_| r()).collect()),
        Val::F32s(x) => Val::F32s((0..x.len() * n).map(|_| r() as f32).collect()),
        other => panic!("no tangent for {other:?}"),
    }
}

#[test]
fn a_polynomial_has_its_closed_form_directional_derivative() {
    let m = module(
        "func @f(%x: f64, %y: f64) -> f64 {
        entry:
            %xx = fmul %x, %x
            %y3 = fmul 3.0, %y
            %r = fadd %xx, %y3
            ret %r
        }",
    );
    let f = m.func_by_name("f").unwrap();
    let rule = build_frule(&m, f, &FruleConfig::default_for(m.sig(f))).unwrap();
    assert_eq!(rule.module.name(rule.func), "f.jvp");
    let mut it = Interpreter::new(&rule.module);
    // d/dt f(2 + t a, 1 + t b) = 4 a + 3 b.
    for (a, b) in [(1.0, 0.0), (0.0, 1.0), (0.5, -2.0)] {
        let out = it
            .call(
                rule.func,
                &mut [Val::F64(2.0), Val::F64(a), Val::F64(1.0), Val::F64(b)],
            )
            .unwrap();
        assert_eq!(out, [Val::F64(7.0), Val::F64(4.0 * a + 3.0 * b)]);
    }
    // The derived function prints, parses back and verifies.
    let text = rule.module.to_string();
    let back = parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    verify(&back).unwrap();
    assert_eq!(back.to_string(), text);
}

#[test]
fn a_loop_over_a_slice_writes_the_tangent_of_its_output_slice() {
    // y[i] = x[i]^2 * s for every i, r = sum y: ẏ[i] = 2 x[i] ẋ[i] s + x[i]^2 ṡ.
    let m = module(
        "func @f(%x: [f64], %y: mut [f64], %s: f64) -> f64 {
        entry:
            %n = len %x
            jump head
        head:
            %i = phi i64 [entry: 0, body: %i1]
            %acc = phi f64 [entry: 0.0, body: %acc1]
            %more = icmp lt %i, %n
            br %more, body, exit
        body:
            %v = load %x[%i]
            %vv = fmul %v, %v
            %w = fmul %vv, %s
            store %y[%i], %w
            %acc1 = fadd %acc, %w
            %i1 = iadd %i, 1
            jump head
        exit:
            ret %acc
        }",
    );
    let f = m.func_by_name("f").unwrap();
    for width in [1u32, 3] {
        let config = FruleConfig::default_for(m.sig(f)).with_width(width);
        let rule = build_frule(&m, f, &config).unwrap();
        let n = width as usize;
        let x = [0.5, -1.5, 2.0];
        let dx: Vec<f64> = (0..3 * n).map(|k| 0.25 * k as f64 - 1.0).collect();
        let ds: Vec<f64> = (0..n).map(|j| 1.0 + j as f64).collect();
        let args = [
            Val::F64s(x.to_vec()),
            Val::F64s(vec![9.0; 3]),
            Val::F64(3.0),
        ];
        let out = run(
            &rule,
            &args,
            &[
                Some(Val::F64s(dx.clone())),
                Some(Val::F64s(vec![7.0; 3 * n])),
                Some(Val::F64s(ds.clone())),
            ],
        );
        let dy = elems(out.slices[1].as_ref().unwrap());
        for j in 0..n {
            let mut dr = 0.0;
            for i in 0..3 {
                let want = 2.0 * x[i] * dx[i * n + j] * 3.0 + x[i] * x[i] * ds[j];
                assert!((dy[i * n + j] - want).abs() < 1e-12, "lane {j} element {i}");
                dr += want;
            }
            assert!((num(&out.tangents[j]) - dr).abs() < 1e-12, "lane {j}");
        }
    }
}

/// The dot-product test of one function at one point: forward mode's `<J v, w>`
/// against reverse mode's `<v, Jᵀ w>`, for random `v` (the `dual` scalars and
/// slices) and `w` (the float results and the slices' final contents).
fn dot_test(m: &Module, name: &str, args: &[Val], rng: &mut Rng) -> Result<(), String> {
    let f = m.func_by_name(name).unwrap();
    let sig = m.sig(f).clone();
    let fconfig = FruleConfig::default_for(&sig);
    let rconfig = RuleConfig::default_for(&sig);
    let frule = build_frule(m, f, &fconfig).map_err(|e| format!("forward: {e}"))?;
    let rrule = build_rrule(m, f, &rconfig).map_err(|e| format!("reverse: {e}"))?;
    let dual: Vec<bool> = fconfig
        .params
        .iter()
        .map(|&a| a == DualActivity::Dual)
        .collect();
    let v: Vec<Option<Val>> = args
        .iter()
        .zip(&dual)
        .map(|(a, &d)| d.then(|| random_like(rng, a, 1)))
        .collect();
    let fw = run(&frule, args, &v);
    // w: one cotangent per float result, one slice per dual slice.
    let w_results: Vec<f64> = sig
        .results
        .iter()
        .filter(|t| t.is_float())
        .map(|_| 2.0 * rng.unit() - 1.0)
        .collect();
    let w_slices: Vec<Option<Val>> = args
        .iter()
        .zip(&dual)
        .map(|(a, &d)| (d && a.slice_len().is_some()).then(|| random_like(rng, a, 1)))
        .collect();
    let mut lhs = 0.0;
    let mut scale = 0.0;
    for (k, t) in fw.tangents.iter().enumerate() {
        lhs += w_results[k] * num(t);
        scale += (w_results[k] * num(t)).abs();
    }
    for (i, w) in w_slices.iter().enumerate() {
        if let Some(w) = w {
            let (w, t) = (elems(w), elems(fw.slices[i].as_ref().unwrap()));
            for (a, b) in w.iter().zip(&t) {
                lhs += a * b;
                scale += (a * b).abs();
            }
        }
    }
    let seeds = Seeds::results(w_results.clone()).with_shadows(w_slices.clone());
    let mut it = Interpreter::new(&rrule.module);
    let g = value_and_gradient(&mut it, &rrule, args, &seeds).map_err(|e| format!("{e}"))?;
    let mut rhs = 0.0;
    for (i, vi) in v.iter().enumerate() {
        let Some(vi) = vi else { continue };
        let gi = g.gradient[i].as_ref().ok_or("no gradient")?;
        if args[i].slice_len().is_some() {
            for (a, b) in elems(vi).iter().zip(&elems(gi)) {
                rhs += a * b;
                scale += (a * b).abs();
            }
        } else {
            rhs += elems(vi)[0] * num(gi);
            scale += (elems(vi)[0] * num(gi)).abs();
        }
    }
    // The primal values agree too.
    if let Some(value) = &g.value
        && value != &fw.value
    {
        return Err(format!("values {:?} and {:?}", fw.value, value));
    }
    let f32 = sig.params.iter().chain(&sig.results).any(|t| {
        matches!(
            t.elem().map(|e| e.ty()).unwrap_or(*t),
            gradlift_ir::Type::F32
        )
    });
    let tol = if f32 { 1e-5 } else { 1e-11 } * scale.max(1e-300) + 1e-300;
    if (lhs - rhs).abs() > tol || !lhs.is_finite() {
        return Err(format!(
            "<J v, w> = {lhs:e} but <v, Jᵀ w> = {rhs:e} (tolerance {tol:e})"
        ));
    }
    Ok(())
}

/// Runs the dot-product test on every function of a corpus at every point. A
/// function forward mode refuses must be refused by reverse mode too, or have a
/// `vjp` declaration without a `jvp` (named in the error).
fn dot_test_corpus(m: &Module, cases: Vec<(&'static str, Vec<Vec<Val>>)>) -> (usize, usize) {
    let mut rng = Rng(0x5eed);
    let (mut tested, mut refused) = (0, 0);
    for (name, points) in cases {
        let Some(f) = m.func_by_name(name) else {
            continue;
        };
        let fconfig = FruleConfig::default_for(m.sig(f));
        match build_frule(m, f, &fconfig) {
            Err(e @ AdError::Unsupported { .. }) if e.to_string().contains("`jvp @") => {
                refused += 1;
                continue;
            }
            Err(e) => {
                let r = build_rrule(m, f, &RuleConfig::default_for(m.sig(f)));
                assert!(
                    r.is_err(),
                    "@{name}: forward mode refuses ({e}), reverse does not"
                );
                refused += 1;
                continue;
            }
            Ok(_) => {}
        }
        for args in &points {
            if let Err(e) = dot_test(m, name, args, &mut rng) {
                panic!("@{name} at {args:?}: {e}");
            }
        }
        tested += 1;
    }
    (tested, refused)
}

#[test]
fn the_dot_product_test_holds_on_the_scalar_corpus() {
    let (tested, refused) = dot_test_corpus(&module(SCALARS), inputs::scalar_inputs());
    assert!(tested >= 55, "{tested} tested, {refused} refused");
}

#[test]
fn the_dot_product_test_holds_on_the_memory_corpus() {
    let (tested, refused) = dot_test_corpus(&module(MEMORY), inputs::memory_inputs());
    assert!(tested >= 30, "{tested} tested, {refused} refused");
}

/// Width N against N width-1 sweeps with the same tangents, bit for bit.
fn width_test(m: &Module, name: &str, args: &[Val], width: u32, rng: &mut Rng) {
    let f = m.func_by_name(name).unwrap();
    let config = FruleConfig::default_for(m.sig(f));
    let Ok(one) = build_frule(m, f, &config) else {
        return;
    };
    let wide = build_frule(m, f, &config.clone().with_width(width))
        .unwrap_or_else(|e| panic!("@{name} width {width}: {e}"));
    let n = width as usize;
    let tangents: Vec<Option<Val>> = args
        .iter()
        .zip(&config.params)
        .map(|(a, &d)| (d == DualActivity::Dual).then(|| random_like(rng, a, n)))
        .collect();
    let out = run(&wide, args, &tangents);
    let lane = |t: &Val, len: Option<usize>, j: usize| -> Val {
        match (t, len) {
            (Val::F64s(v), None) => Val::F64s(vec![v[j]]),
            (Val::F32s(v), None) => Val::F32s(vec![v[j]]),
            (Val::F64s(v), Some(l)) => Val::F64s((0..l).map(|i| v[i * n + j]).collect()),
            (Val::F32s(v), Some(l)) => Val::F32s((0..l).map(|i| v[i * n + j]).collect()),
            _ => unreachable!(),
        }
    };
    let n_float = out.tangents.len() / n;
    for j in 0..n {
        let t1: Vec<Option<Val>> = tangents
            .iter()
            .zip(args)
            .map(|(t, a)| t.as_ref().map(|t| lane(t, a.slice_len(), j)))
            .collect();
        let single = run(&one, args, &t1);
        assert_eq!(single.value, out.value, "@{name} lane {j}: values");
        for k in 0..n_float {
            let (a, b) = (&single.tangents[k], &out.tangents[k * n + j]);
            assert!(
                num(a).to_bits() == num(b).to_bits(),
                "@{name} width {width} lane {j} result {k}: {a:?} vs {b:?}"
            );
        }
        for (i, s) in single.slices.iter().enumerate() {
            if let Some(s) = s {
                let w = lane(out.slices[i].as_ref().unwrap(), args[i].slice_len(), j);
                let bits = |v: &Val| elems(v).iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                assert_eq!(
                    bits(s),
                    bits(&w),
                    "@{name} width {width} lane {j} slice {i}"
                );
            }
        }
    }
}

#[test]
fn width_n_is_bit_identical_to_n_width_one_sweeps_on_both_corpora() {
    let mut rng = Rng(42);
    for (text, cases) in [
        (SCALARS, inputs::scalar_inputs()),
        (MEMORY, inputs::memory_inputs()),
    ] {
        let m = module(text);
        for (name, points) in cases {
            if m.func_by_name(name).is_none() {
                continue;
            }
            for width in [2, 4, 8, 13] {
                width_test(&m, name, &points[0], width, &mut rng);
            }
        }
    }
}

#[test]
fn requests_that_do_not_fit_are_refused_with_what_and_where() {
    let m = module(
        "func @f(%x: f64, %n: i64) -> f64 {
        entry:
            ret %x
        }",
    );
    let f = m.func_by_name("f").unwrap();
    let mut c = FruleConfig::default_for(m.sig(f));
    c.params[1] = DualActivity::Dual;
    let e = build_frule(&m, f, &c).unwrap_err().to_string();
    assert_eq!(
        e,
        "parameter 2 (%n: i64) of @f cannot be `dual`: `dual` is for float scalars and float slices; integers, bools and integer slices are `const`"
    );
    let c = FruleConfig::default_for(m.sig(f)).with_width(0);
    let e = build_frule(&m, f, &c).unwrap_err().to_string();
    assert!(e.contains("a width of 0"), "{e}");
    let c = FruleConfig {
        params: vec![DualActivity::Dual],
        ret: DualRet::Dual,
        width: 1,
    };
    assert!(matches!(
        build_frule(&m, f, &c),
        Err(AdError::ActivityCount { .. })
    ));
}

#[test]
fn dualonly_returns_the_tangents_alone_and_const_the_values_alone() {
    let m = module(
        "func @f(%x: f64) -> (f64, i64) {
        entry:
            %s = sin %x
            ret %s, 7
        }",
    );
    let f = m.func_by_name("f").unwrap();
    let base = FruleConfig::default_for(m.sig(f));
    let mut it_args = [Val::F64(0.5), Val::F64(2.0)];
    let only = build_frule(&m, f, &base.clone().with_ret(DualRet::DualOnly)).unwrap();
    let out = Interpreter::new(&only.module)
        .call(only.func, &mut it_args)
        .unwrap();
    assert_eq!(out, [Val::F64(2.0 * 0.5f64.cos())]);
    let cst = build_frule(&m, f, &base.with_ret(DualRet::Const)).unwrap();
    let out = Interpreter::new(&cst.module)
        .call(cst.func, &mut it_args)
        .unwrap();
    assert_eq!(out, [Val::F64(0.5f64.sin()), Val::I64(7)]);
}

#[test]
fn a_callee_with_a_vjp_but_no_jvp_is_refused_naming_the_declaration_it_needs() {
    let text = "
        func @sq(%x: f64) -> f64 {
        entry:
            %r = fmul %x, %x
            ret %r
        }
        func @sq_vjp(%x: f64, %dy: f64) -> f64 {
        entry:
            %t = fmul 2.0, %x
            %r = fmul %t, %dy
            ret %r
        }
        vjp @sq = @sq_vjp
        extern @host(f64) -> f64
        func @f(%x: f64) -> f64 {
        entry:
            %y = call @sq(%x)
            ret %y
        }
        func @g(%x: f64) -> f64 {
        entry:
            %y = call @host(%x)
            ret %y
        }";
    // Derived lazily: the rule fails when the call runs, with the message.
    let m = module(text);
    let f = m.func_by_name("f").unwrap();
    let rule = build_frule(&m, f, &FruleConfig::default_for(m.sig(f))).unwrap();
    let e = Interpreter::new(&rule.module)
        .call(rule.func, &mut [Val::F64(3.0), Val::F64(0.5)])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("cannot differentiate @f yet: `%y = call @sq(%x)` at 17:13 needs the forward derivative of @sq, which has a `vjp` rule but no `jvp` rule: declare `jvp @sq = @RULE`"),
        "{e}"
    );
    let g = m.func_by_name("g").unwrap();
    let rule = build_frule(&m, g, &FruleConfig::default_for(m.sig(g))).unwrap();
    let e = Interpreter::new(&rule.module)
        .call(rule.func, &mut [Val::F64(3.0), Val::F64(0.5)])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("needs the forward derivative of @host, which has none"),
        "{e}"
    );
    assert!(e.contains("declare `jvp @host = @RULE`"), "{e}");
    // With a jvp rule beside the vjp, forward mode calls it.
    let m = module(&format!(
        "{text}
        func @sq_jvp(%x: f64, %dx: f64) -> f64 {{
        entry:
            %t = fmul 2.0, %x
            %r = fmul %t, %dx
            ret %r
        }}
        jvp @sq = @sq_jvp"
    ));
    let rule = build_frule(&m, f, &FruleConfig::default_for(m.sig(f))).unwrap();
    assert!(rule.module.to_string().contains("call @sq_jvp("));
    let out = Interpreter::new(&rule.module)
        .call(rule.func, &mut [Val::F64(3.0), Val::F64(0.5)])
        .unwrap();
    assert_eq!(out, [Val::F64(9.0), Val::F64(3.0)]);
}

/// A tangent known to be zero (here of `pow` with a constant zero base) is not
/// fed to the rules of its uses: `fadd` of two zero `f32` tangents was written
/// `fadd 0.0, 0.0`, two `f32` literals, which does not verify (found by the fuzz
/// campaign, seed 2026, program 6496). Its tangent is 0, as reverse mode's
/// gradient is, at widths 1 and 3.
#[test]
fn a_tangent_known_to_be_zero_feeds_no_rule() {
    let m = module(
        "func @z(%y: f32) -> f32 {
        entry:
            %c = const f32 -0.0
            %p = pow %c, %y
            %s = fadd %p, %p
            ret %s
        }",
    );
    // The optimiser folds `%c` into a literal, as the pipeline does before it
    // derives: the rule of `pow` then knows the base is a constant zero.
    let mut m = m;
    gradlift_ir::optimize(&mut m, &gradlift_ir::OptConfig::default()).unwrap();
    let f = m.func_by_name("z").unwrap();
    let args = [Val::F32(1.5)];
    let g = build_rrule(&m, f, &RuleConfig::default_for(m.sig(f))).unwrap();
    let grad = value_and_gradient(
        &mut Interpreter::new(&g.module),
        &g,
        &args,
        &Seeds::default(),
    )
    .unwrap();
    assert_eq!(grad.gradient, [Some(Val::F32(0.0))]);
    for width in [1, 3] {
        let config = FruleConfig::default_for(m.sig(f)).with_width(width);
        let rule = build_frule(&m, f, &config).unwrap_or_else(|e| panic!("width {width}: {e}"));
        let t = if width == 1 {
            Val::F32s(vec![1.0])
        } else {
            Val::F32s(vec![1.0, -2.0, 0.5])
        };
        let out = run(&rule, &args, &[Some(t)]);
        assert_eq!(out.value, [Val::F32(0.0)]);
        assert!(
            out.tangents.iter().all(|t| *t == Val::F32(0.0)),
            "width {width}: {:?}",
            out.tangents
        );
    }
}
