//! The trace clock: one wall-clock base per process, monotonic ticks.
//!
//! The first use fixes the base: the Unix-epoch time in nanoseconds (stored
//! in every trace file as `baseTimeNanoseconds`, like Kineto) paired with a
//! monotonic [`Instant`]. Events are stamped in *ticks* since that base and
//! converted to nanoseconds at export, so `baseTimeNanoseconds / 1000 + ts`
//! is an event's absolute time in microseconds since the Unix epoch,
//! comparable across ranks on one host and (to the NTP error) across hosts.
//!
//! Ticks are the CPU's time-stamp counter on x86-64 when the kernel itself
//! uses it as its clock source (`/sys/devices/system/clocksource/
//! clocksource0/current_clocksource` is `tsc`: the kernel checked that it is
//! invariant and synchronized across CPUs). Reading it costs a fraction of
//! `Instant::now()`, which matters because every span reads the clock twice.
//! The tick rate is measured against `Instant` over the whole session at
//! each export, so there is no calibration pause and no drift. Anywhere
//! else ticks are plain `Instant` nanoseconds.
//!
//! This module must never read the wall clock after the base is fixed: a
//! wall-clock step (NTP, an admin) would otherwise reorder events.

use std::sync::OnceLock;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

struct Base {
    instant: Instant,
    unix_ns: u64,
    tsc0: u64,
    use_tsc: bool,
}

static BASE: OnceLock<Base> = OnceLock::new();

#[inline]
fn base() -> &'static Base {
    match BASE.get() {
        Some(b) => b,
        None => init_base(),
    }
}

#[cold]
fn init_base() -> &'static Base {
    BASE.get_or_init(|| {
        let use_tsc = tsc::usable();
        let instant = Instant::now();
        let tsc0 = if use_tsc { tsc::read() } else { 0 };
        let unix_ns = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
            .unwrap_or(0);
        Base { instant, unix_ns, tsc0, use_tsc }
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

/// Ticks since the base; monotonic within the process.
#[inline]
pub fn now() -> u64 {
    let b = base();
    if b.use_tsc {
        tsc::read().wrapping_sub(b.tsc0)
    } else {
        b.instant.elapsed().as_nanos() as u64
    }
}

/// Converts ticks to nanoseconds, at the rate measured when it was made.
///
/// The rate is kept as a 64.64 fixed-point number, so a conversion is two
/// multiplications (no 128-bit division per event at export) and exact to
/// within a nanosecond for any tick count.
#[derive(Clone, Copy, Debug)]
pub struct Scale {
    /// Whole nanoseconds per tick.
    int: u64,
    /// Fraction of a nanosecond per tick, in units of 2^-64.
    frac: u64,
}

impl Scale {
    /// The tick rate measured from the base until now.
    pub fn measure() -> Scale {
        let b = base();
        if !b.use_tsc {
            return Scale::identity();
        }
        // Pair an Instant with the counter read halfway around it.
        let t1 = tsc::read();
        let ns = b.instant.elapsed().as_nanos() as u64;
        let t2 = tsc::read();
        let ticks = (t1.wrapping_sub(b.tsc0) / 2).wrapping_add(t2.wrapping_sub(b.tsc0) / 2);
        Scale::ratio(ns, ticks)
    }

    /// `ns` nanoseconds per `ticks` ticks (identity when either is 0).
    fn ratio(ns: u64, ticks: u64) -> Scale {
        if ns == 0 || ticks == 0 {
            return Scale::identity();
        }
        let frac = (u128::from(ns % ticks) << 64) / u128::from(ticks);
        Scale { int: ns / ticks, frac: u64::try_from(frac).unwrap_or(u64::MAX) }
    }

    /// One tick per nanosecond.
    pub fn identity() -> Scale {
        Scale { int: 1, frac: 0 }
    }

    /// `ticks` in nanoseconds.
    #[inline]
    pub fn to_ns(self, ticks: u64) -> u64 {
        let part = (u128::from(ticks) * u128::from(self.frac)) >> 64;
        ticks.saturating_mul(self.int).saturating_add(part as u64)
    }
}

#[cfg(target_arch = "x86_64")]
mod tsc {
    /// Whether the kernel runs its own clock on the TSC.
    pub fn usable() -> bool {
        std::fs::read_to_string("/sys/devices/system/clocksource/clocksource0/current_clocksource")
            .is_ok_and(|s| s.trim() == "tsc")
    }
    #[inline]
    pub fn read() -> u64 {
        // SAFETY: RDTSC is available on every x86-64 CPU and has no
        // memory effects.
        unsafe { core::arch::x86_64::_rdtsc() }
    }
}

#[cfg(not(target_arch = "x86_64"))]
mod tsc {
    pub fn usable() -> bool {
        false
    }
    #[inline]
    pub fn read() -> u64 {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn ticks_convert_to_real_time_near_the_wall_clock() {
        // The scale pairs the counter with the time since the clock's base;
        // with 200 ms behind it, a stall of a few ms in the measurement
        // moves it by a few per mille, not the 10% a 20 ms base would allow.
        let _ = now();
        std::thread::sleep(Duration::from_millis(200));
        let a = now();
        std::thread::sleep(Duration::from_millis(20));
        let b = now();
        assert!(b > a);
        let scale = Scale::measure();
        let slept = scale.to_ns(b - a);
        // At least the sleep; generous upper bound for a loaded machine.
        assert!((19_000_000..5_000_000_000).contains(&slept), "slept {slept} ns");
        let wall = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos() as u64;
        let abs = base_unix_ns() + scale.to_ns(now());
        assert!(wall.abs_diff(abs) < 60_000_000_000, "wall {wall} abs {abs}");
    }

    #[test]
    fn fixed_point_scale_matches_exact_division() {
        for (ns, ticks) in
            [(1, 3), (10_000, 29_999), (7, 7), (5_000_000_000, 1_999_999_999), (3, 1)]
        {
            let s = Scale::ratio(ns, ticks);
            for t in [0_u64, 1, 2, 999, 123_456_789, 1 << 40, 1 << 50] {
                let exact = u128::from(t) * u128::from(ns) / u128::from(ticks);
                let got = u128::from(s.to_ns(t));
                assert!(got.abs_diff(exact) <= 1, "{ns}/{ticks} at {t}: {got} vs {exact}");
            }
        }
        assert_eq!(Scale::identity().to_ns(12_345), 12_345);
        assert_eq!(Scale::ratio(0, 5).to_ns(9), 9);
    }
}
