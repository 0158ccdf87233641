//! The host side of `examples/host/mlp_gemv.ir`: a BLAS-style `gemv` and its
//! reverse-mode rule in plain Rust, bound to the module's `extern @gemv` and
//! `extern @gemv_vjp` (`examples/host_gemv.rs`, and the `mlp (host gemv)` row of
//! `examples/suite.rs`).

use gradlift::ir::interp::Val;
use gradlift::{Arg, Hosts};

/// The module: the suite's mlp with both matrix-vector products on the host.
pub const MLP_GEMV_IR: &str = include_str!("mlp_gemv.ir");

/// `y = W^T x[off..off + m] + bias` for a row-major `m x n` matrix `W`
/// (`n = len y`).
pub fn gemv(w: &[f64], x: &[f64], off: usize, bias: &[f64], y: &mut [f64]) {
    let n = y.len();
    y.copy_from_slice(&bias[..n]);
    for (k, row) in w.chunks_exact(n).enumerate() {
        let xk = x[off + k];
        for (yj, wkj) in y.iter_mut().zip(row) {
            *yj += xk * wkj;
        }
    }
}

/// The rule: `dW += x dy^T`, `dx[off..] += W dy`, `dbias += dy`, and `dy = 0`
/// (`y`'s contents before the call do not reach the result).
pub fn gemv_vjp(
    w: &[f64],
    x: &[f64],
    off: usize,
    dw: &mut [f64],
    dx: &mut [f64],
    dbias: &mut [f64],
    dy: &mut [f64],
) {
    let n = dy.len();
    for (k, (row, drow)) in w.chunks_exact(n).zip(dw.chunks_exact_mut(n)).enumerate() {
        let xk = x[off + k];
        let mut s = 0.0;
        for ((dwkj, wkj), g) in drow.iter_mut().zip(row).zip(dy.iter()) {
            *dwkj += xk * g;
            s += wkj * g;
        }
        dx[off + k] += s;
    }
    for (db, g) in dbias.iter_mut().zip(dy.iter_mut()) {
        *db += *g;
        *g = 0.0;
    }
}

fn offset(o: i64) -> Result<usize, String> {
    usize::try_from(o).map_err(|_| format!("negative offset {o}"))
}

/// Both host functions, bound by name, borrowing the engine's buffers
/// (`Hosts::bind_args`: no copy, no allocation per call).
pub fn hosts() -> Hosts {
    Hosts::new()
        .bind_args("gemv", |a: &mut [Arg<'_>]| match a {
            [
                Arg::F64s(w),
                Arg::F64s(x),
                Arg::I64(off),
                Arg::F64s(bias),
                Arg::F64sMut(y),
            ] => {
                gemv(w, x, offset(*off)?, bias, y);
                Ok(vec![])
            }
            _ => Err("gemv takes ([f64], [f64], i64, [f64], mut [f64])".into()),
        })
        .bind_args("gemv_vjp", |a: &mut [Arg<'_>]| match a {
            [
                Arg::F64s(w),
                Arg::F64s(x),
                Arg::I64(off),
                _bias,
                _y,
                Arg::F64sMut(dw),
                Arg::F64sMut(dx),
                Arg::F64sMut(dbias),
                Arg::F64sMut(dy),
            ] => {
                gemv_vjp(w, x, offset(*off)?, dw, dx, dbias, dy);
                Ok(vec![])
            }
            _ => Err("gemv_vjp takes the arguments of gemv and four shadows".into()),
        })
}

/// The same two functions with the copying protocol (`Hosts::bind`: slices as
/// `Val::F64s` copies, `mut` ones copied back), for comparison.
pub fn copying_hosts() -> Hosts {
    let off = |v: &Val| match v {
        Val::I64(o) => offset(*o),
        other => Err(format!("the offset must be an i64, found {other:?}")),
    };
    Hosts::new()
        .bind("gemv", move |a: &mut [Val]| match a {
            [Val::F64s(w), Val::F64s(x), o, Val::F64s(bias), Val::F64s(y)] => {
                gemv(w, x, off(o)?, bias, y);
                Ok(vec![])
            }
            _ => Err("gemv takes ([f64], [f64], i64, [f64], mut [f64])".into()),
        })
        .bind("gemv_vjp", move |a: &mut [Val]| match a {
            [
                Val::F64s(w),
                Val::F64s(x),
                o,
                _bias,
                _y,
                Val::F64s(dw),
                Val::F64s(dx),
                Val::F64s(dbias),
                Val::F64s(dy),
            ] => {
                gemv_vjp(w, x, off(o)?, dw, dx, dbias, dy);
                Ok(vec![])
            }
            _ => Err("gemv_vjp takes the arguments of gemv and four shadows".into()),
        })
}
