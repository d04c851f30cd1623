//! Per-collective blame on generated jobs with planted delays: matching by
//! `Seq` and by order, Kineto- and ranktune-shaped traces, a rank late to
//! every step's first collective named by wait caused (while counting last
//! arrivals names another rank), and a skipped collective reported at its
//! position.
use ranktune_testkit::synth::{self, CommArgs, JobSpec, Shape};
use ranktune_trace_analyze::{self as analyze, Method, SummaryOptions};

fn summarize(spec: &JobSpec) -> analyze::Summary {
    let dir = tempfile::tempdir().unwrap();
    synth::write_job(spec, dir.path()).unwrap();
    let res = analyze::resolve(&[dir.path().display().to_string()], &[]).unwrap();
    assert_eq!(res.inputs.len() as u32, spec.ranks);
    analyze::summarize(&res.inputs, &SummaryOptions::default()).unwrap()
}

/// Rank 1 is 400 µs late to the first of three collectives of every step;
/// rank 2 is a little late (6 µs) to the second and third.
fn late_first(shape: Shape, comm_args: CommArgs) -> JobSpec {
    JobSpec {
        ranks: 4,
        steps: 6,
        ops_per_step: 15,
        collectives: true,
        collectives_per_step: 3,
        delays: vec![(1, 0, 400.0), (2, 1, 6.0), (2, 2, 6.0)],
        shape,
        comm_args,
        ..JobSpec::default()
    }
}

fn check_late_first(s: &analyze::Summary, steps: u64) {
    let c = &s.collectives;
    assert_eq!((c.matched, c.mismatched), (3 * steps, 0), "{c:?}");
    assert!(c.mismatches.is_empty(), "{:?}", c.mismatches);
    // Counting last arrivals names rank 2 (last at 2 of 3 per step) …
    let often = c.most_often_last().unwrap();
    assert_eq!(often.rank, 2, "{:?}", c.per_rank);
    assert_eq!(often.last_count, 2 * steps);
    // … but rank 1 caused the wait: about 400 µs at every first collective.
    let caused = c.most_wait_caused().unwrap();
    assert_eq!(caused.rank, 1, "{:?}", c.per_rank);
    assert_eq!(caused.last_count, steps);
    let per = caused.wait_caused_us / steps as f64;
    assert!((380.0..=420.0).contains(&per), "rank 1 caused {per} µs per step");
    assert!(c.per_rank[2].wait_caused_us < caused.wait_caused_us / 10.0, "{:?}", c.per_rank);
    // The others waited for rank 1; rank 1 waited least.
    let least =
        c.per_rank.iter().min_by(|a, b| a.wait_suffered_us.total_cmp(&b.wait_suffered_us)).unwrap();
    assert_eq!(least.rank, 1, "{:?}", c.per_rank);
    // The worst collectives are the first of each step, rank 1 last.
    assert_eq!(c.worst.len(), 10);
    for w in &c.worst[..steps as usize] {
        assert_eq!(w.last_rank, 1, "{w:?}");
        assert!(w.skew_us >= 390.0, "{w:?}");
        assert_eq!(analyze_name(&w.name), "allreduce", "{w:?}");
    }
    // The verdict: rank 1, by wait caused, at the all-reduce, after the
    // planted span; and it says that rank 2 was last more often.
    let st = s.straggler.as_ref().expect("a straggler");
    assert_eq!(st.rank, 1, "{}", s.verdict);
    assert_eq!(st.method, Method::WaitCaused);
    let k = st.collective.as_ref().unwrap();
    assert_eq!(analyze_name(&k.name), "allreduce", "{}", s.verdict);
    assert_eq!(k.count, steps);
    let (span, extra) = st.span.as_ref().expect("the span before it");
    assert_eq!(span, "planted_delay", "{}", s.verdict);
    assert!(*extra > 350.0, "{}", s.verdict);
    assert!(s.verdict.starts_with("Straggler: rank 1 made the others wait"), "{}", s.verdict);
    assert!(s.verdict.contains("rank 2 arrived last more often"), "{}", s.verdict);
    assert!(s.verdict.contains("`planted_delay`"), "{}", s.verdict);
}

/// Collective names differ by source (`allreduce`, `ncclDevKernel_AllReduce…`,
/// `all_reduce`); tests compare them loosely.
fn analyze_name(n: &str) -> String {
    let n = n.to_ascii_lowercase().replace('_', "");
    if n.contains("allreduce") {
        "allreduce".into()
    } else if n.contains("allgather") {
        "allgather".into()
    } else if n.contains("reducescatter") {
        "reducescatter".into()
    } else {
        n
    }
}

#[test]
fn kineto_with_seq_names_the_rank_by_wait_caused() {
    let s = summarize(&late_first(Shape::Kineto, CommArgs::Seq));
    check_late_first(&s, 6);
    // Matched by Seq, in the recorded process group.
    let w = &s.collectives.worst[0];
    assert_eq!(w.group.as_deref(), Some("0"));
    assert!(w.seq >= 1 && w.seq <= 18, "{w:?}");
}

#[test]
fn kineto_without_seq_matches_by_order() {
    let s = summarize(&late_first(Shape::Kineto, CommArgs::Basic));
    check_late_first(&s, 6);
    assert_eq!(s.collectives.worst[0].group, None);
}

#[test]
fn kineto_without_record_param_comms_uses_the_kernels() {
    let s = summarize(&late_first(Shape::Kineto, CommArgs::None));
    check_late_first(&s, 6);
}

#[test]
fn ranktune_collective_spans() {
    let s = summarize(&late_first(Shape::Ranktune, CommArgs::Basic));
    check_late_first(&s, 6);
}

/// One rank skips the all-gather (position 1) of step 2: with three
/// collectives per step, that is position 3 * 2 + 1 = 7 of the group.
fn skipped(comm_args: CommArgs, shape: Shape) -> analyze::Summary {
    summarize(&JobSpec {
        ranks: 4,
        steps: 4,
        ops_per_step: 12,
        collectives: true,
        collectives_per_step: 3,
        skip: Some((3, 2, 1)),
        shape,
        comm_args,
        ..JobSpec::default()
    })
}

#[test]
fn a_skipped_collective_is_reported_at_its_position_by_order() {
    for (shape, args) in [
        (Shape::Kineto, CommArgs::Basic),
        (Shape::Kineto, CommArgs::None),
        (Shape::Ranktune, CommArgs::Basic),
    ] {
        let s = skipped(args, shape);
        let c = &s.collectives;
        assert_eq!(c.mismatches.len(), 1, "{shape:?} {args:?}: {:?}", c.mismatches);
        let m = &c.mismatches[0];
        assert_eq!((m.position, m.by_seq), (7, false), "{m:?}");
        assert!(m.detail.starts_with("rank 3 has "), "{}", m.detail);
        assert!(m.detail.contains("where ranks 0, 1, 2 have "), "{}", m.detail);
        assert!(m.detail.contains("3: 11"), "{}", m.detail);
        // Positions 0..7 matched; 7..12 (rank 0..2 have 12) are not trusted.
        assert_eq!((c.matched, c.mismatched), (7, 5), "{shape:?} {args:?}");
        let text = s.to_text();
        assert!(text.contains("mismatch at position 7: rank 3 has "), "{text}");
    }
}

#[test]
fn a_skipped_collective_is_reported_at_its_seq() {
    let s = skipped(CommArgs::Seq, Shape::Kineto);
    let c = &s.collectives;
    assert_eq!(c.mismatches.len(), 1, "{:?}", c.mismatches);
    let m = &c.mismatches[0];
    // Seq starts at 1: the 8th collective of the group.
    assert_eq!((m.position, m.by_seq), (8, true), "{m:?}");
    assert_eq!(m.group.as_deref(), Some("0"));
    assert!(
        m.detail.starts_with("rank 3 has `reduce_scatter` where ranks 0, 1, 2 have `allgather`"),
        "{}",
        m.detail
    );
    // Seq 1..=7 matched; 8..=11 (rank 3's last seq) diverged.
    assert_eq!((c.matched, c.mismatched), (7, 4));
}

#[test]
fn balanced_job_with_collectives_has_no_straggler() {
    let s = summarize(&JobSpec {
        ranks: 4,
        steps: 5,
        collectives: true,
        collectives_per_step: 2,
        comm_args: CommArgs::Seq,
        ..JobSpec::default()
    });
    assert_eq!(s.collectives.matched, 10);
    assert!(s.straggler.is_none(), "{}", s.verdict);
    assert!(s.verdict.starts_with("No straggler: the most wait any rank caused"), "{}", s.verdict);
}

#[test]
fn json_has_the_documented_collectives_schema() {
    let s = summarize(&late_first(Shape::Kineto, CommArgs::Seq));
    let j = s.to_json();
    let c = &j["collectives"];
    assert_eq!(c["matched"], 18);
    assert_eq!(c["mismatched"], 0);
    let per = c["per_rank"].as_array().unwrap();
    assert_eq!(per.len(), 4);
    for (i, p) in per.iter().enumerate() {
        let keys: Vec<&str> = p.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(keys, ["last_count", "rank", "wait_caused_us", "wait_suffered_us"]);
        assert_eq!(p["rank"], i as u64);
    }
    assert_eq!(per[1]["last_count"], 6);
    let worst = c["worst"].as_array().unwrap();
    assert_eq!(worst.len(), 10);
    let keys: Vec<&str> = worst[0].as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(keys, ["group", "last_rank", "name", "seq", "skew_us"]);
    let skews: Vec<f64> = worst.iter().map(|w| w["skew_us"].as_f64().unwrap()).collect();
    assert!(skews.windows(2).all(|w| w[0] >= w[1]), "{skews:?}");
    assert_eq!(worst[0]["last_rank"], 1);
    assert_eq!(c["mismatches"].as_array().unwrap().len(), 0);
    // ranks[i] keeps its fields.
    for key in ["rank", "file", "steps", "step_mean_us", "collective_us", "top_spans_self"] {
        assert!(j["ranks"][0].get(key).is_some(), "ranks[0].{key}");
    }
    assert_eq!(j["straggler"]["method"], "wait-caused");
    assert_eq!(j["straggler"]["collective"]["name"], "allreduce");
    assert_eq!(j["straggler"]["span"]["name"], "planted_delay");
}

#[test]
fn text_shows_blame_and_worst_collectives() {
    let s = summarize(&late_first(Shape::Ranktune, CommArgs::Basic));
    let t = s.to_text();
    assert!(t.contains("collectives: 18 matched across ranks, 0 mismatched"), "{t}");
    assert!(t.contains("worst collectives by skew"), "{t}");
    // Rank 1's blame bar is the longest.
    let bar = |rank: &str| {
        t.lines()
            .find(|l| l.split_whitespace().next() == Some(rank) && l.contains('#'))
            .map_or(0, |l| l.matches('#').count())
    };
    assert_eq!(bar("1"), 30, "{t}");
    assert!(bar("2") < 5, "{t}");
}
