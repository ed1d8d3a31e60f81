//! The kinds of file system there are, parsed or only recognised: what
//! detection finds and what errors name. Apart from detection so that the
//! parsers and errors that name a kind do not depend on detecting it.

use std::fmt;

/// A file system kind as detected from its superblock or boot sector.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FsKind {
    /// FAT12 (parsed).
    Fat12,
    /// FAT16 (parsed).
    Fat16,
    /// FAT32 (parsed).
    Fat32,
    /// NTFS (parsed).
    Ntfs,
    /// exFAT (parsed).
    ExFat,
    /// ext2 (parsed).
    Ext2,
    /// ext3: ext with a journal (parsed).
    Ext3,
    /// ext4: ext with extents or other ext4-only features (parsed).
    Ext4,
    /// HFS+ or HFSX (reported, not parsed).
    HfsPlus,
    /// APFS container (parsed: every unencrypted volume).
    Apfs,
    /// ISO 9660 (reported, not parsed).
    Iso9660,
    /// XFS (reported, not parsed).
    Xfs,
    /// Btrfs (reported, not parsed).
    Btrfs,
    /// ReFS (reported, not parsed).
    ReFs,
    /// A LUKS encrypted container (reported, not parsed).
    Luks,
    /// A BitLocker encrypted volume (reported, not parsed).
    BitLocker,
    /// Nothing recognised.
    Unknown,
}

impl FsKind {
    /// The kinds this crate parses.
    pub const PARSED: [FsKind; 9] = [
        FsKind::Fat12,
        FsKind::Fat16,
        FsKind::Fat32,
        FsKind::Ntfs,
        FsKind::ExFat,
        FsKind::Ext2,
        FsKind::Ext3,
        FsKind::Ext4,
        FsKind::Apfs,
    ];

    /// Whether this crate parses file systems of this kind.
    pub fn is_parsed(self) -> bool {
        Self::PARSED.contains(&self)
    }

    /// The parsed kind [`FsKind::name`] names.
    pub fn parsed_by_name(name: &str) -> Option<FsKind> {
        Self::PARSED.into_iter().find(|k| k.name() == name)
    }

    /// Short name, as TSK's `fsstat` spells the common ones.
    pub fn name(self) -> &'static str {
        match self {
            FsKind::Fat12 => "FAT12",
            FsKind::Fat16 => "FAT16",
            FsKind::Fat32 => "FAT32",
            FsKind::Ntfs => "NTFS",
            FsKind::ExFat => "exFAT",
            FsKind::Ext2 => "Ext2",
            FsKind::Ext3 => "Ext3",
            FsKind::Ext4 => "Ext4",
            FsKind::HfsPlus => "HFS+",
            FsKind::Apfs => "APFS",
            FsKind::Iso9660 => "ISO9660",
            FsKind::Xfs => "XFS",
            FsKind::Btrfs => "Btrfs",
            FsKind::ReFs => "ReFS",
            FsKind::Luks => "LUKS",
            FsKind::BitLocker => "BitLocker",
            FsKind::Unknown => "unknown",
        }
    }
}

impl fmt::Display for FsKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
