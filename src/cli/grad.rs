//! `gradlift grad FILE --func F (--args JSON | --args-file PATH) [--activity LIST]
//! [--seed JSON] [--shadows JSON] [--no-primal] [--engine interp|jit] [--time N]`:
//! the value and the gradient of one function.
//!
//! The steps: load the module (parse and verify) and find `@F` as `run` does; convert
//! the arguments; make the [`RuleConfig`] (the defaults of the text format, overridden
//! by `--activity`, without the primal for `--no-primal`) and derive the rule
//! ([`build_rrule`]); read `--seed` and `--shadows` into [`Seeds`]; run
//! [`value_and_gradient`] on an interpreter of the rule's module. It prints
//! `{"value": V, "gradient": [G...]}`: `value` as `run` prints it (null with
//! `--no-primal`), `gradient` per parameter the cotangent for `active`, the final
//! shadow for `dup`/`dupnoneed`, null for `const`.
//!
//! With `--time N` the output gains `"time": {"primal_ns": MEDIAN, "gradient_ns":
//! MEDIAN, "tape_bytes": PEAK}`: the median of N calls of the primal after one
//! warm-up, the median of N gradients after the first (the one printed), and the
//! most bytes the tape holds during one gradient.
//!
//! The engine is chosen in one `match` in `try_grad`: the interpreter
//! ([`value_and_gradient`]), or the JIT (the default: the rule compiled with
//! [`CompiledGradient::from_rule`]). With the JIT, `--time` also reports
//! `compile_ms` (deriving and compiling, from the parsed IR to callable code) and
//! times the gradients on a prepared [`gradlift::GradientCache`].

use std::path::Path;
use std::time::{Duration, Instant};

use gradlift::{CompiledGradient, Hosts, Workspace};

use gradlift_adjoint::{Gradient, Rule, RuleConfig, Seeds, build_rrule, value_and_gradient};
use gradlift_ir::interp::{Interpreter, Val};
use gradlift_ir::{FuncId, Module};
use serde_json::{Value, json};

use super::activity::ActivityList;
use super::report::{self, Diagnostic};
use super::run::{self, ArgsFrom};
use super::{DebugArgs, Engine, Outcome, args, check};

/// One `grad` command.
#[derive(Debug)]
pub(crate) struct Request<'a> {
    /// The IR text file.
    pub file: &'a Path,
    /// The function, with or without `@`.
    pub func: &'a str,
    /// The arguments.
    pub args: ArgsFrom<'a>,
    /// `--activity`, if given.
    pub activity: Option<&'a ActivityList>,
    /// `--seed`, the JSON text, if given.
    pub seed: Option<&'a str>,
    /// `--shadows`, the JSON text, if given.
    pub shadows: Option<&'a str>,
    /// `--no-primal`.
    pub no_primal: bool,
    /// `--debug`, `--check-nan`.
    pub debug: DebugArgs,
    /// The engine.
    pub engine: Engine,
    /// How many timed evaluations, if any.
    pub time: Option<u32>,
}

/// Runs the request.
pub(crate) fn grad(req: &Request<'_>) -> Outcome {
    match try_grad(req) {
        Ok(out) => Outcome::ok(out),
        Err(error) => Outcome::failed(error),
    }
}

fn try_grad(req: &Request<'_>) -> Result<String, Vec<Diagnostic>> {
    let module = check::load(req.file)?;
    let id = run::find(&module, req.file, req.func).map_err(|e| vec![e])?;
    let json = run::read_args(req.args).map_err(|e| vec![e])?;
    let args = run::convert_args(&module, id, &json).map_err(|e| vec![Diagnostic::new(e)])?;
    // `compile_ms` (the JIT): from the parsed IR to callable code, derivation
    // included.
    let start = Instant::now();
    let rule = derive(
        &module,
        req.file,
        id,
        req.activity,
        !req.no_primal,
        req.debug,
    )
    .map_err(|e| vec![e])?;
    let seeds = seeds(&module, id, &rule, &args, req).map_err(|e| vec![e])?;
    let ready = Ready {
        file: req.file,
        module: &module,
        id,
        rule: &rule,
        args: &args,
        seeds: &seeds,
        derive_time: start.elapsed(),
    };
    // The one place the engine is chosen. Each branch gives the gradient of the
    // first evaluation (the one printed) and, with `--time N`, the "time" object.
    let (out, time) = match req.engine {
        Engine::Interp => ready.on_interp(req.time)?,
        Engine::Jit => ready.on_jit(req.time)?,
    };
    let value = out.value.as_deref().map_or(Value::Null, args::results_json);
    let gradient: Vec<Value> = out
        .gradient
        .iter()
        .map(|g| g.as_ref().map_or(Value::Null, args::to_json))
        .collect();
    let mut json = json!({"value": value, "gradient": gradient});
    if let Some(time) = time {
        json["time"] = time;
    }
    Ok(args::render(&json) + "\n")
}

/// The rule of `@id` for `--activity` (`None`: the defaults), with or without the
/// primal result; a refusal reported against `file`.
pub(crate) fn derive(
    module: &Module,
    file: &Path,
    id: FuncId,
    activity: Option<&ActivityList>,
    needs_primal: bool,
    debug: DebugArgs,
) -> Result<Rule, Diagnostic> {
    build_rrule(
        module,
        id,
        &config(module, id, activity, needs_primal, debug),
    )
    .map_err(|e| report::ad_error(file, module, id, &e))
}

/// The configuration of the rule of `@id`: `--activity` (`None`: the defaults),
/// with or without the primal result, in debug mode or not.
pub(crate) fn config(
    module: &Module,
    id: FuncId,
    activity: Option<&ActivityList>,
    needs_primal: bool,
    debug: DebugArgs,
) -> RuleConfig {
    ActivityList::config(activity, module.sig(id))
        .with_primal(needs_primal)
        .with_debug(debug.debug || debug.check_nan, debug.check_nan)
        .with_tape(debug.tape)
}

/// `--seed` and `--shadows` as [`Seeds`], checked against `@id` and its rule.
fn seeds(
    module: &Module,
    id: FuncId,
    rule: &Rule,
    args: &[Val],
    req: &Request<'_>,
) -> Result<Seeds, Diagnostic> {
    let name = module.name(id);
    let sig = module.sig(id);
    let config = &rule.layout.config;
    let mut seeds = Seeds::default();
    if let Some(text) = req.seed {
        if config.ret == gradlift_adjoint::RetActivity::Const {
            return Err(Diagnostic::new(
                "--seed: the return is `const` (--activity ...->const), so it takes no seed",
            ));
        }
        let json = parse_json("--seed", text)?;
        let n_float = sig.results.iter().filter(|t| t.is_float()).count();
        seeds.results = Some(args::seeds_from_json(name, n_float, &json).map_err(Diagnostic::new)?);
    }
    if let Some(text) = req.shadows {
        let json = parse_json("--shadows", text)?;
        seeds.shadows =
            args::shadows_from_json(name, &run::params(module, id), &config.params, args, &json)
                .map_err(Diagnostic::new)?;
    }
    Ok(seeds)
}

/// The JSON text of `option`.
fn parse_json(option: &str, text: &str) -> Result<Value, Diagnostic> {
    serde_json::from_str(text)
        .map_err(|e| Diagnostic::new(format!("{option} is not valid JSON: {e}")))
}

/// A checked request: the rule, its arguments and seeds, ready for an engine.
struct Ready<'a> {
    file: &'a Path,
    module: &'a Module,
    id: FuncId,
    rule: &'a Rule,
    args: &'a [Val],
    seeds: &'a Seeds,
    /// How long deriving the rule took.
    derive_time: Duration,
}

impl Ready<'_> {
    /// The gradient on the interpreter and, with `Some(n)`, the "time" object.
    fn on_interp(&self, time: Option<u32>) -> Result<(Gradient, Option<Value>), Vec<Diagnostic>> {
        let mut engine = Interpreter::new(&self.rule.module);
        let out = value_and_gradient(&mut engine, self.rule, self.args, self.seeds)
            .map_err(|e| vec![report::eval_error(self.file, &e)])?;
        let time = match time {
            None => None,
            Some(n) => Some(self.measure(&mut engine, n).map_err(|e| vec![e])?),
        };
        Ok((out, time))
    }

    /// The gradient with the JIT and, with `Some(n)`, the "time" object (with
    /// `compile_ms`: deriving and compiling the rule).
    fn on_jit(&self, time: Option<u32>) -> Result<(Gradient, Option<Value>), Vec<Diagnostic>> {
        let file = self.file;
        // The rule is shared with the interpreter's path: the copy is not timed.
        let rule = self.rule.clone();
        let start = Instant::now();
        let grad =
            CompiledGradient::from_rule(rule, &Hosts::new()).map_err(|e| api_error(file, &e))?;
        let compile_time = self.derive_time + start.elapsed();
        let mut ws = Workspace::new();
        let out = grad
            .value_and_pullback(&mut ws, self.args, self.seeds)
            .map_err(|e| api_error(file, &e))?;
        let Some(n) = time else {
            return Ok((out, None));
        };
        let primal = run::jit(file, self.module, self.id, self.args.to_vec(), Some(n))?;
        let mut cache = grad
            .prepare_with(self.args, self.seeds)
            .map_err(|e| api_error(file, &e))?;
        let mut samples = Vec::new();
        let mut tape_bytes = out.tape_peak_bytes;
        for _ in 0..n {
            let start = Instant::now();
            let r = cache.value_and_pullback(self.args, self.seeds);
            let elapsed = start.elapsed().as_nanos();
            let g = r.map_err(|e| api_error(file, &e))?;
            tape_bytes = tape_bytes.max(g.tape_peak_bytes);
            samples.push(u64::try_from(elapsed).unwrap_or(u64::MAX));
        }
        let ms = (compile_time.as_secs_f64() * 1e6).round() / 1e3;
        Ok((
            out,
            Some(json!({
                "primal_ns": primal.primal_ns,
                "gradient_ns": run::median(&mut samples),
                "compile_ms": ms,
                "tape_bytes": tape_bytes,
            })),
        ))
    }

    /// `{"primal_ns": ..., "gradient_ns": ..., "tape_bytes": ...}` from `n` timed
    /// calls each. `engine` has already computed one gradient (the warm-up).
    fn measure(&self, engine: &mut Interpreter<'_>, n: u32) -> Result<Value, Diagnostic> {
        let primal_ns = run::interpret(self.module, self.id, self.args.to_vec(), Some(n))
            .map_err(|e| report::interp_error(self.file, &e))?
            .primal_ns;
        // No `with_capacity(n)`: a huge N must not allocate up front.
        let mut samples = Vec::new();
        let mut tape_bytes = 0;
        for _ in 0..n {
            let start = Instant::now();
            let r = value_and_gradient(engine, self.rule, self.args, self.seeds);
            let elapsed = start.elapsed().as_nanos();
            let out = r.map_err(|e| report::eval_error(self.file, &e))?;
            tape_bytes = tape_bytes.max(out.tape_peak_bytes);
            samples.push(u64::try_from(elapsed).unwrap_or(u64::MAX));
        }
        let gradient_ns = run::median(&mut samples);
        Ok(json!({
            "primal_ns": primal_ns,
            "gradient_ns": gradient_ns,
            "tape_bytes": tape_bytes,
        }))
    }
}

/// An error of the compiled API, reported as the CLI reports the engines' errors.
fn api_error(file: &Path, e: &gradlift::Error) -> Vec<Diagnostic> {
    match e {
        gradlift::Error::Compile(c) => report::compile_error(file, c),
        gradlift::Error::Run(j) => vec![report::jit_error(file, j)],
        e => vec![Diagnostic::new(e.to_string())],
    }
}
