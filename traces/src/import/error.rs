//! Errors of the format readers: where in the source, and what is wrong.

/// Where in a source file a problem is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Location {
    /// A 1-based line (text formats).
    Line(u64),
    /// A byte offset (binary formats).
    Byte(u64),
}

impl std::fmt::Display for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Location::Line(n) => write!(f, "line {n}"),
            Location::Byte(n) => write!(f, "byte {n}"),
        }
    }
}

/// A source that cannot be read (truncated, corrupt, another layout).
#[derive(Debug, thiserror::Error)]
pub enum FormatError {
    /// The content is wrong at a place.
    #[error("{format} {at}: {reason}")]
    Bad {
        /// The format being read (`procmon-csv`, `procmon-pml`, `strace`, `caseload`).
        format: &'static str,
        /// Where.
        at: Location,
        /// What is wrong.
        reason: String,
    },
    /// Reading the file failed.
    #[error("{format}: {source}")]
    Io {
        /// The format being read.
        format: &'static str,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
}

impl FormatError {
    /// A content error at `at`.
    pub fn bad(format: &'static str, at: Location, reason: impl Into<String>) -> Self {
        FormatError::Bad {
            format,
            at,
            reason: reason.into(),
        }
    }
}
