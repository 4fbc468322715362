//! PrimFunc passes (TVM's `tir.transform.prim_func_pass` / `CreatePrimFuncPass`): a pass run on
//! each loop-level function on its own, beside graph function passes.
//!
//! It is the same kind of thing as a [`FunctionPass`](super::FunctionPass) over another
//! function kind: the fan-out, the worker copies of the context, bisect numbering, panics
//! caught per function and the merge of diagnostics in module order are
//! [`run_function_pass_over_module`]'s, shared through [`PassTarget`](super::PassTarget).
//! Instruments, opt levels, `required`, configs, timing, printing, reproducers and
//! verify-each come from [`Pass::run`] as for every pass. Graph functions are left as they
//! are; PrimFuncs marked `SkipOptimization` too.

use std::fmt;
use std::sync::Arc;

use super::context::PassContext;
use super::error::PassError;
use super::info::PassInfo;
use super::pass::{run_function_pass_over_module, Pass, PassKind};
use crate::ir::Module;
use crate::tir::PrimFunc;

/// The body of a PrimFunc pass: one PrimFunc, a read-only view of the module, the context.
pub type PrimFuncBody = dyn Fn(Arc<PrimFunc>, &Module, &PassContext) -> Result<Arc<PrimFunc>, PassError> + Send + Sync;

/// A pass run on each PrimFunc independently. It cannot add or remove functions; when the
/// body returns every PrimFunc unchanged (same `Arc`), the module is unchanged.
#[derive(Clone)]
pub struct PrimFuncPass {
    info: PassInfo,
    body: Arc<PrimFuncBody>,
    on_calling_thread: bool,
}

impl PrimFuncPass {
    /// A PrimFunc pass named `name` at `opt_level`.
    pub fn new(
        name: &str,
        opt_level: u32,
        body: impl Fn(Arc<PrimFunc>, &Module, &PassContext) -> Result<Arc<PrimFunc>, PassError> + Send + Sync + 'static,
    ) -> PrimFuncPass {
        PrimFuncPass { info: PassInfo::new(name, opt_level), body: Arc::new(body), on_calling_thread: false }
    }

    /// Builder form: the body runs on every PrimFunc one after the other on the thread that
    /// called the pipeline, whatever `num_threads` says (as
    /// [`FunctionPass::on_calling_thread`](super::FunctionPass::on_calling_thread)): for bodies
    /// that hold a global lock, such as Python passes under the GIL.
    pub fn on_calling_thread(mut self) -> PrimFuncPass {
        self.on_calling_thread = true;
        self
    }

    /// Whether the body runs on the calling thread only ([`PrimFuncPass::on_calling_thread`]).
    pub fn runs_on_calling_thread(&self) -> bool {
        self.on_calling_thread
    }

    /// Builder form: the passes a `Sequential` runs before this one.
    pub fn with_required(mut self, required: &[&str]) -> PrimFuncPass {
        self.info = self.info.with_required(required);
        self
    }

    /// The worker threads the pass fans out over under `ctx`: 1 when it runs on the calling
    /// thread, else the context's `num_threads`.
    pub fn threads(&self, ctx: &PassContext) -> usize {
        if self.on_calling_thread {
            1
        } else {
            ctx.num_threads().max(1)
        }
    }

    /// The per-PrimFunc body.
    pub fn body(&self) -> &PrimFuncBody {
        &*self.body
    }

    /// The pass behind an `Arc`, for `Sequential` lists.
    pub fn shared(self) -> Arc<dyn Pass> {
        Arc::new(self)
    }
}

impl Pass for PrimFuncPass {
    fn info(&self) -> &PassInfo {
        &self.info
    }

    fn kind(&self) -> PassKind {
        PassKind::PrimFunc
    }

    fn as_any(&self) -> Option<&dyn std::any::Any> {
        Some(self)
    }

    fn execute(&self, module: Module, ctx: &PassContext) -> Result<Module, PassError> {
        if module.num_prims() == 0 {
            return Ok(module);
        }
        run_function_pass_over_module(&self.info, self.body(), self.threads(ctx), module, ctx)
    }
}

impl fmt::Debug for PrimFuncPass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PrimFuncPass").field("info", &self.info).finish_non_exhaustive()
    }
}

/// A PrimFunc pass from a closure: `prim_func_pass("Simplify", 0, |func, module, ctx| Ok(func))`.
pub fn prim_func_pass(
    name: &str,
    opt_level: u32,
    body: impl Fn(Arc<PrimFunc>, &Module, &PassContext) -> Result<Arc<PrimFunc>, PassError> + Send + Sync + 'static,
) -> PrimFuncPass {
    PrimFuncPass::new(name, opt_level, body)
}
