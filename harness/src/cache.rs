//! The CLI around the persistent stage cache (passel-cache): the `--cache` options of `passel
//! run`, `passel watch` and `passel bench`, `passel cache stats | clear | gc`, and loading a
//! `.pir` file through the cache with the CLI's error reporting.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use passel_cache::{dir_from_env, Cache, CacheError, CacheLocation, DiskStore, SourceCounts, DEFAULT_MAX_SIZE};
use passel_engine::ir::{verify_module, Module};
use passel_engine::transform::PassContext;

use crate::console::Console;

/// Why the cache options do not name a usable cache.
#[derive(Debug, thiserror::Error)]
pub enum CacheOptionsError {
    /// `--cache` with a run the cache cannot serve.
    #[error("--cache cannot be combined with instruments (--timing, --print-ir-*, --dump-ir, --reproducer), --trace or --opt-bisect-limit")]
    Uncachable,
    /// `passel cache` with neither `--cache` nor `PASSEL_CACHE_DIR`.
    #[error("no cache directory: give --cache DIR or set {}", passel_cache::CACHE_DIR_ENV)]
    NoDirectory,
    /// A bad `--cache-max-size` or `--max-size`.
    #[error(transparent)]
    Size(#[from] SizeError),
    /// The cache cannot be opened or cleared.
    #[error(transparent)]
    Cache(#[from] CacheError),
}

/// A size option that is not a size ([`parse_size`]).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SizeError {
    /// Not digits with an optional unit.
    #[error("invalid size `{0}` (expected e.g. 512M or 2G)")]
    Invalid(String),
    /// More bytes than a `u64` holds.
    #[error("size `{0}` is too large")]
    TooLarge(String),
}

/// The cache options of `passel run`, `passel watch` and `passel bench`.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct CacheArgs {
    /// Keep function-stage results (and parsed functions) in DIR, or in the Redis server at
    /// redis://host:port/db with a local directory in front (--cache-local), and reuse them in
    /// later runs, in this process or any other (default: the PASSEL_CACHE_DIR environment
    /// variable). Output is byte-identical to a run without a cache. Not with instruments,
    /// --trace or --opt-bisect-limit.
    #[arg(long, value_name = "DIR|URL")]
    pub cache: Option<String>,
    /// The local directory in front of a Redis cache (default: PASSEL_CACHE_DIR, else
    /// $XDG_CACHE_HOME/passel or ~/.cache/passel).
    #[arg(long = "cache-local", value_name = "DIR")]
    pub cache_local: Option<PathBuf>,
    /// Size cap of the local cache directory; least recently used entries go first (default 1G).
    #[arg(long = "cache-max-size", value_name = "SIZE")]
    pub cache_max_size: Option<String>,
}

impl CacheArgs {
    /// The cache a run with `ctx` uses: `--cache`, else `PASSEL_CACHE_DIR`. A context the
    /// session cannot run (instruments, a tracer, opt-bisect: `uncachable`) is an error with
    /// `--cache` and runs without the cache with the environment variable.
    pub fn location_for(
        &self,
        ctx: &PassContext,
        uncachable: bool,
    ) -> Result<Option<CacheLocation>, CacheOptionsError> {
        let uncachable = uncachable || ctx.has_instruments() || ctx.tracer().is_some() || ctx.opt_bisect().is_some();
        if self.cache.is_some() && uncachable {
            return Err(CacheOptionsError::Uncachable);
        }
        Ok(self.location()?.filter(|_| !uncachable))
    }

    /// The cache named by `--cache` or the environment, whatever the context.
    pub fn location(&self) -> Result<Option<CacheLocation>, CacheOptionsError> {
        Ok(match &self.cache {
            Some(spec) => Some(CacheLocation::from_spec(spec, self.cache_local.clone())?),
            None => dir_from_env().map(CacheLocation::Dir),
        })
    }

    /// The size cap.
    pub fn max_size(&self) -> Result<u64, SizeError> {
        self.cache_max_size.as_deref().map_or(Ok(DEFAULT_MAX_SIZE), parse_size)
    }

    /// The cache `--cache` or `PASSEL_CACHE_DIR` names, opened for this executable; `None`
    /// when neither names one.
    pub fn open(&self) -> Result<Option<Cache>, CacheOptionsError> {
        self.open_at(self.location()?)
    }

    /// The cache a run with `ctx` uses ([`CacheArgs::location_for`]), opened.
    pub fn open_for(&self, ctx: &PassContext, uncachable: bool) -> Result<Option<Cache>, CacheOptionsError> {
        self.open_at(self.location_for(ctx, uncachable)?)
    }

    fn open_at(&self, location: Option<CacheLocation>) -> Result<Option<Cache>, CacheOptionsError> {
        match location {
            Some(location) => Ok(Some(Cache::open(&location, self.max_size()?)?)),
            None => Ok(None),
        }
    }
}

/// Loads `path` as `crate::cmd::load` does, parsing a `.pir` file through `cache` when there
/// is one (only the functions whose text is new are parsed); the counts say what the cache
/// gave. Any text the shortcut does not take, and any module that does not verify, goes
/// through `crate::cmd::load`, which reports errors as usual.
pub fn load(
    console: &Console,
    path: &PathBuf,
    shapes: &crate::onnx::InputShapeArgs,
    cache: Option<&Cache>,
    threads: usize,
) -> Result<(Module, String, Option<SourceCounts>), ExitCode> {
    match cache.and_then(|_| read_text(path, shapes)) {
        Some(src) => parse_text(console, path, src, cache, threads),
        None => crate::cmd::load(console, path, shapes).map(|(m, src)| (m, src, None)),
    }
}

/// The text of `path` when it is a `.pir` file the cache can parse (not stdin, not a model);
/// `None` when it is not, or cannot be read (the full load reports why).
pub fn read_text(path: &PathBuf, shapes: &crate::onnx::InputShapeArgs) -> Option<String> {
    if path.as_os_str() == "-" || crate::onnx::is_onnx(path) || crate::args::check_input_shapes(shapes).is_err() {
        return None;
    }
    crate::cmd::read_source(path).ok()
}

/// Parses `src`, the text of `path`, through `cache` (only the functions whose text is new are
/// parsed); text the shortcut does not take, and a module that does not verify, go through the
/// full parse, which reports errors as usual.
pub fn parse_text(
    console: &Console,
    path: &Path,
    src: String,
    cache: Option<&Cache>,
    threads: usize,
) -> Result<(Module, String, Option<SourceCounts>), ExitCode> {
    if let Some((module, counts)) = cache.and_then(|c| c.parse(&src, threads)) {
        if verify_module(&module).is_ok() {
            return Ok((module, src, Some(counts)));
        }
    }
    crate::cmd::parse_source(console, path, src).map(|(m, src)| (m, src, None))
}

/// The `--cache-report` text of a run whose function stages recomputed `recomputed` (label,
/// functions): one line per function stage, `STAGE<TAB>@f @g …`.
pub fn report(recomputed: &[(String, Vec<Arc<str>>)]) -> String {
    let mut out = String::new();
    for (label, names) in recomputed {
        let names: Vec<String> = names.iter().map(|n| format!("@{n}")).collect();
        out.push_str(&format!("{label}\t{}\n", names.join(" ")));
    }
    out
}

/// `passel cache`: inspect or trim a cache directory.
#[derive(clap::Subcommand, Clone, Debug)]
pub enum CacheCommand {
    /// Print the number of entries and their total size.
    Stats(CacheDirArgs),
    /// Remove every entry.
    Clear(CacheDirArgs),
    /// Remove least recently used entries until the cache fits its size cap.
    Gc(CacheDirArgs),
}

/// The directory (and cap) `passel cache` works on.
#[derive(clap::Args, Clone, Debug)]
pub struct CacheDirArgs {
    /// The cache directory (default: PASSEL_CACHE_DIR).
    #[arg(long, value_name = "DIR")]
    pub cache: Option<PathBuf>,
    /// The size cap for `gc` (default 1G).
    #[arg(long = "max-size", value_name = "SIZE")]
    pub max_size: Option<String>,
}

/// Runs a `passel cache` command; returns what to print.
pub fn cache_command(cmd: &CacheCommand) -> Result<String, CacheOptionsError> {
    let args = match cmd {
        CacheCommand::Stats(a) | CacheCommand::Clear(a) | CacheCommand::Gc(a) => a,
    };
    let dir = args.cache.clone().or_else(dir_from_env).ok_or(CacheOptionsError::NoDirectory)?;
    let store = DiskStore::new(&dir);
    match cmd {
        CacheCommand::Stats(_) => {
            let stats = store.stats();
            let per = if stats.entries == 0 { 0 } else { stats.bytes / stats.entries as u64 };
            Ok(format!(
                "cache {}: {} entries, {} bytes ({per} bytes per entry)\n",
                dir.display(),
                stats.entries,
                stats.bytes
            ))
        }
        CacheCommand::Clear(_) => {
            store.clear()?;
            Ok(format!("cache {}: cleared\n", dir.display()))
        }
        CacheCommand::Gc(_) => {
            let max = args.max_size.as_deref().map_or(Ok(DEFAULT_MAX_SIZE), parse_size)?;
            let removed = store.gc(max);
            let stats = store.stats();
            Ok(format!(
                "cache {}: {removed} entries removed; {} entries, {} bytes left\n",
                dir.display(),
                stats.entries,
                stats.bytes
            ))
        }
    }
}

/// Parses a size such as `512M`, `2G`, `1048576`.
pub fn parse_size(text: &str) -> Result<u64, SizeError> {
    let t = text.trim();
    let (digits, unit) = match t.find(|c: char| !c.is_ascii_digit()) {
        Some(i) => t.split_at(i),
        None => (t, ""),
    };
    let n: u64 = digits.parse().map_err(|_| SizeError::Invalid(text.to_string()))?;
    let mult: u64 = match unit.to_ascii_uppercase().trim_end_matches("IB").trim_end_matches('B') {
        "" => 1,
        "K" => 1 << 10,
        "M" => 1 << 20,
        "G" => 1 << 30,
        "T" => 1 << 40,
        _ => return Err(SizeError::Invalid(text.to_string())),
    };
    n.checked_mul(mult).ok_or_else(|| SizeError::TooLarge(text.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_with_binary_units() {
        assert_eq!(parse_size("1048576"), Ok(1 << 20));
        assert_eq!(parse_size("512M"), Ok(512 << 20));
        assert_eq!(parse_size("2GiB"), Ok(2 << 30));
        assert_eq!(parse_size("lots"), Err(SizeError::Invalid("lots".to_string())));
        assert_eq!(parse_size("99999999999T"), Err(SizeError::TooLarge("99999999999T".to_string())));
    }
}
