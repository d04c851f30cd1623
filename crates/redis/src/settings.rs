//! The variables that configure a Redis endpoint, and their one rule: a
//! number of seconds is positive, finite and below 10⁷ (fractions allowed);
//! blank or unset is the default; anything else is an error, never silently
//! the default.
//!
//! Owns the names, the defaults and the parsing. Never connects.

use std::time::Duration;

use crate::RedisError;

/// Environment variable with the Redis password, used when the URL has none
/// (so that it never appears on a command line or in a process listing).
pub const PASSWORD_ENV: &str = "RANKTUNE_REDIS_PASSWORD";
/// Environment variable: seconds to wait for a connection (default 5).
pub const CONNECT_TIMEOUT_ENV: &str = "RANKTUNE_REDIS_CONNECT_TIMEOUT";
/// Environment variable: seconds to wait for each reply (default 30).
pub const TIMEOUT_ENV: &str = "RANKTUNE_REDIS_TIMEOUT";
/// Default connect timeout.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Default reply timeout.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// The seconds in variable `name`, read through `env`, or `default` when it
/// is unset or blank.
///
/// ```
/// use std::time::Duration;
/// use ranktune_redis::seconds_with;
/// let env = |v: &'static str| move |_: &str| Some(v.to_string());
/// assert_eq!(seconds_with(&env("0.5"), "T", Duration::from_secs(5)).unwrap(), Duration::from_millis(500));
/// assert_eq!(seconds_with(&env(" "), "T", Duration::from_secs(5)).unwrap(), Duration::from_secs(5));
/// assert!(seconds_with(&env("0"), "T", Duration::from_secs(5)).is_err());
/// assert!(seconds_with(&env("1e7"), "T", Duration::from_secs(5)).is_err());
/// ```
pub fn seconds_with(
    env: &impl Fn(&str) -> Option<String>,
    name: &'static str,
    default: Duration,
) -> Result<Duration, RedisError> {
    use ranktune_core::setting::{from_env, seconds, Seconds};
    let example: &'static str = if default == DEFAULT_CONNECT_TIMEOUT { "5" } else { "30" };
    // Above 0 (a zero timeout would fail every call) and under 1e7 s.
    let bounds = Seconds { zero: false, max: Duration::from_secs(9_999_999), example };
    Ok(from_env(env, name, |t, s| seconds(t, s, bounds))?.unwrap_or(default))
}

/// The connect timeout ([`CONNECT_TIMEOUT_ENV`]) through `env`.
pub fn connect_timeout_with(env: &impl Fn(&str) -> Option<String>) -> Result<Duration, RedisError> {
    seconds_with(env, CONNECT_TIMEOUT_ENV, DEFAULT_CONNECT_TIMEOUT)
}

/// The reply timeout ([`TIMEOUT_ENV`]) through `env`.
pub fn timeout_with(env: &impl Fn(&str) -> Option<String>) -> Result<Duration, RedisError> {
    seconds_with(env, TIMEOUT_ENV, DEFAULT_TIMEOUT)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_rule_for_every_timeout() {
        let env =
            |v: &'static str| move |n: &str| (n == CONNECT_TIMEOUT_ENV).then(|| v.to_string());
        assert_eq!(connect_timeout_with(&|_: &str| None).unwrap(), DEFAULT_CONNECT_TIMEOUT);
        assert_eq!(connect_timeout_with(&env("0.5")).unwrap(), Duration::from_millis(500));
        assert_eq!(connect_timeout_with(&env("7200")).unwrap(), Duration::from_secs(7200));
        for bad in ["0", "-1", "soon", "inf", "NaN", "1e7"] {
            let err = connect_timeout_with(&env(bad)).unwrap_err().to_string();
            assert!(err.contains(CONNECT_TIMEOUT_ENV) && err.contains(bad), "{err}");
            assert!(err.contains("e.g. 5"), "{err}");
        }
        assert_eq!(timeout_with(&env("x")).unwrap(), DEFAULT_TIMEOUT);
    }
}
