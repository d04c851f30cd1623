//! In-process collectives: ranks are threads of one process.
//!
//! For fast unit tests of code that uses a [`Collective`](crate::Collective)
//! (the tuning strategies), with exactly the protocol of the store-based
//! implementation: sequence numbers, mismatch detection, timeouts,
//! abandonment. Messages live in memory shared by the group's handles. This
//! module never touches files.

use std::collections::BTreeMap;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Instant;

use super::engine::{backoff, Engine, Envelope, Transport};
use super::error::CollectiveError;

/// One call's messages.
#[derive(Default)]
struct Slot {
    messages: BTreeMap<u32, Envelope>,
    abandoned: Vec<u32>,
}

/// State shared by a group's handles.
#[derive(Default)]
struct Shared {
    slots: Mutex<BTreeMap<u64, Slot>>,
    changed: Condvar,
}

impl Shared {
    /// The lock; a thread that panicked elsewhere never leaves the map half-updated,
    /// so a poisoned lock is still consistent.
    fn lock(&self) -> MutexGuard<'_, BTreeMap<u64, Slot>> {
        self.slots.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// Transport over shared memory.
pub(crate) struct LocalTransport {
    rank: u32,
    world_size: u32,
    shared: Arc<Shared>,
}

impl Transport for LocalTransport {
    fn join(&mut self, _: &Envelope, _: u64, _: Instant) -> Result<(), CollectiveError> {
        Ok(())
    }

    fn post(&mut self, seq: u64, env: &Envelope) -> Result<(), CollectiveError> {
        self.shared.lock().entry(seq).or_default().messages.insert(self.rank, env.clone());
        self.shared.changed.notify_all();
        Ok(())
    }

    fn fetch(&mut self, seq: u64, from: u32) -> Result<Option<Envelope>, CollectiveError> {
        Ok(self.shared.lock().get(&seq).and_then(|s| s.messages.get(&from)).cloned())
    }

    fn abandon(&mut self, seq: u64) {
        self.shared.lock().entry(seq).or_default().abandoned.push(self.rank);
        self.shared.changed.notify_all();
    }

    fn abandoned_by(&mut self, seq: u64) -> Result<Vec<u32>, CollectiveError> {
        let slots = self.shared.lock();
        let mut by: Vec<u32> = slots
            .get(&seq)
            .map(|s| s.abandoned.iter().copied().filter(|r| *r != self.rank).collect())
            .unwrap_or_default();
        by.sort_unstable();
        Ok(by)
    }

    fn cleanup_before(&mut self, seq: u64) {
        // Every rank is done with older calls (see the engine's cleanup rule),
        // so any rank may drop them for all.
        let mut slots = self.shared.lock();
        let keep = slots.split_off(&seq);
        *slots = keep;
    }

    fn pause(&mut self, attempt: u32, deadline: Instant) {
        let wait = backoff(attempt).min(deadline.saturating_duration_since(Instant::now()));
        let slots = self.shared.lock();
        // A lost wake-up costs at most one backoff interval.
        let _unused = self.shared.changed.wait_timeout(slots, wait);
    }

    fn describe(&self) -> String {
        format!("in-process group of {}", self.world_size)
    }
}

/// A rank of an in-process group; create the whole group with [`LocalCollective::group`].
///
/// The ranks are threads of one process, for fast tests of code that uses a
/// [`Collective`](crate::Collective): the protocol is exactly the store's
/// (sequence numbers, mismatch detection, timeouts, abandonment), only in
/// memory.
///
/// ```
/// use std::time::Duration;
/// use ranktune_collective::{Collective, LocalCollective};
///
/// let handles = LocalCollective::group(3).unwrap();
/// let threads: Vec<_> = handles
///     .into_iter()
///     .map(|mut c| {
///         std::thread::spawn(move || {
///             let me = [c.rank() as u8];
///             c.all_gather("ranks", &me, Duration::from_secs(10)).unwrap()
///         })
///     })
///     .collect();
/// for t in threads {
///     assert_eq!(t.join().unwrap(), vec![vec![0], vec![1], vec![2]]);
/// }
/// ```
pub struct LocalCollective(Engine<LocalTransport>);

impl LocalCollective {
    /// Creates the handles of a `world_size`-rank group, in rank order; give each to its own thread.
    pub fn group(world_size: u32) -> Result<Vec<LocalCollective>, CollectiveError> {
        if world_size == 0 {
            return Err(CollectiveError::InvalidArgument(
                "world size 0: a group has at least one rank".into(),
            ));
        }
        let shared = Arc::new(Shared::default());
        Ok((0..world_size)
            .map(|rank| {
                let transport = LocalTransport { rank, world_size, shared: Arc::clone(&shared) };
                LocalCollective(Engine::new(rank, world_size, transport))
            })
            .collect())
    }
}

super::delegate_collective!(LocalCollective);

#[cfg(test)]
impl Engine<LocalTransport> {
    fn transport_shared(&self) -> Arc<Shared> {
        Arc::clone(&self.transport().shared)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Collective;
    use std::sync::Barrier;
    use std::thread;
    use std::time::Duration;

    const LONG: Duration = Duration::from_secs(30);

    /// Runs `f` on every rank of a fresh group, one thread each; results in rank order.
    fn run<R: Send + 'static>(
        world: u32,
        f: impl Fn(&mut LocalCollective) -> R + Send + Sync + 'static,
    ) -> Vec<R> {
        crate::on_threads(LocalCollective::group(world).unwrap(), f)
    }

    #[test]
    fn rounds_give_every_rank_the_same_results() {
        let results = run(4, |c| {
            let r = c.rank();
            let mut seen = Vec::new();
            for round in 0..25u32 {
                let data = format!("rank {r} round {round}").into_bytes();
                seen.push(c.all_gather(&format!("gather {round}"), &data, LONG).unwrap());
                let root = round % 4;
                let mine = (r == root).then(|| format!("from {root} in {round}").into_bytes());
                seen.push(vec![c.broadcast("bcast", root, mine.as_deref(), LONG).unwrap()]);
                c.barrier("sync", LONG).unwrap();
            }
            seen
        });
        for other in &results[1..] {
            assert_eq!(other, &results[0]);
        }
        assert_eq!(results[0][0][2], b"rank 2 round 0");
        assert_eq!(results[0][7][0], b"from 3 in 3");
    }

    #[test]
    fn cleanup_keeps_only_the_last_call() {
        let handles = LocalCollective::group(2).unwrap();
        let shared = Arc::clone(&handles[0].0.transport_shared());
        let threads: Vec<_> = handles
            .into_iter()
            .map(|mut c| {
                thread::spawn(move || {
                    for i in 0..10 {
                        c.barrier(&format!("b{i}"), LONG).unwrap();
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let left: Vec<u64> = shared.lock().keys().copied().collect();
        assert!(left.len() <= 2 && left.contains(&9), "{left:?}");
    }

    /// Where a timeout is the expected outcome: the ranks that do come are
    /// released together by a `std` barrier just before the call, and this
    /// covers one of them stalling on a loaded machine after it.
    const SHORT: Duration = Duration::from_secs(2);

    #[test]
    fn a_missing_rank_times_out_naming_it() {
        let present = Arc::new(Barrier::new(2));
        let results = run(3, move |c| {
            if c.rank() == 2 {
                return None; // never calls
            }
            present.wait();
            Some(c.barrier("step 1", SHORT).unwrap_err())
        });
        for err in results.into_iter().flatten() {
            match &err {
                CollectiveError::Timeout { op, missing, kind, .. } => {
                    assert_eq!(
                        (op.as_str(), kind.as_str(), missing.as_slice()),
                        ("step 1", "barrier", &[2][..])
                    );
                }
                other => panic!("expected a timeout, got {other}"),
            }
            assert!(err.to_string().contains("rank(s) [2] did not arrive"), "{err}");
        }
    }

    #[test]
    fn mismatched_tags_and_kinds_are_errors_and_the_group_recovers() {
        let results = run(3, |c| {
            let first = if c.rank() == 1 {
                c.all_gather("bucket 8", b"x", LONG).map(|_| ())
            } else {
                c.all_gather("bucket 16", b"x", LONG).map(|_| ())
            };
            let second = if c.rank() == 0 {
                c.barrier("done", LONG)
            } else {
                c.all_gather("done", b"", LONG).map(|_| ())
            };
            // Sequence numbers stay aligned: the next matching call works.
            let third = c.all_gather("again", &[c.rank() as u8], LONG);
            (first, second, third)
        });
        for (rank, (first, second, third)) in results.into_iter().enumerate() {
            let err = first.unwrap_err();
            assert!(matches!(err, CollectiveError::Mismatch { seq: 0, .. }), "{err}");
            let text = err.to_string();
            assert!(text.contains("bucket 8") && text.contains("bucket 16"), "{text}");
            if rank != 1 {
                assert_eq!(err.ranks(), vec![1]);
            }
            let err = second.unwrap_err();
            assert!(matches!(err, CollectiveError::Mismatch { seq: 1, .. }), "{err}");
            assert!(err.to_string().contains("barrier"), "{err}");
            assert_eq!(third.unwrap(), vec![vec![0], vec![1], vec![2]]);
        }
    }

    #[test]
    fn a_late_rank_sees_abandoned_and_the_next_call_works() {
        // Ranks 0 and 2 start the call together (`present`); rank 1 comes
        // only once both have given up on it (`gave_up`): late for sure,
        // however the threads are scheduled.
        let present = Arc::new(Barrier::new(2));
        let gave_up = Arc::new(Barrier::new(3));
        let results = run(3, move |c| {
            let first = if c.rank() == 1 {
                gave_up.wait();
                c.barrier("slow", SHORT)
            } else {
                present.wait();
                let timed_out = c.barrier("slow", SHORT);
                gave_up.wait();
                timed_out
            };
            let second = c.all_gather("after", &[c.rank() as u8], LONG);
            (first, second)
        });
        for (rank, (first, second)) in results.into_iter().enumerate() {
            let err = first.unwrap_err();
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
            }
            assert_eq!(second.unwrap(), vec![vec![0], vec![1], vec![2]]);
        }
    }

    #[test]
    fn bad_broadcast_arguments_are_errors() {
        let mut group = LocalCollective::group(2).unwrap();
        let err = group[0].broadcast("x", 2, Some(b"a"), LONG).unwrap_err();
        assert!(err.to_string().contains("root 2 is not a rank"), "{err}");
        let err = group[1].broadcast("x", 1, None, LONG).unwrap_err();
        assert!(err.to_string().contains("passed no data"), "{err}");
        assert!(LocalCollective::group(0).is_err());
    }
}
