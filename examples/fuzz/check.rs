//! The checks of one verified module: the interpreter against the JIT, the optimiser
//! against the interpreter, the gradient on both engines (and through the JIT's
//! three entry points, with a reused workspace) against each other, against the
//! primal and against central finite differences.

use std::collections::BTreeMap;

use gradlift::adjoint::{
    Activity, AdError, DualActivity, EvalError, Frule, FruleConfig, Gradient, Jvp, RetActivity,
    Rule, RuleConfig, Seeds, TapePolicy, jvp_vals, value_and_gradient,
};
use gradlift::ir::interp::{Interpreter, Limits};
use gradlift::ir::{
    CmpPred, Decl, Elem, ErrorKind, FuncId, Imm, Module, Opcode, OptConfig, RunError, Scalar,
    Signature, Type, parse, verify,
};
use gradlift::jit::{CompileError, Compiled, compile_with};
use gradlift::{
    Arg, CompiledFunction, CompiledGradient, CompiledJvp, Error, Hosts, Pipeline, Val, Workspace,
};

use crate::rng::Rng;

/// The call depth limit on both engines (the command line's is 10,000): recursion
/// past it is an error both must report alike, and it keeps the JIT's native stack
/// small.
pub const DEPTH: usize = 200;

/// Counters of everything the campaign did, merged over threads.
#[derive(Default, Clone, Debug)]
pub struct Stats {
    pub c: BTreeMap<&'static str, u64>,
    /// Run-time errors both engines agreed on, by kind.
    pub error_kinds: BTreeMap<String, u64>,
    /// Derivations refused, by reason.
    pub refusals: BTreeMap<String, u64>,
    /// Ops seen in the generated programs.
    pub ops: BTreeMap<&'static str, u64>,
}

impl Stats {
    pub fn add(&mut self, key: &'static str, n: u64) {
        *self.c.entry(key).or_default() += n;
    }

    pub fn inc(&mut self, key: &'static str) {
        self.add(key, 1);
    }

    pub fn get(&self, key: &str) -> u64 {
        self.c.get(key).copied().unwrap_or(0)
    }

    pub fn merge(&mut self, o: &Stats) {
        for (k, v) in &o.c {
            *self.c.entry(k).or_default() += v;
        }
        for (k, v) in &o.error_kinds {
            *self.error_kinds.entry(k.clone()).or_default() += v;
        }
        for (k, v) in &o.refusals {
            *self.refusals.entry(k.clone()).or_default() += v;
        }
        for (k, v) in &o.ops {
            *self.ops.entry(k).or_default() += v;
        }
    }
}

/// A discrepancy: what, where, with which arguments.
#[derive(Clone, Debug)]
pub struct Finding {
    pub category: String,
    pub detail: String,
    /// The function called and its arguments (as JSON for the command line).
    pub call: Option<(String, String)>,
}

/// What a module is, for the checks.
pub struct Case<'a> {
    pub module: &'a Module,
    pub hosts: &'a Hosts,
    /// Finite differences make sense (generated programs without `bitcast`).
    pub fd: bool,
    /// The interpreter's fuel per call.
    pub fuel: u64,
    /// Run-time errors that only one engine may report are expected (mutants
    /// with tape ops): skip those calls.
    pub mutant: bool,
}

/// Whether two values are equal, floats bit for bit; with `nan_bits` false any two
/// NaNs are equal (the engines promise bits but for NaN payloads).
pub fn same_val(a: &Val, b: &Val, nan_bits: bool) -> bool {
    fn f(x: f64, y: f64, nan_bits: bool) -> bool {
        x.to_bits() == y.to_bits() || (!nan_bits && x.is_nan() && y.is_nan())
    }
    match (a, b) {
        (Val::F64(x), Val::F64(y)) => f(*x, *y, nan_bits),
        (Val::F32(x), Val::F32(y)) => {
            x.to_bits() == y.to_bits() || (!nan_bits && x.is_nan() && y.is_nan())
        }
        (Val::F64s(x), Val::F64s(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| f(*p, *q, nan_bits))
        }
        (Val::F32s(x), Val::F32s(y)) => {
            x.len() == y.len()
                && x.iter().zip(y).all(|(p, q)| {
                    p.to_bits() == q.to_bits() || (!nan_bits && p.is_nan() && q.is_nan())
                })
        }
        (x, y) => x == y,
    }
}

pub fn same_vals(a: &[Val], b: &[Val], nan_bits: bool) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| same_val(x, y, nan_bits))
}

fn same_opt_vals(a: &[Option<Val>], b: &[Option<Val>], nan_bits: bool) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|(x, y)| match (x, y) {
            (Some(x), Some(y)) => same_val(x, y, nan_bits),
            (None, None) => true,
            _ => false,
        })
}

/// Values as the command line writes them, NaNs with their bits.
pub fn show(vals: &[Val]) -> String {
    let items: Vec<String> = vals.iter().map(|v| json(v, true)).collect();
    format!("[{}]", items.join(", "))
}

fn show_opt(vals: &[Option<Val>]) -> String {
    let items: Vec<String> = vals
        .iter()
        .map(|v| v.as_ref().map_or("null".into(), |v| json(v, true)))
        .collect();
    format!("[{}]", items.join(", "))
}

/// One value as JSON in the command line's form (`"nan"`, `"inf"`); with `bits`,
/// a NaN other than the default one shows its bits.
pub fn json(v: &Val, bits: bool) -> String {
    fn fl(x: f64, is32: bool, bits: bool) -> String {
        if x.is_nan() {
            let b = x.to_bits();
            if bits && b != f64::NAN.to_bits() {
                format!("\"nan\"/*{b:#x}*/")
            } else {
                "\"nan\"".into()
            }
        } else if x.is_infinite() {
            if x > 0.0 {
                "\"inf\"".into()
            } else {
                "\"-inf\"".into()
            }
        } else if is32 {
            format!("{:?}", x as f32)
        } else {
            format!("{x:?}")
        }
    }
    fn list<T: Copy>(xs: &[T], f: impl Fn(T) -> String) -> String {
        let items: Vec<String> = xs.iter().map(|&x| f(x)).collect();
        format!("[{}]", items.join(", "))
    }
    match v {
        Val::F64(x) => fl(*x, false, bits),
        Val::F32(x) => fl(f64::from(*x), true, bits),
        Val::I64(x) => x.to_string(),
        Val::Bool(x) => x.to_string(),
        Val::F64s(xs) => list(xs, |x| fl(x, false, bits)),
        Val::F32s(xs) => list(xs, |x| fl(f64::from(x), true, bits)),
        Val::I64s(xs) => list(xs, |x: i64| x.to_string()),
    }
}

/// The arguments as the command line's `--args` JSON.
pub fn args_json(args: &[Val]) -> String {
    let items: Vec<String> = args.iter().map(|v| json(v, false)).collect();
    format!("[{}]", items.join(", "))
}

fn kind_name(k: &ErrorKind) -> String {
    let s = format!("{k:?}");
    s.split(['(', ' ', '{']).next().unwrap_or("").to_string()
}

/// Exactly the same error: function, op, position, slice, kind, message.
fn same_err(a: &RunError, b: &RunError) -> bool {
    let place = a.func == b.func && a.op == b.op && a.pos == b.pos && a.operand == b.operand;
    // Tape buffer handles are each engine's own (the interpreter's are negative),
    // so an error that names a real handle names another number on each engine.
    if let (
        ErrorKind::TapeBufferMismatch {
            handle: h1,
            expected: e1,
            found: f1,
        },
        ErrorKind::TapeBufferMismatch {
            handle: h2,
            expected: e2,
            found: f2,
        },
    ) = (&a.kind, &b.kind)
    {
        let (m1, m2) = (a.to_string(), b.to_string());
        return place
            && e1 == e2
            && f1 == f2
            && m1.replace(&h1.to_string(), "HANDLE") == m2.replace(&h2.to_string(), "HANDLE");
    }
    place && a.kind == b.kind && a.to_string() == b.to_string()
}

/// One call's outcome and the arguments after it.
struct Run {
    res: Result<Vec<Val>, RunError>,
    args: Vec<Val>,
}

fn interp_run(m: &Module, hosts: &Hosts, id: FuncId, args: &[Val], fuel: u64) -> Run {
    let mut a = args.to_vec();
    let mut it = Interpreter::new(m)
        .with_limits(Limits {
            max_depth: DEPTH,
            fuel: Some(fuel),
        })
        .with_hosts(hosts);
    let res = it.call(id, &mut a);
    Run { res, args: a }
}

fn jit_run(c: &Compiled, ws: &mut Workspace, id: FuncId, args: &[Val]) -> Run {
    let mut a = args.to_vec();
    ws.reset_tape();
    let res = c.call(ws, id, &mut a);
    Run { res, args: a }
}

fn cf_run(c: &CompiledFunction, ws: &mut Workspace, args: &[Val]) -> Result<Run, String> {
    let mut a = args.to_vec();
    ws.reset_tape();
    let res = match c.call(ws, &mut a) {
        Ok(v) => Ok(v),
        Err(Error::Run(e)) => Err(e),
        Err(e) => {
            return Err(format!(
                "CompiledFunction::call failed outside the program: {e}"
            ));
        }
    };
    Ok(Run { res, args: a })
}

/// [`CompiledFunction::call_args`], with slices lent (read-only ones read-only).
fn cf_run_args(c: &CompiledFunction, ws: &mut Workspace, sig: &Signature, args: &[Val]) -> Run {
    let mut a = args.to_vec();
    ws.reset_tape();
    let mut out = Vec::new();
    let res = {
        let mut lent: Vec<Arg<'_>> = a
            .iter_mut()
            .zip(&sig.params)
            .map(|(v, t)| lend(v, *t))
            .collect();
        c.call_args(ws, &mut lent, &mut out)
    };
    let res = match res {
        Ok(()) => Ok(out),
        Err(Error::Run(e)) => Err(e),
        Err(e) => Err(RunError::refused(
            "",
            ErrorKind::BadArguments(e.to_string()),
        )),
    };
    Run { res, args: a }
}

/// A value lent as an argument of type `t`: read-only slices read-only.
fn lend(v: &mut Val, t: Type) -> Arg<'_> {
    if t.is_mut_slice() {
        return v.as_arg();
    }
    match v {
        Val::F64s(x) => Arg::F64s(x),
        Val::F32s(x) => Arg::F32s(x),
        Val::I64s(x) => Arg::I64s(x),
        v => v.as_arg(),
    }
}

fn fuel_out(r: &Run) -> bool {
    matches!(&r.res, Err(e) if matches!(e.kind, ErrorKind::OutOfFuel(_)))
}

fn describe(r: &Run) -> String {
    match &r.res {
        Ok(v) => format!("{} (args after: {})", show(v), show(&r.args)),
        Err(e) => format!("error `{e}` [{:?}] (args after: {})", e.kind, show(&r.args)),
    }
}

/// The interpreter against the JIT on one module: everything equal, NaN payloads
/// aside (counted).
fn compare_exact(a: &Run, b: &Run, stats: &mut Stats) -> Option<String> {
    let same = match (&a.res, &b.res) {
        (Ok(x), Ok(y)) => {
            if !same_vals(x, y, true) && same_vals(x, y, false) {
                stats.inc("nan payload differences (allowed)");
            }
            same_vals(x, y, false)
        }
        (Err(x), Err(y)) => same_err(x, y),
        _ => false,
    };
    if same && same_vals(&a.args, &b.args, false) {
        None
    } else {
        Some(format!(
            "interpreter: {}\nJIT:         {}",
            describe(a),
            describe(b)
        ))
    }
}

/// The type of a parameter's argument.
pub fn random_arg(rng: &mut Rng, t: Type, nice: bool) -> Val {
    let float = |rng: &mut Rng| -> f64 {
        if nice || rng.chance(80) {
            rng.uniform(-2.0, 2.0)
        } else {
            rng.pick(&[
                0.0,
                -0.0,
                1.0,
                -1.0,
                0.5,
                f64::INFINITY,
                f64::NEG_INFINITY,
                f64::NAN,
                1e300,
                -1e-300,
                3.0,
                100.0,
                -7.25,
                710.0,
            ])
        }
    };
    let int = |rng: &mut Rng| -> i64 {
        if nice || rng.chance(85) {
            rng.range(-2, 9)
        } else {
            rng.pick(&[i64::MIN, i64::MAX, -1, 0, 1000, 1 << 40, 300, 64, -65])
        }
    };
    let len = |rng: &mut Rng| -> usize {
        match rng.below(20) {
            0 if !nice => 0,
            1 => 12,
            _ => 1 + rng.below(6) as usize,
        }
    };
    match t {
        Type::F64 => Val::F64(float(rng)),
        Type::F32 => Val::F32(float(rng) as f32),
        Type::I64 => Val::I64(int(rng)),
        Type::Bool => Val::Bool(rng.chance(50)),
        Type::Slice { elem, .. } => {
            let n = len(rng);
            match elem {
                Elem::F64 => Val::F64s((0..n).map(|_| float(rng)).collect()),
                Elem::F32 => Val::F32s((0..n).map(|_| float(rng) as f32).collect()),
                Elem::I64 => Val::I64s((0..n).map(|_| int(rng)).collect()),
            }
        }
    }
}

/// A random derivation request for a function of signature `sig`.
fn random_config(rng: &mut Rng, m: &Module, f: FuncId) -> RuleConfig {
    let sig = m.sig(f);
    let mut c = RuleConfig::default_for(sig);
    for (i, &t) in sig.params.iter().enumerate() {
        c.params[i] = match t {
            Type::F64 | Type::F32 => {
                if rng.chance(80) {
                    Activity::Active
                } else {
                    Activity::Const
                }
            }
            t if t.is_differentiable() => match rng.below(20) {
                0..=10 => Activity::Dup,
                11..=13 => Activity::DupNoNeed,
                _ => Activity::Const,
            },
            _ => Activity::Const,
        };
        // Now and then an activity that does not fit: a refusal.
        if rng.chance(1) {
            c.params[i] = rng.pick(&[Activity::Active, Activity::Dup, Activity::DupNoNeed]);
        }
    }
    if rng.chance(15) {
        c.ret = RetActivity::Const;
    }
    c.needs_primal = !rng.chance(15);
    if rng.chance(15) {
        let nan = rng.chance(50);
        c = c.with_debug(true, nan);
    }
    if rng.chance(40) {
        c = c.with_tape(TapePolicy::SaveAll);
    }
    c
}

/// Whether a rule of width N has a call of a `vjp` or `jvp` rule over slices,
/// which such a rule cannot make yet (it fails when the call runs: a documented
/// limit, `docs/reverse-mode.md`); counted, and not compared with width 1.
fn calls_slice_rules(m: &Module, stats: &mut Stats) -> bool {
    let limited = m.funcs.values().filter_map(|d| d.function()).any(|f| {
        f.messages
            .values()
            .any(|msg| msg.contains("cannot call yet"))
    });
    if limited {
        stats.inc("width-N checks skipped: a call of a rule over slices");
    }
    limited
}

/// A short name for why a derivation was refused: its kind, and for
/// `Unsupported` the reason without the statement quoted and its position.
fn refusal(e: &AdError) -> String {
    let s = format!("{e:?}");
    let head = s.split(['(', ' ', '{']).next().unwrap_or("").to_string();
    match e {
        AdError::Unsupported { what, .. } => {
            let mut plain = String::new();
            for (k, part) in what.split('`').enumerate() {
                if k % 2 == 0 {
                    plain.push_str(part);
                }
            }
            let words: Vec<&str> = plain
                .split_whitespace()
                .filter(|w| {
                    !w.trim_end_matches([':', ','])
                        .chars()
                        .all(|c| c.is_ascii_digit() || c == ':')
                })
                .filter(|&w| w != "at")
                .collect();
            let short: String = words
                .join(" ")
                .split([',', ';', '('])
                .next()
                .unwrap_or("")
                .chars()
                .take(70)
                .collect();
            format!("{head} ({})", short.trim().trim_start_matches(':').trim())
        }
        _ => head,
    }
}

/// Whether the module uses `f32` anywhere (finite differences then need f32's
/// tolerances).
fn uses_f32(m: &Module) -> bool {
    m.funcs.values().any(|d| {
        d.sig
            .params
            .iter()
            .chain(&d.sig.results)
            .any(|t| *t == Type::F32 || t.elem() == Some(Elem::F32))
    }) || m.defined().any(|(_, f)| {
        f.values
            .values()
            .any(|v| v.ty == Type::F32 || v.ty.elem() == Some(Elem::F32))
    })
}

/// Counts the ops of the module's functions.
pub fn count_ops(m: &Module, stats: &mut Stats) {
    for (_, f) in m.defined() {
        for (_, i) in f.placed_insts() {
            *stats.ops.entry(f.insts[i].opcode.name()).or_default() += 1;
        }
    }
}

/// Print, parse, print: the same text.
pub fn roundtrip(m: &Module) -> Option<String> {
    let text = m.to_string();
    match parse(&text) {
        Ok(back) => {
            let again = back.to_string();
            (again != text).then(|| format!("prints differently after parsing back:\n{again}"))
        }
        Err(e) => Some(format!("the printed module does not parse: {e}")),
    }
}

/// The gradient's result as the compiled API gives it.
type GradResult = Result<Gradient, Error>;

fn show_grad(g: &GradResult) -> String {
    match g {
        Ok(g) => format!(
            "value {}, gradient {}, args after {}, tape peak {} bytes",
            g.value.as_ref().map_or("none".into(), |v| show(v)),
            show_opt(&g.gradient),
            show(&g.args),
            g.tape_peak_bytes
        ),
        Err(Error::Run(e)) => format!("error `{e}` [{:?}]", e.kind),
        Err(e) => format!("error `{e}` [{e:?}]"),
    }
}

fn same_grad(a: &GradResult, b: &GradResult, nan_bits: bool) -> bool {
    match (a, b) {
        (Ok(x), Ok(y)) => {
            x.value.is_some() == y.value.is_some()
                && same_vals(
                    x.value.as_deref().unwrap_or(&[]),
                    y.value.as_deref().unwrap_or(&[]),
                    nan_bits,
                )
                && same_opt_vals(&x.gradient, &y.gradient, nan_bits)
                && same_vals(&x.args, &y.args, nan_bits)
                && x.tape_peak_bytes == y.tape_peak_bytes
        }
        (Err(Error::Run(x)), Err(Error::Run(y))) => same_err(x, y),
        (Err(x), Err(y)) => format!("{x:?}") == format!("{y:?}"),
        _ => false,
    }
}

fn grad_kind(g: &GradResult) -> Option<&ErrorKind> {
    match g {
        Err(Error::Run(e)) => Some(&e.kind),
        _ => None,
    }
}

/// Seeds for one gradient: random result cotangents (or the default ones) and
/// random initial shadows (or zeros).
fn random_seeds(rng: &mut Rng, m: &Module, f: FuncId, rule: &Rule, args: &[Val]) -> Seeds {
    let sig = m.sig(f);
    let n_float = sig.results.iter().filter(|t| t.is_float()).count();
    let mut seeds = Seeds::default();
    if rng.chance(50) {
        seeds.results = Some((0..n_float).map(|_| rng.uniform(-1.5, 1.5)).collect());
    }
    if rng.chance(60) {
        seeds.shadows = (0..sig.params.len())
            .map(|i| {
                if !rule.layout.shadow_params.contains(&i) || rng.chance(30) {
                    return None;
                }
                Some(match &args[i] {
                    Val::F64s(x) => Val::F64s(x.iter().map(|_| rng.uniform(-1.0, 1.0)).collect()),
                    Val::F32s(x) => {
                        Val::F32s(x.iter().map(|_| rng.uniform(-1.0, 1.0) as f32).collect())
                    }
                    v => v.clone(),
                })
            })
            .collect();
    }
    seeds
}

/// The gradient through `gradient_args`, the borrowed form, as a [`Gradient`].
fn grad_by_args(
    g: &CompiledGradient,
    ws: &mut Workspace,
    args: &[Val],
    seeds: &Seeds,
) -> GradResult {
    let layout = &g.rule().layout;
    let sig = g.rule().module.sig(layout.primal).clone();
    let mut owned: Vec<Val> = args.to_vec();
    let mut shadows: Vec<Val> = layout
        .shadow_params
        .iter()
        .map(|&i| match seeds.shadows.get(i).and_then(Option::as_ref) {
            Some(s) => s.clone(),
            None => args[i].zeros_like(),
        })
        .collect();
    let results: Vec<f64> = match (&seeds.results, layout.seeded_results.is_empty()) {
        (Some(s), false) => s.clone(),
        _ => Vec::new(),
    };
    let (mut value, mut grads) = (Vec::new(), Vec::new());
    let peak = {
        let mut a: Vec<Arg<'_>> = owned
            .iter_mut()
            .zip(&sig.params)
            .map(|(v, t)| lend(v, *t))
            .collect();
        let mut s: Vec<Arg<'_>> = shadows.iter_mut().map(Val::as_arg).collect();
        g.gradient_args(ws, &mut a, &mut s, &results, &mut value, &mut grads)?
    };
    let mut gradient: Vec<Option<Val>> = vec![None; sig.params.len()];
    for (&i, ct) in layout.active_params.iter().zip(grads) {
        gradient[i] = Some(ct);
    }
    for (&i, s) in layout.shadow_params.iter().zip(shadows) {
        gradient[i] = Some(s);
    }
    Ok(Gradient {
        value: layout.config.needs_primal.then_some(value),
        gradient,
        args: owned,
        tape_peak_bytes: peak.peak_bytes,
        recomputed_steps: peak.recomputed_steps,
    })
}

/// Finite differences: L(args) = seeds · float results + Σ shadow_in · final
/// contents of the shadowed slices, by the JIT's primal.
struct Objective<'a> {
    primal: &'a CompiledFunction,
    rule: &'a Rule,
    seeds: &'a Seeds,
    sig: gradlift::ir::Signature,
}

impl Objective<'_> {
    /// L and the sum of the magnitudes of its terms; `None` when the call fails or
    /// anything is not finite.
    fn eval(&self, ws: &mut Workspace, args: &[Val]) -> Option<(f64, f64)> {
        let mut a = args.to_vec();
        let out = self.primal.call(ws, &mut a).ok()?;
        let layout = &self.rule.layout;
        let (mut l, mut mag) = (0.0f64, 0.0f64);
        let mut add = |x: f64| {
            l += x;
            mag += x.abs();
        };
        if layout.config.ret == RetActivity::Active {
            let mut k = 0;
            for (j, t) in self.sig.results.iter().enumerate() {
                if !t.is_float() {
                    continue;
                }
                let s = self
                    .seeds
                    .results
                    .as_ref()
                    .map_or(1.0, |s| s.get(k).copied().unwrap_or(1.0));
                k += 1;
                let y = match out.get(j)? {
                    Val::F64(y) => *y,
                    Val::F32(y) => f64::from(*y),
                    _ => return None,
                };
                if !y.is_finite() {
                    return None;
                }
                add(s * y);
            }
        }
        for &i in &layout.shadow_params {
            let shadow = self.seeds.shadows.get(i).and_then(Option::as_ref);
            let fin: Vec<f64> = match &a[i] {
                Val::F64s(x) => x.clone(),
                Val::F32s(x) => x.iter().map(|&v| f64::from(v)).collect(),
                _ => return None,
            };
            if let Some(s) = shadow {
                let sv: Vec<f64> = match s {
                    Val::F64s(x) => x.clone(),
                    Val::F32s(x) => x.iter().map(|&v| f64::from(v)).collect(),
                    _ => return None,
                };
                for (p, q) in sv.iter().zip(&fin) {
                    if !q.is_finite() {
                        return None;
                    }
                    add(p * q);
                }
            }
        }
        l.is_finite().then_some((l, mag))
    }
}

/// Sets coordinate `(param, elem)` of `args` to `x` (rounded to the parameter's
/// type); returns the value actually set.
fn set_coord(args: &mut [Val], p: usize, e: Option<usize>, x: f64) -> f64 {
    match (&mut args[p], e) {
        (Val::F64(v), None) => {
            *v = x;
            x
        }
        (Val::F32(v), None) => {
            *v = x as f32;
            f64::from(*v)
        }
        (Val::F64s(v), Some(i)) => {
            v[i] = x;
            x
        }
        (Val::F32s(v), Some(i)) => {
            v[i] = x as f32;
            f64::from(v[i])
        }
        _ => f64::NAN,
    }
}

fn get_coord(v: &Val, e: Option<usize>) -> Option<f64> {
    match (v, e) {
        (Val::F64(x), None) => Some(*x),
        (Val::F32(x), None) => Some(f64::from(*x)),
        (Val::F64s(x), Some(i)) => x.get(i).copied(),
        (Val::F32s(x), Some(i)) => x.get(i).map(|&v| f64::from(v)),
        _ => None,
    }
}

/// Central differences at two steps against the gradient, at up to `max`
/// coordinates. Counts checks and skips; returns a discrepancy.
#[allow(clippy::too_many_arguments)]
fn fd_check(
    obj: &Objective<'_>,
    ws: &mut Workspace,
    args: &[Val],
    g: &Gradient,
    grad_at: &mut dyn FnMut(&[Val]) -> Option<Gradient>,
    f32: bool,
    rng: &mut Rng,
    stats: &mut Stats,
) -> Option<String> {
    let layout = &obj.rule.layout;
    let mut coords: Vec<(usize, Option<usize>)> = Vec::new();
    for &p in &layout.active_params {
        coords.push((p, None));
    }
    for &p in &layout.shadow_params {
        for i in 0..args[p].slice_len().unwrap_or(0) {
            coords.push((p, Some(i)));
        }
    }
    if coords.is_empty() {
        return None;
    }
    // Inputs far from 1 make differences meaningless: a perturbation of 1e-4 is
    // lost next to an element of 1e300 (rounding makes the function flat there).
    // Tiny ones make functions meet at the point (tanh x = x at 1e-300), where the
    // gradient's choice at a tie (fmin, fmax) and the differences' average differ.
    let ok = |x: f64| (1e-3..=100.0).contains(&x.abs());
    let moderate = args.iter().all(|a| match a {
        Val::F64(x) => ok(*x),
        Val::F32(x) => ok(f64::from(*x)),
        Val::F64s(xs) => xs.iter().all(|&x| ok(x)),
        Val::F32s(xs) => xs.iter().all(|&x| ok(f64::from(x))),
        _ => true,
    });
    if !moderate {
        stats.inc("fd skipped: arguments far from 1");
        return None;
    }
    let Some((l0, mag0)) = obj.eval(ws, args) else {
        stats.inc("fd skipped: not finite");
        return None;
    };
    let (eps, rtol, rel_step) = if f32 {
        (f64::from(f32::EPSILON), 2e-2, 1e-2)
    } else {
        (f64::EPSILON, 2e-5, 1e-4)
    };
    for _ in 0..6.min(coords.len()) {
        let (p, e) = coords[rng.below(coords.len() as u64) as usize];
        let Some(x) = get_coord(&args[p], e) else {
            continue;
        };
        let Some(gv) = g.gradient[p].as_ref().and_then(|v| get_coord(v, e)) else {
            return Some(format!("no gradient for parameter {} {e:?}", p + 1));
        };
        if !x.is_finite() || !gv.is_finite() {
            stats.inc("fd skipped: not finite");
            continue;
        }
        let h1 = rel_step * x.abs().clamp(1.0, 8.0);
        let mut fd = [0.0f64; 2];
        let mut mag = mag0;
        let mut ok = true;
        let mut flat = true;
        // One-sided differences at the smaller step, to see a kink at the point.
        let mut sides = [0.0f64; 2];
        for (k, h) in [h1, h1 / 2.0].into_iter().enumerate() {
            let mut a = args.to_vec();
            let xp = set_coord(&mut a, p, e, x + h);
            let lp = obj.eval(ws, &a);
            let xm = set_coord(&mut a, p, e, x - h);
            let lm = obj.eval(ws, &a);
            match (lp, lm) {
                (Some((lp, mp)), Some((lm, mm))) if xp != xm => {
                    flat &= lp == lm;
                    fd[k] = (lp - lm) / (xp - xm);
                    sides = [(lp - l0) / (xp - x), (l0 - lm) / (x - xm)];
                    mag = mag.max(mp).max(mm);
                }
                _ => ok = false,
            }
        }
        if !ok || !fd[0].is_finite() || !fd[1].is_finite() {
            stats.inc("fd skipped: not finite");
            continue;
        }
        if flat && gv != 0.0 {
            // Both steps change nothing: the perturbation is absorbed by rounding
            // somewhere inside (x + 1e-4 next to a large value).
            stats.inc("fd skipped: flat at rounding");
            continue;
        }
        let atol = 64.0 * eps * mag / (h1 / 2.0) + 1e-12;
        let tol = |a: f64, b: f64| rtol * a.abs().max(b.abs()) + atol;
        // A kink at distance d < h/2 from x, where the slope jumps by D, moves the
        // central difference at h/2 by D (1 - 2d/h) / 2: exactly half the gap
        // between the one-sided differences at h/2. A gap within twice the
        // tolerance therefore keeps the central difference within it; a larger gap
        // says nothing about the gradient. (A kink farther out, between h/2 and
        // h, leaves the difference at h/2 alone, and that one is compared too.)
        if (sides[0] - sides[1]).abs() > 2.0 * tol(sides[0], sides[1]) {
            stats.inc("fd skipped: kink at the point");
            continue;
        }
        if (fd[0] - fd[1]).abs() > tol(fd[0], fd[1]) {
            stats.inc("fd skipped: steps disagree (kink or jump)");
            continue;
        }
        // A staircase (floor, ceil, a `nodiff` callee, a float made an integer)
        // whose treads are narrower than the step looks smooth to central
        // differences at h and h/2, while its derivative is zero: at a step far
        // below the treads' width the differences see the flat treads (or one
        // jump). Only where a step 64 times smaller agrees too do the differences
        // judge the gradient.
        let h3 = h1 / 64.0;
        let mut a = args.to_vec();
        let xp = set_coord(&mut a, p, e, x + h3);
        let lp = obj.eval(ws, &a);
        let xm = set_coord(&mut a, p, e, x - h3);
        let lm = obj.eval(ws, &a);
        let fd3 = match (lp, lm) {
            (Some((lp, mp)), Some((lm, mm))) if xp != xm => {
                let atol3 = 64.0 * eps * mag0.max(mp).max(mm) / h3 + 1e-12;
                Some(((lp - lm) / (xp - xm), atol3))
            }
            _ => None,
        };
        match fd3 {
            Some((d, atol3)) if d.is_finite() => {
                if (d - fd[1]).abs() > rtol * d.abs().max(fd[1].abs()) + atol3 {
                    stats.inc("fd skipped: a smaller step disagrees (staircase)");
                    continue;
                }
            }
            _ => {
                stats.inc("fd skipped: not finite");
                continue;
            }
        }
        // Richardson: the two steps' errors cancel to fourth order.
        let rich = (4.0 * fd[1] - fd[0]) / 3.0;
        stats.inc("fd checks");
        if (gv - rich).abs() > tol(gv, rich) && (gv - fd[1]).abs() > tol(gv, fd[1]) {
            // Before calling it a wrong gradient, make sure the differences judge
            // at all. (1) Steps far smaller again, noise bounded as for f64: a
            // staircase of treads narrower than h/64 (floor of 10^4 x) shows its
            // flat treads or a jump here. (2) The gradient itself at x +- h/2: a
            // derivative that changes within the step (sin of 10^17, a kink the
            // one-sided differences missed) makes the differences an average of
            // it, not its value at x.
            // (0) Results beyond 2^53, where every f64 is an integer: floor, ceil
            // and a `nodiff` rounding step are the identity there, so the
            // differences see a slope the declared zero derivative does not.
            if mag0 > 9.007_199_254_740_992e15 {
                stats.inc("fd inconclusive: results beyond 2^53");
                continue;
            }
            let mut staircase = false;
            for hp in [h1 / 4096.0, h1 / 262_144.0] {
                let mut a = args.to_vec();
                let xp = set_coord(&mut a, p, e, x + hp);
                let lp = obj.eval(ws, &a);
                let xm = set_coord(&mut a, p, e, x - hp);
                let lm = obj.eval(ws, &a);
                if let (Some((lp, mp)), Some((lm, mm))) = (lp, lm) {
                    let d = (lp - lm) / (xp - xm);
                    let atol_p = 64.0 * f64::EPSILON * mag0.max(mp).max(mm) / hp + 1e-12;
                    if xp != xm
                        && d.is_finite()
                        && (d - fd[1]).abs() > rtol * d.abs().max(fd[1].abs()) + atol_p
                    {
                        staircase = true;
                    }
                }
            }
            if staircase {
                stats.inc("fd inconclusive: a far smaller step disagrees (staircase)");
                continue;
            }
            let mut varies = false;
            for hp in [h1 / 2.0, -h1 / 2.0, h1 / 64.0, -h1 / 64.0] {
                let mut a = args.to_vec();
                set_coord(&mut a, p, e, x + hp);
                let gn = grad_at(&a)
                    .and_then(|gn| gn.gradient[p].as_ref().and_then(|v| get_coord(v, e)));
                if gn.is_none_or(|gn| !gn.is_finite() || (gn - gv).abs() > tol(gn, gv)) {
                    varies = true;
                }
            }
            if varies {
                stats.inc("fd inconclusive: the gradient varies within the step");
                continue;
            }
            let what = match e {
                None => format!("parameter {}", p + 1),
                Some(i) => format!("element {i} of parameter {}", p + 1),
            };
            return Some(format!(
                "d/d({what}) at {x:?}: gradient {gv:?}, central differences {:?} (step {h1:e}), {:?} (step {:e}), extrapolated {rich:?}; tolerance {:e}",
                fd[0],
                fd[1],
                h1 / 2.0,
                tol(gv, rich)
            ));
        }
    }
    None
}

/// Runs every check of `case` on function `f` at `n_args` argument lists. Findings
/// are pushed to `out`.
pub fn check_module(
    case: &Case<'_>,
    f: FuncId,
    n_args: usize,
    rng: &mut Rng,
    stats: &mut Stats,
    out: &mut Vec<Finding>,
) {
    let m = case.module;
    let name = m.name(f).to_string();
    let sig = m.sig(f).clone();
    let fail = |out: &mut Vec<Finding>, cat: &str, detail: String, args: Option<&[Val]>| {
        out.push(Finding {
            category: cat.to_string(),
            detail,
            call: args.map(|a| (name.clone(), args_json(a))),
        });
    };

    // Optimise, and check what comes out.
    let pipeline = Pipeline::new().with_hosts(case.hosts.clone());
    let prepared = match pipeline.prepare(m, &name) {
        Ok(p) => p,
        Err(e) => {
            return fail(
                out,
                "optimiser refused a verified module",
                e.to_string(),
                None,
            );
        }
    };
    let mo = &prepared.module;
    stats.inc("optimised modules");
    if let Err(e) = verify(mo) {
        fail(
            out,
            "optimised module does not verify",
            format!("{e}\n--- optimised:\n{mo}"),
            None,
        );
        return;
    }
    if let Some(d) = roundtrip(mo) {
        fail(out, "optimised module does not round-trip", d, None);
    }

    // Compile the module as it is, and (through the library's pipeline) optimised.
    let jit_orig = match compile_with(m, &[f], case.hosts) {
        Ok(c) => c,
        Err(CompileError::UnboundExtern { .. }) if case.mutant => {
            stats.inc("functions skipped: they call an extern without a host function");
            return;
        }
        Err(e) => return fail(out, "JIT refused a verified module", e.to_string(), None),
    };
    let jit_opt = match pipeline.compile_function(m, &name) {
        Ok(c) => c,
        Err(e) => {
            return fail(out, "JIT refused the optimised module", e.to_string(), None);
        }
    };
    stats.inc("modules compiled");

    // Derive a gradient: a random request, on the optimised module or the module
    // as it is.
    let config = random_config(rng, m, f);
    let grad_opt = rng.chance(75);
    let mut checkpoint_checked = false;
    let gpipe = if grad_opt {
        pipeline.clone()
    } else {
        pipeline.clone().with_opt(OptConfig::none())
    };
    let rule = match gpipe.derive(m, &name, Some(&config)) {
        Ok(r) => Some(r),
        Err(Error::Derive(e)) => {
            if let AdError::Internal { .. } = e {
                fail(
                    out,
                    "derivation bug (AdError::Internal)",
                    e.to_string(),
                    None,
                );
            } else if case.mutant || !matches!(e, AdError::Invalid { .. }) {
                *stats.refusals.entry(refusal(&e)).or_default() += 1;
            } else {
                fail(
                    out,
                    "derivation refused a verified module",
                    e.to_string(),
                    None,
                );
            }
            None
        }
        Err(e) => {
            fail(out, "derivation failed", e.to_string(), None);
            None
        }
    };
    let mut grad = None;
    if let Some(rule) = &rule {
        stats.inc("gradients derived");
        if let Err(e) = verify(&rule.module) {
            fail(
                out,
                "derived module does not verify",
                format!("{e}\n--- derived:\n{}", rule.module),
                None,
            );
        } else if let Some(d) = roundtrip(&rule.module) {
            fail(out, "derived module does not round-trip", d, None);
        }
        match gpipe.compile_rule(rule.clone()) {
            Ok(g) => grad = Some(g),
            Err(e) => fail(out, "JIT refused a derived rule", e.to_string(), None),
        }
    }
    // The same request with the other tape policy, for a cross-check on the
    // interpreter.
    let variant = match &rule {
        Some(_) if rng.chance(30) => {
            // The other tape policy, debug mode toggled (without NaN checks) and now
            // and then without the primal: none of these changes the gradient.
            let other = match config.tape {
                TapePolicy::Minimal => TapePolicy::SaveAll,
                TapePolicy::SaveAll => TapePolicy::Minimal,
            };
            let primal = config.needs_primal && rng.chance(70);
            let v = config
                .clone()
                .with_tape(other)
                .with_debug(!config.debug, false)
                .with_primal(primal);
            gpipe.derive(m, &name, Some(&v)).ok()
        }
        _ => None,
    };
    // Forward mode for the same request (`active` and `dup` as `dual`), on the same
    // module: checked against the JIT and, by the dot-product test, against the
    // gradient.
    let fwd: Option<(Frule, CompiledJvp)> = match &rule {
        Some(_) => {
            let fc = FruleConfig::matching(&config, 1);
            match gpipe.derive_jvp(m, &name, Some(&fc)) {
                Ok(fr) => {
                    stats.inc("forward rules derived");
                    if let Err(e) = verify(&fr.module) {
                        fail(
                            out,
                            "derived forward module does not verify",
                            format!("{e}\n--- derived:\n{}", fr.module),
                            None,
                        );
                        None
                    } else if let Some(d) = roundtrip(&fr.module) {
                        fail(out, "derived forward module does not round-trip", d, None);
                        None
                    } else {
                        match gpipe.compile_frule(fr.clone()) {
                            Ok(c) => Some((fr, c)),
                            Err(e) => {
                                fail(out, "JIT refused a forward rule", e.to_string(), None);
                                None
                            }
                        }
                    }
                }
                Err(Error::Derive(e @ AdError::Internal { .. })) => {
                    fail(
                        out,
                        "forward derivation bug (AdError::Internal)",
                        e.to_string(),
                        None,
                    );
                    None
                }
                Err(Error::Derive(e)) => {
                    *stats
                        .refusals
                        .entry(format!("forward: {}", refusal(&e)))
                        .or_default() += 1;
                    None
                }
                Err(e) => {
                    fail(out, "forward derivation failed", e.to_string(), None);
                    None
                }
            }
        }
        None => None,
    };
    let mut ws_jvp = Workspace::new().with_max_depth(DEPTH);
    let f32 = uses_f32(m);
    // Finite differences call the primal the rule was derived from, compiled.
    let fd_primal = if case.fd && rule.is_some() && !grad_opt {
        Pipeline::new()
            .with_hosts(case.hosts.clone())
            .with_opt(OptConfig::none())
            .compile_function(m, &name)
            .ok()
    } else {
        None
    };

    // The same request at a width above 1, reverse mode's `Reverse(N)` and forward
    // mode's (widened from width 1 for such code), each checked lane by lane against
    // width 1 on the interpreter. A rule of width N must derive and verify wherever
    // width 1 does.
    let wide_ok = |out: &mut Vec<Finding>,
                   stats: &mut Stats,
                   (derived, refused, unverified): (&'static str, &str, &str),
                   r: Result<&Module, String>| match r {
        Ok(wm) => {
            stats.inc(derived);
            if let Err(e) = verify(wm) {
                fail(out, unverified, format!("{e}\n--- derived:\n{wm}"), None);
                false
            } else {
                true
            }
        }
        // A function with a rule over slices asked for at width N: refused at
        // once (a documented limit).
        Err(e) if e.contains("cannot call yet") => {
            stats.inc("width-N checks skipped: a call of a rule over slices");
            false
        }
        Err(e) => {
            fail(out, refused, e, None);
            false
        }
    };
    let wide: Option<Rule> = match &rule {
        Some(_) if rng.chance(50) => {
            let w = [2, 3, 5][rng.below(3) as usize];
            let r = gpipe.derive_width(m, &name, Some(&config), w);
            let what = (
                "rules of width N derived",
                "a rule derived at width 1 is refused at width N",
                "derived module of width N does not verify",
            );
            let ok = wide_ok(
                out,
                stats,
                what,
                r.as_ref().map(|r| &r.module).map_err(|e| e.to_string()),
            );
            r.ok()
                .filter(|_| ok)
                .filter(|r| !calls_slice_rules(&r.module, stats))
        }
        _ => None,
    };
    // The rule of width N compiled, where width 1 compiled: its lanes paired as
    // vectors (`jit/src/lanes.rs`), compared with the interpreter's.
    let wide_jit: Option<CompiledGradient> = match (&wide, &grad) {
        (Some(w), Some(_)) => match gpipe.compile_rule(w.clone()) {
            Ok(g) => Some(g),
            Err(e) => {
                fail(out, "JIT refused a rule of width N", e.to_string(), None);
                None
            }
        },
        _ => None,
    };
    let mut ws_wide = Workspace::new().with_max_depth(DEPTH);
    let wide_fwd: Option<Frule> = match &fwd {
        Some(_) if rng.chance(50) => {
            let w = [2, 3, 5][rng.below(3) as usize];
            let r = gpipe.derive_jvp(m, &name, Some(&FruleConfig::matching(&config, w)));
            let what = (
                "forward rules of width N derived",
                "a forward rule derived at width 1 is refused at width N",
                "derived forward module of width N does not verify",
            );
            let ok = wide_ok(
                out,
                stats,
                what,
                r.as_ref().map(|r| &r.module).map_err(|e| e.to_string()),
            );
            r.ok()
                .filter(|_| ok)
                .filter(|r| !calls_slice_rules(&r.module, stats))
        }
        _ => None,
    };
    let wide_fwd_jit: Option<CompiledJvp> = match (&wide_fwd, &fwd) {
        (Some(w), Some(_)) => match gpipe.compile_frule(w.clone()) {
            Ok(g) => Some(g),
            Err(e) => {
                fail(
                    out,
                    "JIT refused a forward rule of width N",
                    e.to_string(),
                    None,
                );
                None
            }
        },
        _ => None,
    };
    let mut ws_prim = Workspace::new().with_max_depth(DEPTH);
    let mut ws_grad = Workspace::new().with_max_depth(DEPTH);
    let mut ws_fd = Workspace::new().with_max_depth(DEPTH);
    let mut ws_near = Workspace::new().with_max_depth(DEPTH);
    let mut cache = None;
    let mut interp_grad = rule.as_ref().map(|r| {
        Interpreter::new(&r.module)
            .with_limits(Limits {
                max_depth: DEPTH,
                fuel: Some(case.fuel * 20),
            })
            .with_hosts(case.hosts)
    });

    for k in 0..n_args {
        let args: Vec<Val> = sig
            .params
            .iter()
            .map(|&t| {
                let nice = k == 0 || rng.chance(40);
                random_arg(rng, t, nice)
            })
            .collect();
        stats.inc("argument sets");
        let with = Some(args.as_slice());

        // 1. The interpreter against the JIT, on the module as it is.
        let io = interp_run(m, case.hosts, f, &args, case.fuel);
        if fuel_out(&io) {
            stats.inc("calls skipped: out of fuel");
            continue;
        }
        if case.mutant
            && matches!(&io.res, Err(e) if matches!(e.kind, ErrorKind::TapeMismatch { .. }))
        {
            stats.inc("calls skipped: tape type mismatch (interpreter only)");
            continue;
        }
        let jo = jit_run(&jit_orig, &mut ws_prim, f, &args);
        stats.inc("runs compared (interpreter vs JIT)");
        match &io.res {
            Ok(_) => stats.inc("runs that returned"),
            Err(e) => *stats.error_kinds.entry(kind_name(&e.kind)).or_default() += 1,
        }
        if let Some(d) = compare_exact(&io, &jo, stats) {
            // The native stack and the tape's memory are the JIT's own limits.
            let jit_only = matches!(&jo.res, Err(e) if matches!(e.kind, ErrorKind::StackExhausted(_) | ErrorKind::TapeFull(_)));
            if jit_only {
                stats.inc("runs skipped: a limit of the JIT only (stack, tape memory)");
            } else {
                fail(out, "interpreter and JIT differ", d, with);
            }
        }

        // 2. The optimiser: the optimised module on the interpreter against the module
        // as it is; and on the JIT against the interpreter.
        let iopt = interp_run(mo, case.hosts, prepared.func, &args, 2 * case.fuel + 10_000);
        stats.inc("optimiser checks");
        let depth_limited =
            matches!(&io.res, Err(e) if matches!(e.kind, ErrorKind::RecursionLimit(_)));
        let opt_ok = match (&io.res, &iopt.res) {
            _ if depth_limited => {
                stats.inc("optimiser checks at the depth limit (inlining may change depth)");
                true
            }
            (Ok(a), Ok(b)) => same_vals(a, b, false) && same_vals(&io.args, &iopt.args, false),
            (Err(a), Err(b)) => a.kind == b.kind && same_vals(&io.args, &iopt.args, false),
            _ => false,
        };
        if !opt_ok {
            fail(
                out,
                "optimiser changed the result",
                format!(
                    "as written (interpreter): {}\noptimised (interpreter):  {}\n--- optimised module:\n{mo}",
                    describe(&io),
                    describe(&iopt)
                ),
                with,
            );
        }
        if !fuel_out(&iopt) {
            match cf_run(&jit_opt, &mut ws_prim, &args) {
                Ok(jopt) => {
                    stats.inc("runs compared (interpreter vs JIT)");
                    if let Some(d) = compare_exact(&iopt, &jopt, stats) {
                        fail(
                            out,
                            "interpreter and JIT differ on the optimised module",
                            format!("{d}\n--- optimised module:\n{mo}"),
                            with,
                        );
                    }
                    // The borrowed form, on the same workspace.
                    let jb = cf_run_args(&jit_opt, &mut ws_prim, &sig, &args);
                    stats.inc("call_args checks");
                    if let Some(d) = compare_exact(&jopt, &jb, stats) {
                        fail(
                            out,
                            "CompiledFunction::call_args differs from call",
                            d,
                            with,
                        );
                    }
                }
                Err(d) => fail(out, "CompiledFunction failed", d, with),
            }
        }

        // 3. The gradient, on both engines and through every entry point.
        let (Some(rule), Some(g), Some(ig)) = (&rule, &grad, interp_grad.as_mut()) else {
            continue;
        };
        let seeds = random_seeds(rng, m, f, rule, &args);
        let gi: GradResult = value_and_gradient(ig, rule, &args, &seeds).map_err(Error::from);
        let t = ig.tape();
        if t.scalars != 0 || t.buffers != 0 {
            fail(
                out,
                "interpreter's tape not empty after a gradient",
                format!("{t:?} after {}", show_grad(&gi)),
                with,
            );
            ig.reset_tape();
        }
        if matches!(grad_kind(&gi), Some(ErrorKind::OutOfFuel(_))) {
            stats.inc("gradients skipped: out of fuel");
            continue;
        }
        if let Some((fr, fc)) = &fwd {
            let c = ForwardCase {
                frule: fr,
                compiled: fc,
                hosts: case.hosts,
                fuel: case.fuel * 20,
                dot: case.fd && !f32,
            };
            if let Some((cat, d)) = forward_checks(&c, &mut ws_jvp, &args, &seeds, &gi, rng, stats)
            {
                fail(
                    out,
                    cat,
                    format!("{d}\nseeds: {seeds:?}\nconfig: {config:?}"),
                    with,
                );
            }
        }
        if let Some(wide) = &wide {
            let mut c = WidthCase {
                one: rule,
                wide,
                module: m,
                func: f,
                hosts: case.hosts,
                fuel: case.fuel * 20,
                jit: wide_jit.as_ref().map(|g| (g, &mut ws_wide)),
            };
            if let Some(d) = width_check(&mut c, &args, &seeds, &gi, rng, stats) {
                fail(
                    out,
                    "a rule of width N differs from N rules of width 1",
                    format!("{d}\nconfig: {config:?}"),
                    with,
                );
            }
        }
        if let (Some(wf), Some((f1, _))) = (&wide_fwd, &fwd)
            && let Some(d) = fwd_width_check(
                f1,
                wf,
                wide_fwd_jit.as_ref().map(|g| (g, &mut ws_wide)),
                case.hosts,
                case.fuel * 20,
                &args,
                rng,
                stats,
            )
        {
            fail(
                out,
                "a forward rule of width N differs from N of width 1",
                format!("{d}\nconfig: {config:?}"),
                with,
            );
        }
        let gj: GradResult = g.value_and_pullback(&mut ws_grad, &args, &seeds);
        stats.inc("gradients compared (interpreter vs JIT)");
        match &gj {
            Ok(_) => stats.inc("gradients that succeeded"),
            Err(_) => stats.inc("gradients that failed (alike on both engines)"),
        }
        if !same_grad(&gi, &gj, false) {
            fail(
                out,
                "gradient differs between interpreter and JIT",
                format!(
                    "interpreter: {}\nJIT:         {}\nseeds: {seeds:?}\nconfig: {config:?}\n--- derived:\n{}",
                    show_grad(&gi),
                    show_grad(&gj),
                    rule.module
                ),
                with,
            );
        }
        let t = ws_grad.tape();
        if t.scalars != 0 || t.buffers != 0 {
            fail(
                out,
                "JIT workspace's tape not empty after a gradient",
                format!("{t:?} after {}", show_grad(&gj)),
                with,
            );
            ws_grad.reset_tape();
        }
        // The reused workspace against a fresh one, the cache and the borrowed form.
        let mut fresh_ws = Workspace::new().with_max_depth(DEPTH);
        let fresh = g.value_and_pullback(&mut fresh_ws, &args, &seeds);
        stats.inc("workspace reuse checks");
        if !same_grad(&gj, &fresh, true) {
            fail(
                out,
                "a reused workspace gives another gradient than a fresh one",
                format!("reused: {}\nfresh:  {}", show_grad(&gj), show_grad(&fresh)),
                with,
            );
        }
        let by_args = grad_by_args(g, &mut ws_grad, &args, &seeds);
        stats.inc("gradient_args checks");
        if !same_grad(&by_args, &fresh, true) {
            fail(
                out,
                "gradient_args differs from value_and_pullback",
                format!(
                    "gradient_args: {}\nvalue_and_pullback: {}",
                    show_grad(&by_args),
                    show_grad(&fresh)
                ),
                with,
            );
        }
        // The cache has its own workspace with the default depth limit: compare where
        // the depth limit plays no part.
        let deep = matches!(
            grad_kind(&fresh),
            Some(ErrorKind::RecursionLimit(_) | ErrorKind::StackExhausted(_))
        );
        if !deep {
            match cache.as_mut() {
                None => {
                    if let Ok(c) = g.prepare_with(&args, &seeds) {
                        cache = Some(c);
                    }
                }
                Some(c) => {
                    let r = c.value_and_pullback(&args, &seeds).map(|r| Gradient {
                        value: rule.layout.config.needs_primal.then(|| r.value.to_vec()),
                        gradient: r.gradient.to_vec(),
                        args: r.args.to_vec(),
                        tape_peak_bytes: r.tape_peak_bytes,
                        recomputed_steps: r.recomputed_steps,
                    });
                    stats.inc("gradient cache checks");
                    if !same_grad(&r, &fresh, true) {
                        fail(
                            out,
                            "GradientCache differs from a fresh workspace",
                            format!("cache: {}\nfresh: {}", show_grad(&r), show_grad(&fresh)),
                            with,
                        );
                    }
                    let t = c.workspace().tape();
                    if t.scalars != 0 || t.buffers != 0 {
                        fail(
                            out,
                            "GradientCache's tape not empty",
                            format!("{t:?}"),
                            with,
                        );
                    }
                }
            }
        }
        // The other tape policy gives the same gradient.
        if let Some(v) = &variant {
            let mut it = Interpreter::new(&v.module)
                .with_limits(Limits {
                    max_depth: DEPTH,
                    fuel: Some(case.fuel * 20),
                })
                .with_hosts(case.hosts);
            let gv: GradResult = value_and_gradient(&mut it, v, &args, &seeds).map_err(Error::from);
            if let (Ok(a), Ok(b)) = (&gi, &gv) {
                stats.inc("tape policy cross-checks");
                let values = match (&a.value, &b.value) {
                    (Some(x), Some(y)) => same_vals(x, y, false),
                    _ => true,
                };
                let same = values
                    && same_opt_vals(&a.gradient, &b.gradient, false)
                    && same_vals(&a.args, &b.args, false);
                if !same {
                    fail(
                        out,
                        "tape policies give different gradients",
                        format!(
                            "{:?}: {}\n{:?}: {}",
                            config.tape,
                            show_grad(&gi),
                            v.layout.config.tape,
                            show_grad(&gv)
                        ),
                        with,
                    );
                }
            }
        }

        // Checkpoints change no bit: every call and every loop that can be
        // checkpointed marked, on the optimised module (once per program).
        if !checkpoint_checked {
            checkpoint_checked = true;
            checkpoint_check(
                case,
                mo,
                prepared.func,
                &config,
                &args,
                &seeds,
                rng,
                stats,
                out,
                with,
            );
        }

        // 4. The gradient against the primal it was derived from.
        let prim = if grad_opt { &iopt } else { &io };
        if fuel_out(prim) {
            continue;
        }
        // The code of an overlay's target and of a `vjp` rule runs in the gradient
        // only: it may fail where the primal does not (or the other way round).
        let extra_code = m.decls.iter().any(|(d, _)| {
            matches!(
                d,
                Decl::Overlay { .. } | Decl::Vjp { .. } | Decl::VjpPair { .. }
            )
        });
        match (&prim.res, &gj) {
            (Ok(_), Err(_)) | (Err(_), Ok(_)) | (Err(_), Err(_)) if extra_code => {
                stats.inc("gradient vs primal outcome not compared (overlay or vjp code)");
            }
            (Ok(v), Ok(gr)) => {
                stats.inc("gradient vs primal checks");
                let value_ok = gr.value.as_ref().is_none_or(|gv| same_vals(gv, v, false));
                let args_ok = gr
                    .args
                    .iter()
                    .zip(&prim.args)
                    .enumerate()
                    .all(|(i, (a, b))| {
                        config.params.get(i) == Some(&Activity::DupNoNeed) || same_val(a, b, false)
                    });
                if !value_ok || !args_ok {
                    fail(
                        out,
                        "forward pass differs from the primal",
                        format!("primal: {}\ngradient: {}", describe(prim), show_grad(&gj)),
                        with,
                    );
                }
            }
            (Ok(_), Err(Error::Run(e))) => {
                // Debug checks trap; deeper calls may hit the limits.
                if !matches!(
                    e.kind,
                    ErrorKind::Trap(_)
                        | ErrorKind::RecursionLimit(_)
                        | ErrorKind::StackExhausted(_)
                ) {
                    fail(
                        out,
                        "gradient fails where the primal succeeds",
                        format!("primal: {}\ngradient: {}", describe(prim), show_grad(&gj)),
                        with,
                    );
                }
            }
            (Err(pe), Ok(_)) => {
                fail(
                    out,
                    "gradient succeeds where the primal fails",
                    format!("primal: error `{pe}`\ngradient: {}", show_grad(&gj)),
                    with,
                );
            }
            (Err(pe), Err(Error::Run(e))) => {
                if pe.kind != e.kind
                    && !matches!(pe.kind, ErrorKind::RecursionLimit(_))
                    && !matches!(e.kind, ErrorKind::Trap(_))
                {
                    fail(
                        out,
                        "gradient fails otherwise than the primal",
                        format!("primal: error `{pe}`\ngradient: {}", show_grad(&gj)),
                        with,
                    );
                }
            }
            (_, Err(e)) => fail(out, "gradient failed", format!("{e}"), with),
        }

        // 5. Finite differences.
        if !case.fd {
            continue;
        }
        let Ok(gr) = &gj else { continue };
        if prim.res.is_err() {
            continue;
        }
        let Some(primal) = fd_primal
            .as_ref()
            .or(if grad_opt { Some(&jit_opt) } else { None })
        else {
            continue;
        };
        let obj = Objective {
            primal,
            rule,
            seeds: &seeds,
            sig: sig.clone(),
        };
        let mut grad_at = |a: &[Val]| g.value_and_pullback(&mut ws_near, a, &seeds).ok();
        if let Some(d) = fd_check(&obj, &mut ws_fd, &args, gr, &mut grad_at, f32, rng, stats) {
            fail(
                out,
                "gradient differs from finite differences",
                format!(
                    "{d}\nseeds: {seeds:?}\nconfig: {config:?}\nderived from the {} module",
                    if grad_opt { "optimised" } else { "unoptimised" }
                ),
                with,
            );
        }
    }
}

/// What [`forward_checks`] needs.
struct ForwardCase<'a> {
    frule: &'a Frule,
    compiled: &'a CompiledJvp,
    hosts: &'a Hosts,
    fuel: u64,
    /// Whether to run the dot-product test (finite, f64 programs without huge
    /// constants: where rounding cannot swamp the comparison).
    dot: bool,
}

/// `m` with every call checkpointed and a `checkpoint_loop` of 1 to 4 snapshots
/// in the header of every loop that tests `icmp lt` of one of its phis and holds
/// nothing else.
fn mark_checkpoints(m: &Module, rng: &mut Rng) -> Module {
    use gradlift::ir::dominators::DominatorTree;
    use gradlift::ir::flowgraph::ControlFlowGraph;
    use gradlift::ir::loops::LoopForest;
    let mut out = m.clone();
    let ids: Vec<FuncId> = out.defined().map(|(id, _)| id).collect();
    for id in ids {
        let Some(func) = out.function_mut(id) else {
            continue;
        };
        for (_, inst) in func.placed_insts().collect::<Vec<_>>() {
            if func.insts[inst].opcode == Opcode::Call {
                func.insts[inst].checkpoint = true;
            }
        }
        let cfg = ControlFlowGraph::new(func);
        let forest = LoopForest::new(&cfg, &DominatorTree::new(&cfg));
        for l in 0..forest.len() {
            let h = forest.header(l);
            let data = &func.blocks[h];
            let test = match (&data.insts[..], &data.term) {
                ([i], Some(gradlift::ir::Terminator::Br { cond, .. }))
                    if func.insts[*i].results.first() == Some(cond) =>
                {
                    *i
                }
                _ => continue,
            };
            let d = &func.insts[test];
            let counts = d.opcode == Opcode::Icmp
                && d.imm == Imm::Cmp(CmpPred::Lt)
                && data.phis.iter().any(|p| p.value == d.args[0]);
            if counts {
                let k = func.make_const(Scalar::I64(1 + rng.below(4) as i64));
                let marker = func.make_inst(Opcode::CheckpointLoop, Imm::None, &[k], &[]);
                func.blocks[h].insts.insert(0, marker);
            }
        }
    }
    out
}

/// The rule of `@f` in the optimised module `mo` against the rule of the same
/// module with its calls and loops checkpointed ([`mark_checkpoints`]): the same
/// value, gradient and arguments, bit for bit, on the interpreter (or the same
/// kind of error). A loop the derivation cannot checkpoint (it writes into a
/// slice from outside, leaves early, ...) is counted and skipped.
#[allow(clippy::too_many_arguments)]
fn checkpoint_check(
    case: &Case<'_>,
    mo: &Module,
    f: FuncId,
    config: &RuleConfig,
    args: &[Val],
    seeds: &Seeds,
    rng: &mut Rng,
    stats: &mut Stats,
    out: &mut Vec<Finding>,
    with: Option<&[Val]>,
) {
    let marked = mark_checkpoints(mo, rng);
    let config = config.clone().with_fuse(false);
    let (Ok(plain), marked_rule) = (
        gradlift::adjoint::build_rrule(mo, f, &config),
        gradlift::adjoint::build_rrule(&marked, f, &config),
    ) else {
        return;
    };
    // A marked loop the derivation refuses: refused at once for the function
    // asked for, or (lazy derivation) a callee's rule that fails when it runs.
    let refuses = |m: &gradlift::ir::Module| {
        m.funcs.values().filter_map(|d| d.function()).any(|f| {
            f.messages
                .values()
                .any(|msg| msg.contains("cannot be checkpointed"))
        })
    };
    let ck = match marked_rule {
        Ok(r) if refuses(&r.module) => {
            stats.inc("checkpoint cross-checks skipped: a loop cannot be checkpointed");
            return;
        }
        Ok(r) => r,
        Err(e) if e.to_string().contains("cannot be checkpointed") => {
            stats.inc("checkpoint cross-checks skipped: a loop cannot be checkpointed");
            return;
        }
        Err(e) => {
            out.push(Finding {
                category: "a checkpointed module does not derive".to_string(),
                detail: format!(
                    "{e}
--- marked:
{marked}"
                ),
                call: None,
            });
            return;
        }
    };
    let run = |rule: &Rule, fuel: u64| -> GradResult {
        let mut it = Interpreter::new(&rule.module)
            .with_limits(Limits {
                max_depth: DEPTH,
                fuel: Some(fuel),
            })
            .with_hosts(case.hosts);
        value_and_gradient(&mut it, rule, args, seeds).map_err(Error::from)
    };
    let a = run(&plain, case.fuel * 20);
    // Steps run again cost fuel: more for the checkpointed rule.
    let b = run(&ck, case.fuel * 200);
    if matches!(grad_kind(&a), Some(ErrorKind::OutOfFuel(_)))
        || matches!(grad_kind(&b), Some(ErrorKind::OutOfFuel(_)))
    {
        return;
    }
    stats.inc("checkpoint cross-checks");
    let same = match (&a, &b) {
        (Ok(x), Ok(y)) => {
            x.value.as_deref().unwrap_or(&[]).len() == y.value.as_deref().unwrap_or(&[]).len()
                && same_vals(
                    x.value.as_deref().unwrap_or(&[]),
                    y.value.as_deref().unwrap_or(&[]),
                    true,
                )
                && same_opt_vals(&x.gradient, &y.gradient, true)
                && same_vals(&x.args, &y.args, true)
        }
        (Err(Error::Run(x)), Err(Error::Run(y))) => {
            core::mem::discriminant(&x.kind) == core::mem::discriminant(&y.kind)
        }
        _ => false,
    };
    // The one known difference (docs/checkpointing.md, "Limits"): a zero of the
    // other sign, where zero terms are added in another way. Counted, not failed.
    let zero_signs = !same
        && match (&a, &b) {
            (Ok(x), Ok(y)) => {
                let eq = |p: &Val, q: &Val| match (p, q) {
                    (Val::F64(u), Val::F64(v)) => {
                        u.to_bits() == v.to_bits() || (*u == 0.0 && *v == 0.0)
                    }
                    (Val::F32(u), Val::F32(v)) => {
                        u.to_bits() == v.to_bits() || (*u == 0.0 && *v == 0.0)
                    }
                    (Val::F64s(u), Val::F64s(v)) => {
                        u.len() == v.len()
                            && u.iter().zip(v).all(|(u, v)| {
                                u.to_bits() == v.to_bits() || (*u == 0.0 && *v == 0.0)
                            })
                    }
                    (Val::F32s(u), Val::F32s(v)) => {
                        u.len() == v.len()
                            && u.iter().zip(v).all(|(u, v)| {
                                u.to_bits() == v.to_bits() || (*u == 0.0 && *v == 0.0)
                            })
                    }
                    (p, q) => same_val(p, q, true),
                };
                let all = |p: &[Val], q: &[Val]| {
                    p.len() == q.len() && p.iter().zip(q).all(|(p, q)| eq(p, q))
                };
                all(
                    x.value.as_deref().unwrap_or(&[]),
                    y.value.as_deref().unwrap_or(&[]),
                ) && x.gradient.len() == y.gradient.len()
                    && x.gradient
                        .iter()
                        .zip(&y.gradient)
                        .all(|(p, q)| match (p, q) {
                            (Some(p), Some(q)) => eq(p, q),
                            (None, None) => true,
                            _ => false,
                        })
                    && all(&x.args, &y.args)
            }
            _ => false,
        };
    if zero_signs {
        stats.inc("checkpoint cross-checks: a zero of the other sign");
        return;
    }
    if !same {
        out.push(Finding {
            category: "a checkpoint changes the gradient".to_string(),
            detail: format!(
                "unchecked: {}
checkpointed: {}
--- marked:
{marked}",
                show_grad(&a),
                show_grad(&b)
            ),
            call: with.map(|w| (mo.name(f).to_string(), args_json(w))),
        });
    }
}

fn same_opt_val(a: &Option<Val>, b: &Option<Val>) -> bool {
    match (a, b) {
        (Some(x), Some(y)) => same_val(x, y, false),
        (x, y) => x.is_none() && y.is_none(),
    }
}

/// The forward rule at `args` along random tangents: the interpreter against the
/// JIT (values, tangents, tangent slices, arguments, or the same error), and the
/// dot-product test `<J v, w> = <v, Jᵀ w>` against the gradient `gi` of the
/// matching reverse rule with `seeds` as `w`. Returns a finding.
fn forward_checks(
    c: &ForwardCase<'_>,
    ws: &mut Workspace,
    args: &[Val],
    seeds: &Seeds,
    gi: &Result<Gradient, Error>,
    rng: &mut Rng,
    stats: &mut Stats,
) -> Option<(&'static str, String)> {
    let layout = &c.frule.layout;
    let v: Vec<Option<Val>> = args
        .iter()
        .zip(&layout.config.params)
        .map(|(a, &d)| {
            if d != DualActivity::Dual {
                return None;
            }
            Some(match a {
                Val::F64(_) => Val::F64(rng.uniform(-1.0, 1.0)),
                Val::F32(_) => Val::F32(rng.uniform(-1.0, 1.0) as f32),
                Val::F64s(x) => Val::F64s(x.iter().map(|_| rng.uniform(-1.0, 1.0)).collect()),
                Val::F32s(x) => {
                    Val::F32s(x.iter().map(|_| rng.uniform(-1.0, 1.0) as f32).collect())
                }
                other => other.clone(),
            })
        })
        .collect();
    let mut it = Interpreter::new(&c.frule.module)
        .with_limits(Limits {
            max_depth: DEPTH,
            fuel: Some(c.fuel),
        })
        .with_hosts(c.hosts);
    let ji = jvp_vals(&mut it, c.frule, args, &v);
    if let Err(EvalError::Run { error, .. }) = &ji
        && matches!(error.kind, ErrorKind::OutOfFuel(_))
    {
        stats.inc("jvps skipped: out of fuel");
        return None;
    }
    let jj = c.compiled.jvp(ws, args, &v);
    stats.inc("jvps compared (interpreter vs JIT)");
    let show = |r: &Result<Jvp, Error>| match r {
        Ok(j) => format!("{j:?}"),
        Err(e) => format!("error: {e}"),
    };
    let ji: Result<Jvp, Error> = ji.map_err(Error::from);
    match (&ji, &jj) {
        (Ok(a), Ok(b)) => {
            let values = match (&a.value, &b.value) {
                (Some(x), Some(y)) => same_vals(x, y, false),
                (x, y) => x.is_none() && y.is_none(),
            };
            let same = values
                && same_vals(&a.tangents, &b.tangents, false)
                && same_vals(&a.args, &b.args, false)
                && a.slices.len() == b.slices.len()
                && a.slices
                    .iter()
                    .zip(&b.slices)
                    .all(|(x, y)| same_opt_val(x, y));
            if !same {
                return Some((
                    "forward rule: interpreter and JIT differ",
                    format!(
                        "interpreter: {}\nJIT: {}\ntangents: {v:?}",
                        show(&ji),
                        show(&jj)
                    ),
                ));
            }
        }
        (Err(Error::Run(a)), Err(Error::Run(b)))
            if a.kind == b.kind && a.func == b.func && a.op == b.op => {}
        _ => {
            let jit_only =
                matches!(&jj, Err(Error::Run(e)) if matches!(e.kind, ErrorKind::StackExhausted(_)));
            if jit_only {
                stats.inc("jvps skipped: a limit of the JIT only (stack)");
                return None;
            }
            return Some((
                "forward rule: interpreter and JIT differ",
                format!(
                    "interpreter: {}\nJIT: {}\ntangents: {v:?}",
                    show(&ji),
                    show(&jj)
                ),
            ));
        }
    }
    // The dot-product test.
    let (Ok(j), Ok(g), true) = (&ji, gi, c.dot) else {
        return None;
    };
    let num = |v: &Val| match v {
        Val::F64(x) => Some(*x),
        Val::F32(x) => Some(f64::from(*x)),
        _ => None,
    };
    let elems = |v: &Val| match v {
        Val::F64s(x) => x.clone(),
        Val::F32s(x) => x.iter().map(|&y| f64::from(y)).collect(),
        _ => Vec::new(),
    };
    let (mut lhs, mut rhs, mut scale) = (0.0f64, 0.0f64, 0.0f64);
    for (k, t) in j.tangents.iter().enumerate() {
        let w = seeds
            .results
            .as_ref()
            .map_or(1.0, |s| s.get(k).copied().unwrap_or(1.0));
        let t = num(t)?;
        lhs += w * t;
        scale += (w * t).abs();
    }
    for (i, s) in j.slices.iter().enumerate() {
        let Some(s) = s else { continue };
        let w = seeds.shadows.get(i).and_then(|w| w.as_ref()).map(elems);
        for (k, t) in elems(s).iter().enumerate() {
            let w = w.as_ref().map_or(0.0, |w| w[k]);
            lhs += w * t;
            scale += (w * t).abs();
        }
    }
    for (i, vi) in v.iter().enumerate() {
        let Some(vi) = vi else { continue };
        let gi = g.gradient.get(i)?.as_ref()?;
        match (num(vi), num(gi)) {
            (Some(a), Some(b)) => {
                rhs += a * b;
                scale += (a * b).abs();
            }
            _ => {
                for (a, b) in elems(vi).iter().zip(&elems(gi)) {
                    rhs += a * b;
                    scale += (a * b).abs();
                }
            }
        }
    }
    if !lhs.is_finite() || !rhs.is_finite() || !scale.is_finite() || scale > 1e12 {
        stats.inc("dot-product checks skipped: not finite or huge");
        return None;
    }
    stats.inc("dot-product checks (forward vs reverse)");
    if (lhs - rhs).abs() > 1e-8 * scale + 1e-300 {
        return Some((
            "forward and reverse mode disagree (dot-product test)",
            format!(
                "<J v, w> = {lhs:e}, <v, Jᵀ w> = {rhs:e} (scale {scale:e})\ntangents: {v:?}\njvp: {j:?}\ngradient: {:?}",
                g.gradient
            ),
        ));
    }
    None
}

/// A rule of width N and the width-1 rule of the same request.
struct WidthCase<'a> {
    one: &'a Rule,
    wide: &'a Rule,
    module: &'a Module,
    func: FuncId,
    hosts: &'a Hosts,
    fuel: u64,
    /// The wide rule compiled, and its workspace.
    jit: Option<(&'a CompiledGradient, &'a mut Workspace)>,
}

/// The interpreter for a width check, with the campaign's limits.
fn interp<'m>(c: &WidthCase<'_>, m: &'m Module) -> Interpreter<'m> {
    Interpreter::new(m)
        .with_limits(Limits {
            max_depth: DEPTH,
            fuel: Some(c.fuel),
        })
        .with_hosts(c.hosts)
}

/// Lane `j` of a width-N gradient entry, shaped as width 1 has it.
fn lane_of(v: &Val, n: usize, j: usize, scalar: bool) -> Val {
    match (v, scalar) {
        (Val::F64s(x), true) => Val::F64(x[j]),
        (Val::F32s(x), true) => Val::F32(x[j]),
        (Val::F64s(x), false) => Val::F64s(x.iter().skip(j).step_by(n).copied().collect()),
        (Val::F32s(x), false) => Val::F32s(x.iter().skip(j).step_by(n).copied().collect()),
        (v, _) => v.clone(),
    }
}

/// The width-N rule on the interpreter, lane 0 seeded with `seeds` (whose width-1
/// gradient is `gi`) and the other lanes with random seeds, against width 1 lane by
/// lane, bit for bit (errors alike).
fn width_check(
    c: &mut WidthCase<'_>,
    args: &[Val],
    seeds: &Seeds,
    gi: &GradResult,
    rng: &mut Rng,
    stats: &mut Stats,
) -> Option<String> {
    let n = c.wide.layout.width as usize;
    let sig = c.module.sig(c.func);
    let n_float = sig.results.iter().filter(|t| t.is_float()).count();
    let mut lanes = vec![seeds.clone()];
    for _ in 1..n {
        lanes.push(random_seeds(rng, c.module, c.func, c.one, args));
    }
    // Interleave: result k's lane j at k*N+j; shadow element i's lane j at i*N+j.
    let results = if c.wide.layout.seeded_results.is_empty() {
        None
    } else {
        let mut r = vec![0.0; n_float * n];
        for (j, l) in lanes.iter().enumerate() {
            for k in 0..n_float {
                r[k * n + j] = l.results.as_ref().map_or(1.0, |s| s[k]);
            }
        }
        Some(r)
    };
    let shadows: Vec<Option<Val>> = (0..args.len())
        .map(|i| {
            if !c.wide.layout.shadow_params.contains(&i) {
                return None;
            }
            let len = args[i].slice_len().unwrap_or(0);
            let get = |l: &Seeds, e: usize| -> f64 {
                match l.shadows.get(i).and_then(|s| s.as_ref()) {
                    Some(Val::F64s(x)) => x[e],
                    Some(Val::F32s(x)) => f64::from(x[e]),
                    _ => 0.0,
                }
            };
            let vals: Vec<f64> = (0..len * n).map(|k| get(&lanes[k % n], k / n)).collect();
            Some(match &args[i] {
                Val::F32s(_) => Val::F32s(vals.iter().map(|&x| x as f32).collect()),
                _ => Val::F64s(vals),
            })
        })
        .collect();
    let wide_seeds = Seeds { results, shadows };
    let gw = value_and_gradient(&mut interp(c, &c.wide.module), c.wide, args, &wide_seeds)
        .map_err(Error::from);
    if let Err(Error::Run(e)) = &gw
        && matches!(e.kind, ErrorKind::OutOfFuel(_))
    {
        stats.inc("width-N gradients skipped: out of fuel");
        return None;
    }
    let singles: Vec<GradResult> = lanes
        .iter()
        .enumerate()
        .map(|(j, l)| {
            if j == 0 {
                gi.clone()
            } else {
                value_and_gradient(&mut interp(c, &c.one.module), c.one, args, l)
                    .map_err(Error::from)
            }
        })
        .collect();
    if singles
        .iter()
        .any(|g| matches!(g, Err(Error::Run(e)) if matches!(e.kind, ErrorKind::OutOfFuel(_))))
    {
        stats.inc("width-N gradients skipped: out of fuel");
        return None;
    }
    stats.inc("width-N gradients compared lane by lane");
    if let Some((g, ws)) = &mut c.jit {
        let gj = g.value_and_pullback(ws, args, &wide_seeds);
        let agree = same_outcome(&gw, &gj, |a, b| {
            same_value(&a.value, &b.value) && same_opt_vals(&a.gradient, &b.gradient, false)
        });
        if !agree {
            return Some(format!(
                "width {n}: the JIT's rule {} and the interpreter's {} differ\nseeds of width N: {wide_seeds:?}",
                show_grad(&gj),
                show_grad(&gw)
            ));
        }
        stats.inc("width-N gradients compared on the JIT");
    }
    let report = |j: usize, g1: &GradResult| {
        format!(
            "width {n}, lane {j}: width 1 {}\nwidth N {}\nseeds of width N: {wide_seeds:?}",
            show_grad(g1),
            show_grad(&gw)
        )
    };
    match &gw {
        // A failure of width N is one of some lane (the first to fail).
        Err(Error::Run(e)) => {
            let alike = singles
                .iter()
                .any(|g| matches!(g, Err(Error::Run(a)) if a.kind == e.kind));
            if !alike {
                return Some(report(0, &singles[0]));
            }
        }
        Err(_) => return Some(report(0, &singles[0])),
        Ok(b) => {
            for (j, g1) in singles.iter().enumerate() {
                let Ok(a) = g1 else {
                    return Some(report(j, g1));
                };
                let values = match (&a.value, &b.value) {
                    (Some(x), Some(y)) => same_vals(x, y, false),
                    (x, y) => x.is_none() && y.is_none(),
                };
                let grads =
                    a.gradient
                        .iter()
                        .zip(&b.gradient)
                        .enumerate()
                        .all(|(i, (x, y))| match (x, y) {
                            (Some(x), Some(y)) => {
                                let scalar = args[i].slice_len().is_none();
                                same_val(x, &lane_of(y, n, j, scalar), false)
                            }
                            (x, y) => x.is_none() && y.is_none(),
                        });
                if !values || !grads {
                    return Some(report(j, g1));
                }
            }
        }
    }
    None
}

/// Whether the interpreter's outcome `want` and the JIT's `got` agree: both
/// values alike by `same`, or errors of one kind; or the JIT alone ran out of
/// native stack or tape.
fn same_outcome<T>(
    want: &Result<T, Error>,
    got: &Result<T, Error>,
    same: impl Fn(&T, &T) -> bool,
) -> bool {
    match (want, got) {
        (Ok(a), Ok(b)) => same(a, b),
        (Err(Error::Run(a)), Err(Error::Run(b))) => {
            core::mem::discriminant(&a.kind) == core::mem::discriminant(&b.kind)
        }
        (_, Err(Error::Run(e))) => {
            matches!(
                e.kind,
                ErrorKind::StackExhausted(_) | ErrorKind::TapeFull(_)
            )
        }
        _ => false,
    }
}

/// Both `None`, or values alike bit for bit.
fn same_value(a: &Option<Vec<Val>>, b: &Option<Vec<Val>>) -> bool {
    match (a, b) {
        (Some(x), Some(y)) => same_vals(x, y, false),
        (x, y) => x.is_none() && y.is_none(),
    }
}

/// The forward rule of width N on the interpreter with random tangents, against
/// the width-1 rule along each lane's tangents, bit for bit (errors alike).
#[allow(clippy::too_many_arguments)]
fn fwd_width_check(
    one: &Frule,
    wide: &Frule,
    jit: Option<(&CompiledJvp, &mut Workspace)>,
    hosts: &Hosts,
    fuel: u64,
    args: &[Val],
    rng: &mut Rng,
    stats: &mut Stats,
) -> Option<String> {
    let n = wide.layout.config.width as usize;
    let tangents: Vec<Option<Val>> = args
        .iter()
        .zip(&wide.layout.config.params)
        .map(|(a, &d)| {
            if d != DualActivity::Dual {
                return None;
            }
            let len = a.slice_len().unwrap_or(1) * n;
            Some(match a {
                Val::F32(_) | Val::F32s(_) => {
                    Val::F32s((0..len).map(|_| rng.uniform(-1.0, 1.0) as f32).collect())
                }
                _ => Val::F64s((0..len).map(|_| rng.uniform(-1.0, 1.0)).collect()),
            })
        })
        .collect();
    let run = |rule: &Frule, t: &[Option<Val>]| -> Result<Jvp, Error> {
        let mut it = Interpreter::new(&rule.module)
            .with_limits(Limits {
                max_depth: DEPTH,
                fuel: Some(fuel),
            })
            .with_hosts(hosts);
        jvp_vals(&mut it, rule, args, t).map_err(Error::from)
    };
    let out_of_fuel = |r: &Result<Jvp, Error>| matches!(r, Err(Error::Run(e)) if matches!(e.kind, ErrorKind::OutOfFuel(_)));
    let jw = run(wide, &tangents);
    let singles: Vec<Result<Jvp, Error>> = (0..n)
        .map(|j| {
            let t: Vec<Option<Val>> = tangents
                .iter()
                .zip(args)
                .map(|(t, a)| {
                    t.as_ref()
                        .map(|t| lane_of(t, n, j, a.slice_len().is_none()))
                })
                .collect();
            run(one, &t)
        })
        .collect();
    if out_of_fuel(&jw) || singles.iter().any(out_of_fuel) {
        stats.inc("width-N jvps skipped: out of fuel");
        return None;
    }
    stats.inc("width-N jvps compared lane by lane");
    let show = |r: &Result<Jvp, Error>| match r {
        Ok(j) => format!("{j:?}"),
        Err(e) => format!("error: {e}"),
    };
    if let Some((g, ws)) = jit {
        // The compiled rule of width N (lanes paired as vectors) against the
        // interpreter's, bit for bit.
        let jj = g.jvp(ws, args, &tangents);
        let agree = same_outcome(&jw, &jj, |a, b| {
            same_value(&a.value, &b.value)
                && same_vals(&a.tangents, &b.tangents, false)
                && same_vals(&a.args, &b.args, false)
                && same_opt_vals(&a.slices, &b.slices, false)
        });
        if !agree {
            return Some(format!(
                "width {n}: the JIT's forward rule {} and the interpreter's {} differ\ntangents: {tangents:?}",
                show(&jj),
                show(&jw)
            ));
        }
        stats.inc("width-N jvps compared on the JIT");
    }
    let report = |j: usize, s: &Result<Jvp, Error>| {
        format!(
            "width {n}, lane {j}: width 1 {}\nwidth N {}\ntangents of width N: {tangents:?}",
            show(s),
            show(&jw)
        )
    };
    match &jw {
        Err(Error::Run(e)) => {
            if !singles
                .iter()
                .any(|s| matches!(s, Err(Error::Run(a)) if a.kind == e.kind))
            {
                return Some(report(0, &singles[0]));
            }
        }
        Err(_) => return Some(report(0, &singles[0])),
        Ok(w) => {
            for (j, s) in singles.iter().enumerate() {
                let Ok(a) = s else {
                    return Some(report(j, s));
                };
                let values = match (&a.value, &w.value) {
                    (Some(x), Some(y)) => same_vals(x, y, false),
                    (x, y) => x.is_none() && y.is_none(),
                };
                let tans = a.tangents.len() == w.tangents.len()
                    && a.tangents
                        .iter()
                        .zip(&w.tangents)
                        .all(|(x, y)| same_val(x, &lane_of(y, n, j, true), false));
                let slices = a.slices.iter().zip(&w.slices).all(|(x, y)| match (x, y) {
                    (Some(x), Some(y)) => same_val(x, &lane_of(y, n, j, false), false),
                    (x, y) => x.is_none() && y.is_none(),
                });
                if !values || !tans || !slices || !same_vals(&a.args, &w.args, false) {
                    return Some(report(j, s));
                }
            }
        }
    }
    None
}
