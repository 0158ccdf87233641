//! The backend-independent part of compiling: which functions to compile
//! ([`prepare`]), and defining them and their trampolines in any
//! `cranelift_module::Module` ([`define`]): the JIT's (`JITModule`, for the host) or an
//! object file's (`ObjectModule`, for another target).

use cranelift_codegen::isa::{CallConv, TargetIsa};
use std::collections::{HashMap, VecDeque};

use cranelift_codegen::Context;
use cranelift_codegen::control::ControlPlane;
use cranelift_entity::EntityRef;
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};
use cranelift_module::{
    DataDescription, FuncId as ClFuncId, Linkage, Module as ClModule, ModuleError, ModuleReloc,
};
use gradlift_ir::verify::verify_function;
use gradlift_ir::{FuncId, Module, Opcode, VerifierErrors};

use crate::abi;
use crate::compiled::CompileOptions;
use crate::error::CompileError;
use crate::lower::{Decls, Lower, clif_signature};

/// What [`define`] made.
pub(crate) struct Defined {
    /// The trampoline of each IR function, named `gradlift_entry{index}`.
    pub(crate) trampolines: Vec<(FuncId, ClFuncId)>,
    /// A bound on the native stack frame of any function defined.
    pub(crate) frame_margin: usize,
}

/// The text of one function at the stages a listing keeps.
#[derive(Clone, Debug, Default)]
pub struct Listing {
    /// The IR function's name (without `@`); a trampoline's is `name` + ` (entry)`.
    pub name: String,
    /// Cranelift IR as lowered, before Cranelift's optimisations.
    pub clif: String,
    /// The machine code, as Cranelift's disassembly of its final code.
    pub asm: String,
}

/// `roots` and every function they call, directly or not, in a deterministic order,
/// after verifying them; an error for a root that has no body.
pub(crate) fn prepare(
    module: &Module,
    roots: &[FuncId],
    options: &CompileOptions,
) -> Result<Vec<FuncId>, CompileError> {
    let funcs = call_closure(module, roots)?;
    // Sizes first: counting is cheap, and nothing is verified or lowered for a
    // module that is refused.
    for &f in &funcs {
        let insts = module.function(f).map_or(0, |body| body.statement_count());
        if insts > options.max_insts {
            return Err(CompileError::TooLarge {
                func: module.name(f).to_string(),
                insts,
                limit: options.max_insts,
            });
        }
    }
    let mut errors = Vec::new();
    for &f in &funcs {
        errors.extend(verify_function(module, f));
    }
    if !errors.is_empty() {
        return Err(CompileError::Verify(VerifierErrors(errors)));
    }
    Ok(funcs)
}

/// Defines `funcs` (from [`prepare`]) and one trampoline each in `jm`. Functions
/// are local; trampolines have `entry_linkage`. With `listing`, the Cranelift IR
/// and the disassembly of every function are kept there.
pub(crate) fn define<M: ClModule>(
    jm: &mut M,
    quick: &dyn TargetIsa,
    options: &CompileOptions,
    module: &Module,
    funcs: &[FuncId],
    entry_linkage: Linkage,
    mut listing: Option<&mut Vec<Listing>>,
) -> Result<Defined, CompileError> {
    let call_conv = jm.isa().default_call_conv();
    let frontend = jm.isa().frontend_config();
    let mut ids: HashMap<FuncId, ClFuncId> = HashMap::new();
    for &f in funcs {
        let sig = clif_signature(module.sig(f), call_conv);
        let name = format!("gradlift_fn{}", f.index());
        let id = jm
            .declare_function(&name, Linkage::Local, &sig)
            .map_err(|e| codegen(Some(module.name(f)), e))?;
        ids.insert(f, id);
    }
    // x86-64's System V convention preserves no float register across a call, and a
    // float value live across a call is kept in memory for its whole live range,
    // loops included: the tape's slow path, a cold call after a `push`, would keep
    // every loop's float accumulators in memory. The Windows x64 convention
    // preserves xmm6-xmm15, so values live across the cold call stay in those.
    // (AArch64's convention already preserves d8-d15.)
    let cold_call_conv = match jm.isa().triple().architecture {
        target_lexicon::Architecture::X86_64 => CallConv::WindowsFastcall,
        _ => call_conv,
    };
    // `exp`'s table (`gradlift_ir::math::exp_table`), read by the inline `exp`
    // of an `f64`: one local, read-only object per module, 8-byte words in the
    // target's byte order.
    let exp_table = jm
        .declare_data("gradlift_exp_table", Linkage::Local, false, false)
        .map_err(|e| codegen(None, e))?;
    let little = jm.isa().endianness() == cranelift_codegen::ir::Endianness::Little;
    let bytes: Vec<u8> = gradlift_ir::math::exp_table()
        .iter()
        .flat_map(|w| {
            if little {
                w.to_le_bytes()
            } else {
                w.to_be_bytes()
            }
        })
        .collect();
    let mut table = DataDescription::new();
    table.define(bytes.into_boxed_slice());
    table.set_align(8);
    jm.define_data(exp_table, &table)
        .map_err(|e| codegen(None, e))?;
    let decls = Decls {
        exp_table,
        funcs: &ids,
        call_conv,
        cold_call_conv,
        frontend,
        tape_checks: options.tape_checks,
    };
    // Lowered first, one context per function and trampoline, in order; then
    // compiled (on two threads when there is enough to share, see
    // [`compile_all`]); then defined in `jm`, in order.
    let mut fbc = FunctionBuilderContext::new();
    let mut jobs: Vec<Job> = Vec::new();
    let keep = listing.is_some();
    for &f in funcs {
        let mut ctx: Context = jm.make_context();
        ctx.set_disasm(keep);
        ctx.func.signature = clif_signature(module.sig(f), call_conv);
        {
            let b = FunctionBuilder::new(&mut ctx.func, &mut fbc);
            Lower::run(module, f, jm, &decls, b)?;
        }
        jobs.push(Job::new(
            ctx,
            ids[&f],
            module.name(f).to_string(),
            keep,
            options,
        ));
    }
    let mut trampolines = Vec::new();
    for &f in funcs {
        let name = module.name(f);
        let sig = abi::trampoline_signature(call_conv);
        let id = jm
            .declare_function(&format!("gradlift_entry{}", f.index()), entry_linkage, &sig)
            .map_err(|e| codegen(Some(name), e))?;
        let mut ctx: Context = jm.make_context();
        ctx.set_disasm(keep);
        ctx.func.signature = sig;
        let callee = jm.declare_func_in_func(ids[&f], &mut ctx.func);
        abi::trampoline(
            FunctionBuilder::new(&mut ctx.func, &mut fbc),
            module.sig(f),
            callee,
            frontend,
        );
        jobs.push(Job::new(ctx, id, format!("{name} (entry)"), keep, options));
        trampolines.push((f, id));
    }
    compile_all(jm.isa(), quick, &mut jobs)?;
    let mut frame_margin = 0usize;
    for job in jobs {
        let Job {
            mut ctx,
            id,
            name,
            clif,
            ..
        } = job;
        let func_name = name.trim_end_matches(" (entry)");
        let code = ctx.compiled_code().ok_or_else(|| CompileError::Codegen {
            func: Some(func_name.to_string()),
            message: "not compiled".to_string(),
        })?;
        let alignment = u64::from(code.buffer.alignment);
        let relocs: Vec<ModuleReloc> = code
            .buffer
            .relocs()
            .iter()
            .map(|r| ModuleReloc::from_mach_reloc(r, &ctx.func, id))
            .collect();
        jm.define_function_bytes(id, alignment, code.code_buffer(), &relocs)
            .map_err(|e| codegen(Some(func_name), e))?;
        if let Some(l) = listing.as_deref_mut() {
            let asm = code.vcode.clone().unwrap_or_default();
            l.push(Listing {
                name: name.clone(),
                clif,
                asm,
            });
        }
        frame_margin = frame_margin.max(frame_bound(&ctx));
        jm.clear_context(&mut ctx);
    }
    Ok(Defined {
        trampolines,
        frame_margin,
    })
}

/// One function to compile: its lowered context, its id in the Cranelift module,
/// the name its listing and errors carry, its Cranelift IR as lowered (kept for a
/// listing), and whether it is compiled with the `quick` settings (more than
/// [`CompileOptions::quick_above`] instructions).
struct Job {
    ctx: Context,
    id: ClFuncId,
    name: String,
    clif: String,
    quick: bool,
}

impl Job {
    fn new(ctx: Context, id: ClFuncId, name: String, keep: bool, options: &CompileOptions) -> Job {
        let clif = if keep {
            ctx.func.display().to_string()
        } else {
            String::new()
        };
        let quick = ctx.func.dfg.num_insts() > options.quick_above;
        Job {
            ctx,
            id,
            name,
            clif,
            quick,
        }
    }

    /// Compiles the context with its ISA.
    fn compile(
        &mut self,
        speed: &dyn TargetIsa,
        quick: &dyn TargetIsa,
    ) -> Result<(), CompileError> {
        let isa = if self.quick { quick } else { speed };
        let name = self.name.trim_end_matches(" (entry)");
        self.ctx
            .compile(isa, &mut ControlPlane::default())
            .map(|_| ())
            .map_err(|e| codegen(Some(name), ModuleError::Compilation(e.inner)))
    }
}

/// Below this many Cranelift instructions in all, the jobs are compiled on the
/// calling thread: a thread costs tens of microseconds to start.
const PARALLEL_ABOVE: usize = 500;

/// Compiles every job: on the calling thread and one more when there are several
/// and enough instructions to share (a rule's forward pass and pullback, the
/// rules of its callees), the jobs split into two halves of about the same size.
/// Cranelift compiles each function on its own, so the code is the same either
/// way. `mlp`'s rule (a forward pass of 707 Cranelift instructions and a pullback
/// of 877) compiled in 4.3-5.3 ms instead of 7.8-9.9 ms on two cores (up to 12 ms
/// when other work held the second core).
fn compile_all(
    speed: &dyn TargetIsa,
    quick: &dyn TargetIsa,
    jobs: &mut [Job],
) -> Result<(), CompileError> {
    let sizes: Vec<usize> = jobs.iter().map(|j| j.ctx.func.dfg.num_insts()).collect();
    let total: usize = sizes.iter().sum();
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    if jobs.len() < 2 || total < PARALLEL_ABOVE || threads < 2 {
        return jobs.iter_mut().try_for_each(|j| j.compile(speed, quick));
    }
    // The largest jobs first, each to the half with less so far.
    let mut order: Vec<usize> = (0..jobs.len()).collect();
    order.sort_by_key(|&k| std::cmp::Reverse(sizes[k]));
    let mut mine = vec![false; jobs.len()];
    let (mut a, mut b) = (0usize, 0usize);
    for k in order {
        if a <= b {
            mine[k] = true;
            a += sizes[k];
        } else {
            b += sizes[k];
        }
    }
    let (mut here, mut there): (Vec<&mut Job>, Vec<&mut Job>) = (Vec::new(), Vec::new());
    for (k, job) in jobs.iter_mut().enumerate() {
        if mine[k] {
            here.push(job);
        } else {
            there.push(job);
        }
    }
    std::thread::scope(|scope| {
        let other =
            scope.spawn(move || there.into_iter().try_for_each(|j| j.compile(speed, quick)));
        let first = here.into_iter().try_for_each(|j| j.compile(speed, quick));
        let second = other
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        first.and(second)
    })
}

/// A Cranelift module error as a [`CompileError`].
pub(crate) fn codegen(func: Option<&str>, e: ModuleError) -> CompileError {
    CompileError::Codegen {
        func: func.map(str::to_string),
        message: match e {
            ModuleError::Compilation(e) => format!("{e:?}"),
            e => e.to_string(),
        },
    }
}

/// An upper bound on the native stack frame of a compiled function: the frame
/// Cranelift laid out (spill slots, stack slots, saved registers and outgoing
/// arguments, below the frame pointer), plus the frame pointer and return address
/// and a margin. If the layout is not known, every value spilled in a 16-byte slot
/// and twice over: far too much for a large function (a 300,000-instruction
/// function has a frame of a few bytes, not 9.6 MB), so only a fallback.
fn frame_bound(ctx: &Context) -> usize {
    match ctx.compiled_code().and_then(|c| c.buffer.frame_layout()) {
        Some(layout) => layout.frame_to_fp_offset as usize + 256,
        None => 32 * ctx.func.dfg.num_values() + 1024,
    }
}

/// `roots` and every function they call, in a deterministic order; an error for a
/// root that has no body.
fn call_closure(module: &Module, roots: &[FuncId]) -> Result<Vec<FuncId>, CompileError> {
    let mut seen = vec![false; module.funcs.len()];
    let mut order = Vec::new();
    let mut queue = VecDeque::new();
    for &r in roots {
        let Some(decl) = module.funcs.get(r) else {
            return Err(CompileError::NotDefined(r.to_string()));
        };
        if decl.function().is_none() {
            return Err(CompileError::NotDefined(decl.name.clone()));
        }
        if !seen[r.index()] {
            seen[r.index()] = true;
            queue.push_back(r);
        }
    }
    while let Some(f) = queue.pop_front() {
        order.push(f);
        let Some(body) = module.funcs[f].function() else {
            continue;
        };
        for (_, inst) in body.placed_insts() {
            let data = &body.insts[inst];
            if let (Opcode::Call, gradlift_ir::Imm::Func(g)) = (data.opcode, data.imm)
                && module.function(g).is_some()
                && !seen[g.index()]
            {
                seen[g.index()] = true;
                queue.push_back(g);
            }
        }
    }
    Ok(order)
}
