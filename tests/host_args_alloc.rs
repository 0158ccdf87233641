//! A host function that borrows its arguments (`Hosts::bind_args`) costs the JIT
//! no allocation per call: a gemv on a 2048-element matrix called 64 times in a
//! loop allocates nothing after the first call, where the copying kind
//! (`Hosts::bind`) allocates per call (the counter sees the copies). Overlapping
//! arguments are the documented exception: they get copies.

use gradlift::ir::parse;
use gradlift::{Arg, CompiledFunction, Hosts, Val, Workspace};

#[path = "common/counting_alloc.rs"]
mod counting_alloc;
use counting_alloc::{Counting, allocations};

#[global_allocator]
static GLOBAL: Counting = Counting;

const PROGRAM: &str = "
extern @gemv(mut [f64], [f64], [f64])

; y = A x, `times` times in a loop (A is len(y) x len(x), row-major); returns y[0].
func @repeat(%a: [f64], %x: [f64], %y: mut [f64], %times: i64) -> f64 {
entry:
    jump head
head:
    %i = phi i64 [entry: 0, body: %i1]
    %more = icmp lt %i, %times
    br %more, body, exit
body:
    call @gemv(%y, %a, %x)
    %i1 = iadd %i, 1
    jump head
exit:
    %y0 = load %y[0]
    ret %y0
}

; The matrix passed as the output too: overlapping arguments.
func @aliased(%a: mut [f64], %x: [f64]) -> f64 {
entry:
    call @gemv(%a, %a, %x)
    %a0 = load %a[0]
    ret %a0
}
";

fn gemv(y: &mut [f64], a: &[f64], x: &[f64]) -> Result<(), String> {
    if x.is_empty() {
        return Err("no columns".into());
    }
    for (yi, row) in y.iter_mut().zip(a.chunks_exact(x.len())) {
        *yi = row.iter().zip(x).map(|(a, b)| a * b).sum();
    }
    Ok(())
}

fn borrowed() -> Hosts {
    Hosts::new().bind_args("gemv", |args: &mut [Arg<'_>]| match args {
        [Arg::F64sMut(y), Arg::F64s(a), Arg::F64s(x)] => gemv(y, a, x).map(|()| Vec::new()),
        _ => Err("bad arguments".into()),
    })
}

fn copied() -> Hosts {
    Hosts::new().bind("gemv", |args: &mut [Val]| match args {
        [Val::F64s(y), Val::F64s(a), Val::F64s(x)] => gemv(y, a, x).map(|()| Vec::new()),
        _ => Err("bad arguments".into()),
    })
}

#[test]
fn a_borrowing_host_function_allocates_nothing_per_call() {
    let m = parse(PROGRAM).unwrap();
    let (rows, cols) = (32, 64);
    let a: Vec<f64> = (0..rows * cols).map(|k| (k as f64 * 0.01).sin()).collect();
    let x: Vec<f64> = (0..cols).map(|k| 1.0 / (1.0 + k as f64)).collect();
    let want: f64 = a[..cols].iter().zip(&x).map(|(a, b)| a * b).sum();
    let count = |hosts: &Hosts| {
        let f = CompiledFunction::with_hosts(&m, "repeat", hosts).unwrap();
        let mut ws = Workspace::new();
        let mut y = vec![0.0; rows];
        let mut out = Vec::with_capacity(1);
        let mut call = |y: &mut [f64], out: &mut Vec<Val>| {
            let mut args = [Arg::F64s(&a), Arg::F64s(&x), Arg::F64sMut(y), Arg::I64(64)];
            f.call_args(&mut ws, &mut args, out).unwrap();
        };
        call(&mut y, &mut out);
        let n = allocations(|| call(&mut y, &mut out));
        assert_eq!(out, [Val::F64(want)]);
        n
    };
    assert_eq!(count(&borrowed()), 0);
    // The copying kind copies the three slices in and `y` back, per call: the
    // counter sees it, so the 0 above is not the counter missing host calls.
    assert!(count(&copied()) >= 64 * 3);
}

#[test]
fn overlapping_arguments_get_copies() {
    let m = parse(PROGRAM).unwrap();
    let f = CompiledFunction::with_hosts(&m, "aliased", &borrowed()).unwrap();
    let mut ws = Workspace::new();
    let mut a = vec![1.0, 2.0, 3.0, 4.0];
    let x = [0.5, 0.25];
    let mut out = Vec::with_capacity(1);
    let mut call = |a: &mut [f64], out: &mut Vec<Val>| {
        let mut args = [Arg::F64sMut(a), Arg::F64s(&x)];
        f.call_args(&mut ws, &mut args, out).unwrap();
    };
    call(&mut a, &mut out);
    // The read-only matrix is a copy from before the call: y = A x with the
    // original A ([1, 2; 3, 4] x [0.5, 0.25] = [1, 2.5]) lands in a[0..2].
    assert_eq!(a, [1.0, 2.5, 3.0, 4.0]);
    assert_eq!(out, [Val::F64(1.0)]);
    assert!(allocations(|| call(&mut a, &mut out)) > 0);
}
