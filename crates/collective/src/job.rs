//! Which job run this process belongs to, from the launcher's environment.
//!
//! The store-based collective keeps each job run's messages apart by this id,
//! so two jobs sharing a directory never read each other's messages. The id
//! must be the same on every rank of a job and differ between jobs running at
//! the same time. (Runs that reuse an id one after another are told apart by
//! the store's rendezvous, see [`FileCollective`](crate::FileCollective).)
//! This module only reads variables; it never touches files. The sources and
//! their order are documented on [`JobId`].

/// A job run's id and where it came from.
///
/// Sources, first match wins (inner launchers before schedulers, like
/// [`ranktune_core::rank`]):
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
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobId {
    /// The id, the same on every rank of the job.
    pub value: String,
    /// The variable(s) it came from, for messages.
    pub source: &'static str,
}

/// Reads a variable, treating blank as unset.
fn get(env: &impl Fn(&str) -> Option<String>, name: &str) -> Option<String> {
    env(name).map(|v| v.trim().to_string()).filter(|v| !v.is_empty())
}

impl JobId {
    /// Detects the job id from the process environment.
    pub fn detect() -> Option<JobId> {
        Self::detect_with(|name| std::env::var(name).ok())
    }

    /// Like [`JobId::detect`], reading variables through `env`.
    ///
    /// ```
    /// use ranktune_collective::JobId;
    /// let env = |name: &str| match name {
    ///     "SLURM_JOB_ID" => Some("4242".to_string()),
    ///     "SLURM_STEP_ID" => Some("3".to_string()),
    ///     _ => None,
    /// };
    /// assert_eq!(JobId::detect_with(env).unwrap().value, "slurm-4242.3");
    /// ```
    pub fn detect_with(env: impl Fn(&str) -> Option<String>) -> Option<JobId> {
        let found = |value: String, source| Some(JobId { value, source });
        if let Some(v) = get(&env, "RANKTUNE_JOB_ID") {
            return found(v, "RANKTUNE_JOB_ID");
        }
        if let Some(v) = get(&env, "TORCHELASTIC_RUN_ID") {
            let addr = get(&env, "MASTER_ADDR").unwrap_or_default();
            let port = get(&env, "MASTER_PORT").unwrap_or_default();
            return found(
                format!("torchelastic-{v}-{addr}-{port}"),
                "TORCHELASTIC_RUN_ID/MASTER_ADDR/MASTER_PORT",
            );
        }
        for (name, prefix) in [
            ("PMIX_NAMESPACE", "pmix"),
            ("OMPI_MCA_ess_base_jobid", "ompi"),
            ("OMPI_MCA_orte_ess_jobid", "ompi"),
            ("I_MPI_HYDRA_UUID", "impi"),
            ("PMI_JOBID", "pmi"),
        ] {
            if let Some(v) = get(&env, name) {
                return Some(JobId { value: format!("{prefix}-{v}"), source: name });
            }
        }
        if let Some(job) = get(&env, "SLURM_JOB_ID").or_else(|| get(&env, "SLURM_JOBID")) {
            let value = match get(&env, "SLURM_STEP_ID").or_else(|| get(&env, "SLURM_STEPID")) {
                Some(step) => format!("slurm-{job}.{step}"),
                None => format!("slurm-{job}"),
            };
            return found(value, "SLURM_JOB_ID/SLURM_STEP_ID");
        }
        if let Some(v) = get(&env, "PBS_JOBID") {
            return found(format!("pbs-{v}"), "PBS_JOBID");
        }
        if let Some(v) = get(&env, "LSB_JOBID") {
            let index = get(&env, "LSB_JOBINDEX").unwrap_or_else(|| "0".into());
            return found(format!("lsf-{v}.{index}"), "LSB_JOBID/LSB_JOBINDEX");
        }
        None
    }

    /// A new id, unique to this launch: what a launcher (`ranktune tune --ranks N`)
    /// puts in `RANKTUNE_JOB_ID` for the ranks it starts.
    ///
    /// ```
    /// use ranktune_collective::JobId;
    /// let (a, b) = (JobId::fresh(), JobId::fresh());
    /// assert_ne!(a.value, b.value);
    /// assert!(a.value.starts_with("ranktune-"));
    /// ```
    pub fn fresh() -> JobId {
        let nonce = super::file::new_nonce();
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
            ranktune_core::hash::fnv1a64(self.value.as_bytes())
        )
    }
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
