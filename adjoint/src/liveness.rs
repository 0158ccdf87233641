//! Where a cotangent may be nonzero: the liveness of active values, counting only
//! the uses that send a cotangent back ([`CotangentLiveness`]).
//!
//! The pullback keeps cotangents in builder variables, and the builder finds a
//! variable's value by walking back from the read to the nearest definition. Were the
//! only definitions the zeros in the pullback's entry, the first read of a cotangent
//! in a distant reverse block would walk (and place phis) all the way back to it:
//! time and phis proportional to values × blocks. But a cotangent is known to be zero
//! wherever its value is dead. At the end of a primal block `C`, the cotangent of
//! the current instance of `v` is the sum of the contributions from uses executed
//! after that point; if `v` is not live out of `C`, there are none (a use of a later
//! instance belongs to that instance, whose cotangent was reset when the reverse
//! passed its definition). So the reverse of `C` may define `ct[v] = 0` on entry, a
//! no-op that bounds every walk by the live range of its value.
//!
//! The uses that count are those that send a cotangent back: an active operand of an
//! instruction whose result is active (or of a differentiated call, or the value of a
//! `store` into a slice with a shadow), an active incoming value of an active phi (a
//! use at the end of the predecessor), and an active returned value (its seed).
//! Liveness is computed per use by walking predecessors up to the definition
//! (path exploration), so its cost is the total size of the live ranges.

use cranelift_entity::SecondaryMap;
use gradlift_ir::{Block, Function, Value};
use hashbrown::HashSet;

use crate::activity::ActivityInfo;
use crate::plan::BlockStack;
use crate::stmt::{RevPhi, RevStmt};

/// For each live block, the active values whose cotangents the block's reverse sets
/// to zero on entry. See the [module docs](self).
#[derive(Clone, Debug, Default)]
pub(crate) struct CotangentLiveness {
    zero_on_entry: SecondaryMap<Block, Vec<Value>>,
}

/// The inputs of the analysis: the plan's pieces.
pub(crate) struct Inputs<'a> {
    /// The primal.
    pub(crate) func: &'a Function,
    /// Its activity.
    pub(crate) activity: &'a ActivityInfo,
    /// The live blocks, in layout order.
    pub(crate) live: &'a [Block],
    /// Predecessors of the live blocks.
    pub(crate) stack: &'a BlockStack,
    /// Per block, the reverse of each statement that has one.
    pub(crate) insts: &'a SecondaryMap<Block, Vec<RevStmt>>,
    /// Per block, the reverse of each active phi.
    pub(crate) phis: &'a SecondaryMap<Block, Vec<RevPhi>>,
    /// Per `ret` block, the seeded values.
    pub(crate) seeds: &'a SecondaryMap<Block, Vec<(Value, usize)>>,
    /// The active parameters' values (the reverse of the entry returns their
    /// cotangents).
    pub(crate) params: &'a [Value],
}

impl CotangentLiveness {
    /// Computes the analysis.
    pub(crate) fn new(inp: &Inputs<'_>) -> CotangentLiveness {
        let func = inp.func;
        let Some(&entry) = func.layout.first() else {
            return CotangentLiveness::default();
        };
        let mut def_block: SecondaryMap<Value, Option<Block>> = SecondaryMap::new();
        for &p in &func.params {
            def_block[p] = Some(entry);
        }
        for &b in inp.live {
            for phi in &func.blocks[b].phis {
                def_block[phi.value] = Some(b);
            }
            for &inst in &func.blocks[b].insts {
                for &r in &func.insts[inst].results {
                    def_block[r] = Some(b);
                }
            }
        }
        let mut walk = Walk {
            stack: inp.stack,
            def_block: &def_block,
            live_in: HashSet::new(),
            live_out: HashSet::new(),
            out_list: SecondaryMap::new(),
            work: Vec::new(),
        };
        // Uses inside blocks, and uses on edges (phi incoming values).
        let mut touched: SecondaryMap<Block, Vec<Value>> = SecondaryMap::new();
        for &c in inp.live {
            for r in &inp.insts[c] {
                touched[c].extend(r.taken(func, inp.activity));
                for v in r.added(func, inp.activity) {
                    touched[c].push(v);
                    walk.use_in(v, c);
                }
            }
            for &(v, _) in &inp.seeds[c] {
                touched[c].push(v);
                walk.use_in(v, c);
            }
            let preds = inp.stack.preds(c);
            for rp in &inp.phis[c] {
                touched[c].push(rp.phi);
                for (&p, inc) in preds.iter().zip(&rp.edges) {
                    if let Some(v) = *inc {
                        walk.use_at_end(v, p);
                    }
                }
            }
        }
        touched[entry].extend_from_slice(inp.params);
        walk.run();

        // Z(C) = (touched(C) ∪ live-out of C's predecessors) \ live-out(C).
        let mut zero_on_entry: SecondaryMap<Block, Vec<Value>> = SecondaryMap::new();
        for &c in inp.live {
            let mut seen = HashSet::new();
            let candidates = touched[c].iter().copied().chain(
                inp.stack
                    .preds(c)
                    .iter()
                    .flat_map(|&p| walk.out_list[p].iter().copied()),
            );
            for v in candidates {
                if !walk.live_out.contains(&(c, v)) && seen.insert(v) {
                    zero_on_entry[c].push(v);
                }
            }
        }
        CotangentLiveness { zero_on_entry }
    }

    /// The values whose cotangents the reverse of `b` sets to zero on entry.
    pub(crate) fn zero_on_entry(&self, b: Block) -> &[Value] {
        &self.zero_on_entry[b]
    }
}

/// The liveness walk (path exploration from each use to the definition).
struct Walk<'a> {
    stack: &'a BlockStack,
    def_block: &'a SecondaryMap<Value, Option<Block>>,
    live_in: HashSet<(Block, Value)>,
    live_out: HashSet<(Block, Value)>,
    out_list: SecondaryMap<Block, Vec<Value>>,
    work: Vec<(Block, Value)>,
}

impl Walk<'_> {
    /// `v` is used in `b` (not at its end: a phi edge is [`Walk::use_at_end`]).
    fn use_in(&mut self, v: Value, b: Block) {
        let Some(d) = self.def(v) else { return };
        if d != b && self.live_in.insert((b, v)) {
            self.work.push((b, v));
        }
    }

    /// `v` is used at the end of `b` (as the incoming value of a successor's phi).
    fn use_at_end(&mut self, v: Value, b: Block) {
        let Some(d) = self.def(v) else { return };
        if self.live_out.insert((b, v)) {
            self.out_list[b].push(v);
            if d != b && self.live_in.insert((b, v)) {
                self.work.push((b, v));
            }
        }
    }

    fn def(&self, v: Value) -> Option<Block> {
        self.def_block.get(v).copied().flatten()
    }

    fn run(&mut self) {
        while let Some((b, v)) = self.work.pop() {
            let d = self.def(v);
            for &p in self.stack.preds(b) {
                if self.live_out.insert((p, v)) {
                    self.out_list[p].push(v);
                    if d != Some(p) && self.live_in.insert((p, v)) {
                        self.work.push((p, v));
                    }
                }
            }
        }
    }
}
