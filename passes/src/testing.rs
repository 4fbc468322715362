//! Testing-only passes, registered under `testing.*` names (as TVM registers its test passes):
//! they exist so that tests and users can exercise the machinery around a failing pass —
//! error locations, caught panics, `--print-ir-after-failure`, crash reproducers — on a real
//! binary. They are not in [`standard_pass_names`](crate::standard_pass_names) or any default
//! pipeline, and change nothing on a module without the `testing.fail` attribute.
//!
//! A function marked `#[testing.fail="MODE"]` makes them fail, where MODE is `error` (the pass
//! returns an error), `panic` (the pass panics) or `diagnostic` (the pass reports an error
//! diagnostic and goes on).

pub mod fail_on;
pub mod fail_on_module;

use passel_engine::ir::{AttrValue, Function};
use passel_engine::transform::PassError;

/// The function attribute the testing passes look for.
pub const FAIL_ATTR: &str = "testing.fail";

/// How a marked function makes a testing pass fail.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FailMode {
    /// Return an error.
    Error,
    /// Panic.
    Panic,
    /// Report an error diagnostic and go on.
    Diagnostic,
}

/// The mode `func` asks for: `None` when it is not marked, an error when the mode is unknown.
pub fn fail_mode(func: &Function) -> Result<Option<FailMode>, PassError> {
    match func.attrs().get(FAIL_ATTR) {
        None => Ok(None),
        Some(AttrValue::Str(s)) if &**s == "error" => Ok(Some(FailMode::Error)),
        Some(AttrValue::Str(s)) if &**s == "panic" => Ok(Some(FailMode::Panic)),
        Some(AttrValue::Str(s)) if &**s == "diagnostic" => Ok(Some(FailMode::Diagnostic)),
        Some(other) => Err(PassError::msg(format!(
            "unknown {FAIL_ATTR} mode {other}: expected \"error\", \"panic\" or \"diagnostic\""
        ))),
    }
}
