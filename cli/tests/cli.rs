//! The `gradlift` binary against its manual (`docs/cli.md`): exit statuses
//! (0 success, 1 user error, 2 usage error), `FILE:LINE:COL: error: MESSAGE` on
//! stderr, the JSON that `run` and `grad` print, and the IR text `dump` prints.
//! Expected values and gradients are closed forms written here.

mod common;

use std::path::{Path, PathBuf};

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
        (0, "ok: 1 function\n", "")
    );
    let run = cli(&["check", &shown(&example("mlp.ir"))]);
    assert_eq!(run.stdout, "ok: 4 functions\n");
}

#[test]
fn check_several_files_prefixes_each_line() {
    let (a, b) = (example("sumsq.ir"), example("decls.ir"));
    let run = cli(&["check", &shown(&a), &shown(&b)]);
    assert_eq!(run.code, 0, "{run:?}");
    // Externs are not counted: decls.ir has eight functions, one of them extern.
    let expected = format!(
        "{}: ok: 1 function\n{}: ok: 7 functions\n",
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
    assert_eq!(run.stdout, format!("{}: ok: 1 function\n", shown(&good)));
    assert!(
        run.stderr
            .starts_with("error: cannot read no/such/file.ir: "),
        "{run:?}"
    );
}

/// Devices and directories are refused at once: `/dev/zero` used to be read
/// forever, as `check` input and as an `--args-file`.
#[cfg(unix)]
#[test]
fn devices_and_directories_are_not_read() {
    user_error(
        &cli(&["check", "/dev/zero"]),
        "error: cannot read /dev/zero: it is a device, not a file",
    );
    let rosenbrock = example("rosenbrock.ir");
    user_error(
        &cli(&[
            "run",
            &shown(&rosenbrock),
            "--func",
            "rosenbrock",
            "--args-file",
            "/dev/urandom",
        ]),
        "error: cannot read /dev/urandom: it is a device, not a file",
    );
    let dir = std::env::temp_dir();
    user_error(
        &cli(&["check", &shown(&dir)]),
        &format!("error: cannot read {}: it is a directory", shown(&dir)),
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
            "{}:4:5: error: in @oob, load of %x: index 3 out of bounds for length 3",
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

// run --engine jit

/// `gradlift run FILE --func F --args JSON --engine ENGINE EXTRA...`.
fn run_on(engine: &str, file: &Path, func: &str, args: &str, extra: &[&str]) -> Run {
    let file = shown(file);
    let mut argv = vec![
        "run", &file, "--func", func, "--args", args, "--engine", engine,
    ];
    argv.extend_from_slice(extra);
    cli(&argv)
}

/// A JSON array of `n` floats `sin(a i + 0.1)`, each written so it reads back exactly.
fn wave(n: usize, a: f64) -> String {
    let xs: Vec<String> = (0..n)
        .map(|i| format!("{:?}", (a * i as f64 + 0.1).sin()))
        .collect();
    format!("[{}]", xs.join(", "))
}

/// Calls of every defined function of `examples/ir` but the one that calls an
/// `extern` (`@wave` of decls.ir, refused by both engines in their own way), some at
/// several points, some failing at run time.
fn example_calls() -> Vec<(&'static str, &'static str, String)> {
    let mut calls: Vec<(&str, &str, String)> = vec![
        ("alloc.ir", "sumsq_buffered", "[[1, 2, 3.5]]".into()),
        ("alloc.ir", "sum", format!("[{}]", wave(9, 0.7))),
        ("alloc.ir", "iota_sum", "[10]".into()),
        ("alloc.ir", "iota_sum", "[-1]".into()),
        ("alloc.ir", "iota", "[[0, 0, 0, 0]]".into()),
        ("alloc.ir", "isum", "[[1, -2, 30]]".into()),
        ("branches.ir", "piecewise", "[-3]".into()),
        ("branches.ir", "piecewise", "[2.5]".into()),
        ("branches.ir", "sign", "[-2]".into()),
        ("branches.ir", "sign", "[\"nan\"]".into()),
        ("branches.ir", "sign", "[0.5]".into()),
        ("branches.ir", "clamp", "[0.5, 0, 1]".into()),
        ("branches.ir", "clamp", "[-1, 0, 1]".into()),
        ("branches.ir", "clamp", "[\"inf\", 0, 1]".into()),
        ("branchy.ir", "branchy", format!("[{}]", wave(12, 0.9))),
        (
            "custom_rules.ir",
            "matvec",
            "[[1, 2, 3, 4, 5, 6], [1, -1], [0, 0, 0]]".into(),
        ),
        (
            "custom_rules.ir",
            "matvec_vjp",
            "[[1, 2, 3, 4, 5, 6], [1, -1], [0, 0, 0], [0, 0, 0, 0, 0, 0], [0, 0], [1, 0.5, 2]]"
                .into(),
        ),
        (
            "custom_rules.ir",
            "mv_loss",
            format!("[{}, [1, -1], 0.5]", wave(6, 0.3)),
        ),
        ("custom_rules.ir", "lse", format!("[{}]", wave(5, 0.8))),
        ("custom_rules.ir", "lse_fwd", "[[1, 2, 3]]".into()),
        ("custom_rules.ir", "lse_loss", "[[1, 2, 3], 0.5]".into()),
        // Pops what @lse_fwd pushed: alone, the tape is empty.
        ("custom_rules.ir", "lse_rvs", "[[0, 0, 0], 1.0]".into()),
        ("decls.ir", "softplus", "[0.3]".into()),
        ("decls.ir", "softplus_stable", "[40]".into()),
        ("decls.ir", "softplus_stable", "[-40]".into()),
        ("decls.ir", "square", "[-1.5]".into()),
        ("decls.ir", "square_vjp", "[3, 0.5]".into()),
        ("decls.ir", "square_jvp", "[3, 0.5]".into()),
        ("decls.ir", "round_down", "[2.7]".into()),
        ("fast_inv_sqrt.ir", "fast_inv_sqrt", "[2]".into()),
        ("fast_inv_sqrt.ir", "fast_inv_sqrt", "[0.01]".into()),
        ("logsumexp.ir", "logsumexp", format!("[{}]", wave(8, 0.37))),
        ("logsumexp.ir", "logsumexp", "[[1000, 1000]]".into()),
        (
            "multiple_results.ir",
            "max_argmax",
            format!("[{}]", wave(7, 1.3)),
        ),
        (
            "multiple_results.ir",
            "max_plus_index",
            format!("[{}]", wave(7, 1.3)),
        ),
        ("multiple_results.ir", "divmod", "[-7, 2]".into()),
        ("multiple_results.ir", "divmod", "[1, 0]".into()),
        ("mutation.ir", "scale", "[[1, 2, 3], 0.5]".into()),
        ("mutation.ir", "square", "[[1, -2, 0.1]]".into()),
        ("mutation.ir", "scale_sum", "[[1, 2, 3], -0.25]".into()),
        ("nested_loops.ir", "triangle", "[10]".into()),
        (
            "nested_loops.ir",
            "matvec",
            "[[1, 2, 3, 4, 5, 6], [1, 0.5, -1], [0, 0]]".into(),
        ),
        (
            "nested_loops.ir",
            "matvec",
            "[[1, 2, 3, 4, 5], [1, 0.5, -1], [0, 0]]".into(),
        ),
        ("normalize.ir", "norm", format!("[{}]", wave(5, 0.37))),
        (
            "normalize.ir",
            "normalize",
            format!("[{}, {}]", wave(6, 0.37), wave(6, 0.11)),
        ),
        ("ode.ir", "ode", "[1.5, 1, 3, 1, 1, 1, 100]".into()),
        ("recursion.ir", "f", "[3.5]".into()),
        ("recursion.ir", "f", "[20000]".into()),
        ("recursion.ir", "fact", "[20]".into()),
        ("recursion.ir", "is_even", "[10]".into()),
        ("recursion.ir", "is_odd", "[7]".into()),
        ("recursion.ir", "fib", "[15]".into()),
        ("rosenbrock.ir", "rosenbrock", "[[0.5, 1.0, 2.0]]".into()),
        ("sumsq.ir", "sumsq", "[[1, 2, 3]]".into()),
        ("sumsq.ir", "sumsq", "[[]]".into()),
    ];
    // The perceptron: 3 rows of 32 inputs, 64 hidden units, 10 classes.
    let (x, w1, b1, w2, b2) = (
        wave(3 * 32, 0.7),
        wave(32 * 64, 0.3),
        wave(64, 0.01),
        wave(64 * 10, 0.17),
        wave(10, 0.5),
    );
    let h = wave(64, 0.2);
    calls.extend([
        (
            "mlp.ir",
            "mlp",
            format!("[{x}, {w1}, {b1}, {w2}, {b2}, [0, 9, 4]]"),
        ),
        // A label out of range: an error in @xent, two calls deep.
        (
            "mlp.ir",
            "mlp",
            format!("[{x}, {w1}, {b1}, {w2}, {b2}, [0, 10, 4]]"),
        ),
        (
            "mlp.ir",
            "hidden",
            format!("[{x}, 2, {w1}, {b1}, {}]", wave(64, 0.0)),
        ),
        (
            "mlp.ir",
            "logits",
            format!("[{h}, {w2}, {b2}, {}]", wave(10, 0.0)),
        ),
        ("mlp.ir", "xent", format!("[{b2}, 3]")),
    ]);
    calls
}

/// The JIT prints what the interpreter prints, byte for byte: values, final `mut`
/// arguments, and runtime errors with their positions (the interpreter is the
/// oracle).
#[test]
fn run_on_the_jit_prints_what_the_interpreter_prints() {
    let mut ok = 0;
    let mut failed = 0;
    for (file, func, args) in example_calls() {
        let path = example(file);
        let interp = run_on("interp", &path, func, &args, &[]);
        let jit = run_on("jit", &path, func, &args, &[]);
        assert_eq!(
            (jit.code, &jit.stdout, &jit.stderr),
            (interp.code, &interp.stdout, &interp.stderr),
            "{file} @{func} {args}"
        );
        match interp.code {
            0 => {
                json_out(&jit);
                ok += 1;
            }
            1 => {
                assert!(
                    jit.stderr.starts_with(&format!("{}:", shown(&path))),
                    "{jit:?}"
                );
                failed += 1;
            }
            _ => panic!("{file} @{func}: {interp:?}"),
        }
    }
    // Six calls fail on purpose (a negative alloc, division by zero, out of bounds
    // twice, the depth limit, a pop from the empty tape); the rest succeed.
    assert_eq!((ok, failed), (example_calls().len() - 6, 6));
}

/// Every defined function of `examples/ir` is in `example_calls`.
#[test]
fn the_jit_comparison_calls_every_example_function() {
    let calls = example_calls();
    let mut files: Vec<String> = std::fs::read_dir(example(""))
        .expect("examples/ir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .filter(|p| p.ends_with(".ir"))
        .collect();
    files.sort();
    let mut missing = Vec::new();
    for file in &files {
        let module = common::load_example(file);
        for (id, _) in module.defined() {
            let name = module.name(id);
            let called = calls.iter().any(|(f, func, _)| f == file && *func == name);
            let calls_an_extern = file == "decls.ir" && name == "wave";
            if !called && !calls_an_extern {
                missing.push(format!("{file} @{name}"));
            }
        }
    }
    assert!(missing.is_empty(), "not called: {missing:?}");
}

#[test]
fn run_on_the_jit_values_are_right() {
    // Closed forms, independently of the interpreter.
    let out = json_out(&run_on(
        "jit",
        &example("rosenbrock.ir"),
        "rosenbrock",
        "[[0.5, 1.0, 2.0]]",
        &[],
    ));
    // 100 (1 - 0.25)^2 + 0.25 + 100 (2 - 1)^2 + 0 = 56.25 + 0.25 + 100
    assert_eq!(out["value"], 156.5);
    let out = json_out(&run_on(
        "jit",
        &example("mutation.ir"),
        "scale_sum",
        "[[1, 2, 3], 0.5]",
        &[],
    ));
    assert_eq!(
        out.to_string(),
        r#"{"value":3.0,"args":[[0.5,1.0,1.5],null]}"#
    );
    let out = json_out(&run_on(
        "jit",
        &example("multiple_results.ir"),
        "divmod",
        "[-7, 2]",
        &[],
    ));
    assert_eq!(out["value"], serde_json::json!([-3, -1]));
}

#[test]
fn the_default_engine_is_the_jit() {
    let file = example("recursion.ir");
    let default = cli(&["run", &shown(&file), "--func", "fact", "--args", "[20]"]);
    assert_eq!(json_out(&default)["value"], 2_432_902_008_176_640_000_i64);
    // And it is the JIT's: with --time it reports compile_ms, which only the JIT
    // does.
    let default = cli(&[
        "run",
        &shown(&file),
        "--func",
        "fact",
        "--args",
        "[5]",
        "--time",
        "1",
    ]);
    let out = json_out(&default);
    assert!(out["time"]["compile_ms"].is_number(), "{out}");
}

#[test]
fn run_on_the_jit_with_time_adds_primal_ns_and_compile_ms() {
    let run = run_on(
        "jit",
        &example("mutation.ir"),
        "scale_sum",
        "[[1, 2, 3], 0.5]",
        &["--time", "5"],
    );
    let out = json_out(&run);
    // The results of the warm-up call, keys in the spec's order.
    assert!(
        run.stdout.starts_with(
            "{\"value\": 3.0, \"args\": [[0.5, 1.0, 1.5], null], \"time\": {\"primal_ns\": "
        ),
        "{run:?}"
    );
    let time = out["time"].as_object().expect("a time object");
    assert_eq!(
        time.keys().collect::<Vec<_>>(),
        ["primal_ns", "compile_ms"],
        "{out}"
    );
    assert!(time["primal_ns"].is_u64(), "{out}");
    let ms = time["compile_ms"].as_f64().expect("a number");
    // Compiling takes some time, and less than a minute.
    assert!(ms > 0.0 && ms < 60_000.0, "{out}");
    // Without --time, no time.
    let out = json_out(&run_on(
        "jit",
        &example("mutation.ir"),
        "scale_sum",
        "[[1, 2, 3], 0.5]",
        &[],
    ));
    assert!(out.get("time").is_none(), "{out}");
}

#[test]
fn run_on_the_jit_reports_runtime_errors_at_their_position() {
    let file = temp_file(
        "cli-jit-out-of-bounds.ir",
        "func @oob(%x: [f64], %i: i64) -> f64 {\nentry:\n    %v = load %x[%i]\n    ret %v\n}\n",
    );
    let f = shown(&file);
    user_error(
        &run_on("jit", &file, "oob", "[[1], -1]", &[]),
        &format!("{f}:3:5: error: in @oob, load of %x: index -1 out of bounds for length 1"),
    );
    // The default engine too; and the error of a later timed call is reported just
    // the same (here the first call already fails).
    user_error(
        &cli(&[
            "run",
            &f,
            "--func",
            "oob",
            "--args",
            "[[1, 2], 2]",
            "--time",
            "3",
        ]),
        &format!("{f}:3:5: error: in @oob, load of %x: index 2 out of bounds for length 2"),
    );
    user_error(
        &run_on(
            "jit",
            &example("multiple_results.ir"),
            "divmod",
            "[1, 0]",
            &[],
        ),
        &format!(
            "{}:39:5: error: in @divmod, idiv: integer division by zero",
            shown(&example("multiple_results.ir"))
        ),
    );
}

#[test]
fn run_on_the_jit_refuses_calls_to_externs_clearly() {
    let file = example("decls.ir");
    let f = shown(&file);
    let run = run_on("jit", &file, "wave", "[1.0]", &[]);
    user_error(
        &run,
        &format!(
            "{f}:15:5: error: in @wave, call: @host_sin is an extern function (the command \
             line has no host functions: call it from Rust)"
        ),
    );
    // The extern itself is refused before any engine is involved.
    let run = run_on("jit", &file, "host_sin", "[1.0]", &[]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(
        run.stderr.contains("@host_sin is an extern function"),
        "{run:?}"
    );
    // The rest of the file runs: only @square (and what it calls) is compiled.
    assert_eq!(
        json_out(&run_on("jit", &file, "square", "[3]", &[]))["value"],
        9.0
    );
}

#[test]
fn run_on_the_jit_checks_arguments_as_the_interpreter_does() {
    let ode = example("ode.ir");
    let args = "[1.5, 1, 3, 1, 1, 1, 1.5]";
    let interp = run_on("interp", &ode, "ode", args, &[]);
    let jit = run_on("jit", &ode, "ode", args, &[]);
    user_error(
        &jit,
        "error: argument 7 (%T: i64) must be an integer, found 1.5",
    );
    assert_eq!(jit.stderr, interp.stderr);
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
    for command in ["check", "run", "grad", "jvp", "dump"] {
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
    // At the `idiv` the user wrote (line 3): the forward pass keeps the primal's
    // positions.
    user_error(
        &grad_interp(&file, "d", "[1.5, 0]", &[]),
        &format!(
            "{}:3:5: error: in @d.fwd, idiv: integer division by zero",
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

/// `grad` on the JIT (the default engine) prints what the interpreter prints, for
/// every example call that derives: gradients to relative 1e-12, errors byte for
/// byte (the interpreter is the oracle; its gradients are checked against finite
/// differences by the adjoint tests).
#[test]
fn grad_on_the_jit_prints_what_the_interpreter_prints() {
    let (mut ok, mut failed) = (0, 0);
    for (file, func, args) in example_calls() {
        let path = example(file);
        let f = shown(&path);
        let on = |engine: &str| {
            cli(&[
                "grad", &f, "--func", func, "--args", &args, "--engine", engine,
            ])
        };
        let interp = on("interp");
        let jit = on("jit");
        assert_eq!(
            jit.code, interp.code,
            "{file} @{func} {args}: {interp:?} {jit:?}"
        );
        if interp.code == 0 {
            let (a, b) = (json_out(&interp), json_out(&jit));
            assert!(json_close(&a, &b), "{file} @{func} {args}: {a} vs {b}");
            ok += 1;
        } else {
            assert_eq!(jit.stderr, interp.stderr, "{file} @{func} {args}");
            failed += 1;
        }
    }
    // The default engine is the JIT.
    let sq = temp_file("cli-grad-jit.ir", SQUARE_PLUS);
    let run = cli(&["grad", &shown(&sq), "--func", "f", "--args", "[2, 1]"]);
    assert_eq!(
        json_out(&run),
        serde_json::json!({"value": 7.0, "gradient": [4.0, 3.0]})
    );
    assert!(ok >= 40 && failed >= 5, "{ok} {failed}");
}

#[test]
fn grad_tape_policies_give_the_same_gradient_and_different_tapes() {
    let file = example("rosenbrock.ir");
    let x = format!("[{}]", wave(100, 0.37));
    let run = |tape: &str, engine: &str| {
        let run = cli(&[
            "grad",
            &shown(&file),
            "--func",
            "rosenbrock",
            "--args",
            &x,
            "--time",
            "2",
            "--tape",
            tape,
            "--engine",
            engine,
        ]);
        let out = json_out(&run);
        (
            out["gradient"].clone(),
            out["time"]["tape_bytes"].as_u64().unwrap(),
        )
    };
    for engine in ["jit", "interp"] {
        let (g_min, t_min) = run("minimal", engine);
        let (g_all, t_all) = run("save-all", engine);
        assert_eq!(g_min, g_all, "{engine}");
        // Saving everything keeps values per element. The minimal policy allows
        // the fused rule, which reverses each iteration inside the loop: no tape.
        assert_eq!(t_min, 0, "{engine}");
        assert!(t_all >= 8 * 99, "{engine}: {t_all}");
    }
    let bad = cli(&[
        "grad",
        &shown(&file),
        "--func",
        "rosenbrock",
        "--args",
        &x,
        "--tape",
        "some",
    ]);
    assert_eq!(bad.code, 2, "{bad:?}");
    assert!(bad.stderr.contains("unknown tape policy `some`"), "{bad:?}");
}

#[test]
fn grad_on_the_jit_with_time_adds_compile_ms() {
    let file = example("rosenbrock.ir");
    let run = cli(&[
        "grad",
        &shown(&file),
        "--func",
        "rosenbrock",
        "--args",
        &format!("[{}]", wave(100, 0.37)),
        "--time",
        "5",
    ]);
    let out = json_out(&run);
    let time = out["time"].as_object().expect("a time object");
    let keys: Vec<&String> = time.keys().collect();
    assert_eq!(
        keys,
        ["primal_ns", "gradient_ns", "compile_ms", "tape_bytes"],
        "{run:?}"
    );
    assert!(
        time["compile_ms"].as_f64().is_some_and(|ms| ms > 0.0),
        "{run:?}"
    );
    // The loop is a sum, so its reverse runs inside it (the fused rule): no tape.
    assert_eq!(time["tape_bytes"].as_u64(), Some(0), "{run:?}");
    assert!(time["gradient_ns"].as_u64() > Some(0), "{run:?}");
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
            (0, "ok: 1 function\n"),
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

/// `--stage fused`: the one-sweep function `grad` runs for a sum, which parses,
/// checks and gives the gradient (2 x) on the interpreter; a function of another
/// shape has none, an error that names the stages to look at instead.
#[test]
fn dump_fused_prints_the_function_grad_runs() {
    let file = example("sumsq.ir");
    let run = dump(&file, "sumsq", "fused", &[]);
    assert_eq!((run.code, run.stderr.as_str()), (0, ""), "{run:?}");
    assert!(
        run.stdout
            .starts_with("func @sumsq.vg(%x: [f64], %dx: mut [f64], %dy: f64) -> f64 {"),
        "{run:?}"
    );
    let path = temp_file("cli-dump-fused.ir", &run.stdout);
    let check = cli(&["check", &shown(&path)]);
    assert_eq!(
        (check.code, check.stdout.as_str()),
        (0, "ok: 1 function\n"),
        "{check:?}"
    );
    use gradlift::ir::interp::{Interpreter, Val};
    let module = gradlift::ir::parse(&run.stdout).expect("the dump parses");
    let f = module.func_by_name("sumsq.vg").unwrap();
    let out = Interpreter::new(&module)
        .call(
            f,
            &mut [
                Val::F64s(vec![1.0, -2.0]),
                Val::F64s(vec![0.0, 0.0]),
                Val::F64(1.0),
            ],
        )
        .unwrap();
    assert_eq!(out, [Val::F64(5.0)]);
    // The clif and asm stages list it too: it is what `grad` compiles.
    let asm = dump(&file, "sumsq", "asm", &[]);
    assert!(asm.stdout.contains("; @sumsq.vg\n"), "{asm:?}");
    let ode = dump(&example("ode.ir"), "ode", "fused", &[]);
    assert_eq!(ode.code, 1, "{ode:?}");
    assert!(
        ode.stderr.contains("@ode has no fused function")
            && ode.stderr.contains("--stage pullback"),
        "{ode:?}"
    );
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

/// What a structural reading of a `dot` graph found.
#[derive(Debug, Default)]
struct DotGraph {
    /// The clusters' names (`cluster_X` gives `X`), in order.
    clusters: Vec<String>,
    /// Per cluster, its declared nodes.
    nodes: Vec<Vec<String>>,
    /// Per cluster, its edges and their labels.
    edges: Vec<Vec<(String, String, Option<String>)>>,
}

/// Reads the graph `gradlift dump --stage dot` prints, checking its structure on the
/// way: one `digraph`, braces balanced outside strings, strings closed on their line,
/// every edge's ends declared nodes of its own cluster.
#[track_caller]
fn read_dot(text: &str) -> DotGraph {
    // Braces outside quoted strings (with `\` escapes) balance and never go negative.
    let mut depth = 0_i64;
    for line in text.lines() {
        let mut in_string = false;
        let mut chars = line.chars();
        while let Some(c) = chars.next() {
            match (in_string, c) {
                (true, '\\') => {
                    chars.next();
                }
                (_, '"') => in_string = !in_string,
                (false, '{') => depth += 1,
                (false, '}') => {
                    depth -= 1;
                    assert!(depth >= 0, "unbalanced: {line}");
                }
                _ => {}
            }
        }
        assert!(!in_string, "a string left open: {line}");
    }
    assert_eq!(depth, 0, "{text}");
    let body: Vec<&str> = text
        .lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect();
    assert!(
        body.first()
            .is_some_and(|l| l.starts_with("digraph ") && l.ends_with(" {")),
        "{text}"
    );
    assert_eq!(body.last(), Some(&"}"), "{text}");
    assert_eq!(text.matches("digraph ").count(), 1, "{text}");

    let mut graph = DotGraph::default();
    for line in &body[1..] {
        let line = line.trim();
        if let Some(rest) = line.strip_prefix("subgraph cluster_") {
            let name = rest.strip_suffix(" {").expect("subgraph NAME {");
            graph.clusters.push(name.to_string());
            graph.nodes.push(Vec::new());
            graph.edges.push(Vec::new());
        } else if let Some((from, rest)) =
            line.split_once(" -> ").filter(|(from, _)| is_node_id(from))
        {
            let (to, attrs) = rest.split_once([' ', ';']).expect("an edge ends in `;`");
            let label = attrs
                .strip_prefix("[label=\"")
                .and_then(|a| a.strip_suffix("\"];"))
                .map(str::to_string);
            graph.edges.last_mut().expect("edges in a cluster").push((
                from.to_string(),
                to.to_string(),
                label,
            ));
        } else if let Some((id, _)) = line.split_once(" [label=").filter(|(id, _)| is_node_id(id)) {
            graph
                .nodes
                .last_mut()
                .expect("nodes in a cluster")
                .push(id.to_string());
        }
    }
    for (k, edges) in graph.edges.iter().enumerate() {
        for (from, to, _) in edges {
            assert!(
                graph.nodes[k].contains(from) && graph.nodes[k].contains(to),
                "{from} -> {to} in {}: {text}",
                graph.clusters[k]
            );
        }
    }
    graph
}

/// `cK_...`: how `dump --stage dot` names nodes.
fn is_node_id(s: &str) -> bool {
    s.starts_with('c') && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// When Graphviz is installed, `dot` must accept the graph; when it is not, the
/// structural checks of `read_dot` are all there is.
fn graphviz_accepts(text: &str) -> Option<bool> {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let mut child = Command::new("dot")
        .arg("-Tcanon")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .ok()?;
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(text.as_bytes())
        .expect("write to dot");
    let out = child.wait_with_output().expect("dot runs");
    Some(out.status.success() && out.stderr.is_empty())
}

#[test]
fn dump_dot_draws_the_primal_forward_and_pullback() {
    for (file, func) in [
        ("branches.ir", "piecewise"),
        ("branches.ir", "sign"),
        ("nested_loops.ir", "matvec"),
        ("recursion.ir", "fact"),
        ("mlp.ir", "mlp"),
        ("rosenbrock.ir", "rosenbrock"),
    ] {
        let path = example(file);
        let run = dump(&path, func, "dot", &[]);
        assert_eq!((run.code, run.stderr.as_str()), (0, ""), "{run:?}");
        let graph = read_dot(&run.stdout);
        assert_eq!(graph.clusters, ["primal", "forward", "pullback"], "{func}");
        if let Some(ok) = graphviz_accepts(&run.stdout) {
            assert!(ok, "dot rejects the graph of @{func}:\n{}", run.stdout);
        }
        // The primal cluster is the function's CFG: a node per block, an edge per
        // successor of each terminator, `br` edges labelled then and else.
        let module = common::load_example(file);
        let body = module
            .function(module.func_by_name(func).expect("the function"))
            .expect("a body");
        assert_eq!(graph.nodes[0].len(), body.layout.len(), "@{func}");
        let n_succ: usize = body.layout.iter().map(|&b| body.successors(b).len()).sum();
        assert_eq!(graph.edges[0].len(), n_succ, "@{func}");
        for edges in &graph.edges {
            let count = |l: &str| edges.iter().filter(|e| e.2.as_deref() == Some(l)).count();
            assert_eq!(count("then"), count("else"), "@{func}");
        }
        // The forward and pullback clusters have the blocks of those stages: the
        // labels of the first function of their dumps.
        for (k, stage) in [(1, "forward"), (2, "pullback")] {
            let text = dump(&path, func, stage, &[]).stdout;
            let n_blocks = text
                .lines()
                .take_while(|l| *l != "}")
                .filter(|l| l.ends_with(':') && !l.starts_with(' '))
                .count();
            assert_eq!(graph.nodes[k].len(), n_blocks, "@{func} {stage}");
        }
        // Each block's label names it and lists its statements: the first
        // instruction of the entry block is there, escaped as the printer wrote it.
        let entry = body.layout[0];
        let label = format!(
            "label=\"{}:\\l",
            body.blocks[entry].name.as_deref().unwrap_or("")
        );
        assert!(run.stdout.contains(&label), "{label}: {}", run.stdout);
    }
}

#[test]
fn dump_dot_follows_the_activity_and_escapes_messages() {
    let file = temp_file("cli-dump-dot-activity.ir", SQUARE_PLUS);
    let run = dump(&file, "f", "dot", &["--activity", "const,active"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        run.stdout
            .contains("label=\"forward: @f.fwd.CA_A(f64, f64) -> f64\";"),
        "{}",
        run.stdout
    );
    read_dot(&run.stdout);
    // A debug pullback's `trap_if` messages hold quotes and backticks.
    let run = dump(&file, "f", "dot", &["--check-nan"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(run.stdout.contains("trap_if"), "{}", run.stdout);
    assert!(run.stdout.contains("\\\"NaN created by"), "{}", run.stdout);
    let graph = read_dot(&run.stdout);
    assert_eq!(graph.clusters.len(), 3);
    if let Some(ok) = graphviz_accepts(&run.stdout) {
        assert!(ok, "{}", run.stdout);
    }
    // A bad activity is an error, as for the other derived stages.
    user_error(
        &dump(&file, "f", "dot", &["--activity", "active"]),
        &format!(
            "{}: error: @f has 2 parameters, but 1 activity was given",
            shown(&file)
        ),
    );
}

#[test]
fn dump_dot_of_a_function_without_a_rule_draws_the_primal_alone() {
    // Tape ops in the function itself: no rule (a callee without one would only
    // fail when its call runs).
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("gradlift-tests");
    std::fs::create_dir_all(&dir).expect("temp dir");
    let file = dir.join("tape_ops.ir");
    std::fs::write(
        &file,
        "func @wave(%x: f64) -> f64 {\nentry:\n    push %x\n    %y = pop f64\n    ret %y\n}\n",
    )
    .expect("write");
    let run = dump(&file, "wave", "dot", &[]);
    // Status 0: the graph is printed, the reason is a warning.
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        run.stderr.starts_with(&format!(
            "{}: warning: the graph has the primal only: ",
            shown(&file)
        )) && run.stderr.contains("push %x"),
        "{run:?}"
    );
    assert_eq!(run.stderr.lines().count(), 1, "{run:?}");
    let graph = read_dot(&run.stdout);
    assert_eq!(graph.clusters, ["primal"]);
    assert!(
        run.stdout.starts_with("// No forward pass or pullback: "),
        "{}",
        run.stdout
    );
    if let Some(ok) = graphviz_accepts(&run.stdout) {
        assert!(ok, "{}", run.stdout);
    }
}

#[test]
fn dump_clif_and_asm_list_the_primal_and_its_callees() {
    let file = example("mlp.ir");
    let clif = dump(&file, "mlp", "clif", &[]);
    assert_eq!((clif.code, clif.stderr.as_str()), (0, ""), "{clif:?}");
    let headers: Vec<&str> = clif
        .stdout
        .lines()
        .filter(|l| l.starts_with("; @"))
        .collect();
    // @mlp and the three functions it calls, then the forward passes and pullbacks
    // of all four, each followed by its trampoline.
    assert_eq!(headers.len(), 24, "{headers:?}");
    // (`xent` reads the caller's local buffer of logits, which is not frozen: its
    // rule's name says so with a lower-case `d`.)
    for derived in ["mlp.fwd", "mlp.rvs", "xent.fwd.dC_A", "xent.rvs.dC_A"] {
        assert!(
            headers.contains(&format!("; @{derived}").as_str()),
            "{headers:?}"
        );
    }
    assert_eq!(headers[0], "; @mlp");
    assert_eq!(headers[1], "; @mlp (entry)");
    for callee in ["hidden", "logits", "xent"] {
        assert!(
            headers.contains(&format!("; @{callee}").as_str()),
            "{headers:?}"
        );
        assert!(
            headers.contains(&format!("; @{callee} (entry)").as_str()),
            "{headers:?}"
        );
    }
    // Cranelift IR: one `function` per header, with the float ops of the source.
    assert_eq!(
        clif.stdout.matches("\nfunction ").count(),
        24,
        "{}",
        clif.stdout
    );
    assert!(clif.stdout.contains("fadd") && clif.stdout.contains("call "));
    assert!(clif.stdout.ends_with("}\n"), "{}", clif.stdout);

    let asm = dump(&file, "mlp", "asm", &[]);
    assert_eq!((asm.code, asm.stderr.as_str()), (0, ""), "{asm:?}");
    let asm_headers: Vec<&str> = asm
        .stdout
        .lines()
        .filter(|l| l.starts_with("; @"))
        .collect();
    assert_eq!(asm_headers, headers);
    // Machine code, not Cranelift IR, for each IR function: it returns.
    assert!(!asm.stdout.contains("function "), "{}", asm.stdout);
    for part in asm.stdout.split("; @").skip(1) {
        let (name, code) = part.split_once('\n').expect("a header line");
        if !name.ends_with(" (entry)") {
            assert!(code.contains("ret"), "@{name}:\n{code}");
        }
    }
    // --activity does not matter for these stages.
    let again = dump(
        &file,
        "mlp",
        "clif",
        &["--activity", "dup,dup,dup,dup,dup,const"],
    );
    assert_eq!(again.stdout, clif.stdout);
}

#[test]
fn dump_clif_of_a_call_to_an_extern_shows_the_host_call() {
    // Listing needs no host function: the call goes through the runtime's helper.
    let file = example("decls.ir");
    let run = dump(&file, "wave", "clif", &[]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(run.stdout.starts_with("; @wave\n"), "{run:?}");
    assert!(
        run.stdout.contains("sig0 = (i64, i64, i64, i64) -> i32"),
        "{run:?}"
    );
}

#[test]
fn dump_of_an_unknown_function_is_a_user_error() {
    let file = shown(&example("sumsq.ir"));
    for stage in ["primal", "optimized", "dot"] {
        user_error(
            &cli(&["dump", &file, "--func", "nope", "--stage", stage]),
            &format!("error: no function @nope in {file}"),
        );
    }
}

/// The blocks of `func` inside some natural loop (a back edge's target dominates
/// its source; the loop is what reaches the source without passing the target).
fn loop_blocks(func: &gradlift::ir::Function) -> Vec<gradlift::ir::Block> {
    use gradlift::ir::dominators::DominatorTree;
    use gradlift::ir::flowgraph::ControlFlowGraph;
    let cfg = ControlFlowGraph::new(func);
    let dt = DominatorTree::new(&cfg);
    let mut inside = Vec::new();
    for &h in cfg.reverse_postorder() {
        for &latch in cfg.preds(h).iter().filter(|&&l| dt.dominates(h, l)) {
            let mut body = vec![h];
            let mut stack = vec![latch];
            while let Some(b) = stack.pop() {
                if !body.contains(&b) {
                    body.push(b);
                    stack.extend_from_slice(cfg.preds(b));
                }
            }
            inside.extend(body);
        }
    }
    inside
}

#[test]
fn dump_optimized_calls_the_norm_once_outside_the_loop() {
    use gradlift::ir::interp::{Interpreter, Val};
    use gradlift::ir::{Imm, Opcode, parse, verify};
    let file = example("normalize.ir");
    let run = dump(&file, "normalize", "optimized", &[]);
    assert_eq!((run.code, run.stderr.as_str()), (0, ""), "{run:?}");
    assert!(run.stdout.starts_with("func @normalize("), "{run:?}");
    assert!(run.stdout.ends_with("}\n") && !run.stdout.ends_with("\n\n"));
    // The dump parses and verifies on its own: @normalize and the @norm it calls.
    let module = parse(&run.stdout).expect("the dump parses");
    verify(&module).expect("the dump verifies");
    assert_eq!(module.defined().count(), 2, "{}", run.stdout);
    let id = module.func_by_name("normalize").unwrap();
    let func = module.function(id).unwrap();
    let norm = module.func_by_name("norm").unwrap();
    let calls: Vec<_> = func
        .placed_insts()
        .filter(|&(_, i)| {
            func.insts[i].opcode == Opcode::Call && func.insts[i].imm == Imm::Func(norm)
        })
        .map(|(b, _)| b)
        .collect();
    assert_eq!(calls.len(), 1, "{}", run.stdout);
    let loops = loop_blocks(func);
    assert!(!loops.is_empty(), "{}", run.stdout);
    assert!(
        !loops.contains(&calls[0]),
        "the call is in a loop:\n{}",
        run.stdout
    );
    // It computes what the file's @normalize computes, in O(n) statements.
    let original = parse(&std::fs::read_to_string(&file).unwrap()).unwrap();
    let n = 100;
    let x: Vec<f64> = (0..n)
        .map(|i| 0.5 * (0.37 * i as f64 + 0.1).sin() + 1.0)
        .collect();
    let w: Vec<f64> = (0..n).map(|i| (0.11 * i as f64 + 0.3).sin()).collect();
    let run_on = |m: &gradlift::ir::Module| {
        let mut engine = Interpreter::new(m);
        let f = m.func_by_name("normalize").unwrap();
        let out = engine
            .call(f, &mut [Val::F64s(x.clone()), Val::F64s(w.clone())])
            .unwrap();
        (out, engine.steps())
    };
    let ((before, steps_before), (after, steps_after)) = (run_on(&original), run_on(&module));
    assert_eq!(before, after);
    let n = n as u64;
    assert!(
        steps_before > 5 * n * n && steps_after < 30 * n,
        "{steps_before} {steps_after}"
    );
    // `gradlift check` takes it.
    let path = temp_file("cli-dump-optimized.ir", &run.stdout);
    let check = cli(&["check", &shown(&path)]);
    assert_eq!(
        (check.code, check.stdout.as_str()),
        (0, "ok: 2 functions\n"),
        "{check:?}"
    );
}

#[test]
fn dump_optimized_of_every_example_function_parses_back_on_its_own() {
    use gradlift::ir::{parse, verify};
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/ir");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "ir"))
        .collect();
    files.sort();
    let mut dumped = 0;
    for file in files {
        let original = parse(&std::fs::read_to_string(&file).unwrap()).unwrap();
        for (_, decl) in original
            .funcs
            .iter()
            .filter(|(_, d)| d.function().is_some())
        {
            let what = format!("{} @{}", file.display(), decl.name);
            let run = dump(&file, &decl.name, "optimized", &[]);
            assert_eq!((run.code, run.stderr.as_str()), (0, ""), "{what}: {run:?}");
            let module = parse(&run.stdout).unwrap_or_else(|e| panic!("{what}: {e}\n{run:?}"));
            verify(&module).unwrap_or_else(|e| panic!("{what}: {e}\n{run:?}"));
            let first = module.funcs.values().next().unwrap();
            assert_eq!((&first.name, &first.sig), (&decl.name, &decl.sig), "{what}");
            dumped += 1;
        }
    }
    assert!(dumped > 30, "{dumped}");
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

/// The naive `normalize` of `examples/ir` at `n` elements: `x_i = 0.5 sin(0.37 i +
/// 0.1) + 1`, `w_i = sin(0.11 i + 0.3)`, as an args file.
fn normalize_args(n: usize) -> PathBuf {
    let x: Vec<f64> = (0..n)
        .map(|i| 0.5 * (0.37 * i as f64 + 0.1).sin() + 1.0)
        .collect();
    let w: Vec<f64> = (0..n).map(|i| (0.11 * i as f64 + 0.3).sin()).collect();
    temp_file(
        &format!("normalize-{n}.json"),
        &serde_json::to_string(&(x, w)).expect("JSON"),
    )
}

/// `grad` of the naive normalize at `n` elements on `engine` with `--opt opt` and
/// `--time 1`: the gradient (as JSON) and the tape's peak bytes.
fn normalize_grad(engine: &str, opt: &str, n: usize) -> (Value, u64) {
    let args = normalize_args(n);
    let run = cli(&[
        "grad",
        &shown(&example("normalize.ir")),
        "--func",
        "normalize",
        "--args-file",
        &shown(&args),
        "--engine",
        engine,
        "--opt",
        opt,
        "--time",
        "1",
    ]);
    let out = json_out(&run);
    let tape = out["time"]["tape_bytes"].as_u64().expect("tape_bytes");
    (out["gradient"].clone(), tape)
}

/// The closed form of normalize's gradient: with `s = |x|`, `d = w.x`,
/// `df/dx = w / s - d x / s^3` and `df/dw = x / s`.
fn normalize_closed_form(n: usize) -> Value {
    let x: Vec<f64> = (0..n)
        .map(|i| 0.5 * (0.37 * i as f64 + 0.1).sin() + 1.0)
        .collect();
    let w: Vec<f64> = (0..n).map(|i| (0.11 * i as f64 + 0.3).sin()).collect();
    let s = x.iter().map(|v| v * v).sum::<f64>().sqrt();
    let d: f64 = x.iter().zip(&w).map(|(a, b)| a * b).sum();
    let dx: Vec<f64> = x
        .iter()
        .zip(&w)
        .map(|(xi, wi)| wi / s - d * xi / (s * s * s))
        .collect();
    let dw: Vec<f64> = x.iter().map(|xi| xi / s).collect();
    serde_json::json!([dx, dw])
}

/// Whether two gradients agree to a relative `tol` per element.
fn gradients_close(a: &Value, b: &Value, tol: f64) -> bool {
    match (a, b) {
        (Value::Array(xs), Value::Array(ys)) => {
            xs.len() == ys.len() && xs.iter().zip(ys).all(|(x, y)| gradients_close(x, y, tol))
        }
        (Value::Number(x), Value::Number(y)) => match (x.as_f64(), y.as_f64()) {
            (Some(x), Some(y)) => (x - y).abs() <= tol * x.abs().max(y.abs()).max(1e-300),
            _ => false,
        },
        _ => a == b,
    }
}

#[test]
fn grad_runs_the_optimised_module_on_both_engines() {
    // The CLI runs the library's pipeline: the optimiser hoists @norm out of the
    // loop, so the tape does not grow with n on either engine, and the gradient is
    // the one derived from the module as written (`--opt none`), to 1e-12.
    for engine in ["jit", "interp"] {
        let (g_small, tape_small) = normalize_grad(engine, "default", 300);
        let (g_large, tape_large) = normalize_grad(engine, "default", 1200);
        assert_eq!(tape_small, tape_large, "{engine}: the tape grows with n");
        assert!(
            gradients_close(&g_large, &normalize_closed_form(1200), 1e-10),
            "{engine}: {g_large}"
        );
        let (g_none, tape_none) = normalize_grad(engine, "none", 300);
        assert!(
            gradients_close(&g_small, &g_none, 1e-12),
            "{engine}: optimised {g_small} against as written {g_none}"
        );
        // Without the optimiser the call stays in the loop and its pullback saves
        // per iteration: the tape is what the optimiser saved.
        assert!(
            tape_none > tape_small,
            "{engine}: {tape_none} <= {tape_small}"
        );
    }
}

#[test]
fn both_engines_print_the_same_gradient_and_tape() {
    let a = normalize_grad("jit", "default", 500);
    let b = normalize_grad("interp", "default", 500);
    assert_eq!(a.1, b.1, "tape bytes");
    assert!(
        gradients_close(&a.0, &b.0, 1e-12),
        "{} against {}",
        a.0,
        b.0
    );
}

#[test]
fn opt_none_is_accepted_by_run_and_dump() {
    let file = example("normalize.ir");
    let args = normalize_args(20);
    for engine in ["jit", "interp"] {
        let a = json_out(&cli(&[
            "run",
            &shown(&file),
            "--func",
            "normalize",
            "--args-file",
            &shown(&args),
            "--engine",
            engine,
            "--opt",
            "none",
        ]));
        let b = json_out(&cli(&[
            "run",
            &shown(&file),
            "--func",
            "normalize",
            "--args-file",
            &shown(&args),
            "--engine",
            engine,
        ]));
        assert!(gradients_close(&a["value"], &b["value"], 1e-12), "{a} {b}");
    }
    // The forward pass derived from the module as written calls @norm in the loop;
    // derived from the optimised module, once, before it.
    let dump = |opt: &str| {
        let run = cli(&[
            "dump",
            &shown(&file),
            "--func",
            "normalize",
            "--stage",
            "forward",
            "--opt",
            opt,
        ]);
        assert_eq!(run.code, 0, "{run:?}");
        run.stdout
    };
    let (optimised, as_written) = (dump("default"), dump("none"));
    assert_ne!(optimised, as_written);
    usage_error(&cli(&[
        "run",
        &shown(&file),
        "--func",
        "normalize",
        "--args",
        "[]",
        "--opt",
        "fast",
    ]));
}

#[test]
fn a_file_that_is_not_utf8_is_reported_at_its_first_bad_byte() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("gradlift-tests");
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join("latin1.ir");
    // Line 2, after `; caf`: 0xE9 is `é` in Latin-1, not UTF-8.
    std::fs::write(&path, b"func @f() {\n; caf\xE9\nentry:\n    ret\n}\n").expect("write");
    for argv in [
        vec!["check".to_string(), shown(&path)],
        vec![
            "run".to_string(),
            shown(&path),
            "--func".into(),
            "f".into(),
            "--args".into(),
            "[]".into(),
        ],
    ] {
        let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
        user_error(
            &cli(&argv),
            &format!(
                "{}:2:6: error: the file is not valid UTF-8: byte 0xE9 cannot start or continue a character here",
                shown(&path)
            ),
        );
    }
}

#[test]
fn a_runtime_error_of_the_forward_pass_points_at_the_primal_statement() {
    // `w` shorter than `x`: the load of `w[2]` in the loop fails, at line 39 of
    // normalize.ir, in the forward pass as in the primal.
    let file = example("normalize.ir");
    for engine in ["jit", "interp"] {
        let run = cli(&[
            "grad",
            &shown(&file),
            "--func",
            "normalize",
            "--args",
            "[[1, 2, 3], [1, 2]]",
            "--engine",
            engine,
        ]);
        user_error(
            &run,
            &format!(
                "{}:39:5: error: in @normalize.fwd, load of %w: index 2 out of bounds for length 2",
                shown(&file)
            ),
        );
    }
}

/// A function that never ends.
const SPIN: &str = "func @spin(%x: f64) -> f64 {
entry:
    jump head
head:
    %y = phi f64 [entry: %x, head: %y1]
    %y1 = fmul %y, 1.0000001
    jump head
}
";

#[test]
fn an_endless_loop_is_bounded_by_timeout_on_both_engines_and_by_fuel_on_the_interpreter() {
    let file = temp_file("cli-spin.ir", SPIN);
    let f = shown(&file);
    for cmd in ["run", "grad"] {
        for engine in ["jit", "interp"] {
            let start = std::time::Instant::now();
            let run = cli(&[
                cmd,
                &f,
                "--func",
                "spin",
                "--args",
                "[1.0]",
                "--engine",
                engine,
                "--timeout",
                "0.5",
            ]);
            user_error(
                &run,
                "error: gave up after 0.5 s (--timeout): the command had not finished",
            );
            assert!(start.elapsed().as_secs_f64() < 30.0, "{cmd} {engine}");
        }
    }
    // The loop's back edge is line 7.
    user_error(
        &cli(&[
            "run", &f, "--func", "spin", "--args", "[1.0]", "--engine", "interp", "--fuel", "1000",
        ]),
        &format!("{f}:7:5: error: in @spin, jump: out of fuel after 1000 statements"),
    );
    user_error(
        &cli(&[
            "grad", &f, "--func", "spin", "--args", "[1.0]", "--engine", "interp", "--fuel", "1000",
        ]),
        &format!("{f}:7:5: error: in @spin.fwd, jump: out of fuel after 1000 statements"),
    );
    // Fuel is the interpreter's; the JIT's bound is the time.
    let run = cli(&[
        "run", &f, "--func", "spin", "--args", "[1.0]", "--fuel", "10",
    ]);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(
        run.stderr.contains("--fuel bounds the interpreter"),
        "{run:?}"
    );
    for bad in ["0", "-1", "inf", "soon"] {
        usage_error(&cli(&[
            "run",
            &f,
            "--func",
            "spin",
            "--args",
            "[1.0]",
            "--timeout",
            bad,
        ]));
    }
    // A function that ends is not disturbed.
    let rosenbrock = example("rosenbrock.ir");
    let run = cli(&[
        "run",
        &shown(&rosenbrock),
        "--func",
        "rosenbrock",
        "--args",
        "[[0.1, 0.2, 0.3]]",
        "--timeout",
        "60",
        "--engine",
        "interp",
        "--fuel",
        "100000",
    ]);
    assert_eq!(json_out(&run)["value"], serde_json::json!(11.82));
}

/// A straight-line function of `n` statements: `%v0 = x + 0`, then `n - 2`
/// multiplications by 1.5, and `ret`.
fn straight_line(n: usize) -> String {
    let mut t = String::from("func @long(%x: f64) -> f64 {\nentry:\n    %v0 = fadd %x, 0.0\n");
    for k in 1..n - 1 {
        t.push_str(&format!("    %v{k} = fmul %v{}, 1.5\n", k - 1));
    }
    t.push_str(&format!("    ret %v{}\n}}\n", n - 2));
    t
}

#[test]
fn functions_over_max_insts_are_refused_where_the_limit_is_crossed() {
    let file = temp_file("cli-long.ir", &straight_line(40));
    let f = shown(&file);
    // 40 statements: refused under --max-insts 39 (at the 40th, line 42, `ret`),
    // in every command, the option before or after the command.
    let msg = format!(
        "{f}:42:5: error: @long has more than 39 instructions, the most a function may \
         have (ParseOptions::max_insts; the command line's --max-insts); the text is not \
         read further"
    );
    user_error(&cli(&["check", &f, "--max-insts", "39"]), &msg);
    user_error(&cli(&["--max-insts", "39", "check", &f]), &msg);
    for cmd in ["run", "grad"] {
        for engine in ["jit", "interp"] {
            let run = cli(&[
                cmd,
                &f,
                "--func",
                "long",
                "--args",
                "[1.0]",
                "--engine",
                engine,
                "--max-insts",
                "39",
            ]);
            user_error(&run, &msg);
        }
    }
    // At 40 it runs: 1.5^38 x, whose derivative is 1.5^38.
    let want = 1.5f64.powi(38);
    let run = cli(&[
        "grad",
        &f,
        "--func",
        "long",
        "--args",
        "[1.0]",
        "--max-insts",
        "40",
    ]);
    let out = json_out(&run);
    assert!(json_close(&out["value"], &want.into()), "{out}");
    assert!(json_close(&out["gradient"][0], &want.into()), "{out}");
    // The default is stated in --help.
    let help = cli(&["check", "--help"]);
    assert!(help.stdout.contains("--max-insts <N>"), "{}", help.stdout);
    assert!(help.stdout.contains("[default: 200000]"), "{}", help.stdout);
}

/// Before, with a 100 KB main-thread stack, `grad` of a function of 200 parameters
/// overflowed the stack inside Cranelift and the process aborted; the command now
/// runs on a thread with a stack of its own.
#[cfg(target_os = "linux")]
#[test]
fn the_shells_stack_limit_does_not_decide_what_compiles() {
    let n = 200;
    let params: Vec<String> = (0..n).map(|i| format!("%p{i}: f64")).collect();
    let mut t = format!(
        "func @f({}) -> f64 {{\nentry:\n    %s0 = fadd %p0, %p1\n",
        params.join(", ")
    );
    for i in 1..n - 1 {
        t.push_str(&format!("    %s{i} = fmul %s{}, %p{}\n", i - 1, i + 1));
    }
    t.push_str(&format!("    ret %s{}\n}}\n", n - 2));
    let file = temp_file("cli-200-params.ir", &t);
    let args = format!("[{}]", vec!["1.0"; n].join(", "));
    for cmd in ["run", "grad"] {
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!(
                "ulimit -s 100 && exec \"$0\" {cmd} \"$1\" --func f --args \"$2\""
            ))
            .arg(env!("CARGO_BIN_EXE_gradlift"))
            .arg(&file)
            .arg(&args)
            .output()
            .expect("sh runs");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(0), "{cmd}: {out:?}");
        let v: Value = serde_json::from_str(&stdout).expect("JSON");
        // (p0 + p1) p2 ... p199 at all ones: 2; d/dp0 = 1, d/dp2 = 2.
        assert_eq!(v["value"], 2.0, "{v}");
        if cmd == "grad" {
            assert_eq!(v["gradient"][0], 1.0, "{v}");
            assert_eq!(v["gradient"][2], 2.0, "{v}");
        }
    }
}

/// A checkpointed loop: the budget picks the snapshots, `--time` reports the steps
/// run again (the binomial minimum) and a tape that holds the snapshots, not the
/// steps; the gradient is the one without the marker, on both engines; `dump`
/// shows the loop's rule.
#[test]
fn grad_with_a_checkpointed_loop_and_a_budget() {
    let marked = "func @f(%x: f64, %n: i64) -> f64 {
entry:
    jump head
head:
    %i = phi i64 [entry: 0, body: %i1]
    %a = phi f64 [entry: %x, body: %a1]
    checkpoint_loop 0
    %more = icmp lt %i, %n
    br %more, body, exit
body:
    %s = sin %a
    %h = fmul %s, 0.01
    %a1 = fadd %a, %h
    %i1 = iadd %i, 1
    jump head
exit:
    ret %a
}
";
    let file = temp_file("cli-checkpoint.ir", marked);
    let plain = temp_file(
        "cli-checkpoint-plain.ir",
        &marked.replace("    checkpoint_loop 0\n", ""),
    );
    for engine in ["interp", "jit"] {
        let run = |f: &Path, extra: &[&str]| {
            let f = shown(f);
            let mut argv = vec![
                "grad",
                &f,
                "--func",
                "f",
                "--args",
                "[0.3, 100]",
                "--engine",
                engine,
                "--time",
                "2",
            ];
            argv.extend_from_slice(extra);
            json_out(&cli(&argv))
        };
        // 72 bytes: 3 snapshots of (a, step, level).
        let got = run(&file, &["--checkpoint-bytes", "72"]);
        let want = run(&plain, &[]);
        assert_eq!(got["value"], want["value"], "{engine}");
        assert_eq!(got["gradient"], want["gradient"], "{engine}");
        // Revolve's minimum for 100 steps and 3 snapshots: r = 7 (C(9, 3) < 100 <=
        // C(10, 3)), 7 * 100 - C(10, 4), less the 99 steps of the forward sweep.
        assert_eq!(
            got["time"]["recomputed_steps"],
            700 - 210 - 99,
            "{engine}: {got}"
        );
        assert!(got["gradient"][0].as_f64().unwrap() > 0.5, "{got}");
        let (peak, unchecked) = (
            got["time"]["tape_bytes"].as_u64().unwrap(),
            want["time"]["tape_bytes"].as_u64().unwrap(),
        );
        assert!(peak < 300 && unchecked >= 800, "{peak} {unchecked}");
        // Without the marker, no count.
        assert!(want["time"].get("recomputed_steps").is_none(), "{want}");
    }
    let dump = cli(&[
        "dump",
        &shown(&file),
        "--func",
        "f",
        "--stage",
        "forward",
        "--checkpoint-bytes",
        "72",
    ]);
    assert_eq!(dump.code, 0, "{dump:?}");
    for name in ["@f.fwd", "@f.loop1.fwd", "@f.step1.fwd", "@revolve.split"] {
        assert!(dump.stdout.contains(name), "{name}: {}", dump.stdout);
    }
}

/// Lazy derivation through the command line: a branch that calls a function
/// without a derivative runs while not taken, and fails with the derivation's
/// message, naming the call, when taken; both engines alike.
#[test]
fn grad_with_an_untaken_call_without_a_derivative() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("gradlift-tests");
    std::fs::create_dir_all(&dir).expect("temp dir");
    let file = dir.join("lazy.ir");
    std::fs::write(
        &file,
        "func @stair(%x: f64) -> f64 {\nentry:\n    %r = floor %x\n    ret %r\n}\n\
         func @bump(%s: mut [f64], %x: f64) -> f64 {\nentry:\n    store %s[0], %x\n    ret %x\n}\n\
         overlay @bump = @stair2\n\
         func @stair2(%s: mut [f64], %x: f64) -> f64 {\nentry:\n    ret %x\n}\n\
         func @f(%x: f64, %k: i64) -> f64 {\nentry:\n    %buf = alloc f64, 1\n    %far = icmp gt %k, 0\n    br %far, far, near\n\
         far:\n    %b = call @bump(%buf, %x)\n    jump done\n\
         near:\n    %c = fmul %x, %x\n    jump done\n\
         done:\n    %r = phi f64 [far: %b, near: %c]\n    ret %r\n}\n",
    )
    .expect("write");
    for engine in ["jit", "interp"] {
        let f = shown(&file);
        let grad = |args: &str| {
            cli(&[
                "grad", &f, "--func", "f", "--args", args, "--engine", engine,
            ])
        };
        let run = grad("[1.5, 0]");
        assert_eq!(run.code, 0, "{engine}: {run:?}");
        assert_eq!(json_out(&run)["gradient"][0], 3.0, "{engine}: {run:?}");
        let run = grad("[1.5, 1]");
        assert_eq!(run.code, 1, "{engine}: {run:?}");
        assert!(
            run.stderr.contains(
                "`%b = call @bump(%buf, %x)` at 22:5: the derivative of @bump is overlaid"
            ),
            "{engine}: {run:?}"
        );
    }
}
