//! Rendering of engine errors for humans: miette reports with source snippets.
//!
//! Rendering is bounded whatever the input: at most [`MAX_RENDERED`] errors are shown (then a
//! line says how many were omitted), the source is scanned once for all of them (errors are
//! located in offset order by one forward walk), and each snippet is an [`Excerpt`] of the
//! error's line and its neighbours, clipped to [`CLIP_CHARS`] characters either side of the
//! span, so a 10 MB one-line file prints a few hundred bytes per error, not the whole line.

use miette::{
    LabeledSpan, MietteDiagnostic, MietteError, MietteSpanContents, Report, SourceCode, SourceSpan, SpanContents,
};
use passel_engine::ir::{ParseErrors, VerifyError, MAX_ERRORS};
use passel_engine::transform::{Diagnostic, Severity};
use passel_passes::TypeDiagnostic;

/// At most this many errors are rendered; the rest are counted.
pub const MAX_RENDERED: usize = MAX_ERRORS;

/// A snippet line shows at most this many characters before and after the span's start.
pub const CLIP_CHARS: usize = 80;

/// One error to render: a message and, when known, the byte range it points at.
pub struct SourceError {
    /// The message (lowercase, no trailing period).
    pub message: String,
    /// Byte range in the source.
    pub span: Option<(usize, usize)>,
    /// Label under the snippet.
    pub label: String,
}

/// Renders `errors` against `src` (named `path`) as miette reports, one after another; past
/// [`MAX_RENDERED`] errors, one line says how many more there were.
/// A file that is not UTF-8 text, and where: `x.pir:2:3: not UTF-8 text: byte 0xff at offset 21
/// is invalid`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}:{line}:{col}: not UTF-8 text: {what}")]
pub struct NotUtf8 {
    /// The file.
    pub path: String,
    /// Line of the first invalid byte (1-based).
    pub line: usize,
    /// Column, in characters (1-based).
    pub col: usize,
    /// The invalid byte and its offset, or that the file ends inside a character.
    pub what: String,
}

/// `bytes` (the contents of `path`) as text, or an error naming where the first invalid UTF-8
/// byte is.
pub fn utf8<'a>(path: &str, bytes: &'a [u8]) -> Result<&'a str, NotUtf8> {
    std::str::from_utf8(bytes).map_err(|e| not_utf8(path, bytes, e))
}

/// The error for `bytes`, which `e` says are not UTF-8.
pub fn not_utf8(path: &str, bytes: &[u8], e: std::str::Utf8Error) -> NotUtf8 {
    let at = e.valid_up_to();
    let before = &bytes[..at];
    let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
    let line_start = before.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    // Columns count characters, as everywhere else; the prefix is valid UTF-8.
    let col = std::str::from_utf8(&before[line_start..]).map_or(0, |s| s.chars().count()) + 1;
    let what = match e.error_len() {
        Some(_) => format!("byte 0x{:02x} at offset {at} is invalid", bytes[at]),
        None => format!("the file ends inside a character at offset {at}"),
    };
    NotUtf8 { path: path.to_string(), line, col, what }
}

pub fn render(path: &str, src: &str, errors: &[SourceError]) -> String {
    let total = errors.len();
    let shown = &errors[..errors.len().min(MAX_RENDERED)];
    let mut locator = Locator::new(src);
    // Locate spans in offset order (one forward walk over the source), render in input order.
    let mut order: Vec<usize> = (0..shown.len()).filter(|&i| shown[i].span.is_some()).collect();
    order.sort_by_key(|&i| shown[i].span.map_or(0, |(s, _)| s));
    let mut excerpts: Vec<Option<Excerpt>> = (0..shown.len()).map(|_| None).collect();
    for i in order {
        if let Some((start, end)) = shown[i].span {
            excerpts[i] = Some(locator.excerpt(path, start, end));
        }
    }
    let mut out = String::new();
    for (e, excerpt) in shown.iter().zip(excerpts) {
        let mut diag = MietteDiagnostic::new(e.message.clone());
        let report = match excerpt {
            Some(excerpt) => {
                diag = diag.with_label(LabeledSpan::at(excerpt.label, e.label.clone()));
                Report::new(diag).with_source_code(excerpt)
            }
            None => Report::new(diag),
        };
        out.push_str(&format!("{report:?}\n"));
    }
    if total > shown.len() {
        out.push_str(&format!(
            "error: {} more error(s) omitted ({total} in all; the first {} are shown)\n",
            total - shown.len(),
            shown.len()
        ));
    }
    out
}

/// Finds line and column of byte offsets by walking forward from the last one found, so
/// locating errors sorted by offset costs one pass over the source.
struct Locator<'s> {
    src: &'s str,
    /// Byte offset, its 0-based line and column (in characters), and where that line starts.
    pos: usize,
    line: usize,
    column: usize,
    line_start: usize,
    /// Where the line before starts (0 on the first line).
    prev_line_start: usize,
}

impl<'s> Locator<'s> {
    fn new(src: &'s str) -> Locator<'s> {
        Locator { src, pos: 0, line: 0, column: 0, line_start: 0, prev_line_start: 0 }
    }

    /// Moves to `offset` (clamped to the source, rounded down to a char boundary); returns
    /// the 0-based line, the column and the byte offset of the line's start.
    fn seek(&mut self, offset: usize) -> (usize, usize, usize) {
        let mut offset = offset.min(self.src.len());
        while !self.src.is_char_boundary(offset) {
            offset -= 1;
        }
        if offset < self.pos {
            // Out of order (equal starts are the common case): walk from the top again.
            self.pos = 0;
            self.line = 0;
            self.column = 0;
            self.line_start = 0;
            self.prev_line_start = 0;
        }
        let bytes = &self.src.as_bytes()[self.pos..offset];
        for (i, &b) in bytes.iter().enumerate() {
            if b == b'\n' {
                self.line += 1;
                self.column = 0;
                self.prev_line_start = self.line_start;
                self.line_start = self.pos + i + 1;
            } else if b & 0xC0 != 0x80 {
                // Not a UTF-8 continuation byte: a new character.
                self.column += 1;
            }
        }
        self.pos = offset;
        (self.line, self.column, self.line_start)
    }

    /// The snippet for the byte range `start..end`.
    fn excerpt(&mut self, name: &str, start: usize, end: usize) -> Excerpt {
        let src = self.src;
        let (line, column, line_start) = self.seek(start);
        let start = self.pos;
        // The window: up to CLIP_CHARS characters either side of the span's start.
        let before: Vec<usize> =
            src[line_start..start].char_indices().rev().take(CLIP_CHARS + 1).map(|(i, _)| i).collect();
        let (win_start, clipped_left) = match before.len() {
            n if n > CLIP_CHARS => (line_start + before[CLIP_CHARS - 1], true),
            0 => (start, false),
            _ => (line_start, false),
        };
        // Scan at most CLIP_CHARS characters forward: the line may be megabytes long.
        let (win_end, line_ends_in_window) =
            match src[start..].char_indices().take(CLIP_CHARS + 1).find(|&(_, c)| c == '\n') {
                Some((i, _)) => (start + i, true),
                None => match src[start..].char_indices().nth(CLIP_CHARS) {
                    Some((i, _)) => (start + i, false),
                    None => (src.len(), true),
                },
            };
        let clipped_right = !line_ends_in_window;
        let line_end = win_end;

        let mut text = String::new();
        let mut first_line = line;
        if line > 0 {
            first_line -= 1;
            push_clipped_line(&mut text, &src[self.prev_line_start..line_start - 1]);
        }
        let main_offset = text.len();
        if clipped_left {
            text.push('…');
        }
        let label_start = text.len() + (start - win_start);
        text.push_str(&src[win_start..win_end]);
        if clipped_right {
            text.push('…');
        }
        let main_len = text.len() - main_offset;
        let end = end.clamp(start, win_end);
        let label = SourceSpan::new(label_start.into(), end - start);
        if line_ends_in_window && line_end + 1 < src.len() {
            text.push('\n');
            push_clipped_line(&mut text, next_line(src, line_end + 1));
        }
        Excerpt { name: name.to_string(), text, first_line, line, column, main_offset, main_len, label }
    }
}

/// The line starting at `from`, or its first `2 * CLIP_CHARS + 1` characters when longer
/// (found without scanning the rest of a long line).
fn next_line(src: &str, from: usize) -> &str {
    let rest = &src[from..];
    let end = rest.char_indices().take(2 * CLIP_CHARS + 1).find(|&(_, c)| c == '\n').map(|(i, _)| i);
    let end = end.or_else(|| rest.char_indices().nth(2 * CLIP_CHARS + 1).map(|(i, _)| i)).unwrap_or(rest.len());
    &rest[..end]
}

/// Appends a context line, cut after `2 * CLIP_CHARS` characters, and a newline.
fn push_clipped_line(text: &mut String, line: &str) {
    let line = line.strip_suffix('\r').unwrap_or(line);
    match line.char_indices().nth(2 * CLIP_CHARS) {
        Some((i, _)) => {
            text.push_str(&line[..i]);
            text.push('…');
        }
        None => text.push_str(line),
    }
    text.push('\n');
}

/// A few clipped lines around one error, standing in for the whole source: miette reads the
/// snippet from here, with the real line numbers and column.
#[derive(Debug)]
struct Excerpt {
    name: String,
    text: String,
    /// 0-based line number of the excerpt's first line.
    first_line: usize,
    /// 0-based line and column of the span's start in the real source.
    line: usize,
    column: usize,
    /// The error's line within `text`.
    main_offset: usize,
    main_len: usize,
    /// The span, in `text` coordinates.
    label: SourceSpan,
}

impl SourceCode for Excerpt {
    fn read_span<'a>(
        &'a self,
        _span: &SourceSpan,
        context_lines_before: usize,
        context_lines_after: usize,
    ) -> Result<Box<dyn SpanContents<'a> + 'a>, MietteError> {
        if context_lines_before == 0 && context_lines_after == 0 {
            // The header's `file:line:col`.
            let data = &self.text.as_bytes()[self.main_offset..self.main_offset + self.main_len];
            let span = SourceSpan::new(self.main_offset.into(), self.main_len);
            return Ok(Box::new(MietteSpanContents::new_named(
                self.name.clone(),
                data,
                span,
                self.line,
                self.column,
                1,
            )));
        }
        let span = SourceSpan::new(0.into(), self.text.len());
        let lines = self.text.lines().count();
        Ok(Box::new(MietteSpanContents::new_named(
            self.name.clone(),
            self.text.as_bytes(),
            span,
            self.first_line,
            0,
            lines,
        )))
    }
}

/// Converts parse errors into renderable errors.
/// Renders the errors of one parse; a parse stops at [`MAX_ERRORS`] errors, and a last line
/// then says so.
pub fn render_parse_errors(path: &str, src: &str, errors: &ParseErrors) -> String {
    let mut out = render(path, src, &parse_errors(errors));
    if errors.0.len() >= MAX_ERRORS {
        out.push_str(&format!("error: too many errors: parsing stopped after {MAX_ERRORS}\n"));
    }
    out
}

/// Converts parse errors into renderable errors.
pub fn parse_errors(errors: &ParseErrors) -> Vec<SourceError> {
    errors
        .0
        .iter()
        .map(|e| SourceError {
            message: e.to_string(),
            span: Some((e.span.start as usize, e.span.end as usize)),
            label: match &e.message {
                Some(m) => m.clone(),
                None => format!("expected {}", e.expected),
            },
        })
        .collect()
}

/// Converts verifier errors into renderable errors.
pub fn verify_errors(errors: &[VerifyError]) -> Vec<SourceError> {
    errors
        .iter()
        .map(|e| SourceError {
            message: e.to_string(),
            span: e.span.map(|s| (s.start as usize, s.end as usize)),
            label: e.msg.clone(),
        })
        .collect()
}

/// Converts type errors (InferType's, as `check` finds them) into renderable errors.
pub fn type_errors(errors: &[TypeDiagnostic]) -> Vec<SourceError> {
    errors
        .iter()
        .map(|e| SourceError {
            message: format!("type error in @{}: {}", e.func, e.message),
            span: e.span.map(|s| (s.start as usize, s.end as usize)),
            label: e.message.clone(),
        })
        .collect()
}

/// Converts the diagnostics of a pipeline run into renderable errors, each once: a pass that
/// runs several times (InferType is required by most passes) reports the same problem each
/// time, and the reader needs it once. First occurrences keep their order.
pub fn pass_diagnostics(diags: &[Diagnostic]) -> Vec<SourceError> {
    let mut seen = std::collections::HashSet::new();
    diags
        .iter()
        .filter(|d| seen.insert((d.severity == Severity::Error, &d.pass, &d.function, d.span, &d.message)))
        .map(|d| SourceError {
            message: format!(
                "{} in pass {}{}: {}",
                if d.severity == Severity::Error { "error" } else { "warning" },
                d.pass,
                d.function.as_deref().map(|f| format!(" @{f}")).unwrap_or_default(),
                d.message
            ),
            span: d.span.map(|s| (s.start as usize, s.end as usize)),
            label: d.message.clone(),
        })
        .collect()
}
