//! Wall-clock time as the files see it: seconds since the Unix epoch.
//!
//! The one helper every crate uses to stamp entries, metadata and messages,
//! and the calendar arithmetic that reads and writes dates (days since
//! 1970-01-01 to and from civil, proleptic Gregorian dates: Howard
//! Hinnant's algorithms; no time zones). Durations and measurements use
//! `std::time::Instant`, never this.
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

/// `(year, month 1..=12, day 1..=31)` of the day `days` after 1970-01-01.
pub fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// Days from 1970-01-01 to the civil date `y-m-d` (the inverse of
/// [`civil_from_days`]).
pub fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_dates_round_trip() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(days_from_civil(2000, 2, 29), 11_016);
        for days in (-800_000..800_000).step_by(997) {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m, d), days);
        }
    }
}
