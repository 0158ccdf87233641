//! Every example program round-trips through the text format.
//!
//! For each `examples/ir/*.ir`: it parses and verifies, its print parses and verifies
//! again, and printing that gives the same text (`print(parse(text))` is a fixed
//! point, as Cranelift's `test cat`). Each file also opens with `;` comment lines
//! saying what it computes. The examples of `docs/ir-extensions.md` do the same, and
//! run.

use std::path::Path;

use gradlift::ir::interp::{ErrorKind, Interpreter, Val};
use gradlift::ir::{parse, verify};

#[test]
fn every_example_is_a_fixed_point_of_print_and_parse() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/ir");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("examples/ir exists")
        .map(|e| e.expect("a directory entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "ir"))
        .collect();
    files.sort();
    // The seven suite programs and eight feature examples at least.
    assert!(files.len() >= 15, "{files:?}");

    for path in &files {
        let name = path.display();
        let text = std::fs::read_to_string(path).expect("readable");
        assert!(text.starts_with(';'), "{name} does not open with a comment");

        let first = parse(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
        verify(&first).unwrap_or_else(|e| panic!("{name}: {e}"));
        let printed = first.to_string();
        assert!(printed.contains("func @"), "{name} printed as {printed:?}");

        let second = parse(&printed).unwrap_or_else(|e| panic!("{name} printed:\n{printed}\n{e}"));
        verify(&second).unwrap_or_else(|e| panic!("{name} printed:\n{printed}\n{e}"));
        assert_eq!(
            second.funcs.len(),
            first.funcs.len(),
            "{name}: the print lost functions"
        );
        assert_eq!(
            second.decls.len(),
            first.decls.len(),
            "{name}: the print lost declarations"
        );
        assert_eq!(
            second.to_string(),
            printed,
            "{name}: print(parse(print)) differs"
        );
    }
}

#[test]
fn the_example_of_the_ir_extensions_round_trips_and_runs() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/ir-extensions.md");
    let doc = std::fs::read_to_string(path).expect("readable");
    let text = doc
        .split("```\n")
        .nth(1)
        .expect("docs/ir-extensions.md has a fenced example");
    let m = parse(text).unwrap_or_else(|e| panic!("{e}"));
    verify(&m).unwrap_or_else(|e| panic!("{e}"));
    let printed = m.to_string();
    assert_eq!(parse(&printed).unwrap().to_string(), printed);

    // fwd(x, k) = k x[0]^2; rvs(dy) = x[0]^2 dy, from the tape buffer.
    let (x0, k, dy) = (3.0, 2.0, 1.5);
    let mut interp = Interpreter::new(&m);
    let y = interp
        .call_by_name("fwd", &mut [Val::F64s(vec![x0]), Val::F64(k)])
        .unwrap();
    assert_eq!(y, [Val::F64(k * x0 * x0)]);
    let dk = interp.call_by_name("rvs", &mut [Val::F64(dy)]).unwrap();
    assert_eq!(dk, [Val::F64(x0 * x0 * dy)]);
    let tape = interp.tape();
    assert_eq!((tape.scalars, tape.buffers), (0, 1));
}

#[test]
fn the_trap_if_example_of_the_ir_extensions_round_trips_and_traps() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/ir-extensions.md");
    let doc = std::fs::read_to_string(path).expect("readable");
    let text = doc
        .split("```\n")
        .nth(3)
        .expect("docs/ir-extensions.md has a second fenced example");
    assert!(text.contains("trap_if"), "{text}");
    let m = parse(text).unwrap_or_else(|e| panic!("{e}"));
    verify(&m).unwrap_or_else(|e| panic!("{e}"));
    let printed = m.to_string();
    assert_eq!(printed, text);

    let mut interp = Interpreter::new(&m);
    let mut args = [Val::F64s(vec![2.5, 1.0]), Val::F64s(vec![0.0, 0.0])];
    assert_eq!(
        interp.call_by_name("f.fwd", &mut args).unwrap(),
        [Val::F64(2.5)]
    );
    let mut args = [Val::F64s(vec![2.5, 1.0]), Val::F64s(vec![0.0])];
    let e = interp.call_by_name("f.fwd", &mut args).unwrap_err();
    let message = "shadow of %x has another length than %x";
    assert_eq!(e.kind, ErrorKind::Trap(message.to_string()));
    assert_eq!(
        e.to_string(),
        format!("in @f.fwd, trap_if at 6:5: trap: {message}")
    );
}
