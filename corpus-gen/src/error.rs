//! Typed errors of corpus generation.

use std::path::PathBuf;

/// Why generating a corpus failed.
#[derive(Debug, thiserror::Error)]
pub enum CorpusError {
    /// An option is out of range or inconsistent.
    #[error("invalid option: {0}")]
    Invalid(String),
    /// The output directory cannot be created or written.
    #[error("cannot write to output directory {path}")]
    OutputDir {
        /// The directory.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// Writing one of the output files failed (disk full, file too large...).
    #[error("writing {path} failed")]
    Write {
        /// The file being written.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// An encoder refused its input (a bug: inputs are generated).
    #[error("encoding {what} failed: {detail}")]
    Encode {
        /// Which format.
        what: &'static str,
        /// The encoder's message.
        detail: String,
    },
    /// Building an SQLite file failed.
    #[error("SQLite: {0}")]
    Sqlite(#[from] rusqlite::Error),
    /// Serialising the manifest failed.
    #[error("manifest: {0}")]
    Json(#[from] serde_json::Error),
    /// A worker thread could not be started or died.
    #[error("worker: {0}")]
    Worker(String),
}
