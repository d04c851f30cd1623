//! Platform calls of the launcher: sending a signal to a rank, and asking
//! the kernel to stop a rank whose launcher dies.
//!
//! Owns only these libc calls; it must never hold state or decide when to
//! stop a rank.

use std::io;
use std::process::Command;

/// Sends `sig` to process `pid` (a rank the launcher started and has not
/// reaped yet, so the pid names no other process).
pub(super) fn send_signal(pid: u32, sig: i32) -> io::Result<()> {
    #[cfg(unix)]
    {
        let pid = libc::pid_t::try_from(pid)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "pid out of range"))?;
        // SAFETY: kill has no memory-safety preconditions.
        if unsafe { libc::kill(pid, sig) } == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }
    #[cfg(not(unix))]
    {
        let _ = (pid, sig);
        Err(io::Error::new(io::ErrorKind::Unsupported, "signals need a Unix system"))
    }
}

/// Makes the child that `cmd` starts receive SIGTERM when the thread that
/// starts it (the launcher's) ends (Linux `prctl(PR_SET_PDEATHSIG)`), so a
/// launcher killed outright still lets its ranks stop cleanly. A child whose
/// launcher is already gone by the time it starts does not start. Does
/// nothing on other systems.
pub(super) fn term_with_parent(cmd: &mut Command) {
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::process::CommandExt;
        // SAFETY: getpid has no preconditions.
        let parent = unsafe { libc::getpid() };
        // SAFETY: the closure runs in the child between fork and exec and
        // makes only async-signal-safe system calls (prctl, getppid); it
        // allocates nothing (the error is a raw OS error).
        unsafe {
            cmd.pre_exec(move || {
                let sig = libc::SIGTERM as libc::c_ulong;
                if libc::prctl(libc::PR_SET_PDEATHSIG, sig, 0, 0, 0) != 0 {
                    return Err(io::Error::last_os_error());
                }
                // The launcher died before the call above took effect.
                if libc::getppid() != parent {
                    return Err(io::Error::from_raw_os_error(libc::ESRCH));
                }
                Ok(())
            });
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = cmd;
}
