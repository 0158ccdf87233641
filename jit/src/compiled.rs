//! Compiling a module ([`compile`], [`compile_funcs`]) and calling what was compiled
//! ([`Compiled::call`]).

use std::sync::{Arc, Mutex};

use cranelift_entity::EntityRef;
use cranelift_jit::{JITBuilder, JITModule};
use cranelift_module::Linkage;
use gradlift_ir::engine::{
    Arg, Argument, Engine, ErrorKind, Hosts, RunError, TapeStats, Val, check_args,
};
use gradlift_ir::{Body, Elem, FuncId, Imm, Inst, Module, Msg, Opcode, Pos, Type};

use crate::abi::slots;
use crate::codegen::{self, Listing};
use crate::error::CompileError;
use crate::helpers::{self, Helper};
use crate::isa;
use crate::runtime::{
    Ctx, HostKind, HostSlot, OK, Workspace, code, code_elem, code_scalar, stack_limit,
};

/// What a call needs of an argument beyond [`Argument`]: its slots.
trait Slots: Argument {
    fn push_slots(&mut self, out: &mut Vec<u64>);
}

impl Slots for Val {
    fn push_slots(&mut self, out: &mut Vec<u64>) {
        match self {
            Val::F64(x) => out.push(x.to_bits()),
            Val::F32(x) => out.push(u64::from(x.to_bits())),
            Val::I64(x) => out.push(*x as u64),
            Val::Bool(x) => out.push(u64::from(*x)),
            Val::F64s(v) => out.extend([v.as_mut_ptr() as u64, v.len() as u64]),
            Val::F32s(v) => out.extend([v.as_mut_ptr() as u64, v.len() as u64]),
            Val::I64s(v) => out.extend([v.as_mut_ptr() as u64, v.len() as u64]),
        }
    }
}

impl Slots for Arg<'_> {
    fn push_slots(&mut self, out: &mut Vec<u64>) {
        match self {
            Arg::F64(x) => out.push(x.to_bits()),
            Arg::F32(x) => out.push(u64::from(x.to_bits())),
            Arg::I64(x) => out.push(*x as u64),
            Arg::Bool(x) => out.push(u64::from(*x)),
            Arg::F64s(v) => out.extend([v.as_ptr() as u64, v.len() as u64]),
            Arg::F32s(v) => out.extend([v.as_ptr() as u64, v.len() as u64]),
            Arg::I64s(v) => out.extend([v.as_ptr() as u64, v.len() as u64]),
            Arg::F64sMut(v) => out.extend([v.as_mut_ptr() as u64, v.len() as u64]),
            Arg::F32sMut(v) => out.extend([v.as_mut_ptr() as u64, v.len() as u64]),
            Arg::I64sMut(v) => out.extend([v.as_mut_ptr() as u64, v.len() as u64]),
        }
    }
}

/// A scalar result of type `ty` from its slot; `None` for a slice.
fn scalar_result(ty: Type, bits: u64) -> Option<Val> {
    Some(match ty {
        Type::F64 => Val::F64(f64::from_bits(bits)),
        Type::F32 => Val::F32(f32::from_bits(bits as u32)),
        Type::I64 => Val::I64(bits as i64),
        Type::Bool => Val::Bool(bits != 0),
        Type::Slice { .. } => return None,
    })
}

/// A trampoline: `(ctx, args, results) -> status`.
type Trampoline = unsafe extern "C" fn(*mut Ctx, *const u64, *mut u64) -> u32;

/// How to call one compiled function from Rust.
#[derive(Copy, Clone)]
struct Entry {
    trampoline: Trampoline,
}

/// The memory holding the generated code. Freed when the [`Compiled`] that owns it
/// is dropped; never touched before then (the mutex only makes the handle `Sync`).
struct CodeMemory(Mutex<Option<JITModule>>);

impl Drop for CodeMemory {
    fn drop(&mut self) {
        let module = match self.0.get_mut() {
            Ok(m) => m.take(),
            Err(poisoned) => poisoned.into_inner().take(),
        };
        if let Some(module) = module {
            // SAFETY: the code memory belongs to the `Compiled` being dropped. Calls
            // into it borrow that `Compiled` for their whole duration, so none is
            // running, and the trampoline pointers die with it.
            unsafe { module.free_memory() };
        }
    }
}

/// A module's functions compiled to native code for the host.
///
/// Immutable once made, and `Send + Sync`: share it between threads (an `Arc`, or
/// a reference in scoped threads) and give each thread its own [`Workspace`].
///
/// ```
/// use gradlift_ir::{interp::Val, parse};
/// let module = parse("
///     func @f(%x: f64, %y: f64) -> f64 {
///     entry:
///         %xx = fmul %x, %x
///         %y3 = fmul 3.0, %y
///         %r = fadd %xx, %y3
///         ret %r
///     }
/// ").unwrap();
/// let compiled = gradlift_jit::compile(&module).unwrap();
/// let mut ws = gradlift_jit::Workspace::new();
/// let f = module.func_by_name("f").unwrap();
/// let out = compiled.call(&mut ws, f, &mut [Val::F64(2.0), Val::F64(1.0)]).unwrap();
/// assert_eq!(out, [Val::F64(7.0)]);
/// ```
pub struct Compiled {
    /// The IR, for names, signatures, messages and source positions.
    module: Module,
    /// The entry of each compiled function, by `FuncId` index.
    entries: Vec<Option<Entry>>,
    /// A bound on the native stack frame of any compiled function.
    frame_margin: usize,
    /// The host functions of the externs called, by `FuncId` index.
    hosts: Box<[Option<HostSlot>]>,
    /// Declared last: dropped after everything that points into it.
    _code: CodeMemory,
}

impl core::fmt::Debug for Compiled {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let names: Vec<&str> = self
            .module
            .funcs
            .iter()
            .filter(|(id, _)| self.is_compiled(*id))
            .map(|(_, d)| d.name.as_str())
            .collect();
        f.debug_struct("Compiled").field("funcs", &names).finish()
    }
}

/// Compiles every defined function of `module` (which must verify).
///
/// Fails on the first function that cannot be compiled: see [`compile_funcs`] to
/// compile only some functions and what they call.
pub fn compile(module: &Module) -> Result<Compiled, CompileError> {
    let roots: Vec<FuncId> = module.defined().map(|(id, _)| id).collect();
    compile_funcs(module, &roots)
}

/// Compiles the functions `roots` and every function they call, directly or not.
/// Those functions must verify; the rest of the module is not looked at.
pub fn compile_funcs(module: &Module, roots: &[FuncId]) -> Result<Compiled, CompileError> {
    compile_with(module, roots, &Hosts::new())
}

/// How functions are compiled: given to [`compile_with_options`] (and
/// [`listing_with_options`],
/// [`compile_object_with_options`](crate::compile_object_with_options)); the
/// other entry points use the default, [`CompileOptions::new`]. How the JIT
/// trades compile time for the speed of the code, which functions it refuses, and
/// whether the tape keeps types.
///
/// ```
/// use gradlift_jit::CompileOptions;
/// let options = CompileOptions::new();
/// assert!(options.tape_checks);
/// assert_eq!(options.quick_above, 20_000);
/// assert_eq!(options.max_insts, 500_000);
/// assert!(!options.with_tape_checks(false).tape_checks);
/// assert_eq!(options.with_max_insts(10).max_insts, 10);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct CompileOptions {
    /// Whether the tape keeps the type of each scalar, so that a `pop` of another
    /// type than was pushed fails as on the interpreter
    /// ([`ErrorKind::TapeMismatch`], at the `pop`, the tape left as it was). On by
    /// default.
    ///
    /// On, `push` also writes a one-byte type tag beside its slot, and `pop`
    /// compares it (one compare, which also finds an empty tape). Off, `push`
    /// writes no tag and `pop` checks only that the tape is not empty
    /// ([`ErrorKind::TapeUnderflow`]): a `pop` of another type reads the slot's 8
    /// bytes as its own type (an `i64` 7 popped as `f64` gives `f64::from_bits(7)`;
    /// an `f32` or a `bool` popped as wider reads its slot's unused bytes too), and
    /// nothing else changes: values, every other error, tape heights and sizes are
    /// the same. Derived code (forward passes and pullbacks) pops exactly the types
    /// it pushed by construction, so for it the check only catches a bug of
    /// gradlift's; without the tags' stores, a gradient whose loops push a scalar
    /// or two per iteration runs up to about 10% faster (`BENCHMARKS.md`).
    ///
    /// The tags belong to the tape: code that pushes and code that pops on one
    /// [`Workspace`] must agree on this setting. A checked `pop` of a scalar pushed
    /// by unchecked code reads whatever tag its slot had last, and may fail where
    /// nothing is wrong (a forward pass and its pullback are compiled together, so
    /// a rule always agrees with itself).
    pub tape_checks: bool,
    /// A function whose Cranelift IR has more instructions than this is compiled
    /// with Cranelift's quick settings (no e-graph optimisation, the single-pass
    /// register allocator): its compile time and memory then grow linearly with
    /// its size, where the optimising settings' grow faster (a function of 10^4
    /// branches takes seconds, one of 10^5 minutes), at the price of slower code
    /// (more spills and moves). Default 20,000, a few thousand IR instructions:
    /// hand-written and traced functions are far below it; large unrolled traces
    /// and the derived code of very branchy functions are above.
    pub quick_above: usize,
    /// A function of more IR statements than this (phis, instructions and
    /// terminators) is refused with [`CompileError::TooLarge`] before anything is
    /// compiled. Default 500,000: 2.5 times what the parser accepts by default
    /// (`gradlift_ir::ParseOptions`), room for the derived code of a function of
    /// that size. The quick settings compile about 50,000 instructions a second;
    /// much larger functions also risk native frames larger than the stack.
    pub max_insts: usize,
}

impl Default for CompileOptions {
    fn default() -> CompileOptions {
        CompileOptions::new()
    }
}

impl CompileOptions {
    /// The default options: tape checks on, quick settings above 20,000 Cranelift
    /// instructions, functions of up to 500,000 statements.
    pub fn new() -> CompileOptions {
        CompileOptions {
            tape_checks: true,
            quick_above: 20_000,
            max_insts: 500_000,
        }
    }

    /// The same options with tape checks on or off
    /// ([`CompileOptions::tape_checks`]).
    pub fn with_tape_checks(mut self, on: bool) -> CompileOptions {
        self.tape_checks = on;
        self
    }

    /// The same options with [`quick_above`](Self::quick_above) set: `0` compiles
    /// every function quickly, `usize::MAX` none.
    pub fn with_quick_above(mut self, insts: usize) -> CompileOptions {
        self.quick_above = insts;
        self
    }

    /// The same options with [`max_insts`](Self::max_insts) set.
    pub fn with_max_insts(mut self, insts: usize) -> CompileOptions {
        self.max_insts = insts;
        self
    }
}

/// Compiles the functions `roots` and every function they call, as
/// [`compile_funcs`], with host functions for the `extern` functions they call
/// (see [`Hosts`]). Calling an extern that has no host function is a
/// [`CompileError::UnboundExtern`].
pub fn compile_with(
    module: &Module,
    roots: &[FuncId],
    hosts: &Hosts,
) -> Result<Compiled, CompileError> {
    compile_with_options(module, roots, hosts, &CompileOptions::new())
}

/// [`compile_with`] with [`CompileOptions`].
///
/// ```
/// use gradlift_ir::{interp::Val, parse};
/// use gradlift_jit::{CompileError, CompileOptions, Hosts, Workspace, compile_with_options};
/// let module = parse("
///     func @f(%k: i64) -> f64 {
///     entry:
///         push %k
///         %x = pop f64
///         ret %x
///     }
/// ").unwrap();
/// let f = module.func_by_name("f").unwrap();
/// let mut ws = Workspace::new();
/// let checked = compile_with_options(&module, &[f], &Hosts::new(), &CompileOptions::new()).unwrap();
/// let e = checked.call(&mut ws, f, &mut [Val::I64(7)]).unwrap_err();
/// assert_eq!(e.to_string(), "in @f, pop at 5:9: pop f64 found an i64 on the tape");
/// ws.reset_tape();
/// let fast = CompileOptions::new().with_tape_checks(false);
/// let unchecked = compile_with_options(&module, &[f], &Hosts::new(), &fast).unwrap();
/// let out = unchecked.call(&mut ws, f, &mut [Val::I64(7)]).unwrap();
/// assert_eq!(out, [Val::F64(f64::from_bits(7))]);
/// // Functions over `max_insts` statements are refused before anything is compiled.
/// let small = CompileOptions::new().with_max_insts(2);
/// let err = compile_with_options(&module, &[f], &Hosts::new(), &small);
/// assert!(matches!(err, Err(CompileError::TooLarge { insts: 3, limit: 2, .. })));
/// ```
pub fn compile_with_options(
    module: &Module,
    roots: &[FuncId],
    hosts: &Hosts,
    options: &CompileOptions,
) -> Result<Compiled, CompileError> {
    let funcs = codegen::prepare(module, roots, options)?;
    let host_table = host_table(module, &funcs, hosts)?;
    let isas = isa::host_isa()?;
    let mut builder = JITBuilder::with_isa(isas.speed, cranelift_module::default_libcall_names());
    for h in Helper::all() {
        builder.symbol(h.name(), h.addr());
    }
    for (name, addr) in helpers::libcalls() {
        builder.symbol(name, addr);
    }
    let mut jm = JITModule::new(builder);
    let defined = codegen::define(
        &mut jm,
        &*isas.quick,
        options,
        module,
        &funcs,
        Linkage::Local,
        None,
    )?;
    jm.finalize_definitions()
        .map_err(|e| codegen::codegen(None, e))?;

    let mut entries = vec![None; module.funcs.len()];
    for (f, id) in defined.trampolines {
        let ptr = jm.get_finalized_function(id);
        // SAFETY: `ptr` is the finalized code of a trampoline generated with
        // `abi::trampoline_signature` in the ISA's default calling convention, which
        // is the C calling convention of the host for these parameter types
        // (`extern "C"`): three pointer-sized integers in, an `i32` out.
        let trampoline = unsafe { core::mem::transmute::<*const u8, Trampoline>(ptr) };
        entries[f.index()] = Some(Entry { trampoline });
    }
    Ok(Compiled {
        module: module.clone(),
        entries,
        frame_margin: defined.frame_margin,
        hosts: host_table,
        _code: CodeMemory(Mutex::new(Some(jm))),
    })
}

/// The host function of every extern that `funcs` call, by `FuncId` index.
fn host_table(
    module: &Module,
    funcs: &[FuncId],
    hosts: &Hosts,
) -> Result<Box<[Option<HostSlot>]>, CompileError> {
    let mut table: Vec<Option<HostSlot>> = Vec::new();
    table.resize_with(module.funcs.len(), || None);
    for &f in funcs {
        let Some(body) = module.function(f) else {
            continue;
        };
        for (_, inst) in body.placed_insts() {
            let data = &body.insts[inst];
            let (Opcode::Call, Imm::Func(g)) = (data.opcode, data.imm) else {
                continue;
            };
            let Some(decl) = module.funcs.get(g) else {
                continue;
            };
            if !matches!(decl.body, Body::Extern) || table[g.index()].is_some() {
                continue;
            }
            // Either kind of host function: copying (`Hosts::bind`) or borrowing
            // (`Hosts::bind_args`).
            let host = match (hosts.get(&decl.name), hosts.get_args(&decl.name)) {
                (Some(f), _) => HostKind::Copied(Arc::clone(f)),
                (None, Some(f)) => HostKind::Borrowed(Arc::clone(f)),
                (None, None) => {
                    return Err(CompileError::UnboundExtern {
                        name: decl.name.clone(),
                        caller: module.name(f).to_string(),
                        pos: body.srcmap.insts.get(inst).copied().unwrap_or(Pos::NONE),
                    });
                }
            };
            table[g.index()] = Some(HostSlot {
                name: decl.name.clone(),
                sig: decl.sig.clone(),
                f: host,
            });
        }
    }
    Ok(table.into_boxed_slice())
}

/// The Cranelift IR and the host machine code of `roots` and every function they
/// call (each followed by its trampolines), for reading: what `gradlift dump --stage
/// clif` and `--stage asm` print. Nothing is made callable.
///
/// ```
/// let module = gradlift_ir::parse("
///     func @twice(%x: f64) -> f64 {
///     entry:
///         %y = fadd %x, %x
///         ret %y
///     }
/// ").unwrap();
/// let f = module.func_by_name("twice").unwrap();
/// let listing = gradlift_jit::listing(&module, &[f]).unwrap();
/// assert_eq!(listing[0].name, "twice");
/// assert!(listing[0].clif.contains("fadd"));
/// assert!(!listing[0].asm.is_empty());
/// ```
pub fn listing(module: &Module, roots: &[FuncId]) -> Result<Vec<Listing>, CompileError> {
    listing_with_options(module, roots, &CompileOptions::new())
}

/// [`listing`] of the code [`compile_with_options`] makes with `options`.
pub fn listing_with_options(
    module: &Module,
    roots: &[FuncId],
    options: &CompileOptions,
) -> Result<Vec<Listing>, CompileError> {
    let funcs = codegen::prepare(module, roots, options)?;
    let isas = isa::host_isa()?;
    let mut builder = JITBuilder::with_isa(isas.speed, cranelift_module::default_libcall_names());
    for h in Helper::all() {
        builder.symbol(h.name(), h.addr());
    }
    for (name, addr) in helpers::libcalls() {
        builder.symbol(name, addr);
    }
    let mut jm = JITModule::new(builder);
    let mut out = Vec::new();
    let defined = codegen::define(
        &mut jm,
        &*isas.quick,
        options,
        module,
        &funcs,
        Linkage::Local,
        Some(&mut out),
    );
    // SAFETY: nothing was finalized, so no code of this module can run or be
    // referred to.
    unsafe { jm.free_memory() };
    defined?;
    Ok(out)
}

impl Compiled {
    /// The module the functions were compiled from.
    pub fn module(&self) -> &Module {
        &self.module
    }

    /// Whether `func` was compiled.
    pub fn is_compiled(&self, func: FuncId) -> bool {
        self.entries.get(func.index()).is_some_and(Option::is_some)
    }

    /// Calls the function named `name` (without `@`); see [`Compiled::call`].
    pub fn call_by_name(
        &self,
        ws: &mut Workspace,
        name: &str,
        args: &mut [Val],
    ) -> Result<Vec<Val>, RunError> {
        match self.module.func_by_name(name) {
            Some(id) => self.call(ws, id, args),
            None => Err(RunError::refused(
                name,
                ErrorKind::BadArguments(format!("the module has no function @{name}")),
            )),
        }
    }

    /// Calls `func` with `args`, as [`Interpreter::call`](gradlift_ir::interp::Interpreter::call)
    /// does: the arguments must fit the signature (one per parameter, a scalar of
    /// the parameter's type or a slice of its element type), else
    /// [`ErrorKind::BadArguments`]; `mut` slices are written in place (also when
    /// the call fails: stores made before the error stay); returned slices come
    /// back as copies.
    ///
    /// Runtime errors of the generated code (out of bounds, division by zero, a
    /// negative `alloc`, the depth limit, `trap_if`) are `Err`s naming the function
    /// and the op; the workspace is ready for the next call afterwards.
    pub fn call(
        &self,
        ws: &mut Workspace,
        func: FuncId,
        args: &mut [Val],
    ) -> Result<Vec<Val>, RunError> {
        let mut out = Vec::new();
        self.call_into(ws, func, args, &mut out)?;
        Ok(out)
    }

    /// [`Compiled::call`], with the results written into `out` (cleared first). A
    /// call whose results are scalars allocates nothing once `out`, the
    /// workspace's buffers and its tape have grown to size: the form for calls in a
    /// loop.
    ///
    /// ```
    /// use gradlift_ir::{interp::Val, parse};
    /// let module = parse("
    ///     func @sq(%x: f64) -> f64 {
    ///     entry:
    ///         %y = fmul %x, %x
    ///         ret %y
    ///     }
    /// ").unwrap();
    /// let compiled = gradlift_jit::compile(&module).unwrap();
    /// let sq = module.func_by_name("sq").unwrap();
    /// let mut ws = gradlift_jit::Workspace::new();
    /// let mut out = Vec::new();
    /// for k in 0..3 {
    ///     compiled.call_into(&mut ws, sq, &mut [Val::F64(k as f64)], &mut out).unwrap();
    ///     assert_eq!(out, [Val::F64((k * k) as f64)]);
    /// }
    /// ```
    pub fn call_into(
        &self,
        ws: &mut Workspace,
        func: FuncId,
        args: &mut [Val],
        out: &mut Vec<Val>,
    ) -> Result<(), RunError> {
        out.clear();
        let (name, sig) = self.invoke(ws, func, args)?;
        let mut k = 0;
        for &ty in &sig.results {
            let bits = ws.results[k];
            let val = match scalar_result(ty, bits) {
                Some(v) => v,
                None => {
                    let elem = ty.elem().unwrap_or(Elem::F64);
                    let (ptr, len) = (bits as usize, ws.results[k + 1] as usize);
                    k += 1;
                    read_slice(&ws.ctx, args, elem, ptr, len).ok_or_else(|| {
                        refuse(
                            name,
                            ErrorKind::Internal(format!(
                                "@{name} returned a slice outside its arguments"
                            )),
                        )
                    })?
                }
            };
            k += 1;
            out.push(val);
        }
        Ok(())
    }

    /// [`Compiled::call_into`] with borrowed arguments ([`Arg`]): slices are passed
    /// as they are, never copied, so a call costs what the generated code costs.
    /// A read-only slice ([`Arg::F64s`]) fits a `[T]` parameter; a `mut` one
    /// ([`Arg::F64sMut`]) fits `[T]` and `mut [T]`. Functions that return slices
    /// are refused ([`ErrorKind::BadArguments`]): use [`Compiled::call_into`].
    ///
    /// ```
    /// use gradlift_ir::{interp::Val, parse};
    /// use gradlift_jit::Arg;
    /// let module = parse("
    ///     func @scale(%x: [f64], %y: mut [f64], %a: f64) -> f64 {
    ///     entry:
    ///         %x0 = load %x[0]
    ///         %y0 = fmul %a, %x0
    ///         store %y[0], %y0
    ///         ret %y0
    ///     }
    /// ").unwrap();
    /// let compiled = gradlift_jit::compile(&module).unwrap();
    /// let f = module.func_by_name("scale").unwrap();
    /// let (x, mut y) = ([3.0], [0.0]);
    /// let mut out = Vec::new();
    /// let mut args = [Arg::F64s(&x), Arg::F64sMut(&mut y), Arg::F64(2.0)];
    /// compiled.call_args(&mut gradlift_jit::Workspace::new(), f, &mut args, &mut out).unwrap();
    /// assert_eq!((out, y), (vec![Val::F64(6.0)], [6.0]));
    /// ```
    pub fn call_args(
        &self,
        ws: &mut Workspace,
        func: FuncId,
        args: &mut [Arg<'_>],
        out: &mut Vec<Val>,
    ) -> Result<(), RunError> {
        out.clear();
        if let Some(decl) = self.module.funcs.get(func)
            && decl.sig.results.iter().any(|t| t.is_slice())
        {
            let name = decl.name.as_str();
            let kind = ErrorKind::BadArguments(format!(
                "@{name} returns a slice: call it with `call_into`"
            ));
            return Err(refuse(name, kind));
        }
        let (_, sig) = self.invoke(ws, func, args)?;
        // Scalars only (one slot each): slice results were refused above.
        for (&ty, &bits) in sig.results.iter().zip(&ws.results) {
            out.extend(scalar_result(ty, bits));
        }
        Ok(())
    }

    /// Checks `args` against `func`'s signature and calls it; the results are in
    /// the workspace's result slots. Returns the function's name and signature.
    fn invoke<A: Slots>(
        &self,
        ws: &mut Workspace,
        func: FuncId,
        args: &mut [A],
    ) -> Result<(&str, &gradlift_ir::Signature), RunError> {
        let Some(decl) = self.module.funcs.get(func) else {
            return Err(refuse(
                &func.to_string(),
                ErrorKind::BadArguments(format!("the module has no function {func}")),
            ));
        };
        let name = decl.name.as_str();
        let Some(entry) = self.entries.get(func.index()).copied().flatten() else {
            return Err(refuse(name, ErrorKind::NotCompiled(name.to_string())));
        };
        let sig = &decl.sig;
        check_args(name, sig, args).map_err(|k| refuse(name, k))?;
        if ws.max_depth == 0 {
            return Err(refuse(name, ErrorKind::RecursionLimit(0)));
        }

        ws.args.clear();
        for arg in args.iter_mut() {
            arg.push_slots(&mut ws.args);
        }
        ws.results.clear();
        ws.results.resize(slots(&sig.results), 0);

        let here = 0u8;
        let sp = core::ptr::addr_of!(here) as usize;
        let limit = stack_limit(sp, self.frame_margin);
        if sp <= limit {
            return Err(refuse(name, ErrorKind::StackExhausted(0)));
        }
        let max_depth = u64::try_from(ws.max_depth).unwrap_or(u64::MAX);
        ws.ctx.reset(max_depth, limit);
        ws.ctx.hosts_ptr = self.hosts.as_ptr() as usize;
        ws.ctx.hosts_len = self.hosts.len();
        let ctx: *mut Ctx = &mut *ws.ctx;
        // SAFETY: the trampoline was generated for `func`'s signature: it reads
        // `slots(params)` slots from `args`, exactly what was pushed above (the count
        // and types were checked, `Slots::fits`), and writes `slots(results)` slots,
        // the length of `results`. The slices it passes on are borrowed through
        // `args` for the whole call and not touched by Rust until it returns;
        // generated code checks every index against their lengths before any access
        // and stores only through `mut` parameters (the IR verifier's rule, checked
        // at compile time), which only exclusively borrowed slices fit (`Val`s' own
        // vectors, `Arg::*Mut`). `ctx` is the workspace's boxed context, exclusively
        // borrowed through `ws` and not used by Rust during the call; the native
        // stack has room for `max_depth` frames or the calls check it
        // (`stack_limit`). The code memory lives as long as `self`.
        let status = unsafe { (entry.trampoline)(ctx, ws.args.as_ptr(), ws.results.as_mut_ptr()) };
        ws.ctx.hosts_ptr = 0;
        ws.ctx.hosts_len = 0;
        ws.ctx.note_tape();
        ws.ctx.coalesce_arena();
        if status != OK {
            return Err(self.runtime_error(&mut ws.ctx));
        }
        Ok((name, sig))
    }

    /// The error the context holds after a call that failed.
    fn runtime_error(&self, ctx: &mut Ctx) -> RunError {
        let site = ErrorSite {
            status: ctx.status,
            func: ctx.err_func,
            inst: ctx.err_inst,
            a: ctx.err_a,
            b: ctx.err_b,
        };
        decode_error(&self.module, site, ctx.host_error.take())
    }
}

/// A compiled module with a workspace: the JIT as an [`Engine`]
/// ([`Compiled::engine`]), for code written once over both engines, such as the
/// rule calling convention (`gradlift_adjoint::run_rule`). Functions that return
/// slices are refused by [`Engine::call_args`] here, as by [`Compiled::call_args`].
#[derive(Debug)]
pub struct JitEngine<'a> {
    compiled: &'a Compiled,
    ws: &'a mut Workspace,
}

impl Compiled {
    /// This compiled code as an [`Engine`] calling with `ws`.
    pub fn engine<'a>(&'a self, ws: &'a mut Workspace) -> JitEngine<'a> {
        JitEngine { compiled: self, ws }
    }
}

impl Engine for JitEngine<'_> {
    fn call_args(
        &mut self,
        func: FuncId,
        args: &mut [Arg<'_>],
        out: &mut Vec<Val>,
    ) -> Result<(), RunError> {
        self.compiled.call_args(self.ws, func, args, out)
    }

    fn tape(&self) -> TapeStats {
        self.ws.tape()
    }

    fn reset_tape(&mut self) {
        self.ws.reset_tape();
    }
}

/// What a failed call left in the context's error fields (`status`, `err_func`,
/// `err_inst`, `err_a`, `err_b`): in Rust's `Ctx`, or printed by a C program that
/// linked an object file.
#[doc(hidden)]
#[derive(Copy, Clone, Debug)]
pub struct ErrorSite {
    /// The error code.
    pub status: u32,
    /// The failing function's `FuncId` index.
    pub func: u32,
    /// The failing instruction's `Inst` index.
    pub inst: u32,
    /// The first payload.
    pub a: i64,
    /// The second payload.
    pub b: i64,
}

/// The [`RunError`] for an error site of code compiled from `module` (with the host
/// function's (name, message) for a failed extern call).
#[doc(hidden)]
pub fn decode_error(module: &Module, site: ErrorSite, host: Option<(String, String)>) -> RunError {
    let fid = FuncId::new(site.func as usize);
    let Some(decl) = module.funcs.get(fid) else {
        return refuse(
            "",
            ErrorKind::Internal(format!("an error in no function ({})", site.func)),
        );
    };
    let func = decl.function();
    let inst = Inst::new(site.inst as usize);
    let (a, b) = (site.a, site.b);
    let kind = match site.status {
        code::OUT_OF_BOUNDS => ErrorKind::OutOfBounds {
            index: a,
            len: b as usize,
        },
        code::DIVISION_BY_ZERO => ErrorKind::DivisionByZero,
        code::NEGATIVE_ALLOC => ErrorKind::NegativeAlloc(a),
        code::ALLOC_FAILED => ErrorKind::AllocFailed(a),
        code::RECURSION_LIMIT => ErrorKind::RecursionLimit(a as usize),
        code::STACK_EXHAUSTED => ErrorKind::StackExhausted(a as usize),
        code::TAPE_UNDERFLOW => ErrorKind::TapeUnderflow,
        code::TAPE_FULL => ErrorKind::TapeFull(a as usize),
        code::TAPE_MISMATCH => match (code_scalar(a as u64), code_scalar(b as u64)) {
            (Some(expected), Some(found)) => ErrorKind::TapeMismatch { expected, found },
            _ => ErrorKind::Internal(format!("a tape slot tagged {b} popped as {a}")),
        },
        code::NO_TAPE_BUFFER => ErrorKind::NoTapeBuffer {
            elem: code_elem(b as u64).unwrap_or(Elem::F64),
            handle: a,
        },
        code::TAPE_BUFFER_MISMATCH => ErrorKind::TapeBufferMismatch {
            handle: a,
            expected: code_elem(b as u64 / 16).unwrap_or(Elem::F64),
            found: code_elem(b as u64 % 16).unwrap_or(Elem::F64),
        },
        code::EXTERN_FAILED => {
            let (name, message) = host.unwrap_or_default();
            ErrorKind::ExternFailed { name, message }
        }
        code::TRAP => match func.and_then(|f| f.message(Msg::new(a as usize))) {
            Some(m) => ErrorKind::Trap(m.to_string()),
            None => ErrorKind::Internal(format!("trap_if with no message {a}")),
        },
        s => ErrorKind::Internal(format!("unknown error code {s}")),
    };
    RunError::at_inst(&decl.name, func, inst, kind)
}

fn refuse(name: &str, kind: ErrorKind) -> RunError {
    RunError::refused(name, kind)
}

/// A copy of the returned slice (`ptr`, `len`) of `elem`s, if it lies inside one of
/// the argument buffers or the arena (verified code returns only those).
fn read_slice(ctx: &Ctx, args: &[Val], elem: Elem, ptr: usize, len: usize) -> Option<Val> {
    let size = match elem {
        Elem::F64 | Elem::I64 => 8,
        Elem::F32 => 4,
    };
    let bytes = len.checked_mul(size)?;
    let end = ptr.checked_add(bytes)?;
    if !ptr.is_multiple_of(size) || ptr == 0 {
        return None;
    }
    let inside = |start: usize, n: usize| ptr >= start && end <= start + n * size;
    let in_args = args.iter().any(|a| match (a, elem) {
        (Val::F64s(v), Elem::F64) => inside(v.as_ptr() as usize, v.len()),
        (Val::F32s(v), Elem::F32) => inside(v.as_ptr() as usize, v.len()),
        (Val::I64s(v), Elem::I64) => inside(v.as_ptr() as usize, v.len()),
        _ => false,
    });
    if !in_args && !ctx.arena_contains(ptr, bytes) && !ctx.tape_contains(ptr, bytes) {
        return None;
    }
    // SAFETY: `len` elements of `elem` from `ptr` lie inside a live buffer (an
    // argument `Vec` of that element type, or a chunk of the arena, whose bytes are
    // all initialised), and `ptr` is aligned for the element.
    Some(unsafe {
        match elem {
            Elem::F64 => Val::F64s(core::slice::from_raw_parts(ptr as *const f64, len).to_vec()),
            Elem::F32 => Val::F32s(core::slice::from_raw_parts(ptr as *const f32, len).to_vec()),
            Elem::I64 => Val::I64s(core::slice::from_raw_parts(ptr as *const i64, len).to_vec()),
        }
    })
}
