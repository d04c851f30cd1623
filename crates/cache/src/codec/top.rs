//! The top level of a cache document, split in one pass over the text:
//! `format` and `version` checked, `metadata` parsed, each section's
//! entries left as raw JSON for the codec to read one by one.
//!
//! This module owns which files are refused ([`ParseError`]), the
//! warnings about the document's shape (duplicate fields and sections,
//! sections that are not arrays), and what a newer minor version added
//! outside the entries (its version and unknown fields, kept in [`Extras`]
//! for the next rewrite). It never reads an entry.

use super::scan::compact;
use super::{ParseError, FORMAT_MAJOR, FORMAT_NAME};
use crate::blocklist::Blocklist;
use crate::document::{Extras, Fields, Metadata};
use crate::entry::{Identity, Section};
use serde::de::{IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;
use std::collections::BTreeMap;
use std::fmt;

/// The top-level object as written, keys in file order, duplicates kept.
struct TopLevel<'a>(Vec<(String, TopValue<'a>)>);

/// A top-level value: sections are split into raw entries in the same
/// single pass over the text; everything else stays raw.
enum TopValue<'a> {
    Raw(&'a RawValue),
    Section(SectionValue<'a>),
}

/// What a section name held.
enum SectionValue<'a> {
    /// An array: its elements, unparsed.
    Entries(Vec<&'a RawValue>),
    /// An object (the TensorRT-LLM layout).
    Object,
    /// Anything else.
    Other,
}

impl<'de: 'a, 'a> Deserialize<'de> for SectionValue<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = SectionValue<'a>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                let mut v = Vec::with_capacity(seq.size_hint().unwrap_or(0));
                while let Some(e) = seq.next_element::<&'de RawValue>()? {
                    v.push(e);
                }
                Ok(SectionValue::Entries(v))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(SectionValue::Object)
            }
            fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
                Ok(SectionValue::Other)
            }
            fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
                Ok(SectionValue::Other)
            }
            fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
                Ok(SectionValue::Other)
            }
            fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
                Ok(SectionValue::Other)
            }
            fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
                Ok(SectionValue::Other)
            }
            fn visit_unit<E>(self) -> Result<Self::Value, E> {
                Ok(SectionValue::Other)
            }
        }
        d.deserialize_any(V(std::marker::PhantomData))
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for TopLevel<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = TopLevel<'a>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut fields = Vec::new();
                while let Some(k) = map.next_key::<String>()? {
                    let v = if Section::parse(&k).is_some() {
                        TopValue::Section(map.next_value::<SectionValue<'de>>()?)
                    } else {
                        TopValue::Raw(map.next_value::<&'de RawValue>()?)
                    };
                    fields.push((k, v));
                }
                Ok(TopLevel(fields))
            }
        }
        d.deserialize_map(V(std::marker::PhantomData))
    }
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct MetadataIn {
    lib_version: String,
    host: String,
    created_unix: u64,
    updated_unix: u64,
    environments: BTreeMap<String, Box<RawValue>>,
}

fn parse_version(v: &RawValue) -> Result<(u32, u32), ParseError> {
    let s: String = serde_json::from_str(v.get()).map_err(|_| {
        ParseError::Unparseable(format!(
            "\"version\" is {}, expected a string like \"1.0\"",
            v.get()
        ))
    })?;
    let parsed =
        s.split_once('.').and_then(|(a, b)| Some((a.parse::<u32>().ok()?, b.parse::<u32>().ok()?)));
    // A version string of another shape (e.g. "1.0.1") is a format this
    // build does not know, not damage: refused and left in place.
    parsed.ok_or_else(|| {
        ParseError::Unsupported(format!(
            "format version \"{s}\" is not MAJOR.MINOR (like \"1.0\"); this ranktune does not \
             know that format and leaves the file alone: use the ranktune that wrote it"
        ))
    })
}

/// The fields of the JSON object `raw` not named in `known`, compacted
/// (empty when `raw` is not an object).
fn unknown_fields(raw: &RawValue, known: &[&str]) -> Fields {
    let all: BTreeMap<&str, &RawValue> = serde_json::from_str(raw.get()).unwrap_or_default();
    all.into_iter()
        .filter(|(name, _)| !known.contains(name))
        .map(|(name, value)| (name.to_string(), compact(value.get())))
        .collect()
}

const METADATA_FIELDS: &[&str] =
    &["lib_version", "host", "created_unix", "updated_unix", "environments"];
const IDENTITY_FIELDS: &[&str] =
    &["lib_version", "device_kind", "device_name", "capability", "cores"];

/// The `metadata` block, with its and its identities' unknown fields put
/// into `extras`.
fn parse_metadata(raw: &RawValue, warnings: &mut Vec<String>, extras: &mut Extras) -> Metadata {
    extras.metadata.clear();
    extras.environments.clear();
    let m: MetadataIn = match serde_json::from_str(raw.get()) {
        Ok(m) => m,
        Err(e) => {
            warnings.push(format!("metadata block ignored: {e}"));
            return Metadata::default();
        }
    };
    extras.metadata = unknown_fields(raw, METADATA_FIELDS);
    let mut environments = BTreeMap::new();
    for (digest, raw_id) in m.environments {
        match serde_json::from_str::<Identity>(raw_id.get()) {
            Ok(id) => {
                let unknown = unknown_fields(&raw_id, IDENTITY_FIELDS);
                if !unknown.is_empty() {
                    extras.environments.insert(digest.clone(), unknown);
                }
                environments.insert(digest, id);
            }
            Err(e) => warnings.push(format!("metadata.environments[{digest}] ignored: {e}")),
        }
    }
    Metadata {
        lib_version: m.lib_version,
        host: m.host,
        created_unix: m.created_unix,
        updated_unix: m.updated_unix,
        environments,
    }
}

/// The warning for a top-level field named like a section that is not one
/// this build can use: kept as it is, not loaded.
pub(super) fn unrecognised_section(name: &str) -> String {
    format!(
        "section {name:?} is not a section this ranktune uses (sections are \"shared\" and \
         \"rank_N\" with N from 0 to {}, written without leading zeros): its entries are not \
         loaded, and it is kept as it is through every rewrite",
        u32::MAX
    )
}

/// The top level of a document: metadata parsed, sections still raw.
pub(super) struct Top<'a> {
    /// The `metadata` block (default when missing or unreadable).
    pub metadata: Metadata,
    /// Each section's entries as raw JSON, in file order (duplicates kept).
    pub sections: Vec<(Section, Vec<&'a RawValue>)>,
    /// One line per problem found so far.
    pub warnings: Vec<String>,
    /// Sections skipped as malformed.
    pub bad_entries: usize,
    /// The blocklist (`blocklist` and, in an update, `blocklist_cleared`).
    pub blocklist: Blocklist,
    /// The version read and the unknown fields outside the sections.
    pub extras: Extras,
}

/// Splits a document into its top-level parts; `None` for a blank input
/// (an empty cache). Refuses what must not be read or rewritten.
pub(super) fn parse_top(bytes: &[u8]) -> Result<Option<Top<'_>>, ParseError> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    let text = std::str::from_utf8(bytes).map_err(|e| {
        ParseError::Unparseable(format!(
            "not UTF-8 text (invalid byte at offset {})",
            e.valid_up_to()
        ))
    })?;
    let top: TopLevel<'_> = serde_json::from_str(text).map_err(|e| {
        let what = if e.is_eof() { "truncated JSON" } else { "not valid JSON" };
        ParseError::Unparseable(format!("{what}: {e}"))
    })?;

    let mut out = Top {
        metadata: Metadata::default(),
        sections: Vec::new(),
        warnings: Vec::new(),
        bad_entries: 0,
        blocklist: Blocklist::default(),
        extras: Extras::default(),
    };
    let mut seen_format = false;
    let mut seen_version = false;
    let mut seen_metadata = false;
    let mut raw_sections: Vec<(Section, SectionValue<'_>)> = Vec::new();
    for (name, value) in top.0 {
        let value = match value {
            TopValue::Section(v) => {
                if let Some(section) = Section::parse(&name) {
                    raw_sections.push((section, v));
                }
                continue;
            }
            TopValue::Raw(v) => v,
        };
        match name.as_str() {
            "format" => {
                let f: Option<String> = serde_json::from_str(value.get()).ok();
                if f.as_deref() != Some(FORMAT_NAME) {
                    return Err(ParseError::Unsupported(format!(
                        "\"format\" is {}, not \"{FORMAT_NAME}\": not a ranktune cache",
                        value.get()
                    )));
                }
                if seen_format {
                    out.warnings.push("duplicate \"format\" field".into());
                }
                seen_format = true;
            }
            "version" => {
                let (major, minor) = parse_version(value)?;
                if major != FORMAT_MAJOR {
                    return Err(ParseError::Unsupported(format!(
                        "format version {major}.{minor} is not supported by this ranktune (reads {FORMAT_MAJOR}.x); \
                         upgrade ranktune, or use another cache file"
                    )));
                }
                if seen_version {
                    out.warnings.push("duplicate \"version\" field".into());
                }
                seen_version = true;
                out.extras.minor = minor;
            }
            "metadata" => {
                if seen_metadata {
                    out.warnings.push("duplicate \"metadata\" block; the last one is used".into());
                }
                seen_metadata = true;
                out.metadata = parse_metadata(value, &mut out.warnings, &mut out.extras);
            }
            "blocklist" => crate::blocklist::read_array(
                value.get(),
                false,
                &mut out.blocklist,
                &mut out.warnings,
            ),
            "blocklist_cleared" => crate::blocklist::read_array(
                value.get(),
                true,
                &mut out.blocklist,
                &mut out.warnings,
            ),
            // A newer minor version may add top-level fields: keep them.
            // A name that looks like a section but is not one this build
            // can use (`rank_4294967296`, `rank_01`) is kept the same way,
            // and said: its entries are not loaded.
            other => {
                if other.starts_with("rank_") {
                    out.warnings.push(unrecognised_section(other));
                } else {
                    tracing::debug!("keeping unknown top-level field {other:?}");
                }
                out.extras.top.insert(other.to_string(), compact(value.get()));
            }
        }
    }
    let mut seen_sections = std::collections::BTreeSet::new();
    for (section, raw) in raw_sections {
        let name = section.name();
        let entries: Vec<&RawValue> = match raw {
            SectionValue::Entries(v) => v,
            other => {
                if !seen_format && matches!(other, SectionValue::Object) {
                    return Err(ParseError::Unsupported(format!(
                        "section \"{name}\" is an object, not an array: this looks like a TensorRT-LLM cache; \
                         convert it with `ranktune cache import NEW.json {{THIS_FILE}} --format trtllm`"
                    )));
                }
                out.bad_entries += 1;
                out.warnings.push(format!("section {name} skipped: expected an array of entries"));
                continue;
            }
        };
        if !seen_sections.insert(section) {
            out.warnings.push(format!("section {name} appears twice; both are loaded"));
        }
        out.sections.push((section, entries));
    }
    Ok(Some(out))
}
