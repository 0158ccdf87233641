//! Checkpointed calls (`call @g(..) checkpoint`) against the same calls without
//! the checkpoint: the gradient must be the same bit for bit, on the interpreter
//! and on the JIT, for every function of the memory corpus (the scalar corpus
//! makes no calls) and of `examples/ir` with every call checkpointed, and for programs written here for
//! the hard cases (slices written after the call, slices the callee writes,
//! recursion, nested checkpoints, local buffers, a checkpointed call in a loop).
//! Those are also checked against finite differences (`check_derived`), and the
//! tape's peak is checked to shrink where a checkpoint should shrink it.

#[path = "../adjoint/tests/corpus/inputs.rs"]
mod inputs;
#[path = "../jit/tests/support/mod.rs"]
#[allow(unused_imports)]
mod support;

#[path = "common/bits.rs"]
mod bits;
use bits::bits;

use gradlift::adjoint::{
    AdError, CheckOptions, Rule, RuleConfig, Seeds, build_rrule, check_derived, value_and_gradient,
};
use gradlift::ir::interp::{ErrorKind, Interpreter, Limits, Val};
use gradlift::ir::{FuncId, Module, Opcode, parse, verify};
use gradlift::{Pipeline, Workspace};

fn load(path: &str) -> Module {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let m = parse(&text).unwrap_or_else(|e| panic!("{path}: {e}"));
    verify(&m).unwrap_or_else(|e| panic!("{path}: {e}"));
    m
}

/// `m` with every call checkpointed; the number of calls marked.
fn checkpoint_all(m: &Module) -> (Module, usize) {
    let mut out = m.clone();
    let ids: Vec<FuncId> = out.defined().map(|(id, _)| id).collect();
    let mut n = 0;
    for id in ids {
        let f = out.function_mut(id).unwrap();
        for (_, inst) in f.placed_insts().collect::<Vec<_>>() {
            if f.insts[inst].opcode == Opcode::Call {
                f.insts[inst].checkpoint = true;
                n += 1;
            }
        }
    }
    verify(&out).unwrap_or_else(|e| panic!("{e}"));
    // The flag prints and parses back.
    let text = out.to_string();
    let back = parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert_eq!(back.to_string(), text);
    assert_eq!(text.matches(") checkpoint").count(), n);
    (out, n)
}

fn opt_bits(v: &Option<Val>) -> Option<Vec<u64>> {
    v.as_ref().map(bits)
}

/// What a gradient call gave, as bits: value, gradient, arguments after, or the
/// error's kind and place.
#[derive(PartialEq, Debug)]
enum Outcome {
    Ok {
        value: Option<Vec<Vec<u64>>>,
        gradient: Vec<Option<Vec<u64>>>,
        args: Vec<Vec<u64>>,
    },
    Err(String),
}

const LIMITS: Limits = Limits {
    max_depth: 10_000,
    fuel: Some(5_000_000),
};

fn interp_run(rule: &Rule, args: &[Val]) -> (Outcome, usize) {
    let mut interp = Interpreter::new(&rule.module).with_limits(LIMITS);
    match value_and_gradient(&mut interp, rule, args, &Seeds::default()) {
        Ok(g) => (
            Outcome::Ok {
                value: g.value.as_ref().map(|v| v.iter().map(bits).collect()),
                gradient: g.gradient.iter().map(opt_bits).collect(),
                args: g.args.iter().map(bits).collect(),
            },
            g.tape_peak_bytes,
        ),
        Err(gradlift::adjoint::EvalError::Run { error, .. }) => {
            let kind = match error.kind {
                ErrorKind::OutOfFuel(_) => "fuel".to_string(),
                k => format!("{:?}", core::mem::discriminant(&k)),
            };
            (Outcome::Err(kind), 0)
        }
        Err(e) => panic!("{e}"),
    }
}

fn jit_run(rule: Rule, args: &[Val]) -> Outcome {
    let grad = Pipeline::new().compile_rule(rule).unwrap();
    let mut ws = Workspace::new();
    match grad.value_and_gradient(&mut ws, args) {
        Ok(g) => Outcome::Ok {
            value: g.value.as_ref().map(|v| v.iter().map(bits).collect()),
            gradient: g.gradient.iter().map(opt_bits).collect(),
            args: g.args.iter().map(bits).collect(),
        },
        Err(gradlift::Error::Run(e)) => {
            Outcome::Err(format!("{:?}", core::mem::discriminant(&e.kind)))
        }
        Err(e) => panic!("{e}"),
    }
}

#[derive(Default, Debug)]
struct Tally {
    compared: usize,
    errors: usize,
    checkpointed_rules: usize,
}

/// The rule of `@name` under `config` in `plain` and in `marked` (every call
/// checkpointed), run at every point on both engines: the same bits everywhere.
fn compare(
    plain: &Module,
    marked: &Module,
    name: &str,
    config: &RuleConfig,
    points: &[Vec<Val>],
    tally: &mut Tally,
) -> Result<(), AdError> {
    let id = plain.func_by_name(name).unwrap();
    let config = config.clone().with_fuse(false);
    let want = build_rrule(plain, id, &config)?;
    let got = build_rrule(marked, id, &config).unwrap_or_else(|e| panic!("@{name}: {e}"));
    if got
        .module
        .funcs
        .iter()
        .any(|(_, d)| d.name.contains(".ckpt."))
    {
        tally.checkpointed_rules += 1;
    }
    for args in points {
        let at = support::show(args);
        let (w, _) = interp_run(&want, args);
        if w == Outcome::Err("fuel".into()) {
            continue;
        }
        let (g, _) = interp_run(&got, args);
        assert_eq!(
            w, g,
            "@{name} {config:?} at {at}: interpreter\n{}",
            got.module
        );
        let (wj, gj) = (jit_run(want.clone(), args), jit_run(got.clone(), args));
        assert_eq!(wj, gj, "@{name} {config:?} at {at}: JIT");
        match w {
            Outcome::Ok { .. } => tally.compared += 1,
            Outcome::Err(_) => tally.errors += 1,
        }
    }
    Ok(())
}

fn compare_variants(
    plain: &Module,
    marked: &Module,
    name: &str,
    points: &[Vec<Val>],
    tally: &mut Tally,
) {
    let id = plain
        .func_by_name(name)
        .unwrap_or_else(|| panic!("no @{name}"));
    let default = RuleConfig::default_for(plain.sig(id));
    compare(plain, marked, name, &default, points, tally)
        .unwrap_or_else(|e| panic!("@{name}: {e}"));
    let (consts, always) = inputs::config_variants(&default);
    for c in consts.iter().chain(&always) {
        match compare(plain, marked, name, c, &points[..1], tally) {
            Ok(()) | Err(AdError::ConstWrite { .. }) => {}
            Err(e) => panic!("@{name} {c:?}: {e}"),
        }
    }
}

fn corpus(file: &str) -> Module {
    load(&format!(
        "{}/adjoint/tests/corpus/{file}",
        env!("CARGO_MANIFEST_DIR")
    ))
}

#[test]
fn the_memory_corpus_with_every_call_checkpointed() {
    let (tally, calls) = support::big_stack(|| {
        let m = corpus("memory.ir");
        let (marked, calls) = checkpoint_all(&m);
        let mut tally = Tally::default();
        for (name, points) in &inputs::memory_inputs() {
            compare_variants(&m, &marked, name, points, &mut tally);
        }
        for (id, _) in m.defined() {
            let config = RuleConfig::default_for(m.sig(id));
            let points = support::generic_points(m.sig(id), 6);
            let _ = compare(&m, &marked, m.name(id), &config, &points, &mut tally);
        }
        (tally, calls)
    });
    eprintln!("memory.ir: {calls} calls; {tally:?}");
    assert!(
        calls >= 10 && tally.checkpointed_rules >= 10,
        "{calls} {tally:?}"
    );
    assert!(tally.compared >= 150 && tally.errors >= 5, "{tally:?}");
}

#[test]
fn every_example_with_every_call_checkpointed() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/ir");
    let mut files: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|p| p.ends_with(".ir"))
        .collect();
    files.sort();
    let mut tally = Tally::default();
    let mut total = 0;
    for file in &files {
        let m = load(&format!("{dir}/{file}"));
        let (marked, calls) = checkpoint_all(&m);
        total += calls;
        for (id, _) in m.defined() {
            let config = RuleConfig::default_for(m.sig(id));
            let points = support::generic_points(m.sig(id), 6);
            // @wave calls a host function without a derivative: refused both ways.
            let _ = compare(&m, &marked, m.name(id), &config, &points, &mut tally);
        }
    }
    eprintln!("examples: {total} calls; {tally:?}");
    assert!(
        total >= 5 && tally.checkpointed_rules >= 5,
        "{total} {tally:?}"
    );
}

/// Programs for the cases a checkpoint must get right, each with points.
const HARD: &str = r#"
; The callee reads %s; the caller overwrites it after the call.
func @read(%x: f64, %s: [f64]) -> f64 {
entry:
    %a = load %s[0]
    %b = load %s[1]
    %y = fmul %x, %a
    %z = fmul %y, %b
    %w = sin %z
    ret %w
}
func @read_then_write(%x: f64, %s: mut [f64]) -> f64 {
entry:
    %y = call @read(%x, %s) checkpoint
    %y2 = fmul %y, 3.0
    store %s[0], %y2
    store %s[1], %x
    %t = call @read(%y2, %s) checkpoint
    %r = fadd %t, %y
    ret %r
}

; The callee writes into %s, which it also reads; the caller reads it after.
func @scale(%s: mut [f64], %k: f64) {
entry:
    %n = len %s
    jump head
head:
    %i = phi i64 [entry: 0, body: %i1]
    %more = icmp lt %i, %n
    br %more, body, exit
body:
    %v = load %s[%i]
    %v2 = fmul %v, %k
    %v3 = sin %v2
    store %s[%i], %v3
    %i1 = iadd %i, 1
    jump head
exit:
    ret
}
func @write_twice(%s: mut [f64], %k: f64) -> f64 {
entry:
    call @scale(%s, %k) checkpoint
    %k2 = fmul %k, 0.5
    call @scale(%s, %k2) checkpoint
    %a = load %s[0]
    %b = load %s[1]
    %r = fmul %a, %b
    ret %r
}

; Recursion through a checkpointed call: x^n by halving, with a sin on the way.
func @rpow(%x: f64, %n: i64) -> f64 {
entry:
    %small = icmp le %n, 0
    br %small, base, step
base:
    ret 1.0
step:
    %h = idiv %n, 2
    %p = call @rpow(%x, %h) checkpoint
    %pp = fmul %p, %p
    %odd = irem %n, 2
    %is = icmp ne %odd, 0
    br %is, mul, done
mul:
    %s = sin %x
    %q = fmul %pp, %s
    ret %q
done:
    ret %pp
}

; Nested: a checkpointed call to a function that makes checkpointed calls, with a
; local buffer in between.
func @inner(%a: f64, %b: f64) -> f64 {
entry:
    %p = fmul %a, %b
    %e = exp %p
    %l = fadd %e, %a
    ret %l
}
func @middle(%x: f64, %s: [f64]) -> f64 {
entry:
    %n = len %s
    %buf = alloc f64, %n
    jump head
head:
    %i = phi i64 [entry: 0, body: %i1]
    %acc = phi f64 [entry: 0.0, body: %acc1]
    %more = icmp lt %i, %n
    br %more, body, exit
body:
    %v = load %s[%i]
    %t = call @inner(%v, %x) checkpoint
    store %buf[%i], %t
    %u = load %buf[%i]
    %u2 = fmul %u, %v
    %acc1 = fadd %acc, %u2
    %i1 = iadd %i, 1
    jump head
exit:
    ret %acc
}
func @outer(%x: f64, %s: [f64]) -> f64 {
entry:
    %a = call @middle(%x, %s) checkpoint
    %x2 = fmul %x, %a
    %b = call @middle(%x2, %s) checkpoint
    %r = fadd %a, %b
    ret %r
}

; A checkpointed call in a loop: a time-stepping simulation whose step has a
; loop of its own (its tape would be 4 scalars per inner iteration).
func @step(%u: f64, %v: f64, %dt: f64) -> (f64, f64) {
entry:
    jump head
head:
    %k = phi i64 [entry: 0, body: %k1]
    %a = phi f64 [entry: %u, body: %a1]
    %b = phi f64 [entry: %v, body: %b1]
    %more = icmp lt %k, 10
    br %more, body, exit
body:
    %ab = fmul %a, %b
    %da = fsub %a, %ab
    %db = fsub %ab, %b
    %sa = fmul %da, %dt
    %sb = fmul %db, %dt
    %a1 = fadd %a, %sa
    %b1 = fadd %b, %sb
    %k1 = iadd %k, 1
    jump head
exit:
    ret %a, %b
}
func @simulate(%u0: f64, %v0: f64, %dt: f64, %T: i64) -> f64 {
entry:
    jump head
head:
    %t = phi i64 [entry: 0, body: %t1]
    %u = phi f64 [entry: %u0, body: %u1]
    %v = phi f64 [entry: %v0, body: %v1]
    %more = icmp lt %t, %T
    br %more, body, exit
body:
    %u1, %v1 = call @step(%u, %v, %dt) checkpoint
    %t1 = iadd %t, 1
    jump head
exit:
    %r = fmul %u, %v
    ret %r
}
"#;

fn hard() -> (Module, Module) {
    let marked = parse(HARD).unwrap_or_else(|e| panic!("{e}"));
    verify(&marked).unwrap_or_else(|e| panic!("{e}"));
    let mut plain = marked.clone();
    let ids: Vec<FuncId> = plain.defined().map(|(id, _)| id).collect();
    for id in ids {
        let f = plain.function_mut(id).unwrap();
        for inst in f.insts.values_mut() {
            inst.checkpoint = false;
        }
    }
    (plain, marked)
}

fn xs(v: &[f64]) -> Val {
    Val::F64s(v.to_vec())
}

fn hard_points() -> Vec<(&'static str, Vec<Vec<Val>>)> {
    let f = Val::F64;
    vec![
        (
            "read_then_write",
            vec![
                vec![f(0.7), xs(&[1.3, 0.4])],
                vec![f(-0.2), xs(&[0.5, 2.0, 9.0])],
            ],
        ),
        (
            "write_twice",
            vec![
                vec![xs(&[0.3, 0.9, -0.4]), f(1.7)],
                vec![xs(&[1.1, 0.2]), f(-0.6)],
            ],
        ),
        (
            "rpow",
            vec![vec![f(1.1), Val::I64(13)], vec![f(0.9), Val::I64(6)]],
        ),
        (
            "outer",
            vec![
                vec![f(0.3), xs(&[0.2, -0.5, 0.7])],
                vec![f(-0.1), xs(&[1.0])],
            ],
        ),
        (
            "simulate",
            vec![
                vec![f(1.0), f(0.5), f(0.01), Val::I64(50)],
                vec![f(0.8), f(1.2), f(0.02), Val::I64(7)],
            ],
        ),
    ]
}

#[test]
fn the_hard_cases_are_bit_for_bit_on_both_engines() {
    let (plain, marked) = hard();
    let mut tally = Tally::default();
    for (name, points) in &hard_points() {
        compare_variants(&plain, &marked, name, points, &mut tally);
    }
    eprintln!("{tally:?}");
    assert!(
        tally.checkpointed_rules >= 10 && tally.compared >= 20,
        "{tally:?}"
    );
}

#[test]
fn the_hard_cases_match_finite_differences() {
    let (_, marked) = hard();
    for (name, points) in &hard_points() {
        let id = marked.func_by_name(name).unwrap();
        let rule = build_rrule(&marked, id, &RuleConfig::default_for(marked.sig(id))).unwrap();
        assert!(rule.module.func_by_name(&format!("{name}.fwd")).is_some());
        let opts = CheckOptions::for_sig(marked.sig(id));
        for args in points {
            check_derived(&marked, &rule, args, &opts)
                .unwrap_or_else(|e| panic!("@{name} at {args:?}: {e}\n{}", rule.module));
        }
    }
}

#[test]
fn a_checkpointed_step_keeps_its_inputs_not_its_tape() {
    let (plain, marked) = hard();
    let id = plain.func_by_name("simulate").unwrap();
    let config = RuleConfig::default_for(plain.sig(id)).with_fuse(false);
    let args = [Val::F64(1.0), Val::F64(0.5), Val::F64(0.01), Val::I64(200)];
    let (_, without) = interp_run(&build_rrule(&plain, id, &config).unwrap(), &args);
    let (_, with) = interp_run(&build_rrule(&marked, id, &config).unwrap(), &args);
    // Without: per step, the step's tape (10 iterations of saved values). With: per
    // step, its three scalar inputs, plus one step's tape while it is reversed.
    eprintln!("peak tape: {without} bytes without the checkpoint, {with} with");
    assert!(with * 4 < without, "{with} vs {without}");
    assert!(with <= 200 * 3 * 8 + 2000, "{with}");
}

#[test]
fn a_checkpoint_on_a_call_without_a_tape_changes_nothing() {
    // A call to a `vjp` function saves its arguments anyway; a `nodiff` one has no
    // derivative. Both accept the flag and derive as without it.
    let text = "
        func @g(%x: f64) -> f64 {
        entry:
            %y = fmul %x, %x
            ret %y
        }
        func @dg(%x: f64, %dy: f64) -> f64 {
        entry:
            %t = fmul %x, 2.0
            %r = fmul %t, %dy
            ret %r
        }
        vjp @g = @dg
        func @h(%x: f64) -> f64 {
        entry:
            %y = sin %x
            ret %y
        }
        nodiff @h
        func @f(%x: f64) -> f64 {
        entry:
            %a = call @g(%x) checkpoint
            %b = call @h(%x) checkpoint
            %r = fadd %a, %b
            ret %r
        }
    ";
    let m = parse(text).unwrap();
    let id = m.func_by_name("f").unwrap();
    let rule = build_rrule(&m, id, &RuleConfig::default_for(m.sig(id))).unwrap();
    assert!(
        rule.module
            .funcs
            .iter()
            .all(|(_, d)| !d.name.contains(".ckpt."))
    );
    let (out, _) = interp_run(&rule, &[Val::F64(0.5)]);
    let Outcome::Ok { gradient, .. } = out else {
        panic!("{out:?}")
    };
    assert_eq!(gradient[0], Some(vec![1.0f64.to_bits()]));
}

#[test]
fn only_a_call_may_carry_the_flag() {
    let mut m = parse(
        "func @f(%x: f64) -> f64 {
        entry:
            %y = fmul %x, %x
            ret %y
        }",
    )
    .unwrap();
    let id = m.func_by_name("f").unwrap();
    let f = m.function_mut(id).unwrap();
    for inst in f.insts.values_mut() {
        inst.checkpoint = true;
    }
    let e = verify(&m).unwrap_err().to_string();
    assert!(
        e.contains("only a call may be checkpointed, not fmul"),
        "{e}"
    );
}

#[test]
fn the_optimiser_keeps_checkpointed_calls() {
    // A small callee is inlined without the flag, kept with it.
    let text = "
        func @g(%x: f64) -> f64 {
        entry:
            %y = fmul %x, %x
            ret %y
        }
        func @f(%x: f64) -> f64 {
        entry:
            %a = call @g(%x) checkpoint
            %b = call @g(%a)
            %r = fadd %a, %b
            ret %r
        }
    ";
    let m = parse(text).unwrap();
    let prepared = Pipeline::new().prepare(&m, "f").unwrap();
    let f = prepared.module.function(prepared.func).unwrap();
    let calls: Vec<bool> = f
        .placed_insts()
        .filter(|&(_, i)| f.insts[i].opcode == Opcode::Call)
        .map(|(_, i)| f.insts[i].checkpoint)
        .collect();
    assert_eq!(calls, [true], "{}", prepared.module);
}
