//! FlashInfer's autotuner cache import (`flashinfer::import_bytes`: keys
//! that are Python tuple reprs, `[runner, tactic]` values, `_metadata`):
//! never panics, and what imported exports to a file that imports again
//! with every exported entry.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ranktune_formats::flashinfer::{export, import_bytes};

fuzz_target!(|bytes: &[u8]| {
    let Ok(imported) = import_bytes(bytes) else { return };
    let exported = export(&imported.data);
    let again = match import_bytes(exported.text().as_bytes()) {
        Ok(i) => i,
        Err(e) => panic!("an export of an import does not import: {e}\n{}", exported.text()),
    };
    assert_eq!(
        again.data.iter().count(),
        exported.written,
        "entries lost on re-import: {:?}\n{}",
        again.warnings,
        exported.text()
    );
});
