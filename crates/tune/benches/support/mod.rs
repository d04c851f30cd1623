//! What the tune crate's benches of whole buckets share: a one-input op
//! whose tactics do a known amount of arithmetic, and a tuner in tuning
//! mode. Included by `isolation.rs` and `durable.rs` with `mod support;`
//! (a folder with `mod.rs`, so cargo does not take it for a bench).

use ranktune_cache::{Identity, Section};
use ranktune_tune::isolation::*;
use ranktune_tune::*;
use std::hint::black_box;

/// One input of `shapes[0][0]` rows.
pub struct Rows {
    pub shapes: [[usize; 1]; 1],
}

impl TuneInputs for Rows {
    fn num_inputs(&self) -> usize {
        1
    }
    fn shape(&self, i: usize) -> &[usize] {
        &self.shapes[i]
    }
    fn synthetic(s: &[Vec<u64>]) -> Result<Self, RunError> {
        Ok(Rows { shapes: [[s[0][0] as usize]] })
    }
}

/// Tactic `t` does `work × (1 + t/8)` rounds of arithmetic.
pub struct Spin {
    pub work: u64,
}

impl Runner<Rows> for Spin {
    fn name(&self) -> &str {
        "spin"
    }
    fn fingerprint(&self) -> String {
        fingerprint_of(&self.work)
    }
    fn tactics(&self) -> Vec<serde_json::Value> {
        (0..8).map(serde_json::Value::from).collect()
    }
    fn valid(&self, _: usize, _: &[Vec<u64>]) -> bool {
        true
    }
    fn run(&self, t: usize, _: &mut Rows) -> Result<(), RunError> {
        let n = self.work + self.work * t as u64 / 8;
        let mut x = 1u64;
        for i in 0..n {
            x = black_box(x.wrapping_mul(6364136223846793005).wrapping_add(i));
        }
        black_box(x);
        Ok(())
    }
}

/// A rank-0 tuner in tuning mode, measuring as `isolation` says.
pub fn tuner(isolation: Isolation) -> Tuner {
    let id = Identity {
        lib_version: "bench".into(),
        device_kind: "cpu".into(),
        device_name: "bench".into(),
        capability: String::new(),
        cores: 1,
    };
    let mut opts = TunerOptions::new(Section::Rank(0), id, "bench");
    opts.isolation = isolation;
    let t = Tuner::new(opts);
    t.set_tuning(true);
    t
}
