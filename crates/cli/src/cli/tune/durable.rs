//! Durable progress in `ranktune tune`: `--save-every` (and
//! `RANKTUNE_SAVE_EVERY`), and the checkpoint after every bucket, so a rank
//! killed outright (SIGKILL, the OOM killer, a failed node) loses only the
//! bucket it was measuring and those decided since its last save (none
//! with `--save-every 0`), and the next run tunes only what is missing.
//!
//! Owns reading the policy and reporting checkpoints: with `-v`, one line
//! per durable save naming the buckets it made durable ([`durable_line`]);
//! one warning when saving starts to fail (the decisions stay pending for
//! the next try), one line when it works again. When to save, and the save
//! itself, are `ranktune_tune::Session`'s; this module never decides either.

use super::TuneArgs;
use ranktune_cache::{CacheLocation, FileStore, Store};
use ranktune_core::error_chain::Chain;
use ranktune_tune::{Checkpoint, SaveEvery, Session};
use std::time::Duration;

/// The flag, as errors name it.
pub(super) const FLAG: &str = "--save-every";

/// The longest a checkpoint waits for a cache file's lock (less when
/// `RANKTUNE_LOCK_TIMEOUT` says less). Under a collective strategy the
/// other ranks may already wait for this one at the next exchange: a
/// checkpoint that cannot save soon fails, keeps its decisions pending and
/// is tried again later, instead of waiting out the full lock timeout
/// (300 s by default) while the others' strategy timeout runs.
pub(super) const CHECKPOINT_LOCK_WAIT: Duration = Duration::from_secs(10);

/// The store checkpoints save through: a cache file opened again with a
/// lock wait of at most [`CHECKPOINT_LOCK_WAIT`]; `None` for a Redis cache,
/// whose saves are bounded by the server's own timeouts.
pub(super) fn checkpoint_store(cache: &CacheLocation) -> anyhow::Result<Option<FileStore>> {
    match cache {
        CacheLocation::File(path) => {
            let full = ranktune_cache::lock_timeout_from_env()?;
            Ok(Some(FileStore::from_env(path)?.with_lock_timeout(full.min(CHECKPOINT_LOCK_WAIT))))
        }
        CacheLocation::Redis(_) => Ok(None),
    }
}

/// `session` with its checkpoints saved through `store` when there is one.
pub(super) fn with_checkpoints<'a>(
    session: Session<'a>,
    store: Option<&'a FileStore>,
) -> Session<'a> {
    match store {
        Some(s) => session.checkpoint_store(s as &dyn Store),
        None => session,
    }
}

/// The save policy `args` and the environment ask for: `--save-every`,
/// else `RANKTUNE_SAVE_EVERY`, else `auto`. A bad value is an error naming
/// the flag or the variable and what to give.
pub(super) fn policy(args: &TuneArgs) -> anyhow::Result<SaveEvery> {
    Ok(SaveEvery::resolve(args.save_every.as_deref(), FLAG)?)
}

/// One rank's checkpoints over a session: call [`Durable::after_bucket`]
/// after each bucket.
pub(super) struct Durable<'s, 'a> {
    session: &'s mut Session<'a>,
    rank: u32,
    /// The cache, as messages name it.
    cache: String,
    /// The last checkpoint failed (its warning was given).
    failing: bool,
}

impl<'s, 'a> Durable<'s, 'a> {
    /// Checkpoints of `session`, rank `rank`, saving into `cache` (as shown).
    pub(super) fn new(session: &'s mut Session<'a>, rank: u32, cache: String) -> Self {
        Durable { session, rank, cache, failing: false }
    }

    /// Saves the decisions made so far if the policy says a save is due,
    /// and says what it made durable (`-v`). A failed save warns once (the
    /// decisions stay pending for a later checkpoint or the final save) and
    /// never stops the tune.
    pub(super) fn after_bucket(&mut self) {
        let rank = self.rank;
        match self.session.checkpoint() {
            Ok(None) => {}
            Ok(Some(c)) => {
                if std::mem::take(&mut self.failing) {
                    tracing::info!("rank {rank}: saving progress to {} works again", self.cache);
                }
                tracing::info!("{}", durable_line(rank, &self.cache, &c));
            }
            Err(e) if self.failing => {
                tracing::debug!("rank {rank}: saving progress still fails: {}", Chain(&e));
            }
            Err(e) => {
                self.failing = true;
                tracing::warn!(
                    "rank {rank}: could not save progress to {}: {}; the buckets decided since \
                     the last save stay pending and are saved by a later checkpoint or at the end",
                    self.cache,
                    Chain(&e)
                );
            }
        }
    }
}

/// The log line of one durable save, one line that scripts can read:
/// `rank R: durable: N bucket(s) saved to CACHE in T ms: op:BUCKET op:BUCKET …`
/// (a bucket as `cache show` writes it, e.g. `gemm:1x64,1x64`).
pub(super) fn durable_line(rank: u32, cache: &str, c: &Checkpoint) -> String {
    let mut line = format!(
        "rank {rank}: durable: {} bucket(s) saved to {cache} in {:.1} ms:",
        c.saved.len(),
        c.took.as_secs_f64() * 1e3
    );
    for (_, key) in &c.saved {
        line.push(' ');
        line.push_str(&key.op);
        line.push(':');
        line.push_str(&ranktune_cache::bucket_label(&key.bucket));
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;
    use ranktune_cache::{sizes_bucket, EntryKey, Section};
    use std::time::Duration;

    #[test]
    fn the_durable_line_names_each_bucket_in_one_parseable_line() {
        let key = |op: &str, rows: u64| EntryKey {
            op: op.into(),
            runner: "r".into(),
            fingerprint: "f".into(),
            bucket: sizes_bucket(&[vec![rows, 64], vec![rows, 64]]),
        };
        let c = Checkpoint {
            saved: vec![(Section::Shared, key("gemm", 1)), (Section::Rank(2), key("softmax", 8))],
            took: Duration::from_micros(21_400),
            ..Checkpoint::default()
        };
        assert_eq!(
            durable_line(2, "dir/c.json", &c),
            "rank 2: durable: 2 bucket(s) saved to dir/c.json in 21.4 ms: gemm:1x64,1x64 \
             softmax:8x64,8x64"
        );
    }
}
