//! Throughput and memory of `ranktune trace merge` and `trace summary`
//! against a Python json.load-remap-json.dump merge of the same files
//! (bench/python_merge.py), side by side in one run.
//!
//! Generates Kineto-shaped traces into a temporary directory (never
//! committed): RANKTUNE_BENCH_RANKS ranks (default 4) of about
//! RANKTUNE_BENCH_MB megabytes each (default 100). Wall time is measured
//! around each child process, peak RSS with `/usr/bin/time -f %M`.
//! RANKTUNE_BENCH_NO_PYTHON=1 skips the baseline. RANKTUNE_BENCH_DIR=DIR
//! writes the inputs there (and reuses them when present) instead of a
//! temporary directory.
//!
//! Run: `cargo bench --bench trace_merge`
use ranktune_testkit::synth::{self, JobSpec, Shape};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

struct Run {
    name: String,
    secs: f64,
    rss_mib: Option<f64>,
    cpu_secs: Option<f64>,
}

fn env_num(key: &str, default: f64) -> f64 {
    std::env::var(key).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// Runs a command under /usr/bin/time (when present); returns wall seconds
/// and peak RSS in MiB.
fn measure(name: &str, program: &str, args: &[&str], scratch: &Path) -> Run {
    let time = Path::new("/usr/bin/time");
    let rss_file = scratch.join("rss.txt");
    let mut cmd = if time.exists() {
        let mut c = Command::new(time);
        c.arg("-f").arg("%M %U %S").arg("-o").arg(&rss_file).arg(program);
        c
    } else {
        Command::new(program)
    };
    cmd.args(args);
    let start = Instant::now();
    let out = cmd.output().expect("run the child");
    let secs = start.elapsed().as_secs_f64();
    if !out.status.success() {
        eprintln!("{name} failed: {}", String::from_utf8_lossy(&out.stderr));
        std::process::exit(1);
    }
    let stats: Vec<f64> = std::fs::read_to_string(&rss_file)
        .ok()
        .and_then(|s| s.lines().last().map(str::to_owned))
        .map(|l| l.split_whitespace().filter_map(|v| v.parse().ok()).collect())
        .unwrap_or_default();
    Run {
        name: name.into(),
        secs,
        rss_mib: stats.first().map(|kb| kb / 1024.0),
        cpu_secs: (stats.len() == 3).then(|| stats[1] + stats[2]),
    }
}

fn main() {
    let ranks = env_num("RANKTUNE_BENCH_RANKS", 4.0) as u32;
    let mb = env_num("RANKTUNE_BENCH_MB", 100.0);
    let dir = tempfile::tempdir().expect("temp dir");
    let keep = std::env::var_os("RANKTUNE_BENCH_DIR").map(PathBuf::from);
    let inputs = keep.clone().unwrap_or_else(|| dir.path().join("traces"));
    std::fs::create_dir_all(&inputs).expect("mkdir");
    let ops = 500;
    let probe = JobSpec { ranks, steps: 1, ops_per_step: ops, ..JobSpec::default() };
    let mut v = Vec::new();
    synth::write_rank(&probe, 0, &mut v).expect("probe");
    let steps = ((mb * 1e6) / v.len() as f64).ceil().max(1.0) as u32;
    let spec = JobSpec {
        ranks,
        steps,
        ops_per_step: ops,
        straggler: Some((ranks.saturating_sub(1), 0.3)),
        collectives: true,
        shape: Shape::Kineto,
        ..JobSpec::default()
    };
    let t = Instant::now();
    let reuse = keep.is_some()
        && std::fs::read_dir(&inputs).map(|d| d.count() as u32 == ranks).unwrap_or(false);
    let files: Vec<PathBuf> = if reuse {
        (0..ranks).map(|r| inputs.join(spec.file_name(r))).collect()
    } else {
        synth::write_job(&spec, &inputs).expect("generate")
    };
    let bytes: u64 = files.iter().map(|f| std::fs::metadata(f).map(|m| m.len()).unwrap_or(0)).sum();
    let total_mb = bytes as f64 / 1e6;
    println!(
        "generated {ranks} Kineto-shaped ranks, {steps} steps × {ops} ops, {total_mb:.0} MB in {:.1} s",
        t.elapsed().as_secs_f64()
    );
    let bin = env!("CARGO_BIN_EXE_ranktune");
    let input = inputs.display().to_string();
    let out_json = dir.path().join("merged.json").display().to_string();
    let out_gz = dir.path().join("merged.json.gz").display().to_string();
    let out_py = dir.path().join("merged_py.json").display().to_string();
    let mut runs = Vec::new();
    // Warm the page cache once, then measure.
    let _ = measure("warm-up", bin, &["trace", "merge", &input, "-o", &out_json], dir.path());
    for _ in 0..2 {
        runs.push(measure(
            "ranktune trace merge (.json)",
            bin,
            &["trace", "merge", &input, "-o", &out_json],
            dir.path(),
        ));
    }
    runs.push(measure(
        "ranktune trace merge (.json.gz)",
        bin,
        &["trace", "merge", &input, "-o", &out_gz],
        dir.path(),
    ));
    runs.push(measure(
        "ranktune trace merge --align first-step",
        bin,
        &["trace", "merge", &input, "-o", &out_json, "--align", "first-step"],
        dir.path(),
    ));
    runs.push(measure("ranktune trace summary", bin, &["trace", "summary", &input], dir.path()));
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("bench/python_merge.py");
    let python = std::env::var("RANKTUNE_BENCH_NO_PYTHON").is_err();
    if python {
        runs.push(measure(
            "python json.load/remap/json.dump merge",
            "python3",
            &[&script.display().to_string(), &input, "-o", &out_py],
            dir.path(),
        ));
    }
    let py = runs.iter().find(|r| r.name.starts_with("python")).map(|r| r.secs);
    println!(
        "\n{:<42} {:>8} {:>8} {:>9} {:>10} {:>13} {:>10}",
        "run", "wall s", "MB/s", "CPU s", "MB/CPU-s", "peak RSS MiB", "vs python"
    );
    for r in &runs {
        println!(
            "{:<42} {:>8.2} {:>8.0} {:>9} {:>10} {:>13} {:>10}",
            r.name,
            r.secs,
            total_mb / r.secs,
            r.cpu_secs.map_or("n/a".into(), |c| format!("{c:.2}")),
            r.cpu_secs.map_or("n/a".into(), |c| format!("{:.0}", total_mb / c.max(0.01))),
            r.rss_mib.map_or("n/a".into(), |m| format!("{m:.1}")),
            py.map_or("-".into(), |p| format!("{:.1}×", p / r.secs))
        );
    }
    println!(
        "\nmachine: {} cores, load average {}",
        std::thread::available_parallelism().map_or(1, |n| n.get()),
        std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );
    let out_size = std::fs::metadata(&out_json).map(|m| m.len()).unwrap_or(0);
    let gz_size = std::fs::metadata(&out_gz).map(|m| m.len()).unwrap_or(0);
    println!(
        "\ninput {total_mb:.0} MB; merged .json {:.0} MB, .json.gz {:.0} MB",
        out_size as f64 / 1e6,
        gz_size as f64 / 1e6
    );
}
