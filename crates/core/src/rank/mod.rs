//! Who am I: rank, world size and local rank of this process.
//!
//! A multi-rank job is started by a launcher (torchrun, `mpirun`, `srun`, or
//! `ranktune tune --ranks N` itself) that tells each process its place through
//! environment variables. This module reads them, checks them against each
//! other and returns one [`RankInfo`]. It owns nothing else: it never talks to
//! other ranks (that is the `ranktune-collective` crate) and never touches files.
//! It also answers the host's name ([`host_name`]), the other half of "who am I",
//! and names the variables it reads ([`RANKTUNE_VARS`], [`LAUNCHER_VARS`]) for
//! launchers that must clear them.
//!
//! Order of precedence, highest first:
//!
//! 1. explicit settings ([`RankOverrides`], e.g. CLI flags);
//! 2. `RANKTUNE_RANK` / `RANKTUNE_WORLD_SIZE` / `RANKTUNE_LOCAL_RANK`;
//! 3. the per-process launchers: torchrun (`RANK`, `WORLD_SIZE`,
//!    `LOCAL_RANK`), Open MPI (`OMPI_COMM_WORLD_RANK`, `OMPI_COMM_WORLD_SIZE`,
//!    `OMPI_COMM_WORLD_LOCAL_RANK`), MPICH/Hydra (`PMI_RANK`, `PMI_SIZE`,
//!    `MPI_LOCALRANKID`). When more than one of them is present they must
//!    agree, or detection fails: two launchers that disagree mean the job is
//!    misconfigured, and guessing would make two processes write as one rank;
//! 4. Slurm (`SLURM_PROCID`, `SLURM_NTASKS`, `SLURM_LOCALID`), used only when
//!    no per-process launcher is present. Slurm sets these for the whole
//!    batch script too, so `mpirun` or torchrun inside an allocation sees a
//!    Slurm rank that legitimately differs from its own: the inner launcher
//!    wins;
//! 5. otherwise rank 0 of 1.
//!
//! When no local rank is known it equals the rank (one host).
//!
//! ```
//! use ranktune_core::rank::{RankInfo, RankOverrides};
//! let env = |name: &str| match name {
//!     "RANK" => Some("3".to_string()),
//!     "WORLD_SIZE" => Some("8".to_string()),
//!     _ => None,
//! };
//! let info = RankInfo::detect_with(&RankOverrides::default(), env).unwrap();
//! assert_eq!((info.rank, info.world_size), (3, 8));
//! ```

mod sys;

pub use sys::host_name;

use std::fmt;

/// Where a [`RankInfo`] came from, for messages and reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RankSource {
    /// Explicit settings (flags or API).
    Explicit,
    /// `RANKTUNE_*` environment variables.
    Ranktune,
    /// torchrun / torch.distributed.
    Torchrun,
    /// Open MPI's `mpirun`.
    OpenMpi,
    /// MPICH / Intel MPI (Hydra).
    Mpich,
    /// Slurm's `srun`.
    Slurm,
    /// Nothing set: a single process.
    Default,
}

impl fmt::Display for RankSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RankSource::Explicit => "explicit settings",
            RankSource::Ranktune => "RANKTUNE_* variables",
            RankSource::Torchrun => "torchrun (RANK/WORLD_SIZE)",
            RankSource::OpenMpi => "Open MPI (OMPI_COMM_WORLD_*)",
            RankSource::Mpich => "MPICH/Hydra (PMI_*)",
            RankSource::Slurm => "Slurm (SLURM_*)",
            RankSource::Default => "default (single process)",
        })
    }
}

/// This process's place in the job.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RankInfo {
    /// Index of this process, `0..world_size`.
    pub rank: u32,
    /// Number of processes in the job (at least 1).
    pub world_size: u32,
    /// Index of this process among those on the same host.
    pub local_rank: u32,
    /// Which settings decided `rank`.
    pub source: RankSource,
}

/// Explicit settings that win over the environment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RankOverrides {
    /// Rank to use.
    pub rank: Option<u32>,
    /// World size to use.
    pub world_size: Option<u32>,
    /// Local rank to use.
    pub local_rank: Option<u32>,
}

/// Why the rank could not be determined.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum RankError {
    /// A variable is set but is not a non-negative integer.
    #[error(
        "{var}={value:?} is not a non-negative integer; set it to a number such as 0, or unset it"
    )]
    Malformed {
        /// Variable name.
        var: String,
        /// Its value.
        value: String,
    },
    /// A variable holds bytes that are not UTF-8.
    #[error("{var} is not valid UTF-8; set it to a number such as 0, or unset it")]
    NotUnicode {
        /// Variable name.
        var: String,
    },
    /// A rank variable is set without its world-size partner (or vice versa).
    #[error("{present} is set but {missing} is not; a launcher sets both, so set both or neither")]
    Incomplete {
        /// The variable that is set.
        present: String,
        /// The partner that is missing.
        missing: String,
    },
    /// World size of zero.
    #[error("world size 0 (from {from}) is invalid; a job has at least one process")]
    ZeroWorld {
        /// Which settings gave it.
        from: RankSource,
    },
    /// Rank (or local rank) outside the world.
    #[error("{what} {value} is not below world size {world_size} (from {from}); ranks count from 0 to world size - 1")]
    OutOfRange {
        /// "rank" or "local rank".
        what: &'static str,
        /// The bad value.
        value: u32,
        /// The world size it was checked against.
        world_size: u32,
        /// Which settings gave it.
        from: RankSource,
    },
    /// Two launchers' variables disagree.
    #[error("launchers disagree: {a} says rank {ra} of {wa}, {b} says rank {rb} of {wb}; unset the stale variables, or set the rank explicitly: RANKTUNE_RANK and RANKTUNE_WORLD_SIZE (`ranktune tune --rank N --world-size W`)")]
    Disagree {
        /// First launcher.
        a: RankSource,
        /// Its rank.
        ra: u32,
        /// Its world size.
        wa: u32,
        /// Second launcher.
        b: RankSource,
        /// Its rank.
        rb: u32,
        /// Its world size.
        wb: u32,
    },
}

/// One launcher's variable names.
struct Launcher {
    source: RankSource,
    rank: &'static str,
    size: &'static str,
    local: &'static str,
}

const RANKTUNE: Launcher = Launcher {
    source: RankSource::Ranktune,
    rank: "RANKTUNE_RANK",
    size: "RANKTUNE_WORLD_SIZE",
    local: "RANKTUNE_LOCAL_RANK",
};

/// Per-process launchers, checked against each other.
const LAUNCHERS: [Launcher; 3] = [
    Launcher {
        source: RankSource::Torchrun,
        rank: "RANK",
        size: "WORLD_SIZE",
        local: "LOCAL_RANK",
    },
    Launcher {
        source: RankSource::OpenMpi,
        rank: "OMPI_COMM_WORLD_RANK",
        size: "OMPI_COMM_WORLD_SIZE",
        local: "OMPI_COMM_WORLD_LOCAL_RANK",
    },
    Launcher {
        source: RankSource::Mpich,
        rank: "PMI_RANK",
        size: "PMI_SIZE",
        local: "MPI_LOCALRANKID",
    },
];

const SLURM: Launcher = Launcher {
    source: RankSource::Slurm,
    rank: "SLURM_PROCID",
    size: "SLURM_NTASKS",
    local: "SLURM_LOCALID",
};

/// The rank variables of the other launchers (torchrun, Open MPI,
/// MPICH/Hydra, Slurm: rank, world size and local rank of each, in the
/// order of precedence), derived from the table detection reads. A launcher
/// of its own ranks (`ranktune tune --ranks N`) removes them from its ranks'
/// environment, so they cannot name another rank than the `RANKTUNE_*`
/// variables it sets.
pub const LAUNCHER_VARS: [&str; 3 * (LAUNCHERS.len() + 1)] = {
    let mut out = [""; 3 * (LAUNCHERS.len() + 1)];
    let mut i = 0;
    while i <= LAUNCHERS.len() {
        let l = if i < LAUNCHERS.len() { &LAUNCHERS[i] } else { &SLURM };
        out[3 * i] = l.rank;
        out[3 * i + 1] = l.size;
        out[3 * i + 2] = l.local;
        i += 1;
    }
    out
};

/// ranktune's own rank variables (`RANKTUNE_RANK`, `RANKTUNE_WORLD_SIZE`,
/// `RANKTUNE_LOCAL_RANK`), which win over every launcher's.
pub const RANKTUNE_VARS: [&str; 3] = [RANKTUNE.rank, RANKTUNE.size, RANKTUNE.local];

/// What one launcher's variables say (all optional).
#[derive(Clone, Copy, Debug)]
struct Reading {
    source: RankSource,
    rank: Option<u32>,
    size: Option<u32>,
    local: Option<u32>,
}

fn parse_var(env: &impl Fn(&str) -> Option<String>, var: &str) -> Result<Option<u32>, RankError> {
    let Some(value) = env(var) else {
        return Ok(None);
    };
    let trimmed = value.trim();
    if trimmed.is_empty() {
        return Ok(None);
    }
    trimmed
        .parse::<u32>()
        .map(Some)
        .map_err(|_| RankError::Malformed { var: var.to_string(), value })
}

fn read(env: &impl Fn(&str) -> Option<String>, l: &Launcher) -> Result<Option<Reading>, RankError> {
    let rank = parse_var(env, l.rank)?;
    let size = parse_var(env, l.size)?;
    let local = parse_var(env, l.local)?;
    match (rank, size) {
        (None, None) if local.is_none() => Ok(None),
        (None, None) => Ok(Some(Reading { source: l.source, rank, size, local })),
        (Some(_), None) => {
            Err(RankError::Incomplete { present: l.rank.into(), missing: l.size.into() })
        }
        (None, Some(_)) => {
            Err(RankError::Incomplete { present: l.size.into(), missing: l.rank.into() })
        }
        (Some(_), Some(_)) => Ok(Some(Reading { source: l.source, rank, size, local })),
    }
}

/// Reads the process environment, reporting non-UTF-8 values as errors.
fn process_env(name: &str) -> Result<Option<String>, RankError> {
    match std::env::var(name) {
        Ok(v) => Ok(Some(v)),
        Err(std::env::VarError::NotPresent) => Ok(None),
        Err(std::env::VarError::NotUnicode(_)) => Err(RankError::NotUnicode { var: name.into() }),
    }
}

/// Every variable this module reads, for checking non-UTF-8 values up front.
fn all_vars() -> impl Iterator<Item = &'static str> {
    std::iter::once(&RANKTUNE)
        .chain(LAUNCHERS.iter())
        .chain(std::iter::once(&SLURM))
        .flat_map(|l| [l.rank, l.size, l.local])
}

impl RankInfo {
    /// Rank 0 of a 1-process job.
    pub const SINGLE: RankInfo =
        RankInfo { rank: 0, world_size: 1, local_rank: 0, source: RankSource::Default };

    /// Detects this process's rank from `overrides` and the process environment.
    pub fn detect(overrides: &RankOverrides) -> Result<RankInfo, RankError> {
        for var in all_vars() {
            process_env(var)?;
        }
        Self::detect_with(overrides, |name| std::env::var(name).ok())
    }

    /// Like [`RankInfo::detect`], reading variables through `env` (for tests and embedding).
    pub fn detect_with(
        overrides: &RankOverrides,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<RankInfo, RankError> {
        let ours = read(&env, &RANKTUNE)?;
        let mut launchers = Vec::new();
        for l in &LAUNCHERS {
            if let Some(r) = read(&env, l)? {
                if r.rank.is_some() {
                    launchers.push(r);
                }
            }
        }
        // Explicit settings (both of them, or ranktune's own variables)
        // are the way out of launchers that disagree: no check then.
        let settled = (overrides.rank.is_some() && overrides.world_size.is_some())
            || ours.is_some_and(|r| r.rank.is_some());
        for pair in launchers.windows(2).filter(|_| !settled) {
            let (a, b) = (pair[0], pair[1]);
            if a.rank != b.rank || a.size != b.size {
                return Err(RankError::Disagree {
                    a: a.source,
                    ra: a.rank.unwrap_or(0),
                    wa: a.size.unwrap_or(0),
                    b: b.source,
                    rb: b.rank.unwrap_or(0),
                    wb: b.size.unwrap_or(0),
                });
            }
        }
        let slurm = read(&env, &SLURM)?;
        let base = ours
            .filter(|r| r.rank.is_some())
            .or_else(|| launchers.first().copied())
            .or(slurm.filter(|r| r.rank.is_some()));
        // A local rank may come from any reading that has one, in precedence order.
        let local_from_env =
            ours.iter().chain(launchers.iter()).chain(slurm.iter()).find_map(|r| r.local);

        let explicit = overrides.rank.is_some() || overrides.world_size.is_some();
        let source = if explicit {
            RankSource::Explicit
        } else {
            base.map_or(RankSource::Default, |b| b.source)
        };
        let rank = overrides.rank.or(base.and_then(|b| b.rank)).unwrap_or(0);
        let world_size = overrides
            .world_size
            .or(base.and_then(|b| b.size))
            .unwrap_or(if overrides.rank.is_some() { rank.saturating_add(1) } else { 1 });
        let local_rank = overrides.local_rank.or(local_from_env).unwrap_or(rank);

        if world_size == 0 {
            return Err(RankError::ZeroWorld { from: source });
        }
        for (what, value) in [("rank", rank), ("local rank", local_rank)] {
            if value >= world_size {
                return Err(RankError::OutOfRange { what, value, world_size, from: source });
            }
        }
        Ok(RankInfo { rank, world_size, local_rank, source })
    }
}

impl fmt::Display for RankInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "rank {} of {} (local rank {}, from {})",
            self.rank, self.world_size, self.local_rank, self.source
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn detect(vars: &[(&str, &str)]) -> Result<RankInfo, RankError> {
        detect_o(RankOverrides::default(), vars)
    }

    fn detect_o(o: RankOverrides, vars: &[(&str, &str)]) -> Result<RankInfo, RankError> {
        let map: HashMap<String, String> =
            vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        RankInfo::detect_with(&o, |n| map.get(n).cloned())
    }

    #[test]
    fn the_variable_lists_are_every_variable_detection_reads() {
        let asked = std::cell::RefCell::new(Vec::new());
        RankInfo::detect_with(&RankOverrides::default(), |name| {
            asked.borrow_mut().push(name.to_string());
            None
        })
        .unwrap();
        let mut asked = asked.into_inner();
        asked.sort();
        asked.dedup();
        let mut listed: Vec<String> =
            RANKTUNE_VARS.iter().chain(&LAUNCHER_VARS).map(|v| v.to_string()).collect();
        listed.sort();
        assert_eq!(listed, asked);
        assert_eq!(all_vars().collect::<Vec<_>>(), [&RANKTUNE_VARS[..], &LAUNCHER_VARS].concat());
        for v in ["RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "MPI_LOCALRANKID", "SLURM_PROCID"] {
            assert!(LAUNCHER_VARS.contains(&v), "{v}");
        }
    }

    #[test]
    fn default_is_single_process() {
        assert_eq!(detect(&[]).unwrap(), RankInfo::SINGLE);
    }

    #[test]
    fn each_launcher_is_read() {
        let cases: &[(&[(&str, &str)], RankSource)] = &[
            (&[("RANK", "2"), ("WORLD_SIZE", "4"), ("LOCAL_RANK", "0")], RankSource::Torchrun),
            (
                &[
                    ("OMPI_COMM_WORLD_RANK", "2"),
                    ("OMPI_COMM_WORLD_SIZE", "4"),
                    ("OMPI_COMM_WORLD_LOCAL_RANK", "0"),
                ],
                RankSource::OpenMpi,
            ),
            (&[("PMI_RANK", "2"), ("PMI_SIZE", "4"), ("MPI_LOCALRANKID", "0")], RankSource::Mpich),
            (
                &[("SLURM_PROCID", "2"), ("SLURM_NTASKS", "4"), ("SLURM_LOCALID", "0")],
                RankSource::Slurm,
            ),
            (
                &[
                    ("RANKTUNE_RANK", "2"),
                    ("RANKTUNE_WORLD_SIZE", "4"),
                    ("RANKTUNE_LOCAL_RANK", "0"),
                ],
                RankSource::Ranktune,
            ),
        ];
        for (vars, source) in cases {
            let info = detect(vars).unwrap();
            assert_eq!(info, RankInfo { rank: 2, world_size: 4, local_rank: 0, source: *source });
        }
    }

    #[test]
    fn local_rank_defaults_to_rank() {
        let info = detect(&[("PMI_RANK", "3"), ("PMI_SIZE", "4")]).unwrap();
        assert_eq!(info.local_rank, 3);
    }

    #[test]
    fn explicit_wins_over_environment() {
        let o = RankOverrides { rank: Some(1), world_size: Some(2), local_rank: None };
        let info = detect_o(o, &[("RANK", "5"), ("WORLD_SIZE", "8")]).unwrap();
        assert_eq!((info.rank, info.world_size, info.source), (1, 2, RankSource::Explicit));
        // An explicit rank alone keeps the launcher's world size.
        let o = RankOverrides { rank: Some(6), ..Default::default() };
        let info = detect_o(o, &[("RANK", "5"), ("WORLD_SIZE", "8")]).unwrap();
        assert_eq!((info.rank, info.world_size), (6, 8));
    }

    #[test]
    fn ranktune_vars_win_over_launchers() {
        let info = detect(&[
            ("RANKTUNE_RANK", "1"),
            ("RANKTUNE_WORLD_SIZE", "2"),
            ("RANK", "5"),
            ("WORLD_SIZE", "8"),
        ])
        .unwrap();
        assert_eq!((info.rank, info.world_size), (1, 2));
    }

    #[test]
    fn inner_launcher_wins_over_slurm_allocation() {
        let info = detect(&[
            ("SLURM_PROCID", "0"),
            ("SLURM_NTASKS", "1"),
            ("OMPI_COMM_WORLD_RANK", "3"),
            ("OMPI_COMM_WORLD_SIZE", "4"),
        ])
        .unwrap();
        assert_eq!((info.rank, info.world_size, info.source), (3, 4, RankSource::OpenMpi));
    }

    #[test]
    fn malformed_values_are_errors_naming_the_variable() {
        for bad in ["x", "-1", "1.5", "99999999999"] {
            let err = detect(&[("RANK", bad), ("WORLD_SIZE", "4")]).unwrap_err();
            assert!(err.to_string().contains("RANK="), "{err}");
        }
        // Blank counts as unset.
        assert_eq!(detect(&[("RANK", " "), ("WORLD_SIZE", "")]).unwrap(), RankInfo::SINGLE);
    }

    #[test]
    fn contradictions_are_errors() {
        let err = detect(&[("RANK", "4"), ("WORLD_SIZE", "4")]).unwrap_err();
        assert!(matches!(err, RankError::OutOfRange { what: "rank", .. }), "{err}");
        let err = detect(&[("RANK", "1"), ("WORLD_SIZE", "4"), ("LOCAL_RANK", "9")]).unwrap_err();
        assert!(matches!(err, RankError::OutOfRange { what: "local rank", .. }), "{err}");
        let err = detect(&[("RANK", "0"), ("WORLD_SIZE", "0")]).unwrap_err();
        assert!(matches!(err, RankError::ZeroWorld { .. }), "{err}");
        let err = detect(&[("RANK", "1")]).unwrap_err();
        assert!(err.to_string().contains("WORLD_SIZE is not"), "{err}");
        let err = detect(&[
            ("RANK", "1"),
            ("WORLD_SIZE", "4"),
            ("OMPI_COMM_WORLD_RANK", "2"),
            ("OMPI_COMM_WORLD_SIZE", "4"),
        ])
        .unwrap_err();
        assert!(matches!(err, RankError::Disagree { .. }), "{err}");
        assert!(err.to_string().contains("launchers disagree"));
        assert!(err.to_string().contains("RANKTUNE_RANK"), "{err}");
    }

    #[test]
    fn explicit_settings_resolve_launchers_that_disagree() {
        let env = [
            ("RANK", "1"),
            ("WORLD_SIZE", "4"),
            ("OMPI_COMM_WORLD_RANK", "2"),
            ("OMPI_COMM_WORLD_SIZE", "4"),
        ];
        let get = |name: &str| env.iter().find(|(k, _)| *k == name).map(|(_, v)| v.to_string());
        let o = RankOverrides { rank: Some(2), world_size: Some(4), local_rank: None };
        let info = RankInfo::detect_with(&o, get).unwrap();
        assert_eq!((info.rank, info.world_size, info.source), (2, 4, RankSource::Explicit));
        // A rank alone is not enough to settle it.
        let o = RankOverrides { rank: Some(2), world_size: None, local_rank: None };
        assert!(RankInfo::detect_with(&o, get).is_err());
        // ranktune's own variables settle it too.
        let mut with_ours = env.to_vec();
        with_ours.extend([("RANKTUNE_RANK", "3"), ("RANKTUNE_WORLD_SIZE", "4")]);
        let get =
            |name: &str| with_ours.iter().find(|(k, _)| *k == name).map(|(_, v)| v.to_string());
        let info = RankInfo::detect_with(&RankOverrides::default(), get).unwrap();
        assert_eq!((info.rank, info.world_size), (3, 4));
    }

    #[test]
    fn agreeing_launchers_are_fine() {
        let info =
            detect(&[("RANK", "2"), ("WORLD_SIZE", "4"), ("PMI_RANK", "2"), ("PMI_SIZE", "4")])
                .unwrap();
        assert_eq!(info.source, RankSource::Torchrun);
    }
}
