//! The interpreter on modules that would not verify: whatever is malformed ends in
//! `ErrorKind::Malformed` naming the function and op, never in a panic, and never in
//! `ErrorKind::Internal` (an interpreter bug).

use gradlift_ir::interp::{ErrorKind, Interpreter, Limits, RunError, Val};
use gradlift_ir::ops::resolve;
use gradlift_ir::{
    Block, CmpPred, Elem, FuncId, Function, Imm, Module, Msg, Opcode, Scalar, Signature,
    Terminator, Type, Value,
};

const F64: Type = Type::F64;
const I64: Type = Type::I64;
const SF64: Type = Type::slice(Elem::F64);
const MF64: Type = Type::slice_mut(Elem::F64);

/// A function of signature `s` under construction, with an entry block.
fn start(s: &Signature) -> (Function, Block) {
    let mut f = Function::new(s);
    let entry = f.make_block(Some("entry"));
    f.append_block(entry);
    (f, entry)
}

fn inst(
    f: &mut Function,
    block: Block,
    op: Opcode,
    imm: Imm,
    args: &[Value],
    res: &[Type],
) -> Vec<Value> {
    let i = f.make_inst(op, imm, args, res);
    f.append_inst(block, i);
    f.insts[i].results.to_vec()
}

fn module_of(s: Signature, f: Function) -> (Module, FuncId) {
    let mut m = Module::new();
    let id = m.declare("bad", s).unwrap();
    m.define(id, f).unwrap();
    (m, id)
}

#[track_caller]
fn malformed(
    m: &Module,
    id: FuncId,
    args: &mut [Val],
    func: &str,
    op: &str,
    says: &str,
) -> RunError {
    let e = Interpreter::new(m).call(id, args).unwrap_err();
    let ErrorKind::Malformed(msg) = &e.kind else {
        panic!("expected a malformed-IR error, got {e}");
    };
    assert!(msg.contains(says), "{e}");
    assert_eq!((e.func.as_str(), e.op.as_str()), (func, op), "{e}");
    e
}

#[test]
fn a_block_without_a_terminator() {
    let s = Signature::new([F64], [F64]);
    let (mut f, entry) = start(&s);
    let x = f.params[0];
    inst(&mut f, entry, Opcode::Fneg, Imm::None, &[x], &[F64]);
    let (m, id) = module_of(s, f);
    malformed(
        &m,
        id,
        &mut [Val::F64(1.0)],
        "bad",
        "terminator",
        "no terminator",
    );
}

#[test]
fn an_operand_out_of_range() {
    let s = Signature::new([F64], [F64]);
    let (mut f, entry) = start(&s);
    let x = f.params[0];
    let r = inst(
        &mut f,
        entry,
        Opcode::Fadd,
        Imm::None,
        &[x, Value::from_u32(999)],
        &[F64],
    );
    f.set_terminator(entry, Terminator::Ret(r.into_iter().collect()));
    let (m, id) = module_of(s, f);
    malformed(
        &m,
        id,
        &mut [Val::F64(1.0)],
        "bad",
        "fadd",
        "does not exist",
    );
}

#[test]
fn an_instruction_out_of_range() {
    let s = Signature::new([], []);
    let (mut f, entry) = start(&s);
    f.blocks[entry].insts.push(gradlift_ir::Inst::from_u32(42));
    f.set_terminator(entry, Terminator::Ret(Default::default()));
    let (m, id) = module_of(s, f);
    malformed(&m, id, &mut [], "bad", "instruction", "does not exist");
}

#[test]
fn operands_of_the_wrong_type() {
    let s = Signature::new([I64, I64], [I64]);
    let (mut f, entry) = start(&s);
    let (a, b) = (f.params[0], f.params[1]);
    let r = inst(&mut f, entry, Opcode::Fadd, Imm::None, &[a, b], &[I64]);
    f.set_terminator(entry, Terminator::Ret(r.into_iter().collect()));
    let (m, id) = module_of(s, f);
    malformed(
        &m,
        id,
        &mut [Val::I64(1), Val::I64(2)],
        "bad",
        "fadd",
        "i64, i64",
    );
}

#[test]
fn a_value_used_before_its_definition() {
    let s = Signature::new([F64], [F64]);
    let (mut f, entry) = start(&s);
    let x = f.params[0];
    // %a = fadd %x, %b; %b = fneg %x
    let a = f.make_inst(Opcode::Fadd, Imm::None, &[x, x], &[F64]);
    let b = inst(&mut f, entry, Opcode::Fneg, Imm::None, &[x], &[F64]);
    f.insts[a].args[1] = b[0];
    f.insert_inst(entry, 0, a);
    let r = f.insts[a].results[0];
    f.set_terminator(entry, Terminator::Ret([r].into_iter().collect()));
    let (m, id) = module_of(s, f);
    malformed(
        &m,
        id,
        &mut [Val::F64(1.0)],
        "bad",
        "fadd",
        "before it is defined",
    );
}

#[test]
fn a_phi_without_a_value_for_the_edge_taken() {
    let s = Signature::new([F64], [F64]);
    let (mut f, entry) = start(&s);
    let join = f.make_block(Some("join"));
    f.append_block(join);
    let other = f.make_block(Some("other"));
    let x = f.params[0];
    let p = f.append_phi(join, F64, &[(other, x)]);
    f.set_terminator(entry, Terminator::Jump(join));
    f.set_terminator(join, Terminator::Ret([p].into_iter().collect()));
    let (m, id) = module_of(s, f);
    malformed(
        &m,
        id,
        &mut [Val::F64(1.0)],
        "bad",
        "jump",
        "no value for the edge from entry",
    );
}

#[test]
fn a_jump_to_a_block_that_does_not_exist() {
    let s = Signature::new([], []);
    let (mut f, entry) = start(&s);
    f.set_terminator(entry, Terminator::Jump(Block::from_u32(7)));
    let (m, id) = module_of(s, f);
    malformed(&m, id, &mut [], "bad", "jump", "does not exist");
}

#[test]
fn br_on_a_float_and_ret_of_the_wrong_count_or_type() {
    let s = Signature::new([F64], [F64]);
    let (mut f, entry) = start(&s);
    let x = f.params[0];
    f.set_terminator(
        entry,
        Terminator::Br {
            cond: x,
            then_dest: entry,
            else_dest: entry,
        },
    );
    let (m, id) = module_of(s.clone(), f);
    malformed(&m, id, &mut [Val::F64(1.0)], "bad", "br", "not a bool");

    let (mut f, entry) = start(&s);
    let x = f.params[0];
    f.set_terminator(entry, Terminator::Ret([x, x].into_iter().collect()));
    let (m, id) = module_of(s.clone(), f);
    malformed(&m, id, &mut [Val::F64(1.0)], "bad", "ret", "2 values");

    let (mut f, entry) = start(&s);
    let one = f.make_const(Scalar::I64(1));
    f.set_terminator(entry, Terminator::Ret([one].into_iter().collect()));
    let (m, id) = module_of(s, f);
    malformed(
        &m,
        id,
        &mut [Val::F64(1.0)],
        "bad",
        "ret",
        "returns i64 where",
    );
}

#[test]
fn a_store_through_a_read_only_slice() {
    let s = Signature::new([SF64], []);
    let (mut f, entry) = start(&s);
    let x = f.params[0];
    let zero = f.make_const(Scalar::I64(0));
    let v = f.make_const(Scalar::F64(1.0));
    inst(&mut f, entry, Opcode::Store, Imm::None, &[x, zero, v], &[]);
    f.set_terminator(entry, Terminator::Ret(Default::default()));
    let (m, id) = module_of(s, f);
    let mut args = [Val::F64s(vec![0.0])];
    malformed(&m, id, &mut args, "bad", "store", "read-only");
    assert_eq!(args, [Val::F64s(vec![0.0])]);
}

#[test]
fn a_read_only_slice_passed_for_a_mut_parameter() {
    let mut m = Module::new();
    let callee = m.declare("callee", Signature::new([MF64], [])).unwrap();
    let caller = m.declare("caller", Signature::new([SF64], [])).unwrap();
    let (mut f, entry) = start(&m.funcs[callee].sig);
    f.set_terminator(entry, Terminator::Ret(Default::default()));
    m.define(callee, f).unwrap();
    let (mut f, entry) = start(&m.funcs[caller].sig);
    let x = f.params[0];
    inst(&mut f, entry, Opcode::Call, Imm::Func(callee), &[x], &[]);
    f.set_terminator(entry, Terminator::Ret(Default::default()));
    m.define(caller, f).unwrap();
    malformed(
        &m,
        caller,
        &mut [Val::F64s(vec![])],
        "caller",
        "call",
        "must be mut [f64], found [f64]",
    );
}

#[test]
fn returning_a_buffer_the_function_allocated() {
    let s = Signature::new([I64], [MF64]);
    let (mut f, entry) = start(&s);
    let n = f.params[0];
    let a = inst(&mut f, entry, Opcode::Alloc, Imm::Type(F64), &[n], &[MF64]);
    f.set_terminator(entry, Terminator::Ret(a.into_iter().collect()));
    let (m, id) = module_of(s, f);
    malformed(&m, id, &mut [Val::I64(2)], "bad", "ret", "allocated");
}

#[test]
fn tape_ops_with_the_wrong_operand_or_immediate() {
    // push of a slice
    let s = Signature::new([SF64], []);
    let (mut f, entry) = start(&s);
    let x = f.params[0];
    inst(&mut f, entry, Opcode::Push, Imm::None, &[x], &[]);
    f.set_terminator(entry, Terminator::Ret(Default::default()));
    let (m, id) = module_of(s, f);
    malformed(&m, id, &mut [Val::F64s(vec![1.0])], "bad", "push", "[f64]");

    // pop of a slice type, tape_alloc and tape_view of bools, tape_alloc of a float
    // length, tape_view of a float or a slice (no handle)
    let s = Signature::new([SF64], []);
    let cases: [(Opcode, Type, Option<Scalar>, &str); 6] = [
        (Opcode::Pop, SF64, None, "pop of"),
        (
            Opcode::TapeAlloc,
            Type::Bool,
            Some(Scalar::I64(2)),
            "tape_alloc of",
        ),
        (
            Opcode::TapeView,
            Type::Bool,
            Some(Scalar::I64(2)),
            "tape_view of",
        ),
        (
            Opcode::TapeAlloc,
            F64,
            Some(Scalar::F64(2.0)),
            "operands of type f64",
        ),
        (
            Opcode::TapeView,
            F64,
            Some(Scalar::F64(2.0)),
            "operands of type f64",
        ),
        (Opcode::TapeView, F64, None, "operands of type [f64]"),
    ];
    for (op, ty, arg, says) in cases {
        let (mut f, entry) = start(&s);
        let args: Vec<Value> = match (op, arg) {
            (Opcode::Pop, _) => vec![],
            (_, Some(c)) => vec![f.make_const(c)],
            (_, None) => vec![f.params[0]],
        };
        inst(&mut f, entry, op, Imm::Type(ty), &args, &[MF64]);
        f.set_terminator(entry, Terminator::Ret(Default::default()));
        let (m, id) = module_of(s.clone(), f);
        let mut interp = Interpreter::new(&m);
        let e = interp.call(id, &mut [Val::F64s(vec![1.0])]).unwrap_err();
        assert!(
            matches!(&e.kind, ErrorKind::Malformed(msg) if msg.contains(says)),
            "{e}"
        );
        assert_eq!(e.op, op.name());
        assert_eq!(interp.tape().buffers, 0);
    }
}

#[test]
fn a_tape_handle_used_as_a_slice() {
    // `tape_alloc` typed as if it made a slice, then loaded from.
    let s = Signature::new([], [F64]);
    let (mut f, entry) = start(&s);
    let two = f.make_const(Scalar::I64(2));
    let zero = f.make_const(Scalar::I64(0));
    let a = inst(
        &mut f,
        entry,
        Opcode::TapeAlloc,
        Imm::Type(F64),
        &[two],
        &[MF64],
    );
    let v = inst(
        &mut f,
        entry,
        Opcode::Load,
        Imm::None,
        &[a[0], zero],
        &[F64],
    );
    f.set_terminator(entry, Terminator::Ret(v.into_iter().collect()));
    let (m, id) = module_of(s, f);
    malformed(
        &m,
        id,
        &mut [],
        "bad",
        "load",
        "load cannot take operands of type i64",
    );

    // ... or returned as one.
    let s = Signature::new([], [MF64]);
    let (mut f, entry) = start(&s);
    let two = f.make_const(Scalar::I64(2));
    let a = inst(
        &mut f,
        entry,
        Opcode::TapeAlloc,
        Imm::Type(F64),
        &[two],
        &[MF64],
    );
    f.set_terminator(entry, Terminator::Ret(a.into_iter().collect()));
    let (m, id) = module_of(s, f);
    let mut interp = Interpreter::new(&m);
    let e = interp.call(id, &mut []).unwrap_err();
    assert!(
        matches!(&e.kind, ErrorKind::Malformed(m) if m.contains("ret returns i64 where the function declares mut [f64]")),
        "{e}"
    );
    // The buffer went to the tape all the same.
    assert_eq!((interp.tape().buffers, interp.tape().bytes), (1, 16));
}

#[test]
fn a_returned_tape_view_comes_back_as_a_copy() {
    // The verifier refuses this; the buffer is alive all the same, so the interpreter
    // returns its contents, as for any slice.
    let s = Signature::new([F64], [MF64]);
    let (mut f, entry) = start(&s);
    let x = f.params[0];
    let (two, one) = (f.make_const(Scalar::I64(2)), f.make_const(Scalar::I64(1)));
    let h = inst(
        &mut f,
        entry,
        Opcode::TapeAlloc,
        Imm::Type(F64),
        &[two],
        &[I64],
    );
    let a = inst(
        &mut f,
        entry,
        Opcode::TapeView,
        Imm::Type(F64),
        &[h[0]],
        &[MF64],
    );
    inst(
        &mut f,
        entry,
        Opcode::Store,
        Imm::None,
        &[a[0], one, x],
        &[],
    );
    f.set_terminator(entry, Terminator::Ret(a.into_iter().collect()));
    let (m, id) = module_of(s, f);
    assert!(gradlift_ir::verify(&m).is_err());
    let mut interp = Interpreter::new(&m);
    let out = interp.call(id, &mut [Val::F64(4.5)]).unwrap();
    assert_eq!(out, [Val::F64s(vec![0.0, 4.5])]);
    assert_eq!((interp.tape().buffers, interp.tape().bytes), (1, 16));
}

#[test]
fn calls_to_functions_without_bodies() {
    let mut m = Module::new();
    let decl = m.declare("later", Signature::new([], [])).unwrap();
    let user = m.declare("user", Signature::new([], [])).unwrap();
    let (mut f, entry) = start(&m.funcs[user].sig);
    inst(&mut f, entry, Opcode::Call, Imm::Func(decl), &[], &[]);
    inst(
        &mut f,
        entry,
        Opcode::Call,
        Imm::Func(FuncId::from_u32(99)),
        &[],
        &[],
    );
    f.set_terminator(entry, Terminator::Ret(Default::default()));
    m.define(user, f).unwrap();
    malformed(
        &m,
        user,
        &mut [],
        "user",
        "call",
        "declared but not defined",
    );
    malformed(&m, decl, &mut [], "later", "", "declared but not defined");
    let e = Interpreter::new(&m)
        .call(FuncId::from_u32(99), &mut [])
        .unwrap_err();
    assert!(matches!(e.kind, ErrorKind::BadArguments(_)), "{e}");
}

#[test]
fn a_function_without_blocks_or_with_the_wrong_immediate() {
    let s = Signature::new([], [F64]);
    let (m, id) = module_of(s.clone(), Function::new(&s));
    malformed(&m, id, &mut [], "bad", "", "no blocks");

    let (mut f, entry) = start(&s);
    let r = inst(
        &mut f,
        entry,
        Opcode::Const,
        Imm::Cmp(CmpPred::Eq),
        &[],
        &[F64],
    );
    f.set_terminator(entry, Terminator::Ret(r.into_iter().collect()));
    let (m, id) = module_of(s.clone(), f);
    malformed(&m, id, &mut [], "bad", "const", "wrong immediate");

    let (mut f, entry) = start(&s);
    let one = f.make_const(Scalar::F64(1.0));
    let r = inst(&mut f, entry, Opcode::Fneg, Imm::None, &[one, one], &[F64]);
    f.set_terminator(entry, Terminator::Ret(r.into_iter().collect()));
    let (m, id) = module_of(s, f);
    malformed(&m, id, &mut [], "bad", "fneg", "takes 1 operands");
}

#[test]
fn trap_if_with_a_missing_message_or_a_condition_that_is_no_bool() {
    // A message not in the function's arena.
    let s = Signature::new([Type::Bool], []);
    let (mut f, entry) = start(&s);
    let c = f.params[0];
    inst(
        &mut f,
        entry,
        Opcode::TrapIf,
        Imm::Msg(Msg::from_u32(3)),
        &[c],
        &[],
    );
    f.set_terminator(entry, Terminator::Ret(Default::default()));
    let (m, id) = module_of(s.clone(), f);
    assert!(gradlift_ir::verify(&m).is_err());
    malformed(
        &m,
        id,
        &mut [Val::Bool(false)],
        "bad",
        "trap_if",
        "trap_if names msg3, which does not exist",
    );

    // The wrong immediate, a result, a condition of another type.
    let (mut f, entry) = start(&s);
    let c = f.params[0];
    inst(&mut f, entry, Opcode::TrapIf, Imm::None, &[c], &[]);
    f.set_terminator(entry, Terminator::Ret(Default::default()));
    let (m, id) = module_of(s.clone(), f);
    malformed(
        &m,
        id,
        &mut [Val::Bool(true)],
        "bad",
        "trap_if",
        "wrong immediate",
    );

    let (mut f, entry) = start(&s);
    let c = f.params[0];
    let msg = Imm::Msg(f.make_msg("m"));
    inst(&mut f, entry, Opcode::TrapIf, msg, &[c], &[Type::Bool]);
    f.set_terminator(entry, Terminator::Ret(Default::default()));
    let (m, id) = module_of(s, f);
    malformed(
        &m,
        id,
        &mut [Val::Bool(true)],
        "bad",
        "trap_if",
        "defines 0 values",
    );

    let s = Signature::new([I64], []);
    let (mut f, entry) = start(&s);
    let n = f.params[0];
    let msg = Imm::Msg(f.make_msg("m"));
    inst(&mut f, entry, Opcode::TrapIf, msg, &[n], &[]);
    f.set_terminator(entry, Terminator::Ret(Default::default()));
    let (m, id) = module_of(s, f);
    malformed(
        &m,
        id,
        &mut [Val::I64(1)],
        "bad",
        "trap_if",
        "trap_if tests i64, not a bool",
    );
}

// Random programs.

/// xorshift64*: a small seeded generator, so every failure names its seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
    fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[self.below(xs.len())]
    }
}

const TYPES: [Type; 9] = [
    Type::F64,
    Type::F32,
    Type::I64,
    Type::Bool,
    Type::slice(Elem::F64),
    Type::slice_mut(Elem::F64),
    Type::slice(Elem::I64),
    Type::slice_mut(Elem::I64),
    Type::slice_mut(Elem::F32),
];

fn random_scalar(rng: &mut Rng, ty: Type) -> Scalar {
    let small = rng.below(7) as i64 - 2;
    match ty {
        Type::F64 => Scalar::F64(rng.pick(&[0.0, -0.0, 1.5, -2.0, f64::NAN, 1e300, 3.0])),
        Type::F32 => Scalar::F32(rng.pick(&[0.0, 1.5, -2.0, f32::INFINITY])),
        Type::Bool => Scalar::Bool(rng.chance(50)),
        _ => Scalar::I64(if rng.chance(90) {
            small
        } else {
            rng.pick(&[i64::MIN, i64::MAX, 64, 1 << 40])
        }),
    }
}

fn random_val(rng: &mut Rng, ty: Type) -> Val {
    let n = rng.below(5);
    match ty {
        Type::Slice {
            elem: Elem::F64, ..
        } => Val::F64s((0..n).map(|i| i as f64 - 1.0).collect()),
        Type::Slice {
            elem: Elem::F32, ..
        } => Val::F32s((0..n).map(|i| i as f32 * 0.5).collect()),
        Type::Slice {
            elem: Elem::I64, ..
        } => Val::I64s((0..n as i64).collect()),
        t => Val::from(random_scalar(rng, t)),
    }
}

fn random_sig(rng: &mut Rng) -> Signature {
    let params = (0..rng.below(4))
        .map(|_| rng.pick(&TYPES))
        .collect::<Vec<_>>();
    let results = (0..rng.below(3))
        .map(|_| rng.pick(&TYPES[..4]))
        .collect::<Vec<_>>();
    Signature::new(params, results)
}

/// A random body for `sig`: mostly well-typed instructions over random values, random
/// phis and control flow, and now and then something malformed.
fn random_body(rng: &mut Rng, m: &Module, sig: &Signature) -> Function {
    let mut f = Function::new(sig);
    let nblocks = 1 + rng.below(4);
    let blocks: Vec<Block> = (0..nblocks)
        .map(|i| f.make_block(Some(&format!("b{i}"))))
        .collect();
    for &b in &blocks {
        if b == blocks[0] || rng.chance(95) {
            f.append_block(b);
        }
    }
    let mut pool: Vec<Value> = f.params.clone();
    for _ in 0..4 {
        let ty = rng.pick(&TYPES[..4]);
        let c = random_scalar(rng, ty);
        pool.push(f.make_const(c));
    }
    let funcs: Vec<FuncId> = m.funcs.keys().collect();
    // What this body has pushed so far, so that most of its pops match (else nearly
    // every pop would underflow), and the handles of its tape buffers with their
    // element types, so that most of its views name one (else nearly every view
    // would be of a forged handle).
    let mut pushed: Vec<Type> = Vec::new();
    let mut handles: Vec<(Type, Value)> = Vec::new();
    for &b in &blocks {
        if b != blocks[0] || rng.chance(5) {
            for _ in 0..rng.below(3) {
                let ty = rng.pick(&TYPES);
                let mut incoming: Vec<(Block, Value)> = Vec::new();
                let fit: Vec<Value> = pool
                    .iter()
                    .copied()
                    .filter(|&v| f.value_type(v) == ty)
                    .collect();
                for &p in &blocks {
                    if rng.chance(80) {
                        let v = if fit.is_empty() || rng.chance(5) {
                            rng.pick(&pool)
                        } else {
                            rng.pick(&fit)
                        };
                        incoming.push((p, v));
                    }
                }
                let v = f.append_phi(b, ty, &incoming);
                pool.push(v);
            }
        }
        for _ in 0..rng.below(8) {
            let op = rng.pick(Opcode::ALL);
            let imm = match (op.imm_kind(), rng.chance(97)) {
                (_, false) => Imm::Type(rng.pick(&TYPES)),
                (gradlift_ir::ops::ImmKind::None, _) => Imm::None,
                (gradlift_ir::ops::ImmKind::Cmp, _) => Imm::Cmp(rng.pick(&CmpPred::ALL)),
                (gradlift_ir::ops::ImmKind::Type, _) => Imm::Type(rng.pick(&TYPES)),
                (gradlift_ir::ops::ImmKind::Const, _) => {
                    let ty = rng.pick(&TYPES[..4]);
                    Imm::Const(random_scalar(rng, ty))
                }
                (gradlift_ir::ops::ImmKind::Func, _) => Imm::Func(if rng.chance(95) {
                    rng.pick(&funcs)
                } else {
                    FuncId::from_u32(77)
                }),
                (gradlift_ir::ops::ImmKind::Msg, _) => Imm::Msg(if rng.chance(95) {
                    f.make_msg(rng.pick(&["x < 0", "", "shadow \"s\"\n"]))
                } else {
                    Msg::from_u32(77)
                }),
            };
            let mut handle = None;
            let imm = match (op, imm) {
                (Opcode::Pop, Imm::Type(_)) if rng.chance(80) => {
                    pushed.pop().map_or(imm, Imm::Type)
                }
                (Opcode::TapeView, Imm::Type(_)) if !handles.is_empty() && rng.chance(80) => {
                    // Mostly the latest handle; now and then an older one.
                    let (t, h) = if rng.chance(70) {
                        handles[handles.len() - 1]
                    } else {
                        rng.pick(&handles)
                    };
                    handle = Some(h);
                    Imm::Type(t)
                }
                _ => imm,
            };
            let callee = match imm {
                Imm::Func(c) => m.funcs.get(c).map(|d| &d.sig),
                _ => None,
            };
            let arity = op.arity().or(callee.map(|s| s.params.len())).unwrap_or(0);
            // Try for well-typed operands; settle for anything now and then.
            let mut chosen = None;
            for attempt in 0..30 {
                let args: Vec<Value> = (0..arity).map(|_| rng.pick(&pool)).collect();
                let tys: Vec<Option<Type>> = args.iter().map(|&a| Some(f.value_type(a))).collect();
                match resolve(op, &imm, &tys, callee) {
                    Ok(t) => {
                        chosen = Some((args, t.results.to_vec()));
                        break;
                    }
                    Err(_) if attempt == 29 || rng.chance(1) => {
                        chosen = Some((args, vec![rng.pick(&TYPES)]));
                        break;
                    }
                    Err(_) => {}
                }
            }
            let Some((mut args, results)) = chosen else {
                continue;
            };
            if let (Some(h), Some(a)) = (handle, args.first_mut()) {
                *a = h;
            }
            if rng.chance(2) {
                args.push(Value::from_u32(10_000));
            }
            let i = f.make_inst(op, imm, &args, &results);
            f.append_inst(b, i);
            match (op, imm, args.first()) {
                (Opcode::Push, _, Some(&a)) => pushed.push(f.value_type(a)),
                (Opcode::TapeAlloc, Imm::Type(t), _) => {
                    if let Some(&h) = f.insts[i].results.first() {
                        handles.push((t, h));
                    }
                }
                _ => {}
            }
            pool.extend(f.insts[i].results.iter().copied());
        }
        let term = match rng.below(20) {
            0 => None,
            1..=6 => Some(Terminator::Jump(rng.pick(&blocks))),
            7..=12 => {
                let bools: Vec<Value> = pool
                    .iter()
                    .copied()
                    .filter(|&v| f.value_type(v) == Type::Bool)
                    .collect();
                let cond = if bools.is_empty() || rng.chance(3) {
                    rng.pick(&pool)
                } else {
                    rng.pick(&bools)
                };
                Some(Terminator::Br {
                    cond,
                    then_dest: rng.pick(&blocks),
                    else_dest: rng.pick(&blocks),
                })
            }
            _ => {
                let vals = sig
                    .results
                    .iter()
                    .map(|&ty| {
                        let fit: Vec<Value> = pool
                            .iter()
                            .copied()
                            .filter(|&v| f.value_type(v) == ty)
                            .collect();
                        if fit.is_empty() || rng.chance(3) {
                            rng.pick(&pool)
                        } else {
                            rng.pick(&fit)
                        }
                    })
                    .collect();
                Some(Terminator::Ret(vals))
            }
        };
        f.blocks[b].term = term;
    }
    f
}

/// What kind of outcome a call had: the number of results, or where and what kind
/// of error.
fn outcome(r: &Result<Vec<Val>, RunError>) -> Result<usize, (String, String, String)> {
    match r {
        Ok(v) => Ok(v.len()),
        Err(e) => {
            let kind = format!("{:?}", e.kind);
            let kind = kind.split(['(', ' ']).next().unwrap_or("").to_string();
            Err((e.func.clone(), e.op.clone(), kind))
        }
    }
}

fn random_module(rng: &mut Rng) -> Module {
    let mut m = Module::new();
    let sigs: Vec<Signature> = (0..3).map(|_| random_sig(rng)).collect();
    let ids: Vec<FuncId> = sigs
        .iter()
        .enumerate()
        .map(|(i, s)| m.declare(&format!("f{i}"), s.clone()).unwrap())
        .collect();
    m.declare_extern("ext", Signature::new([F64], [F64]))
        .unwrap();
    m.declare("undefined", Signature::new([], [])).unwrap();
    for (&id, s) in ids.iter().zip(&sigs) {
        let body = random_body(rng, &m, s);
        m.define(id, body).unwrap();
    }
    m
}

#[test]
fn random_programs_never_panic_and_never_hit_an_interpreter_bug() {
    let limits = Limits {
        max_depth: 30,
        fuel: Some(3_000),
    };
    let mut outcomes = [0usize; 3];
    // Calls from an empty tape that made tape buffers, errors of `tape_view`, and
    // `trap_if`s that fired.
    let (mut with_buffers, mut views_refused, mut traps) = (0usize, 0usize, 0usize);
    for seed in 1..=2_500u64 {
        let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
        let m = random_module(&mut rng);
        let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let mut interp = Interpreter::new(&m).with_limits(limits);
            if rng.chance(50) {
                interp.bind_extern("ext", |a| Ok(a.to_vec())).unwrap();
            }
            let mut results = Vec::new();
            for id in m.funcs.keys() {
                if m.function(id).is_none() && rng.chance(90) {
                    continue;
                }
                let mut args: Vec<Val> = m.funcs[id]
                    .sig
                    .params
                    .iter()
                    .map(|&t| random_val(&mut rng, t))
                    .collect();
                let before = args.clone();
                // The tape persists across calls: start both from the same one.
                let tape_before = interp.tape();
                let r1 = interp.call(id, &mut args);
                let tape_after = interp.tape();
                interp.reset_tape();
                let r2 = interp.call(id, &mut before.clone());
                // From an empty tape, the same call twice gives the same answer and
                // leaves the same tape (nothing else leaks between calls). Handles
                // differ between the two (a reset starts a new generation), so where
                // the call made tape buffers, only the kind of outcome is compared.
                if tape_before.scalars == 0 && tape_before.buffers == 0 {
                    if tape_after.buffers == 0 {
                        assert_eq!(format!("{r1:?}"), format!("{r2:?}"), "seed {seed}");
                    } else {
                        assert_eq!(outcome(&r1), outcome(&r2), "seed {seed}");
                    }
                    let again = interp.tape();
                    assert_eq!(
                        (again.scalars, again.buffers, again.bytes),
                        (tape_after.scalars, tape_after.buffers, tape_after.bytes),
                        "seed {seed}"
                    );
                    if tape_after.buffers > 0 {
                        with_buffers += 1;
                    }
                }
                if rng.chance(50) {
                    interp.reset_tape();
                }
                for (a, b) in args.iter().zip(&before) {
                    assert_eq!(a.ty(), b.ty(), "seed {seed}: an argument changed kind");
                }
                results.push(r1);
            }
            results
        }));
        let results = run.unwrap_or_else(|_| panic!("the interpreter panicked on seed {seed}"));
        for r in results {
            match r {
                Ok(_) => outcomes[0] += 1,
                Err(e) if e.kind.is_internal() => panic!("seed {seed}: interpreter bug: {e}"),
                Err(
                    e @ RunError {
                        kind: ErrorKind::Malformed(_),
                        ..
                    },
                ) => {
                    if std::env::var("FUZZ_SHOW").is_ok() {
                        eprintln!("MAL {}", e.kind);
                    }
                    outcomes[1] += 1
                }
                Err(e) => {
                    if std::env::var("FUZZ_SHOW").is_ok() {
                        eprintln!("OTHER {:?} {}", std::mem::discriminant(&e.kind), e);
                    }
                    if matches!(
                        e.kind,
                        ErrorKind::NoTapeBuffer { .. } | ErrorKind::TapeBufferMismatch { .. }
                    ) {
                        views_refused += 1;
                    }
                    if let ErrorKind::Trap(message) = &e.kind {
                        assert_eq!(e.op, "trap_if", "seed {seed}");
                        assert!(
                            ["x < 0", "", "shadow \"s\"\n"].contains(&message.as_str()),
                            "seed {seed}: {message:?}"
                        );
                        traps += 1;
                    }
                    outcomes[2] += 1
                }
            }
        }
    }
    eprintln!(
        "random programs: {} ran, {} malformed, {} other errors \
         ({with_buffers} made tape buffers, {views_refused} views refused, {traps} traps)",
        outcomes[0], outcomes[1], outcomes[2]
    );
    // The generator must reach all three outcomes to be testing anything.
    assert!(outcomes.iter().all(|&n| n > 100), "{outcomes:?}");
    assert!(
        with_buffers > 20 && views_refused > 20 && traps > 20,
        "{with_buffers} {views_refused} {traps}"
    );
}
