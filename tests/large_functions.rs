//! A large straight-line function runs in the stack it needs: the JIT bounds each
//! function's native frame by the frame Cranelift laid out, not by 32 bytes per
//! value. Before, a function of 10,000 values was refused on a 256 KiB stack
//! ("native stack exhausted at call depth 0", its bound being 321 KB) although its
//! frame is a few bytes; and 300,000 straight-line instructions were refused on
//! any ordinary stack.

use gradlift::ir::parse;
use gradlift::{CompiledFunction, CompiledGradient, Val, Workspace};

/// `x + x + ... + x` (`n + 1` terms, one value each) times `x`.
fn chain(n: usize) -> String {
    let mut t = String::from("func @chain(%x: f64) -> f64 {\nentry:\n    %v0 = fadd %x, 0.0\n");
    for k in 1..=n {
        t.push_str(&format!("    %v{k} = fadd %v{}, %x\n", k - 1));
    }
    t.push_str(&format!("    %r = fmul %v{n}, %x\n    ret %r\n}}\n"));
    t
}

#[test]
fn ten_thousand_values_on_a_small_stack() {
    let n = 10_000;
    let m = parse(&chain(n)).unwrap();
    let f = CompiledFunction::new(&m, "chain").unwrap();
    let grad = CompiledGradient::new(&m, "chain").unwrap();
    // ((n + 1) x) x, whose derivative is 2 (n + 1) x.
    let run = move || {
        let mut ws = Workspace::new();
        let y = f.call(&mut ws, &mut [Val::F64(0.5)]).unwrap();
        let g = grad.value_and_gradient(&mut ws, &[Val::F64(0.5)]).unwrap();
        (y, g.gradient)
    };
    let (y, g) = std::thread::Builder::new()
        .stack_size(256 * 1024)
        .spawn(run)
        .unwrap()
        .join()
        .unwrap();
    let k = (n + 1) as f64;
    assert_eq!(y, [Val::F64(k * 0.25)]);
    assert_eq!(g, [Some(Val::F64(2.0 * k * 0.5))]);
}

// Finding 1 and 3 of the reliability review: Cranelift's optimising settings take
// time and memory faster than linearly in a function's blocks (n nested
// if/else diamonds: 1.3 s at n = 1,000, 33 s and 360 MB at n = 8,000 for the
// gradient; killed at 22 GB at n = 100,000). Functions above
// `CompileOptions::quick_above` now get the quick settings (linear: 4.5 s at
// n = 8,000, 17 s at n = 32,000), and functions above the limits are refused
// before anything is built.

use gradlift::ir::interp::Interpreter;
use gradlift::ir::{ParseOptions, parse_with};
use gradlift::jit::{CompileError, CompileOptions};
use gradlift::{Error, Pipeline};

/// `n` nested diamonds: while `v < 1`, `v *= 1.7` and go one level deeper; the
/// first `v >= 1` adds 1 and returns through every join. The innermost level
/// returns `v * 1.7`.
fn nested_diamonds(n: usize) -> String {
    let mut t = String::from("func @f(%x: f64) -> f64 {\nentry:\n    jump b0\n");
    for k in 0..n {
        let v = if k == 0 {
            "%x".to_string()
        } else {
            format!("%a{}", k - 1)
        };
        t.push_str(&format!(
            "b{k}:\n    %c{k} = fcmp lt {v}, 1.0\n    br %c{k}, t{k}, e{k}\n"
        ));
        let next = if k + 1 < n {
            format!("b{}", k + 1)
        } else {
            format!("j{k}")
        };
        t.push_str(&format!(
            "t{k}:\n    %a{k} = fmul {v}, 1.7\n    jump {next}\n"
        ));
        t.push_str(&format!(
            "e{k}:\n    %e{k} = fadd {v}, 1.0\n    jump j{k}\n"
        ));
    }
    for k in (0..n).rev() {
        let inner = if k + 1 < n {
            format!("j{}: %r{}", k + 1, k + 1)
        } else {
            format!("t{k}: %a{k}")
        };
        t.push_str(&format!(
            "j{k}:\n    %r{k} = phi f64 [{inner}, e{k}: %e{k}]\n"
        ));
        if k > 0 {
            t.push_str(&format!("    jump j{}\n", k - 1));
        } else {
            t.push_str("    ret %r0\n");
        }
    }
    t.push_str("}\n");
    t
}

/// The closed form of [`nested_diamonds`]: value and derivative, with the same
/// operations in the same order.
fn nested_diamonds_at(n: usize, x: f64) -> (f64, f64) {
    let (mut v, mut d) = (x, 1.0);
    for _ in 0..n {
        if v >= 1.0 {
            return (v + 1.0, d);
        }
        v *= 1.7;
        d *= 1.7;
    }
    (v, d)
}

/// A chain of `n` blocks, each multiplying by 1.0001 and jumping to the next.
fn block_chain(n: usize) -> String {
    let mut t =
        String::from("func @f(%x: f64) -> f64 {\nentry:\n    %v0 = fadd %x, 0.0\n    jump b1\n");
    for k in 1..n {
        t.push_str(&format!("b{k}:\n    %v{k} = fmul %v{}, 1.0001\n", k - 1));
        if k + 1 < n {
            t.push_str(&format!("    jump b{}\n", k + 1));
        } else {
            t.push_str(&format!("    ret %v{k}\n"));
        }
    }
    t.push_str("}\n");
    t
}

fn f64_of(v: &[Val]) -> f64 {
    match v {
        [Val::F64(y)] => *y,
        other => panic!("expected one f64, got {other:?}"),
    }
}

#[test]
fn nested_diamonds_compile_quickly_and_agree_with_the_interpreter() {
    let n = 1_000;
    let m = parse(&nested_diamonds(n)).unwrap();
    // The derived functions are far above `quick_above`: they get the quick settings.
    let grad = CompiledGradient::new(&m, "f").unwrap();
    let rule = Pipeline::new().derive(&m, "f", None).unwrap();
    let mut interp = Interpreter::new(&rule.module);
    let mut ws = Workspace::new();
    for x in [0.3, 1e-3, 0.99, 2.0, 1e-300] {
        let (want, dwant) = nested_diamonds_at(n, x);
        let g = grad.value_and_gradient(&mut ws, &[Val::F64(x)]).unwrap();
        assert_eq!(f64_of(g.value.as_deref().unwrap()), want, "value at {x}");
        let Some(Val::F64(d)) = g.gradient[0] else {
            panic!("no gradient")
        };
        assert!(
            (d - dwant).abs() <= 1e-12 * dwant.abs(),
            "at {x}: {d} vs {dwant}"
        );
        let i = gradlift::adjoint::value_and_gradient(
            &mut interp,
            &rule,
            &[Val::F64(x)],
            &gradlift::adjoint::Seeds::default(),
        )
        .unwrap();
        assert_eq!(i.value, g.value, "interpreter at {x}");
        assert_eq!(i.gradient, g.gradient, "interpreter at {x}");
    }
}

#[test]
fn quick_and_optimising_settings_compute_the_same() {
    let n = 3_000;
    let m = parse(&block_chain(n)).unwrap();
    let quick = Pipeline::new().with_compile(CompileOptions::default().with_quick_above(0));
    let speed =
        Pipeline::new().with_compile(CompileOptions::default().with_quick_above(usize::MAX));
    let (fq, fs) = (
        quick.compile_function(&m, "f").unwrap(),
        speed.compile_function(&m, "f").unwrap(),
    );
    let (gq, gs) = (
        quick.compile_gradient(&m, "f", None).unwrap(),
        speed.compile_gradient(&m, "f", None).unwrap(),
    );
    let mut ws = Workspace::new();
    for x in [0.5, -3.0, 1e10] {
        let (mut want, mut dwant) = (x + 0.0, 1.0);
        for _ in 1..n {
            want *= 1.0001;
            dwant *= 1.0001;
        }
        let yq = fq.call(&mut ws, &mut [Val::F64(x)]).unwrap();
        let ys = fs.call(&mut ws, &mut [Val::F64(x)]).unwrap();
        assert_eq!(yq, [Val::F64(want)]);
        assert_eq!(ys, [Val::F64(want)]);
        let a = gq.value_and_gradient(&mut ws, &[Val::F64(x)]).unwrap();
        let b = gs.value_and_gradient(&mut ws, &[Val::F64(x)]).unwrap();
        assert_eq!(a.value, b.value);
        assert_eq!(a.gradient, b.gradient);
        let Some(Val::F64(d)) = a.gradient[0] else {
            panic!("no gradient")
        };
        assert!((d - dwant).abs() <= 1e-12 * dwant, "at {x}: {d} vs {dwant}");
    }
}

#[test]
fn functions_over_the_jit_limit_are_refused_naming_size_and_limit() {
    let m = parse(&block_chain(600)).unwrap();
    let small = Pipeline::new().with_compile(CompileOptions::default().with_max_insts(500));
    for err in [
        small.compile_function(&m, "f").err(),
        small.compile_gradient(&m, "f", None).err(),
    ] {
        let Some(Error::Compile(e)) = err else {
            panic!("not refused: {err:?}")
        };
        let CompileError::TooLarge { func, insts, limit } = &e else {
            panic!("{e}")
        };
        assert!(func.starts_with('f'), "{func}");
        assert!(*insts > 500, "{insts}");
        assert_eq!(*limit, 500);
        let message = e.to_string();
        assert!(
            message.contains(&insts.to_string()) && message.contains("500"),
            "{message}"
        );
    }
    // The default limit leaves room for the derived code of what the parser accepts.
    assert!(CompileOptions::default().max_insts >= 2 * ParseOptions::default().max_insts);
}

#[test]
fn the_parser_stops_at_the_first_statement_over_its_limit() {
    // 50 statements in @f, then text that does not parse: only the limit is
    // reported, at the 21st statement (line 24: the header, `entry:`, two
    // statements, then a label and a statement per block), and nothing after it
    // is read.
    let text = format!("{}func @g( garbage %%% \"unterminated\n", block_chain(25));
    let err = parse_with(&text, &ParseOptions::default().with_max_insts(20)).unwrap_err();
    assert_eq!(err.0.len(), 1, "{err}");
    let e = &err.0[0];
    assert!(
        e.message.starts_with("@f has more than 20 instructions"),
        "{}",
        e.message
    );
    assert!(e.message.contains("--max-insts"), "{}", e.message);
    let line = text
        .lines()
        .position(|l| l.contains("%v10 = fmul"))
        .unwrap()
        + 1;
    assert_eq!(e.pos.to_string(), format!("{line}:5"));
    // Within the limit, the same function parses (and the garbage is reported).
    let ok = parse_with(
        &block_chain(25),
        &ParseOptions::default().with_max_insts(50),
    );
    assert!(ok.is_ok());
    let over = parse_with(
        &block_chain(25),
        &ParseOptions::default().with_max_insts(49),
    );
    assert!(over.is_err());
}
