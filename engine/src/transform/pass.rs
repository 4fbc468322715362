//! The `Pass` trait, the instrumented call of one pass, and the three pass kinds: module and
//! function passes, and `Sequential` (the type; what running one does is `sequential.rs`).
//! Running a function pass's body on one function under a worker copy of the context
//! ([`run_in_worker`]) and over a module ([`run_function_pass_over_module`]) lives here too.

use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::config::{IMMUTABLE_MODULE, VERIFY_EACH};
use super::context::PassContext;
use super::diagnostics::Diagnostic;
use super::error::PassError;
use super::fanout::map_items;
use super::firewall::{FirewallCheck, ModuleFirewall};
use super::info::PassInfo;
use super::instrument::{after_pass, before_pass};
use super::statistics::Statistics;
use super::verify_each::check_module;
use crate::ir::{fn_attr, module_structural_hash, Function, Module};

/// The three kinds of passes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PassKind {
    /// Sees and may change the whole module.
    Module,
    /// Runs on each function independently.
    Function,
    /// Runs a list of passes.
    Sequential,
    /// Runs on each PrimFunc (the loop level) independently.
    PrimFunc,
}

impl fmt::Display for PassKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PassKind::Module => "module",
            PassKind::Function => "function",
            PassKind::Sequential => "sequential",
            PassKind::PrimFunc => "prim_func",
        })
    }
}

/// A module-to-module transformation.
pub trait Pass: Send + Sync {
    /// Name, opt level and required passes.
    fn info(&self) -> &PassInfo;

    /// Module, function or sequential.
    fn kind(&self) -> PassKind;

    /// The transformation itself, without instruments. Implement this; call [`Pass::run`].
    fn execute(&self, module: Module, ctx: &PassContext) -> Result<Module, PassError>;

    /// One pass call under `ctx`: instrument hooks (rules 19–22), the `immutable_module` check
    /// (rule 11), the `verify_each` check, panics caught and errors located in this pass
    /// (rule 29). Not meant to be overridden.
    fn run(&self, module: Module, ctx: &PassContext) -> Result<Module, PassError> {
        call_pass(self, module, ctx)
    }

    /// The pass as a `Sequential`, if it is one (pipelines print through this).
    fn as_sequential(&self) -> Option<&Sequential> {
        None
    }

    /// The pass as a mutable `Sequential`, if it is one (`Sequential`'s drop takes nested
    /// lists through this, so dropping deep nesting does not recurse).
    fn as_sequential_mut(&mut self) -> Option<&mut Sequential> {
        None
    }

    /// The pass as a `FunctionPass`, if it is one (the executor fuses and fans these out).
    fn as_function(&self) -> Option<&FunctionPass> {
        None
    }

    /// The pass as `Any`, for a pass kind defined above this file that the planner recognises
    /// by its concrete type (a `PrimFuncPass`, whose consecutive calls the planner fuses into one
    /// stage); `None` for the rest.
    fn as_any(&self) -> Option<&dyn std::any::Any> {
        None
    }

    /// A module pass's per-function form, if it declared one with
    /// [`ModulePass::with_function_form`]: the executor may then run it inside a stage of
    /// function passes instead of as a barrier (see `executor`'s module docs).
    fn function_form(&self) -> Option<FunctionPass> {
        None
    }

    /// A module pass's split form, if it declared one with
    /// [`ModulePass::with_prelude_and_function_form`]: a module-wide prelude and the per-function
    /// form that follows it. The executor runs the prelude as a short barrier and the form
    /// fused with the function passes after it (see `executor`'s module docs).
    fn split_form(&self) -> Option<(Arc<PreludeBody>, FunctionPass)> {
        None
    }

    /// A module pass's firewall, if it declared one with [`ModulePass::with_firewall`]: the
    /// edits an incremental session may skip the pass for (see [`ModuleFirewall`]).
    fn firewall(&self) -> Option<ModuleFirewall> {
        None
    }
}

impl fmt::Debug for dyn Pass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} pass {}", self.kind(), self.info().name)
    }
}

/// The instrumented call of `pass` (what [`Pass::run`] does).
pub fn call_pass<P: Pass + ?Sized>(pass: &P, module: Module, ctx: &PassContext) -> Result<Module, PassError> {
    let info = pass.info();
    // opt-bisect: a module pass (or a module pass's per-function form run as that pass) is one
    // execution; a function pass numbers its functions in `run_function_pass_over_module`.
    let one_execution = match pass.kind() {
        PassKind::Module => true,
        PassKind::Function => pass.as_function().is_some_and(|f| f.module_form().is_some()),
        PassKind::Sequential | PassKind::PrimFunc => false,
    };
    if let Some(b) = ctx.bisect_for(info).filter(|_| one_execution) {
        let k = b.reserve(1);
        b.report(k, &info.name, "module")?;
        if !b.allows(k) {
            return Ok(module);
        }
    }
    let insts = ctx.instruments();
    if !before_pass(&insts, &module, info, ctx.is_required(&info.name))? {
        return Ok(module);
    }
    // TVM's check (`src/ir/transform.cc`): hash the *input* before and after the pass; only a
    // pass that changed its input in place fails. The handle kept here is an O(1) shared copy.
    let input = ctx.get_config(IMMUTABLE_MODULE, false).then(|| (module.clone(), module_structural_hash(&module)));
    // `testing.verify_each`: a leaf pass's output is verified (a Sequential's output is its last
    // leaf pass's, verified already). The handle kept here is an O(1) shared copy.
    let verify_input =
        (pass.kind() != PassKind::Sequential && ctx.get_config(VERIFY_EACH, false)).then(|| module.clone());
    // `errors_fail_pass`: the diagnostics a leaf pass reports start here (a Sequential's
    // leaf passes check their own).
    let reported_before =
        (pass.kind() != PassKind::Sequential && ctx.errors_fail_pass()).then(|| ctx.diagnostics().len());
    let res = match catch_unwind(AssertUnwindSafe(|| pass.execute(module, ctx))) {
        Ok(res) => res,
        Err(payload) => Err(PassError::panicked(&info.name, None, &*payload)),
    };
    let res = res.map_err(|e| e.in_pass(&info.name, None)).and_then(|out| match &input {
        Some((input, hash)) if *hash != module_structural_hash(input) => {
            Err(PassError::ImmutableModuleModified { pass: info.name.clone() })
        }
        _ => Ok(out),
    });
    let res = res.and_then(|out| match &verify_input {
        Some(input) => check_module(&info.name, input, &out).map(|()| out),
        None => Ok(out),
    });
    let res = res.and_then(|out| match reported_before.and_then(|from| ctx.diagnostics().first_error_from(from)) {
        Some(diagnostic) => Err(PassError::ErrorReported { pass: info.name.clone(), diagnostic: Box::new(diagnostic) }),
        None => Ok(out),
    });
    match res {
        Ok(out) => {
            after_pass(&insts, &out, info)?;
            Ok(out)
        }
        Err(e) => {
            for inst in &insts {
                inst.on_pass_failed(info);
            }
            Err(e)
        }
    }
}

/// The body of a module pass.
pub type ModuleBody = dyn Fn(Module, &PassContext) -> Result<Module, PassError> + Send + Sync;

/// The module-wide part of a split module pass ([`ModulePass::with_prelude_and_function_form`]):
/// the module before the pass → the module its per-function form then runs on.
pub type PreludeBody = dyn Fn(&Module, &PassContext) -> Module + Send + Sync;

/// A pass over the whole module; it may add and remove functions (rule 27).
#[derive(Clone)]
pub struct ModulePass {
    info: PassInfo,
    body: Arc<ModuleBody>,
    function_form: Option<Arc<FunctionBody>>,
    split: Option<(Arc<PreludeBody>, Arc<FunctionBody>)>,
    firewall: Option<ModuleFirewall>,
}

impl ModulePass {
    /// A module pass named `name` at `opt_level`.
    pub fn new(
        name: &str,
        opt_level: u32,
        body: impl Fn(Module, &PassContext) -> Result<Module, PassError> + Send + Sync + 'static,
    ) -> ModulePass {
        ModulePass {
            info: PassInfo::new(name, opt_level),
            body: Arc::new(body),
            function_form: None,
            split: None,
            firewall: None,
        }
    }

    /// Builder form: the passes a `Sequential` runs before this one.
    pub fn with_required(mut self, required: &[&str]) -> ModulePass {
        self.info = self.info.with_required(required);
        self
    }

    /// Declares the pass *function-local*: on a module whose every function has a declared
    /// signature (annotated parameters and result), running `per_function` on each function
    /// (those marked `SkipOptimization` included), with the module as its read-only view, gives
    /// exactly what the module pass gives, diagnostics and their order included, and
    /// `per_function` reads nothing of other functions but their declared signatures. The pass
    /// must never fail where `per_function` succeeds for every function.
    ///
    /// The caller vouches for the equivalence (the parity tests check the standard passes'
    /// forms against the module body). The executor then runs the pass inside a stage of
    /// function passes, fused with its neighbours, instead of as a barrier; it checks the
    /// signature precondition at run time and runs the module body whenever it does not hold.
    pub fn with_function_form(
        mut self,
        per_function: impl Fn(Arc<Function>, &Module, &PassContext) -> Result<Arc<Function>, PassError>
            + Send
            + Sync
            + 'static,
    ) -> ModulePass {
        self.function_form = Some(Arc::new(per_function));
        self
    }

    /// Declares the pass *split*: running `prelude` on the whole module, then `per_function` on
    /// each function of the prelude's output (those marked `SkipOptimization` included), with
    /// that output as the read-only view, gives exactly what the module pass gives, diagnostics
    /// and their order included. The prelude may add, remove or reorder functions; it must be
    /// cheap next to the per-function part (it runs as a barrier) and must not fail (a panic
    /// is reported as the pass's error, through the module body). The pass must never fail
    /// where `per_function` succeeds for every function. DeadCodeElimination is the example:
    /// reachability over the module, then unused bindings per function.
    ///
    /// The caller vouches for the equivalence (the parity tests check the standard passes'
    /// forms against the module body). The executor then runs the prelude as a barrier and the
    /// per-function part fused with the function passes after it, so each function is visited
    /// once for all of them instead of once more for this pass; where it cannot fuse (an
    /// instrument, `testing.immutable_module`, a stage of one pass) it
    /// runs the module body.
    pub fn with_prelude_and_function_form(
        mut self,
        prelude: impl Fn(&Module, &PassContext) -> Module + Send + Sync + 'static,
        per_function: impl Fn(Arc<Function>, &Module, &PassContext) -> Result<Arc<Function>, PassError>
            + Send
            + Sync
            + 'static,
    ) -> ModulePass {
        self.split = Some((Arc::new(prelude), Arc::new(per_function)));
        self
    }

    /// Declares the pass's firewall for incremental sessions: `unaffected` says when an edit of
    /// one function leaves what the pass does to the rest of the module as it was, so that a
    /// session run after such edits skips the pass (for a split pass: its prelude). The
    /// caller vouches for the contract of [`ModuleFirewall`]; the incremental parity tests
    /// check the standard passes' firewalls against cold runs.
    pub fn with_firewall(
        mut self,
        unaffected: impl Fn(&FirewallCheck<'_>) -> bool + Send + Sync + 'static,
    ) -> ModulePass {
        self.firewall = Some(ModuleFirewall { unaffected: Arc::new(unaffected) });
        self
    }

    /// The pass behind an `Arc`, for `Sequential` lists.
    pub fn shared(self) -> Arc<dyn Pass> {
        Arc::new(self)
    }
}

impl Pass for ModulePass {
    fn info(&self) -> &PassInfo {
        &self.info
    }

    fn kind(&self) -> PassKind {
        PassKind::Module
    }

    fn execute(&self, module: Module, ctx: &PassContext) -> Result<Module, PassError> {
        (self.body)(module, ctx)
    }

    fn function_form(&self) -> Option<FunctionPass> {
        let body = self.function_form.clone()?;
        Some(FunctionPass {
            info: self.info.clone(),
            body,
            module_form: Some(Arc::new(self.clone())),
            visits_marked: true,
            reads_signatures: true,
            on_calling_thread: false,
        })
    }

    fn firewall(&self) -> Option<ModuleFirewall> {
        self.firewall.clone()
    }

    fn split_form(&self) -> Option<(Arc<PreludeBody>, FunctionPass)> {
        let (prelude, body) = self.split.clone()?;
        let form = FunctionPass {
            info: self.info.clone(),
            body,
            module_form: Some(Arc::new(self.clone())),
            visits_marked: true,
            reads_signatures: false,
            on_calling_thread: false,
        };
        Some((prelude, form))
    }
}

/// The body of a function pass: one function, a read-only view of the module, the context.
pub type FunctionBody = dyn Fn(Arc<Function>, &Module, &PassContext) -> Result<Arc<Function>, PassError> + Send + Sync;

/// A pass run on each function on its own (rule 28). Functions with `SkipOptimization` are
/// left alone; it cannot add or remove functions. When the body returns every function
/// unchanged (same `Arc`), the result holds the same functions.
///
/// A function pass may also be the per-function form of a function-local module pass
/// ([`Pass::function_form`]): then it visits every function (`SkipOptimization` ones too), and
/// run as a pass of its own it runs the module pass's body.
///
/// A pass built [`FunctionPass::on_calling_thread`] runs its body on every function one after
/// the other on the thread that called the pipeline, whatever `num_threads` says, in a stage
/// of its own (the passes before and after it still fan out). Passes whose body must hold a
/// global lock, such as Python passes under the GIL, use it: on a pool their calls would only
/// wait for each other.
#[derive(Clone)]
pub struct FunctionPass {
    info: PassInfo,
    body: Arc<FunctionBody>,
    module_form: Option<Arc<dyn Pass>>,
    // Runs on functions marked `SkipOptimization` too (a module pass's per-function form).
    visits_marked: bool,
    // A function-local module pass's form reads other functions' declared signatures.
    reads_signatures: bool,
    on_calling_thread: bool,
}

impl FunctionPass {
    /// A function pass named `name` at `opt_level`.
    pub fn new(
        name: &str,
        opt_level: u32,
        body: impl Fn(Arc<Function>, &Module, &PassContext) -> Result<Arc<Function>, PassError> + Send + Sync + 'static,
    ) -> FunctionPass {
        FunctionPass {
            info: PassInfo::new(name, opt_level),
            body: Arc::new(body),
            module_form: None,
            visits_marked: false,
            reads_signatures: false,
            on_calling_thread: false,
        }
    }

    /// `self` as the per-function part of a module pass split by a session's
    /// [`crate::session::ModuleSplit`]: like a module pass's own forms it visits functions
    /// marked `SkipOptimization` too.
    pub(crate) fn visiting_marked(mut self) -> FunctionPass {
        self.visits_marked = true;
        self
    }

    /// Builder form: the body runs on the calling thread only, one function after the other,
    /// in a stage of its own (see the type's docs). The output is the same as on a pool.
    pub fn on_calling_thread(mut self) -> FunctionPass {
        self.on_calling_thread = true;
        self
    }

    /// Whether the body runs on the calling thread only ([`FunctionPass::on_calling_thread`]).
    pub fn runs_on_calling_thread(&self) -> bool {
        self.on_calling_thread
    }

    /// The worker threads the body may run on under `ctx`: 1 for a pass that runs on the
    /// calling thread, else the context's `num_threads`.
    pub fn threads(&self, ctx: &PassContext) -> usize {
        if self.on_calling_thread {
            1
        } else {
            ctx.num_threads().max(1)
        }
    }

    /// Builder form: the passes a `Sequential` runs before this one.
    pub fn with_required(mut self, required: &[&str]) -> FunctionPass {
        self.info = self.info.with_required(required);
        self
    }

    /// The pass behind an `Arc`, for `Sequential` lists.
    pub fn shared(self) -> Arc<dyn Pass> {
        Arc::new(self)
    }

    /// The per-function body.
    pub fn body(&self) -> &FunctionBody {
        &*self.body
    }

    /// The module pass this is the per-function form of, if it is one.
    pub fn module_form(&self) -> Option<&Arc<dyn Pass>> {
        self.module_form.as_ref()
    }

    /// Whether the body runs on functions marked `SkipOptimization` too (module passes' forms).
    pub fn visits_marked(&self) -> bool {
        self.visits_marked
    }

    /// Whether the body relies on every function declaring its signature and on no earlier
    /// pass of its stage changing one (a function-local module pass's form,
    /// [`ModulePass::with_function_form`]; not a split pass's form).
    pub fn reads_signatures(&self) -> bool {
        self.reads_signatures
    }
}

impl Pass for FunctionPass {
    fn info(&self) -> &PassInfo {
        &self.info
    }

    fn kind(&self) -> PassKind {
        PassKind::Function
    }

    fn execute(&self, module: Module, ctx: &PassContext) -> Result<Module, PassError> {
        match &self.module_form {
            // Run on its own, a module pass's form is that module pass.
            Some(pass) => pass.execute(module, ctx),
            None => run_function_pass_over_module(&self.info, self.body(), self.threads(ctx), module, ctx),
        }
    }

    fn as_function(&self) -> Option<&FunctionPass> {
        Some(self)
    }
}

/// What a function-level pass runs on: a graph [`Function`] or a loop-level
/// [`PrimFunc`](crate::tir::PrimFunc). The fan-out, the worker copies of the context, bisect
/// numbering and the merge of results are written once over this trait, for both levels.
pub trait PassTarget: Send + Sync + Sized + 'static {
    /// Whether the function is marked `SkipOptimization` (function passes leave it alone).
    fn skips_optimization(&self) -> bool;
    /// The module's functions of this level, in order.
    fn entries(module: &Module) -> &[(Arc<str>, Arc<Self>)];
    /// `module` with its functions of this level replaced by `new` (one per function).
    fn replace_all(ctx: &PassContext, module: Module, new: Vec<Arc<Self>>) -> Module;
}

impl PassTarget for Function {
    fn skips_optimization(&self) -> bool {
        self.attrs().flag(fn_attr::SKIP_OPTIMIZATION)
    }

    fn entries(module: &Module) -> &[(Arc<str>, Arc<Function>)] {
        module.entries()
    }

    fn replace_all(ctx: &PassContext, module: Module, new: Vec<Arc<Function>>) -> Module {
        ctx.replace_functions(module, new)
    }
}

impl PassTarget for crate::tir::PrimFunc {
    fn skips_optimization(&self) -> bool {
        self.attrs().flag(fn_attr::SKIP_OPTIMIZATION)
    }

    fn entries(module: &Module) -> &[(Arc<str>, Arc<crate::tir::PrimFunc>)] {
        module.prim_entries()
    }

    fn replace_all(_ctx: &PassContext, mut module: Module, new: Vec<Arc<crate::tir::PrimFunc>>) -> Module {
        module.replace_all_prims(new);
        module
    }
}

/// The body of a pass over one function of level `F`.
pub type TargetBody<F> = dyn Fn(Arc<F>, &Module, &PassContext) -> Result<Arc<F>, PassError> + Send + Sync;

/// Runs `body` on every function of level `F` of `module` (the executor's fan-out: inline
/// when `threads` is 1, else on the cached pool of that size; see [`FunctionPass::threads`]).
/// Each function runs under its own worker copy of the context (own diagnostics buffer;
/// `current()` inside the body returns it); diagnostics the body emits without a function
/// name get the function's name. Results and diagnostics are merged in module order, so the
/// outcome does not depend on the thread count; the error reported is the first in module
/// order.
pub fn run_function_pass_over_module<F: PassTarget>(
    info: &PassInfo,
    body: &TargetBody<F>,
    threads: usize,
    module: Module,
    ctx: &PassContext,
) -> Result<Module, PassError> {
    let start = Instant::now();
    // opt-bisect: number the functions the pass visits, in module order, before the fan-out.
    let gate = ctx.bisect_for(info);
    let entries = F::entries(&module);
    let mut numbers: Vec<Option<u64>> = Vec::new();
    if let Some(b) = gate {
        let mut k = b.reserve(entries.iter().filter(|(_, f)| !f.skips_optimization()).count() as u64);
        for (name, f) in entries {
            numbers.push((!f.skips_optimization()).then(|| {
                k += 1;
                k - 1
            }));
            if let Some(n) = numbers.last().copied().flatten() {
                b.report(n, &info.name, &format!("@{name}"))?;
            }
        }
    }
    let view = &module;
    let indexed: Vec<_> = entries.iter().enumerate().collect();
    let results = map_items(threads, &indexed, |&(i, (name, func)): &(usize, &(Arc<str>, Arc<F>))| {
        let number = numbers.get(i).copied().flatten();
        if gate.zip(number).is_some_and(|(b, k)| !b.allows(k)) {
            return (Ok(func.clone()), Duration::ZERO, Vec::new(), Statistics::new());
        }
        run_in_worker(info, body, false, name, func, view, ctx)
    });
    drop(indexed);
    let mut busy = Duration::ZERO;
    let mut new = Vec::with_capacity(results.len());
    let mut first_err = None;
    for (res, elapsed, diags, stats) in results {
        for d in diags {
            ctx.emit(d);
        }
        ctx.merge_statistics(&stats);
        busy += elapsed;
        match res {
            Ok(func) => new.push(func),
            Err(e) => {
                first_err.get_or_insert(e);
            }
        }
    }
    for inst in ctx.instruments() {
        inst.record_worker_time(info, start.elapsed(), busy);
    }
    if let Some(e) = first_err {
        return Err(e);
    }
    Ok(F::replace_all(ctx, module, new))
}

/// What one pass did on one function in a worker: its result, time, diagnostics and counts.
pub(crate) type WorkerResult<F = Function> = (Result<Arc<F>, PassError>, Duration, Vec<Diagnostic>, Statistics);

/// One pass on one function under a fresh worker copy of `ctx`.
pub(crate) fn run_in_worker<F: PassTarget>(
    info: &PassInfo,
    body: &TargetBody<F>,
    visits_marked: bool,
    name: &str,
    func: &Arc<F>,
    view: &Module,
    ctx: &PassContext,
) -> WorkerResult<F> {
    if !visits_marked && func.skips_optimization() {
        return (Ok(func.clone()), Duration::ZERO, Vec::new(), Statistics::new());
    }
    let worker = ctx.worker_copy();
    let scope = worker.push_silently();
    let start = Instant::now();
    let res = match catch_unwind(AssertUnwindSafe(|| body(func.clone(), view, &worker))) {
        Ok(res) => res,
        Err(payload) => Err(PassError::panicked(&info.name, Some(name), &*payload)),
    };
    let elapsed = start.elapsed();
    if let Some(tracer) = ctx.tracer() {
        tracer.record(&info.name, name, start, elapsed);
    }
    drop(scope);
    worker.diagnostics().fill_function(name);
    (res.map_err(|e| e.in_pass(&info.name, Some(name))), elapsed, worker.diagnostics().take(), worker.take_statistics())
}

/// A function pass from a closure: `function_pass("Name", 1, |func, module, ctx| Ok(func))`.
pub fn function_pass(
    name: &str,
    opt_level: u32,
    body: impl Fn(Arc<Function>, &Module, &PassContext) -> Result<Arc<Function>, PassError> + Send + Sync + 'static,
) -> FunctionPass {
    FunctionPass::new(name, opt_level, body)
}

/// A module pass from a closure: `module_pass("Name", 0, |module, ctx| Ok(module))`.
pub fn module_pass(
    name: &str,
    opt_level: u32,
    body: impl Fn(Module, &PassContext) -> Result<Module, PassError> + Send + Sync + 'static,
) -> ModulePass {
    ModulePass::new(name, opt_level, body)
}

impl fmt::Debug for ModulePass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ModulePass").field("info", &self.info).finish_non_exhaustive()
    }
}

impl fmt::Debug for FunctionPass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FunctionPass").field("info", &self.info).finish_non_exhaustive()
    }
}

/// How deep sequentials may nest to be run (a sequential of plain passes has depth 1). The
/// textual pipeline parser refuses deeper groups with the position of the offending `[`.
pub const MAX_PIPELINE_DEPTH: usize = 128;

/// A list of passes run in order. Default name "sequential", opt level 0.
#[derive(Clone)]
pub struct Sequential {
    pub(super) info: PassInfo,
    passes: Vec<Arc<dyn Pass>>,
    /// 1 + the deepest nested sequential of `passes`.
    depth: usize,
}

impl Sequential {
    /// A sequential named `name` (opt level 0).
    pub fn new(name: &str, passes: Vec<Arc<dyn Pass>>) -> Sequential {
        let depth = 1 + passes.iter().filter_map(|p| p.as_sequential()).map(|s| s.depth).max().unwrap_or(0);
        Sequential { info: PassInfo::new(name, 0), passes, depth }
    }

    /// How deep sequentials nest in this one: 1 when its list has no sequential.
    pub fn depth(&self) -> usize {
        self.depth
    }

    /// An error when this sequential nests deeper than [`MAX_PIPELINE_DEPTH`].
    pub fn check_depth(&self) -> Result<(), PassError> {
        if self.depth > MAX_PIPELINE_DEPTH {
            return Err(PassError::PipelineTooDeep {
                name: self.info.name.clone(),
                depth: self.depth,
                max: MAX_PIPELINE_DEPTH,
            });
        }
        Ok(())
    }

    /// A sequential with the default name "sequential".
    pub fn unnamed(passes: Vec<Arc<dyn Pass>>) -> Sequential {
        Sequential::new("sequential", passes)
    }

    /// Builder form: the opt level at which an enclosing `Sequential` runs this one.
    pub fn with_opt_level(mut self, opt_level: u32) -> Sequential {
        self.info.opt_level = opt_level;
        self
    }

    /// Builder form: passes an enclosing `Sequential` runs before this one (ignored when this
    /// one is called directly, rule 16).
    pub fn with_required(mut self, required: &[&str]) -> Sequential {
        self.info.required = required.iter().map(|s| s.to_string()).collect();
        self
    }

    /// The passes, in order.
    pub fn passes(&self) -> &[Arc<dyn Pass>] {
        &self.passes
    }

    /// The sequential behind an `Arc`, for nesting.
    pub fn shared(self) -> Arc<dyn Pass> {
        Arc::new(self)
    }
}

impl Drop for Sequential {
    /// Takes nested lists apart with an explicit stack: a nested sequential this one owns alone
    /// hands its list over before it is dropped, so dropping never recurses over nesting.
    fn drop(&mut self) {
        let mut stack = std::mem::take(&mut self.passes);
        while let Some(mut pass) = stack.pop() {
            if let Some(inner) = Arc::get_mut(&mut pass).and_then(|p| p.as_sequential_mut()) {
                stack.append(&mut inner.passes);
            }
        }
    }
}

/// A sequential from a list: `sequential("O1", vec![a.shared(), b.shared()])`.
pub fn sequential(name: &str, passes: Vec<Arc<dyn Pass>>) -> Sequential {
    Sequential::new(name, passes)
}

impl std::fmt::Debug for Sequential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sequential").field("info", &self.info).field("passes", &self.passes).finish()
    }
}
