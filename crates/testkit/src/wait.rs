//! Waiting for child processes with a bound, and ending them: a hung child
//! fails its test instead of blocking the suite, and no child outlives a
//! test that gave up on it.
//!
//! Owns: the bounded wait (woken by the child's exit, not by polling), kills
//! with SIGKILL, other signals, and bounded waits for work on a thread.
//! Never: reaps a process it was not handed as a `Child`, or sleeps to give
//! a child time.

use std::io;
use std::process::{Child, ExitStatus};
use std::sync::mpsc;
use std::time::Duration;

/// Waits for `child` to exit, at most `limit`. `None`: it was still running
/// then, and has been killed (SIGKILL) and reaped, so it outlives nothing.
///
/// The wait is woken by the exit itself (a helper thread waits for the
/// process without reaping it), so a quick child costs no polling delay.
///
/// # Panics
/// When the OS refuses to report on the child: a fault of the harness.
pub fn wait_within(child: &mut Child, limit: Duration) -> Option<ExitStatus> {
    if let Some(status) = child.try_wait().unwrap_or_else(|e| panic!("polling a child: {e}")) {
        return Some(status);
    }
    let (tx, rx) = mpsc::channel();
    let pid = child.id();
    let watcher = std::thread::spawn(move || {
        exited(pid);
        let _ = tx.send(());
    });
    let in_time = rx.recv_timeout(limit).is_ok();
    if !in_time {
        let _ = child.kill();
    }
    let status = child.wait().unwrap_or_else(|e| panic!("reaping a child: {e}"));
    let _ = watcher.join();
    in_time.then_some(status)
}

/// Blocks until process `pid` (a child of this process) has ended, without
/// reaping it: its `Child` owner reaps it, so the pid cannot be reused while
/// the owner may still signal it.
fn exited(pid: u32) {
    let id = pid as libc::id_t;
    loop {
        // SAFETY: an all-zero siginfo_t is a valid value of this plain C struct.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: `info` is valid and writable for the call; WNOWAIT leaves
        // the process unreaped, so no other owner's handle is invalidated.
        let rc = unsafe { libc::waitid(libc::P_PID, id, &mut info, libc::WEXITED | libc::WNOWAIT) };
        if rc == 0 || io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
            return;
        }
    }
}

/// Kills `child` with SIGKILL (`Child::kill` on Unix) and reaps it.
///
/// # Errors
/// What the OS says when the signal or the reaping fails (e.g. the child
/// was already reaped).
pub fn kill(child: &mut Child) -> io::Result<ExitStatus> {
    child.kill()?;
    child.wait()
}

/// Sends signal `sig` (e.g. `libc::SIGTERM`) to `child`, which must not have
/// been reaped yet.
///
/// # Errors
/// What the OS says when the signal cannot be sent.
pub fn signal(child: &Child, sig: libc::c_int) -> io::Result<()> {
    let pid = libc::pid_t::try_from(child.id())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "pid out of range"))?;
    // SAFETY: kill has no memory-safety preconditions; the pid is our own
    // unreaped child, so it names no other process.
    if unsafe { libc::kill(pid, sig) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// A child that is killed (SIGKILL) and reaped when this guard drops, so a
/// test that fails early never leaves it running.
pub struct KillOnDrop(pub Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = kill(&mut self.0);
    }
}

/// Runs `f` on a thread and returns what it returns, failing the test
/// (instead of hanging) if it has not finished within `limit`.
///
/// # Panics
/// After `limit`, with "`what` did not finish within …"; and when `f`
/// panics (its thread's panic is reported as not finishing).
pub fn within<T: Send + 'static>(
    limit: Duration,
    what: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(limit).unwrap_or_else(|_| panic!("{what} did not finish within {limit:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::{Command, Stdio};
    use std::time::Instant;

    fn sh(script: &str) -> Child {
        Command::new("sh").args(["-c", script]).stdin(Stdio::null()).spawn().unwrap()
    }

    #[test]
    fn a_quick_child_is_waited_for_and_a_slow_one_killed() {
        let start = Instant::now();
        let status = wait_within(&mut sh("exit 4"), Duration::from_secs(60));
        assert_eq!(status.and_then(|s| s.code()), Some(4));
        let mut slow = sh("exec sleep 60");
        assert_eq!(wait_within(&mut slow, Duration::from_millis(50)), None);
        assert!(slow.try_wait().unwrap().is_some(), "killed and reaped");
        assert!(start.elapsed() < Duration::from_secs(30));
    }

    #[test]
    fn signals_and_kills_end_a_child_by_that_signal() {
        use std::os::unix::process::ExitStatusExt;
        let mut child = sh("exec sleep 60");
        signal(&child, libc::SIGTERM).unwrap();
        assert_eq!(child.wait().unwrap().signal(), Some(libc::SIGTERM));
        let mut child = sh("exec sleep 60");
        assert_eq!(kill(&mut child).unwrap().signal(), Some(libc::SIGKILL));
    }

    #[test]
    fn work_on_a_thread_is_bounded() {
        assert_eq!(within(Duration::from_secs(60), "adding", || 2 + 2), 4);
        let hung = std::panic::catch_unwind(|| {
            within(Duration::from_millis(10), "sleeping", || {
                std::thread::sleep(Duration::from_secs(5));
            })
        });
        assert!(hung.is_err());
    }
}
