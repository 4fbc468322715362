//! `testing.FailOnModule`: a testing-only module pass (opt level 0) that fails when any
//! function is marked `#[testing.fail="MODE"]` (see [`crate::testing`]), as a module pass
//! fails: its error names the pass only, `in pass testing.FailOnModule: …`. Unmarked modules
//! are returned unchanged; the first function marked `malformed` comes back broken.

use passel_engine::ir::Module;
use passel_engine::transform::{module_pass, Diagnostic, ModulePass, PassContext, PassError};

use super::{fail_mode, malformed, FailMode};

/// The registry name.
pub const NAME: &str = "testing.FailOnModule";

/// The `testing.FailOnModule` pass.
pub fn fail_on_module_pass() -> ModulePass {
    module_pass(NAME, 0, fail_on_module)
}

fn fail_on_module(module: Module, ctx: &PassContext) -> Result<Module, PassError> {
    for (name, func) in module.iter() {
        match fail_mode(func)? {
            None => {}
            Some(FailMode::Error) => return Err(PassError::msg(format!("@{name} asks to fail (testing.fail)"))),
            Some(FailMode::Panic) => std::panic::panic_any(format!("@{name} asks to panic (testing.fail)")),
            Some(FailMode::Diagnostic) => {
                ctx.emit(Diagnostic::error(NAME, format!("@{name} asks for an error diagnostic (testing.fail)")));
                break;
            }
            Some(FailMode::Malformed) => {
                let mut out = module.clone();
                out.insert(name, malformed(func)).map_err(|e| PassError::msg(e.to_string()))?;
                return Ok(out);
            }
        }
    }
    Ok(module)
}

passel_engine::register_pass!(NAME, || Box::new(fail_on_module_pass()));
