//! The documentation's IR examples and links are checked.
//!
//! `docs/ir-text.md` and `docs/ir-extensions.md` show IR in fenced code blocks. A
//! block tagged `ir`, or with no tag, is a complete module that must parse and
//! verify; a block tagged `ir-error` must fail to parse or to verify, with an error
//! that contains the text of each of its `; error: TEXT` comments. Inside an IR
//! block, comments of these forms state what the code computes, and are checked on
//! the reference interpreter:
//!
//! - `; @f(ARGS) = VALUE`: the call returns `VALUE`;
//! - `; @f(ARGS) fails: MESSAGE`: the call fails with that run-time error;
//! - `; gradient of @f(ARGS) = GRADIENT` (optionally `... with shadows SHADOWS = ...`):
//!   the gradient with the default activities and seeds;
//! - `; after @g(ARGS): STATEMENT`: `@g` is called first, on the same interpreter.
//!
//! `ARGS` is the JSON of the command line's `--args` without its brackets, `VALUE`
//! and `GRADIENT` as the command line prints `value` and `gradient`. Any comment line
//! that starts with `; @`, `; gradient of` or `; after @` must be such a statement, so
//! a typo cannot hide one.
//!
//! The second part checks that every relative link in `docs/*.md` and `README.md`
//! names a file of the repository (and, with a `#fragment`, a heading of it), and
//! that the docs do not point at documents outside the repository.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use gradlift::adjoint::{RuleConfig, Seeds, build_rrule, value_and_gradient};
use gradlift::ir::interp::{Interpreter, Val};
use gradlift::ir::{Elem, FuncId, Module, Type, parse, verify};
use serde_json::Value;

/// The repository's root.
fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// One fenced code block of a Markdown file.
#[derive(Debug)]
struct Fence {
    /// The tag after the opening backticks (`ir`, `ir-error`, `rust`, or empty).
    tag: String,
    /// The text between the fences.
    text: String,
    /// Where it stands: `docs/ir-text.md:123` (the opening fence's line).
    at: String,
}

/// The fenced code blocks of `file` (relative to the root), in order.
fn fences(file: &str) -> Vec<Fence> {
    let text = std::fs::read_to_string(root().join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
    let mut out = Vec::new();
    let mut open: Option<(String, usize, String)> = None;
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        match &mut open {
            None => {
                if let Some(tag) = trimmed.strip_prefix("```") {
                    open = Some((tag.trim().to_string(), i + 1, String::new()));
                }
            }
            Some((tag, start, body)) => {
                if trimmed.trim_end() == "```" {
                    out.push(Fence {
                        tag: std::mem::take(tag),
                        text: std::mem::take(body),
                        at: format!("{file}:{start}"),
                    });
                    open = None;
                } else {
                    body.push_str(line);
                    body.push('\n');
                }
            }
        }
    }
    assert!(open.is_none(), "{file}: a code block is not closed");
    out
}

/// The documents whose IR blocks are checked.
const IR_DOCS: [&str; 2] = ["docs/ir-text.md", "docs/ir-extensions.md"];

fn is_ir(tag: &str) -> bool {
    tag.is_empty() || tag == "ir"
}

#[test]
fn every_ir_example_parses_and_verifies() {
    let mut n = 0;
    for doc in IR_DOCS {
        for fence in fences(doc).iter().filter(|f| is_ir(&f.tag)) {
            let module = parse(&fence.text)
                .unwrap_or_else(|e| panic!("{}: does not parse:\n{e}\n{}", fence.at, fence.text));
            verify(&module)
                .unwrap_or_else(|e| panic!("{}: does not verify:\n{e}\n{}", fence.at, fence.text));
            // What the printer makes of it parses back to the same text.
            let printed = module.to_string();
            let again = parse(&printed).unwrap_or_else(|e| panic!("{}: print: {e}", fence.at));
            assert_eq!(
                again.to_string(),
                printed,
                "{}: not a fixed point",
                fence.at
            );
            n += 1;
        }
    }
    assert!(n >= 12, "only {n} IR examples found");
}

#[test]
fn every_error_example_fails_with_its_message() {
    let mut n = 0;
    for doc in IR_DOCS {
        for fence in fences(doc).iter().filter(|f| f.tag == "ir-error") {
            let errors = match parse(&fence.text) {
                Err(e) => e.to_string(),
                Ok(module) => match verify(&module) {
                    Err(e) => e.to_string(),
                    Ok(()) => panic!(
                        "{}: parses and verifies, but is shown as an error:\n{}",
                        fence.at, fence.text
                    ),
                },
            };
            let expected: Vec<&str> = fence
                .text
                .lines()
                .filter_map(|l| l.trim_start().strip_prefix("; error:"))
                .map(str::trim)
                .collect();
            assert!(
                !expected.is_empty(),
                "{}: an error example without a `; error:` comment",
                fence.at
            );
            for e in expected {
                assert!(
                    errors.contains(e),
                    "{}: the errors do not say `{e}`:\n{errors}",
                    fence.at
                );
            }
            n += 1;
        }
    }
    assert!(n >= 5, "only {n} error examples found");
}

#[test]
fn every_code_block_has_a_known_tag() {
    for doc in IR_DOCS {
        for fence in fences(doc) {
            assert!(
                ["", "ir", "ir-error", "text", "rust", "sh"].contains(&fence.tag.as_str()),
                "{}: unknown tag `{}`",
                fence.at,
                fence.tag
            );
        }
    }
}

// Statements about values.

/// A call written `@name(ARGS)`, with the text after it.
#[derive(Debug)]
struct Call<'a> {
    name: &'a str,
    args: Value,
    rest: &'a str,
}

/// Reads `@name(ARGS)` at the start of `text`.
fn call(text: &str) -> Result<Call<'_>, String> {
    let text = text.trim_start();
    let body = text.strip_prefix('@').ok_or("expected `@name(`")?;
    let open = body.find('(').ok_or("expected `(` after the name")?;
    let name = &body[..open];
    let close = body[open..].find(')').ok_or("expected `)`")? + open;
    let args: Value = serde_json::from_str(&format!("[{}]", &body[open + 1..close]))
        .map_err(|e| format!("the arguments are not JSON: {e}"))?;
    Ok(Call {
        name,
        args,
        rest: &body[close + 1..],
    })
}

/// What a statement says.
#[derive(Debug)]
enum Claim {
    /// The call returns this.
    Value(Value),
    /// The call fails with this message.
    Fails(String),
    /// The gradient at the call, with these initial shadows (JSON, or null).
    Gradient { shadows: Value, gradient: Value },
}

/// One statement: calls made first (on the same interpreter), then the claim about
/// a last call.
#[derive(Debug)]
struct Statement<'a> {
    before: Vec<Call<'a>>,
    call: Call<'a>,
    claim: Claim,
}

fn json(text: &str) -> Result<Value, String> {
    serde_json::from_str(text.trim()).map_err(|e| format!("`{}` is not JSON: {e}", text.trim()))
}

/// The statement in a comment's text (after `;`), `None` if it is an ordinary
/// comment, or why it is malformed.
fn statement(comment: &str) -> Option<Result<Statement<'_>, String>> {
    let c = comment.trim();
    if !(c.starts_with('@') || c.starts_with("gradient of") || c.starts_with("after @")) {
        return None;
    }
    Some(statement_of(c))
}

fn statement_of(c: &str) -> Result<Statement<'_>, String> {
    if let Some(rest) = c.strip_prefix("after ") {
        let first = call(rest)?;
        let then = first
            .rest
            .strip_prefix(':')
            .ok_or("expected `:` after the first call")?;
        let mut s = statement_of(then.trim())?;
        s.before.insert(0, Call { rest: "", ..first });
        return Ok(s);
    }
    if let Some(rest) = c.strip_prefix("gradient of ") {
        let call = call(rest)?;
        let (shadows, gradient) = if let Some(r) = call.rest.trim().strip_prefix("with shadows ") {
            let (s, g) = r.rsplit_once(" = ").ok_or("expected ` = `")?;
            (json(s)?, json(g)?)
        } else {
            let g = call.rest.trim().strip_prefix("= ").ok_or("expected `= `")?;
            (Value::Null, json(g)?)
        };
        return Ok(Statement {
            before: Vec::new(),
            call: Call { rest: "", ..call },
            claim: Claim::Gradient { shadows, gradient },
        });
    }
    let call = call(c)?;
    let rest = call.rest.trim();
    let claim = if let Some(v) = rest.strip_prefix("= ") {
        Claim::Value(json(v)?)
    } else if let Some(m) = rest.strip_prefix("fails: ") {
        Claim::Fails(m.to_string())
    } else {
        return Err("expected `= VALUE` or `fails: MESSAGE` after the call".into());
    };
    Ok(Statement {
        before: Vec::new(),
        call: Call { rest: "", ..call },
        claim,
    })
}

/// A JSON argument as a value of type `ty`.
fn to_val(ty: Type, json: &Value) -> Result<Val, String> {
    let float = |j: &Value| -> Result<f64, String> {
        match j {
            Value::Number(n) => n.as_f64().ok_or(format!("{n} is no f64")),
            Value::String(s) if s == "inf" => Ok(f64::INFINITY),
            Value::String(s) if s == "-inf" => Ok(f64::NEG_INFINITY),
            Value::String(s) if s == "nan" => Ok(f64::NAN),
            _ => Err(format!("{j} is not a float")),
        }
    };
    let float32 = |j: &Value| -> Result<f32, String> {
        match j {
            Value::Number(n) => n.to_string().parse::<f32>().map_err(|e| e.to_string()),
            _ => float(j).map(|x| x as f32),
        }
    };
    let int = |j: &Value| j.as_i64().ok_or(format!("{j} is not an i64"));
    let items = |j: &Value| j.as_array().cloned().ok_or(format!("{j} is not an array"));
    Ok(match ty {
        Type::F64 => Val::F64(float(json)?),
        Type::F32 => Val::F32(float32(json)?),
        Type::I64 => Val::I64(int(json)?),
        Type::Bool => Val::Bool(json.as_bool().ok_or(format!("{json} is not a bool"))?),
        Type::Slice {
            elem: Elem::F64, ..
        } => Val::F64s(items(json)?.iter().map(float).collect::<Result<_, _>>()?),
        Type::Slice {
            elem: Elem::F32, ..
        } => Val::F32s(items(json)?.iter().map(float32).collect::<Result<_, _>>()?),
        Type::Slice {
            elem: Elem::I64, ..
        } => Val::I64s(items(json)?.iter().map(int).collect::<Result<_, _>>()?),
    })
}

/// The arguments of `call` for the function it names.
fn args_of(module: &Module, call: &Call<'_>) -> Result<(FuncId, Vec<Val>), String> {
    let id = module
        .func_by_name(call.name)
        .ok_or(format!("no function @{}", call.name))?;
    let params = &module.sig(id).params;
    let items = call.args.as_array().ok_or("the arguments are not a list")?;
    if items.len() != params.len() {
        return Err(format!(
            "@{} takes {} arguments, the statement gives {}",
            call.name,
            params.len(),
            items.len()
        ));
    }
    let args = params
        .iter()
        .zip(items)
        .map(|(&t, j)| to_val(t, j))
        .collect::<Result<_, _>>()?;
    Ok((id, args))
}

/// Whether two floats agree: both NaN, equal, or within a relative 1e-12.
fn close(a: f64, b: f64) -> bool {
    (a.is_nan() && b.is_nan()) || a == b || (a - b).abs() <= 1e-12 * a.abs().max(b.abs())
}

/// Whether `val` is what `expected` says (JSON as the command line prints it).
fn matches(val: &Val, expected: &Value) -> bool {
    let ty = match val {
        Val::F64s(_) => Type::slice(Elem::F64),
        Val::F32s(_) => Type::slice(Elem::F32),
        Val::I64s(_) => Type::slice(Elem::I64),
        v => v.ty(),
    };
    let Ok(want) = to_val(ty, expected) else {
        return false;
    };
    let floats =
        |a: &[f64], b: &[f64]| a.len() == b.len() && a.iter().zip(b).all(|(x, y)| close(*x, *y));
    match (val, &want) {
        (Val::F64(a), Val::F64(b)) => close(*a, *b),
        (Val::F32(a), Val::F32(b)) => a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()),
        (Val::F64s(a), Val::F64s(b)) => floats(a, b),
        (Val::F32s(a), Val::F32s(b)) => {
            a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits())
        }
        (a, b) => a == b,
    }
}

/// The results of a call as the command line prints `value`.
fn results_match(results: &[Val], expected: &Value) -> bool {
    match results {
        [] => expected.is_null(),
        [one] => matches(one, expected),
        several => expected.as_array().is_some_and(|e| {
            e.len() == several.len() && several.iter().zip(e).all(|(v, j)| matches(v, j))
        }),
    }
}

/// Checks one statement against `module`.
fn check(module: &Module, s: &Statement<'_>) -> Result<(), String> {
    let mut interp = Interpreter::new(module);
    for call in &s.before {
        let (id, mut args) = args_of(module, call)?;
        interp
            .call(id, &mut args)
            .map_err(|e| format!("the first call @{} failed: {e}", call.name))?;
    }
    let (id, mut args) = args_of(module, &s.call)?;
    match &s.claim {
        Claim::Value(expected) => match interp.call(id, &mut args) {
            Ok(out) if results_match(&out, expected) => Ok(()),
            Ok(out) => Err(format!("returned {out:?}, not {expected}")),
            Err(e) => Err(format!("failed: {e}")),
        },
        Claim::Fails(message) => match interp.call(id, &mut args) {
            Ok(out) => Err(format!("returned {out:?} instead of failing")),
            Err(e) if e.kind.to_string() == *message => Ok(()),
            Err(e) => Err(format!("failed with `{}`, not `{message}`", e.kind)),
        },
        Claim::Gradient { shadows, gradient } => {
            let config = RuleConfig::default_for(module.sig(id));
            let rule = build_rrule(module, id, &config).map_err(|e| format!("derive: {e}"))?;
            let params = module.sig(id).params.clone();
            let shadows = match shadows {
                Value::Null => Vec::new(),
                Value::Array(items) => params
                    .iter()
                    .zip(items)
                    .map(|(&t, j)| (!j.is_null()).then(|| to_val(t, j)).transpose())
                    .collect::<Result<_, _>>()?,
                other => return Err(format!("the shadows {other} are not an array")),
            };
            let seeds = Seeds {
                results: None,
                shadows,
            };
            let mut engine = Interpreter::new(&rule.module);
            let out = value_and_gradient(&mut engine, &rule, &args, &seeds)
                .map_err(|e| format!("gradient: {e}"))?;
            let want = gradient.as_array().ok_or("the gradient is not a list")?;
            let ok = want.len() == out.gradient.len()
                && out.gradient.iter().zip(want).all(|(g, w)| match g {
                    None => w.is_null(),
                    Some(v) => matches(v, w),
                });
            if ok {
                Ok(())
            } else {
                Err(format!(
                    "the gradient is {:?}, not {gradient}",
                    out.gradient
                ))
            }
        }
    }
}

#[test]
fn every_stated_value_is_what_the_interpreter_computes() {
    let mut n = 0;
    let mut failures = Vec::new();
    for doc in IR_DOCS {
        for fence in fences(doc).iter().filter(|f| is_ir(&f.tag)) {
            let module = parse(&fence.text).unwrap_or_else(|e| panic!("{}: {e}", fence.at));
            for line in fence.text.lines() {
                let Some(comment) = line.trim_start().strip_prefix(';') else {
                    continue;
                };
                let Some(stmt) = statement(comment) else {
                    continue;
                };
                n += 1;
                if let Err(e) = stmt.and_then(|s| check(&module, &s)) {
                    failures.push(format!("{}: `{}`: {e}", fence.at, line.trim()));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(n >= 20, "only {n} statements found");
}

#[test]
fn statements_are_read_as_written() {
    let s = statement(" @f(2.0, [1, 2]) = [7.0, 3]").unwrap().unwrap();
    assert_eq!(s.call.name, "f");
    assert_eq!(s.call.args, serde_json::json!([2.0, [1, 2]]));
    assert!(matches!(s.claim, Claim::Value(ref v) if *v == serde_json::json!([7.0, 3])));
    let s = statement(" after @a(1): @b() fails: tape underflow")
        .unwrap()
        .unwrap();
    assert_eq!((s.before.len(), s.call.name), (1, "b"));
    assert!(matches!(s.claim, Claim::Fails(ref m) if m == "tape underflow"));
    let s = statement(" gradient of @g([1.0], 2.0) with shadows [[1.0], null] = [[2.0], 1.0]")
        .unwrap()
        .unwrap();
    assert!(matches!(s.claim, Claim::Gradient { ref shadows, .. } if shadows.is_array()));
    assert!(statement(" f(x) = 1").is_none());
    assert!(statement(" @f(1) is 2").unwrap().is_err());
}

// Links.

/// The Markdown files whose links are checked: `docs/*.md` and `README.md`.
fn markdown_files() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .expect("docs/ exists")
        .map(|e| e.expect("a directory entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    files.sort();
    files.push(root().join("README.md"));
    files
}

/// The lines of a Markdown text outside fenced code blocks, with their numbers.
fn prose_lines(text: &str) -> Vec<(usize, &str)> {
    let mut in_fence = false;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            in_fence = !in_fence;
            continue;
        }
        if !in_fence {
            out.push((i + 1, line));
        }
    }
    out
}

/// A line without its inline code spans (`` `...` ``).
fn without_code(line: &str) -> String {
    let mut out = String::new();
    let mut in_code = false;
    for c in line.chars() {
        if c == '`' {
            in_code = !in_code;
        } else if !in_code {
            out.push(c);
        }
    }
    out
}

/// The targets of the inline links `[text](target)` of a line.
fn link_targets(line: &str) -> Vec<String> {
    let line = without_code(line);
    let mut out = Vec::new();
    let mut rest = line.as_str();
    while let Some(i) = rest.find("](") {
        let after = &rest[i + 2..];
        let Some(end) = after.find(')') else { break };
        out.push(after[..end].trim().to_string());
        rest = &after[end..];
    }
    out
}

/// The anchors of a Markdown file's headings, as GitHub makes them: lowercase,
/// punctuation other than `-` and `_` dropped, spaces to `-`, `-1`, `-2` ... for
/// repeats.
fn anchors(text: &str) -> Vec<String> {
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut out = Vec::new();
    for (_, line) in prose_lines(text) {
        let Some(heading) = line.strip_prefix('#') else {
            continue;
        };
        let heading = heading.trim_start_matches('#').trim();
        let slug: String = heading
            .to_lowercase()
            .chars()
            .filter_map(|c| match c {
                ' ' => Some('-'),
                c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
                _ => None,
            })
            .collect();
        let k = seen.entry(slug.clone()).or_insert(0);
        out.push(if *k == 0 {
            slug.clone()
        } else {
            format!("{slug}-{k}")
        });
        *k += 1;
    }
    out
}

#[test]
fn every_relative_link_names_a_file_of_the_repository() {
    let mut n = 0;
    let mut broken = Vec::new();
    for file in markdown_files() {
        let text = std::fs::read_to_string(&file).expect("readable");
        let shown = file
            .strip_prefix(root())
            .unwrap_or(&file)
            .display()
            .to_string();
        for (line_no, line) in prose_lines(&text) {
            for target in link_targets(line) {
                if target.contains("://") || target.starts_with("mailto:") {
                    continue;
                }
                n += 1;
                let (path, fragment) = match target.split_once('#') {
                    Some((p, f)) => (p, Some(f)),
                    None => (target.as_str(), None),
                };
                let dest = if path.is_empty() {
                    file.clone()
                } else {
                    file.parent().expect("a directory").join(path)
                };
                if !dest.exists() {
                    broken.push(format!("{shown}:{line_no}: `{target}`: no such file"));
                    continue;
                }
                if let Some(fragment) = fragment
                    && dest.extension().is_some_and(|e| e == "md")
                {
                    let dest_text = std::fs::read_to_string(&dest).expect("readable");
                    if !anchors(&dest_text).iter().any(|a| a == fragment) {
                        broken.push(format!("{shown}:{line_no}: `{target}`: no such heading"));
                    }
                }
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
    assert!(n >= 20, "only {n} links found");
}

#[test]
fn the_docs_point_at_nothing_outside_the_repository() {
    for file in markdown_files() {
        if file.ends_with("README.md") {
            continue;
        }
        let text = std::fs::read_to_string(&file).expect("readable");
        for (i, line) in text.lines().enumerate() {
            for bad in ["shared spec", "SUITE.md", "/work/", "spec/"] {
                assert!(
                    !line.contains(bad),
                    "{}:{}: mentions `{bad}`: {line}",
                    file.display(),
                    i + 1
                );
            }
        }
    }
}

#[test]
fn anchors_are_made_as_github_makes_them() {
    let text = "# A title\n## Declarations: `extern`, `vjp`\n### Debug checks: `trap_if`\n## An example\n### An example\n```\n# not a heading\n```\n";
    assert_eq!(
        anchors(text),
        [
            "a-title",
            "declarations-extern-vjp",
            "debug-checks-trap_if",
            "an-example",
            "an-example-1"
        ]
    );
    assert_eq!(
        link_targets("see [cli.md](cli.md) and [this](#a-b), not `[x](y)`"),
        ["cli.md", "#a-b"]
    );
}
