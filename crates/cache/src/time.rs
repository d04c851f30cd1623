//! Time for the cache: the clock and the calendar helpers used for the
//! stamps of files set aside, from `ranktune_core::clock`. No I/O, no time
//! zones.

pub(crate) use ranktune_core::clock::{civil_from_days, unix_now, unix_secs};
