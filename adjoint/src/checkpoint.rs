//! Checkpointed calls: `call @g(..) checkpoint` (`docs/checkpointing.md`).
//!
//! The rule of a checkpointed call has the calling convention of `@g`'s own rule
//! (the same parameters and results as `@g.fwd.K` and `@g.rvs.K`), so the caller's
//! plan, forward pass and pullback treat it as any derived call. Only its bodies
//! differ:
//!
//! - `@g.ckpt.fwd.K(params) -> results` copies the contents of every slice argument
//!   the pullback cannot find unchanged (all but the frozen ones) onto the tape,
//!   calls `@g` itself (no tape of its own), then pushes the scalar arguments and
//!   the copies' handles.
//! - `@g.ckpt.rvs.K(slices, shadows, seeds) -> cotangents` pops them, calls
//!   `@g.fwd.K` on the scalars and the copies (so it reads the contents the call
//!   read, and writes into the copies, never into the caller's slices), drops its
//!   results, and returns what `@g.rvs.K` returns, given the copies as the primal
//!   slices as `@g.fwd.K` left them.
//!
//! `@g` and `@g.fwd.K` compute the same values (the forward pass is the primal with
//! pushes added), and `@g.rvs.K` sees the tape `@g.fwd.K` just left, so the
//! gradient is bit for bit the gradient without the checkpoint. The memory differs:
//! between the call and its reverse, the tape holds the call's inputs instead of
//! the callee's tape.

use gradlift_ir::{FuncId, FunctionBuilder, Imm, Module, Opcode, Type, Value};
use smallvec::SmallVec;

use crate::config::{Activity, RuleConfig, freezable};
use crate::error::InternalError;
use crate::rrule::slice_params;

/// Whether slice parameter `i` of a function with parameter types `params` is
/// copied onto the tape by a checkpointed call's forward pass: every slice but a
/// frozen one (whose contents the pullback finds as the call found them).
fn copied(params: &[Type], config: &RuleConfig, i: usize) -> bool {
    params[i].is_slice() && !(freezable(params[i]) && config.is_frozen(i))
}

/// Copies the contents of the slice `src` (of type `ty`) into a new tape buffer;
/// its handle. The forward passes of checkpointed calls and loops keep what the
/// pullback will run code on again this way.
pub(crate) fn copy_onto_tape(
    b: &mut FunctionBuilder<'_>,
    src: Value,
    ty: Type,
) -> Result<Value, InternalError> {
    let elem = ty.elem().ok_or_else(|| InternalError::NotASlice {
        value: format!("{src}"),
    })?;
    let n = b.len(src);
    let h = b.ins(Opcode::TapeAlloc, Imm::Type(elem.ty()), &[n]);
    let h = *b
        .results(h)
        .first()
        .ok_or_else(|| InternalError::NoResult {
            opcode: Opcode::TapeAlloc.to_string(),
        })?;
    let view = b.ins(Opcode::TapeView, Imm::Type(elem.ty()), &[h]);
    let view = *b
        .results(view)
        .first()
        .ok_or_else(|| InternalError::NoResult {
            opcode: Opcode::TapeView.to_string(),
        })?;
    let zero = b.iconst(0);
    b.counted_loop(zero, n, &[], |b, k, _| {
        let x = b.load(src, k);
        b.store(view, k, x);
        Vec::new()
    });
    Ok(h)
}

/// Writes `@g.ckpt.fwd.K` (declared as `fwd` in `out`) for the primal `g` under
/// `config`.
pub(crate) fn forward(
    out: &Module,
    fwd: FuncId,
    g: FuncId,
    config: &RuleConfig,
) -> Result<gradlift_ir::Function, InternalError> {
    save_and_call(out, fwd, g, g, config, true, &[])
}

/// A forward pass that keeps a call's inputs for its pullback: copies onto the
/// tape the slice arguments of `g` the pullback cannot find unchanged (when
/// `copy_slices`; all but the frozen ones), calls `callee` (`g` itself, or a
/// function of its signature) with the arguments, then pushes the scalar
/// arguments, the lengths of the slice arguments `lens_of` and the copies'
/// handles, and returns the results when `config.needs_primal`. [`Saved::pop`] is
/// its other half.
pub(crate) fn save_and_call(
    out: &Module,
    fwd: FuncId,
    g: FuncId,
    callee: FuncId,
    config: &RuleConfig,
    copy_slices: bool,
    lens_of: &[usize],
) -> Result<gradlift_ir::Function, InternalError> {
    let sig = out.sig(g).clone();
    let mut b = FunctionBuilder::new(out, fwd);
    let params: Vec<Value> = (0..sig.params.len())
        .map(|i| {
            let p = b.param(i);
            b.named(&param_name(out, g, i), p)
        })
        .collect();
    let mut handles: SmallVec<[Value; 4]> = SmallVec::new();
    for (i, &p) in params.iter().enumerate() {
        if !(copy_slices && copied(&sig.params, config, i)) {
            continue;
        }
        let h = copy_onto_tape(&mut b, p, sig.params[i])?;
        handles.push(b.named(&format!("{}.copy.buf", param_name(out, g, i)), h));
    }
    let results = b.call(callee, &params);
    for (i, &p) in params.iter().enumerate() {
        if sig.params[i].is_scalar() {
            b.push(p);
        }
    }
    for &i in lens_of {
        let n = b.len(params[i]);
        b.push(n);
    }
    for &h in &handles {
        b.push(h);
    }
    if config.needs_primal {
        b.ret(&results);
    } else {
        b.ret(&[]);
    }
    b.finish().map_err(InternalError::Build)
}

/// The parameters of a pullback with a derived rule's calling convention (primal
/// slices, shadows, seeds), and what [`save_and_call`] kept, popped.
pub(crate) struct Saved {
    /// Per parameter of `g`: its value as the call got it (a scalar popped, a
    /// slice's copy, or a frozen slice: the pullback's own parameter); `None` for a
    /// slice that was neither copied nor frozen.
    pub(crate) args: Vec<Option<Value>>,
    /// Per parameter of `g`: its shadow, for the `dup` ones.
    pub(crate) shadows: Vec<Option<Value>>,
    /// The seeds, one per seeded result, in order.
    pub(crate) seeds: Vec<Value>,
    /// Per parameter of `g`: its length, for those of `lens_of`.
    pub(crate) lens: Vec<Option<Value>>,
}

impl Saved {
    /// Names the parameters of the pullback `b` writes for `g` under `config` and
    /// pops what [`save_and_call`] pushed (with `copy_slices` and `lens_of` as they
    /// were given).
    pub(crate) fn pop(
        b: &mut FunctionBuilder<'_>,
        out: &Module,
        g: FuncId,
        config: &RuleConfig,
        copy_slices: bool,
        lens_of: &[usize],
    ) -> Result<Saved, InternalError> {
        let sig = out.sig(g).clone();
        let slices = slice_params(&sig, config);
        let n_params = b.func().params.len();
        let slice_vals: Vec<Value> = slices
            .iter()
            .enumerate()
            .map(|(k, &i)| {
                let p = b.param(k);
                b.named(&param_name(out, g, i), p)
            })
            .collect();
        let mut shadows = vec![None; sig.params.len()];
        let dups = (0..sig.params.len())
            .filter(|&i| matches!(config.params[i], Activity::Dup | Activity::DupNoNeed));
        let mut k = slices.len();
        for i in dups {
            let p = b.param(k);
            shadows[i] = Some(b.named(&format!("d{}", param_name(out, g, i)), p));
            k += 1;
        }
        let first_seed = k;
        let seeds: Vec<Value> = (first_seed..n_params)
            .map(|k| {
                let p = b.param(k);
                b.named(&format!("dy{}", k - first_seed), p)
            })
            .collect();
        // Pop the handles (last first), then the scalars (last first).
        let copies: Vec<usize> = (0..sig.params.len())
            .filter(|&i| copy_slices && copied(&sig.params, config, i))
            .collect();
        let mut args: Vec<Option<Value>> = vec![None; sig.params.len()];
        for &i in copies.iter().rev() {
            let elem = sig.params[i].elem().ok_or(InternalError::NotASlice {
                value: format!("parameter {i}"),
            })?;
            let h = b.pop(Type::I64);
            let name = param_name(out, g, i);
            let h = b.named(&format!("{name}.copy.buf"), h);
            let view = b.ins(Opcode::TapeView, Imm::Type(elem.ty()), &[h]);
            let view = b.results(view)[0];
            args[i] = Some(b.named(&format!("{name}.copy"), view));
        }
        let mut lens = vec![None; sig.params.len()];
        for &i in lens_of.iter().rev() {
            let n = b.pop(Type::I64);
            lens[i] = Some(b.named(&format!("{}.len", param_name(out, g, i)), n));
        }
        for i in (0..sig.params.len()).rev() {
            if sig.params[i].is_scalar() {
                let v = b.pop(sig.params[i]);
                args[i] = Some(b.named(&param_name(out, g, i), v));
            }
        }
        // The frozen slices: the pullback's own parameters.
        for (k, &i) in slices.iter().enumerate() {
            if args[i].is_none() && sig.params[i].is_slice() && !copies.contains(&i) {
                args[i] = Some(slice_vals[k]);
            }
        }
        Ok(Saved {
            args,
            shadows,
            seeds,
            lens,
        })
    }
}

/// Writes `@g.ckpt.rvs.K` (declared as `rvs` in `out`) for the primal `g` under
/// `config`, whose ordinary rule is (`inner_fwd`, `inner_rvs`).
pub(crate) fn pullback(
    out: &Module,
    rvs: FuncId,
    g: FuncId,
    config: &RuleConfig,
    inner_fwd: FuncId,
    inner_rvs: FuncId,
) -> Result<gradlift_ir::Function, InternalError> {
    let mut b = FunctionBuilder::new(out, rvs);
    let saved = Saved::pop(&mut b, out, g, config, true, &[])?;
    let slices = slice_params(out.sig(g), config);
    let args: Vec<Value> = saved
        .args
        .iter()
        .enumerate()
        .map(|(i, a)| {
            a.ok_or(InternalError::NotSaved {
                value: format!("argument {i} of a checkpointed call"),
            })
        })
        .collect::<Result<_, _>>()?;
    b.call(inner_fwd, &args);
    let mut inner: Vec<Value> = slices.iter().map(|&i| args[i]).collect();
    inner.extend(saved.shadows.iter().flatten().copied());
    inner.extend(saved.seeds.iter().copied());
    let outs = b.call(inner_rvs, &inner);
    b.ret(&outs);
    b.finish().map_err(InternalError::Build)
}

/// The name of parameter `i` of `g` (`x3` when it has none).
pub(crate) fn param_name(out: &Module, g: FuncId, i: usize) -> String {
    out.function(g)
        .and_then(|f| f.params.get(i).and_then(|&p| f.values[p].name.clone()))
        .map_or_else(|| format!("x{i}"), |n| n.to_string())
}
