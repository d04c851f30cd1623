// The library example of docs/tune.md, as written there (the test
// `docs_tune_md_example` checks that the page shows exactly this file).
use ranktune_cache::{FileStore, Identity, Section};
use ranktune_kernels::runners::{gemm_op, GemmIo};
use ranktune_tune::{Session, Tuner, TunerOptions};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let rank = 0; // this process's rank (from your launcher)
    let op = gemm_op(8192)?; // Op<GemmIo>: GEMM with M tuned at 1, 2, 4, … 8192
    let mut inputs = GemmIo::new(64, 512, 512)?; // this call's operands: M=64, N=512, K=512
    let id = Identity::current();
    let tuner = Tuner::new(TunerOptions::new(Section::Rank(rank), id.clone(), id.digest()));
    let store = FileStore::new("ranktune-cache.json");
    let session = Session::start(&tuner, &store)?; // loads; saves on drop/panic too
    tuner.set_tuning(true); // misses measure
    let choice = tuner.choose_one(&op, &inputs); // Choice { runner_index, tactic_index, source }
    op.run(choice, &mut inputs)?;
    session.finish()?; // merging, locked save
    Ok(())
}
