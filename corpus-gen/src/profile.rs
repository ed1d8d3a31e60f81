//! Profiles: named sets of knobs describing what kind of disk to imitate.

use serde::{Deserialize, Serialize};

/// Knobs that shape a corpus. Shares are fractions in `0.0..=1.0`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Profile {
    /// Profile name.
    pub name: String,
    /// Share of each allocation group's clusters holding file content
    /// (live, deleted or residue); the rest is free space.
    pub fill: f64,
    /// Share of files that are deleted (entry marked, clusters freed).
    pub deleted_share: f64,
    /// Share of files (with at least two clusters) stored in fragments.
    pub fragmented_share: f64,
    /// Target share of content bytes that are incompressible (JPEG, MP3,
    /// encrypted containers); sets the E01 compression ratio.
    pub incompressible_share: f64,
    /// Share of deleted files later partly overwritten by a new file.
    pub overwrite_share: f64,
    /// Share of content items that are residue of older files in
    /// unallocated space (no directory entry left).
    pub residue_share: f64,
    /// Deleted directories per hundred files.
    pub deleted_dirs_per_100: f64,
    /// Share of files carrying planted keywords.
    pub keyword_share: f64,
    /// Share of files that are planted duplicates of another file.
    pub duplicate_share: f64,
    /// Share of files (outside program folders) whose hash is notable.
    pub notable_share: f64,
    /// Share of files (outside program folders) whose hash is known.
    pub known_share: f64,
    /// Share of free-space gaps filled with random bytes (wiped or
    /// encrypted remnants) rather than zeros.
    pub random_free_share: f64,
    /// NTFS: share of live text and log files (8 KiB or more) stored
    /// LZNT1-compressed.
    #[serde(default)]
    pub compressed_share: f64,
    /// NTFS: share of live encrypted containers and disk images (256 KiB
    /// or more, no planted keyword) stored sparse, with holes.
    #[serde(default)]
    pub sparse_share: f64,
    /// Wanted E01 compression ratio (raw size over stored size). When set,
    /// generation replaces `fill` by the share of used space that gives it
    /// ([`crate::calibrate`]); the manifest records both.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_e01_ratio: Option<f64>,
}

impl Profile {
    /// Names of the built-in profiles.
    pub const NAMES: [&'static str; 2] = ["workstation", "suspect"];

    /// The built-in profile called `name`.
    pub fn by_name(name: &str) -> Option<Profile> {
        match name {
            // A user's everyday Windows disk: mostly live files, a tenth
            // deleted, modest fragmentation, about half the bytes
            // compressible, and most of the disk free and zeroed: the FTK
            // study's Windows 7 test disk was 240 GB raw and about 60 GB as
            // E01, so the used share is chosen for a 4:1 E01 (`fill` is the
            // share used when the target is switched off).
            "workstation" => Some(Profile {
                name: name.into(),
                fill: 0.72,
                deleted_share: 0.10,
                fragmented_share: 0.08,
                incompressible_share: 0.35,
                overwrite_share: 0.30,
                residue_share: 0.05,
                deleted_dirs_per_100: 1.0,
                keyword_share: 0.04,
                duplicate_share: 0.02,
                notable_share: 0.01,
                known_share: 0.02,
                // Free space on an unencrypted disk is mostly zeroed or old
                // file content; wiped or encrypted remnants are rare.
                random_free_share: 0.04,
                compressed_share: 0.10,
                sparse_share: 0.5,
                target_e01_ratio: Some(4.0),
            }),
            // A disk whose user cleaned up before seizure: many deleted files
            // and folders, more residue and wiped (random) free space, more
            // notable material. Exercises carving and recovery.
            "suspect" => Some(Profile {
                name: name.into(),
                fill: 0.80,
                deleted_share: 0.35,
                fragmented_share: 0.15,
                incompressible_share: 0.45,
                overwrite_share: 0.40,
                residue_share: 0.15,
                deleted_dirs_per_100: 4.0,
                keyword_share: 0.06,
                duplicate_share: 0.03,
                notable_share: 0.05,
                known_share: 0.02,
                random_free_share: 0.35,
                compressed_share: 0.05,
                sparse_share: 0.5,
                target_e01_ratio: None,
            }),
            _ => None,
        }
    }
}
