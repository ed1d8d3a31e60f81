//! Read-only parsers for volume systems (MBR with extended partitions, GPT)
//! and file systems (FAT12/16/32, exFAT, NTFS, ext2/3/4 and APFS; others
//! are detected and reported), over a positioned-read trait.
//!
//! Everything reads through [`ReadAt`]; nothing opens files or knows about
//! stages, channels or databases. The typical flow:
//!
//! ```no_run
//! use std::ops::ControlFlow;
//! use caseload_fs::{open_filesystem, open_volume_system, FileSystem};
//!
//! # fn main() -> Result<(), caseload_fs::FsError> {
//! let disk = std::fs::File::open("disk.dd").expect("open");
//! let vs = open_volume_system(&disk)?;
//! for part in &vs.partitions {
//!     match open_filesystem(&disk, part.offset, part.length)? {
//!         FileSystem::Unsupported(kind) => println!("{kind}: not parsed"),
//!         fs => {
//!             fs.walk(|rec| {
//!                 println!("{} {}", rec.meta, rec.display_path());
//!                 ControlFlow::Continue(())
//!             })?;
//!         }
//!     }
//! }
//! # Ok(())
//! # }
//! ```
//!
//! Bad input never panics: fatal problems are [`FsError`]s, everything else
//! is a [`ProcessingError`] recorded on the file record, partition or walk
//! summary it concerns, and the rest of the work continues. Memory is
//! bounded by the depth of the directory tree (one directory chunk or index
//! node per level) and fixed-size caches, not by the size of the file
//! system.
//!
//! # Matching The Sleuth Kit
//!
//! Records follow TSK's model so a bodyfile built from them compares with
//! `fls -m`: paths as `fls -r -p` prints them ([`FileRecord::path`]), TSK
//! inode numbers (FAT and exFAT: from the entry's position; NTFS:
//! `record-type-id`; ext: the inode number, `$OrphanFiles` after the last;
//! APFS: the object id, as `fls -P apfs -B <block>` gives it),
//! FAT `(Volume Label Entry)` names and `$MBR`/`$FATn`/`$OrphanFiles`
//! virtual files, NTFS streams as `file:stream`, deleted FAT files
//! recovered as TSK does, NTFS streams read as zeros past their valid-data
//! (initialized) size, and `$BadClus:$Bad` given no content (its size is the
//! volume's; TSK's `icat` prints nothing for it either, and hashing it would
//! mean hashing a volume of zeros). Where this crate deliberately differs:
//!
//! - names are kept verbatim (TSK replaces control characters with `^`;
//!   FAT short-name bytes above 0x7F are decoded as code page 437, TSK shows
//!   `^`);
//! - a live FAT entry that fails one of TSK's validity tests (start cluster
//!   or size out of range, bad 8.3 characters) is reported with an error
//!   instead of dropped; live long names whose checksum does not match their
//!   short entry are reported and not used (TSK does not check);
//! - an NTFS timestamp of 0 is absent (TSK prints 3373865674);
//! - deleted NTFS records come after the directory tree, found by reading
//!   the whole MFT, rather than interleaved with it; names left in the slack
//!   of index nodes are not listed (their records are, through the MFT);
//! - FAT orphans (deleted entries in clusters no directory reaches) are not
//!   searched for: `$OrphanFiles` is empty on FAT;
//! - NTFS encrypted (EFS) streams are reported as [`Content::Encoded`],
//!   not decoded (compressed ones are decoded, as by TSK);
//! - exFAT: see the [`exfat`] module for its own list (UTC offsets applied,
//!   zeros past `ValidDataLength`, checksums checked).
//! - ext2/3/4: see the [`ext`] module (names in directory slack and
//!   orphan inodes found as TSK finds them; a fast symlink's content is its
//!   target, not zeros; htree index blocks are not read as names; sparse
//!   files larger than the volume are read whole; checksums checked; the
//!   journal is not replayed). Record [`FileRecord::attributes`] and
//!   [`FileRecord::owner`] hold the inode's mode ([`ext::mode_type`] gives
//!   its type: symlinks, devices, FIFOs and sockets are
//!   [`FileKind::File`]; a bodyfile shows their type from the mode).
//! - APFS: see the [`apfs`] module (one record set per container: a
//!   single volume's paths are `fls`'s, several volumes' go under
//!   `$Volume<i>`; encrypted volumes listed and not walked; holes read as
//!   zeros where TSK 4.11's `icat` leaves them out; compressed files
//!   decoded as TSK decodes them, their size the uncompressed one;
//!   checksums checked).
//! - Permissions and owners ([`Owner`]) follow TSK's rules per file
//!   system, except NTFS's owner id from a short (NTFS 1.2)
//!   `$STANDARD_INFORMATION`: TSK reads it past the attribute's end,
//!   this crate gives 0.

pub mod apfs;
mod bitmap;
mod bytes;
mod cache;
pub mod calendar;
mod clusters;
pub mod content;
pub mod detect;
pub mod error;
pub mod exfat;
pub mod ext;
pub mod fat;
pub mod kind;
pub mod lznt1;
pub mod name;
pub mod ntfs;
pub mod read;
pub mod record;
pub mod volume;
pub mod walk;

use std::ops::ControlFlow;

pub use apfs::ApfsFs;
pub use content::ContentReader;
pub use detect::{FsKind, detect_filesystem};
pub use error::{ErrorKind, ErrorLog, FsError, ProcessingError};
pub use exfat::ExfatFs;
pub use ext::ExtFs;
pub use fat::FatFs;
pub use ntfs::{NtfsFs, NtfsInfo};
pub use read::{ReadAt, Window, read_exact_at, read_full};
pub use record::{
    Content, Encoding, Extent, FileKind, FileRecord, ForkCodec, MetaAddr, Owner, Recovery, Run,
    TimeBase, Times, Timestamp,
};
pub use volume::{Partition, PartitionType, Scheme, TableEntry, VolumeSystem, open_volume_system};
pub use walk::WalkSummary;

/// An opened file system, or the kind of one this crate does not parse.
pub enum FileSystem<R> {
    /// FAT12, FAT16 or FAT32.
    Fat(FatFs<R>),
    /// NTFS.
    Ntfs(NtfsFs<R>),
    /// exFAT.
    ExFat(ExfatFs<R>),
    /// ext2, ext3 or ext4 ([`FileSystem::kind`] tells which).
    Ext(ExtFs<R>),
    /// An APFS container, every unencrypted volume of it.
    Apfs(ApfsFs<R>),
    /// Detected (or not recognised at all: [`FsKind::Unknown`]) but not
    /// parsed; stages that need no file system can still run over the bytes.
    Unsupported(FsKind),
}

impl<R: ReadAt> FileSystem<R> {
    /// The kind of file system.
    pub fn kind(&self) -> FsKind {
        match self {
            FileSystem::Fat(f) => f.kind(),
            FileSystem::Ntfs(_) => FsKind::Ntfs,
            FileSystem::ExFat(_) => FsKind::ExFat,
            FileSystem::Ext(e) => e.kind(),
            FileSystem::Apfs(_) => FsKind::Apfs,
            FileSystem::Unsupported(k) => *k,
        }
    }

    /// Walks the file system, calling `visit` once per record; see
    /// [`FatFs::walk`], [`NtfsFs::walk`], [`ExfatFs::walk`],
    /// [`ExtFs::walk`] and [`ApfsFs::walk`]. An unsupported file system
    /// gives [`FsError::Unsupported`].
    pub fn walk<F>(&self, visit: F) -> Result<WalkSummary, FsError>
    where
        F: FnMut(FileRecord) -> ControlFlow<()>,
    {
        match self {
            FileSystem::Fat(f) => f.walk(visit),
            FileSystem::Ntfs(n) => n.walk(visit),
            FileSystem::ExFat(x) => x.walk(visit),
            FileSystem::Ext(e) => e.walk(visit),
            FileSystem::Apfs(a) => a.walk(visit),
            FileSystem::Unsupported(k) => Err(FsError::Unsupported(*k)),
        }
    }

    /// Calls `f` with each run of unallocated clusters as absolute extents.
    pub fn unallocated_runs(&self, f: impl FnMut(Extent)) -> Result<(), FsError> {
        match self {
            FileSystem::Fat(fs) => fs.unallocated_runs(f),
            FileSystem::Ntfs(fs) => fs.unallocated_runs(f),
            FileSystem::ExFat(fs) => fs.unallocated_runs(f),
            FileSystem::Ext(fs) => fs.unallocated_runs(f),
            FileSystem::Apfs(fs) => fs.unallocated_runs(f),
            FileSystem::Unsupported(k) => Err(FsError::Unsupported(*k)),
        }
    }

    /// Bytes per allocation unit (cluster), for parsed file systems.
    pub fn cluster_size(&self) -> Option<u64> {
        match self {
            FileSystem::Fat(f) => Some(f.boot_sector().cluster_size()),
            FileSystem::Ntfs(n) => Some(n.info().cluster_size),
            FileSystem::ExFat(x) => Some(x.boot_sector().cluster_size()),
            FileSystem::Ext(e) => Some(e.block_size()),
            FileSystem::Apfs(a) => Some(a.block_size()),
            FileSystem::Unsupported(_) => None,
        }
    }

    /// Problems found when opening the file system.
    pub fn open_errors(&self) -> &[ProcessingError] {
        match self {
            FileSystem::Fat(f) => f.open_errors(),
            FileSystem::Ntfs(n) => n.open_errors(),
            FileSystem::ExFat(x) => x.open_errors(),
            FileSystem::Ext(e) => e.open_errors(),
            FileSystem::Apfs(a) => a.open_errors(),
            FileSystem::Unsupported(_) => &[],
        }
    }
}

/// Detects and opens the file system at byte `offset` of `src` in a volume
/// of `len` bytes. File systems this crate does not parse come back as
/// [`FileSystem::Unsupported`]; only I/O errors and a boot sector or
/// superblock that detection accepted but opening then rejects (an APFS
/// container with no valid checkpoint) are errors.
pub fn open_filesystem<R: ReadAt>(src: R, offset: u64, len: u64) -> Result<FileSystem<R>, FsError> {
    let kind = detect_filesystem(&src, offset, len)?;
    Ok(match kind {
        FsKind::Fat12 | FsKind::Fat16 | FsKind::Fat32 => {
            FileSystem::Fat(FatFs::open(src, offset, len)?)
        }
        FsKind::Ntfs => FileSystem::Ntfs(NtfsFs::open(src, offset, len)?),
        FsKind::ExFat => FileSystem::ExFat(ExfatFs::open(src, offset, len)?),
        FsKind::Ext2 | FsKind::Ext3 | FsKind::Ext4 => {
            FileSystem::Ext(ExtFs::open(src, offset, len)?)
        }
        FsKind::Apfs => FileSystem::Apfs(ApfsFs::open(src, offset, len)?),
        other => FileSystem::Unsupported(other),
    })
}
