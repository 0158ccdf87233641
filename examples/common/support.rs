//! What the worked examples share (each includes this file with `#[path]`, next
//! to the fuzzer's generator `examples/fuzz/rng.rs` as `mod rng`): Gaussian
//! numbers and shuffles from that seeded generator, so that their data are the same
//! on every machine, and their command-line options.

use crate::rng::Rng;

/// A standard normal number (the Box-Muller transform).
#[allow(dead_code)] // Each example uses some of these.
pub fn gaussian(rng: &mut Rng) -> f64 {
    // 1 - unit is in (0, 1]: its logarithm is finite.
    let (a, b) = (1.0 - rng.unit(), rng.unit());
    (-2.0 * a.ln()).sqrt() * (2.0 * std::f64::consts::PI * b).cos()
}

/// Shuffles `v` in place (Fisher-Yates).
#[allow(dead_code)]
pub fn shuffle<T>(rng: &mut Rng, v: &mut [T]) {
    for i in (1..v.len()).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        v.swap(i, j);
    }
}

/// The options `--quick` (a reduced run, without a plot) and `--svg PATH` (where
/// the plot goes; `default` otherwise).
#[allow(dead_code)]
pub fn options(default: &str) -> Result<(bool, Option<String>), String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let quick = args.iter().any(|a| a == "--quick");
    let svg = match args.iter().position(|a| a == "--svg") {
        Some(k) => Some(args.get(k + 1).ok_or("--svg takes a path")?.clone()),
        None if quick => None,
        None => Some(default.to_string()),
    };
    Ok((quick, svg))
}
