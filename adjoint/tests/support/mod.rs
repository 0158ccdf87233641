//! Test support: a forward-mode evaluator of scalar `f64` IR, an oracle independent
//! of the rule table (its derivative rules are written here, in tangent form).

#![allow(dead_code)]

use cranelift_entity::SecondaryMap;
use gradlift_ir::{Block, FuncId, Imm, Module, Opcode, Scalar, Terminator, Type, Value, ValueDef};

/// A scalar with the tangent of its float part.
#[derive(Copy, Clone, Debug)]
pub struct Tan {
    pub val: Scalar,
    pub dot: f64,
}

fn f(t: Tan) -> f64 {
    match t.val {
        Scalar::F64(x) => x,
        v => panic!("jvp evaluator: expected f64, found {v:?}"),
    }
}

fn int(t: Tan) -> i64 {
    t.val.as_i64().expect("i64")
}

fn boolean(t: Tan) -> bool {
    t.val.as_bool().expect("bool")
}

fn fl(x: f64, dot: f64) -> Tan {
    Tan {
        val: Scalar::F64(x),
        dot,
    }
}

fn nodot(val: Scalar) -> Tan {
    Tan { val, dot: 0.0 }
}

/// Runs `func` at `args`, each float argument with its tangent; returns the results
/// with their tangents (`J v` for tangents `v`). Only `f64`, `i64` and `bool` code,
/// without slices or calls. Panics past `fuel` statements.
pub fn jvp(module: &Module, func: FuncId, args: &[Tan]) -> Vec<Tan> {
    jvp_finite(module, func, args).0
}

/// [`jvp`], and whether every float value computed on the way was finite.
pub fn jvp_finite(module: &Module, func: FuncId, args: &[Tan]) -> (Vec<Tan>, bool) {
    let body = module.function(func).expect("defined");
    let mut env: SecondaryMap<Value, Option<Tan>> = SecondaryMap::new();
    for (&p, &a) in body.params.iter().zip(args) {
        env[p] = Some(a);
    }
    let get = |env: &SecondaryMap<Value, Option<Tan>>, v: Value| -> Tan {
        match body.value_def(v) {
            ValueDef::Const(c) => nodot(c),
            _ => env[v].expect("defined before use"),
        }
    };
    let mut finite = true;
    let mut prev: Option<Block> = None;
    let mut block = body.layout[0];
    let mut fuel = 10_000_000u64;
    loop {
        let data = &body.blocks[block];
        let incoming: Vec<(Value, Tan)> = data
            .phis
            .iter()
            .map(|p| {
                let (_, v) = *p
                    .incoming
                    .iter()
                    .find(|(b, _)| Some(*b) == prev)
                    .expect("edge");
                (p.value, get(&env, v))
            })
            .collect();
        for (v, t) in incoming {
            env[v] = Some(t);
        }
        for &inst in &data.insts {
            fuel -= 1;
            let d = &body.insts[inst];
            let a: Vec<Tan> = d.args.iter().map(|&v| get(&env, v)).collect();
            let r = step(d.opcode, d.imm, &a);
            finite &= r.val.as_f64().is_none_or(f64::is_finite);
            env[d.results[0]] = Some(r);
        }
        match data.term.as_ref().unwrap() {
            Terminator::Jump(b) => {
                prev = Some(block);
                block = *b;
            }
            Terminator::Br {
                cond,
                then_dest,
                else_dest,
            } => {
                prev = Some(block);
                block = if boolean(get(&env, *cond)) {
                    *then_dest
                } else {
                    *else_dest
                };
            }
            Terminator::Ret(vals) => {
                return (vals.iter().map(|&v| get(&env, v)).collect(), finite);
            }
        }
        assert!(fuel > 0, "out of fuel");
    }
}

/// One op, value and tangent (forward-mode rules, with the crate's conventions at
/// kinks: fabs'(0) = 0, ties of fmin/fmax to the first operand, pow and powi with a
/// zero exponent constant).
fn step(op: Opcode, imm: Imm, a: &[Tan]) -> Tan {
    use Opcode::*;
    let (x, dx) = (a.first().map(|t| t.val), a.first().map_or(0.0, |t| t.dot));
    let _ = x;
    match op {
        Fadd => fl(f(a[0]) + f(a[1]), dx + a[1].dot),
        Fsub => fl(f(a[0]) - f(a[1]), dx - a[1].dot),
        Fmul => fl(f(a[0]) * f(a[1]), dx * f(a[1]) + f(a[0]) * a[1].dot),
        Fdiv => {
            let (p, q) = (f(a[0]), f(a[1]));
            fl(p / q, dx / q - p * a[1].dot / (q * q))
        }
        Fmin => {
            let (p, q) = (f(a[0]), f(a[1]));
            fl(fmin(p, q), if p <= q { dx } else { a[1].dot })
        }
        Fmax => {
            let (p, q) = (f(a[0]), f(a[1]));
            fl(fmax(p, q), if p >= q { dx } else { a[1].dot })
        }
        Pow => {
            let (p, q) = (f(a[0]), f(a[1]));
            let ddx = if q == 0.0 {
                0.0
            } else {
                q * p.powf(q - 1.0) * dx
            };
            let ddy = if p == 0.0 {
                0.0
            } else {
                p.powf(q) * p.ln() * a[1].dot
            };
            fl(p.powf(q), ddx + ddy)
        }
        Fneg => fl(-f(a[0]), -dx),
        Fabs => {
            let p = f(a[0]);
            fl(
                p.abs(),
                if p > 0.0 {
                    dx
                } else if p < 0.0 {
                    -dx
                } else {
                    0.0
                },
            )
        }
        Sqrt => {
            let s = f(a[0]).sqrt();
            fl(s, dx / (2.0 * s))
        }
        Exp => {
            // The IR's `exp` of an `f64` is gradlift's own (`math::exp`).
            let e = gradlift_ir::math::exp(f(a[0]));
            fl(e, e * dx)
        }
        Log => fl(f(a[0]).ln(), dx / f(a[0])),
        // So are `sin` and `cos` (`math::sin`, `math::cos`).
        Sin => {
            let x = f(a[0]);
            fl(gradlift_ir::math::sin(x), gradlift_ir::math::cos(x) * dx)
        }
        Cos => {
            let x = f(a[0]);
            fl(gradlift_ir::math::cos(x), -gradlift_ir::math::sin(x) * dx)
        }
        Tan => {
            let t = f(a[0]).tan();
            fl(t, (1.0 + t * t) * dx)
        }
        Tanh => {
            let t = f(a[0]).tanh();
            fl(t, (1.0 - t * t) * dx)
        }
        Sinh => fl(f(a[0]).sinh(), f(a[0]).cosh() * dx),
        Cosh => fl(f(a[0]).cosh(), f(a[0]).sinh() * dx),
        Asin => {
            let p = f(a[0]);
            fl(p.asin(), dx / (1.0 - p * p).sqrt())
        }
        Acos => {
            let p = f(a[0]);
            fl(p.acos(), -dx / (1.0 - p * p).sqrt())
        }
        Atan => {
            let p = f(a[0]);
            fl(p.atan(), dx / (1.0 + p * p))
        }
        Log10 => fl(f(a[0]).log10(), dx / (f(a[0]) * 10f64.ln())),
        Log2 => fl(f(a[0]).log2(), dx / (f(a[0]) * 2f64.ln())),
        Exp2 => {
            let e = f(a[0]).exp2();
            fl(e, e * 2f64.ln() * dx)
        }
        // atan2 y, x: (x dy - y dx) / (x² + y²).
        Atan2 => {
            let (y, x) = (f(a[0]), f(a[1]));
            fl(y.atan2(x), (x * dx - y * a[1].dot) / (x * x + y * y))
        }
        Hypot => {
            let (p, q) = (f(a[0]), f(a[1]));
            let h = p.hypot(q);
            fl(h, (p * dx + q * a[1].dot) / h)
        }
        Fma => {
            let (p, q, r) = (f(a[0]), f(a[1]), f(a[2]));
            fl(p.mul_add(q, r), dx * q + p * a[1].dot + a[2].dot)
        }
        Floor => fl(f(a[0]).floor(), 0.0),
        Ceil => fl(f(a[0]).ceil(), 0.0),
        Powi => {
            let (p, n) = (f(a[0]), int(a[1]));
            let d = if n == 0 {
                0.0
            } else {
                n as f64 * p.powi(n as i32 - 1) * dx
            };
            fl(p.powi(n as i32), d)
        }
        Iadd => nodot(Scalar::I64(int(a[0]).wrapping_add(int(a[1])))),
        Isub => nodot(Scalar::I64(int(a[0]).wrapping_sub(int(a[1])))),
        Imul => nodot(Scalar::I64(int(a[0]).wrapping_mul(int(a[1])))),
        Iand => nodot(Scalar::I64(int(a[0]) & int(a[1]))),
        Fcmp | Icmp => {
            let Imm::Cmp(p) = imm else { panic!() };
            let r = match a[0].val {
                Scalar::F64(_) => p.apply(f(a[0]), f(a[1])),
                _ => p.apply(int(a[0]), int(a[1])),
            };
            nodot(Scalar::Bool(r))
        }
        And => nodot(Scalar::Bool(boolean(a[0]) && boolean(a[1]))),
        Or => nodot(Scalar::Bool(boolean(a[0]) || boolean(a[1]))),
        Not => nodot(Scalar::Bool(!boolean(a[0]))),
        Select => {
            if boolean(a[0]) {
                a[1]
            } else {
                a[2]
            }
        }
        Cast => {
            let Imm::Type(t) = imm else { panic!() };
            match (a[0].val, t) {
                (Scalar::F64(x), Type::F64) => fl(x, dx),
                (Scalar::I64(n), Type::F64) => fl(n as f64, 0.0),
                (Scalar::Bool(b), Type::F64) => fl(if b { 1.0 } else { 0.0 }, 0.0),
                (Scalar::F64(x), Type::I64) => nodot(Scalar::I64(x as i64)),
                (v, t) => panic!("jvp evaluator: cast {t} of {v:?}"),
            }
        }
        Const => {
            let Imm::Const(c) = imm else { panic!() };
            nodot(c)
        }
        _ => panic!("jvp evaluator: {op} not supported"),
    }
}

/// The interpreter's `fmin`: NaN if either is NaN, -0.0 below 0.0.
fn fmin(p: f64, q: f64) -> f64 {
    if p.is_nan() || q.is_nan() {
        f64::NAN
    } else if p < q || (p == q && p.is_sign_negative()) {
        p
    } else {
        q
    }
}

/// The interpreter's `fmax`: NaN if either is NaN, 0.0 above -0.0.
fn fmax(p: f64, q: f64) -> f64 {
    if p.is_nan() || q.is_nan() {
        f64::NAN
    } else if p > q || (p == q && p.is_sign_positive()) {
        p
    } else {
        q
    }
}

/// SplitMix64, for reproducible programs.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// True with probability `k / n`.
    pub fn chance(&mut self, k: u64, n: u64) -> bool {
        self.below(n) < k
    }

    pub fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[self.below(xs.len() as u64) as usize]
    }
}
