//! The call graph of a module: which functions each function calls, its strongly
//! connected components callees first, and which functions are recursive.
//!
//! [`CallGraph`] has a node per function of the module (defined, `extern` or only
//! declared) and an edge `f -> g` when a placed instruction of `f`'s body is
//! `call @g` (a call whose callee is not a function of the module is ignored, as
//! the verifier reports it). Functions without a body call nothing. A function is
//! *recursive* when it is on a cycle of the graph: it calls itself, directly or
//! through others. The components are those of [`Sccs`] over the functions in ID
//! order, each function's callees in ID order, so they come callees first and in a
//! deterministic order. Like the other analyses, it is computed once and never
//! updated: a pass that adds or removes calls builds a new one.

use cranelift_entity::SecondaryMap;

use crate::entities::FuncId;
use crate::module::Module;
use crate::ops::{Imm, Opcode};
use crate::scc::Sccs;

/// Who calls whom in a module, and its strongly connected components (see the
/// [module docs](self)).
///
/// ```
/// use gradlift_ir::{callgraph::CallGraph, parse};
///
/// let module = parse("
///     func @even(%n: i64) -> bool {
///     entry:
///         %z = icmp eq %n, 0
///         br %z, yes, no
///     yes:
///         ret true
///     no:
///         %m = isub %n, 1
///         %r = call @odd(%m)
///         ret %r
///     }
///     func @odd(%n: i64) -> bool {
///     entry:
///         %r = call @even(%n)
///         %s = not %r
///         ret %s
///     }
///     func @main(%n: i64) -> bool {
///     entry:
///         %r = call @even(%n)
///         ret %r
///     }
/// ").unwrap();
/// let [even, odd, main] = ["even", "odd", "main"].map(|n| module.func_by_name(n).unwrap());
/// let cg = CallGraph::new(&module);
/// assert_eq!(cg.callees(main), [even]);
/// assert!(cg.is_recursive(even) && cg.is_recursive(odd) && !cg.is_recursive(main));
/// // Callees first: @main after the cycle of @even and @odd.
/// assert_eq!(cg.bottom_up().last(), Some(main));
/// ```
#[derive(Clone, Debug)]
pub struct CallGraph {
    /// Each function's distinct callees, in ID order.
    callees: SecondaryMap<FuncId, Vec<FuncId>>,
    sccs: Sccs<FuncId>,
}

impl CallGraph {
    /// The call graph of `module`.
    pub fn new(module: &Module) -> CallGraph {
        let mut callees: SecondaryMap<FuncId, Vec<FuncId>> = SecondaryMap::new();
        for f in module.funcs.keys() {
            let Some(func) = module.function(f) else {
                continue;
            };
            let mut c: Vec<FuncId> = func
                .placed_insts()
                .filter_map(|(_, i)| match (func.insts[i].opcode, func.insts[i].imm) {
                    (Opcode::Call, Imm::Func(g)) if module.funcs.is_valid(g) => Some(g),
                    _ => None,
                })
                .collect();
            c.sort();
            c.dedup();
            callees[f] = c;
        }
        let sccs = Sccs::new(module.funcs.keys(), |f| callees[f].clone());
        CallGraph { callees, sccs }
    }

    /// The distinct functions `f` calls, in ID order.
    pub fn callees(&self, f: FuncId) -> &[FuncId] {
        &self.callees[f]
    }

    /// Whether `f` calls itself, directly or through other functions.
    pub fn is_recursive(&self, f: FuncId) -> bool {
        self.sccs.on_cycle(f)
    }

    /// The strongly connected components, callees first: each component comes after
    /// the components of every function its functions call.
    pub fn sccs(&self) -> &Sccs<FuncId> {
        &self.sccs
    }

    /// Every function of the module, callees first (the functions of a cycle in the
    /// order of their component).
    pub fn bottom_up(&self) -> impl Iterator<Item = FuncId> + '_ {
        self.sccs.nodes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parser::parse;
    use proptest::prelude::*;

    /// A module of `n` functions `@f0 ... @f{n-1}`, where `@fi` calls each `@fj` of
    /// `edges` (in a block of its own that nothing reaches when `dead` says so).
    fn module(n: usize, edges: &[(usize, usize)], dead: &[(usize, usize)]) -> Module {
        let mut text = String::new();
        for i in 0..n {
            text.push_str(&format!("func @f{i}() {{\nentry:\n"));
            for &(a, c) in edges {
                if a == i {
                    text.push_str(&format!("    call @f{c}()\n"));
                }
            }
            text.push_str("    ret\n");
            if dead.iter().any(|&(a, _)| a == i) {
                text.push_str("unused:\n");
                for &(a, c) in dead {
                    if a == i {
                        text.push_str(&format!("    call @f{c}()\n"));
                    }
                }
                text.push_str("    ret\n");
            }
            text.push_str("}\n");
        }
        parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"))
    }

    fn ids(m: &Module, n: usize) -> Vec<FuncId> {
        (0..n)
            .map(|i| m.func_by_name(&format!("f{i}")).unwrap())
            .collect()
    }

    #[test]
    fn self_recursion_and_repeated_calls() {
        // f0 calls itself; f1 calls f2 twice; f2 calls nothing.
        let m = module(3, &[(0, 0), (1, 2), (1, 2)], &[]);
        let f = ids(&m, 3);
        let cg = CallGraph::new(&m);
        assert!(cg.is_recursive(f[0]) && !cg.is_recursive(f[1]) && !cg.is_recursive(f[2]));
        assert_eq!(cg.callees(f[1]), [f[2]]);
        let order: Vec<FuncId> = cg.bottom_up().collect();
        assert_eq!(order, [f[0], f[2], f[1]]);
    }

    #[test]
    fn a_call_in_an_unreachable_block_is_an_edge() {
        // f0 calls f1 only from a block nothing jumps to; f1 calls f0.
        let m = module(2, &[(1, 0)], &[(0, 1)]);
        let f = ids(&m, 2);
        let cg = CallGraph::new(&m);
        assert_eq!(cg.callees(f[0]), [f[1]]);
        assert!(cg.is_recursive(f[0]) && cg.is_recursive(f[1]));
        assert_eq!(cg.sccs().len(), 1);
    }

    /// `reach[a][b]`: whether `@fa` calls `@fb` through one call or more.
    fn reachability(n: usize, edges: &[(usize, usize)]) -> Vec<Vec<bool>> {
        let mut reach = vec![vec![false; n]; n];
        for &(a, c) in edges {
            reach[a][c] = true;
        }
        for k in 0..n {
            for i in 0..n {
                for j in 0..n {
                    if reach[i][k] && reach[k][j] {
                        reach[i][j] = true;
                    }
                }
            }
        }
        reach
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(100))]

        #[test]
        fn matches_reachability(
            n in 1usize..8,
            raw in proptest::collection::vec((0usize..8, 0usize..8), 0..16),
        ) {
            let edges: Vec<(usize, usize)> =
                raw.into_iter().map(|(a, c)| (a % n, c % n)).collect();
            let m = module(n, &edges, &[]);
            let f = ids(&m, n);
            let cg = CallGraph::new(&m);
            let reach = reachability(n, &edges);
            let order: Vec<FuncId> = cg.bottom_up().collect();
            prop_assert_eq!(order.len(), n);
            let pos = |g: FuncId| order.iter().position(|&x| x == g).unwrap();
            for i in 0..n {
                prop_assert_eq!(cg.is_recursive(f[i]), reach[i][i]);
                let mut callees: Vec<FuncId> =
                    edges.iter().filter(|e| e.0 == i).map(|e| f[e.1]).collect();
                callees.sort();
                callees.dedup();
                prop_assert_eq!(cg.callees(f[i]), &callees[..]);
                for j in 0..n {
                    let same = cg.sccs().component_of(f[i]) == cg.sccs().component_of(f[j]);
                    prop_assert_eq!(same, i == j || (reach[i][j] && reach[j][i]));
                    // Callees first, unless they are in one cycle.
                    if reach[i][j] && !reach[j][i] {
                        prop_assert!(pos(f[j]) < pos(f[i]));
                    }
                }
            }
        }
    }
}
