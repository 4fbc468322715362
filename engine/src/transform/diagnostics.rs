//! Diagnostics that passes report without failing: errors and warnings with the pass, the
//! function and an optional location. A [`DiagnosticSink`] is cheap to clone; a parallel worker
//! gets a fresh one and the coordinator appends it back in module order. The sink also holds the
//! worker's statistic counts ([`super::statistics`]), which travel back with its diagnostics.

use std::sync::{Arc, Mutex, PoisonError};

use super::statistics::{Statistic, Statistics};
use crate::ir::{NodeId, Span};

/// How serious a diagnostic is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Severity {
    /// Something suspicious; the pass went on.
    Warning,
    /// Something wrong; the pass went on but the result may be incomplete.
    Error,
}

/// One diagnostic.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    /// Error or warning.
    pub severity: Severity,
    /// The pass that reported it.
    pub pass: String,
    /// The function it is about.
    pub function: Option<String>,
    /// The source span, if known.
    pub span: Option<Span>,
    /// The node, if known.
    pub node: Option<NodeId>,
    /// What is wrong, lowercase, no trailing period.
    pub message: String,
}

impl Diagnostic {
    /// An error reported by `pass`.
    pub fn error(pass: &str, message: impl Into<String>) -> Diagnostic {
        Diagnostic::new(Severity::Error, pass, message)
    }

    /// A warning reported by `pass`.
    pub fn warning(pass: &str, message: impl Into<String>) -> Diagnostic {
        Diagnostic::new(Severity::Warning, pass, message)
    }

    fn new(severity: Severity, pass: &str, message: impl Into<String>) -> Diagnostic {
        Diagnostic { severity, pass: pass.to_string(), function: None, span: None, node: None, message: message.into() }
    }

    /// Builder form: the function.
    pub fn in_function(mut self, function: &str) -> Diagnostic {
        self.function = Some(function.to_string());
        self
    }

    /// Builder form: the span.
    pub fn at_span(mut self, span: Span) -> Diagnostic {
        self.span = Some(span);
        self
    }

    /// Builder form: the node.
    pub fn at_node(mut self, node: NodeId) -> Diagnostic {
        self.node = Some(node);
        self
    }
}

/// A shared, append-only list of diagnostics (and statistic counts). Clones share the list.
#[derive(Clone, Debug, Default)]
pub struct DiagnosticSink {
    buf: Arc<Mutex<Reports>>,
}

/// What a sink holds: one lock and one allocation for both, since a worker copy makes a sink
/// per (function, pass).
#[derive(Debug, Default)]
struct Reports {
    diags: Vec<Diagnostic>,
    stats: Statistics,
}

impl DiagnosticSink {
    /// An empty sink.
    pub fn new() -> DiagnosticSink {
        DiagnosticSink::default()
    }

    /// Appends one diagnostic.
    pub fn emit(&self, diag: Diagnostic) {
        self.lock().diags.push(diag);
    }

    /// Appends everything in `other`, in its order, and empties it.
    pub fn append(&self, other: &DiagnosticSink) {
        if Arc::ptr_eq(&self.buf, &other.buf) {
            return;
        }
        let (taken, stats) = {
            let mut o = other.lock();
            (std::mem::take(&mut o.diags), std::mem::take(&mut o.stats))
        };
        let mut me = self.lock();
        me.diags.extend(taken);
        me.stats.merge(&stats);
    }

    /// A copy of the diagnostics so far.
    pub fn snapshot(&self) -> Vec<Diagnostic> {
        self.lock().diags.clone()
    }

    /// Removes and returns the diagnostics so far.
    pub fn take(&self) -> Vec<Diagnostic> {
        std::mem::take(&mut self.lock().diags)
    }

    /// Whether any error was reported.
    pub fn has_errors(&self) -> bool {
        self.lock().diags.iter().any(|d| d.severity == Severity::Error)
    }

    /// How many diagnostics were reported so far (an instrument compares counts before and
    /// after a pass to find the diagnostics that pass reported).
    pub fn len(&self) -> usize {
        self.lock().diags.len()
    }

    /// Whether no diagnostic was reported.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The first error reported at index `from` or later, if any.
    pub fn first_error_from(&self, from: usize) -> Option<Diagnostic> {
        self.lock().diags.get(from..).and_then(|d| d.iter().find(|d| d.severity == Severity::Error).cloned())
    }

    /// Sets the function of every diagnostic that has none.
    pub(crate) fn fill_function(&self, function: &str) {
        for d in self.lock().diags.iter_mut().filter(|d| d.function.is_none()) {
            d.function = Some(function.to_string());
        }
    }

    /// Adds `n` to a statistic.
    pub(crate) fn add_statistic(&self, stat: &'static Statistic, n: u64) {
        self.lock().stats.add(stat, n);
    }

    /// Adds every count of `stats` (nothing to lock when it is empty).
    pub(crate) fn merge_statistics(&self, stats: &Statistics) {
        if !stats.is_empty() {
            self.lock().stats.merge(stats);
        }
    }

    /// A copy of the statistic counts so far.
    pub(crate) fn statistics(&self) -> Statistics {
        self.lock().stats.clone()
    }

    /// Removes and returns the statistic counts so far.
    pub(crate) fn take_statistics(&self) -> Statistics {
        std::mem::take(&mut self.lock().stats)
    }

    pub(crate) fn same_as(&self, other: &DiagnosticSink) -> bool {
        Arc::ptr_eq(&self.buf, &other.buf)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Reports> {
        // A panic while holding the lock cannot leave the Vec half-updated.
        self.buf.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
