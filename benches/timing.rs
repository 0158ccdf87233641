//! The timing of the examples that print the suite's tables (`examples/suite.rs`,
//! `examples/forward_suite.rs`): medians of calls repeated for about
//! [`BUDGET`] seconds, several functions timed in turns ([`samples_each`]) so that
//! their samples are taken under the same load of a machine shared with other work.

#![allow(dead_code)] // each user uses a part

use std::time::Instant;

/// Time per measurement: a call is repeated until about this much has run.
pub const BUDGET: f64 = 0.3;
/// Calls per measurement, at least (fewer for calls slower than [`SLOW`]).
pub const MIN_RUNS: usize = 10;
/// A call slower than this (in seconds) is measured [`SLOW_RUNS`] times only.
pub const SLOW: f64 = 0.03;
/// Calls per measurement of a slow call, its first call included.
pub const SLOW_RUNS: usize = 3;

/// The median time of one call of `f`, in milliseconds: one call to warm up (kept
/// as a sample when the call is slow), then enough calls for about [`BUDGET`]
/// seconds, at least [`MIN_RUNS`].
pub fn measure(mut f: impl FnMut()) -> f64 {
    median(samples_each(&mut [&mut f]).swap_remove(0)) * 1e3
}

/// The middle of `samples` (the upper one of an even count).
pub fn median(mut samples: Vec<f64>) -> f64 {
    samples.sort_by(f64::total_cmp);
    samples[samples.len() / 2]
}

/// The samples (seconds per call) of [`measure`] for each of `fs` at once: the
/// calls take turns, one of each per round (each round starting with the next
/// function), so that sample `k` of every function is taken at about the same
/// time, under the same load of a machine shared with other work. The first round
/// warms up (kept when the slowest call is slow);
/// then enough rounds for about [`BUDGET`] seconds of the slowest function, at
/// least [`MIN_RUNS`].
pub fn samples_each(fs: &mut [&mut dyn FnMut()]) -> Vec<Vec<f64>> {
    let time = |f: &mut dyn FnMut()| {
        let start = Instant::now();
        f();
        start.elapsed().as_secs_f64()
    };
    let first: Vec<f64> = fs.iter_mut().map(|f| time(f)).collect();
    let slowest = first.iter().fold(0.0f64, |m, &t| m.max(t));
    let mut samples: Vec<Vec<f64>> = fs.iter().map(|_| Vec::new()).collect();
    let runs = if slowest > SLOW {
        for (s, &t) in samples.iter_mut().zip(&first) {
            s.push(t);
        }
        SLOW_RUNS - 1
    } else {
        ((BUDGET / slowest.max(1e-9)).ceil() as usize).clamp(MIN_RUNS, 1_000_000)
    };
    let n = fs.len();
    for round in 0..runs {
        // Each round starts with the next function, so that none is always
        // first (or last) in its round.
        for k in (0..n).map(|k| (k + round) % n) {
            samples[k].push(time(fs[k]));
        }
    }
    samples
}

/// The mean of the fastest tenth of `samples` (at least one): the calls that
/// other work on the machine interrupted least.
pub fn fastest_tenth(samples: &[f64]) -> f64 {
    let mut s = samples.to_vec();
    s.sort_by(f64::total_cmp);
    let k = s.len().div_ceil(10).max(1);
    s[..k].iter().sum::<f64>() / k as f64
}
