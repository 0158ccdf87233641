//! Second order (`build_hvp`: forward mode over reverse mode) against independent
//! oracles: Hessian-vector products against central differences of reverse-mode
//! gradients, Hessians (from HVPs along the unit vectors) symmetric, width N
//! bit-identical to N width-1 calls, on both reverse-mode corpora.

use gradlift_adjoint::{
    Activity, HvpRule, RuleConfig, Seeds, build_hvp, build_rrule, hvp_vals, value_and_gradient,
};
use gradlift_ir::interp::{Interpreter, Val};
use gradlift_ir::{Module, Type, parse, verify};

#[path = "corpus/inputs.rs"]
mod inputs;
mod support;

use support::Rng;

const SCALARS: &str = include_str!("corpus/scalars.ir");
const MEMORY: &str = include_str!("corpus/memory.ir");

fn module(text: &str) -> Module {
    let m = parse(text).unwrap_or_else(|e| panic!("{e}"));
    verify(&m).unwrap_or_else(|e| panic!("{e}"));
    m
}

/// The coordinates a gradient has: (parameter, element) for every `active` scalar
/// (element `None`) and every element of a `dup` slice.
fn coords(args: &[Val], config: &RuleConfig) -> Vec<(usize, Option<usize>)> {
    let mut out = Vec::new();
    for (i, a) in args.iter().enumerate() {
        match config.params[i] {
            Activity::Active => out.push((i, None)),
            Activity::Dup | Activity::DupNoNeed => {
                out.extend((0..a.slice_len().unwrap_or(0)).map(|e| (i, Some(e))))
            }
            Activity::Const => {}
        }
    }
    out
}

fn get(v: &Val, e: Option<usize>) -> f64 {
    match (v, e) {
        (Val::F64(x), None) => *x,
        (Val::F64s(x), Some(i)) => x[i],
        (Val::F64s(x), None) if x.len() == 1 => x[0],
        other => panic!("no coordinate {other:?}"),
    }
}

/// A direction (width 1) with the given values at `coords`, zero elsewhere, shaped
/// like the arguments.
fn direction(
    args: &[Val],
    config: &RuleConfig,
    values: &[(usize, Option<usize>, f64)],
) -> Vec<Option<Val>> {
    let mut v: Vec<Option<Val>> = args
        .iter()
        .enumerate()
        .map(|(i, a)| match (config.params[i], a) {
            (Activity::Const, _) => None,
            (_, Val::F64(_)) => Some(Val::F64(0.0)),
            (_, Val::F64s(x)) => Some(Val::F64s(vec![0.0; x.len()])),
            (_, other) => panic!("f64 only: {other:?}"),
        })
        .collect();
    for &(i, e, x) in values {
        match (&mut v[i], e) {
            (Some(Val::F64(t)), None) => *t = x,
            (Some(Val::F64s(t)), Some(k)) => t[k] = x,
            _ => panic!("no coordinate"),
        }
    }
    v
}

/// The reverse-mode gradient at `args`, on the interpreter.
fn gradient(m: &Module, name: &str, config: &RuleConfig, args: &[Val]) -> Vec<Option<Val>> {
    let f = m.func_by_name(name).unwrap();
    let rule = build_rrule(m, f, config).unwrap();
    let mut it = Interpreter::new(&rule.module);
    value_and_gradient(&mut it, &rule, args, &Seeds::default())
        .unwrap_or_else(|e| panic!("@{name}: {e}"))
        .gradient
}

/// `args` moved by `t` along `v`.
fn moved(args: &[Val], v: &[Option<Val>], t: f64) -> Vec<Val> {
    args.iter()
        .zip(v)
        .map(|(a, d)| match (a, d) {
            (Val::F64(x), Some(Val::F64(d))) => Val::F64(x + t * d),
            (Val::F64s(x), Some(Val::F64s(d))) => {
                Val::F64s(x.iter().zip(d).map(|(p, q)| p + t * q).collect())
            }
            (a, _) => a.clone(),
        })
        .collect()
}

fn f64_only(m: &Module, name: &str) -> bool {
    let f = m.func_by_name(name).unwrap();
    let sig = m.sig(f);
    sig.params
        .iter()
        .chain(&sig.results)
        .all(|t| t.elem().map(|e| e.ty()).unwrap_or(*t) != Type::F32)
}

/// HVP against central differences of gradients, at one point along one random
/// direction. Returns whether the function had anything to check.
fn hvp_vs_differences(m: &Module, name: &str, rule: &HvpRule, args: &[Val], rng: &mut Rng) -> bool {
    let config = &rule.layout.config;
    let cs = coords(args, config);
    if cs.is_empty() {
        return false;
    }
    let dir: Vec<(usize, Option<usize>, f64)> = cs
        .iter()
        .map(|&(i, e)| (i, e, 2.0 * rng.unit() - 1.0))
        .collect();
    let v = direction(args, config, &dir);
    let mut it = Interpreter::new(&rule.module);
    let out = hvp_vals(&mut it, rule, args, &v).unwrap_or_else(|e| panic!("@{name}: {e}"));
    assert_eq!(it.tape().scalars, 0, "@{name}: tape left");
    // The gradient part is reverse mode's gradient.
    let g0 = gradient(m, name, config, args);
    assert_eq!(out.gradient, g0, "@{name}: the gradient");
    let h = 1e-5;
    let gp = gradient(m, name, config, &moved(args, &v, h));
    let gm = gradient(m, name, config, &moved(args, &v, -h));
    let mut worst = 0.0f64;
    let mut scale = 1e-8f64;
    for &(i, e) in &cs {
        let fd = (get(gp[i].as_ref().unwrap(), e) - get(gm[i].as_ref().unwrap(), e)) / (2.0 * h);
        let hv = get(out.hvp[i].as_ref().unwrap(), e);
        worst = worst.max((fd - hv).abs());
        scale = scale.max(fd.abs()).max(hv.abs());
    }
    assert!(
        worst <= 1e-6 * scale,
        "@{name} at {args:?}: H v differs from differences of gradients by {worst:e} (scale {scale:e}): {:?}",
        out.hvp
    );
    true
}

/// The Hessian from HVPs along the unit vectors is symmetric.
#[allow(clippy::needless_range_loop)]
fn symmetric(name: &str, rule: &HvpRule, args: &[Val]) {
    let config = &rule.layout.config;
    let cs = coords(args, config);
    let cs = &cs[..cs.len().min(6)];
    let mut cols = Vec::new();
    for &(i, e) in cs {
        let v = direction(args, config, &[(i, e, 1.0)]);
        let mut it = Interpreter::new(&rule.module);
        let out = hvp_vals(&mut it, rule, args, &v).unwrap();
        cols.push(
            cs.iter()
                .map(|&(k, f)| get(out.hvp[k].as_ref().unwrap(), f))
                .collect::<Vec<f64>>(),
        );
    }
    let scale = cols.iter().flatten().fold(1e-300f64, |a, b| a.max(b.abs()));
    for a in 0..cs.len() {
        for b in 0..a {
            let (x, y) = (cols[a][b], cols[b][a]);
            assert!(
                (x - y).abs() <= 1e-10 * scale,
                "@{name} at {args:?}: H[{a}][{b}] = {x:e}, H[{b}][{a}] = {y:e}"
            );
        }
    }
}

fn check_corpus(text: &str, cases: Vec<(&'static str, Vec<Vec<Val>>)>) -> (usize, Vec<String>) {
    let m = module(text);
    let mut rng = Rng(0x4e55);
    let mut checked = 0;
    let mut skipped = Vec::new();
    for (name, points) in cases {
        if m.func_by_name(name).is_none() || !f64_only(&m, name) {
            continue;
        }
        let f = m.func_by_name(name).unwrap();
        let config = RuleConfig::default_for(m.sig(f));
        let rule = match build_hvp(&m, f, &config, 1) {
            Ok(r) => r,
            Err(e) => {
                skipped.push(format!("@{name}: {e}"));
                continue;
            }
        };
        let mut any = false;
        for args in &points {
            any |= hvp_vs_differences(&m, name, &rule, args, &mut rng);
        }
        symmetric(name, &rule, &points[0]);
        checked += usize::from(any);
    }
    (checked, skipped)
}

#[test]
fn hvps_agree_with_differences_of_gradients_on_the_scalar_corpus() {
    let (checked, skipped) = check_corpus(SCALARS, inputs::scalar_inputs());
    assert!(
        checked >= 40 && skipped.is_empty(),
        "{checked} checked; skipped: {skipped:#?}"
    );
}

#[test]
fn hvps_agree_with_differences_of_gradients_on_the_memory_corpus() {
    let (checked, skipped) = check_corpus(MEMORY, inputs::memory_inputs());
    assert!(
        checked >= 25 && skipped.is_empty(),
        "{checked} checked; skipped: {skipped:#?}"
    );
}

/// Width N against N width-1 calls with the same directions, bit for bit.
#[test]
fn width_n_hvps_are_bit_identical_to_n_width_one_hvps() {
    let mut rng = Rng(99);
    let mut compared = 0;
    for (text, cases) in [
        (SCALARS, inputs::scalar_inputs()),
        (MEMORY, inputs::memory_inputs()),
    ] {
        let m = module(text);
        for (name, points) in cases {
            if m.func_by_name(name).is_none() || !f64_only(&m, name) {
                continue;
            }
            let f = m.func_by_name(name).unwrap();
            let config = RuleConfig::default_for(m.sig(f));
            let args = &points[0];
            let cs = coords(args, &config);
            if cs.is_empty() {
                continue;
            }
            let one = build_hvp(&m, f, &config, 1).unwrap();
            for width in [2usize, 4, 8, 13] {
                let wide = build_hvp(&m, f, &config, width as u32).unwrap();
                // Lane j's direction, and all lanes interleaved.
                let lanes: Vec<Vec<Option<Val>>> = (0..width)
                    .map(|_| {
                        let d: Vec<(usize, Option<usize>, f64)> = cs
                            .iter()
                            .map(|&(i, e)| (i, e, 2.0 * rng.unit() - 1.0))
                            .collect();
                        direction(args, &config, &d)
                    })
                    .collect();
                let v: Vec<Option<Val>> = (0..args.len())
                    .map(|i| match &lanes[0][i] {
                        None => None,
                        Some(Val::F64(_)) => Some(Val::F64s(
                            (0..width)
                                .map(|j| get(lanes[j][i].as_ref().unwrap(), None))
                                .collect(),
                        )),
                        Some(Val::F64s(x)) => Some(Val::F64s(
                            (0..x.len() * width)
                                .map(|k| {
                                    get(lanes[k % width][i].as_ref().unwrap(), Some(k / width))
                                })
                                .collect(),
                        )),
                        Some(other) => panic!("{other:?}"),
                    })
                    .collect();
                let mut it = Interpreter::new(&wide.module);
                let w = hvp_vals(&mut it, &wide, args, &v).unwrap();
                for (j, d) in lanes.iter().enumerate() {
                    let mut it = Interpreter::new(&one.module);
                    let s = hvp_vals(&mut it, &one, args, d).unwrap();
                    assert_eq!(s.gradient, w.gradient, "@{name}: gradients");
                    for &(i, e) in &cs {
                        let a = get(s.hvp[i].as_ref().unwrap(), e);
                        let b = match (w.hvp[i].as_ref().unwrap(), e) {
                            (Val::F64s(x), None) => x[j],
                            (Val::F64s(x), Some(k)) => x[k * width + j],
                            other => panic!("{other:?}"),
                        };
                        assert_eq!(a.to_bits(), b.to_bits(), "@{name} width {width} lane {j}");
                    }
                }
                compared += 1;
            }
        }
    }
    assert!(compared >= 300, "{compared}");
}

/// An `f32` function with a `const` `f32` parameter: the forward rule of the
/// forward pass pushes the zero tangent of the constant, which must be written
/// `const f32 0.0` (a literal `0.0` in a `push` reads as `f64`). Closed form:
/// f = x² y k, so ∇f = (2xyk, x²k) and H (1, 0) = (2yk, 2xk).
#[test]
fn an_f32_function_with_a_const_f32_parameter_has_hvps() {
    let m = module(
        "func @g(%x: f32, %y: f32, %k: f32) -> f32 {
        entry:
            %a = fmul %x, %k
            %b = fmul %a, %y
            %c = fmul %b, %x
            ret %c
        }",
    );
    let f = m.func_by_name("g").unwrap();
    let config = RuleConfig::default_for(m.sig(f)).with_params([
        Activity::Active,
        Activity::Active,
        Activity::Const,
    ]);
    let rule = build_hvp(&m, f, &config, 1).unwrap_or_else(|e| panic!("{e}"));
    let args = [Val::F32(1.5), Val::F32(2.0), Val::F32(3.0)];
    let v = [Some(Val::F32(1.0)), Some(Val::F32(0.0)), None];
    let out = hvp_vals(&mut Interpreter::new(&rule.module), &rule, &args, &v).unwrap();
    assert_eq!(
        out.gradient[..2],
        [Some(Val::F32(18.0)), Some(Val::F32(6.75))]
    );
    assert_eq!(out.hvp[..2], [Some(Val::F32(12.0)), Some(Val::F32(9.0))]);
}
