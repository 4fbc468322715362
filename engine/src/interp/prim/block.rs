//! The block path of the PrimFunc interpreter: a perfect nest of serial loops whose body is
//! one store runs a block of iterations at a time, each expression node computing a register
//! of up to [`BLOCK`] values per dispatch, instead of one closure call per node per
//! iteration. It shortcuts the scalar closures of [`super::Compiler`] and computes exactly what
//! they compute (up to which NaN a NaN result is, which the semantics in [`super`] leave
//! open):
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
    /// The init store's offsets in an initialised reduction ([`ReduceNest`]).
    off0: Vec<usize>,
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

/// The most loops a block nest may have (the odometers are arrays of this size).
const MAX_VARS: usize = 16;

/// The loops of a perfect nest, outermost first.
struct Loops {
    /// Frame slots of the loop variables, with their constant ranges.
    vars: Vec<usize>,
    los: Vec<i64>,
    exts: Vec<i64>,
    /// The innermost loop's body.
    body: StmtId,
}

/// The loops of `chain`, or `None` when a bound is not constant, an extent is not positive,
/// or a variable's type cannot hold every value it takes (the block path does not wrap loop
/// variables, so the scalar loop's wrap must be the identity).
fn loops(f: &PrimFunc, chain: &[StmtId]) -> Option<Loops> {
    let mut l = Loops {
        vars: Vec::with_capacity(chain.len()),
        los: Vec::with_capacity(chain.len()),
        exts: Vec::with_capacity(chain.len()),
        body: *chain.first()?,
    };
    for &s in chain {
        let StmtKind::For { var, min, extent, body, .. } = f.stmt(s).kind else { return None };
        let vd = f.var(var).ty.dtype;
        if vd.is_float() {
            return None;
        }
        let (PExprKind::Int(lo), PExprKind::Int(n)) = (f.expr(min).kind, f.expr(extent).kind) else { return None };
        if n <= 0 || lo.checked_add(n).is_none() {
            return None;
        }
        let last = lo + n - 1;
        if wrap(lo, vd) != lo || wrap(last, vd) != last {
            return None;
        }
        l.vars.push(var.index());
        l.los.push(lo);
        l.exts.push(n);
        l.body = body;
    }
    (l.vars.len() <= MAX_VARS).then_some(l)
}

/// A nest body: scalar `let`s (frame slot and value), then one store.
fn lets_then_store(f: &PrimFunc, body: StmtId) -> Option<(Vec<(usize, PExprId)>, StmtId)> {
    let mut lets = Vec::new();
    let mut s = body;
    while let StmtKind::Let { var, value, body } = f.stmt(s).kind {
        if f.expr(value).ty.lanes != 1 {
            return None;
        }
        lets.push((var.index(), value));
        s = body;
    }
    matches!(f.stmt(s).kind, StmtKind::Store { .. }).then_some((lets, s))
}

/// The variables that vary with `vars`: those, and the `lets` computed from them.
fn varying_with(f: &PrimFunc, vars: &[usize], lets: &[(usize, PExprId)]) -> Vec<usize> {
    let mut varying = vars.to_vec();
    for &(v, value) in lets {
        if mentions(f, value, &varying) {
            varying.push(v);
        }
    }
    varying
}

/// The reduction mode of a store `X[idx] = value` when `value` is `op(X[idx], term)` with
/// `idx` free of the `varying` variables and neither the term nor `idx` reading `X`'s
/// storage; `None` otherwise (also when the operator has no fold, a float comparison).
fn reduction(c: &Compiler<'_>, buf: BufId, idx: &[PExprId], value: PExprId, varying: &[usize]) -> Option<Mode> {
    let f = c.f;
    let PExprKind::Bin(op, acc, term) = f.expr(value).kind else { return None };
    let same_acc = matches!(f.expr(acc).kind, PExprKind::Load(b, r) if b == buf
        && f.operands(r).len() == idx.len()
        && f.operands(r).iter().zip(idx).all(|(&p, &q)| same_tree(f, p, q)));
    let free_idx = idx.iter().all(|&i| !mentions(f, i, varying));
    if !same_acc || !free_idx || reads_slot(c, term, buf, &[]) || idx.iter().any(|&i| reads_slot(c, i, buf, &[])) {
        return None;
    }
    let sd = f.buf(buf).dtype;
    let (ffold, ifold) = if sd.is_float() {
        (Some(float_bin(op, sd, FFoldSink)?), None)
    } else {
        (None, Some(int_arith(op, sd, IFoldSink)))
    };
    Some(Mode::Reduce { term, ffold, ifold })
}

impl<'a> Builder<'a> {
    fn new(c: &'a Compiler<'_>, nest_vars: &'a [usize]) -> Builder<'a> {
        Builder {
            f: c.f,
            slot: &c.slot,
            nest_vars,
            nf: 0,
            ni: nest_vars.len(),
            instrs: Vec::new(),
            regs: vec![None; c.f.exprs().len()],
            lets: Vec::new(),
        }
    }

    /// The integer registers of index expressions, or `None`.
    fn indices(&mut self, idx: &[PExprId]) -> Option<Vec<usize>> {
        idx.iter()
            .map(|&i| match self.tree(i) {
                Some((Reg::I(r), _)) => Some(r),
                _ => None,
            })
            .collect()
    }
}

/// Whether a value in register `r` can be stored into storage of class `class`.
fn fits(r: Reg, class: Class) -> bool {
    matches!((r, class), (Reg::F(_), Class::F32 | Class::F64) | (Reg::I(_), Class::I64))
}

/// The block form of the perfect nest `chain` (outermost first), or `None` when it does not
/// have the shape the block path handles (see the module docs).
pub(super) fn try_compile(c: &mut Compiler<'_>, chain: &[StmtId], nest_id: usize) -> Option<SFn> {
    let f = c.f;
    let Loops { vars, los, exts, body: body_stmt } = loops(f, chain)?;
    let (lets, store_stmt) = lets_then_store(f, body_stmt)?;
    let StmtKind::Store { buf, indices, value } = f.stmt(store_stmt).kind else { return None };
    // A `let` value that reads the stored buffer's storage would see earlier iterations'
    // stores in the scalar order; such nests stay scalar.
    if lets.iter().any(|&(_, v)| reads_slot(c, v, buf, &[])) {
        return None;
    }
    // Variables that vary within the nest: the loop variables and the `let`s computed from them.
    let varying = varying_with(f, &vars, &lets);
    let idx: Vec<PExprId> = f.operands(indices).to_vec();
    let total = exts.iter().try_fold(1i64, |acc, &e| acc.checked_mul(e))?;
    if f.expr(value).ty.lanes != 1 || idx.iter().any(|&i| f.expr(i).ty.lanes != 1) {
        return None;
    }
    let mode = match reduction(c, buf, &idx, value, &varying) {
        Some(m) => m,
        None => {
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
    let mut bld = Builder::new(c, &vars);
    for &(v, value) in &lets {
        let r = bld.tree(value)?;
        bld.lets.push((v, r));
    }
    let value_reg = match &mode {
        Mode::Map => bld.tree(value)?.0,
        Mode::Reduce { term, .. } => bld.tree(*term)?.0,
    };
    let idx_regs = bld.indices(&idx)?;
    if !fits(value_reg, c.slot[buf.index()].class) {
        return None;
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
    let nest = Nest { vars, los, exts, total, instrs, nf, ni, nest_id };
    Some(match mode {
        Mode::Map => Box::new(move |cx: &mut Ctx| {
            nest.run(cx, &store_op, |sc, cx, n| {
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
            nest.run_reduce(cx, &store_op, &dims, base, slot, value_reg, ffold.as_deref(), ifold.as_deref())
        }),
    })
}

/// The block form of an *initialised reduction*: loops `outer` (outermost first) whose body is
/// one store followed by a perfect reduction nest,
///
/// ```text
/// for %i … { X[j] = init; for %r … { let …; X[i] = op(X[i], term) } }
/// ```
///
/// which is what the compute layer's `reduce` lowers to (convolutions, matmuls, pools, sums).
/// The reduction nest alone is short (a 3×3 convolution over 3 channels: 27 iterations), so
/// it would pay the block dispatch once per output element; here one block spans whole
/// outer iterations (`BLOCK / inner` of them), every register is computed for the block, and
/// then each outer iteration, in order, stores its `init` and folds its terms into its
/// accumulator, as the scalar loops do. What the block computes before storing (the init
/// value and index, the `let`s, the term and the accumulator's index) must read neither
/// stored buffer's storage, and the accumulator's index is free of the reduction's variables.
/// A failing block stores nothing and hands the rest, from its first outer iteration, to the
/// scalar init store and the reduction nest as compiled on their own.
///
/// `None` when the shape does not match or the reduction nest is longer than a block (its
/// own block form already amortises the dispatch).
pub(super) fn try_compile_reduce_nest(c: &mut Compiler<'_>, outer: &[StmtId], nest_id: usize) -> Option<SFn> {
    let f = c.f;
    let StmtKind::For { body, .. } = f.stmt(*outer.last()?).kind else { return None };
    let StmtKind::Seq(list) = f.stmt(body).kind else { return None };
    let &[init_stmt, inner_root] = f.stmt_list(list) else { return None };
    let StmtKind::Store { buf: ibuf, indices: iidx, value: ival } = f.stmt(init_stmt).kind else { return None };
    let n_outer = outer.len();
    let mut chain = outer.to_vec();
    chain.push(inner_root);
    while let StmtKind::For { body, .. } = f.stmt(chain[chain.len() - 1]).kind {
        if !matches!(f.stmt(body).kind, StmtKind::For { .. }) {
            break;
        }
        chain.push(body);
    }
    let Loops { vars, los, exts, body } = loops(f, &chain)?;
    let (lets, store_stmt) = lets_then_store(f, body)?;
    let StmtKind::Store { buf, indices, value } = f.stmt(store_stmt).kind else { return None };
    let idx: Vec<PExprId> = f.operands(indices).to_vec();
    let init_idx: Vec<PExprId> = f.operands(iidx).to_vec();
    if f.expr(value).ty.lanes != 1
        || f.expr(ival).ty.lanes != 1
        || idx.iter().chain(&init_idx).any(|&i| f.expr(i).ty.lanes != 1)
    {
        return None;
    }
    let inner = exts[n_outer..].iter().try_fold(1i64, |acc, &e| acc.checked_mul(e))?;
    let outer_total = exts[..n_outer].iter().try_fold(1i64, |acc, &e| acc.checked_mul(e))?;
    let total = outer_total.checked_mul(inner)?;
    if inner > BLOCK as i64 {
        return None;
    }
    // The reduction's own variables: its loops and the `let`s computed from them.
    let varying = varying_with(f, &vars[n_outer..], &lets);
    let Mode::Reduce { term, ffold, ifold } = reduction(c, buf, &idx, value, &varying)? else { return None };
    // The init store runs outside the reduction's scope: it cannot name its variables or `let`s
    // (the verifier's scoping; checked here since the block computes it on every lane).
    let inner_names: Vec<usize> = vars[n_outer..].iter().copied().chain(lets.iter().map(|&(v, _)| v)).collect();
    if mentions(f, ival, &inner_names) || init_idx.iter().any(|&i| mentions(f, i, &inner_names)) {
        return None;
    }
    // Nothing computed ahead of the stores reads what they write.
    for w in [buf, ibuf] {
        let mut computed =
            lets.iter().map(|&(_, v)| v).chain([ival, term]).chain(init_idx.iter().copied()).chain(idx.iter().copied());
        if computed.any(|e| reads_slot(c, e, w, &[])) {
            return None;
        }
    }
    let mut bld = Builder::new(c, &vars);
    let init_reg = bld.tree(ival)?.0;
    let init_regs = bld.indices(&init_idx)?;
    for &(v, value) in &lets {
        let r = bld.tree(value)?;
        bld.lets.push((v, r));
    }
    let term_reg = bld.tree(term)?.0;
    let idx_regs = bld.indices(&idx)?;
    let (islot, slot) = (c.slot[ibuf.index()], c.slot[buf.index()]);
    if !fits(init_reg, islot.class) || !fits(term_reg, slot.class) {
        return None;
    }
    let Builder { instrs, nf, ni, .. } = bld;
    // Matched: the scalar init store and the reduction nest as compiled on its own become the
    // fallback.
    let has = |c: &Compiler<'_>, s: StmtId| c.leaves.get(s.index()).is_some_and(Option::is_some);
    if !has(c, init_stmt) || !has(c, inner_root) {
        return None;
    }
    let init_op = c.leaves[init_stmt.index()].take()?;
    let inner_op = c.leaves[inner_root.index()].take()?;
    if c.block_leaf[inner_root.index()] {
        c.n_subsumed += 1;
    }
    c.n_reduce_nests += 1;
    let seg = ReduceNest {
        nest: Nest { vars, los, exts, total, instrs, nf, ni, nest_id },
        n_outer,
        inner: inner as usize,
        outer_total,
        init_op,
        inner_op,
        init: (access_dims(f.buf(ibuf), &init_regs), f.buf(ibuf).elem_offset, islot, init_reg),
        acc: (access_dims(f.buf(buf), &idx_regs), f.buf(buf).elem_offset, slot, term_reg),
        ffold,
        ifold,
    };
    Some(Box::new(move |cx: &mut Ctx| seg.run(cx)))
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

/// A compiled nest: its loops and the block instructions of its body.
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
}

/// The odometer of loops with extents `exts` at flat iteration `pos`.
fn odometer(exts: &[i64], pos: i64) -> [i64; MAX_VARS] {
    let mut ctr = [0i64; MAX_VARS];
    let mut p = pos;
    for d in (0..exts.len()).rev() {
        ctr[d] = p % exts[d];
        p /= exts[d];
    }
    ctr
}

/// Advances the odometer `ctr` of loops with extents `exts` by one iteration.
fn advance(ctr: &mut [i64; MAX_VARS], exts: &[i64]) {
    let Some(mut d) = exts.len().checked_sub(1) else { return };
    ctr[d] += 1;
    while d > 0 && ctr[d] == exts[d] {
        ctr[d] = 0;
        ctr[d - 1] += 1;
        d -= 1;
    }
}

impl Nest {
    fn scratch(&self, c: &mut Ctx, width: usize) -> Scratch {
        let mut sc = std::mem::take(&mut c.nests[self.nest_id]);
        if sc.off.len() < width {
            sc.f = vec![vec![0.0; width]; self.nf];
            sc.i = vec![vec![0; width]; self.ni];
            sc.off = vec![0; width];
            sc.off0 = vec![0; width];
        }
        sc
    }

    /// Fills the loop-variable registers for iterations `pos..pos + n`: loop `d` holds
    /// `lo + (p / stride) % extent` at iteration `p`, where `stride` is the product of the inner
    /// extents, so each register is runs of one value (a ramp for the innermost loop that
    /// is longer than 1), filled a run at a time. Loops of extent 1 (a 1×1 convolution's
    /// kernel loops) are one fill.
    fn fill_vars(&self, sc: &mut Scratch, pos: i64, n: usize) {
        let mut stride = 1i64;
        for d in (0..self.vars.len()).rev() {
            let (lo, ext) = (self.los[d], self.exts[d]);
            let reg = &mut sc.i[d][..n];
            if ext == 1 {
                reg.fill(lo);
            } else if stride == 1 {
                let mut c = pos % ext;
                for o in reg.iter_mut() {
                    *o = lo + c;
                    c += 1;
                    if c == ext {
                        c = 0;
                    }
                }
            } else {
                let mut c = (pos / stride) % ext;
                let mut run = ((stride - pos % stride) as usize).min(n);
                let mut j = 0;
                while j < n {
                    reg[j..j + run].fill(lo + c);
                    j += run;
                    c += 1;
                    if c == ext {
                        c = 0;
                    }
                    run = (stride as usize).min(n - j);
                }
            }
            stride = stride.saturating_mul(ext);
        }
    }

    fn run_instrs(&self, sc: &mut Scratch, c: &mut Ctx, n: usize, first: bool) -> bool {
        self.instrs.iter().all(|(ins, var)| (!first && !*var) || ins(sc, c, n))
    }

    /// The scalar path (`store_op` per iteration) from iteration `pos` to the end.
    fn fallback(&self, c: &mut Ctx, store_op: &SFn, pos: i64) {
        let k = self.vars.len();
        let mut ctr = odometer(&self.exts, pos);
        for _ in pos..self.total {
            for (d, &ct) in ctr.iter().enumerate().take(k) {
                c.ints[self.vars[d]] = self.los[d] + ct;
            }
            store_op(c);
            if c.err.is_some() {
                return;
            }
            advance(&mut ctr, &self.exts);
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
    fn run(&self, c: &mut Ctx, store_op: &SFn, store: impl Fn(&mut Scratch, &mut Ctx, usize) -> bool) {
        let w = self.width();
        let mut sc = self.scratch(c, w);
        let mut pos = 0i64;
        let mut first = true;
        while pos < self.total {
            let n = ((self.total - pos) as usize).min(w);
            self.fill_vars(&mut sc, pos, n);
            if !(self.run_instrs(&mut sc, c, n, first) && store(&mut sc, c, n)) {
                c.nests[self.nest_id] = sc;
                return self.fallback(c, store_op, pos);
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
        store_op: &SFn,
        dims: &[(usize, i64, i64)],
        base: i64,
        slot: super::Slot,
        term: Reg,
        ffold: Option<&FFoldFn>,
        ifold: Option<&IFoldFn>,
    ) {
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
            return self.fallback(c, store_op, 0);
        }
        let mut pos = 0i64;
        let mut first = true;
        let (mut facc, mut iacc) = match slot.class {
            Class::F32 => (c.f32s[slot.index][at] as f64, 0),
            Class::F64 => (c.f64s[slot.index][at], 0),
            Class::I64 => (0.0, c.i64s[slot.index][at]),
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
                put(c, slot, at, facc, iacc);
                return self.fallback(c, store_op, pos);
            }
            first = false;
            pos += n as i64;
        }
        c.nests[self.nest_id] = sc;
        put(c, slot, at, facc, iacc);
        self.finish_vars(c);
    }
}

/// Stores a value at offset `at` of `slot` (in bounds): the float `f` into float storage, the
/// integer `i` into integer storage.
#[inline]
fn put(c: &mut Ctx, slot: super::Slot, at: usize, f: f64, i: i64) {
    match slot.class {
        Class::F32 => c.f32s[slot.index][at] = f as f32,
        Class::F64 => c.f64s[slot.index][at] = f,
        Class::I64 => c.i64s[slot.index][at] = i,
    }
}

/// The element at offset `at` of `slot` (in bounds), as a float or an integer by class.
#[inline]
fn get(c: &Ctx, slot: super::Slot, at: usize) -> (f64, i64) {
    match slot.class {
        Class::F32 => (c.f32s[slot.index][at] as f64, 0),
        Class::F64 => (c.f64s[slot.index][at], 0),
        Class::I64 => (0.0, c.i64s[slot.index][at]),
    }
}

/// A store's access in a block: index dimensions, element offset, storage slot, and the
/// register of the stored value (or term).
type BlockAccess = (Dims, i64, super::Slot, Reg);

/// A compiled initialised reduction ([`try_compile_reduce_nest`]).
struct ReduceNest {
    /// Every loop: the outer ones, then the reduction's.
    nest: Nest,
    n_outer: usize,
    /// Iterations of the reduction per outer iteration (at most [`BLOCK`]).
    inner: usize,
    outer_total: i64,
    /// The scalar init store and the reduction nest as compiled alone: the fallback.
    init_op: SFn,
    inner_op: SFn,
    init: BlockAccess,
    acc: BlockAccess,
    ffold: Option<FFold>,
    ifold: Option<IFold>,
}

impl ReduceNest {
    fn run(&self, c: &mut Ctx) {
        let nest = &self.nest;
        let m = self.inner;
        let per_block = (BLOCK / m).max(1) as i64;
        let mut sc = nest.scratch(c, (per_block as usize * m).min(nest.total as usize));
        let (init_dims, init_base, islot, init_reg) = &self.init;
        let (dims, base, slot, term) = &self.acc;
        let (ilen, len) = (c.storage_len(*islot), c.storage_len(*slot));
        let mut o = 0i64;
        let mut first = true;
        while o < self.outer_total {
            let nb = per_block.min(self.outer_total - o);
            let n = nb as usize * m;
            nest.fill_vars(&mut sc, o * m as i64, n);
            let ok = nest.run_instrs(&mut sc, c, n, first)
                && offsets(&mut sc, init_dims, *init_base, n)
                && {
                    std::mem::swap(&mut sc.off, &mut sc.off0);
                    offsets(&mut sc, dims, *base, n)
                }
                && (0..n).step_by(m).all(|j| sc.off0[j] < ilen && sc.off[j] < len);
            if !ok {
                c.nests[nest.nest_id] = sc;
                return self.fallback(c, o);
            }
            for t in 0..nb as usize {
                let j = t * m;
                let (fv, iv) = match *init_reg {
                    Reg::F(r) => (sc.f[r][j], 0),
                    Reg::I(r) => (0.0, sc.i[r][j]),
                };
                put(c, *islot, sc.off0[j], fv, iv);
                let at = sc.off[j];
                let (facc, iacc) = get(c, *slot, at);
                match (*term, self.ffold.as_deref(), self.ifold.as_deref()) {
                    (Reg::F(r), Some(fold), _) => put(c, *slot, at, fold(facc, &sc.f[r][j..j + m]), 0),
                    (Reg::I(r), _, Some(fold)) => match fold(iacc, &sc.i[r][j..j + m]) {
                        Some(v) => put(c, *slot, at, 0.0, v),
                        None => {
                            c.nests[nest.nest_id] = sc;
                            return self.fallback(c, o + t as i64);
                        }
                    },
                    _ => {
                        c.nests[nest.nest_id] = sc;
                        return self.fallback(c, o + t as i64);
                    }
                }
            }
            first = false;
            o += nb;
        }
        c.nests[nest.nest_id] = sc;
        nest.finish_vars(c);
    }

    /// The scalar path from outer iteration `from` to the end: the init store, then the
    /// reduction nest, per outer iteration.
    fn fallback(&self, c: &mut Ctx, from: i64) {
        let k = self.n_outer;
        let exts = &self.nest.exts[..k];
        let mut ctr = odometer(exts, from);
        for _ in from..self.outer_total {
            for (d, &ct) in ctr.iter().enumerate().take(k) {
                c.ints[self.nest.vars[d]] = self.nest.los[d] + ct;
            }
            (self.init_op)(c);
            if c.err.is_some() {
                return;
            }
            (self.inner_op)(c);
            if c.err.is_some() {
                return;
            }
            advance(&mut ctr, exts);
        }
    }
}
