//! The generated code works whatever the caller has in scope: gradlift's tracing
//! prelude brings `SliceRead::len` (an `i64`), which must not be what the shadow
//! checks call.

#![allow(unused_imports, clippy::needless_range_loop)]

use gradlift::autodiff_reverse;
use gradlift::trace::prelude::*;

#[autodiff_reverse(d_first_sq, Duplicated, Active)]
fn first_sq(x: &[f64]) -> f64 {
    x[0] * x[0]
}

#[test]
fn the_prelude_in_scope() {
    let mut dx = [0.0; 2];
    assert_eq!(d_first_sq(&[3.0, 1.0], &mut dx, 1.0), 9.0);
    assert_eq!(dx, [6.0, 0.0]);
    assert!(d_first_sq_try(&[3.0, 1.0], &mut [0.0], 1.0).is_err());
    assert_eq!(d_first_sq_grad(&[3.0, 1.0]), (9.0, vec![6.0, 0.0]));
    assert_eq!(first_sq(&[2.0]), 4.0);
}

// The program's `const`s, read with their type: `let n: usize = N;`, `N as f64`.

const N: usize = 3;
const SCALE: f64 = 0.5;
mod params {
    pub const POWER: i32 = 3;
}

#[autodiff_reverse(d_head_energy, Duplicated, Active)]
fn head_energy(x: &[f64]) -> f64 {
    let c: f64 = SCALE;
    let p: i32 = params::POWER;
    let n: usize = N;
    let mut s = 0.0;
    for i in 0..n {
        s += c * x[i].powi(2) + (p as f64) * x[i];
    }
    s * (N as f64)
}

#[test]
fn consts_of_the_program() {
    let x = [1.0, -2.0, 0.5, 7.0];
    let (v, dx) = d_head_energy_grad(&x);
    assert_eq!(v, head_energy(&x));
    // 3 * sum_{i<3} (x_i^2 / 2 + 3 x_i): derivative 3 (x_i + 3) for i < 3, 0 after.
    assert_eq!(dx, vec![12.0, 3.0, 10.5, 0.0]);
}
