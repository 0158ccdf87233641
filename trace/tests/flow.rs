//! Traced functions against the same generic functions run natively: every program
//! here is written once, run on `f64` (the oracle: plain Rust), traced, and the IR run
//! on the reference interpreter on the same inputs. Also checks the shape of the IR:
//! real loops and branches, calls, declarations.

use gradlift_ir::interp::{Interpreter, Val};
use gradlift_ir::{Function, Module, verify};
use gradlift_trace::prelude::*;
use gradlift_trace::{Traced, Tracer, trace};
use proptest::prelude::*;

/// Runs `name` of `traced` on the interpreter; returns the results and the arguments
/// after the call.
fn run(traced: &Traced, name: &str, mut args: Vec<Val>) -> (Vec<Val>, Vec<Val>) {
    let out = Interpreter::new(&traced.module)
        .call_by_name(name, &mut args)
        .unwrap_or_else(|e| panic!("{name}: {e}\n{}", traced.module));
    (out, args)
}

fn f64_of(v: &Val) -> f64 {
    match v {
        Val::F64(x) => *x,
        other => panic!("expected f64, got {other:?}"),
    }
}

fn body<'m>(module: &'m Module, name: &str) -> &'m Function {
    module.function(module.func_by_name(name).unwrap()).unwrap()
}

/// (blocks, instructions, phis) of `name`.
fn size(module: &Module, name: &str) -> (usize, usize, usize) {
    let f = body(module, name);
    let blocks = f.layout.len();
    let insts = f.layout.iter().map(|&b| f.blocks[b].insts.len()).sum();
    let phis = f.layout.iter().map(|&b| f.blocks[b].phis.len()).sum();
    (blocks, insts, phis)
}

fn same(a: f64, b: f64) -> bool {
    a == b || (a.is_nan() && b.is_nan()) || (a - b).abs() <= 1e-12 * a.abs().max(b.abs())
}

// Nested control flow: a loop with a branch inside, and a while loop inside the
// branch, all carrying several values.
fn nested<T: Real>(x: T::Slice<'_>) -> T {
    let n = x.len();
    let (pos, neg, steps) = for_range(
        0,
        n,
        (T::lit(0.0), T::lit(0.0), T::Int::from(0)),
        |i, (pos, neg, steps)| {
            let xi = x.at(i);
            cond(
                xi.gt(0.0),
                || {
                    // Newton iterations for sqrt(xi), until close: a data-dependent exit.
                    let (r, k) = while_loop(
                        (xi + 1.0, T::Int::from(0)),
                        |&(r, k)| (r * r - xi).abs().gt(1e-12) & k.lt(100),
                        |(r, k)| ((r + xi / r) * 0.5, k + 1),
                    );
                    (pos + r, neg, steps + k)
                },
                || (pos, neg + xi * xi, steps),
            )
        },
    );
    pos - neg + T::from_int(steps)
}

#[test]
fn nested_control_flow_matches_native() {
    let traced = trace("nested", nested::<Var>).unwrap();
    let (blocks, _, phis) = size(&traced.module, "nested");
    assert!(blocks >= 9, "{}", traced.module);
    assert!(phis >= 6, "{}", traced.module);
    for x in [
        vec![],
        vec![4.0, -1.0, 2.0, 0.0, 9.0],
        vec![-3.0; 4],
        vec![1e-3, 1e6],
    ] {
        let native = nested::<f64>(&x);
        let (out, _) = run(&traced, "nested", vec![Val::F64s(x.clone())]);
        assert!(
            same(native, f64_of(&out[0])),
            "{x:?}: {native} vs {:?}",
            out[0]
        );
    }
}

// Many carried values of every kind: a tuple, an array, a vector, an integer, a bool.
#[allow(clippy::type_complexity)]
fn carried<T: Real>(x: T::Slice<'_>) -> T {
    let init = (
        [T::lit(0.0), T::lit(1.0)],
        vec![T::lit(0.0); 3],
        T::Int::from(0),
        T::Bool::from(false),
    );
    let ([s, p], v, c, seen) = for_range(0, x.len(), init, |i, ([s, p], v, c, seen)| {
        let xi = x.at(i);
        let big = xi.gt(1.0);
        let v = vec![v[1], v[2], v[0] + xi];
        ([s + xi, p * xi], v, c + i * 2, seen | big)
    });
    s + p
        + v[0] * 2.0
        + v[1] * 3.0
        + v[2] * 5.0
        + T::from_int(c)
        + seen.select(T::lit(100.0), T::lit(0.0))
}

#[test]
fn many_carried_values_match_native() {
    let traced = trace("carried", carried::<Var>).unwrap();
    for x in [
        vec![],
        vec![0.5],
        vec![0.5, 2.0, -1.5, 0.25, 3.0, 1.0, 0.75],
    ] {
        let native = carried::<f64>(&x);
        let (out, _) = run(&traced, "carried", vec![Val::F64s(x.clone())]);
        assert!(
            same(native, f64_of(&out[0])),
            "{x:?}: {native} vs {:?}",
            out[0]
        );
    }
}

// Slices: a local buffer, stores with traced indices, a mut parameter written in place.
fn prefix<T: Real>(x: T::Slice<'_>, mut out: T::SliceMut<'_>) -> T {
    let n = x.len();
    let mut buf = T::alloc(n + 1);
    for_range(0, n, (), |i, ()| {
        let next = buf.at(i) + x.at(i);
        buf.set(i + 1, next);
    });
    for_range(0, out.len(), (), |i, ()| {
        let v = buf.at((i + 1) % (n + 1));
        out.set(i, v * 2.0);
    });
    buf.at(n)
}

#[test]
fn slices_buffers_and_stores_match_native() {
    let traced = trace("prefix", prefix::<Var>).unwrap();
    assert!(
        traced
            .module
            .to_string()
            .contains("func @prefix(%0: [f64], %1: mut [f64]) -> f64")
    );
    let x = vec![1.0, 2.5, -4.0, 8.0];
    let mut native_out = vec![0.0; 6];
    let native = prefix::<f64>(&x, &mut native_out);
    let (out, args) = run(
        &traced,
        "prefix",
        vec![Val::F64s(x.clone()), Val::F64s(vec![0.0; 6])],
    );
    assert_eq!(f64_of(&out[0]), native);
    assert_eq!(args[1], Val::F64s(native_out));
}

#[test]
fn traced_index_out_of_bounds_is_a_runtime_error_not_a_trace_error() {
    fn past_end<T: Real>(x: T::Slice<'_>) -> T {
        x.at(x.len())
    }
    let traced = trace("past_end", past_end::<Var>).unwrap();
    let err = Interpreter::new(&traced.module)
        .call_by_name("past_end", &mut [Val::F64s(vec![1.0])])
        .unwrap_err();
    assert!(err.to_string().contains("out of bounds"), "{err}");
}

// Calls, recursion, several results.
fn fib<T: Real>(n: T::Int) -> T::Int {
    cond(
        n.lt(2),
        || n,
        || {
            let f = func("fib", fib::<T>);
            f.call((n - 1,)) + f.call((n - 2,))
        },
    )
}

fn minmax<T: Real>(a: T, b: T) -> (T, T) {
    (a.min(b), a.max(b))
}

fn calls<T: Real>(x: T, n: T::Int) -> T {
    let (lo, hi) = func("minmax", minmax::<T>).call((x, T::lit(1.0)));
    let f = func("fib", fib::<T>).call((n,));
    hi * 10.0 + lo + T::from_int(f)
}

#[test]
fn calls_and_recursion_are_ir_calls() {
    let traced = trace("calls", calls::<Var>).unwrap();
    let text = traced.module.to_string();
    assert!(text.contains("func @fib(%0: i64) -> i64"), "{text}");
    assert!(
        text.contains("func @minmax(%0: f64, %1: f64) -> (f64, f64)"),
        "{text}"
    );
    assert_eq!(text.matches("call @fib").count(), 3, "{text}");
    for (x, n) in [(0.5, 0), (3.0, 1), (-2.0, 10), (1.0, 15)] {
        let native = calls::<f64>(x, n);
        let (out, _) = run(&traced, "calls", vec![Val::F64(x), Val::I64(n)]);
        assert_eq!(f64_of(&out[0]), native, "x={x} n={n}");
    }
}

// f32 throughout.
fn poly32<T: Float>(x: T, k: T::Int) -> T {
    let y = for_range(0, k, T::lit(1.0), |_, acc| acc * x + T::lit(0.5));
    cond(y.gt(T::lit(2.0)), || y.sqrt(), || y.exp() - T::lit(1.0))
}

#[test]
fn f32_functions_trace() {
    let traced = trace("poly32", poly32::<Var<f32>>).unwrap();
    let text = traced.module.to_string();
    assert!(
        text.contains("func @poly32(%0: f32, %1: i64) -> f32"),
        "{text}"
    );
    for (x, k) in [(0.5f32, 3), (1.5, 4), (-0.25, 0)] {
        let native = poly32::<f32>(x, k);
        let (out, _) = run(&traced, "poly32", vec![Val::F32(x), Val::I64(k)]);
        assert_eq!(out[0], Val::F32(native), "x={x} k={k}");
    }
}

// Operations on f32 constants alone: the text would read both literals as f64, so
// the tracer gives them `const f32` instructions (before, the module did not verify).
fn consts32<T: Float>(x: T) -> T {
    let c = T::lit(2.0) * T::lit(3.0) - T::lit(0.25);
    x * c + (-T::lit(2.0))
}

#[test]
fn f32_constants_alone_trace_to_ir_that_verifies_and_prints_back() {
    let traced = trace("consts32", consts32::<Var<f32>>).unwrap();
    let text = traced.module.to_string();
    assert!(text.contains("const f32"), "{text}");
    assert_eq!(gradlift_ir::parse(&text).unwrap().to_string(), text);
    for x in [0.5f32, -3.0, 1e3] {
        let (out, _) = run(&traced, "consts32", vec![Val::F32(x)]);
        assert_eq!(out[0], Val::F32(consts32::<f32>(x)), "x={x}");
    }
}

#[test]
fn every_math_function_matches_native() {
    fn all<T: Real>(x: T, y: T) -> T {
        let a = x.sqrt() + x.exp() + x.ln() + x.sin() + x.cos() + x.tan() + x.tanh();
        let b = (-x).abs() + (x * 3.7).floor() + (x * 3.7).ceil() + x.powi(3) + x.powf(y);
        let c = x.min(y) + x.max(y) + (x / y) - (x - y);
        let d = T::from_int((x * 10.0).to_int()) + T::from_bits(x.to_bits() + 0);
        let e = x.lt(y).select(T::lit(1.0), T::lit(2.0))
            + x.le(y).select(T::lit(4.0), T::lit(8.0))
            + x.ge(y).select(T::lit(16.0), T::lit(32.0))
            + x.eq(y).select(T::lit(64.0), T::lit(128.0))
            + x.ne(y).select(T::lit(256.0), T::lit(512.0));
        let mut f = x;
        f += y;
        f -= 0.5;
        f *= y;
        f /= 2.0;
        a + b + c + d + e + f
    }
    let traced = trace("all", all::<Var>).unwrap();
    for (x, y) in [(0.7, 1.3), (2.0, 2.0), (1.1, 0.4)] {
        let (out, _) = run(&traced, "all", vec![Val::F64(x), Val::F64(y)]);
        assert!(same(all::<f64>(x, y), f64_of(&out[0])), "{x} {y}");
    }
}

/// `sinh cosh asin acos atan atan2 hypot log10 log2 exp2 mul_add`, traced in f64 and
/// f32: each is one op of the IR, and the traced function computes the native one's
/// bits (atan2 in every quadrant, hypot beyond where x² + y² overflows).
#[test]
fn the_float_methods_of_the_math_ops_match_native_bit_for_bit() {
    fn math<T: Float>(x: T, y: T) -> T {
        let q = x / x.hypot(y);
        let a = x.sinh() + y.cosh() + q.asin() + q.acos() + x.atan() + y.atan2(x);
        let b = x.abs().log10() + y.abs().log2() + q.exp2();
        a + b + x.mul_add(y, q)
    }
    let traced = trace("math", math::<Var>).unwrap();
    let text = traced.module.to_string();
    for op in [
        "sinh", "cosh", "asin", "acos", "atan", "atan2", "hypot", "log10", "log2", "exp2", "fma",
    ] {
        assert!(text.contains(&format!(" = {op} ")), "no {op} in\n{text}");
    }
    assert_eq!(gradlift_ir::parse(&text).unwrap().to_string(), text);
    let traced32 = trace("math", math::<Var<f32>>).unwrap();
    for (x, y) in [
        (0.7, 1.3),
        (-0.7, 1.3),
        (-0.7, -1.3),
        (0.7, -1.3),
        (-2.0, 0.0),
        (-2.0, -0.0),
        (1e200, 3e200),
        (-3e-200, 2e-200),
    ] {
        let (out, _) = run(&traced, "math", vec![Val::F64(x), Val::F64(y)]);
        let (native, got) = (math::<f64>(x, y), f64_of(&out[0]));
        assert!(
            native.to_bits() == got.to_bits() || (native.is_nan() && got.is_nan()),
            "{x} {y}: {got} vs {native}"
        );
        let (x32, y32) = (x as f32, y as f32);
        let (out, _) = run(&traced32, "math", vec![Val::F32(x32), Val::F32(y32)]);
        let native = math::<f32>(x32, y32);
        assert!(
            out[0] == Val::F32(native)
                || (native.is_nan() && matches!(out[0], Val::F32(v) if v.is_nan())),
            "{x} {y}: {out:?} vs {native}"
        );
    }
    // mul_add rounds once: (1 + 2^-30)^2 - 1 keeps its 2^-60.
    fn fused<T: Float>(x: T) -> T {
        x.mul_add(x, T::lit(-1.0))
    }
    let traced = trace("fused", fused::<Var>).unwrap();
    let x = 1.0 + 2f64.powi(-30);
    let (out, _) = run(&traced, "fused", vec![Val::F64(x)]);
    assert_eq!(out[0], Val::F64(2f64.powi(-29) + 2f64.powi(-60)));
    assert_ne!(x * x - 1.0, 2f64.powi(-29) + 2f64.powi(-60));
}

#[test]
fn integer_and_boolean_operators_match_native() {
    fn ints<T: Real>(a: T::Int, b: T::Int) -> T::Int {
        let q = cond(b.ne(0), || a / b + a % b, || T::Int::from(-1));
        let m = (a * 3 - b + 7) * -a;
        let bits = T::Int::from(0xF0);
        let flag = (a.gt(b) ^ b.ge(0)) | !(a.le(0) & b.eq(3));
        q + m + flag.select(T::Int::from(1000), bits)
    }
    let traced = trace("ints", ints::<Var>).unwrap();
    for (a, b) in [(7, 3), (-9, 4), (5, 0), (0, 3), (12, -5)] {
        let (out, _) = run(&traced, "ints", vec![Val::I64(a), Val::I64(b)]);
        assert_eq!(out[0], Val::I64(ints::<f64>(a, b)), "{a} {b}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn nested_matches_native_on_random_inputs(x in prop::collection::vec(-5.0f64..5.0, 0..12)) {
        let traced = trace("nested", nested::<Var>).unwrap();
        let native = nested::<f64>(&x);
        let (out, _) = run(&traced, "nested", vec![Val::F64s(x.clone())]);
        prop_assert!(same(native, f64_of(&out[0])), "{:?}: {} vs {:?}", x, native, out[0]);
    }
}

#[test]
fn loops_do_not_unroll_but_rust_loops_do() {
    // The trip count is a constant when traced, and still the IR has one body.
    fn sum_to<T: Real>(n: i64) -> T {
        for_range(0, T::Int::from(n), T::lit(0.0), |i, acc| {
            acc + T::from_int(i)
        })
    }
    let small = trace("s", || sum_to::<Var>(3)).unwrap();
    let large = trace("s", || sum_to::<Var>(3_000)).unwrap();
    assert_eq!(size(&small.module, "s"), size(&large.module, "s"));
    let (out, _) = run(&large, "s", vec![]);
    assert_eq!(out, [Val::F64(sum_to::<f64>(3_000))]);

    // A plain Rust loop runs at trace time: its body is recorded once per iteration.
    fn unrolled<T: Real>(x: T) -> T {
        let mut acc = x;
        for _ in 0..5 {
            acc *= x;
        }
        acc
    }
    let traced = trace("u", unrolled::<Var>).unwrap();
    let (blocks, insts, _) = size(&traced.module, "u");
    assert_eq!((blocks, insts), (1, 5));
}

#[test]
fn custom_derivative_declarations_are_in_the_module() {
    fn sq<T: Real>(x: T) -> T {
        x * x
    }
    fn sq_vjp<T: Real>(x: T, dy: T) -> T {
        dy * x * 2.0
    }
    fn smooth<T: Real>(x: T) -> T {
        x.abs()
    }
    fn smooth_ad<T: Real>(x: T) -> T {
        (x * x + 1e-6).sqrt()
    }
    fn seed<T: Real>(x: T) -> T {
        x.floor()
    }
    fn top<T: Real>(x: T) -> T {
        func("sq", sq::<T>).vjp("sq_vjp", sq_vjp::<T>).call((x,))
            + func("smooth", smooth::<T>)
                .overlay("smooth_ad", smooth_ad::<T>)
                .call((x,))
            + func("seed", seed::<T>).nodiff().call((x,))
            + func("native", sq::<T>)
                .vjp_native("native_vjp", |x, dy, dx| dx[0] = 2.0 * x[0] * dy[0])
                .call((x,))
    }
    let traced = trace("top", top::<Var>).unwrap();
    verify(&traced.module).unwrap();
    let m = &traced.module;
    let id = |n: &str| m.func_by_name(n).unwrap();
    assert_eq!(m.vjp_of(id("sq")), Some(id("sq_vjp")));
    assert_eq!(m.overlay_of(id("smooth")), Some(id("smooth_ad")));
    assert!(m.is_nodiff(id("seed")));
    assert_eq!(m.vjp_of(id("native")), Some(id("native_vjp")));
    let text = m.to_string();
    assert!(
        text.contains("extern @native_vjp(f64, f64) -> f64"),
        "{text}"
    );
    assert!(text.contains("vjp @sq = @sq_vjp"), "{text}");
    assert!(text.contains("overlay @smooth = @smooth_ad"), "{text}");
    assert!(text.contains("nodiff @seed"), "{text}");
    // The host function computes what the closure says.
    assert_eq!(traced.hosts.len(), 1);
    let host = traced
        .hosts
        .get("native_vjp")
        .expect("bound by its extern's name");
    assert_eq!(
        host(&mut [Val::F64(3.0), Val::F64(0.5)]).unwrap(),
        [Val::F64(3.0)]
    );
    // The module prints and parses back.
    let parsed = gradlift_ir::parse(&text).unwrap();
    assert_eq!(parsed.to_string(), text);
}

#[test]
fn one_tracer_holds_several_functions() {
    fn double<T: Real>(x: T) -> T {
        x * 2.0
    }
    let mut t = Tracer::new();
    let f = t.function("double", double::<Var>).unwrap();
    let g = t
        .function("g", |x: Var| func("double", double::<Var>).call((x,)) + 1.0)
        .unwrap();
    assert_ne!(f, g);
    let traced = t.finish().unwrap();
    let text = traced.module.to_string();
    assert_eq!(text.matches("func @").count(), 2, "{text}");
    assert!(text.contains("call @double"), "{text}");
    let (out, _) = run(&traced, "g", vec![Val::F64(4.0)]);
    assert_eq!(out, [Val::F64(9.0)]);
}

#[test]
fn integer_bit_operators_in_generic_code() {
    // Shifts and masks are part of `Int`, so generic bit tricks need no extra bounds.
    fn bits<T: Real>(x: T) -> T::Int {
        let b = x.to_bits();
        ((b >> 52) & 0x7FF) ^ (b << 1 >> 1 >> 60) | 1
    }
    let traced = trace("bits", bits::<Var>).unwrap();
    let (out, _) = run(&traced, "bits", vec![Val::F64(3.5)]);
    assert_eq!(out, [Val::I64(bits::<f64>(3.5))]);
}
