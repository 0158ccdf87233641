//! `gradlift dump FILE --func F --stage S`: print one stage of a function.
//!
//! Only `primal` exists yet: the function as parsed, through the printer. The other
//! stages arrive with the optimiser, the derivation and the JIT; until then they are
//! a user error that says so.

use std::path::Path;

use clap::ValueEnum;

use gradlift_ir::write::write_function;

use super::report::Diagnostic;
use super::{Outcome, Stage, check, run};

/// Prints `stage` of `@func` in `file`.
pub(crate) fn dump(file: &Path, func: &str, stage: Stage) -> Outcome {
    if stage != Stage::Primal {
        let name = stage
            .to_possible_value()
            .map(|v| v.get_name().to_string())
            .unwrap_or_default();
        return Outcome::error(Diagnostic::new(format!(
            "gradlift dump: stage {name} is not available yet (only primal is)"
        )));
    }
    let module = match check::load(file) {
        Ok(module) => module,
        Err(errors) => return Outcome::failed(errors),
    };
    let id = match run::find(&module, file, func) {
        Ok(id) => id,
        Err(e) => return Outcome::error(e),
    };
    let mut text = String::new();
    if let Err(e) = write_function(&mut text, &module, id) {
        return Outcome::error(Diagnostic::new(format!("cannot print @{func}: {e}")));
    }
    // One function, ending in exactly one newline whatever the printer ends with.
    let trimmed = text.trim_end().len();
    text.truncate(trimmed);
    text.push('\n');
    Outcome::ok(text)
}
