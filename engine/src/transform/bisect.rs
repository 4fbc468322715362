//! opt-bisect (LLVM's `-opt-bisect-limit`): run only the first N optional pass executions.
//!
//! An execution is one (function pass, function) pair, or one call of a module pass. They are
//! numbered from 1 in the serial order — pass by pass, and within a function pass in the
//! module's function order — and each number is computed on the coordinating thread before the
//! fan-out (a pass reserves one number per function it will visit), never taken from a counter
//! that workers race on, so the numbering and the `BISECT:` lines are the same at any thread
//! count. While bisecting, the executor runs stages pass by pass (no fusion). Executions past
//! the limit are skipped (the function or module is left as it is).
//!
//! Required passes are never skipped and get no number, as in LLVM: passes the context
//! requires (`required_pass`) and passes at opt level 0 (the passes TVM runs at every opt level,
//! such as InferType). Sequentials are not executions; their passes are.

use std::sync::atomic::{AtomicU64, Ordering};

use super::error::PassError;
use super::instrument::{write_sink, Sink};

/// The opt-bisect state of a run: the limit, the next execution number and where the
/// `BISECT:` lines go.
pub struct OptBisect {
    limit: u64,
    next: AtomicU64,
    sink: Sink,
}

impl std::fmt::Debug for OptBisect {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OptBisect").field("limit", &self.limit).field("executions", &self.executions()).finish()
    }
}

impl OptBisect {
    /// Runs executions 1 ..= `limit`, writing one line per execution to `sink`.
    pub fn new(limit: u64, sink: Sink) -> OptBisect {
        OptBisect { limit, next: AtomicU64::new(0), sink }
    }

    /// How many executions were numbered so far (after a run: the run's total).
    pub fn executions(&self) -> u64 {
        self.next.load(Ordering::Relaxed)
    }

    /// Reserves `n` consecutive numbers and returns the first. Called on the coordinating
    /// thread only, in the serial order.
    pub(crate) fn reserve(&self, n: u64) -> u64 {
        self.next.fetch_add(n, Ordering::Relaxed) + 1
    }

    /// Whether execution `k` runs.
    pub(crate) fn allows(&self, k: u64) -> bool {
        k <= self.limit
    }

    /// Writes `BISECT: running pass (K) NAME on TARGET` or `BISECT: NOT running …`.
    pub(crate) fn report(&self, k: u64, pass: &str, target: &str) -> Result<(), PassError> {
        let not = if self.allows(k) { "" } else { "NOT " };
        write_sink(&self.sink, &format!("BISECT: {not}running pass ({k}) {pass} on {target}\n"))
            .map_err(|e| PassError::msg(format!("opt-bisect: {}", e.message)))
    }
}
