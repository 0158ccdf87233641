//! `NAME` in steady state allocates nothing: after a thread's first call (which,
//! the first time in the process, traces, derives and compiles; and then sizes the
//! thread's workspace and buffers), a counting global allocator sees no allocation,
//! on the thread that compiled and on any other; for `#[autodiff_reverse]` and
//! `#[autodiff_forward]`.

use gradlift::{autodiff_forward, autodiff_reverse};

#[path = "../../../tests/common/counting_alloc.rs"]
mod counting_alloc;
use counting_alloc::{Counting, allocations};

#[global_allocator]
static GLOBAL: Counting = Counting;

/// sum_i (w_i x_i - t)^2 s, with the squares through a writable buffer.
#[autodiff_reverse(d_loss, Const, Duplicated, Active, Active, Duplicated, Active)]
#[autodiff_forward(f_loss, Const, Dual, Dual, Dual, Dual, Dual)]
fn loss(x: &[f64], w: &[f64], t: f64, s: f64, r: &mut [f64]) -> f64 {
    let mut sum = 0.0;
    for i in 0..x.len() {
        r[i] = w[i] * x[i] - t;
        sum += r[i] * r[i];
    }
    sum * s
}

/// Calls `d_loss` 100 times after a first call, counting the allocations of the
/// later ones.
fn steady_allocations(n: usize) -> usize {
    let x: Vec<f64> = (0..n).map(|i| i as f64 / n as f64).collect();
    let w = vec![0.5; n];
    let (mut dw, mut r, mut dr) = (vec![0.0; n], vec![0.0; n], vec![0.0; n]);
    let first = d_loss(&x, &w, &mut dw, 0.1, 2.0, &mut r, &mut dr, 1.0);
    assert!((first.0 - loss(&x, &w, 0.1, 2.0, &mut r)).abs() < 1e-9 * first.0.abs());
    allocations(|| {
        for _ in 0..100 {
            let again = d_loss(&x, &w, &mut dw, 0.1, 2.0, &mut r, &mut dr, 1.0);
            assert_eq!(again, first);
        }
    })
}

/// Calls `f_loss` 100 times after a first call, counting the allocations of the
/// later ones.
fn steady_forward_allocations(n: usize) -> usize {
    let x: Vec<f64> = (0..n).map(|i| i as f64 / n as f64).collect();
    let (w, dw) = (vec![0.5; n], vec![1.0; n]);
    let (mut r, mut dr) = (vec![0.0; n], vec![0.0; n]);
    let first = f_loss(&x, &w, &dw, 0.1, 0.0, 2.0, 0.0, &mut r, &mut dr);
    assert!((first.0 - loss(&x, &w, 0.1, 2.0, &mut r)).abs() < 1e-9 * first.0.abs());
    allocations(|| {
        for _ in 0..100 {
            let again = f_loss(&x, &w, &dw, 0.1, 0.0, 2.0, 0.0, &mut r, &mut dr);
            assert_eq!(again, first);
        }
    })
}

#[test]
fn the_allocator_counts() {
    assert_eq!(allocations(|| drop(std::hint::black_box(vec![1u8; 10]))), 1);
}

#[test]
fn steady_state_calls_allocate_nothing() {
    assert_eq!(steady_allocations(1000), 0);
    // On other threads, each with its own workspace, at once.
    std::thread::scope(|s| {
        let hs: Vec<_> = (0..4)
            .map(|k| s.spawn(move || steady_allocations(10 + k)))
            .collect();
        for h in hs {
            assert_eq!(h.join().unwrap(), 0);
        }
    });
}

#[test]
fn steady_state_forward_calls_allocate_nothing() {
    assert_eq!(steady_forward_allocations(1000), 0);
    std::thread::scope(|s| {
        let hs: Vec<_> = (0..4)
            .map(|k| s.spawn(move || steady_forward_allocations(10 + k)))
            .collect();
        for h in hs {
            assert_eq!(h.join().unwrap(), 0);
        }
    });
}
