//! A test op whose tactics really crash: a segfault (a write to an unmapped
//! address), `abort()`, a loop that never returns, an allocation without
//! bound, and a segfault on one rank only — beside a normal fallback. It
//! exists to prove isolated measuring (`ranktune tune --isolate --ops
//! crashy`) and is compiled only with the `crash-tactics` feature, which
//! no default build has; without it [`crashy_op`] returns `None`.
//!
//! Owns those tactics and nothing else. The runners never read the
//! environment: the rank a tactic crashes on is given to [`crashy_op`].

use ranktune_tune::{Op, OpError, RunError, TuneInputs};

/// Whether this build has the crashing tactics (the `crash-tactics` feature).
pub const BUILT: bool = cfg!(feature = "crash-tactics");

/// The crashy op's inputs: `x`, rows×cols.
#[derive(Clone, Debug)]
pub struct CrashyIo {
    /// The values summed by the healthy tactics.
    pub x: Vec<f32>,
    shapes: [[usize; 2]; 1],
}

impl TuneInputs for CrashyIo {
    fn num_inputs(&self) -> usize {
        1
    }
    fn shape(&self, input: usize) -> &[usize] {
        self.shapes.get(input).map_or(&[], |s| &s[..])
    }
    fn synthetic(shapes: &[Vec<u64>]) -> Result<Self, RunError> {
        let d = |j: usize| {
            shapes.first().and_then(|s| s.get(j)).map_or(1, |&v| usize::try_from(v).unwrap_or(1))
        };
        let (rows, cols) = (d(0), d(1));
        let len = rows
            .checked_mul(cols)
            .filter(|&n| n <= 1 << 26)
            .ok_or_else(|| RunError(format!("crashy: shape {rows}x{cols} is too large")))?;
        Ok(CrashyIo { x: (0..len).map(|i| (i % 7) as f32).collect(), shapes: [[rows, cols]] })
    }
}

/// The shapes the crashy op is tuned from (`x` 1×cols; rows bucketed).
pub fn crashy_base(cols: usize) -> Vec<Vec<u64>> {
    vec![vec![1, cols as u64]]
}

/// The crashy op for rank `rank`, buckets up to `max_tokens` rows: runner
/// `steady` (two passes — the fallback — or one pass over `x`) and runner
/// `crashy` (`segfault`, `abort`, `hang`, `alloc`, `{"segfault_on_rank":
/// 1}`). `None` without the `crash-tactics` feature.
pub fn crashy_op(rank: u32, max_tokens: u64) -> Option<Result<Op<CrashyIo>, OpError>> {
    #[cfg(feature = "crash-tactics")]
    {
        Some(imp::op(rank, max_tokens))
    }
    #[cfg(not(feature = "crash-tactics"))]
    {
        let _ = (rank, max_tokens);
        None
    }
}

#[cfg(feature = "crash-tactics")]
mod imp {
    use super::CrashyIo;
    use ranktune_tune::{fingerprint_of, DynamicDim, Op, OpError, RunError, Runner, TuningConfig};
    use serde::{Deserialize, Serialize};
    use std::time::Duration;

    #[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
    #[serde(rename_all = "snake_case")]
    enum Steady {
        Passes(u8),
    }

    #[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
    #[serde(rename_all = "snake_case")]
    enum Crash {
        Segfault,
        Abort,
        Hang,
        Alloc,
        SegfaultOnRank(u32),
    }

    struct SteadyRunner;

    impl Runner<CrashyIo> for SteadyRunner {
        fn name(&self) -> &str {
            "steady"
        }
        fn fingerprint(&self) -> String {
            fingerprint_of("crashy steady v1")
        }
        fn tactics(&self) -> Vec<serde_json::Value> {
            [Steady::Passes(2), Steady::Passes(1)]
                .iter()
                .map(|t| serde_json::to_value(t).unwrap_or_default())
                .collect()
        }
        fn valid(&self, t: usize, _shapes: &[Vec<u64>]) -> bool {
            t < 2
        }
        fn run(&self, t: usize, io: &mut CrashyIo) -> Result<(), RunError> {
            let mut total = 0.0f32;
            for _ in 0..(2 - t.min(1)) {
                total += io.x.iter().sum::<f32>();
            }
            std::hint::black_box(total);
            Ok(())
        }
    }

    struct CrashRunner {
        rank: u32,
    }

    const CRASHES: [Crash; 5] =
        [Crash::Segfault, Crash::Abort, Crash::Hang, Crash::Alloc, Crash::SegfaultOnRank(1)];

    impl Runner<CrashyIo> for CrashRunner {
        fn name(&self) -> &str {
            "crashy"
        }
        fn fingerprint(&self) -> String {
            // Not the rank: every rank must name the same candidates.
            fingerprint_of("crashy crash v1")
        }
        fn tactics(&self) -> Vec<serde_json::Value> {
            CRASHES.iter().map(|t| serde_json::to_value(t).unwrap_or_default()).collect()
        }
        fn valid(&self, t: usize, _shapes: &[Vec<u64>]) -> bool {
            t < CRASHES.len()
        }
        fn run(&self, t: usize, io: &mut CrashyIo) -> Result<(), RunError> {
            match CRASHES.get(t) {
                Some(Crash::Segfault) => segfault(),
                Some(Crash::Abort) => std::process::abort(),
                Some(Crash::Hang) => loop {
                    std::thread::sleep(Duration::from_secs(1));
                },
                Some(Crash::Alloc) => alloc_without_bound(),
                Some(Crash::SegfaultOnRank(r)) if *r == self.rank => segfault(),
                // Elsewhere the fastest tactic of all: it barely reads x.
                Some(Crash::SegfaultOnRank(_)) => {
                    std::hint::black_box(io.x.first());
                    Ok(())
                }
                None => Err(RunError(format!("crashy: no tactic {t}"))),
            }
        }
    }

    /// A write to an unmapped address: SIGSEGV.
    fn segfault() -> Result<(), RunError> {
        // SAFETY: none — this deliberately writes to address 16, which is
        // never mapped, to die by SIGSEGV (only in the test-only feature).
        unsafe { std::ptr::without_provenance_mut::<u8>(16).write_volatile(1) };
        Err(RunError("crashy: the write to address 16 did not fault".into()))
    }

    /// Allocates (and touches) 64 MiB blocks until an allocation fails —
    /// only under an address-space limit, which isolated measuring sets:
    /// without one it would take the machine's memory, so it refuses.
    fn alloc_without_bound() -> Result<(), RunError> {
        if !address_space_limited() {
            return Err(RunError(
                "crashy alloc: refusing to allocate without bound: no address-space limit \
                 is set (run it isolated, with a memory limit)"
                    .into(),
            ));
        }
        let mut hoard: Vec<Vec<u8>> = Vec::new();
        loop {
            hoard.push(vec![1u8; 64 << 20]);
            std::hint::black_box(&hoard);
        }
    }

    /// Whether this process has a soft address-space limit (`/proc/self/limits`).
    fn address_space_limited() -> bool {
        std::fs::read_to_string("/proc/self/limits").is_ok_and(|text| {
            text.lines()
                .find(|l| l.starts_with("Max address space"))
                .and_then(|l| l.split_whitespace().nth(3))
                .is_some_and(|soft| soft != "unlimited")
        })
    }

    pub(super) fn op(rank: u32, max_tokens: u64) -> Result<Op<CrashyIo>, OpError> {
        let config =
            TuningConfig::new(vec![DynamicDim::powers_of_two(0, 0)]).with_max_tokens(max_tokens);
        Op::new("crashy", vec![Box::new(SteadyRunner), Box::new(CrashRunner { rank })], config)
    }
}
