//! Wall-clock time as the files see it: seconds since the Unix epoch.
//!
//! The one helper every crate uses to stamp entries, metadata and messages.
//! Durations and measurements use `std::time::Instant`, never this.
//!
//! ```
//! assert!(ranktune_core::clock::unix_now() > 1_600_000_000);
//! ```

use std::time::SystemTime;

/// Seconds since the Unix epoch (0 if the clock is before it).
pub fn unix_now() -> u64 {
    unix_secs(SystemTime::now())
}

/// Seconds since the Unix epoch of `t` (0 if before it).
pub fn unix_secs(t: SystemTime) -> u64 {
    t.duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_secs())
}
