//! Diagnostics: every error the CLI prints, in the `FILE:LINE:COL: error: MESSAGE` form.
//!
//! A [`Diagnostic`] knows the file and the position when they are known and prints
//! `FILE:LINE:COL: error: MESSAGE`, `FILE: error: MESSAGE` or `error: MESSAGE`
//! accordingly (`warning:` for the rare warning, which does not fail a command). The functions below turn the IR crate's errors (parse, verifier,
//! interpreter), the JIT's (compilation, run time) and the derivation's (`build_rrule`, `value_and_gradient`) into
//! diagnostics; the messages name the function, the op and the entity as the text
//! format writes them.

use core::fmt;
use std::path::Path;

use gradlift_adjoint::{AdError, EvalError};
use gradlift_ir::{ErrorKind, FuncId, Module, ParseErrors, Pos, RunError, VerifierErrors};
use gradlift_jit::CompileError;

/// One error, with where it is when that is known.
#[derive(Clone, PartialEq, Eq, Debug)]
pub(crate) struct Diagnostic {
    /// The file, as the user named it.
    file: Option<String>,
    /// The position in the file ([`Pos::NONE`] if unknown).
    pos: Pos,
    /// What is wrong, as a sentence without a trailing period.
    message: String,
    /// A warning (`warning:`) rather than an error (`error:`).
    warning: bool,
}

impl Diagnostic {
    /// An error about no file in particular: `error: MESSAGE`.
    pub fn new(message: impl Into<String>) -> Diagnostic {
        Diagnostic {
            file: None,
            pos: Pos::NONE,
            message: message.into(),
            warning: false,
        }
    }

    /// An error in `file` at `pos`, or about the whole file if `pos` is [`Pos::NONE`].
    pub fn at(file: &Path, pos: Pos, message: impl Into<String>) -> Diagnostic {
        Diagnostic {
            file: Some(file.display().to_string()),
            pos,
            message: message.into(),
            warning: false,
        }
    }

    /// The same, with `prefix` in front of the message.
    pub fn prefixed(self, prefix: &str) -> Diagnostic {
        Diagnostic {
            message: format!("{prefix}{}", self.message),
            ..self
        }
    }

    /// The same, as a warning: it prints `warning:` instead of `error:`, and does
    /// not fail the command.
    pub fn into_warning(self) -> Diagnostic {
        Diagnostic {
            warning: true,
            ..self
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
        let severity = if self.warning { "warning" } else { "error" };
        write!(f, "{severity}: {}", self.message)
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

/// A runtime error of the program in `file`, on either engine: `in @f, load of %x:
/// index 7 out of bounds ...`.
///
/// The position goes in front, as in every diagnostic, so this does not use
/// `RunError`'s own `Display` (which puts it after the op).
pub(crate) fn run_error(file: &Path, e: &RunError) -> Diagnostic {
    let op = match &e.operand {
        Some(operand) => format!("{} of {operand}", e.op),
        None => e.op.clone(),
    };
    let mut message = runtime_message(&e.func, &op, &e.kind);
    if matches!(e.kind, ErrorKind::UnboundExtern(_)) {
        message.push_str(NO_HOST);
    }
    Diagnostic::at(file, e.pos, message)
}

/// What the command line adds to an error about calling an `extern` function.
const NO_HOST: &str = " (the command line has no host functions: call it from Rust)";

/// `in @f, op: KIND`, or `in @f: KIND` without an op.
fn runtime_message(func: &str, op: &str, kind: &dyn fmt::Display) -> String {
    if op.is_empty() {
        format!("in @{func}: {kind}")
    } else {
        format!("in @{func}, {op}: {kind}")
    }
}

/// An error of the pipeline (`gradlift::Pipeline`) on `@func` of `module`, read
/// from `file`: each stage's error reported as that stage reports it.
pub(crate) fn pipeline_error(
    file: &Path,
    module: &Module,
    func: FuncId,
    e: &gradlift::Error,
) -> Vec<Diagnostic> {
    match e {
        gradlift::Error::Verify(errors) => verifier_errors(file, errors),
        gradlift::Error::Derive(e) => vec![ad_error(file, module, func, e)],
        gradlift::Error::Compile(e) => compile_error(file, e),
        gradlift::Error::Run(e) => vec![run_error(file, e)],
        gradlift::Error::Optimize(_) | gradlift::Error::Tape { .. } => vec![Diagnostic::new(
            format!("internal error (a bug in gradlift): {e}"),
        )],
        e => vec![Diagnostic::new(e.to_string())],
    }
}

/// Why the JIT could not compile a function of `file`: an op or call it does not
/// compile (at its position), a module that does not verify (every error), or a
/// failure of code generation (a bug in gradlift).
pub(crate) fn compile_error(file: &Path, e: &CompileError) -> Vec<Diagnostic> {
    match e {
        CompileError::Verify(errors) => verifier_errors(file, errors),
        CompileError::Unsupported {
            func,
            op,
            pos,
            what,
        } => {
            let mut message = format!("in @{func}, {op}: the JIT cannot compile this: {what}");
            if op == "call" {
                message.push_str(NO_HOST);
            }
            vec![Diagnostic::at(file, *pos, message)]
        }
        CompileError::UnboundExtern { name, caller, pos } => vec![Diagnostic::at(
            file,
            *pos,
            format!("in @{caller}, call: @{name} is an extern function{NO_HOST}"),
        )],
        CompileError::NotDefined(_) => vec![Diagnostic::at(
            file,
            Pos::NONE,
            format!("the JIT cannot compile this: {e}"),
        )],
        _ => vec![Diagnostic::at(
            file,
            Pos::NONE,
            format!("internal error (a bug in gradlift) while compiling: {e}"),
        )],
    }
}

/// Why the derivation refused `@func` of `module` (read from `file`).
///
/// [`AdError`] carries no position; a parameter whose activity does not fit (in
/// reverse or forward mode) gets its own from the function's source map, every
/// other error is about the whole file.
pub(crate) fn ad_error(file: &Path, module: &Module, func: FuncId, e: &AdError) -> Diagnostic {
    let pos = match e {
        AdError::BadActivity { param, .. } | AdError::BadDualActivity { param, .. } => module
            .function(func)
            .and_then(|f| f.params.get(*param))
            .and_then(|&v| module.function(func)?.srcmap.values.get(v).copied())
            .unwrap_or(Pos::NONE),
        _ => Pos::NONE,
    };
    Diagnostic::at(file, pos, e.to_string())
}

/// Why running a rule failed: the arguments, seeds or shadows do not fit (a message
/// for the user as it stands), a runtime error of the forward pass or the pullback
/// (reported like `run` reports one), or an unbalanced tape (a bug).
pub(crate) fn eval_error(file: &Path, e: &EvalError) -> Diagnostic {
    match e {
        EvalError::BadArguments(message) => Diagnostic::new(message.clone()),
        EvalError::Run { error, .. } => run_error(file, error),
        EvalError::Tape { .. } => Diagnostic::new(format!(
            "internal error (a bug in gradlift) while computing the gradient: {e}"
        )),
        e => Diagnostic::new(e.to_string()),
    }
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
        assert_eq!(
            Diagnostic::at(file, Pos::NONE, "hm")
                .into_warning()
                .to_string(),
            "dir/f.ir: warning: hm"
        );
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
        let mut e = RunError {
            func: "rosenbrock".into(),
            op: "load".into(),
            pos: Pos::new(14, 5),
            operand: None,
            kind: ErrorKind::OutOfBounds { index: 3, len: 3 },
        };
        assert_eq!(
            run_error(Path::new("r.ir"), &e).to_string(),
            "r.ir:14:5: error: in @rosenbrock, load: index 3 out of bounds for length 3"
        );
        e.operand = Some("%x".into());
        assert_eq!(
            run_error(Path::new("r.ir"), &e).to_string(),
            "r.ir:14:5: error: in @rosenbrock, load of %x: index 3 out of bounds for length 3"
        );
        let e = RunError::refused("f", ErrorKind::RecursionLimit(10_000));
        assert_eq!(
            run_error(Path::new("r.ir"), &e).to_string(),
            "r.ir: error: in @f: calls nested deeper than 10000"
        );
        // A kind only the JIT reports.
        let e = RunError {
            func: "f".into(),
            op: "call".into(),
            pos: Pos::NONE,
            operand: None,
            kind: ErrorKind::StackExhausted(7),
        };
        assert_eq!(
            run_error(Path::new("r.ir"), &e).to_string(),
            "r.ir: error: in @f, call: native stack exhausted at call depth 7"
        );
    }

    #[test]
    fn compile_errors() {
        let file = Path::new("d.ir");
        let e = CompileError::Unsupported {
            func: "f".into(),
            op: "push".into(),
            pos: Pos::new(3, 5),
            what: "the tape".into(),
        };
        let lines: Vec<String> = compile_error(file, &e)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            lines,
            ["d.ir:3:5: error: in @f, push: the JIT cannot compile this: the tape"]
        );
        let e = CompileError::Codegen {
            func: Some("f".into()),
            message: "boom".into(),
        };
        assert_eq!(
            compile_error(file, &e)[0].to_string(),
            "d.ir: error: internal error (a bug in gradlift) while compiling: code \
             generation failed for @f: boom"
        );
    }

    #[test]
    fn derivation_errors_point_at_the_parameter_when_they_can() {
        use gradlift_adjoint::{Activity, RuleConfig, build_rrule};
        let module =
            gradlift_ir::parse("func @f(%x: f64, %n: i64) -> f64 {\nentry:\n    ret %x\n}\n")
                .expect("parses");
        let f = module.func_by_name("f").expect("@f");
        let derive = |params: &[Activity]| {
            let config = RuleConfig::default_for(module.sig(f)).with_params(params.to_vec());
            match build_rrule(&module, f, &config) {
                Ok(_) => panic!("{params:?} derived"),
                Err(e) => ad_error(Path::new("a.ir"), &module, f, &e).to_string(),
            }
        };
        assert_eq!(
            derive(&[Activity::Active, Activity::Active]),
            "a.ir:1:18: error: parameter 2 (%n: i64) of @f cannot be `active`: `active` is \
             for float scalars; integers and bools are `const`"
        );
        assert_eq!(
            derive(&[Activity::Active]),
            "a.ir: error: @f has 2 parameters, but 1 activity was given"
        );
    }

    #[test]
    fn evaluation_errors() {
        let file = Path::new("a.ir");
        assert_eq!(
            eval_error(
                file,
                &EvalError::BadArguments("@f takes 2 arguments".into())
            )
            .to_string(),
            "error: @f takes 2 arguments"
        );
        let run = EvalError::Run {
            what: "@f.rvs".into(),
            error: Box::new(RunError {
                func: "f.rvs".into(),
                op: "pop".into(),
                pos: Pos::NONE,
                operand: None,
                kind: ErrorKind::TapeUnderflow,
            }),
        };
        assert!(
            eval_error(file, &run)
                .to_string()
                .starts_with("a.ir: error: in @f.rvs, pop: "),
            "{}",
            eval_error(file, &run)
        );
        assert_eq!(
            eval_error(
                file,
                &EvalError::Tape {
                    before: 0,
                    after: 1
                }
            )
            .to_string(),
            "error: internal error (a bug in gradlift) while computing the gradient: the \
             tape held 0 scalars before the forward pass and 1 after the pullback"
        );
    }
}
