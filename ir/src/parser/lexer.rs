//! The lexer: IR text to tokens, each with the line and column where it starts.
//!
//! The text format is not line-based: whitespace and newlines only separate tokens, and
//! `;` starts a comment to the end of the line. The lexer knows the shapes of names and
//! literals but no keywords: `func`, op names, types, `inf`, `true` and block labels are
//! all [`Tok::Ident`], and the parser decides what an identifier means where it stands
//! (a block may be labelled `ret` or `inf`). Integers are kept as text, because their
//! type, and so how to read them, comes from context; hex literals are read into their
//! 64-bit pattern here, so "too large for 64 bits" is reported once, where it is written.
//!
//! A string literal (the message of `trap_if`) is `"` and characters up to the next
//! unescaped `"` on the same line. Its escapes are `\"`, `\\`, `\n`, `\t` and
//! `\u{HEX}` (one to six hex digits naming a Unicode scalar value); a control
//! character may not stand in it raw. The token keeps the text between the quotes as
//! written, checked here; [`unescape`] reads it. An unterminated string is reported
//! at its opening quote, a bad escape at its backslash, a raw control character where
//! it stands.
//!
//! A malformed token is reported into the error list and becomes a [`Tok::Error`];
//! the parser treats that token as "already reported" and never reports it again.
//! The token list always ends with one [`Tok::Eof`].

use crate::function::Pos;
use crate::parser::ParseError;
use crate::write::string_literal;

/// One token. Names are without their sigil; literals keep their text as written.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub(crate) enum Tok<'a> {
    /// A bare name: `func`, `fadd`, `f64`, `entry`, `inf`, `true`, ...
    Ident(&'a str),
    /// `%name`.
    Value(&'a str),
    /// `@name`.
    Func(&'a str),
    /// A decimal integer, with its sign: `42`, `-7`.
    Int(&'a str),
    /// A hex integer and its bit pattern: `0x5FE6EB50C7B537A9`.
    Hex(&'a str, u64),
    /// A float literal as written: `1.0`, `-2.5e-3`, `-inf` (`inf` and `nan` alone
    /// are identifiers).
    Float(&'a str),
    /// `(`
    LParen,
    /// `)`
    RParen,
    /// `[`
    LBracket,
    /// `]`
    RBracket,
    /// `{`
    LBrace,
    /// `}`
    RBrace,
    /// `,`
    Comma,
    /// `:`
    Colon,
    /// `=`
    Eq,
    /// `->`
    Arrow,
    /// A string literal: the text between the quotes, escapes as written (and valid).
    Str(&'a str),
    /// A malformed token, already reported.
    Error,
    /// The end of the text.
    Eof,
}

impl Tok<'_> {
    /// The token as an error message names it: `` `%x` ``, `` `,` ``, `end of input`.
    pub(crate) fn describe(&self) -> String {
        let text = match *self {
            Tok::Ident(s) | Tok::Int(s) | Tok::Hex(s, _) | Tok::Float(s) => s.to_string(),
            Tok::Value(s) => format!("%{s}"),
            Tok::Func(s) => format!("@{s}"),
            Tok::LParen => "(".into(),
            Tok::RParen => ")".into(),
            Tok::LBracket => "[".into(),
            Tok::RBracket => "]".into(),
            Tok::LBrace => "{".into(),
            Tok::RBrace => "}".into(),
            Tok::Comma => ",".into(),
            Tok::Colon => ":".into(),
            Tok::Eq => "=".into(),
            Tok::Arrow => "->".into(),
            Tok::Str(s) => format!("\"{s}\""),
            Tok::Error => return "an invalid token".into(),
            Tok::Eof => return "end of input".into(),
        };
        format!("`{text}`")
    }
}

/// A token and where it starts.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub(crate) struct Token<'a> {
    /// The token.
    pub tok: Tok<'a>,
    /// Line and column (in characters) of its first character.
    pub pos: Pos,
}

/// Whether `c` may continue a name: `[A-Za-z0-9_.]`.
pub(crate) fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '.'
}

/// Whether `s` is a name by the lexical rules: `[A-Za-z_][A-Za-z0-9_.]*`, or digits only.
pub fn is_valid_name(s: &str) -> bool {
    let mut chars = s.chars();
    match chars.next() {
        Some(c) if c.is_ascii_alphabetic() || c == '_' => chars.all(is_name_char),
        Some(c) if c.is_ascii_digit() => chars.all(|c| c.is_ascii_digit()),
        _ => false,
    }
}

/// A position in the text that knows its line and column.
struct Cursor<'a> {
    src: &'a str,
    off: usize,
    line: u32,
    col: u32,
}

impl<'a> Cursor<'a> {
    fn pos(&self) -> Pos {
        Pos::new(self.line, self.col)
    }

    fn peek(&self) -> Option<char> {
        self.src[self.off..].chars().next()
    }

    fn peek_nth(&self, n: usize) -> Option<char> {
        self.src[self.off..].chars().nth(n)
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.peek()?;
        self.off += c.len_utf8();
        if c == '\n' {
            self.line = self.line.saturating_add(1);
            self.col = 1;
        } else {
            self.col = self.col.saturating_add(1);
        }
        Some(c)
    }

    /// Consumes characters while `pred` holds; returns the text consumed.
    fn eat_while(&mut self, pred: impl Fn(char) -> bool) -> &'a str {
        let start = self.off;
        while self.peek().is_some_and(&pred) {
            self.bump();
        }
        &self.src[start..self.off]
    }
}

/// Splits `src` into tokens, reporting malformed ones into `errors`. Never fails: the
/// result always ends with [`Tok::Eof`].
#[cfg(test)]
pub(crate) fn lex<'a>(src: &'a str, errors: &mut Vec<ParseError>) -> Vec<Token<'a>> {
    let mut lexer = Lexer::new(src);
    let mut toks = Vec::new();
    loop {
        let t = lexer.next_token(errors);
        toks.push(t);
        if t.tok == Tok::Eof {
            return toks;
        }
    }
}

/// The tokens of a text, one at a time: the parser asks for them as it goes, so a
/// text it stops reading early (a function over the size limit) is not lexed to
/// its end.
pub(crate) struct Lexer<'a> {
    cur: Cursor<'a>,
}

impl<'a> Lexer<'a> {
    pub(crate) fn new(src: &'a str) -> Lexer<'a> {
        Lexer {
            cur: Cursor {
                src,
                off: 0,
                line: 1,
                col: 1,
            },
        }
    }

    /// The next token, reporting a malformed one into `errors`; [`Tok::Eof`] at the
    /// end, and again after it.
    pub(crate) fn next_token(&mut self, errors: &mut Vec<ParseError>) -> Token<'a> {
        let cur = &mut self.cur;
        let mut error = |pos: Pos, message: String| {
            errors.push(ParseError { pos, message });
            Tok::Error
        };
        while let Some(c) = cur.peek() {
            let pos = cur.pos();
            let tok = match c {
                c if c.is_ascii_whitespace() => {
                    cur.bump();
                    continue;
                }
                ';' => {
                    cur.eat_while(|c| c != '\n');
                    continue;
                }
                '%' | '@' => {
                    cur.bump();
                    let name = cur.eat_while(is_name_char);
                    if name.is_empty() {
                        error(pos, format!("expected a name after `{c}`"))
                    } else if !is_valid_name(name) {
                        error(
                            pos,
                            format!(
                                "invalid name {c}{name}: a name is letters, digits, `_` and `.` \
                             starting with a letter or `_`, or digits only"
                            ),
                        )
                    } else if c == '%' {
                        Tok::Value(name)
                    } else {
                        Tok::Func(name)
                    }
                }
                c if c.is_ascii_alphabetic() || c == '_' => Tok::Ident(cur.eat_while(is_name_char)),
                '-' if cur.peek_nth(1) == Some('>') => {
                    cur.bump();
                    cur.bump();
                    Tok::Arrow
                }
                '-' if cur.src[cur.off..].starts_with("-inf")
                    && !cur.peek_nth(4).is_some_and(is_name_char) =>
                {
                    let start = cur.off;
                    for _ in 0..4 {
                        cur.bump();
                    }
                    Tok::Float(&cur.src[start..cur.off])
                }
                c if c.is_ascii_digit()
                    || (c == '-' && cur.peek_nth(1).is_some_and(|d| d.is_ascii_digit())) =>
                {
                    let text = number_text(cur);
                    match classify_number(text) {
                        Ok(tok) => tok,
                        Err(message) => error(pos, message),
                    }
                }
                '"' => string(cur, &mut |pos, message| {
                    error(pos, message);
                }),
                '(' | ')' | '[' | ']' | '{' | '}' | ',' | ':' | '=' => {
                    cur.bump();
                    match c {
                        '(' => Tok::LParen,
                        ')' => Tok::RParen,
                        '[' => Tok::LBracket,
                        ']' => Tok::RBracket,
                        '{' => Tok::LBrace,
                        '}' => Tok::RBrace,
                        ',' => Tok::Comma,
                        ':' => Tok::Colon,
                        _ => Tok::Eq,
                    }
                }
                c => {
                    cur.bump();
                    error(pos, format!("unexpected character `{}`", c.escape_debug()))
                }
            };
            return Token { tok, pos };
        }
        Token {
            tok: Tok::Eof,
            pos: cur.pos(),
        }
    }
}

/// Consumes a string literal, the cursor at its opening quote: up to and including
/// the closing quote, or up to the end of the line if there is none. Reports the
/// first bad escape or raw control character, and a missing closing quote.
fn string<'a>(cur: &mut Cursor<'a>, report: &mut dyn FnMut(Pos, String)) -> Tok<'a> {
    let open = cur.pos();
    cur.bump();
    let start = cur.off;
    let mut ok = true;
    loop {
        let pos = cur.pos();
        match cur.peek() {
            None | Some('\n') => {
                report(
                    open,
                    "unterminated string literal (it must end with `\"` on its line)".into(),
                );
                return Tok::Error;
            }
            Some('"') => {
                let text = &cur.src[start..cur.off];
                cur.bump();
                return if ok { Tok::Str(text) } else { Tok::Error };
            }
            Some('\\') => {
                let (res, len) = escape(&cur.src[cur.off..]);
                let end = cur.off + len;
                while cur.off < end && cur.bump().is_some() {}
                if let Err(message) = res
                    && ok
                {
                    report(pos, message);
                    ok = false;
                }
            }
            Some(c) => {
                cur.bump();
                if c.is_control() && ok {
                    let lit = string_literal(&c.to_string());
                    let escaped = lit.trim_matches('"');
                    report(
                        pos,
                        format!(
                            "raw control character U+{:04X} in a string literal: write it as `{escaped}`",
                            c as u32,
                        ),
                    );
                    ok = false;
                }
            }
        }
    }
}

/// The escape that starts `s` (at its `\`): the character it stands for, or why it
/// is not an escape; and how many bytes it takes (on an error, the bytes to skip,
/// never a line break or a closing quote that could end the string).
fn escape(s: &str) -> (Result<char, String>, usize) {
    let bad = |text: &str| {
        format!(
            "invalid escape `{text}` in a string literal (the escapes are `\\\"`, `\\\\`, \
             `\\n`, `\\t` and `\\u{{HEX}}`)"
        )
    };
    let rest = s.strip_prefix('\\').unwrap_or(s);
    let Some(c) = rest.chars().next() else {
        return (Err("a string literal ends with a lone `\\`".into()), 1);
    };
    let simple = match c {
        '"' => Some('"'),
        '\\' => Some('\\'),
        'n' => Some('\n'),
        't' => Some('\t'),
        _ => None,
    };
    if let Some(ch) = simple {
        return (Ok(ch), 2);
    }
    match c {
        'u' => {
            let after = &rest[1..];
            let Some(body) = after.strip_prefix('{') else {
                return (Err(bad("\\u")), 2);
            };
            let digits = body.bytes().take_while(u8::is_ascii_hexdigit).count();
            let closed = body[digits..].starts_with('}');
            let len = 3 + digits + usize::from(closed);
            let text = &s[..len];
            if digits == 0 || digits > 6 || !closed {
                return (Err(bad(text)), len);
            }
            match u32::from_str_radix(&body[..digits], 16)
                .ok()
                .and_then(char::from_u32)
            {
                Some(ch) => (Ok(ch), len),
                None => (
                    Err(format!(
                        "invalid escape `{text}` in a string literal: not a Unicode scalar value"
                    )),
                    len,
                ),
            }
        }
        '\n' | '\r' => (
            Err("a `\\` at the end of a line in a string literal".into()),
            1,
        ),
        c => (
            Err(bad(&format!("\\{}", c.escape_debug()))),
            1 + c.len_utf8(),
        ),
    }
}

/// The text a string literal stands for, from the text between its quotes (as the
/// lexer checked it; an escape that is not one is kept as written).
pub(crate) fn unescape(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    let mut rest = raw;
    while let Some(i) = rest.find('\\') {
        out.push_str(&rest[..i]);
        let (res, len) = escape(&rest[i..]);
        // `escape` ends on a character boundary; stay safe if it did not.
        let end = (i + len.max(1)..=rest.len())
            .find(|&e| rest.is_char_boundary(e))
            .unwrap_or(rest.len());
        match res {
            Ok(c) => out.push(c),
            Err(_) => out.push_str(&rest[i..end]),
        }
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

/// Consumes the text of a number: an optional `-`, then name characters, and a sign
/// right after an exponent's `e` (not in hex). Whether the text is a well-formed
/// number is [`classify_number`]'s question.
fn number_text<'a>(cur: &mut Cursor<'a>) -> &'a str {
    let start = cur.off;
    if cur.peek() == Some('-') {
        cur.bump();
    }
    let digits_start = cur.off;
    let mut prev = None;
    while let Some(c) = cur.peek() {
        let hex = cur.src[digits_start..].starts_with("0x");
        let exp_sign = (c == '+' || c == '-') && matches!(prev, Some('e' | 'E')) && !hex;
        if !(is_name_char(c) || exp_sign) {
            break;
        }
        prev = Some(c);
        cur.bump();
    }
    &cur.src[start..cur.off]
}

/// The token for the text of a number, or why it is malformed.
fn classify_number(text: &str) -> Result<Tok<'_>, String> {
    let malformed = || format!("malformed number `{text}`");
    let body = text.strip_prefix('-').unwrap_or(text);
    if let Some(hex) = body.strip_prefix("0x") {
        if body.len() != text.len() || hex.is_empty() || !hex.bytes().all(|b| b.is_ascii_hexdigit())
        {
            return Err(malformed());
        }
        return match u64::from_str_radix(hex, 16) {
            Ok(bits) => Ok(Tok::Hex(text, bits)),
            Err(_) => Err(format!("hex literal `{text}` is too large for 64 bits")),
        };
    }
    let b = body.as_bytes();
    let digits = |i: usize| b[i..].iter().take_while(|c| c.is_ascii_digit()).count();
    let mut i = digits(0);
    if i == 0 {
        return Err(malformed());
    }
    let mut float = false;
    if b.get(i) == Some(&b'.') {
        let n = digits(i + 1);
        if n == 0 {
            return Err(malformed());
        }
        i += 1 + n;
        float = true;
    }
    if matches!(b.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(b.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        let n = digits(i);
        if n == 0 {
            return Err(malformed());
        }
        i += n;
        float = true;
    }
    if i != b.len() {
        return Err(malformed());
    }
    Ok(if float {
        Tok::Float(text)
    } else {
        Tok::Int(text)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Lexes `text` and compares the tokens (as `line:col kind`) and errors with `expected`.
    #[track_caller]
    fn check(text: &str, expected: &str) {
        let mut errors = Vec::new();
        let toks = lex(text, &mut errors);
        let mut out = String::new();
        for t in &toks {
            out.push_str(&format!("{} {:?}\n", t.pos, t.tok));
        }
        for e in &errors {
            out.push_str(&format!("error {e}\n"));
        }
        assert_eq!(out.trim_end(), expected.trim(), "\nlexing {text:?}");
    }

    #[test]
    fn names_and_sigils() {
        check(
            "%x @f entry %0 %a.1 _b",
            r#"
1:1 Value("x")
1:4 Func("f")
1:7 Ident("entry")
1:13 Value("0")
1:16 Value("a.1")
1:21 Ident("_b")
1:23 Eof"#,
        );
    }

    #[test]
    fn punctuation_and_arrow() {
        check(
            "(){}[],:=->",
            r#"
1:1 LParen
1:2 RParen
1:3 LBrace
1:4 RBrace
1:5 LBracket
1:6 RBracket
1:7 Comma
1:8 Colon
1:9 Eq
1:10 Arrow
1:12 Eof"#,
        );
    }

    #[test]
    fn numbers() {
        check(
            "42 -7 0x5FE6EB50C7B537A9 1.0 -2.5e-3 1e300 -inf inf nan",
            r#"
1:1 Int("42")
1:4 Int("-7")
1:7 Hex("0x5FE6EB50C7B537A9", 6910469410427058089)
1:26 Float("1.0")
1:30 Float("-2.5e-3")
1:38 Float("1e300")
1:44 Float("-inf")
1:49 Ident("inf")
1:53 Ident("nan")
1:56 Eof"#,
        );
    }

    #[test]
    fn malformed_numbers() {
        check(
            "1.2.3 12abc 1. 1e 0x 0xFFFFFFFFFFFFFFFFF -0x1",
            r#"
1:1 Error
1:7 Error
1:13 Error
1:16 Error
1:19 Error
1:22 Error
1:42 Error
1:46 Eof
error 1:1: malformed number `1.2.3`
error 1:7: malformed number `12abc`
error 1:13: malformed number `1.`
error 1:16: malformed number `1e`
error 1:19: malformed number `0x`
error 1:22: hex literal `0xFFFFFFFFFFFFFFFFF` is too large for 64 bits
error 1:42: malformed number `-0x1`"#,
        );
    }

    #[test]
    fn comments_newlines_and_columns_in_characters() {
        check(
            "; comment\n  é %x ; more\n\t%y",
            r#"
2:3 Error
2:5 Value("x")
3:2 Value("y")
3:4 Eof
error 2:3: unexpected character `é`"#,
        );
    }

    #[test]
    fn bad_names_and_lone_sigils() {
        check(
            "%1a @ % - $",
            r#"
1:1 Error
1:5 Error
1:7 Error
1:9 Error
1:11 Error
1:12 Eof
error 1:1: invalid name %1a: a name is letters, digits, `_` and `.` starting with a letter or `_`, or digits only
error 1:5: expected a name after `@`
error 1:7: expected a name after `%`
error 1:9: unexpected character `-`
error 1:11: unexpected character `$`"#,
        );
    }

    #[test]
    fn strings_keep_their_text_as_written() {
        check(
            r#"trap_if %c, "a \"b\" \\ \n\t \u{1} \u{7F} \u{10FFFF} é""#,
            r#"
1:1 Ident("trap_if")
1:9 Value("c")
1:11 Comma
1:13 Str("a \\\"b\\\" \\\\ \\n\\t \\u{1} \\u{7F} \\u{10FFFF} é")
1:56 Eof"#,
        );
        check(r#"""x"#, "1:1 Str(\"\")\n1:3 Ident(\"x\")\n1:4 Eof");
    }

    #[test]
    fn strings_unescape_to_their_text_and_escape_back() {
        let raw = r#"a \"b\" \\ \n\t \u{1} \u{7F} \u{10FFFF} \u{e9}é"#;
        let text = unescape(raw);
        assert_eq!(text, "a \"b\" \\ \n\t \u{1} \u{7f} \u{10ffff} éé");
        let printed = string_literal(&text);
        assert_eq!(
            printed,
            "\"a \\\"b\\\" \\\\ \\n\\t \\u{1} \\u{7f} \u{10ffff} éé\""
        );
        assert_eq!(unescape(&printed[1..printed.len() - 1]), text);
        // Never a panic, even on text the lexer refuses.
        assert_eq!(unescape(r"\q\u{d800}\"), r"\q\u{d800}\");
        assert_eq!(unescape("\\é"), "\\é");
    }

    #[test]
    fn malformed_strings() {
        check(
            "\"abc\n\"a\\qb\" \"\\u{110000}\" \"\\u{}\" \"\\u{1234567}\" \"\\u12\"\n\"a\tb\" \"x\\\n",
            r#"
1:1 Error
2:1 Error
2:8 Error
2:21 Error
2:28 Error
2:42 Error
3:1 Error
3:7 Error
4:1 Eof
error 1:1: unterminated string literal (it must end with `"` on its line)
error 2:3: invalid escape `\q` in a string literal (the escapes are `\"`, `\\`, `\n`, `\t` and `\u{HEX}`)
error 2:9: invalid escape `\u{110000}` in a string literal: not a Unicode scalar value
error 2:22: invalid escape `\u{}` in a string literal (the escapes are `\"`, `\\`, `\n`, `\t` and `\u{HEX}`)
error 2:29: invalid escape `\u{1234567}` in a string literal (the escapes are `\"`, `\\`, `\n`, `\t` and `\u{HEX}`)
error 2:43: invalid escape `\u` in a string literal (the escapes are `\"`, `\\`, `\n`, `\t` and `\u{HEX}`)
error 3:3: raw control character U+0009 in a string literal: write it as `\t`
error 3:9: a `\` at the end of a line in a string literal
error 3:7: unterminated string literal (it must end with `"` on its line)"#,
        );
        let mut errors = Vec::new();
        lex("\"x\\", &mut errors);
        assert_eq!(
            errors.iter().map(ToString::to_string).collect::<Vec<_>>(),
            [
                "1:3: a string literal ends with a lone `\\`",
                "1:1: unterminated string literal (it must end with `\"` on its line)"
            ]
        );
    }

    #[test]
    fn valid_names() {
        for ok in ["a", "_", "a.b", "x1", "0", "123", "A_.9"] {
            assert!(is_valid_name(ok), "{ok}");
        }
        for bad in ["", "1a", ".a", "a b", "a-b", "é", "1.0"] {
            assert!(!is_valid_name(bad), "{bad}");
        }
    }
}
