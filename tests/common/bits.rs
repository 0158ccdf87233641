//! Values as bits, for the tests that compare gradients bit for bit
//! (`tests/checkpoint.rs`, `tests/checkpoint_loops.rs`; included with `#[path]`).

use gradlift::ir::interp::Val;

/// The bits of a value: floats by their bit patterns (so -0.0 differs from 0.0
/// and NaNs compare by payload).
pub fn bits(v: &Val) -> Vec<u64> {
    match v {
        Val::F64(x) => vec![x.to_bits()],
        Val::F32(x) => vec![u64::from(x.to_bits())],
        Val::I64(x) => vec![*x as u64],
        Val::Bool(b) => vec![u64::from(*b)],
        Val::F64s(xs) => xs.iter().map(|x| x.to_bits()).collect(),
        Val::F32s(xs) => xs.iter().map(|x| u64::from(x.to_bits())).collect(),
        Val::I64s(xs) => xs.iter().map(|&x| x as u64).collect(),
    }
}
