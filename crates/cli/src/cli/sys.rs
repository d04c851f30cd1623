//! Process-level platform settings for the command-line tool.

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
