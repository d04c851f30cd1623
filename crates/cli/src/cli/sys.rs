//! Process-level platform settings for the command-line tool: SIGPIPE, and
//! the SIGINT/SIGTERM stop flag of `tune`.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// Lets the OS end the process quietly when its output pipe closes
/// (`ranktune cache show --json | head -1`), as command-line tools do.
///
/// Rust ignores SIGPIPE by default, which turns a closed pipe into a
/// `println!` panic. Files the tool writes (caches, traces) are not pipes,
/// so this never interrupts a save.
pub fn restore_sigpipe() {
    // SAFETY: setting the SIGPIPE disposition to its default at start-up,
    // before any thread exists, has no memory-safety preconditions.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

/// Keeps SIGPIPE ignored for a rank that reports to a launcher: if the
/// launcher dies and its pipes close, the rank's writes fail (and are
/// ignored) instead of killing it before it saves its work.
pub fn ignore_sigpipe() {
    // SAFETY: setting a signal's disposition to "ignore" has no
    // memory-safety preconditions.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_IGN);
    }
}

/// A flag that SIGINT and SIGTERM set to their signal number, replacing
/// their default action (ending the process), so that the command can stop
/// at a safe point, save what it has and exit with status 128+signal.
pub fn stop_on_signals() -> std::io::Result<Arc<AtomicUsize>> {
    let flag = Arc::new(AtomicUsize::new(0));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register_usize(sig, Arc::clone(&flag), sig as usize)?;
    }
    Ok(flag)
}

/// The signal a stop flag holds, if any.
pub fn stop_signal(flag: &AtomicUsize) -> Option<i32> {
    i32::try_from(flag.load(Ordering::SeqCst)).ok().filter(|&s| s != 0)
}

/// The name of SIGINT or SIGTERM (the signals a stop flag holds).
pub fn signal_name(sig: i32) -> &'static str {
    if sig == signal_hook::consts::SIGINT {
        "SIGINT"
    } else {
        "SIGTERM"
    }
}
