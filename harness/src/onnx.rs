//! ONNX models on the command line: `passel import`, and `.onnx` files wherever the CLI takes
//! a `.pir` file. Loading (the file mapped under a read lease or read into memory, external
//! data from the model's folder, verification) is the engine's `frontend::onnx::load_onnx`, which the Python package calls
//! too; this file adds the `--input-shape` flag and the `import` command.

use std::path::{Path, PathBuf};

use bytes::Bytes;
use clap::Args;
use passel_engine::frontend::onnx::{load_onnx, load_onnx_bytes, ImportOptions, LoadError};
use passel_engine::ir::{print_module, Module};

/// Why an ONNX model could not be loaded from the command line.
#[derive(Debug, thiserror::Error)]
pub enum OnnxError {
    /// The model could not be read, imported or verified.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// A malformed `--input-shape`.
    #[error("--input-shape {0:?}: expected NAME=d0,d1,… with non-negative integer dimensions")]
    InputShape(String),
    /// `passel import -o FILE` could not write the imported module.
    #[error(transparent)]
    Write(#[from] crate::files::FileError),
}

/// Whether `path` names an ONNX model (by its `.onnx` extension).
pub fn is_onnx(path: &Path) -> bool {
    path.extension().is_some_and(|e| e.eq_ignore_ascii_case("onnx"))
}

/// Imports the ONNX model at `path` ([`load_onnx`]).
pub fn import_onnx(path: &Path, options: &ImportOptions) -> Result<Module, OnnxError> {
    Ok(load_onnx(path, options)?)
}

/// [`import_onnx`] on `bytes`, the content already read from `path` (`passel watch` compares
/// it with the previous run's before importing).
pub fn import_onnx_read(path: &Path, bytes: Bytes, options: &ImportOptions) -> Result<Module, OnnxError> {
    Ok(load_onnx_bytes(path, bytes, options)?)
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
pub fn run_import(args: &ImportArgs) -> Result<Option<String>, OnnxError> {
    let options = args.shapes.options()?;
    let module = import_onnx(&args.model, &options)?;
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
}
