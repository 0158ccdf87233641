//! The reference interpreter: runs a module's functions on concrete values. It is the
//! engine for small jobs and the oracle that the JIT and derived code are checked
//! against, so it says exactly what every op means, and it never panics, whatever
//! module it is given.
//!
//! ```
//! use gradlift_ir::interp::{Interpreter, Val};
//! use gradlift_ir::{Elem, FunctionBuilder, Module, Signature, Type};
//!
//! // scale(x: mut [f64], c: f64): x[i] = c * x[i] for every i.
//! let mut module = Module::new();
//! let sig = Signature::new([Type::slice_mut(Elem::F64), Type::F64], []);
//! let id = module.declare("scale", sig).unwrap();
//! let mut b = FunctionBuilder::new(&module, id);
//! let (x, c) = (b.param(0), b.param(1));
//! let n = b.len(x);
//! let zero = b.iconst(0);
//! b.counted_loop(zero, n, &[], |b, i, _| {
//!     let xi = b.load(x, i);
//!     let y = b.fmul(c, xi);
//!     b.store(x, i, y);
//!     vec![]
//! });
//! b.ret(&[]);
//! let func = b.finish().unwrap();
//! module.define(id, func).unwrap();
//!
//! let mut args = [Val::F64s(vec![1.0, 2.0]), Val::F64(3.0)];
//! let out = Interpreter::new(&module).call(id, &mut args).unwrap();
//! assert!(out.is_empty());
//! assert_eq!(args[0], Val::F64s(vec![3.0, 6.0]));
//! ```
//!
//! # Semantics
//!
//! - **Floats** are computed in the operand's own type: `f32` arithmetic rounds in
//!   `f32`, and `sin`, `exp`, ... are `f32::sin`, `f32::exp`. The math functions are
//!   Rust's `std` (`log` is `ln`, `pow` is `powf`). `powi x, n` is `x.powi(n)` when `n`
//!   fits an `i32`, else `x.powf(n)`. `fmin`/`fmax` give NaN if either operand is NaN
//!   and order `-0.0` below `0.0`, as Cranelift's do. `fcmp` is IEEE.
//! - **Integers** wrap (`iadd`, `isub`, `imul`, `ineg`, and `i64::MIN / -1`); `idiv`
//!   and `irem` by zero are [`ErrorKind::DivisionByZero`]; `irem` takes the sign of
//!   the dividend. Shifts take the amount modulo 64; `ishr` is arithmetic. `icmp` is
//!   signed.
//! - **`cast`**: integer to float rounds to nearest, float to integer truncates toward
//!   zero and saturates (NaN gives 0), `f32` and `f64` convert with `as`, a `bool` is
//!   0 or 1. **`bitcast`** keeps the 64 bits.
//! - **Slices** refer to whole buffers (there is no sub-slicing). A slice argument is a
//!   buffer; every value referring to it sees every `store` into it, and after
//!   [`Interpreter::call`] the caller's `args` hold the final contents (including
//!   after an error). Returned slices come back as copies. `load` and `store` check
//!   bounds ([`ErrorKind::OutOfBounds`]). `alloc n` makes a zero-filled buffer that
//!   lives until its function returns ([`ErrorKind::NegativeAlloc`] for `n < 0`).
//! - **Phis** of a block read their values for the edge taken all at once (a parallel
//!   copy), so `%a = phi [body: %b]`, `%b = phi [body: %a]` swaps.
//! - **Calls** push a frame on a heap-allocated stack, never a Rust stack frame, so
//!   the depth of IR recursion is bounded only by [`Limits::max_depth`] (exceeding it
//!   is [`ErrorKind::RecursionLimit`], reported at the `call`). Extern functions run
//!   host functions bound with [`Interpreter::bind_extern`] or
//!   [`Interpreter::with_hosts`] (the protocols are [`engine::call_host`] and, for
//!   host functions that borrow their arguments, [`engine::call_host_args`]);
//!   they take no frame, and a panic in one is caught and becomes
//!   [`ErrorKind::ExternFailed`].
//! - **Fuel**: every phi, instruction and terminator executed costs one unit of
//!   [`Limits::fuel`]; [`ErrorKind::OutOfFuel`] names the statement that found the
//!   tank empty. [`Interpreter::steps`] counts the statements of the last call.
//!
//! # The tape
//!
//! The tape ops (see [`ops`](crate::ops#the-tape)) work on a tape that belongs to the
//! `Interpreter`, not to a call: it persists across calls of [`Interpreter::call`], so
//! a forward pass called first and its pullback called next on the same interpreter
//! see the same tape. It is one LIFO stack of scalars and a table of buffers.
//!
//! - `push` pushes its scalar; `pop T` pops the top scalar if it is a `T`. An empty
//!   stack is [`ErrorKind::TapeUnderflow`], a scalar of another type
//!   [`ErrorKind::TapeMismatch`] (and the tape is left as it was). The JIT checks
//!   the same way (a type tag per slot), unless its code was compiled without tape
//!   checks; then a `pop` of another type reads the bits pushed.
//! - `tape_alloc T, n` makes a zero-filled buffer like `alloc` (with the same errors),
//!   adds it to the table, and returns its handle, an `i64`. The buffer stays until
//!   [`Interpreter::reset_tape`]; no call frees it.
//! - `tape_view T, h` is a `mut` slice of the buffer with handle `h`: loads and stores
//!   through it read and write the tape's buffer, so every view of one buffer, in
//!   this call or a later one, sees every store. A handle that names no buffer of the
//!   table ([`ErrorKind::NoTapeBuffer`]: never made, forged, or made before the last
//!   reset) or a buffer of another element type
//!   ([`ErrorKind::TapeBufferMismatch`]) is an error.
//! - Handles carry the tape's generation, which each reset advances, so a stale
//!   handle is refused rather than naming a new buffer. Their encoding is unspecified
//!   (they are negative numbers here, so a handle used as a length or an index fails
//!   at once).
//! - A call that fails leaves the tape as it stood at the error.
//!   [`Interpreter::reset_tape`] empties it; [`Interpreter::tape`] says what it holds
//!   and the most bytes it has held.
//! - The verifier refuses to return a `tape_view` slice; if an unverified function
//!   returns one anyway, it comes back as a copy, like any slice (the buffer is alive,
//!   so nothing is unsafe).
//!
//! # Debug checks
//!
//! `trap_if %c, "message"` (see [`ops`](crate::ops#debug-checks)) reads its `bool`:
//! false does nothing, true ends the call with [`ErrorKind::Trap`] holding the
//! message (its `Display` is `trap: message`), reported like every runtime error at
//! the `trap_if` with its function and source position. Nothing is undone: stores
//! made before stay in the argument buffers, and the tape stays as the trap found
//! it. Derived code built in debug mode uses it to check its invariants.
//!
//! # Errors
//!
//! An [`RunError`] names the function, the op (`load`, `idiv`, `call`, `ret`,
//! `phi`, ...) and its source position. Program errors ([`ErrorKind::OutOfBounds`]
//! and the like) are the program's fault; [`ErrorKind::Malformed`] means the module
//! would not verify (the interpreter runs verified modules but checks everything it
//! meets, so a malformed one ends in this error, not a panic);
//! [`ErrorKind::Internal`] is a bug in the interpreter. After an error the same
//! interpreter can be called again (its tape as the error left it).
//!
//! # Design
//!
//! Each defined function is pre-resolved once (the `code` submodule): value slots become dense
//! indices into a frame's registers, constants are copied in from a template, and
//! every control-flow edge carries its phi copies. Registers of all frames live in one
//! vector and buffers in one stack, so a call allocates nothing but the growth of
//! those. The ops themselves are one `match` arm each (the `step` submodule). A slice
//! register says whether its buffer is on that stack or in the tape's table (the
//! `tape` submodule), which holds `tape_alloc` buffers, never moves them, and is
//! cleared only between calls.

mod code;
mod step;
mod tape;

use core::fmt;
use std::sync::Arc;

use cranelift_entity::EntityRef;

use self::code::{Code, Edge, Step, Term};
use self::step::{BufId, Buffer, Mem, Slot, buf_mut, fits, slot_type};
use self::tape::Tape;
use crate::engine::{self, Arg, Engine, Host, HostArgsFn, Hosts, check_args};
pub use crate::engine::{ErrorKind, RunError, TapeStats, Val};
use crate::entities::{Block, FuncId, Inst, Value};
use crate::function::{Pos, SourceMap};
use crate::module::{Body, Module};
use crate::ops::{Imm, Opcode};
use crate::types::{Scalar, Type};

/// Bounds on one interpreter call.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub struct Limits {
    /// The deepest call nesting allowed (the outermost call is depth 1).
    pub max_depth: usize,
    /// The most statements (instructions, phis and terminators) one call may execute;
    /// `None` for no bound.
    pub fuel: Option<u64>,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_depth: 10_000,
            fuel: None,
        }
    }
}

/// Why [`Interpreter::bind_extern`] refused a binding.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum BindError {
    /// The module has no function of that name.
    NoSuchFunction(String),
    /// The function is not `extern`.
    NotExtern(String),
}

impl fmt::Display for BindError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BindError::NoSuchFunction(n) => write!(f, "the module has no function @{n}"),
            BindError::NotExtern(n) => write!(f, "@{n} is not an extern function"),
        }
    }
}

impl std::error::Error for BindError {}

/// A call in progress.
#[derive(Copy, Clone, Debug)]
struct Frame {
    func: FuncId,
    /// Where the frame's registers start in [`Machine::regs`].
    base: usize,
    /// The height of [`Machine::bufs`] when the call began: its allocs lie above.
    bufs: usize,
    /// The block executing.
    block: u32,
    /// The next instruction (index into [`Code::insts`]); while a callee runs, the call.
    pc: u32,
}

/// The mutable state of one call: frames, registers, buffers.
#[derive(Default)]
struct Machine {
    frames: Vec<Frame>,
    regs: Vec<Slot>,
    bufs: Vec<Buffer>,
    /// Which argument each of the first buffers came from.
    arg_bufs: Vec<usize>,
    /// Scratch space for parallel copies.
    scratch: Vec<Slot>,
    steps: u64,
}

impl Machine {
    /// Drops every frame and buffer, keeping a little memory for the next call.
    fn clear(&mut self) {
        const KEEP: usize = 1 << 16;
        self.frames.clear();
        self.frames.shrink_to(KEEP);
        self.regs.clear();
        self.regs.shrink_to(KEEP);
        self.bufs.clear();
        self.bufs.shrink_to(KEEP);
        self.arg_bufs.clear();
    }
}

/// Runs functions of one module.
pub struct Interpreter<'m> {
    module: &'m Module,
    limits: Limits,
    /// The pre-resolved body of each defined function, by [`FuncId`] index.
    codes: Vec<Option<Code>>,
    /// The host binding of each extern function, by [`FuncId`] index.
    hosts: Vec<Option<Host>>,
    machine: Machine,
    /// What `push` saved and `tape_alloc` made, kept across calls.
    tape: Tape,
}

impl<'m> Interpreter<'m> {
    /// An interpreter for `module` with default [`Limits`]. Pre-resolves every
    /// defined function.
    pub fn new(module: &'m Module) -> Interpreter<'m> {
        let codes = module
            .funcs
            .values()
            .map(|d| d.function().map(|f| code::compile(module, d, f)))
            .collect();
        Interpreter {
            module,
            limits: Limits::default(),
            codes,
            hosts: module.funcs.values().map(|_| None).collect(),
            machine: Machine::default(),
            tape: Tape::default(),
        }
    }

    /// Sets the limits.
    pub fn with_limits(mut self, limits: Limits) -> Interpreter<'m> {
        self.limits = limits;
        self
    }

    /// The limits.
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// Binds the extern function `name` to a host function
    /// ([`HostFn`](engine::HostFn)), replacing any earlier binding.
    ///
    /// The function gets the arguments (slices as copies of their contents) and
    /// returns the results, following [`engine::call_host`]: what it writes into a
    /// `mut` slice parameter is copied back into the buffer (it must keep the
    /// length); writes into a read-only slice are dropped. An `Err`, a panic, and
    /// results that do not fit the signature become [`ErrorKind::ExternFailed`]. A
    /// slice result is a new buffer that lives until the calling function returns.
    pub fn bind_extern(
        &mut self,
        name: &str,
        f: impl Fn(&mut [Val]) -> Result<Vec<Val>, String> + Send + Sync + 'static,
    ) -> Result<(), BindError> {
        self.bind_shared(name, Host::Copied(Arc::new(f)))
    }

    /// Binds every function of `hosts` (of both kinds: [`Hosts::bind`] and
    /// [`Hosts::bind_args`]) whose name is an extern function of the module (the
    /// others are skipped), as the JIT's `compile_with` does, so both engines run
    /// one program alike.
    pub fn with_hosts(mut self, hosts: &Hosts) -> Interpreter<'m> {
        for (name, f) in hosts.all() {
            match self.bind_shared(name, f.clone()) {
                Ok(()) | Err(BindError::NoSuchFunction(_) | BindError::NotExtern(_)) => {}
            }
        }
        self
    }

    fn bind_shared(&mut self, name: &str, f: Host) -> Result<(), BindError> {
        let id = self
            .module
            .func_by_name(name)
            .ok_or_else(|| BindError::NoSuchFunction(name.to_string()))?;
        match (&self.module.funcs[id].body, self.hosts.get_mut(id.index())) {
            (Body::Extern, Some(slot)) => {
                *slot = Some(f);
                Ok(())
            }
            _ => Err(BindError::NotExtern(name.to_string())),
        }
    }

    /// The number of statements (phis, instructions, terminators) the last call
    /// executed, counting one that failed but not one refused for lack of fuel (so
    /// never more than [`Limits::fuel`]).
    pub fn steps(&self) -> u64 {
        self.machine.steps
    }

    /// What the tape holds now, and the most it has held (see the
    /// [module docs](self#the-tape)).
    pub fn tape(&self) -> TapeStats {
        let (scalars, buffers) = self.tape.len();
        let (bytes, peak_bytes) = self.tape.bytes();
        TapeStats {
            scalars,
            buffers,
            bytes,
            peak_bytes,
            capacity_bytes: 0,
            recomputed_steps: self.tape.recomputed(),
        }
    }

    /// Empties the tape, frees its buffers and forgets its peak; handles made before
    /// are stale from then on ([`ErrorKind::NoTapeBuffer`]). [`Interpreter::call`]
    /// never does: the tape persists across calls, so a pullback called after its
    /// forward pass finds what the forward pass saved. After a call that failed
    /// halfway, this puts the tape back in a known state.
    pub fn reset_tape(&mut self) {
        self.tape.clear();
    }

    /// Calls the function named `name` (without `@`); see [`Interpreter::call`].
    pub fn call_by_name(&mut self, name: &str, args: &mut [Val]) -> Result<Vec<Val>, RunError> {
        match self.module.func_by_name(name) {
            Some(id) => self.call(id, args),
            None => Err(RunError::refused(
                name,
                ErrorKind::BadArguments(format!("the module has no function @{name}")),
            )),
        }
    }

    /// Calls `func` with `args`; `mut` slice arguments are updated in place.
    ///
    /// The arguments must fit the signature: one per parameter, a scalar of the
    /// parameter's type or a slice of its element type (for `[T]` and `mut [T]`
    /// alike), else [`ErrorKind::BadArguments`]. The contents of slice arguments
    /// come back in `args` even when the call fails. Calling an extern function
    /// directly hands `args` itself to its host closure.
    ///
    /// The tape is not cleared: the call starts from what earlier calls left on it,
    /// and leaves on it what it pushed and did not pop and every buffer it made, even
    /// when it fails (see [`Interpreter::reset_tape`]).
    pub fn call(&mut self, func: FuncId, args: &mut [Val]) -> Result<Vec<Val>, RunError> {
        self.machine.clear();
        self.machine.steps = 0;
        let result = self.start(func, args);
        // The argument buffers are the first ones; give them back, whatever happened.
        let Machine { bufs, arg_bufs, .. } = &mut self.machine;
        for (buf, &k) in bufs.iter_mut().zip(arg_bufs.iter()) {
            if let Some(arg) = args.get_mut(k) {
                *arg = buf.take_val();
            }
        }
        self.machine.clear();
        result
    }

    /// Checks the arguments, sets up the outermost frame and runs it.
    fn start(&mut self, func: FuncId, args: &mut [Val]) -> Result<Vec<Val>, RunError> {
        let module = self.module;
        let refuse = RunError::refused;
        let Some(decl) = module.funcs.get(func) else {
            let kind = ErrorKind::BadArguments(format!("the module has no function {func}"));
            return Err(refuse(&func.to_string(), kind));
        };
        let name = decl.name.as_str();
        let sig = &decl.sig;
        check_args(name, sig, args).map_err(|k| refuse(name, k))?;
        if self.limits.max_depth == 0 {
            return Err(refuse(name, ErrorKind::RecursionLimit(0)));
        }
        let code = match (&decl.body, self.codes.get(func.index())) {
            (Body::Defined(_), Some(Some(code))) => code,
            (Body::Extern, _) => {
                let Some(Some(host)) = self.hosts.get(func.index()) else {
                    return Err(refuse(name, ErrorKind::UnboundExtern(name.to_string())));
                };
                let out = match host {
                    Host::Copied(f) => engine::call_host(&**f, name, sig, args, |_, _| true),
                    Host::Borrowed(f) => {
                        // The caller's values, lent: their slices are distinct.
                        let mut lent: smallvec::SmallVec<[Arg<'_>; 8]> = args
                            .iter_mut()
                            .zip(&sig.params)
                            .map(|(v, ty)| match ty.is_mut_slice() {
                                true => v.as_arg(),
                                false => Arg::from(&*v),
                            })
                            .collect();
                        engine::call_host_args(&**f, name, sig, &mut lent)
                    }
                };
                return out.map_err(|k| refuse(name, k));
            }
            (Body::Declared, _) => {
                let kind = ErrorKind::Malformed(format!("@{name} is declared but not defined"));
                return Err(refuse(name, kind));
            }
            (Body::Defined(_), _) => {
                let kind = ErrorKind::Internal(format!("@{name} was not pre-resolved"));
                return Err(refuse(name, kind));
            }
        };
        let entry = match &code.entry {
            Ok(b) => *b,
            Err(m) => return Err(refuse(name, ErrorKind::Malformed(m.clone()))),
        };
        let m = &mut self.machine;
        m.regs.extend_from_slice(&code.template);
        for (k, (arg, &ty)) in args.iter_mut().zip(&sig.params).enumerate() {
            let s = match arg {
                Val::F64(x) => Slot::F64(*x),
                Val::F32(x) => Slot::F32(*x),
                Val::I64(x) => Slot::I64(*x),
                Val::Bool(x) => Slot::Bool(*x),
                slice => {
                    let Some(buf) = Buffer::take_from(slice) else {
                        return Err(bug(module, Some(func), "a Val neither scalar nor slice"));
                    };
                    let Some(id) = BufId::frame(m.bufs.len()) else {
                        return Err(bug(module, Some(func), "too many argument buffers"));
                    };
                    m.bufs.push(buf);
                    m.arg_bufs.push(k);
                    Slot::Buf(id, ty.is_mut_slice())
                }
            };
            if let Some(&p) = code.params.get(k) {
                m.regs[p as usize] = s;
            }
        }
        m.frames.push(Frame {
            func,
            base: 0,
            bufs: m.bufs.len(),
            block: entry,
            pc: code.blocks[entry as usize].start,
        });
        self.run()
    }

    /// The run loop: executes the top frame until the outermost one returns.
    fn run(&mut self) -> Result<Vec<Val>, RunError> {
        let module = self.module;
        let max_depth = self.limits.max_depth;
        let fuel = self.limits.fuel.unwrap_or(u64::MAX);
        let codes = &self.codes;
        let hosts = &self.hosts;
        let tape = &mut self.tape;
        let Machine {
            frames,
            regs: regfile,
            bufs,
            scratch,
            steps,
            ..
        } = &mut self.machine;

        'frames: loop {
            let Some(&frame) = frames.last() else {
                return Err(bug(module, None, "no frame to run"));
            };
            let fid = frame.func;
            let Some(Some(code)) = codes.get(fid.index()) else {
                return Err(bug(module, Some(fid), "a frame of a function without code"));
            };
            let base = frame.base;
            let mut block = frame.block as usize;
            let mut pc = frame.pc as usize;
            let Some(regs) = regfile.get_mut(base..base + code.template.len()) else {
                return Err(bug(module, Some(fid), "a frame beyond the registers"));
            };
            let mut cb = code.blocks[block];
            loop {
                if pc < cb.end as usize {
                    let ci = code.insts[pc];
                    *steps += 1;
                    if *steps > fuel {
                        *steps = fuel;
                        let op = inst_name(module, fid, ci.inst);
                        return Err(at_inst(
                            module,
                            fid,
                            ci.inst,
                            op,
                            ErrorKind::OutOfFuel(fuel),
                        ));
                    }
                    match ci.step {
                        Step::Op { op, imm, args, dst } => {
                            let r = step::exec(op, imm, args, dst, regs, bufs, tape);
                            if let Err(kind) = r {
                                return Err(at_inst(module, fid, ci.inst, op.name(), kind));
                            }
                        }
                        Step::Call {
                            callee,
                            args,
                            results,
                        } => {
                            let fail = |kind| at_inst(module, fid, ci.inst, "call", kind);
                            if let Some(Some(ccode)) = codes.get(callee.index()) {
                                if frames.len() >= max_depth {
                                    return Err(fail(ErrorKind::RecursionLimit(max_depth)));
                                }
                                let entry = match &ccode.entry {
                                    Ok(b) => *b as usize,
                                    Err(m) => {
                                        let cname = module.name(callee);
                                        let m = format!("@{cname} cannot run: {m}");
                                        return Err(fail(ErrorKind::Malformed(m)));
                                    }
                                };
                                if let Some(top) = frames.last_mut() {
                                    top.block = block as u32;
                                    top.pc = pc as u32;
                                }
                                let arg_slots = &code.lists[args.range()];
                                let callee_frame = Frame {
                                    func: callee,
                                    base: regfile.len(),
                                    bufs: bufs.len(),
                                    block: entry as u32,
                                    pc: ccode.blocks[entry].start,
                                };
                                let mem = Mem {
                                    frames: bufs,
                                    tape: &*tape,
                                };
                                bind_args(
                                    module,
                                    ccode,
                                    callee_frame,
                                    base,
                                    arg_slots,
                                    regfile,
                                    mem,
                                )
                                .map_err(fail)?;
                                frames.push(callee_frame);
                                continue 'frames;
                            }
                            let lists = &code.lists;
                            call_host(
                                module,
                                hosts,
                                callee,
                                &lists[args.range()],
                                &lists[results.range()],
                                regs,
                                bufs,
                                tape,
                            )
                            .map_err(fail)?;
                        }
                        Step::Trap { cond, msg } => match regs[cond as usize] {
                            Slot::Bool(false) => {}
                            Slot::Bool(true) => {
                                let message = code.messages.get(msg as usize).cloned();
                                let kind = match message {
                                    Some(m) => ErrorKind::Trap(m),
                                    None => ErrorKind::Internal(format!(
                                        "trap_if message {msg} was not pre-resolved"
                                    )),
                                };
                                return Err(at_inst(module, fid, ci.inst, "trap_if", kind));
                            }
                            s => {
                                let kind = ErrorKind::Malformed(format!(
                                    "trap_if tests {}, not a bool",
                                    slot_type(s, Mem { frames: bufs, tape })
                                ));
                                return Err(at_inst(module, fid, ci.inst, "trap_if", kind));
                            }
                        },
                        Step::Bad(msg) => {
                            let op = inst_name(module, fid, ci.inst);
                            let kind = ErrorKind::Malformed(code.msgs[msg as usize].clone());
                            return Err(at_inst(module, fid, ci.inst, op, kind));
                        }
                    }
                    pc += 1;
                    continue;
                }

                // The terminator.
                let here = Block::new(block);
                *steps += 1;
                if *steps > fuel {
                    *steps = fuel;
                    let kind = ErrorKind::OutOfFuel(fuel);
                    return Err(at_term(module, fid, here, cb.term.name(), kind));
                }
                let edge = match cb.term {
                    Term::Jump(edge) => edge,
                    Term::Br { cond, then, els } => match regs[cond as usize] {
                        Slot::Bool(true) => then,
                        Slot::Bool(false) => els,
                        s => {
                            let kind = ErrorKind::Malformed(format!(
                                "br tests {}, not a bool",
                                slot_type(s, Mem { frames: bufs, tape })
                            ));
                            return Err(at_term(module, fid, here, "br", kind));
                        }
                    },
                    Term::Ret(vals) => {
                        let fail = |kind| at_term(module, fid, here, "ret", kind);
                        let vals = &code.lists[vals.range()];
                        let mem = Mem {
                            frames: bufs,
                            tape: &*tape,
                        };
                        for (k, &v) in vals.iter().enumerate() {
                            let s = regs[v as usize];
                            check_result(s, code.result_tys[k], frame.bufs, mem).map_err(fail)?;
                        }
                        frames.pop();
                        let Some(caller) = frames.last_mut() else {
                            return vals
                                .iter()
                                .map(|&v| to_val(regs[v as usize], mem))
                                .collect::<Result<Vec<Val>, ErrorKind>>()
                                .map_err(fail);
                        };
                        let Some(Some(ccode)) = codes.get(caller.func.index()) else {
                            return Err(bug(module, Some(fid), "a caller without code"));
                        };
                        let Step::Call { results, .. } = ccode.insts[caller.pc as usize].step
                        else {
                            return Err(bug(module, Some(fid), "returned to a non-call"));
                        };
                        let dsts = &ccode.lists[results.range()];
                        if dsts.len() != vals.len() {
                            return Err(bug(module, Some(fid), "result count mismatch"));
                        }
                        for (&d, &v) in dsts.iter().zip(vals) {
                            regfile[caller.base + d as usize] = regfile[base + v as usize];
                        }
                        regfile.truncate(base);
                        bufs.truncate(frame.bufs);
                        caller.pc += 1;
                        continue 'frames;
                    }
                    Term::Bad { op, msg } => {
                        let kind = ErrorKind::Malformed(code.msgs[msg as usize].clone());
                        return Err(at_term(module, fid, here, op, kind));
                    }
                };
                // Take the edge: the target's phis, as one parallel copy.
                let (target, moves) = match edge {
                    Edge::To { block, moves } => (block as usize, moves),
                    Edge::Bad(msg) => {
                        let kind = ErrorKind::Malformed(code.msgs[msg as usize].clone());
                        return Err(at_term(module, fid, here, cb.term.name(), kind));
                    }
                };
                take_edge(&code.moves[moves.range()], regs, scratch, steps, fuel)
                    .map_err(|phi| at_phi(module, fid, phi, ErrorKind::OutOfFuel(fuel)))?;
                block = target;
                cb = code.blocks[block];
                pc = cb.start as usize;
            }
        }
    }
}

/// The interpreter as an [`Engine`]: borrowed arguments are copied into its
/// buffers, and `mut` slices copied back after the call (also after an error), so
/// it computes what [`Interpreter::call`] computes.
impl Engine for Interpreter<'_> {
    fn call_args(
        &mut self,
        func: FuncId,
        args: &mut [Arg<'_>],
        out: &mut Vec<Val>,
    ) -> Result<(), RunError> {
        out.clear();
        if let Some(decl) = self.module.funcs.get(func) {
            check_args(&decl.name, &decl.sig, args)
                .map_err(|k| RunError::refused(&decl.name, k))?;
        }
        let mut vals: Vec<Val> = args.iter().map(Arg::to_val).collect();
        let result = self.call(func, &mut vals);
        for (a, v) in args.iter_mut().zip(&vals) {
            a.copy_from(v);
        }
        out.extend(result?);
        Ok(())
    }

    fn tape(&self) -> TapeStats {
        Interpreter::tape(self)
    }

    fn reset_tape(&mut self) {
        Interpreter::reset_tape(self);
    }
}

/// Executes the phi copies `moves` of an edge, in parallel. On running out of fuel,
/// returns the phi that found the tank empty.
#[inline]
fn take_edge(
    moves: &[code::Move],
    regs: &mut [Slot],
    scratch: &mut Vec<Slot>,
    steps: &mut u64,
    fuel: u64,
) -> Result<(), Value> {
    if moves.is_empty() {
        return Ok(());
    }
    let room = fuel.saturating_sub(*steps);
    if (moves.len() as u64) > room {
        *steps = fuel;
        return Err(Value::new(moves[room as usize].dst as usize));
    }
    *steps += moves.len() as u64;
    if let [m] = moves {
        regs[m.dst as usize] = regs[m.src as usize];
    } else {
        scratch.clear();
        scratch.extend(moves.iter().map(|m| regs[m.src as usize]));
        for (m, &s) in moves.iter().zip(scratch.iter()) {
            regs[m.dst as usize] = s;
        }
    }
    Ok(())
}

/// Makes the registers of `frame`, a new frame of `code`, and binds its parameters
/// to the caller's argument slots `args` (relative to the caller's `base`).
fn bind_args(
    module: &Module,
    code: &Code,
    frame: Frame,
    base: usize,
    args: &[u32],
    regfile: &mut Vec<Slot>,
    mem: Mem<'_>,
) -> Result<(), ErrorKind> {
    regfile.extend_from_slice(&code.template);
    for (k, ((&a, &p), &ty)) in args
        .iter()
        .zip(&code.params)
        .zip(&code.param_tys)
        .enumerate()
    {
        let s = bind_param(regfile[base + a as usize], ty, mem).map_err(|found| {
            let name = module.name(frame.func);
            ErrorKind::Malformed(format!(
                "argument {} of @{name} must be {ty}, found {found}",
                k + 1
            ))
        })?;
        regfile[frame.base + p as usize] = s;
    }
    Ok(())
}

/// The slot a callee's parameter of type `ty` gets for the argument `s`: the same,
/// with a slice's writability taken from the parameter. `Err` has the argument's type.
fn bind_param(s: Slot, ty: Type, mem: Mem<'_>) -> Result<Slot, String> {
    if !fits(s, ty, mem) {
        return Err(slot_type(s, mem));
    }
    Ok(match s {
        Slot::Buf(id, _) => Slot::Buf(id, ty.is_mut_slice()),
        s => s,
    })
}

/// Checks a returned value against its declared type, and that it is not a buffer
/// of the returning frame (those die with it; tape buffers do not).
fn check_result(s: Slot, ty: Type, frame_bufs: usize, mem: Mem<'_>) -> Result<(), ErrorKind> {
    if !fits(s, ty, mem) {
        let found = slot_type(s, mem);
        return Err(ErrorKind::Malformed(format!(
            "ret returns {found} where the function declares {ty}"
        )));
    }
    if let Slot::Buf(id, _) = s
        && id.frame_index().is_some_and(|i| i >= frame_bufs)
    {
        return Err(ErrorKind::Malformed(
            "ret returns a buffer the function allocated".into(),
        ));
    }
    Ok(())
}

/// The [`Val`] of a slot (a copy, for a slice).
fn to_val(s: Slot, mem: Mem<'_>) -> Result<Val, ErrorKind> {
    Ok(match s {
        Slot::F64(x) => Val::F64(x),
        Slot::F32(x) => Val::F32(x),
        Slot::I64(x) => Val::I64(x),
        Slot::Bool(x) => Val::Bool(x),
        Slot::Buf(id, _) => match mem.get(id) {
            Some(b) => b.to_val(),
            None => return Err(ErrorKind::Internal(format!("buffer {id:?} was freed"))),
        },
        Slot::Undef => {
            return Err(ErrorKind::Malformed(
                "uses a value before it is defined".into(),
            ));
        }
    })
}

/// What the op `op` with immediate `imm` computes from the constant operands `args`,
/// by the interpreter's own definition (the code its run loop executes, so the two
/// cannot disagree): `Some(Ok(c))` is the result, `Some(Err(kind))` the runtime error
/// the op raises (`idiv` by zero) or [`ErrorKind::Malformed`] for operands of the
/// wrong types. `None` for an op whose result is not a function of its scalar
/// operands alone (`len`, memory, calls, the tape, `trap_if`) and for a wrong number
/// of operands. The optimiser folds constants with it.
///
/// ```
/// use gradlift_ir::interp::{ErrorKind, eval_scalar_op};
/// use gradlift_ir::{Imm, Opcode, Scalar};
///
/// let sum = eval_scalar_op(Opcode::Fadd, Imm::None, &[Scalar::F64(1.0), Scalar::F64(2.0)]);
/// assert_eq!(sum, Some(Ok(Scalar::F64(3.0))));
/// let div = eval_scalar_op(Opcode::Idiv, Imm::None, &[Scalar::I64(1), Scalar::I64(0)]);
/// assert_eq!(div, Some(Err(ErrorKind::DivisionByZero)));
/// assert_eq!(eval_scalar_op(Opcode::Load, Imm::None, &[]), None);
/// ```
pub fn eval_scalar_op(op: Opcode, imm: Imm, args: &[Scalar]) -> Option<Result<Scalar, ErrorKind>> {
    let scalar = op.shape().is_scalar();
    if !scalar || op.arity() != Some(args.len()) {
        return None;
    }
    // One instruction on a frame of its own: operands in registers 0..n, the result
    // in register 3, no buffers.
    let mut regs = [Slot::Undef; 4];
    for (r, &c) in regs.iter_mut().zip(args) {
        *r = Slot::from(c);
    }
    let mut tape = Tape::default();
    if let Err(kind) = step::exec(op, imm, [0, 1, 2], 3, &mut regs, &mut Vec::new(), &mut tape) {
        return Some(Err(kind));
    }
    Some(match regs[3] {
        Slot::F64(x) => Ok(Scalar::F64(x)),
        Slot::F32(x) => Ok(Scalar::F32(x)),
        Slot::I64(x) => Ok(Scalar::I64(x)),
        Slot::Bool(x) => Ok(Scalar::Bool(x)),
        Slot::Undef | Slot::Buf(..) => Err(ErrorKind::Internal(format!(
            "{op} of scalars made no scalar"
        ))),
    })
}

/// Calls the extern `callee` from inside a frame: arguments from `args` slots of
/// `regs`, results into `results` slots. For a [`Host::Copied`] function slices are
/// copied from and back into `bufs` or `tape`; a [`Host::Borrowed`] one borrows
/// them ([`call_borrowed`]).
#[allow(clippy::too_many_arguments)]
fn call_host(
    module: &Module,
    hosts: &[Option<Host>],
    callee: FuncId,
    args: &[u32],
    results: &[u32],
    regs: &mut [Slot],
    bufs: &mut Vec<Buffer>,
    tape: &mut Tape,
) -> Result<(), ErrorKind> {
    let Some(decl) = module.funcs.get(callee) else {
        return Err(ErrorKind::Internal(format!("no function {callee}")));
    };
    let name = decl.name.as_str();
    let host = match (&decl.body, hosts.get(callee.index())) {
        (Body::Extern, Some(Some(host))) => host,
        (Body::Extern, _) => return Err(ErrorKind::UnboundExtern(name.to_string())),
        (Body::Declared, _) => {
            return Err(ErrorKind::Malformed(format!(
                "@{name} is declared but not defined"
            )));
        }
        (Body::Defined(_), _) => {
            return Err(ErrorKind::Internal(format!("@{name} was not pre-resolved")));
        }
    };
    let sig = &decl.sig;
    let mem = Mem {
        frames: bufs,
        tape: &*tape,
    };
    for (k, (&a, &ty)) in args.iter().zip(&sig.params).enumerate() {
        if let Err(found) = bind_param(regs[a as usize], ty, mem) {
            return Err(ErrorKind::Malformed(format!(
                "argument {} of @{name} must be {ty}, found {found}",
                k + 1
            )));
        }
    }
    let out = match host {
        Host::Copied(f) => {
            let mut vals = Vec::with_capacity(args.len());
            for &a in args {
                vals.push(to_val(regs[a as usize], mem)?);
            }
            engine::call_host(&**f, name, sig, &mut vals, |k, v| {
                match regs[args[k] as usize] {
                    Slot::Buf(id, _) => buf_mut(id, bufs, tape).is_some_and(|b| b.copy_from(v)),
                    _ => false,
                }
            })?
        }
        Host::Borrowed(f) => call_borrowed(&**f, name, sig, args, regs, bufs, tape)?,
    };
    for ((&d, mut v), &ty) in results.iter().zip(out).zip(&sig.results) {
        regs[d as usize] = match &mut v {
            Val::F64(x) => Slot::F64(*x),
            Val::F32(x) => Slot::F32(*x),
            Val::I64(x) => Slot::I64(*x),
            Val::Bool(x) => Slot::Bool(*x),
            slice => {
                let id = BufId::frame(bufs.len())
                    .ok_or_else(|| ErrorKind::Internal("too many buffers".into()))?;
                let Some(buf) = Buffer::take_from(slice) else {
                    return Err(ErrorKind::Internal("a Val neither scalar nor slice".into()));
                };
                bufs.push(buf);
                Slot::Buf(id, ty.is_mut_slice())
            }
        };
    }
    Ok(())
}

/// How [`call_borrowed`] passes one argument.
#[derive(Copy, Clone)]
enum Pass {
    /// A scalar, by value.
    Scalar(Slot),
    /// The slice in buffer `.0`, to a parameter that is `mut` if `.1`, lent directly
    /// (`.2` false) or as a copy (`.2` true: it shares its buffer with an earlier
    /// slice argument, one of the two `mut`).
    Slice(BufId, bool, bool),
}

/// A buffer taken out of its place for the call, lent to one `mut` parameter or
/// to any number of read-only ones.
enum Lend<'a> {
    Mut(&'a mut Buffer),
    Shared(&'a Buffer),
    Gone,
}

/// A buffer lent read-only.
fn lend(b: &Buffer) -> Arg<'_> {
    match b {
        Buffer::F64(v) => Arg::F64s(v),
        Buffer::F32(v) => Arg::F32s(v),
        Buffer::I64(v) => Arg::I64s(v),
    }
}

/// A buffer lent writable.
fn lend_mut(b: &mut Buffer) -> Arg<'_> {
    match b {
        Buffer::F64(v) => Arg::F64sMut(v),
        Buffer::F32(v) => Arg::F32sMut(v),
        Buffer::I64(v) => Arg::I64sMut(v),
    }
}

/// Calls a host function that borrows its arguments ([`HostArgsFn`]) on the
/// (checked) argument slots `args` of `regs`.
///
/// Each buffer lent directly is taken out of `bufs` or `tape` for the call (an
/// empty vector in its place; no allocation) and put back afterwards, whatever
/// happened. A slice argument that shares its buffer with an earlier one, one of
/// the two `mut`, gets a copy made before the call; the copies of `mut` parameters
/// are written back after the call, in argument order (see [`HostArgsFn`]).
fn call_borrowed(
    f: &HostArgsFn,
    name: &str,
    sig: &crate::module::Signature,
    args: &[u32],
    regs: &[Slot],
    bufs: &mut [Buffer],
    tape: &mut Tape,
) -> Result<Vec<Val>, ErrorKind> {
    let mut plan: smallvec::SmallVec<[Pass; 8]> = smallvec::SmallVec::new();
    for (&a, &ty) in args.iter().zip(&sig.params) {
        plan.push(match regs[a as usize] {
            Slot::Buf(id, _) => {
                let m = ty.is_mut_slice();
                let aliased = plan
                    .iter()
                    .any(|&p| matches!(p, Pass::Slice(j, n, _) if j == id && (m || n)));
                Pass::Slice(id, m, aliased)
            }
            s => Pass::Scalar(s),
        });
    }
    let freed = |id: BufId| ErrorKind::Internal(format!("buffer {id:?} was freed"));
    // The copies, before anything is taken out (allocates only if some argument
    // aliases another).
    let mem = Mem {
        frames: bufs,
        tape: &*tape,
    };
    let mut copies: Vec<Val> = Vec::new();
    for &p in &plan {
        if let Pass::Slice(id, _, true) = p {
            copies.push(mem.get(id).ok_or_else(|| freed(id))?.to_val());
        }
    }
    // The buffers lent directly, each once, taken out of their places.
    let mut taken: smallvec::SmallVec<[(BufId, Buffer); 8]> = smallvec::SmallVec::new();
    for &p in &plan {
        if let Pass::Slice(id, _, false) = p
            && !taken.iter().any(|&(t, _)| t == id)
        {
            let Some(b) = buf_mut(id, bufs, tape) else {
                put_back(taken, bufs, tape);
                return Err(freed(id));
            };
            let empty = match b {
                Buffer::F64(_) => Buffer::F64(Vec::new()),
                Buffer::F32(_) => Buffer::F32(Vec::new()),
                Buffer::I64(_) => Buffer::I64(Vec::new()),
            };
            taken.push((id, core::mem::replace(b, empty)));
        }
    }
    let result = {
        let mut lends: smallvec::SmallVec<[(BufId, Lend<'_>); 8]> = taken
            .iter_mut()
            .map(|(id, b)| (*id, Lend::Mut(b)))
            .collect();
        let mut copied = copies.iter_mut();
        let mut lent: smallvec::SmallVec<[Arg<'_>; 8]> = smallvec::SmallVec::new();
        let mut bad = None;
        for &p in &plan {
            lent.push(match p {
                Pass::Scalar(Slot::F64(x)) => Arg::F64(x),
                Pass::Scalar(Slot::F32(x)) => Arg::F32(x),
                Pass::Scalar(Slot::I64(x)) => Arg::I64(x),
                Pass::Scalar(Slot::Bool(x)) => Arg::Bool(x),
                Pass::Slice(_, m, true) => match copied.next() {
                    Some(v) if m => v.as_arg(),
                    Some(v) => Arg::from(&*v),
                    None => {
                        bad = Some("a copy went missing");
                        break;
                    }
                },
                Pass::Slice(id, m, false) => {
                    let Some((_, slot)) = lends.iter_mut().find(|(t, _)| *t == id) else {
                        bad = Some("a lent buffer went missing");
                        break;
                    };
                    // A buffer lent to a `mut` parameter is lent to no other
                    // argument (the others got copies); one lent read-only may be
                    // lent read-only again.
                    match (core::mem::replace(slot, Lend::Gone), m) {
                        (Lend::Mut(b), true) => lend_mut(b),
                        (Lend::Mut(b), false) => {
                            let b: &Buffer = b;
                            *slot = Lend::Shared(b);
                            lend(b)
                        }
                        (Lend::Shared(b), false) => {
                            *slot = Lend::Shared(b);
                            lend(b)
                        }
                        _ => {
                            bad = Some("a buffer was lent twice");
                            break;
                        }
                    }
                }
                Pass::Scalar(Slot::Undef | Slot::Buf(..)) => {
                    bad = Some("an argument is undefined");
                    break;
                }
            });
        }
        match bad {
            Some(m) => Err(ErrorKind::Internal(format!("calling @{name}: {m}"))),
            None => engine::call_host_args(f, name, sig, &mut lent),
        }
    };
    put_back(taken, bufs, tape);
    // The `mut` copies go back, in argument order, whatever the call returned.
    let mut copied = copies.iter();
    for &p in &plan {
        if let Pass::Slice(id, m, true) = p
            && let Some(v) = copied.next()
            && m
            && let Some(b) = buf_mut(id, bufs, tape)
        {
            b.copy_from(v);
        }
    }
    result
}

/// Puts the buffers [`call_borrowed`] took out back in their places.
fn put_back(taken: smallvec::SmallVec<[(BufId, Buffer); 8]>, bufs: &mut [Buffer], tape: &mut Tape) {
    for (id, b) in taken {
        if let Some(place) = buf_mut(id, bufs, tape) {
            *place = b;
        }
    }
}

/// The op name of `inst`, for errors (`instruction` if it does not exist).
#[cold]
fn inst_name(module: &Module, fid: FuncId, inst: Inst) -> &'static str {
    module
        .funcs
        .get(fid)
        .and_then(|d| d.function())
        .and_then(|f| f.insts.get(inst))
        .map_or("instruction", |d| d.opcode.name())
}

/// The source map of `fid`, if it is defined.
fn srcmap(module: &Module, fid: FuncId) -> Option<&SourceMap> {
    module.funcs.get(fid)?.function().map(|f| &f.srcmap)
}

fn func_name(module: &Module, fid: FuncId) -> String {
    module
        .funcs
        .get(fid)
        .map_or_else(|| fid.to_string(), |d| d.name.clone())
}

#[cold]
fn at_inst(module: &Module, fid: FuncId, inst: Inst, op: &str, kind: ErrorKind) -> RunError {
    let func = module.funcs.get(fid).and_then(|d| d.function());
    let mut e = RunError::at_inst(&func_name(module, fid), func, inst, kind);
    e.op = op.to_string();
    e
}

#[cold]
fn at_term(module: &Module, fid: FuncId, block: Block, op: &str, kind: ErrorKind) -> RunError {
    RunError {
        func: func_name(module, fid),
        op: op.to_string(),
        pos: srcmap(module, fid)
            .and_then(|s| s.terms.get(block).copied())
            .unwrap_or(Pos::NONE),
        operand: None,
        kind,
    }
}

#[cold]
fn at_phi(module: &Module, fid: FuncId, phi: Value, kind: ErrorKind) -> RunError {
    RunError {
        func: func_name(module, fid),
        op: "phi".to_string(),
        pos: srcmap(module, fid)
            .and_then(|s| s.values.get(phi).copied())
            .unwrap_or(Pos::NONE),
        operand: None,
        kind,
    }
}

#[cold]
fn bug(module: &Module, fid: Option<FuncId>, message: &str) -> RunError {
    RunError {
        func: fid.map_or_else(String::new, |f| func_name(module, f)),
        op: String::new(),
        pos: Pos::NONE,
        operand: None,
        kind: ErrorKind::Internal(message.to_string()),
    }
}
