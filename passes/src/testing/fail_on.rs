//! `testing.FailOn`: a testing-only function pass (opt level 0, requires InferType) that fails
//! on each function marked `#[testing.fail="MODE"]` (see [`crate::testing`]) and returns every
//! other function unchanged (a function marked `malformed` comes back broken). Its error is located on the function like any function pass's:
//! `in pass testing.FailOn on function @f: …`.

use std::sync::Arc;

use passel_engine::ir::Function;
use passel_engine::transform::{function_pass, Diagnostic, FunctionPass, PassContext, PassError};

use super::{fail_mode, malformed, FailMode};

/// The registry name.
pub const NAME: &str = "testing.FailOn";

/// The `testing.FailOn` pass.
pub fn fail_on_pass() -> FunctionPass {
    function_pass(NAME, 0, |func, _module, ctx| fail_on(func, ctx)).with_required(&["InferType"])
}

fn fail_on(func: Arc<Function>, ctx: &PassContext) -> Result<Arc<Function>, PassError> {
    match fail_mode(&func)? {
        None => Ok(func),
        Some(FailMode::Error) => Err(PassError::msg("failing as asked by testing.fail")),
        Some(FailMode::Panic) => std::panic::panic_any("panicking as asked by testing.fail".to_string()),
        Some(FailMode::Diagnostic) => {
            ctx.emit(Diagnostic::error(NAME, "error diagnostic as asked by testing.fail"));
            Ok(func)
        }
        Some(FailMode::Malformed) => Ok(Arc::new(malformed(&func))),
    }
}

passel_engine::register_pass!(NAME, || Box::new(fail_on_pass()));
