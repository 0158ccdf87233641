//! Gradients of one compiled function over many inputs, in parallel with rayon.
//!
//! The pattern: share one activity pattern of an `Autodiff` as a `SharedGradient`
//! (compiled once, `Send + Sync`), and give each rayon worker its own `CallState`
//! (a workspace and buffers) with `map_init` or `for_each_init`. No worker waits
//! for another, and a warm `CallState` allocates nothing per call: here the
//! gradients are written into buffers made once.
//!
//! The program computes the value and gradient of Rosenbrock's function at many
//! points, serially and in parallel, checks that both give the same bits, and
//! prints both times and the speed-up.
//!
//! `cargo run --release --example rayon_batch [POINTS [DIMENSION]]` (defaults
//! 4000 points of dimension 2000).

use std::time::Instant;

use gradlift::trace::prelude::*;
use gradlift::{CallState, Duplicated, Return, SharedGradient, autodiff};
use rayon::prelude::*;

type Dup = Duplicated<&'static [f64], &'static mut [f64]>;

/// The value at `x`, its gradient written into `dx`, with `state`'s buffers.
fn value_and_gradient(
    g: &SharedGradient<(Slice<f64>,), Var>,
    state: &mut CallState,
    x: &[f64],
    dx: &mut [f64],
) -> f64 {
    dx.fill(0.0);
    let (v, _) = g
        .gradient(state, (Duplicated(x, dx),))
        .expect("every point has the dimension the function takes");
    v
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let mut arg = |default: usize| -> Result<usize, String> {
        match args.next() {
            Some(a) => a.parse().map_err(|_| format!("not a count: {a}")),
            None => Ok(default),
        }
    };
    let (points, dim) = (arg(4000)?, arg(2000)?);

    let g = autodiff("rosenbrock", gradlift::suite::rosenbrock::<Var>)?
        .share::<(Dup,)>(Return::Active)?;
    let xs: Vec<Vec<f64>> = (0..points)
        .map(|p| {
            (0..dim)
                .map(|i| (0.37 * i as f64 + 0.01 * p as f64).sin())
                .collect()
        })
        .collect();

    // The results' memory is made once: what is timed is the gradients.
    let mut serial = vec![(0.0, vec![0.0; dim]); points];
    let mut parallel = serial.clone();

    // Serial: one state. Parallel: one state per rayon worker (`for_each_init`
    // makes one per split of the work, reused for every point of that split).
    // The fastest of five rounds each, in turns.
    let (mut serial_s, mut parallel_s) = (f64::INFINITY, f64::INFINITY);
    let mut state = CallState::new();
    for _ in 0..5 {
        let t = Instant::now();
        for (x, (v, dx)) in xs.iter().zip(serial.iter_mut()) {
            *v = value_and_gradient(&g, &mut state, x, dx);
        }
        serial_s = serial_s.min(t.elapsed().as_secs_f64());

        let t = Instant::now();
        xs.par_iter().zip(parallel.par_iter_mut()).for_each_init(
            CallState::new,
            |state, (x, (v, dx))| {
                *v = value_and_gradient(&g, state, x, dx);
            },
        );
        parallel_s = parallel_s.min(t.elapsed().as_secs_f64());
    }

    let same = serial.len() == parallel.len()
        && serial.iter().zip(&parallel).all(|((va, ga), (vb, gb))| {
            va.to_bits() == vb.to_bits()
                && ga.iter().zip(gb).all(|(a, b)| a.to_bits() == b.to_bits())
        });
    println!(
        "{points} gradients of Rosenbrock's function in dimension {dim}, on {} rayon threads",
        rayon::current_num_threads()
    );
    println!(
        "  serial:   {:8.1} ms (fastest of 5 rounds)",
        serial_s * 1e3
    );
    println!(
        "  parallel: {:8.1} ms (fastest of 5 rounds)",
        parallel_s * 1e3
    );
    println!("  speed-up: {:.2}x", serial_s / parallel_s);
    println!(
        "  the parallel values and gradients equal the serial ones bit for bit: {}",
        if same { "yes" } else { "NO" }
    );
    if !same {
        return Err("the parallel results differ from the serial ones".into());
    }
    Ok(())
}
