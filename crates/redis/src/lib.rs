//! ranktune-redis: the one Redis endpoint of ranktune — the URL syntax
//! (`redis://[user[:password]@]host[:port][/db][?prefix=NAME]`, or
//! `rediss://` for TLS), its redaction for messages, the prefix rule, the
//! password and timeout settings, and connecting — used alike by the cache's
//! Redis store (`ranktune-cache`) and the Redis collective
//! (`ranktune-collective`), so the two can never disagree on what a URL
//! means, what a prefix may be, or which secret is printed (none).
//!
//! ```
//! use ranktune_redis::{redact_text, RedisUrl};
//! let url = RedisUrl::parse("redis://team:s3/cret@db.example:6380/2?prefix=llm/a").unwrap();
//! assert_eq!((url.host.as_str(), url.port, url.db, url.prefix.as_str()), ("db.example", 6380, 2, "llm/a"));
//! assert_eq!(url.to_string(), "redis://team:***@db.example:6380/2?prefix=llm/a");
//! assert_eq!(redact_text("redis://team:s3/cret@db.example/x"), "redis://team:***@db.example/x");
//! ```
//!
//! - [`url`]: [`RedisUrl`] (parse, `Display` and `Debug` with the password
//!   hidden), [`redact_text`] for text that did not parse, [`is_redis_url`].
//! - [`settings`]: the variables (`RANKTUNE_REDIS_PASSWORD`,
//!   `RANKTUNE_REDIS_CONNECT_TIMEOUT`, `RANKTUNE_REDIS_TIMEOUT`) and their
//!   one parsing rule.
//! - [`endpoint`]: [`Endpoint`], a URL made ready to connect (password
//!   resolved, TLS checked), and its bounded connect.
//!
//! This crate parses locations itself (the client library never sees a URL
//! string) and never prints a password. It never decides what is stored
//! under a prefix: that is the cache's and the collective's business.

pub mod endpoint;
pub mod settings;
pub mod url;

pub use endpoint::Endpoint;
pub use settings::{
    connect_timeout_with, seconds_with, timeout_with, CONNECT_TIMEOUT_ENV, DEFAULT_CONNECT_TIMEOUT,
    DEFAULT_TIMEOUT, PASSWORD_ENV, TIMEOUT_ENV,
};
pub use url::{is_redis_url, redact_text, RedisUrl, DEFAULT_PREFIX};

/// Why an endpoint cannot be used. Every message names the server with its
/// password hidden.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RedisError {
    /// The URL does not parse; `reason` says why (the caller names the text,
    /// through [`redact_text`]).
    #[error("{reason}")]
    Url {
        /// What is wrong, e.g. `port "x" is not a port number (1-65535)`.
        reason: String,
    },
    /// A setting variable is malformed (never silently the default).
    #[error(transparent)]
    Setting(#[from] ranktune_core::setting::SettingError),
    /// A `rediss://` URL in a build without the `tls` feature.
    #[error(
        "{url}: this build of ranktune has no TLS support (rediss://); rebuild with the `tls` \
         feature (cargo build --features tls) or use redis:// inside a trusted network"
    )]
    NoTls {
        /// The URL, password hidden.
        url: String,
    },
    /// The client library refused the address.
    #[error("{url}: {reason}")]
    Client {
        /// The URL, password hidden.
        url: String,
        /// The client's message.
        reason: String,
    },
}
