//! The `--activity` option: one activity per parameter, and optionally the return's.
//!
//! Written `dup,const->active`: comma-separated activities (`active`, `dup`,
//! `dupnoneed`, `const`), one per parameter, then optionally `->` and the return's
//! activity (`active` or `const`). `->active` alone is a function without parameters.
//! This module checks the syntax only; whether each activity fits its parameter's
//! type is for the derivation to say, once it exists.

use core::fmt;

/// How a parameter (or the result) takes part in differentiation, as in Enzyme.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub(crate) enum Activity {
    /// A float scalar whose cotangent is returned.
    Active,
    /// A float slice with a shadow that accumulates its cotangent.
    Dup,
    /// Like `Dup`, and the primal contents after the call may be garbage.
    DupNoNeed,
    /// No derivative.
    Const,
}

impl Activity {
    const ALL: [Activity; 4] = [
        Activity::Active,
        Activity::Dup,
        Activity::DupNoNeed,
        Activity::Const,
    ];

    /// The activity's name on the command line.
    fn name(self) -> &'static str {
        match self {
            Activity::Active => "active",
            Activity::Dup => "dup",
            Activity::DupNoNeed => "dupnoneed",
            Activity::Const => "const",
        }
    }
}

impl fmt::Display for Activity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A parsed `--activity` value.
#[derive(Clone, PartialEq, Eq, Debug)]
pub(crate) struct ActivityList {
    /// One per parameter, in order.
    pub params: Vec<Activity>,
    /// The return's activity, if given (`active` or `const`).
    pub ret: Option<Activity>,
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
                .map(|word| word_to_activity(word, &Activity::ALL))
                .collect::<Result<_, _>>()?
        };
        let ret = ret
            .map(|word| word_to_activity(word, &[Activity::Active, Activity::Const]))
            .transpose()?;
        Ok(ActivityList { params, ret })
    }
}

/// One word, which must name one of `allowed`.
fn word_to_activity(word: &str, allowed: &[Activity]) -> Result<Activity, String> {
    let word = word.trim();
    allowed
        .iter()
        .copied()
        .find(|a| a.name() == word)
        .ok_or_else(|| {
            let names: Vec<&str> = allowed.iter().map(|a| a.name()).collect();
            let what = if allowed.len() == Activity::ALL.len() {
                "a parameter"
            } else {
                "the return"
            };
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
    fn ok(text: &str, params: &[Activity], ret: Option<Activity>) {
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
        ok("dup,const->active", &[Dup, Const], Some(Active));
        ok("active", &[Active], None);
        ok(
            "dupnoneed, const -> const",
            &[DupNoNeed, Const],
            Some(Const),
        );
        ok("->active", &[], Some(Active));
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
}
