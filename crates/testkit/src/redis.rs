//! A real `redis-server` for tests: started on a free loopback port, in its
//! own temporary directory, with persistence off, and stopped (SIGKILL) when
//! the handle drops.
//!
//! Owns: finding the program, choosing the port, waiting until the server
//! accepts connections (and checking that the server answering is the one
//! it started), and the CI rule for skipping. Never: speaks the Redis
//! protocol beyond `AUTH` and `INFO server` (tests use the client
//! crate the code under test uses), or shares one server between tests.
//!
//! Why the identity check: a port found free can be taken by someone else
//! before the server binds it (another test's server, in the same run); the
//! new server then exits, and for a moment the other one answers on the
//! port. Ports are never handed out twice in one process, and a start
//! is accepted only when `INFO server` names the process this handle owns.
//!
//! The skip rule: outside CI (`CI` unset or not `true`/`1`), a machine
//! without `redis-server` skips the test loudly (a line on stderr) and
//! [`RedisServer::start`] returns `None`; in CI the same situation panics,
//! because `.ci/run` installs the server and a skipped test would hide a
//! missing install step.

use std::collections::HashSet;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::wait::kill;

/// How long a starting server may take to answer as itself.
const START_LIMIT: Duration = Duration::from_secs(20);

/// A running `redis-server` on `127.0.0.1:port`, killed on drop.
pub struct RedisServer {
    child: Option<Child>,
    port: u16,
    dir: PathBuf,
    args: Vec<String>,
}

/// Whether this run is CI (`CI=true` or `CI=1`), where tests that need a
/// server must run, never skip.
pub fn in_ci() -> bool {
    matches!(std::env::var("CI").as_deref(), Ok("true") | Ok("1"))
}

/// The `redis-server` program: `RANKTUNE_TEST_REDIS_SERVER` when set, else
/// the first `redis-server` on `PATH` (or in `/usr/bin`, `/usr/sbin`).
fn program() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("RANKTUNE_TEST_REDIS_SERVER") {
        return Some(PathBuf::from(p));
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/bin"), PathBuf::from("/usr/sbin")])
        .map(|d| d.join("redis-server"))
        .find(|p| p.is_file())
}

/// Ports this process has handed out already: a test's server keeps its
/// port across [`RedisServer::restart`], so no other test may get it.
static HANDED_OUT: Mutex<Option<HashSet<u16>>> = Mutex::new(None);

/// The lowest port the kernel gives to outgoing connections
/// (`/proc/sys/net/ipv4/ip_local_port_range`; Linux's default 32768).
fn ephemeral_floor() -> u16 {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(32768)
}

/// A port nobody listens on right now, never one this process handed out
/// before, and below the range the kernel draws outgoing connections' ports
/// from: a server stopped and restarted on its port must find it free, and
/// any client connecting anywhere could otherwise be given it meanwhile.
fn free_port() -> u16 {
    let floor = ephemeral_floor();
    let low: u16 = 10_000;
    let mut handed = HANDED_OUT.lock().unwrap_or_else(PoisonError::into_inner);
    let handed = handed.get_or_insert_with(HashSet::new);
    for attempt in 0u64..10_000 {
        let port = if floor > low + 1_000 {
            low + (random(attempt) % u64::from(floor - low)) as u16
        } else {
            // No room below the kernel's range: let it choose.
            let l = TcpListener::bind("127.0.0.1:0")
                .unwrap_or_else(|e| panic!("bind 127.0.0.1:0: {e}"));
            l.local_addr().unwrap_or_else(|e| panic!("local_addr: {e}")).port()
        };
        if !handed.contains(&port) && TcpListener::bind(("127.0.0.1", port)).is_ok() {
            handed.insert(port);
            return port;
        }
    }
    panic!("no free loopback port found in 10,000 tries")
}

/// A fresh pseudo-random number (std's randomly keyed hasher; no crate for
/// a port number).
fn random(salt: u64) -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(salt);
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    h.finish()
}

/// Whether the server on `port` is process `pid`: `INFO server` (after
/// `AUTH password` when one is given) reports `process_id:<pid>`.
fn is_process(port: u16, pid: u32, password: Option<&str>) -> bool {
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let Ok(mut s) = TcpStream::connect_timeout(&addr, Duration::from_millis(200)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    let mut ask = Vec::new();
    if let Some(p) = password {
        // One RESP array, so a password with spaces stays one argument.
        ask.extend_from_slice(format!("*2\r\n$4\r\nAUTH\r\n${}\r\n{p}\r\n", p.len()).as_bytes());
    }
    ask.extend_from_slice(b"INFO server\r\n");
    if s.write_all(&ask).is_err() {
        return false;
    }
    let want = format!("\nprocess_id:{pid}\r\n");
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while got.len() < 64 * 1024 {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => return false,
            Ok(n) => got.extend_from_slice(&buf[..n]),
        }
        if got.windows(want.len()).any(|w| w == want.as_bytes()) {
            return true;
        }
        if got.windows(11).any(|w| w == b"process_id:") && got.ends_with(b"\r\n\r\n") {
            return false; // the whole reply came, naming another process
        }
    }
    false
}

impl RedisServer {
    /// Starts a server with `extra` arguments added to the command line
    /// (e.g. `["--requirepass", "secret"]`), or returns `None` outside CI
    /// when no `redis-server` is installed (after saying so on stderr).
    ///
    /// # Panics
    /// In CI when no server is installed; when the server does not answer
    /// within 20 s (retrying once on another port, in case the chosen one
    /// was taken in between).
    pub fn start_with(extra: &[&str]) -> Option<RedisServer> {
        let Some(program) = program() else {
            if in_ci() {
                panic!("redis-server is not installed, but CI=true: .ci/run must install it (apt-get install -y redis-server)");
            }
            eprintln!("SKIPPED: redis-server is not installed (apt-get install -y redis-server); this test runs in CI");
            return None;
        };
        static SERVERS: AtomicU32 = AtomicU32::new(0);
        let dir = std::env::temp_dir().join(format!(
            "ranktune-test-redis-{}-{}",
            std::process::id(),
            SERVERS.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("create {}: {e}", dir.display()));
        let mut server = RedisServer {
            child: None,
            port: 0,
            dir,
            args: extra.iter().map(|s| s.to_string()).collect(),
        };
        for _attempt in 0..2 {
            server.port = free_port();
            server.spawn(&program);
            if server.wait_ready() {
                return Some(server);
            }
            server.stop();
        }
        panic!(
            "redis-server ({}) did not answer as the started process within {START_LIMIT:?}",
            program.display()
        );
    }

    /// Starts a server with the default settings; see [`RedisServer::start_with`].
    pub fn start() -> Option<RedisServer> {
        Self::start_with(&[])
    }

    fn spawn(&mut self, program: &Path) {
        let port = self.port.to_string();
        let dir = self.dir.display().to_string();
        let mut args: Vec<&str> = vec![
            "--port",
            &port,
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            &dir,
            "--daemonize",
            "no",
            "--protected-mode",
            "yes",
        ];
        args.extend(self.args.iter().map(String::as_str));
        let child = Command::new(program)
            .args(&args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("start {}: {e}", program.display()));
        self.child = Some(child);
    }

    fn wait_ready(&mut self) -> bool {
        let start = Instant::now();
        while start.elapsed() < START_LIMIT {
            if let Some(child) = self.child.as_mut() {
                if let Ok(Some(_)) = child.try_wait() {
                    return false; // exited: port taken or bad arguments
                }
            }
            // Another server answering (ours failing to bind) is no answer:
            // ours exits, seen above, or answers later.
            if let Some(pid) = self.pid() {
                if is_process(self.port, pid, self.password()) {
                    return true;
                }
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }

    /// The value given after `--requirepass` when the server was started.
    fn password(&self) -> Option<&str> {
        let at = self.args.iter().position(|a| a == "--requirepass")?;
        self.args.get(at + 1).map(String::as_str)
    }

    /// The port it listens on (127.0.0.1).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `redis://127.0.0.1:PORT/db`.
    pub fn url(&self, db: u32) -> String {
        format!("redis://127.0.0.1:{}/{db}", self.port)
    }

    /// The server's process id (for SIGSTOP/SIGCONT/SIGKILL in fault tests).
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Kills the server (SIGKILL) and waits for it.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = kill(&mut child);
        }
    }

    /// Starts the server again on the same port after [`RedisServer::stop`]
    /// (its data is gone: persistence is off), waiting until it answers.
    ///
    /// # Panics
    /// When it does not answer within 20 s.
    pub fn restart(&mut self) {
        self.stop();
        let program = program().unwrap_or_else(|| panic!("redis-server vanished"));
        self.spawn(&program);
        assert!(self.wait_ready(), "redis-server did not come back on port {}", self.port);
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether any server on `port` answers `PING`: with `+PONG`, or with
    /// `-NOAUTH` when it was started with `--requirepass`.
    fn pings(port: u16) -> bool {
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        let Ok(mut s) = TcpStream::connect_timeout(&addr, Duration::from_millis(200)) else {
            return false;
        };
        let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
        if s.write_all(b"PING\r\n").is_err() {
            return false;
        }
        let mut buf = [0u8; 16];
        matches!(s.read(&mut buf), Ok(n) if buf[..n].starts_with(b"+PONG") || buf[..n].starts_with(b"-NOAUTH"))
    }

    #[test]
    fn starts_answers_and_stops() {
        let Some(mut server) = RedisServer::start() else { return };
        assert!(pings(server.port()));
        assert!(server.url(0).starts_with("redis://127.0.0.1:"));
        let port = server.port();
        server.stop();
        assert!(!pings(port));
        server.restart();
        assert!(pings(port));
        assert!(is_process(port, server.pid().unwrap(), None));
    }

    #[test]
    fn another_process_on_the_port_is_not_taken_for_ours() {
        let Some(server) = RedisServer::start() else { return };
        assert!(is_process(server.port(), server.pid().unwrap(), None));
        assert!(!is_process(server.port(), std::process::id(), None));
    }

    #[test]
    fn ports_are_not_handed_out_twice() {
        let ports: HashSet<u16> = (0..200).map(|_| free_port()).collect();
        assert_eq!(ports.len(), 200);
        assert!(ports.iter().all(|&p| p < ephemeral_floor()));
    }

    #[test]
    fn a_server_with_a_password_starts_too() {
        let Some(server) = RedisServer::start_with(&["--requirepass", "secret"]) else { return };
        assert!(pings(server.port()));
        assert!(is_process(server.port(), server.pid().unwrap(), Some("secret")));
        assert!(!is_process(server.port(), server.pid().unwrap(), Some("wrong")));
    }
}
