//! Object files: IR functions compiled for a target machine (aarch64 Linux, or
//! x86-64) into a relocatable ELF object with cranelift-object, to be linked into a
//! program by the system linker ([`compile_object`]).
//!
//! The code is the JIT's (the same [`codegen::define`] over an `ObjectModule`
//! instead of a `JITModule`), so the ABI is the JIT's (see the crate docs): the
//! object exports one trampoline per compiled function,
//! `uint32_t gradlift_entry{index}(ctx, const uint64_t *args, uint64_t *results)`
//! (`index` the function's [`FuncId`] index), the functions themselves are local,
//! and the Rust helpers generated code calls (the math functions, the slow paths of
//! the arena and the tape, and `gradlift_call_host` for calls to `extern` functions:
//! [`ObjectFile::imports`]) are undefined symbols the program must define.
//!
//! The code is not position independent (as for the JIT): link it into a
//! non-PIE executable (`gcc -static` or `gcc -no-pie`).

use cranelift_module::{Linkage, Module as ClModule};
use cranelift_object::{ObjectBuilder, ObjectModule};
use gradlift_ir::{FuncId, Module};
use target_lexicon::{Architecture, BinaryFormat, Triple};

use crate::codegen;
use crate::compiled::CompileOptions;
use crate::error::CompileError;
use crate::isa;

/// A relocatable object file made by [`compile_object`].
#[derive(Clone, Debug)]
pub struct ObjectFile {
    /// The file's bytes (an ELF relocatable object for the target).
    pub bytes: Vec<u8>,
    /// Each compiled function and the symbol of its trampoline
    /// (`gradlift_entry{index}`), exported: what a program calls.
    pub entries: Vec<(FuncId, String)>,
    /// The undefined symbols the code calls, sorted: the Rust helpers
    /// (`gradlift_sin_f64`, `gradlift_arena_grow`, `gradlift_tape_alloc`, ...), which
    /// the program must define with the semantics of the JIT's helpers, and
    /// `gradlift_call_host(ctx, func, args, results) -> status` when an `extern` is
    /// called (`func` its `FuncId` index, the slots laid out as the trampolines'). Where the target has no
    /// instruction for a float operation, Cranelift may also call the C library
    /// (`floor`, `ceil`, `fma`, ... on x86-64 without SSE4.1); those are not listed.
    pub imports: Vec<String>,
}

/// Compiles `roots` and every function they call (which must verify) for the
/// machine `triple` into a relocatable object file.
///
/// Supported targets: ELF on aarch64 and x86-64 (`aarch64-unknown-linux-gnu`,
/// `x86_64-unknown-linux-gnu`); others are refused with
/// [`CompileError::Codegen`]. Functions the JIT refuses are refused here too;
/// `extern` functions need no [`Hosts`](crate::Hosts): the program that links the
/// object answers their calls in `gradlift_call_host`.
///
/// ```
/// use gradlift_jit::compile_object;
/// let module = gradlift_ir::parse("
///     func @f(%x: f64, %y: f64) -> f64 {
///     entry:
///         %xx = fmul %x, %x
///         %s = sin %y
///         %r = fadd %xx, %s
///         ret %r
///     }
/// ").unwrap();
/// let f = module.func_by_name("f").unwrap();
/// let triple = "aarch64-unknown-linux-gnu".parse().unwrap();
/// let obj = compile_object(&module, &[f], triple).unwrap();
/// assert_eq!(&obj.bytes[..4], b"\x7fELF");
/// assert_eq!(obj.entries, [(f, "gradlift_entry0".to_string())]);
/// assert_eq!(obj.imports, ["gradlift_sin_f64"]);
///
/// let windows = "x86_64-pc-windows-msvc".parse().unwrap();
/// assert!(compile_object(&module, &[f], windows).is_err());
/// ```
pub fn compile_object(
    module: &Module,
    roots: &[FuncId],
    triple: Triple,
) -> Result<ObjectFile, CompileError> {
    compile_object_with_options(module, roots, triple, &CompileOptions::new())
}

/// [`compile_object`] with [`CompileOptions`].
pub fn compile_object_with_options(
    module: &Module,
    roots: &[FuncId],
    triple: Triple,
    options: &CompileOptions,
) -> Result<ObjectFile, CompileError> {
    let supported = matches!(
        triple.architecture,
        Architecture::Aarch64(_) | Architecture::X86_64
    ) && triple.binary_format == BinaryFormat::Elf;
    if !supported {
        return Err(CompileError::Codegen {
            func: None,
            message: format!(
                "unsupported target for object files: {triple} (ELF on aarch64 or x86-64 only)"
            ),
        });
    }
    let funcs = codegen::prepare(module, roots, options)?;
    let isas = isa::isa_for(triple)?;
    let builder = ObjectBuilder::new(
        isas.speed,
        "gradlift",
        cranelift_module::default_libcall_names(),
    )
    .map_err(|e| codegen::codegen(None, e))?;
    let mut om = ObjectModule::new(builder);
    let defined = codegen::define(
        &mut om,
        &*isas.quick,
        options,
        module,
        &funcs,
        Linkage::Export,
        None,
    )?;
    let mut imports: Vec<String> = om
        .declarations()
        .get_functions()
        .filter(|(_, d)| d.linkage == Linkage::Import)
        .filter_map(|(_, d)| d.name.clone())
        .collect();
    imports.sort();
    imports.dedup();
    let entries = defined
        .trampolines
        .iter()
        .map(|&(f, id)| {
            let name = om.declarations().get_function_decl(id).linkage_name(id);
            (f, name.into_owned())
        })
        .collect();
    let bytes = om.finish().emit().map_err(|e| CompileError::Codegen {
        func: None,
        message: format!("writing the object file: {e}"),
    })?;
    Ok(ObjectFile {
        bytes,
        entries,
        imports,
    })
}
