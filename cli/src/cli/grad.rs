//! `gradlift grad FILE --func F (--args JSON | --args-file PATH) [--activity LIST]
//! [--seed JSON] [--shadows JSON] [--width N] [--no-primal] [--debug] [--check-nan]
//! [--tape minimal|save-all] [--engine interp|jit] [--opt none|default] [--time N]
//! [--fuel N] [--timeout SECONDS]`: the value and the gradient of one function.
//!
//! The steps: load the module (parse and verify) and find `@F` as `run` does; convert
//! the arguments; make the [`RuleConfig`] (the defaults of the text format, overridden
//! by `--activity`, without the primal for `--no-primal`); derive the rule of width
//! `--width` through the library's [`Pipeline`] (verify, optimise unless `--opt
//! none`, derive, widen: [`Pipeline::derive_width`]); read `--seed` and `--shadows`
//! into [`Seeds`]; run the rule with [`run_rule_vals`], the library's one
//! implementation of the rule's calling convention, on the chosen engine. It prints
//! `{"value": V, "gradient": [G...]}`: `value` as `run` prints it (null with
//! `--no-primal`), `gradient` per parameter the cotangent for `active`, the final
//! shadow for `dup`/`dupnoneed`, null for `const`.
//!
//! At width N (reverse mode's vector mode) one pullback carries N cotangents per
//! value: `--seed` takes N numbers per float result (one array of N for one float
//! result, an array of such arrays for several; result `k`'s lane `j` goes to the
//! rule at `k * N + j`), a `--shadows` entry is N times as long as its argument
//! (lane `j` of element `i` at `i * N + j`), and in `gradient` an `active` scalar
//! prints as the array of its N lanes, a `dup` slice as its N-lane shadow. Width 1
//! is the plain rule, printed as before.
//!
//! The engine is chosen in one `match` in `try_grad`: the interpreter runs the
//! derived module, the JIT (the default) compiles it ([`Pipeline::compile_rule`]);
//! both run the same derived code. With `--time N` the output gains `"time":
//! {"primal_ns": MEDIAN, "gradient_ns": MEDIAN, "tape_bytes": PEAK}`: the median
//! of N calls of the (optimised) primal after one warm-up, the median of N
//! gradients after the first (the one printed), and the most bytes the tape held
//! during any of them; a rule with checkpointed loops adds `"recomputed_steps": R`,
//! the steps they ran again in one gradient. With the JIT it also reports `compile_ms` (optimising, deriving and
//! compiling: from the parsed IR to callable code).

use std::path::Path;
use std::time::Instant;

use gradlift::{Pipeline, Workspace};
use gradlift_adjoint::{EvalBuffers, EvalError, Gradient, Rule, RuleConfig, Seeds, run_rule_vals};
use gradlift_ir::interp::{Interpreter, Limits, Val};
use gradlift_ir::opt::OptConfig;
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
    /// `--width`: cotangents per pullback, 1 to 64.
    pub width: u32,
    /// `--no-primal`.
    pub no_primal: bool,
    /// `--debug`, `--check-nan`.
    pub debug: DebugArgs,
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
    let pipeline = Pipeline::new()
        .with_opt(req.opt.clone())
        .with_compile(check::compile_options());
    // `compile_ms` (the JIT): from the parsed IR to callable code, optimisation and
    // derivation included.
    let start = Instant::now();
    let config = config(&module, id, req.activity, !req.no_primal, req.debug);
    let rule = derive(&module, req.file, id, &pipeline, &config, req.width)?;
    let seeds = seeds(&module, id, &rule, &args, req).map_err(|e| vec![e])?;
    let derive_time = start.elapsed();
    // Only a rule with checkpointed loops reports the steps they ran again.
    let checkpointed_loops = rule.module.defined().any(|(_, f)| {
        f.placed_insts()
            .any(|(_, i)| f.insts[i].opcode == gradlift_ir::Opcode::Recompute)
    });
    let fail = |e: EvalError| vec![report::eval_error(req.file, &e)];
    // The one place the engine is chosen. Both run the same rule, derived from the
    // same optimised module, through the same calling convention (`run_rule_vals`).
    let (out, timed, compile_ms) = match req.engine {
        Engine::Interp => {
            let limits = Limits {
                fuel: req.fuel,
                ..Limits::default()
            };
            let mut engine = Interpreter::new(&rule.module).with_limits(limits);
            let (out, timed) =
                evaluate(&mut engine, &rule, &args, &seeds, req.time).map_err(fail)?;
            (out, timed, None)
        }
        Engine::Jit => {
            let start = Instant::now();
            let grad = pipeline
                .compile_rule(rule)
                .map_err(|e| report::pipeline_error(req.file, &module, id, &e))?;
            let compile_time = derive_time + start.elapsed();
            let mut ws = Workspace::new();
            let mut engine = grad.engine(&mut ws);
            let (out, timed) =
                evaluate(&mut engine, grad.rule(), &args, &seeds, req.time).map_err(fail)?;
            (out, timed, Some(run::millis(compile_time)))
        }
    };
    let value = out.value.as_deref().map_or(Value::Null, args::results_json);
    let gradient: Vec<Value> = out
        .gradient
        .iter()
        .map(|g| g.as_ref().map_or(Value::Null, args::to_json))
        .collect();
    let mut json = json!({"value": value, "gradient": gradient});
    if let Some((gradient_ns, tape_bytes, recomputed)) = timed {
        let primal = run::primal(
            req.file, &module, id, &pipeline, req.engine, args, req.time, req.fuel,
        )?;
        let mut time = json!({"primal_ns": primal.primal_ns, "gradient_ns": gradient_ns});
        if let Some(ms) = compile_ms {
            time["compile_ms"] = ms;
        }
        time["tape_bytes"] = json!(tape_bytes);
        if checkpointed_loops {
            time["recomputed_steps"] = json!(recomputed);
        }
        json["time"] = time;
    }
    Ok(args::render(&json) + "\n")
}

/// The rule of `@id` under `config` at `width`, through `pipeline` (verified,
/// optimised, derived, widened); a refusal reported against `file`.
pub(crate) fn derive(
    module: &Module,
    file: &Path,
    id: FuncId,
    pipeline: &Pipeline,
    config: &RuleConfig,
    width: u32,
) -> Result<Rule, Vec<Diagnostic>> {
    pipeline
        .derive_width(module, module.name(id), Some(config), width)
        .map_err(|e| report::pipeline_error(file, module, id, &e))
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
        .with_checkpoint_bytes(debug.checkpoint_bytes)
}

/// `--seed` and `--shadows` as [`Seeds`], checked against `@id` and its rule (of
/// width `rule.layout.width`: N seeds per float result, N-lane shadows).
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
    let width = rule.layout.width.max(1) as usize;
    let mut seeds = Seeds::default();
    if let Some(text) = req.seed {
        if config.ret == gradlift_adjoint::RetActivity::Const {
            return Err(Diagnostic::new(
                "--seed: the return is `const` (--activity ...->const), so it takes no seed",
            ));
        }
        let json = parse_json("--seed", text)?;
        let n_float = sig.results.iter().filter(|t| t.is_float()).count();
        seeds.results =
            Some(args::seeds_from_json(name, n_float, width, &json).map_err(Diagnostic::new)?);
    }
    if let Some(text) = req.shadows {
        let json = parse_json("--shadows", text)?;
        seeds.shadows = args::shadows_from_json(
            name,
            &run::params(module, id),
            &config.params,
            args,
            width,
            &json,
        )
        .map_err(Diagnostic::new)?;
    }
    Ok(seeds)
}

/// The JSON text of `option`.
fn parse_json(option: &str, text: &str) -> Result<Value, Diagnostic> {
    serde_json::from_str(text)
        .map_err(|e| Diagnostic::new(format!("{option} is not valid JSON: {e}")))
}

/// What `--time` measured of the gradients: the median nanoseconds, the most
/// bytes the tape held, the steps checkpointed loops ran again.
type Timed = (Option<u64>, usize, u64);

/// The first gradient (the one printed) on `engine`, and with `Some(n)` the
/// median nanoseconds of `n` more and the most bytes the tape held in any of them.
/// The buffers are reused, so the timed calls allocate nothing on the JIT.
fn evaluate<E: gradlift_ir::Engine>(
    engine: &mut E,
    rule: &Rule,
    args: &[Val],
    seeds: &Seeds,
    time: Option<u32>,
) -> Result<(Gradient, Option<Timed>), EvalError> {
    let mut bufs = EvalBuffers::default();
    run_rule_vals(engine, rule, args, seeds, &mut bufs)?;
    let out = Gradient {
        value: rule.layout.config.needs_primal.then(|| bufs.value.clone()),
        gradient: bufs.gradient.clone(),
        args: bufs.args.clone(),
        tape_peak_bytes: bufs.tape_peak_bytes,
        recomputed_steps: bufs.recomputed_steps,
    };
    let Some(n) = time else {
        return Ok((out, None));
    };
    // No `with_capacity(n)`: a huge N must not allocate up front.
    let mut samples = Vec::new();
    let mut tape_bytes = out.tape_peak_bytes;
    for _ in 0..n {
        let start = Instant::now();
        let r = run_rule_vals(engine, rule, args, seeds, &mut bufs);
        let elapsed = start.elapsed().as_nanos();
        r?;
        tape_bytes = tape_bytes.max(bufs.tape_peak_bytes);
        samples.push(u64::try_from(elapsed).unwrap_or(u64::MAX));
    }
    Ok((
        out,
        Some((run::median(&mut samples), tape_bytes, bufs.recomputed_steps)),
    ))
}
