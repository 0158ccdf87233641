//! `f32` functions through `#[autodiff_reverse]`: the `training_loss` of Rust's
//! autodiff RFC over `&[f32]` images and weights, and scalar `f32`. The gradient is
//! checked against central finite differences of the same function written over
//! `f64` (finite differences in `f32` would be mostly rounding), the value against
//! the native `f32` function.

#![allow(clippy::needless_range_loop, clippy::excessive_precision)]

use gradlift::autodiff_reverse;

mod common;
use common::{check_close_f32 as check_close, fd};

// Logistic regression: `images` is `n` rows of `weights.len()` pixels.

#[autodiff_reverse(d_training_loss, Const, Duplicated, Const, Active)]
// The RFC draft's names for the same activities.
#[autodiff_reverse(d_training_loss_rfc, Constant, DuplicatedNoNeed, Constant, Active)]
fn training_loss(images: &[f32], weights: &[f32], labels: &[f32]) -> f32 {
    let d = weights.len();
    let mut loss = 0.0;
    for (k, &y) in labels.iter().enumerate() {
        let mut z = 0.0;
        for j in 0..d {
            z += images[k * d + j] * weights[j];
        }
        let p = 1.0 / (1.0 + (-z).exp());
        loss -= y * (p + 1e-7).ln() + (1.0 - y) * (1.0 - p + 1e-7).ln();
    }
    loss / (labels.len() as f32)
}

/// The same over f64, for the finite differences.
fn training_loss_f64(images: &[f64], weights: &[f64], labels: &[f64]) -> f64 {
    let d = weights.len();
    let mut loss = 0.0;
    for (k, &y) in labels.iter().enumerate() {
        let mut z = 0.0;
        for j in 0..d {
            z += images[k * d + j] * weights[j];
        }
        let p = 1.0 / (1.0 + (-z).exp());
        loss -= y * (p + 1e-7).ln() + (1.0 - y) * (1.0 - p + 1e-7).ln();
    }
    loss / (labels.len() as f64)
}

#[test]
fn training_loss_rfc() {
    // Zero weights: p = 1/2 for every image, the loss is ln 2 (up to the 1e-7).
    let images = [0.5f32, -1.0, 2.0, 0.25, 1.5, -0.5];
    let labels = [1.0f32, 0.0, 1.0];
    assert!((training_loss(&images, &[0.0; 2], &labels) - 2f32.ln()).abs() < 1e-6);
    for w in [[0.0f32, 0.0], [0.3, -0.7], [-1.25, 2.0]] {
        let mut dw = [0.0f32; 2];
        let v = d_training_loss(&images, &w, &mut dw, &labels, 1.0);
        assert!((v - training_loss(&images, &w, &labels)).abs() <= 1e-6 * v.abs());
        let im: Vec<f64> = images.iter().map(|&x| f64::from(x)).collect();
        let lb: Vec<f64> = labels.iter().map(|&x| f64::from(x)).collect();
        let w64: Vec<f64> = w.iter().map(|&x| f64::from(x)).collect();
        check_close(&dw, &fd(|w| training_loss_f64(&im, w, &lb), &w64));
    }
}

// Scalar `f32`: `Active` parameters and result, `f32` literals and constants,
// casts, an early `return`, a local buffer.

#[autodiff_reverse(d_wave, Active, Const, Active, Active)]
fn wave(x: f32, n: usize, a: f32) -> f32 {
    if x < -10.0f32 {
        return a;
    }
    let mut b = vec![0.0; n];
    let mut s: f32 = 0.0;
    for k in 0..n {
        b[k] = (x * (k as f32) + std::f32::consts::FRAC_PI_4).sin();
        s += b[k] * a.powi(2);
    }
    s + (x as i64) as f32 * 0.1
}

fn wave_f64(x: f64, n: usize, a: f64) -> f64 {
    let mut s = 0.0;
    for k in 0..n {
        s += (x * (k as f64) + std::f64::consts::FRAC_PI_4).sin() * a.powi(2);
    }
    s + (x as i64) as f64 * 0.1
}

#[test]
fn scalar_f32() {
    assert_eq!(wave(-20.0, 3, 2.5), 2.5);
    assert_eq!(wave(0.0, 2, 1.0), 2.0 * std::f32::consts::FRAC_PI_4.sin());
    for (x, a) in [(0.5f32, 1.5f32), (-3.2, 0.7), (2.25, -1.1)] {
        let (v, dx, da) = d_wave(x, 3, a, 1.0);
        assert!((v - wave(x, 3, a)).abs() <= 1e-6 * (1.0 + v.abs()));
        let want = fd(|p| wave_f64(p[0], 3, p[1]), &[f64::from(x), f64::from(a)]);
        check_close(&[dx, da], &want);
    }
    let (v, dx, da) = d_wave(-20.0, 3, 2.5, 1.0);
    assert_eq!((v, dx, da), (2.5, 0.0, 1.0));
}

// Constants only, combined: the operations on f32 constants.

#[autodiff_reverse(d_consts, Active, Active)]
fn consts(x: f32) -> f32 {
    let c = 2.0f32 * 3.0;
    let e = -c;
    let m = -(1.5f32);
    x * c + e.exp() + m.sin() + (-x)
}

#[test]
fn f32_constants() {
    let (v, dx) = d_consts(0.5, 1.0);
    assert!((v - consts(0.5)).abs() <= 1e-6);
    assert_eq!(dx, 5.0);
}

#[test]
fn the_rfc_activity_names_mean_the_same() {
    let images = [0.5f32, -1.0, 2.0, 0.25, 1.5, -0.5];
    let labels = [1.0f32, 0.0, 1.0];
    let weights = [0.3f32, -0.7];
    let (mut dw, mut dw_rfc) = ([0.0f32; 2], [0.0f32; 2]);
    let a = d_training_loss(&images, &weights, &mut dw, &labels, 1.0);
    let b = d_training_loss_rfc(&images, &weights, &mut dw_rfc, &labels, 1.0);
    assert_eq!(a.to_bits(), b.to_bits());
    assert_eq!(dw.map(f32::to_bits), dw_rfc.map(f32::to_bits));
    assert!(dw.iter().any(|&g| g != 0.0), "{dw:?}");
}
