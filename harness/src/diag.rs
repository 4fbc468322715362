//! Rendering of engine errors for humans: miette reports with source snippets.

use miette::{LabeledSpan, MietteDiagnostic, NamedSource, Report};
use passel_engine::ir::ParseErrors;

/// One error to render: a message and, when known, the byte range it points at.
pub struct SourceError {
    /// The message (lowercase, no trailing period).
    pub message: String,
    /// Byte range in the source.
    pub span: Option<(usize, usize)>,
    /// Label under the snippet.
    pub label: String,
}

/// Renders `errors` against `src` (named `path`) as miette reports, one after another.
pub fn render(path: &str, src: &str, errors: &[SourceError]) -> String {
    let mut out = String::new();
    for e in errors {
        let mut diag = MietteDiagnostic::new(e.message.clone());
        if let Some((start, end)) = e.span {
            let start = start.min(src.len());
            let len = end.saturating_sub(start).min(src.len() - start);
            diag = diag.with_label(LabeledSpan::at(start..start + len, e.label.clone()));
        }
        let report = Report::new(diag).with_source_code(NamedSource::new(path, src.to_string()));
        out.push_str(&format!("{report:?}\n"));
    }
    out
}

/// Converts parse errors into renderable errors.
pub fn parse_errors(errors: &ParseErrors) -> Vec<SourceError> {
    errors
        .0
        .iter()
        .map(|e| SourceError {
            message: format!("{}:{}: {}", e.line, e.col, e.to_string().splitn(3, ':').nth(2).unwrap_or("").trim()),
            span: Some((e.span.start as usize, e.span.end as usize)),
            label: format!("expected {}", e.expected),
        })
        .collect()
}
