//! Passes and the pass context for Python: `PassInfo`, `PassContext` (entered with `with`),
//! `PassHandle` (any engine pass: registered Rust passes, sequentials, and passes whose body
//! is a Python callable), the registry, textual pipelines and the config registry.
//!
//! A Python function pass is an engine `FunctionPass` built `on_calling_thread`, whose body
//! attaches to the interpreter for one call per function (see the crate docs): it is a stage
//! of its own that calls the body on the thread that called the pipeline, one function after
//! the other, whatever `num_threads` is, while the Rust function passes around it still fan
//! out. Its results are merged in module order like theirs, so the output does not depend on
//! the thread count.

use std::io::Write;
use std::sync::{Arc, Mutex};

use passel_engine::ir::{Function as RFunction, Module as RModule};
use passel_engine::transform::{
    function_pass, get_pass, list_configs, list_passes, module_pass, parse_pipeline, print_pipeline, ConfigValue,
    Instrument, Pass as RPass, PassContext as RContext, PassError as RPassError, PrintIr, Sequential, IMMUTABLE_MODULE,
};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyString};

use crate::errors;
use crate::instrument::to_instrument;
use crate::ir::{Function, Module};
use crate::pass_info::PassInfo;

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PassInfo>()?;
    m.add_class::<PassContext>()?;
    m.add_class::<PassHandle>()?;
    m.add_function(wrap_pyfunction!(py_function_pass, m)?)?;
    m.add_function(wrap_pyfunction!(py_module_pass, m)?)?;
    m.add_function(wrap_pyfunction!(sequential, m)?)?;
    m.add_function(wrap_pyfunction!(standard_pipeline, m)?)?;
    m.add_function(wrap_pyfunction!(registered_pass, m)?)?;
    m.add_function(wrap_pyfunction!(registered_passes, m)?)?;
    m.add_function(wrap_pyfunction!(pipeline, m)?)?;
    m.add_function(wrap_pyfunction!(print_ir, m)?)?;
    m.add_function(wrap_pyfunction!(time_in_rust, m)?)?;
    Ok(())
}

/// Python objects of contexts that may be `current()`: entered ones (with their entry count)
/// and thread defaults whose instruments were overridden.
static KNOWN: Mutex<Vec<(usize, usize, Py<PassContext>)>> = Mutex::new(Vec::new());

/// The settings passes run under (TVM's ``PassContext``): ``opt_level`` (default 2),
/// ``required_pass`` and ``disabled_pass`` (names), ``instruments``, ``config`` (registered
/// keys only, type-checked; see ``PassContext.list_configs()``) and passel's ``num_threads``
/// (worker threads for function passes; None = all cores, 1 = serial).
///
/// Use it as a context manager: ``with PassContext(opt_level=3): mod = seq(mod)``. Entering
/// calls every instrument's ``enter_pass_ctx``; leaving calls ``exit_pass_ctx``. Each thread
/// has its own stack; ``PassContext.current()`` is the innermost entered on this thread.
#[pyclass(module = "passel.transform", frozen)]
pub struct PassContext {
    pub(crate) inner: RContext,
    instruments: Mutex<Vec<Py<PyAny>>>,
}

fn config_value(key: &str, v: &Bound<'_, PyAny>) -> PyResult<Option<ConfigValue>> {
    Ok(Some(if v.is_none() {
        return Ok(None);
    } else if v.is_instance_of::<PyBool>() {
        ConfigValue::Bool(v.extract()?)
    } else if v.is_instance_of::<PyInt>() {
        ConfigValue::Int(v.extract()?)
    } else if v.is_instance_of::<PyFloat>() {
        ConfigValue::Float(v.extract()?)
    } else if v.is_instance_of::<PyString>() {
        ConfigValue::Str(v.extract()?)
    } else {
        return Err(PyTypeError::new_err(format!(
            "config `{key}`: expected bool, int, float or str, got {}",
            v.get_type().name()?
        )));
    }))
}

fn config_to_py<'py>(py: Python<'py>, v: &ConfigValue) -> PyResult<Bound<'py, PyAny>> {
    Ok(match v {
        ConfigValue::Bool(b) => PyBool::new(py, *b).to_owned().into_any(),
        ConfigValue::Int(i) => i.into_pyobject(py)?.into_any(),
        ConfigValue::Float(f) => f.into_pyobject(py)?.into_any(),
        ConfigValue::Str(s) => s.into_pyobject(py)?.into_any(),
    })
}

impl PassContext {
    fn wrap(py: Python<'_>, inner: RContext) -> PyResult<Py<PassContext>> {
        let id = inner.id();
        let known = KNOWN.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, _, obj)) = known.iter().find(|(k, _, _)| *k == id) {
            return Ok(obj.clone_ref(py));
        }
        drop(known);
        Py::new(py, PassContext { inner, instruments: Mutex::new(Vec::new()) })
    }

    fn remember(slf: &Bound<'_, PassContext>) {
        let id = slf.get().inner.id();
        let mut known = KNOWN.lock().unwrap_or_else(|e| e.into_inner());
        match known.iter_mut().find(|(k, _, _)| *k == id) {
            Some(entry) => entry.1 += 1,
            None => known.push((id, 1, slf.clone().unbind())),
        }
    }

    fn forget(id: usize) {
        let mut known = KNOWN.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(pos) = known.iter().position(|(k, _, _)| *k == id) {
            known[pos].1 -= 1;
            if known[pos].1 == 0 {
                known.remove(pos);
            }
        }
    }

    /// The context a pass body was called under, as a Python object (the user's object when
    /// it is an entered one).
    pub(crate) fn for_callback(py: Python<'_>, ctx: &RContext) -> PyResult<Py<PassContext>> {
        PassContext::wrap(py, ctx.clone())
    }
}

#[pymethods]
impl PassContext {
    #[new]
    #[pyo3(signature = (opt_level=None, required_pass=None, disabled_pass=None, instruments=None, config=None, num_threads=None))]
    fn new(
        py: Python<'_>,
        opt_level: Option<&Bound<'_, PyAny>>,
        required_pass: Option<&Bound<'_, PyAny>>,
        disabled_pass: Option<&Bound<'_, PyAny>>,
        instruments: Option<Vec<Bound<'_, PyAny>>>,
        config: Option<&Bound<'_, PyDict>>,
        num_threads: Option<usize>,
    ) -> PyResult<PassContext> {
        let bad_level = |what: String| errors::passel_error(py, errors::Kind::Value, what);
        let default_level = 2i64.into_pyobject(py)?.into_any();
        let opt_level = opt_level.unwrap_or(&default_level);
        if opt_level.is_instance_of::<pyo3::types::PyBool>() || !opt_level.is_instance_of::<pyo3::types::PyInt>() {
            return Err(errors::passel_error(
                py,
                errors::Kind::Type,
                format!("opt_level must be an int, got {}", opt_level.get_type().name()?),
            ));
        }
        let level: i64 =
            opt_level.extract().map_err(|_| bad_level(format!("opt_level must be between 0 and {}", u32::MAX)))?;
        let level = u32::try_from(level)
            .map_err(|_| bad_level(format!("opt_level must be between 0 and {}, got {level}", u32::MAX)))?;
        // TVM raises at the pass that finds a type error (its diagnostic context renders and
        // throws); the engine does that under `errors_fail_pass`.
        let mut b = RContext::builder().opt_level(level).errors_fail_pass(true);
        for name in pass_names(py, "required_pass", required_pass)? {
            b = b.require(&name);
        }
        for name in pass_names(py, "disabled_pass", disabled_pass)? {
            b = b.disable(&name);
        }
        if let Some(config) = config {
            for (k, v) in config.iter() {
                let key: String = k.extract()?;
                b = b.config_entry(&key, config_value(&key, &v)?);
            }
        }
        let instruments = instruments.unwrap_or_default();
        for inst in &instruments {
            b = b.instrument(to_instrument(inst)?);
        }
        if let Some(n) = num_threads {
            b = b.num_threads(n);
        }
        let inner = b.build().map_err(|e| Python::attach(|py| errors::pass_err(py, e)))?;
        Ok(PassContext { inner, instruments: Mutex::new(instruments.into_iter().map(Bound::unbind).collect()) })
    }

    /// The innermost context entered on this thread, else this thread's default context.
    #[staticmethod]
    fn current(py: Python<'_>) -> PyResult<Py<PassContext>> {
        PassContext::wrap(py, RContext::current())
    }

    /// Every registered config key and its type name (``"bool"``, ``"int"``, ``"float"``,
    /// ``"string"``), sorted by key.
    #[staticmethod]
    fn list_configs<'py>(py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        for k in list_configs() {
            let entry = PyDict::new(py);
            entry.set_item("type", k.ty.name())?;
            entry.set_item("doc", k.doc_with_range())?;
            d.set_item(k.key, entry)?;
        }
        Ok(d)
    }

    /// The opt level.
    #[getter]
    fn opt_level(&self) -> u32 {
        self.inner.opt_level()
    }

    /// Passes run regardless of opt level (unless disabled), skipping ``should_run``.
    #[getter]
    fn required_pass(&self) -> Vec<String> {
        self.inner.required_pass().to_vec()
    }

    /// Passes a ``Sequential`` never runs.
    #[getter]
    fn disabled_pass(&self) -> Vec<String> {
        self.inner.disabled_pass().to_vec()
    }

    /// Worker threads for function passes.
    #[getter]
    fn num_threads(&self) -> usize {
        self.inner.num_threads()
    }

    /// The config, validated, as a dict.
    #[getter(config)]
    fn config_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        for (k, v) in self.inner.config() {
            d.set_item(k, config_to_py(py, v)?)?;
        }
        Ok(d)
    }

    /// The config value of ``key``, or ``default`` when it is not set.
    #[pyo3(signature = (key, default=None))]
    fn get_config<'py>(
        &self,
        py: Python<'py>,
        key: &str,
        default: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        match self.inner.config().get(key) {
            Some(v) => config_to_py(py, v),
            None => Ok(default.unwrap_or_else(|| py.None().into_bound(py))),
        }
    }

    /// The instruments (empty after a failed enter or exit cleared them, as in TVM).
    #[getter]
    fn instruments(&self, py: Python<'_>) -> Vec<Py<PyAny>> {
        if self.inner.instruments().is_empty() {
            return Vec::new();
        }
        self.instruments.lock().unwrap_or_else(|e| e.into_inner()).iter().map(|o| o.clone_ref(py)).collect()
    }

    /// Diagnostics emitted so far under this context, as strings, each distinct one once (a
    /// type error is found again by every InferType a pipeline runs).
    fn diagnostics(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for text in self.inner.diagnostics().snapshot().iter().map(crate::transform::diagnostic_text) {
            if !out.contains(&text) {
                out.push(text);
            }
        }
        out
    }

    /// Exits the current instruments, replaces them by ``instruments`` and enters those
    /// (TVM's ``override_instruments``); on a thread's default context the change persists.
    fn override_instruments(slf: &Bound<'_, PassContext>, instruments: Vec<Bound<'_, PyAny>>) -> PyResult<()> {
        let py = slf.py();
        let insts = instruments.iter().map(to_instrument).collect::<PyResult<Vec<Arc<dyn Instrument>>>>()?;
        *slf.get().instruments.lock().unwrap_or_else(|e| e.into_inner()) =
            instruments.into_iter().map(Bound::unbind).collect();
        PassContext::remember(slf);
        let ctx = slf.get().inner.clone();
        errors::run_detached(py, move || ctx.override_instruments(insts))
    }

    fn __enter__(slf: &Bound<'_, PassContext>) -> PyResult<Py<PassContext>> {
        let py = slf.py();
        let ctx = slf.get().inner.clone();
        errors::run_detached(py, move || ctx.enter().map(|guard| guard.keep()))?;
        PassContext::remember(slf);
        Ok(slf.clone().unbind())
    }

    fn __exit__(
        slf: &Bound<'_, PassContext>,
        _exc_type: Option<Bound<'_, PyAny>>,
        _exc: Option<Bound<'_, PyAny>>,
        _tb: Option<Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        let py = slf.py();
        let ctx = slf.get().inner.clone();
        let res = errors::run_detached(py, move || ctx.exit());
        PassContext::forget(slf.get().inner.id());
        res.map(|()| false)
    }

    fn __eq__(&self, other: &Bound<'_, PyAny>) -> bool {
        other.extract::<PyRef<'_, PassContext>>().is_ok_and(|o| o.inner.id() == self.inner.id())
    }

    fn __hash__(&self) -> u64 {
        self.inner.id() as u64
    }

    fn __repr__(&self) -> String {
        format!(
            "PassContext(opt_level={}, required_pass={:?}, disabled_pass={:?}, num_threads={})",
            self.inner.opt_level(),
            self.inner.required_pass(),
            self.inner.disabled_pass(),
            self.inner.num_threads()
        )
    }
}

/// A pass of the engine as a Python object (``passel.transform.Pass`` wraps it): a
/// registered Rust pass, a ``Sequential``, or a pass whose body is a Python callable.
#[pyclass(module = "passel._passel", frozen)]
#[derive(Clone)]
pub struct PassHandle {
    pub(crate) inner: Arc<dyn RPass>,
}

#[pymethods]
impl PassHandle {
    /// The pass's ``PassInfo``.
    #[getter]
    fn info(&self) -> PassInfo {
        PassInfo::of(self.inner.info())
    }

    /// ``"module"``, ``"function"`` or ``"sequential"``.
    #[getter]
    fn kind(&self) -> String {
        self.inner.kind().to_string()
    }

    /// Runs the pass on ``module`` under ``ctx`` (default: the current context), with the
    /// GIL released while Rust code runs.
    #[pyo3(signature = (module, ctx=None))]
    fn run(&self, py: Python<'_>, module: PyRef<'_, Module>, ctx: Option<PyRef<'_, PassContext>>) -> PyResult<Module> {
        let pass = self.inner.clone();
        let m = module.inner.clone();
        let ctx = ctx.map(|c| c.inner.clone()).unwrap_or_else(RContext::current);
        let reported_before = ctx.diagnostics().len();
        let run_ctx = ctx.clone();
        // Under a context made in Python (`errors_fail_pass`), the pass that reports an error
        // fails and the run stops there, as in TVM; under the engine's default context (no
        // `with PassContext(…)`) the run goes on and the error is raised when it returns.
        // Either way it is raised here with the diagnostic's text and place, each distinct
        // error the run reported once.
        let out = errors::run_detached(py, move || match pass.run(m, &run_ctx) {
            Ok(out) => Ok(Ok(out)),
            Err(RPassError::ErrorReported { diagnostic, .. }) => Ok(Err(diagnostic)),
            Err(e) => Err(e),
        })?;
        if let Some(first) = ctx.diagnostics().first_error_from(reported_before) {
            let errors = ctx.diagnostics().snapshot().split_off(reported_before);
            let mut distinct: Vec<String> = Vec::new();
            for d in errors.iter().filter(|d| d.severity == passel_engine::transform::Severity::Error) {
                let text = located_text(d, &module);
                if !distinct.contains(&text) {
                    distinct.push(text);
                }
            }
            let more = match distinct.len() {
                0 | 1 => String::new(),
                n => format!("\n{}", distinct[1..n].join("\n")),
            };
            return Err(errors::diagnostic_error(format!("{}{more}", located_text(&first, &module))));
        }
        out.map(Module::of).map_err(|d| errors::diagnostic_error(located_text(&d, &module)))
    }

    /// The pipeline text of a ``Sequential`` (``print_pipeline``), else the pass name.
    fn pipeline_text(&self) -> String {
        match self.inner.as_sequential() {
            Some(seq) => print_pipeline(seq),
            None => self.inner.info().name.clone(),
        }
    }

    /// The handles of a ``Sequential``'s passes (empty for other kinds).
    fn children(&self) -> Vec<PassHandle> {
        self.inner
            .as_sequential()
            .map(|s| s.passes().iter().map(|p| PassHandle { inner: p.clone() }).collect())
            .unwrap_or_default()
    }

    fn __repr__(&self) -> String {
        format!("<{} pass {}>", self.inner.kind(), self.inner.info().name)
    }
}

pub(crate) fn required_refs(required: &[String]) -> Vec<&str> {
    required.iter().map(String::as_str).collect()
}

/// Calls a Python pass body: attaches, checks for Ctrl-C, converts the exception.
pub(crate) fn call_python<T>(what: &str, f: impl FnOnce(Python<'_>) -> PyResult<T>) -> Result<T, RPassError> {
    if errors::cancelled() {
        return Err(RPassError::msg(errors::cancelled_message()));
    }
    keep_thread_state();
    Python::attach(|py| {
        let res = py.check_signals().and_then(|()| f(py));
        res.map_err(|e| RPassError::msg(errors::record(py, e, what)))
    })
}

/// Gives a thread that Python does not know (an engine worker) a Python thread state that
/// lives as long as the thread. Python passes run on the calling thread, which Python knows,
/// so this is a guard for callbacks reached from elsewhere (a Rust caller's own threads). Without it every `Python::attach` on a worker creates and
/// destroys a thread state, which costs more than a trivial pass body.
fn keep_thread_state() {
    thread_local! {
        static CHECKED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    }
    if CHECKED.with(|c| c.replace(true)) {
        return;
    }
    // SAFETY: called without the GIL (the engine calls pass bodies from detached code).
    // `PyGILState_GetThisThreadState` only reads this thread's state. When the thread has
    // none, `PyGILState_Ensure` creates one and takes the GIL, and `PyEval_SaveThread`
    // releases the GIL again while the state stays registered for the thread with a
    // gilstate count of one, so later `PyGILState_Ensure` / `Release` pairs (what
    // `Python::attach` does) reuse it instead of deleting it. Threads Python created already
    // have a state and are left alone.
    unsafe {
        if pyo3::ffi::PyGILState_GetThisThreadState().is_null() {
            pyo3::ffi::PyGILState_Ensure();
            pyo3::ffi::PyEval_SaveThread();
        }
    }
}

/// The names given as ``required_pass`` / ``disabled_pass``: one name as a string, or a list
/// (or any iterable) of strings.
fn pass_names(py: Python<'_>, what: &str, names: Option<&Bound<'_, PyAny>>) -> PyResult<Vec<String>> {
    let Some(names) = names else { return Ok(Vec::new()) };
    if names.is_none() {
        return Ok(Vec::new());
    }
    if let Ok(one) = names.cast::<pyo3::types::PyString>() {
        return Ok(vec![one.extract::<String>()?]);
    }
    let refused = || {
        errors::passel_error(
            py,
            errors::Kind::Type,
            format!(
                "{what} must be a pass name or a list of pass names, got {}",
                names.get_type().name().map(|n| n.to_string()).unwrap_or_default()
            ),
        )
    };
    let mut out = Vec::new();
    for item in names.try_iter().map_err(|_| refused())? {
        let item = item?;
        out.push(item.extract::<String>().map_err(|_| refused())?);
    }
    Ok(out)
}

/// Refuses a pass that changed the module it was given in place (``mod[name] = f`` on its
/// argument) under ``testing.immutable_module``. The engine's own check hashes its copy of
/// the input, which a Python module object never shares (Rust modules are values), so the
/// adapter asks the object it handed to the body (its mutating methods mark it, O(1)) and
/// reports the engine's error.
pub(crate) fn check_input_unchanged(changed_in_place: bool, ctx: &RContext, pass: &str) -> Result<(), RPassError> {
    if changed_in_place && ctx.get_config(IMMUTABLE_MODULE, false) {
        return Err(RPassError::ImmutableModuleModified { pass: pass.to_string() });
    }
    Ok(())
}

/// A function pass whose body calls ``body(func, mod, ctx)`` per function, which must return
/// a ``Function`` (the same object when it changes nothing).
#[pyfunction]
#[pyo3(signature = (name, opt_level, required, body))]
fn py_function_pass(name: &str, opt_level: u32, required: Vec<String>, body: Py<PyAny>) -> PassHandle {
    let label = format!("function pass {name}");
    let pass_name = name.to_string();
    // The context object handed to the body, made once per context rather than per function.
    let ctx_cache: Mutex<Option<(usize, Py<PassContext>)>> = Mutex::new(None);
    let pass = function_pass(name, opt_level, move |func: Arc<RFunction>, module: &RModule, ctx: &RContext| {
        let (out, changed_in_place) = call_python(&label, |py| {
            let f = Function { inner: func };
            let m = Py::new(py, Module::of(module.clone()))?;
            let c = {
                let mut cache = ctx_cache.lock().unwrap_or_else(|e| e.into_inner());
                match &*cache {
                    Some((id, obj)) if *id == ctx.id() => obj.clone_ref(py),
                    _ => {
                        let obj = PassContext::for_callback(py, ctx)?;
                        *cache = Some((ctx.id(), obj.clone_ref(py)));
                        obj
                    }
                }
            };
            let out = body.call1(py, (f, m.clone_ref(py), c))?;
            let out = out.bind(py);
            let changed_in_place = m.borrow(py).changed_in_place;
            match out.extract::<PyRef<'_, Function>>() {
                Ok(f) => Ok((f.inner.clone(), changed_in_place)),
                Err(_) => Err(errors::passel_error(
                    py,
                    errors::Kind::Type,
                    format!("a function pass must return a passel.ir.Function, got {}", out.get_type().name()?),
                )),
            }
        })?;
        check_input_unchanged(changed_in_place, ctx, &pass_name)?;
        Ok(out)
    })
    .with_required(&required_refs(&required))
    .on_calling_thread();
    PassHandle { inner: pass.shared() }
}

/// A module pass whose body calls ``body(mod, ctx)``, which must return a ``Module``.
#[pyfunction]
#[pyo3(signature = (name, opt_level, required, body))]
fn py_module_pass(name: &str, opt_level: u32, required: Vec<String>, body: Py<PyAny>) -> PassHandle {
    let label = format!("module pass {name}");
    let pass_name = name.to_string();
    let pass = module_pass(name, opt_level, move |module: RModule, ctx: &RContext| {
        let (out, changed_in_place) = call_python(&label, |py| {
            let m = Py::new(py, Module::of(module.clone()))?;
            let c = PassContext::for_callback(py, ctx)?;
            let out = body.call1(py, (m.clone_ref(py), c))?;
            let out = out.bind(py);
            let changed_in_place = m.borrow(py).changed_in_place;
            match out.extract::<PyRef<'_, Module>>() {
                Ok(m) => Ok((m.inner.clone(), changed_in_place)),
                Err(_) => Err(errors::passel_error(
                    py,
                    errors::Kind::Type,
                    format!("a module pass must return a passel.ir.Module, got {}", out.get_type().name()?),
                )),
            }
        })?;
        check_input_unchanged(changed_in_place, ctx, &pass_name)?;
        Ok(out)
    })
    .with_required(&required_refs(&required));
    PassHandle { inner: pass.shared() }
}

/// The names of the standard pipeline that ``passel run -O N`` runs, in order (each pass's
/// own opt level decides whether it runs at ``-O N``).
#[pyfunction]
fn standard_pipeline() -> Vec<&'static str> {
    passel_passes::STANDARD_PIPELINE.to_vec()
}

/// A ``Sequential`` of ``passes`` (default opt level 0, name ``"sequential"``).
#[pyfunction]
#[pyo3(signature = (passes, opt_level=0, name="sequential", required=None))]
fn sequential(
    passes: Vec<PyRef<'_, PassHandle>>,
    opt_level: u32,
    name: &str,
    required: Option<Vec<String>>,
) -> PassHandle {
    let seq = Sequential::new(name, passes.iter().map(|p| p.inner.clone()).collect())
        .with_opt_level(opt_level)
        .with_required(&required_refs(&required.unwrap_or_default()));
    PassHandle { inner: seq.shared() }
}

/// The registered pass ``name`` (TVM spelling ``FoldConstant`` or CLI ``fold-constant``).
/// Raises ``passel.PassError`` naming close names for an unknown one.
#[pyfunction]
fn registered_pass(py: Python<'_>, name: &str) -> PyResult<PassHandle> {
    get_pass(name).map(|inner| PassHandle { inner }).map_err(|e| errors::pass_err(py, e))
}

/// Every registered pass as ``(name, kind, opt_level, required)``, sorted by name.
#[pyfunction]
fn registered_passes() -> Vec<(String, String, u32, Vec<String>)> {
    list_passes().into_iter().map(|p| (p.name, p.kind.to_string(), p.opt_level, p.required)).collect()
}

/// Parses a textual pipeline such as ``"FoldConstant,[EliminateCommonSubexpr,DeadCodeElimination]"``
/// into a ``Sequential`` of registered passes.
#[pyfunction]
fn pipeline(py: Python<'_>, text: &str) -> PyResult<PassHandle> {
    parse_pipeline(text).map(|s| PassHandle { inner: s.shared() }).map_err(|e| errors::pass_err(py, e))
}

/// Writes to Python's ``sys.stderr`` (so pytest's ``capsys`` and notebooks see it).
struct PyStderr;

impl Write for PyStderr {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let text = String::from_utf8_lossy(buf).into_owned();
        Python::attach(|py| {
            py.import("sys")
                .and_then(|sys| sys.getattr("stderr"))
                .and_then(|err| err.call_method1("write", (text,)))
                .map(|_| ())
                .map_err(|e| std::io::Error::other(e.to_string()))
        })?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// TVM's ``PrintIR(header)``: a module pass at opt level 0 that writes
/// ``PrintIR(<header>):`` and the module to ``sys.stderr`` and returns the module unchanged.
#[pyfunction]
#[pyo3(signature = (header=""))]
fn print_ir(header: &str) -> PassHandle {
    let sink: passel_engine::transform::Sink = Arc::new(Mutex::new(PyStderr));
    PassHandle { inner: Arc::new(PrintIr::to_sink(header, sink)) }
}

/// A diagnostic as one line: `warning in pass P on @f: message`.
pub(crate) fn diagnostic_text(d: &passel_engine::transform::Diagnostic) -> String {
    let severity = match d.severity {
        passel_engine::transform::Severity::Warning => "warning",
        passel_engine::transform::Severity::Error => "error",
    };
    let func = d.function.as_ref().map(|f| format!(" on @{f}")).unwrap_or_default();
    format!("{severity} in pass {}{func}: {}", d.pass, d.message)
}

/// A diagnostic's text with its place: ``line:col`` in the text the run's input was parsed
/// from, when it has a span there.
fn located_text(d: &passel_engine::transform::Diagnostic, input: &Module) -> String {
    let text = diagnostic_text(d);
    match d.span.filter(|s| s.end > 0).and_then(|s| input.location(s.start)) {
        Some(at) => format!("{at}: {text}"),
        None => text,
    }
}

/// Benchmark baseline: runs ``pass_`` on ``module`` ``repeats`` times entirely inside Rust
/// (one boundary crossing for all runs) and returns the best wall time in seconds, to compare
/// with calling the same pass from Python (``python/bench/overhead.py``).
#[pyfunction]
#[pyo3(signature = (pass_, module, ctx, repeats=3))]
fn time_in_rust(
    py: Python<'_>,
    pass_: PyRef<'_, PassHandle>,
    module: PyRef<'_, Module>,
    ctx: PyRef<'_, PassContext>,
    repeats: usize,
) -> PyResult<f64> {
    let pass = pass_.inner.clone();
    let m = module.inner.clone();
    let ctx = ctx.inner.clone();
    errors::run_detached(py, move || {
        let mut best = f64::INFINITY;
        for _ in 0..repeats.max(1) {
            let start = std::time::Instant::now();
            let out = pass.run(m.clone(), &ctx)?;
            best = best.min(start.elapsed().as_secs_f64());
            drop(out);
        }
        Ok::<f64, RPassError>(best)
    })
}
