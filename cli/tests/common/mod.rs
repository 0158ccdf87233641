//! Helpers shared by the integration tests: running the `gradlift` binary, temporary
//! files, the example programs, and value comparison with a relative tolerance.

#![allow(dead_code)] // Each test crate uses its own subset.

use std::path::{Path, PathBuf};
use std::process::Command;

use gradlift::ir::interp::{Interpreter, Val};
use gradlift::ir::{Module, parse, verify};
use serde_json::Value;

/// What one run of the binary did.
#[derive(Debug)]
pub struct Run {
    /// The exit status (-1 if killed by a signal).
    pub code: i32,
    /// Everything written to stdout.
    pub stdout: String,
    /// Everything written to stderr.
    pub stderr: String,
}

/// Runs `gradlift` with `args`.
pub fn gradlift<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> Run {
    let out = Command::new(env!("CARGO_BIN_EXE_gradlift"))
        .args(args)
        .output()
        .expect("the gradlift binary runs");
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// The path of `examples/ir/NAME`.
pub fn example(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../examples/ir")
        .join(name)
}

/// The example `name`, parsed and verified.
pub fn load_example(name: &str) -> Module {
    let path = example(name);
    let text = std::fs::read_to_string(&path).expect("the example exists");
    let module = parse(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    verify(&module).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    module
}

/// Writes `contents` to a fresh file called `name` under the test temp directory.
/// Each test uses its own names, so tests running in parallel never share a file.
pub fn temp_file(name: &str, contents: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("gradlift-tests");
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join(name);
    std::fs::write(&path, contents).expect("temp file");
    path
}

/// Calls `func` of `module` on the interpreter; returns the results and the final
/// arguments.
pub fn interpret(module: &Module, func: &str, mut args: Vec<Val>) -> (Vec<Val>, Vec<Val>) {
    let id = module
        .func_by_name(func)
        .unwrap_or_else(|| panic!("no @{func}"));
    let results = Interpreter::new(module)
        .call(id, &mut args)
        .unwrap_or_else(|e| panic!("@{func}: {e}"));
    (results, args)
}

/// An interpreter value as the CLI's JSON writes it (non-finite floats as strings).
pub fn to_json(val: &Val) -> Value {
    fn float(x: f64) -> Value {
        if x.is_nan() {
            Value::from("nan")
        } else if x.is_infinite() {
            Value::from(if x > 0.0 { "inf" } else { "-inf" })
        } else {
            Value::from(x)
        }
    }
    match val {
        Val::F64(x) => float(*x),
        Val::F32(x) => float(f64::from(*x)),
        Val::I64(i) => Value::from(*i),
        Val::Bool(b) => Value::from(*b),
        Val::F64s(xs) => xs.iter().map(|&x| float(x)).collect(),
        Val::F32s(xs) => xs.iter().map(|&x| float(f64::from(x))).collect(),
        Val::I64s(xs) => xs.iter().map(|&i| Value::from(i)).collect(),
    }
}

/// Whether two floats agree to a relative 1e-12 (equal infinities and two NaNs agree).
pub fn close(a: f64, b: f64) -> bool {
    if a.is_nan() || b.is_nan() {
        return a.is_nan() && b.is_nan();
    }
    a == b || (a - b).abs() <= 1e-12 * a.abs().max(b.abs())
}

/// Whether two values agree, floats to a relative 1e-12.
pub fn val_close(a: &Val, b: &Val) -> bool {
    let all = |xs: &[f64], ys: &[f64]| {
        xs.len() == ys.len() && xs.iter().zip(ys).all(|(x, y)| close(*x, *y))
    };
    match (a, b) {
        (Val::F64(x), Val::F64(y)) => close(*x, *y),
        (Val::F32(x), Val::F32(y)) => x == y || (x.is_nan() && y.is_nan()),
        (Val::F64s(x), Val::F64s(y)) => all(x, y),
        _ => a == b,
    }
}

/// Whether two JSON values agree, float numbers to a relative 1e-12.
pub fn json_close(a: &Value, b: &Value) -> bool {
    match (a, b) {
        // A float must print as a float (`7.0`) and an integer as an integer (`7`).
        (Value::Number(x), Value::Number(y)) if x.is_f64() && y.is_f64() => {
            match (x.as_f64(), y.as_f64()) {
                (Some(x), Some(y)) => close(x, y),
                _ => false,
            }
        }
        (Value::Array(xs), Value::Array(ys)) => {
            xs.len() == ys.len() && xs.iter().zip(ys).all(|(x, y)| json_close(x, y))
        }
        _ => a == b,
    }
}

/// The repository's root.
pub fn root() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
}

/// A command line as the manual writes it: words separated by spaces, `'...'`
/// quoting (no other shell syntax).
pub fn shell_words(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut quoted = false;
    for c in line.chars() {
        match c {
            '\'' => {
                quoted = !quoted;
                in_word = true;
            }
            ' ' if !quoted => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            c => {
                word.push(c);
                in_word = true;
            }
        }
    }
    assert!(!quoted, "an unclosed quote: {line}");
    if in_word {
        words.push(word);
    }
    words
}

/// The transcripts of `file`'s fenced blocks: each `$ gradlift ...` line with the
/// lines after it, up to the next `$` line or the block's end.
pub fn transcripts(file: &str) -> Vec<(String, String)> {
    let text = std::fs::read_to_string(root().join(file)).expect("the doc exists");
    let mut out: Vec<(String, String)> = Vec::new();
    let mut fence: Option<usize> = None;
    let mut current: Option<(String, String)> = None;
    for line in text.lines() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("```") {
            if fence.is_some() {
                out.extend(current.take());
                fence = None;
            } else {
                fence = Some(line.len() - trimmed.len());
            }
            continue;
        }
        let Some(indent) = fence else { continue };
        let line = line.get(indent..).unwrap_or("");
        if let Some(command) = line.strip_prefix("$ ") {
            out.extend(current.take());
            current = Some((command.to_string(), String::new()));
        } else if let Some((_, expected)) = &mut current {
            expected.push_str(line);
            expected.push('\n');
        }
    }
    out
}
