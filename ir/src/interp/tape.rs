//! The tape: the scalars and buffers that `push` and `tape_alloc` save and `pop` and
//! `tape_pop` take back, kept by the [`Interpreter`](super::Interpreter) across calls.
//!
//! Scalars are one LIFO stack. Buffers are another, whose entries are of two kinds. A
//! buffer that `tape_alloc` has just made is still used by the running function, whose
//! registers refer to it by its number on the frame-local buffer stack
//! ([`Machine::bufs`](super::Machine)): the tape holds it as [`Saved::Lent`], a
//! reference to that slot. When the function returns, [`Tape::release`] moves it out
//! of the frame-local stack into the tape ([`Saved::Owned`]), before the frame's
//! buffers are dropped. `tape_pop` moves an owned buffer back onto the frame-local
//! stack, where it lives until the popping function returns, like an `alloc`.
//!
//! Invariant: the `Lent` entries are listed in [`Tape::lent`] in tape order, and their
//! slot numbers increase along it (a later `tape_alloc` gets a higher slot, because
//! the slots of returned frames were released first). So the entries of the frame
//! that returns are the last ones, and the top of the tape, if lent, is the last one.

use crate::interp::ErrorKind;
use crate::interp::step::Buffer;
use crate::types::{Elem, Scalar, Type};

/// A buffer on the tape.
#[derive(Debug)]
pub(super) enum Saved {
    /// Held by the tape alone.
    Owned(Buffer),
    /// Still in slot `.0` of the frame-local buffer stack, where a running function
    /// made it with `tape_alloc`.
    Lent(u32),
}

/// The tape of one interpreter. See the [module docs](self).
#[derive(Debug, Default)]
pub(super) struct Tape {
    scalars: Vec<Scalar>,
    bufs: Vec<Saved>,
    /// The indices into `bufs` of the `Lent` entries, in increasing order.
    lent: Vec<usize>,
    /// The bytes held now: 8 per scalar, the element bytes of every buffer.
    bytes: usize,
    /// The most bytes held at once since the tape was made or cleared.
    peak: usize,
}

/// The bytes a scalar takes on the tape, whatever its type.
const SCALAR_BYTES: usize = 8;

fn buffer_bytes(b: &Buffer) -> usize {
    let size = match b.elem() {
        Elem::F64 | Elem::I64 => 8,
        Elem::F32 => 4,
    };
    b.len().saturating_mul(size)
}

impl Tape {
    /// The number of scalars and of buffers on the tape.
    pub(super) fn len(&self) -> (usize, usize) {
        (self.scalars.len(), self.bufs.len())
    }

    /// The bytes held now, and the most held at once.
    pub(super) fn bytes(&self) -> (usize, usize) {
        (self.bytes, self.peak)
    }

    /// Drops everything, and forgets the peak.
    pub(super) fn clear(&mut self) {
        *self = Tape::default();
    }

    fn grow(&mut self, bytes: usize) {
        self.bytes = self.bytes.saturating_add(bytes);
        self.peak = self.peak.max(self.bytes);
    }

    fn shrink(&mut self, bytes: usize) {
        self.bytes = self.bytes.saturating_sub(bytes);
    }

    /// `push`.
    pub(super) fn push(&mut self, s: Scalar) {
        self.scalars.push(s);
        self.grow(SCALAR_BYTES);
    }

    /// `pop ty`: the top scalar, if it is a `ty`. On an error the tape is unchanged.
    pub(super) fn pop(&mut self, ty: Type) -> Result<Scalar, ErrorKind> {
        match self.scalars.last() {
            None => Err(ErrorKind::TapeUnderflow),
            Some(s) if s.ty() != ty => Err(ErrorKind::TapeMismatch {
                expected: ty,
                found: s.ty(),
            }),
            Some(_) => {
                self.shrink(SCALAR_BYTES);
                self.scalars.pop().ok_or(ErrorKind::TapeUnderflow)
            }
        }
    }

    /// `tape_alloc`: puts `buf` in the next slot of `bufs` and lends it to the running
    /// function. Returns the slot.
    pub(super) fn alloc(&mut self, buf: Buffer, bufs: &mut Vec<Buffer>) -> Result<u32, ErrorKind> {
        let id = u32::try_from(bufs.len())
            .map_err(|_| ErrorKind::AllocFailed(i64::try_from(buf.len()).unwrap_or(i64::MAX)))?;
        self.grow(buffer_bytes(&buf));
        bufs.push(buf);
        self.lent.push(self.bufs.len());
        self.bufs.push(Saved::Lent(id));
        Ok(id)
    }

    /// `tape_pop elem` in a frame whose buffers start at slot `frame_bufs`: moves the
    /// top buffer onto `bufs` (or finds it there, if this frame made it) and returns
    /// its slot. On an error the tape is unchanged.
    pub(super) fn pop_buf(
        &mut self,
        elem: Elem,
        frame_bufs: usize,
        bufs: &mut Vec<Buffer>,
    ) -> Result<u32, ErrorKind> {
        let top = self
            .bufs
            .len()
            .checked_sub(1)
            .ok_or(ErrorKind::TapeUnderflow)?;
        let mismatch = |found: Elem| ErrorKind::TapeMismatch {
            expected: Type::slice_mut(elem),
            found: Type::slice_mut(found),
        };
        match &self.bufs[top] {
            Saved::Owned(b) => {
                if b.elem() != elem {
                    return Err(mismatch(b.elem()));
                }
                let id = u32::try_from(bufs.len())
                    .map_err(|_| ErrorKind::Internal("too many buffers".into()))?;
                let Some(Saved::Owned(b)) = self.bufs.pop() else {
                    return Err(ErrorKind::Internal(
                        "the tape changed under tape_pop".into(),
                    ));
                };
                self.shrink(buffer_bytes(&b));
                bufs.push(b);
                Ok(id)
            }
            &Saved::Lent(id) => {
                let Some(b) = bufs.get(id as usize) else {
                    return Err(ErrorKind::Internal(format!(
                        "the tape lends buffer {id}, which was freed"
                    )));
                };
                if b.elem() != elem {
                    return Err(mismatch(b.elem()));
                }
                if (id as usize) < frame_bufs {
                    return Err(ErrorKind::TapeBufferInUse);
                }
                if self.lent.last() != Some(&top) {
                    return Err(ErrorKind::Internal(
                        "the top of the tape is lent but not listed".into(),
                    ));
                }
                let bytes = buffer_bytes(b);
                self.shrink(bytes);
                self.lent.pop();
                self.bufs.pop();
                Ok(id)
            }
        }
    }

    /// Takes back every buffer lent from slot `frame_bufs` of `bufs` up, before a frame
    /// whose buffers start there drops them (`0` at the end of a call). An error is an
    /// interpreter bug: a broken invariant of the tape.
    pub(super) fn release(&mut self, frame_bufs: usize, bufs: &mut [Buffer]) -> Result<(), String> {
        let mut result = Ok(());
        while let Some(&k) = self.lent.last() {
            let Some(&Saved::Lent(id)) = self.bufs.get(k) else {
                self.lent.clear();
                return Err(format!("tape entry {k} is not lent"));
            };
            if (id as usize) < frame_bufs {
                break;
            }
            self.lent.pop();
            let taken = match bufs.get_mut(id as usize) {
                Some(b) => {
                    let empty = match b.elem() {
                        Elem::F64 => Buffer::F64(Vec::new()),
                        Elem::F32 => Buffer::F32(Vec::new()),
                        Elem::I64 => Buffer::I64(Vec::new()),
                    };
                    core::mem::replace(b, empty)
                }
                None => {
                    result = Err(format!("the tape lends buffer {id}, which was freed"));
                    Buffer::F64(Vec::new())
                }
            };
            self.bufs[k] = Saved::Owned(taken);
        }
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scalars_pop_in_reverse_and_check_their_type() {
        let mut t = Tape::default();
        t.push(Scalar::F64(1.5));
        t.push(Scalar::I64(7));
        assert_eq!(
            t.pop(Type::F64),
            Err(ErrorKind::TapeMismatch {
                expected: Type::F64,
                found: Type::I64
            })
        );
        assert_eq!(t.len(), (2, 0));
        assert_eq!(t.pop(Type::I64), Ok(Scalar::I64(7)));
        assert_eq!(t.pop(Type::F64), Ok(Scalar::F64(1.5)));
        assert_eq!(t.pop(Type::F64), Err(ErrorKind::TapeUnderflow));
        assert_eq!(t.bytes(), (0, 16));
    }

    #[test]
    fn lent_buffers_move_to_the_tape_when_their_frame_returns() {
        let mut t = Tape::default();
        // A caller frame's buffers start at 0, a callee's at 1.
        let mut bufs = vec![Buffer::F64(vec![9.0])];
        let a = t.alloc(Buffer::F32(vec![1.0, 2.0]), &mut bufs).unwrap();
        assert_eq!(a, 1);
        assert_eq!(t.bytes(), (8, 8));
        // The callee returns: its tape buffer moves to the tape.
        t.release(1, &mut bufs).unwrap();
        bufs.truncate(1);
        assert!(t.lent.is_empty());
        // A later frame pops it back.
        let b = t.pop_buf(Elem::F32, 1, &mut bufs).unwrap();
        assert_eq!(b, 1);
        assert!(matches!(&bufs[1], Buffer::F32(v) if v == &[1.0, 2.0]));
        assert_eq!(t.bytes(), (0, 8));
        assert_eq!(
            t.pop_buf(Elem::F32, 0, &mut bufs),
            Err(ErrorKind::TapeUnderflow)
        );
    }

    #[test]
    fn a_callee_may_not_pop_its_callers_tape_buffer() {
        let mut t = Tape::default();
        let mut bufs = Vec::new();
        let a = t.alloc(Buffer::I64(vec![0; 3]), &mut bufs).unwrap();
        assert_eq!(
            t.pop_buf(Elem::I64, 1, &mut bufs),
            Err(ErrorKind::TapeBufferInUse)
        );
        assert_eq!(
            t.pop_buf(Elem::F64, 0, &mut bufs),
            Err(ErrorKind::TapeMismatch {
                expected: Type::slice_mut(Elem::F64),
                found: Type::slice_mut(Elem::I64)
            })
        );
        // The frame that made it may.
        assert_eq!(t.pop_buf(Elem::I64, 0, &mut bufs), Ok(a));
        assert_eq!(t.len(), (0, 0));
        t.release(0, &mut bufs).unwrap();
    }
}
