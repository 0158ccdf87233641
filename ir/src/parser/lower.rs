//! Lowering: the [syntax tree](super::ast) to a [`Module`], resolving every name.
//!
//! Lowering runs in phases, so that nothing needs to be written before it is used:
//!
//! 1. every `func` and `extern` is declared in text order ([`Module::add`]), so calls
//!    may name functions defined later, and recursion works;
//! 2. each function body is lowered (see [`FnLower`]);
//! 3. the `overlay`, `vjp`, `jvp` and `nodiff` declarations are resolved.
//!
//! Inside a function, values may be used before their definition in the text (a phi's
//! back edge, or blocks laid out out of dominance order), so a body is lowered in
//! passes: define every name, work out every instruction's result types (depth-first
//! over operand definitions, with an explicit stack), create the instructions, and
//! only then resolve operands.
//!
//! Result types come from [`ops::resolve`], the one typing rule. A literal operand takes
//! the type `resolve` gives its position (or the phi's type, the callee's parameter,
//! the function's result, `bool` for `br`), and its own default where context gives
//! none: `1.0` is `f64`, `1` is `i64`. Type errors other than literals that cannot
//! have the type they are given are the verifier's business: an instruction `resolve`
//! rejects is still created, with plausible result types.
//!
//! Every unknown name is reported, each at its own position. A value whose
//! definition is broken (an unread statement, a call to an unknown function) has no
//! known type, so it causes no further literal-typing errors.

use cranelift_entity::packed_option::ReservedValue;
use hashbrown::{HashMap, HashSet};
use smallvec::{SmallVec, smallvec};

use crate::entities::{Block, FuncId, Value};
use crate::function::{Function, Pos, ValueData, ValueDef};
use crate::module::{Body, Decl, Module, Signature};
use crate::ops::{self, Imm, Opcode, Shape};
use crate::parser::ParseError;
use crate::parser::ast::{
    FuncItem, ImmAst, InstAst, InstKind, Item, Lit, LitKind, Name, Operand, TermKind,
};
use crate::parser::lexer::unescape;
use crate::types::{Scalar, Type};

/// Lowers parsed items to a module, reporting naming and literal errors into `errors`.
pub(crate) fn lower(items: &[Item<'_>], errors: &mut Vec<ParseError>) -> Module {
    let mut module = Module::new();
    // Functions whose header could not be read: their signature is unknown.
    let mut broken = HashSet::new();
    // The id of each item that declares a function; `None` for other items and for
    // a second definition of a name.
    let mut ids = Vec::with_capacity(items.len());
    for item in items {
        let (pos, name, sig, body) = match item {
            Item::Func(f) => (f.pos, f.name, signature(f), Body::Declared),
            Item::Extern {
                pos,
                name,
                params,
                results,
            } => (
                *pos,
                *name,
                Signature::new(params.clone(), results.clone()),
                Body::Extern,
            ),
            Item::Broken { pos, name } => (*pos, *name, Signature::default(), Body::Declared),
            _ => {
                ids.push(None);
                continue;
            }
        };
        match module.add(name.text, sig, body, pos) {
            Ok(id) => {
                if matches!(item, Item::Broken { .. }) {
                    broken.insert(id);
                }
                ids.push(Some(id));
            }
            Err(_) => {
                let first = module
                    .func_by_name(name.text)
                    .and_then(|id| module.funcs.get(id))
                    .map_or(Pos::NONE, |d| d.pos);
                errors.push(ParseError {
                    pos: name.pos,
                    message: format!(
                        "function @{} is defined twice (first at {first})",
                        name.text
                    ),
                });
                ids.push(None);
            }
        }
    }

    let mut bodies = Vec::new();
    for (item, id) in items.iter().zip(&ids) {
        if let Item::Func(f) = item {
            let sig = signature(f);
            let func = FnLower::new(&module, &broken, &sig, errors).run(f);
            // A second definition of a name is lowered for its errors only.
            if let Some(id) = id {
                bodies.push((*id, func));
            }
        }
    }
    for (id, func) in bodies {
        if let Some(decl) = module.funcs.get_mut(id) {
            decl.body = Body::Defined(func);
        }
    }

    for item in items {
        let mut lookup = |name: &Name<'_>| {
            let id = module.func_by_name(name.text);
            if id.is_none() {
                errors.push(unknown_function(name));
            }
            id
        };
        let decl = match item {
            Item::Overlay { pos, func, with } => {
                let (func, with) = (lookup(func), lookup(with));
                func.zip(with)
                    .map(|(func, with)| (Decl::Overlay { func, with }, *pos))
            }
            Item::Vjp {
                pos,
                func,
                rule,
                forward: None,
            } => {
                let (func, rule) = (lookup(func), lookup(rule));
                func.zip(rule)
                    .map(|(func, rule)| (Decl::Vjp { func, rule }, *pos))
            }
            Item::Vjp {
                pos,
                func,
                rule,
                forward: Some(forward),
            } => {
                let (func, forward, pullback) = (lookup(func), lookup(forward), lookup(rule));
                match (func, forward, pullback) {
                    (Some(func), Some(forward), Some(pullback)) => Some((
                        Decl::VjpPair {
                            func,
                            forward,
                            pullback,
                        },
                        *pos,
                    )),
                    _ => None,
                }
            }
            Item::Jvp { pos, func, rule } => {
                let (func, rule) = (lookup(func), lookup(rule));
                func.zip(rule)
                    .map(|(func, rule)| (Decl::Jvp { func, rule }, *pos))
            }
            Item::Nodiff { pos, func } => lookup(func).map(|func| (Decl::Nodiff { func }, *pos)),
            _ => None,
        };
        if let Some((decl, pos)) = decl {
            module.add_decl(decl, pos);
        }
    }
    module
}

fn signature(f: &FuncItem<'_>) -> Signature {
    Signature::new(
        f.params.iter().map(|&(_, t)| t).collect::<Vec<_>>(),
        f.results.clone(),
    )
}

fn unknown_function(name: &Name<'_>) -> ParseError {
    ParseError {
        pos: name.pos,
        message: format!("unknown function @{}", name.text),
    }
}

/// The type a literal has where context gives none.
pub(crate) fn default_type(kind: LitKind) -> Type {
    match kind {
        LitKind::Int | LitKind::Hex(_) => Type::I64,
        LitKind::Float => Type::F64,
        LitKind::Bool(_) => Type::Bool,
    }
}

/// The literal read as a constant of type `ty`, or why it cannot be one. Floats are
/// read from the text straight into their type (an `f32` never goes through `f64`).
fn convert(lit: &Lit<'_>, ty: Type) -> Result<Scalar, String> {
    let what = match lit.kind {
        LitKind::Int => "integer literal",
        LitKind::Hex(_) => "hex literal",
        LitKind::Float => "float literal",
        LitKind::Bool(_) => "bool literal",
    };
    let mismatch = || format!("{what} {} where {ty} is expected", lit.text);
    match (lit.kind, ty) {
        (LitKind::Int | LitKind::Float, Type::F64) => {
            lit.text.parse().map(Scalar::F64).map_err(|_| mismatch())
        }
        (LitKind::Int | LitKind::Float, Type::F32) => {
            lit.text.parse().map(Scalar::F32).map_err(|_| mismatch())
        }
        (LitKind::Int, Type::I64) => lit
            .text
            .parse()
            .map(Scalar::I64)
            .map_err(|_| format!("integer literal {} does not fit in i64", lit.text)),
        (LitKind::Hex(bits), Type::I64) => Ok(Scalar::I64(bits as i64)),
        (LitKind::Bool(b), Type::Bool) => Ok(Scalar::Bool(b)),
        _ => Err(mismatch()),
    }
}

/// An operand as literal typing sees it.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub(crate) enum Arg {
    /// A value of this type.
    Typed(Type),
    /// A value of unknown type (its definition is broken or missing).
    Untyped,
    /// A literal; the type is its own, where context gives none (`f64` for float
    /// syntax, `i64` for integers, `bool`).
    Literal(Type),
}

/// The one rule that types literal operands, shared by the parser and, through
/// [`literal_types`](super::literal_types), by the verifier.
///
/// Returns [`ops::resolve`]'s verdict on the instruction with its literal positions
/// left open, and the type each operand position expects (`None` where context gives
/// none: a literal there keeps its own type). Beyond `resolve`:
///
/// - a `select` whose two arms are literals types them from the literals: `f64` if
///   either is a float, else the first one's own type (so `select %c, 1, 2` is `i64`);
/// - a call `resolve` rejects still types literals from the callee's parameters when
///   the argument count is right;
/// - otherwise, when `resolve` rejects the instruction, literals keep their own types.
pub(crate) fn expected_types(
    op: Opcode,
    imm: &Imm,
    args: &[Arg],
    callee: Option<&Signature>,
) -> (Result<ops::OpTypes, String>, SmallVec<[Option<Type>; 3]>) {
    let mut arg_types: SmallVec<[Option<Type>; 3]> = args
        .iter()
        .map(|a| match a {
            Arg::Typed(t) => Some(*t),
            Arg::Untyped | Arg::Literal(_) => None,
        })
        .collect();
    if let (Shape::Select, [_, Arg::Literal(a), Arg::Literal(b)]) = (op.shape(), args) {
        arg_types[1] = Some(if *a == Type::F64 || *b == Type::F64 {
            Type::F64
        } else {
            *a
        });
    }
    let resolved = ops::resolve(op, imm, &arg_types, callee);
    let mut params = match (&resolved, callee) {
        (Ok(t), _) => t.params.clone(),
        (Err(_), Some(sig)) if op.shape() == Shape::Call => {
            sig.params.iter().map(|&t| Some(t)).collect()
        }
        _ => SmallVec::new(),
    };
    if params.len() != args.len() {
        params.clear();
    }
    (resolved, params)
}

/// What a value name stands for while a body is lowered.
#[derive(Copy, Clone)]
enum Def {
    /// A value that exists already: a parameter or a phi.
    Val(Value),
    /// Result `.1` of instruction `.0` (numbered in text order over the function),
    /// created later.
    Res(usize, usize),
}

/// An instruction's op, immediate and types, as worked out before it is created.
struct Typed {
    op: Opcode,
    imm: Imm,
    /// The type each operand position expects, where known (for literals).
    params: SmallVec<[Option<Type>; 3]>,
    /// The result types.
    results: SmallVec<[Type; 1]>,
    /// Whether the result types are guesses (broken statement, unknown callee).
    untyped: bool,
}

/// The state of one function body being lowered.
struct FnLower<'m, 'a, 'e> {
    module: &'m Module,
    /// Functions with unknown signatures.
    broken: &'m HashSet<FuncId>,
    sig: &'m Signature,
    errors: &'e mut Vec<ParseError>,
    func: Function,
    /// Every value name defined, and where.
    defs: HashMap<&'a str, (Def, Pos)>,
    /// Every block label defined, and where.
    labels: HashMap<&'a str, (Block, Pos)>,
    /// Values whose type is unknown: their definition is broken or missing.
    untyped: HashSet<Value>,
    /// The result values of each instruction, in text order (filled by pass 3).
    inst_values: Vec<SmallVec<[Value; 1]>>,
    /// The block an unknown label stands for.
    bad_block: Option<Block>,
}

impl<'m, 'a, 'e> FnLower<'m, 'a, 'e> {
    fn new(
        module: &'m Module,
        broken: &'m HashSet<FuncId>,
        sig: &'m Signature,
        errors: &'e mut Vec<ParseError>,
    ) -> Self {
        FnLower {
            module,
            broken,
            sig,
            errors,
            func: Function::new(sig),
            defs: HashMap::new(),
            labels: HashMap::new(),
            untyped: HashSet::new(),
            inst_values: Vec::new(),
            bad_block: None,
        }
    }

    fn error(&mut self, pos: Pos, message: String) {
        self.errors.push(ParseError { pos, message });
    }

    fn run(mut self, f: &'a FuncItem<'a>) -> Function {
        self.func.srcmap.func = f.pos;

        // Pass 1: define parameters, blocks, phis and the names of instruction results.
        for (i, (name, _)) in f.params.iter().enumerate() {
            if let Some(&v) = self.func.params.get(i) {
                self.name_value(v, name);
                self.define(name, Def::Val(v));
            }
        }
        let mut blocks = Vec::with_capacity(f.blocks.len());
        for ast in &f.blocks {
            let b = self.func.make_block(ast.label.map(|l| l.text));
            self.func.append_block(b);
            blocks.push(b);
            if let Some(label) = ast.label {
                self.func.srcmap.blocks[b] = label.pos;
                if let Some(&(_, first)) = self.labels.get(label.text) {
                    self.error(
                        label.pos,
                        format!(
                            "block label `{}` is defined twice (first at {first})",
                            label.text
                        ),
                    );
                } else {
                    self.labels.insert(label.text, (b, label.pos));
                }
            }
        }
        let mut flat: Vec<(Block, &'a InstAst<'a>)> = Vec::new();
        let mut phis = Vec::new();
        for (ast, &b) in f.blocks.iter().zip(&blocks) {
            for phi in &ast.phis {
                let k = self.func.blocks[b].phis.len();
                let v = self.func.append_phi(b, phi.ty, &[]);
                self.name_value(v, &phi.name);
                self.define(&phi.name, Def::Val(v));
                phis.push((b, k, phi));
            }
            for inst in &ast.insts {
                for (k, name) in inst.names.iter().enumerate() {
                    self.define(name, Def::Res(flat.len(), k));
                }
                flat.push((b, inst));
            }
        }

        // Pass 2: the types of every instruction.
        let typed = self.type_insts(&flat);

        // Pass 3: create the instructions, so every name has a value.
        let mut insts = Vec::with_capacity(flat.len());
        for (&(b, ast), t) in flat.iter().zip(&typed) {
            let mut values = SmallVec::new();
            let inst = match t {
                Some(t) => {
                    let inst = self.func.make_inst(t.op, t.imm, &[], &t.results);
                    if let InstKind::Op {
                        imm: ImmAst::Func(_, true),
                        ..
                    } = &ast.kind
                    {
                        self.func.insts[inst].checkpoint = true;
                    }
                    self.func.append_inst(b, inst);
                    self.func.srcmap.insts[inst] = ast.pos;
                    values.extend(self.func.insts[inst].results.iter().copied());
                    if t.untyped {
                        self.untyped.extend(values.iter().copied());
                    }
                    Some(inst)
                }
                None => {
                    for _ in &ast.names {
                        values.push(self.placeholder());
                    }
                    None
                }
            };
            for (&v, name) in values.iter().zip(&ast.names) {
                self.name_value(v, name);
            }
            self.inst_values.push(values);
            insts.push(inst);
        }

        // Pass 4: operands, phi edges and terminators.
        for ((&(_, ast), t), inst) in flat.iter().zip(&typed).zip(&insts) {
            let (InstKind::Op { args, .. }, Some(t), Some(inst)) = (&ast.kind, t, inst) else {
                continue;
            };
            let vals: SmallVec<[Value; 3]> = args
                .iter()
                .enumerate()
                .map(|(i, a)| self.operand(a, t.params.get(i).copied().flatten()))
                .collect();
            self.func.insts[*inst].args = vals;
        }
        for (b, k, ast) in phis {
            let incoming: SmallVec<[(Block, Value); 2]> = ast
                .incoming
                .iter()
                .map(|(label, a)| (self.block(label), self.operand(a, Some(ast.ty))))
                .collect();
            if let Some(phi) = self.func.blocks[b].phis.get_mut(k) {
                phi.incoming = incoming;
            }
        }
        for (ast, &b) in f.blocks.iter().zip(&blocks) {
            let Some(term) = &ast.term else { continue };
            let t = match &term.kind {
                TermKind::Jump(label) => crate::Terminator::Jump(self.block(label)),
                TermKind::Br(cond, then_dest, else_dest) => crate::Terminator::Br {
                    cond: self.operand(cond, Some(Type::Bool)),
                    then_dest: self.block(then_dest),
                    else_dest: self.block(else_dest),
                },
                TermKind::Ret(vals) => crate::Terminator::Ret(
                    vals.iter()
                        .enumerate()
                        .map(|(i, a)| self.operand(a, self.sig.results.get(i).copied()))
                        .collect(),
                ),
            };
            self.func.set_terminator(b, t);
            self.func.srcmap.terms[b] = term.pos;
        }
        self.func
    }

    /// Gives `v` its source name and records where it is defined.
    fn name_value(&mut self, v: Value, name: &Name<'_>) {
        self.func.set_value_name(v, name.text);
        self.func.srcmap.values[v] = name.pos;
    }

    /// Defines a value name, reporting a second definition.
    fn define(&mut self, name: &Name<'a>, def: Def) {
        if let Some(&(_, first)) = self.defs.get(name.text) {
            self.error(
                name.pos,
                format!("value %{} is defined twice (first at {first})", name.text),
            );
        } else {
            self.defs.insert(name.text, (def, name.pos));
        }
    }

    /// A value of unknown type standing for a broken or missing definition.
    fn placeholder(&mut self) -> Value {
        let v = self.func.values.push(ValueData {
            ty: Type::F64,
            def: ValueDef::Const(Scalar::F64(0.0)),
            name: None,
        });
        self.untyped.insert(v);
        v
    }

    /// The value an operand stands for; a literal becomes a constant of type
    /// `expected`, or of its own default type when there is no expectation.
    fn operand(&mut self, a: &Operand<'a>, expected: Option<Type>) -> Value {
        match a {
            Operand::Value(name) => match self.defs.get(name.text) {
                Some(&(Def::Val(v), _)) => v,
                Some(&(Def::Res(n, k), _)) => {
                    match self.inst_values.get(n).and_then(|vs| vs.get(k)) {
                        Some(&v) => v,
                        None => self.placeholder(),
                    }
                }
                None => {
                    self.error(name.pos, format!("unknown value %{}", name.text));
                    self.placeholder()
                }
            },
            Operand::Lit(lit) => {
                let ty = expected.unwrap_or(default_type(lit.kind));
                match convert(lit, ty) {
                    Ok(c) => self.func.make_const(c),
                    Err(message) => {
                        self.error(lit.pos, message);
                        self.placeholder()
                    }
                }
            }
        }
    }

    /// The block a label names.
    fn block(&mut self, label: &Name<'_>) -> Block {
        if let Some(&(b, _)) = self.labels.get(label.text) {
            return b;
        }
        self.error(label.pos, format!("unknown block label `{}`", label.text));
        *self
            .bad_block
            .get_or_insert_with(|| self.func.make_block(None))
    }

    /// The known type of a named operand while instructions are being typed: `None`
    /// for literals, unknown names, values of unknown type, and results of
    /// instructions not typed yet (only on a cycle of definitions, which is not SSA).
    fn operand_type(&self, a: &Operand<'_>, typed: &[Option<Typed>]) -> Option<Type> {
        let Operand::Value(name) = a else { return None };
        match self.defs.get(name.text)?.0 {
            Def::Val(v) if !self.untyped.contains(&v) => self.func.values.get(v).map(|d| d.ty),
            Def::Val(_) => None,
            Def::Res(n, k) => match typed.get(n)? {
                Some(t) if !t.untyped => t.results.get(k).copied(),
                _ => None,
            },
        }
    }

    /// Types every instruction. An instruction's operand types may depend on
    /// instructions later in the text, so they are typed depth-first along operand
    /// definitions, with an explicit stack (a long chain must not overflow the
    /// native one). Broken statements stay `None`.
    fn type_insts(&mut self, flat: &[(Block, &'a InstAst<'a>)]) -> Vec<Option<Typed>> {
        #[derive(Copy, Clone, PartialEq)]
        enum State {
            Todo,
            Active,
            Done,
        }
        let mut typed: Vec<Option<Typed>> = flat.iter().map(|_| None).collect();
        let mut state = vec![State::Todo; flat.len()];
        for root in 0..flat.len() {
            if state[root] != State::Todo {
                continue;
            }
            state[root] = State::Active;
            // Each frame is an instruction and the next operand to look at.
            let mut stack = vec![(root, 0usize)];
            while let Some(frame) = stack.last_mut() {
                let (n, ref mut next) = *frame;
                let args: &[Operand<'_>] = match &flat[n].1.kind {
                    InstKind::Op { args, .. } => args,
                    InstKind::Broken => &[],
                };
                let mut dep = None;
                while *next < args.len() {
                    let a = &args[*next];
                    *next += 1;
                    if let Operand::Value(name) = a
                        && let Some(&(Def::Res(m, _), _)) = self.defs.get(name.text)
                        && state.get(m) == Some(&State::Todo)
                    {
                        dep = Some(m);
                        break;
                    }
                }
                if let Some(m) = dep {
                    state[m] = State::Active;
                    stack.push((m, 0));
                    continue;
                }
                typed[n] = self.type_inst(flat[n].1, &typed);
                state[n] = State::Done;
                stack.pop();
            }
        }
        typed
    }

    /// Works out one instruction's immediate, operand and result types, once its
    /// operands' definitions are typed; reports unknown callees and bad `const`
    /// literals.
    fn type_inst(&mut self, ast: &InstAst<'a>, typed: &[Option<Typed>]) -> Option<Typed> {
        let InstKind::Op { op, imm, args } = &ast.kind else {
            return None;
        };
        let op = *op;
        let arg_kinds: SmallVec<[Arg; 3]> = args
            .iter()
            .map(|a| match a {
                Operand::Lit(lit) => Arg::Literal(default_type(lit.kind)),
                Operand::Value(_) => self.operand_type(a, typed).map_or(Arg::Untyped, Arg::Typed),
            })
            .collect();
        let mut callee = None;
        let mut callee_known = true;
        let imm = match imm {
            ImmAst::None => Imm::None,
            ImmAst::Cmp(p) => Imm::Cmp(*p),
            ImmAst::Type(t) => Imm::Type(*t),
            ImmAst::Const(t, lit) => match convert(lit, *t) {
                Ok(c) => Imm::Const(c),
                Err(message) => {
                    self.error(lit.pos, message);
                    Imm::Const(Scalar::zero(*t).unwrap_or(Scalar::F64(0.0)))
                }
            },
            ImmAst::Msg(text) => Imm::Msg(self.func.make_msg(&unescape(text))),
            ImmAst::Func(name, _) => match self.module.func_by_name(name.text) {
                Some(id) => {
                    if self.broken.contains(&id) {
                        callee_known = false;
                    } else {
                        callee = self.module.funcs.get(id).map(|d| &d.sig);
                    }
                    Imm::Func(id)
                }
                None => {
                    self.errors.push(unknown_function(name));
                    callee_known = false;
                    Imm::Func(FuncId::reserved_value())
                }
            },
        };
        let n_names = ast.names.len();
        let (resolved, params) = expected_types(op, &imm, &arg_kinds, callee);
        let (mut results, mut untyped) = match resolved {
            Ok(t) => (t.results, false),
            // A type error, for the verifier to report: keep a plausible shape.
            Err(_) => match (op.shape(), callee) {
                (Shape::Call, Some(sig)) => (sig.results.iter().copied().collect(), false),
                (Shape::Call, None) => (smallvec![Type::F64; n_names], true),
                _ => match op.result_count() {
                    Some(0) => (SmallVec::new(), false),
                    _ => (smallvec![Type::F64], false),
                },
            },
        };
        if n_names != 0 && n_names != results.len() && callee_known {
            let what = match &imm {
                Imm::Func(id) => {
                    let name = self.module.funcs.get(*id).map_or("?", |d| d.name.as_str());
                    format!("call to @{name}")
                }
                _ => op.name().to_string(),
            };
            let count = |n: usize, one: &str, many: &str| match n {
                0 => format!("no {many}"),
                1 => format!("1 {one}"),
                n => format!("{n} {many}"),
            };
            self.error(
                ast.pos,
                format!(
                    "{what} has {} but {} given",
                    count(results.len(), "result", "results"),
                    count(n_names, "name is", "names are")
                ),
            );
            results.resize(n_names, Type::F64);
            untyped = true;
        }
        Some(Typed {
            op,
            imm,
            params,
            results,
            untyped,
        })
    }
}
