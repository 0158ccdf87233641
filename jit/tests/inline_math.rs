//! `exp` of an `f64` is inlined (`Lower::exp_f64`): the operations of
//! `gradlift_ir::math::exp` in its order, no call. Tested here: the compiled code
//! has no call, and gives the bits of `math::exp` (which the interpreter uses) at
//! a sweep of arguments and at every edge: zeros, tiny and huge arguments,
//! subnormal results, overflow, infinities and NaN.

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
    assert!(!clif.contains("call "), "exp is called:\n{clif}");
    let c = compile(&m).unwrap();
    let mut ws = Workspace::new();
    let id = m.func_by_name("e").unwrap();
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
        let mut args = [Val::F64(x)];
        let out = c.call(&mut ws, id, &mut args).unwrap();
        let [Val::F64(y)] = out[..] else {
            panic!("one f64 result: {out:?}")
        };
        let want = math::exp(x);
        assert!(
            y.to_bits() == want.to_bits() || (y.is_nan() && want.is_nan()),
            "exp({x:e}): JIT {y:e}, math::exp {want:e}"
        );
        assert_eq!(
            compare(&m, &c, &mut ws, id, &[Val::F64(x)]),
            Compared::Values
        );
    }
}
