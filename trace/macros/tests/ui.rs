//! The macro's compile errors: each `tests/ui/*.rs` must fail to compile with the
//! message and span in its `.stderr` (regenerate with `TRYBUILD=overwrite`).

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/*.rs");
}
