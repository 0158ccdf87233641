//! The control-flow graph of a function: predecessors, successors, reachability and a
//! reverse postorder, computed once from the layout and the terminators.
//!
//! [`ControlFlowGraph`] is an analysis in Cranelift's sense: a separate struct built
//! on demand from a [`Function`] and never updated; a pass that edits the control
//! flow builds a new one. Its nodes are the blocks of the layout, and it is a *simple*
//! graph: `br %c, b, b` makes one edge to `b`, so `b` lists the branching block once
//! among its predecessors (the phi rule of the [verifier](mod@crate::verify) follows
//! this: one incoming value per predecessor block).
//!
//! The graph tolerates malformed functions, because the verifier builds it before it
//! knows the function is well-formed: a layout entry that is not a block of the
//! function, or that repeats an earlier one, is no node; an edge to a block that is
//! not a node is dropped; a block without a terminator has no successors. The
//! verifier reports each of those separately. Every query accepts any [`Block`] and
//! answers as for a block that is not in the graph when it is not.
//!
//! Traversals are iterative, so a function of any size is fine.

use cranelift_entity::{EntitySet, SecondaryMap};
use smallvec::SmallVec;

use crate::entities::Block;
use crate::function::Function;

/// Predecessors, successors, reachability and reverse postorder of a function's blocks.
///
/// ```
/// use gradlift_ir::{Function, Signature, Terminator, flowgraph::ControlFlowGraph};
///
/// // entry -> head <-> body, head -> exit
/// let mut func = Function::new(&Signature::default());
/// let [entry, head, body, exit] = ["entry", "head", "body", "exit"].map(|n| {
///     let b = func.make_block(Some(n));
///     func.append_block(b);
///     b
/// });
/// let t = func.make_const(gradlift_ir::Scalar::Bool(true));
/// func.set_terminator(entry, Terminator::Jump(head));
/// func.set_terminator(head, Terminator::Br { cond: t, then_dest: body, else_dest: exit });
/// func.set_terminator(body, Terminator::Jump(head));
/// func.set_terminator(exit, Terminator::Ret(Default::default()));
///
/// let cfg = ControlFlowGraph::new(&func);
/// assert_eq!(cfg.preds(head), [entry, body]);
/// assert_eq!(cfg.succs(head), [body, exit]);
/// assert_eq!(cfg.reverse_postorder(), [entry, head, exit, body]);
/// ```
#[derive(Clone, Debug, Default)]
pub struct ControlFlowGraph {
    entry: Option<Block>,
    nodes: EntitySet<Block>,
    succs: SecondaryMap<Block, SmallVec<[Block; 2]>>,
    preds: SecondaryMap<Block, SmallVec<[Block; 2]>>,
    rpo: Vec<Block>,
    /// Position in `rpo` plus one; zero for blocks not reachable from the entry.
    rpo_number: SecondaryMap<Block, u32>,
}

impl ControlFlowGraph {
    /// The control-flow graph of `func`'s layout.
    pub fn new(func: &Function) -> ControlFlowGraph {
        let mut cfg = ControlFlowGraph::default();

        // The nodes: each block of the function in the layout, at its first occurrence.
        let mut order: Vec<Block> = Vec::with_capacity(func.layout.len());
        for &b in &func.layout {
            if func.blocks.is_valid(b) && !cfg.nodes.contains(b) {
                cfg.nodes.insert(b);
                order.push(b);
            }
        }
        cfg.entry = func
            .layout
            .first()
            .copied()
            .filter(|&b| cfg.nodes.contains(b));

        // The edges, without repeats. Walking the blocks in layout order lists every
        // block's predecessors in layout order.
        for &b in &order {
            let Some(term) = &func.blocks[b].term else {
                continue;
            };
            for s in term.successors() {
                if cfg.nodes.contains(s) && !cfg.succs[b].contains(&s) {
                    cfg.succs[b].push(s);
                    cfg.preds[s].push(b);
                }
            }
        }

        cfg.compute_rpo();
        cfg
    }

    /// Depth-first search from the entry with an explicit stack; successors are
    /// visited in terminator order.
    fn compute_rpo(&mut self) {
        let Some(entry) = self.entry else {
            return;
        };
        let mut visited = EntitySet::<Block>::new();
        let mut postorder = Vec::new();
        // Each frame is a block and the index of the next successor to visit.
        let mut stack: Vec<(Block, usize)> = vec![(entry, 0)];
        visited.insert(entry);
        while let Some(frame) = stack.last_mut() {
            let (b, next) = *frame;
            match self.succs[b].get(next) {
                Some(&s) => {
                    frame.1 += 1;
                    if visited.insert(s) {
                        stack.push((s, 0));
                    }
                }
                None => {
                    postorder.push(b);
                    stack.pop();
                }
            }
        }
        postorder.reverse();
        for (i, &b) in postorder.iter().enumerate() {
            self.rpo_number[b] = i as u32 + 1;
        }
        self.rpo = postorder;
    }

    /// The entry block: the first block of the layout, if it is a block of the function.
    pub fn entry(&self) -> Option<Block> {
        self.entry
    }

    /// Whether `b` is a node: a block of the function that appears in the layout.
    pub fn is_node(&self, b: Block) -> bool {
        self.nodes.contains(b)
    }

    /// The distinct successors of `b`, in terminator order.
    pub fn succs(&self, b: Block) -> &[Block] {
        &self.succs[b]
    }

    /// The distinct predecessors of `b`, in layout order, reachable or not.
    pub fn preds(&self, b: Block) -> &[Block] {
        &self.preds[b]
    }

    /// Whether `b` is reachable from the entry (the entry is).
    pub fn is_reachable(&self, b: Block) -> bool {
        self.rpo_number[b] != 0
    }

    /// The reachable blocks in reverse postorder: the entry first, and every block
    /// before its successors except along back edges.
    pub fn reverse_postorder(&self) -> &[Block] {
        &self.rpo
    }

    /// The position of `b` in [`reverse_postorder`](Self::reverse_postorder), if it
    /// is reachable.
    pub fn rpo_index(&self, b: Block) -> Option<usize> {
        match self.rpo_number[b] {
            0 => None,
            n => Some(n as usize - 1),
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::function::Terminator;
    use crate::module::Signature;
    use crate::types::Scalar;
    use cranelift_entity::EntityRef;

    /// A function with `n` blocks in the layout and the given edges: a block with one
    /// successor jumps, with two branches, with none returns.
    pub(crate) fn graph(n: usize, edges: &[(usize, usize)]) -> (Function, Vec<Block>) {
        let mut func = Function::new(&Signature::default());
        let blocks: Vec<Block> = (0..n)
            .map(|i| {
                let b = func.make_block(Some(&format!("b{i}")));
                func.append_block(b);
                b
            })
            .collect();
        let cond = func.make_const(Scalar::Bool(true));
        let mut succs: Vec<Vec<Block>> = vec![Vec::new(); n];
        for &(from, to) in edges {
            succs[from].push(blocks[to]);
        }
        for (&b, succs) in blocks.iter().zip(&succs) {
            let term = match succs[..] {
                [] => Terminator::Ret(Default::default()),
                [s] => Terminator::Jump(s),
                [t, e, ..] => Terminator::Br {
                    cond,
                    then_dest: t,
                    else_dest: e,
                },
            };
            func.set_terminator(b, term);
        }
        (func, blocks)
    }

    #[test]
    fn diamond() {
        let (func, b) = graph(4, &[(0, 1), (0, 2), (1, 3), (2, 3)]);
        let cfg = ControlFlowGraph::new(&func);
        assert_eq!(cfg.entry(), Some(b[0]));
        assert_eq!(cfg.succs(b[0]), [b[1], b[2]]);
        assert_eq!(cfg.preds(b[3]), [b[1], b[2]]);
        assert!(cfg.preds(b[0]).is_empty());
        assert_eq!(cfg.reverse_postorder(), [b[0], b[2], b[1], b[3]]);
        assert_eq!(cfg.rpo_index(b[3]), Some(3));
    }

    #[test]
    fn a_branch_to_one_block_twice_is_one_edge() {
        let (func, b) = graph(2, &[(0, 1), (0, 1)]);
        let cfg = ControlFlowGraph::new(&func);
        assert_eq!(cfg.succs(b[0]), [b[1]]);
        assert_eq!(cfg.preds(b[1]), [b[0]]);
    }

    #[test]
    fn unreachable_blocks_have_edges_but_no_rpo_number() {
        // b2 is dead and jumps into the loop b1 <-> b3.
        let (func, b) = graph(4, &[(0, 1), (1, 3), (1, 0), (3, 1), (2, 3)]);
        let cfg = ControlFlowGraph::new(&func);
        assert!(!cfg.is_reachable(b[2]));
        assert_eq!(cfg.rpo_index(b[2]), None);
        assert_eq!(cfg.preds(b[3]), [b[1], b[2]]);
        // The entry may be a branch target; it still comes first.
        assert_eq!(cfg.preds(b[0]), [b[1]]);
        assert_eq!(cfg.reverse_postorder(), [b[0], b[1], b[3]]);
    }

    #[test]
    fn malformed_layouts_and_edges_are_tolerated() {
        let (mut func, b) = graph(3, &[(0, 1), (1, 2)]);
        let ghost = Block::new(77);
        func.layout.push(b[1]);
        func.layout.push(ghost);
        let unplaced = func.make_block(None);
        func.set_terminator(b[2], Terminator::Jump(ghost));
        let cond = func.make_const(Scalar::Bool(false));
        func.set_terminator(
            b[1],
            Terminator::Br {
                cond,
                then_dest: unplaced,
                else_dest: b[2],
            },
        );
        func.blocks[b[0]].term = None;
        let cfg = ControlFlowGraph::new(&func);
        assert!(!cfg.is_node(ghost) && !cfg.is_node(unplaced));
        assert!(cfg.succs(b[0]).is_empty());
        assert_eq!(cfg.succs(b[1]), [b[2]]);
        assert!(cfg.succs(b[2]).is_empty());
        assert_eq!(cfg.reverse_postorder(), [b[0]]);
        assert!(cfg.preds(ghost).is_empty() && !cfg.is_reachable(ghost));
    }

    #[test]
    fn no_blocks_or_a_ghost_entry_gives_an_empty_order() {
        let func = Function::new(&Signature::default());
        assert!(ControlFlowGraph::new(&func).reverse_postorder().is_empty());
        let (mut func, _) = graph(2, &[(0, 1)]);
        func.layout.insert(0, Block::new(9));
        let cfg = ControlFlowGraph::new(&func);
        assert_eq!(cfg.entry(), None);
        assert!(cfg.reverse_postorder().is_empty());
    }

    #[test]
    fn a_long_chain_does_not_overflow_the_stack() {
        let n = 200_000;
        let edges: Vec<(usize, usize)> = (0..n - 1).map(|i| (i, i + 1)).collect();
        let (func, b) = graph(n, &edges);
        let cfg = ControlFlowGraph::new(&func);
        assert_eq!(cfg.reverse_postorder().len(), n);
        assert_eq!(cfg.rpo_index(b[n - 1]), Some(n - 1));
    }
}
