//! `ndarray`'s one-dimensional arrays and views where `autodiff` takes slices
//! (feature `ndarray`): gradients, tangents and values bit for bit those of the
//! slice API, the caller's memory written in place (no copy), and views that are
//! not contiguous refused with the documented error, the shadow left untouched.
#![cfg(feature = "ndarray")]

use gradlift::trace::prelude::*;
use gradlift::{Const, Dual, Duplicated, DuplicatedNoNeed, Error, autodiff};
use ndarray::{Array1, Array2, ArrayView1, s};

#[path = "common/slice_programs.rs"]
mod slice_programs;
use slice_programs::{bits, data, energy, square_in_place};

#[test]
fn arrays_and_views_give_the_slice_apis_gradients_bit_for_bit() -> Result<(), Error> {
    let mut f = autodiff("energy", energy::<Var>)?;
    let (xv, wv) = (data(9, 0.7), data(9, 0.2));
    let mut dx_ref = vec![0.25; 9];
    let (v_ref, _) = f.gradient((Duplicated(&xv[..], &mut dx_ref[..]), Const(&wv[..])))?;

    let (x, w) = (Array1::from(xv.clone()), Array1::from(wv.clone()));
    // Arrays by reference.
    let mut dx = Array1::from_elem(9, 0.25);
    let (v, _) = f.gradient((Duplicated(&x, &mut dx), Const(&w)))?;
    assert_eq!(v.to_bits(), v_ref.to_bits());
    assert_eq!(bits(dx.as_slice().unwrap()), bits(&dx_ref));
    // Views by value; the gradient lands in the caller's array.
    let mut dx = Array1::from_elem(9, 0.25);
    let (v, _) = f.gradient((Duplicated(x.view(), dx.view_mut()), Const(w.view())))?;
    assert_eq!(v.to_bits(), v_ref.to_bits());
    assert_eq!(bits(dx.as_slice().unwrap()), bits(&dx_ref));
    // A contiguous slice of a larger array is a view like any other.
    let big = Array1::from_iter((0..12).map(|i| if i < 9 { xv[i] } else { 99.0 }));
    let mut dbig = Array1::from_elem(12, 0.25);
    let (v, _) = f.gradient((
        DuplicatedNoNeed(big.slice(s![..9]), dbig.slice_mut(s![..9])),
        Const(&w),
    ))?;
    assert_eq!(v.to_bits(), v_ref.to_bits());
    assert_eq!(bits(&dbig.as_slice().unwrap()[..9]), bits(&dx_ref));
    assert_eq!(dbig.as_slice().unwrap()[9..], [0.25; 3]);
    // The primal alone, with an array and a view.
    assert_eq!(f.call((&x, w.view()))?.to_bits(), v_ref.to_bits());
    Ok(())
}

#[test]
fn writable_arrays_are_updated_in_place() -> Result<(), Error> {
    let mut sq = autodiff("square_in_place", square_in_place::<Var>)?;
    let x0 = [1.0, -2.0, 3.0];
    let s = [0.0, 1.0, -0.5];
    let (mut x_ref, mut dx_ref) = (x0, s);
    sq.gradient((Duplicated(&mut x_ref[..], &mut dx_ref[..]),))?;

    let mut x = Array1::from(x0.to_vec());
    let mut dx = Array1::from(s.to_vec());
    sq.gradient((Duplicated(x.view_mut(), dx.view_mut()),))?;
    assert_eq!(x.as_slice().unwrap(), x_ref);
    assert_eq!(bits(dx.as_slice().unwrap()), bits(&dx_ref));
    // Const by mutable reference: updated, no derivative.
    let mut x = Array1::from(x0.to_vec());
    sq.gradient((Const(&mut x),))?;
    assert_eq!(x.as_slice().unwrap(), x_ref);
    // DuplicatedNoNeed: the caller's array keeps its contents.
    let mut x = Array1::from(x0.to_vec());
    let mut dx = Array1::from(s.to_vec());
    sq.gradient((DuplicatedNoNeed(&mut x, &mut dx),))?;
    assert_eq!(x.as_slice().unwrap(), x0);
    assert_eq!(bits(dx.as_slice().unwrap()), bits(&dx_ref));
    Ok(())
}

#[test]
fn tangents_through_views() -> Result<(), Error> {
    let mut f = autodiff("energy", energy::<Var>)?;
    let (xv, wv, tv) = (data(7, 0.7), data(7, 0.2), data(7, 1.3));
    let (v_ref, t_ref) = f.jvp((Dual(&xv[..], &tv[..]), Const(&wv[..])))?;
    let (x, w, t) = (Array1::from(xv), Array1::from(wv), Array1::from(tv));
    let (v, tan) = f.jvp((Dual(x.view(), t.view()), Const(&w)))?;
    assert_eq!(
        (v.to_bits(), tan.to_bits()),
        (v_ref.to_bits(), t_ref.to_bits())
    );
    let (v, tan) = f.jvp((Dual(&x, &t), Const(w.view())))?;
    assert_eq!(
        (v.to_bits(), tan.to_bits()),
        (v_ref.to_bits(), t_ref.to_bits())
    );
    Ok(())
}

#[test]
fn views_that_are_not_contiguous_are_errors_and_touch_nothing() -> Result<(), Error> {
    let mut f = autodiff("energy", energy::<Var>)?;
    let x = Array1::from(data(10, 0.7));
    let w = Array1::from(data(5, 0.2));
    let every_other: ArrayView1<'_, f64> = x.slice(s![..;2]);
    assert_eq!(every_other.len(), 5);

    // The primal.
    let mut dx = Array1::from_elem(5, 0.5);
    let e = f
        .gradient((Duplicated(every_other, dx.view_mut()), Const(&w)))
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "argument 1: the slice: an ndarray array with stride 2 is not \
         contiguous in memory, and gradlift lends slices to compiled code without \
         copying; pass a contiguous array instead (`.to_owned()`, or \
         `.as_standard_layout()` for a view)"
    );
    assert_eq!(dx.as_slice().unwrap(), [0.5; 5]);
    // The shadow, reversed: stride -1.
    let xs = Array1::from(data(5, 0.7));
    let mut dbig = Array1::from_elem(5, 0.5);
    let e = f
        .gradient((Duplicated(&xs, dbig.slice_mut(s![..;-1])), Const(&w)))
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("argument 1: the shadow: an ndarray array with stride -1 is not contiguous"),
        "{e}"
    );
    assert_eq!(dbig.as_slice().unwrap(), [0.5; 5]);
    // A constant and the primal alone.
    let mut dx = Array1::from_elem(5, 0.0);
    let e = f
        .gradient((Duplicated(&xs, &mut dx), Const(every_other)))
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("argument 2: an ndarray array with stride 2"),
        "{e}"
    );
    let e = f.call((every_other, &w)).unwrap_err();
    assert!(
        e.to_string()
            .contains("argument 1: an ndarray array with stride 2"),
        "{e}"
    );
    // A column of a row-major matrix is strided too; as a copy it is fine.
    let m = Array2::from_shape_vec((5, 2), data(10, 0.7)).unwrap();
    assert!(f.call((m.column(0), &w)).is_err());
    let col = m.column(0).to_owned();
    let mut dcol = Array1::zeros(5);
    f.gradient((Duplicated(&col, &mut dcol), Const(&w)))?;
    assert!(dcol.iter().all(|d| d.is_finite() && *d != 0.0), "{dcol}");
    Ok(())
}

#[test]
fn hessians_and_jacobians_convert_to_arrays() -> Result<(), Error> {
    let mut f = autodiff("energy", energy::<Var>)?;
    let x = Array1::from(data(4, 0.7));
    let w = Array1::from(data(4, 0.2));
    let mut dx = Array1::zeros(4);
    let h = f.hessian((Duplicated(&x, &mut dx), Const(&w)))?;
    let (rows, cols, entries) = (h.rows, h.cols, h.data.clone());
    let a = Array2::try_from(h)?;
    assert_eq!(a.dim(), (rows, cols));
    for r in 0..rows {
        for c in 0..cols {
            assert_eq!(a[[r, c]], entries[r * cols + c]);
        }
    }
    // The closed form: 2 w_i on the diagonal, 1 next to it.
    for i in 0..4 {
        assert_eq!(a[[i, i]], 2.0 * w[i]);
        if i + 1 < 4 {
            assert_eq!((a[[i, i + 1]], a[[i + 1, i]]), (1.0, 1.0));
        }
    }
    // A matrix whose data do not fit its shape is an error, not a panic.
    let mut bad = f.hessian((Duplicated(&x, &mut dx), Const(&w)))?;
    bad.data.pop();
    let e = Array2::try_from(bad).unwrap_err();
    assert_eq!(e.to_string(), "a 4 x 4 matrix holds 16 entries, not 15");
    Ok(())
}
