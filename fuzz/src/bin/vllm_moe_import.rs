//! vLLM/SGLang fused-MoE config import (`vllm_moe::import_file`): the
//! input's first line is the file name (`E=…,N=…,device_name=….json`, also
//! fuzzed through `FileName::parse`), the rest its content. Never panics,
//! and every file the export writes imports again with every exported entry.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ranktune_formats::vllm_moe::{export, import_file, FileName};

/// The name used when the input has no newline.
const NAME: &str = "E=8,N=14336,device_name=NVIDIA_H100_80GB_HBM3.json";

fuzz_target!(|bytes: &[u8]| {
    let (name, body) = match bytes.iter().position(|&b| b == b'\n') {
        Some(i) => (String::from_utf8_lossy(&bytes[..i]).into_owned(), &bytes[i + 1..]),
        None => (NAME.to_string(), bytes),
    };
    if let Some(file) = FileName::parse(&name) {
        let _ = file.file_name();
    }
    let Ok(imported) = import_file(&name, body) else { return };
    let exported = export(&imported.data);
    let mut entries = 0;
    for (file, text) in &exported.files {
        match import_file(file, text.as_bytes()) {
            Ok(again) => entries += again.data.iter().count(),
            Err(e) => panic!("the export {file} of an import does not import: {e}\n{text}"),
        }
    }
    assert_eq!(entries, exported.written, "entries lost on re-import");
});
