//! `Autodiff` calls in steady state allocate nothing: after a pattern's first call
//! (which traces nothing, but derives, compiles and sizes its buffers), a gradient
//! copies the arguments into the pattern's retained buffers and the shadows and
//! writable slices back out, and a counting global allocator sees no allocation;
//! forward rules (`jvp`) likewise.

use gradlift::trace::prelude::*;
use gradlift::{Active, Const, Dual, Duplicated, DuplicatedNoNeed, Return, autodiff};

#[path = "common/counting_alloc.rs"]
mod counting_alloc;
use counting_alloc::{Counting, allocations};

#[global_allocator]
static GLOBAL: Counting = Counting;

/// sum_i (w_i x_i - t)^2 * s, with a local buffer of the residuals.
fn loss<T: Real>(x: T::Slice<'_>, w: T::Slice<'_>, t: T, s: T) -> T {
    let mut r = T::alloc(x.len());
    for_range(0, x.len(), (), |i, ()| r.set(i, w.at(i) * x.at(i) - t));
    let sum = for_range(0, x.len(), T::lit(0.0), |i, acc| acc + r.at(i) * r.at(i));
    sum * s
}

/// x_i <- x_i^2 in place, returning the sum.
fn square_in_place<T: Real>(mut x: T::SliceMut<'_>) -> T {
    for_range(0, x.len(), T::lit(0.0), |i, acc| {
        let xi = x.at(i);
        x.set(i, xi * xi);
        acc + xi * xi
    })
}

#[test]
fn the_allocator_counts() {
    assert_eq!(allocations(|| drop(std::hint::black_box(vec![1u8; 10]))), 1);
}

#[test]
fn steady_state_gradients_allocate_nothing() {
    let n = 10_000;
    let x: Vec<f64> = (0..n).map(|i| (i as f64 * 0.37).sin()).collect();
    let w: Vec<f64> = (0..n).map(|i| 1.0 + 0.001 * i as f64).collect();
    let mut dw = vec![0.0; n];
    let mut f = autodiff("loss", loss::<Var>).unwrap();

    // First calls: derive, compile, size the buffers.
    let first = allocations(|| {
        f.gradient((
            Const(&x[..]),
            Duplicated(&w[..], &mut dw[..]),
            Active(0.5),
            Const(2.0),
        ))
        .unwrap();
    });
    assert!(first > 0);
    let mut sum = 0.0;
    for round in 0..4 {
        let t = 0.1 * round as f64;
        let count = allocations(|| {
            let (v, ((), (), dt, ())) = f
                .gradient((
                    Const(&x[..]),
                    Duplicated(&w[..], &mut dw[..]),
                    Active(t),
                    Const(2.0),
                ))
                .unwrap();
            sum += v + dt;
        });
        assert_eq!(count, 0, "round {round}");
    }
    assert!(sum.is_finite());

    // Another pattern: its own buffers, nothing after its first call either.
    let mut dx = vec![0.0; n];
    let p2 = |f: &mut gradlift::Autodiff<_, _>, dx: &mut [f64], dw: &mut [f64]| {
        f.gradient_with(
            Return::Active,
            (
                Duplicated(&x[..], dx),
                DuplicatedNoNeed(&w[..], dw),
                Const(0.5),
                Active(2.0),
            ),
        )
        .unwrap();
    };
    p2(&mut f, &mut dx, &mut dw);
    assert_eq!(allocations(|| p2(&mut f, &mut dx, &mut dw)), 0);
    // Back to the first: still nothing.
    assert_eq!(
        allocations(|| {
            f.gradient((
                Const(&x[..]),
                Duplicated(&w[..], &mut dw[..]),
                Active(0.5),
                Const(2.0),
            ))
            .unwrap();
        }),
        0
    );
    // Seeds other than 1 (a retained buffer too).
    f.pullback(
        &[0.5],
        (
            Const(&x[..]),
            Duplicated(&w[..], &mut dw[..]),
            Active(0.5),
            Const(2.0),
        ),
    )
    .unwrap();
    assert_eq!(
        allocations(|| {
            f.pullback(
                &[3.0],
                (
                    Const(&x[..]),
                    Duplicated(&w[..], &mut dw[..]),
                    Active(0.5),
                    Const(2.0),
                ),
            )
            .unwrap();
        }),
        0
    );

    // The primal.
    f.call((&x[..], &w[..], 0.5, 2.0)).unwrap();
    assert_eq!(
        allocations(|| {
            f.call((&x[..], &w[..], 0.5, 2.0)).unwrap();
        }),
        0
    );

    // Other lengths: the rule's buffers take the new sizes once (`run_rule` reuses
    // a buffer of the same length only), then nothing again.
    let mut half = || {
        f.gradient((
            Const(&x[..n / 2]),
            Duplicated(&w[..n / 2], &mut dw[..n / 2]),
            Active(0.5),
            Const(2.0),
        ))
        .unwrap();
    };
    let count = allocations(&mut half);
    println!("the first call with slices half as long: {count} allocations");
    assert_eq!(allocations(&mut half), 0);
}

#[test]
fn writable_slices_allocate_nothing_either() {
    let n = 1000;
    let x0: Vec<f64> = (0..n).map(|i| i as f64 * 0.01).collect();
    let mut x = x0.clone();
    let mut dx = vec![0.0; n];
    let mut f = autodiff("square_in_place", square_in_place::<Var>).unwrap();
    f.gradient((Duplicated(&mut x[..], &mut dx[..]),)).unwrap();
    for _ in 0..3 {
        x.copy_from_slice(&x0);
        dx.fill(0.0);
        assert_eq!(
            allocations(|| {
                f.gradient((Duplicated(&mut x[..], &mut dx[..]),)).unwrap();
            }),
            0
        );
        assert_eq!(x[3], x0[3] * x0[3]);
        assert_eq!(dx[3], 2.0 * x0[3]);
    }
    f.call((&mut x[..],)).unwrap();
    assert_eq!(
        allocations(|| {
            f.call((&mut x[..],)).unwrap();
        }),
        0
    );
}

#[test]
fn steady_state_forward_rules_allocate_nothing() {
    let n = 10_000;
    let x: Vec<f64> = (0..n).map(|i| (i as f64 * 0.37).sin()).collect();
    let w: Vec<f64> = (0..n).map(|i| 1.0 + 0.001 * i as f64).collect();
    let dw: Vec<f64> = (0..n).map(|i| (i % 3) as f64 - 1.0).collect();
    let mut f = autodiff("loss", loss::<Var>).unwrap();

    // The first call derives and compiles the forward rule, and sizes the buffers.
    // The local buffer and its tangent are allocated by one call (a gradient's
    // forward pass and pullback are two), so the first call spreads the workspace's
    // arena over two chunks, and merges them into one when it returns: from the
    // second call on, nothing.
    let first = allocations(|| {
        f.jvp((
            Const(&x[..]),
            Dual(&w[..], &dw[..]),
            Dual(0.5, 1.0),
            Const(2.0),
        ))
        .unwrap();
    });
    assert!(first > 0);
    let second = allocations(|| {
        f.jvp((
            Const(&x[..]),
            Dual(&w[..], &dw[..]),
            Dual(0.5, 1.0),
            Const(2.0),
        ))
        .unwrap();
    });
    assert_eq!(
        second, 0,
        "the arena's chunks were merged by the first call"
    );
    let mut sum = 0.0;
    for round in 0..4 {
        let t = 0.1 * round as f64;
        let count = allocations(|| {
            let (v, dv) = f
                .jvp((
                    Const(&x[..]),
                    Dual(&w[..], &dw[..]),
                    Dual(t, 1.0),
                    Const(2.0),
                ))
                .unwrap();
            sum += v + dv;
        });
        assert_eq!(count, 0, "round {round}");
    }
    assert!(sum.is_finite());
    // The tangent alone, and a gradient in between: each pattern its own buffers.
    let only = |f: &mut gradlift::Autodiff<_, _>| {
        f.jvp_only((Const(&x[..]), Const(&w[..]), Dual(0.5, 1.0), Dual(2.0, 0.0)))
            .unwrap()
    };
    // Two calls, as above.
    only(&mut f);
    only(&mut f);
    let mut dw_rev = vec![0.0; n];
    f.gradient((
        Const(&x[..]),
        Duplicated(&w[..], &mut dw_rev[..]),
        Active(0.5),
        Const(2.0),
    ))
    .unwrap();
    assert_eq!(
        allocations(|| {
            only(&mut f);
        }),
        0
    );

    // A writable slice and its tangent, written in place.
    let x0: Vec<f64> = (0..1000).map(|i| i as f64 * 0.01).collect();
    let (mut xs, mut dxs) = (x0.clone(), vec![1.0; 1000]);
    let mut sq = autodiff("square_in_place", square_in_place::<Var>).unwrap();
    sq.jvp((Dual(&mut xs[..], &mut dxs[..]),)).unwrap();
    for _ in 0..3 {
        xs.copy_from_slice(&x0);
        dxs.fill(1.0);
        assert_eq!(
            allocations(|| {
                sq.jvp((Dual(&mut xs[..], &mut dxs[..]),)).unwrap();
            }),
            0
        );
        assert_eq!((xs[3], dxs[3]), (x0[3] * x0[3], 2.0 * x0[3]));
    }
}
