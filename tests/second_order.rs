//! Second order and dense matrices on the JIT: Hessian-vector products compiled
//! against the interpreter's (bit for bit, both corpora, widths 1 and 3), against
//! central differences of compiled gradients on the suite programs, dense
//! Hessians symmetric, and dense Jacobians (forward chunks) against reverse-mode
//! rows.

#[path = "../adjoint/tests/corpus/inputs.rs"]
mod inputs;
#[path = "../jit/tests/support/mod.rs"]
#[allow(unused_imports)]
mod support;

use gradlift::adjoint::{Activity, EvalError, RuleConfig, build_hvp, hvp_vals};
use gradlift::ir::interp::{ErrorKind, Interpreter, Limits, Val};
use gradlift::ir::{Module, parse, verify};
use gradlift::suite;
use gradlift::{CompiledGradient, CompiledHvp, CompiledJvp, Error, Hosts, Pipeline, Workspace};
use gradlift_trace::{Var, trace};

fn load(path: &str) -> Module {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let m = parse(&text).unwrap_or_else(|e| panic!("{path}: {e}"));
    verify(&m).unwrap_or_else(|e| panic!("{path}: {e}"));
    m
}

/// SplitMix64, uniform in [-1, 1).
struct Rng(u64);

impl Rng {
    fn unit(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
    }
}

/// Random directions at width `n` for the `active` and `dup` parameters.
fn directions(rng: &mut Rng, args: &[Val], config: &RuleConfig, n: usize) -> Vec<Option<Val>> {
    args.iter()
        .zip(&config.params)
        .map(|(a, &act)| {
            if act == Activity::Const {
                return None;
            }
            Some(match a {
                Val::F64(_) if n == 1 => Val::F64(rng.unit()),
                Val::F32(_) if n == 1 => Val::F32(rng.unit() as f32),
                Val::F64(_) => Val::F64s((0..n).map(|_| rng.unit()).collect()),
                Val::F32(_) => Val::F32s((0..n).map(|_| rng.unit() as f32).collect()),
                Val::F64s(x) => Val::F64s((0..x.len() * n).map(|_| rng.unit()).collect()),
                Val::F32s(x) => Val::F32s((0..x.len() * n).map(|_| rng.unit() as f32).collect()),
                other => panic!("{other:?}"),
            })
        })
        .collect()
}

const LIMITS: Limits = Limits {
    max_depth: 10_000,
    fuel: Some(5_000_000),
};

#[test]
fn compiled_hvps_equal_the_interpreters_on_both_corpora() {
    let (compared, errors) = support::big_stack(|| {
        let mut rng = Rng(5);
        let (mut compared, mut errors) = (0, 0);
        for (file, table) in [
            ("scalars.ir", inputs::scalar_inputs()),
            ("memory.ir", inputs::memory_inputs()),
        ] {
            let m = load(&format!(
                "{}/adjoint/tests/corpus/{file}",
                env!("CARGO_MANIFEST_DIR")
            ));
            // Each function's curated points and generic ones (errors included),
            // with one rule compiled per width.
            let mut points_of: Vec<(String, Vec<Vec<Val>>)> = Vec::new();
            for (id, _) in m.defined() {
                let name = m.name(id).to_string();
                let mut points: Vec<Vec<Val>> = table
                    .iter()
                    .filter(|(n, _)| *n == name)
                    .flat_map(|(_, p)| p.clone())
                    .collect();
                points.extend(support::generic_points(m.sig(id), 4));
                points_of.push((name, points));
            }
            for (name, points) in &points_of {
                let f = m.func_by_name(name).unwrap();
                let config = RuleConfig::default_for(m.sig(f));
                for width in [1u32, 3] {
                    let Ok(rule) = build_hvp(&m, f, &config, width) else {
                        continue;
                    };
                    let compiled = Pipeline::new()
                        .with_opt(gradlift::ir::opt::OptConfig::none())
                        .compile_hvp(&m, name, Some(&config), width)
                        .unwrap_or_else(|e| panic!("@{name}: {e}"));
                    let mut ws = Workspace::new();
                    for args in points {
                        let v = directions(&mut rng, args, &config, width as usize);
                        let mut it = Interpreter::new(&rule.module).with_limits(LIMITS);
                        let want = hvp_vals(&mut it, &rule, args, &v);
                        if let Err(EvalError::Run { error, .. }) = &want
                            && matches!(error.kind, ErrorKind::OutOfFuel(_))
                        {
                            continue;
                        }
                        let got = compiled.hvp(&mut ws, args, &v);
                        let at = support::show(args);
                        match (want, got) {
                            (Ok(w), Ok(g)) => {
                                let same = |a: &[Option<Val>], b: &[Option<Val>]| {
                                    a.len() == b.len()
                                        && a.iter().zip(b).all(|(x, y)| match (x, y) {
                                            (Some(x), Some(y)) => support::same(x, y),
                                            (x, y) => x == y,
                                        })
                                };
                                assert!(
                                    same(&w.gradient, &g.gradient),
                                    "@{name} at {at}: gradients"
                                );
                                assert!(
                                    same(&w.hvp, &g.hvp),
                                    "@{name} width {width} at {at}: {:?} vs {:?}",
                                    w.hvp,
                                    g.hvp
                                );
                                compared += 1;
                            }
                            (Err(EvalError::Run { error: ie, .. }), Err(Error::Run(je))) => {
                                assert_eq!(
                                    core::mem::discriminant(&je.kind),
                                    core::mem::discriminant(&ie.kind),
                                    "@{name} at {at}: `{ie}` vs `{je}`"
                                );
                                errors += 1;
                            }
                            (w, g) => panic!("@{name} at {at}: interpreter {w:?}, JIT {g:?}"),
                        }
                    }
                }
            }
        }
        (compared, errors)
    });
    eprintln!("{compared} HVPs compared, {errors} errors alike");
    assert!(compared >= 400 && errors >= 5, "{compared} {errors}");
}

/// The suite programs, traced at small sizes, differentiated twice and compiled.
fn suite_cases() -> Vec<(&'static str, Module, Vec<Val>, RuleConfig)> {
    let n = 12;
    let mut out = Vec::new();
    let mut add = |name: &'static str, m: Module, args: Vec<Val>, consts: &[usize]| {
        let f = m.func_by_name(name).unwrap();
        let mut c = RuleConfig::default_for(m.sig(f));
        for &k in consts {
            c.params[k] = Activity::Const;
        }
        out.push((name, m, args, c));
    };
    add(
        "sumsq",
        trace("sumsq", suite::sumsq::<Var>).unwrap().module,
        vec![Val::F64s(suite::sumsq_input(n))],
        &[],
    );
    add(
        "rosenbrock",
        trace("rosenbrock", suite::rosenbrock::<Var>)
            .unwrap()
            .module,
        vec![Val::F64s(suite::rosenbrock_input(n))],
        &[],
    );
    add(
        "logsumexp",
        trace("logsumexp", suite::logsumexp::<Var>).unwrap().module,
        vec![Val::F64s(suite::logsumexp_input(n))],
        &[],
    );
    add(
        "branchy",
        trace("branchy", suite::branchy::<Var>).unwrap().module,
        vec![Val::F64s(suite::branchy_input(n))],
        &[],
    );
    let (x, w) = suite::normalize_input(n);
    add(
        "normalize",
        trace("normalize", suite::normalize::<Var>).unwrap().module,
        vec![Val::F64s(x), Val::F64s(w)],
        &[1],
    );
    out
}

#[test]
fn hvps_of_the_suite_programs_agree_with_differences_of_gradients_and_hessians_are_symmetric() {
    let mut rng = Rng(17);
    for (name, m, args, config) in suite_cases() {
        let h = CompiledHvp::with_config(&m, name, &config, 1, &Hosts::new())
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let g = CompiledGradient::with_config(&m, name, &config, &Hosts::new()).unwrap();
        let mut ws = Workspace::new();
        let v = directions(&mut rng, &args, &config, 1);
        let out = h.hvp(&mut ws, &args, &v).unwrap();
        let Some(Val::F64s(dir)) = &v[0] else {
            panic!()
        };
        let Some(Val::F64s(hv)) = &out.hvp[0] else {
            panic!()
        };
        let step = 1e-5;
        let at = |t: f64| {
            let mut a = args.clone();
            if let Val::F64s(x) = &mut a[0] {
                for (xi, di) in x.iter_mut().zip(dir) {
                    *xi += t * di;
                }
            }
            let Some(Val::F64s(gx)) = g
                .value_and_gradient(&mut Workspace::new(), &a)
                .unwrap()
                .gradient[0]
                .clone()
            else {
                panic!()
            };
            gx
        };
        let (gp, gm) = (at(step), at(-step));
        let scale = hv.iter().fold(1e-12f64, |a, b| a.max(b.abs()));
        for k in 0..hv.len() {
            let fd = (gp[k] - gm[k]) / (2.0 * step);
            assert!(
                (fd - hv[k]).abs() <= 1e-6 * scale,
                "{name}: (H v)[{k}] = {} but differences give {fd}",
                hv[k]
            );
        }
        let hess = h.hessian(&mut ws, &args).unwrap();
        for r in 0..hess.rows {
            for c in 0..r {
                let (a, b) = (hess.get(r, c), hess.get(c, r));
                assert!(
                    (a - b).abs() <= 1e-10 * scale.max(1.0),
                    "{name}: H[{r}][{c}] = {a}, H[{c}][{r}] = {b}"
                );
            }
        }
        // Column k of the Hessian is H e_k: the HVP along v is H v.
        let hv2: Vec<f64> = (0..hess.rows)
            .map(|r| (0..hess.cols).map(|c| hess.get(r, c) * dir[c]).sum())
            .collect();
        for k in 0..hv.len() {
            assert!(
                (hv2[k] - hv[k]).abs() <= 1e-10 * scale,
                "{name}: H v from the Hessian"
            );
        }
    }
}

#[test]
fn width_four_hessians_equal_width_one_hessians() {
    for (name, m, args, config) in suite_cases() {
        let one = CompiledHvp::with_config(&m, name, &config, 1, &Hosts::new()).unwrap();
        let four = CompiledHvp::with_config(&m, name, &config, 4, &Hosts::new()).unwrap();
        let mut ws = Workspace::new();
        let a = one.hessian(&mut ws, &args).unwrap();
        let b = four.hessian(&mut ws, &args).unwrap();
        let bits = |m: &gradlift::Matrix| m.data.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&a), bits(&b), "{name}");
    }
}

#[test]
fn forward_jacobians_equal_reverse_rows() {
    let m = parse(
        "func @f(%x: [f64], %y: mut [f64], %s: f64) -> (f64, f64) {
        entry:
            %n = len %x
            jump head
        head:
            %i = phi i64 [entry: 0, body: %i1]
            %acc = phi f64 [entry: 0.0, body: %acc1]
            %more = icmp lt %i, %n
            br %more, body, exit
        body:
            %v = load %x[%i]
            %e = exp %v
            %w = fmul %e, %s
            store %y[%i], %w
            %acc1 = fadd %acc, %w
            %i1 = iadd %i, 1
            jump head
        exit:
            %p = fmul %acc, %s
            ret %acc, %p
        }",
    )
    .unwrap();
    let args = vec![
        Val::F64s(vec![0.1, -0.4, 0.7]),
        Val::F64s(vec![0.0; 3]),
        Val::F64(1.3),
    ];
    for width in [1u32, 2, 4] {
        let f = m.func_by_name("f").unwrap();
        let config = gradlift::adjoint::FruleConfig::default_for(m.sig(f)).with_width(width);
        let jvp = CompiledJvp::with_config(&m, "f", &config, &Hosts::new()).unwrap();
        let j = jvp.jacobian(&mut Workspace::new(), &args).unwrap();
        // Inputs: x (3), y (3, overwritten: zero columns), s; outputs: 2 results, y (3).
        assert_eq!((j.rows, j.cols), (5, 7), "width {width}");
        let grad = CompiledGradient::new(&m, "f").unwrap();
        for r in 0..j.rows {
            // Row r by reverse mode: seed e_r on the outputs.
            let mut seeds = vec![0.0, 0.0];
            let mut shadow_y = vec![0.0; 3];
            match j.row_coords[r] {
                (k, None) => seeds[k] = 1.0,
                (_, Some(e)) => shadow_y[e] = 1.0,
            }
            let s = gradlift::Seeds::results(seeds).with_shadows([
                None,
                Some(Val::F64s(shadow_y)),
                None,
            ]);
            let g = grad
                .value_and_pullback(&mut Workspace::new(), &args, &s)
                .unwrap();
            let mut row = Vec::new();
            if let Some(Val::F64s(gx)) = &g.gradient[0] {
                row.extend(gx);
            }
            if let Some(Val::F64s(gy)) = &g.gradient[1] {
                row.extend(gy);
            }
            if let Some(Val::F64(gs)) = &g.gradient[2] {
                row.push(*gs);
            }
            for (c, want) in row.iter().enumerate() {
                let got = j.get(r, c);
                assert!(
                    (got - want).abs() <= 1e-12 * want.abs().max(1.0),
                    "width {width} J[{r}][{c}] = {got}, reverse gives {want}"
                );
            }
        }
    }
}

/// mlp (2,762 weights, batch 2) and ode (200 steps): H v against central
/// differences of compiled gradients over every differentiated parameter, and
/// symmetry on pairs of unit HVPs (a dense Hessian of mlp would be 2,762 HVPs).
#[test]
fn hvps_of_mlp_and_ode_agree_with_differences_of_gradients_and_are_symmetric() {
    let mi = suite::mlp_input(2);
    let cases: Vec<(&str, Module, Vec<Val>, Vec<usize>)> = vec![
        (
            "mlp",
            trace("mlp", suite::mlp::<Var>).unwrap().module,
            vec![
                Val::F64s(mi.x),
                Val::F64s(mi.w1),
                Val::F64s(mi.b1),
                Val::F64s(mi.w2),
                Val::F64s(mi.b2),
            ],
            vec![0],
        ),
        (
            "ode",
            trace("ode", suite::ode::<Var>).unwrap().module,
            vec![Val::F64s(suite::ode_input()), Val::I64(200)],
            vec![1],
        ),
    ];
    let mut rng = Rng(23);
    for (name, m, args, consts) in cases {
        let f = m.func_by_name(name).unwrap();
        let mut config = RuleConfig::default_for(m.sig(f));
        for &k in &consts {
            config.params[k] = Activity::Const;
        }
        let h = CompiledHvp::with_config(&m, name, &config, 1, &Hosts::new()).unwrap();
        let g = CompiledGradient::with_config(&m, name, &config, &Hosts::new()).unwrap();
        let mut ws = Workspace::new();
        let v = directions(&mut rng, &args, &config, 1);
        let out = h.hvp(&mut ws, &args, &v).unwrap();
        let moved = |t: f64| -> Vec<Val> {
            args.iter()
                .zip(&v)
                .map(|(a, d)| match (a, d) {
                    (Val::F64s(x), Some(Val::F64s(d))) => {
                        Val::F64s(x.iter().zip(d).map(|(p, q)| p + t * q).collect())
                    }
                    (a, _) => a.clone(),
                })
                .collect()
        };
        let step = 1e-5;
        let gp = g
            .value_and_gradient(&mut ws, &moved(step))
            .unwrap()
            .gradient;
        let gm = g
            .value_and_gradient(&mut ws, &moved(-step))
            .unwrap()
            .gradient;
        let mut pairs = Vec::new();
        let mut scale = 1e-12f64;
        for i in 0..args.len() {
            if let (Some(Val::F64s(hv)), Some(Val::F64s(p)), Some(Val::F64s(q))) =
                (&out.hvp[i], &gp[i], &gm[i])
            {
                for k in 0..hv.len() {
                    pairs.push((hv[k], (p[k] - q[k]) / (2.0 * step)));
                    scale = scale.max(hv[k].abs());
                }
            }
        }
        assert!(pairs.len() > 5, "{name}");
        for (k, (hv, fd)) in pairs.iter().enumerate() {
            assert!(
                (hv - fd).abs() <= 1e-6 * scale,
                "{name}: (H v)[{k}] = {hv} but differences give {fd}"
            );
        }
        // Symmetry: (H e_a)_b = (H e_b)_a for a few pairs of coordinates.
        let coords: Vec<(usize, usize)> = (0..args.len())
            .filter(|&i| config.params[i] != Activity::Const)
            .flat_map(|i| (0..args[i].slice_len().unwrap_or(0)).map(move |e| (i, e)))
            .collect();
        let unit = |(i, e): (usize, usize)| -> Vec<Option<Val>> {
            args.iter()
                .enumerate()
                .map(|(k, a)| {
                    (config.params[k] != Activity::Const).then(|| {
                        let mut z = vec![0.0; a.slice_len().unwrap_or(0)];
                        if k == i {
                            z[e] = 1.0;
                        }
                        Val::F64s(z)
                    })
                })
                .collect()
        };
        for t in 0..6 {
            let a = coords[(t * 7919) % coords.len()];
            let b = coords[(t * 104_729 + 13) % coords.len()];
            let ha = h.hvp(&mut ws, &args, &unit(a)).unwrap();
            let hb = h.hvp(&mut ws, &args, &unit(b)).unwrap();
            let get = |o: &gradlift::Hvp, (i, e): (usize, usize)| match &o.hvp[i] {
                Some(Val::F64s(x)) => x[e],
                other => panic!("{other:?}"),
            };
            let (x, y) = (get(&ha, b), get(&hb, a));
            assert!(
                (x - y).abs() <= 1e-10 * x.abs().max(y.abs()).max(1e-300),
                "{name}: H[{a:?}][{b:?}] = {x}, H[{b:?}][{a:?}] = {y}"
            );
        }
    }
}

/// Jacobians by forward and by reverse sweeps agree (on a function with a `mut`
/// slice and two results, and on the memory corpus's functions that write
/// slices), and the choice follows the shape.
#[test]
fn jacobians_by_forward_and_reverse_sweeps_agree_and_the_cheaper_is_chosen() {
    let m = load(&format!(
        "{}/adjoint/tests/corpus/memory.ir",
        env!("CARGO_MANIFEST_DIR")
    ));
    let table = inputs::memory_inputs();
    let mut compared = 0;
    for (name, points) in &table {
        let Ok(j) = Pipeline::new()
            .with_opt(gradlift::ir::opt::OptConfig::none())
            .compile_jacobian(&m, name, None, 2)
        else {
            continue;
        };
        let args = &points[0];
        let mut ws = Workspace::new();
        let (Ok(f), Ok(r)) = (j.forward(&mut ws, args), j.reverse(&mut ws, args)) else {
            continue;
        };
        assert_eq!((f.rows, f.cols), (r.rows, r.cols), "@{name}");
        assert_eq!(f.row_coords, r.row_coords, "@{name}");
        assert_eq!((f.rows, f.cols), j.shape(args), "@{name}");
        for k in 0..f.data.len() {
            let (a, b) = (f.data[k], r.data[k]);
            assert!(
                (a - b).abs() <= 1e-12 * a.abs().max(b.abs()).max(1.0)
                    || (a.is_nan() && b.is_nan()),
                "@{name} entry {k}: forward {a}, reverse {b}"
            );
        }
        compared += 1;
    }
    assert!(compared >= 25, "{compared}");
    // One result, many inputs: reverse; many results (a written slice), few
    // inputs: forward.
    let sum = parse(
        "func @f(%x: [f64]) -> f64 {
        entry:
            %a = load %x[0]
            %b = load %x[1]
            %c = load %x[2]
            %ab = fmul %a, %b
            %r = fmul %ab, %c
            ret %r
        }
        func @g(%s: f64, %y: mut [f64]) {
        entry:
            %a = load %y[0]
            %b = fmul %a, %s
            store %y[1], %b
            store %y[2], %s
            ret
        }",
    )
    .unwrap();
    let j = Pipeline::new()
        .compile_jacobian(&sum, "f", None, 1)
        .unwrap();
    assert!(!j.uses_forward(&[Val::F64s(vec![1.0, 2.0, 3.0])]));
    let j = Pipeline::new()
        .compile_jacobian(&sum, "g", None, 4)
        .unwrap();
    let args = [Val::F64(2.0), Val::F64s(vec![5.0, 0.0, 0.0])];
    assert!(j.uses_forward(&args));
    let m = j.jacobian(&mut Workspace::new(), &args).unwrap();
    // Columns s, y0, y1, y2; rows y0, y1, y2 (final): y0 = y0, y1 = y0 s, y2 = s.
    assert_eq!(
        m.data,
        [0.0, 1.0, 0.0, 0.0, 5.0, 2.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0]
    );
}
