//! The grammar: tokens to the [syntax tree](super::ast), reporting every syntax error.
//!
//! The parser is a hand-written recursive-descent parser whose recursion depth is
//! bounded by the grammar, not by the input: items, blocks and statements are read by
//! loops, and nothing nests (types and return lists are one level deep), so no input
//! can overflow the stack. Every op's syntax is fixed by its [`Shape`], so the parser
//! reads exactly as many operands as the op takes and statements need no line breaks.
//!
//! Errors are reported where they are found and the parser recovers:
//!
//! - inside a function body, it skips to the start of the next statement (a block
//!   label, an op or terminator keyword, `%a, %b =`), or to the closing `}`;
//! - elsewhere, it skips to the next item (`func @`, `extern @`, ...).
//!
//! A malformed token ([`Tok::Error`]) was reported by the lexer; the parser recovers
//! from it without reporting it again. Unknown types and predicates are reported and
//! replaced by a placeholder, without losing the rest of the statement.

use crate::function::Pos;
use crate::ops::{CmpPred, Opcode, Shape};
use crate::parser::ParseError;
use crate::parser::ast::{
    BlockAst, FuncItem, ImmAst, InstAst, InstKind, Item, Lit, LitKind, Name, Operand, PhiAst,
    TermAst, TermKind,
};
use crate::parser::lexer::{Lexer, Tok, Token};
use crate::types::{Elem, Type};

/// An error was reported; the caller recovers.
struct Fail;

type PResult<T> = Result<T, Fail>;

/// A function's parameters (names and types) and result types.
type Header<'a> = (Vec<(Name<'a>, Type)>, Vec<Type>);

/// A statement of a block.
enum Stmt<'a> {
    Phi(PhiAst<'a>),
    Inst(InstAst<'a>),
    Term(TermAst<'a>),
}

/// The item keywords; one followed by an `@name` starts an item.
fn is_item_keyword(s: &str) -> bool {
    matches!(s, "func" | "extern" | "overlay" | "vjp" | "jvp" | "nodiff")
}

/// The identifiers that are literals in operand position.
fn ident_literal(s: &str) -> Option<LitKind> {
    match s {
        "inf" | "nan" => Some(LitKind::Float),
        "true" => Some(LitKind::Bool(true)),
        "false" => Some(LitKind::Bool(false)),
        _ => None,
    }
}

/// The text of a block label, if `tok` can be one: a name, or digits only.
fn label_text<'a>(tok: Tok<'a>) -> Option<&'a str> {
    match tok {
        Tok::Ident(s) => Some(s),
        Tok::Int(s) if s.bytes().all(|b| b.is_ascii_digit()) => Some(s),
        _ => None,
    }
}

/// Parses the tokens of a whole text into items, reporting syntax errors into
/// `errors`; and whether a function of more than `max_insts` statements stopped it
/// (the items are then incomplete).
pub(crate) fn parse_items<'a>(
    lexer: Lexer<'a>,
    max_insts: usize,
    errors: &mut Vec<ParseError>,
) -> (Vec<Item<'a>>, bool) {
    let mut p = Parser {
        lexer,
        toks: Vec::new(),
        base: 0,
        i: 0,
        errors,
        max_insts,
        stopped: false,
    };
    let mut items = Vec::new();
    while !p.stopped {
        let start = p.i;
        let res = match p.peek() {
            Tok::Eof => break,
            Tok::Ident("func") => p.func_item(&mut items),
            Tok::Ident("extern") => p.extern_item(&mut items),
            Tok::Ident("overlay" | "vjp" | "jvp" | "nodiff") => p.decl_item(&mut items),
            _ => Err(p.expected("an item (`func`, `extern`, `overlay`, `vjp`, `jvp` or `nodiff`)")),
        };
        if res.is_err() && !p.stopped {
            p.recover_item(start);
        }
    }
    (items, p.stopped)
}

struct Parser<'a, 'e> {
    /// Where the tokens come from, as they are needed.
    lexer: Lexer<'a>,
    /// The tokens read and not yet forgotten, from token `base` on; once the
    /// lexer is done, the last is [`Tok::Eof`].
    toks: Vec<Token<'a>>,
    /// The index of `toks[0]` among all the tokens.
    base: usize,
    /// The next token; never past the `Eof`.
    i: usize,
    errors: &'e mut Vec<ParseError>,
    /// The most instructions a function body may have.
    max_insts: usize,
    /// Whether a function over `max_insts` stopped the parse (the rest of the text
    /// is not read).
    stopped: bool,
}

impl<'a> Parser<'a, '_> {
    /// Token `j`, reading tokens up to it; `None` past the `Eof`.
    fn tok(&mut self, j: usize) -> Option<Token<'a>> {
        let j = j.checked_sub(self.base)?;
        while self.toks.len() <= j && self.toks.last().is_none_or(|t| t.tok != Tok::Eof) {
            let t = self.lexer.next_token(self.errors);
            self.toks.push(t);
        }
        self.toks.get(j).copied()
    }

    /// Forgets the tokens before token `j` (nothing looks back past the statement
    /// being read), a few thousand at a time: the tokens kept are those of one
    /// statement, not of the whole text.
    fn forget_before(&mut self, j: usize) {
        let n = j
            .saturating_sub(self.base)
            .min(self.toks.len().saturating_sub(1));
        if n >= 4096 {
            self.toks.drain(..n);
            self.base += n;
        }
    }

    fn nth(&mut self, n: usize) -> Tok<'a> {
        self.tok(self.i + n).map_or(Tok::Eof, |t| t.tok)
    }

    fn peek(&mut self) -> Tok<'a> {
        self.nth(0)
    }

    fn pos(&mut self) -> Pos {
        self.tok(self.i)
            .or(self.toks.last().copied())
            .map_or(Pos::new(1, 1), |t| t.pos)
    }

    /// Consumes the next token (the `Eof` stays).
    fn bump(&mut self) -> Token<'a> {
        let t = Token {
            tok: self.peek(),
            pos: self.pos(),
        };
        if t.tok != Tok::Eof {
            self.i += 1;
        }
        t
    }

    fn error(&mut self, pos: Pos, message: String) {
        self.errors.push(ParseError { pos, message });
    }

    /// Reports "expected `what`, found ..." at the next token, unless that token is
    /// malformed (the lexer reported it).
    fn expected(&mut self, what: &str) -> Fail {
        let tok = self.peek();
        if tok != Tok::Error {
            let pos = self.pos();
            self.error(pos, format!("expected {what}, found {}", tok.describe()));
        }
        Fail
    }

    /// Consumes `tok` or reports that `what` was expected.
    fn expect(&mut self, tok: Tok<'_>, what: &str) -> PResult<Pos> {
        if self.peek() == tok {
            Ok(self.bump().pos)
        } else {
            Err(self.expected(what))
        }
    }

    /// Whether the next tokens start an item: an item keyword and a function name.
    fn at_item(&mut self) -> bool {
        matches!((self.peek(), self.nth(1)), (Tok::Ident(k), Tok::Func(_)) if is_item_keyword(k))
    }

    /// Skips to the next item, consuming at least one token.
    fn recover_item(&mut self, start: usize) {
        if self.i == start {
            self.bump();
        }
        while self.peek() != Tok::Eof && !self.at_item() {
            self.bump();
        }
    }

    // Items.

    fn func_name(&mut self) -> PResult<Name<'a>> {
        match self.peek() {
            Tok::Func(text) => Ok(Name {
                text,
                pos: self.bump().pos,
            }),
            _ => Err(self.expected("a function name (`@name`)")),
        }
    }

    /// `func @f(params) [-> results] { blocks }`.
    fn func_item(&mut self, items: &mut Vec<Item<'a>>) -> PResult<()> {
        let pos = self.bump().pos;
        let name = self.func_name()?;
        let header = self.func_header().and_then(|h| {
            self.expect(Tok::LBrace, "`{`")?;
            Ok(h)
        });
        let Ok((params, results)) = header else {
            items.push(Item::Broken { pos, name });
            return Err(Fail);
        };
        let blocks = self.body(name.text);
        items.push(Item::Func(FuncItem {
            pos,
            name,
            params,
            results,
            blocks,
        }));
        Ok(())
    }

    fn func_header(&mut self) -> PResult<Header<'a>> {
        self.expect(Tok::LParen, "`(`")?;
        let mut params = Vec::new();
        if self.peek() != Tok::RParen {
            loop {
                let name = match self.peek() {
                    Tok::Value(text) => Name {
                        text,
                        pos: self.bump().pos,
                    },
                    _ => return Err(self.expected("a parameter (`%name: type`)")),
                };
                self.expect(Tok::Colon, "`:`")?;
                params.push((name, self.ty()?));
                if self.peek() != Tok::Comma {
                    break;
                }
                self.bump();
            }
        }
        self.expect(Tok::RParen, "`,` or `)`")?;
        let results = self.results()?;
        Ok((params, results))
    }

    /// `[-> type]` or `[-> (type, ...)]`.
    fn results(&mut self) -> PResult<Vec<Type>> {
        if self.peek() != Tok::Arrow {
            return Ok(Vec::new());
        }
        self.bump();
        if self.peek() != Tok::LParen {
            return Ok(vec![self.ty()?]);
        }
        self.bump();
        let mut results = vec![self.ty()?];
        while self.peek() == Tok::Comma {
            self.bump();
            results.push(self.ty()?);
        }
        self.expect(Tok::RParen, "`,` or `)`")?;
        Ok(results)
    }

    /// `extern @f(types) [-> results]`.
    fn extern_item(&mut self, items: &mut Vec<Item<'a>>) -> PResult<()> {
        let pos = self.bump().pos;
        let name = self.func_name()?;
        let header = (|| {
            self.expect(Tok::LParen, "`(`")?;
            let mut params = Vec::new();
            if self.peek() != Tok::RParen {
                params.push(self.ty()?);
                while self.peek() == Tok::Comma {
                    self.bump();
                    params.push(self.ty()?);
                }
            }
            self.expect(Tok::RParen, "`,` or `)`")?;
            Ok((params, self.results()?))
        })();
        match header {
            Ok((params, results)) => {
                items.push(Item::Extern {
                    pos,
                    name,
                    params,
                    results,
                });
                Ok(())
            }
            Err(fail) => {
                items.push(Item::Broken { pos, name });
                Err(fail)
            }
        }
    }

    /// `overlay @f = @g`, `vjp @f = @g`, `vjp @f = @g, @h`, `jvp @f = @g`, `nodiff @f`.
    fn decl_item(&mut self, items: &mut Vec<Item<'a>>) -> PResult<()> {
        let kw = self.bump();
        let pos = kw.pos;
        let func = self.func_name()?;
        let item = match kw.tok {
            Tok::Ident("nodiff") => Item::Nodiff { pos, func },
            Tok::Ident("overlay") => {
                self.expect(Tok::Eq, "`=`")?;
                let with = self.func_name()?;
                Item::Overlay { pos, func, with }
            }
            Tok::Ident("jvp") => {
                self.expect(Tok::Eq, "`=`")?;
                let rule = self.func_name()?;
                Item::Jvp { pos, func, rule }
            }
            _ => {
                // `vjp @f = @rule`, or the pair `vjp @f = @forward, @pullback`.
                self.expect(Tok::Eq, "`=`")?;
                let first = self.func_name()?;
                if self.peek() == Tok::Comma {
                    self.bump();
                    let rule = self.func_name()?;
                    Item::Vjp {
                        pos,
                        func,
                        rule,
                        forward: Some(first),
                    }
                } else {
                    Item::Vjp {
                        pos,
                        func,
                        rule: first,
                        forward: None,
                    }
                }
            }
        };
        items.push(item);
        Ok(())
    }

    // Types.

    /// A type. An unknown type name is reported and read as `f64`, so the statement
    /// around it can still be read.
    fn ty(&mut self) -> PResult<Type> {
        match self.peek() {
            Tok::Ident("mut") => {
                self.bump();
                self.expect(Tok::LBracket, "`[`")?;
                let elem = self.elem()?;
                self.expect(Tok::RBracket, "`]`")?;
                Ok(Type::slice_mut(elem))
            }
            Tok::LBracket => {
                self.bump();
                let elem = self.elem()?;
                self.expect(Tok::RBracket, "`]`")?;
                Ok(Type::slice(elem))
            }
            Tok::Ident(name) => {
                let t = self.bump();
                Ok(match name {
                    "f64" => Type::F64,
                    "f32" => Type::F32,
                    "i64" => Type::I64,
                    "bool" => Type::Bool,
                    _ => {
                        self.error(t.pos, format!("unknown type `{name}`"));
                        Type::F64
                    }
                })
            }
            _ => Err(self.expected("a type")),
        }
    }

    /// The element type of a slice.
    fn elem(&mut self) -> PResult<Elem> {
        match self.peek() {
            Tok::Ident(name) => {
                let t = self.bump();
                Ok(match name {
                    "f64" => Elem::F64,
                    "f32" => Elem::F32,
                    "i64" => Elem::I64,
                    "bool" => {
                        self.error(t.pos, "slices hold f64, f32 or i64, not bool".into());
                        Elem::F64
                    }
                    _ => {
                        self.error(t.pos, format!("unknown type `{name}`"));
                        Elem::F64
                    }
                })
            }
            _ => Err(self.expected("an element type (`f64`, `f32` or `i64`)")),
        }
    }

    // Function bodies.

    /// The blocks of a function, up to and including the closing `}`.
    fn body(&mut self, func: &str) -> Vec<BlockAst<'a>> {
        let mut blocks: Vec<BlockAst<'a>> = Vec::new();
        // Statements so far, against `max_insts`.
        let mut count = 0usize;
        // Whether the statement after the current block's terminator was reported.
        let mut after_term_reported = false;
        // Whether the last statement could not be read (so a missing terminator is
        // not worth a second error).
        let mut last_broken = false;
        loop {
            let start = self.i;
            self.forget_before(start);
            match (self.peek(), self.nth(1)) {
                (Tok::RBrace, _) => {
                    if blocks.is_empty() {
                        self.expected("a block label");
                    }
                    self.end_block(&blocks, last_broken);
                    self.bump();
                    break;
                }
                (Tok::Eof, _) => {
                    self.end_block(&blocks, last_broken);
                    self.expected("`}`");
                    break;
                }
                _ if self.at_item() => {
                    self.end_block(&blocks, last_broken);
                    self.expected("`}`");
                    break;
                }
                (tok, Tok::Colon) if label_text(tok).is_some() => {
                    self.end_block(&blocks, last_broken);
                    let pos = self.bump().pos;
                    self.bump();
                    blocks.push(BlockAst {
                        label: label_text(tok).map(|text| Name { text, pos }),
                        phis: Vec::new(),
                        insts: Vec::new(),
                        term: None,
                    });
                    after_term_reported = false;
                    last_broken = false;
                }
                _ => {
                    match blocks.last() {
                        None => {
                            self.expected("a block label");
                            after_term_reported = true;
                            blocks.push(BlockAst {
                                label: None,
                                phis: Vec::new(),
                                insts: Vec::new(),
                                term: None,
                            });
                        }
                        Some(b) if b.term.is_some() && !after_term_reported => {
                            self.expected("a block label or `}`");
                            after_term_reported = true;
                        }
                        Some(_) => {}
                    }
                    count += 1;
                    if count > self.max_insts {
                        let pos = self.pos();
                        self.error(
                            pos,
                            format!(
                                "@{func} has more than {} instructions, the most a function \
                                 may have (ParseOptions::max_insts; the command line's \
                                 --max-insts); the text is not read further",
                                self.max_insts
                            ),
                        );
                        self.stopped = true;
                        break;
                    }
                    let mut names = Vec::new();
                    let stmt = self.statement(&mut names);
                    last_broken = stmt.is_err();
                    let Some(block) = blocks.last_mut() else {
                        break;
                    };
                    match stmt {
                        Ok(Stmt::Phi(phi)) => {
                            if !block.insts.is_empty() {
                                self.errors.push(ParseError {
                                    pos: phi.pos,
                                    message: format!(
                                        "phi %{} after an instruction (phis come first in a block)",
                                        phi.name.text
                                    ),
                                });
                            }
                            block.phis.push(phi);
                        }
                        Ok(Stmt::Inst(inst)) => block.insts.push(inst),
                        Ok(Stmt::Term(term)) => {
                            if block.term.is_none() {
                                block.term = Some(term);
                            }
                        }
                        Err(Fail) => {
                            let pos = self.tok(start).map_or(Pos::NONE, |t| t.pos);
                            block.insts.push(InstAst {
                                pos,
                                names,
                                kind: InstKind::Broken,
                            });
                            self.recover_stmt(start);
                        }
                    }
                }
            }
        }
        blocks
    }

    /// Reports a labelled last block without a terminator, at the token that came instead.
    fn end_block(&mut self, blocks: &[BlockAst<'a>], last_broken: bool) {
        if let Some(b) = blocks.last()
            && b.label.is_some()
            && b.term.is_none()
            && !last_broken
        {
            self.expected("a terminator (`jump`, `br` or `ret`)");
        }
    }

    /// Skips to the start of the next statement (or the end of the body), consuming at
    /// least one token. Inside brackets opened by the broken statement, only `}` and
    /// the start of an item stop it.
    fn recover_stmt(&mut self, start: usize) {
        let depth_of = |tok: Tok<'_>, depth: u32| match tok {
            Tok::LParen | Tok::LBracket => depth.saturating_add(1),
            Tok::RParen | Tok::RBracket => depth.saturating_sub(1),
            _ => depth,
        };
        let mut depth = 0;
        let (from, to) = (
            start.saturating_sub(self.base),
            self.i.saturating_sub(self.base),
        );
        for t in self.toks.get(from..to).unwrap_or_default() {
            depth = depth_of(t.tok, depth);
        }
        if self.i == start {
            depth = depth_of(self.bump().tok, depth);
        }
        loop {
            match (self.peek(), self.nth(1)) {
                (Tok::Eof | Tok::RBrace, _) => return,
                _ if self.at_item() => return,
                _ if depth > 0 => {}
                (tok, Tok::Colon) if label_text(tok).is_some() => return,
                (Tok::Ident(k), _)
                    if Opcode::from_name(k).is_some() || matches!(k, "jump" | "br" | "ret") =>
                {
                    return;
                }
                (Tok::Value(_), _) => {
                    // `%a, %b =` starts a statement; a list of values not followed by
                    // `=` does not, nor does any value in it: skip it all at once.
                    let mut j = self.i + 1;
                    while self.tok(j).map(|t| t.tok) == Some(Tok::Comma)
                        && matches!(self.tok(j + 1).map(|t| t.tok), Some(Tok::Value(_)))
                    {
                        j += 2;
                    }
                    if self.tok(j).map(|t| t.tok) == Some(Tok::Eq) {
                        return;
                    }
                    while self.i < j {
                        self.bump();
                    }
                    continue;
                }
                _ => {}
            }
            depth = depth_of(self.bump().tok, depth);
        }
    }

    /// One phi, instruction or terminator. The names defined are put in `names` as soon
    /// as the `=` after them is read, so a broken statement still defines them.
    fn statement(&mut self, names: &mut Vec<Name<'a>>) -> PResult<Stmt<'a>> {
        let start = self.pos();
        let mut defs = Vec::new();
        if let Tok::Value(_) = self.peek() {
            loop {
                match self.peek() {
                    Tok::Value(text) => defs.push(Name {
                        text,
                        pos: self.bump().pos,
                    }),
                    _ => return Err(self.expected("a value name")),
                }
                match self.peek() {
                    Tok::Comma => {
                        self.bump();
                    }
                    Tok::Eq => {
                        self.bump();
                        break;
                    }
                    _ => return Err(self.expected("`,` or `=`")),
                }
            }
            *names = defs;
        }
        match self.peek() {
            Tok::Ident("phi") => {
                let pos = self.pos();
                match names.as_slice() {
                    [name] => {
                        let name = *name;
                        self.bump();
                        self.phi(name, pos).map(Stmt::Phi)
                    }
                    [] => {
                        self.error(pos, "a phi needs a name: `%x = phi T [...]`".into());
                        Err(Fail)
                    }
                    many => {
                        let n = many.len();
                        self.error(pos, format!("a phi defines one value, found {n} names"));
                        Err(Fail)
                    }
                }
            }
            Tok::Ident(kw @ ("jump" | "br" | "ret")) if names.is_empty() => {
                let pos = self.bump().pos;
                let kind = match kw {
                    "jump" => TermKind::Jump(self.label()?),
                    "br" => {
                        let cond = self.operand()?;
                        self.expect(Tok::Comma, "`,`")?;
                        let then_dest = self.label()?;
                        self.expect(Tok::Comma, "`,`")?;
                        TermKind::Br(cond, then_dest, self.label()?)
                    }
                    _ => {
                        let mut vals = Vec::new();
                        if self.at_ret_operand() {
                            vals.push(self.operand()?);
                            while self.peek() == Tok::Comma {
                                self.bump();
                                vals.push(self.operand()?);
                            }
                        }
                        TermKind::Ret(vals)
                    }
                };
                Ok(Stmt::Term(TermAst { pos, kind }))
            }
            Tok::Ident(op_name) => {
                let op_pos = self.bump().pos;
                let Some(op) = Opcode::from_name(op_name) else {
                    self.error(op_pos, format!("unknown op `{op_name}`"));
                    return Err(Fail);
                };
                let (imm, args) = self.op_operands(op)?;
                Ok(Stmt::Inst(InstAst {
                    pos: start,
                    names: names.clone(),
                    kind: InstKind::Op { op, imm, args },
                }))
            }
            _ if names.is_empty() => Err(self.expected("a statement")),
            _ => Err(self.expected("an op")),
        }
    }

    /// `phi T [label: operand, ...]`, after `phi` (which stands at `pos`).
    fn phi(&mut self, name: Name<'a>, pos: Pos) -> PResult<PhiAst<'a>> {
        let ty = self.ty()?;
        self.expect(Tok::LBracket, "`[`")?;
        let mut incoming = Vec::new();
        loop {
            let label = self.label()?;
            self.expect(Tok::Colon, "`:`")?;
            incoming.push((label, self.operand()?));
            match self.peek() {
                Tok::Comma => {
                    self.bump();
                }
                Tok::RBracket => {
                    self.bump();
                    break;
                }
                _ => return Err(self.expected("`,` or `]`")),
            }
        }
        Ok(PhiAst {
            name,
            pos,
            ty,
            incoming,
        })
    }

    /// The immediate and operands of `op`, written as its shape says.
    fn op_operands(&mut self, op: Opcode) -> PResult<(ImmAst<'a>, Vec<Operand<'a>>)> {
        Ok(match op.shape() {
            Shape::FloatCmp | Shape::IntCmp => {
                let pred = self.pred()?;
                (ImmAst::Cmp(pred), self.operands(2)?)
            }
            Shape::Cast | Shape::Bitcast => {
                let ty = self.ty()?;
                (ImmAst::Type(ty), vec![self.operand()?])
            }
            Shape::Const => {
                let ty = self.ty()?;
                let lit = match self.operand()? {
                    Operand::Lit(lit) => lit,
                    Operand::Value(name) => {
                        self.error(
                            name.pos,
                            format!("expected a literal, found `%{}`", name.text),
                        );
                        return Err(Fail);
                    }
                };
                (ImmAst::Const(ty, lit), Vec::new())
            }
            Shape::Load | Shape::Store => {
                let s = self.operand()?;
                self.expect(Tok::LBracket, "`[`")?;
                let i = self.operand()?;
                self.expect(Tok::RBracket, "`]`")?;
                if op.shape() == Shape::Load {
                    (ImmAst::None, vec![s, i])
                } else {
                    self.expect(Tok::Comma, "`,`")?;
                    (ImmAst::None, vec![s, i, self.operand()?])
                }
            }
            Shape::Alloc | Shape::TapeAlloc | Shape::TapeView => {
                let ty = self.ty()?;
                self.expect(Tok::Comma, "`,`")?;
                (ImmAst::Type(ty), vec![self.operand()?])
            }
            Shape::Pop => (ImmAst::Type(self.ty()?), Vec::new()),
            Shape::TrapIf => {
                let cond = self.operand()?;
                self.expect(Tok::Comma, "`,`")?;
                let Tok::Str(text) = self.peek() else {
                    return Err(self.expected("a message (a string literal `\"...\"`)"));
                };
                self.bump();
                (ImmAst::Msg(text), vec![cond])
            }
            Shape::Call => {
                let callee = self.func_name()?;
                self.expect(Tok::LParen, "`(`")?;
                let mut args = Vec::new();
                if self.peek() != Tok::RParen {
                    args.push(self.operand()?);
                    while self.peek() == Tok::Comma {
                        self.bump();
                        args.push(self.operand()?);
                    }
                }
                self.expect(Tok::RParen, "`,` or `)`")?;
                // `call @g(..) checkpoint`: no op is named `checkpoint`, so the
                // word cannot start the next statement.
                let checkpoint = self.peek() == Tok::Ident("checkpoint");
                if checkpoint {
                    self.bump();
                }
                (ImmAst::Func(callee, checkpoint), args)
            }
            _ => (ImmAst::None, self.operands(op.arity().unwrap_or(0))?),
        })
    }

    /// `n` operands separated by commas.
    fn operands(&mut self, n: usize) -> PResult<Vec<Operand<'a>>> {
        let mut args = Vec::with_capacity(n);
        for k in 0..n {
            if k > 0 {
                self.expect(Tok::Comma, "`,`")?;
            }
            args.push(self.operand()?);
        }
        Ok(args)
    }

    /// A comparison predicate. An unknown one is reported and read as `eq`.
    fn pred(&mut self) -> PResult<CmpPred> {
        match self.peek() {
            Tok::Ident(name) => {
                let pos = self.bump().pos;
                Ok(CmpPred::from_name(name).unwrap_or_else(|| {
                    self.error(
                        pos,
                        format!("unknown predicate `{name}` (expected eq, ne, lt, le, gt or ge)"),
                    );
                    CmpPred::Eq
                }))
            }
            _ => Err(self.expected("a predicate (`eq`, `ne`, `lt`, `le`, `gt` or `ge`)")),
        }
    }

    /// A value name or a literal.
    fn operand(&mut self) -> PResult<Operand<'a>> {
        let pos = self.pos();
        let kind = match self.peek() {
            Tok::Value(text) => {
                self.bump();
                return Ok(Operand::Value(Name { text, pos }));
            }
            Tok::Int(_) => LitKind::Int,
            Tok::Hex(_, bits) => LitKind::Hex(bits),
            Tok::Float(_) => LitKind::Float,
            Tok::Ident(s) => match ident_literal(s) {
                Some(kind) => kind,
                None => return Err(self.expected("an operand (`%name` or a literal)")),
            },
            _ => return Err(self.expected("an operand (`%name` or a literal)")),
        };
        let text = match self.bump().tok {
            Tok::Int(s) | Tok::Hex(s, _) | Tok::Float(s) | Tok::Ident(s) => s,
            _ => "",
        };
        Ok(Operand::Lit(Lit { kind, text, pos }))
    }

    /// Whether an operand of `ret` follows: `ret` may end a block before a label such
    /// as `0:` or `true:`, which look like literals, and `%x =` after it (an error) is
    /// not read as `ret %x`.
    fn at_ret_operand(&mut self) -> bool {
        match self.peek() {
            Tok::Value(_) => self.nth(1) != Tok::Eq,
            Tok::Hex(..) | Tok::Float(_) => true,
            Tok::Int(_) => self.nth(1) != Tok::Colon,
            Tok::Ident(s) => ident_literal(s).is_some() && self.nth(1) != Tok::Colon,
            _ => false,
        }
    }

    /// A block label used by `jump`, `br` or a phi.
    fn label(&mut self) -> PResult<Name<'a>> {
        match label_text(self.peek()) {
            Some(text) => Ok(Name {
                text,
                pos: self.bump().pos,
            }),
            None => Err(self.expected("a block label")),
        }
    }
}
