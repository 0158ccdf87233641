//! A differential fuzz campaign over the whole pipeline, as a command:
//!
//! ```text
//! cargo run --release --example fuzz -- --programs N --malformed M --seed S [--out DIR]
//! ```
//!
//! **Programs.** `--programs N` random valid programs (see `fuzz/programs.rs` for what
//! they cover), each called at three argument lists, and at each:
//!
//! - the interpreter and the JIT on the module as written: the same results, the
//!   same `mut` slices afterwards, or the same error (function, op, position, slice,
//!   kind, message), NaN payloads aside;
//! - the optimiser: the optimised module verifies and prints back, and on the
//!   interpreter returns what the module as written returns (NaN payloads aside),
//!   leaves the same slices, or fails with the same kind of error (its documented
//!   promise); the optimised module on the JIT against the interpreter, exactly;
//! - the gradient, for a random request (activities `active`, `dup`, `dupnoneed`,
//!   `const` and the occasional misfit, an `active` or `const` return, with or
//!   without the primal, debug mode with NaN checks, both tape policies, derived
//!   from the optimised module or the module as written): the derived module
//!   verifies and prints back; the interpreter (`value_and_gradient`) and the JIT
//!   (`CompiledGradient::value_and_pullback` on one workspace reused across every
//!   call, failed ones included) agree; the reused workspace against a fresh one,
//!   `gradient_args` and a `GradientCache`, bit for bit; both tapes empty after
//!   every call; the other tape policy gives the same gradient; the forward pass
//!   computes the primal; and central differences agree with the gradient
//!   wherever they can judge it: everything finite, arguments between 1e-3 and
//!   100, no constant beyond 1e6 in the program (its cotangents cancel in the
//!   pullback's sums), the differences at h, h/2 and h/64 agreeing, no kink
//!   within half a step. A disagreement is reported only after two confirmations:
//!   differences at far smaller steps agree with those at h/2 (else it is a
//!   staircase: floor, a `nodiff` rounding step), and the gradient at x +- h/2 and
//!   x +- h/64 equals the one at x (else the derivative varies within the step, as
//!   sin of 10^17 does). Each skip is counted;
//! - forward mode, for the same request (`active` and `dup` parameters `dual`): the
//!   derived forward rule verifies and prints back; at random tangents the
//!   interpreter and the JIT agree (values, tangents, tangent slices, arguments,
//!   or the same error); and the dot-product test `<J v, w> = <v, Jᵀ w>` holds
//!   against the reverse-mode gradient with the same seeds (relative 1e-8, where
//!   finite differences could judge: f64 programs, no huge constants);
//! - widths, for half the requests each: the reverse rule and the forward rule of
//!   width 2, 3 or 5 derive and verify wherever width 1 does; on the interpreter
//!   each lane equals the width-1 rule along that lane's seeds or tangents, bit
//!   for bit (errors alike); and the compiled rules of width N (their lanes paired
//!   as `f64x2`) equal the interpreter's, bit for bit.
//!
//! **Malformed texts.** `--malformed M` mutants of valid texts (see
//! `fuzz/mutate.rs`): parsing and verifying never panic and every error has a
//! position inside the text; what parses but does not verify is refused by the
//! optimiser, the derivation and the JIT and runs on the interpreter without an
//! internal error; what verifies goes through the program checks (with fuel, the
//! JIT only after the interpreter finished, no finite differences).
//!
//! Every item is reproducible from `--seed` and its index alone: `--start K
//! --programs 1 --malformed 0` reruns program K. Failures are written to `--out`
//! (default `target/fuzz-failures/`), one file per finding: the program (or
//! mutant), with the seed, the index, the arguments, a command line to replay it
//! and the discrepancy as `;` comments at the top. The exit status is 1 when
//! anything failed, 2 for a usage error, 3 when an item hung.

#[path = "fuzz/check.rs"]
mod check;
#[path = "fuzz/mutate.rs"]
mod mutate;
#[path = "fuzz/programs.rs"]
mod programs;
#[path = "fuzz/rng.rs"]
mod rng;

use std::cell::RefCell;
use std::io::Write as _;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::PathBuf;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use gradlift::adjoint::{RuleConfig, build_rrule};
use gradlift::ir::{Opcode, Scalar, ValueDef, parse, verify};
use gradlift::{Hosts, Val};

use check::{Case, Finding, Stats};
use rng::Rng;

const USAGE: &str = "\
usage: cargo run --release --example fuzz -- [OPTIONS]

options:
  --programs N     random valid programs to check (default 1000)
  --malformed M    malformed texts to check (default 10000)
  --seed S         the campaign's seed (default 1); every item is reproducible
                   from the seed and its index
  --start K        the index of the first item of each kind (default 0):
                   `--start K --programs 1 --malformed 0` reruns program K
  --out DIR        where failures are written (default target/fuzz-failures)
  --jobs J         threads (default: the machine's parallelism)
  --hang-secs T    give up (exit status 3) when one item runs longer (default 600)
  -h, --help       this text";

/// The command's options.
#[derive(Clone, Debug, PartialEq)]
struct Options {
    programs: u64,
    malformed: u64,
    seed: u64,
    start: u64,
    out: PathBuf,
    jobs: usize,
    hang_secs: u64,
}

/// The options from the command line; `Ok(None)` for `--help`.
fn parse_options(args: impl IntoIterator<Item = String>) -> Result<Option<Options>, String> {
    let mut o = Options {
        programs: 1000,
        malformed: 10_000,
        seed: 1,
        start: 0,
        out: PathBuf::from("target/fuzz-failures"),
        jobs: std::thread::available_parallelism().map_or(1, |n| n.get()),
        hang_secs: 600,
    };
    let mut args = args.into_iter();
    while let Some(a) = args.next() {
        let (name, inline) = match a.split_once('=') {
            Some((n, v)) if n.starts_with("--") => (n.to_string(), Some(v.to_string())),
            _ => (a.clone(), None),
        };
        if name == "-h" || name == "--help" {
            return Ok(None);
        }
        let known = [
            "--programs",
            "--malformed",
            "--seed",
            "--start",
            "--out",
            "--jobs",
            "--hang-secs",
        ];
        if !known.contains(&name.as_str()) {
            return Err(format!("unknown option `{a}`"));
        }
        let value = match inline {
            Some(v) => v,
            None => args
                .next()
                .ok_or_else(|| format!("`{name}` needs a value"))?,
        };
        let number = |what: &str| -> Result<u64, String> {
            value
                .parse::<u64>()
                .map_err(|_| format!("`{name}` takes {what}, found `{value}`"))
        };
        match name.as_str() {
            "--programs" => o.programs = number("a count")?,
            "--malformed" => o.malformed = number("a count")?,
            "--seed" => o.seed = number("an unsigned integer")?,
            "--start" => o.start = number("an index")?,
            "--out" => o.out = PathBuf::from(value),
            "--jobs" => {
                let j = number("a positive number of threads")?;
                if j == 0 {
                    return Err("`--jobs` takes a positive number of threads, found `0`".into());
                }
                o.jobs = j as usize;
            }
            _ => {
                let t = number("a positive number of seconds")?;
                if t == 0 {
                    return Err(
                        "`--hang-secs` takes a positive number of seconds, found `0`".into(),
                    );
                }
                o.hang_secs = t;
            }
        }
    }
    Ok(Some(o))
}

thread_local! {
    /// The message of the last panic on this thread (the hook keeps it quiet).
    static PANIC: RefCell<Option<String>> = const { RefCell::new(None) };
}

fn take_panic() -> String {
    PANIC
        .with(|p| p.borrow_mut().take())
        .unwrap_or_else(|| "(no message)".into())
}

/// The host functions of the generated programs' `extern`s, on both engines:
/// `tanh` (an error for NaN, a panic for +inf) and its derivative.
fn hosts() -> Hosts {
    Hosts::new()
        .bind("host_tanh", |a: &mut [Val]| match a {
            [Val::F64(x)] if x.is_nan() => Err("host_tanh of NaN".into()),
            [Val::F64(x)] if *x == f64::INFINITY => panic!("host_tanh of +inf"),
            [Val::F64(x)] => Ok(vec![Val::F64(x.tanh())]),
            _ => Err("host_tanh takes an f64".into()),
        })
        .bind("host_tanh_vjp", |a: &mut [Val]| match a {
            [Val::F64(x), Val::F64(dy)] => {
                let t = x.tanh();
                Ok(vec![Val::F64((1.0 - t * t) * *dy)])
            }
            _ => Err("host_tanh_vjp takes two f64".into()),
        })
        .bind("host_tanh_jvp", |a: &mut [Val]| match a {
            [Val::F64(x), Val::F64(dx)] => {
                let t = x.tanh();
                Ok(vec![Val::F64((1.0 - t * t) * *dx)])
            }
            _ => Err("host_tanh_jvp takes two f64".into()),
        })
}

/// A failure found: which item, what, and the text to write out.
struct Failure {
    campaign: &'static str,
    index: u64,
    finding: Finding,
    text: Vec<u8>,
    uses_hosts: bool,
}

/// What a thread is doing: since when, which item, its text.
type Slot = Option<(Instant, &'static str, u64, Vec<u8>)>;

/// One item of a campaign: its index, the thread's number, the watch, the
/// thread's counters and failures.
type Item<'a> = dyn Fn(u64, usize, &Watch, &mut Stats, &mut Vec<Failure>) + Sync + 'a;

/// What each thread is doing, for the watchdog.
struct Watch {
    slots: Vec<Mutex<Slot>>,
    done: AtomicBool,
}

impl Watch {
    fn start(&self, worker: usize, campaign: &'static str, index: u64) {
        *self.slots[worker].lock().unwrap() = Some((Instant::now(), campaign, index, Vec::new()));
    }

    fn text(&self, worker: usize, text: &[u8]) {
        if let Some(s) = self.slots[worker].lock().unwrap().as_mut() {
            s.3 = text.to_vec();
        }
    }
}

/// Base texts for mutation: generated programs, their derived rules, the
/// repository's IR files.
fn bases(seed: u64) -> mutate::Bases {
    let mut texts = Vec::new();
    for i in 0..48 {
        let mut rng = Rng::for_item(seed, 3, i);
        let Ok(p) = catch_unwind(AssertUnwindSafe(|| programs::program(&mut rng))) else {
            continue;
        };
        let text = p.module.to_string();
        texts.push((format!("generated program {i}"), text.clone().into_bytes()));
        if i % 2 == 0
            && let Ok(m) = parse(&text)
            && let Some(f) = m.func_by_name("f")
        {
            let config = RuleConfig::default_for(m.sig(f)).with_debug(i % 4 == 0, i % 8 == 0);
            if let Ok(Ok(rule)) = catch_unwind(AssertUnwindSafe(|| build_rrule(&m, f, &config))) {
                texts.push((
                    format!("the rule of generated program {i}"),
                    rule.module.to_string().into_bytes(),
                ));
            }
        }
    }
    let root = env!("CARGO_MANIFEST_DIR");
    for dir in ["examples/ir", "adjoint/tests/corpus"] {
        let Ok(entries) = std::fs::read_dir(format!("{root}/{dir}")) else {
            continue;
        };
        let mut paths: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
        paths.sort();
        for p in paths {
            if p.extension().is_some_and(|e| e == "ir")
                && let Ok(b) = std::fs::read(&p)
            {
                texts.push((
                    format!("{dir}/{}", p.file_name().unwrap().to_string_lossy()),
                    b,
                ));
            }
        }
    }
    mutate::Bases {
        texts,
        vocab: mutate::vocabulary(),
    }
}

/// One program: generate, print, parse back, verify, check.
fn run_program(
    seed: u64,
    index: u64,
    hosts: &Hosts,
    worker: usize,
    watch: &Watch,
    stats: &mut Stats,
    failures: &mut Vec<Failure>,
) {
    let mut rng = Rng::for_item(seed, 1, index);
    let push = |failures: &mut Vec<Failure>, finding: Finding, text: &[u8], hosts: bool| {
        failures.push(Failure {
            campaign: "program",
            index,
            finding,
            text: text.to_vec(),
            uses_hosts: hosts,
        });
    };
    let finding = |category: &str, detail: String| Finding {
        category: category.to_string(),
        detail,
        call: None,
    };
    let prog = match catch_unwind(AssertUnwindSafe(|| programs::program(&mut rng))) {
        Ok(p) => p,
        Err(_) => {
            stats.inc("panics");
            let f = finding("generator panicked", take_panic());
            return push(failures, f, b"", false);
        }
    };
    stats.inc("programs generated");
    let text = prog.module.to_string();
    watch.text(worker, text.as_bytes());
    check::count_ops(&prog.module, stats);
    let m = match parse(&text) {
        Ok(m) => m,
        Err(e) => {
            let f = finding("printed program does not parse", e.to_string());
            return push(failures, f, text.as_bytes(), prog.uses_hosts);
        }
    };
    if m.to_string() != text {
        let f = finding(
            "printed program prints differently after parsing back",
            m.to_string(),
        );
        push(failures, f, text.as_bytes(), prog.uses_hosts);
    }
    if let Err(e) = verify(&m) {
        let f = finding("generated program does not verify", e.to_string());
        return push(failures, f, text.as_bytes(), prog.uses_hosts);
    }
    stats.inc("programs verified");
    let fd = !m.defined().any(|(_, f)| {
        f.placed_insts()
            .any(|(_, i)| f.insts[i].opcode == Opcode::Bitcast)
    });
    // A constant like 1e308 scales some cotangent far beyond the gradient: the
    // pullback's sums then cancel (4e307 + 0.6 - 4e307 = 0), where the primal's
    // `(x - x) * 1e308` is exactly zero. Rounding, not a wrong derivative; finite
    // differences cannot judge such a program.
    let huge = m.defined().any(|(_, f)| {
        f.values.values().any(|v| match v.def {
            ValueDef::Const(Scalar::F64(c)) => c.is_finite() && c.abs() > 1e6,
            ValueDef::Const(Scalar::F32(c)) => c.is_finite() && c.abs() > 1e6,
            _ => false,
        })
    });
    if !fd {
        stats.inc("programs without finite differences (bitcast)");
    } else if huge {
        stats.inc("programs without finite differences (a constant beyond 1e6)");
    }
    let fd = fd && !huge;
    let case = Case {
        module: &m,
        hosts,
        fd,
        fuel: 2_000_000,
        mutant: false,
    };
    let f = m.func_by_name("f").expect("the entry point");
    let mut found = Vec::new();
    if catch_unwind(AssertUnwindSafe(|| {
        check::check_module(&case, f, 3, &mut rng, stats, &mut found)
    }))
    .is_err()
    {
        stats.inc("panics");
        found.push(finding("panic", take_panic()));
    }
    // One finding per category per program.
    let mut seen: Vec<String> = Vec::new();
    for f in found {
        if !seen.contains(&f.category) {
            seen.push(f.category.clone());
            push(failures, f, text.as_bytes(), prog.uses_hosts);
        }
    }
}

/// One malformed text.
#[allow(clippy::too_many_arguments)]
fn run_malformed(
    seed: u64,
    index: u64,
    bases: &mutate::Bases,
    hosts: &Hosts,
    worker: usize,
    watch: &Watch,
    stats: &mut Stats,
    failures: &mut Vec<Failure>,
) {
    let mut rng = Rng::for_item(seed, 2, index);
    let (_, base) = &bases.texts[rng.below(bases.texts.len() as u64) as usize];
    let (_, donor) = &bases.texts[rng.below(bases.texts.len() as u64) as usize];
    let bytes = mutate::mutant(&mut rng, base, donor, &bases.vocab);
    watch.text(worker, &bytes);
    let mut found = Vec::new();
    if catch_unwind(AssertUnwindSafe(|| {
        mutate::check_text(&bytes, hosts, &mut rng, stats, &mut found)
    }))
    .is_err()
    {
        stats.inc("panics");
        found.push(Finding {
            category: "panic".into(),
            detail: take_panic(),
            call: None,
        });
    }
    let mut seen: Vec<String> = Vec::new();
    for f in found {
        if !seen.contains(&f.category) {
            seen.push(f.category.clone());
            failures.push(Failure {
                campaign: "malformed",
                index,
                finding: f,
                text: bytes.clone(),
                uses_hosts: false,
            });
        }
    }
}

/// A file name's part from a category.
fn slug(s: &str) -> String {
    let mut out: String = s
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    while out.contains("--") {
        out = out.replace("--", "-");
    }
    out.trim_matches('-').chars().take(60).collect()
}

fn write_failure(o: &Options, f: &Failure) -> std::io::Result<PathBuf> {
    std::fs::create_dir_all(&o.out)?;
    let path = o.out.join(format!(
        "{}-{:07}-{}.ir",
        f.campaign,
        f.index,
        slug(&f.finding.category)
    ));
    let (p, m) = if f.campaign == "program" {
        (1, 0)
    } else {
        (0, 1)
    };
    let mut head = format!(
        "; gradlift fuzz: {}\n; seed {}, {} {}; rerun with\n;   cargo run --release --example fuzz -- --seed {} --start {} --programs {p} --malformed {m}\n",
        f.finding.category, o.seed, f.campaign, f.index, o.seed, f.index
    );
    if let Some((func, args)) = &f.finding.call {
        head += &format!("; call: @{func} at {args}\n");
        if f.uses_hosts {
            head += "; (calls the extern @host_tanh, which only the fuzzer binds: the command line cannot run it)\n";
        } else {
            head += &format!(
                ";   gradlift run FILE --func {func} --args '{args}' --engine interp --opt none\n;   gradlift run FILE --func {func} --args '{args}' --engine jit --opt none\n; (the fuzzer limits calls to a depth of {}, the command line to 10,000)\n",
                check::DEPTH
            );
        }
    }
    for line in f.finding.detail.lines() {
        head += &format!("; {line}\n");
    }
    head += ";\n";
    let mut file = std::fs::File::create(&path)?;
    file.write_all(head.as_bytes())?;
    file.write_all(&f.text)?;
    Ok(path)
}

/// Runs `count` items from `start` on `jobs` threads; each item's own RNG makes the
/// result independent of the threads' order.
fn campaign(o: &Options, count: u64, item: &Item<'_>, name: &'static str) -> (Stats, Vec<Failure>) {
    let next = AtomicU64::new(o.start);
    let end = o.start + count;
    let jobs = o.jobs.min(count.max(1) as usize);
    let watch = Watch {
        slots: (0..jobs).map(|_| Mutex::new(None)).collect(),
        done: AtomicBool::new(false),
    };
    let results = Mutex::new((Stats::default(), Vec::new()));
    let progress = AtomicU64::new(0);
    let started = Instant::now();
    std::thread::scope(|s| {
        for w in 0..jobs {
            let (next, watch, results, progress) = (&next, &watch, &results, &progress);
            std::thread::Builder::new()
                .stack_size(256 << 20)
                .spawn_scoped(s, move || {
                    let mut stats = Stats::default();
                    let mut failures = Vec::new();
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        if i >= end {
                            break;
                        }
                        watch.start(w, name, i);
                        item(i, w, watch, &mut stats, &mut failures);
                        progress.fetch_add(1, Ordering::Relaxed);
                    }
                    *watch.slots[w].lock().unwrap() = None;
                    let mut r = results.lock().unwrap();
                    r.0.merge(&stats);
                    r.1.extend(failures);
                })
                .expect("a worker thread");
        }
        // The watchdog, and a progress line every minute.
        s.spawn(|| {
            let mut last_report = Instant::now();
            while !watch.done.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(200));
                if progress.load(Ordering::Relaxed) >= count {
                    break;
                }
                if last_report.elapsed() > Duration::from_secs(60) {
                    last_report = Instant::now();
                    eprintln!(
                        "  {name}: {} of {count} after {:.0} s",
                        progress.load(Ordering::Relaxed),
                        started.elapsed().as_secs_f64()
                    );
                }
                for slot in &watch.slots {
                    let hung = slot.lock().unwrap().as_ref().and_then(|(t, c, i, text)| {
                        (t.elapsed() > Duration::from_secs(o.hang_secs))
                            .then(|| (*c, *i, text.clone()))
                    });
                    if let Some((c, i, text)) = hung {
                        let f = Failure {
                            campaign: c,
                            index: i,
                            finding: Finding {
                                category: format!("hang (over {} s)", o.hang_secs),
                                detail: String::new(),
                                call: None,
                            },
                            text,
                            uses_hosts: false,
                        };
                        let at = write_failure(o, &f).map_or_else(
                            |e| format!("(not written: {e})"),
                            |p| p.display().to_string(),
                        );
                        eprintln!(
                            "error: {c} {i} has run for more than {} s; written to {at}",
                            o.hang_secs
                        );
                        std::process::exit(3);
                    }
                }
            }
        });
    });
    watch.done.store(true, Ordering::Relaxed);
    results.into_inner().unwrap()
}

fn print_stats(stats: &Stats) {
    for (k, v) in &stats.c {
        println!("  {k}: {v}");
    }
    if !stats.error_kinds.is_empty() {
        let kinds: Vec<String> = stats
            .error_kinds
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect();
        println!(
            "  run-time errors both engines agreed on: {}",
            kinds.join(", ")
        );
    }
    if !stats.refusals.is_empty() {
        let r: Vec<String> = stats
            .refusals
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect();
        println!("  derivations refused: {}", r.join(", "));
    }
}

fn main() {
    let o = match parse_options(std::env::args().skip(1)) {
        Ok(Some(o)) => o,
        Ok(None) => {
            println!("{USAGE}");
            return;
        }
        Err(e) => {
            eprintln!("error: {e}\n\n{USAGE}");
            std::process::exit(2);
        }
    };
    std::panic::set_hook(Box::new(|info| {
        let msg = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_default();
        let at = info
            .location()
            .map(|l| format!(" at {}:{}:{}", l.file(), l.line(), l.column()))
            .unwrap_or_default();
        PANIC.with(|p| *p.borrow_mut() = Some(format!("{msg}{at}")));
    }));
    println!(
        "gradlift fuzz: seed {}, programs {}..{}, malformed texts {}..{}, {} threads",
        o.seed,
        o.start,
        o.start + o.programs,
        o.start,
        o.start + o.malformed,
        o.jobs
    );
    let hosts = hosts();
    let t0 = Instant::now();
    let (mut stats, mut failures) = campaign(
        &o,
        o.programs,
        &|i, w, watch, stats, failures| run_program(o.seed, i, &hosts, w, watch, stats, failures),
        "program",
    );
    let t_programs = t0.elapsed();
    let t1 = Instant::now();
    if o.malformed > 0 {
        let bases = bases(o.seed);
        let (s, f) = campaign(
            &o,
            o.malformed,
            &|i, w, watch, stats, failures| {
                run_malformed(o.seed, i, &bases, &hosts, w, watch, stats, failures)
            },
            "malformed",
        );
        stats.merge(&s);
        failures.extend(f);
    }
    let t_malformed = t1.elapsed();

    println!("counts:");
    print_stats(&stats);
    let all: Vec<&str> = Opcode::ALL
        .iter()
        .map(|o| o.name())
        .filter(|n| !["push", "pop", "tape_alloc", "tape_view", "trap_if"].contains(n))
        .collect();
    let missing: Vec<&str> = all
        .iter()
        .copied()
        .filter(|n| !stats.ops.contains_key(n))
        .collect();
    if o.programs > 0 {
        println!(
            "  ops in the generated programs: {} of the {} ops of primal code{}",
            all.len() - missing.len(),
            all.len(),
            if missing.is_empty() {
                String::new()
            } else {
                format!(" (never: {})", missing.join(", "))
            }
        );
    }
    failures.sort_by_key(|f| (f.campaign, f.index));
    println!(
        "failures: {} (panics among them: {})",
        failures.len(),
        stats.get("panics")
    );
    let mut by_cat: std::collections::BTreeMap<&str, u64> = Default::default();
    for f in &failures {
        *by_cat.entry(f.finding.category.as_str()).or_default() += 1;
    }
    for (c, n) in &by_cat {
        println!("  {c}: {n}");
    }
    for f in failures.iter().take(500) {
        match write_failure(&o, f) {
            Ok(p) => println!("  {}", p.display()),
            Err(e) => eprintln!(
                "error: cannot write a failure into {}: {e}",
                o.out.display()
            ),
        }
    }
    if failures.len() > 500 {
        println!("  ... {} more not written", failures.len() - 500);
    }
    println!(
        "time: {:.1} s (programs {:.1} s, malformed texts {:.1} s); seed {}",
        t0.elapsed().as_secs_f64(),
        t_programs.as_secs_f64(),
        t_malformed.as_secs_f64(),
        o.seed
    );
    if !failures.is_empty() {
        std::process::exit(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(args: &[&str]) -> Result<Option<Options>, String> {
        parse_options(args.iter().map(|s| s.to_string()))
    }

    #[test]
    fn options_parse_and_refuse() {
        let o = opts(&[
            "--programs",
            "5",
            "--malformed=7",
            "--seed",
            "9",
            "--out",
            "x",
        ])
        .unwrap()
        .unwrap();
        assert_eq!((o.programs, o.malformed, o.seed), (5, 7, 9));
        assert_eq!(o.out, PathBuf::from("x"));
        assert_eq!(opts(&["--help"]).unwrap(), None);
        assert!(opts(&["--bogus"]).unwrap_err().contains("unknown option"));
        assert!(opts(&["--seed"]).unwrap_err().contains("needs a value"));
        assert!(opts(&["--seed", "-1"]).unwrap_err().contains("unsigned"));
        assert!(opts(&["--jobs", "0"]).is_err());
    }

    #[test]
    fn items_are_reproducible() {
        let a = programs::program(&mut Rng::for_item(3, 1, 17))
            .module
            .to_string();
        let b = programs::program(&mut Rng::for_item(3, 1, 17))
            .module
            .to_string();
        assert_eq!(a, b);
        let c = programs::program(&mut Rng::for_item(3, 1, 18))
            .module
            .to_string();
        assert_ne!(a, c);
    }

    #[test]
    fn a_short_campaign_finds_nothing() {
        let hosts = hosts();
        let watch = Watch {
            slots: vec![Mutex::new(None)],
            done: AtomicBool::new(false),
        };
        let (mut stats, mut failures) = (Stats::default(), Vec::new());
        for i in 0..8 {
            run_program(5, i, &hosts, 0, &watch, &mut stats, &mut failures);
        }
        let bases = bases(5);
        for i in 0..150 {
            run_malformed(5, i, &bases, &hosts, 0, &watch, &mut stats, &mut failures);
        }
        let cats: Vec<String> = failures
            .iter()
            .map(|f| format!("{} {}: {}", f.campaign, f.index, f.finding.category))
            .collect();
        assert!(failures.is_empty(), "{cats:?}");
        assert_eq!(stats.get("programs verified"), 8);
        assert!(stats.get("fd checks") > 0, "{stats:?}");
        assert_eq!(stats.get("malformed texts"), 150);
    }
}
