//! The prepared second-order and Jacobian forms and the `autodiff` second-order
//! API, each against an independent oracle: `CompiledHvp::hvp_args` bit for bit
//! against `CompiledHvp::hvp`; Hessians (`hessian_into`, `Autodiff::hessian`)
//! and HVPs (`Autodiff::hvp`) against central differences of gradients and
//! against Hessians written by hand; Jacobians (`jacobian_into`,
//! `Autodiff::jacobian`) against central differences of the function; and the
//! prepared forms allocate nothing once warm (a counting global allocator).

use gradlift::adjoint::{Activity, RuleConfig};
use gradlift::ir::interp::Val;
use gradlift::ir::{Module, parse};
use gradlift::jit::Arg;
use gradlift::trace::prelude::*;
use gradlift::{
    Active, CompiledGradient, CompiledHvp, CompiledJvp, Const, Duplicated, Error, Pipeline,
    Workspace, autodiff, suite,
};

#[path = "common/counting_alloc.rs"]
mod counting_alloc;
use counting_alloc::{Counting, allocations};

#[global_allocator]
static GLOBAL: Counting = Counting;

fn rosenbrock_ir() -> Module {
    let path = format!("{}/examples/ir/rosenbrock.ir", env!("CARGO_MANIFEST_DIR"));
    parse(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

/// `x_i <- k x_i²` in place, returning the sum; a float scalar and a `mut` slice.
const SCALE_SQ: &str = "
func @scale_sq(%x: mut [f64], %k: f64) -> f64 {
entry:
    %n = len %x
    jump head
head:
    %i = phi i64 [entry: 0, body: %i1]
    %acc = phi f64 [entry: 0.0, body: %acc1]
    %more = icmp lt %i, %n
    br %more, body, exit
body:
    %xi = load %x[%i]
    %y = fmul %xi, %k
    %y2 = fmul %y, %xi
    %s = sin %y2
    store %x[%i], %s
    %acc1 = fadd %acc, %y2
    %i1 = iadd %i, 1
    jump head
exit:
    ret %acc
}

func @cubic32(%x: f32, %y: f32, %c: f32) -> f32 {
entry:
    %xx = fmul %x, %x
    %xxy = fmul %xx, %y
    %yc = fmul %y, %c
    %s = sin %yc
    %r = fadd %xxy, %s
    ret %r
}
";

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

/// The bits of a float scalar or slice (`f32`s widened exactly).
fn bits(v: &Val) -> Vec<u64> {
    match v {
        Val::F64(x) => vec![x.to_bits()],
        Val::F32(x) => vec![u64::from(x.to_bits())],
        Val::F64s(x) => x.iter().map(|x| x.to_bits()).collect(),
        Val::F32s(x) => x.iter().map(|x| u64::from(x.to_bits())).collect(),
        other => panic!("{other:?}"),
    }
}

/// A random direction at width `n` for a parameter like `a`.
fn direction(rng: &mut Rng, a: &Val, n: usize) -> Val {
    match a {
        Val::F64(_) if n == 1 => Val::F64(rng.unit()),
        Val::F32(_) if n == 1 => Val::F32(rng.unit() as f32),
        Val::F64(_) => Val::F64s((0..n).map(|_| rng.unit()).collect()),
        Val::F32(_) => Val::F32s((0..n).map(|_| rng.unit() as f32).collect()),
        Val::F64s(x) => Val::F64s((0..x.len() * n).map(|_| rng.unit()).collect()),
        other => panic!("{other:?}"),
    }
}

/// An output buffer like the gradient (`lanes` 1) or H v of a parameter like `a`.
fn out_buf(a: &Val, lanes: usize) -> Val {
    let len = a.slice_len().unwrap_or(1) * lanes;
    match a {
        Val::F32(_) | Val::F32s(_) => Val::F32s(vec![f32::NAN; len]),
        _ => Val::F64s(vec![f64::NAN; len]),
    }
}

#[test]
fn hvp_args_is_bit_identical_to_hvp() {
    let m = parse(SCALE_SQ).unwrap();
    let rosen = rosenbrock_ir();
    let mut rng = Rng(11);
    let cases: Vec<(&Module, &str, Vec<Val>, Vec<Activity>)> = vec![
        (
            &rosen,
            "rosenbrock",
            vec![Val::F64s(vec![0.5, -1.0, 2.0, 0.3])],
            vec![Activity::Dup],
        ),
        (
            &m,
            "scale_sq",
            vec![Val::F64s(vec![0.5, -0.7, 1.5]), Val::F64(1.3)],
            vec![Activity::Dup, Activity::Active],
        ),
        (
            &m,
            "scale_sq",
            vec![Val::F64s(vec![0.5, -0.7, 1.5]), Val::F64(1.3)],
            vec![Activity::Dup, Activity::Const],
        ),
        (
            &m,
            "cubic32",
            vec![Val::F32(1.5), Val::F32(-0.25), Val::F32(2.0)],
            vec![Activity::Active, Activity::Active, Activity::Active],
        ),
    ];
    let mut compared = 0;
    for (module, name, args, params) in &cases {
        let f = module.func_by_name(name).unwrap();
        let config = RuleConfig::default_for(module.sig(f)).with_params(params.clone());
        for width in [1, 3] {
            let h = Pipeline::new()
                .compile_hvp(module, name, Some(&config), width)
                .unwrap();
            let n = width as usize;
            let mut ws = Workspace::new();
            for _ in 0..3 {
                let v: Vec<Option<Val>> = args
                    .iter()
                    .zip(params)
                    .map(|(a, &p)| (p != Activity::Const).then(|| direction(&mut rng, a, n)))
                    .collect();
                let want = h.hvp(&mut ws, args, &v).unwrap();

                let mut a = args.clone();
                let mut d: Vec<Val> = v.iter().flatten().cloned().collect();
                let diff: Vec<usize> = (0..args.len()).filter(|&i| v[i].is_some()).collect();
                let mut g: Vec<Val> = diff.iter().map(|&i| out_buf(&args[i], 1)).collect();
                let mut hv: Vec<Val> = diff.iter().map(|&i| out_buf(&args[i], n)).collect();
                let mut value = Vec::new();
                {
                    let mut av: Vec<Arg<'_>> = a.iter_mut().map(Val::as_arg).collect();
                    let mut dv: Vec<Arg<'_>> = d.iter_mut().map(Val::as_arg).collect();
                    let mut gv: Vec<Arg<'_>> = g.iter_mut().map(Val::as_arg).collect();
                    let mut hvv: Vec<Arg<'_>> = hv.iter_mut().map(Val::as_arg).collect();
                    h.hvp_args(&mut ws, &mut av, &mut dv, &mut value, &mut gv, &mut hvv)
                        .unwrap();
                }
                assert_eq!(Some(value), want.value, "@{name} w{width}");
                for (k, &i) in diff.iter().enumerate() {
                    let (wg, wh) = (
                        want.gradient[i].as_ref().unwrap(),
                        want.hvp[i].as_ref().unwrap(),
                    );
                    assert_eq!(bits(&g[k]), bits(wg), "@{name} w{width} gradient {i}");
                    assert_eq!(bits(&hv[k]), bits(wh), "@{name} w{width} H v {i}");
                    compared += 1;
                }
            }
        }
    }
    assert_eq!(compared, 2 * 3 * (1 + 2 + 1 + 3));
}

#[test]
fn hvp_args_and_hessian_into_check_their_buffers() {
    let rosen = rosenbrock_ir();
    let h = CompiledHvp::new(&rosen, "rosenbrock").unwrap();
    let mut ws = Workspace::new();
    let x = [0.5, 1.0, 2.0];
    let (mut g, mut hv) = ([0.0; 3], [0.0; 2]);
    let e = h
        .hvp_args(
            &mut ws,
            &mut [Arg::F64s(&x)],
            &mut [Arg::F64s(&[1.0, 0.0, 0.0])],
            &mut Vec::new(),
            &mut [Arg::F64sMut(&mut g)],
            &mut [Arg::F64sMut(&mut hv)],
        )
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        Error::BadArguments(
            "the H v buffer of parameter 1 of @rosenbrock must be a mut [f64] of length 3, given a mut [f64] of length 2".into()
        )
        .to_string()
    );
    let e = h
        .hvp_args(
            &mut ws,
            &mut [Arg::F64s(&x)],
            &mut [Arg::F64s(&[1.0, 0.0])],
            &mut Vec::new(),
            &mut [Arg::F64sMut(&mut g)],
            &mut [Arg::F64sMut(&mut [0.0; 3])],
        )
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("the direction of parameter 1 of @rosenbrock must be a [f64] of length 3, given a [f64] of length 2"),
        "{e}"
    );
    let e = h
        .hessian_into(&mut ws, &[Val::F64s(x.to_vec())], &mut [0.0; 8])
        .unwrap_err();
    assert!(e.to_string().contains("3 x 3"), "{e}");
    // The workspace serves on after the errors.
    let mut out = [0.0; 9];
    h.hessian_into(&mut ws, &[Val::F64s(x.to_vec())], &mut out)
        .unwrap();
    assert_eq!(
        out.to_vec(),
        h.hessian(&mut ws, &[Val::F64s(x.to_vec())]).unwrap().data
    );
}

/// Rosenbrock's Hessian, by hand: `f = Σ_{i<n-1} 100 (x_{i+1} - x_i²)² + (1 - x_i)²`.
fn rosenbrock_hessian(x: &[f64]) -> Vec<f64> {
    let n = x.len();
    let mut h = vec![0.0; n * n];
    for i in 0..n - 1 {
        h[i * n + i] += 1200.0 * x[i] * x[i] - 400.0 * x[i + 1] + 2.0;
        h[(i + 1) * n + i + 1] += 200.0;
        h[i * n + i + 1] += -400.0 * x[i];
        h[(i + 1) * n + i] += -400.0 * x[i];
    }
    h
}

fn close(a: f64, b: f64, rel: f64) -> bool {
    (a - b).abs() <= rel * a.abs().max(b.abs()).max(1.0)
}

fn assert_all_close(got: &[f64], want: &[f64], rel: f64, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}");
    for (k, (&a, &b)) in got.iter().zip(want).enumerate() {
        assert!(close(a, b, rel), "{what} [{k}]: {a} vs {b}");
    }
}

#[test]
fn rosenbrock_hessians_equal_the_closed_form() {
    let x = suite::rosenbrock_input(6);
    let want = rosenbrock_hessian(&x);
    let rosen = rosenbrock_ir();
    for width in [1, 4] {
        let h = Pipeline::new()
            .compile_hvp(&rosen, "rosenbrock", None, width)
            .unwrap();
        let mut out = vec![f64::NAN; 36];
        h.hessian_into(&mut Workspace::new(), &[Val::F64s(x.clone())], &mut out)
            .unwrap();
        assert_all_close(&out, &want, 1e-12, &format!("rosenbrock w{width}"));
    }
    let mut f = autodiff("rosenbrock", suite::rosenbrock::<Var>).unwrap();
    let mut dx = vec![0.0; 6];
    let m = f.hessian((Duplicated(&x[..], &mut dx[..]),)).unwrap();
    assert_eq!((m.rows, m.cols), (6, 6));
    assert_eq!(dx, [0.0; 6], "the shadow stays as it is");
    assert_all_close(&m.data, &want, 1e-12, "autodiff rosenbrock");
    // An HVP is the Hessian times the direction; the gradient goes into the shadow.
    let v: Vec<f64> = (0..6).map(|i| 0.3 * i as f64 - 0.7).collect();
    let mut hv = vec![0.0; 6];
    let (value, ((),)) = f
        .hvp((Duplicated(&x[..], &mut dx[..]),), &v, &mut hv)
        .unwrap();
    let (value_g, ((),)) = {
        let mut g = vec![0.0; 6];
        let r = f.gradient((Duplicated(&x[..], &mut g[..]),)).unwrap();
        assert_eq!(
            dx, g,
            "hvp adds the gradient into the shadow as gradient does"
        );
        r
    };
    assert_eq!(value, value_g);
    for i in 0..6 {
        let hv_i: f64 = (0..6).map(|j| want[i * 6 + j] * v[j]).sum();
        assert!(close(hv[i], hv_i, 1e-12), "H v [{i}]: {} vs {hv_i}", hv[i]);
    }
}

#[test]
fn scalar_hvps_equal_the_closed_form() {
    // f = x² y + x sin y: gradient (2xy + sin y, x² + x cos y),
    // H = [[2y, 2x + cos y], [2x + cos y, -x sin y]].
    let mut f = autodiff("f", |x: Var, y: Var| x * x * y + x * y.sin()).unwrap();
    let (x, y) = (1.25_f64, -0.5_f64);
    let h = [
        [2.0 * y, 2.0 * x + y.cos()],
        [2.0 * x + y.cos(), -x * y.sin()],
    ];
    for v in [[1.0, 0.0], [0.0, 1.0], [0.5, -2.0]] {
        let mut hv = [0.0; 2];
        let (value, (gx, gy)) = f.hvp((Active(x), Active(y)), &v, &mut hv).unwrap();
        assert!(close(value, x * x * y + x * y.sin(), 1e-15));
        assert!(close(gx, 2.0 * x * y + y.sin(), 1e-14));
        assert!(close(gy, x * x + x * y.cos(), 1e-14));
        for i in 0..2 {
            let want = h[i][0] * v[0] + h[i][1] * v[1];
            assert!(
                close(hv[i], want, 1e-14),
                "{v:?} [{i}]: {} vs {want}",
                hv[i]
            );
        }
    }
    // y constant: the one coordinate x.
    let mut hv = [0.0];
    let (_, (gx, ())) = f.hvp((Active(x), Const(y)), &[2.0], &mut hv).unwrap();
    assert!(close(gx, 2.0 * x * y + y.sin(), 1e-14));
    assert!(close(hv[0], 2.0 * h[0][0], 1e-14));
    let m = f.hessian((Active(x), Active(y))).unwrap();
    for (k, want) in h.iter().flatten().enumerate() {
        assert!(close(m.data[k], *want, 1e-14), "[{k}]");
    }
    assert_eq!(f.hvp_patterns(), ["AA_A", "AC_A"]);
    // A direction of the wrong length.
    let e = f
        .hvp((Active(x), Active(y)), &[1.0], &mut [0.0; 2])
        .unwrap_err();
    assert!(e.to_string().contains("2 coordinates"), "{e}");
}

/// Central differences of `grad` (a gradient of `n` coordinates) at `x` along each
/// unit vector: row `j` is `(g(x + h e_j) - g(x - h e_j)) / 2h`.
fn fd_hessian(x: &[f64], grad: &mut dyn FnMut(&[f64]) -> Vec<f64>) -> Vec<f64> {
    let n = x.len();
    let mut out = vec![0.0; n * n];
    for j in 0..n {
        let h = 1e-5 * x[j].abs().max(1.0);
        let (mut xp, mut xm) = (x.to_vec(), x.to_vec());
        xp[j] += h;
        xm[j] -= h;
        let (gp, gm) = (grad(&xp), grad(&xm));
        for i in 0..n {
            out[j * n + i] = (gp[i] - gm[i]) / (2.0 * h);
        }
    }
    out
}

#[test]
fn hessians_equal_central_differences_of_gradients() {
    // logsumexp and normalize of the suite, on the JIT (hessian_into) and through
    // autodiff (two slices, both Duplicated), against compiled gradients.
    let x: Vec<f64> = (0..5).map(|i| 0.4 * (i as f64 * 0.9 + 0.3).sin()).collect();
    let mut lse = autodiff("logsumexp", suite::logsumexp::<Var>).unwrap();
    let mut dx = [0.0; 5];
    let m = lse.hessian((Duplicated(&x[..], &mut dx[..]),)).unwrap();
    let want = fd_hessian(&x, &mut |x| {
        let mut g = vec![0.0; x.len()];
        lse.gradient((Duplicated(x, &mut g[..]),)).unwrap();
        g
    });
    assert_all_close(&m.data, &want, 1e-6, "logsumexp");

    let w: Vec<f64> = (0..3).map(|i| 1.0 + 0.2 * i as f64).collect();
    let xs: Vec<f64> = (0..3).map(|i| 0.7 - 0.45 * i as f64).collect();
    let mut norm = autodiff("normalize", suite::normalize::<Var>).unwrap();
    let (mut dxs, mut dw) = (vec![0.0; 3], vec![0.0; 3]);
    let m = norm
        .hessian((
            Duplicated(&xs[..], &mut dxs[..]),
            Duplicated(&w[..], &mut dw[..]),
        ))
        .unwrap();
    assert_eq!((m.rows, m.cols), (6, 6));
    let both: Vec<f64> = xs.iter().chain(&w).copied().collect();
    let want = fd_hessian(&both, &mut |z| {
        let (mut gx, mut gw) = (vec![0.0; 3], vec![0.0; 3]);
        norm.gradient((
            Duplicated(&z[..3], &mut gx[..]),
            Duplicated(&z[3..], &mut gw[..]),
        ))
        .unwrap();
        gx.extend(gw);
        gx
    });
    assert_all_close(&m.data, &want, 1e-6, "normalize");
    // The Hessian of `w` alone, x constant: the lower right block.
    let mw = norm
        .hessian((Const(&xs[..]), Duplicated(&w[..], &mut dw[..])))
        .unwrap();
    for r in 0..3 {
        for c in 0..3 {
            assert!(close(mw.get(r, c), m.get(3 + r, 3 + c), 1e-12));
        }
    }

    // The JIT form on the IR: rosenbrock at width 3, with a compiled gradient.
    let rosen = rosenbrock_ir();
    let h = Pipeline::new()
        .compile_hvp(&rosen, "rosenbrock", None, 3)
        .unwrap();
    let grad = CompiledGradient::new(&rosen, "rosenbrock").unwrap();
    let x = suite::rosenbrock_input(5);
    let mut out = vec![0.0; 25];
    let mut ws = Workspace::new();
    h.hessian_into(&mut ws, &[Val::F64s(x.clone())], &mut out)
        .unwrap();
    let want = fd_hessian(&x, &mut |x| {
        let g = grad
            .value_and_gradient(&mut ws, &[Val::F64s(x.to_vec())])
            .unwrap();
        match &g.gradient[0] {
            Some(Val::F64s(g)) => g.clone(),
            other => panic!("{other:?}"),
        }
    });
    assert_all_close(&out, &want, 1e-6, "rosenbrock");
}

/// Central differences of `f` (results of `rows` entries) at `x`: column `j` is
/// `(f(x + h e_j) - f(x - h e_j)) / 2h`, the entries row by row.
fn fd_jacobian(x: &[f64], rows: usize, f: &mut dyn FnMut(&[f64]) -> Vec<f64>) -> Vec<f64> {
    let n = x.len();
    let mut out = vec![0.0; rows * n];
    for j in 0..n {
        let h = 1e-6 * x[j].abs().max(1.0);
        let (mut xp, mut xm) = (x.to_vec(), x.to_vec());
        xp[j] += h;
        xm[j] -= h;
        let (fp, fm) = (f(&xp), f(&xm));
        for r in 0..rows {
            out[r * n + j] = (fp[r] - fm[r]) / (2.0 * h);
        }
    }
    out
}

#[test]
fn jacobians_equal_central_differences_of_the_function() {
    // Three results of two scalars and a slice of two: 4 columns, 3 rows
    // (reverse sweeps); with the slice constant, 2 columns (forward sweeps).
    let mut f = autodiff("f", |a: Var, b: Var, x: Slice<f64>| {
        let s = x.at(0) * x.at(1);
        (a * b.sin() + s, (a * x.at(0)).exp(), b * b * x.at(1) - a)
    })
    .unwrap();
    let (a, b, x) = (0.7, -1.1, [0.3, 1.9]);
    let mut dx = [0.0; 2];
    let m = f
        .jacobian((Active(a), Active(b), Duplicated(&x[..], &mut dx[..])))
        .unwrap();
    assert_eq!((m.rows, m.cols), (3, 4));
    assert_eq!(m.row_coords, [(0, None), (1, None), (2, None)]);
    let want = fd_jacobian(&[a, b, x[0], x[1]], 3, &mut |z| {
        let (p, q, r) = f.call((z[0], z[1], &z[2..])).unwrap();
        vec![p, q, r]
    });
    assert_all_close(&m.data, &want, 1e-7, "three results");
    let m2 = f.jacobian((Active(a), Active(b), Const(&x[..]))).unwrap();
    assert_eq!((m2.rows, m2.cols), (3, 2));
    for r in 0..3 {
        for c in 0..2 {
            assert!(close(m2.get(r, c), m.get(r, c), 1e-14));
        }
    }

    // A writable slice: rows are the result, then the slice's final contents.
    let mut g = autodiff("g", |s: Var, mut y: SliceMut<f64>| {
        let y0 = y.at(0);
        y.set(1, y0 * s.sin());
        y.set(2, s * s);
        y.at(1) + y0
    })
    .unwrap();
    let (s, mut y, mut dy) = (0.4, [1.5, 0.0, 0.0], [0.0; 3]);
    let m = g
        .jacobian((Active(s), Duplicated(&mut y[..], &mut dy[..])))
        .unwrap();
    assert_eq!(y, [1.5, 0.0, 0.0], "the arguments stay as they are");
    assert_eq!((m.rows, m.cols), (4, 4));
    assert_eq!(
        m.row_coords,
        [(0, None), (1, Some(0)), (1, Some(1)), (1, Some(2))]
    );
    let want = fd_jacobian(&[s, y[0], y[1], y[2]], 4, &mut |z| {
        let mut y = z[1..].to_vec();
        let r = g.call((z[0], &mut y[..])).unwrap();
        let mut out = vec![r];
        out.extend(y);
        out
    });
    assert_all_close(&m.data, &want, 1e-7, "written slice");
}

#[test]
fn jacobian_into_equals_jacobian_both_ways() {
    let polar = parse(
        "func @polar(%r: f64, %t: f64, %w: [f64]) -> (f64, f64, f64) {
        entry:
            %c = cos %t
            %s = sin %t
            %x = fmul %r, %c
            %y = fmul %r, %s
            %w0 = load %w[0]
            %z = fmul %w0, %x
            ret %x, %y, %z
        }",
    )
    .unwrap();
    let args = [Val::F64(2.0), Val::F64(0.5), Val::F64s(vec![3.0])];
    let mut ws = Workspace::new();
    let jvp = CompiledJvp::new(&polar, "polar").unwrap();
    let want = jvp.jacobian(&mut ws, &args).unwrap();
    let mut out = vec![f64::NAN; 9];
    jvp.jacobian_into(&mut ws, &args, &mut out).unwrap();
    assert_eq!(out, want.data);
    for width in [1, 2] {
        let j = Pipeline::new()
            .compile_jacobian(&polar, "polar", None, width)
            .unwrap();
        let (f, r) = (
            j.forward(&mut ws, &args).unwrap(),
            j.reverse(&mut ws, &args).unwrap(),
        );
        let mut out = vec![f64::NAN; 9];
        j.jacobian_into(&mut ws, &args, &mut out).unwrap();
        let chosen = if j.uses_forward(&args) { &f } else { &r };
        assert_eq!(out, chosen.data, "w{width}");
        assert_all_close(
            &f.data,
            &r.data,
            1e-14,
            &format!("forward, reverse w{width}"),
        );
        let e = j.jacobian_into(&mut ws, &args, &mut [0.0; 8]).unwrap_err();
        assert!(e.to_string().contains("3 x 3"), "{e}");
    }
}

#[test]
fn prepared_forms_allocate_nothing_once_warm() {
    let rosen = rosenbrock_ir();
    let x: Vec<f64> = suite::rosenbrock_input(8);
    let args = [Val::F64s(x.clone())];
    let mut ws = Workspace::new();

    // hvp_args at width 2.
    let h = Pipeline::new()
        .compile_hvp(&rosen, "rosenbrock", None, 2)
        .unwrap();
    let mut v = vec![0.0; 16];
    let (mut g, mut hv, mut value) = (vec![0.0; 8], vec![0.0; 16], Vec::new());
    let call =
        |v: &mut [f64], g: &mut [f64], hv: &mut [f64], value: &mut Vec<Val>, ws: &mut Workspace| {
            h.hvp_args(
                ws,
                &mut [Arg::F64s(&x)],
                &mut [Arg::F64sMut(v)],
                value,
                &mut [Arg::F64sMut(g)],
                &mut [Arg::F64sMut(hv)],
            )
            .unwrap();
        };
    call(&mut v, &mut g, &mut hv, &mut value, &mut ws);
    let n = allocations(|| {
        for k in 0..5 {
            v.fill(0.0);
            v[k] = 1.0;
            call(&mut v, &mut g, &mut hv, &mut value, &mut ws);
        }
    });
    assert_eq!(n, 0, "hvp_args");

    // hessian_into (the same workspace: the buffers of each form are kept in it).
    let mut out = vec![0.0; 64];
    h.hessian_into(&mut ws, &args, &mut out).unwrap();
    let n = allocations(|| {
        for _ in 0..3 {
            h.hessian_into(&mut ws, &args, &mut out).unwrap();
        }
    });
    assert_eq!(n, 0, "hessian_into");

    // jacobian_into, forward (CompiledJvp) and reverse (CompiledJacobian).
    let jvp = CompiledJvp::new(&rosen, "rosenbrock").unwrap();
    let mut row = vec![0.0; 8];
    jvp.jacobian_into(&mut ws, &args, &mut row).unwrap();
    let n = allocations(|| {
        for _ in 0..3 {
            jvp.jacobian_into(&mut ws, &args, &mut row).unwrap();
        }
    });
    assert_eq!(n, 0, "CompiledJvp::jacobian_into");
    let j = Pipeline::new()
        .compile_jacobian(&rosen, "rosenbrock", None, 1)
        .unwrap();
    assert!(!j.uses_forward(&args));
    let mut row2 = vec![0.0; 8];
    j.jacobian_into(&mut ws, &args, &mut row2).unwrap();
    let n = allocations(|| {
        for _ in 0..3 {
            j.jacobian_into(&mut ws, &args, &mut row2).unwrap();
        }
    });
    assert_eq!(n, 0, "CompiledJacobian::jacobian_into");
    assert_all_close(&row, &row2, 1e-13, "forward and reverse rows");
    // Row j of the Hessian is H e_j: the width-2 HVP along e_0, e_1 above gave
    // its first two rows.
    v.fill(0.0);
    v[0] = 1.0;
    v[3] = 1.0;
    h.hvp_args(
        &mut ws,
        &mut [Arg::F64s(&x)],
        &mut [Arg::F64sMut(&mut v)],
        &mut value,
        &mut [Arg::F64sMut(&mut g)],
        &mut [Arg::F64sMut(&mut hv)],
    )
    .unwrap();
    let lanes: Vec<f64> = (0..2)
        .flat_map(|j| (0..8).map(move |i| (i, j)))
        .map(|(i, j)| hv[i * 2 + j])
        .collect();
    assert_eq!(out[..16], lanes[..]);

    // Autodiff::hvp in steady state.
    let mut f = autodiff("rosenbrock", suite::rosenbrock::<Var>).unwrap();
    let mut dx = [0.0; 8];
    let v1 = vec![0.5; 8];
    let mut hv1 = vec![0.0; 8];
    f.hvp((Duplicated(&x[..], &mut dx[..]),), &v1, &mut hv1)
        .unwrap();
    let n = allocations(|| {
        for _ in 0..3 {
            f.hvp((Duplicated(&x[..], &mut dx[..]),), &v1, &mut hv1)
                .unwrap();
        }
    });
    assert_eq!(n, 0, "Autodiff::hvp");

    // Autodiff::hessian_into and jacobian_into in steady state, equal to the
    // allocating forms.
    let mut h8 = vec![0.0; 64];
    let mut j8 = vec![0.0; 8];
    for w in [1, 4] {
        f.hessian_into((Duplicated(&x[..], &mut dx[..]),), w, &mut h8)
            .unwrap();
        f.jacobian_into((Duplicated(&x[..], &mut dx[..]),), w, &mut j8)
            .unwrap();
        let n = allocations(|| {
            for _ in 0..3 {
                f.hessian_into((Duplicated(&x[..], &mut dx[..]),), w, &mut h8)
                    .unwrap();
                f.jacobian_into((Duplicated(&x[..], &mut dx[..]),), w, &mut j8)
                    .unwrap();
            }
        });
        assert_eq!(
            n, 0,
            "Autodiff::hessian_into and jacobian_into at width {w}"
        );
        let h = f.hessian((Duplicated(&x[..], &mut dx[..]),)).unwrap();
        assert_eq!(h.data, h8, "width {w}");
        let j = f.jacobian((Duplicated(&x[..], &mut dx[..]),)).unwrap();
        assert_eq!(j.data, j8, "width {w}");
    }
    assert_all_close(&h8, &rosenbrock_hessian(&x), 1e-12, "hessian_into");
    // A wrong length is an error, not a panic.
    let e = f
        .hessian_into((Duplicated(&x[..], &mut dx[..]),), 1, &mut h8[..10])
        .unwrap_err();
    assert!(e.to_string().contains("64"), "{e}");
}

#[test]
fn autodiff_widths_give_the_entries_of_width_one() {
    // Hessians of rosenbrock's code over 11 coordinates, by 1 to 13 rows per sweep:
    // against the closed form, and bit for bit against width 1.
    let mut f = autodiff("rosen", |x: Slice<f64>| {
        let mut s = Var::from(0.0);
        for i in 0..10 {
            let (a, b) = (x.at(i), x.at(i + 1));
            let d = b - a * a;
            s = s + 100.0 * d * d + (1.0 - a) * (1.0 - a);
        }
        s
    })
    .unwrap();
    let x: Vec<f64> = (0..11)
        .map(|i| 0.5 * (0.37 * i as f64 + 0.1).sin())
        .collect();
    let mut dx = vec![0.0; x.len()];
    let h1 = f.hessian((Duplicated(&x[..], &mut dx[..]),)).unwrap();
    assert_all_close(&h1.data, &rosenbrock_hessian(&x), 1e-12, "width 1");
    for w in [2, 4, 8, 13] {
        let h = f
            .hessian_width((Duplicated(&x[..], &mut dx[..]),), w)
            .unwrap();
        assert_eq!(bits_of(&h.data), bits_of(&h1.data), "hessian width {w}");
    }
    assert_eq!(dx, vec![0.0; x.len()], "the shadow stays as it was");
    assert_eq!(f.hvp_patterns().len(), 5, "one pattern per width");

    // Jacobians by forward sweeps (2 columns, 3 rows) and by reverse sweeps
    // (4 columns, 3 rows at width 1; at width 4 one sweep either way, so forward).
    let mut g = autodiff("g", |a: Var, b: Var, x: Slice<f64>| {
        let s = x.at(0) * x.at(1);
        (a * b.sin() + s, (a * x.at(0)).exp(), b * b * x.at(1) - a)
    })
    .unwrap();
    let (a, b, xs) = (0.7, -1.1, [0.3, 1.9]);
    let mut dxs = [0.0; 2];
    let want = fd_jacobian(&[a, b, xs[0], xs[1]], 3, &mut |z| {
        let (p, q, r) = g.call((z[0], z[1], &z[2..])).unwrap();
        vec![p, q, r]
    });
    let j1 = g
        .jacobian((Active(a), Active(b), Duplicated(&xs[..], &mut dxs[..])))
        .unwrap();
    assert_all_close(&j1.data, &want, 1e-7, "jacobian width 1");
    for w in [2, 3, 4, 8] {
        let j = g
            .jacobian_width((Active(a), Active(b), Duplicated(&xs[..], &mut dxs[..])), w)
            .unwrap();
        assert_eq!(bits_of(&j.data), bits_of(&j1.data), "jacobian width {w}");
        let k = g
            .jacobian_width((Active(a), Active(b), Const(&xs[..])), w)
            .unwrap();
        let k1 = g.jacobian((Active(a), Active(b), Const(&xs[..]))).unwrap();
        assert_eq!(bits_of(&k.data), bits_of(&k1.data), "forward, width {w}");
    }

    // A width outside 1..=64 is an error naming the width, not a panic.
    for w in [0, 65] {
        let e = g
            .jacobian_width((Active(a), Active(b), Const(&xs[..])), w)
            .unwrap_err();
        assert!(e.to_string().contains(&format!("width of {w}")), "{e}");
        let e = f
            .hessian_width((Duplicated(&x[..], &mut dx[..]),), w)
            .unwrap_err();
        assert!(e.to_string().contains(&format!("width of {w}")), "{e}");
    }
}

fn bits_of(v: &[f64]) -> Vec<u64> {
    v.iter().map(|x| x.to_bits()).collect()
}
