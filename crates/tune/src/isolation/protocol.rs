//! The wire protocol between the tuner and an isolated measuring worker.
//!
//! Owns the messages and their encoding; nothing else (no I/O, no process
//! handling). Both kinds of worker speak it: a worker *forked* from the
//! tuning process (it already holds the op and the inputs, so it gets no
//! init), and a worker *spawned* as a fresh program (e.g. a Python process
//! that must not inherit a CUDA context), which rebuilds the op's inputs
//! from the init message.
//!
//! Messages are JSON objects, one per line (`\n`-terminated, UTF-8), over the
//! worker's standard input (parent → worker) and standard output (worker →
//! parent). Both are one Unix socket in practice; a worker may treat them as
//! ordinary text streams. Anything the worker writes to its standard error
//! is kept (the last few KiB) to explain a crash, never parsed as a message.
//!
//! ```text
//! parent → worker                                  worker → parent
//! {"init": {...}}            (spawned workers only, first line)
//!                                                  {"ready": {"pid": 4242}}
//! {"run": 2, "reps": 10}
//!                                                  {"us": 1234.5}
//! {"run": 3, "reps": 1}
//!                                                  {"error": "bad tile", "kind": "error"}
//! <end of input>                                   (the worker exits 0)
//! ```
//!
//! - **init** ([`Init`]): protocol version, op name, the bucket's shapes
//!   (every input's dims after bucketing), the candidates — position `p` of
//!   this list is what `"run": p` means — each with its runner index, runner
//!   name, tactic index and tactic value, and an opaque `spec` the worker's
//!   author defines (e.g. which module builds the op, the inputs' dtypes).
//! - **ready** ([`Ready`]): the worker is set up (inputs built) and waits
//!   for requests. The time from start to `ready` is the worker's start-up
//!   cost, reported by the tuner. A worker that cannot set up answers
//!   `{"error": …}` instead and exits.
//! - **run** ([`ToWorker::Run`]): run candidate `run` `reps` times in a row
//!   and time the whole, as the in-process tuner does (warm-up requests
//!   have `reps` 1; the tuner derives samples itself).
//! - **us** ([`FromWorker::Us`]): the time of all `reps` runs, µs (finite,
//!   not negative).
//! - **error** ([`FromWorker::Error`]): the candidate failed and the worker
//!   is still healthy; `kind` is `"error"` (default), `"panic"` (an
//!   exception the runner did not expect) or `"memory"` (an allocation
//!   failed, e.g. Python's `MemoryError`, CUDA out of memory).
//!
//! A worker that dies, prints a line that is not a message, or does not
//! answer within the candidate's time limit fails that candidate (crash,
//! timeout, memory: see `FailureKind`), is killed, and a fresh one is
//! started for the next candidate. On end of input the worker exits.

use serde::{Deserialize, Serialize};

/// The protocol version in [`Init::protocol`]; a worker that does not know
/// it should answer `{"error": "protocol N is not supported"}`.
pub const PROTOCOL_VERSION: u32 = 1;

/// The longest message line accepted from a worker (bytes, newline included).
pub const MAX_LINE: usize = 1 << 20;

/// The first message to a spawned worker.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Init {
    /// [`PROTOCOL_VERSION`].
    pub protocol: u32,
    /// The op's name.
    pub op: String,
    /// The bucket: every input's dims after bucketing.
    pub bucket: Vec<Vec<u64>>,
    /// The candidates; `"run": p` names `candidates[p]`.
    pub candidates: Vec<InitCandidate>,
    /// Anything the worker needs to rebuild the op and its inputs, as the
    /// isolation settings give it (`null` when none).
    #[serde(default)]
    pub spec: serde_json::Value,
}

/// One candidate of an [`Init`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct InitCandidate {
    /// The runner's index in the op.
    pub runner: u32,
    /// The runner's name.
    pub runner_name: String,
    /// The tactic's index in the runner.
    pub tactic: u32,
    /// The tactic's value (as the cache stores it).
    pub value: serde_json::Value,
}

/// A message from the tuner to a worker.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ToWorker {
    /// `{"init": {...}}`: set up (spawned workers only, first message).
    Init {
        /// The set-up.
        init: Init,
    },
    /// `{"run": p, "reps": n}`: run candidate `p` `n` times, timed as a whole.
    Run {
        /// The candidate's position.
        run: usize,
        /// Runs in a row.
        reps: u32,
    },
}

/// The worker's `ready` message.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ready {
    /// The worker's process id.
    pub pid: u32,
}

/// How a candidate failed in a worker that stays healthy.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ErrorKind {
    /// The runner returned an error.
    #[default]
    Error,
    /// The runner raised or panicked.
    Panic,
    /// An allocation failed.
    Memory,
}

/// A message from a worker to the tuner.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum FromWorker {
    /// `{"ready": {"pid": N}}`: set up, waiting for requests.
    Ready {
        /// Who is ready.
        ready: Ready,
    },
    /// `{"us": x}`: the time of the requested runs, µs.
    Us {
        /// Microseconds for all `reps` runs.
        us: f64,
    },
    /// `{"error": "…", "kind": "error"}`: the candidate (or the set-up) failed.
    Error {
        /// The reason.
        error: String,
        /// What kind of failure (default `error`).
        #[serde(default)]
        kind: ErrorKind,
    },
}

/// A line that is not a message of this protocol.
#[derive(Debug, thiserror::Error)]
#[error("the worker wrote a line that is not a protocol message ({reason}): {line:?}")]
pub struct ProtocolError {
    /// Why it does not parse.
    pub reason: String,
    /// The line (its first 200 characters).
    pub line: String,
}

/// One message as a line (JSON and `\n`).
pub fn encode<T: Serialize>(msg: &T) -> Vec<u8> {
    let mut line = serde_json::to_vec(msg).unwrap_or_else(|e| {
        // The messages are plain data; this cannot happen, but an error
        // message is still a valid line.
        serde_json::to_vec(&FromWorker::Error { error: e.to_string(), kind: ErrorKind::Error })
            .unwrap_or_default()
    });
    line.push(b'\n');
    line
}

/// Parses one line (with or without its `\n`) as a message `T`.
pub fn decode<T: for<'de> Deserialize<'de>>(line: &[u8]) -> Result<T, ProtocolError> {
    let text = line.strip_suffix(b"\n").unwrap_or(line);
    let text = text.strip_suffix(b"\r").unwrap_or(text);
    serde_json::from_slice(text).map_err(|e| ProtocolError {
        reason: e.to_string(),
        line: String::from_utf8_lossy(text).chars().take(200).collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_and_replies_have_the_documented_form() {
        let run = ToWorker::Run { run: 2, reps: 10 };
        assert_eq!(encode(&run), b"{\"run\":2,\"reps\":10}\n");
        assert_eq!(decode::<ToWorker>(b"{\"run\":2,\"reps\":10}\n").unwrap(), run);
        assert_eq!(
            decode::<FromWorker>(b"{\"us\":1234.5}").unwrap(),
            FromWorker::Us { us: 1234.5 }
        );
        assert_eq!(
            decode::<FromWorker>(b"{\"error\":\"bad tile\"}\n").unwrap(),
            FromWorker::Error { error: "bad tile".into(), kind: ErrorKind::Error }
        );
        assert_eq!(
            decode::<FromWorker>(b"{\"error\":\"x\",\"kind\":\"memory\"}").unwrap(),
            FromWorker::Error { error: "x".into(), kind: ErrorKind::Memory }
        );
        assert_eq!(
            decode::<FromWorker>(b"{\"ready\":{\"pid\":7}}\r\n").unwrap(),
            FromWorker::Ready { ready: Ready { pid: 7 } }
        );
    }

    #[test]
    fn init_round_trips_and_spec_defaults_to_null() {
        let init = Init {
            protocol: PROTOCOL_VERSION,
            op: "gemm".into(),
            bucket: vec![vec![64, 512], vec![64, 512]],
            candidates: vec![InitCandidate {
                runner: 1,
                runner_name: "blocked".into(),
                tactic: 0,
                value: serde_json::json!({"blocked": {"tile_m": 32}}),
            }],
            spec: serde_json::json!({"module": "my_ops"}),
        };
        let msg = ToWorker::Init { init: init.clone() };
        assert_eq!(decode::<ToWorker>(&encode(&msg)).unwrap(), msg);
        let bare = br#"{"init":{"protocol":1,"op":"x","bucket":[],"candidates":[]}}"#;
        match decode::<ToWorker>(bare).unwrap() {
            ToWorker::Init { init } => assert!(init.spec.is_null()),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn garbage_is_an_error_naming_the_line() {
        let e = decode::<FromWorker>(b"hello world\n").unwrap_err();
        assert!(e.to_string().contains("hello world"), "{e}");
        assert!(decode::<FromWorker>(b"{\"us\":\"fast\"}").is_err());
    }
}
