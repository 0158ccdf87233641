//! Helpers shared by the JIT's tests: running one call on both engines and comparing
//! everything (results bit for bit, final argument contents, errors), generic inputs
//! from a signature, and a thread with a big stack for deep recursion.

#![allow(dead_code)] // Each test crate uses its own subset.

use gradlift_ir::interp::{ErrorKind, Interpreter, Limits, Val};
use gradlift_ir::{FuncId, Module, Signature, Type, parse, verify};
use gradlift_jit::{Compiled, Hosts, Workspace};

/// The interpreter's limits in comparisons: the default depth, and enough fuel for
/// every input the tests mean to compare (a call that runs out is skipped, not
/// compared: it would loop for a very long time, or forever, on both engines).
pub const LIMITS: Limits = Limits {
    max_depth: 10_000,
    fuel: Some(20_000_000),
};

/// Parses and verifies `text`.
pub fn module(text: &str) -> Module {
    let m = parse(text).unwrap_or_else(|e| panic!("{e}"));
    verify(&m).unwrap_or_else(|e| panic!("{e}"));
    m
}

/// The lane groups of `@func` as a widening pass of width N would record them
/// (`Function::lane_groups`), read from the names: the values `%P.0`, `%P.1`,
/// ... of each prefix `P`, in lane order.
pub fn lanes_by_name(m: &Module, func: &str) -> Vec<Vec<gradlift_ir::Value>> {
    let f = m.function(m.func_by_name(func).unwrap()).unwrap();
    let mut by: std::collections::BTreeMap<String, Vec<(usize, gradlift_ir::Value)>> =
        std::collections::BTreeMap::new();
    for (v, d) in f.values.iter() {
        let Some(name) = d.name.as_deref() else {
            continue;
        };
        if let Some((p, j)) = name.rsplit_once('.')
            && let Ok(j) = j.parse::<usize>()
        {
            by.entry(p.to_string()).or_default().push((j, v));
        }
    }
    by.into_values()
        .map(|mut g| {
            g.sort();
            g.into_iter().map(|(_, v)| v).collect()
        })
        .collect()
}

/// The Cranelift IR the JIT makes of `@name` (`gradlift_jit::listing`).
pub fn clif(m: &Module, name: &str) -> String {
    let id = m.func_by_name(name).unwrap_or_else(|| panic!("no @{name}"));
    gradlift_jit::listing(m, &[id])
        .unwrap()
        .into_iter()
        .find(|l| l.name == name)
        .unwrap_or_else(|| panic!("no listing of @{name}"))
        .clif
}

/// The bounds checks (unsigned `icmp ... uge`) of `clif` outside cold blocks:
/// what the hot path compares (a cold path may repeat checks one by one).
pub fn hot_bounds_checks(clif: &str) -> usize {
    let mut hot = true;
    let mut n = 0;
    for line in clif.lines() {
        if line.starts_with("block") {
            hot = !line.ends_with(" cold:");
        }
        n += usize::from(hot && line.contains("icmp") && line.contains(" uge "));
    }
    n
}

/// The file `examples/ir/NAME`, parsed and verified.
pub fn example(name: &str) -> Module {
    let path = format!("{}/../examples/ir/{name}", env!("CARGO_MANIFEST_DIR"));
    module(&std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}")))
}

/// Whether two values are the same, floats compared bit for bit (so NaN is NaN and
/// `-0.0` is not `0.0`).
pub fn same(a: &Val, b: &Val) -> bool {
    fn f64s(a: &[f64], b: &[f64]) -> bool {
        a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits())
    }
    fn f32s(a: &[f32], b: &[f32]) -> bool {
        a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits())
    }
    match (a, b) {
        (Val::F64(x), Val::F64(y)) => x.to_bits() == y.to_bits(),
        (Val::F32(x), Val::F32(y)) => x.to_bits() == y.to_bits(),
        (Val::F64s(x), Val::F64s(y)) => f64s(x, y),
        (Val::F32s(x), Val::F32s(y)) => f32s(x, y),
        (x, y) => x == y,
    }
}

/// Whether two value lists are the same (see [`same`]).
pub fn same_all(a: &[Val], b: &[Val]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| same(x, y))
}

/// A short rendering of values for failure messages (a NaN with its bits).
pub fn show(args: &[Val]) -> String {
    let nan = |x: f64| format!("NaN({:#x})", x.to_bits());
    let one = |v: &Val| match v {
        Val::F64(x) if x.is_nan() => nan(*x),
        Val::F32(x) if x.is_nan() => nan(f64::from(*x)),
        Val::F64s(xs) if xs.iter().any(|x| x.is_nan()) => {
            let items: Vec<String> = xs
                .iter()
                .map(|&x| if x.is_nan() { nan(x) } else { format!("{x:?}") })
                .collect();
            format!("F64s([{}])", items.join(", "))
        }
        v => format!("{v:?}"),
    };
    let items: Vec<String> = args.iter().map(one).collect();
    let mut s = format!("[{}]", items.join(", "));
    if s.len() > 400 {
        s.truncate(400);
        s.push_str("...");
    }
    s
}

/// What comparing one call did.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub enum Compared {
    /// Both returned, with the same results and final arguments.
    Values,
    /// Both failed, with the same error and final arguments.
    Errors,
    /// The interpreter ran out of fuel: not compared.
    Skipped,
}

/// Calls `id` on the interpreter and on `compiled` with the same `args`, and
/// asserts the same outcome: results bit for bit, the final contents of every
/// argument, or the same error (function, op, position and kind).
#[track_caller]
pub fn compare(
    m: &Module,
    compiled: &Compiled,
    ws: &mut Workspace,
    id: FuncId,
    args: &[Val],
) -> Compared {
    compare_hosted(m, compiled, ws, id, args, &Hosts::new())
}

/// [`compare`], with `hosts` bound on the interpreter (`compiled` was compiled with
/// them).
#[track_caller]
pub fn compare_hosted(
    m: &Module,
    compiled: &Compiled,
    ws: &mut Workspace,
    id: FuncId,
    args: &[Val],
    hosts: &Hosts,
) -> Compared {
    let name = m.name(id);
    let mut ia = args.to_vec();
    let mut ja = args.to_vec();
    let mut interp = Interpreter::new(m).with_limits(LIMITS).with_hosts(hosts);
    let ir = interp.call(id, &mut ia);
    if let Err(e) = &ir
        && matches!(e.kind, ErrorKind::OutOfFuel(_))
    {
        return Compared::Skipped;
    }
    let jr = compiled.call(ws, id, &mut ja);
    let out = match (ir, jr) {
        (Ok(a), Ok(b)) => {
            assert!(
                same_all(&a, &b),
                "@{name} at {}: interpreter {}, JIT {}",
                show(args),
                show(&a),
                show(&b)
            );
            Compared::Values
        }
        (Err(ie), Err(je)) => {
            assert_eq!(
                (je.func.as_str(), je.op.as_str(), je.pos, &je.kind),
                (ie.func.as_str(), ie.op.as_str(), ie.pos, &ie.kind),
                "@{name} at {}: interpreter `{ie}`, JIT `{je}`",
                show(args)
            );
            assert_eq!(je.to_string(), ie.to_string());
            Compared::Errors
        }
        (a, b) => panic!("@{name} at {}: interpreter {a:?}, JIT {b:?}", show(args)),
    };
    assert!(
        same_all(&ia, &ja),
        "@{name} at {}: final arguments differ: interpreter {}, JIT {}",
        show(args),
        show(&ia),
        show(&ja)
    );
    out
}

/// A slice of `n` distinct values in (-1.3, 1.3) plus a drift.
pub fn wave(n: usize, phase: f64) -> Vec<f64> {
    (0..n)
        .map(|k| 1.25 * (0.9 * k as f64 + phase).sin() + 0.03 * k as f64)
        .collect()
}

/// A NaN with the sign bit set and a payload: engines that pass NaNs through
/// differently give different bits.
const ODD_NAN: f64 = f64::from_bits(0xfff8_0000_0000_0005);

const F64S: [f64; 13] = [
    ODD_NAN,
    0.37,
    -1.3,
    2.5,
    0.0,
    -0.0,
    1e-3,
    40.0,
    f64::NAN,
    f64::INFINITY,
    f64::NEG_INFINITY,
    -7.75,
    1e300,
];
/// `i64::MIN` three places before `-1`, so that some point divides one by the other.
const I64S: [i64; 11] = [3, 0, 1, i64::MIN, 7, 12, -1, 64, 5, -2, i64::MAX];
const LENS: [usize; 7] = [5, 0, 1, 3, 17, 8, 2];
/// Floats that exercise the edges of fmin/fmax, comparisons and casts.
const SPECIAL: [f64; 8] = [
    f64::NAN,
    ODD_NAN,
    -0.0,
    0.0,
    f64::INFINITY,
    -1.5,
    f64::NEG_INFINITY,
    3.0e9,
];

/// `count` argument lists for `sig`, deterministic: parameter `k` of point `j` takes
/// entry `j + 3k` of a list of its type's values (floats with zeros of both signs,
/// NaN and infinities; small integers; slices of a few lengths, some holding special
/// floats).
pub fn generic_points(sig: &Signature, count: usize) -> Vec<Vec<Val>> {
    (0..count)
        .map(|j| {
            sig.params
                .iter()
                .enumerate()
                .map(|(k, &t)| {
                    let at = j + 3 * k;
                    let len = LENS[at % LENS.len()];
                    let floats = || -> Vec<f64> {
                        let mut v = wave(len, 0.1 * at as f64);
                        if j % 3 == 2 {
                            for (i, x) in v.iter_mut().enumerate() {
                                if i % 2 == 0 {
                                    *x = SPECIAL[(i / 2 + j) % SPECIAL.len()];
                                }
                            }
                        }
                        v
                    };
                    match t {
                        Type::F64 => Val::F64(F64S[at % F64S.len()]),
                        Type::F32 => Val::F32(F64S[at % F64S.len()] as f32),
                        Type::I64 => Val::I64(I64S[at % I64S.len()]),
                        Type::Bool => Val::Bool(at % 2 == 1),
                        Type::Slice { elem, .. } => match elem {
                            gradlift_ir::Elem::F64 => Val::F64s(floats()),
                            gradlift_ir::Elem::F32 => {
                                Val::F32s(floats().into_iter().map(|x| x as f32).collect())
                            }
                            gradlift_ir::Elem::I64 => {
                                Val::I64s((0..len).map(|i| ((i * 7 + at) % 5) as i64).collect())
                            }
                        },
                    }
                })
                .collect()
        })
        .collect()
}

/// Runs `f` on a thread with a 256 MiB stack (compiled recursion 10,000 calls deep
/// fits with room to spare), and propagates its panic.
pub fn big_stack<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::Builder::new()
        .stack_size(256 << 20)
        .spawn(f)
        .unwrap()
        .join()
        .unwrap_or_else(|e| std::panic::resume_unwind(e))
}
