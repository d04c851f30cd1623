//! The one error type of trace recording. Every variant names the problem
//! and the fix; nothing here does I/O.

use std::path::PathBuf;

/// Why a trace could not be configured, started or written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TraceError {
    /// The trace path template is empty.
    #[error("the trace path is empty; set RANKTUNE_TRACE (or --trace) to a file such as trace.json or a directory such as traces/")]
    EmptyPath,
    /// The trace path is not valid UTF-8.
    #[error("the trace path {0:?} is not valid UTF-8; use a UTF-8 path")]
    NotUnicode(PathBuf),
    /// An environment variable is not valid UTF-8.
    #[error("{var} is not valid UTF-8; set it to plain text or unset it")]
    EnvNotUnicode {
        /// The variable.
        var: String,
    },
    /// A `{...}` placeholder that the path rule does not know.
    #[error("unknown placeholder {{{name}}} in trace path {template:?}; known placeholders are {{rank}}, {{world_size}}, {{local_rank}}, {{pid}} and {{host}}")]
    UnknownPlaceholder {
        /// The placeholder's name.
        name: String,
        /// The template it was found in.
        template: String,
    },
    /// A placeholder template that would give several ranks one file.
    #[error("trace path {template:?} gives every rank of a {world_size}-rank job the same file; add {{rank}} (or {{pid}}, or {{host}} with {{local_rank}})")]
    AmbiguousTemplate {
        /// The template.
        template: String,
        /// The job's world size.
        world_size: u32,
    },
    /// The trace file cannot be created where it should go.
    #[error("cannot write the trace file {path:?}; choose a writable place with RANKTUNE_TRACE or --trace")]
    NotWritable {
        /// The resolved trace file path.
        path: PathBuf,
        /// What the OS said.
        #[source]
        source: std::io::Error,
    },
    /// This process is a `fork` of the one that started the trace: the
    /// session it inherited belongs to its parent, whose file it must never
    /// write (the parent's spans after the fork would be lost).
    #[error("this process (pid {child}) was forked from pid {parent}, which records the trace {path:?}; a forked child never writes its parent's trace: start one of its own (a path with {{pid}} keeps them apart)")]
    ForkedChild {
        /// The parent's trace file.
        path: PathBuf,
        /// The process that started the session.
        parent: u32,
        /// This process.
        child: u32,
    },
    /// The resolved trace path is a directory.
    #[error("the trace path {0:?} is an existing directory, not a file; end the template with / to write trace_<rank>.json inside it")]
    IsDirectory(PathBuf),
    /// Writing the trace file failed.
    #[error("writing the trace file {path:?} failed")]
    Write {
        /// The trace file path.
        path: PathBuf,
        /// What the OS said.
        #[source]
        source: std::io::Error,
    },
    /// The iteration window is malformed.
    #[error("{var}={value:?} is not an iteration window: {reason}; write ranges such as 10-20 (iterations 10 to 20, both included), 10-20,100-105 or a single iteration such as 7")]
    BadWindow {
        /// Where the value came from (variable name or "window").
        var: String,
        /// The value.
        value: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A numeric setting is malformed (the one setting rule's sentence).
    #[error(transparent)]
    BadNumber(#[from] ranktune_core::setting::SettingError),
    /// A session is already recording in this process.
    #[error("a trace session is already active in this process; stop it before starting another")]
    AlreadyActive,
    /// Installing the signal handlers failed.
    #[error("cannot install the SIGINT/SIGTERM handlers that export the trace: {0}; set RANKTUNE_TRACE_SIGNALS=0 to record without them")]
    Signals(#[source] std::io::Error),
}
