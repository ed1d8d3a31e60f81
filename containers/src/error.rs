//! The crate's one error type, positioned: every error names the file and
//! byte offset it concerns, and errors found while reading media also name
//! the media byte range that cannot be read.

use std::io;
use std::path::{Path, PathBuf};

/// Errors opening or reading a container.
#[derive(Debug, thiserror::Error)]
pub enum ContainerError {
    /// The caller's opener could not open a file the container needs (a
    /// VMDK extent named by its descriptor).
    #[error("cannot open `{}`: {source}", path.display())]
    Open {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// A read of one of the container's files failed.
    #[error("reading `{}` at byte {offset}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// Offset in that file.
        offset: u64,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// A structure of the container is malformed (found while opening, or a
    /// table read while reading).
    #[error("`{}` at byte {offset}: {what}", path.display())]
    Format {
        /// The file.
        path: PathBuf,
        /// Offset in that file of the structure.
        offset: u64,
        /// What is wrong, naming the structure.
        what: String,
    },
    /// The container uses a feature this crate does not read (a parent
    /// disk, encryption, a compression method); refused rather than read
    /// wrongly.
    #[error("`{}`: {what}", path.display())]
    Unsupported {
        /// The file.
        path: PathBuf,
        /// The feature, and why it is refused.
        what: String,
    },
    /// The file is none of the formats this crate reads.
    #[error("`{}` is not a VMDK, VHD, VHDX or QCOW2 container", path.display())]
    NotContainer {
        /// The file.
        path: PathBuf,
    },
    /// Media bytes `start..end` cannot be read: the table entry or data
    /// behind them is damaged. Other ranges stay readable.
    #[error(
        "media bytes {start}-{} unreadable (`{}` at byte {offset}): {what}",
        end.saturating_sub(1),
        path.display()
    )]
    Corrupt {
        /// First media byte of the damaged unit (grain, cluster, block).
        start: u64,
        /// One past its last media byte.
        end: u64,
        /// The container file holding the damaged structure or data.
        path: PathBuf,
        /// Offset in that file.
        offset: u64,
        /// What was found.
        what: String,
    },
}

impl ContainerError {
    /// The damaged media range `start..end` (end exclusive), when the error
    /// names one.
    pub fn media_range(&self) -> Option<(u64, u64)> {
        match self {
            ContainerError::Corrupt { start, end, .. } => Some((*start, *end)),
            _ => None,
        }
    }

    /// This error, met while reading media bytes `start..end`, as a
    /// [`ContainerError::Corrupt`] naming that range (errors that already
    /// name a range are kept).
    pub(crate) fn at_media(self, start: u64, end: u64) -> ContainerError {
        match self {
            ContainerError::Corrupt { .. } => self,
            ContainerError::Io {
                path,
                offset,
                source,
            } => ContainerError::Corrupt {
                start,
                end,
                path,
                offset,
                what: format!("read failed: {source}"),
            },
            ContainerError::Format { path, offset, what } => ContainerError::Corrupt {
                start,
                end,
                path,
                offset,
                what,
            },
            ContainerError::Open { path, source } => ContainerError::Corrupt {
                start,
                end,
                path,
                offset: 0,
                what: format!("cannot open: {source}"),
            },
            ContainerError::Unsupported { path, what } => ContainerError::Corrupt {
                start,
                end,
                path,
                offset: 0,
                what,
            },
            ContainerError::NotContainer { path } => ContainerError::Corrupt {
                start,
                end,
                path,
                offset: 0,
                what: "not a container".into(),
            },
        }
    }
}

/// A [`ContainerError::Format`].
pub(crate) fn format(path: &Path, offset: u64, what: impl Into<String>) -> ContainerError {
    ContainerError::Format {
        path: path.to_path_buf(),
        offset,
        what: what.into(),
    }
}

/// A [`ContainerError::Unsupported`].
pub(crate) fn unsupported(path: &Path, what: impl Into<String>) -> ContainerError {
    ContainerError::Unsupported {
        path: path.to_path_buf(),
        what: what.into(),
    }
}
