//! The `--activity` option: one activity per parameter, and optionally the return's.
//!
//! Written `dup,const->active`: comma-separated activities (`active`, `dup`,
//! `dupnoneed`, `const`), one per parameter, then optionally `->` and the return's
//! activity (`active` or `const`). `->active` alone is a function without parameters.
//! This module checks the syntax only and speaks the library's [`Activity`] and
//! [`RetActivity`]; whether each activity fits its parameter's type is for
//! [`build_rrule`](gradlift_adjoint::build_rrule()) to say, and [`ActivityList::config`]
//! applies a list to a function's default [`RuleConfig`].

use core::fmt;

use gradlift_adjoint::{Activity, RetActivity, RuleConfig};
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
        let (params, ret) = match text.split_once("->") {
            Some((params, ret)) => (params, Some(ret)),
            None => (text, None),
        };
        let params = if params.trim().is_empty() && ret.is_some() {
            Vec::new()
        } else {
            params
                .split(',')
                .map(|word| word_to(word, &PARAMS, Activity::name, "a parameter"))
                .collect::<Result<_, _>>()?
        };
        let ret = ret
            .map(|word| word_to(word, &RETS, RetActivity::name, "the return"))
            .transpose()?;
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
