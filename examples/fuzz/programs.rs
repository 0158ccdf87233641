//! The generator of random valid programs.
//!
//! A program is a module with an entry point `@f` of random signature (`f64`, `f32`,
//! `i64`, `bool`, read-only and `mut` slices of `f64`, `f32` and `i64`; zero to three
//! scalar results) and the functions it calls:
//!
//! - helpers `@h0`, `@h1`, ... of random signatures (`@hK` may call `@hJ` for J < K);
//! - optionally a recursive `@r(%v, %k, ...)` that calls itself (or, mutually, `@s`)
//!   with `k - 1` or `k - 2` until `k <= 0`; callers pass `k & 15` or, now and then,
//!   an unbounded `k`, which ends in the recursion limit;
//! - templates with declarations: `nodiff` (piecewise-constant functions), `vjp`
//!   (hand-written rules, one of them in `f32` with two results), `overlay` (a naive
//!   and a stable softplus; a sum over a read-only slice in two orders), and an
//!   `extern` with an extern `vjp` rule whose host functions the campaign binds on both
//!   engines.
//!
//! Bodies are written with the builder's variables (so the builder places the phis)
//! from a menu of statements: assignments from every float op of the IR (in `f64`
//! and `f32`), integer and boolean ops, `select`, `cast`, `bitcast` (rarely: it makes
//! the function non-smooth for finite differences), `const`, loads and stores
//! (indices `irem` by the length, a loop counter, or now and then a raw integer that
//! may be out of bounds), local buffers (`alloc` of a small length, of a slice's
//! length, or rarely of a negative or impossible length), `if`/`else` on float,
//! integer or boolean conditions with early returns, loops counted by a constant, a
//! slice's length or a masked integer, data-dependent `while` loops bounded by a
//! counter, and calls (slices passed without aliasing, except now and then on
//! purpose). Each program has a "raw" rate: the share of float ops applied to their
//! operands as they are, or to literal edge values (0, -0, ±inf, NaN, 710, ...),
//! rather than to operands squashed into the op's domain. So some programs are smooth
//! (for finite differences) and others hit every domain edge.

use gradlift::ir::{
    CmpPred, Elem, FuncId, Function, FunctionBuilder, Imm, Module, Opcode, Scalar, Signature, Type,
    Value, Variable, parse,
};

use crate::rng::Rng;

const F64: Type = Type::F64;
const F32: Type = Type::F32;
const I64: Type = Type::I64;
const BOOL: Type = Type::Bool;

/// Float values at the edges of the ops' domains.
const FLOAT_EDGES: [f64; 18] = [
    0.0,
    -0.0,
    1.0,
    -1.0,
    0.5,
    2.0,
    f64::INFINITY,
    f64::NEG_INFINITY,
    f64::NAN,
    1e308,
    -1e-310,
    3.0,
    710.0,
    -745.5,
    1e-8,
    std::f64::consts::FRAC_PI_2,
    -2.5,
    100.0,
];

/// Integers at the edges of the integer ops.
const INT_EDGES: [i64; 14] = [
    0,
    1,
    -1,
    2,
    7,
    63,
    64,
    65,
    -64,
    i64::MIN,
    i64::MAX,
    1 << 32,
    -(1 << 31),
    3,
];

const FLOAT_BINARY: [Opcode; 9] = [
    Opcode::Fadd,
    Opcode::Fsub,
    Opcode::Fmul,
    Opcode::Fdiv,
    Opcode::Fmin,
    Opcode::Fmax,
    Opcode::Pow,
    Opcode::Atan2,
    Opcode::Hypot,
];

const FLOAT_UNARY: [Opcode; 19] = [
    Opcode::Fneg,
    Opcode::Fabs,
    Opcode::Sqrt,
    Opcode::Exp,
    Opcode::Log,
    Opcode::Sin,
    Opcode::Cos,
    Opcode::Tan,
    Opcode::Tanh,
    Opcode::Sinh,
    Opcode::Cosh,
    Opcode::Asin,
    Opcode::Acos,
    Opcode::Atan,
    Opcode::Log10,
    Opcode::Log2,
    Opcode::Exp2,
    Opcode::Floor,
    Opcode::Ceil,
];

const INT_BINARY: [Opcode; 10] = [
    Opcode::Iadd,
    Opcode::Isub,
    Opcode::Imul,
    Opcode::Idiv,
    Opcode::Irem,
    Opcode::Ishl,
    Opcode::Ishr,
    Opcode::Iand,
    Opcode::Ior,
    Opcode::Ixor,
];

/// A generated program.
pub struct Program {
    /// The module, as built (it is printed, and the text parsed, by the checker).
    pub module: Module,
    /// Whether it calls the extern `@host_tanh` (whose host functions the campaign
    /// binds): the command line cannot replay it.
    pub uses_hosts: bool,
}

/// A function a body may call.
#[derive(Clone)]
struct Callee {
    id: FuncId,
    sig: Signature,
    /// The depth parameter of a recursive function.
    rec_k: Option<usize>,
}

/// A slice in scope, with its length (computed where the slice is defined).
#[derive(Copy, Clone)]
struct Sl {
    val: Value,
    len: Value,
    elem: Elem,
    mutable: bool,
}

/// What kind of body.
#[derive(Clone, Copy)]
enum Kind {
    Plain,
    /// A recursive function: parameter 1 is the depth `k`; it calls `partner`
    /// (itself, or its mutual partner) with a smaller `k`.
    Rec {
        partner: FuncId,
    },
}

/// The options of one body.
struct FnOpts {
    callees: Vec<Callee>,
    budget: i32,
    /// Percent of float ops applied raw.
    raw: u64,
    f32: bool,
    bitcast: bool,
    kind: Kind,
}

/// One function body under construction.
struct Fx<'a, 'm> {
    b: FunctionBuilder<'m>,
    rng: &'a mut Rng,
    /// Variables by type: f64, f32, i64, bool.
    vars: [Vec<Variable>; 4],
    /// Loop counters: read, never assigned.
    counters: Vec<Variable>,
    /// Slices in scope (a stack: a branch or loop body truncates it when it ends).
    slices: Vec<Sl>,
    /// Loops over a slice's length: the slice's value and the counter.
    slice_loops: Vec<(Value, Variable)>,
    results: Vec<Type>,
    opts: FnOpts,
    budget: i32,
}

fn vi(ty: Type) -> usize {
    match ty {
        Type::F64 => 0,
        Type::F32 => 1,
        Type::I64 => 2,
        _ => 3,
    }
}

impl<'a, 'm> Fx<'a, 'm> {
    fn new(m: &'m Module, id: FuncId, rng: &'a mut Rng, opts: FnOpts) -> Fx<'a, 'm> {
        let b = FunctionBuilder::new(m, id);
        let sig = m.sig(id).clone();
        let budget = opts.budget;
        let mut fx = Fx {
            b,
            rng,
            vars: Default::default(),
            counters: Vec::new(),
            slices: Vec::new(),
            slice_loops: Vec::new(),
            results: sig.results.clone(),
            opts,
            budget,
        };
        for (i, &t) in sig.params.iter().enumerate() {
            let p = fx.b.param(i);
            fx.b.named(&format!("p{i}"), p);
            match t {
                Type::Slice { elem, mutable } => {
                    let len = fx.b.len(p);
                    fx.slices.push(Sl {
                        val: p,
                        len,
                        elem,
                        mutable,
                    });
                }
                t => {
                    let v = fx.b.declare_named_var(&format!("v{i}"), t);
                    fx.b.def_var(v, p);
                    fx.vars[vi(t)].push(v);
                }
            }
        }
        // Pools of variables: at least two i64, three f64, one bool, two f32 when the
        // program uses f32 (in this order: each initialiser reads only the ones
        // before), made from the parameters where there are some.
        while fx.vars[2].len() < 2 {
            let init = match fx.pick_slice(None, false) {
                Some(s) if fx.rng.chance(50) => s.len,
                _ => {
                    let n = fx.rng.range(0, 6);
                    fx.b.iconst(n)
                }
            };
            let v = fx.b.declare_named_var("n", I64);
            fx.b.def_var(v, init);
            fx.vars[2].push(v);
        }
        while fx.vars[0].len() < 3 {
            let source = match fx.rng.below(4) {
                0 | 1 if !fx.vars[0].is_empty() => Some(fx.var(F64)),
                0..=2 => match fx.pick_slice(Some(Elem::F64), false) {
                    Some(s) => {
                        let i = fx.index(s);
                        Some(fx.b.load(s.val, i))
                    }
                    None => None,
                },
                _ => None,
            };
            let source = match source {
                Some(s) => Some(s),
                None if !fx.vars[1].is_empty() => {
                    let x = fx.var(F32);
                    Some(fx.b.cast(F64, x))
                }
                None => None,
            };
            let (k1, k2) = (fx.rng.uniform(-1.5, 1.5), fx.rng.uniform(-1.0, 1.0));
            let init = match source {
                Some(s) => {
                    let k1 = fx.b.fconst(k1);
                    let m = fx.b.fmul(s, k1);
                    let k2 = fx.b.fconst(k2);
                    fx.b.fadd(m, k2)
                }
                None => fx.b.fconst(k1),
            };
            let v = fx.b.declare_named_var("a", F64);
            fx.b.def_var(v, init);
            fx.vars[0].push(v);
        }
        if fx.vars[3].is_empty() {
            let (a, c) = (fx.var(F64), fx.var(F64));
            let p = fx.rng.pick(&CmpPred::ALL);
            let init = fx.b.fcmp(p, a, c);
            let v = fx.b.declare_named_var("c", BOOL);
            fx.b.def_var(v, init);
            fx.vars[3].push(v);
        }
        if fx.opts.f32 {
            while fx.vars[1].len() < 2 {
                let x = fx.operand(F64);
                let init = fx.b.cast(F32, x);
                let v = fx.b.declare_named_var("h", F32);
                fx.b.def_var(v, init);
                fx.vars[1].push(v);
            }
        }
        fx
    }

    fn floats(&mut self) -> Type {
        if self.opts.f32 && self.rng.chance(40) {
            F32
        } else {
            F64
        }
    }

    /// A constant of type `ty`. An `f32` one is a `const` instruction: a literal
    /// among literals only would read as `f64`.
    fn k(&mut self, ty: Type, x: f64) -> Value {
        match ty {
            Type::F32 => self.b.const_inst(Scalar::F32(x as f32)),
            Type::I64 => self.b.iconst(x as i64),
            _ => self.b.fconst(x),
        }
    }

    fn var(&mut self, ty: Type) -> Value {
        let i = vi(ty);
        if i == 2 && !self.counters.is_empty() && self.rng.chance(30) {
            let c = self.rng.pick(&self.counters);
            return self.b.use_var(c);
        }
        let v = self.rng.pick(&self.vars[i]);
        self.b.use_var(v)
    }

    fn raw(&mut self) -> bool {
        let p = self.opts.raw;
        self.rng.chance(p)
    }

    /// A float operand: a variable, or (in raw mode) an edge value.
    fn operand(&mut self, ty: Type) -> Value {
        match ty {
            Type::F64 | Type::F32 => {
                if self.opts.raw > 0 && self.rng.chance(self.opts.raw / 3 + 1) {
                    let x = self.rng.pick(&FLOAT_EDGES);
                    self.k(ty, x)
                } else {
                    self.var(ty)
                }
            }
            Type::I64 => {
                if self.rng.chance(15) {
                    let x = if self.raw() {
                        self.rng.pick(&INT_EDGES)
                    } else {
                        self.rng.range(-3, 9)
                    };
                    self.b.iconst(x)
                } else {
                    self.var(I64)
                }
            }
            _ => {
                if self.rng.chance(5) {
                    let x = self.rng.chance(50);
                    self.b.bconst(x)
                } else {
                    self.var(BOOL)
                }
            }
        }
    }

    fn op1(&mut self, op: Opcode, a: Value) -> Value {
        let i = self.b.ins(op, Imm::None, &[a]);
        self.b.results(i)[0]
    }

    fn op2(&mut self, op: Opcode, a: Value, c: Value) -> Value {
        let i = self.b.ins(op, Imm::None, &[a, c]);
        self.b.results(i)[0]
    }

    fn scale(&mut self, ty: Type, a: Value, x: f64) -> Value {
        let k = self.k(ty, x);
        self.b.fmul(a, k)
    }

    /// A float expression of type `ty`.
    fn fexpr(&mut self, ty: Type) -> Value {
        let raw = self.raw();
        let pick = self.rng.below(36);
        let a = if raw { self.operand(ty) } else { self.var(ty) };
        let c = if raw { self.operand(ty) } else { self.var(ty) };
        match pick {
            0..=8 => {
                let op = FLOAT_BINARY[pick as usize];
                if raw {
                    return self.op2(op, a, c);
                }
                match op {
                    Opcode::Fadd | Opcode::Fsub => {
                        let r = self.op2(op, a, c);
                        self.scale(ty, r, 0.5)
                    }
                    Opcode::Fmul => {
                        let r = self.b.fmul(a, c);
                        self.scale(ty, r, 0.25)
                    }
                    Opcode::Fdiv => {
                        let cc = self.b.fmul(c, c);
                        let one = self.k(ty, 1.0);
                        let d = self.b.fadd(cc, one);
                        self.b.fdiv(a, d)
                    }
                    Opcode::Pow => {
                        let aa = self.b.fmul(a, a);
                        let h = self.k(ty, 0.5);
                        let base = self.b.fadd(aa, h);
                        let t = self.b.tanh(c);
                        let e = self.scale(ty, t, 1.5);
                        self.b.pow(base, e)
                    }
                    Opcode::Hypot => {
                        let h = self.b.hypot(a, c);
                        self.scale(ty, h, 0.5)
                    }
                    _ => self.op2(op, a, c),
                }
            }
            9..=27 => {
                let op = FLOAT_UNARY[pick as usize - 9];
                if raw {
                    return self.op1(op, a);
                }
                match op {
                    Opcode::Sqrt => {
                        let aa = self.b.fmul(a, a);
                        let q = self.k(ty, 0.25);
                        let s = self.b.fadd(aa, q);
                        self.b.sqrt(s)
                    }
                    Opcode::Exp => {
                        let t = self.b.tanh(a);
                        self.b.exp(t)
                    }
                    Opcode::Log | Opcode::Log2 => {
                        let aa = self.b.fmul(a, a);
                        let h = self.k(ty, 0.5);
                        let s = self.b.fadd(aa, h);
                        self.op1(op, s)
                    }
                    Opcode::Log10 => {
                        let f = self.b.fabs(a);
                        let t = self.k(ty, 0.1);
                        let s = self.b.fadd(f, t);
                        self.b.log10(s)
                    }
                    Opcode::Tan => {
                        let t = self.b.tanh(a);
                        let s = self.scale(ty, t, 1.2);
                        self.b.tan(s)
                    }
                    Opcode::Sinh | Opcode::Cosh | Opcode::Exp2 => {
                        let t = self.b.tanh(a);
                        let s = self.scale(ty, t, 2.0);
                        self.op1(op, s)
                    }
                    Opcode::Asin | Opcode::Acos => {
                        let t = self.b.tanh(a);
                        let s = self.scale(ty, t, 0.95);
                        self.op1(op, s)
                    }
                    _ => self.op1(op, a),
                }
            }
            28 => {
                // powi
                if raw {
                    let n = self.operand(I64);
                    return self.b.powi(a, n);
                }
                let t = self.b.tanh(a);
                let h = self.scale(ty, t, 0.5);
                let one = self.k(ty, 1.0);
                let base = self.b.fadd(h, one);
                let n = if self.rng.chance(50) {
                    let n = self.rng.range(-4, 5);
                    self.b.iconst(n)
                } else {
                    let v = self.var(I64);
                    let five = self.b.iconst(5);
                    self.b.irem(v, five)
                };
                self.b.powi(base, n)
            }
            29 => {
                // fma
                if raw {
                    let d = self.operand(ty);
                    return self.b.fma(a, c, d);
                }
                let t = self.b.tanh(a);
                let x = self.rng.uniform(-1.0, 1.0);
                let d = self.k(ty, x);
                self.b.fma(t, c, d)
            }
            30 => {
                let cond = if self.rng.chance(50) {
                    self.operand(BOOL)
                } else {
                    let p = self.rng.pick(&CmpPred::ALL);
                    self.b.fcmp(p, a, c)
                };
                self.b.select(cond, a, c)
            }
            31 => {
                // cast into `ty` from the other float type, an integer or a bool
                let other = if ty == F64 { F32 } else { F64 };
                match self.rng.below(3) {
                    0 if !self.vars[vi(other)].is_empty() => {
                        let x = self.var(other);
                        self.b.cast(ty, x)
                    }
                    1 => {
                        let n = self.operand(I64);
                        let n = if raw {
                            n
                        } else {
                            let m = self.b.iconst(15);
                            self.b.iand(n, m)
                        };
                        self.b.cast(ty, n)
                    }
                    _ => {
                        let c = self.operand(BOOL);
                        self.b.cast(ty, c)
                    }
                }
            }
            32 | 33 => match self.pick_slice(Elem::of(ty), false) {
                Some(s) => {
                    let i = self.index(s);
                    self.b.load(s.val, i)
                }
                None => a,
            },
            34 => {
                let x = if raw {
                    self.rng.pick(&FLOAT_EDGES)
                } else {
                    self.rng.uniform(-2.0, 2.0)
                };
                let s = if ty == F32 {
                    Scalar::F32(x as f32)
                } else {
                    Scalar::F64(x)
                };
                self.b.const_inst(s)
            }
            _ => a,
        }
    }

    /// An integer expression.
    fn iexpr(&mut self) -> Value {
        let raw = self.raw();
        let a = self.operand(I64);
        let c = self.operand(I64);
        match self.rng.below(18) {
            k @ 0..=9 => {
                let op = INT_BINARY[k as usize];
                let c = if matches!(op, Opcode::Idiv | Opcode::Irem) && !raw {
                    let one = self.b.iconst(1);
                    self.b.ior(c, one)
                } else {
                    c
                };
                self.op2(op, a, c)
            }
            10 => self.b.ineg(a),
            11 | 12 => {
                if self.rng.chance(25) {
                    let c = self.operand(BOOL);
                    return self.b.cast(I64, c);
                }
                let ty = self.floats();
                let x = self.operand(ty);
                self.b.cast(I64, x)
            }
            13 if self.opts.bitcast => {
                let x = self.operand(F64);
                self.b.bitcast(I64, x)
            }
            14 => match self.pick_slice(None, false) {
                Some(s) => s.len,
                None => a,
            },
            15 => match self.pick_slice(Some(Elem::I64), false) {
                Some(s) => {
                    let i = self.index(s);
                    self.b.load(s.val, i)
                }
                None => a,
            },
            16 => {
                let x = self.rng.pick(&INT_EDGES);
                self.b.iconst(x)
            }
            _ => {
                let m = self.b.iconst(7);
                self.b.iand(a, m)
            }
        }
    }

    /// A boolean expression.
    fn bexpr(&mut self) -> Value {
        match self.rng.below(9) {
            0..=3 => {
                let ty = self.floats();
                let (a, c) = (self.operand(ty), self.operand(ty));
                let p = self.rng.pick(&CmpPred::ALL);
                self.b.fcmp(p, a, c)
            }
            4 | 5 => {
                let (a, c) = (self.operand(I64), self.operand(I64));
                let p = self.rng.pick(&CmpPred::ALL);
                self.b.icmp(p, a, c)
            }
            6 => {
                let (a, c) = (self.operand(BOOL), self.operand(BOOL));
                let op = self.rng.pick(&[Opcode::And, Opcode::Or, Opcode::Xor]);
                self.op2(op, a, c)
            }
            7 => {
                let a = self.operand(BOOL);
                self.b.not(a)
            }
            _ => {
                let x = self.rng.chance(50);
                self.b.bconst(x)
            }
        }
    }

    /// A slice in scope, of element `elem` (any, if `None`), writable if `mutable`.
    fn pick_slice(&mut self, elem: Option<Elem>, mutable: bool) -> Option<Sl> {
        let fits: Vec<Sl> = self
            .slices
            .iter()
            .copied()
            .filter(|s| elem.is_none_or(|e| s.elem == e) && (s.mutable || !mutable))
            .collect();
        if fits.is_empty() {
            None
        } else {
            Some(fits[self.rng.below(fits.len() as u64) as usize])
        }
    }

    /// An index into `s`: a loop counter over it, `irem` of a masked integer by its
    /// length (division by zero when it is empty), or rarely a raw integer or the
    /// length itself (out of bounds).
    fn index(&mut self, s: Sl) -> Value {
        if let Some(&(_, c)) = self.slice_loops.iter().rev().find(|(v, _)| *v == s.val)
            && self.rng.chance(70)
        {
            return self.b.use_var(c);
        }
        let r = self.rng.below(200);
        if r < 1 {
            return s.len;
        }
        if r < 8 && self.raw() {
            return self.operand(I64);
        }
        if r < 40 {
            let k = if self.rng.chance(90) { 0 } else { 1 };
            return self.b.iconst(k);
        }
        let v = self.operand(I64);
        let mask = self.b.iconst(1023);
        let m = self.b.iand(v, mask);
        self.b.irem(m, s.len)
    }

    /// A statement sequence.
    fn block(&mut self, depth: u32, may_return: bool) {
        let count = 1 + self.rng.below(4);
        self.statements(depth, may_return, count);
    }

    fn statements(&mut self, depth: u32, may_return: bool, count: u64) {
        for _ in 0..count {
            if self.b.is_filled(self.b.current_block()) {
                return;
            }
            let compound = self.budget > 0 && depth < 3;
            let has_calls = !self.opts.callees.is_empty();
            let weights = [
                30,
                8,
                5,
                6,
                8,
                if compound { 8 } else { 0 },
                if compound { 7 } else { 0 },
                if compound { 4 } else { 0 },
                if has_calls && self.budget > 0 { 9 } else { 0 },
                4,
                if self.opts.bitcast { 2 } else { 0 },
                if compound { 2 } else { 0 },
                1,
            ];
            match self.rng.weighted(&weights) {
                0 => {
                    let ty = self.floats();
                    let v = self.fexpr(ty);
                    let t = self.rng.pick(&self.vars[vi(ty)]);
                    self.b.def_var(t, v);
                }
                1 => {
                    let v = self.iexpr();
                    let t = self.rng.pick(&self.vars[2]);
                    self.b.def_var(t, v);
                }
                2 => {
                    let v = self.bexpr();
                    let t = self.rng.pick(&self.vars[3]);
                    self.b.def_var(t, v);
                }
                3 => self.load_stmt(),
                4 => self.store_stmt(),
                5 => {
                    self.budget -= 3;
                    self.if_else(depth, may_return);
                }
                6 => {
                    self.budget -= 3;
                    self.counted_loop(depth, may_return);
                }
                7 => {
                    self.budget -= 3;
                    self.while_loop(depth);
                }
                8 => {
                    self.budget -= 2;
                    self.call_stmt();
                }
                9 => self.alloc_stmt(depth),
                10 => self.bitcast_stmt(),
                11 => {
                    self.budget -= 4;
                    self.region(may_return);
                }
                _ => self.orphan(),
            }
        }
    }

    fn load_stmt(&mut self) {
        let Some(mut s) = self.pick_slice(None, false) else {
            return;
        };
        // Now and then from one of two slices, chosen by `select` (which the
        // derivation refuses for float slices).
        if self.rng.chance(2)
            && let Some(t) = self.pick_slice(Some(s.elem), false)
            && t.val != s.val
        {
            let c = self.cond();
            let val = self.b.select(c, s.val, t.val);
            let len = self.b.len(val);
            s = Sl {
                val,
                len,
                elem: s.elem,
                mutable: false,
            };
        }
        let i = self.index(s);
        let v = self.b.load(s.val, i);
        let ty = s.elem.ty();
        if self.vars[vi(ty)].is_empty() {
            return;
        }
        let t = self.rng.pick(&self.vars[vi(ty)]);
        self.b.def_var(t, v);
    }

    fn store_stmt(&mut self) {
        let Some(s) = self.pick_slice(None, true) else {
            return;
        };
        let ty = s.elem.ty();
        if self.vars[vi(ty)].is_empty() {
            return;
        }
        let v = match ty {
            Type::I64 => self.iexpr(),
            _ => {
                if self.rng.chance(50) {
                    self.fexpr(ty)
                } else {
                    self.var(ty)
                }
            }
        };
        let i = self.index(s);
        self.b.store(s.val, i, v);
        // Now and then the stored element is read back at once.
        if self.rng.chance(20) {
            let r = self.b.load(s.val, i);
            let t = self.rng.pick(&self.vars[vi(ty)]);
            self.b.def_var(t, r);
        }
    }

    fn alloc_stmt(&mut self, depth: u32) {
        let elem = match self.rng.below(10) {
            0..=5 => Elem::F64,
            6 | 7 if self.opts.f32 => Elem::F32,
            _ => Elem::I64,
        };
        let n = match self.rng.below(20) {
            0..=10 => {
                let n = self.rng.range(1, 6);
                self.b.iconst(n)
            }
            11..=14 => {
                let v = self.operand(I64);
                let m = self.b.iconst(7);
                let a = self.b.iand(v, m);
                let one = self.b.iconst(1);
                self.b.iadd(a, one)
            }
            15..=17 => match self.pick_slice(None, false) {
                Some(s) => s.len,
                None => self.b.iconst(2),
            },
            18 if self.raw() => {
                // May be negative.
                let v = self.operand(I64);
                let m = self.b.iconst(7);
                let a = self.b.iand(v, m);
                let three = self.b.iconst(3);
                self.b.isub(a, three)
            }
            19 if self.raw() && depth > 0 => {
                // More than can be had: only inside a branch or loop.
                self.b.iconst(1 << 61)
            }
            _ => self.b.iconst(3),
        };
        let buf = self.b.alloc(elem, n);
        let len = self.b.len(buf);
        let s = Sl {
            val: buf,
            len,
            elem,
            mutable: true,
        };
        self.slices.push(s);
        // Fill it, in a loop over its length, now and then.
        if self.rng.chance(40) && !self.vars[vi(elem.ty())].is_empty() {
            self.loop_over(s, |fx, i| {
                let v = match elem {
                    Elem::I64 => fx.iexpr(),
                    e => fx.fexpr(e.ty()),
                };
                let iv = fx.b.use_var(i);
                fx.b.store(s.val, iv, v);
            });
        }
    }

    /// An unstructured region: blocks that jump and branch to one another at
    /// random, forward and backward (so loops may be irreducible, and blocks have
    /// many predecessors), some branching to a block that returns. A step counter
    /// sends every block to the exit once it runs out, so every run ends (after
    /// adjoint/tests/random.rs).
    fn region(&mut self, may_return: bool) {
        let n = 2 + self.rng.below(4) as usize;
        let k = self.b.declare_named_var("steps", I64);
        let fuel = self.rng.range(3, 12);
        let init = if self.rng.chance(50) {
            self.b.iconst(fuel)
        } else {
            let v = self.operand(I64);
            let m = self.b.iconst(7);
            let a = self.b.iand(v, m);
            let f = self.b.iconst(fuel);
            self.b.iadd(a, f)
        };
        self.b.def_var(k, init);
        let blocks: Vec<_> = (0..n).map(|_| self.b.create_block("u")).collect();
        let exit = self.b.create_block("u.exit");
        self.b.jump(blocks[0]);
        for i in 0..n {
            self.b.switch_to(blocks[i]);
            let mark = self.slices.len();
            let count = 1 + self.rng.below(2);
            self.statements(3, false, count);
            self.slices.truncate(mark);
            let kv = self.b.use_var(k);
            let one = self.b.iconst(1);
            let k1 = self.b.isub(kv, one);
            self.b.def_var(k, k1);
            let zero = self.b.iconst(0);
            let out = self.b.icmp(CmpPred::Le, k1, zero);
            let go = self.b.create_block("u.go");
            self.b.br(out, exit, go);
            self.b.seal_block(go);
            self.b.switch_to(go);
            let next = blocks[(i + 1) % n];
            let other = blocks[self.rng.below(n as u64) as usize];
            let cond = self.cond();
            match self.rng.below(4) {
                1 => self.b.br(cond, next, other),
                2 => self.b.br(cond, other, next),
                3 if may_return => {
                    let r = self.b.create_block("u.ret");
                    self.b.br(cond, next, r);
                    self.b.seal_block(r);
                    self.b.switch_to(r);
                    let vals = self.ret_values();
                    self.b.ret(&vals);
                }
                _ => self.b.jump(next),
            }
        }
        for &b in &blocks {
            self.b.seal_block(b);
        }
        self.b.seal_block(exit);
        self.b.switch_to(exit);
    }

    /// A block nothing jumps to, which computes from the parameters and returns
    /// constants.
    fn orphan(&mut self) {
        if self.results.iter().any(|t| t.is_slice()) {
            return;
        }
        let here = self.b.current_block();
        let dead = self.b.create_block("dead");
        self.b.seal_block(dead);
        self.b.switch_to(dead);
        let params = self.b.sig().params.clone();
        if let Some(i) = params.iter().position(|t| t.is_float()) {
            let p = self.b.param(i);
            let t = self.b.sin(p);
            let _ = self.b.fmul(t, p);
        }
        let results = self.results.clone();
        let vals: Vec<Value> = results
            .iter()
            .map(|&t| match t {
                Type::I64 => self.b.iconst(-1),
                Type::Bool => self.b.bconst(true),
                t => self.k(t, 0.25),
            })
            .collect();
        self.b.ret(&vals);
        self.b.switch_to(here);
    }

    fn bitcast_stmt(&mut self) {
        // The fast-inverse-square-root shape: bits of a float, integer ops, back.
        let x = self.operand(F64);
        let i = self.b.bitcast(I64, x);
        let one = self.b.iconst(1);
        let h = self.b.ishr(i, one);
        let magic = self.b.iconst(0x5FE6_EB50_C7B5_37A9);
        let j = self.b.isub(magic, h);
        let y = self.b.bitcast(F64, j);
        let t = self.rng.pick(&self.vars[0]);
        self.b.def_var(t, y);
    }

    /// `for i in 0..len s { body(i) }` with a counter variable.
    fn loop_over(&mut self, s: Sl, body: impl FnOnce(&mut Self, Variable)) {
        let i = self.b.declare_var(I64);
        let zero = self.b.iconst(0);
        self.b.def_var(i, zero);
        let head = self.b.create_block("fill");
        let bb = self.b.create_block("fill.body");
        let exit = self.b.create_block("fill.exit");
        self.b.jump(head);
        self.b.switch_to(head);
        let iv = self.b.use_var(i);
        let more = self.b.icmp(CmpPred::Lt, iv, s.len);
        self.b.br(more, bb, exit);
        self.b.seal_block(bb);
        self.b.switch_to(bb);
        body(self, i);
        let iv = self.b.use_var(i);
        let one = self.b.iconst(1);
        let i1 = self.b.iadd(iv, one);
        self.b.def_var(i, i1);
        self.b.jump(head);
        self.b.seal_block(head);
        self.b.seal_block(exit);
        self.b.switch_to(exit);
    }

    fn ret_values(&mut self) -> Vec<Value> {
        let results = self.results.clone();
        let mut first_float = true;
        results
            .iter()
            .map(|&t| match t {
                Type::F64 | Type::F32 if std::mem::take(&mut first_float) => {
                    // The first float result depends on every variable of its type,
                    // so that most of the function is live.
                    let vars = self.vars[vi(t)].clone();
                    let mut acc = self.b.use_var(vars[0]);
                    for &v in &vars[1..] {
                        let x = self.b.use_var(v);
                        let k = self.rng.uniform(-1.0, 1.0);
                        let k = self.k(t, k);
                        acc = self.b.fma(x, k, acc);
                    }
                    acc
                }
                Type::F64 | Type::F32 => {
                    if self.rng.chance(40) {
                        let (a, c) = (self.var(t), self.var(t));
                        self.b.fadd(a, c)
                    } else {
                        self.var(t)
                    }
                }
                Type::I64 => self.operand(I64),
                Type::Bool => self.operand(BOOL),
                Type::Slice { .. } => {
                    // Only a parameter slice may be returned.
                    self.b.param(0)
                }
            })
            .collect()
    }

    fn cond(&mut self) -> Value {
        match self.rng.below(4) {
            0 => self.operand(BOOL),
            1 => {
                let (a, c) = (self.operand(I64), self.operand(I64));
                let p = self.rng.pick(&CmpPred::ALL);
                self.b.icmp(p, a, c)
            }
            _ => {
                let ty = self.floats();
                let (a, c) = (self.var(ty), self.operand(ty));
                let p = self.rng.pick(&CmpPred::ALL);
                self.b.fcmp(p, a, c)
            }
        }
    }

    fn if_else(&mut self, depth: u32, may_return: bool) {
        let cond = self.cond();
        let then_b = self.b.create_block("then");
        let else_b = self.b.create_block("else");
        let join = self.b.create_block("join");
        self.b.br(cond, then_b, else_b);
        self.b.seal_block(then_b);
        self.b.seal_block(else_b);
        for arm in [then_b, else_b] {
            self.b.switch_to(arm);
            let mark = self.slices.len();
            // Only the `then` arm may return, so `join` stays reachable.
            if may_return && arm == then_b && self.rng.chance(25) {
                if self.rng.chance(50) {
                    self.block(depth + 1, false);
                }
                let vals = self.ret_values();
                self.b.ret(&vals);
            } else {
                self.block(depth + 1, may_return);
                if !self.b.is_filled(self.b.current_block()) {
                    self.b.jump(join);
                }
            }
            self.slices.truncate(mark);
        }
        self.b.seal_block(join);
        self.b.switch_to(join);
    }

    fn counted_loop(&mut self, depth: u32, may_return: bool) {
        let over = if self.rng.chance(40) {
            self.pick_slice(None, false)
        } else {
            None
        };
        let end = match over {
            Some(s) => s.len,
            None => {
                if self.rng.chance(50) {
                    let n = self.rng.range(0, 4);
                    self.b.iconst(n)
                } else {
                    let v = self.operand(I64);
                    let m = self.b.iconst(7);
                    self.b.iand(v, m)
                }
            }
        };
        let i = self.b.declare_var(I64);
        let zero = self.b.iconst(0);
        self.b.def_var(i, zero);
        let head = self.b.create_block("head");
        let body = self.b.create_block("body");
        let exit = self.b.create_block("exit");
        self.b.jump(head);
        self.b.switch_to(head);
        let iv = self.b.use_var(i);
        let more = self.b.icmp(CmpPred::Lt, iv, end);
        self.b.br(more, body, exit);
        self.b.seal_block(body);
        self.b.switch_to(body);
        self.counters.push(i);
        if let Some(s) = over {
            self.slice_loops.push((s.val, i));
        }
        let mark = self.slices.len();
        self.block(depth + 1, may_return);
        self.slices.truncate(mark);
        if over.is_some() {
            self.slice_loops.pop();
        }
        self.counters.pop();
        let iv = self.b.use_var(i);
        let one = self.b.iconst(1);
        let i1 = self.b.iadd(iv, one);
        self.b.def_var(i, i1);
        self.b.jump(head);
        self.b.seal_block(head);
        self.b.seal_block(exit);
        self.b.switch_to(exit);
    }

    /// `while v PRED w and k < K { ...; v = update; k += 1 }`.
    fn while_loop(&mut self, depth: u32) {
        let ty = self.floats();
        let v = self.rng.pick(&self.vars[vi(ty)]);
        let w = self.rng.pick(&self.vars[vi(ty)]);
        let k = self.b.declare_var(I64);
        let zero = self.b.iconst(0);
        self.b.def_var(k, zero);
        let bound = self.rng.range(1, 10);
        let pred = self.rng.pick(&CmpPred::ALL);
        let head = self.b.create_block("while");
        let body = self.b.create_block("wbody");
        let exit = self.b.create_block("wexit");
        self.b.jump(head);
        self.b.switch_to(head);
        let (vv, wv) = (self.b.use_var(v), self.b.use_var(w));
        let go1 = if self.rng.chance(50) {
            self.b.fcmp(pred, vv, wv)
        } else {
            let av = self.b.fabs(vv);
            let x = self.rng.uniform(0.1, 2.0);
            let c = self.k(ty, x);
            self.b.fcmp(pred, av, c)
        };
        let kv = self.b.use_var(k);
        let kb = self.b.iconst(bound);
        let go2 = self.b.icmp(CmpPred::Lt, kv, kb);
        let go = self.b.and(go1, go2);
        self.b.br(go, body, exit);
        self.b.seal_block(body);
        self.b.switch_to(body);
        let mark = self.slices.len();
        if self.rng.chance(60) {
            self.block(depth + 1, false);
        }
        self.slices.truncate(mark);
        let (vv, wv) = (self.b.use_var(v), self.b.use_var(w));
        let nv = if self.rng.chance(50) {
            let h = self.scale(ty, vv, 0.5);
            let t = self.b.tanh(wv);
            let t = self.scale(ty, t, 0.1);
            self.b.fadd(h, t)
        } else {
            let x = self.rng.uniform(0.1, 0.7);
            let step = self.k(ty, x);
            self.b.fadd(vv, step)
        };
        self.b.def_var(v, nv);
        let kv = self.b.use_var(k);
        let one = self.b.iconst(1);
        let k1 = self.b.iadd(kv, one);
        self.b.def_var(k, k1);
        self.b.jump(head);
        self.b.seal_block(head);
        self.b.seal_block(exit);
        self.b.switch_to(exit);
    }

    fn call_stmt(&mut self) {
        let callee = self.rng.pick_ref(&self.opts.callees).clone();
        let args = self.call_args(&callee);
        let res = self.b.call(callee.id, &args);
        self.assign_results(&callee.sig.results, &res);
    }

    fn assign_results(&mut self, types: &[Type], res: &[Value]) {
        for (&t, &r) in types.iter().zip(res) {
            if t.is_slice() || self.vars[vi(t)].is_empty() || self.rng.chance(10) {
                continue;
            }
            let v = self.rng.pick(&self.vars[vi(t)]);
            self.b.def_var(v, r);
        }
    }

    fn call_args(&mut self, callee: &Callee) -> Vec<Value> {
        let mut used: Vec<Value> = Vec::new();
        let alias = self.rng.chance(4);
        let mut args = Vec::new();
        for (i, &t) in callee.sig.params.iter().enumerate() {
            let a = match t {
                Type::Slice { elem, mutable } => {
                    let fits: Vec<Sl> = self
                        .slices
                        .iter()
                        .copied()
                        .filter(|s| s.elem == elem && (s.mutable || !mutable))
                        .filter(|s| alias || !used.contains(&s.val))
                        .collect();
                    if fits.is_empty() || self.rng.chance(10) {
                        let n = self.rng.range(1, 4);
                        let n = self.b.iconst(n);
                        let buf = self.b.alloc(elem, n);
                        let len = self.b.len(buf);
                        self.slices.push(Sl {
                            val: buf,
                            len,
                            elem,
                            mutable: true,
                        });
                        buf
                    } else {
                        fits[self.rng.below(fits.len() as u64) as usize].val
                    }
                }
                Type::I64 if callee.rec_k == Some(i) => {
                    let v = self.operand(I64);
                    if self.rng.chance(6) {
                        v
                    } else {
                        let m = self.b.iconst(15);
                        self.b.iand(v, m)
                    }
                }
                Type::F32 if self.vars[1].is_empty() => {
                    let x = self.var(F64);
                    self.b.cast(F32, x)
                }
                t => {
                    if t.is_float() && self.rng.chance(50) {
                        self.fexpr(t)
                    } else {
                        self.operand(t)
                    }
                }
            };
            used.push(a);
            args.push(a);
        }
        args
    }

    fn finish(mut self) -> Function {
        if !self.b.is_filled(self.b.current_block()) {
            let vals = self.ret_values();
            self.b.ret(&vals);
        }
        match self.b.finish() {
            Ok(f) => f,
            Err(e) => panic!("the generator made a function the builder refuses: {e}"),
        }
    }
}

trait PickRef {
    fn pick_ref<'x, T>(&mut self, xs: &'x [T]) -> &'x T;
}

impl PickRef for Rng {
    fn pick_ref<'x, T>(&mut self, xs: &'x [T]) -> &'x T {
        &xs[self.below(xs.len() as u64) as usize]
    }
}

/// A random scalar type for a signature.
fn scalar_type(rng: &mut Rng, f32: bool) -> Type {
    match rng.weighted(&[10, if f32 { 4 } else { 0 }, 3, 2]) {
        0 => F64,
        1 => F32,
        2 => I64,
        _ => BOOL,
    }
}

/// A random parameter type.
fn param_type(rng: &mut Rng, f32: bool) -> Type {
    let e32 = if f32 { 3 } else { 0 };
    match rng.weighted(&[10, e32, 3, 2, 5, 5, e32, e32, 2, 2]) {
        0 => F64,
        1 => F32,
        2 => I64,
        3 => BOOL,
        4 => Type::slice(Elem::F64),
        5 => Type::slice_mut(Elem::F64),
        6 => Type::slice(Elem::F32),
        7 => Type::slice_mut(Elem::F32),
        8 => Type::slice(Elem::I64),
        _ => Type::slice_mut(Elem::I64),
    }
}

fn random_sig(rng: &mut Rng, f32: bool, max_params: u64, max_results: u64) -> Signature {
    let np = 1 + rng.below(max_params);
    let params: Vec<Type> = (0..np).map(|_| param_type(rng, f32)).collect();
    let nr = rng.below(max_results + 1);
    let mut results: Vec<Type> = (0..nr).map(|_| scalar_type(rng, f32)).collect();
    let has_mut = params.iter().any(|t| t.is_mut_slice());
    if results.is_empty() && !has_mut {
        results.push(F64);
    }
    Signature::new(params, results)
}

/// A float literal as the text format writes it (always with a `.` or an exponent).
fn lit(x: f64) -> String {
    format!("{x:?}")
}

/// The templates: functions with `nodiff`, `vjp` (over scalars, over a slice, and a
/// rule pair over a `mut` slice), `jvp`, `overlay` declarations, and an extern with
/// an extern rule. Returns the text and the names of the functions a body
/// may call.
fn templates(rng: &mut Rng, f32: bool, hosts: bool) -> (String, Vec<&'static str>) {
    let mut text = String::new();
    let mut names = Vec::new();
    let a = lit((rng.uniform(0.5, 4.0) * 8.0).round() / 8.0);
    let c = lit((rng.uniform(-2.0, 2.0) * 8.0).round() / 8.0);
    if rng.chance(35) {
        text += &format!(
            "func @nd_step(%x: f64) -> f64 {{\nentry:\n    %s = fmul %x, {a}\n    %f = floor %s\n    %r = fdiv %f, {a}\n    ret %r\n}}\nnodiff @nd_step\n"
        );
        names.push("nd_step");
    }
    if f32 && rng.chance(30) {
        text += "func @nd_round32(%x: f32, %n: i64) -> (f32, i64) {\nentry:\n    %c = ceil %x\n    %i = cast i64 %x\n    %m = iadd %i, %n\n    ret %c, %m\n}\nnodiff @nd_round32\n";
        names.push("nd_round32");
    }
    if rng.chance(35) {
        text += &format!(
            "func @vj(%x: f64, %n: i64) -> f64 {{\nentry:\n    %m = iand %n, 7\n    %nf = cast f64 %m\n    %s = sin %x\n    %p = fmul %s, {c}\n    %q = fmul %nf, %x\n    %r = fadd %p, %q\n    ret %r\n}}\n\
             func @vj_rule(%x: f64, %n: i64, %dy: f64) -> f64 {{\nentry:\n    %m = iand %n, 7\n    %nf = cast f64 %m\n    %c = cos %x\n    %p = fmul %c, {c}\n    %d = fadd %p, %nf\n    %r = fmul %d, %dy\n    ret %r\n}}\nvjp @vj = @vj_rule\n\
             func @vj_jvp(%x: f64, %n: i64, %dx: f64) -> f64 {{\nentry:\n    %m = iand %n, 7\n    %nf = cast f64 %m\n    %c = cos %x\n    %p = fmul %c, {c}\n    %d = fadd %p, %nf\n    %r = fmul %d, %dx\n    ret %r\n}}\njvp @vj = @vj_jvp\n"
        );
        names.push("vj");
    }
    if f32 && rng.chance(30) {
        text += "func @vj2(%x: f32, %y: f32) -> (f32, f32) {\nentry:\n    %p = fmul %x, %y\n    %t = tanh %x\n    %s = fadd %t, %y\n    ret %p, %s\n}\n\
                 func @vj2_rule(%x: f32, %y: f32, %dp: f32, %ds: f32) -> (f32, f32) {\nentry:\n    %t = tanh %x\n    %tt = fmul %t, %t\n    %one = const f32 1.0\n    %dt = fsub %one, %tt\n    %a = fmul %y, %dp\n    %b = fmul %dt, %ds\n    %dx = fadd %a, %b\n    %c = fmul %x, %dp\n    %dy = fadd %c, %ds\n    ret %dx, %dy\n}\nvjp @vj2 = @vj2_rule\n\
                 func @vj2_jvp(%x: f32, %y: f32, %dx: f32, %dy: f32) -> (f32, f32) {\nentry:\n    %a = fmul %y, %dx\n    %b = fmul %x, %dy\n    %dp = fadd %a, %b\n    %t = tanh %x\n    %tt = fmul %t, %t\n    %one = const f32 1.0\n    %dt = fsub %one, %tt\n    %c = fmul %dt, %dx\n    %ds = fadd %c, %dy\n    ret %dp, %ds\n}\njvp @vj2 = @vj2_jvp\n";
        names.push("vj2");
    }
    if rng.chance(30) {
        text += "func @softplus(%x: f64) -> f64 {\nentry:\n    %e = exp %x\n    %e1 = fadd 1.0, %e\n    %r = log %e1\n    ret %r\n}\n\
                 func @softplus_stable(%x: f64) -> f64 {\nentry:\n    %m = fmax %x, 0.0\n    %a = fabs %x\n    %na = fneg %a\n    %e = exp %na\n    %e1 = fadd 1.0, %e\n    %l = log %e1\n    %r = fadd %m, %l\n    ret %r\n}\noverlay @softplus = @softplus_stable\n";
        names.push("softplus");
    }
    if rng.chance(25) {
        text += "func @sum_fwd(%s: [f64], %k: f64) -> f64 {\nentry:\n    %n = len %s\n    jump head\nhead:\n    %i = phi i64 [entry: 0, body: %i1]\n    %acc = phi f64 [entry: 0.0, body: %acc1]\n    %more = icmp lt %i, %n\n    br %more, body, exit\nbody:\n    %v = load %s[%i]\n    %acc1 = fadd %acc, %v\n    %i1 = iadd %i, 1\n    jump head\nexit:\n    %r = fmul %acc, %k\n    ret %r\n}\n\
                 func @sum_rev(%s: [f64], %k: f64) -> f64 {\nentry:\n    %n = len %s\n    jump head\nhead:\n    %i = phi i64 [entry: %n, body: %i1]\n    %acc = phi f64 [entry: 0.0, body: %acc1]\n    %more = icmp gt %i, 0\n    br %more, body, exit\nbody:\n    %i1 = isub %i, 1\n    %v = load %s[%i1]\n    %acc1 = fadd %acc, %v\n    jump head\nexit:\n    %r = fmul %acc, %k\n    ret %r\n}\noverlay @sum_fwd = @sum_rev\n";
        names.push("sum_fwd");
    }
    if rng.chance(25) {
        // A `vjp` and a `jvp` over a slice: vs(s, k) = k sum s_i^2.
        text += "func @vs(%s: [f64], %k: f64) -> f64 {\nentry:\n    %n = len %s\n    jump head\nhead:\n    %i = phi i64 [entry: 0, body: %i1]\n    %acc = phi f64 [entry: 0.0, body: %acc1]\n    %more = icmp lt %i, %n\n    br %more, body, exit\nbody:\n    %v = load %s[%i]\n    %vv = fmul %v, %v\n    %acc1 = fadd %acc, %vv\n    %i1 = iadd %i, 1\n    jump head\nexit:\n    %r = fmul %acc, %k\n    ret %r\n}\n\
                 func @vs_rule(%s: [f64], %k: f64, %ds: mut [f64], %dy: f64) -> f64 {\nentry:\n    %n = len %s\n    %kd = fmul %k, %dy\n    %two = fmul 2.0, %kd\n    jump head\nhead:\n    %i = phi i64 [entry: 0, body: %i1]\n    %acc = phi f64 [entry: 0.0, body: %acc1]\n    %more = icmp lt %i, %n\n    br %more, body, exit\nbody:\n    %v = load %s[%i]\n    %vv = fmul %v, %v\n    %acc1 = fadd %acc, %vv\n    %g = fmul %two, %v\n    %d0 = load %ds[%i]\n    %d1 = fadd %d0, %g\n    store %ds[%i], %d1\n    %i1 = iadd %i, 1\n    jump head\nexit:\n    %dk = fmul %acc, %dy\n    ret %dk\n}\nvjp @vs = @vs_rule\n\
                 func @vs_jvp(%s: [f64], %k: f64, %ts: [f64], %tk: f64) -> f64 {\nentry:\n    %n = len %s\n    jump head\nhead:\n    %i = phi i64 [entry: 0, body: %i1]\n    %acc = phi f64 [entry: 0.0, body: %acc1]\n    %dot = phi f64 [entry: 0.0, body: %dot1]\n    %more = icmp lt %i, %n\n    br %more, body, exit\nbody:\n    %v = load %s[%i]\n    %vv = fmul %v, %v\n    %acc1 = fadd %acc, %vv\n    %t = load %ts[%i]\n    %vt = fmul %v, %t\n    %dot1 = fadd %dot, %vt\n    %i1 = iadd %i, 1\n    jump head\nexit:\n    %a = fmul %acc, %tk\n    %kd = fmul %k, %dot\n    %b = fmul 2.0, %kd\n    %r = fadd %a, %b\n    ret %r\n}\njvp @vs = @vs_jvp\n";
        names.push("vs");
    }
    if rng.chance(25) {
        // A rule pair over a `mut` slice: vp(s, k) scales s by k in place and
        // returns the new sum; the forward rule keeps the old contents on the tape.
        text += "func @vp(%s: mut [f64], %k: f64) -> f64 {\nentry:\n    %n = len %s\n    jump head\nhead:\n    %i = phi i64 [entry: 0, body: %i1]\n    %acc = phi f64 [entry: 0.0, body: %acc1]\n    %more = icmp lt %i, %n\n    br %more, body, exit\nbody:\n    %v = load %s[%i]\n    %w = fmul %v, %k\n    store %s[%i], %w\n    %acc1 = fadd %acc, %w\n    %i1 = iadd %i, 1\n    jump head\nexit:\n    ret %acc\n}\n\
                 func @vp_fwd(%s: mut [f64], %k: f64) -> f64 {\nentry:\n    %n = len %s\n    %h = tape_alloc f64, %n\n    %old = tape_view f64, %h\n    jump head\nhead:\n    %i = phi i64 [entry: 0, body: %i1]\n    %more = icmp lt %i, %n\n    br %more, body, exit\nbody:\n    %v = load %s[%i]\n    store %old[%i], %v\n    %i1 = iadd %i, 1\n    jump head\nexit:\n    %r = call @vp(%s, %k)\n    push %h\n    ret %r\n}\n\
                 func @vp_rvs(%k: f64, %ds: mut [f64], %dy: f64) -> f64 {\nentry:\n    %h = pop i64\n    %old = tape_view f64, %h\n    %n = len %old\n    jump head\nhead:\n    %i = phi i64 [entry: 0, body: %i1]\n    %dk = phi f64 [entry: 0.0, body: %dk1]\n    %more = icmp lt %i, %n\n    br %more, body, exit\nbody:\n    %d = load %ds[%i]\n    %g = fadd %d, %dy\n    %v = load %old[%i]\n    %gv = fmul %g, %v\n    %dk1 = fadd %dk, %gv\n    %gk = fmul %g, %k\n    store %ds[%i], %gk\n    %i1 = iadd %i, 1\n    jump head\nexit:\n    ret %dk\n}\nvjp @vp = @vp_fwd, @vp_rvs\n\
                 func @vp_jvp(%s: [f64], %k: f64, %ts: mut [f64], %tk: f64) -> f64 {\nentry:\n    %n = len %s\n    jump head\nhead:\n    %i = phi i64 [entry: 0, body: %i1]\n    %acc = phi f64 [entry: 0.0, body: %acc1]\n    %more = icmp lt %i, %n\n    br %more, body, exit\nbody:\n    %v = load %s[%i]\n    %t = load %ts[%i]\n    %a = fmul %t, %k\n    %b = fmul %v, %tk\n    %c = fadd %a, %b\n    store %ts[%i], %c\n    %acc1 = fadd %acc, %c\n    %i1 = iadd %i, 1\n    jump head\nexit:\n    ret %acc\n}\njvp @vp = @vp_jvp\n";
        names.push("vp");
    }
    if hosts {
        text += "extern @host_tanh(f64) -> f64\nextern @host_tanh_vjp(f64, f64) -> f64\nvjp @host_tanh = @host_tanh_vjp\nextern @host_tanh_jvp(f64, f64) -> f64\njvp @host_tanh = @host_tanh_jvp\n";
        names.push("host_tanh");
    }
    (text, names)
}

/// The program of one seed.
pub fn program(rng: &mut Rng) -> Program {
    let f32 = rng.chance(35);
    let hosts = rng.chance(6);
    let bitcast = rng.chance(8);
    let raw = rng.pick(&[0, 0, 0, 3, 8, 20, 40]);
    let (text, names) = templates(rng, f32, hosts);
    let mut m = parse(&text).unwrap_or_else(|e| panic!("templates: {e}\n{text}"));
    let mut callees: Vec<Callee> = names
        .iter()
        .map(|n| {
            let id = m.func_by_name(n).expect("template");
            Callee {
                id,
                sig: m.sig(id).clone(),
                rec_k: None,
            }
        })
        .collect();

    // Recursive functions: @r alone, or @r and @s calling each other.
    let mut rec: Vec<(FuncId, FuncId)> = Vec::new();
    if rng.chance(30) {
        let ty = if f32 && rng.chance(30) { F32 } else { F64 };
        let mut params = vec![ty, I64];
        if rng.chance(40) {
            params.push(if rng.chance(50) {
                Type::slice(Elem::F64)
            } else {
                Type::slice_mut(Elem::F64)
            });
        }
        let mut results = vec![ty];
        if rng.chance(20) {
            results.push(I64);
        }
        let sig = Signature::new(params, results);
        let r = m.declare("r", sig.clone()).expect("fresh name");
        if rng.chance(40) {
            let s = m.declare("s", sig.clone()).expect("fresh name");
            rec.push((r, s));
            rec.push((s, r));
        } else {
            rec.push((r, r));
        }
        callees.push(Callee {
            id: r,
            sig,
            rec_k: Some(1),
        });
    }

    let helper_count = rng.below(4) as usize;
    let mut helpers = Vec::new();
    for i in 0..helper_count {
        let sig = random_sig(rng, f32, 4, 2);
        let id = m
            .declare(&format!("h{i}"), sig.clone())
            .expect("fresh name");
        helpers.push(Callee {
            id,
            sig,
            rec_k: None,
        });
    }
    let main_sig = random_sig(rng, f32, 6, 3);
    let main = m.declare("f", main_sig).expect("fresh name");

    let mut bodies: Vec<(FuncId, Function)> = Vec::new();
    for &(id, partner) in &rec {
        let opts = FnOpts {
            callees: Vec::new(),
            budget: 3,
            raw,
            f32,
            bitcast,
            kind: Kind::Rec { partner },
        };
        bodies.push((id, rec_body(&m, id, rng, opts)));
    }
    for (i, h) in helpers.iter().enumerate() {
        let mut cs: Vec<Callee> = callees.clone();
        cs.extend(helpers[..i].iter().cloned());
        if rng.chance(40) {
            cs.clear();
        }
        let opts = FnOpts {
            callees: cs,
            budget: 8,
            raw,
            f32,
            bitcast,
            kind: Kind::Plain,
        };
        let mut fx = Fx::new(&m, h.id, rng, opts);
        let n = 2 + fx.rng.below(4);
        fx.statements(0, true, n);
        bodies.push((h.id, fx.finish()));
    }
    let mut cs = callees.clone();
    cs.extend(helpers.iter().cloned());
    let large = rng.chance(10);
    let opts = FnOpts {
        callees: cs,
        budget: if large { 48 } else { 16 },
        raw,
        f32,
        bitcast,
        kind: Kind::Plain,
    };
    let mut fx = Fx::new(&m, main, rng, opts);
    // Every helper is called at least once, most of the time.
    let must: Vec<Callee> = fx.opts.callees.clone();
    let n = if large {
        10 + fx.rng.below(15)
    } else {
        3 + fx.rng.below(6)
    };
    fx.statements(0, true, n);
    for c in must {
        if fx.b.is_filled(fx.b.current_block()) || fx.rng.chance(30) {
            continue;
        }
        let args = fx.call_args(&c);
        let res = fx.b.call(c.id, &args);
        fx.assign_results(&c.sig.results, &res);
    }
    if !fx.b.is_filled(fx.b.current_block()) {
        fx.block(0, false);
    }
    bodies.push((main, fx.finish()));
    for (id, body) in bodies {
        m.define(id, body).expect("declared");
    }
    Program {
        module: m,
        uses_hosts: hosts,
    }
}

/// A recursive body: `if k <= 0 { base } else { ...; call partner(.., k - d, ..) }`.
fn rec_body(m: &Module, id: FuncId, rng: &mut Rng, opts: FnOpts) -> Function {
    let Kind::Rec { partner } = opts.kind else {
        unreachable!()
    };
    let sig = m.sig(id).clone();
    let mut fx = Fx::new(m, id, rng, opts);
    if fx.rng.chance(50) {
        fx.block(1, false);
    }
    let k = fx.b.param(1);
    let zero = fx.b.iconst(0);
    let stop = fx.b.icmp(CmpPred::Le, k, zero);
    let base = fx.b.create_block("base");
    let step = fx.b.create_block("step");
    fx.b.br(stop, base, step);
    fx.b.seal_block(base);
    fx.b.seal_block(step);
    fx.b.switch_to(base);
    let mark = fx.slices.len();
    fx.block(1, false);
    if !fx.b.is_filled(fx.b.current_block()) {
        let vals = fx.ret_values();
        fx.b.ret(&vals);
    }
    fx.slices.truncate(mark);
    fx.b.switch_to(step);
    fx.block(1, false);
    let d = fx.rng.range(1, 2);
    let d = fx.b.iconst(d);
    let k1 = fx.b.isub(k, d);
    let mut args = Vec::new();
    for (i, &t) in sig.params.iter().enumerate() {
        args.push(match t {
            _ if i == 1 => k1,
            Type::Slice { .. } => fx.b.param(i),
            t => {
                if fx.rng.chance(60) {
                    fx.fexpr(t)
                } else {
                    fx.var(t)
                }
            }
        });
    }
    let res = fx.b.call(partner, &args);
    let ty = sig.results[0];
    let x = fx.var(ty);
    let h = fx.scale(ty, res[0], 0.5);
    let y = fx.b.fadd(h, x);
    let v = fx.rng.pick(&fx.vars[vi(ty)]);
    fx.b.def_var(v, y);
    if res.len() > 1 {
        let t = fx.rng.pick(&fx.vars[2]);
        fx.b.def_var(t, res[1]);
    }
    fx.finish()
}
