//! `passel bench`: runs a pipeline over a generated workload serially and with each thread
//! count, and reports time, throughput and speedup over the serial run.

use std::time::{Duration, Instant};

use passel_engine::ir::{print_module, Module};
use passel_engine::transform::{parse_pipeline, Pass, PassContext};

/// One measured configuration.
#[derive(Clone, Debug)]
pub struct BenchRow {
    /// `serial` or `parallel`.
    pub mode: &'static str,
    /// Worker threads.
    pub threads: usize,
    /// Best wall time over the repetitions.
    pub time: Duration,
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
}

/// Runs every configuration; `progress` is called after each run. Errors if a run fails or if a
/// parallel run's output differs from the serial one (it never should).
pub fn run_bench(cfg: &BenchConfig<'_>, mut progress: impl FnMut()) -> Result<Vec<BenchRow>, String> {
    passel_passes::link();
    let pipeline = parse_pipeline(cfg.pipeline).map_err(|e| e.to_string())?;
    // One untimed run pays one-time costs (registries, thread pool start-up, page faults).
    let warm = PassContext::builder().opt_level(3).num_threads(1).build().map_err(|e| e.to_string())?;
    warm.scope(|| pipeline.run(cfg.module.clone(), &warm)).map_err(|e| e.to_string())?.map_err(|e| e.to_string())?;
    let mut rows = Vec::new();
    let mut reference: Option<String> = None;
    let configs = std::iter::once(("serial", 1)).chain(cfg.threads.iter().map(|&t| ("parallel", t)));
    for (mode, threads) in configs {
        let ctx = PassContext::builder().opt_level(3).num_threads(threads).build().map_err(|e| e.to_string())?;
        let mut best = Duration::MAX;
        let mut output = None;
        for _ in 0..cfg.repeats.max(1) {
            let input = cfg.module.clone();
            let start = Instant::now();
            let out = ctx.scope(|| pipeline.run(input, &ctx)).map_err(|e| e.to_string())?.map_err(|e| e.to_string())?;
            best = best.min(start.elapsed());
            output = Some(out);
            progress();
        }
        let text = print_module(&output.expect("at least one repetition"));
        match &reference {
            None => reference = Some(text),
            Some(r) if *r != text => {
                return Err(format!("{mode} run with {threads} threads printed a different module"))
            }
            Some(_) => {}
        }
        rows.push(BenchRow { mode, threads, time: best });
    }
    Ok(rows)
}

/// Renders rows as a table; throughput is per function and per binding of the input.
pub fn render_table(rows: &[BenchRow], n_funcs: usize, n_bindings: usize) -> String {
    let serial = rows.first().map(|r| r.time.as_secs_f64()).unwrap_or(f64::NAN);
    let mut out = format!(
        "{:<10} {:>7} {:>10} {:>12} {:>14} {:>8}\n",
        "mode", "threads", "time", "functions/s", "bindings/s", "speedup"
    );
    for r in rows {
        let t = r.time.as_secs_f64();
        out.push_str(&format!(
            "{:<10} {:>7} {:>8.1}ms {:>12.0} {:>14.0} {:>7.2}x\n",
            r.mode,
            r.threads,
            t * 1e3,
            n_funcs as f64 / t,
            n_bindings as f64 / t,
            serial / t
        ));
    }
    out
}
