//! `passel bench --model FILE.onnx`: the bench rows for a real model instead of a generated
//! workload. Rows: `import` (map the file, decode, verify: what `passel import` does before
//! printing), `serial` and `parallel` (the pipeline, through the same [`pipeline_rows`] as
//! generated workloads, so parallel outputs are checked against the serial one), and `print`
//! (the pipeline's output as `.pir` text, large constants in the resource section).
//!
//! Memory is measured two ways, both over import + the serial pipeline run (the peak a
//! `passel run MODEL.onnx -O3 -j1` reaches before printing):
//! - peak heap, from the counting allocator (`alloc.rs`): bytes passel allocated. A model file
//!   under 1 MiB is read into the heap and counts; a larger one is mapped (the engine's
//!   `frontend/onnx/mapped.rs`) and does not. Weights stay `Constant::Raw` slices of the file's
//!   bytes until a pass copies them;
//! - peak RSS, the kernel's high-water mark of resident memory (`VmHWM` in
//!   `/proc/self/status`, reset through `/proc/self/clear_refs` before the import; Linux only):
//!   heap, the touched pages of a mapped model file, code and thread stacks.
//!
//! Both are reported next to the model's weight bytes: the bytes of the imported module's
//! constants at their dtype's size (initializers, `Constant` nodes and `ConstantOfShape` fills
//! alike, each counted once), i.e. what the weights occupy once materialized.

use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;

use passel_engine::frontend::onnx::ImportOptions;
use passel_engine::ir::{print_module, ExprKind, Module};
use passel_engine::transform::Sequential;

use super::{count_bindings, measure, pipeline_rows, BenchConfig, BenchError, BenchRow, CountingAlloc};
use crate::args::PipelineArgs;
use crate::files::FileError;
use crate::onnx;

/// What `passel bench --model` measured besides the rows.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelInfo {
    /// The model file as given.
    pub path: String,
    /// Size of the model file.
    pub file_bytes: u64,
    /// Bytes of the imported module's constants (see the module doc).
    pub weight_bytes: u64,
    /// Live operator calls before the pipeline (calls inside nested functions included).
    pub ops_before: usize,
    /// Live operator calls after the pipeline.
    pub ops_after: usize,
    /// Peak live heap over import + the serial pipeline run, when the counting allocator is
    /// installed.
    pub peak_heap: Option<u64>,
    /// Peak resident set over import + the serial pipeline run (Linux).
    pub peak_rss: Option<u64>,
}

/// What to run for a model.
pub struct ModelBench<'a> {
    /// The `.onnx` file.
    pub path: &'a Path,
    /// Import options (`--input-shape`).
    pub import: &'a ImportOptions,
    /// The pipeline.
    pub pipeline: &'a Sequential,
    /// The options of the pass context.
    pub options: &'a PipelineArgs,
    /// Thread counts for the parallel rows.
    pub threads: &'a [usize],
    /// Repetitions per row; the best time counts.
    pub repeats: usize,
    /// The installed counting allocator, if any.
    pub heap: Option<&'a CountingAlloc>,
}

/// Runs the model rows (`import`, `serial`, `parallel` per thread count, `print`).
pub fn run_model_bench(
    cfg: &ModelBench<'_>,
    progress: &mut dyn FnMut(),
) -> Result<(Vec<BenchRow>, ModelInfo), BenchError> {
    if !onnx::is_onnx(cfg.path) {
        return Err(BenchError::NotOnnx(cfg.path.to_path_buf()));
    }
    let file_bytes =
        std::fs::metadata(cfg.path).map_err(|source| FileError::Read { path: cfg.path.to_path_buf(), source })?.len();
    passel_passes::link();
    let rss_reset = reset_peak_rss();
    let (mut import, module) =
        measure("import", 1, (0, 0), cfg.repeats, cfg.heap, progress, || Ok(onnx::import_onnx(cfg.path, cfg.import)?))?;
    (import.functions, import.bindings) = (module.len(), count_bindings(&module));
    let bench = BenchConfig {
        module: &module,
        pipeline: cfg.pipeline,
        options: cfg.options,
        threads: cfg.threads,
        repeats: cfg.repeats,
        incremental: false,
        heap: cfg.heap,
    };
    let mut peak_rss = None;
    let mut after_serial = || peak_rss = rss_reset.then(read_peak_rss).flatten();
    let runs = pipeline_rows(&bench, &mut after_serial, progress)?;
    let size = (runs.output.len(), count_bindings(&runs.output));
    let (print, text) = measure("print", 1, size, cfg.repeats, cfg.heap, progress, || Ok(print_module(&runs.output)))?;
    drop(text);
    let serial_peak = runs.rows.first().and_then(|r| r.peak_heap);
    let info = ModelInfo {
        path: cfg.path.display().to_string(),
        file_bytes,
        weight_bytes: weight_bytes(&module),
        ops_before: count_ops(&module),
        ops_after: count_ops(&runs.output),
        peak_heap: import.peak_heap.max(serial_peak),
        peak_rss,
    };
    let mut rows = vec![import];
    rows.extend(runs.rows);
    rows.push(print);
    Ok((rows, info))
}

/// Live operator calls of every function (nested functions included).
pub fn count_ops(m: &Module) -> usize {
    m.iter()
        .map(|(_, f)| {
            let live = f.live_mask();
            f.node_ids().filter(|&id| live[id.index()] && matches!(f.kind(id), ExprKind::Call { .. })).count()
        })
        .sum()
}

/// Bytes of the module's live constants at their dtype's size, each shared constant once.
pub fn weight_bytes(m: &Module) -> u64 {
    let mut seen = HashSet::new();
    let mut total = 0u64;
    for (_, f) in m.iter() {
        let live = f.live_mask();
        for id in f.node_ids() {
            if let (true, ExprKind::Const { idx }) = (live[id.index()], f.kind(id)) {
                let c = f.constant(*idx);
                if seen.insert(Arc::as_ptr(c)) {
                    let ty = c.tensor_type();
                    total += ty.num_elements().unwrap_or(0) * ty.dtype.size_bytes() as u64;
                }
            }
        }
    }
    total
}

/// Resets the kernel's peak-RSS counter of this process (Linux: writing `5` to
/// `/proc/self/clear_refs`); false where that is not possible.
fn reset_peak_rss() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// The peak resident set of this process since the last reset, in bytes (`VmHWM`).
fn read_peak_rss() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.trim_start_matches("VmHWM:").trim().trim_end_matches("kB").trim().parse().ok()?;
    Some(kb * 1024)
}
