//! What `--help` shows a newcomer (the global `-v` last, no empty
//! `[env: NAME=]`, examples that fit a terminal, a hint of the run time
//! beside the model examples) and `trace summary --straggler-threshold`.
use ranktune_testkit::synth::{self, JobSpec, Shape};
use ranktune_testkit::Cli;

fn ranktune() -> Cli {
    Cli::new(env!("CARGO_BIN_EXE_ranktune"))
}

fn help(args: &[&str]) -> String {
    let out = ranktune().args(args).arg("--help").env_remove(["RANKTUNE_STRATEGY"]).run();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// Every subcommand (shared with the other help tests of this binary).
pub(crate) const COMMANDS: &[&[&str]] = &[
    &["tune"],
    &["cache", "show"],
    &["cache", "check"],
    &["cache", "diff"],
    &["cache", "merge"],
    &["cache", "prune"],
    &["cache", "import"],
    &["cache", "export"],
    &["trace", "merge"],
    &["trace", "summary"],
];

#[test]
fn verbose_is_the_last_option_before_help_and_version() {
    for cmd in COMMANDS {
        let text = help(cmd);
        let options = text.split("Options:").nth(1).unwrap_or_else(|| panic!("{cmd:?}: {text}"));
        let flags: Vec<&str> = options
            .lines()
            .map(str::trim_start)
            .take_while(|l| !l.starts_with("Examples:"))
            .filter(|l| l.starts_with('-'))
            .collect();
        let pos =
            |f: &str| flags.iter().position(|l| l.starts_with(f) || l.contains(&format!(", {f}")));
        let verbose = pos("--verbose").unwrap_or_else(|| panic!("{cmd:?}: no -v in {flags:?}"));
        let others = flags.len() - 1 - usize::from(pos("--help").is_some());
        assert!(
            verbose >= others,
            "{cmd:?}: -v, --verbose should follow the command's own options: {flags:?}"
        );
    }
}

#[test]
fn no_empty_env_values_and_examples_fit_a_terminal() {
    for cmd in COMMANDS {
        let text = help(cmd);
        assert!(!text.contains("=]"), "{cmd:?} shows an empty env value:\n{text}");
        if let Some(examples) = text.split("Examples:").nth(1) {
            for line in examples.lines() {
                assert!(
                    line.chars().count() <= 90,
                    "{cmd:?}: an example line that wraps on a 90-column terminal: {line:?}"
                );
            }
        }
    }
    let tune = help(&["tune"]);
    assert!(tune.contains("[env: RANKTUNE_STRATEGY]"), "{tune}");
    // The model examples say what --quick changes about the run time.
    let examples = tune.split("Examples:").nth(1).unwrap();
    assert!(examples.contains("--quick --model examples/models/mixtral-8x7b.json"), "{examples}");
    assert!(examples.contains("--quick stops at 64 tokens"), "{examples}");
}

#[test]
fn trace_summary_names_the_threshold_and_takes_another() {
    let text = help(&["trace", "summary"]);
    assert!(text.contains("--straggler-threshold <PERCENT>"), "{text}");
    assert!(text.contains("[default: 5]"), "{text}");

    let dir = tempfile::tempdir().unwrap();
    let spec = JobSpec {
        ranks: 3,
        steps: 5,
        straggler: Some((1, 0.5)),
        collectives: false,
        shape: Shape::Ranktune,
        ..JobSpec::default()
    };
    synth::write_job(&spec, dir.path()).unwrap();
    let summary = |extra: &[&str]| {
        let out = ranktune().args(["trace", "summary"]).arg(dir.path()).args(extra).run();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, out, err) = summary(&[]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("Straggler: rank 1"), "{out}");
    // Far above the planted slowdown: nobody is named, and the verdict
    // names the threshold it used.
    let (code, out, err) = summary(&["--straggler-threshold", "900"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("No straggler") && out.contains("(threshold 900%)"), "{out}");
    let (_, out, _) = summary(&["--straggler-threshold", "2.5%"]);
    assert!(out.contains("Straggler: rank 1"), "{out}");

    for bad in ["0", "-3", "abc", "nan", "5000"] {
        let (code, _, err) = summary(&[&format!("--straggler-threshold={bad}")]);
        assert_eq!(code, Some(2), "{bad}: {err}");
        assert!(err.contains("percentage"), "{bad}: {err}");
    }
}

/// The straggler verdict reads at a glance: a short headline, then one
/// figure per line, no line longer than a terminal.
#[test]
fn the_straggler_verdict_is_a_headline_and_a_table() {
    let dir = tempfile::tempdir().unwrap();
    for (collectives, shape, headline) in [
        (true, Shape::Kineto, "Straggler: rank 2 made the others wait at collectives."),
        (false, Shape::Ranktune, "Straggler: rank 2 has the longest steps."),
    ] {
        let job = dir.path().join(format!("job-{collectives}"));
        std::fs::create_dir(&job).unwrap();
        let spec = JobSpec {
            ranks: 4,
            steps: 6,
            straggler: Some((2, 0.6)),
            collectives,
            shape,
            ..JobSpec::default()
        };
        synth::write_job(&spec, &job).unwrap();
        let out = ranktune().args(["trace", "summary"]).arg(&job).run();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let text = String::from_utf8(out.stdout).unwrap();
        let mut lines = text.lines();
        assert_eq!(lines.next(), Some(headline), "{text}");
        let facts: Vec<&str> = lines.by_ref().take_while(|l| !l.is_empty()).collect();
        assert!(facts.len() >= 2, "{text}");
        for f in &facts {
            assert!(f.starts_with("  ") && f.chars().count() <= 100, "{f:?}\n{text}");
        }
        // The values start in one column.
        let col = |l: &str| {
            l[2..].find("  ").map(|i| i + 2 + l[2 + i..].len() - l[2 + i..].trim_start().len())
        };
        let cols: Vec<_> = facts.iter().map(|f| col(f)).collect();
        assert!(cols.windows(2).all(|w| w[0] == w[1]), "{cols:?}\n{text}");
        if collectives {
            assert!(
                facts.iter().any(|f| f.contains("arrived last") && f.contains("of 6 matched")),
                "{text}"
            );
        }
    }
}

/// A flag that would silently do something else is refused, naming what
/// it would have done and what to give instead.
#[test]
fn flags_that_would_silently_do_something_else_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let out = ranktune().current_dir(dir.path()).args(["tune", "--max-tokens", "3"]).run();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--max-tokens 3 is not a power of two") && err.contains("give 2 or 4"),
        "{err}"
    );
    assert!(!dir.path().join("ranktune-cache.json").exists(), "nothing tuned");

    let spec = JobSpec { ranks: 2, shape: Shape::Ranktune, ..JobSpec::default() };
    synth::write_job(&spec, dir.path()).unwrap();
    let out = ranktune().current_dir(dir.path()).args(["trace", "merge", ".", "-o", "m.txt"]).run();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("-o m.txt") && err.contains(".json, .json.gz, .pftrace"), "{err}");
    assert!(!dir.path().join("m.txt").exists());
    for ok in ["m.json", "m.JSON.gz", "m.pftrace"] {
        let out = ranktune().current_dir(dir.path()).args(["trace", "merge", ".", "-o", ok]).run();
        assert!(out.status.success(), "{ok}: {}", String::from_utf8_lossy(&out.stderr));
    }
}
