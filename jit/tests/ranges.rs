//! Bounds checks left out where the index is proved inside its slice (`ranges.rs`):
//! counted loops guarded by `icmp lt %i, len - k` lose their checks; every near
//! miss (a guard on another slice, `le`, an index starting below 0 or going down,
//! an offset past the guard's margin, a block reached around the guard) keeps
//! them, and on every one the JIT computes what the interpreter computes, errors
//! included.

mod support;

use gradlift_ir::interp::Val;
use gradlift_jit::{Workspace, compile};
use support::{Compared, compare, module};

/// Loops that index `%x` inside what their guards prove.
const PROVED: &str = r#"
func @sum_pairs(%x: [f64]) -> f64 {
entry:
    %n = len %x
    %m = isub %n, 1
    jump head
head:
    %i = phi i64 [entry: 0, body: %i1]
    %acc = phi f64 [entry: 0.0, body: %acc1]
    %more = icmp lt %i, %m
    br %more, body, exit
body:
    %a = load %x[%i]
    %i1 = iadd %i, 1
    %b = load %x[%i1]
    %p = fmul %a, %b
    %acc1 = fadd %acc, %p
    jump head
exit:
    ret %acc
}

func @scale(%x: mut [f64], %s: f64) {
entry:
    %n = len %x
    jump head
head:
    %i = phi i64 [entry: 0, body: %i1]
    %done = icmp ge %i, %n
    br %done, exit, body
body:
    %a = load %x[%i]
    %b = fmul %a, %s
    store %x[%i], %b
    %i1 = iadd %i, 1
    jump head
exit:
    ret
}
"#;

/// Near misses: each keeps a check that can fail.
const KEPT: &str = r#"
func @other_slice(%x: [f64], %y: [f64]) -> f64 {
entry:
    %n = len %y
    jump head
head:
    %i = phi i64 [entry: 0, body: %i1]
    %acc = phi f64 [entry: 0.0, body: %acc1]
    %more = icmp lt %i, %n
    br %more, body, exit
body:
    %a = load %x[%i]
    %acc1 = fadd %acc, %a
    %i1 = iadd %i, 1
    jump head
exit:
    ret %acc
}

func @le_guard(%x: [f64]) -> f64 {
entry:
    %n = len %x
    jump head
head:
    %i = phi i64 [entry: 0, body: %i1]
    %acc = phi f64 [entry: 0.0, body: %acc1]
    %more = icmp le %i, %n
    br %more, body, exit
body:
    %a = load %x[%i]
    %acc1 = fadd %acc, %a
    %i1 = iadd %i, 1
    jump head
exit:
    ret %acc
}

func @from_minus_one(%x: [f64]) -> f64 {
entry:
    %n = len %x
    jump head
head:
    %i = phi i64 [entry: -1, body: %i1]
    %acc = phi f64 [entry: 0.0, body: %acc1]
    %more = icmp lt %i, %n
    br %more, body, exit
body:
    %a = load %x[%i]
    %acc1 = fadd %acc, %a
    %i1 = iadd %i, 1
    jump head
exit:
    ret %acc
}

func @going_down(%x: [f64], %k: i64) -> f64 {
entry:
    %n = len %x
    jump head
head:
    %i = phi i64 [entry: %k, body: %i1]
    %acc = phi f64 [entry: 0.0, body: %acc1]
    %more = icmp lt %i, %n
    br %more, body, exit
body:
    %a = load %x[%i]
    %acc1 = fadd %acc, %a
    %i1 = iadd %i, -1
    %stop = icmp lt %i1, -2
    br %stop, exit, head
exit:
    %r = phi f64 [head: %acc, body: %acc1]
    ret %r
}

func @past_margin(%x: [f64]) -> f64 {
entry:
    %n = len %x
    %m = isub %n, 1
    jump head
head:
    %i = phi i64 [entry: 0, body: %i1]
    %acc = phi f64 [entry: 0.0, body: %acc1]
    %more = icmp lt %i, %m
    br %more, body, exit
body:
    %i2 = iadd %i, 2
    %a = load %x[%i2]
    %acc1 = fadd %acc, %a
    %i1 = iadd %i, 1
    jump head
exit:
    ret %acc
}

func @around_the_guard(%x: [f64], %i: i64, %c: bool) -> f64 {
entry:
    %n = len %x
    br %c, check, join
check:
    %in = icmp lt %i, %n
    br %in, join, out
join:
    %a = load %x[%i]
    ret %a
out:
    ret 0.0
}
"#;

/// Two slices said to have one length by a `trap_if` in the entry (as a fused
/// gradient says of a slice and its shadow): the guard on one covers the other.
/// `@not_said` traps on something else, `@said_late` only after the loop:
/// both keep the other slice's check.
const SAME_LENGTH: &str = r#"
func @said(%x: [f64], %y: [f64]) -> f64 {
entry:
    %nx = len %x
    %ny = len %y
    %bad = icmp ne %nx, %ny
    trap_if %bad, "y is not as long as x"
    jump head
head:
    %i = phi i64 [entry: 0, body: %i1]
    %acc = phi f64 [entry: 0.0, body: %acc1]
    %more = icmp lt %i, %nx
    br %more, body, exit
body:
    %a = load %x[%i]
    %b = load %y[%i]
    %p = fmul %a, %b
    %acc1 = fadd %acc, %p
    %i1 = iadd %i, 1
    jump head
exit:
    ret %acc
}

func @not_said(%x: [f64], %y: [f64]) -> f64 {
entry:
    %nx = len %x
    %ny = len %y
    %bad = icmp lt %nx, %ny
    trap_if %bad, "y is longer than x"
    jump head
head:
    %i = phi i64 [entry: 0, body: %i1]
    %acc = phi f64 [entry: 0.0, body: %acc1]
    %more = icmp lt %i, %nx
    br %more, body, exit
body:
    %b = load %y[%i]
    %acc1 = fadd %acc, %b
    %i1 = iadd %i, 1
    jump head
exit:
    ret %acc
}

func @said_late(%x: [f64], %y: [f64]) -> f64 {
entry:
    %nx = len %x
    jump head
head:
    %i = phi i64 [entry: 0, body: %i1]
    %acc = phi f64 [entry: 0.0, body: %acc1]
    %more = icmp lt %i, %nx
    br %more, body, exit
body:
    %b = load %y[%i]
    %acc1 = fadd %acc, %b
    %i1 = iadd %i, 1
    jump head
exit:
    %ny = len %y
    %bad = icmp ne %nx, %ny
    trap_if %bad, "y is not as long as x"
    ret %acc
}
"#;

/// The bounds checks on `@name`'s hot path.
fn hot_checks(m: &gradlift_ir::Module, name: &str) -> usize {
    support::hot_bounds_checks(&support::clif(m, name))
}

/// Compares every function of `m` on both engines at slices of 0 to 5 elements
/// (and a second slice of 0 to 5, indices -2 to 6, both booleans).
fn compare_all(m: &gradlift_ir::Module) -> (usize, usize) {
    let c = compile(m).unwrap();
    let mut ws = Workspace::new();
    let (mut values, mut errors) = (0, 0);
    for (id, _) in m.defined() {
        let sig = m.sig(id).clone();
        for len in 0..=5 {
            for other in [0, 2, 5] {
                for k in -2..=6 {
                    for flag in [false, true] {
                        let x: Vec<f64> = (0..len).map(|i| i as f64 + 0.5).collect();
                        let y: Vec<f64> = (0..other).map(|i| i as f64 * 2.0).collect();
                        let mut slices = [x, y].into_iter();
                        let args: Vec<Val> = sig
                            .params
                            .iter()
                            .map(|t| match t {
                                gradlift_ir::Type::F64 => Val::F64(1.5),
                                gradlift_ir::Type::I64 => Val::I64(k),
                                gradlift_ir::Type::Bool => Val::Bool(flag),
                                _ => Val::F64s(slices.next().unwrap()),
                            })
                            .collect();
                        match compare(m, &c, &mut ws, id, &args) {
                            Compared::Values => values += 1,
                            Compared::Errors => errors += 1,
                            Compared::Skipped => panic!("no fuel is needed"),
                        }
                    }
                }
            }
        }
    }
    (values, errors)
}

#[test]
fn counted_loops_need_no_bounds_checks() {
    let m = module(PROVED);
    assert_eq!(hot_checks(&m, "sum_pairs"), 0);
    assert_eq!(hot_checks(&m, "scale"), 0);
    let (values, errors) = compare_all(&m);
    assert!(
        values > 0 && errors == 0,
        "{values} values, {errors} errors"
    );
}

#[test]
fn near_misses_keep_their_checks_and_fail_as_the_interpreter() {
    let m = module(KEPT);
    for f in [
        "other_slice",
        "le_guard",
        "from_minus_one",
        "going_down",
        "past_margin",
        "around_the_guard",
    ] {
        assert!(hot_checks(&m, f) >= 1, "@{f} lost its check");
    }
    let (values, errors) = compare_all(&m);
    assert!(
        values > 100 && errors > 100,
        "{values} values, {errors} errors"
    );
}

#[test]
fn a_length_said_equal_by_trap_if_carries_the_guard_to_the_other_slice() {
    let m = module(SAME_LENGTH);
    assert_eq!(hot_checks(&m, "said"), 0);
    assert!(hot_checks(&m, "not_said") >= 1, "@not_said lost its check");
    assert!(
        hot_checks(&m, "said_late") >= 1,
        "@said_late lost its check"
    );
    let (values, errors) = compare_all(&m);
    assert!(values > 0 && errors > 0, "{values} values, {errors} errors");
}

/// Loops rotated (`rotations` in `lower.rs`): the latch of a loop whose header
/// only tests ends in a copy of the test (`brif` back into the body or out), and
/// the bounds checks the header's guard removed stay removed; a header that does
/// more (here a `load`) is left as it is. Both compute what the interpreter does.
#[test]
fn a_loop_whose_header_only_tests_is_rotated() {
    let m = module(PROVED);
    let clif = support::clif(&m, "sum_pairs");
    // The body ends in a branch (the copied test), not in a jump to the header.
    let body_ends: Vec<&str> = clif
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with("brif ") || l.starts_with("jump "))
        .collect();
    assert_eq!(
        body_ends.iter().filter(|l| l.starts_with("brif ")).count(),
        2,
        "the header's test and its copy:\n{clif}"
    );
    assert_eq!(hot_checks(&m, "sum_pairs"), 0);
    let (values, errors) = compare_all(&m);
    assert!(
        values > 0 && errors == 0,
        "{values} values, {errors} errors"
    );

    let m = module(
        r#"
func @loads_in_header(%x: [f64]) -> f64 {
entry:
    %n = len %x
    jump head
head:
    %i = phi i64 [entry: 0, body: %i1]
    %acc = phi f64 [entry: 0.0, body: %acc1]
    %more = icmp lt %i, %n
    br %more, body, exit
body:
    %a = load %x[%i]
    %acc1 = fadd %acc, %a
    %i1 = iadd %i, 1
    jump head
exit:
    %first = load %x[0]
    %r = fadd %acc, %first
    ret %r
}

func @test_reads_memory(%x: [f64]) -> f64 {
entry:
    jump head
head:
    %i = phi i64 [entry: 0, body: %i1]
    %acc = phi f64 [entry: 0.0, body: %acc1]
    %v = load %x[%i]
    %more = fcmp gt %v, 0.0
    br %more, body, exit
body:
    %acc1 = fadd %acc, %v
    %i1 = iadd %i, 1
    jump head
exit:
    ret %acc
}
"#,
    );
    // Not rotated: the latch still jumps back to the header, whose parameters
    // are the loop's phis (`block1(v0: i64, v1: f64)`), with the next values.
    let kept = support::clif(&m, "test_reads_memory");
    assert_eq!(
        kept.lines()
            .filter(|l| l.trim().starts_with("jump block1("))
            .count(),
        2,
        "the entry's jump and the latch's:\n{kept}"
    );
    let (values, errors) = compare_all(&m);
    assert!(values > 0 && errors > 0, "{values} values, {errors} errors");
}
