//! The protocol every multi-rank implementation shares, over a pluggable transport.
//!
//! Each call on a rank gets the next sequence number. A call posts one message
//! (its kind, tag, root and payload) for that sequence number, then waits until
//! the message of every other rank for the same sequence number has arrived,
//! checking that each one describes the same call. So every collective is
//! synchronizing, a divergence becomes a [`CollectiveError::Mismatch`] instead
//! of a hang, and every wait ends at its deadline.
//!
//! Cleanup rule: a rank that completes call `n` has seen every rank's message
//! `n`, and a rank posts `n` only after it has finished with `n - 1`; so after
//! completing `n` no rank will read anything older than `n`, and the rank
//! deletes its own older messages. Only the last call's messages outlive the job.
//!
//! This module owns the protocol only; it never touches files or threads
//! directly (that is the [`Transport`]'s job).

use std::time::{Duration, Instant};

use super::error::CollectiveError;
use super::Collective;

/// Which collective a message belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum OpKind {
    AllGather,
    Broadcast,
    Barrier,
}

/// One rank's message for one call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Envelope {
    pub kind: OpKind,
    pub tag: String,
    /// The root of a broadcast.
    pub root: Option<u32>,
    pub payload: Vec<u8>,
}

impl Envelope {
    /// "all_gather", "broadcast from rank 2", "barrier".
    pub fn kind_text(&self) -> String {
        match (self.kind, self.root) {
            (OpKind::AllGather, _) => "all_gather".into(),
            (OpKind::Broadcast, Some(r)) => format!("broadcast from rank {r}"),
            (OpKind::Broadcast, None) => "broadcast".into(),
            (OpKind::Barrier, _) => "barrier".into(),
        }
    }

    /// Kind and tag, for messages: `all_gather "gemm hit?"`.
    pub fn describe(&self) -> String {
        format!("{} {:?}", self.kind_text(), self.tag)
    }

    /// Whether `other` belongs to the same call (payload aside).
    pub fn same_call(&self, other: &Envelope) -> bool {
        self.kind == other.kind && self.tag == other.tag && self.root == other.root
    }
}

/// Where messages travel. Implementations: the shared directory, in-process memory.
pub(crate) trait Transport: Send {
    /// Makes sure this rank has joined the job run's group, waiting at most until `deadline`.
    /// `what` describes the call that triggered it, for timeout messages.
    fn join(&mut self, env: &Envelope, seq: u64, deadline: Instant) -> Result<(), CollectiveError>;
    /// Publishes this rank's message for `seq` (atomically: readers see all of it or nothing).
    fn post(&mut self, seq: u64, env: &Envelope) -> Result<(), CollectiveError>;
    /// Rank `from`'s message for `seq`, if it has arrived.
    fn fetch(&mut self, seq: u64, from: u32) -> Result<Option<Envelope>, CollectiveError>;
    /// Records that this rank gave up waiting on `seq`.
    fn abandon(&mut self, seq: u64);
    /// Ranks (other than this one) that gave up waiting on `seq`.
    fn abandoned_by(&mut self, seq: u64) -> Result<Vec<u32>, CollectiveError>;
    /// Deletes this rank's messages older than `seq` (every rank is done with them).
    fn cleanup_before(&mut self, seq: u64);
    /// Waits a little before polling again (`attempt` counts from 0), never past `deadline`.
    fn pause(&mut self, attempt: u32, deadline: Instant);
    /// Short description for logs and reports.
    fn describe(&self) -> String;
}

/// Polling backoff: 200 µs doubling up to 5 ms.
pub(crate) fn backoff(attempt: u32) -> Duration {
    Duration::from_micros(200u64 << attempt.min(5)).min(Duration::from_millis(5))
}

/// `now + timeout`, saturating far in the future instead of overflowing.
pub(crate) fn deadline_after(start: Instant, timeout: Duration) -> Instant {
    start.checked_add(timeout).unwrap_or_else(|| start + Duration::from_secs(100 * 365 * 24 * 3600))
}

/// The shared protocol over a transport.
pub(crate) struct Engine<T: Transport> {
    rank: u32,
    world_size: u32,
    next_seq: u64,
    transport: T,
}

impl<T: Transport> Engine<T> {
    pub fn new(rank: u32, world_size: u32, transport: T) -> Self {
        Engine { rank, world_size, next_seq: 0, transport }
    }

    /// The transport, for implementation-specific queries.
    pub fn transport(&self) -> &T {
        &self.transport
    }

    /// The transport, mutably.
    pub fn transport_mut(&mut self) -> &mut T {
        &mut self.transport
    }

    /// Posts `env` for the next sequence number and returns every rank's message, in rank order.
    fn exchange(
        &mut self,
        env: Envelope,
        timeout: Duration,
    ) -> Result<Vec<Envelope>, CollectiveError> {
        let start = Instant::now();
        let deadline = deadline_after(start, timeout);
        let seq = self.next_seq;
        // Every call consumes a sequence number, whatever its outcome, so the
        // ranks stay aligned after an error.
        self.next_seq += 1;
        // One span per call, named and numbered like PyTorch's collectives
        // (`Seq`), so `trace summary` matches ranktune's own collectives
        // across ranks and says who made the others wait (docs/trace.md).
        let _span = call_span(&env, seq).entered();
        self.transport.join(&env, seq, deadline)?;
        self.transport.post(seq, &env)?;
        let world = self.world_size as usize;
        let mut slots: Vec<Option<Envelope>> = vec![None; world];
        let me = self.rank as usize;
        let mut attempt = 0u32;
        loop {
            for (from, slot) in slots.iter_mut().enumerate() {
                if slot.is_some() || from == me {
                    continue;
                }
                if let Some(theirs) = self.transport.fetch(seq, from as u32)? {
                    if !env.same_call(&theirs) {
                        return Err(CollectiveError::Mismatch {
                            seq,
                            rank: self.rank,
                            mine: env.describe(),
                            peer: from as u32,
                            theirs: theirs.describe(),
                        });
                    }
                    *slot = Some(theirs);
                }
            }
            let missing: Vec<u32> = slots
                .iter()
                .enumerate()
                .filter(|(i, s)| s.is_none() && *i != me)
                .map(|(i, _)| i as u32)
                .collect();
            if missing.is_empty() {
                let by = self.transport.abandoned_by(seq)?;
                if !by.is_empty() {
                    return Err(CollectiveError::Abandoned {
                        op: env.tag.clone(),
                        kind: env.kind_text(),
                        seq,
                        by,
                    });
                }
                self.transport.cleanup_before(seq);
                slots[me] = Some(env);
                return Ok(slots.into_iter().flatten().collect());
            }
            if Instant::now() >= deadline {
                self.transport.abandon(seq);
                // The caller reports the timeout it gets back, with what it
                // does next (a strategy falls back); here it is detail.
                tracing::debug!(
                    "{} timed out waiting for rank(s) {:?} ({})",
                    env.describe(),
                    missing,
                    self.transport.describe()
                );
                return Err(CollectiveError::Timeout {
                    op: env.tag.clone(),
                    kind: env.kind_text(),
                    seq,
                    missing,
                    waited: start.elapsed(),
                });
            }
            self.transport.pause(attempt, deadline);
            attempt = attempt.saturating_add(1);
        }
    }
}

impl<T: Transport> Collective for Engine<T> {
    fn rank(&self) -> u32 {
        self.rank
    }

    fn world_size(&self) -> u32 {
        self.world_size
    }

    fn all_gather(
        &mut self,
        tag: &str,
        data: &[u8],
        timeout: Duration,
    ) -> Result<Vec<Vec<u8>>, CollectiveError> {
        let env =
            Envelope { kind: OpKind::AllGather, tag: tag.into(), root: None, payload: data.into() };
        Ok(self.exchange(env, timeout)?.into_iter().map(|e| e.payload).collect())
    }

    fn broadcast(
        &mut self,
        tag: &str,
        root: u32,
        data: Option<&[u8]>,
        timeout: Duration,
    ) -> Result<Vec<u8>, CollectiveError> {
        let payload = check_broadcast(self.rank, self.world_size, root, data)?;
        let env = Envelope { kind: OpKind::Broadcast, tag: tag.into(), root: Some(root), payload };
        let mut all = self.exchange(env, timeout)?;
        Ok(std::mem::take(&mut all[root as usize].payload))
    }

    fn barrier(&mut self, tag: &str, timeout: Duration) -> Result<(), CollectiveError> {
        let env =
            Envelope { kind: OpKind::Barrier, tag: tag.into(), root: None, payload: Vec::new() };
        self.exchange(env, timeout).map(|_| ())
    }

    fn describe(&self) -> String {
        format!("rank {} of {} via {}", self.rank, self.world_size, self.transport.describe())
    }
}

/// The trace span of one call: `ranktune::all_gather`, `ranktune::broadcast`
/// or `ranktune::barrier`, with its sequence number as `Seq` and its tag. A
/// span costs one check when no trace session records (see
/// `ranktune_trace::layer`).
fn call_span(env: &Envelope, seq: u64) -> tracing::Span {
    let tag = env.tag.as_str();
    match env.kind {
        OpKind::AllGather => tracing::info_span!(
            target: "ranktune::collective", "ranktune::all_gather", Seq = seq, tag),
        OpKind::Broadcast => tracing::info_span!(
            target: "ranktune::collective", "ranktune::broadcast", Seq = seq, tag, root = env.root),
        OpKind::Barrier => tracing::info_span!(
            target: "ranktune::collective", "ranktune::barrier", Seq = seq, tag),
    }
}

/// Checks a broadcast's arguments; returns this rank's payload (the data on
/// the root, nothing elsewhere: non-roots only announce that they arrived).
pub(crate) fn check_broadcast(
    rank: u32,
    world_size: u32,
    root: u32,
    data: Option<&[u8]>,
) -> Result<Vec<u8>, CollectiveError> {
    if root >= world_size {
        return Err(CollectiveError::InvalidArgument(format!(
            "broadcast root {root} is not a rank of this {world_size}-rank job"
        )));
    }
    if rank != root {
        return Ok(Vec::new());
    }
    data.map(<[u8]>::to_vec).ok_or_else(|| {
        CollectiveError::InvalidArgument(format!(
            "rank {rank} is the broadcast root but passed no data; the root must pass Some(bytes)"
        ))
    })
}
