//! `gradlift hvp FILE --func F (--args JSON | --args-file PATH) (--direction JSON |
//! --direction-file PATH) [--activity LIST] [--width N] [--engine interp|jit] [--opt
//! none|default] [--time N]`: the value, the gradient and a Hessian-vector product of
//! one function (forward mode over reverse mode).
//!
//! The steps: load the module and find `@F` as `run` does; convert the arguments;
//! make the [`RuleConfig`] (the defaults of the text format, overridden by
//! `--activity`, as `grad` makes it); derive the second-order rule through the
//! library's [`Pipeline`] (verify, optimise unless `--opt none`, derive the reverse
//! rule and the forward rules of its two halves, `--width` directions per sweep);
//! read `--direction` as `jvp` reads `--tangents` (the JSON only: whether each
//! direction fits its parameter is for the calling convention to say); run the rule
//! with [`hvp_vals`], the library's one implementation of its calling convention, on
//! the chosen engine. It prints `{"value": V, "gradient": [G...], "hvp": [H...]}`:
//! `value` and `gradient` as `grad` prints them (unit seeds, zero shadows), `hvp`
//! per parameter the product of the Hessian with the directions: for an `active`
//! scalar a number (width 1) or an array of its N lanes (width N), for a `dup` slice
//! an array of len*N numbers (lane j of element i at i*N+j), null for `const`.
//!
//! The engine is chosen in `try_hvp`: the interpreter runs the rule
//! [`Pipeline::derive_hvp`] derives, the JIT (the default) compiles the same rule
//! ([`Pipeline::compile_hvp`]);
//! both run the same derived code through [`hvp_vals`] (as
//! [`CompiledHvp::hvp`] does). With `--time N` the
//! output gains `"time": {"primal_ns": MEDIAN, "hvp_ns": MEDIAN}`: the median of N
//! calls of the (optimised) primal after one warm-up, and the median of N calls of
//! [`hvp_vals`] after the first (the one printed). With the JIT it also reports
//! `compile_ms` (optimising, deriving and compiling: from the parsed IR to callable
//! code).

use std::path::Path;
use std::time::Instant;

use gradlift::{CompiledHvp, Pipeline, Workspace};
use gradlift_adjoint::{EvalError, Hvp, HvpRule, RuleConfig, hvp_vals};
use gradlift_ir::interp::{Interpreter, Limits, Val};
use gradlift_ir::opt::OptConfig;
use gradlift_ir::{FuncId, Module};
use serde_json::{Value, json};

use super::activity::ActivityList;
use super::report::{self, Diagnostic};
use super::run::{self, ArgsFrom};
use super::{Engine, Outcome, args, check, jvp};

/// One `hvp` command.
#[derive(Debug)]
pub(crate) struct Request<'a> {
    /// The IR text file.
    pub file: &'a Path,
    /// The function, with or without `@`.
    pub func: &'a str,
    /// The arguments.
    pub args: ArgsFrom<'a>,
    /// The directions (`--direction` or `--direction-file`).
    pub direction: ArgsFrom<'a>,
    /// `--activity`, if given.
    pub activity: Option<&'a ActivityList>,
    /// Directions per sweep (`--width`).
    pub width: u32,
    /// The engine.
    pub engine: Engine,
    /// How many timed evaluations, if any.
    pub time: Option<u32>,
    /// The optimiser's passes (`--opt`).
    pub opt: OptConfig,
    /// The interpreter's statements per call (`--fuel`).
    pub fuel: Option<u64>,
}

/// Runs the request.
pub(crate) fn hvp(req: &Request<'_>) -> Outcome {
    match try_hvp(req) {
        Ok(out) => Outcome::ok(out),
        Err(error) => Outcome::failed(error),
    }
}

fn try_hvp(req: &Request<'_>) -> Result<String, Vec<Diagnostic>> {
    let module = check::load(req.file)?;
    let id = run::find(&module, req.file, req.func).map_err(|e| vec![e])?;
    let json = run::read_args(req.args).map_err(|e| vec![e])?;
    let args = run::convert_args(&module, id, &json).map_err(|e| vec![Diagnostic::new(e)])?;
    let pipeline = Pipeline::new()
        .with_opt(req.opt.clone())
        .with_compile(check::compile_options());
    // `compile_ms` (the JIT): from the parsed IR to callable code, optimisation and
    // derivation included.
    let start = Instant::now();
    let config = ActivityList::config(req.activity, module.sig(id));
    // The interpreter runs the derived rule; the JIT derives the same rule and
    // compiles it (`Pipeline::compile_hvp`). Either way a refusal is reported
    // before the directions are read.
    let derived = match req.engine {
        Engine::Interp => Derived::Rule(derive(
            &module, req.file, id, &pipeline, &config, req.width,
        )?),
        Engine::Jit => Derived::Compiled(
            pipeline
                .compile_hvp(&module, module.name(id), Some(&config), req.width)
                .map_err(|e| report::pipeline_error(req.file, &module, id, &e))?,
        ),
    };
    let direction =
        jvp::read_tangents(&module, id, req.direction, args::DIRECTION).map_err(|e| vec![e])?;
    let compile_time = start.elapsed();
    let fail = |e: EvalError| vec![report::eval_error(req.file, &e)];
    // The one place the engine is chosen. Both run the same second-order rule,
    // derived from the same optimised module, through the same calling convention
    // (`hvp_vals`, which `CompiledHvp::hvp` calls too).
    let (out, hvp_ns, compile_ms) = match &derived {
        Derived::Rule(rule) => {
            let limits = Limits {
                fuel: req.fuel,
                ..Limits::default()
            };
            let mut engine = Interpreter::new(&rule.module).with_limits(limits);
            let (out, timed) =
                evaluate(&mut engine, rule, &args, &direction, req.time).map_err(fail)?;
            (out, timed, None)
        }
        Derived::Compiled(compiled) => {
            let mut ws = Workspace::new();
            let mut engine = compiled.engine(&mut ws);
            let (out, timed) = evaluate(&mut engine, compiled.rule(), &args, &direction, req.time)
                .map_err(fail)?;
            (out, timed, Some(run::millis(compile_time)))
        }
    };
    let value = out.value.as_deref().map_or(Value::Null, args::results_json);
    let per_param = |vals: &[Option<Val>]| -> Vec<Value> {
        vals.iter()
            .map(|g| g.as_ref().map_or(Value::Null, args::to_json))
            .collect()
    };
    let mut json = json!({
        "value": value,
        "gradient": per_param(&out.gradient),
        "hvp": per_param(&out.hvp),
    });
    if let Some(hvp_ns) = hvp_ns {
        let primal = run::primal(
            req.file, &module, id, &pipeline, req.engine, args, req.time, req.fuel,
        )?;
        let mut time = json!({"primal_ns": primal.primal_ns, "hvp_ns": hvp_ns});
        if let Some(ms) = compile_ms {
            time["compile_ms"] = ms;
        }
        json["time"] = time;
    }
    Ok(args::render(&json) + "\n")
}

/// What the engine runs: the derived rule (the interpreter), or that rule compiled
/// (the JIT).
#[allow(clippy::large_enum_variant)] // one per command, never moved around
enum Derived {
    Rule(HvpRule),
    Compiled(CompiledHvp),
}

/// The second-order rule of `@id` under `config`, `width` directions per sweep,
/// through `pipeline` (verified, optimised, derived); a refusal reported against
/// `file`.
fn derive(
    module: &Module,
    file: &Path,
    id: FuncId,
    pipeline: &Pipeline,
    config: &RuleConfig,
    width: u32,
) -> Result<HvpRule, Vec<Diagnostic>> {
    pipeline
        .derive_hvp(module, module.name(id), Some(config), width)
        .map_err(|e| report::pipeline_error(file, module, id, &e))
}

/// The first call (the one printed) on `engine`, and with `Some(n)` the median
/// nanoseconds of `n` more. [`hvp_vals`] copies the arguments and the directions,
/// so each call starts from the same ones.
fn evaluate<E: gradlift_ir::Engine>(
    engine: &mut E,
    rule: &HvpRule,
    args: &[Val],
    direction: &[Option<Val>],
    time: Option<u32>,
) -> Result<(Hvp, Option<u64>), EvalError> {
    let out = hvp_vals(engine, rule, args, direction)?;
    let Some(n) = time else {
        return Ok((out, None));
    };
    // No `with_capacity(n)`: a huge N must not allocate up front.
    let mut samples = Vec::new();
    for _ in 0..n {
        let start = Instant::now();
        let r = hvp_vals(engine, rule, args, direction);
        let elapsed = start.elapsed().as_nanos();
        r?;
        samples.push(u64::try_from(elapsed).unwrap_or(u64::MAX));
    }
    Ok((out, run::median(&mut samples)))
}
