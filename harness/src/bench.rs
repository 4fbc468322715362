//! `passel bench`: runs a pipeline over a generated workload serially and with each thread
//! count, and reports time, throughput, speedup over the serial run and peak heap per row.
//!
//! Rows are a general structure ([`BenchRow`]: a mode string, threads, time, peak heap, …), so
//! other kinds of runs (incremental cold / no-change / one-edit re-runs) can be measured with
//! [`measure`] and appended to a [`BenchReport`]; the table, JSON and SVG renderings take any
//! rows. Every parallel run's output is compared with the serial run's and a difference is an
//! error, so the numbers are never for a wrong result.

mod alloc;
mod cli;
mod report;

pub use alloc::CountingAlloc;
pub use cli::{parse_threads, run_cli, BenchArgs, DEFAULT_PIPELINE};
pub use report::{BenchReport, Machine};

use std::time::{Duration, Instant};

use passel_engine::ir::{print_module, Module};
use passel_engine::transform::{parse_pipeline, Pass, PassContext, Severity};

/// One measured configuration.
#[derive(Clone, Debug, PartialEq)]
pub struct BenchRow {
    /// What ran: `serial`, `parallel`, or any other label (`incremental-cold`, …).
    pub mode: String,
    /// Worker threads.
    pub threads: usize,
    /// Best wall time over the repetitions.
    pub time: Duration,
    /// Repetitions measured.
    pub repeats: usize,
    /// Functions of the input the row processed (for functions/s).
    pub functions: usize,
    /// Bindings of the input the row processed (for bindings/s).
    pub bindings: usize,
    /// Peak live heap bytes during the row, when the counting allocator is installed.
    pub peak_heap: Option<u64>,
    /// Live heap bytes when the row started (the input module and the rest of the process).
    pub base_heap: Option<u64>,
}

/// What to run.
pub struct BenchConfig<'a> {
    /// The input module.
    pub module: &'a Module,
    /// Textual pipeline.
    pub pipeline: &'a str,
    /// Thread counts for the parallel rows.
    pub threads: &'a [usize],
    /// Repetitions per row; the best time counts.
    pub repeats: usize,
    /// The installed counting allocator, if any.
    pub heap: Option<&'a CountingAlloc>,
}

/// Bindings of every function of `module`.
pub fn count_bindings(module: &Module) -> usize {
    module.iter().map(|(_, f)| f.num_bindings()).sum()
}

/// Measures `run` `repeats` times (at least once) as a row labelled `mode`: the best time, and
/// the peak heap over all repetitions. `progress` is called after each repetition. The result
/// of the last repetition is returned; earlier ones are dropped before the next starts, so the
/// peak covers one run's live data.
pub fn measure<T>(
    mode: &str,
    threads: usize,
    (functions, bindings): (usize, usize),
    repeats: usize,
    heap: Option<&CountingAlloc>,
    progress: &mut dyn FnMut(),
    mut run: impl FnMut() -> Result<T, String>,
) -> Result<(BenchRow, T), String> {
    let base = heap.map(|h| h.reset_peak());
    let mut best = Duration::MAX;
    let mut last = None;
    for _ in 0..repeats.max(1) {
        drop(last.take());
        let start = Instant::now();
        let out = run()?;
        best = best.min(start.elapsed());
        last = Some(out);
        progress();
    }
    let peak = heap.map(|h| h.peak());
    let row = BenchRow {
        mode: mode.to_string(),
        threads,
        time: best,
        repeats: repeats.max(1),
        functions,
        bindings,
        peak_heap: peak,
        base_heap: base,
    };
    match last {
        Some(out) => Ok((row, out)),
        None => Err("no repetition ran".to_string()),
    }
}

/// Runs the serial row and one parallel row per thread count; `progress` is called after
/// each run. Errors if the pipeline does not parse, a run fails, or a parallel run's output
/// differs from the serial one (it never should).
pub fn run_bench(cfg: &BenchConfig<'_>, progress: &mut dyn FnMut()) -> Result<Vec<BenchRow>, String> {
    passel_passes::link();
    let pipeline = parse_pipeline(cfg.pipeline).map_err(|e| e.to_string())?;
    let size = (cfg.module.len(), count_bindings(cfg.module));
    // One untimed run pays one-time costs (registries, thread pool start-up, page faults).
    let warm = PassContext::builder().opt_level(3).num_threads(1).build().map_err(|e| e.to_string())?;
    warm.scope(|| pipeline.run(cfg.module.clone(), &warm)).map_err(|e| e.to_string())?.map_err(|e| e.to_string())?;
    if let Some(d) = warm.diagnostics().take().into_iter().find(|d| d.severity == Severity::Error) {
        let func = d.function.as_deref().map(|f| format!(" in @{f}")).unwrap_or_default();
        return Err(format!("pass {} reported an error{func} on the workload: {}", d.pass, d.message));
    }
    let mut rows = Vec::new();
    let mut reference: Option<String> = None;
    let configs = std::iter::once(("serial", 1)).chain(cfg.threads.iter().map(|&t| ("parallel", t)));
    for (mode, threads) in configs {
        let ctx = PassContext::builder().opt_level(3).num_threads(threads).build().map_err(|e| e.to_string())?;
        let (row, output) = measure(mode, threads, size, cfg.repeats, cfg.heap, progress, || {
            let input = cfg.module.clone();
            let out = ctx.scope(|| pipeline.run(input, &ctx)).map_err(|e| e.to_string())?.map_err(|e| e.to_string());
            // Diagnostics would pile up over repetitions; the serial/parallel check is on text.
            drop(ctx.diagnostics().take());
            out
        })?;
        let text = print_module(&output);
        drop(output);
        match &reference {
            None => reference = Some(text),
            Some(r) if *r != text => {
                return Err(format!("{mode} run with {threads} threads printed a different module than the serial run"))
            }
            Some(_) => {}
        }
        rows.push(row);
    }
    Ok(rows)
}
