//! The persistent stage cache (`passel run --cache DIR`, `PASSEL_CACHE_DIR`, the Python
//! package's `Session(cache=…)`): the engine's [`StageStore`] over a directory of entry files
//! ([`DiskStore`]), a Redis tier behind a directory (`remote.rs`), parsing through the store
//! (`source.rs`), run entries and run records (`record.rs`), and [`Cache`], the opened store
//! with its build id. The CLI's options and commands around it (`--cache`, `passel cache`) are
//! passel-harness's; this crate has no command line and its errors are typed ([`CacheError`]).
//!
//! Layout: `DIR/v1/entries/ab/cdef…` holds the entry of key `abcdef…` (32 hex digits), its
//! modification time the time of its last use; `DIR/v1/tmp/` the writes in progress;
//! `DIR/builds/` the memoised build ids ([`build_id`]). A write goes to a temporary file that is
//! renamed over the entry, so a reader sees a whole old entry, a whole new one or none, and any
//! number of processes may read and write one directory at once without a lock (two writers of
//! one key write the same bytes). Entries are the engine's own, checksummed, versioned and
//! keyed (`passel_engine::session`'s store module), so this layer needs no hashing of its own.
//!
//! Why no crate for it: `cacache` 13.1 (a content-addressed directory cache) does not compile
//! without one of its async runtimes (`default-features = false` leaves `content::write::State`
//! undefined), and with one it brings tokio or async-std into a synchronous CLI for what is a
//! rename; `redb` 4 (an embedded database) holds an exclusive lock on its file while open, so a
//! second `passel` process could not use the cache at the same time. `tempfile` gives the
//! atomic write.
//!
//! Besides the engine's entries (function-stage results, parsed functions) the directory holds
//! *run entries* ([`RUN_MAGIC`]): the printed output of a clean run of one whole text under one
//! set of pipeline options, which answers a `passel run` that changed nothing without parsing
//! or running anything (passel-harness's `cmd/run.rs`).
//!
//! The size cap is least-recently-used: a hit on an entry last used more than
//! [`TOUCH_AFTER_MS`] ago sets its modification time to now, and [`DiskStore::gc`] removes the
//! entries used longest ago until the cache fits. Anything that goes wrong on disk is a miss or
//! a dropped write with a warning on stderr, never an error of the run.
//!
//! IO: the directory's files, the Redis server, the file whose bytes make the build id, and
//! three environment variables, read here so that the CLI and the Python package honour them
//! alike: `PASSEL_CACHE_DIR`, `XDG_CACHE_HOME` and `HOME` ([`dir_from_env`],
//! [`default_local_dir`]).

use std::hash::{DefaultHasher, Hasher};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use std::sync::Arc;

use passel_engine::ir::Module;
use passel_engine::transform::{Diagnostic, PassContext, PassError, Sequential};
use passel_engine::{source_key, SessionError, StageKey, StageStore};

use passel_passes::standard_session;

mod record;
mod remote;
mod source;

pub use record::{run_from_record, Lineage, RecordHit, RECORD_MAGIC};
pub use remote::{RedisStore, Tiered, CONNECT_TIMEOUT, IO_TIMEOUT};
pub use source::{function_texts, parse_cached, parse_piece, SourceCounts};

/// Why a cache cannot be opened, cleared or run through.
#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    /// A `redis://` URL the client does not accept (credentials redacted).
    #[error("invalid cache URL `{url}`: {source}")]
    InvalidUrl {
        /// The URL, its password replaced by `***`.
        url: String,
        /// The client's reason.
        source: ::redis::RedisError,
    },
    /// An empty cache location (`--cache ''`, `Session(cache="")`): it would put the cache in
    /// whatever the current directory is.
    #[error("empty cache location: name a directory or a redis:// URL")]
    EmptyLocation,
    /// Removing the entries failed.
    #[error("cannot clear cache {}: {source}", dir.display())]
    Clear {
        /// The cache directory.
        dir: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The session behind a cached run could not be made or run (a pass failed to plan, the
    /// context has instruments).
    #[error(transparent)]
    Session(#[from] SessionError),
}

/// The environment variable naming the cache directory when `--cache` is not given.
pub const CACHE_DIR_ENV: &str = "PASSEL_CACHE_DIR";

/// The default size cap: 1 GiB.
pub const DEFAULT_MAX_SIZE: u64 = 1 << 30;

/// A hit on an entry whose last use is older than this (milliseconds) records the new use.
pub const TOUCH_AFTER_MS: u128 = 60_000;

/// A stage cache directory.
pub struct DiskStore {
    dir: PathBuf,
    hits: AtomicUsize,
    misses: AtomicUsize,
    rejected: AtomicUsize,
    written: AtomicU64,
    /// How much of `written` the usage ledger was told of.
    ledgered: AtomicU64,
    /// Whether a warning about an unusable directory was printed already (once per run).
    warned: AtomicBool,
}

/// What `passel cache stats` reports.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Entries in the index.
    pub entries: usize,
    /// Their total size in bytes.
    pub bytes: u64,
}

impl DiskStore {
    /// The cache in `dir` (created on first write).
    pub fn new(dir: impl Into<PathBuf>) -> DiskStore {
        DiskStore {
            dir: dir.into(),
            hits: AtomicUsize::new(0),
            misses: AtomicUsize::new(0),
            rejected: AtomicUsize::new(0),
            written: AtomicU64::new(0),
            ledgered: AtomicU64::new(0),
            warned: AtomicBool::new(false),
        }
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// (hits, misses, rejected entries, bytes written) since the store was made.
    pub fn counts(&self) -> (usize, usize, usize, u64) {
        (
            self.hits.load(Ordering::Relaxed),
            self.misses.load(Ordering::Relaxed),
            self.rejected.load(Ordering::Relaxed),
            self.written.load(Ordering::Relaxed),
        )
    }

    fn warn(&self, what: &str) {
        if !self.warned.swap(true, Ordering::Relaxed) {
            eprintln!("warning: cache {}: {what}; recomputing", self.dir.display());
        }
    }

    fn entries_dir(&self) -> PathBuf {
        self.dir.join("v1").join("entries")
    }

    fn path_of(&self, key: &StageKey) -> PathBuf {
        let hex = key.to_hex();
        self.entries_dir().join(&hex[..2]).join(&hex[2..])
    }

    /// The entries (path, size, last use), most recently used first.
    fn entries(&self) -> Vec<(PathBuf, u64, SystemTime)> {
        let mut out = Vec::new();
        for shard in std::fs::read_dir(self.entries_dir()).into_iter().flatten().flatten() {
            for entry in std::fs::read_dir(shard.path()).into_iter().flatten().flatten() {
                if let Ok(meta) = entry.metadata() {
                    if meta.is_file() {
                        out.push((entry.path(), meta.len(), meta.modified().unwrap_or(UNIX_EPOCH)));
                    }
                }
            }
        }
        out.sort_by(|a, b| b.2.cmp(&a.2).then_with(|| a.0.cmp(&b.0)));
        out
    }

    /// How many entries the cache holds and their size.
    pub fn stats(&self) -> CacheStats {
        let entries = self.entries();
        CacheStats { entries: entries.len(), bytes: entries.iter().map(|e| e.1).sum() }
    }

    /// Removes every entry.
    pub fn clear(&self) -> Result<(), CacheError> {
        match std::fs::remove_dir_all(self.dir.join("v1")) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(source) => Err(CacheError::Clear { dir: self.dir.clone(), source }),
        }
    }

    /// The usage ledger: lines of byte counts whose sum bounds the directory's size from
    /// above (each process appends what it wrote; [`DiskStore::gc`] rewrites it with the
    /// size it found), so that a run need not list every entry to know the cache fits.
    fn ledger(&self) -> PathBuf {
        self.dir.join("v1").join("usage")
    }

    /// Adds `written` bytes to the ledger; whether the ledger says the cache still fits in
    /// `max_size` (false without a ledger: a scan must tell). Overwriting an entry counts its
    /// bytes again, so the bound only errs high; an append that races a `gc` rewriting the
    /// ledger may be lost, and the next scan corrects it.
    fn fits_after(&self, written: u64, max_size: u64) -> bool {
        use std::io::Write;
        let path = self.ledger();
        let Ok(text) = std::fs::read_to_string(&path) else { return false };
        let Some(total) = text.lines().map(|l| l.trim().parse::<u64>().ok()).sum::<Option<u64>>() else {
            return false;
        };
        let appended = std::fs::File::options()
            .append(true)
            .open(&path)
            .and_then(|mut f| f.write_all(format!("{written}\n").as_bytes()));
        appended.is_ok() && total.saturating_add(written) <= max_size
    }

    /// Removes the least recently used entries until the cache holds at most `max_size`
    /// bytes (and writes abandoned over an hour ago); returns how many entries it removed.
    /// Another process may be using the cache meanwhile: an entry it reads as this removes it
    /// is a miss there.
    pub fn gc(&self, max_size: u64) -> usize {
        let hour_ago = SystemTime::now() - std::time::Duration::from_secs(3600);
        for tmp in std::fs::read_dir(self.dir.join("v1").join("tmp")).into_iter().flatten().flatten() {
            if tmp.metadata().and_then(|m| m.modified()).is_ok_and(|t| t < hour_ago) {
                let _ = std::fs::remove_file(tmp.path());
            }
        }
        let mut total = 0u64;
        let mut kept = 0u64;
        let mut removed = 0;
        for (path, size, _) in self.entries() {
            total += size;
            if total > max_size && std::fs::remove_file(&path).is_ok() {
                removed += 1;
            } else {
                kept += size;
            }
        }
        // The ledger restarts from the size found (atomically: a reader sees the old or new).
        let tmp_dir = self.dir.join("v1").join("tmp");
        if let Ok(mut tmp) = tempfile::NamedTempFile::new_in(&tmp_dir) {
            if std::io::Write::write_all(&mut tmp, format!("{kept}\n").as_bytes()).is_ok() {
                let _ = tmp.persist(self.ledger());
            }
        }
        removed
    }
}

impl StageStore for DiskStore {
    fn get(&self, key: &StageKey) -> Option<Vec<u8>> {
        let path = self.path_of(key);
        let file = match std::fs::File::open(&path) {
            Ok(file) => file,
            Err(e) => {
                self.misses.fetch_add(1, Ordering::Relaxed);
                if e.kind() != std::io::ErrorKind::NotFound {
                    self.warn(&format!("cannot read {} ({e})", path.display()));
                }
                return None;
            }
        };
        // One fstat gives the size (one allocation, one read) and the last use.
        let meta = file.metadata().ok();
        let mut entry = Vec::with_capacity(meta.as_ref().map_or(0, |m| m.len() as usize));
        if let Err(e) = (&file).read_to_end(&mut entry) {
            self.misses.fetch_add(1, Ordering::Relaxed);
            self.warn(&format!("cannot read {} ({e})", path.display()));
            return None;
        }
        self.hits.fetch_add(1, Ordering::Relaxed);
        let last_use = meta.and_then(|m| m.modified().ok()).unwrap_or(UNIX_EPOCH);
        let now = SystemTime::now();
        if now.duration_since(last_use).is_ok_and(|d| d.as_millis() > TOUCH_AFTER_MS) {
            // Records the use for the LRU order; failing only makes eviction less exact.
            if let Ok(f) = std::fs::File::options().append(true).open(&path) {
                let _ = f.set_modified(now);
            }
        }
        Some(entry)
    }

    fn put(&self, key: &StageKey, entry: &[u8]) {
        let path = self.path_of(key);
        let tmp_dir = self.dir.join("v1").join("tmp");
        // The directories usually exist: they are made only when a create or a rename says
        // they do not (two syscalls fewer per entry written).
        let write = || -> std::io::Result<()> {
            let mut tmp = match tempfile::NamedTempFile::new_in(&tmp_dir) {
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    std::fs::create_dir_all(&tmp_dir)?;
                    tempfile::NamedTempFile::new_in(&tmp_dir)?
                }
                made => made?,
            };
            std::io::Write::write_all(&mut tmp, entry)?;
            match tmp.persist(&path) {
                Err(e) if e.error.kind() == std::io::ErrorKind::NotFound => {
                    if let Some(parent) = path.parent() {
                        std::fs::create_dir_all(parent)?;
                    }
                    e.file.persist(&path).map_err(|e| e.error)?;
                }
                done => {
                    done.map_err(|e| e.error)?;
                }
            }
            Ok(())
        };
        match write() {
            Ok(()) => {
                self.written.fetch_add(entry.len() as u64, Ordering::Relaxed);
            }
            Err(e) => self.warn(&format!("cannot write an entry ({e})")),
        }
    }

    fn rejected(&self, key: &StageKey, reason: &str) {
        self.rejected.fetch_add(1, Ordering::Relaxed);
        eprintln!("warning: cache {}: entry {key} ignored: {reason}; recomputing", self.dir.display());
        let _ = std::fs::remove_file(self.path_of(key));
    }
}

/// A name for the code of this executable (its passes included): [`build_id_of`] the
/// executable. Entries made by another build are never used.
pub fn build_id(dir: &Path) -> String {
    match std::env::current_exe() {
        Ok(exe) => build_id_of(&exe, dir),
        Err(_) => "unknown-build".to_string(),
    }
}

/// A name for the code in the file `code` (an executable, or the Python extension module): a
/// hash of its bytes, kept in `dir/builds/` under the file's size and modification time so it
/// is computed once per build.
pub fn build_id_of(exe: &Path, dir: &Path) -> String {
    let Ok(meta) = std::fs::metadata(exe) else { return "unknown-build".to_string() };
    let mtime = meta.modified().ok().and_then(|t| t.duration_since(UNIX_EPOCH).ok()).map_or(0, |d| d.as_nanos());
    let memo = dir.join("builds").join(format!("{}-{mtime}", meta.len()));
    if let Ok(id) = std::fs::read_to_string(&memo) {
        if id.len() == 16 && id.bytes().all(|b| b.is_ascii_hexdigit()) {
            return id;
        }
    }
    let Ok(mut file) = std::fs::File::open(exe) else { return "unknown-build".to_string() };
    let mut h = DefaultHasher::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        match file.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => h.write(&buf[..n]),
            Err(_) => return "unknown-build".to_string(),
        }
    }
    let id = format!("{:016x}", h.finish());
    if let Some(parent) = memo.parent() {
        if std::fs::create_dir_all(parent).is_ok() {
            // Written whole to a temporary file and renamed, so a reader never sees half of it.
            if let Ok(mut tmp) = tempfile::NamedTempFile::new_in(parent) {
                use std::io::Write;
                if tmp.write_all(id.as_bytes()).is_ok() {
                    let _ = tmp.persist(&memo);
                }
            }
        }
    }
    id
}

/// Where a run keeps its cache.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CacheLocation {
    /// A directory.
    Dir(PathBuf),
    /// A Redis server (`url`) with the directory `local` in front.
    Redis {
        /// `redis://…` or `rediss://…`.
        url: String,
        /// The local tier.
        local: PathBuf,
    },
}

impl CacheLocation {
    /// The cache `spec` names: a Redis server for a `redis://` or `rediss://` URL, with the
    /// directory `local` in front (default: [`default_local_dir`]); else the directory `spec`.
    /// An empty `spec` is an error, not the current directory.
    pub fn from_spec(spec: &str, local: Option<PathBuf>) -> Result<CacheLocation, CacheError> {
        if spec.is_empty() {
            Err(CacheError::EmptyLocation)
        } else if spec.starts_with("redis://") || spec.starts_with("rediss://") {
            Ok(CacheLocation::Redis { url: spec.to_string(), local: local.unwrap_or_else(default_local_dir) })
        } else {
            Ok(CacheLocation::Dir(PathBuf::from(spec)))
        }
    }
}

/// The cache directory `PASSEL_CACHE_DIR` names, when it is set and not empty.
pub fn dir_from_env() -> Option<PathBuf> {
    std::env::var_os(CACHE_DIR_ENV).filter(|v| !v.is_empty()).map(PathBuf::from)
}

/// The local tier of a Redis cache when none is named: `PASSEL_CACHE_DIR`, else
/// `$XDG_CACHE_HOME/passel`, else `~/.cache/passel`, else `.passel-cache`.
pub fn default_local_dir() -> PathBuf {
    if let Some(dir) = dir_from_env() {
        return dir;
    }
    if let Some(dir) = std::env::var_os("XDG_CACHE_HOME").filter(|v| !v.is_empty()) {
        return PathBuf::from(dir).join("passel");
    }
    match std::env::var_os("HOME").filter(|v| !v.is_empty()) {
        Some(home) => PathBuf::from(home).join(".cache").join("passel"),
        None => PathBuf::from(".passel-cache"),
    }
}

/// An opened cache: the store a session uses, its tiers and the build id keying it.
pub struct Cache {
    /// What the session reads and writes.
    pub store: Arc<dyn StageStore>,
    /// The local directory (the whole cache, or the tier in front of the remote one).
    pub disk: Arc<DiskStore>,
    /// The remote tier, if any.
    pub remote: Option<Arc<RedisStore>>,
    /// The build id.
    pub build: String,
    /// The size cap of the directory.
    pub max_size: u64,
    /// What the notes call it.
    pub label: String,
}

impl Cache {
    /// Opens the cache at `location` for the code of this executable (nothing is read or
    /// connected yet).
    pub fn open(location: &CacheLocation, max_size: u64) -> Result<Cache, CacheError> {
        Cache::open_with(location, max_size, build_id)
    }

    /// Opens the cache at `location` for the code in the file `code` (the Python extension
    /// module: there the executable is the interpreter).
    pub fn open_for_code(location: &CacheLocation, max_size: u64, code: &Path) -> Result<Cache, CacheError> {
        Cache::open_with(location, max_size, |dir| build_id_of(code, dir))
    }

    fn open_with(
        location: &CacheLocation,
        max_size: u64,
        build: impl Fn(&Path) -> String,
    ) -> Result<Cache, CacheError> {
        match location {
            CacheLocation::Dir(dir) => {
                let disk = Arc::new(DiskStore::new(dir));
                Ok(Cache {
                    store: disk.clone(),
                    disk,
                    remote: None,
                    build: build(dir),
                    max_size,
                    label: dir.display().to_string(),
                })
            }
            CacheLocation::Redis { url, local } => {
                let far = Arc::new(RedisStore::open(url)?);
                let tiered = Arc::new(Tiered::new(local, far.clone()));
                Ok(Cache {
                    disk: tiered.near.clone(),
                    store: tiered,
                    label: format!("{} (local {})", far.label(), local.display()),
                    remote: Some(far),
                    build: build(local),
                    max_size,
                })
            }
        }
    }

    /// Parses `text` reading unchanged functions from the cache (see `source.rs`); `None`
    /// when the caller must parse it whole.
    pub fn parse(&self, text: &str, threads: usize) -> Option<(Module, SourceCounts)> {
        source::parse_cached(text, &*self.store, &self.build, threads)
    }

    /// The key of the run entry of `text` run under `settings` (the pipeline options as words).
    pub fn run_key(&self, settings: &str, text: &str) -> StageKey {
        // A source key under a build string no source key has: a separate key space.
        source_key(&format!("{}\0run\0{settings}", self.build), text)
    }

    /// The printed output of an earlier run whose key is `key`, when the cache has it and it
    /// checks (see [`RUN_MAGIC`]); a damaged entry is reported and dropped.
    pub fn get_run(&self, key: &StageKey) -> Option<String> {
        self.get_checked(key, open_run_entry)
    }

    /// The entry under `key` as `open` reads it, when the cache has one and it checks; a
    /// damaged entry is reported and dropped.
    fn get_checked<T>(
        &self,
        key: &StageKey,
        open: impl FnOnce(&[u8], &StageKey) -> Result<T, &'static str>,
    ) -> Option<T> {
        let entry = self.store.get(key)?;
        match open(&entry, key) {
            Ok(found) => Some(found),
            Err(reason) => {
                self.store.rejected(key, reason);
                None
            }
        }
    }

    /// Keeps `output`, the printed output of the run whose key is `key`.
    pub fn put_run(&self, key: &StageKey, output: &str) {
        let mut entry = Vec::with_capacity(output.len() + 36);
        entry.extend_from_slice(RUN_MAGIC);
        entry.extend_from_slice(&key.0);
        entry.extend_from_slice(&run_checksum(output.as_bytes()).to_le_bytes());
        entry.extend_from_slice(&(output.len() as u64).to_le_bytes());
        entry.extend_from_slice(output.as_bytes());
        self.store.put(key, &entry);
    }

    /// Trims the directory to its cap when this process wrote to it; returns the entries
    /// removed.
    pub fn trim(&self) -> usize {
        // Only what was written since the last call goes to the ledger.
        let written = self.disk.counts().3;
        let new = written.saturating_sub(self.disk.ledgered.swap(written, Ordering::Relaxed));
        if new > 0 && !self.disk.fits_after(new, self.max_size) {
            self.disk.gc(self.max_size)
        } else {
            0
        }
    }
}

/// The first bytes of a run entry: what `passel run --cache` printed for a whole module text
/// under given settings, kept only for runs that succeeded without a diagnostic. Layout: this
/// magic, the key (16 bytes), a checksum of the output (8), its length (8), the output. The
/// key is [`Cache::run_key`]: the build, the entry format and engine version, the pipeline
/// options and the whole text, so any change to the text or the options misses it.
pub const RUN_MAGIC: &[u8; 4] = b"PSLR";

fn run_checksum(bytes: &[u8]) -> u64 {
    let mut h = DefaultHasher::new();
    h.write(bytes);
    h.finish()
}

/// The output in the run entry `entry` for `key`, or why it is refused.
fn open_run_entry(entry: &[u8], key: &StageKey) -> Result<String, &'static str> {
    let header = entry.get(..36).ok_or("truncated run entry")?;
    if &header[..4] != RUN_MAGIC {
        return Err("not a run entry");
    }
    if header[4..20] != key.0 {
        return Err("run entry for another key");
    }
    let sum = u64::from_le_bytes(header[20..28].try_into().map_err(|_| "truncated run entry")?);
    let len = u64::from_le_bytes(header[28..36].try_into().map_err(|_| "truncated run entry")?);
    let body = &entry[36..];
    if body.len() as u64 != len {
        return Err("run entry of the wrong length");
    }
    if run_checksum(body) != sum {
        return Err("checksum mismatch");
    }
    String::from_utf8(body.to_vec()).map_err(|_| "run entry is not UTF-8")
}

/// What a cached run gives.
pub struct CachedRun {
    /// The pipeline's result.
    pub result: Result<Module, PassError>,
    /// Its diagnostics, in serial order.
    pub diagnostics: Vec<Diagnostic>,
    /// A line for stderr: what was recomputed and reused.
    pub note: String,
    /// Per function stage, its label and the functions it recomputed (`--cache-report`).
    pub recomputed: Vec<(String, Vec<Arc<str>>)>,
    /// The session that ran (a process about to exit may leave it unfreed).
    pub session: passel_engine::Session,
    /// The run's record for the next process (`record.rs`), when it can have one.
    pub record: Option<passel_engine::RunRecord>,
}

/// Runs `pipeline` on `module` under `ctx` through a session backed by `cache`; `parsed`
/// says how the module was read (when it went through the cache), `lineage` the pieces of its
/// text (when the run may leave a record of itself).
pub fn run_cached(
    pipeline: &Sequential,
    ctx: &PassContext,
    module: &Module,
    cache: &Cache,
    parsed: Option<SourceCounts>,
    lineage: Option<&Lineage<'_>>,
) -> Result<CachedRun, CacheError> {
    let mut session = standard_session(pipeline.clone(), ctx)?;
    // One run: salsa's memos would serve no later run, so the run goes through the one stage
    // loop without them (lean mode), which asks the store a stage's keys in batches.
    session.set_memory_mode(passel_engine::MemoryMode::Lean);
    session.set_store(Some((cache.store.clone(), cache.build.clone())))?;
    session.load(module);
    let (result, diagnostics, recomputed, per_stage, prims) = match session.run() {
        Ok(out) => {
            let per_stage = out.stats.recomputed_per_stage();
            // PrimFunc results: those computed and all there were, over the PrimFunc stages.
            let prims = out.stats.prim_stages().fold(None, |acc: Option<(usize, usize)>, s| {
                let (r, n) = acc.unwrap_or_default();
                Some((r + s.recomputed.len(), n + s.recomputed.len() + s.reused))
            });
            (Ok(out.module.clone()), out.diagnostics.clone(), out.stats.recomputed_functions(), per_stage, prims)
        }
        Err(SessionError::Pass(e)) => (Err(e), Vec::new(), Vec::new(), Vec::new(), None),
        Err(e) => return Err(e.into()),
    };
    // The record, when the module was read through the cache (its pieces are its functions).
    let record = match (lineage, parsed) {
        (Some(lineage), Some(_)) if result.is_ok() && diagnostics.is_empty() => {
            session.run_record(lineage.sources().to_vec())
        }
        _ => None,
    };
    let parsed = parsed.map(|c| (c.parsed, c.reused));
    let note = run_note(cache, &recomputed, module.len(), parsed, prims);
    Ok(CachedRun { result, diagnostics, note, recomputed: per_stage, session, record })
}

/// The line a run through `cache` prints on stderr: the functions recomputed (of `total`),
/// the PrimFunc results recomputed (of all, when the pipeline has PrimFunc stages), the
/// functions parsed and reused (when the text went through the cache), the store's counts.
/// Trims the directory to its cap.
fn run_note(
    cache: &Cache,
    recomputed: &[Arc<str>],
    total: usize,
    parsed: Option<(usize, usize)>,
    prims: Option<(usize, usize)>,
) -> String {
    let (hits, misses, rejected, written) = cache.disk.counts();
    // With a remote tier, a local miss that the server answered is a reuse, not a computation.
    let remote_hits = cache.remote.as_ref().map_or(0, |r| r.counts().0);
    let (hits, misses) = (hits + remote_hits, misses.saturating_sub(remote_hits));
    let evicted = cache.trim();
    let mut names: Vec<String> = recomputed.iter().take(8).map(|n| format!("@{n}")).collect();
    if recomputed.len() > 8 {
        names.push(format!("… {} more", recomputed.len() - 8));
    }
    let list = if names.is_empty() { String::new() } else { format!(" ({})", names.join(", ")) };
    let prims = match prims {
        Some((recomputed, all)) => format!("; {recomputed} of {all} PrimFunc results recomputed"),
        None => String::new(),
    };
    let parse = match parsed {
        Some((parsed, reused)) => format!("; {parsed} of {} functions parsed", parsed + reused),
        None => String::new(),
    };
    let remote = match &cache.remote {
        Some(r) if r.is_down() => "; remote cache unavailable".to_string(),
        Some(r) => format!("; remote {} hits, {} misses", r.counts().0, r.counts().1),
        None => String::new(),
    };
    format!(
        "cache {}: {} of {total} functions recomputed{list}{prims}{parse}; {hits} results reused, {misses} computed, {rejected} rejected, {written} bytes written, {evicted} evicted{remote}\n",
        cache.label,
        recomputed.len(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gc_keeps_the_most_recently_used_entries_under_the_cap() {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = DiskStore::new(dir.path());
        for i in 0..4u8 {
            let key = StageKey([i; 16]);
            store.put(&key, &vec![i; 1000]);
            // Distinct times, oldest first.
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert_eq!(store.stats(), CacheStats { entries: 4, bytes: 4000 });
        assert_eq!(store.gc(2500), 2);
        assert_eq!(store.stats(), CacheStats { entries: 2, bytes: 2000 });
        assert!(store.get(&StageKey([3; 16])).is_some());
        assert!(store.get(&StageKey([2; 16])).is_some());
        assert!(store.get(&StageKey([0; 16])).is_none());
        store.clear().expect("clear");
        assert_eq!(store.stats(), CacheStats::default());
    }

    #[test]
    fn a_rejected_entry_is_dropped() {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = DiskStore::new(dir.path());
        let key = StageKey([7; 16]);
        store.put(&key, b"entry bytes");
        // Damage every content file.
        for file in walk(&dir.path().join("v1")) {
            std::fs::write(&file, b"damaged").expect("overwrite content");
        }
        // The store hands out the bytes; the engine's checks reject them and the store drops
        // the entry.
        assert_eq!(store.get(&key).as_deref(), Some(&b"damaged"[..]));
        store.rejected(&key, "test");
        assert_eq!(store.counts().2, 1);
        assert!(store.get(&key).is_none());
    }

    fn walk(dir: &Path) -> Vec<PathBuf> {
        let mut out = Vec::new();
        let mut stack = vec![dir.to_path_buf()];
        while let Some(d) = stack.pop() {
            for entry in std::fs::read_dir(&d).into_iter().flatten().flatten() {
                let p = entry.path();
                if p.is_dir() {
                    stack.push(p);
                } else {
                    out.push(p);
                }
            }
        }
        out
    }
}
