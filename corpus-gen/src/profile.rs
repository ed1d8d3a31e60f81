//! Profiles: named sets of knobs describing what kind of disk to imitate.

use crate::CorpusError;
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
    /// Share of live text and log files (8 KiB or more) stored compressed
    /// where that saves space: NTFS LZNT1, APFS decmpfs (zlib blocks in
    /// the resource fork, as `ditto --hfsCompression` writes); the other
    /// file systems have no compression.
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
    /// Factor on every kind's file size range (1 = the built-in ranges,
    /// which give a Windows-like 4,700 to 5,000 files per GiB used).
    #[serde(default = "one")]
    pub size_scale: f64,
    /// Wanted live files per GiB of used space. When set, generation
    /// replaces `size_scale` by the factor that gives it
    /// ([`crate::calibrate`]); the manifest records both.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub files_per_gib_used: Option<f64>,
    /// Share of new user files (outside the operating system's folders)
    /// that are mail stores (mbox, eml): their messages and attachments
    /// are most of a suite's compound items. `None`: the built-in leaf
    /// weights (6 of 91, about 0.066).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mail_share: Option<f64>,
    /// A Windows system disk: the operating system's folders (`Windows`,
    /// `System32`, `WinSxS`) and their files beside the user's, whatever
    /// the file system. Off: a data disk, stick or card.
    #[serde(default)]
    pub system_disk: bool,
    /// A removable stick or card: its own folder tree (`DCIM/100MEDIA`,
    /// `Documents`, `Archives`, `Music`, loose files in `Transfer`) and
    /// what lands in it (photos, documents, archives, some music), with no
    /// program folder, browser profile or mail. Off: a Windows user's
    /// tree.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub stick: bool,
    /// A Mac's disk: `/Users/<user>` with `Desktop`, `Documents`,
    /// `Downloads`, `Pictures`, `Music` and `Library` (`Mail` with `.emlx`
    /// messages, `Safari` with `History.db`, Safari's cache under
    /// `Caches`), programs under `Applications`, no Windows folders. Off:
    /// a Windows user's tree (or a stick's).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub mac: bool,
    /// A Linux server: its own folder tree (`home/USER` with `Documents`,
    /// `Pictures`, `Downloads` and `Maildir` (Maildir++ folders), `var/www/html`,
    /// `var/log`, `var/cache/apt/archives`, `etc`) and what lands in it
    /// (documents, mail, a web root, logs and SQLite databases). Off: a
    /// Windows user's tree.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub linux: bool,
}

/// Range of `fill` the planner supports.
pub const FILL_RANGE: (f64, f64) = (0.05, 0.95);
/// Range of `size_scale` the planner supports (and the calibration
/// searches).
pub const SIZE_SCALE_RANGE: (f64, f64) = (0.1, 10.0);

fn one() -> f64 {
    1.0
}

impl Profile {
    /// Names of the built-in profiles.
    pub const NAMES: [&'static str; 5] = [
        "workstation",
        "suspect",
        "usb-stick",
        "mac-laptop",
        "linux-server",
    ];

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
                size_scale: 1.0,
                files_per_gib_used: None,
                mail_share: None,
                system_disk: true,
                stick: false,
                mac: false,
                linux: false,
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
                size_scale: 1.0,
                files_per_gib_used: None,
                mail_share: None,
                system_disk: false,
                stick: false,
                mac: false,
                linux: false,
            }),
            // A USB stick (exFAT as sold, or FAT): photos, documents and
            // archives copied on and off, a few deleted; half full, little
            // fragmentation (files are written whole), free space mostly
            // zero (sold blank) with old files' remnants.
            "usb-stick" => Some(Profile {
                name: name.into(),
                fill: 0.55,
                deleted_share: 0.06,
                fragmented_share: 0.03,
                incompressible_share: 0.60,
                overwrite_share: 0.20,
                residue_share: 0.04,
                deleted_dirs_per_100: 0.5,
                keyword_share: 0.03,
                duplicate_share: 0.05,
                notable_share: 0.01,
                known_share: 0.01,
                random_free_share: 0.02,
                compressed_share: 0.0,
                sparse_share: 0.0,
                target_e01_ratio: None,
                size_scale: 1.0,
                files_per_gib_used: None,
                mail_share: None,
                system_disk: false,
                stick: true,
                mac: false,
                linux: false,
            }),
            // A Mac laptop's data volume (APFS by default): a user's home
            // with mail, Safari and downloads (quarantined), little
            // fragmentation (APFS allocates whole extents), free space
            // mostly zero (TRIM on flash), a tenth deleted.
            "mac-laptop" => Some(Profile {
                name: name.into(),
                fill: 0.60,
                deleted_share: 0.10,
                fragmented_share: 0.04,
                incompressible_share: 0.45,
                overwrite_share: 0.25,
                residue_share: 0.05,
                deleted_dirs_per_100: 1.0,
                keyword_share: 0.04,
                duplicate_share: 0.03,
                notable_share: 0.01,
                known_share: 0.02,
                random_free_share: 0.02,
                compressed_share: 0.25,
                sparse_share: 0.0,
                target_e01_ratio: None,
                size_scale: 1.0,
                files_per_gib_used: None,
                mail_share: None,
                system_disk: false,
                stick: false,
                mac: true,
                linux: false,
            }),
            // A Linux server (ext4 as its installer formats it): users'
            // documents and mail, a web root, logs and databases, a
            // package cache; some deleted, little fragmentation, free
            // space mostly zero.
            "linux-server" => Some(Profile {
                name: name.into(),
                fill: 0.45,
                deleted_share: 0.08,
                fragmented_share: 0.05,
                incompressible_share: 0.40,
                overwrite_share: 0.25,
                residue_share: 0.05,
                deleted_dirs_per_100: 1.0,
                keyword_share: 0.03,
                duplicate_share: 0.05,
                notable_share: 0.01,
                known_share: 0.02,
                random_free_share: 0.02,
                compressed_share: 0.0,
                sparse_share: 0.5,
                target_e01_ratio: None,
                size_scale: 1.0,
                files_per_gib_used: None,
                mail_share: None,
                system_disk: false,
                stick: false,
                mac: false,
                linux: true,
            }),
            _ => None,
        }
    }

    /// Refuse knobs no disk can have, naming the knob.
    pub fn check(&self) -> Result<(), CorpusError> {
        let shares = [
            ("deleted_share", self.deleted_share),
            ("fragmented_share", self.fragmented_share),
            ("incompressible_share", self.incompressible_share),
            ("overwrite_share", self.overwrite_share),
            ("residue_share", self.residue_share),
            ("keyword_share", self.keyword_share),
            ("duplicate_share", self.duplicate_share),
            ("notable_share", self.notable_share),
            ("known_share", self.known_share),
            ("random_free_share", self.random_free_share),
            ("compressed_share", self.compressed_share),
            ("sparse_share", self.sparse_share),
        ];
        for (name, v) in shares {
            if !(0.0..=1.0).contains(&v) {
                return Err(CorpusError::Invalid(format!(
                    "{name} must be between 0 and 1, got {v}"
                )));
            }
        }
        let (lo, hi) = FILL_RANGE;
        if !(lo..=hi).contains(&self.fill) {
            return Err(CorpusError::Invalid(format!(
                "fill must be between {lo} and {hi}, got {}",
                self.fill
            )));
        }
        let (lo, hi) = SIZE_SCALE_RANGE;
        if !(lo..=hi).contains(&self.size_scale) {
            return Err(CorpusError::Invalid(format!(
                "the size scale must be between {lo} and {hi}, got {}",
                self.size_scale
            )));
        }
        if let Some(m) = self.mail_share
            && !(0.0..0.9).contains(&m)
        {
            return Err(CorpusError::Invalid(format!(
                "the mail share must be at least 0 and below 0.9 (other user files must remain), got {m}"
            )));
        }
        if let Some(f) = self.files_per_gib_used
            && !(f.is_finite() && f > 0.0)
        {
            return Err(CorpusError::Invalid(format!(
                "files per GiB used must be a positive number, got {f}"
            )));
        }
        Ok(())
    }
}
