//! The trace clock: one wall-clock base per process, monotonic offsets.
//!
//! The first use fixes the base: the Unix-epoch time in nanoseconds (stored
//! in every trace file as `baseTimeNanoseconds`, like Kineto) paired with a
//! monotonic [`Instant`]. Event times are nanoseconds elapsed since that
//! instant, so they never go backwards within the process, and
//! `baseTimeNanoseconds / 1000 + ts` is the event's absolute time in
//! microseconds since the Unix epoch, comparable across ranks on one host
//! (exactly) and across NTP-synced hosts (to the sync error).
//!
//! This module must never read the wall clock after the base is fixed: a
//! wall-clock step (NTP, an admin) would otherwise reorder events.

use std::sync::OnceLock;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

struct Base {
    instant: Instant,
    unix_ns: u64,
}

static BASE: OnceLock<Base> = OnceLock::new();

fn base() -> &'static Base {
    BASE.get_or_init(|| {
        let instant = Instant::now();
        let unix_ns = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
            .unwrap_or(0);
        Base { instant, unix_ns }
    })
}

/// Fixes the base now if it is not fixed yet (call before recording starts).
pub fn init() {
    base();
}

/// Unix-epoch nanoseconds at the base instant (`baseTimeNanoseconds`).
pub fn base_unix_ns() -> u64 {
    base().unix_ns
}

/// Nanoseconds since the base instant; monotonic within the process.
#[inline]
pub fn now_ns() -> u64 {
    // u64 nanoseconds last 584 years.
    base().instant.elapsed().as_nanos() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_is_near_now_and_offsets_grow() {
        let a = now_ns();
        let b = now_ns();
        assert!(b >= a);
        let wall = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos() as u64;
        let abs = base_unix_ns() + b;
        // Same clock within a minute (generous for a loaded machine).
        assert!(wall.abs_diff(abs) < 60_000_000_000, "wall {wall} abs {abs}");
    }
}
