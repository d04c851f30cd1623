//! Triton autotune file import (`triton::import_file`: `key` and
//! `configs_timings` with Python's `Infinity`/`NaN`, the kernel from the
//! file name). When the first line ends with `.autotune.json` it is the
//! file's path and the rest its content; otherwise the whole input is the
//! content of `k.autotune.json` (Triton's files are one line). Never
//! panics; what imported exports to files that import again to the same
//! entry, and the file it came from is written back byte for byte; written
//! from the cache alone (no record of the file), it imports again too.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ranktune_formats::triton::{export, import_file};
use ranktune_cache::{CacheData, Section};

fuzz_target!(|bytes: &[u8]| {
    let (path, content) = match bytes.iter().position(|b| *b == b'\n') {
        Some(at) if bytes[..at].ends_with(b".autotune.json") => {
            let Ok(path) = std::str::from_utf8(&bytes[..at]) else { return };
            (path.to_string(), &bytes[at + 1..])
        }
        _ => ("k.autotune.json".to_string(), bytes),
    };
    let Ok(imported) = import_file(&path, content) else { return };
    let exported = export(&imported.data);
    assert_eq!(exported.written, imported.data.iter().count(), "{:?}", exported.warnings);
    for (p, text) in &exported.files {
        let again = match import_file(p, text.as_bytes()) {
            Ok(i) => i,
            Err(e) => panic!("an export of an import does not import: {e}\n{p}\n{text}"),
        };
        for (s, k, e) in again.data.iter() {
            assert_eq!(imported.data.get(s, k), Some(e), "{p}\n{text}");
        }
        if *p == path {
            assert_eq!(text.as_bytes(), content, "not written back byte for byte");
        }
    }
    let mut bare = CacheData::default();
    for (s, k, e) in imported.data.iter() {
        bare.insert(s, k.clone(), e.clone());
    }
    for (p, text) in &export(&bare).files {
        let again = match import_file(p, text.as_bytes()) {
            Ok(i) => i,
            Err(e) => panic!("an export from the cache does not import: {e}\n{p}\n{text}"),
        };
        let keys: Vec<_> = again.data.iter().map(|(_, k, _)| k.clone()).collect();
        for k in keys {
            assert!(imported.data.get(Section::Rank(0), &k).is_some(), "{p}\n{text}");
        }
    }
});
