//! The shared remote tier of the stage cache: a Redis server (`passel run --cache
//! redis://host:port/db`), with a local directory in front of it ([`Tiered`]).
//!
//! Why the `redis` crate and not Apache OpenDAL: the remote tier needs exactly GET, SET and DEL
//! of byte strings with bounded connect, read and write timeouts on a synchronous CLI. The
//! `redis` crate's synchronous API gives that with no async runtime (default features off),
//! and its URLs carry the database number, credentials (`redis://user:pass@host/db`) and TLS
//! (`rediss://`, when built with a TLS feature). OpenDAL serves many back ends through one
//! interface, but its operators are async (its blocking layer runs a tokio runtime underneath)
//! and it brings a much larger dependency tree for back ends the project does not use yet; an
//! S3 or GCS tier can implement the same [`StageStore`] (get, get_many, put, rejected) later.
//!
//! Failure model: any error (connection refused, a timeout, a server that went away, a reply
//! of the wrong kind) makes the tier *down* for the rest of the process: one warning, and from
//! then on every `get` is a miss and every `put` is dropped without touching the network, so a
//! dead or slow server costs at most one timeout per connection attempt, never a hang and
//! never a wrong result (entries are checked by the engine before use, like any other).

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use passel_engine::{StageKey, StageStore, STORE_FORMAT};

use super::{CacheError, DiskStore};

/// How long connecting to the server may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// How long one read or write on a connection may take.
pub const IO_TIMEOUT: Duration = Duration::from_secs(2);

/// A Redis server as a [`StageStore`]. Entries live under `passel:vN:<key hex>`; the size cap
/// is the server's (`maxmemory` with an LRU `maxmemory-policy`).
pub struct RedisStore {
    client: ::redis::Client,
    /// What the warnings call it (the URL without credentials).
    label: String,
    /// Idle connections; a worker thread takes one (or opens one) per command.
    idle: Mutex<Vec<::redis::Connection>>,
    down: AtomicBool,
    hits: AtomicUsize,
    misses: AtomicUsize,
}

impl RedisStore {
    /// The server at `url` (`redis://[user:pass@]host[:port][/db]`). Nothing is connected
    /// until the first command; a malformed URL is an error.
    pub fn open(url: &str) -> Result<RedisStore, CacheError> {
        let client =
            ::redis::Client::open(url).map_err(|source| CacheError::InvalidUrl { url: redact(url), source })?;
        Ok(RedisStore {
            client,
            label: redact(url),
            idle: Mutex::new(Vec::new()),
            down: AtomicBool::new(false),
            hits: AtomicUsize::new(0),
            misses: AtomicUsize::new(0),
        })
    }

    /// The URL without credentials.
    pub fn label(&self) -> &str {
        &self.label
    }

    /// Whether a failure made the tier give up for this process.
    pub fn is_down(&self) -> bool {
        self.down.load(Ordering::Relaxed)
    }

    /// (hits, misses) since the store was made.
    pub fn counts(&self) -> (usize, usize) {
        (self.hits.load(Ordering::Relaxed), self.misses.load(Ordering::Relaxed))
    }

    fn key_name(key: &StageKey) -> String {
        format!("passel:v{STORE_FORMAT}:{}", key.to_hex())
    }

    /// Runs `cmd` on a pooled connection; any failure marks the tier down (with one warning).
    fn query<T: ::redis::FromRedisValue>(&self, cmd: &::redis::Cmd) -> Option<T> {
        if self.is_down() {
            return None;
        }
        let conn = self.idle.lock().ok().and_then(|mut idle| idle.pop());
        let mut conn = match conn {
            Some(conn) => conn,
            None => match self.connect() {
                Ok(conn) => conn,
                Err(e) => {
                    self.fail(&e.to_string());
                    return None;
                }
            },
        };
        match cmd.query::<T>(&mut conn) {
            Ok(v) => {
                if let Ok(mut idle) = self.idle.lock() {
                    idle.push(conn);
                }
                Some(v)
            }
            Err(e) => {
                self.fail(&e.to_string());
                None
            }
        }
    }

    fn connect(&self) -> ::redis::RedisResult<::redis::Connection> {
        let conn = self.client.get_connection_with_timeout(CONNECT_TIMEOUT)?;
        conn.set_read_timeout(Some(IO_TIMEOUT))?;
        conn.set_write_timeout(Some(IO_TIMEOUT))?;
        Ok(conn)
    }

    fn fail(&self, why: &str) {
        if !self.down.swap(true, Ordering::Relaxed) {
            eprintln!(
                "warning: cache {}: {why}; going on without the remote cache (recomputing what it would give)",
                self.label
            );
            if let Ok(mut idle) = self.idle.lock() {
                idle.clear();
            }
        }
    }
}

impl StageStore for RedisStore {
    fn get(&self, key: &StageKey) -> Option<Vec<u8>> {
        let entry: Option<Vec<u8>> = self.query(::redis::cmd("GET").arg(Self::key_name(key))).flatten();
        match &entry {
            Some(_) => self.hits.fetch_add(1, Ordering::Relaxed),
            None => self.misses.fetch_add(1, Ordering::Relaxed),
        };
        entry
    }

    /// One `MGET` for the whole batch.
    fn get_many(&self, keys: &[StageKey]) -> Vec<Option<Vec<u8>>> {
        if keys.is_empty() {
            return Vec::new();
        }
        let mut cmd = ::redis::cmd("MGET");
        for key in keys {
            cmd.arg(Self::key_name(key));
        }
        let found: Vec<Option<Vec<u8>>> = match self.query::<Vec<Option<Vec<u8>>>>(&cmd) {
            Some(found) if found.len() == keys.len() => found,
            Some(_) => {
                self.fail("MGET answered with the wrong number of values");
                vec![None; keys.len()]
            }
            None => vec![None; keys.len()],
        };
        let hits = found.iter().filter(|e| e.is_some()).count();
        self.hits.fetch_add(hits, Ordering::Relaxed);
        self.misses.fetch_add(keys.len() - hits, Ordering::Relaxed);
        found
    }

    fn put(&self, key: &StageKey, entry: &[u8]) {
        // SET replaces the value atomically: a reader sees a whole old entry or a whole new one.
        let _: Option<()> = self.query(::redis::cmd("SET").arg(Self::key_name(key)).arg(entry));
    }

    fn rejected(&self, key: &StageKey, reason: &str) {
        eprintln!("warning: cache {}: entry {key} ignored: {reason}; recomputing", self.label);
        let _: Option<i64> = self.query(::redis::cmd("DEL").arg(Self::key_name(key)));
    }
}

/// `url` with any password replaced by `***`.
fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => format!("{}://***@{}", &url[..scheme], &url[at + 1..]),
        _ => url.to_string(),
    }
}

/// A local directory in front of a remote store: a `get` asks the directory, then the remote
/// (keeping what it gives locally); a `put` goes to both.
pub struct Tiered {
    /// The local tier.
    pub near: Arc<DiskStore>,
    /// The remote tier.
    pub far: Arc<RedisStore>,
}

impl Tiered {
    /// The directory `dir` in front of `far`.
    pub fn new(dir: &Path, far: Arc<RedisStore>) -> Tiered {
        Tiered { near: Arc::new(DiskStore::new(dir)), far }
    }
}

impl StageStore for Tiered {
    fn get(&self, key: &StageKey) -> Option<Vec<u8>> {
        if let Some(entry) = self.near.get(key) {
            return Some(entry);
        }
        let entry = self.far.get(key)?;
        self.near.put(key, &entry);
        Some(entry)
    }

    /// The directory's entries, then one request to the remote for the rest.
    fn get_many(&self, keys: &[StageKey]) -> Vec<Option<Vec<u8>>> {
        let mut found = self.near.get_many(keys);
        let missing: Vec<usize> = (0..keys.len()).filter(|&i| found[i].is_none()).collect();
        if missing.is_empty() {
            return found;
        }
        let asked: Vec<StageKey> = missing.iter().map(|&i| keys[i]).collect();
        for (i, entry) in missing.into_iter().zip(self.far.get_many(&asked)) {
            if let Some(entry) = entry {
                self.near.put(&keys[i], &entry);
                found[i] = Some(entry);
            }
        }
        found
    }

    fn put(&self, key: &StageKey, entry: &[u8]) {
        self.near.put(key, entry);
        self.far.put(key, entry);
    }

    fn rejected(&self, key: &StageKey, reason: &str) {
        self.near.rejected(key, reason);
        self.far.rejected(key, reason);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_do_not_reach_warnings() {
        assert_eq!(redact("redis://user:secret@example.org:6379/2"), "redis://***@example.org:6379/2");
        assert_eq!(redact("redis://127.0.0.1:6379/0"), "redis://127.0.0.1:6379/0");
    }

    #[test]
    fn a_server_that_is_not_there_is_a_miss_within_the_timeout() {
        // A port nothing listens on (bound, then closed).
        let port = std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port();
        let store = RedisStore::open(&format!("redis://127.0.0.1:{port}/0")).expect("valid URL");
        let start = std::time::Instant::now();
        assert!(store.get(&StageKey([1; 16])).is_none());
        store.put(&StageKey([1; 16]), b"entry");
        assert!(store.get(&StageKey([1; 16])).is_none());
        assert!(store.is_down());
        assert!(start.elapsed() < CONNECT_TIMEOUT * 2, "took {:?}", start.elapsed());
    }
}
