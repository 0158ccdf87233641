//! The uniform entry: one generated trampoline per compiled function,
//! `extern "C" fn(ctx, args: *const u64, results: *mut u64) -> u32`, so that Rust
//! calls every compiled function through one function-pointer type.
//!
//! Each IR parameter takes one 8-byte slot of `args` per Cranelift value: an `f64`
//! its bits, an `f32` its bits in the low 32, an `i64` itself, a `bool` 0 or 1, a
//! slice two slots (address, length). Results are written to `results` the same
//! way. The trampoline returns the context's status word: 0, or an error code.

use cranelift_codegen::ir::{self as cl, AbiParam, FuncRef, InstBuilder, MemFlagsData, types};
use cranelift_codegen::isa::{CallConv, TargetFrontendConfig};
use cranelift_frontend::FunctionBuilder;

use crate::lower::clif_types;
use crate::runtime::Offsets;

/// The number of 8-byte slots the values of `tys` take.
pub(crate) fn slots(tys: &[gradlift_ir::Type]) -> usize {
    tys.iter().map(|&t| clif_types(t).len()).sum()
}

/// The trampoline's signature: (ctx, args, results) -> status.
pub(crate) fn trampoline_signature(call_conv: CallConv) -> cl::Signature {
    let mut s = cl::Signature::new(call_conv);
    s.params.extend([AbiParam::new(types::I64); 3]);
    s.returns.push(AbiParam::new(types::I32));
    s
}

/// Writes the trampoline of a function of signature `sig` (called through
/// `callee`) into the builder's function.
pub(crate) fn trampoline(
    mut b: FunctionBuilder<'_>,
    sig: &gradlift_ir::Signature,
    callee: FuncRef,
    frontend: TargetFrontendConfig,
) {
    let flags = MemFlagsData::trusted();
    let entry = b.create_block();
    b.append_block_params_for_function_params(entry);
    b.switch_to_block(entry);
    let p = b.block_params(entry).to_vec();
    let (ctx, args, results) = (p[0], p[1], p[2]);
    let mut flat = vec![ctx];
    let mut off = 0i32;
    for &t in &sig.params {
        for &ct in clif_types(t) {
            let v = match ct {
                types::F64 => b.ins().load(types::F64, flags, args, off),
                types::F32 => {
                    let bits = b.ins().load(types::I64, flags, args, off);
                    let bits = b.ins().ireduce(types::I32, bits);
                    b.ins().bitcast(types::F32, MemFlagsData::new(), bits)
                }
                types::I8 => {
                    let bits = b.ins().load(types::I64, flags, args, off);
                    b.ins().ireduce(types::I8, bits)
                }
                t => b.ins().load(t, flags, args, off),
            };
            flat.push(v);
            off += 8;
        }
    }
    let call = b.ins().call(callee, &flat);
    let outs = b.inst_results(call).to_vec();
    let mut off = 0i32;
    for v in outs {
        let v = match b.func.dfg.value_type(v) {
            types::F32 => {
                let bits = b.ins().bitcast(types::I32, MemFlagsData::new(), v);
                b.ins().uextend(types::I64, bits)
            }
            types::I8 => b.ins().uextend(types::I64, v),
            _ => v,
        };
        b.ins().store(flags, v, results, off);
        off += 8;
    }
    let status = b.ins().load(types::I32, flags, ctx, Offsets::STATUS);
    b.ins().return_(&[status]);
    b.seal_all_blocks();
    b.finalize(frontend);
}
