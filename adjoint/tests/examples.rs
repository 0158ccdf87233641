//! Every function of `examples/ir/*.ir` under its default activities: derived (then
//! the rule verifies, round-trips, and passes `check_rule` at a point, unless it
//! calls a host function). Never a panic.

use gradlift_adjoint::{AdError, CheckOptions, RuleConfig, build_rrule, check_derived};
use gradlift_ir::interp::Val;
use gradlift_ir::{Opcode, Type, parse, verify};

#[test]
fn every_example_function_derives_or_is_refused_clearly() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/ir");
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "ir"))
        .collect();
    files.sort();
    assert!(files.len() >= 10);
    let (mut derived, mut lazy, mut tape_rules) = (0, 0, 0);
    for path in files {
        let text = std::fs::read_to_string(&path).unwrap();
        let m = parse(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        verify(&m).unwrap();
        for (id, decl) in m.funcs.iter() {
            if decl.function().is_none() {
                continue;
            }
            let config = RuleConfig::default_for(&decl.sig);
            match build_rrule(&m, id, &config) {
                Ok(rule) => {
                    derived += 1;
                    let out = rule.module.to_string();
                    assert_eq!(parse(&out).unwrap().to_string(), out, "@{}", decl.name);
                    // A point away from kinks: distinct floats in (0, 1), 3 for
                    // integers, false for bools.
                    const FLOATS: [f64; 4] = [0.37, 0.11, 0.83, 0.59];
                    let args: Vec<Val> = decl
                        .sig
                        .params
                        .iter()
                        .enumerate()
                        .map(|(k, t)| match t {
                            Type::F64 => Val::F64(FLOATS[k % 4]),
                            Type::F32 => Val::F32(FLOATS[k % 4] as f32),
                            Type::I64 => Val::I64(3),
                            _ => Val::Bool(false),
                        })
                        .collect();
                    // `bitcast` has zero derivative by convention, which finite
                    // differences do not follow (the magic guess of fast_inv_sqrt).
                    let body = decl.function().unwrap();
                    if decl.sig.params.iter().any(|t| t.is_slice()) {
                        // Derived and round-tripped above; the suite programs are
                        // checked with slice inputs by tests/corpus_memory.rs.
                        continue;
                    }
                    if body
                        .placed_insts()
                        .any(|(_, i)| body.insts[i].opcode == Opcode::Bitcast)
                    {
                        continue;
                    }
                    if body.placed_insts().any(|(_, i)| {
                        matches!(body.insts[i].imm, gradlift_ir::Imm::Func(g) if m.funcs[g].function().is_none())
                    }) {
                        // Calls a host function (@wave: no derivative, so its rule
                        // fails when it runs; tests/lazy.rs runs it).
                        lazy += 1;
                        continue;
                    }
                    let opts = CheckOptions::for_sig(&decl.sig);
                    if let Err(e) = check_derived(&m, &rule, &args, &opts) {
                        panic!("@{} at {args:?}: {e}", decl.name);
                    }
                }
                // The rules of a `vjp` pair use tape ops, which are never
                // differentiated themselves.
                Err(e @ AdError::Unsupported { .. })
                    if e.to_string()
                        .contains("tape ops appear only in derived code") =>
                {
                    tape_rules += 1;
                }
                Err(e) => panic!("@{}: unexpected {e}", decl.name),
            }
        }
    }
    // Every function derives; @wave's call of a host function without a
    // derivative only fails if it runs.
    assert!(
        derived >= 30 && lazy >= 1 && tape_rules == 2,
        "{derived} derived, {lazy} calling host functions, {tape_rules} rules with tape ops"
    );
}
