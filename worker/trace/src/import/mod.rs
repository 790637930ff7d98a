//! Trace import: bytes in (plain JSON, gzip or zstd), a columnar [`Trace`] out.
//!
//! - [`input`]: content detection by magic bytes, streaming decompression on
//!   a second thread, limits and progress.
//! - [`parse`]: the hand-written streaming JSON parser (the Chrome-trace
//!   JSON format): lexer, event scanner, document walk.
//! - [`builder`]: the format-neutral [`TraceBuilder`](builder::TraceBuilder)
//!   every reader hands its decoded events to (Kineto's category rules,
//!   slices, flows, memory, device naming).
//! - [`store`]: the columnar tables the analysis reads.

pub mod builder;
pub mod input;
pub mod parse;
pub mod store;

pub use input::{
    decoder, head_needs_more, read_head, read_trace, read_trace_file, sniff, written_whole,
    Encoding, ReadOptions,
};
pub use parse::Limits;
pub use store::Trace;

/// Why a trace could not be read.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    /// The bytes are not a trace (wrong format, bad JSON, no `traceEvents`).
    #[error("not a trace: {0}")]
    NotATrace(String),
    /// The input ends early (truncated upload or file).
    #[error("truncated trace: {0}")]
    Truncated(String),
    /// The compressed stream is damaged.
    #[error("corrupt {0} stream: {1}")]
    Corrupt(&'static str, String),
    /// A limit was exceeded (decompressed size, event size).
    #[error("{0}")]
    TooLarge(String),
    /// Reading the source failed (disk or network): worth retrying.
    #[error("reading the trace failed: {0}")]
    Io(#[from] std::io::Error),
}

impl TraceError {
    /// Whether the input itself is at fault (no retry can help).
    pub fn is_bad_input(&self) -> bool {
        !matches!(self, TraceError::Io(_))
    }
}
