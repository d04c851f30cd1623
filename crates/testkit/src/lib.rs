//! Test helpers shared by ranktune's crates (a dev-dependency only, never a
//! dependency of library code): starting child processes, waiting for them
//! with a bound, and reading what they printed or left behind.
//!
//! ```
//! use ranktune_testkit::{child_test, Cli};
//!
//! // A command that re-runs this test binary with one test selected.
//! let cmd = child_test("child", false);
//! assert!(cmd.get_args().any(|a| a == "--exact"));
//!
//! // Any program, its output collected; a failed expectation panics
//! // showing the command line, its exit status and what it printed.
//! let out = Cli::new("sh").args(["-c", "echo hi; echo oops >&2; exit 3"]).run();
//! assert_eq!(out.status.code(), Some(3), "{out}");
//! assert_eq!((out.stdout_text(), out.stderr_text()), ("hi\n".into(), "oops\n".into()));
//! ```
//!
//! Process tests in this workspace start real processes. Three kinds:
//!
//! - the test binary itself, re-run with one "child" test selected by name
//!   ([`child_test`]), so the child runs library code in a fresh process
//!   that can be killed, crash, or race its siblings; the child reads what
//!   its parent told it with [`child_var`] and [`child_var_parsed`];
//! - a job of such children, one per rank, started as a launcher would
//!   ([`JobSpec`], [`RankJob`]);
//! - a program by path, above all the `ranktune` command, whose path only
//!   the binary crate's tests know (`env!("CARGO_BIN_EXE_ranktune")`):
//!   [`Cli`] runs it and returns an [`Output`].
//!
//! The modules, one job each:
//!
//! | module | owns |
//! | --- | --- |
//! | `child` | the arguments that re-run the test binary with one test; the child's reading of its variables |
//! | `cli` | running a program with arguments and environment, collecting its [`Output`] |
//! | `job` | a job of rank processes: their launcher variables, result files and kill requests |
//! | `lines` | reading a child's output pipe line by line on a thread ([`LineReader`]) |
//! | `wait` | bounded waits for a child, kills and signals |
//! | `files` | the names of the files a test left in a directory |
//! | `rules` | the case files of the rules both languages run ([`rule_cases`]) |
//! | `redis` | a real `redis-server` on a free loopback port for one test ([`redis::RedisServer`]) |
//! | `synth` | synthetic multi-rank trace files for the trace analysis' tests and benchmarks ([`synth::write_job`]) |
//! | `cache_fixtures` | (feature `cache`) the keys, entries and caches the cache tests build |
//!
//! Nothing here sleeps to let a child get on: waits are woken by the child
//! (its exit, its next line), and the one poll (a job's kill requests) has
//! a short interval. No wait is unbounded where a hung child could block the
//! suite, and no child outlives the handle a test holds of it.

#[cfg(feature = "cache")]
pub mod cache_fixtures;
mod child;
mod cli;
mod files;
mod job;
mod lines;
pub mod redis;
mod rules;
pub mod synth;
mod wait;

pub use child::{child_test, child_test_args, child_var, child_var_parsed, test_binary, test_path};
pub use cli::{Cli, Output, Running, DEFAULT_LIMIT};
pub use files::{file_names, remove_spools};
pub use job::{await_kill, write_result, JobSpec, RankJob, LAUNCHER_VARS};
pub use lines::LineReader;
pub use rules::rule_cases;
pub use wait::{kill, signal, wait_within, within, KillOnDrop};
