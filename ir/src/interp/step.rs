//! One step of the interpreter: the run-time representation of values and buffers,
//! and one `match` arm per op (calls and control flow excepted; the run loop in
//! [`super`] owns those).
//!
//! A [`Slot`] is a register: a scalar, or a reference to a whole [`Buffer`] with a
//! flag saying whether it may be written through. The buffer is one of the frames'
//! (arguments, `alloc`s, extern results) or one of the tape's (`tape_view`), as its
//! [`BufId`] says; [`Mem`] finds either. Every arm checks the kinds of its operands,
//! so an ill-typed (unverified) function ends in
//! [`ErrorKind::Malformed`] rather than a panic.

use crate::interp::tape::Tape;
use crate::interp::{ErrorKind, Val};
use crate::ops::{Imm, Opcode};
use crate::types::{Elem, Scalar, Type};

/// A register of a frame.
#[derive(Copy, Clone, Debug)]
pub(super) enum Slot {
    /// Not yet defined (a value read before its definition ran).
    Undef,
    /// An `f64`.
    F64(f64),
    /// An `f32`.
    F32(f32),
    /// An `i64`.
    I64(i64),
    /// A `bool`.
    Bool(bool),
    /// The buffer `.0`; `.1` says whether `store` may write it.
    Buf(BufId, bool),
}

/// Where the buffer of a slice lives: a number of the frames' buffer stack
/// ([`Machine::bufs`](super::Machine)), or, with bit 31 set, of the tape's buffer
/// table (an index, not a handle). One `u32`, so that a [`Slot`] stays two words and
/// matching on one stays a plain tag test.
#[derive(Copy, Clone, PartialEq, Eq)]
pub(super) struct BufId(u32);

impl BufId {
    /// The bit that marks a tape buffer.
    const TAPE: u32 = 1 << 31;

    /// Buffer `n` of the frames' stack, if `n` is below 2^31.
    #[inline]
    pub(super) fn frame(n: usize) -> Option<BufId> {
        u32::try_from(n)
            .ok()
            .filter(|&n| n & BufId::TAPE == 0)
            .map(BufId)
    }

    /// Buffer `n` of the tape's table, if `n` is below 2^31.
    #[inline]
    pub(super) fn tape(n: u32) -> Option<BufId> {
        (n & BufId::TAPE == 0).then_some(BufId(n | BufId::TAPE))
    }

    /// The number on the frames' stack, if this is a frame buffer.
    #[inline]
    pub(super) fn frame_index(self) -> Option<usize> {
        (self.0 & BufId::TAPE == 0).then_some(self.0 as usize)
    }
}

impl core::fmt::Debug for BufId {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self.frame_index() {
            Some(n) => write!(f, "frame buffer {n}"),
            None => write!(f, "tape buffer {}", self.0 & !BufId::TAPE),
        }
    }
}

/// Every buffer a slot may refer to: the frames' and the tape's.
#[derive(Copy, Clone)]
pub(super) struct Mem<'a> {
    /// The frames' buffer stack.
    pub(super) frames: &'a [Buffer],
    /// The tape.
    pub(super) tape: &'a Tape,
}

impl<'a> Mem<'a> {
    /// The buffer `id`, if it exists.
    #[inline]
    pub(super) fn get(self, id: BufId) -> Option<&'a Buffer> {
        match id.frame_index() {
            Some(i) => self.frames.get(i),
            None => self.tape.buf(id.0 & !BufId::TAPE),
        }
    }
}

/// The buffer `id` of `frames` or `tape`, to write.
#[inline]
pub(super) fn buf_mut<'a>(
    id: BufId,
    frames: &'a mut [Buffer],
    tape: &'a mut Tape,
) -> Option<&'a mut Buffer> {
    match id.frame_index() {
        Some(i) => frames.get_mut(i),
        None => tape.buf_mut(id.0 & !BufId::TAPE),
    }
}

impl Slot {
    /// The scalar the slot holds, if it holds one.
    fn scalar(self) -> Option<Scalar> {
        Some(match self {
            Slot::F64(x) => Scalar::F64(x),
            Slot::F32(x) => Scalar::F32(x),
            Slot::I64(x) => Scalar::I64(x),
            Slot::Bool(x) => Scalar::Bool(x),
            Slot::Undef | Slot::Buf(..) => return None,
        })
    }
}

impl From<Scalar> for Slot {
    fn from(c: Scalar) -> Slot {
        match c {
            Scalar::F64(x) => Slot::F64(x),
            Scalar::F32(x) => Slot::F32(x),
            Scalar::I64(x) => Slot::I64(x),
            Scalar::Bool(x) => Slot::Bool(x),
        }
    }
}

/// The contents of a slice: an argument's, an `alloc`'s, or an extern result's.
#[derive(Clone, Debug)]
pub(super) enum Buffer {
    /// `f64` elements.
    F64(Vec<f64>),
    /// `f32` elements.
    F32(Vec<f32>),
    /// `i64` elements.
    I64(Vec<i64>),
}

impl Buffer {
    /// The element type.
    pub(super) fn elem(&self) -> Elem {
        match self {
            Buffer::F64(_) => Elem::F64,
            Buffer::F32(_) => Elem::F32,
            Buffer::I64(_) => Elem::I64,
        }
    }

    /// The number of elements.
    pub(super) fn len(&self) -> usize {
        match self {
            Buffer::F64(v) => v.len(),
            Buffer::F32(v) => v.len(),
            Buffer::I64(v) => v.len(),
        }
    }

    /// A copy of the contents, as a [`Val`].
    pub(super) fn to_val(&self) -> Val {
        match self {
            Buffer::F64(v) => Val::F64s(v.clone()),
            Buffer::F32(v) => Val::F32s(v.clone()),
            Buffer::I64(v) => Val::I64s(v.clone()),
        }
    }

    /// Takes the contents out as a [`Val`], leaving the buffer empty.
    pub(super) fn take_val(&mut self) -> Val {
        match self {
            Buffer::F64(v) => Val::F64s(core::mem::take(v)),
            Buffer::F32(v) => Val::F32s(core::mem::take(v)),
            Buffer::I64(v) => Val::I64s(core::mem::take(v)),
        }
    }

    /// Takes the contents of a slice [`Val`], leaving it empty; `None` for a scalar.
    pub(super) fn take_from(val: &mut Val) -> Option<Buffer> {
        Some(match val {
            Val::F64s(v) => Buffer::F64(core::mem::take(v)),
            Val::F32s(v) => Buffer::F32(core::mem::take(v)),
            Val::I64s(v) => Buffer::I64(core::mem::take(v)),
            _ => return None,
        })
    }

    /// Overwrites the contents with those of `val`, which must be a slice of the same
    /// element type and length. Returns whether it was.
    pub(super) fn copy_from(&mut self, val: &Val) -> bool {
        match (self, val) {
            (Buffer::F64(d), Val::F64s(s)) if d.len() == s.len() => d.copy_from_slice(s),
            (Buffer::F32(d), Val::F32s(s)) if d.len() == s.len() => d.copy_from_slice(s),
            (Buffer::I64(d), Val::I64s(s)) if d.len() == s.len() => d.copy_from_slice(s),
            _ => return false,
        }
        true
    }

    /// `n` zeros of `elem`, or `None` if the memory cannot be had.
    fn zeroed(elem: Elem, n: usize) -> Option<Buffer> {
        fn zeros<T: Clone + Default>(n: usize) -> Option<Vec<T>> {
            let mut v = Vec::new();
            v.try_reserve_exact(n).ok()?;
            v.resize(n, T::default());
            Some(v)
        }
        Some(match elem {
            Elem::F64 => Buffer::F64(zeros(n)?),
            Elem::F32 => Buffer::F32(zeros(n)?),
            Elem::I64 => Buffer::I64(zeros(n)?),
        })
    }
}

/// The type of what `slot` holds, for messages.
pub(super) fn slot_type(slot: Slot, mem: Mem<'_>) -> String {
    match slot {
        Slot::Undef => "an undefined value".into(),
        Slot::F64(_) => "f64".into(),
        Slot::F32(_) => "f32".into(),
        Slot::I64(_) => "i64".into(),
        Slot::Bool(_) => "bool".into(),
        Slot::Buf(id, mutable) => match mem.get(id) {
            Some(b) => Type::Slice {
                elem: b.elem(),
                mutable,
            }
            .to_string(),
            None => "a freed buffer".into(),
        },
    }
}

/// Whether `slot` may stand where a `ty` is declared (a writable slice may stand for
/// a read-only one).
pub(super) fn fits(slot: Slot, ty: Type, mem: Mem<'_>) -> bool {
    match (slot, ty) {
        (Slot::F64(_), Type::F64)
        | (Slot::F32(_), Type::F32)
        | (Slot::I64(_), Type::I64)
        | (Slot::Bool(_), Type::Bool) => true,
        (Slot::Buf(id, m), Type::Slice { elem, mutable }) => {
            mem.get(id).is_some_and(|b| b.elem() == elem) && (m || !mutable)
        }
        _ => false,
    }
}

/// The float arithmetic that Rust's `std` does not have in the form the IR wants.
trait Float: Copy {
    /// The smaller; NaN if either is NaN; -0.0 below 0.0 (Cranelift's `fmin`).
    fn fmin(self, other: Self) -> Self;
    /// The larger; NaN if either is NaN; 0.0 above -0.0 (Cranelift's `fmax`).
    fn fmax(self, other: Self) -> Self;
    /// `self` to an integer power: `powi` when `n` fits an `i32`, else `powf`.
    fn powi64(self, n: i64) -> Self;
}

macro_rules! impl_float {
    ($($t:ty),*) => {$(
        impl Float for $t {
            fn fmin(self, other: $t) -> $t {
                if self.is_nan() || other.is_nan() {
                    <$t>::NAN
                } else if self < other {
                    self
                } else if other < self {
                    other
                } else if self.is_sign_negative() {
                    self
                } else {
                    other
                }
            }

            fn fmax(self, other: $t) -> $t {
                if self.is_nan() || other.is_nan() {
                    <$t>::NAN
                } else if self > other {
                    self
                } else if other > self {
                    other
                } else if self.is_sign_positive() {
                    self
                } else {
                    other
                }
            }

            fn powi64(self, n: i64) -> $t {
                match i32::try_from(n) {
                    Ok(n) => self.powi(n),
                    Err(_) => self.powf(n as $t),
                }
            }
        }
    )*};
}

impl_float!(f32, f64);

/// The error for operands of the wrong kinds.
#[cold]
fn mismatch(op: Opcode, operands: &[Slot], mem: Mem<'_>) -> ErrorKind {
    if operands.iter().any(|s| matches!(s, Slot::Undef)) {
        return ErrorKind::Malformed(format!("{op} uses a value before it is defined"));
    }
    let kinds: Vec<String> = operands.iter().map(|&s| slot_type(s, mem)).collect();
    ErrorKind::Malformed(format!(
        "{op} cannot take operands of type {}",
        kinds.join(", ")
    ))
}

#[cold]
fn malformed(message: String) -> ErrorKind {
    ErrorKind::Malformed(message)
}

/// The element type an `alloc`, `tape_alloc` or `tape_view` names.
fn elem_of(op: Opcode, imm: Imm) -> Result<Elem, ErrorKind> {
    match imm {
        Imm::Type(t) => Elem::of(t),
        _ => None,
    }
    .ok_or_else(|| malformed(format!("{op} of {imm:?} is not an op")))
}

/// The zero-filled buffer of an `alloc` or `tape_alloc` of `n` elements.
fn zeroed(op: Opcode, imm: Imm, n: Slot, mem: Mem<'_>) -> Result<Buffer, ErrorKind> {
    let elem = elem_of(op, imm)?;
    let n = match n {
        Slot::I64(n) => n,
        x => return Err(mismatch(op, &[x], mem)),
    };
    let Ok(len) = usize::try_from(n) else {
        return Err(ErrorKind::NegativeAlloc(n));
    };
    Buffer::zeroed(elem, len).ok_or(ErrorKind::AllocFailed(n))
}

/// Executes one instruction that is not a `call`: reads its operands from the slots
/// `args` of `regs`, writes its result (if any) into slot `dst`. `bufs` is the frames'
/// buffer stack and `tape` the interpreter's tape.
///
/// Always inlined into the run loop: left to the compiler, it was not, and the loop
/// ran about 10% slower (rosenbrock on 100_000 elements, `ir/tests/interp.rs`).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(super) fn exec(
    op: Opcode,
    imm: Imm,
    args: [u32; 3],
    dst: u32,
    regs: &mut [Slot],
    bufs: &mut Vec<Buffer>,
    tape: &mut Tape,
) -> Result<(), ErrorKind> {
    macro_rules! mem {
        () => {
            Mem {
                frames: bufs,
                tape: &*tape,
            }
        };
    }
    macro_rules! arg {
        ($i:literal) => {
            regs[args[$i] as usize]
        };
    }
    macro_rules! float2 {
        (|$a:ident, $b:ident| $e:expr) => {
            match (arg!(0), arg!(1)) {
                (Slot::F64($a), Slot::F64($b)) => Slot::F64($e),
                (Slot::F32($a), Slot::F32($b)) => Slot::F32($e),
                (x, y) => return Err(mismatch(op, &[x, y], mem!())),
            }
        };
    }
    macro_rules! float3 {
        (|$a:ident, $b:ident, $c:ident| $e:expr) => {
            match (arg!(0), arg!(1), arg!(2)) {
                (Slot::F64($a), Slot::F64($b), Slot::F64($c)) => Slot::F64($e),
                (Slot::F32($a), Slot::F32($b), Slot::F32($c)) => Slot::F32($e),
                (x, y, z) => return Err(mismatch(op, &[x, y, z], mem!())),
            }
        };
    }
    macro_rules! float1 {
        (|$a:ident| $e:expr) => {
            match arg!(0) {
                Slot::F64($a) => Slot::F64($e),
                Slot::F32($a) => Slot::F32($e),
                x => return Err(mismatch(op, &[x], mem!())),
            }
        };
    }
    macro_rules! int2 {
        (|$a:ident, $b:ident| $e:expr) => {
            match (arg!(0), arg!(1)) {
                (Slot::I64($a), Slot::I64($b)) => Slot::I64($e),
                (x, y) => return Err(mismatch(op, &[x, y], mem!())),
            }
        };
    }
    macro_rules! bool2 {
        (|$a:ident, $b:ident| $e:expr) => {
            match (arg!(0), arg!(1)) {
                (Slot::Bool($a), Slot::Bool($b)) => Slot::Bool($e),
                (x, y) => return Err(mismatch(op, &[x, y], mem!())),
            }
        };
    }
    macro_rules! pred {
        () => {
            match imm {
                Imm::Cmp(p) => p,
                _ => return Err(malformed(format!("{op} has no predicate"))),
            }
        };
    }
    macro_rules! buffer {
        ($s:expr) => {
            match $s {
                Slot::Buf(id, _) => match mem!().get(id) {
                    Some(b) => b,
                    None => {
                        return Err(ErrorKind::Internal(format!(
                            "{op} reads freed buffer {id:?}"
                        )));
                    }
                },
                x => return Err(mismatch(op, &[x], mem!())),
            }
        };
    }
    macro_rules! index {
        ($s:expr, $len:expr) => {
            match $s {
                Slot::I64(i) => match usize::try_from(i) {
                    Ok(u) if u < $len => u,
                    _ => {
                        return Err(ErrorKind::OutOfBounds {
                            index: i,
                            len: $len,
                        });
                    }
                },
                x => return Err(mismatch(op, &[x], mem!())),
            }
        };
    }

    let out = match op {
        Opcode::Fadd => float2!(|a, b| a + b),
        Opcode::Fsub => float2!(|a, b| a - b),
        Opcode::Fmul => float2!(|a, b| a * b),
        Opcode::Fdiv => float2!(|a, b| a / b),
        Opcode::Fmin => float2!(|a, b| a.fmin(b)),
        Opcode::Fmax => float2!(|a, b| a.fmax(b)),
        Opcode::Pow => float2!(|a, b| a.powf(b)),
        Opcode::Atan2 => float2!(|a, b| a.atan2(b)),
        Opcode::Hypot => float2!(|a, b| a.hypot(b)),
        Opcode::Fneg => float1!(|a| -a),
        Opcode::Fabs => float1!(|a| a.abs()),
        Opcode::Sqrt => float1!(|a| a.sqrt()),
        Opcode::Exp => float1!(|a| crate::math::IrMath::ir_exp(a)),
        Opcode::Log => float1!(|a| a.ln()),
        Opcode::Sin => float1!(|a| crate::math::IrMath::ir_sin(a)),
        Opcode::Cos => float1!(|a| crate::math::IrMath::ir_cos(a)),
        Opcode::Tan => float1!(|a| a.tan()),
        Opcode::Tanh => float1!(|a| a.tanh()),
        Opcode::Sinh => float1!(|a| a.sinh()),
        Opcode::Cosh => float1!(|a| a.cosh()),
        Opcode::Asin => float1!(|a| a.asin()),
        Opcode::Acos => float1!(|a| a.acos()),
        Opcode::Atan => float1!(|a| a.atan()),
        Opcode::Log10 => float1!(|a| a.log10()),
        Opcode::Log2 => float1!(|a| a.log2()),
        Opcode::Exp2 => float1!(|a| a.exp2()),
        Opcode::Floor => float1!(|a| a.floor()),
        Opcode::Ceil => float1!(|a| a.ceil()),
        Opcode::Fma => float3!(|a, b, c| a.mul_add(b, c)),
        Opcode::Powi => match (arg!(0), arg!(1)) {
            (Slot::F64(x), Slot::I64(n)) => Slot::F64(x.powi64(n)),
            (Slot::F32(x), Slot::I64(n)) => Slot::F32(x.powi64(n)),
            (x, y) => return Err(mismatch(op, &[x, y], mem!())),
        },
        Opcode::Iadd => int2!(|a, b| a.wrapping_add(b)),
        Opcode::Isub => int2!(|a, b| a.wrapping_sub(b)),
        Opcode::Imul => int2!(|a, b| a.wrapping_mul(b)),
        Opcode::Idiv => int2!(|a, b| match b {
            0 => return Err(ErrorKind::DivisionByZero),
            b => a.wrapping_div(b),
        }),
        Opcode::Irem => int2!(|a, b| match b {
            0 => return Err(ErrorKind::DivisionByZero),
            b => a.wrapping_rem(b),
        }),
        Opcode::Ishl => int2!(|a, b| a.wrapping_shl(b as u32)),
        Opcode::Ishr => int2!(|a, b| a.wrapping_shr(b as u32)),
        Opcode::Iand => int2!(|a, b| a & b),
        Opcode::Ior => int2!(|a, b| a | b),
        Opcode::Ixor => int2!(|a, b| a ^ b),
        Opcode::Ineg => match arg!(0) {
            Slot::I64(a) => Slot::I64(a.wrapping_neg()),
            x => return Err(mismatch(op, &[x], mem!())),
        },
        Opcode::Fcmp => {
            let p = pred!();
            match (arg!(0), arg!(1)) {
                (Slot::F64(a), Slot::F64(b)) => Slot::Bool(p.apply(a, b)),
                (Slot::F32(a), Slot::F32(b)) => Slot::Bool(p.apply(a, b)),
                (x, y) => return Err(mismatch(op, &[x, y], mem!())),
            }
        }
        Opcode::Icmp => {
            let p = pred!();
            match (arg!(0), arg!(1)) {
                (Slot::I64(a), Slot::I64(b)) => Slot::Bool(p.apply(a, b)),
                (x, y) => return Err(mismatch(op, &[x, y], mem!())),
            }
        }
        Opcode::And => bool2!(|a, b| a & b),
        Opcode::Or => bool2!(|a, b| a | b),
        Opcode::Xor => bool2!(|a, b| a ^ b),
        Opcode::Not => match arg!(0) {
            Slot::Bool(a) => Slot::Bool(!a),
            x => return Err(mismatch(op, &[x], mem!())),
        },
        Opcode::Select => match (arg!(0), arg!(1), arg!(2)) {
            (Slot::Bool(c), a, b)
                if core::mem::discriminant(&a) == core::mem::discriminant(&b)
                    && !matches!(a, Slot::Undef) =>
            {
                if c {
                    a
                } else {
                    b
                }
            }
            (c, a, b) => return Err(mismatch(op, &[c, a, b], mem!())),
        },
        Opcode::Cast => {
            let x = arg!(0);
            let out = match imm {
                Imm::Type(Type::F64) => match x {
                    Slot::F64(v) => Some(v),
                    Slot::F32(v) => Some(f64::from(v)),
                    Slot::I64(v) => Some(v as f64),
                    Slot::Bool(v) => Some(f64::from(u8::from(v))),
                    _ => None,
                }
                .map(Slot::F64),
                Imm::Type(Type::F32) => match x {
                    Slot::F64(v) => Some(v as f32),
                    Slot::F32(v) => Some(v),
                    Slot::I64(v) => Some(v as f32),
                    Slot::Bool(v) => Some(f32::from(u8::from(v))),
                    _ => None,
                }
                .map(Slot::F32),
                Imm::Type(Type::I64) => match x {
                    Slot::F64(v) => Some(v as i64),
                    Slot::F32(v) => Some(v as i64),
                    Slot::I64(v) => Some(v),
                    Slot::Bool(v) => Some(i64::from(v)),
                    _ => None,
                }
                .map(Slot::I64),
                _ => return Err(malformed(format!("cast to {imm:?} is not an op"))),
            };
            match out {
                Some(s) => s,
                None => return Err(mismatch(op, &[x], mem!())),
            }
        }
        Opcode::Bitcast => match (imm, arg!(0)) {
            (Imm::Type(Type::I64), Slot::F64(v)) => Slot::I64(v.to_bits() as i64),
            (Imm::Type(Type::F64), Slot::I64(v)) => Slot::F64(f64::from_bits(v as u64)),
            (Imm::Type(Type::I64 | Type::F64), x) => {
                return Err(mismatch(op, &[x], mem!()));
            }
            _ => return Err(malformed(format!("bitcast to {imm:?} is not an op"))),
        },
        Opcode::Const => match imm {
            Imm::Const(c) => Slot::from(c),
            _ => return Err(malformed("const has no constant".into())),
        },
        Opcode::Len => Slot::I64(buffer!(arg!(0)).len() as i64),
        Opcode::Load => {
            let buf = buffer!(arg!(0));
            let i = index!(arg!(1), buf.len());
            match buf {
                Buffer::F64(v) => Slot::F64(v[i]),
                Buffer::F32(v) => Slot::F32(v[i]),
                Buffer::I64(v) => Slot::I64(v[i]),
            }
        }
        Opcode::Store => {
            let (s, i, x) = (arg!(0), arg!(1), arg!(2));
            let id = match s {
                Slot::Buf(id, true) => id,
                Slot::Buf(..) => {
                    return Err(malformed("store into a read-only slice".into()));
                }
                s => return Err(mismatch(op, &[s, i, x], mem!())),
            };
            let Some(buf) = buf_mut(id, bufs, tape) else {
                return Err(ErrorKind::Internal(format!(
                    "store into freed buffer {id:?}"
                )));
            };
            let len = buf.len();
            let i = index!(i, len);
            match (buf, x) {
                (Buffer::F64(v), Slot::F64(x)) => v[i] = x,
                (Buffer::F32(v), Slot::F32(x)) => v[i] = x,
                (Buffer::I64(v), Slot::I64(x)) => v[i] = x,
                (_, x) => return Err(mismatch(op, &[s, Slot::I64(i as i64), x], mem!())),
            }
            return Ok(());
        }
        Opcode::Alloc => {
            let buf = zeroed(op, imm, arg!(0), mem!())?;
            let id = BufId::frame(bufs.len()).ok_or(ErrorKind::AllocFailed(buf.len() as i64))?;
            bufs.push(buf);
            Slot::Buf(id, true)
        }
        Opcode::Push => {
            let x = arg!(0);
            let Some(s) = x.scalar() else {
                return Err(mismatch(op, &[x], mem!()));
            };
            tape.push(s)?;
            return Ok(());
        }
        Opcode::Pop => match imm {
            Imm::Type(t) if t.is_scalar() => Slot::from(tape.pop(t)?),
            _ => return Err(malformed(format!("pop of {imm:?} is not an op"))),
        },
        Opcode::TapeAlloc => {
            let buf = zeroed(op, imm, arg!(0), mem!())?;
            Slot::I64(tape.alloc(buf)?)
        }
        Opcode::TapeView => {
            let elem = elem_of(op, imm)?;
            match arg!(0) {
                Slot::I64(h) => match BufId::tape(tape.view(elem, h)?) {
                    Some(id) => Slot::Buf(id, true),
                    None => return Err(ErrorKind::Internal("a tape index past 2^31".into())),
                },
                x => return Err(mismatch(op, &[x], mem!())),
            }
        }
        // A marker for the derivation: nothing happens.
        Opcode::CheckpointLoop => return Ok(()),
        Opcode::Recompute => {
            match arg!(0) {
                Slot::I64(n) => tape.recompute(n),
                x => return Err(mismatch(op, &[x], mem!())),
            }
            return Ok(());
        }
        Opcode::Call | Opcode::TrapIf => {
            return Err(ErrorKind::Internal(format!("{op} reached the op step")));
        }
    };
    regs[dst as usize] = out;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fmin_and_fmax_order_signed_zeros_and_propagate_nan() {
        assert!(f64::NAN.fmin(1.0).is_nan());
        assert!(1.0f64.fmin(f64::NAN).is_nan());
        assert!(f32::NAN.fmax(1.0).is_nan());
        assert!((-0.0f64).fmin(0.0).is_sign_negative());
        assert!(0.0f64.fmin(-0.0).is_sign_negative());
        assert!(0.0f64.fmax(-0.0).is_sign_positive());
        assert!((-0.0f64).fmax(0.0).is_sign_positive());
        assert_eq!(2.0f64.fmin(-3.0), -3.0);
        assert_eq!(2.0f32.fmax(-3.0), 2.0);
        assert_eq!(f64::NEG_INFINITY.fmax(f64::INFINITY), f64::INFINITY);
    }

    #[test]
    fn powi64_falls_back_to_powf_beyond_i32() {
        assert_eq!(2.0f64.powi64(10), 1024.0);
        assert_eq!(1.0f64.powi64(i64::MAX), 1.0);
        assert_eq!(2.0f64.powi64(1 << 40), f64::INFINITY);
        assert_eq!(2.0f64.powi64(-(1 << 40)), 0.0);
        assert_eq!((-1.0f64).powi64((1 << 40) + 1), -1.0);
    }

    #[test]
    fn fits_respects_mutability() {
        let bufs = [Buffer::F64(vec![1.0])];
        let tape = Tape::default();
        let mem = Mem {
            frames: &bufs,
            tape: &tape,
        };
        let (f0, f1) = (BufId::frame(0).unwrap(), BufId::frame(1).unwrap());
        assert!(fits(Slot::Buf(f0, true), Type::slice(Elem::F64), mem));
        assert!(fits(Slot::Buf(f0, true), Type::slice_mut(Elem::F64), mem));
        assert!(!fits(Slot::Buf(f0, false), Type::slice_mut(Elem::F64), mem));
        assert!(!fits(Slot::Buf(f0, false), Type::slice(Elem::F32), mem));
        assert!(!fits(Slot::Buf(f1, false), Type::slice(Elem::F64), mem));
        assert!(!fits(
            Slot::Buf(BufId::tape(0).unwrap(), true),
            Type::slice(Elem::F64),
            mem
        ));
        assert!(!fits(Slot::Undef, Type::F64, mem));
    }

    #[test]
    fn tape_views_read_and_write_the_tape_buffer() {
        let mut bufs = vec![Buffer::F64(vec![1.0])];
        let mut tape = Tape::default();
        let h = tape.alloc(Buffer::F64(vec![0.0; 2])).unwrap();
        // regs: 0 the handle, 1 a view, 2 index 1, 3 the value, 4 a load's result.
        let mut regs = [
            Slot::I64(h),
            Slot::Undef,
            Slot::I64(1),
            Slot::F64(2.5),
            Slot::Undef,
        ];
        let f64_ = Imm::Type(Type::F64);
        exec(
            Opcode::TapeView,
            f64_,
            [0, 0, 0],
            1,
            &mut regs,
            &mut bufs,
            &mut tape,
        )
        .unwrap();
        assert!(matches!(regs[1], Slot::Buf(id, true) if id == BufId::tape(0).unwrap()));
        exec(
            Opcode::Store,
            Imm::None,
            [1, 2, 3],
            0,
            &mut regs,
            &mut bufs,
            &mut tape,
        )
        .unwrap();
        exec(
            Opcode::Load,
            Imm::None,
            [1, 2, 0],
            4,
            &mut regs,
            &mut bufs,
            &mut tape,
        )
        .unwrap();
        assert!(matches!(regs[4], Slot::F64(2.5)));
        assert!(matches!(tape.buf(0), Some(Buffer::F64(v)) if v == &[0.0, 2.5]));
        // The frames' buffer 0 is untouched.
        assert!(matches!(&bufs[0], Buffer::F64(v) if v == &[1.0]));
        // A slice is no handle.
        let e = exec(
            Opcode::TapeView,
            f64_,
            [1, 0, 0],
            4,
            &mut regs,
            &mut bufs,
            &mut tape,
        );
        assert!(matches!(e, Err(ErrorKind::Malformed(_))), "{e:?}");
    }

    #[test]
    fn a_slot_is_two_words_and_buffer_ids_say_where() {
        assert_eq!(core::mem::size_of::<Slot>(), 16);
        assert_eq!(BufId::frame(1 << 31), None);
        assert_eq!(BufId::tape(1 << 31), None);
        let (f, t) = (BufId::frame(7).unwrap(), BufId::tape(7).unwrap());
        assert_ne!(f, t);
        assert_eq!((f.frame_index(), t.frame_index()), (Some(7), None));
        assert_eq!(format!("{f:?}, {t:?}"), "frame buffer 7, tape buffer 7");
    }
}
