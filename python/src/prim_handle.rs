//! The handle of an engine PrimFunc in Python and its conversions, below both of their users:
//! `ir.rs` (a module's PrimFuncs) and `tir.rs` (the PrimFunc view, passes and eval, which also
//! holds the handle's Python methods).

use std::sync::Arc;

use passel_engine::tir::PrimFunc;
use pyo3::prelude::*;

/// An engine PrimFunc (``passel.tir.PrimFunc`` wraps it). Immutable; shares the Rust `Arc`.
#[pyclass(module = "passel._passel", frozen)]
#[derive(Clone)]
pub struct PrimFuncHandle {
    pub(crate) inner: Arc<PrimFunc>,
}

/// A PrimFunc as the Python object users see (`passel.tir.PrimFunc`).
pub(crate) fn prim_to_py<'py>(py: Python<'py>, func: &Arc<PrimFunc>) -> PyResult<Bound<'py, PyAny>> {
    let handle = PrimFuncHandle { inner: func.clone() };
    py.import("passel.tir")?.getattr("PrimFunc")?.call_method1("_wrap", (handle,))
}

/// The engine PrimFunc behind a `passel.tir.PrimFunc` (or a bare handle), if `obj` is one.
pub(crate) fn prim_from_py(obj: &Bound<'_, PyAny>) -> Option<Arc<PrimFunc>> {
    if let Ok(h) = obj.extract::<PyRef<'_, PrimFuncHandle>>() {
        return Some(h.inner.clone());
    }
    let native = obj.getattr("_native").ok()?;
    let h = native.extract::<PyRef<'_, PrimFuncHandle>>().ok()?;
    Some(h.inner.clone())
}
