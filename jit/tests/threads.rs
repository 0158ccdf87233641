//! `Compiled` is `Send + Sync`; a `Workspace` is per thread. Four threads calling
//! one compiled module at once, each with its own workspace, get what one thread
//! gets.

mod support;

use std::sync::Arc;

use gradlift_ir::interp::Val;
use gradlift_jit::{Compiled, Workspace, compile};
use support::{example, same_all, wave};

#[test]
fn compiled_is_send_and_sync_and_a_workspace_is_send() {
    fn send_sync<T: Send + Sync>() {}
    fn send<T: Send>() {}
    send_sync::<Compiled>();
    send::<Workspace>();
}

/// Calls of several programs (slices, loops, calls, allocs, errors), each with
/// its arguments; returns results and final arguments.
fn workload(c: &Compiled, ws: &mut Workspace, round: usize) -> Vec<Vec<Val>> {
    let mut out = Vec::new();
    for k in 0..20 {
        let n = 50 + 37 * ((k + round) % 7);
        let x = Val::F64s(wave(n, 0.1 * k as f64));
        for name in [
            "rosenbrock",
            "sumsq",
            "logsumexp",
            "branchy",
            "sumsq_buffered",
        ] {
            let mut args = [x.clone()];
            let r = c.call_by_name(ws, name, &mut args).unwrap();
            out.push(r);
        }
        let mut args = [x.clone(), Val::F64s(wave(n, 1.0))];
        out.push(c.call_by_name(ws, "normalize", &mut args).unwrap());
        let mut args = [Val::F64s(wave(n, 0.5)), Val::F64(1.5)];
        out.push(c.call_by_name(ws, "scale_sum", &mut args).unwrap());
        out.push(args.to_vec());
        let e = c
            .call_by_name(ws, "fib", &mut [Val::I64(20 + (k as i64 % 3))])
            .unwrap();
        out.push(e);
    }
    out
}

/// One module holding several examples (their names do not clash).
fn merged() -> gradlift_ir::Module {
    let mut text = String::new();
    for file in [
        "rosenbrock.ir",
        "sumsq.ir",
        "logsumexp.ir",
        "branchy.ir",
        "normalize.ir",
        "alloc.ir",
        "mutation.ir",
        "recursion.ir",
    ] {
        let path = format!("{}/../examples/ir/{file}", env!("CARGO_MANIFEST_DIR"));
        text.push_str(&std::fs::read_to_string(path).unwrap());
        text.push('\n');
        let _ = example(file);
    }
    support::module(&text)
}

#[test]
fn four_threads_share_one_compiled_module() {
    let c = Arc::new(compile(&merged()).unwrap());
    let mut ws = Workspace::new();
    let single: Vec<Vec<Vec<Val>>> = (0..4).map(|t| workload(&c, &mut ws, t)).collect();
    let handles: Vec<_> = (0..4)
        .map(|t| {
            let c = Arc::clone(&c);
            std::thread::spawn(move || {
                let mut ws = Workspace::new();
                let mut last = Vec::new();
                for _ in 0..5 {
                    last = workload(&c, &mut ws, t);
                }
                last
            })
        })
        .collect();
    for (t, h) in handles.into_iter().enumerate() {
        let got = h.join().unwrap();
        assert_eq!(got.len(), single[t].len());
        for (a, b) in got.iter().zip(&single[t]) {
            assert!(same_all(a, b), "thread {t}: {a:?} vs {b:?}");
        }
    }
}
