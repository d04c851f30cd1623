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

fn base() -> &'static Base {
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
#[derive(Clone, Copy, Debug)]
pub struct Scale {
    ns: u64,
    ticks: u64,
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
        if ns == 0 || ticks == 0 {
            return Scale::identity();
        }
        Scale { ns, ticks }
    }

    /// One tick per nanosecond.
    pub fn identity() -> Scale {
        Scale { ns: 1, ticks: 1 }
    }

    /// `ticks` in nanoseconds.
    #[inline]
    pub fn to_ns(self, ticks: u64) -> u64 {
        let v = u128::from(ticks) * u128::from(self.ns) / u128::from(self.ticks);
        u64::try_from(v).unwrap_or(u64::MAX)
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
}
