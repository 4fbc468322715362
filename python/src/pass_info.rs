//! `PassInfo` for Python (TVM's ``tvm.transform.PassInfo``), registered in `passel.transform`.
//! Its own file below both users: instruments receive one per hook (`instrument.rs`), passes
//! expose theirs (`transform.rs`).

use pyo3::prelude::*;

/// The static description of a pass: ``name``, ``opt_level`` (the lowest context opt level
/// at which a ``Sequential`` runs it) and ``required`` (registry names run right before it).
#[pyclass(module = "passel.transform", frozen, eq)]
#[derive(Clone, PartialEq)]
pub struct PassInfo {
    /// The pass name.
    #[pyo3(get)]
    name: String,
    /// The pass's opt level.
    #[pyo3(get)]
    opt_level: u32,
    /// Registry names of the passes a ``Sequential`` runs right before this one.
    #[pyo3(get)]
    required: Vec<String>,
}

impl PassInfo {
    pub(crate) fn of(info: &passel_engine::PassInfo) -> PassInfo {
        PassInfo { name: info.name.clone(), opt_level: info.opt_level, required: info.required.clone() }
    }
}

#[pymethods]
impl PassInfo {
    #[new]
    #[pyo3(signature = (opt_level, name, required=None))]
    fn new(opt_level: u32, name: String, required: Option<Vec<String>>) -> PassInfo {
        PassInfo { name, opt_level, required: required.unwrap_or_default() }
    }

    fn __repr__(&self) -> String {
        format!("PassInfo(name={:?}, opt_level={}, required={:?})", self.name, self.opt_level, self.required)
    }
}
