//! Collectives over a Redis server every rank can reach: for clusters whose
//! nodes share no filesystem (or one whose locks do not span nodes).
//!
//! The same protocol as the file store (the engine's, `engine.rs`), with keys
//! instead of files. Layout, under the namespace
//! `<prefix>:collective:<job-dir-name>` (`<prefix>` is the URL's `?prefix=`,
//! default `ranktune`; `<job-dir-name>` is [`JobId::dir_name`]):
//!
//! ```text
//! <ns>:hello                   hash: "<rank>:<nonce>" → a rank asking to join
//! <ns>:welcome                 rank 0's answer: the session and its members
//! <ns>:s:<session>:m:<seq>:<rank>   rank's message for call <seq>
//! <ns>:s:<session>:a:<seq>     set of the ranks that gave up waiting on call <seq>
//! <ns>:s:<session>:w:<rank>    list of wake-up tokens for a waiting rank
//! ```
//!
//! **Expiry.** Every key is written with an expiry of at least an hour (and
//! at least twice the call's timeout plus a minute), so a job that dies leaves
//! nothing behind for long. A rank deletes its own older messages as it goes
//! (the engine's cleanup rule); only the last call's messages and the
//! welcome wait for their expiry.
//!
//! **Waiting.** A rank that posts a message also pushes a token onto every
//! other rank's wake-up list; a rank waiting for messages blocks in `BLPOP`
//! on its own list (at most 1 s at a time, never past the call's deadline),
//! then reads the messages again. Every wait is bounded by the call's timeout.
//! Tokens are only hints (the messages are the truth), so a lost or stale
//! token costs at most one extra read or one second.
//!
//! **Rendezvous.** As in the file store: every rank draws a random nonce and
//! posts a hello; rank 0 first deletes the hellos it finds (left by dead runs
//! of the same job id; live ranks re-post theirs on every poll), waits for a
//! hello from every rank, and names the session and each member's nonce in
//! the welcome. A rank joins only a welcome that lists its own nonce, so a
//! run reusing a job id never reads an earlier run's messages.
//!
//! **Untrusted input.** Everything read from the server is checked: a message
//! is read with `GETRANGE` up to [`MAX_MESSAGE`] bytes (a longer one is an
//! error naming its key, never read whole), its header must parse and name
//! the rank and call its key says; hellos, welcome and abandon markers are
//! parsed and range-checked. Nothing read is ever evaluated.
//!
//! **Credentials.** The URL's password, or `RANKTUNE_REDIS_PASSWORD` when the
//! URL has none, is sent to the server and never printed: every message and
//! log line names the server by [`redact_url`].
//!
//! This module owns the key layout, the connection and the rendezvous; the
//! call protocol itself is the engine's. It never decides what the bytes mean.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::engine::{Engine, Envelope, OpKind, Transport};
use super::error::CollectiveError;
use super::file::new_nonce;
use super::job::JobId;

/// Largest message (header and payload) a rank posts or reads: 64 MiB.
pub const MAX_MESSAGE: usize = 64 << 20;

/// Largest hello or welcome read from the server.
const MAX_SMALL: usize = 1 << 20;

/// Shortest expiry of any key: an hour.
const MIN_TTL: Duration = Duration::from_secs(3600);

/// Longest single block in `BLPOP` before reading the messages again.
const MAX_BLOCK: Duration = Duration::from_secs(1);

/// A command's reply may take this much longer than its deadline before the
/// connection counts as stalled (a stopped or overloaded server).
const IO_MARGIN: Duration = Duration::from_secs(1);

/// Default bound on connecting; `RANKTUNE_REDIS_CONNECT_TIMEOUT` (seconds) sets it.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// The variable that sets the connect timeout, in seconds.
pub const CONNECT_TIMEOUT_ENV: &str = "RANKTUNE_REDIS_CONNECT_TIMEOUT";

/// The variable holding the password when the URL has none.
pub const PASSWORD_ENV: &str = "RANKTUNE_REDIS_PASSWORD";

const FORMAT: &str = "ranktune-collective-redis";
const VERSION: u32 = 1;

/// Whether `location` names a Redis server (`redis://…` or `rediss://…`,
/// case-insensitive), rather than a path.
///
/// Deliberately minimal: the scheme decides. The cache store parses the
/// rest of such a URL (database, prefix, TLS) for itself.
///
/// ```
/// use ranktune_collective::is_redis_url;
/// assert!(is_redis_url("redis://127.0.0.1:6379/0?prefix=t"));
/// assert!(is_redis_url("REDISS://cache.example:6380"));
/// assert!(!is_redis_url("/shared/redis://odd-but-a-path.json"));
/// assert!(!is_redis_url("cache.json"));
/// ```
pub fn is_redis_url(location: &str) -> bool {
    let lower = location.trim_start().get(..9).unwrap_or("").to_ascii_lowercase();
    lower.starts_with("redis://") || lower == "rediss://"
}

/// `url` with its password (and any `pass=`/`password=` query value) replaced
/// by `***`, for messages and logs. Anything that does not look like a URL
/// comes back unchanged.
///
/// ```
/// use ranktune_collective::redact_url;
/// assert_eq!(redact_url("redis://u:s3cret@h:6379/0"), "redis://u:***@h:6379/0");
/// assert_eq!(redact_url("redis://:s3cret@h/1?prefix=t"), "redis://:***@h/1?prefix=t");
/// assert_eq!(redact_url("redis://h:6379?password=x&prefix=t"), "redis://h:6379?password=***&prefix=t");
/// assert_eq!(redact_url("redis://h:6379/0"), "redis://h:6379/0");
/// ```
pub fn redact_url(url: &str) -> String {
    let Some(scheme_end) = url.find("://").map(|i| i + 3) else { return url.to_string() };
    let rest = &url[scheme_end..];
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    let authority = match authority.rfind('@') {
        Some(at) => {
            let userinfo = &authority[..at];
            let user = userinfo.split(':').next().unwrap_or("");
            if userinfo.contains(':') {
                format!("{user}:***{}", &authority[at..])
            } else {
                authority.to_string()
            }
        }
        None => authority.to_string(),
    };
    let tail = match tail.find('?') {
        Some(q) => {
            let (path, query) = tail.split_at(q + 1);
            let redacted: Vec<String> = query
                .split('&')
                .map(|pair| match pair.split_once('=') {
                    Some((k, _))
                        if ["pass", "password"].contains(&k.to_ascii_lowercase().as_str()) =>
                    {
                        format!("{k}=***")
                    }
                    _ => pair.to_string(),
                })
                .collect();
            format!("{path}{}", redacted.join("&"))
        }
        None => tail.to_string(),
    };
    format!("{}{authority}{tail}", &url[..scheme_end])
}

/// The `prefix` query value of `url` (default `ranktune`); only letters,
/// digits and `-_.:` are accepted, so a prefix never escapes its namespace.
fn prefix_of(url: &str) -> Result<String, String> {
    let query = url.split_once('?').map(|(_, q)| q.split('#').next().unwrap_or("")).unwrap_or("");
    let Some(value) = query
        .split('&')
        .filter_map(|p| p.split_once('='))
        .find(|(k, _)| *k == "prefix")
        .map(|(_, v)| v)
    else {
        return Ok("ranktune".into());
    };
    if value.is_empty()
        || value.len() > 64
        || !value.chars().all(|c| c.is_ascii_alphanumeric() || "-_.:".contains(c))
    {
        return Err(format!("prefix {value:?} must be 1 to 64 letters, digits or -_.: characters"));
    }
    Ok(value.to_string())
}

/// The connect timeout from [`CONNECT_TIMEOUT_ENV`] through `env`.
pub(crate) fn connect_timeout_with(
    env: &impl Fn(&str) -> Option<String>,
) -> Result<Duration, CollectiveError> {
    let Some(text) = env(CONNECT_TIMEOUT_ENV).filter(|v| !v.trim().is_empty()) else {
        return Ok(DEFAULT_CONNECT_TIMEOUT);
    };
    match text.trim().parse::<f64>() {
        Ok(secs) if secs.is_finite() && secs > 0.0 && secs <= 3600.0 => {
            Ok(Duration::from_secs_f64(secs))
        }
        _ => Err(CollectiveError::InvalidArgument(format!(
            "{CONNECT_TIMEOUT_ENV}={text:?} is not a number of seconds between 0 and 3600 \
             (e.g. 5 or 0.5)"
        ))),
    }
}

/// Header line of a message; the payload follows the newline.
#[derive(Serialize, Deserialize)]
struct Header {
    format: String,
    version: u32,
    kind: OpKind,
    tag: String,
    root: Option<u32>,
    rank: u32,
    seq: u64,
    len: u64,
}

/// A rank asking to join.
#[derive(Serialize, Deserialize)]
struct Hello {
    rank: u32,
    world_size: u32,
    nonce: String,
    pid: u32,
    host: String,
}

/// Rank 0's answer: the session and the nonce of each member, in rank order.
#[derive(Serialize, Deserialize)]
struct Welcome {
    session: String,
    world_size: u32,
    members: Vec<String>,
    pid: u32,
    host: String,
}

fn encode(env: &Envelope, rank: u32, seq: u64) -> Result<Vec<u8>, CollectiveError> {
    let header = Header {
        format: FORMAT.into(),
        version: VERSION,
        kind: env.kind,
        tag: env.tag.clone(),
        root: env.root,
        rank,
        seq,
        len: env.payload.len() as u64,
    };
    let mut out = serde_json::to_vec(&header)
        .map_err(|e| CollectiveError::InvalidArgument(format!("cannot encode message: {e}")))?;
    out.push(b'\n');
    out.extend_from_slice(&env.payload);
    if out.len() > MAX_MESSAGE {
        return Err(CollectiveError::InvalidArgument(format!(
            "a {}-byte message for {} is larger than the Redis collective's limit of {} bytes",
            out.len(),
            env.describe(),
            MAX_MESSAGE
        )));
    }
    Ok(out)
}

/// Decodes rank `rank`'s message for call `seq`; the error says what is wrong.
fn decode(bytes: &[u8], rank: u32, seq: u64) -> Result<Envelope, String> {
    let split = bytes.iter().position(|b| *b == b'\n').ok_or("no header line")?;
    let header: Header =
        serde_json::from_slice(&bytes[..split]).map_err(|e| format!("bad header: {e}"))?;
    if header.format != FORMAT || header.version != VERSION {
        return Err(format!("format {:?} version {}", header.format, header.version));
    }
    let payload = &bytes[split + 1..];
    if header.len != payload.len() as u64 {
        return Err(format!("{} payload bytes, header says {}", payload.len(), header.len));
    }
    if header.rank != rank || header.seq != seq {
        return Err(format!(
            "it says rank {} call #{}, its key says rank {rank} call #{seq}",
            header.rank, header.seq
        ));
    }
    Ok(Envelope {
        kind: header.kind,
        tag: header.tag,
        root: header.root,
        payload: payload.to_vec(),
    })
}

/// Transport over a Redis server.
pub(crate) struct RedisTransport {
    rank: u32,
    world_size: u32,
    job: JobId,
    /// The server's URL with the password hidden, for messages.
    server: String,
    client: redis::Client,
    con: Option<redis::Connection>,
    connect_timeout: Duration,
    /// `<prefix>:collective:<job dir name>`.
    ns: String,
    /// `<ns>:s:<session>`, once joined.
    session: Option<String>,
    nonce: String,
    pid: u32,
    host: String,
    /// Rank 0 deleted the hellos of earlier runs.
    cleared_hellos: bool,
    /// The current call's deadline (set by every `join`).
    deadline: Instant,
    /// Expiry of every key written.
    ttl: Duration,
    /// Messages read but not yet handed to the engine.
    inbox: BTreeMap<(u64, u32), Envelope>,
    /// Whether the messages of the current poll round were read already.
    polled: bool,
    /// Calls whose own keys may still exist.
    own_seqs: Vec<u64>,
}

/// Where a rendezvous stands.
enum Joining {
    Joined,
    Waiting,
}

impl RedisTransport {
    fn hello_key(&self) -> String {
        format!("{}:hello", self.ns)
    }

    fn welcome_key(&self) -> String {
        format!("{}:welcome", self.ns)
    }

    fn session(&self) -> Result<&str, CollectiveError> {
        self.session.as_deref().ok_or_else(|| {
            CollectiveError::InvalidArgument("collective used before joining its job".into())
        })
    }

    fn msg_key(session: &str, seq: u64, rank: u32) -> String {
        format!("{session}:m:{seq}:{rank}")
    }

    fn abandon_key(session: &str, seq: u64) -> String {
        format!("{session}:a:{seq}")
    }

    fn wake_key(session: &str, rank: u32) -> String {
        format!("{session}:w:{rank}")
    }

    fn ttl_secs(&self) -> u64 {
        self.ttl.as_secs().max(1)
    }

    fn error(&self, action: impl Into<String>, e: &redis::RedisError) -> CollectiveError {
        CollectiveError::Redis {
            server: self.server.clone(),
            action: action.into(),
            reason: e.to_string(),
        }
    }

    fn corrupt(&self, key: &str, reason: impl Into<String>) -> CollectiveError {
        CollectiveError::RedisCorrupt {
            server: self.server.clone(),
            key: key.to_string(),
            reason: reason.into(),
        }
    }

    /// The connection, connecting first if there is none (bounded by the connect timeout).
    fn connection(&mut self) -> Result<&mut redis::Connection, CollectiveError> {
        if self.con.is_none() {
            let con = self
                .client
                .get_connection_with_timeout(self.connect_timeout)
                .map_err(|e| self.error("connecting", &e))?;
            self.con = Some(con);
        }
        self.con.as_mut().ok_or_else(|| {
            CollectiveError::InvalidArgument(
                "Redis connection vanished right after connecting".into(),
            )
        })
    }

    /// Runs `f` on the connection with a read timeout of `wait` plus a margin;
    /// an error drops the connection (the next command reconnects), since its
    /// state is unknown after a timeout.
    fn run<T>(
        &mut self,
        action: &str,
        wait: Duration,
        f: impl FnOnce(&mut redis::Connection) -> redis::RedisResult<T>,
    ) -> Result<T, CollectiveError> {
        let timeout = wait + IO_MARGIN;
        let con = self.connection()?;
        let result = con
            .set_read_timeout(Some(timeout))
            .and_then(|()| con.set_write_timeout(Some(timeout)))
            .and_then(|()| f(con));
        result.map_err(|e| {
            self.con = None;
            self.error(action, &e)
        })
    }

    /// Time left until the current call's deadline.
    fn remaining(&self) -> Duration {
        self.deadline.saturating_duration_since(Instant::now())
    }

    /// Hellos now on the server, by rank (checked: size, shape).
    fn hellos(&mut self) -> Result<BTreeMap<u32, Vec<Hello>>, CollectiveError> {
        let key = self.hello_key();
        let limit = 4 * self.world_size as usize + 16;
        let wait = self.remaining();
        let count: usize =
            self.run("counting hellos", wait, |c| redis::cmd("HLEN").arg(&key).query(c))?;
        if count > limit {
            return Err(
                self.corrupt(&key, format!("{count} hellos for a {}-rank job", self.world_size))
            );
        }
        let all: HashMap<String, Vec<u8>> =
            self.run("reading hellos", wait, |c| redis::cmd("HGETALL").arg(&key).query(c))?;
        let mut by_rank: BTreeMap<u32, Vec<Hello>> = BTreeMap::new();
        for (field, bytes) in all {
            if bytes.len() > MAX_SMALL {
                return Err(
                    self.corrupt(&key, format!("hello {field:?} has {} bytes", bytes.len()))
                );
            }
            let hello: Hello = serde_json::from_slice(&bytes)
                .map_err(|e| self.corrupt(&key, format!("bad hello {field:?}: {e}")))?;
            by_rank.entry(hello.rank).or_default().push(hello);
        }
        Ok(by_rank)
    }

    /// Ranks (other than 0 and this one) without a hello.
    fn ranks_without_hello(&mut self) -> Vec<u32> {
        let present = self.hellos().unwrap_or_default();
        (1..self.world_size).filter(|r| *r != self.rank && !present.contains_key(r)).collect()
    }

    /// One step of rank 0's side of the rendezvous.
    fn lead_step(&mut self) -> Result<Joining, CollectiveError> {
        if !self.cleared_hellos {
            // Hellos present before we start are from dead runs, or from live
            // ranks of this run that will post theirs again.
            let key = self.hello_key();
            let wait = self.remaining();
            self.run("clearing old hellos", wait, |c| redis::cmd("DEL").arg(&key).exec(c))?;
            self.cleared_hellos = true;
            if self.world_size > 1 {
                return Ok(Joining::Waiting);
            }
        }
        let hellos = self.hellos()?;
        let mut members = vec![self.nonce.clone()];
        for rank in 1..self.world_size {
            let Some(list) = hellos.get(&rank) else { return Ok(Joining::Waiting) };
            let first = &list[0];
            if let Some(other) = list.iter().find(|h| h.nonce != first.nonce) {
                return Err(CollectiveError::Rendezvous {
                    reason: format!(
                        "rank {rank} is claimed by two processes (pid {} on {} and pid {} on {}): two \
                         jobs share the job id {:?} (from {}) on {}; give each job its own \
                         RANKTUNE_JOB_ID",
                        first.pid,
                        first.host,
                        other.pid,
                        other.host,
                        self.job.value,
                        self.job.source,
                        self.server
                    ),
                });
            }
            members.push(first.nonce.clone());
        }
        for (rank, list) in &hellos {
            let h = &list[0];
            if *rank >= self.world_size || h.world_size != self.world_size {
                return Err(CollectiveError::Rendezvous {
                    reason: format!(
                        "rank {rank} (pid {} on {}) says the job has {} ranks, rank 0 says {}; every \
                         rank must be started with the same world size",
                        h.pid, h.host, h.world_size, self.world_size
                    ),
                });
            }
        }
        let welcome = Welcome {
            session: self.nonce.clone(),
            world_size: self.world_size,
            members,
            pid: self.pid,
            host: self.host.clone(),
        };
        let bytes = serde_json::to_vec(&welcome)
            .map_err(|e| CollectiveError::InvalidArgument(format!("cannot encode welcome: {e}")))?;
        let (key, ttl, wait) = (self.welcome_key(), self.ttl_secs(), self.remaining());
        self.run("posting the welcome", wait, |c| {
            redis::cmd("SET").arg(&key).arg(&bytes).arg("EX").arg(ttl).exec(c)
        })?;
        self.session = Some(format!("{}:s:{}", self.ns, self.nonce));
        Ok(Joining::Joined)
    }

    /// One step of a non-zero rank's side of the rendezvous.
    fn follow_step(&mut self) -> Result<Joining, CollectiveError> {
        let hello = Hello {
            rank: self.rank,
            world_size: self.world_size,
            nonce: self.nonce.clone(),
            pid: self.pid,
            host: self.host.clone(),
        };
        let bytes = serde_json::to_vec(&hello)
            .map_err(|e| CollectiveError::InvalidArgument(format!("cannot encode hello: {e}")))?;
        let field = format!("{}:{}", self.rank, self.nonce);
        let (hello_key, welcome_key) = (self.hello_key(), self.welcome_key());
        let (ttl, wait) = (self.ttl_secs(), self.remaining());
        // Posted on every poll: rank 0 deletes the hellos it finds when it starts.
        let (welcome,): (Vec<u8>,) = self.run("posting a hello", wait, |c| {
            redis::pipe()
                .cmd("HSET")
                .arg(&hello_key)
                .arg(&field)
                .arg(&bytes)
                .ignore()
                .cmd("EXPIRE")
                .arg(&hello_key)
                .arg(ttl)
                .ignore()
                .cmd("GETRANGE")
                .arg(&welcome_key)
                .arg(0)
                .arg(MAX_SMALL)
                .query(c)
        })?;
        if welcome.is_empty() {
            return Ok(Joining::Waiting);
        }
        if welcome.len() > MAX_SMALL {
            return Err(self.corrupt(&welcome_key, format!("more than {MAX_SMALL} bytes")));
        }
        // A welcome that does not parse or does not list us is from another run.
        let Ok(welcome) = serde_json::from_slice::<Welcome>(&welcome) else {
            return Ok(Joining::Waiting);
        };
        if welcome.members.get(self.rank as usize) != Some(&self.nonce) {
            return Ok(Joining::Waiting);
        }
        if welcome.world_size != self.world_size {
            return Err(CollectiveError::Rendezvous {
                reason: format!(
                    "rank 0 (pid {} on {}) says the job has {} ranks, rank {} says {}; every rank \
                     must be started with the same world size",
                    welcome.pid, welcome.host, welcome.world_size, self.rank, self.world_size
                ),
            });
        }
        if welcome.session.is_empty()
            || !welcome.session.chars().all(|c| c.is_ascii_hexdigit())
            || welcome.session.len() > 64
        {
            return Err(self.corrupt(&welcome_key, "the session is not a hex nonce"));
        }
        self.session = Some(format!("{}:s:{}", self.ns, welcome.session));
        let wait = self.remaining();
        if let Err(e) = self.run("removing this rank's hello", wait, |c| {
            redis::cmd("HDEL").arg(&hello_key).arg(&field).exec(c)
        }) {
            tracing::debug!("{e}");
        }
        Ok(Joining::Joined)
    }

    /// Reads every missing message of call `seq` in one round trip.
    fn poll(&mut self, seq: u64) -> Result<(), CollectiveError> {
        let session = self.session()?.to_string();
        let wanted: Vec<u32> = (0..self.world_size)
            .filter(|r| *r != self.rank && !self.inbox.contains_key(&(seq, *r)))
            .collect();
        if wanted.is_empty() {
            return Ok(());
        }
        let keys: Vec<String> = wanted.iter().map(|r| Self::msg_key(&session, seq, *r)).collect();
        let wait = self.remaining();
        let values: Vec<Vec<u8>> = self.run("reading messages", wait, |c| {
            let mut pipe = redis::pipe();
            for key in &keys {
                // At most one byte over the limit: enough to tell it is too long.
                pipe.cmd("GETRANGE").arg(key).arg(0).arg(MAX_MESSAGE);
            }
            pipe.query(c)
        })?;
        for ((from, key), bytes) in wanted.into_iter().zip(&keys).zip(values) {
            // GETRANGE of a missing key is empty; a message never is.
            if bytes.is_empty() {
                continue;
            }
            if bytes.len() > MAX_MESSAGE {
                return Err(self.corrupt(key, format!("longer than the {MAX_MESSAGE}-byte limit")));
            }
            let env = decode(&bytes, from, seq).map_err(|reason| self.corrupt(key, reason))?;
            self.inbox.insert((seq, from), env);
        }
        Ok(())
    }
}

impl Transport for RedisTransport {
    fn join(&mut self, env: &Envelope, seq: u64, deadline: Instant) -> Result<(), CollectiveError> {
        self.deadline = deadline;
        let call_ttl =
            deadline.saturating_duration_since(Instant::now()) * 2 + Duration::from_secs(60);
        self.ttl = self.ttl.max(call_ttl.min(Duration::from_secs(7 * 24 * 3600)));
        if self.session.is_some() {
            return Ok(());
        }
        let start = Instant::now();
        let mut attempt = 0u32;
        loop {
            let step = if self.rank == 0 { self.lead_step()? } else { self.follow_step()? };
            if let Joining::Joined = step {
                tracing::debug!("joined {}", self.describe());
                return Ok(());
            }
            if Instant::now() >= deadline {
                let mut missing = self.ranks_without_hello();
                if self.rank != 0 && missing.is_empty() {
                    missing.push(0);
                }
                tracing::warn!(
                    "rank {} timed out joining job {:?} on {}; waiting for rank(s) {:?}",
                    self.rank,
                    self.job.value,
                    self.server,
                    missing
                );
                return Err(CollectiveError::Timeout {
                    op: env.tag.clone(),
                    kind: format!("{} (joining job {:?})", env.kind_text(), self.job.value),
                    seq,
                    missing,
                    waited: start.elapsed(),
                });
            }
            // Joining happens once per job: plain polling, 1 ms doubling to 32 ms.
            let wait = Duration::from_millis(1u64 << attempt.min(5)).min(self.remaining());
            std::thread::sleep(wait);
            attempt = attempt.saturating_add(1);
        }
    }

    fn post(&mut self, seq: u64, env: &Envelope) -> Result<(), CollectiveError> {
        let bytes = encode(env, self.rank, seq)?;
        let session = self.session()?.to_string();
        let key = Self::msg_key(&session, seq, self.rank);
        let wakes: Vec<String> = (0..self.world_size)
            .filter(|r| *r != self.rank)
            .map(|r| Self::wake_key(&session, r))
            .collect();
        let (ttl, wait) = (self.ttl_secs(), self.remaining());
        self.own_seqs.push(seq);
        self.polled = false;
        self.inbox = self.inbox.split_off(&(seq, 0));
        // In order on one connection: the message exists before any token announces it.
        self.run("posting a message", wait, |c| {
            let mut pipe = redis::pipe();
            pipe.cmd("SET").arg(&key).arg(&bytes).arg("EX").arg(ttl).ignore();
            for wake in &wakes {
                pipe.cmd("RPUSH").arg(wake).arg(seq).ignore();
                pipe.cmd("EXPIRE").arg(wake).arg(ttl).ignore();
            }
            pipe.exec(c)
        })
    }

    fn fetch(&mut self, seq: u64, from: u32) -> Result<Option<Envelope>, CollectiveError> {
        if !self.inbox.contains_key(&(seq, from)) && !self.polled {
            self.poll(seq)?;
            self.polled = true;
        }
        Ok(self.inbox.remove(&(seq, from)))
    }

    fn abandon(&mut self, seq: u64) {
        let Ok(session) = self.session().map(str::to_string) else { return };
        let key = Self::abandon_key(&session, seq);
        let (rank, ttl) = (self.rank, self.ttl_secs());
        // The deadline has passed: a short, fixed bound.
        let result = self.run("marking a call abandoned", Duration::from_secs(1), |c| {
            redis::pipe()
                .cmd("SADD")
                .arg(&key)
                .arg(rank)
                .ignore()
                .cmd("EXPIRE")
                .arg(&key)
                .arg(ttl)
                .ignore()
                .exec(c)
        });
        if let Err(e) = result {
            tracing::warn!("could not mark call #{seq} abandoned: {e}");
        }
    }

    fn abandoned_by(&mut self, seq: u64) -> Result<Vec<u32>, CollectiveError> {
        let session = self.session()?.to_string();
        let key = Self::abandon_key(&session, seq);
        let wait = self.remaining().max(Duration::from_secs(1));
        let members: Vec<Vec<u8>> = self
            .run("reading abandon markers", wait, |c| redis::cmd("SMEMBERS").arg(&key).query(c))?;
        if members.len() > self.world_size as usize {
            return Err(self.corrupt(&key, format!("{} members", members.len())));
        }
        let mut by = Vec::new();
        for m in members {
            let rank = std::str::from_utf8(&m)
                .ok()
                .and_then(|s| s.parse::<u32>().ok())
                .filter(|r| *r < self.world_size)
                .ok_or_else(|| {
                    self.corrupt(
                        &key,
                        format!("member {:?} is not a rank", String::from_utf8_lossy(&m)),
                    )
                })?;
            if rank != self.rank {
                by.push(rank);
            }
        }
        by.sort_unstable();
        Ok(by)
    }

    fn cleanup_before(&mut self, seq: u64) {
        let Some(session) = self.session.clone() else { return };
        let mut keys: Vec<String> = Vec::new();
        for old in self.own_seqs.iter().filter(|s| **s < seq) {
            keys.push(Self::msg_key(&session, *old, self.rank));
            // Every rank is done with older calls: anyone may drop their markers.
            keys.push(Self::abandon_key(&session, *old));
        }
        // Tokens now in the list announce messages already posted, which the
        // next read sees anyway (a token is pushed after its message).
        keys.push(Self::wake_key(&session, self.rank));
        self.own_seqs.retain(|s| *s >= seq);
        let result = self.run("deleting old messages", Duration::from_secs(1), |c| {
            redis::cmd("DEL").arg(&keys).exec(c)
        });
        if let Err(e) = result {
            tracing::debug!("{e}");
        }
    }

    fn pause(&mut self, _attempt: u32, deadline: Instant) {
        let block = deadline.saturating_duration_since(Instant::now()).min(MAX_BLOCK);
        self.polled = false;
        // BLPOP's timeout 0 would block forever.
        if block < Duration::from_millis(1) {
            return;
        }
        let Some(session) = self.session.clone() else {
            std::thread::sleep(block.min(Duration::from_millis(5)));
            return;
        };
        let wake = Self::wake_key(&session, self.rank);
        let secs = format!("{:.3}", block.as_secs_f64());
        // One round trip: wait for a token, then drop the others (each
        // announces a message the next read sees anyway).
        let result = self.run("waiting for messages", block, |c| {
            redis::pipe()
                .cmd("BLPOP")
                .arg(&wake)
                .arg(&secs)
                .ignore()
                .cmd("DEL")
                .arg(&wake)
                .ignore()
                .exec(c)
        });
        if let Err(e) = result {
            // The next read reports a server that stays unreachable; don't spin meanwhile.
            tracing::debug!("{e}");
            std::thread::sleep(block.min(Duration::from_millis(50)));
        }
    }

    fn describe(&self) -> String {
        format!("Redis {} (job id {:?} from {})", self.server, self.job.value, self.job.source)
    }
}

/// A rank of a job whose ranks exchange messages through a Redis server.
///
/// Its keys live under `<prefix>:collective:<job>` (the URL's `?prefix=`,
/// default `ranktune`) and expire on their own; [`RedisCollective::connect`]
/// connects (bounded by a connect timeout) and checks the server answers; the
/// first call joins the job run, bounded by that call's timeout, exactly as
/// [`FileCollective`](crate::FileCollective) does over a directory.
///
/// ```no_run
/// use std::time::Duration;
/// use ranktune_collective::{Collective, JobId, RedisCollective};
///
/// let job = JobId::detect().expect("launched by torchrun, mpirun, srun or ranktune");
/// let mut c = RedisCollective::connect(1, 4, "redis://tuning-host:6379/0", job).unwrap();
/// let all = c.all_gather("gemm [[64,512]] hit?", &[1], Duration::from_secs(60)).unwrap();
/// assert_eq!(all.len(), 4);
/// ```
pub struct RedisCollective(Engine<RedisTransport>);

impl RedisCollective {
    /// Rank `rank` of `world_size` in the job run `job`, over the Redis server
    /// at `url` (`redis://[user:password@]host[:port][/db][?prefix=NAME]`),
    /// with the password from `RANKTUNE_REDIS_PASSWORD` when the URL has none
    /// and the connect timeout from `RANKTUNE_REDIS_CONNECT_TIMEOUT`.
    pub fn connect(
        rank: u32,
        world_size: u32,
        url: &str,
        job: JobId,
    ) -> Result<RedisCollective, CollectiveError> {
        Self::connect_with(rank, world_size, url, job, |name| std::env::var(name).ok())
    }

    /// Like [`RedisCollective::connect`], reading variables through `env`.
    pub fn connect_with(
        rank: u32,
        world_size: u32,
        url: &str,
        job: JobId,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<RedisCollective, CollectiveError> {
        if rank >= world_size {
            return Err(CollectiveError::InvalidArgument(format!(
                "rank {rank} is not below world size {world_size}"
            )));
        }
        let server = redact_url(url.trim());
        let bad_url = |reason: String| CollectiveError::Redis {
            server: server.clone(),
            action: "reading the URL".into(),
            reason: format!(
                "{reason}; the form is redis://[user:password@]host[:port][/db][?prefix=NAME]"
            ),
        };
        let prefix = prefix_of(url).map_err(bad_url)?;
        let client = redis::Client::open(url.trim()).map_err(|e| bad_url(e.to_string()))?;
        let client = match env(PASSWORD_ENV).filter(|p| !p.is_empty()) {
            Some(password)
                if client.get_connection_info().redis_settings().password().is_none() =>
            {
                let info = client.get_connection_info().clone();
                let settings = info.redis_settings().clone().set_password(password);
                redis::Client::open(info.set_redis_settings(settings))
                    .map_err(|e| bad_url(e.to_string()))?
            }
            _ => client,
        };
        let connect_timeout = connect_timeout_with(&env)?;
        let ns = format!("{prefix}:collective:{}", job.dir_name());
        let transport = RedisTransport {
            rank,
            world_size,
            job,
            server,
            client,
            con: None,
            connect_timeout,
            ns,
            session: None,
            nonce: new_nonce(),
            pid: std::process::id(),
            host: ranktune_core::rank::host_name(),
            cleared_hellos: false,
            deadline: Instant::now(),
            ttl: MIN_TTL,
            inbox: BTreeMap::new(),
            polled: false,
            own_seqs: Vec::new(),
        };
        let mut c = RedisCollective(Engine::new(rank, world_size, transport));
        // Fail now, clearly, rather than at the first collective.
        let t = c.0.transport_mut();
        t.run("checking the server (PING)", connect_timeout, |c| redis::cmd("PING").exec(c))?;
        Ok(c)
    }

    /// The namespace of this job id's keys (`<prefix>:collective:<job>`).
    pub fn namespace(&self) -> &str {
        &self.0.transport().ns
    }

    /// The prefix of this job run's keys (`<namespace>:s:<session>`), once the first call has joined it.
    pub fn session_prefix(&self) -> Option<&str> {
        self.0.transport().session.as_deref()
    }
}

super::delegate_collective!(RedisCollective);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{on_threads, Collective};
    use ranktune_testkit::redis::RedisServer;
    use std::sync::{Arc, Barrier};

    const LONG: Duration = Duration::from_secs(30);

    fn job(id: &str) -> JobId {
        JobId { value: id.into(), source: "test" }
    }

    fn no_env(_: &str) -> Option<String> {
        None
    }

    fn group(url: &str, id: &str, world: u32) -> Vec<RedisCollective> {
        (0..world)
            .map(|r| RedisCollective::connect_with(r, world, url, job(id), no_env).unwrap())
            .collect()
    }

    /// A plain connection to `url`, for looking at and planting keys.
    fn raw(url: &str) -> redis::Connection {
        redis::Client::open(url).unwrap().get_connection().unwrap()
    }

    fn keys(url: &str, pattern: &str) -> Vec<String> {
        let mut keys: Vec<String> = redis::cmd("KEYS").arg(pattern).query(&mut raw(url)).unwrap();
        keys.sort();
        keys
    }

    #[test]
    fn urls_are_recognized_and_redacted() {
        assert!(is_redis_url("redis://h"));
        assert!(is_redis_url("  Redis://h:1/2"));
        assert!(is_redis_url("rediss://h"));
        assert!(!is_redis_url("redis:/h"));
        assert!(!is_redis_url("./redis://h"));
        assert!(!is_redis_url("rediss"));
        assert_eq!(redact_url("redis://a:b:c@h"), "redis://a:***@h");
        assert_eq!(redact_url("redis://user@h"), "redis://user@h");
        assert_eq!(redact_url("rediss://u:p%40ss@h:1/0#x"), "rediss://u:***@h:1/0#x");
        assert_eq!(redact_url("no url"), "no url");
        assert_eq!(prefix_of("redis://h/0?prefix=team-a").unwrap(), "team-a");
        assert_eq!(prefix_of("redis://h/0").unwrap(), "ranktune");
        assert!(prefix_of("redis://h/0?prefix=a*b").unwrap_err().contains("\"a*b\""));
    }

    #[test]
    fn encode_decode_round_trip_and_corruption() {
        let env = Envelope {
            kind: OpKind::Broadcast,
            tag: "a\nb \"q\"".into(),
            root: Some(1),
            payload: vec![0, 10, 255],
        };
        let bytes = encode(&env, 2, 7).unwrap();
        assert_eq!(decode(&bytes, 2, 7).unwrap(), env);
        assert!(decode(&bytes, 3, 7).unwrap_err().contains("its key says rank 3"));
        assert!(decode(&bytes[..bytes.len() - 1], 2, 7).unwrap_err().contains("header says 3"));
        assert!(decode(b"hello", 2, 7).unwrap_err().contains("no header"));
        assert!(decode(b"{}\n", 2, 7).unwrap_err().contains("bad header"));
        let huge = Envelope { payload: vec![0; MAX_MESSAGE], ..env };
        assert!(encode(&huge, 0, 0).unwrap_err().to_string().contains("limit"));
    }

    #[test]
    fn connect_timeout_variable_is_checked() {
        let env =
            |v: &'static str| move |n: &str| (n == CONNECT_TIMEOUT_ENV).then(|| v.to_string());
        assert_eq!(connect_timeout_with(&no_env).unwrap(), DEFAULT_CONNECT_TIMEOUT);
        assert_eq!(connect_timeout_with(&env("0.5")).unwrap(), Duration::from_millis(500));
        for bad in ["0", "-1", "soon", "inf"] {
            let err = connect_timeout_with(&env(bad)).unwrap_err().to_string();
            assert!(err.contains(CONNECT_TIMEOUT_ENV) && err.contains(bad), "{err}");
        }
    }

    #[test]
    fn an_unreachable_server_is_a_bounded_clear_error_without_the_password() {
        // A port nobody listens on: refused at once. Port 1 (privileged and
        // unused), not one from bind(0) and dropped, which could be handed
        // to a Redis server another test of this binary starts meanwhile.
        let port = 1;
        let url = format!("redis://ranker:hunter2@127.0.0.1:{port}/0");
        let start = Instant::now();
        let err = RedisCollective::connect_with(0, 2, &url, job("x"), no_env).err().unwrap();
        let text = err.to_string();
        assert!(start.elapsed() < Duration::from_secs(10), "{:?}", start.elapsed());
        assert!(text.contains(&format!("redis://ranker:***@127.0.0.1:{port}/0")), "{text}");
        assert!(!text.contains("hunter2"), "{text}");
        assert!(text.contains("connecting"), "{text}");
        // A host that drops packets (a non-routable address) is bounded by the connect timeout.
        let env = |n: &str| (n == CONNECT_TIMEOUT_ENV).then(|| "0.3".to_string());
        let start = Instant::now();
        let err = RedisCollective::connect_with(0, 2, "redis://10.255.255.1:6379", job("x"), env)
            .err()
            .unwrap();
        assert!(start.elapsed() < Duration::from_secs(5), "{:?}: {err}", start.elapsed());
        // A URL that is not one.
        let err = RedisCollective::connect_with(0, 2, "redis://h/notadb", job("x"), no_env)
            .err()
            .unwrap();
        assert!(err.to_string().contains("redis://[user:password@]host"), "{err}");
    }

    #[test]
    fn threads_exchange_and_clean_up_and_keys_expire() {
        let Some(server) = RedisServer::start() else { return };
        let url = format!("{}?prefix=t1", server.url(0));
        let handles = group(&url, "threads", 3);
        let results = on_threads(handles, |c| {
            let mut out = Vec::new();
            for i in 0..15u32 {
                out.push(c.all_gather("g", &[c.rank() as u8, i as u8], LONG).unwrap());
                let data = (c.rank() == i % 3).then(|| vec![9u8; i as usize]);
                out.push(vec![c.broadcast("b", i % 3, data.as_deref(), LONG).unwrap()]);
            }
            c.barrier("end", LONG).unwrap();
            (out, c.session_prefix().map(str::to_string))
        });
        assert_eq!(results[0].0, results[1].0);
        assert_eq!(results[0].0, results[2].0);
        assert_eq!(results[0].0[2], vec![vec![0, 1], vec![1, 1], vec![2, 1]]);
        assert_eq!(results[0].0[3], vec![vec![9u8; 1]]);
        let session = results[0].1.clone().unwrap();
        assert!(session.starts_with("t1:collective:job-threads-"), "{session}");
        // Only the last call's three messages and the welcome remain, all expiring.
        let left = keys(&url, "t1:*");
        let msgs: Vec<&String> = left.iter().filter(|k| k.contains(":m:")).collect();
        assert_eq!(msgs.len(), 3, "{left:?}");
        assert!(msgs.iter().all(|k| k.contains(":m:30:")), "{left:?}");
        assert!(left.iter().all(|k| k.contains(":m:30:") || k.ends_with(":welcome")), "{left:?}");
        for key in &left {
            let ttl: i64 = redis::cmd("TTL").arg(key).query(&mut raw(&url)).unwrap();
            assert!((3000..=3700).contains(&ttl), "{key}: {ttl}");
        }
    }

    #[test]
    fn a_missing_rank_times_out_naming_it_and_a_late_one_sees_abandoned() {
        let Some(server) = RedisServer::start() else { return };
        let url = server.url(0);
        // Ranks 0 and 2 leave the warm-up barrier together and start the
        // short call at once; `short` covers one of them stalling for a
        // while on a loaded machine. Rank 1 comes only after both have
        // given up on it (`gave_up`), however slow they are: late for sure.
        let short = Duration::from_secs(2);
        let gave_up = Arc::new(Barrier::new(3));
        let results = on_threads(group(&url, "late", 3), move |c| {
            let first = c.barrier("warm up", LONG);
            let start = Instant::now();
            let second = if c.rank() == 1 {
                gave_up.wait();
                c.barrier("slow", short)
            } else {
                let timed_out = c.barrier("slow", short);
                gave_up.wait();
                timed_out
            };
            let waited = start.elapsed();
            let third = c.all_gather("after", &[c.rank() as u8], LONG);
            (first, second, waited, third)
        });
        for (rank, (first, second, waited, third)) in results.into_iter().enumerate() {
            first.unwrap();
            let err = second.unwrap_err();
            if rank == 1 {
                assert!(
                    matches!(&err, CollectiveError::Abandoned { by, .. } if by == &[0, 2]),
                    "{err}"
                );
            } else {
                assert!(
                    matches!(&err, CollectiveError::Timeout { missing, .. } if missing == &[1]),
                    "{err}"
                );
                // Bounded: the timeout, plus what a loaded machine needs on top.
                assert!(waited < short + Duration::from_secs(5), "{waited:?}");
            }
            assert_eq!(third.unwrap(), vec![vec![0], vec![1], vec![2]]);
        }
    }

    #[test]
    fn a_reused_job_id_never_reads_an_earlier_run_and_mismatches_are_caught() {
        let Some(server) = RedisServer::start() else { return };
        let url = server.url(0);
        on_threads(group(&url, "same", 2), |c| c.all_gather("x", b"old", LONG).unwrap());
        // A rank of a run that died before rank 0 came up posted its hello and left.
        let mut stale = RedisCollective::connect_with(1, 2, &url, job("same"), no_env).unwrap();
        let err = stale.barrier("x", Duration::from_millis(50)).unwrap_err();
        assert!(
            matches!(&err, CollectiveError::Timeout { missing, .. } if missing == &[0]),
            "{err}"
        );
        let results = on_threads(group(&url, "same", 2), |c| {
            let first = c.all_gather("x", b"new", LONG);
            let tag = if c.rank() == 0 { "bucket 8" } else { "bucket 16" };
            let second = c.all_gather(tag, b"", LONG).map(|_| ());
            (first, second)
        });
        for (first, second) in results {
            assert_eq!(first.unwrap(), vec![b"new".to_vec(), b"new".to_vec()]);
            let err = second.unwrap_err();
            assert!(matches!(err, CollectiveError::Mismatch { seq: 1, .. }), "{err}");
        }
    }

    #[test]
    fn corrupt_or_oversized_messages_are_errors_naming_the_key() {
        let Some(server) = RedisServer::start() else { return };
        let url = server.url(0);
        let handles = group(&url, "bad", 2);
        // Join first, so the session is known; then plant rank 1's message for call #1.
        let results = on_threads(handles, |c| {
            c.barrier("join", LONG).unwrap();
            c.session_prefix().unwrap().to_string()
        });
        let session = &results[0];
        let mut con = raw(&url);
        let key = format!("{session}:m:1:1");
        let _: () =
            redis::cmd("SET").arg(&key).arg("{\"not\":\"ours\"}\nxx").query(&mut con).unwrap();
        // A fresh pair cannot be used (new nonce); drive rank 0's transport directly instead.
        let mut c0 = RedisCollective::connect_with(0, 1, &url, job("bad-single"), no_env).unwrap();
        c0.barrier("join", LONG).unwrap();
        let t = c0.0.transport_mut();
        t.session = Some(session.clone());
        t.world_size = 2;
        t.deadline = Instant::now() + LONG;
        let err = t.fetch(1, 1).unwrap_err().to_string();
        assert!(err.contains(&key) && err.contains("bad header"), "{err}");
        let big = vec![b'x'; MAX_MESSAGE + 10];
        let _: () = redis::cmd("SET").arg(&key).arg(&big).query(&mut con).unwrap();
        t.polled = false;
        let err = t.fetch(1, 1).unwrap_err().to_string();
        assert!(err.contains(&key) && err.contains("limit"), "{err}");
    }
}
