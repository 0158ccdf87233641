//! The runtime: the context every compiled function receives ([`Ctx`]), the
//! [`Workspace`] that owns it, the bump arena behind `alloc`, and the bounds of the
//! native stack.
//!
//! Generated code reads and writes the `#[repr(C)]` prefix of [`Ctx`] at the offsets
//! of [`Offsets`]; everything after the prefix is Rust's own (the arena's chunks).
//! Pointers in the prefix are kept as `usize`, so that a `Ctx` (and a `Workspace`) is
//! plain data: it may move to another thread between calls.

use core::mem::offset_of;

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
}

/// The context of a call: every compiled function takes a pointer to one as its
/// hidden first parameter.
///
/// The fields up to `tape_bufs_cap` are the ABI between generated code and Rust
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
    /// Reserved for the tape (the next step): the scalar stack (address, length,
    /// capacity) ...
    pub(crate) tape_ptr: usize,
    pub(crate) tape_len: usize,
    pub(crate) tape_cap: usize,
    /// ... and the table of tape buffers (address, length, capacity).
    pub(crate) tape_bufs_ptr: usize,
    pub(crate) tape_bufs_len: usize,
    pub(crate) tape_bufs_cap: usize,
    /// The arena's memory: chunks that never move while they exist, so a slice of
    /// an earlier chunk stays valid when a later one is added.
    chunks: Vec<Box<[u64]>>,
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
}

/// The smallest arena chunk, in 8-byte words (32 KiB).
const MIN_CHUNK_WORDS: usize = 4096;

/// The most elements one `alloc` may ask for: beyond this its byte count would not
/// fit an `isize`.
const MAX_ALLOC_BYTES: u128 = isize::MAX as u128;

impl Ctx {
    fn new() -> Ctx {
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
            tape_ptr: 0,
            tape_len: 0,
            tape_cap: 0,
            tape_bufs_ptr: 0,
            tape_bufs_len: 0,
            tape_bufs_cap: 0,
            chunks: Vec::new(),
        }
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
        if self.chunks.len() > 1 {
            let words: usize = self.chunks.iter().map(|c| c.len()).sum();
            self.chunks.clear();
            if let Some(chunk) = zeroed_words(words) {
                self.chunks.push(chunk);
            }
        }
        self.select_chunk(0, 0);
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
}

/// `words` zeroed 8-byte words, or `None` if the memory cannot be had.
fn zeroed_words(words: usize) -> Option<Box<[u64]>> {
    let mut v: Vec<u64> = Vec::new();
    v.try_reserve_exact(words).ok()?;
    v.resize(words, 0);
    Some(v.into_boxed_slice())
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
        }
    }

    /// Sets the deepest call nesting allowed (the outermost call is depth 1), as the
    /// interpreter's `Limits::max_depth`.
    pub fn with_max_depth(mut self, max_depth: usize) -> Workspace {
        self.max_depth = max_depth;
        self
    }

    /// The depth limit.
    pub fn max_depth(&self) -> usize {
        self.max_depth
    }

    /// The bytes the arena for `alloc` holds now (it keeps them between calls).
    pub fn arena_bytes(&self) -> usize {
        self.ctx.arena_bytes()
    }
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
