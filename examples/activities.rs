//! `f(x, y) = x*x + 3y`, written once as generic Rust, differentiated with each of
//! Enzyme's activity combinations: both active, one active and one constant, both
//! constant, and a constant return. Each combination is derived and compiled on its
//! first use; the derivatives are checked against the closed form `(2x, 3)`.
//!
//! Run with `cargo run --example activities`.

use gradlift::trace::prelude::*;
use gradlift::{Active, Const, Return, autodiff};

/// `x*x + 3y`, natively on `f64` or traced on `Var`.
pub fn f<T: Real>(x: T, y: T) -> T
where
    f64: std::ops::Mul<T, Output = T>,
{
    x * x + 3.0 * y
}

/// Prints (and checks) the value and gradient of each combination.
pub fn main() -> Result<(), gradlift::Error> {
    let mut grad = autodiff("f", f::<Var>)?;
    let (x, y) = (2.0, 5.0);
    let value = f(x, y);
    println!("f(x, y) = x*x + 3y at (x, y) = ({x}, {y}): {value}; df/dx = 2x = 4, df/dy = 3");

    let (v, (dx, dy)) = grad.gradient((Active(x), Active(y)))?;
    println!("(Active, Active) -> value {v}, gradient ({dx}, {dy})");
    assert_eq!((v, dx, dy), (value, 2.0 * x, 3.0));

    let (v, (dx, ())) = grad.gradient((Active(x), Const(y)))?;
    println!("(Active, Const)  -> value {v}, gradient ({dx}, ())");
    assert_eq!((v, dx), (value, 2.0 * x));

    let ((), dy) = grad.gradient((Const(x), Active(y)))?.1;
    println!("(Const, Active)  -> gradient ((), {dy})");
    assert_eq!(dy, 3.0);

    // Nothing active and nothing seeded: the value alone, through the rule.
    let (v, ((), ())) = grad.gradient_with(Return::Const, (Const(x), Const(y)))?;
    println!("(Const, Const), Return::Const -> value {v}, gradient ((), ())");
    assert_eq!(v, value);

    // A constant return seeds nothing: active parameters get zero.
    let (v, (dx, dy)) = grad.gradient_with(Return::Const, (Active(x), Active(y)))?;
    println!("(Active, Active), Return::Const -> value {v}, gradient ({dx}, {dy})");
    assert_eq!((dx, dy), (0.0, 0.0));

    // A seed other than 1: a vector-Jacobian product.
    let (_, (dx, dy)) = grad.pullback(&[0.5], (Active(x), Active(y)))?;
    println!("(Active, Active), seed 0.5 -> gradient ({dx}, {dy})");
    assert_eq!((dx, dy), (x, 1.5));

    // The primal alone, compiled.
    let v = grad.call((x, y))?;
    println!("call(x, y) -> {v}");
    assert_eq!(v, value);

    println!(
        "compiled patterns {:?} in {:.1} ms",
        grad.patterns(),
        grad.compile_time().as_secs_f64() * 1e3
    );
    println!("traced IR:\n{}", grad.module());
    Ok(())
}
