//! Time for the cache: the clock and the calendar helpers used for the
//! stamps of files set aside, from `ranktune_core::clock`. No I/O, no time
//! zones.

pub(crate) use ranktune_core::clock::{civil_from_days, unix_now, unix_secs};

/// `secs` since the Unix epoch as a UTC date and time people read:
/// `2026-12-02 18:19:00 UTC`.
pub fn unix_label(secs: u64) -> String {
    let days = i64::try_from(secs / 86_400).unwrap_or(i64::MAX / 2);
    let (y, m, d) = civil_from_days(days);
    let rest = secs % 86_400;
    format!("{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02} UTC", rest / 3600, rest / 60 % 60, rest % 60)
}

#[cfg(test)]
mod tests {
    #[test]
    fn labels_are_utc_dates() {
        assert_eq!(super::unix_label(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(super::unix_label(1_796_235_540), "2026-12-02 18:19:00 UTC");
    }
}
