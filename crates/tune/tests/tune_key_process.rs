//! Keys are stable across processes: fingerprints, checksums and cache keys
//! computed in a child process equal the parent's (no randomized hashing).

mod tune_support;

use ranktune_testkit::{child_test, Cli};
use ranktune_tune::*;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use tune_support::*;

const CHILD: &str = "RANKTUNE_TEST_KEY_CHILD";

fn describe() -> String {
    let c = Arc::new(AtomicU64::new(0));
    let op = two_runners(&c);
    let tuner = tuner_for(0, "1", "cpu-a", &c);
    tuner.set_tuning(true);
    tuner.choose_one(&op, &Rows::new(300, 16));
    let data = tuner.take_pending();
    let keys: Vec<String> =
        data.iter().map(|(s, k, e)| format!("{s} {k} {} {}", e.checksum, e.tactic)).collect();
    let key = op.key_of(&Rows::new(300, 16)).unwrap();
    format!(
        "fp0={} fp1={} checksum={} id={} keyhash={} keys={:?}",
        op.fingerprint(0),
        op.fingerprint(1),
        op.checksum(),
        op.id(),
        key.hash_with(op.id()),
        keys
    )
}

#[test]
fn same_fingerprints_and_keys_in_two_processes() {
    if std::env::var_os(CHILD).is_some() {
        println!("\nDESCRIBE {}", describe());
        return;
    }
    let test = child_test("same_fingerprints_and_keys_in_two_processes", false);
    let out = Cli::from(test).env(CHILD, "1").run();
    assert!(out.status.success(), "{out}");
    let stdout = out.stdout_text();
    let line = stdout.lines().find_map(|l| l.strip_prefix("DESCRIBE ")).expect("child output");
    assert_eq!(line, describe());
    assert!(line.contains("fp0=") && !line.contains("fp0= "));
}

#[test]
fn fingerprints_are_known_values() {
    // Pinned: a change here invalidates every user's cache; make it on purpose.
    assert_eq!(fingerprint_of(&("blocked", 64u32)), {
        let mut h = StableHasher::default();
        h.write(br#"["blocked",64]"#);
        h.hex()
    });
    assert_eq!(StableHasher::default().hex(), "cbf29ce484222325");
}
