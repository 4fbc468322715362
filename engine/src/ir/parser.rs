//! Parser of the `.pir` text format. (Interim: replaced by the real parser.)

use super::expr::Span;
use super::module::Module;

/// One parse error: where, what was expected, what was found.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{line}:{col}: expected {expected}, found {found}")]
pub struct ParseError {
    /// Byte range of the offending text.
    pub span: Span,
    /// 1-based line.
    pub line: u32,
    /// 1-based column (in characters).
    pub col: u32,
    /// What the parser expected.
    pub expected: String,
    /// What it found.
    pub found: String,
}

/// All errors of one parse, in source order (never empty).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{}", .0.iter().map(|e| e.to_string()).collect::<Vec<_>>().join("\n"))]
pub struct ParseErrors(pub Vec<ParseError>);

/// Parses a module.
pub fn parse_module(_src: &str) -> Result<Module, ParseErrors> {
    Err(ParseErrors(vec![ParseError {
        span: Span::default(),
        line: 1,
        col: 1,
        expected: "a parser".into(),
        found: "none yet".into(),
    }]))
}
