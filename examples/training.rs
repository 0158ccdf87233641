//! Logistic regression on synthetic images: the loss is generic Rust over slices
//! ([`training_loss`]), differentiated by `gradlift::autodiff`; the images are
//! `Const`, the weights `Duplicated` with a shadow that receives the gradient. As in
//! Enzyme, the shadow accumulates: five gradient calls into one shadow leave five
//! times one gradient in it. Then the same loss as plain Rust with
//! `#[autodiff_reverse]` ([`plain_loss`]), whose `d_plain_loss_grad` returns fresh
//! gradients, for a few steps of gradient descent.
//!
//! Run with `cargo run --example training`.

use gradlift::trace::prelude::*;
use gradlift::{Const, Duplicated, autodiff, autodiff_reverse};

/// Pixels per image.
pub const D: usize = 16;
/// Images.
pub const N: usize = 64;

/// The mean binary cross-entropy of a linear model over `n` images of `d` pixels:
/// `images` holds them one after the other, `weights` holds `d` pixel weights and a
/// bias. Image `i` has label `i % 2`. Natively on `&[f64]`, traced on `Slice<f64>`.
pub fn training_loss<T: Real>(images: T::Slice<'_>, weights: T::Slice<'_>) -> T {
    let d = weights.len() - 1;
    let n = images.len() / d;
    let total = for_range(0, n, T::lit(0.0), |i, acc| {
        let z = for_range(0, d, weights.at(d), |j, z| {
            z + weights.at(j) * images.at(i * d + j)
        });
        let label = T::from_int(i % 2);
        // log(1 + e^z) - label * z: the cross-entropy of sigmoid(z) against the label.
        acc + (z.exp() + 1.0).ln() - label * z
    });
    total / T::from_int(n)
}

/// [`training_loss`] as plain Rust. `#[autodiff_reverse]` adds
/// `d_plain_loss(images, weights, dweights, seed)`, which adds the gradient into
/// `dweights` as the generic path does, and `d_plain_loss_grad(images, weights)`,
/// which returns the loss and a fresh gradient.
#[autodiff_reverse(d_plain_loss, Const, Duplicated, Active)]
pub fn plain_loss(images: &[f64], weights: &[f64]) -> f64 {
    let d = weights.len() - 1;
    let n = images.len() / d;
    let mut total = 0.0;
    for i in 0..n {
        let mut z = weights[d];
        for j in 0..d {
            z += weights[j] * images[i * d + j];
        }
        let label = (i % 2) as f64;
        total += (z.exp() + 1.0).ln() - label * z;
    }
    total / n as f64
}

/// `N` images of `D` pixels, deterministic: odd images (label 1) are brighter on
/// the left half, even ones on the right, plus a pattern that is noise to the model.
pub fn images() -> Vec<f64> {
    let mut px = Vec::with_capacity(N * D);
    for i in 0..N {
        for j in 0..D {
            let left = j < D / 2;
            let signal = if (i % 2 == 1) == left { 0.5 } else { -0.5 };
            px.push(signal + 0.8 * ((i * D + j) as f64 * 0.731).sin());
        }
    }
    px
}

/// Initial weights (`D` pixel weights and a bias), small and deterministic.
pub fn initial_weights() -> Vec<f64> {
    (0..=D).map(|j| 0.05 * (j as f64 * 1.3).cos()).collect()
}

/// Prints and checks the accumulation, then trains a few steps.
pub fn main() -> Result<(), gradlift::Error> {
    let images = images();
    let mut weights = initial_weights();
    let mut loss = autodiff("training_loss", training_loss::<Var>)?;

    // One gradient, into a fresh zero shadow.
    let mut once = vec![0.0; weights.len()];
    let (value, ((), ())) =
        loss.gradient((Const(&images[..]), Duplicated(&weights[..], &mut once[..])))?;
    println!(
        "loss {value:.6} (natively {:.6})",
        training_loss::<f64>(&images, &weights)
    );

    // Five into one shadow: it accumulates five gradients.
    let mut dw = vec![0.0; weights.len()];
    for _ in 0..5 {
        loss.gradient((Const(&images[..]), Duplicated(&weights[..], &mut dw[..])))?;
    }
    let worst = dw
        .iter()
        .zip(&once)
        .map(|(five, one)| (five - 5.0 * one).abs())
        .fold(0.0, f64::max);
    println!("dw[0..4] after 1 call:  {:?}", &once[..4]);
    println!("dw[0..4] after 5 calls: {:?}", &dw[..4]);
    println!("max |dw_5 - 5 dw_1| = {worst:e}");
    assert!(worst <= 1e-12, "the shadow did not accumulate: {worst}");

    // The same loss as plain Rust: `d_plain_loss_grad` gives the value and a fresh
    // gradient (no shadow to zero), equal to the generic path's.
    let (plain_value, plain_dw) = d_plain_loss_grad(&images, &weights);
    let differ = plain_dw
        .iter()
        .zip(&once)
        .map(|(a, b)| (a - b).abs())
        .fold((plain_value - value).abs(), f64::max);
    println!(
        "#[autodiff_reverse] on the plain Rust loss: the same value and gradient (within {differ:e})"
    );
    assert!(differ <= 1e-12, "the two paths differ by {differ}");
    assert!((plain_value - plain_loss(&images, &weights)).abs() <= 1e-12);

    // Gradient descent with fresh gradients: take one, step.
    let rate = 0.5;
    let mut last = value;
    for step in 1..=40 {
        let (l, dw) = d_plain_loss_grad(&images, &weights);
        for (w, g) in weights.iter_mut().zip(&dw) {
            *w -= rate * g;
        }
        if step % 10 == 0 {
            println!("step {step}: loss {l:.6}");
        }
        last = l;
    }
    assert!(
        last < value,
        "training did not lower the loss: {value} -> {last}"
    );
    let correct = (0..N)
        .filter(|&i| {
            let z: f64 = weights[D] + (0..D).map(|j| weights[j] * images[i * D + j]).sum::<f64>();
            (z > 0.0) == (i % 2 == 1)
        })
        .count();
    println!("accuracy after training: {correct}/{N}");
    println!(
        "patterns {:?}, compiled in {:.1} ms",
        loss.patterns(),
        loss.compile_time().as_secs_f64() * 1e3
    );
    Ok(())
}
