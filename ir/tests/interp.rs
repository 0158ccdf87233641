//! Tests of the reference interpreter on functions built with `FunctionBuilder`.
//!
//! Every expected value is computed here by a plain Rust expression or loop (a closed
//! form), never captured from a run of the interpreter.

use gradlift_ir::interp::{ErrorKind, Interpreter, Limits, RunError, TapeStats, Val};
use gradlift_ir::ops::resolve;
use gradlift_ir::{
    CmpPred, Elem, FuncId, FunctionBuilder, Imm, Module, Opcode, Pos, Scalar, Signature, Type,
    Value, parse, verify,
};

const F64: Type = Type::F64;
const F32: Type = Type::F32;
const I64: Type = Type::I64;
const BOOL: Type = Type::Bool;
const SF64: Type = Type::slice(Elem::F64);
const MF64: Type = Type::slice_mut(Elem::F64);

fn sig(params: impl Into<Vec<Type>>, results: impl Into<Vec<Type>>) -> Signature {
    Signature::new(params, results)
}

/// Builds the body of the declared function `id` with `body` and defines it.
#[track_caller]
fn define(m: &mut Module, id: FuncId, body: impl FnOnce(&mut FunctionBuilder<'_>)) {
    let mut b = FunctionBuilder::new(m, id);
    body(&mut b);
    let func = b.finish().unwrap();
    m.define(id, func).unwrap();
}

/// A module of one function `name`.
#[track_caller]
fn single(
    name: &str,
    s: Signature,
    body: impl FnOnce(&mut FunctionBuilder<'_>),
) -> (Module, FuncId) {
    let mut m = Module::new();
    let id = m.declare(name, s).unwrap();
    define(&mut m, id, body);
    (m, id)
}

/// Equality that tells NaN and the signs of zero apart.
fn same(a: &Val, b: &Val) -> bool {
    match (a, b) {
        (Val::F64(x), Val::F64(y)) => x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan()),
        (Val::F32(x), Val::F32(y)) => x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan()),
        _ => a == b,
    }
}

fn scalar_of(v: &Val) -> Scalar {
    v.scalar().expect("a scalar argument")
}

/// Runs one op on `args`: once with the arguments as parameters, once with them as
/// constant operands; both must agree. Returns the single result.
fn run_op(op: Opcode, imm: Imm, args: &[Val]) -> Result<Val, RunError> {
    let tys: Vec<Type> = args.iter().map(Val::ty).collect();
    let known: Vec<Option<Type>> = tys.iter().map(|&t| Some(t)).collect();
    let results = resolve(op, &imm, &known, None).unwrap().results.to_vec();

    let (m, id) = single("t", sig(tys.clone(), results.clone()), |b| {
        let ps: Vec<Value> = (0..tys.len()).map(|i| b.param(i)).collect();
        let inst = b.ins(op, imm, &ps);
        let r = b.results(inst).to_vec();
        b.ret(&r);
    });
    let by_param = Interpreter::new(&m).call(id, &mut args.to_vec());

    let (mc, idc) = single("t", sig([], results), |b| {
        let cs: Vec<Value> = args.iter().map(|a| b.constant(scalar_of(a))).collect();
        let inst = b.ins(op, imm, &cs);
        let r = b.results(inst).to_vec();
        b.ret(&r);
    });
    let by_const = Interpreter::new(&mc).call(idc, &mut []);
    match (&by_param, &by_const) {
        (Ok(a), Ok(b)) => assert!(same(&a[0], &b[0]), "{op}: {a:?} vs {b:?}"),
        (Err(a), Err(b)) => assert_eq!(a.kind, b.kind),
        _ => panic!("{op}: parameters gave {by_param:?}, constants {by_const:?}"),
    }
    by_param.map(|mut v| v.remove(0))
}

#[track_caller]
fn check(op: Opcode, imm: Imm, args: &[Val], expected: Val) {
    let got = run_op(op, imm, args).unwrap_or_else(|e| panic!("{op} {args:?}: {e}"));
    assert!(
        same(&got, &expected),
        "{op} {args:?}: got {got:?}, expected {expected:?}"
    );
}

#[track_caller]
fn check_err(op: Opcode, imm: Imm, args: &[Val], kind: ErrorKind) {
    let e = run_op(op, imm, args).unwrap_err();
    assert_eq!(e.kind, kind);
    assert_eq!(e.func, "t");
    assert_eq!(e.op, op.name());
}

use Val::{Bool as B, F32 as S, F64 as D, I64 as I};

#[test]
fn every_scalar_op_computes_what_rust_computes() {
    let n = Imm::None;
    let cmp = Imm::Cmp;
    let ty = Imm::Type;
    let nan = f64::NAN;

    // Float binary, in f64 and in f32.
    check(Opcode::Fadd, n, &[D(0.1), D(0.2)], D(0.1 + 0.2));
    check(Opcode::Fadd, n, &[S(0.1), S(0.2)], S(0.1f32 + 0.2f32));
    // f32 addition rounds in f32: 2^24 + 1 is not an f32.
    check(Opcode::Fadd, n, &[S(16_777_216.0), S(1.0)], S(16_777_216.0));
    check(Opcode::Fsub, n, &[D(1.0), D(1e-17)], D(1.0 - 1e-17));
    check(Opcode::Fsub, n, &[S(1.0), S(1e-8)], S(1.0f32 - 1e-8f32));
    check(Opcode::Fmul, n, &[D(1.1), D(1.1)], D(1.1 * 1.1));
    check(Opcode::Fmul, n, &[S(1.1), S(1.1)], S(1.1f32 * 1.1f32));
    check(Opcode::Fdiv, n, &[D(1.0), D(3.0)], D(1.0 / 3.0));
    check(Opcode::Fdiv, n, &[S(1.0), S(3.0)], S(1.0f32 / 3.0f32));
    check(Opcode::Fdiv, n, &[D(1.0), D(0.0)], D(f64::INFINITY));
    check(Opcode::Fdiv, n, &[D(-1.0), D(0.0)], D(f64::NEG_INFINITY));
    check(Opcode::Fdiv, n, &[D(0.0), D(0.0)], D(nan));
    check(Opcode::Fmin, n, &[D(2.0), D(-3.0)], D(-3.0));
    check(Opcode::Fmin, n, &[D(nan), D(1.0)], D(nan));
    check(Opcode::Fmin, n, &[D(1.0), D(nan)], D(nan));
    check(Opcode::Fmin, n, &[D(-0.0), D(0.0)], D(-0.0));
    check(Opcode::Fmin, n, &[D(0.0), D(-0.0)], D(-0.0));
    check(Opcode::Fmin, n, &[S(0.0), S(-0.0)], S(-0.0));
    check(Opcode::Fmax, n, &[D(2.0), D(-3.0)], D(2.0));
    check(Opcode::Fmax, n, &[D(nan), D(1.0)], D(nan));
    check(Opcode::Fmax, n, &[D(1.0), D(nan)], D(nan));
    check(Opcode::Fmax, n, &[D(-0.0), D(0.0)], D(0.0));
    check(Opcode::Fmax, n, &[D(0.0), D(-0.0)], D(0.0));
    check(Opcode::Fmax, n, &[S(-1.5), S(f32::NAN)], S(f32::NAN));
    check(Opcode::Pow, n, &[D(2.0), D(0.5)], D(2f64.powf(0.5)));
    check(Opcode::Pow, n, &[D(-8.0), D(1.0 / 3.0)], D(nan));
    check(Opcode::Pow, n, &[S(2.0), S(0.5)], S(2f32.powf(0.5)));
    // atan2 y, x in the four quadrants, on the axes, and at signed zeros.
    let pi = core::f64::consts::PI;
    check(Opcode::Atan2, n, &[D(1.0), D(1.0)], D(pi / 4.0));
    check(Opcode::Atan2, n, &[D(1.0), D(-1.0)], D(3.0 * pi / 4.0));
    check(Opcode::Atan2, n, &[D(-1.0), D(-1.0)], D(-3.0 * pi / 4.0));
    check(Opcode::Atan2, n, &[D(-1.0), D(1.0)], D(-pi / 4.0));
    check(Opcode::Atan2, n, &[D(0.0), D(-1.0)], D(pi));
    check(Opcode::Atan2, n, &[D(-0.0), D(-1.0)], D(-pi));
    check(Opcode::Atan2, n, &[D(-0.0), D(1.0)], D(-0.0));
    check(Opcode::Atan2, n, &[D(2.0), D(0.0)], D(pi / 2.0));
    check(
        Opcode::Atan2,
        n,
        &[S(-1.0), S(-1.0)],
        S(-3.0 * core::f32::consts::PI / 4.0),
    );
    check(Opcode::Atan2, n, &[D(0.3), D(-2.0)], D(0.3f64.atan2(-2.0)));
    // hypot: exact for Pythagorean triples, no overflow at 1e300, inf beats nan.
    check(Opcode::Hypot, n, &[D(3.0), D(4.0)], D(5.0));
    let (big, tiny) = (2f64.powi(1000), 2f64.powi(-1060));
    check(
        Opcode::Hypot,
        n,
        &[D(-3.0 * big), D(4.0 * big)],
        D(5.0 * big),
    );
    check(
        Opcode::Hypot,
        n,
        &[D(3.0 * tiny), D(-4.0 * tiny)],
        D(5.0 * tiny),
    );
    check(
        Opcode::Hypot,
        n,
        &[D(f64::INFINITY), D(nan)],
        D(f64::INFINITY),
    );
    let big32 = 2f32.powi(100);
    check(
        Opcode::Hypot,
        n,
        &[S(3.0 * big32), S(4.0 * big32)],
        S(5.0 * big32),
    );
    check(Opcode::Hypot, n, &[D(0.3), D(1.7)], D(0.3f64.hypot(1.7)));

    // fma: one rounding. (1 + 2^-30)^2 - 1 keeps the 2^-60 term that fmul then
    // fadd round away.
    let a = 1.0 + 2f64.powi(-30);
    check(
        Opcode::Fma,
        n,
        &[D(a), D(a), D(-1.0)],
        D(2f64.powi(-29) + 2f64.powi(-60)),
    );
    assert_ne!(a * a - 1.0, 2f64.powi(-29) + 2f64.powi(-60));
    let s = 1.0 + 2f32.powi(-13);
    check(
        Opcode::Fma,
        n,
        &[S(s), S(s), S(-1.0)],
        S(2f32.powi(-12) + 2f32.powi(-26)),
    );
    check(Opcode::Fma, n, &[D(2.0), D(3.0), D(4.0)], D(10.0));
    check(Opcode::Fma, n, &[D(f64::INFINITY), D(0.0), D(1.0)], D(nan));

    // Float unary.
    check(Opcode::Fneg, n, &[D(0.0)], D(-0.0));
    check(Opcode::Fneg, n, &[S(1.5)], S(-1.5));
    check(Opcode::Fabs, n, &[D(-3.5)], D(3.5));
    check(Opcode::Fabs, n, &[S(-0.0)], S(0.0));
    check(Opcode::Sqrt, n, &[D(2.0)], D(2f64.sqrt()));
    check(Opcode::Sqrt, n, &[D(-1.0)], D(nan));
    check(Opcode::Sqrt, n, &[S(2.0)], S(2f32.sqrt()));
    // `exp` of an `f64` is gradlift's own (`math::exp`), within 1 ulp of `std`'s.
    check(Opcode::Exp, n, &[D(1.0)], D(gradlift_ir::math::exp(1.0)));
    assert!((gradlift_ir::math::exp(1.0) - 1f64.exp()).abs() <= f64::EPSILON * 3.0);
    check(Opcode::Exp, n, &[S(1.0)], S(1f32.exp()));
    check(Opcode::Log, n, &[D(10.0)], D(10f64.ln()));
    check(Opcode::Log, n, &[D(0.0)], D(f64::NEG_INFINITY));
    check(Opcode::Log, n, &[D(-1.0)], D(nan));
    check(Opcode::Log, n, &[S(10.0)], S(10f32.ln()));
    // `sin` and `cos` of an `f64` are gradlift's own too (`math::sin`,
    // `math::cos`).
    check(Opcode::Sin, n, &[D(0.5)], D(gradlift_ir::math::sin(0.5)));
    check(Opcode::Cos, n, &[D(2.5)], D(gradlift_ir::math::cos(2.5)));
    assert!((gradlift_ir::math::sin(0.5) - 0.5f64.sin()).abs() <= f64::EPSILON);
    check(Opcode::Sin, n, &[S(0.5)], S(0.5f32.sin()));
    check(Opcode::Cos, n, &[D(0.5)], D(gradlift_ir::math::cos(0.5)));
    check(Opcode::Cos, n, &[S(0.5)], S(0.5f32.cos()));
    check(Opcode::Tan, n, &[D(0.5)], D(0.5f64.tan()));
    check(Opcode::Tan, n, &[S(0.5)], S(0.5f32.tan()));
    check(Opcode::Tanh, n, &[D(0.5)], D(0.5f64.tanh()));
    check(Opcode::Tanh, n, &[S(-20.0)], S(-1.0));
    check(Opcode::Sinh, n, &[D(0.5)], D(0.5f64.sinh()));
    check(Opcode::Sinh, n, &[S(-0.0)], S(-0.0));
    check(Opcode::Sinh, n, &[D(1000.0)], D(f64::INFINITY));
    check(Opcode::Cosh, n, &[D(0.0)], D(1.0));
    check(Opcode::Cosh, n, &[D(-0.5)], D(0.5f64.cosh()));
    // At run time (`black_box`): in a release build rustc folds `2f32.cosh()` at
    // compile time to a value 1 ulp from the platform's `coshf`, which the
    // interpreter calls.
    check(
        Opcode::Cosh,
        n,
        &[S(2.0)],
        S(std::hint::black_box(2f32).cosh()),
    );
    check(Opcode::Asin, n, &[D(1.0)], D(core::f64::consts::FRAC_PI_2));
    check(Opcode::Asin, n, &[D(1.5)], D(nan));
    check(Opcode::Asin, n, &[S(0.5)], S(0.5f32.asin()));
    check(Opcode::Acos, n, &[D(-1.0)], D(core::f64::consts::PI));
    check(Opcode::Acos, n, &[D(0.3)], D(0.3f64.acos()));
    check(Opcode::Acos, n, &[S(2.0)], S(f32::NAN));
    check(Opcode::Atan, n, &[D(1.0)], D(core::f64::consts::FRAC_PI_4));
    check(
        Opcode::Atan,
        n,
        &[D(f64::NEG_INFINITY)],
        D(-core::f64::consts::FRAC_PI_2),
    );
    check(Opcode::Atan, n, &[S(0.5)], S(0.5f32.atan()));
    check(Opcode::Log10, n, &[D(1000.0)], D(3.0));
    check(Opcode::Log10, n, &[D(0.0)], D(f64::NEG_INFINITY));
    check(Opcode::Log10, n, &[D(-1.0)], D(nan));
    check(Opcode::Log10, n, &[S(0.01)], S(0.01f32.log10()));
    check(Opcode::Log2, n, &[D(0.125)], D(-3.0));
    check(Opcode::Log2, n, &[D(10.0)], D(10f64.log2()));
    check(Opcode::Log2, n, &[S(1024.0)], S(10.0));
    check(Opcode::Exp2, n, &[D(-3.0)], D(0.125));
    check(Opcode::Exp2, n, &[D(0.5)], D(core::f64::consts::SQRT_2));
    check(Opcode::Exp2, n, &[D(1024.0)], D(f64::INFINITY));
    check(Opcode::Exp2, n, &[S(10.0)], S(1024.0));
    check(Opcode::Floor, n, &[D(-1.5)], D(-2.0));
    check(Opcode::Floor, n, &[S(2.5)], S(2.0));
    check(Opcode::Ceil, n, &[D(-1.5)], D(-1.0));
    check(Opcode::Ceil, n, &[S(2.5)], S(3.0));

    // powi: `powi` when the exponent fits an i32, `powf` beyond.
    check(Opcode::Powi, n, &[D(2.0), I(10)], D(1024.0));
    check(Opcode::Powi, n, &[D(1.5), I(-3)], D(1.5f64.powi(-3)));
    check(Opcode::Powi, n, &[D(2.0), I(0)], D(1.0));
    check(Opcode::Powi, n, &[D(2.0), I(1 << 40)], D(f64::INFINITY));
    check(Opcode::Powi, n, &[D(-1.0), I((1 << 40) + 1)], D(-1.0));
    check(Opcode::Powi, n, &[D(0.5), I(i64::MIN)], D(f64::INFINITY));
    check(Opcode::Powi, n, &[S(1.1), I(7)], S(1.1f32.powi(7)));

    // Integers wrap; idiv truncates toward zero, irem has the sign of the dividend.
    check(Opcode::Iadd, n, &[I(i64::MAX), I(1)], I(i64::MIN));
    check(Opcode::Iadd, n, &[I(40), I(2)], I(42));
    check(Opcode::Isub, n, &[I(i64::MIN), I(1)], I(i64::MAX));
    check(
        Opcode::Imul,
        n,
        &[I(i64::MAX), I(3)],
        I(i64::MAX.wrapping_mul(3)),
    );
    check(Opcode::Imul, n, &[I(-6), I(7)], I(-42));
    check(Opcode::Idiv, n, &[I(-7), I(2)], I(-3));
    check(Opcode::Idiv, n, &[I(7), I(-2)], I(-3));
    check(Opcode::Idiv, n, &[I(i64::MIN), I(-1)], I(i64::MIN));
    check(Opcode::Irem, n, &[I(-7), I(2)], I(-1));
    check(Opcode::Irem, n, &[I(7), I(-2)], I(1));
    check(Opcode::Irem, n, &[I(i64::MIN), I(-1)], I(0));
    check(Opcode::Ishl, n, &[I(1), I(65)], I(2));
    check(Opcode::Ishl, n, &[I(1), I(63)], I(i64::MIN));
    check(Opcode::Ishl, n, &[I(1), I(-1)], I(i64::MIN));
    check(Opcode::Ishl, n, &[I(3), I(64)], I(3));
    check(Opcode::Ishr, n, &[I(-8), I(1)], I(-4));
    check(Opcode::Ishr, n, &[I(i64::MIN), I(63)], I(-1));
    check(Opcode::Ishr, n, &[I(256), I(68)], I(16));
    check(Opcode::Iand, n, &[I(0b1100), I(0b1010)], I(0b1000));
    check(Opcode::Ior, n, &[I(0b1100), I(0b1010)], I(0b1110));
    check(Opcode::Ixor, n, &[I(0b1100), I(0b1010)], I(0b0110));
    check(Opcode::Ineg, n, &[I(5)], I(-5));
    check(Opcode::Ineg, n, &[I(i64::MIN)], I(i64::MIN));

    // Comparisons: IEEE for floats, signed for integers.
    for p in CmpPred::ALL {
        check(
            Opcode::Fcmp,
            cmp(p),
            &[D(1.0), D(2.0)],
            B(p.apply(1.0, 2.0)),
        );
        check(
            Opcode::Fcmp,
            cmp(p),
            &[D(2.0), D(2.0)],
            B(p.apply(2.0, 2.0)),
        );
        check(Opcode::Fcmp, cmp(p), &[D(nan), D(nan)], B(p == CmpPred::Ne));
        check(
            Opcode::Fcmp,
            cmp(p),
            &[S(-0.0), S(0.0)],
            B(p.apply(-0.0f32, 0.0)),
        );
        check(Opcode::Icmp, cmp(p), &[I(-1), I(1)], B(p.apply(-1, 1)));
        check(
            Opcode::Icmp,
            cmp(p),
            &[I(i64::MIN), I(i64::MIN)],
            B(p.apply(0, 0)),
        );
    }
    check(Opcode::Icmp, cmp(CmpPred::Lt), &[I(-1), I(1)], B(true));
    check(Opcode::Fcmp, cmp(CmpPred::Lt), &[D(nan), D(1.0)], B(false));

    // Booleans.
    for x in [false, true] {
        check(Opcode::Not, n, &[B(x)], B(!x));
        for y in [false, true] {
            check(Opcode::And, n, &[B(x), B(y)], B(x && y));
            check(Opcode::Or, n, &[B(x), B(y)], B(x || y));
            check(Opcode::Xor, n, &[B(x), B(y)], B(x != y));
        }
    }

    check(Opcode::Select, n, &[B(true), D(1.0), D(2.0)], D(1.0));
    check(Opcode::Select, n, &[B(false), I(1), I(2)], I(2));
    check(Opcode::Select, n, &[B(false), B(true), B(false)], B(false));
    check(Opcode::Select, n, &[B(true), S(1.5), S(2.5)], S(1.5));

    // Casts: round to nearest into floats, truncate and saturate into i64.
    check(Opcode::Cast, ty(F64), &[I(i64::MAX)], D(i64::MAX as f64));
    check(Opcode::Cast, ty(F64), &[I(-3)], D(-3.0));
    check(
        Opcode::Cast,
        ty(F64),
        &[I((1 << 53) + 1)],
        D(9_007_199_254_740_992.0),
    );
    check(Opcode::Cast, ty(F64), &[S(0.1)], D(f64::from(0.1f32)));
    check(Opcode::Cast, ty(F64), &[B(true)], D(1.0));
    check(Opcode::Cast, ty(F64), &[B(false)], D(0.0));
    check(Opcode::Cast, ty(F64), &[D(-0.0)], D(-0.0));
    check(Opcode::Cast, ty(F32), &[D(0.1)], S(0.1f32));
    check(Opcode::Cast, ty(F32), &[D(1e300)], S(f32::INFINITY));
    check(Opcode::Cast, ty(F32), &[I(16_777_217)], S(16_777_216.0));
    check(Opcode::Cast, ty(F32), &[B(true)], S(1.0));
    check(Opcode::Cast, ty(F32), &[S(2.5)], S(2.5));
    check(Opcode::Cast, ty(I64), &[D(1e300)], I(i64::MAX));
    check(Opcode::Cast, ty(I64), &[D(-1e300)], I(i64::MIN));
    check(Opcode::Cast, ty(I64), &[D(f64::INFINITY)], I(i64::MAX));
    check(Opcode::Cast, ty(I64), &[D(nan)], I(0));
    check(Opcode::Cast, ty(I64), &[D(-2.7)], I(-2));
    check(Opcode::Cast, ty(I64), &[D(2.7)], I(2));
    check(Opcode::Cast, ty(I64), &[S(-2.7)], I(-2));
    check(Opcode::Cast, ty(I64), &[S(f32::NAN)], I(0));
    check(Opcode::Cast, ty(I64), &[B(true)], I(1));
    check(Opcode::Cast, ty(I64), &[I(-9)], I(-9));

    // Bitcast keeps the bits.
    check(
        Opcode::Bitcast,
        ty(I64),
        &[D(1.0)],
        I(0x3FF0_0000_0000_0000),
    );
    check(Opcode::Bitcast, ty(I64), &[D(-0.0)], I(i64::MIN));
    let magic = 0x5FE6_EB50_C7B5_37A9_i64;
    check(
        Opcode::Bitcast,
        ty(F64),
        &[I(magic)],
        D(f64::from_bits(magic as u64)),
    );

    // Const, as an instruction (no operands).
    check(Opcode::Const, Imm::Const(Scalar::F32(1.5)), &[], S(1.5));
    check(Opcode::Const, Imm::Const(Scalar::I64(-7)), &[], I(-7));
    check(Opcode::Const, Imm::Const(Scalar::F64(-0.0)), &[], D(-0.0));
    check(Opcode::Const, Imm::Const(Scalar::Bool(true)), &[], B(true));

    // Division by zero names the function and the op.
    check_err(Opcode::Idiv, n, &[I(1), I(0)], ErrorKind::DivisionByZero);
    check_err(Opcode::Irem, n, &[I(1), I(0)], ErrorKind::DivisionByZero);
    check_err(
        Opcode::Idiv,
        n,
        &[I(i64::MIN), I(0)],
        ErrorKind::DivisionByZero,
    );
}

/// `checkpoint_loop` computes nothing; `recompute` counts steps run again (not
/// negative ones) until the tape is reset.
#[test]
fn checkpoint_loop_does_nothing_and_recompute_counts() {
    let m = parse(
        "func @f(%x: f64, %n: i64) -> f64 {
        entry:
            jump head
        head:
            %i = phi i64 [entry: 0, body: %i1]
            %v = phi f64 [entry: %x, body: %v1]
            checkpoint_loop 2
            %more = icmp lt %i, %n
            br %more, body, exit
        body:
            %v1 = fmul %v, 2.0
            recompute %i
            recompute -5
            %i1 = iadd %i, 1
            jump head
        exit:
            ret %v
        }",
    )
    .unwrap();
    let mut interp = Interpreter::new(&m);
    let out = interp
        .call_by_name("f", &mut [Val::F64(1.5), Val::I64(4)])
        .unwrap();
    assert_eq!(out, [Val::F64(24.0)]);
    // 0 + 1 + 2 + 3.
    assert_eq!(interp.tape().recomputed_steps, 6);
    interp.reset_tape();
    assert_eq!(interp.tape().recomputed_steps, 0);
    let ops = [Opcode::CheckpointLoop, Opcode::Recompute, Opcode::Call];
    assert!(ops.iter().all(|op| op.name() != "checkpoint"));
}

/// The slice ops and `call` are tested by the programs below; this keeps the list of
/// ops above complete as the op table grows.
#[test]
fn the_op_tests_cover_the_op_table() {
    let src = include_str!("interp.rs");
    for &op in Opcode::ALL {
        let variant = format!("{op:?}");
        let named = format!("Opcode::{variant},");
        let built = format!("b.{}(", op.name());
        assert!(
            src.contains(&named) || src.contains(&built),
            "no test runs {op}"
        );
    }
}

#[test]
fn fast_inverse_square_root_through_bitcast() {
    // y = bits^-1(MAGIC - (bits(x) >> 1)), then one Newton step.
    let magic = 0x5FE6_EB50_C7B5_37A9_i64;
    let (m, id) = single("fisr", sig([F64], [F64]), |b| {
        let x = b.param(0);
        let i = b.bitcast(I64, x);
        let one = b.iconst(1);
        let half_i = b.ishr(i, one);
        let mc = b.iconst(magic);
        let j = b.isub(mc, half_i);
        let y = b.bitcast(F64, j);
        let h = b.fconst(0.5);
        let th = b.fconst(1.5);
        let hx = b.fmul(h, x);
        let yy = b.fmul(y, y);
        let t = b.fmul(hx, yy);
        let s = b.fsub(th, t);
        let y1 = b.fmul(y, s);
        b.ret(&[y1]);
    });
    let rust = |x: f64| {
        let y = f64::from_bits((magic - ((x.to_bits() as i64) >> 1)) as u64);
        y * (1.5 - 0.5 * x * y * y)
    };
    let mut interp = Interpreter::new(&m);
    for x in [0.25, 1.0, 2.0, 10.0, 12345.678] {
        let out = interp.call(id, &mut [D(x)]).unwrap();
        assert_eq!(out, [D(rust(x))]);
        let D(y) = out[0] else { unreachable!() };
        assert!((y * x.sqrt() - 1.0).abs() < 2e-3, "{x}: {y}");
    }
}

/// `sum_i x[i]^2` over `[f64]`.
fn sumsq_module() -> (Module, FuncId) {
    single("sumsq", sig([SF64], [F64]), |b| {
        let x = b.param(0);
        let n = b.len(x);
        let zero = b.iconst(0);
        let acc0 = b.fconst(0.0);
        let acc = b.counted_loop(zero, n, &[acc0], |b, i, acc| {
            let xi = b.load(x, i);
            let sq = b.fmul(xi, xi);
            vec![b.fadd(acc[0], sq)]
        });
        b.ret(&[acc[0]]);
    })
}

/// The spec's `@rosenbrock`.
fn rosenbrock_module() -> (Module, FuncId) {
    single("rosenbrock", sig([SF64], [F64]), |b| {
        let x = b.param(0);
        let n = b.len(x);
        let one_i = b.iconst(1);
        let m = b.isub(n, one_i);
        let zero = b.iconst(0);
        let acc0 = b.fconst(0.0);
        let acc = b.counted_loop(zero, m, &[acc0], |b, i, acc| {
            let a = b.load(x, i);
            let one = b.iconst(1);
            let i1 = b.iadd(i, one);
            let bb = b.load(x, i1);
            let a2 = b.fmul(a, a);
            let d = b.fsub(bb, a2);
            let d2 = b.fmul(d, d);
            let hundred = b.fconst(100.0);
            let t1 = b.fmul(hundred, d2);
            let onef = b.fconst(1.0);
            let e = b.fsub(onef, a);
            let t2 = b.fmul(e, e);
            let t = b.fadd(t1, t2);
            vec![b.fadd(acc[0], t)]
        });
        b.ret(&[acc[0]]);
    })
}

fn rosenbrock_rust(x: &[f64]) -> f64 {
    let mut acc = 0.0;
    for i in 0..x.len().saturating_sub(1) {
        let d = x[i + 1] - x[i] * x[i];
        let e = 1.0 - x[i];
        acc += 100.0 * (d * d) + e * e;
    }
    acc
}

fn test_vector(n: usize) -> Vec<f64> {
    (0..n)
        .map(|i| ((i * 7919) % 1000) as f64 / 250.0 - 2.0)
        .collect()
}

#[test]
fn sumsq_over_a_slice() {
    let (m, id) = sumsq_module();
    let mut interp = Interpreter::new(&m);
    for n in [0, 1, 2, 17, 1000] {
        let x = test_vector(n);
        let mut want = 0.0;
        for &v in &x {
            want += v * v;
        }
        let mut args = [Val::F64s(x.clone())];
        assert_eq!(interp.call(id, &mut args).unwrap(), [D(want)]);
        assert_eq!(
            args,
            [Val::F64s(x)],
            "a read-only argument comes back unchanged"
        );
    }
}

#[test]
fn rosenbrock_over_a_slice() {
    let (m, id) = rosenbrock_module();
    let mut interp = Interpreter::new(&m);
    for n in [0, 1, 2, 3, 100, 10_000] {
        let x = test_vector(n);
        let out = interp.call(id, &mut [Val::F64s(x.clone())]).unwrap();
        assert_eq!(out, [D(rosenbrock_rust(&x))], "n = {n}");
    }
    // The minimum: all ones.
    let out = interp.call(id, &mut [Val::F64s(vec![1.0; 50])]).unwrap();
    assert_eq!(out, [D(0.0)]);
}

#[test]
fn rosenbrock_on_100_000_elements_runs_quickly() {
    let (m, id) = rosenbrock_module();
    let x = test_vector(100_000);
    let mut interp = Interpreter::new(&m);
    let t = std::time::Instant::now();
    let out = interp.call(id, &mut [Val::F64s(x.clone())]).unwrap();
    let elapsed = t.elapsed();
    assert_eq!(out, [D(rosenbrock_rust(&x))]);
    // The entry runs 3 statements; each iteration a head (2 phis, icmp, br) and a
    // body (12 instructions, jump); then the last head and the exit's ret.
    assert_eq!(interp.steps(), 3 + 99_999 * (4 + 13) + 4 + 1);
    eprintln!("rosenbrock on 100_000 elements: {elapsed:?}");
}

#[test]
fn f32_slices_sum_in_f32() {
    let (m, id) = single("sum32", sig([Type::slice(Elem::F32)], [F32]), |b| {
        let x = b.param(0);
        let n = b.len(x);
        let zero = b.iconst(0);
        let acc0 = b.f32const(0.0);
        let acc = b.counted_loop(zero, n, &[acc0], |b, i, acc| {
            let xi = b.load(x, i);
            vec![b.fadd(acc[0], xi)]
        });
        b.ret(&[acc[0]]);
    });
    let x: Vec<f32> = (0..1000).map(|i| 0.1 + i as f32 * 1e-3).collect();
    let mut want = 0.0f32;
    for &v in &x {
        want += v;
    }
    let out = Interpreter::new(&m).call(id, &mut [Val::F32s(x)]).unwrap();
    assert_eq!(out, [S(want)]);
}

#[test]
fn nested_loops() {
    // t(n) = sum_{i<n} sum_{j<i} (i * j + 1), in i64.
    let (m, id) = single("tri", sig([I64], [I64]), |b| {
        let n = b.param(0);
        let zero = b.iconst(0);
        let outer = b.counted_loop(zero, n, &[zero], |b, i, acc| {
            let z = b.iconst(0);
            let inner = b.counted_loop(z, i, &[acc[0]], |b, j, acc| {
                let ij = b.imul(i, j);
                let one = b.iconst(1);
                let t = b.iadd(ij, one);
                vec![b.iadd(acc[0], t)]
            });
            vec![inner[0]]
        });
        b.ret(&[outer[0]]);
    });
    let mut interp = Interpreter::new(&m);
    for n in [0i64, 1, 2, 5, 40] {
        let mut want = 0i64;
        for i in 0..n {
            for j in 0..i {
                want += i * j + 1;
            }
        }
        assert_eq!(interp.call(id, &mut [I(n)]).unwrap(), [I(want)], "n = {n}");
    }
}

#[test]
fn a_diamond_joins_through_a_phi() {
    // f(x) = if x < 0 { -2x } else { x + 1 }
    let (m, id) = single("diamond", sig([F64], [F64]), |b| {
        let x = b.param(0);
        let entry = b.current_block();
        let neg = b.create_block("neg");
        let pos = b.create_block("pos");
        let join = b.create_block("join");
        let zero = b.fconst(0.0);
        let c = b.fcmp(CmpPred::Lt, x, zero);
        b.br(c, neg, pos);
        let _ = entry;
        b.switch_to(neg);
        let m2 = b.fconst(-2.0);
        let y1 = b.fmul(m2, x);
        b.jump(join);
        b.switch_to(pos);
        let one = b.fconst(1.0);
        let y2 = b.fadd(x, one);
        b.jump(join);
        b.switch_to(join);
        let y = b.phi(F64, &[(neg, y1), (pos, y2)]);
        b.ret(&[y]);
    });
    let mut interp = Interpreter::new(&m);
    for x in [-3.0, -0.5, 0.0, 2.5] {
        let want = if x < 0.0 { -2.0 * x } else { x + 1.0 };
        assert_eq!(interp.call(id, &mut [D(x)]).unwrap(), [D(want)]);
    }
}

#[test]
fn phis_copy_in_parallel_and_functions_return_several_results() {
    // (a, b) = (1, 2); n times: (a, b) = (b, a). The phis name each other.
    let (m, id) = single("swap", sig([I64], [I64, I64]), |b| {
        let n = b.param(0);
        let zero = b.iconst(0);
        let one = b.iconst(1);
        let two = b.iconst(2);
        let ab = b.counted_loop(zero, n, &[one, two], |_, _, ab| vec![ab[1], ab[0]]);
        b.ret(&[ab[0], ab[1]]);
    });
    let mut interp = Interpreter::new(&m);
    for n in 0..6i64 {
        let (mut a, mut b) = (1, 2);
        for _ in 0..n {
            (a, b) = (b, a);
        }
        assert_eq!(
            interp.call(id, &mut [I(n)]).unwrap(),
            [I(a), I(b)],
            "n = {n}"
        );
    }
}

#[test]
fn fibonacci_by_parallel_phis() {
    // (a, b) = (0, 1); n times: (a, b) = (b, a + b).
    let (m, id) = single("fib", sig([I64], [I64]), |b| {
        let n = b.param(0);
        let zero = b.iconst(0);
        let one = b.iconst(1);
        let ab = b.counted_loop(zero, n, &[zero, one], |b, _, ab| {
            let s = b.iadd(ab[0], ab[1]);
            vec![ab[1], s]
        });
        b.ret(&[ab[0]]);
    });
    let mut interp = Interpreter::new(&m);
    let (mut a, mut b) = (0i64, 1i64);
    for n in 0..50i64 {
        assert_eq!(interp.call(id, &mut [I(n)]).unwrap(), [I(a)], "n = {n}");
        (a, b) = (b, a + b);
    }
}

#[test]
fn calls_pass_several_results_back() {
    let mut m = Module::new();
    let divmod = m.declare("divmod", sig([I64, I64], [I64, I64])).unwrap();
    let user = m.declare("user", sig([I64, I64], [I64])).unwrap();
    define(&mut m, divmod, |b| {
        let (x, y) = (b.param(0), b.param(1));
        let q = b.idiv(x, y);
        let r = b.irem(x, y);
        b.ret(&[q, r]);
    });
    // user(x, y) = 1000 * (x / y) + x % y
    define(&mut m, user, |b| {
        let (x, y) = (b.param(0), b.param(1));
        let qr = b.call(divmod, &[x, y]);
        let k = b.iconst(1000);
        let t = b.imul(k, qr[0]);
        let s = b.iadd(t, qr[1]);
        b.ret(&[s]);
    });
    let mut interp = Interpreter::new(&m);
    assert_eq!(
        interp.call(divmod, &mut [I(-17), I(5)]).unwrap(),
        [I(-3), I(-2)]
    );
    for (x, y) in [(17, 5), (-17, 5), (100, 7)] {
        let want = 1000 * (x / y) + x % y;
        assert_eq!(interp.call(user, &mut [I(x), I(y)]).unwrap(), [I(want)]);
    }
}

#[test]
fn stores_into_a_mut_argument_are_visible_afterwards() {
    // scale(x, c): x[i] *= c for all i; returns len.
    let (m, id) = single("scale", sig([MF64, F64], [I64]), |b| {
        let (x, c) = (b.param(0), b.param(1));
        let n = b.len(x);
        let zero = b.iconst(0);
        b.counted_loop(zero, n, &[], |b, i, _| {
            let xi = b.load(x, i);
            let y = b.fmul(xi, c);
            b.store(x, i, y);
            vec![]
        });
        b.ret(&[n]);
    });
    let x = test_vector(10);
    let mut args = [Val::F64s(x.clone()), D(3.0)];
    let out = Interpreter::new(&m).call(id, &mut args).unwrap();
    assert_eq!(out, [I(10)]);
    let want: Vec<f64> = x.iter().map(|v| v * 3.0).collect();
    assert_eq!(args, [Val::F64s(want), D(3.0)]);
}

#[test]
fn a_returned_slice_is_a_copy_and_aliases_see_each_other() {
    // f(x: mut [i64]) -> [i64]: y = select(true, x, x); store y[0], 7; return x.
    let si = Type::slice(Elem::I64);
    let mi = Type::slice_mut(Elem::I64);
    let (m, id) = single("alias", sig([mi], [si, I64]), |b| {
        let x = b.param(0);
        let t = b.bconst(true);
        let y = b.select(t, x, x);
        let zero = b.iconst(0);
        let seven = b.iconst(7);
        b.store(y, zero, seven);
        let v = b.load(x, zero);
        b.ret(&[x, v]);
    });
    let mut args = [Val::I64s(vec![1, 2, 3])];
    let out = Interpreter::new(&m).call(id, &mut args).unwrap();
    assert_eq!(out, [Val::I64s(vec![7, 2, 3]), I(7)]);
    assert_eq!(args, [Val::I64s(vec![7, 2, 3])]);
}

#[test]
fn alloc_store_load_and_pass_the_buffer_to_calls() {
    let mut m = Module::new();
    let fill = m.declare("fill", sig([MF64], [])).unwrap();
    let sum = m.declare("sum", sig([SF64], [F64])).unwrap();
    let main = m.declare("main", sig([I64], [F64, F64])).unwrap();
    // fill(a): a[i] = i * i
    define(&mut m, fill, |b| {
        let a = b.param(0);
        let n = b.len(a);
        let zero = b.iconst(0);
        b.counted_loop(zero, n, &[], |b, i, _| {
            let ii = b.imul(i, i);
            let v = b.cast(F64, ii);
            b.store(a, i, v);
            vec![]
        });
        b.ret(&[]);
    });
    define(&mut m, sum, |b| {
        let a = b.param(0);
        let n = b.len(a);
        let zero = b.iconst(0);
        let acc0 = b.fconst(0.0);
        let acc = b.counted_loop(zero, n, &[acc0], |b, i, acc| {
            let v = b.load(a, i);
            vec![b.fadd(acc[0], v)]
        });
        b.ret(&[acc[0]]);
    });
    // main(n) = (sum of the zero-filled buffer, sum after fill), plus a store and load.
    define(&mut m, main, |b| {
        let n = b.param(0);
        let a = b.alloc(Elem::F64, n);
        let s0 = b.call(sum, &[a]);
        b.call(fill, &[a]);
        let s1 = b.call(sum, &[a]);
        let zero = b.iconst(0);
        let x0 = b.load(a, zero);
        let r = b.fadd(s1[0], x0);
        b.ret(&[s0[0], r]);
    });
    let mut interp = Interpreter::new(&m);
    for n in [0i64, 1, 10, 100] {
        let want: f64 = (0..n).map(|i| (i * i) as f64).sum();
        if n == 0 {
            let e = interp.call(main, &mut [I(n)]).unwrap_err();
            assert_eq!(e.kind, ErrorKind::OutOfBounds { index: 0, len: 0 });
            assert_eq!((e.func.as_str(), e.op.as_str()), ("main", "load"));
            continue;
        }
        let out = interp.call(main, &mut [I(n)]).unwrap();
        assert_eq!(out, [D(0.0), D(want)], "n = {n}");
    }
}

#[test]
fn buffers_of_f32_and_i64() {
    // f(n) = sum of a[i] where a: [i64] = i, and b: [f32] = 0.5 * i
    let (m, id) = single("bufs", sig([I64], [I64, F32]), |b| {
        let n = b.param(0);
        let ai = b.alloc(Elem::I64, n);
        let af = b.alloc(Elem::F32, n);
        let zero = b.iconst(0);
        b.counted_loop(zero, n, &[], |b, i, _| {
            b.store(ai, i, i);
            let f = b.cast(F32, i);
            let h = b.f32const(0.5);
            let v = b.fmul(h, f);
            b.store(af, i, v);
            vec![]
        });
        let s0 = b.iconst(0);
        let f0 = b.f32const(0.0);
        let acc = b.counted_loop(zero, n, &[s0, f0], |b, i, acc| {
            let x = b.load(ai, i);
            let y = b.load(af, i);
            vec![b.iadd(acc[0], x), b.fadd(acc[1], y)]
        });
        b.ret(&[acc[0], acc[1]]);
    });
    let n = 20i64;
    let mut fs = 0.0f32;
    for i in 0..n {
        fs += 0.5 * i as f32;
    }
    let out = Interpreter::new(&m).call(id, &mut [I(n)]).unwrap();
    assert_eq!(out, [I(n * (n - 1) / 2), S(fs)]);
}

/// `fact(n) = n <= 1 ? 1 : n * fact(n - 1)` and `fib(n) = n < 2 ? n : fib(n-1) + fib(n-2)`.
fn recursive_module() -> (Module, FuncId, FuncId) {
    let mut m = Module::new();
    let fact = m.declare("fact", sig([I64], [I64])).unwrap();
    let fib = m.declare("fib", sig([I64], [I64])).unwrap();
    define(&mut m, fact, |b| {
        let n = b.param(0);
        let base = b.create_block("base");
        let rec = b.create_block("rec");
        let one = b.iconst(1);
        let c = b.icmp(CmpPred::Le, n, one);
        b.br(c, base, rec);
        b.switch_to(base);
        b.ret(&[one]);
        b.switch_to(rec);
        let m1 = b.isub(n, one);
        let r = b.call(fact, &[m1]);
        let p = b.imul(n, r[0]);
        b.ret(&[p]);
    });
    define(&mut m, fib, |b| {
        let n = b.param(0);
        let base = b.create_block("base");
        let rec = b.create_block("rec");
        let two = b.iconst(2);
        let c = b.icmp(CmpPred::Lt, n, two);
        b.br(c, base, rec);
        b.switch_to(base);
        b.ret(&[n]);
        b.switch_to(rec);
        let one = b.iconst(1);
        let n1 = b.isub(n, one);
        let n2 = b.isub(n, two);
        let a = b.call(fib, &[n1]);
        let c2 = b.call(fib, &[n2]);
        let s = b.iadd(a[0], c2[0]);
        b.ret(&[s]);
    });
    (m, fact, fib)
}

#[test]
fn recursion_factorial_and_fibonacci() {
    let (m, fact, fib) = recursive_module();
    let mut interp = Interpreter::new(&m);
    let mut f = 1i64;
    for n in 1..=20i64 {
        f *= n;
        assert_eq!(interp.call(fact, &mut [I(n)]).unwrap(), [I(f)], "{n}!");
    }
    let fib_rust = |n: i64| {
        let (mut a, mut b) = (0i64, 1i64);
        for _ in 0..n {
            (a, b) = (b, a + b);
        }
        a
    };
    for n in 0..=20 {
        assert_eq!(interp.call(fib, &mut [I(n)]).unwrap(), [I(fib_rust(n))]);
    }
}

#[test]
fn mutual_recursion() {
    let mut m = Module::new();
    let even = m.declare("is_even", sig([I64], [BOOL])).unwrap();
    let odd = m.declare("is_odd", sig([I64], [BOOL])).unwrap();
    for (me, other, at_zero) in [(even, odd, true), (odd, even, false)] {
        define(&mut m, me, |b| {
            let n = b.param(0);
            let base = b.create_block("base");
            let rec = b.create_block("rec");
            let zero = b.iconst(0);
            let c = b.icmp(CmpPred::Eq, n, zero);
            b.br(c, base, rec);
            b.switch_to(base);
            let r = b.bconst(at_zero);
            b.ret(&[r]);
            b.switch_to(rec);
            let one = b.iconst(1);
            let n1 = b.isub(n, one);
            let r = b.call(other, &[n1]);
            b.ret(&[r[0]]);
        });
    }
    let mut interp = Interpreter::new(&m);
    for n in [0i64, 1, 2, 7, 100, 1001] {
        assert_eq!(interp.call(even, &mut [I(n)]).unwrap(), [B(n % 2 == 0)]);
        assert_eq!(interp.call(odd, &mut [I(n)]).unwrap(), [B(n % 2 == 1)]);
    }
}

/// `down(n) = n <= 0 ? 0 : down(n - 1) + 1`: recursion `n + 1` frames deep.
fn countdown_module() -> (Module, FuncId) {
    let mut m = Module::new();
    let down = m.declare("down", sig([I64], [I64])).unwrap();
    define(&mut m, down, |b| {
        let n = b.param(0);
        let done = b.create_block("done");
        let rec = b.create_block("rec");
        let zero = b.iconst(0);
        let c = b.icmp(CmpPred::Le, n, zero);
        b.br(c, done, rec);
        b.switch_to(done);
        b.ret(&[zero]);
        b.switch_to(rec);
        let one = b.iconst(1);
        let m1 = b.isub(n, one);
        let r = b.call(down, &[m1]);
        let s = b.iadd(r[0], one);
        b.ret(&[s]);
    });
    (m, down)
}

#[test]
fn a_million_nested_calls_hit_the_recursion_limit_without_overflowing() {
    let (m, down) = countdown_module();
    let mut interp = Interpreter::new(&m);
    let e = interp.call(down, &mut [I(1_000_000)]).unwrap_err();
    assert_eq!(e.kind, ErrorKind::RecursionLimit(10_000));
    assert_eq!((e.func.as_str(), e.op.as_str()), ("down", "call"));
    // Exactly the limit is fine: down(9_999) is 10_000 frames.
    assert_eq!(interp.call(down, &mut [I(9_999)]).unwrap(), [I(9_999)]);
    let e = interp.call(down, &mut [I(10_000)]).unwrap_err();
    assert_eq!(e.kind, ErrorKind::RecursionLimit(10_000));
}

#[test]
fn a_million_nested_calls_complete_under_a_raised_limit() {
    let (m, down) = countdown_module();
    let limits = Limits {
        max_depth: 2_000_000,
        ..Limits::default()
    };
    let mut interp = Interpreter::new(&m).with_limits(limits);
    let t = std::time::Instant::now();
    let out = interp.call(down, &mut [I(1_000_000)]).unwrap();
    eprintln!("1_000_000 nested calls: {:?}", t.elapsed());
    assert_eq!(out, [I(1_000_000)]);
    // Per level: icmp, br, isub, call, iadd, ret; the last level icmp, br, ret.
    assert_eq!(interp.steps(), 1_000_000 * 6 + 3);
}

// Runtime errors.

#[track_caller]
fn assert_error(e: &RunError, kind: ErrorKind, func: &str, op: &str) {
    assert_eq!(e.kind, kind, "{e}");
    assert_eq!(e.func, func, "{e}");
    assert_eq!(e.op, op, "{e}");
}

/// `get(x, i) = x[i]` and `put(x, i, v): x[i] = v`.
fn get_put_module() -> (Module, FuncId, FuncId) {
    let mut m = Module::new();
    let get = m.declare("get", sig([SF64, I64], [F64])).unwrap();
    let put = m.declare("put", sig([MF64, I64, F64], [])).unwrap();
    define(&mut m, get, |b| {
        let (x, i) = (b.param(0), b.param(1));
        let v = b.load(x, i);
        b.ret(&[v]);
    });
    define(&mut m, put, |b| {
        let (x, i, v) = (b.param(0), b.param(1), b.param(2));
        b.store(x, i, v);
        b.ret(&[]);
    });
    (m, get, put)
}

#[test]
fn loads_and_stores_out_of_bounds_in_both_directions() {
    let (m, get, put) = get_put_module();
    let mut interp = Interpreter::new(&m);
    let x = vec![1.0, 2.0, 3.0];
    for i in [-1i64, 3, 4, i64::MIN, i64::MAX] {
        let e = interp
            .call(get, &mut [Val::F64s(x.clone()), I(i)])
            .unwrap_err();
        assert_error(
            &e,
            ErrorKind::OutOfBounds { index: i, len: 3 },
            "get",
            "load",
        );
        let mut args = [Val::F64s(x.clone()), I(i), D(9.0)];
        let e = interp.call(put, &mut args).unwrap_err();
        assert_error(
            &e,
            ErrorKind::OutOfBounds { index: i, len: 3 },
            "put",
            "store",
        );
        assert_eq!(
            args[0],
            Val::F64s(x.clone()),
            "the argument comes back after an error"
        );
    }
    for i in 0..3 {
        let out = interp.call(get, &mut [Val::F64s(x.clone()), I(i)]).unwrap();
        assert_eq!(out, [D(x[i as usize])]);
    }
    let e = interp
        .call(get, &mut [Val::F64s(vec![]), I(0)])
        .unwrap_err();
    assert_error(
        &e,
        ErrorKind::OutOfBounds { index: 0, len: 0 },
        "get",
        "load",
    );
}

#[test]
fn errors_name_the_position_in_a_sentence() {
    let (mut m, get, _) = get_put_module();
    let f = m.function_mut(get).unwrap();
    let (_, inst) = f.placed_insts().next().unwrap();
    f.srcmap.insts[inst] = Pos::new(7, 10);
    let e = Interpreter::new(&m)
        .call(get, &mut [Val::F64s(vec![0.0; 3]), I(5)])
        .unwrap_err();
    assert_eq!(e.pos, Pos::new(7, 10));
    assert_eq!(
        e.to_string(),
        "in @get, load of parameter 1 at 7:10: index 5 out of bounds for length 3"
    );
    let (m, get, _) = get_put_module();
    let e = Interpreter::new(&m)
        .call(get, &mut [Val::F64s(vec![]), I(-1)])
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "in @get, load of parameter 1: index -1 out of bounds for length 0"
    );
    let e = Interpreter::new(&m).call(get, &mut []).unwrap_err();
    assert_eq!(e.to_string(), "in @get: @get takes 2 arguments, found 0");
}

#[test]
fn a_mut_argument_keeps_the_stores_made_before_an_error() {
    // x[0] = 5; x[len] = 6 (out of bounds).
    let (m, id) = single("half", sig([MF64], []), |b| {
        let x = b.param(0);
        let zero = b.iconst(0);
        let five = b.fconst(5.0);
        b.store(x, zero, five);
        let n = b.len(x);
        let six = b.fconst(6.0);
        b.store(x, n, six);
        b.ret(&[]);
    });
    let mut args = [Val::F64s(vec![0.0, 1.0])];
    let e = Interpreter::new(&m).call(id, &mut args).unwrap_err();
    assert_error(
        &e,
        ErrorKind::OutOfBounds { index: 2, len: 2 },
        "half",
        "store",
    );
    assert_eq!(args, [Val::F64s(vec![5.0, 1.0])]);
}

#[test]
fn division_by_zero_in_a_callee_names_the_callee() {
    let mut m = Module::new();
    let div = m.declare("div", sig([I64, I64], [I64, I64])).unwrap();
    let outer = m.declare("outer", sig([I64], [I64])).unwrap();
    define(&mut m, div, |b| {
        let (x, y) = (b.param(0), b.param(1));
        let r = b.irem(x, y);
        let q = b.idiv(x, y);
        b.ret(&[q, r]);
    });
    define(&mut m, outer, |b| {
        let x = b.param(0);
        let zero = b.iconst(0);
        let qr = b.call(div, &[x, zero]);
        b.ret(&[qr[0]]);
    });
    let mut interp = Interpreter::new(&m);
    let e = interp.call(outer, &mut [I(7)]).unwrap_err();
    assert_error(&e, ErrorKind::DivisionByZero, "div", "irem");
    let e = interp.call(div, &mut [I(7), I(0)]).unwrap_err();
    assert_error(&e, ErrorKind::DivisionByZero, "div", "irem");
    // The same interpreter works afterwards.
    assert_eq!(interp.call(div, &mut [I(7), I(2)]).unwrap(), [I(3), I(1)]);
}

#[test]
fn trap_if_passes_when_false_and_fails_with_its_message_when_true() {
    // inner(x, dx) = 2 x[0], after dx[0] = 1, one push, and a check that x and dx
    // have one length; outer(x, dx) = inner(x, dx).
    const MSG: &str = "shadow of %x has another length than %x";
    let mut m = Module::new();
    let inner = m.declare("inner", sig([SF64, MF64], [F64])).unwrap();
    let outer = m.declare("outer", sig([SF64, MF64], [F64])).unwrap();
    define(&mut m, inner, |b| {
        let (x, dx) = (b.param(0), b.param(1));
        let zero = b.iconst(0);
        let one = b.fconst(1.0);
        b.store(dx, zero, one);
        b.push(one);
        let (n, k) = (b.len(x), b.len(dx));
        let differ = b.icmp(CmpPred::Ne, n, k);
        b.trap_if(differ, MSG);
        let v = b.load(x, zero);
        let two = b.fconst(2.0);
        let r = b.fmul(v, two);
        b.ret(&[r]);
    });
    define(&mut m, outer, |b| {
        let (x, dx) = (b.param(0), b.param(1));
        let r = b.call(inner, &[x, dx]);
        b.ret(&[r[0]]);
    });
    verify(&m).unwrap();
    let mut interp = Interpreter::new(&m);

    // One length: the check passes.
    let mut args = [Val::F64s(vec![3.0, 4.0]), Val::F64s(vec![0.0, 5.0])];
    assert_eq!(interp.call(outer, &mut args).unwrap(), [D(6.0)]);
    assert_eq!(args[1], Val::F64s(vec![1.0, 5.0]));

    // Two lengths: the call fails in @inner, at the trap_if, with the message.
    let mut args = [Val::F64s(vec![3.0, 4.0]), Val::F64s(vec![0.0])];
    let e = interp.call(outer, &mut args).unwrap_err();
    assert_error(&e, ErrorKind::Trap(MSG.to_string()), "inner", "trap_if");
    assert_eq!(e.pos, Pos::NONE);
    assert_eq!(e.to_string(), format!("in @inner, trap_if: trap: {MSG}"));
    // What ran before the trap stays: the store, and the push on the tape (one
    // per call).
    assert_eq!(args[1], Val::F64s(vec![1.0]));
    assert_eq!(interp.tape().scalars, 2);

    // Called directly, it names itself; the interpreter works afterwards.
    let e = interp
        .call(inner, &mut [Val::F64s(vec![]), Val::F64s(vec![0.0])])
        .unwrap_err();
    assert_error(&e, ErrorKind::Trap(MSG.to_string()), "inner", "trap_if");
    let mut args = [Val::F64s(vec![-1.5]), Val::F64s(vec![0.0])];
    assert_eq!(interp.call(inner, &mut args).unwrap(), [D(-3.0)]);
}

#[test]
fn a_parsed_trap_if_reports_its_position_and_unescaped_message() {
    let m = parsed(
        "func @checked(%n: i64) -> i64 {
entry:
    trap_if false, \"never\"
    %neg = icmp lt %n, 0
    trap_if %neg, \"n is negative:\\t\\\"%n\\\"\\n\"
    ret %n
}
",
    );
    let mut interp = Interpreter::new(&m);
    for n in [0, 1, i64::MAX] {
        assert_eq!(interp.call_by_name("checked", &mut [I(n)]).unwrap(), [I(n)]);
    }
    let e = interp.call_by_name("checked", &mut [I(-1)]).unwrap_err();
    let message = "n is negative:\t\"%n\"\n";
    assert_error(&e, ErrorKind::Trap(message.into()), "checked", "trap_if");
    assert_eq!(e.pos, Pos::new(5, 5));
    assert_eq!(
        e.to_string(),
        format!("in @checked, trap_if at 5:5: trap: {message}")
    );
}

#[test]
fn idiv_by_zero() {
    let (m, id) = single("q", sig([I64, I64], [I64]), |b| {
        let (x, y) = (b.param(0), b.param(1));
        let q = b.idiv(x, y);
        b.ret(&[q]);
    });
    let e = Interpreter::new(&m)
        .call(id, &mut [I(1), I(0)])
        .unwrap_err();
    assert_error(&e, ErrorKind::DivisionByZero, "q", "idiv");
}

#[test]
fn negative_alloc() {
    let (m, id) = single("mk", sig([I64], [I64]), |b| {
        let n = b.param(0);
        let a = b.alloc(Elem::F64, n);
        let l = b.len(a);
        b.ret(&[l]);
    });
    let mut interp = Interpreter::new(&m);
    let e = interp.call(id, &mut [I(-3)]).unwrap_err();
    assert_error(&e, ErrorKind::NegativeAlloc(-3), "mk", "alloc");
    assert_eq!(interp.call(id, &mut [I(0)]).unwrap(), [I(0)]);
    assert_eq!(interp.call(id, &mut [I(5)]).unwrap(), [I(5)]);
    let e = interp.call(id, &mut [I(i64::MAX)]).unwrap_err();
    assert_error(&e, ErrorKind::AllocFailed(i64::MAX), "mk", "alloc");
}

#[test]
fn fuel_bounds_an_infinite_loop() {
    // entry: jump l;  l: %i = phi [entry: 0, l: %i1]; %i1 = iadd %i, 1; jump l
    let (m, id) = single("spin", sig([], []), |b| {
        let entry = b.current_block();
        let l = b.create_block("l");
        b.jump(l);
        b.switch_to(l);
        let zero = b.iconst(0);
        let i = b.phi(I64, &[(entry, zero)]);
        let one = b.iconst(1);
        let i1 = b.iadd(i, one);
        b.add_incoming(i, l, i1);
        b.jump(l);
    });
    // Statement 1 is the entry's jump; then phi, iadd, jump, phi, ...
    let op_of = |k: u64| ["phi", "iadd", "jump"][((k - 2) % 3) as usize];
    for fuel in [0u64, 1, 2, 999, 1000, 1001, 1002] {
        let limits = Limits {
            fuel: Some(fuel),
            ..Limits::default()
        };
        let mut interp = Interpreter::new(&m).with_limits(limits);
        let e = interp.call(id, &mut []).unwrap_err();
        let op = if fuel == 0 { "jump" } else { op_of(fuel + 1) };
        assert_error(&e, ErrorKind::OutOfFuel(fuel), "spin", op);
        assert_eq!(interp.steps(), fuel);
    }
}

#[test]
fn fuel_is_enough_when_it_covers_every_statement() {
    let (m, id) = sumsq_module();
    let x = test_vector(10);
    // entry: len, jump; 11 heads (2 phis, icmp, br); 10 bodies (load, fmul, fadd, iadd, jump); ret.
    let need = 2 + 11 * 4 + 10 * 5 + 1;
    let mut interp = Interpreter::new(&m);
    interp.call(id, &mut [Val::F64s(x.clone())]).unwrap();
    assert_eq!(interp.steps(), need);
    let exact = Limits {
        fuel: Some(need),
        ..Limits::default()
    };
    let mut interp = Interpreter::new(&m).with_limits(exact);
    assert!(interp.call(id, &mut [Val::F64s(x.clone())]).is_ok());
    let short = Limits {
        fuel: Some(need - 1),
        ..Limits::default()
    };
    let mut interp = Interpreter::new(&m).with_limits(short);
    let e = interp.call(id, &mut [Val::F64s(x)]).unwrap_err();
    assert_error(&e, ErrorKind::OutOfFuel(need - 1), "sumsq", "ret");
}

#[test]
fn bad_arguments_are_refused_before_running() {
    let (m, get, put) = get_put_module();
    let mut interp = Interpreter::new(&m);
    let e = interp.call(get, &mut [Val::F64s(vec![1.0])]).unwrap_err();
    assert_error(
        &e,
        ErrorKind::BadArguments("@get takes 2 arguments, found 1".into()),
        "get",
        "",
    );
    let e = interp.call(get, &mut [D(1.0), I(0)]).unwrap_err();
    assert_error(
        &e,
        ErrorKind::BadArguments("argument 1 of @get must be [f64], found f64".into()),
        "get",
        "",
    );
    let e = interp
        .call(put, &mut [Val::F64s(vec![1.0]), I(0), S(1.0)])
        .unwrap_err();
    assert_error(
        &e,
        ErrorKind::BadArguments("argument 3 of @put must be f64, found f32".into()),
        "put",
        "",
    );
    let e = interp
        .call(get, &mut [Val::F32s(vec![1.0]), I(0)])
        .unwrap_err();
    assert_error(
        &e,
        ErrorKind::BadArguments("argument 1 of @get must be [f64], found [f32]".into()),
        "get",
        "",
    );
    // The slices of `[f64]` and `mut [f64]` parameters are both `F64s`.
    let mut args = [Val::F64s(vec![1.0]), I(0), D(2.0)];
    interp.call(put, &mut args).unwrap();
    assert_eq!(args[0], Val::F64s(vec![2.0]));
    let e = interp.call_by_name("nope", &mut []).unwrap_err();
    assert!(matches!(e.kind, ErrorKind::BadArguments(_)), "{e}");
}

/// `@hyp(f64, f64) -> f64` extern, and `@use_hyp(x) = hyp(x, 2x) + 1`.
fn extern_module() -> (Module, FuncId, FuncId) {
    let mut m = Module::new();
    let hyp = m.declare_extern("hyp", sig([F64, F64], [F64])).unwrap();
    let use_hyp = m.declare("use_hyp", sig([F64], [F64])).unwrap();
    define(&mut m, use_hyp, |b| {
        let x = b.param(0);
        let two = b.fconst(2.0);
        let y = b.fmul(two, x);
        let h = b.call(hyp, &[x, y]);
        let one = b.fconst(1.0);
        let r = b.fadd(h[0], one);
        b.ret(&[r]);
    });
    (m, hyp, use_hyp)
}

#[test]
fn extern_functions_call_host_closures() {
    let (m, hyp, use_hyp) = extern_module();
    let mut interp = Interpreter::new(&m);
    let e = interp.call(use_hyp, &mut [D(3.0)]).unwrap_err();
    assert_error(
        &e,
        ErrorKind::UnboundExtern("hyp".into()),
        "use_hyp",
        "call",
    );
    let e = interp.call(hyp, &mut [D(3.0), D(4.0)]).unwrap_err();
    assert_error(&e, ErrorKind::UnboundExtern("hyp".into()), "hyp", "");

    let calls = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = std::sync::Arc::clone(&calls);
    interp
        .bind_extern("hyp", move |args| match args {
            [Val::F64(a), Val::F64(b)] => {
                counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                Ok(vec![Val::F64(a.hypot(*b))])
            }
            _ => Err("bad arguments".into()),
        })
        .unwrap();
    assert_eq!(
        interp.call(use_hyp, &mut [D(3.0)]).unwrap(),
        [D(3f64.hypot(6.0) + 1.0)]
    );
    assert_eq!(interp.call(hyp, &mut [D(3.0), D(4.0)]).unwrap(), [D(5.0)]);
    assert!(interp.bind_extern("use_hyp", |_| Ok(vec![])).is_err());
    assert!(interp.bind_extern("nothing", |_| Ok(vec![])).is_err());

    interp
        .bind_extern("hyp", |_| Err("the host says no".into()))
        .unwrap();
    let e = interp.call(use_hyp, &mut [D(3.0)]).unwrap_err();
    assert_error(
        &e,
        ErrorKind::ExternFailed {
            name: "hyp".into(),
            message: "the host says no".into(),
        },
        "use_hyp",
        "call",
    );
    interp
        .bind_extern("hyp", |_| Ok(vec![Val::I64(1)]))
        .unwrap();
    let e = interp.call(use_hyp, &mut [D(3.0)]).unwrap_err();
    assert!(matches!(e.kind, ErrorKind::ExternFailed { .. }), "{e}");
    drop(interp);
    assert_eq!(calls.load(std::sync::atomic::Ordering::Relaxed), 2);
}

#[test]
fn extern_functions_write_mut_slices_back() {
    // @fill_host(mut [f64], f64) fills the slice; @main(x: mut [f64]) calls it with 2.5,
    // then returns x[0] + x[1].
    let mut m = Module::new();
    let fill = m.declare_extern("fill_host", sig([MF64, F64], [])).unwrap();
    let main = m.declare("main", sig([MF64], [F64])).unwrap();
    define(&mut m, main, |b| {
        let x = b.param(0);
        let c = b.fconst(2.5);
        b.call(fill, &[x, c]);
        let zero = b.iconst(0);
        let one = b.iconst(1);
        let a = b.load(x, zero);
        let bb = b.load(x, one);
        let s = b.fadd(a, bb);
        b.ret(&[s]);
    });
    let mut interp = Interpreter::new(&m);
    interp
        .bind_extern("fill_host", |args| {
            let [Val::F64s(x), Val::F64(c)] = args else {
                return Err("bad arguments".into());
            };
            x.fill(*c);
            Ok(vec![])
        })
        .unwrap();
    let mut args = [Val::F64s(vec![0.0; 3])];
    assert_eq!(interp.call(main, &mut args).unwrap(), [D(5.0)]);
    assert_eq!(args, [Val::F64s(vec![2.5; 3])]);
    // A host that changes the length is refused.
    interp
        .bind_extern("fill_host", |args| {
            if let Val::F64s(x) = &mut args[0] {
                x.push(1.0);
            }
            Ok(vec![])
        })
        .unwrap();
    let e = interp
        .call(main, &mut [Val::F64s(vec![0.0; 3])])
        .unwrap_err();
    assert!(matches!(e.kind, ErrorKind::ExternFailed { .. }), "{e}");
}

#[test]
fn the_interpreter_works_after_every_kind_of_error() {
    let (m, fact, fib) = recursive_module();
    let mut interp = Interpreter::new(&m).with_limits(Limits {
        max_depth: 50,
        fuel: Some(100_000),
    });
    let e = interp.call(fact, &mut [I(100)]).unwrap_err();
    assert_eq!(e.kind, ErrorKind::RecursionLimit(50));
    assert_eq!(interp.call(fact, &mut [I(5)]).unwrap(), [I(120)]);
    let e = interp.call(fib, &mut [I(40)]).unwrap_err();
    assert_eq!(e.kind, ErrorKind::OutOfFuel(100_000));
    assert_eq!(interp.call(fib, &mut [I(10)]).unwrap(), [I(55)]);
    let e = interp.call(fib, &mut [D(1.0)]).unwrap_err();
    assert!(matches!(e.kind, ErrorKind::BadArguments(_)));
    assert_eq!(interp.call(fib, &mut [I(11)]).unwrap(), [I(89)]);
}

#[test]
fn val_conversions() {
    assert_eq!(Val::from(Scalar::F32(1.5)), S(1.5));
    assert_eq!(Val::from(Scalar::Bool(true)), B(true));
    assert_eq!(Val::from(2.0f64), D(2.0));
    assert_eq!(Val::from(vec![1i64, 2]), Val::I64s(vec![1, 2]));
    assert_eq!(Val::F64s(vec![]).ty(), SF64);
    assert_eq!(I(1).ty(), I64);
    assert!(Val::F64s(vec![]).fits(MF64));
    assert!(!Val::F64s(vec![]).fits(Type::slice(Elem::F32)));
    assert_eq!(S(1.0).scalar(), Some(Scalar::F32(1.0)));
    assert_eq!(Val::F32s(vec![]).scalar(), None);
}

// The tape.

/// `push v`
fn push(b: &mut FunctionBuilder<'_>, v: Value) {
    b.ins(Opcode::Push, Imm::None, &[v]);
}

/// `pop ty`
fn pop(b: &mut FunctionBuilder<'_>, ty: Type) -> Value {
    let inst = b.ins(Opcode::Pop, Imm::Type(ty), &[]);
    b.results(inst)[0]
}

/// `tape_alloc elem, n`: the handle.
fn tape_alloc(b: &mut FunctionBuilder<'_>, elem: Elem, n: Value) -> Value {
    let inst = b.ins(Opcode::TapeAlloc, Imm::Type(elem.ty()), &[n]);
    b.results(inst)[0]
}

/// `tape_view elem, h`
fn tape_view(b: &mut FunctionBuilder<'_>, elem: Elem, h: Value) -> Value {
    let inst = b.ins(Opcode::TapeView, Imm::Type(elem.ty()), &[h]);
    b.results(inst)[0]
}

/// Parses and verifies `text`.
#[track_caller]
fn parsed(text: &str) -> Module {
    let m = parse(text).unwrap_or_else(|e| panic!("{e}"));
    verify(&m).unwrap_or_else(|e| panic!("{e}"));
    m
}

fn id(m: &Module, name: &str) -> FuncId {
    m.func_by_name(name).unwrap()
}

/// The handle a call returned.
#[track_caller]
fn handle(out: &[Val]) -> i64 {
    match out {
        [Val::I64(h)] => *h,
        _ => panic!("not a handle: {out:?}"),
    }
}

/// `fwd(x)` pushes `x[i]` and `i` for each `i`, saves a copy of `x` in a tape buffer,
/// and pushes its handle; `pb(w)` pops the handle and the scalars back in reverse and
/// returns `sum_j w[j] * x[n-1-j]`, `sum_j (j+1) * i_j` (the popped indices) and
/// `sum_j w[j] * x[j]` (from the copy, viewed through the handle).
fn forward_and_pullback() -> (Module, FuncId, FuncId) {
    let mut m = Module::new();
    let fwd = m.declare("fwd", sig([SF64], [])).unwrap();
    let pb = m.declare("pb", sig([SF64], [F64, I64, F64])).unwrap();
    define(&mut m, fwd, |b| {
        let x = b.param(0);
        let n = b.len(x);
        let h = tape_alloc(b, Elem::F64, n);
        let copy = tape_view(b, Elem::F64, h);
        let zero = b.iconst(0);
        b.counted_loop(zero, n, &[], |b, i, _| {
            let xi = b.load(x, i);
            push(b, xi);
            push(b, i);
            b.store(copy, i, xi);
            vec![]
        });
        push(b, h);
        b.ret(&[]);
    });
    define(&mut m, pb, |b| {
        let w = b.param(0);
        let n = b.len(w);
        let zero = b.iconst(0);
        let (acc0, chk0) = (b.fconst(0.0), b.iconst(0));
        let h = pop(b, I64);
        let copy = tape_view(b, Elem::F64, h);
        let out = b.counted_loop(zero, n, &[acc0, chk0, acc0], |b, j, c| {
            let i = pop(b, I64);
            let xi = pop(b, F64);
            let wj = b.load(w, j);
            let t = b.fmul(wj, xi);
            let acc = b.fadd(c[0], t);
            let one = b.iconst(1);
            let j1 = b.iadd(j, one);
            let k = b.imul(j1, i);
            let chk = b.iadd(c[1], k);
            let xj = b.load(copy, j);
            let t = b.fmul(wj, xj);
            let dot = b.fadd(c[2], t);
            vec![acc, chk, dot]
        });
        b.ret(&[out[0], out[1], out[2]]);
    });
    (m, fwd, pb)
}

#[test]
fn a_pullback_pops_what_its_forward_pass_pushed_in_reverse() {
    let (m, fwd, pb) = forward_and_pullback();
    let mut interp = Interpreter::new(&m);
    for n in [0usize, 1, 2, 7, 100] {
        let x: Vec<f64> = (0..n).map(|i| (i as f64 * 0.7).sin() + 0.25).collect();
        let w: Vec<f64> = (0..n).map(|j| 1.0 + j as f64 / 3.0).collect();
        assert!(
            interp
                .call(fwd, &mut [Val::F64s(x.clone())])
                .unwrap()
                .is_empty()
        );
        let stats = interp.tape();
        assert_eq!(
            (stats.scalars, stats.buffers, stats.bytes),
            (2 * n + 1, 1, 24 * n + 8)
        );
        let out = interp.call(pb, &mut [Val::F64s(w.clone())]).unwrap();
        let (mut acc, mut chk, mut dot) = (0.0, 0i64, 0.0);
        for j in 0..n {
            acc += w[j] * x[n - 1 - j];
            chk += (j as i64 + 1) * (n - 1 - j) as i64;
            dot += w[j] * x[j];
        }
        assert_eq!(out, [D(acc), I(chk), D(dot)], "n = {n}");
        // The scalars are gone; the buffer stays until the tape is reset.
        let stats = interp.tape();
        assert_eq!((stats.scalars, stats.buffers, stats.bytes), (0, 1, 8 * n));
        interp.reset_tape();
    }
    // Without resets, buffers pile up: each forward pass adds one.
    let x = vec![1.0, 2.0, 3.0];
    for k in 1..=3 {
        interp.call(fwd, &mut [Val::F64s(x.clone())]).unwrap();
        let out = interp.call(pb, &mut [Val::F64s(x.clone())]).unwrap();
        assert_eq!(out[2], D(14.0));
        assert_eq!((interp.tape().buffers, interp.tape().bytes), (k, 24 * k));
    }
    // The peak is the largest forward pass since the last reset: 3 f64s and 3 i64s
    // and a handle on the scalar stack, 3 f64s in the buffer, two earlier buffers.
    assert_eq!(interp.tape().peak_bytes, 56 + 24 * 3);
}

const TAPE_BUFFERS: &str = "
; fwd(x) saves x[i]^2 in a tape buffer and the count in another, pushes both
; handles, and returns the first; pb() pops the handles and reads the buffers back.
func @fwd(%x: [f64]) -> i64 {
entry:
    %n = len %x
    %hsq = tape_alloc f64, %n
    %hcnt = tape_alloc i64, 1
    %cnt = tape_view i64, %hcnt
    store %cnt[0], %n
    %sq = tape_view f64, %hsq
    jump head
head:
    %i = phi i64 [entry: 0, body: %i1]
    %more = icmp lt %i, %n
    br %more, body, done
body:
    %v = load %x[%i]
    %v2 = fmul %v, %v
    store %sq[%i], %v2
    %i1 = iadd %i, 1
    jump head
done:
    push %hsq
    push %hcnt
    ret %hsq
}

func @pb() -> (f64, i64) {
entry:
    %hcnt = pop i64
    %hsq = pop i64
    %cnt = tape_view i64, %hcnt
    %n = load %cnt[0]
    %sq = tape_view f64, %hsq
    %acc = call @total(%sq)
    ret %acc, %n
}

; sum(h): the sum of the f64 tape buffer h, viewed here and read in a callee.
func @sum(%h: i64) -> f64 {
entry:
    %s = tape_view f64, %h
    %r = call @total(%s)
    ret %r
}

func @total(%s: [f64]) -> f64 {
entry:
    %n = len %s
    jump head
head:
    %i = phi i64 [entry: 0, body: %i1]
    %acc = phi f64 [entry: 0.0, body: %acc1]
    %more = icmp lt %i, %n
    br %more, body, done
body:
    %v = load %s[%i]
    %acc1 = fadd %acc, %v
    %i1 = iadd %i, 1
    jump head
done:
    ret %acc
}

; scale(h, k): multiplies the f64 tape buffer h by k, reading through one view and
; writing through another.
func @scale(%h: i64, %k: f64) {
entry:
    %a = tape_view f64, %h
    %b = tape_view f64, %h
    %n = len %a
    jump head
head:
    %i = phi i64 [entry: 0, body: %i1]
    %more = icmp lt %i, %n
    br %more, body, done
body:
    %v = load %a[%i]
    %w = fmul %v, %k
    store %b[%i], %w
    %i1 = iadd %i, 1
    jump head
done:
    ret
}

; alias(h, v): stores v at 0 through one view (in a callee), reads it through another.
func @alias(%h: i64, %v: f64) -> f64 {
entry:
    %a = tape_view f64, %h
    %b = tape_view f64, %h
    call @put0(%a, %v)
    %r = load %b[0]
    ret %r
}

func @put0(%s: mut [f64], %v: f64) {
entry:
    store %s[0], %v
    ret
}

; count(h): the length of an i64 tape buffer.
func @count(%h: i64) -> i64 {
entry:
    %s = tape_view i64, %h
    %n = len %s
    ret %n
}

func @forged() -> f64 {
entry:
    %s = tape_view f64, 12345
    %v = load %s[0]
    ret %v
}
";

#[test]
fn a_tape_buffer_filled_in_one_call_is_read_in_the_next() {
    let m = parsed(TAPE_BUFFERS);
    let mut interp = Interpreter::new(&m);
    for n in [0usize, 1, 5, 64] {
        let x: Vec<f64> = (0..n).map(|i| i as f64 - 2.5).collect();
        let out = interp
            .call(id(&m, "fwd"), &mut [Val::F64s(x.clone())])
            .unwrap();
        handle(&out);
        let stats = interp.tape();
        assert_eq!((stats.scalars, stats.buffers), (2, 2));
        assert_eq!(stats.bytes, 16 + 8 * n + 8);
        let want: f64 = x.iter().map(|v| v * v).sum();
        let out = interp.call_by_name("pb", &mut []).unwrap();
        assert_eq!(out, [D(want), I(n as i64)], "n = {n}");
        // The handles are popped; the buffers stay until the reset.
        let stats = interp.tape();
        assert_eq!(
            (stats.scalars, stats.buffers, stats.bytes),
            (0, 2, 8 * n + 8)
        );
        assert_eq!(stats.peak_bytes, 16 + 8 * n + 8);
        interp.reset_tape();
        assert_eq!(interp.tape(), TapeStats::default());
    }
}

#[test]
fn a_tape_buffer_is_viewed_in_many_calls_and_its_views_alias() {
    let m = parsed(TAPE_BUFFERS);
    let mut interp = Interpreter::new(&m);
    let x = vec![1.5, -2.0, 0.25, 3.0];
    let sq: Vec<f64> = x.iter().map(|v| v * v).collect();
    let want: f64 = sq.iter().sum();
    let h = handle(&interp.call_by_name("fwd", &mut [Val::F64s(x)]).unwrap());

    // Viewed in another call (and read in its callee), twice: nothing is consumed.
    for _ in 0..2 {
        assert_eq!(interp.call_by_name("sum", &mut [I(h)]).unwrap(), [D(want)]);
    }
    // Written through one view in one call, the buffer reads back changed in the
    // next calls, through new views.
    interp.call_by_name("scale", &mut [I(h), D(2.0)]).unwrap();
    assert_eq!(
        interp.call_by_name("sum", &mut [I(h)]).unwrap(),
        [D(2.0 * want)]
    );
    // The pullback pops the handles and reads the scaled squares.
    assert_eq!(
        interp.call_by_name("pb", &mut []).unwrap(),
        [D(2.0 * want), I(4)]
    );
    // Two views of one buffer alias, across a call too: a store through one (in a
    // callee) is seen through the other.
    assert_eq!(
        interp.call_by_name("alias", &mut [I(h), D(-7.5)]).unwrap(),
        [D(-7.5)]
    );
    let rest: f64 = sq[1..].iter().map(|v| 2.0 * v).sum();
    assert_eq!(
        interp.call_by_name("sum", &mut [I(h)]).unwrap(),
        [D(-7.5 + rest)]
    );
    // Views never add to the tape.
    let stats = interp.tape();
    assert_eq!(
        (stats.scalars, stats.buffers, stats.bytes),
        (0, 2, 8 * 4 + 8)
    );
}

#[test]
fn bad_handles_are_errors_and_the_interpreter_recovers() {
    let m = parsed(TAPE_BUFFERS);
    let mut interp = Interpreter::new(&m);
    let x = vec![3.0, 4.0];
    let h = handle(
        &interp
            .call_by_name("fwd", &mut [Val::F64s(x.clone())])
            .unwrap(),
    );

    // A forged handle names nothing.
    let e = interp.call_by_name("forged", &mut []).unwrap_err();
    let kind = ErrorKind::NoTapeBuffer {
        elem: Elem::F64,
        handle: 12345,
    };
    assert_error(&e, kind, "forged", "tape_view");
    assert!(
        e.to_string()
            .ends_with("tape_view f64: no tape buffer with handle 12345"),
        "{e}"
    );
    for forged in [0, -1, i64::MIN, i64::MAX, h + 2, h.wrapping_add(1 << 32)] {
        let e = interp.call_by_name("sum", &mut [I(forged)]).unwrap_err();
        let kind = ErrorKind::NoTapeBuffer {
            elem: Elem::F64,
            handle: forged,
        };
        assert_error(&e, kind, "sum", "tape_view");
    }
    // The interpreter and the tape are intact.
    assert_eq!(interp.call_by_name("sum", &mut [I(h)]).unwrap(), [D(25.0)]);

    // A handle of an f64 buffer viewed as i64s, and the other way round.
    let e = interp.call_by_name("count", &mut [I(h)]).unwrap_err();
    let kind = ErrorKind::TapeBufferMismatch {
        handle: h,
        expected: Elem::I64,
        found: Elem::F64,
    };
    assert_error(&e, kind, "count", "tape_view");
    assert!(
        e.to_string().ends_with(&format!(
            "tape_view i64: tape buffer {h} holds f64, not i64"
        )),
        "{e}"
    );
    let out = interp.call_by_name("pb", &mut []).unwrap();
    assert_eq!(out, [D(25.0), I(2)]);
    // (pb popped the count's handle; the count buffer is still there.)
    assert_eq!(interp.tape().buffers, 2);

    // After a reset, the old handle is stale, even once a new buffer has the same
    // place in the table.
    interp.reset_tape();
    let e = interp.call_by_name("sum", &mut [I(h)]).unwrap_err();
    let kind = ErrorKind::NoTapeBuffer {
        elem: Elem::F64,
        handle: h,
    };
    assert_error(&e, kind.clone(), "sum", "tape_view");
    let h2 = handle(
        &interp
            .call_by_name("fwd", &mut [Val::F64s(vec![1.0])])
            .unwrap(),
    );
    assert_ne!(h2, h);
    let e = interp.call_by_name("sum", &mut [I(h)]).unwrap_err();
    assert_error(&e, kind, "sum", "tape_view");
    assert_eq!(interp.call_by_name("sum", &mut [I(h2)]).unwrap(), [D(1.0)]);
    assert_eq!(interp.call_by_name("pb", &mut []).unwrap(), [D(1.0), I(1)]);
}

const NESTED: &str = "
; outer(x) pushes 1.0, x (in inner), the handle of an f32 buffer holding x (in
; inner), x + 10, 2x, a handle of one holding 2x (in inner), 3; back() pops them
; all, partly in callees.
func @inner(%x: f64) {
entry:
    push %x
    %h = tape_alloc f32, 1
    %t = tape_view f32, %h
    %xf = cast f32 %x
    store %t[0], %xf
    push %h
    ret
}

func @outer(%x: f64) {
entry:
    push 1.0
    call @inner(%x)
    %y = fadd %x, 10.0
    push %y
    %z = fmul %x, 2.0
    call @inner(%z)
    push 3
    ret
}

func @pop_f64() -> f64 {
entry:
    %v = pop f64
    ret %v
}

func @take() -> f32 {
entry:
    %h = pop i64
    %t = tape_view f32, %h
    %v = load %t[0]
    ret %v
}

func @back() -> (i64, f32, f64, f64, f32, f64, f64) {
entry:
    %a = pop i64
    %t2 = call @take()
    %b = call @pop_f64()
    %c = pop f64
    %h1 = pop i64
    %t1 = tape_view f32, %h1
    %v1 = load %t1[0]
    %d = call @pop_f64()
    %e = pop f64
    ret %a, %t2, %b, %c, %v1, %d, %e
}
";

#[test]
fn pushes_and_pops_are_last_in_first_out_across_calls() {
    let m = parsed(NESTED);
    let mut interp = Interpreter::new(&m);
    for x in [0.5, -3.0, 1e10] {
        interp.call_by_name("outer", &mut [D(x)]).unwrap();
        let stats = interp.tape();
        assert_eq!((stats.scalars, stats.buffers, stats.bytes), (7, 2, 64));
        let out = interp.call_by_name("back", &mut []).unwrap();
        let want = [
            I(3),
            S((2.0 * x) as f32),
            D(2.0 * x),
            D(x + 10.0),
            S(x as f32),
            D(x),
            D(1.0),
        ];
        assert_eq!(out, want, "x = {x}");
        assert_eq!(
            interp.tape(),
            TapeStats {
                scalars: 0,
                buffers: 2,
                bytes: 8,
                peak_bytes: 64,
                capacity_bytes: 0,
                recomputed_steps: 0,
            }
        );
        interp.reset_tape();
    }
}

const TAPE_ERRORS: &str = "
func @push_i(%n: i64) {
entry:
    push %n
    ret
}

func @pop_f() -> f64 {
entry:
    %v = pop f64
    ret %v
}

func @alloc(%n: i64) -> i64 {
entry:
    %h = tape_alloc f64, %n
    ret %h
}

; saves a buffer and its handle, and pushes, then fails: it all stays on the tape.
func @fails(%d: i64) -> i64 {
entry:
    push 1.5
    %h = tape_alloc f64, 4
    %a = tape_view f64, %h
    store %a[3], 2.5
    push %h
    %q = idiv 1, %d
    ret %q
}

; reads element 3 of the buffer whose handle is on top of the tape.
func @read3() -> f64 {
entry:
    %h = pop i64
    %a = tape_view f64, %h
    %v = load %a[3]
    ret %v
}
";

#[test]
fn tape_errors_leave_a_usable_interpreter() {
    let m = parsed(TAPE_ERRORS);
    let mut interp = Interpreter::new(&m);

    let e = interp.call_by_name("pop_f", &mut []).unwrap_err();
    assert_error(&e, ErrorKind::TapeUnderflow, "pop_f", "pop");
    assert_eq!(e.to_string(), "in @pop_f, pop at 10:5: tape underflow");

    // A mismatch leaves the tape as it was.
    interp.call_by_name("push_i", &mut [I(4)]).unwrap();
    let e = interp.call_by_name("pop_f", &mut []).unwrap_err();
    let kind = ErrorKind::TapeMismatch {
        expected: F64,
        found: I64,
    };
    assert_error(&e, kind, "pop_f", "pop");
    assert_eq!(
        e.to_string(),
        "in @pop_f, pop at 10:5: pop f64 found an i64 on the tape"
    );
    assert_eq!(interp.tape().scalars, 1);

    // tape_alloc fails as alloc does, and adds nothing.
    let e = interp.call_by_name("alloc", &mut [I(-3)]).unwrap_err();
    assert_error(&e, ErrorKind::NegativeAlloc(-3), "alloc", "tape_alloc");
    let e = interp
        .call_by_name("alloc", &mut [I(i64::MAX)])
        .unwrap_err();
    assert_error(&e, ErrorKind::AllocFailed(i64::MAX), "alloc", "tape_alloc");
    assert_eq!((interp.tape().buffers, interp.tape().bytes), (0, 8));

    // A failed call leaves what it saved, and a later call may use it.
    let e = interp.call_by_name("fails", &mut [I(0)]).unwrap_err();
    assert_error(&e, ErrorKind::DivisionByZero, "fails", "idiv");
    let stats = interp.tape();
    assert_eq!((stats.scalars, stats.buffers, stats.bytes), (3, 1, 56));
    assert_eq!(interp.call_by_name("read3", &mut []).unwrap(), [D(2.5)]);

    // `reset_tape` drops everything, and the interpreter works on.
    interp.reset_tape();
    assert_eq!(interp.tape(), TapeStats::default());
    interp.call_by_name("push_i", &mut [I(9)]).unwrap();
    handle(&interp.call_by_name("alloc", &mut [I(2)]).unwrap());
    assert_eq!(interp.call_by_name("fails", &mut [I(1)]).unwrap(), [I(1)]);
    assert_eq!(interp.call_by_name("read3", &mut []).unwrap(), [D(2.5)]);
    let stats = interp.tape();
    assert_eq!((stats.scalars, stats.buffers, stats.bytes), (2, 2, 64));
}

#[test]
fn the_peak_counts_eight_bytes_a_scalar_and_element_bytes_a_buffer() {
    // p(): 3 scalars (24 bytes), an f32 buffer of 5 (20: peak 44), pops the 3
    // scalars (20), an i64 buffer of 2 (36). q(): a bool and an i64 (52).
    let m = parsed(
        "
func @p() {
entry:
    push 1.0
    push 2
    %h = const f32 0.5
    push %h
    %a = tape_alloc f32, 5
    %x = pop f32
    %y = pop i64
    %z = pop f64
    %b = tape_alloc i64, 2
    ret
}

func @q() {
entry:
    push false
    push 3
    ret
}
",
    );
    let mut interp = Interpreter::new(&m);
    interp.call_by_name("p", &mut []).unwrap();
    let want = TapeStats {
        scalars: 0,
        buffers: 2,
        bytes: 36,
        peak_bytes: 44,
        capacity_bytes: 0,
        recomputed_steps: 0,
    };
    assert_eq!(interp.tape(), want);
    interp.call_by_name("q", &mut []).unwrap();
    assert_eq!(
        interp.tape(),
        TapeStats {
            scalars: 2,
            buffers: 2,
            bytes: 52,
            peak_bytes: 52,
            capacity_bytes: 0,
            recomputed_steps: 0,
        }
    );
    interp.reset_tape();
    assert_eq!(interp.tape().peak_bytes, 0);
}
