//! The file store with real processes: many ranks saving to one file at the
//! same moment, and a writer killed with SIGKILL at random points.
//!
//! Children are this test binary itself, started with `RANKTUNE_TEST_CHILD`
//! set; the `child` test below is their entry point and does nothing when
//! the variable is unset.

use ranktune_cache::{read_cache_file, CacheData, EntryKey, FileStore, Section, Store};
use ranktune_testkit::cache_fixtures::{self as fixtures, tiled_entry as entry};
use ranktune_testkit::{child_test, child_var_parsed, file_names, kill, test_path, LineReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

const CHILD_ENV: &str = "RANKTUNE_TEST_CHILD";

fn key(op: &str, a: u64, b: u64) -> EntryKey {
    fixtures::key(op, &[&[a, b]])
}

/// The entries rank `rank` saves in round `round`, save `save`.
fn batch(rank: u32, round: u64, save: u64, n: u64) -> CacheData {
    let mut d = CacheData::default();
    for i in 0..n {
        d.insert(Section::Rank(rank), key("gemm", round * 1000 + save * 100, i), entry(i));
    }
    // Every rank also adds distinct shared entries.
    d.insert(Section::Shared, key(&format!("shared{rank}"), round, save), entry(rank as u64));
    d
}

fn spawn_child(mode: &str, cache: &Path, extra: &[(&str, String)]) -> Child {
    let mut cmd = child_test(&test_path(module_path!(), "child"), false);
    cmd.env(CHILD_ENV, mode).env("CHILD_CACHE", cache).envs(extra.iter().map(|(k, v)| (k, v)));
    cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::inherit()).spawn().unwrap()
}

/// The save a crashing child announced on `line`, if it is such a line.
fn saved(line: &str) -> Option<u64> {
    line.strip_prefix("saved ").map(|i| i.parse().unwrap())
}

/// Child entry point (a no-op in a normal test run).
#[test]
fn child() {
    let Ok(mode) = std::env::var(CHILD_ENV) else { return };
    let cache: PathBuf = child_var_parsed("CHILD_CACHE");
    let store = FileStore::new(&cache).with_lock_timeout(Duration::from_secs(120));
    let var = child_var_parsed::<u64>;
    match mode.as_str() {
        "burst" => {
            let (rank, round, saves, n) =
                (var("RANK") as u32, var("ROUND"), var("SAVES"), var("N"));
            // Start together: wait for the go file.
            let go: PathBuf = child_var_parsed("GO");
            let deadline = Instant::now() + Duration::from_secs(60);
            while !go.exists() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(1));
            }
            for s in 0..saves {
                store.save(&batch(rank, round, s, n)).unwrap();
            }
        }
        "crash" => {
            // Save forever, announcing every save that returned.
            use std::io::Write;
            let mut out = std::io::stdout();
            for i in 0.. {
                let mut d = CacheData::default();
                for j in 0..5 {
                    d.insert(Section::Rank(1), key("crash", i, j), entry(i));
                }
                store.save(&d).unwrap();
                writeln!(out, "saved {i}").unwrap();
                out.flush().unwrap();
            }
        }
        other => panic!("unknown child mode {other}"),
    }
}

#[test]
fn many_processes_saving_at_once_lose_nothing() {
    const PROCS: u32 = 32;
    const ROUNDS: u64 = 3;
    const SAVES: u64 = 2;
    const N: u64 = 40;
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("tune.json");
    for round in 0..ROUNDS {
        let go = dir.path().join(format!("go{round}"));
        let children: Vec<Child> = (0..PROCS)
            .map(|rank| {
                spawn_child(
                    "burst",
                    &cache,
                    &[
                        ("RANK", rank.to_string()),
                        ("ROUND", round.to_string()),
                        ("SAVES", SAVES.to_string()),
                        ("N", N.to_string()),
                        ("GO", go.display().to_string()),
                    ],
                )
            })
            .collect();
        std::fs::write(&go, b"").unwrap();
        for mut c in children {
            assert!(c.wait().unwrap().success(), "a writer failed");
        }
        // The main file alone holds everything: all spools were folded.
        let main = read_cache_file(&cache).unwrap();
        assert!(main.warnings.is_empty(), "{:?}", main.warnings);
        let mut expected = CacheData::default();
        for r in 0..=round {
            for rank in 0..PROCS {
                for s in 0..SAVES {
                    for (sec, k, e) in batch(rank, r, s, N).iter() {
                        expected.insert(sec, k.clone(), e.clone());
                    }
                }
            }
        }
        assert_eq!(main.data.len(), expected.len(), "round {round}: entries lost");
        for (sec, k, e) in expected.iter() {
            assert_eq!(main.data.get(sec, k), Some(e), "round {round}: {sec} {k} missing");
        }
        // The last fold removed the emptied spool directory.
        assert!(
            !dir.path().join("tune.json.spool").exists(),
            "spool left after round {round}: {:?}",
            std::fs::read_dir(dir.path().join("tune.json.spool")).map(|r| r.count())
        );
        assert_eq!(FileStore::new(&cache).load().unwrap().data, main.data);
    }
    let leftovers: Vec<String> = file_names(dir.path())
        .into_iter()
        .filter(|n| n.contains(".tmp") || n.contains("corrupt"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

/// A cheap random source (the clock's nanoseconds through xorshift).
fn rng() -> impl FnMut(u64) -> u64 {
    let mut s =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_nanos()
            as u64
            | 1;
    move |bound| {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s % bound
    }
}

#[test]
fn writer_killed_at_random_points_never_corrupts_or_loses_returned_saves() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("tune.json");
    // A large enough file that a kill often lands inside a rewrite.
    let mut big = CacheData::default();
    for i in 0..4000 {
        big.insert(Section::Rank(0), key("big", i, 0), entry(i));
    }
    FileStore::new(&cache).save(&big).unwrap();
    let mut rand = rng();
    let mut confirmed = 0;
    let mut kills_mid_run = 0;
    const ROUNDS: usize = 20;
    for round in 0..ROUNDS {
        let mut child = spawn_child("crash", &cache, &[]);
        let lines = LineReader::read(child.stdout.take().unwrap());
        // Let it complete a few saves, then kill it at a random moment.
        let want = 1 + rand(2);
        let mut returned: Vec<u64> = Vec::new();
        while (returned.len() as u64) < want {
            match lines.wait_for(|l| saved(l).is_some(), Duration::from_secs(60)) {
                Ok(line) => returned.extend(saved(&line)),
                Err(_) => panic!("round {round}: the writer made no progress"),
            }
        }
        std::thread::sleep(Duration::from_micros(rand(20_000)));
        let status = kill(&mut child).unwrap();
        kills_mid_run += usize::from(status.code().is_none());
        returned.extend(lines.rest().iter().filter_map(|l| saved(l)));
        // The main file always parses on its own.
        let main = read_cache_file(&cache).unwrap_or_else(|e| panic!("round {round}: {e}"));
        assert!(main.warnings.is_empty(), "{:?}", main.warnings);
        assert_eq!(
            main.data.sections[&Section::Rank(0)].len(),
            4000,
            "round {round}: old entries lost"
        );
        // Every save that returned is there (main file or spool).
        let loaded = FileStore::new(&cache).load().unwrap();
        for &i in &returned {
            for j in 0..5 {
                assert!(
                    loaded.data.get(Section::Rank(1), &key("crash", i, j)).is_some(),
                    "round {round}: save {i} returned but entry {j} is missing"
                );
            }
        }
        confirmed += returned.len();
        // Start the next round from a clean slate for rank 1.
        let keys: Vec<_> = loaded
            .data
            .iter()
            .filter(|(s, _, _)| *s == Section::Rank(1))
            .map(|(s, k, _)| (s, k.clone()))
            .collect();
        FileStore::new(&cache).remove(&keys).unwrap();
    }
    assert_eq!(kills_mid_run, ROUNDS, "every child must have died by the signal");
    assert!(confirmed >= ROUNDS);
    // Nothing is left that a reader could mistake for the cache.
    let names = file_names(dir.path());
    assert!(names.iter().all(|n| !n.contains("corrupt")), "{names:?}");
}
