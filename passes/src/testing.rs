//! Testing-only passes, registered under `testing.*` names (as TVM registers its test passes):
//! they exist so that tests and users can exercise the machinery around a failing pass —
//! error locations, caught panics, `--print-ir-after-failure`, crash reproducers — on a real
//! binary. They are not in [`standard_pass_names`](crate::standard_pass_names) or any default
//! pipeline, and change nothing on a module without the `testing.fail` attribute.
//!
//! A function marked `#[testing.fail="MODE"]` makes them fail, where MODE is `error` (the pass
//! returns an error), `panic` (the pass panics), `diagnostic` (the pass reports an error
//! diagnostic and goes on) or `malformed` (the pass returns IR that does not verify: the
//! function's body becomes a variable that nothing binds; `testing.verify_each` names the
//! pass).

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
    /// Return IR that does not verify ([`malformed`]).
    Malformed,
}

/// `func` with its body replaced by a variable that nothing binds: an arena the builder accepts
/// but the verifier rejects, as a buggy pass might return it.
pub fn malformed(func: &Function) -> Function {
    let mut b = func.to_builder();
    let unbound = b.var("testing_unbound", None);
    b.finish(func.params(), unbound, func.ret_ty().cloned(), func.attrs().clone())
}

/// The mode `func` asks for: `None` when it is not marked, an error when the mode is unknown.
pub fn fail_mode(func: &Function) -> Result<Option<FailMode>, PassError> {
    match func.attrs().get(FAIL_ATTR) {
        None => Ok(None),
        Some(AttrValue::Str(s)) if &**s == "error" => Ok(Some(FailMode::Error)),
        Some(AttrValue::Str(s)) if &**s == "panic" => Ok(Some(FailMode::Panic)),
        Some(AttrValue::Str(s)) if &**s == "diagnostic" => Ok(Some(FailMode::Diagnostic)),
        Some(AttrValue::Str(s)) if &**s == "malformed" => Ok(Some(FailMode::Malformed)),
        Some(other) => Err(PassError::msg(format!(
            "unknown {FAIL_ATTR} mode {other}: expected \"error\", \"panic\", \"diagnostic\" or \"malformed\""
        ))),
    }
}
