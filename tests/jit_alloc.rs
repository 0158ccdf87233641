//! A gradient in steady state allocates nothing: a counting global allocator sees
//! zero allocations per `GradientCache::value_and_gradient` call after the first,
//! on rosenbrock at n = 10,000 (the forward pass pushes onto the tape, which keeps
//! its memory), on normalize (a call in a loop) and on a function with a local
//! buffer (a tape buffer in its rule).

use gradlift::adjoint::{RuleConfig, TapePolicy};
use gradlift::ir::interp::Val;
use gradlift::ir::{parse, verify};
use gradlift::{CompiledFunction, CompiledGradient, Hosts, Workspace};

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

#[test]
fn the_allocator_counts() {
    // The counter works: a Vec allocates once, a reserved one not again.
    assert_eq!(allocations(|| drop(std::hint::black_box(vec![1u8; 10]))), 1);
}

#[test]
fn rosenbrock_gradients_allocate_nothing_after_the_first() {
    let m = example("rosenbrock.ir");
    let n = 10_000;
    let x: Vec<f64> = (0..n)
        .map(|i| 0.5 * (0.37 * i as f64 + 0.1).sin())
        .collect();
    let args = [Val::F64s(x.clone())];
    // Both tape policies: saving everything fills the tape with a value per
    // element, which the workspace keeps; the minimal tape holds one index.
    for tape in [TapePolicy::SaveAll, TapePolicy::Minimal] {
        let id = m.func_by_name("rosenbrock").unwrap();
        let config = RuleConfig::default_for(m.sig(id)).with_tape(tape);
        let grad = CompiledGradient::with_config(&m, "rosenbrock", &config, &Hosts::new()).unwrap();
        let mut cache = grad.prepare(&args).unwrap();
        let mut args2 = [Val::F64s(x.iter().map(|v| v * 0.9).collect())];
        let mut sum = 0.0;
        let mut peak = 0;
        for round in 0..5 {
            let arg = if round % 2 == 0 { &args } else { &args2 };
            let count = allocations(|| {
                let g = cache.value_and_gradient(arg).unwrap();
                let Some(Val::F64s(dx)) = &g.gradient[0] else {
                    panic!()
                };
                sum += dx[0];
                peak = g.tape_peak_bytes;
            });
            assert_eq!(count, 0, "{tape}: round {round}");
        }
        assert!(sum.is_finite());
        assert_eq!(cache.workspace().tape().scalars, 0);
        match tape {
            // The tape held what the forward pass saved, and keeps its memory.
            TapePolicy::SaveAll => {
                assert!(cache.workspace().tape().capacity_bytes >= 8 * n);
                assert!(peak >= 8 * n, "{peak}");
            }
            TapePolicy::Minimal => assert!(peak <= 64, "{peak}"),
        }
        // New contents of the same size: still nothing.
        if let Val::F64s(v) = &mut args2[0] {
            v[3] = 2.0;
        }
        assert_eq!(
            allocations(|| {
                cache.value_and_gradient(&args2).unwrap();
            }),
            0
        );
    }

    // The primal alone, with `call_into`.
    let f = CompiledFunction::new(&m, "rosenbrock").unwrap();
    let mut ws = Workspace::new();
    let mut out = Vec::new();
    let mut a = args.clone();
    f.call_into(&mut ws, &mut a, &mut out).unwrap();
    assert_eq!(
        allocations(|| f.call_into(&mut ws, &mut a, &mut out).unwrap()),
        0
    );
}

#[test]
fn local_buffers_and_tape_buffers_allocate_nothing_after_the_first() {
    // normalize (a call in a loop) and a function with a local buffer (a tape
    // buffer in its rule).
    for (file, func, args) in [
        (
            "normalize.ir",
            "normalize",
            vec![
                Val::F64s((0..200).map(|i| (0.3 * i as f64).sin()).collect()),
                Val::F64s(vec![0.0; 200]),
            ],
        ),
        (
            "alloc.ir",
            "sumsq_buffered",
            vec![Val::F64s((0..100).map(|i| 0.01 * i as f64).collect())],
        ),
    ] {
        let m = example(file);
        let grad = CompiledGradient::new(&m, func).unwrap();
        let mut cache = grad.prepare(&args).unwrap();
        for round in 0..3 {
            let count = allocations(|| {
                cache.value_and_gradient(&args).unwrap();
            });
            assert_eq!(count, 0, "{file} round {round}");
        }
    }
}
