//! The hot path (a hit outside tuning) allocates nothing: proven with a
//! counting global allocator (its own test binary, since it replaces the
//! allocator).

mod tune_support;

use ranktune_tune::*;
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use tune_support::*;

struct Counting;

thread_local! {
    static ALLOCS: Cell<u64> = const { Cell::new(0) };
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = ALLOCS.try_with(|c| c.set(c.get() + 1));
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let _ = ALLOCS.try_with(|c| c.set(c.get() + 1));
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocs() -> u64 {
    ALLOCS.with(Cell::get)
}

#[test]
fn a_hit_allocates_nothing() {
    let c = Arc::new(AtomicU64::new(0));
    let op = two_runners(&c);
    let tuner = tuner_for(0, "1", "cpu-a", &c);
    tuner.set_tuning(true);
    for rows in [1, 7, 64, 700] {
        tuner.choose_one(&op, &Rows::new(rows, 16));
    }
    tuner.set_tuning(false);
    // An untuned bucket: the fallback, warned once (allocates the first time).
    tuner.choose_one(&op, &Rows::new(5000, 16));
    // First hit on this thread takes its snapshot copy.
    tuner.choose_one(&op, &Rows::new(1, 16));

    let inputs: Vec<Rows> =
        [1, 7, 5, 64, 100, 700, 1023].iter().map(|&r| Rows::new(r, 16)).collect();
    let fallback_input = Rows::new(5000, 16);
    let before = allocs();
    let mut sum = 0u64;
    for _ in 0..10_000 {
        for i in &inputs {
            let ch = tuner.choose_one(&op, i);
            assert_eq!(ch.source, ChoiceSource::Cache);
            sum += u64::from(ch.runner_index + ch.tactic_index);
        }
        assert_eq!(tuner.choose_one(&op, &fallback_input).source, ChoiceSource::Fallback);
    }
    let after = allocs();
    assert_eq!(after - before, 0, "allocations on the hot path");
    assert!(sum > 0);
    assert_eq!(tuner.stats().total.hits, 70_001);
}

#[test]
fn a_validated_hit_allocates_nothing_after_its_first_use() {
    let c = Arc::new(AtomicU64::new(0));
    let op = two_runners(&c).with_validation();
    let first = tuner_for(0, "1", "cpu-a", &c);
    first.set_tuning(true);
    for rows in [1, 64, 700] {
        first.choose_one(&op, &Rows::new(rows, 16));
    }
    let tuner = tuner_for(0, "1", "cpu-a", &c);
    tuner.load(&first.take_pending());
    // First uses: each cached tactic is checked once (this allocates).
    let inputs: Vec<Rows> = [1, 64, 700].iter().map(|&r| Rows::new(r, 16)).collect();
    for i in &inputs {
        assert_eq!(tuner.choose_one(&op, i).source, ChoiceSource::Cache);
    }
    let before = allocs();
    for _ in 0..10_000 {
        for i in &inputs {
            assert_eq!(tuner.choose_one(&op, i).source, ChoiceSource::Cache);
        }
    }
    assert_eq!(allocs() - before, 0, "allocations on the hot path after validation");
    assert_eq!(tuner.stats().total.hits, 30_003);
}
