//! Why a rule could not be derived: [`AdError`].
//!
//! Errors in the request (an activity that does not fit its parameter, a function
//! that does not verify) and features this version does not derive yet are the
//! caller's to fix or wait for; [`AdError::Internal`] is a bug in gradlift (derived
//! code that fails to verify, or a plan that the assembly finds inconsistent), as
//! Cranelift documents `CodegenError::Verifier` on its own output: which bug is an
//! [`InternalError`].
//!
//! Each error's `Display` says everything, inner errors included (the verifier's
//! list, the builder's message), so `source()` is `None`: printing the chain of
//! sources repeats nothing.

use core::fmt;

use gradlift_ir::{BuildError, ModuleError, Type, VerifierErrors};

use crate::config::Activity;
use crate::frule::DualActivity;

/// Why [`build_rrule`](crate::build_rrule()) could not derive a rule.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum AdError {
    /// The function ID names no function of the module.
    NoSuchFunction(String),
    /// The function has no IR body (`extern`, or declared and not defined) and no
    /// declaration (`vjp`, `nodiff`, `overlay`) that says how to differentiate it.
    NotDefined {
        /// The function.
        func: String,
    },
    /// The function does not verify; derivation reads only verified IR.
    Invalid {
        /// The function.
        func: String,
        /// What the verifier found.
        errors: VerifierErrors,
    },
    /// The configuration has a different number of activities than the function has
    /// parameters.
    ActivityCount {
        /// The function.
        func: String,
        /// Its parameters.
        expected: usize,
        /// The activities given.
        found: usize,
    },
    /// An activity that does not fit its parameter's type (`active` on an `i64`,
    /// `dup` on a scalar, ...).
    BadActivity {
        /// The function.
        func: String,
        /// The parameter's index, from 0.
        param: usize,
        /// The parameter's name as printed (without `%`).
        name: String,
        /// Its type.
        ty: Type,
        /// The activity asked for.
        activity: Activity,
    },
    /// A forward-mode activity that does not fit its parameter's type (`dual` on
    /// an `i64` or a `bool`).
    BadDualActivity {
        /// The function.
        func: String,
        /// The parameter's index, from 0.
        param: usize,
        /// The parameter's name as printed (without `%`).
        name: String,
        /// Its type.
        ty: Type,
        /// The activity asked for.
        activity: DualActivity,
    },
    /// Something this version of the derivation does not handle yet.
    Unsupported {
        /// The function.
        func: String,
        /// What, and when it arrives.
        what: String,
    },
    /// A call whose derivative is needed, to a function without one: an `extern`
    /// (or a declared function) with no `vjp` or `nodiff` declaration.
    NoDerivative {
        /// The function being derived.
        func: String,
        /// The callee.
        callee: String,
        /// The call, as printed, and where it stands.
        at: String,
    },
    /// Values that depend on active inputs are stored into a `const` slice that is
    /// read back: the derivative through it would be lost.
    ConstWrite {
        /// The function being derived.
        func: String,
        /// The slice parameter's name (without `%`).
        slice: String,
        /// The store (or call) that writes into it, and where it stands.
        at: String,
    },
    /// Forward mode: a call whose derivative is needed, to a function without a
    /// forward one: an `extern` (or a declared function) with no `jvp` or `nodiff`
    /// declaration.
    NoForwardDerivative {
        /// The function being derived.
        func: String,
        /// The callee.
        callee: String,
        /// The call, as printed, and where it stands.
        at: String,
    },
    /// Forward mode: values that vary with the `dual` inputs are stored into a
    /// `const` slice that is read back: the tangent through it would be lost.
    ConstWriteForward {
        /// The function being derived.
        func: String,
        /// The slice parameter's name (without `%`).
        slice: String,
        /// The store (or call) that writes into it, and where it stands.
        at: String,
    },
    /// A bug in gradlift: the derived code is broken.
    Internal {
        /// The function being derived.
        func: String,
        /// What went wrong.
        error: InternalError,
    },
}

/// A bug in gradlift found while deriving a rule, carried by [`AdError::Internal`]:
/// the derivation's own steps disagree (the plan asks for a value that no step
/// makes), or its output is refused by the module, the builder or the verifier.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum InternalError {
    /// A derived function does not verify.
    Unverified {
        /// The derived function.
        func: String,
        /// What the verifier found.
        errors: VerifierErrors,
    },
    /// The module refused to declare or define a derived function.
    Module(ModuleError),
    /// The builder refused the pullback.
    Build(BuildError),
    /// The plan saves something the forward pass never made (a buffer handle of an
    /// `alloc` that is not kept on the tape).
    NeverMade {
        /// What, as the plan's debug output prints it (`Buf(v3)`: the handle of the
        /// buffer `v3`).
        item: String,
    },
    /// A reverse block reads a primal value that was neither saved nor can be had
    /// otherwise.
    NotSaved {
        /// The value's name (without `%`).
        value: String,
    },
    /// A reverse block needs a buffer handle that was neither pushed for it nor
    /// saved once.
    HandleNotSaved {
        /// Which handle, as the plan's debug output prints it (`Shadow(v3)`: the
        /// handle of the shadow of `v3`).
        item: String,
        /// Whether the handle was looked for among the values saved once.
        once: bool,
    },
    /// A tape buffer's value is not a slice.
    NotASlice {
        /// The value's name (without `%`).
        value: String,
    },
    /// An instruction that makes a result made none.
    NoResult {
        /// The instruction's opcode.
        opcode: String,
    },
    /// The reverse rule of an instruction read an operand or result that was not
    /// saved.
    RuleReadUnsaved {
        /// The instruction's opcode.
        opcode: String,
        /// What it read.
        what: String,
    },
    /// A call without a callee.
    NoCallee,
    /// The optimiser refused a derived function (it inlines the steps of a
    /// checkpointed loop's rule).
    Optimize(String),
    /// A derived function could not be widened to width N: a value carried by
    /// lane reaches something that has no lanes (see `widen`).
    Widen {
        /// The derived function.
        func: String,
        /// What.
        what: String,
    },
    /// The fused value-and-gradient function (`fuse`) met a function that is not
    /// of the shape the shape check accepted.
    Fuse {
        /// What.
        what: &'static str,
    },
}

impl fmt::Display for InternalError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InternalError::Unverified { func, errors } => {
                write!(f, "@{func} does not verify:\n{errors}")
            }
            InternalError::Module(e) => write!(f, "{e}"),
            InternalError::Build(e) => write!(f, "{e}"),
            InternalError::NeverMade { item } => {
                write!(f, "the plan saves {item}, never made")
            }
            InternalError::NotSaved { value } => {
                write!(f, "%{value} is read but was not saved")
            }
            InternalError::HandleNotSaved { item, once: true } => {
                write!(f, "the handle {item} was neither pushed nor saved once")
            }
            InternalError::HandleNotSaved { item, once: false } => {
                write!(f, "the handle {item} was not saved")
            }
            InternalError::NotASlice { value } => write!(f, "%{value} is not a slice"),
            InternalError::NoResult { opcode } => write!(f, "`{opcode}` made no result"),
            InternalError::RuleReadUnsaved { opcode, what } => {
                write!(f, "the rule of `{opcode}` read something not saved: {what}")
            }
            InternalError::NoCallee => write!(f, "a call without a callee"),
            InternalError::Optimize(e) => {
                write!(f, "the optimiser refused a checkpointed loop's rule: {e}")
            }
            InternalError::Widen { func, what } => {
                write!(f, "widening @{func} to several lanes: {what}")
            }
            InternalError::Fuse { what } => write!(f, "fusing the sweeps: {what}"),
        }
    }
}

impl std::error::Error for InternalError {}

impl AdError {
    /// Whether a call whose callee's rule fails with this error still lets its
    /// caller be derived, failing at run time only if the call is reached (lazy
    /// derivation, `docs/reverse-mode.md`): a callee without a derivative, a
    /// construct the derivation refuses. Bad requests and bugs fail at once.
    pub fn is_deferred(&self) -> bool {
        matches!(
            self,
            AdError::NotDefined { .. }
                | AdError::Unsupported { .. }
                | AdError::NoDerivative { .. }
                | AdError::ConstWrite { .. }
                | AdError::NoForwardDerivative { .. }
                | AdError::ConstWriteForward { .. }
        )
    }
}

impl fmt::Display for AdError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AdError::NoSuchFunction(id) => write!(f, "the module has no function {id}"),
            AdError::NoDerivative { func, callee, at } => write!(
                f,
                "@{func}: {at} needs the derivative of @{callee}, which has none: declare `vjp @{callee} = @RULE` with a rule function (which may itself be an extern the host supplies), or `nodiff @{callee}` if its results are constants"
            ),
            AdError::NoForwardDerivative { func, callee, at } => write!(
                f,
                "@{func}: {at} needs the forward derivative of @{callee}, which has none: declare `jvp @{callee} = @RULE` with a rule function (which may itself be an extern the host supplies), or `nodiff @{callee}` if its results are constants"
            ),
            AdError::ConstWriteForward { func, slice, at } => write!(
                f,
                "@{func}: {at} stores values that vary with the `dual` inputs into %{slice}, which is `const`, and %{slice} is read back: its tangent would be lost; make %{slice} `dual`"
            ),
            AdError::ConstWrite { func, slice, at } => write!(
                f,
                "@{func}: {at} stores values that depend on active inputs into %{slice}, which is `const`, and %{slice} is read back: the derivative through it would be lost; make %{slice} `dup`"
            ),
            AdError::NotDefined { func } => write!(
                f,
                "@{func} has no IR body (extern or not defined) and no `vjp` or `nodiff` declaration: nothing to differentiate"
            ),
            AdError::Invalid { func, errors } => {
                write!(
                    f,
                    "@{func} does not verify, so it cannot be differentiated:\n{errors}"
                )
            }
            AdError::ActivityCount {
                func,
                expected,
                found,
            } => write!(
                f,
                "@{func} has {expected} parameter{}, but {found} activit{} given",
                if *expected == 1 { "" } else { "s" },
                if *found == 1 { "y was" } else { "ies were" }
            ),
            AdError::BadActivity {
                func,
                param,
                name,
                ty,
                activity,
            } => {
                let why = match activity {
                    Activity::Active if ty.is_slice() => {
                        "`active` is for float scalars; a float slice is `dup` or `dupnoneed`"
                    }
                    Activity::Active => {
                        "`active` is for float scalars; integers and bools are `const`"
                    }
                    Activity::Dup | Activity::DupNoNeed if ty.is_slice() => {
                        "`dup` and `dupnoneed` are for float slices; an i64 slice is `const`"
                    }
                    Activity::Dup | Activity::DupNoNeed if ty.is_float() => {
                        "`dup` and `dupnoneed` are for float slices; a float scalar is `active` or `const`"
                    }
                    Activity::Dup | Activity::DupNoNeed => {
                        "`dup` and `dupnoneed` are for float slices; integers and bools are `const`"
                    }
                    Activity::Const => "`const` fits every type",
                };
                write!(
                    f,
                    "parameter {} (%{name}: {ty}) of @{func} cannot be `{activity}`: {why}",
                    param + 1
                )
            }
            AdError::BadDualActivity {
                func,
                param,
                name,
                ty,
                activity,
            } => write!(
                f,
                "parameter {} (%{name}: {ty}) of @{func} cannot be `{activity}`: `dual` is for float scalars and float slices; integers, bools and integer slices are `const`",
                param + 1
            ),
            AdError::Unsupported { func, what } => {
                write!(f, "cannot differentiate @{func} yet: {what}")
            }
            AdError::Internal { func, error } => write!(
                f,
                "internal error (a bug in gradlift) while differentiating @{func}: {error}"
            ),
        }
    }
}

impl std::error::Error for AdError {}
