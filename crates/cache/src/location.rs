//! Where a cache lives: a file path or a Redis URL. The one place that
//! parses a cache location (the CLI's `--cache` and `RANKTUNE_CACHE`, every
//! `cache` subcommand, the Python package) and opens the right store for it.
//!
//! Owns the location syntax, the redaction of passwords in every message
//! that names a location, and the choice of backend. Never connects to a
//! server or touches a file (opening a store does no I/O).

use crate::file::FileStore;
use crate::redis_store::{RedisConfig, RedisStore};
use crate::store::Store;
use crate::CacheError;
use std::ffi::{OsStr, OsString};
use std::fmt;
use std::path::{Path, PathBuf};

/// The prefix a Redis cache uses when its URL names none.
pub const DEFAULT_REDIS_PREFIX: &str = "ranktune";

/// Environment variable with the Redis password, used when the URL has none
/// (so that it never appears on a command line or in a process listing).
pub const REDIS_PASSWORD_ENV: &str = "RANKTUNE_REDIS_PASSWORD";

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

/// A parsed `redis://[user[:password]@]host[:port][/db][?prefix=NAME]` (or
/// `rediss://` for TLS). The password is kept out of `Display` and `Debug`.
#[derive(Clone, PartialEq, Eq)]
pub struct RedisUrl {
    /// `rediss://` (TLS).
    pub tls: bool,
    /// Host name or address (IPv6 without brackets).
    pub host: String,
    /// Port (6379 when the URL names none).
    pub port: u16,
    /// Database number (0 when the URL names none).
    pub db: u32,
    /// ACL user name, if any.
    pub user: Option<String>,
    /// Password from the URL, if any.
    pub(crate) password: Option<String>,
    /// Key prefix: every key of this cache starts with `{PREFIX}:`.
    pub prefix: String,
}

impl RedisUrl {
    /// Whether a password was given in the URL.
    pub fn has_password(&self) -> bool {
        self.password.is_some()
    }

    /// The password given in the URL, if any (to hand to a child process
    /// through `RANKTUNE_REDIS_PASSWORD`; never print it).
    pub fn password(&self) -> Option<&str> {
        self.password.as_deref()
    }

    /// The same location without the URL's password: its `Display` is a
    /// URL that can be given to another process, which then takes the
    /// password from `RANKTUNE_REDIS_PASSWORD`.
    pub fn without_password(&self) -> RedisUrl {
        RedisUrl { password: None, ..self.clone() }
    }

    /// The password: the URL's, else `RANKTUNE_REDIS_PASSWORD` (if set and
    /// not empty).
    pub(crate) fn password_or_env(&self) -> Option<String> {
        self.password
            .clone()
            .or_else(|| std::env::var(REDIS_PASSWORD_ENV).ok().filter(|p| !p.is_empty()))
    }
}

impl RedisUrl {
    /// The URL with its password (the URL's, else `RANKTUNE_REDIS_PASSWORD`)
    /// written out, for handing to a client in this process — e.g. the
    /// Redis collectives of the ranks meeting on the cache's server. Never
    /// print it: `Display` is the form for messages.
    pub fn connection_url(&self) -> String {
        let with = RedisUrl { password: self.password_or_env(), ..self.clone() };
        let mut out = String::new();
        let _ = with.write(&mut out, true);
        out
    }

    fn write(&self, f: &mut dyn fmt::Write, show_password: bool) -> fmt::Result {
        f.write_str(if self.tls { "rediss://" } else { "redis://" })?;
        let pw = |p: &str| if show_password { encode(p) } else { "***".to_string() };
        match (&self.user, &self.password) {
            (Some(u), Some(p)) => write!(f, "{}:{}@", encode(u), pw(p))?,
            (Some(u), None) => write!(f, "{}@", encode(u))?,
            (None, Some(p)) => write!(f, ":{}@", pw(p))?,
            (None, None) => {}
        }
        if self.host.contains(':') {
            write!(f, "[{}]", self.host)?;
        } else {
            f.write_str(&self.host)?;
        }
        write!(f, ":{}/{}?prefix={}", self.port, self.db, self.prefix)
    }
}

impl fmt::Display for RedisUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.write(f, false)
    }
}

impl fmt::Debug for RedisUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RedisUrl({self})")
    }
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

/// `text` with anything between `://` and the last `@` of its authority
/// that follows a `:` replaced by `***`: how an unparsable URL is named in
/// an error without printing its password.
pub fn redact_text(text: &str) -> String {
    let Some(start) = text.find("://").map(|i| i + 3) else { return text.to_string() };
    let rest = &text[start..];
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let authority = &rest[..end];
    let Some(at) = authority.rfind('@') else { return text.to_string() };
    let userinfo = &authority[..at];
    let shown = match userinfo.find(':') {
        Some(c) => format!("{}:***", &userinfo[..c]),
        None => userinfo.to_string(),
    };
    format!("{}{}{}", &text[..start], shown, &text[start + at..])
}

/// Percent-decodes `s` (`%40` → `@`), refusing malformed escapes and
/// results that are not UTF-8.
fn decode(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = s.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// Percent-encodes what would break the URL's structure.
fn encode(s: &str) -> String {
    let mut out = String::new();
    for c in s.chars() {
        match c {
            ':' | '@' | '/' | '?' | '#' | '%' | ' ' => out.push_str(&format!("%{:02X}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

/// Whether a prefix is acceptable: 1–200 of `A-Z a-z 0-9 . _ - / :`.
fn valid_prefix(p: &str) -> bool {
    !p.is_empty()
        && p.len() <= 200
        && p.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-/:".contains(&b))
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
        let tls = match scheme.to_ascii_lowercase().as_str() {
            "redis" => false,
            "rediss" => true,
            other => {
                return Err(invalid(
                    s,
                    format!(
                        "{other}:// is not a cache location this build knows (redis:// or \
                         rediss://); for a file of that name put ./ before it"
                    ),
                ))
            }
        };
        Ok(CacheLocation::Redis(parse_redis(s, &s[colon + 3..], tls)?))
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

fn parse_redis(full: &str, rest: &str, tls: bool) -> Result<RedisUrl, CacheError> {
    let (rest, _fragment) = rest.split_once('#').unwrap_or((rest, ""));
    let (rest, query) = match rest.split_once('?') {
        Some((r, q)) => (r, Some(q)),
        None => (rest, None),
    };
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i + 1..]),
        None => (rest, ""),
    };
    let (userinfo, hostport) = match authority.rfind('@') {
        Some(i) => (Some(&authority[..i]), &authority[i + 1..]),
        None => (None, authority),
    };
    let (user, password) = match userinfo {
        None => (None, None),
        Some(ui) => {
            let (u, p) = match ui.split_once(':') {
                Some((u, p)) => (u, Some(p)),
                None => (ui, None),
            };
            let u = decode(u).ok_or_else(|| invalid(full, "the user name is not valid"))?;
            let p = match p {
                Some(p) => {
                    Some(decode(p).ok_or_else(|| invalid(full, "the password is not valid"))?)
                }
                None => None,
            };
            ((!u.is_empty()).then_some(u), p.filter(|p| !p.is_empty()))
        }
    };
    let (host, port) = if let Some(h) = hostport.strip_prefix('[') {
        let (h, after) =
            h.split_once(']').ok_or_else(|| invalid(full, "an IPv6 address lacks its `]`"))?;
        (h.to_string(), after.strip_prefix(':'))
    } else {
        match hostport.rsplit_once(':') {
            Some((h, p)) => (h.to_string(), Some(p)),
            None => (hostport.to_string(), None),
        }
    };
    if host.is_empty() {
        return Err(invalid(full, "it names no host (e.g. redis://127.0.0.1:6379/0)"));
    }
    let port =
        match port {
            None | Some("") => 6379,
            Some(p) => p.parse::<u16>().ok().filter(|p| *p > 0).ok_or_else(|| {
                invalid(full, format!("port {p:?} is not a port number (1-65535)"))
            })?,
        };
    let path = path.trim_end_matches('/');
    let db = if path.is_empty() {
        0
    } else {
        path.parse::<u32>()
            .map_err(|_| invalid(full, format!("/{path} is not a database number (e.g. /0)")))?
    };
    let mut prefix = DEFAULT_REDIS_PREFIX.to_string();
    for pair in query.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        match k {
            "prefix" => {
                let v = decode(v).unwrap_or_default();
                if !valid_prefix(&v) {
                    return Err(invalid(
                        full,
                        format!(
                            "prefix {v:?} must be 1-200 of the characters A-Z a-z 0-9 . _ - / :"
                        ),
                    ));
                }
                prefix = v;
            }
            other => {
                return Err(invalid(
                    full,
                    format!("unknown parameter {other:?} (the only one is prefix=NAME)"),
                ))
            }
        }
    }
    Ok(RedisUrl { tls, host, port, db, user, password, prefix })
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

    #[test]
    fn redis_urls_parse_with_defaults() {
        let u = redis("redis://127.0.0.1");
        assert_eq!(
            (u.host.as_str(), u.port, u.db, u.prefix.as_str()),
            ("127.0.0.1", 6379, 0, "ranktune")
        );
        assert!(!u.tls && u.user.is_none() && !u.has_password());
        let u = redis("rediss://al%40ice:p%3Ass@[::1]:7000/3/?prefix=team/a");
        assert!(u.tls);
        assert_eq!((u.host.as_str(), u.port, u.db), ("::1", 7000, 3));
        assert_eq!(u.user.as_deref(), Some("al@ice"));
        assert_eq!(u.password.as_deref(), Some("p:ss"));
        assert_eq!(u.prefix, "team/a");
        assert_eq!(u.to_string(), "rediss://al%40ice:***@[::1]:7000/3?prefix=team/a");
        assert!(!format!("{u:?}").contains("p:ss"));
        let u = redis("redis://:secret@h:1/0");
        assert_eq!(u.to_string(), "redis://:***@h:1/0?prefix=ranktune");
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

    #[test]
    fn redact_text_hides_passwords_in_unparsed_text() {
        assert_eq!(redact_text("redis://u:pw@h:1/0"), "redis://u:***@h:1/0");
        assert_eq!(redact_text("redis://h:1/0?x=@"), "redis://h:1/0?x=@");
        assert_eq!(redact_text("plain.json"), "plain.json");
    }
}
