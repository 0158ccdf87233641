//! gradlift: reverse-mode automatic differentiation for Rust, by program transformation.
//!
//! Programs are built, traced or parsed into gradlift's SSA IR ([`ir`]); later stages
//! derive forward passes and pullbacks from that IR and compile them with Cranelift.
//! Today the IR, its text format, verifier and reference interpreter are in place.

pub use gradlift_ir as ir;
