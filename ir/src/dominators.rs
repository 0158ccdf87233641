//! The dominator tree of a function's control-flow graph.
//!
//! Block `a` *dominates* block `b` when every path from the entry to `b` passes
//! through `a`; every block dominates itself. The *immediate* dominator of a reachable
//! block other than the entry is its closest strict dominator, and the immediate
//! dominators form a tree rooted at the entry. [`DominatorTree`] computes it with the
//! iterative algorithm of Cooper, Harvey and Kennedy ("A Simple, Fast Dominance
//! Algorithm", 2001) over a [`ControlFlowGraph`], then numbers the tree in preorder so
//! that [`DominatorTree::dominates`] is two comparisons.
//!
//! Only blocks reachable from the entry are in the tree. Dominance questions about an
//! unreachable block have no useful answer (vacuously, everything dominates it), so
//! this analysis answers `false` for them, except that a block dominates itself;
//! callers such as the [verifier](mod@crate::verify) skip unreachable code instead. Edges
//! into the entry (which a well-formed function does not have) are ignored: the
//! entry is the root.
//!
//! Like the control-flow graph, the tree is computed once and never updated, accepts
//! any [`Block`] in queries, and uses no recursion.

use cranelift_entity::SecondaryMap;
use smallvec::SmallVec;

use crate::entities::Block;
use crate::flowgraph::ControlFlowGraph;

/// Immediate dominators, the dominator tree and constant-time dominance queries.
///
/// ```
/// use gradlift_ir::{Function, Signature, Scalar, Terminator};
/// use gradlift_ir::{dominators::DominatorTree, flowgraph::ControlFlowGraph};
///
/// // A diamond: entry branches to left and right, which both jump to join.
/// let mut func = Function::new(&Signature::default());
/// let [entry, left, right, join] = ["entry", "left", "right", "join"].map(|n| {
///     let b = func.make_block(Some(n));
///     func.append_block(b);
///     b
/// });
/// let c = func.make_const(Scalar::Bool(true));
/// func.set_terminator(entry, Terminator::Br { cond: c, then_dest: left, else_dest: right });
/// func.set_terminator(left, Terminator::Jump(join));
/// func.set_terminator(right, Terminator::Jump(join));
/// func.set_terminator(join, Terminator::Ret(Default::default()));
///
/// let cfg = ControlFlowGraph::new(&func);
/// let domtree = DominatorTree::new(&cfg);
/// assert_eq!(domtree.idom(join), Some(entry));
/// assert!(domtree.dominates(entry, join));
/// assert!(!domtree.dominates(left, join));
/// assert_eq!(domtree.children(entry), [right, left, join]);
/// ```
#[derive(Clone, Debug, Default)]
pub struct DominatorTree {
    idom: SecondaryMap<Block, Option<Block>>,
    children: SecondaryMap<Block, SmallVec<[Block; 2]>>,
    /// Preorder number in the dominator tree, from 1; zero for unreachable blocks.
    pre: SecondaryMap<Block, u32>,
    /// The largest preorder number in the block's subtree.
    last: SecondaryMap<Block, u32>,
    preorder: Vec<Block>,
}

impl DominatorTree {
    /// The dominator tree of `cfg`.
    pub fn new(cfg: &ControlFlowGraph) -> DominatorTree {
        let mut tree = DominatorTree::default();
        let rpo = cfg.reverse_postorder();
        let Some((&entry, rest)) = rpo.split_first() else {
            return tree;
        };
        // Positions in reverse postorder; both arguments are reachable blocks with an
        // immediate dominator already set, so each walk ends at a common ancestor.
        let num = |b: Block| cfg.rpo_index(b).unwrap_or(usize::MAX);
        let intersect = |idom: &SecondaryMap<Block, Option<Block>>, mut a: Block, mut b: Block| {
            while a != b {
                while num(a) > num(b) {
                    a = idom[a].unwrap_or(entry);
                }
                while num(b) > num(a) {
                    b = idom[b].unwrap_or(entry);
                }
            }
            a
        };

        tree.idom[entry] = Some(entry);
        let mut changed = true;
        while changed {
            changed = false;
            for &b in rest {
                let mut new_idom: Option<Block> = None;
                for &p in cfg.preds(b) {
                    if tree.idom[p].is_none() {
                        // Unreachable, or not processed yet in this sweep.
                        continue;
                    }
                    new_idom = Some(match new_idom {
                        None => p,
                        Some(x) => intersect(&tree.idom, p, x),
                    });
                }
                if new_idom.is_some() && tree.idom[b] != new_idom {
                    tree.idom[b] = new_idom;
                    changed = true;
                }
            }
        }
        // The root has no immediate dominator.
        tree.idom[entry] = None;

        for &b in rest {
            if let Some(d) = tree.idom[b] {
                tree.children[d].push(b);
            }
        }
        tree.number(entry);
        tree
    }

    /// Numbers the tree in preorder, iteratively.
    fn number(&mut self, root: Block) {
        let mut stack: Vec<(Block, usize)> = vec![(root, 0)];
        self.preorder.push(root);
        self.pre[root] = 1;
        while let Some(frame) = stack.last_mut() {
            let (b, next) = *frame;
            match self.children[b].get(next) {
                Some(&c) => {
                    frame.1 += 1;
                    self.preorder.push(c);
                    self.pre[c] = self.preorder.len() as u32;
                    stack.push((c, 0));
                }
                None => {
                    self.last[b] = self.preorder.len() as u32;
                    stack.pop();
                }
            }
        }
    }

    /// The immediate dominator of `b`; `None` for the entry and unreachable blocks.
    pub fn idom(&self, b: Block) -> Option<Block> {
        self.idom[b]
    }

    /// Whether `b` is in the tree (reachable from the entry).
    pub fn is_reachable(&self, b: Block) -> bool {
        self.pre[b] != 0
    }

    /// Whether `a` dominates `b`: every path from the entry to `b` passes through `a`.
    /// A block dominates itself; otherwise `false` when either is unreachable.
    pub fn dominates(&self, a: Block, b: Block) -> bool {
        if a == b {
            return true;
        }
        let (pa, pb) = (self.pre[a], self.pre[b]);
        pa != 0 && pb != 0 && pa <= pb && pb <= self.last[a]
    }

    /// Whether `a` dominates `b` and is not `b`.
    pub fn strictly_dominates(&self, a: Block, b: Block) -> bool {
        a != b && self.dominates(a, b)
    }

    /// The blocks whose immediate dominator is `b`, in reverse postorder.
    pub fn children(&self, b: Block) -> &[Block] {
        &self.children[b]
    }

    /// The reachable blocks in a preorder of the dominator tree (each block before
    /// the blocks it dominates), children visited in reverse postorder.
    pub fn preorder(&self) -> &[Block] {
        &self.preorder
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flowgraph::tests::graph;
    use cranelift_entity::{EntityRef, EntitySet};
    use proptest::prelude::*;

    fn tree(n: usize, edges: &[(usize, usize)]) -> (DominatorTree, Vec<Block>) {
        let (func, blocks) = graph(n, edges);
        (DominatorTree::new(&ControlFlowGraph::new(&func)), blocks)
    }

    #[test]
    fn a_loop_is_dominated_by_its_header() {
        // b0 -> b1 (header) -> b2 (body) -> b1; b1 -> b3 (exit); b2 -> b4 -> b1.
        let (dt, b) = tree(5, &[(0, 1), (1, 2), (1, 3), (2, 1), (2, 4), (4, 1)]);
        assert_eq!(dt.idom(b[0]), None);
        assert_eq!(dt.idom(b[1]), Some(b[0]));
        assert_eq!(dt.idom(b[2]), Some(b[1]));
        assert_eq!(dt.idom(b[3]), Some(b[1]));
        assert_eq!(dt.idom(b[4]), Some(b[2]));
        assert!(dt.dominates(b[1], b[4]) && dt.strictly_dominates(b[1], b[4]));
        assert!(!dt.dominates(b[4], b[1]) && !dt.dominates(b[3], b[2]));
        assert!(dt.dominates(b[2], b[2]) && !dt.strictly_dominates(b[2], b[2]));
        assert_eq!(dt.preorder()[0], b[0]);
        assert_eq!(dt.preorder().len(), 5);
    }

    #[test]
    fn irreducible_loops_are_dominated_by_the_entry_only() {
        // b0 branches into both b1 and b2, which jump to each other.
        let (dt, b) = tree(3, &[(0, 1), (0, 2), (1, 2), (2, 1)]);
        assert_eq!(dt.idom(b[1]), Some(b[0]));
        assert_eq!(dt.idom(b[2]), Some(b[0]));
        assert!(!dt.dominates(b[1], b[2]) && !dt.dominates(b[2], b[1]));
    }

    #[test]
    fn unreachable_blocks_dominate_and_are_dominated_by_nothing_else() {
        // b2 is unreachable and jumps to b1; the entry has a (malformed) back edge.
        let (dt, b) = tree(3, &[(0, 1), (1, 0), (2, 1)]);
        assert!(!dt.is_reachable(b[2]));
        assert_eq!(dt.idom(b[1]), Some(b[0]));
        assert_eq!(dt.idom(b[0]), None);
        assert!(!dt.dominates(b[0], b[2]) && !dt.dominates(b[2], b[1]));
        assert!(dt.dominates(b[2], b[2]));
        assert!(!dt.dominates(Block::new(99), b[0]));
    }

    #[test]
    fn a_long_chain_does_not_overflow_the_stack() {
        let n = 200_000;
        let edges: Vec<(usize, usize)> = (0..n - 1).map(|i| (i, i + 1)).collect();
        let (dt, b) = tree(n, &edges);
        assert!(dt.dominates(b[0], b[n - 1]));
        assert!(dt.dominates(b[n / 2], b[n - 1]));
        assert!(!dt.dominates(b[n - 1], b[n / 2]));
        assert_eq!(dt.idom(b[n - 1]), Some(b[n - 2]));
    }

    /// Dominator sets by the textbook data-flow equations:
    /// dom(entry) = {entry}, dom(b) = {b} ∪ ⋂ dom(p) over reachable predecessors p.
    fn naive(cfg: &ControlFlowGraph, blocks: &[Block]) -> Vec<Vec<bool>> {
        let n = blocks.len();
        let reach: Vec<bool> = blocks.iter().map(|&b| cfg.is_reachable(b)).collect();
        let mut dom = vec![vec![true; n]; n];
        dom[0] = (0..n).map(|i| i == 0).collect();
        let mut changed = true;
        while changed {
            changed = false;
            for b in 1..n {
                if !reach[b] {
                    continue;
                }
                let mut new = vec![true; n];
                for &p in cfg.preds(blocks[b]) {
                    let p = p.index();
                    if reach[p] {
                        for i in 0..n {
                            new[i] &= dom[p][i];
                        }
                    }
                }
                new[b] = true;
                if new != dom[b] {
                    dom[b] = new;
                    changed = true;
                }
            }
        }
        dom
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]

        #[test]
        fn matches_the_data_flow_definition(
            n in 1usize..12,
            raw in proptest::collection::vec((0usize..12, 0usize..12), 0..30),
        ) {
            let edges: Vec<(usize, usize)> =
                raw.into_iter().map(|(a, b)| (a % n, b % n)).collect();
            let (func, blocks) = graph(n, &edges);
            let cfg = ControlFlowGraph::new(&func);
            let dt = DominatorTree::new(&cfg);
            let dom = naive(&cfg, &blocks);
            let mut seen = EntitySet::<Block>::new();
            for (j, &b) in blocks.iter().enumerate() {
                prop_assert_eq!(dt.is_reachable(b), cfg.is_reachable(b));
                for (i, &a) in blocks.iter().enumerate() {
                    let expected = if cfg.is_reachable(b) && cfg.is_reachable(a) {
                        dom[j][i]
                    } else {
                        a == b
                    };
                    prop_assert_eq!(dt.dominates(a, b), expected, "{} dom {}", a, b);
                }
                // The immediate dominator is the strict dominator dominated by all others.
                if let Some(d) = dt.idom(b) {
                    prop_assert!(dt.strictly_dominates(d, b));
                    for &a in &blocks {
                        if dt.strictly_dominates(a, b) {
                            prop_assert!(dt.dominates(a, d));
                        }
                    }
                    prop_assert!(dt.children(d).contains(&b));
                }
            }
            for &b in dt.preorder() {
                if let Some(d) = dt.idom(b) {
                    prop_assert!(seen.contains(d), "preorder puts {} before {}", d, b);
                }
                seen.insert(b);
            }
        }
    }
}
