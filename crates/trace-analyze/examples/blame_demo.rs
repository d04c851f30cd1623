//! Writes a generated 4-rank Kineto-shaped job to try `ranktune trace
//! summary` on: three collectives per step (with `Seq`), rank 1 runs a
//! 400 µs `planted_delay` before the first collective of every step, rank 2
//! is 6 µs late to the other two.
//!
//! ```sh
//! cargo run -p ranktune-trace-analyze --example blame_demo -- demo
//! ranktune trace summary demo
//! ```
use ranktune_testkit::synth::{write_job, CommArgs, JobSpec, Shape};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let Some(dir) = std::env::args().nth(1) else {
        return Err("usage: blame_demo DIR (the directory to write the traces into)".into());
    };
    std::fs::create_dir_all(&dir)?;
    let spec = JobSpec {
        ranks: 4,
        steps: 6,
        ops_per_step: 15,
        collectives: true,
        collectives_per_step: 3,
        delays: vec![(1, 0, 400.0), (2, 1, 6.0), (2, 2, 6.0)],
        shape: Shape::Kineto,
        comm_args: CommArgs::Seq,
        ..JobSpec::default()
    };
    for p in write_job(&spec, std::path::Path::new(&dir))? {
        println!("{}", p.display());
    }
    Ok(())
}
