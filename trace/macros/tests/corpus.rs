//! The corpus: 46 ordinary Rust functions differentiated by `#[autodiff_reverse]`
//! (and 9 `#[differentiable]` helpers they call), each checked at several inputs,
//! chosen on both sides of every comparison on floats, against two independent
//! oracles:
//!
//! 1. central finite differences of the native function (the function as written,
//!    called natively; `common::fd`, to 1e-5). For the `f32` functions: differences
//!    of the native `f32` function taken in `f64` with a larger step (to 2e-3), and
//!    differences of the generic version run on `f64` (to 1e-4);
//! 2. the same function written generically over `gradlift::trace::Real` (`Float`
//!    for `f32`) with `cond`, `for_range`, `while_loop` and `func(..).call(..)`, and
//!    differentiated with `gradlift::autodiff` (the generic path): the gradients
//!    agree to 1e-12 relative (`check_generic`; to 1e-6 for `f32`). In fact they are
//!    the same bits but for `rk4_duffing`'s (within 5e-15: the attribute loads
//!    `state[0]` three times in the final energy where the generic version loads it
//!    once, so the cotangents are summed in another order).
//!
//! The attribute's value is the native function's, bit for bit (to 1e-14 for the
//! three functions whose value goes through `exp`, whose `f64` version in the IR is
//! gradlift's own, within 1 ulp of the platform's: `common::check_value_own_math`;
//! there the forward attribute's and the generic path's values are the
//! attribute's, bit for bit), and so is the generic path's (its arithmetic is written in the same order: a literal on the
//! left is `T::lit(..)`, `a * b` may become `b * a`, which rounds the same). The
//! generic version run natively is checked against the native function too, so that
//! a slip in writing it is not taken for a disagreement of the two paths.
//!
//! The generic versions import `SliceRead` (and `SliceWrite`) inside their bodies:
//! in scope where an attribute is expanded, `SliceRead::len` is what the generated
//! shadow-length check's `dx.len()` calls on a `&mut [f64]`, an `i64`, and that does
//! not compile.
//!
//! The functions of `calls` and `exits` also have `#[autodiff_forward]`, whose
//! tangent along a direction agrees with the attribute's gradient dotted with it
//! (`check_tangent`, to 1e-12): the forward mode through helpers, recursion,
//! mutual recursion and every kind of early exit.
//!
//! Each module has its own theme: `scalars` (`Active` scalars), `reductions`
//! (losses over slices), `exits` (early exits), `outputs` (functions that
//! write), `calls` (`#[differentiable]` helpers, recursion) and `f32s`.
//!
//! Coverage (construct -> functions):
//!
//! | construct | functions |
//! |---|---|
//! | `let`, `let mut` | all |
//! | `=`, `+=`, `-=`, `*=`, `/=` on f64 locals | `incline_slide` (`=`, `*=`), `kepler` (`-=`), `xent_smooth` (`-=`), `band_energy` (`*=`), `mse`, `layer_norm` (`/=`), `kahan_dot` (`=`), most (`+=`) |
//! | `+=`, `-=`, `*=` on integer locals | `kepler` (`+=`), `strided_decay` (`-=` on i64), `quantize_loss_f32` (`*=` on usize) |
//! | `x[i] = v`, `x[i] += v`, `-=`, `*=`, `/=` on a `&mut [f64]` | `layer_norm` (`-= /= *= +=`), `soft_threshold` (`-= += =`), `gd_steps` (`-=`), `spring_chain` (`+=`), `clip_by_norm`, `moving_average_into`, `rk4_duffing` (`=`), `sgd_step_f32` (`-=` on `&mut [f32]`) |
//! | f64 arithmetic and comparisons | all f64 functions |
//! | f32 arithmetic and comparisons | `gelu_f32`, `sgd_step_f32`, `quantize_loss_f32`, `entropy_f32` |
//! | usize arithmetic and comparisons | `cosine_lr` (`+ - <`), `max_pool_energy` (`/ % * >`), `trapezoid`, `xent_smooth`, `ema_residual` (`==`), `grid_sample` (`>`, `-`), `moving_average_into` (`>=`), `quantize_loss_f32` (`<`, `>=`) |
//! | i64 arithmetic (`+ - * / %`, unary `-`) and comparisons | `strided_decay`, `casteljau` / `bezier`, `simpson_rec`, `half_sin` / `half_cos` |
//! | bool locals, a `let mut` bool | `band_energy`, `strided_decay` |
//! | `&&`, `\|\|`, `!` | `band_energy` (floats), `strided_decay` (`&&` on i64, `!` on a bool), `trapezoid` (`\|\|` on usize), `bisect_newton` (`\|\|` mixed, `!(fm < 0.0)`), `simpson_rec` (`\|\|` mixed) |
//! | `if` / `else if` / `else` as an expression | `softplus_beta`, `hermite`, `oscillator`, `rms_huber`; `if`/`else`: `srgb_encode`, `kepler`, `huber_regression`, `clip_by_norm`, `trapezoid`, `spring_chain`, `tiny_mlp`, `sigmoid` |
//! | `if` / `else if` / `else` as a statement | `soft_threshold`; `if`/`else`: `ema_residual`, `strided_decay`; `if`: `incline_slide`, `bounce`, `xent_smooth`, `count_above`, `grid_sample` |
//! | `for i in a..b`, `for _ in` | most slice functions; `bounce`, `gd_steps` (`_`) |
//! | `for i in a..=b` | `trapezoid`, `moving_average_into` |
//! | `(a..b).rev()` | `clenshaw`, `quantize_loss_f32` |
//! | `for v in x.iter()` | `logsumexp_temp`, `band_energy` (`&v`), `entropy_f32` (`v`, `*v`) |
//! | `x.iter().enumerate()` | `mse` (`(i, p)`, `*p`), `ema_residual`, `welford` (`(i, &v)`) |
//! | `while` | `kepler` (left by `break`), `interp_table` (its test reads a slice), `strided_decay` (`&&` test), `quantize_loss_f32` |
//! | `loop` with `break` and `continue` | `bisect_newton`; `break` and `continue` in a `for`: `moving_average_into` |
//! | early `return`: before loops; inside a loop; from nested loops | `log_cosh`, `projectile_range`, `cosine_lr`, `clenshaw`, `interp_table`, `count_above`, `gelu_f32`, `simpson_rec` (a helper); `crossing_time`, `bisect_newton` (in a `loop`); `first_hot_cell` |
//! | `x.len()` | all slice functions |
//! | `vec![0.0; n]`, `vec![a, b, ..]` | `gd_steps`, `spring_chain`, `tiny_mlp`, `rk4_duffing`; `rk4_duffing` (`vec![1.0, 2.0, 2.0, 1.0]`) |
//! | `as` | f64 -> i64 -> f64: `table_lerp`; f64 -> usize: `grid_sample`; usize -> f64: `mse`, `cosine_lr`, `trapezoid`, `crossing_time`, ...; usize -> i64: `strided_decay`, `bezier`; i64 -> usize: `strided_decay`, `casteljau`; i64 -> f64: `strided_decay`; f32 <-> usize: `quantize_loss_f32` |
//! | `sin cos tan exp ln sqrt` | `projectile_range` (`sin cos sqrt`), `incline_slide` (`tan`), `softplus_beta` (`exp ln`), `oscillator`, `kepler`, `table_lerp` |
//! | `powi powf abs max min` | `hermite`, `ema_residual` (`powi`), `srgb_encode` (`powf max min`), `log_cosh`, `huber_regression` (`abs`), `logsumexp_temp`, `max_pool_energy` (`max`), `clenshaw` (`max min`) |
//! | `tanh floor ceil` | `tiny_mlp`, `gelu_f32` (`tanh`); `table_lerp` (`floor ceil`) |
//! | `f64::consts`, `f64::` constants, `f32::consts` | `projectile_range`, `kepler`, `cosine_lr` (`PI`), `log_cosh` (`LN_2`), `logsumexp_temp` (`f64::NEG_INFINITY`), `gelu_f32` (`FRAC_2_SQRT_PI`, `FRAC_1_SQRT_2`) |
//! | `#[differentiable]` helpers | `logistic_nll` (`sigmoid`, `row_dot`: a scalar and a slice helper), `rms_huber` (`rms` calls `mean_sq`), `adaptive_simpson` (`damped_wave`) |
//! | recursion | `bezier` (`casteljau`), `adaptive_simpson` (`simpson_rec`) |
//! | mutual recursion | `rotate_residual` (`half_sin`, `half_cos`) |
//! | `&mut f64` outputs | `welford` (two, `Duplicated`), `count_above` (`Const`) |
//! | `Active` scalars | all of `scalars` (`hermite`: five), and with slices in most others; a seed other than 1: `soft_threshold` |
//! | `Duplicated` slices | most slice functions; two in `kahan_dot`, three in `tiny_mlp` |
//! | `Const` parameters | f64: `projectile_range`, `huber_regression`, `tiny_mlp`, `bisect_newton`; usize: `cosine_lr`, `xent_smooth`, `max_pool_energy`, `trapezoid`, `first_hot_cell`, `gd_steps`, ...; i64: `strided_decay`, `rotate_residual`; slices: `mse`, `huber_regression`, `interp_table`, `logistic_nll`, `gd_steps`; `&mut f64`: `count_above` |
//! | `Const` return with a `Duplicated` output | `clip_by_norm` |
//! | `()` return with `Duplicated` outputs | `layer_norm`, `spring_chain`, `welford`, `moving_average_into`, `sgd_step_f32` |
//! | a `Duplicated` writable slice and an `Active` return | `soft_threshold`, `gd_steps`, `rk4_duffing` |
//! | f32 functions | `gelu_f32`, `sgd_step_f32`, `quantize_loss_f32`, `entropy_f32` |

// The functions are written in the subset the attribute supports: loops over index
// ranges, `vec!` buffers (no arrays), `max` and `min` or an `if` (no `clamp`),
// `!(a < b)` (`!` on a float comparison: true for NaN, where `a >= b` is not).
#![allow(
    clippy::needless_range_loop,
    clippy::manual_clamp,
    clippy::nonminimal_bool,
    clippy::neg_cmp_op_on_partial_ord,
    clippy::useless_vec,
    clippy::too_many_arguments
)]

mod common;

#[path = "corpus/calls.rs"]
mod calls;
#[path = "corpus/exits.rs"]
mod exits;
#[path = "corpus/f32s.rs"]
mod f32s;
#[path = "corpus/outputs.rs"]
mod outputs;
#[path = "corpus/reductions.rs"]
mod reductions;
#[path = "corpus/scalars.rs"]
mod scalars;

/// The attribute's gradient agrees with the generic path's to 1e-12, relative to
/// the larger of the two (so an exact zero must be an exact zero on both sides).
#[track_caller]
pub fn check_generic(attr: &[f64], generic: &[f64]) {
    assert_eq!(attr.len(), generic.len());
    for (a, g) in attr.iter().zip(generic) {
        assert!(
            (a - g).abs() <= 1e-12 * a.abs().max(g.abs()),
            "attribute {attr:?}, generic path {generic:?}"
        );
    }
}

/// [`check_generic`] for `f32` gradients: to 1e-6 relative (a few units in the
/// last place of an `f32`).
#[track_caller]
pub fn check_generic_f32(attr: &[f32], generic: &[f32]) {
    assert_eq!(attr.len(), generic.len());
    for (a, g) in attr.iter().zip(generic) {
        assert!(
            (a - g).abs() <= 1e-6 * a.abs().max(g.abs()),
            "attribute {attr:?}, generic path {generic:?}"
        );
    }
}

/// A direction of `n` components for a forward-mode check: all nonzero, of both
/// signs and several magnitudes.
pub fn direction(n: usize) -> Vec<f64> {
    (0..n)
        .map(|i| ((i as f64 + 1.0) * 1.7).sin() + 0.25)
        .collect()
}

/// `#[autodiff_forward]`'s tangent along `v` against the reverse-mode gradient `grad`
/// dotted with `v` (the dot-product identity: `J v = grad . v` for a function of
/// one result), to 1e-12 relative to the sum of the terms' magnitudes (which the
/// rounding of either side scales with).
#[track_caller]
pub fn check_tangent(tangent: f64, grad: &[f64], v: &[f64]) {
    assert_eq!(grad.len(), v.len());
    let dot: f64 = grad.iter().zip(v).map(|(g, v)| g * v).sum();
    let scale: f64 = grad.iter().zip(v).map(|(g, v)| (g * v).abs()).sum();
    assert!(
        (tangent - dot).abs() <= 1e-12 * scale.max(f64::MIN_POSITIVE),
        "forward tangent {tangent}, reverse gradient . v = {dot} (gradient {grad:?}, v {v:?})"
    );
}

/// The parts, one after the other: the parameters of a function as one vector,
/// for the finite differences.
pub fn cat(parts: &[&[f64]]) -> Vec<f64> {
    parts.concat()
}
