//! A ranktune cache document (`parse_cache`): whatever the bytes, parsing
//! never panics, and what parsed writes back in canonical form, which reads
//! again with no new warning (an unrecognised section is kept through every
//! rewrite and warned about on every read, by design) and writes the same
//! bytes (a fixpoint).
#![no_main]

use libfuzzer_sys::fuzz_target;
use ranktune_cache::{cache_to_bytes, parse_cache};

fuzz_target!(|bytes: &[u8]| {
    let Ok(parsed) = parse_cache(bytes) else { return };
    let written = cache_to_bytes(&parsed.data);
    let again = match parse_cache(&written) {
        Ok(p) => p,
        Err(e) => panic!("what ranktune wrote does not read back: {e}"),
    };
    let new: Vec<&String> =
        again.warnings.iter().filter(|w| !parsed.warnings.contains(w)).collect();
    assert!(new.is_empty(), "rewritten document warns anew: {new:?}");
    assert_eq!(again.bad_entries, 0);
    assert_eq!(again.data.len(), parsed.data.len(), "entries lost in a rewrite");
    let twice = cache_to_bytes(&again.data);
    assert!(twice == written, "the canonical form is not a fixpoint");
});
