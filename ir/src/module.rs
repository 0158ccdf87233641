//! A module: named functions (defined, extern, or declared ahead of their body) and
//! the declarations for differentiation (`overlay`, `vjp`, `jvp`, `nodiff`).
//!
//! Functions are numbered by [`FuncId`] in the order they were declared, which is
//! also the order they print in. Calls name their callee by `FuncId`, so functions
//! may call each other in any order, recursively. Names are unique in a module.

use core::fmt;

use cranelift_entity::PrimaryMap;
use hashbrown::HashMap;

use crate::entities::FuncId;
use crate::function::{Function, Pos};
use crate::types::Type;

/// Parameter and result types of a function.
#[derive(Clone, PartialEq, Eq, Hash, Debug, Default)]
pub struct Signature {
    /// Parameter types, in order.
    pub params: Vec<Type>,
    /// Result types, in order (none, one, or several).
    pub results: Vec<Type>,
}

impl Signature {
    /// A signature from its parameter and result types.
    pub fn new(params: impl Into<Vec<Type>>, results: impl Into<Vec<Type>>) -> Signature {
        Signature {
            params: params.into(),
            results: results.into(),
        }
    }
}

/// Prints as the text format writes a signature after the name: `(f64, [f64]) -> f64`.
impl fmt::Display for Signature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("(")?;
        for (i, t) in self.params.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{t}")?;
        }
        f.write_str(")")?;
        match self.results.as_slice() {
            [] => Ok(()),
            [t] => write!(f, " -> {t}"),
            ts => {
                f.write_str(" -> (")?;
                for (i, t) in ts.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{t}")?;
                }
                f.write_str(")")
            }
        }
    }
}

/// What stands behind a function's name.
///
/// Kept unboxed: a module holds one per function, and passes reach into bodies often.
#[derive(Clone, Debug)]
#[allow(clippy::large_enum_variant)]
pub enum Body {
    /// An IR body.
    Defined(Function),
    /// A host function, supplied through the Rust API (`extern` in the text).
    Extern,
    /// Declared (so others can call it) but not defined yet; the verifier rejects
    /// a module that still has one.
    Declared,
}

/// A function of a module: its name, signature and body.
#[derive(Clone, Debug)]
pub struct FuncDecl {
    /// The name, without `@`.
    pub name: String,
    /// Parameter and result types.
    pub sig: Signature,
    /// The body, or what stands for it.
    pub body: Body,
    /// Where it was declared in the source text.
    pub pos: Pos,
}

impl FuncDecl {
    /// The IR body, for a defined function.
    pub fn function(&self) -> Option<&Function> {
        match &self.body {
            Body::Defined(f) => Some(f),
            _ => None,
        }
    }
}

/// A declaration for differentiation.
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug)]
pub enum Decl {
    /// `overlay @func = @with`: derivatives of calls to `func` go through `with`'s body.
    Overlay {
        /// The function whose derivative is overlaid.
        func: FuncId,
        /// The function whose body is differentiated instead (same signature).
        with: FuncId,
    },
    /// `vjp @func = @rule`: `rule` is the custom derivative of `func`.
    Vjp {
        /// The function with a custom derivative.
        func: FuncId,
        /// Takes `func`'s parameters and one cotangent per float result; returns one
        /// cotangent per float parameter.
        rule: FuncId,
    },
    /// `vjp @func = @forward, @pullback`: a custom derivative as a pair of rules
    /// (Mooncake's `rrule!!`). `forward` has `func`'s signature and runs in its
    /// place in a gradient's forward pass, pushing onto the tape what `pullback`
    /// needs; `pullback` takes `func`'s scalar parameters, one shadow per float slice
    /// parameter and one cotangent per float result, pops what `forward` pushed, and
    /// returns one cotangent per float scalar parameter (see
    /// [`vjp_pair_signature`](crate::verify::vjp_pair_signature)).
    VjpPair {
        /// The function with a custom derivative.
        func: FuncId,
        /// Its forward rule (same signature as `func`).
        forward: FuncId,
        /// Its pullback rule.
        pullback: FuncId,
    },
    /// `jvp @func = @rule`: `rule` is the custom forward-mode derivative of `func`.
    ///
    /// Forward mode calls `rule` instead of differentiating a call to `func`; reverse
    /// mode ignores it (and forward mode ignores `vjp`), so a function may have both.
    Jvp {
        /// The function with a custom derivative.
        func: FuncId,
        /// Takes `func`'s parameters and one tangent per float parameter; returns one
        /// tangent per float result.
        rule: FuncId,
    },
    /// `nodiff @func`: the results of `func` are constants to differentiation.
    Nodiff {
        /// The function.
        func: FuncId,
    },
}

impl Decl {
    /// The function the declaration is about.
    pub fn func(&self) -> FuncId {
        match *self {
            Decl::Overlay { func, .. }
            | Decl::Vjp { func, .. }
            | Decl::VjpPair { func, .. }
            | Decl::Jvp { func, .. }
            | Decl::Nodiff { func } => func,
        }
    }

    /// The functions the declaration names besides [`Decl::func`]: the overlay's
    /// target, the rule, or the pair of rules.
    pub fn rules(&self) -> smallvec::SmallVec<[FuncId; 2]> {
        match *self {
            Decl::Overlay { with, .. } => smallvec::smallvec![with],
            Decl::Vjp { rule, .. } | Decl::Jvp { rule, .. } => smallvec::smallvec![rule],
            Decl::VjpPair {
                forward, pullback, ..
            } => smallvec::smallvec![forward, pullback],
            Decl::Nodiff { .. } => smallvec::SmallVec::new(),
        }
    }
}

/// A function's custom reverse-mode derivative, as its `vjp` declaration gives it.
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug)]
pub enum VjpRule {
    /// `vjp @f = @rule`: one function, called by the pullback with the arguments
    /// as they were at the call.
    Pullback(FuncId),
    /// `vjp @f = @forward, @pullback`: a forward rule and a pullback rule that
    /// share what the forward rule pushes onto the tape.
    Pair {
        /// Runs in place of the function in the forward pass.
        forward: FuncId,
        /// Runs in the pullback.
        pullback: FuncId,
    },
}

/// Why a module edit was refused.
#[derive(Clone, PartialEq, Eq, Debug)]
#[non_exhaustive]
pub enum ModuleError {
    /// A function of that name exists already.
    DuplicateName(String),
    /// The function given a body is extern or already defined.
    NotDefinable(String),
    /// The body's parameter count differs from the signature's.
    ParamCount {
        /// The function.
        name: String,
        /// Parameters in the signature.
        expected: usize,
        /// Parameters of the body.
        found: usize,
    },
}

impl fmt::Display for ModuleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ModuleError::DuplicateName(n) => write!(f, "function @{n} is defined twice"),
            ModuleError::NotDefinable(n) => {
                write!(f, "function @{n} is extern or already has a body")
            }
            ModuleError::ParamCount {
                name,
                expected,
                found,
            } => write!(
                f,
                "function @{name} has {expected} parameters but its body has {found}"
            ),
        }
    }
}

impl std::error::Error for ModuleError {}

/// A set of functions and declarations: what a `.ir` file holds.
#[derive(Clone, Debug, Default)]
pub struct Module {
    /// The functions, in declaration order.
    pub funcs: PrimaryMap<FuncId, FuncDecl>,
    /// The `overlay`, `vjp`, `jvp` and `nodiff` declarations, in order, with their
    /// positions.
    pub decls: Vec<(Decl, Pos)>,
    names: HashMap<String, FuncId>,
}

impl Module {
    /// An empty module.
    pub fn new() -> Module {
        Module::default()
    }

    /// Declares a function to be defined later with [`Module::define`].
    pub fn declare(&mut self, name: &str, sig: Signature) -> Result<FuncId, ModuleError> {
        self.add(name, sig, Body::Declared, Pos::NONE)
    }

    /// Declares a host function (`extern`).
    pub fn declare_extern(&mut self, name: &str, sig: Signature) -> Result<FuncId, ModuleError> {
        self.add(name, sig, Body::Extern, Pos::NONE)
    }

    /// Adds a function with a body, a position and a signature in one step.
    pub fn add(
        &mut self,
        name: &str,
        sig: Signature,
        body: Body,
        pos: Pos,
    ) -> Result<FuncId, ModuleError> {
        if self.names.contains_key(name) {
            return Err(ModuleError::DuplicateName(name.to_string()));
        }
        let id = self.funcs.push(FuncDecl {
            name: name.to_string(),
            sig,
            body,
            pos,
        });
        self.names.insert(name.to_string(), id);
        Ok(id)
    }

    /// Gives the declared function `id` its body.
    pub fn define(&mut self, id: FuncId, func: Function) -> Result<(), ModuleError> {
        let decl = &mut self.funcs[id];
        if !matches!(decl.body, Body::Declared) {
            return Err(ModuleError::NotDefinable(decl.name.clone()));
        }
        if func.params.len() != decl.sig.params.len() {
            return Err(ModuleError::ParamCount {
                name: decl.name.clone(),
                expected: decl.sig.params.len(),
                found: func.params.len(),
            });
        }
        decl.body = Body::Defined(func);
        Ok(())
    }

    /// Adds a declaration for differentiation.
    pub fn add_decl(&mut self, decl: Decl, pos: Pos) {
        self.decls.push((decl, pos));
    }

    /// The function called `name` (without `@`).
    pub fn func_by_name(&self, name: &str) -> Option<FuncId> {
        self.names.get(name).copied()
    }

    /// The name of `id` (without `@`).
    pub fn name(&self, id: FuncId) -> &str {
        &self.funcs[id].name
    }

    /// The signature of `id`.
    pub fn sig(&self, id: FuncId) -> &Signature {
        &self.funcs[id].sig
    }

    /// The IR body of `id`, if it is defined.
    pub fn function(&self, id: FuncId) -> Option<&Function> {
        self.funcs[id].function()
    }

    /// The IR body of `id`, mutably, if it is defined.
    pub fn function_mut(&mut self, id: FuncId) -> Option<&mut Function> {
        match &mut self.funcs[id].body {
            Body::Defined(f) => Some(f),
            _ => None,
        }
    }

    /// The defined functions, in order.
    pub fn defined(&self) -> impl Iterator<Item = (FuncId, &Function)> + '_ {
        self.funcs
            .iter()
            .filter_map(|(id, d)| d.function().map(|f| (id, f)))
    }

    /// The function whose body stands in for `func`'s under differentiation (`overlay`).
    pub fn overlay_of(&self, func: FuncId) -> Option<FuncId> {
        self.decls.iter().find_map(|(d, _)| match *d {
            Decl::Overlay { func: f, with } if f == func => Some(with),
            _ => None,
        })
    }

    /// The custom derivative of `func` when it is one function (`vjp @f = @rule`);
    /// [`Module::vjp_rule`] gives either form.
    pub fn vjp_of(&self, func: FuncId) -> Option<FuncId> {
        match self.vjp_rule(func) {
            Some(VjpRule::Pullback(rule)) => Some(rule),
            _ => None,
        }
    }

    /// The custom reverse-mode derivative of `func` (`vjp`), in either form.
    pub fn vjp_rule(&self, func: FuncId) -> Option<VjpRule> {
        self.decls.iter().find_map(|(d, _)| match *d {
            Decl::Vjp { func: f, rule } if f == func => Some(VjpRule::Pullback(rule)),
            Decl::VjpPair {
                func: f,
                forward,
                pullback,
            } if f == func => Some(VjpRule::Pair { forward, pullback }),
            _ => None,
        })
    }

    /// The custom forward-mode derivative of `func` (`jvp`): the rule takes `func`'s
    /// parameters and one tangent per float parameter, and returns one tangent per
    /// float result (see [`jvp_signature`](crate::verify::jvp_signature)).
    pub fn jvp_of(&self, func: FuncId) -> Option<FuncId> {
        self.decls.iter().find_map(|(d, _)| match *d {
            Decl::Jvp { func: f, rule } if f == func => Some(rule),
            _ => None,
        })
    }

    /// Whether `func` is declared `nodiff`.
    pub fn is_nodiff(&self, func: FuncId) -> bool {
        self.decls
            .iter()
            .any(|(d, _)| matches!(*d, Decl::Nodiff { func: f } if f == func))
    }
}
