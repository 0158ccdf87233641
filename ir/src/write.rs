//! The printer: IR to text. (Stub: being written.)

use core::fmt;

use crate::module::Module;

impl fmt::Display for Module {
    fn fmt(&self, _f: &mut fmt::Formatter<'_>) -> fmt::Result {
        Ok(())
    }
}
