//! `passel bench --cache`: whole runs as `passel run FILE --cache DIR` does them — the module's
//! text parsed (through the cache), the pipeline run (a session backed by the cache), the
//! result printed — in a fresh private cache directory:
//!
//! - `cache-cold`: the same whole run without a cache (the base of the `vs cold` column);
//! - `cache-fill`: with an empty cache, which the run fills;
//! - `cache-nochange`: a new session and store over the filled cache, same text (what a new
//!   process that changed nothing does);
//! - `cache-edit`: the same after a body edit of one function in the middle of the module (a new
//!   dead binding whose constant differs in every repetition, so each one is a real edit).
//!
//! Every cached row's printed output is compared with a run's without a cache. Then the cache's size: entries,
//! bytes and bytes per function of the workload.

use std::time::{Duration, Instant};

use passel_engine::ir::{parse_module, print_module};
use passel_engine::transform::{Pass, PassContext};

use super::{count_bindings, measure, BenchConfig, BenchError, BenchRow};
use passel_cache::{run_cached, Cache, CacheLocation, DiskStore, DEFAULT_MAX_SIZE};

/// How big the cache ended up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CacheSize {
    /// Entries in the cache directory after the `cache-fill` row.
    pub entries: usize,
    /// Their bytes.
    pub bytes: u64,
    /// Functions of the workload.
    pub functions: usize,
}

impl CacheSize {
    /// Bytes per function of the workload.
    pub fn per_function(&self) -> u64 {
        self.bytes / self.functions.max(1) as u64
    }
}

/// One whole run of `text`: parsed (through `cache`, if any), the pipeline, printed.
fn whole_run(
    cfg: &BenchConfig<'_>,
    ctx: &PassContext,
    text: &str,
    cache: Option<&Cache>,
) -> Result<String, BenchError> {
    let threads = ctx.num_threads();
    let parsed = cache.and_then(|c| c.parse(text, threads));
    let (module, counts) = match parsed {
        Some((m, counts)) => (m, Some(counts)),
        None => {
            let m = parse_module(text)
                .map_err(|errors| BenchError::Reparse { what: "the printed workload".to_string(), errors })?;
            (m, None)
        }
    };
    let out = match cache {
        Some(cache) => run_cached(cfg.pipeline, ctx, &module, cache, counts, None)?.result?,
        None => {
            let res = ctx.scope(|| cfg.pipeline.run(module, ctx))?;
            drop(ctx.diagnostics().take());
            res?
        }
    };
    Ok(print_module(&out))
}

/// The `cache-…` rows (see the module doc) on `threads` threads, each output checked against
/// a run's without a cache; the cache lives in a fresh temporary directory removed afterwards.
pub fn cache_rows(
    cfg: &BenchConfig<'_>,
    threads: usize,
    progress: &mut dyn FnMut(),
) -> Result<(Vec<BenchRow>, CacheSize), BenchError> {
    let size = (cfg.module.len(), count_bindings(cfg.module));
    let ctx = cfg.options.context()?.num_threads(threads).build()?;
    let text = print_module(cfg.module);
    let root = tempfile::tempdir().map_err(BenchError::TempDir)?;
    let dir = root.path().join("cache");
    let open = || Cache::open(&CacheLocation::Dir(dir.clone()), DEFAULT_MAX_SIZE);
    let (cold, reference) =
        measure("cache-cold", threads, size, cfg.repeats, cfg.heap, progress, || whole_run(cfg, &ctx, &text, None))?;
    let check = |label: &str, out: &str| {
        if out == reference {
            Ok(())
        } else {
            Err(BenchError::Differs { run: format!("the {label} run"), reference: "the serial run" })
        }
    };

    // Each repetition starts from an empty cache; emptying it is not timed.
    let mut best = Duration::MAX;
    let base = cfg.heap.map(|h| h.reset_peak());
    for _ in 0..cfg.repeats.max(1) {
        DiskStore::new(&dir).clear()?;
        let cache = open()?;
        let start = Instant::now();
        let out = whole_run(cfg, &ctx, &text, Some(&cache))?;
        best = best.min(start.elapsed());
        check("cache-fill", &out)?;
        progress();
    }
    let fill = BenchRow {
        mode: "cache-fill".to_string(),
        threads,
        time: best,
        repeats: cfg.repeats.max(1),
        functions: size.0,
        bindings: size.1,
        peak_heap: cfg.heap.map(|h| h.peak()),
        base_heap: base,
    };
    let stats = DiskStore::new(&dir).stats();
    let cache_size = CacheSize { entries: stats.entries, bytes: stats.bytes, functions: cfg.module.len() };

    let (no_change, out) = measure("cache-nochange", threads, size, cfg.repeats, cfg.heap, progress, || {
        whole_run(cfg, &ctx, &text, Some(&open()?))
    })?;
    check("cache-nochange", &out)?;

    // The function in the middle of the module gets the edit, as in the session rows.
    let Some((name, _)) = cfg.module.entries().get(cfg.module.len() / 2).cloned() else {
        return Ok((vec![cold, fill, no_change], cache_size));
    };
    let mut round = 0u32;
    let mut edited_reference = String::new();
    let (edit, out) = measure("cache-edit", threads, size, cfg.repeats, cfg.heap, progress, || {
        round += 1;
        let edited = edited_text(&text, &name, round)?;
        let out = whole_run(cfg, &ctx, &edited, Some(&open()?))?;
        edited_reference = edited;
        Ok(out)
    })?;
    let expected = whole_run(cfg, &ctx, &edited_reference, None)?;
    if out != expected {
        return Err(BenchError::Differs { run: "the cache-edit run".to_string(), reference: "a run without a cache" });
    }
    Ok((vec![cold, fill, no_change, edit], cache_size))
}

/// `text` (a printed module) with a dead binding `let %passel_bench_edit = ROUND.0f;` at the
/// start of the body of `@name`: a body edit that keeps the signature and differs in every
/// round.
pub(crate) fn edited_text(text: &str, name: &str, round: u32) -> Result<String, BenchError> {
    let header = format!("def @{name}(");
    let at = text
        .match_indices(&header)
        .find(|(i, _)| *i == 0 || text.as_bytes()[i - 1] == b'\n')
        .and_then(|(i, _)| text[i..].find('\n').map(|nl| i + nl + 1))
        .ok_or_else(|| BenchError::NoDefinition(name.to_string()))?;
    Ok(format!("{}  let %passel_bench_edit = {round}.0f;\n{}", &text[..at], &text[at..]))
}
