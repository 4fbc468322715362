//! Loading an ONNX model from a file: the one loader under `passel import` (and every CLI
//! command that takes an `.onnx` file) and Python's `Module.from_onnx`. The model file is
//! mapped or read ([`load_regular_file`]) and handed to [`import_onnx_bytes`] as a shared
//! [`Bytes`] (initializer weights stay slices of it); external-data files are loaded the same
//! way on request from the model's folder only, each file once; the imported module is
//! verified.
//!
//! A plain mapping would be unsafe: a mapped file that another process truncates (a model
//! re-exported in place, the case `passel watch` exists for) kills the reader with SIGBUS
//! when it touches a page past the new end. `onnx/mapped.rs` maps a file only under a read
//! lease, which makes every writer wait until the mapping has been replaced by a private
//! copy; where it cannot (small files, other file systems, a file open for writing, not
//! Linux), the file is read into memory, and a file rewritten during the read at worst
//! decodes to an error. Only regular files are loaded: a FIFO or device would block or never
//! end.
//!
//! This is the importer's only IO; `import_onnx_bytes` itself decodes a buffer.

use std::collections::HashMap;
use std::fs::{File, FileType, Metadata};
use std::io::{self, Read};
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex};

use bytes::Bytes;

use super::mapped;
use super::{import_onnx_bytes, ExternalData, ExternalDataError, ImportError, ImportOptions};
use crate::ir::{verify_module, Module};

/// Why a model file cannot be loaded ([`load_onnx`]).
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The file could not be opened or read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The OS error.
        source: io::Error,
    },
    /// The importer rejected the model.
    #[error("{path}: {source}")]
    Import {
        /// The file.
        path: String,
        /// The importer's error (boxed: it is large, and a load error is rare).
        source: Box<ImportError>,
    },
    /// The imported module does not verify (an importer bug, reported rather than hidden).
    #[error("{path}: the imported module does not verify: {msg}")]
    Verify {
        /// The file.
        path: String,
        /// The first verifier error.
        msg: String,
    },
}

/// What kind of file `ty` is, in words (`a fifo`, `a directory`, …).
#[cfg(unix)]
pub fn file_kind(ty: FileType) -> &'static str {
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

/// What kind of file `ty` is, in words.
#[cfg(not(unix))]
pub fn file_kind(ty: FileType) -> &'static str {
    if ty.is_dir() {
        "a directory"
    } else {
        "a special file"
    }
}

/// Why a file with metadata `meta` is not a regular file (`it is a fifo, …`), or `None`.
pub fn not_regular(meta: &Metadata) -> Option<String> {
    (!meta.is_file()).then(|| format!("it is {}, not a regular file", file_kind(meta.file_type())))
}

/// Opens the regular file at `path` for reading. Anything else (a FIFO, socket, device or
/// directory) is refused without reading from it: opening is non-blocking, so a FIFO without
/// a writer does not hang the open either.
fn open_regular_file(path: &Path) -> Result<(File, u64), io::Error> {
    let mut open = std::fs::OpenOptions::new();
    open.read(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::custom_flags(&mut open, libc::O_NONBLOCK);
    let file = open.open(path)?;
    let meta = file.metadata()?;
    if let Some(reason) = not_regular(&meta) {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, reason));
    }
    Ok((file, meta.len()))
}

/// Reads `file` whole; `len` (its size when opened) is a hint: the file may change while it is
/// read, and `read_to_end` reads whatever is there.
fn read_whole(mut file: File, len: u64) -> Result<Vec<u8>, io::Error> {
    let mut bytes = Vec::new();
    let len = usize::try_from(len).unwrap_or(usize::MAX);
    bytes
        .try_reserve_exact(len)
        .map_err(|_| io::Error::new(io::ErrorKind::OutOfMemory, format!("its {len} bytes do not fit in memory")))?;
    file.read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// Reads the regular file at `path` whole into memory (never a mapping: `passel watch`
/// keeps its own copy to compare with the next run's). Anything but a regular file is refused
/// without reading from it.
pub fn read_regular_file(path: &Path) -> Result<Vec<u8>, io::Error> {
    let (file, len) = open_regular_file(path)?;
    read_whole(file, len)
}

/// The content of the regular file at `path`: a lease-protected mapping where
/// [`mapped::map_file`] can make one (large files on local file systems, nobody writing),
/// else a copy read into memory. Either way the bytes never change while they are shared.
pub fn load_regular_file(path: &Path) -> Result<Bytes, io::Error> {
    let (file, len) = open_regular_file(path)?;
    mapped::map_or_read(file, len, |file| read_whole(file, len))
}

/// External data read from files inside one folder (the model's): locations that are
/// absolute, contain `..`, or resolve (through symlinks) outside the folder are refused. Each
/// file is read once (by its resolved path) and shared by all the tensors stored in it.
#[derive(Debug, Clone)]
pub struct FolderExternalData {
    dir: PathBuf,
    files: Arc<Mutex<HashMap<PathBuf, Bytes>>>,
}

impl FolderExternalData {
    /// External data relative to `dir`.
    pub fn new(dir: impl Into<PathBuf>) -> FolderExternalData {
        FolderExternalData { dir: dir.into(), files: Arc::default() }
    }
}

impl ExternalData for FolderExternalData {
    fn load(&self, location: &str) -> Result<Bytes, ExternalDataError> {
        let rel = Path::new(location);
        if location.is_empty() || !rel.components().all(|c| matches!(c, Component::Normal(_) | Component::CurDir)) {
            return Err(ExternalDataError::NotRelative);
        }
        let dir = self.dir.canonicalize().map_err(ExternalDataError::Folder)?;
        let full = dir.join(rel);
        let real = full.canonicalize().map_err(|source| ExternalDataError::Open { path: full, source })?;
        if !real.starts_with(&dir) {
            return Err(ExternalDataError::Outside(real));
        }
        let mut files = self.files.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(bytes) = files.get(&real) {
            return Ok(bytes.clone());
        }
        let bytes = match load_regular_file(&real) {
            Ok(bytes) => bytes,
            Err(source) => return Err(ExternalDataError::Read { path: real, source }),
        };
        files.insert(real, bytes.clone());
        Ok(bytes)
    }
}

/// Imports the ONNX model at `path`: maps or reads the file ([`load_regular_file`]), resolves external data from the model's
/// folder (unless `options` brings its own reader) and verifies the result.
pub fn load_onnx(path: &Path, options: &ImportOptions) -> Result<Module, LoadError> {
    let bytes = load_regular_file(path).map_err(|source| LoadError::Io { path: path.display().to_string(), source })?;
    load_onnx_bytes(path, bytes, options)
}

/// [`load_onnx`] on `bytes`, the content already read from `path` (`passel watch` compares
/// it with the previous run's before importing).
pub fn load_onnx_bytes(path: &Path, bytes: Bytes, options: &ImportOptions) -> Result<Module, LoadError> {
    let name = path.display().to_string();
    let mut options = options.clone();
    if options.external_data.is_none() {
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => PathBuf::from("."),
        };
        options.external_data = Some(Arc::new(FolderExternalData::new(dir)));
    }
    let module = import_onnx_bytes(bytes, &options)
        .map_err(|source| LoadError::Import { path: name.clone(), source: Box::new(source) })?;
    verify_module(&module).map_err(|errs| LoadError::Verify {
        path: name,
        msg: errs.first().map(|e| e.to_string()).unwrap_or_default(),
    })?;
    Ok(module)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folder_external_data_refuses_paths_leaving_the_folder() {
        // A private directory (tempfile), never a predictable path another user could plant.
        let tmp = tempfile::Builder::new().prefix("passel-ext").tempdir().unwrap();
        let dir = tmp.path().to_path_buf();
        let inner = dir.join("model");
        std::fs::create_dir_all(&inner).unwrap();
        std::fs::write(dir.join("outside.bin"), [1u8; 8]).unwrap();
        std::fs::write(inner.join("w.bin"), [2u8; 8]).unwrap();
        let ext = FolderExternalData::new(&inner);
        assert_eq!(&ext.load("w.bin").unwrap()[..], &[2u8; 8]);
        for bad in ["../outside.bin", "/etc/passwd", "", "sub/../../outside.bin"] {
            let err = ext.load(bad).unwrap_err();
            assert!(matches!(err, ExternalDataError::NotRelative), "{bad}: {err}");
            assert!(err.to_string().contains("inside the model's folder"), "{bad}: {err}");
        }
        let err = ext.load("absent.bin").unwrap_err();
        assert!(matches!(err, ExternalDataError::Open { .. }) && err.to_string().contains("cannot open"), "{err}");
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink(dir.join("outside.bin"), inner.join("link.bin")).unwrap();
            let err = ext.load("link.bin").unwrap_err();
            assert!(matches!(err, ExternalDataError::Outside(_)), "{err}");
            assert!(err.to_string().contains("outside the model's folder"), "{err}");
        }
        drop(tmp);
    }
}
