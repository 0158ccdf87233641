//! The benchmark suite's programs in forward mode and second order, shared by
//! `benches/forward.rs` (criterion) and `examples/forward_suite.rs` (the tables of
//! `BENCHMARKS.md`, "Forward mode and second order").
//!
//! - [`Nd`]: the programs of `src/suite.rs` once more as plain generic Rust over
//!   num-dual's [`DualNum`] (the forward-mode peer), the same arithmetic in the same
//!   order, on the flat vector of the differentiated coordinates (the suite's
//!   activities: `BENCHMARKS.md`, "gradient with respect to"). One difference:
//!   `normalize` computes its norm once, before the loop, where `src/suite.rs`
//!   writes it inside the loop: gradlift's optimiser hoists it before deriving, and
//!   nothing hoists it out of a loop of dual numbers (O(n^2) there). The values
//!   are the same.
//! - [`Program`]: a suite program traced to IR, its arguments, which parameters are
//!   differentiated, and its [`Nd`] form; [`Program::compile`] compiles the primal,
//!   the gradient (reverse mode, for the checks), the width-1 and width-8 forward
//!   rules ([`CompiledJvp`]) and the width-1 second-order rule ([`CompiledHvp`]).
//! - [`Directions`]: the directions of the JVPs and HVPs, closed forms like the
//!   inputs.
//! - [`Callers`]: the timed calls, on borrowed arguments and buffers made once
//!   (nothing is copied or allocated per call once warmed up).
//! - [`check`]: before anything is timed, gradlift's values against num-dual's,
//!   JVPs against the gradient's dot product with the direction, the width-8 lanes
//!   against the width-1 calls, HVPs (gradient and `vᵀHv`) against reverse mode and
//!   num-dual, and the zero-copy HVP against [`CompiledHvp::hvp`].

#![allow(dead_code)] // each of the two users uses a part

use std::hint::black_box;

use gradlift::adjoint::{Activity, DualActivity, FruleConfig, RuleConfig};
use gradlift::ir::Module;
use gradlift::ir::interp::Val;
use gradlift::jit::Arg;
use gradlift::suite::{self, MLP_HIDDEN, MLP_IN, MLP_OUT, ODE_DT};
use gradlift::trace::prelude::*;
use gradlift::trace::{Slice, Var};
use gradlift::{
    CompiledFunction, CompiledGradient, CompiledHvp, CompiledJvp, Engine, Hosts, Pipeline,
    Workspace, autodiff,
};
use nalgebra::{DMatrix, DVector, Dyn, SVector};
use num_dual::{
    Derivative, Dual2DVec64, Dual2SVec64, Dual64, DualNum, DualSVec64, Gradients, HyperDual64,
};
use smallvec::SmallVec;

/// The reduced `mlp` whose dense Hessian is compared with num-dual's: batch 4
/// and 8 hidden units (354 parameters), [`Program::mlp`]. num-dual's dense
/// Hessian of the suite's network (2,762 parameters: every value carries a dense
/// 2,762 x 2,762 Hessian, 61 MB) did not finish one row of the batch in 15
/// minutes on this machine, so hours at the suite's batch of 64 (`BENCHMARKS.md`).
pub const HESSIAN_MLP: (usize, usize) = (4, 8);

/// Directions per call of the wide forward rule.
pub const WIDTH: usize = 8;

/// The relative tolerance of values and JVPs against their references.
pub const TOL_JVP: f64 = 1e-12;
/// The relative tolerance of Hessians (and `vᵀHv`) against num-dual's.
pub const TOL_HESSIAN: f64 = 1e-10;

// ---------------------------------------------------------------------------
// The programs on num-dual's numbers
// ---------------------------------------------------------------------------

/// A suite program as generic Rust over num-dual's [`DualNum`], on the flat
/// vector of its differentiated coordinates, with its constant arguments.
#[derive(Clone, Debug)]
pub enum Nd {
    /// `sumsq(x)`.
    Sumsq,
    /// `rosenbrock(x)`.
    Rosenbrock,
    /// `logsumexp(x)`.
    Logsumexp,
    /// `normalize(x, w)`, `w` constant; the norm computed once (see the module).
    Normalize { w: Vec<f64> },
    /// `mlp(X, W1, b1, W2, b2)` with `hidden` hidden units (the suite's
    /// [`MLP_HIDDEN`], or fewer: [`mlp_sized`]), `X` constant; the coordinates are
    /// `W1, b1, W2, b2` concatenated.
    Mlp { x: Vec<f64>, hidden: usize },
    /// `ode(p, steps)`, the steps constant.
    Ode { steps: i64 },
    /// `branchy(x)`.
    Branchy,
}

/// `fmax` as gradlift's `max`: `x` when it is greater than `m`, else `m`.
fn max_d<D: DualNum<Primitive = f64>>(m: D, x: &D) -> D {
    if *x > m { x.clone() } else { m }
}

fn sumsq_d<D: DualNum<Primitive = f64>>(x: &[D]) -> D {
    let mut acc = D::from(0.0);
    for xi in x {
        acc += xi.clone() * xi;
    }
    acc
}

impl Nd {
    /// The program's value at `p` (the differentiated coordinates): on `f64` the
    /// plain primal, on num-dual's numbers its derivatives.
    pub fn eval<D: DualNum<Primitive = f64>>(&self, p: &[D]) -> D {
        match self {
            Nd::Sumsq => sumsq_d(p),
            Nd::Rosenbrock => {
                let mut acc = D::from(0.0);
                for i in 0..p.len() - 1 {
                    let (xi, xn) = (&p[i], &p[i + 1]);
                    let a = xn.clone() - xi.clone() * xi;
                    let b = D::from(1.0) - xi;
                    acc += a.clone() * &a * 100.0 + b.clone() * &b;
                }
                acc
            }
            Nd::Logsumexp => {
                let mut m = D::from(f64::NEG_INFINITY);
                for xi in p {
                    m = max_d(m, xi);
                }
                let mut s = D::from(0.0);
                for xi in p {
                    s += (xi.clone() - &m).exp();
                }
                m + s.ln()
            }
            Nd::Normalize { w } => {
                let nrm = sumsq_d(p).sqrt();
                let mut acc = D::from(0.0);
                for (xi, &wi) in p.iter().zip(w) {
                    acc += xi.clone() * wi / &nrm;
                }
                acc
            }
            Nd::Mlp { x, hidden } => mlp_d(x, *hidden, p),
            Nd::Ode { steps } => {
                let (a, b, c, d) = (&p[0], &p[1], &p[2], &p[3]);
                let (mut u, mut v) = (p[4].clone(), p[5].clone());
                for _ in 0..*steps {
                    let du = a.clone() * &u - b.clone() * &u * &v;
                    let dv = d.clone() * &u * &v - c.clone() * &v;
                    (u, v) = (u + du * ODE_DT, v + dv * ODE_DT);
                }
                u.clone() * &u + v.clone() * &v
            }
            Nd::Branchy => {
                let mut acc = D::from(0.0);
                for xi in p {
                    let y = if *xi > 0.0 {
                        xi.sin() * xi
                    } else {
                        xi.clone() * xi * xi - xi.clone() * 2.0
                    };
                    acc += y;
                }
                acc
            }
        }
    }
}

/// `suite::mlp` (with `nhid` hidden units) on num-dual's numbers: `x` constant,
/// `p` the parameters `W1, b1, W2, b2` concatenated; the same loops and the same
/// order of operations.
fn mlp_d<D: DualNum<Primitive = f64>>(x: &[f64], nhid: usize, p: &[D]) -> D {
    let (nin, nout) = (MLP_IN, MLP_OUT);
    let (w1, rest) = p.split_at(nin * nhid);
    let (b1, rest) = rest.split_at(nhid);
    let (w2, b2) = rest.split_at(nhid * nout);
    let batch = x.len() / nin;
    let mut h = vec![D::from(0.0); nhid];
    let mut z = vec![D::from(0.0); nout];
    let mut loss = D::from(0.0);
    for b in 0..batch {
        let row = b * nin;
        for j in 0..nhid {
            let mut a = b1[j].clone();
            for k in 0..nin {
                a += w1[k * nhid + j].clone() * x[row + k];
            }
            h[j] = a.tanh();
        }
        for c in 0..nout {
            let mut s = b2[c].clone();
            for j in 0..nhid {
                s += h[j].clone() * &w2[j * nout + c];
            }
            z[c] = s;
        }
        let mut m = D::from(f64::NEG_INFINITY);
        for zc in &z {
            m = max_d(m, zc);
        }
        let mut e = D::from(0.0);
        for zc in &z {
            e += (zc.clone() - &m).exp();
        }
        loss = loss + (m + e.ln()) - &z[b % nout];
    }
    loss / batch as f64
}

/// `suite::mlp` with `nhid` hidden units instead of [`MLP_HIDDEN`]: the same
/// code (`suite::mlp` with the size a parameter), for the dense Hessians of a
/// smaller network, where num-dual's of the suite's (2,762 parameters) would take
/// hours. [`Program::mlp`] checks that at [`MLP_HIDDEN`] it traces to the module
/// `suite::mlp` traces to.
pub fn mlp_sized<T: Real>(
    x: T::Slice<'_>,
    w1: T::Slice<'_>,
    b1: T::Slice<'_>,
    w2: T::Slice<'_>,
    b2: T::Slice<'_>,
    nhid: i64,
) -> T {
    let (nin, nout) = (MLP_IN as i64, MLP_OUT as i64);
    // The loop bounds as traced integers (constants in the IR).
    let (hid_n, out_n, in_n) = (T::Int::from(nhid), T::Int::from(nout), T::Int::from(nin));
    let batch = x.len() / nin;
    let mut h = T::alloc(hid_n);
    let mut z = T::alloc(out_n);
    let loss = for_range(0, batch, T::lit(0.0), |b, loss| {
        let row = b * nin;
        // h[j] = tanh(b1[j] + sum_k X[b][k] W1[k][j])
        for_range(0, hid_n, (), |j, ()| {
            let a = for_range(0, in_n, b1.at(j), |k, s| {
                s + x.at(row + k) * w1.at(k * nhid + j)
            });
            h.set(j, a.tanh());
        });
        // z[c] = b2[c] + sum_j h[j] W2[j][c]
        for_range(0, out_n, (), |c, ()| {
            let s = for_range(0, hid_n, b2.at(c), |j, s| s + h.at(j) * w2.at(j * nout + c));
            z.set(c, s);
        });
        // logsumexp(z) - z[y_b], the maximum subtracted first.
        let m = for_range(0, out_n, T::lit(f64::NEG_INFINITY), |c, m| m.max(z.at(c)));
        let e = for_range(0, out_n, T::lit(0.0), |c, e| e + (z.at(c) - m).exp());
        loss + (m + e.ln()) - z.at(b % nout)
    });
    loss / T::from_int(batch)
}

/// The inputs of [`mlp_sized`] with `nhid` hidden units: `suite::mlp_input`'s
/// closed forms (`W1[k][j] = 0.1 cos(0.3 k + 0.11 j)`, `b1[j] = 0.01 j`, `W2[j][c]
/// = 0.1 sin(0.17 j + 0.5 c)`) for `j < nhid`.
pub fn mlp_input_sized(batch: usize, nhid: usize) -> suite::MlpInput {
    let full = suite::mlp_input(batch);
    let w1 = (0..MLP_IN * nhid)
        .map(|e| full.w1[(e / nhid) * MLP_HIDDEN + e % nhid])
        .collect();
    let w2 = full.w2[..nhid * MLP_OUT].to_vec();
    suite::MlpInput {
        x: full.x,
        w1,
        b1: full.b1[..nhid].to_vec(),
        w2,
        b2: full.b2,
    }
}

/// num-dual's dense Hessian of `nd` at `p` (`num_dual::hessian`, on
/// `Dual2Vec<f64, Dyn>`: every value carries its gradient and its Hessian, dense):
/// the value and the Hessian, row-major.
pub fn nd_hessian(nd: &Nd, p: &[f64]) -> (f64, Vec<f64>) {
    let (f, _g, h): (f64, DVector<f64>, DMatrix<f64>) = num_dual::hessian(
        |v: DVector<Dual2DVec64>| nd.eval(v.as_slice()),
        &DVector::from_column_slice(p),
    );
    // Symmetric: column-major and row-major are the same up to rounding; transpose
    // anyway, so that entry (r, c) is row r.
    (f, h.transpose().as_slice().to_vec())
}

/// num-dual's dense Hessian of `nd` at `p` by its [`Gradients`] trait on `Dyn`,
/// the form its docs give for dynamically sized inputs: one sweep of
/// [`HyperDual64`] per entry (n^2 sweeps).
pub fn nd_hessian_sweeps(nd: &Nd, p: &[f64]) -> (f64, Vec<f64>) {
    let (f, _g, h) = <Dyn as Gradients>::hessian::<_, f64, ()>(
        |v: DVector<HyperDual64>, _: &()| nd.eval(v.as_slice()),
        &DVector::from_column_slice(p),
        &(),
    );
    (f, h.transpose().as_slice().to_vec())
}

/// num-dual's dense Hessian of `nd` at `p` (of length `M`) on
/// `Dual2SVec64<M>`: `num_dual::hessian` with statically sized derivatives, no
/// allocation. Each number holds an `M x M` matrix on the stack (80 kB at `M =
/// 100`, and the input vector `M` of them): run it on a thread with a large
/// stack ([`STACK`]).
pub fn nd_hessian_static<const M: usize>(nd: &Nd, p: &[f64]) -> (f64, Vec<f64>) {
    let (f, _g, h) = num_dual::hessian(
        |v: SVector<Dual2SVec64<M>, M>| nd.eval(v.as_slice()),
        &SVector::<f64, M>::from_column_slice(p),
    );
    (f, h.transpose().as_slice().to_vec())
}

/// The stack of the threads that run [`nd_hessian_static`].
pub const STACK: usize = 256 << 20;

/// The inputs of num-dual's forward sweeps along the directions: `x + v ε` on
/// [`Dual64`], `x + Σ_j v_j ε_j` on [`DualSVec64`] of [`WIDTH`], and `x + v ε₁ + v
/// ε₂` on [`HyperDual64`] (whose `ε₁ε₂` part is then `vᵀHv`).
pub struct NdInputs {
    pub dual: Vec<Dual64>,
    pub dual8: Vec<DualSVec64<WIDTH>>,
    pub hyper: Vec<HyperDual64>,
}

impl NdInputs {
    pub fn new(p: &[f64], dirs: &Directions) -> NdInputs {
        let dual = p
            .iter()
            .zip(&dirs.flat[0])
            .map(|(&x, &v)| Dual64::new(x, v))
            .collect();
        let dual8 = p
            .iter()
            .enumerate()
            .map(|(i, &x)| {
                let lanes: [f64; WIDTH] = std::array::from_fn(|j| dirs.flat[j][i]);
                DualSVec64::<WIDTH>::new(x, Derivative::some(SVector::from(lanes)))
            })
            .collect();
        let hyper = p
            .iter()
            .zip(&dirs.flat[0])
            .map(|(&x, &v)| HyperDual64::new(x, v, v, 0.0))
            .collect();
        NdInputs { dual, dual8, hyper }
    }
}

// ---------------------------------------------------------------------------
// The programs in gradlift
// ---------------------------------------------------------------------------

/// A suite program: its traced module, its arguments, its activities, its
/// num-dual form.
pub struct Program {
    /// The program's name (`sumsq`, ...), the traced function's.
    pub name: &'static str,
    /// The size the tables report (`n`, the batch, the steps).
    pub n: usize,
    pub module: Module,
    pub hosts: Hosts,
    pub args: Vec<Val>,
    /// Per parameter: whether it is differentiated (the suite's activities).
    pub dual: Vec<bool>,
    pub nd: Nd,
}

/// The arguments and the num-dual form of a program of one slice `x`.
fn of_x(x: Vec<f64>, nd: Nd) -> (usize, Vec<Val>, Vec<bool>, Nd) {
    (x.len(), vec![Val::F64s(x)], vec![true], nd)
}

impl Program {
    /// `name` (a suite program) at size `n` (`n` is the batch for `mlp`, the steps
    /// for `ode`), traced.
    pub fn new(name: &'static str, n: usize) -> Program {
        let (size, args, dual, nd) = match name {
            "sumsq" => of_x(suite::sumsq_input(n), Nd::Sumsq),
            "rosenbrock" => of_x(suite::rosenbrock_input(n), Nd::Rosenbrock),
            "logsumexp" => of_x(suite::logsumexp_input(n), Nd::Logsumexp),
            "branchy" => of_x(suite::branchy_input(n), Nd::Branchy),
            "normalize" => {
                let (x, w) = suite::normalize_input(n);
                let nd = Nd::Normalize { w: w.clone() };
                (n, vec![Val::F64s(x), Val::F64s(w)], vec![true, false], nd)
            }
            "mlp" => {
                let p = suite::mlp_input(n);
                let nd = Nd::Mlp {
                    x: p.x.clone(),
                    hidden: MLP_HIDDEN,
                };
                let args = [p.x, p.w1, p.b1, p.w2, p.b2].map(Val::F64s).to_vec();
                (n, args, vec![false, true, true, true, true], nd)
            }
            "ode" => {
                let steps = n as i64;
                let args = vec![Val::F64s(suite::ode_input()), Val::I64(steps)];
                (n, args, vec![true, false], Nd::Ode { steps })
            }
            _ => panic!("no suite program {name}"),
        };
        // Traced as the suite traces them (`autodiff`: the same module and hosts).
        let (module, hosts) = match name {
            "sumsq" => traced(name, suite::sumsq::<Var>),
            "rosenbrock" => traced(name, suite::rosenbrock::<Var>),
            "logsumexp" => traced(name, suite::logsumexp::<Var>),
            "branchy" => traced(name, suite::branchy::<Var>),
            "normalize" => traced(name, suite::normalize::<Var>),
            "mlp" => traced(name, suite::mlp::<Var>),
            "ode" => traced(name, suite::ode::<Var>),
            _ => unreachable!(),
        };
        Program {
            name,
            n: size,
            module,
            hosts,
            args,
            dual,
            nd,
        }
    }

    /// `mlp` at batch `batch` with `nhid` hidden units ([`mlp_sized`]). Checks
    /// first that [`mlp_sized`] at the suite's [`MLP_HIDDEN`] traces to the very
    /// module of `suite::mlp`, and that [`mlp_input_sized`] gives the suite's
    /// inputs there.
    pub fn mlp(batch: usize, nhid: usize) -> Program {
        let sized = |h: i64| {
            traced(
                "mlp",
                move |x: Slice<f64>,
                      w1: Slice<f64>,
                      b1: Slice<f64>,
                      w2: Slice<f64>,
                      b2: Slice<f64>| { mlp_sized::<Var>(x, w1, b1, w2, b2, h) },
            )
        };
        let suite_mlp = Program::new("mlp", batch);
        assert_eq!(
            sized(MLP_HIDDEN as i64).0.to_string(),
            suite_mlp.module.to_string(),
            "mlp_sized at the suite's size traces to suite::mlp's module"
        );
        assert_eq!(mlp_input_sized(batch, MLP_HIDDEN), suite::mlp_input(batch));
        let (module, hosts) = sized(nhid as i64);
        let p = mlp_input_sized(batch, nhid);
        let nd = Nd::Mlp {
            x: p.x.clone(),
            hidden: nhid,
        };
        let args = [p.x, p.w1, p.b1, p.w2, p.b2].map(Val::F64s).to_vec();
        Program {
            name: "mlp",
            n: batch,
            module,
            hosts,
            args,
            dual: vec![false, true, true, true, true],
            nd,
        }
    }

    /// The differentiated coordinates, flat (each differentiated slice in order).
    pub fn flat(&self) -> Vec<f64> {
        self.args
            .iter()
            .zip(&self.dual)
            .filter(|&(_, &d)| d)
            .flat_map(|(a, _)| match a {
                Val::F64s(v) => v.clone(),
                other => panic!("{}: a differentiated argument {other:?}", self.name),
            })
            .collect()
    }

    /// The lengths of the differentiated slices, in order.
    pub fn dual_lens(&self) -> Vec<usize> {
        self.args
            .iter()
            .zip(&self.dual)
            .filter(|&(_, &d)| d)
            .map(|(a, _)| a.slice_len().expect("differentiated arguments are slices"))
            .collect()
    }

    /// The reverse-mode activities of the suite.
    pub fn activities(&self) -> Vec<Activity> {
        self.dual
            .iter()
            .map(|&d| if d { Activity::Dup } else { Activity::Const })
            .collect()
    }

    /// The forward-mode configuration of the suite's activities at `width`.
    pub fn frule_config(&self, width: u32) -> FruleConfig {
        let f = self.module.func_by_name(self.name).expect("traced");
        let mut config = FruleConfig::default_for(self.module.sig(f)).with_width(width);
        config.params = self
            .dual
            .iter()
            .map(|&d| {
                if d {
                    DualActivity::Dual
                } else {
                    DualActivity::Const
                }
            })
            .collect();
        config
    }

    /// The reverse-mode configuration of the suite's activities.
    pub fn rule_config(&self) -> RuleConfig {
        let f = self.module.func_by_name(self.name).expect("traced");
        RuleConfig::default_for(self.module.sig(f)).with_params(self.activities())
    }

    fn pipeline(&self) -> Pipeline {
        Pipeline::new().with_hosts(self.hosts.clone())
    }

    /// The width-`width` second-order rule, with the suite's activities.
    pub fn compile_hvp(&self, width: u32) -> CompiledHvp {
        self.pipeline()
            .compile_hvp(&self.module, self.name, Some(&self.rule_config()), width)
            .unwrap_or_else(|e| panic!("{}: the HVP does not compile: {e}", self.name))
    }

    /// The width-`width` forward rule, with the suite's activities.
    pub fn compile_jvp(&self, width: u32) -> CompiledJvp {
        self.pipeline()
            .compile_jvp(&self.module, self.name, Some(&self.frule_config(width)))
            .unwrap_or_else(|e| panic!("{}: the JVP does not compile: {e}", self.name))
    }

    /// The primal, the gradient and the forward and second-order rules, compiled.
    pub fn compile(&self) -> Compiled {
        let name = self.name;
        let primal = CompiledFunction::with_hosts(&self.module, name, &self.hosts)
            .unwrap_or_else(|e| panic!("{name}: the primal does not compile: {e}"));
        let grad =
            CompiledGradient::with_config(&self.module, name, &self.rule_config(), &self.hosts)
                .unwrap_or_else(|e| panic!("{name}: the gradient does not compile: {e}"));
        Compiled {
            primal,
            grad,
            jvp1: self.compile_jvp(1),
            jvp8: self.compile_jvp(WIDTH as u32),
            hvp1: self.compile_hvp(1),
        }
    }
}

/// The module and hosts of `f` traced as `autodiff` traces it.
fn traced<A: gradlift::trace::Args, F: gradlift::trace::Callable<A, Output = Var>>(
    name: &'static str,
    f: F,
) -> (Module, Hosts) {
    let ad = autodiff(name, f).unwrap_or_else(|e| panic!("{name} does not trace: {e}"));
    (ad.module().clone(), ad.hosts().clone())
}

/// A program's compiled primal, gradient (reverse mode), forward rules (width 1
/// and [`WIDTH`]) and second-order rule (width 1).
pub struct Compiled {
    pub primal: CompiledFunction,
    pub grad: CompiledGradient,
    pub jvp1: CompiledJvp,
    pub jvp8: CompiledJvp,
    pub hvp1: CompiledHvp,
}

/// The directions: [`WIDTH`] of them, `v_j[i] = sin(0.29 i + 0.5 + 0.7 j)` over
/// the flat coordinates, in the layouts the calls take.
pub struct Directions {
    /// Direction `j`, flat.
    pub flat: Vec<Vec<f64>>,
    /// Direction `j` as width-1 tangents: one slice per differentiated parameter.
    pub w1: Vec<Vec<Vec<f64>>>,
    /// All of them as width-[`WIDTH`] tangents: per differentiated parameter, lane
    /// `j` of element `i` at `i * WIDTH + j`.
    pub w8: Vec<Vec<f64>>,
}

impl Directions {
    pub fn new(lens: &[usize]) -> Directions {
        let total: usize = lens.iter().sum();
        let flat: Vec<Vec<f64>> = (0..WIDTH)
            .map(|j| {
                (0..total)
                    .map(|i| (0.29 * i as f64 + 0.5 + 0.7 * j as f64).sin())
                    .collect()
            })
            .collect();
        let split = |v: &[f64]| {
            let mut out = Vec::new();
            let mut at = 0;
            for &len in lens {
                out.push(v[at..at + len].to_vec());
                at += len;
            }
            out
        };
        let w1 = flat.iter().map(|v| split(v)).collect();
        let mut w8 = Vec::new();
        let mut at = 0;
        for &len in lens {
            let mut t = vec![0.0; len * WIDTH];
            for i in 0..len {
                for (j, v) in flat.iter().enumerate() {
                    t[i * WIDTH + j] = v[at + i];
                }
            }
            w8.push(t);
            at += len;
        }
        Directions { flat, w1, w8 }
    }

    /// Direction `j` as [`CompiledJvp::jvp`]'s and [`CompiledHvp::hvp`]'s
    /// tangents: `Some` per differentiated parameter.
    pub fn vals(&self, j: usize, dual: &[bool]) -> Vec<Option<Val>> {
        let mut slices = self.w1[j].iter();
        dual.iter()
            .map(|&d| d.then(|| Val::F64s(slices.next().expect("one per dual").clone())))
            .collect()
    }
}

// ---------------------------------------------------------------------------
// The timed calls
// ---------------------------------------------------------------------------

/// A timed call.
pub type Call<'a> = Box<dyn FnMut() + 'a>;

/// The timed calls of a program, each with its own workspace and with its
/// arguments, tangents and results made once.
pub struct Callers<'a> {
    /// The primal ([`CompiledFunction::call_into`]).
    pub primal: Call<'a>,
    /// One width-1 JVP along direction 0 ([`CompiledJvp::jvp_args`]).
    pub jvp1: Call<'a>,
    /// [`WIDTH`] width-1 JVPs, one along each direction.
    pub jvp1x8: Call<'a>,
    /// One width-[`WIDTH`] JVP along all the directions.
    pub jvp8: Call<'a>,
    /// One width-1 HVP along direction 0, zero-copy ([`HvpCall`]).
    pub hvp1: Call<'a>,
    /// num-dual: the program on [`Dual64`] along direction 0.
    pub nd_jvp1: Call<'a>,
    /// num-dual: the program on [`DualSVec64`] along all the directions.
    pub nd_jvp8: Call<'a>,
}

impl<'a> Callers<'a> {
    pub fn new(
        p: &'a Program,
        c: &'a Compiled,
        dirs: &'a Directions,
        nd_in: &'a NdInputs,
    ) -> Callers<'a> {
        let borrowed = || -> Vec<Arg<'a>> { p.args.iter().map(Arg::from).collect() };
        let primal: Call<'a> = {
            let (mut ws, mut args, mut out) = (Workspace::new(), p.args.clone(), Vec::new());
            Box::new(move || {
                c.primal
                    .call_into(&mut ws, black_box(&mut args), &mut out)
                    .expect("the primal ran before");
                black_box(&out);
            })
        };
        let jvp = |rule: &'a CompiledJvp, tangents: &'a [Vec<f64>]| {
            let (mut ws, mut args, mut out) = (Workspace::new(), borrowed(), Vec::new());
            let mut t: Vec<Arg<'a>> = tangents.iter().map(|v| Arg::F64s(v)).collect();
            move || {
                rule.jvp_args(&mut ws, black_box(&mut args), &mut t, &mut out)
                    .expect("the JVP ran before");
                black_box(&out);
            }
        };
        let jvp1: Call<'a> = Box::new(jvp(&c.jvp1, &dirs.w1[0]));
        let mut each: Vec<_> = dirs.w1.iter().map(|t| jvp(&c.jvp1, t)).collect();
        let jvp1x8: Call<'a> = Box::new(move || {
            for call in &mut each {
                call();
            }
        });
        let jvp8: Call<'a> = Box::new(jvp(&c.jvp8, &dirs.w8));
        let mut hvp = HvpCall::new(&c.hvp1, p, &dirs.w1[0]);
        let hvp1: Call<'a> = Box::new(move || hvp.call());
        let nd = &p.nd;
        let nd_jvp1: Call<'a> = Box::new(move || {
            black_box(nd.eval(black_box(&nd_in.dual[..])));
        });
        let nd_jvp8: Call<'a> = Box::new(move || {
            black_box(nd.eval(black_box(&nd_in.dual8[..])));
        });
        Callers {
            primal,
            jvp1,
            jvp1x8,
            jvp8,
            hvp1,
            nd_jvp1,
            nd_jvp8,
        }
    }
}

/// A Hessian-vector product on borrowed arguments and buffers made once: the two
/// functions of a [`CompiledHvp`] (the forward rules of the forward pass and of
/// the pullback) called as [`CompiledHvp::hvp`] calls them, without its copies of
/// the arguments, its fresh shadows and its owned results (`hvp` copies every
/// argument twice and allocates the shadows and their tangents per call; at the
/// suite's sizes that is as long as the primal). The shadows and their tangents
/// accumulate from call to call, as the suite's timed gradients' shadows do (the
/// cost is the same); the first call, from zeros, is checked against
/// [`CompiledHvp::hvp`] by [`check`].
pub struct HvpCall<'a> {
    rule: &'a CompiledHvp,
    ws: Workspace,
    fwd_args: Vec<Arg<'a>>,
    /// Where each parameter of the pullback's forward rule comes from.
    rvs_plan: Vec<Src<'a>>,
    shadows: Vec<Vec<f64>>,
    shadow_tangents: Vec<Vec<f64>>,
    out: Vec<Val>,
}

/// A parameter of the pullback's forward rule.
enum Src<'a> {
    /// An argument or a direction, read-only.
    Shared(Arg<'a>),
    /// Shadow `k`.
    Shadow(usize),
    /// The tangent of shadow `k`.
    ShadowTangent(usize),
}

impl<'a> HvpCall<'a> {
    /// `v`: the direction, one tangent slice per differentiated parameter (width
    /// 1).
    pub fn new(rule: &'a CompiledHvp, p: &'a Program, v: &'a [Vec<f64>]) -> HvpCall<'a> {
        let r = rule.rule();
        assert_eq!(r.width(), 1, "HvpCall is width 1");
        let layout = &r.layout;
        // The direction of each primal parameter.
        let mut dir: Vec<Option<&'a [f64]>> = vec![None; p.args.len()];
        let mut vs = v.iter();
        for (i, &d) in p.dual.iter().enumerate() {
            if d {
                dir[i] = Some(vs.next().expect("one direction per dual parameter"));
            }
        }
        let fwd_args = r
            .forward_layout
            .params
            .iter()
            .map(|&(i, lane)| match lane {
                None => Arg::from(&p.args[i]),
                Some(_) => Arg::F64s(dir[i].expect("a dual parameter")),
            })
            .collect();
        // The pullback's parameters: the slices, the shadows, the seeds.
        let ns = layout.slice_params.len();
        let nsh = layout.shadow_params.len();
        let rvs_plan = r
            .pullback_layout
            .params
            .iter()
            .map(|&(q, lane)| match (q, lane) {
                (q, None) if q < ns => Src::Shared(Arg::from(&p.args[layout.slice_params[q]])),
                (q, Some(_)) if q < ns => Src::Shared(Arg::F64s(
                    dir[layout.slice_params[q]].expect("a dual slice"),
                )),
                (q, None) if q < ns + nsh => Src::Shadow(q - ns),
                (q, Some(_)) if q < ns + nsh => Src::ShadowTangent(q - ns),
                (_, None) => Src::Shared(Arg::F64(1.0)),
                (q, Some(_)) => panic!("{}: a seed ({q}) with a tangent", p.name),
            })
            .collect();
        let zeros = || -> Vec<Vec<f64>> {
            layout
                .shadow_params
                .iter()
                .map(|&i| vec![0.0; p.args[i].slice_len().expect("a slice")])
                .collect()
        };
        HvpCall {
            rule,
            ws: Workspace::new(),
            fwd_args,
            rvs_plan,
            shadows: zeros(),
            shadow_tangents: zeros(),
            out: Vec::new(),
        }
    }

    /// One HVP.
    pub fn call(&mut self) {
        let r = self.rule.rule();
        let mut engine = self.rule.engine(&mut self.ws);
        engine
            .call_args(r.forward, black_box(&mut self.fwd_args), &mut self.out)
            .expect("the HVP's forward pass ran before");
        // Each shadow and each tangent is lent once, in the order the plan asks.
        let mut shadows: SmallVec<[Option<&mut [f64]>; 8]> =
            self.shadows.iter_mut().map(|s| Some(&mut s[..])).collect();
        let mut tangents: SmallVec<[Option<&mut [f64]>; 8]> = self
            .shadow_tangents
            .iter_mut()
            .map(|s| Some(&mut s[..]))
            .collect();
        let mut args: SmallVec<[Arg<'_>; 16]> = self
            .rvs_plan
            .iter()
            .map(|src| match *src {
                Src::Shared(ref a) => shared(a),
                Src::Shadow(k) => Arg::F64sMut(shadows[k].take().expect("each shadow once")),
                Src::ShadowTangent(k) => {
                    Arg::F64sMut(tangents[k].take().expect("each tangent once"))
                }
            })
            .collect();
        engine
            .call_args(r.pullback, &mut args, &mut self.out)
            .expect("the HVP's pullback ran before");
        black_box(&args);
    }

    /// The gradient and the HVP, flat (the shadows and their tangents, in order):
    /// what the calls so far accumulated.
    pub fn results(&self) -> (Vec<f64>, Vec<f64>) {
        (self.shadows.concat(), self.shadow_tangents.concat())
    }
}

/// A read-only argument lent again.
fn shared<'a>(a: &Arg<'a>) -> Arg<'a> {
    match *a {
        Arg::F64(x) => Arg::F64(x),
        Arg::F32(x) => Arg::F32(x),
        Arg::I64(x) => Arg::I64(x),
        Arg::Bool(x) => Arg::Bool(x),
        Arg::F64s(v) => Arg::F64s(v),
        Arg::F32s(v) => Arg::F32s(v),
        Arg::I64s(v) => Arg::I64s(v),
        _ => unreachable!("the HVP lends its mut slices itself"),
    }
}

// ---------------------------------------------------------------------------
// The checks
// ---------------------------------------------------------------------------

/// `|a - b| / max(|a|, |b|)` (0 when both are 0).
pub fn rel(a: f64, b: f64) -> f64 {
    let m = a.abs().max(b.abs());
    if m == 0.0 { 0.0 } else { (a - b).abs() / m }
}

/// The dot product, summed in twice the precision (Neumaier's compensated sum of
/// exact products), so that it is a reference for a JVP of 100,000 terms.
pub fn dot(a: &[f64], b: &[f64]) -> f64 {
    let (mut s, mut c) = (0.0f64, 0.0f64);
    let mut add = |x: f64| {
        let t = s + x;
        c += if s.abs() >= x.abs() {
            (s - t) + x
        } else {
            (x - t) + s
        };
        s = t;
    };
    for (&x, &y) in a.iter().zip(b) {
        let p = x * y;
        add(p);
        add(x.mul_add(y, -p));
    }
    s + c
}

/// Panics unless `got` equals `want` to `tol` relative, naming what.
pub fn close(what: &str, got: f64, want: f64, tol: f64) {
    let r = rel(got, want);
    assert!(
        r <= tol,
        "{what}: {got:e}, want {want:e} (relative error {r:.2e} > {tol:.0e})"
    );
}

/// Checks `got` against the dot product `a · b`, naming what: its error relative
/// to `Σ |a_i b_i|`, the size of the dot product's terms (a dot product's rounding
/// error is bounded by a multiple of it; without cancellation it is the plain
/// relative error, and where the terms cancel it is the error that rounding can
/// explain: logsumexp's JVP cancels to 1/3000 of its terms). Panics above `tol`;
/// returns that error and the plain relative one.
pub fn close_dot(what: &str, got: f64, a: &[f64], b: &[f64], tol: f64) -> (f64, f64) {
    let want = dot(a, b);
    let terms: f64 = a.iter().zip(b).map(|(x, y)| (x * y).abs()).sum();
    let r = if terms == 0.0 {
        rel(got, want)
    } else {
        (got - want).abs() / terms
    };
    assert!(
        r <= tol,
        "{what}: {got:e}, want {want:e} (error {r:.2e} of the terms' size {terms:e} > {tol:.0e}; \
         plain relative error {:.2e})",
        rel(got, want)
    );
    (r, rel(got, want))
}

/// The flat entries of the differentiated parameters in `vals` (one per
/// parameter, `None` for the constant ones).
fn flat_of(vals: &[Option<Val>]) -> Vec<f64> {
    vals.iter()
        .flatten()
        .flat_map(|v| match v {
            Val::F64s(s) => s.clone(),
            Val::F64(x) => vec![*x],
            other => panic!("a float or float slice, got {other:?}"),
        })
        .collect()
}

/// The one `f64` of `out`'s first entry.
fn first_f64(out: &[Val]) -> f64 {
    match out.first() {
        Some(Val::F64(x)) => *x,
        other => panic!("an f64 result, got {other:?}"),
    }
}

/// What [`check`] found: the largest relative errors, for the report.
#[derive(Debug, Default)]
pub struct Checked {
    /// The primal against num-dual's `f64` evaluation.
    pub value: f64,
    /// The JVPs (width 1, every lane of width 8) against the gradient's dot
    /// product with the direction, relative to the size of its terms
    /// ([`close_dot`]).
    pub jvp: f64,
    /// The same, plain relative errors.
    pub jvp_plain: f64,
    /// num-dual's JVPs against the same, relative to the size of its terms.
    pub nd_jvp: f64,
    /// Whether every lane of the width-8 JVP equals the width-1 JVP along its
    /// direction, bit for bit.
    pub lanes_exact: bool,
    /// The HVP's `vᵀHv` against num-dual's (`HyperDual64`), relative to the size
    /// of its terms.
    pub vhv: f64,
    /// The same, plain relative error.
    pub vhv_plain: f64,
}

/// Checks a program before it is timed (panics on a failure): the primal against
/// num-dual's `f64` evaluation of the same code (relative [`TOL_JVP`]), the JVPs
/// (width 1, each lane of width 8, num-dual's on `Dual64` and `DualSVec64`)
/// against the reverse-mode gradient's dot product with each direction
/// ([`TOL_JVP`], relative to the size of the dot product's terms: [`close_dot`]),
/// the HVP's gradient against reverse mode's ([`TOL_JVP`]) and num-dual's `vᵀHv`
/// on [`HyperDual64`] against `v · Hv` ([`TOL_HESSIAN`], as the JVPs), and the
/// zero-copy [`HvpCall`] against [`CompiledHvp::hvp`] (bit for bit).
pub fn check(p: &Program, c: &Compiled, dirs: &Directions, nd_in: &NdInputs) -> Checked {
    let name = p.name;
    let mut ws = Workspace::new();
    let mut found = Checked {
        lanes_exact: true,
        ..Checked::default()
    };
    // The primal.
    let flat = p.flat();
    let mut out = Vec::new();
    c.primal
        .call_into(&mut ws, &mut p.args.clone(), &mut out)
        .unwrap_or_else(|e| panic!("{name}: the primal fails: {e}"));
    let value = first_f64(&out);
    let nd_value = p.nd.eval(&flat[..]);
    close(&format!("{name}: value"), value, nd_value, TOL_JVP);
    found.value = rel(value, nd_value);

    // The gradient (reverse mode).
    let g = c
        .grad
        .value_and_gradient(&mut ws, &p.args)
        .unwrap_or_else(|e| panic!("{name}: the gradient fails: {e}"));
    let grad = flat_of(&g.gradient);
    assert_eq!(grad.len(), flat.len(), "{name}: gradient length");

    // JVPs: width 1 along each direction, and width 8.
    let mut w1 = Vec::new();
    for j in 0..WIDTH {
        let out = c
            .jvp1
            .jvp(&mut ws, &p.args, &dirs.vals(j, &p.dual))
            .unwrap_or_else(|e| panic!("{name}: the JVP fails: {e}"));
        let got = match &out.tangents[..] {
            [Val::F64(t)] => *t,
            other => panic!("{name}: one tangent, got {other:?}"),
        };
        let what = format!("{name}: JVP along direction {j}");
        let (r, plain) = close_dot(&what, got, &grad, &dirs.flat[j], TOL_JVP);
        found.jvp = found.jvp.max(r);
        found.jvp_plain = found.jvp_plain.max(plain);
        close(
            &format!("{name}: the JVP's value"),
            first_f64(out.value.as_deref().unwrap_or_default()),
            value,
            0.0,
        );
        w1.push(got);
    }
    let mut t8: Vec<Option<Val>> = Vec::new();
    let mut w8 = dirs.w8.iter();
    for &d in &p.dual {
        t8.push(d.then(|| Val::F64s(w8.next().expect("one per dual").clone())));
    }
    let out = c
        .jvp8
        .jvp(&mut ws, &p.args, &t8)
        .unwrap_or_else(|e| panic!("{name}: the width-{WIDTH} JVP fails: {e}"));
    let lanes = match &out.tangents[..] {
        [Val::F64s(l)] => l.clone(),
        other => panic!("{name}: {WIDTH} lanes, got {other:?}"),
    };
    for j in 0..WIDTH {
        let what = format!("{name}: lane {j} of the width-{WIDTH} JVP");
        let (r, plain) = close_dot(&what, lanes[j], &grad, &dirs.flat[j], TOL_JVP);
        found.jvp = found.jvp.max(r);
        found.jvp_plain = found.jvp_plain.max(plain);
        found.lanes_exact &= lanes[j].to_bits() == w1[j].to_bits();
    }

    // num-dual's JVPs.
    let d1 = p.nd.eval(&nd_in.dual[..]);
    close(&format!("{name}: num-dual's value"), d1.re, value, TOL_JVP);
    let what = format!("{name}: num-dual's JVP");
    found.nd_jvp = close_dot(&what, d1.eps, &grad, &dirs.flat[0], TOL_JVP).0;
    let d8 = p.nd.eval(&nd_in.dual8[..]);
    let eps = d8
        .eps
        .unwrap_generic(nalgebra::Const::<WIDTH>, nalgebra::U1);
    for j in 0..WIDTH {
        let what = format!("{name}: num-dual's width-{WIDTH} lane {j}");
        let (r, _) = close_dot(&what, eps[j], &grad, &dirs.flat[j], TOL_JVP);
        found.nd_jvp = found.nd_jvp.max(r);
    }

    // The HVP: through the API, then zero-copy.
    let h = c
        .hvp1
        .hvp(&mut ws, &p.args, &dirs.vals(0, &p.dual))
        .unwrap_or_else(|e| panic!("{name}: the HVP fails: {e}"));
    let (hg, hv) = (flat_of(&h.gradient), flat_of(&h.hvp));
    let scale = grad.iter().fold(0.0f64, |m, x| m.max(x.abs()));
    for (k, (&a, &b)) in hg.iter().zip(&grad).enumerate() {
        assert!(
            (a - b).abs() <= TOL_JVP * b.abs().max(scale * 1e-3),
            "{name}: the HVP's gradient entry {k}: {a:e}, reverse mode {b:e}"
        );
    }
    let nd_vhv = p.nd.eval(&nd_in.hyper[..]).eps1eps2;
    (found.vhv, found.vhv_plain) = close_dot(
        &format!("{name}: vᵀHv against num-dual's"),
        nd_vhv,
        &dirs.flat[0],
        &hv,
        TOL_HESSIAN,
    );
    let mut call = HvpCall::new(&c.hvp1, p, &dirs.w1[0]);
    call.call();
    let (zg, zhv) = call.results();
    assert!(
        zg.iter().zip(&hg).all(|(a, b)| a.to_bits() == b.to_bits())
            && zhv.iter().zip(&hv).all(|(a, b)| a.to_bits() == b.to_bits())
            && zg.len() == hg.len()
            && zhv.len() == hv.len(),
        "{name}: the zero-copy HVP differs from CompiledHvp::hvp"
    );
    found
}

/// Checks a dense Hessian `h` (row-major) of `p` without num-dual's dense
/// Hessian (minutes at n = 1,000 and for `mlp`): for four pairs of the
/// directions, `uᵀHv` against num-dual's [`HyperDual64`] sweep with `ε₁` along
/// `u` and `ε₂` along `v` (relative [`TOL_HESSIAN`]). Returns the largest
/// relative error.
pub fn check_hessian_projected(what: &str, p: &Program, h: &[f64], dirs: &Directions) -> f64 {
    let flat = p.flat();
    let m = flat.len();
    assert_eq!(h.len(), m * m, "{what}: Hessian size");
    let mut worst = 0.0f64;
    for a in 0..WIDTH / 2 {
        let (u, v) = (&dirs.flat[a], &dirs.flat[WIDTH / 2 + a]);
        let x: Vec<HyperDual64> = (0..m)
            .map(|i| HyperDual64::new(flat[i], u[i], v[i], 0.0))
            .collect();
        let nd_uhv = p.nd.eval(&x[..]).eps1eps2;
        let hv: Vec<f64> = (0..m).map(|r| dot(&h[r * m..(r + 1) * m], v)).collect();
        let what = format!("{what}: uᵀHv against num-dual's, pair {a}");
        worst = worst.max(close_dot(&what, nd_uhv, u, &hv, TOL_HESSIAN).1);
    }
    worst
}

/// Checks a dense Hessian against num-dual's: every entry to [`TOL_HESSIAN`]
/// relative to the larger of the two, or to the largest entry times 1e-6 where
/// both are that small (entries that are 0 in exact arithmetic come out as
/// rounding noise on either side). Returns the largest relative error over the
/// entries above that floor.
pub fn check_hessian(what: &str, got: &[f64], want: &[f64]) -> f64 {
    assert_eq!(got.len(), want.len(), "{what}: Hessian sizes");
    let scale = want.iter().fold(0.0f64, |m, x| m.max(x.abs()));
    let floor = scale * 1e-6;
    let mut worst = 0.0f64;
    for (k, (&a, &b)) in got.iter().zip(want).enumerate() {
        let m = a.abs().max(b.abs()).max(floor);
        let r = (a - b).abs() / m;
        assert!(
            r <= TOL_HESSIAN,
            "{what}: Hessian entry {k}: {a:e}, num-dual {b:e} (relative {r:.2e})"
        );
        if a.abs().max(b.abs()) >= floor {
            worst = worst.max(rel(a, b));
        }
    }
    worst
}
