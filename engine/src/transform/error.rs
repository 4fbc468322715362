//! Errors of the pass infrastructure: one `PassError` enum for everything a pass call can
//! report, plus the smaller errors it wraps (instruments, config, context scopes, pipelines).

use std::fmt;

use super::diagnostics::Diagnostic;
use crate::util::shown_name;

/// What an instrument callback returns when it fails. The caller adds the instrument's name and
/// the hook; a caught panic becomes an `InstrumentError` too.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct InstrumentError {
    /// What went wrong.
    pub message: String,
}

impl InstrumentError {
    /// An error with `message`.
    pub fn new(message: impl Into<String>) -> InstrumentError {
        InstrumentError { message: message.into() }
    }
}

/// The instrument callback that failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hook {
    /// `enter_pass_ctx`.
    Enter,
    /// `exit_pass_ctx`.
    Exit,
    /// `should_run`.
    ShouldRun,
    /// `run_before_pass`.
    BeforePass,
    /// `run_after_pass`.
    AfterPass,
}

impl fmt::Display for Hook {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Hook::Enter => "enter_pass_ctx",
            Hook::Exit => "exit_pass_ctx",
            Hook::ShouldRun => "should_run",
            Hook::BeforePass => "run_before_pass",
            Hook::AfterPass => "run_after_pass",
        })
    }
}

/// Errors from building a [`PassContext`](super::PassContext) or reading config.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum ConfigError {
    /// The key is not registered.
    #[error("unknown config key `{}`{}; valid keys: {}", shown_name(key), did_you_mean(suggestions), valid.join(", "))]
    UnknownKey {
        /// The key given.
        key: String,
        /// Every registered key, sorted.
        valid: Vec<String>,
        /// Close registered keys, best first.
        suggestions: Vec<String>,
    },
    /// The entry has no value.
    #[error("config key `{}` has no value", shown_name(key))]
    MissingValue {
        /// The key given.
        key: String,
    },
    /// The value has the wrong type.
    #[error("config key `{}` expects {expected}, got {actual}", shown_name(key))]
    WrongType {
        /// The key given.
        key: String,
        /// The registered type.
        expected: &'static str,
        /// The type of the value given.
        actual: &'static str,
    },
    /// The value has the right type but is out of range (a negative size, an integer too
    /// large for 64 bits).
    #[error("config key `{}` expects {expected}, got {}", shown_name(key), shown_name(value))]
    OutOfRange {
        /// The key given.
        key: String,
        /// The value given.
        value: String,
        /// What the key accepts.
        expected: String,
    },
    /// The key was registered more than once.
    #[error("config key `{key}` is registered more than once")]
    Duplicate {
        /// The key.
        key: String,
    },
    /// A `key=value` string without `=`.
    #[error("config assignment `{}` is not of the form key=value", shown_name(text))]
    BadAssignment {
        /// The text given.
        text: String,
    },
}

/// Errors from entering and exiting context scopes.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ContextError {
    /// `exit` was called on a context that is not the innermost one of this thread.
    #[error("exiting a pass context that is not the innermost entered context of this thread")]
    ExitOutOfOrder,
    /// `num_threads` asked for more worker threads than [`super::context::MAX_THREADS`].
    #[error("num_threads {requested} is more than the maximum of {max} worker threads")]
    TooManyThreads {
        /// The requested count.
        requested: usize,
        /// The cap.
        max: usize,
    },
}

/// A syntax or name error in a textual pipeline, at byte offset `pos`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("pipeline error at {pos}: {message}")]
pub struct PipelineError {
    /// Byte offset into the pipeline text.
    pub pos: usize,
    /// What went wrong (an unknown name includes suggestions).
    pub message: String,
}

/// Everything a pass call can report.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum PassError {
    /// A failure reported by a pass body, not yet located. The pass machinery turns it into
    /// [`PassError::InPass`] on the way out, so the message says "in pass" exactly once.
    #[error("{0}")]
    Message(String),
    /// A pass body failed or panicked.
    #[error("in pass {pass}{}: {message}", in_function(function))]
    InPass {
        /// The pass.
        pass: String,
        /// The function (for function passes).
        function: Option<String>,
        /// What went wrong.
        message: String,
        /// Whether the body panicked (the message is the panic payload).
        panicked: bool,
    },
    /// The pass reported an error diagnostic under a context built with
    /// [`errors_fail_pass`](super::PassContextBuilder::errors_fail_pass).
    #[error("in pass {pass}{}: {}", in_function(&diagnostic.function), diagnostic.message)]
    ErrorReported {
        /// The pass.
        pass: String,
        /// The first error it reported (in module order).
        diagnostic: Box<Diagnostic>,
    },
    /// `testing.immutable_module` caught a pass changing the module.
    #[error("Immutable module has been modified in pass: {pass}")]
    ImmutableModuleModified {
        /// The pass.
        pass: String,
    },
    /// `testing.verify_each`: the output of `pass` does not verify, though its input did.
    #[error("pass {pass} broke the IR of @{function} (testing.verify_each): {}{}", errors.join("; "), more_errors(*more))]
    VerifyEach {
        /// The pass whose output does not verify.
        pass: String,
        /// The first function (in module order) that does not verify.
        function: String,
        /// The verifier's first errors on that function (`@f %3: what`), at most three.
        errors: Vec<String>,
        /// How many more errors the verifier reported on that function.
        more: usize,
    },
    /// Nested `Sequential`s deeper than [`MAX_PIPELINE_DEPTH`](super::MAX_PIPELINE_DEPTH); refused
    /// before anything runs, because running nests calls once per level.
    #[error("pipeline `{name}` nests sequentials {depth} levels deep; at most {max} are allowed")]
    PipelineTooDeep {
        /// The outermost sequential's name.
        name: String,
        /// Its nesting depth (1 for a sequential of plain passes).
        depth: usize,
        /// The limit.
        max: usize,
    },
    /// No pass of that name is registered.
    #[error("unknown pass `{}`{}", shown_name(name), did_you_mean(suggestions))]
    UnknownPass {
        /// The name given.
        name: String,
        /// Close registered names, best first.
        suggestions: Vec<String>,
    },
    /// The pass name was registered more than once.
    #[error("pass `{name}` is registered more than once")]
    DuplicatePass {
        /// The name.
        name: String,
    },
    /// An instrument callback failed or panicked.
    #[error("instrument {instrument} failed in {hook}: {source}")]
    Instrument {
        /// The instrument's name.
        instrument: String,
        /// The callback.
        hook: Hook,
        /// The instrument's error.
        source: InstrumentError,
    },
    /// Bad configuration.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// Bad scope nesting.
    #[error(transparent)]
    Context(#[from] ContextError),
    /// Bad pipeline text.
    #[error(transparent)]
    Pipeline(#[from] PipelineError),
}

impl PassError {
    /// A failure with `message`, for pass bodies. The pass and function names are added by the
    /// machinery.
    pub fn msg(message: impl Into<String>) -> PassError {
        PassError::Message(message.into())
    }

    /// Locates an unlocated error in `pass` (and `function`); other errors are returned as they
    /// are, so nesting never repeats "in pass".
    pub fn in_pass(self, pass: &str, function: Option<&str>) -> PassError {
        match self {
            PassError::Message(message) => PassError::InPass {
                pass: pass.to_string(),
                function: function.map(str::to_string),
                message,
                panicked: false,
            },
            other => other,
        }
    }
}

impl PassError {
    /// A caught panic in `pass` (and `function`).
    pub(crate) fn panicked(pass: &str, function: Option<&str>, payload: &(dyn std::any::Any + Send)) -> PassError {
        PassError::InPass {
            pass: pass.to_string(),
            function: function.map(str::to_string),
            message: panic_message(payload),
            panicked: true,
        }
    }
}

fn did_you_mean(suggestions: &[String]) -> String {
    if suggestions.is_empty() {
        String::new()
    } else {
        format!(" (did you mean {}?)", suggestions.iter().map(|s| format!("`{s}`")).collect::<Vec<_>>().join(", "))
    }
}

fn more_errors(more: usize) -> String {
    match more {
        0 => String::new(),
        1 => " (and 1 more error)".to_string(),
        n => format!(" (and {n} more errors)"),
    }
}

fn in_function(function: &Option<String>) -> String {
    function.as_ref().map(|f| format!(" on function @{f}")).unwrap_or_default()
}

/// The message of a caught panic payload.
pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        format!("panicked: {s}")
    } else if let Some(s) = payload.downcast_ref::<String>() {
        format!("panicked: {s}")
    } else {
        "panicked".to_string()
    }
}
