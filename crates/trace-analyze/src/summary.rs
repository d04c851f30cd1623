//! Trace summary: per-rank step statistics and top spans, and the verdict
//! on which rank is slow and where its extra time goes.
//!
//! Streaming and bounded: per rank it keeps one entry per distinct span name,
//! one entry per step, and per thread a small reorder window (spans are
//! nested with a stack, which needs them in start order; spans arriving later
//! than the window allows are counted, not nested, and reported).
//!
//! The verdict knows how synchronized jobs look: when ranks meet in a
//! collective every step, all steps are equally long and the slow rank is
//! the one with the most time *outside* collectives (it waits least inside
//! them). Without collectives the slow rank is the one with the longest
//! steps; without steps, the busiest one.

use super::collectives::{self, CollectiveCalls, Collectives, Collector};
use super::inputs::RankedInput;
use super::json;
use super::reader::TraceReader;
use super::AnalyzeError;
use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap};

/// How many spans the reorder window of one thread holds.
const WINDOW: usize = 4096;
/// A rank is called a straggler when it is this much slower (relative) than
/// the median of the other ranks.
pub const STRAGGLER_THRESHOLD: f64 = 0.05;

/// Options of [`summarize`].
#[derive(Debug, Clone)]
pub struct SummaryOptions {
    /// Spans listed per rank in the top lists.
    pub top: usize,
    /// Files read at once, one per worker thread; 0 means one per core.
    pub jobs: usize,
    /// How much slower than the others (a fraction: 0.05 is 5%) a rank must
    /// be to be named a straggler; [`STRAGGLER_THRESHOLD`] by default.
    pub straggler_threshold: f64,
}

impl Default for SummaryOptions {
    fn default() -> Self {
        SummaryOptions { top: 10, jobs: 0, straggler_threshold: STRAGGLER_THRESHOLD }
    }
}

/// Time spent in spans of one name on one rank.
#[derive(Debug, Clone, PartialEq)]
pub struct SpanStat {
    /// The span name.
    pub name: String,
    /// Number of spans.
    pub count: u64,
    /// Sum of durations, µs.
    pub total_us: f64,
    /// Sum of durations minus time in directly nested spans, µs.
    pub self_us: f64,
    /// Whether the name is a collective (all-reduce, all-gather, NCCL, …).
    pub collective: bool,
}

/// One iteration (`ProfilerStep#N`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Step {
    /// N.
    pub number: u64,
    /// Start, µs relative to the file's base.
    pub start_us: f64,
    /// Duration, µs.
    pub dur_us: f64,
    /// Time in collectives during the step, µs, on the thread or stream
    /// that spends most in them (0 without collectives; a lower bound when
    /// the rank had more than [`MAX_COLLECTIVE_INTERVALS`] collectives).
    pub collective_us: f64,
}

impl Step {
    /// Time outside collectives during the step, µs.
    pub fn outside_collective_us(&self) -> f64 {
        (self.dur_us - self.collective_us).max(0.0)
    }
}

/// Most top-level collective spans per thread kept for the per-step
/// collective time (16 bytes each).
pub const MAX_COLLECTIVE_INTERVALS: usize = 1 << 20;

/// Summary of one rank.
#[derive(Debug, Clone)]
pub struct RankSummary {
    /// The rank.
    pub rank: u32,
    /// The file.
    pub file: String,
    /// Events read.
    pub events: u64,
    /// Steps in order.
    pub steps: Vec<Step>,
    /// Mean step time, µs (`None` without steps).
    pub step_mean_us: Option<f64>,
    /// Median step time, µs.
    pub step_median_us: Option<f64>,
    /// 90th percentile step time, µs.
    pub step_p90_us: Option<f64>,
    /// Thread-busy time: per thread, time covered by top-level spans, summed
    /// over threads (can exceed wall time with several threads or streams).
    pub busy_us: f64,
    /// Time in collectives on the thread or stream that spends most in them.
    pub collective_us: f64,
    /// The measured window: total step time, or the span extent without steps.
    pub window_us: f64,
    /// Every span name, by self time (largest first).
    pub spans: Vec<SpanStat>,
    /// Spans that arrived too far out of order to be nested (self times of
    /// their parents are then slightly too high).
    pub late_spans: u64,
    /// Its collective calls, matched across ranks into
    /// [`Summary::collectives`].
    pub collectives: CollectiveCalls,
}

impl RankSummary {
    /// Steps counted for per-step figures (1 without steps).
    fn per(&self) -> f64 {
        self.steps.len().max(1) as f64
    }
    /// Time outside collectives in the window, µs.
    pub fn outside_collective_us(&self) -> f64 {
        (self.window_us - self.collective_us).max(0.0)
    }
    /// Top spans by total time (excluding step markers).
    pub fn top_total(&self, n: usize) -> Vec<SpanStat> {
        let mut v = self.spans.clone();
        v.sort_by(|a, b| b.total_us.total_cmp(&a.total_us));
        v.truncate(n);
        v
    }
    /// Top spans by self time (excluding step markers).
    pub fn top_self(&self, n: usize) -> Vec<SpanStat> {
        self.spans.iter().take(n).cloned().collect()
    }
}

/// How the straggler was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// Most time outside collectives (synchronized job).
    OutsideCollectives,
    /// Longest mean step.
    StepTime,
    /// Most busy time (no steps).
    BusyTime,
    /// Most wait caused at matched collectives (arrived last, by how much).
    WaitCaused,
}

impl Method {
    /// The name the JSON document gives it.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Method::OutsideCollectives => "outside-collectives",
            Method::StepTime => "step-time",
            Method::BusyTime => "busy-time",
            Method::WaitCaused => "wait-caused",
        }
    }
}

/// The slow rank.
#[derive(Debug, Clone)]
pub struct Straggler {
    /// The rank.
    pub rank: u32,
    /// One human-readable sentence (the JSON `reason`).
    pub reason: String,
    /// The same at a glance: a short headline (`rank 3 made the others wait
    /// at collectives`) ...
    pub headline: String,
    /// ... and the figures behind it, one `(what, value)` per line, as
    /// `trace summary` prints them under the headline.
    pub facts: Vec<(String, String)>,
    /// How it was found.
    pub method: Method,
    /// Its figure (per step where there are steps), µs.
    pub value_us: f64,
    /// The median figure of the other ranks, µs.
    pub others_us: f64,
    /// `(value - others) / others`.
    pub excess: f64,
    /// The span where most extra time goes, and how much more per step (µs);
    /// with [`Method::WaitCaused`], the span before the collective where it
    /// caused the most wait, and how much longer it ran there than the
    /// other ranks' span before the same collective (µs, mean per time it
    /// arrived last there).
    pub span: Option<(String, f64)>,
    /// With [`Method::WaitCaused`]: the collective where it caused the most
    /// wait.
    pub collective: Option<collectives::Culprit>,
}

/// The whole summary.
#[derive(Debug, Clone)]
pub struct Summary {
    /// Per rank, in rank order.
    pub ranks: Vec<RankSummary>,
    /// The slow rank, if one stands out.
    pub straggler: Option<Straggler>,
    /// The one-line verdict.
    pub verdict: String,
    /// Warnings naming files and what was skipped.
    pub warnings: Vec<String>,
    /// Spans listed per rank.
    pub top: usize,
    /// Collectives matched across ranks, and who made whom wait.
    pub collectives: Collectives,
}

type FxMap<K, V> = ranktune_core::hash::FastMap<K, V>;

/// Span arithmetic is done in whole nanoseconds: in floating point a span
/// that starts exactly where the previous one ends (`37515.566` after one
/// that ends at `37515.566000000006`) would look nested in it and vanish
/// from the busy time.
type Ns = i64;

/// Microseconds as read from a file to whole nanoseconds (text times have
/// at most three decimals, so this is exact for them).
fn to_ns(us: f64) -> Ns {
    // `as` saturates and maps NaN to 0.
    (us * 1000.0).round() as Ns
}

/// Nanoseconds back to microseconds.
fn to_us(ns: Ns) -> f64 {
    ns as f64 / 1000.0
}

struct NameAgg {
    raw: Vec<u8>,
    count: u64,
    total: Ns,
    self_: Ns,
    comm: bool,
    step: bool,
}

#[derive(Clone, Copy)]
struct Pending {
    start: Ns,
    dur: Ns,
    name: u32,
}
impl PartialEq for Pending {
    fn eq(&self, o: &Self) -> bool {
        self.cmp(o) == Ordering::Equal
    }
}
impl Eq for Pending {}
impl PartialOrd for Pending {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Pending {
    // Reversed: BinaryHeap is a max-heap, we pop the earliest start first,
    // and the longer span first on ties (parents before children).
    fn cmp(&self, o: &Self) -> Ordering {
        o.start.cmp(&self.start).then(self.dur.cmp(&o.dur))
    }
}

struct Open {
    end: Ns,
    dur: Ns,
    child: Ns,
    name: u32,
    comm: bool,
}

#[derive(Default)]
struct Thread {
    heap: BinaryHeap<Pending>,
    stack: Vec<Open>,
    open_comm: usize,
    last_start: Ns,
    started: bool,
    /// The union of the thread's span intervals so far (spans arrive in
    /// start order), and where it ends.
    busy: Ns,
    covered_until: Ns,
    comm: Ns,
    /// Top-level collective spans (start, duration), in start order.
    comm_spans: Vec<(Ns, Ns)>,
    begins: Vec<(u32, f64)>,
}

#[derive(Default)]
struct RankAcc {
    names: Vec<NameAgg>,
    index: FxMap<Vec<u8>, u32>,
    threads: FxMap<Vec<u8>, Thread>,
    steps: HashMap<u64, (Step, bool)>,
    late: u64,
    min_start: Ns,
    max_end: Ns,
    any_span: bool,
}

fn is_collective(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    const PAT: [&str; 13] = [
        "nccl",
        "gloo",
        "c10d::",
        "record_param_comms",
        "allreduce",
        "all_reduce",
        "allgather",
        "all_gather",
        "reduce_scatter",
        "reducescatter",
        "alltoall",
        "all_to_all",
        "barrier",
    ];
    PAT.iter().any(|p| n.contains(p)) || (n.contains("broadcast") && !n.starts_with("aten::"))
}

impl RankAcc {
    fn intern(&mut self, raw: &[u8]) -> u32 {
        if let Some(&i) = self.index.get(raw) {
            return i;
        }
        let name = json::unescape(raw).unwrap_or_default();
        let i = self.names.len() as u32;
        self.names.push(NameAgg {
            raw: raw.to_vec(),
            count: 0,
            total: 0,
            self_: 0,
            comm: is_collective(&name),
            step: name.starts_with("ProfilerStep#"),
        });
        self.index.insert(raw.to_vec(), i);
        i
    }

    fn span(&mut self, tid: &[u8], start_us: f64, dur_us: f64, name: u32) {
        let start = to_ns(start_us);
        let dur = to_ns(dur_us).max(0);
        if !self.any_span {
            self.any_span = true;
            self.min_start = start;
            self.max_end = start.saturating_add(dur);
        } else {
            self.min_start = self.min_start.min(start);
            self.max_end = self.max_end.max(start.saturating_add(dur));
        }
        let t = match self.threads.get_mut(tid) {
            Some(t) => t,
            None => self.threads.entry(tid.to_vec()).or_default(),
        };
        t.heap.push(Pending { start, dur, name });
        if t.heap.len() > WINDOW {
            if let Some(p) = t.heap.pop() {
                process(t, &mut self.names, &mut self.late, p);
            }
        }
    }

    fn finish(mut self, rank: u32, file: String, events: u64) -> RankSummary {
        for t in self.threads.values_mut() {
            while let Some(p) = t.heap.pop() {
                process(t, &mut self.names, &mut self.late, p);
            }
            while let Some(o) = t.stack.pop() {
                close(&mut self.names, o);
            }
        }
        let busy = to_us(self.threads.values().map(|t| t.busy).sum());
        let comm_thread = self.threads.values().max_by_key(|t| t.comm);
        let comm = to_us(comm_thread.map_or(0, |t| t.comm));
        let mut steps: Vec<Step> = self.steps.into_values().map(|(s, _)| s).collect();
        steps.sort_by_key(|s| s.number);
        if let Some(t) = comm_thread.filter(|t| !t.comm_spans.is_empty()) {
            let mut spans = t.comm_spans.clone();
            spans.sort_unstable();
            for st in &mut steps {
                let (from, to) = (to_ns(st.start_us), to_ns(st.start_us + st.dur_us));
                let first = spans.partition_point(|&(s, d)| s.saturating_add(d) <= from);
                let inside: Ns = spans[first..]
                    .iter()
                    .take_while(|&&(s, _)| s < to)
                    .map(|&(s, d)| s.saturating_add(d).min(to) - s.max(from))
                    .filter(|&d| d > 0)
                    .sum();
                st.collective_us = to_us(inside);
            }
        }
        let mut durs: Vec<f64> = steps.iter().map(|s| s.dur_us).collect();
        durs.sort_by(f64::total_cmp);
        let (mean, median, p90) = if durs.is_empty() {
            (None, None, None)
        } else {
            let n = durs.len();
            let mean = durs.iter().sum::<f64>() / n as f64;
            let median =
                if n % 2 == 1 { durs[n / 2] } else { (durs[n / 2 - 1] + durs[n / 2]) / 2.0 };
            let p90 = durs[((0.9 * n as f64).ceil() as usize).clamp(1, n) - 1];
            (Some(mean), Some(median), Some(p90))
        };
        let window = if steps.is_empty() {
            if self.any_span {
                to_us(self.max_end - self.min_start)
            } else {
                0.0
            }
        } else {
            durs.iter().sum()
        };
        let mut spans: Vec<SpanStat> = self
            .names
            .iter()
            .filter(|n| !n.step && n.count > 0)
            .map(|n| SpanStat {
                name: json::unescape(&n.raw)
                    .unwrap_or_else(|| String::from_utf8_lossy(&n.raw).into_owned()),
                count: n.count,
                total_us: to_us(n.total),
                self_us: to_us(n.self_),
                collective: n.comm,
            })
            .collect();
        spans.sort_by(|a, b| b.self_us.total_cmp(&a.self_us));
        RankSummary {
            rank,
            file,
            events,
            steps,
            step_mean_us: mean,
            step_median_us: median,
            step_p90_us: p90,
            busy_us: busy,
            collective_us: comm,
            window_us: window,
            spans,
            late_spans: self.late,
            collectives: CollectiveCalls::default(),
        }
    }
}

fn close(names: &mut [NameAgg], o: Open) {
    if let Some(n) = names.get_mut(o.name as usize) {
        n.self_ += (o.dur - o.child).max(0);
    }
}

fn process(t: &mut Thread, names: &mut [NameAgg], late: &mut u64, p: Pending) {
    let Some(agg) = names.get_mut(p.name as usize) else {
        return;
    };
    agg.count += 1;
    agg.total += p.dur;
    let comm = agg.comm;
    // Busy time is the union of the intervals, whatever their overlaps: a
    // step that starts a hair before the previous one ends (times truncated
    // to whole nanoseconds) adds what it covers beyond it, not nothing.
    let end = p.start.saturating_add(p.dur);
    if end > t.covered_until {
        t.busy += end - p.start.max(t.covered_until);
        t.covered_until = end;
    }
    if t.started && p.start < t.last_start {
        // Too late to nest: count it on its own.
        *late += 1;
        agg.self_ += p.dur;
        return;
    }
    t.started = true;
    t.last_start = p.start;
    while let Some(top) = t.stack.last() {
        if top.end <= p.start {
            if let Some(o) = t.stack.pop() {
                if o.comm {
                    t.open_comm -= 1;
                }
                close(names, o);
            }
        } else {
            break;
        }
    }
    if let Some(top) = t.stack.last_mut() {
        top.child += p.dur.min(top.end - p.start);
    }
    if comm {
        if t.open_comm == 0 {
            t.comm += p.dur;
            if t.comm_spans.len() < MAX_COLLECTIVE_INTERVALS {
                t.comm_spans.push((p.start, p.dur));
            }
        }
        t.open_comm += 1;
    }
    t.stack.push(Open {
        end: p.start.saturating_add(p.dur),
        dur: p.dur,
        child: 0,
        name: p.name,
        comm,
    });
}

/// Summarizes one rank's trace.
pub fn summarize_rank(input: &RankedInput) -> Result<(RankSummary, Vec<String>), AnalyzeError> {
    let mut r = TraceReader::open(&input.path)?;
    let mut acc = RankAcc::default();
    let mut coll = Collector::default();
    while let Some(ev) = r.next_event()? {
        let ph = ev.ph();
        if ph != b'X' && ph != b'B' && ph != b'E' {
            continue;
        }
        let Some(ts) = ev.ts_us() else { continue };
        // Kineto's own bookkeeping span ("PyTorch Profiler (0)") is not work.
        if ev.cat_raw() == Some(b"\"Trace\"") {
            continue;
        }
        let mut thread_key = Vec::with_capacity(24);
        thread_key.extend_from_slice(ev.pid_raw());
        thread_key.push(0);
        thread_key.extend_from_slice(ev.tid_raw());
        match ph {
            b'X' => {
                let name_raw = ev.name_raw().unwrap_or(b"\"\"");
                let dur = ev.dur_us().unwrap_or(0.0);
                let name = acc.intern(name_raw);
                if acc.names[name as usize].step {
                    let number = name_raw
                        .strip_prefix(b"\"ProfilerStep#")
                        .and_then(|s| s.strip_suffix(b"\""))
                        .and_then(json::parse_u64)
                        .unwrap_or(u64::MAX - acc.steps.len() as u64);
                    let gpu = ev.cat_raw().is_some_and(|c| c.starts_with(b"\"gpu_"));
                    let step = Step { number, start_us: ts, dur_us: dur, collective_us: 0.0 };
                    match acc.steps.get(&number) {
                        Some((_, was_gpu)) if !*was_gpu || gpu => {}
                        _ => {
                            acc.steps.insert(number, (step, gpu));
                        }
                    }
                }
                let n = &acc.names[name as usize];
                coll.span(
                    Some(&ev),
                    name_raw,
                    &thread_key,
                    to_ns(ts),
                    to_ns(dur).max(0),
                    name,
                    n.comm,
                    n.step,
                );
                acc.span(&thread_key, ts, dur, name);
            }
            b'B' => {
                let name = acc.intern(ev.name_raw().unwrap_or(b"\"\""));
                let t = acc.threads.entry(thread_key).or_default();
                if t.begins.len() < 1 << 16 {
                    t.begins.push((name, ts));
                }
            }
            _ => {
                let begun = acc.threads.get_mut(&thread_key).and_then(|t| t.begins.pop());
                if let Some((name, start)) = begun {
                    let n = &acc.names[name as usize];
                    let (s0, d0) = (to_ns(start), (to_ns(ts) - to_ns(start)).max(0));
                    coll.span(None, &n.raw, &thread_key, s0, d0, name, n.comm, n.step);
                    acc.span(&thread_key, start, ts - start, name);
                }
            }
        }
    }
    r.drain()?;
    let mut warnings = r.warnings();
    let names = |id: u32| {
        acc.names.get(id as usize).and_then(|n| json::unescape(&n.raw)).unwrap_or_default()
    };
    let calls = coll.finish(&names, input.base_ns);
    let mut s = acc.finish(input.rank, input.path.display().to_string(), r.stats().events);
    if calls.dropped() > 0 {
        warnings.push(format!(
            "{}: more than {} collective calls; the {} after them are not matched across ranks",
            s.file,
            collectives::MAX_CALLS,
            calls.dropped()
        ));
    }
    s.collectives = calls;
    if s.late_spans > 0 {
        warnings.push(format!(
            "{}: {} spans arrived too far out of order to be nested; self times of their parents are approximate",
            s.file, s.late_spans
        ));
    }
    Ok((s, warnings))
}

type RankResult = Result<(RankSummary, Vec<String>), AnalyzeError>;

/// Summarizes every rank (in parallel, one file per worker, up to
/// `opts.jobs` workers) and judges them.
pub fn summarize(inputs: &[RankedInput], opts: &SummaryOptions) -> Result<Summary, AnalyzeError> {
    let workers = super::inputs::workers(opts.jobs, inputs.len());
    let next = std::sync::atomic::AtomicUsize::new(0);
    let mut results: Vec<Option<RankResult>> = (0..inputs.len()).map(|_| None).collect();
    let slots = std::sync::Mutex::new(&mut results);
    std::thread::scope(|s| {
        for _ in 0..workers {
            s.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(input) = inputs.get(i) else { break };
                let r = summarize_rank(input);
                if let Ok(mut g) = slots.lock() {
                    g[i] = Some(r);
                }
            });
        }
    });
    let mut ranks = Vec::new();
    let mut warnings = Vec::new();
    for r in results {
        match r {
            Some(Ok((s, w))) => {
                ranks.push(s);
                warnings.extend(w);
            }
            Some(Err(e)) => return Err(e),
            None => {
                return Err(AnalyzeError::NoTraces("a summary worker stopped unexpectedly".into()))
            }
        }
    }
    for r in &ranks {
        if r.steps.is_empty() {
            warnings.push(format!(
                "{}: no ProfilerStep# markers; rank {} is summarized by spans only",
                r.file, r.rank
            ));
        }
    }
    let pairs: Vec<(u32, &CollectiveCalls)> =
        ranks.iter().map(|r| (r.rank, &r.collectives)).collect();
    let collectives = collectives::analyze(&pairs);
    let (straggler, verdict) = judge_with(&ranks, &collectives, opts.straggler_threshold);
    Ok(Summary { ranks, straggler, verdict, warnings, top: opts.top, collectives })
}

fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// A fraction as a percentage without needless digits: `0.05` → `5`,
/// `0.025` → `2.5`.
fn percent(fraction: f64) -> String {
    let p = format!("{:.2}", fraction * 100.0);
    p.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// Formats microseconds for people: `812 µs`, `12.3 ms`, `1.23 s`.
pub fn fmt_us(us: f64) -> String {
    let a = us.abs();
    if a >= 1e6 {
        format!("{:.2} s", us / 1e6)
    } else if a >= 1e4 {
        format!("{:.1} ms", us / 1e3)
    } else if a >= 1e3 {
        format!("{:.2} ms", us / 1e3)
    } else {
        format!("{us:.0} µs")
    }
}

/// How ranks are compared: time outside collectives when most ranks have
/// collectives (a synchronized job), else step time when every rank has
/// steps, else busy time.
pub(crate) fn method_for(ranks: &[RankSummary]) -> Method {
    let with_comm = ranks.iter().filter(|r| r.collective_us > 0.0).count();
    if with_comm * 2 > ranks.len() {
        Method::OutsideCollectives
    } else if ranks.iter().all(|r| !r.steps.is_empty()) {
        Method::StepTime
    } else {
        Method::BusyTime
    }
}

/// Finds the slow rank among `ranks`: the one more than `threshold` (a
/// fraction, [`STRAGGLER_THRESHOLD`] by default) slower than the others'
/// median; returns it and the one-line verdict.
pub fn judge(ranks: &[RankSummary], threshold: f64) -> (Option<Straggler>, String) {
    if ranks.len() < 2 {
        let line = match ranks.first() {
            Some(r) => match r.step_mean_us {
                Some(m) => format!(
                    "One rank (rank {}): {} steps, mean {}; nothing to compare it with.",
                    r.rank,
                    r.steps.len(),
                    fmt_us(m)
                ),
                None => format!(
                    "One rank (rank {}), no step markers: spans only; nothing to compare it with.",
                    r.rank
                ),
            },
            None => "No ranks.".into(),
        };
        return (None, line);
    }
    let method = method_for(ranks);
    let figure = |r: &RankSummary| match method {
        // method_for never picks WaitCaused (judge_with does).
        Method::OutsideCollectives | Method::WaitCaused => r.outside_collective_us() / r.per(),
        Method::StepTime => r.step_mean_us.unwrap_or(0.0),
        Method::BusyTime => r.busy_us,
    };
    let figs: Vec<f64> = ranks.iter().map(figure).collect();
    let (slow, &value) =
        figs.iter().enumerate().max_by(|a, b| a.1.total_cmp(b.1)).unwrap_or((0, &0.0));
    let others =
        median(figs.iter().enumerate().filter(|(i, _)| *i != slow).map(|(_, v)| *v).collect());
    let excess = if others > 0.0 { (value - others) / others } else { 0.0 };
    let what = match method {
        Method::OutsideCollectives | Method::WaitCaused => "time outside collectives per step",
        Method::StepTime => "mean step time",
        Method::BusyTime => "busy time (no step markers)",
    };
    if excess < threshold {
        let line = format!(
            "No straggler: {what} is within {:.1}% across {} ranks (threshold {}%).",
            excess.max(0.0) * 100.0,
            ranks.len(),
            percent(threshold)
        );
        return (None, line);
    }
    let s = &ranks[slow];
    let span = extra_span(ranks, slow);
    let (headline, figure_name) = match method {
        Method::OutsideCollectives | Method::WaitCaused => {
            (format!("rank {} is slow outside collectives", s.rank), "outside collectives per step")
        }
        Method::StepTime => (format!("rank {} has the longest steps", s.rank), "mean step"),
        Method::BusyTime => {
            (format!("rank {} is the busiest (no step markers)", s.rank), "busy time")
        }
    };
    let mut facts = vec![(
        figure_name.to_string(),
        format!(
            "{} vs {} on the other ranks (+{:.0}%)",
            fmt_us(value),
            fmt_us(others),
            excess * 100.0
        ),
    )];
    let mut reason = match method {
        Method::OutsideCollectives | Method::WaitCaused => {
            let waits: Vec<f64> = ranks
                .iter()
                .enumerate()
                .filter(|(i, _)| *i != slow)
                .map(|(_, r)| r.collective_us / r.per())
                .collect();
            facts.push((
                "its wait in collectives per step".into(),
                format!(
                    "{} while the others wait {} for it",
                    fmt_us(s.collective_us / s.per()),
                    fmt_us(median(waits.clone()))
                ),
            ));
            format!(
                "rank {} is slow: {} per step outside collectives vs {} on the other ranks (+{:.0}%); it waits {} per step in collectives while the others wait {} for it",
                s.rank,
                fmt_us(value),
                fmt_us(others),
                excess * 100.0,
                fmt_us(s.collective_us / s.per()),
                fmt_us(median(waits))
            )
        }
        Method::StepTime => format!(
            "rank {} is slow: mean step {} vs {} on the other ranks (+{:.0}%)",
            s.rank,
            fmt_us(value),
            fmt_us(others),
            excess * 100.0
        ),
        Method::BusyTime => format!(
            "rank {} is slow: busy {} vs {} on the other ranks (+{:.0}%, no step markers)",
            s.rank,
            fmt_us(value),
            fmt_us(others),
            excess * 100.0
        ),
    };
    if let Some((name, delta)) = &span {
        let unit = if s.steps.is_empty() { "" } else { " per step" };
        reason.push_str(&format!("; the extra time goes to `{name}` (+{}{unit})", fmt_us(*delta)));
        facts.push(("extra time goes to".into(), format!("`{name}` (+{}{unit})", fmt_us(*delta))));
    }
    let line = format!("Straggler: {reason}.");
    (
        Some(Straggler {
            rank: s.rank,
            reason,
            headline,
            facts,
            method,
            value_us: value,
            others_us: others,
            excess,
            span,
            collective: None,
        }),
        line,
    )
}

/// Like [`judge`], but when collectives were matched across ranks the slow
/// rank is the one that caused the most wait at them (arrived last, by how
/// much), named when its wait caused per step exceeds the other ranks'
/// median by `threshold` of a step ([`STRAGGLER_THRESHOLD`] by default).
pub fn judge_with(
    ranks: &[RankSummary],
    c: &Collectives,
    threshold: f64,
) -> (Option<Straggler>, String) {
    if ranks.len() < 2 || c.matched == 0 {
        return judge(ranks, threshold);
    }
    let per = |i: usize| ranks[i].per();
    let figs: Vec<f64> =
        c.per_rank.iter().enumerate().map(|(i, b)| b.wait_caused_us / per(i)).collect();
    let (slow, &value) = figs
        .iter()
        .enumerate()
        .max_by(|a, b| a.1.total_cmp(b.1).then(b.0.cmp(&a.0)))
        .unwrap_or((0, &0.0));
    let others =
        median(figs.iter().enumerate().filter(|(i, _)| *i != slow).map(|(_, v)| *v).collect());
    // A step: the median step (or window per step without steps).
    let scale =
        median(ranks.iter().map(|r| r.step_mean_us.unwrap_or(r.window_us / r.per())).collect());
    let excess = if scale > 0.0 { (value - others) / scale } else { 0.0 };
    let s = &ranks[slow];
    let unit = if s.steps.is_empty() { "" } else { " per step" };
    if excess < threshold {
        let line = format!(
            "No straggler: the most wait any rank caused at the {} matched collectives is {}{unit} (rank {}), {:.1}% of a step ({}) more than the other ranks (threshold {}%).",
            c.matched,
            fmt_us(value),
            s.rank,
            excess.max(0.0) * 100.0,
            fmt_us(scale),
            percent(threshold)
        );
        return (None, line);
    }
    let b = &c.per_rank[slow];
    let total = c.total_caused_us();
    let share = if total > 0.0 { b.wait_caused_us / total * 100.0 } else { 0.0 };
    let headline = format!("rank {} made the others wait at collectives", s.rank);
    let mut facts = vec![
        (
            format!("wait caused{unit}"),
            format!("{} vs {} on the other ranks", fmt_us(value), fmt_us(others)),
        ),
        (
            "wait caused in all".to_string(),
            format!("{} ({share:.0}% of the wait any rank caused)", fmt_us(b.wait_caused_us)),
        ),
        (
            "arrived last".to_string(),
            format!("at {} of {} matched collectives", b.last_count, c.matched),
        ),
    ];
    let mut reason = format!(
        "rank {} made the others wait: {} of wait caused{unit} at collectives vs {} on the other ranks ({} in all, {:.0}% of the wait caused by any rank; last at {} of {} matched collectives)",
        s.rank,
        fmt_us(value),
        fmt_us(others),
        fmt_us(b.wait_caused_us),
        share,
        b.last_count,
        c.matched
    );
    let culprit = c.culprits.iter().find(|k| k.rank == s.rank).cloned();
    if let Some(k) = &culprit {
        facts.push((
            "most at".into(),
            format!(
                "`{}`{}: {} of wait over {} times last",
                k.name,
                k.group.as_ref().map_or(String::new(), |g| format!(" in group {g}")),
                fmt_us(k.caused_us),
                k.count
            ),
        ));
        reason.push_str(&format!(
            "; most at `{}`{} ({} of wait over {} times last)",
            k.name,
            k.group.as_ref().map_or(String::new(), |g| format!(" in group {g}")),
            fmt_us(k.caused_us),
            k.count
        ));
        if let Some((name, extra)) = &k.span {
            facts.push((
                "after".into(),
                format!("`{name}` (+{} vs the span before it on the others)", fmt_us(*extra)),
            ));
            reason.push_str(&format!(
                ", after `{name}` (+{} vs the span before it on the other ranks)",
                fmt_us(*extra)
            ));
        }
    }
    if let Some(often) = c.most_often_last().filter(|o| o.rank != s.rank) {
        facts.push((
            "last more often".into(),
            format!(
                "rank {} ({} times), but it caused only {}",
                often.rank,
                often.last_count,
                fmt_us(often.wait_caused_us)
            ),
        ));
        reason.push_str(&format!(
            "; rank {} arrived last more often ({} times) but caused only {}",
            often.rank,
            often.last_count,
            fmt_us(often.wait_caused_us)
        ));
    }
    let suffered: Vec<f64> = c
        .per_rank
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != slow)
        .map(|(i, r)| r.wait_suffered_us / per(i))
        .collect();
    facts.push((
        format!("its own wait{unit}"),
        format!(
            "{} while the others wait {} for it",
            fmt_us(b.wait_suffered_us / per(slow)),
            fmt_us(median(suffered.clone()))
        ),
    ));
    reason.push_str(&format!(
        "; it waits {}{unit} in collectives while the others wait {} for it",
        fmt_us(b.wait_suffered_us / per(slow)),
        fmt_us(median(suffered))
    ));
    let line = format!("Straggler: {reason}.");
    let span = culprit.as_ref().and_then(|k| k.span.clone());
    (
        Some(Straggler {
            rank: s.rank,
            reason,
            headline,
            facts,
            method: Method::WaitCaused,
            value_us: value,
            others_us: others,
            excess,
            span,
            collective: culprit,
        }),
        line,
    )
}

impl Summary {
    /// The collectives section of the text report (nothing without
    /// collective calls).
    fn collectives_text(&self, o: &mut String) {
        let c = &self.collectives;
        if c.matched == 0 && c.mismatched == 0 {
            return;
        }
        o.push_str(&format!(
            "\ncollectives: {} matched across ranks, {} mismatched\n",
            c.matched, c.mismatched
        ));
        for m in &c.mismatches {
            o.push_str(&format!(
                "  mismatch{} at {} {}: {}\n",
                m.group.as_ref().map_or(String::new(), |g| format!(" in group {g}")),
                if m.by_seq { "Seq" } else { "position" },
                m.position,
                m.detail
            ));
        }
        if c.matched == 0 {
            return;
        }
        let max = c.per_rank.iter().map(|b| b.wait_caused_us).fold(0.0, f64::max);
        o.push_str(&format!(
            "{:>5} {:>6} {:>12} {:>14}  blame (wait caused)\n",
            "rank", "last", "wait caused", "wait suffered"
        ));
        for b in &c.per_rank {
            let width =
                if max > 0.0 { (b.wait_caused_us / max * 30.0).round() as usize } else { 0 };
            let line = format!(
                "{:>5} {:>6} {:>12} {:>14}  {}",
                b.rank,
                b.last_count,
                fmt_us(b.wait_caused_us),
                fmt_us(b.wait_suffered_us),
                "#".repeat(width)
            );
            o.push_str(line.trim_end());
            o.push('\n');
        }
        o.push_str("worst collectives by skew (last arrival − first):\n");
        o.push_str(&format!(
            "{:>10} {:>5} {:>10}  {:<8} {:>6}  collective\n",
            "skew", "last", "caused", "group", "seq"
        ));
        for w in &c.worst {
            o.push_str(&format!(
                "{:>10} {:>5} {:>10}  {:<8} {:>6}  {}\n",
                fmt_us(w.skew_us),
                w.last_rank,
                fmt_us(w.caused_us),
                w.group.as_deref().unwrap_or("-"),
                w.seq,
                w.name
            ));
        }
    }
}

/// The non-collective span whose self time per step on the slow rank
/// exceeds the other ranks' median by the most.
fn extra_span(ranks: &[RankSummary], slow: usize) -> Option<(String, f64)> {
    let s = &ranks[slow];
    let mut best: Option<(String, f64)> = None;
    for sp in s.spans.iter().filter(|sp| !sp.collective).take(200) {
        let mine = sp.self_us / s.per();
        let theirs = median(
            ranks
                .iter()
                .enumerate()
                .filter(|(i, _)| *i != slow)
                .map(|(_, r)| {
                    r.spans.iter().find(|o| o.name == sp.name).map_or(0.0, |o| o.self_us / r.per())
                })
                .collect(),
        );
        let delta = mine - theirs;
        if delta > 0.0 && best.as_ref().is_none_or(|b| delta > b.1) {
            best = Some((sp.name.clone(), delta));
        }
    }
    best
}

impl Summary {
    /// The report for people: the verdict first, details below.
    pub fn to_text(&self) -> String {
        let mut o = String::new();
        match &self.straggler {
            // A headline, then its figures one per line.
            Some(st) => {
                o.push_str(&format!("Straggler: {}.\n", st.headline));
                let width = st.facts.iter().map(|(k, _)| k.chars().count()).max().unwrap_or(0);
                for (k, v) in &st.facts {
                    let pad = width - k.chars().count();
                    o.push_str(&format!("  {k}{:pad$}  {v}\n", ""));
                }
                o.push('\n');
            }
            None => {
                o.push_str(&self.verdict);
                o.push_str("\n\n");
            }
        }
        o.push_str(&format!(
            "{:>5} {:>6} {:>10} {:>10} {:>10} {:>10} {:>13} {:>12}  file\n",
            "rank", "steps", "mean", "median", "p90", "busy", "collectives", "outside"
        ));
        let opt = |v: Option<f64>| v.map_or("-".to_string(), fmt_us);
        for r in &self.ranks {
            o.push_str(&format!(
                "{:>5} {:>6} {:>10} {:>10} {:>10} {:>10} {:>13} {:>12}  {}\n",
                r.rank,
                r.steps.len(),
                opt(r.step_mean_us),
                opt(r.step_median_us),
                opt(r.step_p90_us),
                fmt_us(r.busy_us),
                fmt_us(r.collective_us),
                fmt_us(r.outside_collective_us()),
                r.file
            ));
        }
        self.collectives_text(&mut o);
        for r in &self.ranks {
            o.push_str(&format!("\nrank {}: top spans by self time\n", r.rank));
            for s in r.top_self(self.top) {
                o.push_str(&format!(
                    "  {:>10} self {:>10} total {:>8}x  {}{}\n",
                    fmt_us(s.self_us),
                    fmt_us(s.total_us),
                    s.count,
                    s.name,
                    if s.collective { "  [collective]" } else { "" }
                ));
            }
            if r.spans.is_empty() {
                o.push_str("  (no spans)\n");
            }
        }
        o
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inputs::RankEvidence;

    fn input(dir: &std::path::Path, events: &str) -> RankedInput {
        let path = dir.join("trace_1.json");
        let text = format!(
            r#"{{"distributedInfo": {{"rank": 1, "world_size": 2}}, "traceEvents": [{events}]}}"#
        );
        std::fs::write(&path, text).unwrap();
        RankedInput {
            rank: 1,
            path,
            source: RankEvidence::DistributedInfo,
            base_ns: 0,
            world_size: Some(2),
            backend: None,
            run_id: None,
        }
    }

    /// `37515.552 + 0.014` is `37515.566000000006` in floating point, a hair
    /// after the next span's start `37515.566`: the next span must still count
    /// as busy, not vanish as a child of the first.
    #[test]
    fn back_to_back_spans_all_count_as_busy() {
        let (start, dur) = (std::hint::black_box(37515.552_f64), std::hint::black_box(0.014));
        assert!(start + dur > 37515.566, "the float sum overshoots");
        let dir = tempfile::tempdir().unwrap();
        let events = r#"
{"ph":"X","name":"a","pid":1,"tid":1,"ts":37515.552,"dur":0.014},
{"ph":"X","name":"b","pid":1,"tid":1,"ts":37515.566,"dur":11800.0},
{"ph":"X","name":"c","pid":1,"tid":1,"ts":49315.566,"dur":0.5}"#;
        let (s, _) = summarize_rank(&input(dir.path(), events)).unwrap();
        assert!((s.busy_us - 11800.514).abs() < 1e-6, "busy {}", s.busy_us);
        let b = s.spans.iter().find(|x| x.name == "b").unwrap();
        assert!((b.self_us - 11800.0).abs() < 1e-6, "b self {}", b.self_us);
        let a = s.spans.iter().find(|x| x.name == "a").unwrap();
        assert!((a.self_us - 0.014).abs() < 1e-6, "a self {}", a.self_us);
        assert!((s.window_us - 11800.514).abs() < 1e-6, "window {}", s.window_us);
    }

    /// Six steps of 10.1 µs whose recorded starts are truncated to three
    /// decimals, each starting a hair before the previous one ends: busy is
    /// the union of the intervals (60.6 µs less the overlaps), not 50.5.
    #[test]
    fn busy_is_the_union_of_the_intervals() {
        let dir = tempfile::tempdir().unwrap();
        let events: Vec<String> = (0..6)
            .map(|i| {
                let ts = (100.0 + 10.1 * f64::from(i) - 0.0005) * 1000.0;
                let ts = ts.floor() / 1000.0;
                format!(r#"{{"ph":"X","name":"step","pid":1,"tid":1,"ts":{ts},"dur":10.1}}"#)
            })
            .collect();
        let (s, _) = summarize_rank(&input(dir.path(), &events.join(",\n"))).unwrap();
        assert!((s.busy_us - 60.6).abs() < 0.01, "busy {}", s.busy_us);
    }

    /// Real nesting still nests: a child inside its parent adds nothing to
    /// busy and comes off the parent's self time.
    #[test]
    fn nested_spans_still_nest() {
        let dir = tempfile::tempdir().unwrap();
        let events = r#"
{"ph":"X","name":"p","pid":1,"tid":1,"ts":100.001,"dur":10.0},
{"ph":"X","name":"k","pid":1,"tid":1,"ts":100.001,"dur":4.0},
{"ph":"X","name":"k","pid":1,"tid":1,"ts":104.001,"dur":6.0}"#;
        let (s, _) = summarize_rank(&input(dir.path(), events)).unwrap();
        assert!((s.busy_us - 10.0).abs() < 1e-9, "busy {}", s.busy_us);
        let p = s.spans.iter().find(|x| x.name == "p").unwrap();
        assert!(p.self_us.abs() < 1e-9, "p self {}", p.self_us);
    }

    /// Each step knows its time in collectives, so a synchronized job (all
    /// steps equally long) still shows which rank computed longest.
    #[test]
    fn steps_know_their_collective_time() {
        let dir = tempfile::tempdir().unwrap();
        let events = r#"
{"ph":"X","name":"ProfilerStep#0","pid":1,"tid":1,"ts":0,"dur":100},
{"ph":"X","name":"mm","pid":1,"tid":1,"ts":0,"dur":70},
{"ph":"X","name":"nccl:all_reduce","pid":1,"tid":1,"ts":70,"dur":30},
{"ph":"X","name":"ProfilerStep#1","pid":1,"tid":1,"ts":100,"dur":100},
{"ph":"X","name":"mm","pid":1,"tid":1,"ts":100,"dur":40},
{"ph":"X","name":"nccl:all_reduce","pid":1,"tid":1,"ts":140,"dur":60}"#;
        let (s, _) = summarize_rank(&input(dir.path(), events)).unwrap();
        let comm: Vec<(f64, f64)> =
            s.steps.iter().map(|st| (st.collective_us, st.outside_collective_us())).collect();
        assert_eq!(comm, [(30.0, 70.0), (60.0, 40.0)]);
    }
}
