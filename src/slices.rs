//! The containers gradlift lends to compiled code as slices, without copying.
//!
//! Where a traced function has a slice parameter ([`Slice<E>`](crate::trace::Slice),
//! [`SliceMut<E>`](crate::trace::SliceMut)), the activities of [`autodiff`](crate::autodiff())
//! ([`Const`](crate::Const), [`Duplicated`](crate::Duplicated),
//! [`DuplicatedNoNeed`](crate::DuplicatedNoNeed), [`Dual`](crate::Dual)) and the
//! arguments of [`Autodiff::call`](crate::Autodiff::call) take:
//!
//! - by reference, `&c` (or `&mut c` where the function or the shadow writes), any
//!   container `c` that is [`AsSlice`] ([`AsSliceMut`]): `[E]`, `Vec<E>`, `[E; N]`,
//!   `Box<[E]>`; with the feature `ndarray`, a one-dimensional `ndarray` array
//!   (`Array1`, `ArrayView1`, `ArcArray1`, ...); with the feature `nalgebra`, a
//!   `nalgebra` matrix with contiguous storage (`DVector`, `DVectorView`, ...);
//! - by value, the views of those crates: `ArrayView1` and `ArrayViewMut1`,
//!   `DVectorView` and `DVectorViewMut` (and the other contiguous views).
//!
//! Nothing is copied: the compiled code reads and writes the caller's memory. A
//! container whose elements are not one contiguous run in memory (an `ndarray` view
//! with a stride other than 1, such as `x.slice(s![..;2])` or a column of a
//! row-major matrix) is an error ([`NotContiguous`]), never a silent copy: the
//! gradient of a copy would not reach the caller. A `nalgebra` view whose storage is
//! strided by its type (a row of a matrix, `rows_with_step`) does not compile.
//!
//! Other containers join by implementing [`AsSlice`] and [`AsSliceMut`].
//!
//! ```
//! use gradlift::trace::prelude::*;
//! use gradlift::{Duplicated, autodiff};
//!
//! fn sumsq<T: Real>(x: T::Slice<'_>) -> T {
//!     for_range(0, x.len(), T::lit(0.0), |i, acc| acc + x.at(i) * x.at(i))
//! }
//! let mut f = autodiff("sumsq", sumsq::<Var>)?;
//! let x = vec![1.0, 2.0, 3.0];
//! let mut dx = [0.0; 3];
//! f.gradient((Duplicated(&x, &mut dx),))?;
//! assert_eq!(dx, [2.0, 4.0, 6.0]);
//! # Ok::<(), gradlift::Error>(())
//! ```

use core::fmt;

/// The elements of a container are not one contiguous run in memory, so gradlift
/// cannot lend them to compiled code without a copy (which it does not make: the
/// gradient written into a copy would not reach the caller).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NotContiguous {
    /// What the container is (`"an ndarray view"`, ...).
    pub what: &'static str,
    /// The distance between consecutive elements, in elements.
    pub stride: isize,
    /// How to get a contiguous container instead.
    pub hint: &'static str,
}

impl fmt::Display for NotContiguous {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} with stride {} is not contiguous in memory, and gradlift lends slices \
             to compiled code without copying; {}",
            self.what, self.stride, self.hint
        )
    }
}

impl std::error::Error for NotContiguous {}

/// A container whose elements gradlift can lend to compiled code as `&[E]`
/// (see the [module docs](self)).
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be lent to compiled code as a slice of `{E}`",
    label = "not a contiguous container of `{E}`",
    note = "gradlift takes `[E]`, `Vec<E>`, `[E; N]` and `Box<[E]>`; one-dimensional `ndarray` arrays with the feature `ndarray`; `nalgebra` matrices and views with contiguous storage with the feature `nalgebra` (a strided view, such as a row of a matrix, is not: copy it with `.clone_owned()`)"
)]
pub trait AsSlice<E> {
    /// The elements in order, or why they are not one contiguous slice.
    fn try_as_slice(&self) -> Result<&[E], NotContiguous>;
}

/// A container whose elements gradlift can lend to compiled code as `&mut [E]`:
/// a writable slice, or a shadow that gradients are added into.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be lent to compiled code as a writable slice of `{E}`",
    label = "not a writable contiguous container of `{E}`",
    note = "gradlift takes `[E]`, `Vec<E>`, `[E; N]` and `Box<[E]>`; one-dimensional `ndarray` arrays with the feature `ndarray`; `nalgebra` matrices and views with contiguous storage with the feature `nalgebra`"
)]
pub trait AsSliceMut<E>: AsSlice<E> {
    /// The elements in order, writable, or why they are not one contiguous slice.
    fn try_as_mut_slice(&mut self) -> Result<&mut [E], NotContiguous>;
}

impl<E> AsSlice<E> for [E] {
    fn try_as_slice(&self) -> Result<&[E], NotContiguous> {
        Ok(self)
    }
}

impl<E> AsSliceMut<E> for [E] {
    fn try_as_mut_slice(&mut self) -> Result<&mut [E], NotContiguous> {
        Ok(self)
    }
}

impl<E> AsSlice<E> for Vec<E> {
    fn try_as_slice(&self) -> Result<&[E], NotContiguous> {
        Ok(self)
    }
}

impl<E> AsSliceMut<E> for Vec<E> {
    fn try_as_mut_slice(&mut self) -> Result<&mut [E], NotContiguous> {
        Ok(self)
    }
}

impl<E, const N: usize> AsSlice<E> for [E; N] {
    fn try_as_slice(&self) -> Result<&[E], NotContiguous> {
        Ok(self)
    }
}

impl<E, const N: usize> AsSliceMut<E> for [E; N] {
    fn try_as_mut_slice(&mut self) -> Result<&mut [E], NotContiguous> {
        Ok(self)
    }
}

impl<E> AsSlice<E> for Box<[E]> {
    fn try_as_slice(&self) -> Result<&[E], NotContiguous> {
        Ok(self)
    }
}

impl<E> AsSliceMut<E> for Box<[E]> {
    fn try_as_mut_slice(&mut self) -> Result<&mut [E], NotContiguous> {
        Ok(self)
    }
}

impl<E, T: AsSlice<E> + ?Sized> AsSlice<E> for &T {
    fn try_as_slice(&self) -> Result<&[E], NotContiguous> {
        (**self).try_as_slice()
    }
}

impl<E, T: AsSlice<E> + ?Sized> AsSlice<E> for &mut T {
    fn try_as_slice(&self) -> Result<&[E], NotContiguous> {
        (**self).try_as_slice()
    }
}

impl<E, T: AsSliceMut<E> + ?Sized> AsSliceMut<E> for &mut T {
    fn try_as_mut_slice(&mut self) -> Result<&mut [E], NotContiguous> {
        (**self).try_as_mut_slice()
    }
}

/// An argument that lends a slice of `E` to compiled code: `&c` or `&mut c` for a
/// container `c` that is [`AsSlice`], or a view of `ndarray` or `nalgebra` by value
/// (with their features). What [`Const`](crate::Const), [`Duplicated`](crate::Duplicated),
/// [`DuplicatedNoNeed`](crate::DuplicatedNoNeed) and [`Dual`](crate::Dual) take for a
/// read-only slice parameter.
#[diagnostic::on_unimplemented(
    message = "`{Self}` does not lend a slice of `{E}`",
    label = "expected `&c` for a container `c` of `{E}`, or a view",
    note = "pass a reference (`&x`) to `[E]`, `Vec<E>`, `[E; N]`, `Box<[E]>`, or, with their features, to a one-dimensional `ndarray` array or a contiguous `nalgebra` vector; views of those crates may be passed by value"
)]
pub trait SliceArg<E> {
    /// The slice lent.
    fn slice_arg(&mut self) -> Result<&[E], NotContiguous>;
}

/// An argument that lends a writable slice of `E` to compiled code: `&mut c` for a
/// container `c` that is [`AsSliceMut`], or a mutable view of `ndarray` or
/// `nalgebra` by value. What a writable slice parameter, and every shadow, take.
#[diagnostic::on_unimplemented(
    message = "`{Self}` does not lend a writable slice of `{E}`",
    label = "expected `&mut c` for a container `c` of `{E}`, or a mutable view",
    note = "pass a mutable reference (`&mut dx`) to `[E]`, `Vec<E>`, `[E; N]`, `Box<[E]>`, or, with their features, to a one-dimensional `ndarray` array or a contiguous `nalgebra` vector; mutable views of those crates may be passed by value"
)]
pub trait SliceArgMut<E>: SliceArg<E> {
    /// The writable slice lent.
    fn slice_arg_mut(&mut self) -> Result<&mut [E], NotContiguous>;
}

impl<E, S: AsSlice<E> + ?Sized> SliceArg<E> for &S {
    fn slice_arg(&mut self) -> Result<&[E], NotContiguous> {
        (**self).try_as_slice()
    }
}

impl<E, S: AsSlice<E> + ?Sized> SliceArg<E> for &mut S {
    fn slice_arg(&mut self) -> Result<&[E], NotContiguous> {
        (**self).try_as_slice()
    }
}

impl<E, S: AsSliceMut<E> + ?Sized> SliceArgMut<E> for &mut S {
    fn slice_arg_mut(&mut self) -> Result<&mut [E], NotContiguous> {
        (**self).try_as_mut_slice()
    }
}

#[cfg(feature = "ndarray")]
mod with_ndarray {
    use ::ndarray::{ArrayBase, ArrayView1, ArrayViewMut1, Data, DataMut, Ix1};

    use super::{AsSlice, AsSliceMut, NotContiguous, SliceArg, SliceArgMut};

    fn not_contiguous(stride: isize) -> NotContiguous {
        NotContiguous {
            what: "an ndarray array",
            stride,
            hint: "pass a contiguous array instead (`.to_owned()`, or `.as_standard_layout()` for a view)",
        }
    }

    impl<A, S: Data<Elem = A>> AsSlice<A> for ArrayBase<S, Ix1> {
        fn try_as_slice(&self) -> Result<&[A], NotContiguous> {
            let stride = self.strides()[0];
            self.as_slice().ok_or_else(|| not_contiguous(stride))
        }
    }

    impl<A, S: DataMut<Elem = A>> AsSliceMut<A> for ArrayBase<S, Ix1> {
        fn try_as_mut_slice(&mut self) -> Result<&mut [A], NotContiguous> {
            let stride = self.strides()[0];
            self.as_slice_mut().ok_or_else(|| not_contiguous(stride))
        }
    }

    impl<A> SliceArg<A> for ArrayView1<'_, A> {
        fn slice_arg(&mut self) -> Result<&[A], NotContiguous> {
            AsSlice::<A>::try_as_slice(&*self)
        }
    }

    impl<A> SliceArg<A> for ArrayViewMut1<'_, A> {
        fn slice_arg(&mut self) -> Result<&[A], NotContiguous> {
            AsSlice::<A>::try_as_slice(&*self)
        }
    }

    impl<A> SliceArgMut<A> for ArrayViewMut1<'_, A> {
        fn slice_arg_mut(&mut self) -> Result<&mut [A], NotContiguous> {
            AsSliceMut::<A>::try_as_mut_slice(&mut *self)
        }
    }
}

/// A strided `nalgebra` view (here a row of a column-major matrix) is not a
/// contiguous container, and does not compile where a slice is taken:
///
/// ```compile_fail
/// use gradlift::trace::prelude::*;
/// use gradlift::{Duplicated, autodiff};
///
/// let mut f = autodiff("sum", |x: Slice<f64>| {
///     for_range(0, x.len(), Var::from(0.0), |i, acc| acc + x.at(i))
/// }).unwrap();
/// let m = nalgebra::DMatrix::<f64>::zeros(3, 3);
/// let mut d = nalgebra::DMatrix::<f64>::zeros(3, 3);
/// f.gradient((Duplicated(m.row(0), d.row_mut(0)),)).unwrap();
/// ```
///
/// A copy of it does (and so does a column, which is contiguous):
///
/// ```
/// use gradlift::trace::prelude::*;
/// use gradlift::{Duplicated, autodiff};
///
/// let mut f = autodiff("sum", |x: Slice<f64>| {
///     for_range(0, x.len(), Var::from(0.0), |i, acc| acc + x.at(i))
/// }).unwrap();
/// let m = nalgebra::DMatrix::<f64>::zeros(3, 3);
/// let mut d = nalgebra::DVector::<f64>::zeros(3);
/// f.gradient((Duplicated(&m.row(0).transpose(), &mut d),)).unwrap();
/// assert_eq!(d.as_slice(), [1.0; 3]);
/// f.gradient((Duplicated(m.column(0), &mut d),)).unwrap();
/// assert_eq!(d.as_slice(), [2.0; 3]);
/// ```
#[cfg(feature = "nalgebra")]
mod with_nalgebra {
    use ::nalgebra::storage::{IsContiguous, RawStorage, RawStorageMut};
    use ::nalgebra::{Dim, Matrix, ViewStorage, ViewStorageMut};

    use super::{AsSlice, AsSliceMut, NotContiguous, SliceArg, SliceArgMut};

    // Contiguity is a property of a nalgebra storage's type (`IsContiguous`): a
    // strided view does not implement these traits, and does not compile.
    impl<T, R: Dim, C: Dim, S: RawStorage<T, R, C> + IsContiguous> AsSlice<T> for Matrix<T, R, C, S> {
        fn try_as_slice(&self) -> Result<&[T], NotContiguous> {
            Ok(self.as_slice())
        }
    }

    impl<T, R: Dim, C: Dim, S: RawStorageMut<T, R, C> + IsContiguous> AsSliceMut<T>
        for Matrix<T, R, C, S>
    {
        fn try_as_mut_slice(&mut self) -> Result<&mut [T], NotContiguous> {
            Ok(self.as_mut_slice())
        }
    }

    impl<T, R: Dim, C: Dim, RS: Dim, CS: Dim> SliceArg<T>
        for Matrix<T, R, C, ViewStorage<'_, T, R, C, RS, CS>>
    where
        for<'a> ViewStorage<'a, T, R, C, RS, CS>: IsContiguous,
    {
        fn slice_arg(&mut self) -> Result<&[T], NotContiguous> {
            Ok(self.as_slice())
        }
    }

    impl<T, R: Dim, C: Dim, RS: Dim, CS: Dim> SliceArg<T>
        for Matrix<T, R, C, ViewStorageMut<'_, T, R, C, RS, CS>>
    where
        for<'a> ViewStorageMut<'a, T, R, C, RS, CS>: IsContiguous,
    {
        fn slice_arg(&mut self) -> Result<&[T], NotContiguous> {
            Ok(self.as_slice())
        }
    }

    impl<T, R: Dim, C: Dim, RS: Dim, CS: Dim> SliceArgMut<T>
        for Matrix<T, R, C, ViewStorageMut<'_, T, R, C, RS, CS>>
    where
        for<'a> ViewStorageMut<'a, T, R, C, RS, CS>: IsContiguous,
    {
        fn slice_arg_mut(&mut self) -> Result<&mut [T], NotContiguous> {
            Ok(self.as_mut_slice())
        }
    }
}
