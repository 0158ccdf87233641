//! The motivating examples of the design (`shared/DESIGN.md`), as tests: each checks
//! its numbers against closed forms written here.

use gradlift_adjoint::{Activity, CheckOptions, RuleConfig, build_rrule, check_rule};
use gradlift_adjoint::{Seeds, value_and_gradient};
use gradlift_ir::interp::{Interpreter, Val};
use gradlift_ir::{Decl, Module, parse};

fn f64s(v: &Option<Val>) -> Vec<f64> {
    match v {
        Some(Val::F64s(x)) => x.clone(),
        other => panic!("not a [f64]: {other:?}"),
    }
}

fn scalar(v: &Option<Val>) -> f64 {
    match v {
        Some(Val::F64(x)) => *x,
        other => panic!("not an f64: {other:?}"),
    }
}

/// `f(x, y) = x*x + 3*y`: value and `(2x, 3)`.
#[test]
fn x_squared_plus_three_y() {
    let m = parse(
        "func @f(%x: f64, %y: f64) -> f64 {
         entry:
             %xx = fmul %x, %x
             %y3 = fmul 3.0, %y
             %r = fadd %xx, %y3
             ret %r
         }",
    )
    .unwrap();
    let f = m.func_by_name("f").unwrap();
    let rule = build_rrule(&m, f, &RuleConfig::default_for(m.sig(f))).unwrap();
    let mut engine = Interpreter::new(&rule.module);
    for (x, y) in [(2.0, 1.0), (-0.5, 7.0), (3.25, -2.0)] {
        let out = value_and_gradient(
            &mut engine,
            &rule,
            &[Val::F64(x), Val::F64(y)],
            &Seeds::default(),
        )
        .unwrap();
        assert_eq!(out.value, Some(vec![Val::F64(x * x + 3.0 * y)]));
        assert_eq!(scalar(&out.gradient[0]), 2.0 * x);
        assert_eq!(scalar(&out.gradient[1]), 3.0);
    }
}

/// With `y` a `dup` slice of length 1, the 3 is added into its shadow, and five
/// gradients add 15.
#[test]
fn dup_shadow_accumulates_across_calls() {
    let m = parse(
        "func @f(%x: f64, %y: [f64]) -> f64 {
         entry:
             %xx = fmul %x, %x
             %y0 = load %y[0]
             %y3 = fmul 3.0, %y0
             %r = fadd %xx, %y3
             ret %r
         }",
    )
    .unwrap();
    let f = m.func_by_name("f").unwrap();
    let config = RuleConfig::default_for(m.sig(f));
    assert_eq!(config.params, [Activity::Active, Activity::Dup]);
    let rule = build_rrule(&m, f, &config).unwrap();
    let mut engine = Interpreter::new(&rule.module);
    let args = [Val::F64(2.0), Val::F64s(vec![1.0])];
    let mut shadow = Some(Val::F64s(vec![0.0]));
    let mut dx = 0.0;
    for _ in 0..5 {
        let seeds = Seeds::default().with_shadows(vec![None, shadow.clone()]);
        let out = value_and_gradient(&mut engine, &rule, &args, &seeds).unwrap();
        assert_eq!(out.value, Some(vec![Val::F64(7.0)]));
        dx += scalar(&out.gradient[0]);
        shadow = out.gradient[1].clone();
    }
    assert_eq!(f64s(&shadow), [15.0]);
    assert_eq!(
        dx, 20.0,
        "the active x's cotangent is returned, not accumulated"
    );
}

const TRAINING: &str = "
; A linear model's mean squared error over a batch:
;     loss = (1/B) sum_b (sum_k images[b K + k] weights[k] - 1)^2,  K = len(weights)
func @training_loss(%images: [f64], %weights: [f64]) -> f64 {
entry:
    %K = len %weights
    %N = len %images
    %B = idiv %N, %K
    jump rows
rows:
    %b = phi i64 [entry: 0, row_end: %b1]
    %loss = phi f64 [entry: 0.0, row_end: %loss1]
    %more = icmp lt %b, %B
    br %more, row, done
row:
    %base = imul %b, %K
    jump cols
cols:
    %k = phi i64 [row: 0, col: %k1]
    %dot = phi f64 [row: 0.0, col: %dot1]
    %kmore = icmp lt %k, %K
    br %kmore, col, row_end
col:
    %idx = iadd %base, %k
    %p = load %images[%idx]
    %w = load %weights[%k]
    %pw = fmul %p, %w
    %dot1 = fadd %dot, %pw
    %k1 = iadd %k, 1
    jump cols
row_end:
    %e = fsub %dot, 1.0
    %e2 = fmul %e, %e
    %loss1 = fadd %loss, %e2
    %b1 = iadd %b, 1
    jump rows
done:
    %Bf = cast f64 %B
    %mean = fdiv %loss, %Bf
    ret %mean
}
";

/// `training_loss(images, weights)` with `const` images and `dup` weights: no image
/// gradient anywhere (no shadow parameter, no reverse of the image loads), the
/// weights' gradient right, and five calls accumulate five times.
#[test]
fn training_loss_with_const_images() {
    let m = parse(TRAINING).unwrap();
    let f = m.func_by_name("training_loss").unwrap();
    let config = RuleConfig::default_for(m.sig(f)).with_params([Activity::Const, Activity::Dup]);
    let rule = build_rrule(&m, f, &config).unwrap();
    // The pullback takes the images (frozen: it loads from them again instead of
    // having their values saved), the weights and their shadow, and the seed: no
    // shadow of the images.
    let rvs = rule.module.sig(rule.pullback);
    assert_eq!(rvs.params.len(), 4, "{rvs}");
    let text = rule.module.to_string();
    assert!(!text.contains("dimages"), "{text}");

    let (b, k) = (3usize, 4usize);
    let images: Vec<f64> = (0..b * k).map(|i| (0.3 * i as f64 + 0.1).sin()).collect();
    let weights: Vec<f64> = (0..k).map(|i| 0.2 * i as f64 - 0.3).collect();
    // Closed form: d/dw_k = (2/B) sum_b e_b images[b K + k], e_b = dot_b - 1.
    let mut expected = vec![0.0; k];
    let mut loss = 0.0;
    for row in 0..b {
        let dot: f64 = (0..k).map(|j| images[row * k + j] * weights[j]).sum();
        let e = dot - 1.0;
        loss += e * e;
        for j in 0..k {
            expected[j] += 2.0 * e * images[row * k + j] / b as f64;
        }
    }
    loss /= b as f64;
    let args = [Val::F64s(images.clone()), Val::F64s(weights)];
    let mut engine = Interpreter::new(&rule.module);
    let mut shadow = None;
    for call in 1..=5 {
        let seeds = Seeds::default().with_shadows(vec![None, shadow.clone()]);
        let out = value_and_gradient(&mut engine, &rule, &args, &seeds).unwrap();
        let Some(Val::F64(value)) = out.value.as_ref().unwrap().first().cloned() else {
            panic!()
        };
        assert!((value - loss).abs() <= 1e-14 * loss.abs());
        assert_eq!(out.gradient[0], None, "no image gradient");
        assert_eq!(out.args[0], Val::F64s(images.clone()));
        let got = f64s(&out.gradient[1]);
        for (g, e) in got.iter().zip(&expected) {
            let e = e * call as f64;
            assert!(
                (g - e).abs() <= 1e-12 * e.abs().max(1.0),
                "call {call}: {got:?} vs {expected:?}"
            );
        }
        shadow = out.gradient[1].clone();
    }
    // As a check of the check: with `dup` images, their gradient is there and right.
    let both = RuleConfig::default_for(m.sig(f));
    assert_eq!(both.params, [Activity::Dup, Activity::Dup]);
    check_rule(&m, f, &both, &args, &CheckOptions::f64()).unwrap();
}

const FAST_INV_SQRT: &str = include_str!("../../examples/ir/fast_inv_sqrt.ir");

/// The fast inverse square root: through `bitcast` (zero derivative by convention)
/// the derivation sees only the Newton step, and the derivative is off; with a
/// `vjp` it is the closed form -x^(-3/2) / 2.
#[test]
fn fast_inverse_square_root_needs_a_custom_rule() {
    let plain = parse(FAST_INV_SQRT).unwrap();
    let f = plain.func_by_name("fast_inv_sqrt").unwrap();
    let config = RuleConfig::default_for(plain.sig(f));
    let grad = |m: &Module, x: f64| -> f64 {
        let rule = build_rrule(m, f, &config).unwrap();
        let mut engine = Interpreter::new(&rule.module);
        let out =
            value_and_gradient(&mut engine, &rule, &[Val::F64(x)], &Seeds::default()).unwrap();
        scalar(&out.gradient[0])
    };
    let exact = |x: f64| -0.5 * x.powf(-1.5);

    // Without a rule: wrong by more than 1% somewhere in [0.5, 8].
    let worst = (1..=32)
        .map(|i| 0.25 * i as f64 + 0.3)
        .map(|x| ((grad(&plain, x) - exact(x)) / exact(x)).abs())
        .fold(0.0, f64::max);
    assert!(worst > 0.01, "worst relative error {worst}");

    // With `vjp @fast_inv_sqrt = @fast_inv_sqrt_vjp`, added from Rust.
    let mut m = parse(&format!(
        "{FAST_INV_SQRT}
         func @fast_inv_sqrt_vjp(%x: f64, %dy: f64) -> f64 {{
         entry:
             %p = pow %x, -1.5
             %h = fmul -0.5, %p
             %dx = fmul %h, %dy
             ret %dx
         }}"
    ))
    .unwrap();
    let rule_fn = m.func_by_name("fast_inv_sqrt_vjp").unwrap();
    m.add_decl(
        Decl::Vjp {
            func: f,
            rule: rule_fn,
        },
        gradlift_ir::function::Pos::NONE,
    );
    for i in 1..=32 {
        let x = 0.25 * i as f64 + 0.3;
        let g = grad(&m, x);
        assert!(((g - exact(x)) / exact(x)).abs() < 1e-14, "x = {x}: {g}");
    }
    // The same declaration in the text format.
    let text = format!(
        "{FAST_INV_SQRT}
         func @r(%x: f64, %dy: f64) -> f64 {{
         entry:
             %p = pow %x, -1.5
             %h = fmul -0.5, %p
             %dx = fmul %h, %dy
             ret %dx
         }}
         vjp @fast_inv_sqrt = @r"
    );
    let m = parse(&text).unwrap();
    assert!(((grad(&m, 2.0) - exact(2.0)) / exact(2.0)).abs() < 1e-14);
}

/// An `extern` with a host-supplied derivative: `vjp @host_sin = @host_sin_vjp`, both
/// bound to Rust closures.
#[test]
fn extern_with_a_host_derivative() {
    let m = parse(
        "extern @host_sin(f64) -> f64
         extern @host_sin_vjp(f64, f64) -> f64
         vjp @host_sin = @host_sin_vjp
         func @wave(%x: f64) -> f64 {
         entry:
             %s = call @host_sin(%x)
             %r = fmul %s, %x
             ret %r
         }",
    )
    .unwrap();
    let f = m.func_by_name("wave").unwrap();
    let rule = build_rrule(&m, f, &RuleConfig::default_for(m.sig(f))).unwrap();
    let mut engine = Interpreter::new(&rule.module);
    engine
        .bind_extern("host_sin", |a| match a {
            [Val::F64(x)] => Ok(vec![Val::F64(x.sin())]),
            _ => Err("bad arguments".into()),
        })
        .unwrap();
    engine
        .bind_extern("host_sin_vjp", |a| match a {
            [Val::F64(x), Val::F64(dy)] => Ok(vec![Val::F64(x.cos() * *dy)]),
            _ => Err("bad arguments".into()),
        })
        .unwrap();
    let x = 0.7f64;
    let out = value_and_gradient(&mut engine, &rule, &[Val::F64(x)], &Seeds::default()).unwrap();
    assert_eq!(out.value, Some(vec![Val::F64(x.sin() * x)]));
    let g = scalar(&out.gradient[0]);
    let exact = x.cos() * x + x.sin();
    assert!((g - exact).abs() < 1e-15, "{g} vs {exact}");
}

/// `check_rule` is how users test their own rules: a right `vjp` passes, a wrong
/// one (a factor off) fails the finite-difference comparison.
#[test]
fn check_rule_tests_custom_rules() {
    let text = |factor: &str| {
        format!(
            "func @square(%x: f64) -> f64 {{
             entry:
                 %r = fmul %x, %x
                 ret %r
             }}
             func @square_vjp(%x: f64, %dy: f64) -> f64 {{
             entry:
                 %t = fmul {factor}, %x
                 %r = fmul %t, %dy
                 ret %r
             }}
             vjp @square = @square_vjp"
        )
    };
    for (factor, right) in [("2.0", true), ("3.0", false)] {
        let m = parse(&text(factor)).unwrap();
        let f = m.func_by_name("square").unwrap();
        let result = check_rule(
            &m,
            f,
            &RuleConfig::default_for(m.sig(f)),
            &[Val::F64(0.7)],
            &CheckOptions::f64(),
        );
        assert_eq!(result.is_ok(), right, "factor {factor}: {result:?}");
        if let Err(e) = result {
            assert!(
                matches!(e, gradlift_adjoint::CheckError::Gradient { .. }),
                "{e}"
            );
        }
    }
}
