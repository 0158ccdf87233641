//! The tape: the scalars that `push` saves and `pop` takes back, and the buffers that
//! `tape_alloc` makes and `tape_view` views, kept by the
//! [`Interpreter`](super::Interpreter) across calls.
//!
//! Scalars are one LIFO stack. Buffers are a table, indexed from 0, that only grows
//! until [`Tape::clear`]; a buffer is never moved out of it, so a slot that views one
//! (by its index: see [`BufId`](super::step::BufId)) stays valid for the whole call
//! (the tape is never cleared during a call).
//!
//! A handle names a buffer by its index and the tape's *generation*, which
//! [`Tape::clear`] advances, so a handle from before a reset names nothing: bit 63
//! set, bits 32..63 the generation (1 to 2^31 - 1, wrapping after that many resets),
//! bits 0..32 the index. Handles are thus negative, and a handle misused as a length
//! or an index fails at once. The encoding is the interpreter's own: programs get
//! handles only from `tape_alloc`.

use crate::interp::ErrorKind;
use crate::interp::step::Buffer;
use crate::types::{Elem, Scalar, Type};

/// The tape of one interpreter. See the [module docs](self).
#[derive(Debug)]
pub(super) struct Tape {
    scalars: Vec<Scalar>,
    /// The buffers `tape_alloc` made since the last reset, by index.
    bufs: Vec<Buffer>,
    /// The generation of the handles given out now (never 0, below 2^31).
    generation: u32,
    /// The bytes held now: 8 per scalar, the element bytes of every buffer.
    bytes: usize,
    /// The most bytes held at once since the tape was made or cleared.
    peak: usize,
    /// The steps `recompute` counted since the tape was made or cleared.
    recomputed: u64,
}

impl Default for Tape {
    fn default() -> Tape {
        Tape {
            scalars: Vec::new(),
            bufs: Vec::new(),
            generation: 1,
            bytes: 0,
            peak: 0,
            recomputed: 0,
        }
    }
}

/// The bytes a scalar takes on the tape, whatever its type.
const SCALAR_BYTES: usize = 8;

/// Bit 63 of every handle.
const HANDLE_TAG: u64 = 1 << 63;

/// The generations are `1..GENERATIONS`.
const GENERATIONS: u32 = 1 << 31;

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

    /// `recompute n`: counts `n` steps run again (a negative `n` counts none).
    pub(super) fn recompute(&mut self, n: i64) {
        self.recomputed = self.recomputed.saturating_add(n.max(0) as u64);
    }

    /// The steps counted by `recompute` since the last reset.
    pub(super) fn recomputed(&self) -> u64 {
        self.recomputed
    }

    /// Drops everything, forgets the peak, and starts a new generation of handles.
    pub(super) fn clear(&mut self) {
        let next = self.generation.wrapping_add(1) % GENERATIONS;
        *self = Tape {
            generation: next.max(1),
            ..Tape::default()
        };
    }

    fn grow(&mut self, bytes: usize) {
        self.bytes = self.bytes.saturating_add(bytes);
        self.peak = self.peak.max(self.bytes);
    }

    fn shrink(&mut self, bytes: usize) {
        self.bytes = self.bytes.saturating_sub(bytes);
    }

    /// `push`: an error, not an abort, when the memory for a bigger tape cannot be
    /// had ([`ErrorKind::TapeFull`] with the scalars it holds, as the JIT says).
    pub(super) fn push(&mut self, s: Scalar) -> Result<(), ErrorKind> {
        if self.scalars.len() == self.scalars.capacity() {
            self.scalars
                .try_reserve(self.scalars.len().max(1024))
                .map_err(|_| ErrorKind::TapeFull(self.scalars.len()))?;
        }
        self.scalars.push(s);
        self.grow(SCALAR_BYTES);
        Ok(())
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

    /// `tape_alloc`: keeps `buf` until the tape is cleared, and returns its handle.
    pub(super) fn alloc(&mut self, buf: Buffer) -> Result<i64, ErrorKind> {
        let failed = || ErrorKind::AllocFailed(i64::try_from(buf.len()).unwrap_or(i64::MAX));
        // Indices stay below 2^31, as a `BufId` needs.
        let index = u32::try_from(self.bufs.len())
            .ok()
            .filter(|&i| i < 1 << 31)
            .ok_or_else(failed)?;
        self.bufs.try_reserve(1).map_err(|_| failed())?;
        self.grow(buffer_bytes(&buf));
        self.bufs.push(buf);
        let bits = HANDLE_TAG | u64::from(self.generation) << 32 | u64::from(index);
        Ok(bits as i64)
    }

    /// `tape_view elem, handle`: the index of the buffer `handle` names, if it is live
    /// and holds `elem`s.
    pub(super) fn view(&self, elem: Elem, handle: i64) -> Result<u32, ErrorKind> {
        let bits = handle as u64;
        let generation = (bits >> 32) as u32 & (GENERATIONS - 1);
        let index = bits as u32;
        let found = match self.bufs.get(index as usize) {
            Some(b) if bits & HANDLE_TAG != 0 && generation == self.generation => b.elem(),
            _ => return Err(ErrorKind::NoTapeBuffer { elem, handle }),
        };
        if found != elem {
            return Err(ErrorKind::TapeBufferMismatch {
                handle,
                expected: elem,
                found,
            });
        }
        Ok(index)
    }

    /// The buffer at `index`.
    #[inline]
    pub(super) fn buf(&self, index: u32) -> Option<&Buffer> {
        self.bufs.get(index as usize)
    }

    /// The buffer at `index`, to write.
    #[inline]
    pub(super) fn buf_mut(&mut self, index: u32) -> Option<&mut Buffer> {
        self.bufs.get_mut(index as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scalars_pop_in_reverse_and_check_their_type() {
        let mut t = Tape::default();
        t.push(Scalar::F64(1.5)).unwrap();
        t.push(Scalar::I64(7)).unwrap();
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
    fn handles_name_buffers_of_the_current_generation_only() {
        let mut t = Tape::default();
        let a = t.alloc(Buffer::F32(vec![1.0, 2.0])).unwrap();
        let b = t.alloc(Buffer::I64(vec![0; 3])).unwrap();
        assert_ne!(a, b);
        assert!(a < 0 && b < 0, "handles are negative: {a}, {b}");
        assert_eq!(t.len(), (0, 2));
        assert_eq!(t.bytes(), (32, 32));
        assert_eq!(t.view(Elem::F32, a), Ok(0));
        assert_eq!(t.view(Elem::I64, b), Ok(1));
        assert!(matches!(t.buf(0), Some(Buffer::F32(v)) if v == &[1.0, 2.0]));
        assert_eq!(
            t.view(Elem::F64, b),
            Err(ErrorKind::TapeBufferMismatch {
                handle: b,
                expected: Elem::F64,
                found: Elem::I64
            })
        );
        // Forged handles: small numbers, an index beyond the table, no tag.
        for h in [0, 1, 12345, a + 2, a & i64::MAX, -1, i64::MIN] {
            assert_eq!(
                t.view(Elem::F32, h),
                Err(ErrorKind::NoTapeBuffer {
                    elem: Elem::F32,
                    handle: h
                }),
                "{h}"
            );
        }
        // After a reset, the same index has another handle, and the old one is stale.
        t.clear();
        assert_eq!((t.len(), t.bytes()), ((0, 0), (0, 0)));
        let c = t.alloc(Buffer::F32(vec![0.0])).unwrap();
        assert_ne!(c, a);
        assert_eq!(t.view(Elem::F32, c), Ok(0));
        assert!(matches!(
            t.view(Elem::F32, a),
            Err(ErrorKind::NoTapeBuffer { .. })
        ));
    }

    #[test]
    fn generations_wrap_but_skip_zero() {
        let mut t = Tape {
            generation: GENERATIONS - 1,
            ..Tape::default()
        };
        let a = t.alloc(Buffer::F64(vec![])).unwrap();
        assert_eq!(
            a as u64 >> 32,
            (HANDLE_TAG >> 32) | u64::from(GENERATIONS - 1)
        );
        t.clear();
        assert_eq!(t.generation, 1);
        let b = t.alloc(Buffer::F64(vec![])).unwrap();
        assert_eq!(b as u64, HANDLE_TAG | 1 << 32);
        assert!(t.view(Elem::F64, a).is_err());
        assert_eq!(t.view(Elem::F64, b), Ok(0));
    }
}
