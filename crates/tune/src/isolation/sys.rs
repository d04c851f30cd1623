//! The platform calls of isolated measuring (Linux/Unix, through libc):
//! socket pairs and pipes, fork, poll, wait4, kill, signal dispositions,
//! the address-space limit and `_exit`, plus reading the process's and the
//! machine's memory from `/proc`.
//!
//! Owns the `unsafe` blocks of the isolation module and nothing else: no
//! protocol, no policy. The functions marked *child-safe* only make
//! async-signal-safe system calls, so they may run between `fork` and the
//! worker's serve loop in a child of a multithreaded process.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::{Duration, Instant};

fn check(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// A connected pair of Unix stream sockets (close-on-exec).
pub(super) fn socket_pair() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [-1; 2];
    // SAFETY: `fds` is a valid array of two ints for socketpair to fill.
    check(unsafe {
        libc::socketpair(libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0, fds.as_mut_ptr())
    })?;
    // SAFETY: socketpair succeeded: both descriptors are open and ours.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// A pipe `(read end, write end)` (close-on-exec).
pub(super) fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [-1; 2];
    // SAFETY: `fds` is a valid array of two ints for pipe2 to fill.
    check(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) })?;
    // SAFETY: pipe2 succeeded: both descriptors are open and ours.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Makes `fd` non-blocking.
pub(super) fn set_nonblocking(fd: RawFd) -> io::Result<()> {
    // SAFETY: fcntl on a descriptor number with integer arguments.
    let flags = check(unsafe { libc::fcntl(fd, libc::F_GETFL) })?;
    // SAFETY: as above.
    check(unsafe { libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) }).map(|_| ())
}

/// What `fork` returned.
pub(super) enum Forked {
    /// In the child.
    Child,
    /// In the parent: the child's pid.
    Parent(libc::pid_t),
}

/// Forks this process.
///
/// # Safety
///
/// In the child, only async-signal-safe work may happen until the caller
/// knows no lock held by another thread of the parent is needed; the child
/// must leave by [`exit_now`] and never return into the caller's code.
pub(super) unsafe fn fork() -> io::Result<Forked> {
    // SAFETY: the caller upholds the child's restrictions.
    match check(unsafe { libc::fork() })? {
        0 => Ok(Forked::Child),
        pid => Ok(Forked::Parent(pid)),
    }
}

/// Ends this process at once with `code`: no destructors, no atexit
/// handlers, no buffered output. *Child-safe.*
pub(super) fn exit_now(code: i32) -> ! {
    // SAFETY: _exit never returns and has no preconditions.
    unsafe { libc::_exit(code) }
}

/// Duplicates `from` onto descriptor `to`. *Child-safe.*
pub(super) fn dup_onto(from: RawFd, to: RawFd) -> io::Result<()> {
    // SAFETY: dup2 on descriptor numbers.
    check(unsafe { libc::dup2(from, to) }).map(|_| ())
}

/// Closes descriptor `fd` (errors ignored). *Child-safe.*
pub(super) fn close(fd: RawFd) {
    // SAFETY: closing a descriptor number the caller owns in this process.
    unsafe { libc::close(fd) };
}

/// Sets this process's soft and hard address-space limit (`RLIMIT_AS`) to
/// `bytes`. *Child-safe.*
pub(super) fn limit_address_space(bytes: u64) -> io::Result<()> {
    let lim = libc::rlimit { rlim_cur: bytes as libc::rlim_t, rlim_max: bytes as libc::rlim_t };
    // SAFETY: setrlimit reads a valid rlimit struct.
    check(unsafe { libc::setrlimit(libc::RLIMIT_AS, &lim) }).map(|_| ())
}

/// Sets this process's soft address-space limit (`RLIMIT_AS`) to `bytes`
/// (`None`: no limit), capped by the hard limit, which stays: a worker
/// that sets up another bucket can lift the soft limit and set it again.
pub(super) fn limit_address_space_soft(bytes: Option<u64>) -> io::Result<()> {
    let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit fills a valid rlimit struct.
    check(unsafe { libc::getrlimit(libc::RLIMIT_AS, &mut lim) })?;
    lim.rlim_cur = match bytes {
        Some(b) => (b as libc::rlim_t).min(lim.rlim_max),
        None => lim.rlim_max,
    };
    // SAFETY: setrlimit reads a valid rlimit struct.
    check(unsafe { libc::setrlimit(libc::RLIMIT_AS, &lim) }).map(|_| ())
}

/// Prepares a worker's signals. *Child-safe.*
///
/// SIGINT and SIGTERM are ignored (the tuner decides when its worker ends:
/// a Ctrl-C of the job lets the tuning process finish its bucket and save);
/// the crash signals get their default action back, so that a handler the
/// tuning process installed (e.g. a trace's crash export) never runs in the
/// worker; on Linux the worker is killed when the tuning process dies.
pub(super) fn worker_signals() {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: signal() with SIG_IGN is async-signal-safe.
        unsafe { libc::signal(sig, libc::SIG_IGN) };
    }
    for sig in
        [libc::SIGSEGV, libc::SIGBUS, libc::SIGFPE, libc::SIGILL, libc::SIGABRT, libc::SIGPIPE]
    {
        // SAFETY: signal() with SIG_DFL is async-signal-safe.
        unsafe { libc::signal(sig, libc::SIG_DFL) };
    }
    #[cfg(target_os = "linux")]
    // SAFETY: prctl with integer arguments.
    unsafe {
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
    }
}

/// The parent's pid. *Child-safe.*
pub(super) fn parent_pid() -> libc::pid_t {
    // SAFETY: getppid has no preconditions.
    unsafe { libc::getppid() }
}

/// Writes all of `buf` to `fd`, retrying on EINTR, without SIGPIPE when `fd`
/// is a socket. *Child-safe.*
pub(super) fn write_all(fd: RawFd, mut buf: &[u8]) -> io::Result<()> {
    while !buf.is_empty() {
        // SAFETY: `buf` is a valid readable slice of `buf.len()` bytes.
        let n = unsafe { libc::send(fd, buf.as_ptr().cast(), buf.len(), libc::MSG_NOSIGNAL) };
        let n = if n < 0 && io::Error::last_os_error().raw_os_error() == Some(libc::ENOTSOCK) {
            // SAFETY: as above, for a descriptor that is not a socket.
            unsafe { libc::write(fd, buf.as_ptr().cast(), buf.len()) }
        } else {
            n
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        buf = &buf[n as usize..];
    }
    Ok(())
}

/// Writes all of `buf` to the non-blocking `fd`, waiting while its buffer
/// is full, until `deadline`: `TimedOut` past it (a peer that stopped
/// reading), another error when the peer is gone. The parent's side only.
pub(super) fn write_all_until(fd: RawFd, mut buf: &[u8], deadline: Instant) -> io::Result<()> {
    while !buf.is_empty() {
        // SAFETY: `buf` is a valid readable slice of `buf.len()` bytes.
        let n = unsafe { libc::send(fd, buf.as_ptr().cast(), buf.len(), libc::MSG_NOSIGNAL) };
        if n >= 0 {
            buf = &buf[n as usize..];
            continue;
        }
        let e = io::Error::last_os_error();
        match e.kind() {
            io::ErrorKind::Interrupted => {}
            io::ErrorKind::WouldBlock => {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Err(io::Error::from(io::ErrorKind::TimedOut));
                }
                let mut pfd = libc::pollfd { fd, events: libc::POLLOUT, revents: 0 };
                let ms = libc::c_int::try_from(left.as_millis().max(1)).unwrap_or(libc::c_int::MAX);
                // SAFETY: one valid pollfd.
                unsafe { libc::poll(&mut pfd, 1, ms) };
            }
            _ => return Err(e),
        }
    }
    Ok(())
}

/// Reads into `buf`: `Ok(0)` at end of file; `WouldBlock` when a
/// non-blocking descriptor has nothing. Retries on EINTR. *Child-safe.*
pub(super) fn read(fd: RawFd, buf: &mut [u8]) -> io::Result<usize> {
    loop {
        // SAFETY: `buf` is a valid writable slice of `buf.len()` bytes.
        let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
        if n >= 0 {
            return Ok(n as usize);
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// Waits up to `timeout` until one of `fds` is readable (or hung up).
/// Returns, per descriptor, whether it is ready.
pub(super) fn poll_readable<const N: usize>(
    fds: [RawFd; N],
    timeout: Duration,
) -> io::Result<[bool; N]> {
    let mut pfds = fds.map(|fd| libc::pollfd { fd, events: libc::POLLIN, revents: 0 });
    let ms = libc::c_int::try_from(timeout.as_millis()).unwrap_or(libc::c_int::MAX);
    // SAFETY: `pfds` is a valid array of N pollfd structs.
    let r = unsafe { libc::poll(pfds.as_mut_ptr(), N as libc::nfds_t, ms) };
    if r < 0 {
        let e = io::Error::last_os_error();
        if e.kind() == io::ErrorKind::Interrupted {
            return Ok([false; N]);
        }
        return Err(e);
    }
    Ok(pfds.map(|p| p.revents & (libc::POLLIN | libc::POLLHUP | libc::POLLERR) != 0))
}

pub(super) use super::reasons::Exit;

/// A reaped child: how it ended and its peak resident memory.
#[derive(Clone, Copy, Debug)]
pub(super) struct Reaped {
    pub(super) exit: Exit,
    /// `ru_maxrss`, bytes.
    pub(super) max_rss: u64,
}

/// Reaps child `pid` (`block`: wait for it). `None`: still running.
pub(super) fn reap(pid: libc::pid_t, block: bool) -> io::Result<Option<Reaped>> {
    let mut status: libc::c_int = 0;
    // SAFETY: rusage is plain data; zeroed is a valid value.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    let flags = if block { 0 } else { libc::WNOHANG };
    loop {
        // SAFETY: valid pointers to a status int and a rusage struct.
        let r = unsafe { libc::wait4(pid, &mut status, flags, &mut ru) };
        if r < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if r == 0 {
            return Ok(None);
        }
        let exit = if libc::WIFSIGNALED(status) {
            Exit::Signal(libc::WTERMSIG(status))
        } else {
            Exit::Code(libc::WEXITSTATUS(status))
        };
        // ru_maxrss is in KiB on Linux.
        let max_rss = u64::try_from(ru.ru_maxrss).unwrap_or(0).saturating_mul(1024);
        return Ok(Some(Reaped { exit, max_rss }));
    }
}

/// Sends SIGKILL to `pid` (errors ignored: it may be gone already).
pub(super) fn kill(pid: libc::pid_t) {
    // SAFETY: kill with integer arguments.
    unsafe { libc::kill(pid, libc::SIGKILL) };
}

/// This process's address-space size (bytes), from `/proc/self/statm`.
pub(super) fn vm_size() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = text.split_whitespace().next()?.parse().ok()?;
    Some(pages.saturating_mul(page_size()?))
}

/// The size of a memory page (bytes).
pub(super) fn page_size() -> Option<u64> {
    // SAFETY: sysconf with a constant name.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    u64::try_from(page).ok().filter(|&p| p > 0)
}

/// This process's address-space size (bytes), from `/proc/self/statm` read
/// with raw system calls into a buffer on the stack (`page`: the page size,
/// read before the fork). *Child-safe:* a forked worker measures what it
/// inherited itself, since another thread of the tuning process may map
/// memory (a thread's stack, a malloc arena's 64 MiB) between a size read
/// before the fork and the fork.
pub(super) fn vm_size_now(page: u64) -> Option<u64> {
    let mut buf = [0u8; 32];
    // SAFETY: open with a NUL-terminated path; read into a buffer of that
    // length; close of the descriptor just opened.
    let n = unsafe {
        let fd = libc::open(c"/proc/self/statm".as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return None;
        }
        let n = libc::read(fd, buf.as_mut_ptr().cast(), buf.len());
        libc::close(fd);
        n
    };
    let read = buf.get(..usize::try_from(n).ok()?)?;
    let mut digits = read.iter().take_while(|b| b.is_ascii_digit());
    let pages =
        digits.try_fold(0u64, |acc, &d| acc.checked_mul(10)?.checked_add(u64::from(d - b'0')))?;
    (pages > 0).then(|| pages.saturating_mul(page))
}

/// The machine's available memory (bytes), `MemAvailable` of `/proc/meminfo`.
pub(super) fn mem_available() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib.saturating_mul(1024))
}

/// The raw descriptor of an owned one (for the child, which must not run
/// `OwnedFd`'s destructor after fork: it leaves by `_exit`).
pub(super) fn raw(fd: &OwnedFd) -> RawFd {
    fd.as_raw_fd()
}

/// This process's pid.
pub(super) fn own_pid() -> libc::pid_t {
    // SAFETY: getpid has no preconditions.
    unsafe { libc::getpid() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_child_safe_size_reads_what_the_allocating_one_does() {
        let page = page_size().unwrap();
        let (before, raw, after) =
            (vm_size().unwrap(), vm_size_now(page).unwrap(), vm_size().unwrap());
        // Other test threads may map memory between the reads: a bound, not equality.
        assert!(
            raw >= before.min(after) / 2 && raw <= before.max(after) * 2,
            "{before} {raw} {after}"
        );
        assert_eq!(raw % page, 0);
    }
}
