//! Which run this process belongs to, and what all ranks of one run agree
//! on without talking to each other: the run's id (from the launcher's
//! environment) and, where a launcher sets it, the run's trace clock base.
//!
//! [`job_id_with`] is the one rule for the id: the store-based collective
//! keeps concurrent jobs apart by it, and the trace recorder writes it into
//! every trace so analysis never mixes files of different runs. The id is
//! the same on every rank of a run and differs between runs started at the
//! same time; some launchers reuse an id for runs one after another (torchrun
//! with `--rdzv-id none`), so it is not unique over time.
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

/// The run's id from the process environment: see [`job_id_with`].
pub fn job_id() -> Option<(String, &'static str)> {
    job_id_with(|name| std::env::var(name).ok())
}

/// The run's id and the variable(s) it came from, reading variables through
/// `env`; `None` when no launcher says.
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
/// let (id, source) = ranktune_core::job::job_id_with(env).unwrap();
/// assert_eq!((id.as_str(), source), ("slurm-4242.3", "SLURM_JOB_ID/SLURM_STEP_ID"));
/// ```
pub fn job_id_with(env: impl Fn(&str) -> Option<String>) -> Option<(String, &'static str)> {
    if let Some(v) = get(&env, "RANKTUNE_JOB_ID") {
        return Some((v, "RANKTUNE_JOB_ID"));
    }
    if let Some(v) = get(&env, "TORCHELASTIC_RUN_ID") {
        let addr = get(&env, "MASTER_ADDR").unwrap_or_default();
        let port = get(&env, "MASTER_PORT").unwrap_or_default();
        return Some((
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
            return Some((format!("{prefix}-{v}"), name));
        }
    }
    if let Some(job) = get(&env, "SLURM_JOB_ID").or_else(|| get(&env, "SLURM_JOBID")) {
        let value = match get(&env, "SLURM_STEP_ID").or_else(|| get(&env, "SLURM_STEPID")) {
            Some(step) => format!("slurm-{job}.{step}"),
            None => format!("slurm-{job}"),
        };
        return Some((value, "SLURM_JOB_ID/SLURM_STEP_ID"));
    }
    if let Some(v) = get(&env, "PBS_JOBID") {
        return Some((format!("pbs-{v}"), "PBS_JOBID"));
    }
    if let Some(v) = get(&env, "LSB_JOBID") {
        let index = get(&env, "LSB_JOBINDEX").unwrap_or_else(|| "0".into());
        return Some((format!("lsf-{v}.{index}"), "LSB_JOBID/LSB_JOBINDEX"));
    }
    None
}
