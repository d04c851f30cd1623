//! Synthetic multi-rank traces for tests and benchmarks: Kineto-shaped
//! (PyTorch profiler: object form, metadata keys around `traceEvents`, string
//! pids, flows, multi-line hand-indented events) or ranktune-shaped (compact,
//! pid = rank), with an optional planted straggler, with or without
//! collectives. Deterministic for a given [`JobSpec`].
//!
//! It only writes files; it never reads traces, and it knows nothing of
//! `ranktune-trace-analyze` (the files are its only contract with the
//! analysis, so the analysis' own tests can use it as a dev-dependency).

use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

/// Which producer the files imitate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// PyTorch profiler (Kineto) `export_chrome_trace` output, named
    /// `host_<pid>.<ns>.pt.trace.json` (rank only in `distributedInfo`).
    Kineto,
    /// ranktune's recorder: compact lines, `trace_<rank>.json`.
    Ranktune,
}

/// A synthetic job.
#[derive(Debug, Clone)]
pub struct JobSpec {
    /// Number of ranks.
    pub ranks: u32,
    /// Steps (`ProfilerStep#N`) per rank; 0 writes no step markers.
    pub steps: u32,
    /// Operators per step.
    pub ops_per_step: u32,
    /// Planted straggler: rank and extra fraction of its `aten::mm` time.
    pub straggler: Option<(u32, f64)>,
    /// Whether ranks meet in an all-reduce every step.
    pub collectives: bool,
    /// Producer shape.
    pub shape: Shape,
    /// `baseTimeNanoseconds` of rank 0 (others add `base_skew_ns * rank`).
    pub base_ns: u64,
    /// Per-rank difference of the clock base.
    pub base_skew_ns: u64,
    /// Collectives per step (with `collectives`); the step's operators are
    /// split evenly before them. They cycle through all-reduce, all-gather
    /// and reduce-scatter.
    pub collectives_per_step: u32,
    /// Planted delays: `(rank, collective index in the step, µs)` — that
    /// rank runs an extra `planted_delay` span of that length right before
    /// that collective of every step.
    pub delays: Vec<(u32, u32, f64)>,
    /// A planted mismatch: `(rank, step index, collective index)` — that
    /// rank skips that one collective.
    pub skip: Option<(u32, u32, u32)>,
    /// What Kineto-shaped traces record about each collective.
    pub comm_args: CommArgs,
}

/// What a Kineto-shaped trace records on the CPU side of each collective.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommArgs {
    /// No `record_param_comms`: only an `nccl:*` CPU span and the NCCL
    /// kernel.
    None,
    /// `record_param_comms` with `Collective name` and sizes (older
    /// PyTorch), no sequence number.
    Basic,
    /// `record_param_comms` also with `Seq`, `Process Group Name` and
    /// `Process Group Ranks` (newer PyTorch).
    Seq,
}

/// One collective of the generated schedule: names per shape.
const COLLS: [(&str, &str, &str); 3] = [
    (
        "allreduce",
        "all_reduce",
        "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)",
    ),
    (
        "allgather",
        "all_gather",
        "ncclDevKernel_AllGather_RING_LL(ncclDevComm*, unsigned long, ncclWork*)",
    ),
    (
        "reduce_scatter",
        "reduce_scatter",
        "ncclDevKernel_ReduceScatter_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)",
    ),
];

impl Default for JobSpec {
    fn default() -> Self {
        JobSpec {
            ranks: 4,
            steps: 8,
            ops_per_step: 20,
            straggler: None,
            collectives: true,
            shape: Shape::Kineto,
            base_ns: 1_700_000_000_000_000_000,
            base_skew_ns: 0,
            collectives_per_step: 1,
            delays: Vec::new(),
            skip: None,
            comm_args: CommArgs::Basic,
        }
    }
}

const OPS: [(&str, f64); 5] = [
    ("aten::linear", 60.0),
    ("aten::mm", 80.0),
    ("aten::relu", 15.0),
    ("aten::softmax", 25.0),
    ("aten::layer_norm", 30.0),
];

fn op_dur(spec: &JobSpec, rank: u32, step: u32, i: u32) -> f64 {
    let (name, base) = OPS[(i as usize) % OPS.len()];
    // Small deterministic jitter (±2%), different per rank and op.
    let h = (u64::from(rank) * 7919 + u64::from(step) * 104_729 + u64::from(i) * 1_299_709)
        .wrapping_mul(0x9E37_79B9_7F4A_7C15);
    let jitter = 1.0 + ((h >> 40) % 4001) as f64 / 100_000.0 - 0.02;
    let mut d = base * jitter;
    if let Some((r, extra)) = spec.straggler {
        if r == rank && name == "aten::mm" {
            d *= 1.0 + extra;
        }
    }
    (d * 1000.0).round() / 1000.0
}

/// Operators `[from, to)` of chunk `k` of `n` (before collective `k`).
fn chunk(ops: u32, n: u32, k: u32) -> (u32, u32) {
    (k * ops / n, (k + 1) * ops / n)
}

/// The planted delay of `rank` before collective `k` of every step, µs.
fn planted(spec: &JobSpec, rank: u32, k: u32) -> f64 {
    spec.delays.iter().filter(|d| d.0 == rank && d.1 == k).map(|d| d.2).sum()
}

/// One step of the whole job: when each collective ends (all ranks leave
/// together, `COMM_COST` after the last arrival) and where each rank's own
/// work ends.
struct Plan {
    ends: Vec<f64>,
    own_end: Vec<f64>,
}

const COMM_COST: f64 = 40.0;

fn schedule(spec: &JobSpec, step: u32, step_start: f64) -> Plan {
    let ncoll = spec.collectives_per_step.max(1);
    let mut ct: Vec<f64> = vec![step_start + 5.0; spec.ranks as usize];
    let mut ends = Vec::new();
    for k in 0..ncoll {
        let (from, to) = chunk(spec.ops_per_step, ncoll, k);
        for (r, c) in ct.iter_mut().enumerate() {
            let r = r as u32;
            *c += (from..to).map(|i| op_dur(spec, r, step, i) + 2.0).sum::<f64>();
            let d = planted(spec, r, k);
            if d > 0.0 {
                *c += d + 2.0;
            }
        }
        if spec.collectives {
            let present = |r: u32| spec.skip != Some((r, step, k));
            let last = (0..spec.ranks)
                .filter(|&r| present(r))
                .map(|r| ct[r as usize])
                .fold(f64::MIN, f64::max);
            let end = last + COMM_COST;
            ends.push(end);
            for r in (0..spec.ranks).filter(|&r| present(r)) {
                ct[r as usize] = end + 2.0;
            }
        }
    }
    Plan { ends, own_end: ct }
}

impl JobSpec {
    /// File name of a rank's trace for this spec.
    pub fn file_name(&self, rank: u32) -> String {
        match self.shape {
            Shape::Kineto => format!(
                "host_{}.{}.pt.trace.json",
                4000 + rank * 17,
                1_700_000_000_123u64 + u64::from(rank)
            ),
            Shape::Ranktune => format!("trace_{rank}.json"),
        }
    }
}

/// Writes every rank's trace into `dir`; returns the paths in rank order.
pub fn write_job(spec: &JobSpec, dir: &Path) -> io::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for rank in 0..spec.ranks {
        let p = dir.join(spec.file_name(rank));
        let mut w = BufWriter::with_capacity(1 << 20, std::fs::File::create(&p)?);
        write_rank(spec, rank, &mut w)?;
        w.flush()?;
        out.push(p);
    }
    Ok(out)
}

struct Out<'a, W: Write> {
    w: &'a mut W,
    first: bool,
    kineto: bool,
    n: u64,
}

impl<W: Write> Out<'_, W> {
    fn ev(&mut self, body: std::fmt::Arguments<'_>) -> io::Result<()> {
        if !self.first {
            self.w.write_all(b",")?;
        }
        self.first = false;
        self.n += 1;
        if self.kineto {
            // Kineto's hand-made indentation, a little irregular.
            let indent = if self.n % 7 == 0 { "   " } else { "  " };
            write!(self.w, "\n{indent}{{\n    ")?;
            self.w.write_fmt(body)?;
            write!(self.w, "\n  }}")
        } else {
            self.w.write_all(b"\n{")?;
            self.w.write_fmt(body)?;
            self.w.write_all(b"}")
        }
    }
}

/// Writes one rank's trace; returns the number of events.
pub fn write_rank<W: Write>(spec: &JobSpec, rank: u32, w: &mut W) -> io::Result<u64> {
    let kineto = spec.shape == Shape::Kineto;
    let base = spec.base_ns + spec.base_skew_ns * u64::from(rank);
    let (pid, tid) = if kineto { (4000 + rank * 17, 4000 + rank * 17) } else { (rank, 1) };
    let dist = format!(
        "{{\"backend\": \"{}\", \"rank\": {rank}, \"world_size\": {}}}",
        if kineto { "nccl" } else { "ranktune" },
        spec.ranks
    );
    if kineto {
        write!(
            w,
            "\n{{\n  \"schemaVersion\": 1,\n  \"deviceProperties\": [\n    {{\n      \"id\": 0, \"name\": \"NVIDIA H100 80GB HBM3\", \"totalGlobalMem\": 84929216512\n    }}\n  ],\n  \"distributedInfo\": {dist},\n  \"record_shapes\": 1,\n  \"trace_id\": \"ABC{rank}\",\n   \"displayTimeUnit\": \"ms\",\n  \"baseTimeNanoseconds\": {base},\n  \"traceEvents\": ["
        )?;
    } else {
        write!(
            w,
            "{{\"schemaVersion\":1,\"distributedInfo\": {dist},\"baseTimeNanoseconds\":{base},\"displayTimeUnit\":\"ms\",\"traceEvents\":["
        )?;
    }
    let mut o = Out { w, first: true, kineto, n: 0 };
    // Process and thread metadata.
    if kineto {
        o.ev(format_args!("\"name\": \"process_name\", \"ph\": \"M\", \"ts\": 0.000, \"pid\": {pid}, \"tid\": 0,\n    \"args\": {{\n      \"name\": \"python3\"\n    }}"))?;
        o.ev(format_args!("\"name\": \"process_labels\", \"ph\": \"M\", \"ts\": 0.000, \"pid\": {pid}, \"tid\": 0,\n    \"args\": {{\n      \"labels\": \"CPU\"\n    }}"))?;
        o.ev(format_args!("\"name\": \"process_sort_index\", \"ph\": \"M\", \"ts\": 0.000, \"pid\": {pid}, \"tid\": 0,\n    \"args\": {{\n      \"sort_index\": {pid}\n    }}"))?;
        o.ev(format_args!("\"name\": \"process_name\", \"ph\": \"M\", \"ts\": 0.000, \"pid\": 0, \"tid\": 0,\n    \"args\": {{\n      \"name\": \"python3\"\n    }}"))?;
        o.ev(format_args!("\"name\": \"process_labels\", \"ph\": \"M\", \"ts\": 0.000, \"pid\": 0, \"tid\": 0,\n    \"args\": {{\n      \"labels\": \"GPU 0\"\n    }}"))?;
        o.ev(format_args!("\"name\": \"process_sort_index\", \"ph\": \"M\", \"ts\": 0.000, \"pid\": 0, \"tid\": 0,\n    \"args\": {{\n      \"sort_index\": 5000000\n    }}"))?;
        o.ev(format_args!("\"name\": \"thread_name\", \"ph\": \"M\", \"ts\": 0.000, \"pid\": {pid}, \"tid\": {tid},\n    \"args\": {{\n      \"name\": \"thread {tid} (python3)\"\n    }}"))?;
        o.ev(format_args!("\"name\": \"thread_name\", \"ph\": \"M\", \"ts\": 0.000, \"pid\": 0, \"tid\": 7,\n    \"args\": {{\n      \"name\": \"stream 7\"\n    }}"))?;
        o.ev(format_args!("\"name\": \"process_name\", \"ph\": \"M\", \"ts\": 0.000, \"pid\": \"Spans\", \"tid\": 0,\n    \"args\": {{\n      \"name\": \"Spans\"\n    }}"))?;
    } else {
        o.ev(format_args!("\"ph\":\"M\",\"name\":\"process_name\",\"pid\":{pid},\"tid\":0,\"args\":{{\"name\":\"rank {rank}\"}}"))?;
        o.ev(format_args!("\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":{pid},\"tid\":{tid},\"args\":{{\"name\":\"main\"}}"))?;
    }
    let mut t = 100.0f64;
    let mut corr: u64 = 1;
    let mut seq: u64 = 0;
    let steps = spec.steps.max(1);
    let ncoll = spec.collectives_per_step.max(1);
    let group_ranks =
        format!("[{}]", (0..spec.ranks).map(|r| r.to_string()).collect::<Vec<_>>().join(", "));
    for step in 0..steps {
        let step_start = t;
        let plan = schedule(spec, step, step_start);
        let period = if spec.collectives {
            plan.ends.last().copied().unwrap_or(step_start) - step_start + 15.0
        } else {
            plan.own_end[rank as usize] - step_start + 15.0
        };
        if spec.steps > 0 {
            let idx = o.n;
            o.ev(format_args!(
                "\"ph\": \"X\", \"cat\": \"user_annotation\", \"name\": \"ProfilerStep#{}\", \"pid\": {pid}, \"tid\": {tid},\n    \"ts\": {:.3}, \"dur\": {:.3},\n    \"args\": {{\n      \"External id\": {corr}, \"Record function id\": 0, \"Ev Idx\": {}\n    }}",
                step + 2, step_start, period - 1.0, idx
            ))?;
        }
        let mut ct = step_start + 5.0;
        for k in 0..ncoll {
            let (from, to) = chunk(spec.ops_per_step, ncoll, k);
            for i in from..to {
                let (name, _) = OPS[(i as usize) % OPS.len()];
                let d = op_dur(spec, rank, step, i);
                if kineto {
                    let idx = o.n;
                    o.ev(format_args!(
                        "\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"{name}\", \"pid\": {pid}, \"tid\": {tid},\n    \"ts\": {ct:.3}, \"dur\": {d:.3},\n    \"args\": {{\n      \"External id\": {corr},\"Record function id\": 0, \"Sequence number\": {}, \"Fwd thread id\": 0, \"Concrete Inputs\": [\"\", \"\"], \"Input type\": [\"float\", \"float\"], \"Input Strides\": [[64, 1], [64, 1]], \"Input Dims\": [[32, 64], [64, 64]], \"Ev Idx\": {}\n    }}",
                        corr * 3, idx
                    ))?;
                    let launch = ct + d * 0.5;
                    o.ev(format_args!(
                        "\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"cudaLaunchKernel\", \"pid\": {pid}, \"tid\": {tid},\n    \"ts\": {launch:.3}, \"dur\": 3.000,\n    \"args\": {{\n      \"External id\": {corr}, \"cbid\": 211, \"correlation\": {corr}\n    }}"
                    ))?;
                    o.ev(format_args!(
                        "\"ph\": \"s\", \"id\": {corr}, \"pid\": {pid}, \"tid\": {tid}, \"ts\": {launch:.3},\n    \"cat\": \"ac2g\", \"name\": \"ac2g\""
                    ))?;
                    let kt = launch + 5.0;
                    o.ev(format_args!(
                        "\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"void gemm_kernel<float, 128, 64>(Params)\", \"pid\": 0, \"tid\": 7,\n    \"ts\": {kt:.3}, \"dur\": {:.3},\n    \"args\": {{\n      \"External id\": {corr}, \"queued\": 0, \"device\": 0, \"context\": 1, \"stream\": 7, \"correlation\": {corr}, \"registers per thread\": 128, \"shared memory\": 49152, \"blocks per SM\": 0.5, \"warps per SM\": 2.0, \"grid\": [66, 1, 1], \"block\": [128, 1, 1], \"est. achieved occupancy %\": 12\n    }}",
                        (d * 0.4).max(1.0)
                    ))?;
                    o.ev(format_args!(
                        "\"ph\": \"f\", \"id\": {corr}, \"pid\": 0, \"tid\": 7, \"ts\": {kt:.3},\n    \"cat\": \"ac2g\", \"name\": \"ac2g\", \"bp\": \"e\""
                    ))?;
                } else {
                    o.ev(format_args!(
                        "\"ph\":\"X\",\"cat\":\"op\",\"name\":\"{name}\",\"pid\":{pid},\"tid\":{tid},\"ts\":{ct:.3},\"dur\":{d:.3},\"args\":{{\"seq\":{corr}}}"
                    ))?;
                }
                corr += 1;
                ct += d + 2.0;
            }
            let delay = planted(spec, rank, k);
            if delay > 0.0 {
                if kineto {
                    o.ev(format_args!(
                        "\"ph\": \"X\", \"cat\": \"user_annotation\", \"name\": \"planted_delay\", \"pid\": {pid}, \"tid\": {tid},\n    \"ts\": {ct:.3}, \"dur\": {delay:.3},\n    \"args\": {{\n      \"External id\": {corr}\n    }}"
                    ))?;
                } else {
                    o.ev(format_args!(
                        "\"ph\":\"X\",\"cat\":\"op\",\"name\":\"planted_delay\",\"pid\":{pid},\"tid\":{tid},\"ts\":{ct:.3},\"dur\":{delay:.3}"
                    ))?;
                }
                corr += 1;
                ct += delay + 2.0;
            }
            if !spec.collectives {
                continue;
            }
            let skipped = spec.skip == Some((rank, step, k));
            if skipped {
                continue;
            }
            let end = plan.ends[k as usize];
            let wait = end - ct;
            let (short, rt_name, kernel) = COLLS[(k as usize) % COLLS.len()];
            seq += 1;
            if kineto {
                match spec.comm_args {
                    CommArgs::None => o.ev(format_args!(
                        "\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"nccl:{rt_name}\", \"pid\": {pid}, \"tid\": {tid},\n    \"ts\": {ct:.3}, \"dur\": 8.000,\n    \"args\": {{\n      \"External id\": {corr}\n    }}"
                    ))?,
                    CommArgs::Basic => o.ev(format_args!(
                        "\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"record_param_comms\", \"pid\": {pid}, \"tid\": {tid},\n    \"ts\": {ct:.3}, \"dur\": 8.000,\n    \"args\": {{\n      \"External id\": {corr}, \"Collective name\": \"{short}\", \"dtype\": \"Float\", \"In msg nelems\": 1048576, \"Group size\": {}\n    }}",
                        spec.ranks
                    ))?,
                    CommArgs::Seq => o.ev(format_args!(
                        "\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"record_param_comms\", \"pid\": {pid}, \"tid\": {tid},\n    \"ts\": {ct:.3}, \"dur\": 8.000,\n    \"args\": {{\n      \"External id\": {corr}, \"Collective name\": \"{short}\", \"dtype\": \"Float\", \"In msg nelems\": 1048576, \"Group size\": {}, \"Process Group Name\": \"0\", \"Process Group Description\": \"default_pg\", \"Process Group Ranks\": \"{group_ranks}\", \"Seq\": {seq}\n    }}",
                        spec.ranks
                    ))?,
                }
                o.ev(format_args!(
                    "\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"{kernel}\", \"pid\": 0, \"tid\": 7,\n    \"ts\": {:.3}, \"dur\": {wait:.3},\n    \"args\": {{\n      \"External id\": {corr}, \"device\": 0, \"stream\": 7, \"correlation\": {corr}\n    }}",
                    ct + 4.0
                ))?;
            } else {
                o.ev(format_args!(
                    "\"ph\":\"X\",\"cat\":\"collective\",\"name\":\"{rt_name}\",\"pid\":{pid},\"tid\":{tid},\"ts\":{ct:.3},\"dur\":{wait:.3}"
                ))?;
            }
            corr += 1;
            ct = end + 2.0;
        }
        t = step_start + period;
    }
    if kineto {
        o.ev(format_args!(
            "\"ph\": \"X\", \"cat\": \"Trace\", \"ts\": 50.000, \"dur\": {:.3},\n    \"pid\": \"Spans\", \"tid\": \"PyTorch Profiler\",\n    \"name\": \"PyTorch Profiler (0)\",\n    \"args\": {{\n      \"Op count\": 0\n    }}",
            t - 50.0
        ))?;
        o.ev(format_args!(
            "\"name\": \"Iteration Start: PyTorch Profiler\", \"ph\": \"i\", \"s\": \"g\",\n    \"pid\": \"Traces\", \"tid\": \"Trace PyTorch Profiler\", \"ts\": 50.000"
        ))?;
        o.ev(format_args!(
            "\"name\": \"Record Window End\", \"ph\": \"i\", \"s\": \"g\",\n    \"pid\": \"\", \"tid\": \"\", \"ts\": {t:.3}"
        ))?;
    }
    let n = o.n;
    if kineto {
        write!(w, "\n],\n  \"traceName\": \"host_{pid}.pt.trace.json\"\n}}\n")?;
    } else {
        w.write_all(b"\n]}\n")?;
    }
    Ok(n)
}
