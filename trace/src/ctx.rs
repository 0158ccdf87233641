//! The trace state of this thread: the session of the running [`Tracer`], the
//! functions being traced (one frame each, callee above caller), and in each frame the
//! regions (arms and loop bodies) that are open.
//!
//! A [`Tracer`](crate::Tracer) moves its session here while it traces and takes it
//! back afterwards, so nothing outlives a trace and two tracers never share state.
//! Operations on traced values reach the innermost frame through [`emit`]; no borrow
//! of the state is held while user code runs.
//!
//! Every traced value carries a [`Tag`]: the id of the frame that made it (ids are
//! unique for the life of the process, so a value kept from an earlier trace or
//! captured from a caller's frame is recognised) and the region it was made in. A
//! value may be used only while its region is open: a region is an arm or a loop body,
//! whose blocks do not dominate the code after it, so this check is what keeps the
//! traced IR in SSA form.

use std::cell::RefCell;
use std::panic::Location;
use std::sync::atomic::{AtomicU32, Ordering};

use gradlift_ir::Hosts;
use gradlift_ir::{FuncId, FunctionBuilder, Module, Pos, Scalar, Type, Value};

use crate::error::{Loc, TraceError};

/// Where a traced value comes from: its frame and its region.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub struct Tag {
    pub(crate) trace: u32,
    pub(crate) region: u32,
}

/// The tag of values made with no trace running: no frame has id 0, so any use is
/// reported as a foreign value.
pub(crate) const STALE: Tag = Tag {
    trace: 0,
    region: 0,
};

/// A traced value without its Rust type: what control flow and calls move around.
#[derive(Copy, Clone, PartialEq, Debug)]
#[doc(hidden)]
pub enum Slot {
    /// A traced value of IR type `ty`.
    Var {
        /// Its frame and region.
        tag: Tag,
        /// The IR value.
        value: Value,
        /// Its IR type.
        ty: Type,
    },
    /// A plain Rust number, carried as it is.
    Native(Scalar),
    /// The length of a vector of values, before its elements.
    Len(usize),
}

static NEXT_TRACE: AtomicU32 = AtomicU32::new(1);

/// A function being traced.
pub(crate) struct Frame {
    pub(crate) id: u32,
    pub(crate) name: String,
    pub(crate) b: FunctionBuilder<'static>,
    /// The open regions, outermost (0, the function body) first.
    pub(crate) regions: Vec<u32>,
    next_region: u32,
    pub(crate) error: Option<TraceError>,
    /// The instructions recorded so far, and the most allowed
    /// ([`Session::max_insts`]).
    pub(crate) insts: usize,
    max_insts: usize,
}

impl Frame {
    pub(crate) fn new(name: &str, b: FunctionBuilder<'static>, max_insts: usize) -> Frame {
        Frame {
            id: NEXT_TRACE.fetch_add(1, Ordering::Relaxed).max(1),
            name: name.to_string(),
            b,
            regions: vec![0],
            next_region: 1,
            error: None,
            insts: 0,
            max_insts,
        }
    }

    /// The tag of values made here, now.
    pub(crate) fn here(&self) -> Tag {
        Tag {
            trace: self.id,
            region: self.regions.last().copied().unwrap_or(0),
        }
    }

    pub(crate) fn fail(&mut self, e: TraceError) {
        if self.error.is_none() {
            self.error = Some(e);
        }
    }

    /// Counts one more instruction, `op` at `at`; false (and the mistake recorded)
    /// past the limit.
    pub(crate) fn count(&mut self, op: &'static str, at: Loc) -> bool {
        self.insts += 1;
        if self.insts <= self.max_insts {
            return true;
        }
        if self.insts == self.max_insts + 1 {
            let func = self.name.clone();
            let limit = self.max_insts;
            self.fail(TraceError::TooLarge {
                func,
                limit,
                op,
                at,
            });
        }
        false
    }

    /// Whether a value tagged `tag` may be used here; records the mistake if not.
    pub(crate) fn check(&mut self, tag: Tag, op: &'static str, at: Loc) -> bool {
        if tag.trace != self.id {
            let func = self.name.clone();
            self.fail(TraceError::ForeignValue { func, op, at });
            false
        } else if !self.regions.contains(&tag.region) {
            let func = self.name.clone();
            self.fail(TraceError::OutOfScope { func, op, at });
            false
        } else {
            true
        }
    }

    pub(crate) fn open_region(&mut self) {
        let r = self.next_region;
        self.next_region += 1;
        self.regions.push(r);
    }

    pub(crate) fn close_region(&mut self) {
        if self.regions.len() > 1 {
            self.regions.pop();
        }
    }

    /// A placeholder of type `ty`, returned after a mistake.
    pub(crate) fn placeholder(&mut self, ty: Type) -> Value {
        let s = Scalar::zero(ty).unwrap_or(Scalar::F64(0.0));
        self.b.constant(s)
    }
}

/// A traced function of the session.
pub(crate) struct Entry {
    pub(crate) id: FuncId,
    /// The Rust type of what was traced, to tell two functions of one name apart
    /// (two closures have one name but two types).
    pub(crate) ty: core::any::TypeId,
    /// Its name, for messages.
    pub(crate) rust: &'static str,
    /// The type of its custom derivative ([`Deriv`](crate::Deriv)), and what it is.
    pub(crate) deriv: core::any::TypeId,
    pub(crate) deriv_name: &'static str,
}

/// The state of a running [`Tracer`](crate::Tracer).
pub(crate) struct Session {
    pub(crate) module: Module,
    pub(crate) entries: hashbrown::HashMap<String, Entry>,
    pub(crate) hosts: Hosts,
    pub(crate) frames: Vec<Frame>,
    pub(crate) error: Option<TraceError>,
    /// The most instructions one traced function may record: past it, tracing
    /// fails (a plain Rust loop over traced values records its body once per
    /// iteration, and a trace that grows with the data would take the compiler's
    /// memory without end).
    pub(crate) max_insts: usize,
}

/// The default of [`Session::max_insts`].
pub(crate) const DEFAULT_MAX_INSTS: usize = 100_000;

impl Session {
    pub(crate) fn new(module: Module) -> Session {
        Session {
            module,
            entries: hashbrown::HashMap::new(),
            hosts: Hosts::new(),
            frames: Vec::new(),
            error: None,
            max_insts: DEFAULT_MAX_INSTS,
        }
    }

    pub(crate) fn fail(&mut self, e: TraceError) {
        if self.error.is_none() {
            self.error = Some(e);
        }
    }
}

thread_local! {
    static SESSION: RefCell<Option<Session>> = const { RefCell::new(None) };
}

/// Installs `session` as this thread's; gives it back if one is installed already
/// (a nested trace).
pub(crate) fn install(session: Session) -> Result<(), Box<Session>> {
    SESSION.with(|s| {
        let Ok(mut s) = s.try_borrow_mut() else {
            return Err(Box::new(session));
        };
        if s.is_some() {
            return Err(Box::new(session));
        }
        *s = Some(session);
        Ok(())
    })
}

/// Takes the session off the thread when dropped, if it is still there: a tracer
/// whose user code panicked leaves no state behind.
pub(crate) struct InstallGuard;

impl Drop for InstallGuard {
    fn drop(&mut self) {
        let _ = SESSION.try_with(|s| {
            if let Ok(mut s) = s.try_borrow_mut() {
                s.take();
            }
        });
    }
}

/// Takes this thread's session back.
pub(crate) fn uninstall() -> Option<Session> {
    SESSION.with(|s| s.borrow_mut().take())
}

/// Runs `f` on the session, if one is installed (and not borrowed: user code never
/// runs inside `f`).
pub(crate) fn with_session<R>(f: impl FnOnce(&mut Session) -> R) -> Option<R> {
    SESSION.with(|s| {
        let mut s = s.try_borrow_mut().ok()?;
        s.as_mut().map(f)
    })
}

/// Runs `f` on the innermost frame, if a function is being traced.
pub(crate) fn with_frame<R>(f: impl FnOnce(&mut Frame) -> R) -> Option<R> {
    with_session(|s| s.frames.last_mut().map(f)).flatten()
}

/// Emits one instruction with one result of type `ty` in the innermost frame, after
/// checking its operands; `build` gets the operands' values. After a mistake (or with
/// no trace running) nothing is emitted and a placeholder comes back.
pub(crate) fn emit(
    op: &'static str,
    at: Loc,
    args: &[(Tag, Value)],
    ty: Type,
    build: impl FnOnce(&mut FunctionBuilder<'static>, &[Value]) -> Value,
) -> (Tag, Value) {
    with_frame(|f| {
        let mut ok = true;
        for &(tag, _) in args {
            ok &= f.check(tag, op, at);
        }
        let here = f.here();
        ok &= f.count(op, at);
        if !ok || f.error.is_some() {
            return (here, f.placeholder(ty));
        }
        let vals: smallvec::SmallVec<[Value; 3]> = args.iter().map(|a| a.1).collect();
        f.b.set_pos(pos(at));
        let v = build(&mut f.b, &vals);
        f.b.set_pos(Pos::NONE);
        (here, v)
    })
    .unwrap_or((STALE, Value::from_u32(0)))
}

/// Emits an instruction without results (`store`).
pub(crate) fn emit0(
    op: &'static str,
    at: Loc,
    args: &[(Tag, Value)],
    build: impl FnOnce(&mut FunctionBuilder<'static>, &[Value]),
) {
    with_frame(|f| {
        let mut ok = true;
        for &(tag, _) in args {
            ok &= f.check(tag, op, at);
        }
        ok &= f.count(op, at);
        if ok && f.error.is_none() {
            let vals: smallvec::SmallVec<[Value; 3]> = args.iter().map(|a| a.1).collect();
            f.b.set_pos(pos(at));
            build(&mut f.b, &vals);
            f.b.set_pos(Pos::NONE);
        }
    });
}

/// Names `value` (of the innermost frame, by its `tag`) `name` in the IR: it prints
/// as `%name`, and a run-time error of a `load` or `store` of it names it.
pub(crate) fn name_value(tag: Tag, value: Value, name: &str) {
    with_frame(|f| {
        if tag.trace == f.id {
            f.b.named(name, value);
        }
    });
}

/// The constant `c` as a traced value of the innermost frame. Constants are operands,
/// valid everywhere in the function: their region is the body's.
pub(crate) fn constant(c: Scalar) -> (Tag, Value) {
    with_frame(|f| {
        let tag = Tag {
            trace: f.id,
            region: 0,
        };
        (tag, f.b.constant(c))
    })
    .unwrap_or((STALE, Value::from_u32(0)))
}

/// `at` as the IR's source position of the instructions it records: a run-time
/// error of one names the Rust `file:line:col`.
pub(crate) fn pos(at: Loc) -> Pos {
    Pos::in_file(at.file(), at.line(), at.column())
}

/// The caller's location, for `#[track_caller]` functions.
#[track_caller]
pub(crate) fn caller() -> Loc {
    Location::caller()
}
