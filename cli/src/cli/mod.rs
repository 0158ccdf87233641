//! The `gradlift` command line: argument parsing, dispatch, and exit statuses.
//!
//! The CLI is a thin layer over the library (`docs/cli.md` is its manual): it runs
//! the library's `Pipeline` on both engines, reads IR text, converts JSON arguments to
//! interpreter values and back, and reports errors. Each command returns an
//! [`Outcome`]: the text for stdout and the [`Diagnostic`]s for stderr. The exit
//! status is 0 when there are no diagnostics, 1 when there are (a user error: bad
//! file, bad arguments, a runtime error of the program), and 2 for usage errors,
//! which clap reports itself (unknown options, a missing `--func`, both or neither of
//! `--args` and `--args-file`, of `--tangents` and `--tangents-file` or of
//! `--direction` and `--direction-file`, a malformed
//! `--activity`, one of the wrong mode for `dump`'s stage, a `--width` out of 1..=64).

mod activity;
mod args;
mod check;
mod dump;
mod grad;
mod hvp;
mod jvp;
mod report;
mod run;

use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand, ValueEnum};
use gradlift_ir::opt::OptConfig;

use activity::{ActivityList, AnyActivityList, DualActivityList};
use report::Diagnostic;

/// The whole command line.
#[derive(Parser, Debug)]
#[command(
    name = "gradlift",
    version,
    about = "Automatic differentiation by program transformation: check, run and \
             differentiate IR text files (gradients in reverse mode, directional \
             derivatives in forward mode, Hessian-vector products)"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// The most instructions a function may have: a larger one is refused while
    /// the file is read, before anything is built for it. Derived and compiled
    /// functions may have 2.5 times as many.
    #[arg(long, global = true, value_name = "N", default_value_t = check::DEFAULT_MAX_INSTS)]
    max_insts: usize,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Parse and verify IR files; prints `ok: N functions`, or every error found.
    ///
    /// With several files, each line is prefixed with its file:
    /// `FILE: ok: N functions`. The exit status is 1 if any file fails.
    Check {
        /// The IR text files.
        #[arg(required = true, value_name = "FILE")]
        files: Vec<PathBuf>,
    },
    /// Run one function; prints `{"value": V, "args": [A...]}`.
    Run(RunArgs),
    /// Value and gradient of one function; prints `{"value": V, "gradient": [G...]}`.
    ///
    /// `gradient` holds, per parameter, the cotangent for `active` (N lanes at
    /// width N), the final shadow for `dup`/`dupnoneed` (N lanes per element at
    /// width N), null for `const`. Both engines run the same derived code.
    Grad(GradArgs),
    /// Value and directional derivatives of one function (forward mode); prints
    /// `{"value": V, "tangent": T, "args": [A...], "tangents": [S...]}`.
    ///
    /// `tangent` is the tangent of the result (N lanes at width N), `tangents` per
    /// parameter the final tangent slice of a `dual` slice, null otherwise. Both
    /// engines run the same derived code.
    Jvp(JvpArgs),
    /// Value, gradient and Hessian-vector product of one function (forward mode
    /// over reverse mode); prints `{"value": V, "gradient": [G...], "hvp": [H...]}`.
    ///
    /// `value` and `gradient` are as `grad` prints them; `hvp` holds, per
    /// parameter, the Hessian times the direction (N lanes at width N) for `active`
    /// and `dup`, null for `const`. Both engines run the same derived code.
    Hvp(HvpArgs),
    /// Print one stage of a function: IR text (`primal`, `optimized`, `forward`,
    /// `pullback`, `jvp`), the JIT's Cranelift IR or machine code of the primal and
    /// of its forward pass and pullback (`clif`, `asm`), or Graphviz of the
    /// control-flow graphs (`dot`).
    Dump(DumpArgs),
}

/// Where the function's arguments come from: exactly one of the two options.
#[derive(Args, Debug)]
#[group(required = true, multiple = false)]
struct ArgsSource {
    /// The arguments: a JSON array, one element per parameter.
    #[arg(long, value_name = "JSON", allow_hyphen_values = true)]
    args: Option<String>,
    /// A file holding the JSON array of arguments.
    #[arg(long, value_name = "PATH")]
    args_file: Option<PathBuf>,
}

impl ArgsSource {
    /// The one source given.
    fn get(&self) -> run::ArgsFrom<'_> {
        match (&self.args, &self.args_file) {
            (Some(json), _) => run::ArgsFrom::Text(json),
            (None, Some(path)) => run::ArgsFrom::File(path),
            // clap's group requires one of them; should that ever change, this is
            // still a usage error (status 2), not a panic.
            (None, None) => {
                use clap::CommandFactory;
                Cli::command()
                    .error(
                        clap::error::ErrorKind::MissingRequiredArgument,
                        "one of --args and --args-file is required",
                    )
                    .exit()
            }
        }
    }
}

/// Where the tangents come from: exactly one of the two options.
#[derive(Args, Debug)]
#[group(required = true, multiple = false)]
struct TangentsSource {
    /// The tangents: a JSON array, one element per parameter: for a `dual` float
    /// scalar a number (width 1) or an array of N numbers (width N), for a `dual`
    /// slice an array of len*N numbers (lane j of element i at i*N+j), null for a
    /// `const` parameter.
    #[arg(long, value_name = "JSON", allow_hyphen_values = true)]
    tangents: Option<String>,
    /// A file holding the JSON array of tangents.
    #[arg(long, value_name = "PATH")]
    tangents_file: Option<PathBuf>,
}

impl TangentsSource {
    /// The one source given.
    fn get(&self) -> run::ArgsFrom<'_> {
        match (&self.tangents, &self.tangents_file) {
            (Some(json), _) => run::ArgsFrom::Text(json),
            (None, Some(path)) => run::ArgsFrom::File(path),
            (None, None) => usage("one of --tangents and --tangents-file is required"),
        }
    }
}

/// Exits with a usage error (status 2), reported as clap reports its own.
fn usage(message: &str) -> ! {
    use clap::CommandFactory;
    Cli::command()
        .error(clap::error::ErrorKind::ValueValidation, message)
        .exit()
}

/// Which engine evaluates the function.
#[derive(ValueEnum, Copy, Clone, PartialEq, Eq, Debug)]
enum Engine {
    /// The reference interpreter.
    Interp,
    /// Native code compiled with Cranelift.
    Jit,
}

/// Where the directions of `hvp` come from: exactly one of the two options.
#[derive(Args, Debug)]
#[group(required = true, multiple = false)]
struct DirectionSource {
    /// The directions: a JSON array, one element per parameter: for an `active`
    /// float scalar a number (width 1) or an array of N numbers (width N), for a
    /// `dup` slice an array of len*N numbers (lane j of element i at i*N+j), null
    /// for a `const` parameter.
    #[arg(long, value_name = "JSON", allow_hyphen_values = true)]
    direction: Option<String>,
    /// A file holding the JSON array of directions.
    #[arg(long, value_name = "PATH")]
    direction_file: Option<PathBuf>,
}

impl DirectionSource {
    /// The one source given.
    fn get(&self) -> run::ArgsFrom<'_> {
        match (&self.direction, &self.direction_file) {
            (Some(json), _) => run::ArgsFrom::Text(json),
            (None, Some(path)) => run::ArgsFrom::File(path),
            // As for `ArgsSource`: a usage error, not a panic.
            (None, None) => usage("one of --direction and --direction-file is required"),
        }
    }
}

/// Whether the optimiser runs before an engine runs (or the derivation derives)
/// the module: `--opt` (an extension of the command line's contract).
#[derive(ValueEnum, Copy, Clone, PartialEq, Eq, Debug)]
enum Opt {
    /// The optimiser's default passes (what the library does).
    Default,
    /// No pass: the module runs and derives as written.
    None,
}

impl Opt {
    /// The library's configuration for this choice.
    fn config(self) -> OptConfig {
        match self {
            Opt::Default => OptConfig::default(),
            Opt::None => OptConfig::none(),
        }
    }
}

#[derive(Args, Debug)]
struct RunArgs {
    /// The IR text file.
    file: PathBuf,
    /// The function to run (with or without its `@`).
    #[arg(long, value_name = "F")]
    func: String,
    #[command(flatten)]
    source: ArgsSource,
    /// The engine.
    #[arg(long, value_enum, default_value = "jit")]
    engine: Engine,
    /// Whether the optimiser runs first (`none`: run the module as written).
    #[arg(long, value_enum, default_value = "default")]
    opt: Opt,
    /// Also evaluate N times after one warm-up and report the median time.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    time: Option<u32>,
    /// The interpreter's bound: at most N statements per call, then an error
    /// (`--engine interp`; with the JIT, use `--timeout`).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    fuel: Option<u64>,
    /// Give up after SECONDS of wall-clock time (parsing and compiling included)
    /// with an error, on either engine: for a function that may not end.
    #[arg(long, value_name = "SECONDS", value_parser = parse_timeout)]
    timeout: Option<f64>,
}

#[derive(Args, Debug)]
struct GradArgs {
    /// The IR text file.
    file: PathBuf,
    /// The function to differentiate.
    #[arg(long, value_name = "F")]
    func: String,
    #[command(flatten)]
    source: ArgsSource,
    /// One activity per parameter (`active`, `dup`, `dupnoneed`, `const`), comma
    /// separated, optionally followed by `->active` or `->const` for the return.
    #[arg(long, value_name = "LIST", allow_hyphen_values = true, value_parser = ActivityList::parse)]
    activity: Option<ActivityList>,
    /// The cotangent of the result (a number, or an array with one per float
    /// result; at width N an array of N numbers, or one such array per float
    /// result); default 1 each.
    #[arg(long, value_name = "JSON", allow_hyphen_values = true)]
    seed: Option<String>,
    /// The initial contents of the shadows of `dup` parameters: a JSON array with one
    /// element per parameter, null (zeros; and for every other parameter) or an array
    /// (len*N numbers at width N, lane j of element i at i*N+j).
    #[arg(long, value_name = "JSON", allow_hyphen_values = true)]
    shadows: Option<String>,
    /// Cotangents per sweep, from 1 to 64 (reverse mode's vector mode): `--seed`
    /// takes N numbers per float result, each shadow N lanes per element, and each
    /// `active` scalar's gradient prints as its N lanes.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=i64::from(gradlift_adjoint::MAX_REVERSE_WIDTH)))]
    width: u32,
    /// The primal result is not needed (`value` is then null).
    #[arg(long)]
    no_primal: bool,
    #[command(flatten)]
    debug: DebugArgs,
    /// The engine.
    #[arg(long, value_enum, default_value = "jit")]
    engine: Engine,
    /// Whether the optimiser runs before the derivation (`none`: derive the module
    /// as written).
    #[arg(long, value_enum, default_value = "default")]
    opt: Opt,
    /// Also evaluate N times after one warm-up and report the median times.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    time: Option<u32>,
    /// The interpreter's bound: at most N statements per call of the forward pass
    /// or the pullback, then an error (`--engine interp`; with the JIT, use
    /// `--timeout`).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    fuel: Option<u64>,
    /// Give up after SECONDS of wall-clock time (parsing, deriving and compiling
    /// included) with an error, on either engine: for a function that may not end.
    #[arg(long, value_name = "SECONDS", value_parser = parse_timeout)]
    timeout: Option<f64>,
}

#[derive(Args, Debug)]
struct JvpArgs {
    /// The IR text file.
    file: PathBuf,
    /// The function to differentiate.
    #[arg(long, value_name = "F")]
    func: String,
    #[command(flatten)]
    source: ArgsSource,
    #[command(flatten)]
    tangents: TangentsSource,
    /// One activity per parameter (`dual`, `const`), comma separated, optionally
    /// followed by `->dual`, `->dualonly` or `->const` for the return; default:
    /// `dual` for float scalars and float slices, a `dual` return.
    #[arg(long, value_name = "LIST", allow_hyphen_values = true, value_parser = DualActivityList::parse)]
    activity: Option<DualActivityList>,
    /// Tangents (directions) per sweep, from 1 to 64: each `dual` scalar takes N
    /// numbers, each `dual` slice N lanes per element.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=i64::from(gradlift_adjoint::MAX_WIDTH)))]
    width: u32,
    /// The engine.
    #[arg(long, value_enum, default_value = "jit")]
    engine: Engine,
    /// Whether the optimiser runs before the derivation (`none`: derive the module
    /// as written).
    #[arg(long, value_enum, default_value = "default")]
    opt: Opt,
    /// Also evaluate N times after one warm-up and report the median times.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    time: Option<u32>,
    /// The interpreter's bound: at most N statements per call of the derived
    /// function, then an error (`--engine interp`; with the JIT, use `--timeout`).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    fuel: Option<u64>,
    /// Give up after SECONDS of wall-clock time (parsing, deriving and compiling
    /// included) with an error, on either engine: for a function that may not end.
    #[arg(long, value_name = "SECONDS", value_parser = parse_timeout)]
    timeout: Option<f64>,
}

#[derive(Args, Debug)]
struct HvpArgs {
    /// The IR text file.
    file: PathBuf,
    /// The function to differentiate twice.
    #[arg(long, value_name = "F")]
    func: String,
    #[command(flatten)]
    source: ArgsSource,
    #[command(flatten)]
    direction: DirectionSource,
    /// One activity per parameter (`active`, `dup`, `dupnoneed`, `const`), comma
    /// separated, optionally followed by `->active` or `->const` for the return;
    /// default as for `grad`.
    #[arg(long, value_name = "LIST", allow_hyphen_values = true, value_parser = ActivityList::parse)]
    activity: Option<ActivityList>,
    /// Directions per sweep, from 1 to 64: each `active` scalar takes N numbers,
    /// each `dup` slice N lanes per element.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=i64::from(gradlift_adjoint::MAX_WIDTH)))]
    width: u32,
    /// The engine.
    #[arg(long, value_enum, default_value = "jit")]
    engine: Engine,
    /// Whether the optimiser runs before the derivation (`none`: derive the module
    /// as written).
    #[arg(long, value_enum, default_value = "default")]
    opt: Opt,
    /// Also evaluate N times after one warm-up and report the median times.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    time: Option<u32>,
    /// The interpreter's bound: at most N statements per call of a derived
    /// function, then an error (`--engine interp`; with the JIT, use `--timeout`).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    fuel: Option<u64>,
    /// Give up after SECONDS of wall-clock time (parsing, deriving and compiling
    /// included) with an error, on either engine: for a function that may not end.
    #[arg(long, value_name = "SECONDS", value_parser = parse_timeout)]
    timeout: Option<f64>,
}

/// Debug mode for the derived code (an extension of the spec).
#[derive(Args, Copy, Clone, Debug, Default)]
pub(crate) struct DebugArgs {
    /// Derive in debug mode: the derived code checks shadow lengths and the tape's
    /// balance at run time, and fails with a message naming the function and op.
    #[arg(long)]
    pub debug: bool,
    /// Debug mode, and also fail when a reverse statement creates a NaN.
    #[arg(long)]
    pub check_nan: bool,
    /// What the forward pass saves for the pullback: `minimal` (counted loops,
    /// reloads, recomputation) or `save-all` (every value a reverse reads).
    #[arg(long, value_name = "POLICY", default_value = "minimal", value_parser = clap::value_parser!(gradlift_adjoint::TapePolicy))]
    pub tape: gradlift_adjoint::TapePolicy,
    /// The memory budget of each checkpointed loop (`checkpoint_loop`) whose
    /// marker leaves the number of snapshots open (0 or less): as many snapshots
    /// as BYTES holds; default ceil(sqrt(T)) snapshots for T steps.
    #[arg(long, value_name = "BYTES")]
    pub checkpoint_bytes: Option<u64>,
}

/// A stage of the pipeline that `dump` can print.
#[derive(ValueEnum, Copy, Clone, PartialEq, Eq, Debug)]
enum Stage {
    /// The function as parsed.
    Primal,
    /// After the optimiser, with the functions it still calls.
    Optimized,
    /// The derived forward pass.
    Forward,
    /// The derived pullback.
    Pullback,
    /// The fused value-and-gradient function `@F.vg` (one sweep, for a loop
    /// that sums into what it returns), when `grad` would run it.
    Fused,
    /// The derived forward-mode function `@F.jvp` as `jvp` derives it
    /// (`--activity`, `--width`), then those of its callees.
    Jvp,
    /// Cranelift IR of the JIT: the primal and what it calls, then its forward
    /// pass, its pullback and the rules they call, and the fused function.
    Clif,
    /// The host's machine code, of the same functions as `clif`.
    Asm,
    /// Graphviz of the control-flow graphs of the primal, forward pass and pullback.
    Dot,
}

#[derive(Args, Debug)]
struct DumpArgs {
    /// The IR text file.
    file: PathBuf,
    /// The function to print.
    #[arg(long, value_name = "F")]
    func: String,
    /// The stage to print.
    #[arg(long, value_enum)]
    stage: Stage,
    /// Activities for the derived stages, as for `grad` (`dual`/`const` as for
    /// `jvp` with `--stage jvp`).
    #[arg(long, value_name = "LIST", allow_hyphen_values = true, value_parser = AnyActivityList::parse)]
    activity: Option<AnyActivityList>,
    /// Tangents per sweep for `--stage jvp`, as for `jvp`; cotangents per sweep
    /// for the reverse-mode stages (`forward`, `pullback`, `clif`, `asm`, `dot`),
    /// as for `grad`.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=i64::from(gradlift_adjoint::MAX_WIDTH)))]
    width: u32,
    /// Whether the optimiser runs before the derived and native stages (`none`: as
    /// written; the `optimized` stage always optimises).
    #[arg(long, value_enum, default_value = "default")]
    opt: Opt,
    #[command(flatten)]
    debug: DebugArgs,
}

/// What a command produced: text for stdout and errors for stderr.
#[derive(Debug, Default)]
pub(crate) struct Outcome {
    /// Written to stdout as is.
    pub out: String,
    /// Written to stderr, one per line. Any diagnostic makes the exit status 1.
    pub errors: Vec<Diagnostic>,
    /// Written to stderr before the errors, one per line; they do not change the
    /// exit status.
    pub warnings: Vec<Diagnostic>,
}

impl Outcome {
    /// Success with `out` on stdout.
    pub fn ok(out: String) -> Outcome {
        Outcome {
            out,
            errors: Vec::new(),
            warnings: Vec::new(),
        }
    }

    /// Failure with these diagnostics.
    pub fn failed(errors: Vec<Diagnostic>) -> Outcome {
        Outcome {
            out: String::new(),
            errors,
            warnings: Vec::new(),
        }
    }

    /// Writes the output and the diagnostics, and returns the exit status.
    fn finish(self) -> ExitCode {
        let mut status = u8::from(!self.errors.is_empty());
        let mut stdout = io::stdout().lock();
        if let Err(e) = stdout
            .write_all(self.out.as_bytes())
            .and_then(|()| stdout.flush())
        {
            // A closed pipe or a full disk: say so, never panic.
            let _ = writeln!(io::stderr(), "error: cannot write the output: {e}");
            status = 1;
        }
        let mut stderr = io::stderr().lock();
        for d in self.warnings.iter().chain(&self.errors) {
            let _ = writeln!(stderr, "{d}");
        }
        ExitCode::from(status)
    }
}

/// A `--timeout`: a positive, finite number of seconds.
fn parse_timeout(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(s) if s > 0.0 && s.is_finite() && s < 1e9 => Ok(s),
        _ => Err(format!(
            "expected a positive number of seconds, found `{text}`"
        )),
    }
}

/// Parses the command line, runs the command, and returns the exit status.
///
/// All of it runs on a thread with a stack of known size: Cranelift recurses
/// while it compiles, and compiled code runs on this stack too, so the shell's
/// stack limit (`ulimit -s`, which sizes only the main thread's) must not decide
/// what can be compiled and run.
pub fn main() -> ExitCode {
    // Under a small address-space limit (`ulimit -v`) the large stack may not be
    // had: then a smaller one, and at worst the main thread's.
    for stack in COMMAND_STACKS {
        let worker = std::thread::Builder::new()
            .name("gradlift".into())
            .stack_size(stack)
            .spawn(main_on_thread);
        if let Ok(worker) = worker {
            return match worker.join() {
                Ok(code) => code,
                Err(panic) => std::panic::resume_unwind(panic),
            };
        }
    }
    main_on_thread()
}

/// The stacks tried for the thread that runs the command, largest first (reserved,
/// not committed: pages are used as the stack grows).
const COMMAND_STACKS: [usize; 2] = [256 << 20, 16 << 20];

fn main_on_thread() -> ExitCode {
    // Usage errors exit with status 2 here, `--help` and `--version` with 0.
    let cli = Cli::parse();
    check::set_max_insts(cli.max_insts);
    let (fuel, timeout, engine) = match &cli.command {
        Command::Run(a) => (a.fuel, a.timeout, Some(a.engine)),
        Command::Grad(a) => (a.fuel, a.timeout, Some(a.engine)),
        Command::Jvp(a) => (a.fuel, a.timeout, Some(a.engine)),
        Command::Hvp(a) => (a.fuel, a.timeout, Some(a.engine)),
        _ => (None, None, None),
    };
    if fuel.is_some() && engine == Some(Engine::Jit) {
        let _ = writeln!(
            io::stderr(),
            "error: --fuel bounds the interpreter (--engine interp); with the JIT, bound the time with --timeout"
        );
        return ExitCode::from(2);
    }
    if let Some(seconds) = timeout {
        // The watchdog ends the process: compiled code cannot be interrupted, and
        // nothing else is left to do once the time is up.
        std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_secs_f64(seconds));
            let _ = writeln!(
                io::stderr(),
                "error: gave up after {seconds} s (--timeout): the command had not finished"
            );
            std::process::exit(1);
        });
    }
    run_command(cli.command).finish()
}

/// Runs one command.
fn run_command(command: Command) -> Outcome {
    match command {
        Command::Check { files } => check::check(&files),
        Command::Run(a) => run::run(&run::Request {
            file: &a.file,
            func: &a.func,
            args: a.source.get(),
            engine: a.engine,
            time: a.time,
            opt: a.opt.config(),
            fuel: a.fuel,
        }),
        Command::Grad(a) => grad::grad(&grad::Request {
            file: &a.file,
            func: &a.func,
            args: a.source.get(),
            activity: a.activity.as_ref(),
            seed: a.seed.as_deref(),
            shadows: a.shadows.as_deref(),
            width: a.width,
            no_primal: a.no_primal,
            debug: a.debug,
            engine: a.engine,
            time: a.time,
            opt: a.opt.config(),
            fuel: a.fuel,
        }),
        Command::Jvp(a) => jvp::jvp(&jvp::Request {
            file: &a.file,
            func: &a.func,
            args: a.source.get(),
            tangents: a.tangents.get(),
            activity: a.activity.as_ref(),
            width: a.width,
            engine: a.engine,
            time: a.time,
            opt: a.opt.config(),
            fuel: a.fuel,
        }),
        Command::Hvp(a) => hvp::hvp(&hvp::Request {
            file: &a.file,
            func: &a.func,
            args: a.source.get(),
            direction: a.direction.get(),
            activity: a.activity.as_ref(),
            width: a.width,
            engine: a.engine,
            time: a.time,
            opt: a.opt.config(),
            fuel: a.fuel,
        }),
        Command::Dump(a) => {
            let (activity, dual_activity) = dump_activity(a.stage, a.activity.as_ref());
            dump::dump(&dump::Request {
                file: &a.file,
                func: &a.func,
                stage: a.stage,
                activity: activity.as_ref(),
                dual_activity: dual_activity.as_ref(),
                width: a.width,
                debug: a.debug,
                opt: a.opt.config(),
            })
        }
    }
}

/// `dump`'s `--activity` as the stage reads it: forward mode's for `--stage jvp`,
/// reverse mode's for the others. A list of the other kind is a usage error.
fn dump_activity(
    stage: Stage,
    list: Option<&AnyActivityList>,
) -> (Option<ActivityList>, Option<DualActivityList>) {
    let Some(list) = list else {
        return (None, None);
    };
    if stage == Stage::Jvp {
        match &list.forward {
            Ok(l) => (None, Some(l.clone())),
            Err(e) => usage(&format!(
                "invalid value for '--activity <LIST>' with '--stage jvp': {e}"
            )),
        }
    } else {
        match &list.reverse {
            Ok(l) => (Some(l.clone()), None),
            Err(e) => usage(&format!(
                "invalid value for '--activity <LIST>': {e} (`dual` and `dualonly` are for \
                 '--stage jvp')"
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;
    use clap::error::ErrorKind;

    #[test]
    fn the_clap_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[track_caller]
    fn usage_error(argv: &[&str]) -> ErrorKind {
        match Cli::try_parse_from(argv) {
            Ok(cli) => panic!("{argv:?} parsed: {cli:?}"),
            Err(e) => {
                // Everything but help and version exits with 2.
                assert_eq!(e.exit_code(), 2, "{argv:?}: {e}");
                e.kind()
            }
        }
    }

    #[test]
    fn both_or_neither_args_source_is_a_usage_error() {
        usage_error(&["gradlift", "run", "f.ir", "--func", "f"]);
        usage_error(&[
            "gradlift",
            "run",
            "f.ir",
            "--func",
            "f",
            "--args",
            "[]",
            "--args-file",
            "a.json",
        ]);
        usage_error(&["gradlift", "grad", "f.ir", "--func", "f"]);
    }

    #[test]
    fn missing_func_bad_engine_and_zero_time_are_usage_errors() {
        usage_error(&["gradlift", "run", "f.ir", "--args", "[]"]);
        usage_error(&[
            "gradlift", "run", "f.ir", "--func", "f", "--args", "[]", "--engine", "llvm",
        ]);
        usage_error(&[
            "gradlift", "run", "f.ir", "--func", "f", "--args", "[]", "--time", "0",
        ]);
        usage_error(&["gradlift", "check"]);
        usage_error(&["gradlift", "dump", "f.ir", "--func", "f"]);
        usage_error(&[
            "gradlift",
            "grad",
            "f.ir",
            "--func",
            "f",
            "--args",
            "[]",
            "--activity",
            "dup,bogus",
        ]);
    }

    #[test]
    fn the_engine_defaults_to_jit() {
        let cli = Cli::try_parse_from(["gradlift", "run", "f.ir", "--func", "f", "--args", "[]"])
            .expect("parses");
        let Command::Run(a) = cli.command else {
            panic!("not run: {cli:?}")
        };
        assert_eq!(a.engine, Engine::Jit);
        assert_eq!(a.time, None);
    }

    #[test]
    fn grad_accepts_every_spec_option() {
        let cli = Cli::try_parse_from([
            "gradlift",
            "grad",
            "f.ir",
            "--func",
            "f",
            "--args-file",
            "a.json",
            "--activity",
            "dup,const->active",
            "--seed",
            "-1.5",
            "--shadows",
            "[null, [1.0]]",
            "--no-primal",
            "--engine",
            "interp",
            "--time",
            "5",
        ])
        .expect("parses");
        let Command::Grad(a) = cli.command else {
            panic!("not grad: {cli:?}")
        };
        assert_eq!(a.seed.as_deref(), Some("-1.5"));
        assert!(a.no_primal);
        assert_eq!(
            a.activity.map(|l| l.to_string()).as_deref(),
            Some("dup,const->active")
        );
    }

    #[test]
    fn grad_width_defaults_to_1_and_takes_1_to_64() {
        let base = ["gradlift", "grad", "f.ir", "--func", "f", "--args", "[1]"];
        let width = |extra: &[&'static str]| {
            let mut argv = base.to_vec();
            argv.extend_from_slice(extra);
            match Cli::try_parse_from(argv).expect("parses").command {
                Command::Grad(a) => a.width,
                other => panic!("not grad: {other:?}"),
            }
        };
        assert_eq!(width(&[]), 1);
        assert_eq!(width(&["--width", "64"]), 64);
        for bad in ["0", "65", "-1", "two"] {
            let mut argv = base.to_vec();
            argv.extend_from_slice(&["--width", bad]);
            usage_error(&argv);
        }
    }

    #[test]
    fn jvp_accepts_every_option() {
        let cli = Cli::try_parse_from([
            "gradlift",
            "jvp",
            "f.ir",
            "--func",
            "f",
            "--args",
            "[1.0, 2.0]",
            "--tangents-file",
            "t.json",
            "--activity",
            "dual,const->dualonly",
            "--width",
            "64",
            "--engine",
            "interp",
            "--opt",
            "none",
            "--time",
            "3",
            "--fuel",
            "100",
            "--timeout",
            "2.5",
        ])
        .expect("parses");
        let Command::Jvp(a) = cli.command else {
            panic!("not jvp: {cli:?}")
        };
        assert_eq!(a.width, 64);
        assert_eq!(
            a.activity.map(|l| l.to_string()).as_deref(),
            Some("dual,const->dualonly")
        );
        let cli = Cli::try_parse_from([
            "gradlift",
            "jvp",
            "f.ir",
            "--func",
            "f",
            "--args",
            "[1.0]",
            "--tangents",
            "[-1]",
        ])
        .expect("parses");
        let Command::Jvp(a) = cli.command else {
            panic!("not jvp: {cli:?}")
        };
        assert_eq!(
            (a.width, a.engine, a.tangents.tangents.as_deref()),
            (1, Engine::Jit, Some("[-1]"))
        );
    }

    #[test]
    fn jvp_usage_errors() {
        let base = ["gradlift", "jvp", "f.ir", "--func", "f", "--args", "[1]"];
        let with = |extra: &[&'static str]| {
            let mut argv = base.to_vec();
            argv.extend_from_slice(extra);
            argv
        };
        // Neither or both tangent sources.
        usage_error(&with(&[]));
        usage_error(&with(&["--tangents", "[1]", "--tangents-file", "t.json"]));
        // Widths outside 1..=64.
        usage_error(&with(&["--tangents", "[1]", "--width", "0"]));
        usage_error(&with(&["--tangents", "[1]", "--width", "65"]));
        // A reverse-mode word.
        usage_error(&with(&["--tangents", "[1]", "--activity", "active"]));
        usage_error(&with(&["--tangents", "[1]", "--activity", "dual->active"]));
    }

    #[test]
    fn hvp_accepts_every_option() {
        let cli = Cli::try_parse_from([
            "gradlift",
            "hvp",
            "f.ir",
            "--func",
            "f",
            "--args",
            "[1.0, 2.0]",
            "--direction-file",
            "d.json",
            "--activity",
            "dup,const->active",
            "--width",
            "64",
            "--engine",
            "interp",
            "--opt",
            "none",
            "--time",
            "3",
            "--fuel",
            "100",
            "--timeout",
            "2.5",
        ])
        .expect("parses");
        let Command::Hvp(a) = cli.command else {
            panic!("not hvp: {cli:?}")
        };
        assert_eq!((a.width, a.engine, a.time), (64, Engine::Interp, Some(3)));
        assert_eq!(
            a.activity.map(|l| l.to_string()).as_deref(),
            Some("dup,const->active")
        );
        let base = ["gradlift", "hvp", "f.ir", "--func", "f", "--args", "[1]"];
        let with = |extra: &[&'static str]| {
            let mut argv = base.to_vec();
            argv.extend_from_slice(extra);
            argv
        };
        usage_error(&with(&[]));
        usage_error(&with(&["--direction", "[1]", "--direction-file", "d.json"]));
        usage_error(&with(&["--direction", "[1]", "--width", "65"]));
        usage_error(&with(&["--direction", "[1]", "--activity", "dual"]));
    }

    #[test]
    fn dump_accepts_every_stage() {
        for stage in [
            "primal",
            "optimized",
            "forward",
            "pullback",
            "jvp",
            "clif",
            "asm",
            "dot",
        ] {
            Cli::try_parse_from(["gradlift", "dump", "f.ir", "--func", "f", "--stage", stage])
                .unwrap_or_else(|e| panic!("{stage}: {e}"));
        }
    }
}
