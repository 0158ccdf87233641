//! The fast inverse square root, written once as generic Rust (bits, integer ops,
//! one Newton step), with a custom derivative. Through the bits, automatic
//! differentiation sees a constant guess (a bitcast has no derivative) and
//! differentiates only the Newton step, which gives `-y0^3 / 2` for the magic
//! guess `y0`: off by several percent. The custom derivative says what the function
//! means, `d/dx x^(-1/2) = -y^3 / 2` with the refined `y`, once traced from Rust
//! ([`fisr_vjp`]) and once as native Rust code (`vjp_native`).
//!
//! Run with `cargo run --example fast_inv_sqrt`.

use gradlift::trace::{Tracer, prelude::*};
use gradlift::{Active, Autodiff, Const, Duplicated, autodiff};

/// The magic constant of the `f64` fast inverse square root.
pub const MAGIC: i64 = 0x5FE6EB50C7B537A9;

/// `1 / sqrt(x)` for `x > 0`, within 0.2%: a guess from the bits, one Newton step.
pub fn fisr<T: Real>(x: T) -> T {
    let guess = T::from_bits(T::Int::from(MAGIC) - (x.to_bits() >> 1));
    guess * (T::lit(1.5) - x * 0.5 * guess * guess)
}

/// The derivative of `fisr` as a vjp: `dx = dy * -y^3 / 2` with `y = fisr(x)`.
pub fn fisr_vjp<T: Real>(x: T, dy: T) -> T {
    let y = fisr(x);
    dy * y * y * y * -0.5
}

/// `sum_i fisr(x_i)`, with `fisr` called as the IR function `@fisr`, whose derivative
/// is [`fisr_vjp`] (traced as `@fisr_vjp`).
pub fn sum_fisr<T: Real>(xs: T::Slice<'_>) -> T {
    let fisr = func("fisr", fisr::<T>).vjp("fisr_vjp", fisr_vjp::<T>);
    for_range(0, xs.len(), T::lit(0.0), |i, acc| {
        acc + fisr.call((xs.at(i),))
    })
}

/// `sum_i fisr(x_i)` with `fisr` inlined: differentiated through its body.
pub fn sum_fisr_naive<T: Real>(xs: T::Slice<'_>) -> T {
    for_range(0, xs.len(), T::lit(0.0), |i, acc| acc + fisr(xs.at(i)))
}

/// `fisr` as a traced function with a native Rust derivative, ready for gradients.
pub fn fisr_native_vjp() -> Result<Autodiff<(Var,), Var>, Box<dyn std::error::Error>> {
    let mut tracer = Tracer::new();
    tracer.function_with(func("fisr", fisr::<Var>).vjp_native(
        "fisr_vjp_native",
        |x: &[f64], dy: &[f64], dx: &mut [f64]| dx[0] = dy[0] * -0.5 * fisr(x[0]).powi(3),
    ))?;
    Ok(Autodiff::from_traced(tracer.finish()?, "fisr")?)
}

/// The points of the demonstration.
pub const XS: [f64; 6] = [0.01, 0.25, 0.7, 1.0, 3.0, 1234.5];

/// Prints and checks the derivatives against the closed form.
pub fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut custom = autodiff("sum_fisr", sum_fisr::<Var>)?;
    let mut naive = autodiff("sum_fisr_naive", sum_fisr_naive::<Var>)?;
    let mut native = fisr_native_vjp()?;

    let mut d_custom = [0.0; XS.len()];
    let mut d_naive = [0.0; XS.len()];
    let (sum, ((),)) = custom.gradient((Duplicated(&XS[..], &mut d_custom[..]),))?;
    naive.gradient((Duplicated(&XS[..], &mut d_naive[..]),))?;
    let exact_sum: f64 = XS.iter().map(|x| 1.0 / x.sqrt()).sum();
    println!("sum fisr(x) = {sum:.6} (sum 1/sqrt(x) = {exact_sum:.6})");
    assert!((sum - exact_sum).abs() <= 2e-3 * exact_sum);

    println!("       x   -x^-1.5/2     custom vjp   native vjp   through the bits");
    for (k, &x) in XS.iter().enumerate() {
        let exact = -0.5 * x.powf(-1.5);
        let (_, (d_native,)) = native.gradient((Active(x),))?;
        let rel = |d: f64| (d - exact).abs() / exact.abs();
        println!(
            "{x:8} {exact:12.6e} {:12.6e} {d_native:12.6e} {:12.6e} ({:.2}% off)",
            d_custom[k],
            d_naive[k],
            100.0 * rel(d_naive[k])
        );
        assert!(rel(d_custom[k]) < 1e-2, "custom vjp at {x}");
        assert!(rel(d_native) < 1e-2, "native vjp at {x}");
        assert_eq!(d_custom[k], d_native, "the two custom derivatives agree");
    }
    let worst_naive = XS
        .iter()
        .zip(&d_naive)
        .map(|(&x, d)| (d + 0.5 * x.powf(-1.5)).abs() / (0.5 * x.powf(-1.5)))
        .fold(0.0, f64::max);
    println!(
        "through the bits, the derivative is up to {:.1}% off",
        100.0 * worst_naive
    );

    // With the slice constant, nothing is differentiated: the value alone.
    let (v, ((),)) = custom.gradient((Const(&XS[..]),))?;
    assert_eq!(v, sum);
    println!("traced IR:\n{}", custom.module());
    Ok(())
}
