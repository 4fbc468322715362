//! Incremental sessions for Python: the engine's `Session` behind a lock, run with the GIL
//! released. `passel/session.py` adds the Python-pass version rule on top.
//!
//! `Session(cache=…)` keeps stage results in the persistent cache (a directory, or a Redis
//! server with a directory in front) of passel-cache, the same store as `passel run --cache`.

use std::path::PathBuf;
use std::sync::Mutex;

use passel_cache::{Cache, CacheLocation, DEFAULT_MAX_SIZE};
use passel_engine::ir::{parse_module, verify_module};
use passel_engine::transform::Sequential;
use passel_engine::{RunStats, Session as RSession};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::errors::{self, ParseError};
use crate::ir::{Function, Module};
use crate::transform::{PassContext, PassHandle};

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<SessionHandle>()?;
    m.add_class::<StageStats>()?;
    Ok(())
}

fn as_sequential(pass: &PassHandle) -> Sequential {
    match pass.inner.as_sequential() {
        Some(seq) => seq.clone(),
        None => Sequential::unnamed(vec![pass.inner.clone()]),
    }
}

/// What one stage did in a session run.
#[pyclass(module = "passel", frozen, get_all)]
#[derive(Clone)]
pub struct StageStats {
    /// The stage's passes, comma-separated.
    label: String,
    /// Whether it is a module pass (a barrier) rather than a run of function passes.
    is_module_pass: bool,
    /// Functions whose stage was computed in this run, in module order.
    recomputed: Vec<String>,
    /// How many functions reused an earlier result.
    reused: usize,
    /// Wall time of the stage, in seconds.
    seconds: f64,
}

#[pymethods]
impl StageStats {
    fn __repr__(&self) -> String {
        format!("StageStats({:?}, recomputed={:?}, reused={})", self.label, self.recomputed, self.reused)
    }
}

fn stats(s: &RunStats) -> Vec<StageStats> {
    s.stages
        .iter()
        .map(|st| StageStats {
            label: st.label.clone(),
            is_module_pass: st.is_module_pass,
            recomputed: st.recomputed.iter().map(|n| n.to_string()).collect(),
            reused: st.reused,
            seconds: st.time.as_secs_f64(),
        })
        .collect()
}

/// The native session (``passel.Session`` wraps it).
#[pyclass(module = "passel._passel", frozen)]
pub struct SessionHandle {
    inner: Mutex<RSession>,
    /// The persistent cache, when the session was given one.
    cache: Option<Cache>,
}

/// Opens the cache `spec` (a directory, or `redis://…` with the directory `local` in front)
/// for the code of this extension module, so entries made by another build of it are never
/// used (the executable is the Python interpreter, which says nothing about the passes).
fn open_cache(py: Python<'_>, spec: &str, local: Option<PathBuf>) -> PyResult<Cache> {
    let location = CacheLocation::from_spec(spec, local).map_err(|e| PyValueError::new_err(e.to_string()))?;
    let code: PathBuf = py.import("passel._passel")?.getattr("__file__")?.extract()?;
    Cache::open_for_code(&location, DEFAULT_MAX_SIZE, &code).map_err(|e| PyValueError::new_err(e.to_string()))
}

impl SessionHandle {
    fn with<T>(&self, f: impl FnOnce(&mut RSession) -> T) -> PyResult<T> {
        // try_lock: another Python thread waiting here with the GIL held while a run's Python
        // pass waits for the GIL would deadlock.
        let mut g =
            self.inner.try_lock().map_err(|_| PyValueError::new_err("the session is busy (a run is in progress)"))?;
        Ok(f(&mut g))
    }
}

#[pymethods]
impl SessionHandle {
    #[new]
    #[pyo3(signature = (pipeline, ctx=None, cache=None, cache_local=None))]
    fn new(
        py: Python<'_>,
        pipeline: PyRef<'_, PassHandle>,
        ctx: Option<PyRef<'_, PassContext>>,
        cache: Option<&str>,
        cache_local: Option<PathBuf>,
    ) -> PyResult<SessionHandle> {
        let seq = as_sequential(&pipeline);
        let ctx = ctx.map(|c| c.inner.clone()).unwrap_or_else(passel_engine::PassContext::current);
        let mut s = RSession::new(seq, &ctx).map_err(|e| errors::to_py(py, e))?;
        let cache = cache.map(|spec| open_cache(py, spec, cache_local)).transpose()?;
        if let Some(c) = &cache {
            s.set_store(Some((c.store.clone(), c.build.clone()))).map_err(|e| errors::to_py(py, e))?;
        }
        Ok(SessionHandle { inner: Mutex::new(s), cache })
    }

    /// What the cache did since the session was made: ``(hits, misses, rejected, bytes
    /// written)`` of its directory (with a remote tier, a local miss the server answered is a
    /// hit), or ``None`` without a cache.
    fn cache_counts(&self) -> Option<(usize, usize, usize, u64)> {
        let c = self.cache.as_ref()?;
        let (hits, misses, rejected, written) = c.disk.counts();
        let remote = c.remote.as_ref().map_or(0, |r| r.counts().0);
        Some((hits + remote, misses.saturating_sub(remote), rejected, written))
    }

    /// Replaces the pipeline; stages whose passes did not change keep their results.
    fn set_pipeline(&self, py: Python<'_>, pipeline: PyRef<'_, PassHandle>) -> PyResult<()> {
        let seq = as_sequential(&pipeline);
        self.with(|s| s.set_pipeline(seq))?.map_err(|e| errors::to_py(py, e))
    }

    /// Makes ``module`` the session's module; returns the names that changed or were added.
    fn load(&self, module: PyRef<'_, Module>) -> PyResult<Vec<String>> {
        let m = module.inner.clone();
        self.with(|s| s.load(&m).iter().map(|n| n.to_string()).collect())
    }

    /// Parses ``text`` and makes it the session's module (see ``load``).
    fn set_source(&self, py: Python<'_>, text: &str) -> PyResult<Vec<String>> {
        let text = text.to_string();
        let cache = self.cache.as_ref();
        // With a cache, only the functions whose text it has not seen are parsed (the CLI's
        // `--cache` path); text that shortcut does not take is parsed whole, with its errors.
        let m = py
            .detach(move || {
                match cache.and_then(|c| c.parse(&text, std::thread::available_parallelism().map_or(1, |n| n.get()))) {
                    Some((m, _)) if verify_module(&m).is_ok() => Ok(m),
                    _ => parse_module(&text),
                }
            })
            .map_err(|e| ParseError::new_err(e.to_string()))?;
        self.with(|s| s.load(&m).iter().map(|n| n.to_string()).collect())
    }

    /// Sets (or adds) function ``name``; returns whether anything changed.
    fn set_function(&self, name: &str, func: PyRef<'_, Function>) -> PyResult<bool> {
        let f = func.inner.clone();
        self.with(|s| s.set_function(name.trim_start_matches('@'), f))
    }

    /// Removes function ``name``.
    fn remove_function(&self, py: Python<'_>, name: &str) -> PyResult<()> {
        self.with(|s| s.remove_function(name.trim_start_matches('@')))?.map_err(|e| errors::to_py(py, e))
    }

    /// The session's current (unoptimised) module.
    fn module(&self) -> PyResult<Module> {
        self.with(|s| Module::of(s.module()))
    }

    /// Runs the pipeline, recomputing only what changed. Returns ``(module, diagnostics,
    /// stages)``.
    fn run(&self, py: Python<'_>) -> PyResult<(Module, Vec<String>, Vec<StageStats>)> {
        let out = errors::run_detached(py, || {
            let mut g = self.inner.try_lock().map_err(|_| "the session is busy (a run is in progress)".to_string())?;
            g.run().map_err(|e| e.to_string())
        })?;
        Ok((
            Module::of(out.module),
            out.diagnostics.iter().map(crate::transform::diagnostic_text).collect(),
            stats(&out.stats),
        ))
    }
}
