//! The `gradlift` binary with little memory: run under `ulimit -v` (128 MiB of
//! address space), a program whose tape grows without end fails with a run-time
//! error (status 1, `FILE:LINE:COL: error: ...` naming the `push`) on both engines.
//! The interpreter used to abort the process there instead (`memory allocation of
//! 134217728 bytes failed`, status 134: a `Vec` that grew with `push`); it now
//! reserves with `try_reserve` and reports `TapeFull`, as the JIT does.
//!
//! Linux only (`ulimit -v` in `sh`).
#![cfg(target_os = "linux")]

mod common;

use std::process::Command;

use common::temp_file;

/// Pushes `n` scalars and never pops them. Tape ops are ordinary ops: the
/// verifier and both engines accept them in any function.
const FILL: &str = "; pushes n scalars onto the tape and never pops them
func @fill(%n: i64) -> i64 {
entry:
    jump head
head:
    %i = phi i64 [entry: 0, body: %i1]
    %more = icmp lt %i, %n
    br %more, body, exit
body:
    push %i
    %i1 = iadd %i, 1
    jump head
exit:
    ret %i
}
";

/// The address space the binary runs in, in KiB (`ulimit -v`): enough to start
/// (about 30 MiB), too little for a tape of much more than 4 million scalars.
const LIMIT_KIB: u32 = 128 * 1024;

/// `gradlift run FILE --func fill --args [n] --engine ENGINE` under `ulimit -v`:
/// the exit status (`None` if killed by a signal), stdout and stderr.
fn run_limited(file: &str, n: i64, engine: &str) -> (Option<i32>, String, String) {
    let n = format!("[{n}]");
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!("ulimit -v {LIMIT_KIB} && exec \"$0\" \"$@\""))
        .arg(env!("CARGO_BIN_EXE_gradlift"))
        .args([
            "run", file, "--func", "fill", "--args", &n, "--engine", engine,
        ])
        .output()
        .expect("sh runs");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_tape_that_cannot_grow_is_an_error_not_an_abort() {
    let path = temp_file("memory_fill.ir", FILL);
    let file = path.display().to_string();
    for engine in ["interp", "jit"] {
        // Within the limit the program runs.
        let (code, stdout, stderr) = run_limited(&file, 1000, engine);
        assert_eq!(code, Some(0), "{engine}: {stderr}");
        assert_eq!(stdout, "{\"value\": 1000, \"args\": [null]}\n", "{engine}");

        // 10^12 pushes do not fit: a clean error at the push, not an abort.
        let (code, stdout, stderr) = run_limited(&file, 1_000_000_000_000, engine);
        assert_eq!(code, Some(1), "{engine}: status {code:?}, stderr {stderr}");
        assert_eq!(stdout, "", "{engine}");
        assert!(!stderr.contains("memory allocation"), "{engine}: {stderr}");
        let prefix = format!("{file}:10:5: error: in @fill, push: the tape cannot grow beyond ");
        let line = stderr.lines().next().unwrap_or_default();
        let scalars = line
            .strip_prefix(&prefix)
            .and_then(|rest| rest.strip_suffix(" scalars: out of memory"))
            .and_then(|n| n.parse::<u64>().ok())
            .unwrap_or_else(|| panic!("{engine}: {stderr}"));
        // It got as far as the memory allows: millions of scalars.
        assert!(scalars >= 1 << 20, "{engine}: {scalars}");
        assert_eq!(stderr.lines().count(), 1, "{engine}: {stderr}");
    }
}
