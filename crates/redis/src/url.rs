//! The Redis URL: `redis://[user[:password]@]host[:port][/db][?prefix=NAME]`,
//! or `rediss://…` for TLS.
//!
//! The one parser of such URLs in ranktune (the client library is handed
//! parsed parts, never a string), the one prefix rule (1–200 of
//! `A-Z a-z 0-9 . _ - / :`), and the one redaction: [`RedisUrl`]'s `Display`
//! and `Debug` write `***` for the password, and [`redact_text`] hides it in
//! text that did not parse. The user information runs to the last `@`, so a
//! password holding `/`, `?`, `#` or `@` is still taken for a password (and
//! hidden), never for the host, the database or the query.
//!
//! Owns the syntax. Never connects and never reads a variable.

use std::fmt;

use crate::RedisError;

/// The prefix a URL without `?prefix=` gets.
pub const DEFAULT_PREFIX: &str = "ranktune";

/// A parsed Redis URL. The password is kept out of `Display` and `Debug`.
///
/// ```
/// use ranktune_redis::RedisUrl;
/// let u = RedisUrl::parse("rediss://al%40ice:p%3Ass@[::1]:7000/3/?prefix=team/a").unwrap();
/// assert!(u.tls);
/// assert_eq!((u.host.as_str(), u.port, u.db, u.user.as_deref()), ("::1", 7000, 3, Some("al@ice")));
/// assert_eq!(u.password(), Some("p:ss"));
/// assert_eq!(u.to_string(), "rediss://al%40ice:***@[::1]:7000/3?prefix=team/a");
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct RedisUrl {
    /// `rediss://` (TLS).
    pub tls: bool,
    /// Host name or address (IPv6 without brackets).
    pub host: String,
    /// Port (6379 when the URL names none).
    pub port: u16,
    /// Database number (0 when the URL names none).
    pub db: u32,
    /// ACL user name, if any.
    pub user: Option<String>,
    /// Password from the URL, if any.
    password: Option<String>,
    /// Key prefix: every key under this endpoint starts with it.
    pub prefix: String,
}

/// Whether `location` names a Redis server (`redis://…` or `rediss://…`,
/// case-insensitive, leading blanks ignored) rather than a path.
///
/// Deliberately minimal: the scheme decides; [`RedisUrl::parse`] says
/// whether the rest is right.
///
/// ```
/// use ranktune_redis::is_redis_url;
/// assert!(is_redis_url("redis://127.0.0.1:6379/0?prefix=t"));
/// assert!(is_redis_url("REDISS://cache.example:6380"));
/// assert!(!is_redis_url("/shared/redis://odd-but-a-path.json"));
/// assert!(!is_redis_url("cache.json"));
/// ```
pub fn is_redis_url(location: &str) -> bool {
    scheme_tls(location.trim_start()).is_some()
}

/// `Some(tls)` when `text` starts with `redis://` (`false`) or `rediss://`
/// (`true`), case-insensitive.
fn scheme_tls(text: &str) -> Option<bool> {
    let (scheme, _) = text.split_once("://")?;
    match scheme.to_ascii_lowercase().as_str() {
        "redis" => Some(false),
        "rediss" => Some(true),
        _ => None,
    }
}

impl RedisUrl {
    /// Parses a `redis://` or `rediss://` URL. The error's reason never
    /// holds the password; name the text with [`redact_text`].
    pub fn parse(text: &str) -> Result<RedisUrl, RedisError> {
        let Some(tls) = scheme_tls(text) else {
            return Err(url_error("it is not a redis:// or rediss:// URL"));
        };
        let rest = &text[text.find("://").map_or(0, |i| i + 3)..];
        parse_rest(rest, tls).map_err(|e| scrub(e, rest))
    }

    /// Whether a password was given in the URL.
    pub fn has_password(&self) -> bool {
        self.password.is_some()
    }

    /// The password given in the URL, if any (to hand to a child process
    /// through `RANKTUNE_REDIS_PASSWORD`; never print it).
    pub fn password(&self) -> Option<&str> {
        self.password.as_deref()
    }

    /// The password to send: the URL's, else the variable
    /// [`PASSWORD_ENV`](crate::PASSWORD_ENV) read through `env` (if set and
    /// not empty). Never print it.
    pub fn password_or_env_with(&self, env: &impl Fn(&str) -> Option<String>) -> Option<String> {
        self.password.clone().or_else(|| env(crate::PASSWORD_ENV).filter(|p| !p.is_empty()))
    }

    /// The same location without the URL's password: its `Display` is a
    /// URL that can be given to another process, which then takes the
    /// password from `RANKTUNE_REDIS_PASSWORD`.
    pub fn without_password(&self) -> RedisUrl {
        RedisUrl { password: None, ..self.clone() }
    }
}

impl fmt::Display for RedisUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.tls { "rediss://" } else { "redis://" })?;
        match (&self.user, &self.password) {
            (Some(u), Some(_)) => write!(f, "{}:***@", encode(u))?,
            (Some(u), None) => write!(f, "{}@", encode(u))?,
            (None, Some(_)) => f.write_str(":***@")?,
            (None, None) => {}
        }
        if self.host.contains(':') {
            write!(f, "[{}]", self.host)?;
        } else {
            f.write_str(&self.host)?;
        }
        write!(f, ":{}/{}?prefix={}", self.port, self.db, self.prefix)
    }
}

impl fmt::Debug for RedisUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RedisUrl({self})")
    }
}

/// `e` with no echo of the user information: when the text holds an `@`
/// and the reason could quote what lies before it (the user information was
/// not recognised, or the reason holds part of it), the reason becomes a
/// fixed sentence that quotes nothing.
fn scrub(e: RedisError, rest: &str) -> RedisError {
    let Some(at) = rest.rfind('@') else { return e };
    let RedisError::Url { reason } = &e else { return e };
    let secret = &rest[..at];
    let echoes = split_userinfo(rest).0.is_none()
        || secret.split(':').skip(1).any(|p| !p.is_empty() && reason.contains(p));
    if echoes {
        url_error(
            "its user information (before the last `@`) or the host part after it is malformed \
             (expected redis://[user[:password]@]host[:port][/db][?prefix=P]; a password may \
             also be given in RANKTUNE_REDIS_PASSWORD)",
        )
    } else {
        e
    }
}

fn url_error(reason: impl Into<String>) -> RedisError {
    RedisError::Url { reason: reason.into() }
}

/// Splits what follows `://` into the user information and the rest. The
/// user information runs to the last `@` provided the user name (before the
/// first `:`) holds no `/`, `?` or `#`, and — when the part before the `@`
/// holds one of those — something follows the `@` (so `redis://h/0?x=@` has
/// none). A password may hold any character.
fn split_userinfo(rest: &str) -> (Option<&str>, &str) {
    let Some(at) = rest.rfind('@') else { return (None, rest) };
    let (userinfo, after) = (&rest[..at], &rest[at + 1..]);
    let user = userinfo.split(':').next().unwrap_or("");
    let plain = !userinfo.contains(['/', '?', '#']);
    if user.contains(['/', '?', '#']) || (!plain && after.is_empty()) {
        return (None, rest);
    }
    (Some(userinfo), after)
}

/// `text` with the password of anything that looks like a URL in it
/// replaced by `***` (the user information's part after its first `:`, and
/// any `pass=` or `password=` query value): how an unparsable URL is named
/// in an error without printing its password. Text without `://` comes back
/// unchanged.
///
/// ```
/// use ranktune_redis::redact_text;
/// assert_eq!(redact_text("redis://u:s3cret@h:6379/0"), "redis://u:***@h:6379/0");
/// assert_eq!(redact_text("redis://:s3cret@h/1?prefix=t"), "redis://:***@h/1?prefix=t");
/// assert_eq!(redact_text("redis://h:6379?password=x&prefix=t"), "redis://h:6379?password=***&prefix=t");
/// assert_eq!(redact_text("redis://u:a/b?c#d@h:1/x"), "redis://u:***@h:1/x");
/// assert_eq!(redact_text("redis://h:6379/0"), "redis://h:6379/0");
/// ```
pub fn redact_text(text: &str) -> String {
    let Some(start) = text.find("://").map(|i| i + 3) else { return text.to_string() };
    // Independent of the URL parsing: everything between `://` and the last
    // `@` is user information, whatever it holds, so a password with `/`,
    // `?`, `#` or `@` in it is never echoed, even when the URL is refused.
    let rest = &text[start..];
    let (userinfo, after) = match rest.rfind('@') {
        Some(at) => (Some(&rest[..at]), &rest[at + 1..]),
        None => (None, rest),
    };
    let mut out = text[..start].to_string();
    if let Some(userinfo) = userinfo {
        match userinfo.split_once(':') {
            Some((user, _)) if !user.contains(['/', '?', '#']) => {
                out.push_str(user);
                out.push_str(":***");
            }
            Some(_) => out.push_str("***"),
            None if userinfo.contains(['/', '?', '#']) => out.push_str("***"),
            None => out.push_str(userinfo),
        }
        out.push('@');
    }
    match after.split_once('?') {
        Some((path, query)) => {
            let redacted: Vec<String> = query
                .split('&')
                .map(|pair| match pair.split_once('=') {
                    Some((k, _))
                        if ["pass", "password"].contains(&k.to_ascii_lowercase().as_str()) =>
                    {
                        format!("{k}=***")
                    }
                    _ => pair.to_string(),
                })
                .collect();
            out.push_str(path);
            out.push('?');
            out.push_str(&redacted.join("&"));
        }
        None => out.push_str(after),
    }
    out
}

/// Percent-decodes `s` (`%40` → `@`), refusing malformed escapes and
/// results that are not UTF-8.
fn decode(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = s.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// Percent-encodes what would break the URL's structure.
fn encode(s: &str) -> String {
    let mut out = String::new();
    for c in s.chars() {
        match c {
            ':' | '@' | '/' | '?' | '#' | '%' | ' ' => out.push_str(&format!("%{:02X}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

/// Whether a prefix is acceptable: 1–200 of `A-Z a-z 0-9 . _ - / :`.
pub(crate) fn valid_prefix(p: &str) -> bool {
    !p.is_empty()
        && p.len() <= 200
        && p.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-/:".contains(&b))
}

/// Parses what follows the scheme's `://`.
fn parse_rest(rest: &str, tls: bool) -> Result<RedisUrl, RedisError> {
    let (userinfo, rest) = split_userinfo(rest);
    let (rest, _fragment) = rest.split_once('#').unwrap_or((rest, ""));
    let (rest, query) = match rest.split_once('?') {
        Some((r, q)) => (r, Some(q)),
        None => (rest, None),
    };
    let (hostport, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i + 1..]),
        None => (rest, ""),
    };
    let (user, password) = match userinfo {
        None => (None, None),
        Some(ui) => {
            let (u, p) = match ui.split_once(':') {
                Some((u, p)) => (u, Some(p)),
                None => (ui, None),
            };
            let u = decode(u).ok_or_else(|| url_error("the user name is not valid"))?;
            let p = match p {
                Some(p) => Some(decode(p).ok_or_else(|| url_error("the password is not valid"))?),
                None => None,
            };
            ((!u.is_empty()).then_some(u), p.filter(|p| !p.is_empty()))
        }
    };
    let (host, port) = if let Some(h) = hostport.strip_prefix('[') {
        let (h, after) =
            h.split_once(']').ok_or_else(|| url_error("an IPv6 address lacks its `]`"))?;
        (h.to_string(), after.strip_prefix(':'))
    } else {
        match hostport.rsplit_once(':') {
            Some((h, p)) => (h.to_string(), Some(p)),
            None => (hostport.to_string(), None),
        }
    };
    if host.is_empty() {
        return Err(url_error("it names no host (e.g. redis://127.0.0.1:6379/0)"));
    }
    let port = match port {
        None | Some("") => 6379,
        Some(p) => p
            .parse::<u16>()
            .ok()
            .filter(|p| *p > 0)
            .ok_or_else(|| url_error(format!("port {p:?} is not a port number (1-65535)")))?,
    };
    let path = path.trim_end_matches('/');
    let db = if path.is_empty() {
        0
    } else {
        path.parse::<u32>()
            .map_err(|_| url_error(format!("/{path} is not a database number (e.g. /0)")))?
    };
    let mut prefix = DEFAULT_PREFIX.to_string();
    for pair in query.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        match k {
            "prefix" => {
                let v = decode(v).unwrap_or_default();
                if !valid_prefix(&v) {
                    return Err(url_error(format!(
                        "prefix {v:?} must be 1-200 of the characters A-Z a-z 0-9 . _ - / :"
                    )));
                }
                prefix = v;
            }
            other => {
                return Err(url_error(format!(
                    "unknown parameter {other:?} (the only one is prefix=NAME)"
                )))
            }
        }
    }
    Ok(RedisUrl { tls, host, port, db, user, password, prefix })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn redis(s: &str) -> RedisUrl {
        RedisUrl::parse(s).unwrap()
    }

    #[test]
    fn urls_are_recognized() {
        assert!(is_redis_url("redis://h"));
        assert!(is_redis_url("  Redis://h:1/2"));
        assert!(is_redis_url("rediss://h"));
        assert!(!is_redis_url("redis:/h"));
        assert!(!is_redis_url("./redis://h"));
        assert!(!is_redis_url("rediss"));
        assert!(RedisUrl::parse("http://h").is_err());
    }

    #[test]
    fn redis_urls_parse_with_defaults() {
        let u = redis("redis://127.0.0.1");
        assert_eq!(
            (u.host.as_str(), u.port, u.db, u.prefix.as_str()),
            ("127.0.0.1", 6379, 0, "ranktune")
        );
        assert!(!u.tls && u.user.is_none() && !u.has_password());
        let u = redis("rediss://al%40ice:p%3Ass@[::1]:7000/3/?prefix=team/a");
        assert!(u.tls);
        assert_eq!((u.host.as_str(), u.port, u.db), ("::1", 7000, 3));
        assert_eq!(u.user.as_deref(), Some("al@ice"));
        assert_eq!(u.password.as_deref(), Some("p:ss"));
        assert_eq!(u.prefix, "team/a");
        assert_eq!(u.to_string(), "rediss://al%40ice:***@[::1]:7000/3?prefix=team/a");
        assert!(!format!("{u:?}").contains("p:ss"));
        let u = redis("redis://:secret@h:1/0");
        assert_eq!(u.to_string(), "redis://:***@h:1/0?prefix=ranktune");
    }

    #[test]
    fn one_prefix_rule() {
        assert_eq!(redis("redis://h/0?prefix=team-a").prefix, "team-a");
        assert_eq!(redis("redis://h/0").prefix, "ranktune");
        assert_eq!(redis("redis://h/0?prefix=a/b:c.d_e").prefix, "a/b:c.d_e");
        let long = "p".repeat(200);
        assert_eq!(redis(&format!("redis://h/0?prefix={long}")).prefix, long);
        for bad in ["a*b", "", "a%20b", &"p".repeat(201)] {
            let err = RedisUrl::parse(&format!("redis://h/0?prefix={bad}")).unwrap_err();
            assert!(err.to_string().contains("must be 1-200 of the characters"), "{bad}: {err}");
        }
        let err = RedisUrl::parse("redis://h/0?prefix=a*b").unwrap_err().to_string();
        assert!(err.contains("\"a*b\""), "{err}");
    }

    #[test]
    fn passwords_with_url_characters_stay_passwords_and_are_never_shown() {
        for (text, password) in [
            ("redis://u:pa/ss@h:1/0", "pa/ss"),
            ("redis://u:a?b#c@d@h:1/0?prefix=x", "a?b#c@d"),
            ("redis://:x/y/z@h", "x/y/z"),
        ] {
            let u = redis(text);
            assert_eq!((u.password(), u.host.as_str()), (Some(password), "h"), "{text}");
            for shown in [u.to_string(), format!("{u:?}"), redact_text(text)] {
                assert!(!shown.contains(password), "{text}: {shown}");
            }
        }
        // Errors about the rest of such a URL name no part of the password.
        let err = RedisUrl::parse("redis://u:se/cret@h:99999/0").unwrap_err().to_string();
        assert!(
            err.contains("99999") && !err.contains("se/cret") && !err.contains("cret"),
            "{err}"
        );
        assert_eq!(redact_text("redis://u:se/cret@h:99999/0"), "redis://u:***@h:99999/0");
    }

    #[test]
    fn bad_urls_are_errors_without_the_password() {
        for (url, why) in [
            ("redis://u:hunter2@h:99999/0", "port"),
            ("redis://u:hunter2@h:1/x", "database number"),
            ("redis://u:hunter2@h/0?prefix=a%20b", "prefix"),
            ("redis://u:hunter2@h/0?db=1", "unknown parameter"),
            ("redis://u:hunter2@/0", "no host"),
            ("redis://u:hunter2@", "no host"),
            ("redis://u:hun/ter2@/0", "no host"),
        ] {
            let e = RedisUrl::parse(url).unwrap_err().to_string();
            assert!(e.contains(why), "{url}: {e}");
            assert!(!e.contains("hunter2") && !e.contains("ter2"), "{url}: {e}");
            assert!(!redact_text(url).contains("ter2"), "{url}");
        }
    }

    #[test]
    fn redaction_of_unparsed_text() {
        assert_eq!(redact_text("redis://u:pw@h:1/0"), "redis://u:***@h:1/0");
        assert_eq!(redact_text("redis://h:1/0?x=@"), "redis://h:***@");
        assert_eq!(redact_text("redis://us/er:longpassword1@h"), "redis://***@h");
        assert_eq!(redact_text("redis://u:p@ss@h:1/0"), "redis://u:***@h:1/0");
        assert_eq!(redact_text("plain.json"), "plain.json");
        assert_eq!(redact_text("redis://a:b:c@h"), "redis://a:***@h");
        assert_eq!(redact_text("redis://user@h"), "redis://user@h");
        assert_eq!(redact_text("rediss://u:p%40ss@h:1/0#x"), "rediss://u:***@h:1/0#x");
        assert_eq!(redact_text("no url"), "no url");
    }
}
