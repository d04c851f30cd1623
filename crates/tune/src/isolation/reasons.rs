//! Why a worker was lost, decided and worded once: [`classify`] (a crash,
//! an exhausted memory, a time-out, a broken protocol, from how the worker
//! ended, its peak memory, whether the supervisor killed it and the tail of
//! its standard error), the signal's name, sizes in MiB, the line of its
//! standard error that names the cause. One rule for the tuner's workers
//! and Python's (`ranktune._isolate` calls these through the bindings), so
//! that a failure is judged the same, and a blocklist record says the same,
//! whichever side measured.
//!
//! Owns the decision on what a supervisor saw and its words: never touches
//! a process.

use crate::failure::FailureKind;

/// How a reaped worker ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exit {
    /// It exited with this status.
    Code(i32),
    /// A signal killed it.
    Signal(i32),
}

impl Exit {
    /// From a `wait` status (what Python's `os.wait4` gives).
    ///
    /// ```
    /// use ranktune_tune::isolation::reasons::Exit;
    /// assert_eq!(Exit::from_wait_status(9), Exit::Signal(9));
    /// assert_eq!(Exit::from_wait_status(3 << 8), Exit::Code(3));
    /// ```
    pub fn from_wait_status(status: i32) -> Exit {
        if libc::WIFSIGNALED(status) {
            Exit::Signal(libc::WTERMSIG(status))
        } else {
            Exit::Code(libc::WEXITSTATUS(status))
        }
    }
}

/// What a supervisor saw of a worker it lost.
#[derive(Clone, Debug)]
pub struct Ending<'a> {
    /// How it ended; `None` when it could not be reaped.
    pub exit: Option<Exit>,
    /// Its peak resident memory (`ru_maxrss`), bytes.
    pub max_rss: u64,
    /// The supervisor killed it, for this failure and reason (a time-out,
    /// a broken protocol); `None` when it ended by itself.
    pub killed_for: Option<(FailureKind, String)>,
    /// Its memory limit, bytes.
    pub memory_limit: Option<u64>,
    /// The tail of its standard error.
    pub stderr: &'a str,
}

/// Why a worker is lost: the failure's kind and reason.
///
/// - A line of its standard error that says an allocation failed
///   ([`memory_line`]) makes it `memory`, whatever killed it;
/// - so does SIGKILL that the supervisor did not send, at 90% of the
///   memory limit or more (the kernel's out-of-memory killer);
/// - killed by the supervisor for a time-out, or not reaped: that kind and
///   reason; killed for anything else but dead of another cause first: that
///   cause, judged as if killed by us;
/// - otherwise a `crash`: the signal, or the exit status; each with the
///   last line of its standard error.
///
/// ```
/// use ranktune_tune::isolation::reasons::{classify, Ending, Exit};
/// use ranktune_tune::FailureKind;
/// let (kind, why) = classify(&Ending { exit: Some(Exit::Signal(11)), max_rss: 0,
///     killed_for: None, memory_limit: None, stderr: "boom\n" });
/// assert_eq!((kind, why.as_str()), (FailureKind::Crash, "crashed: SIGSEGV (signal 11): boom"));
/// ```
pub fn classify(e: &Ending<'_>) -> (FailureKind, String) {
    let Some((kind, why)) = &e.killed_for else { return lost_by(e, false) };
    match e.exit {
        None => (*kind, why.clone()),
        Some(_) if *kind == FailureKind::Timeout => (*kind, why.clone()),
        // Its own death (it died first) says more than the violation.
        Some(exit) if exit != Exit::Signal(libc::SIGKILL) => lost_by(e, true),
        Some(_) => (*kind, with_stderr(why.clone(), e.stderr)),
    }
}

/// Why a reaped worker ended (`killed`: by the supervisor).
fn lost_by(e: &Ending<'_>, killed: bool) -> (FailureKind, String) {
    let limit = e.memory_limit.map(mib).unwrap_or_else(|| "none".to_string());
    if let Some(line) = memory_line(e.stderr) {
        return (FailureKind::Memory, format!("ran out of memory: limit {limit} ({line})"));
    }
    match e.exit {
        Some(Exit::Signal(sig))
            if sig == libc::SIGKILL
                && !killed
                && e.memory_limit.is_some_and(|m| e.max_rss >= m / 10 * 9) =>
        {
            (
                FailureKind::Memory,
                format!(
                    "ran out of memory: limit {limit} (killed by SIGKILL at {} resident)",
                    mib(e.max_rss)
                ),
            )
        }
        Some(Exit::Signal(sig)) => (
            FailureKind::Crash,
            with_stderr(format!("crashed: {} (signal {sig})", signal_name(sig)), e.stderr),
        ),
        Some(Exit::Code(code)) => (
            FailureKind::Crash,
            with_stderr(format!("the worker exited with status {code}"), e.stderr),
        ),
        None => (FailureKind::Crash, with_stderr("the worker was lost".to_string(), e.stderr)),
    }
}

/// `why`, with the last line of the worker's standard error when it has one.
pub fn with_stderr(why: String, stderr: &str) -> String {
    match last_line(stderr) {
        "" => why,
        last => format!("{why}: {last}"),
    }
}

/// The name of a signal: `SIGSEGV`, …, or `signal N`.
pub fn signal_name(sig: i32) -> String {
    let name = match sig {
        libc::SIGHUP => "SIGHUP",
        libc::SIGINT => "SIGINT",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGILL => "SIGILL",
        libc::SIGTRAP => "SIGTRAP",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGKILL => "SIGKILL",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGALRM => "SIGALRM",
        libc::SIGTERM => "SIGTERM",
        libc::SIGXCPU => "SIGXCPU",
        libc::SIGXFSZ => "SIGXFSZ",
        libc::SIGSYS => "SIGSYS",
        _ => return format!("signal {sig}"),
    };
    name.to_string()
}

/// The line of a worker's standard error that says an allocation failed, at
/// most 300 characters: Rust's first `memory allocation of N bytes failed`,
/// else the last line naming C++'s `std::bad_alloc`, Python's `MemoryError`
/// or CUDA's `out of memory`, or C's `Cannot allocate memory`.
///
/// Rust's *first* line is the cause: with `RUST_BACKTRACE` set, the report
/// of a failed allocation goes on to capture a backtrace, whose symbols need
/// memory the limit no longer leaves, and the second failure it prints (a
/// size that depends on the binary's debug info) is not the candidate's.
/// Python's and C++'s reports end with the error, so their last line is.
pub fn memory_line(err: &str) -> Option<&str> {
    let says = |l: &str| {
        let lower = l.to_ascii_lowercase();
        [
            "bad_alloc",
            "memoryerror",
            "out of memory",
            "can't allocate memory",
            "cannot allocate memory",
        ]
        .iter()
        .any(|p| lower.contains(p))
    };
    let rust = err.lines().map(str::trim).find(|l| l.starts_with("memory allocation of"));
    rust.or_else(|| err.lines().rev().map(str::trim).find(|l| says(l))).map(last_line)
}

/// The last non-empty line of `text`, at most 300 characters.
pub fn last_line(text: &str) -> &str {
    let line = text.lines().rev().map(str::trim).find(|l| !l.is_empty()).unwrap_or("");
    match line.char_indices().nth(300) {
        Some((i, _)) => &line[..i],
        None => line,
    }
}

/// Bytes as MiB for messages: `512 MiB`, `1.5 MiB`.
pub fn mib(bytes: u64) -> String {
    let m = bytes as f64 / f64::from(1u32 << 20);
    if m.fract() == 0.0 || m >= 100.0 {
        format!("{m:.0} MiB")
    } else {
        format!("{m:.1} MiB")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_messages_are_recognized() {
        let rust =
            "memory allocation of 1073741824 bytes failed\nstack backtrace:\n  0: x\nnote: y\n";
        assert_eq!(memory_line(rust), Some("memory allocation of 1073741824 bytes failed"));
        // The backtrace of the first failure could not be symbolized either.
        let twice = "memory allocation of 67108864 bytes failed\n\
                     memory allocation of 1308987 bytes failed\n";
        assert_eq!(memory_line(twice), Some("memory allocation of 67108864 bytes failed"));
        assert!(memory_line("terminate called after throwing an instance of 'std::bad_alloc'")
            .is_some());
        assert_eq!(memory_line("Traceback ...\nMemoryError\n"), Some("MemoryError"));
        let errno = "OSError: [Errno 12] Cannot allocate memory";
        assert_eq!(memory_line(errno), Some(errno));
        assert_eq!(memory_line("thread 'main' panicked at src/lib.rs:1:1"), None);
    }

    #[test]
    fn sizes_and_lines_read_well() {
        assert_eq!(mib(512 << 20), "512 MiB");
        assert_eq!(mib(3 << 19), "1.5 MiB");
        assert_eq!(last_line("a\nb\n\n  "), "b");
        assert_eq!(last_line(""), "");
        assert_eq!(last_line(&"x".repeat(400)).len(), 300);
    }

    fn ending(exit: Option<Exit>, killed_for: Option<(FailureKind, &str)>) -> Ending<'static> {
        Ending {
            exit,
            max_rss: 950 << 20,
            killed_for: killed_for.map(|(k, w)| (k, w.to_string())),
            memory_limit: Some(1 << 30),
            stderr: "last words\n",
        }
    }

    #[test]
    fn a_lost_worker_is_classified_by_one_rule() {
        let kill = Some(Exit::Signal(libc::SIGKILL));
        // The kernel's killer near the limit: memory.
        let (k, why) = classify(&ending(kill, None));
        assert_eq!(k, FailureKind::Memory);
        assert_eq!(
            why,
            "ran out of memory: limit 1024 MiB (killed by SIGKILL at 950 MiB resident)"
        );
        // Our own SIGKILL for a time-out: the time-out, as worded.
        let (k, why) = classify(&ending(kill, Some((FailureKind::Timeout, "timed out"))));
        assert_eq!((k, why.as_str()), (FailureKind::Timeout, "timed out"));
        // Killed for a protocol violation: the violation, with its stderr.
        let (k, why) = classify(&ending(kill, Some((FailureKind::Error, "bad line"))));
        assert_eq!((k, why.as_str()), (FailureKind::Error, "bad line: last words"));
        // It died of a segfault before our kill: the segfault says more.
        let segv = Some(Exit::Signal(libc::SIGSEGV));
        let (k, why) = classify(&ending(segv, Some((FailureKind::Error, "bad line"))));
        assert_eq!(
            (k, why.as_str()),
            (FailureKind::Crash, "crashed: SIGSEGV (signal 11): last words")
        );
        let (k, why) = classify(&ending(Some(Exit::Code(3)), None));
        assert_eq!(
            (k, why.as_str()),
            (FailureKind::Crash, "the worker exited with status 3: last words")
        );
        // Not reaped: what the supervisor said.
        let (k, _) = classify(&ending(None, Some((FailureKind::Crash, "gone"))));
        assert_eq!(k, FailureKind::Crash);
        // An allocation error in stderr wins over the signal.
        let mut e = ending(Some(Exit::Signal(libc::SIGABRT)), None);
        e.stderr = "memory allocation of 64 bytes failed\n";
        assert_eq!(classify(&e).0, FailureKind::Memory);
    }

    #[test]
    fn signals_have_their_names() {
        assert_eq!(signal_name(libc::SIGSEGV), "SIGSEGV");
        assert_eq!(signal_name(libc::SIGKILL), "SIGKILL");
        assert_eq!(signal_name(64), "signal 64");
    }
}
