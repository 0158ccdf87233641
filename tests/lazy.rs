//! Lazy derivation: a call whose callee cannot be differentiated (an `extern`
//! without a derivative, a callee the derivation refuses) does not stop its
//! caller from being derived. The gradient runs while the call is not reached,
//! and fails with the derivation's message, naming the call and its position,
//! when it is; the interpreter and the JIT agree on both.

#[path = "common/bits.rs"]
mod bits;

use bits::bits;
use gradlift::adjoint::{RuleConfig, Seeds, value_and_gradient};
use gradlift::ir::interp::{Interpreter, Val};
use gradlift::ir::parse;
use gradlift::{CompiledGradient, Error, Hosts, Workspace};

const WAVE: &str = "
extern @host_sin(f64) -> f64

; x^2 for k <= 0, host_sin(x) x otherwise
func @wave(%x: f64, %k: i64) -> f64 {
entry:
    %far = icmp gt %k, 0
    br %far, call_host, square
call_host:
    %s = call @host_sin(%x)
    %sx = fmul %s, %x
    jump done
square:
    %q = fmul %x, %x
    jump done
done:
    %r = phi f64 [call_host: %sx, square: %q]
    ret %r
}
";

fn hosts() -> Hosts {
    Hosts::new().bind("host_sin", |a: &mut [Val]| match a {
        [Val::F64(x)] => Ok(vec![Val::F64(x.sin())]),
        _ => Err("host_sin takes one f64".into()),
    })
}

/// The gradient on the JIT and on the interpreter (the same rule), as results
/// or error messages, which must agree.
fn both(text: &str, name: &str, args: &[Val]) -> Result<Vec<Option<Val>>, String> {
    let m = parse(text).unwrap();
    let id = m.func_by_name(name).unwrap();
    let config = RuleConfig::default_for(m.sig(id));
    let grad = CompiledGradient::with_config(&m, name, &config, &hosts())
        .unwrap_or_else(|e| panic!("@{name} must derive lazily: {e}"));
    let jit = grad.value_and_gradient(&mut Workspace::new(), args);
    let hosts = hosts();
    let mut interp = Interpreter::new(&grad.rule().module).with_hosts(&hosts);
    let want = value_and_gradient(&mut interp, grad.rule(), args, &Seeds::default());
    match (jit, want) {
        (Ok(j), Ok(i)) => {
            for (a, b) in j.gradient.iter().zip(&i.gradient) {
                assert_eq!(a.as_ref().map(bits), b.as_ref().map(bits));
            }
            Ok(j.gradient)
        }
        (Err(Error::Run(j)), Err(i)) => {
            let i = i.to_string();
            let j = j.to_string();
            assert!(
                i.ends_with(&j) || i.contains(&j),
                "interpreter `{i}`, JIT `{j}`"
            );
            Err(j)
        }
        (j, i) => panic!("JIT {j:?}, interpreter {i:?}"),
    }
}

#[test]
fn an_untaken_call_without_a_derivative_costs_nothing() {
    let g = both(WAVE, "wave", &[Val::F64(1.5), Val::I64(0)]).unwrap();
    assert_eq!(g[0], Some(Val::F64(3.0)));
    assert_eq!(g[1], None);
}

#[test]
fn taking_it_fails_with_the_derivation_message_naming_the_call() {
    let e = both(WAVE, "wave", &[Val::F64(1.5), Val::I64(2)]).unwrap_err();
    assert!(
        e.contains(
            "@wave: `%s = call @host_sin(%x)` at 10:5 needs the derivative of @host_sin, which has none: declare `vjp @host_sin = @RULE`"
        ),
        "{e}"
    );
    // Exactly the message derivation gave when it refused the whole function.
    assert!(
        e.contains("or `nodiff @host_sin` if its results are constants"),
        "{e}"
    );
}

/// A callee the derivation refuses (an overlaid function that writes a slice
/// cannot be called twice): the same.
#[test]
fn a_callee_the_derivation_refuses_fails_only_when_called() {
    let text = "
        func @bump(%s: mut [f64], %x: f64) -> f64 {
        entry:
            %v = load %s[0]
            %w = fadd %v, %x
            store %s[0], %w
            ret %w
        }
        func @bump_smooth(%s: mut [f64], %x: f64) -> f64 {
        entry:
            %v = load %s[0]
            %w = fadd %v, %x
            store %s[0], %w
            ret %w
        }
        overlay @bump = @bump_smooth

        func @f(%x: f64, %k: i64) -> f64 {
        entry:
            %buf = alloc f64, 1
            %far = icmp gt %k, 0
            br %far, far, near
        far:
            %b = call @bump(%buf, %x)
            jump done
        near:
            %c = fmul %x, 3.0
            jump done
        done:
            %r = phi f64 [far: %b, near: %c]
            ret %r
        }
    ";
    let g = both(text, "f", &[Val::F64(0.5), Val::I64(-1)]).unwrap();
    assert_eq!(g[0], Some(Val::F64(3.0)));
    let e = both(text, "f", &[Val::F64(0.5), Val::I64(1)]).unwrap_err();
    assert!(
        e.contains("`%b = call @bump(%buf, %x)` at 24:13: the derivative of @bump is overlaid, and it writes into a slice"),
        "{e}"
    );
}

/// Deeper: the callee itself calls the extern in a branch it takes; the rule of
/// the callee fails, its caller's gradient with it, and a recursion through the
/// lazily derived callee is fine.
#[test]
fn a_failing_call_inside_a_callee() {
    let text = format!(
        "{WAVE}
        func @twice(%x: f64, %k: i64) -> f64 {{
        entry:
            %a = call @wave(%x, %k)
            %k1 = isub %k, 1
            %b = call @wave(%a, %k1)
            ret %b
        }}"
    );
    // k = 0: both calls take the square: (x^2)^2, derivative 4 x^3.
    let g = both(&text, "twice", &[Val::F64(1.5), Val::I64(0)]).unwrap();
    assert_eq!(g[0], Some(Val::F64(4.0 * 1.5f64.powi(3))));
    // k = 1: the first call reaches the extern.
    let e = both(&text, "twice", &[Val::F64(1.5), Val::I64(1)]).unwrap_err();
    assert!(e.contains("needs the derivative of @host_sin"), "{e}");
}

/// Forward mode and Hessian-vector products derive such calls lazily too: the
/// untaken branch costs nothing, the taken one fails with the derivation's
/// message (forward mode's: no `jvp`), the interpreter and the JIT alike.
#[test]
fn forward_mode_and_hvps_fail_only_when_the_call_runs() {
    use gradlift::adjoint::{FruleConfig, build_frule, hvp_vals, jvp_vals};
    use gradlift::{CompiledHvp, CompiledJvp};
    let m = parse(WAVE).unwrap();
    let id = m.func_by_name("wave").unwrap();
    let hosts = hosts();
    let fconfig = FruleConfig::default_for(m.sig(id));
    let jvp = CompiledJvp::with_config(&m, "wave", &fconfig, &hosts).unwrap();
    let frule = build_frule(&m, id, &fconfig).unwrap();
    let rconfig = RuleConfig::default_for(m.sig(id));
    let hvp = CompiledHvp::with_config(&m, "wave", &rconfig, 1, &hosts).unwrap();
    let tangents = [Some(Val::F64(1.0)), None];
    // Not taken: d/dx x^2 = 2x, d2/dx2 = 2.
    let args = [Val::F64(1.5), Val::I64(0)];
    let j = jvp.jvp(&mut Workspace::new(), &args, &tangents).unwrap();
    let ji = jvp_vals(
        &mut Interpreter::new(&frule.module).with_hosts(&hosts),
        &frule,
        &args,
        &tangents,
    )
    .unwrap();
    assert_eq!(j.tangents, [Val::F64(3.0)]);
    assert_eq!(j.tangents, ji.tangents);
    let h = hvp.hvp(&mut Workspace::new(), &args, &tangents).unwrap();
    let hi = hvp_vals(
        &mut Interpreter::new(&hvp.rule().module).with_hosts(&hosts),
        hvp.rule(),
        &args,
        &tangents,
    )
    .unwrap();
    assert_eq!(h.hvp, [Some(Val::F64(2.0)), None]);
    assert_eq!(h.hvp, hi.hvp);
    // Taken.
    let args = [Val::F64(1.5), Val::I64(1)];
    let e = jvp
        .jvp(&mut Workspace::new(), &args, &tangents)
        .unwrap_err()
        .to_string();
    let ei = jvp_vals(
        &mut Interpreter::new(&frule.module).with_hosts(&hosts),
        &frule,
        &args,
        &tangents,
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("`%s = call @host_sin(%x)` at 10:5 needs the forward derivative of @host_sin, which has none"),
        "{e}"
    );
    // The interpreter's error wraps the same run-time error.
    assert!(ei.contains(&e), "interpreter `{ei}`, JIT `{e}`");
    let e = hvp
        .hvp(&mut Workspace::new(), &args, &tangents)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("needs the derivative of @host_sin, which has none"),
        "{e}"
    );
}
