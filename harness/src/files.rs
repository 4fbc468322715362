//! The kinds of file the CLI reads, checked before it opens one: opening a FIFO blocks until
//! a writer comes, and reading a device such as `/dev/zero` never ends.
//!
//! - Data files (`--input` and `--compare` `.npy` files, the conformance out-of-scope list)
//!   must be regular files ([`regular_file`]).
//! - A `.pir` source may also be a pipe ([`source_file`]): `passel run <(passel gen chain)`
//!   hands passel a `/dev/fd/N` pipe, which is read to its end like stdin (`-`).
//!
//! Symlinks are followed: what counts is the file they lead to.

use std::fs::{FileType, Metadata};
use std::path::Path;

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
