//! `gradlift check FILE...`: parse and verify, reporting every error.
//!
//! [`load`] is the first step of every command that reads a file: read it, parse it
//! (all parse errors), verify it (all verifier errors); `run` calls its two halves
//! ([`read`], [`parse_verified`]) itself, to time the second. `check` runs it on each file
//! and prints `ok: N functions` (N counts the defined functions, not the externs);
//! with several files each line starts with the file's name. A failing file does not
//! stop the others.

use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};

use gradlift_ir::{Module, parse, verify};

use super::Outcome;
use super::report::{self, Diagnostic};

/// Reads, parses and verifies `file`; on failure, every error found.
pub(crate) fn load(file: &Path) -> Result<Module, Vec<Diagnostic>> {
    parse_verified(file, &read(file)?)
}

/// The text of `file`.
pub(crate) fn read(file: &Path) -> Result<String, Vec<Diagnostic>> {
    fs::read_to_string(file).map_err(|e| {
        vec![Diagnostic::new(format!(
            "cannot read {}: {e}",
            file.display()
        ))]
    })
}

/// Parses and verifies `text`, read from `file`; on failure, every error found.
pub(crate) fn parse_verified(file: &Path, text: &str) -> Result<Module, Vec<Diagnostic>> {
    let module = parse(text).map_err(|e| report::parse_errors(file, &e))?;
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
                let _ = writeln!(outcome.out, "ok: {n} functions");
            }
            Err(errors) => outcome.errors.extend(errors),
        }
    }
    outcome
}
