//! `exp`, `sin` and `cos` of an `f64` are inlined (`Lower::exp_f64`,
//! `Lower::sincos_f64`): the operations of `gradlift_ir::math::exp`, `sin` and
//! `cos` in their order, no call but on a cold path (`exp` outside `2^-54 <=
//! |x| < 512`, `sin` and `cos` beyond `2^20 pi/2`). Tested here: the compiled
//! code has one call, and gives the bits of `math` (which the
//! interpreter uses) at sweeps of arguments and at every edge: zeros, tiny and
//! huge arguments, subnormal results, overflow, infinities and NaN, and for
//! `sin` and `cos` the multiples of `pi/2` where the reduction cancels and the
//! edge of the inline range.

mod support;

use gradlift_ir::interp::Val;
use gradlift_ir::math;
use gradlift_jit::{Workspace, compile};
use support::{Compared, compare, module};

const EXP: &str = r#"
func @e(%x: f64) -> f64 {
entry:
    %y = exp %x
    ret %y
}
"#;

#[test]
fn exp_is_inline_and_gives_the_bits_of_math_exp() {
    let m = module(EXP);
    let clif = support::clif(&m, "e");
    assert_eq!(clif.matches("call ").count(), 1, "{clif}");
    let c = compile(&m).unwrap();
    let mut ws = Workspace::new();
    let mut xs: Vec<f64> = vec![
        0.0,
        -0.0,
        1.0,
        -1.0,
        1e-300,
        -1e-300,
        f64::MIN_POSITIVE,
        5e-324,
        709.78,
        709.79,
        710.0,
        1000.0,
        -708.4,
        -708.5,
        -720.0,
        -745.1,
        -745.2,
        -746.0,
        -1000.0,
        511.9,
        512.0,
        -511.9,
        -512.0,
        1023.9,
        1024.0,
        -1023.9,
        5.56e-17,
        -5.56e-17,
        f64::MAX,
        f64::MIN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
    ];
    let mut state = 0x853c_49e6_748f_ea9b_u64;
    for _ in 0..20_000 {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        xs.push(-750.0 + (state >> 11) as f64 / (1u64 << 53) as f64 * 1465.0);
        // Any bit pattern, NaNs and subnormal arguments included.
        xs.push(f64::from_bits(state));
    }
    for x in xs {
        check_one(&m, &c, &mut ws, "e", math::exp, x);
    }
}

/// `@name` of `m`, compiled in `c`, at `x`: the bits of `want(x)` (any NaN for a
/// NaN), and the interpreter's, bit for bit.
#[track_caller]
fn check_one(
    m: &gradlift_ir::Module,
    c: &gradlift_jit::Compiled,
    ws: &mut Workspace,
    name: &str,
    want: fn(f64) -> f64,
    x: f64,
) {
    let id = m.func_by_name(name).unwrap();
    let out = c.call(ws, id, &mut [Val::F64(x)]).unwrap();
    let [Val::F64(y)] = out[..] else {
        panic!("one f64 result: {out:?}")
    };
    let want = want(x);
    assert!(
        y.to_bits() == want.to_bits() || (y.is_nan() && want.is_nan()),
        "{name}({x:e}): JIT {y:e}, math {want:e}"
    );
    assert_eq!(compare(m, c, ws, id, &[Val::F64(x)]), Compared::Values);
}

const SINCOS: &str = r#"
func @s(%x: f64) -> f64 {
entry:
    %y = sin %x
    ret %y
}

func @c(%x: f64) -> f64 {
entry:
    %y = cos %x
    ret %y
}

func @sc(%x: f64) -> f64 {
entry:
    %s = sin %x
    %c = cos %x
    %p = fmul %s, %c
    ret %p
}
"#;

#[test]
fn sin_and_cos_are_inline_and_give_the_bits_of_math() {
    let m = module(SINCOS);
    for name in ["s", "c"] {
        let clif = support::clif(&m, name);
        assert_eq!(clif.matches("call ").count(), 1, "{name}:\n{clif}");
    }
    let c = compile(&m).unwrap();
    let mut ws = Workspace::new();
    let pio2 = std::f64::consts::FRAC_PI_2;
    let edge = (1u64 << 20) as f64 * pio2;
    let mut xs: Vec<f64> = vec![
        0.0,
        -0.0,
        1.0,
        -1.0,
        1e-300,
        -1e-300,
        f64::MIN_POSITIVE,
        5e-324,
        pio2,
        -pio2,
        2.0 * pio2,
        3.0 * pio2,
        4.0 * pio2,
        1e5 * pio2,
        edge,
        edge * (1.0 - f64::EPSILON),
        -edge,
        1e300,
        f64::MAX,
        f64::MIN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
    ];
    let mut state = 0x853c_49e6_748f_ea9b_u64;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for _ in 0..10_000 {
        let u = (next() >> 11) as f64 / (1u64 << 53) as f64;
        xs.push((u - 0.5) * 20.0);
        xs.push((u - 0.5) * 2.0 * edge);
        // Near a multiple of pi/2, where one, two or three rounds of reduction
        // are taken.
        let k = (next() % 2_000_000) as f64 - 1e6;
        xs.push(k * pio2);
        xs.push(f64::from_bits(
            (k * pio2).to_bits().wrapping_add(next() % 5),
        ));
        // Any bit pattern, NaNs and subnormal arguments included.
        xs.push(f64::from_bits(next()));
    }
    type Want = fn(f64) -> f64;
    let funcs: [(&str, Want); 3] = [
        ("s", math::sin),
        ("c", math::cos),
        ("sc", |x| math::sin(x) * math::cos(x)),
    ];
    for x in xs {
        for (name, want) in funcs {
            check_one(&m, &c, &mut ws, name, want, x);
        }
    }
}

/// `sin`, `cos` and `exp` of one value in the places where the JIT shares their
/// work or must not: a counted loop over a slice (versioned: a copy without
/// checks and the checked original, each with its own reductions), a `sin` of a
/// loop header's phi and a `cos` of it in the body (which the header
/// dominates), and a `cos` after a join whose one arm computed the `sin` (which
/// does not dominate it: sharing there would be invalid code, and Cranelift
/// rejects it).
const SHARED: &str = r#"
func @sum_sincos(%x: [f64], %n: i64) -> f64 {
entry:
    jump head
head:
    %i = phi i64 [entry: 0, body: %i1]
    %acc = phi f64 [entry: 0.0, body: %acc2]
    %more = icmp lt %i, %n
    br %more, body, exit
body:
    %xi = load %x[%i]
    %s = sin %xi
    %c = cos %xi
    %e = exp %xi
    %p = fmul %s, %c
    %acc1 = fadd %acc, %p
    %acc2 = fadd %acc1, %e
    %i1 = iadd %i, 1
    jump head
exit:
    ret %acc
}

func @orbit(%t0: f64, %steps: i64) -> f64 {
entry:
    jump head
head:
    %k = phi i64 [entry: 0, body: %k1]
    %t = phi f64 [entry: %t0, body: %t1]
    %s = sin %t
    %go = icmp lt %k, %steps
    br %go, body, exit
body:
    %c = cos %t
    %d = fmul %s, %c
    %t1 = fadd %t, %d
    %k1 = iadd %k, 1
    jump head
exit:
    %r = fadd %t, %s
    ret %r
}

func @split(%x: f64) -> f64 {
entry:
    %pos = fcmp gt %x, 0.0
    br %pos, left, right
left:
    %s = sin %x
    jump join
right:
    %c0 = cos %x
    jump join
join:
    %v = phi f64 [left: %s, right: %c0]
    %c = cos %x
    %r = fadd %v, %c
    ret %r
}
"#;

#[test]
fn shared_and_relowered_math_matches_the_interpreter() {
    let m = module(SHARED);
    let c = compile(&m).unwrap();
    let mut ws = Workspace::new();
    let xs: Vec<f64> = (0..40)
        .map(|i| (i as f64 - 20.0) * 0.37 + 1e-3 * i as f64)
        .chain([1e6, -3e6, 1e300, f64::NAN, 800.0, -800.0, 1e-20])
        .collect();
    let id = m.func_by_name("sum_sincos").unwrap();
    for n in [0, 1, 7, xs.len() as i64, xs.len() as i64 + 1, -1] {
        let got = compare(&m, &c, &mut ws, id, &[Val::F64s(xs.clone()), Val::I64(n)]);
        // Past the end the load fails, in both engines, at the same element.
        let want = if n > xs.len() as i64 {
            Compared::Errors
        } else {
            Compared::Values
        };
        assert_eq!(got, want, "n = {n}");
    }
    let id = m.func_by_name("orbit").unwrap();
    for &t0 in &xs {
        for steps in [0, 1, 2, 25] {
            let out = compare(&m, &c, &mut ws, id, &[Val::F64(t0), Val::I64(steps)]);
            assert_eq!(out, Compared::Values, "t0 = {t0:e}, {steps} steps");
        }
    }
    let id = m.func_by_name("split").unwrap();
    for &x in &xs {
        assert_eq!(
            compare(&m, &c, &mut ws, id, &[Val::F64(x)]),
            Compared::Values,
            "x = {x:e}"
        );
    }
}
