//! The merge's output formats behind one trait: [`RankOutput`] is one
//! rank's conversion, pulled a chunk at a time, with what its format writes
//! around the chunks (a head, a separator between chunks, a tail).
//! Implemented for the Chrome JSON (`super::json::JsonRank`) and for
//! Perfetto's protobuf (the `perfetto` module's [`RankEncoder`], below).
//! The merge is generic over it, so nothing is dispatched per event or per
//! chunk.
//!
//! It never decides the order of chunks (that is `order`) and never writes
//! to the output itself.

use super::{Align, MergeReport, RankMerge, RankedInput, READ_BUF};
use crate::perfetto::RankEncoder;
use crate::timefmt::UNITS_PER_NS;
use crate::AnalyzeError;

/// What one rank contributed, once its last chunk is out.
pub(super) struct RankDone {
    pub(super) merge: RankMerge,
    /// Input bytes read (decompressed).
    pub(super) bytes: u64,
    /// Warnings naming the file.
    pub(super) warnings: Vec<String>,
}

/// One output format: one rank's conversion, pulled a chunk at a time. The
/// chunk boundaries depend only on the rank's own events (a chunk ends
/// after the event that brings it to 1 MiB), never on timing or the number
/// of workers.
pub(super) trait RankOutput: Sized {
    /// What is written between two non-empty chunks (of any ranks).
    const SEPARATOR: &'static [u8];

    /// Starts converting `input`, its times shifted by `shift` (fixed
    /// point, onto the merged timeline), its flow ids spread by `stride`
    /// (the number of rank slots).
    fn open_rank(input: &RankedInput, shift: i128, stride: u64) -> Result<Self, AnalyzeError>;

    /// Appends the next chunk to `out` (no leading separator); false once
    /// the rank has ended (`out` then holds its last bytes, maybe none).
    fn next_chunk(&mut self, out: &mut Vec<u8>) -> Result<bool, AnalyzeError>;

    /// What the rank contributed (after its last chunk).
    fn finish_rank(self, input: &RankedInput, shift: i128) -> RankDone;

    /// What the output starts with, given its `baseTimeNanoseconds`.
    fn head(base_ns: i128) -> Vec<u8>;

    /// What the output ends with, given the merge's report.
    fn tail(report: &MergeReport, align: Align) -> Vec<u8>;
}

/// Perfetto's protobuf: packets only, no head, separator or tail (a
/// `Trace` message is its packets one after the other).
impl RankOutput for RankEncoder {
    const SEPARATOR: &'static [u8] = b"";

    fn open_rank(input: &RankedInput, shift: i128, stride: u64) -> Result<Self, AnalyzeError> {
        RankEncoder::open(input, shift, stride, READ_BUF)
    }

    fn next_chunk(&mut self, out: &mut Vec<u8>) -> Result<bool, AnalyzeError> {
        self.packets(out)
    }

    fn finish_rank(self, input: &RankedInput, shift: i128) -> RankDone {
        let out = self.finish();
        RankDone {
            merge: RankMerge {
                rank: input.rank,
                path: input.path.clone(),
                events: out.events,
                shift_ns: shift / UNITS_PER_NS,
                pids: out.pids,
            },
            bytes: out.bytes,
            warnings: out.warnings,
        }
    }

    fn head(_: i128) -> Vec<u8> {
        Vec::new()
    }

    fn tail(_: &MergeReport, _: Align) -> Vec<u8> {
        Vec::new()
    }
}
