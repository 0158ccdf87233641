//! gradlift's JIT: IR functions compiled to native code for the host with Cranelift,
//! computing exactly what the reference interpreter
//! ([`gradlift_ir::interp`]) computes.
//!
//! ```
//! use gradlift_ir::{interp::Val, parse};
//! use gradlift_jit::{Workspace, compile};
//!
//! let module = parse("
//!     func @sumsq(%x: [f64]) -> f64 {
//!     entry:
//!         %n = len %x
//!         jump head
//!     head:
//!         %i = phi i64 [entry: 0, body: %i1]
//!         %acc = phi f64 [entry: 0.0, body: %acc1]
//!         %more = icmp lt %i, %n
//!         br %more, body, exit
//!     body:
//!         %xi = load %x[%i]
//!         %sq = fmul %xi, %xi
//!         %acc1 = fadd %acc, %sq
//!         %i1 = iadd %i, 1
//!         jump head
//!     exit:
//!         ret %acc
//!     }
//! ").unwrap();
//! let compiled = compile(&module).unwrap();
//! let mut ws = Workspace::new();
//! let out = compiled.call_by_name(&mut ws, "sumsq", &mut [Val::F64s(vec![1.0, 2.0])]).unwrap();
//! assert_eq!(out, [Val::F64(5.0)]);
//! // Out of bounds is an error, not a crash; the workspace serves the next call.
//! let bad = gradlift_ir::parse("
//!     func @at(%x: [f64], %i: i64) -> f64 {
//!     entry:
//!         %v = load %x[%i]
//!         ret %v
//!     }
//! ").unwrap();
//! let c = compile(&bad).unwrap();
//! let e = c.call_by_name(&mut ws, "at", &mut [Val::F64s(vec![1.0]), Val::I64(-1)]).unwrap_err();
//! assert_eq!(e.to_string(), "in @at, load of %x at 4:9: index -1 out of bounds for length 1");
//! ```
//!
//! # Pieces
//!
//! - [`compile`] / [`compile_funcs`]: verified IR to a [`Compiled`] module (every
//!   function, or some functions and what they call). Failures are
//!   [`CompileError`]s, never panics.
//! - [`compile_with`]: the same, with [`Hosts`] for the `extern` functions called;
//!   [`compile_with_options`] also takes [`CompileOptions`] (tape checks on or
//!   off).
//! - [`listing`]: the Cranelift IR and disassembly of functions, for reading.
//! - [`compile_object`]: functions compiled for another machine (aarch64 Linux, or
//!   x86-64) into a relocatable object file, to link into a program (see below).
//! - [`Compiled::call`] (and [`Compiled::call_into`], which reuses the results'
//!   vector): calls a compiled function with the interpreter's
//!   [`Val`]s, checking count, kinds and types first.
//!   `Compiled` is `Send + Sync`.
//! - [`Workspace`]: the per-thread state of calls (the context, the arena for
//!   `alloc`, argument buffers, the depth limit). It keeps its memory between calls.
//! - [`RunError`]: a runtime error naming the function, the op and its position,
//!   with the kinds of the engine contract ([`ErrorKind`]), the interpreter's.
//! - [`JitEngine`] ([`Compiled::engine`]): compiled code and a workspace as the
//!   contract's `Engine`, for code written once over both engines.
//!
//! # The ABI
//!
//! Every compiled function takes a hidden first parameter, `ctx`, a pointer to the
//! workspace's `Ctx` (a `#[repr(C)]` struct): the error status word and the error
//! site (function, instruction, two payload words), the current call depth and its
//! limit, the lowest stack address calls may reach, the bump arena for `alloc`
//! (address, bytes used, capacity, chunk number), the tape (the scalar stack's
//! address, length and capacity, with the slots' type tags below the address; the
//! table of tape buffers and the tape's generation) and the host functions of the
//! running module. Then come the IR parameters: a scalar is one Cranelift value
//! (`f64`, `f32`, `i64`, a `bool` as an `i8` 0 or 1), a slice two (its address and
//! its length as `i64`). Results are flattened the same way (more than fit in
//! registers go through a hidden return area). Functions use the ISA's default
//! calling convention.
//!
//! Loops keep the IR's blocks, with one change: a loop whose header only tests
//! (at most four `icmp`, `iadd`, `isub` or `len`, scalar phis, a `br` in or out)
//! and whose latches jump back to it gets a copy of that test at the end of each
//! latch (rotation, `rotations` in `lower.rs`), so an iteration takes one branch
//! instead of two. The copy runs exactly where the header would have run next,
//! and none of those instructions can fail, so nothing observable changes.
//!
//! For Rust, each function also gets a generated trampoline,
//! `extern "C" fn(ctx, args: *const u64, results: *mut u64) -> u32`, that unpacks
//! the arguments from 8-byte slots (an `f64` or `f32` as its bits, an `i64`, a
//! `bool` 0 or 1, a slice as two slots: address, length), calls the function,
//! writes its results the same way and returns the status word.
//!
//! # Errors without unwinding
//!
//! A failing check in generated code (an index out of bounds, `idiv`/`irem` by
//! zero, a negative `alloc`, the depth limit or the stack limit at a `call`, a
//! `pop` of an empty tape or of another type than was pushed, a `trap_if`) jumps to the function's cold error block, which writes the error code,
//! the function, the instruction and the payloads into `ctx` and returns zeros. After
//! every call to another compiled function the caller reads the status and returns
//! at once if it is set, so the error travels up to the trampoline, which hands the
//! status to Rust; Rust turns `ctx` into a [`RunError`]. No unwinding, no traps, no
//! signal handlers. The next call resets the context, so a workspace stays usable.
//!
//! - Bounds: every `load` and `store` compares the index (unsigned, so negative
//!   indices fail too) with the slice's length, or is inside a range of one slice
//!   already checked in its block: where loads read `x[k]`, `x[k + 1]`, ...,
//!   `x[k + c]` (the lanes of a rule of width N) with nothing between that can
//!   fail or write, both ends are compared once before the first load, and a
//!   cold path repeats the loads' compares in order, so the error raised is the
//!   first failing load's, as in the interpreter. An access is also left
//!   unchecked where the index is proved inside the slice (`ranges.rs`): a
//!   counted loop's `x[i + c]` in a block reached only when `icmp lt %i, len(x) - k`
//!   held, with `%i` proved non-negative and `0 <= c <= k` (or with `len(y) - k`,
//!   where `trap_if (icmp ne (len x), (len y))` in the entry block says `x` and `y`
//!   have one length). Loops are also *versioned* (`version.rs`): an innermost
//!   counted loop whose indices are affine in its counter (`x[a*i + b]`, `b`
//!   invariant, `a` a literal) is compiled twice, and a dispatch before it tests
//!   both ends of every such index over the counter's range (in 64-bit
//!   arithmetic, after checking that its values are too small to wrap); only if
//!   all are inside does the copy without those checks run. Otherwise the
//!   original runs, every check in place, and fails where the interpreter fails.
//! - Math: `exp`, `sin` and `cos` of an `f64` are inline, the operations of
//!   [`gradlift_ir::math::exp`], [`gradlift_ir::math::sin`] and
//!   [`gradlift_ir::math::cos`] in their order (the interpreter's), so no call
//!   clobbers the loop's registers (on cold paths, `exp` calls out outside
//!   `2^-54 <= |x| < 512`, `sin` and `cos` beyond `2^20 pi/2`; a `sin` and a
//!   `cos` of one value share their work; `exp`'s table is a read-only data
//!   object of every compiled module); the other math functions call Rust's
//!   `std`.
//! - Depth: `ctx` counts active calls (1 in the outermost function). A `call` made
//!   at the limit fails with [`ErrorKind::RecursionLimit`], at the `call`, as in
//!   the interpreter (default 10,000, [`Workspace::with_max_depth`]).
//! - Native stack: compiled functions recurse on the thread's own stack, so a
//!   `call` also checks the stack pointer against a limit computed before the call
//!   from the thread's stack bounds, a bound on the largest frame of the module and
//!   room for the Rust helpers; below it the call fails with
//!   [`ErrorKind::StackExhausted`] instead of overflowing. The interpreter has no
//!   such limit, so deep recursion needs a thread with a big enough stack to match
//!   it.
//! - Stores go only through `mut` slices: the IR verifier checks it, and only
//!   verified functions are compiled.
//!
//! # The arena
//!
//! `alloc` takes zeroed memory from the workspace's arena, a list of chunks that
//! never move: the fast path bumps the current chunk inline, the slow path (a Rust
//! helper) moves to a bigger chunk. A function that allocates marks the arena at
//! entry and frees back to the mark when it returns, so an `alloc` lives until its
//! function returns, as in the interpreter. Each top-level call starts with an empty
//! arena; if the last call needed several chunks they are merged into one, so calls
//! in steady state allocate nothing.
//!
//! # Semantics
//!
//! The interpreter's, op for op (see [`gradlift_ir::interp`]): float ops in their
//! own type; `fmin`/`fmax` with NaN if either operand is NaN (the canonical NaN
//! of Rust, as the interpreter returns) and `-0.0` below `0.0`; integers wrapping,
//! `i64::MIN / -1` wrapping; shifts modulo 64; `cast` float to int truncating and
//! saturating (NaN to 0). Transcendental ops (`exp`, `exp2`, `log`, `log10`,
//! `log2`, `sin`, `cos`, `tan`, `asin`, `acos`, `atan`, `atan2`, `sinh`, `cosh`,
//! `tanh`, `hypot`, `pow`, `powi`) call Rust helpers that are the very `std`
//! functions the interpreter uses, so results agree bit for bit; `sqrt`, `floor`,
//! `ceil`, `fabs`, `fneg` and `fma` are Cranelift instructions (exact in IEEE
//! arithmetic: `fma` rounds once, as Rust's `mul_add`; on an x86-64 without the FMA
//! extension Cranelift calls the libcall `fma`/`fmaf`, which the JIT binds to
//! `mul_add`, and an object file for such a target imports from the C library).
//!
//! # The tape
//!
//! Derived code (forward passes and pullbacks) uses the tape ops of
//! `docs/ir-extensions.md`. The tape belongs to the [`Workspace`] and persists
//! across calls, as the interpreter's does, until [`Workspace::reset_tape`];
//! [`Workspace::tape`] says what it holds.
//!
//! - Scalars: one stack of 8-byte slots, each holding one scalar in its own type,
//!   and below the slots one type tag byte per slot. `push` stores inline and
//!   grows the stack in Rust when it is full (doubling, keeping its memory across
//!   resets). `pop` checks the top slot's tag, as the interpreter checks the type
//!   of its top scalar: a `pop` of an empty stack fails with
//!   [`ErrorKind::TapeUnderflow`], a `pop` of another type than was pushed with
//!   [`ErrorKind::TapeMismatch`] (`pop f64 found an i64 on the tape`), at the
//!   `pop`, the tape left as it was. One compare finds both: the tag read for an
//!   empty stack is a 0 byte kept below the first slot's, which no type has.
//!   Within a block the stack's height and the tags of its pushes stay in
//!   registers and are written back once, where something reads them (the block's
//!   end, a call, a `pop`, an error), so a block of k pushes costs k slot stores,
//!   one height store and one tag store (`BENCHMARKS.md` times the suite's
//!   gradients with and without tags). In a function where a loop pushes or
//!   pops, the height also stays in a register from block to block, and the
//!   context gets it only before a call, `tape_alloc`, `ret` or an error. [`CompileOptions::tape_checks`] off leaves
//!   the tags out: a `pop` of another type then reads the slot's bits as its own
//!   type (see its docs for what else holds).
//! - Buffers: `tape_alloc` (a Rust helper) takes zeroed memory from chunks that
//!   never move and enters it in a table; its handle is the tape's generation
//!   (high 32 bits) and the table index (low 32 bits). `tape_view` checks the
//!   generation, the index and the element type inline, so forged and stale handles
//!   fail ([`ErrorKind::NoTapeBuffer`], [`ErrorKind::TapeBufferMismatch`]).
//! - A reset empties both and keeps the memory, so gradients in steady state
//!   allocate nothing.
//!
//! # Host functions
//!
//! An `extern` function is called through a Rust function bound to it by name in
//! [`Hosts`] ([`compile_with`]); see the [`Hosts`] docs. Compiled code writes the
//! arguments to a stack area and calls a Rust helper, which calls the host function
//! with [`Val`]s, catches a panic, and writes the results
//! back. An extern with no host function is a compile error
//! ([`CompileError::UnboundExtern`]); one that returns a slice is not supported.
//!
//! # Object files and aarch64
//!
//! [`compile_object`] runs the same compile loop over cranelift-object instead of
//! cranelift-jit, for a target triple (ELF on aarch64 or x86-64): the code and the
//! ABI are the JIT's. The object exports each function's trampoline as
//! `gradlift_entry{FuncId index}`; the functions are local; the helpers the code
//! calls ([`ObjectFile::imports`]: the math functions, the arena's and the tape's
//! slow paths, `gradlift_call_host` for `extern` calls) are undefined, and the
//! program that links the object defines them with the semantics of this crate's
//! (the math ones are the C library's `sin`, `expf`, `pow`, `atan2`, `hypotf`, ...;
//! `powi` is repeated squaring). It also provides the context (`gradlift_ctx` in the C
//! header that the hidden `c_abi::ctx_header()` writes), and a tape laid out as
//! the header says (the type tags below the slots, a 0 byte under the first tag
//! even before `gradlift_tape_grow` first runs). The code is not position
//! independent: link with `gcc -static` or `-no-pie`.
//!
//! The tests: `jit/tests/aarch64.rs` compiles every corpus and example function
//! and its rule for aarch64; `jit/tests/qemu.rs` links aarch64 objects with a C
//! driver (`aarch64-linux-gnu-gcc -static`), runs them under `qemu-aarch64` and
//! compares values and gradients with the interpreter (it skips without the tools,
//! unless `CI` is set): `cargo test -p gradlift-jit --test aarch64 --test qemu`.
//!
//! # Code map
//!
//! `isa` chooses the target (the one place to change for cross-compilation);
//! `codegen` is the compile loop over any Cranelift module (the JIT's, an object
//! file's); `lower` lowers one IR function (one method per op family); `abi` writes
//! the trampolines; `helpers` are the Rust functions generated code calls; `runtime`
//! holds `Ctx`, the arena, the tape and [`Workspace`]; the host functions are the contract's `Hosts`;
//! `compiled` compiles a module and calls into it; `object` writes object files;
//! `c_abi` writes the ABI as C; `error` has the error types.

// Calling generated code cannot be done without `unsafe`. It is confined to small
// blocks, each with a `SAFETY` comment; the public API is safe.
#![allow(unsafe_code)]

// The README's examples run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

mod abi;
#[doc(hidden)]
pub mod c_abi;
mod codegen;
mod compiled;
mod error;
mod helpers;
mod isa;
mod lanes;
mod lower;
mod object;
mod ranges;
mod runtime;
mod version;

pub use codegen::Listing;
pub use compiled::{
    CompileOptions, Compiled, ErrorSite, JitEngine, compile, compile_funcs, compile_with,
    compile_with_options, decode_error, listing, listing_with_options,
};
pub use error::CompileError;
/// The engine contract, re-exported: the JIT takes and returns the same values,
/// errors, tape statistics and host functions as the interpreter.
pub use gradlift_ir::engine::{Arg, ErrorKind, HostFn, Hosts, RunError, TapeStats, Val};
pub use object::{ObjectFile, compile_object, compile_object_with_options};
pub use runtime::Workspace;
