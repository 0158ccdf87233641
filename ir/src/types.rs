//! Types and scalar constants.
//!
//! The IR has four scalar types (`f64`, `f32`, `i64`, `bool`) and slices of the three
//! numeric ones, read-only (`[f64]`) or writable (`mut [f64]`). A slice is a view that
//! carries its length; the IR has no pointers. [`Scalar`] is a typed scalar value: the
//! payload of a literal operand or a `const` instruction, and the interpreter's
//! run-time scalar.
//!
//! Both print in the text format (`Display`), so error messages read like the IR.

use core::fmt;
use core::hash::{Hash, Hasher};

/// The element type of a slice.
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug)]
pub enum Elem {
    /// `f64` elements.
    F64,
    /// `f32` elements.
    F32,
    /// `i64` elements.
    I64,
}

impl Elem {
    /// The scalar type of one element.
    pub fn ty(self) -> Type {
        match self {
            Elem::F64 => Type::F64,
            Elem::F32 => Type::F32,
            Elem::I64 => Type::I64,
        }
    }

    /// The element type whose scalar type is `ty`, if `ty` can be a slice element.
    pub fn of(ty: Type) -> Option<Elem> {
        match ty {
            Type::F64 => Some(Elem::F64),
            Type::F32 => Some(Elem::F32),
            Type::I64 => Some(Elem::I64),
            _ => None,
        }
    }
}

/// The type of a value.
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug)]
pub enum Type {
    /// 64-bit IEEE float.
    F64,
    /// 32-bit IEEE float.
    F32,
    /// 64-bit two's complement integer.
    I64,
    /// Boolean.
    Bool,
    /// A slice view: `[T]` when `mutable` is false, `mut [T]` when true.
    Slice {
        /// The element type.
        elem: Elem,
        /// Whether the slice may be written through (`store`).
        mutable: bool,
    },
}

impl Type {
    /// A read-only slice of `elem`.
    pub const fn slice(elem: Elem) -> Type {
        Type::Slice {
            elem,
            mutable: false,
        }
    }

    /// A writable slice of `elem`.
    pub const fn slice_mut(elem: Elem) -> Type {
        Type::Slice {
            elem,
            mutable: true,
        }
    }

    /// `f64` or `f32`.
    pub fn is_float(self) -> bool {
        matches!(self, Type::F64 | Type::F32)
    }

    /// Any of the four scalar types.
    pub fn is_scalar(self) -> bool {
        !self.is_slice()
    }

    /// A slice, read-only or writable.
    pub fn is_slice(self) -> bool {
        matches!(self, Type::Slice { .. })
    }

    /// A writable slice.
    pub fn is_mut_slice(self) -> bool {
        matches!(self, Type::Slice { mutable: true, .. })
    }

    /// The element type, for slices.
    pub fn elem(self) -> Option<Elem> {
        match self {
            Type::Slice { elem, .. } => Some(elem),
            _ => None,
        }
    }

    /// Whether a value of type `self` may be used where `expected` is declared.
    ///
    /// Types must be equal, except that a `mut [T]` may be passed where a `[T]` is
    /// expected (a writable view is also a readable one).
    pub fn fits(self, expected: Type) -> bool {
        match (self, expected) {
            (
                Type::Slice { elem: a, .. },
                Type::Slice {
                    elem: b,
                    mutable: false,
                },
            ) => a == b,
            _ => self == expected,
        }
    }

    /// Whether derivatives flow through values of this type: floats and float slices.
    pub fn is_differentiable(self) -> bool {
        match self {
            Type::F64 | Type::F32 => true,
            Type::Slice { elem, .. } => matches!(elem, Elem::F64 | Elem::F32),
            Type::I64 | Type::Bool => false,
        }
    }
}

impl fmt::Display for Elem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.ty().fmt(f)
    }
}

impl fmt::Display for Type {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Type::F64 => f.write_str("f64"),
            Type::F32 => f.write_str("f32"),
            Type::I64 => f.write_str("i64"),
            Type::Bool => f.write_str("bool"),
            Type::Slice { elem, mutable } => {
                if *mutable {
                    f.write_str("mut ")?;
                }
                write!(f, "[{elem}]")
            }
        }
    }
}

/// A typed scalar: a constant in the IR, or a run-time scalar in the interpreter.
///
/// Equality and hashing compare bit patterns, so `NaN == NaN` and `0.0 != -0.0`
/// here: two constants are the same constant exactly when they print the same.
#[derive(Copy, Clone, Debug)]
pub enum Scalar {
    /// An `f64`.
    F64(f64),
    /// An `f32`.
    F32(f32),
    /// An `i64`.
    I64(i64),
    /// A `bool`.
    Bool(bool),
}

impl Scalar {
    /// The type of this scalar.
    pub fn ty(self) -> Type {
        match self {
            Scalar::F64(_) => Type::F64,
            Scalar::F32(_) => Type::F32,
            Scalar::I64(_) => Type::I64,
            Scalar::Bool(_) => Type::Bool,
        }
    }

    /// The zero of a scalar type (`0.0`, `0`, `false`); `None` for slices.
    pub fn zero(ty: Type) -> Option<Scalar> {
        Some(match ty {
            Type::F64 => Scalar::F64(0.0),
            Type::F32 => Scalar::F32(0.0),
            Type::I64 => Scalar::I64(0),
            Type::Bool => Scalar::Bool(false),
            Type::Slice { .. } => return None,
        })
    }

    /// The value as an `f64`, if it is a float (an `f32` widens exactly).
    pub fn as_f64(self) -> Option<f64> {
        match self {
            Scalar::F64(x) => Some(x),
            Scalar::F32(x) => Some(f64::from(x)),
            _ => None,
        }
    }

    /// The value as an `i64`, if it is one.
    pub fn as_i64(self) -> Option<i64> {
        match self {
            Scalar::I64(x) => Some(x),
            _ => None,
        }
    }

    /// The value as a `bool`, if it is one.
    pub fn as_bool(self) -> Option<bool> {
        match self {
            Scalar::Bool(x) => Some(x),
            _ => None,
        }
    }

    fn key(self) -> (u8, u64) {
        match self {
            Scalar::F64(x) => (0, x.to_bits()),
            Scalar::F32(x) => (1, u64::from(x.to_bits())),
            Scalar::I64(x) => (2, x as u64),
            Scalar::Bool(x) => (3, u64::from(x)),
        }
    }
}

impl PartialEq for Scalar {
    fn eq(&self, other: &Self) -> bool {
        self.key() == other.key()
    }
}

impl Eq for Scalar {}

impl Hash for Scalar {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.key().hash(state)
    }
}

/// Writes a float literal that parses back to the same value: the shortest decimal
/// that round-trips, always with a `.` or an exponent, or `inf`, `-inf`, `nan`.
fn write_float(f: &mut fmt::Formatter<'_>, x: f64, debug_repr: &str) -> fmt::Result {
    if x.is_nan() {
        f.write_str("nan")
    } else if x.is_infinite() {
        f.write_str(if x > 0.0 { "inf" } else { "-inf" })
    } else {
        // Rust's `Debug` for floats is the shortest round-trip form and always has a
        // `.` or an exponent (`1.0`, `0.1`, `1e-7`, `1e300`).
        f.write_str(debug_repr)
    }
}

/// Prints the literal as the text format writes it (`1.0`, `-2.5e-3`, `inf`, `7`, `true`).
impl fmt::Display for Scalar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Scalar::F64(x) => write_float(f, x, &format!("{x:?}")),
            Scalar::F32(x) => write_float(f, f64::from(x), &format!("{x:?}")),
            Scalar::I64(x) => write!(f, "{x}"),
            Scalar::Bool(x) => write!(f, "{x}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn float_literals_round_trip() {
        for x in [
            1.0,
            0.1,
            -2.5e-3,
            1e-7,
            1e300,
            123456.0,
            -0.0,
            f64::MIN_POSITIVE,
            5e-324,
        ] {
            let text = Scalar::F64(x).to_string();
            assert!(text.contains('.') || text.contains('e'), "{text}");
            assert_eq!(
                text.parse::<f64>().unwrap().to_bits(),
                x.to_bits(),
                "{text}"
            );
        }
        for x in [1.1f32, 0.1, 3.4028235e38, 1e-45] {
            let text = Scalar::F32(x).to_string();
            assert!(text.contains('.') || text.contains('e'), "{text}");
            assert_eq!(
                text.parse::<f32>().unwrap().to_bits(),
                x.to_bits(),
                "{text}"
            );
        }
        assert_eq!(Scalar::F64(f64::NAN).to_string(), "nan");
        assert_eq!(Scalar::F64(f64::NEG_INFINITY).to_string(), "-inf");
        assert_eq!(Scalar::F32(f32::INFINITY).to_string(), "inf");
    }

    #[test]
    fn types_print_as_the_spec_writes_them() {
        assert_eq!(Type::slice_mut(Elem::F32).to_string(), "mut [f32]");
        assert_eq!(Type::slice(Elem::I64).to_string(), "[i64]");
        assert!(Type::slice_mut(Elem::F64).fits(Type::slice(Elem::F64)));
        assert!(!Type::slice(Elem::F64).fits(Type::slice_mut(Elem::F64)));
        assert!(!Type::slice(Elem::F64).fits(Type::slice(Elem::F32)));
    }
}
