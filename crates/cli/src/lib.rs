//! The `ranktune` command as a library: [`run`] is the whole command-line
//! tool (argument parsing, the subcommands, exit statuses), for the
//! `ranktune` binary and for entry points that run it inside another
//! process (the Python package's `ranktune` script). It holds no logic a
//! library user would need: that lives in the crates below.

mod cli;

pub use cli::ExitCode;

/// Runs the command on `args` (the program name first) and returns its
/// exit status. `rank_exe`, when given, is the executable `tune --ranks N`
/// starts its rank processes with (default: this process's executable).
pub fn run<I, T>(args: I, rank_exe: Option<std::path::PathBuf>) -> ExitCode
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    cli::sys::restore_sigpipe();
    cli::run(args, rank_exe)
}

/// Runs the command on this process's arguments.
pub fn main() -> ExitCode {
    cli::sys::restore_sigpipe();
    cli::main()
}
