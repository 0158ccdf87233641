//! Every example program round-trips through the text format.
//!
//! For each `examples/ir/*.ir`: it parses and verifies, its print parses and verifies
//! again, and printing that gives the same text (`print(parse(text))` is a fixed
//! point, as Cranelift's `test cat`). Each file also opens with `;` comment lines
//! saying what it computes.

use std::path::Path;

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
