//! The one error type of trace analysis. Every variant names the file or
//! input at fault and, where there is one, the fix; nothing here does I/O.

/// Errors of trace analysis.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AnalyzeError {
    /// Reading or writing a file failed.
    #[error("{path}")]
    Io {
        /// The file.
        path: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The file is not a Chrome/Kineto trace.
    #[error("{path} is not a trace: {why}")]
    NotATrace {
        /// The file.
        path: String,
        /// What was found instead.
        why: String,
    },
    /// An input names nothing.
    #[error("{input}: {why}")]
    BadInput {
        /// The input as given.
        input: String,
        /// What is wrong and how to fix it.
        why: String,
    },
    /// Two files claim the same rank.
    #[error("rank {rank} is claimed by two files: {first} ({first_how}) and {second} ({second_how}); pass only one of them, or set the rank with --rank FILE=N")]
    RankConflict {
        /// The rank.
        rank: u32,
        /// First file.
        first: String,
        /// How its rank was found.
        first_how: String,
        /// Second file.
        second: String,
        /// How its rank was found.
        second_how: String,
    },
    /// A file's rank cannot be found.
    #[error("cannot tell the rank of {path}: it has no \"distributedInfo\" rank and no rank in its name (like trace_3.json, rank3.json, x-rank-3.json); pass --rank {path}=N")]
    NoRank {
        /// The file.
        path: String,
    },
    /// No usable trace among the inputs.
    #[error("no trace files found in the inputs ({0})")]
    NoTraces(String),
}
