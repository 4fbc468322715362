//! FlattenBuffer (prim_func pass, opt level 0): TVM's `tir.transform.FlattenBuffer`, making
//! every buffer access one-dimensional.
//!
//! What it does, as TVM does: each buffer that is not already flat (one dimension, no
//! strides, offset 0) gets a flat counterpart of shape `[storage]` (the elements its strides
//! and offset reach), and every access `%B[i, j, …]` becomes `%B[offset + i × s_i + j × s_j +
//! …]` on it (vector indices give a vector flat index). An `alloc` or `decl` of such a
//! buffer allocates or declares the flat one instead. A parameter keeps its buffer, so the
//! function's graph-visible type (the `call_tir` callee type) does not change; the body reads
//! and writes it through `decl %B: Buffer[(storage,), …] = %B;` at its start (TVM keeps the
//! N-d buffer in `buffer_map` and declares the flat view over its data the same way). After
//! the pass every access has one index.
//!
//! The flat index is computed in `i32` when every index is `i32` and the storage fits in it,
//! else in `i64` (narrower indices are cast). Terms with stride 0 and the `× 1` of the
//! innermost stride are left out; the index is not simplified further (run Simplify).
//!
//! Phases:
//! 1. The flat buffers and each access's index type.
//! 2. One copy of the body ([`Copier`](super::copy::Copier)) with the accesses flattened and the
//!    buffers replaced, then the views of the parameters around it.
//! 3. Nothing to flatten → the input `Arc`.

use std::sync::Arc;

use passel_engine::ir::DType;
use passel_engine::tir::{BufId, Buffer, PExprKind, PrimFunc, PrimFuncBuilder, StmtKind};
use passel_engine::transform::PrimFuncPass;

use super::copy::{Copier, Flat};

/// The registry name.
pub const NAME: &str = "FlattenBuffer";

passel_engine::register_pass!(NAME, || Box::new(pass()));

/// The `FlattenBuffer` pass as registered.
pub fn pass() -> PrimFuncPass {
    passel_engine::transform::prim_func_pass(NAME, 0, |func, _module, _ctx| Ok(flatten_buffer(&func)))
}

/// Runs FlattenBuffer on `func`; returns `func` itself when every buffer is already flat
/// (or a buffer's storage size overflows, which the builder would have refused).
pub fn flatten_buffer(func: &Arc<PrimFunc>) -> Arc<PrimFunc> {
    super::rebuilt(func, run(func))
}

fn is_flat(b: &Buffer) -> bool {
    b.shape.len() == 1 && b.elem_offset == 0 && (b.strides.is_empty() || b.strides[0] == 1)
}

fn run(f: &PrimFunc) -> Result<Option<PrimFunc>, String> {
    let n = f.bufs().len();
    if f.bufs().iter().all(is_flat) {
        return Ok(None);
    }
    // Whether every access of each buffer is indexed by i32 only.
    let mut all_i32 = vec![true; n];
    let mut note = |b: BufId, idx: &[passel_engine::tir::PExprId]| {
        if idx.iter().any(|&i| f.expr(i).ty.dtype != DType::I32) {
            all_i32[b.index()] = false;
        }
    };
    for e in f.exprs() {
        if let PExprKind::Load(b, r) = e.kind {
            note(b, f.operands(r));
        }
    }
    for s in f.stmts() {
        if let StmtKind::Store { buf, indices, .. } = s.kind {
            note(buf, f.operands(indices));
        }
    }
    let mut b = PrimFuncBuilder::with_signature_of(f);
    let mut copier = Copier::new(f);
    let mut views = Vec::new();
    let params: Vec<BufId> = f.buffer_params().collect();
    for (i, buf) in f.bufs().iter().enumerate() {
        if is_flat(buf) {
            continue;
        }
        let id = BufId(i as u32);
        let storage = buf.storage_elements().ok_or_else(|| format!("buffer `%{}` is too large", buf.name))?;
        let dtype = if all_i32[i] && storage <= i32::MAX as i64 { DType::I32 } else { DType::I64 };
        let flat = Buffer {
            name: buf.name.clone(),
            dtype: buf.dtype,
            shape: Box::new([storage]),
            strides: Box::new([]),
            elem_offset: 0,
            scope: buf.scope.clone(),
        };
        let new = b.buffer(flat)?;
        copier.bufs.insert(id, new);
        copier.flatten.insert(id, Flat { strides: buf.effective_strides(), offset: buf.elem_offset, dtype });
        if params.contains(&id) {
            views.push((new, id));
        }
    }
    let mut body = copier.stmt(&mut b, f.body())?;
    for &(view, param) in views.iter().rev() {
        body = b.decl(view, param, body)?;
    }
    Ok(Some(b.finish(body)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prim(src: &str) -> Arc<PrimFunc> {
        let m = passel_engine::ir::parse_module(src).expect("parses");
        m.get_prim("f").expect("@f").clone()
    }

    #[test]
    fn flatten_buffer_returns_the_same_arc_when_every_buffer_is_flat() {
        let f = prim("prim @f(%A: Buffer[(4,), f32]) { for %i in serial(0, 4) { %A[%i] = 1.0f; } }");
        assert!(Arc::ptr_eq(&flatten_buffer(&f), &f));
    }

    #[test]
    fn flatten_buffer_keeps_the_graph_type() {
        let f = prim("prim @f(%A: Buffer[(2, 3), f32]) { %A[1, 2] = 1.0f; }");
        let g = flatten_buffer(&f);
        assert!(!Arc::ptr_eq(&g, &f));
        assert_eq!(g.graph_type(), f.graph_type());
    }
}
