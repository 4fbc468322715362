//! The session's persistent tier: function-stage results kept outside the process, keyed by
//! content, so that a new process (or another machine sharing the store) re-runs only the
//! stages whose inputs it has not seen.
//!
//! A function stage's result is a pure function of the function's content, what its module
//! view shows of its callees (their signatures), the stage's passes and the context settings,
//! and the code of the passes. [`StageKey`] hashes all of it; the code is named by the engine
//! version, the entry format and a *build* string the embedder gives
//! ([`super::Session::set_store`]; the CLI passes a hash of its own executable, so any
//! rebuild starts a new key space). A stage is stored only when every pass of it is a
//! registered pass (identified by its registry name): a pass object the registry does not
//! know has no identity that outlives the process.
//!
//! The engine does no IO: a [`StageStore`] is a byte store that the embedder implements
//! (the CLI's is a directory and, behind it, Redis); [`MemoryStore`] is the in-process one.
//!
//! # Entries
//! An entry holds the output function's arena in a binary encoding (`codec.rs`: every node
//! with its type and its span relative to the input's first span, the side tables by value;
//! or a marker when the stage returned its input unchanged), the
//! diagnostics of each pass and whether the stage's fusion check failed, behind a header with
//! a magic number, the format version, the key and a checksum of the payload. An entry is
//! used only when all of these check and the arena decodes into a well-formed function;
//! anything else is reported ([`StageStore::rejected`]) and recomputed, never trusted and
//! never fatal. The encoding is exact (the same nodes, ids, names, types, constants,
//! attributes and relative spans: what later stages and the printed output depend on), so a
//! hit gives exactly what the computation gave, and reading one costs no parse.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::{Arc, Weak};

use dashmap::DashMap;

use super::codec::{read_function, read_span, write_function, write_span, Reader, Writer};
use super::db::{callees, FnVal, StageOut};
use super::same::span_base;
use crate::ir::{ExprKind, Function, Module, NodeId};
use crate::transform::{Diagnostic, Severity};

/// The version of the entry format and of the key derivation; bumping it starts a new key
/// space.
pub const STORE_FORMAT: u32 = 4;

const MAGIC: &[u8; 4] = b"PSLS";

/// A stage result's key: a 128-bit hash of everything the result depends on.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct StageKey(pub [u8; 16]);

impl StageKey {
    /// The key as 32 lowercase hex digits.
    pub fn to_hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }
}

impl std::fmt::Display for StageKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.to_hex())
    }
}

/// Where a session keeps stage results beyond its own memory: bytes by key. Implementations
/// must be safe to call from the session's worker threads at once, and must never fail a run:
/// a `get` that cannot answer returns `None`, a `put` that cannot write drops the entry.
pub trait StageStore: Send + Sync {
    /// The entry stored under `key`, if any.
    fn get(&self, key: &StageKey) -> Option<Vec<u8>>;
    /// The entries stored under `keys`, in order: one request for a batch where the store
    /// can (a remote store's round trip is paid once per batch, not per key). By default,
    /// [`StageStore::get`] for each.
    fn get_many(&self, keys: &[StageKey]) -> Vec<Option<Vec<u8>>> {
        keys.iter().map(|key| self.get(key)).collect()
    }
    /// Stores `entry` under `key` (replacing any entry there).
    fn put(&self, key: &StageKey, entry: &[u8]);
    /// The entry under `key` failed a check (`reason`) and was recomputed; a store may warn
    /// and drop it.
    fn rejected(&self, key: &StageKey, reason: &str) {
        let _ = (key, reason);
    }
}

/// An in-process store shared by the worker threads (and by sessions that are given the same
/// one): a concurrent map, so workers that look up or store different functions never wait
/// on one lock. Optionally in front of a slower store (`behind`): a miss is asked there and a
/// hit kept here; a put goes to both.
#[derive(Default)]
pub struct MemoryStore {
    map: DashMap<StageKey, Arc<[u8]>>,
    behind: Option<Arc<dyn StageStore>>,
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> MemoryStore {
        MemoryStore::default()
    }

    /// An empty store in front of `behind`.
    pub fn in_front_of(behind: Arc<dyn StageStore>) -> MemoryStore {
        MemoryStore { map: DashMap::new(), behind: Some(behind) }
    }

    /// How many entries it holds.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether it holds no entry.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Every key, in no particular order.
    pub fn keys(&self) -> Vec<StageKey> {
        self.map.iter().map(|e| *e.key()).collect()
    }

    /// Replaces the entry under `key` by `entry` without passing it on (for tests that damage
    /// entries).
    pub fn overwrite(&self, key: &StageKey, entry: Vec<u8>) {
        self.map.insert(*key, entry.into());
    }
}

impl StageStore for MemoryStore {
    fn get(&self, key: &StageKey) -> Option<Vec<u8>> {
        if let Some(entry) = self.map.get(key) {
            return Some(entry.to_vec());
        }
        let entry = self.behind.as_ref()?.get(key)?;
        self.map.insert(*key, entry.as_slice().into());
        Some(entry)
    }

    fn get_many(&self, keys: &[StageKey]) -> Vec<Option<Vec<u8>>> {
        let mut found: Vec<Option<Vec<u8>>> = keys.iter().map(|key| self.map.get(key).map(|e| e.to_vec())).collect();
        let Some(behind) = &self.behind else { return found };
        let missing: Vec<usize> = (0..keys.len()).filter(|&i| found[i].is_none()).collect();
        if missing.is_empty() {
            return found;
        }
        let asked: Vec<StageKey> = missing.iter().map(|&i| keys[i]).collect();
        for (i, entry) in missing.into_iter().zip(behind.get_many(&asked)) {
            if let Some(entry) = entry {
                self.map.insert(keys[i], entry.as_slice().into());
                found[i] = Some(entry);
            }
        }
        found
    }

    fn put(&self, key: &StageKey, entry: &[u8]) {
        self.map.insert(*key, entry.into());
        if let Some(behind) = &self.behind {
            behind.put(key, entry);
        }
    }

    fn rejected(&self, key: &StageKey, reason: &str) {
        self.map.remove(key);
        if let Some(behind) = &self.behind {
            behind.rejected(key, reason);
        }
    }
}

/// A stable 128-bit hasher: two SipHash-1-3 streams with fixed keys (`DefaultHasher::new`),
/// the second one prefixed. Deterministic across processes of one build; the key space is
/// per build anyway.
struct StableHasher(DefaultHasher, DefaultHasher);

impl StableHasher {
    fn new() -> StableHasher {
        let mut second = DefaultHasher::new();
        second.write(b"passel-store-second-stream");
        StableHasher(DefaultHasher::new(), second)
    }

    fn finish128(&self) -> [u8; 16] {
        let mut out = [0u8; 16];
        out[..8].copy_from_slice(&self.0.finish().to_le_bytes());
        out[8..].copy_from_slice(&self.1.finish().to_le_bytes());
        out
    }
}

impl Hasher for StableHasher {
    fn finish(&self) -> u64 {
        self.0.finish()
    }

    fn write(&mut self, bytes: &[u8]) {
        self.0.write(bytes);
        self.1.write(bytes);
    }
}

/// A stage's persistent identity and the store its results go to.
#[derive(Clone)]
pub(crate) struct Persist {
    fingerprint: [u8; 16],
    pub(crate) store: Arc<dyn StageStore>,
    /// Shared by every stage of the session's plans.
    contents: Arc<ContentKeys>,
}

/// What a session was given with [`super::Session::set_store`].
#[derive(Clone)]
pub(crate) struct StoreConfig {
    pub(crate) store: Arc<dyn StageStore>,
    pub(crate) build: String,
    pub(crate) contents: Arc<ContentKeys>,
}

impl StoreConfig {
    /// The store `store` for the code named `build`.
    pub(crate) fn new(store: Arc<dyn StageStore>, build: String) -> StoreConfig {
        StoreConfig { store, build, contents: Arc::default() }
    }
}

/// The content key of each function the session's stages have seen as an input or output:
/// a 128-bit name of the function's content (up to where it sits in its file).
///
/// A function loaded into the session gets the hash of its content (`hash_content`, every
/// node); a function a stage produced gets the hash of that stage's key, which determines it
/// (the output of a stage is a pure function of what the key covers, and an entry is the
/// output to the last byte). So a function costs one hash over its nodes, at the first stage,
/// and each later stage hashes a key and its callees' signatures: the key chain of issue #30.
/// Two different chains that give equal functions give different keys; that costs a miss,
/// never a wrong result.
///
/// Entries are by address, holding a `Weak` so the address is not reused while the entry
/// exists.
#[derive(Default)]
pub(crate) struct ContentKeys(DashMap<usize, (Weak<Function>, [u8; 16])>);

impl ContentKeys {
    /// The content key of `func`, hashing it when no stage gave one.
    fn of(&self, func: &Arc<Function>) -> [u8; 16] {
        let addr = Arc::as_ptr(func) as usize;
        if let Some(known) = self.0.get(&addr) {
            return known.1;
        }
        let mut h = StableHasher::new();
        hash_content(func, &mut h);
        let key = h.finish128();
        self.0.insert(addr, (Arc::downgrade(func), key));
        key
    }

    /// Notes that `out`, the result of the stage whose key is `key` for `input`, is named by
    /// that key (unless it is `input` itself, which keeps its name).
    fn produced(&self, key: &StageKey, input: &Arc<Function>, out: &Arc<Function>) {
        if Arc::ptr_eq(input, out) {
            return;
        }
        let mut h = StableHasher::new();
        (b"output of", key.0).hash(&mut h);
        self.0.insert(Arc::as_ptr(out) as usize, (Arc::downgrade(out), h.finish128()));
    }
}

impl Persist {
    /// The persistent identity of a function stage whose passes have the registered names
    /// `passes` (each with whether it runs as a module pass's per-function form), under the
    /// settings `settings` (opt level, required and disabled passes, config, as text).
    pub(crate) fn new(cfg: &StoreConfig, settings: &str, passes: &[(String, bool)]) -> Persist {
        let mut h = StableHasher::new();
        (STORE_FORMAT, env!("CARGO_PKG_VERSION"), cfg.build.as_str(), settings).hash(&mut h);
        passes.hash(&mut h);
        Persist { fingerprint: h.finish128(), store: cfg.store.clone(), contents: cfg.contents.clone() }
    }

    /// The key of this stage's result for `input` (the function `name`) with a module view in
    /// which `view` gives the callees: the stage, the input's content key ([`ContentKeys`])
    /// and each callee's signature.
    pub(crate) fn key(&self, name: &str, input: &Arc<Function>, view: &Module) -> StageKey {
        let mut h = StableHasher::new();
        self.fingerprint.hash(&mut h);
        name.hash(&mut h);
        self.contents.of(input).hash(&mut h);
        for callee in callees(name, input) {
            callee.hash(&mut h);
            match view.get(callee) {
                Some(f) => {
                    1u8.hash(&mut h);
                    hash_signature(f, &mut h);
                }
                None => 0u8.hash(&mut h),
            }
        }
        StageKey(h.finish128())
    }

    /// The stored result under `key` for `input`, when there is one and
    /// it passes every check; a failing entry is reported to the store.
    pub(crate) fn lookup(&self, key: &StageKey, input: &Arc<Function>) -> Option<StageOut> {
        let entry = self.store.get(key)?;
        self.open(&entry, key, input)
    }

    /// The result in `entry` (the store's entry under `key`) for `input`, when it passes every
    /// check; a failing entry is reported to the store.
    pub(crate) fn open(&self, entry: &[u8], key: &StageKey, input: &Arc<Function>) -> Option<StageOut> {
        match decode(entry, key, input) {
            Ok(out) => {
                self.contents.produced(key, input, &out.func.0);
                Some(out)
            }
            Err(reason) => {
                self.store.rejected(key, reason);
                None
            }
        }
    }

    /// Stores `out`, the stage's result for `input`, under `key`.
    pub(crate) fn save(&self, key: &StageKey, input: &Arc<Function>, out: &StageOut) {
        self.contents.produced(key, input, &out.func.0);
        if let Some(entry) = encode(key, input, out) {
            self.store.put(key, &entry);
        }
    }
}

/// Feeds everything of `f` that a stage's result depends on into `h`: what
/// `same::same_function` compares (nodes, ids, types, relative spans, attributes), with names,
/// constants and attributes by value rather than by table index.
fn hash_content(f: &Function, h: &mut impl Hasher) {
    f.num_nodes().hash(h);
    f.body().hash(h);
    f.ret_ty().hash(h);
    f.attrs().hash(h);
    f.try_params().hash(h);
    let base = span_base(f);
    for id in f.node_ids() {
        let node = f.node(id);
        f.ty(id).hash(h);
        f.span(id).map(|s| (s.start.wrapping_sub(base), s.end.wrapping_sub(base))).hash(h);
        std::mem::discriminant(&node.kind).hash(h);
        match node.kind {
            ExprKind::Var { name } | ExprKind::Global { name } => f.try_sym(name).hash(h),
            ExprKind::Const { idx } => f.try_constant(idx).hash(h),
            ExprKind::Call { op, attrs, args } => {
                op.hash(h);
                f.try_call_attrs(attrs).hash(h);
                f.try_ids(args).hash(h);
            }
            ExprKind::Apply { callee, args } => {
                callee.hash(h);
                f.try_ids(args).hash(h);
            }
            ExprKind::Tuple { fields } => f.try_ids(fields).hash(h),
            ExprKind::Proj { tuple, index } => (tuple, index).hash(h),
            ExprKind::If { cond, then_, else_ } => (cond, then_, else_).hash(h),
            ExprKind::Func { idx } => match f.try_closure(idx) {
                Some(c) => {
                    f.try_ids(c.params).hash(h);
                    c.body.hash(h);
                    c.ret_ty.hash(h);
                    c.attrs.hash(h);
                }
                None => 0u8.hash(h),
            },
            ExprKind::Block { bindings, result } => {
                f.try_ids(bindings).hash(h);
                result.hash(h);
            }
        }
    }
}

/// Feeds what a caller sees of `f` (as `same::same_signature` compares it) into `h`.
fn hash_signature(f: &Function, h: &mut impl Hasher) {
    f.attrs().hash(h);
    f.ret_ty().hash(h);
    f.try_ty(f.body()).hash(h);
    for &p in f.try_params().unwrap_or(&[]) {
        f.try_ty(p).hash(h);
    }
}

/// `payload` behind the entry header: magic number, format version, key, checksum.
fn seal(key: &StageKey, payload: &[u8]) -> Vec<u8> {
    let mut e = Writer(Vec::with_capacity(payload.len() + 40));
    e.0.extend_from_slice(MAGIC);
    e.u32(STORE_FORMAT);
    e.0.extend_from_slice(&key.0);
    e.u64(checksum(payload));
    e.bytes(payload);
    e.0
}

/// The payload of `entry` when its header checks for `key`, or why it is refused.
fn unseal<'e>(entry: &'e [u8], key: &StageKey) -> Result<&'e [u8], &'static str> {
    let mut r = Reader(entry);
    if r.take(4)? != MAGIC {
        return Err("not a passel store entry");
    }
    if r.u32()? != STORE_FORMAT {
        return Err("entry of another format version");
    }
    if r.take(16)? != key.0 {
        return Err("entry is for another key");
    }
    let sum = r.u64()?;
    let payload = r.bytes()?;
    if !r.0.is_empty() {
        return Err("trailing bytes after the entry");
    }
    if checksum(payload) != sum {
        return Err("checksum mismatch");
    }
    Ok(payload)
}

/// The key of the parsed form of one function's source text `text` (a whole `def`, attributes
/// included) under the build `build`: what lets a new process skip parsing the functions whose
/// text it has seen. The text's position in its file is not part of it (spans are stored
/// relative to the text's start).
pub fn source_key(build: &str, text: &str) -> StageKey {
    let mut h = StableHasher::new();
    (STORE_FORMAT, env!("CARGO_PKG_VERSION"), build, "source").hash(&mut h);
    text.hash(&mut h);
    StageKey(h.finish128())
}

/// The entry holding `func`, the function `name` parsed from the text of key `key`, its spans
/// relative to the text's start; `None` when the function cannot be encoded.
pub fn encode_source(key: &StageKey, name: &str, func: &Function) -> Option<Vec<u8>> {
    let mut p = Writer(Vec::new());
    p.str(name);
    write_function(&mut p, func, 0)?;
    Some(seal(key, &p.0))
}

/// The function (name and arena) in a source entry for `key`, its spans placed at `offset`
/// (where the text starts in its file), or why the entry is refused.
pub fn decode_source(entry: &[u8], key: &StageKey, offset: u32) -> Result<(String, Function), &'static str> {
    let mut p = Reader(unseal(entry, key)?);
    let name = p.str()?.to_string();
    let func = read_function(&mut p, offset)?;
    if !p.0.is_empty() {
        return Err("trailing bytes in the payload");
    }
    Ok((name, func))
}

fn checksum(payload: &[u8]) -> u64 {
    let mut h = DefaultHasher::new();
    h.write(payload);
    h.finish()
}

/// Output kinds in an entry.
const SAME_AS_INPUT: u8 = 0;
const ARENA: u8 = 1;

/// The entry for `out` (the result for `input`, function `name`), or `None` when the output
/// cannot be encoded (a malformed arena, a type nested deeper than an entry allows).
fn encode(key: &StageKey, input: &Arc<Function>, out: &StageOut) -> Option<Vec<u8>> {
    let base = span_base(input);
    let mut p = Writer(Vec::new());
    p.u8(u8::from(out.unfusable));
    let func = &out.func.0;
    if Arc::ptr_eq(func, input) {
        p.u8(SAME_AS_INPUT);
    } else {
        p.u8(ARENA);
        write_function(&mut p, func, base)?;
    }
    p.u32(out.diags.len() as u32);
    for diags in out.diags.iter() {
        p.u32(diags.len() as u32);
        for d in diags {
            p.u8(match d.severity {
                Severity::Warning => 0,
                Severity::Error => 1,
            });
            p.bytes(d.pass.as_bytes());
            p.opt_str(d.function.as_deref());
            write_span(&mut p, d.span, base);
            match d.node {
                Some(node) => {
                    p.u8(1);
                    p.u32(node.0);
                }
                None => p.u8(0),
            }
            p.bytes(d.message.as_bytes());
        }
    }
    Some(seal(key, &p.0))
}

/// The result in `entry` for `input` (the function `name`) under `key`, or why it is refused.
fn decode(entry: &[u8], key: &StageKey, input: &Arc<Function>) -> Result<StageOut, &'static str> {
    let payload = unseal(entry, key)?;
    let base = span_base(input);
    let mut p = Reader(payload);
    let unfusable = match p.u8()? {
        0 => false,
        1 => true,
        _ => return Err("bad flag"),
    };
    let func = match p.u8()? {
        SAME_AS_INPUT => input.clone(),
        ARENA => Arc::new(read_function(&mut p, base)?),
        _ => return Err("bad output tag"),
    };
    let n_passes = p.u32()? as usize;
    if n_passes > payload.len() {
        return Err("pass count larger than the entry");
    }
    let mut diags = Vec::with_capacity(n_passes);
    for _ in 0..n_passes {
        let n = p.u32()? as usize;
        if n > payload.len() {
            return Err("diagnostic count larger than the entry");
        }
        let mut list = Vec::with_capacity(n);
        for _ in 0..n {
            let severity = match p.u8()? {
                0 => Severity::Warning,
                1 => Severity::Error,
                _ => return Err("bad severity"),
            };
            let pass = p.str()?.to_string();
            let function = p.opt_str()?.map(str::to_string);
            let span = read_span(&mut p, base)?;
            let node = match p.u8()? {
                0 => None,
                1 => Some(NodeId(p.u32()?)),
                _ => return Err("bad node tag"),
            };
            let message = p.str()?.to_string();
            list.push(Diagnostic { severity, pass, function, span, node, message });
        }
        diags.push(list);
    }
    if !p.0.is_empty() {
        return Err("trailing bytes in the payload");
    }
    Ok(StageOut { func: FnVal(func), diags: Arc::new(diags), unfusable })
}

/// An entry holding `func` alone, its spans relative to `base`, keyed by its own content (a
/// hash of the encoding): what a run record (`record.rs`) names a module pass's output by. Two
/// processes writing one key write the same bytes. `None` for a function the encoding cannot
/// hold (not well formed).
pub(crate) fn encode_function(func: &Function, base: u32) -> Option<(StageKey, Vec<u8>)> {
    let mut p = Writer(Vec::new());
    write_function(&mut p, func, base)?;
    let mut h = StableHasher::new();
    (STORE_FORMAT, env!("CARGO_PKG_VERSION"), "function").hash(&mut h);
    p.0.hash(&mut h);
    let key = StageKey(h.finish128());
    let entry = seal(&key, &p.0);
    Some((key, entry))
}

/// The function in an entry made by [`encode_function`] under `key`, its spans placed
/// relative to `base`; any damage is an error.
pub(crate) fn decode_function(entry: &[u8], key: &StageKey, base: u32) -> Result<Function, &'static str> {
    let mut p = Reader(unseal(entry, key)?);
    let func = read_function(&mut p, base)?;
    if !p.0.is_empty() {
        return Err("trailing bytes in the payload");
    }
    Ok(func)
}
