//! `CompiledGradient::gradient_args`, the zero-copy form: against closed forms, with
//! shadows that accumulate, a `mut` slice written in place, scalar cotangents,
//! wrong shadows refused, and no allocation in steady state.

use gradlift::ir::interp::Val;
use gradlift::ir::{parse, verify};
use gradlift::jit::Arg;
use gradlift::{CompiledGradient, Error, Workspace};

#[path = "common/counting_alloc.rs"]
mod counting_alloc;
use counting_alloc::{Counting, allocations};

#[global_allocator]
static GLOBAL: Counting = Counting;

fn example(name: &str) -> gradlift::ir::Module {
    let path = format!("{}/examples/ir/{name}", env!("CARGO_MANIFEST_DIR"));
    let m = parse(&std::fs::read_to_string(&path).unwrap()).unwrap();
    verify(&m).unwrap();
    m
}

/// Rosenbrock's gradient, by hand.
fn rosenbrock_gradient(x: &[f64]) -> Vec<f64> {
    let mut g = vec![0.0; x.len()];
    for i in 0..x.len().saturating_sub(1) {
        let a = x[i + 1] - x[i] * x[i];
        g[i] += -400.0 * a * x[i] - 2.0 * (1.0 - x[i]);
        g[i + 1] += 200.0 * a;
    }
    g
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-12 * (1.0 + a.abs().max(b.abs()))
}

#[test]
fn rosenbrock_matches_the_closed_form_and_shadows_accumulate() {
    let grad = CompiledGradient::new(&example("rosenbrock.ir"), "rosenbrock").unwrap();
    let x: Vec<f64> = (0..1000)
        .map(|i| 0.5 * (0.37 * i as f64 + 0.1).sin())
        .collect();
    let want = rosenbrock_gradient(&x);
    let mut dx = vec![0.0; x.len()];
    let (mut value, mut grads) = (Vec::new(), Vec::new());
    let mut ws = Workspace::new();
    for round in 1..=2 {
        let peak = grad
            .gradient_args(
                &mut ws,
                &mut [Arg::F64s(&x)],
                &mut [Arg::F64sMut(&mut dx)],
                &[],
                &mut value,
                &mut grads,
            )
            .unwrap()
            .peak_bytes;
        // The minimal tape: the loop's last index, not a value per element.
        assert!(peak <= 64, "{peak}");
        let f: f64 = x
            .windows(2)
            .map(|w| 100.0 * (w[1] - w[0] * w[0]).powi(2) + (1.0 - w[0]).powi(2))
            .sum();
        let Val::F64(v) = value[0] else { panic!() };
        assert!(close(v, f), "{v} {f}");
        assert!(grads.is_empty());
        for (g, w) in dx.iter().zip(&want) {
            assert!(close(*g, round as f64 * w), "round {round}: {g} vs {w}");
        }
    }
    assert_eq!(ws.tape().scalars, 0);
}

#[test]
fn a_mut_slice_is_written_in_place_and_scalar_cotangents_come_back() {
    // scale_sum(x, a): x <- a x, then sum x. d/da = sum of the original x; the
    // shadow of x, seeded with zeros, ends as a (the cotangent of the initial x).
    let grad = CompiledGradient::new(&example("mutation.ir"), "scale_sum").unwrap();
    let x0 = [1.0, -2.0, 0.5];
    let mut x = x0;
    let mut dx = [0.0; 3];
    let (mut value, mut grads) = (Vec::new(), Vec::new());
    grad.gradient_args(
        &mut Workspace::new(),
        &mut [Arg::F64sMut(&mut x), Arg::F64(3.0)],
        &mut [Arg::F64sMut(&mut dx)],
        &[2.0],
        &mut value,
        &mut grads,
    )
    .unwrap();
    assert_eq!(x, x0.map(|v| 3.0 * v));
    assert_eq!(value, [Val::F64(3.0 * (1.0 - 2.0 + 0.5))]);
    // Seeded with 2: d/da = 2 sum x0, d/dx0 = 2 a.
    assert_eq!(grads, [Val::F64(2.0 * (1.0 - 2.0 + 0.5))]);
    assert_eq!(dx, [6.0; 3]);
}

#[test]
fn wrong_shadows_and_seeds_are_refused() {
    let grad = CompiledGradient::new(&example("sumsq.ir"), "sumsq").unwrap();
    let x = [1.0, 2.0];
    let (mut value, mut grads) = (Vec::new(), Vec::new());
    let mut ws = Workspace::new();
    let mut short = [0.0];
    let mut ok = [0.0; 2];
    let cases: [(&mut [Arg<'_>], &[f64], &str); 3] = [
        (&mut [], &[], "takes 1 shadows, given 0"),
        (
            &mut [Arg::F64sMut(&mut short)],
            &[],
            "as long as the parameter",
        ),
        (
            &mut [Arg::F64sMut(&mut ok)],
            &[1.0, 2.0],
            "takes 1 seeds, given 2",
        ),
    ];
    for (shadows, seeds, message) in cases {
        let err = grad
            .gradient_args(
                &mut ws,
                &mut [Arg::F64s(&x)],
                shadows,
                seeds,
                &mut value,
                &mut grads,
            )
            .unwrap_err();
        assert!(
            matches!(&err, Error::BadArguments(m) if m.contains(message)),
            "{err}"
        );
    }
    // A read-only slice where the shadow must be writable, and a wrong argument.
    let err = grad
        .gradient_args(
            &mut ws,
            &mut [Arg::F64s(&x)],
            &mut [Arg::F64s(&x)],
            &[],
            &mut value,
            &mut grads,
        )
        .unwrap_err();
    assert!(matches!(err, Error::BadArguments(_)), "{err}");
    let err = grad
        .gradient_args(
            &mut ws,
            &mut [Arg::F64(1.0)],
            &mut [Arg::F64sMut(&mut ok)],
            &[],
            &mut value,
            &mut grads,
        )
        .unwrap_err();
    assert!(err.to_string().contains("must be [f64]"), "{err}");
}

#[test]
fn steady_state_calls_allocate_nothing() {
    for (file, func) in [("rosenbrock.ir", "rosenbrock"), ("branchy.ir", "branchy")] {
        let grad = CompiledGradient::new(&example(file), func).unwrap();
        let x: Vec<f64> = (0..5000).map(|i| (0.37 * i as f64 + 0.1).sin()).collect();
        let mut dx = vec![0.0; x.len()];
        let (mut value, mut grads) = (Vec::new(), Vec::new());
        let mut ws = Workspace::new();
        let mut call = || {
            grad.gradient_args(
                &mut ws,
                &mut [Arg::F64s(&x)],
                &mut [Arg::F64sMut(&mut dx)],
                &[],
                &mut value,
                &mut grads,
            )
            .unwrap();
        };
        call();
        for round in 0..3 {
            assert_eq!(allocations(&mut call), 0, "{func} round {round}");
        }
    }
}
