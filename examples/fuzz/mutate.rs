//! Malformed texts: mutations of valid texts (generated programs, the derived
//! forward passes and pullbacks of generated programs, with their tape ops and
//! debug checks, and the repository's IR files), and what parsing them must do.
//!
//! A mutant is one to four edits of a base text: delete, duplicate, swap or replace
//! tokens (with op names, types, keywords, punctuation, names and edge literals),
//! delete, duplicate or swap lines, truncate, change a type, rename a value, block
//! or function, replace a number by an edge literal, insert random bytes (invalid
//! UTF-8 included) or flip a bit.
//!
//! `parse` (after a lossy UTF-8 conversion for texts that are not UTF-8, as a
//! caller of the `&str` API must do) must not panic and must either fail with errors
//! that each carry a position inside the text, or succeed; `verify` likewise. A text
//! that parses but does not verify is also given to the interpreter (which must
//! report `Malformed`, never panic or report an internal error), the optimiser, the
//! derivation and the JIT (which must refuse it without panicking). A text that
//! verifies goes through the checks of valid programs ([`check_module`]), without
//! finite differences, with fuel, and with the JIT run only on calls the
//! interpreter finished within its fuel.

use gradlift::adjoint::{AdError, RuleConfig, build_rrule};
use gradlift::ir::interp::{Interpreter, Limits};
use gradlift::ir::{ErrorKind, Module, Opcode, OptConfig, Pos, parse, verify};
use gradlift::jit::compile_with;
use gradlift::{Hosts, Val};

use crate::check::{Case, Finding, Stats, check_module, random_arg, roundtrip};
use crate::rng::Rng;

/// Words a mutation may put in.
pub fn vocabulary() -> Vec<String> {
    let mut v: Vec<String> = Opcode::ALL.iter().map(|o| o.name().to_string()).collect();
    for w in [
        "func",
        "extern",
        "overlay",
        "vjp",
        "jvp",
        "nodiff",
        "phi",
        "mut",
        "ret",
        "jump",
        "br",
        "eq",
        "ne",
        "lt",
        "le",
        "gt",
        "ge",
        "f64",
        "f32",
        "i64",
        "bool",
        "[f64]",
        "mut [f64]",
        "[i64]",
        "[f32]",
        "mut [i64]",
        "[bool]",
        "[[f64]]",
        "->",
        "(",
        ")",
        "[",
        "]",
        "{",
        "}",
        ",",
        ":",
        "=",
        "%",
        "@",
        "%x",
        "%0",
        "%1a",
        "%.a",
        "@f",
        "@",
        "entry",
        "entry:",
        "exit",
        "head:",
        "true",
        "false",
        "0",
        "-0",
        "1",
        "-1",
        "0x",
        "0xFFFFFFFFFFFFFFFF",
        "0x10000000000000000",
        "-0x1",
        "9223372036854775807",
        "9223372036854775808",
        "-9223372036854775808",
        "-9223372036854775809",
        "1.5",
        "-0.0",
        "1e308",
        "1e309",
        "-1e999",
        "1e-400",
        ".5",
        "1.",
        "1e",
        "1.2.3",
        "nan",
        "-nan",
        "inf",
        "-inf",
        "\"msg\"",
        "\"\\u{110000}\"",
        "\"\\q\"",
        "\"unterminated",
        "trap_if",
        "; comment",
        "\t",
        "\r\n",
        "\u{00e9}",
        "\u{221e}",
        "\u{feff}",
        "\u{1f600}",
        "$",
        "#",
        "+",
    ] {
        v.push(w.to_string());
    }
    v
}

#[derive(Copy, Clone, PartialEq, Eq, Debug)]
enum Tok {
    Space,
    Comment,
    Word,
    Punct,
    Str,
}

/// A rough tokenisation (it need not match the real lexer).
fn tokens(b: &[u8]) -> Vec<(usize, usize, Tok)> {
    let mut out = Vec::new();
    let mut i = 0;
    let word = |c: u8| {
        c.is_ascii_alphanumeric() || matches!(c, b'_' | b'.' | b'%' | b'@' | b'-') || c >= 0x80
    };
    while i < b.len() {
        let start = i;
        let c = b[i];
        let kind = if c.is_ascii_whitespace() {
            while i < b.len() && b[i].is_ascii_whitespace() {
                i += 1;
            }
            Tok::Space
        } else if c == b';' {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
            Tok::Comment
        } else if c == b'"' {
            i += 1;
            while i < b.len() && b[i] != b'"' && b[i] != b'\n' {
                i += 1;
            }
            i = (i + 1).min(b.len());
            Tok::Str
        } else if c == b'-' && b.get(i + 1) == Some(&b'>') {
            i += 2;
            Tok::Punct
        } else if word(c) {
            while i < b.len() && word(b[i]) {
                i += 1;
            }
            Tok::Word
        } else {
            i += 1;
            Tok::Punct
        };
        out.push((start, i, kind));
    }
    out
}

fn lines(b: &[u8]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut start = 0;
    for (i, &c) in b.iter().enumerate() {
        if c == b'\n' {
            out.push((start, i + 1));
            start = i + 1;
        }
    }
    if start < b.len() {
        out.push((start, b.len()));
    }
    out
}

fn splice(b: &mut Vec<u8>, start: usize, end: usize, with: &[u8]) {
    b.splice(start..end, with.iter().copied());
}

/// Applies one random edit to `b`.
fn mutate_once(rng: &mut Rng, b: &mut Vec<u8>, vocab: &[String], donor: &[u8]) {
    let toks: Vec<(usize, usize, Tok)> = tokens(b)
        .into_iter()
        .filter(|t| t.2 != Tok::Space)
        .collect();
    let tok = |rng: &mut Rng| -> Option<(usize, usize, Tok)> {
        (!toks.is_empty()).then(|| toks[rng.below(toks.len() as u64) as usize])
    };
    let words_with = |prefix: u8| -> Vec<Vec<u8>> {
        toks.iter()
            .filter(|t| t.2 == Tok::Word && b[t.0] == prefix)
            .map(|t| b[t.0..t.1].to_vec())
            .collect()
    };
    match rng.below(19) {
        17 => {
            // A piece of another text, inserted or in place of a piece of this one.
            let dl = lines(donor);
            if !dl.is_empty() {
                let i = rng.below(dl.len() as u64) as usize;
                let j = (i + 1 + rng.below(8) as usize).min(dl.len());
                let piece = donor[dl[i].0..dl[j - 1].1].to_vec();
                let ls = lines(b);
                if ls.is_empty() || rng.chance(50) {
                    let at = ls
                        .get(rng.below(ls.len() as u64 + 1) as usize)
                        .map_or(b.len(), |l| l.0);
                    splice(b, at, at, &piece);
                } else {
                    let k = rng.below(ls.len() as u64) as usize;
                    let m = (k + 1 + rng.below(4) as usize).min(ls.len());
                    splice(b, ls[k].0, ls[m - 1].1, &piece);
                }
            }
        }
        18 => {
            // A line or a token many times over (size, nesting).
            let times = rng.pick(&[10, 100, 1000, 5000]);
            let piece = match tok(rng) {
                Some((s, e, _)) if rng.chance(50) => b[s..e].to_vec(),
                _ => {
                    let ls = lines(b);
                    match ls.get(rng.below(ls.len().max(1) as u64) as usize) {
                        Some(&(s, e)) => b[s..e].to_vec(),
                        None => b"[".to_vec(),
                    }
                }
            };
            let at = rng.below(b.len() as u64 + 1) as usize;
            splice(b, at, at, &piece.repeat(times));
        }
        0 => {
            if let Some((s, e, _)) = tok(rng) {
                splice(b, s, e, b"");
            }
        }
        1 => {
            if let Some((s, e, _)) = tok(rng) {
                let t = b[s..e].to_vec();
                splice(b, e, e, &[b" ".as_slice(), &t].concat());
            }
        }
        2 => {
            if let (Some(x), Some(y)) = (tok(rng), tok(rng)) {
                let (x, y) = if x.0 <= y.0 { (x, y) } else { (y, x) };
                if x.1 <= y.0 {
                    let (tx, ty) = (b[x.0..x.1].to_vec(), b[y.0..y.1].to_vec());
                    splice(b, y.0, y.1, &tx);
                    splice(b, x.0, x.1, &ty);
                }
            }
        }
        3 | 4 => {
            if let Some((s, e, _)) = tok(rng) {
                let w = vocab[rng.below(vocab.len() as u64) as usize].clone();
                splice(b, s, e, w.as_bytes());
            }
        }
        5 => {
            let ls = lines(b);
            if !ls.is_empty() {
                let (s, e) = ls[rng.below(ls.len() as u64) as usize];
                splice(b, s, e, b"");
            }
        }
        6 => {
            let ls = lines(b);
            if !ls.is_empty() {
                let (s, e) = ls[rng.below(ls.len() as u64) as usize];
                let l = b[s..e].to_vec();
                splice(b, e, e, &l);
            }
        }
        7 | 8 => {
            let ls = lines(b);
            if ls.len() >= 2 {
                let i = rng.below(ls.len() as u64 - 1) as usize;
                let j = if rng.chance(60) {
                    i + 1
                } else {
                    i + 1 + rng.below((ls.len() - i - 1) as u64) as usize
                };
                let (x, y) = (ls[i], ls[j]);
                let (lx, ly) = (b[x.0..x.1].to_vec(), b[y.0..y.1].to_vec());
                splice(b, y.0, y.1, &lx);
                splice(b, x.0, x.1, &ly);
            }
        }
        9 => {
            let n = b.len() as u64;
            if n > 0 {
                b.truncate(rng.below(n) as usize);
            }
        }
        10 => {
            let types = ["f64", "f32", "i64", "bool"];
            let cands: Vec<(usize, usize)> = toks
                .iter()
                .filter(|t| types.iter().any(|ty| &b[t.0..t.1] == ty.as_bytes()))
                .map(|t| (t.0, t.1))
                .collect();
            if !cands.is_empty() {
                let (s, e) = cands[rng.below(cands.len() as u64) as usize];
                let t = rng.pick(&types);
                splice(b, s, e, t.as_bytes());
            }
        }
        11 => {
            // Rename: a value, function or label token becomes another one of the
            // text, or a fresh name.
            let prefix = rng.pick(b"%@");
            let ws = words_with(prefix);
            let cands: Vec<(usize, usize)> = toks
                .iter()
                .filter(|t| t.2 == Tok::Word && b[t.0] == prefix)
                .map(|t| (t.0, t.1))
                .collect();
            if !cands.is_empty() && !ws.is_empty() {
                let (s, e) = cands[rng.below(cands.len() as u64) as usize];
                let w = if rng.chance(70) {
                    ws[rng.below(ws.len() as u64) as usize].clone()
                } else {
                    format!("{}fresh{}", prefix as char, rng.below(3)).into_bytes()
                };
                splice(b, s, e, &w);
            }
        }
        12 => {
            let nums: Vec<(usize, usize)> = toks
                .iter()
                .filter(|t| t.2 == Tok::Word && (b[t.0].is_ascii_digit() || b[t.0] == b'-'))
                .map(|t| (t.0, t.1))
                .collect();
            if !nums.is_empty() {
                let (s, e) = nums[rng.below(nums.len() as u64) as usize];
                let lit = rng.pick(&[
                    "0",
                    "-1",
                    "1",
                    "3",
                    "1000000",
                    "-9223372036854775808",
                    "9223372036854775807",
                    "0x7FFFFFFFFFFFFFFF",
                    "2305843009213693952",
                    "0.0",
                    "-0.0",
                    "1e300",
                    "nan",
                    "inf",
                    "-inf",
                    "64",
                    "-3",
                ]);
                splice(b, s, e, lit.as_bytes());
            }
        }
        13 => {
            let n = 1 + rng.below(4) as usize;
            let bytes: Vec<u8> = (0..n)
                .map(|_| {
                    rng.pick(&[
                        0xff, 0xfe, 0xc3, 0x80, 0xe2, 0x00, 0x07, b'\r', b'\t', b'"', b'\\', b'{',
                        b'}', b'%', b'@', b';', b'\n', 0xf0, 0x9f, 0xed, 0xa0,
                    ])
                })
                .collect();
            let at = rng.below(b.len() as u64 + 1) as usize;
            splice(b, at, at, &bytes);
        }
        14 => {
            if !b.is_empty() {
                let i = rng.below(b.len() as u64) as usize;
                b[i] ^= 1 << rng.below(8);
            }
        }
        15 => {
            // A value operand becomes a literal.
            let vals: Vec<(usize, usize)> = toks
                .iter()
                .filter(|t| t.2 == Tok::Word && b[t.0] == b'%')
                .map(|t| (t.0, t.1))
                .collect();
            if !vals.is_empty() {
                let (s, e) = vals[rng.below(vals.len() as u64) as usize];
                let lit = rng.pick(&["0", "1.5", "true", "-1", "nan", "0x10"]);
                splice(b, s, e, lit.as_bytes());
            }
        }
        _ => {
            let at = match tok(rng) {
                Some((s, _, _)) => s,
                None => 0,
            };
            let w = vocab[rng.below(vocab.len() as u64) as usize].clone();
            splice(b, at, at, format!("{w} ").as_bytes());
        }
    }
}

/// A mutant of `base`: one to four edits.
pub fn mutant(rng: &mut Rng, base: &[u8], donor: &[u8], vocab: &[String]) -> Vec<u8> {
    let mut b = base.to_vec();
    let n = 1 + rng.weighted(&[50, 25, 15, 10]);
    for _ in 0..n {
        mutate_once(rng, &mut b, vocab, donor);
    }
    b
}

/// Whether `pos` is a position inside the text of `lines` (line and column from
/// 1, the column counted in characters; one past the end of a line, or of the
/// text, allowed).
fn in_text(lines: &[&str], pos: Pos) -> bool {
    if !pos.is_known() || pos.col == 0 {
        return false;
    }
    match lines.get(pos.line as usize - 1) {
        Some(l) => pos.col as usize <= l.chars().count() + 1,
        None => false,
    }
}

/// A vocabulary and base texts for mutation, made once.
pub struct Bases {
    pub texts: Vec<(String, Vec<u8>)>,
    pub vocab: Vec<String>,
}

/// Checks one malformed text.
pub fn check_text(
    bytes: &[u8],
    hosts: &Hosts,
    rng: &mut Rng,
    stats: &mut Stats,
    out: &mut Vec<Finding>,
) {
    stats.inc("malformed texts");
    let fail = |out: &mut Vec<Finding>, cat: &str, detail: String| {
        out.push(Finding {
            category: cat.to_string(),
            detail,
            call: None,
        });
    };
    let text = match std::str::from_utf8(bytes) {
        Ok(s) => s.to_string(),
        Err(_) => {
            stats.inc("malformed: not UTF-8 (parsed lossily)");
            String::from_utf8_lossy(bytes).into_owned()
        }
    };
    // Split once: a text may have thousands of errors.
    let lines: Vec<&str> = text.split('\n').collect();
    let module = match parse(&text) {
        Err(errs) => {
            stats.inc("malformed: parse errors");
            if errs.0.is_empty() {
                fail(out, "parse error without errors", String::new());
            }
            for e in &errs.0 {
                let shown = e.to_string();
                let prefix = format!("{}:{}: ", e.pos.line, e.pos.col);
                if !in_text(&lines, e.pos) || !shown.starts_with(&prefix) || e.message.is_empty() {
                    fail(
                        out,
                        "parse error without a position in the text",
                        format!("{shown} (position {:?})", e.pos),
                    );
                    break;
                }
            }
            return;
        }
        Ok(m) => m,
    };
    let _ = module.to_string();
    match verify(&module) {
        Err(errs) => {
            stats.inc("malformed: verify errors");
            for e in &errs.0 {
                if !in_text(&lines, e.pos) {
                    fail(
                        out,
                        "verifier error without a position in the text",
                        format!("{e} (position {:?})", e.pos),
                    );
                    break;
                }
            }
            unverified(&module, hosts, rng, stats, out);
        }
        Ok(()) => {
            stats.inc("malformed: accepted (parse and verify)");
            if let Some(d) = roundtrip(&module) {
                fail(out, "accepted text does not round-trip", d);
            }
            let funcs: Vec<_> = module.defined().map(|(id, _)| id).collect();
            if funcs.is_empty() {
                return;
            }
            let case = Case {
                module: &module,
                hosts,
                fd: false,
                fuel: 100_000,
                mutant: true,
            };
            for _ in 0..2.min(funcs.len()) {
                let f = funcs[rng.below(funcs.len() as u64) as usize];
                stats.inc("malformed: functions checked as programs");
                check_module(&case, f, 2, rng, stats, out);
            }
        }
    }
}

/// A module that does not verify: the interpreter reports `Malformed` (or a
/// program error) and never an internal error; the optimiser, the derivation and
/// the JIT refuse it.
fn unverified(m: &Module, hosts: &Hosts, rng: &mut Rng, stats: &mut Stats, out: &mut Vec<Finding>) {
    let fail = |out: &mut Vec<Finding>, cat: &str, detail: String| {
        out.push(Finding {
            category: cat.to_string(),
            detail,
            call: None,
        });
    };
    let funcs: Vec<_> = m.defined().map(|(id, _)| id).collect();
    for &f in funcs.iter().take(3) {
        let mut args: Vec<Val> = m
            .sig(f)
            .params
            .iter()
            .map(|&t| {
                let nice = rng.chance(50);
                random_arg(rng, t, nice)
            })
            .collect();
        let mut it = Interpreter::new(m)
            .with_limits(Limits {
                max_depth: 50,
                fuel: Some(10_000),
            })
            .with_hosts(hosts);
        stats.inc("malformed: interpreter runs on unverified modules");
        if let Err(e) = it.call(f, &mut args)
            && let ErrorKind::Internal(_) = e.kind
        {
            fail(
                out,
                "interpreter bug on an unverified module",
                e.to_string(),
            );
        }
    }
    let mut copy = m.clone();
    if gradlift::ir::optimize(&mut copy, &OptConfig::default()).is_ok() {
        fail(
            out,
            "optimiser accepted a module that does not verify",
            String::new(),
        );
    }
    if let Some(&f) = funcs.first() {
        match build_rrule(m, f, &RuleConfig::default_for(m.sig(f))) {
            Ok(_) => {
                // The derivation verifies the declarations and what `f` reaches.
                if gradlift::ir::verify::verify_function(m, f).is_empty() {
                    stats.inc("malformed: derivation of a function unaffected by the error");
                } else {
                    fail(
                        out,
                        "derivation accepted a function that does not verify",
                        String::new(),
                    );
                }
            }
            Err(AdError::Internal { .. }) => {
                fail(out, "derivation bug on an unverified module", String::new())
            }
            Err(_) => {}
        }
        if compile_with(m, &[f], hosts).is_ok() {
            // The JIT compiles only what `f` reaches: the error may lie elsewhere.
            if gradlift::ir::verify::verify_function(m, f).is_empty() {
                stats.inc("malformed: JIT compiled a function unaffected by the error");
            } else {
                fail(
                    out,
                    "JIT compiled a function that does not verify",
                    String::new(),
                );
            }
        }
    }
}
