//! `PrimFuncBuilder`: the one way to make a PrimFunc (the parser, the lowering and every
//! PrimFunc pass use it). Each constructor checks its operands' types, so a built function is
//! well-typed; nodes are appended, so operands always precede their users (post-order).

use std::sync::Arc;

use super::ir::{
    BinOp, BufId, Buffer, ForKind, IdRange, Intrinsic, IntrinsicKind, PExpr, PExprId, PExprKind, PType, Param,
    PrimFunc, Stmt, StmtId, StmtKind, Var, VarId, MAX_LANES,
};
use crate::ir::{Attrs, DType, Span};

/// Builds a [`PrimFunc`]. Constructors that can meet ill-typed operands return
/// `Err(message)`; the message names the operator and the types.
#[derive(Default, Debug, Clone)]
pub struct PrimFuncBuilder {
    f: PrimFunc,
}

impl Default for PrimFunc {
    fn default() -> PrimFunc {
        PrimFunc {
            params: Vec::new(),
            vars: Vec::new(),
            bufs: Vec::new(),
            exprs: Vec::new(),
            operands: Vec::new(),
            stmts: Vec::new(),
            stmt_lists: Vec::new(),
            strings: Vec::new(),
            body: StmtId(0),
            attrs: Attrs::new(),
            stmt_spans: Vec::new(),
        }
    }
}

fn lanes_ok(lanes: u16) -> Result<(), String> {
    if (1..=MAX_LANES).contains(&lanes) {
        Ok(())
    } else {
        Err(format!("{lanes} lanes: a vector has 2 to {MAX_LANES} lanes"))
    }
}

impl PrimFuncBuilder {
    /// An empty builder.
    pub fn new() -> PrimFuncBuilder {
        PrimFuncBuilder::default()
    }

    /// A builder that starts with a copy of `func`'s variables, buffers, parameters and
    /// attributes (no expressions or statements): for passes that rebuild a body.
    pub fn with_signature_of(func: &PrimFunc) -> PrimFuncBuilder {
        let f = PrimFunc {
            params: func.params.clone(),
            vars: func.vars.clone(),
            bufs: func.bufs.clone(),
            attrs: func.attrs.clone(),
            strings: func.strings.clone(),
            ..PrimFunc::default()
        };
        PrimFuncBuilder { f }
    }

    /// The function built so far (for reading types and nodes while building).
    pub fn peek(&self) -> &PrimFunc {
        &self.f
    }

    /// Clears everything, keeping allocations.
    pub fn clear(&mut self) {
        let f = &mut self.f;
        f.params.clear();
        f.vars.clear();
        f.bufs.clear();
        f.exprs.clear();
        f.operands.clear();
        f.stmts.clear();
        f.stmt_lists.clear();
        f.strings.clear();
        f.attrs = Attrs::new();
        f.stmt_spans.clear();
    }

    // ---- variables, buffers, parameters ----

    /// A new variable of a scalar type.
    pub fn var(&mut self, name: &str, ty: PType) -> Result<VarId, String> {
        if !ty.is_scalar() {
            return Err(format!("variable `%{name}` has vector type {ty}: variables are scalars"));
        }
        self.f.vars.push(Var { name: name.into(), ty });
        Ok(VarId(self.f.vars.len() as u32 - 1))
    }

    /// A new buffer. Its dimensions, strides and offset must be non-negative, and its strides
    /// (if any) one per dimension.
    pub fn buffer(&mut self, buf: Buffer) -> Result<BufId, String> {
        if let Some(&d) = buf.shape.iter().find(|&&d| d < 0) {
            return Err(format!("buffer `%{}` has a negative dimension {d}", buf.name));
        }
        if !buf.strides.is_empty() && buf.strides.len() != buf.shape.len() {
            return Err(format!(
                "buffer `%{}` has {} strides for {} dimensions",
                buf.name,
                buf.strides.len(),
                buf.shape.len()
            ));
        }
        if let Some(&s) = buf.strides.iter().find(|&&s| s < 0) {
            return Err(format!("buffer `%{}` has a negative stride {s}", buf.name));
        }
        if buf.elem_offset < 0 {
            return Err(format!("buffer `%{}` has a negative element offset {}", buf.name, buf.elem_offset));
        }
        if buf.storage_elements().is_none() {
            return Err(format!("buffer `%{}` is too large: its size overflows i64", buf.name));
        }
        self.f.bufs.push(buf);
        Ok(BufId(self.f.bufs.len() as u32 - 1))
    }

    /// Appends a parameter.
    pub fn param(&mut self, p: Param) {
        self.f.params.push(p);
    }

    /// Interns a string (an `attr` key).
    pub fn string(&mut self, s: &str) -> u32 {
        if let Some(i) = self.f.strings.iter().position(|t| &**t == s) {
            return i as u32;
        }
        self.f.strings.push(Arc::from(s));
        self.f.strings.len() as u32 - 1
    }

    /// Sets the function attributes.
    pub fn set_attrs(&mut self, attrs: Attrs) {
        self.f.attrs = attrs;
    }

    // ---- expressions ----

    fn push(&mut self, kind: PExprKind, ty: PType) -> PExprId {
        self.f.exprs.push(PExpr { kind, ty });
        PExprId(self.f.exprs.len() as u32 - 1)
    }

    fn ty(&self, e: PExprId) -> PType {
        self.f.exprs[e.index()].ty
    }

    fn pool(&mut self, ids: &[PExprId]) -> IdRange {
        let start = self.f.operands.len() as u32;
        self.f.operands.extend_from_slice(ids);
        IdRange { start, len: ids.len() as u32 }
    }

    /// An integer (or `bool`) immediate; the value must fit the type.
    pub fn int(&mut self, value: i64, ty: PType) -> Result<PExprId, String> {
        if ty.dtype.is_float() {
            return Err(format!("integer immediate of float type {ty}"));
        }
        if !ty.is_scalar() {
            return Err(format!("immediate of vector type {ty}: broadcast a scalar instead"));
        }
        if !int_fits(value, ty.dtype) {
            return Err(format!("{value} does not fit in {}", ty.dtype));
        }
        Ok(self.push(PExprKind::Int(value), ty))
    }

    /// A scalar `i64` immediate.
    pub fn i64(&mut self, value: i64) -> PExprId {
        self.push(PExprKind::Int(value), PType::scalar(DType::I64))
    }

    /// A scalar `i32` immediate (the value is wrapped to 32 bits).
    pub fn i32(&mut self, value: i32) -> PExprId {
        self.push(PExprKind::Int(value as i64), PType::scalar(DType::I32))
    }

    /// A float immediate, rounded to the type (f32 and f16 immediates hold values exact in
    /// their type).
    pub fn float(&mut self, value: f64, ty: PType) -> Result<PExprId, String> {
        if !ty.dtype.is_float() {
            return Err(format!("float immediate of non-float type {ty}"));
        }
        if !ty.is_scalar() {
            return Err(format!("immediate of vector type {ty}: broadcast a scalar instead"));
        }
        Ok(self.push(PExprKind::Float(round_to(value, ty.dtype)), ty))
    }

    /// Changes the type of immediate `e` to `dtype` (an integer immediate may become a float
    /// one). Returns false, changing nothing, if `e` is not an immediate or its value does
    /// not fit. For the parser's unsuffixed literals, which take their operand's type.
    pub(crate) fn retype_immediate(&mut self, e: PExprId, dtype: DType) -> bool {
        let node = &mut self.f.exprs[e.index()];
        let kind = match node.kind {
            PExprKind::Int(v) if dtype.is_float() => PExprKind::Float(round_to(v as f64, dtype)),
            PExprKind::Int(v) if int_fits(v, dtype) && dtype != DType::Bool => PExprKind::Int(v),
            PExprKind::Float(v) if dtype.is_float() => PExprKind::Float(round_to(v, dtype)),
            _ => return false,
        };
        node.kind = kind;
        node.ty = PType::scalar(dtype);
        true
    }

    /// A copy of the expression tree under `e` as new nodes (expressions are trees, so a
    /// value used twice is built twice). Iterative: the subtree's ids are in post-order.
    pub fn copy_expr(&mut self, e: PExprId) -> Result<PExprId, String> {
        let mut nodes = Vec::new();
        let mut stack = vec![e];
        let mut ops = Vec::new();
        while let Some(x) = stack.pop() {
            if x.index() >= self.f.exprs.len() {
                return Err(format!("expression {x} does not exist"));
            }
            nodes.push(x);
            ops.clear();
            self.f.expr_operands(x, &mut ops);
            stack.extend_from_slice(&ops);
        }
        nodes.sort_unstable();
        let mut map: rustc_hash::FxHashMap<PExprId, PExprId> = rustc_hash::FxHashMap::default();
        for x in nodes {
            let node = self.f.exprs[x.index()];
            let m = |id: PExprId| map.get(&id).copied().unwrap_or(id);
            let kind = match node.kind {
                k @ (PExprKind::Int(_) | PExprKind::Float(_) | PExprKind::Var(_)) => k,
                PExprKind::Bin(op, a, b) => PExprKind::Bin(op, m(a), m(b)),
                PExprKind::Not(a) => PExprKind::Not(m(a)),
                PExprKind::Select(c, a, b) => PExprKind::Select(m(c), m(a), m(b)),
                PExprKind::Cast(a) => PExprKind::Cast(m(a)),
                PExprKind::Load(buf, r) => {
                    let ids: Vec<PExprId> = self.f.operands[r.range()].iter().map(|&i| m(i)).collect();
                    PExprKind::Load(buf, self.pool(&ids))
                }
                PExprKind::Call(f, r) => {
                    let ids: Vec<PExprId> = self.f.operands[r.range()].iter().map(|&i| m(i)).collect();
                    PExprKind::Call(f, self.pool(&ids))
                }
                PExprKind::Ramp(a, b) => PExprKind::Ramp(m(a), m(b)),
                PExprKind::Broadcast(a) => PExprKind::Broadcast(m(a)),
                PExprKind::Let(v, a, b) => PExprKind::Let(v, m(a), m(b)),
            };
            let new = self.push(kind, node.ty);
            map.insert(x, new);
        }
        Ok(map.get(&e).copied().unwrap_or(e))
    }

    /// A reference to a variable.
    pub fn var_ref(&mut self, v: VarId) -> PExprId {
        let ty = self.f.vars[v.index()].ty;
        self.push(PExprKind::Var(v), ty)
    }

    /// A binary operator (see [`BinOp`] for the operand rules).
    pub fn bin(&mut self, op: BinOp, a: PExprId, b: PExprId) -> Result<PExprId, String> {
        let (ta, tb) = (self.ty(a), self.ty(b));
        if ta != tb {
            return Err(format!("`{}` of {ta} and {tb}: the operands must have one type", op.name()));
        }
        let ty = if op.is_comparison() {
            ta.with_dtype(DType::Bool)
        } else if op.is_logical() {
            if ta.dtype != DType::Bool {
                return Err(format!("`{}` of {ta}: expected bool operands", op.name()));
            }
            ta
        } else {
            if ta.dtype == DType::Bool {
                return Err(format!("`{}` of bool: expected numbers", op.name()));
            }
            ta
        };
        Ok(self.push(PExprKind::Bin(op, a, b), ty))
    }

    /// Logical negation.
    pub fn not(&mut self, a: PExprId) -> Result<PExprId, String> {
        let ta = self.ty(a);
        if ta.dtype != DType::Bool {
            return Err(format!("`not` of {ta}: expected bool"));
        }
        Ok(self.push(PExprKind::Not(a), ta))
    }

    /// `select(cond, a, b)`.
    pub fn select(&mut self, cond: PExprId, a: PExprId, b: PExprId) -> Result<PExprId, String> {
        let (tc, ta, tb) = (self.ty(cond), self.ty(a), self.ty(b));
        if tc.dtype != DType::Bool {
            return Err(format!("`select` condition of type {tc}: expected bool"));
        }
        if ta != tb {
            return Err(format!("`select` arms of {ta} and {tb}: the arms must have one type"));
        }
        if tc.lanes != 1 && tc.lanes != ta.lanes {
            return Err(format!("`select` condition of {} lanes over arms of {}", tc.lanes, ta.lanes));
        }
        Ok(self.push(PExprKind::Select(cond, a, b), ta))
    }

    /// A conversion to `dtype` (the lanes stay).
    pub fn cast(&mut self, a: PExprId, dtype: DType) -> PExprId {
        let ty = self.ty(a).with_dtype(dtype);
        self.push(PExprKind::Cast(a), ty)
    }

    /// A load of `buf[indices]`: one integer index per dimension; with vector indices (all of
    /// one lane count), a vector load.
    pub fn load(&mut self, buf: BufId, indices: &[PExprId]) -> Result<PExprId, String> {
        let lanes = self.check_access(buf, indices)?;
        let dtype = self.f.bufs[buf.index()].dtype;
        let r = self.pool(indices);
        Ok(self.push(PExprKind::Load(buf, r), PType { dtype, lanes }))
    }

    fn check_access(&self, buf: BufId, indices: &[PExprId]) -> Result<u16, String> {
        let b = &self.f.bufs[buf.index()];
        if indices.len() != b.shape.len() {
            return Err(format!(
                "buffer `%{}` has {} dimensions, indexed with {}",
                b.name,
                b.shape.len(),
                indices.len()
            ));
        }
        let mut lanes = 1;
        for &i in indices {
            let t = self.ty(i);
            if !t.dtype.is_integer() {
                return Err(format!("index of buffer `%{}` has type {t}: expected an integer", b.name));
            }
            if t.lanes != 1 {
                if lanes != 1 && lanes != t.lanes {
                    return Err(format!("indices of buffer `%{}` have {lanes} and {} lanes", b.name, t.lanes));
                }
                lanes = t.lanes;
            }
        }
        Ok(lanes)
    }

    /// An intrinsic call.
    pub fn call(&mut self, intr: Intrinsic, args: &[PExprId]) -> Result<PExprId, String> {
        if args.len() != intr.arity() {
            return Err(format!("`{}` takes {} arguments, got {}", intr.name(), intr.arity(), args.len()));
        }
        let t = self.ty(args[0]);
        if let Some(&other) = args[1..].iter().find(|&&a| self.ty(a) != t) {
            return Err(format!("`{}` of {t} and {}: the arguments must have one type", intr.name(), self.ty(other)));
        }
        let ok = match intr.kind() {
            IntrinsicKind::Float | IntrinsicKind::FloatPredicate => t.dtype.is_float(),
            IntrinsicKind::Numeric => t.dtype != DType::Bool,
            IntrinsicKind::Integer => t.dtype.is_integer(),
        };
        if !ok {
            let want = match intr.kind() {
                IntrinsicKind::Float | IntrinsicKind::FloatPredicate => "a float",
                IntrinsicKind::Numeric => "a number",
                IntrinsicKind::Integer => "an integer",
            };
            return Err(format!("`{}` of {t}: expected {want}", intr.name()));
        }
        let ty = if intr.kind() == IntrinsicKind::FloatPredicate { t.with_dtype(DType::Bool) } else { t };
        let r = self.pool(args);
        Ok(self.push(PExprKind::Call(intr, r), ty))
    }

    /// `ramp(base, stride, lanes)` over a scalar integer type.
    pub fn ramp(&mut self, base: PExprId, stride: PExprId, lanes: u16) -> Result<PExprId, String> {
        let (tb, ts) = (self.ty(base), self.ty(stride));
        if tb != ts || !tb.dtype.is_integer() || !tb.is_scalar() {
            return Err(format!("`ramp` of {tb} and {ts}: expected two scalars of one integer type"));
        }
        if lanes < 2 {
            return Err(format!("`ramp` with {lanes} lanes: expected at least 2"));
        }
        lanes_ok(lanes)?;
        Ok(self.push(PExprKind::Ramp(base, stride), tb.with_lanes(lanes)))
    }

    /// `broadcast(value, lanes)` of a scalar.
    pub fn broadcast(&mut self, value: PExprId, lanes: u16) -> Result<PExprId, String> {
        let t = self.ty(value);
        if !t.is_scalar() {
            return Err(format!("`broadcast` of {t}: expected a scalar"));
        }
        if lanes < 2 {
            return Err(format!("`broadcast` to {lanes} lanes: expected at least 2"));
        }
        lanes_ok(lanes)?;
        Ok(self.push(PExprKind::Broadcast(value), t.with_lanes(lanes)))
    }

    /// `let %var = value in body` (an expression).
    pub fn let_expr(&mut self, var: VarId, value: PExprId, body: PExprId) -> Result<PExprId, String> {
        let (tv, tx) = (self.f.vars[var.index()].ty, self.ty(value));
        if tv != tx {
            return Err(format!("`let %{}: {tv}` bound to a value of type {tx}", self.f.vars[var.index()].name));
        }
        let ty = self.ty(body);
        Ok(self.push(PExprKind::Let(var, value, body), ty))
    }

    // ---- statements ----

    fn push_stmt(&mut self, kind: StmtKind) -> StmtId {
        self.f.stmts.push(Stmt { kind });
        StmtId(self.f.stmts.len() as u32 - 1)
    }

    /// Records where a statement came from.
    pub fn set_span(&mut self, s: StmtId, span: Span) {
        let spans = &mut self.f.stmt_spans;
        if spans.len() <= s.index() {
            spans.resize(s.index() + 1, Span::default());
        }
        spans[s.index()] = span;
    }

    /// `for %var in kind(min, extent) { body }`.
    pub fn for_(
        &mut self,
        var: VarId,
        min: PExprId,
        extent: PExprId,
        kind: ForKind,
        body: StmtId,
    ) -> Result<StmtId, String> {
        let tv = self.f.vars[var.index()].ty;
        let (tm, te) = (self.ty(min), self.ty(extent));
        if !tv.dtype.is_integer() {
            return Err(format!(
                "loop variable `%{}` has type {tv}: expected an integer",
                self.f.vars[var.index()].name
            ));
        }
        if tm != tv || te != tv {
            return Err(format!(
                "loop `%{}: {tv}` over a range of {tm} and {te}: the bounds must have the variable's type",
                self.f.vars[var.index()].name
            ));
        }
        Ok(self.push_stmt(StmtKind::For { var, min, extent, kind, body }))
    }

    /// `%buf[indices] = value;`
    pub fn store(&mut self, buf: BufId, indices: &[PExprId], value: PExprId) -> Result<StmtId, String> {
        let lanes = self.check_access(buf, indices)?;
        let b = &self.f.bufs[buf.index()];
        let tv = self.ty(value);
        if tv.dtype != b.dtype {
            return Err(format!("store of {tv} into buffer `%{}` of {}", b.name, b.dtype));
        }
        if tv.lanes != lanes {
            return Err(format!("store of {} lanes at an index of {lanes} into buffer `%{}`", tv.lanes, b.name));
        }
        let r = self.pool(indices);
        Ok(self.push_stmt(StmtKind::Store { buf, indices: r, value }))
    }

    /// `let %var = value;` over `body`.
    pub fn let_stmt(&mut self, var: VarId, value: PExprId, body: StmtId) -> Result<StmtId, String> {
        let (tv, tx) = (self.f.vars[var.index()].ty, self.ty(value));
        if tv != tx {
            return Err(format!("`let %{}: {tv}` bound to a value of type {tx}", self.f.vars[var.index()].name));
        }
        Ok(self.push_stmt(StmtKind::Let { var, value, body }))
    }

    /// `if (cond) { then } [else { else }]`.
    pub fn if_(&mut self, cond: PExprId, then_: StmtId, else_: Option<StmtId>) -> Result<StmtId, String> {
        let t = self.ty(cond);
        if t != PType::scalar(DType::Bool) {
            return Err(format!("`if` condition of type {t}: expected bool"));
        }
        Ok(self.push_stmt(StmtKind::If { cond, then_, else_ }))
    }

    /// Statements in order. Nested sequences are flattened (and left empty, unused), and a
    /// sequence of one statement is that statement.
    pub fn seq(&mut self, stmts: &[StmtId]) -> StmtId {
        if let [one] = stmts {
            return *one;
        }
        let start = self.f.stmt_lists.len() as u32;
        for &s in stmts {
            match self.f.stmts[s.index()].kind {
                StmtKind::Seq(r) => {
                    for i in r.range() {
                        let inner = self.f.stmt_lists[i];
                        self.f.stmt_lists.push(inner);
                    }
                    // The flattened sequence is consumed here; emptied, it no longer counts
                    // as a second user of its statements (the verifier counts every use).
                    self.f.stmts[s.index()].kind = StmtKind::Seq(IdRange::default());
                }
                _ => self.f.stmt_lists.push(s),
            }
        }
        let len = self.f.stmt_lists.len() as u32 - start;
        self.push_stmt(StmtKind::Seq(IdRange { start, len }))
    }

    /// `alloc %buf;` over `body`.
    pub fn alloc(&mut self, buf: BufId, body: StmtId) -> StmtId {
        self.push_stmt(StmtKind::Alloc { buf, body })
    }

    /// `decl %buf = %data;` over `body`: the element types must agree.
    pub fn decl(&mut self, buf: BufId, data: BufId, body: StmtId) -> Result<StmtId, String> {
        let (b, d) = (&self.f.bufs[buf.index()], &self.f.bufs[data.index()]);
        if b.dtype != d.dtype {
            return Err(format!("`decl %{}` of {} over buffer `%{}` of {}", b.name, b.dtype, d.name, d.dtype));
        }
        Ok(self.push_stmt(StmtKind::Decl { buf, data, body }))
    }

    /// `eval expr;`
    pub fn evaluate(&mut self, e: PExprId) -> StmtId {
        self.push_stmt(StmtKind::Evaluate(e))
    }

    /// `attr "key" = value { body }`.
    pub fn attr(&mut self, key: &str, value: PExprId, body: StmtId) -> StmtId {
        let key = self.string(key);
        self.push_stmt(StmtKind::Attr { key, value, body })
    }

    /// An empty statement (a sequence of nothing): a no-op.
    pub fn nop(&mut self) -> StmtId {
        self.seq(&[])
    }

    /// Finishes the function with `body` and leaves the builder empty.
    pub fn finish(&mut self, body: StmtId) -> PrimFunc {
        self.f.body = body;
        if self.f.stmt_spans.len() != self.f.stmts.len() && !self.f.stmt_spans.is_empty() {
            self.f.stmt_spans.resize(self.f.stmts.len(), Span::default());
        }
        std::mem::take(&mut self.f)
    }
}

impl PType {
    /// The same element type with another lane count.
    pub fn with_lanes(self, lanes: u16) -> PType {
        PType { dtype: self.dtype, lanes }
    }
}

/// Whether `value` is representable in the integer (or `bool`) type `dtype`.
pub(crate) fn int_fits(value: i64, dtype: DType) -> bool {
    match dtype {
        DType::Bool => value == 0 || value == 1,
        DType::I8 => i8::try_from(value).is_ok(),
        DType::I16 => i16::try_from(value).is_ok(),
        DType::I32 => i32::try_from(value).is_ok(),
        DType::I64 => true,
        DType::U8 => u8::try_from(value).is_ok(),
        DType::U16 => u16::try_from(value).is_ok(),
        DType::U32 => u32::try_from(value).is_ok(),
        // u64 values are held as their i64 bit pattern.
        DType::U64 => true,
        DType::F16 | DType::F32 | DType::F64 => false,
    }
}

/// `value` rounded to the float type `dtype` and held as f64.
pub(crate) fn round_to(value: f64, dtype: DType) -> f64 {
    match dtype {
        DType::F32 => value as f32 as f64,
        DType::F16 => half::f16::from_f64(value).to_f64(),
        _ => value,
    }
}
