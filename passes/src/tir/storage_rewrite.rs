//! StorageRewrite (prim_func pass, opt level 0): TVM's `tir.transform.StorageRewrite`, reusing
//! the storage of an `alloc`ated buffer for another whose live range does not overlap.
//!
//! What it does: in a sequence, two `alloc` statements with one element type and one memory
//! scope, with no other `alloc` between them, share one allocation: the larger buffer is
//! allocated over both (and the statements between, which cannot see either), and the other
//! becomes a `decl` view of its storage. Their live ranges cannot overlap: each buffer exists
//! only inside its own `alloc`. Each allocation takes part in at most one merge per run.
//!
//! Difference from TVM, because of this IR: an `alloc` here is zero-filled (TVM's `Allocate`
//! is uninitialized), so the reused storage is cleared for the buffer that comes second
//! (loops storing zero to each of its elements) before its statements run. Not done (TVM
//! does): hoisting allocations out of loops, merging allocations that are not siblings in one
//! sequence, packing buffers of different element types into one byte allocation, and
//! in-place reuse of an input for an output inside one expression.
//!
//! Phases:
//! 1. Each sequence, statements in ascending order: the pairs of allocations to merge.
//! 2. The merged sequences are rebuilt (inner ones first) and the function around them is
//!    copied ([`Copier`](super::copy::Copier) replacing those sequences).
//! 3. No pair → the input `Arc`.

use std::sync::Arc;

use passel_engine::tir::{BufId, ForKind, PExprId, PType, PrimFunc, PrimFuncBuilder, StmtId, StmtKind};
use passel_engine::transform::PrimFuncPass;

use super::copy::Copier;

/// The registry name.
pub const NAME: &str = "StorageRewrite";

passel_engine::register_pass!(NAME, || Box::new(pass()));

/// The `StorageRewrite` pass as registered.
pub fn pass() -> PrimFuncPass {
    passel_engine::transform::prim_func_pass(NAME, 0, |func, _module, _ctx| Ok(storage_rewrite(&func)))
}

/// Runs StorageRewrite on `func`; returns `func` itself when no two allocations merge.
pub fn storage_rewrite(func: &Arc<PrimFunc>) -> Arc<PrimFunc> {
    super::rebuilt(func, run(func))
}

type R<T> = Result<T, String>;

/// The buffer and body of an `alloc` statement.
fn alloc_of(f: &PrimFunc, s: StmtId) -> Option<(BufId, StmtId)> {
    match f.stmt(s).kind {
        StmtKind::Alloc { buf, body } => Some((buf, body)),
        _ => None,
    }
}

fn run(f: &PrimFunc) -> R<Option<PrimFunc>> {
    // Phase 1: per sequence, the pairs (positions) to merge.
    let mut merges: Vec<(StmtId, Vec<(usize, usize)>)> = Vec::new();
    for (i, s) in f.stmts().iter().enumerate() {
        let StmtKind::Seq(r) = s.kind else { continue };
        let items = f.stmt_list(r);
        let mut pairs = Vec::new();
        let mut pending: Option<usize> = None;
        for (j, &item) in items.iter().enumerate() {
            let Some((b2, _)) = alloc_of(f, item) else { continue };
            match pending.and_then(|p| alloc_of(f, items[p]).map(|(b1, _)| (p, b1))) {
                Some((p, b1)) if compatible(f, b1, b2) => {
                    pairs.push((p, j));
                    pending = None;
                }
                _ => pending = Some(j),
            }
        }
        if !pairs.is_empty() {
            merges.push((StmtId(i as u32), pairs));
        }
    }
    if merges.is_empty() {
        return Ok(None);
    }
    // Phase 2: inner sequences first (ascending ids), each over copies of its elements.
    let mut b = PrimFuncBuilder::with_signature_of(f);
    let mut copier = Copier::new(f);
    for (s, pairs) in merges {
        let StmtKind::Seq(r) = f.stmt(s).kind else { continue };
        let items = f.stmt_list(r);
        let mut out = Vec::new();
        let mut k = 0;
        for &(i, j) in &pairs {
            while k < i {
                out.push(copier.stmt(&mut b, items[k])?);
                k += 1;
            }
            let ((b1, body1), (b2, body2)) = (alloc_of(f, items[i]).expect("alloc"), alloc_of(f, items[j]).expect("alloc"));
            let first = copier.stmt(&mut b, body1)?;
            let mid: Vec<StmtId> = items[i + 1..j].iter().map(|&x| copier.stmt(&mut b, x)).collect::<R<_>>()?;
            let second = copier.stmt(&mut b, body2)?;
            let zero = zero_fill(&mut b, f, b2)?;
            let merged = if storage(f, b1) >= storage(f, b2) {
                // alloc b1 { body1; mid; decl b2 = b1 { zero b2; body2 } }
                let tail = b.seq(&[zero, second]);
                let view = b.decl(b2, b1, tail)?;
                let mut all = vec![first];
                all.extend(mid);
                all.push(view);
                let inner = b.seq(&all);
                b.alloc(b1, inner)
            } else {
                // alloc b2 { decl b1 = b2 { body1 }; mid; zero b2; body2 }
                let view = b.decl(b1, b2, first)?;
                let mut all = vec![view];
                all.extend(mid);
                all.push(zero);
                all.push(second);
                let inner = b.seq(&all);
                b.alloc(b2, inner)
            };
            out.push(merged);
            k = j + 1;
        }
        while k < items.len() {
            out.push(copier.stmt(&mut b, items[k])?);
            k += 1;
        }
        let new = b.seq(&out);
        copier.replace.insert(s, new);
    }
    let root = copier.stmt(&mut b, f.body())?;
    Ok(Some(b.finish(root)))
}

fn storage(f: &PrimFunc, b: BufId) -> i64 {
    f.buf(b).storage_elements().unwrap_or(i64::MAX)
}

fn compatible(f: &PrimFunc, a: BufId, b: BufId) -> bool {
    let (x, y) = (f.buf(a), f.buf(b));
    x.dtype == y.dtype
        && x.scope == y.scope
        && x.storage_elements().is_some()
        && y.storage_elements().is_some()
}

/// Loops storing zero into every element of `buf`.
fn zero_fill(b: &mut PrimFuncBuilder, f: &PrimFunc, buf: BufId) -> R<StmtId> {
    let shape = f.buf(buf).shape.clone();
    let dtype = f.buf(buf).dtype;
    let ty = PType::scalar(passel_engine::ir::DType::I64);
    let vars = (0..shape.len()).map(|d| b.var(&format!("z{d}"), ty)).collect::<R<Vec<_>>>()?;
    let idx: Vec<PExprId> = vars.iter().map(|&v| b.var_ref(v)).collect();
    let zero = if dtype.is_float() { b.float(0.0, PType::scalar(dtype))? } else { b.int(0, PType::scalar(dtype))? };
    let mut body = b.store(buf, &idx, zero)?;
    for (&v, &d) in vars.iter().zip(shape.iter()).rev() {
        let (min, extent) = (b.i64(0), b.i64(d));
        body = b.for_(v, min, extent, ForKind::Serial, body)?;
    }
    Ok(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prim(src: &str) -> Arc<PrimFunc> {
        let m = passel_engine::ir::parse_module(src).expect("parses");
        m.get_prim("f").expect("@f").clone()
    }

    #[test]
    fn storage_rewrite_returns_the_same_arc_without_sibling_allocations() {
        let f = prim("prim @f(%A: Buffer[(4,), f32]) { alloc %T: Buffer[(4,), f32] { %T[0] = 1.0f; } %A[0] = 1.0f; }");
        assert!(Arc::ptr_eq(&storage_rewrite(&f), &f));
        let g = prim("prim @f(%A: Buffer[(4,), f32]) { alloc %T: Buffer[(4,), f32] { %T[0] = 1.0f; } alloc %U: Buffer[(4,), f32] { %A[0] = %U[0]; } }");
        assert!(!Arc::ptr_eq(&storage_rewrite(&g), &g));
    }
}
