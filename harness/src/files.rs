//! The kinds of file the CLI reads, checked before it opens one: opening a FIFO blocks until
//! a writer comes, and reading a device such as `/dev/zero` never ends.
//!
//! - Data files (`--input` and `--compare` `.npy` files, the conformance out-of-scope list)
//!   must be regular files ([`regular_file`]).
//! - A model and its external-data files are mapped under a read lease or read whole (the
//!   engine's `load_regular_file`; `passel watch` always reads, [`read_regular_file`]), and
//!   must be regular files (opened non-blocking, so even the open of a FIFO cannot hang).
//! - A `.pir` source may also be a pipe ([`source_file`]): `passel run <(passel gen chain)`
//!   hands passel a `/dev/fd/N` pipe, which is read to its end like stdin (`-`).
//!
//! Symlinks are followed: what counts is the file they lead to.
//!
//! A module source is text (`.pir`) or the binary form (`.pirb`), told apart by the binary
//! form's magic number, not by the name ([`module_from_bytes`]). The binary form is read
//! into memory, not memory-mapped (a plain mapped file that another process truncates kills
//! the reader with SIGBUS; only ONNX models go through the lease-protected mapping of the
//! engine's `frontend/onnx/mapped.rs`); its raw constants stay
//! slices of that one buffer. An output is written in binary form when its name ends in
//! `.pirb` ([`write_module`]).

use std::fs::{FileType, Metadata};
use std::path::{Path, PathBuf};

use passel_engine::frontend::onnx::file_kind as kind;
/// The model loader's file checks (`frontend/onnx/load.rs`), shared by every file the CLI reads.
pub use passel_engine::frontend::onnx::{not_regular, read_regular_file};
use passel_engine::ir::{is_binary_module, print_module, read_module_binary, write_module_binary, Module};

/// Whether `ty` is a named or anonymous pipe.
#[cfg(unix)]
fn is_pipe(ty: FileType) -> bool {
    std::os::unix::fs::FileTypeExt::is_fifo(&ty)
}

#[cfg(not(unix))]
fn is_pipe(_: FileType) -> bool {
    false
}

/// Why a file the CLI reads or writes cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    /// The file cannot be opened, inspected or read.
    #[error("cannot read {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The file is not of a kind the command reads (`it is a fifo, not a regular file`).
    #[error("cannot read {}: {reason}", path.display())]
    Kind {
        /// The file.
        path: PathBuf,
        /// What it is instead.
        reason: String,
    },
    /// The file cannot be written.
    #[error("cannot write {}: {source}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The module cannot be written in binary form.
    #[error("cannot write {}: {msg}", path.display())]
    Encode {
        /// The file.
        path: PathBuf,
        /// The encoder's error.
        msg: String,
    },
    /// Standard input cannot be read.
    #[error("cannot read stdin: {0}")]
    Stdin(std::io::Error),
    /// A source that is neither a binary module nor UTF-8 text (`name:line:col: …`).
    #[error(transparent)]
    NotUtf8(#[from] crate::diag::NotUtf8),
    /// A binary module that does not decode.
    #[error("{name}: {source}")]
    Binary {
        /// The file.
        name: String,
        /// The decoder's error.
        source: passel_engine::ir::BinaryError,
    },
    /// A binary module where the command reads only text.
    #[error("{}: a binary module, not text", path.display())]
    BinaryNotText {
        /// The file.
        path: PathBuf,
    },
}

/// The CLI's commands still report errors as text; a file error becomes its message there.
impl From<FileError> for String {
    fn from(e: FileError) -> String {
        e.to_string()
    }
}

/// The metadata of `path`, which must be a regular file (after following symlinks).
pub fn regular_file(path: &Path) -> Result<Metadata, FileError> {
    let meta = std::fs::metadata(path).map_err(|source| FileError::Read { path: path.to_path_buf(), source })?;
    match not_regular(&meta) {
        Some(reason) => Err(FileError::Kind { path: path.to_path_buf(), reason }),
        None => Ok(meta),
    }
}

/// Checks that `path` is a regular file or a pipe (a FIFO or a shell's `<(…)`).
pub fn source_file(path: &Path) -> Result<(), FileError> {
    let meta = std::fs::metadata(path).map_err(|source| FileError::Read { path: path.to_path_buf(), source })?;
    let ty = meta.file_type();
    if ty.is_file() || is_pipe(ty) {
        return Ok(());
    }
    Err(FileError::Kind {
        path: path.to_path_buf(),
        reason: format!("it is {}, not a regular file or a pipe", kind(ty)),
    })
}

/// Whether `a` and `b` name the same file: the same inode when both exist, else the same
/// name in the same (canonical) directory, so `out.json` and `./out.json` match.
pub fn same_file(a: &Path, b: &Path) -> bool {
    if let Some(same) = same_inode(a, b) {
        return same;
    }
    let place = |p: &Path| {
        let dir = p.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
        Some(std::fs::canonicalize(dir).ok()?.join(p.file_name()?))
    };
    a == b || matches!((place(a), place(b)), (Some(x), Some(y)) if x == y)
}

/// Whether `a` and `b` are one inode, when both exist.
#[cfg(unix)]
fn same_inode(a: &Path, b: &Path) -> Option<bool> {
    use std::os::unix::fs::MetadataExt;
    let (ma, mb) = (std::fs::metadata(a).ok()?, std::fs::metadata(b).ok()?);
    Some(ma.dev() == mb.dev() && ma.ino() == mb.ino())
}

#[cfg(not(unix))]
fn same_inode(_: &Path, _: &Path) -> Option<bool> {
    None
}

/// What a module source holds: text to parse, or a binary module already read.
pub enum ModuleSource {
    /// `.pir` text.
    Text(String),
    /// A `.pirb` binary module.
    Binary(Module),
}

/// Reads a module source from its bytes: the binary form when they start with its magic
/// number, else UTF-8 text. `name` names the file in errors.
pub fn module_from_bytes(name: &str, bytes: Vec<u8>) -> Result<ModuleSource, FileError> {
    if is_binary_module(&bytes) {
        let module = read_module_binary(&bytes::Bytes::from(bytes))
            .map_err(|source| FileError::Binary { name: name.to_string(), source })?;
        return Ok(ModuleSource::Binary(module));
    }
    String::from_utf8(bytes)
        .map(ModuleSource::Text)
        .map_err(|e| crate::diag::not_utf8(name, e.as_bytes(), e.utf8_error()).into())
}

/// Whether an output named `path` gets the binary form (its name ends in `.pirb`).
pub fn wants_binary(path: &Path) -> bool {
    path.extension().is_some_and(|e| e.eq_ignore_ascii_case("pirb"))
}

/// Writes `module` to `path`: the binary form when [`wants_binary`], else `text` (the
/// module's printed text, which the caller has printed already, or `None` to print it here).
pub fn write_module(path: &Path, module: &Module, text: Option<&str>) -> Result<(), FileError> {
    let cannot = |source: std::io::Error| FileError::Write { path: path.to_path_buf(), source };
    if wants_binary(path) {
        let bytes = write_module_binary(module)
            .map_err(|e| FileError::Encode { path: path.to_path_buf(), msg: e.to_string() })?;
        return std::fs::write(path, bytes).map_err(cannot);
    }
    match text {
        Some(text) => std::fs::write(path, text).map_err(cannot),
        None => std::fs::write(path, print_module(module)).map_err(cannot),
    }
}
