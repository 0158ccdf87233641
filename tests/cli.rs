//! The `gradlift` binary against the CLI contract (`shared/spec/cli.md`): exit statuses
//! (0 success, 1 user error, 2 usage error), `FILE:LINE:COL: error: MESSAGE` on
//! stderr, the JSON that `run` and `grad` print, and the IR text `dump` prints.
//! Expected values and gradients are closed forms written here.

mod common;

use std::path::Path;

use common::{Run, example, gradlift, json_close, temp_file};
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

// grad

/// `f(x, y) = x*x + 3*y`, whose gradient is `(2x, 3)`.
const SQUARE_PLUS: &str = "func @f(%x: f64, %y: f64) -> f64 {
entry:
    %xx = fmul %x, %x
    %y3 = fmul 3.0, %y
    %r = fadd %xx, %y3
    ret %r
}
";

/// The closed forms for `SQUARE_PLUS`: the value and the gradient at `(x, y)`.
fn square_plus(x: f64, y: f64) -> (f64, [f64; 2]) {
    (x * x + 3.0 * y, [2.0 * x, 3.0])
}

/// `gradlift grad FILE --func F --args JSON --engine interp EXTRA...`.
fn grad_interp(file: &Path, func: &str, args: &str, extra: &[&str]) -> Run {
    let file = shown(file);
    let mut argv = vec![
        "grad", &file, "--func", func, "--args", args, "--engine", "interp",
    ];
    argv.extend_from_slice(extra);
    cli(&argv)
}

/// `{"value": value, "gradient": gradient}` against the output, floats to 1e-12.
#[track_caller]
fn assert_grad(run: &Run, value: Value, gradient: Value) {
    let out = json_out(run);
    assert!(
        json_close(&out["value"], &value),
        "{run:?}\nexpected {value}"
    );
    assert!(
        json_close(&out["gradient"], &gradient),
        "{run:?}\nexpected {gradient}"
    );
    let keys: Vec<&String> = out.as_object().expect("an object").keys().collect();
    assert_eq!(keys, ["value", "gradient"], "{run:?}");
}

#[test]
fn grad_prints_value_and_gradient() {
    let file = temp_file("cli-grad-f.ir", SQUARE_PLUS);
    let run = grad_interp(&file, "f", "[2, 1]", &[]);
    // Printed as `run` prints floats.
    assert_eq!(run.stdout, "{\"value\": 7.0, \"gradient\": [4.0, 3.0]}\n");
    for (x, y) in [(2.0, 1.0), (-1.5, 0.25), (0.1, -7.0), (0.0, 0.0)] {
        let (value, [dx, dy]) = square_plus(x, y);
        let run = grad_interp(&file, "@f", &format!("[{x:?}, {y:?}]"), &[]);
        assert_grad(&run, value.into(), serde_json::json!([dx, dy]));
    }
}

#[test]
fn grad_reads_an_args_file() {
    let file = temp_file("cli-grad-args-file.ir", SQUARE_PLUS);
    let args = temp_file("cli-grad-args-file.json", "[\n  -3.0,\n  2\n]\n");
    let run = cli(&[
        "grad",
        &shown(&file),
        "--func",
        "f",
        "--args-file",
        &shown(&args),
        "--engine",
        "interp",
    ]);
    let (value, [dx, dy]) = square_plus(-3.0, 2.0);
    assert_grad(&run, value.into(), serde_json::json!([dx, dy]));
}

#[test]
fn grad_seed_scales_the_gradient() {
    let file = temp_file("cli-grad-seed.ir", SQUARE_PLUS);
    let (value, [dx, dy]) = square_plus(2.0, 1.0);
    for seed in ["2.0", "[2.0]", "2"] {
        let run = grad_interp(&file, "f", "[2, 1]", &["--seed", seed]);
        assert_grad(&run, value.into(), serde_json::json!([2.0 * dx, 2.0 * dy]));
    }
    let run = grad_interp(&file, "f", "[2, 1]", &["--seed", "-0.5"]);
    assert_grad(
        &run,
        value.into(),
        serde_json::json!([-0.5 * dx, -0.5 * dy]),
    );
    // Non-finite seeds are strings, as arguments are: inf * 2x, inf * 3.
    let run = grad_interp(&file, "f", "[2, 1]", &["--seed", "\"inf\""]);
    assert_grad(&run, value.into(), serde_json::json!(["inf", "inf"]));
}

#[test]
fn grad_const_parameters_have_null_gradients() {
    let file = temp_file("cli-grad-const.ir", SQUARE_PLUS);
    let (value, [dx, dy]) = square_plus(2.0, 1.0);
    let run = grad_interp(&file, "f", "[2, 1]", &["--activity", "const,active"]);
    assert_grad(&run, value.into(), serde_json::json!([null, dy]));
    let run = grad_interp(
        &file,
        "f",
        "[2, 1]",
        &["--activity", "active,const->active"],
    );
    assert_grad(&run, value.into(), serde_json::json!([dx, null]));
    // A const return: every cotangent is zero.
    let run = grad_interp(
        &file,
        "f",
        "[2, 1]",
        &["--activity", "active,active->const"],
    );
    assert_grad(&run, value.into(), serde_json::json!([0.0, 0.0]));
}

#[test]
fn grad_without_the_primal_prints_a_null_value() {
    let file = temp_file("cli-grad-no-primal.ir", SQUARE_PLUS);
    let (_, [dx, dy]) = square_plus(2.0, 1.0);
    let run = grad_interp(&file, "f", "[2, 1]", &["--no-primal"]);
    assert_eq!(
        run.stdout,
        format!("{{\"value\": null, \"gradient\": [{dx:?}, {dy:?}]}}\n")
    );
    assert_grad(&run, Value::Null, serde_json::json!([dx, dy]));
}

/// Several results, one of them an integer: `(x*x, 3x, k+1)`.
const SEVERAL: &str = "func @several(%x: f64, %k: i64) -> (f64, f64, i64) {
entry:
    %a = fmul %x, %x
    %b = fmul %x, 3.0
    %m = iadd %k, 1
    ret %a, %b, %m
}
";

#[test]
fn grad_of_several_results_takes_one_seed_per_float_result() {
    let file = temp_file("cli-grad-several.ir", SEVERAL);
    let x = 1.5;
    let value = serde_json::json!([x * x, 3.0 * x, 3]);
    // Default seeds: 1 each, so d(x*x + 3x)/dx.
    let run = grad_interp(&file, "several", "[1.5, 2]", &[]);
    assert_grad(
        &run,
        value.clone(),
        serde_json::json!([2.0 * x + 3.0, null]),
    );
    let run = grad_interp(&file, "several", "[1.5, 2]", &["--seed", "[2, -1]"]);
    assert_grad(&run, value, serde_json::json!([2.0 * 2.0 * x - 3.0, null]));
    user_error(
        &grad_interp(&file, "several", "[1.5, 2]", &["--seed", "1"]),
        "error: --seed: @several has 2 float results, so the seed must be an array of 2 \
         numbers, found 1",
    );
    user_error(
        &grad_interp(&file, "several", "[1.5, 2]", &["--seed", "[1, 2, 3]"]),
        "error: --seed: @several has 2 float results, so it takes 2 seeds, found 3",
    );
    user_error(
        &grad_interp(&file, "several", "[1.5, 2]", &["--seed", "[1, true]"]),
        "error: --seed, element 1, must be a number (or \"inf\", \"-inf\", \"nan\"), found true",
    );
}

#[test]
fn grad_prints_f32_in_its_shortest_form() {
    let file = temp_file(
        "cli-grad-f32.ir",
        "func @tenth(%x: f32) -> f32 {\nentry:\n    %r = fmul %x, 0.1\n    ret %r\n}\n",
    );
    // d(0.1 x)/dx = 0.1 in f32, printed as the f32 it is.
    let run = grad_interp(&file, "tenth", "[1]", &[]);
    assert_eq!(
        run.stdout, "{\"value\": 0.1, \"gradient\": [0.1]}\n",
        "{run:?}"
    );
}

#[test]
fn grad_with_a_bad_activity() {
    let file = temp_file("cli-grad-bad-activity.ir", SQUARE_PLUS);
    let f = shown(&file);
    user_error(
        &grad_interp(&file, "f", "[2, 1]", &["--activity", "active"]),
        &format!("{f}: error: @f has 2 parameters, but 1 activity was given"),
    );
    user_error(
        &grad_interp(&file, "f", "[2, 1]", &["--activity", "active,active,const"]),
        &format!("{f}: error: @f has 2 parameters, but 3 activities were given"),
    );
    // `dup` is for float slices; the error points at the parameter.
    user_error(
        &grad_interp(&file, "f", "[2, 1]", &["--activity", "dup,active"]),
        &format!(
            "{f}:1:9: error: parameter 1 (%x: f64) of @f cannot be `dup`: `dup` and \
             `dupnoneed` are for float slices; a float scalar is `active` or `const`"
        ),
    );
    let run = grad_interp(
        &example("ode.ir"),
        "ode",
        "[1, 1, 1, 1, 1, 1, 3]",
        &[
            "--activity",
            "active,active,active,active,active,active,active",
        ],
    );
    assert_eq!(run.code, 1, "{run:?}");
    assert!(
        run.stderr
            .contains("parameter 7 (%T: i64) of @ode cannot be `active`"),
        "{run:?}"
    );
    // A malformed list is a usage error.
    usage_error(&grad_interp(&file, "f", "[2, 1]", &["--activity", "dupe"]));
}

#[test]
fn grad_with_shadows_on_a_scalar_function() {
    let file = temp_file("cli-grad-shadows.ir", SQUARE_PLUS);
    // Null for every parameter is what a function without slices takes.
    let (value, [dx, dy]) = square_plus(2.0, 1.0);
    let run = grad_interp(&file, "f", "[2, 1]", &["--shadows", "[null, null]"]);
    assert_grad(&run, value.into(), serde_json::json!([dx, dy]));
    user_error(
        &grad_interp(&file, "f", "[2, 1]", &["--shadows", "[[1.0], null]"]),
        "error: --shadows: argument 1 (%x: f64) is `active`, so it has no shadow: give null \
         (only `dup` and `dupnoneed` slices have shadows)",
    );
    user_error(
        &grad_interp(&file, "f", "[2, 1]", &["--shadows", "[null]"]),
        "error: --shadows: @f has 2 parameters (%x: f64, %y: f64), so it takes one element \
         (null or a shadow) per parameter, found 1",
    );
    user_error(
        &grad_interp(&file, "f", "[2, 1]", &["--shadows", "{}"]),
        "error: --shadows must be a JSON array with one element (null or a shadow) per \
         parameter of @f (%x: f64, %y: f64), found an object",
    );
    let run = grad_interp(&file, "f", "[2, 1]", &["--shadows", "[null,"]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(
        run.stderr
            .starts_with("error: --shadows is not valid JSON: "),
        "{run:?}"
    );
}

#[test]
fn grad_checks_the_arguments_as_run_does() {
    let file = temp_file("cli-grad-bad-args.ir", SQUARE_PLUS);
    user_error(
        &grad_interp(&file, "f", "[2]", &[]),
        "error: @f takes 2 arguments (%x: f64, %y: f64), found 1: argument 2 (%y: f64) is \
         missing",
    );
    user_error(
        &grad_interp(&file, "f", "[2, true]", &[]),
        "error: argument 2 (%y: f64) must be a number (or \"inf\", \"-inf\", \"nan\"), found \
         true",
    );
    user_error(
        &grad_interp(&file, "nope", "[]", &[]),
        &format!("error: no function @nope in {}", shown(&file)),
    );
}

#[test]
fn grad_seed_of_a_const_return_is_an_error() {
    let file = temp_file("cli-grad-const-seed.ir", SQUARE_PLUS);
    user_error(
        &grad_interp(
            &file,
            "f",
            "[2, 1]",
            &["--activity", "active,active->const", "--seed", "2"],
        ),
        "error: --seed: the return is `const` (--activity ...->const), so it takes no seed",
    );
}

#[test]
fn grad_a_runtime_error_of_the_forward_pass() {
    let file = temp_file(
        "cli-grad-runtime-error.ir",
        "func @d(%x: f64, %n: i64) -> f64 {
entry:
    %q = idiv 10, %n
    %c = cast f64 %q
    %r = fmul %x, %c
    ret %r
}
",
    );
    // d(x * (10 / n))/dx = 10 / n (integer division).
    let run = grad_interp(&file, "d", "[1.5, 4]", &[]);
    assert_grad(&run, (1.5 * 2.0).into(), serde_json::json!([2.0, null]));
    user_error(
        &grad_interp(&file, "d", "[1.5, 0]", &[]),
        &format!(
            "{}: error: in @d.fwd, idiv: integer division by zero",
            shown(&file)
        ),
    );
}

#[test]
fn grad_with_time_adds_the_medians_and_the_tape() {
    let file = temp_file("cli-grad-time.ir", SQUARE_PLUS);
    let run = grad_interp(&file, "f", "[2, 1]", &["--time", "3"]);
    let out = json_out(&run);
    assert!(
        run.stdout
            .starts_with("{\"value\": 7.0, \"gradient\": [4.0, 3.0], \"time\": {\"primal_ns\": "),
        "{run:?}"
    );
    let time = out["time"].as_object().expect("a time object");
    // In the spec's order, without compile_ms for the interpreter.
    let keys: Vec<&String> = time.keys().collect();
    assert_eq!(keys, ["primal_ns", "gradient_ns", "tape_bytes"], "{run:?}");
    assert!(time.values().all(Value::is_u64), "{run:?}");
    // The forward pass saves `x` for the reverse of `x*x`: at least one scalar.
    assert!(out["time"]["tape_bytes"].as_u64() >= Some(8), "{run:?}");
}

#[test]
fn grad_on_the_jit_says_it_is_not_there_yet() {
    let file = temp_file("cli-grad-jit.ir", SQUARE_PLUS);
    let f = shown(&file);
    let message = "error: the JIT engine is not available yet; use --engine interp";
    // The default engine is the JIT, as the spec says.
    user_error(
        &cli(&["grad", &f, "--func", "f", "--args", "[2, 1]"]),
        message,
    );
    user_error(
        &cli(&[
            "grad", &f, "--func", "f", "--args", "[2, 1]", "--engine", "jit",
        ]),
        message,
    );
}

/// The gradient of rosenbrock, `sum_{i<n-1} 100 (x[i+1] - x[i]^2)^2 + (1 - x[i])^2`.
fn rosenbrock_gradient(x: &[f64]) -> Vec<f64> {
    let mut g = vec![0.0; x.len()];
    for i in 0..x.len().saturating_sub(1) {
        let d = x[i + 1] - x[i] * x[i];
        g[i] += -400.0 * x[i] * d - 2.0 * (1.0 - x[i]);
        g[i + 1] += 200.0 * d;
    }
    g
}

#[test]
fn grad_of_rosenbrock_matches_the_closed_form() {
    let x = [0.5, 1.0, 2.0];
    let file = example("rosenbrock.ir");
    let run = grad_interp(&file, "rosenbrock", "[[0.5, 1.0, 2.0]]", &[]);
    // 100 (1 - 0.25)^2 + 0.5^2 + 100 (2 - 1)^2 + 0^2 = 156.5
    assert_grad(
        &run,
        156.5.into(),
        serde_json::json!([rosenbrock_gradient(&x)]),
    );
    // A shadow accumulates: starting from s, it ends as s + the gradient.
    let run = grad_interp(
        &file,
        "rosenbrock",
        "[[0.5, 1.0, 2.0]]",
        &["--shadows", "[[1, 2, 3]]"],
    );
    let g = rosenbrock_gradient(&x);
    assert_grad(
        &run,
        156.5.into(),
        serde_json::json!([[1.0 + g[0], 2.0 + g[1], 3.0 + g[2]]]),
    );
    user_error(
        &grad_interp(
            &file,
            "rosenbrock",
            "[[0.5, 1.0, 2.0]]",
            &["--shadows", "[[1, 2]]"],
        ),
        "error: --shadows: the shadow of argument 1 (%x: [f64]) must have 3 elements, as \
         the argument has, found 2",
    );
}

#[test]
fn rosenbrock_closed_form_gradient_is_right() {
    // The oracle of the ignored test, against central differences.
    let x = [0.5, 1.0, 2.0, -0.3];
    let f = |x: &[f64]| -> f64 {
        (0..x.len() - 1)
            .map(|i| 100.0 * (x[i + 1] - x[i] * x[i]).powi(2) + (1.0 - x[i]).powi(2))
            .sum()
    };
    let g = rosenbrock_gradient(&x);
    for i in 0..x.len() {
        let h = 1e-6;
        let (mut up, mut down) = (x, x);
        up[i] += h;
        down[i] -= h;
        let fd = (f(&up) - f(&down)) / (2.0 * h);
        assert!(
            (fd - g[i]).abs() <= 1e-5 * g[i].abs().max(1.0),
            "{i}: {fd} vs {}",
            g[i]
        );
    }
}

// dump

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

/// `gradlift dump FILE --func F --stage STAGE EXTRA...`.
fn dump(file: &Path, func: &str, stage: &str, extra: &[&str]) -> Run {
    let file = shown(file);
    let mut argv = vec!["dump", &file, "--func", func, "--stage", stage];
    argv.extend_from_slice(extra);
    cli(&argv)
}

#[test]
fn dump_forward_and_pullback_print_checkable_ir() {
    let file = temp_file("cli-dump-derived.ir", SQUARE_PLUS);
    let fwd = dump(&file, "f", "forward", &[]);
    assert_eq!((fwd.code, fwd.stderr.as_str()), (0, ""), "{fwd:?}");
    assert!(
        fwd.stdout
            .starts_with("func @f.fwd(%x: f64, %y: f64) -> f64 {"),
        "{fwd:?}"
    );
    let rvs = dump(&file, "f", "pullback", &[]);
    assert_eq!((rvs.code, rvs.stderr.as_str()), (0, ""), "{rvs:?}");
    assert!(rvs.stdout.starts_with("func @f.rvs("), "{rvs:?}");
    assert!(rvs.stdout.ends_with("}\n") && !rvs.stdout.ends_with("\n\n"));
    // Each dump is one function that `gradlift check` accepts.
    for (name, run) in [("fwd", &fwd), ("rvs", &rvs)] {
        let path = temp_file(&format!("cli-dump-derived.{name}.ir"), &run.stdout);
        let check = cli(&["check", &shown(&path)]);
        assert_eq!(
            (check.code, check.stdout.as_str()),
            (0, "ok: 1 functions\n"),
            "{check:?}"
        );
    }
    // Together they are the rule: the forward pass at (2, 1) leaves on the tape what
    // the pullback needs for the gradient (2x, 3).
    use gradlift::ir::interp::{Interpreter, Val};
    let module = gradlift::ir::parse(&format!("{}\n{}", fwd.stdout, rvs.stdout))
        .expect("the dumps parse together");
    gradlift::ir::verify(&module).expect("and verify");
    let mut engine = Interpreter::new(&module);
    let (value, [dx, dy]) = square_plus(2.0, 1.0);
    let y = engine
        .call_by_name("f.fwd", &mut [Val::F64(2.0), Val::F64(1.0)])
        .expect("the forward pass runs");
    assert_eq!(y, [Val::F64(value)]);
    let g = engine
        .call_by_name("f.rvs", &mut [Val::F64(1.0)])
        .expect("the pullback runs");
    assert_eq!(g, [Val::F64(dx), Val::F64(dy)]);
}

#[test]
fn dump_derived_stages_follow_the_activity() {
    let file = temp_file("cli-dump-activity.ir", SQUARE_PLUS);
    let run = dump(&file, "f", "forward", &["--activity", "const,active"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(run.stdout.starts_with("func @f.fwd.CA_A("), "{run:?}");
    let run = dump(&file, "f", "pullback", &["--activity", "const,active"]);
    // One active parameter: one cotangent out.
    assert!(run.stdout.starts_with("func @f.rvs.CA_A("), "{run:?}");
    assert!(
        run.stdout
            .lines()
            .next()
            .is_some_and(|l| l.ends_with("-> f64 {")),
        "{run:?}"
    );
    gradlift::ir::parse(&run.stdout).expect("the dump parses");
}

#[test]
fn dump_with_a_bad_activity() {
    let file = temp_file("cli-dump-bad-activity.ir", SQUARE_PLUS);
    let f = shown(&file);
    user_error(
        &dump(&file, "f", "forward", &["--activity", "active"]),
        &format!("{f}: error: @f has 2 parameters, but 1 activity was given"),
    );
    let run = dump(&file, "f", "pullback", &["--activity", "active,dup"]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(
        run.stderr.starts_with(&format!(
            "{f}:1:18: error: parameter 2 (%y: f64) of @f cannot be `dup`"
        )),
        "{run:?}"
    );
    usage_error(&dump(&file, "f", "forward", &["--activity", "dup,bogus"]));
    // `active` on a slice is refused with the parameter's position.
    let run = dump(
        &example("rosenbrock.ir"),
        "rosenbrock",
        "forward",
        &["--activity", "active"],
    );
    assert_eq!(run.code, 1, "{run:?}");
    assert!(run.stderr.contains("cannot be `active`"), "{run:?}");
}

#[test]
fn dump_other_stages_are_not_available_yet() {
    let file = shown(&example("sumsq.ir"));
    for stage in ["optimized", "clif", "asm", "dot"] {
        user_error(
            &cli(&["dump", &file, "--func", "sumsq", "--stage", stage]),
            &format!(
                "error: gradlift dump: stage {stage} is not available yet (only primal, \
                 forward and pullback are)"
            ),
        );
    }
    user_error(
        &cli(&["dump", &file, "--func", "nope", "--stage", "primal"]),
        &format!("error: no function @nope in {file}"),
    );
}

/// `--debug` and `--check-nan` (extensions): the pullback of `sqrt(x) * 0` at 0 is
/// NaN without them, and with `--check-nan` a runtime error naming the statement.
#[test]
fn grad_and_dump_in_debug_mode() {
    let file = temp_file(
        "cli-debug-nan.ir",
        "func @f(%x: f64) -> f64 {\nentry:\n    %s = sqrt %x\n    %r = fmul %s, 0.0\n    ret %r\n}\n",
    );
    let f = shown(&file);
    let run = grad_interp(&file, "f", "[0]", &[]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(run.stdout.trim(), r#"{"value": 0.0, "gradient": ["nan"]}"#);
    let run = grad_interp(&file, "f", "[0]", &["--debug"]);
    assert_eq!(run.code, 0, "{run:?}");
    user_error(
        &grad_interp(&file, "f", "[0]", &["--check-nan"]),
        &format!(
            "{f}: error: in @f.rvs, trap_if: trap: NaN created by the reverse of `%s = sqrt %x` (operand 1) in the pullback of @f"
        ),
    );
    // Away from 0 the checks pass: d/dx (sqrt(x) * 0) = 0.
    let run = grad_interp(&file, "f", "[4]", &["--check-nan"]);
    assert_eq!(
        run.stdout.trim(),
        r#"{"value": 0.0, "gradient": [0.0]}"#,
        "{run:?}"
    );
    // The debug pullback carries its checks, and parses back.
    let run = dump(&file, "f", "pullback", &["--check-nan"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(run.stdout.contains("trap_if"), "{}", run.stdout);
    gradlift::ir::parse(&run.stdout).unwrap();
    let run = dump(&file, "f", "pullback", &[]);
    assert!(!run.stdout.contains("trap_if"), "{}", run.stdout);
}
