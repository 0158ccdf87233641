//! Building functions from Rust.
//!
//! [`FunctionBuilder`] appends to a current block, infers every result type from the
//! op table ([`ops::resolve`](crate::ops::resolve())), and turns Rust numbers into
//! constant operands. It never panics on misuse: the first mistake it meets is kept,
//! and [`FunctionBuilder::finish`] returns it (the verifier catches the rest when the
//! module is verified).
//!
//! Values can be carried between blocks in two ways. With *variables*
//! ([`declare_var`](FunctionBuilder::declare_var), [`def_var`](FunctionBuilder::def_var),
//! [`use_var`](FunctionBuilder::use_var)) the builder places the phis itself, so a
//! frontend writes mutable locals and never thinks about dominance; it only says when a
//! block has all its predecessors ([`seal_block`](FunctionBuilder::seal_block)), and
//! even that is optional (see [`ssa`](crate::ssa)). With explicit phis
//! ([`phi`](FunctionBuilder::phi), [`add_incoming`](FunctionBuilder::add_incoming)) it
//! writes them by hand; [`counted_loop`](FunctionBuilder::counted_loop) writes the
//! usual `head`/`body`/`exit` loop with its phis in one call. Both mix freely.
//!
//! A loop with variables: `sum(x) = x[0] + x[1] + ...`.
//!
//! ```
//! use gradlift_ir::interp::{Interpreter, Val};
//! use gradlift_ir::{CmpPred, Elem, FunctionBuilder, Module, Signature, Type, verify};
//!
//! let mut module = Module::new();
//! let id = module.declare("sum", Signature::new([Type::slice(Elem::F64)], [Type::F64])).unwrap();
//! let mut b = FunctionBuilder::new(&module, id);
//! let x = b.param(0);
//! let n = b.len(x);
//! // let mut i = 0; let mut acc = 0.0;
//! let i = b.declare_named_var("i", Type::I64);
//! let acc = b.declare_named_var("acc", Type::F64);
//! let (zero, fzero) = (b.iconst(0), b.fconst(0.0));
//! b.def_var(i, zero);
//! b.def_var(acc, fzero);
//! let head = b.create_block("head");
//! let body = b.create_block("body");
//! let exit = b.create_block("exit");
//! b.jump(head);
//!
//! // while i < n
//! b.switch_to(head);
//! let iv = b.use_var(i);
//! let more = b.icmp(CmpPred::Lt, iv, n);
//! b.br(more, body, exit);
//! b.seal_block(body); // its one predecessor, `head`, is known
//!
//! // { acc += x[i]; i += 1; }
//! b.switch_to(body);
//! let (iv, accv) = (b.use_var(i), b.use_var(acc));
//! let xi = b.load(x, iv);
//! let accv = b.fadd(accv, xi);
//! b.def_var(acc, accv);
//! let one = b.iconst(1);
//! let iv = b.iadd(iv, one);
//! b.def_var(i, iv);
//! b.jump(head);
//! b.seal_block(head); // entry and body
//! b.seal_block(exit);
//!
//! // return acc
//! b.switch_to(exit);
//! let accv = b.use_var(acc);
//! b.ret(&[accv]);
//! module.define(id, b.finish().unwrap()).unwrap();
//! verify(&module).unwrap();
//!
//! // The builder placed one phi per variable, in `head`.
//! let text = module.to_string();
//! assert!(text.contains("%i = phi i64 [entry: 0, body: %"), "{text}");
//! assert!(text.contains("%acc = phi f64 [entry: 0.0, body: %"), "{text}");
//! assert_eq!(text.matches("phi").count(), 2);
//! let out = Interpreter::new(&module).call(id, &mut [Val::F64s(vec![1.0, 2.0, 4.5])]).unwrap();
//! assert_eq!(out, [Val::F64(7.5)]);
//! ```
//!
//! The same with [`counted_loop`](FunctionBuilder::counted_loop), `sumsq(x) = x[0]^2 + ...`:
//!
//! ```
//! use gradlift_ir::{FunctionBuilder, Module, Signature, Type, Elem};
//!
//! let mut module = Module::new();
//! let id = module.declare("sumsq", Signature::new([Type::slice(Elem::F64)], [Type::F64])).unwrap();
//! let mut b = FunctionBuilder::new(&module, id);
//! let x = b.param(0);
//! let n = b.len(x);
//! let zero = b.iconst(0);
//! let acc0 = b.fconst(0.0);
//! let acc = b.counted_loop(zero, n, &[acc0], |b, i, acc| {
//!     let xi = b.load(x, i);
//!     let sq = b.fmul(xi, xi);
//!     vec![b.fadd(acc[0], sq)]
//! });
//! b.ret(&[acc[0]]);
//! let func = b.finish().unwrap();
//! module.define(id, func).unwrap();
//! assert!(module.to_string().contains("func @sumsq(%0: [f64]) -> f64"));
//! ```

use core::fmt;

use smallvec::SmallVec;

use crate::entities::{Block, FuncId, Inst, Value};
use crate::function::{Function, Pos, Terminator, ValueDef};
use crate::module::{Module, Signature};
use crate::ops::{self, CmpPred, Imm, Opcode};
use crate::ssa::{SsaBuilder, Variable, describe_block};
use crate::types::{Elem, Scalar, Type};

/// A mistake made while building, reported by [`FunctionBuilder::finish`].
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct BuildError {
    /// The function being built.
    pub func: String,
    /// What went wrong, first mistake only.
    pub message: String,
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "building @{}: {}", self.func, self.message)
    }
}

impl std::error::Error for BuildError {}

/// Builds the body of one declared function of a module. See the [module docs](self).
pub struct FunctionBuilder<'m> {
    env: Env<'m>,
    func: Function,
    current: Block,
    ssa: SsaBuilder,
    error: Option<String>,
    /// The position recorded for the instructions appended next.
    pos: Pos,
}

/// Where a builder finds its own name and signature and those of its callees.
enum Env<'m> {
    /// A function declared in a module, which the builder borrows.
    Module { module: &'m Module, id: FuncId },
    /// A function built apart from any module ([`FunctionBuilder::detached`]): the
    /// callees' signatures are told to the builder one by one.
    Detached {
        name: String,
        sig: Signature,
        callees: hashbrown::HashMap<FuncId, Signature>,
    },
}

impl Env<'_> {
    fn sig(&self) -> &Signature {
        match self {
            Env::Module { module, id } => &module.funcs[*id].sig,
            Env::Detached { sig, .. } => sig,
        }
    }

    fn name(&self) -> &str {
        match self {
            Env::Module { module, id } => &module.funcs[*id].name,
            Env::Detached { name, .. } => name,
        }
    }

    fn callee(&self, f: FuncId) -> Option<&Signature> {
        match self {
            Env::Module { module, .. } => module.funcs.get(f).map(|d| &d.sig),
            Env::Detached { callees, .. } => callees.get(&f),
        }
    }
}

macro_rules! binary_ops {
    ($($(#[$doc:meta])* $method:ident = $op:ident;)*) => {$(
        $(#[$doc])*
        pub fn $method(&mut self, a: Value, b: Value) -> Value {
            self.ins1(Opcode::$op, Imm::None, &[a, b])
        }
    )*};
}

macro_rules! unary_ops {
    ($($(#[$doc:meta])* $method:ident = $op:ident;)*) => {$(
        $(#[$doc])*
        pub fn $method(&mut self, a: Value) -> Value {
            self.ins1(Opcode::$op, Imm::None, &[a])
        }
    )*};
}

impl<'m> FunctionBuilder<'m> {
    /// Starts the body of `id`, a function declared in `module` (see
    /// [`Module::declare`]): one parameter value per parameter, and an entry block
    /// named `entry` to append to.
    pub fn new(module: &'m Module, id: FuncId) -> FunctionBuilder<'m> {
        FunctionBuilder::with_env(Env::Module { module, id })
    }

    /// Starts the body of a function named `name` with signature `sig` that borrows
    /// no module, so the module can change while the function is built (a frontend
    /// that declares callees as it meets them, as the tracer does). Calls need the
    /// callee's signature first: [`FunctionBuilder::declare_callee`]. The finished
    /// body is then given to [`Module::define`] for a function declared with the same
    /// signature.
    pub fn detached(name: &str, sig: Signature) -> FunctionBuilder<'static> {
        FunctionBuilder::with_env(Env::Detached {
            name: name.to_string(),
            sig,
            callees: hashbrown::HashMap::new(),
        })
    }

    fn with_env(env: Env<'m>) -> FunctionBuilder<'m> {
        let mut func = Function::new(env.sig());
        let entry = func.make_block(Some("entry"));
        func.append_block(entry);
        FunctionBuilder {
            env,
            func,
            current: entry,
            ssa: SsaBuilder::new(entry),
            error: None,
            pos: Pos::NONE,
        }
    }

    /// Tells a [detached](FunctionBuilder::detached) builder the signature of `f`, a
    /// function it may call. A builder over a module looks signatures up there and
    /// ignores this.
    pub fn declare_callee(&mut self, f: FuncId, sig: Signature) {
        if let Env::Detached { callees, .. } = &mut self.env {
            callees.insert(f, sig);
        }
    }

    /// The signature of the function being built.
    pub fn sig(&self) -> &Signature {
        self.env.sig()
    }

    /// Parameter `i`. Out of range, it records an error and returns a placeholder.
    pub fn param(&mut self, i: usize) -> Value {
        match self.func.params.get(i) {
            Some(&v) => v,
            None => {
                self.fail(format!("no parameter {i}"));
                self.func.make_const(Scalar::F64(0.0))
            }
        }
    }

    /// The function built so far, to inspect.
    pub fn func(&self) -> &Function {
        &self.func
    }

    /// A new block, placed at the end of the layout.
    pub fn create_block(&mut self, name: &str) -> Block {
        let b = self.func.make_block(Some(name));
        self.func.append_block(b);
        b
    }

    /// Moves `block` to the end of the layout, so that the function prints in the
    /// order a frontend finished its blocks (a loop's exit after the blocks of its
    /// body, made later). The layout is only the printing order: the entry stays
    /// first, and nothing else changes.
    pub fn move_to_end(&mut self, block: Block) {
        if !self.check_block(block) || self.func.entry() == Some(block) {
            return;
        }
        if let Some(k) = self.func.layout.iter().position(|&b| b == block) {
            self.func.layout.remove(k);
            self.func.layout.push(block);
        }
    }

    /// Makes `block` the one instructions are appended to. A block that is not one of
    /// this function's records an error, and the current block stays.
    pub fn switch_to(&mut self, block: Block) {
        if self.check_block(block) {
            self.current = block;
        }
    }

    /// The block instructions are appended to.
    pub fn current_block(&self) -> Block {
        self.current
    }

    /// Names `v` (printed `%name`) and returns it.
    pub fn named(&mut self, name: &str, v: Value) -> Value {
        self.func.set_value_name(v, name);
        v
    }

    /// The `f64` constant `x`, as an operand.
    pub fn fconst(&mut self, x: f64) -> Value {
        self.func.make_const(Scalar::F64(x))
    }

    /// The `f32` constant `x`, as an operand.
    pub fn f32const(&mut self, x: f32) -> Value {
        self.func.make_const(Scalar::F32(x))
    }

    /// The `i64` constant `x`, as an operand.
    pub fn iconst(&mut self, x: i64) -> Value {
        self.func.make_const(Scalar::I64(x))
    }

    /// The `bool` constant `x`, as an operand.
    pub fn bconst(&mut self, x: bool) -> Value {
        self.func.make_const(Scalar::Bool(x))
    }

    /// Any constant, as an operand.
    pub fn constant(&mut self, c: Scalar) -> Value {
        self.func.make_const(c)
    }

    /// A phi of type `ty` at the head of the current block, with the given incoming
    /// edges; more can be added with [`FunctionBuilder::add_incoming`].
    pub fn phi(&mut self, ty: Type, incoming: &[(Block, Value)]) -> Value {
        self.func.append_phi(self.current, ty, incoming)
    }

    /// Adds the edge `(pred, value)` to `phi`.
    pub fn add_incoming(&mut self, phi: Value, pred: Block, value: Value) {
        if !self.func.add_phi_incoming(phi, pred, value) {
            self.fail(format!("{phi} is not a phi"));
        }
    }

    /// A new variable of type `ty` (any type, slices included), for
    /// [`def_var`](Self::def_var) and [`use_var`](Self::use_var). See the
    /// [module docs](self).
    pub fn declare_var(&mut self, ty: Type) -> Variable {
        self.ssa.declare_var(ty, None)
    }

    /// A new variable of type `ty` whose phis print as `%name` (made unique by the
    /// printer), and which error messages call by its name.
    pub fn declare_named_var(&mut self, name: &str, ty: Type) -> Variable {
        self.ssa.declare_var(ty, Some(name))
    }

    /// The type of `var` (`None` if it is not a variable of this builder).
    pub fn var_type(&self, var: Variable) -> Option<Type> {
        self.ssa.var_type(var)
    }

    /// Sets `var` to `value` from here to the end of the current block (or the next
    /// definition). Records an error, and changes nothing, if `var` was not declared,
    /// `value` is not a value of this function or not of exactly the variable's type,
    /// or the current block already has its terminator (a definition after it could
    /// not reach the successors).
    pub fn def_var(&mut self, var: Variable, value: Value) {
        let Some(ty) = self.ssa.var_type(var) else {
            self.fail(format!("{var} is not a declared variable"));
            return;
        };
        let Some(vty) = self.func.values.get(value).map(|d| d.ty) else {
            self.fail(format!("{value} is not a value of this function"));
            return;
        };
        if vty != ty {
            let var = self.ssa.describe_var(var);
            self.fail(format!(
                "{var} has type {ty}, but is defined with {value} of type {vty}"
            ));
            return;
        }
        let block = self.current;
        if self.func.blocks[block].term.is_some() {
            let var = self.ssa.describe_var(var);
            let block = describe_block(&self.func, block);
            self.fail(format!("{var} is defined in {block} after its terminator"));
            return;
        }
        self.ssa.def_var(var, block, value);
    }

    /// The value `var` holds here, in the current block: the last definition in this
    /// block, or else the value that reaches the block, through phis that the builder
    /// places (and removes again when they turn out trivial). A variable not defined on
    /// every path to here makes [`finish`](Self::finish) fail with an error naming it;
    /// an undeclared variable records an error. Either way a placeholder comes back.
    ///
    /// The value may be a phi that is later found trivial; it is still fine to use:
    /// `finish` replaces every use of a removed phi.
    pub fn use_var(&mut self, var: Variable) -> Value {
        if self.ssa.var_type(var).is_none() {
            self.fail(format!("{var} is not a declared variable"));
            return self.func.make_const(Scalar::F64(0.0));
        }
        self.ssa
            .use_var(&mut self.func, var, self.current, &mut self.error)
    }

    /// Declares that every predecessor of `block` is known: every jump and branch to it
    /// has been appended. Phis of variables read in `block` before get their edges now
    /// (or are removed, if trivial), and later reads place no phi in a block with a
    /// single predecessor. Jumping to a sealed block, or sealing one twice, records an
    /// error. The entry block is sealed from the start (sealing it does nothing, for
    /// frontends written for Cranelift, which requires it); [`finish`](Self::finish)
    /// seals every block still open, so sealing early saves work but is never required.
    pub fn seal_block(&mut self, block: Block) {
        if !self.check_block(block) || self.func.entry() == Some(block) {
            return;
        }
        if self.ssa.is_sealed(block) {
            let block = describe_block(&self.func, block);
            self.fail(format!("{block} is sealed twice"));
            return;
        }
        self.ssa.seal_block(&mut self.func, block, &mut self.error);
    }

    /// Seals every block not sealed yet (see [`seal_block`](Self::seal_block)).
    pub fn seal_all_blocks(&mut self) {
        self.ssa.seal_all_blocks(&mut self.func, &mut self.error);
    }

    /// Whether `block` is sealed: all its predecessors are declared.
    pub fn is_sealed(&self, block: Block) -> bool {
        self.ssa.is_sealed(block)
    }

    /// Whether `block` is filled: it has its terminator, so it is a predecessor of
    /// the blocks it jumps to.
    pub fn is_filled(&self, block: Block) -> bool {
        self.func
            .blocks
            .get(block)
            .is_some_and(|d| d.term.is_some())
    }

    /// The predecessors of `block` declared so far (by the terminators appended),
    /// each once, in the order of their terminators.
    pub fn preds(&self, block: Block) -> &[Block] {
        self.ssa.preds(block)
    }

    /// Appends an instruction with the given op, immediate and operands; its result
    /// types come from the op table. Returns the instruction (see
    /// [`FunctionBuilder::results`]).
    pub fn ins(&mut self, op: Opcode, imm: Imm, args: &[Value]) -> Inst {
        let arg_types: SmallVec<[Option<Type>; 3]> = args
            .iter()
            .map(|&a| self.func.values.get(a).map(|d| d.ty))
            .collect();
        let callee = match imm {
            Imm::Func(f) => self.env.callee(f),
            _ => None,
        };
        let results: SmallVec<[Type; 1]> = match ops::resolve(op, &imm, &arg_types, callee) {
            Ok(t) => t.results,
            Err(e) => {
                // Keep going with a plausible shape; `finish` reports the error.
                let shape = match (op.shape(), callee) {
                    _ if op.result_count() == Some(0) => SmallVec::new(),
                    (ops::Shape::Call, Some(sig)) => sig.results.iter().copied().collect(),
                    (ops::Shape::Call, None) => SmallVec::new(),
                    _ => smallvec::smallvec![Type::F64],
                };
                self.fail(e);
                shape
            }
        };
        let inst = self.func.make_inst(op, imm, args, &results);
        self.func.append_inst(self.current, inst);
        if self.pos.is_known() {
            self.func.srcmap.insts[inst] = self.pos;
        }
        inst
    }

    /// Sets the source position recorded for the instructions appended from now on
    /// (in the function's [`SourceMap`](crate::SourceMap)), until the next call;
    /// [`Pos::NONE`] records none. A run-time error of such an instruction names it.
    pub fn set_pos(&mut self, pos: Pos) {
        self.pos = pos;
    }

    /// The results of `inst`.
    pub fn results(&self, inst: Inst) -> &[Value] {
        &self.func.insts[inst].results
    }

    fn ins1(&mut self, op: Opcode, imm: Imm, args: &[Value]) -> Value {
        let inst = self.ins(op, imm, args);
        match self.func.insts[inst].results.first() {
            Some(&v) => v,
            None => {
                // Only reachable after an error was recorded: hand back a placeholder.
                self.func.make_const(Scalar::F64(0.0))
            }
        }
    }

    binary_ops! {
        /// `fadd a, b`
        fadd = Fadd;
        /// `fsub a, b`
        fsub = Fsub;
        /// `fmul a, b`
        fmul = Fmul;
        /// `fdiv a, b`
        fdiv = Fdiv;
        /// `fmin a, b`
        fmin = Fmin;
        /// `fmax a, b`
        fmax = Fmax;
        /// `pow a, b`
        pow = Pow;
        /// `atan2 y, x`
        atan2 = Atan2;
        /// `hypot x, y`
        hypot = Hypot;
        /// `powi x, n`
        powi = Powi;
        /// `iadd a, b`
        iadd = Iadd;
        /// `isub a, b`
        isub = Isub;
        /// `imul a, b`
        imul = Imul;
        /// `idiv a, b`
        idiv = Idiv;
        /// `irem a, b`
        irem = Irem;
        /// `ishl a, b`
        ishl = Ishl;
        /// `ishr a, b`
        ishr = Ishr;
        /// `iand a, b`
        iand = Iand;
        /// `ior a, b`
        ior = Ior;
        /// `ixor a, b`
        ixor = Ixor;
        /// `and a, b`
        and = And;
        /// `or a, b`
        or = Or;
        /// `xor a, b`
        xor = Xor;
    }

    unary_ops! {
        /// `fneg a`
        fneg = Fneg;
        /// `fabs a`
        fabs = Fabs;
        /// `sqrt a`
        sqrt = Sqrt;
        /// `exp a`
        exp = Exp;
        /// `log a`
        log = Log;
        /// `sin a`
        sin = Sin;
        /// `cos a`
        cos = Cos;
        /// `tan a`
        tan = Tan;
        /// `tanh a`
        tanh = Tanh;
        /// `sinh a`
        sinh = Sinh;
        /// `cosh a`
        cosh = Cosh;
        /// `asin a`
        asin = Asin;
        /// `acos a`
        acos = Acos;
        /// `atan a`
        atan = Atan;
        /// `log10 a`
        log10 = Log10;
        /// `log2 a`
        log2 = Log2;
        /// `exp2 a`
        exp2 = Exp2;
        /// `floor a`
        floor = Floor;
        /// `ceil a`
        ceil = Ceil;
        /// `ineg a`
        ineg = Ineg;
        /// `not a`
        not = Not;
        /// `len s`
        len = Len;
    }

    /// `fma a, b, c`: `a * b + c`, rounded once.
    pub fn fma(&mut self, a: Value, b: Value, c: Value) -> Value {
        self.ins1(Opcode::Fma, Imm::None, &[a, b, c])
    }

    /// `fcmp pred a, b`
    pub fn fcmp(&mut self, pred: CmpPred, a: Value, b: Value) -> Value {
        self.ins1(Opcode::Fcmp, Imm::Cmp(pred), &[a, b])
    }

    /// `icmp pred a, b`
    pub fn icmp(&mut self, pred: CmpPred, a: Value, b: Value) -> Value {
        self.ins1(Opcode::Icmp, Imm::Cmp(pred), &[a, b])
    }

    /// `select c, a, b`
    pub fn select(&mut self, c: Value, a: Value, b: Value) -> Value {
        self.ins1(Opcode::Select, Imm::None, &[c, a, b])
    }

    /// `cast ty x`
    pub fn cast(&mut self, ty: Type, x: Value) -> Value {
        self.ins1(Opcode::Cast, Imm::Type(ty), &[x])
    }

    /// `bitcast ty x`
    pub fn bitcast(&mut self, ty: Type, x: Value) -> Value {
        self.ins1(Opcode::Bitcast, Imm::Type(ty), &[x])
    }

    /// `const T c`: a constant as an instruction (most code uses constant operands
    /// such as [`FunctionBuilder::fconst`] instead).
    pub fn const_inst(&mut self, c: Scalar) -> Value {
        self.ins1(Opcode::Const, Imm::Const(c), &[])
    }

    /// `load s[i]`
    pub fn load(&mut self, s: Value, i: Value) -> Value {
        self.ins1(Opcode::Load, Imm::None, &[s, i])
    }

    /// `store s[i], v`
    pub fn store(&mut self, s: Value, i: Value, v: Value) {
        self.ins(Opcode::Store, Imm::None, &[s, i, v]);
    }

    /// `alloc elem, n`
    pub fn alloc(&mut self, elem: Elem, n: Value) -> Value {
        self.ins1(Opcode::Alloc, Imm::Type(elem.ty()), &[n])
    }

    /// `push v`: saves the scalar `v` on the tape (see [`ops`](crate::ops#the-tape)).
    /// An `f32` constant is pushed through a `const f32` instruction: nothing gives
    /// a literal operand of `push` its type, so it would read back as `f64`.
    pub fn push(&mut self, v: Value) {
        let v = match self.func.value_def(v) {
            ValueDef::Const(c @ Scalar::F32(_)) => self.const_inst(c),
            _ => v,
        };
        self.ins(Opcode::Push, Imm::None, &[v]);
    }

    /// `pop ty`: the most recent scalar saved on the tape, which must be a `ty`.
    pub fn pop(&mut self, ty: Type) -> Value {
        self.ins1(Opcode::Pop, Imm::Type(ty), &[])
    }

    /// `trap_if cond, "message"`: a debug check that fails the call with `message`
    /// when `cond` (a `bool`) is true (see [`ops`](crate::ops#debug-checks)). The
    /// message goes into the function's arena, once per distinct text
    /// ([`Function::make_msg`]).
    pub fn trap_if(&mut self, cond: Value, message: &str) {
        let m = self.func.make_msg(message);
        self.ins(Opcode::TrapIf, Imm::Msg(m), &[cond]);
    }

    /// `call @f(args)`: returns the results.
    pub fn call(&mut self, f: FuncId, args: &[Value]) -> SmallVec<[Value; 2]> {
        let inst = self.ins(Opcode::Call, Imm::Func(f), args);
        self.func.insts[inst].results.iter().copied().collect()
    }

    /// `call @f(args) checkpoint`: a call whose derivative is checkpointed (reverse
    /// mode saves its inputs instead of the callee's tape, and runs the callee's
    /// forward pass again in the pullback). Computes what [`call`](Self::call)
    /// computes.
    pub fn call_checkpointed(&mut self, f: FuncId, args: &[Value]) -> SmallVec<[Value; 2]> {
        let inst = self.ins(Opcode::Call, Imm::Func(f), args);
        self.func.insts[inst].checkpoint = true;
        self.func.insts[inst].results.iter().copied().collect()
    }

    /// Ends the current block with `jump dest`.
    pub fn jump(&mut self, dest: Block) {
        self.terminate(Terminator::Jump(dest));
    }

    /// Ends the current block with `br cond, then_dest, else_dest`.
    pub fn br(&mut self, cond: Value, then_dest: Block, else_dest: Block) {
        self.terminate(Terminator::Br {
            cond,
            then_dest,
            else_dest,
        });
    }

    /// Ends the current block with `ret values...`.
    pub fn ret(&mut self, values: &[Value]) {
        self.terminate(Terminator::Ret(values.iter().copied().collect()));
    }

    fn terminate(&mut self, term: Terminator) {
        let from = self.current;
        if self.func.blocks[from].term.is_some() {
            self.fail(format!("{from} is terminated twice"));
        }
        // Each successor once: `br %c, b, b` is one predecessor of `b`.
        let mut succs = term.successors();
        succs.dedup();
        for to in succs {
            if self.check_block(to) {
                self.ssa.declare_edge(&self.func, from, to, &mut self.error);
            }
        }
        self.func.set_terminator(from, term);
    }

    /// Whether `block` is a block of this function; records an error if not.
    fn check_block(&mut self, block: Block) -> bool {
        let ok = self.func.blocks.is_valid(block);
        if !ok {
            self.fail(format!("{block} is not a block of this function"));
        }
        ok
    }

    /// A counted loop `for i in start..end`, with `carried` values threaded through
    /// the iterations; returns their values after the loop.
    ///
    /// Appends a jump to a new `head` block (one phi for `i`, one per carried value,
    /// and the exit test `i < end`), a `body` block where `body(builder, i, carried)`
    /// appends the iteration and returns the next carried values, and leaves the
    /// builder at the start of a new `exit` block. The body may create blocks of its
    /// own; the back edge leaves from whatever block it ends in.
    ///
    /// Variables work across the loop: `counted_loop` seals the blocks it makes as
    /// soon as their predecessors are known (`body` before calling `body`, `head` and
    /// `exit` after the back edge), so the body must not jump to them itself.
    pub fn counted_loop(
        &mut self,
        start: Value,
        end: Value,
        carried: &[Value],
        body: impl FnOnce(&mut Self, Value, &[Value]) -> Vec<Value>,
    ) -> Vec<Value> {
        let pre = self.current;
        let head = self.create_block("head");
        let body_block = self.create_block("body");
        let exit = self.create_block("exit");
        self.jump(head);

        self.switch_to(head);
        let i = self.phi(Type::I64, &[(pre, start)]);
        let phis: Vec<Value> = carried
            .iter()
            .map(|&v| {
                let ty = self.func.values.get(v).map_or(Type::F64, |d| d.ty);
                self.phi(ty, &[(pre, v)])
            })
            .collect();
        let more = self.icmp(CmpPred::Lt, i, end);
        self.br(more, body_block, exit);
        self.ssa
            .seal_block(&mut self.func, body_block, &mut self.error);

        self.switch_to(body_block);
        let next = body(self, i, &phis);
        if next.len() != phis.len() {
            self.fail(format!(
                "loop body returned {} carried values, expected {}",
                next.len(),
                phis.len()
            ));
        }
        let one = self.iconst(1);
        let i1 = self.iadd(i, one);
        let latch = self.current;
        self.add_incoming(i, latch, i1);
        for (&phi, &v) in phis.iter().zip(&next) {
            self.add_incoming(phi, latch, v);
        }
        self.jump(head);
        self.ssa.seal_block(&mut self.func, head, &mut self.error);
        self.ssa.seal_block(&mut self.func, exit, &mut self.error);

        self.switch_to(exit);
        phis
    }

    /// The finished body, or the first mistake made while building it.
    ///
    /// Seals every block still open, then replaces every use of a phi found trivial
    /// and takes those phis out of their blocks (see [`crate::ssa`]).
    pub fn finish(mut self) -> Result<Function, BuildError> {
        self.ssa.finish(&mut self.func, &mut self.error);
        match self.error {
            Some(message) => Err(BuildError {
                func: self.env.name().to_string(),
                message,
            }),
            None => Ok(self.func),
        }
    }

    fn fail(&mut self, message: String) {
        if self.error.is_none() {
            self.error = Some(message);
        }
    }
}
