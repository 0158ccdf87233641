//! `gradlift jvp FILE --func F (--args JSON | --args-file PATH) (--tangents JSON |
//! --tangents-file PATH) [--activity LIST] [--width N] [--engine interp|jit] [--opt
//! none|default] [--time N]`: the value and the directional derivatives of one
//! function, in forward mode.
//!
//! The steps: load the module and find `@F` as `run` does; convert the arguments;
//! make the [`FruleConfig`] (the defaults of forward mode, overridden by
//! `--activity`, at width `--width`); derive the forward rule through the library's
//! [`Pipeline`] (verify, optimise unless `--opt none`, derive `@F.jvp`); read
//! `--tangents` (the JSON only: whether each tangent fits its parameter is for the
//! calling convention to say); run the rule with [`jvp_vals`], the library's one
//! implementation of the forward rule's calling convention, on the chosen engine. It
//! prints `{"value": V, "tangent": T, "args": [A...], "tangents": [S...]}`: `value`
//! as `run` prints it (null for a `dualonly` return), `tangent` the tangents of the
//! float results printed the same way (a number per result at width 1, an array of
//! its N lanes at width N; null for a `const` return or no float result), `args` as
//! `run` prints them (the final `mut` slices), `tangents` per parameter the final
//! tangent slice of a `dual` slice, null for every other.
//!
//! The engine is chosen in one `match` in `try_jvp`: the interpreter runs the
//! derived module, the JIT (the default) compiles it ([`Pipeline::compile_frule`]);
//! both run the same derived code. With `--time N` the output gains `"time":
//! {"primal_ns": MEDIAN, "jvp_ns": MEDIAN}`: the median of N calls of the
//! (optimised) primal after one warm-up, and the median of N calls of the derived
//! function after the first (the one printed), through [`run_frule`] on buffers
//! reused from call to call (the `mut` slices and their tangents are restored before
//! each call, outside the timing). With the JIT it also reports `compile_ms`
//! (optimising, deriving and compiling: from the parsed IR to callable code).

use std::path::Path;
use std::time::Instant;

use gradlift::{Pipeline, Workspace};
use gradlift_adjoint::{EvalError, Frule, FruleConfig, Jvp, jvp_vals, run_frule};
use gradlift_ir::interp::{Interpreter, Limits, Val};
use gradlift_ir::opt::OptConfig;
use gradlift_ir::{Arg, FuncId, Module};
use serde_json::{Value, json};

use super::activity::DualActivityList;
use super::report::{self, Diagnostic};
use super::run::{self, ArgsFrom};
use super::{Engine, Outcome, args, check};

/// One `jvp` command.
#[derive(Debug)]
pub(crate) struct Request<'a> {
    /// The IR text file.
    pub file: &'a Path,
    /// The function, with or without `@`.
    pub func: &'a str,
    /// The arguments.
    pub args: ArgsFrom<'a>,
    /// The tangents (`--tangents` or `--tangents-file`).
    pub tangents: ArgsFrom<'a>,
    /// `--activity`, if given.
    pub activity: Option<&'a DualActivityList>,
    /// Tangents per sweep (`--width`).
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
pub(crate) fn jvp(req: &Request<'_>) -> Outcome {
    match try_jvp(req) {
        Ok(out) => Outcome::ok(out),
        Err(error) => Outcome::failed(error),
    }
}

fn try_jvp(req: &Request<'_>) -> Result<String, Vec<Diagnostic>> {
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
    let config = DualActivityList::config(req.activity, module.sig(id)).with_width(req.width);
    let frule = derive(&module, req.file, id, &pipeline, &config)?;
    let tangents = read_tangents(&module, id, req.tangents, args::TANGENTS).map_err(|e| vec![e])?;
    let derive_time = start.elapsed();
    let fail = |e: EvalError| vec![report::eval_error(req.file, &e)];
    // The one place the engine is chosen. Both run the same forward rule, derived
    // from the same optimised module, through the same calling convention
    // (`jvp_vals`, `run_frule`).
    let (out, jvp_ns, compile_ms) = match req.engine {
        Engine::Interp => {
            let limits = Limits {
                fuel: req.fuel,
                ..Limits::default()
            };
            let mut engine = Interpreter::new(&frule.module).with_limits(limits);
            let (out, timed) =
                evaluate(&mut engine, &frule, &args, &tangents, req.time).map_err(fail)?;
            (out, timed, None)
        }
        Engine::Jit => {
            let start = Instant::now();
            let compiled = pipeline
                .compile_frule(frule)
                .map_err(|e| report::pipeline_error(req.file, &module, id, &e))?;
            let compile_time = derive_time + start.elapsed();
            let mut ws = Workspace::new();
            let mut engine = compiled.engine(&mut ws);
            let (out, timed) = evaluate(&mut engine, compiled.frule(), &args, &tangents, req.time)
                .map_err(fail)?;
            (out, timed, Some(run::millis(compile_time)))
        }
    };
    let sig = module.sig(id);
    let value = out.value.as_deref().map_or(Value::Null, args::results_json);
    // One float result: its tangent (a number, or its N lanes); several: an array
    // of them; none (or a `const` return): null. As `value` prints the results.
    let tangent = args::results_json(&out.tangents);
    let final_args: Vec<Value> = sig
        .params
        .iter()
        .zip(&out.args)
        .map(|(ty, val)| {
            if ty.is_mut_slice() {
                args::to_json(val)
            } else {
                Value::Null
            }
        })
        .collect();
    let slices: Vec<Value> = out
        .slices
        .iter()
        .map(|s| s.as_ref().map_or(Value::Null, args::to_json))
        .collect();
    let mut json = json!({
        "value": value,
        "tangent": tangent,
        "args": final_args,
        "tangents": slices,
    });
    if let Some(jvp_ns) = jvp_ns {
        let primal = run::primal(
            req.file, &module, id, &pipeline, req.engine, args, req.time, req.fuel,
        )?;
        let mut time = json!({"primal_ns": primal.primal_ns, "jvp_ns": jvp_ns});
        if let Some(ms) = compile_ms {
            time["compile_ms"] = ms;
        }
        json["time"] = time;
    }
    Ok(args::render(&json) + "\n")
}

/// The forward rule of `@id` under `config`, through `pipeline` (verified,
/// optimised, derived); a refusal reported against `file`.
fn derive(
    module: &Module,
    file: &Path,
    id: FuncId,
    pipeline: &Pipeline,
    config: &FruleConfig,
) -> Result<Frule, Vec<Diagnostic>> {
    pipeline
        .derive_jvp(module, module.name(id), Some(config))
        .map_err(|e| report::pipeline_error(file, module, id, &e))
}

/// `--tangents` (or `--tangents-file`), or `hvp`'s `--direction` (or
/// `--direction-file`) as `which` says: the JSON array, read against `@id`'s
/// parameters.
pub(crate) fn read_tangents(
    module: &Module,
    id: FuncId,
    from: ArgsFrom<'_>,
    which: args::TangentsOption,
) -> Result<Vec<Option<Val>>, Diagnostic> {
    let json = match from {
        ArgsFrom::Text(text) => serde_json::from_str(text)
            .map_err(|e| Diagnostic::new(format!("{} is not valid JSON: {e}", which.option)))?,
        // The same reading (and the same messages) as `--args-file`.
        ArgsFrom::File(_) => run::read_args(from)?,
    };
    args::tangents_from_json(module.name(id), &run::params(module, id), &json, which)
        .map_err(Diagnostic::new)
}

/// The first call (the one printed) on `engine`, and with `Some(n)` the median
/// nanoseconds of `n` more.
///
/// The timed calls go through [`run_frule`] on copies of the arguments and tangents
/// made once: before each call, the `mut` slices and the tangents (which a `mut`
/// slice's tangent overwrites) are restored in place, outside the timing; the
/// results go into one vector, reused.
fn evaluate<E: gradlift_ir::Engine>(
    engine: &mut E,
    frule: &Frule,
    args: &[Val],
    tangents: &[Option<Val>],
    time: Option<u32>,
) -> Result<(Jvp, Option<u64>), EvalError> {
    let out = jvp_vals(engine, frule, args, tangents)?;
    let Some(n) = time else {
        return Ok((out, None));
    };
    let fresh_tangents: Vec<Val> = tangents.iter().flatten().cloned().collect();
    let mut work_args = args.to_vec();
    let mut work_tangents = fresh_tangents.clone();
    let mut results = Vec::new();
    // No `with_capacity(n)`: a huge N must not allocate up front.
    let mut samples = Vec::new();
    for _ in 0..n {
        restore(&mut work_args, args);
        restore(&mut work_tangents, &fresh_tangents);
        let mut a: Vec<Arg<'_>> = work_args.iter_mut().map(Val::as_arg).collect();
        let mut t: Vec<Arg<'_>> = work_tangents.iter_mut().map(Val::as_arg).collect();
        let start = Instant::now();
        let r = run_frule(engine, frule, &mut a, &mut t, &mut results);
        let elapsed = start.elapsed().as_nanos();
        r?;
        samples.push(u64::try_from(elapsed).unwrap_or(u64::MAX));
    }
    Ok((out, run::median(&mut samples)))
}

/// Copies `fresh` into `work` in place (slices of the same length keep their
/// memory).
fn restore(work: &mut [Val], fresh: &[Val]) {
    for (w, f) in work.iter_mut().zip(fresh) {
        match (w, f) {
            (Val::F64s(w), Val::F64s(f)) if w.len() == f.len() => w.copy_from_slice(f),
            (Val::F32s(w), Val::F32s(f)) if w.len() == f.len() => w.copy_from_slice(f),
            (Val::I64s(w), Val::I64s(f)) if w.len() == f.len() => w.copy_from_slice(f),
            (w, f) => w.clone_from(f),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn restore_copies_back_in_place() {
        let fresh = [Val::F64s(vec![1.0, 2.0]), Val::F64(3.0), Val::I64s(vec![4])];
        let mut work = fresh.to_vec();
        if let Val::F64s(v) = &mut work[0] {
            v[1] = 9.0;
        }
        work[1] = Val::F64(0.0);
        let before = match &work[0] {
            Val::F64s(v) => v.as_ptr(),
            _ => unreachable!(),
        };
        restore(&mut work, &fresh);
        assert_eq!(work, fresh);
        assert!(matches!(&work[0], Val::F64s(v) if v.as_ptr() == before));
    }
}
