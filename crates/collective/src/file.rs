//! Store-based collectives over a directory every rank can see.
//!
//! Works wherever the ranks share a filesystem (one host, or NFS/Lustre/GPFS
//! across hosts) and needs no extra service: the tuner passes the directory
//! of its cache file. Layout under that directory:
//!
//! ```text
//! .ranktune-collective/
//!   job-<id>-<hash>/              one per job id (see [`JobId`])
//!     hello-r<rank>-<nonce>.json  a rank asking to join (gone once it has joined)
//!     welcome.json                rank 0's answer: the session and its members
//!     s-<session>/                one per job run
//!       <seq>-r<rank>.msg         rank's message for call <seq>
//!       <seq>-r<rank>.abandoned   rank gave up waiting on call <seq>
//! ```
//!
//! Every file is written to a temporary name and renamed into place, so a
//! reader sees a whole message or none. Waiting is polling with a short
//! backoff (200 µs doubling to 5 ms), bounded by the call's timeout.
//!
//! **Job runs never mix.** The job id separates jobs running at the same time.
//! A job id reused by a later run (torchrun's default `--rdzv-id none`, a fixed
//! `RANKTUNE_JOB_ID`) is handled by the rendezvous on the first call (the
//! shared protocol, `rendezvous.rs`, over this layout): the hellos are files,
//! rank 0 creates a fresh session directory and names it, with each member's
//! nonce, in `welcome.json`, and a rank joins only a welcome that lists its
//! own nonce, so nothing left by an earlier run is ever read. Rank 0 then
//! deletes the earlier runs' session directories, and whole job directories
//! untouched for a day.
//!
//! **Cleanup.** After completing call `n`, a rank deletes its own messages of
//! earlier calls (safe: see the engine, `engine.rs`); a job leaves behind only its
//! last call's messages, removed by the next run with the same id or after a day.
//!
//! This module owns the directory layout only; the rendezvous is
//! `rendezvous.rs`'s, the message format `message.rs`'s and the call protocol
//! the engine's.

use ranktune_core::atomic_file::{self, Publish, PublishError};
use ranktune_core::error_chain::Chain;
use std::fs;
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use super::engine::{backoff, Engine, Envelope, Transport};
use super::error::CollectiveError;
use super::message;
use super::rendezvous::{self, Listing, MeetingPlace, Member, Posted, MAX_SMALL};
use ranktune_core::job::JobId;

/// Name of the directory, inside the shared directory, that holds all collective files.
pub const NAMESPACE_DIR: &str = ".ranktune-collective";

/// Job directories untouched for this long belong to jobs that are long gone.
const STALE_JOB_AGE: Duration = Duration::from_secs(24 * 3600);

/// Temporary files older than this were left by a writer that died.
const STALE_TMP_AGE: Duration = Duration::from_secs(3600);

/// The message format's name in this transport's files.
const FORMAT: &str = "ranktune-collective";

fn io_err<'a>(
    action: &'static str,
    path: &'a Path,
) -> impl FnOnce(io::Error) -> CollectiveError + 'a {
    move |source| CollectiveError::Io { action, path: path.to_path_buf(), source }
}

pub(crate) fn encode(env: &Envelope, rank: u32, seq: u64) -> Result<Vec<u8>, CollectiveError> {
    message::encode(FORMAT, env, rank, seq)
}

pub(crate) fn decode(
    path: &Path,
    bytes: &[u8],
    rank: u32,
    seq: u64,
) -> Result<Envelope, CollectiveError> {
    message::decode(FORMAT, "name", bytes, rank, seq)
        .map_err(|reason| CollectiveError::Corrupt { path: path.to_path_buf(), reason })
}

/// Reads a file, `None` when it does not exist.
fn read_if_exists(path: &Path) -> Result<Option<Vec<u8>>, CollectiveError> {
    match fs::read(path) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io_err("reading", path)(e)),
    }
}

/// Reads at most `limit` bytes of a file (enough to tell it is too long),
/// `None` when it does not exist.
fn read_at_most(path: &Path, limit: usize) -> Result<Option<Vec<u8>>, CollectiveError> {
    let file = match fs::File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io_err("reading", path)(e)),
    };
    let mut bytes = Vec::new();
    file.take(limit as u64).read_to_end(&mut bytes).map_err(io_err("reading", path))?;
    Ok(Some(bytes))
}

/// Removes a file, ignoring one that is already gone.
fn remove_quietly(path: &Path) {
    if let Err(e) = fs::remove_file(path) {
        if e.kind() != io::ErrorKind::NotFound {
            tracing::debug!("could not remove {}: {e}", path.display());
        }
    }
}

/// Newest modification time of `dir` and its direct children.
fn newest_mtime(dir: &Path) -> Option<SystemTime> {
    let mut newest = fs::metadata(dir).and_then(|m| m.modified()).ok()?;
    for entry in fs::read_dir(dir).ok()?.flatten() {
        if let Ok(t) = entry.metadata().and_then(|m| m.modified()) {
            newest = newest.max(t);
        }
    }
    Some(newest)
}

/// Transport over the shared directory.
pub(crate) struct FileTransport {
    /// This rank's side of the rendezvous.
    member: Member,
    root: PathBuf,
    job_dir: PathBuf,
    /// The session directory, once joined.
    session: Option<PathBuf>,
    /// Calls whose own files may still exist.
    own_seqs: Vec<u64>,
}

impl FileTransport {
    fn hello_name(&self) -> String {
        format!("hello-r{}-{}.json", self.member.rank, self.member.nonce)
    }

    fn msg_path(&self, session: &Path, seq: u64, rank: u32, ext: &str) -> PathBuf {
        session.join(format!("{seq:012}-r{rank}.{ext}"))
    }

    fn session(&self) -> Result<&Path, CollectiveError> {
        self.session.as_deref().ok_or_else(|| {
            CollectiveError::InvalidArgument("collective used before joining its job".into())
        })
    }

    /// Writes `bytes` to `dir/name` atomically (temporary file, then rename;
    /// not durable: these are throwaway rendezvous data, useless after a
    /// crash), creating `dir` if it is missing.
    fn write_atomic(&self, dir: &Path, name: &str, bytes: &[u8]) -> Result<(), CollectiveError> {
        let target = dir.join(name);
        let attempt = || Publish::new(&target).bytes(bytes);
        let mut result = attempt();
        if matches!(&result, Err(PublishError::Io { source, .. }) if source.kind() == io::ErrorKind::NotFound)
        {
            // The directory was removed (e.g. pruned after a day idle): recreate it.
            fs::create_dir_all(dir).map_err(io_err("creating", dir))?;
            result = attempt();
        }
        result.map_err(|e| match e {
            PublishError::Io { source, .. } => io_err("writing", &target)(source),
            other => io_err("writing", &target)(io::Error::other(other.to_string())),
        })
    }

    /// Paths of the hello files currently in the job directory.
    fn hello_paths(&self) -> Result<Vec<PathBuf>, CollectiveError> {
        let mut paths = Vec::new();
        for entry in fs::read_dir(&self.job_dir).map_err(io_err("listing", &self.job_dir))? {
            let entry = entry.map_err(io_err("listing", &self.job_dir))?;
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if name.starts_with("hello-") && name.ends_with(".json") {
                paths.push(entry.path());
            }
        }
        Ok(paths)
    }

    /// Best effort, by rank 0 after a rendezvous: removes earlier runs'
    /// sessions of this job id, and other job directories idle for a day.
    fn prune(&self) {
        let ours = self.session.as_deref();
        let now = SystemTime::now();
        if let Ok(entries) = fs::read_dir(&self.job_dir) {
            for entry in entries.flatten() {
                let path = entry.path();
                let name = entry.file_name();
                let name = name.to_string_lossy();
                // Temporary files of writers killed mid-write (live ones are
                // renamed within microseconds).
                let age = entry.metadata().and_then(|m| m.modified()).ok();
                let old =
                    age.and_then(|t| now.duration_since(t).ok()).is_some_and(|a| a > STALE_TMP_AGE);
                if (atomic_file::is_temp_name(&entry.file_name()) || name.starts_with(".tmp-"))
                    && old
                {
                    remove_quietly(&path);
                }
                if name.starts_with("s-") && Some(path.as_path()) != ours {
                    if let Err(e) = fs::remove_dir_all(&path) {
                        tracing::debug!("could not remove old session {}: {e}", path.display());
                    }
                }
            }
        }
        let Ok(entries) = fs::read_dir(&self.root) else { return };
        for entry in entries.flatten() {
            let path = entry.path();
            if path == self.job_dir || !entry.file_name().to_string_lossy().starts_with("job-") {
                continue;
            }
            let idle = newest_mtime(&path).and_then(|t| now.duration_since(t).ok());
            if idle.is_some_and(|idle| idle > STALE_JOB_AGE) {
                tracing::debug!("removing idle collective directory {}", path.display());
                let _ignored = fs::remove_dir_all(&path);
            }
        }
    }
}

/// The rendezvous's records as files in the job directory.
impl MeetingPlace for FileTransport {
    type Spot = PathBuf;

    fn member(&self) -> &Member {
        &self.member
    }

    fn member_mut(&mut self) -> &mut Member {
        &mut self.member
    }

    fn put_hello(&mut self, bytes: &[u8]) -> Result<(), CollectiveError> {
        let name = self.hello_name();
        if self.job_dir.join(&name).exists() {
            return Ok(());
        }
        self.write_atomic(&self.job_dir, &name, bytes)
    }

    fn list_hellos(&mut self, limit: usize) -> Result<Listing<PathBuf>, CollectiveError> {
        let paths = self.hello_paths()?;
        if paths.len() > limit {
            return Ok(Listing::TooMany(paths.len()));
        }
        let mut posted = Vec::new();
        for path in paths {
            let Some(bytes) = read_at_most(&path, MAX_SMALL + 1)? else { continue };
            posted.push(Posted { at: path, label: String::new(), bytes });
        }
        Ok(Listing::Hellos(posted))
    }

    fn delete_hellos(&mut self) -> Result<(), CollectiveError> {
        for path in self.hello_paths()? {
            remove_quietly(&path);
        }
        Ok(())
    }

    fn delete_hello(&mut self) {
        remove_quietly(&self.job_dir.join(self.hello_name()));
    }

    fn put_welcome(&mut self, session: &str, bytes: &[u8]) -> Result<(), CollectiveError> {
        let session_dir = self.job_dir.join(format!("s-{session}"));
        fs::create_dir_all(&session_dir).map_err(io_err("creating", &session_dir))?;
        self.write_atomic(&self.job_dir, "welcome.json", bytes)
    }

    fn get_welcome(&mut self) -> Result<Option<Vec<u8>>, CollectiveError> {
        read_at_most(&self.welcome_spot(), MAX_SMALL + 1)
    }

    fn hellos_spot(&self) -> PathBuf {
        self.job_dir.clone()
    }

    fn welcome_spot(&self) -> PathBuf {
        self.job_dir.join("welcome.json")
    }

    fn bad_record(&self, at: &PathBuf, reason: String) -> CollectiveError {
        CollectiveError::Corrupt { path: at.clone(), reason }
    }

    fn on(&self) -> String {
        String::new()
    }

    fn pause_joining(&mut self, attempt: u32, deadline: Instant) {
        self.pause(attempt, deadline);
    }
}

impl Transport for FileTransport {
    fn join(&mut self, env: &Envelope, seq: u64, deadline: Instant) -> Result<(), CollectiveError> {
        if self.session.is_some() {
            return Ok(());
        }
        fs::create_dir_all(&self.job_dir).map_err(io_err("creating", &self.job_dir))?;
        let session = rendezvous::join(self, env, seq, deadline)?;
        self.session = Some(self.job_dir.join(format!("s-{session}")));
        tracing::debug!("joined {}", self.describe());
        if self.member.rank == 0 {
            self.prune();
        }
        Ok(())
    }

    fn post(&mut self, seq: u64, env: &Envelope) -> Result<(), CollectiveError> {
        let bytes = encode(env, self.member.rank, seq)?;
        let session = self.session()?.to_path_buf();
        self.own_seqs.push(seq);
        self.write_atomic(&session, &format!("{seq:012}-r{}.msg", self.member.rank), &bytes)
    }

    fn fetch(&mut self, seq: u64, from: u32) -> Result<Option<Envelope>, CollectiveError> {
        let path = self.msg_path(self.session()?, seq, from, "msg");
        match read_if_exists(&path)? {
            Some(bytes) => decode(&path, &bytes, from, seq).map(Some),
            None => Ok(None),
        }
    }

    fn abandon(&mut self, seq: u64) {
        let Ok(session) = self.session().map(Path::to_path_buf) else { return };
        let name = format!("{seq:012}-r{}.abandoned", self.member.rank);
        if let Err(e) = self.write_atomic(&session, &name, b"") {
            tracing::warn!("could not mark call #{seq} abandoned: {}", Chain(&e));
        }
    }

    fn abandoned_by(&mut self, seq: u64) -> Result<Vec<u32>, CollectiveError> {
        let session = self.session()?;
        Ok((0..self.member.world_size)
            .filter(|r| {
                *r != self.member.rank && self.msg_path(session, seq, *r, "abandoned").exists()
            })
            .collect())
    }

    fn cleanup_before(&mut self, seq: u64) {
        let Some(session) = self.session.clone() else { return };
        let rank = self.member.rank;
        for old in self.own_seqs.iter().filter(|s| **s < seq) {
            remove_quietly(&self.msg_path(&session, *old, rank, "msg"));
            remove_quietly(&self.msg_path(&session, *old, rank, "abandoned"));
        }
        self.own_seqs.retain(|s| *s >= seq);
    }

    fn pause(&mut self, attempt: u32, deadline: Instant) {
        let wait = backoff(attempt).min(deadline.saturating_duration_since(Instant::now()));
        std::thread::sleep(wait);
    }

    fn describe(&self) -> String {
        format!(
            "file store {} (job id {:?} from {})",
            self.job_dir.display(),
            self.member.job.value,
            self.member.job.source
        )
    }
}

/// A rank of a job whose ranks exchange messages through a shared directory.
///
/// Its files live in `dir/`[`NAMESPACE_DIR`]`/`, one directory per job id.
/// Creating one touches nothing; the first call joins the job run, bounded by
/// that call's timeout: a rendezvous that keeps apart runs reusing a job id,
/// so nothing an earlier run left is ever read (layout and protocol:
/// `docs/collective.md`).
///
/// ```no_run
/// use std::path::Path;
/// use std::time::Duration;
/// use ranktune_collective::{Collective, FileCollective, JobId};
///
/// let job = JobId::detect().expect("launched by torchrun, mpirun, srun or ranktune");
/// let mut c = FileCollective::new(1, 4, Path::new("/shared/cache-dir"), job).unwrap();
/// let all = c.all_gather("gemm [[64,512]] hit?", &[1], Duration::from_secs(60)).unwrap();
/// assert_eq!(all.len(), 4);
/// ```
pub struct FileCollective(Engine<FileTransport>);

impl FileCollective {
    /// Rank `rank` of `world_size` in the job run `job`, over the shared directory `dir`.
    pub fn new(
        rank: u32,
        world_size: u32,
        dir: &Path,
        job: JobId,
    ) -> Result<FileCollective, CollectiveError> {
        if rank >= world_size {
            return Err(CollectiveError::InvalidArgument(format!(
                "rank {rank} is not below world size {world_size}"
            )));
        }
        let root = dir.join(NAMESPACE_DIR);
        let job_dir = root.join(job.dir_name());
        let transport = FileTransport {
            member: Member::new(rank, world_size, job),
            root,
            job_dir,
            session: None,
            own_seqs: Vec::new(),
        };
        Ok(FileCollective(Engine::new(rank, world_size, transport)))
    }

    /// The directory of this job id's files.
    pub fn job_dir(&self) -> &Path {
        &self.0.transport().job_dir
    }

    /// The directory of this job run's messages, once the first call has joined it.
    pub fn session_dir(&self) -> Option<&Path> {
        self.0.transport().session.as_deref()
    }
}

super::delegate_collective!(FileCollective);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::OpKind;
    use crate::{on_threads, Collective};
    use std::thread;

    const LONG: Duration = Duration::from_secs(30);

    fn job(id: &str) -> JobId {
        JobId { value: id.into(), source: "test" }
    }

    fn group(dir: &Path, id: &str, world: u32) -> Vec<FileCollective> {
        (0..world).map(|r| FileCollective::new(r, world, dir, job(id)).unwrap()).collect()
    }

    #[test]
    fn encode_decode_round_trip_and_corruption() {
        let env = Envelope {
            kind: OpKind::Broadcast,
            tag: "a\nb \"q\"".into(),
            root: Some(1),
            payload: vec![0, 10, 255],
        };
        let bytes = encode(&env, 2, 7).unwrap();
        let p = Path::new("x.msg");
        assert_eq!(decode(p, &bytes, 2, 7).unwrap(), env);
        let err = decode(p, &bytes, 3, 7).unwrap_err();
        assert!(err.to_string().contains("its name says rank 3"), "{err}");
        let err = decode(p, &bytes[..bytes.len() - 1], 2, 7).unwrap_err();
        assert!(err.to_string().contains("2 payload bytes, header says 3"), "{err}");
        assert!(decode(p, b"hello", 2, 7).is_err());
        assert!(decode(p, b"{}\n", 2, 7).is_err());
    }

    #[test]
    fn threads_share_a_directory_and_clean_up() {
        let tmp = tempfile::tempdir().unwrap();
        let handles = group(tmp.path(), "threads", 3);
        let job_dir = handles[0].job_dir().to_path_buf();
        let results = on_threads(handles, |c| {
            let mut out = Vec::new();
            for i in 0..15u32 {
                out.push(c.all_gather("g", &[c.rank() as u8, i as u8], LONG).unwrap());
                let data = (c.rank() == i % 3).then(|| vec![9u8; i as usize]);
                out.push(vec![c.broadcast("b", i % 3, data.as_deref(), LONG).unwrap()]);
            }
            c.barrier("end", LONG).unwrap();
            (out, c.session_dir().map(Path::to_path_buf))
        });
        assert_eq!(results[0].0, results[1].0);
        assert_eq!(results[0].0, results[2].0);
        assert_eq!(results[0].0[2], vec![vec![0, 1], vec![1, 1], vec![2, 1]]);
        let session = results[0].1.clone().unwrap();
        let left: Vec<_> =
            fs::read_dir(&session).unwrap().flatten().map(|e| e.file_name()).collect();
        // Only the last call's three messages remain.
        assert_eq!(left.len(), 3, "{left:?}");
        // Hellos are gone once everybody joined; the welcome stays.
        let top: Vec<_> =
            fs::read_dir(&job_dir).unwrap().flatten().map(|e| e.file_name()).collect();
        assert_eq!(top.len(), 2, "{top:?}");
    }

    #[test]
    fn a_reused_job_id_never_reads_an_earlier_run() {
        let tmp = tempfile::tempdir().unwrap();
        // An earlier run with the same id got as far as call #0 on rank 1 only,
        // and left a hello behind.
        let first = group(tmp.path(), "same", 2);
        on_threads(first, |c| c.all_gather("x", b"old", LONG).unwrap());
        // A rank of a run that died before rank 0 came up posted its hello and left.
        let mut stale = FileCollective::new(1, 2, tmp.path(), job("same")).unwrap();
        let err = stale.barrier("x", Duration::from_millis(50)).unwrap_err();
        assert!(
            matches!(&err, CollectiveError::Timeout { missing, .. } if missing == &[0]),
            "{err}"
        );
        // A new run with the same id sees only its own messages.
        let second = group(tmp.path(), "same", 2);
        let results = on_threads(second, |c| c.all_gather("x", b"new", LONG).unwrap());
        for r in results {
            assert_eq!(r, vec![b"new".to_vec(), b"new".to_vec()]);
        }
        // Only one session directory is left: the earlier run's is gone.
        let job_dir = tmp.path().join(NAMESPACE_DIR).join(job("same").dir_name());
        let sessions = fs::read_dir(job_dir)
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with("s-"))
            .count();
        assert_eq!(sessions, 1);
    }

    #[test]
    fn stale_hellos_of_a_dead_run_do_not_disturb_a_new_one() {
        let tmp = tempfile::tempdir().unwrap();
        // A dead 3-rank run left a hello, and something left a broken one.
        let mut dead = FileCollective::new(2, 3, tmp.path(), job("again")).unwrap();
        assert!(dead.barrier("x", Duration::from_millis(20)).is_err());
        let job_dir = dead.job_dir().to_path_buf();
        fs::write(job_dir.join("hello-r1-broken.json"), b"{").unwrap();
        let mut single = FileCollective::new(0, 1, tmp.path(), job("again")).unwrap();
        single.barrier("b", LONG).unwrap();
        let results = on_threads(group(tmp.path(), "again", 2), |c| c.barrier("b", LONG));
        assert!(results.iter().all(Result::is_ok), "{results:?}");
    }

    #[test]
    fn a_welcome_naming_a_bad_session_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let mut follower = FileCollective::new(1, 2, tmp.path(), job("evil")).unwrap();
        let nonce = follower.0.transport().member.nonce.clone();
        let job_dir = follower.job_dir().to_path_buf();
        fs::create_dir_all(&job_dir).unwrap();
        // Another process wrote a welcome that lists this rank and names a
        // session outside the job directory.
        let welcome = serde_json::json!({
            "session": "../../escaped", "world_size": 2, "members": ["00", nonce],
            "pid": 1, "host": "elsewhere",
        });
        fs::write(job_dir.join("welcome.json"), welcome.to_string()).unwrap();
        let err = follower.barrier("b", Duration::from_secs(5)).unwrap_err();
        assert!(
            matches!(&err, CollectiveError::Corrupt { path, .. } if path.ends_with("welcome.json")),
            "{err}"
        );
        assert!(err.to_string().contains("the session is not a hex nonce"), "{err}");
        assert!(follower.session_dir().is_none());
        assert!(!tmp.path().join("escaped").exists());
    }

    #[test]
    fn world_size_disagreement_is_a_clear_error() {
        let tmp = tempfile::tempdir().unwrap();
        let a = FileCollective::new(0, 2, tmp.path(), job("ws")).unwrap();
        let b = FileCollective::new(1, 3, tmp.path(), job("ws")).unwrap();
        let results = on_threads(vec![a, b], |c| c.barrier("start", Duration::from_secs(3)));
        let err = results[0].as_ref().unwrap_err();
        assert!(err.to_string().contains("says the job has 3 ranks, rank 0 says 2"), "{err}");
        assert!(results[1].is_err());
    }

    #[test]
    fn two_processes_claiming_one_rank_are_a_clear_error() {
        let tmp = tempfile::tempdir().unwrap();
        let mut leader = FileCollective::new(0, 3, tmp.path(), job("dup")).unwrap();
        // Rank 2 comes late, so rank 0 cannot complete the group before it has
        // seen both claimants of rank 1 (detection is best effort by nature).
        let threads: Vec<_> = [(1, 0), (1, 0), (2, 500)]
            .into_iter()
            .map(|(r, delay)| {
                let mut c = FileCollective::new(r, 3, tmp.path(), job("dup")).unwrap();
                thread::spawn(move || {
                    thread::sleep(Duration::from_millis(delay));
                    c.barrier("start", Duration::from_secs(3))
                })
            })
            .collect();
        let err = leader.barrier("start", Duration::from_secs(20)).unwrap_err();
        assert!(err.to_string().contains("rank 1 is claimed by two processes"), "{err}");
        assert!(err.to_string().contains("RANKTUNE_JOB_ID"), "{err}");
        for t in threads {
            assert!(t.join().unwrap().is_err());
        }
    }

    #[test]
    fn idle_job_directories_are_pruned() {
        let tmp = tempfile::tempdir().unwrap();
        let old = tmp.path().join(NAMESPACE_DIR).join("job-old-0000");
        fs::create_dir_all(old.join("s-x")).unwrap();
        fs::write(old.join("welcome.json"), b"{}").unwrap();
        let day_ago = SystemTime::now() - Duration::from_secs(2 * 24 * 3600);
        for p in [old.join("s-x"), old.join("welcome.json"), old.clone()] {
            set_mtime(&p, day_ago);
        }
        let recent = tmp.path().join(NAMESPACE_DIR).join("job-recent-0000");
        fs::create_dir_all(&recent).unwrap();
        let mut single = FileCollective::new(0, 1, tmp.path(), job("new")).unwrap();
        // Temporary files of writers killed long ago (named by
        // atomic_file, and by ranktune before it), and ones being written now.
        let job_dir = single.job_dir().to_path_buf();
        fs::create_dir_all(&job_dir).unwrap();
        let (dead, live) = (
            [".tmp-dead-1", ".welcome.json.tmp-1-0-0"],
            [".tmp-live-1", ".welcome.json.tmp-1-0-1"],
        );
        for name in dead {
            fs::write(job_dir.join(name), b"{").unwrap();
            set_mtime(&job_dir.join(name), day_ago);
        }
        for name in live {
            fs::write(job_dir.join(name), b"{").unwrap();
        }
        single.barrier("b", LONG).unwrap();
        assert!(!old.exists());
        assert!(recent.exists());
        for name in dead {
            assert!(!job_dir.join(name).exists(), "{name}");
        }
        for name in live {
            assert!(job_dir.join(name).exists(), "{name}");
        }
    }

    fn set_mtime(path: &Path, t: SystemTime) {
        let f = fs::File::open(path).unwrap();
        f.set_modified(t).unwrap();
    }
}
