//! One rule for a setting given as text — a command's flag, an environment
//! variable, a Python argument: seconds and whole numbers (sizes, counts)
//! are parsed the same way, bounded, and refused with one sentence that
//! names where the text came from and what to give instead:
//!
//! ```text
//! RANKTUNE_LOCK_TIMEOUT="soon" is not a number of seconds; give e.g. 300 or 2.5
//! --candidate-timeout "0" is not a usable time; give a number of seconds above 0, at most 604800, e.g. 30
//! candidate_memory="lots" is not a whole number of MiB; give e.g. 4096
//! ```
//!
//! A variable that is unset or blank is not set ([`from_env`]): its
//! default holds. Owns the parsing and the wording; what a setting means,
//! and which source wins, are the callers'.

use std::ops::RangeInclusive;
use std::time::Duration;

/// A setting that does not parse: where it came from, the text, and what
/// to give instead (its `Display` is the whole sentence).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{} {why}", shown(source_name, text))]
pub struct SettingError {
    /// The flag (`--candidate-timeout`), variable (`RANKTUNE_ISOLATE`) or
    /// argument (`isolate=`) it came from.
    pub source_name: String,
    /// The text given.
    pub text: String,
    why: String,
}

impl SettingError {
    /// The error for `text` from `source`, `why` being the rest of the
    /// sentence (`is not …; give …`).
    pub fn new(source: &str, text: &str, why: impl Into<String>) -> Self {
        SettingError { source_name: source.to_string(), text: text.to_string(), why: why.into() }
    }
}

/// `--flag "text"` for a flag, `argument="text"` for a Python argument
/// (named with its `=`), `VARIABLE="text"` for a variable.
fn shown(source: &str, text: &str) -> String {
    if source.starts_with('-') {
        format!("{source} {text:?}")
    } else if source.ends_with('=') {
        format!("{source}{text:?}")
    } else {
        format!("{source}={text:?}")
    }
}

/// The seconds a setting may take.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Seconds {
    /// Whether 0 is taken (a lock that is tried once, no wait at all).
    pub zero: bool,
    /// The most taken.
    pub max: Duration,
    /// A good value, for the error (`"300"`).
    pub example: &'static str,
}

/// Reads `text` (from `source`) as a number of seconds, fractions taken,
/// within `bounds`.
///
/// ```
/// use ranktune_core::setting::{seconds, Seconds};
/// use std::time::Duration;
/// let b = Seconds { zero: false, max: Duration::from_secs(60), example: "30" };
/// assert_eq!(seconds(" 2.5 ", "--timeout", b).unwrap(), Duration::from_millis(2500));
/// let e = seconds("soon", "T", b).unwrap_err().to_string();
/// assert_eq!(e, "T=\"soon\" is not a number of seconds; give e.g. 30 or 2.5");
/// let e = seconds("0", "t=", b).unwrap_err().to_string();
/// assert_eq!(e, "t=\"0\" is not a usable time; give a number of seconds above 0, at most 60, e.g. 30");
/// ```
pub fn seconds(text: &str, source: &str, bounds: Seconds) -> Result<Duration, SettingError> {
    let Ok(v) = text.trim().parse::<f64>() else {
        let why = format!("is not a number of seconds; give e.g. {} or 2.5", bounds.example);
        return Err(SettingError::new(source, text, why));
    };
    match Duration::try_from_secs_f64(v) {
        Ok(d) if (v > 0.0 || (bounds.zero && v == 0.0)) && d <= bounds.max => Ok(d),
        _ => {
            let least = if bounds.zero { "from 0" } else { "above 0" };
            let why = format!(
                "is not a usable time; give a number of seconds {least}, at most {}, e.g. {}",
                bounds.max.as_secs(),
                bounds.example
            );
            Err(SettingError::new(source, text, why))
        }
    }
}

/// Reads `text` (from `source`) as a whole number of `unit` (`"bytes"`,
/// `"MiB"`, `"ranks"`) within `range`.
///
/// ```
/// use ranktune_core::setting::whole;
/// assert_eq!(whole("512", "RANKTUNE_CANDIDATE_MEMORY", 1..=1024, "MiB", "256").unwrap(), 512);
/// let e = whole("0", "m=", 1..=1024, "MiB", "256").unwrap_err().to_string();
/// assert_eq!(e, "m=\"0\" is not a usable number of MiB; give one from 1 to 1024, e.g. 256");
/// ```
pub fn whole(
    text: &str,
    source: &str,
    range: RangeInclusive<u64>,
    unit: &str,
    example: &str,
) -> Result<u64, SettingError> {
    match text.trim().parse::<u64>() {
        Ok(v) if range.contains(&v) => Ok(v),
        Ok(_) => {
            let span = match *range.end() {
                u64::MAX => format!("from {} up", range.start()),
                end => format!("from {} to {end}", range.start()),
            };
            Err(SettingError::new(
                source,
                text,
                format!("is not a usable number of {unit}; give one {span}, e.g. {example}"),
            ))
        }
        Err(_) => Err(SettingError::new(
            source,
            text,
            format!("is not a whole number of {unit}; give e.g. {example}"),
        )),
    }
}

/// The variable `name` read through `env` and parsed by `parse` (which
/// gets its text and its name); `None` when it is unset or blank.
///
/// ```
/// use ranktune_core::setting::{from_env, seconds, Seconds};
/// use std::time::Duration;
/// let b = Seconds { zero: true, max: Duration::from_secs(60), example: "30" };
/// let env = |v: &'static str| move |_: &str| Some(v.to_string());
/// assert_eq!(from_env(env(" "), "T", |t, s| seconds(t, s, b)).unwrap(), None);
/// assert_eq!(from_env(env("0"), "T", |t, s| seconds(t, s, b)).unwrap(), Some(Duration::ZERO));
/// ```
pub fn from_env<T>(
    env: impl Fn(&str) -> Option<String>,
    name: &str,
    parse: impl Fn(&str, &str) -> Result<T, SettingError>,
) -> Result<Option<T>, SettingError> {
    match env(name) {
        Some(text) if !text.trim().is_empty() => parse(&text, name).map(Some),
        _ => Ok(None),
    }
}

/// This process's environment as [`from_env`] reads it (a value that is
/// not UTF-8 is read lossily, and then fails to parse, named).
pub fn process_env(name: &str) -> Option<String> {
    std::env::var_os(name).map(|v| v.to_string_lossy().into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_source_is_named_as_it_is_written() {
        let b = Seconds { zero: false, max: Duration::from_secs(9), example: "3" };
        for (source, shown) in [("--t", "--t \"x\""), ("T", "T=\"x\""), ("t=", "t=\"x\"")] {
            let e = seconds("x", source, b).unwrap_err().to_string();
            assert!(e.starts_with(&format!("{shown} is not a number of seconds")), "{e}");
        }
    }

    #[test]
    fn bounds_hold_at_both_ends() {
        let b = Seconds { zero: true, max: Duration::from_secs(9), example: "3" };
        assert_eq!(seconds("0", "T", b).unwrap(), Duration::ZERO);
        assert_eq!(seconds("9", "T", b).unwrap(), Duration::from_secs(9));
        for bad in ["9.5", "-1", "nan", "inf", "1e400"] {
            assert!(seconds(bad, "T", b).is_err(), "{bad}");
        }
        let above = Seconds { zero: false, ..b };
        assert!(seconds("0", "T", above).is_err());
        assert!(whole("-1", "N", 0..=3, "ranks", "2").is_err());
        let e = whole("0", "N", 1..=u64::MAX, "entries", "9").unwrap_err().to_string();
        assert_eq!(e, "N=\"0\" is not a usable number of entries; give one from 1 up, e.g. 9");
        assert_eq!(whole(" 3 ", "N", 0..=3, "ranks", "2").unwrap(), 3);
    }
}
