//! The functions and helpers that `tests/ndarray.rs` and `tests/nalgebra.rs`
//! share (each includes this file with `#[path]`): two traced programs over
//! slices, and what the tests compare with.

use gradlift::trace::prelude::*;

/// `sum_i w_i (x_i - 1)^2 + x_i x_{i+1}`: every element of `x` meets two others.
pub fn energy<T: Real>(x: T::Slice<'_>, w: T::Slice<'_>) -> T {
    for_range(0, x.len(), T::lit(0.0), |i, acc| {
        let xi = x.at(i);
        let d = xi - 1.0;
        let next = cond((i + 1).lt(x.len()), || x.at(i + 1), || T::lit(0.0));
        acc + w.at(i) * d * d + xi * next
    })
}

/// `x_i <- x_i^2` in place; returns the sum of the new contents.
pub fn square_in_place<T: Real>(mut x: T::SliceMut<'_>) -> T {
    for_range(0, x.len(), T::lit(0.0), |i, acc| {
        let xi = x.at(i);
        x.set(i, xi * xi);
        acc + xi * xi
    })
}

/// The bit patterns, for comparing bit for bit.
pub fn bits(v: &[f64]) -> Vec<u64> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// `sin(a i + 0.3)`, `n` of them.
pub fn data(n: usize, a: f64) -> Vec<f64> {
    (0..n).map(|i| (a * i as f64 + 0.3).sin()).collect()
}
