//! Reading and folding a big cache without holding it: the main file is
//! scanned once for where its sections lie (`codec::scan_index`), then only
//! the sections that are needed are read and built — a rank's load reads
//! `shared` and its own rank; a fold builds the sections its spools (and a
//! probed edit, such as a collective save's removal of the rank entries its
//! shared entries supersede) change and copies every other section's bytes
//! from the old file to the new one as they were.
//!
//! This module owns which sections a fold copies rather than builds: a
//! section is copied when no spool touches it, a probed edit does not change
//! it (asked one section at a time), it appears once in the file, and it is
//! a non-empty array; anything else is built, so duplicates in a
//! section are resolved (newest wins, warned) whenever it is rewritten. It
//! never decides what to do with a file that does not scan or parse: it
//! answers `None`, and the whole-file path (which sets such files aside)
//! runs instead. It never takes or checks the lock; its callers do.

use super::{read, write, Aside, Edit, FileStore, MainFile, SectionEdit, SpoolRead};
use crate::codec::{
    self, Copied, EntryText, Index, ParseError, Parsed, ScanError, SectionEntries, Stored,
};
use crate::entry::Section;
use crate::error::io;
use crate::CacheError;
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

/// A fold's outcome: (entries after, entries an edit changed, warnings).
pub(super) type Folded = (usize, usize, Vec<String>);

/// An edit the streaming fold can run without holding every section: the
/// sections in `builds` (where the edit adds entries) and those spools
/// change are built and `edit` runs on them; every other section is read
/// alone and handed to `remove` (the edit's removals, for one section):
/// where it removes nothing the section is copied as it was, elsewhere it
/// is built again when the writer gets to it, `remove` applied, written and
/// dropped. So memory holds one such section at a time. What the writer's
/// `remove` calls removed is added to `removed`.
pub(super) struct Probed<'e, 'f> {
    pub edit: &'e mut Edit<'f>,
    pub remove: &'e SectionEdit<'f>,
    pub builds: &'e [Section],
    pub removed: &'e std::cell::Cell<usize>,
}

/// One section read alone: its entries, and the warnings about them.
type SectionRead = (SectionEntries<EntryText>, Vec<String>);

/// The scanned main file.
struct Scanned {
    opened: read::Opened,
    index: Index,
}

impl FileStore {
    /// Opens and scans the main file, passing over the sections `skip`
    /// picks unread (see `codec::scan_index`); `None` when it is missing,
    /// blank, or does not scan (left to the whole-file path).
    fn scan_main(&self, skip: &dyn Fn(Section) -> bool) -> Result<Option<Scanned>, CacheError> {
        let Some(opened) = read::open_regular(&self.path)? else { return Ok(None) };
        let by_name = |name: &str| Section::parse(name).is_some_and(skip);
        match codec::scan_index(&opened.file, &by_name) {
            Ok(Some(index)) => Ok(Some(Scanned { opened, index })),
            Ok(None) => Ok(None),
            Err(ScanError::Bad(why)) => {
                tracing::debug!("{} does not scan ({why}); reading it whole", self.path.display());
                Ok(None)
            }
            Err(ScanError::Io(e)) => Err(io("reading", &self.path)(e)),
        }
    }

    /// The part of the scanned main file that `select` picks; `None` when
    /// it does not parse (left to the whole-file path).
    fn read_scanned<E: Stored>(
        &self,
        s: &Scanned,
        select: &dyn Fn(Section) -> bool,
    ) -> Result<Option<Parsed<E>>, CacheError> {
        let file = &s.opened.file;
        let mut fetch = |a, b| read::read_range(file, a, b);
        match codec::read_selected::<E>(&s.index, &mut fetch, select, false)
            .map_err(io("reading", &self.path))?
        {
            Ok(doc) => Ok(Some(doc)),
            Err(ParseError::Unsupported(reason)) => {
                Err(CacheError::unsupported(&self.path, reason))
            }
            Err(ParseError::Unparseable(_)) => Ok(None),
        }
    }

    /// One section of the scanned main file, alone: its entries by key,
    /// those kept verbatim, and the warnings about its entries (keys it
    /// holds twice; the document's own warnings come with the main read);
    /// `None` when it does not parse.
    fn read_section(
        &self,
        s: &Scanned,
        section: Section,
    ) -> Result<Option<SectionRead>, CacheError> {
        let about = format!("duplicate entry {} ", section.name());
        Ok(self.read_scanned::<EntryText>(s, &|x| x == section)?.map(|mut one| {
            let warnings = one.warnings.into_iter().filter(|w| w.starts_with(&about)).collect();
            (
                (
                    one.data.sections.remove(&section).unwrap_or_default(),
                    one.data.extras.unkeyed.remove(&section).unwrap_or_default(),
                ),
                warnings,
            )
        }))
    }

    /// Reads the main file's sections that `select` picks (and everything
    /// outside the sections), without building the others; a file that
    /// does not scan or parse goes the whole-file way (`aside` says what
    /// happens to it).
    pub(super) fn read_main_selected<E: Stored>(
        &self,
        aside: Aside,
        select: &dyn Fn(Section) -> bool,
    ) -> Result<MainFile<E>, CacheError> {
        if let Some(scanned) = self.scan_main(&|s| !select(s))? {
            if let Some(mut doc) = self.read_scanned::<E>(&scanned, select)? {
                doc.data.sections.retain(|s, _| select(*s));
                return Ok(MainFile { doc, moved_aside: None });
            }
        }
        let mut main = self.read_main::<E>(aside, false)?;
        main.doc.data.sections.retain(|s, _| select(*s));
        main.doc.data.extras.unkeyed.retain(|s, _| select(*s));
        Ok(main)
    }

    /// A fold that builds only the sections its spools (and a [`Probed`]
    /// edit) change and copies the others (see the module docs). `None`
    /// when the main file is missing, blank, or does not scan or parse: then
    /// the whole-file fold runs.
    pub(super) fn fold_streaming(
        &self,
        locked: bool,
        mut edit: Option<Probed<'_, '_>>,
    ) -> Result<Option<Folded>, CacheError> {
        // A fold copies what it does not build: nothing is skipped unread.
        let Some(scanned) = self.scan_main(&|_| false)? else { return Ok(None) };
        let spool_dir = self.spool_path();
        let mut warnings = Vec::new();
        let mut spools = Vec::new();
        let mut folded: Vec<PathBuf> = Vec::new();
        let modes = super::trust::SideModes::of(&self.path);
        for path in
            super::spool::list_checked(&spool_dir, &self.path, modes, super::spool::SpoolUse::Fold)?
        {
            // Without the lock, another process's spool is never moved.
            match self.read_spool::<EntryText>(&path, locked)? {
                SpoolRead::Read(p) => {
                    spools.push(p);
                    folded.push(path);
                }
                SpoolRead::Gone => {}
                SpoolRead::Corrupt(msg)
                | SpoolRead::Unsupported(msg)
                | SpoolRead::NotAFile(msg) => warnings.push(msg),
            }
        }
        let mut touched: BTreeSet<Section> = spools
            .iter()
            .flat_map(|p| p.data.sections.keys().chain(p.data.extras.unkeyed.keys()))
            .copied()
            .collect();
        // Sections an edit removes from, built again one at a time when
        // the writer gets to them.
        let mut lazy: BTreeSet<Section> = BTreeSet::new();
        if let Some(e) = &edit {
            touched.extend(e.builds.iter().copied());
            // One section in memory at a time: read it, ask, drop it.
            for c in copies(&scanned.index, &touched) {
                let Some(((mut one, _), _)) = self.read_section(&scanned, c.section)? else {
                    return Ok(None);
                };
                if (e.remove)(c.section, &mut one) > 0 {
                    lazy.insert(c.section);
                }
            }
        }
        let copies: Vec<Copied> = copies(&scanned.index, &touched)
            .into_iter()
            .filter(|c| !lazy.contains(&c.section))
            .collect();
        let copied: BTreeSet<Section> = copies.iter().map(|c| c.section).collect();
        let Some(main) = self
            .read_scanned::<EntryText>(&scanned, &|s| !copied.contains(&s) && !lazy.contains(&s))?
        else {
            return Ok(None);
        };
        let Parsed { data: mut doc, warnings: main_warnings, .. } = main;
        let mut all: Vec<String> = main_warnings.into_iter().map(|w| self.named(w)).collect();
        all.append(&mut warnings);
        let mut changed = false;
        for p in spools {
            all.extend(p.warnings);
            changed |= doc.apply(p.data);
        }
        let edited = match &mut edit {
            Some(e) => (e.edit)(&mut doc)?,
            None => 0,
        };
        changed |= edited > 0 || !lazy.is_empty();
        doc.drop_empty_sections();
        let mut lazy_kept = 0usize;
        let mut lazy_warnings = Vec::new();
        if changed {
            super::stamp(&mut doc.metadata);
            let file = &scanned.opened.file;
            let remove = edit.as_ref().map(|e| (e.remove, e.removed));
            write::write_atomic_with(&self.path, |sink| {
                codec::write_streaming(
                    &doc,
                    &copies,
                    &lazy,
                    sink,
                    &mut |a, b, out| read::copy_range(file, a, b, out),
                    &mut |section| {
                        let ((mut one, verbatim), warnings) = self
                            .read_section(&scanned, section)
                            .map_err(std::io::Error::other)?
                            .ok_or_else(|| {
                                std::io::Error::other(format!(
                                    "section {} no longer parses",
                                    section.name()
                                ))
                            })?;
                        if let Some((remove, removed)) = remove {
                            removed.set(removed.get() + remove(section, &mut one));
                        }
                        lazy_kept += one.len() + verbatim.len();
                        lazy_warnings.extend(warnings);
                        Ok((one, verbatim))
                    },
                )
            })?;
        }
        all.extend(lazy_warnings.into_iter().map(|w| self.named(w)));
        if locked {
            super::mark_folded(&folded, &spool_dir)?;
        }
        let copied_entries: u64 = copies.iter().map(|c| c.elements).sum();
        let total =
            doc.stored_len() + usize::try_from(copied_entries).unwrap_or(usize::MAX) + lazy_kept;
        tracing::debug!(
            "folded {} spool(s) into {}: built {} section(s), copied {}",
            folded.len(),
            self.path.display(),
            doc.sections.len(),
            copies.len()
        );
        Ok(Some((total, edited, all)))
    }
}

/// The sections of `index` a fold copies: not `touched`, once in the file,
/// a non-empty array.
fn copies(index: &Index, touched: &BTreeSet<Section>) -> Vec<Copied> {
    let mut seen: BTreeMap<Section, usize> = BTreeMap::new();
    for f in &index.fields {
        if let Some(s) = Section::parse(&f.name) {
            *seen.entry(s).or_default() += 1;
        }
    }
    index
        .fields
        .iter()
        .filter_map(|f| {
            let s = Section::parse(&f.name)?;
            (!touched.contains(&s) && seen[&s] == 1 && f.first == b'[' && f.elements > 0)
                .then_some(Copied { section: s, start: f.start, end: f.end, elements: f.elements })
        })
        .collect()
}
