//! `gradlift hvp` against its manual (`docs/cli.md`): the JSON printed, the
//! directions' and products' layout at widths 1 and N, the activities, both
//! engines, `--time`, and errors with their messages and exit statuses. Expected
//! gradients and Hessian-vector products are closed forms written here (second
//! derivatives computed by hand), not the library's other modes.

mod common;

use std::path::Path;

use common::{Run, gradlift, json_close, temp_file};
use serde_json::{Value, json};

/// The path as the CLI prints it in diagnostics.
fn shown(path: &Path) -> String {
    path.display().to_string()
}

/// `gradlift hvp FILE --func F --args ARGS --direction DIRECTION EXTRA...`.
fn hvp(file: &Path, func: &str, args: &str, direction: &str, extra: &[&str]) -> Run {
    let file = shown(file);
    let mut argv = vec![
        "hvp",
        &file,
        "--func",
        func,
        "--args",
        args,
        "--direction",
        direction,
    ];
    argv.extend_from_slice(extra);
    gradlift(&argv)
}

/// The same on the interpreter.
fn hvp_interp(file: &Path, func: &str, args: &str, direction: &str, extra: &[&str]) -> Run {
    let mut extra = extra.to_vec();
    extra.extend_from_slice(&["--engine", "interp"]);
    hvp(file, func, args, direction, &extra)
}

/// A successful run's output, parsed; it is one line, and its keys are those of
/// the manual, in order.
#[track_caller]
fn json_out(run: &Run) -> Value {
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(run.stderr, "", "{run:?}");
    assert!(
        run.stdout.ends_with('\n') && run.stdout.lines().count() == 1,
        "{run:?}"
    );
    let out: Value = serde_json::from_str(&run.stdout).expect("valid JSON");
    let keys: Vec<&String> = out.as_object().expect("an object").keys().collect();
    assert_eq!(keys[..3], ["value", "gradient", "hvp"], "{run:?}");
    out
}

/// A user error (status 1): nothing on stdout, and exactly `expected` on stderr.
#[track_caller]
fn user_error(run: &Run, expected: &str) {
    assert_eq!(run.code, 1, "{run:?}");
    assert_eq!(run.stdout, "", "{run:?}");
    assert_eq!(run.stderr, format!("{expected}\n"), "{run:?}");
}

/// A usage error (status 2) as clap reports it.
#[track_caller]
fn usage_error(run: &Run) {
    assert_eq!(run.code, 2, "{run:?}");
    assert_eq!(run.stdout, "", "{run:?}");
    assert!(run.stderr.starts_with("error:"), "{run:?}");
}

#[track_caller]
fn assert_close(got: &Value, expected: &Value) {
    assert!(json_close(got, expected), "got {got}, expected {expected}");
}

/// `f(x, y) = x² y`: the gradient `(2xy, x²)`, the Hessian `[[2y, 2x], [2x, 0]]`,
/// so `H v = (2y vx + 2x vy, 2x vx)`.
const X2Y: &str = "func @f(%x: f64, %y: f64) -> f64 {
entry:
    %xx = fmul %x, %x
    %xxy = fmul %xx, %y
    ret %xxy
}
";

/// `c(x, k) = k Σ x_i³` (`k` an integer): the gradient `3 k x_i²`, the Hessian
/// `diag(6 k x_i)`.
const CUBES: &str = "func @c(%x: [f64], %k: i64) -> f64 {
entry:
    %len = len %x
    %kf = cast f64 %k
    jump head
head:
    %i = phi i64 [entry: 0, body: %i1]
    %acc = phi f64 [entry: 0.0, body: %acc1]
    %more = icmp lt %i, %len
    br %more, body, exit
body:
    %xi = load %x[%i]
    %x2 = fmul %xi, %xi
    %x3 = fmul %x2, %xi
    %acc1 = fadd %acc, %x3
    %i1 = iadd %i, 1
    jump head
exit:
    %r = fmul %kf, %acc
    ret %r
}
";

/// `g(x, a) = a Σ sin x_i`: the gradient `(a cos x_i, Σ sin x_i)`; the Hessian
/// has `-a sin x_i` on the diagonal of the `x` block, `cos x_i` between `x_i` and
/// `a`, and 0 for `a` with itself.
const SCALED_SINES: &str = "func @g(%x: [f64], %a: f64) -> f64 {
entry:
    %len = len %x
    jump head
head:
    %i = phi i64 [entry: 0, body: %i1]
    %acc = phi f64 [entry: 0.0, body: %acc1]
    %more = icmp lt %i, %len
    br %more, body, exit
body:
    %xi = load %x[%i]
    %s = sin %xi
    %acc1 = fadd %acc, %s
    %i1 = iadd %i, 1
    jump head
exit:
    %r = fmul %a, %acc
    ret %r
}
";

/// The JSON text of a list of floats, each written so it reads back exactly.
fn floats(xs: &[f64]) -> String {
    let items: Vec<String> = xs.iter().map(|x| format!("{x:?}")).collect();
    format!("[{}]", items.join(", "))
}

#[test]
fn hvp_of_x_squared_y_is_the_closed_form() {
    let file = temp_file("hvp-x2y.ir", X2Y);
    for (x, y, vx, vy) in [
        (3.0, 2.0, 1.0, 0.0),
        (3.0, 2.0, 0.0, 1.0),
        (-1.5, 0.25, 0.5, -2.0),
        (0.1, -4.0, 3.0, 7.0),
    ] {
        let args = floats(&[x, y]);
        let v = floats(&[vx, vy]);
        for run in [
            hvp(&file, "f", &args, &v, &[]),
            hvp_interp(&file, "f", &args, &v, &[]),
        ] {
            let out = json_out(&run);
            assert_close(&out["value"], &json!(x * x * y));
            assert_close(&out["gradient"], &json!([2.0 * x * y, x * x]));
            assert_close(
                &out["hvp"],
                &json!([2.0 * y * vx + 2.0 * x * vy, 2.0 * x * vx]),
            );
        }
    }
    // Exactly, at (3, 2) along (1, 0): the example of the manual.
    let run = hvp(&file, "f", "[3, 2]", "[1, 0]", &[]);
    assert_eq!(
        run.stdout,
        "{\"value\": 18.0, \"gradient\": [12.0, 9.0], \"hvp\": [4.0, 6.0]}\n"
    );
}

#[test]
fn hvp_through_a_loop_over_a_dup_slice_is_diag_6x() {
    let file = temp_file("hvp-cubes.ir", CUBES);
    let x = [0.5, -1.0, 2.0, 3.0];
    let v = [1.0, 2.0, -0.5, 0.25];
    let k = 2.0;
    let args = format!("[{}, 2]", floats(&x));
    let direction = format!("[{}, null]", floats(&v));
    for extra in [
        &[][..],
        &["--engine", "interp"],
        &["--activity", "dup,const"],
    ] {
        let out = json_out(&hvp(&file, "c", &args, &direction, extra));
        let value: f64 = k * x.iter().map(|x| x * x * x).sum::<f64>();
        assert_close(&out["value"], &json!(value));
        let grad: Vec<f64> = x.iter().map(|x| 3.0 * k * x * x).collect();
        assert_close(&out["gradient"], &json!([grad, null]));
        let hv: Vec<f64> = x.iter().zip(&v).map(|(x, v)| 6.0 * k * x * v).collect();
        assert_close(&out["hvp"], &json!([hv, null]));
    }
}

#[test]
fn a_dup_slice_and_an_active_scalar_mix_in_the_hessian() {
    let file = temp_file("hvp-sines.ir", SCALED_SINES);
    let x = [0.3, -1.2, 2.0];
    let a = 1.5;
    let (vx, va) = ([0.5, 1.0, -2.0], 0.75);
    let out = json_out(&hvp(
        &file,
        "g",
        &format!("[{}, {a:?}]", floats(&x)),
        &format!("[{}, {va:?}]", floats(&vx)),
        &[],
    ));
    let sum_sin: f64 = x.iter().map(|x| x.sin()).sum();
    assert_close(&out["value"], &json!(a * sum_sin));
    let gx: Vec<f64> = x.iter().map(|x| a * x.cos()).collect();
    assert_close(&out["gradient"], &json!([gx, sum_sin]));
    // (H v)_x_i = -a sin x_i vx_i + cos x_i va; (H v)_a = Σ cos x_i vx_i.
    let hx: Vec<f64> = x
        .iter()
        .zip(&vx)
        .map(|(x, v)| -a * x.sin() * v + x.cos() * va)
        .collect();
    let ha: f64 = x.iter().zip(&vx).map(|(x, v)| x.cos() * v).sum();
    assert_close(&out["hvp"], &json!([hx, ha]));
}

#[test]
fn width_2_is_two_width_1_runs_lane_by_lane() {
    let file = temp_file("hvp-width-x2y.ir", X2Y);
    let d1 = [1.0, -0.5];
    let d2 = [0.25, 3.0];
    for engine in ["jit", "interp"] {
        let extra = ["--engine", engine];
        let one = json_out(&hvp(&file, "f", "[1.5, -2]", &floats(&d1), &extra));
        let two = json_out(&hvp(&file, "f", "[1.5, -2]", &floats(&d2), &extra));
        let both = json_out(&hvp(
            &file,
            "f",
            "[1.5, -2]",
            &format!("[{}, {}]", floats(&[d1[0], d2[0]]), floats(&[d1[1], d2[1]])),
            &["--engine", engine, "--width", "2"],
        ));
        assert_eq!(both["value"], one["value"]);
        assert_eq!(both["gradient"], one["gradient"]);
        for p in 0..2 {
            assert_eq!(
                both["hvp"][p],
                json!([one["hvp"][p], two["hvp"][p]]),
                "{engine}"
            );
        }
    }
    // A dup slice: lane j of element i at i*N+j.
    let file = temp_file("hvp-width-cubes.ir", CUBES);
    let x = "[[1, 2, 3], 1]";
    let lanes = |d: &Value| -> Vec<Value> { d.as_array().expect("an array").clone() };
    let e1 = json_out(&hvp(&file, "c", x, "[[1, 0, 2], null]", &[]));
    let e2 = json_out(&hvp(&file, "c", x, "[[0, -1, 0.5], null]", &[]));
    let both = json_out(&hvp(
        &file,
        "c",
        x,
        "[[1, 0, 0, -1, 2, 0.5], null]",
        &["--width", "2"],
    ));
    let (l1, l2) = (lanes(&e1["hvp"][0]), lanes(&e2["hvp"][0]));
    let interleaved: Vec<Value> = l1
        .iter()
        .zip(&l2)
        .flat_map(|(a, b)| [a.clone(), b.clone()])
        .collect();
    assert_eq!(both["hvp"], json!([interleaved, null]));
    assert_eq!(both["gradient"], e1["gradient"]);
    // The closed form of the lanes: 6 x_i v_i.
    assert_eq!(both["hvp"][0], json!([6.0, 0.0, 0.0, -12.0, 36.0, 9.0]));
}

#[test]
fn both_engines_print_the_same_bytes() {
    let x2y = temp_file("hvp-engines-x2y.ir", X2Y);
    let cubes = temp_file("hvp-engines-cubes.ir", CUBES);
    let sines = temp_file("hvp-engines-sines.ir", SCALED_SINES);
    let cases: Vec<(&Path, &str, &str, &str, Vec<&str>)> = vec![
        (&x2y, "f", "[3, 2]", "[1, 0]", vec![]),
        (
            &x2y,
            "f",
            "[0.3, 0.7]",
            "[[1, 2, 3], [4, 5, 6]]",
            vec!["--width", "3"],
        ),
        (
            &x2y,
            "f",
            "[3, 2]",
            "[1, null]",
            vec!["--activity", "active,const"],
        ),
        (
            &cubes,
            "c",
            "[[0.1, 0.2, 0.3], 3]",
            "[[1, 2, 3], null]",
            vec![],
        ),
        (
            &sines,
            "g",
            "[[0.1, 0.2], 2]",
            "[[1, 0, 0, 1], [0.5, -0.5]]",
            vec!["--width", "2"],
        ),
        (&x2y, "f", "[\"inf\", 1]", "[1, \"nan\"]", vec![]),
        // Errors read alike too.
        (&x2y, "f", "[1, 2]", "[1]", vec![]),
        (&cubes, "c", "[[1, 2], 1]", "[[1], null]", vec![]),
        (
            &x2y,
            "f",
            "[1, 2]",
            "[1, 2]",
            vec!["--activity", "active,const"],
        ),
    ];
    for (file, func, args, direction, extra) in cases {
        let interp = hvp_interp(file, func, args, direction, &extra);
        let jit = hvp(file, func, args, direction, &extra);
        assert_eq!(
            (jit.code, &jit.stdout, &jit.stderr),
            (interp.code, &interp.stdout, &interp.stderr),
            "@{func} {args} {direction} {extra:?}"
        );
    }
}

#[test]
fn const_parameters_print_null_and_take_null() {
    let file = temp_file("hvp-const.ir", X2Y);
    // x active, y const: H restricted to x is 2y.
    let out = json_out(&hvp(
        &file,
        "f",
        "[3, 2]",
        "[0.5, null]",
        &["--activity", "active,const"],
    ));
    assert_eq!(
        out,
        json!({"value": 18.0, "gradient": [12.0, null], "hvp": [2.0, null]})
    );
    // x const, y active: f is linear in y, so H v is 0.
    let out = json_out(&hvp(
        &file,
        "f",
        "[3, 2]",
        "[null, 5]",
        &["--activity", "const,active"],
    ));
    assert_eq!(
        out,
        json!({"value": 18.0, "gradient": [null, 9.0], "hvp": [null, 0.0]})
    );
    // Integers are const by default.
    let cubes = temp_file("hvp-const-cubes.ir", CUBES);
    let out = json_out(&hvp(&cubes, "c", "[[1], 4]", "[[1], null]", &[]));
    assert_eq!(
        out,
        json!({"value": 4.0, "gradient": [[12.0], null], "hvp": [[24.0], null]})
    );
    // Everything const.
    let out = json_out(&hvp(
        &file,
        "f",
        "[3, 2]",
        "[null, null]",
        &["--activity", "const,const"],
    ));
    assert_eq!(
        out,
        json!({"value": 18.0, "gradient": [null, null], "hvp": [null, null]})
    );
}

#[test]
fn directions_of_the_wrong_count_or_shape_are_refused_by_the_library() {
    let file = temp_file("hvp-shape.ir", X2Y);
    user_error(
        &hvp(&file, "f", "[3, 2]", "[1]", &[]),
        "error: @f takes 2 parameters, given 1 direction (one per parameter, `None` for the `const` ones)",
    );
    user_error(
        &hvp(&file, "f", "[3, 2]", "[1, 2, 3]", &[]),
        "error: @f takes 2 parameters, given 3 directions (one per parameter, `None` for the `const` ones)",
    );
    user_error(
        &hvp(&file, "f", "[3, 2]", "[1, null]", &[]),
        "error: parameter 2 of @f is `active`: it needs a direction",
    );
    user_error(
        &hvp(
            &file,
            "f",
            "[3, 2]",
            "[1, 2]",
            &["--activity", "active,const"],
        ),
        "error: parameter 2 of @f is `const`: it takes no direction (give `None`)",
    );
    user_error(
        &hvp(&file, "f", "[3, 2]", "[1, [1, 2]]", &[]),
        "error: the direction of parameter 2 of @f must be an f64, given a [f64] of length 2",
    );
    // A width-1 direction at width 2.
    user_error(
        &hvp(&file, "f", "[3, 2]", "[1, 2]", &["--width", "2"]),
        "error: the direction of parameter 1 of @f must be a [f64] of length 2 (its 2 lanes), given an f64",
    );
    let cubes = temp_file("hvp-shape-cubes.ir", CUBES);
    user_error(
        &hvp(&cubes, "c", "[[1, 2, 3], 1]", "[[1, 1], null]", &[]),
        "error: the direction of parameter 1 of @c must be a [f64] of length 3, given a [f64] of length 2",
    );
}

#[test]
fn directions_that_are_not_json_numbers_are_refused_by_the_command_line() {
    let file = temp_file("hvp-json.ir", X2Y);
    user_error(
        &hvp(&file, "f", "[3, 2]", "[1, 0", &[]),
        "error: --direction is not valid JSON: EOF while parsing a list at line 1 column 5",
    );
    user_error(
        &hvp(&file, "f", "[3, 2]", "{}", &[]),
        "error: --direction must be a JSON array with one element (a direction or null) per \
         parameter of @f (%x: f64, %y: f64), found an object",
    );
    user_error(
        &hvp(&file, "f", "[3, 2]", "[1, true]", &[]),
        "error: --direction: the direction of argument 2 (%y: f64) must be a number, an \
         array of numbers or null, found true",
    );
}

#[test]
fn forward_mode_words_and_bad_widths_are_usage_errors() {
    let file = temp_file("hvp-usage.ir", X2Y);
    let f = shown(&file);
    let base = ["hvp", f.as_str(), "--func", "f", "--args", "[2, 1]"];
    let with = |extra: &[&str]| {
        let mut argv: Vec<&str> = base.to_vec();
        argv.extend_from_slice(extra);
        gradlift(&argv)
    };
    // Neither or both of --direction and --direction-file.
    usage_error(&with(&[]));
    usage_error(&with(&[
        "--direction",
        "[1, 2]",
        "--direction-file",
        "d.json",
    ]));
    // `dual` is jvp's word, not hvp's.
    let run = with(&["--direction", "[1, 2]", "--activity", "dual,dual"]);
    usage_error(&run);
    assert!(
        run.stderr.starts_with(
            "error: invalid value 'dual,dual' for '--activity <LIST>': `dual` is not an \
             activity for a parameter (expected one of: active, dup, dupnoneed, const)"
        ),
        "{run:?}"
    );
    usage_error(&with(&[
        "--direction",
        "[1, 2]",
        "--activity",
        "active,active->dual",
    ]));
    // Widths out of 1..=64, fuel with the JIT, --tangents.
    usage_error(&with(&["--direction", "[1, 2]", "--width", "0"]));
    usage_error(&with(&["--direction", "[1, 2]", "--width", "65"]));
    usage_error(&with(&["--direction", "[1, 2]", "--fuel", "10"]));
    usage_error(&with(&["--tangents", "[1, 2]"]));
    // 64 is the widest.
    let lanes = format!("[{0}, {0}]", floats(&[1.0; 64]));
    let out = json_out(&with(&["--direction", &lanes, "--width", "64"]));
    assert_eq!(out["hvp"][0].as_array().map(Vec::len), Some(64));
}

#[test]
fn direction_and_args_come_from_files() {
    let file = temp_file("hvp-files.ir", X2Y);
    let args = temp_file("hvp-files-args.json", "[3, 2]");
    let dir = temp_file("hvp-files-dir.json", "[0, 1]\n");
    let run = gradlift(&[
        "hvp",
        &shown(&file),
        "--func",
        "f",
        "--args-file",
        &shown(&args),
        "--direction-file",
        &shown(&dir),
    ]);
    assert_eq!(
        json_out(&run),
        json!({"value": 18.0, "gradient": [12.0, 9.0], "hvp": [6.0, 0.0]})
    );
}

#[test]
fn time_adds_the_medians_and_the_compile_time_on_the_jit() {
    let file = temp_file("hvp-time.ir", CUBES);
    let args = "[[0.5, 1.0], 2]";
    let direction = "[[1, 1], null]";
    let plain = json_out(&hvp(&file, "c", args, direction, &[]));
    for engine in ["interp", "jit"] {
        let out = json_out(&hvp(
            &file,
            "c",
            args,
            direction,
            &["--time", "5", "--engine", engine],
        ));
        for key in ["value", "gradient", "hvp"] {
            assert_eq!(out[key], plain[key], "{engine} {key}");
        }
        let time = out["time"].as_object().expect("a time object");
        let keys: Vec<&String> = time.keys().collect();
        if engine == "jit" {
            assert_eq!(keys, ["primal_ns", "hvp_ns", "compile_ms"]);
            assert!(
                time["compile_ms"].as_f64().is_some_and(|ms| ms > 0.0),
                "{out}"
            );
        } else {
            assert_eq!(keys, ["primal_ns", "hvp_ns"]);
        }
        assert!(
            time["primal_ns"].is_u64() && time["hvp_ns"].is_u64(),
            "{out}"
        );
    }
}

#[test]
fn fuel_bounds_the_interpreter() {
    let file = temp_file("hvp-fuel.ir", CUBES);
    let run = hvp_interp(
        &file,
        "c",
        "[[1, 2, 3, 4, 5, 6, 7, 8], 1]",
        "[[1, 1, 1, 1, 1, 1, 1, 1], null]",
        &["--fuel", "20"],
    );
    assert_eq!(run.code, 1, "{run:?}");
    assert_eq!(run.stdout, "", "{run:?}");
    assert!(
        run.stderr.contains("out of fuel after 20 statements"),
        "{run:?}"
    );
}

#[test]
fn help_documents_hvp() {
    let run = gradlift(&["--help"]);
    assert_eq!(run.code, 0);
    assert!(run.stdout.contains("hvp"), "{run:?}");
    let run = gradlift(&["hvp", "--help"]);
    assert_eq!(run.code, 0);
    for option in [
        "--func",
        "--args",
        "--args-file",
        "--direction",
        "--direction-file",
        "--activity",
        "--width",
        "--engine",
        "--opt",
        "--time",
        "--fuel",
        "--timeout",
        "dupnoneed",
    ] {
        assert!(run.stdout.contains(option), "{option}: {run:?}");
    }
}
