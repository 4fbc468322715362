//! Errors across the boundary: Python exceptions raised in callbacks become pass errors (with
//! their traceback), and pass errors become `passel.PassError` (with the Python exception as
//! `__cause__`), or the original `KeyboardInterrupt` when the run was cancelled.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use passel_engine::transform::{InstrumentError, PassError as RustPassError};
use pyo3::exceptions::{PyException, PyKeyboardInterrupt, PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyList;

pyo3::create_exception!(
    passel,
    PassError,
    PyRuntimeError,
    "A pass, an instrument callback, the pass context or a pipeline failed. The message names \
     the pass (and function); when Python code failed it ends with the Python traceback, and \
     the Python exception is the ``__cause__``."
);
pyo3::create_exception!(
    passel,
    ParseError,
    PyValueError,
    "Malformed IR text; the message gives line:col of every error."
);

pyo3::create_exception!(
    passel,
    OnnxError,
    PyValueError,
    "An ONNX model passel cannot import: the message names the file and the node (or lists \
     every unsupported operator with its count)."
);

/// The first Python exception raised in a callback of the current run (the engine may call
/// more than one failing callback before it stops: parallel workers, exit callbacks).
static PENDING: Mutex<Option<PyErr>> = Mutex::new(None);
/// Set when a callback raised `KeyboardInterrupt`: later Python callbacks of the run are
/// not called.
static CANCELLED: AtomicBool = AtomicBool::new(false);

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("PassError", m.py().get_type::<PassError>())?;
    m.add("ParseError", m.py().get_type::<ParseError>())?;
    m.add("OnnxError", m.py().get_type::<OnnxError>())?;
    Ok(())
}

/// Whether a `KeyboardInterrupt` cancelled the current run.
pub(crate) fn cancelled() -> bool {
    CANCELLED.load(Ordering::Relaxed)
}

/// The error a callback returns once the run is cancelled.
pub(crate) fn cancelled_message() -> String {
    "cancelled by KeyboardInterrupt".to_string()
}

/// Keeps `err` (the first one of a run) and returns its message with the Python traceback.
pub(crate) fn record(py: Python<'_>, err: PyErr, what: &str) -> String {
    if err.is_instance_of::<PyKeyboardInterrupt>(py) {
        CANCELLED.store(true, Ordering::Relaxed);
    }
    let text = format_exception(py, &err);
    let mut pending = PENDING.lock().unwrap_or_else(|e| e.into_inner());
    if pending.is_none() {
        *pending = Some(err);
    }
    format!("Python exception in {what}:\n{}", text.trim_end())
}

fn format_exception(py: Python<'_>, err: &PyErr) -> String {
    let formatted = (|| -> PyResult<String> {
        let tb = py.import("traceback")?;
        let lines = tb.call_method1("format_exception", (err.get_type(py), err.value(py), err.traceback(py)))?;
        let lines = lines.cast_into::<PyList>()?;
        let mut out = String::new();
        for line in lines.iter() {
            out.push_str(&line.extract::<String>()?);
        }
        Ok(out)
    })();
    formatted.unwrap_or_else(|_| err.to_string())
}

/// An instrument error from a Python exception.
pub(crate) fn instrument_error(py: Python<'_>, err: PyErr, what: &str) -> InstrumentError {
    InstrumentError::new(record(py, err, what))
}

/// Marks the start of a top-level call into the engine: nothing pending from earlier runs.
pub(crate) fn begin() {
    if let Ok(mut p) = PENDING.lock() {
        p.take();
    }
    CANCELLED.store(false, Ordering::Relaxed);
}

/// The Python exception for a failed engine call: the kept `KeyboardInterrupt` (or other
/// `BaseException` that is not an `Exception`) as is; otherwise `passel.PassError` with the
/// engine's message and the kept Python exception, if any, as its cause.
pub(crate) fn to_py(py: Python<'_>, err: impl std::fmt::Display) -> PyErr {
    let cause = PENDING.lock().unwrap_or_else(|e| e.into_inner()).take();
    CANCELLED.store(false, Ordering::Relaxed);
    if let Some(cause) = &cause {
        if !cause.is_instance_of::<PyException>(py) {
            return cause.clone_ref(py);
        }
    }
    let e = PassError::new_err(err.to_string());
    if let Some(cause) = cause {
        e.set_cause(py, Some(cause));
    }
    e
}

/// `to_py` for the engine's pass errors.
pub(crate) fn pass_err(py: Python<'_>, err: RustPassError) -> PyErr {
    to_py(py, err)
}

/// Runs `f` with the GIL released (see the crate docs), then maps its error and checks for
/// a Ctrl-C that arrived while Rust code ran.
pub(crate) fn run_detached<T: Send, E: std::fmt::Display + Send>(
    py: Python<'_>,
    f: impl FnOnce() -> Result<T, E> + Send,
) -> PyResult<T> {
    begin();
    let res = py.detach(f);
    match res {
        Ok(v) => {
            CANCELLED.store(false, Ordering::Relaxed);
            py.check_signals()?;
            Ok(v)
        }
        Err(e) => Err(to_py(py, e)),
    }
}
