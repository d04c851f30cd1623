//! Running a program by path (the `ranktune` command, `mpirun`, the test
//! binary) with arguments and environment, bounded in time, and handing
//! back what it printed as an [`Output`] whose panics show the command.
//!
//! Owns: the spawn (stdin closed, as `Command::output` does; both output
//! pipes drained on threads so a chatty child never blocks), the time limit
//! and the report of a run. Never: changes the environment on its own (each
//! test names the variables it removes or sets), retries, or judges a run's
//! outcome unless asked ([`Output::expect_success`], [`Output::json`]).

use crate::lines::LineReader;
use crate::wait::{kill, wait_within};
use std::ffi::OsStr;
use std::fmt;
use std::io;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::Duration;

/// How long a run may take unless [`Cli::limit`] says otherwise: generous
/// for a loaded 2-core machine, so only a hang reaches it.
pub const DEFAULT_LIMIT: Duration = Duration::from_secs(600);

/// A program to run: a `Command` builder that runs it bounded in time and
/// collects an [`Output`].
#[derive(Debug)]
pub struct Cli {
    cmd: Command,
    limit: Duration,
}

impl From<Command> for Cli {
    /// Runs a prepared command (e.g. [`crate::child_test`]); its stdio is
    /// replaced as for every run.
    fn from(cmd: Command) -> Self {
        Cli { cmd, limit: DEFAULT_LIMIT }
    }
}

impl Cli {
    /// The program at `program` (a path, or a name looked up in `PATH`).
    pub fn new(program: impl AsRef<OsStr>) -> Self {
        Cli::from(Command::new(program))
    }

    /// Adds one argument.
    pub fn arg(mut self, arg: impl AsRef<OsStr>) -> Self {
        self.cmd.arg(arg);
        self
    }

    /// Adds arguments.
    pub fn args<I>(mut self, args: I) -> Self
    where
        I: IntoIterator,
        I::Item: AsRef<OsStr>,
    {
        self.cmd.args(args);
        self
    }

    /// Sets one variable of the program's environment.
    pub fn env(mut self, key: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> Self {
        self.cmd.env(key, value);
        self
    }

    /// Sets variables of the program's environment, in order.
    pub fn envs<I, K, V>(mut self, vars: I) -> Self
    where
        I: IntoIterator<Item = (K, V)>,
        K: AsRef<OsStr>,
        V: AsRef<OsStr>,
    {
        self.cmd.envs(vars);
        self
    }

    /// Removes variables the program would otherwise inherit from the test's
    /// environment (and that would change what it does).
    pub fn env_remove<I>(mut self, keys: I) -> Self
    where
        I: IntoIterator,
        I::Item: AsRef<OsStr>,
    {
        for key in keys {
            self.cmd.env_remove(key);
        }
        self
    }

    /// Runs the program in `dir`.
    pub fn current_dir(mut self, dir: impl AsRef<Path>) -> Self {
        self.cmd.current_dir(dir);
        self
    }

    /// Fails a run that takes longer than `limit` (default [`DEFAULT_LIMIT`]).
    pub fn limit(mut self, limit: Duration) -> Self {
        self.limit = limit;
        self
    }

    /// Runs the program to its end and returns what it printed, whatever
    /// its exit status.
    ///
    /// # Panics
    /// When it cannot be started, or is still running after the limit (it
    /// is killed first; the panic shows what it printed until then).
    pub fn run(self) -> Output {
        self.spawn().wait()
    }

    /// [`Cli::run`], but a program that cannot be started is an `Err` for
    /// the caller to explain (e.g. "install Open MPI").
    ///
    /// # Errors
    /// What the OS says when the program cannot be started.
    ///
    /// # Panics
    /// When it is still running after the limit, as for [`Cli::run`].
    pub fn try_run(self) -> io::Result<Output> {
        Ok(self.try_spawn()?.wait())
    }

    /// Starts the program and returns at once; its output is read as it
    /// comes ([`Running::stdout`], [`Running::stderr`]).
    ///
    /// # Panics
    /// When it cannot be started, naming it.
    pub fn spawn(self) -> Running {
        let command = shown(&self.cmd);
        self.try_spawn().unwrap_or_else(|e| panic!("cannot start `{command}`: {e}"))
    }

    /// [`Cli::spawn`], a program that cannot be started being an `Err`.
    ///
    /// # Errors
    /// What the OS says when the program cannot be started.
    pub fn try_spawn(mut self) -> io::Result<Running> {
        let command = shown(&self.cmd);
        let mut child =
            self.cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn()?;
        let stdout = child.stdout.take().map(LineReader::read);
        let stderr = child.stderr.take().map(LineReader::read);
        Ok(Running { child, stdout, stderr, command, limit: self.limit })
    }
}

/// The command line as a person would type it: the program's file name,
/// then the arguments (quoted where they hold spaces or are empty).
fn shown(cmd: &Command) -> String {
    let program = Path::new(cmd.get_program());
    let mut line =
        program.file_name().unwrap_or(program.as_os_str()).to_string_lossy().into_owned();
    for arg in cmd.get_args() {
        let arg = arg.to_string_lossy();
        if arg.is_empty() || arg.contains(char::is_whitespace) {
            line.push_str(&format!(" {arg:?}"));
        } else {
            line.push(' ');
            line.push_str(&arg);
        }
    }
    line
}

/// A started program. Dropped before [`Running::wait`], it is killed, so a
/// test that fails early leaves nothing running.
pub struct Running {
    child: Child,
    // Taken only by `wait`, which consumes the value.
    stdout: Option<LineReader>,
    stderr: Option<LineReader>,
    command: String,
    limit: Duration,
}

impl Running {
    /// The program's process id.
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// Sends signal `sig` (e.g. `libc::SIGSTOP`) to the program, which has
    /// not been reaped while this value lives.
    ///
    /// # Errors
    /// What the OS says when the signal cannot be sent.
    pub fn signal(&self, sig: libc::c_int) -> std::io::Result<()> {
        crate::wait::signal(&self.child, sig)
    }

    /// The program's stdout, line by line as it prints.
    pub fn stdout(&self) -> &LineReader {
        self.stdout.as_ref().unwrap_or_else(|| unreachable!("taken only by wait"))
    }

    /// The program's stderr, line by line as it prints.
    pub fn stderr(&self) -> &LineReader {
        self.stderr.as_ref().unwrap_or_else(|| unreachable!("taken only by wait"))
    }

    /// Waits for the program's end (at most its limit) and for the end of
    /// its output, and returns it; lines already taken from a pipe are part
    /// of the output too.
    ///
    /// # Panics
    /// When it is still running after the limit (it is killed first; the
    /// panic shows what it printed), or the OS cannot report on it.
    pub fn wait(mut self) -> Output {
        let in_time = wait_within(&mut self.child, self.limit).is_some();
        // Reaped already: this returns the status kept by `Child`.
        let status = self.child.wait().unwrap_or_else(|e| panic!("`{}`: {e}", self.command));
        let out = Output {
            status,
            stdout: self.stdout.take().map(LineReader::finish).unwrap_or_default(),
            stderr: self.stderr.take().map(LineReader::finish).unwrap_or_default(),
            command: self.command.clone(),
        };
        assert!(in_time, "did not finish within {:?}, killed: {out}", self.limit);
        out
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        // A no-op for a reaped child: `Child` knows its status and sends no signal.
        let _ = kill(&mut self.child);
    }
}

/// What a finished program did: the fields of `std::process::Output`, and
/// the command line, so every report says what ran.
#[derive(Debug, Clone)]
pub struct Output {
    pub status: ExitStatus,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    /// The command line, as [`Cli`] shows it.
    pub command: String,
}

impl Output {
    /// stdout as text (bytes that are not UTF-8 replaced).
    pub fn stdout_text(&self) -> String {
        String::from_utf8_lossy(&self.stdout).into_owned()
    }

    /// stderr as text (bytes that are not UTF-8 replaced).
    pub fn stderr_text(&self) -> String {
        String::from_utf8_lossy(&self.stderr).into_owned()
    }

    /// Returns `self` when the program succeeded.
    ///
    /// # Panics
    /// Otherwise, showing the command, its status and what it printed.
    pub fn expect_success(self) -> Self {
        assert!(self.status.success(), "failed: {self}");
        self
    }

    /// stdout parsed as one JSON document, from a program that succeeded.
    ///
    /// # Panics
    /// When the program failed, or its stdout is not JSON, showing the
    /// command, its status and what it printed.
    pub fn json(&self) -> serde_json::Value {
        assert!(self.status.success(), "failed: {self}");
        serde_json::from_slice(&self.stdout)
            .unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {self}"))
    }
}

impl fmt::Display for Output {
    /// "`command` → status", then stdout and stderr under their names.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "`{}` → {}\n--- stdout\n{}\n--- stderr\n{}",
            self.command,
            self.status,
            String::from_utf8_lossy(&self.stdout),
            String::from_utf8_lossy(&self.stderr)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    fn sh(script: &str) -> Cli {
        Cli::new("sh").args(["-c", script])
    }

    #[test]
    fn a_run_collects_status_and_both_streams_and_shows_the_command() {
        let out = sh("printf 'a\\nb'; echo err >&2; exit 1").env("X", "1").run();
        assert_eq!(out.status.code(), Some(1));
        assert_eq!((out.stdout_text(), out.stderr_text()), ("a\nb".into(), "err\n".into()));
        assert!(out.command.starts_with("sh -c \"printf"), "{}", out.command);
        let report = out.to_string();
        assert!(report.contains("--- stdout\na\nb") && report.contains("--- stderr\nerr"));
        assert!(std::panic::catch_unwind(|| out.clone().expect_success()).is_err());
        assert!(std::panic::catch_unwind(|| out.json()).is_err());
        assert_eq!(sh("echo '{\"k\": 2}'").run().json()["k"], 2);
    }

    #[test]
    fn environment_and_directory_are_the_callers() {
        let dir = std::env::temp_dir();
        let out = sh("echo \"$A-${HOME:-none}\"; pwd")
            .env("A", "set")
            .env_remove(["HOME"])
            .current_dir(&dir)
            .run()
            .expect_success();
        let text = out.stdout_text();
        let mut lines = text.lines();
        assert_eq!(lines.next(), Some("set-none"));
        let pwd = std::fs::canonicalize(lines.next().unwrap()).unwrap();
        assert_eq!(pwd, std::fs::canonicalize(dir).unwrap());
    }

    #[test]
    fn a_hang_is_killed_and_reported_and_lines_stream() {
        let start = Instant::now();
        let hung = std::panic::catch_unwind(|| {
            sh("echo started; exec sleep 60").limit(Duration::from_secs(2)).run()
        });
        let msg = hung.unwrap_err();
        let msg = msg.downcast_ref::<String>().unwrap();
        assert!(msg.contains("did not finish") && msg.contains("started"), "{msg}");
        assert!(start.elapsed() < Duration::from_secs(30));

        let running = sh("echo one >&2; echo two >&2").spawn();
        let limit = Duration::from_secs(60);
        assert_eq!(running.stderr().wait_for(|l| l == "two", limit).as_deref(), Ok("two"));
        assert_eq!(running.wait().stderr_text(), "one\ntwo\n");
        assert!(Cli::new("/nonexistent/program").try_run().is_err());
    }
}
