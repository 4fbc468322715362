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

use passel_engine::ir::{parse_module, verify_module, Module};

use crate::args::check_input_shapes;
use crate::console::Console;
use crate::files::{FileError, ModuleSource};
use crate::{diag, onnx};

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

/// Writes `text` to stdout; the exit code says whether that worked.
pub fn write_stdout(console: &Console, text: &str) -> ExitCode {
    let _ = console.out(text);
    console.exit_code(ExitCode::SUCCESS)
}
