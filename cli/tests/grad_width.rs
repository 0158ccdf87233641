//! `gradlift grad --width N` and `gradlift dump --width N` of the reverse-mode
//! stages, against the manual (`docs/cli.md`): lane `j` of a width-N gradient is,
//! number for number as printed, the width-1 gradient from lane `j`'s seeds and
//! shadows (an independent check: N separate width-1 runs of the binary); the
//! default seeds give N equal lanes; the errors and their exit statuses; the
//! widened pullback that `dump` prints, with its N seeds, parses back and verifies.

mod common;

use std::path::Path;

use common::{Run, gradlift, root, shell_words, temp_file, transcripts};
use serde_json::Value;

/// `f(x, a, k, b) = (a Σ x_i sin x_i, k, k b² Σ b x_i)`: a `dup` slice, two
/// `active` scalars around a `const` integer, two float results around an integer
/// one (which takes no seed).
const F: &str = "func @f(%x: [f64], %a: f64, %k: i64, %b: f64) -> (f64, i64, f64) {
entry:
    %len = len %x
    %kf = cast f64 %k
    jump head
head:
    %i = phi i64 [entry: 0, body: %i1]
    %acc = phi f64 [entry: 0.0, body: %acc1]
    %acc2 = phi f64 [entry: 0.0, body: %acc3]
    %more = icmp lt %i, %len
    br %more, body, exit
body:
    %xi = load %x[%i]
    %s = sin %xi
    %sx = fmul %s, %xi
    %acc1 = fadd %acc, %sx
    %bx = fmul %b, %xi
    %acc3 = fadd %acc2, %bx
    %i1 = iadd %i, 1
    jump head
exit:
    %r1 = fmul %a, %acc
    %bb = fmul %b, %b
    %r2a = fmul %bb, %acc2
    %r2 = fmul %r2a, %kf
    ret %r1, %k, %r2
}
";

const ARGS: &str = "[[0.5, -1.25, 2.0], 1.5, 3, -0.75]";

/// `gradlift grad FILE --func f --args ARGS EXTRA... --engine ENGINE`.
fn grad(file: &Path, engine: &str, extra: &[&str]) -> Run {
    let file = file.display().to_string();
    let mut argv = vec!["grad", &file, "--func", "f", "--args", ARGS];
    argv.extend_from_slice(extra);
    argv.extend_from_slice(&["--engine", engine]);
    gradlift(&argv)
}

/// A successful run's output, parsed (one line: `value`, then `gradient`).
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
    assert_eq!(keys[..2], ["value", "gradient"], "{run:?}");
    out
}

/// A user error (status 1): nothing on stdout, exactly `expected` on stderr.
#[track_caller]
fn user_error(run: &Run, expected: &str) {
    assert_eq!(run.code, 1, "{run:?}");
    assert_eq!(run.stdout, "", "{run:?}");
    assert_eq!(run.stderr, format!("{expected}\n"), "{run:?}");
}

/// A JSON value as the CLI printed it (numbers in their printed form).
fn text(v: &Value) -> String {
    v.to_string()
}

/// Lane `j` of a width-`n` gradient, in the shape of a width-1 one: a `dup`
/// slice's elements `i * n + j`, an `active` scalar's element `j`, null as is.
fn lane(gradient: &Value, n: usize, j: usize) -> Value {
    let Value::Array(params) = gradient else {
        panic!("gradient is not an array: {gradient}")
    };
    // Parameter 0 is the dup slice, 1 and 3 the active scalars, 2 the const.
    params
        .iter()
        .enumerate()
        .map(|(p, g)| match (p, g) {
            (_, Value::Null) => Value::Null,
            (0, Value::Array(xs)) => {
                assert_eq!(xs.len() % n, 0, "{gradient}");
                xs.iter().skip(j).step_by(n).cloned().collect()
            }
            (_, Value::Array(xs)) => {
                assert_eq!(xs.len(), n, "{gradient}");
                xs[j].clone()
            }
            _ => panic!("parameter {p}: unexpected {g} in {gradient}"),
        })
        .collect()
}

/// The JSON text of numbers, each written so it reads back exactly.
fn floats(xs: &[f64]) -> String {
    let items: Vec<String> = xs.iter().map(|x| format!("{x:?}")).collect();
    format!("[{}]", items.join(", "))
}

#[test]
fn lane_j_of_width_3_is_the_width_1_gradient_from_lane_js_seeds_and_shadows() {
    let file = temp_file("grad-width-lanes.ir", F);
    const N: usize = 3;
    // seeds[k][j]: float result k's seed in lane j.
    let seeds = [[1.0, 0.0, -2.5], [0.0, 1.0, 0.75]];
    // The shadow of x, lane j of element i at i * N + j.
    let shadow = [0.5, 0.0, -1.0, 2.0, 0.25, 0.0, -3.0, 1.0, 4.0];
    let seed_json = format!("[{}, {}]", floats(&seeds[0]), floats(&seeds[1]));
    let shadows_json = format!("[{}, null, null, null]", floats(&shadow));
    let width = N.to_string();
    let extra = [
        "--width",
        &width,
        "--seed",
        &seed_json,
        "--shadows",
        &shadows_json,
    ];
    let jit = grad(&file, "jit", &extra);
    let interp = grad(&file, "interp", &extra);
    // Both engines print the same bytes.
    assert_eq!(jit.stdout, interp.stdout, "{jit:?}\n{interp:?}");
    let out = json_out(&jit);
    let gradient = &out["gradient"];
    assert_eq!(gradient[0].as_array().map(Vec::len), Some(3 * N), "{out}");
    assert_eq!(gradient[1].as_array().map(Vec::len), Some(N), "{out}");
    assert_eq!(gradient[2], Value::Null, "{out}");
    assert_eq!(gradient[3].as_array().map(Vec::len), Some(N), "{out}");
    for (j, (&s0, &s1)) in seeds[0].iter().zip(&seeds[1]).enumerate() {
        let lane_seed = floats(&[s0, s1]);
        let lane_shadow: Vec<f64> = shadow.iter().skip(j).step_by(N).copied().collect();
        let lane_shadows = format!("[{}, null, null, null]", floats(&lane_shadow));
        for engine in ["jit", "interp"] {
            let one = json_out(&grad(
                &file,
                engine,
                &["--seed", &lane_seed, "--shadows", &lane_shadows],
            ));
            assert_eq!(text(&out["value"]), text(&one["value"]), "lane {j}");
            assert_eq!(
                text(&lane(gradient, N, j)),
                text(&one["gradient"]),
                "lane {j} on {engine}: {out}"
            );
        }
    }
    // --time measures the same width-3 gradient and prints it unchanged.
    let timed = json_out(&grad(
        &file,
        "jit",
        &[&extra[..], &["--time", "2"]].concat(),
    ));
    assert_eq!(text(&timed["gradient"]), text(gradient));
    let time = timed["time"].as_object().expect("time");
    let keys: Vec<&String> = time.keys().collect();
    assert_eq!(
        keys,
        ["primal_ns", "gradient_ns", "compile_ms", "tape_bytes"],
        "{timed}"
    );
}

#[test]
fn default_seeds_at_width_n_give_n_lanes_of_the_width_1_gradient() {
    let file = temp_file("grad-width-default.ir", F);
    const N: usize = 4;
    for engine in ["jit", "interp"] {
        let one = json_out(&grad(&file, engine, &[]));
        // An explicit --width 1 is the plain rule, byte for byte.
        let explicit = grad(&file, engine, &["--width", "1"]);
        assert_eq!(explicit.stdout, grad(&file, engine, &[]).stdout);
        let wide = json_out(&grad(&file, engine, &["--width", "4"]));
        assert_eq!(text(&wide["value"]), text(&one["value"]));
        for j in 0..N {
            assert_eq!(
                text(&lane(&wide["gradient"], N, j)),
                text(&one["gradient"]),
                "lane {j} on {engine}: {wide}"
            );
        }
    }
    // Without --no-primal, value is as at width 1; with it, null.
    let out = json_out(&grad(&file, "jit", &["--width", "2", "--no-primal"]));
    assert_eq!(out["value"], Value::Null);
}

#[test]
fn width_n_seeds_and_shadows_of_the_wrong_shape_are_errors() {
    let file = temp_file("grad-width-errors.ir", F);
    for engine in ["jit", "interp"] {
        let run = |extra: &[&str]| grad(&file, engine, &[&["--width", "3"], extra].concat());
        user_error(
            &run(&["--seed", "[1, 2]"]),
            "error: --seed: at --width 3, @f takes 3 seeds per float result: for its 2 float \
             results an array of 2 arrays of 3 numbers (one per float result, lane 0 \
             first), found an array of 2 elements",
        );
        user_error(
            &run(&["--seed", "[[1, 2, 3], [1, 2]]"]),
            "error: --seed, element 1: at --width 3, a float result takes an array of 3 \
             numbers (one seed per lane, lane 0 first), found an array of 2 elements",
        );
        user_error(
            &run(&["--seed", "[[1, 2, 3], [1, true, 3]]"]),
            "error: --seed, element 1, lane 1, must be a number (or \"inf\", \"-inf\", \
             \"nan\"), found true",
        );
        user_error(
            &run(&["--shadows", "[[1, 2, 3], null, null, null]"]),
            "error: --shadows: at --width 3, the shadow of argument 1 (%x: [f64]) must have \
             9 elements (3 lanes for each of the argument's 3, lane j of element i at \
             i*3+j), found 3",
        );
        user_error(
            &run(&[
                "--activity",
                "dup,active,const,active->const",
                "--seed",
                "[[1, 1, 1]]",
            ]),
            "error: --seed: the return is `const` (--activity ...->const), so it takes no seed",
        );
    }
    // One float result: N numbers.
    let rosenbrock = common::example("rosenbrock.ir");
    let rosenbrock = rosenbrock.display().to_string();
    let run = gradlift(&[
        "grad",
        &rosenbrock,
        "--func",
        "rosenbrock",
        "--args",
        "[[0.5, 1.0, 2.0]]",
        "--width",
        "3",
        "--seed",
        "2",
    ]);
    user_error(
        &run,
        "error: --seed: at --width 3, @rosenbrock takes 3 seeds per float result: for its \
         1 float result an array of 3 numbers (lane 0 first), found 2",
    );
    // Widths outside 1..=64 are usage errors.
    for width in ["0", "65"] {
        let run = grad(&file, "jit", &["--width", width]);
        assert_eq!(run.code, 2, "{run:?}");
        assert_eq!(run.stdout, "", "{run:?}");
        assert!(
            run.stderr
                .starts_with(&format!("error: invalid value '{width}' for '--width <N>'")),
            "{run:?}"
        );
    }
}

#[test]
fn dump_pullback_at_width_2_takes_two_seeds_per_float_result_and_parses_back() {
    let file = temp_file("grad-width-dump.ir", F);
    let shown = file.display().to_string();
    let dump = |stage: &str, width: &str| {
        gradlift(&[
            "dump", &shown, "--func", "f", "--stage", stage, "--width", width,
        ])
    };
    let run = dump("pullback", "2");
    assert_eq!((run.code, run.stderr.as_str()), (0, ""), "{run:?}");
    let first = run.stdout.lines().next().expect("a line");
    assert_eq!(
        first,
        "func @f.rvs.w2(%x: [f64], %dx: mut [f64], %dy0.0: f64, %dy0.1: f64, %dy1.0: f64, \
         %dy1.1: f64) -> (f64, f64, f64, f64) {",
        "{}",
        run.stdout
    );
    // It parses back and verifies, on its own and through `gradlift check`.
    let module = gradlift::ir::parse(&run.stdout).expect("the dump parses");
    gradlift::ir::verify(&module).expect("the dump verifies");
    let printed = temp_file("grad-width-dump-rvs.ir", &run.stdout);
    let check = gradlift(&["check", &printed.display().to_string()]);
    assert_eq!(
        (check.code, check.stdout.as_str()),
        (0, "ok: 1 function\n"),
        "{check:?}"
    );
    // The forward pass is named for its width, and width 1 is today's dump.
    let fwd = dump("forward", "2");
    assert!(fwd.stdout.starts_with("func @f.fwd.w2("), "{fwd:?}");
    let plain = gradlift(&["dump", &shown, "--func", "f", "--stage", "pullback"]);
    assert_eq!(dump("pullback", "1").stdout, plain.stdout);
    assert!(plain.stdout.starts_with("func @f.rvs("), "{plain:?}");
}

/// Every transcript of docs/cli.md of `gradlift grad` (but those of `--time`,
/// whose numbers vary, and those of a file the repository does not have) and of a
/// reverse-mode `gradlift dump ... --width` is what the binary prints, byte for
/// byte, run from the repository's root (a `...` in the transcript stands for the
/// rest of the output: what precedes it must be a prefix).
#[test]
fn the_manuals_grad_transcripts_are_what_the_binary_prints() {
    let mut checked = 0;
    for (command, expected) in transcripts("docs/cli.md") {
        let words = shell_words(&command);
        let command_is = |c: &str| words.get(1).is_some_and(|w| w == c);
        let wide = words.iter().any(|w| w == "--width");
        let reverse_dump = command_is("dump") && !words.windows(2).any(|w| w == ["--stage", "jvp"]);
        let timed = words.iter().any(|w| w == "--time");
        let exists = words.get(2).is_some_and(|f| root().join(f).exists());
        let grad = command_is("grad") && !timed;
        if words[0] != "gradlift" || !exists || !(grad || (wide && reverse_dump)) {
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
        match expected.split_once("...\n") {
            Some((prefix, _)) => assert!(printed.starts_with(prefix), "{command}:\n{printed}"),
            None => assert_eq!(printed, expected, "{command}"),
        }
        checked += 1;
    }
    assert!(checked >= 12, "only {checked} transcripts checked");
}
