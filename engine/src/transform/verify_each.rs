//! `testing.verify_each` ([`VERIFY_EACH`](super::VERIFY_EACH)): the verifier run after a pass,
//! blaming the pass for what it broke.
//!
//! A pass is blamed for a function that does not verify after it only when that function
//! verified before it (or did not exist): a pass is never blamed for IR that was already broken
//! when it got it, so the input is verified only when the output fails, and a run whose every
//! output verifies verifies each module once. The executor checks whole modules after each
//! leaf pass call (`call_pass`); a session checks each function after each pass of a function
//! stage (against the stage's view of the function and its callees), and its module stages go
//! through `call_pass`. Both report the same [`PassError::VerifyEach`].

use super::error::PassError;
use crate::ir::{verify_function, verify_module, Function, Module, VerifyError};

/// How many of the verifier's errors the error quotes.
const QUOTED: usize = 3;

/// Checks `output`, the module `pass` returned for `input`: the first function (in module
/// order) that does not verify and whose same-named input function verified (or was absent)
/// fails the call.
pub(crate) fn check_module(pass: &str, input: &Module, output: &Module) -> Result<(), PassError> {
    let Err(errors) = verify_module(output) else { return Ok(()) };
    let mut rest = &errors[..];
    while let Some(first) = rest.first() {
        // `verify_module` reports each function's errors together, in module order.
        let n = rest.iter().take_while(|e| e.func == first.func).count();
        let (of_func, after) = rest.split_at(n);
        let was_broken =
            input.get(&first.func).is_some_and(|before| verify_function(Some(input), &first.func, before).is_err());
        if !was_broken {
            return Err(blame(pass, of_func));
        }
        rest = after;
    }
    Ok(())
}

/// Checks `output`, what `pass` returned for function `name` given `input`, against `view`
/// (a module holding the function's callees): fails when the output does not verify and the
/// input did.
pub(crate) fn check_function(
    pass: &str,
    name: &str,
    input: &Function,
    output: &Function,
    view: &Module,
) -> Result<(), PassError> {
    let Err(errors) = verify_function(Some(view), name, output) else { return Ok(()) };
    if verify_function(Some(view), name, input).is_err() {
        return Ok(());
    }
    Err(blame(pass, &errors))
}

fn blame(pass: &str, errors: &[VerifyError]) -> PassError {
    PassError::VerifyEach {
        pass: pass.to_string(),
        function: errors.first().map(|e| e.func.clone()).unwrap_or_default(),
        errors: errors.iter().take(QUOTED).map(ToString::to_string).collect(),
        more: errors.len().saturating_sub(QUOTED),
    }
}
