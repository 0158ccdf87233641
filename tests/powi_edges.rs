//! The derivative of `powi x, n` at the exponent's edge, n = i64::MIN, where
//! `n - 1` would wrap to i64::MAX: n x^(n-1) is computed as n x^n / x there, on
//! both engines, with the exponent an argument or a constant. Before, it gave -inf
//! at x = 1.0000001 (the true value is -0) and -9.22e18 at x = -1 (true: +9.22e18).

use gradlift::adjoint::{Seeds, value_and_gradient};
use gradlift::ir::interp::Interpreter;
use gradlift::ir::parse;
use gradlift::{CompiledGradient, Pipeline, Val, Workspace};

const BY_ARG: &str = "
func @p(%x: f64, %n: i64) -> f64 {
entry:
    %y = powi %x, %n
    ret %y
}
";

const BY_CONST: &str = "
func @p(%x: f64, %n: i64) -> f64 {
entry:
    %y = powi %x, -9223372036854775808
    ret %y
}
";

/// d/dx of x^n, on the interpreter and the JIT: they must agree bit for bit.
fn derivative(text: &str, x: f64, n: i64) -> f64 {
    let m = parse(text).unwrap();
    let args = [Val::F64(x), Val::I64(n)];
    let rule = Pipeline::new().derive(&m, "p", None).unwrap();
    let g = value_and_gradient(
        &mut Interpreter::new(&rule.module),
        &rule,
        &args,
        &Seeds::default(),
    )
    .unwrap();
    let Some(Val::F64(on_interp)) = g.gradient[0] else {
        panic!("{:?}", g.gradient)
    };
    let grad = CompiledGradient::new(&m, "p").unwrap();
    let g = grad
        .value_and_gradient(&mut Workspace::new(), &args)
        .unwrap();
    let Some(Val::F64(on_jit)) = g.gradient[0] else {
        panic!("{:?}", g.gradient)
    };
    assert_eq!(on_interp.to_bits(), on_jit.to_bits(), "x = {x}, n = {n}");
    on_jit
}

#[test]
fn at_the_smallest_exponent() {
    let min = i64::MIN;
    for text in [BY_ARG, BY_CONST] {
        // x slightly above 1: x^(n-1) underflows to 0, so the derivative is -0.
        let d = derivative(text, 1.000_000_1, min);
        assert_eq!(d, 0.0, "{d}");
        // x = -1: (-1)^(n-1) = -1 (n - 1 is odd), so n x^(n-1) = -n = 2^63.
        assert_eq!(derivative(text, -1.0, min), -(min as f64));
        assert_eq!(derivative(text, 1.0, min), min as f64);
    }
}

#[test]
fn elsewhere_as_before() {
    // 3 x^2, and n x^(n-1) for a negative n, exactly as powi computes them.
    assert_eq!(derivative(BY_ARG, 1.5, 3), 3.0 * 1.5f64.powi(2));
    assert_eq!(derivative(BY_ARG, 2.0, -2), -2.0 * 2.0f64.powi(-3));
    assert_eq!(derivative(BY_ARG, 7.0, 0), 0.0);
}
