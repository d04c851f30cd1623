//! Durable progress: when a tuning [`Session`](crate::Session) saves the
//! decisions made so far on its own, between buckets, so a job killed
//! outright (SIGKILL, the OOM killer, a node that fails) loses at most the
//! buckets it was measuring.
//!
//! Owns the save policy ([`SaveEvery`]: parsing it from text, a flag and
//! [`SAVE_EVERY_ENV`]) and the clock arithmetic that says whether a save is
//! due ([`Autosave`]). It never saves, reads a store or touches the tuner:
//! the session does that when this module says a save is due.
//!
//! The default, [`SaveEvery::Auto`], keeps the cost of saving a small
//! fraction of tuning time: the first decision is saved at once, and after
//! that a save waits until the time since the last one is at least
//! [`AUTO_SAVE_RATIO`] times what the last one cost (so saving takes at most
//! 1/(1 + 20) ≈ 5% of the time between saves) — but never longer than
//! [`AUTO_SAVE_MAX_WAIT`] (or twice the last save's cost, when saves take
//! longer than half of that): one save that waited long for the lock must
//! not leave minutes of decisions unsaved. A save that failed is tried
//! again no sooner than [`AUTO_SAVE_RATIO`] times what it cost, and at
//! least [`FAILED_RETRY_MIN`] later (with the same cap), under every
//! policy, so a store that is down is not hammered after every bucket.
//!
//! Python's `tuning(save_every=...)`, which reads the same
//! [`SAVE_EVERY_ENV`], uses this module through the bindings: one variable,
//! one meaning, one implementation.

use std::fmt;
use std::time::{Duration, Instant};

/// The environment variable of the save policy: `auto`, `end`, or a number
/// of seconds (`0`: after every bucket). A flag (`--save-every`) wins.
pub const SAVE_EVERY_ENV: &str = "RANKTUNE_SAVE_EVERY";

/// [`SaveEvery::Auto`] saves once the time since the last save is at least
/// this many times what that save cost.
pub const AUTO_SAVE_RATIO: u32 = 20;

/// A save that failed is not tried again for at least this long.
pub const FAILED_RETRY_MIN: Duration = Duration::from_secs(1);

/// The longest [`SaveEvery::Auto`] (and a failed save's retry) waits: one
/// slow save (a long wait for the lock) must not push the next one out by
/// 20 times that. Saves that cost more than half of it wait twice their
/// cost instead (saving then takes at most a third of the time).
pub const AUTO_SAVE_MAX_WAIT: Duration = Duration::from_secs(60);

/// How long after a save (or a failed one) that cost `cost` the next may
/// run: `ratio × cost` (at least `floor`), capped by [`AUTO_SAVE_MAX_WAIT`]
/// or twice the cost, whichever is longer.
fn wait_after(cost: Duration, floor: Duration) -> Duration {
    let cap = AUTO_SAVE_MAX_WAIT.max(cost.saturating_mul(2));
    cost.saturating_mul(AUTO_SAVE_RATIO).max(floor).min(cap)
}

/// When a session saves the decisions made so far, at each
/// [`Session::checkpoint`](crate::Session::checkpoint).
///
/// ```
/// use ranktune_tune::SaveEvery;
/// use std::time::Duration;
/// assert_eq!(SaveEvery::parse("auto", "--save-every").unwrap(), SaveEvery::Auto);
/// assert_eq!(SaveEvery::parse("2.5", "--save-every").unwrap(), SaveEvery::Every(Duration::from_millis(2500)));
/// assert_eq!(SaveEvery::parse("0", "--save-every").unwrap().to_string(), "0");
/// let e = SaveEvery::parse("often", "--save-every").unwrap_err().to_string();
/// assert!(e.starts_with("--save-every \"often\" is not a save policy"), "{e}");
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SaveEvery {
    /// Save the first decision at once, then whenever the time since the
    /// last save is at least [`AUTO_SAVE_RATIO`] times what it cost.
    #[default]
    Auto,
    /// Save the first decision at once, then once this long has passed
    /// since the last save; `Duration::ZERO` saves after every decision.
    Every(Duration),
    /// Save only when the session ends (`finish`, drop, a signal): a killed
    /// job loses everything it tuned.
    End,
}

impl SaveEvery {
    /// Parses `auto`, `end`, or a number of seconds (`0`, `30`, `2.5`; any
    /// finite number from 0 up, one too large for a `Duration` meaning
    /// never). `source` names where the text came from (a flag such as
    /// `--save-every`, or a variable such as [`SAVE_EVERY_ENV`]) for the
    /// error, which says what to give instead.
    pub fn parse(text: &str, source: &str) -> Result<SaveEvery, SaveEveryError> {
        let bad = || SaveEveryError { origin: source.to_string(), text: text.to_string() };
        match text.trim().to_ascii_lowercase().as_str() {
            "auto" => return Ok(SaveEvery::Auto),
            "end" => return Ok(SaveEvery::End),
            _ => {}
        }
        let secs: f64 = text.trim().parse().map_err(|_| bad())?;
        if !(secs.is_finite() && secs >= 0.0) {
            return Err(bad());
        }
        Ok(SaveEvery::Every(Duration::try_from_secs_f64(secs).unwrap_or(Duration::MAX)))
    }

    /// The policy a flag and the environment ask for: the flag's text when
    /// given, else [`SAVE_EVERY_ENV`], else [`SaveEvery::Auto`]. `flag`
    /// names the flag in errors.
    pub fn resolve(text: Option<&str>, flag: &str) -> Result<SaveEvery, SaveEveryError> {
        Self::resolve_with(text, flag, |name| match std::env::var(name) {
            Ok(v) => Some(v),
            Err(std::env::VarError::NotPresent) => None,
            // Not text: parsing it fails and names the variable.
            Err(std::env::VarError::NotUnicode(v)) => Some(v.to_string_lossy().into_owned()),
        })
    }

    /// Like [`SaveEvery::resolve`], reading variables through `env`.
    pub fn resolve_with(
        text: Option<&str>,
        flag: &str,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<SaveEvery, SaveEveryError> {
        if let Some(t) = text {
            return SaveEvery::parse(t, flag);
        }
        match env(SAVE_EVERY_ENV).filter(|v| !v.trim().is_empty()) {
            Some(v) => SaveEvery::parse(&v, SAVE_EVERY_ENV),
            None => Ok(SaveEvery::Auto),
        }
    }
}

/// As [`SaveEvery::parse`] reads it: `auto`, `end`, or the seconds.
impl fmt::Display for SaveEvery {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SaveEvery::Auto => f.write_str("auto"),
            SaveEvery::End => f.write_str("end"),
            SaveEvery::Every(d) => write!(f, "{}", d.as_secs_f64()),
        }
    }
}

/// A save policy that does not parse: where it came from and the text.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "{} is not a save policy; give auto (save new choices once the time since the last save \
     is 20 times what it cost; the default), end (only when tuning ends), or a number of \
     seconds between saves, e.g. 30 (0: after every bucket)",
    shown(origin, text)
)]
pub struct SaveEveryError {
    /// The flag or variable it came from.
    pub origin: String,
    /// The text given.
    pub text: String,
}

/// `--flag "text"` for a flag, `VARIABLE="text"` for a variable.
fn shown(source: &str, text: &str) -> String {
    if source.starts_with('-') {
        format!("{source} {text:?}")
    } else {
        format!("{source}={text:?}")
    }
}

/// The state of a policy in a session: when the last save ended, what it
/// cost, and when a failed one may be tried again. Times are passed in, so
/// the arithmetic is tested without a clock. A [`Session`](crate::Session)
/// keeps one; Python's `tuning()` keeps one through the bindings.
///
/// ```
/// use ranktune_tune::{Autosave, SaveEvery};
/// use std::time::{Duration, Instant};
/// let t0 = Instant::now();
/// let mut a = Autosave::new(SaveEvery::Auto);
/// assert!(a.due(t0)); // the first decision is saved at once
/// a.saved(t0, t0 + Duration::from_millis(10), true);
/// assert!(!a.due(t0 + Duration::from_millis(100)));
/// assert!(a.due(t0 + Duration::from_millis(210))); // 20 × 10 ms after it ended
/// ```
#[derive(Clone, Debug)]
pub struct Autosave {
    policy: SaveEvery,
    /// The last successful save: when it ended, and what it cost.
    last: Option<(Instant, Duration)>,
    /// After a failed save: not before this.
    retry_at: Option<Instant>,
}

impl Autosave {
    /// A policy's state in a session that has not saved yet.
    pub fn new(policy: SaveEvery) -> Self {
        Autosave { policy, last: None, retry_at: None }
    }

    /// The policy.
    pub fn policy(&self) -> SaveEvery {
        self.policy
    }

    /// Whether a checkpoint at `now` should save (when anything is pending).
    pub fn due(&self, now: Instant) -> bool {
        if self.retry_at.is_some_and(|t| now < t) {
            return false;
        }
        match (self.policy, self.last) {
            (SaveEvery::End, _) => false,
            // The first decision is saved at once.
            (_, None) => true,
            (SaveEvery::Auto, Some((at, cost))) => {
                now.saturating_duration_since(at) >= wait_after(cost, Duration::ZERO)
            }
            (SaveEvery::Every(d), Some((at, _))) => now.saturating_duration_since(at) >= d,
        }
    }

    /// The first instant at which [`due`](Autosave::due) says yes (`None`:
    /// never before the session ends, under [`SaveEvery::End`]), for a
    /// caller that saves on a timer rather than between buckets (Python's
    /// deferred save). Before the first save that is any time: it returns
    /// `now` then, and after a failed save the retry time when that is
    /// later than the policy's.
    pub fn next_due(&self, now: Instant) -> Option<Instant> {
        let by_policy = match (self.policy, self.last) {
            (SaveEvery::End, _) => return None,
            (_, None) => now,
            (SaveEvery::Auto, Some((at, cost))) => {
                at.checked_add(wait_after(cost, Duration::ZERO))?
            }
            (SaveEvery::Every(d), Some((at, _))) => at.checked_add(d)?,
        };
        Some(match self.retry_at {
            Some(r) if r > by_policy => r,
            _ => by_policy,
        })
    }

    /// A save ran from `started` to `ended`; `ok` says whether it worked.
    pub fn saved(&mut self, started: Instant, ended: Instant, ok: bool) {
        let cost = ended.saturating_duration_since(started);
        if ok {
            self.last = Some((ended, cost));
            self.retry_at = None;
        } else {
            self.retry_at = Some(ended + wait_after(cost, FAILED_RETRY_MIN));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn parses_words_and_seconds_and_says_what_to_give() {
        for (text, want) in [
            ("auto", SaveEvery::Auto),
            (" AUTO ", SaveEvery::Auto),
            ("end", SaveEvery::End),
            ("0", SaveEvery::Every(Duration::ZERO)),
            ("30", SaveEvery::Every(Duration::from_secs(30))),
            ("0.25", SaveEvery::Every(ms(250))),
            ("1e30", SaveEvery::Every(Duration::MAX)),
        ] {
            assert_eq!(SaveEvery::parse(text, "--save-every"), Ok(want), "{text:?}");
            // What Display writes parses back to the same policy.
            assert_eq!(SaveEvery::parse(&want.to_string(), "x"), Ok(want));
        }
        for bad in ["", "x", "-1", "-0.5", "NaN", "inf", "10s", "every"] {
            let e = SaveEvery::parse(bad, "--save-every").unwrap_err().to_string();
            assert!(e.starts_with(&format!("--save-every {bad:?} is not a save policy")), "{e}");
            assert!(e.contains("auto") && e.contains("end") && e.contains("e.g. 30"), "{e}");
            let e = SaveEvery::parse(bad, SAVE_EVERY_ENV).unwrap_err().to_string();
            assert!(e.starts_with(&format!("RANKTUNE_SAVE_EVERY={bad:?} is not")), "{e}");
        }
    }

    #[test]
    fn the_flag_wins_over_the_variable_and_auto_is_the_default() {
        let env = |v: &'static str| move |n: &str| (n == SAVE_EVERY_ENV).then(|| v.to_string());
        let none = |_: &str| None;
        assert_eq!(SaveEvery::resolve_with(None, "--save-every", none), Ok(SaveEvery::Auto));
        assert_eq!(SaveEvery::resolve_with(None, "--save-every", env(" ")), Ok(SaveEvery::Auto));
        assert_eq!(SaveEvery::resolve_with(None, "--save-every", env("end")), Ok(SaveEvery::End));
        assert_eq!(
            SaveEvery::resolve_with(Some("0"), "--save-every", env("end")),
            Ok(SaveEvery::Every(Duration::ZERO))
        );
        // A bad variable is an error naming it, unless the flag is given.
        let e = SaveEvery::resolve_with(None, "--save-every", env("soon")).unwrap_err();
        assert_eq!(e.origin, SAVE_EVERY_ENV);
        assert!(SaveEvery::resolve_with(Some("auto"), "--save-every", env("soon")).is_ok());
        // A bad flag names the flag.
        let e = SaveEvery::resolve_with(Some("-3"), "--save-every", none).unwrap_err();
        assert_eq!(e.origin, "--save-every");
    }

    #[test]
    fn auto_saves_the_first_decision_at_once_then_after_twenty_times_the_cost() {
        let t0 = Instant::now();
        let mut a = Autosave::new(SaveEvery::Auto);
        assert!(a.due(t0), "the first decision is saved at once");
        // The save took 10 ms: the next one is due 200 ms after it ended.
        a.saved(t0, t0 + ms(10), true);
        assert!(!a.due(t0 + ms(10)));
        assert!(!a.due(t0 + ms(209)));
        assert!(a.due(t0 + ms(210)));
        // A save that cost 50 ms pushes the next one 1 s out.
        a.saved(t0 + ms(210), t0 + ms(260), true);
        assert!(!a.due(t0 + ms(1259)));
        assert!(a.due(t0 + ms(1260)));
    }

    #[test]
    fn auto_keeps_saving_at_most_a_twentyfirst_of_the_time() {
        // Buckets of 3 ms, saves of 20 ms: simulate 10 s of tuning.
        let t0 = Instant::now();
        let mut a = Autosave::new(SaveEvery::Auto);
        let (mut now, mut saving, mut saves) = (t0, Duration::ZERO, 0);
        while now < t0 + Duration::from_secs(10) {
            now += ms(3);
            if a.due(now) {
                a.saved(now, now + ms(20), true);
                now += ms(20);
                saving += ms(20);
                saves += 1;
            }
        }
        // 20 ms of every ≥ 420 ms after the first save (1/21), and the
        // first decision saved at once: at most 5% in all.
        let share = saving.as_secs_f64() / now.saturating_duration_since(t0).as_secs_f64();
        assert!(share <= 0.05, "{share}");
        assert!(saves >= 20, "{saves}");
    }

    #[test]
    fn one_slow_save_never_leaves_more_than_a_minute_unsaved() {
        let t0 = Instant::now();
        let mut a = Autosave::new(SaveEvery::Auto);
        // A save that waited 10 s for the lock: the next is due after the
        // cap (60 s), not 200 s.
        a.saved(t0, t0 + Duration::from_secs(10), true);
        let end = t0 + Duration::from_secs(10);
        assert!(!a.due(end + Duration::from_secs(59)));
        assert!(a.due(end + AUTO_SAVE_MAX_WAIT));
        // Saves slower than half the cap wait twice their cost.
        a.saved(end, end + Duration::from_secs(45), true);
        let end = end + Duration::from_secs(45);
        assert!(!a.due(end + Duration::from_secs(89)));
        assert!(a.due(end + Duration::from_secs(90)));
    }

    #[test]
    fn every_saves_the_first_decision_at_once_then_counts_from_the_last_save() {
        let t0 = Instant::now();
        let mut a = Autosave::new(SaveEvery::Every(ms(100)));
        assert!(a.due(t0), "the first decision is saved at once");
        a.saved(t0, t0 + ms(30), true);
        assert!(!a.due(t0 + ms(129)));
        assert!(a.due(t0 + ms(130)));
        let a = Autosave::new(SaveEvery::Every(Duration::MAX));
        assert!(a.due(t0), "even when the interval is never");
    }

    #[test]
    fn next_due_is_the_first_instant_due_says_yes() {
        let t0 = Instant::now();
        for policy in [SaveEvery::Auto, SaveEvery::Every(ms(100)), SaveEvery::Every(ms(0))] {
            let mut a = Autosave::new(policy);
            assert_eq!(a.next_due(t0), Some(t0), "{policy}: the first at once");
            a.saved(t0, t0 + ms(10), true);
            let next = a.next_due(t0 + ms(10)).unwrap();
            assert!(a.due(next) && (next == t0 + ms(10) || !a.due(next - ms(1))), "{policy}");
            a.saved(next, next + ms(3), false);
            let retry = a.next_due(next + ms(3)).unwrap();
            assert_eq!(retry, next + ms(3) + FAILED_RETRY_MIN, "{policy}: the back-off");
            assert!(a.due(retry) && !a.due(retry - ms(1)), "{policy}");
        }
        assert_eq!(Autosave::new(SaveEvery::End).next_due(t0), None);
        // "Never" as an interval: no instant, no overflow.
        let mut a = Autosave::new(SaveEvery::Every(Duration::MAX));
        a.saved(t0, t0, true);
        assert_eq!(a.next_due(t0), None);
    }

    #[test]
    fn end_never_saves_on_a_checkpoint() {
        let t0 = Instant::now();
        let mut a = Autosave::new(SaveEvery::End);
        assert!(!a.due(t0));
        a.saved(t0, t0, true);
        assert!(!a.due(t0 + Duration::from_secs(3600)));
    }

    #[test]
    fn a_failed_save_is_retried_later_under_every_policy() {
        let t0 = Instant::now();
        for policy in [SaveEvery::Auto, SaveEvery::Every(Duration::ZERO)] {
            let mut a = Autosave::new(policy);
            // A fast failure (connection refused): at least FAILED_RETRY_MIN.
            a.saved(t0, t0 + ms(2), false);
            assert!(!a.due(t0 + ms(500)), "{policy}");
            assert!(a.due(t0 + ms(2) + FAILED_RETRY_MIN), "{policy}");
            // A slow failure (a timeout of 2 s): 20 times that.
            a.saved(t0, t0 + Duration::from_secs(2), false);
            assert!(!a.due(t0 + Duration::from_secs(41)), "{policy}");
            assert!(a.due(t0 + Duration::from_secs(42)), "{policy}");
            // Slower (5 s): capped at AUTO_SAVE_MAX_WAIT, not 100 s.
            a.saved(t0, t0 + Duration::from_secs(5), false);
            assert!(!a.due(t0 + Duration::from_secs(64)), "{policy}");
            assert!(a.due(t0 + Duration::from_secs(65)), "{policy}");
            // Success clears the wait.
            a.saved(t0 + Duration::from_secs(105), t0 + Duration::from_secs(105), true);
            assert!(a.due(t0 + Duration::from_secs(105)), "{policy}");
        }
    }
}
