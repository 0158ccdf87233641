//! Every scalar op at the edges of its domain, against the interpreter, bit for bit:
//! NaN (of both signs, with payloads), zeros of both signs, infinities, subnormals,
//! floats beyond `i64`, `i64::MIN` and `-1`, shift amounts beyond 63 and negative,
//! every cast and bitcast, `select` on scalars and slices, `const`; `fma` on every
//! triple of the special floats.

mod support;

use gradlift_ir::interp::Val;
use gradlift_jit::{Workspace, compile};
use support::{Compared, compare, module};

const OPS: &str = r#"
func @int2(%a: i64, %b: i64) -> (i64, i64, i64, i64, i64, i64, i64, i64, i64) {
entry:
    %add = iadd %a, %b
    %sub = isub %a, %b
    %mul = imul %a, %b
    %shl = ishl %a, %b
    %shr = ishr %a, %b
    %and = iand %a, %b
    %or = ior %a, %b
    %xor = ixor %a, %b
    %neg = ineg %a
    ret %add, %sub, %mul, %shl, %shr, %and, %or, %xor, %neg
}

func @div(%a: i64, %b: i64) -> (i64, i64) {
entry:
    %q = idiv %a, %b
    %r = irem %a, %b
    ret %q, %r
}

func @icmps(%a: i64, %b: i64) -> (bool, bool, bool, bool, bool, bool) {
entry:
    %eq = icmp eq %a, %b
    %ne = icmp ne %a, %b
    %lt = icmp lt %a, %b
    %le = icmp le %a, %b
    %gt = icmp gt %a, %b
    %ge = icmp ge %a, %b
    ret %eq, %ne, %lt, %le, %gt, %ge
}

func @f64_2(%x: f64, %y: f64) -> (f64, f64, f64, f64, f64, f64, f64, f64, f64) {
entry:
    %add = fadd %x, %y
    %sub = fsub %x, %y
    %mul = fmul %x, %y
    %div = fdiv %x, %y
    %min = fmin %x, %y
    %max = fmax %x, %y
    %pow = pow %x, %y
    %atan2 = atan2 %x, %y
    %hypot = hypot %x, %y
    ret %add, %sub, %mul, %div, %min, %max, %pow, %atan2, %hypot
}

func @f64_3(%x: f64, %y: f64, %z: f64) -> (f64, f64) {
entry:
    %fma = fma %x, %y, %z
    %lit = fma %x, -3.0, 0.5
    ret %fma, %lit
}

func @f32_2(%x: f32, %y: f32) -> (f32, f32, f32, f32, f32, f32, f32, f32, f32) {
entry:
    %add = fadd %x, %y
    %sub = fsub %x, %y
    %mul = fmul %x, %y
    %div = fdiv %x, %y
    %min = fmin %x, %y
    %max = fmax %x, %y
    %pow = pow %x, %y
    %atan2 = atan2 %x, %y
    %hypot = hypot %x, %y
    ret %add, %sub, %mul, %div, %min, %max, %pow, %atan2, %hypot
}

func @f32_3(%x: f32, %y: f32, %z: f32) -> (f32, f32) {
entry:
    %fma = fma %x, %y, %z
    %lit = fma %x, -3.0, 0.5
    ret %fma, %lit
}

func @fcmps(%x: f64, %y: f64) -> (bool, bool, bool, bool, bool, bool) {
entry:
    %eq = fcmp eq %x, %y
    %ne = fcmp ne %x, %y
    %lt = fcmp lt %x, %y
    %le = fcmp le %x, %y
    %gt = fcmp gt %x, %y
    %ge = fcmp ge %x, %y
    ret %eq, %ne, %lt, %le, %gt, %ge
}

func @fcmps32(%x: f32, %y: f32) -> (bool, bool, bool, bool, bool, bool) {
entry:
    %eq = fcmp eq %x, %y
    %ne = fcmp ne %x, %y
    %lt = fcmp lt %x, %y
    %le = fcmp le %x, %y
    %gt = fcmp gt %x, %y
    %ge = fcmp ge %x, %y
    ret %eq, %ne, %lt, %le, %gt, %ge
}

func @f64_1(%x: f64) -> (f64, f64, f64, f64, f64, f64, f64, f64, f64, f64, f64, f64, f64, f64, f64, f64, f64, f64, f64) {
entry:
    %neg = fneg %x
    %abs = fabs %x
    %sqrt = sqrt %x
    %exp = exp %x
    %log = log %x
    %sin = sin %x
    %cos = cos %x
    %tan = tan %x
    %tanh = tanh %x
    %floor = floor %x
    %ceil = ceil %x
    %sinh = sinh %x
    %cosh = cosh %x
    %asin = asin %x
    %acos = acos %x
    %atan = atan %x
    %log10 = log10 %x
    %log2 = log2 %x
    %exp2 = exp2 %x
    ret %neg, %abs, %sqrt, %exp, %log, %sin, %cos, %tan, %tanh, %floor, %ceil, %sinh, %cosh, %asin, %acos, %atan, %log10, %log2, %exp2
}

func @f32_1(%x: f32) -> (f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32) {
entry:
    %neg = fneg %x
    %abs = fabs %x
    %sqrt = sqrt %x
    %exp = exp %x
    %log = log %x
    %sin = sin %x
    %cos = cos %x
    %tan = tan %x
    %tanh = tanh %x
    %floor = floor %x
    %ceil = ceil %x
    %sinh = sinh %x
    %cosh = cosh %x
    %asin = asin %x
    %acos = acos %x
    %atan = atan %x
    %log10 = log10 %x
    %log2 = log2 %x
    %exp2 = exp2 %x
    ret %neg, %abs, %sqrt, %exp, %log, %sin, %cos, %tan, %tanh, %floor, %ceil, %sinh, %cosh, %asin, %acos, %atan, %log10, %log2, %exp2
}

func @powis(%x: f64, %n: i64) -> (f64, f32) {
entry:
    %a = powi %x, %n
    %x32 = cast f32 %x
    %b = powi %x32, %n
    ret %a, %b
}

func @from_f64(%x: f64) -> (i64, f32, f64, i64) {
entry:
    %i = cast i64 %x
    %s = cast f32 %x
    %d = cast f64 %x
    %bits = bitcast i64 %x
    ret %i, %s, %d, %bits
}

func @from_f32(%x: f32) -> (i64, f64, f32) {
entry:
    %i = cast i64 %x
    %d = cast f64 %x
    %s = cast f32 %x
    ret %i, %d, %s
}

func @from_i64(%n: i64) -> (f64, f32, i64, f64) {
entry:
    %d = cast f64 %n
    %s = cast f32 %n
    %i = cast i64 %n
    %back = bitcast f64 %n
    ret %d, %s, %i, %back
}

func @from_bool(%b: bool) -> (i64, f64, f32, bool) {
entry:
    %i = cast i64 %b
    %d = cast f64 %b
    %s = cast f32 %b
    %n = not %b
    ret %i, %d, %s, %n
}

func @bools(%a: bool, %b: bool) -> (bool, bool, bool, bool) {
entry:
    %and = and %a, %b
    %or = or %a, %b
    %xor = xor %a, %b
    %not = not %a
    ret %and, %or, %xor, %not
}

func @selects(%c: bool, %x: f64, %y: f64, %n: i64, %s: [f64], %t: mut [f64]) -> (f64, i64, bool, [f64], f32) {
entry:
    %a = select %c, %x, %y
    %m = ineg %n
    %i = select %c, %n, %m
    %nc = not %c
    %b = select %c, %nc, %c
    %v = select %c, %s, %t
    %h = cast f32 %x
    %k = cast f32 %y
    %f = select %c, %h, %k
    ret %a, %i, %b, %v, %f
}

func @consts() -> (f64, f32, i64, bool, f64, f64, f32) {
entry:
    %a = const f64 -0.0
    %b = const f32 1.5
    %c = const i64 -9223372036854775808
    %d = const bool true
    %e = const f64 nan
    %f = const f64 -inf
    %g = const f32 -0.0
    ret %a, %b, %c, %d, %e, %f, %g
}

func @literals(%x: f64) -> (f64, f64, i64) {
entry:
    %a = fmul %x, -0.0
    %b = fmax %x, nan
    %c = iadd 9223372036854775807, 1
    ret %a, %b, %c
}
"#;

const ODD_NAN: f64 = f64::from_bits(0xfff8_0000_0000_0005);

fn floats() -> Vec<f64> {
    vec![
        0.0,
        -0.0,
        1.0,
        -1.0,
        0.5,
        -2.5,
        0.1,
        1e308,
        -1e308,
        5e-324,
        -5e-324,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
        -f64::NAN,
        ODD_NAN,
        3.0e9,
        9.3e18,
        -9.3e18,
        9_223_372_036_854_775_807.0,
        -9_223_372_036_854_775_808.0,
        1e19,
        700.0,
        -745.5,
        1.0e-310,
        3.4e38,
        1.0e39,
        2.5,
        -3.5,
        4503599627370497.0,
    ]
}

fn ints() -> Vec<i64> {
    vec![
        0,
        1,
        -1,
        2,
        -2,
        3,
        63,
        64,
        65,
        -63,
        -64,
        127,
        i64::MIN,
        i64::MAX,
        i64::MIN + 1,
        12345,
        -7,
        1 << 40,
        (1 << 53) + 1,
        -((1 << 24) + 1),
    ]
}

#[test]
fn every_scalar_op_matches_the_interpreter_at_the_edges() {
    let m = module(OPS);
    let c = compile(&m).unwrap();
    let mut ws = Workspace::new();
    let mut n = 0;
    let mut errors = 0;
    let mut run = |name: &str, args: Vec<Val>| {
        let id = m.func_by_name(name).unwrap();
        match compare(&m, &c, &mut ws, id, &args) {
            Compared::Values => n += 1,
            Compared::Errors => errors += 1,
            Compared::Skipped => panic!("@{name} ran out of fuel"),
        }
    };
    let (fs, is) = (floats(), ints());
    for &a in &is {
        for &b in &is {
            run("int2", vec![Val::I64(a), Val::I64(b)]);
            run("div", vec![Val::I64(a), Val::I64(b)]);
            run("icmps", vec![Val::I64(a), Val::I64(b)]);
        }
        run("from_i64", vec![Val::I64(a)]);
    }
    for &x in &fs {
        for &y in &fs {
            run("f64_2", vec![Val::F64(x), Val::F64(y)]);
            run("f32_2", vec![Val::F32(x as f32), Val::F32(y as f32)]);
            run("fcmps", vec![Val::F64(x), Val::F64(y)]);
            run("fcmps32", vec![Val::F32(x as f32), Val::F32(y as f32)]);
            for &z in &fs {
                run("f64_3", vec![Val::F64(x), Val::F64(y), Val::F64(z)]);
                run(
                    "f32_3",
                    vec![Val::F32(x as f32), Val::F32(y as f32), Val::F32(z as f32)],
                );
            }
        }
        run("f64_1", vec![Val::F64(x)]);
        run("f32_1", vec![Val::F32(x as f32)]);
        run("from_f64", vec![Val::F64(x)]);
        run("from_f32", vec![Val::F32(x as f32)]);
        run("literals", vec![Val::F64(x)]);
        for &k in &is {
            run("powis", vec![Val::F64(x), Val::I64(k)]);
        }
    }
    for a in [false, true] {
        run("from_bool", vec![Val::Bool(a)]);
        for b in [false, true] {
            run("bools", vec![Val::Bool(a), Val::Bool(b)]);
        }
        run(
            "selects",
            vec![
                Val::Bool(a),
                Val::F64(-0.0),
                Val::F64(f64::NAN),
                Val::I64(5),
                Val::F64s(vec![1.0, 2.0]),
                Val::F64s(vec![3.0]),
            ],
        );
    }
    run("consts", vec![]);
    // Division by zero is the one error here: every `div` with b = 0.
    assert_eq!(errors, ints().len());
    assert!(n > 5000, "{n}");
}

/// On a host with the FMA extension (and on aarch64), `fma` is one instruction, not
/// a call; the values are checked above on every triple of special floats.
#[test]
fn fma_is_one_instruction_where_the_host_has_one() {
    let m = module(
        "func @f(%a: f64, %b: f64, %c: f64) -> f64 {
        entry:
            %r = fma %a, %b, %c
            ret %r
        }",
    );
    let f = m.func_by_name("f").unwrap();
    let listing = gradlift_jit::listing(&m, &[f]).unwrap();
    let asm = &listing.iter().find(|l| l.name == "f").unwrap().asm;
    #[cfg(target_arch = "x86_64")]
    let native = std::arch::is_x86_feature_detected!("fma").then_some("vfmadd");
    #[cfg(target_arch = "aarch64")]
    let native = Some("fmadd");
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    let native: Option<&str> = None;
    match native {
        Some(ins) => {
            let calls = asm.lines().any(|l| {
                let op = l.split_whitespace().next().unwrap_or("");
                matches!(op, "call" | "callq" | "bl" | "blr")
            });
            assert!(asm.contains(ins) && !calls, "{asm}");
        }
        None => eprintln!("skipped: the host has no fma instruction"),
    }
    // One rounding: (1 + 2^-30)^2 - 1 = 2^-29 + 2^-60 exactly.
    let c = compile(&m).unwrap();
    let a = 1.0 + 2f64.powi(-30);
    let r = c
        .call(
            &mut Workspace::new(),
            f,
            &mut [Val::F64(a), Val::F64(a), Val::F64(-1.0)],
        )
        .unwrap();
    assert_eq!(r, [Val::F64(2f64.powi(-29) + 2f64.powi(-60))]);
}
