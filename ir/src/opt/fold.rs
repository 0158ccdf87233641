//! Constant folding: instructions of constant operands become constants, algebraic
//! identities that hold exactly in IEEE and two's complement arithmetic simplify, and
//! a `br` on a constant becomes a `jump`.
//!
//! Values are computed by [`eval_scalar_op`], the interpreter's own code, so a folded
//! program computes bit for bit what it computed before. An instruction that would
//! fail at run time (`idiv` by zero) is left as it is: the error is the program's
//! behaviour. A `const` instruction's uses become literals where the text can write
//! the literal there.
//!
//! The identities (`x` any value; for floats, only those exact for every `x`,
//! `-0.0` and NaN included, so `x + 0.0` and `x * 0.0` stay):
//!
//! - floats: `x * 1.0`, `1.0 * x`, `x / 1.0`, `x + -0.0`, `-0.0 + x`, `x - 0.0`,
//!   `fmin x, x`, `fmax x, x` are `x`; `fneg (fneg x)` is `x`;
//! - integers: `x + 0`, `0 + x`, `x - 0`, `x * 1`, `1 * x`, `x / 1`, `x & -1`,
//!   `x & x`, `x | 0`, `x | x`, `x ^ 0`, shifts by a multiple of 64 are `x`;
//!   `x * 0`, `0 * x`, `x - x`, `x ^ x`, `x & 0`, `x % 1`, `x % -1` are `0`;
//!   `x | -1` is `-1`; `ineg (ineg x)` is `x`; `icmp P x, x` is a constant;
//! - booleans: `and x, true`, `or x, false`, `xor x, false`, `and x, x`, `or x, x`,
//!   `not (not x)` are `x`; `and x, false` is `false`, `or x, true` is `true`,
//!   `xor x, x` is `false`;
//! - `select c, a, a` is `a`; `select true, a, b` is `a`; `select c, true, false`
//!   is `c`;
//! - `cast T x` of an `x` of type `T` is `x`; `bitcast (bitcast x)` is `x`.

use hashbrown::HashMap;

use crate::entities::Value;
use crate::flowgraph::ControlFlowGraph;
use crate::function::{Function, Terminator, ValueDef};
use crate::interp::eval_scalar_op;
use crate::module::Module;
use crate::ops::{CmpPred, Imm, Opcode};
use crate::types::Scalar;

use super::util::{self, Subst, const_of};

/// What folding did.
#[derive(Default)]
pub(crate) struct FoldStats {
    /// Instructions replaced by a constant or by one of their operands.
    pub(crate) folded: usize,
    /// `br`s on a constant turned into `jump`s.
    pub(crate) branches: usize,
    /// Uses of `const` instructions turned into literals.
    pub(crate) literals: usize,
    /// Blocks that became unreachable and were removed.
    pub(crate) blocks_removed: usize,
}

/// What an instruction simplifies to.
enum Repl {
    Value(Value),
    Const(Scalar),
}

/// Folds `func` (a function of `module`, taken out of it).
pub(crate) fn run(module: &Module, func: &mut Function) -> FoldStats {
    let mut stats = FoldStats::default();
    let cfg = ControlFlowGraph::new(func);
    let mut subst = Subst::default();
    // The constant each `const` instruction's result holds.
    let mut const_insts: HashMap<Value, Scalar> = HashMap::new();

    let known = |func: &Function, subst: &Subst, const_insts: &HashMap<Value, Scalar>, v: Value| {
        let v = subst.resolve(v);
        const_of(func, v).or_else(|| const_insts.get(&v).copied())
    };

    for &b in cfg.reverse_postorder() {
        let insts = func.blocks[b].insts.clone();
        let mut keep = Vec::with_capacity(insts.len());
        for inst in insts {
            let d = &func.insts[inst];
            let op = d.opcode;
            if op == Opcode::Const {
                if let (Imm::Const(c), [r]) = (d.imm, d.results.as_slice()) {
                    const_insts.insert(*r, c);
                }
                keep.push(inst);
                continue;
            }
            if d.results.len() != 1 {
                keep.push(inst);
                continue;
            }
            let r = d.results[0];
            let rty = func.values[r].ty;
            let args: Vec<Value> = d.args.iter().map(|&a| subst.resolve(a)).collect();
            let consts: Vec<Option<Scalar>> = args
                .iter()
                .map(|&a| known(func, &subst, &const_insts, a))
                .collect();
            let imm = d.imm;
            let mut repl = None;
            if consts.iter().all(Option::is_some)
                && let Some(Ok(c)) = eval_scalar_op(
                    op,
                    imm,
                    &consts.iter().map(|c| c.unwrap()).collect::<Vec<_>>(),
                )
                && c.ty() == rty
            {
                repl = Some(Repl::Const(c));
            }
            if repl.is_none() {
                repl = identity(func, op, imm, &args, &consts, &subst);
            }
            let repl = match repl {
                Some(Repl::Value(v)) => match const_of(func, v) {
                    Some(c) => Some(Repl::Const(c)),
                    None if func.values[v].ty == rty => Some(Repl::Value(v)),
                    None => None,
                },
                other => other,
            };
            match repl {
                Some(Repl::Const(c)) => {
                    let k = func.make_const(c);
                    subst.insert(r, k);
                    stats.folded += 1;
                }
                Some(Repl::Value(v)) => {
                    subst.insert(r, v);
                    stats.folded += 1;
                }
                None => keep.push(inst),
            }
        }
        func.blocks[b].insts = keep;
    }

    // Branches on constants.
    for &b in cfg.reverse_postorder() {
        let Some(Terminator::Br {
            cond,
            then_dest,
            else_dest,
        }) = func.blocks[b].term.clone()
        else {
            continue;
        };
        let Some(Scalar::Bool(c)) = known(func, &subst, &const_insts, cond) else {
            continue;
        };
        let (taken, other) = if c {
            (then_dest, else_dest)
        } else {
            (else_dest, then_dest)
        };
        func.blocks[b].term = Some(Terminator::Jump(taken));
        if other != taken {
            for phi in &mut func.blocks[other].phis {
                phi.incoming.retain(|(p, _)| *p != b);
            }
        }
        stats.branches += 1;
    }

    subst.apply(module, func);
    stats.literals = propagate_const_insts(module, func, &const_insts);
    if stats.branches > 0 {
        stats.blocks_removed = util::remove_unreachable(func);
    }
    stats
}

/// Turns uses of `const` instructions' results into literals where the literal reads
/// back as that constant. Returns how many uses changed.
fn propagate_const_insts(
    module: &Module,
    func: &mut Function,
    consts: &HashMap<Value, Scalar>,
) -> usize {
    if consts.is_empty() {
        return 0;
    }
    let lookup = |v: Value| consts.get(&v).copied();
    let mut changed = 0;
    let layout = func.layout.clone();
    for &b in &layout {
        // Phis, `br` and `ret` take a constant of their value's type as a literal.
        let mut phis = core::mem::take(&mut func.blocks[b].phis);
        for phi in &mut phis {
            for (_, v) in &mut phi.incoming {
                if let Some(c) = lookup(*v) {
                    *v = func.make_const(c);
                    changed += 1;
                }
            }
        }
        func.blocks[b].phis = phis;
        let mut term = func.blocks[b].term.take();
        match &mut term {
            Some(Terminator::Br { cond, .. }) => {
                if let Some(c) = lookup(*cond) {
                    *cond = func.make_const(c);
                    changed += 1;
                }
            }
            Some(Terminator::Ret(vals)) => {
                for v in vals.iter_mut() {
                    if let Some(c) = lookup(*v) {
                        *v = func.make_const(c);
                        changed += 1;
                    }
                }
            }
            _ => {}
        }
        func.blocks[b].term = term;
        let insts = func.blocks[b].insts.clone();
        for inst in insts {
            for k in 0..func.insts[inst].args.len() {
                let v = func.insts[inst].args[k];
                let Some(c) = lookup(v) else { continue };
                let lit = func.make_const(c);
                func.insts[inst].args[k] = lit;
                let expected = crate::parser::literal_types(module, func, inst);
                let ok = func.insts[inst].args.iter().zip(&expected).all(|(&a, t)| {
                    match (const_of(func, a), t) {
                        (Some(c), Some(t)) => c.ty() == *t,
                        _ => true,
                    }
                });
                if ok {
                    changed += 1;
                } else {
                    func.insts[inst].args[k] = v;
                }
            }
        }
    }
    changed
}

fn is_f(c: Option<Scalar>, x: f64) -> bool {
    match c {
        Some(Scalar::F64(v)) => v.to_bits() == x.to_bits(),
        Some(Scalar::F32(v)) => v.to_bits() == (x as f32).to_bits(),
        _ => false,
    }
}

fn is_i(c: Option<Scalar>, x: i64) -> bool {
    matches!(c, Some(Scalar::I64(v)) if v == x)
}

fn is_b(c: Option<Scalar>, x: bool) -> bool {
    matches!(c, Some(Scalar::Bool(v)) if v == x)
}

/// The operand of the placed instruction defining `v` if it is `op` (of one
/// operand), after substitution.
fn unary_operand(func: &Function, subst: &Subst, v: Value, op: Opcode) -> Option<Value> {
    match func.values[v].def {
        ValueDef::Result(inst, 0) => {
            let d = &func.insts[inst];
            (d.opcode == op && d.args.len() == 1).then(|| subst.resolve(d.args[0]))
        }
        _ => None,
    }
}

/// What `op imm args` simplifies to by an exact identity, if anything.
fn identity(
    func: &Function,
    op: Opcode,
    imm: Imm,
    args: &[Value],
    consts: &[Option<Scalar>],
    subst: &Subst,
) -> Option<Repl> {
    use Repl::{Const, Value as V};
    let i0 = |x| Const(Scalar::I64(x));
    let bool_ = |x| Const(Scalar::Bool(x));
    let (a, b) = (args.first().copied(), args.get(1).copied());
    let (ca, cb) = (
        consts.first().copied().flatten(),
        consts.get(1).copied().flatten(),
    );
    let same = a.is_some() && a == b;
    let a = a?;
    Some(match op {
        Opcode::Fmul if is_f(cb, 1.0) => V(a),
        Opcode::Fmul if is_f(ca, 1.0) => V(b?),
        Opcode::Fdiv if is_f(cb, 1.0) => V(a),
        Opcode::Fadd if is_f(cb, -0.0) => V(a),
        Opcode::Fadd if is_f(ca, -0.0) => V(b?),
        Opcode::Fsub if is_f(cb, 0.0) => V(a),
        Opcode::Fmin | Opcode::Fmax if same => V(a),
        Opcode::Fneg => V(unary_operand(func, subst, a, Opcode::Fneg)?),
        Opcode::Iadd if is_i(cb, 0) => V(a),
        Opcode::Iadd if is_i(ca, 0) => V(b?),
        Opcode::Isub if is_i(cb, 0) => V(a),
        Opcode::Isub if same => i0(0),
        Opcode::Imul if is_i(cb, 1) => V(a),
        Opcode::Imul if is_i(ca, 1) => V(b?),
        Opcode::Imul if is_i(ca, 0) || is_i(cb, 0) => i0(0),
        Opcode::Idiv if is_i(cb, 1) => V(a),
        Opcode::Irem if is_i(cb, 1) || is_i(cb, -1) => i0(0),
        Opcode::Iand if is_i(ca, 0) || is_i(cb, 0) => i0(0),
        Opcode::Iand if is_i(cb, -1) => V(a),
        Opcode::Iand if is_i(ca, -1) => V(b?),
        Opcode::Iand | Opcode::Ior if same => V(a),
        Opcode::Ior if is_i(ca, -1) || is_i(cb, -1) => i0(-1),
        Opcode::Ior | Opcode::Ixor if is_i(cb, 0) => V(a),
        Opcode::Ior | Opcode::Ixor if is_i(ca, 0) => V(b?),
        Opcode::Ixor if same => i0(0),
        Opcode::Ishl | Opcode::Ishr => match cb {
            Some(Scalar::I64(s)) if (s as u32) & 63 == 0 => V(a),
            _ if is_i(ca, 0) => i0(0),
            _ => return None,
        },
        Opcode::Ineg => V(unary_operand(func, subst, a, Opcode::Ineg)?),
        Opcode::Icmp if same => match imm {
            Imm::Cmp(CmpPred::Eq | CmpPred::Le | CmpPred::Ge) => bool_(true),
            Imm::Cmp(CmpPred::Ne | CmpPred::Lt | CmpPred::Gt) => bool_(false),
            _ => return None,
        },
        Opcode::And if is_b(ca, false) || is_b(cb, false) => bool_(false),
        Opcode::And if is_b(cb, true) => V(a),
        Opcode::And if is_b(ca, true) => V(b?),
        Opcode::And | Opcode::Or if same => V(a),
        Opcode::Or if is_b(ca, true) || is_b(cb, true) => bool_(true),
        Opcode::Or | Opcode::Xor if is_b(cb, false) => V(a),
        Opcode::Or | Opcode::Xor if is_b(ca, false) => V(b?),
        Opcode::Xor if same => bool_(false),
        Opcode::Not => V(unary_operand(func, subst, a, Opcode::Not)?),
        Opcode::Select => {
            let (x, y) = (b?, args.get(2).copied()?);
            match ca {
                Some(Scalar::Bool(true)) => V(x),
                Some(Scalar::Bool(false)) => V(y),
                _ if x == y => V(x),
                _ if is_b(cb, true) && is_b(consts.get(2).copied().flatten(), false) => V(a),
                _ => return None,
            }
        }
        Opcode::Cast => match imm {
            Imm::Type(t) if func.values[a].ty == t => V(a),
            _ => return None,
        },
        Opcode::Bitcast => {
            let inner = unary_operand(func, subst, a, Opcode::Bitcast)?;
            match imm {
                Imm::Type(t) if func.values[inner].ty == t => V(inner),
                _ => return None,
            }
        }
        _ => return None,
    })
}
