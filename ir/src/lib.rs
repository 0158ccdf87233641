//! gradlift's SSA IR: the data model every other part of gradlift reads and writes.
//!
//! A [`Module`] holds named functions. A defined [`Function`] is blocks of phis,
//! instructions and one terminator, over SSA values; blocks, values and instructions
//! are typed IDs in arenas ([`Block`], [`Value`], [`Inst`]), so passes insert and
//! remove statements without renumbering anything. The crate has:
//!
//! - the data model ([`Module`], [`Function`], [`ops`] — the op table, [`types`]);
//! - a [`builder`] for making functions from Rust, with mutable variables turned
//!   into SSA as it goes ([`ssa`]);
//! - the text format: a [parser](parse()) and a printer (`Display` on [`Module`]),
//!   with `print(parse(text))` a fixed point;
//! - a [verifier](verify()) that reports every error it finds, never panicking;
//! - a reference [interpreter](interp), the oracle for every other engine;
//! - analyses, computed once and never updated: the [control-flow graph](flowgraph),
//!   [dominators], natural [loops], [strongly connected components](scc) and the
//!   [call graph](callgraph);
//! - [Graphviz](dot) of control-flow graphs, for looking at functions;
//! - an [optimiser](opt) (folding, DCE, CSE, CFG simplification, inlining, LICM).
//!
//! It knows nothing about derivatives or Cranelift.
//!
//! ```
//! use gradlift_ir::{interp::{Interpreter, Val}, parse, verify};
//!
//! let module = parse("
//!     func @f(%x: f64, %y: f64) -> f64 {
//!     entry:
//!         %xx = fmul %x, %x
//!         %y3 = fmul 3.0, %y
//!         %r = fadd %xx, %y3
//!         ret %r
//!     }
//! ").unwrap();
//! verify(&module).unwrap();
//! let f = module.func_by_name("f").unwrap();
//! let out = Interpreter::new(&module).call(f, &mut [Val::F64(2.0), Val::F64(1.0)]).unwrap();
//! assert_eq!(out, [Val::F64(7.0)]);
//! ```

// The README's examples run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

pub mod builder;
pub mod callgraph;
pub mod dominators;
pub mod dot;
pub mod engine;
pub mod entities;

/// The cranelift-entity items that gradlift-ir's public types are made of,
/// re-exported so that a user can name them without depending on cranelift-entity
/// (and on the right version of it): the arenas and side tables of a [`Function`]
/// and a [`Module`] ([`PrimaryMap`](entity::PrimaryMap),
/// [`SecondaryMap`](entity::SecondaryMap)), and [`EntityRef`](entity::EntityRef),
/// the trait of every ID, which makes an ID from its index and back.
///
/// ```
/// use gradlift_ir::entity::{EntityRef, PrimaryMap, SecondaryMap};
/// use gradlift_ir::{Function, Value, ValueData, parse};
///
/// let m = parse("func @f(%x: f64) -> f64 {\nentry:\n    ret %x\n}")?;
/// let f: &Function = m.funcs[m.func_by_name("f").unwrap()].function().unwrap();
/// let values: &PrimaryMap<Value, ValueData> = &f.values;
/// let x = Value::new(0);
/// assert_eq!((x.index(), values[x].name.as_deref()), (0, Some("x")));
/// let mut marks: SecondaryMap<Value, bool> = SecondaryMap::new();
/// marks[x] = true;
/// assert!(marks[x] && !marks[Value::new(1)]);
/// # Ok::<(), gradlift_ir::ParseErrors>(())
/// ```
pub mod entity {
    pub use cranelift_entity::{EntityRef, EntitySet, Keys, PrimaryMap, SecondaryMap};
}
pub mod flowgraph;
pub mod function;
pub mod interp;
pub mod loops;
pub mod math;
pub mod module;
pub mod ops;
pub mod opt;
pub mod parser;
pub mod scc;
pub mod ssa;
pub mod types;
pub mod verify;
pub mod write;

pub use builder::{BuildError, FunctionBuilder};
pub use engine::{Arg, Engine, ErrorKind, HostArgsFn, HostFn, Hosts, RunError, TapeStats, Val};
pub use entities::{Block, FuncId, Inst, Msg, Value};
pub use function::{
    BlockData, Function, InstData, Phi, Pos, SourceMap, Terminator, ValueData, ValueDef,
};
pub use module::{Body, Decl, FuncDecl, Module, ModuleError, Signature, VjpRule};
pub use ops::{CmpPred, Imm, Opcode};
pub use opt::{OptConfig, OptError, OptReport, optimize};
pub use parser::{ParseError, ParseErrors, ParseOptions, parse, parse_with};
pub use ssa::Variable;
pub use types::{Elem, Scalar, Type};
pub use verify::{VerifierError, VerifierErrors, verify};
