//! The iteration window: which iterations a session keeps.
//!
//! Parsed from `RANKTUNE_PROFILE_ITERS` (alias `TLLM_PROFILE_START_STOP`):
//! comma-separated items, each a range `A-B` or a single iteration `N`.
//!
//! **Both ends are included**: `10-20` keeps iterations 10, 11, …, 20 (eleven
//! iterations) and `7` keeps iteration 7 alone (it means `7-7`). This differs
//! from TensorRT-LLM, which records `A..B-1` for `A-B` and whose single form
//! records nothing; with both ends included the single form and the range
//! form agree. Iterations count from 0: the code between session start and
//! the first `step()` is iteration 0.
//!
//! This module only parses and answers "is iteration N inside?"; it never
//! touches the clock or the recorder.

use super::TraceError;
use std::fmt;
use std::str::FromStr;

/// A set of iterations to record, as inclusive ranges.
///
/// ```
/// use ranktune_trace::IterWindow;
/// let w: IterWindow = "10-20,100-105".parse().unwrap();
/// assert!(w.contains(10) && w.contains(20) && w.contains(103));
/// assert!(!w.contains(21) && !w.contains(9));
/// let single: IterWindow = "7".parse().unwrap();
/// assert!(single.contains(7) && !single.contains(8));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IterWindow {
    /// Inclusive `(first, last)` ranges, sorted by `first`.
    ranges: Vec<(u64, u64)>,
}

impl IterWindow {
    /// Parses a window; `var` names its source in the error message.
    pub fn parse_from(var: &str, value: &str) -> Result<IterWindow, TraceError> {
        let bad = |reason: String| TraceError::BadWindow {
            var: var.to_string(),
            value: value.to_string(),
            reason,
        };
        if value.trim().is_empty() {
            return Err(bad("it is empty".into()));
        }
        let mut ranges = Vec::new();
        for item in value.split(',') {
            let item = item.trim();
            if item.is_empty() {
                return Err(bad("it has an empty item between commas".into()));
            }
            let number = |s: &str| -> Result<u64, TraceError> {
                let s = s.trim();
                if s.is_empty() {
                    return Err(bad(format!("range {item:?} is missing a number")));
                }
                if !s.bytes().all(|b| b.is_ascii_digit()) {
                    return Err(bad(format!("{s:?} is not a non-negative whole number")));
                }
                s.parse::<u64>().map_err(|_| bad(format!("{s} is too large")))
            };
            let (first, last) = match item.split_once('-') {
                Some((a, b)) => (number(a)?, number(b)?),
                None => {
                    let n = number(item)?;
                    (n, n)
                }
            };
            if first > last {
                return Err(bad(format!("range {item:?} ends before it starts")));
            }
            ranges.push((first, last));
        }
        ranges.sort_unstable();
        Ok(IterWindow { ranges })
    }

    /// Whether iteration `iter` is recorded.
    pub fn contains(&self, iter: u64) -> bool {
        self.ranges.iter().any(|&(a, b)| a <= iter && iter <= b)
    }

    /// The last iteration recorded; after it nothing more is kept.
    pub fn last(&self) -> u64 {
        self.ranges.iter().map(|&(_, b)| b).max().unwrap_or(0)
    }

    /// The inclusive ranges, sorted by start.
    pub fn ranges(&self) -> &[(u64, u64)] {
        &self.ranges
    }
}

impl FromStr for IterWindow {
    type Err = TraceError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        IterWindow::parse_from("window", s)
    }
}

impl fmt::Display for IterWindow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, &(a, b)) in self.ranges.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            if a == b {
                write!(f, "{a}")?;
            } else {
                write!(f, "{a}-{b}")?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(s: &str) -> IterWindow {
        s.parse().unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    #[test]
    fn good_windows() {
        let table: &[(&str, &[u64], &[u64])] = &[
            ("10-20", &[10, 11, 15, 20], &[0, 9, 21, 100]),
            ("10-20,100-105", &[10, 20, 100, 105], &[9, 21, 99, 106]),
            ("7", &[7], &[6, 8]),
            ("0", &[0], &[1]),
            ("5-5", &[5], &[4, 6]),
            (" 3 - 4 , 9 ", &[3, 4, 9], &[2, 5, 8, 10]),
            ("100-105,10-20", &[10, 105], &[50]),
            ("1-3,2-5", &[1, 4, 5], &[0, 6]),
            ("18446744073709551615", &[u64::MAX], &[0]),
        ];
        for (text, inside, outside) in table {
            let win = w(text);
            for &i in *inside {
                assert!(win.contains(i), "{text} should contain {i}");
            }
            for &i in *outside {
                assert!(!win.contains(i), "{text} should not contain {i}");
            }
        }
        assert_eq!(w("100-105,10-20").to_string(), "10-20,100-105");
        assert_eq!(w("7").to_string(), "7");
        assert_eq!(w("10-20,100-105").last(), 105);
    }

    #[test]
    fn malformed_windows_are_clear_errors() {
        for bad in [
            "",
            " ",
            "abc",
            "10-",
            "-5",
            "20-10",
            "1-2-3",
            "10-20,",
            ",5",
            "1,,2",
            "1.5",
            "+3",
            "0x10",
            "99999999999999999999",
            "5 6",
            "-",
        ] {
            let err = IterWindow::parse_from("RANKTUNE_PROFILE_ITERS", bad).unwrap_err();
            let msg = err.to_string();
            assert!(msg.starts_with("RANKTUNE_PROFILE_ITERS="), "{bad:?}: {msg}");
            assert!(msg.contains("10-20"), "message shows the form: {msg}");
        }
        let msg = w_err("20-10");
        assert!(msg.contains("ends before it starts"), "{msg}");
    }

    fn w_err(s: &str) -> String {
        s.parse::<IterWindow>().unwrap_err().to_string()
    }
}
