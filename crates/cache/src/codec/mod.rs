//! The JSON text of a ranktune cache file: the only place it is parsed
//! and written, to and from the one document model, [`CacheData`].
//!
//! [`write()`] writes a document in one canonical form (the same content
//! always gives the same bytes); [`read`] reads one back, skipping bad
//! entries with a warning that names them. Entries are read and written as
//! whatever the document holds them as ([`Stored`]): parsed [`Entry`]s, or,
//! for the file store's folds, [`EntryText`] — each entry's compact JSON,
//! of which only the key is read, so a fold costs a scan and a copy and
//! passes entries of a newer version through untouched. For big files,
//! `read_selected` reads only chosen sections of a document whose top level
//! was scanned (`index`), and `write_streaming` writes a document with
//! other sections' bytes copied in, a MiB at a time. It never touches the
//! filesystem (callers hand it readers and byte ranges) and never panics on
//! input.
//!
//! Layout (version 1.0):
//!
//! ```text
//! {
//!   "format": "ranktune-cache",
//!   "version": "1.0",
//!   "metadata": { "lib_version": …, "host": …, "created_unix": …, "updated_unix": …,
//!                 "environments": { "<digest>": { identity }, … } },
//!   "shared": [
//!     {"op":…,"runner":…,"fingerprint":…,"bucket":[[…]],"runner_index":…,"tactic":…,
//!      "time_us":…,"checksum":…,"env":…,"created_unix":…,"candidates":[…]},
//!     …
//!   ],
//!   "rank_0": [ … ],
//!   …
//! }
//! ```
//!
//! Each section is an array of entries sorted by key, **one entry per line**,
//! so a changed decision is a one-line diff. Sections appear as `shared`,
//! then ranks in numeric order; empty sections are left out.
//!
//! A file of a newer minor version (`1.x`) reads like ours; what it added is
//! kept in the document's extras and written back: its version (we never
//! write a lower one than we read), unknown fields of the top level (after
//! `metadata`), of `metadata` (after `environments`) and of identities
//! (after their known fields), each sorted by name; entries' unknown fields
//! stay in their text wherever the document holds entries as text.
//!
//! Version 1.1 adds the top-level `blocklist` (after `metadata`): an array
//! of records, one per line, sorted by key (`crate::blocklist`); a file
//! without one is still written as 1.0, byte for byte as before. An update
//! (a spool file) may also hold `blocklist_cleared`, the records it clears.

mod index;
mod scan;

pub(crate) use index::{scan as scan_index, Index, ScanError};
mod top;

use crate::blocklist::Blocklist;
use crate::document::{CacheData, Extras, Fields, Metadata};
use crate::entry::{Candidate, Entry, EntryKey, Section};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use std::collections::BTreeSet;

/// The `format` field of every ranktune cache file.
pub const FORMAT_NAME: &str = "ranktune-cache";
/// The major version this build reads and writes; files with another major
/// version are refused, never rewritten.
pub const FORMAT_MAJOR: u32 = 1;
/// The minor version this build writes for a file without a blocklist;
/// newer minors (extra fields) load.
pub const FORMAT_MINOR: u32 = 0;
/// The minor version of a file with a blocklist (the `blocklist` field,
/// added in 1.1): a 1.0 reader keeps it as an unknown field through every
/// rewrite, so only files that have one say 1.1.
pub const BLOCKLIST_MINOR: u32 = 1;

/// Why a document could not be read at all.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ParseError {
    /// Not a JSON object (truncated, not UTF-8, not JSON, …): the file is
    /// damaged and may be set aside.
    #[error("{0}")]
    Unparseable(String),
    /// A well-formed file this build must not touch: another format, a
    /// future major version, or a TensorRT-LLM cache.
    #[error("{0}")]
    Unsupported(String),
}

/// A document that parsed, with what had to be skipped.
#[derive(Clone, Debug)]
pub struct Parsed<E = Entry> {
    /// Everything that loaded.
    pub data: CacheData<E>,
    /// One line per skipped part, each naming it.
    pub warnings: Vec<String>,
    /// Number of entries skipped as malformed.
    pub bad_entries: usize,
}

impl<E> Default for Parsed<E> {
    fn default() -> Self {
        Parsed { data: CacheData::default(), warnings: Vec::new(), bad_entries: 0 }
    }
}

/// Parses a ranktune cache document. Empty input is an empty cache; bad
/// entries are skipped (counted, each named in a warning); a file that is
/// not a JSON object is [`ParseError::Unparseable`]; another format or a
/// future major version is [`ParseError::Unsupported`].
///
/// ```
/// use ranktune_cache::{cache_to_bytes, parse_cache, CacheData};
/// let bytes = cache_to_bytes(&CacheData::default());
/// assert!(parse_cache(&bytes).unwrap().data.is_empty());
/// assert!(parse_cache(b"{\"format\": \"other\"}").is_err());
/// ```
pub fn parse_cache(bytes: &[u8]) -> Result<Parsed, ParseError> {
    read(bytes, false)
}

/// Serializes a whole document in canonical form: the same content always
/// gives byte-identical output.
pub fn cache_to_bytes(data: &CacheData) -> Vec<u8> {
    write(data)
}

// ------------------------------------------------------------ entries

/// How the codec reads and writes entries held as `Self`.
pub(crate) trait Stored: Sized + PartialEq {
    /// Reads entry `index` of section `section` from its raw JSON; `Err`
    /// is the warning for an entry that is skipped. `strict` (text only)
    /// also parses and validates the whole entry.
    fn read(
        section: &str,
        index: usize,
        raw: &RawValue,
        strict: bool,
    ) -> Result<Read<Self>, String>;

    /// Whether `new`, found after `old` under the same key in the same
    /// section, takes its place.
    fn replaces(old: &Self, new: &Self) -> bool;

    /// Appends the entry as one line of compact JSON.
    fn write(&self, key: &EntryKey, out: &mut Vec<u8>);

    /// About how many bytes [`Stored::write`] appends.
    fn size_hint(&self) -> usize;
}

/// One entry as read.
pub(crate) enum Read<E> {
    /// Its key and the entry.
    Keyed(EntryKey, E),
    /// Its compact JSON: the key could not be read, so it is kept verbatim.
    Unkeyed(Box<str>),
}

impl Stored for Entry {
    fn read(section: &str, index: usize, raw: &RawValue, _: bool) -> Result<Read<Self>, String> {
        parse_entry(section, index, raw).map(|(k, e)| Read::Keyed(k, e))
    }

    /// The newer measurement wins; on a tie, the later one.
    fn replaces(old: &Self, new: &Self) -> bool {
        new.created_unix >= old.created_unix
    }

    fn write(&self, key: &EntryKey, out: &mut Vec<u8>) {
        push_json(
            out,
            &EntryOut {
                op: &key.op,
                runner: &key.runner,
                fingerprint: &key.fingerprint,
                bucket: &key.bucket,
                runner_index: self.runner_index,
                tactic: &self.tactic,
                time_us: self.time_us,
                checksum: &self.checksum,
                env: &self.env,
                created_unix: self.created_unix,
                candidates: &self.candidates,
            },
        );
    }

    fn size_hint(&self) -> usize {
        256
    }
}

/// An entry as its compact one-line JSON text, as the file store's folds
/// hold entries: only the key was read, and the text is written back as it
/// is — a newer version's fields, and values this build would reject, pass
/// through untouched (unless a strict read dropped them).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct EntryText(Box<str>);

impl EntryText {
    /// The text of `entry` under `key`, as the codec writes it.
    pub(crate) fn new(key: &EntryKey, entry: &Entry) -> EntryText {
        let mut out = Vec::with_capacity(entry.size_hint());
        entry.write(key, &mut out);
        // serde_json writes UTF-8; nothing is lost here.
        EntryText(String::from_utf8_lossy(&out).into())
    }

    /// The text.
    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }

    /// The entry, fully parsed and validated; `None` when it is malformed.
    pub(crate) fn entry(&self) -> Option<Entry> {
        let raw: &RawValue = serde_json::from_str(&self.0).ok()?;
        parse_entry("", 0, raw).ok().map(|(_, e)| e)
    }
}

impl EntryText {
    /// The entry's `created_unix`, read from its text (0 when unreadable):
    /// what decides between two entries under one key.
    fn created_unix(&self) -> u64 {
        #[derive(Deserialize)]
        struct Created {
            #[serde(default)]
            created_unix: u64,
        }
        serde_json::from_str::<Created>(&self.0).map(|c| c.created_unix).unwrap_or(0)
    }
}

impl Stored for EntryText {
    fn read(
        section: &str,
        index: usize,
        raw: &RawValue,
        strict: bool,
    ) -> Result<Read<Self>, String> {
        if strict {
            let (key, _) = parse_entry(section, index, raw)
                .map_err(|msg| msg.replace(" skipped:", " dropped:"))?;
            return Ok(Read::Keyed(key, EntryText(scan::compact(raw.get()))));
        }
        let text = scan::compact(raw.get());
        Ok(match scan::key_of(&text) {
            Some(key) => Read::Keyed(key, EntryText(text)),
            None => Read::Unkeyed(text),
        })
    }

    /// The same rule as for parsed entries: the newer measurement wins;
    /// on a tie, the later one.
    fn replaces(old: &Self, new: &Self) -> bool {
        new.created_unix() >= old.created_unix()
    }

    fn write(&self, _: &EntryKey, out: &mut Vec<u8>) {
        out.extend_from_slice(self.0.as_bytes());
    }

    fn size_hint(&self) -> usize {
        self.0.len()
    }
}

// ---------------------------------------------------------------- writing

#[derive(Serialize)]
struct EntryOut<'a> {
    op: &'a str,
    runner: &'a str,
    fingerprint: &'a str,
    bucket: &'a [Vec<crate::Dim>],
    runner_index: u32,
    tactic: &'a serde_json::Value,
    time_us: f64,
    checksum: &'a str,
    env: &'a str,
    created_unix: u64,
    candidates: &'a [Candidate],
}

fn json_str(s: &str) -> String {
    // Serializing a &str cannot fail.
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".to_string())
}

fn push_json<T: Serialize>(out: &mut Vec<u8>, value: &T) {
    // Writing into a Vec cannot fail, and our types hold no maps with
    // non-string keys and no custom serializers, so this cannot fail.
    let _ = serde_json::to_writer(&mut *out, value);
}

/// Appends `"name":<sep>value` for each field, each after `before`.
fn push_fields(out: &mut Vec<u8>, fields: &Fields, before: &str, sep: &str) {
    for (name, value) in fields {
        out.extend_from_slice(before.as_bytes());
        out.extend_from_slice(json_str(name).as_bytes());
        out.push(b':');
        out.extend_from_slice(sep.as_bytes());
        out.extend_from_slice(value.as_bytes());
    }
}

/// The canonical writer: the header, then entries section by section, one
/// per line; a section is opened by its first entry, so empty ones are
/// left out.
struct Writer {
    out: Vec<u8>,
    open: Option<Section>,
}

impl Writer {
    fn new(capacity: usize, m: &Metadata, blocklist: &Blocklist, extras: &Extras) -> Writer {
        let mut out = Vec::with_capacity(capacity);
        out.extend_from_slice(b"{\n");
        out.extend_from_slice(format!("  \"format\": {},\n", json_str(FORMAT_NAME)).as_bytes());
        // Never lower than the version read, and 1.1 when the file has a
        // blocklist. (FORMAT_MINOR is 0 today.)
        #[allow(clippy::unnecessary_min_or_max)]
        let mut minor = FORMAT_MINOR.max(extras.minor);
        if !blocklist.is_empty() {
            minor = minor.max(BLOCKLIST_MINOR);
        }
        out.extend_from_slice(format!("  \"version\": \"{FORMAT_MAJOR}.{minor}\",\n").as_bytes());
        out.extend_from_slice(b"  \"metadata\": {\n");
        out.extend_from_slice(
            format!("    \"lib_version\": {},\n", json_str(&m.lib_version)).as_bytes(),
        );
        out.extend_from_slice(format!("    \"host\": {},\n", json_str(&m.host)).as_bytes());
        out.extend_from_slice(format!("    \"created_unix\": {},\n", m.created_unix).as_bytes());
        out.extend_from_slice(format!("    \"updated_unix\": {},\n", m.updated_unix).as_bytes());
        out.extend_from_slice(b"    \"environments\": {");
        for (i, (digest, id)) in m.environments.iter().enumerate() {
            out.extend_from_slice(if i == 0 { b"\n      " } else { b",\n      " });
            out.extend_from_slice(json_str(digest).as_bytes());
            out.extend_from_slice(b": ");
            push_json(&mut out, id);
            if let Some(fields) = extras.environments.get(digest).filter(|f| !f.is_empty()) {
                // Reopen the identity's object for its unknown fields.
                out.pop();
                push_fields(&mut out, fields, ",", "");
                out.push(b'}');
            }
        }
        if !m.environments.is_empty() {
            out.extend_from_slice(b"\n    ");
        }
        out.extend_from_slice(b"}");
        push_fields(&mut out, &extras.metadata, ",\n    ", " ");
        out.extend_from_slice(b"\n  }");
        crate::blocklist::write_fields(blocklist, &mut out);
        push_fields(&mut out, &extras.top, ",\n  ", " ");
        Writer { out, open: None }
    }

    /// Writes one entry line of `section` with `line`; sections must come
    /// in order.
    fn entry(&mut self, section: Section, line: impl FnOnce(&mut Vec<u8>)) {
        if self.open == Some(section) {
            self.out.extend_from_slice(b",\n    ");
        } else {
            self.close_section();
            self.out.extend_from_slice(
                format!(",\n  {}: [\n    ", json_str(&section.name())).as_bytes(),
            );
            self.open = Some(section);
        }
        line(&mut self.out);
    }

    fn close_section(&mut self) {
        if self.open.take().is_some() {
            self.out.extend_from_slice(b"\n  ]");
        }
    }

    fn finish(mut self) -> Vec<u8> {
        self.close_section();
        self.out.extend_from_slice(b"\n}\n");
        self.out
    }

    /// Moves what is buffered to `sink` once it is over `at` bytes.
    fn drain(&mut self, sink: &mut dyn std::io::Write, at: usize) -> std::io::Result<()> {
        if self.out.len() >= at {
            sink.write_all(&self.out)?;
            self.out.clear();
        }
        Ok(())
    }
}

/// What a streaming write copies instead of writing from the document: a
/// section whose value is the file's bytes `start..end` (an array, as it
/// was), holding `elements` entries.
#[derive(Clone, Debug)]
pub(crate) struct Copied {
    pub section: Section,
    pub start: u64,
    pub end: u64,
    pub elements: u64,
}

/// One section's entries: by key, and those kept verbatim because their key
/// could not be read.
pub(crate) type SectionEntries<E> = (std::collections::BTreeMap<EntryKey, E>, BTreeSet<Box<str>>);

/// A section [`write_streaming`] builds only when it gets to it:
/// `build(section)` returns its entries, written and dropped before the
/// next section, so a fold holds one such section at a time.
pub(crate) type LazySection<'a, E> = dyn FnMut(Section) -> std::io::Result<SectionEntries<E>> + 'a;

/// Writes `doc` in canonical form to `sink`, with the sections of `copies`
/// (none of which `doc` holds) placed in order and their bytes copied by
/// `copy(start, end, sink)` — so a fold never holds the sections it does
/// not change — and the sections in `lazy` (none of which `doc` holds
/// either) built by `build` when their turn comes (an empty one is left
/// out, as `doc`'s empty sections are by the caller). Holds at most about
/// a MiB of output at a time.
pub(crate) fn write_streaming<E: Stored>(
    doc: &CacheData<E>,
    copies: &[Copied],
    lazy: &BTreeSet<Section>,
    sink: &mut dyn std::io::Write,
    copy: &mut dyn FnMut(u64, u64, &mut dyn std::io::Write) -> std::io::Result<()>,
    build: &mut LazySection<'_, E>,
) -> std::io::Result<()> {
    const BUF: usize = 1 << 20;
    let unkeyed = &doc.extras.unkeyed;
    let mut w = Writer::new(BUF + 4096, &doc.metadata, &doc.blocklist, &doc.extras);
    let copied: std::collections::BTreeMap<Section, &Copied> =
        copies.iter().map(|c| (c.section, c)).collect();
    let sections: BTreeSet<Section> = doc
        .sections
        .keys()
        .chain(unkeyed.keys())
        .chain(copied.keys())
        .chain(lazy.iter())
        .copied()
        .collect();
    for section in sections {
        if let Some(c) = copied.get(&section) {
            w.close_section();
            w.out.extend_from_slice(format!(",\n  {}: ", json_str(&section.name())).as_bytes());
            w.drain(sink, 0)?;
            copy(c.start, c.end, sink)?;
            continue;
        }
        if lazy.contains(&section) {
            let (keyed, verbatim) = build(section)?;
            for (key, entry) in &keyed {
                w.entry(section, |out| entry.write(key, out));
                w.drain(sink, BUF)?;
            }
            for text in &verbatim {
                w.entry(section, |out| out.extend_from_slice(text.as_bytes()));
                w.drain(sink, BUF)?;
            }
            continue;
        }
        for (key, entry) in doc.sections.get(&section).into_iter().flatten() {
            w.entry(section, |out| entry.write(key, out));
            w.drain(sink, BUF)?;
        }
        for text in unkeyed.get(&section).into_iter().flatten() {
            w.entry(section, |out| out.extend_from_slice(text.as_bytes()));
            w.drain(sink, BUF)?;
        }
    }
    sink.write_all(&w.finish())
}

/// Reads the part of a scanned document that `select` picks: every field
/// that is not a section (`format`, `version`, `metadata`, unknown fields,
/// unrecognised sections), and the sections `select` is true for; the other
/// sections' bytes are never fetched (an object-valued one is read as `{}`,
/// so a TensorRT-LLM layout is still refused). `fetch(start, end)` returns
/// the document's bytes `start..end`. Otherwise the same as [`read`].
pub(crate) fn read_selected<E: Stored>(
    index: &Index,
    fetch: &mut dyn FnMut(u64, u64) -> std::io::Result<Vec<u8>>,
    select: &dyn Fn(Section) -> bool,
    strict: bool,
) -> std::io::Result<Result<Parsed<E>, ParseError>> {
    let mut doc = Vec::new();
    doc.push(b'{');
    for f in &index.fields {
        let value = match Section::parse(&f.name) {
            Some(s) if !select(s) => match f.first {
                b'[' => continue,
                b'{' => b"{}".to_vec(),
                _ if f.end - f.start > 4096 => b"0".to_vec(),
                _ => fetch(f.start, f.end)?,
            },
            _ => fetch(f.start, f.end)?,
        };
        if doc.len() > 1 {
            doc.push(b',');
        }
        doc.extend_from_slice(json_str(&f.name).as_bytes());
        doc.push(b':');
        doc.extend_from_slice(&value);
    }
    doc.push(b'}');
    Ok(read(&doc, strict))
}

/// Serializes a document in canonical form: the same content always gives
/// byte-identical output. Entries whose key could not be read follow the
/// keyed ones of their section.
pub(crate) fn write<E: Stored>(doc: &CacheData<E>) -> Vec<u8> {
    let unkeyed = &doc.extras.unkeyed;
    let size: usize = doc.iter().map(|(_, _, e)| e.size_hint() + 6).sum::<usize>()
        + unkeyed.values().flatten().map(|t| t.len() + 6).sum::<usize>();
    let mut w = Writer::new(1024 + size, &doc.metadata, &doc.blocklist, &doc.extras);
    let sections: BTreeSet<Section> = doc.sections.keys().chain(unkeyed.keys()).copied().collect();
    for section in sections {
        for (key, entry) in doc.sections.get(&section).into_iter().flatten() {
            w.entry(section, |out| entry.write(key, out));
        }
        for text in unkeyed.get(&section).into_iter().flatten() {
            w.entry(section, |out| out.extend_from_slice(text.as_bytes()));
        }
    }
    w.finish()
}

// ---------------------------------------------------------------- reading

#[derive(Deserialize)]
struct EntryIn {
    op: String,
    runner: String,
    fingerprint: String,
    bucket: Vec<Vec<crate::Dim>>,
    runner_index: u32,
    tactic: serde_json::Value,
    time_us: f64,
    checksum: String,
    env: String,
    created_unix: u64,
    #[serde(default)]
    candidates: Vec<Candidate>,
}

/// Checks what JSON cannot express and serde does not check: times must be
/// finite and non-negative, names non-empty.
pub(crate) fn validate_entry(key: &EntryKey, entry: &Entry) -> Result<(), String> {
    fn time(what: &str, v: f64) -> Result<(), String> {
        if v.is_finite() && v >= 0.0 {
            Ok(())
        } else {
            Err(format!("{what} is {v}, expected a finite time >= 0"))
        }
    }
    if key.op.is_empty() {
        return Err("op is empty".into());
    }
    if key.runner.is_empty() {
        return Err("runner is empty".into());
    }
    time("time_us", entry.time_us)?;
    for (i, c) in entry.candidates.iter().enumerate() {
        if let Some(s) = &c.stats {
            time(&format!("candidates[{i}].min_us"), s.min_us)?;
            time(&format!("candidates[{i}].median_us"), s.median_us)?;
            time(&format!("candidates[{i}].p90_us"), s.p90_us)?;
            if !s.spread.is_finite() {
                return Err(format!("candidates[{i}].spread is {}", s.spread));
            }
        }
    }
    Ok(())
}

/// A short name for an entry that failed to load: its op/runner if those
/// fields are readable, else just its position.
fn describe_raw(section: &str, index: usize, raw: &RawValue) -> String {
    let mut name = format!("{section}[{index}]");
    if let Ok(serde_json::Value::Object(map)) = serde_json::from_str::<serde_json::Value>(raw.get())
    {
        let field = |k: &str| map.get(k).and_then(|v| v.as_str()).map(str::to_string);
        if let (Some(op), Some(runner)) = (field("op"), field("runner")) {
            name.push_str(&format!(" ({op}/{runner}"));
            if let Some(b) = map.get("bucket") {
                name.push_str(&format!(" {b}"));
            }
            name.push(')');
        }
    }
    name
}

/// Parses one entry's JSON text fully and validates it, for stores that
/// hold entries one by one (Redis); `Err` says what is wrong with it.
pub(crate) fn entry_from_str(text: &str) -> Result<(EntryKey, Entry), String> {
    let e: EntryIn = serde_json::from_str(text).map_err(|e| e.to_string())?;
    let key = EntryKey { op: e.op, runner: e.runner, fingerprint: e.fingerprint, bucket: e.bucket };
    let entry = Entry {
        runner_index: e.runner_index,
        tactic: e.tactic,
        time_us: e.time_us,
        candidates: e.candidates,
        checksum: e.checksum,
        env: e.env,
        created_unix: e.created_unix,
    };
    validate_entry(&key, &entry)?;
    Ok((key, entry))
}

/// Parses one entry fully and validates it.
fn parse_entry(section: &str, index: usize, raw: &RawValue) -> Result<(EntryKey, Entry), String> {
    let e: EntryIn = serde_json::from_str(raw.get()).map_err(|err| {
        let what = describe_raw(section, index, raw);
        crate::label::escape_control(&format!("bad entry {what} skipped: {err}")).into_owned()
    })?;
    let key = EntryKey { op: e.op, runner: e.runner, fingerprint: e.fingerprint, bucket: e.bucket };
    let entry = Entry {
        runner_index: e.runner_index,
        tactic: e.tactic,
        time_us: e.time_us,
        candidates: e.candidates,
        checksum: e.checksum,
        env: e.env,
        created_unix: e.created_unix,
    };
    validate_entry(&key, &entry).map_err(|why| {
        let text = format!("bad entry {section}[{index}] ({key}) skipped: {why}");
        crate::label::escape_control(&text).into_owned()
    })?;
    Ok((key, entry))
}

/// Reads a document, holding its entries as `E`. Empty input is an empty
/// cache; bad entries are skipped (counted, each named in a warning);
/// `strict` (for text entries) also parses every entry fully and drops bad
/// ones, as `cache prune` cleans up. See [`parse_cache`] for the errors.
pub(crate) fn read<E: Stored>(bytes: &[u8], strict: bool) -> Result<Parsed<E>, ParseError> {
    let Some(top) = top::parse_top(bytes)? else { return Ok(Parsed::default()) };
    let mut parsed = Parsed {
        data: CacheData {
            metadata: top.metadata,
            sections: Default::default(),
            blocklist: top.blocklist,
            extras: top.extras,
        },
        warnings: top.warnings,
        bad_entries: top.bad_entries,
    };
    for (section, entries) in top.sections {
        let name = section.name();
        for (i, raw) in entries.into_iter().enumerate() {
            let (key, entry) = match E::read(&name, i, raw, strict) {
                Ok(Read::Keyed(key, entry)) => (key, entry),
                Ok(Read::Unkeyed(text)) => {
                    parsed.data.extras.unkeyed.entry(section).or_default().insert(text);
                    continue;
                }
                Err(msg) => {
                    parsed.bad_entries += 1;
                    parsed.warnings.push(msg);
                    continue;
                }
            };
            let slot = parsed.data.sections.entry(section).or_default();
            match slot.get(&key) {
                Some(old) => {
                    parsed.warnings.push(format!(
                        "duplicate entry {name} {key}: the file holds it more than once; kept \
                         the newer one (created_unix), and the next rewrite of the section keeps \
                         only that one"
                    ));
                    if E::replaces(old, &entry) {
                        slot.insert(key, entry);
                    }
                }
                None => {
                    slot.insert(key, entry);
                }
            }
        }
    }
    Ok(parsed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::entry::Identity;

    fn sample() -> CacheData {
        let mut d = CacheData::default();
        d.metadata.lib_version = "0.1.0".into();
        d.metadata.environments.insert(
            "abc".into(),
            Identity {
                lib_version: "0.1.0".into(),
                device_kind: "cpu".into(),
                device_name: "X".into(),
                capability: "x86_64".into(),
                cores: 2,
            },
        );
        for s in [Section::Rank(10), Section::Shared, Section::Rank(2)] {
            d.insert(
                s,
                EntryKey {
                    op: "gemm".into(),
                    runner: "r".into(),
                    fingerprint: "f".into(),
                    bucket: crate::sizes_bucket(&[vec![1, 2]]),
                },
                Entry {
                    runner_index: 0,
                    tactic: serde_json::json!({"b": 1, "a": [1, 2]}),
                    time_us: 1.5,
                    candidates: vec![],
                    checksum: "c".into(),
                    env: "abc".into(),
                    created_unix: 7,
                },
            );
        }
        d
    }

    #[test]
    fn round_trip_and_order() {
        let d = sample();
        let bytes = cache_to_bytes(&d);
        let text = String::from_utf8(bytes.clone()).unwrap();
        let shared = text.find("\"shared\"").unwrap();
        let r2 = text.find("\"rank_2\"").unwrap();
        let r10 = text.find("\"rank_10\"").unwrap();
        assert!(shared < r2 && r2 < r10, "{text}");
        let back = parse_cache(&bytes).unwrap();
        assert!(back.warnings.is_empty(), "{:?}", back.warnings);
        assert_eq!(back.data, d);
        assert_eq!(cache_to_bytes(&back.data), bytes);
    }

    #[test]
    fn empty_inputs_are_ordinary() {
        assert!(parse_cache(b"").unwrap().data.is_empty());
        assert!(parse_cache(b"  \n").unwrap().data.is_empty());
        assert!(parse_cache(b"{}").unwrap().data.is_empty());
        assert!(parse_cache(cache_to_bytes(&CacheData::default()).as_slice())
            .unwrap()
            .data
            .is_empty());
    }

    #[test]
    fn text_entries_reproduce_canonical_bytes() {
        let mut d = sample();
        d.insert(
            Section::Rank(2),
            EntryKey {
                op: "we\"ird \\ op\n".into(),
                runner: "r ü".into(),
                fingerprint: "".into(),
                bucket: crate::sizes_bucket(&[vec![], vec![0, 18446744073709551615]]),
            },
            d.get(Section::Shared, &d.sections[&Section::Shared].keys().next().unwrap().clone())
                .unwrap()
                .clone(),
        );
        let bytes = cache_to_bytes(&d);
        let text = read::<EntryText>(&bytes, false).unwrap();
        assert_eq!(write(&text.data), bytes);
        assert!(text.data.extras.unkeyed.is_empty());
        for (section, entries) in &text.data.sections {
            let keys: Vec<_> = entries.keys().collect();
            let want: Vec<_> = d.sections[section].keys().collect();
            assert_eq!(keys, want);
        }
        let mut from_typed =
            CacheData::<EntryText> { metadata: d.metadata.clone(), ..CacheData::default() };
        for (section, key, entry) in d.iter() {
            from_typed.insert(section, key.clone(), EntryText::new(key, entry));
        }
        assert_eq!(write(&from_typed), bytes);
    }

    #[test]
    fn unkeyed_entries_are_kept_verbatim_after_the_keyed_ones() {
        let text = br#"{"format":"ranktune-cache","version":"1.0","rank_3":[{"op":1, "x": [1, 2]},
            {"op":"a","runner":"b","fingerprint":"c","bucket":[],"x":1}]}"#;
        let doc = read::<EntryText>(text, false).unwrap();
        assert_eq!(doc.data.len(), 1);
        let out = String::from_utf8(write(&doc.data)).unwrap();
        assert!(
            out.ends_with(
                "\"rank_3\": [\n    {\"op\":\"a\",\"runner\":\"b\",\"fingerprint\":\"c\",\"bucket\":[],\"x\":1},\n    {\"op\":1,\"x\":[1,2]}\n  ]\n}\n"
            ),
            "{out}"
        );
        let strict = read::<EntryText>(text, true).unwrap();
        assert_eq!((strict.data.stored_len(), strict.bad_entries), (0, 2));
        assert!(strict.warnings.iter().all(|w| w.contains(" dropped:")), "{:?}", strict.warnings);
    }

    #[test]
    fn a_newer_minor_version_keeps_its_version_and_unknown_fields() {
        let text = br#"{"format": "ranktune-cache", "version": "1.7", "zeta": [1, {"a": 2}],
            "metadata": {"host": "h", "site": "x", "environments": {"e": {"lib_version": "1",
            "device_kind": "cpu", "device_name": "n", "capability": "c", "cores": 2, "numa": 4}}},
            "alpha": true,
            "rank_0": [{"op":"a","runner":"b","fingerprint":"c","bucket":[],"runner_index":0,
            "tactic":1,"time_us":1.0,"checksum":"c","env":"e","created_unix":1,"new":{"x":1}}]}"#;
        let want = "{\n  \"format\": \"ranktune-cache\",\n  \"version\": \"1.7\",\n  \"metadata\": {\n    \"lib_version\": \"\",\n    \"host\": \"h\",\n    \"created_unix\": 0,\n    \"updated_unix\": 0,\n    \"environments\": {\n      \"e\": {\"lib_version\":\"1\",\"device_kind\":\"cpu\",\"device_name\":\"n\",\"capability\":\"c\",\"cores\":2,\"numa\":4}\n    },\n    \"site\": \"x\"\n  },\n  \"alpha\": true,\n  \"zeta\": [1,{\"a\":2}],\n  \"rank_0\": [\n    {\"op\":\"a\",\"runner\":\"b\",\"fingerprint\":\"c\",\"bucket\":[],\"runner_index\":0,\"tactic\":1,\"time_us\":1.0,\"checksum\":\"c\",\"env\":\"e\",\"created_unix\":1,\"new\":{\"x\":1}}\n  ]\n}\n";
        let doc = read::<EntryText>(text, false).unwrap();
        assert!(doc.warnings.is_empty(), "{:?}", doc.warnings);
        let out = String::from_utf8(write(&doc.data)).unwrap();
        assert_eq!(out, want);
        let again = read::<EntryText>(out.as_bytes(), false).unwrap();
        assert_eq!(String::from_utf8(write(&again.data)).unwrap(), want, "a fixed point");
        let typed = parse_cache(text).unwrap();
        assert_eq!(typed.data.len(), 1);
        assert!(String::from_utf8(cache_to_bytes(&typed.data)).unwrap().starts_with(&want[..120]));
    }
}
