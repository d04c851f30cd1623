//! Writes a generated 4-rank Kineto-shaped job with a straggler to try
//! `ranktune trace merge` and `trace summary` on: 4 steps of 500 operators
//! and one all-reduce each (about 2.5 MB per rank), and rank 3's `aten::mm`
//! 30% slower than the others'. docs/trace-analysis.md's examples run on it.
//!
//! ```sh
//! cargo run -p ranktune-trace-analyze --example straggler_demo -- demo
//! ranktune trace summary demo
//! ```
use ranktune_testkit::synth::{write_job, JobSpec, Shape};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let Some(dir) = std::env::args().nth(1) else {
        return Err("usage: straggler_demo DIR (the directory to write the traces into)".into());
    };
    std::fs::create_dir_all(&dir)?;
    let spec = JobSpec {
        ranks: 4,
        steps: 4,
        ops_per_step: 500,
        straggler: Some((3, 0.3)),
        collectives: true,
        shape: Shape::Kineto,
        ..JobSpec::default()
    };
    for p in write_job(&spec, std::path::Path::new(&dir))? {
        println!("{}", p.display());
    }
    Ok(())
}
