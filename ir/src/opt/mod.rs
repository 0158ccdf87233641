//! The optimiser: passes over verified IR that keep what every function computes,
//! run before differentiation (and usable on derived code).
//!
//! [`optimize`] runs the passes [`OptConfig`] selects over every defined function of
//! a module, callees before callers, round after round until a round changes nothing
//! (or [`OptConfig::max_rounds`] is reached), and reports what it did
//! ([`OptReport`]). The passes, one module each:
//!
//! - [`fold`]: constant folding with the interpreter's own arithmetic
//!   ([`eval_scalar_op`](crate::interp::eval_scalar_op)), exact algebraic identities,
//!   `br` on a constant to `jump`;
//! - [`dce`]: dead instructions and phis (also phi cycles), unreachable blocks;
//! - [`cse`]: dominator-based value numbering;
//! - [`simplify_cfg`]: block merging, empty forwarding blocks, trivial phis;
//! - [`inline`]: calls to small, non-recursive, loop-free functions without
//!   declarations;
//! - [`licm`]: loop-invariant code motion, of pure instructions and (under a guard)
//!   of calls to functions that write no memory.
//!
//! # What is preserved
//!
//! A function's results, the final contents of its `mut` slices, its runtime errors
//! (the same kind: an out-of-bounds load stays and still fails) and its effects on
//! the tape, in order, are those of the input, on every input. Where the input fails
//! or loops forever, the output does too. Only the number of statements executed
//! ([`Limits::fuel`](crate::interp::Limits::fuel): usually fewer, a few more where a
//! hoisting guard evaluates a loop's test that the loop then evaluates again), the
//! depth of calls (inlined calls take no frame, so a program near
//! [`Limits::max_depth`](crate::interp::Limits::max_depth) may hit it later), the
//! positions and function names in error messages (inside inlined code they name
//! the caller and the call) and the NaN payloads of float results may differ.
//!
//! Passes only remove, merge or move instructions that cannot fail and have no
//! effect; loads, stores, `alloc`s, calls (except a guarded hoist, which runs the
//! call exactly when the loop's first iteration would have), tape ops and `trap_if`
//! are never removed, merged or reordered among themselves. The IR's invariants
//! hold after every pass: IDs are never renumbered (a removed instruction stays in
//! the arena, unplaced), constants are values with no place in a block (a constant
//! the text cannot write as a literal in its position gets a `const` instruction),
//! and every function verifies, prints and parses back to an identical print. As a
//! safety net, [`optimize`] verifies each function it changed and restores the input
//! body of any that does not verify ([`OptReport::restored`], which names a bug).
//!
//! ```
//! use gradlift_ir::interp::{Interpreter, Val};
//! use gradlift_ir::opt::{OptConfig, optimize};
//! use gradlift_ir::parse;
//!
//! let mut module = parse("
//!     func @scale(%x: [f64], %k: f64) -> f64 {
//!     entry:
//!         %n = len %x
//!         jump head
//!     head:
//!         %i = phi i64 [entry: 0, body: %i1]
//!         %acc = phi f64 [entry: 0.0, body: %acc1]
//!         %more = icmp lt %i, %n
//!         br %more, body, exit
//!     body:
//!         %two = fadd 1.0, 1.0
//!         %c = fmul %k, %two
//!         %xi = load %x[%i]
//!         %t = fmul %xi, %c
//!         %acc1 = fadd %acc, %t
//!         %i1 = iadd %i, 1
//!         jump head
//!     exit:
//!         ret %acc
//!     }
//! ").unwrap();
//! let report = optimize(&mut module, &OptConfig::default()).unwrap();
//! assert!(report.folded >= 1 && report.hoisted >= 1, "{report}");
//! let text = module.to_string();
//! // `1.0 + 1.0` is folded and `%k * 2.0` computed once, before the loop.
//! assert!(text.contains("%c = fmul %k, 2.0"), "{text}");
//! assert_eq!(gradlift_ir::parse(&text).unwrap().to_string(), text);
//!
//! let f = module.func_by_name("scale").unwrap();
//! let mut args = [Val::F64s(vec![1.0, 2.0]), Val::F64(0.5)];
//! let out = Interpreter::new(&module).call(f, &mut args).unwrap();
//! assert_eq!(out, [Val::F64(3.0)]);
//! ```

pub mod cse;
pub mod dce;
pub mod fold;
pub mod inline;
pub mod licm;
pub mod simplify_cfg;
mod util;

use core::fmt;

use cranelift_entity::{EntitySet, SecondaryMap};

use crate::callgraph::CallGraph;
use crate::entities::{FuncId, Value};
use crate::function::Function;
use crate::module::{Body, Module};
use crate::ops::Opcode;
use crate::verify::{VerifierErrors, verify, verify_function};

/// Which passes run, and their limits. [`Default`] runs every pass.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OptConfig {
    /// Constant folding and exact identities ([`fold`]).
    pub fold: bool,
    /// Dead code elimination ([`dce`]).
    pub dce: bool,
    /// Common subexpression elimination ([`cse`]).
    pub cse: bool,
    /// Control-flow simplification ([`simplify_cfg`]).
    pub simplify_cfg: bool,
    /// Inlining of small functions ([`inline`]).
    pub inline: bool,
    /// Loop-invariant code motion ([`licm`]).
    pub licm: bool,
    /// The most instructions a callee may have to be inlined.
    pub inline_max_insts: usize,
    /// The most rounds of all passes over the module.
    pub max_rounds: usize,
}

impl Default for OptConfig {
    fn default() -> OptConfig {
        OptConfig {
            fold: true,
            dce: true,
            cse: true,
            simplify_cfg: true,
            inline: true,
            licm: true,
            inline_max_insts: 24,
            max_rounds: 8,
        }
    }
}

impl OptConfig {
    /// No pass at all (a starting point: `OptConfig { fold: true, ..OptConfig::none() }`).
    pub fn none() -> OptConfig {
        OptConfig {
            fold: false,
            dce: false,
            cse: false,
            simplify_cfg: false,
            inline: false,
            licm: false,
            ..OptConfig::default()
        }
    }
}

/// What [`optimize`] did, counted over all functions and rounds.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OptReport {
    /// Instructions folded to a constant or simplified to an operand ([`fold`]).
    pub folded: usize,
    /// `br`s turned into `jump`s: on a constant ([`fold`]) or to one block twice
    /// ([`simplify_cfg`]).
    pub branches_folded: usize,
    /// Dead instructions removed ([`dce`]).
    pub removed: usize,
    /// Phis removed: dead ([`dce`]) or trivial ([`simplify_cfg`]).
    pub phis_removed: usize,
    /// Unreachable blocks removed ([`dce`], [`fold`], [`simplify_cfg`]).
    pub blocks_removed: usize,
    /// Blocks merged into their predecessor or skipped ([`simplify_cfg`]).
    pub blocks_merged: usize,
    /// Instructions merged with an identical earlier one ([`cse`]).
    pub merged: usize,
    /// Calls inlined ([`inline`]).
    pub inlined: usize,
    /// Pure instructions hoisted out of loops ([`licm`]).
    pub hoisted: usize,
    /// Calls hoisted out of loops under a guard ([`licm`]).
    pub calls_hoisted: usize,
    /// Rounds run.
    pub rounds: usize,
    /// Functions whose optimised body did not verify and were given their input body
    /// back. Always empty unless the optimiser has a bug.
    pub restored: Vec<String>,
}

impl OptReport {
    /// Whether any pass changed anything.
    pub fn changed(&self) -> bool {
        self.folded
            + self.branches_folded
            + self.removed
            + self.phis_removed
            + self.blocks_removed
            + self.blocks_merged
            + self.merged
            + self.inlined
            + self.hoisted
            + self.calls_hoisted
            > 0
    }
}

/// One line: `folded 3, branches 1, removed 2, ...` (every count, then the rounds).
impl fmt::Display for OptReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "folded {}, branches folded {}, removed {}, phis removed {}, blocks removed {}, \
             blocks merged {}, merged {}, inlined {}, hoisted {}, calls hoisted {} ({} round{})",
            self.folded,
            self.branches_folded,
            self.removed,
            self.phis_removed,
            self.blocks_removed,
            self.blocks_merged,
            self.merged,
            self.inlined,
            self.hoisted,
            self.calls_hoisted,
            self.rounds,
            if self.rounds == 1 { "" } else { "s" }
        )?;
        if !self.restored.is_empty() {
            write!(
                f,
                "; restored (optimiser bug): @{}",
                self.restored.join(", @")
            )?;
        }
        Ok(())
    }
}

/// Why [`optimize`] refused a module.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum OptError {
    /// The module does not verify: the optimiser only takes well-formed IR.
    Invalid(VerifierErrors),
}

impl fmt::Display for OptError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OptError::Invalid(errors) => {
                write!(
                    f,
                    "cannot optimise a module that does not verify:\n{errors}"
                )
            }
        }
    }
}

impl std::error::Error for OptError {}

/// Optimises every defined function of `module` with the passes `config` selects.
///
/// Refuses a module that does not [verify](crate::verify()) (nothing is changed
/// then). The result verifies, and computes what the input computed (see the
/// [module docs](self)).
pub fn optimize(module: &mut Module, config: &OptConfig) -> Result<OptReport, OptError> {
    verify(module).map_err(OptError::Invalid)?;
    let order = bottom_up(module);
    Ok(run(module, config, &order))
}

/// Optimises the one function `id` of `module` (its callees are read, for inlining
/// and for what they write, not changed). Refuses a module that does not verify.
pub fn optimize_function(
    module: &mut Module,
    id: FuncId,
    config: &OptConfig,
) -> Result<OptReport, OptError> {
    optimize_functions(module, &[id], config)
}

/// Optimises the functions `ids` of `module` (callees before callers), leaving the
/// others as they are: the derived functions of a rule, say. Refuses a module that
/// does not verify.
pub fn optimize_functions(
    module: &mut Module,
    ids: &[FuncId],
    config: &OptConfig,
) -> Result<OptReport, OptError> {
    verify(module).map_err(OptError::Invalid)?;
    let order: Vec<FuncId> = bottom_up(module)
        .into_iter()
        .filter(|f| ids.contains(f))
        .collect();
    Ok(run(module, config, &order))
}

/// Makes every constant operand of every placed instruction of `module` one the text
/// format can write as a literal in its position, giving the others a `const`
/// instruction just before their use (an `f32` constant where the text would read
/// `f64`, say). Builders and the tracer may make such operands; the verifier refuses
/// them, because they would not print back as themselves. Returns how many `const`
/// instructions were made. Changes nothing a program computes.
///
/// ```
/// use gradlift_ir::{Elem, FunctionBuilder, Module, Scalar, Signature, Type, verify};
///
/// // f() = 2 * 3 in f32: both operands constants, which the text would read as f64.
/// let mut m = Module::new();
/// let id = m.declare("f", Signature::new([], [Type::F32])).unwrap();
/// let mut b = FunctionBuilder::new(&m, id);
/// let (two, three) = (b.constant(Scalar::F32(2.0)), b.constant(Scalar::F32(3.0)));
/// let six = b.fmul(two, three);
/// b.ret(&[six]);
/// m.define(id, b.finish().unwrap()).unwrap();
/// assert!(verify(&m).is_err());
/// assert_eq!(gradlift_ir::opt::legalize_literals(&mut m), 1);
/// verify(&m).unwrap();
/// # let _ = Elem::F32;
/// ```
pub fn legalize_literals(module: &mut Module) -> usize {
    let ids: Vec<FuncId> = module.defined().map(|(id, _)| id).collect();
    let mut made = 0;
    for id in ids {
        let Body::Defined(mut func) =
            core::mem::replace(&mut module.funcs[id].body, Body::Declared)
        else {
            continue;
        };
        for b in func.layout.clone() {
            for inst in func.blocks[b].insts.clone() {
                made += util::legalize_literals(module, &mut func, b, inst);
            }
        }
        module.funcs[id].body = Body::Defined(func);
    }
    made
}

/// Runs the rounds over the functions `order`, then the safety net.
fn run(module: &mut Module, config: &OptConfig, order: &[FuncId]) -> OptReport {
    let original: Vec<(FuncId, Function)> = order
        .iter()
        .filter_map(|&id| module.function(id).map(|f| (id, f.clone())))
        .collect();
    let mut report = OptReport::default();
    let mut changed_funcs = EntitySet::<FuncId>::new();
    for _ in 0..config.max_rounds {
        report.rounds += 1;
        let facts = ModuleFacts::new(module);
        let mut changed = false;
        for &id in order {
            let Body::Defined(func) =
                core::mem::replace(&mut module.funcs[id].body, Body::Declared)
            else {
                continue;
            };
            let mut func = func;
            let before = report.clone();
            run_passes(module, &facts, id, &mut func, config, &mut report);
            module.funcs[id].body = Body::Defined(func);
            if report != before {
                changed = true;
                changed_funcs.insert(id);
            }
        }
        if !changed {
            break;
        }
    }
    // The safety net: a function that does not verify gets its input body back.
    for (id, func) in original {
        if changed_funcs.contains(id) && !verify_function(module, id).is_empty() {
            report.restored.push(module.name(id).to_string());
            module.funcs[id].body = Body::Defined(func);
        }
    }
    report
}

/// One round of the selected passes over `func` (the body of `id`, taken out of
/// `module`).
fn run_passes(
    module: &Module,
    facts: &ModuleFacts,
    id: FuncId,
    func: &mut Function,
    config: &OptConfig,
    report: &mut OptReport,
) {
    if config.inline {
        report.inlined += inline::run(module, facts, id, func, config.inline_max_insts);
    }
    if config.fold {
        let s = fold::run(module, func);
        report.folded += s.folded;
        report.branches_folded += s.branches;
        report.blocks_removed += s.blocks_removed;
        // Uses of `const` instructions turned into literals change the function
        // but are not folds; count them as folded so a round that did only that
        // still counts as a change.
        report.folded += s.literals;
    }
    if config.simplify_cfg {
        let s = simplify_cfg::run(module, func);
        report.blocks_merged += s.blocks_merged;
        report.blocks_removed += s.blocks_removed;
        report.phis_removed += s.phis;
        report.branches_folded += s.branches;
    }
    if config.cse {
        report.merged += cse::run(module, func);
    }
    if config.licm {
        let s = licm::run(module, facts, func);
        report.hoisted += s.hoisted;
        report.calls_hoisted += s.calls;
    }
    if config.dce {
        let s = dce::run(func);
        report.removed += s.insts;
        report.phis_removed += s.phis;
        report.blocks_removed += s.blocks;
    }
}

/// What the passes need to know about the module's functions.
pub(crate) struct ModuleFacts {
    /// In a cycle of the call graph (calls itself, directly or through others).
    pub(crate) recursive: SecondaryMap<FuncId, bool>,
    /// Named by an `overlay`, `vjp`, `jvp` or `nodiff` declaration.
    pub(crate) declared: SecondaryMap<FuncId, bool>,
    /// May write memory its caller can see, change the tape, or run host code:
    /// stores into anything but its own `alloc`s, a `mut` slice parameter, `push`,
    /// `pop`, `tape_alloc`, a call to an extern or to a function that writes.
    pub(crate) writes: SecondaryMap<FuncId, bool>,
}

impl ModuleFacts {
    fn new(module: &Module) -> ModuleFacts {
        let graph = CallGraph::new(module);
        let mut declared = SecondaryMap::new();
        for (d, _) in &module.decls {
            declared[d.func()] = true;
        }
        let mut recursive = SecondaryMap::new();
        for f in graph.bottom_up() {
            recursive[f] = graph.is_recursive(f);
        }
        let mut writes: SecondaryMap<FuncId, bool> = SecondaryMap::new();
        for (id, decl) in &module.funcs {
            writes[id] = match &decl.body {
                Body::Defined(f) => {
                    decl.sig.params.iter().any(|t| t.is_mut_slice()) || writes_locally(f)
                }
                Body::Extern | Body::Declared => true,
            };
        }
        // Through calls, to a fixed point.
        loop {
            let mut changed = false;
            for (id, _) in module.defined() {
                if !writes[id] && graph.callees(id).iter().any(|&g| writes[g]) {
                    writes[id] = true;
                    changed = true;
                }
            }
            if !changed {
                break;
            }
        }
        ModuleFacts {
            recursive,
            declared,
            writes,
        }
    }
}

/// Whether `func` itself (not its callees) writes memory others can see or changes
/// the tape.
fn writes_locally(func: &Function) -> bool {
    let local = local_buffers(func);
    func.placed_insts().any(|(_, i)| {
        let d = &func.insts[i];
        match d.opcode {
            Opcode::Store => d.args.first().is_none_or(|&s| !local.contains(s)),
            Opcode::Push | Opcode::Pop | Opcode::TapeAlloc => true,
            _ => false,
        }
    })
}

/// The slice values of `func` that can only be its own `alloc`s: `alloc` results,
/// and phis and `select`s of those alone (the largest such set, so cycles of phis
/// count).
fn local_buffers(func: &Function) -> EntitySet<Value> {
    let mut local = EntitySet::<Value>::new();
    let mut derived: Vec<(Value, Vec<Value>)> = Vec::new();
    for &b in &func.layout {
        for phi in &func.blocks[b].phis {
            if func.values[phi.value].ty.is_slice() {
                local.insert(phi.value);
                derived.push((phi.value, phi.incoming.iter().map(|&(_, v)| v).collect()));
            }
        }
        for &i in &func.blocks[b].insts {
            let d = &func.insts[i];
            match d.opcode {
                Opcode::Alloc => {
                    if let Some(&r) = d.results.first() {
                        local.insert(r);
                    }
                }
                Opcode::Select
                    if d.results
                        .first()
                        .is_some_and(|&r| func.values[r].ty.is_slice()) =>
                {
                    let r = d.results[0];
                    local.insert(r);
                    derived.push((r, d.args[1..].to_vec()));
                }
                _ => {}
            }
        }
    }
    loop {
        let mut changed = false;
        for (v, inputs) in &derived {
            if local.contains(*v) && inputs.iter().any(|&x| !local.contains(x)) {
                local.remove(*v);
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    local
}

/// The defined functions, callees before callers (a function of a cycle in any order
/// among the others of its cycle).
fn bottom_up(module: &Module) -> Vec<FuncId> {
    CallGraph::new(module)
        .bottom_up()
        .filter(|&f| module.function(f).is_some())
        .collect()
}
