//! ranktune-launch, the local rank launcher: starts N rank processes of one
//! job on this machine, follows their progress, and collects each rank's
//! result or names the ranks that failed. `ranktune tune --ranks N` is built
//! on it; any other program that speaks the protocol can be launched too.
//! It is process supervision only: it knows nothing of tuning, caches or
//! traces.
//!
//! What the launcher does, for each rank `r` of `0..N`:
//!
//! - starts the caller's program with the caller's arguments and variables,
//!   with stdin from `/dev/null`, and with the rank set for it:
//!   `RANKTUNE_RANK=r`, `RANKTUNE_WORLD_SIZE=N`, `RANKTUNE_LOCAL_RANK=r` and
//!   one `RANKTUNE_JOB_ID` shared by the N ranks and fresh for each launch,
//!   and one trace clock base `RANKTUNE_TRACE_BASE_NS` (the launch time, so
//!   every rank's trace file has the same `baseTimeNanoseconds`); these win
//!   over the caller's. The variables of other launchers that
//!   would name another rank ([`LAUNCHER_VARS`]: `RANK`, `OMPI_COMM_WORLD_RANK`,
//!   `SLURM_PROCID`, …) are removed, so a job started from inside an mpirun or
//!   srun allocation still gets ranks `0..N`;
//! - reads the rank's stderr line by line while it runs: progress lines go
//!   to the [`LaunchObserver`] as the job's progress, every other line goes
//!   to it as text of that rank, and the last [`STDERR_TAIL_LINES`] text
//!   lines are kept for a failure message;
//! - reads the rank's stdout to the end, then its result document from it.
//!
//! Then it waits for every rank: it never stops the other ranks when one
//! dies (ranks that wait for a dead one give up on their own timeouts), and
//! it never fails because of what a rank wrote. A rank *fails* when it exits
//! unsuccessfully (an exit status or a signal: a dead child) or exits
//! successfully without a readable result document; the error
//! ([`LaunchError::RanksFailed`]) names every failed rank in rank order,
//! with its exit status and the tail of its stderr. Only when every rank
//! succeeded are the results returned, in rank order.
//!
//! Stopping a job ([`Launcher::stop_on`]): when the caller's stop flag is
//! set (by its SIGINT/SIGTERM handler, holding the signal's number), the
//! launcher forwards that signal to every rank and keeps reading and waiting
//! for them, at most the grace period ([`Launcher::stop_grace`], default
//! [`DEFAULT_STOP_GRACE`]); ranks still running then are killed. The launch
//! then fails with [`LaunchError::Interrupted`], naming the ranks that did
//! not stop cleanly (a rank stops cleanly when it exits with status
//! 128+signal, by the signal, or successfully). On Linux every rank also
//! gets SIGTERM from the kernel when the launcher's thread dies
//! (`PR_SET_PDEATHSIG`), so a launcher killed outright (SIGKILL) still lets
//! its ranks stop the same way. Call [`Launcher::run`] from a thread that
//! lives as long as the launch (the main thread): the kernel's signal is
//! tied to the thread that started the ranks.
//!
//! Non-UTF-8 output is read lossily; a line is never a reason to stop
//! reading a rank's output, so a chatty rank can never block on a full pipe.
//!
//! The protocol a rank speaks (progress lines on stderr, one result document
//! on stdout; how bad lines and cut-short documents read) is in the
//! `protocol` module ([`ProgressWriter`], [`write_result`], [`read_result`]);
//! `streams` reads one rank; `error` words the failures ([`LaunchError`]).
//!
//! Fault injection, for tests only: built with this crate's
//! `fault-injection` feature, a child's [`ProgressWriter`] aborts the rank
//! named by `RANKTUNE_TEST_DIE_AT=<rank>:<n>` before its step `<n>` (see
//! `fault`); without the feature that variable is never read.
//!
//! This crate starts processes and reads their output; it never prints,
//! never interprets a result document (the caller's type does), and the
//! launcher side never reads this process's environment (the ranks inherit
//! it).

mod error;
#[cfg(feature = "fault-injection")]
mod fault;
mod protocol;
mod streams;
mod sys;

pub use error::{describe_status, LaunchError, RankFailure, RankFailureKind};
pub use protocol::{
    parse_stderr_line, progress_line, read_result, write_result, ProgressWriter, ResultError,
    StderrLine, PROGRESS_PREFIX,
};
/// Variables of other launchers that a rank must not inherit (its rank comes
/// from the `RANKTUNE_*` variables the launcher sets): the rank detection's
/// own table, so every launcher detection reads is one the ranks are
/// shielded from.
pub use ranktune_core::rank::LAUNCHER_VARS;
pub use streams::STDERR_TAIL_LINES;

use ranktune_core::job::JobId;
use serde::de::DeserializeOwned;
use std::ffi::{OsStr, OsString};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};
use streams::{Event, Rank};

/// How long a stopped launch waits for its ranks to save and exit before it
/// kills them ([`Launcher::stop_grace`]).
pub const DEFAULT_STOP_GRACE: Duration = Duration::from_secs(30);

/// How often the launcher looks at its stop flag while no line arrives.
const STOP_POLL: Duration = Duration::from_millis(20);

/// What the launcher tells its caller while the ranks run. Every method has
/// an empty default; all calls come from the thread that called
/// [`Launcher::run`], in the order the lines arrived.
pub trait LaunchObserver {
    /// A rank wrote a progress line.
    fn progress(&mut self, _progress: JobProgress) {}
    /// A rank wrote a stderr line that is not progress (a log line, a
    /// warning, its error), without its line ending.
    fn line(&mut self, _rank: u32, _line: &str) {}
    /// Every rank has closed its stderr (usually: every rank has exited);
    /// the launcher now waits for the processes and reads their results.
    fn finished(&mut self) {}
}

/// Observes nothing.
impl LaunchObserver for () {}

/// The job's progress after a progress line of one rank.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct JobProgress {
    /// The rank that wrote the line.
    pub rank: u32,
    /// Its steps done.
    pub rank_done: u64,
    /// Its steps in all.
    pub rank_total: u64,
    /// Steps done, summed over the ranks.
    pub done: u64,
    /// Steps in all, summed over the ranks that have said their total.
    pub total: u64,
}

/// Starts the ranks of one local job, follows them, and collects their
/// results.
///
/// Every rank runs the same program with the same arguments and variables;
/// the launcher adds its place in the job, `RANKTUNE_RANK`,
/// `RANKTUNE_WORLD_SIZE`, `RANKTUNE_LOCAL_RANK`, a `RANKTUNE_JOB_ID`
/// fresh for each [`run`](Launcher::run) and that run's start time as the
/// trace clock base ([`ranktune_core::job::TRACE_BASE_VAR`]), removes other launchers' rank
/// variables ([`LAUNCHER_VARS`]), and gives it no stdin.
///
/// A rank speaks this protocol:
/// - on stderr, progress lines (written by a [`ProgressWriter`], starting
///   with [`PROGRESS_PREFIX`]) and any other text, which the
///   [`LaunchObserver`] gets with the rank;
/// - on stdout, when done, one result document on one line
///   ([`write_result`]); the launcher reads the last stdout line that starts
///   with `{` ([`read_result`]).
///
/// `run` waits for every rank and never stops the others when one dies. It
/// fails with [`LaunchError::RanksFailed`], naming each rank that exited
/// unsuccessfully (with its exit status and the last [`STDERR_TAIL_LINES`]
/// lines of its stderr) or printed no readable result.
///
/// ```
/// # #[cfg(unix)] {
/// use ranktune_launch::Launcher;
/// let rank = r#"echo "{\"rank\": $RANKTUNE_RANK, \"of\": $RANKTUNE_WORLD_SIZE}""#;
/// let results: Vec<serde_json::Value> =
///     Launcher::new("sh").args(["-c", rank]).run(3, &mut ()).unwrap();
/// assert_eq!(results[2], serde_json::json!({"rank": 2, "of": 3}));
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct Launcher {
    program: OsString,
    args: Vec<OsString>,
    envs: Vec<(OsString, OsString)>,
    stop: Option<Arc<AtomicUsize>>,
    grace: Duration,
}

impl Launcher {
    /// A launcher of `program` (a path, or a name looked up in `PATH`).
    pub fn new(program: impl AsRef<OsStr>) -> Self {
        Launcher {
            program: program.as_ref().to_owned(),
            args: Vec::new(),
            envs: Vec::new(),
            stop: None,
            grace: DEFAULT_STOP_GRACE,
        }
    }

    /// Stops the job when `flag` becomes non-zero: the value is a signal
    /// number (what `signal_hook::flag::register_usize(sig, flag, sig)`
    /// stores), which the launcher forwards to every rank; it then waits for
    /// them at most [`stop_grace`](Launcher::stop_grace) and fails with
    /// [`LaunchError::Interrupted`].
    pub fn stop_on(mut self, flag: Arc<AtomicUsize>) -> Self {
        self.stop = Some(flag);
        self
    }

    /// How long a stopped launch waits for its ranks before killing them
    /// (default [`DEFAULT_STOP_GRACE`]).
    pub fn stop_grace(mut self, grace: Duration) -> Self {
        self.grace = grace;
        self
    }

    /// Adds one argument.
    pub fn arg(mut self, arg: impl AsRef<OsStr>) -> Self {
        self.args.push(arg.as_ref().to_owned());
        self
    }

    /// Adds arguments.
    pub fn args<I: IntoIterator<Item = S>, S: AsRef<OsStr>>(mut self, args: I) -> Self {
        self.args.extend(args.into_iter().map(|a| a.as_ref().to_owned()));
        self
    }

    /// Sets a variable for every rank (the launcher's own rank variables win).
    pub fn env(mut self, key: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> Self {
        self.envs.push((key.as_ref().to_owned(), value.as_ref().to_owned()));
        self
    }

    /// The command for one rank.
    fn command(&self, rank: u32, world_size: u32, job: &JobId, base_ns: u128) -> Command {
        let mut cmd = Command::new(&self.program);
        cmd.args(&self.args);
        for v in LAUNCHER_VARS {
            cmd.env_remove(v);
        }
        cmd.envs(self.envs.iter().map(|(k, v)| (k, v)));
        cmd.env("RANKTUNE_RANK", rank.to_string())
            .env("RANKTUNE_WORLD_SIZE", world_size.to_string())
            .env("RANKTUNE_LOCAL_RANK", rank.to_string())
            .env("RANKTUNE_JOB_ID", &job.value)
            .env(ranktune_core::job::TRACE_BASE_VAR, base_ns.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        sys::term_with_parent(&mut cmd);
        cmd
    }

    /// The signal the stop flag holds (0: none).
    fn stop_signal(&self) -> i32 {
        self.stop.as_ref().map_or(0, |f| i32::try_from(f.load(Ordering::SeqCst)).unwrap_or(0))
    }

    /// Starts `world_size` ranks, reports their progress and lines to
    /// `observer`, waits for all of them, and returns their result documents
    /// in rank order.
    pub fn run<T: DeserializeOwned>(
        &self,
        world_size: u32,
        observer: &mut dyn LaunchObserver,
    ) -> Result<Vec<T>, LaunchError> {
        if world_size == 0 {
            return Err(LaunchError::NoRanks);
        }
        let job = JobId::fresh();
        // Before any rank starts, so every rank's own clock starts after it.
        let base_ns = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let (tx, rx) = mpsc::channel::<Event>();
        let mut ranks: Vec<Rank> = Vec::new();
        for rank in 0..world_size {
            match self.command(rank, world_size, &job, base_ns).spawn() {
                Ok(proc) => ranks.push(Rank::follow(rank, proc, tx.clone())),
                Err(source) => {
                    ranks.into_iter().for_each(Rank::stop);
                    return Err(LaunchError::Spawn { rank, program: self.program.clone(), source });
                }
            }
        }
        drop(tx);

        let mut done = vec![0u64; world_size as usize];
        let mut totals = vec![0u64; world_size as usize];
        // Set once the stop signal has been forwarded: the signal and when
        // the ranks still running are killed.
        let mut stopping: Option<(i32, Instant)> = None;
        let mut killed = false;
        loop {
            let ev = match rx.recv_timeout(STOP_POLL) {
                Ok(ev) => Some(ev),
                Err(mpsc::RecvTimeoutError::Timeout) => None,
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
            };
            match stopping {
                None => {
                    let sig = self.stop_signal();
                    if sig != 0 {
                        ranks.iter().for_each(|r| r.signal(sig));
                        stopping = Some((sig, Instant::now() + self.grace));
                    }
                }
                Some((_, deadline)) if !killed && Instant::now() >= deadline => {
                    ranks.iter_mut().for_each(Rank::kill);
                    killed = true;
                }
                Some(_) => {}
            }
            let Some(ev) = ev else { continue };
            match ev {
                Event::Progress { rank, done: d, total } => {
                    if let (Some(dd), Some(tt)) =
                        (done.get_mut(rank as usize), totals.get_mut(rank as usize))
                    {
                        *dd = d;
                        *tt = total;
                    }
                    observer.progress(JobProgress {
                        rank,
                        rank_done: d,
                        rank_total: total,
                        done: done.iter().sum(),
                        total: totals.iter().sum(),
                    });
                }
                Event::Line { rank, line } => observer.line(rank, &line),
            }
        }
        observer.finished();
        if stopping.is_none() {
            // The stop came as the last stderr closed.
            let sig = self.stop_signal();
            if sig != 0 {
                ranks.iter().for_each(|r| r.signal(sig));
                stopping = Some((sig, Instant::now() + self.grace));
            }
        }
        if let Some((_, deadline)) = stopping.filter(|_| !killed) {
            // Every rank closed its stderr; one may still be running (it
            // closed it early): the grace period bounds this wait too.
            while Instant::now() < deadline && !ranks.iter_mut().all(Rank::has_exited) {
                std::thread::sleep(STOP_POLL);
            }
            ranks.iter_mut().for_each(Rank::kill);
        }

        let mut results = Vec::new();
        let mut failures = Vec::new();
        for r in ranks {
            let rank = r.rank();
            let ended = r.wait().map_err(|source| LaunchError::Wait { rank, source })?;
            if let Some((sig, _)) = stopping {
                if !stopped_cleanly(&ended.status, sig) {
                    let kind = RankFailureKind::Exited {
                        status: ended.status,
                        stderr_tail: ended.stderr_tail,
                    };
                    failures.push(RankFailure { rank, kind });
                }
                continue;
            }
            let kind = if !ended.status.success() {
                RankFailureKind::Exited { status: ended.status, stderr_tail: ended.stderr_tail }
            } else {
                match read_result(&ended.stdout) {
                    Ok(doc) => {
                        results.push(doc);
                        continue;
                    }
                    Err(e) => RankFailureKind::NoResult(e),
                }
            };
            failures.push(RankFailure { rank, kind });
        }
        if let Some((signal, _)) = stopping {
            return Err(LaunchError::Interrupted { signal, world_size, unclean: failures });
        }
        if !failures.is_empty() {
            return Err(LaunchError::RanksFailed { world_size, failures });
        }
        Ok(results)
    }
}

/// Whether a rank sent `sig` ended as a stopped rank should: with status
/// 128+`sig`, by the signal itself, or successfully (it had finished).
fn stopped_cleanly(status: &ExitStatus, sig: i32) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if status.signal() == Some(sig) {
            return true;
        }
    }
    status.success() || status.code() == Some(128 + sig)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ranktune_core::rank::{RankInfo, RankOverrides};

    /// A tiny rank written in sh: its rank variables, a progress line, a
    /// result document.
    #[cfg(unix)]
    const SH_RANK: &str = r#"
        echo "ranktune-progress 0 1" >&2
        echo "hello from $RANKTUNE_RANK of $RANKTUNE_WORLD_SIZE ${RANK:-unset}" >&2
        echo "ranktune-progress 1 1" >&2
        if [ "$RANKTUNE_RANK" = "$FAIL_RANK" ]; then echo "dying" >&2; exit 7; fi
        if [ "$RANKTUNE_RANK" = "$SILENT_RANK" ]; then echo '{"rank":'; exit 0; fi
        echo "{\"rank\":$RANKTUNE_RANK,\"local\":$RANKTUNE_LOCAL_RANK,\"job\":\"$RANKTUNE_JOB_ID\",\"base\":\"$RANKTUNE_TRACE_BASE_NS\"}"
    "#;

    #[derive(Default)]
    struct Seen {
        lines: Vec<(u32, String)>,
        last: JobProgress,
        finished: bool,
    }

    impl LaunchObserver for Seen {
        fn progress(&mut self, p: JobProgress) {
            self.last = p;
        }
        fn line(&mut self, rank: u32, line: &str) {
            self.lines.push((rank, line.to_string()));
        }
        fn finished(&mut self) {
            self.finished = true;
        }
    }

    #[cfg(unix)]
    #[test]
    fn runs_every_rank_with_its_variables_and_collects_results_in_order() {
        let mut seen = Seen::default();
        let docs: Vec<serde_json::Value> = Launcher::new("sh")
            .args(["-c", SH_RANK])
            .env("RANKTUNE_RANK", "99")
            .env("RANKTUNE_TRACE_BASE_NS", "5")
            .run(3, &mut seen)
            .unwrap();
        assert_eq!(docs.len(), 3);
        for (r, d) in docs.iter().enumerate() {
            assert_eq!((d["rank"].as_u64(), d["local"].as_u64()), (Some(r as u64), Some(r as u64)));
            assert_eq!(d["job"], docs[0]["job"]);
            assert_eq!(d["base"], docs[0]["base"], "one trace clock base for all ranks");
        }
        let base: u128 = docs[0]["base"].as_str().unwrap().parse().unwrap();
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap();
        assert!(base > 5 && base <= now.as_nanos(), "the launch time, not the caller's: {base}");
        assert!(docs[0]["job"].as_str().unwrap().starts_with("ranktune-"));
        let mut lines = seen.lines.clone();
        lines.sort();
        assert_eq!(
            lines,
            (0..3).map(|r| (r, format!("hello from {r} of 3 unset"))).collect::<Vec<_>>()
        );
        assert_eq!((seen.last.done, seen.last.total), (3, 3));
        assert!(seen.finished);
    }

    #[cfg(unix)]
    #[test]
    fn names_dead_and_silent_ranks_and_waits_for_all() {
        let err = Launcher::new("sh")
            .args(["-c", SH_RANK])
            .env("FAIL_RANK", "1")
            .env("SILENT_RANK", "2")
            .run::<serde_json::Value>(4, &mut ())
            .unwrap_err();
        let LaunchError::RanksFailed { world_size: 4, failures } = &err else {
            panic!("{err}");
        };
        assert_eq!(failures.iter().map(|f| f.rank).collect::<Vec<_>>(), [1, 2]);
        assert!(matches!(&failures[1].kind, RankFailureKind::NoResult(ResultError::Invalid(_))));
        let msg = err.to_string();
        assert!(msg.starts_with("2 of 4 ranks failed:\n"), "{msg}");
        assert!(
            msg.contains(
                "rank 1 failed (exit status 7); last lines of its stderr:\n    \
                 hello from 1 of 4 unset\n    dying"
            ),
            "{msg}"
        );
    }

    /// Sets the stop flag to SIGTERM once every rank has reported.
    struct StopWhenAllStarted(Arc<AtomicUsize>, u64);

    impl LaunchObserver for StopWhenAllStarted {
        fn progress(&mut self, p: JobProgress) {
            if p.total == self.1 {
                self.0.store(15, Ordering::SeqCst);
            }
        }
    }

    #[cfg(unix)]
    #[test]
    fn a_stop_forwards_the_signal_waits_and_kills_only_after_the_grace() {
        // Rank 0 stops cleanly on SIGTERM (exit 143); rank 1 ignores it and
        // is killed when the grace period ends. Rank 0 idles in `wait`, which
        // a trapped signal interrupts at once (a shell runs a trap only after
        // its foreground command ends); its `sleep` holds no pipe of the
        // launcher's and is stopped by the trap. The grace covers rank 0's
        // shell being scheduled late on a loaded machine; rank 1 always takes
        // all of it.
        let rank = r#"
            if [ "$RANKTUNE_RANK" = 1 ]; then
                trap '' TERM
                echo "ranktune-progress 0 1" >&2
                while :; do sleep 0.02; done
            fi
            trap 'kill $pause 2>/dev/null; echo saved >&2; exit 143' TERM
            echo "ranktune-progress 0 1" >&2
            while :; do sleep 5 </dev/null >/dev/null 2>&1 & pause=$!; wait $pause; done
        "#;
        let flag = Arc::new(AtomicUsize::new(0));
        let started = Instant::now();
        let err = Launcher::new("sh")
            .args(["-c", rank])
            .stop_on(Arc::clone(&flag))
            .stop_grace(Duration::from_secs(3))
            .run::<serde_json::Value>(2, &mut StopWhenAllStarted(Arc::clone(&flag), 2))
            .unwrap_err();
        assert!(started.elapsed() < Duration::from_secs(20), "{:?}", started.elapsed());
        let LaunchError::Interrupted { signal: 15, world_size: 2, unclean } = &err else {
            panic!("{err}");
        };
        assert_eq!(unclean.iter().map(|f| f.rank).collect::<Vec<_>>(), [1], "{err}");
        assert_eq!(err.interrupted_by(), Some(15));
        assert!(err.to_string().starts_with("stopped by signal 15; 1 ranks did not"), "{err}");
    }

    #[cfg(unix)]
    #[test]
    fn a_stopped_rank_that_closed_its_stderr_is_still_bounded_by_the_grace() {
        // It ignores SIGTERM before it says a line (which sets the flag),
        // then closes its stderr.
        struct StopOnLine(Arc<AtomicUsize>);
        impl LaunchObserver for StopOnLine {
            fn line(&mut self, _rank: u32, _line: &str) {
                self.0.store(15, Ordering::SeqCst);
            }
        }
        let rank = "trap '' TERM; echo ready >&2; exec 2>&-; while :; do sleep 0.02; done";
        let flag = Arc::new(AtomicUsize::new(0));
        let started = Instant::now();
        let err = Launcher::new("sh")
            .args(["-c", rank])
            .stop_on(Arc::clone(&flag))
            .stop_grace(Duration::from_millis(300))
            .run::<serde_json::Value>(1, &mut StopOnLine(flag))
            .unwrap_err();
        assert!(started.elapsed() < Duration::from_secs(20), "{:?}", started.elapsed());
        let LaunchError::Interrupted { signal: 15, unclean, .. } = &err else { panic!("{err}") };
        assert_eq!(unclean.len(), 1, "{err}");
    }

    #[test]
    fn a_rank_reads_its_place_whatever_other_launchers_left_in_the_environment() {
        // A rank's environment: what its command sets or removes, and for
        // every other variable a value no detection accepts (as if each
        // launcher rank detection knows had set its variables wrongly).
        let cmd = Launcher::new("rank").command(2, 3, &JobId::fresh(), 0);
        let changed: std::collections::HashMap<String, Option<String>> = cmd
            .get_envs()
            .map(|(k, v)| {
                let text = |s: &OsStr| s.to_string_lossy().into_owned();
                (text(k), v.map(text))
            })
            .collect();
        let env = |name: &str| changed.get(name).cloned().unwrap_or(Some("x".to_string()));
        let info = RankInfo::detect_with(&RankOverrides::default(), env).unwrap();
        assert_eq!((info.rank, info.world_size, info.local_rank), (2, 3, 2));
        assert_eq!(LAUNCHER_VARS, ranktune_core::rank::LAUNCHER_VARS);
        for v in LAUNCHER_VARS {
            assert_eq!(changed.get(v), Some(&None), "{v} is removed");
        }
    }

    #[test]
    fn a_program_that_cannot_start_is_named_with_its_rank() {
        let err = Launcher::new("/nonexistent/ranktune-launch-test")
            .run::<serde_json::Value>(2, &mut ())
            .unwrap_err();
        assert!(matches!(err, LaunchError::Spawn { rank: 0, .. }), "{err:?}");
        assert_eq!(err.to_string(), "starting rank 0 (/nonexistent/ranktune-launch-test)");
        assert!(matches!(Launcher::new("sh").run::<()>(0, &mut ()), Err(LaunchError::NoRanks)));
    }
}
