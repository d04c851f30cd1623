//! A child made by `fork` after a trace started never writes its parent's
//! trace: its stop (and its drop, and any export) is refused with
//! `TraceError::ForkedChild`, and the parent's file holds every span the
//! parent recorded after the fork. A binary of its own: it forks.

mod trace_support;

use ranktune_core::rank::{RankInfo, RankSource};
use ranktune_trace as trace;
use ranktune_trace::{TraceConfig, TraceError, TraceSession};
use trace_support::{check_trace, named};

#[test]
fn a_forked_child_never_writes_the_parents_trace() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = TraceConfig::new(dir.path().join("trace.json"));
    cfg.handle_signals = false;
    let rank = RankInfo { rank: 0, world_size: 1, local_rank: 0, source: RankSource::Explicit };
    let session = TraceSession::start(cfg, &rank).unwrap();
    for _ in 0..4 {
        let _s = trace::span("before_fork", "test");
    }
    // SAFETY: the child only records spans, stops the session and exits
    // with _exit; it touches no lock another thread could hold but the
    // allocator's, which glibc resets at fork.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        for _ in 0..10 {
            let _s = trace::span("in_child", "test");
        }
        let code = match session.stop() {
            Err(TraceError::ForkedChild { .. }) => 0,
            Ok(_) => 10,
            Err(_) => 11,
        };
        // SAFETY: ends the child without running the parent's atexit or
        // test-harness code.
        unsafe { libc::_exit(code) };
    }
    let mut status = 0;
    // SAFETY: waits for the child made above.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    assert!(libc::WIFEXITED(status), "child status {status}");
    assert_eq!(libc::WEXITSTATUS(status), 0, "the child's stop was not refused as a forked child");
    // The child wrote nothing: no file yet.
    assert!(!dir.path().join("trace_0.json").exists(), "the child wrote the parent's trace");
    for _ in 0..500 {
        let _s = trace::span("after_fork", "test");
    }
    let path = session.stop().unwrap();
    let doc = check_trace(&path, 0, 1);
    assert_eq!(named(&doc, "before_fork").len(), 4);
    assert_eq!(named(&doc, "after_fork").len(), 500);
    assert!(named(&doc, "in_child").is_empty());
}
