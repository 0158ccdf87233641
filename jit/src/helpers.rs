//! Rust functions that generated code calls, registered as JIT symbols by name.
//!
//! The math functions are the very `std` functions the interpreter calls (`f64::sin`,
//! `f32::powf`, ...; `powi` with the interpreter's fallback to `powf` beyond `i32`),
//! so compiled code computes the same bits. The arena functions are the slow paths
//! of `alloc`.

use cranelift_codegen::ir::{AbiParam, Signature, Type, types};
use cranelift_codegen::isa::CallConv;

use crate::runtime::Ctx;

/// A Rust function that generated code may call.
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug)]
pub(crate) enum Helper {
    /// `f(x) -> y` on `f64`, a math function of `std`.
    F64Unary(MathFn),
    /// `f(x) -> y` on `f32`.
    F32Unary(MathFn),
    /// `x.powf(y)` on `f64`.
    PowF64,
    /// `x.powf(y)` on `f32`.
    PowF32,
    /// `powi x, n` on `f64` (`n` an `i64`).
    PowiF64,
    /// `powi x, n` on `f32`.
    PowiF32,
    /// `arena_grow(ctx, n, size) -> ptr` (0 when the memory cannot be had).
    ArenaGrow,
    /// `arena_restore(ctx, chunk, used)`.
    ArenaRestore,
    /// `memzero(ptr, bytes)`.
    MemZero,
    /// `tape_grow(ctx) -> ok` (0 when the memory cannot be had), the slow path of
    /// `push`.
    TapeGrow,
    /// `tape_alloc(ctx, n, elem_code) -> handle` (-1 when the memory cannot be had).
    TapeAlloc,
    /// `call_host(ctx, func_index, args, results) -> status`: a host function.
    CallHost,
}

/// A one-argument math function of the IR that has no Cranelift instruction.
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug)]
pub(crate) enum MathFn {
    Sin,
    Cos,
    Tan,
    Tanh,
    Exp,
    Log,
}

impl MathFn {
    const ALL: [MathFn; 6] = [
        MathFn::Sin,
        MathFn::Cos,
        MathFn::Tan,
        MathFn::Tanh,
        MathFn::Exp,
        MathFn::Log,
    ];
}

macro_rules! unary {
    ($name:ident, $t:ty, $f:ident) => {
        extern "C" fn $name(x: $t) -> $t {
            x.$f()
        }
    };
}

unary!(sin_f64, f64, sin);
unary!(cos_f64, f64, cos);
unary!(tan_f64, f64, tan);
unary!(tanh_f64, f64, tanh);
unary!(exp_f64, f64, exp);
unary!(log_f64, f64, ln);
unary!(sin_f32, f32, sin);
unary!(cos_f32, f32, cos);
unary!(tan_f32, f32, tan);
unary!(tanh_f32, f32, tanh);
unary!(exp_f32, f32, exp);
unary!(log_f32, f32, ln);

extern "C" fn pow_f64(x: f64, y: f64) -> f64 {
    x.powf(y)
}

extern "C" fn pow_f32(x: f32, y: f32) -> f32 {
    x.powf(y)
}

extern "C" fn powi_f64(x: f64, n: i64) -> f64 {
    match i32::try_from(n) {
        Ok(n) => x.powi(n),
        Err(_) => x.powf(n as f64),
    }
}

extern "C" fn powi_f32(x: f32, n: i64) -> f32 {
    match i32::try_from(n) {
        Ok(n) => x.powi(n),
        Err(_) => x.powf(n as f32),
    }
}

/// # Safety
/// `ctx` is the context of the running call (generated code passes its own).
unsafe extern "C" fn arena_grow(ctx: *mut Ctx, n: u64, size: u64) -> usize {
    // SAFETY: generated code passes the `Ctx` it was called with, which the
    // workspace lends exclusively to the running call; no Rust reference to it is
    // alive while compiled code runs.
    let ctx = unsafe { &mut *ctx };
    ctx.arena_grow(n, size)
}

/// # Safety
/// As [`arena_grow`].
unsafe extern "C" fn arena_restore(ctx: *mut Ctx, chunk: usize, used: usize) {
    // SAFETY: as in `arena_grow`.
    let ctx = unsafe { &mut *ctx };
    ctx.arena_restore(chunk, used);
}

/// # Safety
/// `bytes` bytes from `ptr` are writable memory of the arena.
unsafe extern "C" fn memzero(ptr: *mut u8, bytes: usize) {
    // SAFETY: generated code passes a block it just took from the arena's current
    // chunk, `bytes` long and inside the chunk (checked before the call).
    unsafe { core::ptr::write_bytes(ptr, 0, bytes) };
}

/// A cold helper ([`Helper::is_cold`]): the Windows x64 convention on x86-64.
///
/// # Safety
/// As [`arena_grow`].
#[cfg(target_arch = "x86_64")]
unsafe extern "win64" fn tape_grow(ctx: *mut Ctx) -> usize {
    // SAFETY: as in `arena_grow`.
    let ctx = unsafe { &mut *ctx };
    usize::from(ctx.tape_grow())
}

/// # Safety
/// As [`arena_grow`].
#[cfg(not(target_arch = "x86_64"))]
unsafe extern "C" fn tape_grow(ctx: *mut Ctx) -> usize {
    // SAFETY: as in `arena_grow`.
    let ctx = unsafe { &mut *ctx };
    usize::from(ctx.tape_grow())
}

/// # Safety
/// As [`arena_grow`].
unsafe extern "C" fn tape_alloc(ctx: *mut Ctx, n: u64, elem: u64) -> i64 {
    // SAFETY: as in `arena_grow`.
    let ctx = unsafe { &mut *ctx };
    match crate::runtime::code_elem(elem) {
        Some(e) => ctx.tape_alloc(n, e).unwrap_or(-1),
        None => -1,
    }
}

/// # Safety
/// `ctx` as in [`arena_grow`]; `args` holds the argument slots of the extern
/// `func` (its signature's slots), `results` room for its result slots, and the
/// slices among the arguments are live buffers of their lengths (`mut` ones
/// writable), as generated code guarantees.
unsafe extern "C" fn call_host(
    ctx: *mut Ctx,
    func: u64,
    args: *const u64,
    results: *mut u64,
) -> u32 {
    // SAFETY: as in `arena_grow`.
    let ctx = unsafe { &mut *ctx };
    // SAFETY: the caller's contract, passed on.
    match unsafe { crate::runtime::call_host(ctx, func as usize, args, results) } {
        Ok(()) => crate::runtime::OK,
        Err(e) => {
            ctx.host_error = Some(e);
            crate::runtime::code::EXTERN_FAILED
        }
    }
}

impl Helper {
    /// Every helper, for registering the symbols.
    pub(crate) fn all() -> Vec<Helper> {
        let mut all = Vec::new();
        for f in MathFn::ALL {
            all.push(Helper::F64Unary(f));
            all.push(Helper::F32Unary(f));
        }
        all.extend([
            Helper::PowF64,
            Helper::PowF32,
            Helper::PowiF64,
            Helper::PowiF32,
            Helper::ArenaGrow,
            Helper::ArenaRestore,
            Helper::MemZero,
            Helper::TapeGrow,
            Helper::TapeAlloc,
            Helper::CallHost,
        ]);
        all
    }

    /// The symbol name.
    pub(crate) fn name(self) -> &'static str {
        use MathFn::*;
        match self {
            Helper::F64Unary(f) => match f {
                Sin => "gradlift_sin_f64",
                Cos => "gradlift_cos_f64",
                Tan => "gradlift_tan_f64",
                Tanh => "gradlift_tanh_f64",
                Exp => "gradlift_exp_f64",
                Log => "gradlift_log_f64",
            },
            Helper::F32Unary(f) => match f {
                Sin => "gradlift_sin_f32",
                Cos => "gradlift_cos_f32",
                Tan => "gradlift_tan_f32",
                Tanh => "gradlift_tanh_f32",
                Exp => "gradlift_exp_f32",
                Log => "gradlift_log_f32",
            },
            Helper::PowF64 => "gradlift_pow_f64",
            Helper::PowF32 => "gradlift_pow_f32",
            Helper::PowiF64 => "gradlift_powi_f64",
            Helper::PowiF32 => "gradlift_powi_f32",
            Helper::ArenaGrow => "gradlift_arena_grow",
            Helper::ArenaRestore => "gradlift_arena_restore",
            Helper::MemZero => "gradlift_memzero",
            Helper::TapeGrow => "gradlift_tape_grow",
            Helper::TapeAlloc => "gradlift_tape_alloc",
            Helper::CallHost => "gradlift_call_host",
        }
    }

    /// The address of the Rust function.
    pub(crate) fn addr(self) -> *const u8 {
        use MathFn::*;
        match self {
            Helper::F64Unary(f) => match f {
                Sin => sin_f64 as *const u8,
                Cos => cos_f64 as *const u8,
                Tan => tan_f64 as *const u8,
                Tanh => tanh_f64 as *const u8,
                Exp => exp_f64 as *const u8,
                Log => log_f64 as *const u8,
            },
            Helper::F32Unary(f) => match f {
                Sin => sin_f32 as *const u8,
                Cos => cos_f32 as *const u8,
                Tan => tan_f32 as *const u8,
                Tanh => tanh_f32 as *const u8,
                Exp => exp_f32 as *const u8,
                Log => log_f32 as *const u8,
            },
            Helper::PowF64 => pow_f64 as *const u8,
            Helper::PowF32 => pow_f32 as *const u8,
            Helper::PowiF64 => powi_f64 as *const u8,
            Helper::PowiF32 => powi_f32 as *const u8,
            Helper::ArenaGrow => arena_grow as *const u8,
            Helper::ArenaRestore => arena_restore as *const u8,
            Helper::MemZero => memzero as *const u8,
            Helper::TapeGrow => tape_grow as *const u8,
            Helper::TapeAlloc => tape_alloc as *const u8,
            Helper::CallHost => call_host as *const u8,
        }
    }

    /// Whether generated code calls it with the cold calling convention: on
    /// x86-64, the Windows x64 one, which preserves xmm6-xmm15 (see
    /// `codegen::define`); elsewhere the target's own. The tape's slow path.
    pub(crate) fn is_cold(self) -> bool {
        matches!(self, Helper::TapeGrow)
    }

    /// The Cranelift signature, for a target with pointers of type `ptr`.
    pub(crate) fn signature(self, ptr: Type, call_conv: CallConv) -> Signature {
        let (params, results): (&[Type], &[Type]) = match self {
            Helper::F64Unary(_) => (&[types::F64], &[types::F64]),
            Helper::F32Unary(_) => (&[types::F32], &[types::F32]),
            Helper::PowF64 => (&[types::F64, types::F64], &[types::F64]),
            Helper::PowF32 => (&[types::F32, types::F32], &[types::F32]),
            Helper::PowiF64 => (&[types::F64, types::I64], &[types::F64]),
            Helper::PowiF32 => (&[types::F32, types::I64], &[types::F32]),
            Helper::ArenaGrow => (&[ptr, types::I64, types::I64], &[ptr]),
            Helper::ArenaRestore => (&[ptr, ptr, ptr], &[]),
            Helper::MemZero => (&[ptr, ptr], &[]),
            Helper::TapeGrow => (&[ptr], &[ptr]),
            Helper::TapeAlloc => (&[ptr, types::I64, types::I64], &[types::I64]),
            Helper::CallHost => (&[ptr, types::I64, ptr, ptr], &[types::I32]),
        };
        let mut sig = Signature::new(call_conv);
        sig.params.extend(params.iter().map(|&t| AbiParam::new(t)));
        sig.returns
            .extend(results.iter().map(|&t| AbiParam::new(t)));
        sig
    }
}
