//! `PrintIrInstrument` (print the module before / after chosen passes, or after a pass that
//! changed it) and the `PrintIR(header)` pass (rules 30 and 32).
//!
//! Focused printing for debugging a pipeline (README: "Debugging a pipeline"):
//! - after a change, only the functions that changed ([`PrintIrInstrument::changed_functions`];
//!   the whole module is MLIR's "module scope", the default of the Rust API);
//! - after a failure, the failing pass's input ([`PrintIrInstrument::after_failure`]);
//! - a filter restricting every print to named functions (LLVM's `-filter-print-funcs`);
//! - a unified diff per changed function ([`PrintIrInstrument::diff`]).
//!
//! Like every instrument, it makes the executor run pass by pass while it is active and
//! calls it in the serial order: what it prints does not depend on the thread count.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use super::line_diff::unified_diff;
use crate::ir::{module_structural_eq, print_function, print_module, structural_eq, Function, Module};
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
    changed_functions: bool,
    after_failure: bool,
    diff: bool,
    filter: Vec<String>,
    sink: Sink,
    // Input modules of running passes, for "after change", "after failure" and diffs.
    inputs: Mutex<Vec<Module>>,
    // Set once the innermost failing pass's input is printed, so that the enclosing
    // sequentials, which fail with it, do not print theirs.
    failure_printed: AtomicBool,
}

impl Default for PrintIrInstrument {
    fn default() -> PrintIrInstrument {
        PrintIrInstrument {
            before: Vec::new(),
            after: Vec::new(),
            before_all: false,
            after_all: false,
            after_change: false,
            changed_functions: false,
            after_failure: false,
            diff: false,
            filter: Vec::new(),
            sink: stderr_sink(),
            inputs: Mutex::new(Vec::new()),
            failure_printed: AtomicBool::new(false),
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

    /// Builder form: with [`PrintIrInstrument::after_change`], print only the functions that
    /// changed (added or structurally different), under a header naming them and any removed
    /// function, instead of the whole module.
    pub fn changed_functions(mut self) -> Self {
        self.changed_functions = true;
        self
    }

    /// Builder form: when a pass fails (an error or a panic), print its input module under
    /// `PrintIR(after failure <pass>):` (a failed pass has no output). Printed once, for the
    /// innermost failing pass.
    pub fn after_failure(mut self) -> Self {
        self.after_failure = true;
        self
    }

    /// Builder form: after every pass that changed the module, print a unified diff of each
    /// function it changed, added or removed, under `PrintIR(diff <pass>):`.
    pub fn diff(mut self) -> Self {
        self.diff = true;
        self
    }

    /// Builder form: print only the function `name` (with or without `@`). Repeatable; applies
    /// to every kind of print. A print that would show none of them is left out.
    pub fn filter(mut self, name: &str) -> Self {
        self.filter.push(name.trim_start_matches('@').to_string());
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

    fn keeps_inputs(&self) -> bool {
        self.after_change || self.after_failure || self.diff
    }

    fn shown(&self, name: &str) -> bool {
        self.filter.is_empty() || self.filter.iter().any(|f| f == name)
    }

    /// `module`'s text, restricted to the filter; `None` when the filter leaves nothing.
    fn render(&self, module: &Module) -> Option<String> {
        if self.filter.is_empty() {
            return Some(print_module(module));
        }
        let texts: Vec<String> =
            module.iter().filter(|(name, _)| self.shown(name)).map(|(name, f)| print_function(name, f)).collect();
        (!texts.is_empty()).then(|| texts.join("\n"))
    }

    /// Writes `PrintIR(<header>):` and `module`'s text, unless the filter leaves nothing.
    fn print(&self, header: &str, module: &Module) -> Result<(), InstrumentError> {
        match self.render(module) {
            Some(text) => write_sink(&self.sink, &format!("PrintIR({header}):\n{text}")),
            None => Ok(()),
        }
    }

    /// The after-change print of the changed functions only.
    fn print_changed(&self, info: &PassInfo, changes: &[Change]) -> Result<(), InstrumentError> {
        let changes: Vec<&Change> = changes.iter().filter(|c| self.shown(&c.name)).collect();
        if changes.is_empty() {
            return Ok(());
        }
        let names = |removed: bool| {
            changes.iter().filter(|c| c.new.is_none() == removed).map(|c| format!("@{}", c.name)).collect::<Vec<_>>()
        };
        let mut header = format!("after {}, changed: {}", info.name, names(false).join(", "));
        let removed = names(true);
        if !removed.is_empty() {
            header.push_str(&format!("; removed: {}", removed.join(", ")));
        }
        let texts: Vec<String> =
            changes.iter().filter_map(|c| c.new.as_ref().map(|f| print_function(&c.name, f))).collect();
        write_sink(&self.sink, &format!("PrintIR({header}):\n{}", texts.join("\n")))
    }

    /// The diff print of the changed functions.
    fn print_diff(&self, info: &PassInfo, changes: &[Change]) -> Result<(), InstrumentError> {
        let mut out = String::new();
        for c in changes.iter().filter(|c| self.shown(&c.name)) {
            let text = |f: &Option<Arc<Function>>| f.as_ref().map(|f| print_function(&c.name, f)).unwrap_or_default();
            out.push_str(&unified_diff(
                &text(&c.old),
                &text(&c.new),
                &format!("@{} (before {})", c.name, info.name),
                &format!("@{} (after {})", c.name, info.name),
            ));
        }
        if out.is_empty() {
            return Ok(());
        }
        write_sink(&self.sink, &format!("PrintIR(diff {}):\n{out}", info.name))
    }
}

/// A function a pass changed, added (`old` is none) or removed (`new` is none).
struct Change {
    name: String,
    old: Option<Arc<Function>>,
    new: Option<Arc<Function>>,
}

/// The functions that differ between `old` and `new`: in `new`'s order, then the removed ones
/// in `old`'s order. Pointer-equal functions are skipped without a comparison.
fn changed_functions(old: &Module, new: &Module) -> Vec<Change> {
    let mut out = Vec::new();
    for (name, f) in new.iter() {
        match old.get(name) {
            Some(g) if Arc::ptr_eq(f, g) || structural_eq(f, g) => {}
            g => out.push(Change { name: name.to_string(), old: g.cloned(), new: Some(f.clone()) }),
        }
    }
    for (name, g) in old.iter() {
        if new.get(name).is_none() {
            out.push(Change { name: name.to_string(), old: Some(g.clone()), new: None });
        }
    }
    out
}

fn matches(names: &[String], info: &PassInfo) -> bool {
    let norm = |s: &str| s.chars().filter(|c| *c != '-' && *c != '_').flat_map(char::to_lowercase).collect::<String>();
    names.iter().any(|n| norm(n) == norm(&info.name))
}

impl Instrument for PrintIrInstrument {
    fn name(&self) -> &str {
        "PrintIrInstrument"
    }

    fn enter_pass_ctx(&self) -> Result<(), InstrumentError> {
        self.failure_printed.store(false, Ordering::Relaxed);
        Ok(())
    }

    fn exit_pass_ctx(&self) -> Result<(), InstrumentError> {
        self.inputs().clear();
        Ok(())
    }

    fn run_before_pass(&self, module: &Module, info: &PassInfo) -> Result<(), InstrumentError> {
        if self.keeps_inputs() {
            self.inputs().push(module.clone());
        }
        if self.before_all || matches(&self.before, info) {
            self.print(&format!("before {}", info.name), module)?;
        }
        Ok(())
    }

    fn run_after_pass(&self, module: &Module, info: &PassInfo) -> Result<(), InstrumentError> {
        let print = self.after_all || matches(&self.after, info);
        let input = if self.keeps_inputs() { self.inputs().pop() } else { None };
        let wants_changes = (self.after_change && self.changed_functions) || self.diff;
        let changes = match &input {
            Some(m) if wants_changes => changed_functions(m, module),
            _ => Vec::new(),
        };
        if self.after_change && !print {
            if self.changed_functions && input.is_some() {
                self.print_changed(info, &changes)?;
            } else if input.is_none_or(|m| !m.ptr_eq(module) && !module_structural_eq(&m, module)) {
                self.print(&format!("after {}", info.name), module)?;
            }
        }
        if print {
            self.print(&format!("after {}", info.name), module)?;
        }
        if self.diff {
            self.print_diff(info, &changes)?;
        }
        Ok(())
    }

    fn on_pass_failed(&self, info: &PassInfo) {
        if !self.keeps_inputs() {
            return;
        }
        let input = self.inputs().pop();
        if let Some(input) = input.filter(|_| self.after_failure) {
            if !self.failure_printed.swap(true, Ordering::Relaxed) {
                // Best effort: this hook cannot fail.
                let _ = self.print(&format!("after failure {}", info.name), &input);
            }
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
