//! Measures the incremental session on a workload: a non-incremental parallel run for
//! reference, a cold session run, a re-run with no change, and a re-run after one function's
//! body was edited (same signature). `passel bench` prints these next to its serial/parallel
//! table; the criterion bench `benches/benches/incremental.rs` measures the same three runs.

use std::sync::Arc;
use std::time::{Duration, Instant};

use passel_engine::ir::{Function, Module};
use passel_engine::transform::{PassContext, Sequential};
use passel_engine::{MemoryMode, Pass, SessionError};

use passel_passes::standard_session;

/// Best-of-`repeats` times of the incremental runs.
#[derive(Clone, Debug, PartialEq)]
pub struct IncrementalTimes {
    /// The pipeline run directly (no session) under the same context.
    pub plain: Duration,
    /// A fresh session's first run.
    pub cold: Duration,
    /// A re-run with nothing changed.
    pub no_change: Duration,
    /// A re-run after one function's body changed, same signature.
    pub one_edit: Duration,
    /// Function stages recomputed by the one-edit re-run (summed over stages).
    pub edit_recomputed: usize,
}

/// Runs the measurement with [`standard_session`] in memory mode `mode`. `edit` is the
/// function `name` is replaced with (and back, on alternate repeats), so every edit re-run
/// really has a change to process.
pub fn measure_incremental(
    module: &Module,
    pipeline: &Sequential,
    ctx: &PassContext,
    mode: MemoryMode,
    name: &str,
    edit: Arc<Function>,
    repeats: usize,
) -> Result<IncrementalTimes, SessionError> {
    let repeats = repeats.max(1);
    let original = module
        .get(name)
        .cloned()
        .ok_or_else(|| SessionError::Module(passel_engine::ir::ModuleError::Unknown(name.to_string())))?;
    let mut best = IncrementalTimes {
        plain: Duration::MAX,
        cold: Duration::MAX,
        no_change: Duration::MAX,
        one_edit: Duration::MAX,
        edit_recomputed: 0,
    };
    // Plain and session runs alternate, so drift in the machine's speed (other load, memory
    // state) affects both alike; the best of each is kept.
    for _ in 0..repeats {
        let start = Instant::now();
        let plain = ctx.scope(|| pipeline.run(module.clone(), ctx)).map_err(SessionError::Pass)?;
        best.plain = best.plain.min(start.elapsed());
        drop(plain?);

        let mut session = standard_session(pipeline.clone(), ctx)?;
        session.set_memory_mode(mode);
        session.load(module);
        let start = Instant::now();
        let cold = session.run()?;
        best.cold = best.cold.min(start.elapsed());
        drop(cold);

        let start = Instant::now();
        session.run()?;
        best.no_change = best.no_change.min(start.elapsed());

        for (i, version) in [&edit, &original].into_iter().enumerate() {
            let start = Instant::now();
            session.set_function(name, version.clone());
            let out = session.run()?;
            let took = start.elapsed();
            if i == 0 && took < best.one_edit {
                best.one_edit = took;
                best.edit_recomputed = out.stats.function_stages().map(|s| s.recomputed.len()).sum();
            }
        }
    }
    Ok(best)
}

/// Renders the times as table rows (seconds and ratios to the cold session run).
pub fn render_incremental(t: &IncrementalTimes) -> String {
    let secs = |d: Duration| d.as_secs_f64();
    let ratio = |d: Duration| if t.cold.is_zero() { 0.0 } else { secs(d) / secs(t.cold) };
    format!(
        "{:<28} {:>12.6} s\n{:<28} {:>12.6} s  ({:.3}x plain)\n{:<28} {:>12.6} s  (1/{:.0} of cold)\n{:<28} {:>12.6} s  (1/{:.0} of cold, {} function stages recomputed)\n",
        "plain parallel run",
        secs(t.plain),
        "session cold run",
        secs(t.cold),
        if t.plain.is_zero() { 0.0 } else { secs(t.cold) / secs(t.plain) },
        "session no-change re-run",
        secs(t.no_change),
        1.0 / ratio(t.no_change).max(f64::MIN_POSITIVE),
        "session one-edit re-run",
        secs(t.one_edit),
        1.0 / ratio(t.one_edit).max(f64::MIN_POSITIVE),
        t.edit_recomputed,
    )
}
