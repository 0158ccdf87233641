//! Diagnostics: every error the CLI prints, in the `FILE:LINE:COL: error: MESSAGE` form.
//!
//! A [`Diagnostic`] knows the file and the position when they are known and prints
//! `FILE:LINE:COL: error: MESSAGE`, `FILE: error: MESSAGE` or `error: MESSAGE`
//! accordingly. The functions below turn the IR crate's errors (parse, verifier,
//! interpreter) into diagnostics; the messages name the function, the op and the
//! entity as the text format writes them.

use core::fmt;
use std::path::Path;

use gradlift_ir::interp::{ErrorKind, InterpError};
use gradlift_ir::{ParseErrors, Pos, VerifierErrors};

/// One error, with where it is when that is known.
#[derive(Clone, PartialEq, Eq, Debug)]
pub(crate) struct Diagnostic {
    /// The file, as the user named it.
    file: Option<String>,
    /// The position in the file ([`Pos::NONE`] if unknown).
    pos: Pos,
    /// What is wrong, as a sentence without a trailing period.
    message: String,
}

impl Diagnostic {
    /// An error about no file in particular: `error: MESSAGE`.
    pub fn new(message: impl Into<String>) -> Diagnostic {
        Diagnostic {
            file: None,
            pos: Pos::NONE,
            message: message.into(),
        }
    }

    /// An error in `file` at `pos`, or about the whole file if `pos` is [`Pos::NONE`].
    pub fn at(file: &Path, pos: Pos, message: impl Into<String>) -> Diagnostic {
        Diagnostic {
            file: Some(file.display().to_string()),
            pos,
            message: message.into(),
        }
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.file {
            Some(file) if self.pos.is_known() => write!(f, "{file}:{}: ", self.pos)?,
            Some(file) => write!(f, "{file}: ")?,
            None => {}
        }
        write!(f, "error: {}", self.message)
    }
}

/// Every parse error of `file`, in text order.
pub(crate) fn parse_errors(file: &Path, errors: &ParseErrors) -> Vec<Diagnostic> {
    errors
        .0
        .iter()
        .map(|e| Diagnostic::at(file, e.pos, e.message.clone()))
        .collect()
}

/// Every verifier error of `file`: `in @f, block body: MESSAGE (`the line`)`.
pub(crate) fn verifier_errors(file: &Path, errors: &VerifierErrors) -> Vec<Diagnostic> {
    errors
        .0
        .iter()
        .map(|e| Diagnostic::at(file, e.pos, e.to_string()))
        .collect()
}

/// A runtime error of the program in `file`: `in @f, load: index 7 out of bounds ...`.
///
/// The position goes in front, as in every diagnostic, so this does not use
/// `InterpError`'s own `Display` (which puts it after the op).
pub(crate) fn interp_error(file: &Path, e: &InterpError) -> Diagnostic {
    let func = &e.func;
    let mut message = if e.op.is_empty() {
        format!("in @{func}: {}", e.kind)
    } else {
        format!("in @{func}, {}: {}", e.op, e.kind)
    };
    if matches!(e.kind, ErrorKind::UnboundExtern(_)) {
        message.push_str(" (the command line has no host functions: call it from Rust)");
    }
    Diagnostic::at(file, e.pos, message)
}

#[cfg(test)]
mod tests {
    use super::*;
    use gradlift_ir::{ParseError, VerifierError};

    #[test]
    fn diagnostics_say_where_when_known() {
        let file = Path::new("dir/f.ir");
        assert_eq!(
            Diagnostic::at(file, Pos::new(3, 5), "boom").to_string(),
            "dir/f.ir:3:5: error: boom"
        );
        assert_eq!(
            Diagnostic::at(file, Pos::NONE, "boom").to_string(),
            "dir/f.ir: error: boom"
        );
        assert_eq!(Diagnostic::new("boom").to_string(), "error: boom");
    }

    #[test]
    fn every_parse_error_is_reported() {
        let errors = ParseErrors(vec![
            ParseError {
                pos: Pos::new(1, 9),
                message: "expected a name after `%`".into(),
            },
            ParseError {
                pos: Pos::new(7, 2),
                message: "unknown op `fadd2`".into(),
            },
        ]);
        let lines: Vec<String> = parse_errors(Path::new("a.ir"), &errors)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            lines,
            [
                "a.ir:1:9: error: expected a name after `%`",
                "a.ir:7:2: error: unknown op `fadd2`"
            ]
        );
    }

    #[test]
    fn verifier_errors_name_function_and_entity() {
        let errors = VerifierErrors(vec![
            VerifierError {
                func: Some("f".into()),
                pos: Pos::new(3, 5),
                location: "block body".into(),
                context: String::new(),
                message: "use of %x is not dominated by its definition".into(),
            },
            VerifierError {
                func: None,
                pos: Pos::NONE,
                location: "@g".into(),
                context: String::new(),
                message: "declared but never defined".into(),
            },
        ]);
        let lines: Vec<String> = verifier_errors(Path::new("a.ir"), &errors)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            lines,
            [
                "a.ir:3:5: error: in @f, block body: use of %x is not dominated by its definition",
                "a.ir: error: @g: declared but never defined",
            ]
        );
    }

    #[test]
    fn runtime_errors_name_function_and_op() {
        let e = InterpError {
            func: "rosenbrock".into(),
            op: "load".into(),
            pos: Pos::new(14, 5),
            kind: ErrorKind::OutOfBounds { index: 3, len: 3 },
        };
        assert_eq!(
            interp_error(Path::new("r.ir"), &e).to_string(),
            "r.ir:14:5: error: in @rosenbrock, load: index 3 out of bounds for length 3"
        );
        let e = InterpError {
            func: "f".into(),
            op: String::new(),
            pos: Pos::NONE,
            kind: ErrorKind::RecursionLimit(10_000),
        };
        assert_eq!(
            interp_error(Path::new("r.ir"), &e).to_string(),
            "r.ir: error: in @f: calls nested deeper than 10000"
        );
    }
}
