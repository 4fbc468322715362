//! One module per `passel` command that has no library module of its own (`gen` and `bench`
//! have theirs: `gen::cli`, `bench::cli`), and what they share: loading the input file and
//! writing the result. `main.rs` holds only the command enum and the dispatch.

pub mod bisect;
pub mod check;
pub mod conformance;
pub mod eval;
pub mod list;
pub mod run;
pub mod watch;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::SystemTime;

use passel_engine::ir::{parse_module, verify_module, Module};
use passel_engine::transform::PassError;

use crate::args::{check_input_shapes, OptionsError};
use crate::cache::CacheOptionsError;
use crate::console::Console;
use crate::debug::reproducer::{HeaderError, NoReproducer};
use crate::files::{FileError, ModuleSource};
use crate::onnx::OnnxError;
use crate::watch::WatchError;
use crate::{diag, onnx};

/// Why `passel run` or `passel watch` stops with an error (the message `error: …` says what
/// and where; errors in the input file itself are rendered with their source instead).
#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    /// Pipeline, thread or output options that do not fit together.
    #[error(transparent)]
    Options(#[from] OptionsError),
    /// `--cache`, `--cache-local` or `--cache-max-size` that name no usable cache.
    #[error(transparent)]
    CacheOptions(#[from] CacheOptionsError),
    /// The cached run's session could not be made (`passel_cache::run_cached`).
    #[error(transparent)]
    Cache(#[from] passel_cache::CacheError),
    /// `--cache-report` without a cache.
    #[error("--cache-report needs a cache (--cache DIR|URL or PASSEL_CACHE_DIR)")]
    ReportWithoutCache,
    /// A crash reproducer whose header line is broken.
    #[error("{}: {source}", file.display())]
    ReproducerHeader {
        /// The reproducer.
        file: PathBuf,
        /// What is wrong with its quoting.
        source: HeaderError,
    },
    /// A crash reproducer whose header's options are not valid options.
    #[error("{}: {source}", file.display())]
    ReproducerOptions {
        /// The reproducer.
        file: PathBuf,
        /// Why the options are refused.
        source: OptionsError,
    },
    /// `--verify-each` with `--config testing.verify_each=false`.
    #[error("--verify-each contradicts --config {entry}")]
    VerifyEachContradicts {
        /// The `--config` entry, trimmed.
        entry: String,
    },
    /// The pipeline failed, or its context could not be made or entered.
    #[error(transparent)]
    Pass(#[from] PassError),
    /// No crash reproducer can name the failing pass call.
    #[error(transparent)]
    NoReproducer(#[from] NoReproducer),
    /// A report file (`--trace`, `--stats-json`, `--cache-report`, `--reproducer`) cannot be
    /// written.
    #[error("cannot write {what} {}: {source}", path.display())]
    Report {
        /// Which report: `trace`, `statistics`, `cache report`, `reproducer`.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The output cannot be written.
    #[error(transparent)]
    File(#[from] FileError),
    /// A malformed `--input-shape`.
    #[error(transparent)]
    Onnx(#[from] OnnxError),
    /// `passel watch` could not watch, run or write.
    #[error(transparent)]
    Watch(#[from] WatchError),
    /// Standard error is gone (a note could not be written).
    #[error("cannot write to stderr")]
    Stderr,
}

/// Reads the text of `path` ("-" for stdin); a binary module is an error here (see
/// [`read_module_source`] for the commands that take either).
pub fn read_source(path: &PathBuf) -> Result<String, FileError> {
    match read_module_source(path)? {
        ModuleSource::Text(src) => Ok(src),
        ModuleSource::Binary(_) => Err(FileError::BinaryNotText { path: path.clone() }),
    }
}

/// Reads `path` ("-" for stdin): `.pir` text, or a `.pirb` binary module, told apart by the
/// binary form's magic number.
pub fn read_module_source(path: &PathBuf) -> Result<ModuleSource, FileError> {
    let (name, bytes) = if path.as_os_str() == "-" {
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut std::io::stdin(), &mut bytes).map_err(FileError::Stdin)?;
        ("<stdin>".to_string(), bytes)
    } else {
        crate::files::source_file(path)?;
        let bytes = std::fs::read(path).map_err(|source| FileError::Read { path: path.clone(), source })?;
        (path.display().to_string(), bytes)
    };
    crate::files::module_from_bytes(&name, bytes)
}

/// Parses and verifies `path` (or imports it when it is a `.onnx` model, or reads it when it
/// is a binary module), printing rendered errors to stderr; returns the module and its source
/// text (empty for an imported or binary module).
pub fn load(console: &Console, path: &PathBuf, shapes: &onnx::InputShapeArgs) -> Result<(Module, String), ExitCode> {
    check_input_shapes(shapes).map_err(|e| console.error(&e.to_string()))?;
    if onnx::is_onnx(path) {
        return shapes
            .options()
            .and_then(|o| onnx::import_onnx(path, &o))
            .map(|m| (m, String::new()))
            .map_err(|e| console.error(&e.to_string()));
    }
    let name = path.display().to_string();
    let src = match read_module_source(path).map_err(|e| console.error(&e.to_string()))? {
        ModuleSource::Text(src) => src,
        ModuleSource::Binary(module) => {
            verify_module(&module).map_err(|errors| {
                let _ = console.err(&diag::render(&name, "", &diag::verify_errors(&errors)));
                console.exit_code(ExitCode::FAILURE)
            })?;
            return Ok((module, String::new()));
        }
    };
    parse_source(console, path, src)
}

/// Parses and verifies `src`, the text of `path`, printing rendered errors to stderr.
pub fn parse_source(console: &Console, path: &Path, src: String) -> Result<(Module, String), ExitCode> {
    let name = path.display().to_string();
    let module = parse_module(&src).map_err(|errors| {
        let _ = console.err(&diag::render_parse_errors(&name, &src, &errors));
        console.exit_code(ExitCode::FAILURE)
    })?;
    verify_module(&module).map_err(|errors| {
        let _ = console.err(&diag::render(&name, &src, &diag::verify_errors(&errors)));
        console.exit_code(ExitCode::FAILURE)
    })?;
    Ok((module, src))
}

/// What tells whether a file still holds the text read from it: its length and modification
/// time. A command that drops a file's text once it is parsed (`run`) reads it again only to
/// show diagnostics with their source lines.
pub struct FileStamp {
    len: u64,
    modified: SystemTime,
}

impl FileStamp {
    /// The stamp of `path`, just read as `text`; `None` for stdin, and when the file's length is
    /// not the text's (it changed already) or its time is unknown.
    pub fn of(path: &Path, text: &str) -> Option<FileStamp> {
        if path.as_os_str() == "-" {
            return None;
        }
        let meta = std::fs::metadata(path).ok()?;
        let stamp = FileStamp { len: meta.len(), modified: meta.modified().ok()? };
        (stamp.len == text.len() as u64).then_some(stamp)
    }

    /// The text of `path` again, when the file still has this stamp and that length.
    pub fn read_again(&self, path: &Path) -> Option<String> {
        let same = |meta: std::fs::Metadata| meta.len() == self.len && meta.modified().ok() == Some(self.modified);
        if !std::fs::metadata(path).is_ok_and(same) {
            return None;
        }
        let text = read_source(&path.to_path_buf()).ok()?;
        (text.len() as u64 == self.len && std::fs::metadata(path).is_ok_and(same)).then_some(text)
    }
}

/// Renders `errors` against the text of `path`: `src` itself, or, with a `stamp` (the text was
/// dropped), the file read again. A file that changed since it was read gets its errors
/// without source lines, after a warning saying so.
pub fn render_again(path: &Path, src: &str, stamp: Option<&FileStamp>, mut errors: Vec<diag::SourceError>) -> String {
    let name = path.display().to_string();
    let Some(stamp) = stamp else { return diag::render(&name, src, &errors) };
    if let Some(text) = stamp.read_again(path) {
        return diag::render(&name, &text, &errors);
    }
    for e in &mut errors {
        e.span = None;
    }
    let warning = format!("warning: {name} changed since it was read: its errors are shown without source lines\n");
    warning + &diag::render(&name, "", &errors)
}

/// Writes `text` to stdout; the exit code says whether that worked.
pub fn write_stdout(console: &Console, text: &str) -> ExitCode {
    let _ = console.out(text);
    console.exit_code(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::{render_again, FileStamp};
    use crate::diag::{self, SourceError};

    fn errors() -> Vec<SourceError> {
        vec![SourceError { message: "bad call".into(), span: Some((10, 14)), label: "here".into() }]
    }

    #[test]
    fn render_again_reads_an_unchanged_file_and_refuses_a_changed_one() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("m.pir");
        let text = "def @f() {\n  relu(%x)\n}\n";
        std::fs::write(&path, text).expect("write");
        let stamp = FileStamp::of(&path, text).expect("a file's stamp");
        let name = path.display().to_string();
        // The text read again renders exactly as the text held would.
        assert_eq!(render_again(&path, "", Some(&stamp), errors()), diag::render(&name, text, &errors()));
        // Without a stamp, the text given is used.
        assert_eq!(render_again(&path, text, None, errors()), diag::render(&name, text, &errors()));
        // A file rewritten since (another length): no source lines, and a warning says why.
        std::fs::write(&path, "def @g() {\n  1.0f\n}\n").expect("rewrite");
        let out = render_again(&path, "", Some(&stamp), errors());
        let spanless = vec![SourceError { span: None, ..errors().remove(0) }];
        let warning = format!("warning: {name} changed since it was read: its errors are shown without source lines\n");
        assert_eq!(out, warning + &diag::render(&name, "", &spanless));
        // A stamp is refused for a text that is not the file's.
        assert!(FileStamp::of(&path, text).is_none());
        assert!(FileStamp::of(std::path::Path::new("-"), text).is_none());
    }
}
