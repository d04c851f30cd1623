//! Errors of the collective layer.
//!
//! Every error names what a user needs to act on: the collective (its kind and
//! the caller's tag), its sequence number, and the ranks involved.

use std::path::PathBuf;
use std::time::Duration;

/// Why a collective operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CollectiveError {
    /// Not every rank arrived before the timeout.
    #[error(
        "{kind} {op:?} (collective #{seq}) timed out after {waited:.1?}: rank(s) {missing:?} did not \
         arrive; they died, are still busy, or skipped this call (check their logs)"
    )]
    Timeout {
        /// The caller's tag, e.g. `gemm [[64,512],[512,512]] hit?`.
        op: String,
        /// Which collective: `all_gather`, `broadcast from rank 0`, `barrier`, `joining the job`.
        kind: String,
        /// Sequence number of the call on this rank (counts from 0).
        seq: u64,
        /// Ranks that did not arrive, in increasing order.
        missing: Vec<u32>,
        /// How long this rank waited.
        waited: Duration,
    },
    /// Two ranks made different calls at the same sequence number: the
    /// divergence that deadlocks a real collective, caught instead.
    #[error(
        "collective #{seq} diverged: rank {rank} called {mine} but rank {peer} called {theirs}; every \
         rank must make the same collective calls in the same order (e.g. agree on cache hit/miss first)"
    )]
    Mismatch {
        /// Sequence number of the call.
        seq: u64,
        /// This rank.
        rank: u32,
        /// What this rank called (kind and tag).
        mine: String,
        /// The rank that called something else.
        peer: u32,
        /// What that rank called.
        theirs: String,
    },
    /// Every rank arrived, but some had already given up waiting (they timed
    /// out); this rank fails too so that all ranks see the same outcome.
    #[error(
        "{kind} {op:?} (collective #{seq}) was abandoned by rank(s) {by:?}, which timed out before \
         this rank arrived; raise the timeout if this rank is legitimately slower"
    )]
    Abandoned {
        /// The caller's tag.
        op: String,
        /// Which collective.
        kind: String,
        /// Sequence number of the call.
        seq: u64,
        /// Ranks that gave up.
        by: Vec<u32>,
    },
    /// An I/O operation on the shared directory failed.
    #[error("{action} {path}")]
    Io {
        /// What was being done ("writing", "reading", …).
        action: &'static str,
        /// The file or directory involved.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// A message file in the shared directory is not one ranktune wrote.
    #[error("{path} is not a ranktune collective message ({reason}); remove it, and make sure no other program writes there")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// The Redis server could not be reached, or a command on it failed or
    /// stalled. The server is named by its URL with the password hidden.
    #[error(
        "Redis collective on {server}: {action} failed: {reason}; check the URL and password, and \
         that the server runs and every rank can reach it (the URL comes from RANKTUNE_COLLECTIVE or \
         the cache location)"
    )]
    Redis {
        /// The server's URL, password redacted.
        server: String,
        /// What was being done ("connecting", "reading messages", …).
        action: String,
        /// The client's error.
        reason: String,
    },
    /// A value read from the Redis server is not what ranktune wrote there.
    #[error(
        "Redis key {key:?} on {server} does not hold a ranktune collective message ({reason}); \
         delete the key, and make sure no other program writes under its prefix"
    )]
    RedisCorrupt {
        /// The server's URL, password redacted.
        server: String,
        /// The key.
        key: String,
        /// What is wrong with its value.
        reason: String,
    },
    /// An operation on a key-value store the caller gave
    /// ([`KvCollective`](crate::KvCollective)) failed.
    #[error(
        "collective on the {place}: {action} failed: {reason}; check that every rank still runs \
         and reaches the store"
    )]
    Store {
        /// How the store names itself.
        place: String,
        /// What was being done ("posting a message", …).
        action: String,
        /// The store's error.
        reason: String,
    },
    /// A value read from a key-value store is not what ranktune wrote there.
    #[error(
        "key {key:?} in the {place} does not hold a ranktune collective message ({reason}); make \
         sure no other program writes under ranktune/collective/"
    )]
    StoreCorrupt {
        /// How the store names itself.
        place: String,
        /// The key.
        key: String,
        /// What is wrong with its value.
        reason: String,
    },
    /// The ranks could not form one group (two processes claim the same rank,
    /// or ranks disagree on the world size).
    #[error("cannot form the job's rank group: {reason}")]
    Rendezvous {
        /// What went wrong, naming the processes involved and the fix.
        reason: String,
    },
    /// More than one rank, and nothing tells this job run apart from others
    /// sharing the directory.
    #[error(
        "world size is {world_size} but no job id is set, so this job's messages could mix with another \
         job's in {place}; set RANKTUNE_JOB_ID to the same unique value on every rank (e.g. \
         RANKTUNE_JOB_ID=$(date +%s%N)), or launch with torchrun, mpirun, srun or `ranktune tune --ranks N`"
    )]
    NoJobId {
        /// World size of the job.
        world_size: u32,
        /// Where the ranks meet: the shared directory, or the Redis server's
        /// URL (password redacted), for people.
        place: String,
    },
    /// `RANKTUNE_COLLECTIVE` names something this build cannot provide.
    #[error("RANKTUNE_COLLECTIVE={value:?}: {reason}")]
    Unsupported {
        /// The requested implementation.
        value: String,
        /// Why it cannot be used, and what to use instead.
        reason: String,
    },
    /// A rank's bytes do not decode as the value the caller expects.
    #[error("rank {rank}'s data for {op:?} does not decode ({reason}); do all ranks run the same ranktune version and the same code?")]
    Decode {
        /// The caller's tag.
        op: String,
        /// The rank whose data did not decode.
        rank: u32,
        /// The decoder's message.
        reason: String,
    },
    /// The caller passed arguments that cannot work (root out of range, root without data).
    #[error("invalid collective call: {0}")]
    InvalidArgument(String),
}

impl CollectiveError {
    /// The ranks this error blames: missing ranks of a timeout, the peer of a
    /// mismatch, the ranks that abandoned a call. Empty for other errors.
    pub fn ranks(&self) -> Vec<u32> {
        match self {
            CollectiveError::Timeout { missing, .. } => missing.clone(),
            CollectiveError::Mismatch { peer, .. } => vec![*peer],
            CollectiveError::Abandoned { by, .. } => by.clone(),
            CollectiveError::Decode { rank, .. } => vec![*rank],
            _ => Vec::new(),
        }
    }
}
