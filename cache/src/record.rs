//! Run records in the cache: the edit path of `passel run --cache` across processes.
//!
//! A clean run through the cache (no diagnostic, a text the cached parse takes, an output each
//! of whose functions prints alone: [`passel_engine::prints_alone`]) keeps a *record entry*:
//! the engine's [`RunRecord`] of the run and the printed text of each output function. Its key
//! is the *lineage*: the build, the pipeline options and the names of the file's functions in
//! order (read off the `def` lines, without parsing), so an edit of function bodies finds the
//! record of the last run on the same functions under the same options, and another pipeline,
//! configuration or build never does. A later `passel run` whose text no run entry answers cuts
//! the text into its functions, hashes each, parses only those whose text the record does not
//! have, and runs the session from the record (`Session::run_from_record`): only what the edits
//! reach is recomputed, and the output is the record's texts with the changed functions
//! printed afresh. Anything the path does not take (see `passel_engine::session`'s record
//! module) runs the whole module as before.
//!
//! Entry layout: [`RECORD_MAGIC`], the key (16 bytes), a checksum of the payload (8), its
//! length (8), the payload (the engine's record, length-prefixed, then the texts, each
//! length-prefixed). A damaged entry is reported, dropped and not used; the next clean run
//! writes a new one. Two processes writing one key race harmlessly: each entry is whole and
//! names only content-addressed entries.

use std::hash::{DefaultHasher, Hasher};
use std::sync::Arc;

use passel_engine::ir::{print_function, Function, Module};
use passel_engine::transform::{PassContext, Sequential};
use passel_engine::{prints_alone, source_key, RunRecord, StageKey};
use passel_passes::standard_session;

use super::source::{function_texts, parse_piece};
use super::{run_note, Cache};

/// The first bytes of a record entry.
pub const RECORD_MAGIC: &[u8; 4] = b"PSLC";

/// The name token of the `def` line of one function's text (`@name` up to its `(`), without
/// parsing; `None` when the piece has no such line.
fn def_token(piece: &str) -> Option<&str> {
    let line = piece.lines().find(|l| l.starts_with("def ") || l.starts_with("def\t"))?;
    let rest = line[4..].trim_start();
    rest.find('(').map(|end| rest[..end].trim_end())
}

/// The pieces of `text` (see [`function_texts`]), their source keys and the record key of
/// its lineage under `settings`.
pub struct Lineage<'t> {
    pieces: Vec<(usize, &'t str)>,
    /// Per piece: its source key and the byte it starts at.
    sources: Vec<(StageKey, u32)>,
    key: StageKey,
}

impl Lineage<'_> {
    /// Per function: its source key and the byte its text starts at.
    pub fn sources(&self) -> &[(StageKey, u32)] {
        &self.sources
    }
}

impl Cache {
    /// The lineage of `text` under `settings` (the pipeline options as words); `None` when the
    /// text is not one the cached parse takes.
    pub fn lineage<'t>(&self, settings: &str, text: &'t str) -> Option<Lineage<'t>> {
        let pieces = function_texts(text)?;
        let mut names = String::new();
        let mut sources = Vec::with_capacity(pieces.len());
        for &(at, piece) in &pieces {
            names.push_str(def_token(piece)?);
            names.push('\n');
            sources.push((source_key(&self.build, piece), u32::try_from(at).ok()?));
        }
        u32::try_from(text.len()).ok()?;
        // A source key under a build string no source or run key has: a key space of its own.
        let key = source_key(&format!("{}\0record\0{settings}", self.build), &names);
        Some(Lineage { pieces, sources, key })
    }

    /// The record entry under `key` with its texts, when the cache has one that checks.
    fn get_record(&self, key: &StageKey) -> Option<(RunRecord, Vec<String>)> {
        self.get_checked(key, open_record)
    }

    /// Keeps `record` and the texts of its output functions under `key`.
    fn put_record(&self, key: &StageKey, record: &RunRecord, texts: &[String]) {
        let rec = record.encode();
        let mut payload = Vec::with_capacity(rec.len() + texts.iter().map(|t| t.len() + 8).sum::<usize>() + 12);
        payload.extend_from_slice(&(rec.len() as u64).to_le_bytes());
        payload.extend_from_slice(&rec);
        payload.extend_from_slice(&(texts.len() as u32).to_le_bytes());
        for t in texts {
            payload.extend_from_slice(&(t.len() as u64).to_le_bytes());
            payload.extend_from_slice(t.as_bytes());
        }
        let mut entry = Vec::with_capacity(payload.len() + 36);
        entry.extend_from_slice(RECORD_MAGIC);
        entry.extend_from_slice(&key.0);
        entry.extend_from_slice(&checksum(&payload).to_le_bytes());
        entry.extend_from_slice(&(payload.len() as u64).to_le_bytes());
        entry.extend_from_slice(&payload);
        self.store.put(key, &entry);
    }

    /// Keeps the record of a clean run of `lineage`'s text whose output is `module`, printed
    /// as `text`, when each output function prints alone and their texts joined are `text`.
    pub fn keep_record(&self, lineage: &Lineage<'_>, record: &RunRecord, module: &Module, text: &str) {
        let names = record.names();
        let same_order = module.len() == record.outputs().count()
            && module.iter().zip(record.outputs()).all(|((name, _), i)| *name == *names[i]);
        if !same_order || !module.iter().all(|(_, f)| prints_alone(f)) {
            return;
        }
        let texts: Vec<String> = module.iter().map(|(name, f)| print_function(name, f)).collect();
        if texts.join("\n") == text {
            self.put_record(&lineage.key, record, &texts);
        }
    }
}

fn checksum(bytes: &[u8]) -> u64 {
    let mut h = DefaultHasher::new();
    h.write(bytes);
    h.finish()
}

/// The record and texts in the record entry `entry` for `key`, or why it is refused.
fn open_record(entry: &[u8], key: &StageKey) -> Result<(RunRecord, Vec<String>), &'static str> {
    let header = entry.get(..36).ok_or("truncated record entry")?;
    if &header[..4] != RECORD_MAGIC {
        return Err("not a record entry");
    }
    if header[4..20] != key.0 {
        return Err("record entry for another key");
    }
    let word = |b: &[u8]| u64::from_le_bytes(b.try_into().unwrap_or([0xff; 8]));
    let (sum, len) = (word(&header[20..28]), word(&header[28..36]));
    let body = &entry[36..];
    if body.len() as u64 != len {
        return Err("record entry of the wrong length");
    }
    if checksum(body) != sum {
        return Err("checksum mismatch");
    }
    let mut rest = body;
    let mut take = |n: usize| -> Result<&[u8], &'static str> {
        if rest.len() < n {
            return Err("truncated record entry");
        }
        let (head, tail) = rest.split_at(n);
        rest = tail;
        Ok(head)
    };
    let n = usize::try_from(word(take(8)?)).map_err(|_| "truncated record entry")?;
    let record = RunRecord::decode(take(n)?)?;
    let count = u32::from_le_bytes(take(4)?.try_into().map_err(|_| "truncated record entry")?) as usize;
    let mut texts = Vec::with_capacity(count.min(body.len() / 8));
    for _ in 0..count {
        let n = usize::try_from(word(take(8)?)).map_err(|_| "truncated record entry")?;
        texts.push(String::from_utf8(take(n)?.to_vec()).map_err(|_| "record text is not UTF-8")?);
    }
    if !rest.is_empty() {
        return Err("trailing bytes after the record entry");
    }
    Ok((record, texts))
}

/// What a run from a record gives.
pub struct RecordHit {
    /// The printed output.
    pub output: String,
    /// The line for stderr (as a run through the cache prints).
    pub note: String,
    /// Per function stage, its label and the functions it recomputed (`--cache-report`).
    pub recomputed: Vec<(String, Vec<Arc<str>>)>,
}

/// Runs `pipeline` under `ctx` on `lineage`'s text from the record of the last run on its
/// lineage, when the cache has one and the path takes the edits; keeps the new record. `None`:
/// the caller runs the whole module.
pub fn run_from_record(
    pipeline: &Sequential,
    ctx: &PassContext,
    cache: &Cache,
    lineage: &Lineage<'_>,
) -> Option<RecordHit> {
    let (record, mut texts) = cache.get_record(&lineage.key)?;
    let names = record.names().to_vec();
    if names.len() != lineage.pieces.len() || texts.len() != record.outputs().count() {
        return None;
    }
    // The functions whose text the record does not have, parsed (each on its own).
    let mut edited: Vec<(Arc<str>, Arc<Function>)> = Vec::new();
    for (i, (&(at, piece), &(key, _))) in lineage.pieces.iter().zip(&lineage.sources).enumerate() {
        if key != record.sources()[i].0 {
            let (name, func) = parse_piece(piece, at, key, &*cache.store)?;
            if *name != *names[i] {
                return None;
            }
            edited.push((names[i].clone(), Arc::new(func)));
        }
    }
    let parsed = edited.len();
    let mut session = standard_session(pipeline.clone(), ctx).ok()?;
    session.set_store(Some((cache.store.clone(), cache.build.clone()))).ok()?;
    let run = session.run_from_record(record, lineage.sources.clone(), edited).ok()??;
    let mut position = vec![usize::MAX; names.len()];
    for (p, i) in run.record.outputs().enumerate() {
        position[i] = p;
    }
    let index: std::collections::HashMap<&str, usize> = names.iter().enumerate().map(|(i, n)| (&**n, i)).collect();
    for (name, func) in &run.changed {
        let p = *position.get(*index.get(&**name)?)?;
        if p == usize::MAX || !prints_alone(func) {
            return None;
        }
        texts[p] = print_function(name, func);
    }
    let output = texts.join("\n");
    cache.put_record(&lineage.key, &run.record, &texts);
    let recomputed = run.stats.recomputed_per_stage();
    let note =
        run_note(cache, &run.stats.recomputed_functions(), names.len(), Some((parsed, names.len() - parsed)), None);
    let note = format!("{}; from the record of the last run on these functions\n", note.trim_end());
    // The process exits next: the session is not freed node by node.
    std::mem::forget(session);
    Some(RecordHit { output, note, recomputed })
}
