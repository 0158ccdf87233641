//! A small classifier trained on a real data set: Fisher's iris flowers (150
//! samples, 4 measurements, 3 species), as the crate `linfa-datasets` ships it
//! inside its package (nothing is downloaded at run time).
//!
//! The model is a multilayer perceptron, 4 inputs, 16 tanh hidden units and 3
//! logits, written as ordinary generic Rust; its loss is the mean softmax
//! cross-entropy of a minibatch. gradlift traces the loss once and compiles its
//! gradient with respect to the 131 parameters; Adam trains on 120 flowers and
//! the other 30 are held out. It prints the loss and the accuracy on both sets
//! per epoch, and writes `docs/img/iris_training.svg`.
//!
//! `cargo run --release --example iris_classifier [-- --quick] [-- --svg PATH]`
//! (`--quick`: 10 epochs and no plot; what CI runs).

use gradlift::trace::prelude::*;
use gradlift::{Const, Duplicated, autodiff};
use plotters::prelude::*;
use rng::Rng;

#[path = "fuzz/rng.rs"]
#[allow(dead_code)] // The fuzzer's generator; this example uses a part of it.
mod rng;
#[path = "common/support.rs"]
mod support;

/// Inputs, hidden units, classes.
const F: i64 = 4;
const H: i64 = 16;
const C: i64 = 3;
/// Where each block of parameters starts: W1 (F x H, row-major), b1 (H),
/// W2 (H x C), b2 (C).
const W1: i64 = 0;
const B1: i64 = W1 + F * H;
const W2: i64 = B1 + H;
const B2: i64 = W2 + H * C;
const PARAMS: usize = (B2 + C) as usize;

/// The three logits of sample `i` of `x` (row-major, `F` columns).
fn logits<T: Real>(theta: T::Slice<'_>, x: T::Slice<'_>, i: T::Int) -> (T, T, T) {
    let b2 = (theta.at(B2), theta.at(B2 + 1), theta.at(B2 + 2));
    for_range(0, H, b2, |j, (z0, z1, z2)| {
        let a = for_range(0, F, theta.at(j + B1), |k, s| {
            s + x.at(i * F + k) * theta.at(k * H + j + W1)
        });
        let h = a.tanh();
        let w = j * C + W2;
        (
            z0 + h * theta.at(w),
            z1 + h * theta.at(w + 1),
            z2 + h * theta.at(w + 2),
        )
    })
}

/// The mean softmax cross-entropy of the `n` samples of `x` against their one-hot
/// labels `y` (`C` per sample).
fn loss<T: Real>(theta: T::Slice<'_>, x: T::Slice<'_>, y: T::Slice<'_>, n: T::Int, inv_n: T) -> T {
    let sum = for_range(0, n, T::lit(0.0), |i, acc| {
        let (z0, z1, z2) = logits::<T>(theta, x, i);
        let lse = (z0.exp() + z1.exp() + z2.exp()).ln();
        let zy = y.at(i * C) * z0 + y.at(i * C + 1) * z1 + y.at(i * C + 2) * z2;
        acc + lse - zy
    });
    sum * inv_n
}

/// Fraction of the samples whose largest logit is their class.
fn accuracy(theta: &[f64], x: &[f64], labels: &[usize]) -> f64 {
    let right = (0..labels.len())
        .filter(|&i| {
            let (z0, z1, z2) = logits::<f64>(theta, x, i as i64);
            let best = if z0 >= z1 && z0 >= z2 {
                0
            } else if z1 >= z2 {
                1
            } else {
                2
            };
            best == labels[i]
        })
        .count();
    right as f64 / labels.len() as f64
}

fn one_hot(labels: &[usize]) -> Vec<f64> {
    labels
        .iter()
        .flat_map(|&c| (0..C as usize).map(move |k| if k == c { 1.0 } else { 0.0 }))
        .collect()
}

struct Epoch {
    loss: f64,
    train: f64,
    test: f64,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (quick, svg) = support::options("docs/img/iris_training.svg")?;
    let epochs = if quick { 10 } else { 60 };

    // The data: 150 flowers; a fixed shuffle, 120 to train on, 30 held out; each
    // measurement standardised with the training set's mean and deviation.
    let iris = linfa_datasets::iris();
    let (records, targets) = (&iris.records, &iris.targets);
    let samples = targets.len();
    let mut rng = Rng(2026);
    let mut order: Vec<usize> = (0..samples).collect();
    support::shuffle(&mut rng, &mut order);
    let (train_idx, test_idx) = order.split_at(120);
    let mut mean = [0.0; F as usize];
    let mut dev = [0.0; F as usize];
    for k in 0..F as usize {
        let col: Vec<f64> = train_idx.iter().map(|&i| records[[i, k]]).collect();
        mean[k] = col.iter().sum::<f64>() / col.len() as f64;
        dev[k] = (col.iter().map(|v| (v - mean[k]).powi(2)).sum::<f64>() / col.len() as f64).sqrt();
    }
    let rows = |idx: &[usize]| -> Vec<f64> {
        idx.iter()
            .flat_map(|&i| (0..F as usize).map(move |k| (records[[i, k]] - mean[k]) / dev[k]))
            .collect()
    };
    let (x_train, x_test) = (rows(train_idx), rows(test_idx));
    let label = |idx: &[usize]| -> Vec<usize> { idx.iter().map(|&i| targets[i]).collect() };
    let (y_train, y_test) = (label(train_idx), label(test_idx));

    // The loss, traced once; its gradient compiled on the first call.
    let mut f = autodiff("loss", loss::<Var>)?;
    let mut theta: Vec<f64> = (0..PARAMS).map(|_| 0.5 * (rng.unit() - 0.5)).collect();
    let mut grad = vec![0.0; PARAMS];
    // Adam.
    let (lr, b1, b2, eps) = (0.02, 0.9, 0.999, 1e-8);
    let (mut m, mut v) = (vec![0.0; PARAMS], vec![0.0; PARAMS]);
    let mut t = 0;
    let batch = 16;
    let mut history = Vec::new();

    // The compiled gradient against central differences of the loss run natively
    // (the same generic function on f64), on the whole training set.
    let y_all = one_hot(&y_train);
    let n_all = y_train.len();
    let native = |th: &[f64]| loss::<f64>(th, &x_train, &y_all, n_all as i64, 1.0 / n_all as f64);
    f.gradient((
        Duplicated(&theta[..], &mut grad[..]),
        Const(&x_train[..]),
        Const(&y_all[..]),
        Const(n_all as i64),
        Const(1.0 / n_all as f64),
    ))?;
    let mut worst: f64 = 0.0;
    let mut probe = theta.clone();
    for k in 0..PARAMS {
        let h = 1e-6;
        probe[k] = theta[k] + h;
        let up = native(&probe);
        probe[k] = theta[k] - h;
        let down = native(&probe);
        probe[k] = theta[k];
        let fd = (up - down) / (2.0 * h);
        worst = worst.max((grad[k] - fd).abs() / (1e-6 + fd.abs()));
    }
    println!(
        "gradient at the start against central differences: largest relative difference {worst:.1e}"
    );
    if worst > 1e-5 {
        return Err(format!("the gradient differs from finite differences by {worst:e}").into());
    }
    println!(
        "iris: {} flowers to train on, {} held out; a {F}-{H}-{C} perceptron ({PARAMS} parameters), Adam, minibatches of {batch}",
        y_train.len(),
        y_test.len()
    );
    println!("epoch   loss    train acc  test acc");
    for epoch in 1..=epochs {
        let mut perm: Vec<usize> = (0..y_train.len()).collect();
        support::shuffle(&mut rng, &mut perm);
        let mut total = 0.0;
        for chunk in perm.chunks(batch) {
            let xb: Vec<f64> = chunk
                .iter()
                .flat_map(|&i| {
                    x_train[i * F as usize..(i + 1) * F as usize]
                        .iter()
                        .copied()
                })
                .collect();
            let yb = one_hot(&chunk.iter().map(|&i| y_train[i]).collect::<Vec<_>>());
            grad.fill(0.0);
            let nb = chunk.len();
            let (value, _) = f.gradient((
                Duplicated(&theta[..], &mut grad[..]),
                Const(&xb[..]),
                Const(&yb[..]),
                Const(nb as i64),
                Const(1.0 / nb as f64),
            ))?;
            total += value * nb as f64;
            t += 1;
            for k in 0..PARAMS {
                m[k] = b1 * m[k] + (1.0 - b1) * grad[k];
                v[k] = b2 * v[k] + (1.0 - b2) * grad[k] * grad[k];
                let mh = m[k] / (1.0 - f64::powi(b1, t));
                let vh = v[k] / (1.0 - f64::powi(b2, t));
                theta[k] -= lr * mh / (vh.sqrt() + eps);
            }
        }
        let e = Epoch {
            loss: total / y_train.len() as f64,
            train: accuracy(&theta, &x_train, &y_train),
            test: accuracy(&theta, &x_test, &y_test),
        };
        println!(
            "{epoch:5}  {:.4}   {:6.1}%   {:6.1}%",
            e.loss,
            100.0 * e.train,
            100.0 * e.test
        );
        history.push(e);
    }
    let last = history.last().ok_or("no epoch")?;
    // Iris is nearly separable: a trained perceptron classifies at least 90% of
    // the held-out flowers (a model that learned nothing: about 33%).
    let floor = if quick { 0.8 } else { 0.9 };
    if last.test < floor {
        return Err(format!(
            "held-out accuracy {:.1}% is below {}%",
            last.test * 100.0,
            floor * 100.0
        )
        .into());
    }
    if let Some(path) = svg {
        plot(&path, &history)?;
        println!("wrote {path}");
    }
    Ok(())
}

/// Loss and accuracies per epoch.
fn plot(path: &str, history: &[Epoch]) -> Result<(), Box<dyn std::error::Error>> {
    let root = SVGBackend::new(path, (900, 360)).into_drawing_area();
    root.fill(&WHITE)?;
    let (left, right) = root.split_horizontally(450);
    let n = history.len() as f64;
    let top = history.iter().map(|e| e.loss).fold(0.0, f64::max) * 1.1;
    let mut chart = ChartBuilder::on(&left)
        .caption("training loss (cross-entropy)", ("sans-serif", 16))
        .margin(10)
        .x_label_area_size(30)
        .y_label_area_size(40)
        .build_cartesian_2d(1.0..n, 0.0..top)?;
    chart.configure_mesh().x_desc("epoch").draw()?;
    chart.draw_series(LineSeries::new(
        history
            .iter()
            .enumerate()
            .map(|(k, e)| ((k + 1) as f64, e.loss)),
        BLACK.stroke_width(2),
    ))?;
    let mut chart = ChartBuilder::on(&right)
        .caption("accuracy", ("sans-serif", 16))
        .margin(10)
        .x_label_area_size(30)
        .y_label_area_size(40)
        .build_cartesian_2d(1.0..n, 0.0..100.0)?;
    chart.configure_mesh().x_desc("epoch").y_desc("%").draw()?;
    chart
        .draw_series(LineSeries::new(
            history
                .iter()
                .enumerate()
                .map(|(k, e)| ((k + 1) as f64, 100.0 * e.train)),
            BLUE.stroke_width(2),
        ))?
        .label("train (120)")
        .legend(|(x, y)| PathElement::new([(x, y), (x + 16, y)], BLUE));
    chart
        .draw_series(LineSeries::new(
            history
                .iter()
                .enumerate()
                .map(|(k, e)| ((k + 1) as f64, 100.0 * e.test)),
            RED.stroke_width(2),
        ))?
        .label("held out (30)")
        .legend(|(x, y)| PathElement::new([(x, y), (x + 16, y)], RED));
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()?;
    root.present()?;
    Ok(())
}
