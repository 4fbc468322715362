//! Copying expression and statement trees of one PrimFunc into a [`PrimFuncBuilder`], with
//! variables replaced (by other variables or by integer immediates) and, on request, fresh
//! variables and buffers for every binder copied, so that a duplicated subtree still defines
//! each variable once (what TVM's `ConvertSSA` restores after unrolling).
//!
//! The one copier of the tir passes: RemoveNoOp copies the expressions it keeps, UnrollLoop
//! copies loop bodies once per iteration, VectorizeLoop copies what it does not vectorize,
//! LoopPartition copies a loop body per subrange (with decided conditions replaced by
//! constants) and the function around the pieces, FlattenBuffer copies the body with buffer
//! accesses flattened. Walks are explicit stacks; the only recursion is
//! [`Copier::stmt`] entering a loop it unrolls, bounded by the nesting of unrolled loops.

use passel_engine::ir::DType;
use passel_engine::tir::{
    BinOp, BufId, ForKind, PExprId, PExprKind, PType, PrimFunc, PrimFuncBuilder, StmtId, StmtKind, VarId,
};
use rustc_hash::FxHashMap;

use super::simplify::wrap_imm;

/// What a variable becomes in the copy.
#[derive(Clone, Copy, Debug)]
pub(crate) enum VarMap {
    /// Another variable.
    Var(VarId),
    /// An integer immediate (its numeric value) of the variable's type.
    Int(i128),
}

/// Copies trees of `src`; see the module doc.
pub(crate) struct Copier<'a> {
    pub(crate) src: &'a PrimFunc,
    pub(crate) vars: FxHashMap<VarId, VarMap>,
    pub(crate) bufs: FxHashMap<BufId, BufId>,
    /// Whether binders get fresh variables and buffers.
    pub(crate) fresh: bool,
    /// Per statement of `src`: unroll this `for` (its min and extent are immediates).
    pub(crate) unroll: Vec<bool>,
    /// Loops whose kind changes in the copy.
    pub(crate) kinds: FxHashMap<StmtId, ForKind>,
    /// Statements replaced by statements already built in the destination.
    pub(crate) replace: FxHashMap<StmtId, StmtId>,
    /// Expressions replaced by integer (or `bool`) immediates of their type.
    pub(crate) consts: FxHashMap<PExprId, i64>,
    /// Expressions replaced by variables (CommonSubexprElimTIR).
    pub(crate) subst: FxHashMap<PExprId, VarId>,
    /// While copying a replaced expression's own value: the root is copied, not replaced.
    value_root: bool,
    /// Buffers (of `src`) whose accesses become one flat index (FlattenBuffer).
    pub(crate) flatten: FxHashMap<BufId, Flat>,
}

/// How the accesses of a flattened buffer are indexed: `offset + Σ index_k × strides_k`,
/// computed in `dtype`.
#[derive(Clone, Debug)]
pub(crate) struct Flat {
    pub(crate) strides: Vec<i64>,
    pub(crate) offset: i64,
    pub(crate) dtype: DType,
}

type R<T> = Result<T, String>;

/// `a` and `b` with the scalar one broadcast to the other's lanes.
fn widen_pair(dst: &mut PrimFuncBuilder, a: PExprId, b: PExprId) -> R<(PExprId, PExprId)> {
    let (la, lb) = (dst.peek().expr(a).ty.lanes, dst.peek().expr(b).ty.lanes);
    Ok(match (la, lb) {
        (1, l) if l > 1 => (dst.broadcast(a, l)?, b),
        (l, 1) if l > 1 => (a, dst.broadcast(b, l)?),
        _ => (a, b),
    })
}

impl<'a> Copier<'a> {
    pub(crate) fn new(src: &'a PrimFunc) -> Copier<'a> {
        Copier {
            src,
            vars: FxHashMap::default(),
            bufs: FxHashMap::default(),
            fresh: false,
            unroll: vec![false; src.stmts().len()],
            kinds: FxHashMap::default(),
            replace: FxHashMap::default(),
            consts: FxHashMap::default(),
            flatten: FxHashMap::default(),
            subst: FxHashMap::default(),
            value_root: false,
        }
    }

    fn buf(&self, b: BufId) -> BufId {
        self.bufs.get(&b).copied().unwrap_or(b)
    }

    fn bind_var(&mut self, dst: &mut PrimFuncBuilder, v: VarId) -> R<VarId> {
        if !self.fresh {
            return Ok(v);
        }
        let var = self.src.var(v);
        let new = dst.var(&var.name, var.ty)?;
        self.vars.insert(v, VarMap::Var(new));
        Ok(new)
    }

    fn bind_buf(&mut self, dst: &mut PrimFuncBuilder, b: BufId) -> R<BufId> {
        if !self.fresh {
            return Ok(b);
        }
        let new = dst.buffer(self.src.buf(b).clone())?;
        self.bufs.insert(b, new);
        Ok(new)
    }

    /// Copies the expression tree `root`.
    pub(crate) fn expr(&mut self, dst: &mut PrimFuncBuilder, root: PExprId) -> R<PExprId> {
        let src = self.src;
        let mut nodes = vec![root];
        let mut stack = vec![root];
        let mut ops = Vec::new();
        while let Some(e) = stack.pop() {
            if self.consts.contains_key(&e) || (self.subst.contains_key(&e) && !(e == root && self.value_root)) {
                continue;
            }
            ops.clear();
            src.expr_operands(e, &mut ops);
            nodes.extend_from_slice(&ops);
            stack.extend_from_slice(&ops);
        }
        nodes.sort_unstable();
        for &e in &nodes {
            if self.consts.contains_key(&e) || (self.subst.contains_key(&e) && !(e == root && self.value_root)) {
                continue;
            }
            if let PExprKind::Let(v, _, _) = src.expr(e).kind {
                self.bind_var(dst, v)?;
            }
        }
        let mut map: FxHashMap<PExprId, PExprId> = FxHashMap::default();
        for &e in &nodes {
            let m = |x: PExprId| map[&x];
            let node = *src.expr(e);
            if let Some(&k) = self.consts.get(&e) {
                map.insert(e, dst.int(k, node.ty)?);
                continue;
            }
            if let Some(&v) = self.subst.get(&e).filter(|_| !(e == root && self.value_root)) {
                map.insert(e, dst.var_ref(v));
                continue;
            }
            let out = match node.kind {
                PExprKind::Int(v) => dst.int(v, node.ty)?,
                PExprKind::Float(v) => dst.float(v, node.ty)?,
                PExprKind::Var(v) => match self.vars.get(&v) {
                    Some(&VarMap::Var(w)) => dst.var_ref(w),
                    Some(&VarMap::Int(k)) => dst.int(wrap_imm(k, node.ty.dtype), node.ty)?,
                    None => dst.var_ref(v),
                },
                PExprKind::Bin(op, a, b) => dst.bin(op, m(a), m(b))?,
                PExprKind::Not(a) => dst.not(m(a))?,
                PExprKind::Select(c, a, b) => dst.select(m(c), m(a), m(b))?,
                PExprKind::Cast(a) => dst.cast(m(a), node.ty.dtype),
                PExprKind::Load(b, r) => {
                    let idx: Vec<PExprId> = src.operands(r).iter().map(|&i| m(i)).collect();
                    let idx = self.index(dst, b, idx)?;
                    dst.load(self.buf(b), &idx)?
                }
                PExprKind::Call(intr, r) => {
                    let args: Vec<PExprId> = src.operands(r).iter().map(|&i| m(i)).collect();
                    dst.call(intr, &args)?
                }
                PExprKind::Ramp(a, s) => dst.ramp(m(a), m(s), node.ty.lanes)?,
                PExprKind::Broadcast(a) => dst.broadcast(m(a), node.ty.lanes)?,
                PExprKind::Let(v, value, body) => {
                    let v = match self.vars.get(&v) {
                        Some(&VarMap::Var(w)) => w,
                        _ => v,
                    };
                    dst.let_expr(v, m(value), m(body))?
                }
            };
            map.insert(e, out);
        }
        Ok(map[&root])
    }

    /// Copies expression `root` itself even if it is replaced by a variable (the value of
    /// that variable's `let`); replaced expressions inside it become their variables.
    pub(crate) fn expr_value(&mut self, dst: &mut PrimFuncBuilder, root: PExprId) -> R<PExprId> {
        self.value_root = true;
        let out = self.expr(dst, root);
        self.value_root = false;
        out
    }

    /// Copies statement `s` alone over its already rebuilt children (`out`, indexed by
    /// statement id); with `serial`, a `vectorized` loop becomes `serial`.
    pub(crate) fn node(&mut self, b: &mut PrimFuncBuilder, s: StmtId, out: &[StmtId], serial: bool) -> R<StmtId> {
        let f = self.src;
        let m = |x: StmtId| out[x.index()];
        Ok(match f.stmt(s).kind {
            StmtKind::For { var, min, extent, kind, body } => {
                let kind = if serial && kind == ForKind::Vectorized { ForKind::Serial } else { kind };
                let (min, extent) = (self.expr(b, min)?, self.expr(b, extent)?);
                b.for_(self.var_of(var), min, extent, kind, m(body))?
            }
            StmtKind::Store { buf, indices, value } => {
                let idx: Vec<PExprId> = f.operands(indices).iter().map(|&i| self.expr(b, i)).collect::<R<_>>()?;
                let value = self.expr(b, value)?;
                let idx = self.index(b, buf, idx)?;
                b.store(self.buf(buf), &idx, value)?
            }
            StmtKind::Let { var, value, body } => {
                let value = self.expr(b, value)?;
                b.let_stmt(self.var_of(var), value, m(body))?
            }
            StmtKind::If { cond, then_, else_ } => {
                let cond = self.expr(b, cond)?;
                b.if_(cond, m(then_), else_.map(m))?
            }
            StmtKind::Seq(r) => {
                let items: Vec<StmtId> = f.stmt_list(r).iter().map(|&x| m(x)).collect();
                b.seq(&items)
            }
            StmtKind::Alloc { buf, body } => b.alloc(self.buf(buf), m(body)),
            StmtKind::Decl { buf, data, body } => b.decl(self.buf(buf), self.buf(data), m(body))?,
            StmtKind::Evaluate(e) => {
                let e = self.expr(b, e)?;
                b.evaluate(e)
            }
            StmtKind::Attr { key, value, body } => {
                let value = self.expr(b, value)?;
                b.attr(f.string(key), value, m(body))
            }
        })
    }

    /// The indices (already copied) of an access of `b`: one flat index if `b` is flattened.
    fn index(&self, dst: &mut PrimFuncBuilder, b: BufId, idx: Vec<PExprId>) -> R<Vec<PExprId>> {
        let Some(flat) = self.flatten.get(&b) else { return Ok(idx) };
        let scalar = PType::scalar(flat.dtype);
        let lanes = idx.iter().map(|&i| dst.peek().expr(i).ty.lanes).max().unwrap_or(1);
        let mut sum: Option<PExprId> = None;
        for (&i, &stride) in idx.iter().zip(&flat.strides) {
            if stride == 0 {
                continue;
            }
            let t = dst.peek().expr(i).ty;
            let i = if t.dtype == flat.dtype { i } else { dst.cast(i, flat.dtype) };
            let term = if stride == 1 {
                i
            } else {
                let s = dst.int(stride, scalar)?;
                let s = if t.lanes > 1 { dst.broadcast(s, t.lanes)? } else { s };
                dst.bin(BinOp::Mul, i, s)?
            };
            sum = Some(match sum {
                None => term,
                Some(acc) => {
                    let (acc, term) = widen_pair(dst, acc, term)?;
                    dst.bin(BinOp::Add, acc, term)?
                }
            });
        }
        let mut out = match sum {
            Some(s) if flat.offset == 0 => s,
            Some(s) => {
                let k = dst.int(flat.offset, scalar)?;
                let (s, k) = widen_pair(dst, s, k)?;
                dst.bin(BinOp::Add, s, k)?
            }
            None => dst.int(flat.offset, scalar)?,
        };
        if lanes > 1 && dst.peek().expr(out).ty.lanes == 1 {
            out = dst.broadcast(out, lanes)?;
        }
        Ok(vec![out])
    }

    /// The value of condition `c` when [`consts`](Self::consts) decide it through `and`,
    /// `or` and `not` (`None` without replacements, or when it stays open).
    fn decided(&self, c: PExprId) -> Option<bool> {
        if self.consts.is_empty() {
            return None;
        }
        let src = self.src;
        let mut nodes = Vec::new();
        let mut stack = vec![c];
        while let Some(e) = stack.pop() {
            nodes.push(e);
            if self.consts.contains_key(&e) {
                continue;
            }
            match src.expr(e).kind {
                PExprKind::Bin(BinOp::And | BinOp::Or, a, b) => stack.extend([a, b]),
                PExprKind::Not(a) => stack.push(a),
                _ => {}
            }
        }
        nodes.sort_unstable();
        let mut val: FxHashMap<PExprId, Option<bool>> = FxHashMap::default();
        for e in nodes {
            let v = if let Some(&k) = self.consts.get(&e) {
                Some(k != 0)
            } else {
                match src.expr(e).kind {
                    PExprKind::Int(k) => Some(k != 0),
                    PExprKind::Not(a) => val[&a].map(|x| !x),
                    PExprKind::Bin(BinOp::And, a, b) => match (val[&a], val[&b]) {
                        (Some(false), _) | (_, Some(false)) => Some(false),
                        (Some(true), Some(true)) => Some(true),
                        _ => None,
                    },
                    PExprKind::Bin(BinOp::Or, a, b) => match (val[&a], val[&b]) {
                        (Some(true), _) | (_, Some(true)) => Some(true),
                        (Some(false), Some(false)) => Some(false),
                        _ => None,
                    },
                    _ => None,
                }
            };
            val.insert(e, v);
        }
        val[&c]
    }

    fn var_of(&self, v: VarId) -> VarId {
        match self.vars.get(&v) {
            Some(&VarMap::Var(w)) => w,
            _ => v,
        }
    }

    /// Copies the statement tree `root`, expanding the loops marked in `unroll` into one copy
    /// of their body per iteration (each with fresh binders).
    pub(crate) fn stmt(&mut self, dst: &mut PrimFuncBuilder, root: StmtId) -> R<StmtId> {
        let src = self.src;
        let mut nodes = vec![root];
        let mut stack = vec![root];
        while let Some(s) = stack.pop() {
            if self.unroll[s.index()] || self.replace.contains_key(&s) {
                continue;
            }
            if let StmtKind::If { cond, then_, else_ } = src.stmt(s).kind {
                if let Some(taken) = self.decided(cond) {
                    if let Some(c) = if taken { Some(then_) } else { else_ } {
                        nodes.push(c);
                        stack.push(c);
                    }
                    continue;
                }
            }
            for &c in src.children(s).as_slice() {
                nodes.push(c);
                stack.push(c);
            }
        }
        nodes.sort_unstable();
        for &s in &nodes {
            if self.replace.contains_key(&s) {
                continue;
            }
            match src.stmt(s).kind {
                StmtKind::For { var, .. } | StmtKind::Let { var, .. } if !self.unroll[s.index()] => {
                    self.bind_var(dst, var)?;
                }
                StmtKind::Alloc { buf, .. } | StmtKind::Decl { buf, .. } => {
                    self.bind_buf(dst, buf)?;
                }
                _ => {}
            }
        }
        let mut map: FxHashMap<StmtId, StmtId> = FxHashMap::default();
        for &s in &nodes {
            if let Some(&r) = self.replace.get(&s) {
                map.insert(s, r);
                continue;
            }
            let out = match src.stmt(s).kind {
                StmtKind::For { var, min, extent, body, .. } if self.unroll[s.index()] => {
                    let (m, n) = match (src.expr(min).kind, src.expr(extent).kind) {
                        (PExprKind::Int(m), PExprKind::Int(n)) => (m as i128, n as i128),
                        _ => return Err(format!("loop {s} to unroll has no constant range")),
                    };
                    let saved = (self.fresh, self.vars.get(&var).copied());
                    self.fresh = true;
                    let mut items = Vec::new();
                    for i in 0..n.max(0) {
                        self.vars.insert(var, VarMap::Int(m + i));
                        items.push(self.stmt(dst, body)?);
                    }
                    self.fresh = saved.0;
                    match saved.1 {
                        Some(old) => self.vars.insert(var, old),
                        None => self.vars.remove(&var),
                    };
                    dst.seq(&items)
                }
                StmtKind::For { var, min, extent, kind, body } => {
                    let (min, extent) = (self.expr(dst, min)?, self.expr(dst, extent)?);
                    let kind = self.kinds.get(&s).copied().unwrap_or(kind);
                    dst.for_(self.var_of(var), min, extent, kind, map[&body])?
                }
                StmtKind::Store { buf, indices, value } => {
                    let idx: Vec<PExprId> =
                        src.operands(indices).iter().map(|&i| self.expr(dst, i)).collect::<R<_>>()?;
                    let value = self.expr(dst, value)?;
                    let idx = self.index(dst, buf, idx)?;
                    dst.store(self.buf(buf), &idx, value)?
                }
                StmtKind::Let { var, value, body } => {
                    let value = self.expr(dst, value)?;
                    dst.let_stmt(self.var_of(var), value, map[&body])?
                }
                StmtKind::If { cond, then_, else_ } => match self.decided(cond) {
                    Some(true) => map[&then_],
                    Some(false) => match else_ {
                        Some(e) => map[&e],
                        None => dst.nop(),
                    },
                    None => {
                        let cond = self.expr(dst, cond)?;
                        dst.if_(cond, map[&then_], else_.map(|e| map[&e]))?
                    }
                },
                StmtKind::Seq(r) => {
                    let items: Vec<StmtId> = src.stmt_list(r).iter().map(|c| map[c]).collect();
                    dst.seq(&items)
                }
                StmtKind::Alloc { buf, body } => dst.alloc(self.buf(buf), map[&body]),
                StmtKind::Decl { buf, data, body } => dst.decl(self.buf(buf), self.buf(data), map[&body])?,
                StmtKind::Evaluate(e) => {
                    let e = self.expr(dst, e)?;
                    dst.evaluate(e)
                }
                StmtKind::Attr { key, value, body } => {
                    let value = self.expr(dst, value)?;
                    dst.attr(src.string(key), value, map[&body])
                }
            };
            map.insert(s, out);
        }
        Ok(map[&root])
    }
}
