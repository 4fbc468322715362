//! Textual pipelines: `FoldConstant,EliminateCommonSubexpr,DeadCodeElimination`.
//!
//! Grammar (whitespace between tokens is ignored):
//! ```text
//! pipeline := item (',' item)*
//! item     := NAME | '[' pipeline ']'
//! NAME     := [A-Za-z0-9_.-]+      (a registry name, TVM or CLI spelling)
//! ```
//! A bracketed group is a nested `Sequential` with the default name "sequential"; groups nest
//! at most [`MAX_PIPELINE_DEPTH`] levels (counting the whole pipeline as one). Names are
//! resolved through the registry; [`print_pipeline`] prints a parsed pipeline back in the
//! same form (names in their registered spelling, no spaces).

use std::sync::Arc;

use super::error::{PassError, PipelineError};
use super::pass::Pass;
use super::pass::{Sequential, MAX_PIPELINE_DEPTH};
use super::registry::get_pass;
use crate::util::shown_name;

/// Parses `text` into a `Sequential` named "sequential".
pub fn parse_pipeline(text: &str) -> Result<Sequential, PassError> {
    let mut p = Parser { text, pos: 0 };
    // Groups nest by an explicit stack, so deep nesting cannot overflow the call stack.
    let mut stack: Vec<(usize, Vec<Arc<dyn Pass>>)> = vec![(0, Vec::new())];
    loop {
        p.skip_ws();
        let start = p.pos;
        match p.peek() {
            Some('[') => {
                // The outermost list is depth 1; each open group adds one.
                if stack.len() >= MAX_PIPELINE_DEPTH {
                    let message = format!("pipeline groups nest deeper than {MAX_PIPELINE_DEPTH} levels");
                    return Err(p.error_at(start, message).into());
                }
                p.pos += 1;
                stack.push((start, Vec::new()));
                continue;
            }
            Some(c) if is_name_char(c) => {
                let name = p.name();
                let pass = get_pass(name).map_err(|e| p.error_at(start, e.to_string()))?;
                if let Some((_, items)) = stack.last_mut() {
                    items.push(pass);
                }
            }
            Some(c) => {
                return Err(p
                    .error_at(
                        start,
                        format!("expected a pass name or `[`, found `{}`", shown_name(c.encode_utf8(&mut [0; 4]))),
                    )
                    .into())
            }
            None => return Err(p.error_at(start, "expected a pass name or `[`, found end of pipeline").into()),
        }
        // After an item: close groups, then a comma or the end.
        loop {
            p.skip_ws();
            match p.peek() {
                Some(']') if stack.len() > 1 => {
                    p.pos += 1;
                    if let Some((_, items)) = stack.pop() {
                        if let Some((_, outer)) = stack.last_mut() {
                            outer.push(Sequential::unnamed(items).shared());
                        }
                    }
                }
                Some(',') => {
                    p.pos += 1;
                    break;
                }
                None if stack.len() == 1 => {
                    let items = stack.pop().map(|(_, items)| items).unwrap_or_default();
                    return Ok(Sequential::unnamed(items));
                }
                None => {
                    let open = stack.last().map(|(pos, _)| *pos).unwrap_or(0);
                    return Err(p.error_at(open, "unclosed `[`").into());
                }
                Some(c) => {
                    return Err(p
                        .error_at(
                            p.pos,
                            format!(
                                "expected `,`, `]` or end of pipeline, found `{}`",
                                shown_name(c.encode_utf8(&mut [0; 4]))
                            ),
                        )
                        .into())
                }
            }
        }
    }
}

/// Prints a pipeline: the passes of `seq` separated by commas, unnamed nested sequentials in
/// brackets, everything else by its registry name.
pub fn print_pipeline(seq: &Sequential) -> String {
    let mut out = String::new();
    // Explicit stack of (remaining passes, whether to close a bracket when done).
    let mut stack: Vec<(std::slice::Iter<'_, Arc<dyn Pass>>, bool)> = vec![(seq.passes().iter(), false)];
    let mut first = true;
    while let Some((iter, close)) = stack.last_mut() {
        match iter.next() {
            Some(pass) => {
                if !first {
                    out.push(',');
                }
                first = false;
                match pass.as_sequential() {
                    Some(inner) if inner.info().name == "sequential" => {
                        out.push('[');
                        first = true;
                        stack.push((inner.passes().iter(), true));
                    }
                    _ => out.push_str(&pass.info().name),
                }
            }
            None => {
                if *close {
                    out.push(']');
                }
                first = false;
                stack.pop();
            }
        }
    }
    out
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.')
}

struct Parser<'a> {
    text: &'a str,
    pos: usize,
}

impl<'a> Parser<'a> {
    fn peek(&self) -> Option<char> {
        self.text[self.pos..].chars().next()
    }

    fn skip_ws(&mut self) {
        while let Some(c) = self.peek().filter(|c| c.is_whitespace()) {
            self.pos += c.len_utf8();
        }
    }

    fn name(&mut self) -> &'a str {
        let start = self.pos;
        while self.peek().is_some_and(is_name_char) {
            self.pos += 1;
        }
        &self.text[start..self.pos]
    }

    fn error_at(&self, pos: usize, message: impl Into<String>) -> PipelineError {
        PipelineError { pos, message: message.into() }
    }
}
