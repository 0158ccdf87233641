//! [`build_rrule`]: the pipeline from a function and a [`RuleConfig`] to a [`Rule`].
//!
//! It reads as the steps: find the function and check that it verifies; check the
//! configuration against the signature and refuse what this version does not derive
//! yet (`check_request`); plan the rule ([`Plan`]: live blocks, activity, block
//! stack, saved values, the reverse of each statement); name and declare the derived
//! functions; assemble the forward pass ([`forward_ir`]) and the pullback
//! ([`pullback_ir`]); verify both (a failure there is a bug in gradlift).

use gradlift_ir::verify::verify_function;
use gradlift_ir::write::{self, Names};
use gradlift_ir::{FuncId, Function, Module, Signature, Type, VerifierErrors};

use crate::config::{Activity, RetActivity, RuleConfig};
use crate::error::AdError;
use crate::forward::forward_ir;
use crate::plan::Plan;
use crate::pullback::pullback_ir;
use crate::rules::{OpRule, op_rule};

/// A derived rule: the input module with the forward pass and the pullback added.
///
/// The caller runs [`Rule::forward`] with the primal arguments, then
/// [`Rule::pullback`] with the result cotangents, on one engine (they share its
/// tape). After the pullback returns, the tape's scalar stack is back to where it was
/// before the forward pass.
#[derive(Clone, Debug)]
pub struct Rule {
    /// The input module plus the derived functions; it verifies, prints and parses
    /// back like any other.
    pub module: Module,
    /// `@f.fwd(params...) -> results`: the primal results (none when the primal is
    /// not needed); saves what the pullback needs on the tape.
    pub forward: FuncId,
    /// `@f.rvs(dy...) -> (dx...)`: one cotangent per float result (when the return is
    /// active) to one cotangent per active parameter.
    pub pullback: FuncId,
    /// How the derived functions' parameters and results relate to the primal's.
    pub layout: RuleLayout,
}

/// How a rule's functions line up with the primal.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct RuleLayout {
    /// The primal function.
    pub primal: FuncId,
    /// The configuration the rule was derived for.
    pub config: RuleConfig,
    /// Result `i` of the pullback is the cotangent of primal parameter
    /// `active_params[i]` (the `active` ones, in order).
    pub active_params: Vec<usize>,
    /// The pullback's first parameters are the primal's slice parameters
    /// `slice_params` (all of them, in order)...
    pub slice_params: Vec<usize>,
    /// ... then one shadow (`mut [T]`) per parameter of `shadow_params` (the `dup`
    /// and `dupnoneed` ones, in order) ...
    pub shadow_params: Vec<usize>,
    /// ... then the cotangents of the primal results `seeded_results` (the float
    /// results, when the return is active).
    pub seeded_results: Vec<usize>,
}

/// Derives the forward pass and the pullback of `func` under `config`.
///
/// Supported in this version: defined functions whose parameters and results are
/// scalars (`f64`, `f32`, `i64`, `bool`), with any control flow (branches, loops,
/// early returns, unreachable blocks), and every scalar op. Slices, calls, tape ops
/// in the input and `overlay`/`vjp`/`nodiff` declarations about `func` are refused
/// with [`AdError::Unsupported`]. `config.debug` is accepted and ignored.
pub fn build_rrule(module: &Module, func: FuncId, config: &RuleConfig) -> Result<Rule, AdError> {
    let decl = module
        .funcs
        .get(func)
        .ok_or_else(|| AdError::NoSuchFunction(func.to_string()))?;
    let fname = decl.name.clone();
    let primal = decl.function().ok_or_else(|| AdError::NotDefined {
        func: fname.clone(),
    })?;
    let errors = verify_function(module, func);
    if !errors.is_empty() {
        return Err(AdError::Invalid {
            func: fname,
            errors: VerifierErrors(errors),
        });
    }
    let names = Names::new(primal);
    check_request(module, func, primal, &names, config)?;

    let sig = &decl.sig;
    let plan = Plan::new(primal, &sig.results, config);
    let active_params: Vec<usize> = (0..sig.params.len())
        .filter(|&i| config.params[i] == Activity::Active)
        .collect();
    let seeded_results: Vec<usize> = (0..sig.results.len())
        .filter(|&j| plan.seeded[j].is_some())
        .collect();
    let fwd_sig = Signature::new(
        sig.params.clone(),
        if config.needs_primal {
            sig.results.clone()
        } else {
            Vec::new()
        },
    );
    let slice_params: Vec<usize> = (0..sig.params.len())
        .filter(|&i| sig.params[i].is_slice())
        .collect();
    let shadow_params: Vec<usize> = (0..sig.params.len())
        .filter(|&i| matches!(config.params[i], Activity::Dup | Activity::DupNoNeed))
        .collect();
    let rvs_params: Vec<Type> = slice_params
        .iter()
        .map(|&i| sig.params[i])
        .chain(
            shadow_params
                .iter()
                .filter_map(|&i| sig.params[i].elem().map(Type::slice_mut)),
        )
        .chain(seeded_results.iter().map(|&j| sig.results[j]))
        .collect();
    let rvs_sig = Signature::new(
        rvs_params,
        active_params
            .iter()
            .map(|&i| sig.params[i])
            .collect::<Vec<Type>>(),
    );

    let internal = |message: String| AdError::Internal {
        func: fname.clone(),
        message,
    };
    let mut out = module.clone();
    let (fwd_name, rvs_name) = derived_names(&out, &fname, sig, config);
    let forward = out
        .declare(&fwd_name, fwd_sig.clone())
        .map_err(|e| internal(e.to_string()))?;
    let pullback = out
        .declare(&rvs_name, rvs_sig)
        .map_err(|e| internal(e.to_string()))?;
    let fwd = forward_ir(primal, &fwd_sig, &plan, config.needs_primal);
    let rvs =
        pullback_ir(&out, pullback, primal, &names, &plan, &active_params).map_err(internal)?;
    out.define(forward, fwd)
        .map_err(|e| internal(e.to_string()))?;
    out.define(pullback, rvs)
        .map_err(|e| internal(e.to_string()))?;
    for id in [forward, pullback] {
        let errors = verify_function(&out, id);
        if !errors.is_empty() {
            return Err(internal(format!(
                "@{} does not verify:\n{}",
                out.name(id),
                VerifierErrors(errors)
            )));
        }
    }
    Ok(Rule {
        module: out,
        forward,
        pullback,
        layout: RuleLayout {
            primal: func,
            config: config.clone(),
            active_params,
            slice_params,
            shadow_params,
            seeded_results,
        },
    })
}

/// Checks `config` against `func`'s signature, and refuses what this version does
/// not derive: slice parameters and results, slice, call and tape ops, and
/// declarations about `func`.
fn check_request(
    module: &Module,
    func: FuncId,
    primal: &Function,
    names: &Names,
    config: &RuleConfig,
) -> Result<(), AdError> {
    let fname = module.name(func).to_string();
    let sig = module.sig(func);
    if config.params.len() != sig.params.len() {
        return Err(AdError::ActivityCount {
            func: fname,
            expected: sig.params.len(),
            found: config.params.len(),
        });
    }
    let unsupported = |what: String| AdError::Unsupported {
        func: fname.clone(),
        what,
    };
    for (i, (&ty, &activity)) in sig.params.iter().zip(&config.params).enumerate() {
        let fits = match activity {
            Activity::Active => ty.is_float(),
            Activity::Dup | Activity::DupNoNeed => ty.is_slice() && ty.is_differentiable(),
            Activity::Const => true,
        };
        let name = names.value(primal.params[i]).to_string();
        if !fits {
            return Err(AdError::BadActivity {
                func: fname,
                param: i,
                name,
                ty,
                activity,
            });
        }
        if ty.is_slice() {
            return Err(unsupported(format!(
                "parameter {} (%{name}: {ty}) is a slice (slices arrive in the next step)",
                i + 1
            )));
        }
    }
    if let Some(ty) = sig.results.iter().find(|t| t.is_slice()) {
        return Err(unsupported(format!(
            "it returns a slice ({ty}); slices arrive in the next step"
        )));
    }
    for &b in &primal.layout {
        for &inst in &primal.blocks[b].insts {
            if let OpRule::Unsupported(what) = op_rule(primal.insts[inst].opcode) {
                let line = write::inst_line(module, primal, names, inst);
                return Err(unsupported(format!("{what}, in `{}`", line.trim())));
            }
        }
    }
    if let Some((decl, _)) = module.decls.iter().find(|(d, _)| d.func() == func) {
        let line = write::decl_line(module, decl);
        return Err(unsupported(format!(
            "`{}` (custom rules and declarations arrive with calls)",
            line.trim()
        )));
    }
    Ok(())
}

/// The names of the derived functions: `f.fwd` and `f.rvs` for the default
/// configuration, `f.fwd.PATTERN` and `f.rvs.PATTERN` otherwise (one letter per
/// parameter, `_`, the return's letter), with `.noprimal` when the forward pass does
/// not return the primal. A name the module already has gets `.2`, `.3`, ... ; a
/// primal named by digits only gets a `_` in front (`_7.fwd`).
fn derived_names(
    module: &Module,
    fname: &str,
    sig: &Signature,
    config: &RuleConfig,
) -> (String, String) {
    let default = RuleConfig::default_for(sig);
    let mut suffix = if config.params == default.params && config.ret == RetActivity::Active {
        String::new()
    } else {
        format!(".{}", config.pattern())
    };
    if !config.needs_primal {
        suffix.push_str(".noprimal");
    }
    // A name of digits only (`@7`) takes no `.suffix`; `_7.fwd` is a name.
    let stem = if fname.starts_with(|c: char| c.is_ascii_digit()) {
        format!("_{fname}")
    } else {
        fname.to_string()
    };
    let base = (format!("{stem}.fwd{suffix}"), format!("{stem}.rvs{suffix}"));
    let free = |(f, r): &(String, String)| {
        module.func_by_name(f).is_none() && module.func_by_name(r).is_none()
    };
    if free(&base) {
        return base;
    }
    (2..)
        .map(|n| (format!("{}.{n}", base.0), format!("{}.{n}", base.1)))
        .find(free)
        .unwrap_or(base)
}
