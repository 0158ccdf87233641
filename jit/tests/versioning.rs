//! Loop versioning (`version.rs`): an innermost counted loop whose indices are
//! affine in its counter is lowered twice, with a dispatch before it that enters
//! the copy without bounds checks only when every such index stays inside its
//! slice over the whole counter range. Tested here: the copy exists and has no
//! checks of those accesses, and at every argument (in bounds, out of bounds at
//! the first, a middle or the last iteration, negative or huge counters and
//! terms) the JIT computes what the interpreter computes, errors, their positions
//! and the final contents of written slices included.

mod support;

use gradlift_ir::interp::Val;
use gradlift_jit::{Workspace, compile};
use support::{Compared, compare, module};

const VERSIONED: &str = r#"
; x[2i + k] for i in 0..4: out of bounds for most k and lengths.
func @strided(%x: [f64], %k: i64) -> f64 {
entry:
    jump head
head:
    %i = phi i64 [entry: 0, body: %i1]
    %acc = phi f64 [entry: 0.0, body: %acc1]
    %more = icmp lt %i, 4
    br %more, body, exit
body:
    %two_i = imul %i, 2
    %at = iadd %two_i, %k
    %a = load %x[%at]
    %acc1 = fadd %acc, %a
    %i1 = iadd %i, 1
    jump head
exit:
    ret %acc
}

; x[i + k] += y[i] for i in 0..len y: writes before an error are kept.
func @window(%x: mut [f64], %y: [f64], %k: i64) {
entry:
    %n = len %y
    jump head
head:
    %i = phi i64 [entry: 0, body: %i1]
    %done = icmp ge %i, %n
    br %done, exit, body
body:
    %at = iadd %i, %k
    %a = load %x[%at]
    %b = load %y[%i]
    %c = fadd %a, %b
    store %x[%at], %c
    %i1 = iadd %i, 1
    jump head
exit:
    ret
}

; The pullback's form: r from k down to 1, reading x[r - 1] and x[r].
func @down(%x: [f64], %k: i64) -> f64 {
entry:
    jump head
head:
    %r = phi i64 [entry: %k, body: %d]
    %acc = phi f64 [entry: 0.0, body: %acc1]
    %stop = icmp eq %r, 0
    %d = iadd %r, -1
    br %stop, exit, body
body:
    %a = load %x[%d]
    %b = load %x[%r]
    %p = fmul %a, %b
    %acc1 = fadd %acc, %p
    jump head
exit:
    ret %acc
}

; Nested: the inner loop reads x[3 i + j] (j the outer counter), i in k..len/3.
func @columns(%x: [f64], %k: i64) -> f64 {
entry:
    %n = len %x
    %rows = idiv %n, 3
    jump j_head
j_head:
    %j = phi i64 [entry: 0, i_exit: %j1]
    %acc = phi f64 [entry: 0.0, i_exit: %s]
    %more_j = icmp lt %j, 3
    br %more_j, i_pre, exit
i_pre:
    jump i_head
i_head:
    %i = phi i64 [i_pre: %k, i_body: %i1]
    %s = phi f64 [i_pre: %acc, i_body: %s1]
    %more_i = icmp lt %i, %rows
    br %more_i, i_body, i_exit
i_body:
    %row = imul %i, 3
    %at = iadd %row, %j
    %a = load %x[%at]
    %s1 = fadd %s, %a
    %i1 = iadd %i, 1
    jump i_head
i_exit:
    %j1 = iadd %j, 1
    jump j_head
exit:
    ret %acc
}

; Huge terms: the index i + k 2^62 4 wraps to i in the IR's arithmetic; the
; dispatch refuses values this large and runs the checked loop.
func @huge(%x: [f64], %k: i64) -> f64 {
entry:
    %n = len %x
    %big = imul %k, 4611686018427387904
    jump head
head:
    %i = phi i64 [entry: 0, body: %i1]
    %acc = phi f64 [entry: 0.0, body: %acc1]
    %more = icmp lt %i, %n
    br %more, body, exit
body:
    %far = imul %big, 4
    %at = iadd %i, %far
    %a = load %x[%at]
    %acc1 = fadd %acc, %a
    %i1 = iadd %i, 1
    jump head
exit:
    ret %acc
}
"#;

/// How many `load`s and hot bounds checks `@name`'s Cranelift IR has.
fn loads_and_checks(m: &gradlift_ir::Module, name: &str) -> (usize, usize) {
    let clif = support::clif(m, name);
    let loads = clif.lines().filter(|l| l.contains("= load.f64")).count();
    (loads, support::hot_bounds_checks(&clif))
}

#[test]
fn affine_accesses_of_counted_loops_get_an_unchecked_copy() {
    let m = module(VERSIONED);
    // (IR loads in the loop, IR accesses that need a check): the copy doubles
    // the loads, and only the original's accesses are checked.
    for (f, loads, checks) in [
        ("strided", 1, 1),
        ("window", 2, 2),
        ("down", 2, 2),
        ("columns", 1, 1),
        ("huge", 1, 1),
    ] {
        let (l, c) = loads_and_checks(&m, f);
        assert_eq!(
            (l, c),
            (2 * loads, checks),
            "@{f}: loads and hot checks\n{}",
            support::clif(&m, f)
        );
    }
}

#[test]
fn versioned_loops_compute_what_the_interpreter_computes() {
    let m = module(VERSIONED);
    let c = compile(&m).unwrap();
    let mut ws = Workspace::new();
    let (mut values, mut errors) = (0, 0);
    let ks: Vec<i64> = (-3..=9).chain([i64::MIN, i64::MAX, 1 << 40]).collect();
    for (id, _) in m.defined() {
        let sig = m.sig(id).clone();
        for len in [0, 1, 2, 5, 6, 8, 9, 12] {
            for other in [0, 1, 3] {
                for &k in &ks {
                    let x: Vec<f64> = (0..len).map(|i| i as f64 + 0.5).collect();
                    let y: Vec<f64> = (0..other).map(|i| i as f64 * 2.0 + 0.25).collect();
                    let mut slices = [x, y].into_iter();
                    let args: Vec<Val> = sig
                        .params
                        .iter()
                        .map(|t| match t {
                            gradlift_ir::Type::I64 => Val::I64(k),
                            _ => Val::F64s(slices.next().unwrap()),
                        })
                        .collect();
                    match compare(&m, &c, &mut ws, id, &args) {
                        Compared::Values => values += 1,
                        Compared::Errors => errors += 1,
                        // A loop that counts down from a negative start runs out
                        // of fuel on the interpreter.
                        Compared::Skipped => {}
                    }
                }
            }
        }
    }
    assert!(
        values > 100 && errors > 100,
        "{values} values, {errors} errors"
    );
}
