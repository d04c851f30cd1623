//! Shared helpers of the tune_* tests: inputs, scripted runners and a virtual
//! clock, so decisions are deterministic on a loaded machine.
#![allow(dead_code)]

use ranktune_cache::{Identity, Section};
use ranktune_tune::*;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Inputs: x [rows, cols] and out [rows, cols].
#[derive(Debug)]
pub struct Rows {
    pub shapes: [[usize; 2]; 2],
}

impl Rows {
    pub fn new(rows: usize, cols: usize) -> Self {
        Rows { shapes: [[rows, cols], [rows, cols]] }
    }
}

impl TuneInputs for Rows {
    fn num_inputs(&self) -> usize {
        2
    }
    fn shape(&self, i: usize) -> &[usize] {
        &self.shapes[i]
    }
    fn synthetic(s: &[Vec<u64>]) -> Result<Self, RunError> {
        let d = |i: usize, j: usize| s.get(i).and_then(|v| v.get(j)).copied().unwrap_or(1) as usize;
        Ok(Rows { shapes: [[d(0, 0), d(0, 1)], [d(1, 0), d(1, 1)]] })
    }
}

/// What a scripted tactic does when run.
#[derive(Clone, Debug)]
pub enum Act {
    /// Advances the virtual clock by `base + per_row * rows` ns.
    Cost { base: u64, per_row: u64 },
    /// Returns an error.
    Fail(&'static str),
    /// Panics.
    Panic(&'static str),
}

/// A runner whose tactics follow a script, timed on a virtual clock.
pub struct Scripted {
    pub name: String,
    pub param: u32,
    pub acts: Vec<Act>,
    pub clock: Arc<AtomicU64>,
    /// Tactics valid only up to this many rows (None: all).
    pub max_rows: Vec<Option<u64>>,
}

impl Scripted {
    pub fn new(name: &str, acts: Vec<Act>, clock: &Arc<AtomicU64>) -> Self {
        let n = acts.len();
        Scripted {
            name: name.into(),
            param: 1,
            acts,
            clock: Arc::clone(clock),
            max_rows: vec![None; n],
        }
    }
}

impl Runner<Rows> for Scripted {
    fn name(&self) -> &str {
        &self.name
    }
    fn fingerprint(&self) -> String {
        fingerprint_of(&(self.name.as_str(), self.param))
    }
    fn tactics(&self) -> Vec<serde_json::Value> {
        (0..self.acts.len()).map(|i| serde_json::json!({ "variant": i })).collect()
    }
    fn valid(&self, t: usize, shapes: &[Vec<u64>]) -> bool {
        match self.max_rows.get(t).copied().flatten() {
            Some(m) => shapes[0][0] <= m,
            None => true,
        }
    }
    fn run(&self, t: usize, io: &mut Rows) -> Result<(), RunError> {
        match &self.acts[t] {
            Act::Cost { base, per_row } => {
                self.clock.fetch_add(base + per_row * io.shapes[0][0] as u64, Ordering::Relaxed);
                Ok(())
            }
            Act::Fail(m) => Err(RunError((*m).into())),
            Act::Panic(m) => panic!("{m}"),
        }
    }
}

/// A timer reading the virtual clock (ns → µs).
pub struct VirtualTimer {
    pub clock: Arc<AtomicU64>,
    pub t0: u64,
}

impl Timer for VirtualTimer {
    fn start(&mut self) {
        self.t0 = self.clock.load(Ordering::Relaxed);
    }
    fn stop(&mut self) -> f64 {
        (self.clock.load(Ordering::Relaxed) - self.t0) as f64 / 1000.0
    }
}

pub fn identity(lib: &str, device: &str) -> Identity {
    Identity {
        lib_version: lib.into(),
        device_kind: "cpu".into(),
        device_name: device.into(),
        capability: "test".into(),
        cores: 2,
    }
}

pub fn tuner_for(rank: u32, lib: &str, device: &str, clock: &Arc<AtomicU64>) -> Tuner {
    let digest = format!("{lib}-{device}");
    let t = Tuner::new(TunerOptions::new(Section::Rank(rank), identity(lib, device), digest));
    t.set_timer(Box::new(VirtualTimer { clock: Arc::clone(clock), t0: 0 }));
    t
}

/// Row-dynamic config: x.rows bucketed (powers of two), out.rows = x.rows.
pub fn rows_config(max: u64) -> TuningConfig {
    TuningConfig::new(vec![DynamicDim::powers_of_two(0, 0)])
        .with_constraint(Constraint::same_as(1, 0, 0, 0))
        .with_max_tokens(max)
}

pub fn op_with(runners: Vec<Scripted>) -> Op<Rows> {
    let boxed: Vec<Box<dyn Runner<Rows>>> =
        runners.into_iter().map(|r| Box::new(r) as Box<dyn Runner<Rows>>).collect();
    Op::new("rows_op", boxed, rows_config(1024)).unwrap()
}

pub fn cost(base: u64, per_row: u64) -> Act {
    Act::Cost { base, per_row }
}

/// Fallback is slow; `fast` tactic 1 wins on large buckets, tactic 0 on small.
pub fn two_runners(c: &Arc<AtomicU64>) -> Op<Rows> {
    op_with(vec![
        Scripted::new("simple", vec![cost(1000, 100)], c),
        Scripted::new("fast", vec![cost(200, 50), cost(5000, 10)], c),
    ])
}
