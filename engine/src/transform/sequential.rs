//! Running a `Sequential` (rules 12–18): planned into stages and run by the executor, or, when
//! no plan can be made, pass by pass. The type itself is one of the pass kinds in `pass.rs`;
//! this file is what its [`Pass::execute`] does.
//!
//! Sequentials nest, and running a nested one nests calls (executor → `call_pass` → executor),
//! so a `Sequential` records its nesting depth when built (O(its list)) and refuses to run when
//! it exceeds [`MAX_PIPELINE_DEPTH`](super::pass::MAX_PIPELINE_DEPTH).

use super::context::PassContext;
use super::error::PassError;
use super::executor::run_plan;
use super::info::PassInfo;
use super::pass::{Pass, PassKind, Sequential};
use super::plan::plan;
use super::registry::get_pass;
use crate::ir::Module;

impl Pass for Sequential {
    fn info(&self) -> &PassInfo {
        &self.info
    }

    fn kind(&self) -> PassKind {
        PassKind::Sequential
    }

    /// Planned into stages and run by the executor ([`run_sequential`]), on one thread
    /// too: a fused stage runs all its passes on one function while it is in cache. The plain
    /// pass-by-pass algorithm ([`run_plain`]) is the parity tests' baseline.
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

/// Runs a `Sequential`'s list (what `Sequential::execute` does): planned into stages when the
/// plan can be made, else pass by pass.
pub fn run_sequential(seq: &Sequential, module: Module, ctx: &PassContext) -> Result<Module, PassError> {
    seq.check_depth()?;
    match plan(seq, ctx) {
        Ok(stages) => run_plan(&stages, module, ctx),
        Err(_) => run_plain(seq, module, ctx),
    }
}

/// Runs a `Sequential`'s list pass by pass, the reference's algorithm without stages or fusion
/// (each function pass still fans out over functions). Kept as the parity baseline.
pub fn run_plain(seq: &Sequential, mut module: Module, ctx: &PassContext) -> Result<Module, PassError> {
    seq.check_depth()?;
    for pass in seq.passes() {
        let info = pass.info();
        if !ctx.pass_enabled(info) {
            continue;
        }
        // Dependencies are neither filtered nor de-duplicated (rule 15).
        for name in &info.required {
            let dep = get_pass(name)?;
            module = dep.run(module, ctx)?;
        }
        module = pass.run(module, ctx)?;
    }
    Ok(module)
}
