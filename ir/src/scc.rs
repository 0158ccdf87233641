//! Strongly connected components of a directed graph whose nodes are entities
//! (blocks of a control-flow graph, functions of a call graph).
//!
//! Two nodes are in one *strongly connected component* when each reaches the other;
//! the components partition the nodes. A component is *cyclic* when it has a cycle:
//! two nodes or more, or one node with an edge to itself. [`Sccs`] computes them with
//! Tarjan's algorithm, iteratively (a graph of any depth is fine), in time linear in
//! the nodes and edges.
//!
//! Invariants of the result: every node given is in exactly one component; the
//! components come *successors first* (reverse topological order of the condensed
//! graph): when a node of component `i` has an edge to a node of component `j != i`,
//! then `j < i`. The order is deterministic: the depth-first search starts from the
//! nodes in the order given and follows each node's successors in the order given,
//! and a component lists its nodes in the order Tarjan's stack gives them back (the
//! node the search entered it by last). An edge to an entity that is not one of the
//! nodes is ignored. The analysis is computed once and never updated.

use cranelift_entity::{EntityRef, EntitySet, SecondaryMap};

/// The strongly connected components of a graph, successors first.
///
/// ```
/// use cranelift_entity::EntityRef;
/// use gradlift_ir::{Block, scc::Sccs};
///
/// // b0 -> b1 <-> b2 -> b3, b3 -> b3
/// let b: Vec<Block> = (0..4).map(Block::new).collect();
/// let succs = |n: Block| match n.index() {
///     0 => vec![b[1]],
///     1 => vec![b[2]],
///     2 => vec![b[1], b[3]],
///     _ => vec![b[3]],
/// };
/// let sccs = Sccs::new(b.iter().copied(), succs);
/// assert_eq!(sccs.len(), 3);
/// assert_eq!(sccs.component(0), [b[3]]);
/// assert_eq!(sccs.component(1), [b[2], b[1]]);
/// assert_eq!(sccs.component(2), [b[0]]);
/// assert!(sccs.on_cycle(b[3]) && sccs.on_cycle(b[1]) && !sccs.on_cycle(b[0]));
/// ```
#[derive(Clone, Debug)]
pub struct Sccs<N: EntityRef> {
    /// The components, successors first.
    components: Vec<Vec<N>>,
    /// Whether each component has a cycle.
    cyclic: Vec<bool>,
    /// Index plus one of each node's component; zero for entities that are not nodes.
    component_of: SecondaryMap<N, u32>,
}

impl<N: EntityRef> Sccs<N> {
    /// The components of the graph with the nodes `nodes` (a repeated node counts
    /// once) and, for each node, the successors `succs(node)`.
    pub fn new<S, I>(nodes: impl IntoIterator<Item = N>, mut succs: S) -> Sccs<N>
    where
        S: FnMut(N) -> I,
        I: IntoIterator<Item = N>,
    {
        let roots: Vec<N> = nodes.into_iter().collect();
        let mut t = Tarjan {
            is_node: EntitySet::new(),
            index: SecondaryMap::new(),
            low: SecondaryMap::new(),
            on_stack: EntitySet::new(),
            self_loop: EntitySet::new(),
            stack: Vec::new(),
            counter: 0,
        };
        for &n in &roots {
            t.is_node.insert(n);
        }
        let mut components: Vec<Vec<N>> = Vec::new();
        for root in roots {
            if t.index[root] != 0 {
                continue;
            }
            // Frames: a node, its successors and the next one to follow.
            let mut frames = vec![t.visit(root, &mut succs)];
            while let Some(top) = frames.last_mut() {
                let v = top.0;
                if let Some(&w) = top.1.get(top.2) {
                    top.2 += 1;
                    if w == v {
                        t.self_loop.insert(v);
                    }
                    if t.index[w] == 0 {
                        let frame = t.visit(w, &mut succs);
                        frames.push(frame);
                    } else if t.on_stack.contains(w) {
                        t.low[v] = t.low[v].min(t.index[w]);
                    }
                    continue;
                }
                frames.pop();
                if let Some(&(u, _, _)) = frames.last() {
                    t.low[u] = t.low[u].min(t.low[v]);
                }
                if t.low[v] == t.index[v] {
                    let mut component = Vec::new();
                    while let Some(w) = t.stack.pop() {
                        t.on_stack.remove(w);
                        component.push(w);
                        if w == v {
                            break;
                        }
                    }
                    components.push(component);
                }
            }
        }
        let mut component_of = SecondaryMap::new();
        let mut cyclic = Vec::with_capacity(components.len());
        for (k, component) in components.iter().enumerate() {
            for &n in component {
                component_of[n] = k as u32 + 1;
            }
            cyclic.push(component.len() > 1 || t.self_loop.contains(component[0]));
        }
        Sccs {
            components,
            cyclic,
            component_of,
        }
    }

    /// The number of components.
    pub fn len(&self) -> usize {
        self.components.len()
    }

    /// Whether the graph has no node.
    pub fn is_empty(&self) -> bool {
        self.components.is_empty()
    }

    /// Component `k`'s nodes (`k < len()`).
    pub fn component(&self, k: usize) -> &[N] {
        &self.components[k]
    }

    /// The components, successors first.
    pub fn components(&self) -> impl ExactSizeIterator<Item = &[N]> + '_ {
        self.components.iter().map(Vec::as_slice)
    }

    /// Every node, component by component, successors first.
    pub fn nodes(&self) -> impl Iterator<Item = N> + '_ {
        self.components.iter().flatten().copied()
    }

    /// The index of the component of `n`, if `n` is a node.
    pub fn component_of(&self, n: N) -> Option<usize> {
        self.component_of[n].checked_sub(1).map(|k| k as usize)
    }

    /// Whether component `k` has a cycle (two nodes or more, or a node with an edge
    /// to itself).
    pub fn is_cyclic(&self, k: usize) -> bool {
        self.cyclic[k]
    }

    /// Whether `n` is a node on a cycle of the graph.
    pub fn on_cycle(&self, n: N) -> bool {
        self.component_of(n).is_some_and(|k| self.cyclic[k])
    }
}

/// The state of Tarjan's search.
struct Tarjan<N: EntityRef> {
    is_node: EntitySet<N>,
    /// The order in which nodes are reached, from 1 (0: not reached yet).
    index: SecondaryMap<N, u32>,
    /// The smallest index reachable through the search tree and one edge back into
    /// the stack.
    low: SecondaryMap<N, u32>,
    on_stack: EntitySet<N>,
    /// Nodes with an edge to themselves.
    self_loop: EntitySet<N>,
    /// Reached nodes whose component is not complete yet.
    stack: Vec<N>,
    counter: u32,
}

impl<N: EntityRef> Tarjan<N> {
    /// Numbers `n`, puts it on the stack and returns its frame: `n`, its successors
    /// among the nodes, and the next one to follow.
    fn visit<S, I>(&mut self, n: N, succs: &mut S) -> (N, Vec<N>, usize)
    where
        S: FnMut(N) -> I,
        I: IntoIterator<Item = N>,
    {
        self.counter += 1;
        self.index[n] = self.counter;
        self.low[n] = self.counter;
        self.stack.push(n);
        self.on_stack.insert(n);
        let next = succs(n)
            .into_iter()
            .filter(|&s| self.is_node.contains(s))
            .collect();
        (n, next, 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::entities::Block;
    use proptest::prelude::*;

    fn blocks(n: usize) -> Vec<Block> {
        (0..n).map(Block::new).collect()
    }

    /// `reach[a][b]`: whether a path of one edge or more leads from `a` to `b`
    /// (Floyd–Warshall's transitive closure).
    fn reachability(n: usize, edges: &[(usize, usize)]) -> Vec<Vec<bool>> {
        let mut reach = vec![vec![false; n]; n];
        for &(a, b) in edges {
            reach[a][b] = true;
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

    fn sccs(n: usize, edges: &[(usize, usize)]) -> (Sccs<Block>, Vec<Block>) {
        let b = blocks(n);
        let succs: Vec<Vec<Block>> = (0..n)
            .map(|i| {
                edges
                    .iter()
                    .filter(|&&(a, _)| a == i)
                    .map(|&(_, c)| b[c])
                    .collect()
            })
            .collect();
        (
            Sccs::new(b.iter().copied(), |x: Block| succs[x.index()].clone()),
            b,
        )
    }

    #[test]
    fn a_loop_with_a_self_loop_inside_and_a_tail() {
        // 0 -> 1 -> 2 -> 1, 2 -> 3 -> 3, 4 alone.
        let (s, b) = sccs(5, &[(0, 1), (1, 2), (2, 1), (2, 3), (3, 3)]);
        assert_eq!(s.len(), 4);
        assert_eq!(s.component(0), [b[3]]);
        assert_eq!(s.component(1), [b[2], b[1]]);
        assert_eq!(s.component(2), [b[0]]);
        assert_eq!(s.component(3), [b[4]]);
        assert_eq!(
            (0..4).map(|k| s.is_cyclic(k)).collect::<Vec<_>>(),
            [true, true, false, false]
        );
        assert_eq!(
            s.nodes().collect::<Vec<_>>(),
            [b[3], b[2], b[1], b[0], b[4]]
        );
        assert_eq!(s.component_of(Block::new(9)), None);
        assert!(!s.on_cycle(Block::new(9)));
    }

    #[test]
    fn edges_to_entities_that_are_not_nodes_are_ignored() {
        let b = blocks(3);
        // b0 <-> b2, but b2 is not a node.
        let s = Sccs::new([b[0], b[1], b[0]], |x: Block| {
            if x == b[0] {
                vec![b[2], b[1]]
            } else {
                vec![b[2]]
            }
        });
        assert_eq!(s.len(), 2);
        assert_eq!(s.component_of(b[2]), None);
        assert!(!s.on_cycle(b[0]));
    }

    #[test]
    fn a_long_chain_does_not_overflow_the_stack() {
        let n = 200_000;
        let b = blocks(n);
        let s = Sccs::new(b.iter().copied(), |x: Block| {
            let i = x.index();
            // A chain, closed into one cycle.
            [b[(i + 1) % n]]
        });
        assert_eq!(s.len(), 1);
        assert_eq!(s.component(0).len(), n);
        assert!(s.is_cyclic(0));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]

        #[test]
        fn matches_mutual_reachability(
            n in 1usize..10,
            raw in proptest::collection::vec((0usize..10, 0usize..10), 0..25),
        ) {
            let edges: Vec<(usize, usize)> =
                raw.into_iter().map(|(a, c)| (a % n, c % n)).collect();
            let (s, b) = sccs(n, &edges);
            let reach = reachability(n, &edges);
            let mut seen = 0;
            for k in 0..s.len() {
                seen += s.component(k).len();
                prop_assert!(!s.component(k).is_empty());
            }
            prop_assert_eq!(seen, n);
            for i in 0..n {
                let ci = s.component_of(b[i]).unwrap();
                prop_assert!(s.component(ci).contains(&b[i]));
                // On a cycle exactly when the node reaches itself.
                prop_assert_eq!(s.on_cycle(b[i]), reach[i][i]);
                for j in 0..n {
                    let cj = s.component_of(b[j]).unwrap();
                    let same = i == j || (reach[i][j] && reach[j][i]);
                    prop_assert_eq!(ci == cj, same, "{} and {}", i, j);
                    // Successors first: an edge leads to an earlier component.
                    if edges.contains(&(i, j)) {
                        prop_assert!(cj <= ci);
                    }
                }
            }
        }
    }
}
