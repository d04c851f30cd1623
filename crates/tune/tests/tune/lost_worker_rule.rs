//! The rule that judges a lost worker (`isolation::reasons::classify`) on
//! the cases Python's test runs too (`crates/testkit/data/rules/lost_worker.json`,
//! read by `python/tests/test_rules.py`): one rule, the same inputs, the
//! same verdicts from both languages (issue 37).

use ranktune_tune::isolation::reasons::{classify, Ending, Exit};
use ranktune_tune::FailureKind;

#[test]
fn every_shared_case_gets_its_verdict() {
    let doc = ranktune_testkit::rule_cases("lost_worker");
    let cases = doc["cases"].as_array().unwrap();
    assert!(cases.len() >= 9);
    let kind = |name: &str| FailureKind::ALL.into_iter().find(|k| k.as_str() == name).unwrap();
    for case in cases {
        let killed_for = case["killed_for"]
            .as_array()
            .map(|kw| (kind(kw[0].as_str().unwrap()), kw[1].as_str().unwrap().to_string()));
        let status = case["status"].as_i64().map(|s| i32::try_from(s).unwrap());
        let (got_kind, got_reason) = classify(&Ending {
            exit: status.map(Exit::from_wait_status),
            max_rss: case["max_rss"].as_u64().unwrap(),
            killed_for,
            memory_limit: case["memory_limit"].as_u64(),
            stderr: case["stderr"].as_str().unwrap(),
        });
        assert_eq!(got_kind.as_str(), case["kind"].as_str().unwrap(), "{case}");
        assert_eq!(got_reason, case["reason"].as_str().unwrap(), "{case}");
    }
}
