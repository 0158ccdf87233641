//! Checkpointing from the attributes: a `for` loop after `checkpoint!(S);` or
//! `checkpoint!();`, and helpers marked `#[differentiable(checkpoint)]`. Each
//! derivative must equal, bit for bit, the derivative of the same function
//! without the marks (the oracle: the unchecked rule), and finite differences.

use gradlift::{autodiff_reverse, checkpoint, differentiable};

#[autodiff_reverse(d_sim, Active, Active, Const, Const, Active)]
fn sim(u0: f64, a: f64, steps: usize, snapshots: i64) -> f64 {
    let mut u = u0;
    let mut w = 0.0;
    checkpoint!(snapshots);
    for k in 0..steps {
        let du = a * u - u * u * u;
        u += 0.01 * du;
        if k % 3 == 0 {
            w += u.sin() * a;
        }
    }
    u * u + w
}

#[autodiff_reverse(d_sim_auto, Active, Active, Const, Const, Active)]
fn sim_auto(u0: f64, a: f64, steps: usize, _unused: i64) -> f64 {
    let mut u = u0;
    let mut w = 0.0;
    checkpoint!();
    for k in 0..steps {
        let du = a * u - u * u * u;
        u += 0.01 * du;
        if k % 3 == 0 {
            w += u.sin() * a;
        }
    }
    u * u + w
}

#[autodiff_reverse(d_plain, Active, Active, Const, Const, Active)]
fn plain(u0: f64, a: f64, steps: usize, _unused: i64) -> f64 {
    let mut u = u0;
    let mut w = 0.0;
    for k in 0..steps {
        let du = a * u - u * u * u;
        u += 0.01 * du;
        if k % 3 == 0 {
            w += u.sin() * a;
        }
    }
    u * u + w
}

fn bits(t: (f64, f64, f64)) -> [u64; 3] {
    [t.0.to_bits(), t.1.to_bits(), t.2.to_bits()]
}

#[test]
fn a_checkpointed_for_loop_is_the_unchecked_one_bit_for_bit() {
    for steps in [0usize, 1, 2, 7, 40, 300] {
        let want = bits(d_plain(0.4, 1.3, steps, 0, 1.0));
        for s in [1i64, 2, 3, 10, 17, 0, -4] {
            assert_eq!(
                bits(d_sim(0.4, 1.3, steps, s, 1.0)),
                want,
                "steps {steps}, snapshots {s}"
            );
        }
        assert_eq!(bits(d_sim_auto(0.4, 1.3, steps, 0, 1.0)), want);
        // The function itself is as written.
        assert_eq!(sim(0.4, 1.3, steps, 3), plain(0.4, 1.3, steps, 0));
        assert_eq!(sim_auto(0.4, 1.3, steps, 0), plain(0.4, 1.3, steps, 0));
    }
    // Against central differences.
    let (_, du0, da) = d_sim(0.4, 1.3, 300, 5, 1.0);
    let h = 1e-6;
    let fd_u = (sim(0.4 + h, 1.3, 300, 5) - sim(0.4 - h, 1.3, 300, 5)) / (2.0 * h);
    let fd_a = (sim(0.4, 1.3 + h, 300, 5) - sim(0.4, 1.3 - h, 300, 5)) / (2.0 * h);
    assert!(
        (du0 - fd_u).abs() < 1e-6 * fd_u.abs().max(1.0),
        "{du0} {fd_u}"
    );
    assert!(
        (da - fd_a).abs() < 1e-6 * fd_a.abs().max(1.0),
        "{da} {fd_a}"
    );
}

#[differentiable(checkpoint)]
fn step_ck(u: f64, a: f64) -> f64 {
    let mut x = u;
    for _ in 0..5 {
        x += 0.01 * (a * x - x * x * x);
    }
    x
}

#[differentiable]
fn step_plain(u: f64, a: f64) -> f64 {
    let mut x = u;
    for _ in 0..5 {
        x += 0.01 * (a * x - x * x * x);
    }
    x
}

#[autodiff_reverse(d_calls_ck, Active, Active, Const, Active)]
fn calls_ck(u0: f64, a: f64, steps: usize) -> f64 {
    let mut u = u0;
    for _ in 0..steps {
        u = step_ck(u, a);
    }
    u
}

#[autodiff_reverse(d_calls_plain, Active, Active, Const, Active)]
fn calls_plain(u0: f64, a: f64, steps: usize) -> f64 {
    let mut u = u0;
    for _ in 0..steps {
        u = step_plain(u, a);
    }
    u
}

#[test]
fn a_checkpointed_helper_is_the_unchecked_one_bit_for_bit() {
    for steps in [0usize, 1, 9, 50] {
        assert_eq!(
            bits(d_calls_ck(0.3, 0.9, steps, 1.0)),
            bits(d_calls_plain(0.3, 0.9, steps, 1.0)),
            "steps {steps}"
        );
        assert_eq!(calls_ck(0.3, 0.9, steps), calls_plain(0.3, 0.9, steps));
    }
    assert_eq!(step_ck(0.3, 0.9), step_plain(0.3, 0.9));
}
