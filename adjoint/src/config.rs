//! What a rule is asked for: one [`Activity`] per parameter, the return's
//! [`RetActivity`], whether the primal result is needed, and debug mode.
//!
//! The activities are Enzyme's (`spec/ir-text.md`, "Differentiation semantics"):
//! `active` float scalars get their cotangent returned, `dup` float slices come with a
//! shadow that accumulates theirs, `const` parameters get none. Whether an activity
//! fits its parameter's type is checked by [`build_rrule`](crate::build_rrule()),
//! which says why when it does not.

use core::fmt;

use gradlift_ir::{Signature, Type};

/// How a parameter takes part in differentiation, as in Enzyme.
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug)]
pub enum Activity {
    /// A float scalar whose cotangent the pullback returns.
    Active,
    /// A float slice with a shadow slice that accumulates its cotangent (`+=`).
    Dup,
    /// Like [`Activity::Dup`], and the primal contents after the call may be garbage.
    DupNoNeed,
    /// No derivative: the parameter is a constant to differentiation.
    Const,
}

impl Activity {
    /// The activity's name in the text format and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Activity::Active => "active",
            Activity::Dup => "dup",
            Activity::DupNoNeed => "dupnoneed",
            Activity::Const => "const",
        }
    }

    /// The letter that names the activity in a derived function's name
    /// (`@f.fwd.ADC_A`).
    pub fn letter(self) -> char {
        match self {
            Activity::Active => 'A',
            Activity::Dup => 'D',
            Activity::DupNoNeed => 'N',
            Activity::Const => 'C',
        }
    }

    /// The default activity of a parameter of type `ty`: `active` for float scalars,
    /// `dup` for float slices, `const` for the rest.
    pub fn default_for(ty: Type) -> Activity {
        match ty {
            Type::F64 | Type::F32 => Activity::Active,
            Type::Slice { .. } if ty.is_differentiable() => Activity::Dup,
            _ => Activity::Const,
        }
    }
}

impl fmt::Display for Activity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How the results take part in differentiation.
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug)]
pub enum RetActivity {
    /// The pullback takes one cotangent per float result and propagates it.
    Active,
    /// The results are constants to differentiation: every cotangent is zero.
    Const,
}

impl RetActivity {
    /// The activity's name in the text format.
    pub fn name(self) -> &'static str {
        match self {
            RetActivity::Active => "active",
            RetActivity::Const => "const",
        }
    }

    /// The letter that names it in a derived function's name.
    pub fn letter(self) -> char {
        match self {
            RetActivity::Active => 'A',
            RetActivity::Const => 'C',
        }
    }
}

impl fmt::Display for RetActivity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What [`build_rrule`](crate::build_rrule()) derives: the activity of every
/// parameter and of the return, whether the forward pass returns the primal results,
/// and debug mode.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct RuleConfig {
    /// One activity per parameter, in order.
    pub params: Vec<Activity>,
    /// The return's activity.
    pub ret: RetActivity,
    /// Whether the forward pass returns the primal results (when false it returns
    /// nothing).
    pub needs_primal: bool,
    /// Debug mode: derived code that checks its own invariants at run time with
    /// `trap_if` (shadow lengths, the tape's balance per function) and fails with a
    /// message naming the function and the op.
    pub debug: bool,
    /// With [`RuleConfig::debug`], also check that no reverse statement creates a
    /// NaN (a NaN contribution from a cotangent that was not NaN).
    pub check_nan: bool,
}

impl RuleConfig {
    /// The defaults of `spec/ir-text.md` for a function of signature `sig`: `active`
    /// float scalars, `dup` float slices, `const` for everything else, an `active`
    /// return, the primal result needed, no debug mode.
    pub fn default_for(sig: &Signature) -> RuleConfig {
        RuleConfig {
            params: sig
                .params
                .iter()
                .map(|&t| Activity::default_for(t))
                .collect(),
            ret: RetActivity::Active,
            needs_primal: true,
            debug: false,
            check_nan: false,
        }
    }

    /// The same configuration with debug mode on or off; `check_nan` also checks
    /// that no reverse statement creates a NaN.
    pub fn with_debug(mut self, debug: bool, check_nan: bool) -> RuleConfig {
        self.debug = debug;
        self.check_nan = check_nan;
        self
    }

    /// The same configuration with other parameter activities.
    pub fn with_params(mut self, params: impl Into<Vec<Activity>>) -> RuleConfig {
        self.params = params.into();
        self
    }

    /// The same configuration with another return activity.
    pub fn with_ret(mut self, ret: RetActivity) -> RuleConfig {
        self.ret = ret;
        self
    }

    /// The same configuration, with or without the primal result.
    pub fn with_primal(mut self, needs_primal: bool) -> RuleConfig {
        self.needs_primal = needs_primal;
        self
    }

    /// The activity pattern as derived names spell it: one letter per parameter, `_`,
    /// the return's letter (`ADC_A`).
    pub fn pattern(&self) -> String {
        let mut s: String = self.params.iter().map(|a| a.letter()).collect();
        s.push('_');
        s.push(self.ret.letter());
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gradlift_ir::Elem;

    #[test]
    fn defaults_follow_the_text_format_spec() {
        let sig = Signature::new(
            [
                Type::F64,
                Type::F32,
                Type::I64,
                Type::Bool,
                Type::slice(Elem::F64),
                Type::slice_mut(Elem::F32),
                Type::slice(Elem::I64),
            ],
            [Type::F64],
        );
        let c = RuleConfig::default_for(&sig);
        use Activity::*;
        assert_eq!(c.params, [Active, Active, Const, Const, Dup, Dup, Const]);
        assert_eq!(c.ret, RetActivity::Active);
        assert!(c.needs_primal && !c.debug);
        assert_eq!(c.pattern(), "AACCDDC_A");
    }
}
