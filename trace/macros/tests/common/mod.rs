//! What the attribute's tests share: central finite differences of the native
//! function, and the comparisons of a derivative with them.

#![allow(dead_code)] // Each test crate uses its own subset.

/// Central differences of `f` at `x`, one per element, with a step relative to it.
pub fn fd(f: impl Fn(&[f64]) -> f64, x: &[f64]) -> Vec<f64> {
    (0..x.len())
        .map(|i| {
            let h = 1e-6 * (1.0 + x[i].abs());
            let (mut xp, mut xm) = (x.to_vec(), x.to_vec());
            xp[i] += h;
            xm[i] -= h;
            (f(&xp) - f(&xm)) / (2.0 * h)
        })
        .collect()
}

/// The derivative's value `v` against the native function's `y`, for functions
/// that call `exp`, `sin` or `cos`: the IR's `exp`, `sin` and `cos` of an `f64`
/// are gradlift's own (`gradlift::ir::math`, within 1 ulp of the platform's, the
/// same bits on every machine), so the two may differ in the last bits
/// (elsewhere the value is the native one bit for bit, and the tests say
/// `assert_eq!`).
#[track_caller]
pub fn check_value_own_math(v: f64, y: f64) {
    assert!(
        v == y || (v - y).abs() <= 1e-14 * y.abs(),
        "value {v:e}, native {y:e}"
    );
}

/// `got` agrees with the finite differences `want` to 1e-5 (relative, absolute near 0).
#[track_caller]
pub fn check_close(got: &[f64], want: &[f64]) {
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(want) {
        assert!(
            (g - w).abs() <= 1e-5 * (1.0 + w.abs()),
            "gradient {got:?}, finite differences {want:?}"
        );
    }
}

/// An `f32` gradient against `f64` finite differences, to 1e-4.
#[track_caller]
pub fn check_close_f32(got: &[f32], want: &[f64]) {
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(want) {
        assert!(
            (f64::from(*g) - w).abs() <= 1e-4 * (1.0 + w.abs()),
            "gradient {got:?}, finite differences {want:?}"
        );
    }
}

/// The derivative `df` of a function of one slice (`Duplicated`, `Active` return):
/// its value is the native `f`'s, bit for bit, and its gradient the finite
/// differences of `f`.
#[track_caller]
pub fn check_slice(f: fn(&[f64]) -> f64, df: fn(&[f64], &mut [f64], f64) -> f64, x: &[f64]) {
    let mut dx = vec![0.0; x.len()];
    let v = df(x, &mut dx, 1.0);
    assert_eq!(v, f(x));
    check_close(&dx, &fd(f, x));
}

/// [`check_slice`] for a function that calls `exp`, `sin` or `cos`: the value
/// as [`check_value_own_math`].
#[track_caller]
#[allow(dead_code, reason = "not every test file has such a function")]
pub fn check_slice_own_math(
    f: fn(&[f64]) -> f64,
    df: fn(&[f64], &mut [f64], f64) -> f64,
    x: &[f64],
) {
    let mut dx = vec![0.0; x.len()];
    let v = df(x, &mut dx, 1.0);
    check_value_own_math(v, f(x));
    check_close(&dx, &fd(f, x));
}
