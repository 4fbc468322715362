//! Instruments for Python: any Python object with TVM's instrument methods (``enter_pass_ctx``,
//! ``exit_pass_ctx``, ``should_run``, ``run_before_pass``, ``run_after_pass``; missing ones
//! default to no-ops / "run") becomes an engine `Instrument`, so the engine's order and
//! failure rules (rules 19–26 of the pass semantics) apply to it unchanged. The built-in
//! timing instrument is the engine's.

use std::sync::Arc;

use passel_engine::ir::Module as RModule;
use passel_engine::transform::{Instrument, InstrumentError, PassInfo as RPassInfo, PassTimingInstrument as RTiming};
use pyo3::prelude::*;

use crate::errors;
use crate::ir::Module;
use crate::pass_info::PassInfo;

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PassTimingInstrument>()?;
    Ok(())
}

/// The engine instrument for a Python object: the built-in timing instrument's own `Arc`, or
/// an adapter calling the object's methods.
pub(crate) fn to_instrument(obj: &Bound<'_, PyAny>) -> PyResult<Arc<dyn Instrument>> {
    if let Ok(t) = obj.extract::<PyRef<'_, PassTimingInstrument>>() {
        return Ok(t.inner.clone());
    }
    const HOOKS: [&str; 5] = ["enter_pass_ctx", "exit_pass_ctx", "should_run", "run_before_pass", "run_after_pass"];
    if !HOOKS.iter().any(|h| obj.hasattr(*h).unwrap_or(false)) {
        return Err(errors::passel_error(
            obj.py(),
            errors::Kind::Type,
            format!(
                "an instrument needs at least one of TVM's instrument methods ({}); {} has none",
                HOOKS.join(", "),
                obj.get_type().name()?
            ),
        ));
    }
    let name = match obj.getattr("name") {
        Ok(n) if n.is_instance_of::<pyo3::types::PyString>() => n.extract::<String>()?,
        _ => obj.get_type().name()?.to_string(),
    };
    Ok(Arc::new(PyInstrument { obj: obj.clone().unbind(), name }))
}

struct PyInstrument {
    obj: Py<PyAny>,
    name: String,
}

impl PyInstrument {
    /// Calls `method` if the object has it; `None` when it does not.
    fn call<T>(
        &self,
        method: &str,
        always: bool,
        f: impl FnOnce(Python<'_>, &Bound<'_, PyAny>) -> PyResult<T>,
    ) -> Result<Option<T>, InstrumentError> {
        if !always && errors::cancelled() {
            return Err(InstrumentError::new(errors::cancelled_message()));
        }
        Python::attach(|py| {
            let obj = self.obj.bind(py);
            let m = match obj.getattr(method) {
                Ok(m) if !m.is_none() => m,
                _ => return Ok(None),
            };
            f(py, &m).map(Some).map_err(|e| errors::instrument_error(py, e, &format!("{}.{method}", self.name)))
        })
    }

    fn call_with_module(&self, method: &str, module: &RModule, info: &RPassInfo) -> Result<(), InstrumentError> {
        self.call(method, false, |_py, m| m.call1((Module::of(module.clone()), PassInfo::of(info))).map(|_| ()))
            .map(|_| ())
    }
}

impl Instrument for PyInstrument {
    fn name(&self) -> &str {
        &self.name
    }

    fn enter_pass_ctx(&self) -> Result<(), InstrumentError> {
        self.call("enter_pass_ctx", true, |_py, m| m.call0().map(|_| ())).map(|_| ())
    }

    fn exit_pass_ctx(&self) -> Result<(), InstrumentError> {
        self.call("exit_pass_ctx", true, |_py, m| m.call0().map(|_| ())).map(|_| ())
    }

    fn should_run(&self, module: &RModule, info: &RPassInfo) -> Result<bool, InstrumentError> {
        self.call("should_run", false, |_py, m| m.call1((Module::of(module.clone()), PassInfo::of(info)))?.is_truthy())
            .map(|r| r.unwrap_or(true))
    }

    fn run_before_pass(&self, module: &RModule, info: &RPassInfo) -> Result<(), InstrumentError> {
        self.call_with_module("run_before_pass", module, info)
    }

    fn run_after_pass(&self, module: &RModule, info: &RPassInfo) -> Result<(), InstrumentError> {
        self.call_with_module("run_after_pass", module, info)
    }
}

/// Records how long each pass takes, as a tree in call order (TVM's
/// ``PassTimingInstrument``). Call ``render()`` inside the context: leaving the outermost
/// context that holds it clears the data. Under parallel execution each line also gives the
/// summed CPU time of the pass's per-function tasks.
#[pyclass(module = "passel.instrument", frozen)]
pub struct PassTimingInstrument {
    inner: Arc<RTiming>,
}

#[pymethods]
impl PassTimingInstrument {
    #[new]
    fn new() -> PassTimingInstrument {
        PassTimingInstrument { inner: Arc::new(RTiming::new()) }
    }

    /// The report: a ``Total`` line, then one tab-indented line per pass:
    /// ``name: total [self] (% of total; % of parent)``. Raises ``passel.PassError`` while a
    /// pass runs.
    fn render(&self, py: Python<'_>) -> PyResult<String> {
        self.inner.render().map_err(|e| errors::to_py(py, e.message))
    }

    /// The instrument's name.
    #[getter]
    fn name(&self) -> String {
        self.inner.name().to_string()
    }
}
