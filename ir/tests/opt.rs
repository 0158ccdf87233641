//! Tests of the optimiser (`gradlift_ir::opt`).
//!
//! The oracle is the interpreter on the program as written: every function of every
//! `.ir` corpus of the repository, and seeded random programs, run before and after
//! optimisation (all passes, and each pass alone, so a bug is pinned to its pass) on
//! generated arguments, must give the same results, bit for bit (NaN: any NaN), the
//! same final contents of their slices, the same tape, and the same runtime errors.
//! After every optimisation the module verifies and prints to text that parses back
//! to the same print. Then shape tests per pass: what each one does, and what it must
//! leave alone.

use gradlift_ir::dominators::DominatorTree;
use gradlift_ir::flowgraph::ControlFlowGraph;
use gradlift_ir::interp::{ErrorKind, Interpreter, Limits, Val};
use gradlift_ir::opt::{OptConfig, OptError, OptReport, optimize, optimize_function};
use gradlift_ir::{
    Block, CmpPred, Elem, FuncId, Function, FunctionBuilder, Imm, Module, Opcode, Signature, Type,
    Value, parse, verify,
};

// ---------------------------------------------------------------------------------
// The harness.

/// Every statement a call may execute before it counts as runaway.
const FUEL: u64 = 400_000;

/// Every `.ir` file of the repository's corpora, parsed.
fn corpus() -> Vec<(String, Module)> {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
    let mut files = Vec::new();
    for dir in ["examples/ir", "adjoint/tests/corpus"] {
        let path = std::path::Path::new(root).join(dir);
        for e in std::fs::read_dir(&path).unwrap() {
            let p = e.unwrap().path();
            if p.extension().is_some_and(|x| x == "ir") {
                files.push(p);
            }
        }
    }
    files.sort();
    assert!(files.len() >= 15, "{files:?}");
    files
        .into_iter()
        .map(|p| {
            let text = std::fs::read_to_string(&p).unwrap();
            let m = parse(&text).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            verify(&m).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            (p.file_name().unwrap().to_string_lossy().into_owned(), m)
        })
        .collect()
}

/// All passes, then each pass alone.
fn configs() -> Vec<(&'static str, OptConfig)> {
    let none = OptConfig::none();
    vec![
        ("all", OptConfig::default()),
        (
            "fold",
            OptConfig {
                fold: true,
                ..none.clone()
            },
        ),
        (
            "dce",
            OptConfig {
                dce: true,
                ..none.clone()
            },
        ),
        (
            "cse",
            OptConfig {
                cse: true,
                ..none.clone()
            },
        ),
        (
            "simplify_cfg",
            OptConfig {
                simplify_cfg: true,
                ..none.clone()
            },
        ),
        (
            "inline",
            OptConfig {
                inline: true,
                ..none.clone()
            },
        ),
        (
            "licm",
            OptConfig {
                licm: true,
                ..none.clone()
            },
        ),
    ]
}

fn config(name: &str) -> OptConfig {
    configs().into_iter().find(|(n, _)| *n == name).unwrap().1
}

/// Deterministic argument sets for `sig`: floats negative, zero (both signs) and
/// non-integer; small integers; slices of lengths 0, 1, 2, 3 and 5.
fn arg_sets(sig: &Signature) -> Vec<Vec<Val>> {
    const F: [f64; 7] = [1.5, -0.75, 0.0, 2.25, -0.0, 0.3, -3.0];
    const I: [i64; 6] = [3, 0, 1, 5, -1, 2];
    const LENS: [usize; 5] = [3, 0, 1, 5, 2];
    (0..6)
        .map(|k| {
            sig.params
                .iter()
                .enumerate()
                .map(|(p, t)| {
                    let j = k + p;
                    let elem = |e: usize| 0.5 * (1.3 * e as f64 + j as f64).sin() + 0.1 * e as f64;
                    match *t {
                        Type::F64 => Val::F64(F[j % F.len()]),
                        Type::F32 => Val::F32(F[j % F.len()] as f32),
                        Type::I64 => Val::I64(I[j % I.len()]),
                        Type::Bool => Val::Bool(j % 2 == 0),
                        Type::Slice { elem: e, .. } => {
                            let n = LENS[j % LENS.len()];
                            match e {
                                Elem::F64 => Val::F64s((0..n).map(elem).collect()),
                                Elem::F32 => Val::F32s((0..n).map(|e| elem(e) as f32).collect()),
                                Elem::I64 => {
                                    Val::I64s((0..n).map(|e| ((e + j) % 3) as i64).collect())
                                }
                            }
                        }
                    }
                })
                .collect()
        })
        .collect()
}

/// What one call did: results or error, the arguments after it, the tape after it.
#[derive(Debug)]
struct Outcome {
    result: Result<Vec<Val>, ErrorKind>,
    args: Vec<Val>,
    tape: (usize, usize),
}

/// An interpreter for `m` with every all-`f64` extern bound to a deterministic host.
fn interpreter(m: &Module, fuel: u64) -> Interpreter<'_> {
    let mut it = Interpreter::new(m).with_limits(Limits {
        fuel: Some(fuel),
        ..Limits::default()
    });
    for (_, d) in m.funcs.iter() {
        let scalar_f64 = d
            .sig
            .params
            .iter()
            .chain(&d.sig.results)
            .all(|&t| t == Type::F64);
        if matches!(d.body, gradlift_ir::Body::Extern) && scalar_f64 {
            let n = d.sig.results.len();
            it.bind_extern(&d.name, move |args| {
                let s: f64 = args
                    .iter()
                    .map(|a| match a {
                        Val::F64(x) => *x,
                        _ => 0.0,
                    })
                    .sum();
                Ok((0..n).map(|k| Val::F64((s + k as f64).sin())).collect())
            })
            .unwrap();
        }
    }
    it
}

/// Runs `@id` of `m` on `args`; `None` when it runs out of fuel.
fn run(m: &Module, id: FuncId, args: &[Val], fuel: u64) -> Option<Outcome> {
    let mut it = interpreter(m, fuel);
    let mut args = args.to_vec();
    let result = it.call(id, &mut args).map_err(|e| e.kind);
    if matches!(result, Err(ErrorKind::OutOfFuel(_))) {
        return None;
    }
    let t = it.tape();
    Some(Outcome {
        result,
        args,
        tape: (t.scalars, t.buffers),
    })
}

fn same_f64(a: f64, b: f64) -> bool {
    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
}

fn same_f32(a: f32, b: f32) -> bool {
    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
}

/// Bit for bit, any NaN for any NaN.
fn same_val(a: &Val, b: &Val) -> bool {
    match (a, b) {
        (Val::F64(x), Val::F64(y)) => same_f64(*x, *y),
        (Val::F32(x), Val::F32(y)) => same_f32(*x, *y),
        (Val::F64s(x), Val::F64s(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| same_f64(*a, *b))
        }
        (Val::F32s(x), Val::F32s(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| same_f32(*a, *b))
        }
        (a, b) => a == b,
    }
}

fn same_vals(a: &[Val], b: &[Val]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| same_val(x, y))
}

fn same_outcome(a: &Outcome, b: &Outcome) -> bool {
    let results = match (&a.result, &b.result) {
        (Ok(x), Ok(y)) => same_vals(x, y),
        (Err(x), Err(y)) => x == y,
        _ => false,
    };
    results && same_vals(&a.args, &b.args) && a.tape == b.tape
}

/// Verifies `m` and checks that it prints, parses back and prints the same.
fn check_invariants(m: &Module, what: &str) {
    if let Err(e) = verify(m) {
        panic!("{what}: the optimised module does not verify:\n{e}\n{m}");
    }
    let text = m.to_string();
    let back = parse(&text).unwrap_or_else(|e| panic!("{what}: does not parse back: {e}\n{text}"));
    assert_eq!(
        back.to_string(),
        text,
        "{what}: the print is not a fixed point"
    );
}

/// `m` optimised under `config`, checked.
fn optimised(m: &Module, config: &OptConfig, what: &str) -> (Module, OptReport) {
    let mut o = m.clone();
    let report = optimize(&mut o, config).unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(report.restored.is_empty(), "{what}: {report}");
    check_invariants(&o, what);
    (o, report)
}

/// Runs every defined function of `before` and `after` on its argument sets and
/// compares. Returns how many runs were compared.
fn compare(before: &Module, after: &Module, what: &str) -> usize {
    let mut compared = 0;
    for (id, decl) in before.funcs.iter() {
        if decl.function().is_none() {
            continue;
        }
        for args in arg_sets(&decl.sig) {
            let Some(a) = run(before, id, &args, FUEL) else {
                continue;
            };
            let b = run(after, id, &args, 2 * FUEL + 10_000).unwrap_or_else(|| {
                panic!(
                    "{what} @{}({args:?}): runs out of fuel after optimisation",
                    decl.name
                )
            });
            assert!(
                same_outcome(&a, &b),
                "{what} @{}({args:?}):\nbefore: {a:?}\nafter:  {b:?}\n{after}",
                decl.name
            );
            compared += 1;
        }
    }
    compared
}

fn corpus_under(name: &str) {
    let config = config(name);
    let mut compared = 0;
    for (file, m) in corpus() {
        let what = format!("{file} under {name}");
        let (o, report) = optimised(&m, &config, &what);
        compared += compare(&m, &o, &what);
        // A second run finds nothing more to do (the first reached a fixed point)
        // and keeps everything valid.
        if name == "all" {
            let (_, again) = optimised(&o, &config, &format!("{what}, again"));
            assert!(
                !again.changed() || report.rounds == config.max_rounds,
                "{what}: a second run still changes things: {again}"
            );
        }
    }
    assert!(compared > 300, "{compared}");
}

#[test]
fn corpus_semantics_all_passes() {
    corpus_under("all");
}

#[test]
fn corpus_semantics_fold() {
    corpus_under("fold");
}

#[test]
fn corpus_semantics_dce() {
    corpus_under("dce");
}

#[test]
fn corpus_semantics_cse() {
    corpus_under("cse");
}

#[test]
fn corpus_semantics_simplify_cfg() {
    corpus_under("simplify_cfg");
}

#[test]
fn corpus_semantics_inline() {
    corpus_under("inline");
}

#[test]
fn corpus_semantics_licm() {
    corpus_under("licm");
}

#[test]
fn the_corpus_is_actually_optimised() {
    let mut total = OptReport::default();
    for (file, m) in corpus() {
        let (_, r) = optimised(&m, &OptConfig::default(), &file);
        total.folded += r.folded;
        total.removed += r.removed;
        total.blocks_merged += r.blocks_merged;
        total.inlined += r.inlined;
        total.hoisted += r.hoisted;
        total.calls_hoisted += r.calls_hoisted;
    }
    assert!(total.folded > 0, "{total}");
    assert!(total.removed > 0, "{total}");
    assert!(total.blocks_merged > 0, "{total}");
    assert!(total.inlined > 0, "{total}");
    assert!(total.hoisted > 0, "{total}");
    assert!(total.calls_hoisted > 0, "{total}");
}

// ---------------------------------------------------------------------------------
// Random programs.

/// xorshift64*: a small deterministic generator.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[self.below(xs.len())]
    }

    fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }
}

const F64: Type = Type::F64;
const I64: Type = Type::I64;
const BOOL: Type = Type::Bool;

/// The helpers random programs call: small ones (inlined), a loop (a reader, hoisted
/// out of loops), one that always fails, one that writes.
const HELPERS: &str = "
func @leaf(%a: f64, %b: f64) -> f64 {
entry:
    %c = fcmp lt %a, %b
    br %c, lo, hi
lo:
    %p = fmul %a, %b
    %q = fadd %p, 0.5
    jump done
hi:
    %d = fsub %a, %b
    jump done
done:
    %r = phi f64 [lo: %q, hi: %d]
    ret %r
}

func @leaf_load(%s: [f64], %i: i64) -> f64 {
entry:
    %v = load %s[%i]
    %w = fmul %v, 2.0
    ret %w
}

func @div(%a: i64, %b: i64) -> i64 {
entry:
    %q = idiv %a, %b
    ret %q
}

func @sum(%s: [f64]) -> f64 {
entry:
    %n = len %s
    jump head
head:
    %i = phi i64 [entry: 0, body: %i1]
    %acc = phi f64 [entry: 0.0, body: %acc1]
    %more = icmp lt %i, %n
    br %more, body, exit
body:
    %x = load %s[%i]
    %acc1 = fadd %acc, %x
    %i1 = iadd %i, 1
    jump head
exit:
    ret %acc
}

func @bad(%s: [f64]) -> f64 {
entry:
    %n = len %s
    %v = load %s[%n]
    ret %v
}

func @poke(%s: mut [f64], %i: i64, %v: f64) {
entry:
    store %s[%i], %v
    ret
}

func @leaf32(%a: f32, %b: f32) -> f32 {
entry:
    %p = fmul %a, %b
    %q = fadd %p, 1.5
    ret %q
}

func @f(%x: f64, %y: f64, %n: i64, %s: mut [f64], %t: [f64]) -> (f64, f64, i64, bool, f32) {
entry:
    %z = const f32 0.0
    ret %x, %y, %n, false, %z
}
";

/// The random program's state while it is built.
struct Gen<'a> {
    rng: &'a mut Rng,
    f: [gradlift_ir::Variable; 3],
    i: [gradlift_ir::Variable; 2],
    b: gradlift_ir::Variable,
    h: gradlift_ir::Variable,
    /// Loop counters in scope.
    counters: Vec<Value>,
    funcs: [FuncId; 7],
    pushed: usize,
}

impl Gen<'_> {
    fn fexpr(&mut self, b: &mut FunctionBuilder<'_>) -> Value {
        match self.rng.below(4) {
            0 => {
                let k = self.rng.below(3);
                b.use_var(self.f[k])
            }
            1 => {
                let k = self.rng.below(2);
                b.param(k)
            }
            _ => {
                let c = self.rng.pick(&[0.0, -0.0, 1.0, -1.0, 2.0, 0.5, 3.0, 1e300]);
                b.fconst(c)
            }
        }
    }

    fn iexpr(&mut self, b: &mut FunctionBuilder<'_>) -> Value {
        match self.rng.below(6) {
            0 | 1 => {
                let k = self.rng.below(2);
                b.use_var(self.i[k])
            }
            2 => b.param(2),
            3 if !self.counters.is_empty() => *self.counters.last().unwrap(),
            4 => {
                let s = b.param(self.rng.pick(&[3, 4]));
                b.len(s)
            }
            _ => {
                let c = self.rng.pick(&[0, 1, -1, 2, 3, 64]);
                b.iconst(c)
            }
        }
    }

    fn slice(&mut self, b: &mut FunctionBuilder<'_>) -> Value {
        let k = self.rng.pick(&[3, 4]);
        b.param(k)
    }

    fn block(&mut self, b: &mut FunctionBuilder<'_>, depth: usize) {
        let n = 1 + self.rng.below(5);
        let pushed_before = self.pushed;
        for _ in 0..n {
            self.stmt(b, depth);
        }
        // Balance this statement list's pushes, most recent first.
        while self.pushed > pushed_before {
            let v = b.pop(F64);
            let k = self.rng.below(3);
            b.def_var(self.f[k], v);
            self.pushed -= 1;
        }
    }

    fn stmt(&mut self, b: &mut FunctionBuilder<'_>, depth: usize) {
        let [leaf, leaf_load, div, sum, bad, poke, leaf32] = self.funcs;
        let kf = self.rng.below(3);
        let ki = self.rng.below(2);
        match self.rng.below(24) {
            0 | 1 => {
                let op = self.rng.pick(&[
                    Opcode::Fadd,
                    Opcode::Fsub,
                    Opcode::Fmul,
                    Opcode::Fdiv,
                    Opcode::Fmin,
                    Opcode::Fmax,
                ]);
                let (x, y) = (self.fexpr(b), self.fexpr(b));
                let inst = b.ins(op, Imm::None, &[x, y]);
                let r = b.results(inst)[0];
                b.def_var(self.f[kf], r);
            }
            2 => {
                let op = self
                    .rng
                    .pick(&[Opcode::Fneg, Opcode::Fabs, Opcode::Sqrt, Opcode::Floor]);
                let x = self.fexpr(b);
                let inst = b.ins(op, Imm::None, &[x]);
                let r = b.results(inst)[0];
                b.def_var(self.f[kf], r);
            }
            3 | 4 => {
                let op = self.rng.pick(&[
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
                ]);
                let (x, y) = (self.iexpr(b), self.iexpr(b));
                let inst = b.ins(op, Imm::None, &[x, y]);
                let r = b.results(inst)[0];
                b.def_var(self.i[ki], r);
            }
            5 => {
                let p = self.rng.pick(&CmpPred::ALL);
                let c = if self.rng.chance(50) {
                    let (x, y) = (self.fexpr(b), self.fexpr(b));
                    b.fcmp(p, x, y)
                } else {
                    let (x, y) = (self.iexpr(b), self.iexpr(b));
                    b.icmp(p, x, y)
                };
                let old = b.use_var(self.b);
                let c = match self.rng.below(3) {
                    0 => b.and(c, old),
                    1 => b.xor(c, old),
                    _ => c,
                };
                b.def_var(self.b, c);
            }
            6 => {
                let c = b.use_var(self.b);
                let (x, y) = (self.fexpr(b), self.fexpr(b));
                let r = b.select(c, x, y);
                b.def_var(self.f[kf], r);
            }
            7 => {
                let (s, i) = (self.slice(b), self.iexpr(b));
                let r = b.load(s, i);
                b.def_var(self.f[kf], r);
            }
            8 => {
                let s = b.param(3);
                let (i, v) = (self.iexpr(b), self.fexpr(b));
                b.store(s, i, v);
            }
            9 => {
                let (x, y) = (self.fexpr(b), self.fexpr(b));
                let r = b.call(leaf, &[x, y])[0];
                b.def_var(self.f[kf], r);
            }
            10 => {
                let (s, i) = (self.slice(b), self.iexpr(b));
                let r = b.call(leaf_load, &[s, i])[0];
                b.def_var(self.f[kf], r);
            }
            11 => {
                let (x, y) = (self.iexpr(b), self.iexpr(b));
                let r = b.call(div, &[x, y])[0];
                b.def_var(self.i[ki], r);
            }
            12 => {
                let s = self.slice(b);
                let r = b.call(sum, &[s])[0];
                b.def_var(self.f[kf], r);
            }
            13 if !self.counters.is_empty() && self.rng.chance(30) => {
                let s = self.slice(b);
                let r = b.call(bad, &[s])[0];
                b.def_var(self.f[kf], r);
            }
            14 if self.rng.chance(50) => {
                let s = b.param(3);
                let (i, v) = (self.iexpr(b), self.fexpr(b));
                b.call(poke, &[s, i, v]);
            }
            15 => {
                // The same computation twice, and one nothing uses.
                let (x, y) = (self.fexpr(b), self.fexpr(b));
                let p = b.fmul(x, y);
                let q = b.fmul(x, y);
                let r = b.fadd(p, q);
                b.def_var(self.f[kf], r);
                let _dead = b.fsub(p, y);
            }
            16 => {
                let v = self.fexpr(b);
                b.push(v);
                self.pushed += 1;
            }
            17 | 18 if depth < 3 => {
                let c = b.use_var(self.b);
                let (t, e, j) = (
                    b.create_block("then"),
                    b.create_block("else"),
                    b.create_block("join"),
                );
                b.br(c, t, e);
                b.seal_block(t);
                b.seal_block(e);
                b.switch_to(t);
                self.block(b, depth + 1);
                b.jump(j);
                b.switch_to(e);
                if self.rng.chance(50) {
                    self.block(b, depth + 1);
                }
                b.jump(j);
                b.seal_block(j);
                b.switch_to(j);
            }
            19 if depth < 3 => {
                // for i in 0..min(e, 3), e sometimes 0.
                let e = self.iexpr(b);
                let three = b.iconst(3);
                let lt = b.icmp(CmpPred::Lt, e, three);
                let bound = b.select(lt, e, three);
                let zero = b.iconst(0);
                b.counted_loop(zero, bound, &[], |b, i, _| {
                    self.counters.push(i);
                    self.block(b, depth + 1);
                    self.counters.pop();
                    vec![]
                });
            }
            20 => {
                // f32: an op of the variable and a constant or a cast, or a call
                // whose arguments may both be constants (inlined, they need a
                // `const f32`).
                let h = b.use_var(self.h);
                let r = match self.rng.below(3) {
                    0 => {
                        let c = b.f32const(self.rng.pick(&[0.0, -0.0, 1.0, 2.5]));
                        let op = self.rng.pick(&[Opcode::Fadd, Opcode::Fmul, Opcode::Fsub]);
                        let inst = b.ins(op, Imm::None, &[h, c]);
                        b.results(inst)[0]
                    }
                    1 => {
                        let x = self.fexpr(b);
                        b.cast(Type::F32, x)
                    }
                    _ => {
                        let arg = |b: &mut FunctionBuilder<'_>, rng: &mut Rng| {
                            if rng.chance(60) {
                                b.f32const(rng.pick(&[1.0, -2.0, 0.25]))
                            } else {
                                h
                            }
                        };
                        let (x, y) = (arg(b, self.rng), arg(b, self.rng));
                        b.call(leaf32, &[x, y])[0]
                    }
                };
                b.def_var(self.h, r);
            }
            21 if depth < 3 => self.entered_loop(b, depth),
            _ => {
                let x = self.fexpr(b);
                let y = self.fexpr(b);
                let r = b.fadd(x, y);
                b.def_var(self.f[kf], r);
            }
        }
    }

    /// A loop entered from both arms of a branch (its header has two predecessors
    /// outside it, with different initial counters), whose test may be written
    /// inverted (the body the `br`'s else target), with an early exit from its
    /// body.
    fn entered_loop(&mut self, b: &mut FunctionBuilder<'_>, depth: usize) {
        let ctr = b.declare_var(I64);
        let e = self.iexpr(b);
        let three = b.iconst(3);
        let lt = b.icmp(CmpPred::Lt, e, three);
        let bound = b.select(lt, e, three);
        let c = b.use_var(self.b);
        let [pa, pb, head, body, latch, exit] =
            ["pa", "pb", "head", "body", "latch", "exit"].map(|n| b.create_block(n));
        b.br(c, pa, pb);
        b.seal_block(pa);
        b.seal_block(pb);
        for (blk, start) in [(pa, 0), (pb, 1)] {
            b.switch_to(blk);
            let v = b.iconst(start);
            b.def_var(ctr, v);
            b.jump(head);
        }
        b.switch_to(head);
        let i = b.use_var(ctr);
        if self.rng.chance(50) {
            let done = b.icmp(CmpPred::Ge, i, bound);
            b.br(done, exit, body);
        } else {
            let more = b.icmp(CmpPred::Lt, i, bound);
            b.br(more, body, exit);
        }
        b.seal_block(body);
        b.switch_to(body);
        self.counters.push(i);
        self.block(b, depth + 1);
        self.counters.pop();
        if self.rng.chance(30) {
            let x = self.fexpr(b);
            let y = self.fexpr(b);
            let brk = b.fcmp(CmpPred::Gt, x, y);
            b.br(brk, exit, latch);
        } else {
            b.jump(latch);
        }
        b.seal_block(latch);
        b.switch_to(latch);
        let one = b.iconst(1);
        let i1 = b.iadd(i, one);
        b.def_var(ctr, i1);
        b.jump(head);
        b.seal_block(head);
        b.seal_block(exit);
        b.switch_to(exit);
    }
}

/// A random module: the helpers and a random `@f`.
fn random_module(seed: u64) -> Module {
    let mut m = parse(HELPERS).unwrap();
    let names = ["leaf", "leaf_load", "div", "sum", "bad", "poke", "leaf32"];
    let funcs = names.map(|n| m.func_by_name(n).unwrap());
    let f = m.func_by_name("f").unwrap();
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let body = {
        let mut b = FunctionBuilder::new(&m, f);
        let fv = [0, 1, 2].map(|_| b.declare_var(F64));
        let iv = [0, 1].map(|_| b.declare_var(I64));
        let bv = b.declare_var(BOOL);
        let hv = b.declare_var(Type::F32);
        let (x, y, n) = (b.param(0), b.param(1), b.param(2));
        let zero = b.fconst(0.0);
        b.def_var(fv[0], x);
        b.def_var(fv[1], y);
        b.def_var(fv[2], zero);
        let izero = b.iconst(0);
        b.def_var(iv[0], n);
        b.def_var(iv[1], izero);
        let c = b.fcmp(CmpPred::Lt, x, y);
        b.def_var(bv, c);
        let h = b.cast(Type::F32, y);
        b.def_var(hv, h);
        let mut g = Gen {
            rng: &mut rng,
            f: fv,
            i: iv,
            b: bv,
            h: hv,
            counters: Vec::new(),
            funcs,
            pushed: 0,
        };
        for _ in 0..3 {
            g.block(&mut b, 0);
        }
        let out = [
            b.use_var(fv[0]),
            b.use_var(fv[2]),
            b.use_var(iv[0]),
            b.use_var(bv),
            b.use_var(hv),
        ];
        b.ret(&out);
        b.finish().unwrap()
    };
    if let gradlift_ir::Body::Defined(func) = &mut m.funcs[f].body {
        *func = body;
    }
    verify(&m).unwrap_or_else(|e| panic!("seed {seed}: {e}\n{m}"));
    m
}

/// The random programs of seeds 0..120, made once for all tests.
fn random_modules() -> &'static [Module] {
    static MODULES: std::sync::OnceLock<Vec<Module>> = std::sync::OnceLock::new();
    MODULES.get_or_init(|| (0..120).map(random_module).collect())
}

/// Random programs before and after optimisation under `name`: all 120 with every
/// pass on, 60 for one pass alone.
fn random_under(name: &str) -> OptReport {
    let config = config(name);
    let f = |m: &Module| m.func_by_name("f").unwrap();
    let mut compared = 0;
    let mut total = OptReport::default();
    let count = if name == "all" { 120 } else { 60 };
    for (seed, m) in random_modules().iter().take(count).enumerate() {
        let what = format!("seed {seed} under {name}");
        let (o, r) = optimised(m, &config, &what);
        total.folded += r.folded;
        total.merged += r.merged;
        total.inlined += r.inlined;
        total.hoisted += r.hoisted;
        total.calls_hoisted += r.calls_hoisted;
        total.removed += r.removed;
        total.blocks_merged += r.blocks_merged;
        for args in &arg_sets(m.sig(f(m))) {
            let Some(a) = run(m, f(m), args, FUEL) else {
                continue;
            };
            let b = run(&o, f(&o), args, 2 * FUEL + 10_000).expect("fuel");
            assert!(
                same_outcome(&a, &b),
                "{what}, args {args:?}:\nbefore: {a:?}\nafter:  {b:?}\n--- before\n{m}\n--- after\n{o}"
            );
            compared += 1;
        }
    }
    assert!(compared > 5 * count, "{compared}");
    total
}

#[test]
fn random_programs_all_passes() {
    let r = random_under("all");
    // The generator exercises every pass.
    assert!(r.folded > 50 && r.merged > 20 && r.inlined > 50, "{r}");
    assert!(
        r.hoisted > 10 && r.calls_hoisted > 5 && r.removed > 50,
        "{r}"
    );
}

#[test]
fn random_programs_fold() {
    assert!(random_under("fold").folded > 25);
}

#[test]
fn random_programs_dce() {
    assert!(random_under("dce").removed > 25);
}

#[test]
fn random_programs_cse() {
    assert!(random_under("cse").merged > 10);
}

#[test]
fn random_programs_simplify_cfg() {
    assert!(random_under("simplify_cfg").blocks_merged > 25);
}

#[test]
fn random_programs_inline() {
    assert!(random_under("inline").inlined > 25);
}

#[test]
fn random_programs_licm() {
    let r = random_under("licm");
    assert!(r.hoisted > 5 && r.calls_hoisted > 2, "{r}");
}

/// Many more random programs, for release fuzzing:
/// `cargo test --release -p gradlift-ir --test opt -- --ignored` (seeds from
/// `GRADLIFT_OPT_SEED`, default 10_000, 3_000 of them).
#[test]
#[ignore]
fn random_programs_fuzz() {
    let f = |m: &Module| m.func_by_name("f").unwrap();
    let start: u64 = std::env::var("GRADLIFT_OPT_SEED").map_or(10_000, |s| s.parse().unwrap());
    for seed in start..start + 3_000 {
        let m = random_module(seed);
        for (name, config) in configs() {
            let what = format!("seed {seed} under {name}");
            let (o, _) = optimised(&m, &config, &what);
            for args in &arg_sets(m.sig(f(&m))) {
                let Some(a) = run(&m, f(&m), args, FUEL) else {
                    continue;
                };
                let b = run(&o, f(&o), args, 2 * FUEL + 10_000).expect("fuel");
                assert!(
                    same_outcome(&a, &b),
                    "{what}, args {args:?}:\nbefore: {a:?}\nafter:  {b:?}\n--- before\n{m}\n--- after\n{o}"
                );
            }
        }
    }
}

// ---------------------------------------------------------------------------------
// Shape tests.

fn module(text: &str) -> Module {
    let m = parse(text).unwrap_or_else(|e| panic!("{e}"));
    verify(&m).unwrap_or_else(|e| panic!("{e}"));
    m
}

fn call(m: &Module, name: &str, args: &[Val]) -> Result<Vec<Val>, ErrorKind> {
    let id = m.func_by_name(name).unwrap();
    interpreter(m, FUEL)
        .call(id, &mut args.to_vec())
        .map_err(|e| e.kind)
}

/// The printed body of `@name` (its `func` line to its closing brace).
fn body_of(m: &Module, name: &str) -> String {
    let text = m.to_string();
    let start = text.find(&format!("func @{name}(")).unwrap();
    let end = start + text[start..].find("\n}").unwrap() + 2;
    text[start..end].to_string()
}

fn ops_of(m: &Module, name: &str) -> Vec<Opcode> {
    let f = m.function(m.func_by_name(name).unwrap()).unwrap();
    f.placed_insts().map(|(_, i)| f.insts[i].opcode).collect()
}

/// The blocks of `func` inside some natural loop.
fn loop_blocks(func: &Function) -> Vec<Block> {
    let cfg = ControlFlowGraph::new(func);
    let dt = DominatorTree::new(&cfg);
    let mut inside = Vec::new();
    for &h in cfg.reverse_postorder() {
        for &latch in cfg.preds(h) {
            if !dt.dominates(h, latch) {
                continue;
            }
            let mut stack = vec![latch];
            let mut body = vec![h];
            while let Some(b) = stack.pop() {
                if !body.contains(&b) {
                    body.push(b);
                    stack.extend(
                        cfg.preds(b)
                            .iter()
                            .copied()
                            .filter(|&p| cfg.is_reachable(p)),
                    );
                }
            }
            inside.extend(body);
        }
    }
    inside
}

/// The block of the first placed instruction of `func` with op `op` (and callee
/// `callee`, for calls).
fn block_of(m: &Module, func: &Function, op: Opcode, callee: Option<&str>) -> Option<Block> {
    func.placed_insts().find_map(|(b, i)| {
        let d = &func.insts[i];
        let callee_ok = match (callee, d.imm) {
            (Some(n), Imm::Func(g)) => m.name(g) == n,
            (None, _) => true,
            _ => false,
        };
        (d.opcode == op && callee_ok).then_some(b)
    })
}

#[test]
fn fold_computes_constants_with_the_interpreters_arithmetic() {
    let m = module(
        "func @f(%x: f64) -> f64 {
        entry:
            %a = fadd 1.0, 2.0
            %b = fmul %a, %x
            ret %b
        }",
    );
    let (o, r) = optimised(&m, &config("fold"), "fold");
    assert_eq!(r.folded, 1, "{r}");
    assert!(body_of(&o, "f").contains("%b = fmul 3.0, %x"), "{o}");
}

#[test]
fn fold_computes_the_math_functions_too() {
    // hypot 3, 4 = 5; fma 2, 3, 5 = 11; atan2 0, -1 = pi; log2 8 = 3; and an fma
    // whose single rounding shows: (1 + 2^-30)^2 - 1 = 2^-29 + 2^-60.
    let m = module(
        "func @f() -> (f64, f64, f64, f64, f64) {
        entry:
            %h = hypot 3.0, -4.0
            %f = fma 2.0, 3.0, %h
            %a = atan2 0.0, -1.0
            %l = log2 8.0
            %e = fma 1.0000000009313226, 1.0000000009313226, -1.0
            ret %h, %f, %a, %l, %e
        }",
    );
    let (o, r) = optimised(&m, &config("fold"), "fold");
    assert_eq!(r.folded, 5, "{r}");
    let want = 2f64.powi(-29) + 2f64.powi(-60);
    assert_eq!(1.0000000009313226f64, 1.0 + 2f64.powi(-30));
    assert!(
        body_of(&o, "f").contains(&format!(
            "ret 5.0, 11.0, {:?}, 3.0, {want:?}",
            core::f64::consts::PI
        )),
        "{o}"
    );
}

#[test]
fn fold_uses_only_identities_exact_in_ieee_arithmetic() {
    let m = module(
        "func @f(%x: f64, %n: i64) -> (f64, f64, f64, f64, f64, i64, i64, i64) {
        entry:
            %keep1 = fadd %x, 0.0
            %keep2 = fmul %x, 0.0
            %gone1 = fadd %x, -0.0
            %gone2 = fmul 1.0, %x
            %gone3 = fsub %x, 0.0
            %i1 = iadd %n, 0
            %i2 = imul %n, 0
            %i3 = imul %n, 1
            ret %keep1, %keep2, %gone1, %gone2, %gone3, %i1, %i2, %i3
        }",
    );
    let (o, r) = optimised(&m, &config("fold"), "identities");
    assert_eq!(r.folded, 6, "{r}");
    let body = body_of(&o, "f");
    assert!(body.contains("%keep1 = fadd %x, 0.0"), "{body}");
    assert!(body.contains("%keep2 = fmul %x, 0.0"), "{body}");
    assert!(
        body.contains("ret %keep1, %keep2, %x, %x, %x, %n, 0, %n"),
        "{body}"
    );
    // -0.0 + 0.0 is 0.0, not -0.0; -0.0 * 0.0 is -0.0 and inf * 0.0 NaN.
    for x in [-0.0, 0.0, f64::INFINITY, f64::NAN, -2.5] {
        let args = [Val::F64(x), Val::I64(7)];
        let (a, b) = (call(&m, "f", &args).unwrap(), call(&o, "f", &args).unwrap());
        assert!(same_vals(&a, &b), "{x}: {a:?} vs {b:?}");
    }
}

#[test]
fn fold_leaves_what_would_fail_and_it_still_fails() {
    let m = module(
        "func @f(%x: i64) -> i64 {
        entry:
            %z = isub 1, 1
            %q = idiv %x, %z
            %r = irem 7, 0
            %s = iadd %q, %r
            ret %s
        }",
    );
    let (o, _) = optimised(&m, &OptConfig::default(), "division by zero");
    let ops = ops_of(&o, "f");
    assert!(
        ops.contains(&Opcode::Idiv) && ops.contains(&Opcode::Irem),
        "{o}"
    );
    assert_eq!(
        call(&o, "f", &[Val::I64(3)]),
        Err(ErrorKind::DivisionByZero)
    );
    assert_eq!(
        call(&m, "f", &[Val::I64(3)]),
        Err(ErrorKind::DivisionByZero)
    );
}

#[test]
fn fold_turns_a_branch_on_a_constant_into_a_jump_and_drops_the_phi_edge() {
    let m = module(
        "func @f(%x: f64) -> f64 {
        entry:
            %c = icmp lt 1, 2
            br %c, a, b
        a:
            jump join
        b:
            %y = fneg %x
            jump join
        join:
            %r = phi f64 [a: %x, b: %y]
            ret %r
        }",
    );
    let (o, r) = optimised(&m, &config("fold"), "br");
    assert_eq!(r.branches_folded, 1, "{r}");
    assert_eq!(r.blocks_removed, 1, "{r}");
    let body = body_of(&o, "f");
    assert!(body.contains("jump a") && !body.contains("\nb:"), "{body}");
    assert!(body.contains("%r = phi f64 [a: %x]"), "{body}");
    // With everything on, the function is `ret %x`.
    let (o, _) = optimised(&m, &OptConfig::default(), "br, all");
    assert_eq!(
        body_of(&o, "f"),
        "func @f(%x: f64) -> f64 {\nentry:\n    ret %x\n}"
    );
}

#[test]
fn folded_f32_constants_stay_writable_as_literals() {
    // Two `f32` constants cannot both be literals of one `fadd`; a folded `f32`
    // constant cannot be the literal operand of `push` (it would read as an `f64`).
    let m = module(
        "func @f(%y: f32) -> (f32, f32) {
        entry:
            %a = const f32 1.5
            %b = const f32 2.25
            %c = fadd %a, %b
            push %c
            %e = fmul %b, %y
            %p = pop f32
            ret %p, %e
        }",
    );
    for (name, config) in configs() {
        let (o, _) = optimised(&m, &config, name);
        let args = [Val::F32(-2.0)];
        assert_eq!(call(&o, "f", &args), call(&m, "f", &args), "{name}\n{o}");
    }
    let (o, _) = optimised(&m, &OptConfig::default(), "f32");
    let body = body_of(&o, "f");
    assert!(body.contains("= const f32 3.75\n    push "), "{body}");
    assert!(body.contains("fmul 2.25, %y"), "{body}");
    assert_eq!(
        call(&o, "f", &[Val::F32(2.0)]),
        Ok(vec![Val::F32(3.75), Val::F32(4.5)])
    );
}

#[test]
fn dce_removes_dead_pure_code_but_never_what_can_fail_or_has_effects() {
    let m = module(
        "func @g(%s: [f64]) -> f64 {
        entry:
            %v = load %s[0]
            ret %v
        }

        func @f(%s: mut [f64], %x: f64, %n: i64) -> f64 {
        entry:
            %dead1 = fmul %x, %x
            %dead2 = fadd %dead1, 1.0
            %dead_load = load %s[7]
            %dead_div = idiv 1, %n
            %dead_call = call @g(%s)
            %dead_alloc = alloc f64, %n
            store %s[0], %x
            push %x
            %p = pop f64
            jump head
        head:
            %i = phi i64 [entry: 0, head: %i1]
            %cyc = phi f64 [entry: 0.0, head: %cyc1]
            %cyc1 = fadd %cyc, 1.0
            %i1 = iadd %i, 1
            %more = icmp lt %i1, 3
            br %more, head, exit
        exit:
            ret %p
        }",
    );
    let (o, r) = optimised(&m, &config("dce"), "dce");
    assert_eq!((r.removed, r.phis_removed), (3, 1), "{r}\n{o}");
    let body = body_of(&o, "f");
    for gone in ["%dead1", "%dead2", "%cyc"] {
        assert!(!body.contains(gone), "{gone}: {body}");
    }
    for kept in [
        "%dead_load = load",
        "%dead_div = idiv",
        "%dead_call = call",
        "%dead_alloc = alloc",
        "store",
        "push",
        "pop",
    ] {
        assert!(body.contains(kept), "{kept}: {body}");
    }
    // The dead load still fails, out of bounds.
    let args = [Val::F64s(vec![1.0, 2.0]), Val::F64(2.0), Val::I64(1)];
    let e = call(&o, "f", &args).unwrap_err();
    assert_eq!(e, ErrorKind::OutOfBounds { index: 7, len: 2 });
    assert_eq!(call(&m, "f", &args).unwrap_err(), e);
    // In bounds, everything else still happens.
    let args = [Val::F64s(vec![0.0; 8]), Val::F64(2.0), Val::I64(1)];
    assert_eq!(call(&o, "f", &args), Ok(vec![Val::F64(2.0)]));
}

#[test]
fn dce_removes_unreachable_blocks_and_their_phi_edges() {
    let m = module(
        "func @f(%x: f64) -> f64 {
        entry:
            jump join
        dead:
            %y = fneg %x
            jump join
        join:
            %r = phi f64 [entry: %x, dead: %y]
            ret %r
        }",
    );
    let (o, r) = optimised(&m, &config("dce"), "unreachable");
    assert_eq!(r.blocks_removed, 1, "{r}");
    assert!(body_of(&o, "f").contains("%r = phi f64 [entry: %x]"), "{o}");
}

#[test]
fn cse_merges_a_repeated_increment() {
    // The traced rosenbrock computes `i + 1` twice.
    let m = module(
        "func @f(%x: [f64]) -> f64 {
        entry:
            %n = len %x
            %m = isub %n, 1
            jump head
        head:
            %i = phi i64 [entry: 0, body: %i2]
            %acc = phi f64 [entry: 0.0, body: %acc1]
            %more = icmp lt %i, %m
            br %more, body, exit
        body:
            %a = load %x[%i]
            %i1 = iadd %i, 1
            %b = load %x[%i1]
            %d = fsub %b, %a
            %acc1 = fadd %acc, %d
            %i2 = iadd 1, %i
            jump head
        exit:
            ret %acc
        }",
    );
    let (o, r) = optimised(&m, &config("cse"), "cse");
    assert_eq!(r.merged, 1, "{r}");
    let body = body_of(&o, "f");
    assert_eq!(body.matches("iadd").count(), 1, "{body}");
    assert!(body.contains("body: %i1]"), "{body}");
    let args = [Val::F64s(vec![1.0, 4.0, 9.0, 16.0])];
    assert_eq!(call(&o, "f", &args), Ok(vec![Val::F64(15.0)]));
}

#[test]
fn cse_merges_loads_only_when_memory_cannot_have_changed() {
    let m = module(
        "func @f(%s: mut [f64]) -> f64 {
        entry:
            %a = load %s[0]
            %b = load %s[0]
            store %s[0], 5.0
            %c = load %s[0]
            %r1 = fadd %a, %b
            %r = fadd %r1, %c
            ret %r
        }

        func @g(%s: [f64]) -> f64 {
        entry:
            %a = load %s[1]
            br true, x, y
        x:
            %b = load %s[1]
            %r = fadd %a, %b
            ret %r
        y:
            ret %a
        }",
    );
    let (o, r) = optimised(&m, &config("cse"), "loads");
    assert_eq!(r.merged, 2, "{r}");
    assert_eq!(body_of(&o, "f").matches("load").count(), 2, "{o}");
    assert_eq!(body_of(&o, "g").matches("load").count(), 1, "{o}");
    let args = [Val::F64s(vec![1.0, 2.0])];
    assert_eq!(call(&o, "f", &args), Ok(vec![Val::F64(7.0)]));
}

#[test]
fn simplify_cfg_merges_chains_and_skips_forwarding_blocks() {
    let m = module(
        "func @f(%x: f64, %c: bool) -> f64 {
        entry:
            jump a
        a:
            %y = fadd %x, 1.0
            jump b
        b:
            br %c, fwd, same
        fwd:
            jump join
        same:
            br %c, join2, join2
        join2:
            %z = fmul %y, 2.0
            jump join
        join:
            %r = phi f64 [fwd: %y, join2: %z]
            %t = phi f64 [fwd: %x, join2: %x]
            %u = fadd %r, %t
            ret %u
        }",
    );
    let (o, r) = optimised(&m, &config("simplify_cfg"), "cfg");
    assert!(
        r.blocks_merged >= 3 && r.branches_folded == 1 && r.phis_removed == 1,
        "{r}\n{o}"
    );
    let body = body_of(&o, "f");
    // `fwd` stays: skipping it would make a critical edge (a branch to a block
    // with another predecessor).
    assert!(body.contains("fwd:") && !body.contains("\na:"), "{body}");
    assert!(body.contains("%r = phi f64 [fwd: %y, same: %z]"), "{body}");
    assert!(body.contains("%u = fadd %r, %x"), "{body}");
    for c in [true, false] {
        let args = [Val::F64(1.5), Val::Bool(c)];
        assert_eq!(call(&o, "f", &args), call(&m, "f", &args));
    }
}

#[test]
fn simplify_cfg_keeps_a_forwarding_block_whose_skip_would_give_a_phi_two_edges() {
    let m = module(
        "func @f(%x: f64, %c: bool) -> f64 {
        entry:
            %y = fneg %x
            br %c, fwd, join
        fwd:
            jump join
        join:
            %r = phi f64 [entry: %x, fwd: %y]
            ret %r
        }",
    );
    let (o, _) = optimised(&m, &config("simplify_cfg"), "two edges");
    assert!(body_of(&o, "f").contains("fwd:"), "{o}");
    for c in [true, false] {
        let args = [Val::F64(1.5), Val::Bool(c)];
        assert_eq!(call(&o, "f", &args), call(&m, "f", &args));
    }
}

const INLINE: &str = "
func @small(%a: f64, %b: f64) -> f64 {
entry:
    %c = fcmp lt %a, %b
    br %c, lo, hi
lo:
    ret %a
hi:
    %d = fsub %a, %b
    ret %d
}

func @with_vjp(%a: f64) -> f64 {
entry:
    %r = fmul %a, %a
    ret %r
}

func @with_vjp_rule(%a: f64, %dy: f64) -> f64 {
entry:
    %r = fmul %a, %dy
    %r2 = fmul %r, 2.0
    ret %r2
}

func @rec(%n: i64) -> i64 {
entry:
    %z = icmp le %n, 0
    br %z, done, again
done:
    ret 0
again:
    %m = isub %n, 1
    %r = call @rec(%m)
    %r1 = iadd %r, 1
    ret %r1
}

func @allocs(%n: i64) -> f64 {
entry:
    %buf = alloc f64, %n
    %v = load %buf[0]
    ret %v
}

func @f(%x: f64, %y: f64) -> f64 {
entry:
    %s = call @small(%x, %y)
    %v = call @with_vjp(%s)
    %k = call @rec(3)
    %kf = cast f64 %k
    %w = call @allocs(2)
    %t = fadd %v, %kf
    %u = fadd %t, %w
    ret %u
}

vjp @with_vjp = @with_vjp_rule
";

#[test]
fn inline_copies_a_small_two_block_callee_and_refuses_the_others() {
    let m = module(INLINE);
    let (o, r) = optimised(&m, &config("inline"), "inline");
    assert_eq!(r.inlined, 1, "{r}");
    let body = body_of(&o, "f");
    assert!(!body.contains("call @small"), "{body}");
    for kept in ["call @with_vjp(", "call @rec(", "call @allocs("] {
        assert!(body.contains(kept), "{kept}: {body}");
    }
    // The callee's two returns meet in a phi of the continuation.
    assert!(
        body.contains("%s = phi f64 [small.lo: %x, small.hi: %d]"),
        "{body}"
    );
    for (x, y) in [(1.0, 2.0), (3.0, -1.0), (-0.0, 0.0)] {
        let args = [Val::F64(x), Val::F64(y)];
        assert_eq!(call(&o, "f", &args), call(&m, "f", &args));
    }
    // Everything on: still exactly one inlined (the recursion stays a call).
    let (o, r) = optimised(&m, &OptConfig::default(), "inline, all");
    assert_eq!(r.inlined, 1, "{r}\n{o}");
}

#[test]
fn inline_respects_its_size_limit() {
    let m = module(INLINE);
    let config = OptConfig {
        inline_max_insts: 1,
        ..config("inline")
    };
    let (o, r) = optimised(&m, &config, "limit");
    assert_eq!(r.inlined, 0, "{r}");
    assert!(body_of(&o, "f").contains("call @small"));
}

#[test]
fn inlined_trap_messages_and_tape_ops_keep_their_order() {
    let m = module(
        r#"func @check(%x: f64) -> f64 {
        entry:
            %bad = fcmp lt %x, 0.0
            trap_if %bad, "negative \"x\""
            push %x
            ret %x
        }

        func @f(%x: f64) -> f64 {
        entry:
            push 1.0
            %y = call @check(%x)
            %p = pop f64
            %q = pop f64
            %r = fadd %p, %q
            ret %r
        }"#,
    );
    let (o, r) = optimised(&m, &OptConfig::default(), "trap");
    assert_eq!(r.inlined, 1, "{r}");
    let body = body_of(&o, "f");
    assert!(body.contains(r#"trap_if %bad, "negative \"x\"""#), "{body}");
    assert_eq!(call(&o, "f", &[Val::F64(2.0)]), Ok(vec![Val::F64(3.0)]));
    assert_eq!(
        call(&o, "f", &[Val::F64(-2.0)]),
        Err(ErrorKind::Trap("negative \"x\"".into()))
    );
}

#[test]
fn licm_hoists_an_invariant_multiplication() {
    let m = module(
        "func @f(%x: [f64], %k: f64) -> f64 {
        entry:
            %n = len %x
            jump head
        head:
            %i = phi i64 [entry: 0, body: %i1]
            %acc = phi f64 [entry: 0.0, body: %acc1]
            %more = icmp lt %i, %n
            br %more, body, exit
        body:
            %kk = fmul %k, %k
            %xi = load %x[%i]
            %t = fmul %xi, %kk
            %acc1 = fadd %acc, %t
            %i1 = iadd %i, 1
            jump head
        exit:
            ret %acc
        }",
    );
    let (o, r) = optimised(&m, &config("licm"), "licm");
    assert_eq!(r.hoisted, 1, "{r}");
    let func = o.function(o.func_by_name("f").unwrap()).unwrap();
    let kk = func
        .placed_insts()
        .find(|&(_, i)| {
            func.insts[i]
                .args
                .first()
                .is_some_and(|&a| func.params[1] == a)
        })
        .map(|(b, _)| b)
        .unwrap();
    assert!(!loop_blocks(func).contains(&kk), "{o}");
    // The load stays in the loop.
    let load = block_of(&o, func, Opcode::Load, None).unwrap();
    assert!(loop_blocks(func).contains(&load), "{o}");
    let args = [Val::F64s(vec![1.0, 2.0]), Val::F64(3.0)];
    assert_eq!(call(&o, "f", &args), Ok(vec![Val::F64(27.0)]));
}

fn normalize() -> Module {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/ir/normalize.ir");
    module(&std::fs::read_to_string(path).unwrap())
}

/// Statements `@name` executes on `args`.
fn steps(m: &Module, name: &str, args: &[Val]) -> (Vec<Val>, u64) {
    let mut it = Interpreter::new(m);
    let out = it
        .call(m.func_by_name(name).unwrap(), &mut args.to_vec())
        .unwrap();
    (out, it.steps())
}

#[test]
fn licm_hoists_the_norm_out_of_normalize_making_it_linear() {
    let m = normalize();
    let (o, r) = optimised(&m, &OptConfig::default(), "normalize");
    assert_eq!(r.calls_hoisted, 1, "{r}");
    let func = o.function(o.func_by_name("normalize").unwrap()).unwrap();
    let call_block = block_of(&o, func, Opcode::Call, Some("norm")).unwrap();
    assert!(!loop_blocks(func).contains(&call_block), "{o}");
    // Each pass alone but LICM leaves the call in the loop; LICM alone hoists it.
    let (o_licm, r) = optimised(&m, &config("licm"), "normalize, licm");
    assert_eq!(r.calls_hoisted, 1, "{r}");

    let n = 200;
    let x: Vec<f64> = (0..n)
        .map(|i| 0.5 * (0.37 * i as f64 + 0.1).sin() + 1.0)
        .collect();
    let w: Vec<f64> = (0..n).map(|i| (0.11 * i as f64 + 0.3).sin()).collect();
    let args = [Val::F64s(x), Val::F64s(w)];
    let (before, steps_before) = steps(&m, "normalize", &args);
    let (after, steps_after) = steps(&o, "normalize", &args);
    let (licm, steps_licm) = steps(&o_licm, "normalize", &args);
    assert!(same_vals(&before, &after) && same_vals(&before, &licm));
    // O(n^2) before (the norm's loop, n times), O(n) after.
    assert!(steps_before > 5 * n * n, "{steps_before}");
    assert!(steps_after < 30 * n, "{steps_after}");
    assert!(steps_licm < 30 * n, "{steps_licm}");
    // And for n = 0 and 1.
    for n in [0, 1] {
        let args = [Val::F64s(vec![2.0; n]), Val::F64s(vec![3.0; n])];
        assert_eq!(call(&o, "normalize", &args), call(&m, "normalize", &args));
    }
}

/// A loop over `n` calling `@bad`, which always fails, as the first thing of its
/// body (as the `br`'s then or else target).
fn zero_trip(else_body: bool) -> Module {
    let br = if else_body {
        "%done = icmp ge %i, %n\n    br %done, exit, body"
    } else {
        "%more = icmp lt %i, %n\n    br %more, body, exit"
    };
    module(&format!(
        "func @bad(%s: [f64]) -> f64 {{
        entry:
            %n = len %s
            %v = load %s[%n]
            ret %v
        }}

        func @f(%s: [f64], %n: i64) -> f64 {{
        entry:
            jump head
        head:
            %i = phi i64 [entry: 0, body: %i1]
            %acc = phi f64 [entry: 0.0, body: %acc1]
            {br}
        body:
            %v = call @bad(%s)
            %acc1 = fadd %acc, %v
            %i1 = iadd %i, 1
            jump head
        exit:
            ret %acc
        }}"
    ))
}

#[test]
fn a_hoisted_call_runs_only_when_the_loop_would_have_run_it() {
    for else_body in [false, true] {
        let m = zero_trip(else_body);
        // LICM alone hoists the call (with everything on, `@bad` is inlined instead,
        // and its load stays in the loop).
        let (licm, r) = optimised(&m, &config("licm"), "zero trips, licm");
        assert_eq!(r.calls_hoisted, 1, "{r}\n{licm}");
        let func = licm.function(licm.func_by_name("f").unwrap()).unwrap();
        let call_block = block_of(&licm, func, Opcode::Call, Some("bad")).unwrap();
        assert!(!loop_blocks(func).contains(&call_block), "{licm}");
        let (all, _) = optimised(&m, &OptConfig::default(), "zero trips, all");
        let func = all.function(all.func_by_name("f").unwrap()).unwrap();
        let load_block = block_of(&all, func, Opcode::Load, None).unwrap();
        assert!(loop_blocks(func).contains(&load_block), "{all}");
        for o in [&licm, &all] {
            let s = Val::F64s(vec![1.0, 2.0]);
            // Zero trips: no call, no error, before and after.
            for n in [0, -3] {
                let args = [s.clone(), Val::I64(n)];
                assert_eq!(call(&m, "f", &args), Ok(vec![Val::F64(0.0)]));
                assert_eq!(call(o, "f", &args), Ok(vec![Val::F64(0.0)]), "{o}");
            }
            // Some trips: the same error.
            let args = [s, Val::I64(4)];
            let e = ErrorKind::OutOfBounds { index: 2, len: 2 };
            assert_eq!(call(&m, "f", &args), Err(e.clone()));
            assert_eq!(call(o, "f", &args), Err(e));
        }
    }
}

#[test]
fn calls_that_may_not_run_or_may_see_writes_stay_in_the_loop() {
    let m = module(
        "func @sum(%s: [f64]) -> f64 {
        entry:
            %n = len %s
            jump head
        head:
            %i = phi i64 [entry: 0, body: %i1]
            %acc = phi f64 [entry: 0.0, body: %acc1]
            %more = icmp lt %i, %n
            br %more, body, exit
        body:
            %x = load %s[%i]
            %acc1 = fadd %acc, %x
            %i1 = iadd %i, 1
            jump head
        exit:
            ret %acc
        }

        ; The call is under a condition inside the loop.
        func @cond(%s: [f64], %n: i64) -> f64 {
        entry:
            jump head
        head:
            %i = phi i64 [entry: 0, latch: %i1]
            %acc = phi f64 [entry: 0.0, latch: %acc2]
            %more = icmp lt %i, %n
            br %more, body, exit
        body:
            %odd = iand %i, 1
            %c = icmp eq %odd, 1
            br %c, call, latch
        call:
            %v = call @sum(%s)
            %acc1 = fadd %acc, %v
            jump latch
        latch:
            %acc2 = phi f64 [body: %acc, call: %acc1]
            %i1 = iadd %i, 1
            jump head
        exit:
            ret %acc
        }

        ; The loop writes the slice the call reads.
        func @writes(%s: mut [f64], %n: i64) -> f64 {
        entry:
            jump head
        head:
            %i = phi i64 [entry: 0, body: %i1]
            %acc = phi f64 [entry: 0.0, body: %acc1]
            %more = icmp lt %i, %n
            br %more, body, exit
        body:
            %v = call @sum(%s)
            store %s[0], %v
            %acc1 = fadd %acc, %v
            %i1 = iadd %i, 1
            jump head
        exit:
            ret %acc
        }

        ; A load that may fail comes first.
        func @load_first(%s: [f64], %n: i64) -> f64 {
        entry:
            jump head
        head:
            %i = phi i64 [entry: 0, body: %i1]
            %acc = phi f64 [entry: 0.0, body: %acc1]
            %more = icmp lt %i, %n
            br %more, body, exit
        body:
            %x = load %s[%i]
            %v = call @sum(%s)
            %t = fmul %x, %v
            %acc1 = fadd %acc, %t
            %i1 = iadd %i, 1
            jump head
        exit:
            ret %acc
        }",
    );
    let (o, r) = optimised(&m, &OptConfig::default(), "stay");
    assert_eq!(r.calls_hoisted, 0, "{r}\n{o}");
    for name in ["cond", "writes", "load_first"] {
        let func = o.function(o.func_by_name(name).unwrap()).unwrap();
        let b = block_of(&o, func, Opcode::Call, Some("sum")).unwrap();
        assert!(loop_blocks(func).contains(&b), "{name}\n{o}");
    }
    compare(&m, &o, "stay");
}

#[test]
fn derived_code_is_accepted_and_its_effects_kept_in_order() {
    // The shape of a forward pass and a pullback: pushes in a loop, pops in the
    // reverse loop, a tape buffer, a debug check.
    let m = module(
        r#"func @fwd(%x: [f64]) -> (f64, i64) {
        entry:
            %n = len %x
            %h = tape_alloc f64, %n
            %v = tape_view f64, %h
            jump head
        head:
            %i = phi i64 [entry: 0, body: %i1]
            %acc = phi f64 [entry: 0.0, body: %acc1]
            %more = icmp lt %i, %n
            br %more, body, exit
        body:
            %xi = load %x[%i]
            %dead = fmul %xi, 2.0
            store %v[%i], %xi
            %sq = fmul %xi, %xi
            %acc1 = fadd %acc, %sq
            push %i
            %i1 = iadd %i, 1
            jump head
        exit:
            push %n
            ret %acc, %h
        }

        func @rvs(%h: i64, %dy: f64) -> f64 {
        entry:
            %n = pop i64
            %v = tape_view f64, %h
            %len = len %v
            %bad = icmp ne %len, %n
            trap_if %bad, "shadow length"
            jump head
        head:
            %k = phi i64 [entry: %n, body: %k1]
            %g = phi f64 [entry: 0.0, body: %g1]
            %more = icmp gt %k, 0
            br %more, body, exit
        body:
            %i = pop i64
            %xi = load %v[%i]
            %two = fadd 1.0, 1.0
            %d = fmul %two, %xi
            %t = fmul %d, %dy
            %g1 = fadd %g, %t
            %k1 = isub %k, 1
            jump head
        exit:
            ret %g
        }"#,
    );
    let (o, _) = optimised(&m, &OptConfig::default(), "derived");
    let count = |m: &Module, op| {
        ["fwd", "rvs"]
            .iter()
            .map(|n| ops_of(m, n).iter().filter(|&&o| o == op).count())
            .sum::<usize>()
    };
    for op in [
        Opcode::Push,
        Opcode::Pop,
        Opcode::TapeAlloc,
        Opcode::TapeView,
        Opcode::TrapIf,
        Opcode::Store,
        Opcode::Load,
    ] {
        assert_eq!(count(&o, op), count(&m, op), "{op}\n{o}");
    }
    // Forward then pullback on one interpreter, before and after.
    let run_both = |m: &Module| {
        let mut it = Interpreter::new(m);
        let mut args = [Val::F64s(vec![1.0, -2.0, 0.5])];
        let out = it.call(m.func_by_name("fwd").unwrap(), &mut args).unwrap();
        let h = out[1].clone();
        let g = it
            .call(m.func_by_name("rvs").unwrap(), &mut [h, Val::F64(1.0)])
            .unwrap();
        (out[0].clone(), g, it.tape().scalars)
    };
    assert_eq!(run_both(&o), run_both(&m));
    // 2 (x0 + x1 + x2) dy, read back from the tape buffer.
    assert_eq!(run_both(&o).1, vec![Val::F64(-1.0)]);
}

#[test]
fn a_module_that_does_not_verify_is_refused_unchanged() {
    let mut m = parse(
        "func @f(%x: f64) -> f64 {
        entry:
            %y = fadd %x, %z
            %z = fadd %x, 1.0
            ret %y
        }",
    )
    .unwrap();
    let before = m.to_string();
    let e = optimize(&mut m, &OptConfig::default()).unwrap_err();
    let OptError::Invalid(errors) = &e else {
        panic!("expected OptError::Invalid, got {e:?}");
    };
    assert!(!errors.0.is_empty());
    assert!(e.to_string().contains("does not verify"), "{e}");
    assert_eq!(m.to_string(), before);
}

#[test]
fn optimize_function_changes_only_that_function() {
    let mut m = module(INLINE);
    let before = m.to_string();
    let small_before = body_of(&m, "small");
    let f = m.func_by_name("f").unwrap();
    let r = optimize_function(&mut m, f, &OptConfig::default()).unwrap();
    assert_eq!(r.inlined, 1, "{r}");
    assert_ne!(m.to_string(), before);
    assert_eq!(body_of(&m, "small"), small_before);
    check_invariants(&m, "optimize_function");
}

#[test]
fn the_report_prints_every_count() {
    let (_, r) = optimised(&normalize(), &OptConfig::default(), "report");
    let text = r.to_string();
    assert!(text.starts_with("folded "), "{text}");
    assert!(text.contains("calls hoisted 1"), "{text}");
    assert!(text.contains("round"), "{text}");
}

#[test]
fn an_optimised_module_has_nothing_left_for_a_second_run() {
    for seed in 0..20 {
        let m = random_module(1000 + seed);
        let (o, r) = optimised(&m, &OptConfig::default(), "fixed point");
        let (_, again) = optimised(&o, &OptConfig::default(), "again");
        assert!(
            r.rounds == OptConfig::default().max_rounds || !again.changed(),
            "seed {seed}: {again}\n{o}"
        );
    }
}

#[test]
fn licm_makes_a_preheader_for_a_loop_entered_twice_and_hoists_under_an_inverted_test() {
    let m = module(
        "; Sums x[0] twice into a scratch buffer of its own: it writes only memory of
        ; its own, so calls to it may be hoisted.
        func @scratch(%x: [f64]) -> f64 {
        entry:
            %b = alloc f64, 1
            %v = load %x[0]
            store %b[0], %v
            %w = load %b[0]
            %r = fadd %v, %w
            ret %r
        }

        ; Writes its `mut` parameter: never hoisted.
        func @writer(%x: mut [f64]) -> f64 {
        entry:
            store %x[0], 1.0
            ret 1.0
        }

        func @f(%x: [f64], %n: i64, %c: bool, %k: f64) -> f64 {
        entry:
            br %c, a, b
        a:
            jump head
        b:
            jump head
        head:
            %i = phi i64 [a: 0, b: 1, body: %i1]
            %acc = phi f64 [a: 0.0, b: %k, body: %acc1]
            %done = icmp ge %i, %n
            br %done, exit, body
        body:
            %kk = fmul %k, 3.0
            %s = call @scratch(%x)
            %t = fmul %s, %kk
            %acc1 = fadd %acc, %t
            %i1 = iadd %i, 1
            jump head
        exit:
            ret %acc
        }

        func @g(%x: mut [f64], %n: i64) -> f64 {
        entry:
            jump head
        head:
            %i = phi i64 [entry: 0, body: %i1]
            %acc = phi f64 [entry: 0.0, body: %acc1]
            %more = icmp lt %i, %n
            br %more, body, exit
        body:
            %s = call @writer(%x)
            %acc1 = fadd %acc, %s
            %i1 = iadd %i, 1
            jump head
        exit:
            ret %acc
        }",
    );
    let (o, r) = optimised(&m, &config("licm"), "entered twice");
    assert_eq!((r.calls_hoisted, r.hoisted), (1, 2), "{r}\n{o}");
    let f = o.function(o.func_by_name("f").unwrap()).unwrap();
    let b = block_of(&o, f, Opcode::Call, Some("scratch")).unwrap();
    assert!(!loop_blocks(f).contains(&b), "{o}");
    let g = o.function(o.func_by_name("g").unwrap()).unwrap();
    let b = block_of(&o, g, Opcode::Call, Some("writer")).unwrap();
    assert!(loop_blocks(g).contains(&b), "{o}");
    for n in [-1, 0, 1, 2, 3] {
        for c in [true, false] {
            for x in [vec![], vec![2.5]] {
                let args = [Val::F64s(x), Val::I64(n), Val::Bool(c), Val::F64(0.5)];
                assert_eq!(call(&o, "f", &args), call(&m, "f", &args), "{n} {c}\n{o}");
            }
        }
    }
    compare(&m, &o, "entered twice");
    let (o, _) = optimised(&m, &OptConfig::default(), "entered twice, all");
    compare(&m, &o, "entered twice, all");
}

#[test]
fn inline_refuses_a_select_of_parameters_whose_type_would_change() {
    let m = module(
        "func @pick(%c: bool, %a: [f64], %b: [f64]) -> f64 {
        entry:
            %s = select %c, %a, %b
            %v = load %s[0]
            ret %v
        }

        func @f(%c: bool, %a: mut [f64], %b: mut [f64], %r: [f64]) -> (f64, f64) {
        entry:
            %x = call @pick(%c, %a, %b)
            %y = call @pick(%c, %r, %r)
            ret %x, %y
        }",
    );
    let (o, r) = optimised(&m, &OptConfig::default(), "select");
    assert_eq!(r.inlined, 1, "{r}\n{o}");
    assert_eq!(body_of(&o, "f").matches("call @pick").count(), 1, "{o}");
    compare(&m, &o, "select");
}

/// `n` diamonds in a row, each followed by a loop of three trips whose body calls
/// `@sum` (hoisted) and computes `x * x` (hoisted, and the same in every loop);
/// the diamond's left arm calls `@leaf` (inlined).
fn many_loops(n: usize) -> Module {
    let mut text = HELPERS.replace("func @f(", "func @unused_f(");
    text.push_str("func @big(%x: f64, %s: [f64], %c: bool) -> f64 {\nentry:\n    jump b0\n");
    for k in 0..n {
        let prev = if k == 0 {
            "entry: %x".to_string()
        } else {
            format!("exit{}: %acc{}", k - 1, k - 1)
        };
        text.push_str(&format!(
            "b{k}:
    %a{k} = phi f64 [{prev}]
    br %c, l{k}, r{k}
l{k}:
    %p{k} = fmul %a{k}, 2.0
    %q{k} = call @leaf(%p{k}, 1.0)
    jump h{k}
r{k}:
    jump h{k}
h{k}:
    %i{k} = phi i64 [l{k}: 0, r{k}: 0, body{k}: %i1_{k}]
    %acc{k} = phi f64 [l{k}: %q{k}, r{k}: %a{k}, body{k}: %acc1_{k}]
    %more{k} = icmp lt %i{k}, 3
    br %more{k}, body{k}, exit{k}
body{k}:
    %t{k} = call @sum(%s)
    %u{k} = fmul %x, %x
    %v{k} = fmul %t{k}, %u{k}
    %acc1_{k} = fadd %acc{k}, %v{k}
    %i1_{k} = iadd %i{k}, 1
    jump h{k}
exit{k}:
    jump b{}
",
            k + 1
        ));
    }
    text.push_str(&format!(
        "b{n}:\n    %r = phi f64 [exit{}: %acc{}]\n    ret %r\n}}\n",
        n - 1,
        n - 1
    ));
    module(&text)
}

/// Many loops cost time linear in the function: every pass handles all loops (or
/// all blocks) of one analysis at once. (Quadratic, this took minutes.)
#[test]
fn a_thousand_loops_optimise_quickly() {
    let n = 1000;
    let m = many_loops(n);
    let t = std::time::Instant::now();
    let (o, r) = optimised(&m, &OptConfig::default(), "many loops");
    let elapsed = t.elapsed();
    assert_eq!((r.inlined, r.calls_hoisted), (n, n), "{r}");
    assert!(r.rounds <= 4, "{r}");
    assert!(elapsed.as_secs() < 20, "{elapsed:?}");
    for c in [true, false] {
        let args = [Val::F64(0.75), Val::F64s(vec![0.5, -1.25]), Val::Bool(c)];
        let (a, b) = (call(&m, "big", &args), call(&o, "big", &args));
        assert!(same_vals(&a.unwrap(), &b.unwrap()), "{c}");
    }
}
