//! `Sequential`: runs a list of passes in order, skipping disabled ones and running required
//! dependencies first (rules 12–18).

use std::sync::Arc;

use super::context::PassContext;
use super::error::PassError;
use super::executor::run_sequential;
use super::info::PassInfo;
use super::pass::{Pass, PassKind};
use crate::ir::Module;

/// A list of passes run in order. Default name "sequential", opt level 0.
#[derive(Clone)]
pub struct Sequential {
    info: PassInfo,
    passes: Vec<Arc<dyn Pass>>,
}

impl Sequential {
    /// A sequential named `name` (opt level 0).
    pub fn new(name: &str, passes: Vec<Arc<dyn Pass>>) -> Sequential {
        Sequential { info: PassInfo::new(name, 0), passes }
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
        self.info = self.info.with_required(required);
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
