//! The merge's Chrome JSON output: one rank's events copied through byte
//! for byte with only the fields that must change rewritten (`pid`, `ts`,
//! `id`, `bind_id`, and integers beyond 64 bits, which become strings);
//! after its last event, the rank's process names and sort order; around
//! all ranks, the object's head and its `ranktuneMerge` trailer.
//!
//! Owns the pid and flow-id rewriting. It never decides the order of the
//! chunks (that is `order`).

use super::output::{RankDone, RankOutput};
use super::{Align, MergeReport, RankMerge, RankedInput, FLUSH_AT, READ_BUF};
use crate::json::{self, Span};
use crate::naming;
use crate::reader::TraceReader;
use crate::timefmt::{self, UNITS_PER_NS};
use crate::AnalyzeError;
use std::io::Write;
use std::path::PathBuf;

struct Pid {
    raw: Vec<u8>,
    new: u64,
    name: Option<String>,
    sort: Option<i64>,
}

/// One rank's JSON conversion: each event's bytes copied through with the
/// fields that must change rewritten; after the last event, the rank's
/// process names and sort order.
pub(super) struct JsonRank {
    rank: u32,
    path: PathBuf,
    shift: i128,
    stride: u64,
    reader: TraceReader,
    pids: Vec<Pid>,
    last: usize,
    events: u64,
    reps: Vec<(Span, Rep)>,
    ended: bool,
}

impl RankOutput for JsonRank {
    const SEPARATOR: &'static [u8] = b",\n";

    fn open_rank(input: &RankedInput, shift: i128, stride: u64) -> Result<Self, AnalyzeError> {
        Ok(JsonRank {
            rank: input.rank,
            path: input.path.clone(),
            shift,
            stride,
            reader: TraceReader::open_with_buffer(&input.path, READ_BUF)?,
            pids: Vec::new(),
            last: usize::MAX,
            events: 0,
            reps: Vec::with_capacity(16),
            ended: false,
        })
    }

    fn next_chunk(&mut self, out: &mut Vec<u8>) -> Result<bool, AnalyzeError> {
        if self.ended {
            return Ok(false);
        }
        let (rank, shift, stride) = (self.rank, self.shift, self.stride);
        let pids = &mut self.pids;
        let reps = &mut self.reps;
        while out.len() < FLUSH_AT {
            let Some(ev) = self.reader.next_event()? else {
                self.ended = true;
                self.write_processes(out);
                return Ok(false);
            };
            let raw = ev.raw;
            let f = ev.fields;
            let pid_raw = ev.pid_raw();
            let pi = if self.last < pids.len() && pids[self.last].raw == pid_raw {
                self.last
            } else {
                match pids.iter().position(|p| p.raw == pid_raw) {
                    Some(p) => p,
                    None => {
                        let new = naming::merged_pid(rank, pids.len() as u64, stride);
                        pids.push(Pid { raw: pid_raw.to_vec(), new, name: None, sort: None });
                        pids.len() - 1
                    }
                }
            };
            self.last = pi;
            if ev.ph() == b'M' {
                match ev.name_raw() {
                    Some(b"\"process_name\"") => {
                        if let Some(n) = ev.arg_raw(b"name").and_then(json::unescape) {
                            pids[pi].name = Some(n);
                        }
                        continue;
                    }
                    Some(b"\"process_sort_index\"") => {
                        pids[pi].sort = ev
                            .arg_raw(b"sort_index")
                            .and_then(|s| std::str::from_utf8(s).ok()?.parse().ok());
                        continue;
                    }
                    _ => {}
                }
            }
            reps.clear();
            if let Some(s) = f.pid {
                reps.push((s, Rep::Pid(pids[pi].new)));
            }
            if shift != 0 {
                if let Some(s) = f.ts {
                    reps.push((s, Rep::Ts));
                }
            }
            if stride > 1 {
                if let Some(s) = f.id {
                    reps.push((s, Rep::Id));
                }
                if let Some(s) = f.bind_id {
                    reps.push((s, Rep::Id));
                }
            }
            for &(a, b) in ev.big_ints {
                reps.push((Span { start: a as u32, end: b as u32 }, Rep::Quote));
            }
            if !out.is_empty() {
                out.extend_from_slice(b",\n");
            }
            if reps.len() > 1 {
                reps.sort_unstable_by_key(|r| r.0.start);
            }
            let mut at = 0usize;
            for &(span, rep) in reps.iter() {
                let (s, e) = (span.start as usize, span.end as usize);
                if s < at {
                    continue; // nested inside an earlier replacement
                }
                out.extend_from_slice(&raw[at..s]);
                let v = &raw[s..e];
                match rep {
                    Rep::Pid(p) => timefmt::write_u128(u128::from(p), out),
                    Rep::Ts => {
                        if !timefmt::shift(v, shift, out) {
                            out.extend_from_slice(v);
                        }
                    }
                    Rep::Id => remap_id(v, rank, stride, out),
                    Rep::Quote => {
                        out.push(b'"');
                        out.extend_from_slice(v);
                        out.push(b'"');
                    }
                }
                at = e;
            }
            out.extend_from_slice(&raw[at..]);
            self.events += 1;
        }
        Ok(true)
    }

    fn finish_rank(self, _: &RankedInput, _: i128) -> RankDone {
        RankDone {
            merge: RankMerge {
                rank: self.rank,
                path: self.path,
                events: self.events,
                shift_ns: self.shift / UNITS_PER_NS,
                pids: self
                    .pids
                    .iter()
                    .map(|p| (String::from_utf8_lossy(&p.raw).into_owned(), p.new))
                    .collect(),
            },
            bytes: self.reader.stats().bytes,
            warnings: self.reader.warnings(),
        }
    }

    fn head(base_ns: i128) -> Vec<u8> {
        let mut head: Vec<u8> = Vec::with_capacity(256);
        head.extend_from_slice(
            b"{\"schemaVersion\":1,\"displayTimeUnit\":\"ms\",\"ranktuneMerged\":true,\"baseTimeNanoseconds\":",
        );
        timefmt::write_u128(base_ns.max(0) as u128, &mut head);
        head.extend_from_slice(b",\n\"traceEvents\":[\n");
        head
    }

    fn tail(report: &MergeReport, align: Align) -> Vec<u8> {
        let mut tail = Vec::new();
        tail.extend_from_slice(b"\n],\n\"ranktuneMerge\":");
        let meta = serde_json::json!({
            "align": match align { Align::Absolute => "absolute", Align::FirstStep => "first-step" },
            "baseTimeNanoseconds": report.base_ns.to_string(),
            "ranks": report.ranks.iter().map(|r| serde_json::json!({
                "rank": r.rank,
                "file": r.path.display().to_string(),
                "events": r.events,
                "shift_ns": r.shift_ns.to_string(),
                "pids": r.pids.iter().map(|(o, n)| serde_json::json!({"original": o, "pid": n})).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
        });
        tail.extend_from_slice(meta.to_string().as_bytes());
        tail.extend_from_slice(b"}\n");
        tail
    }
}

impl JsonRank {
    /// Process names and order for this rank.
    fn write_processes(&self, out: &mut Vec<u8>) {
        let (rank, pids) = (self.rank, &self.pids);
        let mut order: Vec<usize> = (0..pids.len()).collect();
        order.sort_by_key(|&i| (pids[i].sort.unwrap_or(i64::MAX), i));
        for (pos, &i) in order.iter().enumerate() {
            let p = &pids[i];
            let orig = json::unescape(&p.raw)
                .unwrap_or_else(|| String::from_utf8_lossy(&p.raw).into_owned());
            let name = naming::process_label(rank, &orig, p.name.as_deref());
            if !out.is_empty() {
                out.extend_from_slice(b",\n");
            }
            let name_json = serde_json::to_string(&name).unwrap_or_else(|_| "\"?\"".into());
            let sort = i64::from(rank) * 1_000_000 + pos as i64;
            let _ = write!(
                out,
                "{{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":{},\"tid\":0,\"args\":{{\"name\":{name_json}}}}},\n{{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":{},\"tid\":0,\"args\":{{\"sort_index\":{sort}}}}}",
                p.new, p.new
            );
        }
    }
}

#[derive(Debug, Clone, Copy)]
enum Rep {
    Pid(u64),
    Ts,
    Id,
    Quote,
}

/// Remaps a flow/async id so ids of different ranks never meet:
/// numbers become `id * stride + rank`, hex strings likewise (kept hex),
/// other strings get a `:r<rank>` suffix.
fn remap_id(v: &[u8], rank: u32, stride: u64, out: &mut Vec<u8>) {
    let map = |id: u64| id.checked_mul(stride).and_then(|x| x.checked_add(u64::from(rank)));
    if let Some(n) = json::parse_u64(v).and_then(map) {
        timefmt::write_u128(u128::from(n), out);
        return;
    }
    if v.len() >= 2 && v[0] == b'"' {
        let inner = &v[1..v.len() - 1];
        let hex = inner
            .strip_prefix(b"0x")
            .or_else(|| inner.strip_prefix(b"0X"))
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u64::from_str_radix(h, 16).ok())
            .and_then(map);
        if let Some(h) = hex {
            let _ = write!(out, "\"0x{h:x}\"");
        } else {
            out.extend_from_slice(&v[..v.len() - 1]);
            let _ = write!(out, ":r{rank}\"");
        }
        return;
    }
    out.extend_from_slice(v);
}
