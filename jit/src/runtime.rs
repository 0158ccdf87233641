//! The runtime: the context every compiled function receives ([`Ctx`]), the
//! [`Workspace`] that owns it, the bump arena behind `alloc`, and the bounds of the
//! native stack.
//!
//! Generated code reads and writes the `#[repr(C)]` prefix of [`Ctx`] at the offsets
//! of [`Offsets`]; everything after the prefix is Rust's own (the arena's chunks).
//! Pointers in the prefix are kept as `usize`, so that a `Ctx` (and a `Workspace`) is
//! plain data: it may move to another thread between calls.

use core::mem::offset_of;
use gradlift_ir::TapeStats;
use gradlift_ir::engine::Arg;

/// No error: the status word of a call that has not failed.
pub(crate) const OK: u32 = 0;

/// The error codes generated code writes into [`Ctx::status`]. `err_a` and `err_b`
/// carry the payload named after each.
pub(crate) mod code {
    /// `load`/`store` out of bounds: `a` the index, `b` the length.
    pub const OUT_OF_BOUNDS: u32 = 1;
    /// `idiv`/`irem` by zero.
    pub const DIVISION_BY_ZERO: u32 = 2;
    /// `alloc` of a negative length: `a` the length.
    pub const NEGATIVE_ALLOC: u32 = 3;
    /// `alloc` of more than can be had: `a` the length.
    pub const ALLOC_FAILED: u32 = 4;
    /// The depth limit, at a `call`: `a` the limit.
    pub const RECURSION_LIMIT: u32 = 5;
    /// A `trap_if` fired: `a` the message's index in its function.
    pub const TRAP: u32 = 6;
    /// The native stack is too short for one more call: `a` the depth.
    pub const STACK_EXHAUSTED: u32 = 7;
    /// `pop` of an empty tape.
    pub const TAPE_UNDERFLOW: u32 = 8;
    /// `tape_view` of a handle naming no live buffer: `a` the handle, `b` the
    /// element code of the view.
    pub const NO_TAPE_BUFFER: u32 = 9;
    /// `tape_view` of a buffer of another element type: `a` the handle, `b` the
    /// element codes (view's * 16 + buffer's).
    pub const TAPE_BUFFER_MISMATCH: u32 = 10;
    /// A host function failed: its message is in `Ctx::host_error`.
    pub const EXTERN_FAILED: u32 = 11;
    /// `push` found no memory to grow the tape.
    pub const TAPE_FULL: u32 = 12;
    /// `pop` found a scalar of another type on top of the tape: `a` the type code
    /// of the `pop` ([`scalar_code`](super::scalar_code)), `b` the code of the
    /// scalar found.
    pub const TAPE_MISMATCH: u32 = 13;
}

/// The element codes of tape buffers (the third word of a table entry).
pub(crate) fn elem_code(e: gradlift_ir::Elem) -> u64 {
    match e {
        gradlift_ir::Elem::F64 => 1,
        gradlift_ir::Elem::F32 => 2,
        gradlift_ir::Elem::I64 => 3,
    }
}

/// The element type of an element code.
pub(crate) fn code_elem(c: u64) -> Option<gradlift_ir::Elem> {
    Some(match c {
        1 => gradlift_ir::Elem::F64,
        2 => gradlift_ir::Elem::F32,
        3 => gradlift_ir::Elem::I64,
        _ => return None,
    })
}

/// The type code of a scalar on the tape (its tag, one byte per slot): the element
/// codes of [`elem_code`] for `f64`, `f32` and `i64`, and 4 for `bool`. 0 is no
/// scalar: the byte below the first slot's tag, which `pop` of an empty tape reads.
pub(crate) fn scalar_code(t: gradlift_ir::Type) -> Option<u8> {
    use gradlift_ir::Type;
    Some(match t {
        Type::F64 => 1,
        Type::F32 => 2,
        Type::I64 => 3,
        Type::Bool => 4,
        Type::Slice { .. } => return None,
    })
}

/// The scalar type of a type code of [`scalar_code`].
pub(crate) fn code_scalar(c: u64) -> Option<gradlift_ir::Type> {
    use gradlift_ir::Type;
    Some(match c {
        1 => Type::F64,
        2 => Type::F32,
        3 => Type::I64,
        4 => Type::Bool,
        _ => return None,
    })
}

/// A host function bound to an `extern`, as generated code reaches it.
pub(crate) struct HostSlot {
    /// The extern function (without `@`).
    pub(crate) name: String,
    /// Its signature.
    pub(crate) sig: gradlift_ir::Signature,
    /// The Rust function.
    pub(crate) f: HostKind,
}

/// The two kinds of host function ([`gradlift_ir::Hosts`]).
pub(crate) enum HostKind {
    /// Gets its arguments as copies (`Hosts::bind`).
    Copied(std::sync::Arc<gradlift_ir::HostFn>),
    /// Borrows its arguments (`Hosts::bind_args`).
    Borrowed(std::sync::Arc<gradlift_ir::engine::HostArgsFn>),
}

/// The context of a call: every compiled function takes a pointer to one as its
/// hidden first parameter.
///
/// The fields up to `hosts_len` are the ABI between generated code and Rust
/// (their offsets are [`Offsets`]); the rest is Rust's. One `Ctx` belongs to one
/// [`Workspace`] and serves one call at a time.
#[repr(C)]
#[derive(Debug)]
pub struct Ctx {
    /// 0 while the call runs well; else the error code (the `code` constants).
    pub(crate) status: u32,
    /// The function that failed (its `FuncId` index in the IR module).
    pub(crate) err_func: u32,
    /// The instruction that failed (its `Inst` index in that function).
    pub(crate) err_inst: u32,
    _pad: u32,
    /// First payload of the error (an index, a length, a message number, a depth).
    pub(crate) err_a: i64,
    /// Second payload of the error (a slice length).
    pub(crate) err_b: i64,
    /// The calls active now: 1 in the outermost function.
    pub(crate) depth: u64,
    /// The deepest nesting allowed: a `call` at this depth fails.
    pub(crate) max_depth: u64,
    /// A call site whose stack pointer is below this address fails
    /// ([`code::STACK_EXHAUSTED`]) instead of calling.
    pub(crate) stack_limit: usize,
    /// The arena's current chunk: its address, the bytes used, its capacity in bytes,
    /// its number in `chunks`.
    pub(crate) arena_ptr: usize,
    pub(crate) arena_used: usize,
    pub(crate) arena_cap: usize,
    pub(crate) arena_chunk: usize,
    /// The tape's scalar stack: its address, the slots used, the slots it has (one
    /// 8-byte slot per scalar, holding it in its own type at the slot's start).
    /// Below the slots lie their type tags ([`scalar_code`]), one byte each, going
    /// down: the tag of slot `i` at `tape_ptr - 2 - i`, and at `tape_ptr - 1` a 0
    /// byte (no scalar), so that `pop` reads the tag of the top slot,
    /// `tape_ptr - 1 - tape_len`, without checking for an empty tape first. The
    /// memory is [`tag_words`]`(tape_cap)` words of tags, then the slots. (Code
    /// compiled without tape checks writes no tags.) Generated code keeps the
    /// height and a block's tags in registers for a while; both are right in
    /// memory whenever anything else may read them: at a call (of a function, of
    /// `tape_grow`), a return and an error.
    pub(crate) tape_ptr: usize,
    pub(crate) tape_len: usize,
    pub(crate) tape_cap: usize,
    /// The table of tape buffers: its address and its entries, three words each
    /// (address, length, element code).
    pub(crate) tape_bufs_ptr: usize,
    pub(crate) tape_bufs_len: usize,
    /// The tape's generation, in the high 32 bits of every handle made since the
    /// last reset (the low 32 bits are the buffer's index in the table).
    pub(crate) tape_gen: u64,
    /// The host functions of the running [`Compiled`](crate::Compiled), by `FuncId`
    /// index: the address of a `[Option<HostSlot>]` and its length.
    pub(crate) hosts_ptr: usize,
    pub(crate) hosts_len: usize,
    /// The arena's memory: chunks that never move while they exist, so a slice of
    /// an earlier chunk stays valid when a later one is added.
    chunks: Vec<Box<[u64]>>,
    /// The scalar stack's memory: its tags, then its slots (see `tape_ptr`).
    tape_mem: Box<[u64]>,
    /// The table of tape buffers (`tape_bufs_ptr`, `tape_bufs_len`).
    tape_table: Vec<[u64; 3]>,
    /// The bytes of the buffers in `tape_table` (their elements).
    tape_buf_bytes: usize,
    /// The memory of tape buffers: chunks that never move, filled in order; the
    /// current chunk and the words used in it.
    tape_chunks: Vec<Box<[u64]>>,
    tape_chunk: usize,
    tape_chunk_used: usize,
    /// The most bytes the tape held at the end of a call (or at a `recompute`)
    /// since the last reset.
    tape_peak: usize,
    /// The steps `recompute` counted since the last reset (generated code adds
    /// to it, saturating, and notes the tape's size in `tape_peak` there: a
    /// checkpointed loop's pullback runs `recompute` right after the forward pass
    /// of a step, where it holds the most).
    recomputed: u64,
    /// What the last failing host function said: (function, message).
    pub(crate) host_error: Option<(String, String)>,
    /// The most bytes the tape may hold ([`Workspace::with_max_tape_bytes`]).
    pub(crate) max_tape_bytes: usize,
}

/// The byte offsets of the fields of [`Ctx`] that generated code uses.
pub(crate) struct Offsets;

impl Offsets {
    pub(crate) const STATUS: i32 = offset_of!(Ctx, status) as i32;
    pub(crate) const ERR_FUNC: i32 = offset_of!(Ctx, err_func) as i32;
    pub(crate) const ERR_INST: i32 = offset_of!(Ctx, err_inst) as i32;
    pub(crate) const ERR_A: i32 = offset_of!(Ctx, err_a) as i32;
    pub(crate) const ERR_B: i32 = offset_of!(Ctx, err_b) as i32;
    pub(crate) const DEPTH: i32 = offset_of!(Ctx, depth) as i32;
    pub(crate) const MAX_DEPTH: i32 = offset_of!(Ctx, max_depth) as i32;
    pub(crate) const STACK_LIMIT: i32 = offset_of!(Ctx, stack_limit) as i32;
    pub(crate) const ARENA_PTR: i32 = offset_of!(Ctx, arena_ptr) as i32;
    pub(crate) const ARENA_USED: i32 = offset_of!(Ctx, arena_used) as i32;
    pub(crate) const ARENA_CAP: i32 = offset_of!(Ctx, arena_cap) as i32;
    pub(crate) const ARENA_CHUNK: i32 = offset_of!(Ctx, arena_chunk) as i32;
    pub(crate) const TAPE_PTR: i32 = offset_of!(Ctx, tape_ptr) as i32;
    pub(crate) const TAPE_LEN: i32 = offset_of!(Ctx, tape_len) as i32;
    pub(crate) const TAPE_CAP: i32 = offset_of!(Ctx, tape_cap) as i32;
    pub(crate) const TAPE_BUFS_PTR: i32 = offset_of!(Ctx, tape_bufs_ptr) as i32;
    pub(crate) const TAPE_BUFS_LEN: i32 = offset_of!(Ctx, tape_bufs_len) as i32;
    pub(crate) const TAPE_GEN: i32 = offset_of!(Ctx, tape_gen) as i32;
    pub(crate) const TAPE_BUF_BYTES: i32 = offset_of!(Ctx, tape_buf_bytes) as i32;
    pub(crate) const TAPE_PEAK: i32 = offset_of!(Ctx, tape_peak) as i32;
    pub(crate) const RECOMPUTED: i32 = offset_of!(Ctx, recomputed) as i32;
}

/// The smallest arena chunk, in 8-byte words (32 KiB).
const MIN_CHUNK_WORDS: usize = 4096;

/// The most elements one `alloc` may ask for: beyond this its byte count would not
/// fit an `isize`.
const MAX_ALLOC_BYTES: u128 = isize::MAX as u128;

impl Ctx {
    fn new() -> Ctx {
        // No slots: one word of tags, whose last byte is the 0 below the first tag.
        let mut tape_mem: Box<[u64]> = Box::new([0]);
        let tape_ptr = tape_mem.as_mut_ptr() as usize + 8;
        Ctx {
            status: OK,
            err_func: 0,
            err_inst: 0,
            _pad: 0,
            err_a: 0,
            err_b: 0,
            depth: 0,
            max_depth: 0,
            stack_limit: 0,
            arena_ptr: core::ptr::NonNull::<u64>::dangling().as_ptr() as usize,
            arena_used: 0,
            arena_cap: 0,
            arena_chunk: 0,
            tape_ptr,
            tape_len: 0,
            tape_cap: 0,
            tape_bufs_ptr: core::ptr::NonNull::<u64>::dangling().as_ptr() as usize,
            tape_bufs_len: 0,
            tape_gen: 1,
            hosts_ptr: 0,
            hosts_len: 0,
            chunks: Vec::new(),
            tape_mem,
            tape_table: Vec::new(),
            tape_buf_bytes: 0,
            tape_chunks: Vec::new(),
            tape_chunk: 0,
            tape_chunk_used: 0,
            tape_peak: 0,
            recomputed: 0,
            host_error: None,
            max_tape_bytes: usize::MAX,
        }
    }

    /// The slow path of `push`: the scalar stack is full. Doubles it (at least 1024
    /// slots) and its tags, keeping their contents; false if the memory cannot be
    /// had (then nothing changed).
    pub(crate) fn tape_grow(&mut self) -> bool {
        if self.tape_bytes().saturating_add(8) > self.max_tape_bytes {
            return false;
        }
        // Never more slots than the limit allows (less the buffers' bytes): a push
        // beyond it then comes back here, and fails.
        let limit = self.max_tape_bytes.saturating_sub(self.tape_buf_bytes) / 8;
        let want = self.tape_cap.saturating_mul(2).max(1024).min(limit);
        if want <= self.tape_len {
            return false;
        }
        let (old_tw, tw) = (tag_words(self.tape_cap), tag_words(want));
        let Some(mut mem) = zeroed_words(tw + want) else {
            return false;
        };
        let len = self.tape_len;
        mem[tw..tw + len].copy_from_slice(&self.tape_mem[old_tw..old_tw + len]);
        // The tags of the `len` slots: the `len` bytes below the 0 byte under the
        // slots.
        let (from, to) = (old_tw * 8 - 1 - len, tw * 8 - 1 - len);
        // SAFETY: both ranges of `len` bytes lie inside their allocation (they end
        // below byte `tag_words(cap) * 8 - 1`, and `tag_words(cap) * 8 > cap >=
        // len`), and the two allocations are distinct.
        unsafe {
            let src = (self.tape_mem.as_ptr() as *const u8).add(from);
            let dst = (mem.as_mut_ptr() as *mut u8).add(to);
            core::ptr::copy_nonoverlapping(src, dst, len);
        }
        self.tape_mem = mem;
        self.tape_ptr = self.tape_mem.as_mut_ptr() as usize + tw * 8;
        self.tape_cap = want;
        true
    }

    /// `tape_alloc`: a zeroed buffer of `n` elements of `elem` on the tape, and its
    /// handle; `None` if the memory cannot be had (or the table is full).
    pub(crate) fn tape_alloc(&mut self, n: u64, elem: gradlift_ir::Elem) -> Option<i64> {
        let size: u128 = match elem {
            gradlift_ir::Elem::F32 => 4,
            _ => 8,
        };
        let bytes = u128::from(n) * size;
        if bytes > MAX_ALLOC_BYTES
            || self.tape_table.len() >= u32::MAX as usize
            || (self.tape_bytes() as u128).saturating_add(bytes) > self.max_tape_bytes as u128
        {
            return None;
        }
        let words = (bytes as usize).div_ceil(8);
        // The current chunk, or the next one with room (made if needed).
        loop {
            match self.tape_chunks.get(self.tape_chunk) {
                Some(c) if c.len() - self.tape_chunk_used >= words => break,
                Some(_) if self.tape_chunk + 1 < self.tape_chunks.len() => {
                    self.tape_chunk += 1;
                    self.tape_chunk_used = 0;
                }
                _ => {
                    let last = self.tape_chunks.last().map_or(0, |c| c.len());
                    let want = words.max(last.saturating_mul(2)).max(MIN_CHUNK_WORDS);
                    let chunk = zeroed_words(want).or_else(|| zeroed_words(words))?;
                    self.tape_chunks.push(chunk);
                    self.tape_chunk = self.tape_chunks.len() - 1;
                    self.tape_chunk_used = 0;
                }
            }
        }
        let chunk = &mut self.tape_chunks[self.tape_chunk];
        let start = self.tape_chunk_used;
        chunk[start..start + words].fill(0);
        let ptr = chunk[start..].as_mut_ptr() as usize;
        self.tape_chunk_used += words;
        let index = self.tape_table.len() as u64;
        if self.tape_table.len() == self.tape_table.capacity() {
            self.tape_table
                .try_reserve(self.tape_table.len().max(64))
                .ok()?;
        }
        self.tape_table.push([ptr as u64, n, elem_code(elem)]);
        self.tape_buf_bytes += bytes as usize;
        self.tape_bufs_ptr = self.tape_table.as_ptr() as usize;
        self.tape_bufs_len = self.tape_table.len();
        Some(((self.tape_gen << 32) | index) as i64)
    }

    /// The bytes the tape holds now: 8 per scalar, and the buffers' elements.
    pub(crate) fn tape_bytes(&self) -> usize {
        self.tape_len * 8 + self.tape_buf_bytes
    }

    /// Notes the tape's size at the end of a call for [`Ctx::tape_peak`]. Sizes
    /// are taken at call boundaries only (generated code keeps no high-water mark,
    /// to keep `pop` short): exact for a gradient, whose forward pass ends with
    /// everything its pullback will take.
    pub(crate) fn note_tape(&mut self) {
        self.tape_peak = self.tape_peak.max(self.tape_bytes());
    }

    /// Empties the tape (scalars and buffers) and forgets its peak. Keeps the memory;
    /// if buffers spread over several chunks, they become one. Handles made before
    /// name no buffer afterwards.
    pub(crate) fn reset_tape(&mut self) {
        self.tape_len = 0;
        self.tape_table.clear();
        self.tape_buf_bytes = 0;
        self.tape_bufs_len = 0;
        self.tape_gen = (self.tape_gen + 1) & 0xffff_ffff;
        if self.tape_gen == 0 {
            self.tape_gen = 1;
        }
        if self.tape_chunks.len() > 1 {
            let words: usize = self.tape_chunks.iter().map(|c| c.len()).sum();
            self.tape_chunks.clear();
            if let Some(chunk) = zeroed_words(words) {
                self.tape_chunks.push(chunk);
            }
        }
        self.tape_chunk = 0;
        self.tape_chunk_used = 0;
        self.tape_peak = 0;
        self.recomputed = 0;
    }

    /// Prepares for a top-level call: no error, depth 1, the arena empty. If the
    /// last call spread the arena over several chunks, they become one chunk as big
    /// as all of them, so that the next call (in steady state, every call) finds
    /// room in one chunk and allocates nothing.
    pub(crate) fn reset(&mut self, max_depth: u64, stack_limit: usize) {
        self.status = OK;
        self.err_func = 0;
        self.err_inst = 0;
        self.err_a = 0;
        self.err_b = 0;
        self.depth = 1;
        self.max_depth = max_depth;
        self.stack_limit = stack_limit;
        self.coalesce_arena();
        self.select_chunk(0, 0);
    }

    /// Makes the arena's chunks one chunk as big as all of them, when a call spread
    /// it over several. Called when a top-level call has returned (nothing in the
    /// arena is live then: results are scalars or the caller's slices), so that the
    /// call that grew the arena pays for it and the next one allocates nothing; and
    /// again by [`Ctx::reset`].
    pub(crate) fn coalesce_arena(&mut self) {
        if self.chunks.len() > 1 {
            let words: usize = self.chunks.iter().map(|c| c.len()).sum();
            self.chunks.clear();
            if let Some(chunk) = zeroed_words(words) {
                self.chunks.push(chunk);
            }
            self.select_chunk(0, 0);
        }
    }

    /// Makes chunk `k` the current one with `used` bytes used (no chunk: empty).
    fn select_chunk(&mut self, k: usize, used: usize) {
        match self.chunks.get_mut(k) {
            Some(chunk) => {
                self.arena_ptr = chunk.as_mut_ptr() as usize;
                self.arena_cap = chunk.len() * 8;
                self.arena_used = used.min(self.arena_cap);
            }
            None => {
                self.arena_ptr = core::ptr::NonNull::<u64>::dangling().as_ptr() as usize;
                self.arena_cap = 0;
                self.arena_used = 0;
            }
        }
        self.arena_chunk = k;
    }

    /// The slow path of `alloc`: the current chunk has no room for `n` elements of
    /// `size` bytes. Moves to the next chunk with room (making one if needed) and
    /// returns the address of `n * size` zeroed bytes there, or 0 if the memory
    /// cannot be had.
    pub(crate) fn arena_grow(&mut self, n: u64, size: u64) -> usize {
        let bytes = u128::from(n) * u128::from(size);
        if bytes > MAX_ALLOC_BYTES {
            return 0;
        }
        let bytes = bytes as usize;
        let words = bytes.div_ceil(8);
        // A later chunk left from before (after an `arena_restore`) may have room.
        let mut k = self.arena_chunk + 1;
        while k < self.chunks.len() && self.chunks[k].len() < words {
            k += 1;
        }
        if k >= self.chunks.len() {
            let last = self.chunks.last().map_or(0, |c| c.len());
            let want = words.max(last.saturating_mul(2)).max(MIN_CHUNK_WORDS);
            let Some(chunk) = zeroed_words(want).or_else(|| zeroed_words(words)) else {
                return 0;
            };
            self.chunks.push(chunk);
            k = self.chunks.len() - 1;
        }
        self.select_chunk(k, 0);
        let ptr = self.arena_ptr;
        // SAFETY: the chunk has at least `words * 8 >= bytes` bytes from `ptr`, and
        // nothing else refers to them (they lie past every live allocation).
        unsafe { core::ptr::write_bytes(ptr as *mut u8, 0, bytes) };
        self.arena_used = words * 8;
        ptr
    }

    /// Frees everything allocated since the mark (`chunk`, `used`) when the current
    /// chunk is another one (a function returning after its allocs moved on).
    pub(crate) fn arena_restore(&mut self, chunk: usize, used: usize) {
        self.select_chunk(chunk, used);
    }

    /// Whether `len` bytes from `ptr` lie inside one of the arena's chunks.
    pub(crate) fn arena_contains(&self, ptr: usize, len: usize) -> bool {
        self.chunks.iter().any(|c| {
            let start = c.as_ptr() as usize;
            ptr >= start && ptr.saturating_add(len) <= start + c.len() * 8
        })
    }

    /// The bytes the arena holds.
    fn arena_bytes(&self) -> usize {
        self.chunks.iter().map(|c| c.len() * 8).sum()
    }

    /// Whether `len` bytes from `ptr` lie inside one tape buffer's chunk.
    pub(crate) fn tape_contains(&self, ptr: usize, len: usize) -> bool {
        self.tape_chunks.iter().any(|c| {
            let start = c.as_ptr() as usize;
            ptr >= start && ptr.saturating_add(len) <= start + c.len() * 8
        })
    }
}

/// `words` zeroed 8-byte words, or `None` if the memory cannot be had.
fn zeroed_words(words: usize) -> Option<Box<[u64]>> {
    let mut v: Vec<u64> = Vec::new();
    v.try_reserve_exact(words).ok()?;
    v.resize(words, 0);
    Some(v.into_boxed_slice())
}

/// The words of tags below `cap` slots: a byte per slot and the 0 byte.
fn tag_words(cap: usize) -> usize {
    (cap + 1).div_ceil(8)
}

/// The per-thread state of compiled calls: the context, the arena for `alloc`, the
/// argument and result buffers, and the limits. Make one per thread and reuse it:
/// it keeps its memory between calls, so calls in steady state allocate nothing
/// for `alloc`.
///
/// ```
/// let ws = gradlift_jit::Workspace::new().with_max_depth(100);
/// assert_eq!(ws.max_depth(), 100);
/// ```
#[derive(Debug)]
pub struct Workspace {
    /// Boxed so that its address stays put while compiled code holds it.
    pub(crate) ctx: Box<Ctx>,
    pub(crate) max_depth: usize,
    /// The argument slots of the call being made.
    pub(crate) args: Vec<u64>,
    /// The result slots of the call being made.
    pub(crate) results: Vec<u64>,
    /// Buffers a caller keeps here between calls ([`Workspace::take_scratch`]).
    scratch: Scratch,
}

/// The one slot of [`Workspace::take_scratch`] and [`Workspace::keep_scratch`].
#[derive(Default)]
struct Scratch(Option<Box<dyn core::any::Any + Send + Sync>>);

impl core::fmt::Debug for Scratch {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(if self.0.is_some() {
            "Scratch(kept)"
        } else {
            "Scratch(empty)"
        })
    }
}

impl Default for Workspace {
    fn default() -> Workspace {
        Workspace::new()
    }
}

impl Workspace {
    /// The depth limit of a new workspace, the interpreter's default.
    pub const DEFAULT_MAX_DEPTH: usize = 10_000;

    /// A workspace with the default depth limit and an empty arena.
    pub fn new() -> Workspace {
        Workspace {
            ctx: Box::new(Ctx::new()),
            max_depth: Workspace::DEFAULT_MAX_DEPTH,
            args: Vec::new(),
            results: Vec::new(),
            scratch: Scratch::default(),
        }
    }

    /// Takes the buffers of type `T` kept in this workspace by
    /// [`Workspace::keep_scratch`], or a new `T::default()` when it keeps none (or
    /// keeps another type). With [`Workspace::keep_scratch`], how code that calls
    /// compiled functions keeps its own buffers with the workspace, so that once
    /// they have grown its calls allocate nothing: moving the box out and back
    /// allocates nothing.
    ///
    /// ```
    /// let mut ws = gradlift_jit::Workspace::new();
    /// let mut buf = ws.take_scratch::<Vec<f64>>();
    /// buf.extend([1.0, 2.0]);
    /// ws.keep_scratch(buf);
    /// assert_eq!(*ws.take_scratch::<Vec<f64>>(), [1.0, 2.0]);
    /// // Taken, and not kept again: the next take is a new one.
    /// assert!(ws.take_scratch::<Vec<f64>>().is_empty());
    /// ```
    pub fn take_scratch<T: core::any::Any + Send + Sync + Default>(&mut self) -> Box<T> {
        self.scratch
            .0
            .take()
            .and_then(|b| b.downcast::<T>().ok())
            .unwrap_or_default()
    }

    /// Keeps `scratch` in this workspace for the next [`Workspace::take_scratch`]
    /// of its type. There is one slot: what was kept before is dropped.
    pub fn keep_scratch<T: core::any::Any + Send + Sync>(&mut self, scratch: Box<T>) {
        self.scratch.0 = Some(scratch);
    }

    /// Sets the deepest call nesting allowed (the outermost call is depth 1), as the
    /// interpreter's `Limits::max_depth`.
    pub fn with_max_depth(mut self, max_depth: usize) -> Workspace {
        self.max_depth = max_depth;
        self
    }

    /// Limits the tape to `bytes` (counted as [`TapeStats::bytes`] counts): a
    /// `push` or `tape_alloc` beyond it fails the call
    /// ([`ErrorKind::TapeFull`](crate::ErrorKind::TapeFull),
    /// [`ErrorKind::AllocFailed`](crate::ErrorKind::AllocFailed)) instead of
    /// taking memory without end, as a runaway loop in a forward pass would. No limit
    /// by default.
    ///
    /// ```
    /// let ws = gradlift_jit::Workspace::new().with_max_tape_bytes(1 << 30);
    /// assert_eq!(ws.max_tape_bytes(), Some(1 << 30));
    /// ```
    pub fn with_max_tape_bytes(mut self, bytes: usize) -> Workspace {
        self.ctx.max_tape_bytes = bytes;
        self
    }

    /// The tape's limit, if one was set.
    pub fn max_tape_bytes(&self) -> Option<usize> {
        (self.ctx.max_tape_bytes != usize::MAX).then_some(self.ctx.max_tape_bytes)
    }

    /// The depth limit.
    pub fn max_depth(&self) -> usize {
        self.max_depth
    }

    /// The bytes the arena for `alloc` holds now (it keeps them between calls).
    pub fn arena_bytes(&self) -> usize {
        self.ctx.arena_bytes()
    }

    /// What the tape holds now, and the most it held at the end of a call since the
    /// last [`Workspace::reset_tape`].
    ///
    /// The tape persists across calls, as the interpreter's does: a forward pass
    /// leaves on it what the pullback called next takes off.
    pub fn tape(&self) -> TapeStats {
        let bytes = self.ctx.tape_bytes();
        TapeStats {
            scalars: self.ctx.tape_len,
            buffers: self.ctx.tape_table.len(),
            bytes,
            peak_bytes: self.ctx.tape_peak.max(bytes),
            capacity_bytes: self.ctx.tape_mem.len() * 8
                + self
                    .ctx
                    .tape_chunks
                    .iter()
                    .map(|c| c.len() * 8)
                    .sum::<usize>(),
            recomputed_steps: self.ctx.recomputed,
        }
    }

    /// Empties the tape: its scalars, its buffers (handles made before name no
    /// buffer afterwards) and its peak. The memory is kept for the next calls.
    pub fn reset_tape(&mut self) {
        self.ctx.reset_tape();
    }
}

/// Calls the host function of the extern with `FuncId` index `func` for compiled
/// code and packs its results into `results`. A copying host function
/// ([`HostKind::Copied`]) gets the argument slots unpacked into [`Val`]s, its `mut`
/// slices copied back ([`call_copied`]); a borrowing one ([`HostKind::Borrowed`])
/// gets the buffers themselves ([`call_borrowed`]). A panic is caught. The error is
/// (function, message).
///
/// # Safety
/// `args` holds the extern's argument slots, `results` has room for its result
/// slots, and every slice among the arguments is a live buffer of its length
/// (writable if `mut`), not accessed elsewhere during the call. Slice arguments
/// may overlap one another.
pub(crate) unsafe fn call_host(
    ctx: &mut Ctx,
    func: usize,
    args: *const u64,
    results: *mut u64,
) -> Result<(), (String, String)> {
    use gradlift_ir::Val;
    if func >= ctx.hosts_len {
        return Err((String::new(), "no host function table".into()));
    }
    // SAFETY: `hosts_ptr`/`hosts_len` are the host table of the `Compiled` whose
    // code is running (set by `Compiled::call`, which borrows it for the call).
    let slot = unsafe { &*(ctx.hosts_ptr as *const Option<HostSlot>).add(func) };
    let Some(slot) = slot else {
        return Err((String::new(), "an extern without host function".into()));
    };
    // The name is cloned only for an error: a call that succeeds allocates
    // nothing here.
    let fail = |m: String| (slot.name.clone(), m);
    let out = match &slot.f {
        // SAFETY: the caller's contract, passed on.
        HostKind::Copied(f) => unsafe { call_copied(slot, &**f, args) },
        // SAFETY: the caller's contract, passed on.
        HostKind::Borrowed(f) => unsafe { call_borrowed(slot, &**f, args) },
    };
    let out = match out {
        Ok(out) => out,
        Err(gradlift_ir::ErrorKind::ExternFailed { message, .. }) => return Err(fail(message)),
        Err(e) => return Err(fail(e.to_string())),
    };
    for (j, v) in out.iter().enumerate() {
        let bits = match *v {
            Val::F64(x) => x.to_bits(),
            Val::F32(x) => u64::from(x.to_bits()),
            Val::I64(x) => x as u64,
            Val::Bool(x) => u64::from(x),
            // Externs returning slices are refused at compile time.
            _ => return Err(fail("it returned a slice".into())),
        };
        // SAFETY: `results` has a slot per scalar result (slice results are refused
        // at compile time), and `out` has one value per result (the protocols
        // checked it against the signature).
        unsafe { *results.add(j) = bits };
    }
    Ok(())
}

/// Calls a copying host function ([`gradlift_ir::HostFn`]) on the argument slots
/// `args` of `slot`'s extern, following [`gradlift_ir::engine::call_host`]: every
/// slice is copied into a [`Val`], and `mut` ones are copied back.
///
/// # Safety
/// As [`call_host`].
unsafe fn call_copied(
    slot: &HostSlot,
    f: &gradlift_ir::HostFn,
    args: *const u64,
) -> Result<Vec<gradlift_ir::Val>, gradlift_ir::ErrorKind> {
    use gradlift_ir::{Elem, Type, Val};
    let mut vals = Vec::with_capacity(slot.sig.params.len());
    let mut k = 0;
    // SAFETY (for every read of `args` below): `k` stays below the signature's slot
    // count, which the caller's contract covers.
    let arg = |k: usize| unsafe { *args.add(k) };
    for &ty in &slot.sig.params {
        let v = match ty {
            Type::F64 => Val::F64(f64::from_bits(arg(k))),
            Type::F32 => Val::F32(f32::from_bits(arg(k) as u32)),
            Type::I64 => Val::I64(arg(k) as i64),
            Type::Bool => Val::Bool(arg(k) & 0xff != 0),
            Type::Slice { elem, .. } => {
                let (p, n) = (arg(k), arg(k + 1) as usize);
                k += 1;
                // SAFETY: the slice is a live buffer of `n` elements (the contract).
                unsafe {
                    match elem {
                        Elem::F64 => {
                            Val::F64s(core::slice::from_raw_parts(p as *const f64, n).to_vec())
                        }
                        Elem::F32 => {
                            Val::F32s(core::slice::from_raw_parts(p as *const f32, n).to_vec())
                        }
                        Elem::I64 => {
                            Val::I64s(core::slice::from_raw_parts(p as *const i64, n).to_vec())
                        }
                    }
                }
            }
        };
        k += 1;
        vals.push(v);
    }
    // `mut` slices go back into the caller's buffers.
    let mut offsets: smallvec::SmallVec<[usize; 8]> = smallvec::SmallVec::new();
    let mut k = 0;
    for &ty in &slot.sig.params {
        offsets.push(k);
        k += if ty.is_slice() { 2 } else { 1 };
    }
    let write_back = |j: usize, v: &Val| {
        let (p, n) = (arg(offsets[j]), arg(offsets[j] + 1) as usize);
        if v.slice_len() != Some(n) {
            return false;
        }
        // SAFETY: parameter `j` is a `mut` slice (`call_host` hands only those
        // back), so its slots are a writable live buffer of `n` elements, of the
        // element type `v` holds (`call_host` checked that it fits the parameter).
        unsafe {
            match v {
                Val::F64s(x) => core::ptr::copy_nonoverlapping(x.as_ptr(), p as *mut f64, n),
                Val::F32s(x) => core::ptr::copy_nonoverlapping(x.as_ptr(), p as *mut f32, n),
                Val::I64s(x) => core::ptr::copy_nonoverlapping(x.as_ptr(), p as *mut i64, n),
                _ => return false,
            }
        }
        true
    };
    gradlift_ir::engine::call_host(f, &slot.name, &slot.sig, &mut vals, write_back)
}

/// One argument of a borrowing host function, as its slots hold it.
#[derive(Copy, Clone)]
enum RawArg {
    /// A scalar of the type, its bits.
    Scalar(gradlift_ir::Type, u64),
    /// A slice: its address and length, element type, whether the parameter is
    /// `mut`, and whether it gets a copy (it overlaps an earlier slice argument,
    /// one of the two `mut`).
    Slice {
        p: usize,
        n: usize,
        elem: gradlift_ir::Elem,
        mutable: bool,
        copied: bool,
    },
}

impl RawArg {
    /// The bytes a slice covers, `p..p + bytes` (none for a scalar).
    fn bytes(self) -> (usize, usize) {
        match self {
            RawArg::Slice { p, n, elem, .. } => {
                let size = match elem {
                    gradlift_ir::Elem::F32 => 4,
                    _ => 8,
                };
                (p, n.saturating_mul(size))
            }
            RawArg::Scalar(..) => (0, 0),
        }
    }

    /// Whether two arguments share a byte of memory.
    fn overlaps(self, other: RawArg) -> bool {
        let ((a, m), (b, n)) = (self.bytes(), other.bytes());
        m > 0 && n > 0 && a < b.saturating_add(n) && b < a.saturating_add(m)
    }
}

/// The slice of `n` elements at `p`, lent as an [`Arg`] (writable if `mutable`).
///
/// # Safety
/// For `n > 0`, `p` is a live buffer of `n` `elem`s (writable if `mutable`) that
/// nothing else reads or writes while the `Arg` lives if `mutable`, or writes if
/// not; the caller picks a lifetime `'a` no longer than that.
unsafe fn lend_raw<'a>(p: usize, n: usize, elem: gradlift_ir::Elem, mutable: bool) -> Arg<'a> {
    use gradlift_ir::Elem;
    if n == 0 {
        // No memory is lent: an empty slice, whatever the address.
        return match (elem, mutable) {
            (Elem::F64, false) => Arg::F64s(&[]),
            (Elem::F32, false) => Arg::F32s(&[]),
            (Elem::I64, false) => Arg::I64s(&[]),
            (Elem::F64, true) => Arg::F64sMut(&mut []),
            (Elem::F32, true) => Arg::F32sMut(&mut []),
            (Elem::I64, true) => Arg::I64sMut(&mut []),
        };
    }
    // SAFETY: the function's contract.
    unsafe {
        match (elem, mutable) {
            (Elem::F64, false) => Arg::F64s(core::slice::from_raw_parts(p as *const f64, n)),
            (Elem::F32, false) => Arg::F32s(core::slice::from_raw_parts(p as *const f32, n)),
            (Elem::I64, false) => Arg::I64s(core::slice::from_raw_parts(p as *const i64, n)),
            (Elem::F64, true) => Arg::F64sMut(core::slice::from_raw_parts_mut(p as *mut f64, n)),
            (Elem::F32, true) => Arg::F32sMut(core::slice::from_raw_parts_mut(p as *mut f32, n)),
            (Elem::I64, true) => Arg::I64sMut(core::slice::from_raw_parts_mut(p as *mut i64, n)),
        }
    }
}

/// Calls a borrowing host function ([`HostArgsFn`](gradlift_ir::engine::HostArgsFn))
/// on the argument slots `args` of `slot`'s extern, following
/// [`gradlift_ir::engine::call_host_args`]: every slice is lent as it is, without a
/// copy or an allocation (for up to eight parameters), except one that overlaps an
/// earlier slice argument where one of the two is `mut`: that one gets a copy made
/// before the call, and the copies of `mut` parameters are written back after it,
/// in argument order, whatever it returned.
///
/// # Safety
/// As [`call_host`].
unsafe fn call_borrowed(
    slot: &HostSlot,
    f: &gradlift_ir::engine::HostArgsFn,
    args: *const u64,
) -> Result<Vec<gradlift_ir::Val>, gradlift_ir::ErrorKind> {
    use gradlift_ir::{ErrorKind, Type, Val};
    // SAFETY (for every read of `args` below): `k` stays below the signature's slot
    // count, which the caller's contract covers.
    let arg = |k: usize| unsafe { *args.add(k) };
    let mut raw: smallvec::SmallVec<[RawArg; 8]> = smallvec::SmallVec::new();
    let mut k = 0;
    for &ty in &slot.sig.params {
        let a = match ty {
            Type::Slice { elem, mutable } => {
                let mut a = RawArg::Slice {
                    p: arg(k) as usize,
                    n: arg(k + 1) as usize,
                    elem,
                    mutable,
                    copied: false,
                };
                k += 1;
                let aliased = raw.iter().any(|&b| {
                    a.overlaps(b) && (mutable || matches!(b, RawArg::Slice { mutable: true, .. }))
                });
                if let RawArg::Slice { copied, .. } = &mut a {
                    *copied = aliased;
                }
                a
            }
            ty => RawArg::Scalar(ty, arg(k)),
        };
        k += 1;
        raw.push(a);
    }
    // The copies of overlapping arguments, made before anything is lent (an
    // allocation only for a call with such arguments).
    let mut copies: Vec<Val> = Vec::new();
    for &a in &raw {
        if let RawArg::Slice {
            p,
            n,
            elem,
            copied: true,
            ..
        } = a
        {
            // SAFETY: a live buffer of `n` elements (the contract); nothing is lent
            // yet.
            copies.push(unsafe { lend_raw(p, n, elem, false) }.to_val());
        }
    }
    let result = {
        let mut copied = copies.iter_mut();
        let mut lent: smallvec::SmallVec<[Arg<'_>; 8]> = smallvec::SmallVec::new();
        for &a in &raw {
            lent.push(match a {
                RawArg::Scalar(Type::F64, b) => Arg::F64(f64::from_bits(b)),
                RawArg::Scalar(Type::F32, b) => Arg::F32(f32::from_bits(b as u32)),
                RawArg::Scalar(Type::I64, b) => Arg::I64(b as i64),
                RawArg::Scalar(_, b) => Arg::Bool(b & 0xff != 0),
                RawArg::Slice {
                    copied: true,
                    mutable,
                    ..
                } => match copied.next() {
                    Some(v) if mutable => v.as_arg(),
                    Some(v) => Arg::from(&*v),
                    None => return Err(ErrorKind::Internal("a copy went missing".into())),
                },
                RawArg::Slice {
                    p,
                    n,
                    elem,
                    mutable,
                    copied: false,
                } => {
                    // SAFETY: a live buffer of `n` elements, writable if `mutable`
                    // (the contract), that nothing outside this call touches. Among
                    // the arguments lent directly, no two overlap where either is
                    // `mut`: the later of such two got a copy above. So a `mut`
                    // slice is the only reference to its memory, and a read-only
                    // one shares its memory with read-only ones only. The `Arg`s
                    // live until the end of this block, within the call.
                    unsafe { lend_raw(p, n, elem, mutable) }
                }
            });
        }
        gradlift_ir::engine::call_host_args(f, &slot.name, &slot.sig, &mut lent)
    };
    // The `mut` copies go back, in argument order, whatever the call returned.
    let mut copied = copies.iter();
    for &a in &raw {
        if let RawArg::Slice {
            p,
            n,
            mutable,
            copied: true,
            ..
        } = a
            && let Some(v) = copied.next()
            && mutable
            && v.slice_len() == Some(n)
        {
            // SAFETY: a writable live buffer of `n` elements of the type `v` holds
            // (the copy was made from it with its element type); nothing lent
            // refers to memory any more, and the copy is memory of its own.
            unsafe {
                match v {
                    Val::F64s(x) => core::ptr::copy_nonoverlapping(x.as_ptr(), p as *mut f64, n),
                    Val::F32s(x) => core::ptr::copy_nonoverlapping(x.as_ptr(), p as *mut f32, n),
                    Val::I64s(x) => core::ptr::copy_nonoverlapping(x.as_ptr(), p as *mut i64, n),
                    _ => {}
                }
            }
        }
    }
    result
}

/// The room left for Rust functions called from generated code (math functions,
/// the arena's slow path and the allocator under it), beyond the frames of compiled
/// functions themselves.
pub(crate) const HELPER_STACK: usize = 128 * 1024;

/// The lowest usable address of the current thread's stack (its guard page
/// excluded), if the platform says.
pub(crate) fn stack_low() -> Option<usize> {
    use std::cell::Cell;
    thread_local! {
        static LOW: Cell<Option<usize>> = const { Cell::new(None) };
    }
    LOW.with(|low| {
        if low.get().is_none() {
            low.set(query_stack_low());
        }
        low.get()
    })
}

#[cfg(target_os = "linux")]
fn query_stack_low() -> Option<usize> {
    let mut attr = core::mem::MaybeUninit::<libc::pthread_attr_t>::uninit();
    let mut addr: *mut libc::c_void = core::ptr::null_mut();
    let mut size: libc::size_t = 0;
    // SAFETY: `pthread_getattr_np` initialises `attr` for the calling thread when it
    // returns 0; only then is it read (by `pthread_attr_getstack`, which writes the
    // two out-parameters) and destroyed, once.
    let ok = unsafe {
        if libc::pthread_getattr_np(libc::pthread_self(), attr.as_mut_ptr()) != 0 {
            return None;
        }
        let ok = libc::pthread_attr_getstack(attr.as_ptr(), &mut addr, &mut size) == 0;
        libc::pthread_attr_destroy(attr.as_mut_ptr());
        ok
    };
    if !ok || addr.is_null() || size == 0 {
        return None;
    }
    // The guard page(s) lie inside the reported range on some systems: skip 64 KiB.
    Some(addr as usize + 64 * 1024)
}

#[cfg(not(target_os = "linux"))]
fn query_stack_low() -> Option<usize> {
    None
}

/// The stack limit for a top-level call made from a frame at `sp`: call sites
/// below it fail. Without the thread's bounds, assumes 512 KiB are left below `sp`.
pub(crate) fn stack_limit(sp: usize, frame_margin: usize) -> usize {
    let low = stack_low().unwrap_or_else(|| sp.saturating_sub(512 * 1024));
    low.saturating_add(frame_margin)
        .saturating_add(HELPER_STACK)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_arena_grows_by_chunks_and_coalesces_on_reset() {
        let mut ctx = Ctx::new();
        ctx.reset(10, 0);
        assert_eq!((ctx.arena_cap, ctx.arena_used), (0, 0));
        let p = ctx.arena_grow(10, 8);
        assert_ne!(p, 0);
        assert_eq!(ctx.arena_used, 80);
        assert!(ctx.arena_contains(p, 80));
        let big = ctx.arena_grow(1 << 16, 8);
        assert_ne!(big, 0);
        assert_eq!(ctx.chunks.len(), 2);
        assert_eq!(ctx.arena_grow(u64::MAX, 8), 0);
        let total = ctx.arena_bytes();
        ctx.reset(10, 0);
        assert_eq!(ctx.chunks.len(), 1);
        assert_eq!(ctx.arena_bytes(), total);
        assert_eq!((ctx.arena_chunk, ctx.arena_used), (0, 0));
        assert_eq!(ctx.arena_cap, total);
    }

    #[test]
    fn the_stack_bounds_are_known_on_linux() {
        let here = 0u8;
        let sp = &here as *const u8 as usize;
        if cfg!(target_os = "linux") {
            let low = stack_low().unwrap();
            assert!(low < sp, "{low:x} {sp:x}");
        }
        assert!(stack_limit(sp, 0) < sp);
    }
}
