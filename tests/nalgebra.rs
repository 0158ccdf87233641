//! `nalgebra`'s vectors and contiguous views where `autodiff` takes slices (feature
//! `nalgebra`): gradients, tangents and values bit for bit those of the slice API,
//! the caller's memory written in place. A strided view does not compile (the
//! `compile_fail` example of `gradlift::slices`, run with the feature).
#![cfg(feature = "nalgebra")]

use gradlift::trace::prelude::*;
use gradlift::{Const, Dual, Duplicated, DuplicatedNoNeed, Error, autodiff};
use nalgebra::{DMatrix, DVector, DVectorView, DVectorViewMut};

#[path = "common/slice_programs.rs"]
mod slice_programs;
use slice_programs::{bits, data, energy, square_in_place};

#[test]
fn vectors_and_views_give_the_slice_apis_gradients_bit_for_bit() -> Result<(), Error> {
    let mut f = autodiff("energy", energy::<Var>)?;
    let (xv, wv) = (data(9, 0.7), data(9, 0.2));
    let mut dx_ref = vec![0.25; 9];
    let (v_ref, _) = f.gradient((Duplicated(&xv[..], &mut dx_ref[..]), Const(&wv[..])))?;

    let (x, w) = (DVector::from_vec(xv.clone()), DVector::from_vec(wv.clone()));
    // Vectors by reference.
    let mut dx = DVector::from_element(9, 0.25);
    let (v, _) = f.gradient((Duplicated(&x, &mut dx), Const(&w)))?;
    assert_eq!(v.to_bits(), v_ref.to_bits());
    assert_eq!(bits(dx.as_slice()), bits(&dx_ref));
    // Views by value (`DVectorView`, `DVectorViewMut`); the gradient lands in the
    // caller's vector.
    let mut dx = DVector::from_element(9, 0.25);
    let (xw, ww): (DVectorView<'_, f64>, DVectorView<'_, f64>) = (x.as_view(), w.as_view());
    let dxw: DVectorViewMut<'_, f64> = dx.as_view_mut();
    let (v, _) = f.gradient((Duplicated(xw, dxw), Const(ww)))?;
    assert_eq!(v.to_bits(), v_ref.to_bits());
    assert_eq!(bits(dx.as_slice()), bits(&dx_ref));
    // Rows of a larger vector; a column of a (column-major) matrix.
    let big = DVector::from_iterator(12, (0..12).map(|i| if i < 9 { xv[i] } else { 99.0 }));
    let mut dbig = DVector::from_element(12, 0.25);
    let (v, _) = f.gradient((
        DuplicatedNoNeed(big.rows(0, 9), dbig.rows_mut(0, 9)),
        Const(&w),
    ))?;
    assert_eq!(v.to_bits(), v_ref.to_bits());
    assert_eq!(bits(&dbig.as_slice()[..9]), bits(&dx_ref));
    assert_eq!(dbig.as_slice()[9..], [0.25; 3]);
    let m = DMatrix::from_fn(9, 2, |r, c| if c == 1 { xv[r] } else { -1.0 });
    let mut dm = DMatrix::from_element(9, 2, 0.25);
    let (v, _) = f.gradient((Duplicated(m.column(1), dm.column_mut(1)), Const(&w)))?;
    assert_eq!(v.to_bits(), v_ref.to_bits());
    assert_eq!(bits(dm.column(1).as_slice()), bits(&dx_ref));
    assert!(dm.column(0).iter().all(|&d| d == 0.25));
    // The primal alone.
    assert_eq!(f.call((&x, ww))?.to_bits(), v_ref.to_bits());
    Ok(())
}

#[test]
fn writable_vectors_are_updated_in_place_and_tangents_flow() -> Result<(), Error> {
    let mut sq = autodiff("square_in_place", square_in_place::<Var>)?;
    let x0 = [1.0, -2.0, 3.0];
    let s = [0.0, 1.0, -0.5];
    let (mut x_ref, mut dx_ref) = (x0, s);
    sq.gradient((Duplicated(&mut x_ref[..], &mut dx_ref[..]),))?;
    let mut x = DVector::from_column_slice(&x0);
    let mut dx = DVector::from_column_slice(&s);
    let xw: DVectorViewMut<'_, f64> = x.as_view_mut();
    sq.gradient((Duplicated(xw, &mut dx),))?;
    assert_eq!(x.as_slice(), x_ref);
    assert_eq!(bits(dx.as_slice()), bits(&dx_ref));

    let mut f = autodiff("energy", energy::<Var>)?;
    let (xv, wv, tv) = (data(7, 0.7), data(7, 0.2), data(7, 1.3));
    let (v_ref, t_ref) = f.jvp((Dual(&xv[..], &tv[..]), Const(&wv[..])))?;
    let (x, w, t) = (
        DVector::from_vec(xv),
        DVector::from_vec(wv),
        DVector::from_vec(tv),
    );
    let (xw, tw): (DVectorView<'_, f64>, DVectorView<'_, f64>) = (x.as_view(), t.as_view());
    let (v, tan) = f.jvp((Dual(xw, tw), Const(&w)))?;
    assert_eq!(
        (v.to_bits(), tan.to_bits()),
        (v_ref.to_bits(), t_ref.to_bits())
    );
    Ok(())
}

#[test]
fn hessians_convert_to_dmatrix() -> Result<(), Error> {
    let mut f = autodiff("energy", energy::<Var>)?;
    let x = DVector::from_vec(data(4, 0.7));
    let w = DVector::from_vec(data(4, 0.2));
    let mut dx = DVector::zeros(4);
    let h = f.hessian((Duplicated(&x, &mut dx), Const(&w)))?;
    let m = DMatrix::try_from(h.clone())?;
    assert_eq!(m.shape(), (h.rows, h.cols));
    for r in 0..h.rows {
        for c in 0..h.cols {
            assert_eq!(m[(r, c)], h.get(r, c));
        }
    }
    for i in 0..4 {
        assert_eq!(m[(i, i)], 2.0 * w[i]);
    }
    let mut bad = h;
    bad.rows = 5;
    let e = DMatrix::try_from(bad).unwrap_err();
    assert_eq!(e.to_string(), "a 5 x 4 matrix holds 20 entries, not 16");
    Ok(())
}
