//! The block path of the PrimFunc interpreter: a perfect nest of serial loops whose body is
//! one store runs a block of iterations at a time, each expression node computing a register
//! of up to [`BLOCK`] values per dispatch, instead of one closure call per node per
//! iteration. It shortcuts the scalar closures of [`super::Compiler`] and computes exactly what
//! they compute:
//!
//! - operator, cast and intrinsic semantics come from the one table ([`super::int_arith`],
//!   [`super::float_bin`], [`super::cast_fn`], the `*_intrinsic` functions);
//! - a *map* nest (the store's indices name every loop variable, so iterations write distinct
//!   elements) reads the stored buffer only at the stored element itself, so computing a
//!   block's values before storing them reads what the scalar order reads;
//! - a *reduction* nest (`X[i] = op(X[i], term)` with `i` free of the loop variables, the
//!   term not reading `X`'s storage) folds the block's terms into an accumulator in iteration
//!   order, rounding after every step as the scalar path does;
//! - any failure inside a block (an index out of range, a division by zero) stores nothing of
//!   that block and hands the rest of the nest, from the block's first iteration, to the
//!   scalar store closure, which reports the error exactly as the scalar path would.
//!
//! The loop variables may be of any integer type whose range holds their values; the store
//! may be preceded by scalar `let` statements (as CommonSubexprElimTIR writes them), whose
//! values become registers. Nests with other shapes, vectors or `let` expressions stay on the
//! scalar path. `interp/tests.rs` pins the two paths equal on generated nests.

use super::{
    cast_fn, float_bin, float_binary_intrinsic, float_unary_intrinsic, int_arith, int_binary_intrinsic,
    int_unary_intrinsic, wrap, Class, Compiler, Ctx, FloatSink, IntSink, SFn, UnarySink,
};
use crate::ir::DType;
use crate::tir::{BinOp, BufId, PExprId, PExprKind, PrimFunc, StmtId, StmtKind};

/// Iterations per block.
pub(super) const BLOCK: usize = 256;

/// Per-nest scratch registers, kept in the frame between runs of the nest.
#[derive(Default)]
pub(super) struct Scratch {
    f: Vec<Vec<f64>>,
    i: Vec<Vec<i64>>,
    /// Flat storage offsets of the block's loads or stores.
    off: Vec<usize>,
}

/// A register: float or integer class, and its index.
#[derive(Clone, Copy)]
enum Reg {
    F(usize),
    I(usize),
}

/// One block instruction: computes its register for `n` iterations; `false` is a failure.
type Instr = Box<dyn Fn(&mut Scratch, &mut Ctx, usize) -> bool>;

struct Builder<'a> {
    f: &'a PrimFunc,
    slot: &'a [super::Slot],
    nest_vars: &'a [usize],
    nf: usize,
    ni: usize,
    /// Instructions in evaluation order, with whether they vary within the nest.
    instrs: Vec<(Instr, bool)>,
    /// Per expression: its register and whether it varies.
    regs: Vec<Option<(Reg, bool)>>,
    /// Variables bound by the body's `let`s: frame slot, and the register of the value.
    lets: Vec<(usize, (Reg, bool))>,
}

/// Takes register `d` out of its list, so an instruction can write it while reading others.
macro_rules! with_dst {
    ($list:expr, $d:expr, |$dst:ident| $body:block) => {{
        let mut $dst = std::mem::take(&mut $list[$d]);
        let ok = $body;
        $list[$d] = $dst;
        ok
    }};
}

struct FBlock(usize, usize, usize);
struct IBlock(usize, usize, usize);
struct FFoldSink;

impl FloatSink for FBlock {
    type Out = (Instr, Reg);
    fn fbin<F: Fn(f64, f64) -> f64 + Copy + 'static>(self, f: F) -> (Instr, Reg) {
        let FBlock(d, a, b) = self;
        let ins: Instr = Box::new(move |s, _, n| {
            with_dst!(s.f, d, |dst| {
                let (x, y) = (&s.f[a][..n], &s.f[b][..n]);
                for ((o, &p), &q) in dst[..n].iter_mut().zip(x).zip(y) {
                    *o = f(p, q);
                }
                true
            })
        });
        (ins, Reg::F(d))
    }
    fn fcmp<F: Fn(f64, f64) -> bool + Copy + 'static>(self, f: F) -> (Instr, Reg) {
        let FBlock(d, a, b) = self;
        let ins: Instr = Box::new(move |s, _, n| {
            let (x, y) = (&s.f[a][..n], &s.f[b][..n]);
            let dst = &mut s.i[d];
            for ((o, &p), &q) in dst[..n].iter_mut().zip(x).zip(y) {
                *o = f(p, q) as i64;
            }
            true
        });
        (ins, Reg::I(d))
    }
}

impl IntSink for IBlock {
    type Out = (Instr, Reg);
    fn ibin<F: Fn(i64, i64) -> Option<i64> + Copy + 'static>(self, f: F) -> (Instr, Reg) {
        let IBlock(d, a, b) = self;
        let ins: Instr = Box::new(move |s, _, n| {
            with_dst!(s.i, d, |dst| {
                let (x, y) = (&s.i[a][..n], &s.i[b][..n]);
                let mut ok = true;
                for ((o, &p), &q) in dst[..n].iter_mut().zip(x).zip(y) {
                    match f(p, q) {
                        Some(v) => *o = v,
                        None => {
                            ok = false;
                            break;
                        }
                    }
                }
                ok
            })
        });
        (ins, Reg::I(d))
    }
}

/// A unary function from register `.1` into register `.0` (their classes are the method's).
struct UBlock(usize, usize);

impl UnarySink for UBlock {
    type Out = Instr;
    fn ii<F: Fn(i64) -> i64 + Copy + 'static>(self, f: F) -> Instr {
        let UBlock(d, a) = self;
        Box::new(move |s, _, n| {
            with_dst!(s.i, d, |dst| {
                for (o, &p) in dst[..n].iter_mut().zip(&s.i[a][..n]) {
                    *o = f(p);
                }
                true
            })
        })
    }
    fn ff<F: Fn(f64) -> f64 + Copy + 'static>(self, f: F) -> Instr {
        let UBlock(d, a) = self;
        Box::new(move |s, _, n| {
            with_dst!(s.f, d, |dst| {
                for (o, &p) in dst[..n].iter_mut().zip(&s.f[a][..n]) {
                    *o = f(p);
                }
                true
            })
        })
    }
    fn fi<F: Fn(f64) -> i64 + Copy + 'static>(self, f: F) -> Instr {
        let UBlock(d, a) = self;
        Box::new(move |s, _, n| {
            let (src, dst) = (&s.f[a][..n], &mut s.i[d]);
            for (o, &p) in dst[..n].iter_mut().zip(src) {
                *o = f(p);
            }
            true
        })
    }
    fn if_<F: Fn(i64) -> f64 + Copy + 'static>(self, f: F) -> Instr {
        let UBlock(d, a) = self;
        Box::new(move |s, _, n| {
            let (src, dst) = (&s.i[a][..n], &mut s.f[d]);
            for (o, &p) in dst[..n].iter_mut().zip(src) {
                *o = f(p);
            }
            true
        })
    }
}

/// A fold step `acc = op(acc, term)` for a reduction, from the same table.
type FFoldFn = dyn Fn(f64, &[f64]) -> f64;
type IFoldFn = dyn Fn(i64, &[i64]) -> Option<i64>;
type FFold = Box<FFoldFn>;
type IFold = Box<IFoldFn>;

impl FloatSink for FFoldSink {
    type Out = Option<FFold>;
    fn fbin<F: Fn(f64, f64) -> f64 + Copy + 'static>(self, f: F) -> Option<FFold> {
        Some(Box::new(move |mut acc, ts| {
            for &t in ts {
                acc = f(acc, t);
            }
            acc
        }))
    }
    fn fcmp<F: Fn(f64, f64) -> bool + Copy + 'static>(self, _f: F) -> Option<FFold> {
        None
    }
}

struct IFoldSink;
impl IntSink for IFoldSink {
    type Out = IFold;
    fn ibin<F: Fn(i64, i64) -> Option<i64> + Copy + 'static>(self, f: F) -> IFold {
        Box::new(move |mut acc, ts| {
            for &t in ts {
                acc = f(acc, t)?;
            }
            Some(acc)
        })
    }
}

impl Builder<'_> {
    fn freg(&mut self) -> usize {
        self.nf += 1;
        self.nf - 1
    }

    fn ireg(&mut self) -> usize {
        self.ni += 1;
        self.ni - 1
    }

    fn get(&self, e: PExprId) -> Option<(Reg, bool)> {
        self.regs[e.index()]
    }

    /// Compiles the tree under `root` (post-order: operands have smaller ids), or `None` when
    /// some node has no block form.
    fn tree(&mut self, root: PExprId) -> Option<(Reg, bool)> {
        let f = self.f;
        let mut nodes = Vec::new();
        let mut stack = vec![root];
        let mut ops = Vec::new();
        while let Some(x) = stack.pop() {
            nodes.push(x);
            ops.clear();
            f.expr_operands(x, &mut ops);
            stack.extend_from_slice(&ops);
        }
        nodes.sort_unstable();
        for e in nodes {
            let r = self.node(e)?;
            self.regs[e.index()] = Some(r);
        }
        self.get(root)
    }

    fn node(&mut self, e: PExprId) -> Option<(Reg, bool)> {
        let f = self.f;
        let node = f.expr(e);
        if node.ty.lanes != 1 {
            return None;
        }
        let d = node.ty.dtype;
        Some(match node.kind {
            PExprKind::Int(k) => {
                let r = self.ireg();
                let k = wrap(k, d);
                self.push(
                    Box::new(move |s, _, n| {
                        s.i[r][..n].fill(k);
                        true
                    }),
                    false,
                );
                (Reg::I(r), false)
            }
            PExprKind::Float(x) => {
                let r = self.freg();
                self.push(
                    Box::new(move |s, _, n| {
                        s.f[r][..n].fill(x);
                        true
                    }),
                    false,
                );
                (Reg::F(r), false)
            }
            PExprKind::Var(v) => {
                let v = v.index();
                if let Some(k) = self.nest_vars.iter().position(|&x| x == v) {
                    // Filled by the driver: nest variable k lives in integer register k.
                    (Reg::I(k), true)
                } else if let Some(&(_, r)) = self.lets.iter().rev().find(|&&(x, _)| x == v) {
                    // Bound by a `let` of the body: its value's register.
                    r
                } else if d.is_float() {
                    let r = self.freg();
                    self.push(
                        Box::new(move |s, c, n| {
                            s.f[r][..n].fill(c.floats[v]);
                            true
                        }),
                        false,
                    );
                    (Reg::F(r), false)
                } else {
                    let r = self.ireg();
                    self.push(
                        Box::new(move |s, c, n| {
                            s.i[r][..n].fill(c.ints[v]);
                            true
                        }),
                        false,
                    );
                    (Reg::I(r), false)
                }
            }
            PExprKind::Bin(op, a, b) => {
                let ((ra, va), (rb, vb)) = (self.get(a)?, self.get(b)?);
                let var = va || vb;
                let od = f.expr(a).ty.dtype;
                let (ins, r) = match (ra, rb) {
                    (Reg::F(x), Reg::F(y)) => {
                        let cmp = matches!(
                            op,
                            BinOp::Eq
                                | BinOp::Ne
                                | BinOp::Lt
                                | BinOp::Le
                                | BinOp::Gt
                                | BinOp::Ge
                                | BinOp::And
                                | BinOp::Or
                        );
                        let dst = if cmp { self.ireg() } else { self.freg() };
                        float_bin(op, od, FBlock(dst, x, y))
                    }
                    (Reg::I(x), Reg::I(y)) => {
                        let dst = self.ireg();
                        int_arith(op, od, IBlock(dst, x, y))
                    }
                    _ => return None,
                };
                self.push(ins, var);
                (r, var)
            }
            PExprKind::Not(a) => {
                let (Reg::I(x), var) = self.get(a)? else { return None };
                let r = self.ireg();
                self.push(
                    Box::new(move |s, _, n| {
                        with_dst!(s.i, r, |dst| {
                            for (o, &p) in dst[..n].iter_mut().zip(&s.i[x][..n]) {
                                *o = 1 - (p & 1);
                            }
                            true
                        })
                    }),
                    var,
                );
                (Reg::I(r), var)
            }
            PExprKind::Select(k, a, b) => {
                let (Reg::I(kr), vk) = self.get(k)? else { return None };
                let ((ra, va), (rb, vb)) = (self.get(a)?, self.get(b)?);
                let var = vk || va || vb;
                match (ra, rb) {
                    (Reg::F(x), Reg::F(y)) => {
                        let r = self.freg();
                        self.push(
                            Box::new(move |s, _, n| {
                                with_dst!(s.f, r, |dst| {
                                    let (kk, xs, ys) = (&s.i[kr][..n], &s.f[x][..n], &s.f[y][..n]);
                                    for (j, o) in dst[..n].iter_mut().enumerate() {
                                        *o = if kk[j] != 0 { xs[j] } else { ys[j] };
                                    }
                                    true
                                })
                            }),
                            var,
                        );
                        (Reg::F(r), var)
                    }
                    (Reg::I(x), Reg::I(y)) => {
                        let r = self.ireg();
                        self.push(
                            Box::new(move |s, _, n| {
                                with_dst!(s.i, r, |dst| {
                                    let (kk, xs, ys) = (&s.i[kr][..n], &s.i[x][..n], &s.i[y][..n]);
                                    for (j, o) in dst[..n].iter_mut().enumerate() {
                                        *o = if kk[j] != 0 { xs[j] } else { ys[j] };
                                    }
                                    true
                                })
                            }),
                            var,
                        );
                        (Reg::I(r), var)
                    }
                    _ => return None,
                }
            }
            PExprKind::Cast(a) => {
                let (ra, var) = self.get(a)?;
                let from = f.expr(a).ty.dtype;
                let (src, dst) = self.unary_regs(ra, from, d)?;
                self.push(cast_fn(from, d, UBlock(dst.0, src)), var);
                (dst.1, var)
            }
            PExprKind::Call(intr, r) => {
                let ops = f.operands(r);
                let ad = f.expr(*ops.first()?).ty.dtype;
                match *ops {
                    [a] => {
                        let (ra, var) = self.get(a)?;
                        let (src, dst) = self.unary_regs(ra, ad, d)?;
                        let ins = if ad.is_float() {
                            float_unary_intrinsic(intr, ad, UBlock(dst.0, src))?
                        } else {
                            int_unary_intrinsic(intr, ad, UBlock(dst.0, src))?
                        };
                        self.push(ins, var);
                        (dst.1, var)
                    }
                    [a, b] => {
                        let ((ra, va), (rb, vb)) = (self.get(a)?, self.get(b)?);
                        let var = va || vb;
                        let (ins, r) = match (ra, rb) {
                            (Reg::F(x), Reg::F(y)) if ad.is_float() && d.is_float() => {
                                let dst = self.freg();
                                float_binary_intrinsic(intr, ad, FBlock(dst, x, y))?
                            }
                            (Reg::I(x), Reg::I(y)) if !ad.is_float() && !d.is_float() => {
                                let dst = self.ireg();
                                int_binary_intrinsic(intr, ad, IBlock(dst, x, y))?
                            }
                            _ => return None,
                        };
                        self.push(ins, var);
                        (r, var)
                    }
                    _ => return None,
                }
            }
            PExprKind::Load(buf, r) => {
                let idx: Vec<(usize, bool)> = f
                    .operands(r)
                    .iter()
                    .map(|&i| match self.get(i) {
                        Some((Reg::I(x), v)) => Some((x, v)),
                        _ => None,
                    })
                    .collect::<Option<_>>()?;
                let var = idx.iter().any(|&(_, v)| v);
                let (ins, reg) = self.load(buf, idx.iter().map(|&(x, _)| x).collect())?;
                self.push(ins, var);
                (reg, var)
            }
            _ => return None,
        })
    }

    /// For a unary function from dtype `from` (operand in `ra`) to dtype `to`: the operand's
    /// register index, and a fresh result register (its index and its `Reg`). `None` when the
    /// operand's class is not `from`'s.
    fn unary_regs(&mut self, ra: Reg, from: DType, to: DType) -> Option<(usize, (usize, Reg))> {
        let src = match (ra, from.is_float()) {
            (Reg::F(x), true) | (Reg::I(x), false) => x,
            _ => return None,
        };
        let dst = if to.is_float() {
            let r = self.freg();
            (r, Reg::F(r))
        } else {
            let r = self.ireg();
            (r, Reg::I(r))
        };
        Some((src, dst))
    }

    fn push(&mut self, ins: Instr, var: bool) {
        self.instrs.push((ins, var));
    }

    /// A load: offsets from the index registers (each checked against its dimension), then
    /// the elements (checked against the storage).
    fn load(&mut self, buf: BufId, idx: Vec<usize>) -> Option<(Instr, Reg)> {
        let b = self.f.buf(buf);
        let dims = access_dims(b, &idx);
        let base = b.elem_offset;
        let slot = self.slot[buf.index()];
        let s = slot.index;
        Some(match slot.class {
            Class::F32 => {
                let r = self.freg();
                let ins: Instr = Box::new(move |sc, c, n| {
                    offsets(sc, &dims, base, n) && {
                        let st = &c.f32s[s];
                        let dst = &mut sc.f[r];
                        gather(&sc.off[..n], st, &mut dst[..n], |v| v as f64)
                    }
                });
                (ins, Reg::F(r))
            }
            Class::F64 => {
                let r = self.freg();
                let ins: Instr = Box::new(move |sc, c, n| {
                    offsets(sc, &dims, base, n) && {
                        let st = &c.f64s[s];
                        let dst = &mut sc.f[r];
                        gather(&sc.off[..n], st, &mut dst[..n], |v| v)
                    }
                });
                (ins, Reg::F(r))
            }
            Class::I64 => {
                let r = self.ireg();
                let ins: Instr = Box::new(move |sc, c, n| {
                    offsets(sc, &dims, base, n) && {
                        let st = &c.i64s[s];
                        let dst = &mut sc.i[r];
                        gather(&sc.off[..n], st, &mut dst[..n], |v| v)
                    }
                });
                (ins, Reg::I(r))
            }
        })
    }
}

/// Per dimension of an access: index register, extent, stride.
type Dims = Box<[(usize, i64, i64)]>;

fn access_dims(b: &crate::tir::Buffer, idx: &[usize]) -> Dims {
    let strides = b.effective_strides();
    idx.iter().enumerate().map(|(k, &r)| (r, b.shape[k], strides[k])).collect()
}

/// `sc.off[..n]`: the flat offsets of an access, or `false` when an index leaves its
/// dimension.
#[inline]
fn offsets(sc: &mut Scratch, dims: &[(usize, i64, i64)], base: i64, n: usize) -> bool {
    let mut off = std::mem::take(&mut sc.off);
    off[..n].fill(base as usize);
    let mut ok = true;
    for &(r, extent, stride) in dims {
        let ix = &sc.i[r][..n];
        let mut bad = false;
        for (o, &i) in off[..n].iter_mut().zip(ix) {
            bad |= i < 0 || i >= extent;
            *o = o.wrapping_add(i.wrapping_mul(stride) as usize);
        }
        if bad {
            ok = false;
            break;
        }
    }
    sc.off = off;
    ok
}

#[inline]
fn gather<T: Copy, U>(off: &[usize], st: &[T], dst: &mut [U], conv: impl Fn(T) -> U) -> bool {
    if off.iter().any(|&o| o >= st.len()) {
        return false;
    }
    for (d, &o) in dst.iter_mut().zip(off) {
        *d = conv(st[o]);
    }
    true
}

/// Whether the trees under `a` and `b` are the same index expression.
fn same_tree(f: &PrimFunc, a: PExprId, b: PExprId) -> bool {
    let mut stack = vec![(a, b)];
    while let Some((x, y)) = stack.pop() {
        let (nx, ny) = (f.expr(x), f.expr(y));
        if nx.ty != ny.ty {
            return false;
        }
        match (nx.kind, ny.kind) {
            (PExprKind::Int(p), PExprKind::Int(q)) if p == q => {}
            (PExprKind::Var(p), PExprKind::Var(q)) if p == q => {}
            (PExprKind::Bin(o1, a1, b1), PExprKind::Bin(o2, a2, b2)) if o1 == o2 => {
                stack.push((a1, a2));
                stack.push((b1, b2));
            }
            _ => return false,
        }
    }
    true
}

/// Whether the tree under `root` loads from storage slot `slot` other than at exactly buffer
/// `buf`, indices `at` (`at` empty: any load of the slot counts).
fn reads_slot(c: &Compiler<'_>, root: PExprId, buf: BufId, at: &[PExprId]) -> bool {
    let f = c.f;
    let target = c.slot[buf.index()];
    let mut stack = vec![root];
    let mut ops = Vec::new();
    while let Some(x) = stack.pop() {
        if let PExprKind::Load(b, r) = f.expr(x).kind {
            if c.slot[b.index()] == target {
                let ix = f.operands(r);
                let same = !at.is_empty()
                    && b == buf
                    && ix.len() == at.len()
                    && ix.iter().zip(at).all(|(&p, &q)| same_tree(f, p, q));
                if !same {
                    return true;
                }
            }
        }
        ops.clear();
        f.expr_operands(x, &mut ops);
        stack.extend_from_slice(&ops);
    }
    false
}

/// Whether the tree under `root` mentions any of `vars`.
fn mentions(f: &PrimFunc, root: PExprId, vars: &[usize]) -> bool {
    let mut stack = vec![root];
    let mut ops = Vec::new();
    while let Some(x) = stack.pop() {
        if let PExprKind::Var(v) = f.expr(x).kind {
            if vars.contains(&v.index()) {
                return true;
            }
        }
        ops.clear();
        f.expr_operands(x, &mut ops);
        stack.extend_from_slice(&ops);
    }
    false
}

/// What a matched nest stores.
enum Mode {
    /// Every iteration stores its own element.
    Map,
    /// `X[i] = op(X[i], term)`: the fold, and the term's tree.
    Reduce { term: PExprId, ffold: Option<FFold>, ifold: Option<IFold> },
}

/// The block form of the perfect nest `chain` (outermost first), or `None` when it does not
/// have the shape the block path handles (see the module docs).
pub(super) fn try_compile(c: &mut Compiler<'_>, chain: &[StmtId], nest_id: usize) -> Option<SFn> {
    let f = c.f;
    let mut vars = Vec::with_capacity(chain.len());
    let mut los = Vec::with_capacity(chain.len());
    let mut exts = Vec::with_capacity(chain.len());
    let mut body = None;
    for &s in chain {
        let StmtKind::For { var, min, extent, body: b, .. } = f.stmt(s).kind else { return None };
        let vd = f.var(var).ty.dtype;
        if vd.is_float() {
            return None;
        }
        let (PExprKind::Int(lo), PExprKind::Int(n)) = (f.expr(min).kind, f.expr(extent).kind) else { return None };
        if n <= 0 || lo.checked_add(n).is_none() {
            return None;
        }
        // Every value the variable takes fits its type, so the scalar loop's wrap is the identity.
        let last = lo + n - 1;
        if wrap(lo, vd) != lo || wrap(last, vd) != last {
            return None;
        }
        vars.push(var.index());
        los.push(lo);
        exts.push(n);
        body = Some(b);
    }
    // The body: scalar `let`s, then the store.
    let body_stmt = body?;
    let mut lets: Vec<(usize, PExprId)> = Vec::new();
    let mut store_stmt = body_stmt;
    while let StmtKind::Let { var, value, body } = f.stmt(store_stmt).kind {
        if f.expr(value).ty.lanes != 1 {
            return None;
        }
        lets.push((var.index(), value));
        store_stmt = body;
    }
    let StmtKind::Store { buf, indices, value } = f.stmt(store_stmt).kind else { return None };
    // A `let` value that reads the stored buffer's storage would see earlier iterations'
    // stores in the scalar order; such nests stay scalar.
    if lets.iter().any(|&(_, v)| reads_slot(c, v, buf, &[])) {
        return None;
    }
    // Variables that vary within the nest: the loop variables and the `let`s computed from them.
    let mut varying = vars.clone();
    for &(v, value) in &lets {
        if mentions(f, value, &varying) {
            varying.push(v);
        }
    }
    let idx: Vec<PExprId> = f.operands(indices).to_vec();
    let total = exts.iter().try_fold(1i64, |acc, &e| acc.checked_mul(e))?;
    if f.expr(value).ty.lanes != 1 || idx.iter().any(|&i| f.expr(i).ty.lanes != 1) {
        return None;
    }
    let sd = f.buf(buf).dtype;
    // The mode.
    let free_idx = idx.iter().all(|&i| !mentions(f, i, &varying));
    let mode = match f.expr(value).kind {
        PExprKind::Bin(op, acc, term)
            if free_idx
                && matches!(f.expr(acc).kind, PExprKind::Load(b, r) if b == buf
                    && f.operands(r).len() == idx.len()
                    && f.operands(r).iter().zip(&idx).all(|(&p, &q)| same_tree(f, p, q)))
                && !reads_slot(c, term, buf, &[])
                && !idx.iter().any(|&i| reads_slot(c, i, buf, &[])) =>
        {
            let (ffold, ifold) = if sd.is_float() {
                (Some(float_bin(op, sd, FFoldSink)?), None)
            } else {
                (None, Some(int_arith(op, sd, IFoldSink)))
            };
            Mode::Reduce { term, ffold, ifold }
        }
        _ => {
            let covers = vars
                .iter()
                .all(|&v| idx.iter().any(|&i| matches!(f.expr(i).kind, PExprKind::Var(x) if x.index() == v)));
            let self_reads = reads_slot(c, value, buf, &[]) || idx.iter().any(|&i| reads_slot(c, i, buf, &[]));
            let only_own = !reads_slot(c, value, buf, &idx);
            if self_reads && !(covers && only_own && f.buf(buf).strides.is_empty()) {
                return None;
            }
            if idx.iter().any(|&i| reads_slot(c, i, buf, &[])) {
                return None;
            }
            Mode::Map
        }
    };
    let mut bld = Builder {
        f,
        slot: &c.slot,
        nest_vars: &vars,
        nf: 0,
        ni: vars.len(),
        instrs: Vec::new(),
        regs: vec![None; f.exprs().len()],
        lets: Vec::with_capacity(lets.len()),
    };
    for &(v, value) in &lets {
        let r = bld.tree(value)?;
        bld.lets.push((v, r));
    }
    let value_reg = match &mode {
        Mode::Map => bld.tree(value)?.0,
        Mode::Reduce { term, .. } => bld.tree(*term)?.0,
    };
    let idx_regs: Vec<usize> = idx
        .iter()
        .map(|&i| match bld.tree(i) {
            Some((Reg::I(r), _)) => Some(r),
            _ => None,
        })
        .collect::<Option<_>>()?;
    match (value_reg, c.slot[buf.index()].class) {
        (Reg::F(_), Class::F32 | Class::F64) | (Reg::I(_), Class::I64) => {}
        _ => return None,
    }
    let Builder { instrs, nf, ni, .. } = bld;
    // Matched: the scalar body (its `let`s and the store closure) becomes the fallback.
    let store_op = if lets.is_empty() {
        c.leaves.get_mut(store_stmt.index()).and_then(Option::take)?
    } else {
        super::block(c.flatten(body_stmt).ok()?)
    };
    let dims = access_dims(f.buf(buf), &idx_regs);
    let base = f.buf(buf).elem_offset;
    let slot = c.slot[buf.index()];
    let nest = Nest { vars, los, exts, total, instrs, nf, ni, nest_id, store_op };
    Some(match mode {
        Mode::Map => Box::new(move |cx: &mut Ctx| {
            nest.run(cx, |sc, cx, n| {
                if !offsets(sc, &dims, base, n) {
                    return false;
                }
                let off = &sc.off[..n];
                match (value_reg, slot.class) {
                    (Reg::F(r), Class::F32) => scatter(off, &sc.f[r][..n], &mut cx.f32s[slot.index], |v| v as f32),
                    (Reg::F(r), _) => scatter(off, &sc.f[r][..n], &mut cx.f64s[slot.index], |v| v),
                    (Reg::I(r), _) => scatter(off, &sc.i[r][..n], &mut cx.i64s[slot.index], |v| v),
                }
            })
        }),
        Mode::Reduce { ffold, ifold, .. } => Box::new(move |cx: &mut Ctx| {
            nest.run_reduce(cx, &dims, base, slot, value_reg, ffold.as_deref(), ifold.as_deref())
        }),
    })
}

#[inline]
fn scatter<T: Copy, U>(off: &[usize], vals: &[T], st: &mut [U], conv: impl Fn(T) -> U) -> bool {
    if off.iter().any(|&o| o >= st.len()) {
        return false;
    }
    for (&o, &v) in off.iter().zip(vals) {
        st[o] = conv(v);
    }
    true
}

/// A compiled nest.
struct Nest {
    /// Frame slots of the loop variables, outermost first, with their ranges.
    vars: Vec<usize>,
    los: Vec<i64>,
    exts: Vec<i64>,
    total: i64,
    instrs: Vec<(Instr, bool)>,
    nf: usize,
    ni: usize,
    nest_id: usize,
    /// The scalar store: the fallback.
    store_op: SFn,
}

impl Nest {
    fn scratch(&self, c: &mut Ctx, width: usize) -> Scratch {
        let mut sc = std::mem::take(&mut c.nests[self.nest_id]);
        if sc.off.len() < width {
            sc.f = vec![vec![0.0; width]; self.nf];
            sc.i = vec![vec![0; width]; self.ni];
            sc.off = vec![0; width];
        }
        sc
    }

    /// Fills the loop-variable registers for iterations `pos..pos + n`.
    fn fill_vars(&self, sc: &mut Scratch, pos: i64, n: usize) {
        let k = self.vars.len();
        // The odometer at `pos`.
        let mut ctr = [0i64; 8];
        let mut p = pos;
        for d in (0..k).rev() {
            ctr[d] = p % self.exts[d];
            p /= self.exts[d];
        }
        let inner = k - 1;
        let mut j = 0;
        while j < n {
            // A run along the innermost loop.
            let run = ((self.exts[inner] - ctr[inner]) as usize).min(n - j);
            for (d, &c) in ctr.iter().enumerate().take(inner) {
                sc.i[d][j..j + run].fill(self.los[d] + c);
            }
            let start = self.los[inner] + ctr[inner];
            for (t, o) in sc.i[inner][j..j + run].iter_mut().enumerate() {
                *o = start + t as i64;
            }
            j += run;
            ctr[inner] += run as i64;
            let mut d = inner;
            while d > 0 && ctr[d] == self.exts[d] {
                ctr[d] = 0;
                ctr[d - 1] += 1;
                d -= 1;
            }
        }
    }

    fn run_instrs(&self, sc: &mut Scratch, c: &mut Ctx, n: usize, first: bool) -> bool {
        self.instrs.iter().all(|(ins, var)| (!first && !*var) || ins(sc, c, n))
    }

    /// The scalar path from iteration `pos` to the end.
    fn fallback(&self, c: &mut Ctx, pos: i64) {
        let k = self.vars.len();
        let mut ctr = [0i64; 8];
        let mut p = pos;
        for d in (0..k).rev() {
            ctr[d] = p % self.exts[d];
            p /= self.exts[d];
        }
        for _ in pos..self.total {
            for (d, &ct) in ctr.iter().enumerate().take(k) {
                c.ints[self.vars[d]] = self.los[d] + ct;
            }
            (self.store_op)(c);
            if c.err.is_some() {
                return;
            }
            let mut d = k - 1;
            ctr[d] += 1;
            while d > 0 && ctr[d] == self.exts[d] {
                ctr[d] = 0;
                ctr[d - 1] += 1;
                d -= 1;
            }
        }
    }

    /// Leaves the loop variables as the scalar loops leave them.
    fn finish_vars(&self, c: &mut Ctx) {
        for d in 0..self.vars.len() {
            c.ints[self.vars[d]] = self.los[d] + self.exts[d] - 1;
        }
    }

    fn width(&self) -> usize {
        (self.total as usize).min(BLOCK)
    }

    /// A map nest: per block, the values, then `store` (false: fall back from the block).
    fn run(&self, c: &mut Ctx, store: impl Fn(&mut Scratch, &mut Ctx, usize) -> bool) {
        if self.vars.len() > 8 {
            return self.fallback(c, 0);
        }
        let w = self.width();
        let mut sc = self.scratch(c, w);
        let mut pos = 0i64;
        let mut first = true;
        while pos < self.total {
            let n = ((self.total - pos) as usize).min(w);
            self.fill_vars(&mut sc, pos, n);
            if !(self.run_instrs(&mut sc, c, n, first) && store(&mut sc, c, n)) {
                c.nests[self.nest_id] = sc;
                return self.fallback(c, pos);
            }
            first = false;
            pos += n as i64;
        }
        c.nests[self.nest_id] = sc;
        self.finish_vars(c);
    }

    /// A reduction nest: the accumulator's element is fixed for the nest; terms fold into it.
    #[allow(clippy::too_many_arguments)]
    fn run_reduce(
        &self,
        c: &mut Ctx,
        dims: &[(usize, i64, i64)],
        base: i64,
        slot: super::Slot,
        term: Reg,
        ffold: Option<&FFoldFn>,
        ifold: Option<&IFoldFn>,
    ) {
        if self.vars.len() > 8 {
            return self.fallback(c, 0);
        }
        let w = self.width();
        let mut sc = self.scratch(c, w);
        // The first block computes the invariant index registers; the accumulator's offset
        // is their first lane.
        let n0 = (self.total as usize).min(w);
        self.fill_vars(&mut sc, 0, n0);
        let ok = self.run_instrs(&mut sc, c, n0, true) && offsets(&mut sc, dims, base, 1);
        let at = sc.off[0];
        let len = c.storage_len(slot);
        if !ok || at >= len {
            c.nests[self.nest_id] = sc;
            return self.fallback(c, 0);
        }
        let mut pos = 0i64;
        let mut first = true;
        let (mut facc, mut iacc) = match slot.class {
            Class::F32 => (c.f32s[slot.index][at] as f64, 0),
            Class::F64 => (c.f64s[slot.index][at], 0),
            Class::I64 => (0.0, c.i64s[slot.index][at]),
        };
        let write = |c: &mut Ctx, facc: f64, iacc: i64| match slot.class {
            Class::F32 => c.f32s[slot.index][at] = facc as f32,
            Class::F64 => c.f64s[slot.index][at] = facc,
            Class::I64 => c.i64s[slot.index][at] = iacc,
        };
        while pos < self.total {
            let n = ((self.total - pos) as usize).min(w);
            if !first {
                self.fill_vars(&mut sc, pos, n);
            }
            let ok = (first || self.run_instrs(&mut sc, c, n, false))
                && match (term, ffold, ifold) {
                    (Reg::F(r), Some(fold), _) => {
                        facc = fold(facc, &sc.f[r][..n]);
                        true
                    }
                    (Reg::I(r), _, Some(fold)) => match fold(iacc, &sc.i[r][..n]) {
                        Some(v) => {
                            iacc = v;
                            true
                        }
                        None => false,
                    },
                    _ => false,
                };
            if !ok {
                c.nests[self.nest_id] = sc;
                write(c, facc, iacc);
                return self.fallback(c, pos);
            }
            first = false;
            pos += n as i64;
        }
        c.nests[self.nest_id] = sc;
        write(c, facc, iacc);
        self.finish_vars(c);
    }
}
