//! Crash reproducers (MLIR's `--mlir-pass-pipeline-crash-reproducer`): the engine side.
//!
//! [`ReproducerInstrument`] keeps the input of every running pass call (an O(1) shared copy;
//! the functions a pass replaces stay alive until it returns, and the pipeline's own input until
//! the run ends) and records the first call that failed: the innermost call that returned an error or
//! panicked, or a call that reported an error diagnostic. [`reproducer_pipeline`] names the
//! pipeline to replay from that call on (the failing pass alone, or it and everything the run
//! would have called after it), and [`Module::reachable_from`](crate::ir::Module::reachable_from)
//! cuts its input down to the failing function and what it references. Writing the file is the
//! harness's job (`passel run --reproducer FILE`).
//!
//! Like every instrument, it makes the executor run pass by pass while it is active (no
//! fusion), so every hook sees exactly the module of the serial run: the recorded input does
//! not depend on the thread count. Error diagnostics are read from the innermost entered
//! context ([`PassContext::current`]) on the coordinating thread, so they are seen when the
//! run's context is entered (`ctx.scope(..)`), as `passel run` does.

use std::sync::{Mutex, MutexGuard, PoisonError};

use crate::ir::Module;
use crate::transform::context::PassContext;
use crate::transform::diagnostics::Diagnostic;
use crate::transform::error::{InstrumentError, PassError};
use crate::transform::info::PassInfo;
use crate::transform::instrument::Instrument;
use crate::transform::pass::PassKind;
use crate::transform::pass::Sequential;
use crate::transform::plan::planned_calls;
use crate::transform::registry::canonical_pass_name;

/// The first failing pass call of a run.
#[derive(Clone, Debug)]
pub struct PassFailure {
    /// The call's number among every pass call of the run, sequentials included, from 1 in
    /// the order the instruments see them (an index into [`planned_calls`] plus one).
    pub call: usize,
    /// The pass.
    pub pass: String,
    /// The module the pass was given.
    pub input: Module,
    /// The first error diagnostic the pass reported, when that is how it failed (the run went
    /// on); `None` when the pass returned an error or panicked.
    pub diagnostic: Option<Diagnostic>,
}

impl PassFailure {
    /// The function the failure names: the diagnostic's, or the one of `run_error` (what the
    /// run returned) when that error is this pass's (`in pass P on function @f: …`).
    pub fn function(&self, run_error: Option<&PassError>) -> Option<String> {
        match (&self.diagnostic, run_error) {
            (Some(d), _) => d.function.clone(),
            (None, Some(PassError::InPass { pass, function, .. })) if *pass == self.pass => function.clone(),
            _ => None,
        }
    }

    /// The failure as text, to compare a replay with the run: the first error diagnostic as
    /// `PASS @FUNC: MESSAGE`, else `run_error`'s text.
    pub fn message(&self, run_error: Option<&PassError>) -> Option<String> {
        match &self.diagnostic {
            Some(d) => {
                let func = d.function.as_ref().map(|f| format!(" @{f}")).unwrap_or_default();
                Some(format!("{}{func}: {}", d.pass, d.message))
            }
            None => run_error.map(|e| e.to_string()),
        }
    }
}

#[derive(Default)]
struct State {
    calls: usize,
    // Running calls, outermost first: number, input, diagnostics count when it started.
    running: Vec<(usize, Module, usize)>,
    failure: Option<PassFailure>,
}

/// Records the input of the first failing pass call (see the module docs).
#[derive(Default)]
pub struct ReproducerInstrument {
    state: Mutex<State>,
    stop: bool,
}

impl ReproducerInstrument {
    /// Records nothing until a pass fails.
    pub fn new() -> ReproducerInstrument {
        ReproducerInstrument::default()
    }

    /// Builder form: once a pass reported an error diagnostic, fail its after-hook, so the run
    /// stops there instead of going on (a replay that only needs the first failure).
    pub fn stop_at_failure(mut self) -> ReproducerInstrument {
        self.stop = true;
        self
    }

    /// The first failing call of the last run under a context holding this instrument.
    pub fn failure(&self) -> Option<PassFailure> {
        self.state().failure.clone()
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

fn diagnostics_count() -> usize {
    PassContext::current().diagnostics().len()
}

impl Instrument for ReproducerInstrument {
    fn name(&self) -> &str {
        "ReproducerInstrument"
    }

    fn enter_pass_ctx(&self) -> Result<(), InstrumentError> {
        *self.state() = State::default();
        Ok(())
    }

    fn exit_pass_ctx(&self) -> Result<(), InstrumentError> {
        self.state().running.clear();
        Ok(())
    }

    fn run_before_pass(&self, module: &Module, _info: &PassInfo) -> Result<(), InstrumentError> {
        let count = diagnostics_count();
        let mut state = self.state();
        state.calls += 1;
        let call = state.calls;
        state.running.push((call, module.clone(), count));
        Ok(())
    }

    fn run_after_pass(&self, _module: &Module, info: &PassInfo) -> Result<(), InstrumentError> {
        let Some((call, input, count)) = self.state().running.pop() else {
            return Ok(());
        };
        // Inner calls end first, so the innermost call that reported the error records it.
        if self.state().failure.is_none() {
            if let Some(diagnostic) = PassContext::current().diagnostics().first_error_from(count) {
                self.state().failure =
                    Some(PassFailure { call, pass: info.name.clone(), input, diagnostic: Some(diagnostic) });
                if self.stop {
                    return Err(InstrumentError::new("stopping at the first failing pass"));
                }
            }
        }
        Ok(())
    }

    fn on_pass_failed(&self, info: &PassInfo) {
        let mut state = self.state();
        if let Some((call, input, _)) = state.running.pop() {
            if state.failure.is_none() {
                state.failure = Some(PassFailure { call, pass: info.name.clone(), input, diagnostic: None });
            }
        }
    }
}

/// Why a reproducer's pipeline cannot be named.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum ReproducerError {
    /// A pass of the pipeline is not in the registry, so pipeline text cannot name it.
    #[error("pass `{0}` is not registered, so a reproducer pipeline cannot name it")]
    Unregistered(String),
    /// The failing call is not the call of that number in the pipeline's plan (an instrument
    /// vetoed a pass, or opt-bisect skipped one).
    #[error("pass call {call} ({pass}) is not in the plan of the pipeline")]
    NotInPlan {
        /// The call's number.
        call: usize,
        /// The failing pass.
        pass: String,
    },
    /// The pipeline cannot be planned (a required pass is not registered).
    #[error(transparent)]
    Plan(#[from] PassError),
}

/// The textual pipeline that replays `failure` from its input: with `local`, the failing pass
/// alone; else the failing pass and every pass `seq` would have called after it under `ctx`,
/// nested sequentials spelled out as their passes (their required passes too). A required
/// dependency is left out when the pass that requires it is named (a `Sequential` runs it
/// again), except the failing call itself, so the replay runs the same passes in the same order
/// (the dependencies of the failing pass run once more on its input: InferType, which changes
/// nothing on a module it has just typed).
pub fn reproducer_pipeline(
    seq: &Sequential,
    ctx: &PassContext,
    failure: &PassFailure,
    local: bool,
) -> Result<String, ReproducerError> {
    let calls = planned_calls(seq, ctx)?;
    let start =
        failure.call.checked_sub(1).filter(|&i| calls.get(i).is_some_and(|c| c.pass.info().name == failure.pass));
    let Some(start) = start else {
        return Err(ReproducerError::NotInPlan { call: failure.call, pass: failure.pass.clone() });
    };
    let is_seq = |i: usize| calls[i].pass.kind() == PassKind::Sequential;
    let mut names = Vec::new();
    for (i, call) in calls.iter().enumerate().skip(start) {
        // A sequential is spelled out as its calls, unless it is the failing call of a local
        // reproducer.
        let named = if is_seq(i) { local } else { i == start || call.required_by.is_none_or(is_seq) };
        if named {
            let name = &call.pass.info().name;
            if canonical_pass_name(name) != Some(name.as_str()) {
                return Err(ReproducerError::Unregistered(name.clone()));
            }
            names.push(name.clone());
        }
        if local {
            break;
        }
    }
    Ok(names.join(","))
}
