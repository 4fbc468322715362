//! `passel watch FILE`: runs a pipeline on a `.pir` file, then again on every save, through
//! an incremental [`Session`], printing which functions were recomputed and how long it took.
//!
//! Each version of the file is parsed and verified; errors are rendered with source
//! snippets (miette) and the watch goes on with the next save. A valid version is diffed into
//! the session function by function, so only what changed is recomputed. File events come
//! from `notify` on the file's directory (editors often replace the file rather than write
//! it); events within [`DEBOUNCE`] are merged, and a save that leaves the text as it was does
//! not trigger a run.
//!
//! [`standard_session`] is the session every harness tool uses: a session with the standard
//! passes linked in, whose module passes declare their own per-function forms and firewalls.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use notify::{RecursiveMode, Watcher};
use passel_engine::ir::{parse_module, print_module, verify_module, Module};
use passel_engine::transform::PassContext;
use passel_engine::{MemoryMode, Sequential, Session, SessionError};

use crate::diag;
use passel_passes::standard_session;

/// File events closer together than this are handled as one save.
pub const DEBOUNCE: Duration = Duration::from_millis(50);

/// What to watch and how to run it.
pub struct WatchOptions {
    /// The `.pir` file, or a `.onnx` model (imported on every change).
    pub file: PathBuf,
    /// The pipeline.
    pub pipeline: Sequential,
    /// Opt level, required / disabled passes, config, threads (no instruments).
    pub ctx: PassContext,
    /// Stop after this many runs (parse or verify failures count as runs); `None` watches
    /// until the watcher fails.
    pub max_runs: Option<usize>,
    /// Write the optimised module here after each successful run.
    pub output: Option<PathBuf>,
    /// What the session keeps between runs.
    pub memory: MemoryMode,
    /// How `.onnx` files are imported (input shapes).
    pub import: passel_engine::frontend::onnx::ImportOptions,
    /// The persistent stage cache (`--cache`): a restarted watch recomputes only what no
    /// earlier process computed.
    pub cache: Option<std::sync::Arc<passel_cache::Cache>>,
}

/// Errors that end the watch.
#[derive(Debug, thiserror::Error)]
pub enum WatchError {
    /// The file system watcher failed.
    #[error("cannot watch {path}: {source}")]
    Notify {
        /// The watched path.
        path: String,
        /// Why.
        source: notify::Error,
    },
    /// The watched path is missing or is not a regular file (a directory, say).
    #[error("cannot watch {path}: {reason}")]
    NotAFile {
        /// The path given.
        path: String,
        /// Why it cannot be watched.
        reason: String,
    },
    /// The session could not be set up.
    #[error(transparent)]
    Session(#[from] SessionError),
    /// Writing the report or the output failed.
    #[error("cannot write {what}: {source}")]
    Io {
        /// What was being written.
        what: String,
        /// Why.
        source: std::io::Error,
    },
}

/// Watches `opts.file`, writing a report of every run to `out`.
pub fn watch(opts: &WatchOptions, out: &mut dyn Write) -> Result<(), WatchError> {
    let watched = watched_paths(&opts.file)?;
    let mut session = standard_session(opts.pipeline.clone(), &opts.ctx)?;
    session.set_memory_mode(opts.memory);
    if let Some(cache) = &opts.cache {
        session.set_store(Some((cache.store.clone(), cache.build.clone())))?;
    }
    let (tx, rx) = mpsc::channel();
    let notify_err = |source| WatchError::Notify { path: opts.file.display().to_string(), source };
    let mut watcher = notify::recommended_watcher(move |event| {
        // The receiver is gone only when the watch has ended.
        let _ = tx.send(event);
    })
    .map_err(notify_err)?;
    for path in &watched {
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => PathBuf::from("."),
        };
        watcher.watch(&dir, RecursiveMode::NonRecursive).map_err(notify_err)?;
    }
    let name = opts.file.display().to_string();
    let mut last: Option<bytes::Bytes> = None;
    let mut runs = 0usize;
    let onnx = crate::onnx::is_onnx(&opts.file);
    loop {
        // A model is imported from the bytes read here (never from a mapping of a file that
        // the exporter may rewrite in place); the file must be a regular file.
        let read = if onnx { crate::files::read_regular_file(&opts.file) } else { std::fs::read(&opts.file) };
        match read.map(bytes::Bytes::from) {
            Err(e) => write_report(out, &format!("cannot read {name}: {e}\n"))?,
            Ok(bytes) if last.as_ref() != Some(&bytes) => {
                runs += 1;
                let report = if onnx {
                    let start = Instant::now();
                    match crate::onnx::import_onnx_read(&opts.file, bytes.clone(), &opts.import) {
                        Ok(module) => {
                            run_module(&mut session, &name, "", &module, runs, opts.output.as_deref(), start)?
                        }
                        Err(e) => format!("run {runs}: error: {e}\n"),
                    }
                } else {
                    match crate::diag::utf8(&name, &bytes) {
                        Ok(text) => run_once(&mut session, &name, text, runs, opts.output.as_deref())?,
                        Err(e) => format!("run {runs}: error: {e}\n"),
                    }
                };
                write_report(out, &report)?;
                last = Some(bytes);
            }
            Ok(_) => {}
        }
        if opts.max_runs.is_some_and(|max| runs >= max) {
            return Ok(());
        }
        if !wait_for_change(&rx, &watched, out)? {
            return Ok(());
        }
    }
}

/// The paths whose directories are watched: `file` itself and, when it is a symlink, the file
/// it resolves to (an edit of the target changes what `file` reads, but raises events only in
/// the target's directory). Fails when `file` is missing or not a regular file: a watch that
/// could never run would otherwise wait forever.
fn watched_paths(file: &Path) -> Result<Vec<PathBuf>, WatchError> {
    let not_a_file = |reason: String| WatchError::NotAFile { path: file.display().to_string(), reason };
    let meta = std::fs::metadata(file).map_err(|e| not_a_file(e.to_string()))?;
    if !meta.is_file() {
        return Err(not_a_file(if meta.is_dir() { "it is a directory".into() } else { "not a regular file".into() }));
    }
    let mut paths = vec![file.to_path_buf()];
    let is_link = std::fs::symlink_metadata(file).is_ok_and(|m| m.file_type().is_symlink());
    if is_link {
        let target = std::fs::canonicalize(file).map_err(|e| not_a_file(e.to_string()))?;
        paths.push(target);
    }
    Ok(paths)
}

/// Blocks until an event about one of `files` arrives, then lets the burst settle. Returns
/// false when the watcher has gone away.
fn wait_for_change(
    rx: &mpsc::Receiver<notify::Result<notify::Event>>,
    files: &[PathBuf],
    out: &mut dyn Write,
) -> Result<bool, WatchError> {
    loop {
        match rx.recv() {
            Err(_) => return Ok(false),
            Ok(Err(e)) => write_report(out, &format!("watch error: {e}\n"))?,
            Ok(Ok(event)) => {
                let about_file = event.paths.iter().any(|p| files.iter().any(|f| p.file_name() == f.file_name()));
                if event.kind.is_access() || !about_file {
                    continue;
                }
                while rx.recv_timeout(DEBOUNCE).is_ok() {}
                return Ok(true);
            }
        }
    }
}

fn write_report(out: &mut dyn Write, text: &str) -> Result<(), WatchError> {
    out.write_all(text.as_bytes())
        .and_then(|_| out.flush())
        .map_err(|source| WatchError::Io { what: "the report".into(), source })
}

/// Parses, verifies and runs one version of the file; returns the report.
fn run_once(
    session: &mut Session,
    name: &str,
    text: &str,
    run: usize,
    output: Option<&Path>,
) -> Result<String, WatchError> {
    // The time reported is the time the user waited: parsing, verifying, the session run, the
    // statistics, rendering diagnostics and writing the output, not only `Session::run`.
    let start = Instant::now();
    let module = match parse_module(text) {
        Ok(m) => m,
        Err(errors) => {
            return Ok(format!("run {run}: parse errors\n{}", diag::render_parse_errors(name, text, &errors)))
        }
    };
    if let Err(errors) = verify_module(&module) {
        return Ok(format!("run {run}: invalid module\n{}", diag::render(name, text, &diag::verify_errors(&errors))));
    }
    run_module(session, name, text, &module, run, output, start)
}

/// Runs the pipeline on one verified version of the module; returns the report. `text` is the
/// source diagnostics point into (empty for an imported model).
fn run_module(
    session: &mut Session,
    name: &str,
    text: &str,
    module: &Module,
    run: usize,
    output: Option<&Path>,
    start: Instant,
) -> Result<String, WatchError> {
    let edited = session.load(module);
    let out = match session.run() {
        Ok(out) => out,
        Err(e) => return Ok(format!("run {run}: error: {e}\n")),
    };
    let recomputed = out.stats.recomputed_functions();
    let mut report = String::new();
    for stage in &out.stats.stages {
        report.push_str(&format!(
            "  {:<40} {:>6} recomputed {:>6} reused {:>9.2} ms\n",
            stage.label,
            stage.recomputed.len(),
            stage.reused,
            stage.time.as_secs_f64() * 1e3
        ));
    }
    let errors = diag::pass_diagnostics(&out.diagnostics);
    report.push_str(&diag::render(name, text, &errors));
    if let Some(path) = output {
        std::fs::write(path, print_module(&out.module))
            .map_err(|source| WatchError::Io { what: path.display().to_string(), source })?;
    }
    let header = format!(
        "run {run}: {} functions, {} edited, {} recomputed{} in {:.2} ms (session {:.2} ms)\n",
        module.len(),
        edited.len(),
        recomputed.len(),
        list_names(&recomputed),
        start.elapsed().as_secs_f64() * 1e3,
        out.stats.total.as_secs_f64() * 1e3
    );
    report.insert_str(0, &header);
    Ok(report)
}

fn list_names(names: &[Arc<str>]) -> String {
    if names.is_empty() {
        return String::new();
    }
    let shown: Vec<String> = names.iter().take(8).map(|n| format!("@{n}")).collect();
    let more = if names.len() > 8 { format!(", … {} more", names.len() - 8) } else { String::new() };
    format!(" ({}{more})", shown.join(", "))
}
