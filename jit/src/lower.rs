//! Lowering: one verified IR function to one Cranelift function, with the
//! [ABI](crate#the-abi) of the crate docs.
//!
//! The IR is already SSA with phis at block heads, so the lowering is direct: every
//! reachable IR block becomes a Cranelift block whose parameters are its phis, every
//! IR value one Cranelift value (a slice two: address and length), and every edge
//! passes the phis' incoming values as block arguments. Blocks are emitted in
//! reverse postorder, so every definition is emitted before its uses (the IR
//! verifier checked dominance); unreachable blocks are left out. Constants are
//! materialised where they are used (Cranelift's optimiser merges them).
//!
//! The ops follow the op table ([`gradlift_ir::ops`]), one method per [`Shape`]:
//! [`Lower::float_binary`], [`Lower::float_unary`], ... Checks that can fail
//! (bounds, division by zero, negative `alloc`, the depth and stack limits at a
//! `call`, the type tag at a `pop`, `trap_if`) branch to one cold error block per
//! function, which writes the error into the context and returns zeros; after every
//! call the caller tests the context's status and returns at once if it is set.
//!
//! The tape's height and the type tags of a block's pushes stay in registers
//! within an IR block and are written back where something reads them
//! ([`TapeState`]).

use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::immediates::{Ieee32, Ieee64};
use cranelift_codegen::ir::{
    self as cl, AbiParam, AliasRegionData, BlockArg, Endianness, FuncRef, InstBuilder,
    MemFlagsData, types,
};
use cranelift_codegen::isa::{CallConv, TargetFrontendConfig};
use cranelift_entity::{EntityRef, SecondaryMap};
use cranelift_frontend::{FunctionBuilder, Variable};
use cranelift_module::{FuncId as ClFuncId, Linkage, Module as ClModule};
use gradlift_ir::dominators::DominatorTree;
use gradlift_ir::flowgraph::ControlFlowGraph;
use gradlift_ir::loops::LoopForest;
use gradlift_ir::ops::Shape;
use gradlift_ir::{
    Block, Body, CmpPred, Elem, FuncId, Function, Imm, Inst, Module, Opcode, Pos, Scalar,
    Terminator, Type, Value, ValueDef,
};
use std::collections::{HashMap, HashSet};

use crate::error::CompileError;
use crate::helpers::{Helper, MathFn, MathFn2};
use crate::lanes::{self, LanePlan, quiet};
use crate::ranges::Ranges;
use crate::runtime::{Offsets, code, elem_code, scalar_code};
use crate::version::{self, Counter, Versioned};

/// The Cranelift types one IR type is passed as: a scalar one value, a slice two
/// (address, length).
pub(crate) fn clif_types(ty: Type) -> &'static [cl::Type] {
    match ty {
        Type::F64 => &[types::F64],
        Type::F32 => &[types::F32],
        Type::I64 => &[types::I64],
        Type::Bool => &[types::I8],
        Type::Slice { .. } => &[types::I64, types::I64],
    }
}

/// The Cranelift signature of a compiled IR function: the context pointer, then
/// the flattened parameters; the flattened results.
pub(crate) fn clif_signature(sig: &gradlift_ir::Signature, call_conv: CallConv) -> cl::Signature {
    let mut s = cl::Signature::new(call_conv);
    s.params.push(AbiParam::new(types::I64));
    for &t in &sig.params {
        s.params
            .extend(clif_types(t).iter().map(|&t| AbiParam::new(t)));
    }
    for &t in &sig.results {
        s.returns
            .extend(clif_types(t).iter().map(|&t| AbiParam::new(t)));
    }
    s
}

/// An IR value in Cranelift: a scalar, or a slice's address and length.
#[derive(Copy, Clone, Debug)]
pub(crate) enum Lv {
    One(cl::Value),
    Slice(cl::Value, cl::Value),
}

impl Lv {
    fn one(self) -> cl::Value {
        match self {
            Lv::One(v) | Lv::Slice(v, _) => v,
        }
    }

    pub(crate) fn push_to(self, out: &mut Vec<cl::Value>) {
        match self {
            Lv::One(v) => out.push(v),
            Lv::Slice(p, n) => {
                out.push(p);
                out.push(n);
            }
        }
    }
}

/// Memory accesses through the context and through checked slice addresses: the
/// address is in bounds and aligned, so the access cannot trap.
fn trusted() -> MemFlagsData {
    MemFlagsData::trusted()
}

/// A vector access to two elements checked in bounds: no trap, and aligned to
/// the element only.
fn vector_flags() -> MemFlagsData {
    MemFlagsData::new().with_notrap()
}

/// Log2 of an element's size.
fn elem_shift(e: Elem) -> i64 {
    match e {
        Elem::F64 | Elem::I64 => 3,
        Elem::F32 => 2,
    }
}

fn elem_type(e: Elem) -> cl::Type {
    match e {
        Elem::F64 => types::F64,
        Elem::F32 => types::F32,
        Elem::I64 => types::I64,
    }
}

/// What a function needs from the module being built: the declared IR functions
/// and helpers.
pub(crate) struct Decls<'a> {
    /// `exp`'s table ([`gradlift_ir::math::exp_table`]), a data object of the
    /// module.
    pub(crate) exp_table: cranelift_module::DataId,
    /// The Cranelift function of each IR function being compiled.
    pub(crate) funcs: &'a HashMap<FuncId, ClFuncId>,
    /// The calling convention of every function.
    pub(crate) call_conv: CallConv,
    /// The calling convention of the cold helpers ([`Helper::is_cold`]).
    pub(crate) cold_call_conv: CallConv,
    /// The target's pointer type and the like, for the builder.
    pub(crate) frontend: TargetFrontendConfig,
    /// Whether `push` writes type tags and `pop` checks them
    /// ([`CompileOptions::tape_checks`](crate::CompileOptions::tape_checks)).
    pub(crate) tape_checks: bool,
}

/// The lowering of one function.
pub(crate) struct Lower<'a, 'b, M: ClModule> {
    module: &'a Module,
    fid: FuncId,
    func: &'a Function,
    jm: &'a mut M,
    decls: &'a Decls<'a>,
    b: FunctionBuilder<'b>,
    ctx: cl::Value,
    vals: SecondaryMap<Value, Option<Lv>>,
    blocks: SecondaryMap<Block, Option<cl::Block>>,
    /// Writes an error into the context and returns: parameters code, inst, a, b.
    err_block: cl::Block,
    /// Returns zeros (after an error, written here or by a callee).
    bail_block: cl::Block,
    helpers: HashMap<Helper, FuncRef>,
    callees: HashMap<FuncId, FuncRef>,
    /// The arena's chunk and used bytes at entry, for functions that `alloc`.
    arena_mark: Option<(cl::Value, cl::Value)>,
    /// The alias regions of the scalar stack's accesses ([`TapeRegions`]).
    tape: TapeRegions,
    /// The tape as the block being lowered left it in registers ([`TapeState`]).
    tape_state: Option<TapeState>,
    /// In a function that pushes or pops: the tape's height between blocks, a
    /// Cranelift variable ([`TapeState`]).
    height: Option<Variable>,
    /// Index ranges already checked in the block being lowered ([`Checked`]).
    checked: Checked,
    /// The pairs of lanes lowered as `f64x2` ([`lanes`]).
    lanes: LanePlan,
    /// Indices proved in bounds ([`Ranges`]).
    ranges: Ranges,
    /// The IR block being lowered.
    cur_block: Block,
    /// The vector of each pair made so far, by its first value.
    vecs: HashMap<Value, cl::Value>,
    /// The address of the first load of a pair, loaded with the second.
    pending_loads: HashMap<Value, cl::Value>,
    /// The first store of a store pair, made with the second: the second store,
    /// the address and the value of the first.
    pending_store: Option<(Inst, cl::Value, Value)>,
    /// Rotated loops ([`rotations`]): by latch, the header whose test the latch
    /// repeats.
    rotated: HashMap<Block, Block>,
    /// The values a rotated header defines, as Cranelift variables (defined where
    /// the header and where each copy of its test runs).
    vars: HashMap<Value, Variable>,
    /// Loops lowered twice ([`version`]), by header.
    versioned: HashMap<Block, Versioned>,
    /// The dispatch block of each versioned loop, by header: the loop's entry
    /// edge goes there, with the header's arguments.
    dispatch: HashMap<Block, cl::Block>,
    /// While the unchecked copy of a versioned loop is lowered: its blocks.
    copy: Option<Copy>,
    /// The stack slot holding the address of each slice parameter that a
    /// versioned loop reads or writes ([`Lower::version`]).
    reloads: HashMap<Value, cl::StackSlot>,
    /// The blocks that read each value (instructions, terminators, phis of
    /// successors), made when a block first calls out ([`Self::spill_across`]).
    readers: Option<HashMap<Value, Vec<Block>>>,
    /// The blocks reachable from the last block that called out, and that block.
    reachable: Option<(Block, HashSet<Block>)>,
    /// `iadd`/`isub` of a literal whose result a deeper loop than its own reads
    /// ([`Self::int_binary`]).
    hoisted_imm: HashSet<Inst>,
    /// The IR's dominator tree.
    dom: DominatorTree,
    /// The reduction and both kernels of each `f64` whose `sin` or `cos` was
    /// lowered, for the other one ([`Self::sincos_f64`]).
    sincos: HashMap<Value, SinCos>,
    /// Counts the switches between a versioned loop's copies (values lowered in
    /// one are not the other's).
    copy_epoch: u32,
    /// `exp`'s table as a global value of this function, once declared.
    exp_table: Option<cl::GlobalValue>,
}

/// What [`Lower::sincos_f64`] keeps of an `f64`'s `sin` or `cos`: where it was
/// lowered, the quadrant `n`, both kernels and whether the argument is out of
/// the inline range.
#[derive(Clone, Copy)]
struct SinCos {
    x: cl::Value,
    block: Block,
    epoch: u32,
    n: cl::Value,
    sin: cl::Value,
    cos: cl::Value,
    outside: cl::Value,
}

/// The unchecked copy of a versioned loop being lowered ([`version`]).
struct Copy {
    /// The copy's Cranelift block of each of the loop's blocks.
    blocks: HashMap<Block, cl::Block>,
    /// The copy's block parameter of each of the loop's phis.
    params: HashMap<Value, cl::Value>,
    /// By block, the accesses the dispatch proved in bounds.
    unchecked: HashMap<Block, std::collections::HashSet<(Value, Value)>>,
    /// The slice parameters as the copy has them: the address reloaded in the
    /// dispatch.
    slices: HashMap<Value, Lv>,
}

/// The most instructions a loop's header may have for its test to be copied into
/// the latch.
const MAX_ROTATED_INSTS: usize = 4;

/// [`Lower::spill_across`] runs in blocks with at most this many instructions
/// after the call, in functions of at most this many blocks.
const MAX_SPILL_SCAN: usize = 512;

/// The `iadd` and `isub` of an `i64` literal in `func` whose result is read in a
/// block of a deeper loop than the instruction's own ([`Lower::int_binary`]).
fn hoisted_imm(func: &Function, forest: &LoopForest) -> HashSet<Inst> {
    let depth = |b: Block| {
        forest
            .innermost(b)
            .map_or(0, |l| forest.ancestors(l).count() + 1)
    };
    let mut def_depth: HashMap<Value, (Inst, usize)> = HashMap::new();
    for (b, inst) in func.placed_insts() {
        let d = &func.insts[inst];
        if matches!(d.opcode, Opcode::Iadd | Opcode::Isub)
            && func.value_type(d.results[0]) == Type::I64
            && d.args
                .iter()
                .filter(|&&a| matches!(func.value_def(a), ValueDef::Const(_)))
                .count()
                == 1
        {
            def_depth.insert(d.results[0], (inst, depth(b)));
        }
    }
    let mut out = HashSet::new();
    if def_depth.is_empty() {
        return out;
    }
    for &b in &func.layout {
        let here = depth(b);
        let data = &func.blocks[b];
        let reads = data
            .insts
            .iter()
            .flat_map(|&i| func.insts[i].args.iter().copied())
            .chain(match &data.term {
                Some(Terminator::Br { cond, .. }) => vec![*cond],
                _ => Vec::new(),
            });
        for v in reads {
            if let Some(&(inst, d)) = def_depth.get(&v)
                && d < here
            {
                out.insert(inst);
            }
        }
    }
    out
}

/// The loops whose test is copied to the end of the latch (rotation), by latch:
/// the loop then takes one branch per iteration instead of two (into the body
/// at the top, back to the header at the end), as compilers lay loops out
/// (Cranelift keeps the blocks as given). A loop qualifies when its header has
/// one predecessor from outside the loop and latches (predecessors it
/// dominates) that all end in `jump header`, scalar phis that are not lane
/// pairs, a `br` to two other blocks, and at most [`MAX_ROTATED_INSTS`]
/// instructions, each of which cannot
/// fail and reads no memory (`icmp`, `iadd`, `isub`, `len`): running the copy
/// at the end of the latch computes what the header would compute next, at the
/// same point of the run.
fn rotations(
    func: &Function,
    cfg: &ControlFlowGraph,
    dom: &DominatorTree,
    plan: &LanePlan,
) -> HashMap<Block, Block> {
    let mut out = HashMap::new();
    for &h in cfg.reverse_postorder() {
        let d = &func.blocks[h];
        // One entry from outside the loop; every other predecessor a latch.
        let (latches, entries): (Vec<Block>, Vec<Block>) =
            cfg.preds(h).iter().partition(|&&p| dom.dominates(h, p));
        if entries.len() != 1 || latches.is_empty() || latches.contains(&h) {
            continue;
        }
        let branches_away = matches!(
            &d.term,
            Some(Terminator::Br { then_dest, else_dest, .. })
                if then_dest != else_dest && *then_dest != h && *else_dest != h
        );
        if !branches_away
            || latches
                .iter()
                .any(|&l| func.blocks[l].term != Some(Terminator::Jump(h)))
        {
            continue;
        }
        let scalar = |v: Value| clif_types(func.value_type(v)).len() == 1 && plan.pair(v).is_none();
        let phis_ok = d.phis.iter().all(|p| scalar(p.value));
        let insts_ok = d.insts.len() <= MAX_ROTATED_INSTS
            && d.insts.iter().all(|&i| {
                let data = &func.insts[i];
                matches!(
                    data.opcode,
                    Opcode::Icmp
                        | Opcode::Iadd
                        | Opcode::Isub
                        | Opcode::Len
                        | Opcode::CheckpointLoop
                ) && data.results.iter().all(|&r| scalar(r))
            });
        if phis_ok && insts_ok {
            out.extend(latches.into_iter().map(|l| (l, h)));
        }
    }
    out
}

/// The bounds already checked in the IR block being lowered: for a slice value
/// and an index base, the offsets `lo..=hi` with `base + c` known to be inside
/// the slice for every `c` between (both ends were checked, and `base + lo` is not
/// negative, so nothing between wraps). A load or store of `slice[base + c]` with
/// `c` in the range needs no check of its own.
///
/// Ranges come from runs of loads ([`Lower::check_run`]): where a block reads
/// `x[k]`, `x[k + 1]`, ..., `x[k + 7]` (the lanes of a rule of width 8) with only
/// instructions between that cannot fail and write nothing, the two ends are
/// checked once before the first load, and a cold path repeats the loads'
/// checks one by one in their order when either end fails, so the error is the
/// one the first failing load would have raised. Nothing between can be observed
/// (it neither fails nor writes), so checking early changes no result.
/// Later stores into the same elements (a shadow's lanes, read then written) are
/// covered too. Ranges live for one IR block.
type Checked = HashMap<(Value, Value), (i64, i64)>;

/// The most instructions a run of loads spans ([`Checked`]): it bounds the
/// look-ahead from each load, so lowering stays linear in the block's length.
const MAX_RUN_INSTS: usize = 256;

/// The tape within one IR block, kept in registers: its height, read from the
/// context at the block's first `push` or `pop` (`dirty` once one changed it),
/// and the type tags of the block's last pushes, not yet written (with tape
/// checks). Both are written back only where something may read them: before the
/// block's terminator (so every block starts with the context and the tags
/// right), before a `pop` (the tags), a call and `tape_alloc`, and on the cold
/// paths to the error block and to `tape_grow`. A block of k pushes thus writes
/// the height once and its k tags with one store (up to 8), not k times each.
///
/// In a function where a loop pushes or pops, the height also stays in a
/// register between blocks: a Cranelift variable ([`Lower::height`]) holds it,
/// defined from the context at the entry and after each call, and at the end of
/// every block that changed it. A block then reads the variable instead of the
/// context (and takes the context to be behind, `dirty`), and the context is
/// written only where something reads it: before a call, `tape_alloc`,
/// `tape_grow` and `ret`, and on the cold paths to the error block. A loop's
/// iterations pass the height in a register instead of storing it and loading
/// it back (a store-to-load round trip on the loop's critical path).
#[derive(Copy, Clone)]
struct TapeState {
    len: cl::Value,
    dirty: bool,
    tags: Option<PendingTags>,
}

/// Tags pushed and not yet written: those of the slots `from..from + n`.
#[derive(Copy, Clone)]
struct PendingTags {
    from: cl::Value,
    tags: [u8; 8],
    n: usize,
}

/// The memory flags of the scalar stack's accesses: four alias regions of
/// disjoint memory, so that Cranelift keeps the stack's address in a register
/// across a run of `push`es or `pop`s instead of reloading it after every store.
///
/// - `ptrs`: the context's `tape_ptr` and `tape_cap`, which generated code only
///   reads (Rust changes them in `tape_grow`, a call).
/// - `slots` and `tags`: the stack's slots and their tags (below the slots).
/// - `height`: the context's `tape_len`, which [`TapeState`] reads and writes
///   back (so writing it back at a block's end does not make the next block
///   reload the stack's address).
///
/// Every other access keeps no region: its stores are barriers to all four, as
/// are calls, so the regions only ever let loads of these pass stores of the
/// others.
#[derive(Copy, Clone)]
struct TapeRegions {
    ptrs: MemFlagsData,
    slots: MemFlagsData,
    tags: MemFlagsData,
    height: MemFlagsData,
}

impl TapeRegions {
    fn new(func: &mut cl::Function) -> TapeRegions {
        let mut region = |user_id: u32, description: &'static str| {
            let r = func.dfg.alias_regions.insert(AliasRegionData {
                user_id,
                description: description.into(),
            });
            trusted().with_alias_region(Some(r))
        };
        TapeRegions {
            ptrs: region(1, "tape pointers"),
            slots: region(2, "tape slots"),
            tags: region(3, "tape tags"),
            height: region(4, "tape height"),
        }
    }
}

impl<'a, 'b, M: ClModule> Lower<'a, 'b, M> {
    /// Lowers `fid` of `module` into the builder's function (whose signature is set).
    pub(crate) fn run(
        module: &'a Module,
        fid: FuncId,
        jm: &'a mut M,
        decls: &'a Decls<'a>,
        b: FunctionBuilder<'b>,
    ) -> Result<(), CompileError> {
        let decl = &module.funcs[fid];
        let Some(func) = decl.function() else {
            return Err(CompileError::NotDefined(decl.name.clone()));
        };
        let mut b = b;
        let cfg = ControlFlowGraph::new(func);
        let rpo = cfg.reverse_postorder().to_vec();
        let Some(&entry) = rpo.first() else {
            return Err(internal(module, fid, "a function without an entry block"));
        };
        // One Cranelift block per reachable IR block; phis become parameters.
        let mut blocks = SecondaryMap::new();
        let mut vals: SecondaryMap<Value, Option<Lv>> = SecondaryMap::new();
        let plan = LanePlan::new(func);
        let mut vecs = HashMap::new();
        for &blk in &rpo {
            let cb = b.create_block();
            blocks[blk] = Some(cb);
            for phi in &func.blocks[blk].phis {
                // A pair of phis is one `f64x2` parameter (its lanes are
                // extracted where the block starts).
                match plan.pair(phi.value) {
                    Some((first, _)) if first == phi.value => {
                        vecs.insert(first, b.append_block_param(cb, types::F64X2));
                        continue;
                    }
                    Some(_) => continue,
                    None => {}
                }
                let lv = match *clif_types(func.value_type(phi.value)) {
                    [t] => Lv::One(b.append_block_param(cb, t)),
                    [p, n] => {
                        let p = b.append_block_param(cb, p);
                        Lv::Slice(p, b.append_block_param(cb, n))
                    }
                    _ => return Err(internal(module, fid, "a type of no Cranelift type")),
                };
                vals[phi.value] = Some(lv);
            }
        }
        let centry = blocks[entry].expect("made above");
        b.append_block_params_for_function_params(centry);
        let params = b.block_params(centry).to_vec();
        let ctx = params[0];
        let mut k = 1;
        for (&v, &ty) in func.params.iter().zip(&decl.sig.params) {
            let lv = if ty.is_slice() {
                k += 2;
                Lv::Slice(params[k - 2], params[k - 1])
            } else {
                k += 1;
                Lv::One(params[k - 1])
            };
            vals[v] = Some(lv);
        }
        let err_block = b.create_block();
        for t in [types::I32, types::I32, types::I64, types::I64] {
            b.append_block_param(err_block, t);
        }
        b.set_cold_block(err_block);
        let bail_block = b.create_block();
        b.set_cold_block(bail_block);

        let tape = TapeRegions::new(b.func);
        // The dominator tree and the loops, computed once for the analyses below.
        let dom = DominatorTree::new(&cfg);
        let forest = LoopForest::new(&cfg, &dom);
        let rotated = rotations(func, &cfg, &dom, &plan);
        let ranges = Ranges::new(func, &cfg, &dom);
        let versioned = version::plan(func, &cfg, &dom, &forest, &plan, &ranges);
        let hoisted_imm = hoisted_imm(func, &forest);
        // The values of rotated headers and of versioned loops are variables.
        // In block order, not the maps' (random) order: Cranelift numbers variables
        // and blocks in the order they are made, and `dump --stage clif`, object
        // files and the machine code must not change from one run to the next.
        let mut vars = HashMap::new();
        let mut rotated_headers: Vec<Block> = rotated.values().copied().collect();
        rotated_headers.sort_unstable();
        let mut versioned_headers: Vec<Block> = versioned.keys().copied().collect();
        versioned_headers.sort_unstable();
        let versioned_blocks = versioned_headers
            .iter()
            .flat_map(|h| versioned[h].blocks.iter().copied());
        for h in rotated_headers.into_iter().chain(versioned_blocks) {
            let d = &func.blocks[h];
            let defined = d.phis.iter().map(|p| p.value).chain(
                d.insts
                    .iter()
                    .flat_map(|&i| func.insts[i].results.iter().copied()),
            );
            for v in defined {
                if vars.contains_key(&v) {
                    continue;
                }
                let [t] = *clif_types(func.value_type(v)) else {
                    return Err(internal(module, fid, "a loop variable of two parts"));
                };
                vars.insert(v, b.declare_var(t));
            }
        }
        let mut dispatch = HashMap::new();
        for &h in &versioned_headers {
            let d = b.create_block();
            let header = blocks[h].expect("loop headers are reachable");
            let types: Vec<cl::Type> = b
                .func
                .dfg
                .block_params(header)
                .iter()
                .map(|&p| b.func.dfg.value_type(p))
                .collect();
            for t in types {
                b.append_block_param(d, t);
            }
            dispatch.insert(h, d);
        }
        let mut lower = Lower {
            module,
            fid,
            func,
            jm,
            decls,
            b,
            ctx,
            vals,
            blocks,
            err_block,
            bail_block,
            helpers: HashMap::new(),
            callees: HashMap::new(),
            arena_mark: None,
            tape,
            tape_state: None,
            height: None,
            checked: HashMap::new(),
            lanes: plan,
            ranges,
            cur_block: entry,
            vecs,
            pending_loads: HashMap::new(),
            pending_store: None,
            rotated,
            vars,
            versioned,
            dispatch,
            copy: None,
            reloads: HashMap::new(),
            readers: None,
            reachable: None,
            hoisted_imm,
            dom,
            sincos: HashMap::new(),
            copy_epoch: 0,
            exp_table: None,
        };
        lower.b.switch_to_block(centry);
        // The addresses of the slices that versioned loops read or write (slice
        // parameters, and the results of `alloc` and `tape_view`, stored where
        // they are made), kept in stack slots: the dispatch reloads them, so that
        // in the copy they are values that live only as long as the loop. A value
        // live across a call elsewhere in the function is otherwise kept in a
        // stack slot by the register allocator, and reloaded (and stored again)
        // in every iteration.
        let mut used: Vec<Value> = lower
            .versioned
            .values()
            .flat_map(|v| v.reloaded.iter().copied())
            .collect();
        used.sort();
        used.dedup();
        for s in used {
            let slot = lower.b.create_sized_stack_slot(cl::StackSlotData::new(
                cl::StackSlotKind::ExplicitSlot,
                8,
                3,
            ));
            lower.reloads.insert(s, slot);
            if let Some(Lv::Slice(p, _)) = lower.vals[s] {
                lower.b.ins().stack_store(types::I64, p, slot, 0);
            }
        }
        // The height lives in a variable between blocks where a loop pushes or
        // pops (its iterations then pass it in a register, not through the
        // context); elsewhere each block reads the context and writes it back, which
        // keeps the variable from taking a register across loops that leave the
        // tape alone.
        let tapes = rpo.iter().any(|&blk| {
            forest.innermost(blk).is_some()
                && func.blocks[blk]
                    .insts
                    .iter()
                    .any(|&i| matches!(func.insts[i].opcode, Opcode::Push | Opcode::Pop))
        });
        if tapes {
            let var = lower.b.declare_var(types::I64);
            let (t, ctx) = (lower.tape, lower.ctx);
            let len = lower
                .b
                .ins()
                .load(types::I64, t.height, ctx, Offsets::TAPE_LEN);
            lower.b.def_var(var, len);
            lower.height = Some(var);
        }
        let allocates = func
            .placed_insts()
            .any(|(_, i)| func.insts[i].opcode == Opcode::Alloc);
        if allocates {
            let chunk = lower.load_ctx(types::I64, Offsets::ARENA_CHUNK);
            let used = lower.load_ctx(types::I64, Offsets::ARENA_USED);
            lower.arena_mark = Some((chunk, used));
        }
        for &blk in &rpo {
            lower.block(blk)?;
        }
        lower.error_blocks();
        lower.b.seal_all_blocks();
        lower.b.finalize(decls.frontend);
        Ok(())
    }

    fn block(&mut self, blk: Block) -> Result<(), CompileError> {
        if self.copy.is_none() && self.versioned.contains_key(&blk) {
            self.version(blk)?;
        }
        let cb = match &self.copy {
            Some(copy) => *copy
                .blocks
                .get(&blk)
                .ok_or_else(|| self.internal("a versioned loop's block without its copy"))?,
            None => self.blocks[blk].expect("reachable blocks have Cranelift blocks"),
        };
        if self.b.current_block() != Some(cb) {
            self.b.switch_to_block(cb);
        }
        // Every block ends with the context's tape right (below), so the next one
        // starts from the context.
        self.tape_state = None;
        self.cur_block = blk;
        self.checked.clear();
        self.pending_loads.clear();
        self.pending_store = None;
        for phi in &self.func.blocks[blk].phis {
            let x = match &self.copy {
                Some(copy) => copy.params.get(&phi.value).copied(),
                None => match self.vals[phi.value] {
                    Some(Lv::One(x)) => Some(x),
                    _ => None,
                },
            };
            if let (Some(&var), Some(x)) = (self.vars.get(&phi.value), x) {
                self.b.def_var(var, x);
            }
        }
        for phi in &self.func.blocks[blk].phis {
            if let Some((first, second)) = self.lanes.pair(phi.value)
                && first == phi.value
            {
                let Some(&v) = self.vecs.get(&first) else {
                    return Err(self.internal("a pair of phis without its parameter"));
                };
                self.define_pair(first, second, v);
            }
        }
        let func = self.func;
        let insts = &func.blocks[blk].insts;
        let mut run_end = 0;
        let mut spilled: HashMap<Value, (cl::StackSlot, Option<Lv>)> = HashMap::new();
        for (at, &inst) in insts.iter().enumerate() {
            if at >= run_end && func.insts[inst].opcode == Opcode::Load {
                run_end = self.check_run(&insts[at..])? + at;
            }
            let across = if self.calls_out(inst) {
                self.spill_across(blk, &insts[at + 1..], inst, &mut spilled)?
            } else {
                Vec::new()
            };
            self.inst(inst)?;
            for (v, slot, ty) in across {
                // Loaded as an integer and moved: a float load could become the
                // memory operand of a commutative op, whose operands x86-64 then
                // swaps, which changes which NaN comes out.
                let int = if ty == types::F64 {
                    types::I64
                } else {
                    types::I32
                };
                let bits = self.b.ins().stack_load(types::I64, int, slot, 0);
                let x = self.b.ins().bitcast(ty, MemFlagsData::new(), bits);
                match self.vars.get(&v) {
                    Some(&var) => self.b.def_var(var, x),
                    None => self.vals[v] = Some(Lv::One(x)),
                }
            }
        }
        // The reloads serve this block only (blocks it does not dominate read
        // the values as defined); a variable's reload is an ordinary definition.
        for (v, (_, orig)) in spilled {
            if !self.vars.contains_key(&v) {
                self.vals[v] = orig;
            }
        }
        let Some(term) = &self.func.blocks[blk].term else {
            return Err(self.internal("a block without terminator"));
        };
        if matches!(term, Terminator::Ret(_)) {
            self.save_tape();
        } else {
            self.end_tape();
        }
        match term {
            Terminator::Jump(to) if self.rotated.get(&blk) == Some(to) => {
                self.rotate(blk, *to)?;
            }
            Terminator::Jump(to) => {
                let args = self.edge_args(blk, *to)?;
                let target = self.edge_target(blk, *to)?;
                self.b.ins().jump(target, &args);
            }
            Terminator::Br {
                cond,
                then_dest,
                else_dest,
            } => {
                let c = self.val(*cond)?.one();
                let then_args = self.edge_args(blk, *then_dest)?;
                let else_args = self.edge_args(blk, *else_dest)?;
                let t = self.edge_target(blk, *then_dest)?;
                let e = self.edge_target(blk, *else_dest)?;
                self.branch(
                    c,
                    blk,
                    (*then_dest, t, then_args),
                    (*else_dest, e, else_args),
                );
            }
            Terminator::Ret(vals) => {
                let mut out = Vec::new();
                for &v in vals {
                    self.val(v)?.push_to(&mut out);
                }
                self.release_arena();
                self.b.ins().return_(&out);
            }
        }
        Ok(())
    }

    /// Ends the latch `latch` of a rotated loop ([`rotations`]) with a copy of its
    /// header `header`: the header's phis take the values of this edge, the
    /// header's instructions run again, and its `br` goes to the body or out.
    fn rotate(&mut self, latch: Block, header: Block) -> Result<(), CompileError> {
        let func = self.func;
        let args = self.edge_args(latch, header)?;
        for (phi, arg) in func.blocks[header].phis.iter().zip(&args) {
            let (Some(&var), BlockArg::Value(x)) = (self.vars.get(&phi.value), arg) else {
                return Err(self.internal("a rotated header's phi without its variable"));
            };
            self.b.def_var(var, *x);
        }
        self.cur_block = header;
        for &inst in &func.blocks[header].insts {
            self.inst(inst)?;
        }
        let Some(Terminator::Br {
            cond,
            then_dest,
            else_dest,
        }) = &func.blocks[header].term
        else {
            return Err(self.internal("a rotated header without its branch"));
        };
        let c = self.val(*cond)?.one();
        let then_args = self.edge_args(header, *then_dest)?;
        let else_args = self.edge_args(header, *else_dest)?;
        let (t, e) = (self.target(*then_dest)?, self.target(*else_dest)?);
        self.branch(
            c,
            header,
            (*then_dest, t, then_args),
            (*else_dest, e, else_args),
        );
        Ok(())
    }

    /// `brif c` from the IR block `from` to its two destinations (IR block,
    /// Cranelift block, arguments). An edge that passes a literal to a phi goes
    /// through a block of its own: Cranelift makes a constant where it is used,
    /// and used by the `brif` it would be made before the branch, on both paths
    /// (at a rotated loop's exit, in every iteration: the next loop's `0` and
    /// `0.0`).
    fn branch(
        &mut self,
        c: cl::Value,
        from: Block,
        then: (Block, cl::Block, Vec<BlockArg>),
        els: (Block, cl::Block, Vec<BlockArg>),
    ) {
        let func = self.func;
        let literal = |to: Block| {
            func.blocks[to].phis.iter().any(|p| {
                p.incoming
                    .iter()
                    .any(|&(q, v)| q == from && matches!(func.value_def(v), ValueDef::Const(_)))
            })
        };
        let mut split = Vec::new();
        let mut side = |this: &mut Self, (to, target, args): (Block, cl::Block, Vec<BlockArg>)| {
            if args.is_empty() || !literal(to) {
                return (target, args);
            }
            let edge = this.b.create_block();
            split.push((edge, target, args));
            (edge, Vec::new())
        };
        let (t, then_args) = side(self, then);
        let (e, else_args) = side(self, els);
        self.b.ins().brif(c, t, &then_args, e, &else_args);
        for (edge, target, args) in split {
            self.b.switch_to_block(edge);
            self.b.seal_block(edge);
            self.b.ins().jump(target, &args);
        }
    }

    /// The target of the edge `from -> to`: the dispatch block where `to` is a
    /// versioned loop's header and `from` its entry ([`version`]).
    fn edge_target(&self, from: Block, to: Block) -> Result<cl::Block, CompileError> {
        if let Some(v) = self.versioned.get(&to)
            && v.entry == from
            && self.copy.is_none()
        {
            return Ok(self.dispatch[&to]);
        }
        self.target(to)
    }

    /// Lowers the dispatch of the versioned loop of header `h` and the loop's
    /// unchecked copy ([`version`]); the caller then lowers the original.
    fn version(&mut self, h: Block) -> Result<(), CompileError> {
        let v = self
            .versioned
            .get(&h)
            .cloned()
            .ok_or_else(|| self.internal("a versioned loop without its plan"))?;
        let d = self.dispatch[&h];
        self.b.switch_to_block(d);
        self.cur_block = h;
        // The header's arguments (taken now: the variables' uses below may add
        // parameters of their own to the unsealed block).
        let args: Vec<BlockArg> = self
            .b
            .block_params(d)
            .iter()
            .map(|&p| BlockArg::Value(p))
            .collect();
        let mut ok = self.b.ins().iconst(types::I8, 1);
        // Every value the ends are made of is tested to be at most
        // `version::MAX_VALUE` in magnitude, and every literal factor is small
        // ([`version::MAX_FACTOR`], [`version::MAX_LITERAL`]), so no sum or product
        // below wraps.
        let small = |this: &mut Self, ok: cl::Value, v: Value, x: cl::Value| {
            if let ValueDef::Const(Scalar::I64(c)) = this.func.value_def(v)
                && c.unsigned_abs() <= version::MAX_VALUE as u64
            {
                return ok;
            }
            let shifted = this.b.ins().iadd_imm_s(x, version::MAX_VALUE);
            let fits = this.b.ins().icmp_imm_u(
                IntCC::UnsignedLessThanOrEqual,
                shifted,
                2 * version::MAX_VALUE,
            );
            this.b.ins().band(ok, fits)
        };
        // The counter's range, both ends included.
        let (lo, hi) = match v.counter {
            Counter::Up { init, bound } => {
                let (x, n) = (self.val(init)?.one(), self.val(bound)?.one());
                ok = small(self, ok, init, x);
                ok = small(self, ok, bound, n);
                (x, self.b.ins().iadd_imm_s(n, -1))
            }
            Counter::Down { init } => {
                let x = self.val(init)?.one();
                let nonneg = self
                    .b
                    .ins()
                    .icmp_imm_s(IntCC::SignedGreaterThanOrEqual, x, 0);
                ok = self.b.ins().band(ok, nonneg);
                ok = small(self, ok, init, x);
                let zero = self.b.ins().iconst(types::I64, 0);
                (zero, self.b.ins().iadd_imm_s(x, -1))
            }
        };
        let mut tested: Vec<Value> = Vec::new();
        for acc in &v.accesses {
            let Lv::Slice(_, len) = self.val(acc.slice)? else {
                return Err(self.internal("a versioned access to a scalar"));
            };
            let mut base = self.b.ins().iconst(types::I64, acc.index.c);
            for &(t, k) in &acc.index.terms {
                let x = self.val(t)?.one();
                if !tested.contains(&t) {
                    tested.push(t);
                    ok = small(self, ok, t, x);
                }
                let term = self.b.ins().imul_imm_s(x, k);
                base = self.b.ins().iadd(base, term);
            }
            let ends = if acc.index.a == 0 {
                (base, base)
            } else {
                let at_lo = self.b.ins().imul_imm_s(lo, acc.index.a);
                let at_hi = self.b.ins().imul_imm_s(hi, acc.index.a);
                let at_lo = self.b.ins().iadd(at_lo, base);
                let at_hi = self.b.ins().iadd(at_hi, base);
                if acc.index.a > 0 {
                    (at_lo, at_hi)
                } else {
                    (at_hi, at_lo)
                }
            };
            let above = self
                .b
                .ins()
                .icmp_imm_s(IntCC::SignedGreaterThanOrEqual, ends.0, 0);
            let below = self.b.ins().icmp(IntCC::SignedLessThan, ends.1, len);
            ok = self.b.ins().band(ok, above);
            ok = self.b.ins().band(ok, below);
        }
        // The copy's blocks, with the phis as parameters.
        let mut copy = Copy {
            blocks: HashMap::new(),
            params: HashMap::new(),
            unchecked: v.unchecked.clone(),
            slices: HashMap::new(),
        };
        for &s in &v.reloaded {
            if let (Some(&slot), Some(Lv::Slice(_, n))) = (self.reloads.get(&s), self.vals[s]) {
                let p = self.b.ins().stack_load(types::I64, types::I64, slot, 0);
                copy.slices.insert(s, Lv::Slice(p, n));
            }
        }
        for &blk in &v.blocks {
            let cb = self.b.create_block();
            for phi in &self.func.blocks[blk].phis {
                let [t] = *clif_types(self.func.value_type(phi.value)) else {
                    return Err(self.internal("a versioned loop's phi of two parts"));
                };
                copy.params
                    .insert(phi.value, self.b.append_block_param(cb, t));
            }
            copy.blocks.insert(blk, cb);
        }
        let original = self.target(h)?;
        self.b
            .ins()
            .brif(ok, copy.blocks[&h], &args, original, &args);
        self.copy = Some(copy);
        self.copy_epoch += 1;
        for &blk in &v.blocks {
            self.block(blk)?;
        }
        self.copy = None;
        self.copy_epoch += 1;
        // The original's instructions define their values anew (the variables
        // join both copies' definitions where the loop is left).
        let func = self.func;
        for &blk in &v.blocks {
            for &inst in &func.blocks[blk].insts {
                for &r in &func.insts[inst].results {
                    self.vals[r] = None;
                }
            }
        }
        Ok(())
    }

    fn target(&self, blk: Block) -> Result<cl::Block, CompileError> {
        if let Some(copy) = &self.copy
            && let Some(&cb) = copy.blocks.get(&blk)
        {
            return Ok(cb);
        }
        self.blocks
            .get(blk)
            .copied()
            .flatten()
            .ok_or_else(|| self.internal("a branch to an unreachable block"))
    }

    /// The arguments of the edge `from` -> `to`: the incoming values of `to`'s phis.
    fn edge_args(&mut self, from: Block, to: Block) -> Result<Vec<BlockArg>, CompileError> {
        let mut out = Vec::new();
        let func = self.func;
        let incoming = |this: &Self, phi: Value| -> Result<Value, CompileError> {
            func.blocks[to]
                .phis
                .iter()
                .find(|p| p.value == phi)
                .and_then(|p| p.incoming.iter().find(|(q, _)| *q == from))
                .map(|&(_, v)| v)
                .ok_or_else(|| this.internal("a phi without an entry for its predecessor"))
        };
        for phi in &func.blocks[to].phis {
            match self.lanes.pair(phi.value) {
                Some((first, second)) if first == phi.value => {
                    let (x, y) = (incoming(self, first)?, incoming(self, second)?);
                    out.push(self.vec_of(x, y)?);
                }
                Some(_) => {}
                None => {
                    let v = incoming(self, phi.value)?;
                    self.val(v)?.push_to(&mut out);
                }
            }
        }
        Ok(out.into_iter().map(BlockArg::Value).collect())
    }

    /// The Cranelift value of `v`, materialising constants.
    fn val(&mut self, v: Value) -> Result<Lv, CompileError> {
        let Some(data) = self.func.values.get(v) else {
            return Err(self.internal("a value out of range"));
        };
        if let ValueDef::Const(c) = data.def {
            return Ok(Lv::One(self.constant(c)));
        }
        if let Some(&var) = self.vars.get(&v) {
            return Ok(Lv::One(self.b.use_var(var)));
        }
        if let Some(&lv) = self.copy.as_ref().and_then(|c| c.slices.get(&v)) {
            return Ok(lv);
        }
        self.vals[v].ok_or_else(|| self.internal("a value used before its definition"))
    }

    fn constant(&mut self, c: Scalar) -> cl::Value {
        let ins = self.b.ins();
        match c {
            Scalar::F64(x) => ins.f64const(Ieee64::with_bits(x.to_bits())),
            Scalar::F32(x) => ins.f32const(Ieee32::with_bits(x.to_bits())),
            Scalar::I64(x) => ins.iconst(types::I64, x),
            Scalar::Bool(x) => ins.iconst(types::I8, i64::from(x)),
        }
    }

    /// An `f64` constant, as the bits of an integer constant moved into a float
    /// register. Cranelift rematerialises `f64const` at every use (two
    /// instructions on x86-64, in every iteration of a loop); the `bitcast` is
    /// an ordinary pure value, which its optimiser hoists out of loops, so the
    /// constant stays in a register. `0.0` stays an `f64const` (one `xorpd`).
    fn f64_bits(&mut self, bits: u64) -> cl::Value {
        if bits == 0 {
            return self.b.ins().f64const(Ieee64::with_bits(0));
        }
        let i = self.b.ins().iconst(types::I64, bits as i64);
        self.b.ins().bitcast(types::F64, MemFlagsData::new(), i)
    }

    /// An `f32` constant, as [`Self::f64_bits`].
    fn f32_bits(&mut self, bits: u32) -> cl::Value {
        if bits == 0 {
            return self.b.ins().f32const(Ieee32::with_bits(0));
        }
        let i = self.b.ins().iconst(types::I32, i64::from(bits));
        self.b.ins().bitcast(types::F32, MemFlagsData::new(), i)
    }

    fn internal(&self, message: &str) -> CompileError {
        internal(self.module, self.fid, message)
    }

    fn unsupported(&self, inst: Inst, what: &str) -> CompileError {
        CompileError::Unsupported {
            func: self.module.name(self.fid).to_string(),
            op: self.func.insts[inst].opcode.name().to_string(),
            pos: self
                .func
                .srcmap
                .insts
                .get(inst)
                .copied()
                .unwrap_or(Pos::NONE),
            what: what.to_string(),
        }
    }

    fn load_ctx(&mut self, ty: cl::Type, offset: i32) -> cl::Value {
        self.b.ins().load(ty, trusted(), self.ctx, offset)
    }

    fn store_ctx(&mut self, v: cl::Value, offset: i32) {
        self.b.ins().store(trusted(), v, self.ctx, offset);
    }

    /// Fails with `code` (payloads `a`, `b`) at `inst` when `cond` is nonzero, and
    /// goes on in a new block otherwise.
    fn fail_if(&mut self, cond: cl::Value, code: u32, inst: Inst, a: cl::Value, b: cl::Value) {
        // Every check has its own cold block that materialises the error's code
        // and position: the hot path is the compare and the branch alone (with
        // the arguments on the branch, both constants were set on every pass).
        let cont = self.b.create_block();
        let cold = self.b.create_block();
        self.b.set_cold_block(cold);
        self.b.ins().brif(cond, cold, &[], cont, &[]);
        self.b.switch_to_block(cold);
        self.fail(code, inst, a, b);
        self.b.switch_to_block(cont);
    }

    /// Jumps to the error block with error `code` at `inst` (the current block is
    /// a cold one).
    fn fail(&mut self, code: u32, inst: Inst, a: cl::Value, b: cl::Value) {
        // The error leaves the tape in the context: write it back on the cold path
        // only (the state in registers is the hot path's: it is not changed here).
        match (self.tape_state, self.height) {
            (Some(st), _) if st.dirty || st.tags.is_some() => self.write_back(st),
            (None, Some(var)) => {
                let len = self.b.use_var(var);
                let (t, ctx) = (self.tape, self.ctx);
                self.b.ins().store(t.height, len, ctx, Offsets::TAPE_LEN);
            }
            _ => {}
        }
        let code = self.b.ins().iconst(types::I32, i64::from(code));
        let at = self.b.ins().iconst(types::I32, inst.index() as i64);
        let args = [code, at, a, b].map(BlockArg::Value);
        self.b.ins().jump(self.err_block, &args);
    }

    /// A statement whose result is in a pair of lanes ([`lanes`]): the first
    /// makes nothing (a load checks its bounds and keeps its address), the
    /// second makes the pair's vector and both lanes' scalars.
    fn lane_inst(
        &mut self,
        inst: Inst,
        (first, second): (Value, Value),
    ) -> Result<(), CompileError> {
        let func = self.func;
        let d = &func.insts[inst];
        let r = d.results[0];
        let v = if d.opcode == Opcode::Load {
            let (slice, index) = (d.args[0], d.args[1]);
            let (Lv::Slice(p, n), Lv::One(i)) = (self.val(slice)?, self.val(index)?) else {
                return Err(self.internal("a load from a scalar"));
            };
            let addr = if self.is_checked(slice, index) {
                self.address(p, i, Elem::F64)
            } else {
                self.element(inst, p, n, i, Elem::F64)
            };
            if r == first {
                self.pending_loads.insert(first, addr);
                return Ok(());
            }
            let Some(a0) = self.pending_loads.remove(&first) else {
                return Err(self.internal("the second load of a pair before the first"));
            };
            self.b.ins().load(types::F64X2, vector_flags(), a0, 0)
        } else {
            if r == first {
                return Ok(());
            }
            let ValueDef::Result(ia, 0) = func.value_def(first) else {
                return Err(self.internal("a pair of a statement and no statement"));
            };
            let args_a = func.insts[ia].args.clone();
            let mut ops: Vec<cl::Value> = Vec::with_capacity(args_a.len());
            for (&x, &y) in args_a.iter().zip(&d.args) {
                ops.push(self.vec_of(x, y)?);
            }
            let ins = self.b.ins();
            match (d.opcode, ops.as_slice()) {
                (Opcode::Fadd, &[x, y]) => ins.fadd(x, y),
                (Opcode::Fsub, &[x, y]) => ins.fsub(x, y),
                (Opcode::Fmul, &[x, y]) => ins.fmul(x, y),
                (Opcode::Fdiv, &[x, y]) => ins.fdiv(x, y),
                (Opcode::Fneg, &[x]) => ins.fneg(x),
                (Opcode::Fabs, &[x]) => ins.fabs(x),
                (Opcode::Sqrt, &[x]) => ins.sqrt(x),
                _ => return Err(self.internal("a pair of an op with no vector form")),
            }
        };
        self.define_pair(first, second, v);
        Ok(())
    }

    /// Records the vector `v` of the pair and extracts its lanes' scalars (which
    /// Cranelift drops where nothing reads them).
    fn define_pair(&mut self, first: Value, second: Value, v: cl::Value) {
        self.vecs.insert(first, v);
        let x = self.b.ins().extractlane(v, 0);
        let y = self.b.ins().extractlane(v, 1);
        self.vals[first] = Some(Lv::One(x));
        self.vals[second] = Some(Lv::One(y));
    }

    /// `(x, y)` as one `f64x2`: the vector of a pair, a splat of one value, or
    /// two scalars put together.
    fn vec_of(&mut self, x: Value, y: Value) -> Result<cl::Value, CompileError> {
        if self.lanes.pair(x) == Some((x, y)) {
            return self
                .vecs
                .get(&x)
                .copied()
                .ok_or_else(|| self.internal("a pair used before it is made"));
        }
        let vx = self.val(x)?.one();
        let v = self.b.ins().splat(types::F64X2, vx);
        if x == y {
            return Ok(v);
        }
        let vy = self.val(y)?.one();
        Ok(self.b.ins().insertlane(v, vy, 1))
    }

    /// The index `v` as a base and a constant offset ([`lanes::split_index`]).
    fn split_index(&self, v: Value) -> (Value, i64) {
        lanes::split_index(self.func, v)
    }

    /// Whether `slice[index]` is inside a range already checked ([`Checked`]) or
    /// proved in bounds ([`Ranges`]).
    fn is_checked(&self, slice: Value, index: Value) -> bool {
        if let Some(copy) = &self.copy
            && copy
                .unchecked
                .get(&self.cur_block)
                .is_some_and(|s| s.contains(&(slice, index)))
        {
            return true;
        }
        let (base, c) = self.split_index(index);
        self.checked
            .get(&(slice, base))
            .is_some_and(|&(lo, hi)| lo <= c && c <= hi)
            || self
                .ranges
                .in_bounds(self.func, self.cur_block, slice, index)
    }

    /// At a `load`, the first of `insts`: finds the run of loads that starts
    /// here ([`Checked`]) and, where checking its ranges' ends takes fewer
    /// compares than checking each load, emits those checks and records the
    /// ranges. Returns the length of the run (1 when there is none).
    fn check_run(&mut self, insts: &[Inst]) -> Result<usize, CompileError> {
        // The loads of the run: (inst, slice, base, offset).
        let mut loads: Vec<(Inst, Value, Value, i64)> = Vec::new();
        let mut len = 0;
        for &inst in insts.iter().take(MAX_RUN_INSTS) {
            let d = &self.func.insts[inst];
            match d.opcode {
                Opcode::Load => {
                    let (slice, index) = (d.args[0], d.args[1]);
                    let (base, c) = self.split_index(index);
                    // Both must be known before the run, where the checks go.
                    let known = |v: Value| {
                        self.vals.get(v).copied().flatten().is_some()
                            || matches!(self.func.value_def(v), ValueDef::Const(_))
                    };
                    if !known(slice) || !known(base) {
                        break;
                    }
                    if !self.is_checked(slice, index) {
                        loads.push((inst, slice, base, c));
                    }
                }
                op if quiet(op) => {}
                _ => break,
            }
            len += 1;
        }
        // The ranges, in order of first appearance.
        let mut ranges: Vec<((Value, Value), i64, i64)> = Vec::new();
        for &(_, slice, base, c) in &loads {
            match ranges.iter_mut().find(|(k, ..)| *k == (slice, base)) {
                Some((_, lo, hi)) => (*lo, *hi) = ((*lo).min(c), (*hi).max(c)),
                None => ranges.push(((slice, base), c, c)),
            }
        }
        let compares: usize = ranges
            .iter()
            .map(|&(_, lo, hi)| if lo == hi { 1 } else { 2 })
            .sum();
        if compares >= loads.len() {
            // No run: a later load may start one (it knows more values).
            return Ok(1);
        }
        let cold = self.b.create_block();
        self.b.set_cold_block(cold);
        for &((slice, base), lo, hi) in &ranges {
            let (Lv::Slice(_, n), Lv::One(b)) = (self.val(slice)?, self.val(base)?) else {
                return Err(self.internal("a load from a scalar"));
            };
            let ends: &[i64] = if lo == hi { &[lo] } else { &[lo, hi] };
            for &c in ends {
                let i = self.b.ins().iadd_imm_s(b, c);
                let out = self.b.ins().icmp(IntCC::UnsignedGreaterThanOrEqual, i, n);
                let cont = self.b.create_block();
                self.b.ins().brif(out, cold, &[], cont, &[]);
                self.b.switch_to_block(cont);
            }
        }
        let cont = self.b.current_block().expect("inside a block");
        // The cold path: the loads' checks in their order; one of them fails
        // (an end of a range did), so the last needs no test.
        self.b.switch_to_block(cold);
        for (k, &(inst, slice, base, c)) in loads.iter().enumerate() {
            let (Lv::Slice(_, n), Lv::One(b)) = (self.val(slice)?, self.val(base)?) else {
                return Err(self.internal("a load from a scalar"));
            };
            let i = self.b.ins().iadd_imm_s(b, c);
            if k + 1 == loads.len() {
                self.fail(code::OUT_OF_BOUNDS, inst, i, n);
            } else {
                // As `fail_if`, with the continuation cold too.
                let out = self.b.ins().icmp(IntCC::UnsignedGreaterThanOrEqual, i, n);
                let (bad, next) = (self.b.create_block(), self.b.create_block());
                self.b.set_cold_block(bad);
                self.b.set_cold_block(next);
                self.b.ins().brif(out, bad, &[], next, &[]);
                self.b.switch_to_block(bad);
                self.fail(code::OUT_OF_BOUNDS, inst, i, n);
                self.b.switch_to_block(next);
            }
        }
        self.b.switch_to_block(cont);
        for (key, lo, hi) in ranges {
            self.checked.insert(key, (lo, hi));
        }
        Ok(len.max(1))
    }

    /// Writes the tape's height (if changed) and its pending tags to the context
    /// and the tag memory, at the current position ([`TapeState`]).
    fn write_back(&mut self, st: TapeState) {
        if st.dirty {
            let (t, ctx) = (self.tape, self.ctx);
            self.b.ins().store(t.height, st.len, ctx, Offsets::TAPE_LEN);
        }
        if let Some(p) = st.tags {
            self.write_tags(p);
        }
    }

    /// Writes pending tags: the tag of slot `from + i` at `base - 2 - from - i`,
    /// so the `n` tags are the bytes from `base - 1 - from - n` up, last one
    /// first, written as few stores of 8, 4, 2 or 1 bytes (little-endian).
    fn write_tags(&mut self, p: PendingTags) {
        let t = self.tape;
        let ctx = self.ctx;
        let base = self
            .b
            .ins()
            .load(types::I64, t.ptrs, ctx, Offsets::TAPE_PTR);
        let below = self.b.ins().isub(base, p.from);
        let mut bytes = p.tags[..p.n].to_vec();
        bytes.reverse();
        // Unaligned, so not `trusted()`; inside the tag memory, so no trap.
        let flags = MemFlagsData::new()
            .with_notrap()
            .with_endianness(Endianness::Little)
            .with_alias_region(t.tags.alias_region());
        let mut at = 0;
        while at < bytes.len() {
            let w = [8, 4, 2, 1]
                .into_iter()
                .find(|&w| w <= bytes.len() - at)
                .unwrap_or(1);
            let mut word = [0u8; 8];
            word[..w].copy_from_slice(&bytes[at..at + w]);
            let ty = match w {
                8 => types::I64,
                4 => types::I32,
                2 => types::I16,
                _ => types::I8,
            };
            let v = self.b.ins().iconst(ty, i64::from_le_bytes(word));
            let offset = -1 - p.n as i32 + at as i32;
            self.b.ins().store(flags, v, below, offset);
            at += w;
        }
    }

    /// Writes the tape back ([`Lower::write_back`]) and keeps in registers only
    /// its height, now the context's.
    fn save_tape(&mut self) {
        if self.height.is_some() {
            // The height between blocks is the variable's: the context may be
            // behind.
            self.current_tape();
        }
        if let Some(st) = self.tape_state {
            self.write_back(st);
            self.tape_state = Some(TapeState {
                len: st.len,
                dirty: false,
                tags: None,
            });
        }
    }

    /// At the end of a block that does not return: the pending tags written, and
    /// the height kept in the variable for the next block (the context is
    /// written where something reads it: [`Lower::save_tape`]). Without the
    /// variable, as [`Lower::save_tape`].
    fn end_tape(&mut self) {
        let Some(var) = self.height else {
            self.save_tape();
            return;
        };
        if let Some(st) = self.tape_state {
            if let Some(p) = st.tags {
                self.write_tags(p);
            }
            self.b.def_var(var, st.len);
            self.tape_state = Some(TapeState { tags: None, ..st });
        }
    }

    /// The error block and the bail-out block of the function.
    fn error_blocks(&mut self) {
        self.b.switch_to_block(self.err_block);
        let p = self.b.block_params(self.err_block).to_vec();
        self.store_ctx(p[0], Offsets::STATUS);
        let f = self.b.ins().iconst(types::I32, self.fid.index() as i64);
        self.store_ctx(f, Offsets::ERR_FUNC);
        self.store_ctx(p[1], Offsets::ERR_INST);
        self.store_ctx(p[2], Offsets::ERR_A);
        self.store_ctx(p[3], Offsets::ERR_B);
        self.b.ins().jump(self.bail_block, &[]);

        self.b.switch_to_block(self.bail_block);
        let results = &self.module.funcs[self.fid].sig.results;
        let mut zeros = Vec::new();
        for &t in results {
            for &ct in clif_types(t) {
                let z = match ct {
                    types::F64 => self.b.ins().f64const(0.0),
                    types::F32 => self.b.ins().f32const(0.0),
                    t => self.b.ins().iconst(t, 0),
                };
                zeros.push(z);
            }
        }
        self.b.ins().return_(&zeros);
    }

    fn helper(&mut self, h: Helper) -> Result<FuncRef, CompileError> {
        if let Some(&r) = self.helpers.get(&h) {
            return Ok(r);
        }
        let call_conv = if h.is_cold() {
            self.decls.cold_call_conv
        } else {
            self.decls.call_conv
        };
        let sig = h.signature(types::I64, call_conv);
        let id = self
            .jm
            .declare_function(h.name(), Linkage::Import, &sig)
            .map_err(|e| self.internal(&format!("declaring {}: {e}", h.name())))?;
        let r = self.jm.declare_func_in_func(id, self.b.func);
        self.helpers.insert(h, r);
        Ok(r)
    }

    fn call_helper(
        &mut self,
        h: Helper,
        args: &[cl::Value],
    ) -> Result<Option<cl::Value>, CompileError> {
        let r = self.helper(h)?;
        let call = self.b.ins().call(r, args);
        Ok(self.b.inst_results(call).first().copied())
    }

    /// Before a `ret`: frees what the function allocated (back to the mark taken at
    /// entry).
    fn release_arena(&mut self) {
        let Some((chunk, used)) = self.arena_mark else {
            return;
        };
        let now = self.load_ctx(types::I64, Offsets::ARENA_CHUNK);
        let same = self.b.ins().icmp(IntCC::Equal, now, chunk);
        let (fast, slow, done) = (
            self.b.create_block(),
            self.b.create_block(),
            self.b.create_block(),
        );
        self.b.ins().brif(same, fast, &[], slow, &[]);
        self.b.switch_to_block(fast);
        self.store_ctx(used, Offsets::ARENA_USED);
        self.b.ins().jump(done, &[]);
        self.b.switch_to_block(slow);
        let ctx = self.ctx;
        // The helper cannot fail; its FuncRef was declared when the first alloc was
        // lowered, or is declared now.
        if let Ok(r) = self.helper(Helper::ArenaRestore) {
            self.b.ins().call(r, &[ctx, chunk, used]);
        }
        self.b.ins().jump(done, &[]);
        self.b.switch_to_block(done);
    }

    /// Defines the results of `inst`.
    fn def(&mut self, inst: Inst, k: usize, lv: Lv) -> Result<(), CompileError> {
        let Some(&v) = self.func.insts[inst].results.get(k) else {
            return Err(self.internal("an instruction with too few results"));
        };
        if let (Some(&var), Lv::One(x)) = (self.vars.get(&v), lv) {
            self.b.def_var(var, x);
        }
        if let (Some(&slot), Lv::Slice(p, _)) = (self.reloads.get(&v), lv) {
            self.b.ins().stack_store(types::I64, p, slot, 0);
        }
        self.vals[v] = Some(lv);
        Ok(())
    }

    fn inst(&mut self, inst: Inst) -> Result<(), CompileError> {
        let data = &self.func.insts[inst];
        if let Some(pair) = data.results.first().and_then(|&r| self.lanes.pair(r)) {
            return self.lane_inst(inst, pair);
        }
        let op = data.opcode;
        let imm = data.imm;
        let args: Vec<Value> = data.args.to_vec();
        let mut a = Vec::with_capacity(args.len());
        for &v in &args {
            a.push(self.val(v)?);
        }
        let arg_ty = |k: usize| args.get(k).map(|&v| self.func.value_type(v));
        if matches!(op, Opcode::Call | Opcode::TapeAlloc | Opcode::Recompute) {
            // The callee, or `tape_alloc`'s helper (its limit counts the scalars),
            // or `recompute` (which notes the tape's size), reads the tape's
            // height from the context.
            self.save_tape();
        }
        let out = match op.shape() {
            Shape::FloatBinary => {
                // A literal first operand of a commutative op goes second, where
                // x86-64 reads it from the constant pool as a memory operand
                // instead of building it in two instructions at each use (`a * b`
                // is `b * a` bit for bit, NaN payloads aside).
                let (x, y) = match (
                    op,
                    self.func.value_def(args[0]),
                    self.func.value_def(args[1]),
                ) {
                    (Opcode::Fadd | Opcode::Fmul, ValueDef::Const(_), d)
                        if !matches!(d, ValueDef::Const(_)) =>
                    {
                        (a[1].one(), a[0].one())
                    }
                    // A literal first operand of `fsub` or `fdiv` cannot be a
                    // memory operand: it is made hoistable instead (see
                    // `f64_bits`), so a loop keeps it in a register.
                    (Opcode::Fsub | Opcode::Fdiv, ValueDef::Const(c), _) => {
                        let x = match c {
                            Scalar::F64(v) => self.f64_bits(v.to_bits()),
                            Scalar::F32(v) => self.f32_bits(v.to_bits()),
                            _ => a[0].one(),
                        };
                        (x, a[1].one())
                    }
                    _ => (a[0].one(), a[1].one()),
                };
                Some(self.float_binary(op, x, y)?)
            }
            Shape::FloatUnary
                if matches!(op, Opcode::Sin | Opcode::Cos) && arg_ty(0) == Some(Type::F64) =>
            {
                Some(self.sincos_f64(args[0], a[0].one(), op == Opcode::Cos)?)
            }
            Shape::FloatUnary => Some(self.float_unary(op, a[0].one())?),
            // `fma` is the one ternary float op: Cranelift's `fma` (see
            // `helpers::libcalls` for the targets without the instruction).
            Shape::FloatTernary => Some(self.b.ins().fma(a[0].one(), a[1].one(), a[2].one())),
            Shape::Powi => Some(self.powi(a[0].one(), a[1].one())?),
            Shape::IntBinary => Some(self.int_binary(inst, op, a[0].one(), a[1].one())),
            Shape::IntUnary => Some(self.b.ins().ineg(a[0].one())),
            Shape::FloatCmp | Shape::IntCmp => {
                let Imm::Cmp(p) = imm else {
                    return Err(self.internal("a comparison without predicate"));
                };
                Some(self.compare(op, p, a[0].one(), a[1].one()))
            }
            Shape::BoolBinary => Some(self.bool_binary(op, a[0].one(), a[1].one())),
            Shape::BoolUnary => Some(self.b.ins().bxor_imm_u(a[0].one(), 1)),
            Shape::Select => {
                let c = a[0].one();
                let lv = match (a[1], a[2]) {
                    (Lv::One(x), Lv::One(y)) => Lv::One(self.b.ins().select(c, x, y)),
                    (Lv::Slice(p, n), Lv::Slice(q, m)) => {
                        let ptr = self.b.ins().select(c, p, q);
                        Lv::Slice(ptr, self.b.ins().select(c, n, m))
                    }
                    _ => return Err(self.internal("select of a scalar and a slice")),
                };
                self.def(inst, 0, lv)?;
                None
            }
            Shape::Cast => {
                let (Imm::Type(to), Some(from)) = (imm, arg_ty(0)) else {
                    return Err(self.internal("a cast without types"));
                };
                Some(self.cast(from, to, a[0].one())?)
            }
            Shape::Bitcast => {
                let Imm::Type(to) = imm else {
                    return Err(self.internal("a bitcast without type"));
                };
                let to = if to == Type::F64 {
                    types::F64
                } else {
                    types::I64
                };
                Some(self.b.ins().bitcast(to, MemFlagsData::new(), a[0].one()))
            }
            Shape::Const => {
                let Imm::Const(c) = imm else {
                    return Err(self.internal("a const without constant"));
                };
                Some(self.constant(c))
            }
            Shape::Len => match a[0] {
                Lv::Slice(_, n) => Some(n),
                Lv::One(_) => return Err(self.internal("len of a scalar")),
            },
            Shape::Load => {
                let elem = arg_ty(0).and_then(Type::elem);
                let (Lv::Slice(p, n), Some(elem)) = (a[0], elem) else {
                    return Err(self.internal("load from a scalar"));
                };
                let addr = if self.is_checked(args[0], args[1]) {
                    self.address(p, a[1].one(), elem)
                } else {
                    self.element(inst, p, n, a[1].one(), elem)
                };
                Some(self.b.ins().load(elem_type(elem), trusted(), addr, 0))
            }
            Shape::Store => {
                let elem = arg_ty(0).and_then(Type::elem);
                let (Lv::Slice(p, n), Some(elem)) = (a[0], elem) else {
                    return Err(self.internal("store into a scalar"));
                };
                if let Some((second, addr, first_val)) = self.pending_store
                    && second == inst
                {
                    // The second of a store pair: both elements with one store.
                    self.pending_store = None;
                    let v = self.vec_of(first_val, args[2])?;
                    self.b.ins().store(vector_flags(), v, addr, 0);
                    return Ok(());
                }
                let addr = if self.is_checked(args[0], args[1]) {
                    self.address(p, a[1].one(), elem)
                } else {
                    self.element(inst, p, n, a[1].one(), elem)
                };
                if let Some(second) = self.lanes.store_pair(inst)
                    && self.is_checked(args[0], args[1])
                    && self.is_checked(args[0], self.func.insts[second].args[1])
                {
                    // Both elements are in bounds: the pair is stored at the
                    // second store (only quiet statements are between).
                    self.pending_store = Some((second, addr, args[2]));
                    return Ok(());
                }
                self.b.ins().store(trusted(), a[2].one(), addr, 0);
                None
            }
            Shape::Alloc => {
                let Some(elem) = (match imm {
                    Imm::Type(t) => Elem::of(t),
                    _ => None,
                }) else {
                    return Err(self.internal("an alloc without element type"));
                };
                let n = a[0].one();
                let p = self.alloc(inst, elem, n)?;
                self.def(inst, 0, Lv::Slice(p, n))?;
                None
            }
            Shape::Call => {
                let Imm::Func(callee) = imm else {
                    return Err(self.internal("a call without callee"));
                };
                self.call(inst, callee, &a)?;
                None
            }
            Shape::TrapIf => {
                let Imm::Msg(m) = imm else {
                    return Err(self.internal("a trap_if without message"));
                };
                let msg = self.b.ins().iconst(types::I64, m.index() as i64);
                let zero = self.b.ins().iconst(types::I64, 0);
                self.fail_if(a[0].one(), code::TRAP, inst, msg, zero);
                None
            }
            Shape::Push => {
                let Some(tag) = arg_ty(0).and_then(scalar_code) else {
                    return Err(self.internal("push of no scalar"));
                };
                let tag = self.decls.tape_checks.then_some(tag);
                self.push(inst, a[0].one(), tag)?;
                None
            }
            Shape::Pop => {
                let Imm::Type(ty) = imm else {
                    return Err(self.internal("a pop without type"));
                };
                let (Some(&ct), Some(tag)) = (clif_types(ty).first(), scalar_code(ty)) else {
                    return Err(self.internal("pop of no scalar type"));
                };
                let tag = self.decls.tape_checks.then_some(tag);
                Some(self.pop(inst, ct, tag))
            }
            Shape::TapeAlloc => {
                let Some(elem) = (match imm {
                    Imm::Type(t) => Elem::of(t),
                    _ => None,
                }) else {
                    return Err(self.internal("a tape_alloc without element type"));
                };
                Some(self.tape_alloc(inst, elem, a[0].one())?)
            }
            Shape::TapeView => {
                let Some(elem) = (match imm {
                    Imm::Type(t) => Elem::of(t),
                    _ => None,
                }) else {
                    return Err(self.internal("a tape_view without element type"));
                };
                let (p, n) = self.tape_view(inst, elem, a[0].one());
                self.def(inst, 0, Lv::Slice(p, n))?;
                None
            }
            Shape::Note => {
                if op == Opcode::Recompute {
                    // Inline, as `Ctx::recompute`: count the steps (none for a
                    // negative n), note the tape's size (8 bytes a scalar, and the
                    // buffers').
                    let n = a[0].one();
                    let zero = self.b.ins().iconst(types::I64, 0);
                    let n = self.b.ins().smax(n, zero);
                    let count = self.load_ctx(types::I64, Offsets::RECOMPUTED);
                    let sum = self.b.ins().iadd(count, n);
                    // Saturating, as the interpreter counts.
                    let wrapped = self.b.ins().icmp(IntCC::UnsignedLessThan, sum, count);
                    let all = self.b.ins().iconst(types::I64, -1);
                    let sum = self.b.ins().select(wrapped, all, sum);
                    self.store_ctx(sum, Offsets::RECOMPUTED);
                    let len = self.load_ctx(types::I64, Offsets::TAPE_LEN);
                    let scalars = self.b.ins().ishl_imm_u(len, 3);
                    let bufs = self.load_ctx(types::I64, Offsets::TAPE_BUF_BYTES);
                    let bytes = self.b.ins().iadd(scalars, bufs);
                    let peak = self.load_ctx(types::I64, Offsets::TAPE_PEAK);
                    let peak = self.b.ins().umax(peak, bytes);
                    self.store_ctx(peak, Offsets::TAPE_PEAK);
                }
                None
            }
        };
        if let Some(v) = out {
            self.def(inst, 0, Lv::One(v))?;
        }
        Ok(())
    }

    // The op families, in the order of the op table.

    fn float_binary(
        &mut self,
        op: Opcode,
        x: cl::Value,
        y: cl::Value,
    ) -> Result<cl::Value, CompileError> {
        let ty = self.b.func.dfg.value_type(x);
        let ins = self.b.ins();
        Ok(match op {
            Opcode::Fadd => ins.fadd(x, y),
            Opcode::Fsub => ins.fsub(x, y),
            Opcode::Fmul => ins.fmul(x, y),
            Opcode::Fdiv => ins.fdiv(x, y),
            Opcode::Fmin | Opcode::Fmax => {
                // Cranelift orders -0.0 below 0.0 as the interpreter does, but its NaN
                // is of unspecified sign and payload: the interpreter's is the
                // canonical `NAN` of Rust.
                let r = if op == Opcode::Fmin {
                    ins.fmin(x, y)
                } else {
                    ins.fmax(x, y)
                };
                let nan = self.b.ins().fcmp(FloatCC::Unordered, x, y);
                let canon = if ty == types::F32 {
                    self.f32_bits(f32::NAN.to_bits())
                } else {
                    self.f64_bits(f64::NAN.to_bits())
                };
                self.b.ins().select(nan, canon, r)
            }
            Opcode::Pow | Opcode::Atan2 | Opcode::Hypot => {
                let f = match op {
                    Opcode::Pow => MathFn2::Pow,
                    Opcode::Atan2 => MathFn2::Atan2,
                    _ => MathFn2::Hypot,
                };
                let h = if ty == types::F32 {
                    Helper::F32Binary(f)
                } else {
                    Helper::F64Binary(f)
                };
                return self.helper_result(h, &[x, y]);
            }
            _ => return Err(self.internal("not a float binary op")),
        })
    }

    fn float_unary(&mut self, op: Opcode, x: cl::Value) -> Result<cl::Value, CompileError> {
        let f32 = self.b.func.dfg.value_type(x) == types::F32;
        let math = |f: MathFn| {
            if f32 {
                Helper::F32Unary(f)
            } else {
                Helper::F64Unary(f)
            }
        };
        let ins = self.b.ins();
        let h = match op {
            // The sign flipped by `bxor` with -0.0, a constant of its own that
            // Cranelift hoists out of loops (its x86-64 `fneg` builds the mask
            // in two instructions at every use).
            Opcode::Fneg => {
                let mask = if f32 {
                    self.f32_bits(0x8000_0000)
                } else {
                    self.f64_bits(0x8000_0000_0000_0000)
                };
                return Ok(self.b.ins().bxor(x, mask));
            }
            Opcode::Fabs => return Ok(ins.fabs(x)),
            Opcode::Sqrt => return Ok(ins.sqrt(x)),
            Opcode::Floor => return Ok(ins.floor(x)),
            Opcode::Ceil => return Ok(ins.ceil(x)),
            Opcode::Exp if !f32 => return self.exp_f64(x),
            Opcode::Exp => math(MathFn::Exp),
            Opcode::Log => math(MathFn::Log),
            Opcode::Sin => math(MathFn::Sin),
            Opcode::Cos => math(MathFn::Cos),
            Opcode::Tan => math(MathFn::Tan),
            Opcode::Tanh => math(MathFn::Tanh),
            Opcode::Sinh => math(MathFn::Sinh),
            Opcode::Cosh => math(MathFn::Cosh),
            Opcode::Asin => math(MathFn::Asin),
            Opcode::Acos => math(MathFn::Acos),
            Opcode::Atan => math(MathFn::Atan),
            Opcode::Log10 => math(MathFn::Log10),
            Opcode::Log2 => math(MathFn::Log2),
            Opcode::Exp2 => math(MathFn::Exp2),
            _ => return Err(self.internal("not a float unary op")),
        };
        self.helper_result(h, &[x])
    }

    /// `exp` of an `f64`, inline: the operations of [`gradlift_ir::math::exp`]'s
    /// main case (`2^-54 <= |x| < 512`) in its order, so the result is the
    /// interpreter's bit for bit, with the table read from the module's data
    /// object. The other arguments (tiny, huge, infinities, NaN) call the helper
    /// (the same function) on a cold path; the main case is computed before the
    /// test (no float op traps), so `exp`s of one value share it.
    fn exp_f64(&mut self, x: cl::Value) -> Result<cl::Value, CompileError> {
        use gradlift_ir::math::{
            EXP_C, EXP_INV_LN2_N, EXP_NEG_LN2_HI_N, EXP_NEG_LN2_LO_N, EXP_RANGE, EXP_TOP_MIN, SHIFT,
        };
        let flags = MemFlagsData::new();
        let c = |this: &mut Self, v: f64| this.b.ins().f64const(Ieee64::with_bits(v.to_bits()));
        let xb = self.b.ins().bitcast(types::I64, flags, x);
        let top = self.b.ins().ushr_imm_u(xb, 52);
        let top = self.b.ins().band_imm_u(top, 0x7ff);
        let off = self.b.ins().iadd_imm_s(top, -(EXP_TOP_MIN as i64));
        let special =
            self.b
                .ins()
                .icmp_imm_u(IntCC::UnsignedGreaterThanOrEqual, off, EXP_RANGE as i64);
        // k = round(x 128 / ln 2), as a float and in the low bits of `ki`.
        let (inv, shift) = (c(self, EXP_INV_LN2_N), c(self, SHIFT));
        let kd = self.b.ins().fmul(x, inv);
        let kd = self.b.ins().fadd(kd, shift);
        let ki = self.b.ins().bitcast(types::I64, flags, kd);
        let kd = self.b.ins().fsub(kd, shift);
        let (nhi, nlo) = (c(self, EXP_NEG_LN2_HI_N), c(self, EXP_NEG_LN2_LO_N));
        let khi = self.b.ins().fmul(kd, nhi);
        let r = self.b.ins().fadd(x, khi);
        let klo = self.b.ins().fmul(kd, nlo);
        let r = self.b.ins().fadd(r, klo);
        // The table's pair i = k mod 128: 16 bytes at 16 i.
        let gv = match self.exp_table {
            Some(gv) => gv,
            None => {
                let gv = self
                    .jm
                    .declare_data_in_func(self.decls.exp_table, self.b.func);
                self.exp_table = Some(gv);
                gv
            }
        };
        let base = self.b.ins().symbol_value(types::I64, gv);
        let i = self.b.ins().band_imm_u(ki, 127);
        let at = self.b.ins().ishl_imm_u(i, 4);
        let addr = self.b.ins().iadd(base, at);
        let table = MemFlagsData::trusted().with_readonly();
        let tail = self.b.ins().load(types::F64, table, addr, 0);
        let sbits = self.b.ins().load(types::I64, table, addr, 8);
        let high = self.b.ins().ishl_imm_u(ki, 45);
        let sbits = self.b.ins().iadd(sbits, high);
        // tmp = tail + r + r^2 (c0 + r c1) + r^4 (c2 + r c3); the literals of
        // the inner sums second (the same sums: out of the main case, where a
        // NaN could tell, the result is not used).
        let [c0, c1, c2, c3] = EXP_C;
        let r2 = self.b.ins().fmul(r, r);
        let tmp = self.b.ins().fadd(tail, r);
        let c1 = c(self, c1);
        let rc1 = self.b.ins().fmul(r, c1);
        let c0 = c(self, c0);
        let p = self.b.ins().fadd(rc1, c0);
        let p = self.b.ins().fmul(r2, p);
        let tmp = self.b.ins().fadd(tmp, p);
        let r4 = self.b.ins().fmul(r2, r2);
        let c3 = c(self, c3);
        let rc3 = self.b.ins().fmul(r, c3);
        let c2 = c(self, c2);
        let q = self.b.ins().fadd(rc3, c2);
        let q = self.b.ins().fmul(r4, q);
        let tmp = self.b.ins().fadd(tmp, q);
        let scale = self.b.ins().bitcast(types::F64, flags, sbits);
        let st = self.b.ins().fmul(scale, tmp);
        let result = self.b.ins().fadd(scale, st);
        self.or_helper(special, result, MathFn::Exp, x)
    }

    /// `result`, or where `cold` holds, the helper `f` of `x` called on a cold
    /// path: the inline math functions' arguments out of their range.
    fn or_helper(
        &mut self,
        cold: cl::Value,
        result: cl::Value,
        f: MathFn,
        x: cl::Value,
    ) -> Result<cl::Value, CompileError> {
        let (call, join) = (self.b.create_block(), self.b.create_block());
        self.b.set_cold_block(call);
        let out = self.b.append_block_param(join, types::F64);
        self.b
            .ins()
            .brif(cold, call, &[], join, &[BlockArg::Value(result)]);
        self.b.switch_to_block(call);
        self.b.seal_block(call);
        let called = self.helper_result(Helper::F64Unary(f), &[x])?;
        self.b.ins().jump(join, &[BlockArg::Value(called)]);
        self.b.switch_to_block(join);
        self.b.seal_block(join);
        Ok(out)
    }

    /// `sin` (or with `cos`, `cos`) of the `f64` `v` (here `x`), inline: the
    /// operations of [`gradlift_ir::math::sin`] ([`gradlift_ir::math::cos`]) in
    /// their order, so the result is the interpreter's bit for bit. The second
    /// and third rounds of reduction, which only arguments within about
    /// `2^-16 |x|` of a multiple of `pi/2` take, run on a cold path, and so do
    /// arguments beyond `2^20 pi/2`, infinities and NaN (a call of the helper,
    /// the same function). The reduction and both kernels are kept for `v`: a
    /// `sin` and a `cos` of one value (a derivative's) share them where the
    /// first dominates the second.
    fn sincos_f64(&mut self, v: Value, x: cl::Value, cos: bool) -> Result<cl::Value, CompileError> {
        // Reused only where the first was lowered in a block that dominates this
        // one, in the same copy of a versioned loop, and (should an IR value
        // ever be lowered twice, as a rotated header's test is) for the same
        // Cranelift value.
        let known = self.sincos.get(&v).copied().filter(|k| {
            k.x == x
                && k.epoch == self.copy_epoch
                && (k.block == self.cur_block || self.dom.dominates(k.block, self.cur_block))
        });
        let k = match known {
            Some(k) => k,
            None => {
                let k = self.sincos_kernels(x);
                self.sincos.insert(v, k);
                k
            }
        };
        let (n, sin, cos_v) = (k.n, k.sin, k.cos);
        // The quadrant n mod 4: which kernel (bit 0) and its sign (sin: bit 1;
        // cos: bit 1 of n + 1), the sign flipped as `fneg` flips it.
        let flags = MemFlagsData::new();
        let odd = self.b.ins().band_imm_u(n, 1);
        let (chosen, signed) = if cos {
            let n1 = self.b.ins().iadd_imm_s(n, 1);
            (self.b.ins().select(odd, sin, cos_v), n1)
        } else {
            (self.b.ins().select(odd, cos_v, sin), n)
        };
        let sign = self.b.ins().band_imm_u(signed, 2);
        let sign = self.b.ins().ishl_imm_u(sign, 62);
        let bits = self.b.ins().bitcast(types::I64, flags, chosen);
        let bits = self.b.ins().bxor(bits, sign);
        let result = self.b.ins().bitcast(types::F64, flags, bits);
        let f = if cos { MathFn::Cos } else { MathFn::Sin };
        self.or_helper(k.outside, result, f, x)
    }

    /// The reduction of `x` and both kernels ([`Self::sincos_f64`]).
    fn sincos_kernels(&mut self, x: cl::Value) -> SinCos {
        use gradlift_ir::math::{
            COS, INV_PIO2, PIO2_1, PIO2_1T, PIO2_2, PIO2_2T, PIO2_3, PIO2_3T, SHIFT, SIN,
            SINCOS_MEDIUM,
        };
        let flags = MemFlagsData::new();
        let c = |this: &mut Self, v: f64| this.b.ins().f64const(Ieee64::with_bits(v.to_bits()));
        let xb = self.b.ins().bitcast(types::I64, flags, x);
        let hi = self.b.ins().ushr_imm_u(xb, 32);
        let hi = self.b.ins().band_imm_u(hi, 0x7fff_ffff);
        let outside =
            self.b
                .ins()
                .icmp_imm_u(IntCC::UnsignedGreaterThanOrEqual, hi, SINCOS_MEDIUM as i64);

        // The reduction (`math::rem_pio2`).
        let exponent = |this: &mut Self, bits: cl::Value| {
            let e = this.b.ins().ushr_imm_u(bits, 52);
            this.b.ins().band_imm_u(e, 0x7ff)
        };
        let (inv, shift) = (c(self, INV_PIO2), c(self, SHIFT));
        let kd = self.b.ins().fmul(x, inv);
        let kd = self.b.ins().fadd(kd, shift);
        let kb = self.b.ins().bitcast(types::I64, flags, kd);
        let n = self
            .b
            .ins()
            .iadd_imm_s(kb, (SHIFT.to_bits() as i64).wrapping_neg());
        let f = self.b.ins().fsub(kd, shift);
        let p1 = c(self, PIO2_1);
        let fp = self.b.ins().fmul(f, p1);
        let r1 = self.b.ins().fsub(x, fp);
        let t1 = c(self, PIO2_1T);
        let w1 = self.b.ins().fmul(f, t1);
        let y1 = self.b.ins().fsub(r1, w1);
        let ex = exponent(self, xb);
        let lost = |this: &mut Self, y: cl::Value, bits: i64| {
            let yb = this.b.ins().bitcast(types::I64, flags, y);
            let ey = exponent(this, yb);
            let d = this.b.ins().isub(ex, ey);
            this.b.ins().icmp_imm_s(IntCC::SignedGreaterThan, d, bits)
        };
        let second = lost(self, y1, 16);
        let (more, reduced) = (self.b.create_block(), self.b.create_block());
        self.b.set_cold_block(more);
        let r = self.b.append_block_param(reduced, types::F64);
        let w = self.b.append_block_param(reduced, types::F64);
        let y0 = self.b.append_block_param(reduced, types::F64);
        let first = [r1, w1, y1].map(BlockArg::Value);
        self.b.ins().brif(second, more, &[], reduced, &first);
        self.b.switch_to_block(more);
        self.b.seal_block(more);
        let again = |this: &mut Self, r: cl::Value, part: f64, tail: f64| {
            let (part, tail) = (c(this, part), c(this, tail));
            let w = this.b.ins().fmul(f, part);
            let r2 = this.b.ins().fsub(r, w);
            let ft = this.b.ins().fmul(f, tail);
            let lost = this.b.ins().fsub(r, r2);
            let lost = this.b.ins().fsub(lost, w);
            let w2 = this.b.ins().fsub(ft, lost);
            let y0 = this.b.ins().fsub(r2, w2);
            (r2, w2, y0)
        };
        let (r2, w2, y2) = again(self, r1, PIO2_2, PIO2_2T);
        let (r3, w3, y3) = again(self, r2, PIO2_3, PIO2_3T);
        let third = lost(self, y2, 49);
        let pick: Vec<BlockArg> = [(r3, r2), (w3, w2), (y3, y2)]
            .into_iter()
            .map(|(a, b)| BlockArg::Value(self.b.ins().select(third, a, b)))
            .collect();
        self.b.ins().jump(reduced, &pick);
        self.b.switch_to_block(reduced);
        self.b.seal_block(reduced);
        let ry = self.b.ins().fsub(r, y0);
        let y = self.b.ins().fsub(ry, w);

        // The kernels (`math::k_sin`, `math::k_cos`).
        let half = c(self, 0.5);
        let z = self.b.ins().fmul(y0, y0);
        let zz = self.b.ins().fmul(z, z);
        let horner = |this: &mut Self, coefs: &[f64]| {
            // coefs[0] + z (coefs[1] + z (...)), innermost first.
            let (&last, rest) = coefs.split_last().expect("coefficients");
            let mut acc = c(this, last);
            for &k in rest.iter().rev() {
                // `k + z acc` as `z acc + k` (the same sum: no NaN here), the
                // literal second, where x86-64 reads it from memory.
                let zacc = this.b.ins().fmul(z, acc);
                let k = c(this, k);
                acc = this.b.ins().fadd(zacc, k);
            }
            acc
        };
        // sin: r = s2 + z (s3 + z s4) + z w (s5 + z s6); v = z x;
        // x - ((z (0.5 y - v r) - y) - v s1).
        let a = horner(self, &SIN[1..4]);
        let b = horner(self, &SIN[4..6]);
        let zw = self.b.ins().fmul(z, zz);
        let zwb = self.b.ins().fmul(zw, b);
        let rs = self.b.ins().fadd(a, zwb);
        let v = self.b.ins().fmul(z, y0);
        let hy = self.b.ins().fmul(half, y);
        let vr = self.b.ins().fmul(v, rs);
        let inner = self.b.ins().fsub(hy, vr);
        let inner = self.b.ins().fmul(z, inner);
        let inner = self.b.ins().fsub(inner, y);
        let s1 = c(self, SIN[0]);
        let vs1 = self.b.ins().fmul(v, s1);
        let inner = self.b.ins().fsub(inner, vs1);
        let sin = self.b.ins().fsub(y0, inner);
        // cos: r = z (c1 + z (c2 + z c3)) + w w (c4 + z (c5 + z c6));
        // hz = 0.5 z; w = 1 - hz; w + (((1 - w) - hz) + (z r - x y)).
        let a = horner(self, &COS[0..3]);
        let b = horner(self, &COS[3..6]);
        let za = self.b.ins().fmul(z, a);
        let ww = self.b.ins().fmul(zz, zz);
        let wwb = self.b.ins().fmul(ww, b);
        let rc = self.b.ins().fadd(za, wwb);
        let hz = self.b.ins().fmul(half, z);
        let one = self.f64_bits(1f64.to_bits());
        let w = self.b.ins().fsub(one, hz);
        let back = self.b.ins().fsub(one, w);
        let back = self.b.ins().fsub(back, hz);
        let zr = self.b.ins().fmul(z, rc);
        let xy = self.b.ins().fmul(y0, y);
        let tail = self.b.ins().fsub(zr, xy);
        let tail = self.b.ins().fadd(back, tail);
        let cos = self.b.ins().fadd(w, tail);
        SinCos {
            x,
            block: self.cur_block,
            epoch: self.copy_epoch,
            n,
            sin,
            cos,
            outside,
        }
    }

    fn powi(&mut self, x: cl::Value, n: cl::Value) -> Result<cl::Value, CompileError> {
        let h = if self.b.func.dfg.value_type(x) == types::F32 {
            Helper::PowiF32
        } else {
            Helper::PowiF64
        };
        self.helper_result(h, &[x, n])
    }

    /// Whether lowering `inst` calls a function (an IR call, a host, a math
    /// helper), across which no float register survives (System V saves none;
    /// AArch64 the low halves of eight).
    fn calls_out(&self, inst: Inst) -> bool {
        let d = &self.func.insts[inst];
        let f32 = || {
            d.results
                .first()
                .is_some_and(|&r| self.func.value_type(r) == Type::F32)
        };
        match d.opcode {
            Opcode::Call => true,
            // Inline for `f64` (`sin` and `cos` call out on a cold path only).
            Opcode::Exp | Opcode::Sin | Opcode::Cos => f32(),
            Opcode::Log
            | Opcode::Tan
            | Opcode::Tanh
            | Opcode::Sinh
            | Opcode::Cosh
            | Opcode::Asin
            | Opcode::Acos
            | Opcode::Atan
            | Opcode::Log10
            | Opcode::Log2
            | Opcode::Exp2
            | Opcode::Pow
            | Opcode::Atan2
            | Opcode::Hypot
            | Opcode::Powi => true,
            _ => false,
        }
    }

    /// Stores each float that the rest of the block (`rest`, its terminator)
    /// reads and that is defined before the call
    /// `inst` into a stack slot of its own, once per block; the caller loads it
    /// back after the call. The register allocator would keep such a value in a
    /// spill slot over its whole life instead, and a loop before the call would
    /// store it there in every iteration (`logsumexp`'s maximum, live across
    /// the final `log`).
    fn spill_across(
        &mut self,
        blk: Block,
        rest: &[Inst],
        inst: Inst,
        spilled: &mut HashMap<Value, (cl::StackSlot, Option<Lv>)>,
    ) -> Result<Vec<(Value, cl::StackSlot, types::Type)>, CompileError> {
        let func = self.func;
        // Bounded work per call (the scans below are of the rest of the block
        // and of the blocks after it): huge functions and blocks go without.
        if rest.len() > MAX_SPILL_SCAN || func.layout.len() > MAX_SPILL_SCAN {
            return Ok(Vec::new());
        }
        let made_here: HashSet<Value> = rest
            .iter()
            .chain([&inst])
            .flat_map(|&i| func.insts[i].results.iter().copied())
            .collect();
        let mut read: Vec<Value> = rest
            .iter()
            .flat_map(|&i| func.insts[i].args.iter().copied())
            .collect();
        match &func.blocks[blk].term {
            Some(Terminator::Br { cond, .. }) => read.push(*cond),
            Some(Terminator::Ret(vals)) => read.extend(vals.iter().copied()),
            _ => {}
        }
        // Not the values passed to the successors' phis: a loop carries those,
        // and the register allocator spills them once for the whole loop.
        // Loaded back after this call: what is read before the next one (the
        // rest stays in its slot until after the call before its next read).
        let next_call = rest.iter().position(|&i| self.calls_out(i));
        let soon: HashSet<Value> = match next_call {
            Some(k) => rest[..=k]
                .iter()
                .flat_map(|&i| func.insts[i].args.iter().copied())
                .collect(),
            None => read.iter().copied().collect(),
        };
        // Only values that no block after this one reads: for the others the
        // original stays live across the call, and the allocator spills it as
        // well.
        let readers = self.readers.get_or_insert_with(|| {
            let mut m: HashMap<Value, Vec<Block>> = HashMap::new();
            for &b in &func.layout {
                let data = &func.blocks[b];
                for phi in &data.phis {
                    for &(from, v) in &phi.incoming {
                        m.entry(v).or_default().push(from);
                    }
                }
                for &i in &data.insts {
                    for &v in &func.insts[i].args {
                        m.entry(v).or_default().push(b);
                    }
                }
                match &data.term {
                    Some(Terminator::Br { cond, .. }) => m.entry(*cond).or_default().push(b),
                    Some(Terminator::Ret(vals)) => {
                        for &v in vals {
                            m.entry(v).or_default().push(b);
                        }
                    }
                    _ => {}
                }
            }
            m
        });
        // The blocks reachable from this one, found once per block.
        if self.reachable.as_ref().is_none_or(|(b, _)| *b != blk) {
            let mut after: HashSet<Block> = HashSet::new();
            let mut stack: Vec<Block> = func.successors(blk).into_iter().collect();
            while let Some(b) = stack.pop() {
                if after.insert(b) {
                    stack.extend(func.successors(b));
                }
            }
            self.reachable = Some((blk, after));
        }
        let after = &self.reachable.as_ref().expect("just made").1;
        let local = |v: Value| {
            readers
                .get(&v)
                .is_none_or(|bs| bs.iter().all(|b| !after.contains(b)))
        };
        let read: Vec<Value> = read.into_iter().filter(|&v| local(v)).collect();
        let mut out = Vec::new();
        let mut seen = HashSet::new();
        for v in read {
            if made_here.contains(&v)
                || !seen.insert(v)
                || !matches!(func.value_type(v), Type::F64 | Type::F32)
                || matches!(func.value_def(v), ValueDef::Const(_))
                || self.lanes.pair(v).is_some()
                || self.copy.is_some()
            {
                continue;
            }
            let ty = if func.value_type(v) == Type::F64 {
                types::F64
            } else {
                types::F32
            };
            let slot = match spilled.get(&v) {
                Some(&(slot, _)) => slot,
                None => {
                    let Lv::One(x) = self.val(v)? else {
                        continue;
                    };
                    let slot = self.b.create_sized_stack_slot(cl::StackSlotData::new(
                        cl::StackSlotKind::ExplicitSlot,
                        8,
                        3,
                    ));
                    self.b.ins().stack_store(types::I64, x, slot, 0);
                    spilled.insert(v, (slot, self.vals[v]));
                    slot
                }
            };
            if soon.contains(&v) {
                out.push((v, slot, ty));
            }
        }
        Ok(out)
    }

    fn helper_result(&mut self, h: Helper, args: &[cl::Value]) -> Result<cl::Value, CompileError> {
        self.call_helper(h, args)?
            .ok_or_else(|| self.internal("a helper without result"))
    }

    fn int_binary(&mut self, inst: Inst, op: Opcode, x: cl::Value, y: cl::Value) -> cl::Value {
        // Cranelift rematerialises `iadd`/`isub` of a constant where each use is
        // (`n - 1` at a loop's test: two instructions in every iteration); with
        // the constant passed through a float register and back, which its
        // optimiser does not fold, the sum is an ordinary value, computed once
        // and kept in a register.
        let (x, y) = if self.hoisted_imm.contains(&inst) {
            let opaque = |this: &mut Self, v: cl::Value| {
                let f = this.b.ins().bitcast(types::F64, MemFlagsData::new(), v);
                this.b.ins().bitcast(types::I64, MemFlagsData::new(), f)
            };
            let d = &self.func.insts[inst];
            match (
                self.func.value_def(d.args[0]),
                self.func.value_def(d.args[1]),
            ) {
                (ValueDef::Const(_), _) => (opaque(self, x), y),
                _ => (x, opaque(self, y)),
            }
        } else {
            (x, y)
        };
        let ins = self.b.ins();
        match op {
            Opcode::Iadd => ins.iadd(x, y),
            Opcode::Isub => ins.isub(x, y),
            Opcode::Imul => ins.imul(x, y),
            // Cranelift takes shift amounts modulo the width, as the IR does.
            Opcode::Ishl => ins.ishl(x, y),
            Opcode::Ishr => ins.sshr(x, y),
            Opcode::Iand => ins.band(x, y),
            Opcode::Ior => ins.bor(x, y),
            Opcode::Ixor => ins.bxor(x, y),
            Opcode::Idiv | Opcode::Irem => {
                let zero = self.b.ins().icmp_imm_s(IntCC::Equal, y, 0);
                let z = self.b.ins().iconst(types::I64, 0);
                self.fail_if(zero, code::DIVISION_BY_ZERO, inst, z, z);
                // `i64::MIN / -1` traps in Cranelift and wraps in the IR: divide by 1
                // instead, and negate (x % -1 and x % 1 are both 0).
                let minus_one = self.b.ins().icmp_imm_s(IntCC::Equal, y, -1);
                let one = self.b.ins().iconst(types::I64, 1);
                let d = self.b.ins().select(minus_one, one, y);
                if op == Opcode::Idiv {
                    let q = self.b.ins().sdiv(x, d);
                    let neg = self.b.ins().ineg(x);
                    self.b.ins().select(minus_one, neg, q)
                } else {
                    self.b.ins().srem(x, d)
                }
            }
            // Unreachable for a verified function: the shape says IntBinary.
            _ => ins.iadd(x, y),
        }
    }

    fn compare(&mut self, op: Opcode, p: CmpPred, x: cl::Value, y: cl::Value) -> cl::Value {
        if op == Opcode::Fcmp {
            // IEEE: `ne` is true on NaN, every other predicate false.
            let cc = match p {
                CmpPred::Eq => FloatCC::Equal,
                CmpPred::Ne => FloatCC::NotEqual,
                CmpPred::Lt => FloatCC::LessThan,
                CmpPred::Le => FloatCC::LessThanOrEqual,
                CmpPred::Gt => FloatCC::GreaterThan,
                CmpPred::Ge => FloatCC::GreaterThanOrEqual,
            };
            self.b.ins().fcmp(cc, x, y)
        } else {
            let cc = match p {
                CmpPred::Eq => IntCC::Equal,
                CmpPred::Ne => IntCC::NotEqual,
                CmpPred::Lt => IntCC::SignedLessThan,
                CmpPred::Le => IntCC::SignedLessThanOrEqual,
                CmpPred::Gt => IntCC::SignedGreaterThan,
                CmpPred::Ge => IntCC::SignedGreaterThanOrEqual,
            };
            self.b.ins().icmp(cc, x, y)
        }
    }

    fn bool_binary(&mut self, op: Opcode, x: cl::Value, y: cl::Value) -> cl::Value {
        let ins = self.b.ins();
        match op {
            Opcode::And => ins.band(x, y),
            Opcode::Or => ins.bor(x, y),
            _ => ins.bxor(x, y),
        }
    }

    fn cast(&mut self, from: Type, to: Type, x: cl::Value) -> Result<cl::Value, CompileError> {
        let ins = self.b.ins();
        Ok(match (from, to) {
            (a, b) if a == b => x,
            (Type::F32, Type::F64) => ins.fpromote(types::F64, x),
            (Type::F64, Type::F32) => ins.fdemote(types::F32, x),
            (Type::I64, Type::F64) => ins.fcvt_from_sint(types::F64, x),
            (Type::I64, Type::F32) => ins.fcvt_from_sint(types::F32, x),
            // Truncation toward zero, saturating, NaN to 0: Rust's `as`.
            (Type::F64 | Type::F32, Type::I64) => ins.fcvt_to_sint_sat(types::I64, x),
            (Type::Bool, Type::I64) => ins.uextend(types::I64, x),
            (Type::Bool, Type::F64) => {
                let (one, zero) = (ins.f64const(1.0), self.b.ins().f64const(0.0));
                self.b.ins().select(x, one, zero)
            }
            (Type::Bool, Type::F32) => {
                let (one, zero) = (ins.f32const(1.0), self.b.ins().f32const(0.0));
                self.b.ins().select(x, one, zero)
            }
            _ => return Err(self.internal(&format!("cast {from} to {to}"))),
        })
    }

    /// The address of element `i` of the slice (`p`, `n`), after checking bounds.
    fn element(
        &mut self,
        inst: Inst,
        p: cl::Value,
        n: cl::Value,
        i: cl::Value,
        elem: Elem,
    ) -> cl::Value {
        // Unsigned: a negative index is a huge one.
        let out = self.b.ins().icmp(IntCC::UnsignedGreaterThanOrEqual, i, n);
        self.fail_if(out, code::OUT_OF_BOUNDS, inst, i, n);
        self.address(p, i, elem)
    }

    /// The address of element `i` of the slice at `p`, known to be in bounds.
    fn address(&mut self, p: cl::Value, i: cl::Value, elem: Elem) -> cl::Value {
        let off = self.b.ins().ishl_imm_u(i, elem_shift(elem));
        self.b.ins().iadd(p, off)
    }

    /// `alloc`: `n` zeroed elements from the arena. Fast path inline (bump the
    /// current chunk), slow path in Rust.
    fn alloc(&mut self, inst: Inst, elem: Elem, n: cl::Value) -> Result<cl::Value, CompileError> {
        let zero = self.b.ins().iconst(types::I64, 0);
        let neg = self.b.ins().icmp_imm_s(IntCC::SignedLessThan, n, 0);
        self.fail_if(neg, code::NEGATIVE_ALLOC, inst, n, zero);
        let shift = elem_shift(elem);
        let used = self.load_ctx(types::I64, Offsets::ARENA_USED);
        let cap = self.load_ctx(types::I64, Offsets::ARENA_CAP);
        let room = self.b.ins().isub(cap, used);
        let max = self.b.ins().ushr_imm_u(room, shift);
        let fits = self.b.ins().icmp(IntCC::UnsignedLessThanOrEqual, n, max);
        let (fast, slow, done) = (
            self.b.create_block(),
            self.b.create_block(),
            self.b.create_block(),
        );
        let p = self.b.append_block_param(done, types::I64);
        self.b.set_cold_block(slow);
        self.b.ins().brif(fits, fast, &[], slow, &[]);

        self.b.switch_to_block(fast);
        let bytes = self.b.ins().ishl_imm_u(n, shift);
        let base = self.load_ctx(types::I64, Offsets::ARENA_PTR);
        let ptr = self.b.ins().iadd(base, used);
        // Keep `used` a multiple of 8 (the chunk's capacity is one).
        let padded = self.b.ins().iadd_imm_u(bytes, 7);
        let padded = self.b.ins().band_imm_s(padded, -8);
        let used1 = self.b.ins().iadd(used, padded);
        self.store_ctx(used1, Offsets::ARENA_USED);
        self.call_helper(Helper::MemZero, &[ptr, bytes])?;
        self.b.ins().jump(done, &[BlockArg::Value(ptr)]);

        self.b.switch_to_block(slow);
        let ctx = self.ctx;
        let size = self.b.ins().iconst(types::I64, 1 << shift);
        let got = self.helper_result(Helper::ArenaGrow, &[ctx, n, size])?;
        let failed = self.b.ins().icmp_imm_s(IntCC::Equal, got, 0);
        self.fail_if(failed, code::ALLOC_FAILED, inst, n, zero);
        self.b.ins().jump(done, &[BlockArg::Value(got)]);

        self.b.switch_to_block(done);
        Ok(p)
    }

    /// `call @g(args)`: the depth and stack checks, the call, and the status check.
    fn call(&mut self, inst: Inst, callee: FuncId, args: &[Lv]) -> Result<(), CompileError> {
        let Some(decl) = self.module.funcs.get(callee) else {
            return Err(self.internal("a call to no function"));
        };
        match decl.body {
            Body::Defined(_) => {}
            Body::Extern => return self.call_host(inst, callee, args),
            Body::Declared => {
                return Err(self.unsupported(
                    inst,
                    &format!("@{} is declared but never defined", decl.name),
                ));
            }
        }
        let r = match self.callees.get(&callee) {
            Some(&r) => r,
            None => {
                let Some(&id) = self.decls.funcs.get(&callee) else {
                    return Err(self.internal(&format!("@{} was not declared", decl.name)));
                };
                let r = self.jm.declare_func_in_func(id, self.b.func);
                self.callees.insert(callee, r);
                r
            }
        };
        let depth = self.load_ctx(types::I64, Offsets::DEPTH);
        let max = self.load_ctx(types::I64, Offsets::MAX_DEPTH);
        let zero = self.b.ins().iconst(types::I64, 0);
        let deep = self
            .b
            .ins()
            .icmp(IntCC::UnsignedGreaterThanOrEqual, depth, max);
        self.fail_if(deep, code::RECURSION_LIMIT, inst, max, zero);
        let sp = self.b.ins().get_stack_pointer(types::I64);
        let limit = self.load_ctx(types::I64, Offsets::STACK_LIMIT);
        let low = self.b.ins().icmp(IntCC::UnsignedLessThan, sp, limit);
        self.fail_if(low, code::STACK_EXHAUSTED, inst, depth, zero);
        let deeper = self.b.ins().iadd_imm_u(depth, 1);
        self.store_ctx(deeper, Offsets::DEPTH);

        let mut flat = vec![self.ctx];
        for &a in args {
            a.push_to(&mut flat);
        }
        let call = self.b.ins().call(r, &flat);
        let results = self.b.inst_results(call).to_vec();
        self.store_ctx(depth, Offsets::DEPTH);
        // The callee may have pushed or popped.
        self.tape_state = None;
        if let Some(var) = self.height {
            let (t, ctx) = (self.tape, self.ctx);
            let len = self
                .b
                .ins()
                .load(types::I64, t.height, ctx, Offsets::TAPE_LEN);
            self.b.def_var(var, len);
            self.tape_state = Some(TapeState {
                len,
                dirty: false,
                tags: None,
            });
        }
        let status = self.load_ctx(types::I32, Offsets::STATUS);
        let cont = self.b.create_block();
        self.b.ins().brif(status, self.bail_block, &[], cont, &[]);
        self.b.switch_to_block(cont);

        let mut k = 0;
        for (j, &t) in decl.sig.results.iter().enumerate() {
            let lv = if t.is_slice() {
                k += 2;
                Lv::Slice(results[k - 2], results[k - 1])
            } else {
                k += 1;
                Lv::One(results[k - 1])
            };
            self.def(inst, j, lv)?;
        }
        Ok(())
    }
}

impl<M: ClModule> Lower<'_, '_, M> {
    // The tape (see the crate docs): a stack of 8-byte slots in the context, each
    // holding one scalar in its own type, with a one-byte type tag per slot below
    // the slots (see `Ctx::tape_ptr`); a table of buffers whose handles carry the
    // tape's generation.

    /// The tape now: this block's ([`TapeState`]), or the context's height.
    fn current_tape(&mut self) -> TapeState {
        match self.tape_state {
            Some(st) => st,
            None if self.height.is_some() => {
                let var = self.height.expect("checked");
                let len = self.b.use_var(var);
                let st = TapeState {
                    len,
                    dirty: true,
                    tags: None,
                };
                self.tape_state = Some(st);
                st
            }
            None => {
                let (t, ctx) = (self.tape, self.ctx);
                let len = self
                    .b
                    .ins()
                    .load(types::I64, t.height, ctx, Offsets::TAPE_LEN);
                let st = TapeState {
                    len,
                    dirty: false,
                    tags: None,
                };
                self.tape_state = Some(st);
                st
            }
        }
    }

    /// `push x`: the fast path stores `x` into the next slot and, with tape checks,
    /// notes its type code `tag` ([`scalar_code`]) for the slot's tag ([`TapeState`]);
    /// a full stack grows in Rust first.
    fn push(&mut self, inst: Inst, x: cl::Value, tag: Option<u8>) -> Result<(), CompileError> {
        let mut now = self.current_tape();
        if now.tags.is_some_and(|p| p.n == 8) {
            self.save_tape();
            now = self.current_tape();
        }
        let len = now.len;
        let t = self.tape;
        let ctx = self.ctx;
        let cap = self
            .b
            .ins()
            .load(types::I64, t.ptrs, ctx, Offsets::TAPE_CAP);
        let full = self
            .b
            .ins()
            .icmp(IntCC::UnsignedGreaterThanOrEqual, len, cap);
        let (grow, store) = (self.b.create_block(), self.b.create_block());
        self.b.set_cold_block(grow);
        self.b.ins().brif(full, grow, &[], store, &[]);

        // `tape_grow` copies `tape_len` slots and their tags; a failure leaves the
        // tape so.
        self.b.switch_to_block(grow);
        self.save_tape();
        let ok = self.helper_result(Helper::TapeGrow, &[ctx])?;
        let failed = self.b.ins().icmp_imm_s(IntCC::Equal, ok, 0);
        let zero = self.b.ins().iconst(types::I64, 0);
        self.fail_if(failed, code::TAPE_FULL, inst, len, zero);
        self.b.ins().jump(store, &[]);

        // The fast path has written nothing back.
        self.b.switch_to_block(store);
        let base = self
            .b
            .ins()
            .load(types::I64, t.ptrs, ctx, Offsets::TAPE_PTR);
        let off = self.b.ins().ishl_imm_u(len, 3);
        let addr = self.b.ins().iadd(base, off);
        self.b.ins().store(t.slots, x, addr, 0);
        let tags = tag.map(|tag| {
            let mut p = now.tags.unwrap_or(PendingTags {
                from: len,
                tags: [0; 8],
                n: 0,
            });
            p.tags[p.n] = tag;
            p.n += 1;
            p
        });
        let len1 = self.b.ins().iadd_imm_u(len, 1);
        self.tape_state = Some(TapeState {
            len: len1,
            dirty: true,
            tags,
        });
        Ok(())
    }

    /// `pop T`: the top slot read as `ty`. With tape checks, only if its tag is
    /// `tag` (`T`'s code): one compare covers both errors, since the tag read for an
    /// empty tape is the 0 byte below the first slot's, which no type has; the cold
    /// path tells the two apart ([`code::TAPE_UNDERFLOW`], or
    /// [`code::TAPE_MISMATCH`] with both codes). Without, an empty tape fails and
    /// the top slot's bits are read as `ty`, whatever was pushed. On an error the
    /// tape is left as it was, as on the interpreter.
    fn pop(&mut self, inst: Inst, ty: cl::Type, tag: Option<u8>) -> cl::Value {
        let mut now = self.current_tape();
        let t = self.tape;
        let ctx = self.ctx;
        if let Some(p) = now.tags {
            // The tag to check may be among those not written yet.
            self.write_tags(p);
            now.tags = None;
            self.tape_state = Some(now);
        }
        let len = now.len;
        match tag {
            Some(tag) => {
                let base = self
                    .b
                    .ins()
                    .load(types::I64, t.ptrs, ctx, Offsets::TAPE_PTR);
                // The tag of the top slot, `len - 1`, at `base - 1 - len`.
                let below = self.b.ins().isub(base, len);
                let found = self.b.ins().uload8(types::I64, t.tags, below, -1);
                let other = self
                    .b
                    .ins()
                    .icmp_imm_s(IntCC::NotEqual, found, i64::from(tag));
                let (bad, ok) = (self.b.create_block(), self.b.create_block());
                self.b.set_cold_block(bad);
                self.b.ins().brif(other, bad, &[], ok, &[]);

                self.b.switch_to_block(bad);
                self.write_back(now);
                let empty = self.b.ins().icmp_imm_s(IntCC::Equal, len, 0);
                let underflow = self
                    .b
                    .ins()
                    .iconst(types::I32, i64::from(code::TAPE_UNDERFLOW));
                let mismatch = self
                    .b
                    .ins()
                    .iconst(types::I32, i64::from(code::TAPE_MISMATCH));
                let status = self.b.ins().select(empty, underflow, mismatch);
                let at = self.b.ins().iconst(types::I32, inst.index() as i64);
                let want = self.b.ins().iconst(types::I64, i64::from(tag));
                let args = [status, at, want, found].map(BlockArg::Value);
                self.b.ins().jump(self.err_block, &args);
                self.b.switch_to_block(ok);
            }
            None => {
                let empty = self.b.ins().icmp_imm_s(IntCC::Equal, len, 0);
                let zero = self.b.ins().iconst(types::I64, 0);
                self.fail_if(empty, code::TAPE_UNDERFLOW, inst, zero, zero);
            }
        }
        let len1 = self.b.ins().iadd_imm_s(len, -1);
        self.tape_state = Some(TapeState {
            len: len1,
            dirty: true,
            tags: None,
        });
        let base = self
            .b
            .ins()
            .load(types::I64, t.ptrs, ctx, Offsets::TAPE_PTR);
        let off = self.b.ins().ishl_imm_u(len1, 3);
        let addr = self.b.ins().iadd(base, off);
        self.b.ins().load(ty, t.slots, addr, 0)
    }

    /// `tape_alloc T, n`: a negative `n` fails as `alloc`'s does; the buffer is
    /// made in Rust.
    fn tape_alloc(
        &mut self,
        inst: Inst,
        elem: Elem,
        n: cl::Value,
    ) -> Result<cl::Value, CompileError> {
        let zero = self.b.ins().iconst(types::I64, 0);
        let neg = self.b.ins().icmp_imm_s(IntCC::SignedLessThan, n, 0);
        self.fail_if(neg, code::NEGATIVE_ALLOC, inst, n, zero);
        let ctx = self.ctx;
        let code_ = self.b.ins().iconst(types::I64, elem_code(elem) as i64);
        let h = self.helper_result(Helper::TapeAlloc, &[ctx, n, code_])?;
        let failed = self.b.ins().icmp_imm_s(IntCC::SignedLessThan, h, 0);
        self.fail_if(failed, code::ALLOC_FAILED, inst, n, zero);
        Ok(h)
    }

    /// `tape_view T, h`: the handle's generation must be the tape's, its index in
    /// the table, and the buffer's element type `T`.
    fn tape_view(&mut self, inst: Inst, elem: Elem, h: cl::Value) -> (cl::Value, cl::Value) {
        let want = elem_code(elem) as i64;
        let gen_ = self.b.ins().ushr_imm_u(h, 32);
        let index = self.b.ins().band_imm_s(h, 0xffff_ffff);
        let tape_gen = self.load_ctx(types::I64, Offsets::TAPE_GEN);
        let len = self.load_ctx(types::I64, Offsets::TAPE_BUFS_LEN);
        let stale = self.b.ins().icmp(IntCC::NotEqual, gen_, tape_gen);
        let beyond = self
            .b
            .ins()
            .icmp(IntCC::UnsignedGreaterThanOrEqual, index, len);
        let bad = self.b.ins().bor(stale, beyond);
        let want_v = self.b.ins().iconst(types::I64, want);
        self.fail_if(bad, code::NO_TAPE_BUFFER, inst, h, want_v);
        let table = self.load_ctx(types::I64, Offsets::TAPE_BUFS_PTR);
        let off = self.b.ins().imul_imm_s(index, 24);
        let entry = self.b.ins().iadd(table, off);
        let found = self.b.ins().load(types::I64, trusted(), entry, 16);
        let other = self.b.ins().icmp_imm_s(IntCC::NotEqual, found, want);
        let codes = self.b.ins().iadd_imm_s(found, want * 16);
        self.fail_if(other, code::TAPE_BUFFER_MISMATCH, inst, h, codes);
        let p = self.b.ins().load(types::I64, trusted(), entry, 0);
        let n = self.b.ins().load(types::I64, trusted(), entry, 8);
        (p, n)
    }

    /// A call to an extern: the arguments go to a stack area as 8-byte slots (the
    /// trampolines' layout), Rust calls the host function, the results come back
    /// the same way.
    fn call_host(&mut self, inst: Inst, callee: FuncId, args: &[Lv]) -> Result<(), CompileError> {
        let sig = &self.module.funcs[callee].sig;
        if sig.results.iter().any(|t| t.is_slice()) {
            return Err(self.unsupported(
                inst,
                &format!(
                    "@{} returns a slice: the JIT calls host functions that return scalars only",
                    self.module.name(callee)
                ),
            ));
        }
        let mut flat = Vec::new();
        for &a in args {
            a.push_to(&mut flat);
        }
        let n_results = sig.results.len();
        let bytes = |n: usize| u32::try_from(8 * n.max(1)).unwrap_or(u32::MAX);
        let slot_args = self.b.create_sized_stack_slot(cl::StackSlotData::new(
            cl::StackSlotKind::ExplicitSlot,
            bytes(flat.len()),
            3,
        ));
        let slot_results = self.b.create_sized_stack_slot(cl::StackSlotData::new(
            cl::StackSlotKind::ExplicitSlot,
            bytes(n_results),
            3,
        ));
        let pa = self.b.ins().stack_addr(types::I64, slot_args, 0);
        let pr = self.b.ins().stack_addr(types::I64, slot_results, 0);
        for (k, &v) in flat.iter().enumerate() {
            let v = match self.b.func.dfg.value_type(v) {
                types::F32 => {
                    let bits = self.b.ins().bitcast(types::I32, MemFlagsData::new(), v);
                    self.b.ins().uextend(types::I64, bits)
                }
                types::I8 => self.b.ins().uextend(types::I64, v),
                _ => v,
            };
            self.b.ins().store(trusted(), v, pa, (8 * k) as i32);
        }
        let ctx = self.ctx;
        let index = self.b.ins().iconst(types::I64, callee.index() as i64);
        let status = self.helper_result(Helper::CallHost, &[ctx, index, pa, pr])?;
        let zero = self.b.ins().iconst(types::I64, 0);
        self.fail_if(status, code::EXTERN_FAILED, inst, zero, zero);
        let results = sig.results.clone();
        for (j, &t) in results.iter().enumerate() {
            let off = (8 * j) as i32;
            let v = match t {
                Type::F64 => self.b.ins().load(types::F64, trusted(), pr, off),
                Type::F32 => {
                    let bits = self.b.ins().load(types::I32, trusted(), pr, off);
                    self.b.ins().bitcast(types::F32, MemFlagsData::new(), bits)
                }
                Type::Bool => self.b.ins().load(types::I8, trusted(), pr, off),
                _ => self.b.ins().load(types::I64, trusted(), pr, off),
            };
            self.def(inst, j, Lv::One(v))?;
        }
        Ok(())
    }
}

fn internal(module: &Module, fid: FuncId, message: &str) -> CompileError {
    CompileError::Codegen {
        func: module.funcs.get(fid).map(|d| d.name.clone()),
        message: format!("lowering bug: {message}"),
    }
}
