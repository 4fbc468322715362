//! `DumpIrInstrument`: writes each pass's output to a numbered file in a directory.

use std::path::PathBuf;
use std::sync::{Mutex, PoisonError};

use crate::ir::{print_module, Module};
use crate::transform::error::InstrumentError;
use crate::transform::info::PassInfo;
use crate::transform::instrument::Instrument;

/// After each pass, writes the module to `<dir>/NNN_<pass>.pir`, numbering from 000 in call
/// order over the instrument's lifetime (re-entering a context does not overwrite files). The
/// directory is created when the context is entered; IO errors are instrument failures. A
/// file left at a dump's name (by an earlier run, or a symlink planted there) is replaced, never
/// written through.
#[derive(Debug)]
pub struct DumpIrInstrument {
    dir: PathBuf,
    counter: Mutex<u32>,
}

impl DumpIrInstrument {
    /// Dumps into `dir`.
    pub fn new(dir: impl Into<PathBuf>) -> DumpIrInstrument {
        DumpIrInstrument { dir: dir.into(), counter: Mutex::new(0) }
    }
}

impl Instrument for DumpIrInstrument {
    fn name(&self) -> &str {
        "DumpIrInstrument"
    }

    fn enter_pass_ctx(&self) -> Result<(), InstrumentError> {
        std::fs::create_dir_all(&self.dir)
            .map_err(|e| InstrumentError::new(format!("cannot create {}: {e}", self.dir.display())))
    }

    fn run_after_pass(&self, module: &Module, info: &PassInfo) -> Result<(), InstrumentError> {
        let n = {
            let mut c = self.counter.lock().unwrap_or_else(PoisonError::into_inner);
            let n = *c;
            *c += 1;
            n
        };
        let path = self.dir.join(format!("{n:03}_{}.pir", info.name));
        write_new(&path, &print_module(module))
            .map_err(|e| InstrumentError::new(format!("cannot write {}: {e}", path.display())))
    }
}

/// Writes `text` to a new file at `path`: whatever is there is removed first and the file is
/// created exclusively, so a symlink at `path` is never followed.
fn write_new(path: &std::path::Path, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    std::fs::OpenOptions::new().write(true).create_new(true).open(path)?.write_all(text.as_bytes())
}
