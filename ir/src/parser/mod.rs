//! The parser: IR text (see `docs/ir-text.md`) to a [`Module`].
//!
//! It is the printer's ([`write`](crate::write)) other half: `print(parse(text))` is
//! a fixed point. Parsing runs in three phases, each in its own module:
//!
//! - `lexer`: characters to tokens with line and column (string literals, the
//!   messages of `trap_if`, with their escapes checked);
//! - `parse`: tokens to a syntax tree (`ast`) with positions, checking the grammar,
//!   op names, types and predicates;
//! - `lower`: the tree to a module, declaring every function before any body is
//!   lowered (so calls may go forward, and recursion works), resolving value names,
//!   block labels and callees, typing literals from context, and filling each
//!   function's [`SourceMap`](crate::SourceMap).
//!
//! Only syntax and naming problems (and literals that cannot have the type their
//! context gives them) are parse errors; type errors are the verifier's, which reports
//! them at the positions the source map keeps. Every phase recovers from errors and
//! carries on, so one parse reports every error it can find, sorted by position. No
//! input makes the parser panic or recurse deeper than the grammar nests.

mod ast;
mod lexer;
mod lower;
mod parse;

pub use lexer::is_valid_name;

use core::fmt;

use smallvec::SmallVec;

use crate::entities::Inst;
use crate::function::{Function, Pos, ValueDef};
use crate::module::Module;
use crate::ops::Imm;
use crate::types::Type;

/// One error in IR text: where, and what.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct ParseError {
    /// Line and column of the offending token.
    pub pos: Pos,
    /// What is wrong, as a sentence without a trailing period.
    pub message: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.pos, self.message)
    }
}

impl std::error::Error for ParseError {}

/// Every error found in one text (at least one), in text order.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct ParseErrors(pub Vec<ParseError>);

impl fmt::Display for ParseErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ParseErrors {}

/// The type the parser gives each constant operand of `inst` when the instruction is
/// printed and parsed back; `None` for operands that are not constants.
///
/// A constant prints as a literal (float syntax for `f64` and `f32`, integer syntax
/// for `i64`, `true`/`false`), and a literal takes its type from context: the other
/// operands, the callee's parameters (see the rule in `lower::expected_types`). A
/// function prints and parses back to itself only if every constant operand has the
/// type given here; the verifier checks it. Constants elsewhere take simpler context:
/// a phi's incoming constant takes the phi's type, a `ret` operand the function's
/// result type, a `br` condition `bool`.
pub fn literal_types(module: &Module, func: &Function, inst: Inst) -> SmallVec<[Option<Type>; 3]> {
    let Some(data) = func.insts.get(inst) else {
        return SmallVec::new();
    };
    let args: SmallVec<[lower::Arg; 3]> = data
        .args
        .iter()
        .map(|&v| match func.values.get(v) {
            Some(d) => match d.def {
                ValueDef::Const(c) => lower::Arg::Literal(match c.ty() {
                    Type::F32 => Type::F64,
                    t => t,
                }),
                _ => lower::Arg::Typed(d.ty),
            },
            None => lower::Arg::Untyped,
        })
        .collect();
    let callee = match data.imm {
        Imm::Func(id) => module.funcs.get(id).map(|d| &d.sig),
        _ => None,
    };
    let (_, params) = lower::expected_types(data.opcode, &data.imm, &args, callee);
    args.iter()
        .enumerate()
        .map(|(i, a)| match *a {
            lower::Arg::Literal(own) => Some(params.get(i).copied().flatten().unwrap_or(own)),
            _ => None,
        })
        .collect()
}

/// Parses a module from IR text, or returns every error found (sorted by position).
///
/// The module is not verified: a well-formed text may still break the IR's
/// invariants (types, dominance), which [`verify`](crate::verify()) reports.
pub fn parse(text: &str) -> Result<Module, ParseErrors> {
    parse_with(text, &ParseOptions::default())
}

/// What the parser accepts beyond the grammar: see [`parse_with`].
///
/// ```
/// let options = gradlift_ir::ParseOptions::default();
/// assert_eq!(options.max_insts, 200_000);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ParseOptions {
    /// The most statements (phis, instructions and terminators) a function body
    /// may have. Parsing stops at the first statement over the limit, with an
    /// error naming the function and the limit, so a text too large to work with
    /// is refused after reading only that much of it (in well under a second).
    /// Default 200,000: parsing takes about 3 µs and under 1 KB per statement, and
    /// the JIT compiles a function of that size, and its derived code, in seconds
    /// (see `CompileOptions` in gradlift-jit, whose limit is 2.5 times this one).
    pub max_insts: usize,
}

impl Default for ParseOptions {
    fn default() -> ParseOptions {
        ParseOptions { max_insts: 200_000 }
    }
}

impl ParseOptions {
    /// These options with [`max_insts`](Self::max_insts) set.
    pub fn with_max_insts(mut self, insts: usize) -> ParseOptions {
        self.max_insts = insts;
        self
    }
}

/// Parses a module from IR text as [`parse`] does, within `options`' limits.
///
/// ```
/// use gradlift_ir::{ParseOptions, parse_with};
/// let text = "func @f(%x: f64) -> f64 {\nentry:\n    %y = fmul %x, %x\n    ret %y\n}\n";
/// assert!(parse_with(text, &ParseOptions::default()).is_ok());
/// let err = parse_with(text, &ParseOptions::default().with_max_insts(1)).unwrap_err();
/// assert_eq!(err.0.len(), 1);
/// assert_eq!(err.0[0].pos.to_string(), "4:5");
/// assert!(err.0[0].message.starts_with("@f has more than 1 instructions"));
/// ```
pub fn parse_with(text: &str, options: &ParseOptions) -> Result<Module, ParseErrors> {
    let mut errors = Vec::new();
    let (items, stopped) =
        parse::parse_items(lexer::Lexer::new(text), options.max_insts, &mut errors);
    // A parse stopped by the limit has incomplete items: lowering them would only
    // add errors that follow from stopping.
    let module = if stopped {
        Module::default()
    } else {
        lower::lower(&items, &mut errors)
    };
    if errors.is_empty() {
        Ok(module)
    } else {
        // One error per token: a second one at the same place follows from the first
        // (the sort is stable, so the first reported is kept).
        errors.sort_by_key(|e| e.pos);
        errors.dedup_by_key(|e| e.pos);
        Err(ParseErrors(errors))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::function::ValueDef;
    use crate::ops::Opcode;
    use crate::types::{Elem, Scalar, Type};
    use crate::{Block, Decl, Function, Terminator};

    /// Parses `text`, which must fail, and checks that the first error is at `pos`
    /// (`"line:col"`) and that its message contains `fragment`.
    #[track_caller]
    fn check_err(text: &str, pos: &str, fragment: &str) {
        let errors = match parse(text) {
            Ok(m) => panic!("parsed, expected an error at {pos}:\n{m}"),
            Err(e) => e,
        };
        let first = &errors.0[0];
        assert!(
            first.pos.to_string() == pos && first.message.contains(fragment),
            "expected `{pos}: ...{fragment}...`, got:\n{errors}"
        );
    }

    /// Parses `text`, which must fail, and compares all errors, one per line.
    #[track_caller]
    fn check_errs(text: &str, expected: &str) {
        let errors = match parse(text) {
            Ok(m) => panic!("parsed, expected errors:\n{m}"),
            Err(e) => e,
        };
        assert_eq!(errors.to_string(), expected.trim(), "\nparsing:\n{text}");
    }

    /// Parses `text`, which must succeed, and returns the module.
    #[track_caller]
    fn ok(text: &str) -> Module {
        match parse(text) {
            Ok(m) => m,
            Err(e) => panic!("parse failed:\n{e}\ntext:\n{text}"),
        }
    }

    /// The function `name` of `m`.
    #[track_caller]
    fn func<'m>(m: &'m Module, name: &str) -> &'m Function {
        m.function(m.func_by_name(name).unwrap()).unwrap()
    }

    /// The constants used by the instructions of `f`, in order.
    fn consts(f: &Function) -> Vec<Scalar> {
        let mut out = Vec::new();
        for (_, inst) in f.placed_insts() {
            for &a in &f.insts[inst].args {
                if let ValueDef::Const(c) = f.values[a].def {
                    out.push(c);
                }
            }
        }
        out
    }

    const ROSENBROCK: &str = "\
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
    %acc1 = fadd %acc2, %a
    jump head
exit:
    ret %acc
}
";

    // Errors, each at its place.

    #[test]
    fn unknown_value() {
        check_err(ROSENBROCK, "15:18", "unknown value %acc2");
    }

    #[test]
    fn unknown_op() {
        check_err(
            "func @f(%x: f64) -> f64 {\nentry:\n    %y = fadd2 %x, %x\n    ret %y\n}",
            "3:10",
            "unknown op `fadd2`",
        );
    }

    #[test]
    fn unknown_type() {
        check_err("extern @f(f46) -> f64", "1:11", "unknown type `f46`");
        check_err(
            "extern @f([bool])",
            "1:12",
            "slices hold f64, f32 or i64, not bool",
        );
        check_err("extern @f(mut f64)", "1:15", "expected `[`, found `f64`");
    }

    #[test]
    fn unknown_predicate() {
        check_err(
            "func @f(%x: f64) -> bool {\nentry:\n  %c = fcmp lq %x, 1.0\n  ret %c\n}",
            "3:13",
            "unknown predicate `lq`",
        );
    }

    #[test]
    fn unknown_block_label() {
        check_err(
            "func @f() {\nentry:\n  jump nowhere\n}",
            "3:8",
            "unknown block label `nowhere`",
        );
    }

    #[test]
    fn unknown_function() {
        check_err(
            "func @f() {\nentry:\n  call @g()\n  ret\n}",
            "3:8",
            "unknown function @g",
        );
        check_err("nodiff @f", "1:8", "unknown function @f");
        check_err(
            "extern @f()\noverlay @f = @g",
            "2:14",
            "unknown function @g",
        );
    }

    #[test]
    fn value_defined_twice() {
        check_err(
            "func @f(%x: f64) -> f64 {\nentry:\n    %x = fneg %x\n    ret %x\n}",
            "3:5",
            "value %x is defined twice (first at 1:9)",
        );
    }

    #[test]
    fn block_label_defined_twice() {
        check_err(
            "func @f() {\na:\n  jump a\na:\n  ret\n}",
            "4:1",
            "block label `a` is defined twice (first at 2:1)",
        );
    }

    #[test]
    fn function_defined_twice() {
        check_err(
            "extern @f()\n\nfunc @f() {\nentry:\n  ret\n}",
            "3:6",
            "function @f is defined twice (first at 1:1)",
        );
    }

    #[test]
    fn unexpected_tokens() {
        check_err(
            "func @f(%a: f64, %b: f64) -> f64 {\nentry:\n  %c = fadd %a %b\n  ret %c\n}",
            "3:16",
            "expected `,`, found `%b`",
        );
        check_err("func @f(%a f64) {", "1:12", "expected `:`, found `f64`");
        check_err(
            "fn @f()",
            "1:1",
            "expected an item (`func`, `extern`, `overlay`, `vjp`, `jvp` or `nodiff`), found `fn`",
        );
        check_err(
            "extern @f(f64",
            "1:14",
            "expected `,` or `)`, found end of input",
        );
        check_err("extern @f() -> ()", "1:17", "expected a type, found `)`");
    }

    #[test]
    fn bad_characters_and_numbers() {
        check_err("extern @f() $", "1:13", "unexpected character `$`");
        check_err(
            "func @f() -> f64 {\nentry:\n  ret 1.2.3\n}",
            "3:7",
            "malformed number `1.2.3`",
        );
        check_err(
            "func @f() -> i64 {\nentry:\n  ret 0x1FFFFFFFFFFFFFFFF\n}",
            "3:7",
            "hex literal `0x1FFFFFFFFFFFFFFFF` is too large for 64 bits",
        );
        check_err(
            "func @f() -> i64 {\nentry:\n  ret %\n}",
            "3:7",
            "expected a name after `%`",
        );
    }

    #[test]
    fn literal_type_mismatches() {
        check_err(
            "func @f(%n: i64) -> i64 {\nentry:\n  %m = iadd %n, 1.5\n  ret %m\n}",
            "3:17",
            "float literal 1.5 where i64 is expected",
        );
        check_err(
            "func @f() -> f64 {\na:\n  jump b\nb:\n  %x = phi f64 [a: true]\n  ret %x\n}",
            "5:20",
            "bool literal true where f64 is expected",
        );
        check_err(
            "extern @g([f64])\nfunc @f() {\nentry:\n  call @g(1)\n  ret\n}",
            "4:11",
            "integer literal 1 where [f64] is expected",
        );
        check_err(
            "func @f() -> f64 {\nentry:\n  ret true\n}",
            "3:7",
            "bool literal true where f64",
        );
        check_err(
            "func @f(%a: bool) {\nentry:\n  br 1, x, x\nx:\n  ret\n}",
            "3:6",
            "integer literal 1 where bool is expected",
        );
        check_err(
            "func @f() -> i64 {\nentry:\n  ret 9223372036854775808\n}",
            "3:7",
            "integer literal 9223372036854775808 does not fit in i64",
        );
        check_err(
            "func @f() -> f64 {\nentry:\n  %c = const f64 0x10\n  ret %c\n}",
            "3:18",
            "hex literal 0x10 where f64 is expected",
        );
        check_err(
            "func @f() -> f64 {\nentry:\n  %c = const f64 %x\n  ret %c\n}",
            "3:18",
            "expected a literal, found `%x`",
        );
    }

    #[test]
    fn result_counts() {
        check_err(
            "func @f(%x: f64) {\nentry:\n  %a, %b = fneg %x\n  ret\n}",
            "3:3",
            "fneg has 1 result but 2 names are given",
        );
        check_err(
            "func @f(%s: mut [f64]) {\nentry:\n  %a = store %s[0], 1.0\n  ret\n}",
            "3:3",
            "store has no results but 1 name is given",
        );
        check_err(
            "extern @g() -> (f64, f64)\nfunc @f() {\nentry:\n  %a = call @g()\n  ret\n}",
            "4:3",
            "call to @g has 2 results but 1 name is given",
        );
        check_err(
            "func @f() {\nentry:\n  %a, %b = phi f64 [entry: 1.0]\n  ret\n}",
            "3:12",
            "a phi defines one value, found 2 names",
        );
    }

    #[test]
    fn block_structure() {
        check_err(
            "func @f() {\nentry:\n  %x = fneg 1.0\nnext:\n  ret\n}",
            "4:1",
            "expected a terminator (`jump`, `br` or `ret`), found `next`",
        );
        check_err(
            "func @f() {\nentry:\n  ret\n  %x = fneg 1.0\n}",
            "4:3",
            "expected a block label or `}`, found `%x`",
        );
        check_err(
            "func @f() {\n  ret\n}",
            "2:3",
            "expected a block label, found `ret`",
        );
        check_err("func @f() {}", "1:12", "expected a block label, found `}`");
        check_err(
            "func @f() {\nentry:\n  ret\n",
            "4:1",
            "expected `}`, found end of input",
        );
        check_err(
            "func @f() {\nentry:\n  jump b\nb:\n  %x = fneg 1.0\n  %y = phi f64 [entry: 1.0]\n  ret\n}",
            "6:8",
            "phi %y after an instruction",
        );
    }

    // Recovery: every error is reported, in order.

    #[test]
    fn every_unknown_name_is_reported() {
        check_errs(
            "\
func @f(%x: f64) -> f64 {
entry:
    %a = fadd %x, %y
    %b = fmul %z, %a
    %c = call @nope(%w)
    br %cond, there, entry
}",
            "
3:19: unknown value %y
4:15: unknown value %z
5:15: unknown function @nope
5:21: unknown value %w
6:8: unknown value %cond
6:15: unknown block label `there`",
        );
    }

    #[test]
    fn errors_in_several_items_are_all_reported() {
        check_errs(
            "\
func @f(%x: f64) -> f64 {
entry:
    %a = fadd2 %x, %x
    %b = fadd %a, %x   ; %a is still defined: no error here
    %c = fadd %b %x
    ret %c
}
func @g(%x: f66) {
entry:
    ret
}
junk here
extern @h() -> f64 $
func @k() -> f64 {
entry:
    %r = call @h()
    call @g(1.0)
    ret %r
}",
            "
3:10: unknown op `fadd2`
5:18: expected `,`, found `%x`
8:13: unknown type `f66`
12:1: expected an item (`func`, `extern`, `overlay`, `vjp`, `jvp` or `nodiff`), found `junk`
13:20: unexpected character `$`",
        );
    }

    #[test]
    fn bad_strings_are_reported_once_and_parsing_goes_on() {
        check_errs(
            r#"func @f(%c: bool) {
entry:
    trap_if %c, "oops
    trap_if %c, "a\qb\z"
    trap_if %c, "fine"
    %x = fneg %c2
    ret
}"#,
            r#"
3:17: unterminated string literal (it must end with `"` on its line)
4:19: invalid escape `\q` in a string literal (the escapes are `\"`, `\\`, `\n`, `\t` and `\u{HEX}`)
6:15: unknown value %c2"#,
        );
        let m = ok(
            "func @f(%c: bool) {\nentry:\n    trap_if %c, \"a\"\n    trap_if %c, \"b\"\n    trap_if %c, \"a\"\n    ret\n}",
        );
        let f = func(&m, "f");
        let msgs: Vec<crate::Imm> = f.placed_insts().map(|(_, i)| f.insts[i].imm).collect();
        assert_eq!(msgs[0], msgs[2]);
        assert_ne!(msgs[0], msgs[1]);
        assert_eq!(f.messages.len(), 2);
    }

    #[test]
    fn a_broken_header_still_declares_its_name() {
        // `@g`'s header is unreadable; calls to it are not reported again.
        check_errs(
            "func @g(%x: f64 {\nentry:\n  ret\n}\nfunc @f() {\nentry:\n  %a = call @g(1.0)\n  ret\n}",
            "1:17: expected `,` or `)`, found `{`",
        );
    }

    // Lowering: what a successful parse builds.

    #[test]
    fn literals_take_their_type_from_context() {
        let m = ok("\
extern @g(f32, i64) -> f32
func @f(%x: f32, %c: bool) -> (f32, i64, bool) {
entry:
    %a = fadd %x, 0.1
    %b = fmul 2, %a
    %d = call @g(16777217, 0xFFFFFFFFFFFFFFFF)
    %e = select %c, 1, 2
    %h = cast f64 3
    %k = cast f64 3.5
    %l = const f32 0.1
    ret %a, -7, true
}");
        let f = func(&m, "f");
        assert_eq!(
            consts(f),
            [
                Scalar::F32(0.1),
                Scalar::F32(2.0),
                Scalar::F32(16777216.0),
                Scalar::I64(-1),
                Scalar::I64(1),
                Scalar::I64(2),
                Scalar::I64(3),
                Scalar::F64(3.5),
            ]
        );
        let e = f
            .values
            .iter()
            .find(|(_, d)| d.name.as_deref() == Some("e"))
            .unwrap()
            .0;
        assert_eq!(f.value_type(e), Type::I64);
        let (_, l) = f.placed_insts().nth(6).unwrap();
        assert_eq!(f.insts[l].imm, crate::Imm::Const(Scalar::F32(0.1)));
        let Some(Terminator::Ret(vals)) = &f.blocks[f.layout[0]].term else {
            panic!()
        };
        assert_eq!(f.value_def(vals[1]), ValueDef::Const(Scalar::I64(-7)));
        assert_eq!(f.value_def(vals[2]), ValueDef::Const(Scalar::Bool(true)));
    }

    #[test]
    fn f32_literals_are_read_without_double_rounding() {
        // This decimal lies just above the midpoint between two f32s; read through
        // f64 first it rounds to the f64 midpoint, then (ties to even) down.
        let text = "1.00000005960464477550";
        let direct: f32 = text.parse().unwrap();
        let via_f64 = text.parse::<f64>().unwrap() as f32;
        assert_ne!(direct.to_bits(), via_f64.to_bits());
        let m = ok(&format!(
            "func @f(%x: f32) -> f32 {{\nentry:\n  %y = fmul %x, {text}\n  ret %y\n}}"
        ));
        assert_eq!(consts(func(&m, "f")), [Scalar::F32(direct)]);
    }

    #[test]
    fn values_may_be_used_before_their_definition_in_the_text() {
        // `b1` uses `%v2`, defined later in the text; `b2` is laid out after `b1` but
        // dominates it. The types of `%v1` come from `%v2`'s, worked out first.
        let m = ok("\
func @f(%s: [f32]) -> f32 {
entry:
    jump b2
b1:
    %v1 = fadd %v2, 1.0
    ret %v1
b2:
    %v2 = load %s[0]
    jump b1
}");
        let f = func(&m, "f");
        let types: Vec<Type> = f
            .placed_insts()
            .map(|(_, i)| f.value_type(f.insts[i].results[0]))
            .collect();
        assert_eq!(types, [Type::F32, Type::F32]);
        assert_eq!(consts(f), [Scalar::F32(1.0), Scalar::I64(0)]);
    }

    #[test]
    fn functions_may_be_called_before_their_definition() {
        let m = ok("\
func @even(%n: i64) -> bool {
entry:
    %z = icmp eq %n, 0
    br %z, yes, no
yes:
    ret true
no:
    %m = isub %n, 1
    %r = call @odd(%m)
    ret %r
}
func @odd(%n: i64) -> bool {
entry:
    %z = icmp eq %n, 0
    br %z, yes, no
yes:
    ret false
no:
    %m = isub %n, 1
    %r = call @even(%m)
    ret %r
}
nodiff @even
vjp @even = @odd
overlay @odd = @even
jvp @even = @odd");
        let (even, odd) = (
            m.func_by_name("even").unwrap(),
            m.func_by_name("odd").unwrap(),
        );
        let f = func(&m, "even");
        let (_, call) = f.placed_insts().nth(2).unwrap();
        assert_eq!(f.insts[call].opcode, Opcode::Call);
        assert_eq!(f.insts[call].imm, crate::Imm::Func(odd));
        assert_eq!(f.value_type(f.insts[call].results[0]), Type::Bool);
        assert!(m.is_nodiff(even));
        assert_eq!(m.vjp_of(even), Some(odd));
        assert_eq!(m.overlay_of(odd), Some(even));
        assert_eq!(m.jvp_of(even), Some(odd));
        assert_eq!(m.jvp_of(odd), None);
        let decls: Vec<_> = m.decls.iter().map(|(d, p)| (*d, p.to_string())).collect();
        assert_eq!(
            decls,
            [
                (Decl::Nodiff { func: even }, "23:1".to_string()),
                (
                    Decl::Vjp {
                        func: even,
                        rule: odd
                    },
                    "24:1".to_string()
                ),
                (
                    Decl::Overlay {
                        func: odd,
                        with: even
                    },
                    "25:1".to_string()
                ),
                (
                    Decl::Jvp {
                        func: even,
                        rule: odd
                    },
                    "26:1".to_string()
                ),
            ]
        );
    }

    #[test]
    fn the_source_map_points_at_definitions() {
        let m = ok("\
; leading comment
  func @f(%x: f64) -> f64 {
entry:   %y = fneg %x
  jump b
b:
    %z = phi f64 [entry: %y]   ret %z }");
        let f = func(&m, "f");
        let sm = &f.srcmap;
        assert_eq!(sm.func, Pos::new(2, 3));
        assert_eq!(m.funcs[m.func_by_name("f").unwrap()].pos, Pos::new(2, 3));
        assert_eq!(sm.values[f.params[0]], Pos::new(2, 11));
        let (b0, b1) = (f.layout[0], f.layout[1]);
        assert_eq!(
            (sm.blocks[b0], sm.blocks[b1]),
            (Pos::new(3, 1), Pos::new(5, 1))
        );
        assert_eq!(sm.terms[b0], Pos::new(4, 3));
        assert_eq!(sm.terms[b1], Pos::new(6, 32));
        let (_, inst) = f.placed_insts().next().unwrap();
        assert_eq!(sm.insts[inst], Pos::new(3, 10));
        let phi = f.blocks[b1].phis[0].value;
        assert_eq!(sm.values[phi], Pos::new(6, 5));
        assert_eq!(f.values[phi].name.as_deref(), Some("z"));
        assert_eq!(f.blocks[b1].name.as_deref(), Some("b"));
    }

    #[test]
    fn labels_may_look_like_keywords_and_numbers() {
        let m = ok("\
func @f(%c: bool) -> f64 {
ret:
    br %c, 0, true
0:
    ret
true:
    ret inf
}");
        let f = func(&m, "f");
        let names: Vec<_> = f
            .layout
            .iter()
            .map(|&b| f.blocks[b].name.as_deref().unwrap())
            .collect();
        assert_eq!(names, ["ret", "0", "true"]);
        let ret_of = |b: Block| f.blocks[b].term.clone().unwrap();
        assert_eq!(ret_of(f.layout[1]), Terminator::Ret(Default::default()));
        let Terminator::Ret(v) = ret_of(f.layout[2]) else {
            panic!()
        };
        assert_eq!(
            f.value_def(v[0]),
            ValueDef::Const(Scalar::F64(f64::INFINITY))
        );
    }

    #[test]
    fn types_parse() {
        let m = ok(
            "extern @f(f64, f32, i64, bool, [f64], [f32], [i64], mut [f64], mut [f32], mut [i64]) -> (f64, bool)",
        );
        let sig = m.sig(m.func_by_name("f").unwrap());
        assert_eq!(
            sig.params,
            [
                Type::F64,
                Type::F32,
                Type::I64,
                Type::Bool,
                Type::slice(Elem::F64),
                Type::slice(Elem::F32),
                Type::slice(Elem::I64),
                Type::slice_mut(Elem::F64),
                Type::slice_mut(Elem::F32),
                Type::slice_mut(Elem::I64),
            ]
        );
        assert_eq!(sig.results, [Type::F64, Type::Bool]);
    }

    #[test]
    fn type_errors_are_left_to_the_verifier() {
        // Ill-typed, but every name is known: the parse succeeds.
        let m =
            ok("func @f(%n: i64) -> f64 {\nentry:\n  %x = fadd %n, %n\n  %y = len %n\n  ret %x\n}");
        assert_eq!(func(&m, "f").placed_insts().count(), 2);
    }

    #[test]
    fn long_inputs_do_not_overflow_the_stack() {
        // A chain of blocks laid out in reverse: each instruction uses a value
        // defined further down the text, so typing walks the whole chain at once.
        let n = 20_000;
        let mut text = String::from("func @f(%x: f64) -> f64 {\nentry:\n    jump b0\n");
        for i in 0..n {
            text.push_str(&format!(
                "b{i}:\n    %v{i} = fadd %v{}, 1.0\n    jump b{}\n",
                i + 1,
                i + 1
            ));
        }
        text.push_str(&format!("b{n}:\n    %v{n} = fneg %x\n    ret %v0\n}}\n"));
        let m = ok(&text);
        let f = func(&m, "f");
        assert!(
            f.placed_insts()
                .all(|(_, i)| f.value_type(f.insts[i].results[0]) == Type::F64)
        );

        let mut text = String::from("func @g() {\nentry:\n    jump b\nb:\n");
        for i in 0..20_000 {
            text.push_str(&format!("    %p{i} = phi f64 [entry: 1.0, b: %p{i}]\n"));
        }
        text.push_str("    jump b\n}\n");
        let m = ok(&text);
        let f = func(&m, "g");
        let phis = &f.blocks[f.layout[1]].phis;
        assert_eq!(phis.len(), 20_000);
        assert!(phis.iter().all(|p| p.incoming[1].1 == p.value));

        let nested = "[".repeat(100_000);
        assert!(parse(&format!("extern @f({nested})")).is_err());
        assert!(parse(&"func @f() { entry: ".repeat(10_000)).is_err());
    }
}
