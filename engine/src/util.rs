//! Small shared helpers.

/// Candidates within a small edit distance of `name`, closest first (ties in input order). A
/// name longer than [`MAX_SHOWN_NAME_CHARS`] gets none: no registered name is that long, and the
/// distance costs its length times each candidate's.
pub fn suggest<'a>(name: &str, candidates: impl Iterator<Item = &'a str>) -> Vec<&'a str> {
    if name.len() > MAX_SHOWN_NAME_CHARS {
        return Vec::new();
    }
    let lower = name.to_ascii_lowercase().replace(['-', '_'], "");
    let mut scored: Vec<(usize, &'a str)> = candidates
        .filter_map(|c| {
            let cl = c.to_ascii_lowercase().replace(['-', '_'], "");
            let d = edit_distance(&lower, &cl);
            let limit = (lower.len().max(cl.len()) / 3).max(2);
            (d <= limit || cl.contains(&lower) && lower.len() >= 3).then_some((d, c))
        })
        .collect();
    scored.sort_by_key(|&(d, _)| d);
    scored.into_iter().take(3).map(|(_, c)| c).collect()
}

/// Levenshtein distance.
pub fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    let mut cur = vec![0; b.len() + 1];
    for (i, ca) in a.chars().enumerate() {
        cur[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            cur[j + 1] = (prev[j] + (ca != cb) as usize).min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        std::mem::swap(&mut prev, &mut cur);
    }
    prev[b.len()]
}

/// Longest name, in characters, that a message shows whole; a longer one is cut there and
/// its full length given, so a hostile 1M-character name cannot make a megabyte-long error.
pub const MAX_SHOWN_NAME_CHARS: usize = 120;

/// `text` with characters that would print as blanks or nothing (control characters such as
/// NUL and newline, the byte-order mark, no-break and other unusual spaces, zero-width
/// characters) written as `\u{…}` escapes, so a message shows what the input really holds.
pub fn escape_invisible(text: &str) -> std::borrow::Cow<'_, str> {
    let invisible = |c: char| {
        c != ' ' && (c.is_control() || c.is_whitespace() || matches!(c, '\u{feff}' | '\u{200b}'..='\u{200f}'))
    };
    if !text.chars().any(invisible) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if invisible(c) {
            use std::fmt::Write as _;
            let _ = write!(out, "\\u{{{:x}}}", c as u32);
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

/// A name from the input (an ONNX node, op, tensor or file name, a pass or config name, an
/// `.npy` header field) as an error message shows it: invisible characters escaped
/// ([`escape_invisible`]) and cut after [`MAX_SHOWN_NAME_CHARS`] characters with the full
/// length said. The one way every layer puts an input's name into a message.
pub fn shown_name(name: &str) -> std::borrow::Cow<'_, str> {
    shown_text(name, MAX_SHOWN_NAME_CHARS)
}

/// Longest message text, in characters, shown whole by [`shown_message`].
pub const MAX_SHOWN_MESSAGE_CHARS: usize = 2000;

/// A message that may quote input (an importer's "what is wrong" text, which can name
/// several values) as shown: [`shown_name`]'s rules with a longer cut.
pub fn shown_message(text: &str) -> std::borrow::Cow<'_, str> {
    shown_text(text, MAX_SHOWN_MESSAGE_CHARS)
}

fn shown_text(text: &str, max_chars: usize) -> std::borrow::Cow<'_, str> {
    match text.char_indices().nth(max_chars) {
        None => escape_invisible(text),
        Some((cut, _)) => std::borrow::Cow::Owned(format!(
            "{}… ({} characters in all)",
            escape_invisible(&text[..cut]),
            text.chars().count()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shown_name_escapes_invisible_characters_and_cuts_long_names() {
        assert_eq!(shown_name("Fold\u{200b}"), "Fold\\u{200b}");
        assert_eq!(shown_name("a\0b\nc"), "a\\u{0}b\\u{a}c");
        assert_eq!(shown_name("relu"), "relu");
        let long = "x".repeat(1_000_000);
        let shown = shown_name(&long);
        assert!(shown.len() < 200, "{}", shown.len());
        assert!(shown.ends_with("… (1000000 characters in all)"), "{shown}");
    }
}
