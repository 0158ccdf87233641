//! `gradlift check FILE...`: parse and verify, reporting every error.
//!
//! [`load`] is the first step of every command that reads a file: read it, parse it
//! (all parse errors), verify it (all verifier errors); `run` calls its two halves
//! ([`read`], [`parse_verified`]) itself, to time the second. `check` runs it on each file
//! and prints `ok: N functions` (`ok: 1 function` for one; N counts the defined
//! functions, not the externs);
//! with several files each line starts with the file's name. A failing file does not
//! stop the others.

use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};

use std::sync::atomic::{AtomicUsize, Ordering};

use gradlift_ir::{Module, ParseOptions, parse_with, verify};
use gradlift_jit::CompileOptions;

use super::Outcome;
use super::report::{self, Diagnostic};

/// Reads, parses and verifies `file`; on failure, every error found.
pub(crate) fn load(file: &Path) -> Result<Module, Vec<Diagnostic>> {
    parse_verified(file, &read(file)?)
}

/// The most bytes gradlift reads from one input file (IR text, JSON arguments).
pub(crate) const MAX_INPUT_BYTES: u64 = 256 << 20;

/// The bytes of an input file, or why not: a directory or a device (`/dev/zero`,
/// which would never end) is refused, and so is anything longer than
/// [`MAX_INPUT_BYTES`] (pipes are read up to it).
pub(crate) fn read_input(file: &Path) -> Result<Vec<u8>, String> {
    use std::io::Read as _;
    let cannot = |why: String| format!("cannot read {}: {why}", file.display());
    let meta = fs::metadata(file).map_err(|e| cannot(e.to_string()))?;
    let kind = meta.file_type();
    if kind.is_dir() {
        return Err(cannot("it is a directory".into()));
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt as _;
        if kind.is_char_device() || kind.is_block_device() || kind.is_socket() {
            return Err(cannot("it is a device, not a file".into()));
        }
    }
    let too_big = |n: u64| {
        cannot(format!(
            "it is {n} bytes or more, and gradlift reads at most {MAX_INPUT_BYTES} bytes from a file"
        ))
    };
    if meta.len() > MAX_INPUT_BYTES {
        return Err(too_big(meta.len()));
    }
    // Sized from the metadata: a large file is read without regrowing the buffer.
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).map_or(0, |n| n + 1));
    fs::File::open(file)
        .and_then(|f| f.take(MAX_INPUT_BYTES + 1).read_to_end(&mut bytes))
        .map_err(|e| cannot(e.to_string()))?;
    if bytes.len() as u64 > MAX_INPUT_BYTES {
        return Err(too_big(bytes.len() as u64));
    }
    Ok(bytes)
}

/// The text of `file`. A file that is not UTF-8 is reported at its first invalid
/// byte, `FILE:LINE:COL:` as every other input error (the column counts characters,
/// as the parser's do).
pub(crate) fn read(file: &Path) -> Result<String, Vec<Diagnostic>> {
    let bytes = read_input(file).map_err(|m| vec![Diagnostic::new(m)])?;
    String::from_utf8(bytes).map_err(|e| {
        let bytes = e.as_bytes();
        let valid = e.utf8_error().valid_up_to();
        // The prefix is valid UTF-8 by definition of `valid_up_to`.
        let prefix = std::str::from_utf8(&bytes[..valid]).unwrap_or_default();
        let line = prefix.matches('\n').count() + 1;
        let col = prefix.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
        let pos = gradlift_ir::Pos::new(
            u32::try_from(line).unwrap_or(u32::MAX),
            u32::try_from(col).unwrap_or(u32::MAX),
        );
        let byte = bytes.get(valid).copied().unwrap_or(0);
        vec![Diagnostic::at(
            file,
            pos,
            format!("the file is not valid UTF-8: byte 0x{byte:02X} cannot start or continue a character here"),
        )]
    })
}

/// `--max-insts`'s default: the parser's.
pub(crate) const DEFAULT_MAX_INSTS: usize = 200_000;

/// `--max-insts`, set once from the command line.
static MAX_INSTS: AtomicUsize = AtomicUsize::new(DEFAULT_MAX_INSTS);

/// Sets `--max-insts` for this process.
pub(crate) fn set_max_insts(n: usize) {
    MAX_INSTS.store(n, Ordering::Relaxed);
}

/// The parser's limits under `--max-insts`.
fn parse_options() -> ParseOptions {
    ParseOptions::default().with_max_insts(MAX_INSTS.load(Ordering::Relaxed))
}

/// The JIT's options under `--max-insts`: room for derived code 2.5 times the size.
pub(crate) fn compile_options() -> CompileOptions {
    let n = MAX_INSTS.load(Ordering::Relaxed);
    CompileOptions::default().with_max_insts(n.saturating_mul(5) / 2)
}

/// Parses and verifies `text`, read from `file`; on failure, every error found.
pub(crate) fn parse_verified(file: &Path, text: &str) -> Result<Module, Vec<Diagnostic>> {
    let module = parse_with(text, &parse_options()).map_err(|e| report::parse_errors(file, &e))?;
    verify(&module).map_err(|e| report::verifier_errors(file, &e))?;
    Ok(module)
}

/// Checks each of `files`.
pub(crate) fn check(files: &[PathBuf]) -> Outcome {
    let mut outcome = Outcome::default();
    for file in files {
        match load(file) {
            Ok(module) => {
                let n = module.defined().count();
                if files.len() > 1 {
                    let _ = write!(outcome.out, "{}: ", file.display());
                }
                let plural = if n == 1 { "" } else { "s" };
                let _ = writeln!(outcome.out, "ok: {n} function{plural}");
            }
            Err(errors) => outcome.errors.extend(errors),
        }
    }
    outcome
}
