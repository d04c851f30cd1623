//! A worker process's own set-up, for workers another program starts (the
//! Python package forks and spawns its own, to run Python callables): the
//! signals, the parent-death signal and the memory limit the tuner's forked
//! workers get (`fork.rs`), from the same `sys` calls, so both kinds of
//! worker are set up by one rule.
//!
//! Runs only inside a worker process; never touches another process.

use super::sys;

/// Sets this process up as a measuring worker: SIGINT and SIGTERM ignored
/// (the tuner decides when its worker ends), the crash signals' default
/// actions (a handler the tuning process installed never runs in the
/// worker), and, on Linux, SIGKILL when its parent dies. `false` when its
/// parent is no longer `parent` (the tuning process is gone: exit at once).
pub fn prepare(parent: i32) -> bool {
    sys::worker_signals();
    sys::parent_pid() == parent
}

/// Limits this process's address space to its own size now plus `extra`
/// bytes (`None`: no limit): the soft limit, capped by the hard one, so a
/// worker that sets up another bucket can lift it and set it again. The
/// size is read here, in the worker, after its set-up (a size read before
/// a fork can be short by what another thread mapped in between). Returns
/// the limit set.
pub fn limit_memory(extra: Option<u64>) -> std::io::Result<Option<u64>> {
    let limit = match extra {
        None => None,
        Some(extra) => {
            let own = sys::vm_size()
                .ok_or_else(|| std::io::Error::other("cannot read this process's size"))?;
            Some(own.saturating_add(extra))
        }
    };
    sys::limit_address_space_soft(limit)?;
    Ok(limit)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_child_limits_its_memory_over_its_own_size_and_can_lift_it() {
        // In a child: the limit would bind this test process otherwise.
        // SAFETY: the child runs only the checks below and exits.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0);
        if pid == 0 {
            let ok = matches!(limit_memory(Some(64 << 20)), Ok(Some(l)) if l > 64 << 20)
                && matches!(limit_memory(None), Ok(None))
                && matches!(limit_memory(Some(1 << 30)), Ok(Some(_)));
            // SAFETY: _exit in the child.
            unsafe { libc::_exit(i32::from(!ok)) };
        }
        let mut status = 0;
        // SAFETY: waitpid on our child.
        unsafe { libc::waitpid(pid, &mut status, 0) };
        assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0, "status {status}");
    }
}
