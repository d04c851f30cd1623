//! Where a cache lives: a file path or a Redis URL. The one place that
//! parses a cache location (the CLI's `--cache` and `RANKTUNE_CACHE`, every
//! `cache` subcommand, the Python package) and opens the right store for it.
//!
//! Owns the location syntax (a path, or a URL whose rules are
//! [`ranktune_redis`]'s: one syntax, prefix rule and redaction for the
//! cache and the collectives) and the choice of backend. Never connects to
//! a server or touches a file (opening a store does no I/O).

use crate::file::FileStore;
use crate::redis_store::{RedisConfig, RedisStore};
use crate::store::Store;
use crate::CacheError;
use std::ffi::{OsStr, OsString};
use std::fmt;
use std::path::{Path, PathBuf};

pub use ranktune_redis::{redact_text, RedisUrl};

/// The variable that names the cache (a path or a Redis URL).
pub const CACHE_ENV: &str = "RANKTUNE_CACHE";

/// TensorRT-LLM's name for it, accepted as an alias.
pub const TRTLLM_CACHE_ENV: &str = "TLLM_AUTOTUNER_CACHE_PATH";

/// A cache location: a file, or a Redis server.
///
/// `Display` writes it for people with any password replaced by `***`, so
/// every message can name it; `Debug` redacts too.
///
/// ```
/// use ranktune_cache::CacheLocation;
/// let loc = CacheLocation::parse("redis://team:s3cret@db.example:6380/2?prefix=llm").unwrap();
/// assert_eq!(loc.to_string(), "redis://team:***@db.example:6380/2?prefix=llm");
/// assert!(matches!(CacheLocation::parse("tune.json").unwrap(), CacheLocation::File(_)));
/// ```
#[derive(Clone, PartialEq, Eq)]
pub enum CacheLocation {
    /// A cache file.
    File(PathBuf),
    /// A cache on a Redis server.
    Redis(RedisUrl),
}

impl fmt::Display for CacheLocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CacheLocation::File(p) => write!(f, "{}", p.display()),
            CacheLocation::Redis(u) => u.fmt(f),
        }
    }
}

impl fmt::Debug for CacheLocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CacheLocation::File(p) => write!(f, "File({p:?})"),
            CacheLocation::Redis(u) => write!(f, "Redis({u})"),
        }
    }
}

fn invalid(text: &str, why: impl fmt::Display) -> CacheError {
    CacheError::Invalid(format!(
        "cache location {}: {why}; a cache location is a file path or \
         redis://[user[:password]@]host[:port][/db][?prefix=NAME]",
        redact_text(text)
    ))
}

impl CacheLocation {
    /// Parses a location: `redis://…` or `rediss://…` is a Redis server,
    /// any other `scheme://…` is refused (a typo, not a file), and anything
    /// else is a file path (write `./redis://x` for a file of that name).
    pub fn parse(text: &str) -> Result<CacheLocation, CacheError> {
        Self::parse_os(OsStr::new(text))
    }

    /// Like [`CacheLocation::parse`], for a path that may not be UTF-8.
    pub fn parse_os(text: &OsStr) -> Result<CacheLocation, CacheError> {
        let Some(s) = text.to_str() else {
            return Ok(CacheLocation::File(PathBuf::from(text)));
        };
        if s.trim().is_empty() {
            return Err(invalid(s, "it is empty"));
        }
        let Some(colon) = s.find("://") else { return Ok(CacheLocation::File(s.into())) };
        let scheme = &s[..colon];
        let is_scheme = !scheme.is_empty()
            && scheme.as_bytes()[0].is_ascii_alphabetic()
            && scheme.bytes().all(|b| b.is_ascii_alphanumeric() || b"+-.".contains(&b));
        if !is_scheme {
            return Ok(CacheLocation::File(s.into()));
        }
        if !ranktune_redis::is_redis_url(s) {
            return Err(invalid(
                s,
                format!(
                    "{}:// is not a cache location this build knows (redis:// or \
                     rediss://); for a file of that name put ./ before it",
                    scheme.to_ascii_lowercase()
                ),
            ));
        }
        RedisUrl::parse(s).map(CacheLocation::Redis).map_err(|e| invalid(s, e))
    }

    /// The file path, for a file location.
    pub fn as_path(&self) -> Option<&Path> {
        match self {
            CacheLocation::File(p) => Some(p),
            CacheLocation::Redis(_) => None,
        }
    }

    /// Whether this is a Redis location.
    pub fn is_redis(&self) -> bool {
        matches!(self, CacheLocation::Redis(_))
    }

    /// The cache the environment names: `RANKTUNE_CACHE`, else
    /// TensorRT-LLM's `TLLM_AUTOTUNER_CACHE_PATH` (blank values count as
    /// unset); `None` when neither is set. One rule for `ranktune tune` and
    /// Python's `autotune(cache=None)`.
    ///
    /// ```
    /// # use ranktune_cache::CacheLocation;
    /// let env = |name: &str| (name == "TLLM_AUTOTUNER_CACHE_PATH").then(|| "t.json".into());
    /// let loc = CacheLocation::from_env_with(env).unwrap().unwrap();
    /// assert_eq!(loc.as_path(), Some(std::path::Path::new("t.json")));
    /// ```
    pub fn from_env_with(
        env: impl Fn(&str) -> Option<OsString>,
    ) -> Result<Option<CacheLocation>, CacheError> {
        [CACHE_ENV, TRTLLM_CACHE_ENV]
            .into_iter()
            .find_map(|name| env(name).filter(|v| !v.is_empty()))
            .map(|text| CacheLocation::parse_os(&text))
            .transpose()
    }

    /// [`CacheLocation::from_env_with`] on the process environment.
    pub fn from_env() -> Result<Option<CacheLocation>, CacheError> {
        CacheLocation::from_env_with(|name| std::env::var_os(name))
    }

    /// Where the ranks of a job using this cache meet for a collective
    /// strategy, as text that names it: the cache file's directory (made
    /// absolute), or the Redis server's URL (password redacted). Two caches
    /// with the same meeting place share one sequence of collective calls.
    pub fn meeting_place(&self) -> String {
        match self {
            CacheLocation::File(p) => {
                let abs = std::path::absolute(p).unwrap_or_else(|_| p.clone());
                abs.parent().map_or_else(|| abs.clone(), Path::to_path_buf).display().to_string()
            }
            CacheLocation::Redis(u) => u.to_string(),
        }
    }

    /// The location as it can be given back on a command line (passwords
    /// redacted; pass them with `RANKTUNE_REDIS_PASSWORD`).
    pub fn to_os_string(&self) -> OsString {
        match self {
            CacheLocation::File(p) => p.clone().into_os_string(),
            CacheLocation::Redis(u) => OsString::from(u.to_string()),
        }
    }

    /// Opens the store for this location, configured from the environment
    /// (`RANKTUNE_LOCK_TIMEOUT` for files; `RANKTUNE_REDIS_CONNECT_TIMEOUT`,
    /// `RANKTUNE_REDIS_TIMEOUT`, `RANKTUNE_REDIS_PASSWORD` and
    /// `RANKTUNE_CACHE_MAX_BYTES` for Redis). A malformed variable is an
    /// error. Does no I/O: a Redis server is first contacted by the first
    /// load or save.
    pub fn open(&self) -> Result<Box<dyn Store + Send + Sync>, CacheError> {
        Ok(match self {
            CacheLocation::File(p) => Box::new(FileStore::from_env(p)?),
            CacheLocation::Redis(u) => {
                Box::new(RedisStore::new(u.clone(), RedisConfig::from_env()?)?)
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn redis(s: &str) -> RedisUrl {
        match CacheLocation::parse(s).unwrap() {
            CacheLocation::Redis(u) => u,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn paths_stay_paths() {
        for p in ["tune.json", "/tmp/x.json", "./redis://x", "dir/c:/d.json", "1a://b"] {
            assert_eq!(CacheLocation::parse(p).unwrap(), CacheLocation::File(p.into()), "{p}");
        }
    }

    // How a URL reads, and what it refuses, is ranktune-redis's rule (its
    // tests); a location hands every redis:// text to that one parser.
    #[test]
    fn redis_urls_are_the_endpoint_rule() {
        for url in ["redis://127.0.0.1", "rediss://al%40ice:p%3Ass@[::1]:7000/3/?prefix=team/a"] {
            assert_eq!(redis(url), RedisUrl::parse(url).unwrap(), "{url}");
        }
    }

    #[test]
    fn bad_urls_are_named_errors_without_the_password() {
        for (url, why) in [
            ("redis://u:hunter2@h:99999/0", "port"),
            ("redis://u:hunter2@h:1/x", "database number"),
            ("redis://u:hunter2@h/0?prefix=a%20b", "prefix"),
            ("redis://u:hunter2@h/0?db=1", "unknown parameter"),
            ("redis://u:hunter2@/0", "no host"),
            ("http://u:hunter2@h/x", "http://"),
            ("", "empty"),
        ] {
            let e = CacheLocation::parse(url).unwrap_err().to_string();
            assert!(e.contains(why), "{url}: {e}");
            assert!(!e.contains("hunter2"), "{url}: {e}");
        }
    }
}
