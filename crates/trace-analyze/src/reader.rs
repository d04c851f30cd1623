//! Streaming trace reader: yields one event at a time from a Chrome Trace
//! Event Format file (object form with `traceEvents`, or array form, plain or
//! gzip), plus the top-level metadata keys found before and after the events.
//!
//! It owns the input buffer and the decisions about bad input: an event that
//! is structurally sound but bad (invalid UTF-8, raw control characters,
//! integers beyond 64 bits in a field the tools interpret, missing required
//! fields, oversized) is skipped and counted; broken structure stops the file
//! with a note, keeping what was read. It never holds a whole file in memory
//! (one event at most, capped at [`MAX_ITEM`]) and never panics on input.

use super::json::{self, Fields, Flags, Span, Stop};
use super::AnalyzeError;
use serde_json::Value;
use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;

/// Largest single event or metadata value kept; bigger ones are skipped.
pub const MAX_ITEM: usize = 16 << 20;
/// Largest metadata value parsed into a [`Value`].
const MAX_META: usize = 1 << 20;
const CHUNK: usize = 1 << 20;

/// The container form of a trace file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
    /// `{"traceEvents": [...], ...}`
    Object,
    /// `[ ... ]` (closing bracket optional)
    Array,
}

/// Why an event was skipped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SkipReason {
    /// The event's bytes are not valid UTF-8.
    InvalidUtf8,
    /// A string holds a raw control character.
    ControlChar,
    /// `pid`, `tid`, `ts`, `dur`, `id` or `bind_id` is an integer beyond 64 bits.
    BigIntField,
    /// No `ph`.
    MissingPh,
    /// No `pid`.
    MissingPid,
    /// A non-metadata event without `ts`.
    MissingTs,
    /// An `X` event without `dur`.
    MissingDur,
    /// `ts`/`dur` not a number, `pid` not a number or string, `ph` not a string.
    BadFieldType,
    /// An element of the event array that is not an object.
    NotObject,
    /// Larger than [`MAX_ITEM`].
    TooBig,
}

const REASONS: [(SkipReason, &str); 10] = [
    (SkipReason::InvalidUtf8, "invalid UTF-8"),
    (SkipReason::ControlChar, "raw control characters in strings"),
    (SkipReason::BigIntField, "integers beyond 64 bits in pid/tid/ts/dur/id"),
    (SkipReason::MissingPh, "no \"ph\""),
    (SkipReason::MissingPid, "no \"pid\""),
    (SkipReason::MissingTs, "no \"ts\""),
    (SkipReason::MissingDur, "an X event without \"dur\""),
    (SkipReason::BadFieldType, "a field of the wrong type"),
    (SkipReason::NotObject, "not an object"),
    (SkipReason::TooBig, "larger than 16 MiB"),
];

/// What happened while reading one file: counts, skips, and how it ended.
#[derive(Debug, Clone, Default)]
pub struct ReadStats {
    /// Events handed out.
    pub events: u64,
    /// Bytes of (decompressed) input consumed.
    pub bytes: u64,
    /// Per [`SkipReason`] (in declaration order): count and first byte offset.
    skipped: [(u64, u64); 10],
    /// Integers beyond 64 bits seen outside the interpreted fields.
    pub big_ints_elsewhere: u64,
    /// The file ended inside the event array (normal for the array form).
    pub truncated: bool,
    /// Reading stopped early at broken structure: offset and what.
    pub stopped: Option<(u64, &'static str)>,
    /// Other notes (skipped metadata, missing closing brace, …).
    pub notes: Vec<String>,
}

impl ReadStats {
    /// Number of skipped events for one reason.
    pub fn skipped(&self, reason: SkipReason) -> u64 {
        REASONS.iter().position(|(r, _)| *r == reason).map_or(0, |i| self.skipped[i].0)
    }

    /// Total skipped events.
    pub fn skipped_total(&self) -> u64 {
        self.skipped.iter().map(|s| s.0).sum()
    }

    fn skip(&mut self, reason: SkipReason, offset: u64) {
        if let Some(i) = REASONS.iter().position(|(r, _)| *r == reason) {
            if self.skipped[i].0 == 0 {
                self.skipped[i].1 = offset;
            }
            self.skipped[i].0 += 1;
        }
    }

    /// Human-readable warnings, each naming `file` and what was skipped.
    pub fn warnings(&self, file: &str, form: Form) -> Vec<String> {
        let mut out = Vec::new();
        for (i, (_, what)) in REASONS.iter().enumerate() {
            let (n, at) = self.skipped[i];
            if n > 0 {
                out.push(format!(
                    "{file}: skipped {n} event{} with {what} (first at byte {at})",
                    if n == 1 { "" } else { "s" }
                ));
            }
        }
        if self.big_ints_elsewhere > 0 {
            out.push(format!(
                "{file}: {} integer{} beyond 64 bits in args kept, written as strings when merged",
                self.big_ints_elsewhere,
                if self.big_ints_elsewhere == 1 { "" } else { "s" }
            ));
        }
        if let Some((at, what)) = self.stopped {
            out.push(format!(
                "{file}: stopped reading at byte {at} ({what}); kept the {} events before it, skipped the rest of the file",
                self.events
            ));
        } else if self.truncated && form == Form::Object {
            out.push(format!(
                "{file}: file ends inside \"traceEvents\" (truncated?); kept the {} events read",
                self.events
            ));
        }
        for n in &self.notes {
            out.push(format!("{file}: {n}"));
        }
        out
    }
}

/// One event: its raw bytes and where its fields are.
#[derive(Debug, Clone, Copy)]
pub struct Event<'a> {
    /// The event object's bytes, `{` to `}`, valid UTF-8 JSON.
    pub raw: &'a [u8],
    /// Field positions in `raw`.
    pub(crate) fields: &'a Fields,
    /// Integers beyond 64 bits inside `raw` (outside interpreted fields).
    pub big_ints: &'a [(usize, usize)],
    /// Byte offset of the event in the (decompressed) file.
    pub offset: u64,
}

impl<'a> Event<'a> {
    fn get(&self, s: Option<Span>) -> Option<&'a [u8]> {
        s.map(|s| s.of(self.raw))
    }
    /// Phase letter (first character of `ph`).
    pub fn ph(&self) -> u8 {
        self.get(self.fields.ph).and_then(|p| p.get(1).copied()).unwrap_or(0)
    }
    /// Raw `name` value (with quotes), if any.
    pub fn name_raw(&self) -> Option<&'a [u8]> {
        self.get(self.fields.name)
    }
    /// Raw `cat` value, if any.
    pub fn cat_raw(&self) -> Option<&'a [u8]> {
        self.get(self.fields.cat)
    }
    /// Raw `pid` value.
    pub fn pid_raw(&self) -> &'a [u8] {
        self.get(self.fields.pid).unwrap_or(b"0")
    }
    /// Raw `tid` value, if any.
    pub fn tid_raw(&self) -> &'a [u8] {
        self.get(self.fields.tid).unwrap_or(b"0")
    }
    /// Raw `ts` value, if any.
    pub fn ts_raw(&self) -> Option<&'a [u8]> {
        self.get(self.fields.ts)
    }
    /// `ts` in microseconds (relative to the file's base).
    pub fn ts_us(&self) -> Option<f64> {
        self.ts_raw().and_then(json::parse_f64)
    }
    /// `dur` in microseconds.
    pub fn dur_us(&self) -> Option<f64> {
        self.get(self.fields.dur).and_then(json::parse_f64)
    }
    /// Raw `args` object, if any.
    pub fn args_raw(&self) -> Option<&'a [u8]> {
        self.get(self.fields.args)
    }
    /// A member of `args`, raw.
    pub fn arg_raw(&self, key: &[u8]) -> Option<&'a [u8]> {
        let args = self.args_raw()?;
        json::object_member(args, key).map(|s| s.of(args))
    }
}

/// The input window: a growable buffer over a byte source.
struct Window {
    src: Box<dyn Read + Send>,
    buf: Vec<u8>,
    pos: usize,
    end: usize,
    eof: bool,
    /// File offset of `buf[0]`.
    base: u64,
}

enum Scanned<T> {
    Ok(T),
    Bad(usize, &'static str),
    Eof,
    TooBig,
}

impl Window {
    /// Moves unread bytes to the front and reads more. Returns `Ok(false)`
    /// when the buffer is full at its cap (the current item is too big).
    fn fill(&mut self) -> std::io::Result<bool> {
        if self.pos > 0 {
            self.buf.copy_within(self.pos..self.end, 0);
            self.base += self.pos as u64;
            self.end -= self.pos;
            self.pos = 0;
        }
        if self.end == self.buf.len() {
            if self.buf.len() >= MAX_ITEM + CHUNK {
                return Ok(false);
            }
            let new = (self.buf.len() * 2).min(MAX_ITEM + CHUNK);
            self.buf.resize(new, 0);
        }
        loop {
            match self.src.read(&mut self.buf[self.end..]) {
                Ok(0) => {
                    self.eof = true;
                    return Ok(true);
                }
                Ok(n) => {
                    self.end += n;
                    return Ok(true);
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// The next non-whitespace byte (not consumed), or `None` at end of input.
    fn peek(&mut self) -> std::io::Result<Option<u8>> {
        loop {
            self.pos = json::skip_ws(&self.buf[..self.end], self.pos);
            if self.pos < self.end {
                return Ok(Some(self.buf[self.pos]));
            }
            if self.eof {
                return Ok(None);
            }
            self.fill()?;
        }
    }

    /// Runs `f` on the unread bytes until it has enough input.
    fn scan<T>(
        &mut self,
        flags: &mut Flags,
        mut f: impl FnMut(&[u8], &mut Flags) -> Result<T, Stop>,
    ) -> std::io::Result<Scanned<T>> {
        loop {
            flags.clear();
            match f(&self.buf[self.pos..self.end], flags) {
                Ok(t) => return Ok(Scanned::Ok(t)),
                Err(Stop::Bad { at, what }) => return Ok(Scanned::Bad(at, what)),
                Err(Stop::More) => {
                    if self.eof {
                        return Ok(Scanned::Eof);
                    }
                    if !self.fill()? {
                        return Ok(Scanned::TooBig);
                    }
                }
            }
        }
    }

    /// Skips one oversized value starting at `pos` without keeping it,
    /// tracking only strings and nesting. Returns false if input ends first.
    fn skip_big(&mut self) -> std::io::Result<bool> {
        let (mut depth, mut in_str, mut esc) = (0usize, false, false);
        loop {
            while self.pos < self.end {
                let c = self.buf[self.pos];
                self.pos += 1;
                if in_str {
                    if esc {
                        esc = false;
                    } else if c == b'\\' {
                        esc = true;
                    } else if c == b'"' {
                        in_str = false;
                        if depth == 0 {
                            return Ok(true);
                        }
                    }
                    continue;
                }
                match c {
                    b'"' => in_str = true,
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth = depth.saturating_sub(1);
                        if depth == 0 {
                            return Ok(true);
                        }
                    }
                    _ => {}
                }
            }
            // Everything in the buffer is consumed: drop it and read on.
            self.base += self.end as u64;
            self.pos = 0;
            self.end = 0;
            if self.eof {
                return Ok(false);
            }
            self.fill()?;
        }
    }

    fn offset(&self) -> u64 {
        self.base + self.pos as u64
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Events,
    Trailer,
    Done,
}

/// A streaming reader of one trace file. See the module docs.
pub struct TraceReader {
    name: String,
    win: Window,
    flags: Flags,
    fields: Fields,
    form: Form,
    state: State,
    header: Vec<(String, Value)>,
    trailer: Vec<(String, Value)>,
    stats: ReadStats,
    cur: (usize, usize, u64),
}

impl std::fmt::Debug for TraceReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TraceReader").field("name", &self.name).field("form", &self.form).finish()
    }
}

impl TraceReader {
    /// Opens a trace file (gzip detected by its magic bytes) and reads its
    /// header: everything up to the first event.
    pub fn open(path: &Path) -> Result<Self, AnalyzeError> {
        Self::open_with_buffer(path, CHUNK)
    }

    /// [`TraceReader::open`] with a read window of `bytes` to start with
    /// (at least 4 KiB; it still grows for an event that does not fit, up
    /// to [`MAX_ITEM`]): for callers that keep many files open at once.
    pub fn open_with_buffer(path: &Path, bytes: usize) -> Result<Self, AnalyzeError> {
        let bytes = bytes.max(4 << 10);
        let name = path.display().to_string();
        let io = |source| AnalyzeError::Io { path: name.clone(), source };
        let file = File::open(path).map_err(io)?;
        let mut br = BufReader::with_capacity((64 << 10).min(bytes), file);
        let gz = br.fill_buf().map_err(io)?.starts_with(&[0x1f, 0x8b]);
        let src: Box<dyn Read + Send> =
            if gz { Box::new(flate2::bufread::MultiGzDecoder::new(br)) } else { Box::new(br) };
        Self::with_window(name, src, bytes)
    }

    /// Reads a trace from any byte source; `name` is used in messages.
    pub fn from_reader(
        name: impl Into<String>,
        src: Box<dyn Read + Send>,
    ) -> Result<Self, AnalyzeError> {
        Self::with_window(name.into(), src, CHUNK)
    }

    fn with_window(
        name: String,
        src: Box<dyn Read + Send>,
        bytes: usize,
    ) -> Result<Self, AnalyzeError> {
        let mut r = TraceReader {
            name,
            win: Window { src, buf: vec![0; bytes], pos: 0, end: 0, eof: false, base: 0 },
            flags: Flags::default(),
            fields: Fields::default(),
            form: Form::Array,
            state: State::Events,
            header: Vec::new(),
            trailer: Vec::new(),
            stats: ReadStats::default(),
            cur: (0, 0, 0),
        };
        r.start()?;
        Ok(r)
    }

    fn io(&self, source: std::io::Error) -> AnalyzeError {
        AnalyzeError::Io { path: self.name.clone(), source }
    }

    fn not_trace(&self, why: String) -> AnalyzeError {
        AnalyzeError::NotATrace { path: self.name.clone(), why }
    }

    fn start(&mut self) -> Result<(), AnalyzeError> {
        // A UTF-8 byte order mark is tolerated.
        self.win.fill().map_err(|e| self.io(e))?;
        if self.win.buf[..self.win.end].starts_with(&[0xEF, 0xBB, 0xBF]) {
            self.win.pos = 3;
        }
        match self.win.peek().map_err(|e| self.io(e))? {
            Some(b'[') => {
                self.win.pos += 1;
                self.form = Form::Array;
                Ok(())
            }
            Some(b'{') => {
                self.win.pos += 1;
                self.form = Form::Object;
                self.read_members(true)
            }
            Some(c) => Err(self.not_trace(format!(
                "it starts with {:?}, not with '{{' or '[' (not a JSON trace)",
                char::from(c)
            ))),
            None => Err(self.not_trace("it is empty".into())),
        }
    }

    /// Reads `"key": value` members of the top-level object. In the header
    /// (`head`), stops after `"traceEvents": [`; else reads to the closing `}`.
    fn read_members(&mut self, head: bool) -> Result<(), AnalyzeError> {
        loop {
            let c = self.win.peek().map_err(|e| self.io(e))?;
            match c {
                Some(b',') => {
                    self.win.pos += 1;
                    continue;
                }
                Some(b'}') => {
                    self.win.pos += 1;
                    self.state = State::Done;
                    if head {
                        return Err(self.not_trace(
                            "it is a JSON object without \"traceEvents\" (not a trace)".into(),
                        ));
                    }
                    return Ok(());
                }
                Some(b'"') => {}
                None => {
                    self.state = State::Done;
                    if head {
                        return Err(self.not_trace(
                            "it ends before \"traceEvents\" (truncated or not a trace)".into(),
                        ));
                    }
                    self.stats.notes.push("missing the closing '}' after the events".into());
                    return Ok(());
                }
                Some(other) => {
                    let at = self.win.offset();
                    return self.member_error(
                        head,
                        at,
                        format!("unexpected {:?} between top-level keys", char::from(other)),
                    );
                }
            }
            // Key, colon.
            let key = self
                .win
                .scan(&mut self.flags, |b, fl| {
                    let end = json::scan_string(b, 1, fl)?;
                    let i = json::skip_ws(b, end);
                    match b.get(i) {
                        None => Err(Stop::More),
                        Some(b':') => Ok((end, i + 1)),
                        Some(_) => Err(Stop::Bad { at: i, what: "expected ':'" }),
                    }
                })
                .map_err(|e| self.io(e))?;
            let (kend, after) = match key {
                Scanned::Ok(k) => k,
                _ => {
                    let at = self.win.offset();
                    return self.member_error(head, at, "broken top-level key".into());
                }
            };
            let key = json::unescape(&self.win.buf[self.win.pos..self.win.pos + kend])
                .unwrap_or_default();
            self.win.pos += after;
            if key == "traceEvents" && self.state == State::Events && head {
                match self.win.peek().map_err(|e| self.io(e))? {
                    Some(b'[') => {
                        self.win.pos += 1;
                        return Ok(());
                    }
                    _ => {
                        return Err(
                            self.not_trace("\"traceEvents\" is not an array (not a trace)".into())
                        )
                    }
                }
            }
            if self.win.peek().map_err(|e| self.io(e))?.is_none() {
                continue;
            }
            let value = self
                .win
                .scan(&mut self.flags, |b, fl| json::scan_value(b, 0, fl))
                .map_err(|e| self.io(e))?;
            match value {
                Scanned::Ok(len) => {
                    let raw = &self.win.buf[self.win.pos..self.win.pos + len];
                    if len <= MAX_META {
                        match serde_json::from_slice::<Value>(raw) {
                            Ok(v) => {
                                if head {
                                    self.header.push((key, v))
                                } else {
                                    self.trailer.push((key, v))
                                }
                            }
                            Err(e) => {
                                self.stats.notes.push(format!("skipped top-level key {key:?}: {e}"))
                            }
                        }
                    } else {
                        self.stats.notes.push(format!(
                            "skipped top-level key {key:?}: {len} bytes is too large to keep"
                        ));
                    }
                    self.win.pos += len;
                }
                Scanned::TooBig => {
                    self.stats.notes.push(format!(
                        "skipped top-level key {key:?}: larger than {} MiB",
                        MAX_ITEM >> 20
                    ));
                    if !self.win.skip_big().map_err(|e| self.io(e))? {
                        continue;
                    }
                }
                Scanned::Eof => {
                    let at = self.win.offset();
                    return self.member_error(head, at, format!("file ends inside {key:?}"));
                }
                Scanned::Bad(at, what) => {
                    let at = self.win.offset() + at as u64;
                    return self.member_error(head, at, format!("{what} in {key:?}"));
                }
            }
        }
    }

    fn member_error(&mut self, head: bool, at: u64, what: String) -> Result<(), AnalyzeError> {
        self.state = State::Done;
        if head {
            Err(self.not_trace(format!("{what} at byte {at} (not valid JSON)")))
        } else {
            self.stats
                .notes
                .push(format!("ignored the rest after the events: {what} at byte {at}"));
            Ok(())
        }
    }

    /// The file name used in messages.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The container form.
    pub fn form(&self) -> Form {
        self.form
    }

    /// Top-level keys found before `traceEvents`.
    pub fn header(&self) -> &[(String, Value)] {
        &self.header
    }

    /// Top-level keys found after `traceEvents` (complete once
    /// [`next_event`](Self::next_event) has returned `None`).
    pub fn trailer(&self) -> &[(String, Value)] {
        &self.trailer
    }

    /// A top-level key from the header or, once read, the trailer.
    pub fn meta(&self, key: &str) -> Option<&Value> {
        self.header.iter().chain(self.trailer.iter()).find(|(k, _)| k == key).map(|(_, v)| v)
    }

    /// Counts and notes so far.
    pub fn stats(&self) -> &ReadStats {
        &self.stats
    }

    /// Warnings naming this file and what was skipped.
    pub fn warnings(&self) -> Vec<String> {
        self.stats.warnings(&self.name, self.form)
    }

    /// The next good event, or `None` at the end of the events (after which
    /// the trailer has been read).
    pub fn next_event(&mut self) -> Result<Option<Event<'_>>, AnalyzeError> {
        if !self.advance()? {
            return Ok(None);
        }
        let (s, e, off) = self.cur;
        Ok(Some(Event {
            raw: &self.win.buf[s..e],
            fields: &self.fields,
            big_ints: &self.flags.big_ints,
            offset: off,
        }))
    }

    /// Reads to the end of the file (events included), so the trailer is
    /// available.
    pub fn drain(&mut self) -> Result<(), AnalyzeError> {
        while self.advance()? {}
        Ok(())
    }

    fn advance(&mut self) -> Result<bool, AnalyzeError> {
        loop {
            match self.state {
                State::Done => {
                    self.stats.bytes = self.win.offset();
                    return Ok(false);
                }
                State::Trailer => {
                    self.read_members(false)?;
                    self.state = State::Done;
                    continue;
                }
                State::Events => {}
            }
            let c = self.win.peek().map_err(|e| self.io(e))?;
            match c {
                None => {
                    self.stats.truncated = true;
                    self.state = State::Done;
                    continue;
                }
                Some(b',') => {
                    self.win.pos += 1;
                    continue;
                }
                Some(b']') => {
                    self.win.pos += 1;
                    self.state = match self.form {
                        Form::Object => State::Trailer,
                        Form::Array => State::Done,
                    };
                    continue;
                }
                _ => {}
            }
            let offset = self.win.offset();
            let mut fields = Fields::default();
            let is_obj = c == Some(b'{');
            let r = self
                .win
                .scan(&mut self.flags, |b, fl| {
                    if is_obj {
                        json::parse_event(b, 0, &mut fields, fl)
                    } else {
                        json::scan_value(b, 0, fl)
                    }
                })
                .map_err(|e| self.io(e))?;
            match r {
                Scanned::Ok(len) => {
                    let start = self.win.pos;
                    self.win.pos += len;
                    if !is_obj {
                        self.stats.skip(SkipReason::NotObject, offset);
                        continue;
                    }
                    self.fields = fields;
                    if let Some(reason) = self.check(start, start + len) {
                        self.stats.skip(reason, offset);
                        continue;
                    }
                    self.stats.big_ints_elsewhere += self.flags.big_ints.len() as u64;
                    self.stats.events += 1;
                    self.cur = (start, start + len, offset);
                    return Ok(true);
                }
                Scanned::Bad(at, what) => {
                    self.stats.stopped = Some((offset + at as u64, what));
                    self.state = State::Done;
                }
                Scanned::Eof => {
                    self.stats.truncated = true;
                    self.state = State::Done;
                }
                Scanned::TooBig => {
                    self.stats.skip(SkipReason::TooBig, offset);
                    if !self.win.skip_big().map_err(|e| self.io(e))? {
                        self.stats.truncated = true;
                        self.state = State::Done;
                    }
                }
            }
        }
    }

    /// Checks a parsed event; returns why it must be skipped, if it must.
    fn check(&self, s: usize, e: usize) -> Option<SkipReason> {
        let raw = &self.win.buf[s..e];
        let f = &self.fields;
        if self.flags.control_char {
            return Some(SkipReason::ControlChar);
        }
        if self.flags.non_ascii && std::str::from_utf8(raw).is_err() {
            return Some(SkipReason::InvalidUtf8);
        }
        let Some(ph) = f.ph else {
            return Some(SkipReason::MissingPh);
        };
        let ph = ph.of(raw);
        if ph.len() < 3 || ph[0] != b'"' {
            return Some(SkipReason::BadFieldType);
        }
        let Some(pid) = f.pid else {
            return Some(SkipReason::MissingPid);
        };
        if !self.flags.big_ints.is_empty() {
            for sp in [f.pid, f.tid, f.ts, f.dur, f.id, f.bind_id].iter().flatten() {
                let (a, b) = (sp.start as usize, sp.end as usize);
                if self.flags.big_ints.iter().any(|&(x, y)| x == a && y == b) {
                    return Some(SkipReason::BigIntField);
                }
            }
        }
        let pid0 = pid.of(raw).first().copied().unwrap_or(0);
        if !(pid0 == b'"' || pid0 == b'-' || pid0.is_ascii_digit()) {
            return Some(SkipReason::BadFieldType);
        }
        let is_num = |sp: Span| {
            let c = sp.of(raw).first().copied().unwrap_or(0);
            c == b'-' || c.is_ascii_digit()
        };
        match f.ts {
            None if ph[1] != b'M' => return Some(SkipReason::MissingTs),
            Some(ts) if !is_num(ts) => return Some(SkipReason::BadFieldType),
            _ => {}
        }
        match f.dur {
            None if ph[1] == b'X' => return Some(SkipReason::MissingDur),
            Some(d) if !is_num(d) => return Some(SkipReason::BadFieldType),
            _ => {}
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(s: &str) -> (Vec<String>, TraceReader) {
        let mut r =
            TraceReader::from_reader("t.json", Box::new(std::io::Cursor::new(s.to_owned())))
                .unwrap();
        let mut names = Vec::new();
        while let Some(ev) = r.next_event().unwrap() {
            names.push(json::unescape(ev.name_raw().unwrap()).unwrap());
        }
        (names, r)
    }

    #[test]
    fn object_form_with_keys_around_events() {
        let (names, r) = read(
            "\n {\"schemaVersion\": 1, \"traceEvents\": [ {\"ph\":\"X\",\"name\":\"a\",\"pid\":1,\"ts\":1,\"dur\":2},\n{\"ph\":\"i\",\"name\":\"b\",\"pid\":\"Spans\",\"ts\":3} ], \"traceName\": \"x\"}",
        );
        assert_eq!(names, ["a", "b"]);
        assert_eq!(r.meta("schemaVersion"), Some(&Value::from(1)));
        assert_eq!(r.meta("traceName"), Some(&Value::from("x")));
        assert!(r.warnings().is_empty());
    }

    #[test]
    fn array_form_without_closing_bracket() {
        let (names, r) = read("[{\"ph\":\"X\",\"name\":\"a\",\"pid\":1,\"ts\":1,\"dur\":2},\n{\"ph\":\"X\",\"name\":\"b\",\"pid\":1,\"ts\":1,\"dur\":2},\n{\"ph\":\"X\",\"na");
        assert_eq!(names, ["a", "b"]);
        assert!(r.stats().truncated);
        assert!(r.warnings().is_empty());
    }

    #[test]
    fn small_buffers_and_events_across_refills() {
        let mut s = String::from("{\"traceEvents\":[");
        for i in 0..50_000 {
            s.push_str(&format!(
                "{{\"ph\":\"X\",\"name\":\"n{i}\",\"pid\":1,\"tid\":2,\"ts\":{i}.5,\"dur\":1}},"
            ));
        }
        s.push_str("]}");
        let (names, r) = read(&s);
        assert_eq!(names.len(), 50_000);
        assert_eq!(names[49_999], "n49999");
        assert_eq!(r.stats().bytes as usize, s.len());
    }
}
