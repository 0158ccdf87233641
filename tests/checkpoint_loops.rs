//! Checkpointed loops (`checkpoint_loop %s` in a loop's header): the gradient must
//! be the unchecked loop's, bit for bit, on the interpreter and on the JIT, for
//! every number of snapshots (1, 2, 3, 10, sqrt(T), T, more than T, automatic), and
//! the steps the pullback runs again must be the binomial minimum, computed here
//! by an independent dynamic program (and checked against the closed form for
//! long loops). The tape's peak must grow with the snapshots, not with the steps.

#[path = "common/bits.rs"]
mod bits;
use bits::bits;

use gradlift::adjoint::{
    CheckOptions, Rule, RuleConfig, Seeds, build_hvp, build_rrule, build_rrule_width,
    check_derived, hvp_vals, value_and_gradient,
};
use gradlift::ir::interp::{Interpreter, Val};
use gradlift::ir::{FuncId, Module, Opcode, parse, verify};
use gradlift::{CompiledFunction, CompiledGradient, Pipeline, Workspace};

/// `m` without its `checkpoint_loop` markers: the unchecked program.
fn unmarked(m: &Module) -> Module {
    let mut out = m.clone();
    let ids: Vec<FuncId> = out.defined().map(|(id, _)| id).collect();
    for id in ids {
        let f = out.function_mut(id).unwrap();
        for (b, inst) in f.placed_insts().collect::<Vec<_>>() {
            if f.insts[inst].opcode == Opcode::CheckpointLoop {
                f.remove_inst(b, inst);
            }
        }
    }
    verify(&out).unwrap_or_else(|e| panic!("{e}"));
    out
}

/// Value, gradient and final arguments as bits; the tape's peak; the steps run
/// again.
#[derive(Debug)]
struct Run {
    out: Vec<Vec<u64>>,
    peak: usize,
    recomputed: u64,
}

fn flatten(value: &Option<Vec<Val>>, gradient: &[Option<Val>], args: &[Val]) -> Vec<Vec<u64>> {
    let mut out: Vec<Vec<u64>> = value.iter().flatten().map(bits).collect();
    out.extend(gradient.iter().map(|g| g.as_ref().map_or(vec![], bits)));
    out.extend(args.iter().map(bits));
    out
}

fn interp(rule: &Rule, args: &[Val]) -> Run {
    let mut e = Interpreter::new(&rule.module);
    let g = value_and_gradient(&mut e, rule, args, &Seeds::default())
        .unwrap_or_else(|err| panic!("{err}\n{}", rule.module));
    Run {
        out: flatten(&g.value, &g.gradient, &g.args),
        peak: g.tape_peak_bytes,
        recomputed: g.recomputed_steps,
    }
}

fn jit(rule: &Rule, args: &[Val]) -> Run {
    let grad = Pipeline::new().compile_rule(rule.clone()).unwrap();
    let g = grad
        .value_and_gradient(&mut Workspace::new(), args)
        .unwrap();
    Run {
        out: flatten(&g.value, &g.gradient, &g.args),
        peak: g.tape_peak_bytes,
        recomputed: g.recomputed_steps,
    }
}

/// The fewest forward steps that reverse `n` steps with the state at the first
/// held and `s` snapshots in all (the held one included): the recurrence of
/// binomial checkpointing, by dynamic programming.
fn min_forward_steps(n: usize, s: usize) -> u64 {
    // f[s][n]
    let mut f = vec![vec![0u64; n + 1]; s + 1];
    for (k, x) in f[1].iter_mut().enumerate() {
        *x = (k * k.saturating_sub(1) / 2) as u64;
    }
    for ss in 2..=s {
        for k in 2..=n {
            f[ss][k] = (1..k)
                .map(|m| m as u64 + f[ss - 1][k - m] + f[ss][m])
                .min()
                .unwrap();
        }
    }
    f[s][n]
}

/// The closed form of the same: `r n - C(s + r, s - 1)` with `C(s + r - 1, s) < n
/// <= C(s + r, s)`.
fn closed_form(n: u64, s: u64) -> u64 {
    let binom = |a: u64, b: u64| -> u128 {
        let mut r: u128 = 1;
        for i in 0..b {
            r = r * u128::from(a - i) / u128::from(i + 1);
        }
        r
    };
    let beta = |s: u64, r: u64| binom(s + r, s);
    let mut r = 0;
    while beta(s, r) < u128::from(n) {
        r += 1;
    }
    (u128::from(r) * u128::from(n) - if r == 0 { 0 } else { binom(s + r, s + 1) }) as u64
}

/// The steps the pullback runs again for `t` steps and `s` snapshots: the
/// minimum less the `t - 1` steps of the forward sweep.
fn recomputed(t: usize, s: usize) -> u64 {
    if t == 0 {
        0
    } else {
        min_forward_steps(t, s) - (t as u64 - 1)
    }
}

/// The snapshots a marker of `given` gives `t` steps: `given`, or `ceil(sqrt(t))`
/// when it is not positive; within 1 and `t`.
fn effective(given: i64, t: usize) -> usize {
    let s = if given > 0 {
        given as usize
    } else {
        (t as f64).sqrt().ceil() as usize
    };
    s.clamp(1, t.max(1))
}

#[test]
fn the_closed_form_is_the_dynamic_program() {
    for s in 1..8 {
        for n in 1..80 {
            assert_eq!(
                min_forward_steps(n, s),
                closed_form(n as u64, s as u64),
                "n {n}, s {s}"
            );
        }
    }
}

const ODE: &str = include_str!("../examples/ir/ode.ir");

/// `ode` with its loop checkpointed by a new last parameter `%S`.
fn ode_marked() -> Module {
    let text = ODE
        .replace("%T: i64) -> f64 {", "%T: i64, %S: i64) -> f64 {")
        .replace(
            "    %more = icmp lt %t, %T",
            "    checkpoint_loop %S\n    %more = icmp lt %t, %T",
        );
    let m = parse(&text).unwrap_or_else(|e| panic!("{e}"));
    verify(&m).unwrap();
    m
}

fn ode_args(t: i64, s: i64) -> Vec<Val> {
    let f = Val::F64;
    vec![
        f(1.5),
        f(1.0),
        f(3.0),
        f(1.0),
        f(1.0),
        f(1.0),
        Val::I64(t),
        Val::I64(s),
    ]
}

/// Both rules at `args` on both engines: the same bits; the checkpointed one's
/// recomputed steps.
fn compare(marked: &Module, name: &str, config: Option<RuleConfig>, args: &[Val]) -> (Run, Run) {
    let plain = unmarked(marked);
    let id = marked.func_by_name(name).unwrap();
    let config = config
        .unwrap_or_else(|| RuleConfig::default_for(marked.sig(id)))
        .with_fuse(false);
    let want = build_rrule(&plain, id, &config).unwrap();
    let got = build_rrule(marked, id, &config).unwrap_or_else(|e| panic!("@{name}: {e}"));
    assert!(
        got.module
            .funcs
            .iter()
            .any(|(_, d)| d.name.contains(".loop")),
        "@{name}: no loop was outlined"
    );
    let (wi, gi) = (interp(&want, args), interp(&got, args));
    assert_eq!(wi.out, gi.out, "@{name} at {args:?}: interpreter");
    let (wj, gj) = (jit(&want, args), jit(&got, args));
    assert_eq!(wj.out, gj.out, "@{name} at {args:?}: JIT");
    assert_eq!(
        gi.out, gj.out,
        "@{name} at {args:?}: interpreter against JIT"
    );
    assert_eq!(gi.recomputed, gj.recomputed, "@{name} at {args:?}");
    assert_eq!(gi.peak, gj.peak, "@{name} at {args:?}: peaks");
    (wi, gi)
}

#[test]
fn ode_is_bit_for_bit_for_every_number_of_snapshots() {
    let m = ode_marked();
    for t in [0usize, 1, 2, 3, 5, 13, 40] {
        let root = (t as f64).sqrt().ceil() as i64;
        for s in [1, 2, 3, 10, root, t as i64, t as i64 + 3, 0, -1] {
            let (_, got) = compare(&m, "ode", None, &ode_args(t as i64, s));
            let want = recomputed(t, effective(s, t));
            assert_eq!(got.recomputed, want, "T {t}, S {s}");
        }
    }
}

#[test]
fn long_ode_recomputes_the_binomial_minimum() {
    let m = ode_marked();
    let t = 1000usize;
    for s in [1i64, 2, 3, 10, 32] {
        let (plain, got) = compare(&m, "ode", None, &ode_args(t as i64, s));
        let want = closed_form(t as u64, s as u64) - (t as u64 - 1);
        assert_eq!(got.recomputed, want, "S {s}");
        // Snapshots of (u, v, step, level), one step's tape, the inputs: not T.
        assert!(
            got.peak <= 32 * s as usize + 400,
            "S {s}: {} bytes",
            got.peak
        );
        assert!(plain.peak >= 16 * t, "{}", plain.peak);
    }
}

#[test]
fn a_budget_in_bytes_picks_the_snapshots() {
    let m = ode_marked();
    let t = 500usize;
    // A snapshot of ode's loop: u, v, the step, the level: 32 bytes.
    for (bytes, s) in [(32u64, 1usize), (100, 3), (320, 10), (1 << 20, 500)] {
        let id = m.func_by_name("ode").unwrap();
        let config = RuleConfig::default_for(m.sig(id)).with_checkpoint_bytes(Some(bytes));
        let (_, got) = compare(&m, "ode", Some(config), &ode_args(t as i64, 0));
        assert_eq!(got.recomputed, recomputed(t, s), "{bytes} bytes");
        assert!(
            got.peak <= bytes as usize + 400,
            "{bytes} bytes: peak {}",
            got.peak
        );
    }
}

/// Loops that read slices (one of them overwritten after the loop), carry an
/// integer, branch, hold an inner loop and calls; nested checkpointed loops.
const PROGRAMS: &str = r#"
func @slices(%x: [f64], %w: mut [f64], %a: f64, %T: i64, %S: i64) -> f64 {
entry:
    %n = len %x
    %m = len %w
    jump head
head:
    %t = phi i64 [entry: 0, latch: %t1]
    %acc = phi f64 [entry: 0.0, latch: %acc2]
    %k = phi i64 [entry: 1, latch: %k2]
    %y = phi f64 [entry: %a, latch: %y2]
    checkpoint_loop %S
    %more = icmp lt %t, %T
    br %more, body, exit
body:
    %ix = irem %t, %n
    %xi = load %x[%ix]
    %k1 = imul %k, 7
    %k2 = irem %k1, 13
    %iw = irem %k2, %m
    %wi = load %w[%iw]
    %pos = fcmp gt %xi, 0.0
    br %pos, up, down
up:
    %p = fmul %xi, %y
    %q = fmul %p, %a
    jump join
down:
    %p2 = fmul %wi, %a
    %q2 = sin %p2
    jump join
join:
    %z = phi f64 [up: %q, down: %q2]
    jump inner
inner:
    %j = phi i64 [join: 0, inner_body: %j1]
    %s = phi f64 [join: %z, inner_body: %s1]
    %more2 = icmp lt %j, 3
    br %more2, inner_body, latch
inner_body:
    %sa = fmul %s, %a
    %sc = cos %sa
    %s1 = fadd %s, %sc
    %j1 = iadd %j, 1
    jump inner
latch:
    %ys = fmul %s, 0.01
    %y1 = fadd %y, %ys
    %y2 = call @damp(%y1, %a)
    %acc1 = fadd %acc, %s
    %acc2 = fmul %acc1, 0.9
    %t1 = iadd %t, 1
    jump head
exit:
    store %w[0], %acc
    %w0 = load %w[0]
    %r = fmul %w0, %y
    ret %r
}
func @damp(%y: f64, %a: f64) -> f64 {
entry:
    %ay = fmul %a, %y
    %t = tanh %ay
    %r = fadd %y, %t
    %h = fmul %r, 0.5
    ret %h
}

; %c comes into the loop but reaches nothing it returns: inactive, as in the loop
; written out, so the gradient of %p is the literal 0.0 (a zero cotangent through
; acos would be -0.0). Found by the fuzzer's cross-check.
func @g(%x: f64) -> f64 {
entry:
    %y = sin %x
    ret %y
}
func @zero_sign(%p: f64, %q: f64, %n: i64, %S: i64) -> f64 {
entry:
    %t = tanh %p
    %s = fmul %t, 0.95
    %c = acos %s
    jump head
head:
    %i = phi i64 [entry: 0, body: %i1]
    %v = phi f64 [entry: %q, body: %v1]
    checkpoint_loop %S
    %more = icmp lt %i, %n
    br %more, body, exit
body:
    %unused = call @g(%c)
    %l = fmul %v, 0.5
    %v1 = fadd %l, 0.25
    %i1 = iadd %i, 1
    jump head
exit:
    ret %v
}

func @nested(%a: f64, %b: f64, %T: i64, %S: i64) -> f64 {
entry:
    jump head
head:
    %t = phi i64 [entry: 0, after: %t1]
    %x = phi f64 [entry: %b, after: %x2]
    checkpoint_loop %S
    %more = icmp lt %t, %T
    br %more, body, exit
body:
    jump ihead
ihead:
    %j = phi i64 [body: 0, ibody: %j1]
    %u = phi f64 [body: %x, ibody: %u1]
    checkpoint_loop 2
    %imore = icmp lt %j, 4
    br %imore, ibody, after
ibody:
    %au = fmul %a, %u
    %s = sin %au
    %u1 = fadd %u, %s
    %j1 = iadd %j, 1
    jump ihead
after:
    %x1 = fmul %u, 0.5
    %x2 = call @damp(%x1, %a) checkpoint
    %t1 = iadd %t, 1
    jump head
exit:
    ret %x
}
"#;

fn programs() -> Module {
    let m = parse(PROGRAMS).unwrap_or_else(|e| panic!("{e}"));
    verify(&m).unwrap_or_else(|e| panic!("{e}"));
    m
}

#[test]
fn loops_with_slices_branches_inner_loops_and_calls() {
    let m = programs();
    let x = Val::F64s(vec![0.5, -0.3, 1.2, -2.0, 0.7]);
    let w = Val::F64s(vec![0.2, 0.9, -0.4]);
    for t in [0i64, 1, 4, 17] {
        for s in [1, 2, 3, 10, 0] {
            let args = [
                x.clone(),
                w.clone(),
                Val::F64(0.8),
                Val::I64(t),
                Val::I64(s),
            ];
            let (_, got) = compare(&m, "slices", None, &args);
            let want = recomputed(t as usize, effective(s, t as usize));
            assert_eq!(got.recomputed, want, "T {t}, S {s}");
        }
    }
    // Against finite differences too.
    let id = m.func_by_name("slices").unwrap();
    let rule = build_rrule(&m, id, &RuleConfig::default_for(m.sig(id))).unwrap();
    let args = [x, w, Val::F64(0.8), Val::I64(9), Val::I64(2)];
    check_derived(&m, &rule, &args, &CheckOptions::for_sig(m.sig(id)))
        .unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn nested_checkpointed_loops() {
    let m = programs();
    for t in [0i64, 1, 3, 9] {
        for s in [1, 2, 5] {
            compare(
                &m,
                "nested",
                None,
                &[Val::F64(0.7), Val::F64(0.3), Val::I64(t), Val::I64(s)],
            );
        }
    }
    let id = m.func_by_name("nested").unwrap();
    let rule = build_rrule(&m, id, &RuleConfig::default_for(m.sig(id))).unwrap();
    // Two loops outlined: the inner one inside the outer one's step.
    let loops = rule
        .module
        .funcs
        .iter()
        .filter(|(_, d)| {
            d.name.starts_with("nested.loop")
                && !d.name.contains(".fwd")
                && !d.name.contains(".rvs")
        })
        .count();
    assert_eq!(loops, 2, "{}", rule.module);
    let args = [Val::F64(0.7), Val::F64(0.3), Val::I64(6), Val::I64(2)];
    check_derived(&m, &rule, &args, &CheckOptions::for_sig(m.sig(id)))
        .unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn values_the_loop_does_not_use_stay_inactive() {
    let m = programs();
    for n in [0i64, 3] {
        for s in [1i64, 2] {
            let (_, got) = compare(
                &m,
                "zero_sign",
                None,
                &[Val::F64(-1.5), Val::F64(0.4), Val::I64(n), Val::I64(s)],
            );
            // The gradient of %p: +0.0, not -0.0.
            assert_eq!(got.out[1], vec![0.0f64.to_bits()], "n {n}");
        }
    }
}

#[test]
fn the_rule_prints_and_parses_back() {
    let m = programs();
    let id = m.func_by_name("slices").unwrap();
    let rule = build_rrule(&m, id, &RuleConfig::default_for(m.sig(id))).unwrap();
    let text = rule.module.to_string();
    let back = parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    verify(&back).unwrap();
    assert_eq!(back.to_string(), text);
    assert!(text.contains("recompute "), "{text}");
}

#[test]
fn the_primal_and_other_modes_ignore_the_marker() {
    let m = ode_marked();
    let plain = unmarked(&m);
    let args = ode_args(25, 3);
    // The primal, compiled.
    let f = CompiledFunction::new(&m, "ode").unwrap();
    let g = CompiledFunction::new(&plain, "ode").unwrap();
    let mut ws = Workspace::new();
    let (mut a1, mut a2) = (args.clone(), args.clone());
    assert_eq!(
        f.call(&mut ws, &mut a1).unwrap(),
        g.call(&mut ws, &mut a2).unwrap()
    );
    // Reverse mode of width 2 keeps the loop (no checkpoint): the same as without.
    let id = m.func_by_name("ode").unwrap();
    let config = RuleConfig::default_for(m.sig(id)).with_fuse(false);
    let a = build_rrule_width(&m, id, &config, 2).unwrap();
    let b = build_rrule_width(&plain, id, &config, 2).unwrap();
    let seeds = Seeds::results([1.0, 0.5]);
    let ra = value_and_gradient(&mut Interpreter::new(&a.module), &a, &args, &seeds).unwrap();
    let rb = value_and_gradient(&mut Interpreter::new(&b.module), &b, &args, &seeds).unwrap();
    assert_eq!(ra, rb);
    // The end-to-end pipeline (optimiser included) agrees with the unchecked one.
    let cg = CompiledGradient::new(&m, "ode").unwrap();
    let pg = CompiledGradient::new(&plain, "ode").unwrap();
    let x = cg.value_and_gradient(&mut ws, &args).unwrap();
    let y = pg.value_and_gradient(&mut ws, &args).unwrap();
    assert_eq!(
        flatten(&x.value, &x.gradient, &x.args),
        flatten(&y.value, &y.gradient, &y.args)
    );
    assert!(x.recomputed_steps > 0 && y.recomputed_steps == 0);
}

#[test]
fn hessian_vector_products_through_a_checkpointed_loop() {
    let m = ode_marked();
    let plain = unmarked(&m);
    let id = m.func_by_name("ode").unwrap();
    let config = RuleConfig::default_for(m.sig(id)).with_fuse(false);
    let args = ode_args(30, 3);
    let dir: Vec<Option<Val>> = [0.3, -0.2, 0.5, 0.1, 1.0, -1.0]
        .iter()
        .map(|&d| Some(Val::F64(d)))
        .chain([None, None])
        .collect();
    let a = build_hvp(&m, id, &config, 1).unwrap();
    let b = build_hvp(&plain, id, &config, 1).unwrap();
    let ha = hvp_vals(&mut Interpreter::new(&a.module), &a, &args, &dir).unwrap();
    let hb = hvp_vals(&mut Interpreter::new(&b.module), &b, &args, &dir).unwrap();
    assert_eq!(ha, hb);
}

#[test]
fn loops_that_cannot_be_checkpointed_are_named() {
    let cases = [
        (
            "func @f(%x: f64, %n: i64) -> f64 {
            entry:
                checkpoint_loop 3
                jump head
            head:
                %i = phi i64 [entry: 0, body: %i1]
                %a = phi f64 [entry: %x, body: %a1]
                %more = icmp lt %i, %n
                br %more, body, exit
            body:
                %a1 = sin %a
                %i1 = iadd %i, 1
                jump head
            exit:
                ret %a
            }",
            "is not in the header of a loop",
        ),
        (
            "func @f(%x: f64, %n: i64) -> f64 {
            entry:
                jump head
            head:
                %i = phi i64 [entry: 0, body: %i1]
                %a = phi f64 [entry: %x, body: %a1]
                checkpoint_loop 3
                %more = icmp lt %i, %n
                br %more, body, exit
            body:
                %a1 = sin %a
                %big = fcmp gt %a1, 0.9
                %i1 = iadd %i, 1
                br %big, exit, head
            exit:
                %r = phi f64 [head: %a, body: %a1]
                ret %r
            }",
            "is left from block `body`",
        ),
        (
            "func @f(%x: f64, %s: mut [f64], %n: i64) -> f64 {
            entry:
                jump head
            head:
                %i = phi i64 [entry: 0, body: %i1]
                %a = phi f64 [entry: %x, body: %a1]
                checkpoint_loop 3
                %more = icmp lt %i, %n
                br %more, body, exit
            body:
                %a1 = sin %a
                store %s[0], %a1
                %i1 = iadd %i, 1
                jump head
            exit:
                ret %a
            }",
            "writes into a slice from outside the loop",
        ),
        (
            "func @f(%x: f64, %n: i64) -> f64 {
            entry:
                jump head
            head:
                %i = phi i64 [entry: 0, body: %i1]
                %a = phi f64 [entry: %x, body: %a1]
                checkpoint_loop 3
                %more = icmp lt %i, %n
                br %more, body, exit
            body:
                %a1 = sin %a
                %i1 = iadd %i, 2
                jump head
            exit:
                ret %a
            }",
            "its counter must step by `iadd %i, 1`",
        ),
    ];
    for (text, want) in cases {
        let m = parse(text).unwrap_or_else(|e| panic!("{e}"));
        let id = m.func_by_name("f").unwrap();
        let e = build_rrule(&m, id, &RuleConfig::default_for(m.sig(id)))
            .unwrap_err()
            .to_string();
        assert!(e.contains(want), "{e}");
        assert!(e.contains("checkpoint_loop"), "{e}");
        // The primal still runs: the marker computes nothing.
        CompiledFunction::new(&m, "f").unwrap();
    }
}

/// The body may use the header's test (true there): found by the fuzz campaign
/// (seed 23, malformed text 117), where outlining failed with an internal error.
#[test]
fn the_body_may_use_the_headers_test() {
    let m = parse(
        "func @f(%x: [f64]) -> f64 {
        entry:
            %n = len %x
            jump head
        head:
            %i = phi i64 [entry: 0, body: %i1]
            %acc = phi f64 [entry: 0.0, body: %acc1]
            checkpoint_loop 2
            %more = icmp lt %i, %n
            br %more, body, exit
        body:
            %xi = load %x[%i]
            %par = irem %i, 2
            %even = icmp eq %par, 0
            %both = and %even, %more
            %w = select %both, %xi, 0.5
            %t = fmul %w, %xi
            %acc1 = fadd %acc, %t
            %i1 = iadd %i, 1
            jump head
        exit:
            ret %acc
        }",
    )
    .unwrap();
    let x: Vec<f64> = (0..9).map(|i| (0.7 * i as f64).sin()).collect();
    compare(&m, "f", None, &[Val::F64s(x)]);
}
