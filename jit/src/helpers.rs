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
    /// `f(x, y) -> z` on `f64`, a math function of `std`.
    F64Binary(MathFn2),
    /// `f(x, y) -> z` on `f32`.
    F32Binary(MathFn2),
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
    Sinh,
    Cosh,
    Asin,
    Acos,
    Atan,
    Log10,
    Log2,
    Exp2,
}

/// A two-argument math function of the IR that has no Cranelift instruction.
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug)]
pub(crate) enum MathFn2 {
    /// `x.powf(y)`.
    Pow,
    /// `y.atan2(x)`, operands in the IR's order (`atan2 y, x`).
    Atan2,
    /// `x.hypot(y)`.
    Hypot,
}

/// Declares the math helpers: for each function, the IR-side variant, the `std`
/// method, and the symbol's stem (`gradlift_{stem}_f64`, `gradlift_{stem}_f32`).
macro_rules! math_fns {
    (
        unary { $($u:ident $um:ident $us:literal;)* }
        binary { $($b:ident $bm:ident $bs:literal;)* }
    ) => {
        impl MathFn {
            const ALL: &'static [MathFn] = &[$(MathFn::$u,)*];

            fn name(self, f32: bool) -> &'static str {
                match (self, f32) {
                    $((MathFn::$u, false) => concat!("gradlift_", $us, "_f64"),
                      (MathFn::$u, true) => concat!("gradlift_", $us, "_f32"),)*
                }
            }

            fn addr(self, f32: bool) -> *const u8 {
                match (self, f32) {
                    $((MathFn::$u, false) => {
                        extern "C" fn f(x: f64) -> f64 {
                            x.$um()
                        }
                        f as *const u8
                    }
                    (MathFn::$u, true) => {
                        extern "C" fn f(x: f32) -> f32 {
                            x.$um()
                        }
                        f as *const u8
                    })*
                }
            }
        }

        impl MathFn2 {
            const ALL: &'static [MathFn2] = &[$(MathFn2::$b,)*];

            fn name(self, f32: bool) -> &'static str {
                match (self, f32) {
                    $((MathFn2::$b, false) => concat!("gradlift_", $bs, "_f64"),
                      (MathFn2::$b, true) => concat!("gradlift_", $bs, "_f32"),)*
                }
            }

            fn addr(self, f32: bool) -> *const u8 {
                match (self, f32) {
                    $((MathFn2::$b, false) => {
                        extern "C" fn f(x: f64, y: f64) -> f64 {
                            x.$bm(y)
                        }
                        f as *const u8
                    }
                    (MathFn2::$b, true) => {
                        extern "C" fn f(x: f32, y: f32) -> f32 {
                            x.$bm(y)
                        }
                        f as *const u8
                    })*
                }
            }
        }
    };
}

// `exp`, `sin` and `cos` are the IR's (`IrMath`: gradlift's own for `f64`, which the JIT inlines;
// the helper is there for completeness).
use gradlift_ir::math::IrMath;

math_fns! {
    unary {
        Sin ir_sin "sin";
        Cos ir_cos "cos";
        Tan tan "tan";
        Tanh tanh "tanh";
        Exp ir_exp "exp";
        Log ln "log";
        Sinh sinh "sinh";
        Cosh cosh "cosh";
        Asin asin "asin";
        Acos acos "acos";
        Atan atan "atan";
        Log10 log10 "log10";
        Log2 log2 "log2";
        Exp2 exp2 "exp2";
    }
    binary {
        Pow powf "pow";
        Atan2 atan2 "atan2";
        Hypot hypot "hypot";
    }
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

/// `fma` lowers to Cranelift's `fma` instruction: one `fmadd` on aarch64 and on
/// x86-64 with FMA; on an x86-64 without it, Cranelift calls the libcall `fma` /
/// `fmaf`. The JIT binds those names to Rust's `mul_add` (the interpreter's `fma`),
/// so the libcall never depends on what the process happens to export. A fused
/// multiply-add is correctly rounded by definition, so every path gives the same
/// bits.
pub(crate) fn libcalls() -> [(&'static str, *const u8); 2] {
    extern "C" fn fma_f64(a: f64, b: f64, c: f64) -> f64 {
        a.mul_add(b, c)
    }
    extern "C" fn fma_f32(a: f32, b: f32, c: f32) -> f32 {
        a.mul_add(b, c)
    }
    [
        ("fma", fma_f64 as *const u8),
        ("fmaf", fma_f32 as *const u8),
    ]
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
        for &f in MathFn::ALL {
            all.push(Helper::F64Unary(f));
            all.push(Helper::F32Unary(f));
        }
        for &f in MathFn2::ALL {
            all.push(Helper::F64Binary(f));
            all.push(Helper::F32Binary(f));
        }
        all.extend([
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
        match self {
            Helper::F64Unary(f) => f.name(false),
            Helper::F32Unary(f) => f.name(true),
            Helper::F64Binary(f) => f.name(false),
            Helper::F32Binary(f) => f.name(true),
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
        match self {
            Helper::F64Unary(f) => f.addr(false),
            Helper::F32Unary(f) => f.addr(true),
            Helper::F64Binary(f) => f.addr(false),
            Helper::F32Binary(f) => f.addr(true),
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
            Helper::F64Binary(_) => (&[types::F64, types::F64], &[types::F64]),
            Helper::F32Binary(_) => (&[types::F32, types::F32], &[types::F32]),
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
