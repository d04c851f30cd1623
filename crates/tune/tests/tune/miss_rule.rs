//! The miss dispatch (`miss_action`) on the cases Python's test runs too
//! (`crates/testkit/data/rules/miss.json`, read by
//! `python/tests/test_rules.py`): one rule, the same inputs, the same
//! actions from both languages (issue 37).

use ranktune_tune::{miss_action, Found};

#[test]
fn every_shared_case_gets_its_action() {
    let doc = ranktune_testkit::rule_cases("miss");
    let cases = doc["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 12, "every state with tuning on and off");
    for case in cases {
        let found = Found::from_name(case["found"].as_str().unwrap()).unwrap();
        let tuning = case["tuning"].as_bool().unwrap();
        assert_eq!(miss_action(found, tuning).name(), case["action"].as_str().unwrap(), "{case}");
    }
}
