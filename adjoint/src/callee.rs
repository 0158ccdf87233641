//! How a call is differentiated, from what the module says about the callee.

use gradlift_ir::{Body, FuncId, Module, VjpRule};

/// What differentiating a call to a function means (`docs/ir-text.md`,
/// "Declarations"). A `nodiff` declaration wins over `vjp`,
/// which wins over `overlay`.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub(crate) enum Callee {
    /// `nodiff @g`: the results are constants; the call is left as it is.
    Nodiff,
    /// `vjp @g = @r` for a `@g` of scalar parameters only: the call is left as it
    /// is, its arguments are saved, and the pullback calls `@r`.
    Vjp(FuncId),
    /// `vjp @g = @r` for a `@g` with slice parameters, or a pair
    /// `vjp @g = @fwd, @rvs`: the call gets a rule pair written around the user's
    /// rules ([`custom`](crate::custom)), called as a derived rule is.
    Custom(VjpRule),
    /// `overlay @g = @h`: `@g` gives the primal value, `@h`'s rule the derivative.
    Overlay(FuncId),
    /// A defined function: its own rule.
    Body(FuncId),
    /// An `extern` (or declared, never defined) function with no declaration: it
    /// has no derivative.
    Extern,
}

impl Callee {
    /// How calls to `g` are differentiated.
    pub(crate) fn of(module: &Module, g: FuncId) -> Callee {
        if module.is_nodiff(g) {
            Callee::Nodiff
        } else if let Some(rule) = module.vjp_rule(g) {
            match rule {
                VjpRule::Pullback(r) if !module.sig(g).params.iter().any(|t| t.is_slice()) => {
                    Callee::Vjp(r)
                }
                _ => Callee::Custom(rule),
            }
        } else if let Some(h) = module.overlay_of(g) {
            Callee::Overlay(h)
        } else if module
            .funcs
            .get(g)
            .is_some_and(|d| matches!(d.body, Body::Defined(_)))
        {
            Callee::Body(g)
        } else {
            Callee::Extern
        }
    }
}
