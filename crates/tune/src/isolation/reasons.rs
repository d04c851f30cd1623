//! How a lost worker's failure is worded: the signal's name, sizes in MiB,
//! the line of its standard error that names the cause. One wording for
//! the tuner's workers and Python's (`ranktune._isolate.reasons` calls
//! these through the bindings), so that a reason reads the same, and a
//! blocklist record says the same, whichever side measured.
//!
//! Owns text only: never touches a process.

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

    #[test]
    fn signals_have_their_names() {
        assert_eq!(signal_name(libc::SIGSEGV), "SIGSEGV");
        assert_eq!(signal_name(libc::SIGKILL), "SIGKILL");
        assert_eq!(signal_name(64), "signal 64");
    }
}
