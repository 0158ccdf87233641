//! `GRADLIFT_DUMP=dir`: the first call of `NAME` writes the IR of each stage into
//! `dir`, for `#[autodiff_reverse]` and `#[autodiff_forward]`. A test binary of its
//! own, so that setting the variable races with no other test.

// Index loops are what the translated subset has.
#![allow(clippy::needless_range_loop)]

use gradlift::{autodiff_forward, autodiff_reverse};

/// A loop and a branch, so that every stage has something to show.
#[autodiff_reverse(d_dumped, Duplicated, Active, Active)]
#[autodiff_forward(f_dumped, Dual, Dual, Dual)]
fn dumped(x: &[f64], t: f64) -> f64 {
    let mut s = 0.0;
    for i in 0..x.len() {
        if x[i] > 0.0 {
            s += x[i] * t;
        } else {
            s += (x[i] * t).exp();
        }
    }
    s
}

#[test]
fn the_first_call_writes_every_stage() {
    let dir = std::env::temp_dir().join(format!("gradlift-dump-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    // SAFETY: the only test of this binary, and no other thread of it reads the
    // environment meanwhile.
    #[allow(unsafe_code)]
    unsafe {
        std::env::set_var("GRADLIFT_DUMP", &dir);
    }
    let x = [1.0, -2.0];
    let mut dx = [0.0; 2];
    let (v, dt) = d_dumped(&x, &mut dx, 0.5, 1.0);
    assert_eq!(v, dumped(&x, 0.5));
    assert_eq!(dt, 1.0 - 2.0 * (-1.0f64).exp());
    for (stage, func) in [
        ("traced", "@dumped("),
        ("optimized", "@dumped("),
        ("fwd", ".fwd"),
        ("rvs", ".rvs"),
    ] {
        let path = dir.join(format!("d_dumped.{stage}.ir"));
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("{} was not written: {e}", path.display()));
        assert!(text.contains(func), "{stage}: no {func} in\n{text}");
        if let Err(e) = gradlift::ir::parse(&text) {
            panic!("{stage} does not parse: {e}\n{text}");
        }
    }
    // Forward mode: the traced and optimised function, then the forward rule.
    let (v, d) = f_dumped(&x, &[0.0, 0.0], 0.5, 1.0);
    assert_eq!((v, d), (dumped(&x, 0.5), dt));
    for (stage, func) in [
        ("traced", "@dumped("),
        ("optimized", "@dumped("),
        (
            "jvp",
            "func @dumped.jvp(%x: [f64], %dx: [f64], %t: f64, %dt: f64) -> (f64, f64)",
        ),
    ] {
        let path = dir.join(format!("f_dumped.{stage}.ir"));
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("{} was not written: {e}", path.display()));
        assert!(text.contains(func), "{stage}: no {func} in\n{text}");
        if let Err(e) = gradlift::ir::parse(&text) {
            panic!("{stage} does not parse: {e}\n{text}");
        }
    }
    assert!(!dir.join("f_dumped.fwd.ir").exists());
    std::fs::remove_dir_all(&dir).unwrap();
}
