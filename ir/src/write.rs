//! The printer: IR to text, in the format of `docs/ir-text.md`.
//!
//! It is the [parser](crate::parser)'s other half: for every valid text `t`,
//! `print(parse(t))` is a fixed point. `Display` on [`Module`] prints a whole module;
//! the line functions ([`inst_line`], [`phi_line`], [`term_line`], [`operand`]) print
//! one statement, for error messages that quote the offending line.
//!
//! Layout: functions and externs in [`FuncId`] order, then the `overlay`, `vjp`,
//! `jvp` and `nodiff` declarations in their order, one blank line between items;
//! block labels at column 0, statements indented by four spaces. A function still
//! [declared](crate::Body::Declared) without a body cannot be written in the text
//! format; it prints as an `extern` line under a `; declared, not defined` comment.
//!
//! Names come from [`Names`]: a value or block prints with its own name when it is a
//! valid name not taken by an earlier one, and with a generated name otherwise.
//! Constants print inline as their literals. Printing depends on nothing but the
//! module, so one module always prints byte-identically.
//!
//! The printer also shows broken functions (the verifier quotes their lines), so it
//! never panics: a reference to an entity that does not exist prints as
//! `%<invalid v7>`, one to an entity that exists but has no place in the function (a
//! removed instruction's result, a block not in the layout) as `%<unplaced x>` (its
//! own name, or its ID `v7` if it has none), a message not in the function's arena as
//! `<invalid msg3>`, and a missing operand as `<missing>`.
//!
//! A message (of `trap_if`) prints as a string literal ([`string_literal`]).

use core::fmt::{self, Write as _};

use cranelift_entity::{EntityRef, SecondaryMap};
use hashbrown::{HashMap, HashSet};

use crate::entities::{Block, FuncId, Inst, Value};
use crate::function::{Function, Phi, Terminator, ValueDef};
use crate::module::{Body, Decl, Module};
use crate::ops::{Imm, Shape};
use crate::parser::is_valid_name;
use crate::types::Type;

/// The names a function's values and blocks print with: their own names where they
/// have unique ones, generated ones otherwise. Computed once per function.
///
/// Values are named in definition order: parameters, then each block of the layout,
/// its phis, then its instructions' results. A value keeps its own name when the name
/// is valid (see [`is_valid_name`]) and no earlier value took it; a repeated name
/// `x` becomes `x.1`, `x.2`, ..., an unnamed value (or one with an invalid name)
/// the next free number `0`, `1`, .... Blocks are named the same way in layout
/// order, generated labels being `block0`, `block1`, .... A generated name never
/// collides with any name the function carries, used or not.
///
/// Every value of the function's arena has an entry: a constant's is its literal, and
/// a value with no place in the function is `<unplaced x>` (its own name, or its ID).
pub struct Names {
    values: SecondaryMap<Value, String>,
    blocks: SecondaryMap<Block, String>,
    /// How many values and blocks the function had: IDs beyond are invalid.
    n_values: usize,
    n_blocks: usize,
}

/// Hands out names, each at most once, avoiding every name in `taken`.
struct NameGen<'f> {
    /// Every valid name in the function, used or not.
    taken: HashSet<&'f str>,
    /// The names handed out so far.
    claimed: HashSet<String>,
    /// The next number to try for a generated name.
    counter: u64,
    /// For each repeated name, the next suffix to try (so `n` repeats cost `O(n)`).
    suffixes: HashMap<String, u64>,
    /// The prefix of generated names (`""` for values, `"block"` for blocks).
    prefix: &'static str,
}

impl<'f> NameGen<'f> {
    fn new(names: impl Iterator<Item = Option<&'f str>>, prefix: &'static str) -> Self {
        NameGen {
            taken: names.flatten().filter(|n| is_valid_name(n)).collect(),
            claimed: HashSet::new(),
            counter: 0,
            suffixes: HashMap::new(),
            prefix,
        }
    }

    fn free(&self, name: &str) -> bool {
        !self.taken.contains(name) && !self.claimed.contains(name)
    }

    /// The print name of something whose own name is `own`.
    fn name(&mut self, own: Option<&str>) -> String {
        let name = match own.filter(|n| is_valid_name(n)) {
            Some(n) if !self.claimed.contains(n) => n.to_string(),
            // `x.1` is not a name when `x` is digits only: generate one instead.
            Some(n) if !n.bytes().all(|b| b.is_ascii_digit()) => {
                let mut k = self.suffixes.get(n).copied().unwrap_or(1);
                let name = loop {
                    let c = format!("{n}.{k}");
                    k += 1;
                    if self.free(&c) {
                        break c;
                    }
                };
                self.suffixes.insert(n.to_string(), k);
                name
            }
            _ => loop {
                let c = format!("{}{}", self.prefix, self.counter);
                self.counter += 1;
                if self.free(&c) {
                    break c;
                }
            },
        };
        self.claimed.insert(name.clone());
        name
    }
}

impl Names {
    /// The print names of `func`'s values and blocks.
    pub fn new(func: &Function) -> Names {
        let mut values: SecondaryMap<Value, String> = SecondaryMap::new();
        let mut blocks: SecondaryMap<Block, String> = SecondaryMap::new();

        let mut namer = NameGen::new(func.values.values().map(|d| d.name.as_deref()), "");
        let mut name_value = |values: &mut SecondaryMap<Value, String>, v: Value| {
            if let Some(d) = func.values.get(v)
                && values[v].is_empty()
                && !matches!(d.def, ValueDef::Const(_))
            {
                values[v] = namer.name(d.name.as_deref());
            }
        };
        for &v in &func.params {
            name_value(&mut values, v);
        }
        for &b in &func.layout {
            let Some(data) = func.blocks.get(b) else {
                continue;
            };
            for phi in &data.phis {
                name_value(&mut values, phi.value);
            }
            for &inst in &data.insts {
                for &v in func.insts.get(inst).map_or(&[][..], |d| &d.results) {
                    name_value(&mut values, v);
                }
            }
        }
        for (v, d) in func.values.iter() {
            if values[v].is_empty() {
                values[v] = match d.def {
                    ValueDef::Const(c) => c.to_string(),
                    _ => match d.name.as_deref().filter(|n| is_valid_name(n)) {
                        Some(name) => format!("<unplaced {name}>"),
                        None => format!("<unplaced {v}>"),
                    },
                };
            }
        }

        let mut namer = NameGen::new(func.blocks.values().map(|d| d.name.as_deref()), "block");
        for &b in &func.layout {
            if let Some(d) = func.blocks.get(b)
                && blocks[b].is_empty()
            {
                blocks[b] = namer.name(d.name.as_deref());
            }
        }
        for (b, d) in func.blocks.iter() {
            if blocks[b].is_empty() {
                blocks[b] = match d.name.as_deref().filter(|n| is_valid_name(n)) {
                    Some(name) => format!("<unplaced {name}>"),
                    None => format!("<unplaced {b}>"),
                };
            }
        }

        Names {
            values,
            blocks,
            n_values: func.values.len(),
            n_blocks: func.blocks.len(),
        }
    }

    /// The name `v` prints with, without `%` (for a constant, its literal;
    /// `<invalid>` if `v` is not a value of the function).
    pub fn value(&self, v: Value) -> &str {
        if v.index() < self.n_values {
            &self.values[v]
        } else {
            "<invalid>"
        }
    }

    /// The label `b` prints with (`<invalid>` if `b` is not a block of the function).
    pub fn block(&self, b: Block) -> &str {
        if b.index() < self.n_blocks {
            &self.blocks[b]
        } else {
            "<invalid>"
        }
    }

    /// A value as it stands where it is defined: `%name`.
    fn def(&self, v: Value) -> String {
        if v.index() < self.n_values {
            format!("%{}", self.values[v])
        } else {
            format!("%<invalid {v}>")
        }
    }

    /// A block as a terminator or phi names it.
    fn label(&self, b: Block) -> String {
        if b.index() < self.n_blocks {
            self.blocks[b].clone()
        } else {
            format!("<invalid {b}>")
        }
    }
}

/// An operand as written: `%name`, or the literal of a constant.
pub fn operand(func: &Function, names: &Names, v: Value) -> String {
    match func.values.get(v) {
        Some(d) => match d.def {
            ValueDef::Const(c) => c.to_string(),
            _ => names.def(v),
        },
        None => format!("%<invalid {v}>"),
    }
}

/// A string as the text format writes it: between double quotes, with `"`, `\`, a
/// newline and a tab escaped as `\"`, `\\`, `\n` and `\t`, every other control
/// character as `\u{..}` (lowercase hex), and every other character as itself. The
/// parser reads it back to `s`.
pub fn string_literal(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' | '\\' | '\n' | '\t' => {
                out.push('\\');
                out.push(match c {
                    '\n' => 'n',
                    '\t' => 't',
                    c => c,
                });
            }
            c if c.is_control() => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A function as a call or declaration names it: `@name`.
fn func_ref(module: &Module, id: FuncId) -> String {
    match module.funcs.get(id) {
        Some(d) if is_valid_name(&d.name) => format!("@{}", d.name),
        Some(d) => format!("@<invalid name {:?}>", d.name),
        None => format!("@<invalid {id}>"),
    }
}

/// One instruction as printed, without indentation: `%t = fmul %a, %b`.
pub fn inst_line(module: &Module, func: &Function, names: &Names, inst: Inst) -> String {
    let Some(data) = func.insts.get(inst) else {
        return format!("<invalid {inst}>");
    };
    let mut s = String::new();
    for (k, &v) in data.results.iter().enumerate() {
        s.push_str(if k > 0 { ", " } else { "" });
        s.push_str(&names.def(v));
    }
    if !data.results.is_empty() {
        s.push_str(" = ");
    }
    let op = data.opcode;
    s.push_str(op.name());
    let arg = |i: usize| match data.args.get(i) {
        Some(&v) => operand(func, names, v),
        None => "<missing>".to_string(),
    };
    let ty = || match data.imm {
        Imm::Type(t) => t.to_string(),
        _ => "<invalid imm>".to_string(),
    };
    // The operands the op's syntax shows; any others are listed after them.
    let shown = match op.shape() {
        Shape::FloatCmp | Shape::IntCmp => {
            let pred = match data.imm {
                Imm::Cmp(p) => p.name(),
                _ => "<invalid imm>",
            };
            let _ = write!(s, " {pred} {}, {}", arg(0), arg(1));
            2
        }
        Shape::Cast | Shape::Bitcast => {
            let _ = write!(s, " {} {}", ty(), arg(0));
            1
        }
        Shape::Const => {
            match data.imm {
                Imm::Const(c) => {
                    let _ = write!(s, " {} {c}", c.ty());
                }
                _ => s.push_str(" <invalid imm>"),
            }
            0
        }
        Shape::Load => {
            let _ = write!(s, " {}[{}]", arg(0), arg(1));
            2
        }
        Shape::Store => {
            let _ = write!(s, " {}[{}], {}", arg(0), arg(1), arg(2));
            3
        }
        Shape::Alloc | Shape::TapeAlloc | Shape::TapeView => {
            let _ = write!(s, " {}, {}", ty(), arg(0));
            1
        }
        Shape::Pop => {
            let _ = write!(s, " {}", ty());
            0
        }
        Shape::TrapIf => {
            let msg = match data.imm {
                Imm::Msg(m) => match func.message(m) {
                    Some(text) => string_literal(text),
                    None => format!("<invalid {m}>"),
                },
                _ => "<invalid imm>".to_string(),
            };
            let _ = write!(s, " {}, {msg}", arg(0));
            1
        }
        Shape::Call => {
            let callee = match data.imm {
                Imm::Func(id) => func_ref(module, id),
                _ => "@<invalid imm>".to_string(),
            };
            let _ = write!(s, " {callee}(");
            for (i, &v) in data.args.iter().enumerate() {
                s.push_str(if i > 0 { ", " } else { "" });
                s.push_str(&operand(func, names, v));
            }
            s.push(')');
            if data.checkpoint {
                s.push_str(" checkpoint");
            }
            data.args.len()
        }
        _ => {
            let n = op.arity().unwrap_or(0);
            for i in 0..n {
                s.push_str(if i > 0 { ", " } else { " " });
                s.push_str(&arg(i));
            }
            n
        }
    };
    for &v in data.args.iter().skip(shown) {
        s.push_str(", ");
        s.push_str(&operand(func, names, v));
    }
    s
}

/// One phi as printed, without indentation: `%i = phi i64 [entry: 0, body: %i1]`.
pub fn phi_line(func: &Function, names: &Names, phi: &Phi) -> String {
    let ty = func
        .values
        .get(phi.value)
        .map_or("<invalid>".to_string(), |d| d.ty.to_string());
    let mut s = format!("{} = phi {ty} [", names.def(phi.value));
    for (i, &(b, v)) in phi.incoming.iter().enumerate() {
        s.push_str(if i > 0 { ", " } else { "" });
        let _ = write!(s, "{}: {}", names.label(b), operand(func, names, v));
    }
    s.push(']');
    s
}

/// One terminator as printed, without indentation: `br %more, body, exit`.
pub fn term_line(func: &Function, names: &Names, term: &Terminator) -> String {
    match term {
        Terminator::Jump(b) => format!("jump {}", names.label(*b)),
        Terminator::Br {
            cond,
            then_dest,
            else_dest,
        } => format!(
            "br {}, {}, {}",
            operand(func, names, *cond),
            names.label(*then_dest),
            names.label(*else_dest)
        ),
        Terminator::Ret(vals) => {
            let mut s = "ret".to_string();
            for (i, &v) in vals.iter().enumerate() {
                s.push_str(if i > 0 { ", " } else { " " });
                s.push_str(&operand(func, names, v));
            }
            s
        }
    }
}

/// One declaration for differentiation as printed: `vjp @f = @f_vjp`.
pub fn decl_line(module: &Module, decl: &Decl) -> String {
    match *decl {
        Decl::Overlay { func, with } => format!(
            "overlay {} = {}",
            func_ref(module, func),
            func_ref(module, with)
        ),
        Decl::Vjp { func, rule } => {
            format!(
                "vjp {} = {}",
                func_ref(module, func),
                func_ref(module, rule)
            )
        }
        Decl::VjpPair {
            func,
            forward,
            pullback,
        } => format!(
            "vjp {} = {}, {}",
            func_ref(module, func),
            func_ref(module, forward),
            func_ref(module, pullback)
        ),
        Decl::Jvp { func, rule } => {
            format!(
                "jvp {} = {}",
                func_ref(module, func),
                func_ref(module, rule)
            )
        }
        Decl::Nodiff { func } => format!("nodiff {}", func_ref(module, func)),
    }
}

/// Writes ` -> t`, ` -> (t1, t2)`, or nothing for no results.
fn write_results(w: &mut dyn fmt::Write, results: &[Type]) -> fmt::Result {
    match results {
        [] => Ok(()),
        [t] => write!(w, " -> {t}"),
        ts => {
            w.write_str(" -> (")?;
            for (i, t) in ts.iter().enumerate() {
                w.write_str(if i > 0 { ", " } else { "" })?;
                write!(w, "{t}")?;
            }
            w.write_str(")")
        }
    }
}

/// Writes the function `id` (a `func`, or an `extern` line), ending with a newline.
pub fn write_function(w: &mut dyn fmt::Write, module: &Module, id: FuncId) -> fmt::Result {
    let Some(decl) = module.funcs.get(id) else {
        return writeln!(w, "; no function {id}");
    };
    let name = func_ref(module, id);
    let func = match &decl.body {
        Body::Extern => return writeln!(w, "extern {name}{}", decl.sig),
        Body::Declared => {
            return writeln!(w, "; declared, not defined\nextern {name}{}", decl.sig);
        }
        Body::Defined(func) => func,
    };
    let names = Names::new(func);
    write!(w, "func {name}(")?;
    let n_params = decl.sig.params.len().max(func.params.len());
    for i in 0..n_params {
        w.write_str(if i > 0 { ", " } else { "" })?;
        let v = func.params.get(i).copied();
        let ty = decl
            .sig
            .params
            .get(i)
            .copied()
            .or_else(|| v.and_then(|v| func.values.get(v)).map(|d| d.ty));
        match (v, ty) {
            (Some(v), Some(ty)) => write!(w, "{}: {ty}", names.def(v))?,
            (None, Some(ty)) => write!(w, "%<missing>: {ty}")?,
            (Some(v), None) => write!(w, "{}: <invalid>", names.def(v))?,
            (None, None) => w.write_str("<missing>")?,
        }
    }
    w.write_str(")")?;
    write_results(w, &decl.sig.results)?;
    w.write_str(" {\n")?;
    for &b in &func.layout {
        writeln!(w, "{}:", names.label(b))?;
        let Some(data) = func.blocks.get(b) else {
            continue;
        };
        for phi in &data.phis {
            writeln!(w, "    {}", phi_line(func, &names, phi))?;
        }
        for &inst in &data.insts {
            writeln!(w, "    {}", inst_line(module, func, &names, inst))?;
        }
        match &data.term {
            Some(term) => writeln!(w, "    {}", term_line(func, &names, term))?,
            None => w.write_str("    ; no terminator\n")?,
        }
    }
    w.write_str("}\n")
}

/// The whole module in the text format: functions and externs in [`FuncId`] order,
/// then the declarations for differentiation, one blank line between items.
impl fmt::Display for Module {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        let mut sep = |f: &mut fmt::Formatter<'_>| {
            let s = if first { "" } else { "\n" };
            first = false;
            f.write_str(s)
        };
        for id in self.funcs.keys() {
            sep(f)?;
            write_function(f, self, id)?;
        }
        for (decl, _) in &self.decls {
            sep(f)?;
            writeln!(f, "{}", decl_line(self, decl))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builder::FunctionBuilder;
    use crate::function::{Pos, ValueData};
    use crate::module::Signature;
    use crate::ops::{CmpPred, Opcode};
    use crate::types::{Elem, Scalar};

    /// Compares the module's text with `expected` (leading newline and indentation of
    /// the raw string are not trimmed: `expected` is exactly the text after its first
    /// newline).
    #[track_caller]
    fn check(module: &Module, expected: &str) {
        let expected = expected.strip_prefix('\n').unwrap_or(expected);
        let text = module.to_string();
        assert_eq!(text, expected, "\nprinted:\n{text}");
    }

    /// A module with one function `f` built by `build`.
    fn build(sig: Signature, body: impl FnOnce(&mut FunctionBuilder<'_>)) -> Module {
        let mut m = Module::new();
        let id = m.declare("f", sig).unwrap();
        let mut b = FunctionBuilder::new(&m, id);
        body(&mut b);
        let f = b.finish().unwrap();
        m.define(id, f).unwrap();
        m
    }

    #[test]
    fn builder_functions_print_with_generated_names() {
        let m = build(Signature::new([Type::slice(Elem::F64)], [Type::F64]), |b| {
            let x = b.param(0);
            let n = b.len(x);
            let zero = b.iconst(0);
            let acc0 = b.fconst(0.0);
            let acc = b.counted_loop(zero, n, &[acc0], |b, i, acc| {
                let xi = b.load(x, i);
                let sq = b.fmul(xi, xi);
                vec![b.fadd(acc[0], sq)]
            });
            b.ret(&[acc[0]]);
        });
        check(
            &m,
            "
func @f(%0: [f64]) -> f64 {
entry:
    %1 = len %0
    jump head
head:
    %2 = phi i64 [entry: 0, body: %8]
    %3 = phi f64 [entry: 0.0, body: %7]
    %4 = icmp lt %2, %1
    br %4, body, exit
body:
    %5 = load %0[%2]
    %6 = fmul %5, %5
    %7 = fadd %3, %6
    %8 = iadd %2, 1
    jump head
exit:
    ret %3
}
",
        );
    }

    #[test]
    fn own_names_are_kept_and_clashes_renamed() {
        let m = build(Signature::new([Type::F64, Type::F64], [Type::F64]), |b| {
            let (x, y) = (b.param(0), b.param(1));
            b.named("x", x);
            b.named("0", y); // taken by `y`: unnamed values skip `0`
            let a = b.fadd(x, y);
            b.named("x", a); // a repeat: `x.1`, unless taken...
            let c = b.fmul(a, a);
            b.named("not a name", c); // invalid: a number
            let d = b.fsub(c, x);
            b.named("x.1", d); // ...and it is, by a later value: `x.2`
            let e = b.fdiv(d, x);
            let g = b.fneg(e);
            b.named("0", g); // a repeat of a number: the next free number
            let other = b.create_block("entry");
            b.jump(other);
            b.switch_to(other);
            b.ret(&[g]);
        });
        check(
            &m,
            "
func @f(%x: f64, %0: f64) -> f64 {
entry:
    %x.2 = fadd %x, %0
    %1 = fmul %x.2, %x.2
    %x.1 = fsub %1, %x
    %2 = fdiv %x.1, %x
    %3 = fneg %2
    jump entry.1
entry.1:
    ret %3
}
",
        );
    }

    #[test]
    fn every_instruction_shape_prints_as_the_spec_writes_it() {
        let mut m = Module::new();
        let g = m
            .declare_extern(
                "g",
                Signature::new([Type::F64, Type::I64], [Type::F64, Type::I64]),
            )
            .unwrap();
        let h = m.declare_extern("h", Signature::new([], [])).unwrap();
        let id = m
            .declare(
                "f",
                Signature::new(
                    [Type::slice_mut(Elem::F32), Type::F64, Type::I64],
                    [Type::F64, Type::I64],
                ),
            )
            .unwrap();
        let mut b = FunctionBuilder::new(&m, id);
        let (s, x, n) = (b.param(0), b.param(1), b.param(2));
        for (v, name) in [(s, "s"), (x, "x"), (n, "n")] {
            b.named(name, v);
        }
        let c = b.fcmp(CmpPred::Le, x, x);
        let k = b.fconst(-2.5e-3);
        let sel = b.select(c, x, k);
        let f = b.cast(Type::F32, sel);
        let bits = b.bitcast(Type::I64, x);
        let one = b.const_inst(Scalar::F32(1.5));
        let zero = b.iconst(0);
        let e = b.load(s, zero);
        let e2 = b.fadd(e, one);
        b.store(s, zero, e2);
        b.fmul(f, e2);
        let a = b.alloc(Elem::I64, n);
        let r = b.call(g, &[x, bits]);
        b.call(h, &[]);
        let nan = b.fconst(f64::NAN);
        let p = b.pow(r[0], nan);
        let q = b.powi(p, bits);
        let inf = b.fconst(f64::NEG_INFINITY);
        let mx = b.fmax(q, inf);
        let len = b.len(a);
        let t = b.bconst(true);
        let nb = b.not(t);
        let done = b.create_block("done");
        let other = b.create_block("other");
        b.br(nb, done, other);
        b.switch_to(done);
        b.ret(&[mx, len]);
        b.switch_to(other);
        let big = b.iconst(i64::MIN);
        b.ret(&[x, big]);
        let func = b.finish().unwrap();
        m.define(id, func).unwrap();
        m.add_decl(Decl::Nodiff { func: h }, Pos::NONE);
        m.add_decl(Decl::Vjp { func: id, rule: g }, Pos::NONE);
        m.add_decl(Decl::Overlay { func: g, with: id }, Pos::NONE);
        m.add_decl(Decl::Jvp { func: id, rule: g }, Pos::NONE);
        m.declare("later", Signature::new([Type::slice(Elem::I64)], []))
            .unwrap();
        check(
            &m,
            "
extern @g(f64, i64) -> (f64, i64)

extern @h()

func @f(%s: mut [f32], %x: f64, %n: i64) -> (f64, i64) {
entry:
    %0 = fcmp le %x, %x
    %1 = select %0, %x, -0.0025
    %2 = cast f32 %1
    %3 = bitcast i64 %x
    %4 = const f32 1.5
    %5 = load %s[0]
    %6 = fadd %5, %4
    store %s[0], %6
    %7 = fmul %2, %6
    %8 = alloc i64, %n
    %9, %10 = call @g(%x, %3)
    call @h()
    %11 = pow %9, nan
    %12 = powi %11, %3
    %13 = fmax %12, -inf
    %14 = len %8
    %15 = not true
    br %15, done, other
done:
    ret %13, %14
other:
    ret %x, -9223372036854775808
}

; declared, not defined
extern @later([i64])

nodiff @h

vjp @f = @g

overlay @g = @f

jvp @f = @g
",
        );
    }

    #[test]
    fn broken_functions_print_without_panicking() {
        let mut m = Module::new();
        let id = m
            .declare("f", Signature::new([Type::F64], [Type::F64]))
            .unwrap();
        let mut func = Function::new(&Signature::new([Type::F64, Type::I64], []));
        let b0 = func.make_block(None);
        let b1 = func.make_block(Some("a b"));
        let unplaced = func.make_block(Some("nowhere"));
        func.append_block(b0);
        func.append_block(b1);
        func.append_block(Block::from_u32(40));
        let bogus_v = Value::from_u32(99);
        let bogus_i = Inst::from_u32(77);
        // A result of an instruction that is not placed, used as an operand.
        let dead = func.make_inst(Opcode::Fneg, Imm::None, &[func.params[0]], &[Type::F64]);
        let dead_v = func.insts[dead].results[0];
        let i1 = func.make_inst(Opcode::Fadd, Imm::Type(Type::F64), &[dead_v], &[Type::F64]);
        let i2 = func.make_inst(Opcode::Fcmp, Imm::None, &[bogus_v, dead_v, dead_v], &[]);
        let i3 = func.make_inst(Opcode::Call, Imm::Func(FuncId::from_u32(9)), &[], &[]);
        for i in [i1, i2, bogus_i, i3] {
            func.append_inst(b0, i);
        }
        func.append_phi(
            b1,
            Type::I64,
            &[(unplaced, bogus_v), (Block::from_u32(50), dead_v)],
        );
        func.blocks[b1].phis.push(Phi {
            value: bogus_v,
            incoming: Default::default(),
        });
        func.set_terminator(
            b0,
            Terminator::Br {
                cond: bogus_v,
                then_dest: unplaced,
                else_dest: Block::from_u32(60),
            },
        );
        func.values.push(ValueData {
            ty: Type::F64,
            def: ValueDef::Param(7),
            name: Some("%bad".into()),
        });
        m.funcs[id].body = Body::Defined(func);
        m.add_decl(
            Decl::Nodiff {
                func: FuncId::from_u32(5),
            },
            Pos::NONE,
        );
        m.declare_extern("x y", Signature::default()).unwrap();
        check(
            &m,
            r#"
func @f(%0: f64, %1: i64) -> f64 {
block0:
    %2 = fadd %<unplaced v2>, <missing>
    fcmp <invalid imm> %<invalid v99>, %<unplaced v2>, %<unplaced v2>
    <invalid inst77>
    call @<invalid fn9>()
    br %<invalid v99>, <unplaced nowhere>, <invalid block60>
block1:
    %3 = phi i64 [<unplaced nowhere>: %<invalid v99>, <invalid block50>: %<unplaced v2>]
    %<invalid v99> = phi <invalid> []
    ; no terminator
<invalid block40>:
}

extern @<invalid name "x y">()

nodiff @<invalid fn5>
"#,
        );
        let names = Names::new(m.function(id).unwrap());
        assert_eq!(names.value(Value::from_u32(1000)), "<invalid>");
        assert_eq!(names.block(Block::from_u32(1000)), "<invalid>");
        assert_eq!(names.value(Value::from_u32(5)), "<unplaced v5>");
    }

    #[test]
    fn constants_print_as_literals() {
        let mut f = Function::new(&Signature::default());
        let names_of = |f: &Function, v| {
            let names = Names::new(f);
            (operand(f, &names, v), names.value(v).to_string())
        };
        let c = f.make_const(Scalar::F32(0.1));
        assert_eq!(names_of(&f, c), ("0.1".to_string(), "0.1".to_string()));
        let c = f.make_const(Scalar::I64(-7));
        assert_eq!(names_of(&f, c).0, "-7");
        let c = f.make_const(Scalar::Bool(false));
        assert_eq!(names_of(&f, c).0, "false");
        let c = f.make_const(Scalar::F64(1e300));
        assert_eq!(names_of(&f, c).0, "1e300");
    }

    #[test]
    fn many_repeated_names_stay_unique_and_fast() {
        let n = 20_000;
        let m = build(Signature::new([Type::F64], [Type::F64]), |b| {
            let mut x = b.param(0);
            for _ in 0..n {
                x = b.fneg(x);
                b.named("t", x);
            }
            b.ret(&[x]);
        });
        let text = m.to_string();
        assert!(text.contains("    %t = fneg %0\n    %t.1 = fneg %t\n    %t.2 = fneg %t.1\n"));
        assert!(text.contains(&format!("    ret %t.{}\n", n - 1)));
    }

    #[test]
    fn messages_print_as_string_literals_even_when_broken() {
        assert_eq!(string_literal(""), "\"\"");
        assert_eq!(
            string_literal("a\"b\\c\nd\te\u{0}\u{1b}\u{7f}\u{9f}é ✓\r"),
            r#""a\"b\\c\nd\te\u{0}\u{1b}\u{7f}\u{9f}é ✓\u{d}""#
        );
        let sig = Signature::new([Type::Bool], []);
        let m = Module::new();
        let mut func = Function::new(&sig);
        let c = func.params[0];
        let fine = func.make_msg("fine \"here\"");
        let i1 = func.make_inst(Opcode::TrapIf, Imm::Msg(fine), &[c], &[]);
        let i2 = func.make_inst(Opcode::TrapIf, Imm::Msg(crate::Msg::from_u32(9)), &[c], &[]);
        let i3 = func.make_inst(Opcode::TrapIf, Imm::None, &[], &[]);
        let names = Names::new(&func);
        let line = |i| inst_line(&m, &func, &names, i);
        assert_eq!(line(i1), r#"trap_if %0, "fine \"here\"""#);
        assert_eq!(line(i2), "trap_if %0, <invalid msg9>");
        assert_eq!(line(i3), "trap_if <missing>, <invalid imm>");
    }

    #[test]
    fn an_empty_module_prints_nothing() {
        check(&Module::new(), "");
    }
}
