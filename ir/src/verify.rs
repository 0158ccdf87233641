//! The verifier. (Stub: being written.)

use core::fmt;

use crate::function::Pos;
use crate::module::Module;

/// One broken invariant: where it is and what is wrong.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct VerifierError {
    /// The function (without `@`), if the error is inside one.
    pub func: Option<String>,
    /// The source position of the offending entity, when the function was parsed.
    pub pos: Pos,
    /// The entity, as the text format names it: `block body`, `%acc1`, `@f`.
    pub location: String,
    /// The offending line as the printer writes it (empty if there is none).
    pub context: String,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for VerifierError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(func) = &self.func {
            write!(f, "in @{func}, ")?;
        }
        write!(f, "{}: {}", self.location, self.message)?;
        if !self.context.is_empty() {
            write!(f, " (`{}`)", self.context)?;
        }
        Ok(())
    }
}

impl std::error::Error for VerifierError {}

/// Every error the verifier found (at least one).
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct VerifierErrors(pub Vec<VerifierError>);

impl fmt::Display for VerifierErrors {
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

impl std::error::Error for VerifierErrors {}

/// Checks every invariant of every function and declaration of `module`.
pub fn verify(_module: &Module) -> Result<(), VerifierErrors> {
    Ok(())
}
