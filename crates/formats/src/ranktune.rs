//! ranktune's own cache file (format name `ranktune`), as a format among
//! the others: read the way `FileStore::inspect` reads it (spool included,
//! nothing modified), detected by its `format` field. Writing it is the
//! cache crate's (`FileStore::save`), never an export.

use crate::{Format, Imported, Input, SourceError};
use ranktune_cache::{FileStore, Store};
use serde_json::Value;

/// ranktune's cache file.
pub struct Ranktune;

impl Format for Ranktune {
    fn name(&self) -> &'static str {
        "ranktune"
    }

    fn about(&self) -> &'static str {
        "A ranktune cache file"
    }

    fn noun(&self) -> &'static str {
        "a ranktune cache"
    }

    fn sign(&self) -> &'static str {
        "a \"format\" field"
    }

    fn detect(&self, doc: &Value) -> bool {
        doc.get("format").is_some()
    }

    fn read(&self, file: &Input<'_>) -> Result<Imported, SourceError> {
        file.document()?;
        let path = file.path().to_path_buf();
        let store = FileStore::from_env(&path)
            .map_err(|source| SourceError::Open { path: path.clone(), source })?;
        let loaded = store
            .inspect()
            .map_err(|source| SourceError::Ranktune { path: path.clone(), source })?;
        Ok(Imported { data: loaded.data, warnings: loaded.warnings, skipped: loaded.bad_entries })
    }
}
