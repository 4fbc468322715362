//! `passel run --reproducer FILE`: crash reproducers (MLIR's
//! `--mlir-pass-pipeline-crash-reproducer`; engine side:
//! `passel_engine::transform::ReproducerInstrument`).
//!
//! A reproducer is one `.pir` file: a header line with the options to replay it, comment lines
//! naming the failure, then the input of the failing pass. [`reproducer`] builds its text from
//! the instrument's record: the pipeline is the failing pass alone (`local`) or it and every
//! pass after it; the input is cut down to the failing function and what it references when a
//! function pass failed on one function (a module pass's failure keeps the whole input). The
//! text is replayed before it is written: when the cut-down input does not fail the same way,
//! the whole input is kept, and when even that does not, [`Reproducer::reproduces`] says so.
//!
//! `passel run FILE` reads the header back ([`header_args`]): its options apply unless the
//! command line gives the same option, which then wins.

use std::panic;
use std::sync::Arc;

use passel_engine::ir::{parse_module, print_module, verify_module, Module, ParseErrors, VerifyError};
use passel_engine::transform::{
    get_pass, reproducer_pipeline, ContextError, Pass, PassContext, PassError, PassFailure, PassKind, ReproducerError,
    ReproducerInstrument, Sequential,
};

use crate::args::{OptionsError, PipelineArgs};

/// A reproducer header whose quoting is broken ([`header_args`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HeaderError {
    /// A `"` with no closing `"` on the line.
    #[error("unclosed `\"` in the reproducer header")]
    UnclosedQuote,
    /// A backslash before something other than `n`, `"` or `\\` (`found` shows it).
    #[error("unknown escape {found} in the reproducer header")]
    UnknownEscape {
        /// The escape as written, or "`\` at the end".
        found: String,
    },
}

/// Why a reproducer's text cannot be replayed ([`replay`]).
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// The first line is no reproducer header.
    #[error("no reproducer header")]
    NoHeader,
    /// The header's quoting is broken.
    #[error(transparent)]
    Header(#[from] HeaderError),
    /// The header's options are not valid options.
    #[error(transparent)]
    Options(#[from] OptionsError),
    /// The header names no pipeline.
    #[error("the reproducer header has no --passes")]
    NoPasses,
    /// The module text does not parse.
    #[error("the reproducer does not parse: {0:?}")]
    Parse(ParseErrors),
    /// The module does not verify.
    #[error("the reproducer does not verify: {0:?}")]
    Verify(Vec<VerifyError>),
    /// The options do not make a pass context.
    #[error(transparent)]
    Context(#[from] ContextError),
    /// The pipeline failed outside any pass call the instrument records.
    #[error(transparent)]
    Run(#[from] PassError),
}

/// Why no reproducer could be built ([`reproducer`]): the failing call cannot be named as a
/// pipeline.
#[derive(Debug, thiserror::Error)]
#[error("no reproducer: {0}")]
pub struct NoReproducer(#[from] pub ReproducerError);

impl From<NoReproducer> for String {
    fn from(e: NoReproducer) -> String {
        e.to_string()
    }
}

/// The first line of a reproducer starts with this.
pub const HEADER: &str = "// passel-reproducer:";

/// The header line (without its newline): `options` (whose `passes` is the replay pipeline)
/// as command-line words.
pub fn header(options: &PipelineArgs) -> String {
    let words: Vec<String> = options.to_words().iter().map(|a| quote(a)).collect();
    format!("{HEADER} {}", words.join(" "))
}

/// `word`, in double quotes (with `\"` and `\\`) when it holds a blank, a quote or a backslash.
fn quote(word: &str) -> String {
    if word.is_empty() || word.chars().any(|c| c.is_whitespace() || c == '"' || c == '\\') {
        let escaped: String = word
            .chars()
            .flat_map(|c| match c {
                '"' | '\\' => vec!['\\', c],
                '\n' => vec!['\\', 'n'],
                c => vec![c],
            })
            .collect();
        format!("\"{escaped}\"")
    } else {
        word.to_string()
    }
}

/// The options of `src`'s reproducer header, split into words: `None` when its first line is
/// not a header, an error when the header's quoting is broken.
pub fn header_args(src: &str) -> Option<Result<Vec<String>, HeaderError>> {
    // The parser skips a leading byte-order mark; so does the header.
    let first = src.strip_prefix('\u{feff}').unwrap_or(src).lines().next()?;
    let rest = first.strip_prefix(HEADER)?;
    Some(split_words(rest))
}

fn split_words(text: &str) -> Result<Vec<String>, HeaderError> {
    let mut words = Vec::new();
    let mut chars = text.chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        let Some(&c) = chars.peek() else {
            return Ok(words);
        };
        let mut word = String::new();
        if c == '"' {
            chars.next();
            loop {
                match chars.next() {
                    None => return Err(HeaderError::UnclosedQuote),
                    Some('"') => break,
                    Some('\\') => match chars.next() {
                        Some('n') => word.push('\n'),
                        Some(e @ ('"' | '\\')) => word.push(e),
                        other => {
                            let found = other.map(|c| format!("`\\{c}`")).unwrap_or_else(|| "`\\` at the end".into());
                            return Err(HeaderError::UnknownEscape { found });
                        }
                    },
                    Some(c) => word.push(c),
                }
            }
        } else {
            while let Some(c) = chars.peek().copied().filter(|c| !c.is_whitespace()) {
                word.push(c);
                chars.next();
            }
        }
        words.push(word);
    }
}

/// A reproducer, ready to write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reproducer {
    /// The file's text.
    pub text: String,
    /// The failing pass.
    pub pass: String,
    /// The function it failed on, when the failure names one.
    pub function: Option<String>,
    /// The replay pipeline.
    pub passes: String,
    /// How many functions the input holds, and how many the failing pass's input had.
    pub functions: (usize, usize),
    /// Whether replaying `text` fails with the same message as the run did.
    pub reproduces: bool,
}

/// Builds the reproducer of `failure` (the instrument's record of a run of `pipeline` under
/// `ctx` with `options`, in their [`PipelineArgs::canonical`] form; `run_error` is what the run
/// returned; `options.passes` is not read: the header names the replay pipeline). `local` narrows the pipeline
/// to the failing pass. Fails when the pipeline cannot be named (a pass outside the registry).
pub fn reproducer(
    failure: &PassFailure,
    run_error: Option<&PassError>,
    pipeline: &Sequential,
    ctx: &PassContext,
    options: &PipelineArgs,
    local: bool,
) -> Result<Reproducer, NoReproducer> {
    let passes = reproducer_pipeline(pipeline, ctx, failure, local)?;
    let expected = failure.message(run_error);
    let function = failure.function(run_error);
    let function_pass = get_pass(&failure.pass).is_ok_and(|p| p.kind() == PassKind::Function);
    let total = failure.input.len();
    let write = |input: &Module, reduced: bool| {
        let options = PipelineArgs { passes: Some(passes.clone()), ..options.clone() };
        let text = file_text(failure, &options, input, function.as_deref(), expected.as_deref(), reduced);
        let reproduces = expected.is_some() && replay(&text).ok().flatten() == expected;
        (text, reproduces, input.len())
    };
    let reduced = function.as_deref().filter(|_| function_pass).map(|f| failure.input.reachable_from(&[f]));
    let mut made = None;
    if let Some(small) = reduced.filter(|m| m.len() < total) {
        made = Some(write(&small, true)).filter(|(_, reproduces, _)| *reproduces);
    }
    let (text, reproduces, kept) = match made {
        Some(m) => m,
        None => write(&failure.input, false),
    };
    Ok(Reproducer { text, pass: failure.pass.clone(), function, passes, functions: (kept, total), reproduces })
}

fn file_text(
    failure: &PassFailure,
    options: &PipelineArgs,
    input: &Module,
    function: Option<&str>,
    expected: Option<&str>,
    reduced: bool,
) -> String {
    let mut out = header(options);
    out.push('\n');
    let on = function.map(|f| format!(" on @{f}")).unwrap_or_default();
    out.push_str(&format!("// The input of pass {}, which failed{on}. Replay: passel run THIS_FILE\n", failure.pass));
    if reduced {
        out.push_str(&format!(
            "// Reduced to @{} and the functions it references: {} of {} functions.\n",
            function.unwrap_or_default(),
            input.len(),
            failure.input.len()
        ));
    }
    if let Some(message) = expected {
        let what = if failure.diagnostic.is_some() { "diagnostic" } else { "error" };
        for (i, line) in message.lines().enumerate() {
            out.push_str(&if i == 0 { format!("// {what}: {line}\n") } else { format!("//   {line}\n") });
        }
    }
    out.push_str(&print_module(input));
    out
}

/// The options of a reproducer header's words ([`header_args`]), parsed as `passel run` parses
/// its command line.
pub fn parse_header(words: &[String]) -> Result<PipelineArgs, OptionsError> {
    PipelineArgs::from_words(words, "the reproducer header")
}

/// Replays a reproducer's text with the options of its header, under a
/// `ReproducerInstrument` as the failing run was: the message of the first failing pass call
/// (its error, or its first error diagnostic as `PASS @FUNC: MESSAGE`), `Ok(None)` when no
/// pass fails, an error when the text or its header is broken. Panic messages are not printed
/// while it runs.
pub fn replay(text: &str) -> Result<Option<String>, ReplayError> {
    let words = header_args(text).ok_or(ReplayError::NoHeader)??;
    let options = parse_header(&words)?;
    if options.passes.is_none() {
        return Err(ReplayError::NoPasses);
    }
    let (pipeline, builder) = options.pipeline_and_context()?;
    let module = parse_module(text).map_err(ReplayError::Parse)?;
    verify_module(&module).map_err(ReplayError::Verify)?;
    // The failure is found as the run found it: by the same instrument.
    let inst = Arc::new(ReproducerInstrument::new().stop_at_failure());
    let ctx = builder.instrument(inst.clone()).build()?;
    let hook = panic::take_hook();
    panic::set_hook(Box::new(|_| {}));
    let res = ctx.scope(|| pipeline.run(module, &ctx));
    panic::set_hook(hook);
    let res = res?;
    Ok(inst.failure().and_then(|f| f.message(res.as_ref().err())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_words_round_trip_through_quoting() {
        let options = PipelineArgs {
            passes: Some("InferType,FoldConstant".into()),
            opt_level: Some(3),
            require: vec!["FoldConstant".into()],
            disable: vec![],
            config: vec!["a.b=two words".into(), "q=\"x\\y\"".into()],
            lower: false,
        };
        let line = header(&options);
        assert_eq!(
            line,
            r#"// passel-reproducer: --passes=InferType,FoldConstant -O3 --require=FoldConstant "--config=a.b=two words" "--config=q=\"x\\y\"""#
        );
        let words = header_args(&format!("{line}\ndef @f() {{ 1.0f }}\n")).expect("a header").expect("words");
        assert_eq!(
            words,
            [
                "--passes=InferType,FoldConstant",
                "-O3",
                "--require=FoldConstant",
                "--config=a.b=two words",
                "--config=q=\"x\\y\""
            ]
        );
    }

    #[test]
    fn header_args_needs_the_marker_on_the_first_line() {
        assert_eq!(header_args("def @f() { 1.0f }\n// passel-reproducer: -O3\n"), None);
        assert_eq!(header_args(""), None);
        assert_eq!(header_args("\u{feff}// passel-reproducer: -O3\n"), Some(Ok(vec!["-O3".to_string()])));
        assert_eq!(header_args("// passel-reproducer: \"--passes=A\n"), Some(Err(HeaderError::UnclosedQuote)));
        assert_eq!(
            header_args("// passel-reproducer: \"\\x\"\n"),
            Some(Err(HeaderError::UnknownEscape { found: "`\\x`".into() }))
        );
    }
}
