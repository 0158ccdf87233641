//! Running a forward rule on any engine (the interpreter, or the JIT): its calling
//! convention, written once ([`run_frule`] on borrowed arguments, [`jvp_vals`] on
//! owned values).
//!
//! ```
//! use gradlift_adjoint::{FruleConfig, build_frule, jvp_vals};
//! use gradlift_ir::interp::{Interpreter, Val};
//!
//! let module = gradlift_ir::parse("
//!     func @f(%x: f64, %y: f64) -> f64 {
//!     entry:
//!         %xx = fmul %x, %x
//!         %y3 = fmul 3.0, %y
//!         %r = fadd %xx, %y3
//!         ret %r
//!     }
//! ")?;
//! let f = module.func_by_name("f").unwrap();
//! let rule = build_frule(&module, f, &FruleConfig::default_for(module.sig(f)))?;
//! let mut engine = Interpreter::new(&rule.module);
//! // The derivative at (2, 1) in the direction (1, 0.5): 2x + 3 * 0.5.
//! let args = [Val::F64(2.0), Val::F64(1.0)];
//! let out = jvp_vals(&mut engine, &rule, &args, &[Some(Val::F64(1.0)), Some(Val::F64(0.5))])?;
//! assert_eq!(out.value, Some(vec![Val::F64(7.0)]));
//! assert_eq!(out.tangents, [Val::F64(5.5)]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use gradlift_ir::engine::{Arg, Engine, Val, check_args};
use gradlift_ir::{Elem, FuncId, Module, Type};
use smallvec::SmallVec;

use crate::eval::EvalError;
use crate::frule::{DualActivity, Frule, FruleLayout};

/// What a forward rule computed: [`jvp_vals`]'s result.
#[derive(Clone, PartialEq, Debug)]
pub struct Jvp {
    /// The primal results, or `None` when the return is `dualonly`.
    pub value: Option<Vec<Val>>,
    /// One tangent per float result ([`FruleLayout::tangent_results`](crate::FruleLayout::tangent_results)):
    /// a scalar at width 1, a slice of the N lanes at width N.
    pub tangents: Vec<Val>,
    /// The arguments after the call (`mut` slices as the function left them).
    pub args: Vec<Val>,
    /// Per parameter: for a `dual` slice, its tangent slice after the call (for a
    /// `mut` slice, the tangent of its final contents; lane `j` of element `i` at
    /// `i * N + j`); `None` otherwise.
    pub slices: Vec<Option<Val>>,
}

/// Runs `rule` (which `engine` must run: its module) with borrowed arguments and
/// tangents: the forward rule's calling convention.
///
/// `args` are the primal's arguments (`mut` slices are written in place, as the
/// primal writes them). `tangents` has one entry per `dual` parameter, in order:
/// for a float scalar, at width 1 a scalar of its type and at width N a slice of
/// its N lanes (read only); for a float slice, a slice N times its length with lane
/// `j` of element `i` at `i * N + j`, writable when the parameter is `mut` (it then
/// ends holding the tangent of the slice's final contents: overwritten, not added
/// to). The results go into `out`: the primal results (unless the return is
/// `dualonly`), then N tangents per float result when the return is not `const`.
///
/// Checks the arguments and the tangents against the signature first. Nothing is
/// allocated beyond what the engine allocates and `out`'s growth.
pub fn run_frule<E: Engine>(
    engine: &mut E,
    rule: &Frule,
    args: &mut [Arg<'_>],
    tangents: &mut [Arg<'_>],
    out: &mut Vec<Val>,
) -> Result<(), EvalError> {
    call_frule(
        engine,
        &rule.module,
        rule.func,
        &rule.layout,
        args,
        tangents,
        out,
    )
}

/// [`run_frule`] for the forward rule `func` of `module` laid out as `layout`.
pub(crate) fn call_frule<E: Engine>(
    engine: &mut E,
    module: &Module,
    func: FuncId,
    layout: &FruleLayout,
    args: &mut [Arg<'_>],
    tangents: &mut [Arg<'_>],
    out: &mut Vec<Val>,
) -> Result<(), EvalError> {
    let sig = module.sig(layout.primal);
    let fname = module.name(layout.primal);
    check_args(fname, sig, args).map_err(|k| EvalError::BadArguments(k.to_string()))?;
    let width = layout.config.width as usize;
    let dual: SmallVec<[usize; 8]> = (0..sig.params.len())
        .filter(|&i| layout.config.params[i] == DualActivity::Dual)
        .collect();
    let bad = |m: String| Err(EvalError::BadArguments(m));
    if tangents.len() != dual.len() {
        return bad(format!(
            "the forward rule of @{fname} takes {} (one per `dual` parameter), given {}",
            count(dual.len(), "tangent"),
            tangents.len()
        ));
    }
    for (t, &i) in tangents.iter().zip(&dual) {
        let ty = sig.params[i];
        let (want, len) = if ty.is_slice() {
            (ty, args[i].slice_len().unwrap_or(0) * width)
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
        let fits = t.fits(want) && t.slice_len().unwrap_or(0) == len;
        if !fits {
            let shape = if want.is_slice() {
                format!("{} of length {len}", article(want))
            } else {
                article(want)
            };
            // A tangent handed over writable for a read-only parameter is described
            // as the caller wrote it.
            let given = if want.is_mut_slice() {
                t.ty()
            } else {
                t.shared().ty()
            };
            return bad(format!(
                "the tangent of parameter {} of @{fname} must be {shape}{}, given {}{}",
                i + 1,
                if ty.is_slice() && width > 1 {
                    format!(" ({width} lanes per element)")
                } else if width > 1 {
                    format!(" (its {width} lanes)")
                } else {
                    String::new()
                },
                article(given),
                t.slice_len()
                    .map(|n| format!(" of length {n}"))
                    .unwrap_or_default()
            ));
        }
    }
    let mut call: SmallVec<[Arg<'_>; 16]> = SmallVec::new();
    let mut tangents = tangents.iter_mut();
    for (i, a) in args.iter_mut().enumerate() {
        call.push(a.reborrow());
        if layout.config.params[i] != DualActivity::Dual {
            continue;
        }
        let t = tangents
            .next()
            .expect("checked: one tangent per dual parameter");
        if sig.params[i].is_slice() || width == 1 {
            call.push(t.reborrow());
        } else {
            match t {
                Arg::F64s(v) => call.extend(v.iter().map(|&x| Arg::F64(x))),
                Arg::F64sMut(v) => call.extend(v.iter().map(|&x| Arg::F64(x))),
                Arg::F32s(v) => call.extend(v.iter().map(|&x| Arg::F32(x))),
                Arg::F32sMut(v) => call.extend(v.iter().map(|&x| Arg::F32(x))),
                _ => unreachable!("checked: the lanes of a scalar are a float slice"),
            }
        }
    }
    engine
        .call_args(func, &mut call, out)
        .map_err(|error| EvalError::Run {
            what: format!("@{}", module.name(func)),
            error: Box::new(error),
        })
}

/// [`run_frule`] on owned values: `args` and `tangents` (one entry per parameter:
/// `Some` for the `dual` ones, shaped as [`run_frule`] says, `None` for the rest)
/// are copied, so the caller's stay as they are.
pub fn jvp_vals<E: Engine>(
    engine: &mut E,
    rule: &Frule,
    args: &[Val],
    tangents: &[Option<Val>],
) -> Result<Jvp, EvalError> {
    let (module, layout) = (&rule.module, &rule.layout);
    let sig = module.sig(layout.primal);
    let fname = module.name(layout.primal);
    if tangents.len() != sig.params.len() {
        return Err(EvalError::BadArguments(format!(
            "@{fname} takes {}, given {} (one per parameter, `None` for the `const` ones)",
            count(sig.params.len(), "parameter"),
            count(tangents.len(), "tangent")
        )));
    }
    for (i, t) in tangents.iter().enumerate() {
        let dual = layout.config.params[i] == DualActivity::Dual;
        if t.is_some() != dual {
            return Err(EvalError::BadArguments(format!(
                "parameter {} of @{fname} is `{}`: {}",
                i + 1,
                layout.config.params[i],
                if dual {
                    "it needs a tangent"
                } else {
                    "it takes no tangent (give `None`)"
                }
            )));
        }
    }
    let mut args: Vec<Val> = args.to_vec();
    let mut ts: Vec<Val> = tangents.iter().flatten().cloned().collect();
    let mut out = Vec::new();
    {
        let mut arg_views: SmallVec<[Arg<'_>; 8]> = args.iter_mut().map(Val::as_arg).collect();
        let mut t_views: SmallVec<[Arg<'_>; 8]> = ts.iter_mut().map(Val::as_arg).collect();
        run_frule(engine, rule, &mut arg_views, &mut t_views, &mut out)?;
    }
    let width = layout.config.width as usize;
    let n_primal = if layout.primal_results {
        sig.results.len()
    } else {
        0
    };
    let value = layout.primal_results.then(|| out[..n_primal].to_vec());
    let lanes = &out[n_primal..];
    let tangents_out: Vec<Val> = layout
        .tangent_results
        .iter()
        .enumerate()
        .map(|(k, &r)| {
            let l = &lanes[k * width..(k + 1) * width];
            if width == 1 {
                l[0].clone()
            } else if sig.results[r] == Type::F32 {
                Val::F32s(
                    l.iter()
                        .map(|v| if let Val::F32(x) = v { *x } else { 0.0 })
                        .collect(),
                )
            } else {
                Val::F64s(
                    l.iter()
                        .map(|v| if let Val::F64(x) = v { *x } else { 0.0 })
                        .collect(),
                )
            }
        })
        .collect();
    let mut slices = vec![None; sig.params.len()];
    let mut ts = ts.into_iter();
    for (i, slot) in slices.iter_mut().enumerate() {
        if layout.config.params[i] == DualActivity::Dual {
            let t = ts.next().expect("one tangent per dual parameter");
            if sig.params[i].is_slice() {
                *slot = Some(t);
            }
        }
    }
    Ok(Jvp {
        value,
        tangents: tangents_out,
        args,
        slices,
    })
}

/// `1 tangent`, `2 tangents`.
pub(crate) fn count(n: usize, what: &str) -> String {
    if n == 1 {
        format!("1 {what}")
    } else {
        format!("{n} {what}s")
    }
}

/// The type with its article: `an f64`, `a bool`, `a [f64]`, `a mut [f64]`.
pub(crate) fn article(ty: Type) -> String {
    let name = ty.to_string();
    let an = name.starts_with(['f', 'i']);
    format!("{} {name}", if an { "an" } else { "a" })
}
