//! Calls of functions with a user's `vjp` rule over slices, or a rule pair
//! (`docs/ir-text.md`, "vjp"; Mooncake's `rrule!!`).
//!
//! A call of a function `@g` of scalar parameters only with `vjp @g = @r` is
//! reversed in the caller's own pullback ([`CallRule::Vjp`](crate::stmt::CallRule)).
//! Any other `vjp` gets a rule pair written around the user's functions, with the
//! calling convention of a derived rule (`@g.fwd.K`, `@g.rvs.K`), so the caller's
//! plan, forward pass and pullback treat it as any derived call:
//!
//! - `vjp @g = @r`: the forward pass copies onto the tape the slice arguments the
//!   pullback cannot find unchanged (all but frozen read-only ones; always the
//!   `mut` ones, which `@g` writes), calls `@g`, and pushes the scalar arguments
//!   and the copies' handles ([`checkpoint::save_and_call`]). The pullback pops
//!   them and calls `@r` with the arguments as they were at the call, one shadow
//!   per float slice, one seed per float result; it returns the cotangents of the
//!   active scalars.
//! - `vjp @g = @fwd, @rvs`: the forward pass calls `@fwd` (which computes `@g` and
//!   pushes what `@rvs` needs), then pushes the scalar arguments; the pullback pops
//!   them and calls `@rvs` with the scalars, shadows and seeds (`@rvs` pops what
//!   `@fwd` pushed).
//!
//! Whatever the activities of the call, the user's rule gets a shadow for every
//! float slice and a seed for every float result: a slice without one gets a
//! zero-filled local buffer of its length, a result without one a zero seed, and
//! the cotangents of scalars that are not active are dropped.

use gradlift_ir::{FuncId, FunctionBuilder, Module, Scalar, Value, VjpRule};

use crate::checkpoint::{Saved, save_and_call};
use crate::config::{Activity, RetActivity, RuleConfig};
use crate::error::InternalError;

/// Writes the forward pass `fwd` (declared in `out`) of a call of `g` with the
/// custom rule `rule`, under `config`.
pub(crate) fn forward(
    out: &Module,
    fwd: FuncId,
    g: FuncId,
    rule: VjpRule,
    config: &RuleConfig,
) -> Result<gradlift_ir::Function, InternalError> {
    match rule {
        VjpRule::Pullback(_) => save_and_call(out, fwd, g, g, config, true, &[]),
        VjpRule::Pair { forward, .. } => save_and_call(
            out,
            fwd,
            g,
            forward,
            config,
            false,
            &unshadowed(out, g, config),
        ),
    }
}

/// The float slice parameters of `g` without a shadow under `config`: a pair's
/// forward pass pushes their lengths, for the scratch shadows of its pullback.
fn unshadowed(out: &Module, g: FuncId, config: &RuleConfig) -> Vec<usize> {
    let sig = out.sig(g);
    (0..sig.params.len())
        .filter(|&i| {
            sig.params[i].is_slice()
                && sig.params[i].is_differentiable()
                && !matches!(config.params[i], Activity::Dup | Activity::DupNoNeed)
        })
        .collect()
}

/// Writes the pullback `rvs` (declared in `out`) of a call of `g` with the custom
/// rule `rule`, under `config`.
pub(crate) fn pullback(
    out: &Module,
    rvs: FuncId,
    g: FuncId,
    rule: VjpRule,
    config: &RuleConfig,
) -> Result<gradlift_ir::Function, InternalError> {
    let sig = out.sig(g).clone();
    let mut b = FunctionBuilder::new(out, rvs);
    let (user, copy) = match rule {
        VjpRule::Pullback(r) => (r, true),
        VjpRule::Pair { pullback, .. } => (pullback, false),
    };
    let lens_of = if copy {
        Vec::new()
    } else {
        unshadowed(out, g, config)
    };
    let saved = Saved::pop(&mut b, out, g, config, copy, &lens_of)?;
    let mut args: Vec<Value> = Vec::new();
    for (i, &t) in sig.params.iter().enumerate() {
        if t.is_slice() && !copy {
            continue;
        }
        args.push(saved.args[i].ok_or(InternalError::NotSaved {
            value: format!("argument {} of a call of @{}", i + 1, out.name(g)),
        })?);
    }
    for (i, &t) in sig.params.iter().enumerate() {
        if !(t.is_slice() && t.is_differentiable()) {
            continue;
        }
        let shadow = match saved.shadows[i] {
            Some(s) => s,
            None => {
                // No shadow: the rule adds into a scratch buffer of the slice's
                // length, dropped afterwards.
                let elem = t.elem().ok_or(InternalError::NotASlice {
                    value: format!("parameter {}", i + 1),
                })?;
                let n = match (saved.lens[i], saved.args[i]) {
                    (Some(n), _) => n,
                    (None, Some(p)) => b.len(p),
                    (None, None) => {
                        return Err(InternalError::NotSaved {
                            value: format!("the length of argument {}", i + 1),
                        });
                    }
                };
                b.alloc(elem, n)
            }
        };
        args.push(shadow);
    }
    let mut seeds = saved.seeds.iter().copied();
    for (j, &t) in sig.results.iter().enumerate() {
        if !t.is_float() {
            continue;
        }
        let seed = if config.ret == RetActivity::Active && config.is_seeded(j) {
            seeds.next()
        } else {
            None
        };
        let seed = match seed {
            Some(s) => s,
            None => {
                let zero = Scalar::zero(t).ok_or(InternalError::NotSaved {
                    value: format!("a zero of {t}"),
                })?;
                b.const_inst(zero)
            }
        };
        args.push(seed);
    }
    let outs = b.call(user, &args);
    // One cotangent per float scalar parameter, in order: the active ones returned.
    let floats = (0..sig.params.len()).filter(|&i| sig.params[i].is_float());
    let returned: Vec<Value> = floats
        .zip(outs)
        .filter(|&(i, _)| config.params[i] == Activity::Active)
        .map(|(_, v)| v)
        .collect();
    b.ret(&returned);
    b.finish().map_err(InternalError::Build)
}
