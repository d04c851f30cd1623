//! `trace summary` on generated jobs: the planted straggler is named, in a
//! synchronized job with all-reduce (where its steps are NOT the longest)
//! and in one without collectives; single rank; no step markers; JSON schema;
//! the HTML report.
use ranktune_testkit::synth::{self, JobSpec, Shape};
use ranktune_testkit::Cli;
use ranktune_trace_analyze::{self as analyze, Method, SummaryOptions};
use serde_json::Value;

fn job(spec: &JobSpec) -> (tempfile::TempDir, Vec<String>) {
    let dir = tempfile::tempdir().unwrap();
    let files = synth::write_job(spec, dir.path()).unwrap();
    let files = files.iter().map(|p| p.display().to_string()).collect();
    (dir, files)
}

fn summarize(spec: &JobSpec) -> analyze::Summary {
    let (dir, _) = job(spec);
    let res = analyze::resolve(&[dir.path().display().to_string()], &[]).unwrap();
    assert_eq!(res.inputs.len() as u32, spec.ranks);
    analyze::summarize(&res.inputs, &SummaryOptions::default()).unwrap()
}

#[test]
fn synchronized_kineto_job_names_the_rank_that_made_the_others_wait() {
    let spec = JobSpec {
        ranks: 4,
        steps: 6,
        straggler: Some((2, 0.6)),
        collectives: true,
        shape: Shape::Kineto,
        ..JobSpec::default()
    };
    let s = summarize(&spec);
    // The trap: every rank's steps are equally long, so the step time alone
    // cannot tell the straggler.
    let means: Vec<f64> = s.ranks.iter().map(|r| r.step_mean_us.unwrap()).collect();
    let spread =
        means.iter().cloned().fold(0.0, f64::max) / means.iter().cloned().fold(f64::MAX, f64::min);
    assert!(spread < 1.01, "steps should be equally long: {means:?}");
    let st = s.straggler.as_ref().expect("a straggler");
    assert_eq!(st.rank, 2, "{}", s.verdict);
    // The all-reduce of every step is matched across ranks: rank 2 arrived
    // last at each, after more time in `aten::mm` than the others.
    assert_eq!(st.method, Method::WaitCaused);
    assert_eq!(s.collectives.matched, 6);
    assert_eq!(s.collectives.per_rank[2].last_count, 6);
    assert_eq!(st.collective.as_ref().unwrap().name, "allreduce", "{}", s.verdict);
    assert_eq!(st.span.as_ref().unwrap().0, "aten::mm", "{}", s.verdict);
    // It waits least inside collectives.
    let min_comm =
        s.ranks.iter().min_by(|a, b| a.collective_us.total_cmp(&b.collective_us)).unwrap();
    assert_eq!(min_comm.rank, 2);
    assert!(s.verdict.starts_with("Straggler: rank 2 "), "{}", s.verdict);
    for r in &s.ranks {
        assert_eq!(r.steps.len(), 6);
        assert!(r.busy_us > 0.0);
        assert!(!r.top_self(5).is_empty());
    }
}

#[test]
fn job_without_collectives_uses_step_time() {
    let spec = JobSpec {
        ranks: 3,
        steps: 5,
        straggler: Some((1, 0.5)),
        collectives: false,
        shape: Shape::Ranktune,
        ..JobSpec::default()
    };
    let s = summarize(&spec);
    let st = s.straggler.as_ref().expect("a straggler");
    assert_eq!(st.rank, 1, "{}", s.verdict);
    assert_eq!(st.method, Method::StepTime);
    assert_eq!(st.span.as_ref().unwrap().0, "aten::mm");
    let slowest = s
        .ranks
        .iter()
        .max_by(|a, b| a.step_mean_us.unwrap().total_cmp(&b.step_mean_us.unwrap()))
        .unwrap();
    assert_eq!(slowest.rank, 1);
}

#[test]
fn balanced_job_has_no_straggler() {
    for collectives in [true, false] {
        let spec = JobSpec {
            ranks: 4,
            steps: 4,
            straggler: None,
            collectives,
            shape: Shape::Ranktune,
            ..JobSpec::default()
        };
        let s = summarize(&spec);
        assert!(s.straggler.is_none(), "{}", s.verdict);
        assert!(s.verdict.starts_with("No straggler"), "{}", s.verdict);
    }
}

#[test]
fn ranktune_synchronized_job() {
    let spec = JobSpec {
        ranks: 2,
        steps: 4,
        straggler: Some((0, 0.8)),
        collectives: true,
        shape: Shape::Ranktune,
        ..JobSpec::default()
    };
    let s = summarize(&spec);
    assert_eq!(s.straggler.as_ref().map(|s| s.rank), Some(0), "{}", s.verdict);
}

#[test]
fn single_rank_and_no_step_markers() {
    let spec = JobSpec { ranks: 1, steps: 0, shape: Shape::Kineto, ..JobSpec::default() };
    let s = summarize(&spec);
    assert_eq!(s.ranks.len(), 1);
    assert!(s.straggler.is_none());
    assert!(s.verdict.contains("no step markers"), "{}", s.verdict);
    assert!(s.warnings.iter().any(|w| w.contains("no ProfilerStep# markers")));
    assert!(s.ranks[0].step_mean_us.is_none());
    assert!(!s.ranks[0].spans.is_empty());

    // Several ranks without steps: busy time decides.
    let spec = JobSpec {
        ranks: 3,
        steps: 0,
        collectives: false,
        straggler: Some((2, 1.0)),
        shape: Shape::Ranktune,
        ..JobSpec::default()
    };
    let s = summarize(&spec);
    let st = s.straggler.expect("straggler by busy time");
    assert_eq!((st.rank, st.method), (2, Method::BusyTime));
}

#[test]
fn cli_json_schema_text_and_html() {
    let spec = JobSpec {
        ranks: 4,
        steps: 5,
        straggler: Some((3, 0.7)),
        collectives: true,
        shape: Shape::Kineto,
        ..JobSpec::default()
    };
    let (dir, _) = job(&spec);
    let html = dir.path().join("report.html");
    let out = Cli::new(env!("CARGO_BIN_EXE_ranktune"))
        .args(["trace", "summary", "--json", "--html"])
        .arg(&html)
        .arg(format!("{}/*.pt.trace.json", dir.path().display()))
        .run();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let ranks = doc["ranks"].as_array().unwrap();
    assert_eq!(ranks.len(), 4);
    for (i, r) in ranks.iter().enumerate() {
        assert_eq!(r["rank"], i as u64);
        assert_eq!(r["steps"], 5);
        assert!(r["step_mean_us"].as_f64().unwrap() > 0.0);
        assert!(r["step_median_us"].as_f64().unwrap() > 0.0);
        let top = r["top_spans_self"].as_array().unwrap();
        assert!(!top.is_empty());
        assert!(top[0]["name"].is_string() && top[0]["self_us"].is_number());
        assert!(!r["top_spans_total"].as_array().unwrap().is_empty());
    }
    assert_eq!(doc["straggler"]["rank"], 3);
    assert_eq!(doc["straggler"]["method"], "wait-caused");
    assert_eq!(doc["collectives"]["matched"], 5);
    assert_eq!(doc["collectives"]["per_rank"][3]["last_count"], 5);
    assert_eq!(doc["collectives"]["worst"][0]["last_rank"], 3);
    assert!(doc["straggler"]["reason"].as_str().unwrap().contains("rank 3"));
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("<svg") && page.contains("polyline"));
    assert!(!page.contains("http://") || !page.contains("src=\"http"));
    assert!(!page.contains("<script"));
    check_report(&page, 3, 5);
    // On paper, in greyscale: a print stylesheet, every other rank's line
    // dashed and marked, the shading in classes the print style darkens.
    assert!(page.contains("@media print{"), "no print stylesheet");
    assert_eq!(page.matches("stroke-dasharray=\"8 4\" points=").count(), 1, "rank 0 dashed");
    assert_eq!(page.matches("stroke-dasharray=\"2 3\" points=").count(), 1, "rank 1 dashed");
    assert!(page.contains("<path d=\"M"), "no markers");
    assert!(page.contains("<td class=\"h"), "no heat classes");
    // The blame chart: rank 3's bar is marked, numbers printed.
    assert!(page.contains("Who made whom wait"), "no blame section");
    assert!(page.contains("caused ") && page.contains(" · last 5×"), "blame values missing");
    assert!(page.contains("Worst collectives by skew"));

    // Text: the verdict is the first line.
    let out =
        Cli::new(env!("CARGO_BIN_EXE_ranktune")).args(["trace", "summary"]).arg(dir.path()).run();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.lines().next().unwrap().starts_with("Straggler: rank 3 "), "{text}");
}

#[test]
fn cli_json_straggler_null_for_single_rank() {
    let spec = JobSpec { ranks: 1, shape: Shape::Ranktune, ..JobSpec::default() };
    let (dir, files) = job(&spec);
    let out = Cli::new(env!("CARGO_BIN_EXE_ranktune"))
        .args(["trace", "summary", "--json"])
        .arg(&files[0])
        .run();
    assert!(out.status.success());
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(doc["straggler"].is_null());
    assert_eq!(doc["ranks"][0]["steps"], 8);
    drop(dir);
}

/// The HTML report reads on paper: tick labels on both axes of the step
/// chart and on the span chart, values printed on the bars, the straggler
/// (`rank`) marked in the table, the charts and the step table, the verdict
/// without literal backticks, and the slowest rank of every step.
fn check_report(page: &str, rank: u32, steps: usize) {
    let count = |needle: &str| page.matches(needle).count();
    // Step chart: y ticks (times) and x ticks (iteration numbers); span chart: x ticks.
    assert!(count("<text class=\"tick\"") >= 3 + steps.min(12) + 3, "tick labels:\n{page}");
    let numbered = page
        .split("text-anchor=\"middle\">")
        .skip(1)
        .filter(|t| t.split('<').next().is_some_and(|n| n.parse::<u64>().is_ok()))
        .count();
    assert!(numbered >= steps.min(12), "iterations are labeled: {numbered}");
    assert!(page.contains("text-anchor=\"end\">0 µs</text>"), "the time axis starts at 0 µs");
    assert!(page.contains(">iteration (ProfilerStep#)</text>"));
    // Values without hover: on the bars (segments and totals) and in the table behind them.
    assert!(count("<text class=\"value") >= 4, "bar value labels");
    assert!(page.contains("<table class=\"spans\">"));
    // The straggler is highlighted everywhere.
    let row = format!("<tr class=\"straggler\"><td>{rank}<span class=\"tag\">straggler</span>");
    assert!(page.contains(&row), "table row of rank {rank}");
    assert!(page.contains("<polyline class=\"straggler\""), "its line");
    assert!(page.contains("<rect class=\"straggler\" x="), "its bar");
    assert!(page.contains(&format!(">rank {rank} (straggler)</")), "legend and bar label");
    assert!(
        page.contains(&format!("<th class=\"straggler\">rank {rank}</th>")),
        "step table column"
    );
    // The verdict: code, not backticks.
    let verdict = page.split("<p class=\"verdict\"").nth(1).unwrap().split("</p>").next().unwrap();
    assert!(!verdict.contains('`') && verdict.contains("<code>"), "{verdict}");
    // Per-rank × per-step: one row per step, each naming its slowest rank.
    let table = page.split("Slowest rank in each step").nth(1).expect("the step table");
    assert_eq!(table.matches("slowest\">").count(), steps, "{table}");
    assert!(
        table.contains(&format!("{steps} of {steps}</th>")),
        "rank {rank} slowest in every step"
    );
}
