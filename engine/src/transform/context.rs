//! `PassContext`: opt level, required / disabled passes, typed config, diagnostics and
//! instruments, entered as a per-thread scope.
//!
//! Invariant: each thread has its own stack of entered contexts and its own default context;
//! [`PassContext::current`] never sees another thread's scopes (rule 2).

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::marker::PhantomData;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use super::bisect::OptBisect;
use super::config::{validate_config, ConfigValue, FromConfigValue};
use super::diagnostics::{Diagnostic, DiagnosticSink};
use super::error::{ContextError, PassError};
use super::fanout::{map_entries, map_items, release};
use super::info::PassInfo;
use super::instrument::{enter_all, exit_all, Instrument};
use super::statistics::{Statistic, Statistics};
use super::trace::Tracer;
use crate::ir::{Function, Module};

struct Inner {
    opt_level: u32,
    required_pass: Vec<String>,
    disabled_pass: Vec<String>,
    config: BTreeMap<String, ConfigValue>,
    num_threads: usize,
    trace: Option<Tracer>,
    statistics: bool,
    bisect: Option<Arc<OptBisect>>,
    errors_fail: bool,
    // Mutable because a failing enter/exit clears the list and `override_instruments`
    // replaces it; callbacks run on a snapshot, never under the lock.
    instruments: Mutex<Vec<Arc<dyn Instrument>>>,
}

/// The settings passes run under. Clones are cheap and share everything; a worker copy made
/// with [`PassContext::worker_copy`] has its own diagnostics buffer.
#[derive(Clone)]
pub struct PassContext {
    inner: Arc<Inner>,
    diagnostics: DiagnosticSink,
}

impl std::fmt::Debug for PassContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PassContext")
            .field("opt_level", &self.inner.opt_level)
            .field("required_pass", &self.inner.required_pass)
            .field("disabled_pass", &self.inner.disabled_pass)
            .field("config", &self.inner.config)
            .field("num_threads", &self.inner.num_threads)
            .field("instruments", &self.instruments().iter().map(|i| i.name().to_string()).collect::<Vec<_>>())
            .finish()
    }
}

thread_local! {
    static STACK: RefCell<Vec<PassContext>> = const { RefCell::new(Vec::new()) };
    static DEFAULT: RefCell<Option<PassContext>> = const { RefCell::new(None) };
}

impl Default for PassContext {
    fn default() -> PassContext {
        PassContext::new_unchecked(PassContextBuilder::default(), BTreeMap::new())
    }
}

impl PassContext {
    /// A builder with the defaults (opt level 2, all cores, no config, no instruments).
    pub fn builder() -> PassContextBuilder {
        PassContextBuilder::default()
    }

    fn new_unchecked(b: PassContextBuilder, config: BTreeMap<String, ConfigValue>) -> PassContext {
        PassContext {
            inner: Arc::new(Inner {
                opt_level: b.opt_level,
                required_pass: b.required_pass,
                disabled_pass: b.disabled_pass,
                config,
                num_threads: b.num_threads.unwrap_or_else(default_threads).min(MAX_THREADS),
                trace: b.trace,
                statistics: b.statistics,
                bisect: b.bisect,
                errors_fail: b.errors_fail,
                instruments: Mutex::new(b.instruments),
            }),
            diagnostics: DiagnosticSink::new(),
        }
    }

    /// The innermost context entered on this thread, else this thread's default context.
    pub fn current() -> PassContext {
        if let Some(top) = STACK.with(|s| s.borrow().last().cloned()) {
            return top;
        }
        DEFAULT.with(|d| d.borrow_mut().get_or_insert_with(PassContext::default).clone())
    }

    /// The opt level.
    pub fn opt_level(&self) -> u32 {
        self.inner.opt_level
    }

    /// Passes that run regardless of opt level (unless disabled) and skip `should_run`.
    pub fn required_pass(&self) -> &[String] {
        &self.inner.required_pass
    }

    /// Passes a `Sequential` never runs.
    pub fn disabled_pass(&self) -> &[String] {
        &self.inner.disabled_pass
    }

    /// Worker threads for function passes (1 = serial).
    pub fn num_threads(&self) -> usize {
        self.inner.num_threads
    }

    /// The tracer that per-function tasks report to, if tracing.
    pub fn tracer(&self) -> Option<&Tracer> {
        self.inner.trace.as_ref()
    }

    /// The validated config, sorted by key.
    pub fn config(&self) -> &BTreeMap<String, ConfigValue> {
        &self.inner.config
    }

    /// The value of `key`, or `default` when it is absent (or of another type).
    pub fn get_config<T: FromConfigValue>(&self, key: &str, default: T) -> T {
        self.inner.config.get(key).and_then(T::from_config).unwrap_or(default)
    }

    /// This context's diagnostics.
    pub fn diagnostics(&self) -> &DiagnosticSink {
        &self.diagnostics
    }

    /// Reports a diagnostic.
    pub fn emit(&self, diag: Diagnostic) {
        self.diagnostics.emit(diag)
    }

    /// Whether passes count their statistics ([`crate::transform::Statistic::add`]).
    pub fn collects_statistics(&self) -> bool {
        self.inner.statistics
    }

    /// Whether an error diagnostic fails the pass that reported it
    /// ([`PassContextBuilder::errors_fail_pass`]).
    pub fn errors_fail_pass(&self) -> bool {
        self.inner.errors_fail
    }

    /// The statistic totals counted into this context so far (a worker copy's counts are
    /// merged here by the executor once the serial order reaches them).
    pub fn statistics(&self) -> Statistics {
        self.diagnostics.statistics()
    }

    /// Removes and returns the statistic totals so far.
    pub fn take_statistics(&self) -> Statistics {
        self.diagnostics.take_statistics()
    }

    /// Adds a worker copy's counts to this context's.
    pub fn merge_statistics(&self, stats: &Statistics) {
        self.diagnostics.merge_statistics(stats)
    }

    /// The opt-bisect state, when the context runs only the first N pass executions.
    pub fn opt_bisect(&self) -> Option<&OptBisect> {
        self.inner.bisect.as_deref()
    }

    /// The bisect state that applies to `info` under this context: none when not bisecting or
    /// when the pass is required or at opt level 0 (see `bisect.rs`).
    pub(crate) fn bisect_for(&self, info: &PassInfo) -> Option<&OptBisect> {
        self.opt_bisect().filter(|_| !self.is_required(&info.name) && info.opt_level > 0)
    }

    /// A snapshot of the instrument list.
    pub fn instruments(&self) -> Vec<Arc<dyn Instrument>> {
        self.lock_instruments().clone()
    }

    /// Whether any instrument is attached (then function stages run pass by pass, each hook in
    /// TVM's order around its own pass; see the executor).
    pub fn has_instruments(&self) -> bool {
        !self.lock_instruments().is_empty()
    }

    fn lock_instruments(&self) -> std::sync::MutexGuard<'_, Vec<Arc<dyn Instrument>>> {
        self.inner.instruments.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Rule 12: disabled beats required, required beats opt level.
    pub fn pass_enabled(&self, info: &PassInfo) -> bool {
        if self.inner.disabled_pass.contains(&info.name) {
            false
        } else if self.is_required(&info.name) {
            true
        } else {
            self.inner.opt_level >= info.opt_level
        }
    }

    /// Whether `name` is in `required_pass`.
    pub fn is_required(&self, name: &str) -> bool {
        self.inner.required_pass.iter().any(|p| p == name)
    }

    /// An identity shared by this context, its clones and its worker copies, stable while any
    /// of them lives. Frontends use it to find the object a context was built from.
    pub fn id(&self) -> usize {
        Arc::as_ptr(&self.inner) as usize
    }

    /// A copy for a parallel worker: shares config and instruments, has its own diagnostics.
    pub fn worker_copy(&self) -> PassContext {
        PassContext { inner: self.inner.clone(), diagnostics: DiagnosticSink::new() }
    }

    fn same(&self, other: &PassContext) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner) && self.diagnostics.same_as(&other.diagnostics)
    }

    /// Enters the context on this thread (rule 3): every instrument's enter callback runs in
    /// order, then the context is pushed. The guard exits it when dropped; call
    /// [`ContextGuard::exit`] to see exit errors.
    pub fn enter(&self) -> Result<ContextGuard, PassError> {
        let insts = self.instruments();
        if let Err(e) = enter_all(&insts) {
            self.lock_instruments().clear();
            return Err(e);
        }
        STACK.with(|s| s.borrow_mut().push(self.clone()));
        Ok(ContextGuard { ctx: Some(self.clone()), _not_send: PhantomData })
    }

    /// Exits the context (rule 4): it must be the innermost one of this thread; it is popped,
    /// then every instrument's exit callback runs (rule 24 on failure).
    pub fn exit(&self) -> Result<(), PassError> {
        let popped = STACK.with(|s| {
            let mut s = s.borrow_mut();
            match s.last() {
                Some(top) if top.same(self) => s.pop().is_some(),
                _ => false,
            }
        });
        if !popped {
            return Err(ContextError::ExitOutOfOrder.into());
        }
        self.exit_instruments()
    }

    fn exit_instruments(&self) -> Result<(), PassError> {
        let insts = self.instruments();
        exit_all(&insts).inspect_err(|_| self.lock_instruments().clear())
    }

    /// Runs `f` inside the context. A panic in `f` still exits the context.
    pub fn scope<R>(&self, f: impl FnOnce() -> R) -> Result<R, PassError> {
        let guard = self.enter()?;
        let res = f();
        guard.exit()?;
        Ok(res)
    }

    /// Rule 26: exits the current instruments, replaces the list and enters the new ones, with
    /// the enter/exit failure rules. On a thread's default context the change persists.
    pub fn override_instruments(&self, new: Vec<Arc<dyn Instrument>>) -> Result<(), PassError> {
        self.exit_instruments()?;
        *self.lock_instruments() = new.clone();
        if let Err(e) = enter_all(&new) {
            self.lock_instruments().clear();
            return Err(e);
        }
        Ok(())
    }

    /// Calls `f` on every function of `module` with the executor's fan-out (`num_threads`
    /// workers on the cached pool; inline with 1) and returns the results in module order. For
    /// module passes whose per-function work is independent (InferType, DeadCodeElimination).
    ///
    /// Each call gets its own worker copy of this context (also what `current()` returns
    /// inside `f`); diagnostics emitted there get the function's name when they have none and
    /// are merged into this context in module order. An error from `f`, or a panic, names
    /// `pass` and the function; the first in module order is returned.
    pub fn map_functions<T: Send>(
        &self,
        pass: &str,
        module: &Module,
        f: impl Fn(&PassContext, &str, &Arc<Function>) -> Result<T, PassError> + Sync + Send,
    ) -> Result<Vec<T>, PassError> {
        let results = map_entries(self.num_threads(), module, |name, func| {
            let worker = self.worker_copy();
            let scope = worker.push_silently();
            let start = Instant::now();
            let res = match catch_unwind(AssertUnwindSafe(|| f(&worker, name, func))) {
                Ok(res) => res.map_err(|e| e.in_pass(pass, Some(name))),
                Err(payload) => Err(PassError::panicked(pass, Some(name), &*payload)),
            };
            if let Some(tracer) = self.tracer() {
                tracer.record(pass, name, start, start.elapsed());
            }
            drop(scope);
            worker.diagnostics().fill_function(name);
            (res, worker.diagnostics().take(), worker.take_statistics())
        });
        let mut out = Vec::with_capacity(results.len());
        let mut first_err = None;
        for (res, diags, stats) in results {
            for d in diags {
                self.emit(d);
            }
            self.merge_statistics(&stats);
            match res {
                Ok(v) => out.push(v),
                Err(e) => {
                    first_err.get_or_insert(e);
                }
            }
        }
        match first_err {
            Some(e) => Err(e),
            None => Ok(out),
        }
    }

    /// Calls `f` on every item with the executor's fan-out (`num_threads` workers on the
    /// cached pool; inline with 1) and returns the results in item order. For module passes
    /// whose work splits into independent pieces below the function level (LegalizeOps lowers
    /// each distinct operator call, FuseTIR builds each distinct group): the pass decides the
    /// pieces and merges the results in order, so its output does not depend on the thread
    /// count. `f` gets no worker context; a panic in it propagates to the caller, which the
    /// pass runner reports with the pass's name.
    pub fn map_items<I: Sync, T: Send>(&self, items: &[I], f: impl Fn(&I) -> T + Sync + Send) -> Vec<T> {
        map_items(self.num_threads(), items, f)
    }

    /// The cached worker pool of this context's thread count (`None` with one thread), for a
    /// function pass that spreads work inside one function (FoldConstant's kernels, CSE's
    /// constant comparisons): a model is one function, so the fan-out over functions leaves
    /// its workers idle. Inside a fan-out task the pool is the one running the task, so the
    /// inner work joins the outer work stealing. The pass must give the same output whatever
    /// the pool.
    pub fn workers(&self) -> Option<Arc<rayon::ThreadPool>> {
        match self.num_threads() {
            0 | 1 => None,
            n => super::fanout::pool(n),
        }
    }

    /// `module` with every function replaced by `new[i]` (names and order kept), as a function
    /// pass writes its results back. The replaced functions that nothing else holds are freed
    /// on the workers rather than one by one on this thread: with thousands of functions per
    /// stage, freeing their arenas serially is a measurable barrier.
    pub fn replace_functions(&self, mut module: Module, new: Vec<Arc<Function>>) -> Module {
        let old: Vec<Arc<Function>> = module.entries().iter().map(|(_, f)| Arc::clone(f)).collect();
        module.replace_all(new);
        release(self.num_threads(), old);
        module
    }

    /// Pushes a worker copy on this thread's stack without calling instruments, so that
    /// `current()` inside a parallel task returns the copy.
    pub(crate) fn push_silently(&self) -> SilentScope {
        STACK.with(|s| s.borrow_mut().push(self.clone()));
        SilentScope { ctx: self.clone(), _not_send: PhantomData }
    }
}

fn default_threads() -> usize {
    std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
}

/// Removes the last stack entry that is `ctx` (the top, unless scopes were leaked).
fn remove_from_stack(ctx: &PassContext) -> bool {
    STACK.with(|s| {
        let mut s = s.borrow_mut();
        match s.iter().rposition(|c| c.same(ctx)) {
            Some(i) => {
                s.remove(i);
                true
            }
            None => false,
        }
    })
}

/// An entered context; dropping it exits the context (ignoring exit errors).
#[must_use = "dropping the guard exits the context"]
pub struct ContextGuard {
    ctx: Option<PassContext>,
    _not_send: PhantomData<*const ()>,
}

impl ContextGuard {
    /// The entered context.
    pub fn context(&self) -> Option<&PassContext> {
        self.ctx.as_ref()
    }

    /// Leaves the context entered after the guard is gone: the caller must call
    /// [`PassContext::exit`] itself, on the same thread. For frontends whose scopes are not
    /// Rust lexical scopes (Python's `with` calls `__enter__` and `__exit__` separately).
    pub fn keep(mut self) {
        self.ctx = None;
    }

    /// Exits the context, reporting out-of-order exits and instrument exit failures. An
    /// out-of-order exit is reported and the context is then removed from the stack anyway
    /// (running its exit callbacks), so the thread's stack stays sound.
    pub fn exit(mut self) -> Result<(), PassError> {
        let Some(ctx) = self.ctx.take() else { return Ok(()) };
        let res = ctx.exit();
        if let Err(PassError::Context(ContextError::ExitOutOfOrder)) = res {
            if remove_from_stack(&ctx) {
                let _ = ctx.exit_instruments();
            }
        }
        res
    }
}

impl Drop for ContextGuard {
    fn drop(&mut self) {
        if let Some(ctx) = self.ctx.take() {
            // Drop cannot report errors. If the context is not on top (a leaked inner guard),
            // remove it anyway so the stack stays sound.
            if ctx.exit().is_err() && remove_from_stack(&ctx) {
                let _ = ctx.exit_instruments();
            }
        }
    }
}

/// A worker copy pushed without instrument callbacks.
pub(crate) struct SilentScope {
    ctx: PassContext,
    _not_send: PhantomData<*const ()>,
}

impl Drop for SilentScope {
    fn drop(&mut self) {
        remove_from_stack(&self.ctx);
    }
}

/// The most worker threads a context may ask for (the CLI's `-j` accepts the same range):
/// beyond it a thread pool would spawn threads until the process aborts.
pub const MAX_THREADS: usize = 1024;

/// The opt level of a context that names none (TVM's `PassContext` default), and of every
/// `passel` command that takes `-O`.
pub const DEFAULT_OPT_LEVEL: u32 = 2;

/// Builds a [`PassContext`], validating config entries.
pub struct PassContextBuilder {
    opt_level: u32,
    required_pass: Vec<String>,
    disabled_pass: Vec<String>,
    config: Vec<(String, Option<ConfigValue>)>,
    num_threads: Option<usize>,
    instruments: Vec<Arc<dyn Instrument>>,
    trace: Option<Tracer>,
    statistics: bool,
    bisect: Option<Arc<OptBisect>>,
    errors_fail: bool,
}

impl Default for PassContextBuilder {
    fn default() -> PassContextBuilder {
        PassContextBuilder {
            opt_level: DEFAULT_OPT_LEVEL,
            required_pass: Vec::new(),
            disabled_pass: Vec::new(),
            config: Vec::new(),
            num_threads: None,
            instruments: Vec::new(),
            trace: None,
            statistics: false,
            bisect: None,
            errors_fail: false,
        }
    }
}

impl PassContextBuilder {
    /// Sets the opt level (default [`DEFAULT_OPT_LEVEL`]).
    pub fn opt_level(mut self, level: u32) -> Self {
        self.opt_level = level;
        self
    }

    /// Adds a required pass.
    pub fn require(mut self, name: &str) -> Self {
        self.required_pass.push(name.to_string());
        self
    }

    /// Adds a disabled pass.
    pub fn disable(mut self, name: &str) -> Self {
        self.disabled_pass.push(name.to_string());
        self
    }

    /// Sets a config entry (checked by [`PassContextBuilder::build`]).
    pub fn config(self, key: &str, value: impl Into<ConfigValue>) -> Self {
        self.config_entry(key, Some(value.into()))
    }

    /// Sets a config entry that may lack a value (a missing value fails the build).
    pub fn config_entry(mut self, key: &str, value: Option<ConfigValue>) -> Self {
        self.config.push((key.to_string(), value));
        self
    }

    /// Adds an instrument.
    pub fn instrument(mut self, inst: Arc<dyn Instrument>) -> Self {
        self.instruments.push(inst);
        self
    }

    /// Sets the number of worker threads for function passes (1 = serial, 0 = all cores).
    /// More than [`MAX_THREADS`] is an error reported by [`PassContextBuilder::build`]
    /// ([`ContextError::TooManyThreads`]), never clamped.
    pub fn num_threads(mut self, n: usize) -> Self {
        self.num_threads = (n > 0).then_some(n);
        self
    }

    /// Streams one event per (pass, function) task to `tracer` (see `trace_channel`).
    pub fn trace(mut self, tracer: Tracer) -> Self {
        self.trace = Some(tracer);
        self
    }

    /// Makes passes count their statistics (off by default: counting costs a little per
    /// function and pass).
    pub fn statistics(mut self, on: bool) -> Self {
        self.statistics = on;
        self
    }

    /// Runs only the first `bisect`-limited optional pass executions (opt-bisect; see
    /// [`OptBisect`]). While set, function stages run pass by pass.
    pub fn opt_bisect(mut self, bisect: Arc<OptBisect>) -> Self {
        self.bisect = Some(bisect);
        self
    }

    /// Makes a pass that reports an error diagnostic fail with
    /// [`PassError::ErrorReported`] once its body returns, so the passes after it do not run
    /// (TVM's behaviour: its passes render their diagnostic context and raise). Off by
    /// default: the CLI reports every diagnostic of a run and goes on. Checked after each leaf
    /// pass call and, in fused stages and sessions, after each pass on each function, so the
    /// run fails at the same pass with the same diagnostics at any thread count.
    pub fn errors_fail_pass(mut self, on: bool) -> Self {
        self.errors_fail = on;
        self
    }

    /// Validates the config (rule 8) and builds the context.
    pub fn build(mut self) -> Result<PassContext, PassError> {
        if let Some(requested) = self.num_threads.filter(|&n| n > MAX_THREADS) {
            return Err(ContextError::TooManyThreads { requested, max: MAX_THREADS }.into());
        }
        let mut config = BTreeMap::new();
        for (key, value) in std::mem::take(&mut self.config) {
            let value = validate_config(&key, value)?;
            config.insert(key, value);
        }
        Ok(PassContext::new_unchecked(self, config))
    }
}

impl Statistic {
    /// Adds `n` to this counter in `ctx` (a no-op unless `ctx` collects statistics). Adding 0
    /// records nothing: as in LLVM, only counters that counted something are reported, so a
    /// pass's module form and its per-function form report the same entries.
    pub fn add(&'static self, ctx: &PassContext, n: u64) {
        if n > 0 && ctx.collects_statistics() {
            ctx.diagnostics().add_statistic(self, n);
        }
    }
}
