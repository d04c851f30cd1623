//! Scale benchmark of the file store: 64 ranks × 1,000 entries saved at the
//! same moment, against (1) one write of the final merged file and (3) the
//! reference's lock → read → merge → rewrite scheme (bench/reference_save.py),
//! all measured in one run. Verifies that nothing was lost in (2) and (3).
//!
//! Run: `cargo bench --bench cache_scale` (env: RANKTUNE_BENCH_RANKS,
//! RANKTUNE_BENCH_ENTRIES, RANKTUNE_BENCH_REPS, RANKTUNE_BENCH_DIR).
//!
//! Every child process (this binary re-executed, or the Python script) first
//! builds its entries, prints `ready`, and waits for one byte on stdin; the
//! clock starts when the parent sends the bytes and stops when the last
//! child has exited.

use ranktune_cache::{
    read_cache_file, write_cache_file, CacheData, Entry, EntryKey, FileStore, Identity, Section,
    Store,
};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const CHILD_ENV: &str = "RANKTUNE_BENCH_CHILD";

fn env_num(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// The entries rank `rank` saves: about the size of the reference's entries.
fn entries(rank: u32, n: u64, env: &str) -> CacheData {
    let mut d = CacheData::default();
    for i in 0..n {
        let m = 1u64 << (i % 14);
        let key = EntryKey {
            op: "fp8_gemm".into(),
            runner: "CutlassFp8GemmRunner".into(),
            fingerprint: format!("{:016x}", (u64::from(rank) << 32) | i),
            bucket: ranktune_cache::sizes_bucket(&[vec![m, 4096], vec![4096, 4096], vec![4096]]),
        };
        let entry = Entry {
            runner_index: (i % 3) as u32,
            tactic: serde_json::json!({"tile": [128, 256], "cluster": [1, 2], "stages": i % 7}),
            time_us: 12.3 + i as f64 * 1e-3,
            candidates: vec![],
            checksum: "9f86d081884c7d65".into(),
            env: env.into(),
            created_unix: 1_764_480_000,
        };
        d.insert(Section::Rank(rank), key, entry);
    }
    d
}

fn child(rank: &str) {
    if let Ok(filter) = std::env::var("RANKTUNE_LOG") {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
            .with_writer(std::io::stderr)
            .try_init();
    }
    let rank: u32 = rank.parse().unwrap_or(0);
    let cache = PathBuf::from(std::env::var("RANKTUNE_BENCH_CACHE").unwrap_or_default());
    let n = env_num("RANKTUNE_BENCH_ENTRIES", 1000);
    let id = Identity::current();
    let mut data = entries(rank, n, &id.digest());
    data.metadata.environments.insert(id.digest(), id);
    let store = FileStore::new(&cache);
    println!("ready");
    let _ = std::io::stdout().flush();
    let mut go = [0u8; 1];
    let _ = std::io::stdin().read(&mut go);
    if let Err(e) = store.save(&data) {
        eprintln!("rank {rank}: save failed: {e}");
        std::process::exit(1);
    }
}

/// Starts every command, waits until all print `ready`, then releases them
/// at once and times until the last one exits.
fn burst(mut cmds: Vec<Command>) -> Duration {
    let mut children: Vec<_> = cmds
        .iter_mut()
        .map(|c| {
            c.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::inherit()).spawn().unwrap()
        })
        .collect();
    for c in &mut children {
        let mut line = String::new();
        BufReader::new(c.stdout.as_mut().unwrap()).read_line(&mut line).unwrap();
        assert_eq!(line.trim(), "ready", "child did not start");
    }
    let start = Instant::now();
    tracing::debug!("go");
    let mut stdins: Vec<_> = children.iter_mut().map(|c| c.stdin.take().unwrap()).collect();
    for s in &mut stdins {
        s.write_all(b"g").unwrap();
        s.flush().unwrap();
    }
    for c in &mut children {
        assert!(c.wait().unwrap().success(), "a writer failed");
    }
    tracing::debug!("all exited");
    start.elapsed()
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn fresh_dir(base: &Path, name: &str) -> PathBuf {
    let d = base.join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn main() {
    if let Ok(rank) = std::env::var(CHILD_ENV) {
        child(&rank);
        return;
    }
    if let Ok(filter) = std::env::var("RANKTUNE_LOG") {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
            .with_writer(std::io::stderr)
            .try_init();
    }
    let ranks = env_num("RANKTUNE_BENCH_RANKS", 64) as u32;
    let n = env_num("RANKTUNE_BENCH_ENTRIES", 1000);
    let reps = env_num("RANKTUNE_BENCH_REPS", 3).max(1);
    let base = std::env::var("RANKTUNE_BENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("cache_scale"));
    let exe = std::env::current_exe().unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("bench/reference_save.py");
    println!(
        "cache_scale: {ranks} processes x {n} entries, {reps} repetitions, in {}",
        base.display()
    );

    // The final merged content, as every run must end up with.
    let id = Identity::current();
    let mut expected = CacheData::default();
    expected.metadata.environments.insert(id.digest(), id.clone());
    for r in 0..ranks {
        for (s, k, e) in entries(r, n, &id.digest()).iter() {
            expected.insert(s, k.clone(), e.clone());
        }
    }

    // (1) One process writes the final merged file once.
    let mut single = Vec::new();
    let mut single_bytes = 0;
    for rep in 0..reps {
        let dir = fresh_dir(&base, &format!("single{rep}"));
        let path = dir.join("tune.json");
        let t = Instant::now();
        write_cache_file(&path, &expected).unwrap();
        single.push(t.elapsed());
        single_bytes = std::fs::metadata(&path).unwrap().len();
    }

    // (2) All processes save at once through FileStore.
    let mut ours = Vec::new();
    let mut ours_bytes = 0;
    for rep in 0..reps {
        let dir = fresh_dir(&base, &format!("filestore{rep}"));
        let path = dir.join("tune.json");
        let cmds = (0..ranks)
            .map(|r| {
                let mut c = Command::new(&exe);
                c.env(CHILD_ENV, r.to_string())
                    .env("RANKTUNE_BENCH_CACHE", &path)
                    .env("RANKTUNE_BENCH_ENTRIES", n.to_string());
                c
            })
            .collect();
        ours.push(burst(cmds));
        let got = read_cache_file(&path).unwrap();
        assert_eq!(got.data.sections, expected.sections, "FileStore lost or changed entries");
        assert_eq!(FileStore::new(&path).load().unwrap().data.len(), expected.len());
        ours_bytes = std::fs::metadata(&path).unwrap().len();
    }

    // (3) The reference scheme, same protocol.
    let mut reference = Vec::new();
    let mut ref_bytes = 0;
    let ref_reps = env_num("RANKTUNE_BENCH_REF_REPS", 1);
    for rep in 0..ref_reps {
        let dir = fresh_dir(&base, &format!("reference{rep}"));
        let path = dir.join("tune.json");
        let cmds = (0..ranks)
            .map(|r| {
                let mut c = Command::new("python3");
                c.arg(&script).arg(&path).arg(r.to_string()).arg(n.to_string());
                c
            })
            .collect();
        reference.push(burst(cmds));
        let doc: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        for r in 0..ranks {
            let got = doc[format!("rank_{r}")].as_object().map_or(0, |m| m.len());
            assert_eq!(got as u64, n, "reference lost entries of rank {r}");
        }
        ref_bytes = std::fs::metadata(&path).unwrap().len();
    }

    let all = format!(
        "all runs (s): single {:?}, filestore {:?}, reference {:?}",
        secs(&single),
        secs(&ours),
        secs(&reference)
    );
    // RANKTUNE_BENCH_REF_REPS=0: a quick run without the baseline.
    let skipped = reference.is_empty();
    let (s, o) = (median(single), median(ours));
    let r = if skipped { Duration::ZERO } else { median(reference) };
    let mb = |b: u64| b as f64 / 1e6;
    println!();
    println!("| scheme | time | final file |");
    println!("| --- | ---: | ---: |");
    println!(
        "| (1) one write of the final merged file | {:.3} s | {:.1} MB |",
        s.as_secs_f64(),
        mb(single_bytes)
    );
    println!(
        "| (2) FileStore, {ranks} processes x {n} entries at once | {:.3} s | {:.1} MB |",
        o.as_secs_f64(),
        mb(ours_bytes)
    );
    if !skipped {
        println!(
            "| (3) reference lock-read-merge-rewrite, {ranks} x {n} | {:.3} s | {:.1} MB |",
            r.as_secs_f64(),
            mb(ref_bytes)
        );
    }
    println!();
    let r21 = o.as_secs_f64() / s.as_secs_f64();
    println!("(2)/(1) = {r21:.2}  (target <= 3)  {}", if r21 <= 3.0 { "met" } else { "MISSED" });
    if skipped {
        println!("(3) skipped (RANKTUNE_BENCH_REF_REPS=0): no ratio against the reference");
        println!("nothing lost: (2) verified entry by entry");
    } else {
        let r32 = r.as_secs_f64() / o.as_secs_f64();
        let verdict = if r32 >= 20.0 { "met" } else { "MISSED" };
        println!("(3)/(2) = {r32:.1}  (target >= 20)  {verdict}");
        println!("nothing lost: (2) and (3) verified entry by entry / per rank");
    }
    println!("{all}");
}

fn secs(v: &[Duration]) -> Vec<String> {
    v.iter().map(|d| format!("{:.3}", d.as_secs_f64())).collect()
}
