//! Re-running the current test binary as a child process with exactly one
//! test selected, and, in that child, reading what the parent told it.
//!
//! Owns: the libtest arguments that select one test (by exact name, output
//! not captured because the child's prints are often the protocol, one
//! thread, quiet), and the reading of parent-set variables in the child.
//! Never: waits for a child (see `wait`), or decides what a child does (that
//! is the child test's own body).

use std::fmt::Display;
use std::path::PathBuf;
use std::process::Command;
use std::str::FromStr;

/// The path of the running test binary.
///
/// # Panics
/// When the OS cannot tell it: a fault of the test harness, not of the test.
pub fn test_binary() -> PathBuf {
    std::env::current_exe().unwrap_or_else(|e| panic!("the test binary's path: {e}"))
}

/// The libtest arguments that run exactly the test `name`, its output not
/// captured, on one thread, quietly; `ignored` selects a test marked
/// `#[ignore]` (children usually are, so a plain `cargo test` does not run
/// them on their own). For wrapping the test binary in a launcher
/// (`mpirun … <test binary> <these arguments>`).
pub fn child_test_args(name: &str, ignored: bool) -> Vec<String> {
    let mut args: Vec<String> =
        [name, "--exact", "--nocapture", "--test-threads=1", "-q"].map(String::from).into();
    if ignored {
        args.push("--ignored".into());
    }
    args
}

/// The name libtest gives the test `name` declared in the module whose
/// `module_path!()` is `module_path`: the path without the crate, so a test
/// in a module of a grouped test binary (`tests/cache/main.rs` with `mod
/// cache_processes;`) is `cache_processes::child`.
///
/// ```
/// assert_eq!(ranktune_testkit::test_path("cache::cache_processes", "child"), "cache_processes::child");
/// assert_eq!(ranktune_testkit::test_path("trace_process", "child"), "child");
/// ```
pub fn test_path(module_path: &str, name: &str) -> String {
    match module_path.split_once("::") {
        Some((_, rest)) => format!("{rest}::{name}"),
        None => name.to_string(),
    }
}

/// A command that re-runs the current test binary with exactly the test
/// `name` (see [`child_test_args`]). The caller adds the variables that
/// tell the child what to do, and the child's stdio.
///
/// # Panics
/// When the test binary's own path cannot be read: a test harness fault.
pub fn child_test(name: &str, ignored: bool) -> Command {
    let mut cmd = Command::new(test_binary());
    cmd.args(child_test_args(name, ignored));
    cmd
}

/// In a child: the variable `name` its parent set, empty when unset (or not
/// Unicode), so a child test can tell "not run as a child" from its empty
/// selector variable.
pub fn child_var(name: &str) -> String {
    std::env::var(name).unwrap_or_default()
}

/// In a child: the variable `name` its parent set, parsed.
///
/// # Panics
/// When it is unset, not Unicode, or does not parse, naming the variable and
/// its value: the parent test did not set it up.
pub fn child_var_parsed<T>(name: &str) -> T
where
    T: FromStr,
    T::Err: Display,
{
    let text = std::env::var(name).unwrap_or_else(|e| panic!("child variable {name}: {e}"));
    text.parse().unwrap_or_else(|e| panic!("child variable {name}={text:?}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selects_one_test_by_exact_name() {
        assert_eq!(
            child_test_args("child", false),
            ["child", "--exact", "--nocapture", "--test-threads=1", "-q"]
        );
        assert_eq!(child_test_args("c", true).last().map(String::as_str), Some("--ignored"));
    }

    #[test]
    fn variables_read_in_a_child() {
        assert_eq!(child_var("RANKTUNE_TESTKIT_SURELY_UNSET"), "");
        let unset = std::panic::catch_unwind(|| child_var_parsed::<u32>("RANKTUNE_TESTKIT_UNSET"));
        assert!(unset.is_err());
    }
}
