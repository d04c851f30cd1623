//! The rendezvous every store-based transport shares: how the ranks of one
//! job run find each other on the first call, whatever the meeting place
//! (a shared directory, a Redis server).
//!
//! Every rank draws a random nonce and posts a hello; rank 0 first deletes
//! the hellos it finds (left by dead runs of the same job id; live ranks
//! re-post theirs on every poll), waits for a hello from every rank, and
//! names the session (its own nonce) and each member's nonce in the
//! welcome. A rank joins only a welcome that lists its own nonce, so a run
//! reusing a job id never reads an earlier run's messages.
//!
//! **Untrusted input, checked once for every transport.** Hellos and the
//! welcome are what other processes wrote: at most [`MAX_SMALL`] bytes each,
//! at most `4 × world size + 16` hellos, each parsed and range-checked
//! (rank, world size, one nonce per rank); the welcome's session must be a
//! short hex nonce before any transport builds a file name or a key from
//! it. Nothing read is ever evaluated.
//!
//! This module owns the protocol; a [`MeetingPlace`] owns only its layout
//! (where a hello, the welcome and a session live, and how they expire).

use std::collections::BTreeMap;
use std::time::Instant;

use ranktune_core::job::JobId;
use serde::{Deserialize, Serialize};

use super::engine::Envelope;
use super::error::CollectiveError;

/// Largest hello or welcome read from a meeting place.
pub(crate) const MAX_SMALL: usize = 1 << 20;

/// A rank asking to join.
#[derive(Serialize, Deserialize)]
pub(crate) struct Hello {
    rank: u32,
    world_size: u32,
    nonce: String,
    pid: u32,
    host: String,
}

/// Rank 0's answer: the session and the nonce of each member, in rank order.
#[derive(Serialize, Deserialize)]
pub(crate) struct Welcome {
    session: String,
    world_size: u32,
    members: Vec<String>,
    pid: u32,
    host: String,
}

/// This rank's side of the rendezvous: who it is, and how far it got.
pub(crate) struct Member {
    /// This rank.
    pub rank: u32,
    /// Ranks in the job.
    pub world_size: u32,
    /// The job run's id.
    pub job: JobId,
    /// This process's nonce for this job run (rank 0's names the session).
    pub nonce: String,
    pid: u32,
    host: String,
    /// Rank 0 deleted the hellos of earlier runs.
    cleared_hellos: bool,
}

impl Member {
    /// Rank `rank` of `world_size` in job `job`, with a fresh nonce.
    pub fn new(rank: u32, world_size: u32, job: JobId) -> Member {
        Member {
            rank,
            world_size,
            job,
            nonce: ranktune_core::job::new_nonce(),
            pid: std::process::id(),
            host: ranktune_core::rank::host_name(),
            cleared_hellos: false,
        }
    }
}

/// A hello as read from the meeting place.
pub(crate) struct Posted<S> {
    /// Where it was read, for errors.
    pub at: S,
    /// How a reason names it after the word "hello": empty when `at`
    /// names it already (a file), ` "<field>"` when `at` is shared (a key).
    pub label: String,
    /// Its bytes (at most [`MAX_SMALL`] + 1 of them).
    pub bytes: Vec<u8>,
}

/// What [`MeetingPlace::list_hellos`] found.
pub(crate) enum Listing<S> {
    /// The hellos.
    Hellos(Vec<Posted<S>>),
    /// More than the limit: this many, none read.
    TooMany(usize),
}

/// Where the ranks of a job meet: a small space of records (hellos, one
/// welcome) that expire, put, got, listed and deleted whole. The transport
/// implements it over its layout; [`join`] runs the protocol over it.
pub(crate) trait MeetingPlace {
    /// Where a record lives, for errors (a path, a key).
    type Spot;

    /// This rank's side.
    fn member(&self) -> &Member;
    /// This rank's side, mutably.
    fn member_mut(&mut self) -> &mut Member;
    /// Makes sure this rank's hello (`bytes`) is posted; called on every
    /// poll, since rank 0 deletes the hellos it finds when it starts.
    fn put_hello(&mut self, bytes: &[u8]) -> Result<(), CollectiveError>;
    /// The hellos now posted; [`Listing::TooMany`] without reading them
    /// when there are more than `limit`.
    fn list_hellos(&mut self, limit: usize) -> Result<Listing<Self::Spot>, CollectiveError>;
    /// Deletes every hello (rank 0, before it waits for this run's).
    fn delete_hellos(&mut self) -> Result<(), CollectiveError>;
    /// Deletes this rank's own hello once it has joined (best effort).
    fn delete_hello(&mut self);
    /// Publishes the welcome for `session` (rank 0), after making what the
    /// session needs (a directory).
    fn put_welcome(&mut self, session: &str, bytes: &[u8]) -> Result<(), CollectiveError>;
    /// The welcome, if one is posted (at most [`MAX_SMALL`] + 1 bytes).
    fn get_welcome(&mut self) -> Result<Option<Vec<u8>>, CollectiveError>;
    /// Where the hellos live, for errors about all of them.
    fn hellos_spot(&self) -> Self::Spot;
    /// Where the welcome lives.
    fn welcome_spot(&self) -> Self::Spot;
    /// The error for a record at `at` that is not what ranktune writes.
    fn bad_record(&self, at: &Self::Spot, reason: String) -> CollectiveError;
    /// Where the ranks meet, for messages, as a suffix: "" when the job id
    /// says it already, ` on <server>` otherwise.
    fn on(&self) -> String;
    /// Waits a little before looking again (`attempt` counts from 0),
    /// never past `deadline`.
    fn pause_joining(&mut self, attempt: u32, deadline: Instant);
}

/// Joins the job run, waiting at most until `deadline`; returns the session
/// (a hex nonce, checked). `env` and `seq` name the call that triggered it,
/// for the timeout.
pub(crate) fn join<P: MeetingPlace>(
    place: &mut P,
    env: &Envelope,
    seq: u64,
    deadline: Instant,
) -> Result<String, CollectiveError> {
    let start = Instant::now();
    let mut attempt = 0u32;
    loop {
        let step = if place.member().rank == 0 { lead_step(place)? } else { follow_step(place)? };
        if let Some(session) = step {
            return Ok(session);
        }
        if Instant::now() >= deadline {
            let mut missing = ranks_without_hello(place);
            let m = place.member();
            if m.rank != 0 && missing.is_empty() {
                missing.push(0);
            }
            tracing::warn!(
                "rank {} timed out joining job {:?}{}; waiting for rank(s) {:?}",
                m.rank,
                m.job.value,
                place.on(),
                missing
            );
            return Err(CollectiveError::Timeout {
                op: env.tag.clone(),
                kind: format!("{} (joining job {:?})", env.kind_text(), m.job.value),
                seq,
                missing,
                waited: start.elapsed(),
            });
        }
        place.pause_joining(attempt, deadline);
        attempt = attempt.saturating_add(1);
    }
}

/// The hellos now posted, by rank, checked (count, size, shape).
fn hellos<P: MeetingPlace>(place: &mut P) -> Result<BTreeMap<u32, Vec<Hello>>, CollectiveError> {
    let world = place.member().world_size;
    let limit = 4 * world as usize + 16;
    let posted = match place.list_hellos(limit)? {
        Listing::Hellos(posted) => posted,
        Listing::TooMany(count) => {
            let at = place.hellos_spot();
            return Err(place.bad_record(&at, format!("{count} hellos for a {world}-rank job")));
        }
    };
    let mut by_rank: BTreeMap<u32, Vec<Hello>> = BTreeMap::new();
    for p in posted {
        if p.bytes.len() > MAX_SMALL {
            let reason = format!("hello{} has more than {MAX_SMALL} bytes", p.label);
            return Err(place.bad_record(&p.at, reason));
        }
        let hello: Hello = serde_json::from_slice(&p.bytes)
            .map_err(|e| place.bad_record(&p.at, format!("bad hello{}: {e}", p.label)))?;
        by_rank.entry(hello.rank).or_default().push(hello);
    }
    Ok(by_rank)
}

/// Ranks (other than 0 and this one) without a hello.
fn ranks_without_hello<P: MeetingPlace>(place: &mut P) -> Vec<u32> {
    let present = hellos(place).unwrap_or_default();
    let m = place.member();
    (1..m.world_size).filter(|r| *r != m.rank && !present.contains_key(r)).collect()
}

/// One step of rank 0's side: the session once every rank said hello.
fn lead_step<P: MeetingPlace>(place: &mut P) -> Result<Option<String>, CollectiveError> {
    if !place.member().cleared_hellos {
        // Hellos present before we start are from dead runs, or from live
        // ranks of this run that will post theirs again.
        place.delete_hellos()?;
        place.member_mut().cleared_hellos = true;
        if place.member().world_size > 1 {
            return Ok(None);
        }
    }
    let hellos = hellos(place)?;
    let m = place.member();
    let mut members = vec![m.nonce.clone()];
    for rank in 1..m.world_size {
        let Some(list) = hellos.get(&rank) else { return Ok(None) };
        let first = &list[0];
        if let Some(other) = list.iter().find(|h| h.nonce != first.nonce) {
            return Err(CollectiveError::Rendezvous {
                reason: format!(
                    "rank {rank} is claimed by two processes (pid {} on {} and pid {} on {}): two \
                     jobs share the job id {:?} (from {}){}; give each job its own RANKTUNE_JOB_ID",
                    first.pid,
                    first.host,
                    other.pid,
                    other.host,
                    m.job.value,
                    m.job.source,
                    place.on()
                ),
            });
        }
        members.push(first.nonce.clone());
    }
    for (rank, list) in &hellos {
        let h = &list[0];
        if *rank >= m.world_size || h.world_size != m.world_size {
            return Err(CollectiveError::Rendezvous {
                reason: format!(
                    "rank {rank} (pid {} on {}) says the job has {} ranks, rank 0 says {}; every \
                     rank must be started with the same world size",
                    h.pid, h.host, h.world_size, m.world_size
                ),
            });
        }
    }
    let welcome = Welcome {
        session: m.nonce.clone(),
        world_size: m.world_size,
        members,
        pid: m.pid,
        host: m.host.clone(),
    };
    let bytes = serde_json::to_vec(&welcome)
        .map_err(|e| CollectiveError::InvalidArgument(format!("cannot encode welcome: {e}")))?;
    place.put_welcome(&welcome.session, &bytes)?;
    Ok(Some(welcome.session))
}

/// One step of a non-zero rank's side: the session once rank 0 welcomed
/// this rank.
fn follow_step<P: MeetingPlace>(place: &mut P) -> Result<Option<String>, CollectiveError> {
    let m = place.member();
    let hello = Hello {
        rank: m.rank,
        world_size: m.world_size,
        nonce: m.nonce.clone(),
        pid: m.pid,
        host: m.host.clone(),
    };
    let bytes = serde_json::to_vec(&hello)
        .map_err(|e| CollectiveError::InvalidArgument(format!("cannot encode hello: {e}")))?;
    place.put_hello(&bytes)?;
    let Some(bytes) = place.get_welcome()? else { return Ok(None) };
    if bytes.len() > MAX_SMALL {
        let at = place.welcome_spot();
        return Err(place.bad_record(&at, format!("more than {MAX_SMALL} bytes")));
    }
    // A welcome that does not parse or does not list us is from another run.
    let Ok(welcome) = serde_json::from_slice::<Welcome>(&bytes) else { return Ok(None) };
    let m = place.member();
    if welcome.members.get(m.rank as usize) != Some(&m.nonce) {
        return Ok(None);
    }
    if welcome.world_size != m.world_size {
        return Err(CollectiveError::Rendezvous {
            reason: format!(
                "rank 0 (pid {} on {}) says the job has {} ranks, rank {} says {}; every rank \
                 must be started with the same world size",
                welcome.pid, welcome.host, welcome.world_size, m.rank, m.world_size
            ),
        });
    }
    if !is_session(&welcome.session) {
        let at = place.welcome_spot();
        return Err(place.bad_record(&at, "the session is not a hex nonce".into()));
    }
    place.delete_hello();
    Ok(Some(welcome.session))
}

/// Whether `s` is a session name a transport may build a file name or a key
/// from: 1 to 64 hex digits.
fn is_session(s: &str) -> bool {
    !s.is_empty() && s.len() <= 64 && s.chars().all(|c| c.is_ascii_hexdigit())
}

/// Parses a hello and a welcome the way the rendezvous does (for the fuzz
/// targets): whether each parsed.
#[cfg(feature = "fuzzing")]
pub(crate) fn parses(bytes: &[u8]) -> (bool, bool) {
    (
        serde_json::from_slice::<Hello>(bytes).is_ok(),
        serde_json::from_slice::<Welcome>(bytes).is_ok(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sessions_are_short_hex() {
        assert!(is_session("0123456789abcdefABCDEF"));
        for bad in ["", "../x", "s-1", "ab/cd", &"a".repeat(65)] {
            assert!(!is_session(bad), "{bad}");
        }
    }
}
