//! ONNX models on the command line: `passel import`, and `.onnx` files wherever the CLI takes
//! a `.pir` file. This is the IO half of the importer: the model file is read into memory and
//! handed to the engine's decoder as a shared [`Bytes`] (initializer weights stay slices of
//! that buffer), and external-data files are read on request from the model's folder only,
//! each file once.
//!
//! Files are read, not memory-mapped: a mapped file that another process truncates (a model
//! re-exported in place, the case `passel watch` exists for) kills the reader with SIGBUS
//! when it touches a page past the new end. An owned copy cannot change under the importer;
//! a file rewritten during the read at worst decodes to an error. Only regular files are
//! read: a FIFO or device would block or never end.

use std::collections::HashMap;
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use clap::Args;
use passel_engine::frontend::onnx::{import_onnx_bytes, ExternalData, ImportError, ImportOptions};
use passel_engine::ir::{print_module, verify_module, Module};

/// Why an ONNX model could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum OnnxError {
    /// The file could not be opened or read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// The importer rejected the model.
    #[error("{path}: {source}")]
    Import {
        /// The file.
        path: String,
        /// The importer's error.
        source: ImportError,
    },
    /// The imported module does not verify (an importer bug, reported rather than hidden).
    #[error("{path}: the imported module does not verify: {msg}")]
    Verify {
        /// The file.
        path: String,
        /// The first verifier error.
        msg: String,
    },
    /// A malformed `--input-shape`.
    #[error("--input-shape {0:?}: expected NAME=d0,d1,… with non-negative integer dimensions")]
    InputShape(String),
}

/// Whether `path` names an ONNX model (by its `.onnx` extension).
pub fn is_onnx(path: &Path) -> bool {
    path.extension().is_some_and(|e| e.eq_ignore_ascii_case("onnx"))
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
    fn load(&self, location: &str) -> Result<Bytes, String> {
        let rel = Path::new(location);
        if location.is_empty() || !rel.components().all(|c| matches!(c, Component::Normal(_) | Component::CurDir)) {
            return Err(
                "the location must be a relative path inside the model's folder (no `..`, no absolute path)".into()
            );
        }
        let dir = self.dir.canonicalize().map_err(|e| format!("cannot resolve the model's folder: {e}"))?;
        let full = dir.join(rel);
        let real = full.canonicalize().map_err(|e| format!("cannot open {}: {e}", full.display()))?;
        if !real.starts_with(&dir) {
            return Err(format!("resolves to {}, outside the model's folder", real.display()));
        }
        let mut files = self.files.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(bytes) = files.get(&real) {
            return Ok(bytes.clone());
        }
        let bytes = Bytes::from(
            crate::files::read_regular_file(&real).map_err(|e| format!("cannot read {}: {e}", real.display()))?,
        );
        files.insert(real, bytes.clone());
        Ok(bytes)
    }
}

/// Imports the ONNX model at `path`: reads the file, resolves external data from the model's
/// folder (unless `options` brings its own reader) and verifies the result.
pub fn import_onnx(path: &Path, options: &ImportOptions) -> Result<Module, OnnxError> {
    let bytes = crate::files::read_regular_file(path)
        .map_err(|source| OnnxError::Io { path: path.display().to_string(), source })?;
    import_onnx_read(path, Bytes::from(bytes), options)
}

/// [`import_onnx`] on `bytes`, the content already read from `path` (`passel watch` compares
/// it with the previous run's before importing).
pub fn import_onnx_read(path: &Path, bytes: Bytes, options: &ImportOptions) -> Result<Module, OnnxError> {
    let name = path.display().to_string();
    let mut options = options.clone();
    if options.external_data.is_none() {
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => PathBuf::from("."),
        };
        options.external_data = Some(Arc::new(FolderExternalData::new(dir)));
    }
    let module =
        import_onnx_bytes(bytes, &options).map_err(|source| OnnxError::Import { path: name.clone(), source })?;
    verify_module(&module).map_err(|errs| OnnxError::Verify {
        path: name,
        msg: errs.first().map(|e| e.to_string()).unwrap_or_default(),
    })?;
    Ok(module)
}

/// Parses `NAME=d0,d1,…` (`NAME=` alone is a scalar).
pub fn parse_input_shape(text: &str) -> Result<(String, Vec<u64>), OnnxError> {
    let bad = || OnnxError::InputShape(text.to_string());
    let (name, dims) = text.rsplit_once('=').ok_or_else(bad)?;
    if name.is_empty() {
        return Err(bad());
    }
    let dims = if dims.trim().is_empty() {
        Vec::new()
    } else {
        dims.split(',').map(|d| d.trim().parse::<u64>().map_err(|_| bad())).collect::<Result<_, _>>()?
    };
    Ok((name.to_string(), dims))
}

/// The `--input-shape` flag of every command that reads a model.
#[derive(Args, Clone, Debug, Default)]
pub struct InputShapeArgs {
    /// Static shape for an ONNX graph input with symbolic or missing dimensions, e.g.
    /// `--input-shape input=1,3,224,224`. Repeatable; ignored for `.pir` files.
    #[arg(long = "input-shape", value_name = "NAME=D0,D1,…")]
    pub input_shape: Vec<String>,
}

impl InputShapeArgs {
    /// Import options carrying these shapes.
    pub fn options(&self) -> Result<ImportOptions, OnnxError> {
        let input_shapes = self.input_shape.iter().map(|s| parse_input_shape(s)).collect::<Result<_, _>>()?;
        Ok(ImportOptions { input_shapes, ..ImportOptions::default() })
    }
}

/// `passel import MODEL.onnx [-o OUT.pir] [--input-shape NAME=…]…`.
#[derive(Args, Debug)]
pub struct ImportArgs {
    /// The ONNX model.
    pub model: PathBuf,
    /// Write the module here instead of stdout (in binary form when OUT ends in `.pirb`).
    #[arg(short = 'o', long = "output", value_name = "OUT")]
    pub output: Option<PathBuf>,
    #[command(flatten)]
    pub shapes: InputShapeArgs,
}

/// Runs `passel import`: the module's text (or `None` when it was written to `-o`).
pub fn run_import(args: &ImportArgs) -> Result<Option<String>, String> {
    let options = args.shapes.options().map_err(|e| e.to_string())?;
    let module = import_onnx(&args.model, &options).map_err(|e| e.to_string())?;
    match &args.output {
        Some(path) => {
            crate::files::write_module(path, &module, None)?;
            Ok(None)
        }
        None => Ok(Some(print_module(&module))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn input_shape_flag_parses_names_and_dims() {
        assert_eq!(parse_input_shape("x=1,3,224,224").unwrap(), ("x".to_string(), vec![1, 3, 224, 224]));
        assert_eq!(parse_input_shape("a=b=2").unwrap(), ("a=b".to_string(), vec![2]));
        assert_eq!(parse_input_shape("s=").unwrap(), ("s".to_string(), vec![]));
        for bad in ["x", "=1,2", "x=1,-2", "x=1,,2", "x=a"] {
            assert!(parse_input_shape(bad).is_err(), "{bad}");
        }
    }

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
            assert!(err.contains("inside the model's folder"), "{bad}: {err}");
        }
        assert!(ext.load("absent.bin").unwrap_err().contains("cannot open"));
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink(dir.join("outside.bin"), inner.join("link.bin")).unwrap();
            let err = ext.load("link.bin").unwrap_err();
            assert!(err.contains("outside the model's folder"), "{err}");
        }
        drop(tmp);
    }
}
