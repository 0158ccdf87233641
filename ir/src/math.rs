//! gradlift's own implementations of math functions, shared by every engine.
//!
//! The interpreter, the optimiser's constant folding and the JIT compute `exp` of
//! an `f64` with [`exp`] below, not with the platform's `libm`: the JIT inlines
//! the same sequence of operations as Cranelift instructions (no call, so no
//! registers are lost around it in a loop), and computing the same operations in
//! the same order gives the same bits on every engine and every machine.
//!
//! [`exp`] is the table-driven method of Arm's optimized-routines (also musl's
//! and glibc's): `x = (128 q + i) ln2 / 128 + r` with `|r| <= ln 2 / 256`, then
//! `e^x = 2^q 2^(i/128) e^r`, `2^(i/128)` from a table of 128 pairs (a double
//! and its relative tail, computed here in double-double arithmetic) and `e^r`
//! from a degree-5 polynomial. It uses only additions, multiplications, a table
//! read and exact bit operations (no fused multiply-add, no division), so any
//! IEEE 754 machine computes it bit for bit alike (NaN payloads aside). Its
//! error is about 0.51 ulp: `tests` find it equal to glibc's (correctly rounded
//! in practice) at 99.9% of arguments and never more than 1 ulp away, and check
//! the edges (overflow, underflow, subnormal results, infinities, NaN).
//!
//! [`sin`] and [`cos`] are musl's (FreeBSD's `k_sin.c`, `k_cos.c` and the
//! medium case of `e_rem_pio2.c`) for `|x| < 2^20 pi/2`: `x = n pi/2 + y` with
//! `y` as a sum of two doubles (`pi/2` split into three parts, one, two or three
//! rounds of reduction as cancellation requires), then the degree-13 sine and
//! degree-14 cosine polynomials on `[-pi/4, pi/4]`, the quadrant `n mod 4`
//! choosing one and its sign. Both kernels are computed and the quadrant picks
//! (so `sin x` and `cos x` of one `x` share every operation), and the rounds of
//! reduction are computed and picked the same way: no branch. Larger
//! arguments, infinities and NaN go to the platform's `sin` and `cos` (a call
//! in the JIT too, on a cold path), so only there do results depend on the
//! platform. Within the range the error is below 1 ulp, like musl's.
//!
//! The other functions (`log`, `tanh`, ... and every `f32` function) are still
//! Rust's `std` (the platform's `libm`), called by the JIT and the interpreter
//! alike.

/// `ln 2`, high part: its low 21 bits are zero, so `k * LN2_HI / 128` is exact
/// for `|k| < 2^21`.
pub const LN2_HI: f64 = f64::from_bits(0x3fe6_2e42_fee0_0000);
/// `ln 2 - LN2_HI`.
pub const LN2_LO: f64 = f64::from_bits(0x3dea_39ef_3579_3c76);
/// `1 / ln 2`.
pub const LOG2_E: f64 = f64::from_bits(0x3ff7_1547_652b_82fe);
/// `1.5 * 2^52`: adding it to a number of magnitude below `2^51` rounds it to an
/// integer (to nearest, ties to even), which the low bits of the sum then hold.
pub const SHIFT: f64 = f64::from_bits(0x4338_0000_0000_0000);
/// [`exp`]'s `128 / ln 2`.
pub const EXP_INV_LN2_N: f64 = LOG2_E * 128.0;
/// [`exp`]'s `-ln 2 / 128` in two parts (the first exact times any `k` of 21
/// bits).
pub const EXP_NEG_LN2_HI_N: f64 = -LN2_HI / 128.0;
/// See [`EXP_NEG_LN2_HI_N`].
pub const EXP_NEG_LN2_LO_N: f64 = -LN2_LO / 128.0;
/// [`exp`]'s polynomial: `e^r - 1 - r` as `r^2 (C0 + C1 r) + r^4 (C2 + C3 r)`,
/// Taylor's coefficients `1/2`, `1/6`, `1/24`, `1/120` (for `|r| <= ln 2 / 256`
/// the next term is below `2^-60` of the result).
pub const EXP_C: [f64; 4] = [0.5, 1.0 / 6.0, 1.0 / 24.0, 1.0 / 120.0];
/// [`exp`] computes inline (no special case) where the biased exponent of `|x|`
/// minus this is below [`EXP_RANGE`]: `2^-54 <= |x| < 512`.
pub const EXP_TOP_MIN: u64 = 0x3c9;
/// See [`EXP_TOP_MIN`].
pub const EXP_RANGE: u64 = 0x408 - 0x3c9;

/// [`exp`]'s table of `2^(i/128)`, `i` in `0..128`, in 256 words: word `2i` the
/// bits of the relative tail `t_i`, word `2i + 1` the bits of `h_i` less `i <<
/// 45`, where `2^(i/128) = h_i (1 + t_i)` and `h_i` is the double nearest
/// `2^(i/128)` (so that adding `k << 45` for `k = 128 q + i` gives the bits of
/// `2^q h_i`). Computed once, in double-double arithmetic: square roots of 2
/// (a Newton step each from the double's) multiplied as `i`'s bits say.
pub fn exp_table() -> &'static [u64; 256] {
    static TAB: std::sync::LazyLock<[u64; 256]> = std::sync::LazyLock::new(|| {
        // 2^(2^j / 128) for j in 0..7: the 7th, ..., 1st square roots of 2.
        let mut roots = [(2.0, 0.0); 7];
        let mut r = (2.0, 0.0);
        for j in (0..7).rev() {
            r = dd_sqrt(r);
            roots[j] = r;
        }
        let mut out = [0u64; 256];
        for i in 0..128u64 {
            let mut v = (1.0, 0.0);
            for (j, &root) in roots.iter().enumerate() {
                if (i >> j) & 1 == 1 {
                    v = dd_mul(v, root);
                }
            }
            out[2 * i as usize] = (v.1 / v.0).to_bits();
            out[2 * i as usize + 1] = v.0.to_bits().wrapping_sub(i << 45);
        }
        out
    });
    &TAB
}

/// `a * b` exactly, as `(hi, lo)` (Dekker's product: no fused multiply-add).
fn two_prod(a: f64, b: f64) -> (f64, f64) {
    let split = |v: f64| {
        let c = 134_217_729.0 * v;
        let hi = c - (c - v);
        (hi, v - hi)
    };
    let p = a * b;
    let ((ah, al), (bh, bl)) = (split(a), split(b));
    (p, ((ah * bh - p) + ah * bl + al * bh) + al * bl)
}

/// `(a.0 + a.1) (b.0 + b.1)` as a double-double.
fn dd_mul(a: (f64, f64), b: (f64, f64)) -> (f64, f64) {
    let (p, e) = two_prod(a.0, b.0);
    let e = e + (a.0 * b.1 + a.1 * b.0);
    let s = p + e;
    (s, e - (s - p))
}

/// The square root of `a.0 + a.1` as a double-double.
fn dd_sqrt(a: (f64, f64)) -> (f64, f64) {
    let s = a.0.sqrt();
    let (p, e) = two_prod(s, s);
    let r = ((a.0 - p) - e + a.1) / (2.0 * s);
    let t = s + r;
    (t, r - (t - s))
}

/// `e^x`, the same bits on every engine and machine (see the [module
/// docs](self)); within 1 ulp of the exact value, and of the platform's `exp`
/// (equal to glibc's at 99.9% of arguments). The JIT emits exactly the
/// operations of the main case, for `2^-54 <= |x| < 512`, and calls this
/// function for the others.
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
    let abstop = (x.to_bits() >> 52) & 0x7ff;
    let special = abstop.wrapping_sub(EXP_TOP_MIN) >= EXP_RANGE;
    if special {
        if abstop < EXP_TOP_MIN {
            // |x| < 2^-54: 1 + x rounds as e^x does.
            return 1.0 + x;
        }
        if abstop >= 0x409 {
            // |x| >= 1024, infinities and NaN.
            if x == f64::NEG_INFINITY {
                return 0.0;
            }
            if abstop >= 0x7ff {
                return 1.0 + x;
            }
            return if x < 0.0 { 0.0 } else { f64::INFINITY };
        }
    }
    // x = k ln2 / 128 + r, |r| <= ln 2 / 256; k = 128 q + i.
    let kd = EXP_INV_LN2_N * x + SHIFT;
    let ki = kd.to_bits();
    let kd = kd - SHIFT;
    let r = x + kd * EXP_NEG_LN2_HI_N + kd * EXP_NEG_LN2_LO_N;
    let tab = exp_table();
    let idx = 2 * (ki & 127) as usize;
    let tail = f64::from_bits(tab[idx]);
    let sbits = tab[idx + 1].wrapping_add(ki << 45);
    // e^x = 2^q h_i (1 + t_i) e^r, with e^r (1 + t_i) - 1 as tmp.
    let r2 = r * r;
    let [c0, c1, c2, c3] = EXP_C;
    let tmp = tail + r + r2 * (c0 + r * c1) + r2 * r2 * (c2 + r * c3);
    if special {
        return exp_scaled(tmp, sbits, ki);
    }
    let scale = f64::from_bits(sbits);
    scale + scale * tmp
}

/// `2^q h_i (1 + tmp)` for `512 <= |x| < 1024`, where `2^q h_i` (`sbits`) may
/// be out of the exponent's range: computed `2^1009` lower and scaled back up
/// (`q > 0`), or `2^1022` higher and scaled down, rounded to the subnormal grid
/// once (`q < 0`).
fn exp_scaled(tmp: f64, sbits: u64, ki: u64) -> f64 {
    if ki & 0x8000_0000 == 0 {
        let scale = f64::from_bits(sbits.wrapping_sub(1009 << 52));
        return f64::from_bits(0x7f00_0000_0000_0000) * (scale + scale * tmp);
    }
    let scale = f64::from_bits(sbits.wrapping_add(1022 << 52));
    let mut y = scale + scale * tmp;
    if y < 1.0 {
        // Rounded once to the subnormal grid: 1 + y holds y's bits that survive
        // (the rest in lo), then 1 is taken away exactly.
        let lo = scale - y + scale * tmp;
        let hi = 1.0 + y;
        let lo = 1.0 - hi + y + lo;
        y = (hi + lo) - 1.0;
        if y == 0.0 {
            y = 0.0;
        }
    }
    f64::from_bits(0x0010_0000_0000_0000) * y
}

/// `2 / pi`.
pub const INV_PIO2: f64 = f64::from_bits(0x3fe4_5f30_6dc9_c883);
/// `pi/2` in three parts of 33 bits (the low ones zero, so that `n * PIO2_k` is
/// exact for `|n| < 2^20`), each followed by the tail of the remainder: `PIO2_1 +
/// PIO2_1T`, `PIO2_1 + PIO2_2 + PIO2_2T` and `PIO2_1 + PIO2_2 + PIO2_3 + PIO2_3T`
/// are `pi/2` to 85, 118 and 151 bits.
pub const PIO2_1: f64 = f64::from_bits(0x3ff9_21fb_5440_0000);
/// See [`PIO2_1`].
pub const PIO2_1T: f64 = f64::from_bits(0x3dd0_b461_1a62_6331);
/// See [`PIO2_1`].
pub const PIO2_2: f64 = f64::from_bits(0x3dd0_b461_1a60_0000);
/// See [`PIO2_1`].
pub const PIO2_2T: f64 = f64::from_bits(0x3ba3_198a_2e03_7073);
/// See [`PIO2_1`].
pub const PIO2_3: f64 = f64::from_bits(0x3ba3_198a_2e00_0000);
/// See [`PIO2_1`].
pub const PIO2_3T: f64 = f64::from_bits(0x397b_839a_2520_49c1);
/// [`sin`] and [`cos`] reduce `x` themselves when the high 32 bits of `|x|` are
/// below this (`|x| < 2^20 pi/2`, about 1.6e6), and call the platform's
/// otherwise.
pub const SINCOS_MEDIUM: u64 = 0x4139_21fb;
/// The sine kernel's coefficients (`k_sin.c`'s `S1` to `S6`).
pub const SIN: [f64; 6] = [
    f64::from_bits(0xbfc5_5555_5555_5549),
    f64::from_bits(0x3f81_1111_1110_f8a6),
    f64::from_bits(0xbf2a_01a0_19c1_61d5),
    f64::from_bits(0x3ec7_1de3_57b1_fe7d),
    f64::from_bits(0xbe5a_e5e6_8a2b_9ceb),
    f64::from_bits(0x3de5_d93a_5acf_d57c),
];
/// The cosine kernel's coefficients (`k_cos.c`'s `C1` to `C6`).
pub const COS: [f64; 6] = [
    f64::from_bits(0x3fa5_5555_5555_554c),
    f64::from_bits(0xbf56_c16c_16c1_5177),
    f64::from_bits(0x3efa_01a0_19cb_1590),
    f64::from_bits(0xbe92_7e4f_809c_52ad),
    f64::from_bits(0x3e21_ee9e_bdb4_b1c4),
    f64::from_bits(0xbda8_fae9_be88_38d4),
];

/// The biased exponent of `x`.
fn exponent(x: f64) -> i64 {
    ((x.to_bits() >> 52) & 0x7ff) as i64
}

/// One more round of reduction: `r` less `n` times the next part `part` of
/// `pi/2` (with `tail`, what is left of it), as `(r, w, y0)`.
fn reduce_again(r: f64, f: f64, part: f64, tail: f64) -> (f64, f64, f64) {
    let t = r;
    let w = f * part;
    let r = t - w;
    let w = f * tail - ((t - r) - w);
    (r, w, r - w)
}

/// `x = n pi/2 + (y0 + y1)` with `|y0 + y1| <= pi/4` (about), for `|x| < 2^20
/// pi/2`: `(n, y0, y1)`. musl's `__rem_pio2`, medium case.
pub fn rem_pio2(x: f64) -> (i64, f64, f64) {
    // n = round(x 2/pi), as a float and as an integer.
    let kd = x * INV_PIO2 + SHIFT;
    let n = (kd.to_bits() as i64).wrapping_sub(SHIFT.to_bits() as i64);
    let f = kd - SHIFT;
    let r = x - f * PIO2_1;
    let w = f * PIO2_1T;
    let first = (r, w, r - w);
    // Cancellation: a second round where y0 lost more than 16 bits against x, a
    // third where it lost more than 49. Each is computed and then picked.
    let ex = exponent(x);
    let second = reduce_again(first.0, f, PIO2_2, PIO2_2T);
    let third = reduce_again(second.0, f, PIO2_3, PIO2_3T);
    let (r, w, y0) = if ex - exponent(first.2) > 16 {
        if ex - exponent(second.2) > 49 {
            third
        } else {
            second
        }
    } else {
        first
    };
    (n, y0, (r - y0) - w)
}

/// `sin(x + y)` for `|x + y| <= pi/4`, `y` a correction to `x` (`k_sin.c`).
pub fn k_sin(x: f64, y: f64) -> f64 {
    let [s1, s2, s3, s4, s5, s6] = SIN;
    let z = x * x;
    let w = z * z;
    let r = s2 + z * (s3 + z * s4) + z * w * (s5 + z * s6);
    let v = z * x;
    x - ((z * (0.5 * y - v * r) - y) - v * s1)
}

/// `cos(x + y)` for `|x + y| <= pi/4` (`k_cos.c`).
pub fn k_cos(x: f64, y: f64) -> f64 {
    let [c1, c2, c3, c4, c5, c6] = COS;
    let z = x * x;
    let w = z * z;
    let r = z * (c1 + z * (c2 + z * c3)) + w * w * (c4 + z * (c5 + z * c6));
    let hz = 0.5 * z;
    let w = 1.0 - hz;
    w + (((1.0 - w) - hz) + (z * r - x * y))
}

/// Whether [`sin`] and [`cos`] call the platform at `x`.
pub fn sincos_outside(x: f64) -> bool {
    (x.to_bits() >> 32) & 0x7fff_ffff >= SINCOS_MEDIUM
}

/// The sine, to within 1 ulp, the same bits on every engine for `|x| < 2^20
/// pi/2` (see the [module docs](self)). The JIT emits these operations inline.
///
/// ```
/// use gradlift_ir::math::sin;
/// assert_eq!(sin(0.0), 0.0);
/// assert_eq!(sin(-0.0).to_bits(), (-0.0f64).to_bits());
/// assert!((sin(1.0) - 1f64.sin()).abs() <= f64::EPSILON);
/// assert!(sin(f64::INFINITY).is_nan());
/// ```
pub fn sin(x: f64) -> f64 {
    if sincos_outside(x) {
        return x.sin();
    }
    let (n, y0, y1) = rem_pio2(x);
    let (s, c) = (k_sin(y0, y1), k_cos(y0, y1));
    match n & 3 {
        0 => s,
        1 => c,
        2 => -s,
        _ => -c,
    }
}

/// The cosine, as [`sin`].
///
/// ```
/// use gradlift_ir::math::cos;
/// assert_eq!(cos(0.0), 1.0);
/// assert!((cos(1.0) - 1f64.cos()).abs() <= f64::EPSILON);
/// assert!(cos(f64::NAN).is_nan());
/// ```
pub fn cos(x: f64) -> f64 {
    if sincos_outside(x) {
        return x.cos();
    }
    let (n, y0, y1) = rem_pio2(x);
    let (s, c) = (k_sin(y0, y1), k_cos(y0, y1));
    match n & 3 {
        0 => c,
        1 => -s,
        2 => -c,
        _ => s,
    }
}

/// The math functions the IR defines its own way, for each float type:
/// gradlift's [`exp`], [`sin`] and [`cos`] for `f64` (what the JIT inlines), the
/// platform's for `f32`. The interpreter and the JIT's helpers both call this,
/// so the choice is made once.
pub trait IrMath {
    /// `e^self` as the IR's `exp`.
    fn ir_exp(self) -> Self;
    /// The IR's `sin`.
    fn ir_sin(self) -> Self;
    /// The IR's `cos`.
    fn ir_cos(self) -> Self;
}

impl IrMath for f64 {
    fn ir_exp(self) -> f64 {
        exp(self)
    }
    fn ir_sin(self) -> f64 {
        sin(self)
    }
    fn ir_cos(self) -> f64 {
        cos(self)
    }
}

impl IrMath for f32 {
    fn ir_exp(self) -> f32 {
        self.exp()
    }
    fn ir_sin(self) -> f32 {
        self.sin()
    }
    fn ir_cos(self) -> f32 {
        self.cos()
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
        let (lo, hi) = (-746.0, 710.0);
        let (mut same, mut all) = (0, 0);
        for i in 0..n {
            let grid = lo + (hi - lo) * i as f64 / n as f64;
            let random = (next() >> 11) as f64 / (1u64 << 53) as f64;
            let small = (next() >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0;
            for x in [grid, lo + random * 1456.0, small, small * 1e-8] {
                let (ours, std) = (exp(x), x.exp());
                if std == 0.0 || std.is_infinite() {
                    assert_eq!(ours, std, "exp({x:e})");
                    continue;
                }
                let d = ulps(ours, std);
                assert!(d <= 1, "exp({x:e}) = {ours:e}, platform {std:e}: {d} ulps");
                worst = worst.max(d);
                same += usize::from(d == 0);
                all += 1;
            }
        }
        assert!(worst <= 1);
        // About 0.51 ulp from the exact value: nearly always the correctly
        // rounded result (glibc's, in practice).
        assert!(same as f64 >= 0.99 * all as f64, "{same} of {all} equal");
    }

    /// The table's doubles are the doubles nearest `2^(i/128)` (the platform's
    /// `exp2`, correctly rounded at these points), and its tails are below
    /// half an ulp of 1.
    #[test]
    fn exp_table_is_two_to_the_i_over_128() {
        let tab = exp_table();
        for i in 0..128u64 {
            let h = f64::from_bits(tab[2 * i as usize + 1].wrapping_add(i << 45));
            assert_eq!(h, (i as f64 / 128.0).exp2(), "{i}");
            let t = f64::from_bits(tab[2 * i as usize]);
            assert!(t.abs() <= f64::EPSILON / 2.0, "{i}: {t:e}");
            // h (1 + t) squared 7 times is 2^i: checked in double-double.
            let mut v = dd_mul((h, 0.0), (1.0, t));
            for _ in 0..7 {
                v = dd_mul(v, v);
            }
            let want = (1u64 << i.min(63)) as f64
                * if i > 63 {
                    2f64.powi(i as i32 - 63)
                } else {
                    1.0
                };
            assert!(
                ((v.0 - want) + v.1).abs() <= want * 1e-28,
                "{i}: ({:e}, {:e}) against {want:e}",
                v.0,
                v.1
            );
        }
    }

    #[test]
    fn sincos_constants_are_what_they_say() {
        assert_eq!(INV_PIO2, std::f64::consts::FRAC_2_PI);
        assert_eq!(PIO2_1 + PIO2_1T, std::f64::consts::FRAC_PI_2);
        for part in [PIO2_1, PIO2_2, PIO2_3] {
            assert_eq!(part.to_bits() & ((1 << 20) - 1), 0, "{part:e}");
        }
        // 2^20 pi/2, the first argument called out.
        let edge = (1u64 << 20) as f64 * std::f64::consts::FRAC_PI_2;
        assert!(sincos_outside(edge) && !sincos_outside(edge * 0.999_999));
    }

    /// `sin` and `cos` against the platform's: within 1 ulp (or, where the
    /// result is tiny, within `2^-108` absolutely: the platform rounds
    /// near a zero of the function with more bits than any double reduction
    /// keeps), and at the edges.
    #[test]
    fn sin_and_cos_are_within_one_ulp_of_the_platform() {
        let mut state = 0x9e37_79b9_7f4a_7c15_u64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let mut worst = 0;
        let unit = |u: u64| (u >> 11) as f64 / (1u64 << 53) as f64;
        for i in 0..300_000 {
            let small = (unit(next()) * 2.0 - 1.0) * 8.0;
            let medium = (unit(next()) * 2.0 - 1.0) * 1.6e6;
            let grid = -20.0 + 40.0 * i as f64 / 300_000.0;
            // Near multiples of pi/2, where the reduction cancels.
            let k = (next() % 2_000_000) as f64 - 1e6;
            let near = k * std::f64::consts::FRAC_PI_2 * (1.0 + (unit(next()) - 0.5) * 1e-15);
            let tiny = small * 1e-9;
            for x in [small, medium, grid, near, tiny] {
                for (ours, std) in [(sin(x), x.sin()), (cos(x), x.cos())] {
                    if (ours - std).abs() <= f64::EPSILON * f64::EPSILON / 16.0 {
                        continue;
                    }
                    let d = ulps(ours, std);
                    assert!(d <= 1, "x = {x:e}: {ours:e}, platform {std:e}: {d} ulps");
                    worst = worst.max(d);
                }
            }
        }
        assert!(worst <= 1);
        for x in [0.0, -0.0, 1e-300, -1e-300, f64::MIN_POSITIVE, 5e-324] {
            assert_eq!(sin(x).to_bits(), x.to_bits(), "sin({x:e})");
            assert_eq!(cos(x), 1.0, "cos({x:e})");
        }
        for x in [f64::INFINITY, f64::NEG_INFINITY, f64::NAN] {
            assert!(sin(x).is_nan() && cos(x).is_nan(), "{x}");
        }
        for x in [1.7e6, -3e8, 1e300, f64::MAX] {
            assert_eq!(sin(x), x.sin());
            assert_eq!(cos(x), x.cos());
        }
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
        assert_eq!(exp(710.0), f64::INFINITY);
        assert_eq!(exp(-746.0), 0.0);
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
