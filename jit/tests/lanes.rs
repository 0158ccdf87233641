//! Pairs of lanes lowered as `f64x2` (`Function::lane_groups`, `lanes.rs`): with
//! the lanes a widening pass would record, the compiled code uses vector
//! operations and computes what the interpreter computes, bit for bit, errors
//! included (a pair's second load out of bounds while its first is in); with
//! hints that pair unrelated values at random, the JIT still computes what the
//! interpreter computes, because a hint is followed only where the pair is proved
//! to compute the same operation lane by lane.

mod support;

use gradlift_ir::interp::{ErrorKind, Val};
use gradlift_ir::{Module, Type, Value, ValueDef};
use gradlift_jit::{Workspace, compile};
use support::{Compared, compare, lanes_by_name, module};

/// Four lanes of a tangent, as a widened rule of width 4 has them: `%d.j` is
/// lane `j` of a tangent read at `x[4 i + j]`, scaled by the shared `%s`, added to
/// a lane parameter `%p.j`, summed in four accumulators, and written back in place.
const LANES: &str = include_str!("support/lanes.ir");

fn with_groups(mut m: Module, groups: Vec<Vec<Value>>) -> Module {
    let id = m.func_by_name("lanes").unwrap();
    m.function_mut(id).unwrap().lane_groups = groups;
    m
}

/// Compares `m`'s `@lanes` on both engines over slices of every length up to 13
/// (so that the last pair's second element, or first, is out of bounds) and
/// counts the outcomes.
fn compare_all(m: &Module) -> (usize, usize) {
    let c = compile(m).unwrap();
    let mut ws = Workspace::new();
    let id = m.func_by_name("lanes").unwrap();
    let (mut values, mut errors) = (0, 0);
    for len in 0..=13 {
        for n in [0, 1, 2, 3] {
            let x: Vec<f64> = (0..len).map(|i| 0.5 + i as f64 * 0.375).collect();
            let mut args = vec![Val::F64s(x)];
            args.extend([0.25, -0.0, 1e-300, 3.0].map(Val::F64));
            args.push(Val::I64(n));
            match compare(m, &c, &mut ws, id, &args) {
                Compared::Values => values += 1,
                Compared::Errors => errors += 1,
                Compared::Skipped => panic!("no fuel is needed"),
            }
        }
    }
    (values, errors)
}

fn clif(m: &Module) -> String {
    support::clif(m, "lanes")
}

#[test]
fn recorded_lanes_are_computed_two_at_a_time_bit_for_bit() {
    let plain = module(LANES);
    let groups = lanes_by_name(&plain, "lanes");
    assert_eq!(groups.len(), 7, "%p, %d, %m, %q, %r, %a and %a1");
    let m = with_groups(module(LANES), groups);
    let code = clif(&m);
    // Per iteration two vector loads, multiplies (and the scalar `%s`), adds of
    // `%p`, square roots, accumulator adds and stores (no `aligned` flag: the
    // vectors are aligned to their elements only), the accumulators as two
    // f64x2 parameters: half the scalar code's count of each.
    for (what, want) in [
        ("load.f64x2", 2),
        ("= fmul", 3),
        ("= sqrt", 2),
        ("= fadd", 4),
        ("store notrap v", 2),
    ] {
        let got = code.lines().filter(|l| l.contains(what)).count();
        assert_eq!(got, want, "{what} in\n{code}");
    }
    assert!(code.contains("(v0: i64, v1: f64x2, v2: f64x2)"), "{code}");
    assert_eq!(
        clif(&plain).matches("f64x2").count(),
        0,
        "no hint, no vector"
    );
    let (values, errors) = compare_all(&m);
    assert!(
        values > 10 && errors > 10,
        "{values} values, {errors} errors"
    );
    // The error of a pair's second load, its first in bounds: x[4 i + 1] with
    // len 5 at i = 1 (x[4] is in).
    let c = compile(&m).unwrap();
    let mut args = vec![Val::F64s(vec![1.0; 5])];
    args.extend([0.0; 4].map(Val::F64));
    args.push(Val::I64(2));
    let e = c
        .call_by_name(&mut Workspace::new(), "lanes", &mut args)
        .unwrap_err();
    assert_eq!(e.kind, ErrorKind::OutOfBounds { index: 5, len: 5 });
    assert_eq!(e.pos.line, 16, "{e}");
}

/// SplitMix64.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        ((z ^ (z >> 31)) % n as u64) as usize
    }
}

#[test]
fn random_hints_never_change_what_is_computed() {
    let plain = module(LANES);
    let f = plain
        .function(plain.func_by_name("lanes").unwrap())
        .unwrap();
    // Every f64 value but the constants.
    let floats: Vec<Value> = f
        .values
        .iter()
        .filter(|(_, d)| d.ty == Type::F64 && !matches!(d.def, ValueDef::Const(_)))
        .map(|(v, _)| v)
        .collect();
    let mut rng = Rng(7);
    let mut vectorised = 0;
    for _ in 0..150 {
        // Random groups of 2 to 5 values, some of them lanes of one value by
        // chance (the same name prefix), most not.
        let mut pool = floats.clone();
        for i in (1..pool.len()).rev() {
            pool.swap(i, rng.below(i + 1));
        }
        if rng.below(3) == 0 {
            pool.sort();
        }
        let mut groups = Vec::new();
        while pool.len() >= 2 {
            let k = 2 + rng.below(4).min(pool.len() - 2);
            groups.push(pool.drain(..k).collect());
        }
        let m = with_groups(module(LANES), groups);
        vectorised += usize::from(clif(&m).contains("f64x2"));
        compare_all(&m);
    }
    // Some random hints were right somewhere (sorted values are mostly lanes).
    assert!(vectorised > 0, "no random hint was followed");
}
