//! The Python-literal parser of the TensorRT-LLM interop
//! (`trtllm::parse_literal`): never panics, never recurses without bound,
//! and what it parsed prints as Python's `repr`, which parses back to the
//! same value (compared as text, so `nan` compares equal).
#![no_main]

use libfuzzer_sys::fuzz_target;
use ranktune_formats::trtllm::{json_to_py, parse_literal, py_to_json};

fuzz_target!(|bytes: &[u8]| {
    let Ok(text) = std::str::from_utf8(bytes) else { return };
    let Ok(value) = parse_literal(text) else { return };
    let repr = value.to_string();
    let back = match parse_literal(&repr) {
        Ok(v) => v,
        Err(e) => panic!("repr {repr:?} of a parsed literal does not parse: {e}"),
    };
    assert_eq!(back.to_string(), repr, "repr is not stable");
    // The tactic conversion the import applies to every parsed tactic.
    let json = py_to_json(&value);
    let _ = json_to_py(&json);
});
