//! The verifier: checks that a [`Module`] is well-formed and reports every error it finds.
//!
//! [`verify`] checks every function and declaration of a module; [`verify_function`]
//! and [`verify_decls`] check one function or the declarations alone. Errors are
//! collected, never thrown at the first: each [`VerifierError`] names the function,
//! the source position of the offending entity (from the function's
//! [`SourceMap`](crate::SourceMap), or from the declaration; [`Pos::NONE`] for IR
//! made by the builder or a pass), the entity as the text names it (`%acc1`,
//! `block body`, `@f`), the offending line as the printer writes it, and a message.
//! Errors come in a deterministic order: functions in module order (each one's errors
//! in layout order: parameters, then block by block its phis, instructions and
//! terminator), then the declarations in order.
//!
//! The verifier never panics, on any `Module`: an ID out of range (from another
//! function, or garbage) is reported and the checks that would need it are skipped.
//! It uses no recursion, so the size of a function does not matter. The offending
//! line is always the printer's, which shows references out of range as
//! `%<invalid v7>` rather than failing.
//!
//! # Invariants checked
//!
//! Module:
//! - Every function is defined or `extern`: a function still [`Body::Declared`] is
//!   an error ("declared but never defined").
//! - Every declaration names functions of the module.
//! - `overlay @f = @g`: `@f` and `@g` have the same signature.
//! - `vjp @f = @r`: `@r` has the signature [`vjp_signature`] gives: `@f`'s
//!   parameters (a `mut [T]` one as `[T]`), then one shadow `mut [T]` per float
//!   slice parameter, then one cotangent per float result of `@f` (of that result's
//!   type); its results are one cotangent per float scalar parameter of `@f` (of
//!   that parameter's type), in order. The comparison is exact (a `mut` slice is
//!   not accepted for a read-only one here).
//! - `vjp @f = @fwd, @rvs`: `@fwd` has `@f`'s signature; `@rvs` has the signature
//!   [`vjp_pair_signature`] gives (as `vjp_signature`, without the slices).
//! - `jvp @f = @r`: `@r`'s parameters are `@f`'s (a `mut [T]` as `[T]`), followed
//!   by one tangent per float parameter of `@f` (of that parameter's type: a float
//!   slice's tangent is a slice of its mutability); its results are one tangent per
//!   float result of `@f` (of that result's type), in order ([`jvp_signature`]). The
//!   comparison is exact.
//! - `nodiff @f` is fine for any function.
//! - A function has at most one declaration of each kind, and not both an `overlay`
//!   and a `vjp`, nor both an `overlay` and a `jvp` (a `vjp` and a `jvp` together are
//!   fine). The later declaration is the one reported.
//!
//! Function (a [`Body::Defined`] one):
//! - It has at least one block.
//! - It has one parameter value per parameter of its signature; parameter `i` is a
//!   value with [`ValueDef::Param`]`(i)` and exactly the signature's type.
//! - Every layout entry is a block of the function, and no block appears twice.
//! - The entry block (the first in the layout) has no phis and no predecessors.
//! - Every block has a terminator. Every block a terminator jumps to, and every block
//!   a phi edge names, is a block of the function and in the layout.
//! - Every value, instruction, callee and message an entity refers to is in range
//!   (a `trap_if`'s [`Msg`](crate::Msg) is one of [`Function::messages`]).
//! - Every instruction appears in at most one block, once.
//! - Definitions point back: instruction `i`'s result `k` has
//!   [`ValueDef::Result`]`(i, k)`, a phi's value [`ValueDef::Phi`] of its block; no
//!   value is defined twice (as two results, a result and a phi, and so on); a
//!   constant's type is its literal's type. A used value that has no definition in the
//!   function (its instruction is in no block, its parameter index is wrong, ...) is
//!   an error.
//! - Types follow [`ops::resolve`], the typing rule the builder and the parser use:
//!   the immediate has the op's kind, operand count and types fit (its error is the
//!   message), and the instruction's results are exactly as many, and of exactly the
//!   types, as `resolve` gives. This covers calls (arity, argument types with
//!   [`Type::fits`], result types; callees may be defined later or be the function
//!   itself) and `store` into read-only slices.
//! - `ret` returns as many values as the signature has results, each fitting its
//!   result type ([`Type::fits`]: a `mut [T]` may be returned as a `[T]`). A `br`
//!   condition is a `bool`.
//! - Phis: a phi has at least one incoming value (the text cannot write `phi T []`, so
//!   a block without predecessors has no phis). Each phi has exactly one incoming
//!   value per predecessor of its block: none
//!   missing, none for a block that is not a predecessor, none twice. Predecessors are
//!   those of [`ControlFlowGraph`]: a block that ends in `br %c, b, b` is *one*
//!   predecessor of `b`, so `b`'s phis have one edge for it (an edge is named by its
//!   block, so two could not carry different values anyway). Unreachable predecessors
//!   count. Incoming values fit the phi's type.
//! - SSA dominance: every use is dominated by its definition. An instruction operand
//!   or terminator operand is defined earlier in the same block (a phi of the block
//!   counts as earlier), or in a block that dominates the user's block; an
//!   instruction may not use its own result. A phi's incoming value must be available
//!   at the *end* of the corresponding predecessor: defined in that block or in a
//!   block that dominates it. Parameters and constants dominate everything.
//! - Unreachable code: dominance is not checked for uses *in* blocks that are not
//!   reachable from the entry (nor for phi edges from them), since no execution
//!   reaches them; everything else, types included, is checked there. A value defined
//!   in an unreachable block and used in a reachable one is a dominance error.
//! - Literal typing: the printer writes a constant operand as a bare literal and the
//!   parser types a literal from its context, so a constant ([`ValueDef::Const`])
//!   used as an operand must have exactly the type a literal would get there. For an
//!   instruction operand that is what [`parser::literal_types`](crate::parser::literal_types)
//!   says (the parser's own rule, so the two cannot drift apart); for a phi's incoming
//!   value the phi type, for `ret` the result type, for `br` `bool`. So `fadd` of two
//!   `f32` constants is an error, to be written with a `const f32` instruction.
//! - Slices that live only while the function (or the gradient call) runs are never
//!   returned: a slice that may be the result of an `alloc` or a `tape_view` (the
//!   result itself, a phi or `select` with such an input, a slice result of a call
//!   that receives such a slice) may not be an operand of `ret`. An `alloc` buffer dies
//!   when the function returns; a `tape_view` slice views a tape buffer, which lives
//!   until the engine resets the tape, but the view is valid only during the gradient
//!   call. (`tape_alloc` returns an `i64` handle, which may be returned like any
//!   `i64`.)
//! - Tape ops are typed by `resolve` like the rest: `push` takes a scalar, never a
//!   slice (a view on the tape could outlive its buffer); `pop T` has a scalar `T`;
//!   `tape_alloc T, n` and `tape_view T, h` have `T` one of `f64`, `f32`, `i64` and an
//!   `i64` operand. Whether pops match pushes, and whether a handle names a live
//!   buffer of element type `T`, are run-time matters, not checked here.
//! - Only a `call` carries the `checkpoint` flag ([`InstData::checkpoint`](crate::InstData::checkpoint)).
//! - `trap_if` is typed by `resolve` too: one `bool` operand (a literal there is a
//!   `bool`), a message immediate, no result. It may stand wherever an instruction
//!   may; whether it fires is a run-time matter. Every message prints as a string
//!   literal that reads back as itself, so there is nothing to check about its text.
//!
//! Phis sit only at block heads by construction ([`BlockData::phis`]), so there is
//! nothing to check there.

use core::cell::OnceCell;
use core::fmt;
use core::fmt::Write as _;

use cranelift_entity::{EntitySet, SecondaryMap};
use hashbrown::{HashMap, HashSet};
use smallvec::SmallVec;

use crate::dominators::DominatorTree;
use crate::entities::{Block, FuncId, Inst, Value};
use crate::flowgraph::ControlFlowGraph;
use crate::function::{BlockData, Function, Phi, Pos, Terminator, ValueDef};
use crate::module::{Body, Decl, FuncDecl, Module, Signature};
use crate::ops::{self, Imm, Opcode};
use crate::types::Type;
use crate::write::{self, Names};

/// One broken invariant: where it is and what is wrong.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct VerifierError {
    /// The function (without `@`), if the error is inside one.
    pub func: Option<String>,
    /// The source position of the offending entity, when the function was parsed.
    pub pos: Pos,
    /// The entity, as the text format names it: `block body`, `%acc1`, `@f`.
    pub location: String,
    /// The offending line as the printer writes it (empty if there is none).
    pub context: String,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for VerifierError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(func) = &self.func {
            write!(f, "in @{func}, ")?;
        }
        write!(f, "{}: {}", self.location, self.message)?;
        if !self.context.is_empty() {
            write!(f, " (`{}`)", self.context)?;
        }
        Ok(())
    }
}

impl std::error::Error for VerifierError {}

/// Every error the verifier found (at least one).
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct VerifierErrors(pub Vec<VerifierError>);

impl fmt::Display for VerifierErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

impl std::error::Error for VerifierErrors {}

/// Checks every invariant of every function and declaration of `module` (see the
/// [module docs](self)).
pub fn verify(module: &Module) -> Result<(), VerifierErrors> {
    let mut errors = Vec::new();
    for id in module.funcs.keys() {
        errors.extend(verify_function(module, id));
    }
    errors.extend(verify_decls(module));
    if errors.is_empty() {
        Ok(())
    } else {
        Err(VerifierErrors(errors))
    }
}

/// The errors of the function `id` of `module`: none for an `extern` function, one
/// for a function declared but never defined, and every broken invariant of a
/// defined one.
pub fn verify_function(module: &Module, id: FuncId) -> Vec<VerifierError> {
    let Some(decl) = module.funcs.get(id) else {
        return vec![VerifierError {
            func: None,
            pos: Pos::NONE,
            location: id.to_string(),
            context: String::new(),
            message: format!("{id} is not a function of the module"),
        }];
    };
    match &decl.body {
        Body::Extern => Vec::new(),
        Body::Declared => vec![VerifierError {
            func: Some(decl.name.clone()),
            pos: decl.pos,
            location: format!("@{}", decl.name),
            context: String::new(),
            message: format!("function @{} is declared but never defined", decl.name),
        }],
        Body::Defined(func) => FuncVerifier::new(module, decl, func).run(),
    }
}

/// The errors of `module`'s `overlay`, `vjp`, `jvp` and `nodiff` declarations, in
/// order.
pub fn verify_decls(module: &Module) -> Vec<VerifierError> {
    let mut errors = Vec::new();
    // The first declaration of each kind for each function, and where it stands.
    let mut first: HashMap<(FuncId, &'static str), Pos> = HashMap::new();
    for &(decl, pos) in &module.decls {
        let context = decl_line(module, &decl);
        let (kind, ids): (&'static str, SmallVec<[FuncId; 3]>) = match decl {
            Decl::Overlay { func, with } => ("overlay", smallvec::smallvec![func, with]),
            Decl::Vjp { func, rule } => ("vjp", smallvec::smallvec![func, rule]),
            Decl::VjpPair {
                func,
                forward,
                pullback,
            } => ("vjp", smallvec::smallvec![func, forward, pullback]),
            Decl::Jvp { func, rule } => ("jvp", smallvec::smallvec![func, rule]),
            Decl::Nodiff { func } => ("nodiff", smallvec::smallvec![func]),
        };
        let f = decl.func();
        let mut error = |message: String| {
            let location = match module.funcs.get(f) {
                Some(d) => format!("@{}", d.name),
                None => f.to_string(),
            };
            errors.push(VerifierError {
                func: None,
                pos,
                location,
                context: context.clone(),
                message,
            });
        };
        if let Some(&bad) = ids.iter().find(|&&id| !module.funcs.is_valid(id)) {
            error(format!(
                "{kind} names {bad}, which is not a function of the module"
            ));
            continue;
        }
        match decl {
            Decl::Overlay { func, with } => {
                let (fs, gs) = (module.sig(func), module.sig(with));
                if fs != gs {
                    error(format!(
                        "overlay @{} = @{} needs one signature, but @{} is {fs} and @{} is {gs}",
                        module.name(func),
                        module.name(with),
                        module.name(func),
                        module.name(with),
                    ));
                }
            }
            Decl::Vjp { func, rule } | Decl::Jvp { func, rule } => {
                let expected = match decl {
                    Decl::Jvp { .. } => jvp_signature(module.sig(func)),
                    _ => vjp_signature(module.sig(func)),
                };
                let found = module.sig(rule);
                if *found != expected {
                    error(format!(
                        "{kind} rule @{} for @{} must have the signature {expected}, found {found}",
                        module.name(rule),
                        module.name(func),
                    ));
                }
            }
            Decl::VjpPair {
                func,
                forward,
                pullback,
            } => {
                let fs = module.sig(func);
                let found = module.sig(forward);
                if found != fs {
                    error(format!(
                        "vjp forward rule @{} for @{} must have @{}'s signature {fs}, found {found}",
                        module.name(forward),
                        module.name(func),
                        module.name(func),
                    ));
                }
                let (expected, found) = (vjp_pair_signature(fs), module.sig(pullback));
                if *found != expected {
                    error(format!(
                        "vjp pullback rule @{} for @{} must have the signature {expected}, found {found}",
                        module.name(pullback),
                        module.name(func),
                    ));
                }
            }
            Decl::Nodiff { .. } => {}
        }
        let name = module.name(f);
        if let Some(&earlier) = first.get(&(f, kind)) {
            let article = if kind == "overlay" { "an" } else { "a" };
            error(format!(
                "@{name} already has {article} {kind} declaration{}",
                at(earlier)
            ));
            continue;
        }
        first.insert((f, kind), pos);
        // An overlay excludes a vjp and a jvp; a vjp and a jvp go together.
        let others: &[&str] = match kind {
            "overlay" => &["vjp", "jvp"],
            "vjp" | "jvp" => &["overlay"],
            _ => continue,
        };
        for &other in others {
            let Some(&earlier) = first.get(&(f, other)) else {
                continue;
            };
            let rule = if kind == "overlay" { other } else { kind };
            error(format!(
                "@{name} cannot have both an overlay and a {rule} declaration (its {other} is {})",
                if earlier.is_known() {
                    format!("at {earlier}")
                } else {
                    "declared earlier".to_string()
                }
            ));
        }
    }
    errors
}

/// The signature a `vjp` rule (`vjp @f = @rule`) for a function of signature
/// `sig` must have: `sig`'s parameters, each `mut [T]` as `[T]` (the rule gets the
/// contents as they were at the call, to read); then one shadow `mut [T]` for each
/// float slice parameter (`[f64]`, `[f32]`, read-only or not), in order; then one
/// cotangent for each float result (of that result's type). Its results are one
/// cotangent for each float scalar parameter (of that parameter's type), in order.
/// Integers, bools and `[i64]` get no cotangent.
///
/// For `(f64, [f64], mut [f32], i64) -> (f64, i64)` it is
/// `(f64, [f64], [f32], i64, mut [f64], mut [f32], f64) -> f64`; for a function of
/// scalars only, `sig`'s parameters, the float results' cotangents, and the float
/// parameters' cotangents.
pub fn vjp_signature(sig: &Signature) -> Signature {
    let mut params: Vec<Type> = sig
        .params
        .iter()
        .map(|&t| match t.elem() {
            Some(e) => Type::slice(e),
            None => t,
        })
        .collect();
    params.extend(shadow_types(sig));
    params.extend(sig.results.iter().copied().filter(|t| t.is_float()));
    Signature::new(params, float_scalars(&sig.params))
}

/// The signature the pullback rule of a pair (`vjp @f = @forward, @pullback`) for a
/// function of signature `sig` must have: [`vjp_signature`]'s without the slices
/// themselves, which the pullback does not get (the forward rule pushes onto the
/// tape what it needs of them). `sig`'s scalar parameters, then one shadow
/// `mut [T]` per float slice parameter, then one cotangent per float result;
/// results, one cotangent per float scalar parameter.
///
/// For `(f64, [f64], mut [f32], i64) -> (f64, i64)` it is
/// `(f64, i64, mut [f64], mut [f32], f64) -> f64`.
pub fn vjp_pair_signature(sig: &Signature) -> Signature {
    let mut params: Vec<Type> = sig
        .params
        .iter()
        .copied()
        .filter(|t| t.is_scalar())
        .collect();
    params.extend(shadow_types(sig));
    params.extend(sig.results.iter().copied().filter(|t| t.is_float()));
    Signature::new(params, float_scalars(&sig.params))
}

/// One `mut [T]` per float slice of `sig`'s parameters.
fn shadow_types(sig: &Signature) -> impl Iterator<Item = Type> + '_ {
    sig.params.iter().filter_map(|t| match t.elem() {
        Some(e) if t.is_differentiable() => Some(Type::slice_mut(e)),
        _ => None,
    })
}

/// The float scalars of `types`, in order.
fn float_scalars(types: &[Type]) -> Vec<Type> {
    types.iter().copied().filter(|t| t.is_float()).collect()
}

/// The signature a `jvp` rule for a function of signature `sig` must have:
/// `sig`'s parameters (each `mut [T]` as `[T]`: the rule runs before the function,
/// on the contents it is given); then, for each float parameter in order, its
/// tangent: a scalar of its type, a `[T]` for a read-only float slice, a `mut [T]`
/// for a `mut` one (holding the tangent of its contents before the call, which the
/// rule replaces by the tangent of its contents after); as results, one tangent
/// for each float result (of that result's type), in order. Integers, bools and
/// `[i64]` get no tangent.
///
/// For `(f64, i64, f32) -> (f64, i64)` it is `(f64, i64, f32, f64, f32) -> f64`;
/// for `([f64], mut [f64], f64) -> f64`,
/// `([f64], [f64], f64, [f64], mut [f64], f64) -> f64`.
pub fn jvp_signature(sig: &Signature) -> Signature {
    let mut params: Vec<Type> = sig
        .params
        .iter()
        .map(|&t| match t.elem() {
            Some(e) => Type::slice(e),
            None => t,
        })
        .collect();
    params.extend(sig.params.iter().copied().filter(|t| t.is_differentiable()));
    let results: Vec<Type> = sig
        .results
        .iter()
        .copied()
        .filter(|t| t.is_float())
        .collect();
    Signature::new(params, results)
}

/// ` at line:col`, or nothing for an unknown position.
fn at(pos: Pos) -> String {
    if pos.is_known() {
        format!(" at {pos}")
    } else {
        String::new()
    }
}

/// A declaration as the text writes it, with IDs for functions that do not exist.
fn decl_line(module: &Module, decl: &Decl) -> String {
    let name = |id: FuncId| match module.funcs.get(id) {
        Some(d) => format!("@{}", d.name),
        None => id.to_string(),
    };
    match *decl {
        Decl::Overlay { func, with } => format!("overlay {} = {}", name(func), name(with)),
        Decl::Vjp { func, rule } => format!("vjp {} = {}", name(func), name(rule)),
        Decl::VjpPair {
            func,
            forward,
            pullback,
        } => format!("vjp {} = {}, {}", name(func), name(forward), name(pullback)),
        Decl::Jvp { func, rule } => format!("jvp {} = {}", name(func), name(rule)),
        Decl::Nodiff { func } => format!("nodiff {}", name(func)),
    }
}

/// Where a value is actually defined, as found by walking the layout (the first
/// definition wins; later ones are errors).
#[derive(Copy, Clone, PartialEq, Eq, Debug, Default)]
enum Site {
    /// Not defined by any parameter, phi or placed instruction.
    #[default]
    None,
    /// Parameter `i`.
    Param(u32),
    /// Phi number `k` of a block.
    Phi(Block, u32),
    /// A result of the instruction at index `idx` of a block.
    Result(Block, u32, Inst),
}

/// Where a value is available, for the dominance check.
enum Avail {
    /// Everywhere (a parameter or a constant), or nowhere we could check (an
    /// undefined value, reported on its own).
    Anywhere,
    /// From the head of a block (a phi).
    Head(Block),
    /// After the instruction at an index of a block.
    After(Block, usize),
}

/// The entity an error is about, from which its position, location and context follow.
#[derive(Copy, Clone)]
enum At {
    /// The function as a whole.
    Func,
    /// A parameter value.
    Param(Value),
    /// A block (its label line).
    Block(Block),
    /// Phi number `k` of a block.
    Phi(Block, usize),
    /// An instruction, placed in a block.
    Inst(Block, Inst),
    /// The terminator of a block.
    Term(Block),
}

/// A use of a value inside a phi or instruction, for the use lists of the `alloc`
/// and `tape_view` analysis.
#[derive(Copy, Clone)]
enum User {
    /// The incoming value of the phi defining this value.
    Phi(Value),
    /// Operand `.1` of an instruction.
    Inst(Inst, usize),
}

/// The state of checking one defined function.
struct FuncVerifier<'a> {
    module: &'a Module,
    decl: &'a FuncDecl,
    func: &'a Function,
    /// The printer's names, made when the first error needs them.
    names: OnceCell<Names>,
    cfg: ControlFlowGraph,
    domtree: DominatorTree,
    /// The blocks of the layout, each at its first occurrence.
    blocks: Vec<Block>,
    /// Where each value is defined.
    sites: SecondaryMap<Value, Site>,
    /// Where each instruction is placed first: its block and index.
    placed: SecondaryMap<Inst, Option<(Block, u32)>>,
    /// For slices that may be an `alloc` buffer or a `tape_view` slice, that result.
    alloc_origin: SecondaryMap<Value, Option<Value>>,
    errors: Vec<VerifierError>,
}

impl<'a> FuncVerifier<'a> {
    fn new(module: &'a Module, decl: &'a FuncDecl, func: &'a Function) -> FuncVerifier<'a> {
        let cfg = ControlFlowGraph::new(func);
        let domtree = DominatorTree::new(&cfg);
        let mut v = FuncVerifier {
            module,
            decl,
            func,
            names: OnceCell::new(),
            cfg,
            domtree,
            blocks: Vec::new(),
            sites: SecondaryMap::new(),
            placed: SecondaryMap::new(),
            alloc_origin: SecondaryMap::new(),
            errors: Vec::new(),
        };
        v.find_definitions();
        v.find_alloc_slices();
        v
    }

    /// Records where blocks, instructions and values are, first occurrence first.
    fn find_definitions(&mut self) {
        let func = self.func;
        for (i, &p) in func.params.iter().enumerate() {
            if func.values.is_valid(p) && self.sites[p] == Site::None {
                self.sites[p] = Site::Param(i as u32);
            }
        }
        let mut seen = EntitySet::<Block>::new();
        for &b in &func.layout {
            if !func.blocks.is_valid(b) || !seen.insert(b) {
                continue;
            }
            self.blocks.push(b);
            let data = &func.blocks[b];
            for (k, phi) in data.phis.iter().enumerate() {
                if func.values.is_valid(phi.value) && self.sites[phi.value] == Site::None {
                    self.sites[phi.value] = Site::Phi(b, k as u32);
                }
            }
            for (idx, &inst) in data.insts.iter().enumerate() {
                if !func.insts.is_valid(inst) || self.placed[inst].is_some() {
                    continue;
                }
                self.placed[inst] = Some((b, idx as u32));
                for &r in &func.insts[inst].results {
                    if func.values.is_valid(r) && self.sites[r] == Site::None {
                        self.sites[r] = Site::Result(b, idx as u32, inst);
                    }
                }
            }
        }
    }

    /// Finds the slices that may not be returned (results of `alloc` and
    /// `tape_view`), and from them,
    /// along use lists, phis and `select`s with such an input and slice results of
    /// calls that receive one. A worklist makes it linear in the function's size.
    fn find_alloc_slices(&mut self) {
        let func = self.func;
        let mut users: SecondaryMap<Value, SmallVec<[User; 2]>> = SecondaryMap::new();
        let mut work: Vec<Value> = Vec::new();
        for &b in &self.blocks {
            let data = &func.blocks[b];
            for phi in &data.phis {
                if !func.values.is_valid(phi.value) {
                    continue;
                }
                for &(_, x) in &phi.incoming {
                    if func.values.is_valid(x) {
                        users[x].push(User::Phi(phi.value));
                    }
                }
            }
            for (idx, &inst) in data.insts.iter().enumerate() {
                if self.placed[inst] != Some((b, idx as u32)) {
                    continue;
                }
                let d = &func.insts[inst];
                if matches!(d.opcode, Opcode::Alloc | Opcode::TapeView)
                    && let Some(&r) = d.results.first()
                    && func.values.is_valid(r)
                    && self.alloc_origin[r].is_none()
                {
                    self.alloc_origin[r] = Some(r);
                    work.push(r);
                }
                for (i, &a) in d.args.iter().enumerate() {
                    if func.values.is_valid(a) {
                        users[a].push(User::Inst(inst, i));
                    }
                }
            }
        }
        while let Some(v) = work.pop() {
            let origin = self.alloc_origin[v];
            for &user in users[v].iter() {
                let targets: SmallVec<[Value; 2]> = match user {
                    User::Phi(p) => smallvec::smallvec![p],
                    User::Inst(inst, i) => {
                        let d = &func.insts[inst];
                        match d.opcode {
                            Opcode::Select if i == 1 || i == 2 => {
                                d.results.iter().take(1).copied().collect()
                            }
                            Opcode::Call => d.results.iter().copied().collect(),
                            _ => SmallVec::new(),
                        }
                    }
                };
                for t in targets {
                    if func.values.is_valid(t)
                        && func.values[t].ty.is_slice()
                        && self.alloc_origin[t].is_none()
                    {
                        self.alloc_origin[t] = origin;
                        work.push(t);
                    }
                }
            }
        }
    }

    fn run(mut self) -> Vec<VerifierError> {
        let func = self.func;
        self.check_params();
        if func.layout.is_empty() {
            self.report(At::Func, "the function has no blocks".to_string());
            return self.errors;
        }
        let mut seen = EntitySet::<Block>::new();
        for (i, &b) in func.layout.iter().enumerate() {
            if !func.blocks.is_valid(b) {
                self.report(
                    At::Func,
                    format!("the layout lists {b}, which is not a block of the function"),
                );
                continue;
            }
            if !seen.insert(b) {
                let label = self.block_ref(b);
                self.report(At::Block(b), format!("{label} appears twice in the layout"));
                continue;
            }
            self.check_block(b, i == 0);
        }
        self.errors
    }

    fn check_params(&mut self) {
        let func = self.func;
        let sig = &self.decl.sig;
        if func.params.len() != sig.params.len() {
            self.report(
                At::Func,
                format!(
                    "the function has {} parameter value{}, but its signature has {} parameter{}",
                    func.params.len(),
                    plural(func.params.len()),
                    sig.params.len(),
                    plural(sig.params.len())
                ),
            );
        }
        for (i, &p) in func.params.iter().enumerate() {
            let Some(data) = func.values.get(p) else {
                self.report(
                    At::Func,
                    format!(
                        "parameter {} is {p}, which is not a value of the function",
                        i + 1
                    ),
                );
                continue;
            };
            if self.sites[p] != Site::Param(i as u32) {
                let name = self.value_ref(p);
                self.report(At::Param(p), format!("{name} is defined more than once"));
            } else if data.def != ValueDef::Param(i as u32) {
                let name = self.value_ref(p);
                let def = self.describe_def(data.def);
                self.report(
                    At::Param(p),
                    format!(
                        "{name} is parameter {} of the function, but its definition says {def}",
                        i + 1
                    ),
                );
            }
            if let Some(&expected) = sig.params.get(i)
                && data.ty != expected
            {
                let name = self.value_ref(p);
                self.report(
                    At::Param(p),
                    format!(
                        "parameter {name} has type {}, but the signature says {expected}",
                        data.ty
                    ),
                );
            }
        }
    }

    fn check_block(&mut self, b: Block, is_entry: bool) {
        let data: &BlockData = &self.func.blocks[b];
        let reachable = self.cfg.is_reachable(b);
        if is_entry {
            if !data.phis.is_empty() {
                let label = self.block_ref(b);
                self.report(At::Block(b), format!("the entry {label} cannot have phis"));
            }
            let preds = self.cfg.preds(b);
            if !preds.is_empty() {
                let list = self.block_list(preds);
                let label = self.block_ref(b);
                self.report(
                    At::Block(b),
                    format!(
                        "the entry {label} cannot have predecessors, but {list} jump{} to it",
                        if preds.len() == 1 { "s" } else { "" }
                    ),
                );
            }
        }
        if !data.phis.is_empty() {
            let preds: HashSet<Block> = self.cfg.preds(b).iter().copied().collect();
            for k in 0..data.phis.len() {
                self.check_phi(b, k, &preds, reachable);
            }
        }
        for (idx, &inst) in data.insts.iter().enumerate() {
            self.check_inst(b, idx, inst, reachable);
        }
        match &data.term {
            None => {
                let label = self.block_ref(b);
                self.report(At::Block(b), format!("{label} has no terminator"));
            }
            Some(term) => self.check_term(b, term, reachable),
        }
    }

    fn check_phi(&mut self, b: Block, k: usize, preds: &HashSet<Block>, reachable: bool) {
        let func = self.func;
        let phi: &Phi = &func.blocks[b].phis[k];
        let at = At::Phi(b, k);
        let v = phi.value;
        let ty = match func.values.get(v) {
            None => {
                self.report(
                    at,
                    format!("the phi defines {v}, which is not a value of the function"),
                );
                None
            }
            Some(data) => {
                if self.sites[v] != Site::Phi(b, k as u32) {
                    let name = self.value_ref(v);
                    self.report(at, format!("{name} is defined more than once"));
                } else if data.def != ValueDef::Phi(b) {
                    let (name, block) = (self.value_ref(v), self.block_ref(b));
                    let def = self.describe_def(data.def);
                    self.report(
                        at,
                        format!("{name} is a phi of {block}, but its definition says {def}"),
                    );
                }
                Some(data.ty)
            }
        };
        if phi.incoming.is_empty() && preds.is_empty() {
            // The grammar has no way to write `phi T []`: a phi needs an edge, and a
            // block without predecessors (unreachable) has no use for a phi.
            let (name, block) = (self.value_ref(v), self.block_ref(b));
            self.report(
                at,
                format!(
                    "phi {name} has no incoming values ({block} has no predecessors): remove the phi"
                ),
            );
        }
        let mut seen: HashSet<Block> = HashSet::new();
        for &(p, x) in &phi.incoming {
            let edge_error = if !func.blocks.is_valid(p) {
                Some("which is not a block of the function")
            } else if !self.cfg.is_node(p) {
                Some("which is not in the layout")
            } else if !preds.contains(&p) {
                Some("which is not a predecessor of")
            } else {
                None
            };
            let pred_ok = match edge_error {
                Some(why) => {
                    let (name, pred) = (self.value_ref(v), self.block_ref(p));
                    let mut message = format!("phi {name} has an incoming value for {pred}, {why}");
                    if why.ends_with(" of") {
                        let _ = write!(message, " {}", self.block_ref(b));
                    }
                    self.report(at, message);
                    false
                }
                None if !seen.insert(p) => {
                    let (name, pred) = (self.value_ref(v), self.block_ref(p));
                    self.report(
                        at,
                        format!("phi {name} has more than one incoming value for {pred}"),
                    );
                    false
                }
                None => true,
            };
            if !self.check_defined(at, x) {
                continue;
            }
            let xt = func.values[x].ty;
            if let Some(ty) = ty {
                if !xt.fits(ty) {
                    let (xn, name, pred) =
                        (self.value_ref(x), self.value_ref(v), self.block_ref(p));
                    self.report(
                        at,
                        format!(
                            "incoming value {xn} from {pred} has type {xt}, but phi {name} is {ty}"
                        ),
                    );
                } else {
                    self.check_literal(at, x, ty);
                }
            }
            if pred_ok && reachable && self.cfg.is_reachable(p) {
                self.check_dominance(at, x, p, None);
            }
        }
        let missing: Vec<Block> = (self.cfg.preds(b).iter())
            .filter(|p| !seen.contains(*p))
            .copied()
            .collect();
        for p in missing {
            let (name, pred) = (self.value_ref(v), self.block_ref(p));
            self.report(
                at,
                format!("phi {name} has no incoming value for predecessor {pred}"),
            );
        }
    }

    fn check_inst(&mut self, b: Block, idx: usize, inst: Inst, reachable: bool) {
        let func = self.func;
        let Some(d) = func.insts.get(inst) else {
            let label = self.block_ref(b);
            self.report(
                At::Block(b),
                format!("{label} lists {inst}, which is not an instruction of the function"),
            );
            return;
        };
        let at = At::Inst(b, inst);
        if d.checkpoint && d.opcode != Opcode::Call {
            self.report(
                at,
                format!("only a call may be checkpointed, not {}", d.opcode.name()),
            );
        }
        if let Some((first, first_idx)) = self.placed[inst]
            && (first, first_idx) != (b, idx as u32)
        {
            let where_ = if first == b {
                "earlier in the same block".to_string()
            } else {
                format!("also in {}", self.block_ref(first))
            };
            self.report(
                at,
                format!("instruction {inst} is placed more than once ({where_})"),
            );
            return;
        }

        // Operands.
        let mut known = true;
        let mut types: SmallVec<[Option<Type>; 3]> = SmallVec::new();
        for &a in &d.args {
            if !self.check_defined(at, a) {
                known = false;
                continue;
            }
            let data = &func.values[a];
            types.push(Some(data.ty));
        }
        let callee = match d.imm {
            Imm::Func(f) => match self.module.funcs.get(f) {
                Some(decl) => Some(&decl.sig),
                None => {
                    self.report(
                        at,
                        format!("call to {f}, which is not a function of the module"),
                    );
                    known = false;
                    None
                }
            },
            _ => None,
        };
        if let Imm::Msg(m) = d.imm
            && !func.messages.is_valid(m)
        {
            self.report(
                at,
                format!(
                    "{} names {m}, which is not a message of the function",
                    d.opcode
                ),
            );
        }

        // Results point back.
        let mut results_ok = true;
        for (k, &r) in d.results.iter().enumerate() {
            let Some(data) = func.values.get(r) else {
                self.report(
                    at,
                    format!(
                        "result {} is {r}, which is not a value of the function",
                        k + 1
                    ),
                );
                results_ok = false;
                continue;
            };
            if self.sites[r] != Site::Result(b, idx as u32, inst) {
                let name = self.value_ref(r);
                self.report(at, format!("{name} is defined more than once"));
            } else if data.def != ValueDef::Result(inst, k as u32) {
                let name = self.value_ref(r);
                let def = self.describe_def(data.def);
                self.report(
                    at,
                    format!(
                        "{name} is result {} of this instruction, but its definition says {def}",
                        k + 1
                    ),
                );
            }
        }

        // Types, by the op table's rule.
        if known {
            match ops::resolve(d.opcode, &d.imm, &types, callee) {
                Err(message) => self.report(at, message),
                Ok(resolved) => {
                    if results_ok {
                        self.check_results(at, inst, &resolved.results);
                    }
                    // Constant operands must read back as themselves: the one
                    // literal-typing rule is the parser's.
                    let expected = crate::parser::literal_types(self.module, func, inst);
                    for (&a, t) in d.args.iter().zip(&expected) {
                        if let Some(t) = *t {
                            self.check_literal(at, a, t);
                        }
                    }
                }
            }
        }

        // Dominance.
        if reachable {
            for &a in &d.args {
                if func.values.is_valid(a) {
                    self.check_dominance(at, a, b, Some(idx));
                }
            }
        }
    }

    /// Checks that `inst`'s results are exactly as many and of exactly the types
    /// `resolve` gives.
    fn check_results(&mut self, at: At, inst: Inst, expected: &[Type]) {
        let d = &self.func.insts[inst];
        if d.results.len() != expected.len() {
            self.report(
                at,
                format!(
                    "{} gives {} result{}, but the instruction defines {}",
                    d.opcode,
                    expected.len(),
                    plural(expected.len()),
                    d.results.len()
                ),
            );
            return;
        }
        for (&r, &t) in d.results.iter().zip(expected) {
            let found = self.func.values[r].ty;
            if found != t {
                let name = self.value_ref(r);
                self.report(
                    at,
                    format!("result {name} has type {found}, but {} gives {t}", d.opcode),
                );
            }
        }
    }

    fn check_term(&mut self, b: Block, term: &Terminator, reachable: bool) {
        let func = self.func;
        let at = At::Term(b);
        match term {
            Terminator::Jump(dest) => self.check_dest(b, "jump", *dest),
            Terminator::Br {
                cond,
                then_dest,
                else_dest,
            } => {
                if self.check_defined(at, *cond) {
                    let t = func.values[*cond].ty;
                    if t != Type::Bool {
                        let name = self.value_ref(*cond);
                        self.report(at, format!("br condition {name} has type {t}, not bool"));
                    }
                }
                self.check_dest(b, "br", *then_dest);
                self.check_dest(b, "br", *else_dest);
            }
            Terminator::Ret(vals) => {
                let results = &self.decl.sig.results;
                if vals.len() != results.len() {
                    self.report(
                        at,
                        format!(
                            "ret returns {} value{}, but @{} has {} result{}",
                            vals.len(),
                            plural(vals.len()),
                            self.decl.name,
                            results.len(),
                            plural(results.len())
                        ),
                    );
                }
                for (i, &v) in vals.iter().enumerate() {
                    if !self.check_defined(at, v) {
                        continue;
                    }
                    let t = func.values[v].ty;
                    if let Some(&expected) = results.get(i) {
                        if !t.fits(expected) {
                            let name = self.value_ref(v);
                            self.report(
                                at,
                                format!(
                                    "ret value {} ({name}) has type {t}, but @{} returns {expected} there",
                                    i + 1,
                                    self.decl.name
                                ),
                            );
                        } else {
                            self.check_literal(at, v, expected);
                        }
                    }
                    if let Some(origin) = self.alloc_origin[v] {
                        let name = self.value_ref(v);
                        let op = match self.sites[origin] {
                            Site::Result(_, _, i) => func.insts[i].opcode,
                            _ => Opcode::Alloc,
                        };
                        let (article, what, fate) = match op {
                            Opcode::TapeView => (
                                "a",
                                "slice",
                                "views a tape buffer and is valid only during the gradient call",
                            ),
                            _ => ("an", "buffer", "dies when the function returns"),
                        };
                        let message = if origin == v {
                            format!("cannot return {name}: {article} {op} {what} {fate}")
                        } else {
                            format!(
                                "cannot return {name}: it may be the {op} {what} {}, which {fate}",
                                self.value_ref(origin)
                            )
                        };
                        self.report(at, message);
                    }
                }
            }
        }
        if reachable {
            for &a in term.args() {
                if func.values.is_valid(a) {
                    self.check_dominance(at, a, b, None);
                }
            }
        }
    }

    /// Checks that the destination of `b`'s terminator is a block in the layout.
    fn check_dest(&mut self, b: Block, kind: &str, dest: Block) {
        if !self.func.blocks.is_valid(dest) {
            self.report(
                At::Term(b),
                format!("{kind} to {dest}, which is not a block of the function"),
            );
        } else if !self.cfg.is_node(dest) {
            let label = self.block_ref(dest);
            self.report(
                At::Term(b),
                format!("{kind} to {label}, which is not in the layout"),
            );
        }
    }

    /// Checks that the used value `v` exists and has a definition in the function;
    /// returns whether it exists (its type can be trusted).
    fn check_defined(&mut self, at: At, v: Value) -> bool {
        let Some(data) = self.func.values.get(v) else {
            self.report(at, format!("{v} is not a value of the function"));
            return false;
        };
        match data.def {
            ValueDef::Const(c) if data.ty != c.ty() => {
                self.report(
                    at,
                    format!(
                        "the constant {c} is recorded with type {}, but its value is of type {}",
                        data.ty,
                        c.ty()
                    ),
                );
            }
            ValueDef::Const(_) => {}
            def if self.sites[v] == Site::None => {
                let name = self.value_ref(v);
                let def = self.describe_def(def);
                self.report(
                    at,
                    format!(
                        "{name} is used but not defined in the function (its definition says {def})"
                    ),
                );
            }
            _ => {}
        }
        true
    }

    /// Checks that a constant operand `v` has exactly the type `expected` a literal
    /// gets in its position; other values pass.
    fn check_literal(&mut self, at: At, v: Value, expected: Type) {
        let data = &self.func.values[v];
        if let ValueDef::Const(c) = data.def
            && data.ty != expected
        {
            self.report(
                at,
                format!(
                    "constant {c} of type {} cannot be written as a literal here (it would read as {expected}); use `const {} {c}`",
                    data.ty, data.ty
                ),
            );
        }
    }

    /// Checks that the definition of `v` dominates a use in block `user`: before the
    /// instruction at index `idx`, or at the end of the block when `idx` is `None`.
    fn check_dominance(&mut self, at: At, v: Value, user: Block, idx: Option<usize>) {
        let avail = match self.sites[v] {
            Site::None | Site::Param(_) => Avail::Anywhere,
            Site::Phi(d, _) => Avail::Head(d),
            Site::Result(d, i, _) => Avail::After(d, i as usize),
        };
        let (def_block, ok) = match avail {
            Avail::Anywhere => return,
            Avail::Head(d) => (d, self.domtree.dominates(d, user)),
            Avail::After(d, i) if d == user => match idx {
                None => (d, true),
                Some(u) if i < u => (d, true),
                Some(u) => {
                    let name = self.value_ref(v);
                    let message = if i == u {
                        format!(
                            "use of {name} is not dominated by its definition: the instruction uses its own result"
                        )
                    } else {
                        format!(
                            "use of {name} is not dominated by its definition: it is defined later in {}",
                            self.block_ref(d)
                        )
                    };
                    self.report(at, message);
                    return;
                }
            },
            Avail::After(d, _) => (d, self.domtree.dominates(d, user)),
        };
        if !ok {
            let name = self.value_ref(v);
            let mut message = format!(
                "use of {name} is not dominated by its definition in {}",
                self.block_ref(def_block)
            );
            if let At::Phi(..) = at {
                let _ = write!(message, " (incoming edge from {})", self.block_ref(user));
            }
            self.report(at, message);
        }
    }

    // Names and reports.

    /// The printer's names (it names even entities out of range, without panicking).
    fn names(&self) -> &Names {
        self.names.get_or_init(|| Names::new(self.func))
    }

    /// A value as messages name it: `%name`, the literal of a constant, or the bare
    /// ID of a value out of range.
    fn value_ref(&self, v: Value) -> String {
        let Some(data) = self.func.values.get(v) else {
            return v.to_string();
        };
        if let ValueDef::Const(c) = data.def {
            return c.to_string();
        }
        format!("%{}", self.names().value(v))
    }

    /// The label of a block in range.
    fn label(&self, b: Block) -> String {
        self.names().block(b).to_string()
    }

    /// A block as messages name it: `block body`, or the bare ID of a block out of range.
    fn block_ref(&self, b: Block) -> String {
        if self.func.blocks.is_valid(b) {
            format!("block {}", self.label(b))
        } else {
            b.to_string()
        }
    }

    /// `block a`, `blocks a and b`, `blocks a, b and c`.
    fn block_list(&self, blocks: &[Block]) -> String {
        let labels: Vec<String> = blocks.iter().map(|&b| self.label(b)).collect();
        match labels.as_slice() {
            [one] => format!("block {one}"),
            [init @ .., last] => format!("blocks {} and {last}", init.join(", ")),
            [] => "no block".to_string(),
        }
    }

    /// What a [`ValueDef`] says, for messages.
    fn describe_def(&self, def: ValueDef) -> String {
        match def {
            ValueDef::Param(i) => format!("parameter {}", i as u64 + 1),
            ValueDef::Phi(b) => format!("a phi of {}", self.block_ref(b)),
            ValueDef::Result(inst, k) => format!("result {} of {inst}", k as u64 + 1),
            ValueDef::Const(c) => format!("the constant {c}"),
        }
    }

    fn report(&mut self, at: At, message: String) {
        let srcmap = &self.func.srcmap;
        let func_pos = if srcmap.func.is_known() {
            srcmap.func
        } else {
            self.decl.pos
        };
        let (pos, location, context) = match at {
            At::Func => (func_pos, format!("@{}", self.decl.name), String::new()),
            At::Param(v) => (srcmap.values[v], self.value_ref(v), String::new()),
            At::Block(b) => (
                srcmap.blocks[b],
                self.block_ref(b),
                format!("{}:", self.label(b)),
            ),
            At::Phi(b, k) => {
                let phi = &self.func.blocks[b].phis[k];
                (
                    srcmap.values[phi.value],
                    self.value_ref(phi.value),
                    self.phi_context(phi),
                )
            }
            At::Inst(b, inst) => {
                let results = &self.func.insts[inst].results;
                let location = match results.first() {
                    Some(&r) => self.value_ref(r),
                    None => self.block_ref(b),
                };
                (srcmap.insts[inst], location, self.inst_context(inst))
            }
            At::Term(b) => {
                let context = match &self.func.blocks[b].term {
                    Some(t) => self.term_context(t),
                    None => String::new(),
                };
                (srcmap.terms[b], self.block_ref(b), context)
            }
        };
        self.errors.push(VerifierError {
            func: Some(self.decl.name.clone()),
            pos,
            location,
            context,
            message,
        });
    }

    // Contexts: the offending line as the printer writes it.

    fn inst_context(&self, inst: Inst) -> String {
        write::inst_line(self.module, self.func, self.names(), inst)
    }

    fn phi_context(&self, phi: &Phi) -> String {
        write::phi_line(self.func, self.names(), phi)
    }

    fn term_context(&self, term: &Terminator) -> String {
        write::term_line(self.func, self.names(), term)
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builder::FunctionBuilder;
    use crate::types::{Elem, Scalar};
    use cranelift_entity::EntityRef;

    #[test]
    fn the_vjp_signature_takes_cotangents_of_float_results_and_returns_those_of_float_params() {
        let f = Signature::new(
            [Type::F32, Type::I64, Type::Bool, Type::F64],
            [Type::I64, Type::F64, Type::F32],
        );
        let expected = Signature::new(
            [
                Type::F32,
                Type::I64,
                Type::Bool,
                Type::F64,
                Type::F64,
                Type::F32,
            ],
            [Type::F32, Type::F64],
        );
        assert_eq!(vjp_signature(&f), expected);
        assert_eq!(vjp_signature(&Signature::default()), Signature::default());
    }

    #[test]
    fn the_jvp_signature_takes_tangents_of_float_params_and_returns_those_of_float_results() {
        let f = Signature::new(
            [Type::F32, Type::I64, Type::Bool, Type::F64],
            [Type::I64, Type::F64, Type::F32],
        );
        let expected = Signature::new(
            [
                Type::F32,
                Type::I64,
                Type::Bool,
                Type::F64,
                Type::F32,
                Type::F64,
            ],
            [Type::F64, Type::F32],
        );
        assert_eq!(jvp_signature(&f), expected);
        assert_eq!(jvp_signature(&Signature::default()), Signature::default());
        // The example of docs/ir-text.md.
        let g = Signature::new([Type::F64, Type::I64, Type::F32], [Type::F64, Type::I64]);
        assert_eq!(
            jvp_signature(&g).to_string(),
            "(f64, i64, f32, f64, f32) -> f64"
        );
    }

    /// A module with `@g(f64) -> f64` extern and `@f(%x: f64, %s: [f64]) -> f64`
    /// computing `%y = fneg %x; %r = call @g(%y); %l = load %s[0]; ret %r`.
    fn module() -> Module {
        let mut m = Module::new();
        let g = m
            .declare_extern("g", Signature::new([Type::F64], [Type::F64]))
            .unwrap();
        let sig = Signature::new([Type::F64, Type::slice(Elem::F64)], [Type::F64]);
        let id = m.declare("f", sig).unwrap();
        let func = {
            let mut b = FunctionBuilder::new(&m, id);
            let x = b.param(0);
            b.named("x", x);
            let s = b.param(1);
            b.named("s", s);
            let y = b.fneg(x);
            b.named("y", y);
            let r = b.call(g, &[y]);
            b.named("r", r[0]);
            let zero = b.iconst(0);
            let l = b.load(s, zero);
            b.named("l", l);
            b.ret(&[r[0]]);
            b.finish().unwrap()
        };
        m.define(id, func).unwrap();
        m
    }

    fn check(m: &Module) -> Vec<VerifierError> {
        verify_function(m, m.func_by_name("f").unwrap())
    }

    #[test]
    fn builder_functions_are_printable_and_verify() {
        let m = module();
        let id = m.func_by_name("f").unwrap();
        let decl = &m.funcs[id];
        let func = decl.function().unwrap();
        assert!(FuncVerifier::new(&m, decl, func).errors.is_empty());
        assert_eq!(check(&m), []);
    }

    #[test]
    fn references_out_of_range_are_reported_with_the_printed_line() {
        let mut m = module();
        let id = m.func_by_name("f").unwrap();
        let func = m.function_mut(id).unwrap();
        let entry = func.layout[0];
        let [fneg, call, load] = func.blocks[entry].insts[..] else {
            panic!("{:?}", func.blocks[entry].insts);
        };
        func.insts[fneg].args[0] = Value::new(500);
        func.insts[call].imm = Imm::Func(FuncId::new(9));
        func.insts[load].args[1] = Value::new(501);
        func.set_terminator(
            entry,
            Terminator::Ret([Value::new(502)].into_iter().collect()),
        );
        let errs = check(&m);
        let got: Vec<(&str, &str, &str)> = errs
            .iter()
            .map(|e| (e.location.as_str(), e.context.as_str(), e.message.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                (
                    "%y",
                    "%y = fneg %<invalid v500>",
                    "v500 is not a value of the function"
                ),
                (
                    "%r",
                    "%r = call @<invalid fn9>(%y)",
                    "call to fn9, which is not a function of the module"
                ),
                (
                    "%l",
                    "%l = load %s[%<invalid v501>]",
                    "v501 is not a value of the function"
                ),
                (
                    "block entry",
                    "ret %<invalid v502>",
                    "v502 is not a value of the function"
                ),
            ]
        );
    }

    #[test]
    fn phis_and_branches_out_of_range_are_reported_with_the_printed_line() {
        let mut m = module();
        let id = m.func_by_name("f").unwrap();
        let func = m.function_mut(id).unwrap();
        let entry = func.layout[0];
        let x = func.params[0];
        let j = func.make_block(Some("j"));
        func.append_block(j);
        let one = func.make_const(Scalar::F64(1.0));
        let p = func.append_phi(j, Type::F64, &[(entry, x), (Block::new(70), one)]);
        func.set_value_name(p, "p");
        let t = func.make_const(Scalar::Bool(true));
        func.set_terminator(
            entry,
            Terminator::Br {
                cond: t,
                then_dest: j,
                else_dest: Block::new(71),
            },
        );
        func.set_terminator(j, Terminator::Ret([p].into_iter().collect()));
        let errs = check(&m);
        let got: Vec<(&str, &str)> = errs
            .iter()
            .map(|e| (e.context.as_str(), e.message.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                (
                    "br true, j, <invalid block71>",
                    "br to block71, which is not a block of the function"
                ),
                (
                    "%p = phi f64 [entry: %x, <invalid block70>: 1.0]",
                    "phi %p has an incoming value for block70, which is not a block of the function"
                ),
            ]
        );
    }
}
