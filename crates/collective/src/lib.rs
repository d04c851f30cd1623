//! How ranks exchange bytes: all-gather, broadcast and barrier, each bounded by a timeout.
//!
//! ```
//! use std::time::Duration;
//! use ranktune_collective::{Collective, LocalCollective};
//!
//! // Two ranks as two threads of this process; each contributes its rank.
//! let threads: Vec<_> = LocalCollective::group(2)
//!     .unwrap()
//!     .into_iter()
//!     .map(|mut c| {
//!         std::thread::spawn(move || {
//!             c.all_gather("ranks", &[c.rank() as u8], Duration::from_secs(10)).unwrap()
//!         })
//!     })
//!     .collect();
//! for t in threads {
//!     assert_eq!(t.join().unwrap(), vec![vec![0], vec![1]]);
//! }
//! ```
//!
//! The tuning strategies (broadcast, merge, parallel) use a [`Collective`] to
//! agree across ranks. The classic failure of such code is the hang: one rank
//! skips a collective (a cache hit where the others missed), or dies, and the
//! others wait forever. Here:
//!
//! - **every wait is bounded**: a call that does not complete in time returns
//!   [`CollectiveError::Timeout`] naming the call (kind and the caller's tag,
//!   e.g. `gemm [[64,512],[512,512]] hit?`) and the ranks that did not arrive;
//! - **divergence is an error, not a hang**: each call carries a sequence
//!   number; ranks that make different calls at the same number get
//!   [`CollectiveError::Mismatch`] naming both calls;
//! - **outcomes agree**: a rank that arrives after the others gave up gets
//!   [`CollectiveError::Abandoned`] rather than a result its peers never saw.
//!
//! Every call is synchronizing (a broadcast also waits until every rank has
//! arrived), and every call consumes one sequence number on every rank, so the
//! ranks stay aligned after an error and the next matching call works.
//!
//! Implementations:
//!
//! - [`FileCollective`]: store-based, over a directory every rank can see (the
//!   cache file's directory); needs no extra service; job runs never mix.
//! - [`RedisCollective`]: over a Redis server every rank can reach, for
//!   nodes that share no filesystem; keys under a per-job namespace expire.
//! - [`LocalCollective`]: ranks are threads of one process, for unit tests.
//! - [`SingleRank`]: a one-rank job; returns at once.
//! - `MpiCollective` (cargo feature `mpi`): over MPI point-to-point messages,
//!   for jobs launched by `mpirun`/`srun`; the same protocol, same guarantees.
//!
//! [`CollectiveExt`] adds JSON-typed versions of the calls.
//!
//! [`from_env`] picks one from the environment; [`from_env_for_cache`] also
//! picks Redis when the cache itself is on a Redis server. This module never decides
//! what to tune or what the bytes mean: that is the tuner's job.

#![warn(clippy::undocumented_unsafe_blocks)]

mod engine;
mod error;
mod file;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
mod kv;
mod local;
mod message;
#[cfg(feature = "mpi")]
mod mpi;
mod redis;
mod rendezvous;
mod single;
mod typed;

use std::path::Path;
use std::time::Duration;

pub use error::CollectiveError;
pub use file::{FileCollective, NAMESPACE_DIR};
pub use kv::{KeyValue, KvCollective};
pub use local::LocalCollective;
#[cfg(feature = "mpi")]
pub use mpi::{MpiCollective, HELLO_TAG as MPI_HELLO_TAG};
/// The job run's id: core's one type ([`ranktune_core::job::JobId`]).
pub use ranktune_core::job::JobId;
/// The Redis endpoint's URL type, `ranktune-redis`'s (the same as the
/// cache store's); its settings and their variables are named there only.
pub use ranktune_redis::RedisUrl;
use ranktune_redis::{is_redis_url, redact_text};
pub use redis::{RedisCollective, MAX_MESSAGE as REDIS_MAX_MESSAGE};
pub use single::SingleRank;
pub use typed::CollectiveExt;

use ranktune_core::rank::{RankInfo, RankSource};

/// Exchange of bytes between the ranks of one job.
///
/// Every rank must make the same calls, with the same tags, in the same order.
/// Tags are free text that names the call for error messages; put the op and
/// bucket in them.
pub trait Collective: Send {
    /// This process's rank, `0..world_size`.
    fn rank(&self) -> u32;

    /// Number of ranks in the job.
    fn world_size(&self) -> u32;

    /// Every rank contributes bytes; every rank receives all contributions in rank order.
    fn all_gather(
        &mut self,
        tag: &str,
        data: &[u8],
        timeout: Duration,
    ) -> Result<Vec<Vec<u8>>, CollectiveError>;

    /// Rank `root` passes `Some(bytes)`; every rank (the root too) receives them.
    /// Other ranks pass `None` (anything they pass is ignored).
    fn broadcast(
        &mut self,
        tag: &str,
        root: u32,
        data: Option<&[u8]>,
        timeout: Duration,
    ) -> Result<Vec<u8>, CollectiveError>;

    /// Returns once every rank has called it.
    fn barrier(&mut self, tag: &str, timeout: Duration) -> Result<(), CollectiveError>;

    /// What this is, for logs and reports (implementation, rank, job).
    fn describe(&self) -> String {
        format!("rank {} of {}", self.rank(), self.world_size())
    }
}

/// Implements [`Collective`] for a newtype around an `Engine` by delegation.
macro_rules! delegate_collective {
    ($ty:ty) => {
        impl $crate::Collective for $ty {
            fn rank(&self) -> u32 {
                self.0.rank()
            }
            fn world_size(&self) -> u32 {
                self.0.world_size()
            }
            fn all_gather(
                &mut self,
                tag: &str,
                data: &[u8],
                timeout: std::time::Duration,
            ) -> Result<Vec<Vec<u8>>, $crate::CollectiveError> {
                self.0.all_gather(tag, data, timeout)
            }
            fn broadcast(
                &mut self,
                tag: &str,
                root: u32,
                data: Option<&[u8]>,
                timeout: std::time::Duration,
            ) -> Result<Vec<u8>, $crate::CollectiveError> {
                self.0.broadcast(tag, root, data, timeout)
            }
            fn barrier(
                &mut self,
                tag: &str,
                timeout: std::time::Duration,
            ) -> Result<(), $crate::CollectiveError> {
                self.0.barrier(tag, timeout)
            }
            fn describe(&self) -> String {
                self.0.describe()
            }
        }
    };
}
pub(crate) use delegate_collective;

/// The variable naming the directory where a file-store collective meets,
/// instead of the cache file's directory. `ranktune tune --ranks N` sets it
/// to a private per-job directory; a job over several hosts sets it to a
/// directory they all see.
pub const COLLECTIVE_DIR_ENV: &str = "RANKTUNE_COLLECTIVE_DIR";

/// Which implementation to use; `RANKTUNE_COLLECTIVE` names it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CollectiveChoice {
    /// `auto` (or unset): one rank → [`SingleRank`]; launched by an MPI
    /// launcher in a build with the `mpi` feature → MPI; a cache on a Redis
    /// server ([`from_env_for_cache`]) → [`RedisCollective`] on that server;
    /// otherwise [`FileCollective`].
    Auto,
    /// `file` (alias `store`): [`FileCollective`].
    File,
    /// `single` (alias `local`): [`SingleRank`]; only for a one-rank job.
    Single,
    /// `mpi`: MPI (`MpiCollective`); an error in a build without the `mpi` feature.
    Mpi,
    /// `redis://…` or `rediss://…` (the URL itself): [`RedisCollective`] on
    /// that server. `name` is the URL as given with its password hidden, for
    /// messages.
    Redis {
        /// The server.
        url: RedisUrl,
        /// How messages name it.
        name: String,
    },
}

/// The variable that names the collective implementation ([`CollectiveChoice`]).
pub const COLLECTIVE_ENV: &str = "RANKTUNE_COLLECTIVE";

impl CollectiveChoice {
    /// The choice `RANKTUNE_COLLECTIVE` makes in the environment `env`
    /// (unset: `auto`); a value that names none is an error.
    pub fn from_env_with(
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<CollectiveChoice, CollectiveError> {
        CollectiveChoice::parse(&env(COLLECTIVE_ENV).unwrap_or_default())
    }

    /// The implementation's name, as `RANKTUNE_COLLECTIVE` spells it
    /// (`redis` for a server's URL).
    pub fn name(&self) -> &'static str {
        match self {
            CollectiveChoice::Auto => "auto",
            CollectiveChoice::File => "file",
            CollectiveChoice::Single => "single",
            CollectiveChoice::Mpi => "mpi",
            CollectiveChoice::Redis { .. } => "redis",
        }
    }

    /// Parses a `RANKTUNE_COLLECTIVE` value (case-insensitive; blank means `auto`).
    pub fn parse(value: &str) -> Result<CollectiveChoice, CollectiveError> {
        if is_redis_url(value) {
            let name = redact_text(value.trim());
            return match RedisUrl::parse(value.trim()) {
                Ok(url) => Ok(CollectiveChoice::Redis { url, name }),
                Err(e) => Err(redis::bad_url(&name, e)),
            };
        }
        match value.trim().to_ascii_lowercase().as_str() {
            "" | "auto" => Ok(CollectiveChoice::Auto),
            "file" | "store" => Ok(CollectiveChoice::File),
            "single" | "local" => Ok(CollectiveChoice::Single),
            "mpi" => Ok(CollectiveChoice::Mpi),
            _ => Err(CollectiveError::Unsupported {
                value: value.into(),
                reason: "unknown implementation; use auto, file, single, mpi or a \
                         redis://host[:port][/db] URL"
                    .into(),
            }),
        }
    }
}

/// Picks a collective for this rank from the environment: `RANKTUNE_COLLECTIVE`
/// (see [`CollectiveChoice`]), the job id for the store ([`JobId`]), and `rank`.
/// `dir` is the shared directory for the store (the cache file's directory).
///
/// A one-rank job gets [`SingleRank`]. More ranks started by an MPI launcher
/// (`OMPI_COMM_WORLD_SIZE`, `PMI_SIZE` or `PMIX_RANK` is set) get MPI when the
/// `mpi` feature is built and the ranks come from that launcher (not from
/// `RANKTUNE_*` or explicit settings). Other jobs get a [`FileCollective`], which needs a
/// job id: without one this is [`CollectiveError::NoJobId`].
///
/// Create one collective per process and keep it for the whole job (pass it
/// by `&mut`): each new store-based instance starts a new run of the job, so
/// every rank must create its instances in the same order, and two live
/// instances of one rank are two processes claiming the same rank.
pub fn from_env(rank: &RankInfo, dir: &Path) -> Result<Box<dyn Collective>, CollectiveError> {
    // Non-UTF-8 values are read lossily: the same bytes give the same id on every rank.
    from_env_with(rank, dir, |name| {
        std::env::var_os(name).map(|v| v.to_string_lossy().into_owned())
    })
}

/// Like [`from_env`], reading variables through `env` (for tests and embedding).
pub fn from_env_with(
    rank: &RankInfo,
    dir: &Path,
    env: impl Fn(&str) -> Option<String>,
) -> Result<Box<dyn Collective>, CollectiveError> {
    pick(rank, dir, None, env)
}

/// Where a job's cache lives, for [`from_env_for_cache`]: a file, or a Redis
/// server (the parsed URL; no URL travels as a path).
#[derive(Clone, Copy, Debug)]
pub enum CacheAt<'a> {
    /// A cache file: the ranks meet in its directory.
    File(&'a Path),
    /// A cache on a Redis server: the ranks may meet there too.
    Redis(&'a RedisUrl),
}

/// Picks a collective for a job whose cache is at `cache`: a file (the
/// ranks meet in its directory, as in [`from_env`]) or a Redis server. With `RANKTUNE_COLLECTIVE` unset or `auto`, a cache on
/// a Redis server makes the ranks meet on that server too ([`RedisCollective`],
/// under the URL's `?prefix=`), unless the job has one rank or MPI is chosen
/// (see [`CollectiveChoice::Auto`]); an explicit `RANKTUNE_COLLECTIVE` always wins.
pub fn from_env_for_cache(
    rank: &RankInfo,
    cache: CacheAt<'_>,
) -> Result<Box<dyn Collective>, CollectiveError> {
    from_env_for_cache_with(rank, cache, |name| {
        std::env::var_os(name).map(|v| v.to_string_lossy().into_owned())
    })
}

/// Like [`from_env_for_cache`], reading variables through `env`.
pub fn from_env_for_cache_with(
    rank: &RankInfo,
    cache: CacheAt<'_>,
    env: impl Fn(&str) -> Option<String>,
) -> Result<Box<dyn Collective>, CollectiveError> {
    match cache {
        CacheAt::Redis(url) => pick(rank, Path::new("."), Some(url), env),
        CacheAt::File(cache) => {
            let dir =
                cache.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
            pick(rank, dir, None, env)
        }
    }
}

/// The choice rule of [`from_env_with`] and [`from_env_for_cache_with`];
/// `cache_url` is the cache's Redis server, if it is on one.
fn pick(
    rank: &RankInfo,
    dir: &Path,
    cache_url: Option<&RedisUrl>,
    env: impl Fn(&str) -> Option<String>,
) -> Result<Box<dyn Collective>, CollectiveError> {
    let requested = env(COLLECTIVE_ENV).unwrap_or_default();
    let choice = CollectiveChoice::parse(&requested)?;
    let world = rank.world_size;
    let choice = match (choice, cache_url) {
        (CollectiveChoice::Auto, _)
            if world > 1 && cfg!(feature = "mpi") && mpi_launch(rank, &env) =>
        {
            CollectiveChoice::Mpi
        }
        (CollectiveChoice::Auto, Some(url)) if world > 1 => {
            CollectiveChoice::Redis { url: url.clone(), name: url.to_string() }
        }
        (other, _) => other,
    };
    match choice {
        CollectiveChoice::Redis { url, name } => {
            let job = job_for(rank, &env, || name.clone())?;
            let c = RedisCollective::connect_named(rank.rank, world, &url, name, job, &env)?;
            tracing::debug!("collective: {}", c.describe());
            Ok(Box::new(c))
        }
        CollectiveChoice::Mpi => mpi_collective(rank, &requested),
        CollectiveChoice::Auto if world == 1 => Ok(Box::new(SingleRank)),
        CollectiveChoice::Single if world == 1 => Ok(Box::new(SingleRank)),
        CollectiveChoice::Single => Err(CollectiveError::Unsupported {
            value: requested,
            reason: format!(
                "this job has {world} ranks, and `single` serves one; ranks that are threads of \
                 one process use LocalCollective::group; processes use `file` (the default)"
            ),
        }),
        CollectiveChoice::Auto | CollectiveChoice::File => {
            // An explicit meeting place wins over the cache's directory
            // (`ranktune tune --ranks N` gives its ranks a private one).
            let explicit = env(COLLECTIVE_DIR_ENV).filter(|d| !d.trim().is_empty());
            let dir = explicit.as_deref().map_or(dir, Path::new);
            let job = job_for(rank, &env, || dir.display().to_string())?;
            tracing::debug!("collective: file store in {} for job {:?}", dir.display(), job.value);
            Ok(Box::new(FileCollective::new(rank.rank, world, dir, job)?))
        }
    }
}

/// The job id from the environment; a one-rank job gets one of its own.
/// `place` names where the ranks meet, for the error when there is none.
fn job_for(
    rank: &RankInfo,
    env: &impl Fn(&str) -> Option<String>,
    place: impl FnOnce() -> String,
) -> Result<JobId, CollectiveError> {
    match JobId::detect_with(env) {
        Some(job) => Ok(job),
        None if rank.world_size == 1 => Ok(JobId {
            value: format!("single-{}", std::process::id()),
            source: "this process (one rank)",
        }),
        None => Err(CollectiveError::NoJobId { world_size: rank.world_size, place: place() }),
    }
}

/// Whether an MPI launcher (mpirun, srun with PMI/PMIx) started this process.
fn launched_by_mpi(env: &impl Fn(&str) -> Option<String>) -> bool {
    ["OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"].iter().any(|v| env(v).is_some())
}

/// Whether MPI's ranks are this job's ranks: an MPI launcher started this
/// process and the ranks were not set by ranktune's own launcher or
/// explicitly (children of `ranktune tune --ranks N` run inside an `mpirun`
/// inherit its variables, but are not MPI ranks).
fn mpi_launch(rank: &RankInfo, env: &impl Fn(&str) -> Option<String>) -> bool {
    !matches!(rank.source, RankSource::Ranktune | RankSource::Explicit) && launched_by_mpi(env)
}

#[cfg(feature = "mpi")]
fn mpi_collective(
    rank: &RankInfo,
    _requested: &str,
) -> Result<Box<dyn Collective>, CollectiveError> {
    let comm = MpiCollective::new()?;
    if (comm.rank(), comm.world_size()) != (rank.rank, rank.world_size) {
        return Err(CollectiveError::Rendezvous {
            reason: format!(
                "MPI says this is rank {} of {}, but the environment says rank {} of {} (from {}); \
                 launch the job with mpirun/srun alone, or unset the conflicting rank variables",
                comm.rank(),
                comm.world_size(),
                rank.rank,
                rank.world_size,
                rank.source
            ),
        });
    }
    tracing::debug!("collective: {}", comm.describe());
    Ok(Box::new(comm))
}

#[cfg(not(feature = "mpi"))]
fn mpi_collective(_: &RankInfo, requested: &str) -> Result<Box<dyn Collective>, CollectiveError> {
    Err(CollectiveError::Unsupported {
        value: requested.into(),
        reason: "this build has no MPI support (rebuild with `cargo build --features mpi`, which \
                 needs an MPI library and libclang); or use RANKTUNE_COLLECTIVE=file, which works \
                 under mpirun too"
            .into(),
    })
}

/// Runs `f` on every handle of a group, one thread each (what ranks in
/// separate processes do); the results in rank order. For the transports'
/// unit tests.
#[cfg(test)]
pub(crate) fn on_threads<C: Collective + 'static, R: Send + 'static>(
    handles: Vec<C>,
    f: impl Fn(&mut C) -> R + Send + Sync + 'static,
) -> Vec<R> {
    let f = std::sync::Arc::new(f);
    let threads: Vec<_> = handles
        .into_iter()
        .map(|mut c| {
            let f = std::sync::Arc::clone(&f);
            std::thread::spawn(move || f(&mut c))
        })
        .collect();
    threads.into_iter().map(|t| t.join().unwrap()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn info(rank: u32, world_size: u32) -> RankInfo {
        RankInfo { rank, world_size, local_rank: rank, source: RankSource::Explicit }
    }

    fn pick(r: RankInfo, vars: &[(&str, &str)]) -> Result<Box<dyn Collective>, CollectiveError> {
        let map: HashMap<String, String> =
            vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        from_env_with(&r, Path::new("/nonexistent/shared"), |n| map.get(n).cloned())
    }

    #[test]
    fn one_rank_gets_the_trivial_implementation() {
        let c = pick(info(0, 1), &[]).unwrap();
        assert!(c.describe().contains("single rank"), "{}", c.describe());
        let c = pick(info(0, 1), &[("RANKTUNE_COLLECTIVE", "local")]).unwrap();
        assert_eq!(c.world_size(), 1);
        // Forcing the store works for one rank too, without a job id.
        let c = pick(info(0, 1), &[("RANKTUNE_COLLECTIVE", "FILE")]).unwrap();
        assert!(c.describe().contains("file store"), "{}", c.describe());
    }

    #[test]
    fn several_ranks_get_the_store_with_the_job_id() {
        let c = pick(info(2, 4), &[("RANKTUNE_JOB_ID", "j1")]).unwrap();
        assert_eq!((c.rank(), c.world_size()), (2, 4));
        assert!(c.describe().contains("\"j1\" from RANKTUNE_JOB_ID"), "{}", c.describe());
        let c = pick(info(1, 2), &[("SLURM_JOB_ID", "9"), ("SLURM_STEP_ID", "0")]).unwrap();
        assert!(c.describe().contains("slurm-9.0"), "{}", c.describe());
    }

    #[cfg(not(feature = "mpi"))]
    #[test]
    fn without_the_feature_an_mpi_launch_gets_the_store() {
        let vars = [("OMPI_COMM_WORLD_SIZE", "2"), ("OMPI_MCA_ess_base_jobid", "77")];
        let c = pick(RankInfo { source: RankSource::OpenMpi, ..info(1, 2) }, &vars).unwrap();
        assert!(c.describe().contains("file store"), "{}", c.describe());
    }

    #[test]
    fn ranks_set_by_ranktune_inside_mpirun_get_the_store() {
        let vars = [("OMPI_COMM_WORLD_SIZE", "1"), ("RANKTUNE_JOB_ID", "j2")];
        for source in [RankSource::Ranktune, RankSource::Explicit] {
            let c = pick(RankInfo { source, ..info(1, 4) }, &vars).unwrap();
            assert!(c.describe().contains("file store"), "{}", c.describe());
        }
    }

    #[test]
    fn mpi_launchers_are_recognized() {
        for var in ["OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"] {
            assert!(launched_by_mpi(&|n: &str| (n == var).then(|| "4".to_string())), "{var}");
        }
        assert!(!launched_by_mpi(&|n: &str| (n == "RANK").then(|| "1".to_string())));
    }

    #[test]
    fn several_ranks_without_a_job_id_is_a_clear_error() {
        let err = pick(info(0, 2), &[]).err().unwrap();
        assert!(matches!(err, CollectiveError::NoJobId { world_size: 2, .. }), "{err}");
        assert!(err.to_string().contains("set RANKTUNE_JOB_ID"), "{err}");
    }

    #[test]
    fn bad_or_unavailable_choices_are_clear_errors() {
        let err = pick(info(0, 2), &[("RANKTUNE_COLLECTIVE", "carrier-pigeon")]).err().unwrap();
        assert!(err.to_string().contains("use auto, file, single, mpi or a redis://"), "{err}");
        #[cfg(not(feature = "mpi"))]
        {
            let err = pick(info(0, 2), &[("RANKTUNE_COLLECTIVE", "mpi")]).err().unwrap();
            assert!(err.to_string().contains("no MPI support"), "{err}");
        }
        let err = pick(info(0, 2), &[("RANKTUNE_COLLECTIVE", "local"), ("RANKTUNE_JOB_ID", "j")])
            .err()
            .unwrap();
        assert!(err.to_string().contains("LocalCollective::group"), "{err}");
    }

    fn for_cache(
        r: RankInfo,
        cache: &str,
        vars: &[(&str, &str)],
    ) -> Result<Box<dyn Collective>, CollectiveError> {
        let map: HashMap<String, String> =
            vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let url = is_redis_url(cache).then(|| RedisUrl::parse(cache).unwrap());
        let at = match &url {
            Some(url) => CacheAt::Redis(url),
            None => CacheAt::File(Path::new(cache)),
        };
        from_env_for_cache_with(&r, at, |n| map.get(n).cloned())
    }

    #[test]
    fn redis_urls_are_a_choice_and_a_cache_on_redis_picks_it() {
        assert_eq!(
            CollectiveChoice::parse(" redis://h:1/0 ").unwrap(),
            CollectiveChoice::Redis {
                url: RedisUrl::parse("redis://h:1/0").unwrap(),
                name: "redis://h:1/0".into()
            }
        );
        // Without a job id: the error names the server, never the password.
        let vars = [("RANKTUNE_COLLECTIVE", "redis://u:hunter2@127.0.0.1:1/0")];
        let err = pick(info(1, 2), &vars).err().unwrap().to_string();
        assert!(err.contains("redis://u:***@127.0.0.1:1/0") && !err.contains("hunter2"), "{err}");
        let err = for_cache(info(1, 2), "redis://:hunter2@127.0.0.1:1/0", &[]).err().unwrap();
        assert!(matches!(err, CollectiveError::NoJobId { .. }), "{err}");
        assert!(!err.to_string().contains("hunter2"), "{err}");
        // One rank needs nobody; an explicit choice wins over the cache's server.
        let c = for_cache(info(0, 1), "redis://127.0.0.1:1/0", &[]).unwrap();
        assert!(c.describe().contains("single rank"), "{}", c.describe());
        let vars = [("RANKTUNE_COLLECTIVE", "file"), ("RANKTUNE_JOB_ID", "j")];
        let c = for_cache(info(1, 2), "redis://127.0.0.1:1/0", &vars).unwrap();
        assert!(c.describe().contains("file store"), "{}", c.describe());
        // A file cache meets in its directory.
        let c =
            for_cache(info(1, 2), "/shared/dir/cache.json", &[("RANKTUNE_JOB_ID", "j")]).unwrap();
        assert!(c.describe().contains("/shared/dir/.ranktune-collective"), "{}", c.describe());
        // An unreachable server is an error at once, naming it.
        let err = for_cache(info(1, 2), "redis://127.0.0.1:1/0", &[("RANKTUNE_JOB_ID", "j")])
            .err()
            .unwrap();
        assert!(
            err.to_string().contains("redis://127.0.0.1:1/0?prefix=ranktune: connecting failed"),
            "{err}"
        );
    }

    #[test]
    fn a_cache_on_a_live_redis_server_meets_there() {
        let Some(server) = ranktune_testkit::redis::RedisServer::start() else { return };
        let url = format!("{}?prefix=teamA", server.url(0));
        let c = for_cache(info(1, 2), &url, &[("RANKTUNE_JOB_ID", "j")]).unwrap();
        assert!(c.describe().contains(&format!("Redis {url}")), "{}", c.describe());
        let c =
            pick(info(1, 2), &[("RANKTUNE_COLLECTIVE", &url), ("RANKTUNE_JOB_ID", "j")]).unwrap();
        assert!(c.describe().contains("Redis"), "{}", c.describe());
    }
}
