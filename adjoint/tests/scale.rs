//! Long functions: the derivation stays linear in the size of the function.
//!
//! A loop around a chain of `k` diamonds, each joining at a phi. Cotangents are
//! builder variables; were each looked up from the pullback's entry, the pullback
//! would get phis in proportion to values × blocks. It must get a constant number
//! per diamond, and still agree with forward mode.

mod support;

use gradlift_adjoint::{RuleConfig, build_rrule};
use gradlift_ir::interp::{Interpreter, Val};
use gradlift_ir::{Scalar, parse};
use support::{Tan, jvp};

/// `k` diamonds in a loop run `n` times: `v = v > 0.5 ? sin v : v x + 0.3`.
fn chain(k: usize) -> String {
    let mut t = format!(
        "func @f(%x: f64, %n: i64) -> f64 {{
entry:
    jump head
head:
    %i = phi i64 [entry: 0, d{k}: %i1]
    %acc = phi f64 [entry: %x, d{k}: %v{k}]
    %more = icmp lt %i, %n
    br %more, d0, exit
d0:
    %v0 = fadd %acc, 0.0
    jump c1
"
    );
    for j in 1..=k {
        let p = j - 1;
        t += &format!(
            "c{j}:
    %c{j} = fcmp gt %v{p}, 0.5
    br %c{j}, a{j}, b{j}
a{j}:
    %a{j} = sin %v{p}
    jump d{j}
b{j}:
    %m{j} = fmul %v{p}, %x
    %b{j} = fadd %m{j}, 0.3
    jump d{j}
d{j}:
    %v{j} = phi f64 [a{j}: %a{j}, b{j}: %b{j}]
"
        );
        if j < k {
            t += &format!("    jump c{}\n", j + 1);
        } else {
            t += "    %i1 = iadd %i, 1\n    jump head\n";
        }
    }
    t + "exit:\n    ret %acc\n}\n"
}

#[test]
fn a_long_chain_of_diamonds_gets_a_linear_pullback() {
    for k in [50, 400] {
        let m = parse(&chain(k)).unwrap();
        let id = m.func_by_name("f").unwrap();
        let rule = build_rrule(&m, id, &RuleConfig::default_for(m.sig(id))).unwrap();
        let rvs = rule.module.function(rule.pullback).unwrap();
        let phis: usize = rvs.layout.iter().map(|&b| rvs.blocks[b].phis.len()).sum();
        assert!(phis <= 2 * k + 8, "k = {k}: {phis} phis");

        let (x, n) = (0.7, 3);
        let mut engine = Interpreter::new(&rule.module);
        engine
            .call(rule.forward, &mut [Val::F64(x), Val::I64(n)])
            .unwrap();
        let dx = engine.call(rule.pullback, &mut [Val::F64(1.0)]).unwrap();
        assert_eq!(engine.tape().scalars, 0);
        let fwd = jvp(
            &m,
            id,
            &[
                Tan {
                    val: Scalar::F64(x),
                    dot: 1.0,
                },
                Tan {
                    val: Scalar::I64(n),
                    dot: 0.0,
                },
            ],
        );
        let Val::F64(rev) = dx[0] else { panic!() };
        assert!(
            (rev - fwd[0].dot).abs() <= 1e-9 * rev.abs().max(1.0),
            "k = {k}: {rev} vs {}",
            fwd[0].dot
        );
    }
}
