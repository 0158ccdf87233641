//! Checkpointed loops, second step: the binomial rule of an outlined loop's call
//! (`docs/checkpointing.md`).
//!
//! The loop function `@f.loopK(%start, %n, %snaps, init..., live...)` made by
//! [`outline`](crate::outline) gets a rule of its own, written here with the
//! builder. With `T = max(n - start, 0)` steps and `s` snapshots (`%snaps` when
//! positive; else the rule's [`RuleConfig::checkpoint_bytes`] divided by a
//! snapshot's size, or `ceil(sqrt(T))`; at least 1, at most `T`):
//!
//! - The forward pass runs the steps with the step's primal, pushing a snapshot
//!   (the carried values, the step number, the snapshots left) where the optimal
//!   binomial schedule puts one on its first sweep (Griewank and Walther's
//!   revolve: [`split`](self) below is its choice of the next snapshot), then runs
//!   the last step with the step's forward pass, so its tape is on top.
//! - The pullback reverses the last step from that tape, then works down the
//!   snapshots: with the top snapshot at step `a` (`l` snapshots left) and steps
//!   `a..b` still to reverse, it pops it if `a == b`; reverses `b - 1` down to `a`
//!   one by one from it when `l == 1` or `b - a == 1` (each: the step's primal
//!   from `a` to `j`, its forward pass, its pullback); else puts it back, runs
//!   the primal to `m = a + split(b - a, l)` and pushes a snapshot there with
//!   `l - 1` left. Each step's rerun is counted by a `recompute` op.
//!
//! So the tape holds at most `s` snapshots and one step's tape, and the steps run
//! again are revolve's minimum for `T` and `s`: `t(T, s) - (T - 1)`, where `t`
//! is the number of forward steps of revolve's schedule (`r T - C(s + r, s - 1)`
//! with `C(s + r - 1, s) < T <= C(s + r, s)`).
//!
//! The rule's pullback takes, besides the usual parameters, the current cotangent
//! of each active float from outside the loop and returns it with the loop's
//! terms added (the caller sets it, rather than adding to it): each iteration's
//! terms are added in the order the unchecked loop's reverse adds them.

use gradlift_ir::{
    CmpPred, FuncId, Function, FunctionBuilder, Imm, Module, Opcode, Scalar, Type, Value, Variable,
};
use smallvec::SmallVec;

use crate::config::{Activity, RetActivity, RuleConfig, freezable};
use crate::error::InternalError;
use crate::outline::LoopFn;
use crate::rrule::slice_params;

/// The three first parameters of a loop function: start, bound, snapshots.
const FIXED: usize = 3;

/// Which carried values get cotangents in the step's rule of a loop function
/// called under `config`: the floats the loop written out would make active.
/// Useful: a result the caller seeds, and what a useful one's next value
/// depends on in the step (to a fixed point); varied: one of the arguments it
/// depends on is active (`active` or `dup`) in the call.
pub(crate) fn active_carried(lf: &LoopFn, config: &RuleConfig) -> Vec<bool> {
    let nc = lf.carried.len();
    let mut useful: Vec<bool> = (0..nc)
        .map(|j| lf.carried[j].is_float() && config.is_seeded(1 + j))
        .collect();
    loop {
        let mut changed = false;
        for j in 0..nc {
            if !useful[j] {
                continue;
            }
            for &k in lf.step_deps.get(j).map_or(&[][..], |v| &v[..]) {
                if (1..=nc).contains(&k) && lf.carried[k - 1].is_float() && !useful[k - 1] {
                    useful[k - 1] = true;
                    changed = true;
                }
            }
        }
        if !changed {
            break;
        }
    }
    (0..nc)
        .map(|j| {
            useful[j]
                && lf.deps.get(1 + j).is_some_and(|d| {
                    d.iter().any(|&x| {
                        matches!(
                            config.params.get(x),
                            Some(Activity::Active | Activity::Dup | Activity::DupNoNeed)
                        )
                    })
                })
        })
        .collect()
}

/// The configuration of the step's rule for a loop function called under
/// `config`: the counter `const`, the carried floats of [`active_carried`]
/// `active` (the others `const`), the values from outside as the call passes
/// them; the seeds: the active carried values' next values and the active
/// floats from outside.
pub(crate) fn step_config(lf: &LoopFn, config: &RuleConfig) -> RuleConfig {
    let nc = lf.carried.len();
    let carried = active_carried(lf, config);
    let mut params = vec![Activity::Const];
    params.extend(
        carried
            .iter()
            .map(|&a| if a { Activity::Active } else { Activity::Const }),
    );
    let mut frozen = vec![false; 1 + nc];
    for (j, &t) in lf.live.iter().enumerate() {
        let a = config
            .params
            .get(FIXED + nc + j)
            .copied()
            .unwrap_or(Activity::Const);
        params.push(match a {
            Activity::DupNoNeed => Activity::Dup,
            a => a,
        });
        frozen.push(freezable(t) && config.is_frozen(FIXED + nc + j));
    }
    let inout = inout(lf, config);
    let seeded: Vec<bool> = carried
        .iter()
        .copied()
        .chain(lf.passthrough.iter().map(|j| inout.contains(j)))
        .collect();
    let any = seeded.iter().any(|&x| x);
    RuleConfig {
        params,
        ret: if any {
            RetActivity::Active
        } else {
            RetActivity::Const
        },
        needs_primal: true,
        debug: config.debug,
        check_nan: config.check_nan,
        tape: config.tape,
        frozen,
        fuse: false,
        checkpoint_bytes: config.checkpoint_bytes,
        seeded: Some(seeded),
    }
}

/// The values from outside (indices into [`LoopFn::live`]) whose cotangents the
/// rule's pullback takes and returns: the `active` floats.
pub(crate) fn inout(lf: &LoopFn, config: &RuleConfig) -> Vec<usize> {
    let nc = lf.carried.len();
    lf.passthrough
        .iter()
        .copied()
        .filter(|&j| config.params.get(FIXED + nc + j) == Some(&Activity::Active))
        .collect()
}

/// [`inout`] as arguments of the loop function (by parameter index).
pub(crate) fn inout_args(lf: &LoopFn, config: &RuleConfig) -> Vec<usize> {
    let first = FIXED + lf.carried.len();
    inout(lf, config).into_iter().map(|j| first + j).collect()
}

/// Whether the value from outside `j` is copied onto the tape by the forward
/// pass (a slice the pullback may not find unchanged: all but frozen ones).
fn copied(lf: &LoopFn, config: &RuleConfig, j: usize) -> bool {
    let t = lf.live[j];
    t.is_slice() && !(freezable(t) && config.is_frozen(FIXED + lf.carried.len() + j))
}

/// What writing a loop's rule needs.
pub(crate) struct Revolve<'a> {
    pub(crate) lf: &'a LoopFn,
    pub(crate) config: &'a RuleConfig,
    pub(crate) step_config: &'a RuleConfig,
    pub(crate) step_fwd: FuncId,
    pub(crate) step_rvs: FuncId,
    pub(crate) split: FuncId,
}

/// The zero of a float type.
fn zero(b: &mut FunctionBuilder<'_>, t: Type) -> Value {
    match t {
        Type::F32 => b.const_inst(Scalar::F32(0.0)),
        _ => b.fconst(0.0),
    }
}

/// `b.results(inst)[0]`, or an internal error.
fn result(b: &FunctionBuilder<'_>, inst: gradlift_ir::Inst) -> Result<Value, InternalError> {
    b.results(inst)
        .first()
        .copied()
        .ok_or_else(|| InternalError::NoResult {
            opcode: "an op".into(),
        })
}

/// A variable of type `t` defined as `v`.
fn var(b: &mut FunctionBuilder<'_>, name: &str, t: Type, v: Value) -> Variable {
    let x = b.declare_named_var(name, t);
    b.def_var(x, v);
    x
}

/// `max(lo, min(x, hi))` of `i64`s.
fn clamp(b: &mut FunctionBuilder<'_>, x: Value, lo: Value, hi: Value) -> Value {
    let above = b.icmp(CmpPred::Gt, x, hi);
    let x = b.select(above, hi, x);
    let below = b.icmp(CmpPred::Lt, x, lo);
    b.select(below, lo, x)
}

impl Revolve<'_> {
    /// Runs the step's primal from the carried values `st` at step `from` to step
    /// `to` (absolute numbers `start + k`), with the values from outside `live`.
    fn advance(
        &self,
        b: &mut FunctionBuilder<'_>,
        start: Value,
        (from, to): (Value, Value),
        st: &[Value],
        live: &[Value],
    ) -> Vec<Value> {
        let step = self.lf.step;
        b.counted_loop(from, to, st, |b, q, st| {
            let i = b.iadd(start, q);
            let mut args = vec![i];
            args.extend_from_slice(st);
            args.extend_from_slice(live);
            b.call(step, &args)[..st.len()].to_vec()
        })
    }

    /// `split(n, l)`: 1 when `n <= l + 1` (a snapshot per step: the schedule's
    /// choice then, without the call), else `@revolve.split`'s.
    fn split(&self, b: &mut FunctionBuilder<'_>, n: Value, l: Value) -> Value {
        let one = b.iconst(1);
        let m = var(b, "m", Type::I64, one);
        let l1 = b.iadd(l, one);
        let few = b.icmp(CmpPred::Le, n, l1);
        let call = b.create_block("split.call");
        let done = b.create_block("split.done");
        b.br(few, done, call);
        b.switch_to(call);
        let r = b.call(self.split, &[n, l]);
        b.def_var(m, r[0]);
        b.jump(done);
        b.switch_to(done);
        b.use_var(m)
    }

    /// Pushes a snapshot: the carried values, the step number, the snapshots left.
    fn push_snapshot(&self, b: &mut FunctionBuilder<'_>, st: &[Value], k: Value, lev: Value) {
        for &v in st {
            b.push(v);
        }
        b.push(k);
        b.push(lev);
    }

    /// Writes the forward pass `@f.loopK.fwd` (declared as `id` in `out`).
    pub(crate) fn forward(&self, out: &Module, id: FuncId) -> Result<Function, InternalError> {
        let step = self.lf.step;
        let lf = self.lf;
        let nc = lf.carried.len();
        let mut b = FunctionBuilder::new(out, id);
        let p: Vec<Value> = (0..FIXED + nc + lf.live.len())
            .map(|j| b.param(j))
            .collect();
        let (start, n, snaps) = (p[0], p[1], p[2]);
        b.named("start", start);
        b.named("n", n);
        b.named("snapshots", snaps);
        let live: Vec<Value> = p[FIXED + nc..].to_vec();
        // T, and the snapshots s.
        let zero_i = b.iconst(0);
        let one = b.iconst(1);
        let t = b.isub(n, start);
        let neg = b.icmp(CmpPred::Lt, t, zero_i);
        let t = b.select(neg, zero_i, t);
        let t = b.named("T", t);
        let auto = match self.config.checkpoint_bytes {
            Some(bytes) => {
                let per = 8 * (nc as u64 + 2);
                b.iconst(i64::try_from(bytes / per).unwrap_or(i64::MAX))
            }
            None => {
                let tf = b.cast(Type::F64, t);
                let r = b.sqrt(tf);
                let r = b.ceil(r);
                b.cast(Type::I64, r)
            }
        };
        let given = b.icmp(CmpPred::Gt, snaps, zero_i);
        let s = b.select(given, snaps, auto);
        let s = clamp(&mut b, s, one, t);
        let s = b.named("s", s);
        // Copies of the slices the pullback could find changed.
        let mut handles = Vec::new();
        for (j, &src) in live.iter().enumerate() {
            if !copied(lf, self.config, j) {
                continue;
            }
            handles.push(crate::checkpoint::copy_onto_tape(&mut b, src, lf.live[j])?);
        }
        let st: Vec<Variable> = lf
            .carried
            .iter()
            .enumerate()
            .map(|(j, &ty)| var(&mut b, "st", ty, p[FIXED + j]))
            .collect();
        let k = var(&mut b, "k", Type::I64, zero_i);
        let next = var(&mut b, "next", Type::I64, zero_i);
        let lev = var(&mut b, "lev", Type::I64, s);
        let main = b.create_block("sweep");
        let done = b.create_block("done");
        let any = b.icmp(CmpPred::Gt, t, zero_i);
        b.br(any, main, done);
        b.switch_to(main);
        let head = b.create_block("sweep.head");
        let body = b.create_block("sweep.body");
        let last = b.create_block("sweep.last");
        b.jump(head);
        b.switch_to(head);
        let kv = b.use_var(k);
        let t1 = b.isub(t, one);
        let more = b.icmp(CmpPred::Lt, kv, t1);
        b.br(more, body, last);
        // A step: the snapshot first where the schedule puts one.
        b.switch_to(body);
        self.maybe_snapshot(&mut b, &st, k, next, lev, t)?;
        let kv = b.use_var(k);
        let i = b.iadd(start, kv);
        let mut args = vec![i];
        args.extend(st.iter().map(|&x| b.use_var(x)));
        args.extend(live.iter().copied());
        let outs = b.call(step, &args);
        for (j, &x) in st.iter().enumerate() {
            b.def_var(x, outs[j]);
        }
        let k1 = b.iadd(kv, one);
        b.def_var(k, k1);
        b.jump(head);
        // The last step: its forward pass, whose tape the pullback starts from.
        b.switch_to(last);
        self.maybe_snapshot(&mut b, &st, k, next, lev, t)?;
        let kv = b.use_var(k);
        let i = b.iadd(start, kv);
        let mut args = vec![i];
        args.extend(st.iter().map(|&x| b.use_var(x)));
        args.extend(live.iter().copied());
        let outs = b.call(self.step_fwd, &args);
        for (j, &x) in st.iter().enumerate() {
            b.def_var(x, outs[j]);
        }
        b.jump(done);
        b.switch_to(done);
        for (&v, t) in live.iter().zip(&lf.live) {
            if t.is_scalar() {
                b.push(v);
            }
        }
        for &h in &handles {
            b.push(h);
        }
        b.push(start);
        b.push(t);
        let end = b.iadd(start, t);
        let mut rets = vec![end];
        rets.extend(st.iter().map(|&x| b.use_var(x)));
        b.ret(&rets);
        b.finish().map_err(InternalError::Build)
    }

    /// In the forward pass's sweep at step `k`: if `k` is where the schedule puts
    /// the next snapshot, pushes it and finds the one after (none when `lev` is 1
    /// or one step is left).
    fn maybe_snapshot(
        &self,
        b: &mut FunctionBuilder<'_>,
        st: &[Variable],
        k: Variable,
        next: Variable,
        lev: Variable,
        t: Value,
    ) -> Result<(), InternalError> {
        let snap = b.create_block("snap");
        let split = b.create_block("snap.split");
        let nosplit = b.create_block("snap.last");
        let after = b.create_block("snap.done");
        let kv = b.use_var(k);
        let nv = b.use_var(next);
        let is = b.icmp(CmpPred::Eq, kv, nv);
        b.br(is, snap, after);
        b.switch_to(snap);
        let vals: Vec<Value> = st.iter().map(|&x| b.use_var(x)).collect();
        let lv = b.use_var(lev);
        self.push_snapshot(b, &vals, kv, lv);
        let one = b.iconst(1);
        let left = b.isub(t, kv);
        let c1 = b.icmp(CmpPred::Gt, lv, one);
        let c2 = b.icmp(CmpPred::Gt, left, one);
        let ok = b.and(c1, c2);
        b.br(ok, split, nosplit);
        b.switch_to(split);
        let m = self.split(b, left, lv);
        let nk = b.iadd(kv, m);
        b.def_var(next, nk);
        let l1 = b.isub(lv, one);
        b.def_var(lev, l1);
        b.jump(after);
        b.switch_to(nosplit);
        let none = b.iconst(-1);
        b.def_var(next, none);
        b.jump(after);
        b.switch_to(after);
        Ok(())
    }

    /// Writes the pullback `@f.loopK.rvs` (declared as `id` in `out`; `sig` the
    /// loop function's signature).
    pub(crate) fn pullback(
        &self,
        out: &Module,
        id: FuncId,
        sig: &gradlift_ir::Signature,
    ) -> Result<Function, InternalError> {
        let step = self.lf.step;
        let (lf, config) = (self.lf, self.config);
        let nc = lf.carried.len();
        let mut b = FunctionBuilder::new(out, id);
        let slices = slice_params(sig, config);
        let dups: Vec<usize> = (0..sig.params.len())
            .filter(|&i| matches!(config.params[i], Activity::Dup | Activity::DupNoNeed))
            .collect();
        let float_results: Vec<usize> = (1..sig.results.len())
            .filter(|&r| sig.results[r].is_float() && config.is_seeded(r))
            .collect();
        let seeded = config.ret == RetActivity::Active;
        let inout = inout(lf, config);
        let mut k = 0;
        let mut next_param = |b: &mut FunctionBuilder<'_>| {
            let v = b.param(k);
            k += 1;
            v
        };
        let slice_vals: Vec<Value> = slices.iter().map(|_| next_param(&mut b)).collect();
        let shadows: Vec<Value> = dups.iter().map(|_| next_param(&mut b)).collect();
        let seeds: Vec<Value> = if seeded {
            float_results.iter().map(|_| next_param(&mut b)).collect()
        } else {
            Vec::new()
        };
        let inout_in: Vec<Value> = inout.iter().map(|_| next_param(&mut b)).collect();
        // What the forward pass pushed last.
        let t = b.pop(Type::I64);
        let t = b.named("T", t);
        let start = b.pop(Type::I64);
        let start = b.named("start", start);
        let mut live: Vec<Option<Value>> = vec![None; lf.live.len()];
        let copies: Vec<usize> = (0..lf.live.len())
            .filter(|&j| copied(lf, config, j))
            .collect();
        for &j in copies.iter().rev() {
            let elem = lf.live[j].elem().ok_or(InternalError::NotASlice {
                value: format!("live value {j}"),
            })?;
            let h = b.pop(Type::I64);
            let view = b.ins(Opcode::TapeView, Imm::Type(elem.ty()), &[h]);
            live[j] = Some(result(&b, view)?);
        }
        for j in (0..lf.live.len()).rev() {
            if lf.live[j].is_scalar() {
                live[j] = Some(b.pop(lf.live[j]));
            }
        }
        for (s, &i) in slices.iter().enumerate() {
            let j = i - FIXED - nc;
            if live[j].is_none() {
                live[j] = Some(slice_vals[s]);
            }
        }
        let live: Vec<Value> = live
            .into_iter()
            .enumerate()
            .map(|(j, v)| {
                v.ok_or(InternalError::NotSaved {
                    value: format!("the value from outside {j} of a checkpointed loop"),
                })
            })
            .collect::<Result<_, _>>()?;
        // The cotangents: of the carried floats, and of the active floats from
        // outside (their running sums).
        let active = active_carried(lf, config);
        let carried_floats: Vec<usize> = (0..nc).filter(|&j| active[j]).collect();
        let mut ct: Vec<Variable> = Vec::new();
        for &j in &carried_floats {
            let v = match float_results.iter().position(|&r| r == 1 + j) {
                Some(n) if seeded => seeds[n],
                _ => zero(&mut b, lf.carried[j]),
            };
            ct.push(var(&mut b, "ct", lf.carried[j], v));
        }
        let acc: Vec<Variable> = inout
            .iter()
            .zip(&inout_in)
            .map(|(&j, &v)| var(&mut b, "acc", lf.live[j], v))
            .collect();
        // The step's pullback's fixed arguments.
        let step_sig = out.sig(step).clone();
        let step_slices: Vec<Value> = slice_params(&step_sig, self.step_config)
            .iter()
            .map(|&i| live[i - 1 - nc])
            .collect();
        let step_shadows: Vec<Value> = shadows.clone();
        let finish = b.create_block("finish");
        let work = b.create_block("reverse");
        let zero_i = b.iconst(0);
        let any = b.icmp(CmpPred::Gt, t, zero_i);
        b.br(any, work, finish);
        b.switch_to(work);
        self.reverse_step(&mut b, &ct, &acc, &step_slices, &step_shadows)?;
        let one = b.iconst(1);
        let t1 = b.isub(t, one);
        let bvar = var(&mut b, "b", Type::I64, t1);
        let top = b.create_block("top");
        b.jump(top);
        // The top snapshot.
        b.switch_to(top);
        let lev = b.pop(Type::I64);
        let lev = b.named("lev", lev);
        let a = b.pop(Type::I64);
        let a = b.named("a", a);
        let mut st: Vec<Value> = Vec::new();
        for &ty in lf.carried.iter().rev() {
            st.push(b.pop(ty));
        }
        st.reverse();
        let bv = b.use_var(bvar);
        let after = b.create_block("popped");
        let busy = b.create_block("segment");
        let same = b.icmp(CmpPred::Eq, bv, a);
        b.br(same, after, busy);
        b.switch_to(busy);
        let by_one = b.create_block("one_by_one");
        let split = b.create_block("split");
        let l1 = b.icmp(CmpPred::Eq, lev, one);
        let len = b.isub(bv, a);
        let n1 = b.icmp(CmpPred::Eq, len, one);
        let single = b.or(l1, n1);
        b.br(single, by_one, split);
        // Steps b - 1 down to a, each from a.
        b.switch_to(by_one);
        let jv0 = b.isub(bv, one);
        let j = var(&mut b, "j", Type::I64, jv0);
        let jhead = b.create_block("one_by_one.head");
        let jbody = b.create_block("one_by_one.body");
        b.jump(jhead);
        b.switch_to(jhead);
        let jv = b.use_var(j);
        let more = b.icmp(CmpPred::Ge, jv, a);
        b.br(more, jbody, after);
        b.switch_to(jbody);
        let jv = b.use_var(j);
        let st2 = self.advance(&mut b, start, (a, jv), &st, &live);
        let i = b.iadd(start, jv);
        let mut args = vec![i];
        args.extend(st2.iter().copied());
        args.extend(live.iter().copied());
        b.call(self.step_fwd, &args);
        let ran = b.isub(jv, a);
        b.ins(Opcode::Recompute, Imm::None, &[ran]);
        self.reverse_step(&mut b, &ct, &acc, &step_slices, &step_shadows)?;
        let j1 = b.isub(jv, one);
        b.def_var(j, j1);
        b.jump(jhead);
        // A new snapshot at a + split(b - a, lev).
        b.switch_to(split);
        let m = self.split(&mut b, len, lev);
        let m = b.iadd(a, m);
        let st2 = self.advance(&mut b, start, (a, m), &st, &live);
        let ran = b.isub(m, a);
        b.ins(Opcode::Recompute, Imm::None, &[ran]);
        self.push_snapshot(&mut b, &st, a, lev);
        let lev1 = b.isub(lev, one);
        self.push_snapshot(&mut b, &st2, m, lev1);
        b.jump(top);
        // The snapshot at a is done with.
        b.switch_to(after);
        b.def_var(bvar, a);
        let bottom = b.icmp(CmpPred::Eq, a, zero_i);
        b.br(bottom, finish, top);
        b.switch_to(finish);
        let mut rets = Vec::new();
        for i in 0..sig.params.len() {
            if config.params[i] != Activity::Active {
                continue;
            }
            if (FIXED..FIXED + nc).contains(&i) {
                let j = i - FIXED;
                match carried_floats.iter().position(|&c| c == j) {
                    Some(n) => rets.push(b.use_var(ct[n])),
                    // Not active in the loop: nothing flows back.
                    None => rets.push(zero(&mut b, lf.carried[j])),
                }
            } else {
                let j = i - FIXED - nc;
                let n =
                    inout
                        .iter()
                        .position(|&x| x == j)
                        .ok_or_else(|| InternalError::NotSaved {
                            value: format!("the cotangent of value from outside {j}"),
                        })?;
                rets.push(b.use_var(acc[n]));
            }
        }
        b.ret(&rets);
        b.finish().map_err(InternalError::Build)
    }

    /// The reverse of one step whose forward pass just ran: the step's pullback,
    /// seeded with the carried values' cotangents and the running sums of the
    /// floats from outside (zero for the inactive ones); its results are the new
    /// ones.
    fn reverse_step(
        &self,
        b: &mut FunctionBuilder<'_>,
        ct: &[Variable],
        acc: &[Variable],
        slices: &[Value],
        shadows: &[Value],
    ) -> Result<(), InternalError> {
        let lf = self.lf;
        let inout = inout(lf, self.config);
        let mut args: SmallVec<[Value; 8]> = SmallVec::new();
        args.extend(slices.iter().copied());
        args.extend(shadows.iter().copied());
        if self.step_config.ret == RetActivity::Active {
            // The seeds of the step's results that get one: the active carried
            // values' (in order), then the active floats from outside.
            args.extend(ct.iter().map(|&x| b.use_var(x)));
            for &j in &lf.passthrough {
                if let Some(n) = inout.iter().position(|&x| x == j) {
                    args.push(b.use_var(acc[n]));
                }
            }
        }
        let outs = b.call(self.step_rvs, &args);
        let expected = ct.len() + acc.len();
        if outs.len() != expected {
            return Err(InternalError::NotSaved {
                value: format!(
                    "the step's pullback returns {} cotangents, not {expected}",
                    outs.len()
                ),
            });
        }
        for (n, &x) in ct.iter().enumerate() {
            b.def_var(x, outs[n]);
        }
        for (n, &x) in acc.iter().enumerate() {
            b.def_var(x, outs[ct.len() + n]);
        }
        Ok(())
    }
}

/// Writes `@revolve.split(%n, %s) -> %m` (declared as `id` in `out`): where the
/// optimal binomial schedule puts the next snapshot, `m` steps after the current
/// one, to reverse `n >= 2` steps with `s >= 2` snapshots (the current one
/// included). Revolve's rule (Griewank and Walther, Algorithm 799): with `r` the
/// least number such that `C(s + r, s) >= n` and `β(a, b) = C(a + b, a)`,
/// `m = β(s, r - 2)` if `n <= β(s, r - 1) + β(s - 2, r - 1)`, else `β(s, r - 1)`
/// if `n >= β(s, r) - β(s - 3, r)`, else `n - β(s - 1, r - 1) - β(s - 2, r - 1)`;
/// at least 1. Binomials by exact products and divisions; `n` below 2^31 keeps
/// them in range.
pub(crate) fn split_fn(out: &Module, id: FuncId) -> Result<Function, InternalError> {
    let mut b = FunctionBuilder::new(out, id);
    let n = b.param(0);
    let n = b.named("n", n);
    let s = b.param(1);
    let s = b.named("s", s);
    let (zero, one, two, three) = (b.iconst(0), b.iconst(1), b.iconst(2), b.iconst(3));
    let reps = var(&mut b, "reps", Type::I64, zero);
    let range = var(&mut b, "range", Type::I64, one);
    let head = b.create_block("head");
    let body = b.create_block("body");
    let done = b.create_block("done");
    b.jump(head);
    b.switch_to(head);
    let rv = b.use_var(range);
    let more = b.icmp(CmpPred::Lt, rv, n);
    b.br(more, body, done);
    b.switch_to(body);
    let r0 = b.use_var(reps);
    let r1 = b.iadd(r0, one);
    b.def_var(reps, r1);
    let rv = b.use_var(range);
    let rs = b.iadd(r1, s);
    let p = b.imul(rv, rs);
    let q = b.idiv(p, r1);
    b.def_var(range, q);
    b.jump(head);
    b.switch_to(done);
    let r = b.use_var(reps);
    let range = b.use_var(range);
    // bino1 = β(s, r - 1) = range r / (s + r)
    let sr = b.iadd(s, r);
    let t = b.imul(range, r);
    let bino1 = b.idiv(t, sr);
    // bino2 = β(s - 1, r - 1) = bino1 s / (s + r - 1)   (s >= 2)
    let sr1 = b.isub(sr, one);
    let t = b.imul(bino1, s);
    let bino2 = b.idiv(t, sr1);
    // bino3 = β(s - 2, r - 1) = bino2 (s - 1) / (s + r - 2), 1 when s = 2
    let s1 = b.isub(s, one);
    let sr2 = b.isub(sr, two);
    let t = b.imul(bino2, s1);
    let b3 = b.idiv(t, sr2);
    let s_gt2 = b.icmp(CmpPred::Gt, s, two);
    let bino3 = b.select(s_gt2, b3, one);
    // bino4 = β(s, r - 2) = bino2 (r - 1) / s
    let rm1 = b.isub(r, one);
    let t = b.imul(bino2, rm1);
    let bino4 = b.idiv(t, s);
    // bino5 = β(s - 3, r) = bino3 (s - 2) / r; 1 when s = 3, 0 when s = 2
    let s2 = b.isub(s, two);
    let t = b.imul(bino3, s2);
    let b5 = b.idiv(t, r);
    let s_gt3 = b.icmp(CmpPred::Gt, s, three);
    let b5 = b.select(s_gt3, b5, one);
    let s_lt3 = b.icmp(CmpPred::Lt, s, three);
    let bino5 = b.select(s_lt3, zero, b5);
    let lo = b.iadd(bino1, bino3);
    let c1 = b.icmp(CmpPred::Le, n, lo);
    let hi = b.isub(range, bino5);
    let c2 = b.icmp(CmpPred::Ge, n, hi);
    let mid = b.isub(n, bino2);
    let mid = b.isub(mid, bino3);
    let m = b.select(c2, bino1, mid);
    let m = b.select(c1, bino4, m);
    let small = b.icmp(CmpPred::Lt, m, one);
    let m = b.select(small, one, m);
    b.ret(&[m]);
    b.finish().map_err(InternalError::Build)
}
