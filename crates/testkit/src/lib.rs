//! Test helpers shared by ranktune's crates (never a dependency of library
//! code): starting child processes and reading what they left behind.
//!
//! Process tests in this workspace start real processes. Two kinds:
//!
//! - the test binary itself, re-run with one `#[ignore]`d "child" test
//!   selected by name ([`child_test`]), so the child runs library code in a
//!   fresh process that can be killed, crash, or race its siblings;
//! - the `ranktune` command, whose path only the binary crate's tests know
//!   (`env!("CARGO_BIN_EXE_ranktune")`).
//!
//! ```
//! let cmd = ranktune_testkit::child_test("child", false);
//! assert!(cmd.get_args().any(|a| a == "--exact"));
//! ```

use std::process::Command;

/// A command that re-runs the current test binary with exactly the test
/// `name`, its output not captured (the child's prints are the protocol).
/// `ignored` selects a test marked `#[ignore]` (children usually are, so a
/// plain `cargo test` does not run them on their own).
///
/// # Panics
/// When the test binary's own path cannot be read: a test harness fault.
pub fn child_test(name: &str, ignored: bool) -> Command {
    let exe = std::env::current_exe().expect("the test binary's path");
    let mut cmd = Command::new(exe);
    cmd.args([name, "--exact", "--nocapture", "--test-threads=1", "-q"]);
    if ignored {
        cmd.arg("--ignored");
    }
    cmd
}
