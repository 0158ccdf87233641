//! Custom derivatives of functions over slices: `vjp @f = @r` where `@f` takes
//! `[T]` and `mut [T]` parameters, and the rule pair `vjp @f = @fwd, @rvs`, from
//! every entry point: IR text (`examples/ir/custom_rules.ir`), the builder
//! (`Module::add_decl`), the tracer (a traced rule and a host rule) and host
//! functions (an `extern` whose rule is a Rust closure).
//!
//! The oracles are independent of the rules under test: finite differences and
//! the dot-product test (`check_rule`), the gradient derived from the same
//! function's body (the module without its `vjp` lines), closed forms, and the
//! interpreter against the JIT (bit for bit, on the same rule).

#[path = "common/bits.rs"]
mod bits;

use bits::bits;
use gradlift::adjoint::{
    Activity, AdError, CheckError, CheckOptions, RuleConfig, Seeds, build_rrule, build_rrule_width,
    check_rule, check_rule_with_hosts, value_and_gradient,
};
use gradlift::ir::interp::{Interpreter, Val};
use gradlift::ir::{Decl, Elem, FunctionBuilder, Module, Pos, Signature, Type, parse, verify};
use gradlift::trace::{Tracer, prelude::*};
use gradlift::{Active, Autodiff, CompiledGradient, Const, Duplicated, Error, Hosts, Workspace};

fn example_text() -> String {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/ir/custom_rules.ir");
    std::fs::read_to_string(path).expect("examples/ir/custom_rules.ir")
}

fn module(text: &str) -> Module {
    let m = parse(text).unwrap_or_else(|e| panic!("{e}"));
    verify(&m).unwrap_or_else(|e| panic!("{e}"));
    m
}

/// The same module without its `vjp` declarations: derivatives through the
/// bodies.
fn without_rules(text: &str) -> Module {
    let kept: Vec<&str> = text
        .lines()
        .filter(|l| !l.trim_start().starts_with("vjp "))
        .collect();
    module(&kept.join("\n"))
}

fn input(n: usize, a: f64, b: f64) -> Vec<f64> {
    (0..n).map(|i| (a * i as f64 + b).sin()).collect()
}

/// The gradient of `name` under `config` on the JIT, checked bit for bit
/// against the interpreter running the same rule.
fn jit_gradient(
    m: &Module,
    name: &str,
    config: &RuleConfig,
    hosts: &Hosts,
    args: &[Val],
) -> gradlift::Gradient {
    let grad = CompiledGradient::with_config(m, name, config, hosts)
        .unwrap_or_else(|e| panic!("@{name}: {e}"));
    let jit = grad
        .value_and_gradient(&mut Workspace::new(), args)
        .unwrap_or_else(|e| panic!("@{name} on the JIT: {e}"));
    let mut interp = Interpreter::new(&grad.rule().module).with_hosts(hosts);
    let want = value_and_gradient(&mut interp, grad.rule(), args, &Seeds::default())
        .unwrap_or_else(|e| panic!("@{name} on the interpreter: {e}"));
    assert_eq!(
        jit.value.iter().flatten().map(bits).collect::<Vec<_>>(),
        want.value.iter().flatten().map(bits).collect::<Vec<_>>(),
        "@{name}: values"
    );
    for (k, (a, b)) in jit.gradient.iter().zip(&want.gradient).enumerate() {
        assert_eq!(
            a.as_ref().map(bits),
            b.as_ref().map(bits),
            "@{name}: gradient {k}"
        );
    }
    jit
}

fn floats(v: &Option<Val>) -> Vec<f64> {
    match v {
        Some(Val::F64(x)) => vec![*x],
        Some(Val::F64s(xs)) => xs.clone(),
        other => panic!("not f64: {other:?}"),
    }
}

#[track_caller]
fn close(a: &[f64], b: &[f64], rtol: f64) {
    assert_eq!(a.len(), b.len());
    for (k, (x, y)) in a.iter().zip(b).enumerate() {
        assert!(
            (x - y).abs() <= rtol * x.abs().max(y.abs()).max(1e-300),
            "element {k}: {x} vs {y}"
        );
    }
}

/// Compares the gradients of `name` with the rules and through the bodies.
fn same_as_derived(text: &str, name: &str, config: &RuleConfig, args: &[Val]) {
    let (with, plain) = (module(text), without_rules(text));
    let g = jit_gradient(&with, name, config, &Hosts::new(), args);
    let d = jit_gradient(&plain, name, config, &Hosts::new(), args);
    for (k, (a, b)) in g.gradient.iter().zip(&d.gradient).enumerate() {
        if a.is_none() {
            assert!(b.is_none());
            continue;
        }
        let (a, b) = (floats(a), floats(b));
        assert!(a.iter().any(|&x| x != 0.0), "@{name}: gradient {k} is zero");
        close(&a, &b, 1e-12);
    }
}

#[test]
fn a_text_rule_over_slices_passes_check_rule_and_gives_the_derived_gradient() {
    let text = example_text();
    let m = module(&text);
    let (a, x) = (input(12, 0.7, 0.2), input(4, 1.3, -0.4));
    let mv = m.func_by_name("matvec").unwrap();
    // The function itself: A, x and y `dup` (y's old contents are an input, its
    // new ones an output).
    let args = [
        Val::F64s(a.clone()),
        Val::F64s(x.clone()),
        Val::F64s(vec![0.5; 3]),
    ];
    let report = check_rule(
        &m,
        mv,
        &RuleConfig::default_for(m.sig(mv)),
        &args,
        &CheckOptions::f64(),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert!(report.coords.len() >= 6, "{:?}", report.coords);
    // Inside a loss, with every activity the rule's scratch shadows serve.
    let loss = m.func_by_name("mv_loss").unwrap();
    let args = [Val::F64s(a.clone()), Val::F64s(x.clone()), Val::F64(0.8)];
    let all = RuleConfig::default_for(m.sig(loss));
    use Activity::{Const as C, Dup as D};
    for params in [
        vec![D, D, Activity::Active],
        vec![C, D, Activity::Active],
        vec![D, C, Activity::Active],
        vec![D, D, C],
    ] {
        let config = all.clone().with_params(params.clone());
        check_rule(&m, loss, &config, &args, &CheckOptions::f64())
            .unwrap_or_else(|e| panic!("{params:?}: {e}"));
        same_as_derived(&text, "mv_loss", &config, &args);
    }
}

#[test]
fn a_rule_pair_keeps_what_it_needs_on_the_tape() {
    let text = example_text();
    let m = module(&text);
    let x = input(7, 0.9, 0.3);
    for name in ["lse", "lse_loss"] {
        let id = m.func_by_name(name).unwrap();
        let mut args = vec![Val::F64s(x.clone())];
        if name == "lse_loss" {
            args.push(Val::F64(1.7));
        }
        let config = RuleConfig::default_for(m.sig(id));
        check_rule(&m, id, &config, &args, &CheckOptions::f64())
            .unwrap_or_else(|e| panic!("@{name}: {e}"));
        same_as_derived(&text, name, &config, &args);
    }
    // The softmax, in closed form.
    let g = jit_gradient(
        &m,
        "lse",
        &RuleConfig::default_for(m.sig(m.func_by_name("lse").unwrap())),
        &Hosts::new(),
        &[Val::F64s(x.clone())],
    );
    let s: f64 = x.iter().map(|v| v.exp()).sum();
    let want: Vec<f64> = x.iter().map(|v| v.exp() / s).collect();
    close(&floats(&g.gradient[0]), &want, 1e-14);
    assert!(g.tape_peak_bytes >= 8 * x.len(), "{}", g.tape_peak_bytes);
}

/// A pair whose slice argument has no shadow (a `const` slice): the forward
/// pass keeps its length, and the pullback rule gets a scratch shadow.
#[test]
fn a_rule_pair_with_a_const_slice() {
    let text = "
        func @dot(%a: [f64], %b: [f64]) -> f64 {
        entry:
            %n = len %a
            jump head
        head:
            %i = phi i64 [entry: 0, body: %i1]
            %s = phi f64 [entry: 0.0, body: %s1]
            %more = icmp lt %i, %n
            br %more, body, done
        body:
            %ai = load %a[%i]
            %bi = load %b[%i]
            %p = fmul %ai, %bi
            %s1 = fadd %s, %p
            %i1 = iadd %i, 1
            jump head
        done:
            ret %s
        }
        ; keeps copies of a and b
        func @dot_fwd(%a: [f64], %b: [f64]) -> f64 {
        entry:
            %r = call @dot(%a, %b)
            %n = len %a
            %ha = tape_alloc f64, %n
            %hb = tape_alloc f64, %n
            %ca = tape_view f64, %ha
            %cb = tape_view f64, %hb
            jump head
        head:
            %i = phi i64 [entry: 0, body: %i1]
            %more = icmp lt %i, %n
            br %more, body, done
        body:
            %ai = load %a[%i]
            %bi = load %b[%i]
            store %ca[%i], %ai
            store %cb[%i], %bi
            %i1 = iadd %i, 1
            jump head
        done:
            push %ha
            push %hb
            ret %r
        }
        func @dot_rvs(%da: mut [f64], %db: mut [f64], %dy: f64) {
        entry:
            %hb = pop i64
            %ha = pop i64
            %a = tape_view f64, %ha
            %b = tape_view f64, %hb
            %n = len %a
            jump head
        head:
            %i = phi i64 [entry: 0, body: %i1]
            %more = icmp lt %i, %n
            br %more, body, done
        body:
            %ai = load %a[%i]
            %bi = load %b[%i]
            %ga = fmul %dy, %bi
            %gb = fmul %dy, %ai
            %da0 = load %da[%i]
            %da1 = fadd %da0, %ga
            store %da[%i], %da1
            %db0 = load %db[%i]
            %db1 = fadd %db0, %gb
            store %db[%i], %db1
            %i1 = iadd %i, 1
            jump head
        done:
            ret
        }
        func @f(%a: [f64], %b: mut [f64], %c: f64) -> f64 {
        entry:
            %d = call @dot(%a, %b)
            store %b[0], %c
            %e = call @dot(%a, %b)
            %r = fmul %d, %e
            ret %r
        }
        vjp @dot = @dot_fwd, @dot_rvs
    ";
    let m = module(text);
    let f = m.func_by_name("f").unwrap();
    let args = [
        Val::F64s(input(5, 0.4, 0.1)),
        Val::F64s(input(5, 1.1, 0.9)),
        Val::F64(0.3),
    ];
    let all = RuleConfig::default_for(m.sig(f));
    use Activity::{Active as A, Const as C, Dup as D};
    for params in [vec![D, D, A], vec![D, C, C], vec![C, D, A]] {
        let config = all.clone().with_params(params.clone());
        check_rule(&m, f, &config, &args, &CheckOptions::f64())
            .unwrap_or_else(|e| panic!("{params:?}: {e}"));
        same_as_derived(text, "f", &config, &args);
    }
}

/// A rule built with the builder and declared with `Module::add_decl`.
#[test]
fn a_rule_built_with_the_builder() {
    let mut m = Module::new();
    let sq = m
        .declare(
            "sqnorm",
            Signature::new([Type::slice(Elem::F64)], [Type::F64]),
        )
        .unwrap();
    let rule = m
        .declare(
            "sqnorm_vjp",
            Signature::new(
                [
                    Type::slice(Elem::F64),
                    Type::slice_mut(Elem::F64),
                    Type::F64,
                ],
                [],
            ),
        )
        .unwrap();
    let f = m
        .declare(
            "f",
            Signature::new([Type::slice(Elem::F64), Type::F64], [Type::F64]),
        )
        .unwrap();
    // sqnorm(x) = sum x_i^2
    let mut b = FunctionBuilder::new(&m, sq);
    let x = b.param(0);
    let n = b.len(x);
    let zero = b.iconst(0);
    let init = b.fconst(0.0);
    let out = b.counted_loop(zero, n, &[init], |b, i, acc| {
        let xi = b.load(x, i);
        let p = b.fmul(xi, xi);
        vec![b.fadd(acc[0], p)]
    });
    b.ret(&out);
    let body = b.finish().unwrap();
    m.define(sq, body).unwrap();
    // its rule: dx_i += 2 x_i dy
    let mut b = FunctionBuilder::new(&m, rule);
    let (x, dx, dy) = (b.param(0), b.param(1), b.param(2));
    let n = b.len(x);
    let zero = b.iconst(0);
    b.counted_loop(zero, n, &[], |b, i, _| {
        let xi = b.load(x, i);
        let two = b.fconst(2.0);
        let t = b.fmul(two, xi);
        let g = b.fmul(t, dy);
        let old = b.load(dx, i);
        let new = b.fadd(old, g);
        b.store(dx, i, new);
        Vec::new()
    });
    b.ret(&[]);
    let body = b.finish().unwrap();
    m.define(rule, body).unwrap();
    // f(x, s) = s sqnorm(x)
    let mut b = FunctionBuilder::new(&m, f);
    let (x, s) = (b.param(0), b.param(1));
    let r = b.call(sq, &[x]);
    let y = b.fmul(s, r[0]);
    b.ret(&[y]);
    let body = b.finish().unwrap();
    m.define(f, body).unwrap();
    m.add_decl(Decl::Vjp { func: sq, rule }, Pos::NONE);
    verify(&m).unwrap();
    let x = input(6, 0.8, 0.5);
    let args = [Val::F64s(x.clone()), Val::F64(1.5)];
    check_rule(
        &m,
        f,
        &RuleConfig::default_for(m.sig(f)),
        &args,
        &CheckOptions::f64(),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let g = jit_gradient(
        &m,
        "f",
        &RuleConfig::default_for(m.sig(f)),
        &Hosts::new(),
        &args,
    );
    let want: Vec<f64> = x.iter().map(|v| 3.0 * v).collect();
    close(&floats(&g.gradient[0]), &want, 1e-15);
}

// The tracer: a traced rule of a traced function over slices.

fn matvec<T: Real>(a: T::Slice<'_>, x: T::Slice<'_>, mut y: T::SliceMut<'_>) {
    let n = x.len();
    for_range(0, y.len(), (), |i, ()| {
        let acc = for_range(0, n, T::lit(0.0), |j, acc| acc + a.at(i * n + j) * x.at(j));
        y.set(i, acc);
    });
}

#[allow(clippy::too_many_arguments)]
fn matvec_vjp<T: Real>(
    a: T::Slice<'_>,
    x: T::Slice<'_>,
    y: T::Slice<'_>,
    mut da: T::SliceMut<'_>,
    mut dx: T::SliceMut<'_>,
    mut dy: T::SliceMut<'_>,
) {
    let n = x.len();
    for_range(0, y.len(), (), |i, ()| {
        let g = dy.at(i);
        for_range(0, n, (), |j, ()| {
            let k = i * n + j;
            let ga = da.at(k) + g * x.at(j);
            da.set(k, ga);
            let gx = dx.at(j) + g * a.at(k);
            dx.set(j, gx);
        });
        dy.set(i, T::lit(0.0));
    });
}

fn traced_loss(a: Slice<f64>, x: Slice<f64>, s: Var, with_rule: bool) -> Var {
    let m = a.len() / x.len();
    let y = <Var as Float>::alloc(m);
    if with_rule {
        func("matvec", matvec::<Var>)
            .vjp("matvec_vjp", matvec_vjp::<Var>)
            .call((a, x, y));
    } else {
        func("matvec", matvec::<Var>).call((a, x, y));
    }
    for_range(0, m, Var::lit(0.0), |i, acc| {
        let t = y.at(i).tanh() * s;
        acc + t * t
    })
}

#[test]
fn a_traced_rule_over_slices() {
    let (a, x) = (input(12, 0.7, 0.2), input(4, 1.3, -0.4));
    let mut grads = Vec::new();
    for with_rule in [true, false] {
        let mut tracer = Tracer::new();
        tracer
            .function("loss", move |a: Slice<f64>, x: Slice<f64>, s: Var| {
                traced_loss(a, x, s, with_rule)
            })
            .unwrap();
        let traced = tracer.finish().unwrap();
        let text = traced.module.to_string();
        assert_eq!(
            text.contains("vjp @matvec = @matvec_vjp"),
            with_rule,
            "{text}"
        );
        if with_rule {
            let id = traced.module.func_by_name("loss").unwrap();
            let args = [Val::F64s(a.clone()), Val::F64s(x.clone()), Val::F64(0.8)];
            check_rule(
                &traced.module,
                id,
                &RuleConfig::default_for(traced.module.sig(id)),
                &args,
                &CheckOptions::f64(),
            )
            .unwrap_or_else(|e| panic!("{e}"));
        }
        let mut f =
            Autodiff::<(Slice<f64>, Slice<f64>, Var), Var>::from_traced(traced, "loss").unwrap();
        let (mut da, mut dx) = (vec![0.0; 12], vec![0.0; 4]);
        let (value, (_, _, ds)) = f
            .gradient((
                Duplicated(&a[..], &mut da[..]),
                Duplicated(&x[..], &mut dx[..]),
                Active(0.8),
            ))
            .unwrap();
        grads.push((value, da, dx, ds));
    }
    let (r, d) = (&grads[0], &grads[1]);
    assert_eq!(r.0.to_bits(), d.0.to_bits());
    close(&r.1, &d.1, 1e-12);
    close(&r.2, &d.2, 1e-12);
    close(&[r.3], &[d.3], 1e-12);
}

// Host functions: a BLAS-like gemv from Rust, with its rule as a Rust closure.

const GEMV_TEXT: &str = "
    ; y = A x (A row-major, m = len y); the host supplies both
    extern @gemv([f64], [f64], mut [f64])
    extern @gemv_vjp([f64], [f64], [f64], mut [f64], mut [f64], mut [f64])
    vjp @gemv = @gemv_vjp

    func @loss(%a: [f64], %x: [f64]) -> f64 {
    entry:
        %n = len %x
        %mn = len %a
        %m = idiv %mn, %n
        %y = alloc f64, %m
        call @gemv(%a, %x, %y)
        jump head
    head:
        %i = phi i64 [entry: 0, body: %i1]
        %acc = phi f64 [entry: 0.0, body: %acc1]
        %more = icmp lt %i, %m
        br %more, body, exit
    body:
        %yi = load %y[%i]
        %e = exp %yi
        %acc1 = fadd %acc, %e
        %i1 = iadd %i, 1
        jump head
    exit:
        ret %acc
    }
";

fn gemv(a: &[f64], x: &[f64], y: &mut [f64]) {
    let n = x.len();
    for (i, yi) in y.iter_mut().enumerate() {
        *yi = (0..n).map(|j| a[i * n + j] * x[j]).sum();
    }
}

/// The rule; `bug` drops the `dx` term of row 1.
fn gemv_vjp(a: &[f64], x: &[f64], da: &mut [f64], dx: &mut [f64], dy: &mut [f64], bug: bool) {
    let n = x.len();
    for (i, g) in dy.iter_mut().enumerate() {
        for j in 0..n {
            da[i * n + j] += *g * x[j];
            if !(bug && i == 1) {
                dx[j] += *g * a[i * n + j];
            }
        }
        *g = 0.0;
    }
}

fn gemv_hosts(bug: bool) -> Hosts {
    Hosts::new()
        .bind("gemv", |v: &mut [Val]| match v {
            [Val::F64s(a), Val::F64s(x), Val::F64s(y)] => {
                gemv(a, x, y);
                Ok(vec![])
            }
            _ => Err("gemv takes ([f64], [f64], mut [f64])".into()),
        })
        .bind("gemv_vjp", move |v: &mut [Val]| match v {
            [
                Val::F64s(a),
                Val::F64s(x),
                Val::F64s(_y),
                Val::F64s(da),
                Val::F64s(dx),
                Val::F64s(dy),
            ] => {
                gemv_vjp(a, x, da, dx, dy, bug);
                Ok(vec![])
            }
            _ => Err("gemv_vjp takes three slices and three shadows".into()),
        })
}

#[test]
fn a_host_function_with_a_host_rule_over_slices() {
    let m = module(GEMV_TEXT);
    let loss = m.func_by_name("loss").unwrap();
    let (a, x) = (input(15, 0.3, 0.1), input(5, 0.9, 0.4));
    let args = [Val::F64s(a.clone()), Val::F64s(x.clone())];
    let config = RuleConfig::default_for(m.sig(loss));
    let hosts = gemv_hosts(false);
    check_rule_with_hosts(&m, loss, &config, &args, &CheckOptions::f64(), &hosts)
        .unwrap_or_else(|e| panic!("{e}"));
    // Closed form: dL/dy_i = exp(y_i); dA = g x^T, dx = A^T g.
    let mut y = vec![0.0; 3];
    gemv(&a, &x, &mut y);
    let gy: Vec<f64> = y.iter().map(|v| v.exp()).collect();
    let g = jit_gradient(&m, "loss", &config, &hosts, &args);
    let da: Vec<f64> = (0..15).map(|k| gy[k / 5] * x[k % 5]).collect();
    let dx: Vec<f64> = (0..5)
        .map(|j| (0..3).map(|i| a[i * 5 + j] * gy[i]).sum())
        .collect();
    close(&floats(&g.gradient[0]), &da, 1e-14);
    close(&floats(&g.gradient[1]), &dx, 1e-14);
    // The plain function needs the host function; without hosts the JIT refuses.
    assert!(matches!(
        CompiledGradient::with_config(&m, "loss", &config, &Hosts::new()),
        Err(Error::Compile(_))
    ));
}

/// `Func::vjp_host`: the tracer's host rule, for a function over slices.
#[test]
fn a_traced_function_with_a_host_rule() {
    fn dot<T: Real>(a: T::Slice<'_>, b: T::Slice<'_>) -> T {
        for_range(0, a.len(), T::lit(0.0), |i, acc| acc + a.at(i) * b.at(i))
    }
    fn dot_vjp(v: &mut [Val]) -> Result<Vec<Val>, String> {
        match v {
            [
                Val::F64s(a),
                Val::F64s(b),
                Val::F64s(da),
                Val::F64s(db),
                Val::F64(dy),
            ] => {
                for i in 0..a.len() {
                    da[i] += *dy * b[i];
                    db[i] += *dy * a[i];
                }
                Ok(vec![])
            }
            _ => Err("dot_vjp: bad arguments".into()),
        }
    }
    let mut tracer = Tracer::new();
    tracer
        .function("f", |a: Slice<f64>, b: Slice<f64>| {
            let d = func("dot", dot::<Var>)
                .vjp_host("dot_vjp", dot_vjp)
                .call((a, b));
            d * d
        })
        .unwrap();
    let traced = tracer.finish().unwrap();
    let (a, b) = (input(4, 0.5, 0.2), input(4, 1.5, 0.7));
    let id = traced.module.func_by_name("f").unwrap();
    check_rule_with_hosts(
        &traced.module,
        id,
        &RuleConfig::default_for(traced.module.sig(id)),
        &[Val::F64s(a.clone()), Val::F64s(b.clone())],
        &CheckOptions::f64(),
        &traced.hosts,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let mut f = Autodiff::<(Slice<f64>, Slice<f64>), Var>::from_traced(traced, "f").unwrap();
    let mut da = vec![0.0; 4];
    let (value, _) = f
        .gradient((Duplicated(&a[..], &mut da[..]), Const(&b[..])))
        .unwrap();
    let d: f64 = a.iter().zip(&b).map(|(x, y)| x * y).sum();
    assert!((value - d * d).abs() <= 1e-15);
    let want: Vec<f64> = b.iter().map(|y| 2.0 * d * y).collect();
    close(&da, &want, 1e-14);
}

/// `check_rule`'s error for `@name` of the module `text` (default activities).
#[track_caller]
fn check_fails(text: &str, name: &str, args: &[Val]) -> CheckError {
    let m = module(text);
    let id = m.func_by_name(name).unwrap();
    check_rule(
        &m,
        id,
        &RuleConfig::default_for(m.sig(id)),
        args,
        &CheckOptions::f64(),
    )
    .expect_err("the wrong rule must be caught")
}

/// A wrong rule is caught, and the message names the coordinate.
#[test]
fn wrong_rules_are_caught_naming_the_coordinate() {
    // A host rule that drops row 1's part of dx: every element of x is off.
    let m = module(GEMV_TEXT);
    let loss = m.func_by_name("loss").unwrap();
    let args = [
        Val::F64s(input(15, 0.3, 0.1)),
        Val::F64s(input(5, 0.9, 0.4)),
    ];
    let config = RuleConfig::default_for(m.sig(loss));
    let e = check_rule_with_hosts(
        &m,
        loss,
        &config,
        &args,
        &CheckOptions::f64(),
        &gemv_hosts(true),
    )
    .unwrap_err();
    assert!(
        matches!(
            e,
            CheckError::Gradient {
                param: 1,
                index: Some(0),
                ..
            }
        ),
        "{e:?}"
    );
    assert!(
        e.to_string()
            .starts_with("the cotangent of element 0 of parameter 2 is "),
        "{e}"
    );
    // A text rule whose dA term reads the wrong element of x.
    let text = example_text().replace(
        "    %xj = load %x[%j]\n    %gx = fmul %g, %xj",
        "    %xj = load %x[0]\n    %gx = fmul %g, %xj",
    );
    assert_ne!(text, example_text());
    let args = [
        Val::F64s(input(12, 0.7, 0.2)),
        Val::F64s(input(4, 1.3, -0.4)),
        Val::F64(0.8),
    ];
    let e = check_fails(&text, "mv_loss", &args);
    assert!(
        matches!(
            e,
            CheckError::Gradient {
                param: 0,
                index: Some(1),
                ..
            }
        ),
        "{e:?}"
    );
    assert!(e.to_string().contains("element 1 of parameter 1"), "{e}");
    // A rule that forgets that `y`'s old contents do not reach its new ones (no
    // `dy = 0`): the gradient check seeds no slice, so the dot-product test
    // catches it, and then names the entry.
    let text = example_text().replace("    store %dy[%i], 0.0\n", "");
    assert_ne!(text, example_text());
    let args = [
        Val::F64s(input(12, 0.7, 0.2)),
        Val::F64s(input(4, 1.3, -0.4)),
        Val::F64s(vec![0.5; 3]),
    ];
    let e = check_fails(&text, "matvec", &args);
    assert!(
        matches!(
            e,
            CheckError::DotProduct {
                culprit: Some(_),
                ..
            }
        ),
        "{e:?}"
    );
    assert!(
        e.to_string().contains(
            "the cotangent of element 0 of parameter 3 from element 0 of parameter 3 (its contents after the call) is 1, but finite differences give"
        ),
        "{e}"
    );
}

/// Width N > 1 (N cotangents per sweep) cannot call a rule over slices yet:
/// refused for the function itself, and a run-time error where it is called.
#[test]
fn rules_of_width_n_refuse_slice_rules_clearly() {
    let m = module(&example_text());
    let mv = m.func_by_name("matvec").unwrap();
    let e = build_rrule_width(&m, mv, &RuleConfig::default_for(m.sig(mv)), 2).unwrap_err();
    assert!(matches!(e, AdError::Unsupported { .. }), "{e:?}");
    assert!(e.to_string().contains("width 2"), "{e}");
    let loss = m.func_by_name("mv_loss").unwrap();
    let rule = build_rrule_width(&m, loss, &RuleConfig::default_for(m.sig(loss)), 2).unwrap();
    let mut interp = Interpreter::new(&rule.module);
    let args = [
        Val::F64s(input(12, 0.7, 0.2)),
        Val::F64s(input(4, 1.3, -0.4)),
        Val::F64(0.8),
    ];
    let seeds = Seeds::results([1.0, 0.5]);
    let e = value_and_gradient(&mut interp, &rule, &args, &seeds).unwrap_err();
    assert!(e.to_string().contains("cannot call yet"), "{e}");
    // At width 1 it derives.
    build_rrule(&m, loss, &RuleConfig::default_for(m.sig(loss))).unwrap();
}

/// `@matvec`'s forward-mode rule: `ty = tA x + A tx`.
const MATVEC_JVP: &str = "
        func @matvec_jvp(%a: [f64], %x: [f64], %y: [f64], %ta: [f64], %tx: [f64], %ty: mut [f64]) {
        entry:
            %m = len %y
            %n = len %x
            jump rows
        rows:
            %i = phi i64 [entry: 0, rowdone: %i1]
            %more = icmp lt %i, %m
            br %more, row, done
        row:
            %base = imul %i, %n
            jump cols
        cols:
            %j = phi i64 [row: 0, body: %j1]
            %acc = phi f64 [row: 0.0, body: %acc1]
            %c = icmp lt %j, %n
            br %c, body, rowdone
        body:
            %k = iadd %base, %j
            %tak = load %ta[%k]
            %xj = load %x[%j]
            %p = fmul %tak, %xj
            %ak = load %a[%k]
            %txj = load %tx[%j]
            %q = fmul %ak, %txj
            %pq = fadd %p, %q
            %acc1 = fadd %acc, %pq
            %j1 = iadd %j, 1
            jump cols
        rowdone:
            store %ty[%i], %acc
            %i1 = iadd %i, 1
            jump rows
        done:
            ret
        }
        jvp @matvec = @matvec_jvp
    ";

/// A `jvp` over slices: the matrix-vector product's tangent `ty = tA x + A tx`,
/// written into the output's tangent (a `mut` slice: the tangent of its contents
/// after the call). Checked against forward mode through the body, against the
/// reverse-mode gradient (`<grad f, v>`), and the interpreter against the JIT.
#[test]
fn a_jvp_over_slices() {
    use gradlift::CompiledJvp;
    use gradlift::adjoint::{DualActivity, FruleConfig, build_frule, jvp_vals};
    let jvp_rule = MATVEC_JVP;
    let text = example_text() + jvp_rule;
    let with = module(&text);
    // Through the body: no `jvp` (and no `vjp`) line.
    let plain = without_rules(&example_text());
    let (a, x) = (input(12, 0.7, 0.2), input(4, 1.3, -0.4));
    let (ta, tx) = (input(12, 0.31, 0.9), input(4, 0.57, 0.1));
    let args = [Val::F64s(a.clone()), Val::F64s(x.clone()), Val::F64(0.8)];
    use DualActivity::{Const as C, Dual as D};
    for params in [vec![D, D, D], vec![C, D, D], vec![D, C, C]] {
        let tangents: Vec<Option<Val>> = params
            .iter()
            .zip([Val::F64s(ta.clone()), Val::F64s(tx.clone()), Val::F64(0.25)])
            .map(|(&p, t)| (p == D).then_some(t))
            .collect();
        let id = with.func_by_name("mv_loss").unwrap();
        let config = FruleConfig {
            params: params.clone(),
            ..FruleConfig::default_for(with.sig(id))
        };
        let jit = CompiledJvp::with_config(&with, "mv_loss", &config, &Hosts::new()).unwrap();
        assert!(jit.frule().module.to_string().contains("call @matvec_jvp("));
        let got = jit.jvp(&mut Workspace::new(), &args, &tangents).unwrap();
        let rule = build_frule(&with, id, &config).unwrap();
        let interp =
            jvp_vals(&mut Interpreter::new(&rule.module), &rule, &args, &tangents).unwrap();
        assert_eq!(
            got.tangents.iter().map(bits).collect::<Vec<_>>(),
            interp.tangents.iter().map(bits).collect::<Vec<_>>(),
            "{params:?}"
        );
        let pid = plain.func_by_name("mv_loss").unwrap();
        let derived = CompiledJvp::with_config(&plain, "mv_loss", &config, &Hosts::new())
            .unwrap()
            .jvp(&mut Workspace::new(), &args, &tangents)
            .unwrap();
        let (Val::F64(t), Val::F64(d)) = (&got.tangents[0], &derived.tangents[0]) else {
            panic!("{got:?}")
        };
        close(&[*t], &[*d], 1e-12);
        // <grad f, v> from reverse mode.
        let g = jit_gradient(
            &plain,
            "mv_loss",
            &RuleConfig::default_for(plain.sig(pid)),
            &Hosts::new(),
            &args,
        );
        let mut dot = 0.0;
        for (k, tan) in tangents.iter().enumerate() {
            if let Some(tan) = tan {
                let v = floats(&Some(tan.clone()));
                dot += floats(&g.gradient[k])
                    .iter()
                    .zip(&v)
                    .map(|(p, q)| p * q)
                    .sum::<f64>();
            }
        }
        close(&[*t], &[dot], 1e-12);
    }
    // Width 2 cannot call it yet: the rule fails when the call runs.
    let id = with.func_by_name("mv_loss").unwrap();
    let config = FruleConfig::default_for(with.sig(id)).with_width(2);
    let rule = build_frule(&with, id, &config).unwrap();
    let tangents = [
        Some(Val::F64s(vec![0.0; 24])),
        Some(Val::F64s(vec![0.0; 8])),
        Some(Val::F64s(vec![1.0, 0.0])),
    ];
    let e = jvp_vals(&mut Interpreter::new(&rule.module), &rule, &args, &tangents).unwrap_err();
    assert!(
        e.to_string()
            .contains("takes slices, which a rule of width 2 cannot call yet"),
        "{e}"
    );
}

/// Hessian-vector products (forward mode over the reverse rule) through a `vjp`
/// over slices: forward mode differentiates the rule's own body and calls the
/// function's `jvp`; the result equals the HVP derived through the bodies, and
/// the interpreter the JIT.
#[test]
fn hessian_vector_products_through_a_rule_over_slices() {
    use gradlift::CompiledHvp;
    use gradlift::adjoint::hvp_vals;
    let with = module(&(example_text() + MATVEC_JVP));
    let plain = without_rules(&example_text());
    let args = [
        Val::F64s(input(12, 0.7, 0.2)),
        Val::F64s(input(4, 1.3, -0.4)),
        Val::F64(0.8),
    ];
    let v = [
        Some(Val::F64s(input(12, 0.31, 0.9))),
        Some(Val::F64s(input(4, 0.57, 0.1))),
        Some(Val::F64(0.25)),
    ];
    let mut out = Vec::new();
    for m in [&with, &plain] {
        let id = m.func_by_name("mv_loss").unwrap();
        let h = CompiledHvp::with_config(
            m,
            "mv_loss",
            &RuleConfig::default_for(m.sig(id)),
            1,
            &Hosts::new(),
        )
        .unwrap();
        let jit = h.hvp(&mut Workspace::new(), &args, &v).unwrap();
        let interp =
            hvp_vals(&mut Interpreter::new(&h.rule().module), h.rule(), &args, &v).unwrap();
        for (a, b) in jit.hvp.iter().zip(&interp.hvp) {
            assert_eq!(a.as_ref().map(bits), b.as_ref().map(bits));
        }
        out.push(jit.hvp);
    }
    for (a, b) in out[0].iter().zip(&out[1]) {
        close(&floats(a), &floats(b), 1e-12);
    }
}
