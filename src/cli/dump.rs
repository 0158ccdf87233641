//! `gradlift dump FILE --func F --stage S [--activity LIST]`: print one stage of a
//! function, in the text format.
//!
//! - `primal`: the function as parsed.
//! - `forward` and `pullback`: the rule is derived as `grad` derives it (`--activity`,
//!   or the defaults), and the forward pass `@F.fwd` (or the pullback `@F.rvs`) is
//!   printed, followed by the derived functions of its callees: every function of the
//!   rule's module that the input module does not have and whose name contains `.fwd`
//!   (`.rvs`), in the module's order, each after a blank line. The derived names are
//!   legal in the text format, so the dump parses back.
//!
//! The other stages arrive with the optimiser and the JIT; until then they are a user
//! error that says so.

use std::path::Path;

use clap::ValueEnum;

use gradlift_ir::write::write_function;
use gradlift_ir::{FuncId, Module};

use super::activity::ActivityList;
use super::report::Diagnostic;
use super::{DebugArgs, Outcome, Stage, check, grad, run};

/// Prints `stage` of `@func` in `file`, for `activity` (and in debug mode, with
/// `debug`) if it is a derived stage.
pub(crate) fn dump(
    file: &Path,
    func: &str,
    stage: Stage,
    activity: Option<&ActivityList>,
    debug: DebugArgs,
) -> Outcome {
    match try_dump(file, func, stage, activity, debug) {
        Ok(text) => Outcome::ok(text),
        Err(errors) => Outcome::failed(errors),
    }
}

fn try_dump(
    file: &Path,
    func: &str,
    stage: Stage,
    activity: Option<&ActivityList>,
    debug: DebugArgs,
) -> Result<String, Vec<Diagnostic>> {
    if !matches!(stage, Stage::Primal | Stage::Forward | Stage::Pullback) {
        let name = stage
            .to_possible_value()
            .map(|v| v.get_name().to_string())
            .unwrap_or_default();
        return Err(vec![Diagnostic::new(format!(
            "gradlift dump: stage {name} is not available yet (only primal, forward and \
             pullback are)"
        ))]);
    }
    let module = check::load(file)?;
    let id = run::find(&module, file, func).map_err(|e| vec![e])?;
    if stage == Stage::Primal {
        return print(&module, &[id]).map_err(|e| vec![e]);
    }
    let rule = grad::derive(&module, file, id, activity, true, debug).map_err(|e| vec![e])?;
    let (main, tag) = if stage == Stage::Forward {
        (rule.forward, ".fwd")
    } else {
        (rule.pullback, ".rvs")
    };
    let derived = &rule.module;
    let callees = derived.funcs.iter().filter_map(|(g, decl)| {
        let new = module.func_by_name(&decl.name).is_none();
        (g != main && new && decl.name.contains(tag) && decl.function().is_some()).then_some(g)
    });
    let ids: Vec<FuncId> = std::iter::once(main).chain(callees).collect();
    print(derived, &ids).map_err(|e| vec![e])
}

/// The functions `ids` of `module` in the text format, separated by blank lines and
/// ending in exactly one newline.
fn print(module: &Module, ids: &[FuncId]) -> Result<String, Diagnostic> {
    let mut text = String::new();
    for &id in ids {
        if !text.is_empty() {
            text.push('\n');
        }
        let start = text.len();
        write_function(&mut text, module, id)
            .map_err(|e| Diagnostic::new(format!("cannot print @{}: {e}", module.name(id))))?;
        // Each function ends in exactly one newline whatever the printer ends with.
        let trimmed = start + text[start..].trim_end().len();
        text.truncate(trimmed);
        text.push('\n');
    }
    Ok(text)
}
