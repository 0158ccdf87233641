//! Host functions that borrow their arguments (`Hosts::bind_args`): both engines
//! lend the buffers themselves (argument buffers, `alloc`s, tape buffers), writes
//! into `mut` slices land in place, overlapping arguments get the documented copies,
//! and failures read the same on both engines.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use gradlift_ir::engine::{Arg, Val};
use gradlift_ir::interp::Interpreter;
use gradlift_ir::{FuncId, Module};
use gradlift_jit::{Compiled, Hosts, Workspace, compile_with};
use support::{module, same_all};

const PROGRAM: &str = "
extern @gemv(mut [f64], [f64], [f64], i64)
extern @fill(mut [f64], f64)
extern @total([f64]) -> f64

; y = A x for a row-major A of `rows` rows; returns y[0] + y[rows - 1].
func @apply(%a: [f64], %x: [f64], %y: mut [f64], %rows: i64) -> f64 {
entry:
    call @gemv(%y, %a, %x, %rows)
    %y0 = load %y[0]
    %last = isub %rows, 1
    %yl = load %y[%last]
    %r = fadd %y0, %yl
    ret %r
}

; A local buffer: filled by the host, summed by the host, read back here.
func @local(%c: f64) -> f64 {
entry:
    %b = alloc f64, 3
    call @fill(%b, %c)
    %s = call @total(%b)
    %b2 = load %b[2]
    %r = fadd %s, %b2
    ret %r
}

; A tape buffer: the same through tape_alloc and tape_view.
func @taped(%c: f64) -> f64 {
entry:
    %h = tape_alloc f64, 4
    %v = tape_view f64, %h
    call @fill(%v, %c)
    %w = tape_view f64, %h
    %s = call @total(%w)
    %w3 = load %w[3]
    %r = fmul %s, %w3
    ret %r
}
";

/// The host functions of [`PROGRAM`], borrowing their arguments; `seen` gets the
/// address of the last `mut` slice `gemv` and `fill` were lent.
fn hosts(seen: &Arc<AtomicUsize>) -> Hosts {
    let (s1, s2) = (Arc::clone(seen), Arc::clone(seen));
    Hosts::new()
        .bind_args("gemv", move |a: &mut [Arg<'_>]| {
            let [Arg::F64sMut(y), Arg::F64s(m), Arg::F64s(x), Arg::I64(rows)] = a else {
                return Err("gemv: bad arguments".into());
            };
            s1.store(y.as_ptr() as usize, Ordering::SeqCst);
            let (rows, cols) = (*rows as usize, x.len());
            if y.len() != rows || m.len() != rows * cols {
                return Err("gemv: bad shapes".into());
            }
            for (yi, row) in y.iter_mut().zip(m.chunks_exact(cols)) {
                *yi = row.iter().zip(x.iter()).map(|(a, b)| a * b).sum();
            }
            Ok(Vec::new())
        })
        .bind_args("fill", move |a: &mut [Arg<'_>]| {
            let [Arg::F64sMut(y), Arg::F64(c)] = a else {
                return Err("fill: bad arguments".into());
            };
            s2.store(y.as_ptr() as usize, Ordering::SeqCst);
            for (k, e) in y.iter_mut().enumerate() {
                *e = *c + k as f64;
            }
            Ok(Vec::new())
        })
        .bind_args("total", |a: &mut [Arg<'_>]| match a {
            [Arg::F64s(x)] => Ok(vec![Val::F64(x.iter().sum())]),
            _ => Err("total: bad arguments".into()),
        })
}

fn compiled(m: &Module, hosts: &Hosts) -> Compiled {
    let roots: Vec<FuncId> = m.defined().map(|(id, _)| id).collect();
    compile_with(m, &roots, hosts).unwrap_or_else(|e| panic!("{e}"))
}

/// Calls `name` on both engines with copies of `args`; asserts that both return
/// the same (results bit for bit, final arguments, or the same error text) and
/// returns the interpreter's outcome and final arguments.
fn both(
    m: &Module,
    hosts: &Hosts,
    name: &str,
    args: &[Val],
) -> (Result<Vec<Val>, String>, Vec<Val>) {
    let id = m.func_by_name(name).unwrap();
    let c = compiled(m, hosts);
    let mut ws = Workspace::new();
    let mut interp = Interpreter::new(m).with_hosts(hosts);
    let (mut ia, mut ja) = (args.to_vec(), args.to_vec());
    let ir = interp.call(id, &mut ia).map_err(|e| e.to_string());
    let jr = c.call(&mut ws, id, &mut ja).map_err(|e| e.to_string());
    match (&ir, &jr) {
        (Ok(a), Ok(b)) => assert!(same_all(a, b), "@{name}: {a:?} vs {b:?}"),
        (Err(a), Err(b)) => assert_eq!(a, b, "@{name}"),
        _ => panic!("@{name}: interpreter {ir:?}, JIT {jr:?}"),
    }
    assert!(same_all(&ia, &ja), "@{name}: {ia:?} vs {ja:?}");
    (ir, ia)
}

#[test]
fn a_borrowed_gemv_writes_into_the_callers_buffer_on_both_engines() {
    let m = module(PROGRAM);
    let seen = Arc::new(AtomicUsize::new(0));
    let h = hosts(&seen);
    assert!(h.get("gemv").is_none() && h.get_args("gemv").is_some());
    let (rows, cols) = (3, 4);
    let a: Vec<f64> = (0..rows * cols).map(|k| 0.5 + k as f64 * 0.25).collect();
    let x = vec![1.0, -2.0, 0.125, 3.0];
    let args = [
        Val::F64s(a.clone()),
        Val::F64s(x.clone()),
        Val::F64s(vec![f64::NAN; rows]),
        Val::I64(rows as i64),
    ];
    let (r, fin) = both(&m, &h, "apply", &args);
    let want: Vec<f64> = a
        .chunks_exact(cols)
        .map(|row| row.iter().zip(&x).map(|(a, b)| a * b).sum())
        .collect();
    assert_eq!(fin[2], Val::F64s(want.clone()));
    assert_eq!(r.unwrap(), [Val::F64(want[0] + want[rows - 1])]);
    // The read-only arguments are untouched.
    assert_eq!((&fin[0], &fin[1]), (&args[0], &args[1]));
}

#[test]
fn the_host_is_lent_the_engines_own_buffer() {
    let m = module(PROGRAM);
    let seen = Arc::new(AtomicUsize::new(0));
    let h = hosts(&seen);
    let id = m.func_by_name("apply").unwrap();
    let a = [1.0, 2.0, 3.0, 4.0];
    let x = [1.0, 1.0];
    // The JIT, on borrowed arguments: the host gets the caller's `y` itself.
    let c = compiled(&m, &h);
    let mut ws = Workspace::new();
    let mut y = [0.0; 2];
    let mut out = Vec::new();
    let mut args = [
        Arg::F64s(&a),
        Arg::F64s(&x),
        Arg::F64sMut(&mut y),
        Arg::I64(2),
    ];
    c.call_args(&mut ws, id, &mut args, &mut out).unwrap();
    assert_eq!(seen.load(Ordering::SeqCst), y.as_ptr() as usize);
    assert_eq!((out, y), (vec![Val::F64(3.0 + 7.0)], [3.0, 7.0]));
    // The interpreter runs on the argument's vector (moved in, not copied): the
    // host gets its memory.
    let yv = vec![0.0; 2];
    let p = yv.as_ptr() as usize;
    let mut vals = [
        Val::F64s(a.to_vec()),
        Val::F64s(x.to_vec()),
        Val::F64s(yv),
        Val::I64(2),
    ];
    let out = Interpreter::new(&m)
        .with_hosts(&h)
        .call(id, &mut vals)
        .unwrap();
    assert_eq!(seen.load(Ordering::SeqCst), p);
    assert_eq!(out, [Val::F64(10.0)]);
    assert_eq!(vals[2], Val::F64s(vec![3.0, 7.0]));
}

#[test]
fn alloc_and_tape_buffers_are_lent_and_read_back() {
    let m = module(PROGRAM);
    let seen = Arc::new(AtomicUsize::new(0));
    let h = hosts(&seen);
    // fill: c, c + 1, c + 2; the sum plus the last element.
    let (r, _) = both(&m, &h, "local", &[Val::F64(1.5)]);
    assert_eq!(r.unwrap(), [Val::F64(1.5 * 3.0 + 3.0 + 3.5)]);
    // fill: c .. c + 3 through one view, the sum times the last through another.
    let (r, _) = both(&m, &h, "taped", &[Val::F64(0.5)]);
    assert_eq!(r.unwrap(), [Val::F64((0.5 * 4.0 + 6.0) * 3.5)]);
}

const ALIASED: &str = "
extern @mut_ro(mut [f64], [f64])
extern @ro_mut([f64], mut [f64])
extern @mut_mut(mut [f64], mut [f64])
extern @ro_ro([f64], [f64]) -> i64

func @mr(%s: mut [f64]) {
entry:
    call @mut_ro(%s, %s)
    ret
}

func @rm(%s: mut [f64]) {
entry:
    call @ro_mut(%s, %s)
    ret
}

func @mm(%s: mut [f64]) {
entry:
    call @mut_mut(%s, %s)
    ret
}

; Two views of one tape buffer, both `mut`; the buffer is copied out at the end.
func @mm_tape(%s: mut [f64]) {
entry:
    %h = tape_alloc f64, 3
    %v = tape_view f64, %h
    %w = tape_view f64, %h
    %x0 = load %s[0]
    store %v[0], %x0
    %x1 = load %s[1]
    store %v[1], %x1
    %x2 = load %s[2]
    store %v[2], %x2
    call @mut_mut(%v, %w)
    %y0 = load %v[0]
    store %s[0], %y0
    %y1 = load %v[1]
    store %s[1], %y1
    %y2 = load %v[2]
    store %s[2], %y2
    ret
}

func @rr(%s: [f64]) -> i64 {
entry:
    %k = call @ro_ro(%s, %s)
    ret %k
}
";

/// Each host writes 100 into `a[0]` (if `a` is writable), then copies what it sees
/// of the other argument's `[0]` into `a[1]` or `b[1]`, and `b` writes 200 into
/// `b[2]`: what each argument sees of the other's writes shows whether it is
/// the same memory or a copy.
fn aliased_hosts() -> Hosts {
    Hosts::new()
        .bind_args("mut_ro", |a: &mut [Arg<'_>]| {
            let [Arg::F64sMut(a), Arg::F64s(b)] = a else {
                return Err("bad arguments".into());
            };
            a[0] = 100.0;
            a[1] = b[0];
            Ok(Vec::new())
        })
        .bind_args("ro_mut", |a: &mut [Arg<'_>]| {
            let [Arg::F64s(a), Arg::F64sMut(b)] = a else {
                return Err("bad arguments".into());
            };
            b[0] = 100.0;
            b[1] = a[0];
            Ok(Vec::new())
        })
        .bind_args("mut_mut", |a: &mut [Arg<'_>]| {
            let [Arg::F64sMut(a), Arg::F64sMut(b)] = a else {
                return Err("bad arguments".into());
            };
            a[0] = 100.0;
            a[1] = b[0];
            b[2] = 200.0;
            Ok(Vec::new())
        })
        .bind_args("ro_ro", |a: &mut [Arg<'_>]| match a {
            [Arg::F64s(a), Arg::F64s(b)] => Ok(vec![Val::I64(i64::from(a.as_ptr() == b.as_ptr()))]),
            _ => Err("bad arguments".into()),
        })
}

#[test]
fn aliased_arguments_get_the_documented_copies_on_both_engines() {
    let m = module(ALIASED);
    let h = aliased_hosts();
    let s = || vec![Val::F64s(vec![1.0, 2.0, 3.0])];
    // `mut` first: it is the buffer; the read-only second is a copy from before
    // the call, so it does not see a[0] = 100.
    let (_, fin) = both(&m, &h, "mr", &s());
    assert_eq!(fin, [Val::F64s(vec![100.0, 1.0, 3.0])]);
    // Read-only first: the buffer, untouched during the call (b[1] = 1 = a[0]);
    // the `mut` copy is written back after the call.
    let (_, fin) = both(&m, &h, "rm", &s());
    assert_eq!(fin, [Val::F64s(vec![100.0, 1.0, 3.0])]);
    // Two `mut`: the first is the buffer, the second a copy from before the call
    // (a[1] = b[0] = 1); the copy [1, 2, 200] is written back last and wins over
    // the direct writes.
    let (_, fin) = both(&m, &h, "mm", &s());
    assert_eq!(fin, [Val::F64s(vec![1.0, 2.0, 200.0])]);
    // The same through two views of one tape buffer.
    let (_, fin) = both(&m, &h, "mm_tape", &s());
    assert_eq!(fin, [Val::F64s(vec![1.0, 2.0, 200.0])]);
    // Two read-only slices share the buffer: no copy, one address.
    let (r, _) = both(&m, &h, "rr", &s());
    assert_eq!(r.unwrap(), [Val::I64(1)]);
}

const FAILING: &str = "
extern @g(mut [f64], f64) -> f64

func @f(%y: mut [f64], %c: f64) -> f64 {
entry:
    %r = call @g(%y, %c)
    ret %r
}
";

/// `g` writes c into y[0], then: c = 1 says no, c = 2 panics, c = 3 returns an
/// i64, c = 4 two values, c = 5 nothing; else returns y[0] + y[1].
fn failing_hosts() -> Hosts {
    Hosts::new().bind_args("g", |a: &mut [Arg<'_>]| {
        let [Arg::F64sMut(y), Arg::F64(c)] = a else {
            return Err("bad arguments".into());
        };
        y[0] = *c;
        match *c as i64 {
            1 => Err("the host says no".into()),
            2 => panic!("the host gave up at {}", y[1]),
            3 => Ok(vec![Val::I64(3)]),
            4 => Ok(vec![Val::F64(1.0), Val::F64(2.0)]),
            5 => Ok(Vec::new()),
            _ => Ok(vec![Val::F64(y[0] + y[1])]),
        }
    })
}

#[test]
fn failures_of_a_borrowed_host_read_the_same_on_both_engines() {
    let m = module(FAILING);
    let h = failing_hosts();
    let run = |c: f64| both(&m, &h, "f", &[Val::F64s(vec![0.0, 0.5]), Val::F64(c)]);
    let (r, fin) = run(7.0);
    assert_eq!(r.unwrap(), [Val::F64(7.5)]);
    assert_eq!(fin[0], Val::F64s(vec![7.0, 0.5]));
    let cases = [
        (1.0, "the host says no"),
        (2.0, "it panicked: the host gave up at 0.5"),
        (3.0, "result 1 must be f64, found i64"),
        (4.0, "it returned 2 values for 1 results"),
        (5.0, "it returned 0 values for 1 results"),
    ];
    for (c, message) in cases {
        let (r, fin) = run(c);
        assert_eq!(
            r.unwrap_err(),
            format!("in @f, call at 6:5: extern function @g failed: {message}"),
            "c = {c}"
        );
        // The write made before failing stays, on both engines (`both` compared).
        assert_eq!(fin[0], Val::F64s(vec![c, 0.5]), "c = {c}");
    }
}

#[test]
fn a_later_binding_of_either_kind_replaces_the_earlier() {
    let m = module(FAILING);
    let copied = |a: &mut [Val]| match a {
        [Val::F64s(y), Val::F64(c)] => {
            y[1] = *c;
            Ok(vec![Val::F64(-1.0)])
        }
        _ => Err("bad arguments".into()),
    };
    let borrowed = |a: &mut [Arg<'_>]| match a {
        [Arg::F64sMut(y), Arg::F64(c)] => {
            y[0] = *c;
            Ok(vec![Val::F64(1.0)])
        }
        _ => Err("bad arguments".into()),
    };
    let args = [Val::F64s(vec![0.0, 0.0]), Val::F64(9.0)];
    let h = Hosts::new().bind("g", copied).bind_args("g", borrowed);
    assert_eq!((h.len(), h.get("g").is_none()), (1, true));
    let (r, fin) = both(&m, &h, "f", &args);
    assert_eq!(
        (r.unwrap(), &fin[0]),
        (vec![Val::F64(1.0)], &Val::F64s(vec![9.0, 0.0]))
    );
    let h = Hosts::new().bind_args("g", borrowed).bind("g", copied);
    assert_eq!((h.len(), h.get_args("g").is_none()), (1, true));
    let (r, fin) = both(&m, &h, "f", &args);
    assert_eq!(
        (r.unwrap(), &fin[0]),
        (vec![Val::F64(-1.0)], &Val::F64s(vec![0.0, 9.0]))
    );
    // An unbound extern is still refused at compile time.
    let id = m.func_by_name("f").unwrap();
    let e = compile_with(&m, &[id], &Hosts::new().bind_args("other", borrowed)).unwrap_err();
    assert!(e.to_string().contains("@g"), "{e}");
}

#[test]
fn empty_slices_are_lent_too() {
    let m = module(PROGRAM);
    let seen = Arc::new(AtomicUsize::new(0));
    let h = hosts(&seen);
    // 0 rows: gemv of nothing; @apply then loads y[0] out of bounds, on both.
    let args = [
        Val::F64s(vec![]),
        Val::F64s(vec![1.0]),
        Val::F64s(vec![]),
        Val::I64(0),
    ];
    let (r, _) = both(&m, &h, "apply", &args);
    assert!(r.unwrap_err().contains("out of bounds"));
}
