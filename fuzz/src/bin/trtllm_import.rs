//! The TensorRT-LLM cache import as a whole (`trtllm::import_bytes`: JSON
//! with Python's `NaN`/`Infinity`, reference metadata, `str` keys and `repr`
//! tactics): never panics, and what imported exports to a reference file
//! that imports again with every entry.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ranktune_formats::parse_document;
use ranktune_formats::trtllm::{export_document, import_bytes, looks_like_trtllm, to_json_text};

fuzz_target!(|bytes: &[u8]| {
    if let Ok(doc) = parse_document(bytes) {
        let _ = looks_like_trtllm(&doc);
    }
    let Ok(imported) = import_bytes(bytes) else { return };
    let (_, doc) = export_document(&imported.data);
    let text = to_json_text(&doc);
    let again = match import_bytes(text.as_bytes()) {
        Ok(i) => i,
        Err(e) => panic!("an export of an import does not import: {e}\n{text}"),
    };
    assert_eq!(again.skipped, 0, "entries skipped on re-import: {:?}\n{text}", again.warnings);
});
