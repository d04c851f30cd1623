//! The case files of the rules that the Rust crates decide and Python asks
//! through the bindings (`data/rules/NAME.json`, beside this crate's
//! sources): a Rust test and a Python test each run every case, so both
//! languages are held to the same answers (docs/architecture.md, "Rules
//! Python takes from Rust").

use std::path::PathBuf;

/// The case document of the rule `name` (`data/rules/<name>.json`), whose
/// `cases` array is what a test runs. Panics, naming the file, when it is
/// missing or not JSON (a test's set-up).
pub fn rule_cases(name: &str) -> serde_json::Value {
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("data/rules").join(format!("{name}.json"));
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()))
}
