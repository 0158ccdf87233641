//! `gradlift jvp` and `gradlift dump --stage jvp` against their manual
//! (`docs/cli.md`): the JSON printed, the tangents' layout at widths 1 and N, the
//! activities, both engines, `--time`, and every error with its message and exit
//! status. Expected values and tangents are closed forms written here (directional
//! derivatives computed by hand), not the library's other modes.

mod common;

use std::path::Path;

use common::{Run, example, gradlift, json_close, root, shell_words, temp_file, transcripts};
use serde_json::{Value, json};

/// The path as the CLI prints it in diagnostics.
fn shown(path: &Path) -> String {
    path.display().to_string()
}

/// `gradlift jvp FILE --func F --args ARGS --tangents TANGENTS EXTRA...`.
fn jvp(file: &Path, func: &str, args: &str, tangents: &str, extra: &[&str]) -> Run {
    let file = shown(file);
    let mut argv = vec![
        "jvp",
        &file,
        "--func",
        func,
        "--args",
        args,
        "--tangents",
        tangents,
    ];
    argv.extend_from_slice(extra);
    gradlift(&argv)
}

/// The same on the interpreter.
fn jvp_interp(file: &Path, func: &str, args: &str, tangents: &str, extra: &[&str]) -> Run {
    let mut extra = extra.to_vec();
    extra.extend_from_slice(&["--engine", "interp"]);
    jvp(file, func, args, tangents, &extra)
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
    assert_eq!(
        keys[..4],
        ["value", "tangent", "args", "tangents"],
        "{run:?}"
    );
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

/// `f(x, y) = x*x + 3*y`: the tangent along `(dx, dy)` is `2x dx + 3 dy`.
const SQUARE_PLUS: &str = "func @f(%x: f64, %y: f64) -> f64 {
entry:
    %xx = fmul %x, %x
    %y3 = fmul 3.0, %y
    %r = fadd %xx, %y3
    ret %r
}
";

/// `s(x, y) = sin(x y)`: the tangent is `cos(x y) (y dx + x dy)`.
const SIN_XY: &str = "func @s(%x: f64, %y: f64) -> f64 {
entry:
    %xy = fmul %x, %y
    %r = sin %xy
    ret %r
}
";

/// `g(x, y, n)`: for each i, `y[i] = x[i] sin x[i]`; returns `(Σ sin x[i], n)`. The
/// tangent of `y[i]` is `(sin x[i] + x[i] cos x[i]) dx[i]`, that of the sum
/// `Σ cos x[i] dx[i]`.
const SIN_LOOP: &str = "func @g(%x: [f64], %y: mut [f64], %n: i64) -> (f64, i64) {
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
    %sq = fmul %xi, %s
    store %y[%i], %sq
    %acc1 = fadd %acc, %s
    %i1 = iadd %i, 1
    jump head
exit:
    ret %acc, %n
}
";

/// The JSON text of a list of floats, each written so it reads back exactly.
fn floats(xs: &[f64]) -> String {
    let items: Vec<String> = xs.iter().map(|x| format!("{x:?}")).collect();
    format!("[{}]", items.join(", "))
}

#[test]
fn jvp_of_x_squared_plus_3y_is_the_closed_form() {
    let file = temp_file("jvp-square-plus.ir", SQUARE_PLUS);
    // The manual's example, byte for byte.
    let run = jvp(&file, "f", "[2, 1]", "[1, 0.5]", &[]);
    assert_eq!(
        (run.code, run.stdout.as_str(), run.stderr.as_str()),
        (
            0,
            "{\"value\": 7.0, \"tangent\": 5.5, \"args\": [null, null], \"tangents\": [null, null]}\n",
            ""
        )
    );
    for (x, y, dx, dy) in [
        (2.0, 1.0, 1.0, 0.0),
        (2.0, 1.0, 0.0, 1.0),
        (-1.5, 0.25, 0.3, -2.0),
        (0.1, -7.0, 1e-3, 1e3),
    ] {
        for engine in ["interp", "jit"] {
            let run = jvp(
                &file,
                "@f",
                &format!("[{x:?}, {y:?}]"),
                &format!("[{dx:?}, {dy:?}]"),
                &["--engine", engine],
            );
            let out = json_out(&run);
            assert_close(&out["value"], &json!(x * x + 3.0 * y));
            assert_close(&out["tangent"], &json!(2.0 * x * dx + 3.0 * dy));
            assert_eq!(out["args"], json!([null, null]));
            assert_eq!(out["tangents"], json!([null, null]));
        }
    }
}

#[test]
fn jvp_of_sin_is_the_closed_form() {
    let file = temp_file("jvp-sin.ir", SIN_XY);
    for (x, y, dx, dy) in [
        (0.5_f64, 2.0, 1.0, 0.0),
        (1.3, -0.7, 0.25, 4.0),
        (0.0, 3.0, 1.0, 1.0),
    ] {
        for engine in ["interp", "jit"] {
            let run = jvp(
                &file,
                "s",
                &format!("[{x:?}, {y:?}]"),
                &format!("[{dx:?}, {dy:?}]"),
                &["--engine", engine],
            );
            let out = json_out(&run);
            assert_close(&out["value"], &json!((x * y).sin()));
            assert_close(&out["tangent"], &json!((x * y).cos() * (y * dx + x * dy)));
        }
    }
}

#[test]
fn jvp_through_a_loop_writes_the_tangent_of_the_mut_slice() {
    let file = temp_file("jvp-sin-loop.ir", SIN_LOOP);
    let x = [0.5, 1.0, -2.0, 3.25];
    let dx = [1.0, 0.0, 2.0, -0.5];
    let dy0 = [5.0; 4]; // overwritten: the tangent of y's final contents
    for engine in ["interp", "jit"] {
        let run = jvp(
            &file,
            "g",
            &format!("[{}, [0, 0, 0, 0], 7]", floats(&x)),
            &format!("[{}, {}, null]", floats(&dx), floats(&dy0)),
            &["--engine", engine],
        );
        let out = json_out(&run);
        let sum: f64 = x.iter().map(|x| x.sin()).sum();
        assert_close(&out["value"], &json!([sum, 7]));
        let dsum: f64 = x.iter().zip(&dx).map(|(x, d)| x.cos() * d).sum();
        assert_close(&out["tangent"], &json!(dsum));
        let y: Vec<f64> = x.iter().map(|x| x * x.sin()).collect();
        assert_close(&out["args"], &json!([null, y, null]));
        let dy: Vec<f64> = x
            .iter()
            .zip(&dx)
            .map(|(x, d)| (x.sin() + x * x.cos()) * d)
            .collect();
        // The input's tangent comes back as given, the output's is computed.
        assert_close(&out["tangents"], &json!([dx, dy, null]));
    }
}

/// Lane j of a width-N run is, bit for bit, the width-1 run along the j-th
/// directions: the lanes of a scalar are an array, a slice's are interleaved
/// (lane j of element i at i*N+j).
#[test]
fn width_2_is_two_width_1_runs_lane_by_lane() {
    let file = temp_file("jvp-width-loop.ir", SIN_LOOP);
    let x = [0.5, 1.0, -2.0];
    let args = format!("[{}, [0, 0, 0], 7]", floats(&x));
    let d0 = [1.0, 0.0, 2.0];
    let d1 = [0.0, -1.5, 0.25];
    let y0 = [5.0, 6.0, 7.0];
    let y1 = [8.0, 9.0, 10.0];
    let interleave = |a: &[f64], b: &[f64]| -> Vec<f64> {
        a.iter().zip(b).flat_map(|(p, q)| [*p, *q]).collect()
    };
    for engine in ["interp", "jit"] {
        let one = |d: &[f64], y: &[f64]| {
            json_out(&jvp(
                &file,
                "g",
                &args,
                &format!("[{}, {}, null]", floats(d), floats(y)),
                &["--engine", engine],
            ))
        };
        let (a, b) = (one(&d0, &y0), one(&d1, &y1));
        let two = json_out(&jvp(
            &file,
            "g",
            &args,
            &format!(
                "[{}, {}, null]",
                floats(&interleave(&d0, &d1)),
                floats(&interleave(&y0, &y1))
            ),
            &["--width", "2", "--engine", engine],
        ));
        assert_eq!(two["value"], a["value"]);
        assert_eq!(two["args"], a["args"]);
        assert_eq!(two["tangent"], json!([a["tangent"], b["tangent"]]));
        let lanes = |v: &Value| -> Vec<f64> {
            v.as_array()
                .expect("an array")
                .iter()
                .map(|x| x.as_f64().expect("a number"))
                .collect()
        };
        let dy = interleave(&lanes(&a["tangents"][1]), &lanes(&b["tangents"][1]));
        assert_eq!(lanes(&two["tangents"][1]), dy, "{engine}");
        assert_eq!(two["tangents"][2], Value::Null);
    }
    // Scalars: each `dual` scalar takes an array of N numbers, and several float
    // results give an array of N lanes each.
    let file = temp_file("jvp-width-polar.ir", POLAR);
    let (r, t) = (2.0_f64, 0.5_f64);
    let args = format!("[{r:?}, {t:?}]");
    let a = json_out(&jvp(&file, "polar", &args, "[1, 0]", &[]));
    let b = json_out(&jvp(&file, "polar", &args, "[0, 1]", &[]));
    let two = json_out(&jvp(
        &file,
        "polar",
        &args,
        "[[1, 0], [0, 1]]",
        &["--width", "2"],
    ));
    assert_eq!(
        two["tangent"],
        json!([
            [a["tangent"][0], b["tangent"][0]],
            [a["tangent"][1], b["tangent"][1]]
        ])
    );
    // The Jacobian of (r cos t, r sin t), column by column.
    assert_close(
        &two["tangent"],
        &json!([[t.cos(), -r * t.sin()], [t.sin(), r * t.cos()]]),
    );
}

/// `polar(r, t) = (r cos t, r sin t)`: two float results.
const POLAR: &str = "func @polar(%r: f64, %t: f64) -> (f64, f64) {
entry:
    %c = cos %t
    %s = sin %t
    %x = fmul %r, %c
    %y = fmul %r, %s
    ret %x, %y
}
";

#[test]
fn several_float_results_print_one_tangent_each() {
    let file = temp_file("jvp-polar.ir", POLAR);
    let (r, t, dr, dt) = (2.0_f64, 0.5_f64, 0.25_f64, -1.0_f64);
    let out = json_out(&jvp(
        &file,
        "polar",
        &format!("[{r:?}, {t:?}]"),
        &format!("[{dr:?}, {dt:?}]"),
        &[],
    ));
    assert_close(&out["value"], &json!([r * t.cos(), r * t.sin()]));
    assert_close(
        &out["tangent"],
        &json!([
            dr * t.cos() - r * t.sin() * dt,
            dr * t.sin() + r * t.cos() * dt
        ]),
    );
}

#[test]
fn both_engines_print_the_same_bytes() {
    let loop_file = temp_file("jvp-engines-loop.ir", SIN_LOOP);
    let polar = temp_file("jvp-engines-polar.ir", POLAR);
    let sin = temp_file("jvp-engines-sin.ir", SIN_XY);
    let cases: Vec<(&Path, &str, &str, &str, Vec<&str>)> = vec![
        (&sin, "s", "[0.3, 0.7]", "[1, -1]", vec![]),
        (
            &polar,
            "polar",
            "[2, 0.5]",
            "[[1, 0, 3], [0, 1, 4]]",
            vec!["--width", "3"],
        ),
        (
            &loop_file,
            "g",
            "[[0.1, 0.2, 0.3], [0, 0, 0], 1]",
            "[[1, 2, 3, 4, 5, 6], [0, 0, 0, 0, 0, 0], null]",
            vec!["--width", "2"],
        ),
        (
            &loop_file,
            "g",
            "[[0.1, 0.2], [0, 0], 1]",
            "[[1, 2], null, null]",
            vec!["--activity", "dual,const,const->dualonly"],
        ),
        (&sin, "s", "[\"inf\", 1]", "[1, \"nan\"]", vec![]),
        // Errors read alike too.
        (&sin, "s", "[1, 2]", "[1]", vec![]),
        (
            &loop_file,
            "g",
            "[[1], [0], 1]",
            "[[1], [1, 2], null]",
            vec![],
        ),
    ];
    for (file, func, args, tangents, extra) in cases {
        let interp = jvp_interp(file, func, args, tangents, &extra);
        let jit = jvp(file, func, args, tangents, &extra);
        assert_eq!(
            (jit.code, &jit.stdout, &jit.stderr),
            (interp.code, &interp.stdout, &interp.stderr),
            "@{func} {args} {tangents} {extra:?}"
        );
    }
}

#[test]
fn dualonly_and_const_returns() {
    let file = temp_file("jvp-returns.ir", SQUARE_PLUS);
    // `dualonly`: no value; the tangent along (dx, 0) with y const: 2x dx.
    let run = jvp(
        &file,
        "f",
        "[2, 1]",
        "[1, null]",
        &["--activity", "dual,const->dualonly"],
    );
    assert_eq!(
        run.stdout,
        "{\"value\": null, \"tangent\": 4.0, \"args\": [null, null], \"tangents\": [null, null]}\n"
    );
    // `const`: the value and no tangent of the result.
    let run = jvp(
        &file,
        "f",
        "[2, 1]",
        "[1, 0.5]",
        &["--activity", "dual,dual->const"],
    );
    assert_eq!(
        run.stdout,
        "{\"value\": 7.0, \"tangent\": null, \"args\": [null, null], \"tangents\": [null, null]}\n"
    );
    // `->dual` alone is the list of a function without parameters (clap takes it
    // as the option's value).
    let none = temp_file(
        "jvp-no-params.ir",
        "func @k() -> f64 {\nentry:\n    ret 2.5\n}\n",
    );
    let out = json_out(&jvp(&none, "k", "[]", "[]", &["--activity", "->dual"]));
    assert_eq!((&out["value"], &out["tangent"]), (&json!(2.5), &json!(0.0)));
    // A `const` return still writes the tangents of a `dual` `mut` slice.
    let file = temp_file("jvp-returns-loop.ir", SIN_LOOP);
    for engine in ["interp", "jit"] {
        let out = json_out(&jvp(
            &file,
            "g",
            "[[1.5], [0], 3]",
            "[[2], [0], null]",
            &["--activity", "dual,dual,const->const", "--engine", engine],
        ));
        assert_eq!(out["tangent"], Value::Null);
        assert_close(&out["value"], &json!([1.5_f64.sin(), 3]));
        assert_close(
            &out["tangents"],
            &json!([[2.0], [(1.5_f64.sin() + 1.5 * 1.5_f64.cos()) * 2.0], null]),
        );
        // `dualonly` with the same activities.
        let out = json_out(&jvp(
            &file,
            "g",
            "[[1.5], [0], 3]",
            "[[2], [0], null]",
            &[
                "--activity",
                "dual,dual,const->dualonly",
                "--engine",
                engine,
            ],
        ));
        assert_eq!(out["value"], Value::Null);
        assert_close(&out["tangent"], &json!(1.5_f64.cos() * 2.0));
    }
    // No float result: no tangent, whatever the return.
    let file = temp_file(
        "jvp-int.ir",
        "func @n(%k: i64) -> i64 {\nentry:\n    ret %k\n}\n",
    );
    let out = json_out(&jvp(&file, "n", "[4]", "[null]", &[]));
    assert_eq!((&out["value"], &out["tangent"]), (&json!(4), &Value::Null));
}

#[test]
fn f32_and_non_finite_numbers_print_as_run_prints_them() {
    let file = temp_file(
        "jvp-f32.ir",
        "func @h(%x: f32) -> f32 {\nentry:\n    %r = fmul %x, %x\n    ret %r\n}\n\
         func @root(%x: f64) -> f64 {\nentry:\n    %r = sqrt %x\n    ret %r\n}\n",
    );
    // 2 x dx in f32, in its own shortest form.
    let out = json_out(&jvp(&file, "h", "[0.1]", "[1]", &[]));
    assert_eq!(
        (&out["value"], &out["tangent"]),
        (&json!(0.010000001), &json!(0.2))
    );
    let out = json_out(&jvp(&file, "h", "[0.1]", "[[1, 0.5]]", &["--width", "2"]));
    assert_eq!(out["tangent"], json!([0.2, 0.1]));
    // d sqrt(x) = dx / (2 sqrt x): infinite at 0.
    let out = json_out(&jvp(&file, "root", "[0]", "[1]", &[]));
    assert_eq!(
        (&out["value"], &out["tangent"]),
        (&json!(0.0), &json!("inf"))
    );
    let out = json_out(&jvp(&file, "root", "[4]", "[\"nan\"]", &[]));
    assert_eq!(
        (&out["value"], &out["tangent"]),
        (&json!(2.0), &json!("nan"))
    );
    let out = json_out(&jvp(&file, "root", "[4]", "[\"-inf\"]", &[]));
    assert_eq!(out["tangent"], json!("-inf"));
}

/// `fact(x, n) = x^n` by recursion: the tangent is `n x^(n-1) dx`.
const FACT: &str = "func @pow(%x: f64, %n: i64) -> f64 {
entry:
    %z = icmp le %n, 0
    br %z, base, rec
base:
    ret 1.0
rec:
    %n1 = isub %n, 1
    %p = call @pow(%x, %n1)
    %r = fmul %p, %x
    ret %r
}
";

#[test]
fn recursion_is_differentiated() {
    let file = temp_file("jvp-pow.ir", FACT);
    for engine in ["interp", "jit"] {
        let out = json_out(&jvp(
            &file,
            "pow",
            "[2, 5]",
            "[[1, 0.5], null]",
            &["--width", "2", "--engine", engine],
        ));
        assert_close(&out["value"], &json!(32.0));
        assert_close(&out["tangent"], &json!([80.0, 40.0]));
    }
}

#[test]
fn tangents_and_args_come_from_files() {
    let file = temp_file("jvp-files.ir", SQUARE_PLUS);
    let args = temp_file("jvp-files-args.json", "[2,\n 1]\n");
    let tangents = temp_file("jvp-files-tangents.json", "[\n  1,\n  0.5\n]\n");
    let run = gradlift(&[
        "jvp",
        &shown(&file),
        "--func",
        "f",
        "--args-file",
        &shown(&args),
        "--tangents-file",
        &shown(&tangents),
    ]);
    assert_close(&json_out(&run)["tangent"], &json!(5.5));
    // A JSON error in the file is reported at its position, as for --args-file.
    let bad = temp_file("jvp-files-bad.json", "[1,\n  0.5,,\n]\n");
    let run = gradlift(&[
        "jvp",
        &shown(&file),
        "--func",
        "f",
        "--args",
        "[2, 1]",
        "--tangents-file",
        &shown(&bad),
    ]);
    user_error(
        &run,
        &format!("{}:2:7: error: not valid JSON: expected value", shown(&bad)),
    );
    let run = gradlift(&[
        "jvp",
        &shown(&file),
        "--func",
        "f",
        "--args",
        "[2, 1]",
        "--tangents-file",
        "no/such/tangents.json",
    ]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(
        run.stderr
            .starts_with("error: cannot read no/such/tangents.json: "),
        "{run:?}"
    );
}

#[test]
fn time_adds_the_medians_and_the_compile_time_on_the_jit() {
    let file = temp_file("jvp-time.ir", SIN_LOOP);
    let args = "[[0.5, 1.0], [0, 0], 2]";
    let tangents = "[[1, 1], [0, 0], null]";
    let plain = json_out(&jvp(&file, "g", args, tangents, &[]));
    for engine in ["interp", "jit"] {
        let out = json_out(&jvp(
            &file,
            "g",
            args,
            tangents,
            &["--time", "5", "--engine", engine],
        ));
        // The printed results are those of the first call, as without --time.
        for key in ["value", "tangent", "args", "tangents"] {
            assert_eq!(out[key], plain[key], "{engine} {key}");
        }
        let time = out["time"].as_object().expect("a time object");
        let keys: Vec<&String> = time.keys().collect();
        if engine == "jit" {
            assert_eq!(keys, ["primal_ns", "jvp_ns", "compile_ms"]);
            assert!(
                time["compile_ms"].as_f64().is_some_and(|ms| ms > 0.0),
                "{out}"
            );
        } else {
            assert_eq!(keys, ["primal_ns", "jvp_ns"]);
        }
        assert!(
            time["primal_ns"].is_u64() && time["jvp_ns"].is_u64(),
            "{out}"
        );
    }
}

// The forward rule of examples/ir/decls.ir's @square is its `jvp` declaration.

#[test]
fn a_jvp_declaration_is_the_rule() {
    let decls = example("decls.ir");
    for (x, dx) in [(3.0_f64, 0.5_f64), (-1.5, 2.0)] {
        for engine in ["interp", "jit"] {
            let out = json_out(&jvp(
                &decls,
                "square",
                &format!("[{x:?}]"),
                &format!("[{dx:?}]"),
                &["--engine", engine],
            ));
            assert_close(&out["value"], &json!(x * x));
            assert_close(&out["tangent"], &json!(2.0 * x * dx));
        }
    }
    // The derived function calls @square for the value and @square_jvp for the
    // tangent.
    let run = dump(&decls, "square", &[]);
    assert_eq!(
        run.stdout,
        "func @square.jvp(%x: f64, %dx: f64) -> (f64, f64) {\nentry:\n    %0 = call \
         @square(%x)\n    %1 = call @square_jvp(%x, %dx)\n    ret %0, %1\n}\n"
    );
    // A rule that is not the derivative shows that it, not the body, is used: also
    // in a caller, after the optimiser (which does not inline it away).
    let file = temp_file(
        "jvp-rule-wins.ir",
        "func @sq(%x: f64) -> f64 {\nentry:\n    %r = fmul %x, %x\n    ret %r\n}\n\
         func @sq_jvp(%x: f64, %dx: f64) -> f64 {\nentry:\n    %t = fmul 100.0, %dx\n    ret %t\n}\n\
         func @h(%x: f64) -> f64 {\nentry:\n    %s = call @sq(%x)\n    %r = fadd %s, %x\n    ret %r\n}\n\
         jvp @sq = @sq_jvp\n",
    );
    for opt in ["default", "none"] {
        let out = json_out(&jvp(&file, "h", "[3]", "[1]", &["--opt", opt]));
        assert_eq!(
            (&out["value"], &out["tangent"]),
            (&json!(12.0), &json!(101.0))
        );
    }
    // An overlay: the value of @softplus, the tangent of @softplus_stable's body,
    // which is d/dx log(1 + e^x) = 1 / (1 + e^-x).
    let out = json_out(&jvp(&decls, "softplus", "[1.0]", "[1]", &[]));
    assert_close(&out["value"], &json!((1.0_f64.exp()).ln_1p()));
    assert_close(&out["tangent"], &json!(1.0 / (1.0 + (-1.0_f64).exp())));
    // nodiff: a zero tangent.
    let out = json_out(&jvp(&decls, "round_down", "[2.5]", "[1]", &[]));
    assert_eq!((&out["value"], &out["tangent"]), (&json!(2.0), &json!(0.0)));
}

// dump --stage jvp

/// `gradlift dump FILE --func F --stage jvp EXTRA...`.
fn dump(file: &Path, func: &str, extra: &[&str]) -> Run {
    let file = shown(file);
    let mut argv = vec!["dump", &file, "--func", func, "--stage", "jvp"];
    argv.extend_from_slice(extra);
    gradlift(&argv)
}

/// The manual's example (`docs/forward-mode.md`), byte for byte.
#[test]
fn dump_jvp_prints_the_derived_function() {
    let file = temp_file("jvp-dump-f.ir", SQUARE_PLUS);
    let run = dump(&file, "f", &[]);
    assert_eq!((run.code, run.stderr.as_str()), (0, ""), "{run:?}");
    assert_eq!(
        run.stdout,
        "func @f.jvp(%x: f64, %dx: f64, %y: f64, %dy: f64) -> (f64, f64) {
entry:
    %xx = fmul %x, %x
    %0 = fmul %dx, %x
    %dxx = fadd %0, %0
    %y3 = fmul 3.0, %y
    %dy3 = fmul %dy, 3.0
    %r = fadd %xx, %y3
    %dr = fadd %dxx, %dy3
    ret %r, %dr
}
"
    );
    // Activities and the width are in the name and the signature.
    let run = dump(
        &file,
        "f",
        &["--activity", "dual,const->dualonly", "--width", "2"],
    );
    assert!(
        run.stdout.starts_with(
            "func @f.jvp.DC_O.w2(%x: f64, %dx.0: f64, %dx.1: f64, %y: f64) -> (f64, f64) {"
        ),
        "{run:?}"
    );
}

/// The dump parses back: with the file it came from (a derived function may call the
/// file's functions), `gradlift check` accepts it, and the interpreter runs it to the
/// closed form.
#[test]
fn dump_jvp_parses_back() {
    let cases: [(&str, &str, &str, &[&str], usize); 4] = [
        ("jvp-dump-loop.ir", SIN_LOOP, "g", &["--width", "3"], 1),
        ("jvp-dump-pow.ir", FACT, "pow", &[], 1),
        (
            "jvp-dump-sin.ir",
            SIN_XY,
            "s",
            &["--activity", "const,dual->const"],
            1,
        ),
        ("jvp-dump-polar.ir", POLAR, "polar", &["--width", "2"], 1),
    ];
    for (name, text, func, extra, derived) in cases {
        let file = temp_file(name, text);
        let run = dump(&file, func, extra);
        assert_eq!((run.code, run.stderr.as_str()), (0, ""), "{run:?}");
        assert!(run.stdout.ends_with("}\n") && !run.stdout.ends_with("\n\n"));
        let both = temp_file(
            &format!("{name}.with-jvp.ir"),
            &format!("{text}\n{}", run.stdout),
        );
        let check = gradlift(&["check", &shown(&both)]);
        assert_eq!(
            (check.code, check.stdout.clone()),
            (0, format!("ok: {} functions\n", 1 + derived)),
            "{check:?}"
        );
    }
    // A derived function that calls its callees' derived functions: they follow it,
    // and it calls the file's @softplus for the value.
    let decls = example("decls.ir");
    let run = dump(&decls, "softplus", &[]);
    assert!(
        run.stdout.starts_with("func @softplus.jvp(")
            && run.stdout.contains("\n\nfunc @softplus_stable.jvp.D_O("),
        "{run:?}"
    );
    let text = std::fs::read_to_string(&decls).expect("decls.ir");
    let both = temp_file("jvp-dump-decls.ir", &format!("{text}\n{}", run.stdout));
    let check = gradlift(&["check", &shown(&both)]);
    assert_eq!(
        (check.code, check.stdout.as_str()),
        (0, "ok: 9 functions\n"),
        "{check:?}"
    );
    // And it computes the closed form: d sin(x y) along (1, 0) at (0.5, 2) on the
    // interpreter, from the dump of @s alone.
    use gradlift::ir::interp::{Interpreter, Val};
    let file = temp_file("jvp-dump-run.ir", SIN_XY);
    let run = dump(&file, "s", &[]);
    let module = gradlift::ir::parse(&run.stdout).expect("the dump parses");
    gradlift::ir::verify(&module).expect("and verifies");
    let out = Interpreter::new(&module)
        .call_by_name(
            "s.jvp",
            &mut [Val::F64(0.5), Val::F64(1.0), Val::F64(2.0), Val::F64(0.0)],
        )
        .expect("runs");
    assert_eq!(
        out,
        [Val::F64(1.0_f64.sin()), Val::F64(1.0_f64.cos() * 2.0)]
    );
}

#[test]
fn dump_jvp_errors() {
    let file = temp_file("jvp-dump-errors.ir", SIN_LOOP);
    let f = shown(&file);
    user_error(
        &dump(&file, "g", &["--activity", "dual,dual,dual"]),
        &format!(
            "{f}:1:35: error: parameter 3 (%n: i64) of @g cannot be `dual`: `dual` is for \
             float scalars and float slices; integers, bools and integer slices are `const`"
        ),
    );
    // A reverse-mode list with --stage jvp, a forward-mode one with the other
    // stages, a word of neither, and widths out of range: usage errors.
    usage_error(&dump(&file, "g", &["--activity", "dup,dup,const"]));
    let run = gradlift(&[
        "dump",
        &f,
        "--func",
        "g",
        "--stage",
        "forward",
        "--activity",
        "dual,dual,const",
    ]);
    usage_error(&run);
    assert!(
        run.stderr
            .contains("`dual` and `dualonly` are for '--stage jvp'"),
        "{run:?}"
    );
    usage_error(&dump(&file, "g", &["--activity", "dual,bogus"]));
    usage_error(&dump(&file, "g", &["--width", "0"]));
    usage_error(&dump(&file, "g", &["--width", "65"]));
    // `const` lists are both kinds: fine for either.
    let run = gradlift(&[
        "dump",
        &f,
        "--func",
        "g",
        "--stage",
        "forward",
        "--activity",
        "const,const,const->const",
    ]);
    assert_eq!(run.code, 0, "{run:?}");
    let run = dump(&file, "g", &["--activity", "const,const,const->const"]);
    assert_eq!(run.code, 0, "{run:?}");
}

// Errors

#[test]
fn tangents_of_the_wrong_count_or_shape_are_refused_by_the_calling_convention() {
    let file = temp_file("jvp-errors.ir", SQUARE_PLUS);
    let loop_file = temp_file("jvp-errors-loop.ir", SIN_LOOP);
    for engine in ["interp", "jit"] {
        let e = ["--engine", engine];
        user_error(
            &jvp(&file, "f", "[2, 1]", "[1]", &e),
            "error: @f takes 2 parameters, given 1 tangent (one per parameter, `None` for \
             the `const` ones)",
        );
        user_error(
            &jvp(&file, "f", "[2, 1]", "[1, 2, 3]", &e),
            "error: @f takes 2 parameters, given 3 tangents (one per parameter, `None` for \
             the `const` ones)",
        );
        user_error(
            &jvp(&file, "f", "[2, 1]", "[1, null]", &e),
            "error: parameter 2 of @f is `dual`: it needs a tangent",
        );
        user_error(
            &jvp(
                &file,
                "f",
                "[2, 1]",
                "[1, 2]",
                &["--activity", "dual,const", e[0], e[1]],
            ),
            "error: parameter 2 of @f is `const`: it takes no tangent (give `None`)",
        );
        // A scalar at width 1 takes a number, at width N an array of N.
        user_error(
            &jvp(&file, "f", "[2, 1]", "[1, [2, 3]]", &e),
            "error: the tangent of parameter 2 of @f must be an f64, given a [f64] of length 2",
        );
        user_error(
            &jvp(
                &file,
                "f",
                "[2, 1]",
                "[1, 2]",
                &["--width", "2", e[0], e[1]],
            ),
            "error: the tangent of parameter 1 of @f must be a [f64] of length 2 (its 2 \
             lanes), given an f64",
        );
        user_error(
            &jvp(
                &file,
                "f",
                "[2, 1]",
                "[[1, 2, 3], [1, 2]]",
                &["--width", "2", e[0], e[1]],
            ),
            "error: the tangent of parameter 1 of @f must be a [f64] of length 2 (its 2 \
             lanes), given a [f64] of length 3",
        );
        // A slice takes len * N numbers.
        user_error(
            &jvp(
                &loop_file,
                "g",
                "[[1, 2], [0, 0], 1]",
                "[[1, 2], [0], null]",
                &e,
            ),
            "error: the tangent of parameter 2 of @g must be a mut [f64] of length 2, given a \
             mut [f64] of length 1",
        );
        user_error(
            &jvp(
                &loop_file,
                "g",
                "[[1, 2], [0, 0], 1]",
                "[[1, 2], [0, 0], null]",
                &["--width", "2", e[0], e[1]],
            ),
            "error: the tangent of parameter 1 of @g must be a [f64] of length 4 (2 lanes per \
             element), given a [f64] of length 2",
        );
    }
}

#[test]
fn dual_on_an_integer_and_a_wrong_activity_count_are_refused_by_the_derivation() {
    let file = temp_file("jvp-bad-activity.ir", SIN_LOOP);
    let f = shown(&file);
    user_error(
        &jvp(
            &file,
            "g",
            "[[1], [0], 1]",
            "[[1], [0], 1]",
            &["--activity", "dual,dual,dual"],
        ),
        &format!(
            "{f}:1:35: error: parameter 3 (%n: i64) of @g cannot be `dual`: `dual` is for \
             float scalars and float slices; integers, bools and integer slices are `const`"
        ),
    );
    user_error(
        &jvp(
            &file,
            "g",
            "[[1], [0], 1]",
            "[[1]]",
            &["--activity", "dual"],
        ),
        &format!("{f}: error: @g has 3 parameters, but 1 activity was given"),
    );
}

#[test]
fn tangents_that_are_not_json_numbers_are_refused_by_the_command_line() {
    let file = temp_file("jvp-bad-json.ir", SQUARE_PLUS);
    user_error(
        &jvp(&file, "f", "[2, 1]", "[1, 2", &[]),
        "error: --tangents is not valid JSON: EOF while parsing a list at line 1 column 5",
    );
    user_error(
        &jvp(&file, "f", "[2, 1]", "{}", &[]),
        "error: --tangents must be a JSON array with one element (a tangent or null) per \
         parameter of @f (%x: f64, %y: f64), found an object",
    );
    user_error(
        &jvp(&file, "f", "[2, 1]", "[1, true]", &[]),
        "error: --tangents: the tangent of argument 2 (%y: f64) must be a number, an array \
         of numbers or null, found true",
    );
    user_error(
        &jvp(&file, "f", "[2, 1]", "[[1, \"x\"], 2]", &["--width", "2"]),
        "error: --tangents: the tangent of argument 1 (%x: f64), element 1, must be a number \
         (or \"inf\", \"-inf\", \"nan\"), found \"x\"",
    );
    // The arguments are checked as `run` checks them, before the tangents.
    user_error(
        &jvp(&file, "f", "[2]", "[1, 2]", &[]),
        "error: @f takes 2 arguments (%x: f64, %y: f64), found 1: argument 2 (%y: f64) is \
         missing",
    );
}

#[test]
fn what_forward_mode_cannot_differentiate_is_refused() {
    // A callee with a `vjp` rule and no `jvp` rule.
    let file = temp_file(
        "jvp-vjp-only.ir",
        "func @cube(%x: f64) -> f64 {\nentry:\n    %xx = fmul %x, %x\n    %r = fmul %xx, %x\n    ret %r\n}\n\
         func @cube_vjp(%x: f64, %dr: f64) -> f64 {\nentry:\n    %xx = fmul %x, %x\n    %d = fmul 3.0, %xx\n    %dx = fmul %d, %dr\n    ret %dx\n}\n\
         func @uses(%x: f64) -> f64 {\nentry:\n    %y = call @cube(%x)\n    ret %y\n}\n\
         vjp @cube = @cube_vjp\n",
    );
    // Derived lazily: the rule fails when the call runs, with the derivation's
    // message, on both engines.
    for engine in ["jit", "interp"] {
        let run = jvp(&file, "uses", "[2]", "[1]", &["--engine", engine]);
        user_error(
            &run,
            &format!(
                "{}: error: in @cube.fail.jvp, trap_if: trap: cannot differentiate @uses yet: \
                 `%y = call @cube(%x)` at 16:5 needs the forward derivative of @cube, which \
                 has a `vjp` rule but no `jvp` rule: declare `jvp @cube = @RULE` (see the IR \
                 docs, \"jvp\")",
                shown(&file)
            ),
        );
    }
    // An extern without a derivative (decls.ir's @wave).
    let decls = example("decls.ir");
    let run = jvp(&decls, "wave", "[1.0]", "[1]", &[]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(
        run.stderr.starts_with(&format!(
            "{}: error: in @host_sin.fail.jvp, trap_if: trap: @wave: `%s = call @host_sin(%x)` \
             at 15:5 needs the forward derivative of @host_sin, which has none: declare \
             `jvp @host_sin = @RULE`",
            shown(&decls)
        )),
        "{run:?}"
    );
}

#[test]
fn run_time_errors_point_at_the_primal_statement_on_both_engines() {
    let file = temp_file(
        "jvp-oob.ir",
        "func @oob(%x: [f64], %i: i64) -> f64 {\nentry:\n    %a = load %x[%i]\n    %r = fmul %a, %a\n    ret %r\n}\n",
    );
    for engine in ["interp", "jit"] {
        user_error(
            &jvp(
                &file,
                "oob",
                "[[1, 2, 3], 3]",
                "[[1, 1, 1], null]",
                &["--engine", engine],
            ),
            &format!(
                "{}:3:5: error: in @oob.jvp, load of %x: index 3 out of bounds for length 3",
                shown(&file)
            ),
        );
    }
}

#[test]
fn fuel_and_timeout_bound_a_derived_function_that_does_not_end() {
    let file = temp_file(
        "jvp-spin.ir",
        "func @spin(%x: f64) -> f64 {\nentry:\n    jump loop\nloop:\n    %y = phi f64 [entry: %x, loop: %y1]\n    %y1 = fmul %y, 1.0\n    jump loop\n}\n",
    );
    let run = jvp(
        &file,
        "spin",
        "[1]",
        "[1]",
        &["--engine", "interp", "--fuel", "100"],
    );
    assert_eq!(run.code, 1, "{run:?}");
    assert!(
        run.stderr
            .contains("in @spin.jvp, jump: out of fuel after 100 statements"),
        "{run:?}"
    );
    for engine in ["interp", "jit"] {
        user_error(
            &jvp(
                &file,
                "spin",
                "[1]",
                "[1]",
                &["--engine", engine, "--timeout", "0.5"],
            ),
            "error: gave up after 0.5 s (--timeout): the command had not finished",
        );
    }
    // --fuel is for the interpreter.
    let run = jvp(&file, "spin", "[1]", "[1]", &["--fuel", "100"]);
    assert_eq!(run.code, 2, "{run:?}");
}

#[test]
fn usage_errors_exit_with_2() {
    let file = temp_file("jvp-usage.ir", SQUARE_PLUS);
    let f = shown(&file);
    let base = ["jvp", f.as_str(), "--func", "f", "--args", "[2, 1]"];
    let with = |extra: &[&str]| {
        let mut argv: Vec<&str> = base.to_vec();
        argv.extend_from_slice(extra);
        gradlift(&argv)
    };
    // Neither or both of --tangents and --tangents-file.
    usage_error(&with(&[]));
    usage_error(&with(&[
        "--tangents",
        "[1, 2]",
        "--tangents-file",
        "t.json",
    ]));
    // A width out of 1..=64, a word that is not a forward-mode activity.
    usage_error(&with(&["--tangents", "[1, 2]", "--width", "0"]));
    usage_error(&with(&["--tangents", "[1, 2]", "--width", "65"]));
    usage_error(&with(&[
        "--tangents",
        "[1, 2]",
        "--activity",
        "active,dual",
    ]));
    usage_error(&with(&[
        "--tangents",
        "[1, 2]",
        "--activity",
        "dual,dual->active",
    ]));
    // 64 is the widest.
    let lanes = format!("[{0}, {0}]", floats(&[1.0; 64]));
    let out = json_out(&with(&["--tangents", &lanes, "--width", "64"]));
    assert_eq!(out["tangent"].as_array().map(Vec::len), Some(64));
}

#[test]
fn help_documents_jvp() {
    let run = gradlift(&["--help"]);
    assert_eq!(run.code, 0);
    assert!(run.stdout.contains("jvp"), "{run:?}");
    let run = gradlift(&["jvp", "--help"]);
    assert_eq!(run.code, 0);
    for option in [
        "--func",
        "--args",
        "--args-file",
        "--tangents",
        "--tangents-file",
        "--activity",
        "--width",
        "--engine",
        "--opt",
        "--time",
        "--fuel",
        "--timeout",
        "dualonly",
    ] {
        assert!(run.stdout.contains(option), "{option}: {run:?}");
    }
    let run = gradlift(&["dump", "--help"]);
    assert!(
        run.stdout.contains("jvp:") && run.stdout.contains("--width"),
        "{run:?}"
    );
}

/// A `nodiff` callee leaves tangent slices as they are (as reverse mode leaves
/// shadows), also one it overwrites: docs/forward-mode.md says so.
#[test]
fn nodiff_leaves_tangent_slices_as_they_are() {
    let file = temp_file(
        "jvp-nodiff-slice.ir",
        "func @zero(%x: mut [f64]) {\nentry:\n    store %x[0], 0.0\n    ret\n}\n\
         func @use(%x: mut [f64], %a: f64) -> f64 {\nentry:\n    %v = load %x[0]\n    \
         %w = fmul %v, %a\n    store %x[0], %w\n    call @zero(%x)\n    ret %w\n}\n\
         nodiff @zero\n",
    );
    for engine in ["interp", "jit"] {
        let out = json_out(&jvp(
            &file,
            "use",
            "[[3], 2]",
            "[[1], 0]",
            &["--opt", "none", "--engine", engine],
        ));
        // x[0] ends 0 (@zero wrote it), but its tangent is still that of w = a x[0].
        assert_eq!(out["args"], json!([[0.0], null]));
        assert_eq!(out["tangents"], json!([[2.0], null]));
        assert_eq!(out["tangent"], json!(2.0));
    }
}

/// Every `gradlift jvp`, `gradlift hvp` and `gradlift dump --stage jvp` transcript
/// of the manuals (docs/forward-mode.md, docs/cli.md) is what the binary prints,
/// byte for byte, run from the repository's root; those of `--time`, whose numbers
/// vary, only parse, and print what the manual shows but the times.
#[test]
fn the_manuals_transcripts_are_what_the_binary_prints() {
    let mut checked = 0;
    for doc in ["docs/forward-mode.md", "docs/cli.md"] {
        for (command, expected) in transcripts(doc) {
            let words = shell_words(&command);
            let forward = words.get(1).is_some_and(|w| w == "jvp" || w == "hvp")
                || (words.get(1).is_some_and(|w| w == "dump")
                    && words.windows(2).any(|w| w == ["--stage", "jvp"]));
            if words[0] != "gradlift" || !forward || expected.contains("...") {
                continue;
            }
            let out = std::process::Command::new(env!("CARGO_BIN_EXE_gradlift"))
                .args(&words[1..])
                .current_dir(root())
                .output()
                .expect("the gradlift binary runs");
            let printed = format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            if words.iter().any(|w| w == "--time") {
                let json: Value = serde_json::from_str(&printed).expect("JSON");
                let want: Value = serde_json::from_str(&expected).expect("JSON");
                let keys: &[&str] = if words[1] == "hvp" {
                    &["value", "gradient", "hvp"]
                } else {
                    &["value", "tangent", "args", "tangents"]
                };
                for &key in keys {
                    assert_eq!(json[key], want[key], "{doc}: {command}");
                }
            } else {
                assert_eq!(printed, expected, "{doc}: {command}");
            }
            checked += 1;
        }
    }
    assert!(checked >= 25, "only {checked} transcripts checked");
}
