//! A Redis URL made ready to connect: the password resolved (the URL's, else
//! `RANKTUNE_REDIS_PASSWORD`), TLS checked against this build, the client's
//! connection settings built from the parsed parts, and a connect bounded by
//! the connect timeout.
//!
//! Owns connecting. Never sends a command and never prints the password:
//! [`Endpoint`]'s `Debug` names the URL as [`RedisUrl`]'s `Display` does.

use std::time::Duration;

use redis::{ConnectionAddr, IntoConnectionInfo, RedisConnectionInfo};

use crate::{RedisError, RedisUrl};

/// Where and how to connect to one Redis server.
#[derive(Clone)]
pub struct Endpoint {
    url: RedisUrl,
    info: redis::ConnectionInfo,
    connect_timeout: Duration,
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Endpoint({})", self.url)
    }
}

impl Endpoint {
    /// The endpoint of `url`, with the password from `env`'s
    /// `RANKTUNE_REDIS_PASSWORD` when the URL has none. Does no I/O.
    pub fn new(
        url: &RedisUrl,
        connect_timeout: Duration,
        env: &impl Fn(&str) -> Option<String>,
    ) -> Result<Endpoint, RedisError> {
        if url.tls && !cfg!(feature = "tls") {
            return Err(RedisError::NoTls { url: url.to_string() });
        }
        #[cfg(feature = "tls")]
        if url.tls {
            // rustls needs one crypto provider per process; ring's, unless
            // the application installed another (then this is a no-op).
            let _ = rustls::crypto::ring::default_provider().install_default();
        }
        let addr = if url.tls {
            ConnectionAddr::TcpTls {
                host: url.host.clone(),
                port: url.port,
                insecure: false,
                tls_params: None,
            }
        } else {
            ConnectionAddr::Tcp(url.host.clone(), url.port)
        };
        let mut settings = RedisConnectionInfo::default().set_db(i64::from(url.db));
        if let Some(user) = &url.user {
            settings = settings.set_username(user);
        }
        if let Some(password) = url.password_or_env_with(env) {
            settings = settings.set_password(password);
        }
        let info = addr
            .into_connection_info()
            .map_err(|e| RedisError::Client { url: url.to_string(), reason: e.to_string() })?
            .set_redis_settings(settings);
        Ok(Endpoint { url: url.clone(), info, connect_timeout })
    }

    /// The URL (its `Display` hides the password).
    pub fn url(&self) -> &RedisUrl {
        &self.url
    }

    /// The connect timeout.
    pub fn connect_timeout(&self) -> Duration {
        self.connect_timeout
    }

    /// A new connection (connecting and authenticating), bounded by the
    /// connect timeout. Read and write timeouts are the caller's to set.
    pub fn connect(&self) -> redis::RedisResult<redis::Connection> {
        redis::Client::open(self.info.clone())?.get_connection_with_timeout(self.connect_timeout)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_hide_the_password_and_check_tls() {
        let url = RedisUrl::parse("redis://u:hunter2@127.0.0.1:1/0").unwrap();
        let e = Endpoint::new(&url, Duration::from_secs(1), &|_: &str| None).unwrap();
        assert!(!format!("{e:?}").contains("hunter2"), "{e:?}");
        // Port 1: refused at once.
        let err = e.connect().err().unwrap();
        assert!(!err.to_string().contains("hunter2"), "{err}");
        let tls = RedisUrl::parse("rediss://h").unwrap();
        let made = Endpoint::new(&tls, Duration::from_secs(1), &|_: &str| None);
        assert_eq!(made.is_ok(), cfg!(feature = "tls"));
    }
}
