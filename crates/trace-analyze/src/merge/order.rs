//! The order in which the merge writes chunks, and who produces them: on
//! the calling thread ([`on_this_thread`]) or on worker threads that stream
//! their chunks to the calling thread, the writer ([`on_workers`]). Both
//! walk the same order (see [`Rounds`]), so the bytes are the same for any
//! number of workers.
//!
//! Owns the workers, their queues and the hand-over of chunks. It never
//! converts an event itself (that is the format's [`RankOutput`]) and
//! writes only through the merge's [`Sink`].

use super::output::{RankDone, RankOutput};
use super::{RankedInput, Sink, FLUSH_AT};
use crate::AnalyzeError;
use std::ops::Range;

/// Chunks a worker may have queued ahead of the writer.
const QUEUE: usize = 4;

/// A chunk buffer: room for a chunk and the event that ends it.
fn chunk_buffer() -> Vec<u8> {
    Vec::with_capacity(FLUSH_AT + (64 << 10))
}

/// What each rank contributed, by input index (`None` until it ended).
type Done = Vec<Option<RankDone>>;

/// The groups of [`super::GROUP`] consecutive inputs.
fn groups(inputs: usize) -> impl Iterator<Item = Range<usize>> + Clone {
    (0..inputs).step_by(super::GROUP).map(move |g| g..(g + super::GROUP).min(inputs))
}

/// The order in which chunks are written: groups of [`super::GROUP`]
/// consecutive ranks, one after the other; within a group, round after
/// round, the next chunk of every rank of the group that has not ended, in
/// rank order. `Rounds` walks it for any subset of a group's ranks (a
/// worker's own).
struct Rounds<R> {
    /// Ranks still going, in order, each with its conversion once opened.
    live: Vec<(usize, Option<R>)>,
    at: usize,
}

impl<R: RankOutput> Rounds<R> {
    fn new(ranks: impl Iterator<Item = usize>) -> Self {
        Rounds { live: ranks.map(|i| (i, None)).collect(), at: 0 }
    }

    /// The next rank due, or `None` when all have ended.
    fn due(&mut self) -> Option<usize> {
        if self.at >= self.live.len() {
            self.at = 0;
        }
        self.live.get(self.at).map(|r| r.0)
    }

    /// Produces the due rank's next chunk into `out` (opening it on its
    /// first); returns the rank's result when this was its last chunk.
    fn produce(
        &mut self,
        inputs: &[RankedInput],
        shifts: &[i128],
        stride: u64,
        out: &mut Vec<u8>,
    ) -> Result<Option<RankDone>, AnalyzeError> {
        let Some((idx, slot)) = self.live.get_mut(self.at) else { return Ok(None) };
        let idx = *idx;
        let conv = match slot {
            Some(c) => c,
            None => slot.insert(R::open_rank(&inputs[idx], shifts[idx], stride)?),
        };
        if conv.next_chunk(out)? {
            self.at += 1;
            return Ok(None);
        }
        let (_, conv) = self.live.remove(self.at);
        Ok(conv.map(|c| c.finish_rank(&inputs[idx], shifts[idx])))
    }
}

/// One job: the calling thread converts and writes.
pub(super) fn on_this_thread<R: RankOutput>(
    inputs: &[RankedInput],
    shifts: &[i128],
    stride: u64,
    sink: &mut Sink<'_>,
) -> Result<Done, AnalyzeError> {
    let mut done: Done = (0..inputs.len()).map(|_| None).collect();
    let mut buf = chunk_buffer();
    for group in groups(inputs.len()) {
        let mut rounds = Rounds::<R>::new(group);
        while let Some(idx) = rounds.due() {
            buf.clear();
            let last = rounds.produce(inputs, shifts, stride, &mut buf)?;
            sink.put(&buf)?;
            if let Some(d) = last {
                done[idx] = Some(d);
            }
        }
    }
    Ok(done)
}

/// What a worker hands the writer, in exactly the order the writer takes
/// them from that worker.
enum Msg {
    /// A chunk of rank `.0`.
    Chunk(usize, Vec<u8>),
    /// The last chunk of rank `.0`, and what the rank contributed.
    Last(usize, Vec<u8>, Box<RankDone>),
    /// Rank `.0` failed; the merge stops.
    Failed(usize, AnalyzeError),
}

/// N ≥ 2 jobs: `workers` threads convert (rank i of a group on worker
/// i mod N, in the order its chunks are written, through a queue of at most
/// [`QUEUE`]) while the calling thread writes, taking each chunk from the
/// worker that owns its rank.
pub(super) fn on_workers<R: RankOutput>(
    inputs: &[RankedInput],
    shifts: &[i128],
    stride: u64,
    workers: usize,
    sink: &mut Sink<'_>,
) -> Result<Done, AnalyzeError> {
    let mut done: Done = (0..inputs.len()).map(|_| None).collect();
    std::thread::scope(|scope| -> Result<(), AnalyzeError> {
        let mut rxs = Vec::with_capacity(workers);
        // Written chunks go back to their worker for reuse.
        let mut backs = Vec::with_capacity(workers);
        for k in 0..workers {
            let (tx, rx) = std::sync::mpsc::sync_channel::<Msg>(QUEUE);
            let (back_tx, back_rx) = std::sync::mpsc::channel::<Vec<u8>>();
            rxs.push(rx);
            backs.push(back_tx);
            scope.spawn(move || {
                for group in groups(inputs.len()) {
                    let mut rounds = Rounds::<R>::new(group.filter(|i| i % workers == k));
                    while let Some(idx) = rounds.due() {
                        let mut buf = back_rx.try_recv().unwrap_or_else(|_| chunk_buffer());
                        buf.clear();
                        let msg = match rounds.produce(inputs, shifts, stride, &mut buf) {
                            Ok(None) => Msg::Chunk(idx, buf),
                            Ok(Some(d)) => Msg::Last(idx, buf, Box::new(d)),
                            Err(e) => Msg::Failed(idx, e),
                        };
                        let failed = matches!(msg, Msg::Failed(..));
                        if tx.send(msg).is_err() || failed {
                            return; // the writer has stopped, or this rank failed
                        }
                    }
                }
            });
        }
        // The writer: the same order, taking each chunk from the worker
        // that owns its rank. Returning drops the receivers, which stops
        // the workers.
        for group in groups(inputs.len()) {
            let mut rounds = Rounds::<R>::new(group);
            while let Some(idx) = rounds.due() {
                let lost = || {
                    AnalyzeError::NoTraces(format!(
                        "the worker merging {} stopped unexpectedly",
                        inputs[idx].path.display()
                    ))
                };
                match rxs[idx % workers].recv().map_err(|_| lost())? {
                    Msg::Chunk(i, c) if i == idx => {
                        sink.put(&c)?;
                        let _ = backs[idx % workers].send(c);
                        rounds.at += 1;
                    }
                    Msg::Last(i, c, d) if i == idx => {
                        sink.put(&c)?;
                        let _ = backs[idx % workers].send(c);
                        rounds.live.remove(rounds.at);
                        done[idx] = Some(*d);
                    }
                    Msg::Failed(i, e) if i == idx => return Err(e),
                    _ => return Err(lost()),
                }
            }
        }
        Ok(())
    })?;
    Ok(done)
}
