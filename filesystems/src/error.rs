//! Errors: fatal ones ([`FsError`]) stop an operation; recorded ones
//! ([`ProcessingError`]) are attached to a file record, a partition or a walk
//! summary while the rest of the work carries on.

use std::fmt;
use std::io;

use crate::kind::FsKind;

/// An error that stops the operation that returned it.
#[derive(Debug, thiserror::Error)]
pub enum FsError {
    /// The source could not be read.
    #[error("read of {len} bytes at offset {offset} failed: {source}")]
    Io {
        /// Absolute offset of the failed read.
        offset: u64,
        /// Length asked for.
        len: usize,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// The bytes are not the structure the caller asked for.
    #[error("not a valid {structure}: {reason}")]
    NotRecognised {
        /// What was expected (e.g. "FAT boot sector").
        structure: &'static str,
        /// Why it was rejected.
        reason: String,
    },
    /// A file system was detected that this crate reports but does not parse.
    #[error("{0} file system detected; it is reported but not parsed")]
    Unsupported(FsKind),
}

impl FsError {
    pub(crate) fn io(offset: u64, len: usize, source: io::Error) -> Self {
        FsError::Io {
            offset,
            len,
            source,
        }
    }

    pub(crate) fn not(structure: &'static str, reason: impl Into<String>) -> Self {
        FsError::NotRecognised {
            structure,
            reason: reason.into(),
        }
    }
}

/// What went wrong, for a [`ProcessingError`] recorded against an item.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The source could not be read at some offset.
    Io,
    /// A partition entry lies partly or wholly outside the disk.
    PartitionOutsideDisk,
    /// A partition entry overlaps another or its table, or is otherwise invalid.
    PartitionInvalid,
    /// The extended-partition chain revisits a table (a loop) or is too long.
    ExtendedPartitionLoop,
    /// A GPT header or entry array failed its CRC or sanity checks.
    GptCorrupt,
    /// A FAT cluster chain loops back on itself.
    ChainLoop,
    /// A FAT cluster chain points outside the cluster range.
    ChainOutOfRange,
    /// A FAT cluster chain of an allocated file reaches a free or bad cluster.
    ChainBroken,
    /// A cluster chain ends before the size recorded for the file.
    ChainTooShort,
    /// A directory contains itself (directly or through a descendant), or is
    /// reached twice.
    DirectoryLoop,
    /// The directory tree is deeper, or directories are more numerous, than
    /// the walk allows.
    WalkLimit,
    /// A size field is larger than the volume could hold.
    AbsurdSize,
    /// A long-file-name sequence is broken: checksum mismatch, orphan pieces,
    /// bad ordinals.
    LongName,
    /// A name is hostile or unusual (`..`, `/`, NUL, control characters,
    /// very long); it is kept verbatim and must be escaped before display.
    HostileName,
    /// A name could not be decoded exactly (invalid UTF-16).
    NameEncoding,
    /// An NTFS MFT record is corrupt (signature, fixups, header sizes).
    CorruptRecord,
    /// An NTFS attribute is corrupt (lengths, offsets, run lists).
    CorruptAttribute,
    /// An NTFS index (directory) is corrupt.
    CorruptIndex,
    /// Content is stored in a form this crate does not decode (EFS
    /// encryption, NTFS compression with an unusual unit size).
    ContentEncoded,
    /// A deleted file's content could not be recovered, or only partly.
    Recovery,
    /// A structure of the file system itself (boot sector, FAT) is damaged.
    CorruptFileSystem,
    /// A stored checksum does not match the bytes it covers (exFAT boot
    /// region, directory entry set, name hash, up-case table, APFS
    /// objects' Fletcher-64).
    ChecksumMismatch,
    /// A volume is encrypted: it is listed, not walked (APFS).
    EncryptedVolume,
    /// A volume has snapshots; only its live state is walked (a note
    /// naming them, APFS).
    Snapshot,
}

/// A problem recorded against one item (a file record, a partition, a walk)
/// while processing continued.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessingError {
    /// The category.
    pub kind: ErrorKind,
    /// A human-readable account naming the values involved.
    pub detail: String,
    /// Absolute byte offset on the source of the structure involved, if one
    /// applies.
    pub offset: Option<u64>,
}

impl ProcessingError {
    pub(crate) fn new(kind: ErrorKind, detail: impl Into<String>) -> Self {
        Self {
            kind,
            detail: detail.into(),
            offset: None,
        }
    }

    pub(crate) fn at(kind: ErrorKind, offset: u64, detail: impl Into<String>) -> Self {
        Self {
            kind,
            detail: detail.into(),
            offset: Some(offset),
        }
    }
}

impl fmt::Display for ProcessingError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.offset {
            Some(o) => write!(f, "{:?} at offset {o}: {}", self.kind, self.detail),
            None => write!(f, "{:?}: {}", self.kind, self.detail),
        }
    }
}

/// Bounded list of errors: keeps the first `cap` and counts the rest, so a
/// file system with millions of corrupt entries cannot grow memory without
/// bound.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ErrorLog {
    /// The errors kept, in the order they were met.
    pub errors: Vec<ProcessingError>,
    /// How many further errors were dropped once the cap was reached.
    pub dropped: u64,
}

impl ErrorLog {
    /// How many errors are kept before further ones are only counted.
    pub const CAP: usize = 10_000;

    pub(crate) fn push(&mut self, e: ProcessingError) {
        if self.errors.len() < Self::CAP {
            self.errors.push(e);
        } else {
            self.dropped += 1;
        }
    }

    /// Total errors met, kept or dropped.
    pub fn total(&self) -> u64 {
        self.errors.len() as u64 + self.dropped
    }

    /// Whether any error was met.
    pub fn is_empty(&self) -> bool {
        self.errors.is_empty() && self.dropped == 0
    }
}
