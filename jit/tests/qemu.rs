//! Object files run right on aarch64: functions compiled by `compile_object` for
//! `aarch64-unknown-linux-gnu`, linked with a generated C driver
//! (`aarch64-linux-gnu-gcc -static`) and run under `qemu-aarch64`, compute what
//! the reference interpreter computes on the host, errors included.
//!
//! Three programs, each of primal calls and gradients (the forward pass, then the
//! pullback from ones and zero shadows, as `adjoint::run_rule` calls them,
//! against `value_and_gradient` on the interpreter, the tape balanced): a handful
//! of functions written here (`x*x + 3*y`, `examples/ir/rosenbrock.ir`, loops over
//! every transcendental in f64 and f32, `powi` at its edges, a call, allocs, a host
//! function, the tape's type tags (pops of the wrong type, a tape that grows and
//! moves its slots and tags), the ops `atan2 hypot asin acos sinh cosh atan exp2 log10 log2 fma` in
//! f64 and f32), and the two reverse-mode corpora (`scalars.ir`, `memory.ir`) at
//! their inputs and at generic points (NaNs, signed zeros, infinities, empty
//! slices, huge integers). Each program's driver is C generated here: the argument
//! slots of each call (layout: `jit/src/abi.rs`), a call of the exported trampoline,
//! and the results, the error words of the context and the final contents of every
//! slice argument printed as hex bit patterns. `qemu_runtime.c` gives the helpers
//! the code imports (glibc's libm, as Rust's std) and the arena; `gradlift.h` is
//! `gradlift_jit::c_abi::ctx_header()`.
//!
//! Values compare bit for bit, except that a NaN compares equal to any NaN: the
//! sign and payload of a NaN made by arithmetic are the machine's (x86-64 makes
//! the default NaN negative, aarch64 positive), and the interpreter runs on the
//! host. The test reports how many NaNs differed that way. And a few libm
//! functions round differently in glibc's aarch64 build than in its x86-64 one
//! (`LIBM_VARIES`: `exp2` and `hypot` in f64, some f32 ones): the functions that
//! run them compare to some ulps, and the test reports how many values differed.
//!
//! Without the tools the test says `skipped: ...` on stderr and passes, unless the
//! environment variable `CI` is set: then it fails (`.ci/run` installs them).

#[path = "../../adjoint/tests/corpus/inputs.rs"]
mod inputs;
mod support;

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use cranelift_entity::EntityRef;
use gradlift_adjoint::{Gradient, Seeds, value_and_gradient};
use gradlift_adjoint::{Rule, RuleConfig, build_rrule};
use gradlift_ir::interp::{ErrorKind, Interpreter, RunError, Val};
use gradlift_ir::{Elem, FuncId, Imm, Module, Opcode, Type};
use gradlift_jit::{c_abi, compile_object};
use support::{LIMITS, generic_points, module};

const SCALARS: &str = include_str!("../../adjoint/tests/corpus/scalars.ir");
const MEMORY: &str = include_str!("../../adjoint/tests/corpus/memory.ir");
const ROSENBROCK: &str = include_str!("../../examples/ir/rosenbrock.ir");
const RUNTIME_C: &str = include_str!("qemu_runtime.c");

/// The functions of the first program (with `rosenbrock.ir` appended).
const OWN: &str = "
func @f(%x: f64, %y: f64) -> f64 {
entry:
    %xx = fmul %x, %x
    %y3 = fmul 3.0, %y
    %r = fadd %xx, %y3
    ret %r
}

; sum_{i<n} sin(x i) + cos(x) exp(-i/n) + log(1 + i) + |x|^c + x^i + tan(x) tanh(x)
func @trans64(%x: f64, %n: i64) -> f64 {
entry:
    %nf = cast f64 %n
    %ax = fabs %x
    jump head
head:
    %i = phi i64 [entry: 0, body: %i1]
    %acc = phi f64 [entry: 0.0, body: %acc1]
    %more = icmp lt %i, %n
    br %more, body, exit
body:
    %fi = cast f64 %i
    %xi = fmul %x, %fi
    %s = sin %xi
    %c = cos %x
    %q = fdiv %fi, %nf
    %mq = fneg %q
    %e = exp %mq
    %ce = fmul %c, %e
    %fi1 = fadd 1.0, %fi
    %l = log %fi1
    %p = pow %ax, %c
    %w = powi %x, %i
    %t = tan %x
    %th = tanh %x
    %tt = fmul %t, %th
    %a1 = fadd %acc, %s
    %a2 = fadd %a1, %ce
    %a3 = fadd %a2, %l
    %a4 = fadd %a3, %p
    %a5 = fadd %a4, %w
    %acc1 = fadd %a5, %tt
    %i1 = iadd %i, 1
    jump head
exit:
    ret %acc
}

func @trans32(%x: f32, %n: i64) -> f32 {
entry:
    %nf = cast f32 %n
    %ax = fabs %x
    jump head
head:
    %i = phi i64 [entry: 0, body: %i1]
    %acc = phi f32 [entry: 0.0, body: %acc1]
    %more = icmp lt %i, %n
    br %more, body, exit
body:
    %fi = cast f32 %i
    %xi = fmul %x, %fi
    %s = sin %xi
    %c = cos %x
    %q = fdiv %fi, %nf
    %mq = fneg %q
    %e = exp %mq
    %ce = fmul %c, %e
    %fi1 = fadd 1.0, %fi
    %l = log %fi1
    %p = pow %ax, %c
    %w = powi %x, %i
    %t = tan %x
    %th = tanh %x
    %tt = fmul %t, %th
    %a1 = fadd %acc, %s
    %a2 = fadd %a1, %ce
    %a3 = fadd %a2, %l
    %a4 = fadd %a3, %p
    %a5 = fadd %a4, %w
    %acc1 = fadd %a5, %tt
    %i1 = iadd %i, 1
    jump head
exit:
    ret %acc
}

func @powi_edges(%x: f64, %n: i64) -> (f64, f32) {
entry:
    %a = powi %x, %n
    %x32 = cast f32 %x
    %b = powi %x32, %n
    ret %a, %b
}


; the math ops of Rust's float methods: atan2 and hypot of any (x, y), the others
; of x / hypot(x, y), in [-1, 1], so that huge and tiny points stay finite
func @math64(%x: f64, %y: f64) -> f64 {
entry:
    %a = atan2 %y, %x
    %h = hypot %x, %y
    %q = fdiv %x, %h
    %as = asin %q
    %ac = acos %q
    %s = sinh %q
    %c = cosh %q
    %t = atan %q
    %e = exp2 %q
    %l = log10 %h
    %m = log2 %h
    %f = fma %q, %a, %e
    %s1 = fadd %a, %as
    %s2 = fadd %s1, %ac
    %s3 = fadd %s2, %s
    %s4 = fadd %s3, %c
    %s5 = fadd %s4, %t
    %s6 = fadd %s5, %l
    %s7 = fadd %s6, %m
    %r = fadd %s7, %f
    ret %r
}

; the math ops of Rust's float methods: atan2 and hypot of any (x, y), the others
; of x / hypot(x, y), in [-1, 1], so that huge and tiny points stay finite
func @math32(%x: f32, %y: f32) -> f32 {
entry:
    %a = atan2 %y, %x
    %h = hypot %x, %y
    %q = fdiv %x, %h
    %as = asin %q
    %ac = acos %q
    %s = sinh %q
    %c = cosh %q
    %t = atan %q
    %e = exp2 %q
    %l = log10 %h
    %m = log2 %h
    %f = fma %q, %a, %e
    %s1 = fadd %a, %as
    %s2 = fadd %s1, %ac
    %s3 = fadd %s2, %s
    %s4 = fadd %s3, %c
    %s5 = fadd %s4, %t
    %s6 = fadd %s5, %l
    %s7 = fadd %s6, %m
    %r = fadd %s7, %f
    ret %r
}

; a host function: the driver's C calls libm's hypot, the interpreter Rust's
extern @host_hypot(f64, f64) -> f64

func @uses_host(%x: f64) -> f64 {
entry:
    %h = call @host_hypot(%x, 4.0)
    %r = fmul %h, %x
    ret %r
}

; a call: the squares of x summed by another function
func @sumsq_call(%x: [f64]) -> f64 {
entry:
    %r = call @sumsq_of(%x)
    ret %r
}

func @sumsq_of(%x: [f64]) -> f64 {
entry:
    %n = len %x
    jump head
head:
    %i = phi i64 [entry: 0, body: %i1]
    %acc = phi f64 [entry: 0.0, body: %acc1]
    %more = icmp lt %i, %n
    br %more, body, exit
body:
    %xi = load %x[%i]
    %sq = fmul %xi, %xi
    %acc1 = fadd %acc, %sq
    %i1 = iadd %i, 1
    jump head
exit:
    ret %acc
}

; the tape's type tags: pushes k, k as f32 and k > 0 in one block, then pops as
; mode says: 0 in their types (k + k + [k > 0]); 1 the bool as an f64; 2 the bool
; rightly, then the f32 as an i64; 3 one pop more than was pushed
func @tape_types(%k: i64, %mode: i64) -> f64 {
entry:
    %y = cast f32 %k
    %b = icmp gt %k, 0
    push %k
    push %y
    push %b
    %m1 = icmp eq %mode, 1
    br %m1, bool_as_f64, rest
bool_as_f64:
    %z1 = pop f64
    ret %z1
rest:
    %b2 = pop bool
    %m2 = icmp eq %mode, 2
    br %m2, f32_as_i64, f32_ok
f32_as_i64:
    %j = pop i64
    %jf = cast f64 %j
    ret %jf
f32_ok:
    %y2 = pop f32
    %k2 = pop i64
    %m3 = icmp eq %mode, 3
    br %m3, one_more, sum
one_more:
    %z3 = pop f64
    ret %z3
sum:
    %yf = cast f64 %y2
    %kf = cast f64 %k2
    %bf = cast f64 %b2
    %s = fadd %yf, %kf
    %r = fadd %s, %bf
    ret %r
}

; n iterations of pushes of i, i as f64 and i odd (the tape grows past 1024
; slots for large n, moving slots and tags), then n of pops in reverse: the sum
; over i of 2 i + [i odd]
func @tape_loop(%n: i64) -> f64 {
entry:
    jump head
head:
    %i = phi i64 [entry: 0, body: %i1]
    %more = icmp lt %i, %n
    br %more, body, back
body:
    %fi = cast f64 %i
    %odd = iand %i, 1
    %b = icmp eq %odd, 1
    push %i
    push %fi
    push %b
    %i1 = iadd %i, 1
    jump head
back:
    %j = phi i64 [head: %n, back_body: %j1]
    %acc = phi f64 [head: 0.0, back_body: %acc1]
    %go = icmp gt %j, 0
    br %go, back_body, done
back_body:
    %b2 = pop bool
    %f2 = pop f64
    %i2 = pop i64
    %if = cast f64 %i2
    %bf = cast f64 %b2
    %t = fadd %f2, %if
    %t2 = fadd %t, %bf
    %acc1 = fadd %acc, %t2
    %j1 = isub %j, 1
    jump back
done:
    ret %acc
}

; an alloc of m elements (the arena grows past its first chunk for large m),
; filled with x scaled, summed, and the buffer's last element written to out
func @alloc_scale(%x: [f64], %m: i64, %out: mut [f64]) -> f64 {
entry:
    %buf = alloc f64, %m
    %n = len %x
    jump head
head:
    %i = phi i64 [entry: 0, body: %i1]
    %acc = phi f64 [entry: 0.0, body: %acc1]
    %more = icmp lt %i, %m
    br %more, body, exit
body:
    %k = irem %i, %n
    %xk = load %x[%k]
    %fi = cast f64 %i
    %v = fmul %xk, %fi
    store %buf[%i], %v
    %back = load %buf[%i]
    %acc1 = fadd %acc, %back
    %i1 = iadd %i, 1
    jump head
exit:
    %last = isub %m, 1
    %lv = load %buf[%last]
    store %out[0], %lv
    ret %acc
}
";

/// Whether the cross tools are there; without them, skip (say so) or, under CI,
/// fail.
fn tools_present() -> bool {
    let ok = |cmd: &str| {
        Command::new(cmd)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if ok("qemu-aarch64") && ok("aarch64-linux-gnu-gcc") {
        return true;
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "qemu-aarch64 / aarch64-linux-gnu-gcc not installed, and CI is set (.ci/run installs \
         them: apt-get install qemu-user gcc-aarch64-linux-gnu libc6-dev-arm64-cross)"
    );
    // Straight to the process's stderr, past the test harness's capture.
    let _ = writeln!(
        std::io::stderr(),
        "skipped: qemu-aarch64 / aarch64-linux-gnu-gcc not installed"
    );
    false
}

fn aarch64() -> target_lexicon::Triple {
    "aarch64-unknown-linux-gnu".parse().unwrap()
}

/// One call to make on both engines, and the interpreter's outcome.
struct Case {
    func: FuncId,
    args: Vec<Val>,
    /// The interpreter's results or error.
    expected: Result<Vec<Val>, RunError>,
    /// The arguments after the interpreter's call (`mut` slices written).
    final_args: Vec<Val>,
}

/// The cases of `points` on the interpreter, leaving out calls that run out of
/// fuel (they are not compared: they loop for very long on both engines).
fn cases(m: &Module, points: Vec<(FuncId, Vec<Val>)>) -> Vec<Case> {
    let mut out = Vec::new();
    for (func, args) in points {
        let mut final_args = args.clone();
        let mut engine = Interpreter::new(m).with_limits(LIMITS);
        bind_hosts(&mut engine);
        let expected = engine.call(func, &mut final_args);
        if let Err(e) = &expected
            && matches!(e.kind, ErrorKind::OutOfFuel(_))
        {
            continue;
        }
        out.push(Case {
            func,
            args,
            expected,
            final_args,
        });
    }
    out
}

/// The table's points and `generic` generic points of every defined function.
fn points(
    m: &Module,
    table: Vec<(&'static str, Vec<Vec<Val>>)>,
    generic: usize,
) -> Vec<(FuncId, Vec<Val>)> {
    let mut out = Vec::new();
    for (name, pts) in table {
        let id = m.func_by_name(name).unwrap_or_else(|| panic!("no @{name}"));
        out.extend(pts.into_iter().map(|a| (id, a)));
    }
    for (id, _) in m.defined() {
        out.extend(
            generic_points(m.sig(id), generic)
                .into_iter()
                .map(|a| (id, a)),
        );
    }
    out
}

/// The C of one argument array's elements (`uint64_t` words, or `uint32_t` for f32).
fn c_array(name: &str, v: &Val) -> (String, usize, usize) {
    let (ty, words, len, size): (&str, Vec<String>, usize, usize) = match v {
        Val::F64s(x) => (
            "uint64_t",
            x.iter()
                .map(|e| format!("0x{:x}ull", e.to_bits()))
                .collect(),
            x.len(),
            8,
        ),
        Val::I64s(x) => (
            "uint64_t",
            x.iter().map(|&e| format!("0x{:x}ull", e as u64)).collect(),
            x.len(),
            8,
        ),
        Val::F32s(x) => (
            "uint32_t",
            x.iter().map(|e| format!("0x{:x}u", e.to_bits())).collect(),
            x.len(),
            4,
        ),
        _ => unreachable!("not a slice"),
    };
    let body = if words.is_empty() {
        "0".to_string()
    } else {
        words.join(", ")
    };
    (
        format!("static {ty} {name}[{}] = {{{body}}};\n", len.max(1)),
        len,
        size,
    )
}

/// A slice of the driver: a static array's name, its length and element size.
struct CSlice {
    name: String,
    len: usize,
    size: usize,
}

/// The argument slots of `args` (slices in static arrays named `{prefix}{j}`,
/// declared into `decls`), and those arrays.
fn c_slots(prefix: &str, args: &[Val], decls: &mut String) -> (Vec<String>, Vec<CSlice>) {
    let mut slots = Vec::new();
    let mut arrays = Vec::new();
    for (j, arg) in args.iter().enumerate() {
        match arg {
            Val::F64(x) => slots.push(format!("0x{:x}ull", x.to_bits())),
            Val::F32(x) => slots.push(format!("0x{:x}ull", x.to_bits())),
            Val::I64(x) => slots.push(format!("0x{:x}ull", *x as u64)),
            Val::Bool(b) => slots.push(format!("{}", u8::from(*b))),
            v => {
                let name = format!("{prefix}{j}");
                let (decl, len, size) = c_array(&name, v);
                decls.push_str(&decl);
                slots.push(format!("(uint64_t)(uintptr_t){name}"));
                slots.push(format!("{len}"));
                arrays.push(CSlice { name, len, size });
            }
        }
    }
    (slots, arrays)
}

/// `uint64_t {name}[] = {slots}` (one slot at least).
fn c_slot_array(name: &str, slots: &[String]) -> String {
    if slots.is_empty() {
        format!("uint64_t {name}[1] = {{0}};")
    } else {
        format!(
            "uint64_t {name}[{}] = {{{}}};",
            slots.len(),
            slots.join(", ")
        )
    }
}

/// C that prints the results in `res` of a function returning `tys`.
fn c_print_results(res: &str, tys: &[Type], indent: &str) -> String {
    let mut out = String::new();
    let mut slot = 0;
    for &t in tys {
        match t {
            Type::Slice { elem, .. } => {
                let _ = writeln!(
                    out,
                    "{indent}print_words('s', {res}[{slot}], {res}[{}], {});",
                    slot + 1,
                    elem_size(elem)
                );
                slot += 2;
            }
            _ => {
                let _ = writeln!(out, "{indent}print_scalar({res}[{slot}]);");
                slot += 1;
            }
        }
    }
    out
}

fn n_slots(tys: &[Type]) -> usize {
    tys.iter().map(|t| if t.is_slice() { 2 } else { 1 }).sum()
}

fn elem_size(e: Elem) -> usize {
    match e {
        Elem::F64 | Elem::I64 => 8,
        Elem::F32 => 4,
    }
}

/// A gradient to compute on both engines: the forward pass, then the pullback
/// from the default seeds (ones for the results, zero shadows), as
/// `gradlift_adjoint::run_rule` calls them.
struct GradCase {
    rule: Rule,
    args: Vec<Val>,
    /// What `value_and_gradient` gives on the interpreter.
    expected: Gradient,
}

/// The C driver: `run_cases` makes each call of `cases`, then each gradient of
/// `grads`, and prints their outcomes.
fn driver(m: &Module, cases: &[Case], grads: &[GradCase]) -> String {
    let mut c =
        String::from("#include \"gradlift.h\"\n#include <stdio.h>\n#include <string.h>\n\n");
    c.push_str(
        "extern gradlift_ctx ctx;\nvoid reset_ctx(uint64_t max_depth);\nvoid tape_reset(void);\n\
         void print_status(int k, uint32_t status);\nvoid print_pullback(uint32_t status);\n\
         void print_scalar(uint64_t bits);\n\
         void print_words(char tag, uint64_t addr, uint64_t len, int size);\n\n",
    );
    let mut entries: Vec<FuncId> = cases.iter().map(|c| c.func).collect();
    for g in grads {
        entries.extend([g.rule.forward, g.rule.pullback]);
    }
    entries.sort();
    entries.dedup();
    for f in &entries {
        let _ = writeln!(
            c,
            "uint32_t gradlift_entry{}(gradlift_ctx *, const uint64_t *, uint64_t *);",
            f.index()
        );
    }
    let depth = LIMITS.max_depth;
    let mut body = String::new();
    for (k, case) in cases.iter().enumerate() {
        let sig = m.sig(case.func);
        let (slots, arrays) = c_slots(&format!("c{k}_a"), &case.args, &mut c);
        let _ = writeln!(body, "    {{ /* @{} */", m.name(case.func));
        let _ = writeln!(body, "        {}", c_slot_array("args", &slots));
        let _ = writeln!(
            body,
            "        uint64_t res[{}] = {{0}};\n        reset_ctx({depth});\n        tape_reset();\n        \
             uint32_t st = gradlift_entry{}(&ctx, args, res);\n        print_status({k}, st);\n        \
             if (st == 0) {{",
            n_slots(&sig.results).max(1),
            case.func.index()
        );
        body.push_str(&c_print_results("res", &sig.results, "            "));
        body.push_str("        }\n");
        for a in &arrays {
            let _ = writeln!(
                body,
                "        print_words('a', (uint64_t)(uintptr_t){}, {}, {});",
                a.name, a.len, a.size
            );
        }
        body.push_str("    }\n");
    }
    for (g, grad) in grads.iter().enumerate() {
        let k = cases.len() + g;
        let rule = &grad.rule;
        let layout = &rule.layout;
        let psig = m.sig(layout.primal);
        let fsig = m.sig(rule.forward);
        let rsig = m.sig(rule.pullback);
        let (slots, arrays) = c_slots(&format!("g{g}_a"), &grad.args, &mut c);
        // The pullback's arguments: copies of the slices as the forward pass left
        // them, zero shadows, and a 1 for each seeded result.
        let mut rslots = Vec::new();
        let mut copies = String::new();
        for &i in &layout.slice_params {
            let a = &arrays[arrays_index(&grad.args, i)];
            let name = format!("g{g}_p{i}");
            let _ = writeln!(
                c,
                "static uint64_t {name}[{}];",
                (a.len * a.size).div_ceil(8).max(1)
            );
            let _ = writeln!(
                copies,
                "            memcpy({name}, {}, {});",
                a.name,
                a.len * a.size
            );
            rslots.push(format!("(uint64_t)(uintptr_t){name}"));
            rslots.push(format!("{}", a.len));
        }
        let mut shadows = Vec::new();
        for &i in &layout.shadow_params {
            let a = &arrays[arrays_index(&grad.args, i)];
            let name = format!("g{g}_h{i}");
            let _ = writeln!(
                c,
                "static uint64_t {name}[{}];",
                (a.len * a.size).div_ceil(8).max(1)
            );
            rslots.push(format!("(uint64_t)(uintptr_t){name}"));
            rslots.push(format!("{}", a.len));
            shadows.push(CSlice {
                name,
                len: a.len,
                size: a.size,
            });
        }
        for &j in &layout.seeded_results {
            rslots.push(match psig.results[j] {
                Type::F32 => format!("0x{:x}ull", 1.0f32.to_bits()),
                _ => format!("0x{:x}ull", 1.0f64.to_bits()),
            });
        }
        let _ = writeln!(
            body,
            "    {{ /* the gradient of @{} */",
            m.name(layout.primal)
        );
        let _ = writeln!(body, "        {}", c_slot_array("fa", &slots));
        let _ = writeln!(
            body,
            "        uint64_t fr[{}] = {{0}};\n        reset_ctx({depth});\n        \
             uint32_t st = gradlift_entry{}(&ctx, fa, fr);\n        print_status({k}, st);\n        \
             if (st == 0) {{",
            n_slots(&fsig.results).max(1),
            rule.forward.index()
        );
        body.push_str(&c_print_results("fr", &fsig.results, "            "));
        body.push_str(&copies);
        let _ = writeln!(body, "            {}", c_slot_array("ra", &rslots));
        let _ = writeln!(
            body,
            "            uint64_t rr[{}] = {{0}};\n            reset_ctx({depth});\n            \
             uint32_t st2 = gradlift_entry{}(&ctx, ra, rr);\n            print_pullback(st2);\n            \
             if (st2 == 0) {{",
            n_slots(&rsig.results).max(1),
            rule.pullback.index()
        );
        body.push_str(&c_print_results("rr", &rsig.results, "                "));
        body.push_str(
            "            }\n            printf(\"t %llu\\n\", (unsigned long long)ctx.tape_len);\n        }\n        tape_reset();\n",
        );
        for a in &arrays {
            let _ = writeln!(
                body,
                "        print_words('a', (uint64_t)(uintptr_t){}, {}, {});",
                a.name, a.len, a.size
            );
        }
        for h in &shadows {
            let _ = writeln!(
                body,
                "        print_words('h', (uint64_t)(uintptr_t){}, {}, {});",
                h.name, h.len, h.size
            );
        }
        body.push_str("    }\n");
    }
    let _ = write!(c, "\nvoid run_cases(void) {{\n{body}}}\n");
    c.push_str(&call_host(m));
    c
}

/// The index among the slice arguments of `args` of argument `i` (a slice).
fn arrays_index(args: &[Val], i: usize) -> usize {
    args[..i].iter().filter(|v| v.ty().is_slice()).count()
}

/// The host functions the drivers give `extern`s, in C: name, and the statement
/// that computes the result slots from the argument slots.
const HOSTS_C: &[(&str, &str)] = &[(
    "host_hypot",
    "double x, y, r; memcpy(&x, &args[0], 8); memcpy(&y, &args[1], 8); \
     r = hypot(x, y); memcpy(&results[0], &r, 8);",
)];

/// The same host functions for the interpreter (Rust's std calls the same libm).
fn bind_hosts(engine: &mut Interpreter<'_>) {
    let hypot = |a: &mut [Val]| match a {
        [Val::F64(x), Val::F64(y)] => Ok(vec![Val::F64(x.hypot(*y))]),
        _ => Err("host_hypot takes two f64".to_string()),
    };
    // Modules without the extern do not bind it.
    let _ = engine.bind_extern("host_hypot", hypot);
}

/// `gradlift_call_host` of a program of `m`: the host function of each extern by
/// its `FuncId` index (a failure status for an extern without one).
fn call_host(m: &Module) -> String {
    let mut c = String::from(
        "\n#include <math.h>\n#include <string.h>\n\
         int32_t gradlift_call_host(int64_t ctxp, int64_t func, int64_t a, int64_t r) {\n\
         \x20   const uint64_t *args = (const uint64_t *)(uintptr_t)a;\n\
         \x20   uint64_t *results = (uint64_t *)(uintptr_t)r;\n\
         \x20   (void)ctxp; (void)args; (void)results;\n\
         \x20   switch (func) {\n",
    );
    for (id, decl) in m.funcs.iter() {
        if let Some((_, body)) = HOSTS_C.iter().find(|(n, _)| *n == decl.name) {
            let _ = writeln!(c, "    case {}: {{ {body} return 0; }}", id.index());
        }
    }
    c.push_str("    default: return GRADLIFT_EXTERN_FAILED;\n    }\n}\n");
    c
}

/// What the driver printed for one call.
#[derive(Debug, Default)]
struct Printed {
    status: u32,
    err_func: u32,
    err_inst: u32,
    err_a: i64,
    err_b: i64,
    /// `r` and `s` lines: one word, or a slice's elements.
    results: Vec<Vec<u64>>,
    /// `a` lines: each slice argument's final elements.
    args: Vec<Vec<u64>>,
    /// For a gradient: the pullback's call (`pullback` and its `r` lines), the
    /// tape's height after it (`t`) and the final shadows (`h`).
    pullback: Option<Box<Printed>>,
    tape_len: Option<u64>,
    shadows: Vec<Vec<u64>>,
}

fn status_line(w: &[&str], line: &str) -> Printed {
    assert_eq!(w.len(), 5, "{line}");
    Printed {
        status: w[0].parse().unwrap(),
        err_func: w[1].parse().unwrap(),
        err_inst: w[2].parse().unwrap(),
        err_a: w[3].parse().unwrap(),
        err_b: w[4].parse().unwrap(),
        ..Printed::default()
    }
}

fn parse_output(out: &str, n: usize) -> Vec<Printed> {
    let mut cases: Vec<Printed> = Vec::new();
    let mut done = false;
    for line in out.lines() {
        let mut words = line.split_whitespace();
        let tag = words.next().unwrap_or("");
        let hex = |w: &str| u64::from_str_radix(w, 16).unwrap_or_else(|e| panic!("{line}: {e}"));
        let last = cases.last_mut();
        match tag {
            "case" => {
                let w: Vec<&str> = words.collect();
                assert_eq!(w[0].parse::<usize>().unwrap(), cases.len(), "{line}");
                cases.push(status_line(&w[1..], line));
            }
            "pullback" => {
                let w: Vec<&str> = words.collect();
                last.unwrap().pullback = Some(Box::new(status_line(&w, line)));
            }
            "r" | "s" => {
                let p = last.unwrap();
                let into = match &mut p.pullback {
                    Some(pb) => &mut pb.results,
                    None => &mut p.results,
                };
                into.push(words.map(hex).collect());
            }
            "a" => last.unwrap().args.push(words.map(hex).collect()),
            "h" => last.unwrap().shadows.push(words.map(hex).collect()),
            "t" => last.unwrap().tape_len = Some(words.next().unwrap().parse().unwrap()),
            "done" => done = true,
            _ => panic!("unexpected output line {line:?}"),
        }
    }
    assert!(done, "the driver did not finish:\n{out}");
    assert_eq!(cases.len(), n, "cases printed");
    cases
}

/// Counts of the comparisons.
#[derive(Default, Debug)]
struct Tally {
    values: usize,
    errors: usize,
    gradients: usize,
    /// NaNs equal up to sign and payload (not bit for bit).
    nan_bits_differ: usize,
    /// Floats of a function that calls a libm function whose aarch64 build rounds
    /// differently from the x86-64 one (see [`LIBM_VARIES`]), equal to a relative
    /// [`LIBM_REL`] but not bit for bit.
    libm_ulps_differ: usize,
    /// The largest relative difference among those.
    libm_max_rel: f64,
}

/// The math ops whose glibc function gives other bits on aarch64 than on x86-64
/// for some arguments (glibc 2.36: each builds its own, the aarch64 one with fused
/// multiply-adds): `exp2` and `hypot` in `f64`; `sinh`, `cosh`, `asin`, `acos`,
/// `atan` and `atan2` in `f32`. (A sweep of 200,000 arguments each found every
/// other math op of the IR bit-identical across the two.) On either machine the
/// JIT calls what Rust's `std` calls there, as the interpreter does; only this
/// cross-machine comparison cannot be exact, so the values and gradients of a
/// function that runs one of these are compared to a relative [`LIBM_REL`].
const LIBM_VARIES: &[(Opcode, Type)] = &[
    (Opcode::Exp2, Type::F64),
    (Opcode::Hypot, Type::F64),
    (Opcode::Sinh, Type::F32),
    (Opcode::Cosh, Type::F32),
    (Opcode::Asin, Type::F32),
    (Opcode::Acos, Type::F32),
    (Opcode::Atan, Type::F32),
    (Opcode::Atan2, Type::F32),
];

/// The tolerance of those comparisons, relative to the larger magnitude: some ulps
/// (the differences seen are of one ulp).
const LIBM_REL: f64 = 1e-14;
/// The same for `f32` results.
const LIBM_REL_F32: f64 = 1e-6;

/// Whether `f`, or a function it calls, runs an op of [`LIBM_VARIES`].
fn libm_varies(m: &Module, f: FuncId) -> bool {
    let mut seen = vec![f];
    let mut todo = vec![f];
    while let Some(g) = todo.pop() {
        let Some(body) = m.function(g) else { continue };
        for (_, inst) in body.placed_insts() {
            let d = &body.insts[inst];
            if let Some(&r) = d.results.first()
                && LIBM_VARIES.contains(&(d.opcode, body.value_type(r)))
            {
                return true;
            }
            if let Imm::Func(h) = d.imm
                && !seen.contains(&h)
            {
                seen.push(h);
                todo.push(h);
            }
        }
    }
    false
}

/// `v` as the words the driver prints.
fn words(v: &Val) -> Vec<u64> {
    match v {
        Val::F64(x) => vec![x.to_bits()],
        Val::F32(x) => vec![u64::from(x.to_bits())],
        Val::I64(x) => vec![*x as u64],
        Val::Bool(b) => vec![u64::from(*b)],
        Val::F64s(x) => x.iter().map(|e| e.to_bits()).collect(),
        Val::F32s(x) => x.iter().map(|e| u64::from(e.to_bits())).collect(),
        Val::I64s(x) => x.iter().map(|&e| e as u64).collect(),
    }
}

/// Whether the interpreter's `want` and the printed `got` words are the same
/// value: bit for bit, or both NaN (counted in `tally`), or, when `loose`, floats
/// equal to a relative [`LIBM_REL`] (counted too).
fn same_words(want: &Val, got: &[u64], tally: &mut Tally, loose: bool) -> bool {
    let w = words(want);
    if w.len() != got.len() {
        return false;
    }
    let float = match want {
        Val::F64(_) | Val::F64s(_) => Some(8),
        Val::F32(_) | Val::F32s(_) => Some(4),
        _ => None,
    };
    for (&a, &b) in w.iter().zip(got) {
        if a == b {
            continue;
        }
        let both_nan = match float {
            Some(8) => f64::from_bits(a).is_nan() && f64::from_bits(b).is_nan(),
            Some(_) => {
                b <= u64::from(u32::MAX)
                    && f32::from_bits(a as u32).is_nan()
                    && f32::from_bits(b as u32).is_nan()
            }
            None => false,
        };
        if both_nan {
            tally.nan_bits_differ += 1;
            continue;
        }
        let (x, y, rel) = match float {
            Some(8) => (f64::from_bits(a), f64::from_bits(b), LIBM_REL),
            Some(_) if b <= u64::from(u32::MAX) => (
                f64::from(f32::from_bits(a as u32)),
                f64::from(f32::from_bits(b as u32)),
                LIBM_REL_F32,
            ),
            _ => return false,
        };
        let diff = (x - y).abs() / x.abs().max(y.abs());
        if !loose || diff.is_nan() || diff > rel {
            return false;
        }
        tally.libm_ulps_differ += 1;
        tally.libm_max_rel = tally.libm_max_rel.max(diff);
    }
    true
}

/// The interpreter's error for what the context says, decoded as `Compiled::call`
/// decodes it. Kinds the interpreter has no counterpart for (the native stack,
/// tape handles, whose encoding is each engine's own) are not expected here.
fn printed_error(m: &Module, p: &Printed) -> RunError {
    let site = gradlift_jit::ErrorSite {
        status: p.status,
        func: p.err_func,
        inst: p.err_inst,
        a: p.err_a,
        b: p.err_b,
    };
    let e = gradlift_jit::decode_error(m, site, None);
    // Kinds only the JIT's own runtime reports have no place in this comparison.
    assert!(
        !matches!(
            e.kind,
            ErrorKind::StackExhausted(_) | ErrorKind::TapeFull(_) | ErrorKind::Internal(_)
        ),
        "unexpected error {e} in {p:?}"
    );
    e
}

fn compare(m: &Module, cases: &[Case], printed: &[Printed], tally: &mut Tally) {
    for (k, (case, p)) in cases.iter().zip(printed).enumerate() {
        let name = m.name(case.func);
        let loose = libm_varies(m, case.func);
        let at = support::show(&case.args);
        match &case.expected {
            Ok(vals) => {
                assert_eq!(
                    p.status,
                    0,
                    "case {k}, @{name} at {at}: the interpreter returned {}, aarch64 failed: {}",
                    support::show(vals),
                    printed_error(m, p)
                );
                assert_eq!(p.results.len(), vals.len(), "case {k}, @{name} at {at}");
                for (v, got) in vals.iter().zip(&p.results) {
                    assert!(
                        same_words(v, got, tally, loose),
                        "case {k}, @{name} at {at}: the interpreter returned {}, aarch64 {got:x?}",
                        support::show(vals)
                    );
                }
                tally.values += 1;
            }
            Err(e) => {
                assert_ne!(
                    p.status, 0,
                    "case {k}, @{name} at {at}: the interpreter failed ({e}), aarch64 returned {:x?}",
                    p.results
                );
                assert_eq!(printed_error(m, p), *e, "case {k}, @{name} at {at}");
                tally.errors += 1;
            }
        }
        let slices: Vec<&Val> = case
            .final_args
            .iter()
            .filter(|v| v.ty().is_slice())
            .collect();
        assert_eq!(slices.len(), p.args.len(), "case {k}");
        for (v, got) in slices.into_iter().zip(&p.args) {
            assert!(
                same_words(v, got, tally, loose),
                "case {k}, @{name} at {at}: final argument: interpreter {}, aarch64 {got:x?}",
                support::show(std::slice::from_ref(v))
            );
        }
    }
}

/// Compares each gradient's value, cotangents, final shadows and final arguments,
/// and that the tape came back empty.
fn compare_gradients(m: &Module, grads: &[GradCase], printed: &[Printed], tally: &mut Tally) {
    for (g, p) in grads.iter().zip(printed) {
        let layout = &g.rule.layout;
        let loose = libm_varies(m, g.rule.forward) || libm_varies(m, g.rule.pullback);
        let what = format!(
            "the gradient of @{} at {}",
            m.name(layout.primal),
            support::show(&g.args)
        );
        let want = &g.expected;
        assert_eq!(
            p.status,
            0,
            "{what}: the forward pass failed: {}",
            printed_error(m, p)
        );
        if let Some(value) = &want.value {
            assert_eq!(p.results.len(), value.len(), "{what}");
            for (v, got) in value.iter().zip(&p.results) {
                assert!(
                    same_words(v, got, tally, loose),
                    "{what}: value {v:?}, aarch64 {got:x?}"
                );
            }
        }
        let pb = p
            .pullback
            .as_deref()
            .unwrap_or_else(|| panic!("{what}: no pullback"));
        assert_eq!(
            pb.status,
            0,
            "{what}: the pullback failed: {}",
            printed_error(m, pb)
        );
        assert_eq!(p.tape_len, Some(0), "{what}: the tape is not balanced");
        assert_eq!(pb.results.len(), layout.active_params.len(), "{what}");
        for (&i, got) in layout.active_params.iter().zip(&pb.results) {
            let v = want.gradient[i].as_ref().unwrap();
            assert!(
                same_words(v, got, tally, loose),
                "{what}: d/d(parameter {i}) = {v:?} on the interpreter, aarch64 {got:x?}"
            );
        }
        assert_eq!(p.shadows.len(), layout.shadow_params.len(), "{what}");
        for (&i, got) in layout.shadow_params.iter().zip(&p.shadows) {
            let v = want.gradient[i].as_ref().unwrap();
            assert!(
                same_words(v, got, tally, loose),
                "{what}: the shadow of parameter {i}: {v:?} on the interpreter, aarch64 {got:x?}"
            );
        }
        let slices: Vec<&Val> = want.args.iter().filter(|v| v.ty().is_slice()).collect();
        assert_eq!(slices.len(), p.args.len(), "{what}");
        for (v, got) in slices.into_iter().zip(&p.args) {
            assert!(
                same_words(v, got, tally, loose),
                "{what}: final argument {v:?}, aarch64 {got:x?}"
            );
        }
        tally.gradients += 1;
    }
}

/// `m` with the rule of every function of `funcs` that derives, derived one after
/// another into one module (so that one object holds them all).
fn with_rules(m: &Module, funcs: &[FuncId]) -> (Module, Vec<Rule>) {
    let mut module = m.clone();
    let mut rules = Vec::new();
    for &f in funcs {
        if let Ok(rule) = build_rrule(&module, f, &RuleConfig::default_for(module.sig(f))) {
            module = rule.module.clone();
            rules.push(rule);
        }
    }
    for r in &mut rules {
        // IDs are never renumbered: the earlier rules' functions are the same ones
        // in the final module.
        assert_eq!(r.module.name(r.forward), module.name(r.forward));
        assert_eq!(r.module.name(r.pullback), module.name(r.pullback));
        r.module = module.clone();
    }
    (module, rules)
}

/// The gradients of `rules` at the points of `points` (at most `per_func` each),
/// computed on the interpreter; those it cannot compute are left out.
fn grad_cases(
    rules: &[Rule],
    points: &[(FuncId, Vec<Val>)],
    per_func: usize,
) -> (Vec<GradCase>, usize) {
    let mut out = Vec::new();
    let mut failed = 0;
    for rule in rules {
        let at = points
            .iter()
            .filter(|(f, _)| *f == rule.layout.primal)
            .take(per_func);
        for (_, args) in at {
            let mut engine = Interpreter::new(&rule.module).with_limits(LIMITS);
            bind_hosts(&mut engine);
            match value_and_gradient(&mut engine, rule, args, &Seeds::default()) {
                Ok(expected) => out.push(GradCase {
                    rule: rule.clone(),
                    args: args.clone(),
                    expected,
                }),
                Err(_) => failed += 1,
            }
        }
    }
    (out, failed)
}

/// The directory for the drivers and programs: one of its own per test (they run
/// side by side).
fn work_dir(test: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("qemu-tests")
        .join(test);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("gradlift.h"), c_abi::ctx_header()).unwrap();
    std::fs::write(dir.join("qemu_runtime.c"), RUNTIME_C).unwrap();
    dir
}

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?}: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Compiles what `cases` and `grads` call in `m` for aarch64, links it with its
/// driver into `dir/name`, runs it under qemu and compares with the interpreter.
fn run_program(dir: &Path, name: &str, m: &Module, cases: &[Case], grads: &[GradCase]) -> Tally {
    let mut roots: Vec<FuncId> = cases.iter().map(|c| c.func).collect();
    for g in grads {
        roots.extend([g.rule.forward, g.rule.pullback]);
    }
    roots.sort();
    roots.dedup();
    let obj = compile_object(m, &roots, aarch64()).unwrap_or_else(|e| panic!("{name}: {e}"));
    let obj_path = dir.join(format!("{name}.o"));
    std::fs::write(&obj_path, &obj.bytes).unwrap();
    let c_path = dir.join(format!("{name}_driver.c"));
    std::fs::write(&c_path, driver(m, cases, grads)).unwrap();
    let exe = dir.join(name);
    run(Command::new("aarch64-linux-gnu-gcc")
        .args(["-static", "-O1", "-ffp-contract=off", "-fno-builtin", "-o"])
        .arg(&exe)
        .arg(&c_path)
        .arg(dir.join("qemu_runtime.c"))
        .arg(&obj_path)
        .args(["-lm", "-lpthread"]));
    let out = run(Command::new("qemu-aarch64").arg(&exe));
    let printed = parse_output(&out, cases.len() + grads.len());
    let mut tally = Tally::default();
    compare(m, cases, &printed[..cases.len()], &mut tally);
    compare_gradients(m, grads, &printed[cases.len()..], &mut tally);
    eprintln!("{name}: {tally:?}");
    tally
}

/// Runs one program: the primal calls of `points`, and the gradients of every
/// function that derives at up to `grad_points` of its points each.
fn program(
    dir: &Path,
    name: &str,
    m: &Module,
    points: Vec<(FuncId, Vec<Val>)>,
    grad_points: usize,
) -> Tally {
    let funcs: Vec<FuncId> = m.defined().map(|(f, _)| f).collect();
    let (module, rules) = with_rules(m, &funcs);
    let primal = cases(&module, points.clone());
    let (grads, refused) = grad_cases(&rules, &points, grad_points);
    eprintln!(
        "{name}: {} of {} functions derived; {} gradients left out (the interpreter fails)",
        rules.len(),
        funcs.len(),
        refused
    );
    run_program(dir, name, &module, &primal, &grads)
}

#[test]
fn aarch64_code_under_qemu_computes_what_the_interpreter_computes() {
    if !tools_present() {
        return;
    }
    let dir = work_dir("own");

    // A handful of functions written for this test.
    let own = module(&format!("{OWN}\n{ROSENBROCK}"));
    let id = |n: &str| own.func_by_name(n).unwrap();
    let f64s = |v: &[f64]| Val::F64s(v.to_vec());
    let wave = |n: usize| Val::F64s(support::wave(n, 0.3));
    let mut own_points = vec![
        (id("f"), vec![Val::F64(2.0), Val::F64(1.0)]),
        (id("f"), vec![Val::F64(-0.75), Val::F64(1e300)]),
        (id("rosenbrock"), vec![wave(100)]),
        (id("rosenbrock"), vec![f64s(&[1.0, 1.0, 1.0])]),
        (id("rosenbrock"), vec![f64s(&[])]),
        (id("sumsq_call"), vec![wave(33)]),
        (id("uses_host"), vec![Val::F64(3.0)]),
        (id("uses_host"), vec![Val::F64(-1e-310)]),
        (id("alloc_scale"), vec![wave(7), Val::I64(3), f64s(&[0.0])]),
        // 20,000 f64 fill more than the arena's first chunk (32 KiB).
        (
            id("alloc_scale"),
            vec![wave(7), Val::I64(20_000), f64s(&[0.0])],
        ),
        (id("alloc_scale"), vec![wave(7), Val::I64(-1), f64s(&[0.0])]),
        (
            id("alloc_scale"),
            vec![f64s(&[]), Val::I64(2), f64s(&[0.0])],
        ),
        (id("alloc_scale"), vec![wave(3), Val::I64(0), f64s(&[0.0])]),
    ];
    // Each case starts with an empty tape (the driver resets it), as the
    // interpreter of each case does.
    for (k, mode) in [(5, 0), (5, 1), (5, 2), (5, 3), (-2, 0), (-2, 1)] {
        own_points.push((id("tape_types"), vec![Val::I64(k), Val::I64(mode)]));
    }
    for n in [0, 5, 3000] {
        own_points.push((id("tape_loop"), vec![Val::I64(n)]));
    }
    for (x, n) in [(0.7, 25), (-1.3, 40), (2.5, 9), (1e-3, 3), (0.0, 2)] {
        own_points.push((id("trans64"), vec![Val::F64(x), Val::I64(n)]));
        own_points.push((id("trans32"), vec![Val::F32(x as f32), Val::I64(n)]));
    }
    // atan2 in the four quadrants and on signed zeros; hypot at 1e±300. (The
    // gradients are compared at the first five.)
    for (x, y) in [
        (1.3, 0.7),
        (-1.3, 0.7),
        (-1.3, -0.7),
        (3e300, -4e300),
        (-3e-300, 4e-300),
        (1.3, -0.7),
        (-2.0, 0.0),
        (-2.0, -0.0),
        (0.0, 0.0),
    ] {
        own_points.push((id("math64"), vec![Val::F64(x), Val::F64(y)]));
        let (x32, y32) = (x as f32, y as f32);
        own_points.push((id("math32"), vec![Val::F32(x32), Val::F32(y32)]));
    }
    for (x, n) in [
        (1.0000001, 1i64 << 40),
        (0.9999, -(1 << 33)),
        (-1.5, i64::from(i32::MIN)),
        (-1.5, i64::from(i32::MAX)),
        (1.01, 1000),
        (3.0, -7),
        (f64::NAN, 0),
    ] {
        own_points.push((id("powi_edges"), vec![Val::F64(x), Val::I64(n)]));
    }
    let t = program(&dir, "own", &own, own_points, 5);
    assert!(
        t.values >= 25 && t.errors >= 6 && t.gradients >= 20,
        "{t:?}"
    );
}

// The corpora at their inputs and at generic points; gradients at their inputs.
// Each corpus is a test of its own, so that the three run side by side.

#[test]
fn the_scalar_corpus_under_qemu_computes_what_the_interpreter_computes() {
    if !tools_present() {
        return;
    }
    let dir = work_dir("scalars");
    let scalars = module(SCALARS);
    let mut pts = points(&scalars, inputs::scalar_inputs(), 0);
    pts.extend(points(&scalars, Vec::new(), 8));
    let t = program(&dir, "scalars", &scalars, pts, 2);
    assert!(t.values >= 400 && t.gradients >= 60, "{t:?}");
}

#[test]
fn the_memory_corpus_under_qemu_computes_what_the_interpreter_computes() {
    if !tools_present() {
        return;
    }
    let dir = work_dir("memory");
    let memory = module(MEMORY);
    let mut pts = points(&memory, inputs::memory_inputs(), 0);
    pts.extend(points(&memory, Vec::new(), 8));
    let t = program(&dir, "memory", &memory, pts, 2);
    assert!(
        t.values >= 300 && t.errors >= 10 && t.gradients >= 50,
        "{t:?}"
    );
}

// Pairs of lanes as f64x2 (NEON): `support/lanes.ir` with the lane groups a
// widening pass records, every slice length up to 13 (so the last pair's first or
// second load is out of bounds) and loop counts up to 3.
#[test]
fn lanes_paired_as_vectors_under_qemu_compute_what_the_interpreter_computes() {
    if !tools_present() {
        return;
    }
    let dir = work_dir("lanes");
    let mut m = module(include_str!("support/lanes.ir"));
    let id = m.func_by_name("lanes").unwrap();
    let groups = support::lanes_by_name(&m, "lanes");
    m.function_mut(id).unwrap().lane_groups = groups;
    let mut pts = Vec::new();
    for len in 0..=13 {
        for n in 0..=3 {
            let x: Vec<f64> = (0..len).map(|i| 0.5 + i as f64 * 0.375).collect();
            let mut args = vec![Val::F64s(x)];
            args.extend([0.25, -0.0, 1e-300, 3.0].map(Val::F64));
            args.push(Val::I64(n));
            pts.push((id, args));
        }
    }
    let t = run_program(&dir, "lanes", &m, &cases(&m, pts), &[]);
    assert!(t.values >= 20 && t.errors >= 20, "{t:?}");
}
