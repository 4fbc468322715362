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
    /// The flat iteration of the block's first lane (affine registers are filled from it).
    pos: i64,
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
    /// The nest's loop ranges (first value and extent), as `nest_vars`.
    los: &'a [i64],
    exts: &'a [i64],
    nf: usize,
    ni: usize,
    /// Instructions in evaluation order, with whether they vary within the nest.
    instrs: Vec<(Instr, bool)>,
    /// Per expression: its register and whether it varies (`None` for an affine expression
    /// not materialized yet, see `aff`).
    regs: Vec<Option<(Reg, bool)>>,
    /// Per expression: its affine form in the nest's loop variables, when it has one that its
    /// dtype holds exactly (see [`Aff`]). Such an expression gets a register only when a
    /// non-affine user needs one ([`Builder::get`]); an access whose indices are all affine
    /// and statically in bounds computes its flat offsets directly ([`Builder::access`]).
    aff: Vec<Option<Aff>>,
    /// Per variable reference bound by a body `let`: the `let`'s value expression.
    alias: Vec<Option<PExprId>>,
    /// Variables bound by the body's `let`s: frame slot, and the value expression.
    lets: Vec<(usize, PExprId)>,
}

/// An integer expression that is affine in the nest's loop variables: `c + Σ a[k] * var_k`,
/// held exactly (i128). Only kept when every value it takes over the nest's ranges (and so,
/// since each variable ranges independently, every value of each of its subexpressions, which
/// are affine too) lies in its dtype's range: the dtype's wrap is then the identity, so the
/// form computes exactly what the scalar closures compute.
#[derive(Clone, Debug)]
struct Aff {
    c: i128,
    a: Vec<i128>,
}

impl Aff {
    fn constant(c: i64, k: usize) -> Aff {
        Aff { c: c as i128, a: vec![0; k] }
    }

    /// The least and greatest value over the nest's ranges.
    fn interval(&self, los: &[i64], exts: &[i64]) -> (i128, i128) {
        let (mut lo, mut hi) = (self.c, self.c);
        for ((&a, &l), &e) in self.a.iter().zip(los).zip(exts) {
            let (x, y) = (a * l as i128, a * (l as i128 + e as i128 - 1));
            lo += x.min(y);
            hi += x.max(y);
        }
        (lo, hi)
    }

    fn combine(&self, other: &Aff, sign: i128) -> Aff {
        Aff { c: self.c + sign * other.c, a: self.a.iter().zip(&other.a).map(|(&x, &y)| x + sign * y).collect() }
    }

    fn scale(&self, k: i128) -> Option<Aff> {
        Some(Aff { c: self.c.checked_mul(k)?, a: self.a.iter().map(|&x| x.checked_mul(k)).collect::<Option<_>>()? })
    }

    fn constant_value(&self) -> Option<i128> {
        self.a.iter().all(|&x| x == 0).then_some(self.c)
    }
}

/// The range of values an integer dtype holds, for the affine forms (`None`: not tracked;
/// u64 compares and divides unsigned, `bool` wraps to one bit).
fn int_range(d: DType) -> Option<(i128, i128)> {
    d.int_range().filter(|_| d != DType::U64)
}

/// How to fill a block's lanes with the values of an affine form: the nest's loops with
/// extent 1 dropped (their value is folded into `c0`) and adjacent loops merged where the form
/// steps through them as one (`a` of the outer equal to `a * extent` of the inner: a row-major
/// index over both), so the innermost dimension is as long a ramp as the form allows.
struct AffPlan {
    /// The value at the nest's first iteration.
    c0: i64,
    /// Per dimension, outermost first: extent, coefficient, and the step from the last
    /// iteration of every inner dimension to the next value of this one
    /// (`a - Σ inner a * (extent - 1)`).
    dims: Box<[(i64, i64, i64)]>,
}

impl AffPlan {
    /// The plan of `form` over loops of first values `los` and extents `exts`, or `None` when a
    /// value, coefficient or step does not fit i64 (the caller checked the form's interval).
    fn new(form: &Aff, los: &[i64], exts: &[i64]) -> Option<AffPlan> {
        let mut c0 = form.c;
        let mut dims: Vec<(i128, i128)> = Vec::new();
        for ((&a, &l), &e) in form.a.iter().zip(los).zip(exts) {
            c0 += a * l as i128;
            if e == 1 {
                continue;
            }
            match dims.last_mut() {
                Some(last) if last.1 == a * e as i128 => *last = (last.0 * e as i128, a),
                _ => dims.push((e as i128, a)),
            }
        }
        let mut out = Vec::with_capacity(dims.len());
        for (k, &(e, a)) in dims.iter().enumerate() {
            let inner: i128 = dims[k + 1..].iter().map(|&(e2, a2)| a2 * (e2 - 1)).sum();
            out.push((i64::try_from(e).ok()?, i64::try_from(a).ok()?, i64::try_from(a - inner).ok()?));
        }
        Some(AffPlan { c0: i64::try_from(c0).ok()?, dims: out.into() })
    }

    /// Whether the value changes within the nest.
    fn varies(&self) -> bool {
        self.dims.iter().any(|&(_, a, _)| a != 0)
    }

    /// `out[j]` = the value at flat iteration `pos + j`: a ramp along the innermost dimension,
    /// then a step to the next value of the outer ones (an odometer over the dimensions).
    #[inline]
    fn fill<T>(&self, pos: i64, out: &mut [T], conv: impl Fn(i64) -> T) {
        let n = out.len();
        let Some(last) = self.dims.len().checked_sub(1) else {
            out.fill_with(|| conv(self.c0));
            return;
        };
        let mut ctr = [0i64; MAX_VARS];
        let (mut p, mut v) = (pos, self.c0);
        for d in (0..=last).rev() {
            let (e, a, _) = self.dims[d];
            ctr[d] = p % e;
            p /= e;
            v += a * ctr[d];
        }
        let (el, al, _) = self.dims[last];
        let mut j = 0;
        loop {
            let run = ((el - ctr[last]) as usize).min(n - j);
            for (t, o) in out[j..j + run].iter_mut().enumerate() {
                *o = conv(v + al * t as i64);
            }
            j += run;
            if j == n {
                return;
            }
            // The innermost dimension ended: from its last value, step the next outer one.
            v += al * (el - 1 - ctr[last]);
            ctr[last] = 0;
            let mut d = last;
            loop {
                let Some(up) = d.checked_sub(1) else { return };
                d = up;
                let (e, _, step) = self.dims[d];
                if ctr[d] + 1 < e {
                    ctr[d] += 1;
                    v += step;
                    break;
                }
                ctr[d] = 0;
            }
        }
    }
}

/// Where a block access's flat offsets come from.
enum Offs {
    /// Index registers (each checked against its dimension per lane) and the element offset.
    Regs(Dims, i64),
    /// An affine offset whose every index is in its dimension over the whole nest.
    Affine(AffPlan),
}

/// `sc.off[..n]`: the flat offsets of an access at the block's lanes, or `false` when an
/// index leaves its dimension.
#[inline]
fn offs(sc: &mut Scratch, o: &Offs, n: usize) -> bool {
    match o {
        Offs::Regs(dims, base) => offsets(sc, dims, *base, n),
        Offs::Affine(plan) => {
            plan.fill(sc.pos, &mut sc.off[..n], |v| v as usize);
            true
        }
    }
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

    /// The expression a `let`-bound variable reference stands for (else `e` itself).
    fn resolve(&self, e: PExprId) -> PExprId {
        self.alias[e.index()].unwrap_or(e)
    }

    fn aff_of(&self, e: PExprId) -> Option<&Aff> {
        self.aff[self.resolve(e).index()].as_ref()
    }

    /// The register of `e` (compiled), materializing an affine expression's register (a fill
    /// from its [`AffPlan`]) the first time a user needs it.
    fn get(&mut self, e: PExprId) -> Option<(Reg, bool)> {
        let e = self.resolve(e);
        if let Some(r) = self.regs[e.index()] {
            return Some(r);
        }
        let plan = AffPlan::new(self.aff[e.index()].as_ref()?, self.los, self.exts)?;
        let var = plan.varies();
        let r = self.ireg();
        self.push(
            Box::new(move |s, _, n| {
                let pos = s.pos;
                plan.fill(pos, &mut s.i[r][..n], |v| v);
                true
            }),
            var,
        );
        self.regs[e.index()] = Some((Reg::I(r), var));
        Some((Reg::I(r), var))
    }

    /// Records `e`'s affine form when its every value fits `d` (else it stays unrecorded and
    /// `e` compiles to instructions); whether it was recorded.
    fn set_aff(&mut self, e: PExprId, form: Aff, d: DType) -> bool {
        let Some((lo, hi)) = int_range(d) else { return false };
        let (min, max) = form.interval(self.los, self.exts);
        if min < lo || max > hi {
            return false;
        }
        self.aff[e.index()] = Some(form);
        true
    }

    /// The flat offsets of an access to `buf` at indices `idx` (compiled): affine when every
    /// index is affine and within its dimension at every iteration, else from the index
    /// registers.
    fn access(&mut self, buf: BufId, idx: &[PExprId]) -> Option<Offs> {
        let b = self.f.buf(buf);
        if let Some(form) = self.affine_offset(b, idx) {
            if let Some(plan) = AffPlan::new(&form, self.los, self.exts) {
                return Some(Offs::Affine(plan));
            }
        }
        let regs = idx
            .iter()
            .map(|&i| match self.get(i) {
                Some((Reg::I(x), _)) => Some(x),
                _ => None,
            })
            .collect::<Option<Vec<_>>>()?;
        Some(Offs::Regs(access_dims(b, &regs), b.elem_offset))
    }

    /// `elem_offset + Σ idx[k] * stride[k]` as an affine form, when every index is affine and
    /// in `0..shape[k]` over the nest, and every offset in `0..=i64::MAX`.
    fn affine_offset(&self, b: &crate::tir::Buffer, idx: &[PExprId]) -> Option<Aff> {
        if idx.len() != b.shape.len() {
            return None;
        }
        let strides = b.effective_strides();
        let mut off = Aff::constant(b.elem_offset, self.nest_vars.len());
        for ((&i, &extent), &stride) in idx.iter().zip(b.shape.iter()).zip(&strides) {
            let form = self.aff_of(i)?;
            let (lo, hi) = form.interval(self.los, self.exts);
            if lo < 0 || hi >= extent as i128 {
                return None;
            }
            off = off.combine(&form.scale(stride as i128)?, 1);
        }
        let (lo, hi) = off.interval(self.los, self.exts);
        (lo >= 0 && hi <= i64::MAX as i128).then_some(off)
    }

    /// Compiles the tree under `root` and returns its register, or `None` when some node has
    /// no block form.
    fn tree(&mut self, root: PExprId) -> Option<(Reg, bool)> {
        self.compile_tree(root)?;
        self.get(root)
    }

    /// Compiles the tree under `root` (post-order: operands have smaller ids), leaving affine
    /// nodes unmaterialized, or `None` when some node has no block form.
    fn compile_tree(&mut self, root: PExprId) -> Option<()> {
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
        nodes.dedup();
        for e in nodes {
            if let Some(r) = self.node(e)? {
                self.regs[e.index()] = Some(r);
            }
        }
        Some(())
    }

    /// Compiles one node whose operands are compiled: its register, or `None` inside when it
    /// is affine and left to [`Builder::get`] (or a reference to a body `let`).
    fn node(&mut self, e: PExprId) -> Option<Option<(Reg, bool)>> {
        let f = self.f;
        let node = f.expr(e);
        if node.ty.lanes != 1 {
            return None;
        }
        let d = node.ty.dtype;
        let k = self.nest_vars.len();
        // Affine forms: immediates, loop variables, `let`s of affine values, sums,
        // differences, products by a constant and integer casts that keep every value.
        match node.kind {
            PExprKind::Int(x) if self.set_aff(e, Aff::constant(wrap(x, d), k), d) => return Some(None),
            PExprKind::Var(v) => {
                let v = v.index();
                if let Some(pos) = self.nest_vars.iter().position(|&x| x == v) {
                    // The loops' ranges fit their variables' types (`loops`).
                    let mut form = Aff::constant(0, k);
                    form.a[pos] = 1;
                    self.aff[e.index()] = Some(form);
                    return Some(None);
                }
                if let Some(&(_, value)) = self.lets.iter().rev().find(|&&(x, _)| x == v) {
                    self.alias[e.index()] = Some(self.resolve(value));
                    return Some(None);
                }
            }
            PExprKind::Bin(op @ (BinOp::Add | BinOp::Sub | BinOp::Mul), a, b) => {
                let form = match (self.aff_of(a), self.aff_of(b)) {
                    (Some(x), Some(y)) => match op {
                        BinOp::Add => Some(x.combine(y, 1)),
                        BinOp::Sub => Some(x.combine(y, -1)),
                        _ => match (x.constant_value(), y.constant_value()) {
                            (_, Some(m)) => x.scale(m),
                            (Some(m), _) => y.scale(m),
                            _ => None,
                        },
                    },
                    _ => None,
                };
                if let Some(form) = form {
                    if self.set_aff(e, form, d) {
                        return Some(None);
                    }
                }
            }
            PExprKind::Cast(a) if int_range(f.expr(a).ty.dtype).is_some() => {
                if let Some(form) = self.aff_of(a).cloned() {
                    if self.set_aff(e, form, d) {
                        return Some(None);
                    }
                }
            }
            _ => {}
        }
        Some(Some(match node.kind {
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
                // Not a loop variable nor a body `let` (above): invariant in the nest.
                let v = v.index();
                if d.is_float() {
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
                let idx = f.operands(r);
                let offs = self.access(buf, idx)?;
                let var = match &offs {
                    Offs::Affine(plan) => plan.varies(),
                    Offs::Regs(..) => idx.iter().any(|&i| self.get(i).is_some_and(|(_, v)| v)),
                };
                let (ins, reg) = self.load(buf, offs);
                self.push(ins, var);
                (reg, var)
            }
            _ => return None,
        }))
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
    fn load(&mut self, buf: BufId, o: Offs) -> (Instr, Reg) {
        let slot = self.slot[buf.index()];
        let s = slot.index;
        match slot.class {
            Class::F32 => {
                let r = self.freg();
                let ins: Instr = Box::new(move |sc, c, n| {
                    offs(sc, &o, n) && {
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
                    offs(sc, &o, n) && {
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
                    offs(sc, &o, n) && {
                        let st = &c.i64s[s];
                        let dst = &mut sc.i[r];
                        gather(&sc.off[..n], st, &mut dst[..n], |v| v)
                    }
                });
                (ins, Reg::I(r))
            }
        }
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
    fn new(c: &'a Compiler<'_>, nest: &'a Loops) -> Builder<'a> {
        let n = c.f.exprs().len();
        Builder {
            f: c.f,
            slot: &c.slot,
            nest_vars: &nest.vars,
            los: &nest.los,
            exts: &nest.exts,
            nf: 0,
            ni: 0,
            instrs: Vec::new(),
            regs: vec![None; n],
            aff: vec![None; n],
            alias: vec![None; n],
            lets: Vec::new(),
        }
    }

    /// The offsets of a store to `buf` at index expressions `idx` (compiled here), or `None`.
    fn store_access(&mut self, buf: BufId, idx: &[PExprId]) -> Option<Offs> {
        for &i in idx {
            self.compile_tree(i)?;
        }
        self.access(buf, idx)
    }

    /// Compiles the body's `let`s, in order.
    fn bind_lets(&mut self, lets: &[(usize, PExprId)]) -> Option<()> {
        for &(v, value) in lets {
            self.compile_tree(value)?;
            self.lets.push((v, value));
        }
        Some(())
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
    let nest_loops = loops(f, chain)?;
    let (lets, store_stmt) = lets_then_store(f, nest_loops.body)?;
    let StmtKind::Store { buf, indices, value } = f.stmt(store_stmt).kind else { return None };
    // A `let` value that reads the stored buffer's storage would see earlier iterations'
    // stores in the scalar order; such nests stay scalar.
    if lets.iter().any(|&(_, v)| reads_slot(c, v, buf, &[])) {
        return None;
    }
    // Variables that vary within the nest: the loop variables and the `let`s computed from them.
    let varying = varying_with(f, &nest_loops.vars, &lets);
    let idx: Vec<PExprId> = f.operands(indices).to_vec();
    let total = nest_loops.exts.iter().try_fold(1i64, |acc, &e| acc.checked_mul(e))?;
    if f.expr(value).ty.lanes != 1 || idx.iter().any(|&i| f.expr(i).ty.lanes != 1) {
        return None;
    }
    let mode = match reduction(c, buf, &idx, value, &varying) {
        Some(m) => m,
        None => {
            let covers = nest_loops
                .vars
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
    let mut bld = Builder::new(c, &nest_loops);
    bld.bind_lets(&lets)?;
    let value_reg = match &mode {
        Mode::Map => bld.tree(value)?.0,
        Mode::Reduce { term, .. } => bld.tree(*term)?.0,
    };
    let store_offs = bld.store_access(buf, &idx)?;
    if !fits(value_reg, c.slot[buf.index()].class) {
        return None;
    }
    let Builder { instrs, nf, ni, .. } = bld;
    let Loops { vars, los, exts, body: body_stmt } = nest_loops;
    // Matched: the scalar body (its `let`s and the store closure) becomes the fallback.
    let store_op = if lets.is_empty() {
        c.leaves.get_mut(store_stmt.index()).and_then(Option::take)?
    } else {
        super::block(c.flatten(body_stmt).ok()?)
    };
    let slot = c.slot[buf.index()];
    let nest = Nest { vars, los, exts, total, instrs, nf, ni, nest_id };
    Some(match mode {
        Mode::Map => Box::new(move |cx: &mut Ctx| {
            nest.run(cx, &store_op, |sc, cx, n| {
                if !offs(sc, &store_offs, n) {
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
            nest.run_reduce(cx, &store_op, &store_offs, slot, value_reg, ffold.as_deref(), ifold.as_deref())
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
    let nest_loops = loops(f, &chain)?;
    let (lets, store_stmt) = lets_then_store(f, nest_loops.body)?;
    let StmtKind::Store { buf, indices, value } = f.stmt(store_stmt).kind else { return None };
    let idx: Vec<PExprId> = f.operands(indices).to_vec();
    let init_idx: Vec<PExprId> = f.operands(iidx).to_vec();
    if f.expr(value).ty.lanes != 1
        || f.expr(ival).ty.lanes != 1
        || idx.iter().chain(&init_idx).any(|&i| f.expr(i).ty.lanes != 1)
    {
        return None;
    }
    let inner = nest_loops.exts[n_outer..].iter().try_fold(1i64, |acc, &e| acc.checked_mul(e))?;
    let outer_total = nest_loops.exts[..n_outer].iter().try_fold(1i64, |acc, &e| acc.checked_mul(e))?;
    let total = outer_total.checked_mul(inner)?;
    if inner > BLOCK as i64 {
        return None;
    }
    // The reduction's own variables: its loops and the `let`s computed from them.
    let varying = varying_with(f, &nest_loops.vars[n_outer..], &lets);
    let Mode::Reduce { term, ffold, ifold } = reduction(c, buf, &idx, value, &varying)? else { return None };
    // The init store runs outside the reduction's scope: it cannot name its variables or `let`s
    // (the verifier's scoping; checked here since the block computes it on every lane).
    let inner_names: Vec<usize> =
        nest_loops.vars[n_outer..].iter().copied().chain(lets.iter().map(|&(v, _)| v)).collect();
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
    let mut bld = Builder::new(c, &nest_loops);
    let init_reg = bld.tree(ival)?.0;
    let init_offs = bld.store_access(ibuf, &init_idx)?;
    bld.bind_lets(&lets)?;
    let term_reg = bld.tree(term)?.0;
    let acc_offs = bld.store_access(buf, &idx)?;
    // Both stores' offsets depend on the outer loops only: with affine offsets, fill one lane
    // per outer iteration instead of one per iteration of the nest.
    let outer_plan = |form: Aff| {
        if form.a[n_outer..].iter().any(|&x| x != 0) {
            return None;
        }
        let outer = Aff { c: form.c, a: form.a[..n_outer].to_vec() };
        AffPlan::new(&outer, &nest_loops.los[..n_outer], &nest_loops.exts[..n_outer])
    };
    let outer_offs = match (bld.affine_offset(f.buf(ibuf), &init_idx), bld.affine_offset(f.buf(buf), &idx)) {
        (Some(a), Some(b)) => outer_plan(a).zip(outer_plan(b)),
        _ => None,
    };
    let (islot, slot) = (c.slot[ibuf.index()], c.slot[buf.index()]);
    if !fits(init_reg, islot.class) || !fits(term_reg, slot.class) {
        return None;
    }
    let Builder { instrs, nf, ni, .. } = bld;
    let Loops { vars, los, exts, .. } = nest_loops;
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
        init: (init_offs, islot, init_reg),
        acc: (acc_offs, slot, term_reg),
        outer_offs,
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
            sc.pos = pos;
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
        acc: &Offs,
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
        sc.pos = 0;
        let ok = self.run_instrs(&mut sc, c, n0, true) && offs(&mut sc, acc, 1);
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
            sc.pos = pos;
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
type BlockAccess = (Offs, super::Slot, Reg);

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
    /// The init and accumulator offsets as affine forms over the outer loops, when both are.
    outer_offs: Option<(AffPlan, AffPlan)>,
    ffold: Option<FFold>,
    ifold: Option<IFold>,
}

impl ReduceNest {
    fn run(&self, c: &mut Ctx) {
        let nest = &self.nest;
        let m = self.inner;
        let per_block = (BLOCK / m).max(1) as i64;
        let mut sc = nest.scratch(c, (per_block as usize * m).min(nest.total as usize));
        let (init_offs, islot, init_reg) = &self.init;
        let (acc_offs, slot, term) = &self.acc;
        let (ilen, len) = (c.storage_len(*islot), c.storage_len(*slot));
        let step = if self.outer_offs.is_some() { 1 } else { m };
        let mut o = 0i64;
        let mut first = true;
        while o < self.outer_total {
            let nb = per_block.min(self.outer_total - o);
            let n = nb as usize * m;
            sc.pos = o * m as i64;
            // Outer iteration `t`'s offsets are at lane `t * step` of `off0` (init) and `off`.
            let ok = nest.run_instrs(&mut sc, c, n, first)
                && match &self.outer_offs {
                    Some((init_plan, acc_plan)) => {
                        init_plan.fill(o, &mut sc.off0[..nb as usize], |v| v as usize);
                        acc_plan.fill(o, &mut sc.off[..nb as usize], |v| v as usize);
                        true
                    }
                    None => {
                        offs(&mut sc, init_offs, n) && {
                            std::mem::swap(&mut sc.off, &mut sc.off0);
                            offs(&mut sc, acc_offs, n)
                        }
                    }
                }
                && (0..nb as usize).all(|t| sc.off0[t * step] < ilen && sc.off[t * step] < len);
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
                put(c, *islot, sc.off0[t * step], fv, iv);
                let at = sc.off[t * step];
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

#[cfg(test)]
mod tests {
    use super::{Aff, AffPlan};

    /// A small deterministic generator (xorshift), so the test needs no dependency.
    struct Rng(u64);
    impl Rng {
        fn below(&mut self, n: u64) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0 % n
        }
    }

    #[test]
    fn affine_plans_fill_what_the_form_evaluates_to_at_every_iteration() {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        for _ in 0..20_000 {
            let k = 1 + rng.below(5) as usize;
            let exts: Vec<i64> = (0..k).map(|_| 1 + rng.below(5) as i64).collect();
            let los: Vec<i64> = (0..k).map(|_| rng.below(7) as i64 - 3).collect();
            // Coefficients that often make adjacent loops one row-major index (mergeable).
            let mut a = vec![0i128; k];
            for d in (0..k).rev() {
                a[d] = match rng.below(4) {
                    0 => 0,
                    1 if d + 1 < k => a[d + 1] * exts[d + 1] as i128,
                    _ => rng.below(9) as i128 - 4,
                };
            }
            let form = Aff { c: rng.below(21) as i128 - 10, a };
            let plan = AffPlan::new(&form, &los, &exts).expect("fits");
            let total: i64 = exts.iter().product();
            let pos = rng.below(total as u64) as i64;
            let n = 1 + rng.below((total - pos) as u64) as usize;
            let mut got = vec![0i64; n];
            plan.fill(pos, &mut got, |v| v);
            for (j, &g) in got.iter().enumerate() {
                // The form at flat iteration pos + j (the odometer, innermost loop fastest).
                let mut p = pos + j as i64;
                let mut want = form.c;
                for d in (0..k).rev() {
                    want += form.a[d] * (los[d] + p % exts[d]) as i128;
                    p /= exts[d];
                }
                assert_eq!(g as i128, want, "form {form:?} over {los:?} / {exts:?}, lane {j} from {pos}");
            }
        }
    }
}
