//! The text format as a whole: parser and printer together.
//!
//! - A corpus of hand-written programs covering every op, every type, multiple
//!   results, externs, declarations, recursion, forward references, phis with back
//!   edges, labels that look like keywords, comments and odd whitespace: each parses,
//!   and printing is a fixed point (`print(parse(print(parse(t)))) == print(parse(t))`).
//! - Exact printed outputs for a few programs, written by hand.
//! - Functions built with the builder (unnamed values) print, parse back and print
//!   identically.
//! - Property tests: random bytes, random token sequences and mutated programs never
//!   make the parser panic (and whatever parses is a fixed point); random well-typed
//!   functions round-trip, and keep their types and constants whenever
//!   `literal_types` says their constants print back as themselves.

use gradlift_ir::function::ValueDef;
use gradlift_ir::interp::{ErrorKind, Interpreter, Limits, Val};
use gradlift_ir::parser::literal_types;
use gradlift_ir::{
    CmpPred, Elem, FuncId, Function, FunctionBuilder, Imm, Module, Opcode, Scalar, Signature,
    Terminator, Type, Value, parse, verify,
};
use proptest::prelude::*;

/// Parses `text`, panicking with the errors if it fails.
#[track_caller]
fn parse_ok(text: &str) -> Module {
    match parse(text) {
        Ok(m) => m,
        Err(e) => panic!("parse failed:\n{e}\n--- text:\n{text}"),
    }
}

/// Checks that `text` parses and that printing is a fixed point; returns the print.
#[track_caller]
fn round_trip(text: &str) -> String {
    let once = parse_ok(text).to_string();
    let twice = parse_ok(&once).to_string();
    assert_eq!(twice, once, "printing is not a fixed point for:\n{text}");
    once
}

/// Checks that `text` parses and prints exactly as `expected` (after its first
/// newline), and that the print is a fixed point.
#[track_caller]
fn check_print(text: &str, expected: &str) {
    let printed = round_trip(text);
    let expected = expected.strip_prefix('\n').unwrap_or(expected);
    assert_eq!(printed, expected, "\nprinted:\n{printed}");
}

const ROSENBROCK: &str = "\
; f(x) = sum_{i<n-1} 100 (x[i+1] - x[i]^2)^2 + (1 - x[i])^2
func @rosenbrock(%x: [f64]) -> f64 {
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
    %a2 = fmul %a, %a
    %d = fsub %b, %a2
    %d2 = fmul %d, %d
    %t1 = fmul 100.0, %d2
    %e = fsub 1.0, %a
    %t2 = fmul %e, %e
    %t = fadd %t1, %t2
    %acc1 = fadd %acc, %t
    jump head
exit:
    ret %acc
}
";

const FLOATS: &str = "\
; every float op, in f64 and in f32
func @floats(%x: f64, %y: f64, %u: f32, %v: f32) -> (f64, f32) {
entry:
    %a = fadd %x, %y
    %b = fsub %a, 1.5
    %c = fmul 2, %b          ; an integer literal where a float is expected
    %d = fdiv %c, %y
    %e = fmin %d, %x
    %f = fmax %e, -inf
    %g = pow %f, 0.5
    %h = fneg %g
    %i = fabs %h
    %j = sqrt %i
    %k = exp %j
    %l = log %k
    %m = sin %l
    %n = cos %m
    %o = tan %n
    %p = tanh %o
    %q = floor %p
    %r = ceil %q
    %s0 = powi %r, 3
    %s1 = sinh %s0
    %s2 = cosh %s1
    %s3 = asin %s2
    %s4 = acos %s3
    %s5 = atan %s4
    %s6 = log10 %s5
    %s7 = log2 %s6
    %s8 = exp2 %s7
    %s9 = atan2 %s8, -1.0
    %s10 = hypot %s9, %y
    %s = fma %s10, 2.0, %x
    %t = fadd %u, %v
    %w = fmul %t, 0.1
    %w2 = fdiv %w, 1e-45
    %w3 = fsub -2.5e-3, %w2
    %w4 = fma 0.5, %w3, %v
    %w5 = atan2 %w4, %u
    %z = powi %w5, -2
    ret %s, %z
}
";

const INTS: &str = "\
; integer, boolean, comparison, select, cast, bitcast and const ops
func @ints(%a: i64, %b: i64, %p: bool) -> (i64, bool, f64, f32) {
entry:
    %c = iadd %a, %b
    %d = isub %c, 0x7FFFFFFFFFFFFFFF
    %e = imul %d, -3
    %f = idiv %e, 7
    %g = irem %f, %b
    %h = ishl %g, 2
    %i = ishr %h, 1
    %j = iand %i, 0xFF
    %k = ior %j, %a
    %l = ixor %k, 0xFFFFFFFFFFFFFFFF
    %m = ineg %l
    %q = icmp ne %m, 0
    %r = and %q, %p
    %s = or %r, false
    %t = xor %s, true
    %u = not %t
    %v = select %u, %m, 42
    %w = select %u, 1.5, 2
    %x = cast f64 %v
    %y = cast f32 %x
    %z = cast i64 %y
    %bits = bitcast i64 %w
    %back = bitcast f64 %bits
    %one = const f64 1.0
    %lt = fcmp lt %back, %one
    %ge = fcmp ge %y, 0.0
    %eq = fcmp eq %x, nan
    %ne = fcmp ne %x, -0.0
    %le = icmp le %z, %bits
    %gt = icmp gt %z, 1
    %eqi = icmp eq %z, %a
    %lti = icmp lt %z, %a
    %gei = icmp ge %z, %a
    %gtf = fcmp gt %x, 1e300
    %lef = fcmp le %x, 5e-324
    %all = and %lt, %ge
    %all2 = or %all, %eq
    %all3 = xor %all2, %le
    %all4 = and %all3, %gt
    %all5 = and %all4, %ne
    %all6 = or %all5, %eqi
    %all7 = xor %all6, %lti
    %all8 = and %all7, %gei
    %all9 = or %all8, %gtf
    %all10 = and %all9, %lef
    %c32 = const f32 0.1
    %cb = const bool true
    %ci = const i64 -9223372036854775808
    %fromb = cast i64 %cb
    %lit = cast f64 7
    %sum = iadd %fromb, %ci
    ret %sum, %all10, %lit, %c32
}
";

const MEMORY_AND_CALLS: &str = "\
; slices, memory, calls with several results, externs, recursion, declarations
extern @host(f64, [f64]) -> f64

func @caller(%x: mut [f64], %n: i64, %ro: [i64], %f: [f32]) -> f64 {
entry:
    %buf = alloc f64, %n
    %k = alloc i64, 4
    %h = alloc f32, 2
    store %buf[0], 1
    store %k[3], 7
    store %h[1], 0.25
    %v = load %x[0]
    %w = load %ro[%n]
    %y = load %f[1]
    %s, %c = call @stats(%x)
    %r = call @host(%v, %buf)
    %fact = call @fact(%n)
    %ff = cast f64 %fact
    %t = fadd %r, %ff
    store %x[1], %t
    %len = len %h
    call @noop()
    %q = call @host(2.5, %x)
    ret %s
}

func @stats(%x: [f64]) -> (f64, i64) {
entry:
    %n = len %x
    %first = load %x[0]
    ret %first, %n
}

func @fact(%n: i64) -> i64 {
entry:
    %z = icmp le %n, 1
    br %z, base, rec
base:
    ret 1
rec:
    %m = isub %n, 1
    %r = call @fact(%m)
    %p = imul %n, %r
    ret %p
}

func @noop() {
entry:
    ret
}

func @host_ir(%x: f64, %s: [f64]) -> f64 {
entry:
    %y = load %s[0]
    %z = fmul %x, %y
    ret %z
}

func @square(%x: f64) -> f64 {
entry:
    %y = fmul %x, %x
    ret %y
}

func @square_vjp(%x: f64, %dy: f64) -> f64 {
entry:
    %t = fmul 2.0, %x
    %dx = fmul %t, %dy
    ret %dx
}

nodiff @noop
overlay @host = @host_ir
vjp @square = @square_vjp
";

const LOOPS: &str = "\
; nested loops; blocks laid out out of dominance order; phis with back edges
func @loops(%n: i64, %x: f64) -> f64 {
entry:
    jump outer
exit:
    ret %acc
outer:
    %i = phi i64 [entry: 0, latch: %i1]
    %acc = phi f64 [entry: 0.0, latch: %acc2]
    %go = icmp lt %i, %n
    br %go, inner, exit
inner:
    %j = phi i64 [outer: 0, inner: %j1]
    %acc1 = phi f64 [outer: %acc, inner: %acc3]
    %xj = cast f64 %j
    %acc3 = fadd %acc1, %xj
    %j1 = iadd %j, 1
    %more = icmp lt %j1, %i
    br %more, inner, latch
latch:
    %acc2 = fmul %acc3, %x
    %i1 = iadd %i, 1
    jump outer
}

func @diamond(%c: bool, %x: f32) -> f32 {
entry:
    br %c, yes, no
yes:
    %a = fmul %x, 2.0
    jump join
no:
    jump join
join:
    %r = phi f32 [yes: %a, no: 0.5]
    %flag = phi bool [yes: true, no: false]
    %s = select %flag, %r, 1.0
    ret %s
}
";

const NAMES: &str = "\
; names that are numbers, labels that look like keywords and literals
func @names(%0: f64, %_: bool, %a.b.c: i64) -> f64 {
0:
    %a.b = fneg %0
    br %_, true, inf
true:
    ret %a.b
inf:
    %12 = fadd %a.b, inf
    jump ret
ret:
    %13 = phi f64 [inf: %12]
    jump fadd
fadd:
    ret %13
}
";

const ODD_WHITESPACE: &str = "  ; a comment first
func@odd(%x:f64,%y   :   f64)->(f64,f64){entry:%a=fadd %x,%y ; trailing comment
%b
  =
 fmul
   %a ,
   %a    jump next next :
\t ret %a,%b}extern @e ( ) nodiff
@e";

const TAPE: &str = "\
; the tape: a forward pass saves scalars and buffer handles, a pullback takes them back
func @forward(%x: [f64], %k: f32, %n: i64, %c: bool) -> f64 {
entry:
    %m = len %x
    %hs = tape_alloc f64, %m
    %hi = tape_alloc i64, 2
    %hf = tape_alloc f32, %n
    %saved = tape_view f64, %hs
    %idx = tape_view i64, %hi
    store %idx[0], %m
    push %k
    push %n
    push %c
    push 1.0
    push -7
    push false
    push nan
    %v = load %x[0]
    store %saved[0], %v
    push %hf
    push %hs
    ret %v
}

func @pullback(%dy: f64) -> f64 {
entry:
    %hs = pop i64
    %hf = pop i64
    %nan = pop f64
    %b = pop bool
    %i = pop i64
    %one = pop f64
    %c = pop bool
    %n = pop i64
    %k = pop f32
    %f = tape_view f32, %hf
    %saved = tape_view f64, %hs
    %again = tape_view f64, %hs
    %v = load %saved[0]
    %g = fmul %v, %dy
    store %again[0], %g
    ret %g
}
";

const DEBUG: &str = r#"; debug checks: trap_if, with messages that use every escape
func @checked(%x: [f64], %dx: mut [f64], %eps: f64) -> f64 {
entry:
    %n = len %x
    %k = len %dx
    %differ = icmp ne %n, %k
    trap_if %differ, "shadow of %x has another length than %x"
    %v = load %x[0]
    %bad = fcmp ne %v, %v
    trap_if %bad, "x[0] is \"nan\"\n\tin \\checked\\: \u{0}\u{1b}\u{7f}\u{85} é ✓ ; not a comment"
    trap_if false, ""
    %small = fcmp lt %eps, 0.0
    br %small, fail, done
fail:
    trap_if true, "eps < 0"
    trap_if %differ, "shadow of %x has another length than %x"
    jump done
done:
    ret %v
}
"#;

const CHECKPOINT: &str = "; checkpoint marks: a call's, a loop's; and a pullback's count
func @step(%x: f64) -> f64 {
entry:
    %y = sin %x
    ret %y
}
func @sim(%x: f64, %n: i64, %s: i64) -> f64 {
entry:
    %x0 = call @step(%x) checkpoint
    call @step(%x0)    checkpoint
    jump head
head:
    %i = phi i64 [entry: 0, body: %i1]
    %v = phi f64 [entry: %x0, body: %v1]
    checkpoint_loop %s
    %more = icmp lt %i, %n
    br %more, body, exit
body:
    %v1 = call @step(%v) checkpoint
    %i1 = iadd %i, 1
    jump head
exit:
    recompute 0
    ret %v
}
";

const CORPUS: &[&str] = &[
    ROSENBROCK,
    FLOATS,
    INTS,
    MEMORY_AND_CALLS,
    LOOPS,
    NAMES,
    ODD_WHITESPACE,
    TAPE,
    DEBUG,
    CHECKPOINT,
];

#[test]
fn every_corpus_program_parses_and_prints_to_a_fixed_point() {
    for text in CORPUS {
        round_trip(text);
    }
}

#[test]
fn the_corpus_covers_every_op_and_every_type() {
    let mut ops = Vec::new();
    let mut types = Vec::new();
    for text in CORPUS {
        let m = parse_ok(text);
        for (_, d) in m.funcs.iter() {
            types.extend(d.sig.params.iter().chain(&d.sig.results).copied());
        }
        for (_, f) in m.defined() {
            for (_, inst) in f.placed_insts() {
                ops.push(f.insts[inst].opcode);
                for &r in &f.insts[inst].results {
                    types.push(f.value_type(r));
                }
            }
        }
    }
    for op in Opcode::ALL {
        assert!(ops.contains(op), "no program uses {op}");
    }
    for elem in [Elem::F64, Elem::F32, Elem::I64] {
        for t in [elem.ty(), Type::slice(elem), Type::slice_mut(elem)] {
            assert!(types.contains(&t), "no program uses {t}");
        }
    }
    assert!(types.contains(&Type::Bool));
}

#[test]
fn constants_of_parsed_programs_agree_with_literal_types() {
    // The parser's literal typing and the helper the verifier uses are one rule.
    for text in CORPUS {
        let m = parse_ok(text);
        for (_, f) in m.defined() {
            for (_, inst) in f.placed_insts() {
                let expected = literal_types(&m, f, inst);
                for (i, &a) in f.insts[inst].args.iter().enumerate() {
                    let got = match f.value_def(a) {
                        ValueDef::Const(c) => Some(c.ty()),
                        _ => None,
                    };
                    assert_eq!(got, expected[i], "operand {i} of inst {inst} in:\n{text}");
                }
            }
        }
    }
}

#[test]
fn the_spec_example_prints_as_the_spec_writes_it() {
    let without_comment = ROSENBROCK.split_once('\n').unwrap().1;
    check_print(ROSENBROCK, without_comment);
}

#[test]
fn the_tape_program_prints_as_written_and_verifies() {
    let without_comment = TAPE.split_once('\n').unwrap().1;
    check_print(TAPE, without_comment);
    verify(&parse_ok(TAPE)).unwrap();
}

#[test]
fn the_debug_program_prints_as_written_verifies_and_keeps_its_messages() {
    let without_comment = DEBUG.split_once('\n').unwrap().1;
    check_print(DEBUG, without_comment);
    let m = parse_ok(DEBUG);
    verify(&m).unwrap();
    let (_, f) = m.defined().next().unwrap();
    let messages: Vec<&str> = f
        .placed_insts()
        .filter_map(|(_, i)| match f.insts[i].imm {
            Imm::Msg(msg) => Some(f.message(msg).unwrap()),
            _ => None,
        })
        .collect();
    let shadow = "shadow of %x has another length than %x";
    assert_eq!(
        messages,
        [
            shadow,
            "x[0] is \"nan\"\n\tin \\checked\\: \u{0}\u{1b}\u{7f}\u{85} é ✓ ; not a comment",
            "",
            "eps < 0",
            shadow,
        ]
    );
    // The repeated message is stored once.
    assert_eq!(f.messages.len(), 4);
}

#[test]
fn messages_print_with_the_canonical_escapes() {
    // `\u{..}` of a printable character prints as the character, of a control
    // character in lowercase hex without leading zeros, of a newline as `\n`.
    check_print(
        r#"
func @f(%c: bool) {
entry:
    trap_if %c, "\u{41}\u{7F}\u{000009}\u{a}\u{22}\u{5c}\u{e9}\u{1F600}\u{0085}"
    trap_if %c,"no space"
    ret
}
"#,
        r#"
func @f(%c: bool) {
entry:
    trap_if %c, "A\u{7f}\t\n\"\\é😀\u{85}"
    trap_if %c, "no space"
    ret
}
"#,
    );
}

#[test]
fn a_builder_function_with_trap_if_verifies_prints_and_parses_back() {
    let m = built(
        Signature::new([Type::F64, Type::I64], [Type::F64]),
        |b, _, _| {
            let (x, n) = (b.param(0), b.param(1));
            let zero = b.fconst(0.0);
            let neg = b.fcmp(CmpPred::Lt, x, zero);
            b.trap_if(neg, "x < 0: \"sqrt\" of a negative\n");
            let hundred = b.iconst(100);
            let big = b.icmp(CmpPred::Gt, n, hundred);
            b.trap_if(big, "n > 100\t(too many)");
            b.trap_if(neg, "x < 0: \"sqrt\" of a negative\n");
            let y = b.sqrt(x);
            b.ret(&[y]);
        },
    );
    verify(&m).unwrap();
    let id = m.func_by_name("f").unwrap();
    assert_eq!(m.function(id).unwrap().messages.len(), 2);
    let expected = r#"extern @ext(f64, i64) -> (f64, bool)

func @f(%0: f64, %1: i64) -> f64 {
entry:
    %2 = fcmp lt %0, 0.0
    trap_if %2, "x < 0: \"sqrt\" of a negative\n"
    %3 = icmp gt %1, 100
    trap_if %3, "n > 100\t(too many)"
    trap_if %2, "x < 0: \"sqrt\" of a negative\n"
    %4 = sqrt %0
    ret %4
}
"#;
    assert_eq!(m.to_string(), expected);
    let parsed = parse_ok(expected);
    verify(&parsed).unwrap();
    assert_eq!(parsed.to_string(), expected);
    assert_eq!(shape(&parsed), shape(&m));
    let mut interp = Interpreter::new(&parsed);
    assert_eq!(
        interp
            .call_by_name("f", &mut [Val::F64(4.0), Val::I64(100)])
            .unwrap(),
        [Val::F64(2.0)]
    );
    let e = interp
        .call_by_name("f", &mut [Val::F64(4.0), Val::I64(101)])
        .unwrap_err();
    assert_eq!(e.kind, ErrorKind::Trap("n > 100\t(too many)".into()));
    assert_eq!((e.func.as_str(), e.op.as_str()), ("f", "trap_if"));
    assert_eq!(e.pos.to_string(), "8:5");

    // A condition that is not a bool: the builder goes on (the instruction has no
    // result, as a trap_if never does), and `finish` says what was wrong.
    let mut m = Module::new();
    let id = m.declare("g", Signature::new([Type::I64], [])).unwrap();
    let mut b = FunctionBuilder::new(&m, id);
    let n = b.param(0);
    b.trap_if(n, "n");
    assert!(b.func().insts.values().all(|d| d.results.is_empty()));
    b.ret(&[]);
    let e = b.finish().unwrap_err();
    assert_eq!(
        e.to_string(),
        "building @g: operand 1 of trap_if must be bool, found i64"
    );
}

#[test]
fn a_pushed_literal_keeps_its_own_type() {
    // `push` gives its operand no context: `1.0` is f64, `1` i64, and `true` bool,
    // in the parser and in the rule the verifier checks constants with.
    let m = parse_ok(
        "func @f() {\nentry:\n    push 1.0\n    push 1\n    push true\n    push -0.0\n    ret\n}\n",
    );
    verify(&m).unwrap();
    let (_, f) = m.defined().next().unwrap();
    let mut tys = Vec::new();
    for (_, inst) in f.placed_insts() {
        let a = f.insts[inst].args[0];
        let ValueDef::Const(c) = f.value_def(a) else {
            panic!("not a constant")
        };
        assert_eq!(literal_types(&m, f, inst)[..], [Some(c.ty())]);
        tys.push(c.ty());
    }
    assert_eq!(tys, [Type::F64, Type::I64, Type::Bool, Type::F64]);

    // A literal handle (a forged one, as far as any engine is concerned) is an i64.
    let m = parse_ok(
        "func @f() -> f64 {\nentry:\n    %s = tape_view f64, 12345\n    %h = tape_alloc f32, 3\n    %v = load %s[0]\n    ret %v\n}\n",
    );
    verify(&m).unwrap();
    let (_, f) = m.defined().next().unwrap();
    for (_, inst) in f.placed_insts().take(2) {
        let a = f.insts[inst].args[0];
        let ValueDef::Const(c) = f.value_def(a) else {
            panic!("not a constant")
        };
        assert_eq!(c.ty(), Type::I64);
        assert_eq!(literal_types(&m, f, inst)[..], [Some(Type::I64)]);
    }

    // An f32 constant pushed directly would print as an f64 literal: the verifier
    // rejects it, and `const f32` is the way to push one.
    let mut m = Module::new();
    let id = m.declare("f", Signature::new([], [])).unwrap();
    let mut b = FunctionBuilder::new(&m, id);
    let c = b.f32const(0.5);
    b.ins(Opcode::Push, Imm::None, &[c]);
    b.ret(&[]);
    let func = b.finish().unwrap();
    m.define(id, func).unwrap();
    let errs = verify(&m).unwrap_err();
    assert!(errs.to_string().contains("0.5"), "{errs}");
}

#[test]
fn odd_whitespace_prints_in_the_canonical_layout() {
    check_print(
        ODD_WHITESPACE,
        "
func @odd(%x: f64, %y: f64) -> (f64, f64) {
entry:
    %a = fadd %x, %y
    %b = fmul %a, %a
    jump next
next:
    ret %a, %b
}

extern @e()

nodiff @e
",
    );
}

#[test]
fn literals_print_in_their_parsed_types() {
    // Integer literals in float positions print as floats; hex prints as decimal;
    // declarations move after the functions; `-> (f64)` prints as `-> f64`.
    check_print(
        "
vjp @f = @f
func @f(%x: f64, %n: i64) -> (f64) {
entry:
    %a = fmul 2, %x
    %b = iand %n, 0xFFFFFFFFFFFFFFFF
    %c = iadd %b, 0x10
    %d = fadd %a, 1e400
    %e = fmul %d, 0.30000000000000004
    ret %e
}
",
        "
func @f(%x: f64, %n: i64) -> f64 {
entry:
    %a = fmul 2.0, %x
    %b = iand %n, -1
    %c = iadd %b, 16
    %d = fadd %a, inf
    %e = fmul %d, 0.30000000000000004
    ret %e
}

vjp @f = @f
",
    );
}

#[test]
fn a_vjp_and_a_jvp_of_one_function_print_back_in_their_order() {
    // The declarations come first in the text, `jvp` before `vjp`: they print after
    // the functions, in the same order, and keep their positions.
    let text = "\
jvp @g = @g_jvp
func @g(%x: f64, %n: i64, %y: f32) -> (f64, i64) {
entry:
    %yy = cast f64 %y
    %p = fmul %x, %yy
    ret %p, %n
}
vjp   @g=@g_vjp
func @g_vjp(%x: f64, %n: i64, %y: f32, %dr: f64) -> (f64, f32) {
entry:
    %yy = cast f64 %y
    %dx = fmul %yy, %dr
    %t = fmul %x, %dr
    %dy = cast f32 %t
    ret %dx, %dy
}
func @g_jvp(%x: f64, %n: i64, %y: f32, %dx: f64, %dy: f32) -> f64 {
entry:
    %yy = cast f64 %y
    %dyy = cast f64 %dy
    %a = fmul %yy, %dx
    %b = fmul %x, %dyy
    %dr = fadd %a, %b
    ret %dr
}
";
    check_print(
        text,
        "
func @g(%x: f64, %n: i64, %y: f32) -> (f64, i64) {
entry:
    %yy = cast f64 %y
    %p = fmul %x, %yy
    ret %p, %n
}

func @g_vjp(%x: f64, %n: i64, %y: f32, %dr: f64) -> (f64, f32) {
entry:
    %yy = cast f64 %y
    %dx = fmul %yy, %dr
    %t = fmul %x, %dr
    %dy = cast f32 %t
    ret %dx, %dy
}

func @g_jvp(%x: f64, %n: i64, %y: f32, %dx: f64, %dy: f32) -> f64 {
entry:
    %yy = cast f64 %y
    %dyy = cast f64 %dy
    %a = fmul %yy, %dx
    %b = fmul %x, %dyy
    %dr = fadd %a, %b
    ret %dr
}

jvp @g = @g_jvp

vjp @g = @g_vjp
",
    );
    let m = parse_ok(text);
    verify(&m).unwrap();
    let id = |name| m.func_by_name(name).unwrap();
    assert_eq!(m.jvp_of(id("g")), Some(id("g_jvp")));
    assert_eq!(m.vjp_of(id("g")), Some(id("g_vjp")));
    let at: Vec<String> = m.decls.iter().map(|(_, pos)| pos.to_string()).collect();
    assert_eq!(at, ["1:1", "8:1"]);
}

#[test]
fn results_without_names_get_numbers() {
    check_print(
        "
extern @g(f64) -> (f64, f64)
func @f(%x: f64, %1: f64) -> f64 {
entry:
    fadd %x, %x
    call @g(%x)
    ret %x
}
",
        "
extern @g(f64) -> (f64, f64)

func @f(%x: f64, %1: f64) -> f64 {
entry:
    %0 = fadd %x, %x
    %2, %3 = call @g(%x)
    ret %x
}
",
    );
}

// Builder functions.

/// A module with an extern `@ext`, the function `@f` built by `body`, and `@g`
/// declared to be called.
fn built(sig: Signature, body: impl FnOnce(&mut FunctionBuilder<'_>, FuncId, FuncId)) -> Module {
    let mut m = Module::new();
    let ext = m
        .declare_extern(
            "ext",
            Signature::new([Type::F64, Type::I64], [Type::F64, Type::Bool]),
        )
        .unwrap();
    let id = m.declare("f", sig).unwrap();
    let mut b = FunctionBuilder::new(&m, id);
    body(&mut b, id, ext);
    let f = b.finish().unwrap();
    m.define(id, f).unwrap();
    m
}

/// The shape of every function: blocks, and per instruction its op, immediate kind,
/// result types and message (of a `trap_if`). Two modules with one shape parsed from one another hold the
/// same program.
fn shape(m: &Module) -> Vec<String> {
    let mut out = Vec::new();
    for (id, f) in m.defined() {
        out.push(format!("func {} blocks {}", m.name(id), f.layout.len()));
        for (_, inst) in f.placed_insts() {
            let d = &f.insts[inst];
            let results: Vec<Type> = d.results.iter().map(|&r| f.value_type(r)).collect();
            let message = match d.imm {
                Imm::Msg(msg) => format!(" {:?}", f.message(msg)),
                _ => String::new(),
            };
            out.push(format!(
                "{} {:?} {:?}{message}",
                d.opcode,
                d.imm.kind(),
                results
            ));
        }
    }
    out
}

#[test]
fn builder_functions_print_parse_and_print_identically() {
    let modules = [
        built(
            Signature::new([Type::slice(Elem::F64)], [Type::F64]),
            |b, _, _| {
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
            },
        ),
        built(
            Signature::new(
                [Type::F64, Type::I64, Type::slice_mut(Elem::F32)],
                [Type::F64, Type::Bool],
            ),
            |b, me, ext| {
                let (x, n, s) = (b.param(0), b.param(1), b.param(2));
                let r = b.call(ext, &[x, n]);
                let c = b.fcmp(CmpPred::Gt, r[0], x);
                let yes = b.create_block("yes");
                let no = b.create_block("no");
                let join = b.create_block("join");
                b.br(r[1], yes, no);
                b.switch_to(yes);
                let one = b.iconst(1);
                let m1 = b.isub(n, one);
                let rec = b.call(me, &[x, m1, s]);
                let half = b.f32const(0.5);
                let zero = b.iconst(0);
                b.store(s, zero, half);
                b.jump(join);
                b.switch_to(no);
                let buf = b.alloc(Elem::F32, n);
                let e = b.load(buf, zero);
                let e64 = b.cast(Type::F64, e);
                b.jump(join);
                b.switch_to(join);
                let p = b.phi(Type::F64, &[(yes, rec[0]), (no, e64)]);
                let q = b.phi(Type::Bool, &[(yes, c), (no, r[1])]);
                b.named("result", p);
                b.ret(&[p, q]);
            },
        ),
    ];
    for m in &modules {
        let once = m.to_string();
        let parsed = parse_ok(&once);
        assert_eq!(parsed.to_string(), once);
        assert_eq!(shape(&parsed), shape(m), "\n{once}");
    }
}

// Property tests.

/// Whether every constant operand of `m`'s functions has the type the parser will
/// give its printed literal (for instructions, phis, `br` and `ret`).
fn constants_print_back_as_themselves(m: &Module) -> bool {
    let const_ty = |f: &Function, v: Value| match f.values.get(v).map(|d| d.def) {
        Some(ValueDef::Const(c)) => Some(c.ty()),
        _ => None,
    };
    m.funcs.iter().all(|(id, d)| {
        let Some(f) = d.function() else { return true };
        let insts_ok = f.placed_insts().all(|(_, inst)| {
            let expected = literal_types(m, f, inst);
            f.insts[inst]
                .args
                .iter()
                .enumerate()
                .all(|(i, &a)| const_ty(f, a) == expected.get(i).copied().flatten())
        });
        let blocks_ok = f.layout.iter().all(|&b| {
            let data = &f.blocks[b];
            let phis_ok = data.phis.iter().all(|p| {
                let ty = f.value_type(p.value);
                p.incoming
                    .iter()
                    .all(|&(_, v)| const_ty(f, v).is_none_or(|t| t == ty))
            });
            let term_ok = match &data.term {
                Some(Terminator::Br { cond, .. }) => {
                    const_ty(f, *cond).is_none_or(|t| t == Type::Bool)
                }
                Some(Terminator::Ret(vals)) => vals.iter().enumerate().all(|(i, &v)| {
                    const_ty(f, v).is_none_or(|t| Some(&t) == m.sig(id).results.get(i))
                }),
                _ => true,
            };
            phis_ok && term_ok
        });
        insts_ok && blocks_ok
    })
}

/// The constants a module's instructions use, in order, by type and bits (NaNs
/// compare equal whatever their payload: the text has one `nan`).
fn constants(m: &Module) -> Vec<(Type, u64)> {
    let mut out = Vec::new();
    for (_, f) in m.defined() {
        for (_, inst) in f.placed_insts() {
            for &a in &f.insts[inst].args {
                if let ValueDef::Const(c) = f.value_def(a) {
                    let bits = match c {
                        Scalar::F64(x) if x.is_nan() => 1,
                        Scalar::F32(x) if x.is_nan() => 1,
                        Scalar::F64(x) => x.to_bits(),
                        Scalar::F32(x) => u64::from(x.to_bits()),
                        Scalar::I64(x) => x as u64,
                        Scalar::Bool(x) => u64::from(x),
                    };
                    out.push((c.ty(), bits));
                }
            }
        }
    }
    out
}

/// Builds a random well-typed function from `steps`: each step appends one
/// instruction whose operands are drawn from the values made so far (or are
/// constants), and may name its result. Some steps open a loop or a diamond.
fn random_function(steps: &[(u8, u16, u16, u16, u8)]) -> Module {
    const F64S: [f64; 9] = [
        0.0,
        -0.0,
        1.0,
        0.1,
        -2.5e-3,
        1e300,
        5e-324,
        f64::INFINITY,
        f64::NAN,
    ];
    const F32S: [f32; 7] = [0.0, -0.0, 1.5, 0.1, 1e-45, f32::NEG_INFINITY, f32::NAN];
    const I64S: [i64; 6] = [0, 1, -7, 42, i64::MIN, i64::MAX];
    const NAMES: [&str; 10] = ["", "", "", "x", "x", "x.1", "0", "a b", "entry", "_"];
    const MESSAGES: [&str; 5] = [
        "",
        "x < 0",
        "quote \" backslash \\ newline \n tab \t nul \u{0} del \u{7f} \u{9f}",
        "é ✓ \u{1F600} \u{2028}",
        "x < 0",
    ];

    let sig = Signature::new(
        [
            Type::F64,
            Type::F32,
            Type::I64,
            Type::Bool,
            Type::slice_mut(Elem::F64),
            Type::slice(Elem::F32),
            Type::slice_mut(Elem::I64),
        ],
        [Type::F64, Type::I64],
    );
    built(sig, |b, me, ext| {
        let mut pool: Vec<(Type, Value)> =
            (0..7).map(|i| (b.sig().params[i], b.param(i))).collect();
        // Operand `k` of type `ty`: a constant when `pick` says so (and `ty` is a
        // scalar), else a value of that type from the pool.
        let pick =
            |b: &mut FunctionBuilder<'_>, pool: &[(Type, Value)], ty: Type, k: u16| -> Value {
                let k = usize::from(k);
                if k % 5 == 0 {
                    let c = match ty {
                        Type::F64 => Some(Scalar::F64(F64S[k / 5 % F64S.len()])),
                        Type::F32 => Some(Scalar::F32(F32S[k / 5 % F32S.len()])),
                        Type::I64 => Some(Scalar::I64(I64S[k / 5 % I64S.len()])),
                        Type::Bool => Some(Scalar::Bool(k % 2 == 0)),
                        _ => None,
                    };
                    if let Some(c) = c {
                        return b.constant(c);
                    }
                }
                let of_ty: Vec<Value> = pool
                    .iter()
                    .filter(|(t, _)| *t == ty)
                    .map(|&(_, v)| v)
                    .collect();
                of_ty[k % of_ty.len()]
            };
        for &(sel, a, c, d, name) in steps {
            let float = if a % 3 == 0 { Type::F32 } else { Type::F64 };
            let slices = [(4, Elem::F64), (5, Elem::F32), (6, Elem::I64)];
            let (slice_i, elem) = slices[usize::from(d) % 3];
            let slice = pool[slice_i].1;
            let v = match sel % 25 {
                0..=6 => {
                    let op = [
                        Opcode::Fadd,
                        Opcode::Fsub,
                        Opcode::Fmul,
                        Opcode::Fdiv,
                        Opcode::Fmin,
                        Opcode::Fmax,
                        Opcode::Pow,
                        Opcode::Atan2,
                        Opcode::Hypot,
                    ][usize::from(sel % 9)];
                    let (x, y) = (pick(b, &pool, float, a), pick(b, &pool, float, c));
                    let inst = b.ins(op, Imm::None, &[x, y]);
                    Some(b.results(inst)[0])
                }
                7 | 8 => {
                    let ops = [
                        Opcode::Fneg,
                        Opcode::Fabs,
                        Opcode::Sqrt,
                        Opcode::Exp,
                        Opcode::Log,
                        Opcode::Sin,
                        Opcode::Cos,
                        Opcode::Tan,
                        Opcode::Tanh,
                        Opcode::Sinh,
                        Opcode::Cosh,
                        Opcode::Asin,
                        Opcode::Acos,
                        Opcode::Atan,
                        Opcode::Log10,
                        Opcode::Log2,
                        Opcode::Exp2,
                        Opcode::Floor,
                        Opcode::Ceil,
                    ];
                    let x = pick(b, &pool, float, a);
                    let inst = b.ins(ops[usize::from(c) % ops.len()], Imm::None, &[x]);
                    Some(b.results(inst)[0])
                }
                9 if d % 2 == 0 => {
                    let (x, n) = (pick(b, &pool, float, a), pick(b, &pool, Type::I64, c));
                    Some(b.powi(x, n))
                }
                9 => {
                    let (x, y) = (pick(b, &pool, float, a), pick(b, &pool, float, c));
                    let z = pick(b, &pool, float, d);
                    Some(b.fma(x, y, z))
                }
                10 | 11 => {
                    let ops = [
                        Opcode::Iadd,
                        Opcode::Isub,
                        Opcode::Imul,
                        Opcode::Idiv,
                        Opcode::Irem,
                        Opcode::Ishl,
                        Opcode::Ishr,
                        Opcode::Iand,
                        Opcode::Ior,
                        Opcode::Ixor,
                        Opcode::Ineg,
                    ];
                    let op = ops[usize::from(d) % ops.len()];
                    let x = pick(b, &pool, Type::I64, a);
                    let args = if op == Opcode::Ineg {
                        vec![x]
                    } else {
                        vec![x, pick(b, &pool, Type::I64, c)]
                    };
                    let inst = b.ins(op, Imm::None, &args);
                    Some(b.results(inst)[0])
                }
                12 => {
                    let pred = CmpPred::ALL[usize::from(d) % 6];
                    Some(if d % 2 == 0 {
                        let (x, y) = (pick(b, &pool, float, a), pick(b, &pool, float, c));
                        b.fcmp(pred, x, y)
                    } else {
                        let (x, y) = (pick(b, &pool, Type::I64, a), pick(b, &pool, Type::I64, c));
                        b.icmp(pred, x, y)
                    })
                }
                13 => {
                    let (x, y) = (pick(b, &pool, Type::Bool, a), pick(b, &pool, Type::Bool, c));
                    Some(match d % 4 {
                        0 => b.and(x, y),
                        1 => b.or(x, y),
                        2 => b.xor(x, y),
                        _ => b.not(x),
                    })
                }
                14 => {
                    let ty = [Type::F64, Type::F32, Type::I64, Type::Bool][usize::from(d) % 4];
                    let cond = pick(b, &pool, Type::Bool, d);
                    let (x, y) = (pick(b, &pool, ty, a), pick(b, &pool, ty, c));
                    Some(b.select(cond, x, y))
                }
                15 => {
                    let from = [Type::F64, Type::F32, Type::I64, Type::Bool][usize::from(a) % 4];
                    let to = [Type::F64, Type::F32, Type::I64][usize::from(d) % 3];
                    let x = pick(b, &pool, from, c);
                    Some(b.cast(to, x))
                }
                16 => Some(if d % 2 == 0 {
                    let x = pick(b, &pool, Type::F64, a);
                    b.bitcast(Type::I64, x)
                } else {
                    let x = pick(b, &pool, Type::I64, a);
                    b.bitcast(Type::F64, x)
                }),
                17 => {
                    let c = match d % 4 {
                        0 => Scalar::F64(F64S[usize::from(a) % F64S.len()]),
                        1 => Scalar::F32(F32S[usize::from(a) % F32S.len()]),
                        2 => Scalar::I64(I64S[usize::from(a) % I64S.len()]),
                        _ => Scalar::Bool(a % 2 == 0),
                    };
                    Some(b.const_inst(c))
                }
                18 => {
                    let i = pick(b, &pool, Type::I64, a);
                    Some(if c % 2 == 0 {
                        b.len(slice)
                    } else {
                        b.load(slice, i)
                    })
                }
                19 => {
                    let (s, ty) = if d % 2 == 0 {
                        (pool[4].1, Type::F64)
                    } else {
                        (pool[6].1, Type::I64)
                    };
                    let (i, x) = (pick(b, &pool, Type::I64, a), pick(b, &pool, ty, c));
                    b.store(s, i, x);
                    None
                }
                20 => {
                    let n = pick(b, &pool, Type::I64, a);
                    let buf = b.alloc(elem, n);
                    Some(b.len(buf))
                }
                21 => {
                    let (x, n) = (pick(b, &pool, Type::F64, a), pick(b, &pool, Type::I64, c));
                    let r = if d % 2 == 0 {
                        b.call(ext, &[x, n])
                    } else {
                        let args: Vec<Value> = (0..7)
                            .map(|i| {
                                if i == 0 {
                                    x
                                } else if i == 2 {
                                    n
                                } else {
                                    pool[i].1
                                }
                            })
                            .collect();
                        b.call(me, &args)
                    };
                    Some(r[usize::from(c) % 2])
                }
                22 => {
                    // A loop carrying an f64: its values die with it.
                    let (start, end) = (pick(b, &pool, Type::I64, a), pick(b, &pool, Type::I64, c));
                    let init = pick(b, &pool, Type::F64, d);
                    let out = b.counted_loop(start, end, &[init], |b, i, acc| {
                        let fi = b.cast(Type::F64, i);
                        vec![b.fadd(acc[0], fi)]
                    });
                    Some(out[0])
                }
                23 => {
                    // The tape: a push or a pop of any scalar type, a tape buffer made
                    // (its handle) or viewed through a handle (any i64: nothing runs
                    // these functions).
                    let ty = [Type::F64, Type::F32, Type::I64, Type::Bool][usize::from(a) % 4];
                    match d % 5 {
                        0 => {
                            let x = pick(b, &pool, ty, c);
                            b.ins(Opcode::Push, Imm::None, &[x]);
                            None
                        }
                        1 => {
                            let inst = b.ins(Opcode::Pop, Imm::Type(ty), &[]);
                            Some(b.results(inst)[0])
                        }
                        2 => {
                            let n = pick(b, &pool, Type::I64, c);
                            let inst = b.ins(Opcode::TapeAlloc, Imm::Type(elem.ty()), &[n]);
                            Some(b.results(inst)[0])
                        }
                        4 => {
                            // A debug check, with a message that needs escapes now
                            // and then.
                            let cond = pick(b, &pool, Type::Bool, c);
                            b.trap_if(cond, MESSAGES[usize::from(a) % MESSAGES.len()]);
                            None
                        }
                        _ => {
                            let h = pick(b, &pool, Type::I64, c);
                            let inst = b.ins(Opcode::TapeView, Imm::Type(elem.ty()), &[h]);
                            let buf = b.results(inst)[0];
                            let i = pick(b, &pool, Type::I64, a);
                            Some(b.load(buf, i))
                        }
                    }
                }
                _ => {
                    // A diamond merging an i64.
                    let cond = pick(b, &pool, Type::Bool, d);
                    let (yes, no, join) = (
                        b.create_block("yes"),
                        b.create_block("no"),
                        b.create_block("join"),
                    );
                    b.br(cond, yes, no);
                    b.switch_to(yes);
                    let x = pick(b, &pool, Type::I64, a);
                    let x1 = b.iadd(x, x);
                    b.jump(join);
                    b.switch_to(no);
                    b.jump(join);
                    b.switch_to(join);
                    let k = pick(b, &pool, Type::I64, c);
                    Some(b.phi(Type::I64, &[(yes, x1), (no, k)]))
                }
            };
            if let Some(v) = v {
                let name = NAMES[usize::from(name) % NAMES.len()];
                if !name.is_empty() {
                    b.named(name, v);
                }
                let ty = b.func().values[v].ty;
                pool.push((ty, v));
            }
        }
        let (x, n) = (pick(b, &pool, Type::F64, 1), pick(b, &pool, Type::I64, 0));
        b.ret(&[x, n]);
    })
}

/// Tokens of the text format, valid and not, for random sequences.
const TOKENS: &[&str] = &[
    "%x",
    "%0",
    "%a.b",
    "%acc",
    "@f",
    "@g",
    "entry",
    "body",
    "0",
    "1",
    "-7",
    "0x10",
    "0xFFFFFFFFFFFFFFFFF",
    "99999999999999999999",
    "1.5",
    "-2.5e-3",
    "1e",
    "inf",
    "-inf",
    "nan",
    "true",
    "false",
    "func",
    "extern",
    "overlay",
    "vjp",
    "jvp",
    "nodiff",
    "phi",
    "jump",
    "br",
    "ret",
    "mut",
    "(",
    ")",
    "[",
    "]",
    "{",
    "}",
    ",",
    ":",
    "=",
    "->",
    ";",
    "$",
    "%",
    "f64",
    "f32",
    "i64",
    "bool",
    "[f64]",
    "mut [i64]",
    "eq",
    "lt",
    "ge",
    "\n",
    "\"msg\"",
    "\"a \\\"b\\\" \\\\ \\n\\t\\u{7f}\"",
    "\"bad \\q\"",
    "\"\\u{d800}\"",
    "\"open",
    "\"",
    "\\",
];

/// A strategy for random token sequences, sometimes inside a function header.
fn token_soup() -> impl Strategy<Value = String> {
    let token = prop_oneof![
        3 => prop::sample::select(TOKENS).prop_map(str::to_string),
        1 => prop::sample::select(Opcode::ALL).prop_map(|op| op.name().to_string()),
    ];
    (prop::collection::vec(token, 0..60), 0..3u8).prop_map(|(toks, prefix)| {
        let body = toks.join(" ");
        match prefix {
            0 => body,
            1 => format!("func @f(%x: f64, %n: i64) -> f64 {{\nentry:\n{body}\n}}"),
            _ => format!(
                "func @f(%x: f64) -> f64 {{\nentry:\n    %y = fneg %x\n{body}\n    ret %y\n}}"
            ),
        }
    })
}

/// Whatever parses prints to a fixed point and goes through the verifier; whatever
/// verifies still verifies after the round trip and runs on the interpreter without
/// an interpreter bug (`Malformed` or `Internal`); nothing panics.
fn parse_never_panics(text: &str) -> Result<(), TestCaseError> {
    match parse(text) {
        Ok(m) => {
            let once = m.to_string();
            let again = parse(&once).map_err(|e| TestCaseError::fail(format!("{e}\n{once}")))?;
            prop_assert_eq!(&again.to_string(), &once);
            let verified = verify(&m);
            prop_assert_eq!(verified.is_ok(), verify(&again).is_ok(), "{}", once);
            if verified.is_ok() {
                run_scalar_functions(&m, &once)?;
            }
        }
        Err(errors) => {
            prop_assert!(!errors.0.is_empty());
            prop_assert!(errors.0.windows(2).all(|w| w[0].pos < w[1].pos));
            prop_assert!(errors.0.iter().all(|e| e.pos.is_known()));
        }
    }
    Ok(())
}

/// Runs every defined function of a verified module whose parameters are all scalars,
/// on zeros, with bounded fuel and depth: program errors are fine, a `Malformed` or
/// `Internal` error means a verified module broke the interpreter's assumptions.
fn run_scalar_functions(m: &Module, text: &str) -> Result<(), TestCaseError> {
    let limits = Limits {
        max_depth: 100,
        fuel: Some(10_000),
    };
    let mut interp = Interpreter::new(m).with_limits(limits);
    for (id, _) in m.defined() {
        let args: Option<Vec<Val>> = m
            .sig(id)
            .params
            .iter()
            .map(|&t| Scalar::zero(t).map(Val::from))
            .collect();
        let Some(mut args) = args else { continue };
        if let Err(e) = interp.call(id, &mut args) {
            prop_assert!(
                !matches!(e.kind, ErrorKind::Malformed(_) | ErrorKind::Internal(_)),
                "{e}\n{text}"
            );
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..300)) {
        parse_never_panics(&String::from_utf8_lossy(&bytes))?;
    }

    #[test]
    fn random_tokens_never_panic(text in token_soup()) {
        parse_never_panics(&text)?;
    }

    #[test]
    fn mutated_programs_never_panic(
        which in 0..CORPUS.len(),
        edits in prop::collection::vec((any::<prop::sample::Index>(), 0..3u8, prop::sample::select(&[" ", "\n", "%", "@", ",", "1", "x", ":", "]", "}", "ret", "phi", "\"", "\\"][..])), 1..4),
    ) {
        let mut text = CORPUS[which].to_string();
        for (at, kind, s) in edits {
            let mut i = at.index(text.len() + 1);
            while !text.is_char_boundary(i) {
                i -= 1;
            }
            match kind {
                0 => text.insert_str(i, s),
                1 => {
                    let end = (i + 3).min(text.len());
                    if text.is_char_boundary(end) {
                        text.replace_range(i..end, "");
                    }
                }
                _ => text.replace_range(i..i, s),
            }
        }
        parse_never_panics(&text)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn random_functions_round_trip(
        steps in prop::collection::vec((any::<u8>(), any::<u16>(), any::<u16>(), any::<u16>(), any::<u8>()), 0..30),
    ) {
        let m = random_function(&steps);
        let once = m.to_string();
        let parsed = parse(&once).map_err(|e| TestCaseError::fail(format!("{e}\n{once}")))?;
        prop_assert_eq!(parsed.to_string(), once.clone());
        prop_assert_eq!(shape(&parsed).len(), shape(&m).len());
        if constants_print_back_as_themselves(&m) {
            // Then the parsed program is the same program: same types, same constants.
            prop_assert_eq!(shape(&parsed), shape(&m), "\n{}", once);
            prop_assert_eq!(constants(&parsed), constants(&m), "\n{}", once);
        }
    }
}

#[test]
fn the_random_function_generator_makes_both_kinds_of_constants() {
    // The property above is only strong if most generated functions keep their
    // constants' types; a `select` of two f32 literals is one that does not.
    let keeps = random_function(&[(0, 5, 1, 1, 0), (22, 1, 2, 0, 3)]);
    assert!(constants_print_back_as_themselves(&keeps), "{keeps}");
    let changes = random_function(&[(14, 5, 10, 1, 0)]);
    assert!(!constants_print_back_as_themselves(&changes), "{changes}");
    let text = changes.to_string();
    assert!(text.contains("select"), "{text}");
}
