//! Isolated measuring in real worker processes: a forked worker gives the
//! same statistics as measuring in-process; candidates that segfault, abort,
//! exit, hang or allocate without bound fail alone with their reason while
//! the tune goes on with a fresh worker; a spawned program speaking the
//! protocol is a worker too.

use crate::tune_support::*;
use ranktune_cache::Section;
use ranktune_tune::isolation::{
    Isolation, Limits, WorkerCommand, DEFAULT_TIMEOUT_FLOOR, DEFAULT_UNREFERENCED_TIMEOUT,
};
use ranktune_tune::*;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Room for a loaded machine to touch the memory limit's pages well
/// within the time limit (the hang costs the time limit once).
fn fork_limits() -> Limits {
    Limits {
        timeout: Some(Duration::from_millis(2500)),
        memory: Some(128 << 20),
        ..Limits::default()
    }
}

fn tuner_with(isolation: Isolation, clock: &Arc<AtomicU64>) -> Tuner {
    let mut opts = TunerOptions::new(Section::Rank(0), identity("1", "cpu"), "d");
    opts.isolation = isolation;
    let t = Tuner::new(opts);
    t.set_timer(Box::new(VirtualTimer { clock: Arc::clone(clock), t0: 0 }));
    t.set_tuning(true);
    t
}

#[test]
fn a_forked_worker_measures_the_same_statistics_as_in_process() {
    let run = |isolation: Isolation| {
        let clock = Arc::new(AtomicU64::new(0));
        let op = two_runners(&clock);
        let t = tuner_with(isolation, &clock);
        let mut out = Vec::new();
        for rows in [1, 16, 256] {
            let c = t.choose_one(&op, &Rows::new(rows, 8));
            out.push((c.runner_index, c.tactic_index));
        }
        let recs = t.records();
        let timings: Vec<_> =
            recs.iter().map(|r| (r.best_us, r.fallback_us, r.fallback_samples)).collect();
        let starts: Vec<u32> = recs.iter().map(|r| r.worker_starts).collect();
        (out, timings, starts, t.stats().total)
    };
    let (choices, timings, starts, stats) = run(Isolation::Off);
    let (iso_choices, iso_timings, iso_starts, iso_stats) = run(Isolation::Fork(fork_limits()));
    assert_eq!(choices, iso_choices);
    assert_eq!(timings, iso_timings, "the virtual clock gives exact timings in both");
    assert_eq!(starts, [0, 0, 0]);
    // One worker per bucket, reused by all its candidates.
    assert_eq!(iso_starts, [1, 1, 1]);
    assert_eq!((stats.worker_starts, iso_stats.worker_starts), (0, 3));
    assert!(iso_stats.worker_start_seconds > 0.0);
}

/// What a crashing test tactic does.
#[derive(Clone, Copy, Debug)]
enum Doom {
    Fine(u64),
    Segfault,
    Abort,
    Exit,
    Hang,
    Alloc,
    Error,
    Panic,
    /// Touches this many MiB, then SIGKILLs itself (as the OOM killer would).
    Oomkill(usize),
}

struct Doomed {
    acts: Vec<Doom>,
    clock: Arc<AtomicU64>,
}

impl Runner<Rows> for Doomed {
    fn name(&self) -> &str {
        "doomed"
    }
    fn fingerprint(&self) -> String {
        fingerprint_of("doomed v1")
    }
    fn tactics(&self) -> Vec<serde_json::Value> {
        self.acts.iter().map(|a| format!("{a:?}").into()).collect()
    }
    fn valid(&self, _t: usize, _s: &[Vec<u64>]) -> bool {
        true
    }
    fn run(&self, t: usize, _io: &mut Rows) -> Result<(), RunError> {
        match self.acts[t] {
            Doom::Fine(ns) => {
                self.clock.fetch_add(ns, Ordering::Relaxed);
            }
            // SAFETY: not safe at all: a write to an unmapped page, on purpose,
            // in a worker process.
            Doom::Segfault => unsafe {
                std::ptr::without_provenance_mut::<u8>(16).write_volatile(1)
            },
            Doom::Abort => std::process::abort(),
            Doom::Exit => std::process::exit(3),
            Doom::Hang => loop {
                std::thread::sleep(Duration::from_secs(1));
            },
            Doom::Alloc => {
                let mut hoard: Vec<Vec<u8>> = Vec::new();
                loop {
                    hoard.push(vec![1u8; 32 << 20]);
                }
            }
            Doom::Error => return Err(RunError("bad tile".into())),
            Doom::Panic => panic!("tile too big"),
            Doom::Oomkill(mib) => {
                let hoard = vec![1u8; mib << 20];
                std::hint::black_box(&hoard);
                // SAFETY: kill on our own pid.
                unsafe { libc::kill(libc::getpid(), libc::SIGKILL) };
            }
        }
        Ok(())
    }
}

fn doomed_op(acts: Vec<Doom>, clock: &Arc<AtomicU64>) -> Op<Rows> {
    let r: Box<dyn Runner<Rows>> = Box::new(Doomed { acts, clock: Arc::clone(clock) });
    Op::new("doomed", vec![r], rows_config(1)).unwrap()
}

#[test]
fn every_kind_of_death_fails_its_candidate_alone_and_the_tune_goes_on() {
    use Doom::*;
    let acts =
        vec![Fine(5000), Segfault, Abort, Exit, Hang, Alloc, Error, Panic, Fine(3000), Fine(9000)];
    let clock = Arc::new(AtomicU64::new(0));
    let op = doomed_op(acts, &clock);
    let t = tuner_with(Isolation::Fork(fork_limits()), &clock);
    let started = Instant::now();
    let c = t.choose_one(&op, &Rows::new(1, 8));
    assert_eq!(
        (c.source, c.tactic_index),
        (ChoiceSource::Tuned, 8),
        "the fastest healthy tactic wins"
    );
    let rec = t.records().pop().unwrap();
    let reason = |i: usize| {
        rec.failures
            .iter()
            .find(|f| {
                f.1 == format!(
                    "{:?}",
                    [Fine(5000), Segfault, Abort, Exit, Hang, Alloc, Error, Panic][i]
                )
            })
            .map(|f| f.2.clone())
            .unwrap_or_default()
    };
    assert_eq!(reason(1), "crashed: SIGSEGV (signal 11)");
    assert!(reason(2).starts_with("crashed: SIGABRT (signal 6)"), "{}", reason(2));
    assert_eq!(reason(3), "the worker exited with status 3");
    assert!(reason(4).starts_with("timed out after 2.5 s (limit 2.5 s)"), "{}", reason(4));
    assert!(
        reason(5).starts_with("ran out of memory: limit 128 MiB (memory allocation of"),
        "{}",
        reason(5)
    );
    assert_eq!(reason(6), "bad tile");
    assert_eq!(reason(7), "panicked: tile too big");
    let kinds: Vec<(usize, FailureKind)> =
        rec.hard_failures.iter().map(|f| (f.position, f.kind)).collect();
    assert_eq!(
        kinds,
        [
            (1, FailureKind::Crash),
            (2, FailureKind::Crash),
            (3, FailureKind::Crash),
            (4, FailureKind::Timeout),
            (5, FailureKind::Memory)
        ]
    );
    // The first worker, and a fresh one after each of the five lost ones;
    // the error and the panic leave their worker healthy.
    assert_eq!(rec.worker_starts, 6);
    assert_eq!(t.stats().total.failed_tactics, 7);
    assert!(started.elapsed() < Duration::from_secs(30), "{:?}", started.elapsed());
}

#[test]
fn without_a_time_limit_the_fallbacks_time_sets_it() {
    let l = Limits::default();
    assert_eq!(l.timeout_for(None), DEFAULT_UNREFERENCED_TIMEOUT);
    assert_eq!(l.timeout_for(Some(10.0)), DEFAULT_TIMEOUT_FLOOR, "the floor");
    assert_eq!(l.timeout_for(Some(1e6)), Duration::from_secs(50), "50 × 1 s");
    let fixed = Limits { timeout: Some(Duration::from_secs(2)), ..Limits::default() };
    assert_eq!(fixed.timeout_for(Some(1e9)), Duration::from_secs(2));
}

/// A worker program in POSIX shell: candidate 0 takes 50 µs a run, 1 kills
/// itself with SIGSEGV, 2 answers an error; it checks the init it gets.
const SHELL_WORKER: &str = r#"
read -r init
case "$init" in
  *'"op":"doomed"'*'"spec":{"who":"shell"}'*) ;;
  *) echo "unexpected init: $init" >&2; exit 9 ;;
esac
echo '{"ready":{"pid":'$$'}}'
while read -r line; do
  case "$line" in
    *'"run":0,'*) reps=${line##*\"reps\":}; reps=${reps%\}}; echo '{"us":'$((50 * reps))'}' ;;
    *'"run":1,'*) echo "about to crash" >&2; kill -SEGV $$ ;;
    *) echo '{"error":"no such tactic here","kind":"error"}' ;;
  esac
done
"#;

#[test]
fn a_spawned_program_speaking_the_protocol_is_a_worker() {
    use Doom::*;
    let clock = Arc::new(AtomicU64::new(0));
    let op = doomed_op(vec![Fine(1), Segfault, Error], &clock);
    let cmd = WorkerCommand {
        program: "sh".into(),
        args: vec!["-c".into(), SHELL_WORKER.into()],
        env: Vec::new(),
        spec: serde_json::json!({"who": "shell"}),
        limits: fork_limits(),
    };
    let t = tuner_with(Isolation::Spawn(cmd), &clock);
    let c = t.choose_one(&op, &Rows::new(1, 8));
    assert_eq!((c.source, c.tactic_index), (ChoiceSource::Tuned, 0));
    let rec = t.records().pop().unwrap();
    assert_eq!(rec.best_us, Some(50.0), "the worker's own timing, per run");
    let msgs: Vec<&str> = rec.failures.iter().map(|f| f.2.as_str()).collect();
    assert_eq!(msgs, ["crashed: SIGSEGV (signal 11): about to crash", "no such tactic here"]);
    assert_eq!(rec.worker_starts, 2);
}

#[test]
fn a_worker_program_that_cannot_start_fails_the_bucket_once_not_the_tune() {
    use Doom::*;
    let clock = Arc::new(AtomicU64::new(0));
    let op = doomed_op(vec![Fine(1), Fine(2)], &clock);
    let cmd = WorkerCommand {
        program: "/nonexistent/ranktune-worker".into(),
        args: Vec::new(),
        env: Vec::new(),
        spec: serde_json::Value::Null,
        limits: fork_limits(),
    };
    let t = tuner_with(Isolation::Spawn(cmd), &clock);
    let c = t.choose_one(&op, &Rows::new(1, 8));
    assert_eq!(c.source, ChoiceSource::Fallback);
    let rec = t.records().pop().unwrap();
    assert_eq!(rec.failures.len(), 2);
    assert!(
        rec.failures[0]
            .2
            .starts_with("the isolated worker could not start: /nonexistent/ranktune-worker:"),
        "{:?}",
        rec.failures
    );
    assert!(rec.hard_failures.is_empty(), "not the tactics' fault");
}

#[test]
fn a_sigkill_near_the_memory_limit_is_memory_and_far_from_it_a_crash() {
    use Doom::*;
    let clock = Arc::new(AtomicU64::new(0));
    let op = doomed_op(vec![Fine(1), Oomkill(240), Oomkill(1)], &clock);
    let limits = Limits { memory: Some(256 << 20), ..fork_limits() };
    let t = tuner_with(Isolation::Fork(limits), &clock);
    t.choose_one(&op, &Rows::new(1, 8));
    let rec = t.records().pop().unwrap();
    let kinds: Vec<(usize, FailureKind)> =
        rec.hard_failures.iter().map(|f| (f.position, f.kind)).collect();
    assert_eq!(kinds, [(1, FailureKind::Memory), (2, FailureKind::Crash)], "{rec:#?}");
    assert!(
        rec.hard_failures[0]
            .message
            .starts_with("ran out of memory: limit 256 MiB (killed by SIGKILL at "),
        "{rec:#?}"
    );
    assert_eq!(rec.hard_failures[1].message, "crashed: SIGKILL (signal 9)");
}

#[test]
fn one_op_can_be_isolated_while_the_tuner_measures_in_process() {
    use Doom::*;
    let clock = Arc::new(AtomicU64::new(0));
    let plain = doomed_op(vec![Fine(1), Fine(2)], &clock);
    let r: Box<dyn Runner<Rows>> =
        Box::new(Doomed { acts: vec![Fine(1), Segfault], clock: Arc::clone(&clock) });
    let config = rows_config(1).with_isolation(Isolation::Fork(fork_limits()));
    let risky = Op::new("risky", vec![r], config).unwrap();
    let t = tuner_with(Isolation::Off, &clock);
    t.choose_one(&plain, &Rows::new(1, 8));
    t.choose_one(&risky, &Rows::new(1, 8));
    let recs = t.records();
    assert_eq!((recs[0].worker_starts, recs[1].worker_starts), (0, 2));
    assert_eq!(recs[1].failures[0].2, "crashed: SIGSEGV (signal 11)");
}
