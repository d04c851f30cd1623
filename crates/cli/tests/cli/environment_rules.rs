//! What the environment says (the cache, the collective, the run's id) on
//! the cases Python's test runs too (`crates/testkit/data/rules/
//! environment.json`, read by `python/tests/test_rules.py`): each rule is
//! decided once, in Rust, and Python asks it (issue 37).

use ranktune_cache::CacheLocation;
use ranktune_collective::CollectiveChoice;
use ranktune_core::job::JobId;
use serde_json::Value;

#[test]
fn every_shared_case_gets_its_answer() {
    let doc = ranktune_testkit::rule_cases("environment");
    let cases = doc["cases"].as_array().unwrap();
    assert!(cases.len() >= 14);
    for case in cases {
        let vars = case["env"].as_object().unwrap();
        let env = |name: &str| vars.get(name).and_then(Value::as_str).map(str::to_string);
        let cache = CacheLocation::from_env_with(|n| env(n).map(Into::into));
        match (&case["cache"], cache) {
            (Value::Null, Ok(None)) => {}
            (Value::String(want), Ok(Some(loc))) => assert_eq!(&loc.to_string(), want, "{case}"),
            (Value::Object(e), Err(err)) => {
                let want = e["error"].as_str().unwrap();
                assert!(err.to_string().contains(want), "{case}: {err}");
            }
            (want, got) => panic!("{case}: cache {want} but got {got:?}"),
        }
        match (&case["collective"], CollectiveChoice::from_env_with(env)) {
            (Value::String(want), Ok(choice)) => assert_eq!(choice.name(), want, "{case}"),
            (Value::Object(e), Err(err)) => {
                let want = e["error"].as_str().unwrap();
                assert!(err.to_string().contains(want), "{case}: {err}");
            }
            (want, got) => panic!("{case}: collective {want} but got {got:?}"),
        }
        let job = JobId::detect_with(env).map(|j| j.value);
        assert_eq!(job.as_deref(), case["job_id"].as_str(), "{case}");
    }
}
