//! The one pipeline (`gradlift::Pipeline`): every stage refuses what it must with
//! the stage's error, both engines run the same derived code (the interpreter on
//! `Pipeline::derive`'s rule, the JIT on `Pipeline::compile_gradient`'s) and agree
//! bit for bit, and the optimiser is what makes the naive `normalize` O(n): its
//! tape is constant in n, and its gradient is the one derived from the module as
//! written. The JIT's tape checks change no gradient.

use gradlift::adjoint::{Seeds, value_and_gradient};
use gradlift::ir::interp::Interpreter;
use gradlift::ir::opt::OptConfig;
use gradlift::ir::{Module, parse};
use gradlift::{Error, Pipeline, Val, Workspace, suite};

fn normalize_module() -> Module {
    let path = format!("{}/examples/ir/normalize.ir", env!("CARGO_MANIFEST_DIR"));
    parse(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn normalize_args(n: usize) -> Vec<Val> {
    let (x, w) = suite::normalize_input(n);
    vec![Val::F64s(x), Val::F64s(w)]
}

/// The gradient of `@normalize` at `n` on the interpreter, through `pipeline`:
/// the gradient and the tape's peak bytes.
fn on_interpreter(pipeline: &Pipeline, n: usize) -> (Vec<Option<Val>>, usize) {
    let rule = pipeline
        .derive(&normalize_module(), "normalize", None)
        .unwrap();
    let g = value_and_gradient(
        &mut Interpreter::new(&rule.module),
        &rule,
        &normalize_args(n),
        &Seeds::default(),
    )
    .unwrap();
    (g.gradient, g.tape_peak_bytes)
}

/// The same on the JIT.
fn on_jit(pipeline: &Pipeline, n: usize) -> (Vec<Option<Val>>, usize) {
    let grad = pipeline
        .compile_gradient(&normalize_module(), "normalize", None)
        .unwrap();
    let g = grad
        .value_and_gradient(&mut Workspace::new(), &normalize_args(n))
        .unwrap();
    (g.gradient, g.tape_peak_bytes)
}

fn bits(g: &[Option<Val>]) -> Vec<u64> {
    g.iter()
        .flat_map(|v| match v {
            Some(Val::F64s(xs)) => xs.iter().map(|x| x.to_bits()).collect(),
            Some(Val::F64(x)) => vec![x.to_bits()],
            _ => vec![],
        })
        .collect()
}

#[test]
fn both_engines_run_the_same_derived_code() {
    let p = Pipeline::new();
    let (gi, ti) = on_interpreter(&p, 700);
    let (gj, tj) = on_jit(&p, 700);
    assert_eq!(bits(&gi), bits(&gj));
    assert_eq!(ti, tj);
}

/// The JIT's tape checks change no gradient: every suite program's gradient in
/// `examples/ir`, compiled with and without them, is the same bit for bit, as are
/// the tape's peaks, and both agree with the interpreter.
#[test]
fn gradients_are_the_same_with_and_without_tape_checks() {
    let dir = format!("{}/examples/ir", env!("CARGO_MANIFEST_DIR"));
    let (checked, unchecked) = (Pipeline::new(), Pipeline::new().with_tape_checks(false));
    let x = |v: Vec<f64>| Val::F64s(v);
    let p = suite::mlp_input(4);
    let programs: [(&str, Vec<Val>); 7] = [
        ("sumsq", vec![x(suite::sumsq_input(300))]),
        ("rosenbrock", vec![x(suite::rosenbrock_input(300))]),
        ("logsumexp", vec![x(suite::logsumexp_input(300))]),
        ("normalize", normalize_args(300)),
        (
            "mlp",
            vec![
                x(p.x),
                x(p.w1),
                x(p.b1),
                x(p.w2),
                x(p.b2),
                Val::I64s((0..4).map(|b| b % 10).collect()),
            ],
        ),
        (
            "ode",
            [1.5, 1.0, 3.0, 1.0, 1.0, 1.0]
                .map(Val::F64)
                .into_iter()
                .chain([Val::I64(500)])
                .collect(),
        ),
        ("branchy", vec![x(suite::branchy_input(300))]),
    ];
    for (name, args) in programs {
        let module = parse(&std::fs::read_to_string(format!("{dir}/{name}.ir")).unwrap()).unwrap();
        let run = |p: &Pipeline| {
            let grad = p.compile_gradient(&module, name, None).unwrap();
            let g = grad
                .value_and_gradient(&mut Workspace::new(), &args)
                .unwrap();
            (bits(&g.gradient), g.tape_peak_bytes)
        };
        let on = run(&checked);
        assert_eq!(on, run(&unchecked), "{name}");
        let rule = checked.derive(&module, name, None).unwrap();
        let mut interp = Interpreter::new(&rule.module);
        let g = value_and_gradient(&mut interp, &rule, &args, &Seeds::default()).unwrap();
        assert_eq!(on, (bits(&g.gradient), g.tape_peak_bytes), "{name}");
    }
}

#[test]
fn the_optimised_normalize_has_a_tape_constant_in_n() {
    let p = Pipeline::new();
    let none = Pipeline::new().with_opt(OptConfig::none());
    let (_, small) = on_jit(&p, 200);
    let (g, large) = on_jit(&p, 800);
    assert_eq!(small, large, "the tape grows with n");
    // As written, the norm's pullback runs in the loop and saves per iteration.
    let (g_none, large_none) = on_jit(&none, 800);
    assert!(large_none > 100 * large, "{large_none} against {large}");
    // The same gradient to rounding: the optimised module computes the norm once
    // instead of once per element.
    for (a, b) in bits(&g).into_iter().zip(bits(&g_none)) {
        let (a, b) = (f64::from_bits(a), f64::from_bits(b));
        assert!((a - b).abs() <= 1e-12 * a.abs().max(b.abs()), "{a} {b}");
    }
}

#[test]
fn each_stage_refuses_with_its_own_error() {
    let p = Pipeline::new();
    let m = normalize_module();
    assert!(matches!(
        p.prepare(&m, "nope"),
        Err(Error::NoSuchFunction(n)) if n == "nope"
    ));
    // `%y` is used before it is defined: parsed, but it does not verify.
    let bad = parse(
        "func @f(%x: f64) -> f64 {
        entry:
            %z = fadd %x, %y
            %y = fmul %x, %x
            ret %z
        }",
    )
    .unwrap();
    let e = p.compile_function(&bad, "f").unwrap_err();
    assert!(matches!(e, Error::Verify(_)), "{e}");
    assert!(
        e.to_string().starts_with("the module does not verify"),
        "{e}"
    );
    // An extern without a derivative: derived lazily (the rule fails if the call
    // runs), so derivation itself refuses only what the function itself does.
    let ext = parse(
        "extern @h(f64) -> f64
        func @f(%x: f64) -> f64 {
        entry:
            %y = call @h(%x)
            ret %y
        }",
    )
    .unwrap();
    assert!(p.derive(&ext, "f", None).is_ok());
    let pushes = parse(
        "func @f(%x: f64) -> f64 {
        entry:
            push %x
            %y = pop f64
            ret %y
        }",
    )
    .unwrap();
    assert!(matches!(
        p.derive(&pushes, "f", None),
        Err(Error::Derive(_))
    ));
    // No host function for it: compiling the primal refuses it.
    assert!(matches!(
        p.compile_function(&ext, "f"),
        Err(Error::Compile(_))
    ));
    // With one, it runs.
    let hosts = gradlift::Hosts::new().bind("h", |a: &mut [Val]| match a {
        [Val::F64(x)] => Ok(vec![Val::F64(2.0 * *x)]),
        _ => Err("h takes an f64".into()),
    });
    let f = Pipeline::new()
        .with_hosts(hosts)
        .compile_function(&ext, "f")
        .unwrap();
    assert_eq!(
        f.call(&mut Workspace::new(), &mut [Val::F64(1.5)]).unwrap(),
        [Val::F64(3.0)]
    );
}
