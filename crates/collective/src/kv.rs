//! Collectives over a key-value store the caller provides: for jobs that
//! already have one every rank reaches, such as the c10d store of a
//! `torch.distributed` process group (the TCPStore `torchrun` starts).
//!
//! The same protocol as the file store and Redis (the engine's,
//! `engine.rs`; the rendezvous of `rendezvous.rs`), with keys of a plain
//! store that can only set, get and delete one key (no listing, no expiry,
//! no blocking pop). Layout, under `<ns>` = `ranktune/collective/<job dir
//! name>`:
//!
//! ```text
//! <ns>/hello/<rank>              a rank asking to join (its latest hello)
//! <ns>/welcome                   rank 0's answer: the session and its members
//! <ns>/s/<session>/m/<seq>/<rank> rank's message for call <seq>
//! <ns>/s/<session>/a/<seq>/<rank> rank gave up waiting on call <seq>
//! ```
//!
//! Hellos are one key per rank, so listing them reads `world size` keys; a
//! hello of an earlier run under the same key is deleted by rank 0 and
//! posted again by the live rank, as elsewhere. Waiting is polling (1 ms
//! doubling to 20 ms, never past the call's deadline): every wait is bounded
//! by the call's timeout, and a rank that never arrives is named in the
//! [`CollectiveError::Timeout`] as with every other transport. A store
//! whose own operations block (a c10d `get` of a missing key) must not be
//! handed over as is: [`KeyValue::get`] returns `None` at once for a key
//! that is not there.
//!
//! **Untrusted input.** Every value read is checked as the Redis transport
//! checks its keys: at most [`MAX_MESSAGE`](crate::REDIS_MAX_MESSAGE) bytes,
//! a header that names the rank and call its key says; hellos and the
//! welcome are checked by the rendezvous. Nothing read is evaluated.
//!
//! This module owns the key layout over [`KeyValue`]; it never decides what
//! the bytes mean and never talks to a store itself.

use std::time::{Duration, Instant};

use ranktune_core::job::JobId;

use super::engine::{Engine, Envelope, Transport};
use super::error::CollectiveError;
use super::message;
use super::redis::MAX_MESSAGE;
use super::rendezvous::{self, Listing, MeetingPlace, Member, Posted, MAX_SMALL};

/// The message format's name in this transport's keys.
const FORMAT: &str = "ranktune-collective-kv";

/// Longest pause between two polls.
const MAX_PAUSE: Duration = Duration::from_millis(20);

/// A key-value store every rank of the job reaches: what [`KvCollective`]
/// needs of it. Errors are the store's own words; the collective names the
/// store ([`KeyValue::describe`]) and the action around them.
pub trait KeyValue: Send {
    /// Sets `key` to `value` (replacing any value), visible to every rank
    /// once this returns.
    fn set(&mut self, key: &str, value: &[u8]) -> Result<(), String>;
    /// The value of `key`, or `None` at once when it is not set (never
    /// waits for it).
    fn get(&mut self, key: &str) -> Result<Option<Vec<u8>>, String>;
    /// Deletes `key`; deleting a missing key is not an error.
    fn delete(&mut self, key: &str) -> Result<(), String>;
    /// How messages name the store ("torch.distributed store of group …").
    fn describe(&self) -> String;
}

/// Transport over a [`KeyValue`] store.
pub(crate) struct KvTransport {
    member: Member,
    store: Box<dyn KeyValue>,
    /// How messages name the store.
    place: String,
    /// `ranktune/collective/<job dir name>`.
    ns: String,
    /// `<ns>/s/<session>`, once joined.
    session: Option<String>,
    /// Calls whose own keys may still exist.
    own_seqs: Vec<u64>,
}

impl KvTransport {
    fn hello_key(&self, rank: u32) -> String {
        format!("{}/hello/{rank}", self.ns)
    }

    fn welcome_key(&self) -> String {
        format!("{}/welcome", self.ns)
    }

    fn session(&self) -> Result<&str, CollectiveError> {
        self.session.as_deref().ok_or_else(|| {
            CollectiveError::InvalidArgument("collective used before joining its job".into())
        })
    }

    fn msg_key(session: &str, seq: u64, rank: u32) -> String {
        format!("{session}/m/{seq}/{rank}")
    }

    fn abandon_key(session: &str, seq: u64, rank: u32) -> String {
        format!("{session}/a/{seq}/{rank}")
    }

    fn error(&self, action: &str, reason: String) -> CollectiveError {
        CollectiveError::Store { place: self.place.clone(), action: action.into(), reason }
    }

    fn corrupt(&self, key: &str, reason: impl Into<String>) -> CollectiveError {
        CollectiveError::StoreCorrupt {
            place: self.place.clone(),
            key: key.into(),
            reason: reason.into(),
        }
    }

    fn set(&mut self, action: &str, key: &str, value: &[u8]) -> Result<(), CollectiveError> {
        self.store.set(key, value).map_err(|e| self.error(action, e))
    }

    fn get(&mut self, action: &str, key: &str) -> Result<Option<Vec<u8>>, CollectiveError> {
        self.store.get(key).map_err(|e| self.error(action, e))
    }

    /// Best effort: a key left behind costs only space in the job's store.
    fn delete_quietly(&mut self, key: &str) {
        if let Err(e) = self.store.delete(key) {
            tracing::debug!("{}: deleting {key:?}: {e}", self.place);
        }
    }
}

impl MeetingPlace for KvTransport {
    type Spot = String;

    fn member(&self) -> &Member {
        &self.member
    }

    fn member_mut(&mut self) -> &mut Member {
        &mut self.member
    }

    fn put_hello(&mut self, bytes: &[u8]) -> Result<(), CollectiveError> {
        let key = self.hello_key(self.member.rank);
        self.set("posting a hello", &key, bytes)
    }

    fn list_hellos(&mut self, _limit: usize) -> Result<Listing<String>, CollectiveError> {
        // One key per rank: never more than the world size.
        let mut out = Vec::new();
        for r in 0..self.member.world_size {
            let key = self.hello_key(r);
            if let Some(mut bytes) = self.get("reading hellos", &key)? {
                // One byte over the limit is enough to tell it is too long.
                bytes.truncate(MAX_SMALL + 1);
                out.push(Posted { at: key, label: String::new(), bytes });
            }
        }
        Ok(Listing::Hellos(out))
    }

    fn delete_hellos(&mut self) -> Result<(), CollectiveError> {
        for r in 0..self.member.world_size {
            let key = self.hello_key(r);
            self.store.delete(&key).map_err(|e| self.error("clearing old hellos", e))?;
        }
        Ok(())
    }

    fn delete_hello(&mut self) {
        let key = self.hello_key(self.member.rank);
        self.delete_quietly(&key);
    }

    fn put_welcome(&mut self, _session: &str, bytes: &[u8]) -> Result<(), CollectiveError> {
        let key = self.welcome_key();
        self.set("posting the welcome", &key, bytes)
    }

    fn get_welcome(&mut self) -> Result<Option<Vec<u8>>, CollectiveError> {
        let key = self.welcome_key();
        Ok(self.get("reading the welcome", &key)?.map(|mut b| {
            b.truncate(MAX_SMALL + 1);
            b
        }))
    }

    fn hellos_spot(&self) -> String {
        format!("{}/hello/*", self.ns)
    }

    fn welcome_spot(&self) -> String {
        self.welcome_key()
    }

    fn bad_record(&self, at: &String, reason: String) -> CollectiveError {
        self.corrupt(at, reason)
    }

    fn on(&self) -> String {
        format!(" on the {}", self.place)
    }

    fn pause_joining(&mut self, attempt: u32, deadline: Instant) {
        pause_until(attempt, deadline);
    }
}

/// Sleeps 1 ms doubling to [`MAX_PAUSE`], never past `deadline`.
fn pause_until(attempt: u32, deadline: Instant) {
    let wait = Duration::from_millis(1u64 << attempt.min(5))
        .min(MAX_PAUSE)
        .min(deadline.saturating_duration_since(Instant::now()));
    std::thread::sleep(wait);
}

impl Transport for KvTransport {
    fn join(&mut self, env: &Envelope, seq: u64, deadline: Instant) -> Result<(), CollectiveError> {
        if self.session.is_some() {
            return Ok(());
        }
        let session = rendezvous::join(self, env, seq, deadline)?;
        self.session = Some(format!("{}/s/{session}", self.ns));
        tracing::debug!("joined {}", self.describe());
        Ok(())
    }

    fn post(&mut self, seq: u64, env: &Envelope) -> Result<(), CollectiveError> {
        let bytes = message::encode(FORMAT, env, self.member.rank, seq)?;
        if bytes.len() > MAX_MESSAGE {
            return Err(CollectiveError::InvalidArgument(format!(
                "a message of {} bytes is over the {MAX_MESSAGE}-byte limit",
                bytes.len()
            )));
        }
        let key = Self::msg_key(self.session()?, seq, self.member.rank);
        self.own_seqs.push(seq);
        self.set("posting a message", &key, &bytes)
    }

    fn fetch(&mut self, seq: u64, from: u32) -> Result<Option<Envelope>, CollectiveError> {
        let key = Self::msg_key(self.session()?, seq, from);
        let Some(bytes) = self.get("reading messages", &key)? else { return Ok(None) };
        if bytes.len() > MAX_MESSAGE {
            return Err(self.corrupt(&key, format!("longer than the {MAX_MESSAGE}-byte limit")));
        }
        message::decode(FORMAT, "key", &bytes, from, seq)
            .map(Some)
            .map_err(|reason| self.corrupt(&key, reason))
    }

    fn abandon(&mut self, seq: u64) {
        let Ok(session) = self.session().map(str::to_string) else { return };
        let key = Self::abandon_key(&session, seq, self.member.rank);
        if let Err(e) = self.store.set(&key, b"1") {
            tracing::warn!("could not mark call #{seq} abandoned on the {}: {e}", self.place);
        }
    }

    fn abandoned_by(&mut self, seq: u64) -> Result<Vec<u32>, CollectiveError> {
        let session = self.session()?.to_string();
        let mut by = Vec::new();
        let me = self.member.rank;
        for r in (0..self.member.world_size).filter(|r| *r != me) {
            let key = Self::abandon_key(&session, seq, r);
            if self.get("reading abandon markers", &key)?.is_some() {
                by.push(r);
            }
        }
        Ok(by)
    }

    fn cleanup_before(&mut self, seq: u64) {
        let Some(session) = self.session.clone() else { return };
        let old: Vec<u64> = self.own_seqs.iter().copied().filter(|s| *s < seq).collect();
        for s in old {
            self.delete_quietly(&Self::msg_key(&session, s, self.member.rank));
            self.delete_quietly(&Self::abandon_key(&session, s, self.member.rank));
        }
        self.own_seqs.retain(|s| *s >= seq);
    }

    fn pause(&mut self, attempt: u32, deadline: Instant) {
        pause_until(attempt, deadline);
    }

    fn describe(&self) -> String {
        format!(
            "the {} (job id {:?} from {})",
            self.place, self.member.job.value, self.member.job.source
        )
    }
}

/// A rank of a job whose ranks exchange messages through a [`KeyValue`]
/// store the caller provides (a `torch.distributed` c10d store, from
/// Python). The first call joins the job run, bounded by that call's
/// timeout, exactly as [`FileCollective`](crate::FileCollective) and
/// [`RedisCollective`](crate::RedisCollective) do.
pub struct KvCollective(Engine<KvTransport>);

impl KvCollective {
    /// Rank `rank` of `world_size` meeting in `store` for job run `job`.
    pub fn new(
        rank: u32,
        world_size: u32,
        store: Box<dyn KeyValue>,
        job: JobId,
    ) -> Result<KvCollective, CollectiveError> {
        if rank >= world_size {
            return Err(CollectiveError::InvalidArgument(format!(
                "rank {rank} is not below world size {world_size}"
            )));
        }
        let place = store.describe();
        let ns = format!("ranktune/collective/{}", job.dir_name());
        let transport = KvTransport {
            member: Member::new(rank, world_size, job),
            store,
            place,
            ns,
            session: None,
            own_seqs: Vec::new(),
        };
        Ok(KvCollective(Engine::new(rank, world_size, transport)))
    }

    /// The prefix of this job run's keys (`<namespace>/s/<session>`), once
    /// the first call has joined it.
    pub fn session_prefix(&self) -> Option<&str> {
        self.0.transport().session.as_deref()
    }
}

super::delegate_collective!(KvCollective);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Collective;
    use std::collections::HashMap;
    use std::sync::{Arc, Mutex};

    /// An in-memory store shared by threads, as a c10d store is by processes.
    #[derive(Clone, Default)]
    struct Mem(Arc<Mutex<HashMap<String, Vec<u8>>>>);

    impl KeyValue for Mem {
        fn set(&mut self, key: &str, value: &[u8]) -> Result<(), String> {
            self.0.lock().map_err(|e| e.to_string())?.insert(key.into(), value.to_vec());
            Ok(())
        }
        fn get(&mut self, key: &str) -> Result<Option<Vec<u8>>, String> {
            Ok(self.0.lock().map_err(|e| e.to_string())?.get(key).cloned())
        }
        fn delete(&mut self, key: &str) -> Result<(), String> {
            self.0.lock().map_err(|e| e.to_string())?.remove(key);
            Ok(())
        }
        fn describe(&self) -> String {
            "test store".into()
        }
    }

    fn job() -> JobId {
        JobId { value: "kv-test".into(), source: "test" }
    }

    const LONG: Duration = Duration::from_secs(30);

    /// Runs `f(rank, collective)` on `n` threads of a `world`-rank job.
    fn ranks<R: Send + 'static>(
        mem: &Mem,
        n: u32,
        world: u32,
        f: impl Fn(u32, &mut KvCollective) -> R + Send + Sync + 'static,
    ) -> Vec<R> {
        let f = Arc::new(f);
        let threads: Vec<_> = (0..n)
            .map(|rank| {
                let (mem, f) = (mem.clone(), Arc::clone(&f));
                std::thread::spawn(move || {
                    let mut c = KvCollective::new(rank, world, Box::new(mem), job()).unwrap();
                    f(rank, &mut c)
                })
            })
            .collect();
        threads.into_iter().map(|t| t.join().unwrap()).collect()
    }

    #[test]
    fn threads_exchange_through_one_store_and_clean_up() {
        let mem = Mem::default();
        let out = ranks(&mem, 4, 4, |rank, c| {
            let mut got = Vec::new();
            for i in 0..5u8 {
                got.push(c.all_gather("g", &[rank as u8, i], LONG).unwrap());
                let b = c.broadcast("b", 2, (rank == 2).then_some(&[7u8, i][..]), LONG).unwrap();
                assert_eq!(b, vec![7, i]);
            }
            c.barrier("end", LONG).unwrap();
            got
        });
        for got in out {
            for (i, g) in got.iter().enumerate() {
                let want: Vec<Vec<u8>> = (0..4u8).map(|r| vec![r, i as u8]).collect();
                assert_eq!(g, &want);
            }
        }
        // Only the last call's messages and the welcome remain.
        let keys = mem.0.lock().unwrap().len();
        assert!(keys <= 4 + 1, "{keys} keys left");
    }

    #[test]
    fn a_missing_rank_is_named_within_the_timeout() {
        let mem = Mem::default();
        let start = Instant::now();
        let out = ranks(&mem, 2, 3, |_, c| {
            c.all_gather("gemm hit?", &[1], Duration::from_millis(600)).unwrap_err().to_string()
        });
        assert!(start.elapsed() < Duration::from_secs(5), "{:?}", start.elapsed());
        for e in out {
            assert!(e.contains("rank 2") || e.contains("[2]"), "{e}");
        }
    }

    #[test]
    fn a_corrupt_message_is_an_error_naming_the_key() {
        let mem = Mem::default();
        let planted = mem.clone();
        let out = ranks(&mem, 2, 2, move |rank, c| {
            c.barrier("join", LONG).unwrap();
            let session = c.session_prefix().unwrap().to_string();
            if rank == 1 {
                // Rank 1 leaves a forged message for its call #1 instead of calling.
                planted.clone().set(&format!("{session}/m/1/1"), b"not a message").unwrap();
                return None;
            }
            Some(c.all_gather("x", &[1], Duration::from_secs(5)).unwrap_err().to_string())
        });
        let e = out[0].clone().unwrap();
        assert!(e.contains("/m/1/1") && e.contains("test store"), "{e}");
    }
}
