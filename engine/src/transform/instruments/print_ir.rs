//! `PrintIrInstrument` (print the module before / after chosen passes, or after a pass that
//! changed it) and the `PrintIR(header)` pass (rules 30 and 32).

use std::sync::{Mutex, PoisonError};

use crate::ir::{module_structural_eq, print_module, Module};
use crate::transform::context::PassContext;
use crate::transform::error::{InstrumentError, PassError};
use crate::transform::info::PassInfo;
use crate::transform::instrument::{stderr_sink, write_sink, Instrument, Sink};
use crate::transform::pass::{ModulePass, Pass, PassKind};

/// Prints the module around passes to a sink (default stderr). Headers are
/// `PrintIR(before <pass>):` and `PrintIR(after <pass>):`.
pub struct PrintIrInstrument {
    before: Vec<String>,
    after: Vec<String>,
    before_all: bool,
    after_all: bool,
    after_change: bool,
    sink: Sink,
    // Input modules of running passes, for "after change".
    inputs: Mutex<Vec<Module>>,
}

impl Default for PrintIrInstrument {
    fn default() -> PrintIrInstrument {
        PrintIrInstrument {
            before: Vec::new(),
            after: Vec::new(),
            before_all: false,
            after_all: false,
            after_change: false,
            sink: stderr_sink(),
            inputs: Mutex::new(Vec::new()),
        }
    }
}

impl PrintIrInstrument {
    /// Prints nothing until configured.
    pub fn new() -> PrintIrInstrument {
        PrintIrInstrument::default()
    }

    /// Builder form: print before the pass `name` (any spelling of the registry).
    pub fn before(mut self, name: &str) -> Self {
        self.before.push(name.to_string());
        self
    }

    /// Builder form: print after the pass `name`.
    pub fn after(mut self, name: &str) -> Self {
        self.after.push(name.to_string());
        self
    }

    /// Builder form: print before every pass.
    pub fn before_all(mut self) -> Self {
        self.before_all = true;
        self
    }

    /// Builder form: print after every pass.
    pub fn after_all(mut self) -> Self {
        self.after_all = true;
        self
    }

    /// Builder form: print after every pass that changed the module (not pointer-equal and not
    /// structurally equal to its input).
    pub fn after_change(mut self) -> Self {
        self.after_change = true;
        self
    }

    /// Builder form: write to `sink` instead of stderr.
    pub fn to_sink(mut self, sink: Sink) -> Self {
        self.sink = sink;
        self
    }

    fn inputs(&self) -> std::sync::MutexGuard<'_, Vec<Module>> {
        self.inputs.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

fn matches(names: &[String], info: &PassInfo) -> bool {
    let norm = |s: &str| s.chars().filter(|c| *c != '-' && *c != '_').flat_map(char::to_lowercase).collect::<String>();
    names.iter().any(|n| norm(n) == norm(&info.name))
}

impl Instrument for PrintIrInstrument {
    fn name(&self) -> &str {
        "PrintIrInstrument"
    }

    fn exit_pass_ctx(&self) -> Result<(), InstrumentError> {
        self.inputs().clear();
        Ok(())
    }

    fn run_before_pass(&self, module: &Module, info: &PassInfo) -> Result<(), InstrumentError> {
        if self.after_change {
            self.inputs().push(module.clone());
        }
        if self.before_all || matches(&self.before, info) {
            write_sink(&self.sink, &format!("PrintIR(before {}):\n{}", info.name, print_module(module)))?;
        }
        Ok(())
    }

    fn run_after_pass(&self, module: &Module, info: &PassInfo) -> Result<(), InstrumentError> {
        let mut print = self.after_all || matches(&self.after, info);
        if self.after_change {
            let input = self.inputs().pop();
            let changed = input.is_none_or(|m| !m.ptr_eq(module) && !module_structural_eq(&m, module));
            print |= changed;
        }
        if print {
            write_sink(&self.sink, &format!("PrintIR(after {}):\n{}", info.name, print_module(module)))?;
        }
        Ok(())
    }

    fn on_pass_failed(&self, _info: &PassInfo) {
        if self.after_change {
            self.inputs().pop();
        }
    }
}

/// The `PrintIR(header)` pass: a module pass at opt level 0 that writes
/// `PrintIR(<header>):\n<module>` to a sink and returns the module unchanged.
pub struct PrintIr {
    pass: ModulePass,
}

impl PrintIr {
    /// Prints to stderr.
    pub fn new(header: &str) -> PrintIr {
        PrintIr::to_sink(header, stderr_sink())
    }

    /// Prints to `sink`.
    pub fn to_sink(header: &str, sink: Sink) -> PrintIr {
        let header = header.to_string();
        let pass = ModulePass::new("PrintIR", 0, move |module, _ctx| {
            write_sink(&sink, &format!("PrintIR({header}):\n{}", print_module(&module)))
                .map_err(|e| PassError::msg(e.message))?;
            Ok(module)
        });
        PrintIr { pass }
    }
}

impl Pass for PrintIr {
    fn info(&self) -> &PassInfo {
        self.pass.info()
    }

    fn kind(&self) -> PassKind {
        PassKind::Module
    }

    fn execute(&self, module: Module, ctx: &PassContext) -> Result<Module, PassError> {
        self.pass.execute(module, ctx)
    }
}

crate::register_pass!("PrintIR", || Box::new(PrintIr::new("")));
