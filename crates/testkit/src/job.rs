//! A job of rank processes made of the current test binary: `world` copies
//! of one child test, each told its rank as a launcher would, each writing
//! its result to a file the parent reads; the parent waits for them all with
//! a bound, and kills (SIGKILL) a rank that asks for it, to test what the
//! others do when a rank dies mid-way.
//!
//! The protocol, all in the job's `out` directory:
//!
//! | file | written by | meaning |
//! | --- | --- | --- |
//! | `rank<r>.log`, `rank<r>.err` | the child's stdout, stderr | what rank `r` printed |
//! | `rank<r>.json` | [`write_result`] | rank `r`'s result, published whole (temp file, rename) |
//! | `kill-me-<r>` | [`await_kill`] | rank `r` asks to be killed now |
//!
//! Owns: the launcher variables a rank is given and those it must not
//! inherit, and the files above. Never: interprets a result (the test does)
//! or lets a rank outlive the job's limit.

use crate::child::child_test;
use crate::wait::kill;
use serde_json::Value;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Launcher and rank variables a process started by a test must not inherit
/// from the test's own environment (a test run under a launcher, or with
/// `RANKTUNE_*` set): they would override the rank, world and job the test
/// gives it, or make a single process think it is one rank of a job. The
/// rank variables are rank detection's own table (`ranktune_core::rank`);
/// the rest are the job-id variables and ranktune's job settings.
pub const LAUNCHER_VARS: &[&str] = &concat::<{ RANK_VARS_LEN + JOB_VARS.len() }>(&JOB_VARS);

/// Every rank variable rank detection reads: ranktune's, then the others'.
const RANK_VARS_LEN: usize =
    ranktune_core::rank::RANKTUNE_VARS.len() + ranktune_core::rank::LAUNCHER_VARS.len();

/// The variables that name a job or set how its ranks meet, beside the rank ones.
const JOB_VARS: [&str; 14] = [
    "RANKTUNE_JOB_ID",
    "RANKTUNE_COLLECTIVE",
    "RANKTUNE_STRATEGY",
    "SLURM_JOB_ID",
    "SLURM_JOBID",
    "SLURM_STEP_ID",
    "TORCHELASTIC_RUN_ID",
    "PMIX_NAMESPACE",
    "OMPI_MCA_ess_base_jobid",
    "OMPI_MCA_orte_ess_jobid",
    "I_MPI_HYDRA_UUID",
    "PMI_JOBID",
    "PBS_JOBID",
    "LSB_JOBID",
];

/// Core's rank variables, then `rest` (`N` is the sum of their lengths).
const fn concat<const N: usize>(rest: &[&'static str]) -> [&'static str; N] {
    let ours = ranktune_core::rank::RANKTUNE_VARS;
    let theirs = ranktune_core::rank::LAUNCHER_VARS;
    let mut out = [""; N];
    let mut i = 0;
    while i < N {
        out[i] = if i < ours.len() {
            ours[i]
        } else if i < ours.len() + theirs.len() {
            theirs[i - ours.len()]
        } else {
            rest[i - ours.len() - theirs.len()]
        };
        i += 1;
    }
    out
}

/// How often a waiting parent looks for kill requests and ended ranks.
const POLL: Duration = Duration::from_millis(20);

/// What to start: rank `r` of `world` runs the ignored child test `test`
/// with `RANK=r`, `WORLD_SIZE=world`, `RANKTUNE_JOB_ID=job_id`,
/// `RANKTUNE_TEST_DIR=dir` (the directory the ranks share),
/// `RANKTUNE_TEST_OUT=out`, then `vars` in order, and without
/// [`LAUNCHER_VARS`].
#[derive(Debug, Clone, Copy)]
pub struct JobSpec<'a> {
    pub test: &'a str,
    pub world: u32,
    pub job_id: &'a str,
    pub dir: &'a Path,
    pub out: &'a Path,
    pub vars: &'a [(&'a str, &'a str)],
    /// The whole job must end within this, or it is a hang.
    pub limit: Duration,
}

impl JobSpec<'_> {
    /// Starts every rank (creating `out`).
    ///
    /// # Panics
    /// When `out` or a rank's log files cannot be created, or a rank cannot
    /// be started.
    pub fn start(&self) -> RankJob {
        self.start_each(|_, _| {})
    }

    /// Like [`JobSpec::start`], letting `per_rank` change each rank's command
    /// before it starts (e.g. give each rank its own working directory and
    /// variables, for ranks that must share nothing through the filesystem).
    ///
    /// # Panics
    /// As [`JobSpec::start`].
    pub fn start_each(&self, per_rank: impl Fn(u32, &mut Command)) -> RankJob {
        let out = self.out;
        fs::create_dir_all(out).unwrap_or_else(|e| panic!("creating {}: {e}", out.display()));
        let log = |name: String| {
            let path = out.join(name);
            fs::File::create(&path).unwrap_or_else(|e| panic!("creating {}: {e}", path.display()))
        };
        let children = (0..self.world)
            .map(|rank| {
                let mut cmd = child_test(self.test, true);
                for var in LAUNCHER_VARS {
                    cmd.env_remove(var);
                }
                cmd.env("RANK", rank.to_string())
                    .env("WORLD_SIZE", self.world.to_string())
                    .env("RANKTUNE_JOB_ID", self.job_id)
                    .env("RANKTUNE_TEST_DIR", self.dir)
                    .env("RANKTUNE_TEST_OUT", out)
                    .envs(self.vars.iter().copied())
                    .stdin(Stdio::null())
                    .stdout(log(format!("rank{rank}.log")))
                    .stderr(log(format!("rank{rank}.err")));
                per_rank(rank, &mut cmd);
                let child = cmd.spawn().unwrap_or_else(|e| panic!("starting rank {rank}: {e}"));
                Some(child)
            })
            .collect();
        RankJob { children, out: out.to_path_buf(), limit: self.limit }
    }
}

/// A started job: its ranks (`None` once killed on request) and its files.
pub struct RankJob {
    children: Vec<Option<Child>>,
    out: PathBuf,
    limit: Duration,
}

impl RankJob {
    /// Waits for every rank, killing those that ask for it on the way.
    ///
    /// # Panics
    /// When the job outlives its limit (every rank is killed first), or a
    /// rank cannot be polled or killed.
    pub fn wait(&mut self) {
        let start = Instant::now();
        loop {
            let mut running = 0;
            for child in self.children.iter_mut().flatten() {
                if child.try_wait().unwrap_or_else(|e| panic!("polling a rank: {e}")).is_none() {
                    running += 1;
                }
            }
            if running == 0 {
                return;
            }
            if start.elapsed() > self.limit {
                for child in self.children.iter_mut().flatten() {
                    let _ = kill(child);
                }
                panic!("job in {} hung: {running} rank(s) still running", self.out.display());
            }
            self.kill_on_request();
            std::thread::sleep(POLL);
        }
    }

    /// A rank that wrote `kill-me-<rank>` is killed with SIGKILL.
    fn kill_on_request(&mut self) {
        for (rank, slot) in self.children.iter_mut().enumerate() {
            let marker = self.out.join(format!("kill-me-{rank}"));
            if marker.exists() {
                if let Some(mut child) = slot.take() {
                    kill(&mut child).unwrap_or_else(|e| panic!("killing rank {rank}: {e}"));
                }
                fs::remove_file(&marker)
                    .unwrap_or_else(|e| panic!("removing {}: {e}", marker.display()));
            }
        }
    }

    /// Each rank's result, the array under `field` of its `rank<r>.json`
    /// (`None` for a rank that wrote nothing).
    ///
    /// # Panics
    /// When a result is not JSON or has no array `field`.
    pub fn results(&self, field: &str) -> Vec<Option<Vec<Value>>> {
        (0..self.children.len())
            .map(|r| {
                let path = self.out.join(format!("rank{r}.json"));
                let text = fs::read(&path).ok()?;
                let v: Value = serde_json::from_slice(&text)
                    .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                let items = v[field].as_array();
                Some(items.unwrap_or_else(|| panic!("{}: no {field}", path.display())).clone())
            })
            .collect()
    }

    /// Every rank's result (see [`RankJob::results`]).
    ///
    /// # Panics
    /// When a rank wrote none, showing what the ranks printed on stderr.
    pub fn all_results(&self, field: &str) -> Vec<Vec<Value>> {
        self.results(field)
            .into_iter()
            .enumerate()
            .map(|(r, b)| {
                b.unwrap_or_else(|| panic!("rank {r} wrote no result:\n{}", self.stderr()))
            })
            .collect()
    }

    /// What the ranks printed on stderr, rank by rank.
    pub fn stderr(&self) -> String {
        (0..self.children.len())
            .map(|r| fs::read_to_string(self.out.join(format!("rank{r}.err"))).unwrap_or_default())
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// In a rank: publishes `result` as `<out>/rank<rank>.json`, whole (a temp
/// file renamed over it), so the parent never reads half of it.
///
/// # Panics
/// When the file cannot be written.
pub fn write_result(out: &Path, rank: u32, result: &Value) {
    let tmp = out.join(format!(".rank{rank}.tmp"));
    let text = serde_json::to_vec(result).unwrap_or_else(|e| panic!("rank {rank}'s result: {e}"));
    fs::write(&tmp, text).unwrap_or_else(|e| panic!("writing {}: {e}", tmp.display()));
    let path = out.join(format!("rank{rank}.json"));
    fs::rename(&tmp, &path).unwrap_or_else(|e| panic!("publishing {}: {e}", path.display()));
}

/// In a rank: asks the parent to kill this rank (SIGKILL) and waits for it;
/// returns only if the parent never does (after ten minutes, long past any
/// job's limit).
///
/// # Panics
/// When the request cannot be written.
pub fn await_kill(out: &Path, rank: u32) {
    let marker = out.join(format!("kill-me-{rank}"));
    fs::write(&marker, b"").unwrap_or_else(|e| panic!("writing {}: {e}", marker.display()));
    std::thread::sleep(Duration::from_secs(600));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_rank_variable_detection_reads_is_listed_once() {
        let rank =
            ranktune_core::rank::RANKTUNE_VARS.iter().chain(&ranktune_core::rank::LAUNCHER_VARS);
        for v in rank.chain(&JOB_VARS) {
            assert_eq!(LAUNCHER_VARS.iter().filter(|l| *l == v).count(), 1, "{v}");
        }
        assert_eq!(LAUNCHER_VARS.len(), RANK_VARS_LEN + JOB_VARS.len());
    }
}
