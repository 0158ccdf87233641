//! `gradlift run FILE --func F (--args JSON | --args-file PATH)`: evaluate one function.
//!
//! The steps: load the module (parse and verify), find `@F`, read the JSON arguments
//! and convert them against `@F`'s signature, call the engine, and print
//! `{"value": V, "args": [A...]}`: `value` is the result (an array for several, null
//! for none), `args` the final contents of each `mut` slice parameter (null for the
//! others). With `--time N` the function runs N more times after the first call (the
//! warm-up), each time on fresh copies of the arguments, and the output gains
//! `"time": {"primal_ns": MEDIAN}`.
//!
//! Both engines run what the library's [`Pipeline`] makes of the module (verified,
//! then optimised unless `--opt none`): the interpreter runs the optimised module,
//! the JIT (the default) compiles `@F` and what it calls from it, and both print the
//! same JSON. Runtime errors read alike on both (`FILE:LINE:COL: error: in @f,
//! load: ...`), and what the JIT cannot compile (a call to an `extern`: the command
//! line has no host functions) is a user error at the op. With `--time` the JIT
//! adds `"compile_ms"`: milliseconds from the parsed IR to callable code
//! (optimisation included).

use std::path::Path;
use std::time::{Duration, Instant};

use gradlift::Pipeline;
use gradlift_ir::interp::{Interpreter, Limits, RunError, Val};
use gradlift_ir::opt::OptConfig;
use gradlift_ir::{FuncId, Module};
use gradlift_jit::Workspace;
use serde_json::{Value, json};

use super::args::{self, Param};
use super::report::{self, Diagnostic};
use super::{Engine, Outcome, check};

/// Where the JSON arguments come from.
#[derive(Copy, Clone, Debug)]
pub(crate) enum ArgsFrom<'a> {
    /// `--args JSON`.
    Text(&'a str),
    /// `--args-file PATH`.
    File(&'a Path),
}

/// One `run` command.
#[derive(Debug)]
pub(crate) struct Request<'a> {
    /// The IR text file.
    pub file: &'a Path,
    /// The function, with or without `@`.
    pub func: &'a str,
    /// The arguments.
    pub args: ArgsFrom<'a>,
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
pub(crate) fn run(req: &Request<'_>) -> Outcome {
    match try_run(req) {
        Ok(out) => Outcome::ok(out),
        Err(errors) => Outcome::failed(errors),
    }
}

fn try_run(req: &Request<'_>) -> Result<String, Vec<Diagnostic>> {
    let text = check::read(req.file)?;
    let module = check::parse_verified(req.file, &text)?;
    let id = find(&module, req.file, req.func).map_err(|e| vec![e])?;
    let json = read_args(req.args).map_err(|e| vec![e])?;
    let args = convert_args(&module, id, &json).map_err(|e| vec![Diagnostic::new(e)])?;
    let pipeline = Pipeline::new()
        .with_opt(req.opt.clone())
        .with_compile(check::compile_options());
    let evaluated = primal(
        req.file, &module, id, &pipeline, req.engine, args, req.time, req.fuel,
    )?;
    let value = args::results_json(&evaluated.results);
    let sig = module.sig(id);
    let final_args: Vec<Value> = sig
        .params
        .iter()
        .zip(&evaluated.args)
        .map(|(ty, val)| {
            if ty.is_mut_slice() {
                args::to_json(val)
            } else {
                Value::Null
            }
        })
        .collect();
    let mut out = json!({"value": value, "args": final_args});
    if let Some(ns) = evaluated.primal_ns {
        out["time"] = json!({ "primal_ns": ns });
        if let Some(ms) = evaluated.compile_ms {
            out["time"]["compile_ms"] = ms;
        }
    }
    Ok(args::render(&out) + "\n")
}

/// The defined function `func` (with or without its `@`) of `module`.
pub(crate) fn find(module: &Module, file: &Path, func: &str) -> Result<FuncId, Diagnostic> {
    let name = func.strip_prefix('@').unwrap_or(func);
    let id = module
        .func_by_name(name)
        .ok_or_else(|| Diagnostic::new(format!("no function @{name} in {}", file.display())))?;
    if module.function(id).is_none() {
        let decl = &module.funcs[id];
        return Err(Diagnostic::at(
            file,
            decl.pos,
            format!(
                "@{name} is an extern function: the host program supplies its body, so \
                 it runs only from Rust"
            ),
        ));
    }
    Ok(id)
}

/// The JSON text of the arguments, parsed.
pub(crate) fn read_args(from: ArgsFrom<'_>) -> Result<Value, Diagnostic> {
    match from {
        ArgsFrom::Text(text) => serde_json::from_str(text)
            .map_err(|e| Diagnostic::new(format!("--args is not valid JSON: {e}"))),
        ArgsFrom::File(path) => {
            let bytes = super::check::read_input(path).map_err(Diagnostic::new)?;
            let text = String::from_utf8(bytes).map_err(|e| {
                Diagnostic::new(format!("cannot read {}: not UTF-8: {e}", path.display()))
            })?;
            serde_json::from_str(&text).map_err(|e| {
                // serde_json's message ends with the position; the diagnostic puts
                // it in front instead.
                let message = e.to_string();
                let suffix = format!(" at line {} column {}", e.line(), e.column());
                let message = message.strip_suffix(&suffix).unwrap_or(&message);
                let pos = gradlift_ir::Pos::new(
                    u32::try_from(e.line()).unwrap_or(u32::MAX),
                    u32::try_from(e.column()).unwrap_or(u32::MAX),
                );
                Diagnostic::at(path, pos, format!("not valid JSON: {message}"))
            })
        }
    }
}

/// The arguments for `id`, converted from JSON against its signature.
pub(crate) fn convert_args(module: &Module, id: FuncId, json: &Value) -> Result<Vec<Val>, String> {
    args::from_json(module.name(id), &params(module, id), json)
}

/// The parameters of `id` as messages name them (by name and type).
pub(crate) fn params(module: &Module, id: FuncId) -> Vec<Param<'_>> {
    let name = |k: usize| -> Option<&str> {
        let body = module.function(id)?;
        let &v = body.params.get(k)?;
        body.values.get(v)?.name.as_deref()
    };
    module
        .sig(id)
        .params
        .iter()
        .enumerate()
        .map(|(k, &ty)| Param { name: name(k), ty })
        .collect()
}

/// What one evaluation of a function gave.
#[derive(Debug)]
pub(crate) struct Evaluated {
    /// The results of the first call.
    pub results: Vec<Val>,
    /// The arguments after the first call (`mut` slices written).
    pub args: Vec<Val>,
    /// With `--time N`: the median nanoseconds of N further calls.
    pub primal_ns: Option<u64>,
    /// With `--time N` on the JIT: milliseconds from the file's text to callable
    /// code, as a JSON number.
    pub compile_ms: Option<Value>,
}

/// Calls `@id` of `module` on `engine` as `pipeline` prepares it, then `time` more
/// times on fresh copies of `args`: the interpreter runs the prepared (optimised)
/// module, the JIT compiles it. `compile_ms` (the JIT, with `time`) is the
/// pipeline's time from the parsed IR to callable code.
#[allow(clippy::too_many_arguments)] // the request's parts, as `run` and `grad` hold them
pub(crate) fn primal(
    file: &Path,
    module: &Module,
    id: FuncId,
    pipeline: &Pipeline,
    engine: Engine,
    args: Vec<Val>,
    time: Option<u32>,
    fuel: Option<u64>,
) -> Result<Evaluated, Vec<Diagnostic>> {
    let name = module.name(id);
    let fail = |e: gradlift::Error| report::pipeline_error(file, module, id, &e);
    match engine {
        Engine::Interp => {
            let prepared = pipeline.prepare(module, name).map_err(fail)?;
            interpret(&prepared.module, prepared.func, args, time, fuel)
                .map_err(|e| vec![report::run_error(file, &e)])
        }
        Engine::Jit => {
            let compiled = pipeline.compile_function(module, name).map_err(fail)?;
            let mut ws = Workspace::new();
            let mut first = args.clone();
            let results = compiled.call(&mut ws, &mut first).map_err(fail)?;
            let primal_ns = timed(time, &args, |a| compiled.call(&mut ws, a)).map_err(fail)?;
            Ok(Evaluated {
                results,
                args: first,
                primal_ns,
                compile_ms: time.map(|_| millis(compiled.compile_time())),
            })
        }
    }
}

/// Calls `id` on the interpreter, then `time` more times on fresh copies of `args`.
fn interpret(
    module: &Module,
    id: FuncId,
    args: Vec<Val>,
    time: Option<u32>,
    fuel: Option<u64>,
) -> Result<Evaluated, RunError> {
    let limits = Limits {
        fuel,
        ..Limits::default()
    };
    let mut interp = Interpreter::new(module).with_limits(limits);
    let mut first = args.clone();
    let results = interp.call(id, &mut first)?;
    let primal_ns = timed(time, &args, |a| interp.call(id, a))?;
    Ok(Evaluated {
        results,
        args: first,
        primal_ns,
        compile_ms: None,
    })
}

/// `d` in milliseconds, to the microsecond, as a JSON number.
pub(crate) fn millis(d: Duration) -> Value {
    let ms = (d.as_secs_f64() * 1e6).round() / 1e3;
    json!(ms)
}

/// With `Some(n)`: the median nanoseconds of `n` calls of `call`, each on a fresh
/// copy of `args` (the caller has made the warm-up call). The first error ends it.
fn timed<R, E>(
    time: Option<u32>,
    args: &[Val],
    mut call: impl FnMut(&mut [Val]) -> Result<R, E>,
) -> Result<Option<u64>, E> {
    let Some(n) = time else {
        return Ok(None);
    };
    // No `with_capacity(n)`: a huge N must not allocate up front.
    let mut samples = Vec::new();
    for _ in 0..n {
        let mut fresh = args.to_vec();
        let start = Instant::now();
        let r = call(&mut fresh);
        let elapsed = start.elapsed().as_nanos();
        r?;
        samples.push(u64::try_from(elapsed).unwrap_or(u64::MAX));
    }
    Ok(median(&mut samples))
}

/// The median (the mean of the two middle samples for an even count).
pub(crate) fn median(samples: &mut [u64]) -> Option<u64> {
    samples.sort_unstable();
    let n = samples.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(samples[n / 2]),
        _ => {
            let sum = u128::from(samples[n / 2 - 1]) + u128::from(samples[n / 2]);
            Some(u64::try_from(sum / 2).unwrap_or(u64::MAX))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_and_even_counts() {
        assert_eq!(median(&mut []), None);
        assert_eq!(median(&mut [5]), Some(5));
        assert_eq!(median(&mut [9, 1, 5]), Some(5));
        assert_eq!(median(&mut [4, 1, 3, 100]), Some(3));
        assert_eq!(median(&mut [u64::MAX, u64::MAX]), Some(u64::MAX));
        assert_eq!(median(&mut [1, 2]), Some(1));
    }
}
