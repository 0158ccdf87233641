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
use cranelift_module::{FuncId as ClFuncId, Linkage, Module as ClModule, ModuleError, ModuleReloc};
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
    let decls = Decls {
        funcs: &ids,
        call_conv,
        cold_call_conv,
        frontend,
        tape_checks: options.tape_checks,
    };
    let mut ctx: Context = jm.make_context();
    ctx.set_disasm(listing.is_some());
    let mut fbc = FunctionBuilderContext::new();
    let mut frame_margin = 0usize;
    let mut finish = |jm: &mut M,
                      ctx: &mut Context,
                      id: ClFuncId,
                      name: &str,
                      listed: String|
     -> Result<usize, CompileError> {
        let clif = if listing.is_some() {
            ctx.func.display().to_string()
        } else {
            String::new()
        };
        if ctx.func.dfg.num_insts() > options.quick_above {
            define_quick(jm, quick, ctx, id).map_err(|e| codegen(Some(name), e))?;
        } else {
            jm.define_function(id, ctx)
                .map_err(|e| codegen(Some(name), e))?;
        }
        if let Some(l) = listing.as_deref_mut() {
            let asm = ctx
                .compiled_code()
                .and_then(|c| c.vcode.clone())
                .unwrap_or_default();
            l.push(Listing {
                name: listed,
                clif,
                asm,
            });
        }
        let bound = frame_bound(ctx);
        jm.clear_context(ctx);
        // Clearing switches disassembly off.
        ctx.set_disasm(listing.is_some());
        Ok(bound)
    };
    for &f in funcs {
        let name = module.name(f);
        ctx.func.signature = clif_signature(module.sig(f), call_conv);
        {
            let b = FunctionBuilder::new(&mut ctx.func, &mut fbc);
            Lower::run(module, f, jm, &decls, b)?;
        }
        let bound = finish(jm, &mut ctx, ids[&f], name, name.to_string())?;
        frame_margin = frame_margin.max(bound);
    }
    let mut trampolines = Vec::new();
    for &f in funcs {
        let name = module.name(f);
        let sig = abi::trampoline_signature(call_conv);
        let id = jm
            .declare_function(&format!("gradlift_entry{}", f.index()), entry_linkage, &sig)
            .map_err(|e| codegen(Some(name), e))?;
        ctx.func.signature = sig;
        let callee = jm.declare_func_in_func(ids[&f], &mut ctx.func);
        abi::trampoline(
            FunctionBuilder::new(&mut ctx.func, &mut fbc),
            module.sig(f),
            callee,
            frontend,
        );
        let bound = finish(jm, &mut ctx, id, name, format!("{name} (entry)"))?;
        frame_margin = frame_margin.max(bound);
        trampolines.push((f, id));
    }
    Ok(Defined {
        trampolines,
        frame_margin,
    })
}

/// Compiles `ctx`'s function with the `quick` ISA (the module's own is the
/// optimising one) and defines its bytes and relocations as `id`: what
/// `define_function` does, with another ISA of the same target.
fn define_quick<M: ClModule>(
    jm: &mut M,
    quick: &dyn TargetIsa,
    ctx: &mut Context,
    id: ClFuncId,
) -> Result<(), ModuleError> {
    let code = ctx.compile(quick, &mut ControlPlane::default())?;
    let alignment = u64::from(code.buffer.alignment);
    let bytes = code.code_buffer().to_vec();
    let mach_relocs = code.buffer.relocs().to_vec();
    let relocs: Vec<ModuleReloc> = mach_relocs
        .iter()
        .map(|r| ModuleReloc::from_mach_reloc(r, &ctx.func, id))
        .collect();
    jm.define_function_bytes(id, alignment, &bytes, &relocs)
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
