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

use gradlift_ir::engine::{Arg, Engine, Val, check_args};
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
/// The arguments and directions are copied (the caller's stay as they are), then
/// [`run_hvp`] runs on the copies: the one calling convention.
///
/// The tape is back where it was afterwards, whether the call succeeded or failed.
pub fn hvp_vals<E: Engine>(
    engine: &mut E,
    rule: &HvpRule,
    args: &[Val],
    v: &[Option<Val>],
) -> Result<Hvp, EvalError> {
    let layout = &rule.layout;
    let sig = rule.module.sig(layout.primal);
    let fname = rule.module.name(layout.primal);
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
    let mut args: Vec<Val> = args.to_vec();
    let mut ts: Vec<Val> = v.iter().flatten().cloned().collect();
    // The gradient and H v of each differentiated parameter, as `run_hvp` wants
    // them: a slice of its length (1 for a scalar) and one of `width` times that.
    let (mut gradient, mut hvp): (Vec<Val>, Vec<Val>) = v
        .iter()
        .enumerate()
        .filter(|(_, d)| d.is_some())
        .map(|(i, _)| {
            let len = args[i].slice_len().unwrap_or(1);
            let f32 = sig.params[i].elem().map_or(sig.params[i], Elem::ty) == Type::F32;
            if f32 {
                (Val::F32s(vec![0.0; len]), Val::F32s(vec![0.0; len * width]))
            } else {
                (Val::F64s(vec![0.0; len]), Val::F64s(vec![0.0; len * width]))
            }
        })
        .unzip();
    let mut value = Vec::new();
    {
        let mut a: SmallVec<[Arg<'_>; 8]> = args.iter_mut().map(Val::as_arg).collect();
        let mut t: SmallVec<[Arg<'_>; 8]> = ts.iter_mut().map(Val::as_arg).collect();
        let mut g: SmallVec<[Arg<'_>; 8]> = gradient.iter_mut().map(Val::as_arg).collect();
        let mut h: SmallVec<[Arg<'_>; 8]> = hvp.iter_mut().map(Val::as_arg).collect();
        run_hvp(
            engine,
            rule,
            &mut a,
            &mut t,
            &mut value,
            &mut g,
            &mut h,
            &mut Vec::new(),
        )?;
    }
    // Back to `Hvp`'s shapes: a scalar's gradient a scalar, its H v a scalar at
    // width 1.
    let mut gradient_out = vec![None; sig.params.len()];
    let mut hvp_out = vec![None; sig.params.len()];
    let differentiated = (0..sig.params.len()).filter(|&i| v[i].is_some());
    for ((i, g), h) in differentiated.zip(gradient).zip(hvp) {
        let scalar = !sig.params[i].is_slice();
        let first = |x: &Val| match x {
            Val::F32s(x) => Val::F32(x[0]),
            Val::F64s(x) => Val::F64(x[0]),
            other => other.clone(),
        };
        gradient_out[i] = Some(if scalar { first(&g) } else { g });
        hvp_out[i] = Some(if scalar && width == 1 { first(&h) } else { h });
    }
    Ok(Hvp {
        value: layout.config.needs_primal.then_some(value),
        gradient: gradient_out,
        hvp: hvp_out,
    })
}

/// Runs `rule` (which `engine` must run: its module) with borrowed arguments,
/// directions and outputs: the second-order rule's calling convention, in which
/// nothing is copied and, once `value`, `scratch` and the engine have grown,
/// nothing is allocated.
///
/// - `args` are the primal's arguments (`mut` slices are written in place, as the
///   primal writes them);
/// - `directions` has one entry per `active` and `dup` parameter, in order, shaped
///   as a forward rule's tangents at the rule's width N: for a float scalar a
///   scalar at width 1 and a slice of its N lanes at width N; for a float slice a
///   slice N times its length, lane `j` of element `i` at `i * N + j` (writable
///   when the parameter is `mut`: it ends holding the tangent of the slice's
///   final contents);
/// - `value` gets the primal results (empty when the rule does not return them);
/// - `gradient` has one writable slice per `active` and `dup` parameter, in order,
///   of its element type: of length 1 for a scalar, of the slice's length for a
///   slice. It is overwritten with the gradient from unit seeds (for a `dup`
///   slice, from a zero shadow);
/// - `hvp` has one writable slice per `active` and `dup` parameter, N times as
///   long as its `gradient` slice (lane `j` of element `i` at `i * N + j`): it is
///   overwritten with the Hessian's products with the directions;
/// - `scratch` holds the pullback's results during the call.
///
/// The numbers are those of [`hvp_vals`], which runs this on copies. The tape is
/// back where it was afterwards, whether the call succeeded or failed.
#[allow(clippy::too_many_arguments)]
pub fn run_hvp<E: Engine>(
    engine: &mut E,
    rule: &HvpRule,
    args: &mut [Arg<'_>],
    directions: &mut [Arg<'_>],
    value: &mut Vec<Val>,
    gradient: &mut [Arg<'_>],
    hvp: &mut [Arg<'_>],
    scratch: &mut Vec<Val>,
) -> Result<(), EvalError> {
    let layout = &rule.layout;
    let sig = rule.module.sig(layout.primal);
    let fname = rule.module.name(layout.primal);
    check_args(fname, sig, args).map_err(|k| EvalError::BadArguments(k.to_string()))?;
    let bad = |m: String| Err(EvalError::BadArguments(m));
    let width = rule.width() as usize;
    let differentiated =
        || (0..sig.params.len()).filter(|&i| layout.config.params[i] != Activity::Const);
    let n_diff = differentiated().count();
    for (what, n) in [
        ("direction", directions.len()),
        ("gradient buffer", gradient.len()),
        ("H v buffer", hvp.len()),
    ] {
        if n != n_diff {
            return bad(format!(
                "the second-order rule of @{fname} takes {} (one per `active` or `dup` parameter), given {n}",
                count(n_diff, what)
            ));
        }
    }
    for (k, i) in differentiated().enumerate() {
        let ty = sig.params[i];
        // The direction's shape, checked here so that the message names the
        // function and says "direction" (the forward rule of the forward pass would
        // check it too, in its own words).
        let d = &directions[k];
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
                Some(n) => format!("{} of length {n}", article(d.shared().ty())),
                None => article(d.ty()),
            };
            return bad(format!(
                "the direction of parameter {} of @{fname} must be {shape}{lanes}, given {given}",
                i + 1
            ));
        }
        if ty.is_mut_slice() && !d.fits(ty) {
            return bad(format!(
                "the direction of parameter {} of @{fname} must be writable (a {ty}): the forward pass writes the tangent of the slice's final contents into it",
                i + 1
            ));
        }
        // The output buffers: writable slices of the element type.
        let elem = ty.elem().map_or(ty, Elem::ty);
        let want = Type::slice_mut(if elem == Type::F32 {
            Elem::F32
        } else {
            Elem::F64
        });
        let len = args[i].slice_len().unwrap_or(1);
        for (what, b, len) in [
            ("gradient buffer", &gradient[k], len),
            ("H v buffer", &hvp[k], len * width),
        ] {
            if !(b.fits(want) && b.slice_len() == Some(len)) {
                return bad(format!(
                    "the {what} of parameter {} of @{fname} must be a {want} of length {len}, given {}{}",
                    i + 1,
                    article(b.ty()),
                    b.slice_len()
                        .map(|n| format!(" of length {n}"))
                        .unwrap_or_default()
                ));
            }
        }
    }
    let before = engine.tape().scalars;
    let result = run(
        engine, rule, args, directions, value, gradient, hvp, scratch,
    );
    let after = engine.tape().scalars;
    if before == 0 {
        engine.reset_tape();
    }
    result?;
    if after != before {
        return Err(EvalError::Tape { before, after });
    }
    Ok(())
}

/// Zeroes a writable float slice.
fn zero(a: &mut Arg<'_>) {
    match a {
        Arg::F64sMut(x) => x.fill(0.0),
        Arg::F32sMut(x) => x.fill(0.0),
        _ => {}
    }
}

/// Writes the float scalar `v` at index `k` of a writable float slice.
fn put(a: &mut Arg<'_>, k: usize, v: &Val) {
    match (a, v) {
        (Arg::F64sMut(x), Val::F64(v)) => x[k] = *v,
        (Arg::F32sMut(x), Val::F32(v)) => x[k] = *v,
        _ => {}
    }
}

#[allow(clippy::too_many_arguments)]
fn run<E: Engine>(
    engine: &mut E,
    rule: &HvpRule,
    args: &mut [Arg<'_>],
    directions: &mut [Arg<'_>],
    value: &mut Vec<Val>,
    gradient: &mut [Arg<'_>],
    hvp: &mut [Arg<'_>],
    scratch: &mut Vec<Val>,
) -> Result<(), EvalError> {
    let layout = &rule.layout;
    let sig = rule.module.sig(layout.primal);
    let width = rule.width() as usize;
    // The forward pass, with the directions as tangents.
    call_frule(
        engine,
        &rule.module,
        rule.forward,
        &rule.forward_layout,
        args,
        directions,
        value,
    )?;
    // The position of each differentiated parameter among them.
    let diff_index = |i: usize| {
        (0..i)
            .filter(|&p| layout.config.params[p] != Activity::Const)
            .count()
    };
    // The pullback: slices as the forward pass left them (with their tangents),
    // zero shadows (with zero tangents): the `gradient` and `hvp` buffers of the
    // `dup` parameters, unit seeds.
    let mut rvs_args: SmallVec<[Arg<'_>; 8]> = SmallVec::new();
    let mut rvs_ts: SmallVec<[Arg<'_>; 8]> = SmallVec::new();
    {
        let mut dirs = directions.iter_mut().enumerate();
        let mut grads = gradient.iter_mut().enumerate();
        let mut hvps = hvp.iter_mut().enumerate();
        let mut slices = layout.slice_params.iter().peekable();
        for (i, a) in args.iter_mut().enumerate() {
            if slices.next_if(|&&p| p == i).is_some() {
                rvs_args.push(a.reborrow());
            }
        }
        // The tangents of the slices, in the order of the slices.
        for &i in &layout.slice_params {
            if layout.config.params[i] != Activity::Const {
                let k = diff_index(i);
                let (_, d) = dirs
                    .find(|(j, _)| *j == k)
                    .expect("one direction per differentiated parameter");
                rvs_ts.push(d.reborrow());
            }
        }
        for &i in &layout.shadow_params {
            let k = diff_index(i);
            let (_, g) = grads
                .find(|(j, _)| *j == k)
                .expect("one gradient buffer per differentiated parameter");
            let (_, h) = hvps
                .find(|(j, _)| *j == k)
                .expect("one H v buffer per differentiated parameter");
            zero(g);
            zero(h);
            rvs_args.push(g.reborrow());
            rvs_ts.push(h.reborrow());
        }
    }
    for &j in &layout.seeded_results {
        rvs_args.push(match sig.results[j] {
            Type::F32 => Arg::F32(1.0),
            _ => Arg::F64(1.0),
        });
    }
    call_frule(
        engine,
        &rule.module,
        rule.pullback,
        &rule.pullback_layout,
        &mut rvs_args,
        &mut rvs_ts,
        scratch,
    )?;
    drop((rvs_args, rvs_ts));
    // The active parameters' cotangents, then N lanes of each one's H v.
    let n_active = layout.active_params.len();
    for (k, &i) in layout.active_params.iter().enumerate() {
        let p = diff_index(i);
        put(&mut gradient[p], 0, &scratch[k]);
        for j in 0..width {
            put(&mut hvp[p], j, &scratch[n_active + k * width + j]);
        }
    }
    Ok(())
}
