//! The parser: text to IR. (Stub: being written.)

use core::fmt;

use crate::function::Pos;
use crate::module::Module;

/// One error in IR text: where, and what.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct ParseError {
    /// Line and column of the offending token.
    pub pos: Pos,
    /// What is wrong, as a sentence without a trailing period.
    pub message: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.pos, self.message)
    }
}

impl std::error::Error for ParseError {}

/// Every error found in one text (at least one), in text order.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct ParseErrors(pub Vec<ParseError>);

impl fmt::Display for ParseErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ParseErrors {}

/// Parses a module from IR text.
pub fn parse(_text: &str) -> Result<Module, ParseErrors> {
    Err(ParseErrors(vec![ParseError {
        pos: Pos::new(1, 1),
        message: "the parser is not written yet".into(),
    }]))
}
