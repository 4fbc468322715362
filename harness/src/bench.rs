//! `passel bench`: runs a pipeline over a generated workload serially and with each thread
//! count, and reports time, throughput, speedup over the serial run and peak heap per row.
//!
//! Rows are a general structure ([`BenchRow`]: a mode string, threads, time, peak heap, …), so
//! other kinds of runs (incremental cold / no-change / one-edit re-runs) can be measured with
//! [`measure`] and appended to a [`BenchReport`]; the table, JSON and SVG renderings take any
//! rows. Every parallel run's output is compared with the serial run's and a difference is an
//! error, so the numbers are never for a wrong result.
//!
//! After the serial and parallel rows come three incremental rows (unless
//! [`BenchConfig::incremental`] is off), run with the most threads asked for: `session-cold` (a
//! new [`Session`] loads the module and runs), `session-nochange` (the
//! same session runs again with nothing changed) and `session-edit` (one function in the middle
//! of the module gets a new, dead binding in its body — same signature — and the session runs
//! again). The cold session's output is compared with the serial run's too. Then the same three
//! for a session in [`MemoryMode::Lean`]: `lean-cold`, `lean-nochange`, `lean-edit`.
//!
//! `--cache` adds whole runs with a persistent cache (`cache.rs`: `cache-cold`, `cache-fill`,
//! `cache-nochange`, `cache-edit`) and the cache's bytes per function.
//!
//! `--model FILE.onnx` benches a real model instead (`model.rs`): `import`, the same serial
//! and parallel rows, and `print`, with peak memory against the model's weight bytes.

mod alloc;
pub mod cache;
mod cli;
pub mod model;
pub(crate) mod report;

pub use alloc::CountingAlloc;
pub use cache::CacheSize;
pub use cli::{parse_threads, run_cli, BenchArgs, DEFAULT_PIPELINE};
pub use model::ModelInfo;
pub use report::{BenchReport, Machine};

use std::sync::Arc;
use std::time::{Duration, Instant};

use passel_engine::ir::{parse_module, print_module, Function, Module, ParseErrors};
use passel_engine::transform::{Pass, PassError, Sequential, Severity};
use passel_engine::{MemoryMode, Session, SessionError};

use crate::args::{OptionsError, PipelineArgs};
use crate::files::FileError;
use passel_passes::standard_session;

/// Why `passel bench` stops: bad options, a run that fails, or a run whose output differs from
/// the reference run's (numbers are never reported for a wrong result).
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// Pipeline options that do not make a pipeline and context.
    #[error(transparent)]
    Options(#[from] OptionsError),
    /// `--threads` that is no list of thread counts.
    #[error(transparent)]
    Threads(#[from] ThreadListError),
    /// `--ops` with a workload other than `chain`.
    #[error("--ops applies only to --workload chain, not `{0}`")]
    OpsWithoutChain(String),
    /// `--input-shape` without `--model`.
    #[error("--input-shape applies only to --model")]
    InputShapeWithoutModel,
    /// `--model` naming something other than an ONNX file.
    #[error("--model {}: expected an ONNX model (a .onnx file)", .0.display())]
    NotOnnx(std::path::PathBuf),
    /// An unknown `--workload` or too large a generated one.
    #[error(transparent)]
    Gen(#[from] crate::gen::GenError),
    /// The model cannot be read or imported, or an `--input-shape` is malformed.
    #[error(transparent)]
    Onnx(#[from] crate::onnx::OnnxError),
    /// A file cannot be read or written (the model, `--json`, `--svg`).
    #[error(transparent)]
    File(#[from] FileError),
    /// A pipeline run failed, or its context could not be made.
    #[error(transparent)]
    Pass(#[from] PassError),
    /// A session run failed.
    #[error(transparent)]
    Session(#[from] SessionError),
    /// The cache of the `cache-…` rows could not be opened or cleared.
    #[error(transparent)]
    Cache(#[from] passel_cache::CacheError),
    /// The temporary directory of the `cache-…` rows could not be made.
    #[error("cannot make a temporary cache directory: {0}")]
    TempDir(std::io::Error),
    /// A pass reported an error diagnostic on the workload.
    #[error("pass {pass} reported an error{} on the workload: {message}", in_function(function))]
    Reported {
        /// The pass.
        pass: String,
        /// The function it reported on, if any.
        function: Option<String>,
        /// The diagnostic's message.
        message: String,
    },
    /// A run printed another module than the run it is checked against (never expected).
    #[error("{run} printed a different module than {reference}")]
    Differs {
        /// The run: `the cache-fill run`, `parallel run with 2 threads`, ….
        run: String,
        /// What it was checked against.
        reference: &'static str,
    },
    /// The function the edit rows edit has no `def` line in the printed module.
    #[error("cannot find the definition of @{0} to edit")]
    NoDefinition(String),
    /// The printed module, or its edited form, does not parse back.
    #[error("{what} does not parse: {errors}")]
    Reparse {
        /// `the printed workload`, `edited @f`.
        what: String,
        /// The parser's errors.
        errors: ParseErrors,
    },
    /// The edited module does not hold the edited function.
    #[error("edited module lost @{0}")]
    EditLost(String),
    /// A row measured no run (its repetitions or thread counts were empty).
    #[error("no run was measured for {0}")]
    NothingMeasured(String),
    /// Standard error is gone (a note could not be written).
    #[error("cannot write to stderr")]
    Stderr,
}

fn in_function(function: &Option<String>) -> String {
    function.as_deref().map(|f| format!(" in @{f}")).unwrap_or_default()
}

/// A `--threads` list that is not one ([`parse_threads`]).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ThreadListError {
    /// Two commas with nothing between them.
    #[error("empty entry in thread list `{list}` (expected e.g. `1,2,4`)")]
    Empty {
        /// The whole list.
        list: String,
    },
    /// An entry that is not a number.
    #[error("`{entry}` in thread list `{list}` is not a number")]
    NotANumber {
        /// The entry.
        entry: String,
        /// The whole list.
        list: String,
    },
    /// A count outside `1..=1024`.
    #[error("thread count {0} is out of range 1..=1024")]
    OutOfRange(usize),
}

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
    /// Functions the row processed (for functions/s): the whole input, except in a
    /// `session-edit` / `lean-edit` row, where it is the functions the edit run recomputed.
    pub functions: usize,
    /// Bindings of those functions (for bindings/s).
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
    /// The pipeline.
    pub pipeline: &'a Sequential,
    /// The options of the pass context (`-O`, `--require`, `--disable`, `--config`).
    pub options: &'a PipelineArgs,
    /// Thread counts for the parallel rows.
    pub threads: &'a [usize],
    /// Repetitions per row; the best time counts.
    pub repeats: usize,
    /// Also measure the incremental session (cold, no-change and one-edit runs).
    pub incremental: bool,
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
    mut run: impl FnMut() -> Result<T, BenchError>,
) -> Result<(BenchRow, T), BenchError> {
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
        None => Err(BenchError::NothingMeasured(mode.to_string())),
    }
}

/// Runs the serial row and one parallel row per thread count; `progress` is called after
/// each run. Errors if the context options are wrong, a run fails, or a parallel run's output
/// differs from the serial one (it never should).
pub fn run_bench(cfg: &BenchConfig<'_>, progress: &mut dyn FnMut()) -> Result<Vec<BenchRow>, BenchError> {
    let mut rows = Vec::new();
    let mut after_serial = || {};
    let runs = pipeline_rows(cfg, &mut after_serial, progress)?;
    rows.extend(runs.rows);
    if cfg.incremental {
        let threads = cfg.threads.iter().copied().max().unwrap_or(1);
        rows.extend(incremental_rows(cfg, threads, &runs.text, progress)?);
    }
    Ok(rows)
}

/// The serial and parallel rows of [`run_bench`], the output module and its printed text.
pub struct PipelineRuns {
    /// `serial`, then one `parallel` row per thread count.
    pub rows: Vec<BenchRow>,
    /// The output of the last run.
    pub output: Module,
    /// The output's text (every run printed the same).
    pub text: String,
}

/// One untimed warm-up run, the serial row and one parallel row per thread count of
/// `cfg.pipeline` on `cfg.module`; `after_serial` is called right after the serial row (before its
/// output is printed). Errors if a run fails, a pass reports an error, or a parallel run's
/// output differs from the serial one (it never should).
pub fn pipeline_rows(
    cfg: &BenchConfig<'_>,
    after_serial: &mut dyn FnMut(),
    progress: &mut dyn FnMut(),
) -> Result<PipelineRuns, BenchError> {
    let size = (cfg.module.len(), count_bindings(cfg.module));
    let context =
        |threads: usize| -> Result<_, BenchError> { Ok(cfg.options.context()?.num_threads(threads).build()?) };
    let pipeline = cfg.pipeline;
    // One untimed run pays one-time costs (registries, thread pool start-up, page faults).
    let warm = context(1)?;
    let warm_out = warm.scope(|| pipeline.run(cfg.module.clone(), &warm))??;
    drop(warm_out);
    if let Some(d) = warm.diagnostics().take().into_iter().find(|d| d.severity == Severity::Error) {
        return Err(BenchError::Reported {
            pass: d.pass.to_string(),
            function: d.function.as_deref().map(str::to_string),
            message: d.message.to_string(),
        });
    }
    let mut rows = Vec::new();
    let mut reference: Option<u64> = None;
    let mut last = None;
    let configs: Vec<_> = std::iter::once(("serial", 1)).chain(cfg.threads.iter().map(|&t| ("parallel", t))).collect();
    for (i, &(mode, threads)) in configs.iter().enumerate() {
        let ctx = context(threads)?;
        let (row, output) = measure(mode, threads, size, cfg.repeats, cfg.heap, progress, || {
            let input = cfg.module.clone();
            let out = ctx.scope(|| pipeline.run(input, &ctx))?;
            // Diagnostics would pile up over repetitions; the serial/parallel check is on text.
            drop(ctx.diagnostics().take());
            Ok(out?)
        })?;
        if mode == "serial" {
            after_serial();
        }
        // Compared by a hash of the text, so that no row's heap holds the serial output's
        // text (on a model, twice its weight bytes: the parallel rows' peak counted it).
        let text = {
            use std::hash::{Hash, Hasher};
            let mut h = std::collections::hash_map::DefaultHasher::new();
            print_module(&output).hash(&mut h);
            h.finish()
        };
        match &reference {
            None => reference = Some(text),
            Some(r) if *r != text => {
                return Err(BenchError::Differs {
                    run: format!("{mode} run with {threads} threads"),
                    reference: "the serial run",
                })
            }
            Some(_) => {}
        }
        // Only the last output is kept, so no row's heap includes an earlier row's output.
        if i + 1 == configs.len() {
            last = Some(output);
        }
        rows.push(row);
    }
    match (reference, last) {
        (Some(_), Some(output)) => {
            let text = print_module(&output);
            Ok(PipelineRuns { rows, output, text })
        }
        _ => Err(BenchError::NothingMeasured("the pipeline rows".to_string())),
    }
}

/// The `session-…` and `lean-…` rows (see the module doc).
fn incremental_rows(
    cfg: &BenchConfig<'_>,
    threads: usize,
    reference: &str,
    progress: &mut dyn FnMut(),
) -> Result<Vec<BenchRow>, BenchError> {
    let mut rows = session_rows(cfg, threads, reference, MemoryMode::Full, progress)?;
    rows.extend(session_rows(cfg, threads, reference, MemoryMode::Lean, progress)?);
    Ok(rows)
}

/// The cold, no-change and edit rows of a session in memory mode `mode`.
fn session_rows(
    cfg: &BenchConfig<'_>,
    threads: usize,
    reference: &str,
    mode: MemoryMode,
    progress: &mut dyn FnMut(),
) -> Result<Vec<BenchRow>, BenchError> {
    let labels = match mode {
        MemoryMode::Full => ["session-cold", "session-nochange", "session-edit"],
        MemoryMode::Lean => ["lean-cold", "lean-nochange", "lean-edit"],
    };
    let size = (cfg.module.len(), count_bindings(cfg.module));
    let ctx = cfg.options.context()?.num_threads(threads).build()?;
    let Some((name, original)) = cfg.module.entries().get(cfg.module.len() / 2).cloned() else {
        return Ok(Vec::new());
    };
    let edited = with_dead_binding(cfg.module, &name)?;
    let new_session = || -> Result<Session, BenchError> {
        let mut session = standard_session(cfg.pipeline.clone(), &ctx)?;
        session.set_memory_mode(mode);
        session.load(cfg.module);
        Ok(session)
    };
    let (cold, mut session) = measure(labels[0], threads, size, cfg.repeats, cfg.heap, progress, || {
        let mut session = new_session()?;
        session.run()?;
        Ok(session)
    })?;
    let out = session.run()?;
    if print_module(&out.module) != reference {
        return Err(BenchError::Differs {
            run: format!("the incremental session ({mode:?} mode)"),
            reference: "the serial run",
        });
    }
    drop(out);
    let (no_change, ()) =
        measure(labels[1], threads, size, cfg.repeats, cfg.heap, progress, || Ok(session.run().map(drop)?))?;
    // Alternate between the edited and the original body, so every timed run has an edit to
    // process; only the run itself is timed, not the setter.
    let mut flip = false;
    let (mut edit, recomputed) = measure(labels[2], threads, size, cfg.repeats, cfg.heap, progress, || {
        flip = !flip;
        session.set_function(&name, if flip { edited.clone() } else { original.clone() });
        Ok(session.run().map(|out| out.stats.recomputed_functions())?)
    })?;
    // The row counts what the edit run recomputed, not the whole module.
    let module = session.module();
    edit.functions = recomputed.len();
    edit.bindings = recomputed.iter().filter_map(|n| module.get(n)).map(|f| f.num_bindings()).sum();
    Ok(vec![cold, no_change, edit])
}

/// `name`'s function from `module` with one more, dead, binding at the start of its body: a
/// body edit that keeps the signature. Done on the text, so it works for any workload.
fn with_dead_binding(module: &Module, name: &str) -> Result<Arc<Function>, BenchError> {
    let edited = cache::edited_text(&print_module(module), name, 1)?;
    let module =
        parse_module(&edited).map_err(|errors| BenchError::Reparse { what: format!("edited @{name}"), errors })?;
    module.get(name).cloned().ok_or_else(|| BenchError::EditLost(name.to_string()))
}
