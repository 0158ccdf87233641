//! The rule table: for every op, how its reverse adds `∂y/∂a · ct[y]` into the
//! cotangent of each operand `a`, and what that reads.
//!
//! [`op_rule`] maps each [`Opcode`] to an [`OpRule`], JAX's `primitive_transposes` in
//! one `match`, so the compiler proves the table total and a test walks
//! [`Opcode::ALL`] to check that every op that can carry a derivative has a rule. An
//! op is one of three kinds:
//!
//! - [`OpRule::Zero`]: its result has zero derivative, or is not a float (integer and
//!   boolean ops, comparisons, `floor`, `ceil`, `bitcast`, `const`). The derivation
//!   emits nothing for it, and nothing varies through it.
//! - [`OpRule::Float`]: a [`FloatRule`] says, for each operand, whether a derivative
//!   flows to it and which values its contribution reads (operands, the result); the
//!   forward pass saves exactly those, per block, and the rule's `emit` function
//!   writes the contribution into the pullback. It is called only for operands that
//!   are active, and only when the result's cotangent is not the symbolic zero.
//! - [`OpRule::Memory`]: `load`, `store`, `alloc` and `call`, whose reverse moves
//!   cotangents through shadows and callee rules; [`stmt`](crate::stmt) and the
//!   [plan](crate::plan) write them.
//! - [`OpRule::Unsupported`]: tape ops, which appear only in derived code; the
//!   derivation reports them by name.
//!
//! Conventions, where the derivative does not exist or needs a choice (each is
//! written again next to its rule): `fabs` at 0 gives 0; `fmin`/`fmax` at ties give
//! the cotangent to the first operand; `floor`, `ceil`, integer ops, comparisons,
//! `cast` to or from an integer and `bitcast` have zero derivative; `pow x, y` gives
//! `∂/∂x = y x^(y-1)` (0 where `y = 0`) and `∂/∂y = x^y log x` (0 where `x = 0`);
//! `powi x, n` gives `n x^(n-1)` (0 where `n = 0`); `hypot` and `atan2` give 0 at
//! the origin (`hypot` as `fabs` at 0; `atan2` jumps there); `select c, a, b` routes the
//! cotangent to the chosen arm; `cast` between `f32` and `f64` converts the cotangent.
//! Every rule here is needed for correctness: none exists for speed only.

use gradlift_ir::{CmpPred, FunctionBuilder, Opcode, Scalar, Type, Value};

/// What the reverse of an op does. See the [module docs](self).
#[derive(Copy, Clone, Debug)]
pub(crate) enum OpRule {
    /// No derivative flows through the op; the string says why (to the reader of
    /// the table: nothing prints it).
    Zero(#[allow(dead_code, reason = "documents the table")] &'static str),
    /// A float op with a derivative.
    Float(FloatRule),
    /// A memory op or a call (`load`, `store`, `alloc`, `call`): reversed by the
    /// derivation itself (see [`stmt`](crate::stmt)), since its reverse reads and
    /// writes shadows rather than combining cotangents.
    Memory,
    /// Not derived; the string says what it is.
    Unsupported(&'static str),
}

/// The reverse of a float op: per operand, what its contribution reads, and how to
/// emit it.
#[derive(Copy, Clone, Debug)]
pub(crate) struct FloatRule {
    /// One entry per operand: `None` if no derivative flows to it (the condition of
    /// `select`, the exponent of `powi`), else what its contribution reads.
    pub(crate) operands: &'static [Option<Reads>],
    /// How the contribution is written.
    pub(crate) emit: Emit,
}

impl FloatRule {
    /// Emits the contribution `∂y/∂a_k · ct[y]` to operand `k` into the pullback, or
    /// returns `None` when it is known to be zero. Reads only what `operands[k]`
    /// lists.
    pub(crate) fn emit(&self, r: &mut RevCtx<'_, '_>, k: usize) -> Option<Value> {
        match self.emit {
            Emit::Custom(f) => f(r, k),
            Emit::OfArg(d) => {
                let x = r.arg(0);
                let d = d(r, x);
                Some(r.ct_times(d))
            }
            Emit::OfResult(d) => {
                let y = r.result();
                let d = d(r, y);
                Some(r.ct_times(d))
            }
        }
    }
}

/// The shapes of [`FloatRule`]s (JAX's `deflinear`, `defjvp`): the helpers that
/// make them keep the table short.
#[derive(Copy, Clone, Debug)]
pub(crate) enum Emit {
    /// Any rule: the contribution to operand `k`, or `None` when it is zero.
    Custom(fn(&mut RevCtx<'_, '_>, usize) -> Option<Value>),
    /// A unary op with derivative `d(x)`: the contribution is `ct · d(x)`.
    OfArg(fn(&mut RevCtx<'_, '_>, Value) -> Value),
    /// A unary op with derivative `d(y)` of its result: the contribution is
    /// `ct · d(y)`.
    OfResult(fn(&mut RevCtx<'_, '_>, Value) -> Value),
}

/// The values a contribution reads, beyond the result's cotangent: the forward pass
/// saves them (constants need no saving).
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub(crate) struct Reads {
    /// Operands, by index.
    pub(crate) args: &'static [usize],
    /// The result.
    pub(crate) result: bool,
}

const NOTHING: Reads = Reads {
    args: &[],
    result: false,
};
const ARG0: Reads = Reads {
    args: &[0],
    result: false,
};
const ARG1: Reads = Reads {
    args: &[1],
    result: false,
};
const ARGS01: Reads = Reads {
    args: &[0, 1],
    result: false,
};
const RESULT: Reads = Reads {
    args: &[],
    result: true,
};
const READS_ARG0_RESULT: Reads = Reads {
    args: &[0],
    result: true,
};
const READS_ARG1_RESULT: Reads = Reads {
    args: &[1],
    result: true,
};

/// An operand as the pullback has it.
#[derive(Copy, Clone, Debug)]
pub(crate) enum ArgVal {
    /// Saved by the forward pass and popped: this pullback value.
    Saved(Value),
    /// A constant of the primal.
    Const(Scalar),
    /// Not available (not saved): a rule that reads it is a bug.
    Missing,
}

/// What a rule's `emit` function gets: the builder of the pullback, the operands and
/// result as the pullback has them, and the result's cotangent.
pub(crate) struct RevCtx<'a, 'm> {
    /// The pullback's builder, positioned where the contribution goes.
    pub(crate) b: &'a mut FunctionBuilder<'m>,
    args: &'a [ArgVal],
    arg_types: &'a [Type],
    result: Option<Value>,
    ty: Type,
    ct: Value,
    /// Set when the rule read something that was not saved (a bug in the table).
    pub(crate) missing: Option<String>,
}

impl<'a, 'm> RevCtx<'a, 'm> {
    /// A context for one instruction's reverse. `args` and `arg_types` have one entry
    /// per operand; `result` is the saved result, if the rule reads it; `ty` the
    /// result type; `ct` the result's cotangent.
    pub(crate) fn new(
        b: &'a mut FunctionBuilder<'m>,
        args: &'a [ArgVal],
        arg_types: &'a [Type],
        result: Option<Value>,
        ty: Type,
        ct: Value,
    ) -> RevCtx<'a, 'm> {
        RevCtx {
            b,
            args,
            arg_types,
            result,
            ty,
            ct,
            missing: None,
        }
    }

    /// Operand `k` in the pullback. An `f32` constant becomes a `const f32`
    /// instruction, so that no op ever has two `f32` literals (which would parse back
    /// as `f64`).
    pub(crate) fn arg(&mut self, k: usize) -> Value {
        match self.args.get(k) {
            Some(ArgVal::Saved(v)) => *v,
            Some(ArgVal::Const(c @ Scalar::F32(_))) => self.b.const_inst(*c),
            Some(ArgVal::Const(c)) => self.b.constant(*c),
            _ => {
                self.missing
                    .get_or_insert_with(|| format!("operand {} was not saved", k + 1));
                self.ct
            }
        }
    }

    /// Operand `k` if it is a constant of the primal.
    pub(crate) fn arg_const(&self, k: usize) -> Option<Scalar> {
        match self.args.get(k) {
            Some(ArgVal::Const(c)) => Some(*c),
            _ => None,
        }
    }

    /// The type of operand `k`.
    pub(crate) fn arg_type(&self, k: usize) -> Type {
        self.arg_types.get(k).copied().unwrap_or(self.ty)
    }

    /// The result in the pullback (saved by the forward pass).
    pub(crate) fn result(&mut self) -> Value {
        match self.result {
            Some(v) => v,
            None => {
                self.missing
                    .get_or_insert_with(|| "the result was not saved".to_string());
                self.ct
            }
        }
    }

    /// The result's cotangent.
    pub(crate) fn ct(&self) -> Value {
        self.ct
    }

    /// The result's type.
    pub(crate) fn ty(&self) -> Type {
        self.ty
    }

    /// A float literal of the result's type. Rules combine it only with values that
    /// are not constants.
    pub(crate) fn lit(&mut self, x: f64) -> Value {
        match self.ty {
            Type::F32 => self.b.f32const(x as f32),
            _ => self.b.fconst(x),
        }
    }

    /// The zero of the result's type.
    fn zero(&mut self) -> Value {
        self.lit(0.0)
    }

    /// `select c, ct, 0`: the cotangent where `c` holds, zero elsewhere.
    fn ct_if(&mut self, c: Value) -> Value {
        let (g, z) = (self.ct, self.zero());
        self.b.select(c, g, z)
    }

    /// `select c, 0, ct`: the cotangent where `c` fails, zero elsewhere.
    fn ct_unless(&mut self, c: Value) -> Value {
        let (g, z) = (self.ct, self.zero());
        self.b.select(c, z, g)
    }

    /// `ct * d`.
    fn ct_times(&mut self, d: Value) -> Value {
        let g = self.ct;
        self.b.fmul(g, d)
    }
}

/// A float op with its own emit function.
fn float(
    operands: &'static [Option<Reads>],
    emit: fn(&mut RevCtx<'_, '_>, usize) -> Option<Value>,
) -> OpRule {
    OpRule::Float(FloatRule {
        operands,
        emit: Emit::Custom(emit),
    })
}

/// A unary op whose derivative is a function of its operand `x`:
/// `ct[x] += ct · d(x)`.
fn unary_of_arg(d: fn(&mut RevCtx<'_, '_>, Value) -> Value) -> OpRule {
    OpRule::Float(FloatRule {
        operands: &[Some(ARG0)],
        emit: Emit::OfArg(d),
    })
}

/// A unary op whose derivative is a function of its result `y` (saved instead of
/// recomputed): `ct[x] += ct · d(y)`.
fn unary_of_result(d: fn(&mut RevCtx<'_, '_>, Value) -> Value) -> OpRule {
    OpRule::Float(FloatRule {
        operands: &[Some(RESULT)],
        emit: Emit::OfResult(d),
    })
}

/// `sqrt((1 - x)(1 + x))`, that is `sqrt(1 - x²)` without the cancellation of
/// `1 - x·x` near `|x| = 1`.
fn one_minus_x_squared_sqrt(r: &mut RevCtx<'_, '_>, x: Value) -> Value {
    let one = r.lit(1.0);
    let (a, b) = (r.b.fsub(one, x), r.b.fadd(one, x));
    let p = r.b.fmul(a, b);
    r.b.sqrt(p)
}

/// The rule of `op`. See the [module docs](self).
pub(crate) fn op_rule(op: Opcode) -> OpRule {
    use Opcode::*;
    const INTS: &str = "integers carry no derivative";
    const BOOLS: &str = "booleans carry no derivative";
    match op {
        Fadd => float(&[Some(NOTHING), Some(NOTHING)], |r, _| Some(r.ct())),
        Fsub => float(&[Some(NOTHING), Some(NOTHING)], |r, k| {
            let g = r.ct();
            Some(if k == 0 { g } else { r.b.fneg(g) })
        }),
        Fmul => float(&[Some(ARG1), Some(ARG0)], |r, k| {
            let other = r.arg(1 - k);
            Some(r.ct_times(other))
        }),
        // ∂/∂x = 1/y; ∂/∂y = -x/y² = -(x/y)/y, written -(ct / y) (x / y) with the
        // saved result x / y (y² cannot overflow, and x / y overflows only where
        // x / y² does). When y varies, `ct / y` is written `ct * (1 / y)`: the
        // reciprocal does not depend on the cotangent (or tangent), so the lanes
        // of a rule of width N share its one division, and a divisor invariant in
        // a loop has it hoisted. A constant divisor keeps the exact `ct / y`.
        // `∂(x/y)/∂y = -(x/y)/y`, written `-(ct/y) (x (1/y))`: it reads `x`, not
        // the quotient, so a pullback that recomputes what it reads (the minimal
        // tape) multiplies by `1/y` instead of dividing again. `1/y` is computed
        // once for both operands and, where `y` is invariant, hoisted with it.
        Fdiv => float(&[Some(ARG1), Some(ARGS01)], |r, k| {
            let (g, y) = (r.ct(), r.arg(1));
            if r.arg_const(1).is_some() {
                // A literal divisor is never active: this is the contribution to
                // `x`.
                return Some(r.b.fdiv(g, y));
            }
            let one = r.lit(1.0);
            let inv = r.b.fdiv(one, y);
            let q = r.b.fmul(g, inv);
            if k == 0 {
                return Some(q);
            }
            let x = r.arg(0);
            let t = r.b.fmul(x, inv);
            let p = r.b.fmul(q, t);
            Some(r.b.fneg(p))
        }),
        // Ties (x = y) give the cotangent to the first operand: x <= y picks x.
        Fmin => float(&[Some(ARGS01), Some(ARGS01)], |r, k| {
            let (x, y) = (r.arg(0), r.arg(1));
            let first = r.b.fcmp(CmpPred::Le, x, y);
            Some(if k == 0 {
                r.ct_if(first)
            } else {
                r.ct_unless(first)
            })
        }),
        // Ties (x = y) give the cotangent to the first operand: x >= y picks x.
        Fmax => float(&[Some(ARGS01), Some(ARGS01)], |r, k| {
            let (x, y) = (r.arg(0), r.arg(1));
            let first = r.b.fcmp(CmpPred::Ge, x, y);
            Some(if k == 0 {
                r.ct_if(first)
            } else {
                r.ct_unless(first)
            })
        }),
        // ∂/∂x = y x^(y-1), 0 where y = 0 (x^0 is constant; the formula would give
        // 0 · inf at x = 0); ∂/∂y = x^y log x, 0 where x = 0 (the limit from above;
        // log 0 = -inf).
        Pow => float(&[Some(ARGS01), Some(ARGS01)], |r, k| {
            let (x, y) = (r.arg(0), r.arg(1));
            let zero = r.zero();
            // The operand whose zero is guarded against: y for ∂/∂x, x for ∂/∂y. A
            // constant needs no run-time guard.
            let guard = 1 - k;
            let constant = r.arg_const(guard).and_then(Scalar::as_f64);
            if constant == Some(0.0) {
                return None;
            }
            let c = if k == 0 {
                let one = r.lit(1.0);
                let ym1 = r.b.fsub(y, one);
                let p = r.b.pow(x, ym1);
                let d = r.b.fmul(y, p);
                r.ct_times(d)
            } else {
                let p = r.b.pow(x, y);
                let l = r.b.log(x);
                let d = r.b.fmul(p, l);
                r.ct_times(d)
            };
            if constant.is_some() {
                return Some(c);
            }
            let g = if k == 0 { y } else { x };
            let is0 = r.b.fcmp(CmpPred::Eq, g, zero);
            Some(r.b.select(is0, zero, c))
        }),
        // ∂/∂y = x / (x² + y²), ∂/∂x = -y / (x² + y²), written (x/h)(ct/h) with
        // h = hypot(x, y) so that x² + y² cannot overflow or underflow; 0 at the
        // origin, where atan2 jumps and has no derivative.
        Atan2 => float(&[Some(ARGS01), Some(ARGS01)], |r, k| {
            let (y, x) = (r.arg(0), r.arg(1));
            let (g, zero) = (r.ct(), r.zero());
            let h = r.b.hypot(x, y);
            let gh = r.b.fdiv(g, h);
            let c = if k == 0 {
                let xh = r.b.fdiv(x, h);
                r.b.fmul(xh, gh)
            } else {
                let yh = r.b.fdiv(y, h);
                let d = r.b.fmul(yh, gh);
                r.b.fneg(d)
            };
            let origin = r.b.fcmp(CmpPred::Eq, h, zero);
            Some(r.b.select(origin, zero, c))
        }),
        // ∂/∂x = x / h, ∂/∂y = y / h with h = hypot(x, y) the saved result; 0 at the
        // origin (a cone's tip), as `fabs` at 0: hypot(x, 0) = |x|.
        Hypot => float(
            &[Some(READS_ARG0_RESULT), Some(READS_ARG1_RESULT)],
            |r, k| {
                let (v, h) = (r.arg(k), r.result());
                let (g, zero) = (r.ct(), r.zero());
                let vh = r.b.fdiv(v, h);
                let c = r.b.fmul(g, vh);
                let origin = r.b.fcmp(CmpPred::Eq, h, zero);
                Some(r.b.select(origin, zero, c))
            },
        ),
        // a * b + c: ∂/∂a = b, ∂/∂b = a, ∂/∂c = 1.
        Fma => float(&[Some(ARG1), Some(ARG0), Some(NOTHING)], |r, k| {
            if k == 2 {
                return Some(r.ct());
            }
            let other = r.arg(1 - k);
            Some(r.ct_times(other))
        }),
        Fneg => float(&[Some(NOTHING)], |r, _| {
            let g = r.ct();
            Some(r.b.fneg(g))
        }),
        // sign(x) · ct, with sign(0) = 0: fabs'(0) = 0.
        Fabs => float(&[Some(ARG0)], |r, _| {
            let (x, g, zero) = (r.arg(0), r.ct(), r.zero());
            let pos = r.b.fcmp(CmpPred::Gt, x, zero);
            let neg = r.b.fcmp(CmpPred::Lt, x, zero);
            let minus = r.b.fneg(g);
            let off = r.b.select(neg, minus, zero);
            Some(r.b.select(pos, g, off))
        }),
        // 0.5 / sqrt(x), with sqrt(x) the saved result.
        Sqrt => unary_of_result(|r, y| {
            let half = r.lit(0.5);
            r.b.fdiv(half, y)
        }),
        // exp(x): the saved result.
        Exp => unary_of_result(|_, y| y),
        // 1 / x, written ct / x.
        Log => float(&[Some(ARG0)], |r, _| {
            let (g, x) = (r.ct(), r.arg(0));
            Some(r.b.fdiv(g, x))
        }),
        // cos(x).
        Sin => unary_of_arg(|r, x| r.b.cos(x)),
        // -sin(x).
        Cos => unary_of_arg(|r, x| {
            let s = r.b.sin(x);
            r.b.fneg(s)
        }),
        // 1 + tan²(x), with tan(x) the saved result.
        Tan => unary_of_result(|r, y| {
            let (one, yy) = (r.lit(1.0), r.b.fmul(y, y));
            r.b.fadd(one, yy)
        }),
        // 1 - tanh²(x), with tanh(x) the saved result.
        Tanh => unary_of_result(|r, y| {
            let (one, yy) = (r.lit(1.0), r.b.fmul(y, y));
            r.b.fsub(one, yy)
        }),
        // cosh(x).
        Sinh => unary_of_arg(|r, x| r.b.cosh(x)),
        // sinh(x).
        Cosh => unary_of_arg(|r, x| r.b.sinh(x)),
        // 1 / sqrt(1 - x²), written ct / sqrt((1 - x)(1 + x)): exact factors near ±1.
        Asin => float(&[Some(ARG0)], |r, _| {
            let (g, x) = (r.ct(), r.arg(0));
            let s = one_minus_x_squared_sqrt(r, x);
            Some(r.b.fdiv(g, s))
        }),
        // -1 / sqrt(1 - x²), as for asin.
        Acos => float(&[Some(ARG0)], |r, _| {
            let (g, x) = (r.ct(), r.arg(0));
            let s = one_minus_x_squared_sqrt(r, x);
            let q = r.b.fdiv(g, s);
            Some(r.b.fneg(q))
        }),
        // 1 / (1 + x²), written ct / (1 + x²) (0 where x² overflows, as the limit).
        Atan => float(&[Some(ARG0)], |r, _| {
            let (g, x) = (r.ct(), r.arg(0));
            let (one, xx) = (r.lit(1.0), r.b.fmul(x, x));
            let d = r.b.fadd(one, xx);
            Some(r.b.fdiv(g, d))
        }),
        // 1 / (x ln 10), written (ct / x) · log10(e).
        Log10 => float(&[Some(ARG0)], |r, _| {
            let (g, x) = (r.ct(), r.arg(0));
            let q = r.b.fdiv(g, x);
            let k = r.lit(core::f64::consts::LOG10_E);
            Some(r.b.fmul(q, k))
        }),
        // 1 / (x ln 2), written (ct / x) · log2(e).
        Log2 => float(&[Some(ARG0)], |r, _| {
            let (g, x) = (r.ct(), r.arg(0));
            let q = r.b.fdiv(g, x);
            let k = r.lit(core::f64::consts::LOG2_E);
            Some(r.b.fmul(q, k))
        }),
        // 2^x ln 2, with 2^x the saved result.
        Exp2 => unary_of_result(|r, y| {
            let k = r.lit(core::f64::consts::LN_2);
            r.b.fmul(y, k)
        }),
        Floor | Ceil => OpRule::Zero("piecewise constant: zero wherever the derivative exists"),
        // n x^(n-1), 0 where n = 0 (x^0 is constant); no derivative flows to n.
        // At n = i64::MIN, n - 1 would wrap: x^(n-1) is x^n / x there.
        Powi => float(&[Some(ARGS01), None], |r, _| {
            let x = r.arg(0);
            let ty = r.ty();
            let p = match r.arg_const(1).and_then(Scalar::as_i64) {
                Some(0) => return None,
                Some(i64::MIN) => {
                    let n = r.b.iconst(i64::MIN);
                    let xn = r.b.powi(x, n);
                    let nf = r.lit(i64::MIN as f64);
                    let p = r.b.fdiv(xn, x);
                    (nf, p)
                }
                Some(n) => {
                    let nm1 = r.b.iconst(n - 1);
                    (r.lit(n as f64), r.b.powi(x, nm1))
                }
                None => {
                    let n = r.arg(1);
                    let (one, min) = (r.b.iconst(1), r.b.iconst(i64::MIN));
                    let nm1 = r.b.isub(n, one);
                    let at_min = r.b.icmp(CmpPred::Eq, n, min);
                    let e = r.b.select(at_min, n, nm1);
                    let unit = r.lit(1.0);
                    let inv = r.b.fdiv(unit, x);
                    let k = r.b.select(at_min, inv, unit);
                    let xe = r.b.powi(x, e);
                    (r.b.cast(ty, n), r.b.fmul(xe, k))
                }
            };
            let (nf, p) = p;
            let d = r.b.fmul(nf, p);
            let c = r.ct_times(d);
            match r.arg_const(1) {
                Some(_) => Some(c),
                None => {
                    let (n, izero, zero) = (r.arg(1), r.b.iconst(0), r.zero());
                    let n0 = r.b.icmp(CmpPred::Eq, n, izero);
                    Some(r.b.select(n0, zero, c))
                }
            }
        }),
        Iadd | Isub | Imul | Idiv | Irem | Ishl | Ishr | Iand | Ior | Ixor | Ineg => {
            OpRule::Zero(INTS)
        }
        Fcmp | Icmp => OpRule::Zero("a comparison's result is a bool"),
        And | Or | Xor | Not => OpRule::Zero(BOOLS),
        // The cotangent goes to the arm chosen; none to the condition.
        Select => float(&[None, Some(ARG0), Some(ARG0)], |r, k| {
            let c = r.arg(0);
            Some(if k == 1 { r.ct_if(c) } else { r.ct_unless(c) })
        }),
        // Between floats, the cotangent converts back to the operand's type; to or
        // from an integer or bool there is no derivative (the rule is never reached
        // then: an integer is never active).
        Cast => float(&[Some(NOTHING)], |r, _| {
            let (g, from) = (r.ct(), r.arg_type(0));
            Some(if from == r.ty() { g } else { r.b.cast(from, g) })
        }),
        Bitcast => OpRule::Zero("f64 to i64 or back: one side is an integer"),
        Const => OpRule::Zero("a constant has no operands"),
        Len => OpRule::Zero("`len` is an integer"),
        Load | Store | Alloc | Call => OpRule::Memory,
        // The derivation outlines a marked loop (`checkpoint`); a marker left
        // elsewhere computes nothing.
        CheckpointLoop => OpRule::Zero("a marker computes nothing"),
        Push | Pop | TapeAlloc | TapeView | TrapIf | Recompute => OpRule::Unsupported(
            "tape ops and debug ops appear only in derived code (differentiating derived code is not supported)",
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gradlift_ir::ops::Shape;

    /// Every op has a rule of the kind its shape calls for: a float rule for every op
    /// whose result is a float computed from floats (bar the piecewise-constant
    /// ones), zero for integer, bool and comparison ops and `len`, memory for the
    /// slice ops and calls, unsupported exactly for the tape ops. Float rules list one entry per operand, and read
    /// only operands that exist.
    #[test]
    fn the_table_covers_every_op() {
        let piecewise_constant = [Opcode::Floor, Opcode::Ceil];
        for &op in Opcode::ALL {
            let rule = op_rule(op);
            match op.shape() {
                Shape::FloatBinary
                | Shape::FloatUnary
                | Shape::FloatTernary
                | Shape::Powi
                | Shape::Select
                | Shape::Cast => match rule {
                    OpRule::Float(r) => {
                        assert_eq!(Some(r.operands.len()), op.arity(), "{op}");
                        for reads in r.operands.iter().flatten() {
                            assert!(reads.args.iter().all(|&k| k < r.operands.len()), "{op}");
                        }
                    }
                    OpRule::Zero(_) => assert!(piecewise_constant.contains(&op), "{op}"),
                    OpRule::Unsupported(w) => panic!("{op} has no rule: {w}"),
                    OpRule::Memory => panic!("{op} is not a memory op"),
                },
                Shape::IntBinary
                | Shape::IntUnary
                | Shape::FloatCmp
                | Shape::IntCmp
                | Shape::BoolBinary
                | Shape::BoolUnary
                | Shape::Bitcast
                | Shape::Const => assert!(matches!(rule, OpRule::Zero(_)), "{op}"),
                Shape::Len => assert!(matches!(rule, OpRule::Zero(_)), "{op}"),
                Shape::Load | Shape::Store | Shape::Alloc | Shape::Call => {
                    assert!(matches!(rule, OpRule::Memory), "{op}")
                }
                Shape::Note if op == Opcode::CheckpointLoop => {
                    assert!(matches!(rule, OpRule::Zero(_)), "{op}")
                }
                Shape::Push
                | Shape::Pop
                | Shape::TapeAlloc
                | Shape::TapeView
                | Shape::TrapIf
                | Shape::Note => match rule {
                    OpRule::Unsupported(what) => assert!(
                        what.contains(op.name()) || what.contains("tape"),
                        "{op}: {what}"
                    ),
                    _ => panic!("{op} should be unsupported"),
                },
            }
        }
    }

    #[test]
    fn conditions_and_exponents_get_no_derivative() {
        let OpRule::Float(select) = op_rule(Opcode::Select) else {
            panic!()
        };
        assert!(select.operands[0].is_none());
        let OpRule::Float(powi) = op_rule(Opcode::Powi) else {
            panic!()
        };
        assert!(powi.operands[1].is_none());
    }
}
