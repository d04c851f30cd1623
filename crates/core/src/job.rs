//! Which run this process belongs to, and what all ranks of one run agree
//! on without talking to each other: the run's id (from the launcher's
//! environment) and, where a launcher sets it, the run's trace clock base.
//!
//! [`JobId`] is the one type and [`JobId::detect_with`] the one rule for the
//! id: the store-based collectives keep concurrent jobs apart by it, the
//! launcher (`ranktune tune --ranks N`) hands a [`JobId::fresh`] one to its
//! ranks, and the trace recorder writes it into every trace so analysis
//! never mixes files of different runs. The id is the same on every rank of
//! a run and differs between runs started at the same time; some launchers
//! reuse an id for runs one after another (torchrun with `--rdzv-id none`),
//! so it is not unique over time.
//!
//! This module only reads variables; it never touches files.

/// The variable in which a launcher gives all its ranks one trace clock base
/// (nanoseconds since the Unix epoch, taken before any rank starts).
/// `ranktune tune --ranks N` sets it; under other launchers set it yourself,
/// e.g. `mpirun -x RANKTUNE_TRACE_BASE_NS=$(date +%s%N) …`.
pub const TRACE_BASE_VAR: &str = "RANKTUNE_TRACE_BASE_NS";

/// Reads a variable, treating blank as unset.
fn get(env: &impl Fn(&str) -> Option<String>, name: &str) -> Option<String> {
    env(name).map(|v| v.trim().to_string()).filter(|v| !v.is_empty())
}

/// A run's id and where it came from.
///
/// MPICH's Hydra `mpiexec` puts no job id in the environment: set
/// `RANKTUNE_JOB_ID` there (see [`JobId::detect_with`] for every source).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobId {
    /// The id, the same on every rank of the job.
    pub value: String,
    /// The variable(s) it came from, for messages.
    pub source: &'static str,
}

impl JobId {
    fn new(value: String, source: &'static str) -> JobId {
        JobId { value, source }
    }

    /// Detects the job id from the process environment.
    pub fn detect() -> Option<JobId> {
        Self::detect_with(|name| std::env::var(name).ok())
    }

    /// Like [`JobId::detect`], reading variables through `env`; `None` when no
    /// launcher says.
    ///
    /// Sources, first match wins (inner launchers before schedulers, like
    /// [`crate::rank`]):
    ///
    /// | launcher | variables |
    /// | --- | --- |
    /// | ranktune (`ranktune tune --ranks N` sets it for its children) | `RANKTUNE_JOB_ID` |
    /// | torchrun / torchelastic | `TORCHELASTIC_RUN_ID` (`--rdzv-id`, often the literal `none`), with `MASTER_ADDR`/`MASTER_PORT` to tell concurrent runs apart |
    /// | Open MPI 5 / PRRTE, and any PMIx launcher (also `srun --mpi=pmix`) | `PMIX_NAMESPACE` |
    /// | Open MPI 4 | `OMPI_MCA_ess_base_jobid` |
    /// | Open MPI ≤ 3 | `OMPI_MCA_orte_ess_jobid` |
    /// | Intel MPI (Hydra) | `I_MPI_HYDRA_UUID` |
    /// | Slurm PMI-2, Cray PALS | `PMI_JOBID` |
    /// | Slurm (`srun`) | `SLURM_JOB_ID` + `SLURM_STEP_ID` |
    /// | PBS / LSF allocations | `PBS_JOBID`, `LSB_JOBID` (+ `LSB_JOBINDEX`) |
    ///
    /// MPICH's Hydra `mpiexec` puts no job id in the environment (its PMI name
    /// travels over a socket): set `RANKTUNE_JOB_ID` there, e.g.
    /// `mpiexec -genv RANKTUNE_JOB_ID=$(date +%s%N) …`.
    ///
    /// ```
    /// let env = |name: &str| match name {
    ///     "SLURM_JOB_ID" => Some("4242".to_string()),
    ///     "SLURM_STEP_ID" => Some("3".to_string()),
    ///     _ => None,
    /// };
    /// let job = ranktune_core::job::JobId::detect_with(env).unwrap();
    /// assert_eq!((job.value.as_str(), job.source), ("slurm-4242.3", "SLURM_JOB_ID/SLURM_STEP_ID"));
    /// ```
    pub fn detect_with(env: impl Fn(&str) -> Option<String>) -> Option<JobId> {
        if let Some(v) = get(&env, "RANKTUNE_JOB_ID") {
            return Some(JobId::new(v, "RANKTUNE_JOB_ID"));
        }
        if let Some(v) = get(&env, "TORCHELASTIC_RUN_ID") {
            let addr = get(&env, "MASTER_ADDR").unwrap_or_default();
            let port = get(&env, "MASTER_PORT").unwrap_or_default();
            return Some(JobId::new(
                format!("torchelastic-{v}-{addr}-{port}"),
                "TORCHELASTIC_RUN_ID/MASTER_ADDR/MASTER_PORT",
            ));
        }
        for (name, prefix) in [
            ("PMIX_NAMESPACE", "pmix"),
            ("OMPI_MCA_ess_base_jobid", "ompi"),
            ("OMPI_MCA_orte_ess_jobid", "ompi"),
            ("I_MPI_HYDRA_UUID", "impi"),
            ("PMI_JOBID", "pmi"),
        ] {
            if let Some(v) = get(&env, name) {
                return Some(JobId::new(format!("{prefix}-{v}"), name));
            }
        }
        if let Some(job) = get(&env, "SLURM_JOB_ID").or_else(|| get(&env, "SLURM_JOBID")) {
            let value = match get(&env, "SLURM_STEP_ID").or_else(|| get(&env, "SLURM_STEPID")) {
                Some(step) => format!("slurm-{job}.{step}"),
                None => format!("slurm-{job}"),
            };
            return Some(JobId::new(value, "SLURM_JOB_ID/SLURM_STEP_ID"));
        }
        if let Some(v) = get(&env, "PBS_JOBID") {
            return Some(JobId::new(format!("pbs-{v}"), "PBS_JOBID"));
        }
        if let Some(v) = get(&env, "LSB_JOBID") {
            let index = get(&env, "LSB_JOBINDEX").unwrap_or_else(|| "0".into());
            return Some(JobId::new(format!("lsf-{v}.{index}"), "LSB_JOBID/LSB_JOBINDEX"));
        }
        None
    }

    /// A new id, unique to this launch: what a launcher (`ranktune tune --ranks N`)
    /// puts in `RANKTUNE_JOB_ID` for the ranks it starts.
    ///
    /// ```
    /// use ranktune_core::job::JobId;
    /// let (a, b) = (JobId::fresh(), JobId::fresh());
    /// assert_ne!(a.value, b.value);
    /// assert!(a.value.starts_with("ranktune-"));
    /// ```
    pub fn fresh() -> JobId {
        let nonce = new_nonce();
        JobId {
            value: format!("ranktune-{}-{}", std::process::id(), &nonce[..16]),
            source: "generated by this launcher",
        }
    }

    /// A directory name for this id: its safe characters (at most 48), then a
    /// hash of the whole id so distinct ids never share a name.
    pub fn dir_name(&self) -> String {
        let safe: String = self
            .value
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() || "-_.".contains(c) { c } else { '_' })
            .take(48)
            .collect();
        format!(
            "job-{}-{:016x}",
            safe.trim_start_matches('.'),
            crate::hash::fnv1a64(self.value.as_bytes())
        )
    }
}

/// A fresh random hex nonce of 32 digits (std's `RandomState` is seeded from
/// the OS): for ids unique to one launch or one rendezvous.
pub fn new_nonce() -> String {
    use std::hash::{BuildHasher, Hasher};
    use std::time::SystemTime;
    let now = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    let mut a = std::collections::hash_map::RandomState::new().build_hasher();
    a.write_u32(std::process::id());
    a.write_u128(now);
    let first = a.finish();
    let mut b = std::collections::hash_map::RandomState::new().build_hasher();
    b.write_u64(first);
    format!("{first:016x}{:016x}", b.finish())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn detect(vars: &[(&str, &str)]) -> Option<JobId> {
        let map: HashMap<String, String> =
            vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        JobId::detect_with(|n| map.get(n).cloned())
    }

    #[test]
    fn each_launcher_gives_an_id() {
        let cases: &[(&[(&str, &str)], &str)] = &[
            (&[("RANKTUNE_JOB_ID", "abc")], "abc"),
            (
                &[("TORCHELASTIC_RUN_ID", "none"), ("MASTER_ADDR", "n1"), ("MASTER_PORT", "29500")],
                "torchelastic-none-n1-29500",
            ),
            (&[("PMIX_NAMESPACE", "prterun-h-12@1")], "pmix-prterun-h-12@1"),
            (&[("OMPI_MCA_ess_base_jobid", "3236233217")], "ompi-3236233217"),
            (&[("OMPI_MCA_orte_ess_jobid", "3236233217")], "ompi-3236233217"),
            (&[("I_MPI_HYDRA_UUID", "9d26-7c26")], "impi-9d26-7c26"),
            (&[("PMI_JOBID", "77.0")], "pmi-77.0"),
            (&[("SLURM_JOB_ID", "77"), ("SLURM_STEP_ID", "2")], "slurm-77.2"),
            (&[("SLURM_JOB_ID", "77")], "slurm-77"),
            (&[("PBS_JOBID", "12.pbs")], "pbs-12.pbs"),
            (&[("LSB_JOBID", "5")], "lsf-5.0"),
        ];
        for (vars, want) in cases {
            assert_eq!(detect(vars).unwrap().value, *want, "{vars:?}");
        }
        assert_eq!(detect(&[]), None);
        assert_eq!(detect(&[("RANKTUNE_JOB_ID", "  ")]), None);
    }

    #[test]
    fn inner_launchers_win_over_the_allocation() {
        let id = detect(&[("SLURM_JOB_ID", "77"), ("PMIX_NAMESPACE", "prterun-x@1")]).unwrap();
        assert_eq!(id.source, "PMIX_NAMESPACE");
        let id = detect(&[("RANKTUNE_JOB_ID", "mine"), ("TORCHELASTIC_RUN_ID", "r")]).unwrap();
        assert_eq!(id.value, "mine");
    }

    #[test]
    fn dir_names_are_safe_and_distinct() {
        let a = JobId { value: "a/b".into(), source: "t" }.dir_name();
        let b = JobId { value: "a_b".into(), source: "t" }.dir_name();
        assert_ne!(a, b);
        assert!(a.starts_with("job-a_b-"), "{a}");
        let long = JobId { value: "../..".repeat(40), source: "t" }.dir_name();
        assert!(!long.contains('/') && !long.starts_with("job-.") && long.len() < 80, "{long}");
    }
}
