//! The `--activity` option: one activity per parameter, and optionally the return's.
//!
//! For reverse mode (`grad`, and `dump` of the reverse-mode stages) it is written
//! `dup,const->active`: comma-separated activities (`active`, `dup`, `dupnoneed`,
//! `const`), one per parameter, then optionally `->` and the return's activity
//! (`active` or `const`). For forward mode (`jvp`, `dump --stage jvp`) it is written
//! `dual,const->dualonly`: `dual` or `const` per parameter, then optionally `->dual`,
//! `->dualonly` or `->const`. `->active` (`->dual`) alone is a function without
//! parameters. This module checks the syntax only and speaks the library's
//! [`Activity`] and [`RetActivity`] ([`DualActivity`] and [`DualRet`]); whether each
//! activity fits its parameter's type is for
//! [`build_rrule`](gradlift_adjoint::build_rrule()) ([`build_frule`](gradlift_adjoint::build_frule()))
//! to say, and [`ActivityList::config`] ([`DualActivityList::config`]) applies a list
//! to a function's default [`RuleConfig`] ([`FruleConfig`]).

use core::fmt;

use gradlift_adjoint::{Activity, DualActivity, DualRet, FruleConfig, RetActivity, RuleConfig};
use gradlift_ir::Signature;

/// Every parameter activity, in the order error messages list them.
const PARAMS: [Activity; 4] = [
    Activity::Active,
    Activity::Dup,
    Activity::DupNoNeed,
    Activity::Const,
];

/// Every return activity.
const RETS: [RetActivity; 2] = [RetActivity::Active, RetActivity::Const];

/// Every parameter activity of forward mode.
const DUAL_PARAMS: [DualActivity; 2] = [DualActivity::Dual, DualActivity::Const];

/// Every return activity of forward mode.
const DUAL_RETS: [DualRet; 3] = [DualRet::Dual, DualRet::DualOnly, DualRet::Const];

/// A parsed `--activity` value.
#[derive(Clone, PartialEq, Eq, Debug)]
pub(crate) struct ActivityList {
    /// One per parameter, in order.
    pub params: Vec<Activity>,
    /// The return's activity, if given.
    pub ret: Option<RetActivity>,
}

impl ActivityList {
    /// Parses `dup,const->active`. Whitespace around the words is ignored.
    pub fn parse(text: &str) -> Result<ActivityList, String> {
        let (params, ret) = parse_list(text, &PARAMS, Activity::name, &RETS, RetActivity::name)?;
        Ok(ActivityList { params, ret })
    }

    /// The configuration for a function of signature `sig`: its defaults
    /// ([`RuleConfig::default_for`]) with `list`'s parameter activities and, if
    /// given, its return's. Whether the list fits the signature (its length, each
    /// activity's type) is checked by `build_rrule`.
    pub fn config(list: Option<&ActivityList>, sig: &Signature) -> RuleConfig {
        let mut config = RuleConfig::default_for(sig);
        if let Some(list) = list {
            config.params.clone_from(&list.params);
            if let Some(ret) = list.ret {
                config.ret = ret;
            }
        }
        config
    }
}

/// A parsed forward-mode `--activity` value (`jvp`, `dump --stage jvp`).
#[derive(Clone, PartialEq, Eq, Debug)]
pub(crate) struct DualActivityList {
    /// One per parameter, in order.
    pub params: Vec<DualActivity>,
    /// The return's activity, if given.
    pub ret: Option<DualRet>,
}

impl DualActivityList {
    /// Parses `dual,const->dualonly`. Whitespace around the words is ignored.
    pub fn parse(text: &str) -> Result<DualActivityList, String> {
        let (params, ret) = parse_list(
            text,
            &DUAL_PARAMS,
            DualActivity::name,
            &DUAL_RETS,
            DualRet::name,
        )?;
        Ok(DualActivityList { params, ret })
    }

    /// The forward-mode configuration for a function of signature `sig`: its
    /// defaults ([`FruleConfig::default_for`]) with `list`'s parameter activities
    /// and, if given, its return's, at width 1. Whether the list fits the signature
    /// is checked by `build_frule`.
    pub fn config(list: Option<&DualActivityList>, sig: &Signature) -> FruleConfig {
        let mut config = FruleConfig::default_for(sig);
        if let Some(list) = list {
            config.params.clone_from(&list.params);
            if let Some(ret) = list.ret {
                config.ret = ret;
            }
        }
        config
    }
}

/// Prints in the canonical form `dual,const->dualonly`.
impl fmt::Display for DualActivityList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, a) in self.params.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{a}")?;
        }
        if let Some(ret) = self.ret {
            write!(f, "->{ret}")?;
        }
        Ok(())
    }
}

/// `dump`'s `--activity`: a list for the reverse-mode stages or for `--stage jvp`,
/// whichever it parses as (`const` parses as both); the stage decides which is
/// used, and a list of the other kind is a usage error then.
#[derive(Clone, PartialEq, Eq, Debug)]
pub(crate) struct AnyActivityList {
    /// The list as reverse mode reads it, or why it does not read.
    pub reverse: Result<ActivityList, String>,
    /// The list as forward mode reads it, or why it does not read.
    pub forward: Result<DualActivityList, String>,
}

impl AnyActivityList {
    /// Parses a list of either kind; an error when it is neither.
    pub fn parse(text: &str) -> Result<AnyActivityList, String> {
        let list = AnyActivityList {
            reverse: ActivityList::parse(text),
            forward: DualActivityList::parse(text),
        };
        match (&list.reverse, &list.forward) {
            (Err(reverse), Err(forward)) => Err(format!(
                "{reverse}; nor is it a list for `--stage jvp`: {forward}"
            )),
            _ => Ok(list),
        }
    }
}

/// `params->ret`: one word per parameter from `params`, and the return's from
/// `rets` after `->`, if given.
fn parse_list<P: Copy, R: Copy>(
    text: &str,
    params: &[P],
    param_name: fn(P) -> &'static str,
    rets: &[R],
    ret_name: fn(R) -> &'static str,
) -> Result<(Vec<P>, Option<R>), String> {
    let (list, ret) = match text.split_once("->") {
        Some((list, ret)) => (list, Some(ret)),
        None => (text, None),
    };
    let list = if list.trim().is_empty() && ret.is_some() {
        Vec::new()
    } else {
        list.split(',')
            .map(|word| word_to(word, params, param_name, "a parameter"))
            .collect::<Result<_, _>>()?
    };
    let ret = ret
        .map(|word| word_to(word, rets, ret_name, "the return"))
        .transpose()?;
    Ok((list, ret))
}

/// One word, which must name one of `allowed`.
fn word_to<A: Copy>(
    word: &str,
    allowed: &[A],
    name: fn(A) -> &'static str,
    what: &str,
) -> Result<A, String> {
    let word = word.trim();
    allowed
        .iter()
        .copied()
        .find(|&a| name(a) == word)
        .ok_or_else(|| {
            let names: Vec<&str> = allowed.iter().map(|&a| name(a)).collect();
            format!(
                "`{word}` is not an activity for {what} (expected one of: {})",
                names.join(", ")
            )
        })
}

/// Prints in the canonical form `dup,const->active`.
impl fmt::Display for ActivityList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, a) in self.params.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{a}")?;
        }
        if let Some(ret) = self.ret {
            write!(f, "->{ret}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Activity::*;

    #[track_caller]
    fn ok(text: &str, params: &[Activity], ret: Option<RetActivity>) {
        assert_eq!(
            ActivityList::parse(text),
            Ok(ActivityList {
                params: params.to_vec(),
                ret
            }),
            "{text}"
        );
    }

    #[track_caller]
    fn err(text: &str, fragment: &str) {
        match ActivityList::parse(text) {
            Ok(list) => panic!("{text}: parsed as {list:?}"),
            Err(e) => assert!(e.contains(fragment), "{text}: {e}"),
        }
    }

    #[test]
    fn lists_parse() {
        ok(
            "dup,const->active",
            &[Dup, Const],
            Some(RetActivity::Active),
        );
        ok("active", &[Active], None);
        ok(
            "dupnoneed, const -> const",
            &[DupNoNeed, Const],
            Some(RetActivity::Const),
        );
        ok("->active", &[], Some(RetActivity::Active));
    }

    #[test]
    fn bad_lists_say_what_is_wrong() {
        err("dup,bogus", "`bogus` is not an activity for a parameter");
        err("dup,,const", "`` is not an activity");
        err("", "`` is not an activity");
        err(
            "dup->dup",
            "`dup` is not an activity for the return (expected one of: active, const)",
        );
        err("dup->active->const", "`active->const`");
    }

    #[test]
    fn display_is_canonical() {
        for text in ["dup,const->active", "active", "->const", "dupnoneed,dup"] {
            assert_eq!(
                ActivityList::parse(text).map(|l| l.to_string()),
                Ok(text.to_string())
            );
        }
    }

    #[test]
    fn forward_lists_parse_and_print() {
        use DualActivity::{Const as C, Dual as D};
        assert_eq!(
            DualActivityList::parse("dual, const -> dualonly"),
            Ok(DualActivityList {
                params: vec![D, C],
                ret: Some(DualRet::DualOnly)
            })
        );
        assert_eq!(
            DualActivityList::parse("->const"),
            Ok(DualActivityList {
                params: vec![],
                ret: Some(DualRet::Const)
            })
        );
        for text in [
            "dual,const->dualonly",
            "dual",
            "->dual",
            "const,const->const",
        ] {
            assert_eq!(
                DualActivityList::parse(text).map(|l| l.to_string()),
                Ok(text.to_string())
            );
        }
        assert_eq!(
            DualActivityList::parse("dual,active"),
            Err(
                "`active` is not an activity for a parameter (expected one of: dual, const)".into()
            )
        );
        assert_eq!(
            DualActivityList::parse("dual->active"),
            Err(
                "`active` is not an activity for the return (expected one of: dual, dualonly, const)"
                    .into()
            )
        );
    }

    #[test]
    fn a_forward_list_overrides_the_default_config() {
        use gradlift_ir::Type;
        let sig = Signature::new([Type::F64, Type::I64], [Type::F64]);
        assert_eq!(
            DualActivityList::config(None, &sig),
            FruleConfig::default_for(&sig)
        );
        let list = DualActivityList::parse("const,const->dualonly").expect("parses");
        let c = DualActivityList::config(Some(&list), &sig);
        assert_eq!(
            (c.params.as_slice(), c.ret, c.width),
            (
                [DualActivity::Const, DualActivity::Const].as_slice(),
                DualRet::DualOnly,
                1
            )
        );
    }

    #[test]
    fn dump_lists_are_either_kind() {
        let both = AnyActivityList::parse("const->const").expect("parses");
        assert!(both.reverse.is_ok() && both.forward.is_ok());
        let reverse = AnyActivityList::parse("dup,const").expect("parses");
        assert!(reverse.reverse.is_ok() && reverse.forward.is_err());
        let forward = AnyActivityList::parse("dual->dualonly").expect("parses");
        assert!(forward.reverse.is_err() && forward.forward.is_ok());
        assert_eq!(
            AnyActivityList::parse("dup,bogus"),
            Err(
                "`bogus` is not an activity for a parameter (expected one of: active, dup, \
                 dupnoneed, const); nor is it a list for `--stage jvp`: `dup` is not an \
                 activity for a parameter (expected one of: dual, const)"
                    .into()
            )
        );
    }

    #[test]
    fn a_list_overrides_the_default_config() {
        use gradlift_ir::Type;
        let sig = Signature::new([Type::F64, Type::I64], [Type::F64]);
        assert_eq!(
            ActivityList::config(None, &sig),
            RuleConfig::default_for(&sig)
        );
        let list = ActivityList::parse("const,const->const").expect("parses");
        let c = ActivityList::config(Some(&list), &sig);
        assert_eq!(
            (c.params.as_slice(), c.ret),
            ([Const, Const].as_slice(), RetActivity::Const)
        );
        assert!(c.needs_primal);
        // Without `->`, the return keeps its default; a wrong count is kept for
        // `build_rrule` to refuse.
        let list = ActivityList::parse("const").expect("parses");
        let c = ActivityList::config(Some(&list), &sig);
        assert_eq!(
            (c.params.as_slice(), c.ret),
            ([Const].as_slice(), RetActivity::Active)
        );
    }
}
