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

use super::codec::{read_function, read_prim, read_span, write_function, write_prim, write_span, Reader, Writer};
use super::db::{callees, FnVal, Seen, StageOut};
use super::same::span_base;
use crate::ir::{ExprKind, Function, Module, NodeId};
use crate::tir::{verify_prim_func, PrimFunc};
use crate::transform::{Diagnostic, Severity};

/// The version of the entry format and of the key derivation; bumping it starts a new key
/// space.
pub const STORE_FORMAT: u32 = 5;

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
    /// and each callee's signature (a PrimFunc's: its graph-level type).
    pub(crate) fn key(&self, name: &str, input: &Arc<Function>, view: &Module) -> StageKey {
        let mut h = StableHasher::new();
        self.fingerprint.hash(&mut h);
        name.hash(&mut h);
        self.contents.of(input).hash(&mut h);
        for callee in callees(name, input) {
            callee.hash(&mut h);
            match Seen::of(view, callee) {
                Seen::Function(f) => {
                    1u8.hash(&mut h);
                    hash_signature(&f, &mut h);
                }
                Seen::Prim(ty) => {
                    2u8.hash(&mut h);
                    ty.hash(&mut h);
                }
                Seen::Absent => 0u8.hash(&mut h),
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

/// One PrimFunc's result of a PrimFunc stage: its output and the diagnostics of each pass.
pub(crate) type PrimOut = (Arc<PrimFunc>, Arc<Vec<Vec<Diagnostic>>>);

impl Persist {
    /// The identity of a PrimFunc stage whose passes have the registered names `passes`,
    /// under the settings `settings`: a key space apart from every function stage's.
    pub(crate) fn for_prims(cfg: &StoreConfig, settings: &str, passes: &[String]) -> Persist {
        let names: Vec<(String, bool)> = passes.iter().map(|p| (format!("prim:{p}"), false)).collect();
        Persist::new(cfg, settings, &names)
    }

    /// The key of this PrimFunc stage's result for the PrimFunc `name`: the stage and the
    /// PrimFunc's every table (its exact encoding, hashed). A PrimFunc pass reads nothing but
    /// its PrimFunc and the stage's context (`prims.rs`), so nothing else enters it.
    pub(crate) fn prim_key(&self, name: &str, func: &PrimFunc) -> StageKey {
        let mut w = Writer(Vec::new());
        write_prim(&mut w, func);
        let mut h = StableHasher::new();
        (self.fingerprint, "prim", name).hash(&mut h);
        w.0.hash(&mut h);
        StageKey(h.finish128())
    }

    /// The result in `entry` (the store's entry under `key`) for the PrimFunc `name` whose
    /// input is `input`, when it passes every check; a failing entry is reported to the store.
    pub(crate) fn open_prim(&self, entry: &[u8], key: &StageKey, name: &str, input: &Arc<PrimFunc>) -> Option<PrimOut> {
        match decode_prim(entry, key, name, input) {
            Ok(out) => Some(out),
            Err(reason) => {
                self.store.rejected(key, reason);
                None
            }
        }
    }

    /// Stores `out`, the stage's result for the PrimFunc `name` whose input is `input`, under
    /// `key`: only an output the tir verifier accepts (what a read checks), so that a stored
    /// entry is never refused for what it holds.
    pub(crate) fn save_prim(&self, key: &StageKey, name: &str, input: &Arc<PrimFunc>, out: &PrimOut) {
        if !Arc::ptr_eq(&out.0, input) && !verify_prim_func(name, &out.0).is_empty() {
            return;
        }
        let mut p = Writer(Vec::new());
        if Arc::ptr_eq(&out.0, input) {
            p.u8(SAME_AS_INPUT);
        } else {
            p.u8(ARENA);
            write_prim(&mut p, &out.0);
        }
        write_diags(&mut p, &out.1, 0);
        self.store.put(key, &seal(key, &p.0));
    }
}

/// The PrimFunc stage result in `entry` for `input` (the PrimFunc `name`) under `key`, or why
/// it is refused.
fn decode_prim(entry: &[u8], key: &StageKey, name: &str, input: &Arc<PrimFunc>) -> Result<PrimOut, &'static str> {
    let mut p = Reader(unseal(entry, key)?);
    let func = match p.u8()? {
        SAME_AS_INPUT => input.clone(),
        ARENA => Arc::new(read_prim(&mut p, name)?),
        _ => return Err("bad output tag"),
    };
    let diags = read_diags(&mut p, 0)?;
    if !p.0.is_empty() {
        return Err("trailing bytes in the payload");
    }
    Ok((func, Arc::new(diags)))
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
    write_diags(&mut p, &out.diags, base);
    Some(seal(key, &p.0))
}

/// Writes the diagnostics of each pass of a stage, spans relative to `base`.
fn write_diags(p: &mut Writer, per_pass: &[Vec<Diagnostic>], base: u32) {
    p.u32(per_pass.len() as u32);
    for diags in per_pass {
        p.u32(diags.len() as u32);
        for d in diags {
            p.u8(match d.severity {
                Severity::Warning => 0,
                Severity::Error => 1,
            });
            p.bytes(d.pass.as_bytes());
            p.opt_str(d.function.as_deref());
            write_span(p, d.span, base);
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
}

/// Reads what [`write_diags`] wrote.
fn read_diags(p: &mut Reader<'_>, base: u32) -> Result<Vec<Vec<Diagnostic>>, &'static str> {
    let n_passes = p.count(4)?;
    let mut diags = Vec::with_capacity(n_passes);
    for _ in 0..n_passes {
        let n = p.count(4)?;
        let mut list = Vec::with_capacity(n);
        for _ in 0..n {
            let severity = match p.u8()? {
                0 => Severity::Warning,
                1 => Severity::Error,
                _ => return Err("bad severity"),
            };
            let pass = p.str()?.to_string();
            let function = p.opt_str()?.map(str::to_string);
            let span = read_span(p, base)?;
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
    Ok(diags)
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
    let diags = read_diags(&mut p, base)?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::parse_module;

    /// A PrimFunc as the lowering pipeline prints one (a reduction with `decl`, `let` and
    /// nested loops), parsed: its statements carry spans.
    const MEAN: &str = "prim @mean(%A: Buffer[(1, 8, 8, 16), f32], %out: Buffer[(1, 8, 8, 1), f32]) {
  decl %A_1: Buffer[(1024,), f32] = %A;
  decl %out_1: Buffer[(64,), f32] = %out;
  for %i1 in serial(0i32, 8i32) {
    for %i2 in serial(0i32, 8i32) {
      %out_1[add(mul(%i1, 8i32), %i2)] = 0.0f;
      for %r4 in serial(0i32, 16i32) {
        let %cse_v1 = add(mul(%i1, 8i32), %i2);
        %out_1[%cse_v1] = add(%out_1[%cse_v1], %A_1[add(add(mul(%i1, 128i32), mul(%i2, 16i32)), %r4)]);
      }
    }
  }
}

prim @scale(%A: Buffer[(64,), f32]) {
  for %i in serial(0i32, 64i32) {
    %A[%i] = mul(%A[%i], 0.0625f);
  }
}
";

    fn prims() -> (Arc<PrimFunc>, Arc<PrimFunc>) {
        let module = parse_module(MEAN).expect("PrimFuncs parse");
        (module.get_prim("mean").expect("@mean").clone(), module.get_prim("scale").expect("@scale").clone())
    }

    fn persist(store: &Arc<MemoryStore>) -> Persist {
        Persist::for_prims(&StoreConfig::new(store.clone(), "test-build".into()), "settings", &["tir.Test".into()])
    }

    #[test]
    fn a_prim_func_result_round_trips_exactly_through_an_entry() {
        let store = Arc::new(MemoryStore::new());
        let persist = persist(&store);
        let (mean, scale) = prims();
        let diags = vec![
            vec![Diagnostic::warning("tir.Test", "note")
                .in_function("mean")
                .at_span(crate::ir::Span { start: 3, end: 9 })],
            Vec::new(),
        ];
        let out: PrimOut = (scale.clone(), Arc::new(diags));
        let key = persist.prim_key("mean", &mean);
        persist.save_prim(&key, "mean", &mean, &out);
        let entry = store.get(&key).expect("stored");
        let (func, d) = persist.open_prim(&entry, &key, "mean", &mean).expect("entry opens");
        // Every table, spans included, as computed.
        assert!(*func == *scale);
        assert_eq!(*d, *out.1);
        // An output equal to its input is stored as such and read back as the input itself.
        let same: PrimOut = (mean.clone(), Arc::new(Vec::new()));
        let key2 = persist.prim_key("other", &mean);
        persist.save_prim(&key2, "other", &mean, &same);
        let entry2 = store.get(&key2).expect("stored");
        assert!(Arc::ptr_eq(&persist.open_prim(&entry2, &key2, "other", &mean).expect("opens").0, &mean));
        // The key covers the PrimFunc's content, its name and the stage.
        assert_ne!(key, persist.prim_key("mean", &scale));
        assert_ne!(key, key2);
        let other_stage = Persist::for_prims(
            &StoreConfig::new(store.clone(), "test-build".into()),
            "settings",
            &["tir.Other".into()],
        );
        assert_ne!(key, other_stage.prim_key("mean", &mean));
    }

    #[test]
    fn a_damaged_or_foreign_prim_func_entry_is_refused_not_used() {
        let store = Arc::new(MemoryStore::new());
        let persist = persist(&store);
        let (mean, scale) = prims();
        let key = persist.prim_key("mean", &mean);
        persist.save_prim(&key, "mean", &mean, &(scale.clone(), Arc::new(vec![Vec::new()])));
        let entry = store.get(&key).expect("stored");
        // Every truncation and every flipped byte is refused (the header, the checksum or the
        // decoder); none panics.
        for cut in 0..entry.len() {
            assert!(decode_prim(&entry[..cut], &key, "mean", &mean).is_err(), "truncated at {cut}");
        }
        for at in 0..entry.len() {
            let mut bad = entry.clone();
            bad[at] ^= 0x41;
            assert!(decode_prim(&bad, &key, "mean", &mean).is_err(), "byte {at} flipped");
        }
        // An entry for another key.
        let other = persist.prim_key("scale", &scale);
        assert_eq!(decode_prim(&entry, &other, "scale", &scale).err(), Some("entry is for another key"));
        // A well-sealed payload whose tables do not verify (an id past its table).
        let mut p = Writer(Vec::new());
        p.u8(ARENA);
        write_prim(&mut p, &scale);
        let body_at = p.0.len() - 4 - 4 - 8 * scale.stmt_spans().len() - 4;
        p.0[body_at..body_at + 4].copy_from_slice(&u32::MAX.to_le_bytes());
        write_diags(&mut p, &[], 0);
        let forged = seal(&key, &p.0);
        assert!(decode_prim(&forged, &key, "mean", &mean).is_err());
        // `open_prim` reports a refused entry to the store, which drops it.
        assert!(persist.open_prim(&entry[..entry.len() - 1], &key, "mean", &mean).is_none());
        assert!(store.get(&key).is_none());
    }
}
