//! `passel run --opt-bisect-limit N` and `passel bisect FILE --check CMD`: find the first pass
//! execution after which a user's check fails (engine side: `passel_engine::transform::OptBisect`).
//!
//! [`run_with_limit`] runs the pipeline with a limit and collects the `BISECT:` lines;
//! [`first_failing`] binary-searches the limit (the check must pass with limit 0 and fail with
//! every execution), so a bisection takes about log2(executions) + 2 runs.

use std::io::Write;
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};

use passel_engine::ir::{print_module, Module};
use passel_engine::transform::{OptBisect, Pass, PassContextBuilder, PassError, Sequential, Sink};

use crate::args::OptionsError;

/// Why a bisection could not run to its answer.
#[derive(Debug, thiserror::Error)]
pub enum BisectError {
    /// The pipeline options are not valid.
    #[error(transparent)]
    Options(#[from] OptionsError),
    /// The context cannot be built, or the run failed outside the pipeline.
    #[error(transparent)]
    Context(#[from] PassError),
    /// The pipeline fails even with every execution: nothing for the check to find.
    #[error("the pipeline fails with all {executions} executions: {error}")]
    PipelineFails {
        /// Executions numbered.
        executions: u64,
        /// The pipeline's error.
        error: PassError,
    },
    /// The check fails with limit 0.
    #[error("the check fails even with no optional pass execution (limit 0)")]
    FailsWithNone,
    /// The private output directory cannot be created.
    #[error("cannot create a temporary directory in {}: {source}", dir.display())]
    TempDir {
        /// Where it was to be made.
        dir: std::path::PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The private output directory cannot be removed.
    #[error("cannot remove the temporary directory: {0}")]
    RemoveTempDir(std::io::Error),
    /// An output cannot be written for the check.
    #[error("cannot write {}: {source}", path.display())]
    Write {
        /// The file.
        path: std::path::PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The check command cannot be started.
    #[error("cannot run the check: {0}")]
    Check(std::io::Error),
}

/// One run under a limit.
#[derive(Debug)]
pub struct LimitRun {
    /// The printed output module, or the pipeline's error.
    pub output: Result<String, PassError>,
    /// The `BISECT:` lines, one per numbered execution.
    pub log: String,
    /// How many executions were numbered (run or not).
    pub executions: u64,
}

/// Runs `pipeline` on `module` under the context `builder` gives, running only executions
/// 1 ..= `limit`.
pub fn run_with_limit(
    module: &Module,
    pipeline: &Sequential,
    builder: impl FnOnce() -> PassContextBuilder,
    limit: u64,
) -> Result<LimitRun, BisectError> {
    let buf = Arc::new(Mutex::new(Vec::new()));
    let sink: Sink = buf.clone();
    let bisect = Arc::new(OptBisect::new(limit, sink));
    let ctx = builder().opt_bisect(bisect.clone()).build()?;
    let res = ctx.scope(|| pipeline.run(module.clone(), &ctx))?;
    let log = String::from_utf8_lossy(&buf.lock().unwrap_or_else(PoisonError::into_inner)).into_owned();
    Ok(LimitRun { output: res.map(|m| print_module(&m)), log, executions: bisect.executions() })
}

/// The smallest limit in 1 ..= `total` at which `fails` says yes: `None` when it passes with
/// every execution, an error when it fails even with none (limit 0).
pub fn first_failing(
    total: u64,
    mut fails: impl FnMut(u64) -> Result<bool, BisectError>,
) -> Result<Option<u64>, BisectError> {
    if !fails(total)? {
        return Ok(None);
    }
    if fails(0)? {
        return Err(BisectError::FailsWithNone);
    }
    // Invariant: the check passes at `lo` and fails at `hi`.
    let (mut lo, mut hi) = (0, total);
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if fails(mid)? {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    Ok(Some(hi))
}

/// Writes `text` to a new file at `path`, replacing what is there without following it: an
/// existing file or symlink at `path` is removed first, and the file is created exclusively
/// (`O_EXCL`, which fails rather than follow a link planted between the two steps).
pub fn write_new(path: &Path, text: &str) -> std::io::Result<()> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    let mut file = std::fs::OpenOptions::new().write(true).create_new(true).open(path)?;
    file.write_all(text.as_bytes())?;
    file.flush()
}

/// The `BISECT:` line of execution `k` in `log`.
pub fn execution_line(log: &str, k: u64) -> Option<&str> {
    let tag = format!(" ({k}) ");
    log.lines().find(|l| l.contains(&tag))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_failing_finds_the_boundary_with_few_checks() {
        for culprit in 1..=40u64 {
            let mut calls = 0;
            let found = first_failing(40, |n| {
                calls += 1;
                Ok(n >= culprit)
            });
            assert_eq!(found.ok(), Some(Some(culprit)));
            assert!(calls <= 2 + 6, "{calls} checks for 40 executions");
        }
        assert_eq!(first_failing(40, |_| Ok(false)).ok(), Some(None));
        assert!(matches!(first_failing(40, |_| Ok(true)), Err(BisectError::FailsWithNone)));
    }

    #[test]
    fn execution_line_matches_the_whole_number() {
        let log = "BISECT: running pass (1) A on @f\nBISECT: NOT running pass (11) A on @g\n";
        assert_eq!(execution_line(log, 11), Some("BISECT: NOT running pass (11) A on @g"));
        assert_eq!(execution_line(log, 2), None);
    }
}
