//! `passel check` and `passel fmt`: parse, verify and type-check one file; print it in
//! canonical form.

use std::path::PathBuf;
use std::process::ExitCode;

use passel_engine::ir::print_module;

use super::{load, write_stdout};
use crate::console::Console;
use crate::{diag, onnx};

/// `passel check`: parses, verifies and type-checks (InferType's inference, so every type
/// error `run` would report is reported here too, with its location).
pub fn check(console: &Console, path: &PathBuf, shapes: &onnx::InputShapeArgs) -> ExitCode {
    let (module, src) = match load(console, path, shapes) {
        Ok(loaded) => loaded,
        Err(code) => return code,
    };
    let type_errors = passel_passes::type_errors(&module);
    if !type_errors.is_empty() {
        let _ = console.err(&diag::render(&path.display().to_string(), &src, &diag::type_errors(&type_errors)));
        return console.exit_code(ExitCode::FAILURE);
    }
    let _ = console.err(&format!("{}: ok ({} functions)\n", path.display(), module.len()));
    // The process ends right here, and the modules hold memory only (no files or buffers to
    // flush): freeing their million nodes one allocation at a time would only add time (1.5%
    // of `check` on a 700k-binding file). The OS reclaims it.
    std::mem::forget(module);
    console.exit_code(ExitCode::SUCCESS)
}

/// `passel fmt`: prints `path` in canonical form.
pub fn fmt(console: &Console, path: &PathBuf, shapes: &onnx::InputShapeArgs) -> ExitCode {
    match load(console, path, shapes) {
        Ok((m, _)) => write_stdout(console, &print_module(&m)),
        Err(code) => code,
    }
}
