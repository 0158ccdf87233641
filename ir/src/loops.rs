//! The natural loops of a function and how they nest: [`LoopForest`].
//!
//! A *back edge* is an edge `latch -> header` of the control-flow graph whose target
//! dominates its source; the *natural loop* of a header is the header and every
//! block that reaches one of its latches without passing through the header. One
//! loop is made per header, from all of its back edges. Two natural loops with
//! different headers are disjoint or one contains the other, so they form a forest:
//! the *parent* of a loop is the smallest loop that strictly contains it.
//!
//! Only blocks reachable from the entry take part (unreachable blocks are in no
//! loop, and edges from them are ignored). A cycle that no block dominates (an
//! irreducible one, entered at two places) is no natural loop; the
//! [strongly connected components](crate::scc) of the graph find every cycle.
//!
//! Loops are numbered from 0, outermost (largest) first: a loop's parent has a
//! smaller number, so counting down visits every loop before the loops containing
//! it ([`LoopForest::innermost_first`]). Among loops of the same size, the one whose
//! header comes first in reverse postorder comes first. Like the
//! [dominator tree](crate::dominators), the forest is computed once, never updated,
//! accepts any [`Block`] in queries, and uses no recursion; it is built in time
//! linear in the total size of the loops.

use cranelift_entity::SecondaryMap;

use crate::dominators::DominatorTree;
use crate::entities::Block;
use crate::flowgraph::ControlFlowGraph;

/// A natural loop: a header that dominates the sources of its back edges (latches),
/// and the blocks that reach a latch without passing the header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Loop {
    header: Block,
    /// Its blocks (the header first), in reverse postorder.
    blocks: Vec<Block>,
    /// The smallest loop that contains this one.
    parent: Option<usize>,
}

impl Loop {
    /// The header: the block every back edge of the loop goes to, which dominates
    /// every block of the loop.
    pub fn header(&self) -> Block {
        self.header
    }

    /// The loop's blocks in reverse postorder, the header first.
    pub fn blocks(&self) -> &[Block] {
        &self.blocks
    }

    /// The number of the smallest loop that strictly contains this one, if any.
    pub fn parent(&self) -> Option<usize> {
        self.parent
    }
}

/// The natural loops of a function, one per header, and which contains which (see
/// the [module docs](self)).
///
/// ```
/// use gradlift_ir::{Function, Signature, Scalar, Terminator};
/// use gradlift_ir::{dominators::DominatorTree, flowgraph::ControlFlowGraph, loops::LoopForest};
///
/// // entry -> head <-> body, head -> exit
/// let mut func = Function::new(&Signature::default());
/// let [entry, head, body, exit] = ["entry", "head", "body", "exit"].map(|n| {
///     let b = func.make_block(Some(n));
///     func.append_block(b);
///     b
/// });
/// let t = func.make_const(Scalar::Bool(true));
/// func.set_terminator(entry, Terminator::Jump(head));
/// func.set_terminator(head, Terminator::Br { cond: t, then_dest: body, else_dest: exit });
/// func.set_terminator(body, Terminator::Jump(head));
/// func.set_terminator(exit, Terminator::Ret(Default::default()));
///
/// let cfg = ControlFlowGraph::new(&func);
/// let forest = LoopForest::new(&cfg, &DominatorTree::new(&cfg));
/// assert_eq!(forest.len(), 1);
/// assert_eq!(forest.header_loop(head), Some(0));
/// assert_eq!(forest.get(0).blocks(), [head, body]);
/// assert!(forest.contains(0, body) && !forest.contains(0, exit));
/// ```
#[derive(Clone, Debug, Default)]
pub struct LoopForest {
    /// Outermost (largest) first.
    loops: Vec<Loop>,
    /// Index plus one of each block's innermost loop; zero outside every loop.
    innermost: SecondaryMap<Block, u32>,
    /// Index plus one of the loop each block is the header of; zero for others.
    by_header: SecondaryMap<Block, u32>,
}

impl LoopForest {
    /// The natural loops of the function whose control-flow graph is `cfg` and
    /// whose dominator tree (of `cfg`) is `domtree`.
    pub fn new(cfg: &ControlFlowGraph, domtree: &DominatorTree) -> LoopForest {
        let mut loops = Vec::new();
        let mut stamp: SecondaryMap<Block, u32> = SecondaryMap::new();
        for &h in cfg.reverse_postorder() {
            let latches: Vec<Block> = cfg
                .preds(h)
                .iter()
                .copied()
                .filter(|&p| cfg.is_reachable(p) && domtree.dominates(h, p))
                .collect();
            if latches.is_empty() {
                continue;
            }
            let mark = loops.len() as u32 + 1;
            stamp[h] = mark;
            let mut blocks = vec![h];
            let mut stack = latches;
            while let Some(b) = stack.pop() {
                if stamp[b] != mark {
                    stamp[b] = mark;
                    blocks.push(b);
                    stack.extend(
                        cfg.preds(b)
                            .iter()
                            .copied()
                            .filter(|&p| cfg.is_reachable(p)),
                    );
                }
            }
            blocks.sort_by_key(|&b| cfg.rpo_index(b));
            loops.push(Loop {
                header: h,
                blocks,
                parent: None,
            });
        }
        loops.sort_by_key(|l| core::cmp::Reverse(l.blocks.len()));
        let mut innermost: SecondaryMap<Block, u32> = SecondaryMap::new();
        let mut by_header: SecondaryMap<Block, u32> = SecondaryMap::new();
        for (k, lp) in loops.iter_mut().enumerate() {
            lp.parent = innermost[lp.header].checked_sub(1).map(|p| p as usize);
            by_header[lp.header] = k as u32 + 1;
            for &b in &lp.blocks {
                innermost[b] = k as u32 + 1;
            }
        }
        LoopForest {
            loops,
            innermost,
            by_header,
        }
    }

    /// The number of loops.
    pub fn len(&self) -> usize {
        self.loops.len()
    }

    /// Whether the function has no loop.
    pub fn is_empty(&self) -> bool {
        self.loops.is_empty()
    }

    /// Loop `l` (`l < len()`).
    pub fn get(&self, l: usize) -> &Loop {
        &self.loops[l]
    }

    /// The loops, outermost first (by number).
    pub fn loops(&self) -> &[Loop] {
        &self.loops
    }

    /// The header of loop `l`.
    pub fn header(&self, l: usize) -> Block {
        self.loops[l].header
    }

    /// The blocks of loop `l`, in reverse postorder, the header first.
    pub fn blocks(&self, l: usize) -> &[Block] {
        &self.loops[l].blocks
    }

    /// The loops' numbers, innermost (smallest) first: each loop before every loop
    /// that contains it.
    pub fn innermost_first(&self) -> impl Iterator<Item = usize> + use<> {
        (0..self.loops.len()).rev()
    }

    /// The number of the loop whose header `b` is, if it is one.
    pub fn header_loop(&self, b: Block) -> Option<usize> {
        self.by_header[b].checked_sub(1).map(|l| l as usize)
    }

    /// The number of the innermost loop containing `b`, if any.
    pub fn innermost(&self, b: Block) -> Option<usize> {
        self.innermost[b].checked_sub(1).map(|l| l as usize)
    }

    /// Whether loop `l` contains block `b`.
    pub fn contains(&self, l: usize, b: Block) -> bool {
        let mut cur = self.innermost(b);
        while let Some(c) = cur {
            if c == l {
                return true;
            }
            cur = self.loops[c].parent;
        }
        false
    }

    /// The loops strictly containing loop `l`, innermost first.
    pub fn ancestors(&self, l: usize) -> impl Iterator<Item = usize> + '_ {
        core::iter::successors(self.loops[l].parent, |&p| self.loops[p].parent)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flowgraph::tests::graph;
    use cranelift_entity::EntityRef;
    use proptest::prelude::*;

    fn forest(n: usize, edges: &[(usize, usize)]) -> (LoopForest, Vec<Block>) {
        let (func, blocks) = graph(n, edges);
        let cfg = ControlFlowGraph::new(&func);
        (LoopForest::new(&cfg, &DominatorTree::new(&cfg)), blocks)
    }

    #[test]
    fn nested_loops_with_two_latches() {
        // b0 -> b1 (outer header) -> b2 (inner header) -> b3 -> b2, b3 -> b4 -> b1,
        // b2 -> b1 (a second latch of the outer loop), b1 -> b5 (exit).
        let (f, b) = forest(
            6,
            &[
                (0, 1),
                (1, 2),
                (1, 5),
                (2, 3),
                (2, 1),
                (3, 2),
                (3, 4),
                (4, 1),
            ],
        );
        assert_eq!(f.len(), 2);
        assert_eq!(f.header(0), b[1]);
        assert_eq!(f.blocks(0), [b[1], b[2], b[3], b[4]]);
        assert_eq!(f.header(1), b[2]);
        assert_eq!(f.blocks(1), [b[2], b[3]]);
        assert_eq!(f.get(1).parent(), Some(0));
        assert_eq!(f.get(0).parent(), None);
        assert_eq!(f.ancestors(1).collect::<Vec<_>>(), [0]);
        assert_eq!(f.innermost_first().collect::<Vec<_>>(), [1, 0]);
        assert_eq!(f.innermost(b[3]), Some(1));
        assert_eq!(f.innermost(b[4]), Some(0));
        assert_eq!(f.innermost(b[5]), None);
        assert_eq!(f.header_loop(b[2]), Some(1));
        assert_eq!(f.header_loop(b[3]), None);
        assert!(f.contains(0, b[3]) && !f.contains(1, b[4]) && !f.contains(0, b[0]));
        assert!(!f.contains(0, Block::new(99)));
    }

    #[test]
    fn irreducible_cycles_and_unreachable_blocks_are_no_loops() {
        // b0 enters the cycle b1 <-> b2 at both blocks; b3 <-> b4 is unreachable.
        let (f, _) = forest(5, &[(0, 1), (0, 2), (1, 2), (2, 1), (3, 4), (4, 3)]);
        assert!(f.is_empty());
    }

    #[test]
    fn a_self_loop_is_a_loop_of_one_block() {
        let (f, b) = forest(3, &[(0, 1), (1, 1), (1, 2)]);
        assert_eq!(f.loops().len(), 1);
        assert_eq!(f.blocks(0), [b[1]]);
    }

    /// Natural loops by definition: for each reachable header `h` with a back edge
    /// (`p -> h`, `h` dominating `p`), the blocks `x` that reach a latch along a path
    /// avoiding `h` (by search from each block), plus `h`.
    fn naive(n: usize, edges: &[(usize, usize)]) -> Vec<(usize, Vec<bool>)> {
        let (func, blocks) = graph(n, edges);
        let cfg = ControlFlowGraph::new(&func);
        let dt = DominatorTree::new(&cfg);
        // The edges the function has: a block keeps its first two successors.
        let edges: Vec<(usize, usize)> = (0..n)
            .flat_map(|a| cfg.succs(blocks[a]).iter().map(move |s| (a, s.index())))
            .collect();
        let edges = &edges[..];
        let reach = |b: usize| cfg.is_reachable(blocks[b]);
        let mut out = Vec::new();
        for h in 0..n {
            let latches: Vec<usize> = (0..n)
                .filter(|&p| reach(p) && reach(h) && edges.contains(&(p, h)))
                .filter(|&p| dt.dominates(blocks[h], blocks[p]))
                .collect();
            if latches.is_empty() {
                continue;
            }
            let mut member = vec![false; n];
            member[h] = true;
            for x in (0..n).filter(|&x| reach(x) && x != h) {
                // Search forward from x, never through h.
                let mut seen = vec![false; n];
                let mut work = vec![x];
                seen[x] = true;
                while let Some(y) = work.pop() {
                    if latches.contains(&y) {
                        member[x] = true;
                        break;
                    }
                    for &(a, c) in edges {
                        if a == y && c != h && !seen[c] {
                            seen[c] = true;
                            work.push(c);
                        }
                    }
                }
            }
            out.push((h, member));
        }
        out
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]

        #[test]
        fn matches_the_definition(
            n in 1usize..10,
            raw in proptest::collection::vec((0usize..10, 0usize..10), 0..25),
        ) {
            let edges: Vec<(usize, usize)> =
                raw.into_iter().map(|(a, c)| (a % n, c % n)).collect();
            let (f, blocks) = forest(n, &edges);
            let expected = naive(n, &edges);
            prop_assert_eq!(f.len(), expected.len());
            for (h, member) in &expected {
                let l = f.header_loop(blocks[*h]);
                prop_assert!(l.is_some(), "b{} heads no loop", h);
                let l = l.unwrap();
                prop_assert_eq!(f.blocks(l)[0], blocks[*h]);
                for x in 0..n {
                    prop_assert_eq!(f.contains(l, blocks[x]), member[x], "b{} in loop of b{}", x, h);
                    prop_assert_eq!(f.blocks(l).contains(&blocks[x]), member[x]);
                }
            }
            // Nesting: the parent contains the loop and is the smallest loop that does.
            for l in 0..f.len() {
                let sub = |a: usize, c: usize| f.blocks(a).iter().all(|&x| f.contains(c, x));
                let containing: Vec<usize> = (0..f.len()).filter(|&c| c != l && sub(l, c)).collect();
                match f.get(l).parent() {
                    None => prop_assert!(containing.is_empty()),
                    Some(p) => {
                        prop_assert!(p < l && containing.contains(&p));
                        for &c in &containing {
                            prop_assert!(sub(p, c) || c == p);
                        }
                    }
                }
            }
        }
    }
}
