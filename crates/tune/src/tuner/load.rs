//! Loading: taking in a loaded cache, and registering an op on first use —
//! checking its stored entries and publishing the valid ones.
//!
//! Owns the loaded entries and the stale list. It never does I/O (the
//! [`Session`](crate::Session) reads the store) and never measures.

use super::hot::{Slot, SlotKind};
use super::stale::{env_problem, validate, StaleReason};
use super::stats::OpStats;
use super::{Inner, OpState, Tuner};
use crate::op::Op;
use crate::runner::TuneInputs;
use ranktune_cache::{CacheData, Entry, EntryKey, Section};
use std::collections::HashMap;

/// A stored entry taken in by [`Tuner::load`], checked when its op registers.
pub(super) struct LoadedEntry {
    pub(super) section: Section,
    pub(super) key: EntryKey,
    pub(super) entry: Entry,
    /// Set when the entry was measured in another environment.
    pub(super) env_problem: Option<StaleReason>,
}

impl Tuner {
    /// The sections this tuner reads from a cache: `shared` and its own.
    pub fn sections(&self) -> [Section; 2] {
        [Section::Shared, self.opts.section]
    }

    /// Takes in a loaded cache: entries of this tuner's section and the
    /// shared one. Entries are checked against an op when it is first used.
    /// Returns the number of entries taken in.
    pub fn load(&self, data: &CacheData) -> usize {
        let mut inner = self.lock();
        inner.blocklist.apply(data.blocklist.clone());
        let mut n = 0;
        for (section, key, entry) in data.iter() {
            if section != Section::Shared && section != self.opts.section {
                continue;
            }
            let env_problem = env_problem(data, entry, &self.opts.env_digest, &self.opts.identity);
            inner.loaded.entry(key.op.clone()).or_default().push(LoadedEntry {
                section,
                key: key.clone(),
                entry: entry.clone(),
                env_problem,
            });
            n += 1;
        }
        // Ops already registered must see the new entries: re-register them
        // on next use.
        self.unregister_ops(&mut inner);
        n
    }

    /// The loaded (valid or not yet checked) entry for `op`'s bucket, if any:
    /// for reports on cache hits.
    pub fn loaded_entry(&self, op: &str, runner: &str, bucket: &[Vec<u64>]) -> Option<Entry> {
        let inner = self.lock();
        let list = inner.loaded.get(op)?;
        list.iter()
            .filter(|le| {
                le.env_problem.is_none()
                    && le.key.runner == runner
                    && ranktune_cache::bucket_sizes(&le.key.bucket).as_deref() == Some(bucket)
            })
            .max_by_key(|le| (le.section != Section::Shared, le.entry.created_unix))
            .map(|le| le.entry.clone())
    }

    /// Entries found stale so far, with the reason.
    pub fn stale_entries(&self) -> Vec<(EntryKey, StaleReason)> {
        self.lock().stale.clone()
    }

    /// Registers an op (once): validates the loaded entries for it and
    /// publishes the valid ones. Returns the op's slot.
    pub(super) fn register<I: TuneInputs>(&self, inner: &mut Inner, op: &Op<I>) -> u32 {
        if let Some(&s) = inner.op_slots.get(&op.id()) {
            return s;
        }
        let op_slot = inner.ops.len() as u32;
        let collective = self.strategy_for(inner, op).is_collective();
        inner.op_slots.insert(op.id(), op_slot);
        inner.ops.push(OpState { name: op.name().to_string(), stats: OpStats::default() });
        let loaded = inner.loaded.remove(op.name()).unwrap_or_default();
        let env = (!collective).then_some(self.opts.env_digest.as_str());
        let blocks = Blocks { list: &inner.blocklist, env, retry: self.opts.retry_failed };
        let (slots, stale) = best_slots(op, &loaded, op_slot, collective, &blocks);
        if !stale.is_empty() {
            tracing::warn!(
                op = op.name(),
                "{} stored entries ignored as stale (first: {}); they will be re-tuned",
                stale.len(),
                stale[0].1
            );
        }
        inner.stale.extend(stale);
        inner.loaded.insert(op.name().to_string(), loaded);
        self.publish(inner, slots);
        op_slot
    }
}

/// The blocklist as registering an op uses it.
struct Blocks<'a> {
    list: &'a ranktune_cache::Blocklist,
    /// The environment whose records apply (`None`: every one).
    env: Option<&'a str>,
    /// `retry_failed`.
    retry: bool,
}

/// Stored entries found stale, with the reason.
type StaleList = Vec<(EntryKey, StaleReason)>;

/// The slots to publish for `op`'s valid loaded entries (one per bucket),
/// and the stale ones with the reason.
///
/// Rank section wins over shared (shared wins for ops tuned together, whose
/// entries live there); newer wins over older.
fn best_slots<I: TuneInputs>(
    op: &Op<I>,
    loaded: &[LoadedEntry],
    op_slot: u32,
    collective: bool,
    blocks: &Blocks<'_>,
) -> (Vec<(u64, Slot)>, StaleList) {
    let mut best: HashMap<u64, (Slot, (bool, u64))> = HashMap::new();
    let mut stale = Vec::new();
    let kind = if op.validates() { SlotKind::Validate } else { SlotKind::Hit };
    for le in loaded {
        let checked = validate(op, le).and_then(|(key, runner, tactic)| {
            let shapes = key.to_nested();
            let cand = (runner as usize, tactic as usize);
            if let Some((_, rec)) =
                super::blocked::blocking(blocks.list, op, cand, &shapes, blocks.env)
            {
                return Err(StaleReason::Blocked(format!("{}: {}", rec.kind, rec.message)));
            }
            // Retrying: a bucket where a known-bad tactic was skipped is
            // measured again, with it.
            if blocks.retry && super::blocked::any_blocked(blocks.list, op, &shapes, blocks.env) {
                return Err(StaleReason::Blocked(
                    "a known-bad tactic was skipped here; retrying it (retry_failed)".into(),
                ));
            }
            Ok((key, runner, tactic))
        });
        match checked {
            Ok((key, runner, tactic)) => {
                let h = key.hash_with(op.id());
                let preferred = (le.section == Section::Shared) == collective;
                let prio = (preferred, le.entry.created_unix);
                let slot = Slot {
                    op_id: op.id(),
                    key,
                    runner,
                    tactic,
                    op_slot,
                    kind,
                    confirm: collective,
                };
                match best.get(&h) {
                    Some((_, p)) if *p > prio => {}
                    _ => {
                        best.insert(h, (slot, prio));
                    }
                }
            }
            Err(reason) => stale.push((le.key.clone(), reason)),
        }
    }
    let slots = best.into_iter().map(|(h, (s, _))| (h, s)).collect();
    (slots, stale)
}
