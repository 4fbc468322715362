//! Parsing through the stage cache: a `.pir` file is cut into the texts of its functions
//! without parsing it, each text is hashed, and a function whose text the cache has seen is
//! read from its entry (a binary arena, `passel_engine::encode_source`) instead of being
//! parsed (the entries asked for in batches, `StageStore::get_many`). Only the functions whose
//! text is new are parsed, each on its own.
//!
//! This shortcuts `parse_module` and must give the same module: it is used only when every
//! piece parses as exactly one graph function, the names are distinct and the text has no
//! `resources` section (blobs shared across functions) and no PrimFuncs; otherwise the caller
//! parses the whole file, which also reports any error with its position. Spans are stored
//! relative to the start of the function's text and placed where the text now is, so a
//! function that moved in its file reports diagnostics at its new place.
//! `tests::cached_parse_equals_parse_module` pins it equal to the full parse.

use std::sync::Arc;

use passel_engine::ir::{parse_module, Function, Module};
use passel_engine::{decode_source, encode_source, source_key, StageKey, StageStore};

/// Where each function's text starts, by the cut [`function_texts`] makes: at a line starting
/// with `def `, moved back over the `#[…]` attribute lines right before it. The first piece
/// starts at 0 (comments before the first function belong to it). `None` when the text is
/// not one this shortcut handles.
pub fn function_texts(text: &str) -> Option<Vec<(usize, &str)>> {
    if text.contains("resource") {
        return None;
    }
    let mut line_starts = Vec::new();
    let mut at = 0;
    for line in text.split_inclusive('\n') {
        line_starts.push(at);
        at += line.len();
    }
    let line = |i: usize| &text[line_starts[i]..line_starts.get(i + 1).copied().unwrap_or(text.len())];
    let mut starts = Vec::new();
    for i in 0..line_starts.len() {
        let l = line(i);
        if l.starts_with("prim ") || l.starts_with("prim\t") {
            return None;
        }
        if l.starts_with("def ") || l.starts_with("def\t") {
            let mut first = i;
            while first > 0 && line(first - 1).starts_with("#[") {
                first -= 1;
            }
            starts.push(line_starts[first]);
        }
    }
    if starts.is_empty() {
        return None;
    }
    starts[0] = 0;
    let mut out = Vec::with_capacity(starts.len());
    for (k, &s) in starts.iter().enumerate() {
        let end = starts.get(k + 1).copied().unwrap_or(text.len());
        if end <= s {
            return None;
        }
        out.push((s, &text[s..end]));
    }
    Some(out)
}

/// What [`parse_cached`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SourceCounts {
    /// Functions read from the cache.
    pub reused: usize,
    /// Functions parsed (and stored).
    pub parsed: usize,
}

/// The module `text` parses into, reading the functions whose text `store` has seen (under
/// `build`) from it and parsing only the others, on up to `threads` threads; `None` when the
/// shortcut does not apply or a piece does not parse (the caller parses the whole text).
pub fn parse_cached(text: &str, store: &dyn StageStore, build: &str, threads: usize) -> Option<(Module, SourceCounts)> {
    let pieces = function_texts(text)?;
    let threads = threads.clamp(1, pieces.len());
    let per = pieces.len().div_ceil(threads);
    let results: Vec<Option<Vec<(String, Function, bool)>>> = std::thread::scope(|s| {
        let handles: Vec<_> = pieces
            .chunks(per)
            .map(|chunk| {
                s.spawn(move || {
                    // The chunk's entries asked for in batches: one round trip each to a remote
                    // store.
                    let keys: Vec<StageKey> = chunk.iter().map(|&(_, piece)| source_key(build, piece)).collect();
                    let mut found = Vec::with_capacity(keys.len());
                    for batch in keys.chunks(BATCH) {
                        found.extend(store.get_many(batch));
                    }
                    chunk
                        .iter()
                        .zip(keys)
                        .zip(found)
                        .map(|((&(at, piece), key), entry)| one(piece, at, key, entry, store))
                        .collect()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().ok().flatten()).collect()
    });
    let mut module = Module::new();
    let mut counts = SourceCounts::default();
    for part in results {
        for (name, func, reused) in part? {
            module.add(&name, Arc::new(func)).ok()?;
            if reused {
                counts.reused += 1;
            } else {
                counts.parsed += 1;
            }
        }
    }
    Some((module, counts))
}

/// The function of one piece of text starting at byte `at` of its file, whose source key is
/// `key`, parsed (and its source entry stored); `None` when the piece is not exactly one graph
/// function that parses.
pub fn parse_piece(piece: &str, at: usize, key: StageKey, store: &dyn StageStore) -> Option<(String, Function)> {
    one(piece, at, key, None, store).map(|(name, func, _)| (name, func))
}

/// How many source entries one store request asks for.
const BATCH: usize = 512;

/// The function of one piece of text starting at byte `at` of its file, and whether it came
/// from the cache; `key` is the piece's source key and `entry` the store's entry under it.
fn one(
    piece: &str,
    at: usize,
    key: StageKey,
    entry: Option<Vec<u8>>,
    store: &dyn StageStore,
) -> Option<(String, Function, bool)> {
    let offset = u32::try_from(at).ok()?;
    u32::try_from(at + piece.len()).ok()?;
    if let Some(entry) = entry {
        match decode_source(&entry, &key, offset) {
            Ok((name, func)) => return Some((name, func, true)),
            Err(reason) => store.rejected(&key, reason),
        }
    }
    let module = parse_module(piece).ok()?;
    if module.len() != 1 || module.prim_funcs().next().is_some() {
        return None;
    }
    let (name, func) = module.iter().next()?;
    let entry = encode_source(&key, name, func)?;
    store.put(&key, &entry);
    // Read back from the entry so that the spans sit where the text is in its file.
    let (name, func) = decode_source(&entry, &key, offset).ok()?;
    Some((name, func, false))
}

#[cfg(test)]
mod tests {
    use super::*;
    use passel_engine::ir::print_module;
    use passel_engine::MemoryStore;

    const TEXT: &str = "// a module\n#[Inline=1]\ndef @g(%a: Tensor[(2,), f32]) -> Tensor[(2,), f32] {\n  relu(%a)\n}\n\ndef @f(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {\n  let %y = @g(%x);\n  add(%y, 1.0f)\n}\n";

    fn spans(m: &Module) -> Vec<Vec<Option<passel_engine::ir::Span>>> {
        m.iter().map(|(_, f)| f.node_ids().map(|id| f.span(id)).collect()).collect()
    }

    #[test]
    fn cached_parse_equals_parse_module() {
        let store = MemoryStore::new();
        let full = parse_module(TEXT).expect("parses");
        let (cold, counts) = parse_cached(TEXT, &store, "b", 2).expect("applies");
        assert_eq!(counts, SourceCounts { reused: 0, parsed: 2 });
        let (warm, counts) = parse_cached(TEXT, &store, "b", 2).expect("applies");
        assert_eq!(counts, SourceCounts { reused: 2, parsed: 0 });
        for m in [&cold, &warm] {
            assert_eq!(print_module(m), print_module(&full));
            assert_eq!(spans(m), spans(&full));
        }
        // A function moved down by an edit above it keeps its entry and gets its new spans.
        let moved = TEXT.replace("relu(%a)", "relu(relu(%a))");
        let (m, counts) = parse_cached(&moved, &store, "b", 1).expect("applies");
        assert_eq!(counts, SourceCounts { reused: 1, parsed: 1 });
        let full = parse_module(&moved).expect("parses");
        assert_eq!(spans(&m), spans(&full));
    }

    #[test]
    fn text_the_shortcut_does_not_handle_goes_to_the_full_parse() {
        let store = MemoryStore::new();
        // A parse error, a duplicate name, a resources section, no function at all.
        assert!(parse_cached(&TEXT.replace("add(", "add(("), &store, "b", 1).is_none());
        assert!(parse_cached(&TEXT.replace("@f", "@g"), &store, "b", 1).is_none());
        assert!(parse_cached(&format!("{TEXT}resources {{\n}}\n"), &store, "b", 1).is_none());
        assert!(parse_cached("// nothing\n", &store, "b", 1).is_none());
    }

    #[test]
    fn a_damaged_source_entry_is_parsed_again() {
        let store = MemoryStore::new();
        parse_cached(TEXT, &store, "b", 1).expect("applies");
        for key in store.keys() {
            store.overwrite(&key, b"damaged".to_vec());
        }
        let (m, counts) = parse_cached(TEXT, &store, "b", 1).expect("applies");
        assert_eq!(counts, SourceCounts { reused: 0, parsed: 2 });
        assert_eq!(print_module(&m), print_module(&parse_module(TEXT).expect("parses")));
    }
}
