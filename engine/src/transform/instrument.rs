//! The `Instrument` trait and the code that calls instruments with the reference's order and
//! failure rules (rules 19–26 of `docs/pass-semantics.md`).

use std::io::Write;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::error::{panic_message, Hook, InstrumentError, PassError};
use super::info::PassInfo;
use crate::ir::Module;

/// Hooks around pass contexts and pass calls. Every hook may fail; a panic inside a hook is
/// caught and counts as a failure. Only the innermost context's instruments are called, on the
/// coordinating thread.
pub trait Instrument: Send + Sync {
    /// The instrument's name, used in error messages.
    fn name(&self) -> &str;

    /// Called when a context holding this instrument is entered.
    fn enter_pass_ctx(&self) -> Result<(), InstrumentError> {
        Ok(())
    }

    /// Called when a context holding this instrument is exited.
    fn exit_pass_ctx(&self) -> Result<(), InstrumentError> {
        Ok(())
    }

    /// Whether the pass should run; every instrument is asked, all must say yes.
    fn should_run(&self, _module: &Module, _info: &PassInfo) -> Result<bool, InstrumentError> {
        Ok(true)
    }

    /// Called before a pass runs, with its input.
    fn run_before_pass(&self, _module: &Module, _info: &PassInfo) -> Result<(), InstrumentError> {
        Ok(())
    }

    /// Called after a pass ran, with its output.
    fn run_after_pass(&self, _module: &Module, _info: &PassInfo) -> Result<(), InstrumentError> {
        Ok(())
    }

    /// passel: called (best effort, cannot fail) when this instrument's `run_before_pass`
    /// succeeded but its `run_after_pass` will not come: the pass failed, or another
    /// instrument's before or after hook failed. Lets instruments drop per-pass state. Not part
    /// of the reference's callback sequence.
    fn on_pass_failed(&self, _info: &PassInfo) {}

    /// passel: a function pass fanned out over functions; `wall` is the elapsed time of the
    /// fan-out and `busy` the summed time of its tasks (CPU time under parallel execution).
    /// Called between the pass's before- and after-hooks.
    fn record_worker_time(&self, _info: &PassInfo, _wall: Duration, _busy: Duration) {}
}

/// Where printing instruments and the `PrintIR` pass write. Default: stderr.
pub type Sink = Arc<Mutex<dyn Write + Send>>;

/// A sink writing to stderr.
pub fn stderr_sink() -> Sink {
    Arc::new(Mutex::new(std::io::stderr()))
}

/// Writes `text` to `sink`, mapping IO errors and a poisoned lock to an `InstrumentError`.
pub(crate) fn write_sink(sink: &Sink, text: &str) -> Result<(), InstrumentError> {
    let mut w = sink.lock().map_err(|_| InstrumentError::new("output sink is poisoned"))?;
    w.write_all(text.as_bytes())
        .and_then(|()| w.flush())
        .map_err(|e| InstrumentError::new(format!("write failed: {e}")))
}

/// Calls one hook, turning an error or a panic into a `PassError` naming the instrument.
pub(crate) fn call_hook<T>(
    inst: &dyn Instrument,
    hook: Hook,
    f: impl FnOnce() -> Result<T, InstrumentError>,
) -> Result<T, PassError> {
    let res = match catch_unwind(AssertUnwindSafe(f)) {
        Ok(res) => res,
        Err(payload) => Err(InstrumentError::new(panic_message(&*payload))),
    };
    res.map_err(|source| PassError::Instrument { instrument: inst.name().to_string(), hook, source })
}

/// Enters every instrument in order (rule 23: on failure, exits the ones already entered in
/// reverse order and reports the failure; the caller clears the list).
pub(crate) fn enter_all(insts: &[Arc<dyn Instrument>]) -> Result<(), PassError> {
    for (i, inst) in insts.iter().enumerate() {
        if let Err(e) = call_hook(&**inst, Hook::Enter, || inst.enter_pass_ctx()) {
            for entered in insts[..i].iter().rev() {
                // The enter failure is the error worth reporting; exit failures here are moot.
                let _ = call_hook(&**entered, Hook::Exit, || entered.exit_pass_ctx());
            }
            return Err(e);
        }
    }
    Ok(())
}

/// Exits every instrument in order, stopping at the first failure (rule 24).
pub(crate) fn exit_all(insts: &[Arc<dyn Instrument>]) -> Result<(), PassError> {
    for inst in insts {
        call_hook(&**inst, Hook::Exit, || inst.exit_pass_ctx())?;
    }
    Ok(())
}

/// The before-hook of one pass call (rule 20). Returns whether the pass runs. When a
/// `run_before_pass` fails, the instruments whose before-hook already succeeded get
/// [`Instrument::on_pass_failed`].
pub(crate) fn before_pass(
    insts: &[Arc<dyn Instrument>],
    module: &Module,
    info: &PassInfo,
    required: bool,
) -> Result<bool, PassError> {
    if !should_run(insts, module, info, required)? {
        return Ok(false);
    }
    run_before(insts, module, info)?;
    Ok(true)
}

/// The decision half of the before-hook: every instrument's `should_run` (no short-circuit),
/// skipped for a pass named in `required_pass`.
fn should_run(
    insts: &[Arc<dyn Instrument>],
    module: &Module,
    info: &PassInfo,
    required: bool,
) -> Result<bool, PassError> {
    let mut run = true;
    if !required {
        for inst in insts {
            // No short-circuit: every instrument sees should_run.
            run &= call_hook(&**inst, Hook::ShouldRun, || inst.should_run(module, info))?;
        }
    }
    Ok(run)
}

/// The second half of the before-hook: every `run_before_pass` in order. When one fails, the
/// instruments whose before-hook already succeeded get [`Instrument::on_pass_failed`].
fn run_before(insts: &[Arc<dyn Instrument>], module: &Module, info: &PassInfo) -> Result<(), PassError> {
    for (i, inst) in insts.iter().enumerate() {
        if let Err(e) = call_hook(&**inst, Hook::BeforePass, || inst.run_before_pass(module, info)) {
            insts[..i].iter().for_each(|done| done.on_pass_failed(info));
            return Err(e);
        }
    }
    Ok(())
}

/// The after-hook of one pass call (rule 21). When a `run_after_pass` fails, the instruments
/// that will not see their after-hook get [`Instrument::on_pass_failed`].
pub(crate) fn after_pass(insts: &[Arc<dyn Instrument>], module: &Module, info: &PassInfo) -> Result<(), PassError> {
    for (i, inst) in insts.iter().enumerate() {
        if let Err(e) = call_hook(&**inst, Hook::AfterPass, || inst.run_after_pass(module, info)) {
            insts[i + 1..].iter().for_each(|pending| pending.on_pass_failed(info));
            return Err(e);
        }
    }
    Ok(())
}
