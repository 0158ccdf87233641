//! `check_derived` on functions with slice parameters, through rules written by hand
//! (written by hand, so that the checker is tested apart from the derivation): `@f.fwd` and `@f.rvs` in IR text,
//! following the rule calling convention (`gradlift_adjoint::run_rule`), with the layout
//! `build_rrule` would give. Correct rules pass; rules with a wrong factor, a shadow
//! overwritten instead of added to, a pullback reading the slice as the forward pass
//! left it, an unbalanced tape or a forward pass that leaves other contents are
//! caught, each by the check that should catch it.

use gradlift_adjoint::{
    Activity, CheckError, CheckOptions, CheckReport, Coord, RetActivity, Rule, RuleConfig,
    RuleLayout, check_derived,
};
use gradlift_ir::interp::Val;
use gradlift_ir::{Module, parse, verify};

/// The rule made of `@{name}.fwd` and `@{name}.rvs` of `text`, with the layout its
/// configuration gives.
fn hand_rule(text: &str, name: &str, config: RuleConfig) -> Rule {
    let module = parse(text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    verify(&module).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let primal = module.func_by_name(name).unwrap();
    let forward = module.func_by_name(&format!("{name}.fwd")).unwrap();
    let pullback = module.func_by_name(&format!("{name}.rvs")).unwrap();
    let sig = module.sig(primal).clone();
    let n = sig.params.len();
    let params = |keep: &dyn Fn(usize) -> bool| (0..n).filter(|&i| keep(i)).collect::<Vec<_>>();
    let layout = RuleLayout {
        primal,
        active_params: params(&|i| config.params[i] == Activity::Active),
        slice_params: params(&|i| matches!(config.params[i], Activity::Dup | Activity::DupNoNeed)),
        shadow_params: params(&|i| matches!(config.params[i], Activity::Dup | Activity::DupNoNeed)),
        seeded_results: (0..sig.results.len())
            .filter(|&j| config.ret == RetActivity::Active && sig.results[j].is_float())
            .collect(),
        config,
        width: 1,
    };
    Rule {
        module,
        forward,
        pullback,
        fused: None,
        layout,
    }
}

/// The default configuration, with no slice frozen: the rules written here take
/// only their `dup` slices, not the read-only `const` ones.
fn default_config(text: &str, name: &str) -> RuleConfig {
    let m = parse(text).unwrap();
    let mut config = RuleConfig::default_for(m.sig(m.func_by_name(name).unwrap()));
    config.frozen.fill(false);
    config
}

/// Checks `rule` (its module holds the primal too) with `opts`.
fn check(rule: &Rule, args: &[Val], opts: &CheckOptions) -> Result<CheckReport, CheckError> {
    check_derived(&rule.module, rule, args, opts)
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * (1.0 + a.abs().max(b.abs()))
}

// ---------------------------------------------------------------------------------
// sumsq(x) = sum_i x_i^2: a read-only `dup` slice, one result.

const SUMSQ: &str = "
func @sumsq(%x: [f64]) -> f64 {
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
    %sq = fmul %xi, %xi
    %acc1 = fadd %acc, %sq
    %i1 = iadd %i, 1
    jump head
exit:
    ret %acc
}

; The forward pass is the primal: the pullback reads x itself.
func @sumsq.fwd(%x: [f64]) -> f64 {
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
    %sq = fmul %xi, %xi
    %acc1 = fadd %acc, %sq
    %i1 = iadd %i, 1
    jump head
exit:
    ret %acc
}

; dx[i] += 2 x[i] dy
func @sumsq.rvs(%x: [f64], %dx: mut [f64], %dy: f64) {
entry:
    %n = len %x
    jump head
head:
    %i = phi i64 [entry: 0, body: %i1]
    %more = icmp lt %i, %n
    br %more, body, exit
body:
    %xi = load %x[%i]
    %c = fmul 2.0, %xi
    %g = fmul %c, %dy
    %old = load %dx[%i]
    %new = fadd %old, %g
    store %dx[%i], %new
    %i1 = iadd %i, 1
    jump head
exit:
    ret
}
";

fn sumsq_rule(text: &str) -> Rule {
    hand_rule(text, "sumsq", default_config(SUMSQ, "sumsq"))
}

fn points(n: usize) -> Vec<f64> {
    (0..n).map(|i| (0.37 * i as f64 + 0.1).sin()).collect()
}

#[test]
fn sumsq_passes_and_reports_every_element() {
    let rule = sumsq_rule(SUMSQ);
    let x = [0.3, -1.2, 0.7, 2.0];
    let report = check(&rule, &[Val::F64s(x.to_vec())], &CheckOptions::default()).unwrap();
    let sum: f64 = x.iter().map(|v| v * v).sum();
    assert_eq!(report.primal, [Val::F64(sum)]);
    let coords: Vec<Coord> = (0..4)
        .map(|k| Coord {
            param: 0,
            index: Some(k),
        })
        .collect();
    assert_eq!(report.coords, coords);
    assert_eq!(report.gradient, x.map(|v| 2.0 * v));
    for (fd, g) in report.finite_differences.iter().zip(&report.gradient) {
        assert!((fd - g).abs() < 1e-6, "{fd} {g}");
    }
    assert_eq!(report.dot.len(), 2);
    assert!(report.dot.iter().all(|&(a, b)| a != 0.0 && close(a, b)));
}

#[test]
fn an_empty_slice_has_no_coordinates() {
    let rule = sumsq_rule(SUMSQ);
    let report = check(&rule, &[Val::F64s(Vec::new())], &CheckOptions::default()).unwrap();
    assert_eq!(report.primal, [Val::F64(0.0)]);
    assert!(report.coords.is_empty() && report.gradient.is_empty());
    assert_eq!(report.dot, [(0.0, 0.0), (0.0, 0.0)]);
}

#[test]
fn large_slices_check_a_spread_of_coordinates() {
    let rule = sumsq_rule(SUMSQ);
    let x = points(100);
    let report = check(&rule, &[Val::F64s(x.clone())], &CheckOptions::default()).unwrap();
    assert_eq!(report.coords.len(), 32);
    assert!(report.coords.windows(2).all(|w| w[0] < w[1]));
    assert_eq!(report.coords[0].index, Some(0));
    assert_eq!(report.coords[31].index, Some(99));
    // Spread: no gap much larger than the average.
    let idx: Vec<usize> = report.coords.iter().map(|c| c.index.unwrap()).collect();
    assert!(idx.windows(2).all(|w| w[1] - w[0] <= 5), "{idx:?}");
    for (c, g) in report.coords.iter().zip(&report.gradient) {
        assert_eq!(*g, 2.0 * x[c.index.unwrap()]);
    }

    // However small the budget, the ends stay.
    let opts = CheckOptions {
        max_coords: 0,
        ..CheckOptions::default()
    };
    let report = check(&rule, &[Val::F64s(x)], &opts).unwrap();
    let idx: Vec<Option<usize>> = report.coords.iter().map(|c| c.index).collect();
    assert_eq!(idx, [Some(0), Some(99)]);
}

#[test]
fn a_wrong_factor_is_caught_at_its_element() {
    let rule = sumsq_rule(&SUMSQ.replace("fmul 2.0, %xi", "fmul 3.0, %xi"));
    let err = check(
        &rule,
        &[Val::F64s(vec![0.3, -1.2, 0.7])],
        &CheckOptions::default(),
    )
    .unwrap_err();
    assert!(
        matches!(
            err,
            CheckError::Gradient {
                param: 0,
                index: Some(0),
                ..
            }
        ),
        "{err}"
    );
    assert!(
        err.to_string().contains("element 0 of parameter 1"),
        "{err}"
    );
}

/// A pullback wrong only at element 50 of 100.
fn wrong_at_50() -> Rule {
    sumsq_rule(&SUMSQ.replace(
        "%c = fmul 2.0, %xi",
        "%is = icmp eq %i, 50
    %bump = cast f64 %is
    %f = fadd 2.0, %bump
    %c = fmul %f, %xi",
    ))
}

#[test]
fn an_error_at_an_unchecked_element_is_caught_by_the_dot_product_test() {
    let rule = wrong_at_50();
    let args = [Val::F64s(points(100))];
    let opts = CheckOptions {
        max_coords: 2,
        ..CheckOptions::default()
    };
    let err = check(&rule, &args, &opts).unwrap_err();
    assert!(
        matches!(err, CheckError::DotProduct { trial: 0, .. }),
        "{err}"
    );
    // Checking every coordinate finds the element.
    let opts = CheckOptions {
        max_coords: 100,
        ..CheckOptions::default()
    };
    let err = check(&rule, &args, &opts).unwrap_err();
    assert!(
        matches!(
            err,
            CheckError::Gradient {
                param: 0,
                index: Some(50),
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn a_shadow_overwritten_instead_of_added_to_is_caught() {
    // With shadows starting at zero, `=` and `+=` agree; the dot-product test starts
    // them at `w` and sees the difference.
    let rule = sumsq_rule(&SUMSQ.replace("%new = fadd %old, %g", "%new = fadd %g, 0.0"));
    let err = check(
        &rule,
        &[Val::F64s(vec![0.3, -1.2, 0.7])],
        &CheckOptions::default(),
    )
    .unwrap_err();
    assert!(matches!(err, CheckError::DotProduct { .. }), "{err}");
}

#[test]
fn a_const_return_leaves_the_slice_as_the_only_output() {
    // The outputs are x's final contents, x itself: J is the identity, and a
    // pullback that leaves the shadow alone is right.
    let text = format!(
        "{}
func @sumsq.rvs.C(%x: [f64], %dx: mut [f64]) {{
entry:
    ret
}}",
        SUMSQ
    );
    let text = text
        .replace("@sumsq.rvs(", "@sumsq.rvs.A(")
        .replace("@sumsq.rvs.C(", "@sumsq.rvs(");
    let config = default_config(SUMSQ, "sumsq").with_ret(RetActivity::Const);
    let rule = hand_rule(&text, "sumsq", config.clone());
    let report = check(
        &rule,
        &[Val::F64s(vec![0.3, -1.2, 0.7])],
        &CheckOptions::default(),
    )
    .unwrap();
    assert_eq!(report.gradient, [0.0; 3]);
    assert!(report.dot.iter().all(|&(a, b)| a != 0.0 && close(a, b)));

    // A pullback that clears the shadow is wrong.
    let text = text.replace(
        "@sumsq.rvs(%x: [f64], %dx: mut [f64]) {
entry:
    ret",
        "@sumsq.rvs(%x: [f64], %dx: mut [f64]) {
entry:
    store %dx[0], 0.0
    ret",
    );
    let rule = hand_rule(&text, "sumsq", config);
    let err = check(
        &rule,
        &[Val::F64s(vec![0.3, -1.2, 0.7])],
        &CheckOptions::default(),
    )
    .unwrap_err();
    assert!(matches!(err, CheckError::DotProduct { .. }), "{err}");
}

#[test]
fn arguments_and_layouts_must_fit() {
    let rule = sumsq_rule(SUMSQ);
    for args in [
        vec![Val::I64s(vec![1])],
        vec![Val::F32s(vec![1.0])],
        vec![Val::F64(1.0)],
        vec![],
    ] {
        let err = check(&rule, &args, &CheckOptions::default()).unwrap_err();
        assert!(matches!(err, CheckError::BadArguments(_)), "{err}");
    }
    let mut bad = rule.clone();
    bad.layout.shadow_params.clear();
    let err = check(&bad, &[Val::F64s(vec![1.0])], &CheckOptions::default()).unwrap_err();
    assert!(matches!(err, CheckError::BadRule(_)), "{err}");
    let mut bad = rule;
    bad.layout.config.params = vec![Activity::Active];
    let err = check(&bad, &[Val::F64s(vec![1.0])], &CheckOptions::default()).unwrap_err();
    assert!(matches!(err, CheckError::BadRule(_)), "{err}");
}

// ---------------------------------------------------------------------------------
// scale(a, x): x[i] = a x[i]. No results; the output is x's final contents, which
// the pullback gets after the forward pass wrote it, so the forward pass saves the
// old elements on the tape.

const SCALE: &str = "
func @scale(%a: f64, %x: mut [f64]) {
entry:
    %n = len %x
    jump head
head:
    %i = phi i64 [entry: 0, body: %i1]
    %more = icmp lt %i, %n
    br %more, body, exit
body:
    %xi = load %x[%i]
    %y = fmul %a, %xi
    store %x[%i], %y
    %i1 = iadd %i, 1
    jump head
exit:
    ret
}

func @scale.fwd(%a: f64, %x: mut [f64]) {
entry:
    %n = len %x
    jump head
head:
    %i = phi i64 [entry: 0, body: %i1]
    %more = icmp lt %i, %n
    br %more, body, exit
body:
    %xi = load %x[%i]
    push %xi
    %y = fmul %a, %xi
    store %x[%i], %y
    %i1 = iadd %i, 1
    jump head
exit:
    push %a
    ret
}

; da = sum_i old_x[i] dx[i]; dx[i] = a dx[i]
func @scale.rvs(%x: mut [f64], %dx: mut [f64]) -> f64 {
entry:
    %a = pop f64
    %n = len %x
    jump head
head:
    %i = phi i64 [entry: %n, body: %i1]
    %da = phi f64 [entry: 0.0, body: %da1]
    %more = icmp gt %i, 0
    br %more, body, exit
body:
    %i1 = isub %i, 1
    %xi = pop f64
    %dxi = load %dx[%i1]
    %t = fmul %xi, %dxi
    %da1 = fadd %da, %t
    %ndx = fmul %a, %dxi
    store %dx[%i1], %ndx
    jump head
exit:
    ret %da
}
";

fn scale_args() -> [Val; 2] {
    [Val::F64(1.7), Val::F64s(vec![0.5, -0.25, 2.0, 0.125])]
}

#[test]
fn scale_passes() {
    let rule = hand_rule(SCALE, "scale", default_config(SCALE, "scale"));
    let report = check(&rule, &scale_args(), &CheckOptions::default()).unwrap();
    assert!(report.primal.is_empty());
    // Nothing is seeded (no results, shadows at zero): every cotangent is 0.
    assert_eq!(report.coords.len(), 5);
    assert_eq!(
        report.coords[0],
        Coord {
            param: 0,
            index: None
        }
    );
    assert_eq!(report.gradient, [0.0; 5]);
    assert!(report.dot.iter().all(|&(a, b)| a != 0.0 && close(a, b)));
}

#[test]
fn a_pullback_reading_the_written_slice_is_caught() {
    // Uses x as the forward pass left it (a x) instead of the saved old x.
    let rule = hand_rule(
        &SCALE.replace(
            "%xi = pop f64\n",
            "%saved = pop f64\n    %xi = load %x[%i1]\n",
        ),
        "scale",
        default_config(SCALE, "scale"),
    );
    let err = check(&rule, &scale_args(), &CheckOptions::default()).unwrap_err();
    assert!(matches!(err, CheckError::DotProduct { .. }), "{err}");
}

#[test]
fn a_pullback_that_does_not_pop_is_caught() {
    // Right values (old x = x / a), but the saved elements stay on the tape.
    let rule = hand_rule(
        &SCALE.replace(
            "%xi = pop f64\n",
            "%xn = load %x[%i1]\n    %xi = fdiv %xn, %a\n",
        ),
        "scale",
        default_config(SCALE, "scale"),
    );
    let err = check(&rule, &scale_args(), &CheckOptions::default()).unwrap_err();
    assert!(
        matches!(
            err,
            CheckError::Tape {
                before: 0,
                after: 4
            }
        ),
        "{err}"
    );
}

#[test]
fn a_forward_pass_that_leaves_other_contents_is_caught_unless_dupnoneed() {
    // The forward pass saves what the pullback needs, but writes garbage into x.
    let at = SCALE.find("@scale.fwd").unwrap();
    let (head, tail) = SCALE.split_at(at);
    let text = format!(
        "{head}{}",
        tail.replacen("store %x[%i], %y", "store %x[%i], 0.0", 1)
    );
    let rule = hand_rule(&text, "scale", default_config(SCALE, "scale"));
    let err = check(&rule, &scale_args(), &CheckOptions::default()).unwrap_err();
    assert!(
        matches!(err, CheckError::Contents { param: 1, .. }),
        "{err}"
    );

    let config =
        default_config(SCALE, "scale").with_params([Activity::Active, Activity::DupNoNeed]);
    let rule = hand_rule(&text, "scale", config);
    check(&rule, &scale_args(), &CheckOptions::default()).unwrap();
}

// ---------------------------------------------------------------------------------
// A scalar and a slice, integer parameters passed through, three results of which
// two are floats:
//     s = sum_i x_i w_i, q = sum_i x_i^2, log[0] = k
//     (a s, k + n, sin a + k q)

const TWO: &str = "
func @two(%a: f64, %x: [f64], %k: i64, %w: [i64], %log: mut [i64]) -> (f64, i64, f64) {
entry:
    %n = len %x
    jump head
head:
    %i = phi i64 [entry: 0, body: %i1]
    %s = phi f64 [entry: 0.0, body: %s1]
    %q = phi f64 [entry: 0.0, body: %q1]
    %more = icmp lt %i, %n
    br %more, body, exit
body:
    %xi = load %x[%i]
    %wi = load %w[%i]
    %wf = cast f64 %wi
    %xw = fmul %xi, %wf
    %s1 = fadd %s, %xw
    %sq = fmul %xi, %xi
    %q1 = fadd %q, %sq
    %i1 = iadd %i, 1
    jump head
exit:
    store %log[0], %k
    %r0 = fmul %a, %s
    %r1 = iadd %k, %n
    %kf = cast f64 %k
    %sa = sin %a
    %kq = fmul %kf, %q
    %r2 = fadd %sa, %kq
    ret %r0, %r1, %r2
}

func @two.fwd(%a: f64, %x: [f64], %k: i64, %w: [i64], %log: mut [i64]) -> (f64, i64, f64) {
entry:
    %n = len %x
    jump head
head:
    %i = phi i64 [entry: 0, body: %i1]
    %s = phi f64 [entry: 0.0, body: %s1]
    %q = phi f64 [entry: 0.0, body: %q1]
    %more = icmp lt %i, %n
    br %more, body, exit
body:
    %xi = load %x[%i]
    %wi = load %w[%i]
    %wf = cast f64 %wi
    %xw = fmul %xi, %wf
    %s1 = fadd %s, %xw
    %sq = fmul %xi, %xi
    %q1 = fadd %q, %sq
    %i1 = iadd %i, 1
    push %wf
    jump head
exit:
    store %log[0], %k
    %r0 = fmul %a, %s
    %r1 = iadd %k, %n
    %kf = cast f64 %k
    %sa = sin %a
    %kq = fmul %kf, %q
    %r2 = fadd %sa, %kq
    push %a
    push %s
    push %kf
    ret %r0, %r1, %r2
}

; da = s d0 + cos(a) d2; dx[i] += a w[i] d0 + 2 k x[i] d2, for i from n - 1 down
; (the forward pass pushed w[i] as a float in each iteration: the pullback gets the
; dup slices only)
func @two.rvs(%x: [f64], %dx: mut [f64], %d0: f64, %d2: f64) -> f64 {
entry:
    %kf = pop f64
    %s = pop f64
    %a = pop f64
    %ca = cos %a
    %t0 = fmul %s, %d0
    %t2 = fmul %ca, %d2
    %da = fadd %t0, %t2
    %ad0 = fmul %a, %d0
    %k2 = fmul 2.0, %kf
    %k2d = fmul %k2, %d2
    %n = len %x
    jump head
head:
    %i = phi i64 [entry: %n, body: %i1]
    %more = icmp gt %i, 0
    br %more, body, exit
body:
    %i1 = isub %i, 1
    %wf = pop f64
    %xi = load %x[%i1]
    %g0 = fmul %ad0, %wf
    %g2 = fmul %k2d, %xi
    %g = fadd %g0, %g2
    %old = load %dx[%i1]
    %new = fadd %old, %g
    store %dx[%i1], %new
    jump head
exit:
    ret %da
}
";

fn two_args() -> Vec<Val> {
    vec![
        Val::F64(0.8),
        Val::F64s(vec![0.5, -1.5, 0.25]),
        Val::I64(3),
        Val::I64s(vec![2, -1, 4]),
        Val::I64s(vec![0, 9]),
    ]
}

#[test]
fn scalars_and_slices_with_several_results_pass() {
    let rule = hand_rule(TWO, "two", default_config(TWO, "two"));
    assert_eq!(
        rule.layout.config.params,
        [
            Activity::Active,
            Activity::Dup,
            Activity::Const,
            Activity::Const,
            Activity::Const
        ]
    );
    let report = check(&rule, &two_args(), &CheckOptions::default()).unwrap();
    let (a, x, k, w) = (0.8f64, [0.5, -1.5, 0.25], 3.0, [2.0, -1.0, 4.0]);
    let s: f64 = x.iter().zip(&w).map(|(p, q)| p * q).sum();
    let q: f64 = x.iter().map(|p| p * p).sum();
    assert_eq!(
        report.primal,
        [Val::F64(a * s), Val::I64(6), Val::F64(a.sin() + k * q)]
    );
    assert_eq!(report.coords.len(), 4);
    assert!(close(report.gradient[0], s + a.cos()));
    for i in 0..3 {
        assert_eq!(
            report.coords[i + 1],
            Coord {
                param: 1,
                index: Some(i)
            }
        );
        assert!(close(report.gradient[i + 1], a * w[i] + 2.0 * k * x[i]));
    }
    assert!(report.dot.iter().all(|&(p, q)| p != 0.0 && close(p, q)));
}

#[test]
fn a_const_slice_written_otherwise_is_caught() {
    // The forward pass forgets `log[0] = k`.
    let at = TWO.find("@two.fwd").unwrap();
    let (head, tail) = TWO.split_at(at);
    let text = format!("{head}{}", tail.replacen("store %log[0], %k", "", 1));
    let rule = hand_rule(&text, "two", default_config(TWO, "two"));
    let err = check(&rule, &two_args(), &CheckOptions::default()).unwrap_err();
    assert!(
        matches!(err, CheckError::Contents { param: 4, .. }),
        "{err}"
    );
}

#[test]
fn a_wrong_scalar_cotangent_is_caught() {
    // da forgets the cos(a) d2 term.
    let rule = hand_rule(
        &TWO.replace("%da = fadd %t0, %t2", "%da = fadd %t0, 0.0"),
        "two",
        default_config(TWO, "two"),
    );
    let err = check(&rule, &two_args(), &CheckOptions::default()).unwrap_err();
    assert!(
        matches!(
            err,
            CheckError::Gradient {
                param: 0,
                index: None,
                ..
            }
        ),
        "{err}"
    );
}

// ---------------------------------------------------------------------------------
// f32: a scalar and a read-only slice with a result; a `mut` slice written in place.

const WSUM32: &str = "
func @wsum32(%a: f32, %x: [f32]) -> f32 {
entry:
    %n = len %x
    jump head
head:
    %i = phi i64 [entry: 0, body: %i1]
    %q = phi f32 [entry: 0.0, body: %q1]
    %more = icmp lt %i, %n
    br %more, body, exit
body:
    %xi = load %x[%i]
    %sq = fmul %xi, %xi
    %q1 = fadd %q, %sq
    %i1 = iadd %i, 1
    jump head
exit:
    %r = fmul %a, %q
    ret %r
}

func @wsum32.fwd(%a: f32, %x: [f32]) -> f32 {
entry:
    %n = len %x
    jump head
head:
    %i = phi i64 [entry: 0, body: %i1]
    %q = phi f32 [entry: 0.0, body: %q1]
    %more = icmp lt %i, %n
    br %more, body, exit
body:
    %xi = load %x[%i]
    %sq = fmul %xi, %xi
    %q1 = fadd %q, %sq
    %i1 = iadd %i, 1
    jump head
exit:
    %r = fmul %a, %q
    push %a
    push %q
    ret %r
}

; da = q dr; dx[i] += 2 a x[i] dr
func @wsum32.rvs(%x: [f32], %dx: mut [f32], %dr: f32) -> f32 {
entry:
    %q = pop f32
    %a = pop f32
    %da = fmul %q, %dr
    %a2 = fmul 2.0, %a
    %a2d = fmul %a2, %dr
    %n = len %x
    jump head
head:
    %i = phi i64 [entry: 0, body: %i1]
    %more = icmp lt %i, %n
    br %more, body, exit
body:
    %xi = load %x[%i]
    %g = fmul %a2d, %xi
    %old = load %dx[%i]
    %new = fadd %old, %g
    store %dx[%i], %new
    %i1 = iadd %i, 1
    jump head
exit:
    ret %da
}
";

const SQ32: &str = "
func @sq32(%x: mut [f32]) {
entry:
    %n = len %x
    jump head
head:
    %i = phi i64 [entry: 0, body: %i1]
    %more = icmp lt %i, %n
    br %more, body, exit
body:
    %xi = load %x[%i]
    %y = fmul %xi, %xi
    store %x[%i], %y
    %i1 = iadd %i, 1
    jump head
exit:
    ret
}

func @sq32.fwd(%x: mut [f32]) {
entry:
    %n = len %x
    jump head
head:
    %i = phi i64 [entry: 0, body: %i1]
    %more = icmp lt %i, %n
    br %more, body, exit
body:
    %xi = load %x[%i]
    push %xi
    %y = fmul %xi, %xi
    store %x[%i], %y
    %i1 = iadd %i, 1
    jump head
exit:
    ret
}

; dx[i] = 2 old_x[i] dx[i]
func @sq32.rvs(%x: mut [f32], %dx: mut [f32]) {
entry:
    %n = len %x
    jump head
head:
    %i = phi i64 [entry: %n, body: %i1]
    %more = icmp gt %i, 0
    br %more, body, exit
body:
    %i1 = isub %i, 1
    %xi = pop f32
    %t = fmul 2.0, %xi
    %dxi = load %dx[%i1]
    %ndx = fmul %t, %dxi
    store %dx[%i1], %ndx
    jump head
exit:
    ret
}
";

fn f32_opts(text: &str, name: &str) -> CheckOptions {
    let m: Module = parse(text).unwrap();
    let opts = CheckOptions::for_sig(m.sig(m.func_by_name(name).unwrap()));
    assert_eq!(opts, CheckOptions::f32());
    opts
}

#[test]
fn f32_slices_pass() {
    let rule = hand_rule(WSUM32, "wsum32", default_config(WSUM32, "wsum32"));
    let args = [Val::F32(1.3), Val::F32s(vec![0.5, -0.75, 1.25, 0.3])];
    let report = check(&rule, &args, &f32_opts(WSUM32, "wsum32")).unwrap();
    assert_eq!(report.coords.len(), 5);
    assert!((report.gradient[1] - 2.0 * 1.3 * 0.5).abs() < 1e-5);

    let rule = hand_rule(SQ32, "sq32", default_config(SQ32, "sq32"));
    let args = [Val::F32s(vec![0.5, -0.75, 1.25, 0.3, 2.0])];
    let report = check(&rule, &args, &f32_opts(SQ32, "sq32")).unwrap();
    assert_eq!(report.gradient, [0.0; 5]);
    assert!(report.dot.iter().all(|&(a, _)| a != 0.0));
}

#[test]
fn f32_wrong_rules_are_caught() {
    let rule = hand_rule(
        &WSUM32.replace("%a2 = fmul 2.0, %a", "%a2 = fmul 3.0, %a"),
        "wsum32",
        default_config(WSUM32, "wsum32"),
    );
    let args = [Val::F32(1.3), Val::F32s(vec![0.5, -0.75, 1.25, 0.3])];
    let err = check(&rule, &args, &f32_opts(WSUM32, "wsum32")).unwrap_err();
    assert!(
        matches!(
            err,
            CheckError::Gradient {
                param: 1,
                index: Some(0),
                ..
            }
        ),
        "{err}"
    );

    let rule = hand_rule(
        &SQ32.replace("%t = fmul 2.0, %xi", "%t = fmul 2.5, %xi"),
        "sq32",
        default_config(SQ32, "sq32"),
    );
    let args = [Val::F32s(vec![0.5, -0.75, 1.25, 0.3, 2.0])];
    let err = check(&rule, &args, &f32_opts(SQ32, "sq32")).unwrap_err();
    assert!(matches!(err, CheckError::DotProduct { .. }), "{err}");
}

// ---------------------------------------------------------------------------------
// A const return and no slices: nothing is seeded, every cotangent must be 0.

const CONST_RET: &str = "
func @p(%x: f64) -> f64 {
entry:
    %y = fmul %x, %x
    ret %y
}

func @p.fwd(%x: f64) -> f64 {
entry:
    %y = fmul %x, %x
    ret %y
}

func @p.rvs() -> f64 {
entry:
    ret 0.0
}
";

#[test]
fn a_const_return_needs_zero_cotangents() {
    let config = default_config(CONST_RET, "p").with_ret(RetActivity::Const);
    let rule = hand_rule(CONST_RET, "p", config.clone());
    let report = check(&rule, &[Val::F64(1.5)], &CheckOptions::default()).unwrap();
    assert_eq!(report.gradient, [0.0]);
    assert_eq!(report.dot, [(0.0, 0.0), (0.0, 0.0)]);

    let rule = hand_rule(&CONST_RET.replace("ret 0.0", "ret 1e-12"), "p", config);
    let err = check(&rule, &[Val::F64(1.5)], &CheckOptions::default()).unwrap_err();
    assert!(
        matches!(
            err,
            CheckError::Gradient {
                param: 0,
                index: None,
                ref estimates,
                ..
            } if estimates.is_empty()
        ),
        "{err}"
    );
}

#[test]
fn a_pullback_with_the_wrong_results_is_a_bad_rule() {
    // The pullback returns no cotangent for the active x.
    let text = CONST_RET.replace(
        "func @p.rvs() -> f64 {
entry:
    ret 0.0",
        "func @p.rvs(%dy: f64) {
entry:
    ret",
    );
    let rule = hand_rule(&text, "p", default_config(CONST_RET, "p"));
    let err = check(&rule, &[Val::F64(1.5)], &CheckOptions::default()).unwrap_err();
    assert!(matches!(err, CheckError::BadRule(_)), "{err}");
    assert!(err.to_string().contains("parameter 1"), "{err}");
}
