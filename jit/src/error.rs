//! The JIT's own errors: [`CompileError`], when a module cannot be compiled. A
//! compiled call that fails at run time returns the engine contract's
//! [`RunError`](gradlift_ir::RunError), with the same kinds as the interpreter's.

use core::fmt;

use gradlift_ir::{Pos, VerifierErrors};

/// Why a module (or some of its functions) could not be compiled.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum CompileError {
    /// The module does not verify: the JIT compiles verified IR only.
    Verify(VerifierErrors),
    /// A function uses something the JIT cannot compile: an op it has no lowering
    /// for, or a call it cannot make.
    Unsupported {
        /// The function (without `@`).
        func: String,
        /// The op (`push`, `call`, ...).
        op: String,
        /// Its source position, when the function was parsed.
        pos: Pos,
        /// What is not supported.
        what: String,
    },
    /// A compiled function calls an `extern` function that has no host function
    /// ([`Hosts`](crate::Hosts)).
    UnboundExtern {
        /// The extern function (without `@`).
        name: String,
        /// A function that calls it.
        caller: String,
        /// The call's source position, when the caller was parsed.
        pos: Pos,
    },
    /// A function asked for is not defined in the module (extern, declared only, or
    /// no such function).
    NotDefined(String),
    /// A function is larger than [`CompileOptions::max_insts`](crate::CompileOptions):
    /// refused before any code is generated for it.
    TooLarge {
        /// The function (without `@`).
        func: String,
        /// Its instructions (phis and terminators included).
        insts: usize,
        /// The limit it exceeds.
        limit: usize,
    },
    /// Cranelift refused the generated code, or the code memory could not be had: a
    /// bug in gradlift, or the machine is out of memory.
    Codegen {
        /// The function being compiled, if the failure concerns one.
        func: Option<String>,
        /// Cranelift's message.
        message: String,
    },
}

impl fmt::Display for CompileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CompileError::Verify(e) => write!(f, "the module does not verify:\n{e}"),
            CompileError::Unsupported {
                func,
                op,
                pos,
                what,
            } => {
                write!(f, "in @{func}, {op}")?;
                if pos.is_known() {
                    write!(f, " at {pos}")?;
                }
                write!(f, ": {what}")
            }
            CompileError::UnboundExtern { name, caller, pos } => {
                write!(f, "in @{caller}, call")?;
                if pos.is_known() {
                    write!(f, " at {pos}")?;
                }
                write!(
                    f,
                    ": @{name} is an extern function without a host function (bind one with Hosts::bind)"
                )
            }
            CompileError::NotDefined(name) => {
                write!(f, "@{name} has no IR body to compile")
            }
            CompileError::TooLarge { func, insts, limit } => write!(
                f,
                "@{func} has {insts} instructions, more than the JIT compiles ({limit}, \
                 CompileOptions::max_insts)"
            ),
            CompileError::Codegen { func, message } => {
                f.write_str("code generation failed")?;
                if let Some(func) = func {
                    write!(f, " for @{func}")?;
                }
                write!(f, ": {message}")
            }
        }
    }
}

impl std::error::Error for CompileError {}
