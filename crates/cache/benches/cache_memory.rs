//! Memory and time of a rank's use of a big cache, side by side in one run:
//!
//! 1. **Load time**: a rank's load of its sections (`shared` and `rank_0`)
//!    of a 64-rank × 1,000-entry file — `FileStore::load_sections`, and for
//!    comparison the whole `FileStore::load` — against the reference's
//!    `load_cache` (bench/reference_load.py: exclusive lock on the sidecar,
//!    `json.load` of the whole file, `ast.literal_eval` of every tactic of
//!    `shared` and `rank_0`) on the same entries in its own format.
//! 2. **Peak memory**: on a generated ~100 MB cache of 64 ranks, the peak
//!    RSS (from `wait4`) of a process that loads rank 3's sections and
//!    saves through `FileStore` (this binary re-run): entries into rank 3,
//!    or, as a collective rank does, shared entries that supersede rank
//!    entries (none, or one in every rank's section),
//!    and of `ranktune tune --quick` as one rank of that job for each
//!    binary named in `RANKTUNE_BENCH_TUNE` (`label=path,label=path`, e.g.
//!    an old build and this one), against the target: 64 MiB plus three
//!    times the size of the sections the rank uses.
//!
//! Run: `cargo bench -p ranktune-cache --bench cache_memory` (env:
//! RANKTUNE_BENCH_REPS, RANKTUNE_BENCH_BIG_ENTRIES (per rank, default 4,700
//! ≈ 100 MB), RANKTUNE_BENCH_DIR, RANKTUNE_BENCH_TUNE). Generated files are
//! deleted at the end.

use ranktune_cache::{write_cache_file, CacheData, Entry, EntryKey, FileStore, Section, Store};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

const CHILD_ENV: &str = "RANKTUNE_BENCH_MEMORY_CHILD";

fn env_num(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// Entries like the reference's (and benches/cache_scale.rs's).
fn insert_entries(d: &mut CacheData, section: Section, seed: u64, n: u64, created: u64) {
    for i in 0..n {
        let m = 1u64 << (i % 14);
        let key = EntryKey {
            op: "fp8_gemm".into(),
            runner: "CutlassFp8GemmRunner".into(),
            fingerprint: format!("{:016x}", (seed << 32) | i),
            bucket: ranktune_cache::sizes_bucket(&[vec![m, 4096], vec![4096, 4096], vec![4096]]),
        };
        let entry = Entry {
            runner_index: (i % 3) as u32,
            tactic: serde_json::json!({"tile": [128, 256], "cluster": [1, 2], "stages": i % 7}),
            time_us: 12.3 + i as f64 * 1e-3,
            candidates: vec![],
            checksum: "9f86d081884c7d65".into(),
            env: "e".into(),
            created_unix: created,
        };
        d.insert(section, key, entry);
    }
}

fn make_cache(path: &Path, ranks: u32, n: u64) {
    let mut d = CacheData::default();
    insert_entries(&mut d, Section::Shared, 1 << 20, 16, 1);
    for r in 0..ranks {
        insert_entries(&mut d, Section::Rank(r), u64::from(r), n, 1);
    }
    write_cache_file(path, &d).unwrap();
}

/// Bytes of the sections `names` in a canonical file.
fn section_bytes(path: &Path, names: &[&str]) -> u64 {
    let text = std::fs::read_to_string(path).unwrap();
    names
        .iter()
        .filter_map(|name| {
            let start = text.find(&format!("\n  \"{name}\": ["))?;
            let end = start + text[start..].find("\n  ]")?;
            Some((end - start) as u64)
        })
        .sum()
}

/// Runs `program args` to its end under `/usr/bin/time`, which starts
/// it from a fresh, small process: a child's peak RSS as the kernel reports
/// it also counts the memory of the process that spawned it (the peak is
/// kept across `exec`), and this bench holds big documents. Returns (exit
/// ok, peak RSS in KiB).
fn peak_rss(
    program: &Path,
    args: &[std::ffi::OsString],
    env: Option<(&str, &Path)>,
) -> (bool, u64) {
    let mut cmd = Command::new("/usr/bin/time");
    cmd.arg("-f").arg("peak-rss-kib %M").arg(program).args(args);
    if let Some((k, v)) = env {
        cmd.env(k, v);
    }
    let out = cmd.stdout(std::process::Stdio::null()).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    let kib = err
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix("peak-rss-kib ")?.trim().parse().ok())
        .unwrap_or_else(|| panic!("no peak RSS from /usr/bin/time: {err}"));
    (out.status.success(), kib)
}

/// What the child saves after loading rank 3's sections.
#[derive(Clone, Copy, PartialEq)]
enum Save {
    /// 50 new entries into rank 3 (an independent rank's save).
    Rank,
    /// 50 shared entries of a new op through `save_superseding` (a
    /// collective rank's save that supersedes nothing).
    CollectiveNew,
    /// One shared entry whose bucket every rank has tuned alone (the first
    /// collective save after independent runs: it supersedes an entry in
    /// every rank's section).
    CollectiveEveryRank,
}

impl Save {
    const ALL: [(Save, &'static str); 3] = [
        (Save::Rank, "rank"),
        (Save::CollectiveNew, "collective-new"),
        (Save::CollectiveEveryRank, "collective-every-rank"),
    ];

    fn name(self) -> &'static str {
        Save::ALL.iter().find(|(s, _)| *s == self).map_or("rank", |(_, n)| n)
    }

    fn parse(s: &str) -> Save {
        Save::ALL.iter().find(|(_, n)| *n == s).map_or(Save::Rank, |(s, _)| *s)
    }
}

/// The child (`CHILD_ENV` = `<save>:<path>`): load rank 3's sections, then
/// save as `<save>` says.
fn child(spec: &str) {
    let (save, path) = spec.split_once(':').unwrap();
    let store = FileStore::new(path);
    let loaded = store.load_sections(&[Section::Shared, Section::Rank(3)]).unwrap();
    assert!(loaded.data.len() > 16, "rank 3's sections loaded");
    let mut up = CacheData::default();
    match Save::parse(save) {
        Save::Rank => {
            insert_entries(&mut up, Section::Rank(3), 1 << 30, 50, 2);
            store.save(&up).unwrap();
        }
        Save::CollectiveNew => {
            insert_entries(&mut up, Section::Shared, 1 << 31, 50, 2);
            let keys: Vec<_> = up.iter().map(|(_, k, _)| k.clone()).collect();
            let mut renamed = CacheData::default();
            for k in keys {
                let e = up.get(Section::Shared, &k).unwrap().clone();
                renamed.insert(Section::Shared, EntryKey { op: "moe_gemm".into(), ..k }, e);
            }
            assert_eq!(store.save_superseding(&renamed).unwrap().superseded, 0);
        }
        Save::CollectiveEveryRank => {
            insert_entries(&mut up, Section::Shared, 1 << 31, 1, 2);
            assert!(store.save_superseding(&up).unwrap().superseded >= 64);
        }
    }
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

fn main() {
    if let Ok(path) = std::env::var(CHILD_ENV) {
        child(&path);
        return;
    }
    let reps = env_num("RANKTUNE_BENCH_REPS", 5).max(1) as usize;
    let big_n = env_num("RANKTUNE_BENCH_BIG_ENTRIES", 4700);
    let base = std::env::var("RANKTUNE_BENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("cache_memory"));
    let _ = std::fs::remove_dir_all(&base);
    std::fs::create_dir_all(&base).unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("bench/reference_load.py");

    // 1. Load time.
    let small = base.join("load.json");
    make_cache(&small, 64, 1000);
    let store = FileStore::new(&small);
    let mut sections = Vec::new();
    let mut whole = Vec::new();
    let mut n = 0;
    for _ in 0..reps {
        let t = Instant::now();
        n = store.load_sections(&[Section::Shared, Section::Rank(0)]).unwrap().data.len();
        sections.push(t.elapsed());
    }
    for _ in 0..reps {
        let t = Instant::now();
        let all = store.load().unwrap().data.len();
        whole.push(t.elapsed());
        assert_eq!(all, 64 * 1000 + 16);
    }
    assert_eq!(n, 1016);
    let ref_file = base.join("reference.json");
    let ok = Command::new("python3")
        .arg(&script)
        .args(["make", ref_file.to_str().unwrap(), "64", "1000"])
        .status()
        .unwrap()
        .success();
    assert!(ok, "reference_load.py make failed");
    let out = Command::new("python3")
        .arg(&script)
        .args(["load", ref_file.to_str().unwrap(), "0", &reps.to_string()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["entries"], 1016);
    let reference = median(
        v["seconds"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| Duration::from_secs_f64(s.as_f64().unwrap()))
            .collect(),
    );
    let (ms, mw) = (median(sections), median(whole));
    println!(
        "load of one rank's sections, 64 ranks x 1,000 entries ({} MB ours, {} MB reference), median of {reps}:",
        std::fs::metadata(&small).unwrap().len() / 1_000_000,
        std::fs::metadata(&ref_file).unwrap().len() / 1_000_000
    );
    println!("  reference load_cache (python)   {:>9.1} ms   1.00", reference.as_secs_f64() * 1e3);
    for (what, t) in [("FileStore::load_sections", ms), ("FileStore::load (whole)", mw)] {
        println!(
            "  {what:<31} {:>9.1} ms   {:.3} of the reference",
            t.as_secs_f64() * 1e3,
            t.as_secs_f64() / reference.as_secs_f64()
        );
    }
    let _ = std::fs::remove_file(&ref_file);

    // 2. Peak memory on a ~100 MB file.
    let big = base.join("big.json");
    make_cache(&big, 64, big_n);
    let size = std::fs::metadata(&big).unwrap().len();
    let used = section_bytes(&big, &["shared", "rank_3"]);
    let bound_kib = 64 * 1024 + 3 * used / 1024;
    println!(
        "peak RSS of one rank (rank 3 of 64) loading and saving a {:.1} MB cache; its sections are \
         {:.2} MB, so the target is 64 MiB + 3 x that = {:.1} MiB:",
        size as f64 / 1e6,
        used as f64 / 1e6,
        mib(bound_kib)
    );
    let exe = std::env::current_exe().unwrap();
    let copy = base.join("run.json");
    type Run = (String, PathBuf, Vec<std::ffi::OsString>, bool);
    let mut runs: Vec<Run> = vec![
        ("FileStore load_sections + save".into(), exe.clone(), vec!["rank".into()], true),
        (
            "… + collective save, supersedes nothing".into(),
            exe.clone(),
            vec![Save::CollectiveNew.name().into()],
            true,
        ),
        (
            "… + collective save, supersedes in every rank".into(),
            exe.clone(),
            vec![Save::CollectiveEveryRank.name().into()],
            true,
        ),
    ];
    for spec in std::env::var("RANKTUNE_BENCH_TUNE").unwrap_or_default().split(',') {
        let Some((label, bin)) = spec.split_once('=') else { continue };
        let args = ["tune", "--quick", "--strategy", "independent", "--rank", "3"]
            .iter()
            .map(|s| std::ffi::OsString::from(*s))
            .chain(["--world-size".into(), "64".into(), "--cache".into(), copy.clone().into()])
            .collect();
        runs.push((format!("ranktune tune --quick ({label})"), PathBuf::from(bin), args, false));
    }
    for (label, program, args, is_child) in runs {
        std::fs::copy(&big, &copy).unwrap();
        let t = Instant::now();
        // A child's one argument is its save; it gets it with the path.
        let (ok, kib) = if is_child {
            let mut spec = args[0].clone();
            spec.push(":");
            spec.push(&copy);
            peak_rss(&program, &[], Some((CHILD_ENV, Path::new(&spec))))
        } else {
            peak_rss(&program, &args, None)
        };
        let took = t.elapsed();
        let after = FileStore::new(&copy).load().unwrap();
        let removes = is_child && args[0] == Save::CollectiveEveryRank.name();
        let kept = after.data.len() as u64 + if removes { 64 * big_n.div_ceil(14) } else { 0 };
        assert!(kept >= 64 * big_n + 16, "{label}: entries lost");
        println!(
            "  {label:<44} {:>8.1} MiB  {:>5.2}x the target  {}  ({:.2} s)",
            mib(kib),
            kib as f64 / bound_kib as f64,
            if ok { "ok" } else { "FAILED" },
            took.as_secs_f64()
        );
    }
    let _ = std::fs::remove_dir_all(&base);
}
