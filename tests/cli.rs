//! The `gradlift` binary against the CLI contract (`shared/spec/cli.md`): exit statuses
//! (0 success, 1 user error, 2 usage error), `FILE:LINE:COL: error: MESSAGE` on
//! stderr, and the JSON that `run` prints.

mod common;

use std::path::Path;

use common::{Run, example, gradlift, temp_file};
use serde_json::Value;

/// The path as the CLI prints it in diagnostics.
fn shown(path: &Path) -> String {
    path.display().to_string()
}

/// Runs `gradlift` with string arguments.
fn cli(args: &[&str]) -> Run {
    gradlift(args)
}

/// `gradlift run FILE --func F --args JSON --engine interp`.
fn run_interp(file: &Path, func: &str, args: &str) -> Run {
    cli(&[
        "run",
        &shown(file),
        "--func",
        func,
        "--args",
        args,
        "--engine",
        "interp",
    ])
}

/// A successful run's output, parsed; and a check that it is exactly one line.
#[track_caller]
fn json_out(run: &Run) -> Value {
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(run.stderr, "");
    assert!(
        run.stdout.ends_with('\n') && run.stdout.lines().count() == 1,
        "{run:?}"
    );
    serde_json::from_str(&run.stdout).expect("valid JSON")
}

/// A user error (status 1): nothing on stdout, and `expected` as the first line of
/// stderr.
#[track_caller]
fn user_error(run: &Run, expected: &str) {
    assert_eq!(run.code, 1, "{run:?}");
    assert_eq!(run.stdout, "", "{run:?}");
    assert_eq!(run.stderr.lines().next(), Some(expected), "{run:?}");
}

/// A usage error (status 2) as clap reports it.
#[track_caller]
fn usage_error(run: &Run) {
    assert_eq!(run.code, 2, "{run:?}");
    assert_eq!(run.stdout, "");
    assert!(run.stderr.starts_with("error:"), "{run:?}");
}

// check

#[test]
fn check_one_file() {
    let run = cli(&["check", &shown(&example("rosenbrock.ir"))]);
    assert_eq!(
        (run.code, run.stdout.as_str(), run.stderr.as_str()),
        (0, "ok: 1 functions\n", "")
    );
    let run = cli(&["check", &shown(&example("mlp.ir"))]);
    assert_eq!(run.stdout, "ok: 4 functions\n");
}

#[test]
fn check_several_files_prefixes_each_line() {
    let (a, b) = (example("sumsq.ir"), example("decls.ir"));
    let run = cli(&["check", &shown(&a), &shown(&b)]);
    assert_eq!(run.code, 0, "{run:?}");
    // Externs are not counted: decls.ir has seven functions, one of them extern.
    let expected = format!(
        "{}: ok: 1 functions\n{}: ok: 6 functions\n",
        shown(&a),
        shown(&b)
    );
    assert_eq!(run.stdout, expected);
}

#[test]
fn check_every_example() {
    let mut files: Vec<String> = std::fs::read_dir(example(""))
        .expect("examples/ir")
        .map(|e| shown(&e.expect("entry").path()))
        .filter(|p| p.ends_with(".ir"))
        .collect();
    files.sort();
    assert!(files.len() >= 15, "{files:?}");
    let mut argv = vec!["check".to_string()];
    argv.extend(files.iter().cloned());
    let run = gradlift(&argv);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(run.stderr, "");
    assert_eq!(run.stdout.lines().count(), files.len());
    for (line, file) in run.stdout.lines().zip(&files) {
        assert!(line.starts_with(&format!("{file}: ok: ")), "{line}");
    }
}

#[test]
fn check_a_missing_file() {
    let good = example("sumsq.ir");
    let run = cli(&["check", &shown(&good), "no/such/file.ir"]);
    assert_eq!(run.code, 1);
    assert_eq!(run.stdout, format!("{}: ok: 1 functions\n", shown(&good)));
    assert!(
        run.stderr
            .starts_with("error: cannot read no/such/file.ir: "),
        "{run:?}"
    );
}

#[test]
fn check_a_parse_error() {
    let file = temp_file(
        "cli-parse-error.ir",
        "func @f(%x: f64) -> f64 {\nentry:\n    %r = fadd %x, %acc2\n    ret %r\n}\n",
    );
    let run = cli(&["check", &shown(&file)]);
    assert_eq!(run.code, 1);
    assert_eq!(run.stdout, "");
    let first = run.stderr.lines().next().unwrap_or_default();
    let prefix = format!("{}:3:19: error: ", shown(&file));
    assert!(first.starts_with(&prefix), "{run:?}");
    assert!(first.contains("unknown value %acc2"), "{run:?}");
}

#[test]
fn check_prints_every_verifier_error() {
    // Two functions with one error each (the cases of ir/tests/malformed.rs):
    // a use not dominated by its definition at 10:5, a phi missing an edge at 18:5.
    let text = "func @f(%x: f64, %c: bool) -> f64 {
entry:
    br %c, l, r
l:
    %y = fneg %x
    jump j
r:
    jump j
j:
    ret %y
}
func @g(%c: bool) -> f64 {
entry:
    br %c, l, j
l:
    jump j
j:
    %p = phi f64 [l: 1.0]
    ret %p
}
";
    let file = temp_file("cli-verifier-errors.ir", text);
    let run = cli(&["check", &shown(&file)]);
    assert_eq!(run.code, 1, "{run:?}");
    assert_eq!(run.stdout, "");
    let lines: Vec<&str> = run.stderr.lines().collect();
    let f = format!("{}:10:5: error: in @f, ", shown(&file));
    let g = format!("{}:18:5: error: in @g, ", shown(&file));
    assert!(
        lines.iter().any(|l| l.starts_with(&f) && l.contains("%y")),
        "{run:?}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with(&g) && l.contains("entry")),
        "{run:?}"
    );
}

// run: output

#[test]
fn run_prints_value_and_args() {
    // 100 (1 - 0.25)^2 + 0.5^2 + 100 (2 - 1)^2 + 0^2 = 156.5
    let run = run_interp(&example("rosenbrock.ir"), "rosenbrock", "[[0.5, 1.0, 2.0]]");
    assert_eq!(run.stdout, "{\"value\": 156.5, \"args\": [null]}\n");
    json_out(&run);
}

#[test]
fn run_accepts_the_function_with_its_sigil_and_an_args_file() {
    let args = temp_file("cli-args-file.json", "[\n  [0.5, 1.0, 2.0]\n]\n");
    let run = cli(&[
        "run",
        &shown(&example("rosenbrock.ir")),
        "--func",
        "@rosenbrock",
        "--args-file",
        &shown(&args),
        "--engine",
        "interp",
    ]);
    assert_eq!(json_out(&run)["value"], 156.5);
}

#[test]
fn run_reports_mut_slices_in_args() {
    let out = json_out(&run_interp(
        &example("mutation.ir"),
        "scale_sum",
        "[[1, 2, 3], 0.5]",
    ));
    assert_eq!(out["value"], 3.0);
    assert_eq!(out["args"], serde_json::json!([[0.5, 1.0, 1.5], null]));
    let out = json_out(&run_interp(
        &example("mutation.ir"),
        "square",
        "[[1.5, -2]]",
    ));
    assert_eq!(out["value"], Value::Null);
    assert_eq!(out["args"], serde_json::json!([[2.25, 4.0]]));
}

#[test]
fn run_prints_several_results_as_an_array() {
    let run = run_interp(&example("multiple_results.ir"), "divmod", "[-7, 2]");
    assert_eq!(
        run.stdout,
        "{\"value\": [-3, -1], \"args\": [null, null]}\n"
    );
    let out = json_out(&run_interp(
        &example("multiple_results.ir"),
        "max_argmax",
        "[[1, 5, 3]]",
    ));
    assert_eq!(out["value"], serde_json::json!([5.0, 1]));
}

#[test]
fn run_reads_and_prints_non_finite_floats_as_strings() {
    let f = example("branches.ir");
    assert_eq!(
        json_out(&run_interp(&f, "piecewise", "[\"nan\"]"))["value"],
        "nan"
    );
    assert_eq!(
        json_out(&run_interp(&f, "piecewise", "[\"-inf\"]"))["value"],
        "inf"
    );
    assert_eq!(
        json_out(&run_interp(&f, "clamp", "[0.5, \"-inf\", -1e308]"))["value"],
        -1e308
    );
    // max of nothing is -inf, and so is log of the empty sum.
    let out = json_out(&run_interp(
        &example("multiple_results.ir"),
        "max_argmax",
        "[[]]",
    ));
    assert_eq!(out["value"], serde_json::json!(["-inf", -1]));
}

#[test]
fn run_prints_f32_in_its_shortest_form() {
    let file = temp_file(
        "cli-f32.ir",
        "func @tenth(%x: f32, %s: mut [f32]) -> f32 {
entry:
    %r = fmul %x, 0.1
    store %s[0], %r
    ret %r
}
",
    );
    let run = run_interp(&file, "tenth", "[1, [0.0, 0.2]]");
    assert_eq!(
        run.stdout, "{\"value\": 0.1, \"args\": [null, [0.1, 0.2]]}\n",
        "{run:?}"
    );
}

#[test]
fn run_takes_and_returns_bools_and_integers() {
    let f = example("recursion.ir");
    assert_eq!(json_out(&run_interp(&f, "is_even", "[10]"))["value"], true);
    assert_eq!(
        json_out(&run_interp(&f, "fact", "[20]"))["value"],
        2_432_902_008_176_640_000_i64
    );
}

#[test]
fn run_with_time_adds_the_median() {
    let run = cli(&[
        "run",
        &shown(&example("mutation.ir")),
        "--func",
        "scale_sum",
        "--args",
        "[[1, 2, 3], 0.5]",
        "--engine",
        "interp",
        "--time",
        "3",
    ]);
    let out = json_out(&run);
    // Keys in the spec's order.
    assert!(
        run.stdout.starts_with(
            "{\"value\": 3.0, \"args\": [[0.5, 1.0, 1.5], null], \"time\": {\"primal_ns\": "
        ),
        "{run:?}"
    );
    assert!(out["time"]["primal_ns"].is_u64(), "{out}");
    assert_eq!(
        out["time"].as_object().map(|o| o.len()),
        Some(1),
        "no compile_ms for interp"
    );
}

// run: errors

#[test]
fn run_with_bad_json() {
    let run = run_interp(&example("rosenbrock.ir"), "rosenbrock", "[[1.0, 2.0],");
    user_error(
        &run,
        "error: --args is not valid JSON: EOF while parsing a value at line 1 column 12",
    );
    let args = temp_file("cli-bad-json.json", "[\n  [1.0, 2.0]\n  3\n]\n");
    let run = cli(&[
        "run",
        &shown(&example("rosenbrock.ir")),
        "--func",
        "rosenbrock",
        "--args-file",
        &shown(&args),
        "--engine",
        "interp",
    ]);
    user_error(
        &run,
        &format!(
            "{}:3:3: error: not valid JSON: expected `,` or `]`",
            shown(&args)
        ),
    );
}

#[test]
fn run_with_a_missing_args_file() {
    let run = cli(&[
        "run",
        &shown(&example("rosenbrock.ir")),
        "--func",
        "rosenbrock",
        "--args-file",
        "no/such/args.json",
        "--engine",
        "interp",
    ]);
    assert_eq!(run.code, 1);
    assert!(
        run.stderr
            .starts_with("error: cannot read no/such/args.json: "),
        "{run:?}"
    );
}

#[test]
fn run_with_the_wrong_argument_count() {
    let ode = example("ode.ir");
    user_error(
        &run_interp(&ode, "ode", "[1.5, 1, 3, 1, 1, 1]"),
        "error: @ode takes 7 arguments (%a: f64, %b: f64, %c: f64, %d: f64, %u0: f64, \
         %v0: f64, %T: i64), found 6: argument 7 (%T: i64) is missing",
    );
    user_error(
        &run_interp(&example("rosenbrock.ir"), "rosenbrock", "[[1], [2]]"),
        "error: @rosenbrock takes 1 argument (%x: [f64]), found 2",
    );
}

#[test]
fn run_with_the_wrong_kind_of_argument() {
    let ode = example("ode.ir");
    user_error(
        &run_interp(&ode, "ode", "[1.5, 1, 3, 1, 1, 1, 1.5]"),
        "error: argument 7 (%T: i64) must be an integer, found 1.5",
    );
    user_error(
        &run_interp(&example("sumsq.ir"), "sumsq", "[[1, true]]"),
        "error: argument 1 (%x: [f64]), element 1, must be a number (or \"inf\", \
         \"-inf\", \"nan\"), found true",
    );
    user_error(
        &run_interp(&example("sumsq.ir"), "sumsq", "[2.0]"),
        "error: argument 1 (%x: [f64]) must be an array of f64 elements, found 2.0",
    );
}

#[test]
fn run_an_unknown_function() {
    let file = example("sumsq.ir");
    user_error(
        &run_interp(&file, "nope", "[]"),
        &format!("error: no function @nope in {}", shown(&file)),
    );
}

#[test]
fn run_an_extern_function_or_a_call_to_one() {
    let file = example("decls.ir");
    let run = run_interp(&file, "host_sin", "[1.0]");
    assert_eq!(run.code, 1, "{run:?}");
    assert!(
        run.stderr.contains("@host_sin is an extern function"),
        "{run:?}"
    );
    let run = run_interp(&file, "wave", "[1.0]");
    assert_eq!(run.code, 1, "{run:?}");
    assert!(
        run.stderr.starts_with(&format!("{}:", shown(&file))),
        "{run:?}"
    );
    assert!(
        run.stderr
            .contains("in @wave, call: extern function @host_sin has no host binding"),
        "{run:?}"
    );
}

#[test]
fn run_a_runtime_error() {
    let file = temp_file(
        "cli-out-of-bounds.ir",
        "func @oob(%x: [f64]) -> f64 {\nentry:\n    %n = len %x\n    %v = load %x[%n]\n    ret %v\n}\n",
    );
    user_error(
        &run_interp(&file, "oob", "[[1, 2, 3]]"),
        &format!(
            "{}:4:5: error: in @oob, load: index 3 out of bounds for length 3",
            shown(&file)
        ),
    );
    let file = example("multiple_results.ir");
    user_error(
        &run_interp(&file, "divmod", "[1, 0]"),
        &format!(
            "{}:39:5: error: in @divmod, idiv: integer division by zero",
            shown(&file)
        ),
    );
}

#[test]
fn run_a_file_that_does_not_verify() {
    let file = temp_file(
        "cli-run-unverified.ir",
        "func @f(%n: i64) -> f64 {\nentry:\n    ret %n\n}\n",
    );
    let run = run_interp(&file, "f", "[1]");
    assert_eq!(run.code, 1);
    assert!(
        run.stderr
            .starts_with(&format!("{}:3:5: error: ", shown(&file))),
        "{run:?}"
    );
}

#[test]
fn run_on_the_jit_says_it_is_not_there_yet() {
    let file = shown(&example("sumsq.ir"));
    let message = "error: the JIT engine is not available yet; use --engine interp";
    // The default engine is the JIT, as the spec says.
    user_error(
        &cli(&["run", &file, "--func", "sumsq", "--args", "[[1]]"]),
        message,
    );
    user_error(
        &cli(&[
            "run", &file, "--func", "sumsq", "--args", "[[1]]", "--engine", "jit",
        ]),
        message,
    );
}

#[test]
fn usage_errors_exit_with_2() {
    let file = shown(&example("sumsq.ir"));
    // Neither or both of --args and --args-file.
    usage_error(&cli(&[
        "run", &file, "--func", "sumsq", "--engine", "interp",
    ]));
    usage_error(&cli(&[
        "run",
        &file,
        "--func",
        "sumsq",
        "--args",
        "[[1]]",
        "--args-file",
        "a.json",
    ]));
    // No --func.
    usage_error(&cli(&["run", &file, "--args", "[[1]]"]));
    // An unknown engine, a zero count, an unknown command, no file.
    usage_error(&cli(&[
        "run", &file, "--func", "f", "--args", "[]", "--engine", "gpu",
    ]));
    usage_error(&cli(&[
        "run", &file, "--func", "f", "--args", "[]", "--time", "0",
    ]));
    usage_error(&cli(&["frobnicate"]));
    usage_error(&cli(&["check"]));
    // No command at all: clap prints the help to stderr.
    assert_eq!(cli(&[]).code, 2);
}

#[test]
fn help_lists_every_command() {
    let run = cli(&["--help"]);
    assert_eq!(run.code, 0);
    for command in ["check", "run", "grad", "dump"] {
        assert!(run.stdout.contains(command), "{command}: {run:?}");
    }
    let run = cli(&["grad", "--help"]);
    for option in [
        "--func",
        "--args",
        "--args-file",
        "--activity",
        "--seed",
        "--shadows",
        "--no-primal",
        "--engine",
        "--time",
    ] {
        assert!(run.stdout.contains(option), "{option}: {run:?}");
    }
}

// grad and dump

#[test]
fn grad_is_not_available_yet() {
    let file = shown(&example("sumsq.ir"));
    user_error(
        &cli(&[
            "grad",
            &file,
            "--func",
            "sumsq",
            "--args",
            "[[1]]",
            "--activity",
            "dup",
        ]),
        "error: gradlift grad: reverse mode is not available yet",
    );
    usage_error(&cli(&[
        "grad",
        &file,
        "--func",
        "sumsq",
        "--args",
        "[[1]]",
        "--activity",
        "dupe",
    ]));
}

#[test]
fn dump_primal_prints_the_function() {
    let file = example("normalize.ir");
    let run = cli(&["dump", &shown(&file), "--func", "norm", "--stage", "primal"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        run.stdout.starts_with("func @norm(%x: [f64]) -> f64 {"),
        "{run:?}"
    );
    assert!(!run.stdout.contains("@normalize"), "{run:?}");
    // The dump is IR text that parses back to one function of the same signature.
    let module = gradlift::ir::parse(&run.stdout).expect("the dump parses");
    let id = module.func_by_name("norm").expect("@norm");
    assert_eq!(module.sig(id).to_string(), "([f64]) -> f64");
    assert_eq!(module.defined().count(), 1);
}

#[test]
fn dump_other_stages_are_not_available_yet() {
    let file = shown(&example("sumsq.ir"));
    user_error(
        &cli(&["dump", &file, "--func", "sumsq", "--stage", "pullback"]),
        "error: gradlift dump: stage pullback is not available yet (only primal is)",
    );
    user_error(
        &cli(&["dump", &file, "--func", "nope", "--stage", "primal"]),
        &format!("error: no function @nope in {file}"),
    );
}
