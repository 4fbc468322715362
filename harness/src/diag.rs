//! Rendering of engine errors for humans: miette reports with source snippets.

use miette::{LabeledSpan, MietteDiagnostic, NamedSource, Report};
use passel_engine::ir::{ParseErrors, VerifyError};

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
