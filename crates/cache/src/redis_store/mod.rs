//! The Redis store: one cache on a Redis server that every rank of a job,
//! on any number of machines, loads from and saves into at the same time —
//! for clusters whose shared filesystems do not lock across nodes.
//!
//! # Layout (under the prefix `P`, default `ranktune`)
//!
//! Every key carries the hash tag `{P}`, so a cache lives in one slot of a
//! Redis Cluster and one script can touch all of it:
//!
//! | key | type | holds |
//! | --- | --- | --- |
//! | `{P}:meta` | hash | `format` (`ranktune-cache`), `version` (`1.0`), `lib_version`, `host`, `created_unix`, `updated_unix` |
//! | `{P}:envs` | hash | identity digest → identity JSON (the file's `metadata.environments`) |
//! | `{P}:blocked` | hash | blocklist key (`["op","runner","fingerprint",tactic,[[dims]],"env"]`) → record JSON (one line of the file's `blocklist`) |
//! | `{P}:sections` | set | the names of the sections that have entries (`shared`, `rank_0`, …) |
//! | `{P}:s:<section>` | hash | entry key (`["op","runner","fingerprint",[[dims]]]`) → entry JSON (one line of the file format) |
//!
//! # Saving
//!
//! A save, a removal and a prune are each **one Lua script** (`edit.lua`):
//! one round trip, applied whole or not at all (Redis runs a script
//! atomically, so no reader ever sees half of a save). It checks the format
//! and every key's type first, so a prefix holding something else is
//! refused before anything is written. A save sets its entries (the later
//! save wins, as in the file store) and never touches other entries, so
//! ranks never lose each other's work. Decisions that depend on what is
//! stored (`cache merge -o`'s "newest wins", `prune`, a collective save's
//! superseded rank entries) are made here, in Rust, against the values
//! read, and the script applies them only if every value it was decided on
//! is still the same (compare-and-set); otherwise it is decided again.
//! A save that carries blocklist records or clears is such a save: the
//! newer record wins and a clear removes only a record not newer than it,
//! decided against the stored record, in the same script as the entries.
//!
//! # Loading
//!
//! One script (`load.lua`) reads the metadata and the hashes asked for —
//! [`Store::load_sections`] reads only the shared section and the rank's
//! own. Everything read is untrusted: a value longer than the entry size
//! limit comes back only as its length, the whole read is capped
//! (`RANKTUNE_CACHE_MAX_BYTES`), a value that does not parse or whose key
//! does not match its field is skipped with a warning naming its section
//! and key, and nothing read is ever evaluated.
//!
//! # Faults
//!
//! Connecting is bounded by `RANKTUNE_REDIS_CONNECT_TIMEOUT` (default 5 s),
//! every reply by `RANKTUNE_REDIS_TIMEOUT` (default 30 s); an error names
//! the location with its password redacted and says what to do. A
//! connection that failed is dropped and the next operation reconnects, so
//! a restarted server is picked up.
//!
//! # Always built
//!
//! This backend is not behind a cargo feature. Its one dependency, the
//! `redis` client, is built anyway: every program that uses the cache (the
//! tuner, the CLI, the Python package) also uses `ranktune-collective`,
//! whose Redis transport needs the same client. A feature would save no
//! build, and would make `redis://` locations — accepted wherever a cache
//! path is ([`CacheLocation`](crate::CacheLocation)) — fail at run time in
//! some builds. Only TLS (`rediss://`), which adds rustls, is a feature
//! (`tls`).
//!
//! Owns the Redis layout and its scripts. Never logs (warnings are
//! returned), never prints a password, never runs anything it reads.

use crate::blocklist::{self, BlockKey, Blocklist};
use crate::codec::{self, EntryText, FORMAT_MAJOR, FORMAT_MINOR, FORMAT_NAME};
use crate::document::CacheData;
use crate::entry::{Entry, EntryKey, Identity, Section};
use crate::limit::{
    max_file_bytes, max_section_entries, ENTRY_OVERHEAD_BYTES, MAX_SECTIONS,
    MAX_SECTION_ENTRIES_ENV,
};
use crate::location::RedisUrl;
use crate::store::{self, Loaded, RemovePredicate, Resolver, SaveReport, Store};
use crate::CacheError;
use ranktune_redis::Endpoint;
use redis::Value;
use std::collections::BTreeMap;
use std::sync::{LazyLock, Mutex};
use std::time::Duration;

// The endpoint's settings, their variables and defaults are
// `ranktune_redis`'s (one name each, shared with the collectives).
use ranktune_redis::{CONNECT_TIMEOUT_ENV, DEFAULT_CONNECT_TIMEOUT, DEFAULT_TIMEOUT, TIMEOUT_ENV};
/// The most bytes one entry's value may have; longer ones are skipped.
pub const MAX_ENTRY_BYTES: usize = 1 << 20;

/// How many times a compare-and-set edit is decided again when the values
/// it was decided on changed meanwhile.
const CAS_ROUNDS: usize = 50;

static EDIT: LazyLock<redis::Script> =
    LazyLock::new(|| redis::Script::new(include_str!("edit.lua")));
static LOAD: LazyLock<redis::Script> =
    LazyLock::new(|| redis::Script::new(include_str!("load.lua")));

/// How a [`RedisStore`] connects and what it accepts.
#[derive(Clone, Debug)]
pub struct RedisConfig {
    /// How long connecting (and authenticating) may take.
    pub connect_timeout: Duration,
    /// How long each reply may take.
    pub timeout: Duration,
    /// The most bytes one entry's value may have.
    pub max_entry_bytes: usize,
    /// The most bytes one load may read (each entry also counts
    /// [`ENTRY_OVERHEAD_BYTES`](crate::ENTRY_OVERHEAD_BYTES)).
    pub max_total_bytes: u64,
    /// The most entries one section (one hash) may hold.
    pub max_section_entries: u64,
}

impl Default for RedisConfig {
    fn default() -> Self {
        RedisConfig {
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            timeout: DEFAULT_TIMEOUT,
            max_entry_bytes: MAX_ENTRY_BYTES,
            max_total_bytes: crate::DEFAULT_MAX_FILE_BYTES,
            max_section_entries: crate::DEFAULT_MAX_SECTION_ENTRIES,
        }
    }
}

impl RedisConfig {
    /// The defaults, with the timeouts from `RANKTUNE_REDIS_CONNECT_TIMEOUT`
    /// and `RANKTUNE_REDIS_TIMEOUT` (seconds, fractions allowed) and the
    /// read cap from `RANKTUNE_CACHE_MAX_BYTES`. A malformed value is an
    /// error, never silently the default.
    pub fn from_env() -> Result<RedisConfig, CacheError> {
        let env = |name: &str| std::env::var(name).ok();
        let invalid = |e: ranktune_redis::RedisError| CacheError::Invalid(e.to_string());
        Ok(RedisConfig {
            connect_timeout: ranktune_redis::connect_timeout_with(&env).map_err(invalid)?,
            timeout: ranktune_redis::timeout_with(&env).map_err(invalid)?,
            max_entry_bytes: MAX_ENTRY_BYTES,
            max_total_bytes: max_file_bytes()?,
            max_section_entries: max_section_entries()?,
        })
    }
}

/// The Redis backend of [`Store`]; see the module docs for the layout and
/// why saving is atomic and safe with many ranks on many machines.
pub struct RedisStore {
    url: RedisUrl,
    cfg: RedisConfig,
    endpoint: Endpoint,
    conn: Mutex<Option<redis::Connection>>,
}

impl std::fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "RedisStore({})", self.url)
    }
}

/// A value as read: its text, or only its length when it was too long.
enum RawValue {
    Text(String),
    TooLong(i64),
}

/// A hash as read: field → value, in field order.
type RawHash = BTreeMap<String, RawValue>;

/// One edit of one field: (field, expected, new) as `edit.lua` takes them.
struct FieldEdit {
    field: String,
    expected: Expect,
    new: Option<String>,
}

enum Expect {
    Any,
    Absent,
    Exactly(String),
}

/// What [`RedisStore::edit`] sends: environments, blocklist edits and
/// per-section edits.
#[derive(Default)]
struct Edit {
    environments: BTreeMap<String, Identity>,
    blocked: Vec<FieldEdit>,
    sections: BTreeMap<Section, Vec<FieldEdit>>,
}

/// The key and the count a `RANKTUNE_TOO_*` error of `load.lua` names
/// (`<key> <count>`).
fn key_and_count(detail: Option<&str>) -> (String, String) {
    let detail = detail.unwrap_or("").trim();
    match detail.rsplit_once(' ') {
        Some((key, n)) => (escape_control(key), n.to_string()),
        None => ("a key".to_string(), escape_control(detail)),
    }
}

/// The field an entry is stored under: its key as a compact JSON array.
fn field_of(key: &EntryKey) -> String {
    serde_json::to_string(&(&key.op, &key.runner, &key.fingerprint, &key.bucket))
        .unwrap_or_default()
}

/// The field a blocklist record is stored under: its key as a compact
/// JSON array.
fn block_field(key: &BlockKey) -> String {
    serde_json::to_string(&(
        &key.op,
        &key.runner,
        &key.fingerprint,
        key.tactic(),
        &key.bucket,
        &key.env,
    ))
    .unwrap_or_default()
}

/// The edits that apply `update`'s blocklist over the stored `{P}:blocked`
/// hash: a record where none is stored or the stored one is not newer; a
/// clear where the stored record is not newer than it. Each expects the
/// stored value it was decided on.
fn blocklist_edits(update: &Blocklist, stored: &RawHash) -> Vec<FieldEdit> {
    let stored_when = |field: &str| match stored.get(field) {
        Some(RawValue::Text(t)) => blocklist::read_record(t).ok().map(|(_, r)| r.when_unix),
        _ => None,
    };
    let mut edits = Vec::new();
    for (key, when) in update.cleared() {
        let field = block_field(key);
        if stored_when(&field).is_some_and(|w| w <= when) {
            let expected = RedisStore::expect_of(stored.get(&field));
            edits.push(FieldEdit { field, expected, new: None });
        }
    }
    for (key, record) in update.iter() {
        let field = block_field(key);
        if stored_when(&field).is_some_and(|w| w > record.when_unix) {
            continue;
        }
        let mut text = Vec::new();
        blocklist::write_record(key, record, &mut text);
        let expected = RedisStore::expect_of(stored.get(&field));
        edits.push(FieldEdit {
            field,
            expected,
            new: Some(String::from_utf8_lossy(&text).into_owned()),
        });
    }
    edits
}

/// The value an entry is stored as: one line of the file format.
fn value_of(key: &EntryKey, entry: &Entry) -> String {
    EntryText::new(key, entry).as_str().to_string()
}

impl RedisStore {
    /// A store for the cache at `url`. Does no I/O (the server is first
    /// contacted by the first operation). The password is the URL's, or
    /// `RANKTUNE_REDIS_PASSWORD`'s when the URL has none.
    pub fn new(url: RedisUrl, cfg: RedisConfig) -> Result<RedisStore, CacheError> {
        let env = |name: &str| std::env::var(name).ok();
        let endpoint = Endpoint::new(&url, cfg.connect_timeout, &env)
            .map_err(|e| CacheError::Invalid(e.to_string()))?;
        Ok(RedisStore { url, cfg, endpoint, conn: Mutex::new(None) })
    }

    /// The location, for messages (password redacted).
    pub fn url(&self) -> &RedisUrl {
        &self.url
    }

    fn key(&self, what: &str) -> String {
        format!("{{{}}}:{what}", self.url.prefix)
    }

    fn section_prefix(&self) -> String {
        self.key("s:")
    }

    fn section_key(&self, section: Section) -> String {
        format!("{}{}", self.section_prefix(), section.name())
    }

    /// Runs `f` on a connection (connecting first if needed); a failed
    /// connection is dropped so that the next operation reconnects. A
    /// kept connection that turns out broken (the server restarted since)
    /// is replaced and `f` run once more: every operation here is safe to
    /// repeat (a save is whole or nothing and idempotent; a compare-and-set
    /// edit re-checks what it was decided on).
    fn with_conn<T>(
        &self,
        action: &'static str,
        mut f: impl FnMut(&mut redis::Connection) -> redis::RedisResult<T>,
    ) -> Result<T, CacheError> {
        let mut slot = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        let mut reused = slot.is_some();
        loop {
            if slot.is_none() {
                *slot = Some(self.connect(action)?);
            }
            let Some(conn) = slot.as_mut() else {
                return Err(CacheError::Invalid(format!("{action} {}: no connection", self.url)));
            };
            match f(conn) {
                Ok(v) => return Ok(v),
                Err(e) => {
                    let broken = e.is_io_error() || e.is_timeout() || e.is_connection_dropped();
                    if broken {
                        *slot = None;
                    }
                    if broken && reused && !e.is_timeout() {
                        reused = false;
                        continue;
                    }
                    return Err(self.fail(action, &e, false));
                }
            }
        }
    }

    fn connect(&self, action: &'static str) -> Result<redis::Connection, CacheError> {
        let conn = self.endpoint.connect().map_err(|e| self.fail(action, &e, true))?;
        conn.set_read_timeout(Some(self.cfg.timeout)).map_err(|e| self.fail(action, &e, true))?;
        conn.set_write_timeout(Some(self.cfg.timeout)).map_err(|e| self.fail(action, &e, true))?;
        Ok(conn)
    }

    /// What went wrong with the credentials, if that is what `e` is, in
    /// words that say what to do; never empty brackets, never advice that
    /// does not fit (a password for a server that has none).
    fn auth_problem(&self, code: &str, e: &redis::RedisError) -> Option<String> {
        let text = e.to_string();
        let user = self.url.user.as_deref().unwrap_or("default");
        if code == "NOPERM" {
            return Some(format!(
                "the server accepted the credentials, but user `{user}` may not use the keys of \
                 this cache (`{}:*`): {}. Grant them (ACL SETUSER {user} ~{}:* …) or choose a \
                 ?prefix= it may use",
                self.url.prefix,
                escape_control(&text),
                self.url.prefix
            ));
        }
        if text.contains("without any password configured") {
            return Some(
                "the URL (or RANKTUNE_REDIS_PASSWORD) gives a password, but the server has none \
                 set; remove the password, or set one on the server (requirepass)"
                    .into(),
            );
        }
        // A server with a password drops a long command from a client that
        // has not authenticated ("Protocol error: unauthenticated multibulk
        // length") before it can answer NOAUTH.
        let unauthenticated = text.contains("unauthenticated");
        match code {
            _ if unauthenticated && self.url.user.is_none() => Some(
                "the server needs a password and none was given; give it in the URL \
                 (redis://:password@host) or in RANKTUNE_REDIS_PASSWORD"
                    .into(),
            ),
            "NOAUTH" => Some(
                "the server needs a password and none was given; give it in the URL \
                 (redis://:password@host) or in RANKTUNE_REDIS_PASSWORD"
                    .into(),
            ),
            "WRONGPASS" => Some(format!(
                "the server refused user `{user}` with this password (WRONGPASS); check the \
                 password in the URL or in RANKTUNE_REDIS_PASSWORD, and the user name"
            )),
            // The client reports a wrong password and a password given to a
            // server that has none alike.
            _ if e.kind() == redis::ErrorKind::AuthenticationFailed => Some(format!(
                "the server refused user `{user}` with the password given (in the URL or in \
                 RANKTUNE_REDIS_PASSWORD): either it is wrong, or the server has no password \
                 set and none should be given"
            )),
            _ => None,
        }
    }

    /// The error for a failed operation, in words that say what to do.
    fn fail(&self, action: &'static str, e: &redis::RedisError, connecting: bool) -> CacheError {
        let code = e.code().unwrap_or("");
        let reason = if code == "RANKTUNE_FOREIGN" {
            return CacheError::Unsupported {
                path: self.url.to_string().into(),
                reason: format!(
                    "{}; this prefix holds something that is not a ranktune cache of a version \
                     this build writes, and was left as it is. Choose another ?prefix=",
                    e.detail().unwrap_or("")
                ),
            };
        } else if code == "RANKTUNE_TOO_BIG" {
            let (key, _) = key_and_count(e.detail());
            format!(
                "reading {key} would pass {} bytes (RANKTUNE_CACHE_MAX_BYTES; each entry counts \
                 its text and {ENTRY_OVERHEAD_BYTES} bytes more); nothing was read. If the cache \
                 really is that big, raise the limit; else remove that key",
                self.cfg.max_total_bytes
            )
        } else if code == "RANKTUNE_TOO_MANY" {
            let (key, n) = key_and_count(e.detail());
            format!(
                "{key} holds {n} entries, more than the {} one section may hold \
                 ({MAX_SECTION_ENTRIES_ENV}); nothing was read. If the cache really is that \
                 big, raise the limit; else remove that key",
                self.cfg.max_section_entries
            )
        } else if let Some(reason) = self.auth_problem(code, e) {
            reason
        } else if e.is_timeout() && connecting {
            format!(
                "no connection within {:.1}s ({CONNECT_TIMEOUT_ENV}); is the server up, \
                 reachable and not stopped?",
                self.cfg.connect_timeout.as_secs_f64()
            )
        } else if e.is_timeout() {
            format!(
                "no answer within {:.1}s ({TIMEOUT_ENV}); the server may be stopped or \
                 overloaded. A save that timed out is applied whole or not at all; once the \
                 server answers, run it again (saves are idempotent)",
                self.cfg.timeout.as_secs_f64()
            )
        } else if e.is_connection_refusal() {
            format!(
                "cannot connect ({e}); is redis-server running on {}:{}?",
                self.url.host, self.url.port
            )
        } else if e.is_io_error() || e.is_connection_dropped() {
            format!(
                "the connection failed ({e}); the server may have stopped. A save that failed \
                 this way is applied whole or not at all; run it again once the server is back"
            )
        } else {
            e.to_string()
        };
        CacheError::Redis { action, location: self.url.to_string(), reason }
    }

    /// Reads the metadata, the environments and `sections` (all of them
    /// when `None`) in one script.
    fn read(&self, sections: Option<&[Section]>) -> Result<Loaded, CacheError> {
        let mut warnings = Vec::new();
        let names: Vec<Section> = match sections {
            Some(s) => s.to_vec(),
            None => {
                let members = self.section_names()?;
                let mut found = Vec::new();
                for m in members {
                    match Section::parse(&m) {
                        Some(s) => found.push(s),
                        None => warnings.push(format!(
                            "{}: {} lists a section {m:?} that is neither shared nor rank_<N>; \
                             skipped",
                            self.url,
                            self.key("sections")
                        )),
                    }
                }
                found.sort();
                found
            }
        };
        let (hashes, loaded_warnings) = self.read_hashes(&names)?;
        warnings.extend(loaded_warnings);
        let mut loaded = Loaded { warnings, ..Default::default() };
        let mut hashes = hashes.into_iter();
        let meta = hashes.next().unwrap_or_default();
        let envs = hashes.next().unwrap_or_default();
        let blocked = hashes.next().unwrap_or_default();
        self.read_meta(&meta, &mut loaded)?;
        self.read_blocked(&blocked, &mut loaded);
        for (digest, value) in envs {
            match value {
                RawValue::Text(t) => match serde_json::from_str::<Identity>(&t) {
                    Ok(id) => {
                        loaded.data.metadata.environments.insert(digest, id);
                    }
                    Err(e) => loaded.warnings.push(format!(
                        "{}: environment {digest:?} in {} skipped: {e}",
                        self.url,
                        self.key("envs")
                    )),
                },
                RawValue::TooLong(n) => loaded.warnings.push(format!(
                    "{}: environment {digest:?} in {} skipped: {n} bytes, more than the {}-byte \
                     limit",
                    self.url,
                    self.key("envs"),
                    self.cfg.max_entry_bytes
                )),
            }
        }
        for (section, hash) in names.iter().zip(hashes) {
            for (field, value) in hash {
                match self.parse_value(*section, &field, &value) {
                    Ok((key, entry)) => loaded.data.insert(*section, key, entry),
                    Err(w) => {
                        loaded.bad_entries += 1;
                        loaded.warnings.push(w);
                    }
                }
            }
        }
        Ok(loaded)
    }

    /// One stored entry, parsed and checked; `Err` is the warning naming it.
    fn parse_value(
        &self,
        section: Section,
        field: &str,
        value: &RawValue,
    ) -> Result<(EntryKey, Entry), String> {
        let skipped = |why: String| {
            format!(
                "bad entry {section} {} in {} skipped: {}",
                escape_control(field),
                self.url,
                escape_control(&why)
            )
        };
        let text = match value {
            RawValue::Text(t) => t,
            RawValue::TooLong(n) => {
                return Err(skipped(format!(
                    "{n} bytes, more than the {}-byte limit for one entry",
                    self.cfg.max_entry_bytes
                )))
            }
        };
        let (key, entry) = codec::entry_from_str(text).map_err(skipped)?;
        if field_of(&key) != field {
            return Err(skipped(format!(
                "its value is the entry of another key ({key}); a field holds the entry of its \
                 own key only"
            )));
        }
        Ok((key, entry))
    }

    /// The blocklist records of `{P}:blocked`; a bad one is skipped with a
    /// warning naming it.
    fn read_blocked(&self, blocked: &RawHash, loaded: &mut Loaded) {
        for (field, value) in blocked {
            let skipped = |why: String| {
                format!(
                    "bad blocklist record {} in {} skipped: {}",
                    escape_control(field),
                    self.url,
                    escape_control(&why)
                )
            };
            let parsed = match value {
                RawValue::Text(t) => blocklist::read_record(t).map_err(skipped),
                RawValue::TooLong(n) => Err(skipped(format!(
                    "{n} bytes, more than the {}-byte limit",
                    self.cfg.max_entry_bytes
                ))),
            };
            match parsed {
                Ok((key, record)) if block_field(&key) == *field => {
                    loaded.data.blocklist.insert(key, record);
                }
                Ok((key, _)) => loaded
                    .warnings
                    .push(skipped(format!("its value is the record of another key ({key})"))),
                Err(w) => loaded.warnings.push(w),
            }
        }
    }

    fn read_meta(&self, meta: &RawHash, loaded: &mut Loaded) -> Result<(), CacheError> {
        let text = |k: &str| match meta.get(k) {
            Some(RawValue::Text(t)) => Some(t.as_str()),
            _ => None,
        };
        let unsupported =
            |reason: String| CacheError::Unsupported { path: self.url.to_string().into(), reason };
        if let Some(f) = text("format").filter(|f| *f != FORMAT_NAME) {
            return Err(unsupported(format!(
                "{} says format {f:?}, not a ranktune cache; it was left as it is. Choose \
                 another ?prefix=",
                self.key("meta")
            )));
        }
        if let Some(v) = text("version") {
            let major = v.split('.').next().and_then(|m| m.parse::<u32>().ok());
            if major != Some(FORMAT_MAJOR) {
                return Err(unsupported(format!(
                    "{} says version {v:?}; this build reads version {FORMAT_MAJOR}.x only. \
                     Upgrade ranktune, or choose another ?prefix=",
                    self.key("meta")
                )));
            }
        }
        let m = &mut loaded.data.metadata;
        m.lib_version = text("lib_version").unwrap_or_default().to_string();
        m.host = text("host").unwrap_or_default().to_string();
        m.created_unix = text("created_unix").and_then(|t| t.parse().ok()).unwrap_or(0);
        m.updated_unix = text("updated_unix").and_then(|t| t.parse().ok()).unwrap_or(0);
        Ok(())
    }

    /// The names the sections set lists, after checking on the server that
    /// it is a set of at most [`MAX_SECTIONS`] members: a planted key of
    /// another type, or a set of millions, is refused naming the key.
    fn section_names(&self) -> Result<Vec<String>, CacheError> {
        let key = self.key("sections");
        // One command, one reply: a pipeline waits its reply timeout once
        // per reply on a stopped server.
        let (kind, count): (String, i64) = self.with_conn("loading", |c| {
            redis::cmd("EVAL")
                .arg(
                    "local t = redis.call('TYPE', KEYS[1])['ok'] \
                     if t == 'set' then return {t, redis.call('SCARD', KEYS[1])} end \
                     return {t, 0}",
                )
                .arg(1)
                .arg(&key)
                .query(c)
        })?;
        let refuse = |reason: String| CacheError::Redis {
            action: "loading",
            location: self.url.to_string(),
            reason,
        };
        match kind.as_str() {
            "none" => return Ok(Vec::new()),
            "set" => {}
            other => {
                return Err(refuse(format!(
                    "{key} is a {other}, not the set of section names ranktune keeps there; \
                     nothing was read. Remove that key, or choose another ?prefix="
                )))
            }
        }
        if u64::try_from(count).unwrap_or(u64::MAX) > MAX_SECTIONS {
            return Err(refuse(format!(
                "{key} lists {count} sections, more than the {MAX_SECTIONS} a cache may have (the \
                 shared section and one per rank); nothing was read. Remove that key, or choose \
                 another ?prefix="
            )));
        }
        self.with_conn("loading", |c| redis::cmd("SMEMBERS").arg(&key).query(c))
    }

    /// Reads meta, envs, the blocklist and the sections' hashes with
    /// `load.lua`: the hashes in that order, and warnings for keys of
    /// another type.
    fn read_hashes(&self, sections: &[Section]) -> Result<(Vec<RawHash>, Vec<String>), CacheError> {
        let mut keys = vec![self.key("meta"), self.key("envs"), self.key("blocked")];
        keys.extend(sections.iter().map(|s| self.section_key(*s)));
        let reply: Value = self.with_conn("loading", |c| {
            let mut inv = LOAD.prepare_invoke();
            for k in &keys {
                inv.key(k);
            }
            inv.arg(self.cfg.max_entry_bytes)
                .arg(self.cfg.max_total_bytes)
                .arg(self.cfg.max_section_entries)
                .arg(ENTRY_OVERHEAD_BYTES);
            inv.invoke(c)
        })?;
        let bad_reply = || CacheError::Redis {
            action: "loading",
            location: self.url.to_string(),
            reason: "the server's reply to the load script is not what ranktune sent it to \
                     produce; is this a Redis server?"
                .into(),
        };
        let Value::Array(items) = reply else { return Err(bad_reply()) };
        if items.len() != keys.len() {
            return Err(bad_reply());
        }
        let mut warnings = Vec::new();
        let mut out = Vec::with_capacity(items.len());
        for (key, item) in keys.iter().zip(items) {
            let mut hash = RawHash::new();
            match item {
                Value::Array(flat) => {
                    let mut it = flat.into_iter();
                    while let (Some(f), Some(v)) = (it.next(), it.next()) {
                        let Value::BulkString(f) = f else { return Err(bad_reply()) };
                        let field = String::from_utf8_lossy(&f).into_owned();
                        let value = match v {
                            Value::BulkString(b) => match String::from_utf8(b) {
                                Ok(s) => RawValue::Text(s),
                                Err(e) => RawValue::Text(
                                    String::from_utf8_lossy(e.as_bytes()).into_owned(),
                                ),
                            },
                            Value::Int(n) => RawValue::TooLong(n),
                            _ => return Err(bad_reply()),
                        };
                        hash.insert(field, value);
                    }
                }
                Value::SimpleString(t) => warnings.push(format!(
                    "{}: key {key} is a {t}, not a hash; skipped (remove it, or choose another \
                     ?prefix=)",
                    self.url
                )),
                Value::Nil => {}
                _ => return Err(bad_reply()),
            }
            out.push(hash);
        }
        Ok((out, warnings))
    }

    /// Applies `edit` in one script, whole or not at all. `Ok(None)` when
    /// an expected value had changed (nothing was written); else the
    /// number of fields changed and the entries stored afterwards.
    fn edit(
        &self,
        edit: &Edit,
        action: &'static str,
    ) -> Result<Option<(usize, usize)>, CacheError> {
        let host = ranktune_core::rank::host_name();
        let now = ranktune_core::clock::unix_now();
        let reply: Vec<i64> = self.with_conn(action, |c| {
            let mut inv = EDIT.prepare_invoke();
            inv.key(self.key("meta"))
                .key(self.key("envs"))
                .key(self.key("sections"))
                .key(self.key("blocked"));
            for section in edit.sections.keys() {
                inv.key(self.section_key(*section));
            }
            inv.arg(FORMAT_NAME)
                .arg(FORMAT_MAJOR)
                .arg(format!("{FORMAT_MAJOR}.{FORMAT_MINOR}"))
                .arg(env!("CARGO_PKG_VERSION"))
                .arg(&host)
                .arg(now)
                .arg(self.section_prefix())
                .arg(edit.environments.len());
            for (digest, id) in &edit.environments {
                inv.arg(digest).arg(serde_json::to_string(id).unwrap_or_default());
            }
            inv.arg(edit.blocked.len());
            for e in &edit.blocked {
                push_field_edit(&mut inv, e);
            }
            for (section, edits) in &edit.sections {
                inv.arg(section.name()).arg(edits.len());
                for e in edits {
                    push_field_edit(&mut inv, e);
                }
            }
            inv.invoke(c)
        })?;
        match reply.as_slice() {
            [1, changed, total] => Ok(Some((*changed as usize, *total as usize))),
            [0, _, _] => Ok(None),
            _ => Err(CacheError::Redis {
                action,
                location: self.url.to_string(),
                reason: "the server's reply to the save script is not what ranktune sent it to \
                         produce; is this a Redis server?"
                    .into(),
            }),
        }
    }

    /// Runs `decide` against the stored values of `sections` (all when
    /// `None`) and applies its edit only if none of the values it was
    /// decided on changed meanwhile; decides again otherwise.
    fn edit_decided(
        &self,
        action: &'static str,
        sections: Option<&[Section]>,
        mut decide: impl FnMut(&BTreeMap<Section, RawHash>, &RawHash, &mut Vec<String>) -> (Edit, usize),
    ) -> Result<SaveReport, CacheError> {
        for _ in 0..CAS_ROUNDS {
            let names: Vec<Section> = match sections {
                Some(s) => s.to_vec(),
                None => {
                    let members: Vec<String> = self.with_conn(action, |c| {
                        redis::cmd("SMEMBERS").arg(self.key("sections")).query(c)
                    })?;
                    let mut all: Vec<Section> =
                        members.iter().filter_map(|m| Section::parse(m)).collect();
                    all.sort();
                    all
                }
            };
            let (hashes, mut warnings) = self.read_hashes(&names)?;
            let mut hashes = hashes.into_iter().skip(2);
            let blocked = hashes.next().unwrap_or_default();
            let stored: BTreeMap<Section, RawHash> = names.iter().copied().zip(hashes).collect();
            let (edit, written) = decide(&stored, &blocked, &mut warnings);
            if edit.sections.values().all(Vec::is_empty)
                && edit.environments.is_empty()
                && edit.blocked.is_empty()
            {
                let total = stored.values().map(BTreeMap::len).sum();
                return Ok(SaveReport { written, total, warnings, superseded: 0 });
            }
            if let Some((_, total)) = self.edit(&edit, action)? {
                return Ok(SaveReport { written, total, warnings, superseded: 0 });
            }
        }
        Err(CacheError::Redis {
            action,
            location: self.url.to_string(),
            reason: format!(
                "the entries kept changing while this was decided ({CAS_ROUNDS} tries); nothing \
                 was changed. Run it again"
            ),
        })
    }

    fn expect_of(value: Option<&RawValue>) -> Expect {
        match value {
            None => Expect::Absent,
            Some(RawValue::Text(t)) => Expect::Exactly(t.clone()),
            Some(RawValue::TooLong(_)) => Expect::Any,
        }
    }
}

impl Store for RedisStore {
    fn load(&self) -> Result<Loaded, CacheError> {
        self.read(None)
    }

    fn load_sections(&self, sections: &[Section]) -> Result<Loaded, CacheError> {
        let mut s = sections.to_vec();
        s.sort();
        s.dedup();
        self.read(Some(&s))
    }

    fn inspect(&self) -> Result<Loaded, CacheError> {
        self.read(None)
    }

    fn location(&self) -> String {
        self.url.to_string()
    }

    fn save(&self, update: &CacheData) -> Result<SaveReport, CacheError> {
        let (update, mut warnings) = store::prepare(update);
        let written = update.len();
        if !update.blocklist.is_empty() {
            // Decided against the stored records: compare-and-set.
            let mut report = self.edit_decided("saving into", Some(&[]), |_, blocked, _| {
                let mut edit = Edit {
                    environments: update.metadata.environments.clone(),
                    blocked: blocklist_edits(&update.blocklist, blocked),
                    ..Edit::default()
                };
                for (section, key, entry) in update.iter() {
                    edit.sections.entry(section).or_default().push(FieldEdit {
                        field: field_of(key),
                        expected: Expect::Any,
                        new: Some(value_of(key, entry)),
                    });
                }
                (edit, written)
            })?;
            warnings.append(&mut report.warnings);
            report.warnings = warnings;
            return Ok(report);
        }
        if written == 0 && update.metadata.environments.is_empty() {
            return Ok(SaveReport { written, total: 0, warnings, superseded: 0 });
        }
        let mut edit =
            Edit { environments: update.metadata.environments.clone(), ..Edit::default() };
        for (section, key, entry) in update.iter() {
            edit.sections.entry(section).or_default().push(FieldEdit {
                field: field_of(key),
                expected: Expect::Any,
                new: Some(value_of(key, entry)),
            });
        }
        match self.edit(&edit, "saving into")? {
            Some((_, total)) => Ok(SaveReport { written, total, warnings, superseded: 0 }),
            None => Err(CacheError::Invalid(format!(
                "saving into {}: the save script reported a conflict for an unconditional save",
                self.url
            ))),
        }
    }

    fn remove(&self, keys: &[(Section, EntryKey)]) -> Result<SaveReport, CacheError> {
        let mut edit = Edit::default();
        for (section, key) in keys {
            edit.sections.entry(*section).or_default().push(FieldEdit {
                field: field_of(key),
                expected: Expect::Any,
                new: None,
            });
        }
        if edit.sections.is_empty() {
            return Ok(SaveReport::default());
        }
        match self.edit(&edit, "removing from")? {
            Some((changed, total)) => {
                Ok(SaveReport { written: changed, total, warnings: Vec::new(), superseded: 0 })
            }
            None => Err(CacheError::Invalid(format!(
                "removing from {}: the script reported a conflict for an unconditional removal",
                self.url
            ))),
        }
    }

    /// Removes the entries `pred` picks, deciding on each as stored at the
    /// moment of removal (compare-and-set), and drops malformed entries,
    /// naming each.
    fn remove_where(&self, pred: &RemovePredicate<'_>) -> Result<SaveReport, CacheError> {
        self.edit_decided("pruning", None, |stored, _, warnings| {
            let mut edit = Edit::default();
            let mut removed = 0;
            for (section, hash) in stored {
                for (field, value) in hash {
                    let drop = match self.parse_value(*section, field, value) {
                        Ok((key, entry)) => pred(*section, &key, &entry),
                        Err(w) => {
                            warnings.push(w.replace(" skipped: ", " dropped: "));
                            true
                        }
                    };
                    if drop {
                        removed += 1;
                        edit.sections.entry(*section).or_default().push(FieldEdit {
                            field: field.clone(),
                            expected: Self::expect_of(Some(value)),
                            new: None,
                        });
                    }
                }
            }
            (edit, removed)
        })
    }

    /// Saves `update` and removes the rank entries its `shared` entries
    /// supersede, in one script, decided against the entries as stored.
    fn save_superseding(&self, update: &CacheData) -> Result<SaveReport, CacheError> {
        if !update.sections.contains_key(&Section::Shared) {
            return self.save(update);
        }
        let (update, mut warnings) = store::prepare(update);
        let written = update.len();
        let mut superseded = 0;
        let mut report = self.edit_decided("saving into", None, |stored, blocked, _| {
            let mut edit = Edit {
                environments: update.metadata.environments.clone(),
                blocked: blocklist_edits(&update.blocklist, blocked),
                ..Edit::default()
            };
            superseded = 0;
            for (section, hash) in stored {
                if *section == Section::Shared {
                    continue;
                }
                for (field, value) in hash {
                    let Ok((key, entry)) = self.parse_value(*section, field, value) else {
                        continue;
                    };
                    if update.get(*section, &key).is_none()
                        && store::superseded_by(&update, *section, &key, &entry)
                    {
                        superseded += 1;
                        edit.sections.entry(*section).or_default().push(FieldEdit {
                            field: field.clone(),
                            expected: Self::expect_of(Some(value)),
                            new: None,
                        });
                    }
                }
            }
            for (section, key, entry) in update.iter() {
                edit.sections.entry(section).or_default().push(FieldEdit {
                    field: field_of(key),
                    expected: Expect::Any,
                    new: Some(value_of(key, entry)),
                });
            }
            (edit, written)
        })?;
        warnings.append(&mut report.warnings);
        report.warnings = warnings;
        report.superseded = superseded;
        Ok(report)
    }

    /// Saves like [`Store::save`], but where an entry is stored under the
    /// same key, `take_new(section, key, stored, new)` decides, against the
    /// entry as stored at the moment of the save (compare-and-set).
    fn save_resolving(
        &self,
        update: &CacheData,
        take_new: &Resolver<'_>,
    ) -> Result<SaveReport, CacheError> {
        let (update, mut warnings) = store::prepare(update);
        let sections: Vec<Section> = update.sections.keys().copied().collect();
        let mut report =
            self.edit_decided("saving into", Some(&sections), |stored, blocked, _| {
                let mut edit = Edit {
                    environments: update.metadata.environments.clone(),
                    blocked: blocklist_edits(&update.blocklist, blocked),
                    ..Edit::default()
                };
                let mut written = 0;
                for (section, key, entry) in update.iter() {
                    let field = field_of(key);
                    let old = stored.get(&section).and_then(|h| h.get(&field));
                    let parsed = old.and_then(|v| self.parse_value(section, &field, v).ok());
                    let wins = match (&old, &parsed) {
                        (None, _) => true,
                        (Some(_), Some((_, e))) => take_new(section, key, e, entry),
                        // A malformed stored value is replaced.
                        (Some(_), None) => true,
                    };
                    if wins {
                        written += 1;
                        edit.sections.entry(section).or_default().push(FieldEdit {
                            field,
                            expected: Self::expect_of(old),
                            new: Some(value_of(key, entry)),
                        });
                    }
                }
                (edit, written)
            })?;
        warnings.append(&mut report.warnings);
        report.warnings = warnings;
        Ok(report)
    }
}

/// Adds one (field, expected, new) triple to a call of `edit.lua`.
fn push_field_edit(inv: &mut redis::ScriptInvocation<'_>, e: &FieldEdit) {
    inv.arg(&e.field);
    match &e.expected {
        Expect::Any => inv.arg("*"),
        Expect::Absent => inv.arg(""),
        Expect::Exactly(t) => inv.arg(t),
    };
    inv.arg(e.new.as_deref().unwrap_or(""));
}

/// `text` with control characters written out, for messages that quote
/// what a server said.
fn escape_control(text: &str) -> String {
    crate::label::escape_control(text).into_owned()
}
