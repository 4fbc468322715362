//! The compute layer: loop nests from index functions, in the spirit of TVM's tensor
//! expressions (`te.compute(shape, lambda i: …)` with `te.sum` reductions), so that an
//! operator's loop-level definition is a few lines.
//!
//! A [`Kernel`] is a PrimFunc under construction: input and output buffers (parameters, in
//! the order they are declared; outputs last, for `call_tir`), temporaries (allocated around
//! the whole body), and stages built by [`Kernel::compute`] and [`Kernel::reduce`]. A stage's
//! index function receives the loop variables and returns the value; it builds expressions
//! with the [`PrimFuncBuilder`] it is given (each use of a variable is its own node, since
//! expressions are trees: call [`Kernel::v`]-style helpers per use).

use super::builder::PrimFuncBuilder;
use super::ir::{BinOp, BufId, Buffer, ForKind, PExprId, PType, Param, PrimFunc, StmtId, VarId};
use crate::ir::{DType, TensorType};

/// What a stage's index function returns.
pub type Value = Result<PExprId, String>;

/// A PrimFunc being built from stages.
#[derive(Default)]
pub struct Kernel {
    /// The builder (index functions build their expressions with it).
    pub b: PrimFuncBuilder,
    stages: Vec<StmtId>,
    temps: Vec<BufId>,
    n_loops: usize,
}

/// An i64 loop index.
const INDEX: PType = PType::scalar(DType::I64);

impl Kernel {
    /// An empty kernel.
    pub fn new() -> Kernel {
        Kernel::default()
    }

    fn buffer(&mut self, name: &str, dtype: DType, shape: &[u64]) -> Result<BufId, String> {
        let shape: Vec<i64> = shape
            .iter()
            .map(|&d| i64::try_from(d).map_err(|_| format!("dimension {d} is too large")))
            .collect::<Result<_, _>>()?;
        self.b.buffer(Buffer::new(name, dtype, &shape))
    }

    /// A buffer parameter read by the kernel.
    pub fn input(&mut self, name: &str, ty: &TensorType) -> Result<BufId, String> {
        let id = self.buffer(name, ty.dtype, &ty.shape)?;
        self.b.param(Param::Buf(id));
        Ok(id)
    }

    /// A buffer parameter the kernel writes (declare outputs after inputs).
    pub fn output(&mut self, name: &str, ty: &TensorType) -> Result<BufId, String> {
        self.input(name, ty)
    }

    /// A temporary buffer, allocated (zero-filled) around the whole body.
    pub fn temp(&mut self, name: &str, dtype: DType, shape: &[u64]) -> Result<BufId, String> {
        let id = self.buffer(name, dtype, shape)?;
        self.temps.push(id);
        Ok(id)
    }

    /// The shape of a buffer.
    pub fn shape(&self, buf: BufId) -> Vec<i64> {
        self.b.peek().buf(buf).shape.to_vec()
    }

    fn loop_vars(&mut self, prefix: &str, n: usize) -> Result<Vec<VarId>, String> {
        (0..n)
            .map(|_| {
                self.n_loops += 1;
                self.b.var(&format!("{prefix}{}", self.n_loops - 1), INDEX)
            })
            .collect()
    }

    /// Wraps `body` in serial loops over `extents`, innermost last.
    fn nest(&mut self, vars: &[VarId], extents: &[i64], mut body: StmtId) -> Result<StmtId, String> {
        for (&v, &e) in vars.iter().zip(extents).rev() {
            let (lo, ext) = (self.b.i64(0), self.b.i64(e));
            body = self.b.for_(v, lo, ext, ForKind::Serial, body)?;
        }
        Ok(body)
    }

    fn store_at(&mut self, out: BufId, vars: &[VarId], value: PExprId) -> Result<StmtId, String> {
        let idx = ex::vars(&mut self.b, vars);
        self.b.store(out, &idx, value)
    }

    /// A stage: `out[i…] = f(i…)` over the whole of `out`.
    pub fn compute(
        &mut self,
        out: BufId,
        mut f: impl FnMut(&mut PrimFuncBuilder, &[VarId]) -> Value,
    ) -> Result<(), String> {
        let shape = self.shape(out);
        let vars = self.loop_vars("i", shape.len())?;
        let value = f(&mut self.b, &vars)?;
        let store = self.store_at(out, &vars, value)?;
        let stage = self.nest(&vars, &shape, store)?;
        self.stages.push(stage);
        Ok(())
    }

    /// A reduction stage: `out[i…] = init; out[i…] = op(out[i…], f(i…, r…))` for every `r` in
    /// `rshape` (TVM's `te.sum` / `te.max` / `te.min` with `op` Add / Max / Min).
    pub fn reduce(
        &mut self,
        out: BufId,
        rshape: &[i64],
        op: BinOp,
        init: impl FnOnce(&mut PrimFuncBuilder) -> Value,
        mut f: impl FnMut(&mut PrimFuncBuilder, &[VarId], &[VarId]) -> Value,
    ) -> Result<(), String> {
        let shape = self.shape(out);
        let vars = self.loop_vars("i", shape.len())?;
        let rvars = self.loop_vars("r", rshape.len())?;
        let init = init(&mut self.b)?;
        let first = self.store_at(out, &vars, init)?;
        let term = f(&mut self.b, &vars, &rvars)?;
        let idx = ex::vars(&mut self.b, &vars);
        let acc = self.b.load(out, &idx)?;
        let combined = self.b.bin(op, acc, term)?;
        let update = self.store_at(out, &vars, combined)?;
        let inner = self.nest(&rvars, rshape, update)?;
        let body = self.b.seq(&[first, inner]);
        let stage = self.nest(&vars, &shape, body)?;
        self.stages.push(stage);
        Ok(())
    }

    /// A stage of any statements: `f(i…)` builds the body of a loop nest over `shape` (for
    /// scatters, scans and selections, whose stores are not one value per output element).
    pub fn each(
        &mut self,
        shape: &[i64],
        f: impl FnOnce(&mut PrimFuncBuilder, &[VarId]) -> Result<Vec<StmtId>, String>,
    ) -> Result<(), String> {
        let vars = self.loop_vars("i", shape.len())?;
        let body = f(&mut self.b, &vars)?;
        let body = self.b.seq(&body);
        let stage = self.nest(&vars, shape, body)?;
        self.stages.push(stage);
        Ok(())
    }

    /// A scatter stage: `out[idx(i…)] = value(i…)` for every `i` in `domain`, in row-major
    /// order (later positions win; `f` may load `out` to combine).
    pub fn scatter(
        &mut self,
        out: BufId,
        domain: &[i64],
        mut f: impl FnMut(&mut PrimFuncBuilder, &[VarId]) -> Result<(Vec<PExprId>, PExprId), String>,
    ) -> Result<(), String> {
        self.each(domain, |b, iv| {
            let (idx, value) = f(b, iv)?;
            Ok(vec![b.store(out, &idx, value)?])
        })
    }

    /// The finished PrimFunc: the stages in order, inside the temporaries' allocations.
    pub fn finish(mut self) -> PrimFunc {
        let mut body = self.b.seq(&self.stages);
        for &t in self.temps.iter().rev() {
            body = self.b.alloc(t, body);
        }
        self.b.finish(body)
    }
}

/// Helpers for index functions.
pub mod ex {
    use super::*;

    /// A use of loop variable `v`.
    pub fn v(b: &mut PrimFuncBuilder, v: VarId) -> PExprId {
        b.var_ref(v)
    }

    /// Uses of loop variables `vs`, as indices.
    pub fn vars(b: &mut PrimFuncBuilder, vs: &[VarId]) -> Vec<PExprId> {
        vs.iter().map(|&v| b.var_ref(v)).collect()
    }

    /// An i64 immediate.
    pub fn i(b: &mut PrimFuncBuilder, c: i64) -> PExprId {
        b.i64(c)
    }

    /// A float (or integer, for integer dtypes) immediate of `dtype`.
    pub fn c(b: &mut PrimFuncBuilder, value: f64, dtype: DType) -> Value {
        if dtype.is_float() {
            b.float(value, PType::scalar(dtype))
        } else {
            b.int(value as i64, PType::scalar(dtype))
        }
    }

    /// `a op b`.
    pub fn bin(b: &mut PrimFuncBuilder, op: BinOp, x: PExprId, y: PExprId) -> Value {
        b.bin(op, x, y)
    }

    /// The indices of an input of shape `in_shape` broadcast (numpy rules) to an output whose
    /// loop variables are `vars`: leading output dimensions are dropped, and a dimension of 1
    /// against a larger output dimension reads index 0.
    pub fn broadcast_index(
        b: &mut PrimFuncBuilder,
        in_shape: &[u64],
        out_shape: &[u64],
        vars: &[VarId],
    ) -> Vec<PExprId> {
        let lead = out_shape.len() - in_shape.len();
        in_shape
            .iter()
            .enumerate()
            .map(|(k, &d)| if d == 1 && out_shape[lead + k] != 1 { b.i64(0) } else { b.var_ref(vars[lead + k]) })
            .collect()
    }

    /// `x` as an i64 index (a cast unless it already is one).
    pub fn as_index(b: &mut PrimFuncBuilder, x: PExprId) -> PExprId {
        if b.peek().expr(x).ty.dtype == DType::I64 {
            x
        } else {
            b.cast(x, DType::I64)
        }
    }

    /// `select(x < 0, x + dim, x)`: a possibly negative position along an axis of length
    /// `dim` (ONNX's convention), counted from the start.
    pub fn wrap_negative(b: &mut PrimFuncBuilder, x: PExprId, dim: i64) -> Value {
        let (x2, x3) = (b.copy_expr(x)?, b.copy_expr(x)?);
        let zero = b.i64(0);
        let neg = b.bin(BinOp::Lt, x, zero)?;
        let d = b.i64(dim);
        let up = b.bin(BinOp::Add, x2, d)?;
        b.select(neg, up, x3)
    }

    /// `min(max(x, lo), hi)`.
    pub fn clamp(b: &mut PrimFuncBuilder, x: PExprId, lo: i64, hi: i64) -> Value {
        let l = b.i64(lo);
        let m = b.bin(BinOp::Max, x, l)?;
        let h = b.i64(hi);
        b.bin(BinOp::Min, m, h)
    }

    /// `lo <= x && x < hi`.
    pub fn in_range(b: &mut PrimFuncBuilder, x: PExprId, lo: i64, hi: i64) -> Value {
        let x2 = b.copy_expr(x)?;
        let l = b.i64(lo);
        let ge = b.bin(BinOp::Ge, x, l)?;
        let h = b.i64(hi);
        let lt = b.bin(BinOp::Lt, x2, h)?;
        b.bin(BinOp::And, ge, lt)
    }

    /// `x + k` (k an i64 constant; `x` itself when k is 0).
    pub fn plus(b: &mut PrimFuncBuilder, x: PExprId, k: i64) -> Value {
        if k == 0 {
            return Ok(x);
        }
        let c = b.i64(k);
        b.bin(BinOp::Add, x, c)
    }

    /// `x * k + c` over i64.
    pub fn affine(b: &mut PrimFuncBuilder, x: PExprId, k: i64, c: i64) -> Value {
        let x = if k == 1 {
            x
        } else {
            let kk = b.i64(k);
            b.bin(BinOp::Mul, x, kk)?
        };
        plus(b, x, c)
    }

    /// The loop variables `iv` with position `axis` replaced by `at` (which is used once).
    pub fn replace_at(b: &mut PrimFuncBuilder, iv: &[VarId], axis: usize, at: PExprId) -> Vec<PExprId> {
        let mut at = Some(at);
        (0..iv.len())
            .map(|d| if d == axis { at.take().unwrap_or_else(|| b.i64(0)) } else { b.var_ref(iv[d]) })
            .collect()
    }

    /// The row-major flat index of `idx` in a buffer of `shape`.
    pub fn flat_index(b: &mut PrimFuncBuilder, idx: &[VarId], shape: &[u64]) -> Value {
        let mut acc = b.i64(0);
        for (k, &v) in idx.iter().enumerate() {
            let stride: u64 = shape[k + 1..].iter().product();
            let s = b.i64(stride as i64);
            let iv = b.var_ref(v);
            let term = b.bin(BinOp::Mul, iv, s)?;
            acc = b.bin(BinOp::Add, acc, term)?;
        }
        Ok(acc)
    }

    /// The indices of flat row-major position `flat` (an expression built by `flat`, called
    /// once per dimension since expressions are trees) in a buffer of `shape`.
    pub fn unflatten(
        b: &mut PrimFuncBuilder,
        mut flat: impl FnMut(&mut PrimFuncBuilder) -> Value,
        shape: &[u64],
    ) -> Result<Vec<PExprId>, String> {
        let mut out = Vec::with_capacity(shape.len());
        for k in 0..shape.len() {
            let stride: u64 = shape[k + 1..].iter().product();
            let f = flat(b)?;
            let s = b.i64(stride as i64);
            let q = b.bin(BinOp::FloorDiv, f, s)?;
            let d = b.i64(shape[k] as i64);
            out.push(if k == 0 { q } else { b.bin(BinOp::FloorMod, q, d)? });
        }
        Ok(out)
    }
}
