//! gradlift's own implementations of math functions, shared by every engine.
//!
//! The interpreter, the optimiser's constant folding and the JIT compute `exp` of
//! an `f64` with [`exp`] below, not with the platform's `libm`: the JIT inlines
//! the same sequence of operations as Cranelift instructions (no call, so no
//! registers are lost around it in a loop), and computing the same operations in
//! the same order gives the same bits on every engine and every machine.
//!
//! [`exp`] is the classic argument reduction and rational approximation of
//! FreeBSD's `e_exp.c` (also Go's `math.Exp`), whose error is below 1 ulp:
//! `x = k ln2 + r` with `|r| <= ln2 / 2`, then `exp(r)` by a degree-5 polynomial
//! in `r^2` and one division, and the result scaled by `2^k`. It uses only
//! compares, additions, multiplications, one division and exact bit operations
//! (no fused multiply-add, no table, no branch), so any IEEE 754 machine computes
//! it bit for bit alike (NaN payloads aside).
//! `tests` compare it with the platform's `exp` (within 1 ulp) and at the edges
//! (overflow, underflow, subnormal results, infinities, NaN).
//!
//! The other functions (`sin`, `log`, `tanh`, ... and every `f32` function) are
//! still Rust's `std` (the platform's `libm`), called by the JIT and the
//! interpreter alike.

/// `ln 2`, high part: its low 21 bits are zero, so `k * LN2_HI` is exact for
/// `|k| < 2^21`.
pub const LN2_HI: f64 = f64::from_bits(0x3fe6_2e42_fee0_0000);
/// `ln 2 - LN2_HI`.
pub const LN2_LO: f64 = f64::from_bits(0x3dea_39ef_3579_3c76);
/// `1 / ln 2`.
pub const LOG2_E: f64 = f64::from_bits(0x3ff7_1547_652b_82fe);
/// `1.5 * 2^52`: adding it to a number of magnitude below `2^51` rounds it to an
/// integer (to nearest, ties to even), which the low bits of the sum then hold.
pub const SHIFT: f64 = f64::from_bits(0x4338_0000_0000_0000);
/// The polynomial's coefficients (`e_exp.c`'s `P1` to `P5`).
pub const P: [f64; 5] = [
    f64::from_bits(0x3fc5_5555_5555_553e),
    f64::from_bits(0xbf66_c16c_16be_bd93),
    f64::from_bits(0x3f11_566a_af25_de2c),
    f64::from_bits(0xbebb_bd41_c5d2_6bf1),
    f64::from_bits(0x3e66_3769_72be_a4d0),
];
/// [`exp`] clamps its argument to `[EXP_MIN, EXP_MAX]` first: `exp(710)` already
/// overflows to infinity and `exp(-746)` rounds to zero, so the clamp changes no
/// result, and the scaling below never sees an exponent out of range.
pub const EXP_MAX: f64 = 710.0;
/// See [`EXP_MAX`].
pub const EXP_MIN: f64 = -746.0;

/// `e^x` to within 1 ulp, the same bits on every engine (see the [module
/// docs](self)). The JIT emits exactly these operations, in this order.
///
/// ```
/// use gradlift_ir::math::exp;
/// assert_eq!(exp(0.0), 1.0);
/// assert!((exp(1.0) - std::f64::consts::E).abs() <= f64::EPSILON * 3.0);
/// assert_eq!(exp(1000.0), f64::INFINITY);
/// assert_eq!(exp(-1000.0), 0.0);
/// assert!(exp(f64::NAN).is_nan());
/// ```
pub fn exp(x: f64) -> f64 {
    // The clamp lets NaN through.
    let x = x.clamp(EXP_MIN, EXP_MAX);
    // k = round(x / ln 2), as a float and as an integer (in [-1076, 1024]).
    let kd = x * LOG2_E + SHIFT;
    let ki = (kd.to_bits() as i64).wrapping_sub(SHIFT.to_bits() as i64);
    let k = kd - SHIFT;
    // x = k ln 2 + r, |r| <= ln 2 / 2: `hi` is exact.
    let hi = x - k * LN2_HI;
    let lo = k * LN2_LO;
    let r = hi - lo;
    let t = r * r;
    let c = r - t * (P[0] + t * (P[1] + t * (P[2] + t * (P[3] + t * P[4]))));
    let y = 1.0 - ((lo - (r * c) / (2.0 - c)) - hi);
    // y 2^k in two steps, both factors normal: the first product is exact, the
    // second rounds once (to a subnormal number, or to infinity, at the ends).
    let half = ki >> 1;
    y * pow2(half) * pow2(ki.wrapping_sub(half))
}

/// `2^k`, for `-1022 <= k <= 1023`.
fn pow2(k: i64) -> f64 {
    f64::from_bits((k.wrapping_add(1023) as u64) << 52)
}

/// `exp` as the IR defines it, for each float type: [`exp`] for `f64` (what the
/// JIT inlines), the platform's for `f32`. The interpreter and the JIT's helper
/// both call this, so the choice is made once.
pub trait IrExp {
    /// `e^self` as the IR's `exp`.
    fn ir_exp(self) -> Self;
}

impl IrExp for f64 {
    fn ir_exp(self) -> f64 {
        exp(self)
    }
}

impl IrExp for f32 {
    fn ir_exp(self) -> f32 {
        self.exp()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The distance in ulps between two finite floats of one sign.
    fn ulps(a: f64, b: f64) -> u64 {
        (a.to_bits() as i64 - b.to_bits() as i64).unsigned_abs()
    }

    #[test]
    fn constants_are_what_they_say() {
        assert_eq!(LN2_HI + LN2_LO, std::f64::consts::LN_2);
        assert_eq!(LN2_HI.to_bits() & ((1 << 21) - 1), 0);
        assert_eq!(LOG2_E, std::f64::consts::LOG2_E);
        assert_eq!(SHIFT, 1.5 * 2f64.powi(52));
    }

    #[test]
    fn exp_is_within_one_ulp_of_the_platform_over_its_whole_range() {
        // A deterministic sweep: every 7919th step of a fine grid, plus random
        // bits of a fixed generator, over the finite nonzero results.
        let mut worst = 0;
        let mut state = 0x2545_f491_4f6c_dd1d_u64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let n = 400_000;
        for i in 0..n {
            let grid = EXP_MIN + (EXP_MAX - EXP_MIN) * i as f64 / n as f64;
            let random = (next() >> 11) as f64 / (1u64 << 53) as f64;
            let small = (next() >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0;
            for x in [grid, EXP_MIN + random * 1456.0, small, small * 1e-8] {
                let (ours, std) = (exp(x), x.exp());
                if std == 0.0 || std.is_infinite() {
                    assert_eq!(ours, std, "exp({x:e})");
                    continue;
                }
                let d = ulps(ours, std);
                assert!(d <= 1, "exp({x:e}) = {ours:e}, platform {std:e}: {d} ulps");
                worst = worst.max(d);
            }
        }
        assert!(worst <= 1);
    }

    #[test]
    fn exp_edges() {
        assert_eq!(exp(0.0), 1.0);
        assert_eq!(exp(-0.0), 1.0);
        assert_eq!(exp(f64::INFINITY), f64::INFINITY);
        assert_eq!(exp(f64::NEG_INFINITY), 0.0);
        assert!(exp(f64::NAN).is_nan());
        assert_eq!(exp(709.8), f64::INFINITY);
        assert!(exp(709.78).is_finite());
        assert_eq!(exp(-746.0), 0.0);
        assert_eq!(exp(EXP_MAX), f64::INFINITY);
        assert_eq!(exp(EXP_MIN), 0.0);
        // Subnormal results, and large ones.
        for x in [
            -708.5, -720.0, -740.0, -745.0, -745.1, 706.999, 707.0, 708.0, 709.7, 709.78,
        ] {
            let (ours, std) = (exp(x), x.exp());
            assert!(
                ulps(ours, std) <= 1,
                "exp({x}) = {ours:e}, platform {std:e}"
            );
        }
        // Tiny arguments: 1 + x rounded.
        for x in [1e-300, -1e-300, 1e-17, -1e-17, f64::MIN_POSITIVE] {
            assert_eq!(exp(x), 1.0, "exp({x:e})");
        }
    }
}
