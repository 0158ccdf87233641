//! Second order: Hessian-vector products, by forward mode over reverse mode.
//!
//! [`build_hvp`] derives the reverse rule of `@f` ([`build_rrule`]: `@f.fwd` and
//! `@f.rvs`) and then the forward rules of both ([`build_frule`](crate::build_frule)
//! applied to derived code, tape ops included): `@f.fwd.jvp` runs the primal with
//! the input's tangents `v` and pushes every saved value followed by its tangents;
//! `@f.rvs.jvp` pops them and runs the pullback with their tangents, so it returns
//! the gradient and, as its tangent, the derivative of the gradient along `v`:
//! `H v`. With width N, N directions per sweep.
//!
//! ```
//! use gradlift_adjoint::{RuleConfig, build_hvp, hvp_vals};
//! use gradlift_ir::interp::{Interpreter, Val};
//!
//! let module = gradlift_ir::parse("
//!     func @f(%x: f64, %y: f64) -> f64 {
//!     entry:
//!         %xx = fmul %x, %x
//!         %xxy = fmul %xx, %y
//!         ret %xxy
//!     }
//! ")?;
//! let f = module.func_by_name("f").unwrap();
//! let rule = build_hvp(&module, f, &RuleConfig::default_for(module.sig(f)), 1)?;
//! let mut engine = Interpreter::new(&rule.module);
//! // f = x² y: the gradient (2xy, x²), the Hessian [[2y, 2x], [2x, 0]].
//! let (x, y) = (3.0, 2.0);
//! let out = hvp_vals(&mut engine, &rule, &[Val::F64(x), Val::F64(y)], &[Some(Val::F64(1.0)), Some(Val::F64(0.0))])?;
//! assert_eq!(out.gradient, [Some(Val::F64(12.0)), Some(Val::F64(9.0))]);
//! assert_eq!(out.hvp, [Some(Val::F64(4.0)), Some(Val::F64(6.0))]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use gradlift_ir::engine::{Arg, Engine, Val};
use gradlift_ir::{Elem, FuncId, Module, Type};
use smallvec::SmallVec;

use crate::config::{Activity, RuleConfig};
use crate::error::AdError;
use crate::eval::EvalError;
use crate::frule::{DualActivity, DualRet, FruleConfig, FruleLayout, build_frules, frule_layout};
use crate::fwd_eval::{article, call_frule, count};
use crate::rrule::{RuleLayout, build_rrule};

/// The second-order rule of a function: the forward rules of its forward pass and
/// of its pullback, in one module.
#[derive(Clone, Debug)]
pub struct HvpRule {
    /// The input module plus the reverse rule and the two forward rules (and those
    /// of the functions they call).
    pub module: Module,
    /// The forward rule of the forward pass (`@f.fwd.jvp...`).
    pub forward: FuncId,
    /// The forward rule of the pullback (`@f.rvs.jvp...`).
    pub pullback: FuncId,
    /// How the reverse rule lines up with the primal (its configuration says which
    /// parameters get a gradient and a Hessian-vector product).
    pub layout: RuleLayout,
    /// How `forward` lines up with the forward pass.
    pub forward_layout: FruleLayout,
    /// How `pullback` lines up with the pullback.
    pub pullback_layout: FruleLayout,
}

impl HvpRule {
    /// Directions per call.
    pub fn width(&self) -> u32 {
        self.forward_layout.config.width
    }
}

/// Derives the second-order rule of `func`: the reverse rule under `config`, then
/// the forward rules of its forward pass (the `active` and `dup` parameters
/// `dual`) and of its pullback (the slices and shadows of `dup` parameters `dual`,
/// the seeds `const`), `width` directions per sweep.
pub fn build_hvp(
    module: &Module,
    func: FuncId,
    config: &RuleConfig,
    width: u32,
) -> Result<HvpRule, AdError> {
    let rule = build_rrule(module, func, config)?;
    let dual = |a: Activity| match a {
        Activity::Active | Activity::Dup | Activity::DupNoNeed => DualActivity::Dual,
        Activity::Const => DualActivity::Const,
    };
    let fwd_config = FruleConfig::matching(config, width).with_ret(DualRet::Const);
    let layout = &rule.layout;
    let mut rvs_params: Vec<DualActivity> = layout
        .slice_params
        .iter()
        .map(|&i| dual(config.params[i]))
        .collect();
    rvs_params.extend(layout.shadow_params.iter().map(|_| DualActivity::Dual));
    rvs_params.extend(layout.seeded_results.iter().map(|_| DualActivity::Const));
    let rvs_config = FruleConfig {
        params: rvs_params,
        ret: DualRet::Dual,
        width,
    };
    let (out, ids) = build_frules(
        &rule.module,
        &[
            (rule.forward, fwd_config.clone()),
            (rule.pullback, rvs_config.clone()),
        ],
    )?;
    Ok(HvpRule {
        forward_layout: frule_layout(rule.forward, rule.module.sig(rule.forward), &fwd_config),
        pullback_layout: frule_layout(rule.pullback, rule.module.sig(rule.pullback), &rvs_config),
        module: out,
        forward: ids[0],
        pullback: ids[1],
        layout: rule.layout,
    })
}

/// What [`hvp_vals`] computed.
#[derive(Clone, PartialEq, Debug)]
pub struct Hvp {
    /// The primal results, or `None` when the rule does not return them.
    pub value: Option<Vec<Val>>,
    /// Per parameter: the gradient as [`value_and_gradient`](crate::value_and_gradient)
    /// gives it (the cotangent of an `active` one, the shadow of a `dup` one, from
    /// zero shadows and unit seeds), `None` for `const`.
    pub gradient: Vec<Option<Val>>,
    /// Per parameter: the product of the Hessian with the directions, `None` for
    /// `const`: for an `active` scalar a scalar at width 1 and its N lanes at width
    /// N; for a `dup` slice a slice N times its length (lane `j` of element `i` at
    /// `i * N + j`).
    pub hvp: Vec<Option<Val>>,
}

/// Runs `rule` on `engine` (which runs `rule.module`): the value, the gradient (unit
/// seeds) and the Hessian's products with the directions `v` (one entry per
/// parameter: `Some` for the `active` and `dup` ones, shaped as a forward rule's
/// tangents ([`run_frule`](crate::run_frule)), `None` for the `const` ones).
///
/// The tape is back where it was afterwards, whether the call succeeded or failed.
pub fn hvp_vals<E: Engine>(
    engine: &mut E,
    rule: &HvpRule,
    args: &[Val],
    v: &[Option<Val>],
) -> Result<Hvp, EvalError> {
    let layout = &rule.layout;
    let sig = rule.module.sig(layout.primal).clone();
    let fname = rule.module.name(layout.primal).to_string();
    let bad = |m: String| Err(EvalError::BadArguments(m));
    if args.len() != sig.params.len() {
        return bad(format!(
            "@{fname} takes {}, given {}",
            count(sig.params.len(), "parameter"),
            count(args.len(), "argument")
        ));
    }
    if v.len() != sig.params.len() {
        return bad(format!(
            "@{fname} takes {}, given {} (one per parameter, `None` for the `const` ones)",
            count(sig.params.len(), "parameter"),
            count(v.len(), "direction")
        ));
    }
    for (i, d) in v.iter().enumerate() {
        let has = layout.config.params[i] != Activity::Const;
        if d.is_some() != has {
            return bad(format!(
                "parameter {} of @{fname} is `{}`: {}",
                i + 1,
                layout.config.params[i],
                if has {
                    "it needs a direction"
                } else {
                    "it takes no direction (give `None`)"
                }
            ));
        }
    }
    let width = rule.width() as usize;
    // The directions' shapes, checked here so that the message names the function
    // and says "direction" (the forward rule of the forward pass would check them
    // too, in its own words).
    for (i, d) in v.iter().enumerate() {
        let Some(d) = d else { continue };
        let ty = sig.params[i];
        let (want, len) = if ty.is_slice() {
            (
                ty.elem().map(Type::slice).unwrap_or(ty),
                args[i].slice_len().unwrap_or(0) * width,
            )
        } else if width == 1 {
            (ty, 0)
        } else {
            let elem = if ty == Type::F32 {
                Elem::F32
            } else {
                Elem::F64
            };
            (Type::slice(elem), width)
        };
        if !(d.fits(want) && d.slice_len().unwrap_or(0) == len) {
            let shape = if want.is_slice() {
                format!("{} of length {len}", article(want))
            } else {
                article(want)
            };
            let lanes = if ty.is_slice() && width > 1 {
                format!(" ({width} lanes per element)")
            } else if width > 1 {
                format!(" (its {width} lanes)")
            } else {
                String::new()
            };
            let given = match d.slice_len() {
                Some(n) => format!("{} of length {n}", article(d.ty())),
                None => article(d.ty()),
            };
            return bad(format!(
                "the direction of parameter {} of @{fname} must be {shape}{lanes}, given {given}",
                i + 1
            ));
        }
    }
    let before = engine.tape().scalars;
    let result = run(engine, rule, &sig, args, v, width);
    let after = engine.tape().scalars;
    if before == 0 {
        engine.reset_tape();
    }
    let out = result?;
    if after != before {
        return Err(EvalError::Tape { before, after });
    }
    Ok(out)
}

fn run<E: Engine>(
    engine: &mut E,
    rule: &HvpRule,
    sig: &gradlift_ir::Signature,
    args: &[Val],
    v: &[Option<Val>],
    width: usize,
) -> Result<Hvp, EvalError> {
    let layout = &rule.layout;
    // The forward pass, with the directions as tangents.
    let mut args: Vec<Val> = args.to_vec();
    let mut ts: Vec<Val> = v.iter().flatten().cloned().collect();
    let mut value = Vec::new();
    {
        let mut a: SmallVec<[Arg<'_>; 8]> = args.iter_mut().map(Val::as_arg).collect();
        let mut t: SmallVec<[Arg<'_>; 8]> = ts.iter_mut().map(Val::as_arg).collect();
        call_frule(
            engine,
            &rule.module,
            rule.forward,
            &rule.forward_layout,
            &mut a,
            &mut t,
            &mut value,
        )?;
    }
    // Which tangent belongs to which parameter.
    let mut tangent_of: Vec<Option<usize>> = vec![None; sig.params.len()];
    let mut k = 0;
    for (i, d) in v.iter().enumerate() {
        if d.is_some() {
            tangent_of[i] = Some(k);
            k += 1;
        }
    }
    // The pullback: slices as the forward pass left them (with their tangents),
    // zero shadows (with zero tangents), unit seeds.
    let mut rvs_args: Vec<Val> = Vec::new();
    let mut rvs_ts: Vec<Val> = Vec::new();
    for &i in &layout.slice_params {
        rvs_args.push(args[i].clone());
        if let Some(k) = tangent_of[i] {
            rvs_ts.push(ts[k].clone());
        }
    }
    for &i in &layout.shadow_params {
        let mut s = args[i].clone();
        s.assign_zeros_like(&args[i]);
        let n = args[i].slice_len().unwrap_or(0) * width;
        let t = match sig.params[i].elem().map(|e| e.ty()) {
            Some(Type::F32) => Val::F32s(vec![0.0; n]),
            _ => Val::F64s(vec![0.0; n]),
        };
        rvs_args.push(s);
        rvs_ts.push(t);
    }
    for &j in &layout.seeded_results {
        rvs_args.push(match sig.results[j] {
            Type::F32 => Val::F32(1.0),
            _ => Val::F64(1.0),
        });
    }
    let mut out = Vec::new();
    {
        let mut a: SmallVec<[Arg<'_>; 8]> = rvs_args.iter_mut().map(Val::as_arg).collect();
        let mut t: SmallVec<[Arg<'_>; 8]> = rvs_ts.iter_mut().map(Val::as_arg).collect();
        call_frule(
            engine,
            &rule.module,
            rule.pullback,
            &rule.pullback_layout,
            &mut a,
            &mut t,
            &mut out,
        )?;
    }
    let n_active = layout.active_params.len();
    let mut gradient = vec![None; sig.params.len()];
    let mut hvp = vec![None; sig.params.len()];
    for (k, &i) in layout.active_params.iter().enumerate() {
        gradient[i] = Some(out[k].clone());
        let lanes = &out[n_active + k * width..n_active + (k + 1) * width];
        hvp[i] = Some(if width == 1 {
            lanes[0].clone()
        } else if sig.params[i] == Type::F32 {
            Val::F32s(
                lanes
                    .iter()
                    .map(|v| if let Val::F32(x) = v { *x } else { 0.0 })
                    .collect(),
            )
        } else {
            Val::F64s(
                lanes
                    .iter()
                    .map(|v| if let Val::F64(x) = v { *x } else { 0.0 })
                    .collect(),
            )
        });
    }
    let n_slices = layout.slice_params.len();
    let dual_slices = layout
        .slice_params
        .iter()
        .filter(|&&i| tangent_of[i].is_some())
        .count();
    for (k, &i) in layout.shadow_params.iter().enumerate() {
        gradient[i] = Some(rvs_args[n_slices + k].clone());
        hvp[i] = Some(rvs_ts[dual_slices + k].clone());
    }
    Ok(Hvp {
        value: layout.config.needs_primal.then_some(value),
        gradient,
        hvp,
    })
}
