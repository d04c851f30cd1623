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
//! **Rendezvous.** The one protocol of `rendezvous.rs`, as in the file store,
//! over this layout: the hellos are fields of one hash, the welcome one key,
//! both expiring. A rank joins only a welcome that lists its own nonce, so a
//! run reusing a job id never reads an earlier run's messages.
//!
//! **Untrusted input.** Everything read from the server is checked: a message
//! is read with `GETRANGE` up to [`MAX_MESSAGE`] bytes (a longer one is an
//! error naming its key, never read whole), its header must parse and name
//! the rank and call its key says (`message.rs`); hellos and the welcome are
//! checked by the rendezvous, abandon markers here. Nothing read is ever
//! evaluated.
//!
//! **Endpoint.** The URL is ranktune's one Redis endpoint (`ranktune-redis`:
//! its syntax, prefix rule, timeouts and connect, shared with the cache
//! store). The URL's password, or `RANKTUNE_REDIS_PASSWORD` when the URL has
//! none, is sent to the server and never printed: every message and log
//! line names the server with its password hidden.
//!
//! This module owns the key layout and the connection's use; the rendezvous
//! is `rendezvous.rs`'s, the call protocol the engine's. It never decides
//! what the bytes mean.

use std::collections::{BTreeMap, HashMap};
use std::sync::LazyLock;
use std::time::{Duration, Instant};

use ranktune_redis::{redact_text, Endpoint, RedisUrl};

use super::engine::{Engine, Envelope, Transport};
use super::error::CollectiveError;
use super::message;
use super::rendezvous::{self, Listing, MeetingPlace, Member, Posted, MAX_SMALL};
use ranktune_core::job::JobId;

/// Largest message (header and payload) a rank posts or reads: 64 MiB.
pub const MAX_MESSAGE: usize = 64 << 20;

/// Shortest expiry of any key: an hour.
const MIN_TTL: Duration = Duration::from_secs(3600);

/// Longest single block in `BLPOP` before reading the messages again.
const MAX_BLOCK: Duration = Duration::from_secs(1);

/// A command's reply may take this much longer than its deadline before the
/// connection counts as stalled (a stopped or overloaded server).
const IO_MARGIN: Duration = Duration::from_secs(1);

/// The message format's name in this transport's keys.
const FORMAT: &str = "ranktune-collective-redis";

fn encode(env: &Envelope, rank: u32, seq: u64) -> Result<Vec<u8>, CollectiveError> {
    let out = message::encode(FORMAT, env, rank, seq)?;
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
    message::decode(FORMAT, "key", bytes, rank, seq)
}

/// The error for a URL (named `server`, password hidden) that cannot be used.
pub(crate) fn bad_url(server: &str, e: ranktune_redis::RedisError) -> CollectiveError {
    CollectiveError::Redis {
        server: server.to_string(),
        action: "reading the URL".into(),
        reason: format!("{e}; the form is redis://[user:password@]host[:port][/db][?prefix=NAME]"),
    }
}

/// Transport over a Redis server.
pub(crate) struct RedisTransport {
    /// This rank's side of the rendezvous.
    member: Member,
    /// The server's URL with the password hidden, for messages.
    server: String,
    endpoint: Endpoint,
    con: Option<redis::Connection>,
    /// `<prefix>:collective:<job dir name>`.
    ns: String,
    /// `<ns>:s:<session>`, once joined.
    session: Option<String>,
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
            let con = self.endpoint.connect().map_err(|e| self.error("connecting", &e))?;
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
            if e.is_timeout() {
                // Say which wait ran out, not the socket's "Resource
                // temporarily unavailable".
                return CollectiveError::Redis {
                    server: self.server.clone(),
                    action: action.to_string(),
                    reason: format!(
                        "no answer within {:.1} s (the time the strategy had left, \
                         RANKTUNE_STRATEGY_TIMEOUT, plus {} s); the server may be stopped \
                         (SIGSTOP) or overloaded",
                        timeout.as_secs_f64(),
                        IO_MARGIN.as_secs()
                    ),
                };
            }
            self.error(action, &e)
        })
    }

    /// Time left until the current call's deadline.
    fn remaining(&self) -> Duration {
        self.deadline.saturating_duration_since(Instant::now())
    }

    /// Reads every missing message of call `seq` in one round trip.
    fn poll(&mut self, seq: u64) -> Result<(), CollectiveError> {
        let session = self.session()?.to_string();
        let wanted: Vec<u32> = (0..self.member.world_size)
            .filter(|r| *r != self.member.rank && !self.inbox.contains_key(&(seq, *r)))
            .collect();
        if wanted.is_empty() {
            return Ok(());
        }
        let keys: Vec<String> = wanted.iter().map(|r| Self::msg_key(&session, seq, *r)).collect();
        let wait = self.remaining();
        let values: Vec<Vec<u8>> = self.run("reading messages", wait, |c| {
            let mut inv = READ.prepare_invoke();
            for key in &keys {
                inv.key(key);
            }
            // At most one byte over the limit: enough to tell it is too long.
            inv.arg(MAX_MESSAGE).invoke(c)
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

// Every operation is one command with one reply (a script where it
// writes several keys): redis-rs reads every reply of a pipeline even after
// one timed out, so against a stopped server a pipeline of n commands would
// wait n reply timeouts instead of one.

/// Reads each key's first ARGV[1] + 1 bytes (GETRANGE; empty when missing).
static READ: LazyLock<redis::Script> = LazyLock::new(|| {
    redis::Script::new(
        "local out = {} for i, k in ipairs(KEYS) do \
         out[i] = redis.call('GETRANGE', k, 0, ARGV[1]) end return out",
    )
});

/// Sets hello field ARGV[1] to ARGV[2] in KEYS[1], which expires in ARGV[3] s.
static HELLO: LazyLock<redis::Script> = LazyLock::new(|| {
    redis::Script::new(
        "redis.call('HSET', KEYS[1], ARGV[1], ARGV[2]) \
         redis.call('EXPIRE', KEYS[1], ARGV[3]) return 1",
    )
});

/// Sets message KEYS[1] to ARGV[1] (expiring in ARGV[2] s), then pushes
/// token ARGV[3] onto every wake list KEYS[2..]: the message exists before
/// any token announces it.
static POST: LazyLock<redis::Script> = LazyLock::new(|| {
    redis::Script::new(
        "redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[2]) \
         for i = 2, #KEYS do redis.call('RPUSH', KEYS[i], ARGV[3]) \
         redis.call('EXPIRE', KEYS[i], ARGV[2]) end return 1",
    )
});

/// Adds rank ARGV[1] to abandon marker KEYS[1], which expires in ARGV[2] s.
static ABANDON: LazyLock<redis::Script> = LazyLock::new(|| {
    redis::Script::new(
        "redis.call('SADD', KEYS[1], ARGV[1]) \
         redis.call('EXPIRE', KEYS[1], ARGV[2]) return 1",
    )
});

/// The rendezvous's records as keys: the hellos are fields of one hash, the
/// welcome one key, every write with the transport's expiry.
impl MeetingPlace for RedisTransport {
    type Spot = String;

    fn member(&self) -> &Member {
        &self.member
    }

    fn member_mut(&mut self) -> &mut Member {
        &mut self.member
    }

    fn put_hello(&mut self, bytes: &[u8]) -> Result<(), CollectiveError> {
        let field = format!("{}:{}", self.member.rank, self.member.nonce);
        let (key, ttl, wait) = (self.hello_key(), self.ttl_secs(), self.remaining());
        self.run("posting a hello", wait, |c| {
            HELLO.key(&key).arg(&field).arg(bytes).arg(ttl).invoke(c)
        })
    }

    fn list_hellos(&mut self, limit: usize) -> Result<Listing<String>, CollectiveError> {
        let key = self.hello_key();
        let wait = self.remaining();
        let count: usize =
            self.run("counting hellos", wait, |c| redis::cmd("HLEN").arg(&key).query(c))?;
        if count > limit {
            return Ok(Listing::TooMany(count));
        }
        let all: HashMap<String, Vec<u8>> =
            self.run("reading hellos", wait, |c| redis::cmd("HGETALL").arg(&key).query(c))?;
        Ok(Listing::Hellos(
            all.into_iter()
                .map(|(field, bytes)| Posted {
                    at: key.clone(),
                    label: format!(" {field:?}"),
                    bytes,
                })
                .collect(),
        ))
    }

    fn delete_hellos(&mut self) -> Result<(), CollectiveError> {
        let key = self.hello_key();
        let wait = self.remaining();
        self.run("clearing old hellos", wait, |c| redis::cmd("DEL").arg(&key).exec(c))
    }

    fn delete_hello(&mut self) {
        let field = format!("{}:{}", self.member.rank, self.member.nonce);
        let (key, wait) = (self.hello_key(), self.remaining());
        if let Err(e) = self.run("removing this rank's hello", wait, |c| {
            redis::cmd("HDEL").arg(&key).arg(&field).exec(c)
        }) {
            tracing::debug!("{e}");
        }
    }

    fn put_welcome(&mut self, _session: &str, bytes: &[u8]) -> Result<(), CollectiveError> {
        let (key, ttl, wait) = (self.welcome_key(), self.ttl_secs(), self.remaining());
        self.run("posting the welcome", wait, |c| {
            redis::cmd("SET").arg(&key).arg(bytes).arg("EX").arg(ttl).exec(c)
        })
    }

    fn get_welcome(&mut self) -> Result<Option<Vec<u8>>, CollectiveError> {
        let (key, wait) = (self.welcome_key(), self.remaining());
        let welcome: Vec<u8> = self.run("reading the welcome", wait, |c| {
            redis::cmd("GETRANGE").arg(&key).arg(0).arg(MAX_SMALL).query(c)
        })?;
        // GETRANGE of a missing key is empty; a welcome never is.
        Ok((!welcome.is_empty()).then_some(welcome))
    }

    fn hellos_spot(&self) -> String {
        self.hello_key()
    }

    fn welcome_spot(&self) -> String {
        self.welcome_key()
    }

    fn bad_record(&self, at: &String, reason: String) -> CollectiveError {
        self.corrupt(at, reason)
    }

    fn on(&self) -> String {
        format!(" on {}", self.server)
    }

    fn pause_joining(&mut self, attempt: u32, _deadline: Instant) {
        // Joining happens once per job: plain polling, 1 ms doubling to 32 ms.
        let wait = Duration::from_millis(1u64 << attempt.min(5)).min(self.remaining());
        std::thread::sleep(wait);
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
        let session = rendezvous::join(self, env, seq, deadline)?;
        self.session = Some(format!("{}:s:{session}", self.ns));
        tracing::debug!("joined {}", self.describe());
        Ok(())
    }

    fn post(&mut self, seq: u64, env: &Envelope) -> Result<(), CollectiveError> {
        let bytes = encode(env, self.member.rank, seq)?;
        let session = self.session()?.to_string();
        let key = Self::msg_key(&session, seq, self.member.rank);
        let wakes: Vec<String> = (0..self.member.world_size)
            .filter(|r| *r != self.member.rank)
            .map(|r| Self::wake_key(&session, r))
            .collect();
        let (ttl, wait) = (self.ttl_secs(), self.remaining());
        self.own_seqs.push(seq);
        self.polled = false;
        self.inbox = self.inbox.split_off(&(seq, 0));
        // In order on one connection: the message exists before any token announces it.
        self.run("posting a message", wait, |c| {
            let mut inv = POST.prepare_invoke();
            inv.key(&key);
            for wake in &wakes {
                inv.key(wake);
            }
            inv.arg(&bytes).arg(ttl).arg(seq).invoke(c)
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
        let (rank, ttl) = (self.member.rank, self.ttl_secs());
        // The deadline has passed: a short, fixed bound.
        let result = self.run("marking a call abandoned", Duration::from_secs(1), |c| {
            ABANDON.key(&key).arg(rank).arg(ttl).invoke::<()>(c)
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
        if members.len() > self.member.world_size as usize {
            return Err(self.corrupt(&key, format!("{} members", members.len())));
        }
        let mut by = Vec::new();
        for m in members {
            let rank = std::str::from_utf8(&m)
                .ok()
                .and_then(|s| s.parse::<u32>().ok())
                .filter(|r| *r < self.member.world_size)
                .ok_or_else(|| {
                    self.corrupt(
                        &key,
                        format!("member {:?} is not a rank", String::from_utf8_lossy(&m)),
                    )
                })?;
            if rank != self.member.rank {
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
            keys.push(Self::msg_key(&session, *old, self.member.rank));
            // Every rank is done with older calls: anyone may drop their markers.
            keys.push(Self::abandon_key(&session, *old));
        }
        // Tokens now in the list announce messages already posted, which the
        // next read sees anyway (a token is pushed after its message).
        keys.push(Self::wake_key(&session, self.member.rank));
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
        let wake = Self::wake_key(&session, self.member.rank);
        let secs = format!("{:.3}", block.as_secs_f64());
        // One command, one reply: a pipeline would wait its reply timeout
        // once per reply on a stopped server. Tokens left in the list
        // announce messages the next read sees anyway; the call's cleanup
        // drops them.
        let result = self.run("waiting for messages", block, |c| {
            redis::cmd("BLPOP").arg(&wake).arg(&secs).exec(c)
        });
        if let Err(e) = result {
            // The next read reports a server that stays unreachable; don't spin meanwhile.
            tracing::debug!("{e}");
            std::thread::sleep(block.min(Duration::from_millis(50)));
        }
    }

    fn describe(&self) -> String {
        format!(
            "Redis {} (job id {:?} from {})",
            self.server, self.member.job.value, self.member.job.source
        )
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
        let server = redact_text(url.trim());
        let url = RedisUrl::parse(url.trim()).map_err(|e| bad_url(&server, e))?;
        Self::connect_named(rank, world_size, &url, server, job, &env)
    }

    /// Like [`RedisCollective::connect_with`], for a URL parsed already
    /// (e.g. the cache's location), named in messages by its `Display`.
    pub fn connect_to(
        rank: u32,
        world_size: u32,
        url: &RedisUrl,
        job: JobId,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<RedisCollective, CollectiveError> {
        Self::connect_named(rank, world_size, url, url.to_string(), job, &env)
    }

    /// Connects to `url`, named `server` in messages.
    pub(crate) fn connect_named(
        rank: u32,
        world_size: u32,
        url: &RedisUrl,
        server: String,
        job: JobId,
        env: &impl Fn(&str) -> Option<String>,
    ) -> Result<RedisCollective, CollectiveError> {
        if rank >= world_size {
            return Err(CollectiveError::InvalidArgument(format!(
                "rank {rank} is not below world size {world_size}"
            )));
        }
        let connect_timeout = ranktune_redis::connect_timeout_with(env)
            .map_err(|e| CollectiveError::InvalidArgument(e.to_string()))?;
        let endpoint = Endpoint::new(url, connect_timeout, env).map_err(|e| bad_url(&server, e))?;
        let ns = format!("{}:collective:{}", url.prefix, job.dir_name());
        let transport = RedisTransport {
            member: Member::new(rank, world_size, job),
            server,
            endpoint,
            con: None,
            ns,
            session: None,
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
    use crate::engine::OpKind;
    use crate::{on_threads, Collective};
    use ranktune_redis::CONNECT_TIMEOUT_ENV;
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
    fn the_endpoint_rules_are_the_cache_store_rules() {
        // One prefix rule: `/` and up to 200 characters, as the cache allows.
        let err = |url: &str, env: &dyn Fn(&str) -> Option<String>| {
            RedisCollective::connect_with(0, 2, url, job("x"), env).err().unwrap().to_string()
        };
        for prefix in ["team/a", &"p".repeat(200)] {
            let e = err(&format!("redis://127.0.0.1:1/0?prefix={prefix}"), &no_env);
            assert!(e.contains("connecting"), "{prefix}: {e}");
        }
        for prefix in ["a*b", &"p".repeat(201)] {
            let e = err(&format!("redis://127.0.0.1:1/0?prefix={prefix}"), &no_env);
            assert!(e.contains("reading the URL") && e.contains("must be 1-200"), "{e}");
        }
        // One timeout rule: over an hour is fine, 1e7 s or 0 is not.
        let timeout = |v: &'static str| move |n: &str| (n == CONNECT_TIMEOUT_ENV).then(|| v.into());
        assert!(err("redis://127.0.0.1:1/0", &timeout("7200")).contains("connecting"));
        for bad in ["0", "1e7", "soon"] {
            let e = err("redis://127.0.0.1:1/0", &timeout(bad));
            assert!(e.contains(CONNECT_TIMEOUT_ENV) && e.contains(bad), "{e}");
        }
        // A password holding `/` is a password, and never printed.
        let e = err("redis://u:se/cret@127.0.0.1:1/0", &no_env);
        assert!(e.contains("redis://u:***@127.0.0.1:1/0") && !e.contains("cret"), "{e}");
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
        t.member.world_size = 2;
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
