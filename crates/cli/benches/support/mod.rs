//! What the benches of whole `ranktune tune` jobs share: reading their
//! command line. Included with `mod support;` (a folder with `mod.rs`, so
//! cargo does not take it for a bench).

/// The value after `name` on the command line, if any.
pub fn arg(args: &[String], name: &str) -> Option<String> {
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned()
}

/// A tune bench's job: `--rounds N` (default 3), `--ranks N` (default 2),
/// and the arguments passed on to every `tune` (`--max-tokens N`, `--quick`).
pub struct Job {
    pub rounds: usize,
    pub ranks: u32,
    pub extra: Vec<String>,
}

impl Job {
    /// The job this process's command line asks for.
    pub fn from_args() -> Job {
        let args: Vec<String> = std::env::args().collect();
        let rounds = arg(&args, "--rounds").and_then(|v| v.parse().ok()).unwrap_or(3);
        let ranks = arg(&args, "--ranks").and_then(|v| v.parse().ok()).unwrap_or(2);
        let mut extra = Vec::new();
        if let Some(m) = arg(&args, "--max-tokens") {
            extra.extend(["--max-tokens".to_string(), m]);
        }
        if args.iter().any(|a| a == "--quick") {
            extra.push("--quick".to_string());
        }
        Job { rounds, ranks, extra }
    }
}
