//! The generated code works whatever the caller has in scope: gradlift's tracing
//! prelude brings `SliceRead::len` (an `i64`), which must not be what the shadow
//! checks call.

#![allow(unused_imports)]

use gradlift::autodiff_reverse;
use gradlift::trace::prelude::*;

#[autodiff_reverse(d_first_sq, Duplicated, Active)]
fn first_sq(x: &[f64]) -> f64 {
    x[0] * x[0]
}

#[test]
fn the_prelude_in_scope() {
    let mut dx = [0.0; 2];
    assert_eq!(d_first_sq(&[3.0, 1.0], &mut dx, 1.0), 9.0);
    assert_eq!(dx, [6.0, 0.0]);
    assert!(d_first_sq_try(&[3.0, 1.0], &mut [0.0], 1.0).is_err());
    assert_eq!(d_first_sq_grad(&[3.0, 1.0]), (9.0, vec![6.0, 0.0]));
    assert_eq!(first_sq(&[2.0]), 4.0);
}
