//! Simplify (prim_func pass, opt level 0): TVM's `tir.Simplify`, an arithmetic simplifier over
//! a PrimFunc's expressions, with bounds taken from loop ranges.
//!
//! What it does:
//! - constant folding of every operator on integer immediates with the dtype's wrapping
//!   semantics (as the interpreter computes them: signed types wrap, unsigned types compare
//!   and divide unsigned), of float `add` / `sub` / `mul` / `div` and comparisons, of exact
//!   casts and of the exact intrinsics (`neg`, `abs`, the bitwise ones, `floor` / `ceil` /
//!   `trunc` on floats);
//! - identities: `x * 1`, `x / 1` and `x * 0` (integers), `x + 0`, `floormod(x, 1)`,
//!   `select(true, a, b)`, `not(not(x))`, `and` / `or` with a constant, `min` / `max` /
//!   comparisons whose answer the operands' ranges decide (`min(x, x)`, `lt(%i, 8)` with `%i`
//!   in `[0, 8)`);
//! - canonical affine forms: every scalar integer expression built from `add`, `sub` and
//!   multiplication by constants is a sum of terms `coefficient × atom` plus a constant, like
//!   terms collected, printed with the variables in definition order, then other atoms in
//!   first-seen order, subtracted terms after added ones, and the constant last
//!   (`add(mul(%i, 4), add(%j, mul(%i, 4)))` → `add(mul(%i, 8), %j)`). Coefficients live
//!   modulo 2^bits, so the rewrite is exact under wrapping;
//! - `floordiv` / `floormod` (and `div` / `mod` of provably non-negative operands) by a
//!   positive constant `c`: the multiples of `c` are split off and the rest's range decides
//!   the quotient (`floordiv(add(mul(%i, 4), %j), 4)` → `%i` with `%j` in `[0, 4)`);
//! - an integer expression whose range is a single value becomes that value (the variable
//!   of a loop of extent 1);
//! - `if` whose condition folds to a constant keeps only the branch that runs.
//!
//! Ranges come from `for` loops (`%i` in `[min, min + extent)` when both bounds have known
//! ranges) and from `let` statements (the value's range), propagated by interval arithmetic
//! computed exactly (in i128) and discarded whenever a value could leave its dtype's range,
//! so that no fact depends on wrapping.
//!
//! What it deliberately does not do: fold division or modulo by zero (left for the
//! interpreter to report), fold float operations whose result could differ in a bit from the
//! interpreter's (transcendental intrinsics, float `min` / `max` with NaN, `x + 0.0`, which
//! maps `-0.0` to `+0.0`), use `if` conditions as facts inside their branches, inline `let`
//! values, simplify vector expressions beyond their scalar operands, or remove statements
//! (RemoveNoOp does).
//!
//! Phases:
//! 1. Statements in descending id order (ancestors before descendants, as the arenas are
//!    post-order): each statement's expression trees are simplified bottom-up into a new
//!    arena, as lazy affine forms materialized only where a non-affine user needs them;
//!    a `for` or `let` records its variable's range before its body is reached.
//! 2. Statements in ascending order rebuilt over the new expressions, constant `if`s cut.
//! 3. Structurally unchanged → the input `Arc`.

use std::sync::Arc;

use passel_engine::ir::DType;
use passel_engine::tir::{
    prim_structural_eq, BinOp, Intrinsic, PExprId, PExprKind, PType, PrimFunc, PrimFuncBuilder, StmtId, StmtKind,
};
use passel_engine::transform::PrimFuncPass;
use rustc_hash::FxHashMap;

/// The registry name.
pub const NAME: &str = "Simplify";

passel_engine::register_pass!(NAME, || Box::new(pass()));

/// The `Simplify` pass as registered.
pub fn pass() -> PrimFuncPass {
    passel_engine::transform::prim_func_pass(NAME, 0, |func, _module, _ctx| Ok(simplify(&func)))
}

/// Runs Simplify on `func`; returns `func` itself (pointer-equal) when nothing changes.
pub fn simplify(func: &Arc<PrimFunc>) -> Arc<PrimFunc> {
    match Simplifier::new(func).run() {
        Ok(out) if !prim_structural_eq(func, &out) => Arc::new(out),
        _ => func.clone(),
    }
}

// ---- integer values of a dtype ----

/// Bits of an integer dtype (not `bool`), or `None`.
fn int_bits(d: DType) -> Option<u32> {
    Some(match d {
        DType::I8 | DType::U8 => 8,
        DType::I16 | DType::U16 => 16,
        DType::I32 | DType::U32 => 32,
        DType::I64 | DType::U64 => 64,
        _ => return None,
    })
}

fn is_unsigned(d: DType) -> bool {
    matches!(d, DType::U8 | DType::U16 | DType::U32 | DType::U64)
}

/// Whether `ty` is a scalar integer type the affine forms cover.
fn is_int_scalar(ty: PType) -> bool {
    ty.is_scalar() && int_bits(ty.dtype).is_some()
}

/// The smallest and largest value of integer dtype `d`.
pub(crate) fn type_range(d: DType) -> (i128, i128) {
    let bits = int_bits(d).unwrap_or(64);
    if is_unsigned(d) {
        (0, (1i128 << bits) - 1)
    } else {
        (-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1)
    }
}

/// The numeric value of an immediate held as `v` (u64 is held as its i64 bit pattern).
pub(crate) fn value_of(v: i64, d: DType) -> i128 {
    if d == DType::U64 {
        v as u64 as i128
    } else {
        v as i128
    }
}

/// `v` modulo 2^bits in the signed range (the coefficient form).
fn sext(v: i128, bits: u32) -> i128 {
    let m = 1i128 << bits;
    let r = v.rem_euclid(m);
    if r >= m / 2 {
        r - m
    } else {
        r
    }
}

/// `v` wrapped into dtype `d` and held as an immediate is (u64 as its bit pattern).
pub(crate) fn wrap_imm(v: i128, d: DType) -> i64 {
    let bits = int_bits(d).unwrap_or(64);
    let s = sext(v, bits);
    if is_unsigned(d) {
        let u = s.rem_euclid(1i128 << bits);
        u as u64 as i64
    } else {
        s as i64
    }
}

/// A closed interval of exact integer values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Iv {
    pub(crate) lo: i128,
    pub(crate) hi: i128,
}

impl Iv {
    fn point(v: i128) -> Iv {
        Iv { lo: v, hi: v }
    }

    /// The interval if it lies inside `d`'s range (else the value could wrap: unknown).
    fn within(self, d: DType) -> Option<Iv> {
        let (lo, hi) = type_range(d);
        (self.lo >= lo && self.hi <= hi).then_some(self)
    }

    fn scale(self, k: i128) -> Iv {
        let (a, b) = (self.lo.saturating_mul(k), self.hi.saturating_mul(k));
        Iv { lo: a.min(b), hi: a.max(b) }
    }

    fn add(self, o: Iv) -> Iv {
        Iv { lo: self.lo.saturating_add(o.lo), hi: self.hi.saturating_add(o.hi) }
    }
}

// ---- affine forms ----

/// `Σ coef × atom + c` over a scalar integer type; atoms are expressions of the new arena,
/// each used once when materialized. Coefficients are in the signed range of the width.
#[derive(Clone, Debug)]
struct Lin {
    ty: PType,
    terms: Vec<(PExprId, i128)>,
    c: i128,
}

impl Lin {
    fn constant(ty: PType, c: i128) -> Lin {
        Lin { ty, terms: Vec::new(), c }
    }

    fn as_const(&self) -> Option<i128> {
        self.terms.is_empty().then_some(self.c)
    }

    fn bits(&self) -> u32 {
        int_bits(self.ty.dtype).unwrap_or(64)
    }

    fn scale(mut self, k: i128) -> Lin {
        let bits = self.bits();
        for t in &mut self.terms {
            t.1 = sext(t.1.wrapping_mul(k), bits);
        }
        self.c = sext(self.c.wrapping_mul(k), bits);
        self
    }

    fn add(mut self, mut o: Lin) -> Lin {
        let bits = self.bits();
        self.terms.append(&mut o.terms);
        self.c = sext(self.c + o.c, bits);
        self
    }
}

/// The simplified form of one old expression.
enum Val {
    /// Not reached yet, or already consumed by its user.
    Empty,
    /// A node of the new arena.
    New(PExprId),
    /// A scalar integer affine form, materialized on demand.
    Lin(Lin),
    /// `not(x)`, built on demand so that `not(not(x))` never leaves a dead `not` over `x`
    /// (the verifier counts every use in the arena).
    Not(PExprId),
}

/// Hash-consing key of a new node: equal keys mean structurally equal expressions.
#[derive(Clone, PartialEq, Eq, Hash)]
struct Key {
    tag: u8,
    extra: u64,
    ty: PType,
    children: Vec<u32>,
}

pub(crate) struct Simplifier<'a> {
    f: &'a PrimFunc,
    b: PrimFuncBuilder,
    val: Vec<Val>,
    /// Per variable: its range, when known.
    var_iv: Vec<Option<Iv>>,
    /// Per new expression: its hash-consing class and its range.
    class: Vec<u32>,
    niv: Vec<Option<Iv>>,
    classes: FxHashMap<Key, u32>,
    /// Per old expression that is a statement's root: its new id.
    root: Vec<Option<PExprId>>,
}

type R<T> = Result<T, String>;

/// Appends a node through the builder and records its class and range.
macro_rules! mk {
    ($s:ident, $($call:tt)*) => {{
        let r = $s.$($call)*;
        $s.ok(r)
    }};
}

impl<'a> Simplifier<'a> {
    pub(crate) fn new(f: &'a PrimFunc) -> Simplifier<'a> {
        Simplifier {
            f,
            b: PrimFuncBuilder::with_signature_of(f),
            val: (0..f.exprs().len()).map(|_| Val::Empty).collect(),
            var_iv: vec![None; f.vars().len()],
            class: Vec::new(),
            niv: Vec::new(),
            classes: FxHashMap::default(),
            root: vec![None; f.exprs().len()],
        }
    }

    pub(crate) fn run(mut self) -> R<PrimFunc> {
        let f = self.f;
        let n = f.stmts().len();
        let mut roots = Vec::new();
        // Phase 1: ancestors first, so that loop ranges are known before their bodies.
        for i in (0..n).rev() {
            let s = StmtId(i as u32);
            roots.clear();
            f.stmt_exprs(s, &mut roots);
            for &r in &roots {
                self.tree(r)?;
            }
            match f.stmt(s).kind {
                StmtKind::For { var, min, extent, .. } => {
                    let (m, e) = (self.root_iv(min), self.root_iv(extent));
                    if let (Some(m), Some(e)) = (m, e) {
                        let hi = m.hi.saturating_add(e.hi).saturating_sub(1).max(m.lo);
                        self.var_iv[var.index()] = Some(Iv { lo: m.lo, hi });
                    }
                }
                StmtKind::Let { var, value, .. } => {
                    self.var_iv[var.index()] = self.root_iv(value);
                }
                _ => {}
            }
        }
        // Phase 2: children first.
        let mut new_stmt: Vec<StmtId> = Vec::with_capacity(n);
        let mut list = Vec::new();
        for i in 0..n {
            let s = StmtId(i as u32);
            let m = |x: StmtId| new_stmt[x.index()];
            let out = match f.stmt(s).kind {
                StmtKind::For { var, min, extent, kind, body } => {
                    let (min, extent) = (self.root_of(min)?, self.root_of(extent)?);
                    self.b.for_(var, min, extent, kind, m(body))?
                }
                StmtKind::Store { buf, indices, value } => {
                    let idx: Vec<PExprId> = f.operands(indices).iter().map(|&e| self.root_of(e)).collect::<R<_>>()?;
                    let value = self.root_of(value)?;
                    self.b.store(buf, &idx, value)?
                }
                StmtKind::Let { var, value, body } => {
                    let value = self.root_of(value)?;
                    self.b.let_stmt(var, value, m(body))?
                }
                StmtKind::If { cond, then_, else_ } => {
                    let c = self.root_of(cond)?;
                    match self.b.peek().expr(c).kind {
                        PExprKind::Int(1) => m(then_),
                        PExprKind::Int(_) => match else_ {
                            Some(e) => m(e),
                            None => self.b.nop(),
                        },
                        _ => self.b.if_(c, m(then_), else_.map(m))?,
                    }
                }
                StmtKind::Seq(r) => {
                    list.clear();
                    list.extend(f.stmt_list(r).iter().map(|&x| m(x)));
                    self.b.seq(&list)
                }
                StmtKind::Alloc { buf, body } => self.b.alloc(buf, m(body)),
                StmtKind::Decl { buf, data, body } => self.b.decl(buf, data, m(body))?,
                StmtKind::Evaluate(e) => {
                    let e = self.root_of(e)?;
                    self.b.evaluate(e)
                }
                StmtKind::Attr { key, value, body } => {
                    let value = self.root_of(value)?;
                    let key = f.string(key).to_string();
                    self.b.attr(&key, value, m(body))
                }
            };
            new_stmt.push(out);
        }
        let body = new_stmt[f.body().index()];
        Ok(self.b.finish(body))
    }

    fn root_of(&self, e: PExprId) -> R<PExprId> {
        self.root[e.index()].ok_or_else(|| format!("expression {e} was not simplified"))
    }

    fn root_iv(&self, e: PExprId) -> Option<Iv> {
        self.root[e.index()].and_then(|n| self.niv[n.index()])
    }

    /// Simplifies the tree rooted at `root` (children first, by an explicit stack).
    fn tree(&mut self, root: PExprId) -> R<()> {
        let f = self.f;
        let mut nodes = vec![root];
        let mut stack = vec![root];
        let mut ops = Vec::new();
        while let Some(e) = stack.pop() {
            ops.clear();
            f.expr_operands(e, &mut ops);
            nodes.extend_from_slice(&ops);
            stack.extend_from_slice(&ops);
        }
        nodes.sort_unstable();
        for &e in &nodes {
            let v = self.expr(e)?;
            self.val[e.index()] = v;
        }
        let new = self.take(root)?;
        self.root[root.index()] = Some(new);
        Ok(())
    }

    // ---- the new arena ----

    /// Records class and range of every node appended since the last call.
    fn sync(&mut self) {
        let exprs = self.b.peek().exprs();
        while self.class.len() < exprs.len() {
            let id = PExprId(self.class.len() as u32);
            let node = exprs[id.index()];
            let mut ops = Vec::new();
            self.b.peek().expr_operands(id, &mut ops);
            let (tag, extra) = match node.kind {
                PExprKind::Int(v) => (0, v as u64),
                PExprKind::Float(v) => (1, v.to_bits()),
                PExprKind::Var(v) => (2, v.0 as u64),
                PExprKind::Bin(op, _, _) => (3, op as u64),
                PExprKind::Not(_) => (4, 0),
                PExprKind::Select(..) => (5, 0),
                PExprKind::Cast(_) => (6, 0),
                PExprKind::Load(b, _) => (7, b.0 as u64),
                PExprKind::Call(i, _) => (8, i as u64),
                PExprKind::Ramp(..) => (9, 0),
                PExprKind::Broadcast(_) => (10, 0),
                PExprKind::Let(v, _, _) => (11, v.0 as u64),
            };
            let key = Key { tag, extra, ty: node.ty, children: ops.iter().map(|o| self.class[o.index()]).collect() };
            let next = self.classes.len() as u32;
            let class = *self.classes.entry(key).or_insert(next);
            self.class.push(class);
            let iv = if is_int_scalar(node.ty) { self.node_iv(&node.kind, node.ty.dtype) } else { None };
            self.niv.push(iv);
        }
    }

    fn node_iv(&self, kind: &PExprKind, d: DType) -> Option<Iv> {
        let iv = |e: PExprId| self.niv[e.index()];
        let out = match *kind {
            PExprKind::Int(v) => Iv::point(value_of(v, d)),
            PExprKind::Var(v) => self.var_iv[v.index()]?,
            PExprKind::Bin(op, a, b) => {
                let (a, b) = (iv(a)?, iv(b)?);
                match op {
                    BinOp::Add => a.add(b),
                    BinOp::Sub => a.add(b.scale(-1)),
                    BinOp::Mul => {
                        let c = [a.lo * b.lo, a.lo * b.hi, a.hi * b.lo, a.hi * b.hi];
                        Iv { lo: *c.iter().min()?, hi: *c.iter().max()? }
                    }
                    BinOp::Min => Iv { lo: a.lo.min(b.lo), hi: a.hi.min(b.hi) },
                    BinOp::Max => Iv { lo: a.lo.max(b.lo), hi: a.hi.max(b.hi) },
                    BinOp::FloorDiv | BinOp::Div if b.lo > 0 && (op == BinOp::FloorDiv || a.lo >= 0) => Iv {
                        lo: a.lo.div_euclid(b.lo).min(a.lo.div_euclid(b.hi)),
                        hi: a.hi.div_euclid(b.lo).max(a.hi.div_euclid(b.hi)),
                    },
                    BinOp::FloorMod | BinOp::Mod if b.lo > 0 && (op == BinOp::FloorMod || a.lo >= 0) => {
                        Iv { lo: 0, hi: b.hi - 1 }
                    }
                    _ => return None,
                }
            }
            PExprKind::Select(_, a, b) => {
                let (a, b) = (iv(a)?, iv(b)?);
                Iv { lo: a.lo.min(b.lo), hi: a.hi.max(b.hi) }
            }
            _ => return None,
        };
        out.within(d)
    }

    fn ok(&mut self, r: R<PExprId>) -> R<PExprId> {
        self.sync();
        r
    }

    fn int(&mut self, v: i128, ty: PType) -> R<PExprId> {
        let r = self.b.int(wrap_imm(v, ty.dtype), ty);
        self.ok(r)
    }

    fn bool_imm(&mut self, v: bool) -> R<PExprId> {
        let r = self.b.int(v as i64, PType::scalar(DType::Bool));
        self.ok(r)
    }

    fn bin(&mut self, op: BinOp, a: PExprId, b: PExprId) -> R<PExprId> {
        let r = self.b.bin(op, a, b);
        self.ok(r)
    }

    /// Takes the simplified form of old expression `e` as a node of the new arena.
    fn take(&mut self, e: PExprId) -> R<PExprId> {
        match std::mem::replace(&mut self.val[e.index()], Val::Empty) {
            Val::New(n) => Ok(n),
            Val::Lin(l) => self.materialize(l),
            Val::Not(x) => mk!(self, b.not(x)),
            Val::Empty => Err(format!("expression {e} used twice or before its operands")),
        }
    }

    /// Takes the form of `e` as an affine form, if it is a scalar integer.
    fn take_lin(&mut self, e: PExprId) -> R<Lin> {
        match std::mem::replace(&mut self.val[e.index()], Val::Empty) {
            Val::Lin(l) => Ok(l),
            Val::New(n) => Ok(self.atom(n)),
            Val::Not(x) => {
                let n = mk!(self, b.not(x))?;
                Ok(self.atom(n))
            }
            Val::Empty => Err(format!("expression {e} used twice or before its operands")),
        }
    }

    /// A node of the new arena as an affine form.
    fn atom(&self, n: PExprId) -> Lin {
        let node = *self.b.peek().expr(n);
        match (node.kind, self.niv[n.index()]) {
            (PExprKind::Int(v), _) => Lin::constant(node.ty, value_of(v, node.ty.dtype)),
            // A value its range pins down (a loop of extent 1) is that constant.
            (_, Some(iv)) if iv.lo == iv.hi => Lin::constant(node.ty, iv.lo),
            _ => Lin { ty: node.ty, terms: vec![(n, 1)], c: 0 },
        }
    }

    /// Sorts terms canonically (variables by definition, then other atoms by class) and
    /// merges like terms.
    fn normalize(&self, l: &mut Lin) {
        let bits = l.bits();
        let key = |s: &Self, n: PExprId| match s.b.peek().expr(n).kind {
            PExprKind::Var(v) => (0u8, v.0),
            _ => (1, s.class[n.index()]),
        };
        l.terms.sort_by_key(|&(n, _)| key(self, n));
        let mut out: Vec<(PExprId, i128)> = Vec::with_capacity(l.terms.len());
        for &(n, c) in &l.terms {
            match out.last_mut() {
                Some(last) if self.class[last.0.index()] == self.class[n.index()] => last.1 = sext(last.1 + c, bits),
                _ => out.push((n, sext(c, bits))),
            }
        }
        out.retain(|t| t.1 != 0);
        l.terms = out;
    }

    /// The exact range of an affine form's value, if it provably stays in its dtype's range.
    fn lin_iv(&self, l: &Lin) -> Option<Iv> {
        let mut acc = Iv::point(l.c);
        for &(n, c) in &l.terms {
            acc = acc.add(self.niv[n.index()]?.scale(c));
        }
        acc.within(l.ty.dtype)
    }

    fn materialize(&mut self, mut l: Lin) -> R<PExprId> {
        self.normalize(&mut l);
        let ty = l.ty;
        let (pos, neg): (Vec<_>, Vec<_>) = l.terms.iter().partition(|t| t.1 > 0);
        let mut acc: Option<PExprId> = None;
        if pos.is_empty() && l.c != 0 {
            acc = Some(self.int(l.c, ty)?);
        }
        for &(n, c) in &pos {
            let t = if c == 1 {
                n
            } else {
                let k = self.int(c, ty)?;
                self.bin(BinOp::Mul, n, k)?
            };
            acc = Some(match acc {
                None => t,
                Some(a) => self.bin(BinOp::Add, a, t)?,
            });
        }
        let (tmin, _) = type_range(ty.dtype);
        for &(n, c) in &neg {
            let t = if c == -1 {
                n
            } else {
                let k = self.int(-c, ty)?;
                self.bin(BinOp::Mul, n, k)?
            };
            let a = match acc {
                Some(a) => a,
                None => self.int(0, ty)?,
            };
            acc = Some(self.bin(BinOp::Sub, a, t)?);
        }
        let had_terms = !l.terms.is_empty();
        match acc {
            None => self.int(l.c, ty),
            Some(a) if !had_terms || l.c == 0 || pos.is_empty() => Ok(a),
            Some(a) => {
                // A negative constant is subtracted, unless it is the signed minimum.
                if l.c < 0 && (is_unsigned(ty.dtype) || l.c > tmin) {
                    let k = self.int(-l.c, ty)?;
                    self.bin(BinOp::Sub, a, k)
                } else {
                    let k = self.int(l.c, ty)?;
                    self.bin(BinOp::Add, a, k)
                }
            }
        }
    }

    // ---- one old expression ----

    fn expr(&mut self, e: PExprId) -> R<Val> {
        let f = self.f;
        let node = *f.expr(e);
        let ty = node.ty;
        Ok(match node.kind {
            PExprKind::Int(v) if is_int_scalar(ty) => Val::Lin(Lin::constant(ty, value_of(v, ty.dtype))),
            PExprKind::Int(v) => Val::New(mk!(self, b.int(v, ty))?),
            PExprKind::Float(v) => Val::New(mk!(self, b.float(v, ty))?),
            PExprKind::Var(v) => {
                let r = self.b.var_ref(v);
                self.sync();
                if is_int_scalar(ty) {
                    Val::Lin(self.atom(r))
                } else {
                    Val::New(r)
                }
            }
            PExprKind::Bin(op, a, b) => self.binary(op, a, b, f.expr(a).ty)?,
            PExprKind::Not(a) => {
                if let Val::Not(x) = self.val[a.index()] {
                    self.val[a.index()] = Val::Empty;
                    return Ok(Val::New(x));
                }
                let a = self.take(a)?;
                match self.b.peek().expr(a).kind {
                    PExprKind::Int(v) => Val::New(self.bool_imm(v == 0)?),
                    _ => Val::Not(a),
                }
            }
            PExprKind::Select(c, a, b) => {
                let c = self.take(c)?;
                match self.b.peek().expr(c).kind {
                    PExprKind::Int(v) => {
                        let (keep, drop) = if v != 0 { (a, b) } else { (b, a) };
                        self.val[drop.index()] = Val::Empty;
                        std::mem::replace(&mut self.val[keep.index()], Val::Empty)
                    }
                    _ => {
                        let (a, b) = (self.take(a)?, self.take(b)?);
                        if self.class[a.index()] == self.class[b.index()] {
                            Val::New(a)
                        } else {
                            Val::New(mk!(self, b.select(c, a, b))?)
                        }
                    }
                }
            }
            PExprKind::Cast(a) => {
                let from = f.expr(a).ty;
                let a = self.take(a)?;
                if from == ty {
                    Val::New(a)
                } else if let Some(n) = self.fold_cast(a, from.dtype, ty)? {
                    Val::New(n)
                } else {
                    let r = self.b.cast(a, ty.dtype);
                    self.sync();
                    Val::New(r)
                }
            }
            PExprKind::Load(buf, r) => {
                let idx: Vec<PExprId> = f.operands(r).iter().map(|&i| self.take(i)).collect::<R<_>>()?;
                let n = mk!(self, b.load(buf, &idx))?;
                if is_int_scalar(ty) {
                    Val::Lin(self.atom(n))
                } else {
                    Val::New(n)
                }
            }
            PExprKind::Call(intr, r) => {
                let args: Vec<PExprId> = f.operands(r).iter().map(|&i| self.take(i)).collect::<R<_>>()?;
                match self.fold_call(intr, &args, ty)? {
                    Some(n) => Val::New(n),
                    None => Val::New(mk!(self, b.call(intr, &args))?),
                }
            }
            PExprKind::Ramp(a, s) => {
                let (a, s) = (self.take(a)?, self.take(s)?);
                Val::New(mk!(self, b.ramp(a, s, ty.lanes))?)
            }
            PExprKind::Broadcast(a) => {
                let a = self.take(a)?;
                Val::New(mk!(self, b.broadcast(a, ty.lanes))?)
            }
            PExprKind::Let(v, value, body) => {
                let (value, body) = (self.take(value)?, self.take(body)?);
                Val::New(mk!(self, b.let_expr(v, value, body))?)
            }
        })
    }

    fn binary(&mut self, op: BinOp, a: PExprId, b: PExprId, operand: PType) -> R<Val> {
        if is_int_scalar(operand) {
            return self.int_binary(op, a, b, operand);
        }
        let (a, b) = (self.take(a)?, self.take(b)?);
        let (ka, kb) = (self.b.peek().expr(a).kind, self.b.peek().expr(b).kind);
        if operand.is_scalar() && operand.dtype.is_float() {
            if let (PExprKind::Float(x), PExprKind::Float(y)) = (ka, kb) {
                if let Some(v) = fold_float(op, x, y) {
                    return Ok(Val::New(match v {
                        Folded::Float(v) => mk!(self, b.float(v, operand))?,
                        Folded::Bool(v) => self.bool_imm(v)?,
                        Folded::IntV(_) => return Err("integer result of a float operator".into()),
                    }));
                }
            }
            match (op, ka, kb) {
                (BinOp::Mul | BinOp::Div, _, PExprKind::Float(1.0)) => return Ok(Val::New(a)),
                (BinOp::Mul, PExprKind::Float(1.0), _) => return Ok(Val::New(b)),
                _ => {}
            }
        }
        if operand == PType::scalar(DType::Bool) {
            let ca = if let PExprKind::Int(v) = ka { Some(v != 0) } else { None };
            let cb = if let PExprKind::Int(v) = kb { Some(v != 0) } else { None };
            match (op, ca, cb) {
                (BinOp::And, Some(x), Some(y)) => return Ok(Val::New(self.bool_imm(x && y)?)),
                (BinOp::Or, Some(x), Some(y)) => return Ok(Val::New(self.bool_imm(x || y)?)),
                (BinOp::Eq, Some(x), Some(y)) => return Ok(Val::New(self.bool_imm(x == y)?)),
                (BinOp::Ne, Some(x), Some(y)) => return Ok(Val::New(self.bool_imm(x != y)?)),
                (BinOp::And, Some(true), _) | (BinOp::Or, Some(false), _) => return Ok(Val::New(b)),
                (BinOp::And, _, Some(true)) | (BinOp::Or, _, Some(false)) => return Ok(Val::New(a)),
                (BinOp::And, Some(false), _) | (BinOp::Or, Some(true), _) => return Ok(Val::New(a)),
                (BinOp::And, _, Some(false)) | (BinOp::Or, _, Some(true)) => return Ok(Val::New(b)),
                (BinOp::And | BinOp::Or, _, _) if self.class[a.index()] == self.class[b.index()] => {
                    return Ok(Val::New(a))
                }
                _ => {}
            }
        }
        Ok(Val::New(self.bin(op, a, b)?))
    }

    fn int_binary(&mut self, op: BinOp, a: PExprId, b: PExprId, ty: PType) -> R<Val> {
        let d = ty.dtype;
        let (la, lb) = (self.take_lin(a)?, self.take_lin(b)?);
        let bits = la.bits();
        match op {
            BinOp::Add => return Ok(Val::Lin(la.add(lb))),
            BinOp::Sub => return Ok(Val::Lin(la.add(lb.scale(-1)))),
            BinOp::Mul => {
                if let Some(k) = lb.as_const() {
                    return Ok(Val::Lin(la.scale(k)));
                }
                if let Some(k) = la.as_const() {
                    return Ok(Val::Lin(lb.scale(k)));
                }
                let (x, y) = (self.materialize(la)?, self.materialize(lb)?);
                let n = self.bin(BinOp::Mul, x, y)?;
                return Ok(Val::Lin(self.atom(n)));
            }
            _ => {}
        }
        if let (Some(x), Some(y)) = (la.as_const(), lb.as_const()) {
            if let Some(v) = fold_int(op, x, y, d) {
                return Ok(match v {
                    Folded::Bool(v) => Val::New(self.bool_imm(v)?),
                    Folded::Float(_) => return Err("float result of an integer operator".into()),
                    Folded::IntV(v) => Val::Lin(Lin::constant(ty, sext(v, bits))),
                });
            }
        }
        let divisor = lb.as_const().map(|c| if is_unsigned(d) { c.rem_euclid(1i128 << bits) } else { c });
        match op {
            BinOp::Div | BinOp::Mod | BinOp::FloorDiv | BinOp::FloorMod if divisor.is_some_and(|c| c > 0) => {
                let c = divisor.unwrap_or(1);
                if let Some(v) = self.div_by_const(op, &la, c) {
                    return Ok(Val::Lin(v));
                }
            }
            BinOp::Min | BinOp::Max | BinOp::Eq | BinOp::Ne | BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge => {
                if let Some(v) = self.compare(op, &la, &lb) {
                    return Ok(match (op, v) {
                        (BinOp::Min, true) | (BinOp::Max, false) => Val::Lin(la),
                        (BinOp::Min | BinOp::Max, _) => Val::Lin(lb),
                        (_, v) => Val::New(self.bool_imm(v)?),
                    });
                }
            }
            _ => {}
        }
        let (x, y) = (self.materialize(la)?, self.materialize(lb)?);
        let n = self.bin(op, x, y)?;
        Ok(if op.is_comparison() { Val::New(n) } else { Val::Lin(self.atom(n)) })
    }

    /// `op(a, c)` for a positive constant `c` when the range of the part of `a` that is not a
    /// multiple of `c` decides the quotient.
    fn div_by_const(&self, op: BinOp, la: &Lin, c: i128) -> Option<Lin> {
        if c == 1 {
            return Some(match op {
                BinOp::Div | BinOp::FloorDiv => la.clone(),
                _ => Lin::constant(la.ty, 0),
            });
        }
        let whole = self.lin_iv(la)?;
        if matches!(op, BinOp::Div | BinOp::Mod) && whole.lo < 0 {
            return None;
        }
        let mut q = Lin::constant(la.ty, la.c.div_euclid(c));
        let mut r = Lin::constant(la.ty, la.c.rem_euclid(c));
        for &(n, k) in &la.terms {
            if k % c == 0 {
                q.terms.push((n, k / c));
            } else {
                r.terms.push((n, k));
            }
        }
        let riv = self.lin_iv(&r)?;
        let k = riv.lo.div_euclid(c);
        if riv.hi.div_euclid(c) != k {
            return None;
        }
        Some(match op {
            BinOp::Div | BinOp::FloorDiv => q.add(Lin::constant(la.ty, k)),
            _ => r.add(Lin::constant(la.ty, -k * c)),
        })
    }

    /// Decides `op(a, b)` from the range of `a - b` (for `min` / `max`: whether `a <= b`).
    fn compare(&self, op: BinOp, la: &Lin, lb: &Lin) -> Option<bool> {
        let mut diff = la.clone().add(lb.clone().scale(-1));
        let mut tmp = std::mem::take(&mut diff.terms);
        tmp.sort_by_key(|t| self.class[t.0.index()]);
        let mut merged: Vec<(PExprId, i128)> = Vec::new();
        for (n, k) in tmp {
            match merged.last_mut() {
                Some(last) if self.class[last.0.index()] == self.class[n.index()] => last.1 += k,
                _ => merged.push((n, k)),
            }
        }
        merged.retain(|t| sext(t.1, la.bits()) != 0);
        diff.terms = merged;
        if diff.terms.is_empty() {
            // Equal up to a constant modulo 2^bits, whatever the ranges.
            if diff.c == 0 {
                return decide(op, Iv::point(0));
            }
            match op {
                BinOp::Eq => return Some(false),
                BinOp::Ne => return Some(true),
                _ => {}
            }
        }
        let (ia, ib) = (self.lin_iv(la)?, self.lin_iv(lb)?);
        // Exact as long as both sides are in range: the difference of their true values.
        let mut d = Iv::point(la.c - lb.c);
        for &(n, k) in &diff.terms {
            d = d.add(self.niv[n.index()]?.scale(k));
        }
        // Fall back on the plain ranges when the terms do not cancel.
        let d = Iv { lo: d.lo.max(ia.lo - ib.hi), hi: d.hi.min(ia.hi - ib.lo) };
        decide(op, d)
    }

    fn fold_cast(&mut self, a: PExprId, from: DType, to: PType) -> R<Option<PExprId>> {
        if !to.is_scalar() {
            return Ok(None);
        }
        let kind = self.b.peek().expr(a).kind;
        let out = match kind {
            PExprKind::Int(v) if from != DType::Bool && int_bits(to.dtype).is_some() => {
                Some(self.int(value_of(v, from), to)?)
            }
            PExprKind::Int(v) if from != DType::Bool && matches!(to.dtype, DType::F32 | DType::F64) => {
                let x = value_of(v, from);
                if x.abs() < (1i128 << 53) {
                    Some(mk!(self, b.float(x as f64, to))?)
                } else {
                    None
                }
            }
            PExprKind::Float(x) if matches!(to.dtype, DType::F32 | DType::F64) && from != DType::F16 => {
                Some(mk!(self, b.float(x, to))?)
            }
            _ => None,
        };
        Ok(out)
    }

    fn fold_call(&mut self, intr: Intrinsic, args: &[PExprId], ty: PType) -> R<Option<PExprId>> {
        if !ty.is_scalar() {
            return Ok(None);
        }
        let kinds: Vec<PExprKind> = args.iter().map(|&a| self.b.peek().expr(a).kind).collect();
        let d = ty.dtype;
        match kinds.as_slice() {
            [PExprKind::Int(x)] if int_bits(d).is_some() => {
                let x = value_of(*x, d);
                let v = match intr {
                    Intrinsic::Neg => -x,
                    Intrinsic::Abs => x.abs(),
                    Intrinsic::BitNot => !x,
                    _ => return Ok(None),
                };
                Ok(Some(self.int(v, ty)?))
            }
            [PExprKind::Int(x), PExprKind::Int(y)] if int_bits(d).is_some() => {
                let (x, y) = (value_of(*x, d), value_of(*y, d));
                let v = match intr {
                    Intrinsic::BitAnd => x & y,
                    Intrinsic::BitOr => x | y,
                    Intrinsic::BitXor => x ^ y,
                    _ => return Ok(None),
                };
                Ok(Some(self.int(v, ty)?))
            }
            [PExprKind::Float(x)] if d.is_float() => {
                let v = match intr {
                    Intrinsic::Neg => -x,
                    Intrinsic::Abs => x.abs(),
                    Intrinsic::Floor => x.floor(),
                    Intrinsic::Ceil => x.ceil(),
                    Intrinsic::Trunc => x.trunc(),
                    _ => return Ok(None),
                };
                Ok(Some(mk!(self, b.float(v, ty))?))
            }
            _ => Ok(None),
        }
    }
}

/// Decides `op(a, b)` (for `min` / `max`: whether `a <= b`) from the range `d` of `a - b`.
fn decide(op: BinOp, d: Iv) -> Option<bool> {
    match op {
        BinOp::Eq if d.lo == 0 && d.hi == 0 => Some(true),
        BinOp::Eq if d.lo > 0 || d.hi < 0 => Some(false),
        BinOp::Ne if d.lo == 0 && d.hi == 0 => Some(false),
        BinOp::Ne if d.lo > 0 || d.hi < 0 => Some(true),
        BinOp::Lt | BinOp::Ge if d.hi < 0 => Some(op == BinOp::Lt),
        BinOp::Lt | BinOp::Ge if d.lo >= 0 => Some(op == BinOp::Ge),
        BinOp::Le | BinOp::Gt | BinOp::Min | BinOp::Max if d.hi <= 0 => Some(op != BinOp::Gt),
        BinOp::Le | BinOp::Gt if d.lo > 0 => Some(op == BinOp::Gt),
        BinOp::Min | BinOp::Max if d.lo >= 0 => Some(false),
        _ => None,
    }
}

enum Folded {
    IntV(i128),
    Float(f64),
    Bool(bool),
}

/// `op(x, y)` on integer values of dtype `d` as the interpreter computes it; `None` for a
/// division by zero, which is left in place.
fn fold_int(op: BinOp, x: i128, y: i128, d: DType) -> Option<Folded> {
    let bits = int_bits(d)?;
    let unsigned = is_unsigned(d);
    // Operands as the machine sees them: unsigned values are non-negative.
    let norm = |v: i128| if unsigned { v.rem_euclid(1i128 << bits) } else { sext(v, bits) };
    let (x, y) = (norm(x), norm(y));
    Some(match op {
        BinOp::Add => Folded::IntV(x + y),
        BinOp::Sub => Folded::IntV(x - y),
        BinOp::Mul => Folded::IntV(x.wrapping_mul(y)),
        BinOp::Div | BinOp::Mod | BinOp::FloorDiv | BinOp::FloorMod if y == 0 => return None,
        BinOp::Div => Folded::IntV(x / y),
        BinOp::Mod => Folded::IntV(x % y),
        BinOp::FloorDiv => Folded::IntV(x.div_euclid(y) - i128::from(y < 0 && x.rem_euclid(y) != 0)),
        BinOp::FloorMod => {
            let r = x % y;
            Folded::IntV(if r != 0 && ((r < 0) != (y < 0)) { r + y } else { r })
        }
        BinOp::Min => Folded::IntV(x.min(y)),
        BinOp::Max => Folded::IntV(x.max(y)),
        BinOp::Eq => Folded::Bool(x == y),
        BinOp::Ne => Folded::Bool(x != y),
        BinOp::Lt => Folded::Bool(x < y),
        BinOp::Le => Folded::Bool(x <= y),
        BinOp::Gt => Folded::Bool(x > y),
        BinOp::Ge => Folded::Bool(x >= y),
        BinOp::And | BinOp::Or => return None,
    })
}

/// `op(x, y)` on float immediates where the result is exactly the interpreter's (rounded to
/// the type by the caller); `None` otherwise.
fn fold_float(op: BinOp, x: f64, y: f64) -> Option<Folded> {
    Some(match op {
        BinOp::Add => Folded::Float(x + y),
        BinOp::Sub => Folded::Float(x - y),
        BinOp::Mul => Folded::Float(x * y),
        BinOp::Div if y != 0.0 => Folded::Float(x / y),
        BinOp::Min if !x.is_nan() && !y.is_nan() => Folded::Float(x.min(y)),
        BinOp::Max if !x.is_nan() && !y.is_nan() => Folded::Float(x.max(y)),
        BinOp::Eq => Folded::Bool(x == y),
        BinOp::Ne => Folded::Bool(x != y),
        BinOp::Lt => Folded::Bool(x < y),
        BinOp::Le => Folded::Bool(x <= y),
        BinOp::Gt => Folded::Bool(x > y),
        BinOp::Ge => Folded::Bool(x >= y),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prim(src: &str) -> Arc<PrimFunc> {
        let m = passel_engine::ir::parse_module(src).expect("parses");
        m.get_prim("f").expect("@f").clone()
    }

    #[test]
    fn simplify_returns_the_same_arc_when_nothing_changes() {
        let f =
            prim("prim @f(%A: Buffer[(4,), f32], %n: i64) { for %i in serial(0, 4) { %A[%i] = add(%A[%i], 1.0f); } }");
        assert!(Arc::ptr_eq(&simplify(&f), &f));
        let g = prim("prim @f(%A: Buffer[(4,), f32]) { for %i in serial(0, 4) { %A[add(%i, 0)] = 1.0f; } }");
        assert!(!Arc::ptr_eq(&simplify(&g), &g));
    }

    #[test]
    fn fold_int_follows_floor_semantics_and_leaves_division_by_zero() {
        let v = |op, x, y| match fold_int(op, x, y, DType::I32) {
            Some(Folded::IntV(v)) => Some(v),
            _ => None,
        };
        assert_eq!(v(BinOp::FloorDiv, -7, 2), Some(-4));
        assert_eq!(v(BinOp::FloorMod, -7, 2), Some(1));
        assert_eq!(v(BinOp::FloorDiv, 7, -2), Some(-4));
        assert_eq!(v(BinOp::FloorMod, 7, -2), Some(-1));
        assert_eq!(v(BinOp::Div, -7, 2), Some(-3));
        assert_eq!(v(BinOp::Mod, -7, 2), Some(-1));
        assert_eq!(v(BinOp::FloorDiv, 7, 0), None);
        assert_eq!(wrap_imm(1i128 << 31, DType::I32), i32::MIN as i64);
        assert_eq!(wrap_imm(-1, DType::U8), 255);
        assert_eq!(wrap_imm(-1, DType::U64), -1);
    }
}
