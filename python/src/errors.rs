//! Errors across the boundary, as TVM has them: a Python exception raised in a callback (a
//! pass body, an instrument hook) travels through the engine as a pass error and is raised
//! again as itself when the run returns to Python (same type, message and traceback, with a
//! note naming the pass or hook); passel's own errors are `passel.PassError`, or, where a
//! Python type fits, a subclass of both (`PassValueError`, `PassTypeError`, `PassKeyError`),
//! so `except ValueError` and `except passel.PassError` both work.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use passel_engine::transform::{ConfigError, ContextError, InstrumentError, PassError as RustPassError, PipelineError};
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
    DiagnosticError,
    PassError,
    "A pass reported an error about the IR (a type error found by InferType): the message is \
     the diagnostic, with ``line:col`` when the module was parsed from text, each distinct \
     error once. TVM raises its ``DiagnosticError`` at the pass; passel raises when the run \
     returns."
);

/// A `DiagnosticError` with `message`.
pub(crate) fn diagnostic_error(message: String) -> PyErr {
    DiagnosticError::new_err(message)
}

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
    let py = m.py();
    let builtins = py.import("builtins")?;
    let make_type = builtins.getattr("type")?;
    for (name, base, doc) in [
        (
            "PassValueError",
            "ValueError",
            "A passel error about a bad value (an opt level, a config value, a pipeline's text).",
        ),
        (
            "PassTypeError",
            "TypeError",
            "A passel error about a value of the wrong type (a config value, a pass body's result).",
        ),
        ("PassKeyError", "KeyError", "A passel error naming something unknown (a pass, a config key)."),
    ] {
        let ns = pyo3::types::PyDict::new(py);
        ns.set_item("__doc__", doc)?;
        ns.set_item("__module__", "passel")?;
        let bases = pyo3::types::PyTuple::new(py, [py.get_type::<PassError>().into_any(), builtins.getattr(base)?])?;
        m.add(name, make_type.call1((name, bases, ns))?)?;
    }
    m.add("ParseError", m.py().get_type::<ParseError>())?;
    m.add("DiagnosticError", m.py().get_type::<DiagnosticError>())?;
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

/// The Python type a passel error fits, by the kind of value it is about.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Kind {
    Plain,
    Value,
    Type,
    Key,
}

impl Kind {
    /// The kind of an engine error, when `err` is one (errors inside a pass keep `Plain`: they
    /// are about the IR, not about a value the caller gave).
    pub(crate) fn of(err: &dyn std::any::Any) -> Kind {
        if let Some(e) = err.downcast_ref::<RustPassError>() {
            return match e {
                RustPassError::UnknownPass { .. } => Kind::Key,
                RustPassError::Config(c) => Kind::of(c),
                RustPassError::Context(ContextError::TooManyThreads { .. }) => Kind::Value,
                RustPassError::Pipeline(_) | RustPassError::PipelineTooDeep { .. } => Kind::Value,
                _ => Kind::Plain,
            };
        }
        if let Some(c) = err.downcast_ref::<ConfigError>() {
            return match c {
                ConfigError::UnknownKey { .. } => Kind::Key,
                ConfigError::WrongType { .. } => Kind::Type,
                ConfigError::Duplicate { .. } => Kind::Plain,
                _ => Kind::Value,
            };
        }
        if err.downcast_ref::<PipelineError>().is_some() {
            return Kind::Value;
        }
        Kind::Plain
    }
}

/// `passel.PassError`, or its subclass for `kind` (`PassValueError`…), with `message`.
pub(crate) fn passel_error(py: Python<'_>, kind: Kind, message: String) -> PyErr {
    let name = match kind {
        Kind::Plain => return PassError::new_err(message),
        Kind::Value => "PassValueError",
        Kind::Type => "PassTypeError",
        Kind::Key => "PassKeyError",
    };
    match py.import("passel._passel").and_then(|m| m.getattr(name)) {
        Ok(ty) => match ty.call1((message.clone(),)) {
            Ok(value) => PyErr::from_value(value),
            Err(e) => e,
        },
        Err(_) => PassError::new_err(message),
    }
}

/// The Python exception for a failed engine call: the Python exception a callback raised, as
/// itself (a note added with the engine's message, which names the pass and function);
/// otherwise passel's error for the engine's message.
pub(crate) fn to_py<E: std::fmt::Display + 'static>(py: Python<'_>, err: E) -> PyErr {
    let cause = PENDING.lock().unwrap_or_else(|e| e.into_inner()).take();
    CANCELLED.store(false, Ordering::Relaxed);
    if let Some(cause) = cause {
        if cause.is_instance_of::<PyException>(py) {
            let first_line = err.to_string().lines().next().unwrap_or_default().to_string();
            let note = first_line.split(": Python exception in").next().unwrap_or_default().to_string();
            let value = cause.value(py);
            if !note.is_empty() && value.hasattr("add_note").unwrap_or(false) {
                let _ = value.call_method1("add_note", (format!("passel: {note}"),));
            }
        }
        return cause;
    }
    // A pass that reported an error under `errors_fail_pass` (a session run, or a run whose
    // caller did not locate it): TVM's `DiagnosticError`.
    let any: &dyn std::any::Any = &err;
    let reported = |e: &RustPassError| matches!(e, RustPassError::ErrorReported { .. });
    let from_session = any.downcast_ref::<passel_engine::SessionError>().is_some_and(|e| match e {
        passel_engine::SessionError::Pass(p) => reported(p),
        _ => false,
    });
    if any.downcast_ref::<RustPassError>().is_some_and(reported) || from_session {
        return diagnostic_error(err.to_string());
    }
    passel_error(py, Kind::of(&err), err.to_string())
}

/// `to_py` for the engine's pass errors.
pub(crate) fn pass_err(py: Python<'_>, err: RustPassError) -> PyErr {
    to_py(py, err)
}

/// Runs `f` with the GIL released (see the crate docs), then maps its error and checks for
/// a Ctrl-C that arrived while Rust code ran.
pub(crate) fn run_detached<T: Send, E: std::fmt::Display + Send + 'static>(
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
