//! End to end: `ranktune tune` as a launcher of 4 real rank processes into
//! one cache file, twice; one rank under a launcher's environment; a failing
//! rank reported by name.

use ranktune_testkit::{Cli, Output, LAUNCHER_VARS};
use std::path::Path;

/// Runs ranktune in `dir` as a user would outside any launcher, with `env`.
fn ranktune(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let cli = Cli::new(env!("CARGO_BIN_EXE_ranktune")).current_dir(dir).args(args);
    cli.env_remove(LAUNCHER_VARS).env_remove(["RANKTUNE_CACHE"]).envs(env.to_vec()).run()
}

#[test]
fn four_ranks_twice_into_one_file() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache.json");
    let cache_s = cache.to_str().unwrap();
    let args = [
        "tune",
        "--ranks",
        "4",
        "--quick",
        "--json",
        "--strategy",
        "independent",
        "--cache",
        cache_s,
    ];
    let first = ranktune(dir.path(), &args, &[]).json();
    let tuned = first["tuned"].as_u64().unwrap();
    assert!(tuned >= 4 * 3, "{first}");
    assert_eq!(first["misses"].as_u64(), Some(tuned));
    assert_eq!(first["hits"].as_u64(), Some(0));
    assert_eq!(first["world_size"].as_u64(), Some(4));
    let ranks = first["ranks"].as_array().unwrap();
    assert_eq!(ranks.len(), 4);
    for (i, r) in ranks.iter().enumerate() {
        assert_eq!(r["rank"].as_u64(), Some(i as u64));
        assert_eq!(r["tuned"].as_u64(), Some(tuned / 4));
        assert!(r["rows"].as_array().unwrap().iter().all(|row| row["source"] == "tuned"));
    }
    for key in ["fallbacks", "failed_tactics", "tuning_seconds"] {
        assert!(first.get(key).is_some(), "{key} missing");
    }

    // One file, with every rank's entries.
    let loaded = {
        use ranktune_cache::Store;
        ranktune_cache::FileStore::new(&cache).load().unwrap()
    };
    for rank in 0..4 {
        let n =
            loaded.data.sections.get(&ranktune_cache::Section::Rank(rank)).map_or(0, |m| m.len());
        assert_eq!(n as u64, tuned / 4, "rank {rank}'s entries");
    }

    let second = ranktune(dir.path(), &args, &[]).json();
    assert_eq!(second["tuned"].as_u64(), Some(0), "{second}");
    assert_eq!(second["misses"].as_u64(), Some(0));
    assert_eq!(second["hits"].as_u64(), Some(tuned));
    for r in second["ranks"].as_array().unwrap() {
        assert!(r["rows"].as_array().unwrap().iter().all(|row| row["source"] == "cache"));
    }

    // The table says so too.
    let table = ranktune(
        dir.path(),
        &["tune", "--ranks", "2", "--quick", "--strategy", "independent", "--cache", cache_s],
        &[],
    );
    assert!(table.status.success());
    let text = String::from_utf8_lossy(&table.stdout);
    assert!(text.contains("nothing to tune: all"), "{text}");
}

#[test]
fn one_rank_from_the_launchers_environment_and_default_cache() {
    let dir = tempfile::tempdir().unwrap();
    let out = ranktune(
        dir.path(),
        // Alone: rank 0 never comes, so no collective strategy.
        &[
            "tune",
            "--quick",
            "--ops",
            "rmsnorm",
            "--max-tokens",
            "4",
            "--json",
            "--strategy",
            "independent",
        ],
        &[("RANK", "1"), ("WORLD_SIZE", "2"), ("LOCAL_RANK", "1")],
    )
    .json();
    assert_eq!(out["ranks"][0]["rank"].as_u64(), Some(1));
    assert_eq!(out["world_size"].as_u64(), Some(2));
    assert_eq!(out["tuned"].as_u64(), Some(3)); // buckets 1, 2, 4
    assert!(dir.path().join("ranktune-cache.json").exists(), "default cache in the cwd");

    // RANKTUNE_CACHE names another file.
    let other = dir.path().join("other.json");
    ranktune(
        dir.path(),
        &["tune", "--quick", "--ops", "rmsnorm", "--max-tokens", "2", "--json"],
        &[("RANKTUNE_CACHE", other.to_str().unwrap())],
    )
    .json();
    assert!(other.exists());
}

#[test]
fn a_failing_rank_is_named_with_its_status() {
    let dir = tempfile::tempdir().unwrap();
    // A malformed setting only the ranks read: every rank fails on it.
    let out = ranktune(
        dir.path(),
        &["tune", "--ranks", "2", "--quick", "--ops", "rmsnorm"],
        &[("RANKTUNE_STRATEGY_TIMEOUT", "soon")],
    );
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("rank 0 failed") && err.contains("rank 1 failed"), "{err}");
    assert!(err.contains("exit status"), "{err}");
}

/// The lines of `text` that contain `needle`.
fn count(text: &str, needle: &str) -> usize {
    text.lines().filter(|l| l.contains(needle)).count()
}

#[test]
fn a_bad_cache_or_trace_path_is_one_error_before_any_rank_starts() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("plain"), b"x").unwrap();
    std::fs::create_dir(dir.path().join("cache-is-a-dir")).unwrap();
    let cases: [(&[&str], &str); 3] = [
        (&["--cache", "plain/c.json"], "choose another --cache"),
        (&["--cache", "cache-is-a-dir"], "is a directory"),
        (&["--cache", "c.json", "--trace", "plain/t.json"], "plain exists and is not a directory"),
    ];
    for (extra, needle) in cases {
        let mut args = vec!["tune", "--ranks", "3", "--quick", "--ops", "rmsnorm"];
        args.extend(extra);
        let out = ranktune(dir.path(), &args, &[]);
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(count(&err, needle), 1, "{args:?}: once, not once per rank:\n{err}");
        assert_eq!(count(&err, "[rank "), 0, "{args:?}: no rank started:\n{err}");
        assert_eq!(count(&err, "failed"), 0, "{args:?}: no rank started:\n{err}");
    }
}

#[test]
fn rank_and_world_size_flags_settle_launchers_that_disagree() {
    let dir = tempfile::tempdir().unwrap();
    let disagreeing = [
        ("RANK", "1"),
        ("WORLD_SIZE", "2"),
        ("OMPI_COMM_WORLD_RANK", "0"),
        ("OMPI_COMM_WORLD_SIZE", "2"),
    ];
    let base = ["tune", "--quick", "--ops", "rmsnorm", "--max-tokens", "2", "--json"];
    let mut args = base.to_vec();
    args.extend(["--strategy", "independent"]);
    let out = ranktune(dir.path(), &args, &disagreeing);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("launchers disagree") && err.contains("--rank N --world-size W"), "{err}");

    // The hint works: the flags settle it.
    args.extend(["--rank", "1", "--world-size", "2"]);
    let report = ranktune(dir.path(), &args, &disagreeing).json();
    assert_eq!(report["ranks"][0]["rank"].as_u64(), Some(1), "{report}");
    assert_eq!(report["world_size"].as_u64(), Some(2));

    // One without the other, or with --ranks, is refused by the parser.
    let mut half = base.to_vec();
    half.extend(["--rank", "1"]);
    assert!(!ranktune(dir.path(), &half, &[]).status.success());
    let mut both = base.to_vec();
    both.extend(["--rank", "1", "--world-size", "2", "--ranks", "2"]);
    assert!(!ranktune(dir.path(), &both, &[]).status.success());
}

#[test]
fn bad_arguments_are_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let out = ranktune(dir.path(), &["tune", "--ranks", "0"], &[]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--ranks 0"));
    let out = ranktune(dir.path(), &["tune", "--ops", "conv"], &[]);
    assert!(!out.status.success());
}

#[test]
fn limits_and_an_unusable_cache_path_fail_before_any_tuning() {
    let dir = tempfile::tempdir().unwrap();
    let err = |out: &Output| String::from_utf8_lossy(&out.stderr).into_owned();
    let out = ranktune(dir.path(), &["tune", "--quick", "--max-tokens", "99999999"], &[]);
    assert!(!out.status.success());
    assert!(err(&out).contains("--max-tokens 99999999"), "{}", err(&out));
    let out = ranktune(dir.path(), &["tune", "--quick", "--ranks", "100000"], &[]);
    assert!(!out.status.success());
    assert!(err(&out).contains("mpirun"), "{}", err(&out));
    // A regular file where the cache's directory should be: refused at start,
    // before any bucket is measured, and nothing is left behind.
    std::fs::write(dir.path().join("plain"), b"x").unwrap();
    let out = ranktune(dir.path(), &["tune", "--quick", "--cache", "plain/c.json"], &[]);
    assert!(!out.status.success());
    assert!(err(&out).contains("choose another --cache"), "{}", err(&out));
    assert!(out.stdout.is_empty(), "no report: nothing was tuned");
    let names: Vec<_> =
        std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(names, vec![std::ffi::OsString::from("plain")]);
}

/// `tune --model`: two ranks tune the GEMM shapes of a (small) model's
/// linear layers, split by `--tp`, and the cache holds one entry per layer
/// shape and token bucket; a config without a needed field is one error.
#[test]
fn a_model_config_gives_its_layer_shapes() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.json");
    // A Llama-shaped toy: hidden 64, 4 heads (2 KV heads), MLP 96, vocab 100.
    std::fs::write(
        &config,
        r#"{"architectures": ["LlamaForCausalLM"], "hidden_size": 64, "intermediate_size": 96,
            "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 100}"#,
    )
    .unwrap();
    let args = ["tune", "--model", "config.json", "--tp", "2", "--ranks", "2", "--max-tokens", "2"];
    let report =
        ranktune(dir.path(), &[&args[..], &["--json", "--cache", "c.json"]].concat(), &[]).json();
    let layers: Vec<(String, u64, u64)> = report["model"]["layers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            (l["name"].as_str().unwrap().into(), l["k"].as_u64().unwrap(), l["n"].as_u64().unwrap())
        })
        .collect();
    let expected: Vec<(String, u64, u64)> = [
        ("qkv", 64, 64),
        ("o", 32, 64),
        ("gate_up", 64, 96),
        ("down", 48, 64),
        ("lm_head", 64, 50),
    ]
    .iter()
    .map(|&(n, k, o)| (n.into(), k, o))
    .collect();
    assert_eq!(layers, expected, "{report}");
    // 5 layers of 5 distinct shapes, 2 token buckets each.
    let show = ranktune(dir.path(), &["cache", "show", "c.json", "--json"], &[]).json();
    let mut buckets: Vec<String> = show
        .as_array()
        .unwrap_or_else(|| show["entries"].as_array().unwrap())
        .iter()
        .map(|e| e["bucket"].to_string())
        .collect();
    buckets.sort();
    buckets.dedup();
    assert_eq!(buckets.len(), 5 * 2, "{show}");
    for (k, n) in [(64, 64), (32, 64), (64, 96), (48, 64), (64, 50)] {
        let b = format!("[[1,{k}],[1,{n}]]");
        assert!(buckets.contains(&b), "{b} in {buckets:?}");
    }
    let text = ranktune(dir.path(), &args, &[("RANKTUNE_CACHE", "c.json")]);
    assert!(
        text.stdout_text().starts_with("model LlamaForCausalLM (tp 2): qkv 64→64, o 32→64"),
        "{text}"
    );

    std::fs::write(&config, r#"{"hidden_size": 64, "num_attention_heads": 4}"#).unwrap();
    let bad = ranktune(dir.path(), &args, &[]);
    assert_eq!(bad.status.code(), Some(2), "{bad}");
    let err = bad.stderr_text();
    assert!(err.contains("lacks vocab_size"), "{err}");
    assert_eq!(err.matches("lacks").count(), 1, "one error, not one per rank: {err}");
}
