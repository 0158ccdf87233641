//! The compiled API from the outside: one compiled gradient shared by threads,
//! errors from generated code as `Err`s that leave the workspace usable, argument
//! checks, and the types' thread-safety.

use std::sync::Arc;

use gradlift::adjoint::RuleConfig;
use gradlift::ir::interp::Val;
use gradlift::ir::{Module, parse, verify};
use gradlift::jit::ErrorKind;
use gradlift::{CompiledFunction, CompiledGradient, Error, Hosts, Seeds, Workspace};

fn example(name: &str) -> Module {
    let path = format!("{}/examples/ir/{name}", env!("CARGO_MANIFEST_DIR"));
    let m = parse(&std::fs::read_to_string(&path).unwrap()).unwrap();
    verify(&m).unwrap();
    m
}

fn module(text: &str) -> Module {
    let m = parse(text).unwrap();
    verify(&m).unwrap();
    m
}

#[test]
fn compiled_code_is_send_and_sync() {
    fn both<T: Send + Sync>() {}
    fn send<T: Send>() {}
    both::<CompiledGradient>();
    both::<CompiledFunction>();
    both::<Hosts>();
    send::<Workspace>();
    send::<gradlift::GradientCache<'static>>();
}

/// Rosenbrock's gradient in closed form.
fn rosenbrock_grad(x: &[f64]) -> Vec<f64> {
    let n = x.len();
    let mut g = vec![0.0; n];
    for i in 0..n - 1 {
        let t = x[i + 1] - x[i] * x[i];
        g[i] += -400.0 * x[i] * t - 2.0 * (1.0 - x[i]);
        g[i + 1] += 200.0 * t;
    }
    g
}

#[test]
fn four_threads_share_one_compiled_gradient() {
    let m = example("rosenbrock.ir");
    let grad = Arc::new(CompiledGradient::new(&m, "rosenbrock").unwrap());
    let inputs: Vec<Vec<f64>> = (0..8)
        .map(|k| {
            (0..1000)
                .map(|i| 0.5 * (0.37 * i as f64 + 0.1 * k as f64).sin())
                .collect()
        })
        .collect();
    // One thread first: the reference.
    let mut ws = Workspace::new();
    let single: Vec<_> = inputs
        .iter()
        .map(|x| {
            grad.value_and_gradient(&mut ws, &[Val::F64s(x.clone())])
                .unwrap()
        })
        .collect();
    for (x, g) in inputs.iter().zip(&single) {
        let Some(Val::F64s(dx)) = &g.gradient[0] else {
            panic!()
        };
        let want = rosenbrock_grad(x);
        for (a, b) in dx.iter().zip(&want) {
            assert!((a - b).abs() <= 1e-10 * b.abs().max(1.0), "{a} vs {b}");
        }
    }
    // Four threads at once, each with its own cache, each computing every input
    // many times in its own order.
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let grad = Arc::clone(&grad);
            let inputs = inputs.clone();
            std::thread::spawn(move || {
                let first = [Val::F64s(inputs[0].clone())];
                let mut cache = grad.prepare(&first).unwrap();
                let mut out = vec![None; inputs.len()];
                for round in 0..25 {
                    for k in 0..inputs.len() {
                        let k = (k + t + round) % inputs.len();
                        let g = cache
                            .value_and_gradient(&[Val::F64s(inputs[k].clone())])
                            .unwrap();
                        out[k] = Some((g.value.to_vec(), g.gradient.to_vec()));
                    }
                }
                out
            })
        })
        .collect();
    for th in threads {
        let out = th.join().unwrap();
        for (k, got) in out.into_iter().enumerate() {
            let (value, gradient) = got.unwrap();
            assert_eq!(Some(value), single[k].value, "input {k}");
            assert_eq!(gradient, single[k].gradient, "input {k}");
        }
    }
}

const AT: &str = "
func @at(%x: [f64], %i: i64) -> f64 {
entry:
    %v = load %x[%i]
    %y = fmul %v, %v
    ret %y
}
";

#[test]
fn errors_in_generated_code_are_errs_and_the_workspace_goes_on() {
    let m = module(AT);
    let grad = CompiledGradient::new(&m, "at").unwrap();
    let mut ws = Workspace::new();
    let x = Val::F64s(vec![1.0, 2.0, 3.0]);
    let e = grad
        .value_and_gradient(&mut ws, &[x.clone(), Val::I64(7)])
        .unwrap_err();
    let Error::Run(je) = &e else { panic!("{e}") };
    assert_eq!(je.func, "at.fwd");
    assert_eq!(je.op, "load");
    assert_eq!(je.kind, ErrorKind::OutOfBounds { index: 7, len: 3 });
    // The forward pass's statements carry the primal's positions: the error
    // points at the `load` the user wrote (line 4 of `AT`), and names its slice.
    assert_eq!(
        e.to_string(),
        "in @at.fwd, load of %x at 4:5: index 7 out of bounds for length 3"
    );
    // The same workspace: a good call, then a bad one, then a good one.
    for i in [1, -1, 2] {
        let r = grad.value_and_gradient(&mut ws, &[x.clone(), Val::I64(i)]);
        if i < 0 {
            assert!(matches!(r, Err(Error::Run(_))));
            continue;
        }
        let g = r.unwrap();
        let xi = [1.0, 2.0, 3.0][i as usize];
        assert_eq!(g.value, Some(vec![Val::F64(xi * xi)]));
        let mut want = vec![0.0; 3];
        want[i as usize] = 2.0 * xi;
        assert_eq!(g.gradient[0], Some(Val::F64s(want)));
    }
    // The cache too.
    let mut cache = grad.prepare(&[x.clone(), Val::I64(0)]).unwrap();
    assert!(cache.value_and_gradient(&[x.clone(), Val::I64(3)]).is_err());
    let g = cache.value_and_gradient(&[x.clone(), Val::I64(2)]).unwrap();
    assert_eq!(g.value, [Val::F64(9.0)]);
    // The primal alone.
    let f = CompiledFunction::new(&m, "at").unwrap();
    let e = f.call(&mut ws, &mut [x.clone(), Val::I64(-4)]).unwrap_err();
    assert_eq!(
        e.to_string(),
        "in @at, load of %x at 4:5: index -4 out of bounds for length 3"
    );
    assert_eq!(
        f.call(&mut ws, &mut [x, Val::I64(0)]).unwrap(),
        [Val::F64(1.0)]
    );
}

#[test]
fn bad_arguments_are_errors_that_say_what() {
    let m = module(AT);
    let grad = CompiledGradient::new(&m, "at").unwrap();
    let mut ws = Workspace::new();
    let x = Val::F64s(vec![1.0, 2.0]);
    let cases: Vec<(Vec<Val>, Seeds, &str)> = vec![
        (
            vec![x.clone()],
            Seeds::default(),
            "@at takes 2 arguments, found 1",
        ),
        (
            vec![Val::F64(1.0), Val::I64(0)],
            Seeds::default(),
            "argument 1 of @at must be [f64], found f64",
        ),
        (
            vec![x.clone(), Val::I64(0)],
            Seeds::results([1.0, 2.0]),
            "@at has 1 float results, given 2 seeds",
        ),
        (
            vec![x.clone(), Val::I64(0)],
            Seeds::default().with_shadows([Some(Val::F64s(vec![0.0; 5]))]),
            "the shadow of parameter 1 of @at must be a [f64] of length 2, given a [f64] of length 5",
        ),
        (
            vec![x.clone(), Val::I64(0)],
            Seeds::default().with_shadows([None, Some(Val::I64(3))]),
            "parameter 2 of @at is const, so it has no shadow",
        ),
    ];
    for (args, seeds, want) in cases {
        let e = grad.value_and_pullback(&mut ws, &args, &seeds).unwrap_err();
        assert!(matches!(e, Error::BadArguments(_)), "{e:?}");
        assert_eq!(e.to_string(), want);
    }
    assert!(matches!(
        CompiledGradient::new(&m, "nope"),
        Err(Error::NoSuchFunction(n)) if n == "nope"
    ));
    let f = CompiledFunction::new(&m, "at").unwrap();
    let e = f.call(&mut ws, &mut [Val::I64(1)]).unwrap_err();
    assert!(matches!(e, Error::BadArguments(_)), "{e:?}");
    assert_eq!(e.to_string(), "@at takes 2 arguments, found 1");
}

#[test]
fn what_cannot_be_derived_or_compiled_is_an_error() {
    // No derivative for a host function: derived lazily, the gradient fails when
    // it reaches the call, naming it.
    let m = example("decls.ir");
    let grad = CompiledGradient::new(&m, "wave").unwrap();
    let e = grad
        .value_and_gradient(&mut Workspace::new(), &[Val::F64(0.5)])
        .unwrap_err();
    assert!(matches!(e, Error::Run(_)), "{e}");
    assert!(
        e.to_string()
            .contains("@wave: `%s = call @host_sin(%x)` at 15:5 needs the derivative of @host_sin"),
        "{e}"
    );
    // With nodiff it derives, but the host function must be bound.
    let id = m.func_by_name("wave").unwrap();
    let path = format!("{}/examples/ir/decls.ir", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(path).unwrap() + "\nnodiff @host_sin\n";
    let m2 = module(&text);
    let config = RuleConfig::default_for(m.sig(id));
    let e = CompiledGradient::with_config(&m2, "wave", &config, &Hosts::new()).unwrap_err();
    assert!(matches!(e, Error::Compile(_)), "{e}");
    assert!(
        e.to_string()
            .contains("@host_sin is an extern function without a host function"),
        "{e}"
    );
    let hosts = Hosts::new().bind("host_sin", |a: &mut [Val]| match a {
        [Val::F64(x)] => Ok(vec![Val::F64(x.sin())]),
        _ => Err("one f64".into()),
    });
    let grad = CompiledGradient::with_config(&m2, "wave", &config, &hosts).unwrap();
    let g = grad
        .value_and_gradient(&mut Workspace::new(), &[Val::F64(0.5)])
        .unwrap();
    // sin treated as a constant: d/dx (c x) = c = sin(0.5).
    assert_eq!(g.gradient, [Some(Val::F64(0.5f64.sin()))]);
}

#[test]
fn a_dup_shadow_accumulates_across_calls() {
    let m = example("rosenbrock.ir");
    let grad = CompiledGradient::new(&m, "rosenbrock").unwrap();
    let x: Vec<f64> = (0..50).map(|i| 0.1 * i as f64 - 2.0).collect();
    let want = rosenbrock_grad(&x);
    let mut ws = Workspace::new();
    let mut shadow = Val::F64s(vec![0.0; 50]);
    for _ in 0..5 {
        let seeds = Seeds::default().with_shadows([Some(shadow.clone())]);
        let g = grad
            .value_and_pullback(&mut ws, &[Val::F64s(x.clone())], &seeds)
            .unwrap();
        shadow = g.gradient[0].clone().unwrap();
    }
    let Val::F64s(acc) = shadow else { panic!() };
    for (a, w) in acc.iter().zip(&want) {
        assert!(
            (a - 5.0 * w).abs() <= 1e-9 * w.abs().max(1.0),
            "{a} vs 5 * {w}"
        );
    }
}
