//! The attribute form of the suite (`benches/attr.rs`) gives gradlift the program
//! the autodiff form (`gradlift::suite`) gives it: with `GRADLIFT_DUMP` set, the
//! first call of each `d_NAME` writes the module after gradlift's optimiser
//! (`d_NAME.optimized.ir`), which must be, text for text, the optimised module of
//! the same program traced from `gradlift::suite` (`Pipeline::prepare`, what
//! `autodiff` derives from). The derivation and the compiled code follow from that
//! module, so both forms run the same gradient code and the suite table's
//! `vs autodiff` measures only the attribute's call around it. And `normalize`'s
//! call of `@norm` is out of its loop, so its gradient is O(n).
//!
//! Values are compared without their names: the attribute names the parameters as
//! in the Rust code (`%x`), the traced generic function leaves them numbered.
//!
//! `mlp` is left out: its `z.iter()` loops run to the buffer's `len` rather than to
//! the literal 10, so its module differs, by work done once per call.
//!
//! A test binary of its own: it sets the process's dump directory.

#[path = "../benches/attr.rs"]
mod attr;

use gradlift::autodiff::Native;
use gradlift::ir::dominators::DominatorTree;
use gradlift::ir::flowgraph::ControlFlowGraph;
use gradlift::ir::loops::LoopForest;
use gradlift::ir::{Opcode, parse};
use gradlift::suite;
use gradlift::trace::{Args, Callable, Var};
use gradlift::{Pipeline, autodiff};

/// The module of `text`, printed again with its values unnamed (numbered).
fn unnamed(text: &str) -> String {
    let mut module = parse(text).expect("the module parses");
    for id in module.funcs.keys().collect::<Vec<_>>() {
        if let Some(f) = module.function_mut(id) {
            for v in f.values.values_mut() {
                v.name = None;
            }
        }
    }
    module.to_string()
}

/// The module gradlift's optimiser makes of `f`, traced as `@name`.
fn optimized<A: Args, F: Callable<A>>(name: &'static str, f: F) -> String
where
    F::Output: Native,
{
    let ad = autodiff(name, f).expect("the program traces");
    Pipeline::new()
        .with_hosts(ad.hosts().clone())
        .prepare(ad.module(), name)
        .expect("the program optimises")
        .module
        .to_string()
}

#[test]
fn the_attribute_form_optimises_to_the_autodiff_form() {
    let dir = std::env::temp_dir().join(format!("gradlift-suite-attr-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    gradlift::autodiff::set_dump_dir(Some(&dir));
    // The first call of each derivative writes its stages.
    let x = suite::branchy_input(12);
    let mut dx = vec![0.0; x.len()];
    attr::d_sumsq(&x, &mut dx, 1.0);
    attr::d_rosenbrock(&x, &mut dx, 1.0);
    attr::d_logsumexp(&x, &mut dx, 1.0);
    attr::d_branchy(&x, &mut dx, 1.0);
    let (xn, w) = suite::normalize_input(12);
    attr::d_normalize(&xn, &mut dx, &w, 1.0);
    let mut dp = vec![0.0; 6];
    attr::d_ode(&suite::ode_input(), &mut dp, 10, 1.0);

    let read = |name: &str| {
        let path = dir.join(format!("d_{name}.optimized.ir"));
        std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("{} was not written: {e}", path.display()))
    };
    gradlift::autodiff::set_dump_dir(None);
    let want = [
        ("sumsq", optimized("sumsq", suite::sumsq::<Var>)),
        (
            "rosenbrock",
            optimized("rosenbrock", suite::rosenbrock::<Var>),
        ),
        ("logsumexp", optimized("logsumexp", suite::logsumexp::<Var>)),
        ("normalize", optimized("normalize", suite::normalize::<Var>)),
        ("ode", optimized("ode", suite::ode::<Var>)),
        ("branchy", optimized("branchy", suite::branchy::<Var>)),
    ];
    for (name, want) in want {
        let got = unnamed(&read(name));
        let want = unnamed(&want);
        assert_eq!(
            got, want,
            "{name}: the attribute form's optimised module (left) is not the autodiff form's (right)"
        );
    }

    // `normalize`: no call inside a loop of `@normalize`.
    let text = read("normalize");
    let module = parse(&text).expect("the dump parses");
    let id = module.func_by_name("normalize").expect("@normalize");
    let func = module.function(id).expect("@normalize has a body");
    let cfg = ControlFlowGraph::new(func);
    let forest = LoopForest::new(&cfg, &DominatorTree::new(&cfg));
    assert!(!forest.is_empty(), "@normalize has its loop:\n{text}");
    for l in 0..forest.len() {
        for &b in forest.blocks(l) {
            for &inst in &func.blocks[b].insts {
                assert_ne!(
                    func.insts[inst].opcode,
                    Opcode::Call,
                    "@normalize calls in its loop:\n{text}"
                );
            }
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
