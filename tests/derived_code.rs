//! Differentiating derived code is refused, not answered with a silent zero: a
//! function that calls a forward pass and a pullback (tape ops in its callees)
//! used to be differentiated without complaint, the values popped off the tape
//! counting as constants (a gradient of 0 where the true one is 12). The error names
//! the op, where it stands, and the call that reaches it.

use gradlift::adjoint::AdError;
use gradlift::ir::parse;
use gradlift::{CompiledGradient, Error, Pipeline};

/// `@use(x) = sq.rvs(1) * x` after `sq.fwd(x)`: 2x * x, whose derivative at 3 is 12.
const CALLS_DERIVED: &str = "
func @sq.fwd(%x: f64) -> f64 {
entry:
    push %x
    %y = fmul %x, %x
    ret %y
}

func @sq.rvs(%dy: f64) -> f64 {
entry:
    %x = pop f64
    %t = fmul %x, %dy
    %g = fadd %t, %t
    ret %g
}

func @use(%x: f64) -> f64 {
entry:
    %y = call @sq.fwd(%x)
    %g = call @sq.rvs(1.0)
    %r = fmul %g, %x
    ret %r
}
";

#[test]
fn tape_ops_in_a_callee_are_refused_with_the_call() {
    let m = parse(CALLS_DERIVED).unwrap();
    let e = Pipeline::new()
        .with_opt(gradlift::ir::opt::OptConfig::none())
        .derive(&m, "use", None)
        .unwrap_err();
    let Error::Derive(AdError::Unsupported { func, what }) = &e else {
        panic!("expected a refusal, got {e:?}")
    };
    assert_eq!(func, "use");
    // The first tape op reached: `push` in @sq.fwd (line 4), through the call at
    // line 19.
    assert!(
        what.starts_with(
            "`push %x` at 4:5 in @sq.fwd, reached through the call of @sq.fwd at 19:5"
        ),
        "{what}"
    );
    // The compiled API refuses the same way.
    assert!(matches!(
        CompiledGradient::new(&m, "use"),
        Err(Error::Derive(AdError::Unsupported { .. }))
    ));
}

#[test]
fn tape_ops_in_the_function_itself_are_refused_too() {
    let m = parse(CALLS_DERIVED).unwrap();
    let e = Pipeline::new()
        .with_opt(gradlift::ir::opt::OptConfig::none())
        .derive(&m, "sq.rvs", None)
        .unwrap_err();
    assert!(e.to_string().contains("`%x = pop f64` at 11:5"), "{e}");
}
