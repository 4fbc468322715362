//! The kinds of file the CLI reads, checked before it opens one: opening a FIFO blocks until
//! a writer comes, and reading a device such as `/dev/zero` never ends.
//!
//! - Data files (`--input` and `--compare` `.npy` files, the conformance out-of-scope list)
//!   must be regular files ([`regular_file`]).
//! - A model and its external-data files are read whole, and must be regular files
//!   ([`read_regular_file`]; opened non-blocking, so even the open of a FIFO cannot hang).
//! - A `.pir` source may also be a pipe ([`source_file`]): `passel run <(passel gen chain)`
//!   hands passel a `/dev/fd/N` pipe, which is read to its end like stdin (`-`).
//!
//! Symlinks are followed: what counts is the file they lead to.
//!
//! A module source is text (`.pir`) or the binary form (`.pirb`), told apart by the binary
//! form's magic number, not by the name ([`module_from_bytes`]). The binary form is read
//! into memory like a model, not memory-mapped (the reason is in `onnx.rs`: a mapped file
//! that another process truncates kills the reader with SIGBUS); its raw constants stay
//! slices of that one buffer. An output is written in binary form when its name ends in
//! `.pirb` ([`write_module`]).

use std::fs::{FileType, Metadata};
use std::io::Read;
use std::path::Path;

use passel_engine::ir::{is_binary_module, print_module, read_module_binary, write_module_binary, Module};

/// What kind of file `ty` is, in words.
#[cfg(unix)]
fn kind(ty: FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if ty.is_dir() {
        "a directory"
    } else if ty.is_fifo() {
        "a fifo"
    } else if ty.is_char_device() {
        "a character device"
    } else if ty.is_block_device() {
        "a block device"
    } else if ty.is_socket() {
        "a socket"
    } else {
        "a special file"
    }
}

#[cfg(not(unix))]
fn kind(ty: FileType) -> &'static str {
    if ty.is_dir() {
        "a directory"
    } else {
        "a special file"
    }
}

/// Whether `ty` is a named or anonymous pipe.
#[cfg(unix)]
fn is_pipe(ty: FileType) -> bool {
    std::os::unix::fs::FileTypeExt::is_fifo(&ty)
}

#[cfg(not(unix))]
fn is_pipe(_: FileType) -> bool {
    false
}

/// Why a file with metadata `meta` is not a regular file (`it is a fifo, …`), or `None`.
pub fn not_regular(meta: &Metadata) -> Option<String> {
    (!meta.is_file()).then(|| format!("it is {}, not a regular file", kind(meta.file_type())))
}

/// The metadata of `path`, which must be a regular file (after following symlinks).
pub fn regular_file(path: &Path) -> Result<Metadata, String> {
    let meta = std::fs::metadata(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    match not_regular(&meta) {
        Some(reason) => Err(format!("cannot read {}: {reason}", path.display())),
        None => Ok(meta),
    }
}

/// Reads the regular file at `path` whole. Anything else (a FIFO, socket, device or
/// directory) is refused without reading from it: opening is non-blocking, so a FIFO without
/// a writer does not hang the open either.
pub fn read_regular_file(path: &Path) -> Result<Vec<u8>, std::io::Error> {
    let mut open = std::fs::OpenOptions::new();
    open.read(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::custom_flags(&mut open, libc::O_NONBLOCK);
    let mut file = open.open(path)?;
    let meta = file.metadata()?;
    if let Some(reason) = not_regular(&meta) {
        return Err(std::io::Error::new(std::io::ErrorKind::InvalidInput, reason));
    }
    // The size is a hint: the file may change while it is read, and `read_to_end` reads
    // whatever is there.
    let mut bytes = Vec::new();
    let len = usize::try_from(meta.len()).unwrap_or(usize::MAX);
    bytes.try_reserve_exact(len).map_err(|_| {
        std::io::Error::new(std::io::ErrorKind::OutOfMemory, format!("its {len} bytes do not fit in memory"))
    })?;
    file.read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// Checks that `path` is a regular file or a pipe (a FIFO or a shell's `<(…)`).
pub fn source_file(path: &Path) -> Result<(), String> {
    let meta = std::fs::metadata(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let ty = meta.file_type();
    if ty.is_file() || is_pipe(ty) {
        return Ok(());
    }
    Err(format!("cannot read {}: it is {}, not a regular file or a pipe", path.display(), kind(ty)))
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
pub fn module_from_bytes(name: &str, bytes: Vec<u8>) -> Result<ModuleSource, String> {
    if is_binary_module(&bytes) {
        let module = read_module_binary(&bytes::Bytes::from(bytes)).map_err(|e| format!("{name}: {e}"))?;
        return Ok(ModuleSource::Binary(module));
    }
    crate::diag::utf8(name, &bytes)?;
    // Checked just above: the bytes are UTF-8, so this takes them without a copy.
    String::from_utf8(bytes).map(ModuleSource::Text).map_err(|e| e.to_string())
}

/// Whether an output named `path` gets the binary form (its name ends in `.pirb`).
pub fn wants_binary(path: &Path) -> bool {
    path.extension().is_some_and(|e| e.eq_ignore_ascii_case("pirb"))
}

/// Writes `module` to `path`: the binary form when [`wants_binary`], else `text` (the
/// module's printed text, which the caller has printed already, or `None` to print it here).
pub fn write_module(path: &Path, module: &Module, text: Option<&str>) -> Result<(), String> {
    let cannot = |e: std::io::Error| format!("cannot write {}: {e}", path.display());
    if wants_binary(path) {
        let bytes = write_module_binary(module).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        return std::fs::write(path, bytes).map_err(cannot);
    }
    match text {
        Some(text) => std::fs::write(path, text).map_err(cannot),
        None => std::fs::write(path, print_module(module)).map_err(cannot),
    }
}
