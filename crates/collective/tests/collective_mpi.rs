//! The MPI collective with real processes under `mpirun` (cargo feature `mpi`).
//!
//! `four_ranks_under_mpirun` starts this test binary again with
//! `mpirun --allow-run-as-root --oversubscribe -n 4`, running only the
//! ignored test `mpi_rank_child` in each rank. Each rank picks its collective
//! with `collective::from_env` (which must choose MPI from mpirun's
//! variables), checks every result itself, and prints `mpi rank R ok` at the
//! end; the parent checks the exit status and the four lines. The job is
//! killed if it runs past `JOB_LIMIT`, so a hang fails the test instead of
//! blocking the suite.
#![cfg(feature = "mpi")]

use std::path::PathBuf;
use std::time::{Duration, Instant};

use ranktune_collective as collective;
use ranktune_collective::CollectiveError;
use ranktune_core::rank::{RankInfo, RankOverrides};
use ranktune_testkit::{child_test_args, test_binary, Cli};

/// Success paths on a loaded 2-core machine: generous.
const LONG: Duration = Duration::from_secs(60);
/// Where a timeout is the expected outcome. Ranks 0 to 2 leave the call
/// before it together and start this one at once; it covers one of them
/// stalling for seconds (4 oversubscribed ranks on a loaded 2-core machine).
const SHORT: Duration = Duration::from_secs(8);
/// How long the late rank waits after ranks 0 to 2 have said they gave up on
/// it, for their abandon notices (sent as they gave up) to be delivered.
const AFTER_GIVE_UP: Duration = Duration::from_millis(500);
/// The whole mpirun job must end within this, or it is a hang.
const JOB_LIMIT: Duration = Duration::from_secs(180);
const RANKS: u32 = 4;

#[test]
fn four_ranks_under_mpirun() {
    // Where ranks 0 to 2 tell the late rank that they gave up on it.
    let marks = tempfile::tempdir().unwrap();
    let out = Cli::new("mpirun")
        .args(["--allow-run-as-root", "--oversubscribe", "-n", &RANKS.to_string()])
        .arg(test_binary())
        .args(child_test_args("mpi_rank_child", true))
        .env("RANKTUNE_MPI_TEST_CHILD", "1")
        .env("RANKTUNE_MPI_TEST_MARKS", marks.path())
        .env_remove(["RANKTUNE_COLLECTIVE"])
        // Containers often forbid the cross-process memory copy (ptrace) Open
        // MPI's shared-memory transport uses for large messages; copy through
        // shared buffers instead, which works everywhere.
        .env("OMPI_MCA_btl_vader_single_copy_mechanism", "none")
        // A hang fails the test (the job is killed first) with what it printed.
        .limit(JOB_LIMIT)
        .try_run()
        .unwrap_or_else(|e| panic!("cannot run mpirun ({e}); install Open MPI (openmpi-bin)"));
    assert!(out.status.success(), "mpirun failed: {out}");
    let stdout = out.stdout_text();
    for r in 0..RANKS {
        assert!(stdout.contains(&format!("mpi rank {r} ok")), "rank {r} did not finish\n{out}");
    }
}

/// One rank of the job (run by `four_ranks_under_mpirun` only).
#[test]
#[ignore = "run by four_ranks_under_mpirun, under mpirun"]
fn mpi_rank_child() {
    if std::env::var_os("RANKTUNE_MPI_TEST_CHILD").is_none() {
        return;
    }
    let info = RankInfo::detect(&RankOverrides::default()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut c = collective::from_env(&info, dir.path()).unwrap();
    let (r, w) = (c.rank(), c.world_size());
    assert_eq!((r, w), (info.rank, RANKS), "{}", c.describe());
    assert!(c.describe().contains("MPI"), "auto did not pick MPI: {}", c.describe());
    // The store was not used.
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);

    // Rounds of every call, with payloads of different sizes per rank.
    for i in 0..8u32 {
        let mine = format!("r{r} i{i} {}", ".".repeat(((r + 1) * (i + 1) * 37) as usize));
        let all = c.all_gather(&format!("gather {i}"), mine.as_bytes(), LONG).unwrap();
        let expected: Vec<Vec<u8>> = (0..w)
            .map(|p| format!("r{p} i{i} {}", ".".repeat(((p + 1) * (i + 1) * 37) as usize)))
            .map(String::into_bytes)
            .collect();
        assert_eq!(all, expected, "all_gather round {i}");
        let root = i % w;
        let data = format!("from {root} in {i}");
        let got = c.broadcast(&format!("bcast {i}"), root, Some(data.as_bytes()), LONG).unwrap();
        assert_eq!(got, data.as_bytes(), "broadcast round {i}");
        c.barrier(&format!("sync {i}"), LONG).unwrap();
    }

    // A large payload (beyond MPI's eager limit: the rendezvous protocol).
    let big = vec![r as u8; 1 << 20];
    let all = c.all_gather("big", &big, LONG).unwrap();
    for (p, got) in all.iter().enumerate() {
        assert_eq!((got.len(), got.first()), (1 << 20, Some(&(p as u8))), "big from rank {p}");
    }

    // Divergence: rank 1 asks about another bucket. Every rank errs, nobody hangs.
    let tag = if r == 1 { "softmax [[8,4096]] hit?" } else { "softmax [[16,4096]] hit?" };
    let err = c.all_gather(tag, &[1], LONG).unwrap_err();
    assert!(matches!(err, CollectiveError::Mismatch { .. }), "rank {r}: {err}");
    if r != 1 {
        assert_eq!(err.ranks(), vec![1], "rank {r}: {err}");
    }
    let after = c.all_gather("after mismatch", &[r as u8], LONG).unwrap();
    assert_eq!(after, (0..w).map(|p| vec![p as u8]).collect::<Vec<_>>());

    // A late rank: the others time out naming it, it gets Abandoned, then all
    // recover. Rank 3 comes only once each of the others has given up on it
    // (a file each in a directory the parent shares with the ranks): late for
    // sure, however the processes are scheduled.
    let marks = PathBuf::from(std::env::var_os("RANKTUNE_MPI_TEST_MARKS").unwrap());
    let gave_up = |p: u32| marks.join(format!("rank{p}-gave-up"));
    if r == 3 {
        let deadline = Instant::now() + LONG;
        while !(0..3).all(|p| gave_up(p).exists()) {
            assert!(Instant::now() < deadline, "ranks 0 to 2 never gave up on rank 3");
            std::thread::sleep(Duration::from_millis(20));
        }
        std::thread::sleep(AFTER_GIVE_UP);
        let err = c.barrier("late", LONG).unwrap_err();
        assert!(matches!(err, CollectiveError::Abandoned { .. }), "rank {r}: {err}");
        assert_eq!(err.ranks(), vec![0, 1, 2], "{err}");
    } else {
        let err = c.barrier("late", SHORT).unwrap_err();
        std::fs::write(gave_up(r), b"").unwrap();
        assert!(matches!(err, CollectiveError::Timeout { .. }), "rank {r}: {err}");
        assert_eq!(err.ranks(), vec![3], "{err}");
        assert!(err.to_string().contains("rank(s) [3] did not arrive"), "{err}");
        eprintln!("rank {r} (expected): {err}");
    }
    let got = c.broadcast("recovered", 3, (r == 3).then_some(b"three".as_slice()), LONG).unwrap();
    assert_eq!(got, b"three");
    c.barrier("done", LONG).unwrap();
    println!("mpi rank {r} ok");
}
