//! The content digests stages compute, as workload options name them.
//! Shared by the stages that hash (image-hash, file-hash, carve), so none
//! of them takes the type from another.

use serde::Deserialize;

/// A hash algorithm.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Algorithm {
    /// MD5.
    Md5,
    /// SHA-1.
    Sha1,
    /// SHA-256.
    Sha256,
}
