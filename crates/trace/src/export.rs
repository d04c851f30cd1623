//! Writing a session's events as one Chrome trace file, atomically.
//!
//! The file is the JSON Object format. `distributedInfo` comes first and is
//! written by hand with a space after each colon, because Holistic Trace
//! Analysis finds a file's rank with the regex `"rank":\s+(\d+)`; event args
//! are written compactly (`"rank":3`), so they can never match it first.
//!
//! ```text
//! {
//!   "schemaVersion": 1,
//!   "distributedInfo": {"rank": 3, "world_size": 8, "backend": "ranktune"},
//!   "otherData": {"run_id": "ranktune-4242-…", "run_id_source": "RANKTUNE_JOB_ID", "host": "node7", …},
//!   "baseTimeNanoseconds": 1764460800000000000,
//!   "displayTimeUnit": "ms",
//!   "traceEvents": [
//!   {"ph":"M","name":"process_name","pid":3,"tid":0,"args":{"name":"rank 3"}},
//!   …
//!   ]
//! }
//! ```
//!
//! Every event has `pid` = rank; `ts`/`dur` are microseconds with three
//! decimals, relative to `baseTimeNanoseconds`. All ranks of one run write
//! the same base where they have one (`RANKTUNE_TRACE_BASE_NS`), so raw `ts`
//! values are comparable across their files; `otherData.run_id` names the
//! run (`null` when nothing tells it). The text goes to a temp file
//! created exclusively in the target directory, is synced, and is renamed
//! over the target: the trace file is always complete or absent. A `.gz`
//! target is gzip-compressed. This module never decides *when* to export.

use crate::clock::Scale;
use crate::json_text::{push_json_str, push_u64};
use crate::recorder::{self, EventRef, Payload, Recorder};
use crate::TraceError;
use ranktune_core::atomic_file::{Publish, PublishError};
use std::fs;
use std::io::{self, BufWriter, Write};
use std::path::Path;

/// Who wrote the file: the header fields.
#[derive(Clone, Debug)]
pub(crate) struct Meta {
    pub rank: u32,
    pub world_size: u32,
    pub local_rank: u32,
    pub backend: String,
    pub host: String,
    pub pid: u32,
    pub base_ns: u64,
    /// Added to every event time: this process's own clock base minus
    /// `base_ns` (0 unless the run shares one base).
    pub offset_ns: u64,
    pub run_id: Option<String>,
    pub run_id_source: &'static str,
}

/// Writes `rec`'s events so far to `path`, published atomically and
/// durably ([`ranktune_core::atomic_file`]): the file is complete or absent.
pub(crate) fn export(path: &Path, rec: &Recorder, meta: &Meta) -> Result<(), TraceError> {
    publish(path, &mut |w| write_json(w, rec, meta))
}

/// Publishes what `write` writes as the trace file `path`, atomically and
/// durably ([`ranktune_core::atomic_file`]: complete or absent), gzipped
/// for a `.gz` path: the one way every trace file is written.
pub(crate) fn publish(
    path: &Path,
    write: &mut dyn FnMut(&mut dyn Write) -> io::Result<()>,
) -> Result<(), TraceError> {
    let write_err = |source| TraceError::Write { path: path.to_path_buf(), source };
    match Publish::new(path).durable().write_with(|temp| write_file(temp.file(), path, write)) {
        Ok(()) => Ok(()),
        // Only making the rename durable failed: a complete file is in place.
        Err(e) if e.published() => Ok(()),
        Err(PublishError::Writer(source) | PublishError::Io { source, .. }) => {
            Err(write_err(source))
        }
        Err(e) => Err(write_err(io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))),
    }
}

fn write_file(
    file: &mut fs::File,
    path: &Path,
    write: &mut dyn FnMut(&mut dyn Write) -> io::Result<()>,
) -> io::Result<()> {
    let gz = path.extension().is_some_and(|e| e == "gz");
    if gz {
        let mut enc = flate2::write::GzEncoder::new(
            BufWriter::with_capacity(1 << 16, file),
            flate2::Compression::default(),
        );
        write(&mut enc)?;
        enc.finish()?.into_inner().map_err(io::IntoInnerError::into_error)?;
    } else {
        let mut w = BufWriter::with_capacity(1 << 16, file);
        write(&mut w)?;
        w.into_inner().map_err(io::IntoInnerError::into_error)?;
    }
    Ok(())
}

/// Writes the whole JSON document.
pub(crate) fn write_json(w: &mut dyn Write, rec: &Recorder, meta: &Meta) -> io::Result<()> {
    let scale = Scale::measure();
    let threads = rec.threads();
    let sites = recorder::sites();
    let dropped = rec.dropped();
    let window = rec.window().map_or_else(|| "all".to_string(), |w| w.to_string());
    writeln!(w, "{{")?;
    writeln!(w, "  \"schemaVersion\": 1,")?;
    writeln!(
        w,
        "  \"distributedInfo\": {{\"rank\": {}, \"world_size\": {}, \"local_rank\": {}, \"backend\": {}}},",
        meta.rank,
        meta.world_size,
        meta.local_rank,
        json_str(&meta.backend)
    )?;
    writeln!(
        w,
        "  \"otherData\": {{\"run_id\": {}, \"run_id_source\": {}, \"host\": {}, \"pid\": {}, \"ranktune_version\": {}, \"iterations\": {}, \"last_iteration\": {}, \"max_events\": {}, \"dropped_events\": {}}},",
        meta.run_id.as_deref().map_or_else(|| "null".to_string(), json_str),
        json_str(meta.run_id_source),
        json_str(&meta.host),
        meta.pid,
        json_str(env!("CARGO_PKG_VERSION")),
        json_str(&window),
        rec.iteration(),
        rec.max_events(),
        dropped
    )?;
    writeln!(w, "  \"baseTimeNanoseconds\": {},", meta.base_ns)?;
    writeln!(w, "  \"displayTimeUnit\": \"ms\",")?;
    writeln!(w, "  \"traceEvents\": [")?;
    let pid = meta.rank;
    write!(
        w,
        "  {{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":{pid},\"tid\":0,\"args\":{{\"name\":\"rank {pid}\"}}}}"
    )?;
    write!(
        w,
        ",\n  {{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":{pid},\"tid\":0,\"args\":{{\"sort_index\":{pid}}}}}"
    )?;
    for (i, t) in threads.iter().enumerate() {
        write!(
            w,
            ",\n  {{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":{pid},\"tid\":{},\"args\":{{\"name\":{}}}}}",
            t.tid,
            json_str(&t.thread_name())
        )?;
        write!(
            w,
            ",\n  {{\"ph\":\"M\",\"name\":\"thread_sort_index\",\"pid\":{pid},\"tid\":{},\"args\":{{\"sort_index\":{i}}}}}",
            t.tid
        )?;
    }
    let sites: Vec<SiteText> = sites.iter().map(|&(name, cat)| SiteText::new(name, cat)).collect();
    // Events are rendered into one buffer that is handed to the writer a
    // block at a time (no per-event write call, no second copy).
    let mut out = String::with_capacity(FLUSH_AT + 4096);
    for t in &threads {
        let thread = ThreadText::new(pid, t.tid);
        let mut failed: Option<io::Error> = None;
        t.for_each(&mut |e| {
            if failed.is_some() {
                return;
            }
            out.push_str(",\n  ");
            render_event(&mut out, e, &sites, &thread, scale, meta.offset_ns);
            if out.len() >= FLUSH_AT {
                if let Err(err) = w.write_all(out.as_bytes()) {
                    failed = Some(err);
                }
                out.clear();
            }
        });
        if let Some(err) = failed {
            return Err(err);
        }
    }
    w.write_all(out.as_bytes())?;
    if dropped > 0 {
        tracing::warn!(
            dropped,
            max_events = rec.max_events(),
            "trace buffer was full; {dropped} events were not recorded (raise RANKTUNE_TRACE_MAX_EVENTS or narrow RANKTUNE_PROFILE_ITERS)"
        );
    }
    writeln!(w, "\n  ]")?;
    writeln!(w, "}}")?;
    w.flush()
}

fn json_str(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    push_json_str(&mut out, s);
    out
}

/// Appends `ns` as microseconds with three decimals.
fn push_us(out: &mut String, ns: u64) {
    push_u64(out, ns / 1000);
    let frac = ns % 1000;
    out.push('.');
    out.push(char::from(b'0' + (frac / 100) as u8));
    out.push(char::from(b'0' + (frac / 10 % 10) as u8));
    out.push(char::from(b'0' + (frac % 10) as u8));
}

/// Rendered bytes are handed to the writer in blocks of about this size.
const FLUSH_AT: usize = 1 << 16;

/// A site's name and category as JSON members, rendered once per export.
struct SiteText {
    /// `"name":"…","cat":"…"`
    both: String,
    /// `,"cat":"…"` (after a run-time name)
    cat: String,
}

impl SiteText {
    fn new(name: &str, cat: &str) -> SiteText {
        let mut c = String::from(",\"cat\":");
        push_json_str(&mut c, cat);
        let mut both = String::from("\"name\":");
        push_json_str(&mut both, name);
        both.push_str(&c);
        SiteText { both, cat: c }
    }
}

/// A thread's `,"pid":P,"tid":T,"ts":`, rendered once per export.
struct ThreadText(String);

impl ThreadText {
    fn new(pid: u32, tid: u64) -> ThreadText {
        let mut s = String::from(",\"pid\":");
        push_u64(&mut s, u64::from(pid));
        s.push_str(",\"tid\":");
        push_u64(&mut s, tid);
        s.push_str(",\"ts\":");
        ThreadText(s)
    }
}

fn render_event(
    out: &mut String,
    e: &EventRef<'_>,
    sites: &[SiteText],
    thread: &ThreadText,
    scale: Scale,
    offset_ns: u64,
) {
    use std::fmt::Write as _;
    let payload = e.payload();
    out.push_str(match payload {
        Payload::Complete { .. } => "{\"ph\":\"X\",",
        Payload::Instant => "{\"ph\":\"i\",",
        Payload::Counter(_) => "{\"ph\":\"C\",",
    });
    let site = sites.get(e.site as usize);
    match (e.name, site) {
        (None, Some(site)) => out.push_str(&site.both),
        (name, site) => {
            out.push_str("\"name\":");
            push_json_str(out, name.unwrap_or("?"));
            out.push_str(site.map_or(",\"cat\":\"?\"", |s| &s.cat));
        }
    }
    out.push_str(&thread.0);
    push_us(out, scale.to_ns(e.ts).saturating_add(offset_ns));
    match payload {
        Payload::Complete { dur } => {
            out.push_str(",\"dur\":");
            push_us(out, scale.to_ns(dur));
        }
        Payload::Instant => out.push_str(",\"s\":\"t\""),
        Payload::Counter(v) => {
            if v.is_finite() {
                let _ = write!(out, ",\"args\":{{\"value\":{v}}}");
            } else {
                out.push_str(",\"args\":{\"value\":0}");
            }
        }
    }
    if let Some(args) = e.args {
        if !matches!(payload, Payload::Counter(_)) {
            out.push_str(",\"args\":");
            out.push_str(args);
        }
    }
    out.push('}');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn microseconds_have_three_decimals() {
        let mut s = String::new();
        push_us(&mut s, 1_234_567);
        push_us(&mut s, 5);
        assert_eq!(s, "1234.5670.005");
    }

    #[test]
    fn events_render_as_valid_json() {
        use crate::recorder::Kind;
        let sites: Vec<SiteText> = [("", "user_annotation"), ("", "c"), ("ctr", "counter")]
            .iter()
            .map(|&(n, c)| SiteText::new(n, c))
            .collect();
        let thread = ThreadText::new(3, 99);
        let ev = |ts, val, site, kind, name, args| EventRef { ts, val, site, kind, name, args };
        let events = [
            ev(1500, 2_000_001, 0, Kind::Complete, Some("ProfilerStep#7"), None),
            ev(1, 0, 1, Kind::Instant, Some(r#"quote " and \"#), Some(r#"{"rank":5}"#)),
            ev(2, f64::NAN.to_bits(), 2, Kind::Counter, None, None),
        ];
        for e in &events {
            let mut s = String::new();
            render_event(&mut s, e, &sites, &thread, Scale::identity(), 0);
            let v: serde_json::Value =
                serde_json::from_str(&s).unwrap_or_else(|x| panic!("{s}: {x}"));
            assert_eq!(v["pid"], 3);
            assert_eq!(v["tid"], 99);
        }
        let mut s = String::new();
        render_event(&mut s, &events[0], &sites, &thread, Scale::identity(), 0);
        assert!(
            s.contains(r#""name":"ProfilerStep#7""#) && s.contains(r#""ts":1.500,"dur":2000.001"#),
            "{s}"
        );
        let mut s = String::new();
        render_event(&mut s, &events[1], &sites, &thread, Scale::identity(), 0);
        assert!(s.contains(r#""name":"quote \" and \\","#), "{s}");
        assert!(s.contains(r#""args":{"rank":5}"#), "{s}");
    }
}
