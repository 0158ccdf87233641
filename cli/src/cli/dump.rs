//! `gradlift dump FILE --func F --stage S [--activity LIST] [--width N] [--opt
//! none|default]`: print one stage of a function.
//!
//! Every stage but `primal` and `optimized` shows what the library's pipeline makes
//! of the function (verified, optimised unless `--opt none`, derived), which is what
//! `run` and `grad` run.
//!
//! - `primal`: the function as parsed, in the text format.
//! - `optimized`: a copy of the module optimised with the default configuration
//!   ([`gradlift_ir::opt`]), then `@F` and every function it still calls,
//!   transitively (after inlining, fewer), in the module's order, each after a blank
//!   line: IR text that parses back and verifies on its own.
//! - `forward` and `pullback`: the rule is derived as `grad` derives it (`--activity`,
//!   or the defaults), and the forward pass `@F.fwd` (or the pullback `@F.rvs`) is
//!   printed in the text format, followed by the derived functions of its callees:
//!   every function of the rule's module that the input module does not have and
//!   whose name contains `.fwd` (`.rvs`), in the module's order, each after a blank
//!   line. The derived names are legal in the text format, so the dump parses back.
//!   With `--width N` (N > 1) the rule is widened as `grad --width N` widens it:
//!   the names end in `.wN`, the pullback takes N seeds per float result and
//!   returns N cotangents per `active` parameter.
//! - `jvp`: the forward rule is derived as `jvp` derives it (`--activity` in forward
//!   mode's words, `--width`), and `@F.jvp` is printed, followed in the same way by
//!   the derived functions of its callees (names containing `.jvp`).
//! - `clif` and `asm`: the JIT's Cranelift IR (as lowered) and the host's machine
//!   code ([`gradlift_jit::listing`]) of `@F` and every function it calls, then, when
//!   the rule derives, of its forward pass, its pullback and the rules they call;
//!   each function's trampoline after it, every function under a `; @name` line
//!   (`; @name (entry)` for a trampoline). The rule is of width `--width`, as for
//!   `forward`.
//! - `dot`: Graphviz of the control-flow graphs ([`gradlift_ir::dot`]): one `digraph`
//!   with the clusters `cluster_primal`, `cluster_forward` and `cluster_pullback` (the
//!   rule derived as for `forward`, `--width` included). When the rule cannot be
//!   derived (a function reverse mode refuses), the graph has the primal cluster
//!   alone, with a comment saying why, and the reason is a warning on stderr (status
//!   0); a request that is wrong (activities that do not fit) is an error, as for
//!   `forward`.

use std::path::Path;

use gradlift::{Pipeline, Prepared};
use gradlift_adjoint::{AdError, FruleConfig, Rule, RuleConfig};
use gradlift_ir::dot::{Cluster, signature_title, write_dot};
use gradlift_ir::opt::{OptConfig, optimize};
use gradlift_ir::write::write_function;
use gradlift_ir::{FuncId, Imm, Module};
use gradlift_jit::Listing;

use super::activity::{ActivityList, DualActivityList};
use super::report::{self, Diagnostic};
use super::{DebugArgs, Outcome, Stage, check, grad, run};

/// One `dump` command.
#[derive(Debug)]
pub(crate) struct Request<'a> {
    /// The IR text file.
    pub file: &'a Path,
    /// The function, with or without `@`.
    pub func: &'a str,
    /// The stage to print.
    pub stage: Stage,
    /// `--activity`, for the reverse-mode stages.
    pub activity: Option<&'a ActivityList>,
    /// `--activity`, for `--stage jvp`.
    pub dual_activity: Option<&'a DualActivityList>,
    /// `--width`: tangents per sweep for `--stage jvp`, cotangents per sweep for
    /// the reverse-mode stages.
    pub width: u32,
    /// `--debug`, `--check-nan`, `--tape`.
    pub debug: DebugArgs,
    /// The optimiser's passes (`--opt`) for every stage but `primal` and
    /// `optimized`.
    pub opt: OptConfig,
}

/// Prints the stage the request asks for.
pub(crate) fn dump(req: &Request<'_>) -> Outcome {
    let file = req.file;
    let loaded = check::load(file).and_then(|module| {
        let id = run::find(&module, file, req.func).map_err(|e| vec![e])?;
        Ok((module, id))
    });
    let (module, id) = match loaded {
        Ok(found) => found,
        Err(errors) => return Outcome::failed(errors),
    };
    let pipeline = Pipeline::new()
        .with_opt(req.opt.clone())
        .with_compile(check::compile_options());
    let config = grad::config(&module, id, req.activity, true, req.debug);
    let at = Ctx {
        file,
        module: &module,
        id,
        pipeline: &pipeline,
        config: &config,
        width: req.width,
    };
    let printed = match req.stage {
        Stage::Primal => print(&module, &[id]).map_err(|e| vec![e]),
        Stage::Forward | Stage::Pullback => derived(&at, req.stage == Stage::Forward),
        Stage::Fused => fused(&at),
        Stage::Jvp => {
            let config =
                DualActivityList::config(req.dual_activity, module.sig(id)).with_width(req.width);
            derived_jvp(&at, &config)
        }
        Stage::Clif | Stage::Asm => native(&at, req.stage == Stage::Clif),
        Stage::Dot => return dot(&at),
        Stage::Optimized => optimized(&module, id).map_err(|e| vec![e]),
    };
    match printed {
        Ok(text) => Outcome::ok(text),
        Err(errors) => Outcome::failed(errors),
    }
}

/// What every derived or native stage works from.
struct Ctx<'a> {
    file: &'a Path,
    /// The module as parsed and verified.
    module: &'a Module,
    id: FuncId,
    pipeline: &'a Pipeline,
    /// The rule's configuration (`--activity`, debug mode, tape policy).
    config: &'a RuleConfig,
    /// The rule's width (`--width`).
    width: u32,
}

impl Ctx<'_> {
    /// The module as the pipeline prepares it (optimised unless `--opt none`).
    fn prepared(&self) -> Result<Prepared, Vec<Diagnostic>> {
        self.pipeline
            .prepare(self.module, self.module.name(self.id))
            .map_err(|e| self.error(&e))
    }

    /// The rule, derived (and widened) as `grad` derives it.
    fn rule(&self) -> Result<Rule, gradlift::Error> {
        self.pipeline.derive_width(
            self.module,
            self.module.name(self.id),
            Some(self.config),
            self.width,
        )
    }

    /// A pipeline error, reported against the file.
    fn error(&self, e: &gradlift::Error) -> Vec<Diagnostic> {
        report::pipeline_error(self.file, self.module, self.id, e)
    }
}

/// The forward pass (or the pullback) of `@id` and those of its callees.
fn derived(at: &Ctx<'_>, forward: bool) -> Result<String, Vec<Diagnostic>> {
    let rule = at.rule().map_err(|e| at.error(&e))?;
    let (main, tag) = if forward {
        (rule.forward, ".fwd")
    } else {
        (rule.pullback, ".rvs")
    };
    let derived = &rule.module;
    let module = at.module;
    let callees = derived.funcs.iter().filter_map(|(g, decl)| {
        let new = module.func_by_name(&decl.name).is_none();
        (g != main && new && decl.name.contains(tag) && decl.function().is_some()).then_some(g)
    });
    let ids: Vec<FuncId> = std::iter::once(main).chain(callees).collect();
    print(derived, &ids).map_err(|e| vec![e])
}

/// The fused value-and-gradient function `@id.vg` that `grad` runs (see
/// `docs/reverse-mode.md`, "Fused sweeps"), or an error saying that `grad` runs
/// the forward pass and the pullback instead.
fn fused(at: &Ctx<'_>) -> Result<String, Vec<Diagnostic>> {
    let rule = at.rule().map_err(|e| at.error(&e))?;
    match rule.fused {
        Some(f) => print(&rule.module, &[f]).map_err(|e| vec![e]),
        None => Err(vec![Diagnostic::new(format!(
            "gradlift dump: @{} has no fused function (it is not one loop summing into what it returns, or the request is of width above 1, in debug mode, with `--tape save-all` or a const return): `grad` runs its forward pass and pullback (`--stage forward`, `--stage pullback`)",
            at.module.name(at.id)
        ))]),
    }
}

/// The forward rule `@id.jvp` under `config` and those of its callees.
fn derived_jvp(at: &Ctx<'_>, config: &FruleConfig) -> Result<String, Vec<Diagnostic>> {
    let frule = at
        .pipeline
        .derive_jvp(at.module, at.module.name(at.id), Some(config))
        .map_err(|e| at.error(&e))?;
    let main = frule.func;
    let derived = &frule.module;
    let module = at.module;
    let callees = derived.funcs.iter().filter_map(|(g, decl)| {
        let new = module.func_by_name(&decl.name).is_none();
        (g != main && new && decl.name.contains(".jvp") && decl.function().is_some()).then_some(g)
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

/// The Cranelift IR (`clif`) or the machine code of `@id` (as the pipeline prepares
/// it) and what it calls, then (when the rule derives under `--activity`) of its
/// forward pass and pullback and the rules they call.
fn native(at: &Ctx<'_>, clif: bool) -> Result<String, Vec<Diagnostic>> {
    let compile_error = |e| report::compile_error(at.file, &e);
    let prepared = at.prepared()?;
    let mut listing =
        gradlift_jit::listing(&prepared.module, &[prepared.func]).map_err(compile_error)?;
    if let Ok(rule) = at.rule() {
        let mut roots = vec![rule.forward, rule.pullback];
        roots.extend(rule.fused);
        let derived = gradlift_jit::listing(&rule.module, &roots).map_err(compile_error)?;
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

/// The Graphviz graph of `@id` (as the pipeline prepares it), its forward pass
/// and its pullback.
fn dot(at: &Ctx<'_>) -> Outcome {
    let prepared = match at.prepared() {
        Ok(p) => p,
        Err(errors) => return Outcome::failed(errors),
    };
    let (file, module, id) = (at.file, &prepared.module, prepared.func);
    let name = module.name(id);
    let primal_title = format!("primal: {}", signature_title(module, id));
    let primal = Cluster {
        module,
        func: id,
        name: "primal",
        title: &primal_title,
    };
    let mut out = String::new();
    match at.rule() {
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
        Err(gradlift::Error::Derive(
            e @ (AdError::ActivityCount { .. } | AdError::BadActivity { .. }),
        )) => Outcome::failed(vec![report::ad_error(file, module, id, &e)]),
        Err(gradlift::Error::Derive(e)) => {
            // The function cannot be derived; its graph still helps.
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
        Err(e) => Outcome::failed(at.error(&e)),
    }
}
