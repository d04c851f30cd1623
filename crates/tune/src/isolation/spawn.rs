//! A worker started as a program ([`WorkerCommand`]): a fresh process that
//! speaks the [`protocol`](super::protocol) on its standard input and
//! output (one Unix socket), with its standard error kept for reasons.
//!
//! Owns starting the program under the limits; the conversation is the
//! worker handle's. It never sends the init (the pool does, and times it).

use super::sys::{self, raw};
use super::worker::Worker;
use super::WorkerCommand;
use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};

/// Starts `cmd`'s program as a worker.
pub(crate) fn start(cmd: &WorkerCommand) -> io::Result<Worker> {
    // The worker may grow by the memory limit over what this process is
    // now (a worker that loads the same libraries starts about as big).
    let address_limit = cmd.limits.memory.map(|m| sys::vm_size().unwrap_or(0).saturating_add(m));
    start_program(cmd, address_limit)
}

/// Starts `cmd`'s program as a worker, its address space limited to
/// `address_limit` bytes at exec (None: a worker that sets its own limit).
pub(crate) fn start_program(cmd: &WorkerCommand, address_limit: Option<u64>) -> io::Result<Worker> {
    let (parent_sock, child_sock) = sys::socket_pair()?;
    sys::set_nonblocking(raw(&parent_sock))?;
    let child_out = child_sock.try_clone()?;
    let mut c = Command::new(&cmd.program);
    c.args(&cmd.args)
        .envs(cmd.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::from(child_sock))
        .stdout(Stdio::from(child_out))
        .stderr(Stdio::piped());
    // SAFETY: the closure runs between fork and exec and makes only
    // async-signal-safe calls (signal, prctl, getppid, setrlimit).
    unsafe {
        c.pre_exec(move || {
            sys::worker_signals();
            if let Some(bytes) = address_limit {
                sys::limit_address_space(bytes)?;
            }
            Ok(())
        });
    }
    let mut child = c
        .spawn()
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", cmd.program.to_string_lossy())))?;
    // The command keeps its copies of the child's socket: drop them, so the
    // worker's death closes the socket for us.
    drop(c);
    let stderr: OwnedFd = match child.stderr.take() {
        Some(s) => s.into(),
        None => return Err(io::Error::other("the worker's standard error was not piped")),
    };
    sys::set_nonblocking(raw(&stderr))?;
    let pid = libc::pid_t::try_from(child.id()).map_err(io::Error::other)?;
    // Reaped through its pid by the worker handle, not through `child`.
    drop(child);
    Ok(Worker::new(pid, parent_sock, stderr, cmd.limits.memory))
}
