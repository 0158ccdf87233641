//! `gradlift dump FILE --func F --stage S [--activity LIST]`: print one stage of a
//! function.
//!
//! - `primal`: the function as parsed, in the text format.
//! - `forward` and `pullback`: the rule is derived as `grad` derives it (`--activity`,
//!   or the defaults), and the forward pass `@F.fwd` (or the pullback `@F.rvs`) is
//!   printed in the text format, followed by the derived functions of its callees:
//!   every function of the rule's module that the input module does not have and
//!   whose name contains `.fwd` (`.rvs`), in the module's order, each after a blank
//!   line. The derived names are legal in the text format, so the dump parses back.
//! - `clif` and `asm`: the JIT's Cranelift IR (as lowered) and the host's machine
//!   code ([`gradlift_jit::listing`]) of `@F` and every function it calls, each
//!   function's trampoline after it, every function under a `; @name` line
//!   (`; @name (entry)` for a trampoline). Only the primal: derived functions use the
//!   tape, which the JIT does not compile yet.
//! - `dot`: Graphviz of the control-flow graphs ([`gradlift_ir::dot`]): one `digraph`
//!   with the clusters `cluster_primal`, `cluster_forward` and `cluster_pullback` (the
//!   rule derived as for `forward`). When the rule cannot be derived (a function
//!   reverse mode refuses), the graph has the primal cluster alone, with a comment
//!   saying why, and the reason is a warning on stderr (status 0); a request that is
//!   wrong (activities that do not fit) is an error, as for `forward`.
//! - `optimized`: a copy of the module optimised with the default configuration
//!   ([`gradlift_ir::opt`]), then `@F` and every function it still calls,
//!   transitively (after inlining, fewer), in the module's order, each after a blank
//!   line: IR text that parses back and verifies on its own.

use std::path::Path;

use gradlift_adjoint::{AdError, build_rrule};
use gradlift_ir::dot::{Cluster, signature_title, write_dot};
use gradlift_ir::opt::{OptConfig, optimize};
use gradlift_ir::write::write_function;
use gradlift_ir::{FuncId, Imm, Module};
use gradlift_jit::Listing;

use super::activity::ActivityList;
use super::report::{self, Diagnostic};
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
    let loaded = check::load(file).and_then(|module| {
        let id = run::find(&module, file, func).map_err(|e| vec![e])?;
        Ok((module, id))
    });
    let (module, id) = match loaded {
        Ok(found) => found,
        Err(errors) => return Outcome::failed(errors),
    };
    let printed = match stage {
        Stage::Primal => print(&module, &[id]).map_err(|e| vec![e]),
        Stage::Forward | Stage::Pullback => {
            derived(file, &module, id, stage == Stage::Forward, activity, debug)
        }
        Stage::Clif | Stage::Asm => {
            native(file, &module, id, stage == Stage::Clif, activity, debug)
        }
        Stage::Dot => return dot(file, &module, id, activity, debug),
        Stage::Optimized => optimized(&module, id).map_err(|e| vec![e]),
    };
    match printed {
        Ok(text) => Outcome::ok(text),
        Err(errors) => Outcome::failed(errors),
    }
}

/// The forward pass (or the pullback) of `@id` and those of its callees.
fn derived(
    file: &Path,
    module: &Module,
    id: FuncId,
    forward: bool,
    activity: Option<&ActivityList>,
    debug: DebugArgs,
) -> Result<String, Vec<Diagnostic>> {
    let rule = grad::derive(module, file, id, activity, true, debug).map_err(|e| vec![e])?;
    let (main, tag) = if forward {
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

/// `@id` after the optimiser, and the functions it calls, transitively.
fn optimized(module: &Module, id: FuncId) -> Result<String, Diagnostic> {
    let mut module = module.clone();
    // The module verified when it was loaded, so the optimiser takes it.
    optimize(&mut module, &OptConfig::default())
        .map_err(|e| Diagnostic::new(format!("gradlift dump: {e}")))?;
    let mut reached = vec![id];
    let mut k = 0;
    while let Some(&f) = reached.get(k) {
        k += 1;
        let Some(func) = module.function(f) else {
            continue;
        };
        for (_, inst) in func.placed_insts() {
            if let Imm::Func(g) = func.insts[inst].imm
                && !reached.contains(&g)
            {
                reached.push(g);
            }
        }
    }
    let callees: Vec<FuncId> = module
        .funcs
        .keys()
        .filter(|&g| g != id && reached.contains(&g))
        .collect();
    let ids: Vec<FuncId> = std::iter::once(id).chain(callees).collect();
    print(&module, &ids)
}

/// The functions `ids` of `module` in the text format, separated by blank lines and
/// ending in exactly one newline.
fn print(module: &Module, ids: &[FuncId]) -> Result<String, Diagnostic> {
    let mut text = String::new();
    for &id in ids {
        let start = text.len();
        write_function(&mut text, module, id)
            .map_err(|e| Diagnostic::new(format!("cannot print @{}: {e}", module.name(id))))?;
        let body = text.split_off(start);
        push_item(&mut text, &body);
    }
    Ok(text)
}

/// Appends `item` to `text`, after a blank line unless `text` is empty, ending in
/// exactly one newline whatever `item` ends with.
fn push_item(text: &mut String, item: &str) {
    if !text.is_empty() {
        text.push('\n');
    }
    text.push_str(item.trim_end());
    text.push('\n');
}

/// The Cranelift IR (`clif`) or the machine code of `@id` and what it calls, then
/// (when the rule derives under `--activity`) of its forward pass and pullback and
/// the rules they call.
fn native(
    file: &Path,
    module: &Module,
    id: FuncId,
    clif: bool,
    activity: Option<&ActivityList>,
    debug: DebugArgs,
) -> Result<String, Vec<Diagnostic>> {
    let compile_error = |e| report::compile_error(file, &e);
    let mut listing = gradlift_jit::listing(module, &[id]).map_err(compile_error)?;
    let config = grad::config(module, id, activity, true, debug);
    if let Ok(rule) = build_rrule(module, id, &config) {
        let derived = gradlift_jit::listing(&rule.module, &[rule.forward, rule.pullback])
            .map_err(compile_error)?;
        let primal: Vec<String> = listing.iter().map(|l| l.name.clone()).collect();
        listing.extend(derived.into_iter().filter(|l| !primal.contains(&l.name)));
    }
    // Each function, then its trampoline (`NAME (entry)`), then anything else.
    let mut order: Vec<&Listing> = Vec::new();
    for l in listing.iter().filter(|l| !l.name.ends_with(" (entry)")) {
        order.push(l);
        let entry = format!("{} (entry)", l.name);
        order.extend(listing.iter().filter(|t| t.name == entry));
    }
    for l in &listing {
        if !order.iter().any(|o| std::ptr::eq(*o, l)) {
            order.push(l);
        }
    }
    let mut text = String::new();
    for l in order {
        let body = if clif { &l.clif } else { &l.asm };
        let body = match body.trim_end() {
            "" => "; (the JIT's listing has no text for this function)",
            body => body,
        };
        push_item(&mut text, &format!("; @{}\n{body}", l.name));
    }
    Ok(text)
}

/// The Graphviz graph of `@id`, its forward pass and its pullback.
fn dot(
    file: &Path,
    module: &Module,
    id: FuncId,
    activity: Option<&ActivityList>,
    debug: DebugArgs,
) -> Outcome {
    let config = grad::config(module, id, activity, true, debug);
    let name = module.name(id);
    let primal_title = format!("primal: {}", signature_title(module, id));
    let primal = Cluster {
        module,
        func: id,
        name: "primal",
        title: &primal_title,
    };
    let mut out = String::new();
    match build_rrule(module, id, &config) {
        Ok(rule) => {
            let fwd = format!("forward: {}", signature_title(&rule.module, rule.forward));
            let rvs = format!("pullback: {}", signature_title(&rule.module, rule.pullback));
            let clusters = [
                primal,
                Cluster {
                    module: &rule.module,
                    func: rule.forward,
                    name: "forward",
                    title: &fwd,
                },
                Cluster {
                    module: &rule.module,
                    func: rule.pullback,
                    name: "pullback",
                    title: &rvs,
                },
            ];
            // Writing to a `String` cannot fail.
            let _ = write_dot(&mut out, name, &clusters);
            Outcome::ok(out)
        }
        // A request that does not fit the function is the user's to fix.
        Err(e @ (AdError::ActivityCount { .. } | AdError::BadActivity { .. })) => {
            Outcome::failed(vec![report::ad_error(file, module, id, &e)])
        }
        // Anything else: the function cannot be derived (yet); its graph still helps.
        Err(e) => {
            let why = report::ad_error(file, module, id, &e)
                .prefixed("the graph has the primal only: ")
                .into_warning();
            let reason = e.to_string();
            // A `//` comment runs to the end of its line.
            let reason = reason.replace(['\n', '\r'], " ");
            out.push_str(&format!(
                "// No forward pass or pullback: the rule of @{name} cannot be derived: \
                 {reason}\n"
            ));
            let _ = write_dot(&mut out, name, &[primal]);
            let mut outcome = Outcome::ok(out);
            outcome.warnings.push(why);
            outcome
        }
    }
}
