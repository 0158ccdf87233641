//! Object files for aarch64 Linux: every function of the reverse-mode corpora
//! (`adjoint/tests/corpus/scalars.ir`, `memory.ir`) and of `examples/ir` compiles
//! to an aarch64 ELF object, and so do the forward pass and the pullback of every
//! rule derivation gives. One function compiles for x86-64 too: the path does not
//! depend on the target. (That the code computes the right values is
//! `tests/qemu.rs`, which runs it under qemu.)

use gradlift_adjoint::{RuleConfig, build_rrule};
use gradlift_ir::{FuncId, Module, parse, verify};
use gradlift_jit::{CompileError, ObjectFile, compile_object};

const SCALARS: &str = include_str!("../../adjoint/tests/corpus/scalars.ir");
const MEMORY: &str = include_str!("../../adjoint/tests/corpus/memory.ir");

fn aarch64() -> target_lexicon::Triple {
    "aarch64-unknown-linux-gnu".parse().unwrap()
}

fn module(name: &str, text: &str) -> Module {
    let m = parse(text).unwrap_or_else(|e| panic!("{name}: {e}"));
    verify(&m).unwrap_or_else(|e| panic!("{name}: {e}"));
    m
}

/// Every corpus: (file name, module).
fn corpora() -> Vec<(String, Module)> {
    let mut out = vec![
        ("scalars.ir".to_string(), module("scalars.ir", SCALARS)),
        ("memory.ir".to_string(), module("memory.ir", MEMORY)),
    ];
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/ir");
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "ir"))
        .collect();
    files.sort();
    assert!(files.len() >= 10, "{files:?}");
    for path in files {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(&path).unwrap();
        out.push((name.clone(), module(&name, &text)));
    }
    out
}

/// ELF's `e_machine` for aarch64 and x86-64.
const EM_AARCH64: u16 = 183;
const EM_X86_64: u16 = 62;

/// Checks that `obj` is a relocatable 64-bit little-endian ELF file for `machine`
/// that defines the trampoline of every function in `funcs`.
fn check_object(obj: &ObjectFile, machine: u16, funcs: &[FuncId], what: &str) {
    let b = &obj.bytes;
    assert!(b.len() > 64, "{what}: {} bytes", b.len());
    assert_eq!(&b[..4], b"\x7fELF", "{what}");
    assert_eq!((b[4], b[5]), (2, 1), "{what}: not ELF64 little-endian");
    assert_eq!(u16::from_le_bytes([b[16], b[17]]), 1, "{what}: not ET_REL");
    assert_eq!(u16::from_le_bytes([b[18], b[19]]), machine, "{what}");
    for &f in funcs {
        let sym = format!("gradlift_entry{}", f.as_u32());
        assert!(
            obj.entries.iter().any(|(g, s)| *g == f && *s == sym),
            "{what}: no entry {sym} in {:?}",
            obj.entries
        );
        let mut needle = sym.into_bytes();
        needle.push(0);
        assert!(
            b.windows(needle.len()).any(|w| w == needle),
            "{what}: the symbol table lacks the entry"
        );
    }
    for name in &obj.imports {
        assert!(name.starts_with("gradlift_"), "{what}: imports {name}");
    }
}

#[derive(Default, Debug)]
struct Count {
    primals: usize,
    rules: usize,
    refused_by_derivation: Vec<String>,
}

#[test]
fn every_corpus_function_and_its_rule_compile_for_aarch64() {
    let mut count = Count::default();
    for (file, m) in corpora() {
        for (f, _) in m.defined() {
            let what = format!("{file}: @{}", m.name(f));
            match compile_object(&m, &[f], aarch64()) {
                Ok(obj) => {
                    check_object(&obj, EM_AARCH64, &[f], &what);
                    count.primals += 1;
                }
                Err(e) => panic!("{what}: the primal does not compile: {e}"),
            }

            let config = RuleConfig::default_for(m.sig(f));
            let rule = match build_rrule(&m, f, &config) {
                Ok(rule) => rule,
                Err(e) => {
                    count.refused_by_derivation.push(format!("{what}: {e}"));
                    continue;
                }
            };
            let roots = [rule.forward, rule.pullback];
            match compile_object(&rule.module, &roots, aarch64()) {
                Ok(obj) => {
                    check_object(&obj, EM_AARCH64, &roots, &format!("{what} (rule)"));
                    count.rules += 1;
                }
                Err(e) => panic!("{what}: the rule does not compile: {e}"),
            }
        }
    }
    eprintln!(
        "{} primals and {} rules compiled for aarch64; {} functions refused by \
         derivation (by design):",
        count.primals,
        count.rules,
        count.refused_by_derivation.len()
    );
    for r in &count.refused_by_derivation {
        eprintln!("  {r}");
    }
    assert!(count.primals >= 120, "{count:?}");
    assert!(count.rules >= 120, "too few rules derived: {count:?}");
    // The one refusal: @wave of decls.ir calls an extern without a derivative.
    assert!(count.refused_by_derivation.len() <= 2, "{count:?}");
}

#[test]
fn the_same_path_emits_x86_64() {
    let m = module(
        "rosenbrock",
        include_str!("../../examples/ir/rosenbrock.ir"),
    );
    let f = m.func_by_name("rosenbrock").unwrap();
    let triple = "x86_64-unknown-linux-gnu".parse().unwrap();
    let obj = compile_object(&m, &[f], triple).unwrap();
    check_object(&obj, EM_X86_64, &[f], "x86-64 rosenbrock");
    let arm = compile_object(&m, &[f], aarch64()).unwrap();
    assert_ne!(obj.bytes, arm.bytes);
}

#[test]
fn unsupported_targets_and_bad_roots_are_errors() {
    let m = module(
        "rosenbrock",
        include_str!("../../examples/ir/rosenbrock.ir"),
    );
    let f = m.func_by_name("rosenbrock").unwrap();
    for t in [
        "riscv64gc-unknown-linux-gnu",
        "aarch64-apple-darwin",
        "i686-unknown-linux-gnu",
    ] {
        let e = compile_object(&m, &[f], t.parse().unwrap()).unwrap_err();
        assert!(
            matches!(e, CompileError::Codegen { .. }) && e.to_string().contains(t),
            "{t}: {e}"
        );
    }
    let missing = gradlift_ir::FuncId::from_u32(99);
    let e = compile_object(&m, &[missing], aarch64()).unwrap_err();
    assert!(matches!(e, CompileError::NotDefined(_)), "{e}");
}

#[test]
fn fma_is_an_instruction_on_aarch64_and_a_libcall_on_baseline_x86_64() {
    let m = module(
        "fma",
        "func @f(%a: f64, %b: f64, %c: f64, %s: f32) -> (f64, f32) {
        entry:
            %r = fma %a, %b, %c
            %t = atan2 %r, %a
            %u = fma %s, %s, 1.0
            ret %t, %u
        }",
    );
    let f = m.func_by_name("f").unwrap();
    // A symbol named `name` in the object's string table.
    let names = |obj: &ObjectFile, name: &str| {
        let needle = format!("\0{name}\0").into_bytes();
        obj.bytes.windows(needle.len()).any(|w| w == needle)
    };
    // aarch64 has fmadd: only the helper of atan2 is called.
    let arm = compile_object(&m, &[f], aarch64()).unwrap();
    check_object(&arm, EM_AARCH64, &[f], "aarch64 fma");
    assert_eq!(arm.imports, ["gradlift_atan2_f64"]);
    assert!(names(&arm, "gradlift_atan2_f64"));
    assert!(!names(&arm, "fma") && !names(&arm, "fmaf"));
    // Baseline x86-64 has no FMA extension: Cranelift calls the C library's `fma`
    // and `fmaf` (libcalls, which `imports` does not list).
    let x86 = compile_object(&m, &[f], "x86_64-unknown-linux-gnu".parse().unwrap()).unwrap();
    check_object(&x86, EM_X86_64, &[f], "x86-64 fma");
    assert_eq!(x86.imports, ["gradlift_atan2_f64"]);
    assert!(names(&x86, "fma") && names(&x86, "fmaf"));
}
