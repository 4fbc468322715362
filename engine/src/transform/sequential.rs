//! `Sequential`: runs a list of passes in order, skipping disabled ones and running required
//! dependencies first (rules 12–18).
//!
//! Sequentials nest, and running a nested one nests calls (executor → `call_pass` → executor),
//! so a `Sequential` records its nesting depth when built (O(its list)) and refuses to run when
//! it exceeds [`MAX_PIPELINE_DEPTH`]. Building and dropping any depth is fine: the drop takes
//! nested lists apart with an explicit stack.

use std::sync::Arc;

use super::context::PassContext;
use super::error::PassError;
use super::executor::run_sequential;
use super::info::PassInfo;
use super::pass::{Pass, PassKind};
use crate::ir::Module;

/// How deep sequentials may nest to be run (a sequential of plain passes has depth 1). The
/// textual pipeline parser refuses deeper groups with the position of the offending `[`.
pub const MAX_PIPELINE_DEPTH: usize = 128;

/// A list of passes run in order. Default name "sequential", opt level 0.
#[derive(Clone)]
pub struct Sequential {
    info: PassInfo,
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

impl Pass for Sequential {
    fn info(&self) -> &PassInfo {
        &self.info
    }

    fn kind(&self) -> PassKind {
        PassKind::Sequential
    }

    /// Planned into stages and run by the executor (`executor::run_sequential`), on one thread
    /// too: a fused stage runs all its passes on one function while it is in cache. The plain
    /// pass-by-pass algorithm (`executor::run_plain`) is the parity tests' baseline.
    fn execute(&self, module: Module, ctx: &PassContext) -> Result<Module, PassError> {
        run_sequential(self, module, ctx)
    }

    fn as_sequential(&self) -> Option<&Sequential> {
        Some(self)
    }

    fn as_sequential_mut(&mut self) -> Option<&mut Sequential> {
        Some(self)
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
