//! What a rule is asked for: one [`Activity`] per parameter, the return's
//! [`RetActivity`], whether the primal result is needed, and debug mode.
//!
//! The activities are Enzyme's (`docs/ir-text.md`, "Differentiation"):
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

/// What the forward pass saves on the tape for the pullback.
///
/// Both policies give the same gradients (tests check it on every corpus); they
/// differ in tape size and speed. The policy applies to the whole derivation: a
/// rule's callees are derived with the same one.
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug, Default)]
pub enum TapePolicy {
    /// Every value a block's reverse reads is pushed at the end of that block, and
    /// every block with several predecessors pushes which one control came from
    /// (Mooncake's scheme, as first implemented): simple, and the tape grows with
    /// every iteration of every loop.
    SaveAll,
    /// Save only what cannot be had otherwise (see `docs/reverse-mode.md`, "Tape
    /// policy"): a counted loop is reversed by its induction variable (no block-stack
    /// entry per iteration); values loaded from read-only slices are loaded again by
    /// the pullback; cheap pure values are recomputed; values defined once per call
    /// are pushed once; a two-way branch is replayed from its condition when the
    /// pullback can recompute it.
    #[default]
    Minimal,
}

impl TapePolicy {
    /// The policy's name on the command line (`save-all`, `minimal`).
    pub fn name(self) -> &'static str {
        match self {
            TapePolicy::SaveAll => "save-all",
            TapePolicy::Minimal => "minimal",
        }
    }
}

impl fmt::Display for TapePolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl core::str::FromStr for TapePolicy {
    type Err = String;

    fn from_str(s: &str) -> Result<TapePolicy, String> {
        match s {
            "save-all" => Ok(TapePolicy::SaveAll),
            "minimal" => Ok(TapePolicy::Minimal),
            _ => Err(format!(
                "unknown tape policy `{s}` (expected `save-all` or `minimal`)"
            )),
        }
    }
}

/// What [`build_rrule`](crate::build_rrule()) derives: the activity of every
/// parameter and of the return, whether the forward pass returns the primal results,
/// the tape policy, and debug mode.
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
    /// What the forward pass saves for the pullback.
    pub tape: TapePolicy,
    /// Per parameter: whether it is a read-only slice (`[T]`) whose contents are the
    /// same when the pullback runs as during the forward pass, so the pullback may
    /// load from it again instead of having its values saved. True by default for
    /// every `[T]` parameter: the engine runs the forward pass and the pullback on the
    /// same arguments, and nothing writes into a `[T]`. A callee's `[T]` parameter
    /// is frozen when the caller passes it a frozen parameter of its own (a buffer
    /// the caller may write into later is not). Entries for other types are ignored;
    /// a missing entry is false.
    pub frozen: Vec<bool>,
    /// Whether [`build_rrule`](crate::build_rrule()) may also write the fused
    /// value-and-gradient function ([`Rule::fused`](crate::Rule::fused)), which
    /// runs a reduction loop's reverse inside the loop itself (one sweep instead
    /// of two, no tape). It rounds as the forward pass and pullback do, except that
    /// terms added into one shadow element or one cotangent from several iterations
    /// are added in another order (see `docs/reverse-mode.md`, "Fused sweeps").
    /// True by default; a callee's rule is never fused.
    pub fuse: bool,
    /// The memory budget, in bytes, of each checkpointed loop
    /// (`checkpoint_loop`) whose marker does not give its number of snapshots
    /// (gives 0 or less): the loop keeps `bytes / (8 (c + 2))` snapshots of its
    /// `c` carried values (at least 1). `None` (the default): `ceil(sqrt(T))`
    /// snapshots for `T` steps. See `docs/checkpointing.md`.
    pub checkpoint_bytes: Option<u64>,
    /// With an active return, which results get a seed (by result index; only
    /// float results are ever seeded): `None`, the default, seeds every float
    /// result. The derivation sets it for the rules of checkpointed loops and
    /// their steps, whose results the caller may use only in part.
    pub seeded: Option<Vec<bool>>,
}

/// Whether a parameter of type `ty` may be [frozen](RuleConfig::frozen): a
/// read-only slice (`[T]`).
pub(crate) fn freezable(ty: Type) -> bool {
    ty.is_slice() && !ty.is_mut_slice()
}

impl RuleConfig {
    /// The defaults of `docs/ir-text.md` for a function of signature `sig`: `active`
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
            tape: TapePolicy::default(),
            frozen: sig
                .params
                .iter()
                .map(|t| t.is_slice() && !t.is_mut_slice())
                .collect(),
            fuse: true,
            checkpoint_bytes: None,
            seeded: None,
        }
    }

    /// Whether result `j` gets a seed under an active return (see
    /// [`RuleConfig::seeded`]); whether it is a float is the caller's to check.
    pub fn is_seeded(&self, j: usize) -> bool {
        self.ret == RetActivity::Active
            && self
                .seeded
                .as_ref()
                .is_none_or(|m| m.get(j).copied().unwrap_or(false))
    }

    /// The same configuration with a memory budget for checkpointed loops (see
    /// [`RuleConfig::checkpoint_bytes`]).
    pub fn with_checkpoint_bytes(mut self, bytes: Option<u64>) -> RuleConfig {
        self.checkpoint_bytes = bytes;
        self
    }

    /// The same configuration with fusion on or off (see [`RuleConfig::fuse`]).
    pub fn with_fuse(mut self, fuse: bool) -> RuleConfig {
        self.fuse = fuse;
        self
    }

    /// The same configuration with another tape policy.
    pub fn with_tape(mut self, tape: TapePolicy) -> RuleConfig {
        self.tape = tape;
        self
    }

    /// Whether parameter `i` is frozen (see [`RuleConfig::frozen`]).
    pub fn is_frozen(&self, i: usize) -> bool {
        self.frozen.get(i).copied().unwrap_or(false)
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
    /// the return's letter (`ADC_A`). A slice parameter that is not
    /// [frozen](RuleConfig::frozen) while its type would allow it is spelled in
    /// lower case (`dC_A`), when `sig` is given.
    pub fn pattern_for(&self, sig: Option<&Signature>) -> String {
        let mut s: String = self
            .params
            .iter()
            .enumerate()
            .map(|(i, a)| {
                let thawed = sig.is_some_and(|sig| {
                    sig.params.get(i).is_some_and(|&t| freezable(t)) && !self.is_frozen(i)
                });
                if thawed {
                    a.letter().to_ascii_lowercase()
                } else {
                    a.letter()
                }
            })
            .collect();
        s.push('_');
        s.push(self.ret.letter());
        s
    }

    /// The activity pattern as derived names spell it: one letter per parameter, `_`,
    /// the return's letter (`ADC_A`).
    pub fn pattern(&self) -> String {
        self.pattern_for(None)
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
